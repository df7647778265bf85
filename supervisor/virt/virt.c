/* virt.c — see virt.h. One listener per replica (its descendants share its
 * filter, so their calls arrive there too); each notification is received,
 * answered from the nondeterminism log or from the real world, and sent
 * back, all on the supervisor's one loop. A private network's calls
 * (listen, connect, UDP sockets) are netcalls.c's, on the same path.
 *
 * Rules kept on every notification (each was a bug somewhere else):
 *   - the request is zeroed before each receive (the kernel rejects a dirty
 *     one with EINVAL);
 *   - a receive with nothing pending must not block the loop: the
 *     listener is polled first (the loop also wakes us when it hangs up,
 *     once no process of the replica is left, and before Linux 6.11 a
 *     receive then sleeps for good);
 *   - after reading or writing the caller's memory, the notification id is
 *     checked again before answering: the caller may have died (only
 *     SIGKILL ends a caller we received), and then gets no answer. Its tid
 *     cannot name another process in between: that needs the pid space to
 *     wrap within microseconds. Writes through /proc/TID/mem (the vDSO)
 *     open the file first and check the id before writing: the open file
 *     pins the process that was checked;
 *   - a bad pointer is the caller's EFAULT, never ours;
 *   - memory we may not touch (a non-dumpable program under an unprivileged
 *     diehard) means the call goes on in the kernel, unvirtualized, and is
 *     counted. */
#include "virt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "chacha.h"
#include "dispute.h"
#include "entropy.h"
#include "exitcode.h"
#include "fastclock.h"
#include "graft.h"
#include "clockpage.h"
#include "envkeep.h"
#include "filter.h"
#include "files.h"
#include "log.h"
#include "ndlog.h"
#include "net.h"
#include "netcalls.h"
#include "realclock.h"
#include "replay.h"
#include "remote.h"
#include "sup.h"
#include "vdso.h"

/* Linux 6.6: the kernel wakes the supervisor on the CPU of the replica that
 * just stopped in a notified call, and the replica on ours when we answer,
 * instead of waking another CPU each way: a round trip through epoll costs
 * 14 µs instead of 23 on this project's idle 2-CPU VM (bench/virtualize;
 * less on a loaded one). Debian 12's headers predate it. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* getrandom(2) returns at most this much per call, as the kernel did before
 * 5.18, so that one call cannot hold up the loop for long; callers loop,
 * since a large getrandom may return fewer bytes anyway. */
#define GETRANDOM_MAX 33554431u

/* Keys (ndlog.h): the kind in the top byte, details below. */
enum {
	KEY_CLOCK = 1 << 24,     /* | the clock id, for ids 0..15; 0xffff: any other */
	KEY_CPUCLOCK = 2 << 24,  /* | task number << 3 | thread bit | which */
	KEY_GETTIMEOFDAY = 3 << 24,
	KEY_TIME = 4 << 24,
	KEY_GETRANDOM = 5 << 24,
	KEY_URANDOM = 6 << 24,
	KEY_RANDOM = 7 << 24,
	KEY_AT_RANDOM = 8 << 24,
	KEY_WALL_THREAD = 9 << 24, /* | which << 22 | thread number: a server's wall clocks */
};
/* KEY_WALL_THREAD's calls. */
enum { WALL_REALTIME, WALL_REALTIME_COARSE, WALL_GETTIMEOFDAY, WALL_TIME };
/* Keystream domains (chacha.h): one per source of random bytes. */
enum { DOMAIN_GETRANDOM = 1, DOMAIN_URANDOM = 2, DOMAIN_RANDOM = 3, DOMAIN_AT_RANDOM = 4 };

/* CPU-time clocks are keyed by the calling task too (below): the tasks
 * of a replica are numbered in the order of their first CPU-clock read,
 * up to this many; later ones share the last number. */
#define CPU_TASKS 256

/* A process traced to its exec (one whose next image lacks libdiehard):
 * the thread that called it, and its process (whose id the exec stop
 * reports when another thread made the call). */
struct traced {
	pid_t pid, tgid;
	unsigned slot;
	struct traced *next;
};

struct vreplica {
	struct virt *V;
	unsigned index;       /* the slot */
	bool used;            /* a process was attached */
	bool reported;        /* its call counts are in the report */
	int fd;               /* the listener; -1 once closed */
	uint64_t gen;         /* which attach made it (virt_resume) */
	struct event *ev;
	uint64_t unvirtualized;
	uint64_t images_stopped; /* new images diehard patched (stopped) */
	uint64_t images_grafted; /* of those, given the clock blob (graft.h) */
	uint64_t opens_checked; /* opens we looked at that were no random device */
	pid_t cpu_task[CPU_TASKS]; /* tids, numbered by first CPU-clock read */
	unsigned ncpu_tasks;
	uint64_t fast_notified; /* reads of the fast path's keys that reached us */
	uint32_t fast_lost;   /* a bit per fast key: behind the log's cap (real values) */
	uint64_t clock_reads; /* wall and monotonic reads answered (but those
				 of the fast path's keys: its page counts them) */
};

struct virt {
	struct sup *S;
	struct ndlog *log;
	struct disputes *disputes;
	struct entropy *entropy;
	struct netcalls *net;     /* a private network's calls */
	uint8_t key[CHACHA_KEY_BYTES];
	struct vreplica *r;
	bool vdso_warned;
	uint64_t attaches;        /* listeners attached so far: their generations */
	uint64_t vdso_fallbacks;  /* leaders' vDSO reads that made a system call */
	uint64_t skipped_sleeps;  /* by replacements catching up */
	uint64_t clock_resyncs;   /* a server's stale clock reads moved to the front */
	uint64_t open_failures;   /* random device opens we could not answer */
	unsigned *random_open;    /* per slot: its random-device pipes alive */
	unsigned random_cap;      /* at most this many per slot (the rest EMFILE) */
	bool cap_said;
	struct fastclock *fast;   /* the in-replica clock path, or NULL */
	struct traced *traced;    /* processes traced to their exec */
	struct event *harvest_ev; /* brings its entries into the log */
	uint64_t fast_damaged;    /* slots turned to notify: damaged counts */
};

/* What a handler decided. */
enum answer { ANSWER, CONTINUE, DROP };

static const char *clock_name(clockid_t id)
{
	static const char *const names[] = {
		"CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID",
		"CLOCK_MONOTONIC_RAW", "CLOCK_REALTIME_COARSE", "CLOCK_MONOTONIC_COARSE", "CLOCK_BOOTTIME",
		"CLOCK_REALTIME_ALARM", "CLOCK_BOOTTIME_ALARM", NULL, "CLOCK_TAI",
	};
	if (id >= 0 && (size_t)id < sizeof names / sizeof names[0] && names[id] != NULL)
		return names[id];
	return NULL;
}

/* The key's name in reports: the call as a user would write it. */
static void key_name(uint32_t key, char *buf, size_t size)
{
	uint32_t detail = key & 0xffffff;
	switch (key & 0xff000000u) {
	case KEY_CLOCK: {
		const char *n = clock_name((clockid_t)detail);
		if (n != NULL)
			snprintf(buf, size, "clock_gettime(%s)", n);
		else if (detail == 0xffff)
			snprintf(buf, size, "clock_gettime(an id past 15)");
		else
			snprintf(buf, size, "clock_gettime(%u)", detail);
		return;
	}
	case KEY_CPUCLOCK: {
		static const char *const which[] = { "prof", "virt", "sched", "?" };
		snprintf(buf, size, "clock_gettime(%s cpu clock, %s, task %u)",
			 detail & CPUCLOCK_PERTHREAD ? "thread" : "process", which[detail & 3], detail >> 3);
		return;
	}
	case KEY_WALL_THREAD: {
		/* Named as the call: the report counts a kind's reads over
		 * every thread (report_counts). */
		static const char *const wall[] = { "clock_gettime(CLOCK_REALTIME)", "clock_gettime(CLOCK_REALTIME_COARSE)",
						    "gettimeofday", "time" };
		snprintf(buf, size, "%s", wall[(detail >> 22) & 3]);
		return;
	}
	case KEY_GETTIMEOFDAY: snprintf(buf, size, "gettimeofday"); return;
	case KEY_TIME: snprintf(buf, size, "time"); return;
	case KEY_GETRANDOM: snprintf(buf, size, "getrandom"); return;
	case KEY_URANDOM: snprintf(buf, size, "open(/dev/urandom)"); return;
	case KEY_RANDOM: snprintf(buf, size, "open(/dev/random)"); return;
	case KEY_AT_RANDOM: snprintf(buf, size, "exec (AT_RANDOM)"); return;
	default: snprintf(buf, size, "key %#x", key); return;
	}
}

