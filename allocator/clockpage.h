/* clockpage.h — clock reads agreed in shared memory, without a round trip
 * to diehard (issue 16): the protocol, shared by libdiehard.so (the
 * replicas' fast path) and diehard (which takes part in it, harvests it into
 * its nondeterminism log and checks it).
 *
 * Design:
 * - Keys: the system clocks a replica reads through the vDSO (clock ids
 *   0..11 but the CPU-time ones), gettimeofday and time; CP_KEYS of them.
 *   The n-th read of a key must return the same value in every replica
 *   (docs/NONDETERMINISM.md), as the notify path's log does.
 * - Pages: one per replica slot, and one for diehard. Every page is a file
 *   of its own (supervisor/virt/clockfs.c): a replica can write its own
 *   page and nothing else, not the other slots' pages nor diehard's, which
 *   it maps read-only from descriptors the kernel keeps read-only (issue
 *   37). So nothing here is written by more than one slot, and a slot that
 *   damages its page damages only what the others read from it: a page
 *   holds the slot's count of reads per key (shared by all its processes
 *   and threads), a completion mark per read carrying the value's term of
 *   a sum (diehard adds them up and compares the slots' sums), a ring per
 *   key of the entries the slot led, each {tag = n + 1, value, keyed
 *   checksum of (key, n, value)}, and a ring of copies of the entries it
 *   took from others (witnesses).
 * - Leading without a shared word: a replica that wants to lead entry n
 *   proposes it in its own ring's position (tag PENDING | n + 1), then
 *   looks at every other slot's position (Dekker's order: store, full
 *   fence, loads). If none proposes or holds n, it leads: reads the real
 *   clock and publishes the entry there. If another proposes n it yields
 *   (PENDING | YIELD | n + 1) and follows whoever leads; two that see each
 *   other both yield and ask diehard. Two proposers cannot both miss each
 *   other, so no two replicas lead one entry. Entry n is proposed only
 *   once entry n - 1 is published, and a monotonic key's value is raised
 *   to n - 1's if needed, so entries are in time order as the notify
 *   path's are.
 * - Diehard settles what falls back: it marks its own page's position
 *   (PENDING | n + 1, taking n over), then looks at every page; a value
 *   published (or copied by a follower) before that stands, else diehard
 *   leads n itself. A leader after publishing, and a follower after taking
 *   an entry, look at diehard's position again: if diehard took n over,
 *   its value is the one. Whichever order these happen in, every
 *   participant ends with the same value.
 * - Pace: a replica leads entry n only while n is within a ring of every
 *   pacing slot's count (diehard names them: live, not replaying, keeping
 *   within a ring of its log or still reading), else it
 *   waits for them a little, then falls back: a replica that ran a ring
 *   ahead would overwrite entries the others have yet to read, and every
 *   read of theirs would then cost a round trip to diehard.
 * - What goes wrong falls back: an entry whose checksum fails, a proposer
 *   that does not publish within CP_SPINS checks, a ring position diehard
 *   has not harvested yet, an entry diehard's log already holds but no page
 *   does, a read that fell a ring behind, a position of its own page
 *   (entry or copy) still marked by a thread of the slot that is writing
 *   an older entry there (held up while diehard took that entry over):
 *   the caller asks diehard (the notify path) for entry n, and diehard
 *   settles it (cp_settle). Nothing here waits unboundedly, no bytes of a
 *   page are used unchecked, and nothing a replica writes makes diehard
 *   loop: every loop of diehard's is bounded by the slots and the entries
 *   asked for.
 * - What a slot's garbage can do to the others: slow them (its proposals
 *   make them wait, then ask diehard; diehard counts proposals it finds
 *   never published, cp_view.stale, and the caller kills a slot past a
 *   bound), not make them disagree: a stray write does not make a sound
 *   entry (the checksum is keyed by the run's secret). A replica that
 *   knows the protocol and the secret (it is in its environment) can still
 *   publish two values for one entry, one after the other: followers that
 *   took the two then differ, as if it had corrupted their memory
 *   (docs/SANDBOX.md says what diehard does then).
 * - Entries a damaged page lost: one that someone took stands (its
 *   witness copy). One nobody took, while someone took a later entry (a
 *   slot's threads take entries out of order), must come no later than
 *   that: a slot takes an entry only once its own page holds every entry
 *   before it since diehard's log (backfill), so any leader finds the lost
 *   one's copy; and diehard caps what it leads by every value the pages
 *   hold of later entries.
 *
 * Pure code: memory given by the caller, the real clock read through a
 * callback; no allocation, no stdio (it runs inside libdiehard.so). */
