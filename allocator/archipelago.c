/* archipelago.c — Archipelago's sparse heap; see archipelago.h.
 *
 * Invariants (under the lock): pages[p].rec is the record of the object whose
 * page p is, ARCH_STRAY for a page mapped for a stray access, else 0; a
 * page of an object is HOT (read-write, on the hot list), COLD
 * (inaccessible, its bytes from its first to its last non-zero one in
 * pages[p].store: pages[p].stlen bytes from offset pages[p].stoff) or, for
 * objects of a page or more, PINNED (read-write, never compacted); hot
 * == the hot list's length <= hot_max after every operation; the pages
 * just before and after an object are never another object's.
 */
#include "archipelago.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "os.h"
#include "segv.h"
#include "sizeclass.h"
#include "stream.h"

#define ARCH_REGION_MAX ((size_t)64 << 30)
#define ARCH_REGION_MIN ((size_t)1 << 30)
#define ARCH_RECORDS ((size_t)1 << 22)
/* Freed objects kept whole (pages and contents) before release: at most
 * this many, holding at most a hot space's worth of bytes. */
#define ARCH_FREED 65536u
#define ARCH_STRAY UINT32_MAX
#define ARCH_TRIES 64
/* Objects are drawn from the region's first `window` pages: 1 GiB at
 * first, doubled whenever the pages held (live and freed objects') pass
 * 1/ARCH_SPARSITY of it. Drawing from all 64 GiB at once spread objects so
 * thin that each one touched a page of metadata and a page table of its
 * own, never given back: lighttpd grew by 4 KiB of each per request. */
#define ARCH_WINDOW_MIN ((size_t)1 << 30)
#define ARCH_SPARSITY 16

enum { PG_NONE, PG_HOT, PG_COLD, PG_PINNED };
enum { REC_FREE, REC_LIVE, REC_FREED };

struct arch_rec {
	uintptr_t user;
	size_t size;
	size_t first;
	uint32_t npages;
	uint32_t next; /* freed FIFO, or the free list */
	uint8_t state;
};

bool arch_on;
uintptr_t arch_lo, arch_hi;

static struct heap *heap;
static size_t page, npages, hot_max;
static size_t window, held; /* pages drawn from; pages of live and freed objects */
/* Per page of the region, in one array: pages are drawn at random, so
 * seven arrays touched seven metadata pages per object (lighttpd's 13,500
 * objects made 263 MiB of metadata resident); one 32-byte entry touches
 * one. */
struct arch_page {
	_Atomic uint32_t rec; /* its object's record; ARCH_STRAY; 0: none */
	uint8_t state;        /* PG_* */
	uint32_t stlen, stoff; /* a cold page's stored bytes: [stoff, stoff + stlen) */
	uint32_t prev, next;  /* hot list, page + 1 (0: none) */
	void *store;
};
static struct arch_page *pages;
static uint32_t hot_head, hot_tail;
static struct arch_rec *recs;
static size_t rec_bump = 1, rec_free;
static uint32_t freed_head, freed_tail;
static size_t freed_count, freed_bytes;
static size_t objects, live, hot, cold, pinned, compacted_bytes, restores, stray_pages;
static atomic_flag spin = ATOMIC_FLAG_INIT;

bool arch_parse(const char *s, size_t *hot_pages)
{
	size_t v = 0;
	const char *p = s;
	if (*p == '\0')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > ((size_t)1 << 24))
			return false;
		v = v * 10 + (size_t)(*p - '0');
	}
	if (*p != '\0' || v < 16 || v > ((size_t)1 << 24))
		return false;
	*hot_pages = v;
	return true;
}

void arch_lock(void)
{
	while (atomic_flag_test_and_set_explicit(&spin, memory_order_acquire))
		sched_yield();
}

void arch_unlock(void)
{
	atomic_flag_clear_explicit(&spin, memory_order_release);
}

void arch_reset_lock(void)
{
	atomic_flag_clear(&spin);
}