/* The number of task tid among replica vr's CPU-clock readers. */
static unsigned cpu_task(struct vreplica *vr, pid_t tid)
{
	for (unsigned i = 0; i < vr->ncpu_tasks; i++)
		if (vr->cpu_task[i] == tid)
			return i;
	if (vr->ncpu_tasks == CPU_TASKS)
		return CPU_TASKS - 1;
	vr->cpu_task[vr->ncpu_tasks] = tid;
	return vr->ncpu_tasks++;
}

/* A clock read's key. A CPU-time clock is one task's (a thread's or a
 * process's) and goes forward for that task only: matched per kind alone,
 * a thread could be handed another's reading, smaller than its last. So
 * the key holds the caller's number too: the n-th read of thread number j
 * matches the n-th read of thread number j in every replica. */
static uint32_t clock_key(struct vreplica *vr, clockid_t id, pid_t tid)
{
	uint32_t which;
	if (id == CLOCK_PROCESS_CPUTIME_ID)
		which = CPUCLOCK_SCHED;
	else if (id == CLOCK_THREAD_CPUTIME_ID)
		which = CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED;
	else if (id < 0)
		which = (uint32_t)id & (CPUCLOCK_PERTHREAD | 3);
	else
		return KEY_CLOCK | (id < 16 ? (uint32_t)id : 0xffff);
	return KEY_CPUCLOCK | cpu_task(vr, tid) << 3 | which;
}

/* A server's wall clocks are matched per thread (the n-th read of thread
 * number j gets the n-th value thread j read in the replica that got there
 * first): a thread that serves a request reads the time for its reply, and
 * matched per thread its reads pair with the sibling threads' reads for the
 * same request, however the threads of a replica interleave. A thread's
 * number is its id inside the replica's own pid namespace (sandbox.c):
 * those follow the order in which threads were created, the same in every
 * replica of a server that starts a thread per connection (connections
 * reach every replica in one order), whatever ids the host gives. Only once
 * the replica listens (net.h): before, a program's reads stay matched in
 * one sequence per kind, as everywhere else. 0 when the number is unknown
 * (no namespace of its own, or the thread is gone): then the one sequence. */
static uint32_t thread_number(pid_t tid)
{
	char buf[2048];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return 0;
	char *line = strstr(buf, "\nNSpid:");
	if (line == NULL)
		return 0;
	line += strlen("\nNSpid:");
	char *end = strchr(line, '\n');
	if (end != NULL)
		*end = '\0';
	/* "host-id [... ns-id]": the last is the replica's own. */
	char *last = strrchr(line, '\t');
	if (last == NULL || last == strchr(line, '\t'))
		return 0;
	unsigned long t = strtoul(last + 1, NULL, 10);
	return t > 0 && t < (1ul << 22) ? (uint32_t)t : 0;
}

static bool thread_key(uint32_t key)
{
	return (key & 0xff000000u) == KEY_WALL_THREAD;
}

/* The key of a wall-clock read: per thread in a replica that listens. */
static uint32_t wall_key(struct vreplica *vr, unsigned which, uint32_t key, pid_t tid)
{
	if (!net_listening(vr->V->S->net, vr->index))
		return key;
	uint32_t t = thread_number(tid);
	return t == 0 ? key : KEY_WALL_THREAD | which << 22 | t;
}

static bool still_waiting(const struct vreplica *vr, uint64_t id)
{
	return ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* ---- the handlers: each fills resp and says what to do with it ---- */

/* Reads the real value of a call, for a leader. */
typedef void real_fn(const struct seccomp_notif *req, struct nd_value *v);

static void call_divergence(struct vreplica *vr, uint32_t key, uint64_t index, const char *expected, const char *got)
{
	struct sup *S = vr->V->S;
	char name[64];
	key_name(key, name, sizeof name);
	unsigned id = S->r[vr->index].id;
	log_event("call divergence: replica %u, %s #%" PRIu64 ": %s, the majority's: %s", id, name, index, got,
		  expected);
	report_call_divergence(S->report, id, name, index, expected, got, sup_now() - S->t_start);
}

/* A call's argument (ndlog.h), for people. */
static void describe_arg(uint32_t key, uint64_t arg, char *buf, size_t size)
{
	if (key == KEY_GETRANDOM)
		snprintf(buf, size, "%" PRIu64 " bytes, flags %#" PRIx64, arg & 0xffffffffu, arg >> 32);
	else
		snprintf(buf, size, "flags %#" PRIx64, arg);
}

/* The replicas that may still make calls: in the vote and not exited. */
static uint64_t still_calling(const struct sup *S)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		if (S->r[i].live && !S->r[i].exited)
			m |= (uint64_t)1 << i;
	return m;
}

static void on_odd(void *ctx, unsigned r, uint32_t key, uint64_t index, uint64_t expected, uint64_t got)
{
	struct virt *V = ctx;
	char e[64], g[64];
	describe_arg(key, expected, e, sizeof e);
	describe_arg(key, got, g, sizeof g);
	call_divergence(&V->r[r], key, index, e, g);
}

static void real_clock_of(const struct seccomp_notif *req, struct nd_value *v);
static void real_gettimeofday(const struct seccomp_notif *req, struct nd_value *v);
static void real_time(const struct seccomp_notif *req, struct nd_value *v);

/* A followed wall or monotonic clock value older than this, in a server
 * (its replicas listen: net.h), is stale: an event loop's clock reads, one
 * per iteration, drift apart in count between replicas. */
#define STALE_NS 10000000LL
/* A thread's wall clock (KEY_WALL_THREAD) drifts that way only once it
 * has read many times (a loop); before, a follower lags its sibling
 * thread by no more than scheduling, tens of milliseconds under load, and
 * is stale only past a second. */
#define STALE_FAR_NS 1000000000LL
#define LOOP_READS 256

static bool wall_or_monotonic(uint32_t key)
{
	uint32_t kind = key & 0xff000000u;
	return kind == KEY_CLOCK || kind == KEY_GETTIMEOFDAY || kind == KEY_TIME || kind == KEY_WALL_THREAD;
}

static bool stale(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, uint64_t index,
		  const struct nd_value *v)
{
	uint32_t kind = key & 0xff000000u;
	int64_t limit = STALE_NS;
	if (kind == KEY_WALL_THREAD) {
		unsigned which = (key >> 22) & 3;
		kind = which == WALL_GETTIMEOFDAY ? KEY_GETTIMEOFDAY : which == WALL_TIME ? KEY_TIME : KEY_CLOCK;
		if (index < LOOP_READS)
			limit = STALE_FAR_NS;
	}
	struct sup *S = vr->V->S;
	if ((kind != KEY_CLOCK && kind != KEY_GETTIMEOFDAY && kind != KEY_TIME) || v->err != 0 ||
	    !net_serving(S->net) || replace_replaying(S, &S->r[vr->index]) || !net_joined(S->net, vr->index))
		return false;
	struct nd_value now;
	if (kind == KEY_CLOCK)
		real_clock_of(req, &now);
	else if (kind == KEY_GETTIMEOFDAY)
		real_gettimeofday(req, &now);
	else
		real_time(req, &now);
	int64_t scale = kind == KEY_CLOCK ? 1 : kind == KEY_GETTIMEOFDAY ? 1000 : 0;
	int64_t dt = (now.a - v->a) * 1000000000LL + (now.b - v->b) * scale;
	/* An event loop's follower is not handed a second that has ended:
	 * servers print times to the second (HTTP Date), and one that went on
	 * reading the old second for 10 ms would answer a burst of requests
	 * with it while its siblings have turned. A thread's reads keep their
	 * sibling's value across the turn: they pair request by request. */
	if (limit == STALE_NS && now.a != v->a)
		return true;
	return dt > limit;
}

/* ---- the fast clock path's keys (fastclock.h) ---- */

/* The fast path's key of a log key, or -1 when it serves none. */
static int fast_key(const struct virt *V, uint32_t key)
{
	if (V->fast == NULL)
		return -1;
	if (key == KEY_GETTIMEOFDAY)
		return CP_KEY_GETTIMEOFDAY;
	if (key == KEY_TIME)
		return CP_KEY_TIME;
	uint32_t id = key & 0xffffff;
	if ((key & 0xff000000u) == KEY_CLOCK && id < CP_KEY_GETTIMEOFDAY && cp_served(id))
		return (int)id;
	return -1;
}

static uint32_t log_key(unsigned fk)
{
	return fk == CP_KEY_GETTIMEOFDAY ? (uint32_t)KEY_GETTIMEOFDAY : fk == CP_KEY_TIME ? (uint32_t)KEY_TIME : KEY_CLOCK | fk;
}

/* A harvested or settled entry joins the log under its own number. */
static void fast_put(unsigned fk, uint64_t n, const struct cp_value *cv, unsigned by, void *arg)
{
	(void)n;
	(void)by;
	struct virt *V = arg;
	struct nd_value v = { .a = cv->a, .b = cv->b, .c = cv->c, .d = cv->d };
	if (ndlog_preload(V->log, log_key(fk), 0, &v) != 0)
		fatal(EXIT_INTERNAL, "out of memory in the nondeterminism log");
}

