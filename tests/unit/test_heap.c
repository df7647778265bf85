/* Unit tests of the small-object heap: size classes, bitmaps, placement,
 * the 1/M bound, growth, exhaustion, validity checks on free, fill, threads. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bitmap.h"
#include "heap.h"
#include "sizeclass.h"
#include "live.h"
#include "tap.h"

static struct config config_with(unsigned m_fixed, bool fill, uint64_t seed)
{
	struct config c = { .seed = { seed, 0 }, .seed_given = true, .m_fixed = m_fixed,
			    .fill = fill, .stats = true, .safe_strings = true };
	return c;
}

static void test_sizeclasses(void)
{
	CHECK(sizeclass_of(0) == 0 && sizeclass_of(1) == 0 && sizeclass_of(16) == 0, "1..16 bytes: class 0");
	CHECK(sizeclass_of(17) == 1 && sizeclass_of(32) == 1 && sizeclass_of(33) == 2, "17..32: class 1, 33: class 2");
	CHECK(sizeclass_of(SMALL_MAX) == NCLASSES - 1, "SMALL_MAX is the last class");
	int ok = 1;
	for (size_t n = 1; n <= SMALL_MAX; n++) {
		size_t s = sizeclass_size(sizeclass_of(n));
		ok &= s >= n && (s == SMALL_MIN || s / 2 < n);
	}
	CHECK(ok, "every size up to SMALL_MAX rounds to the next power of two (at least 16)");
}

static void test_bitmap(void)
{
	bitmap_word bits[3] = { 0, 0, 0 };
	CHECK(bitmap_try_set(bits, 130), "set a clear bit");
	CHECK(!bitmap_try_set(bits, 130), "setting a set bit fails");
	CHECK(bitmap_test(bits, 130) && !bitmap_test(bits, 129) && !bitmap_test(bits, 131), "only that bit is set");
	CHECK(bitmap_clear(bits, 130) && !bitmap_clear(bits, 130), "clear reports whether the bit was set");
	CHECK(bitmap_try_set(bits, 0) && bitmap_try_set(bits, 63) && bitmap_try_set(bits, 64), "word edges");
	CHECK(atomic_load(&bits[0]) == (1ULL | (1ULL << 63)) && atomic_load(&bits[1]) == 1, "bits land in the right words");
}

/* Whether stripe c's groups keep heap.h's invariants: top in whole
 * groups; each group below top within its cap and its count right; the
 * caps summing to the limit. With the lock. */
static bool groups_consistent(struct heap_class *c)
{
	size_t gsize = (size_t)1 << c->group_shift, top = c->top;
	bool ok = top % gsize == 0 && c->limit == top / gsize * c->group_cap;
	for (size_t g = 0; g * gsize < top; g++) {
		size_t below = 0;
		for (size_t i = g * gsize; i < (g + 1) * gsize; i++)
			below += bitmap_test(c->bits, i);
		ok &= below <= c->group_cap && c->used[g] == below;
	}
	return ok;
}

/* Every stripe of class ci within its 1/M bound, its groups consistent. */
static bool class_within_bound(struct heap *h, unsigned ci)
{
	bool ok = true;
	for (unsigned s = 0; s < HEAP_STRIPES; s++) {
		struct heap_class *c = heap_part(h, ci, s);
		pthread_mutex_lock(&c->lock);
		size_t live = c->live, limit = c->limit, top = c->top, cap = atomic_load(&c->capacity);
		ok &= groups_consistent(c);
		pthread_mutex_unlock(&c->lock);
		ok &= live <= limit && limit * h->m_fixed <= top * M_ONE && (top == 0 || limit < top) && top <= cap;
	}
	return ok;
}

