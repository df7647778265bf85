/* keyed.c — see keyed.h.
 *
 * Invariants: a thread's counter only grows, by one per numbered call, and
 * is copied into a fork child with the rest of the thread's TLS; a line in
 * the trace file is one write(2) on an O_APPEND descriptor, so processes
 * sharing the file never interleave within a line. Nothing here allocates:
 * the allocator calls it from inside malloc. */
#include "keyed.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "diehard.h"
#include "msg.h"
#include "random.h"
#include "stream.h"
#include "frames.h"

bool keyed_on;

static enum fill_mode mode;
static uint64_t seed;
static uint64_t pkey;          /* this process's key */
static bool use_pid;
static struct flip flip;
static struct keyed_at at;
static bool trace_wanted;
static const char *trace_path;
static _Atomic int trace_fd = -1;
static _Atomic unsigned bad_traced;
static char exe[256];

static __thread bool tracing __attribute__((tls_model("initial-exec")));

/* ---- parsers ---- */

static bool parse_u64(const char **s, int base, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	int digits = 0;
	for (;; p++, digits++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (v > (UINT64_MAX - d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + d;
	}
	if (digits == 0)
		return false;
	*out = v;
	*s = p;
	return true;
}

/* A number or '*' (KEYED_ANY). */
static bool parse_key(const char **s, uint64_t *out)
{
	if (**s == '*') {
		(*s)++;
		*out = KEYED_ANY;
		return true;
	}
	return parse_u64(s, 10, out);
}

/* lo-hi, hi may be "inf"; lo < hi. */
static bool parse_range(const char **s, uint64_t *lo, uint64_t *hi)
{
	if (!parse_u64(s, 10, lo) || **s != '-')
		return false;
	(*s)++;
	if (strncmp(*s, "inf", 3) == 0) {
		*s += 3;
		*hi = UINT64_MAX;
	} else if (!parse_u64(s, 10, hi)) {
		return false;
	}
	return *lo < *hi;
}

bool keyed_parse_fill(const char *s, enum fill_mode *m, uint64_t *sd)
{
	if (strcmp(s, "zero") == 0) {
		*m = FILL_ZERO;
		*sd = 0;
		return true;
	}
	enum fill_mode want;
	if (strncmp(s, "pattern:", 8) == 0)
		want = FILL_PATTERN;
	else if (strncmp(s, "inverse:", 8) == 0)
		want = FILL_INVERSE;
	else
		return false;
	const char *p = s + 8;
	uint64_t v;
	if (strlen(p) > 16 || !parse_u64(&p, 16, &v) || *p != '\0')
		return false;
	*m = want;
	*sd = v;
	return true;
}

bool keyed_parse_flip(const char *s, struct flip *f)
{
	struct flip g = { .on = true, .blo = 0, .bhi = UINT64_MAX };
	const char *p = s;
	if (!parse_key(&p, &g.pkey) || *p++ != '/' || !parse_key(&p, &g.thread) || *p++ != '/' ||
	    !parse_range(&p, &g.lo, &g.hi))
		return false;
	if (*p == '/') {
		p++;
		if (!parse_range(&p, &g.blo, &g.bhi))
			return false;
	}
	if (*p != '\0')
		return false;
	*f = g;
	return true;
}

bool keyed_parse_at(const char *s, struct keyed_at *a)
{
	struct keyed_at b = { .on = true };
	const char *p = s;
	if (!parse_u64(&p, 10, &b.pkey) || *p++ != '/' || !parse_u64(&p, 10, &b.thread) || *p++ != '/' ||
	    !parse_u64(&p, 10, &b.n) || *p != '\0')
		return false;
	*a = b;
	return true;
}

/* ---- fills ---- */

static inline uint64_t mix(uint64_t x)
{
	uint64_t k = x;
	return rng_splitmix(&k);
}

static inline uint64_t word_of(uint64_t base, uint64_t j)
{
	return mix(base ^ (j * 0xd1b54a32d192ed03ULL));
}

void keyed_fill_bytes(enum fill_mode m, uint64_t sd, uint64_t pk, uint64_t thread, uint64_t n, unsigned char *p,
		      size_t from, size_t to)
{
	if (from >= to)
		return;
	if (m == FILL_ZERO) {
		memset(p + from, 0, to - from);
		return;
	}
	uint64_t base = mix(mix(mix(sd) ^ pk) ^ thread * 0x9e3779b97f4a7c15ULL) ^ mix(n);
	uint64_t inv = m == FILL_INVERSE ? ~(uint64_t)0 : 0;
	size_t i = from;
	/* Up to a word boundary, then words, then the tail. */
	while (i < to && (i & 7) != 0) {
		p[i] = (unsigned char)((word_of(base, i / 8) ^ inv) >> (8 * (i & 7)));
		i++;
	}
	for (; i + 8 <= to; i += 8) {
		uint64_t w = word_of(base, i / 8) ^ inv;
		__builtin_memcpy(p + i, &w, 8); /* little-endian: byte i%8 is bits 8(i%8).. */
	}
	for (; i < to; i++)
		p[i] = (unsigned char)((word_of(base, i / 8) ^ inv) >> (8 * (i & 7)));
}

static bool match(uint64_t want, uint64_t got)
{
	return want == KEYED_ANY || want == got;
}

bool keyed_flips(const struct flip *f, uint64_t pk, uint64_t thread, uint64_t n)
{
	return f->on && match(f->pkey, pk) && match(f->thread, thread) && n >= f->lo && n < f->hi;
}

/* ---- the trace file ---- */

static dev_t trace_dev;
static ino_t trace_ino;

/* Whether fd is still our trace file: a program may close every fd and
 * reuse the number for a file of its own, which we must never write. */
static bool still_ours(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino;
}

static int trace_open(void)
{
	int fd = atomic_load_explicit(&trace_fd, memory_order_acquire);
	if (fd >= 0 && still_ours(fd))
		return fd;
	if (fd >= 0) /* the number is someone else's now: open again */
		atomic_compare_exchange_strong(&trace_fd, &fd, -1);
	if (!trace_wanted)
		return -1;
	fd = open(trace_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		trace_wanted = false;
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: cannot open DIEHARD_TRACE ");
		msg_str(&m, trace_path);
		msg_send(&m);
		return -1;
	}
	/* High, out of the program's way (it may dup2 onto low fds). */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	trace_dev = st.st_dev;
	trace_ino = st.st_ino;
	int expected = -1;
	if (!atomic_compare_exchange_strong(&trace_fd, &expected, fd)) {
		close(fd);
		fd = expected;
	}
	return fd;
}

static void trace_line(struct msg *m)
{
	int fd = trace_open();
	if (fd >= 0)
		msg_send_to(m, fd);
}

static void trace_process(void)
{
	if (!trace_wanted)
		return;
	struct msg m = { .len = 0 };
	msg_str(&m, "P ");
	msg_u64(&m, pkey);
	msg_str(&m, " ");
	msg_u64(&m, (uint64_t)getpid());
	msg_str(&m, " ");
	msg_str(&m, exe);
	trace_line(&m);
}

/* The F lines of the calling stack, the allocator's own frames left out,
 * then E. */
static void trace_stack(void)
{
	uintptr_t pcs[40];
	unsigned n = frames_capture(pcs, 40), written = 0;
	for (unsigned i = 0; i < n && written < 32; i++) {
		Dl_info info;
		if (dladdr((void *)(pcs[i] - 1), &info) == 0 || info.dli_fbase == NULL || frames_own(pcs[i]))
			continue;
		const char *path = info.dli_fname;
		if (path == NULL || path[0] != '/')
			path = exe;
		struct msg m = { .len = 0 };
		msg_str(&m, "F ");
		msg_hex(&m, pcs[i], 16);
		msg_str(&m, " ");
		msg_hex(&m, (uint64_t)(uintptr_t)info.dli_fbase, 16);
		msg_str(&m, " ");
		msg_str(&m, path);
		trace_line(&m);
		written++;
	}
	struct msg e = { .len = 0 };
	msg_str(&e, "E");
	trace_line(&e);
}

/* ---- life ---- */

static void set_pkey(void)
{
	pkey = use_pid ? (uint64_t)getpid() : 0;
}

void keyed_start(void)
{
	const struct config *c = &diehard.cfg;
	mode = c->fill_mode;
	seed = c->fill_seed;
	flip = c->flip;
	at = c->trace_at;
	trace_path = config_getenv("DIEHARD_TRACE");
	trace_wanted = trace_path != NULL && trace_path[0] != '\0';
	const char *pk = config_getenv("DIEHARD_PIDKEY");
	use_pid = pk != NULL && strcmp(pk, "1") == 0;
	keyed_on = mode >= FILL_PATTERN || trace_wanted;
	if (!keyed_on)
		return;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	set_pkey();
	trace_process();
}

void keyed_fork_child(void)
{
	if (!keyed_on)
		return;
	set_pkey();
	atomic_store(&bad_traced, 0);
	trace_process();
}

void keyed_allocated(void *p, size_t size, size_t usable, size_t from, bool zeroed, const char *fn)
{
	struct stream *st = &stream_self;
	if (__builtin_expect(!st->ready, 0))
		(void)stream_get();
	uint64_t n = st->nalloc++;
	uint64_t thread = st->ordinal;
	if (mode >= FILL_PATTERN && !zeroed) {
		keyed_fill_bytes(mode, seed, pkey, thread, n, p, from, usable);
		if (keyed_flips(&flip, pkey, thread, n)) {
			unsigned char *b = p;
			size_t lo = flip.blo > from ? (size_t)flip.blo : from;
			size_t hi = flip.bhi < usable ? (size_t)flip.bhi : usable;
			for (size_t i = lo; i < hi; i++)
				b[i] ^= 0xff;
		}
	}
	if (__builtin_expect(at.on, 0) && at.n == n && at.thread == thread && at.pkey == pkey && !tracing) {
		tracing = true;
		struct msg m = { .len = 0 };
		msg_str(&m, "A ");
		msg_u64(&m, pkey);
		msg_str(&m, " ");
		msg_u64(&m, thread);
		msg_str(&m, " ");
		msg_u64(&m, n);
		msg_str(&m, " ");
		msg_u64(&m, size);
		msg_str(&m, " ");
		msg_u64(&m, usable);
		msg_str(&m, " ");
		msg_str(&m, fn);
		trace_line(&m);
		trace_stack();
		tracing = false;
	}
}

bool keyed_check_frees(void)
{
	return trace_wanted;
}

void keyed_bad_free(const void *p, bool dbl)
{
	if (tracing || atomic_fetch_add(&bad_traced, 1) >= 16)
		return;
	tracing = true;
	struct msg m = { .len = 0 };
	msg_str(&m, dbl ? "B double " : "B invalid ");
	msg_hex(&m, (uint64_t)(uintptr_t)p, 16);
	trace_line(&m);
	trace_stack();
	tracing = false;
}

void keyed_thread_exit(void)
{
	if (!trace_wanted || !stream_self.ready)
		return;
	struct msg m = { .len = 0 };
	msg_str(&m, "N ");
	msg_u64(&m, pkey);
	msg_str(&m, " ");
	msg_u64(&m, stream_self.ordinal);
	msg_str(&m, " ");
	msg_u64(&m, stream_self.nalloc);
	trace_line(&m);
}