/* Replicas whose entries failed their clock's bounds, or whose proposals
 * stalled the others again and again, are killed (outside any handler of
 * theirs: the caller is done with its notification). */
static void fast_kill_forged(struct virt *V)
{
	if (V->fast == NULL)
		return;
	uint64_t forged = fastclock_forged(V->fast), stalled = fastclock_stalled(V->fast);
	for (unsigned i = 0; i < V->S->nslots; i++)
		if (forged >> i & 1) {
			unsigned fk;
			uint64_t n;
			fastclock_forged_entry(V->fast, i, &fk, &n);
			log_warn("replica %u published a clock value its clock cannot have had: killed",
				 V->S->r[i].id);
			call_divergence(&V->r[i], log_key(fk), n, "a value within the clock's bounds",
					"a value outside them (forged)");
			replica_kill(V->S, &V->S->r[i], "forged a clock value in the shared clock log");
		} else if ((stalled >> i & 1) && !V->S->r[i].killed) {
			log_warn("replica %u kept proposing clock entries it never published: killed", V->S->r[i].id);
			replica_kill(V->S, &V->S->r[i], "stalled the others' clock reads (entries proposed, never published)");
		}
}

/* Brings every published entry into the log and moves each live replica's
 * position there to its first read not done (so entries everyone passed
 * go): a read counted in the page but not done may still be on its way
 * here (a fallback asking for its entry, behind its siblings' reads). */
static void fast_harvest(struct virt *V)
{
	fastclock_harvest(V->fast, fast_put, V);
	fastclock_pace(V->fast, still_calling(V->S), sup_now());
	for (unsigned fk = 0; fk < CP_KEYS; fk++)
		if (cp_served(fk))
			for (unsigned i = 0; i < V->S->nslots; i++) {
				uint64_t c = fastclock_count(V->fast, i, fk);
				if (V->r[i].used)
					ndlog_seek(V->log, i, log_key(fk), fastclock_floor(V->fast, i, fk, c));
			}
}

/* Harvests, then comes again when the replicas will have filled about a
 * quarter of a ring at the rate they just read (fastclock_harvest_delay). */
static void on_harvest(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct virt *V = arg;
	fast_harvest(V);
	fast_kill_forged(V);
	/* The loop's cached time is from before this round's work (a harvest
	 * may take a millisecond): the next one counts from now. */
	if (event_base_update_cache_time(V->S->base) != 0)
		fatal(EXIT_INTERNAL, "cannot read the event loop's time");
	uint64_t us = fastclock_harvest_delay(V->fast, sup_now());
	struct timeval next = { .tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000) };
	if (event_add(V->harvest_ev, &next) != 0)
		fatal(EXIT_INTERNAL, "cannot create timers");
}

/* Slot i's next index of fk once its count is moved to the front. The
 * count is read back from its page, which the replica may be writing over
 * at that moment: a count still too far gets the front itself, so that
 * nothing a page says sends diehard settling far past the log. */
static uint64_t fast_from_front(struct fastclock *F, unsigned i, unsigned fk)
{
	fastclock_to_front(F, i, fk);
	uint64_t n = fastclock_index(F, i, fk, NULL);
	return fastclock_too_far(F, i, fk, n) ? fastclock_harvested(F, fk) : n;
}

/* A notified read of a fast-path key: the fallback of a replica's fast
 * path (asked: the entry it wants), or a read that did not go through it
 * (a static program, a process before the library set up, a slot the path
 * is off for). Either way its index comes from the slot's page, so both
 * paths number reads alike; an entry already in the log is answered from
 * it, a later one settled (every entry up to it, in order: adopting what a
 * replica published, leading the rest). */
static int take_fast(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, unsigned fk,
		     const uint64_t *asked, real_fn *real, struct nd_value *v, uint64_t *index)
{
	struct virt *V = vr->V;
	struct fastclock *F = V->fast;
	if (net_clocks_aside(V->S->net, vr->index)) {
		/* Its own real values, outside the log (net.h): nor in its
		 * sum, so its sum is not compared at the end. */
		fastclock_unsummed(F, vr->index, fk);
		*index = 0;
		real(req, v);
		return ND_LOST;
	}
	vr->fast_notified++;
	uint64_t n = fastclock_index(F, vr->index, fk, asked);
	if (fastclock_too_far(F, vr->index, fk, n)) {
		/* A damaged count (the replica wrote over its own page): its
		 * reads go the notify way from the front on. */
		bool first = !(V->fast_damaged >> vr->index & 1);
		V->fast_damaged |= 1ull << vr->index;
		fastclock_ignore(F, vr->index);
		for (unsigned k = 0; k < CP_KEYS; k++)
			if (cp_served(k) && k != fk)
				fastclock_to_front(F, vr->index, k);
		n = fast_from_front(F, vr->index, fk);
		if (first) {
			/* A memory error of the replica's, however little of
			 * what it read the damage changed: a divergence. */
			call_divergence(vr, log_key(fk), n, "a count within the log",
					"a count far past it (its page of the clock log written over)");
			log_warn("replica %u: its clock log page is damaged: its clock reads are notified from now on",
				 V->S->r[vr->index].id);
		}
	}
	fast_harvest(V);
	int outcome = ND_FOLLOW;
	/* Whatever the answer, the read is marked done with it before we
	 * return (fastclock_done): it will not ask again (the log need not
	 * keep its entry for it), and the value's term joins the slot's sum
	 * (none for a real value of its own: those slots' sums are not
	 * compared). */
	if (vr->fast_lost >> fk & 1) {
		*index = n;
		real(req, v);
		fastclock_done(F, vr->index, fk, n, NULL);
		return ND_LOST;
	}
	if (n < fastclock_harvested(F, fk)) {
		if (!ndlog_value(V->log, key, n, v)) {
			/* Dropped from the log (the cap): as on the notify path,
			 * the replica reads real values of that clock from now
			 * on, every read asked here (the rings' entries, older
			 * than what it just read, would take it back). */
			vr->fast_lost |= 1u << fk;
			fastclock_off(F, vr->index);
			real(req, v);
			*index = n;
			fastclock_done(F, vr->index, fk, n, NULL);
			return ND_LOST;
		} else if (stale(vr, req, key, n, v)) {
			V->clock_resyncs++;
			n = fast_from_front(F, vr->index, fk);
		}
	}
	if (n >= fastclock_harvested(F, fk) && fastclock_beyond(F, vr->index, fk, n)) {
		/* Far ahead of its siblings (a thread of it polling the clock):
		 * a real value of its own, outside the log and its sum. */
		real(req, v);
		*index = n;
		fastclock_done(F, vr->index, fk, n, NULL);
		return ND_LOST;
	}
	if (n >= fastclock_harvested(F, fk)) {
		outcome = ND_LEAD;
		if (fastclock_settle(F, fk, n, fast_put, V) != 0 || !ndlog_value(V->log, key, n, v)) {
			real(req, v); /* the clock cannot be read: its error */
			*index = n;
			fastclock_done(F, vr->index, fk, n, NULL);
			return ND_LOST;
		}
	}
	/* The slot's sum covers every value it consumed, whichever path. */
	struct cp_value cv = { .a = v->a, .b = v->b, .c = v->c, .d = v->d };
	fastclock_done(F, vr->index, fk, n, &cv);
	*index = n;
	return outcome;
}

/* Takes replica vr's next entry of key: a follower gets the log's value, a
 * leader (or a replica lost behind the cap) reads it with real(). */