#ifndef DIEHARD_CLOCKPAGE_H
#define DIEHARD_CLOCKPAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_BASE_KEYS 14u     /* clock ids 0..11, then gettimeofday, time */
#define CP_KEY_GETTIMEOFDAY 12u
#define CP_KEY_TIME 13u
/* Lanes: a server's event-loop threads each read the wall clocks in keys of
 * their own (a lane, CP_LANE_WALLS keys: REALTIME, REALTIME_COARSE,
 * gettimeofday, time), the n-th read of a lane being that thread's n-th
 * in every replica, as diehard's notify path matches a server's wall
 * clocks per thread (supervisor/virt/take.c). Diehard gives a lane to a
 * loop thread and names it in its page (lane_tid); a thread with none
 * makes its wall reads the notified way. */
#define CP_LANES 8u
#define CP_LANE_WALLS 4u
#define CP_KEYS (CP_BASE_KEYS + CP_LANES * CP_LANE_WALLS)
/* A server's follower does not take a value older than this against its
 * own clock, nor one whose second has turned (take.c's staleness rule):
 * it asks diehard, which moves it to the front. */
#define CP_STALE_NS 10000000LL
#define CP_RING 8192u        /* entries a page keeps per key: a reader a ring
				ahead of diehard's harvest asks diehard, so a
				round trip per CP_RING reads of a busy clock */
#define CP_DONE (4u * CP_RING) /* completion marks a page keeps per key */
#define CP_MAX_SLOTS 62u     /* replica slots; diehard's page is the next */
#define CP_SPINS 2048u       /* checks of a proposed, unpublished entry before falling back */
#define CP_YIELD_EVERY 256u  /* reads of a key between a crowded replica's yields */
/* A page's first word: "dhclock", the page's size and the layout's version
 * (low byte), so that a library and a diehard built with other layouts
 * (ring size, fields, what a word means) do not take each other's pages
 * (the library then leaves clocks to the notify path). */
#define CP_LAYOUT 5 /* changed with any change of what the words mean */
#define CP_MAGIC ((0x6368646c6f636b00ULL ^ (uint64_t)sizeof(struct cp_page) << 8) | CP_LAYOUT)

/* A clock's value: seconds and nanoseconds (gettimeofday: microseconds in b,
 * the timezone in c and d; time: seconds). */
struct cp_value {
	int64_t a, b;
	int32_t c, d;
};

struct cp_entry {
	_Atomic uint64_t tag; /* n + 1 once published; 0 never */
	_Atomic int64_t a, b;
	_Atomic int32_t c, d;
	_Atomic uint64_t check;
};

