/* fastclock.c — see fastclock.h.
 *
 * The region: a page per replica slot, then diehard's page (clockpage.h),
 * each a file of its own (clockfs.h). Diehard maps them all read-write,
 * side by side; a replica maps its own read-write and the others
 * read-only, and cannot map them otherwise.
 *
 * Threat model (docs/NONDETERMINISM.md, docs/SANDBOX.md): a replica with a
 * memory error, or a hostile one, may write anything into what it can
 * write: its own page. The protocol makes any such damage a fallback for
 * the readers (keyed checksums, bounded waits), never a crash, a hang or a
 * disagreement among the others, and diehard never trusts a page for more
 * than where its entries are, and no value read from a page makes its
 * loops run longer than the slots and the entries asked for (a read index
 * far past the log is not settled, fastclock_too_far): each harvested entry
 * must lie between the clock's value at the start of the run and its value
 * now (one second of slack for a wall clock stepped back), and a
 * gettimeofday entry must carry the kernel's timezone. An entry outside
 * its bounds marks its leader forged (fastclock_forged): the caller kills
 * it. A replica that forges a value inside the bounds (it knows the key: it
 * is in its environment) is not caught here, but only as any wrong value
 * is: the voter sees the outputs differ if it led alone. A read index too
 * far ahead of the log (a damaged count) is not settled: the slot is
 * turned to the notify path (fastclock_index says so). */
#include "fastclock.h"
#include "clockfs.h"
#include "vdso.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"

/* A read index further than this past the log is a damaged count: a sound
 * one is at most a ring ahead (entries a ring ahead are not claimed) plus
 * the slot's threads in flight. */
#define FAR_AHEAD (4 * (uint64_t)CP_RING + 65536)
/* A slot's threads in flight at once (each holds a read index). */
#define AHEAD_SLACK 65536

/* A wall clock's entry may be this far past diehard's now (it was stepped
 * back meanwhile) before it counts as forged. */
#define SLACK_NS 1000000000LL

/* A slot whose proposals diehard found standing unpublished this many
 * times in a row, with no entry of its harvested in between, stalls the
 * others on purpose or by damage: an honest proposal is published within
 * its real clock read (clockpage.h). */
#define STALLS 256

/* A slot a ring behind the log in a clock stops pacing only once its
 * count of that clock has stood still this long: an honest replica held up
 * (descheduled on a loaded machine, reading the log a round trip a read)
 * moves on and keeps pacing, so the others wait for it rather than leave
 * it behind for good; one that stopped reading that clock, or zeroed its
 * count, no longer holds every leader back past this. */
#define STILL_S 1.0

struct fastclock {
	struct clockfs fs; /* the pages' files */
	char *base;
	size_t len;
	struct cp_view view;
	uint64_t mark_real, mark_fallback, mark_lane;
	uint64_t images_key[2];         /* AT_RANDOM's (cp_at_random) */
	uint64_t mark_exec;             /* exec.c's */
	struct cp_value start[CP_KEYS]; /* each clock when the run began */
	uint64_t forged;                /* slots whose entries failed the bounds */
	unsigned forged_key[CP_MAX_SLOTS];
	uint64_t forged_n[CP_MAX_SLOTS]; /* the first such entry of each */
	uint64_t floor[CP_MAX_SLOTS][CP_KEYS]; /* each slot's first read not done (cp_floor) */
	uint64_t sum[CP_MAX_SLOTS][CP_KEYS];   /* the terms of its marks below the floor */
	uint64_t unsure[CP_MAX_SLOTS];         /* a bit per key: its sum is not to be compared */
	uint64_t paced_total;                  /* the log's length at the last harvest delay */
	double paced_at;                       /* and sup_now() then (0: none yet) */
	uint64_t delay_us;                     /* the delay it gave */
	uint64_t moved[CP_MAX_SLOTS][CP_KEYS]; /* its count when last seen to change */
	double moved_at[CP_MAX_SLOTS][CP_KEYS];/* and when (fastclock_pace's now; 0: not yet) */
	uint64_t joining;                      /* a bit per slot: a new process, not yet paced */
	uint64_t live;                         /* a bit per slot: its process lives (fastclock_pace) */
	uint64_t margin;                       /* how far a count may pass the others' (too_far) */
	uint32_t lanes;                        /* a bit per lane given (fastclock_lane_seed) */
	char env[512];
};

