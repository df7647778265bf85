/* heap.h — the small-object heap: DieHard's randomized, bitmap-managed regions.
 *
 * Design (paper section 4, with its fixed 384 MB heap replaced by growth):
 * - One region per size class, each aligned to its own (power-of-two) size, all
 *   in one reservation [lo, lo + NCLASSES << region_shift). The class of a
 *   pointer is its offset >> region_shift; its slot is offset >> class shift.
 * - A class has `capacity` usable slots, of which it places below `top`
 *   (see below: top == capacity until a stripe gives memory back). It may
 *   hold at most `limit` (about top / M) live objects; reaching the limit
 *   raises top, and capacity with it (commit more of the reserved region),
 *   rather than failing, up to the region's end.
 * - The 1/M bound holds for every group of 64 slots (a bitmap word; fewer
 *   for slots over 1 KiB, more where M > 4 so that a cap stays at least 16:
 *   heap.c's set_group), not only for the class as a whole: a group holds
 *   at most its cap, floor(its slots / M), top moves in whole groups, and
 *   limit is the sum of the caps. Why: the paper's odds (an overflow into the next slot
 *   meets free space with probability 1 - 1/M) assume the objects spread
 *   evenly, as they do over its fixed heap. A heap that grows does not
 *   spread them so by itself: draws uniform over [0, top) after each 1/16
 *   growth keep landing in the older slots too, and those ended up to 0.93
 *   full while the newest stood empty (the slot after an object was taken
 *   1.3 times as often as the density says: bench/odds). With the caps a
 *   class just grown fills its new groups first, and stays even.
 * - Headroom (heap.c): a stripe grows once a claim would leave it less
 *   room than 1/32 of its limit (and at least 8 groups' caps, up to 32 KiB
 *   of objects), not only at its limit. At the limit every group is full
 *   and the next allocations all go to the few groups growth adds: each
 *   object then lies beside ones allocated a few calls before or after it,
 *   in every replica alike, and two replicas' overflows corrupt the same
 *   object (a wrong commit under diehard -k 3). With room spread over most
 *   groups, a group fills over a longer stretch of allocations.
 * - Allocation draws uniformly among the free slots of the groups below
 *   their cap, in the class's placement window: probes of uniformly random
 *   slots of the window until one is free in a group with room (expected
 *   probes at most about M / (M - 1) while most groups have room), and once
 *   few have (the stripe at its bound, or just grown), group first: a
 *   random group with room (a count per group), a random slot of it. Either
 *   way a rejection sampler over a superset, so exactly uniform. The window
 *   is W = DIEHARD_WINDOW slots (4096 by default), W-aligned, whole groups,
 *   and holds at most the sum of its groups' caps. When it is that full,
 *   the window moves on to the next W slots (cyclically over [0, capacity),
 *   skipping windows as full), and the class grows only when the whole
 *   class is at its limit, as before. With W >= capacity (small classes,
 *   or DIEHARD_WINDOW=all) this is the paper's uniform placement, with the
 *   groups' caps.
 * - What the window trades: objects allocated close in time land close in
 *   memory (one L2-sized stretch of 4096 slots instead of the whole class),
 *   which saves a cache and TLB miss per object on pointer-chasing code. Each
 *   allocation still has at least W (M-1)/M equally likely places (11 bits at
 *   the defaults), and a window is never more than 1/M full, so the slot next
 *   to an object is free with the same odds as before (overflow masking). A
 *   freed slot is reused only while the window covers it: sooner when it is
 *   in the current window (1 in W (M-1)/M per allocation), much later when
 *   not, since the window sweeps the whole class before it returns. The
 *   measured costs are in docs/PERFORMANCE.md (bench/protection).
 * - Clustered placement (DIEHARD_PLACEMENT=clustered; not the default): a
 *   batch claim takes a random bitmap word of the window (64 slots) with
 *   room, and in it random free slots until the word is 1/M full or the
 *   batch complete (then another random word), handed out in random order.
 *   A thread's consecutive allocations then share a few KiB instead of
 *   being spread over the window, and pointer-chasing code misses the
 *   caches and TLB less (binary_trees 1.2-1.5 times as fast). Not in
 *   address order: then the slot after an object would hold the next
 *   allocation in every replica alike, and one overflow would corrupt all
 *   replicas the same way (bench/protection: 11 wrong answers in 20 at
 *   k = 3). Why it is not the default: every word it fills is 1/M full
 *   however empty the stripe, so in a small heap (far below its bound)
 *   objects sit twice as close as scattered placement puts them, and an
 *   overflow meets another live object about twice as often
 *   (tests/progs/buggy_server: 43% of seeds answer wrong instead of 18%;
 *   diehard -k 5 then fails to mask it). Capping each word at the stripe's
 *   own density restores the odds but leaves most words just too full to
 *   use, and the speed is gone. docs/PERFORMANCE.md has the numbers. When
 *   no word of the window has room (M not dividing 64), the rest of the
 *   batch is placed scattered.
 * - A home stripe at its 1/M bound borrows a batch from another stripe with room
 *   for four rather than grow, unless the class is within 1/8 of its bound
 *   (or the stripe is still small): objects freed by other threads go back
 *   to their own stripe, so stripes that each grew to their own peak added
 *   up to several times M x live (larson: 36 MB for 5.8 MB live). Room for
 *   four, not one: a lender left just full grew at its own threads' next
 *   claim, and so every stripe in turn (larson: 28 MB; 16 MB with four).
 * - Free accepts a pointer only if it is the start of a slot below capacity
 *   whose bit is set; anything else is counted and ignored.
 * - Metadata (this struct, the bitmaps) lives in separate mappings with guard
 *   pages, so no heap overflow can reach it.
 *
 * - Slots are claimed and released in batches under a lock (see cache.h for
 *   the per-thread side), because on the machines we measured an atomic
 *   read-modify-write costs ~20 ns: a lock-free bitmap paid four per
 *   malloc/free pair, the batches pay two per batch.
 * - Threads do not meet on one lock: each class region is cut into
 *   HEAP_STRIPES equal stripes, each a complete heap of its own (bitmap,
 *   capacity, 1/M bound, window, lock: struct heap_class). A thread claims
 *   from its home stripe (threads take stripes in turn, in order of first
 *   allocation) and from the others when its own is at its bound; a slot
 *   goes back to the stripe it came from, so a cross-thread free takes that
 *   stripe's lock once per batch. The pointer tells the stripe: region
 *   offset >> part_shift is the index into parts[], class-major.
 *
 * - A stripe gives memory back when its size mix moves on (a program's
 *   objects of one class freed while another class grows): placement stays
 *   below a bound, top (<= capacity), that follows M x live down as well as
 *   up. Every 256 release passes a stripe looks back: if live stayed below
 *   a quarter of its limit (top / M) all along, top drops to twice that
 *   peak x M, and the pages above top whose slots are all free are dropped
 *   (MADV_DONTNEED: still mapped, so a dangling pointer reads zeros rather
 *   than faulting); pages still holding objects go at a later look, once
 *   frees have halved the survivors above top since the last drop (each
 *   drop re-walks the stripe above top: a walk per halving, where a walk
 *   at every look over emptied pages made bench/phase_shift's 63,500
 *   madvise calls; 38,000 now, as the survivors are scattered). Growth
 *   raises top over those pages again before it commits more. The look
 *   back over a whole period, and the factor of two each way, keep a stripe
 *   whose live count swings (a queue between threads) from shrinking and
 *   growing back by turns: producer_consumer made 52,000 madvise calls
 *   when a stripe shrank as soon as it fell below its quarter. The 1/M bound
 *   holds for [0, top) as before, and the freed slots above top are not
 *   reused at all while top stays low. (bench/phase_shift, a working set
 *   moving from 48- to 200- to 900-byte objects: every class kept its own
 *   peak, 546 MB; 443 MB now. Classes whose counts only swing, as
 *   string_churn's do, keep theirs.)
 *
 * Invariants (per stripe, under its lock): bits set == live <= limit ==
 * (top / group slots) x group_cap <= top / M < top <= capacity; top is a
 * whole number of groups; a group below top holds at most group_cap, and
 * used[g] counts it; capacity only grows; memory of slots below capacity is committed (pages above top may
 * be purged: they read as zeros), and the bitmap words covering them too;
 * wlive == bits set in [front, front + W); no bit at or beyond capacity is
 * set; claims set bits below top only.
 *
 * No global state: tests create heaps with their own settings.
 */
