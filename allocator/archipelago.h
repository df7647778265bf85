/* archipelago.h — Archipelago's sparse heap (../shared/papers/000_*): each
 * object on pages of its own at a random place in a huge virtual region,
 * with physical memory bounded by a hot space.
 *
 * Design:
 * - DIEHARD_ARCHIPELAGO=HOT (a number of pages, at least 16) turns the mode
 *   on: every allocation up to SMALL_MAX goes here; larger ones to large.h
 *   (already one object per mapping, with guards).
 * - Placement: the object's pages are drawn uniformly at random from a
 *   window of a 64 GiB reservation (retrying where a page, or the page
 *   before or after, is in use), so objects are islands in a sea of
 *   inaccessible pages. The window starts at 1 GiB and doubles whenever
 *   the pages of live and kept freed objects pass 1/16 of it: objects at
 *   most that dense, and the per-page metadata and page tables they touch
 *   bounded by it (drawn from all 64 GiB, every object touched a metadata
 *   page and a page table of its own). An
 *   object smaller than a page sits at a random 16-byte-aligned offset in
 *   its page (colouring: objects do not all start at page starts, so they
 *   do not all compete for the same cache sets).
 * - Freed objects keep their pages and contents in a FIFO of ARCH_FREED
 *   objects holding at most HOT pages' worth of bytes (a dangling pointer
 *   still reads what it read: small objects are kept for 65536 frees,
 *   4 KiB buffers for HOT); leaving it, an object's pages are released (a
 *   fresh inaccessible mapping) and may be drawn again. A freed object's
 *   pinned pages (below) join the hot space, so they are compacted in turn:
 *   lighttpd's 4 KiB and larger buffers, kept pinned for 65536 frees, had
 *   held 372 MiB.
 * - The hot space: at most HOT pages are accessible at once, in FIFO order
 *   of becoming so (allocation, or restore). Past it the oldest hot page is
 *   compacted: made read-only, its bytes from the first to the last
 *   non-zero one copied into a block of the small heap, then released. An access to a cold page
 *   faults; the handler (segv.h) restores it: read-write again, the bytes
 *   copied back, the block freed; it is then the newest hot page.
 * - Why a signal handler and not userfaultfd: userfaultfd needs a thread to
 *   serve faults (one more thread in every program, forked children
 *   without it) and, for unprivileged users on Debian 12, the
 *   vm.unprivileged_userfaultfd sysctl; a SIGSEGV handler is in-process,
 *   synchronous and fork-safe, and the fence mode needs it anyway.
 * - An access to a page of the region that holds no object (an overflow past
 *   an object's last page, a wild pointer into the sea) maps that page,
 *   zeroed, and the program goes on (counted as arch_stray_pages): the
 *   overflow lands in memory no other object uses.
 * - All state is under one spinlock, taken in the handler too: a fault
 *   never happens with it held (the lock's holders touch only pages they
 *   have just opened). Metadata (page map, page states, records) lives in
 *   mappings of its own outside the region.
 * - A system call given a buffer on a cold page fails with EFAULT (the
 *   kernel's own accesses raise no signal; userfaultfd would see them, but
 *   for unprivileged users on Debian 12 only its user-mode-only flavour is
 *   allowed, which does not). So objects of a page or more, the I/O
 *   buffers of stdio (4 KiB) and iostreams (8 KiB), are pinned: never
 *   compacted, outside the hot space (arch_pinned). Smaller objects are
 *   restored before the kernel sees them by libdiehard's wrappers of the
 *   libc calls that pass it memory (kernel.c: paths, I/O buffers, socket
 *   addresses, epoll and poll arrays, exec's arguments). (Without pinning,
 *   a C++ word count reading 2 MB through std::cin stopped after a few
 *   reads, its buffer cold; without the wrappers redis-server could not
 *   open its database: the file name was cold.)
 * - vm.max_map_count: only hot pages are mappings of their own (released
 *   and cold pages merge with the sea), so the count stays below about
 *   2 x HOT.
 */
#ifndef DIEHARD_ARCHIPELAGO_H
#define DIEHARD_ARCHIPELAGO_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap.h"
#include "random.h"

/* Parser (config.c; unit-tested): false on a malformed value. */
bool arch_parse(const char *s, size_t *hot_pages);

/* Start-up, after the heap exists (cold pages are stored in it). False
 * (and the mode off) when the region cannot be had. */
bool arch_start(size_t hot_pages, struct heap *h);

extern bool arch_on;
extern uintptr_t arch_lo, arch_hi;

static inline bool arch_contains(const void *p)
{
	return (uintptr_t)p - arch_lo < arch_hi - arch_lo;
}

/* Before the kernel reads or writes n bytes at address a (kernel.c): the
 * cold pages of objects there restored. Nothing outside the region. (An
 * address, not a pointer: the memory may be a buffer not yet written,
 * which the compiler would take a pointer parameter as reading.) */
void arch_prepare(uintptr_t a, size_t n);
/* The same for a NUL-terminated string: page by page up to its NUL. */
void arch_prepare_string(const char *s);

/* A new object of size bytes (<= SMALL_MAX) aligned to align (a power of
 * two, at most a page), or NULL (region or records exhausted: the caller
 * allocates as usual). Random-filled when fill, zero when zeroed. */
void *arch_alloc(size_t size, size_t align, struct rng *r, bool fill, bool zeroed);

/* 0 freed, 1 double free (in the freed FIFO), 2 not an object's start. */
int arch_free(void *p);
/* The bytes the object owns (from p to the end of its pages: at least its
 * size) when p is a live object's start, else 0. */
size_t arch_usable(const void *p);
/* The same for an object freed but kept whole (in the freed FIFO): what a
 * realloc through a dangling pointer copies from. */
size_t arch_kept(const void *p);

/* A fault inside the region (segv.c): handled (true), or not (false). */
bool arch_fault(const siginfo_t *si, void *uctx);

void arch_lock(void);
void arch_unlock(void);
void arch_reset_lock(void);

struct arch_totals {
	size_t objects, live, hot, cold, pinned, compacted_bytes, restores, stray_pages;
};
void arch_totals(struct arch_totals *t);

#endif
