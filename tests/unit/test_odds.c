/* Statistical tests of the heap's placement against DieHard's odds (paper
 * 001, section 6), with fixed seeds and a fixed number of heaps.
 *
 * The model. The paper places each object uniformly among the free slots of
 * a heap at most 1/M full, and its theorems follow: the slot after an
 * object is free with probability F/H (1 - the density); an overflow of O
 * objects is masked in at least one of k replicas with probability
 * 1 - (1 - (F/H)^O)^k (Theorem 1); a freed slot is still intact after A
 * allocations (no frees) in at least one of k replicas with probability
 * 1 - (A/Q)^k, Q the free slots placement draws from (Theorem 2). Our heap
 * grows (top) in whole groups of slots (64, a bitmap word, as a rule;
 * fewer for slots over 1 KiB, more where M > 4: heap.h), caps every group
 * at its slots / M rounded down (the stripe's limit is the sum of the
 * caps), and draws from a window of W slots when the stripe is larger. So
 * the reference is: each claim uniform among the ELIGIBLE slots, the free
 * slots below top in groups below their cap, inside the window when the
 * stripe is larger than W. The claim that took slot j drew
 * from the stripe as it stood just before (the bitmap without j, after any
 * growth or window move, which do not depend on the draw), so the tests
 * compute its eligible set exactly.
 *
 * What is compared (each rate printed beside its formula, "# ..."):
 * 1. Neighbours: the fraction of objects whose next slot is live, against
 *    uniform placement within each group at that group's own density
 *    (groups differ by design: the newest hold the stripe's headroom, and
 *    with W smaller than the stripe windows fill in turn). The whole-span
 *    figure (n - 1) / (top - 1) is printed too. Never above 1/M: the mean
 *    rate, and each word-aligned eighth of [0, top) (5 SDs of a binomial
 *    eighth at density 1/M).
 * 2. Evenness: chi-squared of up to 8 equal buckets within each group; of
 *    the eighths of each full word (a word's slots filled unevenly, as
 *    when top grows through a word and its low slots fill first, shows
 *    here); and no group above its cap (exact).
 * 3. Orders: all at once; churn (a random walk of allocations and frees
 *    between n/2 and n live, 4n steps, so the layout turns over); a random
 *    half freed then allocated again. 4. Four threads, one stripe each
 *    (heap_alloc claims from the caller's home stripe), per stripe.
 * 5. Sequence: per claim, P(right after the previous claim) and P(within
 *    64 slots of it) from its eligible set; and every claim eligible.
 * 6. Reuse: a stripe filled to its bound, 70% freed, then per trial one
 *    object freed and A claims made without frees (the paper's worst
 *    case); the A are freed after and the victim replaced, so every trial
 *    starts at the same live count. P(the slot handed out again) against
 *    A/Q, Q the eligible slots of the range it lies in. A window holds it
 *    only while the window covers it: victims inside the window against
 *    A/Q of the window, outside against the claims' own odds (nil until
 *    the window comes round).
 * 7. Seeds one apart (the worst case of the generator's mixing; the
 *    supervisor draws replica seeds from urandom), the same requests: the
 *    same slot for the same request; the next-slot events of two heaps
 *    (covariance over requests, at the bound); Theorem 1 for O = 1, 2 and
 *    k = 1, 3 at the bound (the paper's guarantee at F/H = 1 - 1/M, and no
 *    more than at the stripe's own F/H); Theorem 2 for k = 3 at 30% of it;
 *    and whose object lies after an object in two heaps (7e): the odds
 *    that two replicas' overflows corrupt them alike.
 *
 * "At the bound": as full as a stripe gets before it grows (its limit
 * less its headroom, heap_headroom).
 *
 * Bounds: Z = 5 standard errors, two-sided unless said. Objects of one heap
 * are correlated (a group at its cap), heaps are independent: each rate is
 * a mean over heaps, its standard error from their sample variance (t with
 * 19 degrees of freedom at 20 heaps: a 5-SE excursion has odds about 1e-4
 * per check, and the seeds are fixed, so a pass or failure reproduces).
 * Where claims are counted one by one (5, 6, 7a), the count minus the sum
 * of each claim's conditional probability is a martingale with variance
 * the sum of p (1 - p): exact under the model whatever the correlations.
 * Chi-squared sums (corrected for sampling without replacement) are held
 * to Wilson and Hilferty's normal approximation at z = 5. Real deviations
 * are far outside: uniform draws over [0, top) growing by sixteenths make
 * the next slot taken 1.3 times as often, 20 to 60 SEs here. One allowance
 * is a model effect, not noise: a word holding exactly its share lowers
 * the within-word neighbour rate, to at most (1 - d) / 64 below uniform at
 * density d; the lower bounds allow twice that (words cut by top or by
 * region edges), and Theorem 1's upper bounds the masking that gives.
 * A rate below uniform only helps masking; nothing allows one above it.
 *
 * The whole binary takes about 6 s of CPU under ASan and UBSan on one core.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"
#include "heap.h"
#include "live.h"
#include "sizeclass.h"
#include "tap.h"

#define Z 5.0
#define HEAPS 20

static struct config config_with(unsigned m_fixed, unsigned window_shift, uint64_t seed)
{
	struct config c = { .seed = { seed, 0 }, .seed_given = true, .m_fixed = m_fixed,
			    .window_shift = window_shift, .safe_strings = true };
	return c;
}

/* No libm in the unit tests' link: a square root by Newton's method. */
static double root(double x)
{
	if (x <= 0)
		return 0;
	double y = x > 1 ? x : 1;
	for (int i = 0; i < 200; i++) {
		double next = (y + x / y) / 2;
		if (next >= y)
			break;
		y = next;
	}
	return y;
}

static double power(double x, unsigned k)
{
	double y = 1;
	while (k-- > 0)
		y *= x;
	return y;
}

/* A mean over independent units (heaps, groups) and its standard error. */
struct mean {
	double sum, sq;
	unsigned n;
};

static void mean_add(struct mean *m, double x)
{
	m->sum += x;
	m->sq += x * x;
	m->n++;
}

static double mean_of(const struct mean *m)
{
	return m->n ? m->sum / m->n : 0;
}

static double mean_se(const struct mean *m)
{
	if (m->n < 2)
		return 0;
	double mu = mean_of(m), var = (m->sq - m->n * mu * mu) / (m->n - 1);
	return root(var > 0 ? var : 0) / root(m->n);
}

/* The chi-squared value with df degrees of freedom exceeded with the odds
 * of a Z-sigma normal excursion (Wilson-Hilferty). */
static double chi2_bound(unsigned df)
{
	double v = 2.0 / (9.0 * df), c = 1 - v + Z * root(v);
	return df * c * c * c;
}

/* 1/M. */
static double inv_m(const struct heap *h)
{
	return (double)M_ONE / h->m_fixed;
}

static size_t slot_of(const struct heap_class *c, const void *p)
{
	return (size_t)((const char *)p - c->base) >> c->shift;
}