#ifndef DIEHARD_HEAP_H
#define DIEHARD_HEAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitmap.h"
#include "config.h"
#include "pool.h"
#include "random.h"
#include "sizeclass.h"

/* One stripe of one size class: a part of the heap. */
struct heap_class {
	/* Read by every free without the lock (the validity check): written
	 * once, or (capacity) only when the class grows, so this line is
	 * shared read-only by all cores. Bitmap words are atomic for the same
	 * reason: written under lock with plain (relaxed) stores, read anywhere. */
	_Atomic size_t capacity;
	char *base;
	bitmap_word *bits;
	uint16_t *used; /* per group below top, its live slots (under the lock) */
	/* Slots below it lie in memory mapped from the heap's pool (heap.c,
	 * "Fill from the pool"): the first hand-out of one since it was
	 * mapped or purged writes nothing. Only grows, under the lock. */
	_Atomic size_t pooled;
	/* Classes filled from the pool: a bit per slot handed out since it was
	 * last mapped or purged (heap.c); NULL in other classes. */
	bitmap_word *dirty;
	unsigned shift;
	unsigned group_shift; /* a group: 1 << group_shift slots (see above) */
	unsigned group_cap;   /* the most live slots a group holds */
	size_t max_slots;
	/* Under the lock, on lines of their own: a claim or release on another
	 * core must not invalidate the line every free reads. */
	pthread_mutex_t lock __attribute__((aligned(64)));
	/* Written under the lock; atomic (relaxed) because heap_claim reads the
	 * other stripes' to decide between growing and borrowing. */
	_Atomic size_t live;  /* claimed slots: handed out, or held in a thread cache */
	_Atomic size_t limit; /* top / M */
	size_t top;   /* the placement bound: claims only below it (<= capacity) */
	size_t peak;  /* the most claimed at once since the last look at top */
	unsigned passes; /* release passes since then */
	size_t above;      /* claimed slots at or above top (survivors of a lowering) */
	size_t above_mark; /* what `above` was at the last drop of pages above top */
	size_t front; /* the placement window: [front, front + W), W-aligned */
	size_t wlive; /* claimed slots inside it */
	size_t committed;      /* bytes of the region made accessible */
	size_t bits_committed; /* bytes of the bitmap made accessible */
	size_t used_committed; /* bytes of the group counts made accessible */
	size_t dirty_committed; /* bytes of dirty made accessible */
	/* Statistics, with stats on. */
	_Atomic size_t allocations;
	_Atomic size_t frees;
} __attribute__((aligned(64)));