struct cp_page {
	uint64_t magic;
	uint32_t slot, nslots;
	/* Written by diehard in its own page only: entries below harvested[k]
	 * are in its log (ring positions free for reuse); bit s of off: slot s
	 * makes every read the usual way (a replacement replaying, a server). */
	_Atomic uint64_t harvested[CP_KEYS];
	_Atomic uint64_t off;
	/* Bit s: slot s paces the others (it is live and keeping up): no
	 * replica leads an entry a ring past its count, so that the entries
	 * it is about to read are still in the rings. */
	_Atomic uint64_t pace;
	/* Bit s: slot s has had a process (set before the process runs): only
	 * those slots' pages are looked at for proposals and entries; and not
	 * once its bit of ignore is set (diehard found its page written over:
	 * what the others took from it before is in their witness copies). */
	_Atomic uint64_t used, ignore;
	/* Nonzero: leaders read the real clock by system call, not through
	 * the vDSO's own code (it was seen making system calls itself). */
	_Atomic uint64_t real_by_syscall;
	/* The slot's program images started so far: the n-th takes the n-th
	 * AT_RANDOM bytes of the run (early.c, or diehard when it stops it). */
	_Atomic uint64_t images;
	/* Written by diehard in its own page only: bit s of serve: slot s is a
	 * server (it listens): its base wall keys are read per thread (a lane,
	 * else the notify path), and a value it follows must be fresh
	 * (CP_STALE_NS). lane_tid[s][j]: the thread (its id in the replica's
	 * pid namespace) that reads lane j in slot s, 0 none (looked up by
	 * allocator/clocks.c); divert[s][j] nonzero: that thread's wall reads go to diehard
	 * for now (an anchor of its: supervisor/virt/anchor.c). */
	_Atomic uint64_t serve;
	_Atomic uint32_t lane_tid[CP_MAX_SLOTS][CP_LANES];
	_Atomic uint32_t divert[CP_MAX_SLOTS][CP_LANES];
	/* Each lane's salt of its entries' checksums, drawn when it is given
	 * (before, what a page holds there is nobody's: clockpage.c). */
	_Atomic uint64_t lane_salt[CP_LANES];
	/* The slot's own: */
	_Atomic uint64_t count[CP_KEYS];
	/* Entries it led (tag n + 1), or proposes to lead (PENDING | n + 1),
	 * or proposed and yielded (PENDING | YIELD | n + 1): cp_read. */
	struct cp_entry ring[CP_KEYS][CP_RING];
	/* Entries it took from others, copied (best effort: positions apart
	 * from ring's, so a copy never overwrites an entry it led). */
	struct cp_entry copy[CP_KEYS][CP_RING];
	/* Completion marks: done[k][n % CP_DONE] = cp_mark(n, term) once the
	 * slot's read n of key k has its value (term: the value's, cp_sum_term),
	 * whether the replica settled it or diehard answered it (cp_done). One
	 * word, so a mark's index and term are read together (and whether the
	 * read is done or its value only taken: cp_mark_term). Diehard adds the
	 * terms up as it passes the done marks (cp_floor): the slot's sum, with no
	 * locked addition per read. A thread of the slot may be held up between
	 * taking n and settling it while its siblings read on, a ring and
	 * more: diehard keeps entries in its log from the slot's first read
	 * not marked (cp_floor), not from a distance behind its count, so that
	 * a late fallback still finds its entry. A read that never completes
	 * (its process killed inside it, while another of the slot's goes on)
	 * holds the floor: the log then grows to its cap (--call-log). */
	_Atomic uint64_t done[CP_KEYS][CP_DONE];
};

/* What one participant sees: its own page (NULL for diehard, which writes
 * its page through pages[nslots]), every page, the run's checksum key. */
struct cp_view {
	struct cp_page *pages[CP_MAX_SLOTS + 1];
	unsigned nslots; /* replica slots; pages[nslots] is diehard's */
	unsigned self;   /* the participant's slot; nslots for diehard */
	uint64_t secret;
	/* Per key, an entry index below which leading is paced (every pacing
	 * slot's count was within a ring of it when last looked at): counts
	 * only grow, so the slots' lines are read again only past it. A
	 * hint: a slot that joins the pacing later may be further behind,
	 * and then reads a ring back fall back, as without pacing. */
	_Atomic uint64_t paced_below[CP_KEYS];
	/* Per key, the slot that led the entry last found: looked at first
	 * (one replica tends to lead a run of entries). A hint only. */
	_Atomic unsigned last_by[CP_KEYS];
	/* More replica slots than CPUs to run them (libdiehard sets it): a
	 * replica that catches up with the leader lets its CPU go, at most
	 * once every CP_YIELD_EVERY reads of a key (yielded_at: the read it
	 * last did so at), rather than read on in step with it (cp_read). */
	bool crowded;
	_Atomic uint64_t yielded_at[CP_KEYS];
	_Atomic uint64_t yields; /* how many times it did */
	/* Diehard's: per slot, the entries it settled while the slot proposed
	 * them and had not published (a proposal that stalls the others),
	 * since the slot's last entry harvested. A slot's honest proposal is
	 * published within its real clock read; many in a row are garbage. */
	uint32_t stale[CP_MAX_SLOTS];
	/* Diehard's: per key, the value of the last entry it put in its log
	 * (harvested[key] - 1; bit k of have_last: there is one), the floor
	 * of a monotonic key's next entry. */
	struct cp_value last[CP_KEYS];
	uint64_t have_last;
};

/* Bytes of one page (whole pages). */
size_t cp_page_size(void);

/* The name of page i's file in the pages' directory (clockfs.c makes
 * them): slot i's decimal number, "d" for diehard's (i == nslots); at most
 * 3 bytes and the NUL. Pure, no libc (the blob's loader uses it). */
static inline void cp_page_name(unsigned i, unsigned nslots, char name[4])
{
	if (i >= nslots) {
		name[0] = 'd', name[1] = '\0';
	} else if (i < 10) {
		name[0] = (char)('0' + i), name[1] = '\0';
	} else {
		name[0] = (char)('0' + i / 10 % 10), name[1] = (char)('0' + i % 10), name[2] = '\0';
	}
}

