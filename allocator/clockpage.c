/* clockpage.c — see clockpage.h.
 *
 * Publication: an entry's fields are written, then its checksum, then its
 * tag (release); a reader loads the tag (acquire), then the fields and
 * checks the sum. A ring position is rewritten only for entry n + CP_RING,
 * after diehard harvested entry n, so a reader still on n then sees a
 * wrong tag or sum and falls back: diehard has n in its log. And only
 * once n's leader is done with it: a leader marks its position pending
 * before it claims, so one that diehard overruled while it was held up
 * cannot publish late over its own slot's later entry (the later leader
 * finds the mark and falls back).
 *
 * Claims are final once published, except that diehard may take over a
 * claim whose holder has not published (cp_settle): so the holder, after
 * publishing, and a follower, after reading the holder's entry, load the
 * claim again; if diehard took it, they use diehard's entry instead. Diehard,
 * after taking a claim, looks at the old holder's entry once more and adopts
 * it if it was published meanwhile. Whichever order these happen in, every
 * participant ends with the same value (clockpage.h).
 *
 * Followers copy the entry they took into their own page (a witness), so
 * a leader that damages its own page after someone took its entry cannot
 * make diehard lead a second, different value for it: diehard looks for
 * a sound copy in every page before it leads (copies are marked as
 * entries are: a late copy of an older entry never writes over one). A
 * sound copy cannot be made by a stray write: the checksum is keyed by the
 * run's secret. */
#include "clockpage.h"

#include <sched.h>
#include <stddef.h>

#define ALL_OFF (1ull << 63)
/* In diehard's page, tag PENDING | (n + 1): it is taking entry n over. */
#define PENDING (1ull << 63)
/* Waits: this many checks with a pause each, then each check yields the
 * CPU (the holder may be descheduled: with more replicas than CPUs it
 * often is), up to CP_SPINS checks in all. */
#define BUSY_SPINS 256u

static void wait_a_little(unsigned spin)
{
	if (spin < BUSY_SPINS)
		__builtin_ia32_pause();
	else
		(void)sched_yield();
}

size_t cp_page_size(void)
{
	return (sizeof(struct cp_page) + 4095) & ~(size_t)4095;
}

size_t cp_claims_size(void)
{
	return (sizeof(struct cp_claims) + 4095) & ~(size_t)4095;
}

bool cp_served(unsigned key)
{
	/* Not the CPU-time clocks (2, 3: a task's own, matched per task) nor
	 * id 10 (no clock). */
	return key < CP_KEYS && key != 2 && key != 3 && key != 10;
}

bool cp_monotonic(unsigned key)
{
	return key == 1 || key == 4 || key == 6 || key == 7 || key == 9;
}

void cp_page_init(struct cp_page *p, unsigned slot, unsigned nslots)
{
	p->magic = CP_MAGIC;
	p->slot = slot;
	p->nslots = nslots;
}

void cp_page_forget(struct cp_page *p)
{
	for (unsigned k = 0; k < CP_KEYS; k++) {
		/* Entries n were taken below the count (a damaged count that
		 * is too low leaves marks behind: leads there fall back). */
		uint64_t count = atomic_load_explicit(&p->count[k], memory_order_relaxed);
		unsigned used = count < CP_RING ? (unsigned)count : CP_RING;
		unsigned marked = count < CP_DONE ? (unsigned)count : CP_DONE;
		for (unsigned i = 0; i < marked; i++)
			atomic_store_explicit(&p->done[k][i], 0, memory_order_relaxed);
		for (unsigned i = 0; i < used; i++) {
			_Atomic uint64_t *tags[2] = { &p->ring[k][i].tag, &p->copy[k][i].tag };
			for (unsigned t = 0; t < 2; t++)
				if (atomic_load_explicit(tags[t], memory_order_relaxed) & PENDING)
					atomic_store_explicit(tags[t], 0, memory_order_relaxed);
		}
	}
}