static int take(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, uint64_t arg, real_fn *real,
		struct nd_value *v, uint64_t *index)
{
	struct virt *V = vr->V;
	uint64_t expected;
	int fk = fast_key(V, key);
	if (fk >= 0) {
		/* The fallback marker and index follow the call's own arguments. */
		unsigned at = req->data.nr == SYS_time ? 1 : 2;
		uint64_t asked = req->data.args[at + 1];
		bool asks = fastclock_asks(V->fast, req->data.args[at]);
		return take_fast(vr, req, key, (unsigned)fk, asks ? &asked : NULL, real, v, index);
	}
	if (wall_or_monotonic(key)) {
		vr->clock_reads++;
		if (net_clocks_aside(V->S->net, vr->index)) {
			*index = 0;
			real(req, v);
			return ND_LOST;
		}
	}
	int outcome = ndlog_take(V->log, vr->index, key, arg, index, v, &expected);
	if (outcome < 0)
		fatal(EXIT_INTERNAL, "out of memory in the nondeterminism log");
	if (outcome == ND_FOLLOW && stale(vr, req, key, *index, v)) {
		/* A server's replicas make different numbers of clock reads
		 * (event loops iterate differently): the n-th value would
		 * grow older and older. Its reads join the front instead. */
		ndlog_to_front_key(V->log, vr->index, key);
		V->clock_resyncs++;
		outcome = ndlog_take(V->log, vr->index, key, arg, index, v, &expected);
		if (outcome < 0)
			fatal(EXIT_INTERNAL, "out of memory in the nondeterminism log");
	}
	if (outcome == ND_LEAD || outcome == ND_LOST)
		real(req, v);
	if (outcome == ND_LEAD) {
		/* A CPU-time clock's readings come from whichever replica leads
		 * each entry, and replicas use CPU at different rates: never
		 * less than the entry before, so each task's clock goes on. */
		const struct nd_value *last = ndlog_last(V->log, key);
		if ((key & 0xff000000u) == KEY_CPUCLOCK && last != NULL && !v->err && !last->err &&
		    (v->a < last->a || (v->a == last->a && v->b < last->b)))
			*v = *last;
		ndlog_put(V->log, vr->index, key, v);
	}
	if (outcome == ND_MISMATCH) {
		/* Who is odd is for the majority to say, once all have made it. */
		uint64_t made = 0;
		for (unsigned j = 0; j < V->S->nslots; j++)
			if (j != vr->index && ndlog_count(V->log, j, key) > *index)
				made |= (uint64_t)1 << j;
		disputes_open(V->disputes, key, *index, expected, made, vr->index, arg);
	} else if (outcome == ND_FOLLOW) {
		disputes_note(V->disputes, key, *index, vr->index, arg);
	}
	if (disputes_pending(V->disputes))
		disputes_settle(V->disputes, still_calling(V->S), false);
	return outcome;
}

/* What to do after writing into the caller: answer, or give up on it. */
static enum answer after_write(struct vreplica *vr, const struct seccomp_notif *req, int err,
			       struct seccomp_notif_resp *resp)
{
	if (err == -EPERM || err == -EACCES) {
		/* We may not write into it: the kernel answers, for real. */
		vr->unvirtualized++;
		return CONTINUE;
	}
	if (err == -ESRCH || !still_waiting(vr, req->id))
		return DROP;
	if (err != 0)
		resp->error = err;
	return ANSWER;
}

static void real_clock_of(const struct seccomp_notif *req, struct nd_value *v)
{
	realclock_read((clockid_t)(int32_t)req->data.args[0], (pid_t)req->pid, v);
}

static enum answer on_clock_gettime(struct vreplica *vr, const struct seccomp_notif *req,
				    struct seccomp_notif_resp *resp)
{
	clockid_t id = (clockid_t)(int32_t)req->data.args[0];
	if (vr->V->fast != NULL && vdso_real_fallback((pid_t)req->pid, req->data.instruction_pointer)) {
		/* A leader's real read through the vDSO, which made the
		 * system call itself (a clock source it cannot read): it
		 * is the real read, in the middle of the leader's claim.
		 * Leaders make the (marked) system call from now on. */
		vr->V->vdso_fallbacks++;
		if (!fastclock_is_real_by_syscall(vr->V->fast)) {
			fastclock_real_by_syscall(vr->V->fast);
			log_event("the vDSO's clock_gettime makes system calls here (its clock source): the fast "
				  "path's leaders read the real clock by system call");
		}
		return CONTINUE;
	}
	if (!realclock_readable(id)) {
		vr->unvirtualized++; /* a dynamic POSIX clock: the caller's fd */
		return CONTINUE;
	}
	struct nd_value v;
	uint64_t index;
	uint32_t key = clock_key(vr, id, (pid_t)req->pid);
	if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
		key = wall_key(vr, id == CLOCK_REALTIME ? WALL_REALTIME : WALL_REALTIME_COARSE, key, (pid_t)req->pid);
	take(vr, req, key, 0, real_clock_of, &v, &index);
	if (v.err) {
		resp->error = -v.err;
		return ANSWER;
	}
	struct timespec ts = { .tv_sec = v.a, .tv_nsec = v.b };
	return after_write(vr, req, remote_write_all((pid_t)req->pid, req->data.args[1], &ts, sizeof ts), resp);
}

static void real_gettimeofday(const struct seccomp_notif *req, struct nd_value *v)
{
	(void)req;
	struct timeval tv;
	struct timezone tz;
	*v = (struct nd_value){ 0 };
	/* The system call itself: it also gives the kernel's timezone. */
	if (syscall(SYS_gettimeofday, &tv, &tz) != 0) {
		v->err = errno;
		return;
	}
	*v = (struct nd_value){ .a = tv.tv_sec, .b = tv.tv_usec, .c = tz.tz_minuteswest, .d = tz.tz_dsttime };
}

static enum answer on_gettimeofday(struct vreplica *vr, const struct seccomp_notif *req,
				   struct seccomp_notif_resp *resp)
{
	struct nd_value v;
	uint64_t index;
	take(vr, req, wall_key(vr, WALL_GETTIMEOFDAY, KEY_GETTIMEOFDAY, (pid_t)req->pid), 0, real_gettimeofday, &v, &index);
	if (v.err) {
		resp->error = -v.err;
		return ANSWER;
	}
	int err = 0;
	if (req->data.args[0] != 0) {
		struct timeval tv = { .tv_sec = v.a, .tv_usec = v.b };
		err = remote_write_all((pid_t)req->pid, req->data.args[0], &tv, sizeof tv);
	}
	if (err == 0 && req->data.args[1] != 0) {
		struct timezone tz = { .tz_minuteswest = v.c, .tz_dsttime = v.d };
		err = remote_write_all((pid_t)req->pid, req->data.args[1], &tz, sizeof tz);
	}
	return after_write(vr, req, err, resp);
}

static void real_time(const struct seccomp_notif *req, struct nd_value *v)
{
	(void)req;
	*v = (struct nd_value){ .a = (int64_t)syscall(SYS_time, NULL) };
}

static enum answer on_time(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	struct nd_value v;
	uint64_t index;
	take(vr, req, wall_key(vr, WALL_TIME, KEY_TIME, (pid_t)req->pid), 0, real_time, &v, &index);
	int err = 0;
	if (req->data.args[0] != 0) {
		int64_t t = v.a;
		err = remote_write_all((pid_t)req->pid, req->data.args[0], &t, sizeof t);
	}
	resp->val = v.a;
	return after_write(vr, req, err, resp);
}

/* getrandom's bytes are the keystream numbered by the call's index: no real
 * value to read, nothing to record but the size and flags. */
static void no_real_value(const struct seccomp_notif *req, struct nd_value *v)
{
	(void)req;
	*v = (struct nd_value){ 0 };
}

static enum answer on_getrandom(struct vreplica *vr, const struct seccomp_notif *req,
				struct seccomp_notif_resp *resp)
{
	uint64_t addr = req->data.args[0];
	uint64_t len = req->data.args[1];
	unsigned flags = (unsigned)req->data.args[2];
	if ((flags & ~(unsigned)(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE)) != 0 ||
	    (flags & (GRND_RANDOM | GRND_INSECURE)) == (GRND_RANDOM | GRND_INSECURE)) {
		resp->error = -EINVAL;
		return ANSWER;
	}
	if (len > GETRANDOM_MAX)
		len = GETRANDOM_MAX;
	struct nd_value v;
	uint64_t index;
	/* GRND_NONBLOCK and GRND_RANDOM change nothing once the kernel's pool
	 * is ready (it always is by the time a program runs), but a replica
	 * passing other flags than its siblings is behaving differently. */
	take(vr, req, KEY_GETRANDOM, len | (uint64_t)flags << 32, no_real_value, &v, &index);
	struct chacha cc;
	chacha_init_stream(&cc, vr->V->key, DOMAIN_GETRANDOM, index);
	uint8_t buf[16384];
	uint64_t done = 0;
	int err = 0;
	while (done < len) {
		size_t n = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
		chacha_read(&cc, buf, n);
		ssize_t w = remote_write((pid_t)req->pid, addr + done, buf, n);
		if (w < 0)
			err = (int)w;
		else
			done += (uint64_t)w;
		if (w != (ssize_t)n)
			break;
	}
	/* Like the kernel: a fault after some bytes returns how many. */
	if (err == -EFAULT || done > 0)
		err = done > 0 ? 0 : -EFAULT;
	resp->val = (int64_t)done;
	return after_write(vr, req, err, resp);
}

/* Which random device path (as the caller sees it) names, if any: a path
 * whose last part is urandom or random (the cheap test, made first), and
 * whose device number says so, so relative paths and links named so count
 * too. */
static uint32_t random_device(pid_t tid, int dirfd, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strcmp(base, "urandom") != 0 && strcmp(base, "random") != 0)
		return 0;
	char full[4200];
	if (path[0] == '/')
		snprintf(full, sizeof full, "/proc/%d/root%s", (int)tid, path);
	else if (dirfd == AT_FDCWD)
		snprintf(full, sizeof full, "/proc/%d/cwd/%s", (int)tid, path);
	else
		snprintf(full, sizeof full, "/proc/%d/fd/%d/%s", (int)tid, dirfd, path);
	struct stat st;
	if (stat(full, &st) != 0 || !S_ISCHR(st.st_mode))
		return 0;
	if (st.st_rdev == makedev(1, 9))
		return KEY_URANDOM;
	if (st.st_rdev == makedev(1, 8))
		return KEY_RANDOM;
	return 0;
}

