/* inject.c — fault injection (see inject.h for what and why).
 *
 * Design. Everything happens under one spinlock, taken only when injecting.
 * The allocation counter numbers malloc/calloc/realloc(NULL) calls from 0.
 * Whether allocation i is hit is a keyed hash of (seed, i, kind) against
 * the rate: the same in every process given the same seed.
 *   - trace: a table maps each live object to its number; at its free the
 *     pair (number, allocations so far) is appended to a buffer written to
 *     the file with write(2) (64 KiB at a time, and at exit). Only the
 *     process that opened the file writes (fork children do not).
 *   - dangling: the trace is read at start. For each pair (i, f) with i hit
 *     and f - DIST > i, object i is due to be freed once f - DIST
 *     allocations are done; the due lists are built by counting sort into
 *     mappings. At run time the pointer of a hit object (< 16 KiB, as in the
 *     paper) is remembered; when its time comes it is freed through the
 *     backend, and the program's own later free of that pointer is ignored
 *     (an "ignored" set). A program that frees a hit object before its time
 *     (its run differs from the trace) simply cancels the early free.
 *   - overflow: a hit request of 32 bytes or more gets BYTES fewer.
 * No allocation through malloc: tables and lists live in anonymous mappings
 * (MAP_NORESERVE, touched as used). Invariant: a pointer is in `live` iff it
 * is a traced live object (trace) or a hit object not yet freed early
 * (dangling); in `ignored` iff it was freed early and the program has not
 * freed it yet. */
#include "inject.h"
#include "spec.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

bool inject_on;

enum { MODE_TRACE = 1, MODE_DANGLING = 2, MODE_OVERFLOW = 4 };

#define TABLE_BITS 22      /* 4 Mi slots per table: 64 MiB reserved */
#define TRACE_BUF 8192     /* pairs buffered before a write */
#define SMALL_LIMIT 16384  /* dangling: only objects below this size */

struct table {
	uintptr_t *keys; /* 0: empty */
	uint64_t *vals;
};

static struct {
	atomic_flag lock;
	int mode;
	uint64_t seed, counter;
	uint64_t threshold_dangling, threshold_overflow; /* rate x 2^64, saturated */
	uint64_t dist, bytes;
	void (*free_fn)(void *);
	struct table live, ignored;
	/* trace writing */
	int fd;
	pid_t owner;
	uint64_t buf[2 * TRACE_BUF];
	size_t nbuf;
	/* dangling */
	uint64_t npairs_max_idx;  /* allocations numbered below this may be hit */
	void **ptr_of;            /* per allocation number: a hit object's pointer */
	uint64_t *due_start;      /* per time t: due_idx[due_start[t] .. due_start[t+1]) */
	uint64_t *due_idx;
	uint64_t max_time;
} inj = { .lock = ATOMIC_FLAG_INIT, .fd = -1 };

static void lock(void)
{
	while (atomic_flag_test_and_set_explicit(&inj.lock, memory_order_acquire))
		;
}

static void unlock(void)
{
	atomic_flag_clear_explicit(&inj.lock, memory_order_release);
}

static _Noreturn void die(const char *what, const char *arg)
{
	spec_die("DIEHARD_INJECT", what, arg);
}

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (p == MAP_FAILED)
		die("cannot map memory for the injector", NULL);
	return p;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Whether allocation i is hit by the injection of the given kind. */
static bool hit(uint64_t i, uint64_t salt, uint64_t threshold)
{
	if (threshold == UINT64_MAX)
		return true;
	return mix(mix(inj.seed ^ salt) ^ i) < threshold;
}

#define SALT_DANGLING 0x64616e676c696e67ULL
#define SALT_OVERFLOW 0x6f766572666c6f77ULL

/* ---- pointer tables: linear probing, backward-shift deletion ---- */

static size_t home(uintptr_t key)
{
	return (size_t)(((uint64_t)key >> 4) * 0x9e3779b97f4a7c15ULL >> (64 - TABLE_BITS));
}

static void table_init(struct table *t)
{
	t->keys = map(sizeof *t->keys << TABLE_BITS);
	t->vals = map(sizeof *t->vals << TABLE_BITS);
}

static void table_put(struct table *t, void *p, uint64_t v)
{
	size_t mask = ((size_t)1 << TABLE_BITS) - 1, i = home((uintptr_t)p);
	for (size_t n = 0; n <= mask; n++, i = (i + 1) & mask)
		if (t->keys[i] == 0 || t->keys[i] == (uintptr_t)p) {
			t->keys[i] = (uintptr_t)p;
			t->vals[i] = v;
			return;
		}
	die("too many objects tracked", NULL);
}