void cp_done(struct cp_page *p, unsigned key, uint64_t n, uint64_t term)
{
	_Atomic uint64_t *d = &p->done[key][n % CP_DONE];
	uint64_t was = atomic_load_explicit(d, memory_order_relaxed);
	/* A later read's mark (its index ahead of ours by whole turns of the
	 * marks, modulo 2^32) stays; anything else is written over, garbage
	 * included (a replaced process's, left past its count). */
	uint32_t ahead = (uint32_t)was - (uint32_t)(n + 1);
	if (was == 0 || ahead == 0 || ahead >= 1u << 31 || ahead % CP_DONE != 0)
		atomic_store_explicit(d, cp_mark(n, term), memory_order_release);
}

/* The term of read n's mark: true and *term if the mark is n's (or a read
 * 2^32 later's, which only a slot whose count passed n + CP_DONE made: the
 * caller looks at the count after the marks, check_terms). */
static bool mark_term(const struct cp_page *p, unsigned key, uint64_t n, uint64_t *term)
{
	uint64_t m = atomic_load_explicit(&p->done[key][n % CP_DONE], memory_order_acquire);
	if (m == 0 || (uint32_t)m != (uint32_t)(n + 1))
		return false;
	*term = m >> 32;
	return true;
}

/* The marks of reads first and on, read before this, were their own if the
 * count has not passed first + CP_DONE: a read that writes over a mark
 * takes its index first. */
static void check_terms(const struct cp_page *p, unsigned key, uint64_t first, bool *unsure)
{
	if (atomic_load_explicit(&p->count[key], memory_order_relaxed) > first + CP_DONE)
		*unsure = true;
}

uint64_t cp_floor(const struct cp_page *p, unsigned key, uint64_t floor, uint64_t count, uint64_t *sum,
		  bool *unsure)
{
	uint64_t first = floor, term, add = 0;
	while (floor < count && mark_term(p, key, floor, &term)) {
		add += term;
		floor++;
	}
	if (floor > first) {
		check_terms(p, key, first, unsure);
		*sum += add;
	}
	return floor;
}

uint64_t cp_sum_rest(const struct cp_page *p, unsigned key, uint64_t floor, uint64_t count, bool *unsure)
{
	uint64_t sum = 0, term;
	for (uint64_t n = floor; n < count && n < floor + CP_DONE; n++) {
		if (mark_term(p, key, n, &term))
			sum += term;
		else
			*unsure = true; /* never finished, or its mark refused */
	}
	check_terms(p, key, floor, unsure);
	return sum;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

static uint64_t checksum(uint64_t secret, unsigned key, uint64_t n, const struct cp_value *v)
{
	uint64_t h = mix(secret, (uint64_t)key << 56 ^ n);
	h = mix(h, (uint64_t)v->a);
	h = mix(h, (uint64_t)v->b);
	return mix(h, (uint64_t)(uint32_t)v->c << 32 | (uint32_t)v->d);
}

uint64_t cp_sum_term(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *value)
{
	return checksum(v->secret, key, n, value);
}

static bool less(const struct cp_value *x, const struct cp_value *y)
{
	return x->a < y->a || (x->a == y->a && x->b < y->b);
}

/* Stores c and d with one 8-byte store: their readers (the checks of an
 * entry's fields, a copy of the value) load them as one word, and two
 * 4-byte stores still on their way cannot be forwarded to that load (a
 * stall of a dozen cycles per harvested entry, measured). The builtin:
 * this library's own memcpy is an interposed entry point, not inlined. */
_Static_assert(offsetof(struct cp_value, d) == offsetof(struct cp_value, c) + sizeof(int32_t), "c, d adjacent");
static void set_cd(struct cp_value *v, int32_t c, int32_t d)
{
	int32_t pair[2] = { c, d };
	uint64_t word;
	__builtin_memcpy(&word, pair, sizeof word);
	__builtin_memcpy((unsigned char *)v + offsetof(struct cp_value, c), &word, sizeof word);
}

/* Entry n of key in page p: 1 and *out (and its checksum in *check, when
 * not NULL) if published and sound, 0 if not (yet) published there, -1 if
 * the position holds something else. */
static int entry_at(const struct cp_view *v, const struct cp_entry *e, unsigned key, uint64_t n, struct cp_value *out,
		    uint64_t *check);

static int entry_in(const struct cp_view *v, const struct cp_page *p, unsigned key, uint64_t n, struct cp_value *out,
		    uint64_t *check)
{
	if (p == NULL)
		return -1;
	return entry_at(v, &p->ring[key][n % CP_RING], key, n, out, check);
}

static int entry_at(const struct cp_view *v, const struct cp_entry *e, unsigned key, uint64_t n, struct cp_value *out,
		    uint64_t *check_out)
{
	uint64_t tag = atomic_load_explicit(&e->tag, memory_order_seq_cst);
	if (tag < n + 1 || tag == (PENDING | (n + 1)))
		return 0;
	if (tag != n + 1)
		return -1;
	out->a = atomic_load_explicit(&e->a, memory_order_relaxed);
	out->b = atomic_load_explicit(&e->b, memory_order_relaxed);
	set_cd(out, atomic_load_explicit(&e->c, memory_order_relaxed), atomic_load_explicit(&e->d, memory_order_relaxed));
	uint64_t check = atomic_load_explicit(&e->check, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->tag, memory_order_relaxed) != n + 1)
		return -1; /* rewritten meanwhile */
	if (check != checksum(v->secret, key, n, out))
		return -1;
	if (check_out != NULL)
		*check_out = check;
	return 1;
}