static enum answer on_open(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	bool at = req->data.nr == SYS_openat;
	int dirfd = at ? (int)(int32_t)req->data.args[0] : AT_FDCWD;
	int flags = (int)req->data.args[at ? 2 : 1];
	/* A file opened to append to: voted as a stream (files/logs.h). */
	if ((flags & O_APPEND) && (flags & O_ACCMODE) != O_RDONLY)
		files_appending(vr->V->S, vr->index, (pid_t)req->pid);
	/* A file made anew: a daemon's pid file, maybe (files/pidfile.h). */
	if ((flags & (O_CREAT | O_TRUNC)) == (O_CREAT | O_TRUNC)) {
		char made[4096];
		if (remote_read_string((pid_t)req->pid, req->data.args[at ? 1 : 0], made, sizeof made) == 0)
			files_creating(vr->V->S, vr->index, (pid_t)req->pid, dirfd, made);
	}
	/* Only plain reads are virtualized; writing to the device (feeding the
	 * kernel's pool) goes on as it would. The filter already leaves such
	 * opens in the kernel; the same mask keeps this handler right alone. */
	if ((flags & FILTER_NOT_A_DEVICE_READ) != 0)
		return CONTINUE;
	char path[4096];
	uint32_t key = 0;
	/* An unreadable path: the kernel will say what is wrong with it. */
	if (remote_read_string((pid_t)req->pid, req->data.args[at ? 1 : 0], path, sizeof path) == 0)
		key = random_device((pid_t)req->pid, dirfd, path);
	if (key == 0) {
		vr->opens_checked++;
		return CONTINUE;
	}
	if (!still_waiting(vr, req->id))
		return DROP;
	struct nd_value v;
	uint64_t index;
	int kept = flags & (O_NONBLOCK | O_CLOEXEC);
	/* A mismatch is reported; the replica still gets the n-th stream. */
	take(vr, req, key, (uint64_t)kept, no_real_value, &v, &index);
	/* Each open holds one of our fds: past a share of our limit, the
	 * program's open fails as if its own limit were reached (at the same
	 * open in every replica that keeps them all open), and diehard keeps
	 * the fds it needs to go on. */
	struct virt *V = vr->V;
	if (V->random_open[vr->index] >= V->random_cap) {
		if (!V->cap_said)
			log_warn("replica %u keeps %u random devices open: further opens fail with EMFILE",
				 V->S->r[vr->index].id, V->random_cap);
		V->cap_said = true;
		resp->error = -EMFILE;
		return still_waiting(vr, req->id) ? ANSWER : DROP;
	}
	int fd = entropy_open(V->entropy, key == KEY_URANDOM ? DOMAIN_URANDOM : DOMAIN_RANDOM, index,
			      (flags & O_NONBLOCK) != 0, &V->random_open[vr->index]);
	if (fd < 0) {
		/* Said once a run (a replica opening thousands of them would
		 * flood stderr): the rest are counted, in the report too. */
		if (vr->V->open_failures++ == 0)
			log_warn("cannot virtualize an open of /dev/%s: %s (it reads the real device; further "
				 "such opens are counted, not said)",
				 key == KEY_URANDOM ? "urandom" : "random", strerror(errno));
		vr->unvirtualized++;
		return CONTINUE;
	}
	/* Installs the fd and answers with its number, in one step. With
	 * signals blocked: the kernel marks the call answered before it waits
	 * for the fd to be installed, so a signal (a replica's SIGCHLD) in
	 * that wait would make the caller's open return 0 with no fd, and the
	 * restarted ioctl fail with ENOENT. */
	struct seccomp_notif_addfd add = { .id = req->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (uint32_t)fd,
					   .newfd = 0, .newfd_flags = (uint32_t)(flags & O_CLOEXEC) };
	sigset_t all, old;
	sigfillset(&all);
	if (sigprocmask(SIG_BLOCK, &all, &old) != 0)
		fatal(EXIT_INTERNAL, "sigprocmask: %s", strerror(errno));
	int added = ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	int add_errno = errno;
	if (sigprocmask(SIG_SETMASK, &old, NULL) != 0)
		fatal(EXIT_INTERNAL, "sigprocmask: %s", strerror(errno));
	errno = add_errno;
	if (added < 0 && errno != ENOENT) {
		/* EMFILE and the like: the caller's error, as the open's. */
		int err = errno;
		close(fd);
		resp->error = -err;
		return still_waiting(vr, req->id) ? ANSWER : DROP;
	}
	close(fd);
	return DROP; /* answered by the ioctl */
}

/* The key of the run's AT_RANDOM bytes (cp_at_random), from the run's key:
 * a replay's images get the recorded run's bytes, whichever path (the
 * replicas' own count in the fast path's pages, or our log's). */
static void images_key(const struct virt *V, uint64_t key[2])
{
	struct chacha cc;
	chacha_init_stream(&cc, V->key, DOMAIN_AT_RANDOM, UINT64_MAX);
	chacha_read(&cc, key, 2 * sizeof key[0]);
}

/* Writes the n-th image's AT_RANDOM bytes at at in the process of mem. */
static void image_random(struct vreplica *vr, int mem, uint64_t at, const struct seccomp_notif *req)
{
	uint8_t bytes[16];
	if (vr->V->fast != NULL) {
		fastclock_at_random(vr->V->fast, vr->index, bytes);
	} else { /* stopped by arch_prctl: tracing is the fast path's */
		struct nd_value v;
		uint64_t index;
		take(vr, req, KEY_AT_RANDOM, 0, no_real_value, &v, &index);
		uint64_t key[2];
		images_key(vr->V, key);
		cp_at_random(key, index, bytes);
	}
	if (pwrite(mem, bytes, sizeof bytes, (off_t)at) != (ssize_t)sizeof bytes)
		vr->unvirtualized++;
}

/* A descriptor number process tid does not use, just above the clock
 * descriptors' own (FASTCLOCK_FD, FASTCLOCK_DIR_FD) and past `after`, or
 * -1. It is stopped in a notification: nothing opens one meanwhile. */
static int unused_fd(pid_t tid, int after)
{
	for (int fd = after + 1; fd < FASTCLOCK_FD + 24; fd++) {
		char path[64];
		struct stat st;
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
		if (lstat(path, &st) != 0 && errno == ENOENT)
			return fd;
	}
	return -1;
}

/* Puts our descriptor src into the process of notification id at number
 * at (close-on-exec): its number there, or -1. */
static int add_fd(const struct vreplica *vr, uint64_t id, int src, int at)
{
	struct seccomp_notif_addfd add = { .id = id, .flags = SECCOMP_ADDFD_FLAG_SETFD, .srcfd = (uint32_t)src,
					   .newfd = (uint32_t)at, .newfd_flags = O_CLOEXEC };
	int fd = -1;
	while (at >= 0 && (fd = ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add)) < 0 && errno == EINTR)
		; /* a signal in the wait leaves nothing installed */
	return fd;
}

/* What a graft of slot vr's needs but the descriptor. */
static struct graft_region region_for(const struct vreplica *vr)
{
	struct virt *V = vr->V;
	struct graft_region g = { .fd = -1, .dir = -1, .nslots = V->S->nslots, .slot = vr->index,
				  .secret = fastclock_secret(V->fast), .mark_exec = fastclock_exec_mark(V->fast) };
	fastclock_marks(V->fast, &g.mark_real, &g.mark_fallback);
	return g;
}

static void graft_image(struct vreplica *vr, pid_t tid, int mem, uint64_t base, const struct graft_region *g,
			bool at_exec)
{
	const char *why = NULL;
	if (graft_clocks(tid, mem, base, g, at_exec, &why) != 0)
		vr->images_grafted++;
	else
		log_event("replica %u: no clock blob for pid %d (%s): its clock reads go to diehard",
			  vr->V->S->r[vr->index].id, (int)tid, why);
}

/* A new image without libdiehard, its vDSO patched with system calls,
 * stopped in its first arch_prctl (req): answered here, then given the
 * clock blob (graft.h) if it can be. DROP: answered. */
