/* entry.c — the exported allocation API: malloc and every relative a real
 * program, libstdc++ or glibc itself calls.
 *
 * Routing: requests up to SMALL_MAX (and alignments that fit a slot) go to the
 * randomized heap (heap.h), larger ones to their own mappings (large.h). A
 * pointer is told apart by address alone: inside the heap's reservation it is
 * the heap's; otherwise the large-object table decides; anything else was never
 * ours and is counted and ignored, never dereferenced.
 *
 * Semantics follow glibc where the standards leave room (realloc(p, 0) frees
 * and returns NULL; memalign rounds a non-power-of-two alignment up), so that
 * programs behave as they do without us.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "archipelago.h"
#include "corrupt.h"
#include "diehard.h"
#include "fence.h"
#include "inject.h"
#include "keyed.h"
#include "os.h"
#include "sizeclass.h"
#include "stream.h"

#define EXPORT __attribute__((visibility("default")))

/* The mark diehard -a looks for in the dynamic symbol table (diehard.h). */
EXPORT const char diehard_abi_2[] = "libdiehard.so ABI 2";

/* An object of class ci from the thread's cache, random-filled when fill. */
static inline void *alloc_small(unsigned ci, struct rng *r, bool fill)
{
	struct heap *h = diehard.heap;
	void *p = cache_alloc(h, ci, r);
	return p == NULL ? NULL : heap_hand_out(h, ci, p, r, fill);
}

/* A new object of size bytes (> 0), random-filled when the configuration
 * says so unless zeroed is asked for (calloc). */
static void *alloc_bytes(size_t size, bool zeroed)
{
	if (!diehard_ready()) {
		errno = ENOMEM;
		return NULL;
	}
	if (__builtin_expect(corrupt_on, 0))
		corrupt_tick();
	bool fill = diehard.cfg.fill && !zeroed;
	struct rng *r = stream_get();
	if (__builtin_expect(arch_on, 0) && size <= SMALL_MAX) {
		void *p = arch_alloc(size, 16, r, fill, zeroed);
		if (p != NULL)
			return p;
	}
	if (__builtin_expect(fence_on, 0) && fence_wanted(size, r)) {
		void *p = fence_alloc(size, 16, r, fill, zeroed);
		if (p != NULL)
			return p;
	}
	if (size <= SMALL_MAX)
		return alloc_small(sizeclass_of(size), r, fill);
	return large_alloc(diehard.large, size, 0, r, fill, zeroed);
}

/* The usable size of a live object of ours, or 0. */
static size_t usable_size(const void *p);

/* keyed.h: numbers (and, in a keyed fill mode, fills) a new object. One
 * predictable branch when off. */
static inline void *numbered(void *p, size_t size, size_t from, bool zeroed, const char *fn)
{
	if (__builtin_expect(keyed_on, 0) && p != NULL)
		keyed_allocated(p, size, usable_size(p), from, zeroed, fn);
	return p;
}

static void *alloc_aligned_raw(size_t align, size_t size);

/* align is a power of two. */
static void *alloc_aligned(size_t align, size_t size)
{
	return numbered(alloc_aligned_raw(align, size), size, 0, false, "memalign");
}

static void *alloc_aligned_raw(size_t align, size_t size)
{
	if (align <= SMALL_MIN)
		return alloc_bytes(size, false);
	if (!diehard_ready()) {
		errno = ENOMEM;
		return NULL;
	}
	if (__builtin_expect(corrupt_on, 0))
		corrupt_tick();
	struct rng *r = stream_get();
	if (__builtin_expect(arch_on, 0) && size <= SMALL_MAX && align <= os_page_size()) {
		void *p = arch_alloc(size, align, r, diehard.cfg.fill, false);
		if (p != NULL)
			return p;
	}
	if (__builtin_expect(fence_on, 0) && align <= os_page_size() && fence_wanted(size, r)) {
		void *p = fence_alloc(size, align, r, diehard.cfg.fill, false);
		if (p != NULL)
			return p;
	}
	/* A slot is aligned to its own size: pick a class at least as large as
	 * the alignment. */
	size_t slot = size > align ? size : align;
	if (slot <= SMALL_MAX)
		return alloc_small(sizeclass_of(slot), r, diehard.cfg.fill);
	return large_alloc(diehard.large, size, align, r, diehard.cfg.fill, false);
}