static void write_entry(struct cp_entry *e, uint64_t n, const struct cp_value *val, uint64_t check);

/* Publishes entry n in page p; returns its checksum (also the value's
 * term of the sum: cp_sum_term). */
static uint64_t publish(const struct cp_view *v, struct cp_page *p, unsigned key, uint64_t n, const struct cp_value *val)
{
	uint64_t check = checksum(v->secret, key, n, val);
	write_entry(&p->ring[key][n % CP_RING], n, val, check);
	return check;
}

/* check: the value's checksum for entry n (checksum()). */
static void write_entry(struct cp_entry *e, uint64_t n, const struct cp_value *val, uint64_t check)
{
	/* Being written: readers see "not yet" (and in diehard's page, a
	 * takeover still under way), never a torn entry. */
	atomic_store_explicit(&e->tag, PENDING | (n + 1), memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&e->a, val->a, memory_order_relaxed);
	atomic_store_explicit(&e->b, val->b, memory_order_relaxed);
	atomic_store_explicit(&e->c, val->c, memory_order_relaxed);
	atomic_store_explicit(&e->d, val->d, memory_order_relaxed);
	atomic_store_explicit(&e->check, check, memory_order_relaxed);
	atomic_store_explicit(&e->tag, n + 1, memory_order_seq_cst);
}

/* The claim of entry n: its holder's slot (0-based), or -1 unclaimed (an
 * older entry's claim, or none), -2 a later entry's (the position was
 * reused: n is out of the ring), -3 garbage. */
static int holder(const struct cp_view *v, uint64_t c, uint64_t n)
{
	uint64_t cn = c >> 8;
	unsigned who = (unsigned)(c & 0xff);
	if (cn < n + 1)
		return -1;
	if (cn > n + 1)
		return -2;
	if (who == 0 || who > v->nslots + 1)
		return -3;
	return (int)who - 1;
}

int cp_published(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, unsigned *by)
{
	uint64_t c = atomic_load_explicit(&v->claims->claim[key][n % CP_RING], memory_order_seq_cst);
	int h = holder(v, c, n);
	if (h < 0)
		return h == -1 ? 0 : -1;
	int r = entry_in(v, v->pages[h], key, n, out, NULL);
	if (r == 1)
		*by = (unsigned)h;
	return r;
}

/* Diehard's page for entry n: 1 published (*out), 2 taking it over, 0
 * neither. */
static int dh_state(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out)
{
	const struct cp_page *dh = v->pages[v->nslots];
	uint64_t tag = atomic_load_explicit(&dh->ring[key][n % CP_RING].tag, memory_order_seq_cst);
	if (tag == (PENDING | (n + 1)))
		return 2;
	return tag == n + 1 && entry_in(v, dh, key, n, out, NULL) == 1 ? 1 : 0;
}

/* Diehard's value of entry n, once it has taken the entry over: true and
 * *out, false when it does not come in time (the caller falls back). */
static bool await_dh(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out)
{
	for (unsigned w = 0; w < CP_SPINS; w++) {
		int s = dh_state(v, key, n, out);
		if (s == 1)
			return true;
		if (s == 0)
			return false;
		wait_a_little(w);
	}
	return false;
}