static void test_alloc_free(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 1);
	struct heap *h = heap_create(&cfg, 30);
	struct rng r = rng_with(1);
	CHECK(h != NULL, "heap created");
	enum { N = 5000 };
	static void *p[N];
	int ok = 1, bound = 1;
	for (int i = 0; i < N; i++) {
		p[i] = heap_alloc(h, 1, &r, false);
		ok &= p[i] != NULL && heap_contains(h, p[i]) && ((uintptr_t)p[i] & 31) == 0 &&
		      heap_usable(h, p[i]) == 32;
		memset(p[i], i & 0xff, 32);
		bound &= class_within_bound(h, 1);
	}
	CHECK(ok, "5000 objects of 32 B: in the heap, 32-aligned, usable size 32");
	CHECK(bound, "the class never exceeds 1/M full while growing");
	int intact = 1;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < 32; j++)
			intact &= ((unsigned char *)p[i])[j] == (i & 0xff);
	CHECK(intact, "no two live objects overlap");

	int adjacent = 0;
	for (int i = 1; i < N; i++)
		adjacent += (char *)p[i] - (char *)p[i - 1] == 32;
	CHECK(adjacent < N / 20, "placement is random: consecutive objects rarely adjacent (%d of %d)", adjacent, N);

	CHECK(heap_free(h, (char *)p[0] + 16) == HEAP_INVALID, "interior pointer refused");
	CHECK(heap_usable(h, p[0]) == 32, "an interior free leaves the object allocated");
	CHECK(heap_free(h, (char *)p[0] + 1) == HEAP_INVALID, "misaligned pointer refused");
	struct heap_class *c = heap_part_of(h, p[0]);
	void *beyond = c->base + (atomic_load(&c->capacity) << c->shift);
	CHECK(heap_free(h, beyond) == HEAP_INVALID, "slot beyond capacity refused");
	size_t live_before = class_live(h, 1);
	CHECK(heap_free(h, p[0]) == HEAP_FREED, "a live object is freed");
	CHECK(heap_free(h, p[0]) == HEAP_DOUBLE, "a second free is a double free");
	CHECK(class_live(h, 1) == live_before - 1, "a double free does not change the count");
	CHECK(heap_usable(h, p[0]) == 0, "a freed object has no usable size");
	for (int i = 1; i < N; i++)
		heap_free(h, p[i]);
	CHECK(class_live(h, 1) == 0, "all freed: nothing live");
	CHECK(atomic_load(&h->live_bytes) == 0 && atomic_load(&h->peak_bytes) == (size_t)N * 32,
	      "stats: live bytes back to 0, peak = 5000 * 32");
	heap_destroy(h);
}

/* The groups' caps at several M, groups of one word (M <= 4) and of more
 * (M = 8, 100: caps of at least 16), windowed and not: churn keeps every
 * group within its cap, the counts and room bits right, and the class
 * within its bound; the heap's share of live slots is about 1/M. */
static void test_group_caps(void)
{
	static const unsigned ms[] = { 282 /* 1.1 */, 2 * M_ONE, 3 * M_ONE, 5 * M_ONE, 8 * M_ONE, 100 * M_ONE };
	enum { N = 6000 };
	static void *p[N];
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
		for (unsigned window = 0; window <= 12; window += 12) {
			struct config cfg = config_with(ms[mi], false, 40 + mi);
			cfg.window_shift = window;
			struct heap *h = heap_create(&cfg, 32);
			struct rng r = rng_with(40 + mi);
			bool ok = h != NULL;
			for (int i = 0; ok && i < N; i++)
				ok &= (p[i] = heap_alloc(h, 1, &r, false)) != NULL;
			bool bound = ok && class_within_bound(h, 1);
			/* Churn: free a random half, allocate it again, twice. */
			for (int round = 0; ok && round < 2; round++) {
				for (int i = 0; i < N; i++)
					if (rng_below(&r, 2)) {
						ok &= heap_free(h, p[i]) == HEAP_FREED;
						p[i] = NULL;
					}
				bound &= class_within_bound(h, 1);
				for (int i = 0; ok && i < N; i++)
					if (p[i] == NULL)
						ok &= (p[i] = heap_alloc(h, 1, &r, false)) != NULL;
				bound &= class_within_bound(h, 1);
			}
			size_t top = 0;
			for (unsigned s = 0; s < HEAP_STRIPES; s++)
				top += heap_part(h, 1, s)->top;
			double share = (double)N * ms[mi] / M_ONE / (double)top;
			CHECK(ok && bound && share > 0.85 && share <= 1.0,
			      "M = %u/256, window %s: churn keeps every group within its cap (live x M / top = %.3f)",
			      ms[mi], window ? "4096" : "all", share);
			for (int i = 0; i < N; i++)
				if (p[i] != NULL)
					(void)heap_free(h, p[i]);
			heap_destroy(h);
		}
}

