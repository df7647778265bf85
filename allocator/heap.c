/* heap.c — setup and growth of the small-object heap. See heap.h. */
#include "heap.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "os.h"

/* Fill from the pool. With fill on, every slot reads as random until the
 * program writes it: never handed out (an overflow reading past an object
 * sees random bytes, not zeros), and at each hand-out. Writing those bytes
 * made every page of a class resident, where the program itself touches
 * the start of a generous buffer only (redis's 16 KiB query and reply
 * buffers: 5.6 of a replica's 10.3 MiB, against 3.2 for plain redis).
 * So classes of HEAP_POOL_SLOT (16 KiB) or more map the memory each growth
 * adds copy-on-write from a small pool of this process's random bytes
 * (pool.h, 256 KiB, made at start-up from the seed), at the offset the
 * address gives, so each growth continues the last in the file and the
 * mappings merge (one per 256 KiB of such memory); a page costs memory
 * once the program writes it. A bitmap per stripe (dirty) marks the slots handed out
 * since they were last mapped or purged: the first hand-out of a slot
 * writes nothing (it reads as the pool's bytes), a later one writes the
 * random bytes as before. (Resetting a slot with MADV_DONTNEED at every
 * hand-out instead kept memory lower still, but cost 45-300 us a malloc
 * here, in the call and the faults after it, against 3-15 us for the
 * write.) Invariants: every slot of [0, pooled) lies in such a mapping
 * (purging it there brings back the pool's bytes, not zeros, and clears
 * its dirty bit); a slot of [0, pooled) whose dirty bit is clear has not
 * been handed out since, so only an overflow from a neighbour can have
 * written it. When the pool fails (no memfd, the program took its
 * descriptor) or pool_budget mappings are made (a share of
 * vm.max_map_count), growth writes the bytes as before and pooled stops. */

/* The pool's stream: a tag no thread ordinal (stream.c) reaches, top bit
 * clear as fork tags have it set. */
#define POOL_TAG (((uint64_t)1 << 62) | 0x706f6f6c)

/* The smallest reservation per class we accept before giving up. */
#define REGION_SHIFT_MIN 24u
/* Regions are made accessible in steps of at least this many bytes, so that
 * steady growth costs few mprotect calls. */
#define COMMIT_GRANULE ((size_t)64 << 10)

static size_t bitmap_bytes(size_t slots)
{
	return (slots + 63) / 64 * sizeof(bitmap_word);
}

/* Groups of c in `slots` slots (the last one counted if partial). */
static size_t groups_of(const struct heap_class *c, size_t slots)
{
	return (slots + ((size_t)1 << c->group_shift) - 1) >> c->group_shift;
}

static size_t used_bytes(const struct heap_class *c, size_t slots)
{
	return groups_of(c, slots) * sizeof(uint16_t);
}

/* Whether c's slots are filled from the pool (see "Fill from the pool"). */
static bool pooled_class(const struct heap *h, const struct heap_class *c)
{
	return h->fill && (size_t)1 << c->shift >= HEAP_POOL_SLOT;
}

/* Reserved metadata of a class: the slots' bitmap, the groups' counts and,
 * filled from the pool, the bitmap of slots written, with an uncommitted
 * page each side as guard. */
static size_t bitmap_reservation(const struct heap *h, const struct heap_class *c)
{
	size_t page = os_page_size();
	return os_align_up(bitmap_bytes(c->max_slots), page) * (pooled_class(h, c) ? 2 : 1) +
	       os_align_up(used_bytes(c, c->max_slots), page) + 2 * page;
}

/* The most bytes a group spans, where M allows (set_group). */
#define GROUP_BYTES ((size_t)64 << 10)

/* c's groups (heap.h): a bitmap word's 64 slots, fewer for slots over
 * 1 KiB so that a group spans at most GROUP_BYTES (but at least 2 slots),
 * and then twice as many until the cap, slots / M rounded down, is exact
 * or rounding costs at most a sixteenth of the bound (an eighth in a
 * group of 4 x GROUP_BYTES or more: a 64 KiB class at M = 3 holds 5 in
 * 16, and grows by 1 MiB, not by 4 MiB). Never more than the stripe's slots (a small reservation, a large
 * M), where a cap of 1 is the least. Groups are what top grows and shrinks
 * by, so a group is never cut by top, and their size is also the step in
 * which a class of large slots grows. */
static void set_group(const struct heap *h, struct heap_class *c)
{
	unsigned gs = 6, most = (unsigned)__builtin_ctzll(c->max_slots); /* a power of two */
	while (gs > 1 && (size_t)1 << (gs + c->shift) > GROUP_BYTES)
		gs--;
	if (gs > most)
		gs = most;
	for (;; gs++) {
		size_t slots = (size_t)1 << gs, cap = slots * M_ONE / h->m_fixed;
		/* What rounding down loses, in 1/16ths of the bound, at most. */
		size_t ideal = slots * M_ONE, lost = ideal - cap * h->m_fixed;
		bool big = slots << c->shift >= 4 * GROUP_BYTES;
		if ((cap >= 1 && 16 * lost <= (big ? 2 : 1) * ideal) || gs >= most) {
			c->group_shift = gs;
			c->group_cap = cap > 0 ? (unsigned)cap : 1;
			return;
		}
	}
}

static void release_regions(struct heap *h)
{
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++) {
		h->parts[pi].bits = NULL;
		h->parts[pi].used = NULL;
		h->parts[pi].dirty = NULL;
	}
	if (h->bits_lo != NULL)
		(void)os_release(h->bits_lo, h->bits_span);
	h->bits_lo = NULL;
	if (h->lo != 0)
		(void)os_release((void *)h->lo, h->span);
	h->lo = 0;
}

