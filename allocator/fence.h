/* fence.h — Kefence's fence mode (../shared/papers/004_*): chosen objects
 * each on pages of their own, against a guard page, with a report on every
 * violation.
 *
 * Design:
 * - DIEHARD_FENCE=all | 1/N [:MIN-MAX] fences every allocation, or one in N
 *   (a per-thread countdown, each gap uniform in [1, 2N - 1] from the
 *   thread's seeded stream), of MIN to MAX bytes. Others go to the
 *   randomized heap as usual, through malloc's inline path.
 * - One reservation (the fence region) of PROT_NONE pages. An object gets
 *   the pages it needs, with an inaccessible page on each side, bump-allocated
 *   in address order; a side is drawn per object: against the page after it
 *   (its end at the end of its last page, rounded to its alignment: the
 *   overflow side) or against the page before it (its start at its first
 *   page: the underflow side). Running off the guarded end faults at once.
 * - A freed object's pages are replaced by a fresh inaccessible mapping
 *   (memory released, contents gone) and its record kept in a FIFO
 *   quarantine (FENCE_QUARANTINE objects): a stale access faults and is
 *   reported with the free's stack. The oldest are then retired (record
 *   dropped; pages reused once the bump pointer wraps round the region).
 * - Metadata lives outside the region, in mappings of its own: a page map
 *   (page -> record, 0 for guards and free pages) and the records (object,
 *   size, side, raw return addresses of its allocation and its free). A
 *   fault is attributed without a lock: a freed record is only reused after
 *   retirement, long after.
 * - The SIGSEGV handler (segv.h) hands faults in the region to
 *   fence_fault, which reports them: kind (overflow, underflow,
 *   use-after-free), read or write, the object's size and the access's
 *   offset, and the allocation, free and faulting stacks. Frames are raw
 *   addresses; diehard-symbolize (next to libdiehard.so, or in
 *   DIEHARD_LIBEXECDIR) turns them into function and file:line; without it
 *   the report names module+offset. Faults elsewhere go to the program's
 *   handler, or kill the process as they would have.
 * - DIEHARD_FENCE_ACTION: abort (default: the report, then death by SIGSEGV
 *   as the fault's own), readonly (the page is mapped readable and the
 *   program goes on; a write there is then reported and aborts), readwrite
 *   (mapped read-write: the program goes on whatever it does). The page
 *   reads zero (a guard, or a freed object's released page). Each page is
 *   reported once: once mapped, it no longer faults.
 * - DIEHARD_FENCE_LOG=PATH: each report is appended to PATH in one write
 *   (frames raw, for diehard or diehard-symbolize to read) instead of going
 *   to stderr. diehard sets it per replica: the reports reach its log and
 *   its JSON report, and a replica going on after one (readwrite) writes
 *   nothing the others do not.
 * - vm.max_map_count: a live fenced object costs about two mappings (its
 *   pages and the guard after them), a freed one none. Past a budget of a
 *   quarter of the limit in live objects, new objects are not fenced (said
 *   once on stderr, counted as unfenced) until some are freed.
 */
#ifndef DIEHARD_FENCE_H
#define DIEHARD_FENCE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "random.h"

enum fence_action { FENCE_ABORT, FENCE_READONLY, FENCE_READWRITE };

struct fence_config {
	bool on;
	uint64_t rate;          /* one in rate allocations; 1: all */
	size_t min, max;        /* sizes fenced */
	enum fence_action action;
	const char *log;        /* DIEHARD_FENCE_LOG: reports appended there; NULL: stderr */
};

/* Parsers (config.c; unit-tested): false on a malformed value, the output
 * untouched. */
bool fence_parse(const char *s, struct fence_config *f);
bool fence_parse_action(const char *s, enum fence_action *a);

/* Start-up: reserves the region and installs the handler. False (and fence
 * mode off) when the region cannot be had. */
bool fence_start(const struct fence_config *f);

extern bool fence_on;

/* Allocations left before the next sampled one, per thread; 0 in a thread
 * that has not allocated on a slow path yet (and always when fence mode is
 * off). malloc's inline path goes on while it is above 1 (fence_skip). */
extern __thread uint32_t fence_countdown __attribute__((tls_model("initial-exec")));

/* Whether an allocation of size bytes is to be fenced: the thread's
 * countdown run out (then redrawn from r) and size in range. */
bool fence_wanted(size_t size, struct rng *r);

/* For malloc's inline path: true when this allocation is surely not
 * fenced (counted down). False sends it to the slow path, which asks
 * fence_wanted. */
static inline bool fence_skip(void)
{
	if (__builtin_expect(!fence_on, 1))
		return true;
	if (fence_countdown > 1) {
		fence_countdown--;
		return true;
	}
	return false;
}

/* A fenced object of size bytes aligned to align (a power of two, at least
 * 16; at most a page), or NULL when it cannot be had (budget, region full):
 * the caller then allocates as usual. Random-filled when fill, zero when
 * zeroed. */
void *fence_alloc(size_t size, size_t align, struct rng *r, bool fill, bool zeroed);

static inline bool fence_contains(const void *p);
/* HEAP_FREED-like verdicts: 0 freed, 1 double free (in quarantine), 2 not a
 * fenced object's start. */
int fence_free(void *p);
/* The object's size when p is a live fenced object's start, else 0. */
size_t fence_usable(const void *p);

void fence_lock(void);
void fence_unlock(void);
void fence_reset_lock(void);

/* Counts for the statistics line. */
struct fence_totals {
	size_t fenced, unfenced, live, faults;
};
void fence_totals(struct fence_totals *t);

extern uintptr_t fence_lo, fence_hi;

/* A fault at si->si_addr inside the region (segv.c): reported and acted
 * on (true), or not attributable to an object (false: the program's). */
bool fence_fault(const siginfo_t *si, void *uctx);

static inline bool fence_contains(const void *p)
{
	return (uintptr_t)p - fence_lo < fence_hi - fence_lo;
}

#endif