static void test_m_and_exhaustion(void)
{
	/* 16 MiB per class: the 64 KiB class has 256 slots, 64 per stripe; one
	 * thread fills its home stripe, then the others. */
	struct config cfg = config_with(4 * M_ONE, false, 2);
	struct heap *h = heap_create(&cfg, 24);
	struct rng r = rng_with(2);
	unsigned top = NCLASSES - 1;
	size_t n = 0;
	void *p;
	while ((p = heap_alloc(h, top, &r, false)) != NULL)
		n++;
	CHECK(n == 256 / 4, "M=4: the 256-slot class takes exactly 64 objects (got %zu)", n);
	CHECK(errno == ENOMEM, "then NULL with ENOMEM");
	CHECK(class_live(h, top) == n, "a failed allocation is not counted");
	heap_destroy(h);

	cfg = config_with(M_ONE + M_ONE / 2, false, 2);
	h = heap_create(&cfg, 24);
	n = 0;
	while (heap_alloc(h, top, &r, false) != NULL)
		n++;
	/* Each stripe: 64 slots in groups, each of at most 2/3 of its slots,
	 * rounded down by no more than an eighth (a class of large slots). */
	struct heap_class *c = heap_part(h, top, 0);
	size_t per = (64 >> c->group_shift) * c->group_cap;
	CHECK(n == 4 * per && per <= 42 && per * 8 >= 42 * 7,
	      "M=1.5: 4 stripes of %zu objects (64 slots in groups of %u holding %u; got %zu)", per,
	      1u << c->group_shift, c->group_cap, n);
	heap_destroy(h);
}

static void test_fill_and_seed(void)
{
	struct config cfg = config_with(2 * M_ONE, true, 3);
	struct heap *a = heap_create(&cfg, 28), *b = heap_create(&cfg, 28);
	struct rng ra = rng_with(3), rb = rng_with(3), rc = rng_with(4);
	int same = 1, zeros = 0;
	for (int i = 0; i < 200; i++) {
		char *x = heap_alloc(a, 3, &ra, true), *y = heap_alloc(b, 3, &rb, true);
		same &= x - heap_part(a, 3, 0)->base == y - heap_part(b, 3, 0)->base && memcmp(x, y, 128) == 0;
		for (int j = 0; j < 128; j++)
			zeros += x[j] == 0;
	}
	CHECK(same, "same seed: same offsets and same fill bytes");
	CHECK(zeros < 200 * 128 / 64, "filled objects are random, not zero (%d zero bytes)", zeros);
	heap_destroy(b);
	b = heap_create(&cfg, 28);
	int differ = 0;
	for (int i = 0; i < 200; i++) {
		char *x = heap_alloc(a, 0, &ra, true), *y = heap_alloc(b, 0, &rc, true);
		differ += x - heap_part(a, 0, 0)->base != y - heap_part(b, 0, 0)->base;
	}
	CHECK(differ > 150, "different seeds: different placement (%d of 200 differ)", differ);

	/* Never-allocated heap memory reads random too. */
	struct heap_class *c = heap_part_of(a, heap_alloc(a, 5, &ra, true));
	size_t cap = atomic_load(&c->capacity);
	int fresh_zero = 0;
	for (size_t i = 0; i < (cap << c->shift); i++)
		fresh_zero += c->base[i] == 0;
	CHECK(fresh_zero < (int)((cap << c->shift) / 64), "unallocated slots are random-filled (%d zeros)", fresh_zero);
	heap_destroy(a);
	heap_destroy(b);
}

static void test_room(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 5);
	struct heap *h = heap_create(&cfg, 26);
	struct rng r = rng_with(5);
	char *p = heap_alloc(h, 2, &r, false);
	CHECK(heap_room(h, p) == 64 && heap_room(h, p + 5) == 59 && heap_room(h, p + 63) == 1,
	      "room runs to the end of the 64 B slot");
	heap_destroy(h);
}

/* Claimed slots of class ci in [from, from + n). */
static size_t claimed_in(struct heap_class *c, size_t from, size_t n)
{
	size_t total = 0;
	for (size_t i = from; i < from + n; i++)
		total += bitmap_test(c->bits, i);
	return total;
}

/* DIEHARD_WINDOW: placement in a moving window of W slots, never more than
 * 1/M full, the class bound kept, the window's count true. */
