/* test_clockpage.c — the shared clock log's protocol (allocator/clockpage.h)
 * under ASan and UBSan: k replicas of several threads each reading clocks
 * through it at once, diehard settling what falls back; every replica's
 * n-th read of a key must be the same value, and each thread's monotonic
 * clocks must go forward. Then the same with one replica damaging the one
 * page it can write, its own (random words, the whole page zeroed or set
 * to 0xff over and over, proposals of entries it never publishes): the
 * others must neither hang nor disagree among themselves, and diehard
 * counts the stalls against that slot. And, step by step, a leader held up
 * inside its read while diehard takes its entry over and its own slot
 * reads a ring on (the race behind a rare CI failure: its late publish
 * overwrote the later entry).
 */
#include "clockpage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"

#define K 3
#define THREADS 3
#define READS 20000
#define MAXN (K * THREADS * READS)

static struct cp_page *pages[K + 1];
static struct cp_view views[K + 1];
static int real(unsigned key, struct cp_value *out, void *arg);
static pthread_mutex_t dh_lock = PTHREAD_MUTEX_INITIALIZER;
/* Diehard's log: entry n of each key, as harvested or settled. */
static struct cp_value (*logged)[MAXN];
static uint64_t logged_n[CP_KEYS];
static int out_of_order;

static void put(unsigned key, uint64_t n, const struct cp_value *value, unsigned by, void *arg)
{
	(void)by;
	(void)arg;
	if (n != logged_n[key])
		out_of_order++;
	if (n < MAXN)
		logged[key][n] = *value;
	logged_n[key] = n + 1;
}

/* Diehard answering replica r's read that fell back: from its log, after
 * settling; it marks the read done with the value's term (as fastclock.c). */
static void answer(unsigned r, unsigned key, uint64_t n, struct cp_value *val)
{
	pthread_mutex_lock(&dh_lock);
	/* A read index far past the log is a damaged count (fastclock.c's
	 * FAR_AHEAD): not settled, answered with a real value of its own. */
	if (n >= MAXN || n > logged_n[key] + 4 * CP_RING + 65536) {
		pthread_mutex_unlock(&dh_lock);
		(void)real(key, val, NULL);
		return;
	}
	if (n >= logged_n[key] && cp_settle(&views[K], key, n, real, put, NULL) != 0)
		abort();
	*val = logged[key][n];
	atomic_store(&pages[r]->done[key][n % CP_DONE], cp_mark(n, cp_sum_term(&views[K], key, n, val)));
	pthread_mutex_unlock(&dh_lock);
}
static _Atomic unsigned long fallbacks, led, followed;

/* seen[r][key][n]: what replica r's n-th read of key returned (a + 1, so 0 = none). */
static int64_t (*seen)[CP_KEYS][MAXN];
static int64_t (*seen_b)[CP_KEYS][MAXN];

static int real(unsigned key, struct cp_value *out, void *arg)
{
	(void)arg;
	struct timespec ts;
	clockid_t id = key < 12 ? (clockid_t)key : CLOCK_REALTIME;
	if (clock_gettime(id, &ts) != 0)
		return -1;
	out->a = ts.tv_sec;
	out->b = key == CP_KEY_GETTIMEOFDAY ? ts.tv_nsec / 1000 : key == CP_KEY_TIME ? 0 : ts.tv_nsec;
	out->c = out->d = 0;
	return 0;
}