/* Where the small heap goes: an address derived from the seed, so that a run
 * repeated with the same DIEHARD_SEED puts every small object at the same
 * absolute address even under ASLR (programs that hash or print pointers
 * then reproduce too). It lies in [16 TiB, 80 TiB), clear of where the
 * kernel puts the program, its libraries and stack on x86-64 and arm64
 * (48-bit address spaces). If the range is taken, the kernel chooses. */
static uintptr_t seeded_address(const uint64_t seed[2], unsigned rs)
{
	const uintptr_t low = (uintptr_t)16 << 40, span = (uintptr_t)64 << 40;
	uint64_t x = seed[0] ^ seed[1] ^ 0x6865617062617365ULL; /* tag "heapbase" */
	uintptr_t slots = span >> rs;
	return low + ((uintptr_t)(rng_splitmix(&x) % slots) << rs);
}

static bool reserve_regions(struct heap *h, unsigned rs, const uint64_t seed[2])
{
	size_t region = (size_t)1 << rs;
	size_t span = (size_t)NCLASSES << rs;
	void *lo = NULL;
	if (sizeof(void *) == 8 && span < ((size_t)64 << 40) / 2)
		lo = os_reserve_at(seeded_address(seed, rs), span);
	if (lo == NULL)
		lo = os_reserve(span, region);
	if (lo == NULL)
		return false;
	h->lo = (uintptr_t)lo;
	h->span = (size_t)NCLASSES << rs;
	h->region_shift = rs;
	h->part_shift = rs - HEAP_STRIPE_SHIFT;
	/* The bitmaps in one reservation rather than one each (a system call
	 * per part at every process's start): each keeps its guard pages,
	 * which are never committed. */
	size_t bits_span = 0;
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++) {
		struct heap_class *c = &h->parts[pi];
		c->shift = sizeclass_shift(pi / HEAP_STRIPES);
		c->base = (char *)lo + ((size_t)pi << h->part_shift);
		c->max_slots = (region >> HEAP_STRIPE_SHIFT) >> c->shift;
		set_group(h, c);
		bits_span += bitmap_reservation(h, c);
	}
	char *bits = os_reserve(bits_span, os_page_size());
	if (bits == NULL) {
		release_regions(h);
		return false;
	}
	h->bits_lo = bits;
	h->bits_span = bits_span;
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++) {
		struct heap_class *c = &h->parts[pi];
		size_t page = os_page_size();
		c->bits = (bitmap_word *)(bits + page);
		c->used = (uint16_t *)((char *)c->bits + os_align_up(bitmap_bytes(c->max_slots), page));
		if (pooled_class(h, c))
			c->dirty = (bitmap_word *)((char *)c->used + os_align_up(used_bytes(c, c->max_slots), page));
		bits += bitmap_reservation(h, c);
	}
	return true;
}

struct heap *heap_create(const struct config *cfg, unsigned region_shift_max)
{
	struct heap *h = os_map_guarded(sizeof *h);
	if (h == NULL)
		return NULL;
	h->m_fixed = cfg->m_fixed;
	h->window = cfg->window_shift != 0 ? (size_t)1 << cfg->window_shift : 0;
	h->clustered = cfg->clustered;
	h->fill = cfg->fill;
	h->stats = cfg->stats;
	/* Ask for a generous reservation (it costs no memory), settle for less
	 * under RLIMIT_AS or a small address space. */
	unsigned rs = region_shift_max;
	while (!reserve_regions(h, rs, cfg->seed)) {
		if (rs == REGION_SHIFT_MIN) {
			os_unmap_guarded(h, sizeof *h);
			errno = ENOMEM;
			return NULL;
		}
		rs--;
	}
	/* A window holds whole groups. */
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++)
		if (h->window != 0 && h->window < (size_t)1 << h->parts[pi].group_shift)
			h->window = (size_t)1 << h->parts[pi].group_shift;
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++)
		pthread_mutex_init(&h->parts[pi].lock, NULL);
	pool_init(&h->pool, HEAP_POOL_SIZE);
	pthread_mutex_init(&h->pool_lock, NULL);
	if (h->fill) {
		/* Made now, at start-up, not at a class's first growth: from
		 * the seed alone (whichever thread grows first), before the
		 * program opens its files or installs a filter of its own. A
		 * mapping budget of an eighth of the limit: the program,
		 * large.c's guards and our other regions keep the rest. */
		struct rng pr;
		rng_derive(&pr, cfg->seed, POOL_TAG);
		long max_maps = os_read_number("/proc/sys/vm/max_map_count", 65530);
		h->pool_budget = max_maps > 64 ? (size_t)max_maps / 8 : 0;
		if (h->pool_budget == 0 || !pool_open(&h->pool, &pr))
			h->pool_budget = 0;
	}
	return h;
}

void heap_destroy(struct heap *h)
{
	pool_close(&h->pool);
	release_regions(h);
	os_unmap_guarded(h, sizeof *h);
}

/* The most live slots of [0, top), or of a window of top slots (whole
 * groups): the sum of its groups' caps, at most top / M. */
static size_t limit_of(const struct heap_class *c, size_t top)
{
	return (top >> c->group_shift) * c->group_cap;
}

/* The fewest whole groups' slots whose limit_of is at least n. */
static size_t slots_for(const struct heap_class *c, size_t n)
{
	return ((n + c->group_cap - 1) / c->group_cap) << c->group_shift;
}

/* n rounded up to c's whole groups. */
static size_t whole_groups(const struct heap_class *c, size_t n)
{
	return groups_of(c, n) << c->group_shift;
}