static void test_window(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 7);
	cfg.window_shift = 8; /* 256 slots */
	struct heap *h = heap_create(&cfg, 30);
	struct rng r = rng_with(7);
	struct heap_class *c = heap_part(h, 0, 0); /* this thread's home: the first to allocate */
	enum { N = 20000 };
	static void *p[N];
	int ok = 1, inv = 1, near = 0;
	for (int i = 0; i < N; i++) {
		p[i] = heap_alloc(h, 0, &r, false);
		ok &= p[i] != NULL;
		if (p[i] == NULL)
			break;
		memset(p[i], (unsigned char)i, 16);
		size_t slot = (size_t)((char *)p[i] - c->base) >> c->shift;
		size_t cap = atomic_load(&c->capacity);
		inv &= c->front % 256 == 0 && c->wlive == claimed_in(c, c->front, 256) && c->wlive * 2 <= 256 &&
		       class_within_bound(h, 0) && (cap <= 256 || slot - c->front < 256);
		if (i > 0)
			near += labs((long)((char *)p[i] - (char *)p[i - 1])) < 256 * 16;
		/* Free a random earlier object now and then, so windows are reused. */
		if (i % 3 == 2) {
			int j = (int)rng_below(&r, (uint64_t)i);
			if (p[j] != NULL && heap_free(h, p[j]) == HEAP_FREED)
				p[j] = NULL;
		}
	}
	CHECK(ok, "20000 objects in windows of 256 slots");
	CHECK(inv, "each lands in the window, which stays aligned, at most 1/M full, its count true");
	CHECK(near > N * 8 / 10, "consecutive objects land near each other (%d of %d within a window)", near, N);
	int intact = 1;
	for (int i = 0; i < N; i++)
		if (p[i] != NULL)
			intact &= *(unsigned char *)p[i] == (unsigned char)i;
	CHECK(intact, "no two live objects overlap");
	int adjacent = 0;
	for (int i = 1; i < 2000; i++)
		adjacent += p[i] != NULL && p[i - 1] != NULL && (char *)p[i] - (char *)p[i - 1] == 16;
	CHECK(adjacent < 2000 / 20, "still random inside the window (%d adjacent of 2000)", adjacent);
	for (int i = 0; i < N; i++)
		if (p[i] != NULL)
			heap_free(h, p[i]);
	CHECK(class_live(h, 0) == 0 && c->wlive == 0, "all freed: nothing live, window empty");
	heap_destroy(h);

	/* At the class limit every window may be just full: placement falls
	 * back on the whole class and still finds the last slots. */
	cfg = config_with(4 * M_ONE, false, 8);
	cfg.window_shift = 6;
	h = heap_create(&cfg, 24);
	unsigned top = NCLASSES - 1;
	size_t n = 0;
	while (heap_alloc(h, top, &r, false) != NULL)
		n++;
	CHECK(n == 256 / 4, "windowed, M=4: the 256-slot class still takes exactly 64 objects (got %zu)", n);
	heap_destroy(h);
}

/* Objects each thread takes: a whole 64-byte stripe's worth at its bound
 * (256 slots), so that the first stripe has no room to lend the second. */
#define HANDOFF 128

struct handoff {
	struct heap *h;
	void *p[HANDOFF];
	struct heap_class *part; /* the stripe the objects came from */
};

static void *alloc_some(void *arg)
{
	struct handoff *x = arg;
	struct rng r = rng_with(9);
	for (int i = 0; i < HANDOFF; i++)
		x->p[i] = heap_alloc(x->h, 2, &r, false);
	x->part = heap_part_of(x->h, x->p[0]);
	return NULL;
}

static void *free_all(void *arg)
{
	struct handoff *x = arg;
	for (int i = 0; i < HANDOFF; i++)
		heap_free(x->h, x->p[i]);
	return NULL;
}

/* Runs fn(arg) in a thread of its own (its own home stripe) to the end. */
static void run_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_create(&t, NULL, fn, arg);
	pthread_join(t, NULL);
}

/* Threads allocate from stripes of their own; a slot freed by another
 * thread goes back to its own stripe. */
static void test_stripes(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 9);
	struct heap *h = heap_create(&cfg, 28);
	struct handoff a = { .h = h }, b = { .h = h };
	run_thread(alloc_some, &a);
	run_thread(alloc_some, &b);
	int same = 1;
	for (int i = 0; i < HANDOFF; i++)
		same &= heap_part_of(h, a.p[i]) == a.part && heap_part_of(h, b.p[i]) == b.part;
	CHECK(same && a.part != b.part, "two threads, two stripes: each thread's objects in its own");
	CHECK(a.part->live == HANDOFF && b.part->live == HANDOFF, "each stripe counts its own");
	run_thread(free_all, &a);
	CHECK(a.part->live == 0 && b.part->live == HANDOFF, "freed by a third thread: back to the stripe they came from");
	free_all(&b);
	CHECK(b.part->live == 0 && class_within_bound(h, 2), "all back");
	heap_destroy(h);
}

static size_t word_of(const struct heap_class *c, const void *p)
{
	return (size_t)((const char *)p - c->base) >> c->shift >> 6;
}

/* Clustered placement (DIEHARD_PLACEMENT=clustered): a batch is random
 * free slots of one bitmap word (the next word only once that one is 1/M
 * full), in random order, no word more than 1/M full; scattered placement
 * (the default) spreads a batch over the window. Neither hands a batch out
 * in address order. */