static uint64_t word_at(const struct heap_class *c, size_t w)
{
	return atomic_load_explicit(&c->bits[w], memory_order_relaxed);
}

static bool live_at(const struct heap_class *c, size_t i)
{
	return i < atomic_load(&c->capacity) && (word_at(c, i >> 6) >> (i & 63) & 1);
}

/* The bits of word w inside [from, to). */
static uint64_t range_mask(size_t w, size_t from, size_t to)
{
	size_t lo = w * 64, hi = lo + 64;
	if (to <= lo || from >= hi)
		return 0;
	uint64_t m = ~(uint64_t)0;
	if (from > lo)
		m &= ~(uint64_t)0 << (from - lo);
	if (to < hi)
		m &= ((uint64_t)1 << (to - lo)) - 1;
	return m;
}

/* Claimed slots in [from, to). */
static size_t live_between(const struct heap_class *c, size_t from, size_t to)
{
	size_t n = 0;
	for (size_t w = from / 64; w * 64 < to; w++)
		n += bitmap_count(word_at(c, w) & range_mask(w, from, to));
	return n;
}

/* Live slots of c's group g, the stripe as it stood before the claim that
 * took slot `took` (SIZE_MAX: none). */
static size_t group_live(const struct heap_class *c, size_t g, size_t took)
{
	size_t gsize = (size_t)1 << c->group_shift;
	size_t n = live_between(c, g * gsize, (g + 1) * gsize);
	return n - (took != SIZE_MAX && took / gsize == g && live_at(c, took));
}

/* The slots of word w a claim could take, the stripe as it stood before
 * the claim that took slot `took`: free, below top, in a group below its
 * cap (the heap computes the caps: c->group_cap a group of
 * 1 << c->group_shift slots; we check they are at most its slots / M). */
static uint64_t eligible_word(const struct heap_class *c, size_t w, size_t took)
{
	size_t first = w * 64, top = c->top, gsize = (size_t)1 << c->group_shift;
	if (first >= top)
		return 0;
	uint64_t word = word_at(c, w), open = 0;
	if (took != SIZE_MAX && took / 64 == w)
		word &= ~((uint64_t)1 << (took & 63));
	for (size_t g = first / gsize; g * gsize < first + 64 && g * gsize < top; g++)
		if (group_live(c, g, took) < c->group_cap)
			open |= range_mask(w, g * gsize, (g + 1) * gsize);
	return ~word & open & range_mask(w, 0, top);
}

static size_t eligible_in(const struct heap_class *c, size_t from, size_t to, size_t took)
{
	size_t n = 0;
	for (size_t w = from / 64; w * 64 < to; w++)
		n += bitmap_count(eligible_word(c, w, took) & range_mask(w, from, to));
	return n;
}

/* Free slots of [from, to) below top before that claim, group caps aside:
 * what uniform placement over the range would draw from. */
static size_t free_in(const struct heap_class *c, size_t from, size_t to, size_t took)
{
	size_t n = 0;
	for (size_t w = from / 64; w * 64 < to; w++) {
		uint64_t word = word_at(c, w);
		if (took != SIZE_MAX && took / 64 == w)
			word &= ~((uint64_t)1 << (took & 63));
		n += bitmap_count(~word & range_mask(w, from, to < c->top ? to : c->top));
	}
	return n;
}

static bool eligible_at(const struct heap_class *c, size_t i, size_t took)
{
	return eligible_word(c, i / 64, took) >> (i & 63) & 1;
}

/* The slots the claim that took slot j drew from: the window when the
 * stripe is larger than it (and j lies in it), else [0, top). */
static void claim_range(const struct heap *h, const struct heap_class *c, size_t j, size_t *from, size_t *to)
{
	size_t w = h->window, top = c->top;
	*from = 0;
	*to = top;
	if (w != 0 && w < top && j - c->front < w) {
		*from = c->front;
		*to = c->front + w < top ? c->front + w : top;
	}
}

/* The stripe's bound now and before its last growth step. */
struct tops {
	size_t last, prev;
};

static void tops_note(struct tops *t, struct heap_class *c)
{
	pthread_mutex_lock(&c->lock);
	size_t top = c->top;
	pthread_mutex_unlock(&c->lock);
	if (top != t->last) {
		t->prev = t->last;
		t->last = top;
	}
}

/* Live objects of one heap, in no order. */
struct live_set {
	void **p;
	size_t n;
};

static void *take_random(struct live_set *o, struct rng *r)
{
	size_t k = (size_t)rng_below(r, o->n);
	void *p = o->p[k];
	o->p[k] = o->p[--o->n];
	return p;
}

/* Allocates until n are live; the stripe is the first object's. */
static struct heap_class *alloc_up_to(struct heap *h, unsigned ci, struct rng *r, struct live_set *o, size_t n,
				      struct tops *t)
{
	while (o->n < n) {
		void *p = heap_alloc(h, ci, r, false);
		if (p == NULL)
			break;
		o->p[o->n++] = p;
		tops_note(t, heap_part_of(h, o->p[0]));
	}
	return o->n ? heap_part_of(h, o->p[0]) : NULL;
}

/* Allocates at least n, then on to as full as the stripe gets without
 * growing it: its limit less its headroom (the paper's heap at its bound). */
static struct heap_class *alloc_to_bound(struct heap *h, unsigned ci, struct rng *r, struct live_set *o, size_t n,
					 struct tops *t)
{
	struct heap_class *c = alloc_up_to(h, ci, r, o, n, t);
	while (c != NULL && atomic_load(&c->live) + 1 + heap_headroom(c) <= atomic_load(&c->limit)) {
		o->p[o->n++] = heap_alloc(h, ci, r, false);
		tops_note(t, c);
	}
	return c;
}

enum order { AT_ONCE, CHURN, REFILL };
static const char *const order_name[] = { "at once", "churn", "half freed, refilled" };

/* Brings a fresh heap to n live objects of class ci in the given order. */
static struct heap_class *run_order(struct heap *h, unsigned ci, struct rng *r, struct live_set *o, size_t n,
				    enum order order, struct tops *t)
{
	struct heap_class *c = alloc_up_to(h, ci, r, o, n, t);
	if (order == CHURN) {
		for (size_t step = 0; step < 4 * n; step++) {
			bool add = o->n <= n / 2 ? true : o->n >= n ? false : (rng_next(r) & 1);
			if (add)
				alloc_up_to(h, ci, r, o, o->n + 1, t);
			else
				heap_free(h, take_random(o, r));
		}
	} else if (order == REFILL) {
		while (o->n > n - n / 2)
			heap_free(h, take_random(o, r));
		alloc_up_to(h, ci, r, o, n, t);
	}
	return c;
}

static void free_all(struct heap *h, struct live_set *o)
{
	while (o->n > 0)
		heap_free(h, o->p[--o->n]);
}