/* Whether diehard takes key's entries from the pages: a base key, or a
 * given lane's. A lane nobody was given is nobody's: what a page holds
 * there (a replica writing its own page) is not looked at, so it cannot
 * move the lane's front before its thread's entries are seeded. */
static bool live_key(const struct fastclock *F, unsigned k)
{
	int lane = cp_lane_of(k);
	return cp_served(k) && (lane < 0 || (F->lanes >> lane & 1));
}

/* The kernel's timezone as diehard's own gettimeofday saw it, and the one
 * before its last change: a leader takes it from a real gettimeofday once
 * a wall second (allocator/clockpath.h), so an entry made just before a
 * change (settimeofday) may carry the old one; that is sound for TZ_GRACE
 * seconds after diehard saw the change. One run, one kernel: file-wide. */
#define TZ_GRACE 3.0
static struct {
	int64_t c, d, prev_c, prev_d;
	bool known, changed;
	struct timespec at; /* CLOCK_MONOTONIC when the change was seen */
} tz_seen;

static void tz_note(int64_t c, int64_t d)
{
	if (tz_seen.known && c == tz_seen.c && d == tz_seen.d)
		return;
	if (tz_seen.known) {
		tz_seen.prev_c = tz_seen.c;
		tz_seen.prev_d = tz_seen.d;
		tz_seen.changed = clock_gettime(CLOCK_MONOTONIC, &tz_seen.at) == 0;
	}
	tz_seen.c = c;
	tz_seen.d = d;
	tz_seen.known = true;
}

/* Whether a gettimeofday entry's timezone is the kernel's (now's), or the
 * one before a change diehard saw less than TZ_GRACE seconds ago. */
static bool tz_sound(const struct cp_value *v, const struct cp_value *now)
{
	if (v->c == now->c && v->d == now->d)
		return true;
	struct timespec t;
	return tz_seen.changed && v->c == tz_seen.prev_c && v->d == tz_seen.prev_d &&
	       clock_gettime(CLOCK_MONOTONIC, &t) == 0 &&
	       (double)(t.tv_sec - tz_seen.at.tv_sec) + (double)(t.tv_nsec - tz_seen.at.tv_nsec) / 1e9 < TZ_GRACE;
}

/* Diehard's own real read of key (no filter here): the bounds' and what
 * diehard leads (a cp_real_fn). */
static int real_now(unsigned key, struct cp_value *out)
{
	key = cp_key_base(key);
	if (key == CP_KEY_GETTIMEOFDAY) {
		struct timeval tv;
		struct timezone tz;
		if (syscall(SYS_gettimeofday, &tv, &tz) != 0)
			return -1;
		*out = (struct cp_value){ .a = tv.tv_sec, .b = tv.tv_usec, .c = tz.tz_minuteswest, .d = tz.tz_dsttime };
		tz_note(out->c, out->d);
		return 0;
	}
	struct timespec ts;
	if (clock_gettime(key == CP_KEY_TIME ? CLOCK_REALTIME : (clockid_t)key, &ts) != 0)
		return -1;
	*out = (struct cp_value){ .a = ts.tv_sec, .b = key == CP_KEY_TIME ? 0 : ts.tv_nsec };
	return 0;
}

/* A value in nanoseconds (saturating: garbage may be anything). */
static int64_t ns_of(unsigned key, const struct cp_value *v)
{
	key = cp_key_base(key);
	int64_t unit = key == CP_KEY_GETTIMEOFDAY ? 1000 : key == CP_KEY_TIME ? 0 : 1;
	if (v->a > INT64_MAX / 1000000000LL - 1 || v->a < -(INT64_MAX / 1000000000LL - 1) || v->b < 0 ||
	    v->b >= 1000000000LL)
		return v->a < 0 ? INT64_MIN : INT64_MAX;
	return v->a * 1000000000LL + v->b * unit;
}