/* fence_free's and arch_free's answers as the heap's verdicts. */
static enum heap_verdict fence_verdict(int v)
{
	return v == 0 ? HEAP_FREED : v == 1 ? HEAP_DOUBLE : HEAP_INVALID;
}

/* Counts what large_free or realloc refused (the small heap counts its own). */
static void count_verdict(enum heap_verdict v)
{
	if (v == HEAP_DOUBLE)
		atomic_fetch_add_explicit(&diehard.heap->double_frees, 1, memory_order_relaxed);
	else if (v == HEAP_INVALID)
		atomic_fetch_add_explicit(&diehard.heap->invalid_frees, 1, memory_order_relaxed);
}

static size_t usable_size(const void *p)
{
	if (p == NULL || atomic_load_explicit(&diehard_state, memory_order_acquire) != DIEHARD_READY)
		return 0;
	if (heap_contains(diehard.heap, p))
		return heap_usable(diehard.heap, p);
	if (__builtin_expect(fence_on, 0) && fence_contains(p))
		return fence_usable(p);
	if (__builtin_expect(arch_on, 0) && arch_contains(p))
		return arch_usable(p);
	return large_usable(diehard.large, p);
}

/* Fault injection (inject.h), off unless DIEHARD_INJECT is set: one
 * predictable branch on the entry points below. */
static void *alloc_injected(size_t size, bool zeroed)
{
	uint64_t idx;
	size_t real = inject_request(size, &idx);
	void *p = alloc_bytes(real, zeroed);
	if (p != NULL && zeroed && real <= SMALL_MAX)
		memset(p, 0, real);
	inject_allocated(p, size, idx);
	return p;
}

EXPORT void *malloc(size_t size)
{
	/* The fast path: a slot this thread claimed earlier. */
	if (__builtin_expect(size - 1 < SMALL_MAX, 1) &&
	    __builtin_expect(atomic_load_explicit(&diehard_plain, memory_order_acquire), 1)) {
		struct cache_class *c = &cache_self.cls[sizeclass_of(size)];
		if (__builtin_expect(c->nclaimed > 0, 1) && __builtin_expect(fence_skip(), 1))
			return c->claimed[--c->nclaimed];
	}
	if (__builtin_expect(inject_on, 0))
		return numbered(alloc_injected(size == 0 ? 1 : size, false), size, 0, false, "malloc");
	return numbered(alloc_bytes(size == 0 ? 1 : size, false), size, 0, false, "malloc");
}

EXPORT void free(void *p)
{
	/* The fast path: a valid small object onto this thread's pending list
	 * (errno is left alone: nothing on it can set it). */
	if (__builtin_expect(atomic_load_explicit(&diehard_plain, memory_order_acquire), 1)) {
		struct heap *h = diehard.heap;
		if (__builtin_expect(heap_contains(h, p) && heap_check(h, p) && cache_self.state == CACHE_ACTIVE, 1)) {
			cache_free(h, heap_class_index(h, p), p);
			return;
		}
	}
	if (__builtin_expect(inject_on, 0) && inject_free(p))
		return; /* freed early by the injector: the dangling free is ignored */
	diehard_free_object(p);
}

/* keyed.h: with a trace, each free is checked at once (not when a thread
 * cache's batch goes back), so a bad one is traced with its own stack. */