/* One stripe's layout, as tests 1-4 see it. */
struct layout {
	size_t top, live;  /* live: claimed slots below top */
	size_t next;       /* of those, the ones whose next slot is live */
	double expect;     /* its expectation: uniform within each region */
	double chi2;       /* evenness within regions (finite-population corrected) */
	unsigned df;
	size_t words, over; /* groups below top; those above their cap */
	double worst_z;    /* the densest word-aligned eighth of [0, top), in SDs over 1/M */
	double eighth[8];  /* density by eighth (0 when top < 8 words) */
	double wchi2;      /* evenness within words: live slots by eighth of their word */
	unsigned wdf;
};

struct region {
	size_t from, to, live;
};

static void measure(struct heap *h, struct heap_class *c, size_t prev_top, struct layout *L)
{
	memset(L, 0, sizeof *L);
	size_t top = c->top, w = h->window;
	bool windowed = w != 0 && w < top;
	L->top = top;
	/* Regions: the groups (each at most its cap, and newer ones emptier
	 * by design: the headroom), which windows and growth steps never
	 * cut. */
	(void)windowed;
	(void)prev_top;
	size_t gsize = (size_t)1 << c->group_shift, nr = 0;
	struct region *reg = calloc(top / gsize + 1, sizeof *reg);
	for (size_t a = 0; a < top; a += gsize, nr++)
		reg[nr] = (struct region){ a, a + gsize, live_between(c, a, a + gsize) };
	for (size_t k = 0; k < nr; k++) {
		struct region *g = &reg[k];
		size_t len = g->to - g->from;
		L->live += g->live;
		/* Expected neighbours: inside the region (n - 1) / (T - 1) each;
		 * its last slot's neighbour is the next region's first. */
		bool last = live_at(c, g->to - 1);
		if (len > 1)
			L->expect += (double)(g->live - last) * (g->live - 1) / (len - 1);
		if (last && k + 1 < nr)
			L->expect += (double)reg[k + 1].live / (reg[k + 1].to - reg[k + 1].from);
		/* Evenness: up to 8 buckets, at least 5 expected in each. */
		unsigned b = g->live / 5 < 8 ? (unsigned)(g->live / 5) : 8;
		if (b >= 2 && g->live < len && len >= b) {
			double chi = 0;
			for (unsigned q = 0; q < b; q++) {
				size_t lo = g->from + len * q / b, hi = g->from + len * (q + 1) / b;
				double e = (double)g->live * (hi - lo) / len, d = (double)live_between(c, lo, hi) - e;
				chi += d * d / e;
			}
			L->chi2 += chi / ((double)(len - g->live) / (len - 1));
			L->df += b - 1;
		}
	}
	free(reg);
	for (size_t i = 0; i < top; i++)
		if (live_at(c, i))
			L->next += live_at(c, i + 1);
	for (size_t g = 0; g * gsize < top; g++) {
		L->words++;
		L->over += group_live(c, g, SIZE_MAX) > c->group_cap;
	}
	/* Within words: positions by eighth of the word, over the full
	 * words. Each word's count is what it is (capped); given it, uniform
	 * placement makes an eighth's count hypergeometric, with variance
	 * c (1/8) (7/8) (64 - c) / 63: f below scales Pearson's statistic. */
	size_t nw = top / 64, pos[8] = { 0 }, total = 0;
	double var = 0;
	for (size_t k = 0; k < nw; k++) {
		uint64_t x = word_at(c, k);
		unsigned n = bitmap_count(x);
		total += n;
		var += n * (64.0 - n) / 63;
		for (unsigned q = 0; q < 8; q++)
			pos[q] += bitmap_count(x & ((uint64_t)0xff << (8 * q)));
	}
	if (total > 0 && var > 0) {
		double e = total / 8.0, f = var / total;
		for (unsigned q = 0; q < 8; q++)
			L->wchi2 += (pos[q] - e) * (pos[q] - e) / (e * f);
		L->wdf = 7;
	}
	double a = inv_m(h);
	L->worst_z = -1e9;
	if (nw >= 8)
		for (unsigned q = 0; q < 8; q++) {
			size_t lo = nw * q / 8 * 64, hi = nw * (q + 1) / 8 * 64;
			double dens = (double)live_between(c, lo, hi) / (hi - lo);
			double z = (dens - a) / root(a * (1 - a) / (hi - lo));
			L->eighth[q] = dens;
			if (z > L->worst_z)
				L->worst_z = z;
		}
}

/* Layouts of one setting, over heaps (or stripes). */
struct tally {
	struct mean density, rate, expect, whole, diff, allow;
	double chi2, wchi2, worst_z, eighth[8];
	unsigned df, wdf, units;
	size_t words, over, live;
};

static void tally_add(struct tally *t, const struct layout *L)
{
	if (L->live < 2)
		return;
	double n = (double)L->live, d = n / L->top;
	mean_add(&t->density, d);
	mean_add(&t->rate, L->next / n);
	mean_add(&t->expect, L->expect / n);
	mean_add(&t->whole, (n - 1) / (L->top - 1));
	mean_add(&t->diff, (L->next - L->expect) / n);
	mean_add(&t->allow, (1 - d) / 32);
	t->chi2 += L->chi2;
	t->df += L->df;
	t->wchi2 += L->wchi2;
	t->wdf += L->wdf;
	t->words += L->words;
	t->over += L->over;
	t->live += L->live;
	if (t->units == 0) {
		memcpy(t->eighth, L->eighth, sizeof t->eighth);
		t->worst_z = L->worst_z;
	} else if (L->worst_z > t->worst_z) {
		t->worst_z = L->worst_z;
	}
	t->units++;
}

/* Prints a setting's numbers and checks them against the model. */
static void tally_check(const struct tally *t, const char *what, double m_inv)
{
	double rate = mean_of(&t->rate), expect = mean_of(&t->expect), whole = mean_of(&t->whole);
	/* One neighbour per unit of slack: region edges, rounding. */
	double se = mean_se(&t->diff) + 1.0 / ((double)t->live / (t->units ? t->units : 1)) / root(t->units);
	double diff = mean_of(&t->diff), allow = mean_of(&t->allow);
	printf("# %s, %u heaps: density %.4f, next slot taken %.4f; uniform within regions %.4f, "
	       "over [0, top) %.4f (x%.2f); 1/M %.4f\n",
	       what, t->units, mean_of(&t->density), rate, expect, whole, whole > 0 ? rate / whole : 0, m_inv);
	CHECK(diff <= Z * se && diff >= -allow - Z * se,
	      "%s: next slot taken %.4f vs uniform %.4f (difference %+.4f, allowed %+.4f..%+.4f)", what, rate, expect,
	      diff, -allow - Z * se, Z * se);
	double rse = mean_se(&t->rate) + 1.0 / ((double)t->live / t->units) / root(t->units);
	char densest[48] = "no eighths: under 8 words";
	if (t->worst_z > -1e8)
		snprintf(densest, sizeof densest, "densest eighth %+.1f SD", t->worst_z);
	CHECK(rate <= m_inv + Z * rse && t->worst_z <= Z, "%s: never above 1/M = %.4f: next slot taken %.4f, %s", what,
	      m_inv, rate, densest);
	if (t->df > 0) {
		double bound = chi2_bound(t->df);
		if (t->eighth[7] > 0)
			printf("# %s, eighths of [0, top), heap 1: %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", what,
			       t->eighth[0], t->eighth[1], t->eighth[2], t->eighth[3], t->eighth[4], t->eighth[5],
			       t->eighth[6], t->eighth[7]);
		CHECK(t->chi2 <= bound, "%s: even within regions: chi2 %.1f on %u df (bound %.1f)", what, t->chi2, t->df,
		      bound);
	}
	if (t->wdf > 0) {
		double bound = chi2_bound(t->wdf);
		CHECK(t->wchi2 <= bound, "%s: even within words (by eighth of the word): chi2 %.1f on %u df (bound %.1f)",
		      what, t->wchi2, t->wdf, bound);
	}
	CHECK(t->over == 0, "%s: no group above its cap (%zu of %zu are)", what, t->over, t->words);
}

