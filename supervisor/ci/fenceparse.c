/* fenceparse.c — fencelog_parse (fencelog.h): pure code. A report as the allocator writes it
 * (allocator/fence.c write_report, frames raw):
 *
 *   diehard: fence: KIND: ACCESS at offset OFF of a SIZE-byte object at 0xADDR[ (N bytes past its end)]
 *   diehard: fence: the access:
 *       #0 0xPC 0xBASE MODULE
 *   diehard: fence: allocated by thread T:
 *       #0 ...
 *   diehard: fence: freed:                    (use-after-free only)
 *       #0 ...
 *   diehard: fence: OUTCOME                   (aborting ... / going on ...)
 */
#include "fencelog.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char prefix[] = "diehard: fence: ";

static bool starts(const char *l, const char *p)
{
	return strncmp(l, p, strlen(p)) == 0;
}

/* "KIND: ACCESS at offset OFF of a SIZE-byte object at 0xADDR..." */
static bool header(const char *l, struct fence_report *r)
{
	const char *colon = strstr(l, ": ");
	if (colon == NULL || colon == l || (size_t)(colon - l) >= sizeof r->kind)
		return false;
	static const char *const kinds[] = { "overflow", "underflow", "use-after-free", "fault in a live object" };
	bool known = false;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		known |= (size_t)(colon - l) == strlen(kinds[i]) && strncmp(l, kinds[i], strlen(kinds[i])) == 0;
	if (!known)
		return false;
	char access[8];
	long long off;
	unsigned long long size, addr;
	int end = 0;
	if (sscanf(colon + 2, "%7[a-z] at offset %lld of a %llu-byte object at 0x%llx%n", access, &off, &size, &addr,
		   &end) != 4 || end == 0)
		return false;
	if (strcmp(access, "read") != 0 && strcmp(access, "write") != 0 && strcmp(access, "access") != 0)
		return false;
	memcpy(r->kind, l, (size_t)(colon - l));
	r->kind[colon - l] = '\0';
	snprintf(r->access, sizeof r->access, "%s", access);
	r->offset = off;
	r->size = size;
	r->address = addr;
	return true;
}

/* "    #I 0xPC 0xBASE MODULE" */
static bool frame(const char *l, struct trace_stack *s)
{
	unsigned i;
	unsigned long long pc, base;
	int at = 0;
	if (sscanf(l, "    #%u 0x%llx 0x%llx %n", &i, &pc, &base, &at) != 3 || at == 0 || l[at] != '/')
		return false;
	trace_stack_add(s, pc, base, l + at);
	return true;
}

void fence_report_free(struct fence_report *r)
{
	trace_stack_free(&r->access_stack);
	trace_stack_free(&r->alloc_stack);
	trace_stack_free(&r->free_stack);
}

size_t fencelog_parse(const char *text, size_t n, struct fence_report *out, size_t max, size_t *used,
		      size_t *more)
{
	size_t filled = 0;
	*used = 0;
	*more = 0;
	struct fence_report cur;
	bool open = false;
	struct trace_stack *stack = NULL;
	char line[PATH_MAX + 128];
	size_t pos = 0;
	while (pos < n) {
		const char *nl = memchr(text + pos, '\n', n - pos);
		if (nl == NULL)
			break; /* an unfinished line */
		size_t len = (size_t)(nl - (text + pos));
		size_t next = pos + len + 1;
		if (len >= sizeof line || memchr(text + pos, '\0', len) != NULL) {
			pos = next;
			continue; /* not a line of ours */
		}
		memcpy(line, text + pos, len);
		line[len] = '\0';
		pos = next;
		if (!starts(line, prefix)) {
			if (open && stack != NULL)
				(void)frame(line, stack);
			continue;
		}
		const char *l = line + strlen(prefix);
		if (!open) {
			cur = (struct fence_report){ .offset = 0 };
			if (header(l, &cur)) {
				open = true;
				stack = NULL;
			}
			continue;
		}
		unsigned long long t;
		if (strcmp(l, "the access:") == 0) {
			stack = &cur.access_stack;
		} else if (sscanf(l, "allocated by thread %llu:", &t) == 1) {
			cur.thread = t;
			stack = &cur.alloc_stack;
		} else if (strcmp(l, "freed:") == 0) {
			cur.freed = true;
			stack = &cur.free_stack;
		} else if (starts(l, "aborting") || starts(l, "going on")) {
			size_t ol = strnlen(l, sizeof cur.outcome - 1);
			memcpy(cur.outcome, l, ol);
			cur.outcome[ol] = '\0';
			if (filled < max) {
				out[filled++] = cur;
			} else {
				fence_report_free(&cur);
				(*more)++;
			}
			open = false;
			*used = pos;
		} else {
			/* Another header: the report before it was cut short. */
			fence_report_free(&cur);
			cur = (struct fence_report){ .offset = 0 };
			open = header(l, &cur);
			stack = NULL;
		}
	}
	if (open)
		fence_report_free(&cur);
	return filled;
}