static enum answer image_graft(struct vreplica *vr, pid_t tid, int mem, uint64_t base,
			       const struct seccomp_notif *req)
{
	struct virt *V = vr->V;
	struct graft_region g = region_for(vr);
	if (!graft_seize(tid))
		return CONTINUE; /* no tracing here: the notify path */
	/* The page's and the directory's descriptors, into the process
	 * (close-on-exec; the graft closes them before the process runs on),
	 * at numbers it does not use above the clock descriptors' own: a graft
	 * cut short by a signal leaves them open, and there they shift none of
	 * the numbers the program's own files get. No such numbers (an fd
	 * limit below them): no graft. */
	g.fd = add_fd(vr, req->id, fastclock_fd(V->fast, vr->index), unused_fd(tid, FASTCLOCK_DIR_FD));
	if (g.fd >= 0)
		g.dir = add_fd(vr, req->id, fastclock_dir(V->fast), unused_fd(tid, g.fd));
	/* Stopped as the call returns (graft.h), answered, grafted (with no
	 * descriptor: only let go). */
	bool interrupted = graft_interrupt(tid);
	struct seccomp_notif_resp resp = { .id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
	if (ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 || !interrupted)
		return DROP; /* gone (ENOENT) */
	graft_image(vr, tid, mem, base, &g, false);
	return DROP;
}

/* Whether the process's descriptor fd is the same file as ours. */
static bool same_file(pid_t tid, int fd, int ours)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
	return fstat(ours, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* An image stopped at its exec (started without libdiehard): given the
 * clock blob with the descriptors it inherited (FASTCLOCK_FD and
 * FASTCLOCK_DIR_FD), if it still has them (then it is let go here; else by
 * the caller). */
static void image_graft_at_exec(struct vreplica *vr, pid_t tid, int mem, uint64_t base)
{
	struct virt *V = vr->V;
	if (!same_file(tid, FASTCLOCK_FD, fastclock_fd(V->fast, vr->index)) ||
	    !same_file(tid, FASTCLOCK_DIR_FD, fastclock_dir(V->fast)))
		return; /* closed, or other files there: the notify path */
	struct graft_region g = region_for(vr);
	g.fd = FASTCLOCK_FD;
	g.dir = FASTCLOCK_DIR_FD;
	g.own_fd = true;
	graft_image(vr, tid, mem, base, &g, true);
}

/* Patches the new image of process tid (its vDSO: jumps where it maps
 * libdiehard, found from near, an address in its loader; else into the
 * clock blob grafted in, or system calls) and writes its AT_RANDOM bytes;
 * req: the arch_prctl notification it is stopped in (checked still
 * pending once the process is pinned), or NULL when it is stopped by
 * ptrace. */
static enum answer image_patch(struct vreplica *vr, pid_t tid, uint64_t near, const struct seccomp_notif *req)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)tid);
	int mem = open(path, O_RDWR | O_CLOEXEC);
	uint64_t base = 0, at_random = 0;
	int err = mem < 0 ? -errno : vdso_auxv(tid, &base, &at_random);
	/* The open file pins the process the id check vouches for. */
	if (req != NULL && !still_waiting(vr, req->id)) {
		if (mem >= 0)
			close(mem);
		return DROP;
	}
	enum answer answer = CONTINUE;
	if (err == 0 && !vdso_patched(mem, base)) {
		uint64_t lib = vr->V->fast != NULL ? vdso_library(tid, near) : 0;
		err = vdso_patch(mem, base, lib, 0);
		if (err == 1) {
			vr->images_stopped++;
			if (at_random != 0)
				image_random(vr, mem, at_random, req);
			if (lib == 0 && vr->V->fast != NULL && req != NULL)
				answer = image_graft(vr, tid, mem, base, req);
			else if (lib == 0 && vr->V->fast != NULL)
				image_graft_at_exec(vr, tid, mem, base);
		}
	}
	if (err < 0) {
		vr->unvirtualized++;
		if (!vr->V->vdso_warned) {
			vr->V->vdso_warned = true;
			log_warn("cannot patch the vDSO of pid %d: %s; its clock reads stay real and may differ "
				 "between replicas", (int)tid, strerror(-err));
		}
	}
	if (mem >= 0)
		close(mem);
	return answer;
}

/* A new program image's first arch_prctl: its vDSO is patched, and its
 * AT_RANDOM bytes (the kernel's 16 random bytes for each exec, which seed
 * glibc's stack canary and pointer guard and Go's start-up state) become
 * the n-th image's bytes of the run's stream, as in every replica. */
static enum answer on_arch_prctl(struct vreplica *vr, const struct seccomp_notif *req)
{
	return image_patch(vr, (pid_t)req->pid, req->data.instruction_pointer, req);
}

bool virt_traced(struct virt *V, pid_t pid, int wstatus)
{
	struct traced **pp = &V->traced;
	while (*pp != NULL && (*pp)->pid != pid && !(WIFSTOPPED(wstatus) && (*pp)->tgid == pid))
		pp = &(*pp)->next;
	struct traced *t = *pp;
	if (t == NULL)
		return false;
	if (!WIFSTOPPED(wstatus)) {
		/* Gone before its exec: the loop goes on with it (its own
		 * parent reaps it, unless that is us). */
		*pp = t->next;
		free(t);
		return false;
	}
	int event = wstatus >> 16;
	if (event == PTRACE_EVENT_EXEC) {
		(void)image_patch(&V->r[t->slot], pid, 0, NULL);
		(void)ptrace(PTRACE_DETACH, pid, 0, 0);
		*pp = t->next;
		free(t);
	} else if (event == PTRACE_EVENT_STOP) {
		(void)ptrace(PTRACE_LISTEN, pid, 0, 0);
	} else {
		/* A signal on its way to it: delivered as if untraced. */
		(void)ptrace(PTRACE_CONT, pid, 0, (void *)(uintptr_t)WSTOPSIG(wstatus));
	}
	return true;
}

/* A relative sleep: a replacement still replaying the run goes as fast as
 * it can (its clock reads return the logged times anyway); everyone else
 * sleeps in the kernel. */
static enum answer on_sleep(struct vreplica *vr, struct seccomp_notif_resp *resp)
{
	if (!replace_replaying(vr->V->S, &vr->V->S->r[vr->index]))
		return CONTINUE;
	vr->V->skipped_sleeps++;
	resp->val = 0;
	return ANSWER;
}

/* A private network's listen, connect and UDP socket (netcalls.h). */
static enum answer on_net(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	enum netcall o = netcalls_handle(vr->V->net, vr->fd, vr->index, req, resp);
	/* A replica that listens is a server: its wall clocks are matched
	 * per thread and its clocks resynchronised (take), which the fast
	 * path cannot do in the replica. */
	if (vr->V->fast != NULL && net_listening(vr->V->S->net, vr->index))
		fastclock_off(vr->V->fast, vr->index);
	switch (o) {
	case NETCALL_ANSWER: return ANSWER;
	case NETCALL_DROP: return DROP;
	case NETCALL_CONTINUE: break;
	}
	return CONTINUE;
}

/* Whether the environment at envp (in pid) preloads the allocator and hands
 * on the run's DIEHARD_CLOCKS (clocks) as it is: the new image patches
 * itself (exec.c's check, made here for an exec it did not see). */
static bool env_keeps_us(pid_t pid, uint64_t envp, const char *allocator, const char *clocks)
{
	struct envkeep k = { false, false };
	size_t alen = strlen(allocator);
	for (unsigned i = 0; i < 4096; i++) {
		uint64_t p;
		if (remote_read_all(pid, envp + 8 * (uint64_t)i, &p, sizeof p) != 0 || p == 0)
			break;
		char buf[4096];
		int err = remote_read_string(pid, p, buf, sizeof buf);
		if (err != 0 && err != -ENAMETOOLONG)
			continue;
		buf[sizeof buf - 1] = '\0';
		envkeep_entry(&k, buf, allocator, alen, clocks);
	}
	return envkeep_ok(&k);
}

/* An execve that exec.c's wrapper did not mark: one whose environment
 * keeps libdiehard goes on (its image patches itself); any other process
 * is traced to its exec, where its new image is patched (virt_traced). */
static enum answer on_execve(struct vreplica *vr, const struct seccomp_notif *req)
{
	struct virt *V = vr->V;
	if (V->fast == NULL)
		return CONTINUE;
	bool at = req->data.nr == SYS_execveat;
	pid_t pid = (pid_t)req->pid;
	if (env_keeps_us(pid, req->data.args[at ? 3 : 2], V->S->o->allocator, fastclock_env(V->fast)))
		return CONTINUE;
	for (struct traced *t = V->traced; t != NULL; t = t->next)
		if (t->pid == pid)
			return CONTINUE; /* an earlier try of the same exec (execvp's PATH) */
	pid_t tgid = remote_thread_group(pid);
	if (tgid < 0)
		tgid = pid; /* matched by its own id at the exec stop */
	if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXEC) != 0) {
		vr->unvirtualized++;
		log_warn("replica %u: cannot trace pid %d to its exec (%s): the program it starts without "
			 "libdiehard reads the real clocks", V->S->r[vr->index].id, (int)pid, strerror(errno));
		return CONTINUE;
	}
	struct traced *t = malloc(sizeof *t);
	if (t == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	*t = (struct traced){ .pid = pid, .tgid = tgid, .slot = vr->index, .next = V->traced };
	V->traced = t;
	return CONTINUE;
}