/* Whether an entry some replica led is within its clock's bounds, now
 * being the clock's value read after the entry was published. */
static bool sound_at(const struct fastclock *F, unsigned key, const struct cp_value *v, struct cp_value now)
{
	const struct cp_value *start = &F->start[key];
	key = cp_key_base(key);
	if (key == CP_KEY_GETTIMEOFDAY && (!tz_sound(v, &now) || v->b >= 1000000))
		return false;
	if (key == CP_KEY_TIME && (v->b != 0 || v->c != 0 || v->d != 0))
		return false;
	if (key < CP_KEY_GETTIMEOFDAY && (v->c != 0 || v->d != 0))
		return false;
	int64_t x = ns_of(key, v), lo = ns_of(key, start), hi = ns_of(key, &now);
	bool wall = !cp_monotonic(key);
	if (wall)
		lo = lo > INT64_MIN + SLACK_NS ? lo - SLACK_NS : INT64_MIN, hi = hi + SLACK_NS;
	return x >= lo && x <= hi;
}

static struct cp_page *dh_page(const struct fastclock *F)
{
	return F->view.pages[F->view.nslots];
}

struct fastclock *fastclock_new(unsigned nslots, const uint64_t images_key[2], uint64_t log_cap)
{
	if (nslots == 0 || nslots > CP_MAX_SLOTS) {
		log_event("fast clock reads: not with %u replica slots (at most %u): every read is notified", nslots,
			  CP_MAX_SLOTS);
		return NULL;
	}
	struct fastclock *F = calloc(1, sizeof *F);
	if (F == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	uint64_t secrets[5];
	if (getrandom(secrets, sizeof secrets, 0) != (ssize_t)sizeof secrets)
		fatal(EXIT_INTERNAL, "cannot read the clock log's key: %s", strerror(errno));
	F->view.secret = secrets[0];
	F->margin = log_cap / 2 > CP_RING + AHEAD_SLACK ? log_cap / 2 : CP_RING + AHEAD_SLACK;
	/* The top bit set: no pointer or small number a program passes by
	 * chance equals a marker. */
	F->mark_real = secrets[1] | 1ull << 63;
	F->mark_fallback = (secrets[2] | 1ull << 63) ^ (secrets[2] == secrets[1] ? 1 : 0);
	F->images_key[0] = images_key[0];
	F->images_key[1] = images_key[1];
	F->mark_exec = secrets[4] | 1ull << 63;
	F->mark_lane = secrets[3] | 1ull << 63;
	while (F->mark_lane == F->mark_real || F->mark_lane == F->mark_fallback || F->mark_lane == F->mark_exec)
		F->mark_lane ^= 2;
	size_t page = cp_page_size();
	F->len = (size_t)(nslots + 1) * page;
	const char *why;
	if (clockfs_make(&F->fs, nslots, page, &why) != 0) {
		log_event("fast clock reads: %s (%s): every read is notified", why, strerror(errno));
		free(F);
		return NULL;
	}
	if (!F->fs.sized)
		log_event("fast clock reads: no Landlock to fix the pages' size here: a replica could shrink its own "
			  "and fault its siblings' reads");
	F->base = mmap(NULL, F->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	for (unsigned i = 0; F->base != MAP_FAILED && i <= nslots; i++)
		if (mmap(F->base + (size_t)i * page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, F->fs.page[i],
			 0) == MAP_FAILED) {
			(void)munmap(F->base, F->len);
			F->base = MAP_FAILED;
		}
	if (F->base == MAP_FAILED) {
		log_event("fast clock reads: cannot map the shared log (%s): every read is notified", strerror(errno));
		clockfs_close(&F->fs);
		free(F);
		return NULL;
	}
	F->view.nslots = nslots;
	F->view.self = nslots;
	for (unsigned i = 0; i <= nslots; i++) {
		F->view.pages[i] = (struct cp_page *)(F->base + (size_t)i * page);
		cp_page_init(F->view.pages[i], i, nslots);
	}
	/* The first harvest comes soon (a program that reads its clocks
	 * hard from the start), the next ones back off while none come. */
	F->delay_us = CP_HARVEST_MIN_US;
	/* Every slot paces from the start (fastclock_pace). */
	atomic_store(&dh_page(F)->pace, nslots == 64 ? ~0ull : (1ull << nslots) - 1);
	for (unsigned k = 0; k < CP_KEYS; k++)
		if (cp_served(k) && real_now(k, &F->start[k]) != 0)
			F->start[k] = (struct cp_value){ .a = INT64_MIN / 2000000000LL };
	return F;
}

int fastclock_fd(const struct fastclock *F, unsigned i)
{
	return F->fs.page[i];
}

int fastclock_dir(const struct fastclock *F)
{
	return F->fs.dir;
}

void fastclock_use(struct fastclock *F, unsigned i)
{
	/* Joining until within a ring of the log (fastclock_pace): a first
	 * process at the start is at once; one that takes a spare slot later
	 * replays from the start, far behind by design. */
	F->joining |= 1ull << i;
	F->live |= 1ull << i;
	atomic_fetch_or(&dh_page(F)->used, 1ull << i);
}

uint64_t fastclock_stalled(const struct fastclock *F)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < F->view.nslots; i++)
		if (F->view.stale[i] >= STALLS)
			s |= 1ull << i;
	return s;
}