static const char *window_name(unsigned shift, char *buf, size_t len)
{
	if (shift == 0)
		snprintf(buf, len, "whole stripe");
	else
		snprintf(buf, len, "window %zu", (size_t)1 << shift);
	return buf;
}

/* Tests 1-3: one setting over HEAPS heaps. */
static void layouts(size_t size, unsigned m_fixed, unsigned wshift, size_t n, enum order order, unsigned heaps)
{
	unsigned ci = sizeclass_of(size);
	struct tally t = { 0 };
	struct live_set o = { calloc(n + 1, sizeof(void *)), 0 };
	double m_inv = (double)M_ONE / m_fixed;
	for (unsigned k = 0; k < heaps; k++) {
		uint64_t seed = 1000 * (uint64_t)size + 10 * (uint64_t)n + k + ((uint64_t)m_fixed << 32) +
				((uint64_t)wshift << 40) + ((uint64_t)order << 48);
		struct config cfg = config_with(m_fixed, wshift, seed);
		struct heap *h = heap_create(&cfg, 30);
		struct rng r = rng_with(seed);
		struct tops tp = { 0, 0 };
		struct heap_class *c = run_order(h, ci, &r, &o, n, order, &tp);
		struct layout L;
		measure(h, c, tp.prev, &L);
		tally_add(&t, &L);
		free_all(h, &o);
		heap_destroy(h);
	}
	free(o.p);
	char what[160], wb[32];
	snprintf(what, sizeof what, "%zu B, M %.2g, %s, %zu %s", size, 1 / m_inv, window_name(wshift, wb, sizeof wb), n,
		 order_name[order]);
	tally_check(&t, what, m_inv);
}

static void test_layouts(void)
{
	static const size_t sizes[] = { 16, 32, 256, 2048 }, counts[] = { 100, 1000, 10000 };
	static const unsigned windows[] = { WINDOW_DEFAULT_SHIFT, 0 };
	for (unsigned s = 0; s < 4; s++)
		for (unsigned k = 0; k < 3; k++)
			for (unsigned w = 0; w < 2; w++)
				layouts(sizes[s], 2 * M_ONE, windows[w], counts[k], AT_ONCE, HEAPS);
	/* M = 4, and M = 3 (a word's cap, 21 of 64, is not 64/M). */
	for (unsigned w = 0; w < 2; w++) {
		layouts(32, 4 * M_ONE, windows[w], 1000, AT_ONCE, HEAPS);
		layouts(32, 4 * M_ONE, windows[w], 10000, AT_ONCE, HEAPS);
		layouts(2048, 4 * M_ONE, windows[w], 1000, AT_ONCE, HEAPS);
		layouts(16, 3 * M_ONE, windows[w], 1000, AT_ONCE, HEAPS);
		layouts(256, 3 * M_ONE, windows[w], 10000, AT_ONCE, HEAPS);
		layouts(32, 5 * M_ONE / 2, windows[w], 1000, AT_ONCE, HEAPS);
	}
}

static void test_orders(void)
{
	static const unsigned windows[] = { WINDOW_DEFAULT_SHIFT, 0 };
	for (enum order order = CHURN; order <= REFILL; order++)
		for (unsigned w = 0; w < 2; w++) {
			layouts(32, 2 * M_ONE, windows[w], 1000, order, HEAPS);
			layouts(32, 2 * M_ONE, windows[w], 10000, order, HEAPS);
			layouts(256, 2 * M_ONE, windows[w], 1000, order, HEAPS);
			layouts(16, 3 * M_ONE, windows[w], 10000, order, HEAPS);
		}
}

/* Test 4: each thread allocates n from its own home stripe. */
struct job {
	struct heap *h;
	unsigned ci;
	size_t n;
	uint64_t seed;
	struct heap_class *home;
	struct tops tops;
	struct live_set o;
};

static void *job_run(void *arg)
{
	struct job *j = arg;
	struct rng r = rng_with(j->seed);
	j->home = alloc_up_to(j->h, j->ci, &r, &j->o, j->n, &j->tops);
	return NULL;
}

static void threads(size_t size, unsigned wshift, size_t n, unsigned heaps)
{
	enum { T = 4 };
	unsigned ci = sizeclass_of(size);
	struct tally t = { 0 };
	struct job jobs[T];
	int distinct = 1;
	for (unsigned k = 0; k < heaps; k++) {
		struct config cfg = config_with(2 * M_ONE, wshift, 7000 + k);
		struct heap *h = heap_create(&cfg, 30);
		pthread_t th[T];
		for (unsigned i = 0; i < T; i++) {
			jobs[i] = (struct job){ .h = h, .ci = ci, .n = n, .seed = 7000 + 10 * k + i,
						.o = { calloc(n, sizeof(void *)), 0 } };
			pthread_create(&th[i], NULL, job_run, &jobs[i]);
		}
		for (unsigned i = 0; i < T; i++)
			pthread_join(th[i], NULL);
		for (unsigned i = 0; i < T; i++) {
			for (unsigned j = 0; j < i; j++)
				distinct &= jobs[i].home != jobs[j].home;
			struct layout L;
			measure(h, jobs[i].home, jobs[i].tops.prev, &L);
			tally_add(&t, &L);
		}
		for (unsigned i = 0; i < T; i++) {
			free_all(h, &jobs[i].o);
			free(jobs[i].o.p);
		}
		heap_destroy(h);
	}
	char what[160], wb[32];
	snprintf(what, sizeof what, "4 threads, %zu B, M 2, %s, %zu each, per stripe", size,
		 window_name(wshift, wb, sizeof wb), n);
	CHECK(distinct, "%s: each thread in a stripe of its own", what);
	tally_check(&t, what, 0.5);
}

static void test_threads(void)
{
	threads(32, WINDOW_DEFAULT_SHIFT, 5000, 8);
	threads(32, 0, 5000, 8);
	threads(256, WINDOW_DEFAULT_SHIFT, 1000, 8);
}

/* A count of events against the sum of their conditional probabilities. */
struct events {
	double count, expect, var;
};