static void test_clusters(void)
{
	for (int clustered = 1; clustered >= 0; clustered--) {
		const char *mode = clustered ? "clustered" : "scattered";
		struct config cfg = config_with(2 * M_ONE, false, 11);
		cfg.window_shift = 12;
		cfg.clustered = clustered;
		struct heap *h = heap_create(&cfg, 30);
		struct rng r = rng_with(11);
		struct heap_class *c = heap_part(h, 0, 0);
		enum { BATCHES = 200, K = 32 };
		static void *p[BATCHES][K];
		int sorted = 0, one_word = 0, full = 1;
		size_t words_met = 0;
		for (int b = 0; b < BATCHES; b++) {
			unsigned got = heap_claim(h, 0, &r, p[b], K);
			full &= got == K;
			int strict = 1;
			for (unsigned i = 1; i < got; i++)
				strict &= (char *)p[b][i] > (char *)p[b][i - 1];
			sorted += strict;
			/* Words met, and whether the first is at its 1/M whenever
			 * the batch goes on to another. */
			size_t w0 = word_of(c, p[b][0]), in_first = 0;
			for (unsigned i = 0; i < got; i++) {
				in_first += word_of(c, p[b][i]) == w0;
				int seen = 0;
				for (unsigned j = 0; j < i; j++)
					seen |= word_of(c, p[b][j]) == word_of(c, p[b][i]);
				words_met += !seen;
			}
			size_t cap = atomic_load(&c->capacity), valid = cap - w0 * 64 < 64 ? cap - w0 * 64 : 64;
			one_word += in_first == got || bitmap_count(atomic_load(&c->bits[w0])) == valid / 2;
		}
		size_t words = (atomic_load(&c->capacity) + 63) / 64, over = 0;
		for (size_t w = 0; w < words; w++)
			over += bitmap_count(atomic_load(&c->bits[w])) > 32;
		CHECK(full, "%s: 200 batches of 32", mode);
		CHECK(sorted == 0, "%s: no batch in address order (%d are)", mode, sorted);
		if (clustered) {
			CHECK(one_word == BATCHES, "clustered: a batch fills its word to 1/M before it takes another");
			CHECK(words_met <= BATCHES * 5 / 2, "clustered: a batch lies in one or two words (%zu words for %d batches)",
			      words_met, BATCHES);
			CHECK(over == 0, "clustered: no bitmap word more than 1/M full (%zu are)", over);
		} else {
			/* Spread over the groups with room: the whole window
			 * while the stripe is under its bound, the part it just
			 * grew by (a sixteenth) when it was at its bound. */
			CHECK(words_met >= BATCHES * 5, "scattered: a batch is spread over the window (%zu words for %d batches)",
			      words_met, BATCHES);
			CHECK(over == 0, "scattered: no bitmap word more than 1/M full (%zu are)", over);
		}
		for (int b = 0; b < BATCHES; b++)
			heap_release(h, 0, p[b], K, true);
		CHECK(class_live(h, 0) == 0 && class_within_bound(h, 0), "%s: all released", mode);
		heap_destroy(h);
	}
}

struct mover {
	struct heap *h;
	void **p;
	int n;
	int rounds;
};

static void *alloc_n(void *arg)
{
	struct mover *m = arg;
	struct rng r = rng_with(12);
	for (int i = 0; i < m->n; i++)
		m->p[i] = heap_alloc(m->h, 2, &r, false);
	return NULL;
}

/* Each round frees every object and allocates as many again, from this
 * thread's home stripe: the live data moves to it. */
static void *move_n(void *arg)
{
	struct mover *m = arg;
	struct rng r = rng_with(13);
	for (int round = 0; round < m->rounds; round++)
		for (int i = 0; i < m->n; i++) {
			if (m->p[i] != NULL)
				heap_free(m->h, m->p[i]);
			m->p[i] = heap_alloc(m->h, 2, &r, false);
		}
	return NULL;
}

/* Objects that move from one thread's stripe to another's do not make the
 * class M times the sum of each stripe's peak: a stripe at its bound
 * borrows room from the others before it grows. */
static void test_borrow(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 12);
	struct heap *h = heap_create(&cfg, 30);
	enum { N = 8192 };
	static void *p[N];
	struct mover m = { .h = h, .p = p, .n = N, .rounds = 3 };
	run_thread(alloc_n, &m);
	run_thread(move_n, &m);
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= p[i] != NULL;
	size_t cap = 0;
	for (unsigned s = 0; s < HEAP_STRIPES; s++)
		cap += atomic_load(&heap_part(h, 2, s)->capacity);
	CHECK(ok && class_live(h, 2) == N, "8192 objects moved from one thread's stripe to another's");
	CHECK(cap <= N * 2 * 5 / 4, "the class holds %zu slots for %d live at M = 2 (at most 1.25 M times)", cap, N);
	CHECK(class_within_bound(h, 2), "every stripe within its 1/M");
	heap_destroy(h);
}