const char *fastclock_env(struct fastclock *F)
{
	char recipe[160];
	int n = snprintf(F->env, sizeof F->env,
			 "DIEHARD_CLOCKS=fd=%d,dir=%d,slots=%u,secret=%" PRIx64 ",real=%" PRIx64 ",fallback=%" PRIx64
			 ",lane=%" PRIx64,
			 FASTCLOCK_FD, FASTCLOCK_DIR_FD, F->view.nslots, F->view.secret, F->mark_real, F->mark_fallback,
			 F->mark_lane);
	/* Images patch themselves (libdiehard's early.c) from the recipe;
	 * without it they ask diehard (every image is then stopped). */
	if (vdso_recipe(recipe, sizeof recipe) == 0)
		recipe[0] = '\0';
	if (n > 0 && (size_t)n < sizeof F->env)
		snprintf(F->env + n, sizeof F->env - (size_t)n,
			 ",vdso=%s,images=%" PRIx64 ".%" PRIx64 ",exec=%" PRIx64, recipe, F->images_key[0],
			 F->images_key[1], F->mark_exec);
	return F->env;
}

void fastclock_marks(const struct fastclock *F, uint64_t *pass, uint64_t *ask)
{
	*pass = F->mark_real;
	*ask = F->mark_fallback;
}

bool fastclock_asks(const struct fastclock *F, uint64_t arg)
{
	return arg == F->mark_fallback;
}

bool fastclock_lane_asked(const struct fastclock *F, uint64_t arg)
{
	return arg == F->mark_lane;
}

uint64_t fastclock_harvested(const struct fastclock *F, unsigned key)
{
	return atomic_load(&dh_page(F)->harvested[key]);
}

uint64_t fastclock_index(struct fastclock *F, unsigned i, unsigned key, const uint64_t *asked)
{
	_Atomic uint64_t *count = &F->view.pages[i]->count[key];
	if (asked != NULL && *asked < atomic_load(count))
		return *asked;
	return atomic_fetch_add(count, 1);
}

/* The slots whose counts bound another's: every slot whose process lives,
 * pacing or not, but a damaged one (ignored) and a replacement still
 * replaying towards the others (joining: far behind by design, it would
 * make a sound leader look damaged). A slot whose process exited or was
 * killed needs nothing more from the log: its count, frozen, bounds no one. */
static uint64_t others_seen(const struct fastclock *F)
{
	return atomic_load(&dh_page(F)->used) & F->live & ~atomic_load(&dh_page(F)->ignore) & ~F->joining;
}