/* Removes p; true (and its value) if it was there. */
static bool table_take(struct table *t, void *p, uint64_t *v)
{
	size_t mask = ((size_t)1 << TABLE_BITS) - 1, i = home((uintptr_t)p);
	while (t->keys[i] != (uintptr_t)p) {
		if (t->keys[i] == 0)
			return false;
		i = (i + 1) & mask;
	}
	if (v != NULL)
		*v = t->vals[i];
	/* Shift back the entries that probed past the hole. */
	for (size_t j = (i + 1) & mask; t->keys[j] != 0; j = (j + 1) & mask) {
		size_t h = home(t->keys[j]);
		bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
		if (movable) {
			t->keys[i] = t->keys[j];
			t->vals[i] = t->vals[j];
			i = j;
		}
	}
	t->keys[i] = 0;
	return true;
}

/* ---- parsing ---- */

static uint64_t parse_u64(const char *s, const char *end, const char *what)
{
	return spec_u64("DIEHARD_INJECT", s, end, what);
}

static uint64_t parse_rate(const char *s, const char *end, const char *what)
{
	return spec_rate("DIEHARD_INJECT", s, end, what);
}

/* "A:B" -> rate A, count B */
static void parse_pair(const char *v, const char *end, const char *what, uint64_t *rate, uint64_t *count)
{
	const char *colon = memchr(v, ':', (size_t)(end - v));
	if (colon == NULL)
		die("expected RATE:NUMBER in", what);
	*rate = parse_rate(v, colon, what);
	*count = parse_u64(colon + 1, end, what);
}

/* ---- the trace ---- */

static void trace_write(void)
{
	if (inj.fd < 0 || inj.nbuf == 0)
		return;
	if (getpid() == inj.owner) {
		const char *p = (const char *)inj.buf;
		size_t left = inj.nbuf * 2 * sizeof(uint64_t);
		while (left > 0) {
			ssize_t n = write(inj.fd, p, left);
			if (n <= 0)
				die("cannot write the trace", NULL);
			p += n;
			left -= (size_t)n;
		}
	}
	inj.nbuf = 0;
}

static void trace_load(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		die("cannot read the trace", path);
	size_t n = (size_t)st.st_size / (2 * sizeof(uint64_t));
	const uint64_t *pairs = NULL;
	if (n > 0) {
		pairs = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (pairs == MAP_FAILED)
			die("cannot map the trace", path);
	}
	close(fd);
	uint64_t max_idx = 0, max_time = 0;
	for (size_t k = 0; k < n; k++) {
		if (pairs[2 * k] >= pairs[2 * k + 1])
			die("not a trace (a free before its allocation)", path);
		if (pairs[2 * k] + 1 > max_idx)
			max_idx = pairs[2 * k] + 1;
		if (pairs[2 * k + 1] > max_time)
			max_time = pairs[2 * k + 1];
	}
	inj.npairs_max_idx = max_idx;
	inj.max_time = max_time;
	inj.ptr_of = map(sizeof(void *) * (max_idx + 1));
	inj.due_start = map(sizeof(uint64_t) * (max_time + 2));
	size_t due = 0;
	for (size_t k = 0; k < n; k++) {
		uint64_t i = pairs[2 * k], f = pairs[2 * k + 1];
		if (f >= inj.dist + i + 1 && hit(i, SALT_DANGLING, inj.threshold_dangling)) {
			inj.due_start[f - inj.dist + 1]++;
			due++;
		}
	}
	for (uint64_t t = 1; t <= max_time + 1; t++)
		inj.due_start[t] += inj.due_start[t - 1];
	inj.due_idx = map(sizeof(uint64_t) * due);
	uint64_t *fill = map(sizeof(uint64_t) * (max_time + 1));
	for (size_t k = 0; k < n; k++) {
		uint64_t i = pairs[2 * k], f = pairs[2 * k + 1];
		if (f >= inj.dist + i + 1 && hit(i, SALT_DANGLING, inj.threshold_dangling)) {
			uint64_t t = f - inj.dist;
			inj.due_idx[inj.due_start[t] + fill[t]++] = i;
		}
	}
	munmap(fill, sizeof(uint64_t) * (max_time + 1));
	if (pairs != NULL)
		munmap((void *)pairs, (size_t)st.st_size);
}