static void events_add(struct events *e, bool happened, double p)
{
	e->count += happened;
	e->expect += p;
	e->var += p * (1 - p);
}

static bool events_fit(const struct events *e)
{
	return e->count - e->expect <= Z * root(e->var) + 1 && e->expect - e->count <= Z * root(e->var) + 1;
}

/* Test 5: where each claim lands relative to the previous one. */
static void sequence(size_t size, unsigned wshift, size_t n, unsigned heaps)
{
	unsigned ci = sizeclass_of(size);
	struct events adj = { 0 }, near = { 0 }, adj_free = { 0 }, near_free = { 0 };
	size_t claims = 0, stray = 0;
	double inv_e = 0, naive = 0;
	struct live_set o = { calloc(n + 1, sizeof(void *)), 0 };
	for (unsigned k = 0; k < heaps; k++) {
		struct config cfg = config_with(2 * M_ONE, wshift, 500 + k);
		struct heap *h = heap_create(&cfg, 30);
		struct rng r = rng_with(500 + k);
		size_t prev = SIZE_MAX;
		/* n at once, then 2n steps of a free and an allocation. */
		for (size_t step = 0; step < 3 * n; step++) {
			if (o.n == n)
				heap_free(h, take_random(&o, &r));
			void *p = heap_alloc(h, ci, &r, false);
			o.p[o.n++] = p;
			struct heap_class *c = heap_part_of(h, p);
			size_t j = slot_of(c, p), from, to;
			claim_range(h, c, j, &from, &to);
			size_t e = eligible_in(c, from, to, j);
			stray += !eligible_at(c, j, j);
			if (prev != SIZE_MAX && e > 0) {
				size_t lo = prev > from + 64 ? prev - 64 : from, hi = prev + 65 < to ? prev + 65 : to;
				bool after = prev + 1 >= from && prev + 1 < to && eligible_at(c, prev + 1, j);
				events_add(&adj, j == prev + 1, after / (double)e);
				events_add(&near, j + 64 >= prev && j <= prev + 64,
					   lo < hi ? (double)eligible_in(c, lo, hi, j) / e : 0);
				size_t ef = free_in(c, from, to, j);
				bool after_free = prev + 1 >= from && prev + 1 < to && free_in(c, prev + 1, prev + 2, j);
				events_add(&adj_free, j == prev + 1, ef ? after_free / (double)ef : 0);
				events_add(&near_free, false, ef && lo < hi ? (double)free_in(c, lo, hi, j) / ef : 0);
				inv_e += 1.0 / e;
				naive += (hi > lo ? hi - lo : 0) / (double)(to - from);
				claims++;
			}
			prev = j;
		}
		free_all(h, &o);
		heap_destroy(h);
	}
	free(o.p);
	char what[160], wb[32];
	snprintf(what, sizeof what, "%zu B, M 2, %s, %zu at once then %zu free+alloc, %u heaps", size,
		 window_name(wshift, wb, sizeof wb), n, 2 * n, heaps);
	printf("# %s: right after the previous claim %.0f times of %zu, rate %.5f (expected %.5f; mean "
	       "1/eligible %.5f; uniform over the range's free slots, caps aside, %.5f)\n",
	       what, adj.count, claims, adj.count / claims, adj.expect / claims, inv_e / claims, adj_free.expect / claims);
	printf("# %s: within 64 slots of the previous %.4f (expected %.4f; caps aside %.4f; 129 / range %.4f)\n", what,
	       near.count / claims, near.expect / claims, near_free.expect / claims, naive / claims);
	CHECK(stray == 0, "%s: every claim in a free slot of a group below its cap (%zu not)", what, stray);
	CHECK(events_fit(&adj), "%s: lands right after the previous claim %.0f times (expected %.1f +- %.1f)", what,
	      adj.count, adj.expect, Z * root(adj.var) + 1);
	CHECK(events_fit(&near), "%s: within 64 slots of the previous %.0f times (expected %.1f +- %.1f)", what,
	      near.count, near.expect, Z * root(near.var) + 1);
}

static void test_sequence(void)
{
	sequence(16, 0, 1000, HEAPS);
	sequence(16, WINDOW_DEFAULT_SHIFT, 10000, 4);
	sequence(256, 0, 3000, 8);
}

/* A stripe brought to its bound, then 70% freed: 30% of its limit live,
 * the state tests 6 and 7d start their trials from. */
static struct heap_class *reuse_state(struct heap *h, unsigned ci, struct rng *r, struct live_set *o, size_t n,
				      struct rng *req)
{
	struct tops tp = { 0, 0 };
	struct heap_class *c = alloc_to_bound(h, ci, r, o, n, &tp);
	size_t keep = o->n * 3 / 10;
	while (o->n > keep)
		heap_free(h, take_random(o, req));
	return c;
}

/* One reuse trial: frees victim k (slot s), makes A claims, records
 * whether s was handed out (and, if exact, the sum of each claim's odds of
 * taking it: its compensator), frees the A and replaces the victim. q: the
 * eligible slots of the range s lies in, 0 if the next claim does not draw
 * from a range holding s. */
struct trial {
	bool reused;
	double hazard; /* sum of P(this claim takes s) while not yet taken */
	size_t q;
};

static void reuse_trial(struct heap *h, unsigned ci, struct rng *r, struct live_set *o, size_t k, unsigned a,
			void **tmp, bool exact, struct trial *tr)
{
	void *v = o->p[k];
	struct heap_class *c = heap_part_of(h, v);
	size_t s = slot_of(c, v), from, to;
	heap_free(h, v);
	claim_range(h, c, c->front, &from, &to); /* the window, if the stripe is larger */
	tr->q = s >= from && s < to ? eligible_in(c, from, to, SIZE_MAX) : 0;
	tr->reused = false;
	tr->hazard = 0;
	for (unsigned t = 0; t < a; t++) {
		void *p = tmp[t] = heap_alloc(h, ci, r, false);
		size_t j = slot_of(c, p);
		if (!tr->reused && exact) {
			claim_range(h, c, j, &from, &to);
			size_t e = eligible_in(c, from, to, j);
			if (s >= from && s < to && eligible_at(c, s, j) && e > 0)
				tr->hazard += 1.0 / e;
		}
		tr->reused |= j == s;
	}
	for (unsigned t = 0; t < a; t++)
		heap_free(h, tmp[t]);
	o->p[k] = heap_alloc(h, ci, r, false);
}