#define HEAP_STRIPES 4u
#define HEAP_STRIPE_SHIFT 2u

struct heap {
	struct heap_class parts[NCLASSES * HEAP_STRIPES]; /* class ci, stripe s: [ci * HEAP_STRIPES + s] */
	uintptr_t lo;  /* start of the small-object reservation */
	size_t span;   /* its length */
	char *bits_lo;    /* the parts' bitmaps: one reservation, */
	size_t bits_span; /* a guard page before and after each */
	unsigned region_shift; /* a class region: 1 << region_shift bytes */
	unsigned part_shift;   /* a stripe of it: region_shift - HEAP_STRIPE_SHIFT */
	unsigned m_fixed;
	size_t window;         /* W, the placement window in slots; 0: the whole stripe */
	bool clustered;        /* claims by bitmap word, handed out in address order */
	bool fill;
	bool stats;
	/* Fill from the pool (heap.c): its file, made at heap_create with fill
	 * on; the lock is taken under a class's lock only, so a fork (which
	 * holds them all) never meets it held. pool_maps counts the mappings
	 * made, up to pool_budget (0: no pool). */
	struct pool pool;
	pthread_mutex_t pool_lock;
	size_t pool_maps;
	size_t pool_budget;
	_Atomic size_t live_bytes; /* with stats on; large objects included */
	_Atomic size_t peak_bytes;
	/* Errors the heap survived, counted always (they are rare). */
	_Atomic size_t double_frees;
	_Atomic size_t invalid_frees;
	_Atomic size_t truncated_copies; /* bounded string functions */
};

enum heap_verdict { HEAP_FREED, HEAP_DOUBLE, HEAP_INVALID };

/* Creates a heap in its own guarded mapping. region_shift_max bounds the
 * reservation per class (it halves on failure, down to 24). NULL on failure. */
struct heap *heap_create(const struct config *cfg, unsigned region_shift_max);
void heap_destroy(struct heap *h);

/* Claims up to k (>= 1) random free slots of class ci (from its window,
 * in the calling thread's home stripe) into out; returns how many (0: every
 * stripe exhausted, errno ENOMEM). A home stripe at its 1/M bound borrows
 * from another stripe of the class with room, and grows only when the
 * class as a whole is nearly full (7/8 of its bound) or the stripe is still
 * small: objects move between stripes (freed by other threads), and
 * growing each stripe for its own peak would make the class M times the
 * sum of the peaks, not of the live data. One lock round trip for the
 * batch, as a rule: this is what keeps atomic instructions off the
 * per-allocation path. */
unsigned heap_claim(struct heap *h, unsigned ci, struct rng *r, void **out, unsigned k);

/* The room a stripe keeps: it grows once a claim would leave it less
 * (heap.c, "Headroom"). A hint read without the lock. */