/* Transparent huge pages: random placement costs a TLB miss per object
 * access once a class spans many pages; 2 MiB pages cut those misses (binary
 * trees: 5.9 s -> 4.2 s here). They cannot inflate the resident size of a
 * class whose slots are at most a page, since random placement touches every
 * page of such a class anyway; larger slots may be touched only in part, so
 * they keep small pages. Small classes keep them too until they pass
 * HUGE_FROM (16 MiB): the 2 MiB rounding then adds at most 1/8 to a class,
 * and small programs stay small. */
#define HUGE_SLOT_MAX ((size_t)4096)
#define HUGE_FROM ((size_t)16 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static inline size_t live_of(const struct heap_class *c)
{
	return atomic_load_explicit(&c->live, memory_order_relaxed);
}

static inline size_t limit_of_part(const struct heap_class *c)
{
	return atomic_load_explicit(&c->limit, memory_order_relaxed);
}

/* With the lock: a load and a store, not a read-modify-write. */
static inline void live_add(struct heap_class *c, size_t d)
{
	atomic_store_explicit(&c->live, live_of(c) + d, memory_order_relaxed);
}

/* Makes [0, slots) usable: region bytes and bitmap words accessible. */
static bool commit_slots(struct heap_class *c, size_t slots)
{
	size_t region = c->max_slots << c->shift;
	size_t need = slots << c->shift;
	if (need > c->committed) {
		bool huge = (size_t)1 << c->shift <= HUGE_SLOT_MAX && need >= HUGE_FROM;
		/* Huge pages need whole 2 MiB blocks inside the mapping before the
		 * first touch, or the block at the growing edge faults in small. */
		size_t target = os_align_up(need, huge ? HUGE_PAGE : COMMIT_GRANULE);
		if (target > region)
			target = region;
		if (os_commit(c->base + c->committed, target - c->committed) != 0)
			return false;
		if (huge)
			(void)madvise(c->base, target, MADV_HUGEPAGE); /* a hint; failure is harmless */
		c->committed = target;
	}
	size_t bneed = os_align_up(bitmap_bytes(slots), os_page_size());
	if (bneed > c->bits_committed) {
		if (os_commit((char *)c->bits + c->bits_committed, bneed - c->bits_committed) != 0)
			return false;
		c->bits_committed = bneed;
	}
	size_t uneed = os_align_up(used_bytes(c, slots), os_page_size());
	if (uneed > c->used_committed) {
		if (os_commit((char *)c->used + c->used_committed, uneed - c->used_committed) != 0)
			return false;
		c->used_committed = uneed;
	}
	if (c->dirty != NULL && bneed > c->dirty_committed) {
		if (os_commit((char *)c->dirty + c->dirty_committed, bneed - c->dirty_committed) != 0)
			return false;
		c->dirty_committed = bneed;
	}
	return true;
}

/* The slots of one purge unit of c: a page's worth, or one slot of a page
 * or more. Units are aligned to their own size. */
static size_t unit_slots(const struct heap_class *c)
{
	size_t page = os_page_size();
	return (size_t)1 << c->shift >= page ? 1 : page >> c->shift;
}

/* Whether the unit of slots [i, i + per) is all free. */
static bool unit_free(const struct heap_class *c, size_t i, size_t per)
{
	if (per < 64) {
		uint64_t mask = (((uint64_t)1 << per) - 1) << (i & 63);
		return (atomic_load_explicit(&c->bits[i >> 6], memory_order_relaxed) & mask) == 0;
	}
	for (size_t w = i >> 6; w < (i + per) >> 6; w++)
		if (atomic_load_explicit(&c->bits[w], memory_order_relaxed) != 0)
			return false;
	return true;
}

/* Drops the memory of slots [run, run + len): below pooled they read as
 * the pool's bytes again, unwritten. With the lock, the slots free. */
static void purge_run(struct heap_class *c, size_t run, size_t len)
{
	os_purge(c->base + (run << c->shift), len << c->shift);
	size_t pooled = atomic_load_explicit(&c->pooled, memory_order_relaxed);
	for (size_t i = run; c->dirty != NULL && i < run + len && i < pooled; i++)
		atomic_fetch_and_explicit(&c->dirty[i >> 6], ~((uint64_t)1 << (i & 63)), memory_order_relaxed);
}

/* Drops the memory of the units lying wholly in slots [from, to) whose slots
 * are all free, in runs. With the lock. */
static void purge_free(struct heap_class *c, size_t from, size_t to)
{
	size_t per = unit_slots(c), run = 0, len = 0;
	for (size_t i = (from + per - 1) / per * per; i + per <= to; i += per) {
		if (unit_free(c, i, per)) {
			if (len == 0)
				run = i;
			len += per;
			continue;
		}
		if (len != 0)
			purge_run(c, run, len);
		len = 0;
	}
	if (len != 0)
		purge_run(c, run, len);
}

/* Claimed slots in [from, to) (any bounds). */
static size_t count_between(const struct heap_class *c, size_t from, size_t to)
{
	size_t total = 0;
	for (size_t i = from; i < to;) {
		size_t w = i >> 6, lo = i & 63, hi = to - (i - lo) < 64 ? to - (i - lo) : 64;
		uint64_t word = atomic_load_explicit(&c->bits[w], memory_order_relaxed);
		uint64_t mask = (hi == 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi) - 1) & (~(uint64_t)0 << lo);
		total += bitmap_count(word & mask);
		i += hi - lo;
	}
	return total;
}

/* Counts group g (below top) afresh. With the lock. */
static void group_count(struct heap_class *c, size_t g)
{
	size_t first = g << c->group_shift;
	c->used[g] = (uint16_t)count_between(c, first, first + ((size_t)1 << c->group_shift));
}

/* Whether group g is under its cap. */
static inline bool group_open(const struct heap_class *c, size_t g)
{
	return c->used[g] < c->group_cap;
}