/* Test 6: P(a freed slot is handed out again within A claims). */
static void reuse(size_t size, unsigned wshift, size_t n, unsigned a, unsigned trials, unsigned heaps)
{
	unsigned ci = sizeclass_of(size);
	bool windowed = false;
	/* [0]: the victim in the range claims draw from, [1]: outside it. */
	struct mean p[2] = { { 0 } }, aq[2] = { { 0 } };
	struct events comp[2] = { { 0 } };
	unsigned count[2] = { 0 };
	struct live_set o = { calloc(2 * n + 2, sizeof(void *)), 0 };
	void **tmp = calloc(a, sizeof *tmp);
	double qsum = 0, top = 0;
	for (unsigned k = 0; k < heaps; k++) {
		struct config cfg = config_with(2 * M_ONE, wshift, 600 + k);
		struct heap *h = heap_create(&cfg, 30);
		struct rng r = rng_with(600 + k), req = rng_with(650 + k);
		struct heap_class *c = reuse_state(h, ci, &r, &o, n, &req);
		windowed |= h->window != 0 && h->window < c->top;
		top += c->top;
		double hit[2] = { 0 }, odds[2] = { 0 };
		unsigned tr_n[2] = { 0 };
		for (unsigned t = 0; t < trials; t++) {
			/* Victims alternately inside and outside the window. */
			size_t pick = (size_t)rng_below(&req, o.n);
			if (windowed)
				for (unsigned tries = 0; tries < 1000; tries++) {
					size_t s = slot_of(c, o.p[pick]);
					bool inside = s - c->front < h->window;
					if (inside == !(t & 1))
						break;
					pick = (size_t)rng_below(&req, o.n);
				}
			struct trial tr;
			reuse_trial(h, ci, &r, &o, pick, a, tmp, true, &tr);
			unsigned side = tr.q == 0;
			hit[side] += tr.reused;
			odds[side] += tr.q ? (double)a / tr.q : 0;
			qsum += tr.q;
			tr_n[side]++;
			events_add(&comp[side], tr.reused, tr.hazard);
		}
		for (unsigned side = 0; side < 2; side++)
			if (tr_n[side] > 0) {
				mean_add(&p[side], hit[side] / tr_n[side]);
				mean_add(&aq[side], odds[side] / tr_n[side]);
				count[side] += tr_n[side];
			}
		free_all(h, &o);
		heap_destroy(h);
	}
	free(tmp);
	free(o.p);
	char what[160], wb[32];
	snprintf(what, sizeof what, "%zu B, %s (top %.0f), 30%% of the bound live, A = %u, %u heaps", size,
		 window_name(wshift, wb, sizeof wb), top / heaps, a, heaps);
	double diff = mean_of(&p[0]) - mean_of(&aq[0]);
	double se = root(mean_se(&p[0]) * mean_se(&p[0]) + mean_se(&aq[0]) * mean_se(&aq[0]));
	printf("# %s: reused within A %.4f of %u trials, A/Q %.4f (Q %.0f eligible free slots)%s\n", what,
	       mean_of(&p[0]), count[0], mean_of(&aq[0]), qsum / (count[0] ? count[0] : 1),
	       windowed ? ", victim in the window" : "");
	CHECK(diff <= Z * se + 0.5 / count[0] && diff >= -Z * se - 0.5 / count[0],
	      "%s: P(reused) %.4f vs A/Q %.4f (+- %.4f)", what, mean_of(&p[0]), mean_of(&aq[0]), Z * se);
	CHECK(events_fit(&comp[0]), "%s: reuses %.0f vs claim by claim %.1f +- %.1f", what, comp[0].count,
	      comp[0].expect, Z * root(comp[0].var) + 1);
	if (windowed) {
		printf("# %s: victim outside the window: reused %.4f of %u trials (claim by claim %.4f): "
		       "only once the window comes round\n",
		       what, count[1] ? comp[1].count / count[1] : 0, count[1],
		       count[1] ? comp[1].expect / count[1] : 0);
		CHECK(events_fit(&comp[1]), "%s, outside the window: reuses %.0f vs claim by claim %.1f +- %.1f", what,
		      comp[1].count, comp[1].expect, Z * root(comp[1].var) + 1);
	}
}

static void test_reuse(void)
{
	/* 16 B, 1000 at the bound: top about 2000, one window. */
	reuse(16, WINDOW_DEFAULT_SHIFT, 1000, 16, 200, HEAPS);
	reuse(16, WINDOW_DEFAULT_SHIFT, 1000, 256, 100, HEAPS);
	/* 64 B, 20000 at the bound: about 10 windows. */
	reuse(64, WINDOW_DEFAULT_SHIFT, 20000, 256, 200, HEAPS);
	/* The whole stripe (6000 slots) as one range. */
	reuse(64, 0, 3000, 1024, 40, HEAPS / 2);
}

/* Test 7a: two heaps, adjacent seeds, the same requests: the same slot
 * for the same request only as often as independent draws would. */
static void same_slots(size_t size, unsigned wshift, size_t n, unsigned pairs)
{
	unsigned ci = sizeclass_of(size);
	struct events same = { 0 };
	double inv_e = 0;
	size_t claims = 0;
	struct live_set oa = { calloc(n, sizeof(void *)), 0 }, ob = { calloc(n, sizeof(void *)), 0 };
	for (unsigned k = 0; k < pairs; k++) {
		struct config ca = config_with(2 * M_ONE, wshift, 2 * k + 800), cb = config_with(2 * M_ONE, wshift, 2 * k + 801);
		struct heap *ha = heap_create(&ca, 30), *hb = heap_create(&cb, 30);
		struct rng ra = rng_with(2 * k + 800), rb = rng_with(2 * k + 801);
		for (size_t i = 0; i < n; i++) {
			void *pa = oa.p[oa.n++] = heap_alloc(ha, ci, &ra, false);
			void *pb = ob.p[ob.n++] = heap_alloc(hb, ci, &rb, false);
			struct heap_class *a = heap_part_of(ha, pa), *b = heap_part_of(hb, pb);
			size_t ja = slot_of(a, pa), jb = slot_of(b, pb), fa, ta, fb, tb;
			claim_range(ha, a, ja, &fa, &ta);
			claim_range(hb, b, jb, &fb, &tb);
			size_t ea = eligible_in(a, fa, ta, ja), eb = eligible_in(b, fb, tb, jb), both = 0;
			size_t lo = fa > fb ? fa : fb, hi = ta < tb ? ta : tb;
			for (size_t w = lo / 64; lo < hi && w * 64 < hi; w++)
				both += bitmap_count(eligible_word(a, w, ja) & eligible_word(b, w, jb) &
						     range_mask(w, lo, hi));
			if (ea > 0 && eb > 0) {
				events_add(&same, ja == jb, (double)both / ((double)ea * eb));
				inv_e += 2.0 / (ea + eb);
				claims++;
			}
		}
		free_all(ha, &oa);
		free_all(hb, &ob);
		heap_destroy(ha);
		heap_destroy(hb);
	}
	free(oa.p);
	free(ob.p);
	char what[160], wb[32];
	snprintf(what, sizeof what, "seeds one apart, %zu B, %s, %zu at once, %u pairs", size,
		 window_name(wshift, wb, sizeof wb), n, pairs);
	printf("# %s: same slot for the same request %.5f (independent draws %.5f; mean 1/eligible %.5f)\n", what,
	       same.count / claims, same.expect / claims, inv_e / claims);
	CHECK(events_fit(&same), "%s: same slot %.0f times (expected %.1f +- %.1f)", what, same.count, same.expect,
	      Z * root(same.var) + 1);
}

