/* trace.c — see trace.h. Lines, one record each:
 *   P <pkey> <pid> <exe>            a process started its allocator
 *   N <pkey> <thread> <count>       a thread's final allocation count
 *   A <pkey> <thread> <n> <size> <usable> <fn>   the traced allocation, then
 *   F <addr hex> <base hex> <module>               its frames, innermost first
 *   E                                              and the end of the stack
 *   B double|invalid <ptr hex>      a bad free, then its F lines and E
 * Numbers are decimal but for the hex ones. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACE_MAX_BYTES ((size_t)16 << 20)

static bool number(const char **p, int base, uint64_t *out)
{
	const char *s = *p;
	while (*s == ' ')
		s++;
	if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno != 0 || end == s || (*end != ' ' && *end != '\0'))
		return false;
	*out = v;
	*p = end;
	return true;
}

static const char *word(const char *p)
{
	while (*p == ' ')
		p++;
	return p;
}

static struct trace_stream *stream(struct trace *t, uint64_t pkey, uint64_t thread)
{
	for (size_t i = 0; i < t->nstreams; i++)
		if (t->streams[i].pkey == pkey && t->streams[i].thread == thread)
			return &t->streams[i];
	if (t->nstreams == TRACE_MAX_STREAMS)
		return NULL;
	t->streams[t->nstreams] = (struct trace_stream){ .pkey = pkey, .thread = thread };
	return &t->streams[t->nstreams++];
}

void trace_stack_add(struct trace_stack *s, uint64_t addr, uint64_t base, const char *module)
{
	if (s->nframes == TRACE_MAX_FRAMES)
		return;
	if (s->frames == NULL && (s->frames = calloc(TRACE_MAX_FRAMES, sizeof *s->frames)) == NULL)
		return;
	s->frames[s->nframes++] = (struct frame){ .addr = addr, .base = base, .module = strdup(module) };
}

void trace_stack_free(struct trace_stack *s)
{
	if (s->frames != NULL)
		frames_free(s->frames, s->nframes);
	*s = (struct trace_stack){ 0 };
}

/* One line (NUL-terminated, no newline). open: the stack F lines go to. */
static void line(struct trace *t, const char *l, struct trace_stack **open)
{
	uint64_t a, b, c, d, e;
	const char *p = l + 1;
	if (l[0] != '\0' && l[1] != ' ' && l[1] != '\0')
		goto bad;
	switch (l[0]) {
	case 'P':
		if (!number(&p, 10, &a) || !number(&p, 10, &b))
			goto bad;
		if (t->processes++ == 0)
			snprintf(t->exe, sizeof t->exe, "%s", word(p));
		*open = NULL;
		return;
	case 'N': {
		if (!number(&p, 10, &a) || !number(&p, 10, &b) || !number(&p, 10, &c) || *p != '\0')
			goto bad;
		struct trace_stream *s = stream(t, a, b);
		if (s != NULL) {
			if (!s->counted || c > s->count)
				s->count = c;
			s->counted = true;
		}
		*open = NULL;
		return;
	}
	case 'A':
		if (!number(&p, 10, &a) || !number(&p, 10, &b) || !number(&p, 10, &c) || !number(&p, 10, &d) ||
		    !number(&p, 10, &e))
			goto bad;
		/* The last wins: a process that exec'ed under the same pid numbers
		 * its allocations again, and the later program is the one run. */
		trace_stack_free(&t->alloc.stack);
		t->alloc = (struct trace_alloc){ .found = true, .pkey = a, .thread = b, .n = c, .size = d, .usable = e };
		snprintf(t->alloc.fn, sizeof t->alloc.fn, "%s", word(p));
		*open = &t->alloc.stack;
		return;
	case 'B': {
		p = word(p);
		const char *kind = strncmp(p, "double ", 7) == 0 ? "double" : strncmp(p, "invalid ", 8) == 0 ? "invalid" : NULL;
		if (kind == NULL)
			goto bad;
		p += strlen(kind);
		if (!number(&p, 16, &a) || *p != '\0')
			goto bad;
		if (t->nbad == TRACE_MAX_BAD) {
			*open = NULL;
			return;
		}
		struct trace_bad *bf = &t->bad[t->nbad++];
		*bf = (struct trace_bad){ .ptr = a };
		snprintf(bf->kind, sizeof bf->kind, "%s", kind);
		*open = &bf->stack;
		return;
	}
	case 'F':
		if (*open == NULL || !number(&p, 16, &a) || !number(&p, 16, &b) || *word(p) == '\0')
			goto bad;
		trace_stack_add(*open, a, b, word(p));
		return;
	case 'E':
		*open = NULL;
		return;
	default:
		break;
	}
bad:
	t->skipped++;
}

void trace_parse(struct trace *t, const char *text, size_t n)
{
	memset(t, 0, sizeof *t);
	struct trace_stack *open = NULL;
	char buf[4096 + 64];
	size_t i = 0;
	while (i < n) {
		const char *nl = memchr(text + i, '\n', n - i);
		size_t len = (nl ? (size_t)(nl - text) : n) - i;
		if (len < sizeof buf && memchr(text + i, '\0', len) == NULL) {
			memcpy(buf, text + i, len);
			buf[len] = '\0';
			line(t, buf, &open);
		} else {
			t->skipped++;
		}
		i += len + 1;
	}
}

bool trace_read(struct trace *t, const char *path)
{
	memset(t, 0, sizeof *t);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	char *buf = malloc(TRACE_MAX_BYTES);
	size_t got = 0;
	while (buf != NULL && got < TRACE_MAX_BYTES) {
		ssize_t r = read(fd, buf + got, TRACE_MAX_BYTES - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (buf == NULL)
		return false;
	trace_parse(t, buf, got);
	free(buf);
	return true;
}

void trace_free(struct trace *t)
{
	trace_stack_free(&t->alloc.stack);
	for (size_t i = 0; i < t->nbad; i++)
		trace_stack_free(&t->bad[i].stack);
	t->nbad = 0;
}