/* Sets c's placement bound to top, counts the survivors above it, and
 * counts the groups top rises over afresh (survivors of a lowering may lie
 * there). With the lock. */
static void set_top(struct heap_class *c, size_t top)
{
	size_t old = c->top;
	c->top = top;
	atomic_store_explicit(&c->limit, limit_of(c, top), memory_order_relaxed);
	c->above = c->above_mark =
		count_between(c, top, atomic_load_explicit(&c->capacity, memory_order_relaxed));
	for (size_t g = old >> c->group_shift; g < top >> c->group_shift; g++)
		group_count(c, g);
}

/* With fill on, makes the free units touching slots [from, to) random
 * again (those purge_free dropped read as zeros). Below pooled, where a
 * unit is a slot, those written since they were mapped are purged back to
 * the pool's bytes instead. With the lock. */
static void refill_free(struct heap_class *c, size_t from, size_t to, struct rng *r)
{
	size_t per = unit_slots(c), pooled = atomic_load_explicit(&c->pooled, memory_order_relaxed);
	for (size_t i = from / per * per; i < to; i += per) {
		if (!unit_free(c, i, per))
			continue;
		if (i >= pooled)
			rng_fill(r, c->base + (i << c->shift), per << c->shift);
		else if (bitmap_test(c->dirty, i))
			purge_run(c, i, 1);
	}
}

/* Makes the never handed out slots [cap, top) of c read as random: mapped
 * from the pool when c's slots are big and all below cap are (see "Fill
 * from the pool"), written otherwise. With c's lock. */
static void fill_fresh(struct heap *h, struct heap_class *c, size_t cap, size_t top, struct rng *r)
{
	char *at = c->base + (cap << c->shift);
	size_t len = (top - cap) << c->shift;
	if (c->dirty != NULL && atomic_load_explicit(&c->pooled, memory_order_relaxed) == cap) {
		pthread_mutex_lock(&h->pool_lock);
		bool mapped = h->pool_maps + len / HEAP_POOL_SIZE + 2 <= h->pool_budget &&
			      pool_map_along(&h->pool, at, len, r, &h->pool_maps);
		pthread_mutex_unlock(&h->pool_lock);
		if (mapped) {
			atomic_store_explicit(&c->pooled, top, memory_order_release);
			return;
		}
	}
	rng_fill(r, at, len);
}

bool heap_take_unwritten(struct heap *h, void *p)
{
	struct heap_class *c = heap_part_of(h, p);
	size_t i = (size_t)((char *)p - c->base) >> c->shift;
	if (c->dirty == NULL || i >= atomic_load_explicit(&c->pooled, memory_order_acquire))
		return false;
	uint64_t bit = (uint64_t)1 << (i & 63);
	return (atomic_fetch_or_explicit(&c->dirty[i >> 6], bit, memory_order_relaxed) & bit) == 0;
}

/* Grows class c so that n objects keep it at most 1/M full; with the lock.
 * Raises the placement bound over slots already committed first (those a
 * lowered bound left), and commits more only past the capacity. */
static bool grow_locked(struct heap *h, struct heap_class *c, size_t n, struct rng *r)
{
	size_t cap = atomic_load_explicit(&c->capacity, memory_order_relaxed), top = c->top;
	size_t size = (size_t)1 << c->shift;
	/* The fewest slots that keep n objects at most 1/M full... */
	size_t want = slots_for(c, n);
	/* ...but grow by at least a sixteenth, so growth is amortised, and
	 * start from at least a page or eight slots. Small steps keep the heap
	 * close to M times the live data (resident size is what the benchmarks
	 * found tight); each step costs one or two mprotect calls. In whole
	 * groups (heap.h). */
	size_t floor = top + top / 16;
	size_t initial = os_page_size() / size > 8 ? os_page_size() / size : 8;
	size_t new_top = want > floor ? want : floor;
	if (new_top < initial)
		new_top = initial;
	new_top = whole_groups(c, new_top);
	if (new_top > c->max_slots)
		new_top = c->max_slots;
	if (new_top <= top)
		return false;
	if (new_top > cap) {
		if (!commit_slots(c, new_top))
			return false;
		/* Memory never handed out reads as random too, not as zeros. */
		if (h->fill)
			fill_fresh(h, c, cap, new_top, r);
		atomic_store_explicit(&c->capacity, new_top, memory_order_release);
	}
	if (h->fill && top < cap)
		refill_free(c, top, new_top < cap ? new_top : cap, r);
	set_top(c, new_top);
	return true;
}

/* The least top a stripe is lowered to: a commit granule's worth of slots
 * (at least 8), in whole groups. */
static size_t least_top(const struct heap_class *c)
{
	size_t least = COMMIT_GRANULE >> c->shift;
	return whole_groups(c, least > 8 ? least : 8);
}

/* The headroom (see heap_headroom): 1/GROW_SLACK of the limit, and at
 * least ROOM_GROUPS groups' caps or ROOM_BYTES of objects, whichever is
 * less. */
#define GROW_SLACK 32u
#define ROOM_GROUPS 8u
#define ROOM_BYTES ((size_t)32 << 10)
/* The most a claim asks for at once (a thread cache's batch). */
#define CLAIM_BATCH 32u

static size_t room_floor(const struct heap_class *c)
{
	size_t least = (size_t)ROOM_GROUPS * c->group_cap, most = ROOM_BYTES >> c->shift;
	return least < most ? least : most;
}

/* Release passes between two looks at a stripe's placement bound. */
#define SHRINK_PERIOD 256u

/* Lowers c's placement bound to 2 x peak x M, peak being the most it held
 * over the last period (below a quarter of its limit), and drops the pages
 * above it whose slots are all free. With the lock. */