void inject_start(const char *spec, void (*free_fn)(void *))
{
	const char *trace = NULL;
	size_t trace_len = 0;
	struct spec_item it;
	for (const char *at = spec; spec_next("DIEHARD_INJECT", spec, &at, &it);) {
		const char *v = it.value, *end = it.end;
		if (spec_is(&it, "trace")) {
			trace = v;
			trace_len = (size_t)(end - v);
		} else if (spec_is(&it, "dangling")) {
			parse_pair(v, end, spec, &inj.threshold_dangling, &inj.dist);
			inj.mode |= MODE_DANGLING;
		} else if (spec_is(&it, "overflow")) {
			parse_pair(v, end, spec, &inj.threshold_overflow, &inj.bytes);
			inj.mode |= MODE_OVERFLOW;
		} else if (spec_is(&it, "seed")) {
			inj.seed = parse_u64(v, end, spec);
		} else {
			die("unknown key (trace, dangling, overflow, seed)", spec);
		}
	}
	static char path[4096];
	if (trace != NULL) {
		if (trace_len == 0 || trace_len >= sizeof path)
			die("bad trace file name", spec);
		memcpy(path, trace, trace_len);
		path[trace_len] = '\0';
	}
	if ((inj.mode & MODE_DANGLING) && trace == NULL)
		die("dangling= needs the trace of the same program: trace=FILE", spec);
	if ((inj.mode & MODE_DANGLING) && (inj.mode & MODE_OVERFLOW))
		die("one kind of fault at a time", spec);
	if (inj.mode == 0 && trace == NULL)
		die("nothing to do", spec);
	inj.free_fn = free_fn;
	table_init(&inj.live);
	if (inj.mode & MODE_DANGLING) {
		table_init(&inj.ignored);
		trace_load(path);
	} else if (trace != NULL && inj.mode == 0) {
		inj.mode = MODE_TRACE;
		inj.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (inj.fd < 0)
			die("cannot create the trace", path);
		inj.owner = getpid();
	} else if (trace != NULL) {
		die("trace= goes alone (to record) or with dangling= (to replay)", spec);
	}
	inject_on = true;
}

size_t inject_request(size_t size, uint64_t *idx)
{
	lock();
	*idx = inj.counter++;
	if ((inj.mode & MODE_OVERFLOW) && size >= 32 && hit(*idx, SALT_OVERFLOW, inj.threshold_overflow))
		size = size > inj.bytes ? size - inj.bytes : 1;
	unlock();
	return size;
}

void inject_allocated(void *p, size_t size, uint64_t idx)
{
	if (!(inj.mode & (MODE_TRACE | MODE_DANGLING)))
		return;
	lock();
	if (p != NULL && (inj.mode & MODE_TRACE))
		table_put(&inj.live, p, idx);
	if (inj.mode & MODE_DANGLING) {
		if (p != NULL && idx < inj.npairs_max_idx && size < SMALL_LIMIT &&
		    hit(idx, SALT_DANGLING, inj.threshold_dangling)) {
			inj.ptr_of[idx] = p;
			table_put(&inj.live, p, idx);
		}
		/* idx + 1 allocations are done: free what is due now. */
		uint64_t t = idx + 1;
		if (t <= inj.max_time)
			for (uint64_t k = inj.due_start[t]; k < inj.due_start[t + 1]; k++) {
				void *q = inj.ptr_of[inj.due_idx[k]];
				if (q == NULL)
					continue;
				inj.ptr_of[inj.due_idx[k]] = NULL;
				table_take(&inj.live, q, NULL);
				table_put(&inj.ignored, q, 0);
				inj.free_fn(q);
			}
	}
	unlock();
}

bool inject_free(void *p)
{
	if (p == NULL || !(inj.mode & (MODE_TRACE | MODE_DANGLING)))
		return false;
	bool ignore = false;
	uint64_t idx;
	lock();
	if (inj.mode & MODE_TRACE) {
		if (table_take(&inj.live, p, &idx)) {
			inj.buf[2 * inj.nbuf] = idx;
			inj.buf[2 * inj.nbuf + 1] = inj.counter;
			if (++inj.nbuf == TRACE_BUF)
				trace_write();
		}
	} else if (table_take(&inj.ignored, p, NULL)) {
		ignore = true;
	} else if (table_take(&inj.live, p, &idx)) {
		inj.ptr_of[idx] = NULL; /* freed before its time: nothing to inject */
	}
	unlock();
	return ignore;
}

void inject_moved(void *p, void *q)
{
	if (!(inj.mode & (MODE_TRACE | MODE_DANGLING)))
		return;
	uint64_t idx;
	lock();
	if (table_take(&inj.live, p, &idx)) {
		table_put(&inj.live, q, idx);
		if (inj.mode & MODE_DANGLING)
			inj.ptr_of[idx] = q;
	}
	unlock();
}

void inject_flush(void)
{
	if (!(inj.mode & MODE_TRACE))
		return;
	lock();
	trace_write();
	unlock();
}

__attribute__((destructor)) static void inject_at_exit(void)
{
	inject_flush();
}