/* Whether key k (a clock id, or CP_KEY_*, or a lane's) is one the fast
 * path serves, and whether its values must not go backwards. */
bool cp_served(unsigned key);
bool cp_monotonic(unsigned key);

/* A lane's keys: lane j's w-th wall key (w: 0 REALTIME, 1 REALTIME_COARSE,
 * 2 gettimeofday, 3 time); the base key a key reads (itself but for a
 * lane's); the w of a base wall key (-1: none); the lane of a key (-1:
 * a base key). Pure, no libc (the blob uses them). */
static inline unsigned cp_lane_key(unsigned lane, unsigned w)
{
	return CP_BASE_KEYS + lane * CP_LANE_WALLS + w;
}

static inline unsigned cp_key_base(unsigned key)
{
	static const unsigned char base[CP_LANE_WALLS] = { 0, 5, CP_KEY_GETTIMEOFDAY, CP_KEY_TIME };
	return key < CP_BASE_KEYS ? key : base[(key - CP_BASE_KEYS) % CP_LANE_WALLS];
}

static inline int cp_wall_of(unsigned key)
{
	return key == 0 ? 0 : key == 5 ? 1 : key == CP_KEY_GETTIMEOFDAY ? 2 : key == CP_KEY_TIME ? 3 : -1;
}

static inline int cp_lane_of(unsigned key)
{
	return key >= CP_BASE_KEYS && key < CP_KEYS ? (int)((key - CP_BASE_KEYS) / CP_LANE_WALLS) : -1;
}

/* Whether slot self is a server (diehard's page's serve). */
static inline bool cp_serving(const struct cp_view *v)
{
	return (atomic_load_explicit(&v->pages[v->nslots]->serve, memory_order_acquire) >> v->self & 1) != 0;
}

/* Diehard: entry n of key becomes published in its own page with value
 * *val (the last entry its log holds of a key that begins in the shared
 * pages there: a lane given to a thread after its first reads). */
void cp_seed(struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *val);

/* Sets up a fresh (zeroed) page of slot. */
void cp_page_init(struct cp_page *p, unsigned slot, unsigned nslots);

/* Diehard, once the process in a page's slot is gone (before its counts
 * are reset): drops the marks its threads left on entries and copies they
 * never finished, so that the slot's next process can lead and copy at
 * those ring positions, and the completion marks, so that its reads from
 * 0 can be marked again. Only positions below the slot's counts are looked
 * at (nothing else was written; the rest of the page stays unallocated). */
void cp_page_forget(struct cp_page *p);

/* Whether leaders must make the system call for a real read (diehard's
 * page says so), rather than read the vDSO. */
static inline bool cp_real_by_syscall(const struct cp_view *v)
{
	return atomic_load_explicit(&v->pages[v->nslots]->real_by_syscall, memory_order_relaxed) != 0;
}

/* Reads the real clock for key into *out: 0, or -1 when it cannot (the
 * caller then falls back). */
typedef int cp_real_fn(unsigned key, struct cp_value *out, void *arg);

enum cp_outcome {
	CP_LED,       /* this read led entry *index: *out is the real clock */
	CP_FOLLOWED,  /* *out is entry *index as its leader published it */
	CP_FALLBACK,  /* ask diehard for entry *index (cp_settle) */
	CP_OFF,       /* the fast path is off: make the call the usual way (no index taken) */
};

/* The participant's next read of key (cp_served). */
enum cp_outcome cp_read(struct cp_view *v, unsigned key, cp_real_fn *real, void *arg, struct cp_value *out,
			uint64_t *index);

/* Marks the slot's read n of key done (p: the slot's page), term being
 * the value's term of the sum (cp_sum_term), as cp_read does for the
 * reads it settles (diehard marks those it answers itself, over anything).
 * A later read's mark already at the position stays (the slot's first
 * read not done then stays n: diehard's log keeps more, never less; and
 * n's term is lost: the slot's count is then a CP_DONE past it, and its
 * sum not trusted, cp_floor); garbage there does not. */
void cp_done(struct cp_page *p, unsigned key, uint64_t n, uint64_t term);

/* A mark's upper half: the term's high 30 bits, then two flag bits: 01
 * done (its term adds to the slot's sum), 10 taken (cp_read took the value
 * and has yet to confirm it against diehard's page: diehard's settle counts
 * the slot among the value's takers, but the read is not done: it may still
 * ask diehard for the entry, whose log must then keep it). Never 0, so a
 * mark is never a zero word. */