/* The furthest count of key among the slots that bound slot i (i itself
 * aside, none when i is nslots; counts too far past the log, damaged,
 * aside), and whose it is (*at): false if none. */
static bool others_front_at(const struct fastclock *F, unsigned i, unsigned key, uint64_t *front, unsigned *at)
{
	uint64_t seen = others_seen(F), far = fastclock_harvested(F, key) + FAR_AHEAD;
	bool others = false;
	*front = 0;
	for (unsigned j = 0; j < F->view.nslots; j++) {
		uint64_t c = atomic_load(&F->view.pages[j]->count[key]);
		if (j == i || !(seen >> j & 1) || c > far)
			continue;
		if (!others || c > *front) {
			*front = c;
			*at = j;
		}
		others = true;
	}
	return others;
}

static bool others_front(const struct fastclock *F, unsigned i, unsigned key, uint64_t *front)
{
	unsigned at;
	return others_front_at(F, i, key, front, &at);
}

bool fastclock_too_far(const struct fastclock *F, unsigned i, unsigned key, uint64_t n)
{
	if (n > fastclock_harvested(F, key) + FAR_AHEAD)
		return true;
	/* Nor further ahead of the furthest of the other slots than half the
	 * log's cap (at least a ring and the slack of a slot's threads in
	 * flight: a leader a ring past the slowest pacing slot falls back).
	 * A sound replica may read more than its siblings (a thread polling
	 * the clock while another works); one half a log ahead of all of them
	 * would make the log drop what they still need. The log's front
	 * alone is no bound: a slot that asks for entries far ahead makes
	 * diehard settle them, which moves the front, and asked again and
	 * again would grow the log past --call-log, dropping what the others
	 * still need. Measured from the others (others_seen: pacing or not, a
	 * bound that held only while some slot paced would be gone just when
	 * the others fell behind). What diehard settles for it stays closer
	 * still (fastclock_beyond). */
	uint64_t front;
	return others_front(F, i, key, &front) && n > front + F->margin;
}

bool fastclock_beyond(const struct fastclock *F, unsigned i, unsigned key, uint64_t n)
{
	uint64_t front;
	return others_front(F, i, key, &front) && n > front + CP_RING + AHEAD_SLACK;
}

/* The caller's put, with the bounds checked on the way. */
struct put_ctx {
	struct fastclock *F;
	fastclock_put_fn *put;
	void *arg;
	uint64_t have_now;            /* a bit per key: now[key] read */
	struct cp_value now[CP_KEYS]; /* the clock, read during this put's batch */
};

/* Whether an entry is within its bounds. A harvest puts many entries of a
 * key at once: the clock read for the first serves the rest (each was
 * published before it is put), and is read again only for an entry that
 * fails against it (published after that read). */
static bool sound(struct put_ctx *c, unsigned key, const struct cp_value *v)
{
	if ((c->have_now >> key & 1) && sound_at(c->F, key, v, c->now[key]))
		return true;
	if (real_now(key, &c->now[key]) != 0)
		return true; /* nothing to check against */
	c->have_now |= 1ull << key;
	return sound_at(c->F, key, v, c->now[key]);
}

static void put_checked(unsigned key, uint64_t n, const struct cp_value *v, unsigned by, void *arg)
{
	struct put_ctx *c = arg;
	struct fastclock *F = c->F;
	if (by < F->view.nslots && !sound(c, key, v) && !(F->forged >> by & 1)) {
		F->forged |= 1ull << by;
		F->forged_key[by] = key;
		F->forged_n[by] = n;
	}
	c->put(key, n, v, by, c->arg);
}

static int real_lead(unsigned key, struct cp_value *out, void *arg)
{
	(void)arg;
	return real_now(key, out);
}

int fastclock_settle(struct fastclock *F, unsigned key, uint64_t n, fastclock_put_fn *put, void *arg)
{
	/* Never a loop a page can lengthen: an index from a count far past
	 * the log is refused (the caller answers that read with a real value). */
	if (n > fastclock_harvested(F, key) + FAR_AHEAD)
		return -1;
	struct put_ctx c = { .F = F, .put = put, .arg = arg };
	return cp_settle(&F->view, key, n, real_lead, put_checked, &c);
}

