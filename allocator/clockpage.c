/* clockpage.c — see clockpage.h.
 *
 * Publication: an entry's fields are written, then its checksum, then its
 * tag (release); a reader loads the tag (acquire), then the fields and
 * checks the sum. A ring position is rewritten only for entry n + CP_RING,
 * after diehard harvested entry n, so a reader still on n then sees a
 * wrong tag or sum and falls back: diehard has n in its log. And only
 * once n's leader is done with it: a leader marks its position (its
 * proposal, PENDING) before anything else, so one that diehard overruled
 * while it was held up cannot publish late over its own slot's later
 * entry (the later leader finds the mark and falls back).
 *
 * Proposals (clockpage.h): every store that announces something (a
 * proposal, a publication, a witness copy, diehard's taking an entry over)
 * is sequentially consistent, and so is every load that looks for
 * another's: of two participants that each store, then load the other's
 * word, at least one sees the other's store. That is all the agreement
 * rests on:
 * - two proposers of n: at least one sees the other and yields, so at
 *   most one leads (one that sees only yielded proposals may lead: those
 *   will not);
 * - a leader publishing n and diehard taking n over: either diehard sees
 *   the publication and adopts it, or the leader sees diehard's mark and
 *   takes diehard's value;
 * - a follower copying n (its witness) and diehard taking n over: either
 *   diehard sees the copy (and the publication it came from) and adopts
 *   the value, or the follower sees the mark and takes diehard's value.
 *
 * Followers copy the entry they took into their own page (a witness), so
 * a leader that damages its own page after someone took its entry cannot
 * make diehard lead a second, different value for it: diehard looks for
 * sound copies in every page before it leads, and takes the value most of
 * them hold (copies are marked as entries are: a late copy of an older
 * entry never writes over one). And a slot copies every entry before the
 * one it takes that it does not hold yet (backfill): a lost entry nobody
 * took, before one somebody took, is then found as a copy too, never led
 * again later than the one taken. */
#include "clockpage.h"

#include <sched.h>
#include <stddef.h>

#define ALL_OFF (1ull << 63)
/* A ring position's tag PENDING | (n + 1): its slot proposes entry n (in
 * diehard's page: it is taking n over); PENDING | YIELD | (n + 1): the
 * slot proposed n and yielded it to another proposer. */
#define PENDING (1ull << 63)
#define YIELD (1ull << 62)
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

static uint64_t publish(const struct cp_view *v, struct cp_page *p, unsigned key, uint64_t n, const struct cp_value *val);

bool cp_served(unsigned key)
{
	/* Not the CPU-time clocks (2, 3: a task's own, matched per task) nor
	 * id 10 (no clock). */
	return key < CP_KEYS && key != 2 && key != 3 && key != 10;
}