/* A clock that reads tick, tick + 1, ... seconds (a step test's). */
static int64_t tick;
static int tick_real(unsigned key, struct cp_value *out, void *arg)
{
	(void)key;
	(void)arg;
	*out = (struct cp_value){ .a = tick++ };
	return 0;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const unsigned keys[] = { 0, 1, 4, 6, 7, CP_KEY_GETTIMEOFDAY, CP_KEY_TIME };
#define NKEYS (sizeof keys / sizeof keys[0])

/* How a bad replica damages its own page. */
enum damage {
	DAMAGE_NONE,
	DAMAGE_WORDS,    /* random words at random places */
	DAMAGE_ZEROS,    /* the whole page zeroed, again and again */
	DAMAGE_ONES,     /* the whole page set to 0xff, again and again */
	DAMAGE_PROPOSE,  /* proposals of the entries ahead, never published */
};

struct worker {
	unsigned r;
	uint64_t seed;
	enum damage damage; /* a bad replica's */
	int backwards;
};

/* The bytes of page p from offset `from` for len set to c (atomically per
 * word: the others read them as they change). */
static void fill_words(struct cp_page *p, size_t from, size_t len, uint64_t c)
{
	_Atomic uint64_t *w = (_Atomic uint64_t *)((char *)p + from);
	for (size_t i = 0; i < len / 8; i++)
		atomic_store_explicit(&w[i], c, memory_order_relaxed);
}

static void damage_page(struct worker *w, int i)
{
	struct cp_page *p = pages[w->r];
	size_t rings = offsetof(struct cp_page, ring), len = sizeof(struct cp_page) - rings;
	switch (w->damage) {
	case DAMAGE_NONE:
		break;
	case DAMAGE_WORDS:
		if (rnd(&w->seed) % 64 == 0)
			atomic_store((_Atomic uint64_t *)p + rnd(&w->seed) % (sizeof(struct cp_page) / 8), rnd(&w->seed));
		break;
	case DAMAGE_ZEROS:
	case DAMAGE_ONES:
		if (i % 8 != 0)
			break;
		/* The counts and a slice of the rest each time (the whole of it
		 * every 64 reads: a page is megabytes). */
		fill_words(p, offsetof(struct cp_page, count), sizeof p->count, w->damage == DAMAGE_ZEROS ? 0 : ~0ull);
		fill_words(p, rings + (size_t)(i % 64) * (len / 64 & ~(size_t)7), len / 64 & ~(size_t)7,
			   w->damage == DAMAGE_ZEROS ? 0 : ~0ull);
		break;
	case DAMAGE_PROPOSE:
		/* Every key's next entries proposed, as a leader would just
		 * before its real read, and never published. */
		for (unsigned k = 0; k < NKEYS; k++) {
			uint64_t at = atomic_load(&pages[K]->harvested[keys[k]]);
			for (uint64_t n = at; n < at + 64; n++)
				atomic_store(&p->ring[keys[k]][n % CP_RING].tag, (1ull << 63) | (n + 1));
		}
		break;
	}
}

static void *reader(void *arg)
{
	struct worker *w = arg;
	struct cp_view *v = &views[w->r];
	struct cp_value last[CP_KEYS];
	memset(last, 0, sizeof last);
	for (int i = 0; i < READS; i++) {
		unsigned key = keys[rnd(&w->seed) % NKEYS];
		struct cp_value val;
		uint64_t n;
		enum cp_outcome o = cp_read(v, key, real, NULL, &val, &n);
		if (o == CP_FALLBACK) {
			answer(w->r, key, n, &val);
			fallbacks++;
		} else if (o == CP_LED) {
			led++;
		} else {
			followed++;
		}
		if (n < MAXN) {
			seen[w->r][key][n] = val.a + 1;
			seen_b[w->r][key][n] = val.b;
		}
		if (cp_monotonic(key) && (val.a < last[key].a || (val.a == last[key].a && val.b < last[key].b)))
			w->backwards++;
		last[key] = val;
		damage_page(w, i);
	}
	return NULL;
}

/* Diehard's harvest, as a thread: marks entries settled below the lowest
 * count of the replicas, so ring positions get reused. */
static _Atomic bool harvesting;
static void *harvester(void *arg)
{
	(void)arg;
	while (atomic_load(&harvesting)) {
		for (unsigned k = 0; k < NKEYS; k++) {
			pthread_mutex_lock(&dh_lock);
			(void)cp_harvest(&views[K], keys[k], UINT64_MAX, put, NULL);
			pthread_mutex_unlock(&dh_lock);
		}
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static bool crowd; /* views' crowded: replicas yield now and then as they catch up */
static unsigned sums_compared, sums_differ; /* run()'s end-of-run check */

static void setup(void)
{
	for (unsigned i = 0; i <= K; i++) {
		pages[i] = calloc(1, sizeof *pages[i]);
		cp_page_init(pages[i], i, K);
	}
	atomic_store(&pages[K]->used, (1ull << K) - 1);
	for (unsigned i = 0; i <= K; i++) {
		views[i] = (struct cp_view){ .nslots = K, .self = i, .secret = 0x1234567, .crowded = crowd && i < K };
		for (unsigned j = 0; j <= K; j++)
			views[i].pages[j] = pages[j];
	}
	memset(seen, 0, sizeof(*seen) * K);
	memset(logged_n, 0, sizeof logged_n);
	out_of_order = 0;
	memset(seen_b, 0, sizeof(*seen_b) * K);
}

static void teardown(void)
{
	for (unsigned i = 0; i <= K; i++)
		free(pages[i]);
}

/* Runs K replicas of THREADS readers; bad: which replica damages its page
 * (-1: none), and how. Returns the entries on which the good replicas
 * disagree. */
static uint32_t stale_of_bad; /* diehard's count of stalls by the bad slot */
static long run(int bad, enum damage damage, int *backwards)
{
	setup();
	pthread_t t[K][THREADS], h;
	struct worker w[K][THREADS];
	atomic_store(&harvesting, true);
	pthread_create(&h, NULL, harvester, NULL);
	for (unsigned r = 0; r < K; r++)
		for (unsigned i = 0; i < THREADS; i++) {
			/* Thread i of every replica reads the same keys in the
			 * same order, as a program's replicas do. */
			w[r][i] = (struct worker){ .r = r, .seed = 0x9e3779b97f4a7c15ULL * (i + 1),
						   .damage = (int)r == bad ? damage : DAMAGE_NONE };
			pthread_create(&t[r][i], NULL, reader, &w[r][i]);
		}
	*backwards = 0;
	for (unsigned r = 0; r < K; r++)
		for (unsigned i = 0; i < THREADS; i++) {
			pthread_join(t[r][i], NULL);
			if ((int)r != bad)
				*backwards += w[r][i].backwards;
		}
	atomic_store(&harvesting, false);
	pthread_join(h, NULL);
	stale_of_bad = bad >= 0 ? views[K].stale[bad] : 0;
	/* The end-of-run check: good replicas with a key's same count have the
	 * same sum of their marks' terms (cp_floor, then cp_sum_rest). */
	sums_compared = sums_differ = 0;
	for (unsigned k = 0; k < NKEYS; k++) {
		uint64_t sum[K], count[K];
		bool sure[K];
		for (unsigned r = 0; r < K; r++) {
			bool unsure = false;
			sum[r] = 0;
			count[r] = atomic_load(&pages[r]->count[keys[k]]);
			uint64_t f = cp_floor(pages[r], keys[k], 0, count[r], &sum[r], &unsure);
			sum[r] += cp_sum_rest(pages[r], keys[k], f, count[r], &unsure);
			sure[r] = !unsure;
		}
		int first = -1;
		for (unsigned r = 0; r < K; r++) {
			if ((int)r == bad || !sure[r])
				continue;
			if (first < 0) {
				first = (int)r;
			} else if (count[r] == count[first]) {
				sums_compared++;
				sums_differ += sum[r] != sum[first];
			}
		}
	}
	long disagree = 0;
	for (unsigned k = 0; k < NKEYS; k++)
		for (size_t n = 0; n < MAXN; n++) {
			int64_t a = 0, b = 0;
			for (unsigned r = 0; r < K; r++) {
				if ((int)r == bad || seen[r][keys[k]][n] == 0)
					continue;
				if (a == 0) {
					a = seen[r][keys[k]][n];
					b = seen_b[r][keys[k]][n];
				} else if (seen[r][keys[k]][n] != a || seen_b[r][keys[k]][n] != b) {
					disagree++;
				}
			}
		}
	teardown();
	return disagree;
}

/* A leader held up inside its real read (between its claim and its
 * publish) until released. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_state; /* 1: held in its read, 2: released */

static int held_real(unsigned key, struct cp_value *out, void *arg)
{
	pthread_mutex_lock(&hold_lock);
	hold_state = 1;
	pthread_cond_broadcast(&hold_cond);
	while (hold_state != 2)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	return real(key, out, arg);
}

struct held_read {
	struct cp_value v;
	uint64_t n;
	enum cp_outcome o;
};

static void *held_reader(void *arg)
{
	struct held_read *h = arg;
	h->o = cp_read(&views[0], 1, held_real, NULL, &h->v, &h->n);
	if (h->o == CP_FALLBACK)
		answer(0, 1, h->n, &h->v);
	return NULL;
}

/* Slot 0's thread A claims entry 0 and is held up in its real read; diehard
 * takes entry 0 over; slot 0's thread B reads on to entry RING (the same
 * ring position); then A is let go and publishes late. Every value either
 * thread took must be diehard's log's (before the marks, B led RING there,
 * A's late publish overwrote it, and diehard, not finding it, logged a
 * second value). Returns the reads that differ from the log. */
static int stale_leader(void)
{
	setup();
	hold_state = 0;
	pthread_t a;
	struct held_read ha;
	pthread_create(&a, NULL, held_reader, &ha);
	pthread_mutex_lock(&hold_lock);
	while (hold_state != 1)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	pthread_mutex_lock(&dh_lock);
	(void)cp_settle(&views[K], 1, 0, real, put, NULL);
	pthread_mutex_unlock(&dh_lock);
	static struct cp_value b[CP_RING + 1];
	for (uint64_t i = 1; i <= CP_RING; i++) {
		uint64_t n;
		if (cp_read(&views[0], 1, real, NULL, &b[i], &n) == CP_FALLBACK)
			answer(0, 1, n, &b[i]);
		if (n != i)
			return -1;
	}
	pthread_mutex_lock(&hold_lock);
	hold_state = 2;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
	pthread_join(a, NULL);
	pthread_mutex_lock(&dh_lock);
	(void)cp_settle(&views[K], 1, CP_RING, real, put, NULL);
	pthread_mutex_unlock(&dh_lock);
	int differ = ha.n != 0 || ha.v.a != logged[1][0].a || ha.v.b != logged[1][0].b;
	for (uint64_t i = 1; i <= CP_RING; i++)
		differ += b[i].a != logged[1][i].a || b[i].b != logged[1][i].b;
	teardown();
	return differ;
}

/* A clock at a set time (ns since 0), for the server rules. */
static int64_t set_ns;
static int set_real(unsigned key, struct cp_value *out, void *arg)
{
	(void)arg;
	key = cp_key_base(key);
	*out = (struct cp_value){ .a = set_ns / 1000000000, .b = set_ns % 1000000000 };
	if (key == CP_KEY_GETTIMEOFDAY)
		out->b /= 1000;
	if (key == CP_KEY_TIME)
		out->b = 0;
	return 0;
}

/* A server (clockpage.h's serve): its base wall keys go elsewhere (a lane,
 * or diehard); a lane's key is read as any key, replica by replica; a
 * follower does not take a value whose second turned or that is more than
 * CP_STALE_NS old against its own clock, of a lane's or a monotonic key,
 * but does before it serves; a lane given after its thread's first reads
 * starts from diehard's seeded entry. Returns the checks that failed. */
static int server_rules(void)
{
	int bad = 0;
	setup();
	struct cp_value v, w;
	uint64_t n, m;
	unsigned lane = cp_lane_key(2, 2); /* lane 2's gettimeofday */
	set_ns = 5000000000LL + 100000000;
	bad += cp_read(&views[0], CP_KEY_GETTIMEOFDAY, set_real, NULL, &v, &n) != CP_LED; /* not yet a server */
	atomic_store(&pages[K]->serve, (1ull << K) - 1);
	bad += cp_read(&views[0], CP_KEY_GETTIMEOFDAY, set_real, NULL, &v, &n) != CP_OFF;
	bad += cp_read(&views[1], 0, set_real, NULL, &v, &n) != CP_OFF;
	bad += cp_key_base(lane) != CP_KEY_GETTIMEOFDAY || cp_lane_of(lane) != 2 || cp_wall_of(lane) != -1 ||
	       cp_monotonic(lane) || !cp_served(lane) || cp_wall_of(CP_KEY_TIME) != 3;
	/* Led at 5.1 s; followed 1 ms later: fresh. */
	bad += cp_read(&views[0], lane, set_real, NULL, &v, &n) != CP_LED || n != 0 || v.a != 5 || v.b != 100000;
	set_ns += 1000000;
	bad += cp_read(&views[1], lane, set_real, NULL, &w, &m) != CP_FOLLOWED || m != 0 || w.a != 5 || w.b != 100000;
	/* Led again; followed 11 ms later: stale, asks diehard for it. */
	bad += cp_read(&views[0], lane, set_real, NULL, &v, &n) != CP_LED || n != 1;
	set_ns += 11000000;
	bad += cp_read(&views[1], lane, set_real, NULL, &w, &m) != CP_FALLBACK || m != 1;
	/* A monotonic key: 2 ms old is fresh, but not once its second turned. */
	set_ns = 7999000000LL;
	bad += cp_read(&views[0], 1, set_real, NULL, &v, &n) != CP_LED;
	set_ns += 2000000;
	bad += cp_read(&views[2], 1, set_real, NULL, &w, &m) != CP_FALLBACK || m != n;
	/* A key the log holds entries 0..9 of: seeded, a read at 10 leads
	 * with no wait for entry 9. */
	unsigned seeded = cp_lane_key(5, 0);
	struct cp_value nine = { .a = 8, .b = 5 };
	cp_seed(&views[K], seeded, 9, &nine);
	atomic_store(&pages[K]->harvested[seeded], 10);
	atomic_store(&pages[0]->count[seeded], 10);
	set_ns = 8000000100LL;
	bad += cp_read(&views[0], seeded, set_real, NULL, &v, &n) != CP_LED || n != 10 || v.a != 8 || v.b != 100;
	teardown();
	return bad;
}

int main(void)
{
	seen = calloc(K, sizeof *seen);
	seen_b = calloc(K, sizeof *seen_b);
	logged = calloc(CP_KEYS, sizeof *logged);
	if (seen == NULL || seen_b == NULL || logged == NULL)
		return 1;
	CHECK(cp_served(0) && cp_served(1) && !cp_served(2) && !cp_served(3) && !cp_served(10) &&
		      cp_served(CP_KEY_TIME) && !cp_served(CP_KEYS),
	      "served keys: system clocks, gettimeofday, time; not CPU-time clocks");

	/* AT_RANDOM's bytes: SipHash-2-4 of 2n and 2n + 1, so image n =
	 * 0x0706050403020100 / 2 under the reference key 00..0f gives the
	 * reference vector for the 8-byte message 00..07 first. */
	{
		const uint64_t key[2] = { 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull };
		static const uint8_t want[8] = { 0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93 };
		uint8_t a[16], b[16], c[16];
		cp_at_random(key, 0x0706050403020100ull / 2, a);
		cp_at_random(key, 0, b);
		cp_at_random(key, 1, c);
		CHECK(memcmp(a, want, sizeof want) == 0, "AT_RANDOM's bytes: SipHash-2-4's reference vector");
		CHECK(memcmp(b, c, 16) != 0 && memcmp(b, b + 8, 8) != 0, "AT_RANDOM's bytes: each image's differ");
	}

	int failed = server_rules();
	CHECK(failed == 0, "a server's reads: base wall keys elsewhere, lanes read as keys, stale values asked for, "
			   "a seeded lane leads on (%d checks failed)", failed);

	int backwards;
	long d = run(-1, DAMAGE_NONE, &backwards);
	CHECK(d == 0, "%u replicas x %u threads x %u reads: every n-th read of a key the same everywhere (%ld differ)",
	      K, THREADS, READS, d);
	CHECK(backwards == 0, "monotonic clocks go forward in every thread (%d went back)", backwards);
	CHECK(out_of_order == 0, "diehard's log got every entry once, in order");
	CHECK(led > 0 && followed > 0, "reads led and followed (%lu led, %lu followed, %lu settled by diehard)",
	      (unsigned long)led, (unsigned long)followed, (unsigned long)fallbacks);
	CHECK(sums_compared > 0 && sums_differ == 0,
	      "the replicas' sums of their completion marks' terms agree at equal counts (%u compared, %u differ)",
	      sums_compared, sums_differ);

	led = followed = fallbacks = 0;
	crowd = true;
	d = run(-1, DAMAGE_NONE, &backwards);
	crowd = false;
	uint64_t yields = 0;
	for (unsigned r = 0; r < K; r++)
		yields += atomic_load(&views[r].yields);
	CHECK(d == 0 && backwards == 0 && out_of_order == 0 && sums_differ == 0,
	      "crowded replicas (more than CPUs: they yield as they catch up): the same agreement (%ld differ, %d went "
	      "back, %u sums differ)",
	      d, backwards, sums_differ);
	CHECK(yields > 0, "and they did yield (%lu times)", (unsigned long)yields);

	static const struct {
		enum damage how;
		const char *what;
	} damages[] = {
		{ DAMAGE_WORDS, "random words into its page" },
		{ DAMAGE_ZEROS, "its page zeroed over and over" },
		{ DAMAGE_ONES, "its page set to 0xff over and over" },
		{ DAMAGE_PROPOSE, "proposals of every next entry, never published" },
	};
	for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
		led = followed = fallbacks = 0;
		d = run(1, damages[i].how, &backwards);
		CHECK(d == 0 && backwards == 0,
		      "one replica damaging its own page (%s): the others still agree (%ld differ) and their "
		      "monotonic clocks go forward (%d went back)",
		      damages[i].what, d, backwards);
		CHECK(sums_compared > 0 && sums_differ == 0, "and the good replicas' sums agree (%u compared, %u differ)",
		      sums_compared, sums_differ);
		if (damages[i].how == DAMAGE_PROPOSE)
			CHECK(fallbacks > 0 && stale_of_bad > 0,
			      "its stalls sent reads to diehard (%lu), which counted them against its slot (%u)",
			      (unsigned long)fallbacks, stale_of_bad);
	}

	/* Pace: no slot leads an entry a ring past a pacing slot's count; it
	 * waits, then falls back (nothing else moves here), and leads once
	 * the pacing slot has moved on. Entries 0 .. RING - 1 settled by
	 * diehard first. */
	setup();
	(void)cp_settle(&views[K], 1, CP_RING - 1, real, put, NULL);
	atomic_store(&pages[K]->pace, 1ull << 1);
	atomic_store(&pages[0]->count[1], CP_RING);
	{
		struct cp_value pv;
		uint64_t pn;
		enum cp_outcome o = cp_read(&views[0], 1, real, NULL, &pv, &pn);
		CHECK(o == CP_FALLBACK && pn == CP_RING,
		      "a slot a ring ahead of a pacing slot's count falls back instead of leading (%d, %lu)", (int)o,
		      (unsigned long)pn);
		atomic_store(&pages[0]->count[1], CP_RING);
		atomic_store(&pages[1]->count[1], 1);
		o = cp_read(&views[0], 1, real, NULL, &pv, &pn);
		CHECK(o == CP_LED && pn == CP_RING, "and leads it once the pacing slot has moved on (%d, %lu)", (int)o,
		      (unsigned long)pn);
	}
	teardown();

	/* Harvest pace: a quarter ring's time at the rate the log just grew;
	 * quiet, twice the last; always within [MIN, MAX]. */
	CHECK(cp_harvest_pace(CP_HARVEST_MIN_US, CP_RING / 4, 1000) == 1000 &&
		      cp_harvest_pace(CP_HARVEST_MIN_US, CP_RING, 1000) == 250,
	      "harvest pace: a quarter ring's time at the log's last rate (1000, 250 us)");
	CHECK(cp_harvest_pace(CP_HARVEST_MIN_US, 1000000, 1000) == CP_HARVEST_MIN_US &&
		      cp_harvest_pace(CP_HARVEST_MIN_US, 1, 50000) == CP_HARVEST_MAX_US &&
		      cp_harvest_pace(CP_HARVEST_MIN_US, 1, UINT64_MAX) == CP_HARVEST_MAX_US &&
		      cp_harvest_pace(CP_HARVEST_MIN_US, UINT64_MAX, 1) == CP_HARVEST_MIN_US,
	      "harvest pace: a flood waits the least, a trickle (or any extreme) the most");
	{
		uint64_t us = CP_HARVEST_MIN_US, steps = 0;
		while (us < CP_HARVEST_MAX_US && steps < 64) {
			uint64_t next = cp_harvest_pace(us, 0, us);
			if (next != 2 * us && next != CP_HARVEST_MAX_US)
				break;
			us = next;
			steps++;
		}
		CHECK(us == CP_HARVEST_MAX_US && steps <= 10 && cp_harvest_pace(us, 0, us) == CP_HARVEST_MAX_US,
		      "harvest pace: quiet, it doubles up to the most (%lu steps) and stays there",
		      (unsigned long)steps);
	}

	int stale = stale_leader();
	CHECK(stale == 0 && out_of_order == 0,
	      "a leader held up while diehard takes its entry over and its slot reads a ring on: its late publish "
	      "changes no value (%d differ from diehard's log)", stale);

	/* A harvest stops at its limit, and after a ring whatever is
	 * published past it: one slot publishing ahead as fast as diehard
	 * walks cannot keep it in the loop. */
	setup();
	{
		unsigned fell_back = 0;
		for (unsigned i = 0; i < 10; i++) {
			struct cp_value val;
			uint64_t n;
			if (cp_read(&views[0], 1, real, NULL, &val, &n) == CP_FALLBACK) {
				answer(0, 1, n, &val);
				fell_back++;
			}
		}
		uint64_t at4 = cp_harvest(&views[K], 1, 4, put, NULL);
		uint64_t at10 = cp_harvest(&views[K], 1, UINT64_MAX, put, NULL);
		CHECK(fell_back == 0 && at4 == 4 && at10 == 10 && logged_n[1] == 10,
		      "a harvest stops at its limit (%lu), the next goes on (%lu)", (unsigned long)at4,
		      (unsigned long)at10);
		/* Entries a ring and more past the harvest, published as
		 * replicas that write their rings at will could (a ring in
		 * slot 0's, the rest in slot 1's): taken a ring at a time. */
		for (uint64_t n = 10; n < 10 + CP_RING + 5; n++) {
			struct cp_value val = { .a = (int64_t)(1ull << 40) + (int64_t)n };
			struct cp_entry *e = &pages[n < 10 + CP_RING ? 0 : 1]->ring[1][n % CP_RING];
			atomic_store(&e->a, val.a);
			atomic_store(&e->b, 0);
			atomic_store(&e->c, 0);
			atomic_store(&e->d, 0);
			atomic_store(&e->check, cp_sum_term(&views[0], 1, n, &val));
			atomic_store(&e->tag, n + 1);
		}
		uint64_t ring = cp_harvest(&views[K], 1, UINT64_MAX, put, NULL);
		uint64_t rest = cp_harvest(&views[K], 1, UINT64_MAX, put, NULL);
		CHECK(ring == 10 + CP_RING && rest == 10 + CP_RING + 5 && out_of_order == 0,
		      "entries published a ring and more ahead: a ring a harvest (%lu), then the rest (%lu)",
		      (unsigned long)ring, (unsigned long)rest);
	}
	teardown();

	/* Completion marks: the slot's first read not done is where diehard's
	 * log must keep entries from; a read held up while its siblings read
	 * on holds it there; a later read's mark at its position is not
	 * overwritten by the late one (the floor stays: the log keeps more);
	 * forgetting the page clears the marks for its next process. The
	 * marks' terms add up to the slot's sum as the floor passes them, and
	 * the rest at the end; a sum that may miss a term says so. */
	setup();
	{
		/* Terms whose marks add x (T), and what they add (W). */
#define T(x) ((uint64_t)(x) << 34)
#define W(x) (4 * (uint64_t)(x) + 1)
		uint64_t sum = 0, all = 0;
		for (uint64_t i = 0; i < 10; i++)
			all += W(100 + i);
		bool unsure = false;
		for (uint64_t i = 0; i < 10; i++)
			if (i != 3)
				cp_done(pages[0], 1, i, T(100 + i));
		atomic_store(&pages[0]->count[1], 10);
		uint64_t f = cp_floor(pages[0], 1, 0, 10, &sum, &unsure);
		CHECK(f == 3 && sum == W(100) + W(101) + W(102) && !unsure,
		      "reads 0-9 done but 3: the floor is 3 (%lu), the sum its marks' (%lu)", (unsigned long)f,
		      (unsigned long)sum);
		uint64_t rest = cp_sum_rest(pages[0], 1, f, 10, &unsure);
		CHECK(rest == all - W(100) - W(101) - W(102) - W(103) && unsure,
		      "the rest, skipping the read not done, which makes the sum unsure (%lu)", (unsigned long)rest);
		unsure = false;
		uint64_t s2 = 0;
		CHECK(cp_floor(pages[0], 1, 0, 2, &s2, &unsure) == 2 && s2 == W(100) + W(101), "never past the count");
		cp_done(pages[0], 1, 3, T(103));
		f = cp_floor(pages[0], 1, f, 10, &sum, &unsure);
		CHECK(f == 10 && sum == all && !unsure,
		      "read 3 done: the floor moves on to the count (%lu), every term in (%lu)", (unsigned long)f,
		      (unsigned long)sum);
		atomic_store(&pages[0]->count[1], 11 + CP_DONE);
		cp_done(pages[0], 1, 10 + CP_DONE, T(7));
		cp_done(pages[0], 1, 10, T(110));
		CHECK(cp_floor(pages[0], 1, 10, 11 + CP_DONE, &sum, &unsure) == 10,
		      "a late mark under a later read's at the same position: the floor stays");
		rest = cp_sum_rest(pages[0], 1, 10, 11 + CP_DONE, &unsure);
		CHECK(unsure, "a count a CP_DONE past the floor: the sum may miss terms, and says so");
		unsure = false;
		cp_done(pages[0], 1, 11, T(111));
		s2 = 0;
		(void)cp_floor(pages[0], 1, 11, 12, &s2, &unsure);
		CHECK(s2 == W(111) && !unsure, "read 11 + CP_DONE not taken yet: mark 11's term is its own");
		atomic_store(&pages[0]->count[1], 12 + CP_DONE);
		s2 = 0;
		(void)cp_floor(pages[0], 1, 11, 12, &s2, &unsure);
		CHECK(unsure, "a mark passed once the count is a CP_DONE past it: its term may be a later read's (unsure)");
		unsure = false;
		cp_done(pages[0], 2, 0, T(5));
		s2 = 0;
		CHECK(cp_floor(pages[0], 2, 0, 1, &s2, &unsure) == 1 && s2 == W(5) && !unsure, "keys apart");
		/* Marks keep n + 1 modulo 2^32: the read whose n + 1 is 2^32
		 * is marked all the same, and a later one wins over it there. */
		uint64_t big = (1ull << 32) - 1;
		atomic_store(&pages[0]->count[4], big + 1);
		cp_done(pages[0], 4, big, T(3));
		s2 = 0;
		CHECK(cp_floor(pages[0], 4, big, big + 1, &s2, &unsure) == big + 1 && s2 == W(3) && !unsure,
		      "read 2^32 - 1 marked done");
		cp_done(pages[0], 4, big + CP_DONE, T(4));
		cp_done(pages[0], 4, big, T(3));
		CHECK(atomic_load(&pages[0]->done[4][big % CP_DONE]) == cp_mark(big + CP_DONE, T(4)),
		      "across 2^32, a later read's mark stays");
		atomic_store(&pages[0]->done[4][5], 0xdeadbeef0000303full); /* 12345 "ahead" */
		cp_done(pages[0], 4, 5, T(6));
		CHECK(atomic_load(&pages[0]->done[4][5]) == cp_mark(5, T(6)),
		      "garbage at a mark's position (a replaced process's) is written over");
		atomic_store(&pages[0]->count[4], 0);
		atomic_store(&pages[0]->count[2], 1);
		cp_page_forget(pages[0]);
		atomic_store(&pages[0]->count[1], 0);
		atomic_store(&pages[0]->count[2], 0);
		cp_done(pages[0], 1, 0, T(9));
		s2 = 0;
		CHECK(cp_floor(pages[0], 1, 0, 1, &s2, &unsure) == 1 && s2 == W(9) &&
			      atomic_load(&pages[0]->done[2][0]) == 0 && atomic_load(&pages[0]->done[1][1]) == 0,
		      "forgotten: the next process's read 0 is marked again");
		/* A value taken and not yet confirmed (consume's mark, before its
		 * look at diehard's page, which may still send the read to
		 * diehard): not done, so the floor stays at it and diehard's log
		 * keeps the entry; its term is not in the sum. */
		uint64_t half = (cp_mark_term(T(12)) & ~(uint64_t)3) | CP_MARK_TAKEN;
		atomic_store(&pages[0]->done[1][1], half << 32 | 2);
		atomic_store(&pages[0]->count[1], 2);
		s2 = 0;
		unsure = false;
		CHECK(cp_floor(pages[0], 1, 1, 2, &s2, &unsure) == 1 && s2 == 0 && !unsure,
		      "a value taken, not yet confirmed: the floor stays at its read");
		CHECK(cp_sum_rest(pages[0], 1, 1, 2, &unsure) == 0 && unsure,
		      "nor is its term in the rest of the sum, which says so");
		cp_done(pages[0], 1, 1, T(12));
		s2 = 0;
		unsure = false;
		CHECK(cp_floor(pages[0], 1, 1, 2, &s2, &unsure) == 2 && s2 == W(12) && !unsure,
		      "confirmed (marked done over it): the floor passes it, its term in");
		atomic_store(&pages[0]->count[1], 0);
		cp_page_forget(pages[0]);
		/* cp_read marks what it settles, with its value's term. */
		struct cp_value cv;
		uint64_t cn;
		atomic_store(&pages[1]->count[1], 0);
		s2 = 0;
		CHECK(cp_read(&views[1], 1, real, NULL, &cv, &cn) == CP_LED && cn == 0 &&
			      cp_floor(pages[1], 1, 0, 1, &s2, &unsure) == 1 && s2 == cp_mark_term(cp_sum_term(&views[1], 1, 0, &cv)),
		      "a read led in the replica is marked done, with its value's term");
#undef T
#undef W
	}
	teardown();

	/* Two values of one entry in the pages (one slot led without a
	 * proposal the other saw): diehard settles the one a slot took, a
	 * mark of a value taken and not yet confirmed counting as a taker. */
	setup();
	{
		struct cp_value va = { .a = 10, .b = 1 }, vb = { .a = 20, .b = 2 }, got;
		const struct cp_value *vals[2] = { &va, &vb };
		for (unsigned j = 0; j < 2; j++) {
			struct cp_entry *e = &pages[j]->ring[0][0];
			atomic_store(&e->a, vals[j]->a);
			atomic_store(&e->b, vals[j]->b);
			atomic_store(&e->check, cp_sum_term(&views[K], 0, 0, vals[j]));
			atomic_store(&e->tag, 1);
			atomic_store(&pages[j]->count[0], 1);
		}
		uint64_t half = (cp_mark_term(cp_sum_term(&views[K], 0, 0, &vb)) & ~(uint64_t)3) | CP_MARK_TAKEN;
		atomic_store(&pages[2]->done[0][0], half << 32 | 1);
		atomic_store(&pages[2]->count[0], 1);
		CHECK(cp_settle(&views[K], 0, 0, real, put, NULL) == 0 && logged_n[0] == 1 && logged[0][0].a == 20,
		      "the value a slot took (not yet confirmed) is settled, not the lowest slot's (%ld)",
		      (long)logged[0][0].a);
		unsigned by;
		CHECK(cp_published(&views[2], 0, 0, &got, &by) == 1 && by == K && got.a == 20,
		      "and published in diehard's page");
	}
	teardown();

	/* A hole: slot 0 led entries 3, 4 and 5 and then zeroed its page;
	 * slot 1 had taken 5 (its threads ahead of the one reading 4), nobody
	 * 3 or 4. A value led for 3 or 4 now, later than 5's, would take a
	 * monotonic clock back for whoever reads 4 after 5 (the abuse_clock
	 * flake). Slot 1, taking 5, copied 3 and 4 first (backfill): slot 2
	 * reading 3 takes that copy, and diehard settles 3-5 as slot 1 holds
	 * them. */
	setup();
	{
		tick = 100;
		struct cp_value got;
		uint64_t gn;
		CHECK(cp_settle(&views[K], 1, 2, tick_real, put, NULL) == 0 && logged_n[1] == 3,
		      "hole: entries 0-2 settled by diehard");
		atomic_store(&pages[0]->count[1], 3);
		bool led3 = true;
		for (int i = 0; i < 3; i++)
			led3 = led3 && cp_read(&views[0], 1, tick_real, NULL, &got, &gn) == CP_LED && gn == 3u + (unsigned)i;
		atomic_store(&pages[1]->count[1], 5);
		CHECK(led3 && cp_read(&views[1], 1, tick_real, NULL, &got, &gn) == CP_FOLLOWED && gn == 5 && got.a == 105,
		      "hole: slot 0 led 3-5, slot 1 took 5 (%ld)", (long)got.a);
		CHECK(atomic_load(&pages[1]->copy[1][3].tag) == 4 && atomic_load(&pages[1]->copy[1][4].tag) == 5,
		      "hole: and copied 3 and 4 before it");
		fill_words(pages[0], offsetof(struct cp_page, ring), sizeof(struct cp_page) - offsetof(struct cp_page, ring), 0);
		tick = 200;
		/* Slot 1's own thread that held 3 all along (its claim is
		 * replayed by setting the count back): it takes its sibling's
		 * copy, it does not lead 3 again. */
		atomic_store(&pages[1]->count[1], 3);
		enum cp_outcome o = cp_read(&views[1], 1, tick_real, NULL, &got, &gn);
		CHECK(o == CP_FOLLOWED && gn == 3 && got.a == 103, "hole: slot 1's thread behind takes its own copy of 3 (%s %ld)",
		      o == CP_LED ? "led" : o == CP_FOLLOWED ? "followed" : "fell back", (long)got.a);
		atomic_store(&pages[2]->count[1], 3);
		o = cp_read(&views[2], 1, tick_real, NULL, &got, &gn);
		CHECK(o == CP_FOLLOWED && gn == 3 && got.a == 103, "hole: slot 2 takes slot 1's copy of entry 3 (%s %ld)",
		      o == CP_LED ? "led" : o == CP_FOLLOWED ? "followed" : "fell back", (long)got.a);
		CHECK(cp_settle(&views[K], 1, 5, tick_real, put, NULL) == 0 && logged_n[1] == 6 && logged[1][3].a == 103 &&
			      logged[1][4].a == 104 && logged[1][5].a == 105,
		      "hole: diehard settles 3-5 as slot 1 holds them (%ld %ld %ld)", (long)logged[1][3].a,
		      (long)logged[1][4].a, (long)logged[1][5].a);
	}
	teardown();

	/* The same hole without the copies (a slot that took 5 and holds
	 * nothing before it: diehard does not count on the replicas'
	 * backfill): diehard leads 3 and 4 no later than 5's value. */
	setup();
	{
		tick = 100;
		CHECK(cp_settle(&views[K], 1, 2, tick_real, put, NULL) == 0, "hole, no copies: entries 0-2 settled");
		struct cp_value v5 = { .a = 105 };
		struct cp_entry *e = &pages[1]->copy[1][5];
		atomic_store(&e->a, v5.a);
		atomic_store(&e->b, 0);
		atomic_store(&e->check, cp_sum_term(&views[K], 1, 5, &v5));
		atomic_store(&e->tag, 6);
		atomic_store(&pages[1]->count[1], 6);
		tick = 200;
		CHECK(cp_settle(&views[K], 1, 5, tick_real, put, NULL) == 0 && logged_n[1] == 6 && logged[1][5].a == 105 &&
			      logged[1][2].a <= logged[1][3].a && logged[1][3].a <= logged[1][4].a && logged[1][4].a <= 105,
		      "hole, no copies: diehard settles 3 and 4 no later than 5 (%ld %ld %ld %ld)", (long)logged[1][2].a,
		      (long)logged[1][3].a, (long)logged[1][4].a, (long)logged[1][5].a);
	}
	teardown();

	/* Off: every read the usual way, no index taken. */
	setup();
	atomic_store(&pages[K]->off, 1ull << 2);
	struct cp_value v;
	uint64_t n = 99;
	CHECK(cp_read(&views[2], 1, real, NULL, &v, &n) == CP_OFF && n == 99 && pages[2]->count[1] == 0,
	      "a slot diehard turned off reads the usual way");
	CHECK(cp_read(&views[0], 1, real, NULL, &v, &n) == CP_LED && n == 0, "the others do not");
	teardown();
	free(seen);
	free(seen_b);
	free(logged);
	return tap_done();
}