/* A sound entry n of key in any page, diehard's first (its decisions
 * stand); true and *out, *by if found. Once the claims are damaged this
 * is how a published entry is still found. */
static bool find_anywhere(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, unsigned *by)
{
	for (unsigned i = 0; i <= v->nslots; i++) {
		unsigned j = i == 0 ? v->nslots : i - 1;
		if (entry_in(v, v->pages[j], key, n, out, NULL) == 1) {
			*by = j;
			return true;
		}
	}
	for (unsigned j = 0; j < v->nslots; j++)
		if (v->pages[j] != NULL && entry_at(v, &v->pages[j]->copy[key][n % CP_RING], key, n, out, NULL) == 1) {
			*by = j;
			return true;
		}
	return false;
}

/* Marks a position of our own page ours for entry n (tag PENDING | (n + 1),
 * by compare-and-swap) if it holds a finished entry no later than
 * newest_ok (tag, not pending): a thread of ours still writing an older
 * entry there, or a later one already written, makes it false (the caller
 * falls back). *was: the tag it held, to put back on a change of mind. */
static bool mark_ours(_Atomic uint64_t *tag, uint64_t n, uint64_t newest_ok, uint64_t *was)
{
	*was = atomic_load_explicit(tag, memory_order_seq_cst);
	return !(*was & PENDING) && *was <= newest_ok &&
	       atomic_compare_exchange_strong_explicit(tag, was, PENDING | (n + 1), memory_order_seq_cst,
						       memory_order_seq_cst);
}

/* Copies entry n into our own page (a witness), in the copies' ring. As
 * for a leader's entry, the position is first marked ours, from a finished
 * older copy (or our own of n): a thread of ours held up while copying an
 * entry a ring ago must not write over this copy later, since diehard may
 * need it (the leader's page damaged). false: the position is taken (such
 * a thread is still copying, or we are the late one): fall back. */
static bool witness(struct cp_page *own, unsigned key, uint64_t n, const struct cp_value *val, uint64_t check)
{
	struct cp_entry *e = &own->copy[key][n % CP_RING];
	uint64_t was;
	if (!mark_ours(&e->tag, n, n + 1, &was)) /* our own earlier copy of n may be redone */
		return false;
	write_entry(e, n, val, check);
	return true;
}

/* After taking value *out for entry n (as its leader, or from the leader
 * claim c named), with the claim found changed since: if diehard is taking
 * n over, its value is the one (waited for); if diehard's log already holds
 * n (its own entry gone from the ring: the reader was descheduled for a
 * ring of entries), that value may not be ours: fall back, diehard answers
 * from the log; else (a damaged claim) ours stands, since whoever settles n
 * later finds it in our page. 1 settled, -1 fall back. *check: the
 * checksum of *out, kept or replaced along with it. */
static int after_change(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n, struct cp_value *out,
			uint64_t *check)
{
	struct cp_value d;
	int s = dh_state(v, key, n, &d);
	/* A ring position diehard reused was harvested first: seen reused
	 * (s == 0 by a later tag), harvested is past n (seq_cst tag load,
	 * then this acquire). */
	if (s == 0 && atomic_load_explicit(&v->pages[v->nslots]->harvested[key], memory_order_acquire) > n)
		return -1;
	if (s == 0)
		return 1;
	if (s == 2 && !await_dh(v, key, n, &d))
		return -1;
	*out = d;
	*check = checksum(v->secret, key, n, out);
	return witness(own, key, n, out, *check) ? 1 : -1;
}

/* The fast path's follower: entry n as claim c names it; 1 settled (*out,
 * copied into our own page), 0 wait, -1 fall back. The copy is written
 * before the claim is looked at again: diehard, taking the claim over,
 * looks for copies only after, so it finds this one or we see its claim.
 * *check: the checksum of *out. */
static int follow(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n, uint64_t c,
		  struct cp_value *out, uint64_t *check)
{
	int h = holder(v, c, n);
	if (h < 0)
		return -1;
	int r = entry_in(v, v->pages[h], key, n, out, check);
	if (r != 1)
		return r;
	if (h != (int)v->self && !witness(own, key, n, out, *check))
		return -1;
	if (atomic_load_explicit(&v->claims->claim[key][n % CP_RING], memory_order_seq_cst) == c)
		return 1;
	return after_change(v, own, key, n, out, check);
}