/* Whether the O slots after slot i are all free. */
static bool clear_after(const struct heap_class *c, size_t i, unsigned o)
{
	for (unsigned t = 1; t <= o; t++)
		if (live_at(c, i + t))
			return false;
	return true;
}

/* Test 7b, c: groups of K heaps (replicas: adjacent seeds, the same
 * requests), each at its bound. For each request j, whether the slot after
 * it is live in heaps 0 and 1 (their correlation), and whether an
 * overflow of O objects from it is masked: the O slots after it free in
 * at least one of the K heaps (Theorem 1 at the measured F/H). */
static void masking(size_t size, unsigned wshift, size_t n, unsigned groups)
{
	enum { K = 3 };
	unsigned ci = sizeclass_of(size);
	struct mean cov = { 0 }, fh = { 0 }, mask[2][K] = { { { 0 } } }, thm[2][K] = { { { 0 } } },
		    thm_low[2][K] = { { { 0 } } };
	struct live_set o[K];
	size_t cap = 4 * n + 1024;
	for (unsigned r = 0; r < K; r++)
		o[r] = (struct live_set){ calloc(cap, sizeof(void *)), 0 };
	size_t objects = 0;
	bool same_n = true;
	for (unsigned g = 0; g < groups; g++) {
		struct heap *h[K];
		struct heap_class *c[K];
		double d[K];
		for (unsigned r = 0; r < K; r++) {
			uint64_t seed = 900 + K * g + r;
			struct config cfg = config_with(2 * M_ONE, wshift, seed);
			struct rng rr = rng_with(seed);
			struct tops tp = { 0, 0 };
			h[r] = heap_create(&cfg, 30);
			c[r] = alloc_to_bound(h[r], ci, &rr, &o[r], n, &tp);
			d[r] = (double)c[r]->live / c[r]->top;
			same_n &= o[r].n == o[0].n;
		}
		size_t m = o[0].n;
		for (unsigned r = 1; r < K; r++)
			if (o[r].n < m)
				m = o[r].n;
		double x0 = 0, x1 = 0, x01 = 0, masked[2][K] = { { 0 } };
		for (size_t j = 0; j < m; j++) {
			bool hit0 = live_at(c[0], slot_of(c[0], o[0].p[j]) + 1);
			bool hit1 = live_at(c[1], slot_of(c[1], o[1].p[j]) + 1);
			x0 += hit0;
			x1 += hit1;
			x01 += hit0 && hit1;
			for (unsigned ov = 1; ov <= 2; ov++) {
				bool any = false;
				for (unsigned r = 0; r < K; r++) {
					any |= clear_after(c[r], slot_of(c[r], o[r].p[j]), ov);
					masked[ov - 1][r] += any;
				}
			}
		}
		mean_add(&cov, x01 / m - (x0 / m) * (x1 / m));
		double dm = (d[0] + d[1] + d[2]) / K;
		mean_add(&fh, 1 - dm);
		for (unsigned ov = 1; ov <= 2; ov++)
			for (unsigned r = 0; r < K; r++) {
				/* Theorem 1 with k = r + 1 replicas at F/H = 1 - d, and at
				 * d lowered by the word caps' allowance (module comment). */
				double dl = dm - (1 - dm) / 32;
				mean_add(&mask[ov - 1][r], masked[ov - 1][r] / m);
				mean_add(&thm[ov - 1][r], 1 - power(1 - power(1 - dm, ov), r + 1));
				mean_add(&thm_low[ov - 1][r], 1 - power(1 - power(1 - dl, ov), r + 1));
			}
		objects += m;
		for (unsigned r = 0; r < K; r++) {
			free_all(h[r], &o[r]);
			heap_destroy(h[r]);
		}
	}
	for (unsigned r = 0; r < K; r++)
		free(o[r].p);
	char what[160], wb[32];
	snprintf(what, sizeof what, "%zu B, M 2, %s, at the bound (%zu objects), groups of %d seeds one apart, %u groups",
		 size, window_name(wshift, wb, sizeof wb), objects / groups, K, groups);
	CHECK(same_n, "%s: the same requests fill each heap to the same bound", what);
	double cse = mean_se(&cov);
	printf("# %s: covariance of next-slot-taken between two heaps %+.5f (SE %.5f)\n", what, mean_of(&cov), cse);
	CHECK(mean_of(&cov) <= Z * cse + 1e-4 && mean_of(&cov) >= -Z * cse - 1e-4,
	      "%s: next slot taken in two heaps uncorrelated (covariance %+.5f, bound %.5f)", what, mean_of(&cov),
	      Z * cse + 1e-4);
	for (unsigned ov = 1; ov <= 2; ov++)
		for (unsigned r = 0; r < K; r += 2) {
			/* The paper's guarantee is Theorem 1 at the heap's
			 * bound, F/H = 1 - 1/M: every group is at most 1/M
			 * full. The stripe as a whole is a little emptier
			 * (its headroom, in its newest groups), so Theorem 1
			 * at its own F/H is the most it may reach. */
			double got = mean_of(&mask[ov - 1][r]), bound = 1 - power(1 - power(0.5, ov), r + 1);
			double want = mean_of(&thm[ov - 1][r]), high = mean_of(&thm_low[ov - 1][r]);
			double se = mean_se(&mask[ov - 1][r]) + 1e-4;
			printf("# %s: O = %u, k = %u: masked %.4f, Theorem 1 1 - (1 - (F/H)^O)^k %.4f at the bound "
			       "(F/H 0.5), %.4f at the stripe's F/H %.4f\n",
			       what, ov, r + 1, got, bound, want, mean_of(&fh));
			CHECK(got >= bound - Z * se && got <= high + Z * se,
			      "%s: O = %u, k = %u: masked %.4f vs Theorem 1 %.4f at the bound (allowed %.4f..%.4f)", what,
			      ov, r + 1, got, bound, bound - Z * se, high + Z * se);
		}
}

/* Test 7d: groups of K heaps (adjacent seeds, the same requests: the same
 * frees too), each at 30% of its bound; request j freed in all, then A
 * claims in each: intact in at least one against Theorem 2,
 * 1 - prod (A / Q_r), Q_r each heap's eligible free slots. */