/* How far the log may take key's entries: no further past the second
 * furthest count of the slots seen than diehard settles past the others
 * (fastclock_beyond's bound: the furthest leads, the second is the
 * furthest of its others). A slot that publishes far ahead of everyone
 * would otherwise move the front, harvest after harvest, and grow the log
 * past --call-log, dropping what the others still need. One slot alone:
 * no bound but cp_harvest's ring. */
static uint64_t harvest_limit(const struct fastclock *F, unsigned key)
{
	uint64_t top, second;
	unsigned at;
	if (!others_front_at(F, F->view.nslots, key, &top, &at) || !others_front(F, at, key, &second))
		return UINT64_MAX;
	return second + CP_RING + AHEAD_SLACK;
}

void fastclock_harvest(struct fastclock *F, fastclock_put_fn *put, void *arg)
{
	struct put_ctx c = { .F = F, .put = put, .arg = arg };
	for (unsigned k = 0; k < CP_KEYS; k++)
		if (live_key(F, k))
			(void)cp_harvest(&F->view, k, harvest_limit(F, k), put_checked, &c);
}

uint64_t fastclock_harvest_delay(struct fastclock *F, double now)
{
	uint64_t total = 0;
	for (unsigned k = 0; k < CP_KEYS; k++)
		total += fastclock_harvested(F, k);
	if (F->paced_at == 0) { /* the first call: the rate is counted from here */
		F->paced_at = now;
		F->paced_total = total;
		return F->delay_us;
	}
	double took_us = (now - F->paced_at) * 1e6;
	if (took_us < CP_HARVEST_MIN_US)
		return F->delay_us; /* too soon to tell a rate */
	F->delay_us = cp_harvest_pace(F->delay_us, total - F->paced_total, (uint64_t)took_us);
	F->paced_total = total;
	F->paced_at = now;
	return F->delay_us;
}

void fastclock_forged_entry(const struct fastclock *F, unsigned i, unsigned *key, uint64_t *n)
{
	*key = F->forged_key[i];
	*n = F->forged_n[i];
}

uint64_t fastclock_forged(struct fastclock *F)
{
	uint64_t f = F->forged;
	F->forged = 0;
	return f;
}

uint64_t fastclock_count(const struct fastclock *F, unsigned i, unsigned key)
{
	return atomic_load(&F->view.pages[i]->count[key]);
}

bool fastclock_sum(struct fastclock *F, unsigned i, unsigned key, uint64_t *sum)
{
	bool unsure = F->unsure[i] >> key & 1;
	*sum = F->sum[i][key] +
	       cp_sum_rest(F->view.pages[i], key, F->floor[i][key], fastclock_count(F, i, key), &unsure);
	return !unsure;
}

void fastclock_reset(struct fastclock *F, unsigned i)
{
	struct cp_page *p = F->view.pages[i];
	cp_page_forget(p);
	for (unsigned k = 0; k < CP_KEYS; k++) {
		F->floor[i][k] = 0;
		F->sum[i][k] = 0;
		atomic_store(&p->count[k], 0);
	}
	F->unsure[i] = 0;
	F->view.stale[i] = 0;
	atomic_store(&p->images, 0); /* a replacement's images get the same bytes again */
	atomic_fetch_and(&dh_page(F)->off, ~(1ull << i));
	atomic_fetch_and(&dh_page(F)->ignore, ~(1ull << i));
	atomic_fetch_and(&dh_page(F)->pace, ~(1ull << i));
	atomic_fetch_and(&dh_page(F)->serve, ~(1ull << i));
	for (unsigned j = 0; j < CP_LANES; j++) {
		atomic_store(&dh_page(F)->lane_tid[i][j], 0);
		atomic_store(&dh_page(F)->divert[i][j], 0);
	}
	for (unsigned k = 0; k < CP_KEYS; k++)
		F->moved_at[i][k] = 0;
	F->joining |= 1ull << i;
}