static void free_checked(void *p)
{
	struct heap *h = diehard.heap;
	enum heap_verdict v;
	if (__builtin_expect(fence_on, 0) && fence_contains(p)) {
		v = fence_verdict(fence_free(p));
		count_verdict(v);
	} else if (__builtin_expect(arch_on, 0) && arch_contains(p)) {
		v = fence_verdict(arch_free(p));
		count_verdict(v);
	} else if (!heap_contains(h, p)) {
		v = large_free(diehard.large, p);
		count_verdict(v);
	} else {
		v = heap_free(h, p); /* counts its own */
	}
	if (v != HEAP_FREED)
		keyed_bad_free(p, v == HEAP_DOUBLE);
}

void diehard_free_object(void *p)
{
	if (p == NULL || atomic_load_explicit(&diehard_state, memory_order_acquire) != DIEHARD_READY)
		return; /* before start-up nothing can be ours */
	int saved = errno;
	if (__builtin_expect(corrupt_on, 0))
		corrupt_tick();
	struct heap *h = diehard.heap;
	if (__builtin_expect(keyed_on, 0) && keyed_check_frees()) {
		free_checked(p);
		errno = saved;
		return;
	}
	if (__builtin_expect(fence_on, 0) && fence_contains(p))
		count_verdict(fence_verdict(fence_free(p)));
	else if (__builtin_expect(arch_on, 0) && arch_contains(p))
		count_verdict(fence_verdict(arch_free(p)));
	else if (!heap_contains(h, p))
		count_verdict(large_free(diehard.large, p));
	else if (heap_check(h, p))
		cache_free(h, heap_class_index(h, p), p);
	else
		count_verdict(HEAP_INVALID);
	errno = saved;
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (total == 0)
		total = 1;
	if (__builtin_expect(inject_on, 0))
		return numbered(alloc_injected(total, true), total, 0, true, "calloc");
	/* Zeroed even in fill mode: calloc's contract. */
	void *p = alloc_bytes(total, true);
	/* Large objects are fresh mappings, already zero. */
	if (p != NULL && total <= SMALL_MAX)
		memset(p, 0, total);
	return numbered(p, total, 0, true, "calloc");
}

/* Moves p (of usable size old) to a new object of size bytes. */
static void *move_object(void *p, size_t old, size_t size)
{
	void *q = alloc_bytes(size, false);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < size ? old : size);
	if (__builtin_expect(inject_on, 0))
		inject_moved(p, q);
	diehard_free_object(p);
	return q;
}

static void *resize(void *p, size_t size);

/* keyed.h: a realloc to a non-zero size is numbered whether it moves the
 * object or not (so numbers never depend on placement); the bytes past the
 * old object's end get its fill. */
EXPORT void *realloc(void *p, size_t size)
{
	if (p == NULL)
		return malloc(size);
	if (size == 0) {
		free(p);
		return NULL;
	}
	if (__builtin_expect(keyed_on, 0)) {
		size_t old = usable_size(p);
		void *q = resize(p, size);
		return numbered(q, size, old, false, "realloc");
	}
	return resize(p, size);
}