/* Whether every pacing slot but ours has reached entry n - CP_RING
 * (clockpage.h), so that leading n overwrites nothing they still need. */
static bool paced(struct cp_view *v, unsigned key, uint64_t n)
{
	if (n < atomic_load_explicit(&v->paced_below[key], memory_order_relaxed))
		return true;
	uint64_t pace = atomic_load_explicit(&v->pages[v->nslots]->pace, memory_order_relaxed);
	uint64_t least = UINT64_MAX;
	for (unsigned j = 0; j < v->nslots; j++) {
		if (!(pace >> j & 1) || j == v->self || v->pages[j] == NULL)
			continue;
		uint64_t c = atomic_load_explicit(&v->pages[j]->count[key], memory_order_relaxed);
		if (c + CP_RING <= n)
			return false;
		if (c < least)
			least = c;
	}
	if (least != UINT64_MAX && least < UINT64_MAX - CP_RING)
		atomic_store_explicit(&v->paced_below[key], least + CP_RING, memory_order_relaxed);
	return true;
}

enum cp_outcome cp_read(struct cp_view *v, unsigned key, cp_real_fn *real, void *arg, struct cp_value *out,
			uint64_t *index)
{
	const struct cp_page *dh = v->pages[v->nslots];
	struct cp_page *own = v->pages[v->self];
	uint64_t off = atomic_load_explicit(&dh->off, memory_order_acquire);
	if (off & (ALL_OFF | 1ull << v->self))
		return CP_OFF;
	uint64_t n = atomic_fetch_add_explicit(&own->count[key], 1, memory_order_relaxed);
	*index = n;
	_Atomic uint64_t *claim = &v->claims->claim[key][n % CP_RING];
	enum cp_outcome outcome = CP_FALLBACK;
	uint64_t term = 0; /* the checksum of *out: its term of the sum */
	for (unsigned spin = 0; spin < CP_SPINS; spin++) {
		uint64_t c = atomic_load_explicit(claim, memory_order_seq_cst);
		int h = holder(v, c, n);
		if (h >= 0) {
			int r = follow(v, own, key, n, c, out, &term);
			if (r < 0)
				return CP_FALLBACK;
			if (r > 0) {
				outcome = CP_FOLLOWED;
				break;
			}
			wait_a_little(spin);
			continue;
		}
		if (h != -1)
			return CP_FALLBACK;
		/* Unclaimed. Its ring position free (the entry a ring ago is in
		 * diehard's log), and entry n - 1 published, first. */
		if (n >= CP_RING && atomic_load_explicit(&dh->harvested[key], memory_order_acquire) <= n - CP_RING)
			return CP_FALLBACK;
		if (n >= CP_RING && !paced(v, key, n)) {
			wait_a_little(spin);
			continue;
		}
		struct cp_value prev;
		unsigned by;
		if (n > 0) {
			int r = cp_published(v, key, n - 1, &prev, &by);
			if (r < 0)
				return CP_FALLBACK;
			if (r == 0) {
				wait_a_little(spin);
				continue;
			}
			/* Another replica led n - 1 a moment ago: we caught up
			 * with it. Where replicas outnumber CPUs, leading on in
			 * step with it would move every claim and entry between
			 * two CPUs while a third replica, behind, waits for one;
			 * letting ours go to it now and then leaves one leader
			 * and followers reading what it wrote (a fifth less
			 * time for three replicas on two CPUs). */
			if (v->crowded && spin == 0 && by != v->self && by < v->nslots &&
			    n >= atomic_load_explicit(&v->yielded_at[key], memory_order_relaxed) + CP_YIELD_EVERY) {
				atomic_store_explicit(&v->yielded_at[key], n, memory_order_relaxed);
				atomic_fetch_add_explicit(&v->yields, 1, memory_order_relaxed);
				(void)sched_yield();
				continue;
			}
		}
		/* A claim looks unclaimed by mistake only if damaged: then the
		 * entry may well be published (by its leader, or copied by a
		 * follower), and leading it again would hand out a second value
		 * for it. A sound unclaimed position holds the claim of the entry
		 * a ring before (every settled entry's claim is its own), so
		 * only another value (a zeroed one, say) is looked into. */
		bool sound = n >= CP_RING && c >> 8 == n + 1 - CP_RING;
		if (!sound && find_anywhere(v, key, n, out, &by)) {
			term = checksum(v->secret, key, n, out);
			if (by != v->self && !witness(own, key, n, out, term))
				return CP_FALLBACK;
			/* What was found may be a leader's value that diehard
			 * has since overruled (it took the claim over before
			 * the leader published): claimed meanwhile, the claim
			 * decides (the loop follows it); still unclaimed (a
			 * damaged claim), diehard's value wins if it has one,
			 * as for a leader (after_change). */
			if (atomic_load_explicit(claim, memory_order_seq_cst) != c)
				continue;
			if (after_change(v, own, key, n, out, &term) < 0)
				return CP_FALLBACK;
			outcome = CP_FOLLOWED;
			break;
		}
		/* Our ring position is marked ours (pending) before we claim:
		 * if we are then held up long enough for diehard to take n
		 * over and our slot to reach n + CP_RING, that later leader
		 * finds the mark and falls back rather than share the
		 * position with our late publish. */
		_Atomic uint64_t *tag = &own->ring[key][n % CP_RING].tag;
		uint64_t was;
		if (!mark_ours(tag, n, n, &was))
			return CP_FALLBACK; /* an older leader of ours still writing, or we are late */
		uint64_t mine = (n + 1) << 8 | (v->self + 1);
		if (!atomic_compare_exchange_strong_explicit(claim, &c, mine, memory_order_seq_cst,
							     memory_order_seq_cst)) {
			atomic_store_explicit(tag, was, memory_order_seq_cst);
			continue;
		}
		if (real(key, out, arg) != 0) {
			atomic_store_explicit(tag, was, memory_order_seq_cst);
			return CP_FALLBACK; /* claimed, never published: diehard takes it over */
		}
		if (n > 0 && cp_monotonic(key) && less(out, &prev))
			*out = prev;
		term = publish(v, own, key, n, out);
		outcome = CP_LED;
		if (atomic_load_explicit(claim, memory_order_seq_cst) != mine) {
			if (after_change(v, own, key, n, out, &term) < 0)
				return CP_FALLBACK;
			outcome = CP_FOLLOWED;
		}
		break;
	}
	if (outcome == CP_FALLBACK)
		return CP_FALLBACK;
	cp_done(own, key, n, term);
	return outcome;
}