size_t heap_headroom(const struct heap_class *c);

/* Releases n slots of class ci, each already checked by heap_check, to the
 * stripes they came from (one lock round trip per stripe met); a slot whose
 * bit is already clear is a double free, counted and otherwise ignored. freed says the slots had been handed out (counted as frees in the
 * statistics), not merely claimed by a cache. Returns the double frees. */
unsigned heap_release(struct heap *h, unsigned ci, void *const *ptrs, unsigned n, bool freed);

void heap_count_bytes(struct heap *h, size_t bytes, bool add);

static inline bool heap_contains(const struct heap *h, const void *p)
{
	return (uintptr_t)p - h->lo < h->span;
}

static inline unsigned heap_class_index(const struct heap *h, const void *p)
{
	return (unsigned)(((uintptr_t)p - h->lo) >> h->region_shift);
}

/* The part (class and stripe) p, inside the heap, belongs to. */
static inline struct heap_class *heap_part_of(struct heap *h, const void *p)
{
	return &h->parts[((uintptr_t)p - h->lo) >> h->part_shift];
}

static inline struct heap_class *heap_part(struct heap *h, unsigned ci, unsigned stripe)
{
	return &h->parts[ci * HEAP_STRIPES + stripe];
}

/* Whether p (inside the heap) is the start of a slot below capacity: the
 * lock-free half of free's validity check. The bit is checked at release. */
static inline bool heap_check(struct heap *h, const void *p)
{
	struct heap_class *c = heap_part_of(h, p);
	uintptr_t off = (uintptr_t)p - (uintptr_t)c->base;

	if (off & (((uintptr_t)1 << c->shift) - 1))
		return false;
	return (off >> c->shift) < atomic_load_explicit(&c->capacity, memory_order_acquire);
}

/* Slots of this size or more are filled from the pool (heap.c). */
#define HEAP_POOL_SLOT ((size_t)16 << 10)

/* Whether slot p (HEAP_POOL_SLOT or more) still reads as the pool's random
 * bytes, unwritten since it was mapped (heap.c, "Fill from the pool"); it
 * counts as written from now on. False: fill it. */
bool heap_take_unwritten(struct heap *h, void *p);

/* Hands out claimed slot p of class ci: random-filled when fill, counted
 * with stats on. Every allocation path ends here, filled or not (calloc
 * zeroes after): a pooled slot counts as written from here on either way. */
static inline void *heap_hand_out(struct heap *h, unsigned ci, void *p, struct rng *r, bool fill)
{
	size_t size = sizeclass_size(ci);
	bool unwritten = size >= HEAP_POOL_SLOT && h->fill && heap_take_unwritten(h, p);
	if (fill && !unwritten)
		rng_fill(r, p, size);
	if (h->stats) {
		atomic_fetch_add_explicit(&heap_part_of(h, p)->allocations, 1, memory_order_relaxed);
		heap_count_bytes(h, size, true);
	}
	return p;
}

/* One object, without a thread cache: for tests and for threads whose cache
 * is gone. Random-filled when fill. NULL with ENOMEM when exhausted. */
void *heap_alloc(struct heap *h, unsigned ci, struct rng *r, bool fill);

/* Frees one object (inside the heap) without a thread cache. */
enum heap_verdict heap_free(struct heap *h, void *p);

/* The slot size of a claimed object starting at p, else 0. */
static inline size_t heap_usable(struct heap *h, const void *p)
{
	if (!heap_check(h, p))
		return 0;
	struct heap_class *c = heap_part_of(h, p);
	size_t i = (size_t)((uintptr_t)p - (uintptr_t)c->base) >> c->shift;
	return bitmap_test(c->bits, i) ? (size_t)1 << c->shift : 0;
}

/* Bytes from p (anywhere inside the small heap) to the end of its slot: the
 * most a bounded string function may write at p (paper section 4.4). */
static inline size_t heap_room(struct heap *h, const void *p)
{
	uintptr_t size = (uintptr_t)1 << sizeclass_shift(heap_class_index(h, p));
	return (size_t)(size - ((uintptr_t)p & (size - 1)));
}

/* Fork: take every lock so no growth is half done in the child. */
void heap_lock_all(struct heap *h);
void heap_unlock_all(struct heap *h);
void heap_reset_locks(struct heap *h);

/* Totals over all classes, for statistics and mallinfo. */
struct heap_totals {
	size_t live_objects;
	size_t live_bytes;  /* slot bytes of live objects */
	size_t allocations; /* with stats on */
	size_t frees;
	size_t committed;   /* bytes of regions made accessible */
};
void heap_totals(struct heap *h, struct heap_totals *t);

#endif