static void lower_top(struct heap_class *c, size_t peak)
{
	/* Room for the headroom's floor and a batch besides, or the next
	 * claim would grow it back at once. */
	size_t top = c->top, new_top = slots_for(c, 2 * peak + room_floor(c) + CLAIM_BATCH);
	if (new_top < least_top(c))
		new_top = least_top(c);
	if (new_top >= top)
		return;
	set_top(c, new_top);
	purge_free(c, new_top, atomic_load_explicit(&c->capacity, memory_order_relaxed));
}

/* After a release pass: every SHRINK_PERIOD passes, whether the stripe
 * stayed small enough all along to lower its bound, and the pages above
 * the bound that frees since the last look left empty. With the lock. */
static void look_back(struct heap_class *c)
{
	if (++c->passes < SHRINK_PERIOD)
		return;
	size_t live = live_of(c), top = c->top;
	if (c->peak < limit_of_part(c) / 4 && top > least_top(c))
		lower_top(c, c->peak);
	/* Pages above top go once the survivors there halved since the last
	 * drop: a walk per halving, not per emptied page. */
	if (c->top == top && c->above < c->above_mark && c->above <= c->above_mark / 2) {
		purge_free(c, top, atomic_load_explicit(&c->capacity, memory_order_relaxed));
		c->above_mark = c->above;
	}
	c->passes = 0;
	c->peak = live;
}

/* How many more claims the window (front < cap) takes within its 1/M. */
static size_t window_room(const struct heap_class *c, size_t cap, size_t w)
{
	size_t n = cap - c->front < w ? cap - c->front : w;
	size_t most = limit_of(c, n); /* whole groups: front and cap are */
	return c->wlive < most ? most - c->wlive : 0;
}

/* Moves c's window on until one has room. A window it moves to must have
 * room for an eighth of its 1/M, or for half what the stripe has to spare
 * per window if that is less, so that one move (a scan of W / 64 words) is
 * paid by many claims; failing that, once around the class, room for one.
 * (Without the second bound a stripe near its limit, every window a little
 * under 1/M full, went once around at every move: claims of a 400,000-object
 * heap took 88% of a run that glibc did in a fifteenth of the time.) False
 * when none has room (live is near the class limit and rounding left every
 * window just full): the caller then places uniformly. */
static bool window_find(struct heap_class *c, size_t cap, size_t w)
{
	if (c->front < cap && window_room(c, cap, w) >= 1)
		return true;
	size_t windows = (cap + w - 1) / w;
	size_t live = live_of(c), limit = limit_of_part(c);
	size_t spare = limit > live ? (limit - live) / windows / 2 : 0;
	size_t slack = limit_of(c, w) / 8;
	if (slack > spare)
		slack = spare;
	for (size_t tries = 0; tries < 2 * windows; tries++) {
		c->front += w;
		if (c->front >= cap)
			c->front = 0;
		c->wlive = count_between(c, c->front, c->front + w);
		if (window_room(c, cap, w) >= (tries < windows && slack > 1 ? slack : 1))
			return true;
	}
	return false;
}

/* Claims up to k random free slots of bitmap word wi, keeping the word at
 * most 1/M full (of its slots below cap), and puts them in out in random
 * order; returns how many. With the lock. */
static unsigned claim_word(struct heap *h, struct heap_class *c, size_t cap, size_t wi, struct rng *r,
			   void **out, unsigned k)
{
	size_t first = wi << 6;
	unsigned valid = cap - first >= 64 ? 64u : (unsigned)(cap - first);
	uint64_t usable = valid == 64 ? ~(uint64_t)0 : ((uint64_t)1 << valid) - 1;
	uint64_t word = atomic_load_explicit(&c->bits[wi], memory_order_relaxed);
	unsigned most = (unsigned)((size_t)valid * M_ONE / h->m_fixed);
	unsigned used = bitmap_count(word);
	if (used >= most)
		return 0;
	unsigned want = most - used < k ? most - used : k;
	/* A group of several words: within its own cap too. */
	size_t g = wi >> (c->group_shift - 6);
	if (c->used[g] >= c->group_cap)
		return 0;
	if (want > c->group_cap - c->used[g])
		want = c->group_cap - c->used[g];
	/* A random subset of the free slots: each random mask keeps every
	 * candidate with odds 1/2, and is thinned by further masks while it
	 * holds more than are still wanted. No bit is favoured (they are all
	 * treated alike), and it takes a few random words, not a probe and a
	 * mispredicted branch per slot. There are always enough: used + want
	 * <= most < valid. */
	uint64_t avail = usable & ~word, take = 0;
	for (unsigned need = want; need > 0;) {
		uint64_t cand = avail & rng_next(r);
		unsigned n = bitmap_count(cand);
		while (n > need) {
			cand &= rng_next(r);
			n = bitmap_count(cand);
		}
		take |= cand;
		avail &= ~cand;
		need -= n;
	}
	atomic_store_explicit(&c->bits[wi], word | take, memory_order_relaxed);
	c->used[g] += (uint16_t)want;
	live_add(c, want);
	if (first - c->front < h->window)
		c->wlive += want;
	unsigned got = 0;
	for (; take != 0; take &= take - 1)
		out[got++] = c->base + ((first + (unsigned)__builtin_ctzll(take)) << c->shift);
	/* Handed out in random order (Fisher-Yates): in address order the slot
	 * after an object would hold the next allocation, in every replica
	 * alike, and an overflow into it would corrupt all of them the same
	 * way (bench/protection: 11 wrong answers in 20 at k = 3). */
	for (unsigned i = got; i > 1; i--) {
		unsigned j = (unsigned)rng_below(r, i);
		void *t = out[i - 1];
		out[i - 1] = out[j];
		out[j] = t;
	}
	return got;
}