/* Diehard's harvest: entry n published in its own page (a claim damaged
 * after diehard settled it). */
static bool find_published_settled(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out,
				   unsigned *by)
{
	if (dh_state(v, key, n, out) != 1)
		return false;
	*by = v->nslots;
	return true;
}

/* Diehard: settles entry n of key alone (n - 1 settled). It marks its
 * entry pending before it takes the claim: a leader or follower that sees
 * the claim change then waits for its value. After taking the claim it
 * looks in every page: a value published (or copied) before that stands. */
static int settle_one(struct cp_view *v, unsigned key, uint64_t n, cp_real_fn *real, void *arg,
		      struct cp_value *out, unsigned *by)
{
	_Atomic uint64_t *claim = &v->claims->claim[key][n % CP_RING];
	struct cp_page *dh = v->pages[v->nslots];
	uint64_t mine = (n + 1) << 8 | (v->nslots + 1);
	*by = v->nslots;
	if (dh_state(v, key, n, out) == 1) {
		atomic_store_explicit(claim, mine, memory_order_seq_cst); /* mend a damaged claim */
		return 0;
	}
	atomic_store_explicit(&dh->ring[key][n % CP_RING].tag, PENDING | (n + 1), memory_order_seq_cst);
	for (;;) {
		uint64_t c = atomic_load_explicit(claim, memory_order_seq_cst);
		int h = holder(v, c, n);
		if (h >= 0 && h != (int)v->nslots && entry_in(v, v->pages[h], key, n, out, NULL) == 1)
			break; /* published: it stands */
		if (!atomic_compare_exchange_strong_explicit(claim, &c, mine, memory_order_seq_cst,
							     memory_order_seq_cst))
			continue;
		unsigned where;
		if (find_anywhere(v, key, n, out, &where))
			break;
		struct cp_value prev;
		unsigned pby;
		bool have_prev = n > 0 && (cp_published(v, key, n - 1, &prev, &pby) == 1 ||
					   find_anywhere(v, key, n - 1, &prev, &pby));
		if (real(key, out, arg) != 0) {
			atomic_store_explicit(&dh->ring[key][n % CP_RING].tag, 0, memory_order_seq_cst);
			return -1;
		}
		if (have_prev && cp_monotonic(key) && less(out, &prev))
			*out = prev;
		/* The entry's value was lost (its leader damaged its own page
		 * before anyone copied it) while a later one stands: a monotonic
		 * clock's new value must not pass it. */
		struct cp_value next;
		unsigned nby;
		if (cp_monotonic(key) && find_anywhere(v, key, n + 1, &next, &nby) && less(&next, out))
			*out = next;
		break;
	}
	publish(v, dh, key, n, out);
	return 0;
}