static enum answer dispatch(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	switch (req->data.nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep: return on_sleep(vr, resp);
	case SYS_clock_gettime: return on_clock_gettime(vr, req, resp);
	case SYS_gettimeofday: return on_gettimeofday(vr, req, resp);
	case SYS_time: return on_time(vr, req, resp);
	case SYS_getrandom: return on_getrandom(vr, req, resp);
	case SYS_open:
	case SYS_openat: return on_open(vr, req, resp);
	case SYS_arch_prctl: return on_arch_prctl(vr, req);
	case SYS_execve:
	case SYS_execveat: return on_execve(vr, req);
	case SYS_listen:
	case SYS_connect:
	case SYS_socket: return on_net(vr, req, resp);
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_msync:
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2:
	case SYS_unlink:
	case SYS_unlinkat: return files_point(vr->V->S, vr->index, vr->gen, req) ? DROP : CONTINUE;
	default: return CONTINUE;
	}
}

static void listener_close(struct vreplica *vr)
{
	if (vr->fd < 0)
		return;
	event_free(vr->ev);
	vr->ev = NULL;
	close(vr->fd);
	vr->fd = -1;
}

static void on_notification(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct vreplica *vr = arg;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 0) < 0)
		return;
	if (!(p.revents & POLLIN)) {
		/* Hung up: no process of this replica is left to notify. */
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			listener_close(vr);
		return;
	}
	struct seccomp_notif req;
	memset(&req, 0, sizeof req);
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
		/* ENOENT: the caller died before we got to it. */
		if (errno != EINTR && errno != ENOENT)
			log_warn("replica %u: cannot receive a notification: %s", vr->V->S->r[vr->index].id,
				 strerror(errno));
		return;
	}
	struct seccomp_notif_resp resp = { .id = req.id };
	switch (dispatch(vr, &req, &resp)) {
	case CONTINUE:
		resp = (struct seccomp_notif_resp){ .id = req.id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
		break;
	case DROP:
		return;
	case ANSWER:
		break;
	}
	struct virt *V = vr->V; /* vr may be retired below: the loop goes on */
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
		log_warn("replica %u: cannot answer a notification: %s", V->S->r[vr->index].id, strerror(errno));
	fast_kill_forged(V);
}

/* Why leaders read the real clock by system call when the vDSO's entry
 * cannot be relocated (vdso.h): said in the log and in the report. */
#define NO_VDSO_REAL "the vDSO's clock_gettime cannot be entered past its first instructions"

struct virt *virt_new(struct sup *S)
{
	struct virt *V = calloc(1, sizeof *V);
	if (V == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	V->S = S;
	const struct replay *rp = S->o->replay;
	if (rp != NULL)
		memcpy(V->key, rp->rec->key.data, sizeof V->key);
	else if (getrandom(V->key, sizeof V->key, 0) != (ssize_t)sizeof V->key)
		fatal(EXIT_INTERNAL, "cannot read the run's random key: %s", strerror(errno));
	/* With replacements, entries are kept from the start of the run (up
	 * to --call-log per kind) so that a new replica replays them; so they
	 * are for a recording, and a replay's are the recording's. */
	bool keep = S->o->respawns > 0 || S->o->record || rp != NULL;
	V->log = ndlog_new(S->nslots, rp != NULL ? SIZE_MAX : S->o->call_log, keep);
	if (V->log != NULL)
		ndlog_reclaim(V->log, thread_key); /* threads end: their keys go */
	for (size_t i = 0; rp != NULL && V->log != NULL && i < rp->rec->n_calls; i++) {
		const Diehard__CallLog *cl = rp->rec->calls[i];
		for (size_t j = 0; j < cl->n_calls; j++) {
			const Diehard__Call *c = cl->calls[j];
			struct nd_value v = { .a = c->a, .b = c->b, .c = c->c, .d = c->d, .err = c->err };
			if (ndlog_preload(V->log, cl->key, c->arg, &v) != 0)
				fatal(EXIT_INTERNAL, "out of memory");
		}
	}
	V->disputes = disputes_new(S->nslots, on_odd, V);
	V->entropy = entropy_new(S->base, V->key);
	V->net = netcalls_new(S);
	V->r = calloc(S->nslots, sizeof *V->r);
	V->random_open = calloc(S->nslots, sizeof *V->random_open);
	/* Our fd limit (raised to the hard one), less what the run needs for
	 * itself, shared by the slots; between 16 and 65536 each. */
	rlim_t limit = S->nofile.rlim_max == RLIM_INFINITY ? 1 << 20 : S->nofile.rlim_max;
	rlim_t reserve = 256 + 16 * (rlim_t)S->nslots;
	rlim_t share = limit > reserve ? (limit - reserve) / S->nslots : 0;
	V->random_cap = share < 16 ? 16 : share > 65536 ? 65536 : (unsigned)share;
	if (V->random_open == NULL || V->log == NULL || V->disputes == NULL || V->entropy == NULL || V->r == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned i = 0; i < S->nslots; i++)
		V->r[i] = (struct vreplica){ .V = V, .index = i, .fd = -1 };
	if (vdso_init() != 0)
		log_event("no vDSO clock entry points found: clock calls enter the kernel as they are");
	else if (S->o->fast_clocks && rp == NULL && S->o->call_log < FASTCLOCK_MIN_LOG)
		log_event("fast clock reads: not with --call-log under %u (a read may ask for an entry rings "
			  "back): every clock read is notified", FASTCLOCK_MIN_LOG);
	else if (S->o->fast_clocks && rp == NULL) {
		uint64_t key[2];
		images_key(V, key);
		V->fast = fastclock_new(S->nslots, key, S->o->call_log);
	}
	if (V->fast != NULL) {
		vdso_jump_to(S->o->allocator);
		if (!vdso_real_clock())
			log_event("%s here: the fast path's leaders read the real clock by system call", NO_VDSO_REAL);
		struct timeval first = { .tv_sec = 0, .tv_usec = CP_HARVEST_MIN_US };
		V->harvest_ev = event_new(S->base, -1, 0, on_harvest, V);
		if (V->harvest_ev == NULL || event_add(V->harvest_ev, &first) != 0)
			fatal(EXIT_INTERNAL, "cannot create timers");
	}
	return V;
}

const uint8_t *virt_key(const struct virt *V)
{
	return V->key;
}

struct ndlog *virt_log(const struct virt *V)
{
	return V->log;
}

void virt_clock_marks(const struct virt *V, uint64_t *pass, uint64_t *ask, uint64_t *exec)
{
	*pass = *ask = *exec = 0;
	if (V->fast != NULL) {
		fastclock_marks(V->fast, pass, ask);
		*exec = fastclock_exec_mark(V->fast);
	}
}

int virt_clock_fds(struct virt *V, unsigned i, int *dir)
{
	*dir = -1;
	if (V->fast == NULL)
		return -1;
	fastclock_use(V->fast, i);
	*dir = fastclock_dir(V->fast);
	return fastclock_fd(V->fast, i);
}

char *const *virt_replica_env(struct virt *V, unsigned i)
{
	static char *env[2];
	if (V->fast == NULL)
		return NULL;
	(void)i;
	env[0] = (char *)fastclock_env(V->fast);
	return env;
}

void virt_clocks_now(struct virt *V, unsigned i)
{
	if (V == NULL)
		return;
	ndlog_to_front(V->log, i, wall_or_monotonic);
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++)
		if (cp_served(fk))
			fastclock_to_front(V->fast, i, fk);
}

uint64_t virt_clock_reads(const struct virt *V, unsigned i)
{
	if (V == NULL)
		return 0;
	uint64_t n = V->r[i].clock_reads;
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++)
		if (cp_served(fk))
			n += fastclock_count(V->fast, i, fk);
	return n;
}

/* How many calls of key slot i made: the fast path's keys count in its page. */
static uint64_t calls_of(const struct virt *V, unsigned i, uint32_t key)
{
	int fk = fast_key(V, key);
	return fk >= 0 ? fastclock_count(V->fast, i, (unsigned)fk) : ndlog_count(V->log, i, key);
}

bool virt_replayable(const struct virt *V)
{
	return ndlog_complete(V->log);
}

/* The keys calls were counted under: the log's, and the fast path's
 * (counted in the pages: a key nobody settled yet is not in the log).
 * Returns how many; *keys is malloc'ed. */
static size_t call_keys(const struct virt *V, uint32_t **keys)
{
	size_t nlog = ndlog_keys(V->log, NULL, 0), n = 0;
	*keys = calloc(nlog + CP_KEYS + 1, sizeof **keys);
	if (*keys == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	ndlog_keys(V->log, *keys, nlog);
	for (size_t j = 0; j < nlog; j++)
		if (fast_key(V, (*keys)[j]) < 0)
			(*keys)[n++] = (*keys)[j];
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++) {
		if (!cp_served(fk))
			continue;
		bool any = false;
		for (unsigned i = 0; i < V->S->nslots && !any; i++)
			any = fastclock_count(V->fast, i, fk) != 0;
		if (any)
			(*keys)[n++] = log_key(fk);
	}
	return n;
}