void fastclock_to_front(struct fastclock *F, unsigned i, unsigned key)
{
	/* The reads it skips are never made: its count no longer says which
	 * values it consumed, so its sum is not compared with its siblings'. */
	fastclock_unsummed(F, i, key);
	uint64_t front = fastclock_harvested(F, key);
	for (unsigned j = 0; j < F->view.nslots; j++) {
		uint64_t c = fastclock_count(F, j, key);
		if (c > front && !fastclock_too_far(F, j, key, c))
			front = c;
	}
	/* A count the replica keeps changing (its own threads reading, or
	 * garbage written over and over) is tried a bounded number of times:
	 * nothing in a page may keep diehard here. */
	_Atomic uint64_t *count = &F->view.pages[i]->count[key];
	uint64_t c = atomic_load(count);
	for (unsigned tries = 0; tries < 64 && (c < front || fastclock_too_far(F, i, key, c)) &&
				 !atomic_compare_exchange_weak(count, &c, front);
	     tries++)
		;
	/* The reads it skipped are never made: none will ask. (One of its
	 * threads still in a read below may: its entry is then kept only
	 * while another slot still needs it.) */
	if (F->floor[i][key] < front)
		F->floor[i][key] = front;
}

void fastclock_unsummed(struct fastclock *F, unsigned i, unsigned key)
{
	F->unsure[i] |= 1ull << key;
}

void fastclock_done(struct fastclock *F, unsigned i, unsigned key, uint64_t n, const struct cp_value *v)
{
	if (v == NULL)
		fastclock_unsummed(F, i, key);
	/* Over whatever is there (unlike cp_done): a page the replica wrote
	 * garbage over gets sound marks again as its reads are answered. */
	uint64_t term = v != NULL ? cp_sum_term(&F->view, key, n, v) : 0;
	atomic_store(&F->view.pages[i]->done[key][n % CP_DONE], cp_mark(n, term));
}

uint64_t fastclock_floor(struct fastclock *F, unsigned i, unsigned key, uint64_t count)
{
	bool unsure = false;
	F->floor[i][key] = cp_floor(F->view.pages[i], key, F->floor[i][key], count, &F->sum[i][key], &unsure);
	if (unsure)
		F->unsure[i] |= 1ull << key;
	return F->floor[i][key];
}

void fastclock_pace(struct fastclock *F, uint64_t live, double now)
{
	uint64_t was = atomic_load(&dh_page(F)->pace), pace = 0;
	F->live = live;
	for (unsigned i = 0; i < F->view.nslots; i++)
		if ((live >> i & 1) && !fastclock_is_off(F, i)) {
			/* A slot paces while, in every key, it keeps within a
			 * ring of the log or keeps reading that key (STILL_S);
			 * a new one (a replacement, replaying) joins once within
			 * a ring in every key. One a ring behind in a key whose
			 * count stood still stops: what it has yet to read is
			 * in the log. */
			bool within = true, up = was >> i & 1;
			for (unsigned k = 0; k < CP_KEYS; k++) {
				if (!live_key(F, k))
					continue;
				uint64_t c = fastclock_count(F, i, k);
				if (c != F->moved[i][k] || F->moved_at[i][k] == 0) {
					F->moved[i][k] = c;
					F->moved_at[i][k] = now;
				}
				if (c + CP_RING < fastclock_harvested(F, k)) {
					within = false;
					if (now - F->moved_at[i][k] >= STILL_S)
						up = false;
				}
			}
			if (within) {
				up = true;
				F->joining &= ~(1ull << i); /* caught up: its count bounds the others' */
			}
			pace |= (uint64_t)up << i;
		}
	if (pace != was) /* its line holds the word every read loads (off) */
		atomic_store(&dh_page(F)->pace, pace);
}

void fastclock_off(struct fastclock *F, unsigned i)
{
	atomic_fetch_or(&dh_page(F)->off, 1ull << i);
}

void fastclock_on(struct fastclock *F, unsigned i)
{
	atomic_fetch_and(&dh_page(F)->off, ~(1ull << i));
}