/* A group of [g0, g1) under its cap, uniformly; there is one. For ranges
 * of more than 64 groups (DIEHARD_WINDOW=all over a large stripe): groups
 * drawn until one is open, and after 64 misses by counting them. */
static size_t pick_open(const struct heap_class *c, size_t g0, size_t g1, struct rng *r)
{
	size_t n = g1 - g0;
	for (unsigned tries = 0; tries < 64; tries++) {
		size_t g = g0 + (size_t)rng_below(r, n);
		if (group_open(c, g))
			return g;
	}
	size_t open = 0;
	for (size_t g = g0; g < g1; g++)
		open += group_open(c, g);
	if (open == 0)
		return SIZE_MAX; /* cannot be while the range has room */
	size_t want = (size_t)rng_below(r, open);
	for (size_t g = g0;; g++)
		if (group_open(c, g) && want-- == 0)
			return g;
}

/* The rest of claim_scattered's batch, once uniform probes of the range
 * missed CLAIM_PROBES times in a row (most of its groups full: the stripe
 * is at its bound, or just grew): each slot drawn as a group among those
 * under their cap, then a slot of it, until a free one is met. Within a
 * window of at most 64 groups (the default) the open groups are listed
 * once, and a group leaves the list when it fills. Returns how many it
 * claimed: k, as the range has room for them. */
static unsigned claim_rest(struct heap_class *c, size_t from, size_t n, struct rng *r, void **out, unsigned k)
{
	unsigned gs = c->group_shift, got = 0;
	size_t g0 = from >> gs, g1 = groups_of(c, from + n), span = (size_t)1 << gs;
	if (g1 - g0 > 64) {
		while (got < k) {
			size_t g = pick_open(c, g0, g1, r);
			if (g == SIZE_MAX)
				break;
			size_t i = (g << gs) + (rng_next(r) & (span - 1));
			if (!bitmap_try_set(c->bits, i))
				continue;
			out[got++] = c->base + (i << c->shift);
			c->used[g]++;
		}
		return got;
	}
	unsigned char list[64];
	unsigned have = 0;
	for (size_t g = g0; g < g1; g++)
		if (group_open(c, g))
			list[have++] = (unsigned char)(g - g0);
	while (got < k && have > 0) {
		/* One random word: the slot from its low bits, the group
		 * (multiply-shift, as rng_below) from the rest. */
		uint64_t x = rng_next(r);
		unsigned j = (unsigned)(((x >> 16) * have) >> 48);
		size_t g = g0 + list[j], i = (g << gs) + (x & (span - 1) & 0xffff);
		if (!bitmap_try_set(c->bits, i))
			continue;
		out[got++] = c->base + (i << c->shift);
		if (++c->used[g] >= c->group_cap)
			list[j] = list[--have];
	}
	return got;
}

/* Uniform probes before a claim draws from the groups with room only. */
#define CLAIM_PROBES 4u

/* Claims k free slots in [from, from + n) (below top, group-aligned, with
 * room for k within the groups' caps), each uniformly at random among the
 * free slots of the groups below their cap: the scattered placement, and
 * the rest of a batch when clustered placement finds no word.
 *
 * A probe draws a slot of the range uniformly and takes it if it is free
 * and its group has room; after CLAIM_PROBES misses in a row (most groups
 * full) the rest of the batch is drawn group first (claim_rest). Both are
 * rejection sampling from a uniform proposal over a superset of the
 * eligible slots, so either way the slot taken is uniform among them. A
 * group's count reaching its cap closes it.
 *
 * Without a branch on the outcome: a probe that misses stores the words
 * unchanged and does not advance, so the loop's only branches (are we
 * done, too many misses) are predictable; on random bits a per-probe
 * branch mispredicted about once per slot. With the lock. */
static unsigned claim_scattered(struct heap_class *c, size_t from, size_t n, struct rng *r,
				void **out, unsigned k)
{
	/* The generator, the bitmaps and the stripe's fields in locals: the
	 * stores to the bitmaps and to out could alias them, and the compiler
	 * would otherwise reload and store them on every probe. */
	struct rng g = *r;
	bitmap_word *bits = c->bits;
	uint16_t *used = c->used;
	char *base = c->base;
	unsigned shift = c->shift, gs = c->group_shift, gcap = c->group_cap;
	unsigned got = 0, misses = 0;
	while (got < k) {
		if (__builtin_expect(misses == CLAIM_PROBES, 0)) {
			got += claim_rest(c, from, n, &g, out + got, k - got);
			break;
		}
		size_t i = from + (size_t)rng_below(&g, n), gi = i >> gs;
		bitmap_word *wp = &bits[i >> 6];
		uint64_t word = atomic_load_explicit(wp, memory_order_relaxed);
		unsigned u = used[gi];
		unsigned fresh = (unsigned)(~word >> (i & 63) & 1) & (u < gcap);
		atomic_store_explicit(wp, word | (uint64_t)fresh << (i & 63), memory_order_relaxed);
		out[got] = base + (i << shift);
		got += fresh;
		used[gi] = (uint16_t)(u + fresh);
		misses = (misses + 1) & -(unsigned)!fresh;
	}
	*r = g;
	live_add(c, got);
	return got;
}

/* Clustered placement: a random word of [from, from + n) with room, tried
 * a few times at random, then word by word from a random start (at most 64
 * words). 0 when none was found: the caller places the rest of the batch
 * scattered. */