/* The counts of calls slot i's process made, into its report entry. */
static void report_counts(struct virt *V, unsigned i)
{
	struct vreplica *vr = &V->r[i];
	if (!vr->used || vr->reported)
		return;
	vr->reported = true;
	struct sup *S = V->S;
	uint32_t *keys;
	size_t nkeys = call_keys(V, &keys);
	/* A name's count: the sum over its keys (a server's threads). */
	char (*names)[64] = calloc(nkeys ? nkeys : 1, sizeof *names);
	uint64_t *counts = calloc(nkeys ? nkeys : 1, sizeof *counts);
	if (names == NULL || counts == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	size_t n = 0;
	for (size_t j = 0; j < nkeys; j++) {
		char name[64];
		key_name(keys[j], name, sizeof name);
		size_t at = 0;
		while (at < n && strcmp(names[at], name) != 0)
			at++;
		if (at == n)
			memcpy(names[n++], name, sizeof name);
		counts[at] += calls_of(V, i, keys[j]);
	}
	for (size_t j = 0; j < n; j++)
		report_calls(S->report, S->r[i].id, names[j], counts[j]);
	report_unvirtualized(S->report, S->r[i].id, vr->unvirtualized);
	report_images(S->report, S->r[i].id,
		      V->fast != NULL ? fastclock_images(V->fast, i) : calls_of(V, i, KEY_AT_RANDOM), vr->images_stopped,
		      vr->images_grafted);
	report_opens_checked(S->report, S->r[i].id, vr->opens_checked);
	if (V->fast != NULL) {
		uint64_t all = 0;
		for (unsigned fk = 0; fk < CP_KEYS; fk++)
			if (cp_served(fk))
				all += fastclock_count(V->fast, i, fk);
		report_clock_reads_in_replica(S->report, S->r[i].id, all > vr->fast_notified ? all - vr->fast_notified : 0);
	}
	free(names);
	free(counts);
	free(keys);
}

void virt_resume(struct virt *V, unsigned i, uint64_t gen, uint64_t id, int err)
{
	struct vreplica *vr = &V->r[i];
	if (vr->fd < 0 || vr->gen != gen || !still_waiting(vr, id))
		return;
	struct seccomp_notif_resp resp = { .id = id };
	if (err != 0)
		resp.error = -err;
	else
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	if (ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
		log_warn("replica %u: cannot answer a notification: %s", V->S->r[i].id, strerror(errno));
}

void virt_attach(struct virt *V, unsigned i, int listener)
{
	struct vreplica *vr = &V->r[i];
	listener_close(vr);
	bool again = vr->used;
	*vr = (struct vreplica){ .V = V, .index = i, .used = true, .fd = listener, .gen = ++V->attaches };
	/* A new process in a used slot starts from the first call of every
	 * kind: it replays what the log holds. */
	if (again)
		(void)ndlog_restart(V->log, i);
	/* A kernel before 6.6 refuses; it is only slower. */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) != 0)
		log_event("replica %u: synchronous wake-ups refused (%s): notified calls cost more", V->S->r[i].id,
			  strerror(errno));
	vr->ev = event_new(V->S->base, listener, EV_READ | EV_PERSIST, on_notification, vr);
	if (vr->ev == NULL || event_add(vr->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch replica %u's system calls", V->S->r[i].id);
}

void virt_detach(struct virt *V, unsigned i)
{
	report_counts(V, i);
	listener_close(&V->r[i]);
	if (V->fast != NULL) {
		/* What the old process published joins the log before its page
		 * counts from 0 again, for the new one (which replays). */
		fast_harvest(V);
		fastclock_reset(V->fast, i);
		V->fast_damaged &= ~(1ull << i);
	}
}

void virt_retire(struct virt *V, unsigned i, bool killed)
{
	ndlog_retire(V->log, i);
	if (killed)
		listener_close(&V->r[i]);
	report_counts(V, i);
	if (disputes_pending(V->disputes))
		disputes_settle(V->disputes, still_calling(V->S), false);
}

/* At the end: replicas that read a fast-path key equally often must have
 * consumed the same values (their pages' sums); one whose sum is not the
 * majority's at that count read something else (its fast path damaged). */
static void fast_compare_sums(struct virt *V)
{
	struct sup *S = V->S;
	for (unsigned fk = 0; fk < CP_KEYS; fk++) {
		if (!cp_served(fk))
			continue;
		uint64_t sums[VOTER_MAX];
		unsigned idx[VOTER_MAX], n = 0;
		for (unsigned i = 0; i < S->nslots && n < VOTER_MAX; i++)
			if (S->r[i].live && S->r[i].exited && !(V->fast_damaged >> i & 1) &&
			    fastclock_sum(V->fast, i, fk, &sums[n]))
				idx[n++] = i;
		for (unsigned b = 0; b < n; b++) {
			/* The majority among those with b's count. */
			uint64_t same[VOTER_MAX], m;
			unsigned ns = 0;
			for (unsigned c = 0; c < n; c++)
				if (fastclock_count(V->fast, idx[c], fk) == fastclock_count(V->fast, idx[b], fk))
					same[ns++] = sums[c];
			if (dispute_majority(same, ns, &m) && sums[b] != m)
				call_divergence(&V->r[idx[b]], log_key(fk), fastclock_count(V->fast, idx[b], fk),
						"the values the others read", "other values");
		}
	}
}

/* A replica that exited before diehard forwarded a stop signal (or with
 * none forwarded): it ran to its own end. */
static bool ran_to_end(const struct sup *S, const struct replica *r)
{
	return S->stop_ev == NULL || r->end_time < S->stop_at;
}

void virt_finish(struct virt *V)
{
	struct sup *S = V->S;
	if (V->open_failures > 1)
		log_warn("%" PRIu64 " opens of /dev/urandom or /dev/random in all could not be virtualized",
			 V->open_failures);
	disputes_settle(V->disputes, 0, true);
	if (V->fast != NULL) {
		fastclock_settle_all(V->fast, fast_put, V);
		fast_harvest(V);
		fast_kill_forged(V);
		fast_compare_sums(V);
	}
	for (unsigned i = 0; i < S->nslots; i++)
		report_counts(V, i);
	uint32_t *keys;
	size_t nkeys = call_keys(V, &keys);
	/* Replicas that ran to the end in the vote should have made as many
	 * calls of each kind; one that made more or fewer behaved differently
	 * (the check that threads cannot fool: counts do not depend on the
	 * interleaving). Not one that ended after diehard forwarded SIGTERM
	 * or SIGINT: it stopped where the signal found it (a server's threads
	 * in the middle of requests the others had finished), as its output
	 * may end short (output.c). */
	bool stopped = false;
	for (unsigned i = 0; i < S->nslots; i++)
		stopped |= S->r[i].live && S->r[i].exited && !ran_to_end(S, &S->r[i]);
	if (stopped && nkeys > 0)
		log_event("call counts of the replicas that ended on the stop signal not compared: each stopped where it "
			  "found it");
	for (size_t j = 0; j < nkeys; j++) {
		uint64_t counts[VOTER_MAX];
		unsigned idx[VOTER_MAX], n = 0;
		for (unsigned i = 0; i < S->nslots && n < VOTER_MAX; i++)
			if (S->r[i].live && S->r[i].exited && ran_to_end(S, &S->r[i])) {
				idx[n] = i;
				counts[n++] = calls_of(V, i, keys[j]);
			}
		uint64_t m;
		if (!dispute_majority(counts, n, &m))
			continue;
		for (unsigned b = 0; b < n; b++)
			if (counts[b] != m) {
				char e[32], g[32];
				snprintf(e, sizeof e, "%" PRIu64 " call%s", m, m == 1 ? "" : "s");
				snprintf(g, sizeof g, "%" PRIu64 " call%s", counts[b], counts[b] == 1 ? "" : "s");
				call_divergence(&V->r[idx[b]], keys[j], counts[b] < m ? counts[b] : m, e, g);
			}
	}
	free(keys);
	report_log_memory(S->report, ndlog_entries(V->log), ndlog_memory(V->log), ndlog_complete(V->log),
			  V->skipped_sleeps);
	if (V->fast != NULL)
		report_clock_leaders(S->report,
				     !vdso_real_clock() ? NO_VDSO_REAL
				     : fastclock_is_real_by_syscall(V->fast) ? "the vDSO made system calls itself (its clock source)"
									     : NULL,
				     V->vdso_fallbacks);
	if (V->harvest_ev != NULL)
		event_free(V->harvest_ev);
	V->harvest_ev = NULL;
}