struct worker {
	struct heap *h;
	uint64_t seed;
	int ok;
};

static void *churn(void *arg)
{
	struct worker *w = arg;
	struct rng r = rng_with(w->seed);
	enum { SLOTS = 512 };
	unsigned char *live[SLOTS] = { 0 };
	unsigned cls[SLOTS];
	w->ok = 1;
	for (int step = 0; step < 200000; step++) {
		unsigned k = (unsigned)rng_below(&r, SLOTS);
		if (live[k] != NULL) {
			size_t size = sizeclass_size(cls[k]);
			for (size_t j = 0; j < size; j += 7)
				w->ok &= live[k][j] == (unsigned char)(k ^ w->seed);
			w->ok &= heap_free(w->h, live[k]) == HEAP_FREED;
			live[k] = NULL;
		} else {
			cls[k] = (unsigned)rng_below(&r, 6);
			live[k] = heap_alloc(w->h, cls[k], &r, false);
			if (live[k] == NULL) {
				w->ok = 0;
				continue;
			}
			memset(live[k], (unsigned char)(k ^ w->seed), sizeclass_size(cls[k]));
		}
	}
	for (int k = 0; k < SLOTS; k++)
		if (live[k] != NULL)
			w->ok &= heap_free(w->h, live[k]) == HEAP_FREED;
	return NULL;
}

/* Resident pages of [p, p + len) (page-aligned). */
static size_t resident_pages(const void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, count = 0;
	unsigned char *v = calloc(n ? n : 1, 1);
	if (v == NULL || mincore((void *)p, len, v) != 0) {
		free(v);
		return (size_t)-1;
	}
	for (size_t i = 0; i < n; i++)
		count += v[i] & 1;
	free(v);
	return count;
}

/* The process's resident anonymous memory, KiB (a private page of a file
 * mapping counts once written). */
static long rss_anon_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "RssAnon: %ld", &kb) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return kb;
}

/* Zero bytes in [p, p + len). */
static size_t zeros_in(const unsigned char *p, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += p[i] == 0;
	return n;
}

/* Fill from the pool (heap.c): slots of 16 KiB and more read as random
 * without being written, cost memory only where the program writes, read
 * as random at every hand-out, agree under one seed and differ under
 * another; a pool whose descriptor the program took is never mapped, and
 * the heap fills by writing instead. */