static unsigned claim_cluster(struct heap *h, struct heap_class *c, size_t cap, size_t from, size_t n,
			      struct rng *r, void **out, unsigned k)
{
	size_t words = (n + 63) >> 6, w0 = from >> 6;
	size_t wi = w0 + (size_t)rng_below(r, words);
	for (unsigned tries = 0; tries < 4; tries++) {
		unsigned got = claim_word(h, c, cap, wi, r, out, k);
		if (got != 0)
			return got;
		wi = w0 + (size_t)rng_below(r, words);
	}
	for (size_t j = 0; j < words && j < 64; j++) {
		unsigned got = claim_word(h, c, cap, w0 + (wi - w0 + j) % words, r, out, k);
		if (got != 0)
			return got;
	}
	return 0;
}

/* How many of the n slots at out lie in c's window (w slots). */
static size_t in_window(const struct heap_class *c, void *const *out, unsigned n, size_t w)
{
	size_t inside = 0;
	for (unsigned j = 0; j < n; j++)
		inside += ((size_t)((char *)out[j] - c->base) >> c->shift) - c->front < w;
	return inside;
}

/* Headroom: a stripe grows once a claim would leave it less room than
 * headroom() (1/GROW_SLACK of its limit, and at least ROOM_GROUPS groups'
 * caps, or ROOM_BYTES of objects if that is less), not only at its limit.
 *
 * Why: at the limit every group is at its cap, so the group or two growth
 * adds are the only ones with room, and the next allocations all land
 * there: the slot after an object then held one allocated a few calls
 * before or after it, in every replica alike. plant_overflow's victim (one
 * of 1000 objects of 32 bytes) met the same neighbour in two heaps of 178,
 * and diehard -k 3 committed a wrong answer in 6 runs of 100. With room
 * kept over several groups, a group stays open for longer and takes
 * objects allocated over a longer stretch: two heaps then share the
 * victim's neighbour once in 900 (uniform placement over a fixed heap:
 * once in 1000; the placement before the groups' caps: once in 800, with
 * the neighbour taken in 65% of heaps instead of 47%). The cost: a stripe
 * holds up to 1/32 less per byte, and a small one up to ROOM_BYTES x M of
 * slots more. */

size_t heap_headroom(const struct heap_class *c)
{
	size_t least = room_floor(c), rel = atomic_load_explicit(&c->limit, memory_order_relaxed) / GROW_SLACK;
	return rel > least ? rel : least;
}

/* heap_claim in one stripe, growing it if allowed and needed. */
static unsigned claim_part(struct heap *h, struct heap_class *c, struct rng *r, void **out, unsigned k, bool grow)
{
	unsigned got = 0;

	pthread_mutex_lock(&c->lock);
	size_t live = live_of(c);
	/* Growth comes a little before the limit: headroom(). */
	size_t room = heap_headroom(c);
	if (grow && live + k + room > limit_of_part(c))
		(void)grow_locked(h, c, live + k + room, r); /* may fall short: claim what fits */
	size_t cap = c->top; /* placement stays below the bound */
	size_t limit = limit_of_part(c), w = h->window;
	bool clustered = h->clustered && c->group_shift >= 6; /* groups of whole words */
	while (got < k && (live = live_of(c)) < limit) {
		size_t from = 0, n = cap;
		unsigned most = k - got;
		if (limit - live < most)
			most = (unsigned)(limit - live);
		if (w != 0 && w < cap && window_find(c, cap, w)) {
			from = c->front;
			n = cap - from < w ? cap - from : w;
			size_t room = window_room(c, cap, w); /* >= 1: window_find */
			if (room < most)
				most = (unsigned)room;
		}
		unsigned n_got = clustered ? claim_cluster(h, c, cap, from, n, r, out + got, most) : 0;
		if (n_got == 0) {
			clustered = false; /* no word found: the rest of the batch scattered */
			n_got = claim_scattered(c, from, n, r, out + got, most);
			if (w != 0) /* the window itself, as a rule */
				c->wlive += from == c->front && n <= w ? n_got : in_window(c, out + got, n_got, w);
		}
		if (n_got == 0)
			break; /* no open group where the counts said room: cannot be */
		got += n_got;
	}
	if (live_of(c) > c->peak)
		c->peak = live_of(c);
	pthread_mutex_unlock(&c->lock);
	return got;
}

/* The calling thread's home stripe + 1 (0: not yet chosen). */
static __thread unsigned home_self __attribute__((tls_model("initial-exec")));
static _Atomic unsigned homes_given;

static unsigned home_stripe(void)
{
	if (__builtin_expect(home_self == 0, 0))
		home_self = atomic_fetch_add_explicit(&homes_given, 1, memory_order_relaxed) % HEAP_STRIPES + 1;
	return home_self - 1;
}

/* Room for claims in stripe c by its bound, read without its lock: a hint. */
static size_t room_of(const struct heap_class *c)
{
	size_t live = live_of(c), limit = limit_of_part(c);
	return live < limit ? limit - live : 0;
}

/* Whether a home stripe without room for k should grow rather than
 * borrow: it is small (its bound below a few batches), or the class is
 * within 1/8 of its whole bound. Reads the other stripes without their
 * locks (a hint), and only when the home stripe is out of room. */
static bool should_grow(struct heap *h, unsigned ci, const struct heap_class *home, unsigned k)
{
	if (limit_of_part(home) < 4 * (size_t)k)
		return true;
	size_t live = 0, limit = 0;
	for (unsigned s = 0; s < HEAP_STRIPES; s++) {
		const struct heap_class *c = heap_part(h, ci, s);
		live += live_of(c);
		limit += limit_of_part(c);
	}
	return (live + k) * 8 > limit * 7;
}

