/* keyed.h — --ci's fills: bytes that are a function of the allocation, not
 * of the heap's random stream, so that two replicas can be made to disagree
 * on every bit of memory nobody wrote (docs/CI.md).
 *
 * Design:
 * - Every allocation of a thread has a number N (0, 1, ...; thread-local, no
 *   atomic), counted at every malloc, calloc, realloc to a non-zero size,
 *   memalign and relatives: so the count never depends on placement. A
 *   thread is known by its stream ordinal T (stream.h), a process by its key
 *   P: its pid when DIEHARD_PIDKEY=1 says replicas have pid namespaces of
 *   their own (pids then agree across replicas), else 0.
 * - pattern:F fills byte i of allocation (P, T, N) with byte i % 8 of
 *   mix(base ^ i / 8), base = mix(F, P, T, N); inverse:F writes exactly the
 *   complement; zero writes zeros. A byte's value never depends on the
 *   object's slot size or address.
 * - DIEHARD_FLIP=P/T/lo-hi[/blo-bhi] inverts the fill of allocations
 *   lo <= N < hi of thread T in process P (either may be *), over object
 *   bytes blo <= i < bhi: the origin search's probe.
 * - DIEHARD_TRACE=FILE collects, one write(2) per line, what the supervisor
 *   needs: the processes (P lines), each thread's final count (N lines), the
 *   stack of allocation DIEHARD_TRACE_AT=P/T/N (A, F..., E) and of bad frees
 *   (B, F..., E; the first 16 per process). Frames are raw: return address,
 *   module base and path; the supervisor symbolizes them.
 * Off (one predictable branch) unless DIEHARD_FILL names a keyed mode or
 * DIEHARD_TRACE is set. */
#ifndef DIEHARD_KEYED_H
#define DIEHARD_KEYED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fill_mode { FILL_NONE, FILL_RANDOM, FILL_PATTERN, FILL_INVERSE, FILL_ZERO };

#define KEYED_ANY UINT64_MAX

struct flip {
	bool on;
	uint64_t pkey, thread;  /* KEYED_ANY: any */
	uint64_t lo, hi;        /* allocation numbers [lo, hi) */
	uint64_t blo, bhi;      /* object bytes [blo, bhi) */
};

struct keyed_at {
	bool on;
	uint64_t pkey, thread, n;
};

/* Parsers (config.c uses them; unit-tested): false on a malformed value,
 * leaving the output untouched. */
bool keyed_parse_fill(const char *s, enum fill_mode *mode, uint64_t *seed);
bool keyed_parse_flip(const char *s, struct flip *f);
bool keyed_parse_at(const char *s, struct keyed_at *a);

/* Byte i of the fill of allocation (pkey, thread, n) under mode and seed,
 * flips not applied: for the unit tests. */
void keyed_fill_bytes(enum fill_mode mode, uint64_t seed, uint64_t pkey, uint64_t thread, uint64_t n,
		      unsigned char *p, size_t from, size_t to);

/* Whether flip f inverts allocation (pkey, thread, n), and the byte range
 * it inverts there. */
bool keyed_flips(const struct flip *f, uint64_t pkey, uint64_t thread, uint64_t n);

/* Set at start-up from the configuration: anything to do at all. */
extern bool keyed_on;

/* Start-up (lifecycle.c), after the heap exists; may not allocate. */
void keyed_start(void);
/* In a fork child: its process key and trace line. */
void keyed_fork_child(void);

/* An allocation of usable bytes at p just happened (p not NULL): number it,
 * fill [from, usable) unless zeroed, trace it if asked. size is what was
 * asked for, fn the entry point's name. */
void keyed_allocated(void *p, size_t size, size_t usable, size_t from, bool zeroed, const char *fn);

/* Whether frees must be checked at once (a bad free's stack is traced). */
bool keyed_check_frees(void);
/* A bad free of p (double: true for a double free). */
void keyed_bad_free(const void *p, bool dbl);

/* Thread exit and process exit: the thread's final count. */
void keyed_thread_exit(void);

#endif