uint64_t cp_harvest(struct cp_view *v, unsigned key, cp_put_fn *put, void *arg)
{
	_Atomic uint64_t *h = &v->pages[v->nslots]->harvested[key];
	uint64_t from = atomic_load_explicit(h, memory_order_relaxed), n = from;
	for (;; n++) {
		struct cp_value x;
		unsigned by;
		if (cp_published(v, key, n, &x, &by) != 1 && !find_published_settled(v, key, n, &x, &by))
			break;
		put(key, n, &x, by, arg);
	}
	/* Once for the batch: every leader reads this word, and a store per
	 * entry took its line from them thousands of times a harvest. */
	if (n > from)
		atomic_store_explicit(h, n, memory_order_release);
	return n;
}

int cp_settle(struct cp_view *v, unsigned key, uint64_t n, cp_real_fn *real, cp_put_fn *put, void *arg)
{
	_Atomic uint64_t *h = &v->pages[v->nslots]->harvested[key];
	for (uint64_t m = atomic_load_explicit(h, memory_order_relaxed); m <= n; m++) {
		struct cp_value x;
		unsigned by;
		if (settle_one(v, key, m, real, arg, &x, &by) != 0)
			return -1;
		put(key, m, &x, by, arg);
		atomic_store_explicit(h, m + 1, memory_order_release);
	}
	return 0;
}

uint64_t cp_harvest_pace(uint64_t last_us, uint64_t got, uint64_t took_us)
{
	uint64_t us;
	if (got == 0)
		us = last_us > CP_HARVEST_MAX_US / 2 ? CP_HARVEST_MAX_US : 2 * last_us;
	else /* no overflow: took_us below 2^44 (half a year), CP_RING far below 2^20 */
		us = took_us < 1ull << 44 ? took_us * (CP_RING / 4) / got : CP_HARVEST_MAX_US;
	return us < CP_HARVEST_MIN_US ? CP_HARVEST_MIN_US : us > CP_HARVEST_MAX_US ? CP_HARVEST_MAX_US : us;
}

/* SipHash-2-4 (Aumasson and Bernstein) of one 64-bit word under key k: a
 * keyed pseudorandom function, so that an image's bytes tell nothing of the
 * key or of the other images' bytes. */
static uint64_t rotl(uint64_t x, unsigned b)
{
	return x << b | x >> (64 - b);
}

#define SIPROUND                                                                                          \
	do {                                                                                               \
		v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                                 \
		v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                                     \
		v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                                     \
		v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                                 \
	} while (0)

static uint64_t siphash_word(const uint64_t k[2], uint64_t m)
{
	uint64_t v0 = k[0] ^ 0x736f6d6570736575ull, v1 = k[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = k[0] ^ 0x6c7967656e657261ull, v3 = k[1] ^ 0x7465646279746573ull;
	uint64_t b = (uint64_t)8 << 56; /* the length, 8 bytes, in the last block */
	v3 ^= m;
	SIPROUND;
	SIPROUND;
	v0 ^= m;
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

void cp_at_random(const uint64_t key[2], uint64_t n, uint8_t out[16])
{
	uint64_t w[2] = { siphash_word(key, 2 * n), siphash_word(key, 2 * n + 1) };
	for (unsigned i = 0; i < 16; i++)
		out[i] = (uint8_t)(w[i / 8] >> (8 * (i % 8)));
}