unsigned heap_claim(struct heap *h, unsigned ci, struct rng *r, void **out, unsigned k)
{
	unsigned home = home_stripe(), got;
	struct heap_class *c = heap_part(h, ci, home);
	/* The home stripe if it has room for the batch (and its headroom).
	 * Else a whole batch from another stripe with room for four (beyond
	 * its headroom), unless the class should grow: with room for one, a lender was left just full and its own
	 * threads grew it at their next claim, and so every stripe in turn
	 * while the class stood at half its bound (larson: 28 MB for 5.8 MB
	 * live, 16 MB now). The first such stripe after the home one: threads
	 * of different homes ask different stripes first. */
	if (room_of(c) < k + heap_headroom(c) && !should_grow(h, ci, c, k))
		for (unsigned j = 1; j < HEAP_STRIPES; j++) {
			struct heap_class *o = heap_part(h, ci, (home + j) % HEAP_STRIPES);
			if (room_of(o) >= 4 * (size_t)k + heap_headroom(o) && (got = claim_part(h, o, r, out, k, false)) != 0)
				return got;
		}
	/* Else the home stripe, grown; the others only when it cannot. */
	for (unsigned j = 0; j < HEAP_STRIPES; j++)
		if ((got = claim_part(h, heap_part(h, ci, (home + j) % HEAP_STRIPES), r, out, k, true)) != 0)
			return got;
	errno = ENOMEM;
	return 0;
}

unsigned heap_release(struct heap *h, unsigned ci, void *const *ptrs, unsigned n, bool freed)
{
	unsigned doubles = 0;
	size_t w = h->window;
	/* In chunks of 64, stripe by stripe, the stripe of the first slot not
	 * yet released first: most batches lie in one stripe, a thread's own,
	 * and take one pass. done marks the chunk's released slots. */
	for (unsigned k = 0; k < n; k += 64) {
		unsigned m = n - k < 64 ? n - k : 64;
		uint64_t all = m == 64 ? ~(uint64_t)0 : ((uint64_t)1 << m) - 1;
		for (uint64_t done = 0; done != all;) {
			unsigned first = (unsigned)__builtin_ctzll(~done);
			struct heap_class *c = heap_part_of(h, ptrs[k + first]);
			pthread_mutex_lock(&c->lock);
			/* The stripe's fields in locals (the bitmap stores could
			 * alias them); a slot already clear changes nothing. */
			bitmap_word *bits = c->bits;
			uint16_t *used = c->used;
			char *base = c->base;
			unsigned shift = c->shift, gs = c->group_shift;
			size_t front = c->front, top = c->top, cleared = 0, inside = 0, above = 0;
			for (unsigned j = first; j < m; j++) {
				void *p = ptrs[k + j];
				if ((done >> j & 1) || heap_part_of(h, p) != c)
					continue;
				done |= (uint64_t)1 << j;
				size_t i = (size_t)((char *)p - base) >> shift;
				size_t was = bitmap_clear(bits, i), up = was & (i >= top);
				/* A group below top counts it (a group above
				 * top is counted afresh when top rises over it). */
				used[i >> gs] = (uint16_t)(used[i >> gs] - (was - up));
				cleared += was;
				inside += was & (i - front < w);
				above += up;
				doubles += 1 - (unsigned)was;
			}
			live_add(c, (size_t)0 - cleared);
			c->wlive -= inside;
			c->above -= above;
			look_back(c);
			pthread_mutex_unlock(&c->lock);
		}
	}
	if (doubles > 0)
		atomic_fetch_add_explicit(&h->double_frees, doubles, memory_order_relaxed);
	if (h->stats && freed) {
		atomic_fetch_add_explicit(&heap_part(h, ci, 0)->frees, n - doubles, memory_order_relaxed);
		heap_count_bytes(h, (size_t)(n - doubles) << sizeclass_shift(ci), false);
	}
	return doubles;
}

void *heap_alloc(struct heap *h, unsigned ci, struct rng *r, bool fill)
{
	void *p;
	if (heap_claim(h, ci, r, &p, 1) == 0)
		return NULL;
	return heap_hand_out(h, ci, p, r, fill);
}

enum heap_verdict heap_free(struct heap *h, void *p)
{
	if (!heap_check(h, p)) {
		atomic_fetch_add_explicit(&h->invalid_frees, 1, memory_order_relaxed);
		return HEAP_INVALID;
	}
	return heap_release(h, heap_class_index(h, p), &p, 1, true) ? HEAP_DOUBLE : HEAP_FREED;
}

void heap_count_bytes(struct heap *h, size_t bytes, bool add)
{
	if (!add) {
		atomic_fetch_sub_explicit(&h->live_bytes, bytes, memory_order_relaxed);
		return;
	}
	size_t now = atomic_fetch_add_explicit(&h->live_bytes, bytes, memory_order_relaxed) + bytes;
	size_t peak = atomic_load_explicit(&h->peak_bytes, memory_order_relaxed);
	while (now > peak &&
	       !atomic_compare_exchange_weak_explicit(&h->peak_bytes, &peak, now,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void heap_lock_all(struct heap *h)
{
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++)
		pthread_mutex_lock(&h->parts[pi].lock);
}

void heap_unlock_all(struct heap *h)
{
	for (unsigned pi = NCLASSES * HEAP_STRIPES; pi-- > 0;)
		pthread_mutex_unlock(&h->parts[pi].lock);
}

void heap_reset_locks(struct heap *h)
{
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++)
		pthread_mutex_init(&h->parts[pi].lock, NULL);
}

void heap_totals(struct heap *h, struct heap_totals *t)
{
	memset(t, 0, sizeof *t);
	for (unsigned pi = 0; pi < NCLASSES * HEAP_STRIPES; pi++) {
		struct heap_class *c = &h->parts[pi];
		t->allocations += atomic_load_explicit(&c->allocations, memory_order_relaxed);
		t->frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
		pthread_mutex_lock(&c->lock);
		t->live_objects += live_of(c);
		t->live_bytes += live_of(c) << c->shift;
		t->committed += c->committed;
		pthread_mutex_unlock(&c->lock);
	}
}