static void *resize(void *p, size_t size)
{
	if (!diehard_ready()) {
		errno = ENOMEM;
		return NULL;
	}
	if (__builtin_expect(corrupt_on, 0))
		corrupt_tick(); /* one that moves also allocates and frees: ticks there too */
	struct heap *h = diehard.heap;
	if ((__builtin_expect(fence_on, 0) && fence_contains(p)) || (__builtin_expect(arch_on, 0) && arch_contains(p))) {
		/* A fenced object always moves (its end abuts its guard page), and
		 * so does an island (its pages are its own). An island freed but
		 * kept whole is still copied: a realloc through a dangling pointer
		 * then goes on with what the object held (its second free is
		 * counted as a double free). */
		size_t old = fence_contains(p) ? fence_usable(p) : arch_kept(p);
		if (old != 0)
			return move_object(p, old, size);
		count_verdict(HEAP_INVALID);
		errno = ENOMEM;
		return NULL;
	}
	if (heap_contains(h, p)) {
		size_t old = heap_usable(h, p);
		if (old == 0) {
			/* Not a live object: resizing it could only corrupt. */
			count_verdict(HEAP_INVALID);
			errno = ENOMEM;
			return NULL;
		}
		if (size <= SMALL_MAX && sizeclass_of(size) == heap_class_index(h, p))
			return p;
		return move_object(p, old, size);
	}
	if (size > SMALL_MAX) {
		bool known;
		void *q = large_resize(diehard.large, p, size, stream_get(), &known);
		if (known)
			return q;
	} else {
		size_t old = large_usable(diehard.large, p);
		if (old != 0)
			return move_object(p, old, size);
	}
	count_verdict(HEAP_INVALID);
	errno = ENOMEM;
	return NULL;
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

static bool power_of_two(size_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (!power_of_two(align))
		align = align <= 1 ? 1 : (size_t)1 << (64 - __builtin_clzll((unsigned long long)align - 1));
	return alloc_aligned(align, size == 0 ? 1 : size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (!power_of_two(align)) {
		errno = EINVAL;
		return NULL;
	}
	return alloc_aligned(align, size == 0 ? 1 : size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (!power_of_two(align) || align % sizeof(void *) != 0)
		return EINVAL;
	int saved = errno;
	void *p = alloc_aligned(align, size == 0 ? 1 : size);
	errno = saved;
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

EXPORT void *valloc(size_t size)
{
	return alloc_aligned(os_page_size(), size == 0 ? 1 : size);
}

EXPORT void *pvalloc(size_t size)
{
	size_t page = os_page_size();
	if (size > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	return alloc_aligned(page, size == 0 ? page : os_align_up(size, page));
}

EXPORT size_t malloc_usable_size(void *p)
{
	return usable_size(p);
}

/* Knobs of glibc's allocator: accepted and ignored, since programs call them
 * as hints and must keep working. */
EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	return 0;
}

EXPORT int mallopt(int param, int value)
{
	(void)param;
	(void)value;
	return 1;
}

static void fill_info(struct mallinfo2 *mi)
{
	memset(mi, 0, sizeof *mi);
	if (!diehard_ready())
		return;
	struct heap_totals t;
	heap_totals(diehard.heap, &t);
	struct large *l = diehard.large;
	large_lock(l);
	mi->hblks = l->count;
	mi->hblkhd = l->live_bytes;
	large_unlock(l);
	mi->arena = t.committed;
	mi->uordblks = t.live_bytes;
	mi->fordblks = t.committed > t.live_bytes ? t.committed - t.live_bytes : 0;
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi;
	fill_info(&mi);
	return mi;
}

static int clamp_int(size_t v)
{
	return v > INT_MAX ? INT_MAX : (int)v;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 mi2;
	struct mallinfo mi;
	fill_info(&mi2);
	memset(&mi, 0, sizeof mi);
	mi.arena = clamp_int(mi2.arena);
	mi.hblks = clamp_int(mi2.hblks);
	mi.hblkhd = clamp_int(mi2.hblkhd);
	mi.uordblks = clamp_int(mi2.uordblks);
	mi.fordblks = clamp_int(mi2.fordblks);
	return mi;
}

EXPORT void malloc_stats(void)
{
	if (diehard_ready())
		diehard_report();
}

/* glibc's internal names, which some programs and libraries call directly.
 * Wrappers rather than aliases: the aliases would lack the attributes glibc's
 * headers give the targets. */
EXPORT void *__libc_malloc(size_t size)
{
	return malloc(size);
}

EXPORT void __libc_free(void *p)
{
	free(p);
}

EXPORT void *__libc_calloc(size_t n, size_t size)
{
	return calloc(n, size);
}

EXPORT void *__libc_realloc(void *p, size_t size)
{
	return realloc(p, size);
}

EXPORT void *__libc_memalign(size_t align, size_t size)
{
	return memalign(align, size);
}

EXPORT void *__libc_valloc(size_t size)
{
	return valloc(size);
}

EXPORT void *__libc_pvalloc(size_t size)
{
	return pvalloc(size);
}