void fastclock_serve(struct fastclock *F, unsigned i)
{
	atomic_fetch_or(&dh_page(F)->serve, 1ull << i);
}

bool fastclock_serving(const struct fastclock *F, unsigned i)
{
	return (atomic_load(&dh_page(F)->serve) >> i & 1) && !fastclock_is_off(F, i);
}

void fastclock_lane_count(struct fastclock *F, unsigned i, unsigned key, uint64_t n)
{
	atomic_store(&F->view.pages[i]->count[key], n);
	F->floor[i][key] = n;
	F->moved_at[i][key] = 0;
	/* Its reads before n were not in this key: its sum covers only
	 * some of them, not to be compared. */
	fastclock_unsummed(F, i, key);
}

void fastclock_lane_seed(struct fastclock *F, unsigned key, uint64_t front, const struct cp_value *last)
{
	int lane = cp_lane_of(key);
	if (lane < 0 || (F->lanes >> lane & 1 && fastclock_harvested(F, key) != 0))
		return;
	if (!(F->lanes >> lane & 1)) {
		uint64_t salt;
		if (getrandom(&salt, sizeof salt, 0) != (ssize_t)sizeof salt)
			fatal(EXIT_INTERNAL, "cannot read a clock lane's salt: %s", strerror(errno));
		atomic_store(&dh_page(F)->lane_salt[lane], salt | 1);
	}
	F->lanes |= 1u << lane;
	if (front == 0)
		return;
	if (last != NULL)
		cp_seed(&F->view, key, front - 1, last);
	atomic_store(&dh_page(F)->harvested[key], front);
}

void fastclock_lane_name(struct fastclock *F, unsigned i, unsigned lane, uint32_t tid)
{
	atomic_store(&dh_page(F)->lane_tid[i][lane], tid);
}

void fastclock_divert(struct fastclock *F, unsigned i, unsigned lane, bool on)
{
	atomic_store(&dh_page(F)->divert[i][lane], on ? 1u : 0u);
}

bool fastclock_diverted(const struct fastclock *F, unsigned i, unsigned lane)
{
	return atomic_load(&dh_page(F)->divert[i][lane]) != 0;
}

void fastclock_ignore(struct fastclock *F, unsigned i)
{
	atomic_fetch_or(&dh_page(F)->off, 1ull << i);
	atomic_fetch_or(&dh_page(F)->ignore, 1ull << i);
}

void fastclock_real_by_syscall(struct fastclock *F)
{
	atomic_store(&dh_page(F)->real_by_syscall, 1);
}

bool fastclock_is_real_by_syscall(const struct fastclock *F)
{
	return atomic_load(&dh_page(F)->real_by_syscall) != 0;
}

bool fastclock_is_off(const struct fastclock *F, unsigned i)
{
	return (atomic_load(&dh_page(F)->off) >> i) & 1;
}

void fastclock_settle_all(struct fastclock *F, fastclock_put_fn *put, void *arg)
{
	for (unsigned k = 0; k < CP_KEYS; k++) {
		if (!live_key(F, k))
			continue;
		uint64_t top = 0;
		for (unsigned j = 0; j < F->view.nslots; j++) {
			uint64_t c = fastclock_count(F, j, k);
			if (c > top && !fastclock_too_far(F, j, k, c))
				top = c;
		}
		if (top > fastclock_harvested(F, k))
			(void)fastclock_settle(F, k, top - 1, put, arg);
	}
}

void fastclock_at_random(struct fastclock *F, unsigned slot, uint8_t out[16])
{
	uint64_t n = atomic_fetch_add(&F->view.pages[slot]->images, 1);
	cp_at_random(F->images_key, n, out);
}

uint64_t fastclock_exec_mark(const struct fastclock *F)
{
	return F->mark_exec;
}

uint64_t fastclock_secret(const struct fastclock *F)
{
	return F->view.secret;
}

uint64_t fastclock_images(const struct fastclock *F, unsigned slot)
{
	return atomic_load(&F->view.pages[slot]->images);
}