static void test_pool_fill(void)
{
	enum { N = 200 };
	static unsigned char *p[N];
	const size_t size = 32 << 10;
	unsigned ci = sizeclass_of(size);
	struct config cfg = config_with(2 * M_ONE, true, 21);
	struct heap *h = heap_create(&cfg, 30), *twin = heap_create(&cfg, 30);
	struct rng r = rng_with(21), rt = rng_with(21);
	long before = rss_anon_kb();
	bool ok = h != NULL && twin != NULL;
	size_t zeros = 0;
	for (int i = 0; ok && i < N; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, true)) != NULL;
		if (ok)
			zeros += zeros_in(p[i], size);
	}
	long grown = rss_anon_kb() - before;
	CHECK(ok && grown < (long)(N * size / 1024 / 4),
	      "pool: %d objects of 32 KiB read (not written) cost %ld KiB of anonymous memory", N, grown);
	CHECK(zeros < N * size / 64, "pool: they read as random (%zu zero bytes in %zu)", zeros, N * size);
	struct heap_class *c = heap_part_of(h, p[0]);
	CHECK(atomic_load(&c->pooled) == atomic_load(&c->capacity) && c->top <= atomic_load(&c->pooled),
	      "pool: every slot of the class is mapped from the pool (%zu of %zu)", atomic_load(&c->pooled),
	      atomic_load(&c->capacity));
	unsigned char *q = heap_alloc(twin, ci, &rt, true);
	CHECK(q != NULL && q - (unsigned char *)heap_part_of(twin, q)->base ==
				   p[0] - (unsigned char *)c->base && memcmp(p[0], q, size) == 0,
	      "pool: the same seed gives the same bytes");

	/* Each handed out counts as written; so does one handed out without
	 * a fill (calloc's path: zeroed by the caller), or its next malloc
	 * would show what the program wrote into it. */
	size_t marked = 0;
	for (int i = 0; i < N; i++)
		marked += bitmap_test(c->dirty, (size_t)(p[i] - (unsigned char *)c->base) >> c->shift);
	CHECK(marked == N, "pool: every slot handed out is marked written (%zu of %d)", marked, N);
	for (int i = 0; ok && i < N; i++)
		ok &= heap_free(h, p[i]) == HEAP_FREED;
	for (int i = 0; ok && i < N; i++)
		ok &= (p[i] = heap_alloc(h, ci, &r, false)) != NULL;
	/* Written, freed, handed out again: random again. */
	for (int i = 0; i < N; i++)
		memset(p[i], 0xab, size);
	for (int i = 0; ok && i < N; i++)
		ok &= heap_free(h, p[i]) == HEAP_FREED;
	size_t stale = 0;
	for (int i = 0; ok && i < N; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, true)) != NULL;
		for (size_t b = 0; ok && b < size; b++)
			stale += p[i][b] == 0xab;
	}
	CHECK(ok && stale < N * size / 64,
	      "pool: objects handed out without a fill, written, freed and handed out again read as random "
	      "(%zu stale bytes in %zu)",
	      stale, N * size);
	for (int i = 0; i < N; i++)
		(void)heap_free(h, p[i]);

	/* Another seed: other bytes. */
	struct config other = config_with(2 * M_ONE, true, 22);
	struct heap *o = heap_create(&other, 30);
	struct rng ro = rng_with(22);
	unsigned char *x = o != NULL ? heap_alloc(o, ci, &ro, true) : NULL;
	size_t same = 0;
	for (size_t b = 0; x != NULL && q != NULL && b < size; b++)
		same += x[b] == q[b];
	CHECK(x != NULL && same < size / 64, "pool: another seed gives other bytes (%zu of %zu alike)", same, size);

	/* The program closes the pool's descriptor and opens a file of its
	 * own under that number: the next class's growth must not map it (a
	 * short file would fault). */
	int fd = h->pool.fd;
	char path[] = "/tmp/diehard-heap-pool-XXXXXX";
	int file = mkstemp(path);
	ok = fd >= 0 && file >= 0 && write(file, "mine", 4) == 4 && dup2(file, fd) == fd;
	unsigned big = sizeclass_of(64 << 10);
	unsigned char *y = ok ? heap_alloc(h, big, &r, true) : NULL;
	struct heap_class *cb = y != NULL ? heap_part_of(h, y) : NULL;
	CHECK(y != NULL && zeros_in(y, 64 << 10) < (64 << 10) / 64 && atomic_load(&cb->pooled) == 0 &&
		      zeros_in((unsigned char *)cb->base, atomic_load(&cb->capacity) << cb->shift) <
			      (atomic_load(&cb->capacity) << cb->shift) / 64,
	      "pool: a descriptor the program took is not mapped; the class is written random instead");
	if (file >= 0) {
		close(file);
		unlink(path);
	}
	if (x != NULL)
		heap_destroy(o);
	heap_destroy(twin);
	heap_destroy(h);
}

/* A pooled class's stripe lowered and grown back: the free slots it grew
 * back over, written and freed before, read as random again (the pool's
 * bytes), not as what the program wrote. (Free slots below the lowered
 * bound keep their last object's bytes until handed out, as in every
 * class: DieHard leaves freed objects intact.) */
static void test_pool_shrink(void)
{
	enum { N = 3000, KEEP = 10 };
	static unsigned char *p[N];
	const size_t size = 32 << 10, head = 4096;
	unsigned ci = sizeclass_of(size);
	struct config cfg = config_with(2 * M_ONE, true, 23);
	struct heap *h = heap_create(&cfg, 30);
	struct rng r = rng_with(23);
	bool ok = h != NULL;
	for (int i = 0; ok && i < N; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, true)) != NULL;
		if (ok)
			memset(p[i], 0xab, head);
	}
	if (!ok) {
		CHECK(ok, "pool shrink: %d objects of 32 KiB", N);
		return;
	}
	struct heap_class *c = heap_part_of(h, p[0]);
	size_t top_full = c->top;
	for (int i = KEEP; i < N; i++)
		ok &= heap_free(h, p[i]) == HEAP_FREED;
	size_t top_low = c->top;
	for (int i = KEEP; ok && i < N / 2; i++)
		ok &= (p[i] = heap_alloc(h, ci, &r, true)) != NULL;
	size_t stale = 0, seen = 0;
	for (size_t i = top_low; i < c->top; i++) {
		if (bitmap_test(c->bits, i))
			continue;
		const unsigned char *q = (const unsigned char *)c->base + (i << c->shift);
		for (size_t b = 0; b < head; b++)
			stale += q[b] == 0xab;
		seen++;
	}
	CHECK(ok && top_low < top_full / 2 && c->top > top_low && seen > 50 && stale < seen * head / 64,
	      "pool shrink: bound %zu -> %zu -> %zu slots; %zu free slots read as random (%zu stale bytes)", top_full,
	      top_low, c->top, seen, stale);
	heap_destroy(h);
}