static void *meta(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

bool arch_start(size_t hot_pages, struct heap *h)
{
	page = os_page_size();
	size_t len = ARCH_REGION_MAX;
	void *lo;
	while ((lo = os_reserve(len, page)) == NULL && len > ARCH_REGION_MIN)
		len /= 2;
	if (lo == NULL)
		return false;
	npages = len / page;
	window = ARCH_WINDOW_MIN / page < npages ? ARCH_WINDOW_MIN / page : npages;
	pages = meta(npages * sizeof *pages);
	recs = meta(ARCH_RECORDS * sizeof *recs);
	if (pages == NULL || recs == NULL || !segv_install())
		return false; /* the reservations stay: start-up fails once per process */
	heap = h;
	hot_max = hot_pages;
	arch_lo = (uintptr_t)lo;
	arch_hi = arch_lo + len;
	arch_on = true;
	return true;
}

static inline char *page_addr(size_t pg)
{
	return (char *)(arch_lo + pg * page);
}

/* ---- the hot list ---- */

static void hot_push(size_t pg)
{
	uint32_t id = (uint32_t)pg + 1;
	pages[pg].prev = hot_tail;
	pages[pg].next = 0;
	if (hot_tail != 0)
		pages[hot_tail - 1].next = id;
	else
		hot_head = id;
	hot_tail = id;
	hot++;
}

static void hot_remove(size_t pg)
{
	uint32_t p = pages[pg].prev, n = pages[pg].next;
	if (p != 0)
		pages[p - 1].next = n;
	else
		hot_head = n;
	if (n != 0)
		pages[n - 1].prev = p;
	else
		hot_tail = p;
	hot--;
}

/* Compacts hot page pg: its non-zero prefix into a heap block, the page
 * released. Left hot when no block can be had. */
static void evict(size_t pg, struct rng *r)
{
	char *a = page_addr(pg);
	/* Read-only first: a writer on another thread now faults and waits
	 * for the lock, and writes to the restored copy. */
	if (mprotect(a, page, PROT_READ) != 0)
		return;
	/* The non-zero bytes: [lo, hi). An object sits at a random offset of
	 * its page (colouring), so the zeros before it are skipped too. */
	size_t hi = page, lo = 0;
	while (hi >= 8) {
		uint64_t w;
		memcpy(&w, a + hi - 8, 8);
		if (w != 0)
			break;
		hi -= 8;
	}
	while (hi > 0 && a[hi - 1] == 0)
		hi--;
	while (lo + 8 <= hi) {
		uint64_t w;
		memcpy(&w, a + lo, 8);
		if (w != 0)
			break;
		lo += 8;
	}
	while (lo < hi && a[lo] == 0)
		lo++;
	size_t n = hi - lo;
	void *blk = NULL;
	if (n > 0) {
		blk = heap_alloc(heap, sizeclass_of(n), r, false);
		if (blk == NULL) {
			(void)mprotect(a, page, PROT_READ | PROT_WRITE);
			return;
		}
		memcpy(blk, a + lo, n);
	}
	(void)os_discard(a, page);
	hot_remove(pg);
	pages[pg].store = blk;
	pages[pg].stlen = (uint32_t)n;
	pages[pg].stoff = (uint32_t)lo;
	pages[pg].state = PG_COLD;
	cold++;
	compacted_bytes += n;
}

/* Keeps the hot space within its bound, sparing page keep. */
static void hot_trim(size_t keep, struct rng *r)
{
	while (hot > hot_max && hot_head != 0) {
		size_t pg = hot_head - 1;
		if (pg == keep)
			break;
		size_t before = hot;
		evict(pg, r);
		if (hot == before)
			break; /* no memory for the copy: stay over the bound */
	}
}

static void restore(size_t pg, struct rng *r)
{
	char *a = page_addr(pg);
	if (mprotect(a, page, PROT_READ | PROT_WRITE) != 0)
		return;
	if (pages[pg].stlen != 0) {
		memcpy(a + pages[pg].stoff, pages[pg].store, pages[pg].stlen);
		(void)heap_free(heap, pages[pg].store);
	}
	pages[pg].store = NULL;
	pages[pg].stlen = 0;
	pages[pg].state = PG_HOT;
	cold--;
	restores++;
	hot_push(pg);
	hot_trim(pg, r);
}

/* ---- objects ---- */

static bool pages_free(size_t first, size_t n)
{
	for (size_t p = first - 1; p <= first + n; p++)
		if (atomic_load_explicit(&pages[p].rec, memory_order_relaxed) != 0)
			return false;
	return true;
}

void *arch_alloc(size_t size, size_t align, struct rng *r, bool fill, bool zeroed)
{
	size_t rounded, n;
	if (!os_page_object(size, &align, page, &rounded, &n))
		return NULL;
	/* Colouring: an object smaller than a page starts at a random aligned
	 * offset of it. */
	size_t offset = n == 1 ? align * (size_t)rng_below(r, (page - rounded) / align + 1) : 0;
	arch_lock();
	size_t ri = rec_free != 0 ? rec_free : rec_bump;
	if (ri >= ARCH_RECORDS) {
		arch_unlock();
		return NULL;
	}
	while ((held + n) * ARCH_SPARSITY > window && window < npages)
		window = 2 * window < npages ? 2 * window : npages;
	size_t first = 0;
	for (int t = 0; t < ARCH_TRIES && first == 0; t++) {
		size_t f = 1 + (size_t)rng_below(r, window - n - 2);
		if (pages_free(f, n))
			first = f;
	}
	if (first == 0 || mprotect(page_addr(first), n * page, PROT_READ | PROT_WRITE) != 0) {
		arch_unlock();
		return NULL;
	}
	held += n;
	if (ri == rec_free)
		rec_free = recs[ri].next;
	else
		rec_bump++;
	struct arch_rec *rec = &recs[ri];
	*rec = (struct arch_rec){ .user = (uintptr_t)page_addr(first) + offset, .size = size, .first = first,
				  .npages = (uint32_t)n, .next = 0, .state = REC_LIVE };
	/* An object of a page or more is pinned: never compacted, outside the
	 * hot space. Such objects are the I/O buffers (stdio's 4 KiB, iostream's
	 * 8 KiB) that the kernel reads and writes, and a cold page would fail
	 * those system calls with EFAULT rather than fault. */
	bool pin = size >= page;
	for (size_t p = first; p < first + n; p++) {
		atomic_store_explicit(&pages[p].rec, (uint32_t)ri, memory_order_relaxed);
		pages[p].state = pin ? PG_PINNED : PG_HOT;
		if (!pin)
			hot_push(p);
	}
	if (pin)
		pinned += n;
	objects++;
	live++;
	hot_trim(first + n - 1, r);
	void *user = (void *)rec->user;
	arch_unlock();
	/* Fresh pages read zero; an access to one compacted meanwhile faults
	 * and is restored. */
	if (fill && !zeroed)
		rng_fill(r, user, size);
	return user;
}

/* Releases a freed object's pages (with the lock). */
static void release(uint32_t ri)
{
	struct arch_rec *rec = &recs[ri];
	for (size_t p = rec->first; p < rec->first + rec->npages; p++) {
		if (pages[p].state == PG_HOT) {
			hot_remove(p);
		} else if (pages[p].state == PG_PINNED) {
			pinned--;
		} else if (pages[p].state == PG_COLD) {
			if (pages[p].stlen != 0)
				(void)heap_free(heap, pages[p].store);
			pages[p].store = NULL;
			pages[p].stlen = 0;
			cold--;
		}
		pages[p].state = PG_NONE;
		atomic_store_explicit(&pages[p].rec, 0, memory_order_relaxed);
	}
	(void)os_discard(page_addr(rec->first), rec->npages * page);
	held -= rec->npages;
	rec->state = REC_FREE;
	rec->next = (uint32_t)rec_free;
	rec_free = ri;
}

static uint32_t record_at(const void *p)
{
	size_t pg = ((uintptr_t)p - arch_lo) / page;
	uint32_t ri = atomic_load_explicit(&pages[pg].rec, memory_order_relaxed);
	if (ri == 0 || ri == ARCH_STRAY || recs[ri].user != (uintptr_t)p)
		return 0;
	return ri;
}

int arch_free(void *p)
{
	arch_lock();
	uint32_t ri = record_at(p);
	int verdict = ri == 0 ? 2 : recs[ri].state == REC_FREED ? 1 : 0;
	if (verdict == 0) {
		struct arch_rec *rec = &recs[ri];
		rec->state = REC_FREED;
		rec->next = 0;
		if (freed_tail != 0)
			recs[freed_tail].next = ri;
		else
			freed_head = ri;
		freed_tail = ri;
		freed_count++;
		freed_bytes += rec->size;
		live--;
		/* A freed buffer is no longer the kernel's to fill: its pinned
		 * pages join the hot space, to be compacted in turn. */
		bool unpinned = false;
		for (size_t pg = rec->first; pg < rec->first + rec->npages; pg++)
			if (pages[pg].state == PG_PINNED) {
				pinned--;
				pages[pg].state = PG_HOT;
				hot_push(pg);
				unpinned = true;
			}
		while (freed_count > ARCH_FREED || (freed_bytes > hot_max * page && freed_head != ri)) {
			uint32_t old = freed_head;
			freed_head = recs[old].next;
			if (freed_head == 0)
				freed_tail = 0;
			freed_count--;
			freed_bytes -= recs[old].size;
			release(old);
		}
		if (unpinned)
			hot_trim(SIZE_MAX, stream_get());
	}
	arch_unlock();
	return verdict;
}

/* The bytes an object owns: from its start to the end of its pages. A
 * realloc copies them all, as the heap copies a whole slot: an overflow
 * the program made past the size it asked for (into its own page, where it
 * harmed nothing) moves with the object. Copying only the size asked for
 * lost those bytes: python3, given objects 4 bytes short by the fault
 * injector, crashed in 1 run of 2. */
static size_t owned(const struct arch_rec *rec)
{
	return (uintptr_t)page_addr(rec->first + rec->npages) - rec->user;
}

size_t arch_kept(const void *p)
{
	arch_lock();
	uint32_t ri = record_at(p);
	size_t size = ri != 0 ? owned(&recs[ri]) : 0;
	arch_unlock();
	return size;
}

size_t arch_usable(const void *p)
{
	arch_lock();
	uint32_t ri = record_at(p);
	size_t size = ri != 0 && recs[ri].state == REC_LIVE ? owned(&recs[ri]) : 0;
	arch_unlock();
	return size;
}

bool arch_fault(const siginfo_t *si, void *uctx)
{
	(void)uctx;
	size_t pg = ((uintptr_t)si->si_addr - arch_lo) / page;
	arch_lock();
	uint32_t ri = atomic_load_explicit(&pages[pg].rec, memory_order_relaxed);
	bool ok = true;
	if (ri == 0) {
		/* No object's: an overflow past an object's pages, or a wild
		 * pointer. A zero page, used by nothing else. */
		ok = mprotect(page_addr(pg), page, PROT_READ | PROT_WRITE) == 0;
		if (ok) {
			atomic_store_explicit(&pages[pg].rec, ARCH_STRAY, memory_order_relaxed);
			stray_pages++;
		}
	} else if (ri != ARCH_STRAY && pages[pg].state == PG_COLD) {
		restore(pg, stream_get());
		ok = pages[pg].state == PG_HOT;
	}
	/* Otherwise another thread restored it meanwhile: retry the access. */
	arch_unlock();
	return ok;
}

/* Restores page pg if it is an object's and cold; under the lock. */
static void restore_if_cold(size_t pg)
{
	arch_lock();
	uint32_t ri = atomic_load_explicit(&pages[pg].rec, memory_order_relaxed);
	if (ri != 0 && ri != ARCH_STRAY && pages[pg].state == PG_COLD)
		restore(pg, stream_get());
	arch_unlock();
}

void arch_prepare(uintptr_t a, size_t n)
{
	if (!arch_on || n == 0 || a - arch_lo >= arch_hi - arch_lo)
		return;
	uintptr_t last = n - 1 > arch_hi - 1 - a ? arch_hi - 1 : a + (n - 1);
	for (size_t pg = (a - arch_lo) / page; pg <= (last - arch_lo) / page; pg++) {
		restore_if_cold(pg);
		/* Past an object's pages lies the sea: the kernel faults there
		 * as it would have, and a huge n walks no further. */
		uint32_t ri = atomic_load_explicit(&pages[pg].rec, memory_order_relaxed);
		if (ri == 0 || ri == ARCH_STRAY)
			return;
	}
}

void arch_prepare_string(const char *s)
{
	uintptr_t a = (uintptr_t)s;
	if (!arch_on || !arch_contains(s))
		return;
	for (size_t pg = (a - arch_lo) / page; pg < npages; pg++) {
		restore_if_cold(pg);
		/* The string goes on past this page only if no NUL is left in
		 * it; a page that holds no object ends the walk (the kernel
		 * faults there as it would have). */
		uint32_t ri = atomic_load_explicit(&pages[pg].rec, memory_order_relaxed);
		if (ri == 0 || ri == ARCH_STRAY)
			return;
		uintptr_t from = a > arch_lo + pg * page ? a : arch_lo + pg * page;
		if (memchr((const void *)from, '\0', arch_lo + (pg + 1) * page - from) != NULL)
			return;
	}
}

void arch_totals(struct arch_totals *t)
{
	arch_lock();
	*t = (struct arch_totals){ .objects = objects, .live = live, .hot = hot, .cold = cold, .pinned = pinned,
				   .compacted_bytes = compacted_bytes, .restores = restores,
				   .stray_pages = stray_pages };
	arch_unlock();
}