#define CP_MARK_DONE 1u
#define CP_MARK_TAKEN 2u
static inline uint64_t cp_mark_term(uint64_t term)
{
	return (term >> 32 & ~(uint64_t)3) | CP_MARK_DONE;
}

/* A done mark: the low 32 bits of n + 1, and above them cp_mark_term(term). */
static inline uint64_t cp_mark(uint64_t n, uint64_t term)
{
	return cp_mark_term(term) << 32 | (uint32_t)(n + 1);
}

/* Diehard's side: the slot's first read of key not done, looking from
 * floor (the last answer) up to count (the slot's count): no thread of the
 * slot will ask diehard for an entry below it (a call passes at most
 * CP_DONE marks: the next goes on). Adds the terms of the marks
 * it passes to *sum; sets *unsure when one may have been a later read's
 * (the slot's count more than CP_DONE past the first, read after them). */
uint64_t cp_floor(const struct cp_page *p, unsigned key, uint64_t floor, uint64_t count, uint64_t *sum,
		  bool *unsure);

/* Diehard's side, once no process of the slot is left: the terms of the
 * reads marked done from floor up to count; *unsure as for cp_floor, and
 * when a read there has no mark of its own (it never completed: its
 * process killed inside it; or its mark was refused for garbage the slot's
 * last process left past its count, which cp_page_forget does not clear):
 * a sibling that completed it would differ at the same count. */
uint64_t cp_sum_rest(const struct cp_page *p, unsigned key, uint64_t floor, uint64_t count, bool *unsure);

/* Diehard's side: what it keeps of an entry (its nondeterminism log), in
 * order: entry n of key, led by slot by (nslots: diehard). */
typedef void cp_put_fn(unsigned key, uint64_t n, const struct cp_value *value, unsigned by, void *arg);

/* Diehard's side: puts the entries of key published since the last
 * harvest, in order, stopping at the first not (yet) published, or at
 * entry limit, or a ring on (no sound leader leads further past the last
 * harvest: entries a replica keeps publishing just ahead of the walk must
 * not hold diehard here); their ring positions may then be reused.
 * Returns the new harvested[key]. */
uint64_t cp_harvest(struct cp_view *v, unsigned key, uint64_t limit, cp_put_fn *put, void *arg);

/* Diehard's side: how long until its next harvest (microseconds), given
 * the last such delay, the entries its log gained over the last took_us
 * (every key). About the time the replicas take to publish a quarter of a
 * ring at that rate, within [CP_HARVEST_MIN_US, CP_HARVEST_MAX_US]; with
 * none, twice the last (a reader held up a moment is not a reader gone).
 * Why: a replica that leads a ring past the harvest asks diehard for its
 * entry and waits while diehard takes the whole ring into its log,
 * hundreds of microseconds; harvesting ahead of it, while it reads on,
 * saves that wait (over a quarter of a busy reader's time at k = 1); an idle
 * run still wakes diehard at the slowest pace only. */
#define CP_HARVEST_MIN_US 100u
#define CP_HARVEST_MAX_US 50000u
uint64_t cp_harvest_pace(uint64_t last_us, uint64_t got, uint64_t took_us);

/* Diehard's side, for a read that fell back with index n: settles every
 * entry of key from harvested[key] to n in order (a sound published entry
 * stands, then a value followers copied; else diehard leads it with
 * real(), over any proposal not published) and puts each. n below
 * harvested[key] is already in the caller's log. The caller bounds n (a
 * read index from a replica may be anything). 0, or -1 when real() failed. */
int cp_settle(struct cp_view *v, unsigned key, uint64_t n, cp_real_fn *real, cp_put_fn *put, void *arg);

/* Entry n of key if published and sound, in diehard's page or a used
 * slot's ring (1, *out and *by), else 0; without settling. */
int cp_published(struct cp_view *v, unsigned key, uint64_t n, struct cp_value *out, unsigned *by);

/* What a consumed value adds to a slot's sum (its completion mark's
 * term): order-independent over the reads of a key, so slots that consumed
 * the same entries have equal sums at equal counts. The entry's checksum,
 * which a read has at hand. */
uint64_t cp_sum_term(const struct cp_view *v, unsigned key, uint64_t n, const struct cp_value *value);

/* AT_RANDOM's 16 bytes for a slot's n-th program image, from the run's
 * images key (early.c, and diehard for the images it stops): SipHash-2-4
 * of 2n and 2n + 1. Pure, no libc (early.c runs before relocation ends). */
void cp_at_random(const uint64_t key[2], uint64_t n, uint8_t out[16]);

#endif