/* A stripe whose objects are freed lowers its placement bound after a
 * period of release passes and drops the memory of its free pages; claims
 * stay below the bound; growing again raises it, random-filled again with
 * fill on; the objects that stayed are intact throughout. */
static void test_shrink(bool fill)
{
	struct config cfg = config_with(2 * M_ONE, fill, 11);
	struct heap *h = heap_create(&cfg, 30);
	struct rng r = rng_with(11);
	unsigned ci = sizeclass_of(256);
	enum { N = 20000, KEEP = 100 };
	static unsigned char *p[N];
	bool ok = h != NULL;
	for (int i = 0; ok && i < N; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, false)) != NULL;
		if (ok)
			memset(p[i], i & 0xff, 256);
	}
	CHECK(ok, "fill %d: %d objects of 256 bytes", fill, N);
	if (!ok)
		return;
	struct heap_class *c = heap_part_of(h, p[0]);
	size_t cap = atomic_load(&c->capacity), top_full = c->top;
	size_t before = resident_pages(c->base, cap << c->shift);
	for (int i = KEEP; i < N; i++)
		ok &= heap_free(h, p[i]) == HEAP_FREED;
	size_t top_low = c->top;
	size_t above = resident_pages(c->base + (top_low << c->shift), (cap - top_low) << c->shift);
	CHECK(ok && top_low <= top_full / 8 && top_low >= 2 * KEEP && class_within_bound(h, ci),
	      "fill %d: all but %d freed: the bound went from %zu to %zu slots", fill, KEEP, top_full, top_low);
	CHECK(above * 10 < before, "fill %d: pages above it dropped (%zu resident of %zu before)", fill, above, before);
	for (int i = 0; i < KEEP; i++)
		for (int b = 0; b < 256; b++)
			ok &= p[i][b] == (i & 0xff);
	CHECK(ok, "fill %d: the objects that stayed are intact", fill);
	for (int i = KEEP; ok && i < KEEP + 50; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, false)) != NULL;
		ok &= ok && (size_t)(p[i] - (unsigned char *)c->base) >> c->shift < c->top;
	}
	CHECK(ok, "fill %d: new claims land below the bound", fill);
	for (int i = KEEP + 50; ok && i < N; i++) {
		ok &= (p[i] = heap_alloc(h, ci, &r, false)) != NULL;
		if (ok)
			memset(p[i], i & 0xff, 256);
	}
	for (int i = 0; ok && i < KEEP; i++)
		for (int b = 0; b < 256; b++)
			ok &= p[i][b] == (i & 0xff);
	CHECK(ok && c->top >= top_full / 2 && class_within_bound(h, ci),
	      "fill %d: grown back to %zu slots, within bound, the first objects intact", fill, c->top);
	if (fill) {
		/* Free slots below the raised bound read as random, not zeros. */
		size_t zero = 0, seen = 0;
		for (size_t i = top_low; i < c->top; i++) {
			if (bitmap_test(c->bits, i))
				continue;
			const unsigned char *q = (const unsigned char *)c->base + (i << c->shift);
			bool all = true;
			for (int b = 0; b < 256; b++)
				all &= q[b] == 0;
			zero += all;
			seen++;
		}
		CHECK(seen > 0 && zero == 0, "fill 1: none of %zu free slots over the dropped pages reads as zeros", seen);
	}
	for (int i = 0; i < N; i++)
		(void)heap_free(h, p[i]);
	heap_destroy(h);
}

static void test_threads(void)
{
	struct config cfg = config_with(2 * M_ONE, false, 6);
	struct heap *h = heap_create(&cfg, 30);
	pthread_t t[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .h = h, .seed = 100 + (uint64_t)i };
		pthread_create(&t[i], NULL, churn, &w[i]);
	}
	int ok = 1;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ok &= w[i].ok;
	}
	CHECK(ok, "4 threads churning 6 classes: no object shared, every free valid");
	size_t live = 0;
	int bound = 1;
	for (unsigned ci = 0; ci < NCLASSES; ci++) {
		live += class_live(h, ci);
		bound &= class_within_bound(h, ci);
	}
	CHECK(live == 0 && bound, "afterwards nothing is live and every class is within 1/M");
	heap_destroy(h);
}

int main(void)
{
	test_sizeclasses();
	test_bitmap();
	test_alloc_free();
	test_m_and_exhaustion();
	test_group_caps();
	test_fill_and_seed();
	test_room();
	test_window();
	test_stripes();
	test_clusters();
	test_borrow();
	test_shrink(false);
	test_shrink(true);
	test_pool_fill();
	test_pool_shrink();
	test_threads();
	return tap_done();
}