void cp_seed(struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *val)
{
	publish(v, v->pages[v->nslots], key, n, val);
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

/* Stores mark (read n's) over what position n of the marks holds, unless
 * that is a later read's mark. */
static void put_mark(struct cp_page *p, unsigned key, uint64_t n, uint64_t mark)
{
	_Atomic uint64_t *d = &p->done[key][n % CP_DONE];
	uint64_t was = atomic_load_explicit(d, memory_order_relaxed);
	/* A later read's mark (its index ahead of ours by whole turns of the
	 * marks, modulo 2^32) stays; anything else is written over, garbage
	 * included (a replaced process's, left past its count). */
	uint32_t ahead = (uint32_t)was - (uint32_t)(n + 1);
	/* Sequentially consistent: a mark is the replica's word that it took
	 * the value (cp_read's consume), which diehard, taking an entry over,
	 * looks for after its own mark. */
	if (was == 0 || ahead == 0 || ahead >= 1u << 31 || ahead % CP_DONE != 0)
		atomic_store_explicit(d, mark, memory_order_seq_cst);
}

void cp_done(struct cp_page *p, unsigned key, uint64_t n, uint64_t term)
{
	put_mark(p, key, n, cp_mark(n, term));
}

/* Marks read n's value taken, not done (cp_mark_term): consume. */
static void taken(struct cp_page *p, unsigned key, uint64_t n, uint64_t term)
{
	uint64_t half = (cp_mark_term(term) & ~(uint64_t)3) | CP_MARK_TAKEN;
	put_mark(p, key, n, half << 32 | (uint32_t)(n + 1));
}

/* Whether mark m is read n's (or a read's 2^32 later), of either kind, for
 * a value whose term (checksum) is term. */
static bool mark_of(uint64_t m, uint64_t n, uint64_t term)
{
	return m != 0 && (uint32_t)m == (uint32_t)(n + 1) && (m >> 32 & ~(uint64_t)3) == (cp_mark_term(term) & ~(uint64_t)3);
}

/* The term of read n's mark: true and *term if the mark is n's done mark
 * (or a read 2^32 later's, which only a slot whose count passed n + CP_DONE
 * made: the caller looks at the count after the marks, check_terms). */
static bool mark_term(const struct cp_page *p, unsigned key, uint64_t n, uint64_t *term)
{
	uint64_t m = atomic_load_explicit(&p->done[key][n % CP_DONE], memory_order_acquire);
	if (m == 0 || (uint32_t)m != (uint32_t)(n + 1) || (m >> 32 & 3) != CP_MARK_DONE)
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
	/* At most a ring of marks a call: a sound walk stops sooner (a read a
	 * ring on writes over the mark it would need), and marks a replica
	 * keeps writing just ahead of this walk must not hold diehard here. */
	while (floor < count && floor - first < CP_DONE && mark_term(p, key, floor, &term)) {
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

/* The checksum key of key's entries: the run's secret, and for a lane's
 * the salt diehard drew when it gave the lane (its page): entries a page
 * held there before (a replica that knows the secret writing ahead into a
 * lane nobody had) are not sound. */
static uint64_t key_secret(const struct cp_view *v, unsigned key)
{
	int lane = cp_lane_of(key);
	return lane < 0 ? v->secret
			: v->secret ^ atomic_load_explicit(&v->pages[v->nslots]->lane_salt[lane], memory_order_acquire);
}

static uint64_t checksum_of(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *val);

static uint64_t checksum(uint64_t secret, unsigned key, uint64_t n, const struct cp_value *v)
{
	uint64_t h = mix(secret, (uint64_t)key << 56 ^ n);
	h = mix(h, (uint64_t)v->a);
	h = mix(h, (uint64_t)v->b);
	return mix(h, (uint64_t)(uint32_t)v->c << 32 | (uint32_t)v->d);
}

static uint64_t checksum_of(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *val)
{
	return checksum(key_secret(v, key), key, n, val);
}

uint64_t cp_sum_term(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *value)
{
	return checksum_of(v, key, n, value);
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
		    uint64_t *check_out)
{
	uint64_t tag = atomic_load_explicit(&e->tag, memory_order_seq_cst);
	if (tag != n + 1)
		return tag < n + 1 || (tag & PENDING) ? 0 : -1;
	out->a = atomic_load_explicit(&e->a, memory_order_relaxed);
	out->b = atomic_load_explicit(&e->b, memory_order_relaxed);
	set_cd(out, atomic_load_explicit(&e->c, memory_order_relaxed), atomic_load_explicit(&e->d, memory_order_relaxed));
	uint64_t check = atomic_load_explicit(&e->check, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->tag, memory_order_relaxed) != n + 1)
		return -1; /* rewritten meanwhile */
	if (check != checksum_of(v, key, n, out))
		return -1;
	if (check_out != NULL)
		*check_out = check;
	return 1;
}

static int entry_in(const struct cp_view *v, const struct cp_page *p, unsigned key, uint64_t n, struct cp_value *out,
		    uint64_t *check)
{
	if (p == NULL)
		return -1;
	return entry_at(v, &p->ring[key][n % CP_RING], key, n, out, check);
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

/* Publishes entry n in page p; returns its checksum (also the value's
 * term of the sum: cp_sum_term). */
static uint64_t publish(const struct cp_view *v, struct cp_page *p, unsigned key, uint64_t n, const struct cp_value *val)
{
	uint64_t check = checksum_of(v, key, n, val);
	write_entry(&p->ring[key][n % CP_RING], n, val, check);
	return check;
}

/* The slots whose pages are looked at: those that have had a process. */
static uint64_t used_slots(const struct cp_view *v)
{
	const struct cp_page *dh = v->pages[v->nslots];
	uint64_t used = atomic_load_explicit(&dh->used, memory_order_seq_cst) &
			~atomic_load_explicit(&dh->ignore, memory_order_seq_cst);
	return v->nslots >= 64 ? used : used & ((1ull << v->nslots) - 1);
}

/* What the other slots' ring positions say of entry n. */
enum seen {
	SEEN_NONE,      /* nobody proposes or holds it */
	SEEN_PROPOSED,  /* a slot proposes it, not yielded, not published yet */
	SEEN_DAMAGED,   /* a slot published it, and the entry is no longer sound */
	SEEN_PUBLISHED, /* a slot published it, sound: *out, *check, *by, *src */
};

/* Looks at every used slot's position of entry n but ours (the last
 * leader first; sequentially consistent loads). A yielded proposal counts
 * as none: that slot will not lead n. An entry published and then damaged
 * (its leader wrote over its own page) says n was led: it must not be led
 * again (someone may have taken it: a copy of it may be somewhere). */
static enum seen look(struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, uint64_t *check, unsigned *by,
		      const struct cp_entry **src)
{
	uint64_t used = used_slots(v);
	unsigned first = atomic_load_explicit(&v->last_by[key], memory_order_relaxed);
	enum seen seen = SEEN_NONE;
	for (unsigned i = 0; i <= v->nslots; i++) {
		unsigned j = i == 0 ? first : i - 1;
		if ((i > 0 && j == first) || j >= v->nslots || j == v->self || !(used >> j & 1) || v->pages[j] == NULL)
			continue;
		const struct cp_entry *e = &v->pages[j]->ring[key][n % CP_RING];
		uint64_t tag = atomic_load_explicit(&e->tag, memory_order_seq_cst);
		if (tag == (PENDING | (n + 1))) {
			if (seen == SEEN_NONE)
				seen = SEEN_PROPOSED;
			continue;
		}
		if (tag != n + 1)
			continue;
		if (entry_at(v, e, key, n, out, check) != 1) {
			seen = SEEN_DAMAGED;
			continue;
		}
		*by = j;
		*src = e;
		if (j != first)
			atomic_store_explicit(&v->last_by[key], j, memory_order_relaxed);
		return SEEN_PUBLISHED;
	}
	return seen;
}

/* A sound copy of entry n in a used slot's page, ours too (a follower took
 * it, or copied it before a later one, from a leader whose page no longer
 * has it: a thread of ours behind the one that copied it must take that
 * copy too, never lead n again): true, *out, *check, *src. */
static bool look_copies(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, uint64_t *check,
			const struct cp_entry **src)
{
	uint64_t used = used_slots(v);
	for (unsigned j = 0; j < v->nslots; j++) {
		if ((j != v->self && !(used >> j & 1)) || v->pages[j] == NULL)
			continue;
		const struct cp_entry *e = &v->pages[j]->copy[key][n % CP_RING];
		if (entry_at(v, e, key, n, out, check) == 1) {
			*src = e;
			return true;
		}
	}
	return false;
}

int cp_published(struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, unsigned *by)
{
	uint64_t check;
	/* Diehard's decision first; while it takes n over, n is not yet
	 * anyone's (what a leader published may be overruled). */
	uint64_t tag = atomic_load_explicit(&v->pages[v->nslots]->ring[key][n % CP_RING].tag, memory_order_seq_cst);
	if (tag == (PENDING | (n + 1)))
		return 0;
	if (tag == n + 1 && entry_in(v, v->pages[v->nslots], key, n, out, NULL) == 1) {
		*by = v->nslots;
		return 1;
	}
	const struct cp_entry *src;
	if (look(v, key, n, out, &check, by, &src) == SEEN_PUBLISHED)
		return 1;
	if (v->self < v->nslots && entry_in(v, v->pages[v->self], key, n, out, NULL) == 1) {
		*by = v->self;
		return 1;
	}
	return 0;
}

/* Diehard's page for entry n: 1 published (*out), 2 taking it over, 3 a
 * later entry there (n is a ring behind what diehard settled: whether it
 * took n over is gone), 0 neither. */
static int dh_state(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out)
{
	const struct cp_page *dh = v->pages[v->nslots];
	uint64_t tag = atomic_load_explicit(&dh->ring[key][n % CP_RING].tag, memory_order_seq_cst);
	if (tag == (PENDING | (n + 1)))
		return 2;
	if ((tag & ~PENDING) > n + 1)
		return 3;
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
		if (s != 2)
			return false;
		wait_a_little(w);
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

static bool same(const struct cp_value *x, const struct cp_value *y)
{
	return x->a == y->a && x->b == y->b && x->c == y->c && x->d == y->d;
}

/* Whether entry n stays where a leader of it would look whatever any other
 * slot does to its page: in our own page (a sound copy, or an entry we led:
 * checked against the sum, as a replacement may find garbage its slot's
 * last process left), or diehard's (its log, or its page). */
static bool held(const struct cp_view *v, const struct cp_page *own, unsigned key, uint64_t n)
{
	const struct cp_page *dh = v->pages[v->nslots];
	struct cp_value x;
	return entry_at(v, &own->copy[key][n % CP_RING], key, n, &x, NULL) == 1 ||
	       entry_at(v, &own->ring[key][n % CP_RING], key, n, &x, NULL) == 1 ||
	       atomic_load_explicit(&dh->harvested[key], memory_order_acquire) > n || dh_state(v, key, n, &x) == 1;
}

/* Entries a slot backfills before taking one, at most: its threads in
 * flight between the last it holds and the one it takes. */
#define BACKFILL_MAX 256u

/* Before our slot takes entry n: every entry from diehard's log up to
 * n - 1 held (above), copying those it lacks from wherever they are (a
 * thread of ours still on its way to one: we take a later one first).
 * Why: a replica that took n from a leader whose page then lost n - 1
 * must not let anyone lead n - 1 again, later than n; any leader looks
 * at our copies first. Each copy, as follow's, is stored before its
 * source is looked at again: still there, a leader that finds the source
 * gone looks after our copy. false: one is nowhere, or its position in
 * our page is taken: fall back. Usually one look at our own page. */
static bool backfill(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n)
{
	if (n == 0 || held(v, own, key, n - 1))
		return true;
	uint64_t from = n - 1;
	while (from > 0 && !held(v, own, key, from - 1))
		if (n - --from > BACKFILL_MAX)
			return false;
	for (uint64_t j = from; j < n; j++) {
		struct cp_value x, again;
		uint64_t check;
		unsigned by;
		const struct cp_entry *src;
		if (held(v, own, key, j))
			continue;
		if (look((struct cp_view *)v, key, j, &x, &check, &by, &src) != SEEN_PUBLISHED &&
		    !look_copies(v, key, j, &x, &check, &src))
			return false;
		if (!witness(own, key, j, &x, check) || entry_at(v, src, key, j, &again, NULL) != 1 || !same(&again, &x))
			return false;
		/* And diehard is not taking j over (its mark, then its look at
		 * the pages: either it sees our copy, or we its mark). */
		int d = dh_state(v, key, j, &again);
		if (d == 2 || d == 3 || (d == 1 && !same(&again, &x)))
			return false;
	}
	return true;
}

/* After taking value *out for entry n (as its leader, or from its leader:
 * published, or copied into our page, and marked done, before this looks): if diehard is
 * taking n over, or took it, its value is the one (waited for, then copied
 * as a witness); if diehard's position has moved a ring past n, whether it
 * took n over cannot be told: ask it (its log has n); else ours stands
 * (diehard, taking n over later, finds it). 1 settled, -1 fall back.
 * *check: the checksum of *out, kept or replaced along with it. */
static int confirm(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n, struct cp_value *out,
		   uint64_t *check)
{
	struct cp_value d;
	int s = dh_state(v, key, n, &d);
	if (s == 0)
		return 1;
	if (s == 3)
		return -1;
	if (s == 2 && !await_dh(v, key, n, &d))
		return -1;
	*out = d;
	*check = checksum_of(v, key, n, out);
	if (!witness(own, key, n, out, *check))
		return -1;
	cp_done(own, key, n, *check);
	return 1;
}

/* Whether another used slot's page holds entry n with another value than
 * *val, sound, as an entry it led or a copy it took; or, for a monotonic
 * clock, any page (ours too) or diehard's holds entry n - 1 with a later
 * value than *val (or diehard is taking n - 1 over). */
static bool conflict(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *val)
{
	uint64_t used = used_slots(v);
	bool before = n > 0 && cp_monotonic(key);
	if (before) {
		struct cp_value d;
		int s = dh_state(v, key, n - 1, &d);
		if (s == 2 || (s == 1 && less(val, &d)))
			return true;
	}
	for (unsigned j = 0; j < v->nslots; j++) {
		if (!(used >> j & 1) || v->pages[j] == NULL)
			continue;
		const struct cp_page *p = v->pages[j];
		struct cp_value x;
		if (j != v->self)
			for (unsigned i = 0; i < 2; i++) {
				const struct cp_entry *e = i == 0 ? &p->ring[key][n % CP_RING] : &p->copy[key][n % CP_RING];
				if (entry_at(v, e, key, n, &x, NULL) == 1 && !same(&x, val))
					return true;
			}
		for (unsigned i = 0; before && i < 2; i++) {
			const struct cp_entry *e = i == 0 ? &p->ring[key][(n - 1) % CP_RING] : &p->copy[key][(n - 1) % CP_RING];
			if (entry_at(v, e, key, n - 1, &x, NULL) == 1 && less(val, &x))
				return true;
		}
	}
	return false;
}

/* Takes *out (*check) as entry n's value: published by us (src NULL), or
 * as src holds it (another's entry or copy), copied into our page before
 * this. Three looks, each after our last store (conflict also keeps a
 * monotonic clock's n after every value of n - 1 there is):
 * - src still holds it: anyone who looks for n from now on finds it there,
 *   or finds our copy (its page damaged later);
 * - no other page holds another value for n (a slot that led n without a
 *   proposal we could see: one whose page was damaged): of any two
 *   replicas that take a value of n this way, the later looks after the
 *   earlier's store, so they never take two values;
 * - our mark stored (taken: our word that we took it, done only once
 *   confirmed, so that diehard's log keeps n should we still ask for it),
 *   diehard's page: if diehard took n over, its value is the one (confirm);
 *   else diehard, taking n over later, finds our mark.
 * Anything amiss: ask diehard. 1 taken, -1 fall back. */
static int consume(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n, const struct cp_entry *src,
		   struct cp_value *out, uint64_t *check)
{
	struct cp_value again;
	if (src != NULL && (entry_at(v, src, key, n, &again, NULL) != 1 || !same(&again, out)))
		return -1;
	/* Also, for a monotonic clock, no value of n - 1 may be later than
	 * ours: n's leader went by one value of n - 1, and another may be the
	 * one (diehard taking n - 1 over with a later read, or a second
	 * leader of n - 1 whose proposal a damaged page hid). Whoever took
	 * that value left it in a page (a copy, or its entry) before it read
	 * on, and diehard caps what it leads for n - 1 by the n it finds
	 * after its mark (settle_one): this looks after our store. */
	if (conflict(v, key, n, out))
		return -1;
	/* Taken, not done: confirm may still send us to diehard for n. */
	taken(own, key, n, *check);
	return confirm(v, own, key, n, out, check);
}

/* Follows entry n as src holds it: a witness copy, then consume. */
static int follow(const struct cp_view *v, struct cp_page *own, unsigned key, uint64_t n, const struct cp_entry *src,
		  struct cp_value *out, uint64_t *check)
{
	if (!backfill(v, own, key, n) || !witness(own, key, n, out, *check))
		return -1;
	return consume(v, own, key, n, src, out, check);
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

/* What a read of entry n may do next (cp_read's loop). */
enum step {
	STEP_DONE,     /* *out settled */
	STEP_WAIT,     /* look again a little later */
	STEP_FALLBACK, /* ask diehard */
};

/* Raises *val to the latest sound value of entry n in any used slot's
 * page (entries and copies) and diehard's. */
static void latest(const struct cp_view *v, unsigned key, uint64_t n, struct cp_value *val)
{
	uint64_t used = used_slots(v);
	struct cp_value x;
	if (entry_in(v, v->pages[v->nslots], key, n, &x, NULL) == 1 && less(val, &x))
		*val = x;
	for (unsigned j = 0; j < v->nslots; j++) {
		if (!(used >> j & 1) || v->pages[j] == NULL)
			continue;
		for (unsigned i = 0; i < 2; i++) {
			const struct cp_entry *e = i == 0 ? &v->pages[j]->ring[key][n % CP_RING] : &v->pages[j]->copy[key][n % CP_RING];
			if (entry_at(v, e, key, n, &x, NULL) == 1 && less(val, &x))
				*val = x;
		}
	}
}

/* Whether we may propose n at all, and n - 1's value (*prev) when n > 0.
 * STEP_DONE: yes; STEP_WAIT: not yet; STEP_FALLBACK: never (diehard's). */
static enum step may_propose(struct cp_view *v, unsigned key, uint64_t n, unsigned spin, struct cp_value *prev)
{
	const struct cp_page *dh = v->pages[v->nslots];
	uint64_t harvested = atomic_load_explicit(&dh->harvested[key], memory_order_acquire);
	/* Diehard's log has n (no page had it: its leader's page damaged, or
	 * its position reused), or our ring position is not free yet (the
	 * entry a ring ago is not in the log). */
	if (harvested > n || (n >= CP_RING && harvested <= n - CP_RING))
		return STEP_FALLBACK;
	if (n >= CP_RING && !paced(v, key, n))
		return STEP_WAIT;
	/* Entry n + 1 led already means n was led (its leader's page lost
	 * it): leading n again could put it after n + 1. */
	struct cp_value later;
	unsigned by;
	if (cp_published(v, key, n + 1, &later, &by) == 1)
		return STEP_FALLBACK;
	if (n == 0)
		return STEP_DONE;
	if (cp_published(v, key, n - 1, prev, &by) != 1)
		return STEP_WAIT;
	/* A monotonic clock goes by the latest value of n - 1 any page holds
	 * (there is one unless a damaged page hid a second leader of it). */
	if (cp_monotonic(key))
		latest(v, key, n - 1, prev);
	/* Another replica led n - 1 a moment ago: we caught up with it.
	 * Where replicas outnumber CPUs, leading on in step with it would move
	 * every proposal and entry between two CPUs while a third replica,
	 * behind, waits for one; letting ours go to it now and then leaves one
	 * leader and followers reading what it wrote (a fifth less time for
	 * three replicas on two CPUs). */
	if (v->crowded && spin == 0 && by != v->self && by < v->nslots &&
	    n >= atomic_load_explicit(&v->yielded_at[key], memory_order_relaxed) + CP_YIELD_EVERY) {
		atomic_store_explicit(&v->yielded_at[key], n, memory_order_relaxed);
		atomic_fetch_add_explicit(&v->yields, 1, memory_order_relaxed);
		(void)sched_yield();
		return STEP_WAIT;
	}
	return STEP_DONE;
}

/* Whether a server's follower must not take *val for key: its second has
 * turned against the follower's own clock, or it is more than CP_STALE_NS
 * old (diehard's rule, take.c's stale: an event loop's reads drift apart in
 * count, and a follower would grow ever older; one that asks instead is
 * moved to the front). A wall key's own clock is read as REALTIME (through
 * the vDSO, not a gettimeofday system call); a clock that cannot be read
 * says nothing. */
static bool stale(unsigned key, const struct cp_value *val, cp_real_fn *real, void *arg)
{
	unsigned base = cp_key_base(key);
	bool wall = cp_wall_of(base) >= 0;
	struct cp_value now;
	if (real(wall ? 0 : base, &now, arg) != 0)
		return false;
	if (now.a != val->a)
		return true;
	int64_t unit = base == CP_KEY_GETTIMEOFDAY ? 1000 : 1;
	return base != CP_KEY_TIME && now.b - val->b * unit > CP_STALE_NS;
}

enum cp_outcome cp_read(struct cp_view *v, unsigned key, cp_real_fn *real, void *arg, struct cp_value *out,
			uint64_t *index)
{
	const struct cp_page *dh = v->pages[v->nslots];
	struct cp_page *own = v->pages[v->self];
	uint64_t off = atomic_load_explicit(&dh->off, memory_order_acquire);
	if (off & (ALL_OFF | 1ull << v->self))
		return CP_OFF;
	/* A server's base wall keys are per thread: read in a lane (the
	 * caller's key then) or by diehard. What it follows must be fresh,
	 * as diehard's rule for a server's clocks says (stale). */
	bool fresh = cp_serving(v);
	if (fresh && cp_wall_of(key) >= 0)
		return CP_OFF;
	uint64_t n = atomic_fetch_add_explicit(&own->count[key], 1, memory_order_relaxed);
	*index = n;
	_Atomic uint64_t *tag = &own->ring[key][n % CP_RING].tag;
	enum cp_outcome outcome = CP_FALLBACK;
	uint64_t term = 0; /* the checksum of *out: its term of the sum */
	bool yielded = false; /* we proposed n and yielded it: we follow */
	uint64_t was = 0;     /* our position's tag before we proposed */
	unsigned by;
	const struct cp_entry *src;
	for (unsigned spin = 0; spin < CP_SPINS; spin++) {
		int s = dh_state(v, key, n, out);
		if (s == 3)
			break; /* a ring behind diehard: its log has n */
		if (s != 0) {
			if (s == 2 && !await_dh(v, key, n, out))
				break;
			if (fresh && stale(key, out, real, arg))
				break;
			term = checksum_of(v, key, n, out);
			if (!witness(own, key, n, out, term))
				break;
			outcome = CP_FOLLOWED;
			break;
		}
		enum seen seen = look(v, key, n, out, &term, &by, &src);
		if (seen == SEEN_DAMAGED && !look_copies(v, key, n, out, &term, &src))
			break; /* led, and gone: diehard finds who took it */
		if (seen == SEEN_PUBLISHED || seen == SEEN_DAMAGED) {
			if (!(fresh && stale(key, out, real, arg)) && follow(v, own, key, n, src, out, &term) > 0)
				outcome = CP_FOLLOWED;
			break;
		}
		if (yielded && seen == SEEN_NONE)
			break; /* every proposer yielded: diehard settles n */
		if (yielded || seen == SEEN_PROPOSED) {
			wait_a_little(spin);
			continue;
		}
		struct cp_value prev;
		enum step st = may_propose(v, key, n, spin, &prev);
		if (st == STEP_FALLBACK)
			break;
		if (st == STEP_WAIT) {
			wait_a_little(spin);
			continue;
		}
		/* Proposed in our own ring's position (a thread of ours still
		 * writing an older entry there, held up while diehard took it
		 * over, or we are a ring late: fall back), then the others
		 * looked at again after it. */
		if (!mark_ours(tag, n, n, &was))
			break;
		seen = look(v, key, n, out, &term, &by, &src);
		/* Nobody holds n, or its leader's page lost it: a copy a
		 * follower took stands (follow's second look makes sure one
		 * that took it before the loss copied it where this finds it). */
		if (seen == SEEN_NONE || seen == SEEN_DAMAGED) {
			if (look_copies(v, key, n, out, &term, &src))
				seen = SEEN_PUBLISHED;
			else if (seen == SEEN_DAMAGED) {
				atomic_store_explicit(tag, was, memory_order_seq_cst);
				break;
			}
		}
		if (seen == SEEN_PUBLISHED) {
			atomic_store_explicit(tag, was, memory_order_seq_cst);
			if (!(fresh && stale(key, out, real, arg)) && follow(v, own, key, n, src, out, &term) > 0)
				outcome = CP_FOLLOWED;
			break;
		}
		if (seen == SEEN_PROPOSED) {
			/* Another proposes n: we will not lead it. It may have
			 * seen us too and yielded as well: then nobody leads,
			 * and diehard settles n. */
			atomic_store_explicit(tag, PENDING | YIELD | (n + 1), memory_order_seq_cst);
			yielded = true;
			wait_a_little(spin);
			continue;
		}
		/* Nobody holds n, after our proposal: n may also be gone
		 * from every page because it was led and harvested, and its
		 * positions reused since (held up before our proposal, we saw
		 * none of it). Whoever reused a position saw diehard's
		 * harvested past n, and we saw that reuse: so do we now. The
		 * log has n: ask diehard, never lead a second value of it. */
		if (atomic_load_explicit(&dh->harvested[key], memory_order_seq_cst) > n || !backfill(v, own, key, n)) {
			atomic_store_explicit(tag, was, memory_order_seq_cst);
			break;
		}
		if (real(key, out, arg) != 0) {
			atomic_store_explicit(tag, was, memory_order_seq_cst);
			break; /* proposed, never published: diehard leads it */
		}
		if (n > 0 && cp_monotonic(key) && less(out, &prev))
			*out = prev;
		term = publish(v, own, key, n, out);
		atomic_store_explicit(&v->last_by[key], v->self, memory_order_relaxed);
		/* Diehard may have taken n over before it saw our entry, or its
		 * value may be another's (consume). */
		struct cp_value mine = *out;
		if (consume(v, own, key, n, NULL, out, &term) > 0)
			outcome = same(out, &mine) ? CP_LED : CP_FOLLOWED;
		break;
	}
	/* A yielded proposal goes: the position holds what it held (a later
	 * proposal of ours must find it finished). */
	if (yielded)
		atomic_store_explicit(tag, was, memory_order_seq_cst);
	if (outcome == CP_FALLBACK)
		return CP_FALLBACK;
	cp_done(own, key, n, term);
	return outcome;
}

/* Diehard: the values of entry n the slots' pages hold (sound entries
 * they led and copies they took), and for each how many slots hold it and
 * how many marked it done (took it: cp_read's consume), with the lowest
 * slot that holds it. */
struct candidates {
	unsigned n;
	struct {
		struct cp_value val;
		uint64_t check;
		unsigned holders, takers, slot;
	} c[2 * CP_MAX_SLOTS];
};

static void gather(const struct cp_view *v, unsigned key, uint64_t n, struct candidates *cs)
{
	cs->n = 0;
	for (unsigned j = 0; j < v->nslots; j++) {
		if (v->pages[j] == NULL)
			continue;
		const struct cp_entry *at[2] = { &v->pages[j]->ring[key][n % CP_RING], &v->pages[j]->copy[key][n % CP_RING] };
		unsigned held = cs->n; /* a candidate this slot already counts for */
		for (unsigned e = 0; e < 2; e++) {
			struct cp_value x;
			uint64_t check;
			if (entry_at(v, at[e], key, n, &x, &check) != 1)
				continue;
			unsigned i = 0;
			while (i < cs->n && !same(&cs->c[i].val, &x))
				i++;
			if (i == cs->n) {
				cs->c[i].val = x;
				cs->c[i].check = check;
				cs->c[i].holders = cs->c[i].takers = 0;
				cs->c[i].slot = j;
				cs->n++;
			}
			if (i != held) {
				cs->c[i].holders++;
				held = i;
			}
		}
		uint64_t m = atomic_load_explicit(&v->pages[j]->done[key][n % CP_DONE], memory_order_seq_cst);
		for (unsigned i = 0; i < cs->n; i++)
			if (mark_of(m, n, cs->c[i].check)) {
				cs->c[i].takers++;
				break;
			}
	}
}

/* The one to keep: the value most slots took; among those (or if none
 * took any), for a monotonic clock the earliest (a slot that led n + 1 from
 * one of them raised it to that one's value at least, so the entries stay
 * in time order), else the one most slots hold; then the lowest slot's.
 * Honest replicas never take two values of one entry (consume), so one
 * taken is the one: only a slot that lies about what it took can tie with
 * them. */
static unsigned choose(const struct candidates *cs, bool monotonic)
{
	unsigned best = 0;
	for (unsigned i = 1; i < cs->n; i++) {
		const __typeof__(cs->c[0]) *x = &cs->c[i], *b = &cs->c[best];
		if (x->takers != b->takers) {
			if (x->takers > b->takers)
				best = i;
		} else if (monotonic && (less(&x->val, &b->val) || less(&b->val, &x->val))) {
			if (less(&x->val, &b->val))
				best = i;
		} else if (x->holders != b->holders) {
			if (x->holders > b->holders)
				best = i;
		} else if (x->slot < b->slot) {
			best = i;
		}
	}
	return best;
}

/* Diehard, settling a run of entries from `from`: the earliest sound value
 * any page holds (entries led and copies taken) of an entry after from,
 * up to the furthest count of the used slots (no entry past it was read
 * there) and at most BACKFILL_MAX on (a bound on the work a garbage count
 * makes; the replicas' backfill is what keeps honest slots' holes
 * shorter: this is a second line). Looked for once a run, at its first entry diehard leads: for a
 * later entry n of the run, the earliest after `from` is no later than the
 * earliest after n, so a value capped by it is capped enough. */
struct later {
	bool looked, have;
	struct cp_value min;
};

static bool earliest_after(const struct cp_view *v, unsigned key, uint64_t from, struct later *l)
{
	if (l->looked)
		return l->have;
	l->looked = true;
	uint64_t used = used_slots(v), top = from + 1;
	for (unsigned j = 0; j < v->nslots; j++) {
		uint64_t c = (used >> j & 1) && v->pages[j] != NULL
				     ? atomic_load_explicit(&v->pages[j]->count[key], memory_order_seq_cst)
				     : 0;
		if (c > top)
			top = c;
	}
	if (top - from > BACKFILL_MAX)
		top = from + BACKFILL_MAX; /* what a slot backfills: the holes an honest one can leave */
	for (uint64_t n = from + 1; n < top; n++)
		for (unsigned j = 0; j < v->nslots; j++) {
			if (v->pages[j] == NULL)
				continue;
			const struct cp_entry *at[2] = { &v->pages[j]->ring[key][n % CP_RING],
							 &v->pages[j]->copy[key][n % CP_RING] };
			for (unsigned e = 0; e < 2; e++) {
				struct cp_value x;
				if (entry_at(v, at[e], key, n, &x, NULL) == 1 && (!l->have || less(&x, &l->min))) {
					l->min = x;
					l->have = true;
				}
			}
		}
	return l->have;
}

/* Diehard: settles entry n of key alone (n - 1 settled). It marks its
 * entry pending (taking n over) before it looks at the pages: a leader or
 * follower that then looks at diehard's page waits for its value, and a
 * value taken (or published, or copied) before the mark stands (choose).
 * Every step is one pass over the slots: nothing a replica writes makes it
 * loop. */
static int settle_one(struct cp_view *v, unsigned key, uint64_t n, cp_real_fn *real, void *arg,
		      struct cp_value *out, unsigned *by, struct later *later)
{
	struct cp_page *dh = v->pages[v->nslots];
	*by = v->nslots;
	if (dh_state(v, key, n, out) == 1)
		return 0;
	atomic_store_explicit(&dh->ring[key][n % CP_RING].tag, PENDING | (n + 1), memory_order_seq_cst);
	bool mono = cp_monotonic(key), have_prev = (v->have_last >> key & 1) != 0;
	const struct cp_value *prev = &v->last[key];
	struct candidates cs;
	gather(v, key, n, &cs);
	if (cs.n > 0) {
		unsigned i = choose(&cs, mono);
		*out = cs.c[i].val;
		*by = cs.c[i].slot;
		/* It comes before the entry before it (its leader went by a
		 * value of n - 1 diehard then overruled, or one a damaged page
		 * led): a monotonic clock's value is raised. Whoever took it
		 * took it against what consume looks at (so no honest replica:
		 * the log's n - 1 was there to see). */
		if (mono && have_prev && less(out, prev))
			*out = *prev;
		publish(v, dh, key, n, out);
		return 0;
	}
	/* Nobody published n: a proposal standing there stalled whoever
	 * asked (counted against its slot). */
	for (unsigned j = 0; j < v->nslots; j++)
		if (v->pages[j] != NULL &&
		    atomic_load_explicit(&v->pages[j]->ring[key][n % CP_RING].tag, memory_order_relaxed) ==
			    (PENDING | (n + 1)) &&
		    v->stale[j] < UINT32_MAX)
			v->stale[j]++;
	if (real(key, out, arg) != 0) {
		atomic_store_explicit(&dh->ring[key][n % CP_RING].tag, 0, memory_order_seq_cst);
		return -1;
	}
	if (mono && have_prev && less(out, prev))
		*out = *prev;
	/* A monotonic clock's new value must not pass a later entry led
	 * already: an n + 1 whose leader went by a value of n about to be
	 * overruled here (consume's look at diehard's page comes after its
	 * store, so this finds it, or it finds our mark), or any entry led
	 * after n's value was lost (its leader damaged its page; a slot that
	 * took a later one holds n too, backfill, and gather found that: this
	 * is a second line, looked at once a run, earliest_after). */
	if (mono && earliest_after(v, key, n, later) && less(&later->min, out))
		*out = later->min;
	/* Never below the last logged, though: an n + 1 before it is out of
	 * order itself, and no reader takes it (consume). */
	if (mono && have_prev && less(out, prev))
		*out = *prev;
	publish(v, dh, key, n, out);
	return 0;
}

/* Diehard: puts entry n (value x, led by by) in the log, the last one. */
static void put_last(struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *x, unsigned by,
		     cp_put_fn *put, void *arg)
{
	v->last[key] = *x;
	v->have_last |= 1ull << key;
	put(key, n, x, by, arg);
}

uint64_t cp_harvest(struct cp_view *v, unsigned key, uint64_t limit, cp_put_fn *put, void *arg)
{
	_Atomic uint64_t *h = &v->pages[v->nslots]->harvested[key];
	uint64_t from = atomic_load_explicit(h, memory_order_relaxed), n = from;
	if (limit > from + CP_RING)
		limit = from + CP_RING;
	for (; n < limit; n++) {
		struct cp_value x;
		unsigned by = v->nslots;
		if (dh_state(v, key, n, &x) != 1) {
			/* One value led (copies aside: a copy is of an entry
			 * led); two led (a slot led without a proposal the other
			 * could see) are for a settle, which looks at what the
			 * replicas took, after its mark. */
			unsigned first = atomic_load_explicit(&v->last_by[key], memory_order_relaxed), led = 0;
			for (unsigned i = 0; i <= v->nslots && led < 2; i++) {
				unsigned j = i == 0 ? first : i - 1;
				struct cp_value y;
				if ((i > 0 && j == first) || j >= v->nslots ||
				    entry_in(v, v->pages[j], key, n, led == 0 ? &x : &y, NULL) != 1)
					continue;
				if (led == 0) {
					by = j;
					led = 1;
				} else if (!same(&x, &y)) {
					led = 2;
				}
			}
			/* Before the entry before it, for a monotonic clock: for
			 * a settle too (it raises what nobody took). */
			if (led != 1 || (cp_monotonic(key) && (v->have_last >> key & 1) && less(&x, &v->last[key])))
				break;
			atomic_store_explicit(&v->last_by[key], by, memory_order_relaxed);
			v->stale[by] = 0; /* it publishes what it proposes */
		}
		put_last(v, key, n, &x, by, put, arg);
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
	struct later later = { .looked = false };
	for (uint64_t m = atomic_load_explicit(h, memory_order_relaxed); m <= n; m++) {
		struct cp_value x;
		unsigned by;
		if (settle_one(v, key, m, real, arg, &x, &by, &later) != 0)
			return -1;
		put_last(v, key, m, &x, by, put, arg);
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