static void dangling(size_t size, size_t n, unsigned a, unsigned trials, unsigned groups)
{
	enum { K = 3 };
	unsigned ci = sizeclass_of(size);
	struct mean intact = { 0 }, thm = { 0 }, single = { 0 };
	struct live_set o[K];
	for (unsigned r = 0; r < K; r++)
		o[r] = (struct live_set){ calloc(2 * n + 2, sizeof(void *)), 0 };
	void **tmp = calloc(a, sizeof *tmp);
	for (unsigned g = 0; g < groups; g++) {
		struct heap *h[K];
		struct rng rr[K];
		for (unsigned r = 0; r < K; r++) {
			uint64_t seed = 1100 + K * g + r;
			struct config cfg = config_with(2 * M_ONE, WINDOW_DEFAULT_SHIFT, seed);
			struct rng req = rng_with(1199 + g); /* the same frees in each heap */
			rr[r] = rng_with(seed);
			h[r] = heap_create(&cfg, 30);
			reuse_state(h[r], ci, &rr[r], &o[r], n, &req);
		}
		struct rng pick = rng_with(1299 + g);
		double ok = 0, odds = 0, one = 0;
		for (unsigned t = 0; t < trials; t++) {
			size_t k = (size_t)rng_below(&pick, o[0].n);
			bool all = true;
			double prod = 1;
			for (unsigned r = 0; r < K; r++) {
				struct trial tr;
				reuse_trial(h[r], ci, &rr[r], &o[r], k, a, tmp, false, &tr);
				all &= tr.reused;
				prod *= tr.q ? (double)a / tr.q : 1;
				one += tr.reused;
			}
			ok += !all;
			odds += 1 - prod;
		}
		mean_add(&intact, ok / trials);
		mean_add(&thm, odds / trials);
		mean_add(&single, one / (K * trials));
		for (unsigned r = 0; r < K; r++) {
			free_all(h[r], &o[r]);
			heap_destroy(h[r]);
		}
	}
	for (unsigned r = 0; r < K; r++)
		free(o[r].p);
	free(tmp);
	char what[160];
	snprintf(what, sizeof what, "%zu B, 30%% of the bound live, A = %u, groups of %d seeds one apart, %u groups x %u",
		 size, a, K, groups, trials);
	double got = mean_of(&intact), want = mean_of(&thm);
	double se = root(mean_se(&intact) * mean_se(&intact) + mean_se(&thm) * mean_se(&thm)) + 0.5 / (groups * trials);
	printf("# %s: intact in at least one of %d %.4f, Theorem 2 1 - prod(A/Q) %.4f; reused in one heap %.4f\n",
	       what, K, got, want, mean_of(&single));
	CHECK(got >= want - Z * se && got <= want + Z * se, "%s: intact %.4f vs Theorem 2 %.4f (+- %.4f)", what, got,
	      want, Z * se);
}

/* One heap's neighbours by request: nb[i] = the request whose object lies
 * in the slot after request i's, or -1. */
static int by_addr(const void *a, const void *b)
{
	const uintptr_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void neighbours_of(void *const *p, size_t n, size_t slot, long *nb)
{
	uintptr_t (*at)[2] = calloc(n, sizeof *at);
	for (size_t i = 0; i < n; i++) {
		at[i][0] = (uintptr_t)p[i];
		at[i][1] = i;
	}
	qsort(at, n, sizeof *at, by_addr);
	for (size_t i = 0; i < n; i++)
		nb[i] = -1;
	for (size_t k = 0; k + 1 < n; k++)
		if (at[k + 1][0] - at[k][0] == slot)
			nb[at[k][1]] = (long)at[k + 1][1];
	free(at);
}

/* 7e. Whose object lies after an object, across seeds: the same requests
 * in two heaps, and for each request whose next slot is taken in both, how
 * often it is the same request's object. Two replicas whose overflows hit
 * the same object go wrong alike and outvote a right one, so this is the
 * odds of a wrong commit, not only of a corrupted replica. Uniform
 * placement over a fixed heap: once in about n - 1. A heap that fills the
 * groups it grows by one after the other puts each object beside others
 * allocated a few calls before or after it, in every heap alike (once in
 * 180 for 1000 objects); the headroom (heap.c) keeps groups open longer
 * (once in 600). Held to 2.5 times uniform, plus 5 SDs of a Poisson
 * count. */
static void neighbour_identity(size_t size, unsigned wshift, size_t n, unsigned pairs)
{
	unsigned ci = sizeclass_of(size);
	void **pa = calloc(n, sizeof *pa), **pb = calloc(n, sizeof *pb);
	long *na = calloc(n, sizeof *na), *nb = calloc(n, sizeof *nb);
	double both = 0, same = 0;
	for (unsigned k = 0; k < pairs; k++) {
		struct config ca = config_with(2 * M_ONE, wshift, 900 + 2 * k);
		struct config cb = config_with(2 * M_ONE, wshift, 901 + 2 * k);
		struct heap *ha = heap_create(&ca, 30), *hb = heap_create(&cb, 30);
		struct rng ra = rng_with(900 + 2 * k), rb = rng_with(901 + 2 * k);
		for (size_t i = 0; i < n; i++) {
			pa[i] = heap_alloc(ha, ci, &ra, false);
			pb[i] = heap_alloc(hb, ci, &rb, false);
		}
		neighbours_of(pa, n, sizeclass_size(ci), na);
		neighbours_of(pb, n, sizeclass_size(ci), nb);
		for (size_t i = 0; i < n; i++)
			if (na[i] >= 0 && nb[i] >= 0) {
				both++;
				same += na[i] == nb[i];
			}
		heap_destroy(ha);
		heap_destroy(hb);
	}
	/* With a window, uniform within it: a window holds W / M objects,
	 * allocated one window after another. Without one, a heap that grows
	 * by sixteenths and keeps every group within 1/M fills a group while
	 * live grows by a sixteenth or so: for 10000 objects, neighbours come
	 * from about 600 requests around (once in 1600 alike). No such heap
	 * reaches uniform over a fixed heap there: held to uniform over 2048
	 * objects at most, a default window's worth. */
	size_t pool = n < 2048 ? n : 2048;
	if (wshift != 0 && ((size_t)1 << wshift) / 2 < pool)
		pool = ((size_t)1 << wshift) / 2;
	double uniform = both / (double)(pool - 1), most = 2.5 * uniform + Z * root(2.5 * uniform);
	char wb[32];
	printf("# %zu B, %s, %zu at once, %u pairs of seeds: the same object after an object in both heaps %.0f times "
	       "of %.0f (once in %.0f; uniform placement: once in %zu)\n",
	       size, window_name(wshift, wb, sizeof wb), n, pairs, same, both, same > 0 ? both / same : 0.0, pool - 1);
	CHECK(same <= most, "%zu B, %s, %zu at once: two heaps put the same object after an object %.0f times (at most %.0f)",
	      size, wb, n, same, most);
	free(pa);
	free(pb);
	free(na);
	free(nb);
}

static void test_seeds(void)
{
	neighbour_identity(32, WINDOW_DEFAULT_SHIFT, 1000, 200);
	neighbour_identity(256, WINDOW_DEFAULT_SHIFT, 300, 400);
	neighbour_identity(16, WINDOW_DEFAULT_SHIFT, 10000, 20);
	neighbour_identity(16, 0, 10000, 20);
	same_slots(16, 0, 2000, HEAPS);
	same_slots(64, WINDOW_DEFAULT_SHIFT, 8000, 8);
	masking(16, 0, 4000, HEAPS);
	masking(64, WINDOW_DEFAULT_SHIFT, 10000, HEAPS);
	dangling(16, 1000, 640, 150, HEAPS);
}

int main(void)
{
	test_layouts();
	test_orders();
	test_threads();
	test_sequence();
	test_reuse();
	test_seeds();
	return tap_done();
}
