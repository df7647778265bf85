/* take.c — the nondeterminism log's side of a notified call (virt_int.h).
 *
 * Each call gets a key (ndlog.h: the kind in the top byte; CPU-time clocks
 * per task, a listening replica's wall clocks per thread) and the n-th call
 * of a key in one replica gets the value the first replica to make it read
 * (take_value: leader or follower). A server's followed wall or monotonic
 * value that has grown stale joins the front instead. The fast clock path's
 * keys (fastclock.h) take their index from the slot's page, so that both
 * paths number reads alike (fast_take). Calls whose arguments differ go to
 * dispute.c, whose verdict is a call divergence (take_divergence). */
#include "virt_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "clockpage.h"
#define CLOCKPATH_LAYOUT_ONLY
#include "clockpath.h"
#include "dispute.h"
#include "exitcode.h"
#include "fastclock.h"
#include "lineage.h"
#include "log.h"
#include "net.h"
#include "realclock.h"
#include "remote.h"

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
void take_key_name(uint32_t key, char *buf, size_t size)
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
uint32_t take_clock_key(struct vreplica *vr, clockid_t id, pid_t tid)
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

/* The last field of tid's /proc status line field ("NSpid:", "NStgid:"):
 * its id in the replica's own pid namespace, 0 when it has none of its
 * own there or it cannot be read. */
static uint32_t own_id(pid_t tid, const char *field)
{
	char buf[2048];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return 0;
	char *line = strstr(buf, field);
	if (line == NULL)
		return 0;
	line += strlen(field);
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

/* A server's wall clocks are matched per thread (the n-th read of thread
 * number j gets the n-th value thread j read in the replica that got there
 * first): a thread that serves a request reads the time for its reply, and
 * matched per thread its reads pair with the sibling threads' reads for the
 * same request, however the threads of a replica interleave. A thread's
 * number is cut from its place in the replica's process tree (lineage.h:
 * the n-th thread its process started, that process the m-th its parent
 * forked, ...), the same in every replica of a server that starts a thread
 * or a process per connection (connections reach every replica in one
 * order), whatever ids the host gives and however the other processes'
 * tasks interleave with its own. Where lineage cannot place a task, its id
 * inside the replica's own pid namespace (sandbox.c), which follows the
 * order in which the replica's tasks were made. Only once the replica
 * listens (net.h): before, a program's reads stay matched in one sequence
 * per kind, as everywhere else. 0 when the number is unknown (no
 * namespace of its own, or the thread is gone): then the one sequence. */
static uint32_t thread_number(struct vreplica *vr, pid_t tid)
{
	uint32_t t = lineage_thread(vr->V->lineage, vr->index, tid);
	return t != 0 ? t : own_id(tid, "\nNSpid:");
}

uint32_t take_process_key(struct vreplica *vr, uint32_t key, pid_t tid)
{
	uint32_t p = lineage_process(vr->V->lineage, vr->index, tid);
	return key | (p != 0 ? p : own_id(tid, "\nNStgid:"));
}

uint64_t take_stream_of(uint32_t key, uint64_t index)
{
	return (uint64_t)(key & 0xffffffu) << 40 | (index & ((1ull << 40) - 1));
}

bool take_thread_key(uint32_t key)
{
	return (key & 0xff000000u) == KEY_WALL_THREAD;
}

/* The key of a wall-clock read: per thread in a replica that listens. */
uint32_t take_wall_key(struct vreplica *vr, unsigned which, uint32_t key, pid_t tid)
{
	if (!net_listening(vr->V->S->net, vr->index))
		return key;
	uint32_t t = thread_number(vr, tid);
	return t == 0 ? key : KEY_WALL_THREAD | which << 22 | t;
}

void take_divergence(struct vreplica *vr, uint32_t key, uint64_t index, const char *expected, const char *got)
{
	struct sup *S = vr->V->S;
	char name[64];
	take_key_name(key, name, sizeof name);
	unsigned id = S->r[vr->index].id;
	log_event("call divergence: replica %u, %s #%" PRIu64 ": %s, the majority's: %s", id, name, index, got,
		  expected);
	report_call_divergence(S->report, id, name, index, expected, got, sup_now() - S->t_start);
}

/* A call's argument (ndlog.h), for people. */
static void describe_arg(uint32_t key, uint64_t arg, char *buf, size_t size)
{
	if ((key & 0xff000000u) == KEY_GETRANDOM)
		snprintf(buf, size, "%" PRIu64 " bytes, flags %#" PRIx64, arg & 0xffffffffu, arg >> 32);
	else
		snprintf(buf, size, "flags %#" PRIx64, arg);
}

/* The replicas that may still make calls: in the vote and not exited. */
uint64_t take_still_calling(const struct sup *S)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		if (S->r[i].live && !S->r[i].exited)
			m |= (uint64_t)1 << i;
	return m;
}

void take_on_odd(void *ctx, unsigned r, uint32_t key, uint64_t index, uint64_t expected, uint64_t got)
{
	struct virt *V = ctx;
	char e[64], g[64];
	describe_arg(key, expected, e, sizeof e);
	describe_arg(key, got, g, sizeof g);
	take_divergence(&V->r[r], key, index, e, g);
}

void take_real_clock(const struct seccomp_notif *req, struct nd_value *v)
{
	realclock_read((clockid_t)(int32_t)req->data.args[0], (pid_t)req->pid, v);
}

void take_real_gettimeofday(const struct seccomp_notif *req, struct nd_value *v)
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

void take_real_time(const struct seccomp_notif *req, struct nd_value *v)
{
	(void)req;
	*v = (struct nd_value){ .a = (int64_t)syscall(SYS_time, NULL) };
}

/* getrandom's bytes are the keystream numbered by the call's index: no real
 * value to read, nothing to record but the size and flags. */
void take_no_real(const struct seccomp_notif *req, struct nd_value *v)
{
	(void)req;
	*v = (struct nd_value){ 0 };
}

/* A followed wall or monotonic clock value older than this, in a server
 * replica that listens (net.h), is stale: an event loop's clock reads, one
 * per iteration, drift apart in count between replicas. Not before it
 * listens: its start-up's reads pair one to one with its siblings' (a
 * time a start-up prints, read 10 ms after a sibling's under load, is
 * the same read), whether or not a sibling listens already. */
#define STALE_NS 10000000LL
/* A thread's wall clock (KEY_WALL_THREAD) drifts that way only once it
 * has read many times (a loop); before, a follower lags its sibling
 * thread by no more than scheduling, tens of milliseconds under load, and
 * is stale only past a second. But an event loop's thread (loop_thread)
 * pairs its reads with the iterations of its loop, not with requests, from
 * its first client on: nginx's worker, whose n-th iteration in one replica
 * is not the n-th in another. Handed the value of an iteration before a
 * second's turn, it would stamp a request that came after the turn (conn.c
 * holds the bytes that come just before one) with the old second while its
 * siblings stamp it with the new one (an HTTP Date), so its reads follow
 * the front as a loop's do, once the replica has answered a client (before,
 * a server still starting, such as redis loading its data and printing
 * times as it goes, keeps its reads paired). */
#define STALE_FAR_NS 1000000000LL
/* The coarse wall clock lags the real one by up to a tick: a read that
 * much before the first client bytes may be one made after them. */
#define FED_MARGIN 0.02
#define LOOP_READS 256

/* Whether thread tid is an event loop's: its process's main thread, in a
 * process that holds a listening TCP socket and was started before its
 * replica first answered a client, or in the same clock tick (nginx's
 * master and workers, redis, a prefork server's children, a
 * single-threaded server): one that serves many connections in turn. Not
 * a thread started for a request (python's http.server), nor a process
 * forked for a connection once the replica served, whether it closed its
 * listeners (sshd, PostgreSQL) or not (python's ForkingMixIn), whose reads
 * pair request by request. Asked once the replica has answered; cached
 * per tid (a tid reused by a new thread before its entry is overwritten
 * inherits it: a thread's first 256 reads at most are matched the other
 * way). /proc unreadable: asked again. */
static bool loop_thread(struct vreplica *vr, pid_t tid)
{
	unsigned h = (unsigned)tid % LOOP_CACHE;
	if (vr->loops[h].tid == tid)
		return vr->loops[h].loop;
	uint64_t answered = net_answered_ticks(vr->V->S->net, vr->index);
	bool loop = false;
	if (remote_thread_group(tid) == tid) {
		unsigned roles = remote_tcp_roles(tid);
		uint64_t started = remote_start_time(tid, NULL);
		if ((roles & REMOTE_UNREADABLE) || started == 0)
			return false;
		loop = (roles & REMOTE_LISTENS) && answered != 0 && started <= answered;
	}
	vr->loops[h].tid = tid;
	vr->loops[h].loop = loop;
	return loop;
}

/* Whether thread tid is its process's main thread, in a process that holds
 * a listening TCP socket (loop_thread's shape, whenever it started). */
static bool listening_main(pid_t tid)
{
	if (remote_thread_group(tid) != tid)
		return false;
	unsigned roles = remote_tcp_roles(tid);
	return !(roles & REMOTE_UNREADABLE) && (roles & REMOTE_LISTENS);
}

/* Whether wall-clock value v (its second field in units of scale
 * nanoseconds; scale 0: whole seconds, covering the second) was read before
 * a replica was first given a client's bytes. */
static bool read_before_clients(const struct net *N, const struct nd_value *v, int64_t scale)
{
	double fed = net_first_fed(N);
	double read_at = (double)v->a + (scale == 0 ? 1.0 : (double)v->b * (double)scale / 1e9);
	return fed != 0 && read_at < fed - FED_MARGIN;
}

/* Whether a wall-clock read of key may be matched through an anchor of its
 * thread (anchor.c): an event loop's, in a replica that serves (joined,
 * not replaying the past), as for the staleness rule. */
static bool anchorable(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key)
{
	struct sup *S = vr->V->S;
	return take_thread_key(key) && net_listening(S->net, vr->index) && !replace_replaying(S, &S->r[vr->index]) &&
	       net_joined(S->net, vr->index) && net_answered(S->net, vr->index) && loop_thread(vr, (pid_t)req->pid);
}

bool take_wall_or_monotonic(uint32_t key)
{
	uint32_t kind = key & 0xff000000u;
	return kind == KEY_CLOCK || kind == KEY_GETTIMEOFDAY || kind == KEY_TIME || kind == KEY_WALL_THREAD;
}

static bool stale(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, uint64_t index,
		  const struct nd_value *v)
{
	uint32_t kind = key & 0xff000000u;
	int64_t limit = STALE_NS;
	struct sup *S = vr->V->S;
	bool thread = kind == KEY_WALL_THREAD;
	if (thread) {
		unsigned which = (key >> 22) & 3;
		kind = which == WALL_GETTIMEOFDAY ? KEY_GETTIMEOFDAY : which == WALL_TIME ? KEY_TIME : KEY_CLOCK;
	}
	if ((kind != KEY_CLOCK && kind != KEY_GETTIMEOFDAY && kind != KEY_TIME) || v->err != 0 ||
	    !net_listening(S->net, vr->index) || replace_replaying(S, &S->r[vr->index]) ||
	    !net_joined(S->net, vr->index))
		return false;
	if (thread && index < LOOP_READS && !(net_answered(S->net, vr->index) && loop_thread(vr, (pid_t)req->pid)))
		limit = STALE_FAR_NS;
	struct nd_value now;
	if (kind == KEY_CLOCK)
		take_real_clock(req, &now);
	else if (kind == KEY_GETTIMEOFDAY)
		take_real_gettimeofday(req, &now);
	else
		take_real_time(req, &now);
	int64_t scale = kind == KEY_CLOCK ? 1 : kind == KEY_GETTIMEOFDAY ? 1000 : 0;
	int64_t dt = (now.a - v->a) * 1000000000LL + (now.b - v->b) * scale;
	/* An event loop's read paired with its sibling's before its replica's
	 * first answer, once the replica was given a client's bytes: a value
	 * read before any client came is no request's time. nginx's workers
	 * read the clock a different number of times in each replica as
	 * they start (and split connections otherwise between them), so a
	 * worker's read for the first requests could pair with a sibling's
	 * start-up read of the second before: a split Date. Values read since
	 * a client came still pair, and other threads' reads (a thread or a
	 * process forked for a connection reads as its sibling did; a pool
	 * thread still starting prints its start). A time(2) value covers its
	 * whole second. */
	if (thread && limit == STALE_FAR_NS && net_fed(S->net, vr->index) && !net_answered(S->net, vr->index) &&
	    read_before_clients(S->net, v, scale) && listening_main((pid_t)req->pid))
		return true;
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

/* The thread numbers lanes were given to, for take_reclaimable (the log's
 * predicate has no context; one virt a process). */
static uint32_t given[CP_LANES];

bool take_reclaimable(uint32_t key)
{
	if (!take_thread_key(key))
		return false;
	for (unsigned j = 0; j < CP_LANES; j++)
		if (given[j] == (key & 0x3fffff) && given[j] != 0)
			return false; /* numbered on in the pages: never forgotten */
	return true;
}

/* The lane given to thread number t (take_wall_key's), or -1. */
static int lane_of(const struct virt *V, uint32_t t)
{
	for (unsigned j = 0; j < CP_LANES; j++)
		if (V->lane_thread[j] == t && t != 0)
			return (int)j;
	return -1;
}

/* The fast path's key of a log key, or -1 when it serves none. A server's
 * thread's wall clock is its lane's (clockpage.h), once it has one. */
int take_fast_key(const struct virt *V, uint32_t key)
{
	if (V->fast == NULL)
		return -1;
	if (take_thread_key(key)) {
		int j = lane_of(V, key & 0x3fffff);
		return j < 0 ? -1 : (int)cp_lane_key((unsigned)j, (key >> 22) & 3);
	}
	if (key == KEY_GETTIMEOFDAY)
		return CP_KEY_GETTIMEOFDAY;
	if (key == KEY_TIME)
		return CP_KEY_TIME;
	uint32_t id = key & 0xffffff;
	if ((key & 0xff000000u) == KEY_CLOCK && id < CP_KEY_GETTIMEOFDAY && cp_served(id))
		return (int)id;
	return -1;
}

uint32_t take_log_key(const struct virt *V, unsigned fk)
{
	int lane = cp_lane_of(fk);
	if (lane >= 0)
		return KEY_WALL_THREAD | (fk - CP_BASE_KEYS) % CP_LANE_WALLS << 22 | V->lane_thread[lane];
	return fk == CP_KEY_GETTIMEOFDAY ? (uint32_t)KEY_GETTIMEOFDAY : fk == CP_KEY_TIME ? (uint32_t)KEY_TIME : KEY_CLOCK | fk;
}

/* A harvested or settled entry joins the log under its own number. */
void take_fast_put(unsigned fk, uint64_t n, const struct cp_value *cv, unsigned by, void *arg)
{
	(void)n;
	(void)by;
	struct virt *V = arg;
	struct nd_value v = { .a = cv->a, .b = cv->b, .c = cv->c, .d = cv->d };
	if (ndlog_preload(V->log, take_log_key(V, fk), 0, &v) != 0)
		fatal(EXIT_INTERNAL, "out of memory in the nondeterminism log");
}

/* Replicas whose entries failed their clock's bounds, or whose proposals
 * stalled the others again and again, are killed (outside any handler of
 * theirs: the caller is done with its notification). */
void take_kill_forged(struct virt *V)
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
			take_divergence(&V->r[i], take_log_key(V, fk), n, "a value within the clock's bounds",
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
void take_harvest(struct virt *V)
{
	fastclock_harvest(V->fast, take_fast_put, V);
	fastclock_pace(V->fast, take_still_calling(V->S), sup_now());
	for (unsigned fk = 0; fk < CP_KEYS; fk++)
		if (cp_served(fk) && (cp_lane_of(fk) < 0 || V->lane_thread[cp_lane_of(fk)] != 0))
			for (unsigned i = 0; i < V->S->nslots; i++) {
				uint64_t c = fastclock_count(V->fast, i, fk);
				if (V->r[i].used)
					ndlog_seek(V->log, i, take_log_key(V, fk), fastclock_floor(V->fast, i, fk, c));
			}
}

/* Harvests, then comes again when the replicas will have filled about a
 * quarter of a ring at the rate they just read (fastclock_harvest_delay). */
void take_on_harvest(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct virt *V = arg;
	take_harvest(V);
	take_kill_forged(V);
	/* The loop's cached time is from before this round's work (a harvest
	 * may take a millisecond): the next one counts from now. */
	if (event_base_update_cache_time(V->S->base) != 0)
		fatal(EXIT_INTERNAL, "cannot read the event loop's time");
	uint64_t us = fastclock_harvest_delay(V->fast, sup_now());
	struct timeval next = { .tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000) };
	if (event_add(V->harvest_ev, &next) != 0)
		fatal(EXIT_INTERNAL, "cannot create timers");
}

/* ---- lanes: a server's loop threads read their wall clocks in the
 * replica (clockpage.h) ---- */

/* A notified wall read of thread tid (thread key key) of vr, a server:
 * - a lane named for tid but another thread's: that thread is gone (its id
 *   reused), the lane is no longer named in this slot;
 * - an event loop's thread (loop) of an original replica (or of a
 *   replacement that caught up: virt_fast_join) that serves with
 *   the fast path gets a lane (the first such read of its thread number
 *   in any replica gives one, while there are free lanes), and is named
 *   for it in its slot's page and in its own lane word (keeps, the
 *   address its read carried: allocator/clockpath.h): from its next read
 *   on, its reads stay in the replica, numbered on from where its reads
 *   through diehard got (every slot's count of the lane's keys starts at
 *   its position in the log's key of the thread, and the log's entries
 *   so far stay its first);
 * - one whose anchored reads are done (anchor.c) reads in its lane again. */
static void lane_for(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, bool loop, uint64_t keeps)
{
	struct virt *V = vr->V;
	struct fastclock *F = V->fast;
	unsigned i = vr->index;
	pid_t tid = (pid_t)req->pid;
	uint32_t t = key & 0x3fffff;
	for (unsigned j = 0; j < CP_LANES; j++)
		if (vr->lane_host[j] == tid && V->lane_thread[j] != t) {
			fastclock_lane_name(F, i, j, 0);
			fastclock_divert(F, i, j, false);
			vr->lane_host[j] = 0;
			vr->lane_ns[j] = 0;
		}
	bool mine = loop && fastclock_serving(F, i) && (!V->S->r[i].replacement || vr->fast_joined);
	int j = lane_of(V, t);
	if (j < 0) {
		if (!mine)
			return;
		for (unsigned l = 0; l < CP_LANES && j < 0; l++)
			if (V->lane_thread[l] == 0)
				j = (int)l;
		if (j < 0)
			return; /* all given: its reads stay notified */
		V->lane_thread[j] = t;
		given[j] = t;
		log_event("replica %u: its event loop's thread %u reads its wall clocks in lane %d (the first of its "
			  "number: every replica's takes it)",
			  V->S->r[i].id, (unsigned)t, j);
		for (unsigned w = 0; w < CP_LANE_WALLS; w++) {
			uint32_t kw = KEY_WALL_THREAD | w << 22 | t;
			unsigned fk = cp_lane_key((unsigned)j, w);
			const struct nd_value *last = ndlog_last(V->log, kw);
			struct cp_value cv = { 0 };
			if (last != NULL)
				cv = (struct cp_value){ .a = last->a, .b = last->b, .c = last->c, .d = last->d };
			fastclock_lane_seed(F, fk, ndlog_front(V->log, kw), last != NULL && last->err == 0 ? &cv : NULL);
			for (unsigned s = 0; s < V->S->nslots; s++)
				if (V->r[s].used)
					fastclock_lane_count(F, s, fk, ndlog_count(V->log, s, kw));
		}
	}
	if (mine && vr->lane_host[j] != tid) {
		uint32_t ns = own_id(tid, "\nNSpid:");
		vr->lane_ns[j] = ns != 0 ? ns : (uint32_t)tid;
		fastclock_lane_name(F, i, (unsigned)j, vr->lane_ns[j]);
		vr->lane_host[j] = tid;
		/* An anchor it made before it had a lane: its reads still
		 * matched through it come here (anchored() could not divert
		 * a lane not yet named). */
		if (anchor_pending(vr, tid))
			fastclock_divert(F, i, (unsigned)j, true);
		if (V->S->r[i].replacement)
			log_event("replica %u: its event loop's thread %u reads its wall clocks in lane %d, as its "
				  "siblings' do",
				  V->S->r[i].id, (unsigned)t, j);
	}
	if (keeps != 0 && vr->lane_host[j] == tid) {
		/* Into this thread alone (clockpath.h): it reads in its lane
		 * from its next read. Memory it made unwritable: it asks again. */
		struct clockpath_lane l = { .tid = vr->lane_ns[j], .lane = (uint32_t)j + 1 };
		(void)remote_write_all(tid, keeps, &l, sizeof l);
	}
	if (vr->lane_host[j] == tid && fastclock_diverted(F, i, (unsigned)j) && (!loop || !anchor_pending(vr, tid)))
		fastclock_divert(F, i, (unsigned)j, false);
}

void take_lane_divert(struct vreplica *vr, pid_t tid, bool on)
{
	if (vr->V->fast == NULL || tid <= 0)
		return;
	for (unsigned j = 0; j < CP_LANES; j++)
		if (vr->lane_host[j] == tid)
			fastclock_divert(vr->V->fast, vr->index, j, on);
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
static int fast_take(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, unsigned fk,
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
			take_divergence(vr, take_log_key(V, fk), n, "a count within the log",
					"a count far past it (its page of the clock log written over)");
			log_warn("replica %u: its clock log page is damaged: its clock reads are notified from now on",
				 V->S->r[vr->index].id);
		}
	}
	take_harvest(V);
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
		const struct replica *r = &V->S->r[vr->index];
		bool kept = ndlog_value(V->log, key, n, v);
		if (!kept && r->fresh && r->joining) {
			/* A fresh server past the run's start the log keeps
			 * (ndlog_keep_start): the front, newer than anything it
			 * read, where its join would take it anyway. Lost, it
			 * would read real values outside the log for good. */
			V->clock_resyncs++;
			n = fast_from_front(F, vr->index, fk);
		} else if (!kept) {
			/* Dropped from the log (the cap): as on the notify path,
			 * the replica reads real values of that clock from now
			 * on, every read asked here (the rings' entries, older
			 * than what it just read, would take it back). */
			vr->fast_lost |= 1ull << fk;
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
	for (int again = 0; n >= fastclock_harvested(F, fk); again++) {
		outcome = ND_LEAD;
		if (fastclock_settle(F, fk, n, take_fast_put, V) != 0 || !ndlog_value(V->log, key, n, v)) {
			real(req, v); /* the clock cannot be read: its error */
			*index = n;
			fastclock_done(F, vr->index, fk, n, NULL);
			return ND_LOST;
		}
		/* Settled from what another replica led (a server's follower
		 * that found it stale and asked: clockpage.h's rule, as for
		 * the log's entries above): to the front, once. */
		if (again > 0 || !stale(vr, req, key, n, v))
			break;
		V->clock_resyncs++;
		n = fast_from_front(F, vr->index, fk);
	}
	/* The slot's sum covers every value it consumed, whichever path. */
	struct cp_value cv = { .a = v->a, .b = v->b, .c = v->c, .d = v->d };
	fastclock_done(F, vr->index, fk, n, &cv);
	*index = n;
	return outcome;
}

/* The unit of a wall clock key's second field: 1 (nanoseconds), 1000
 * (microseconds: gettimeofday), 0 (time(2): seconds alone); -1 for a key
 * that is no wall clock (monotonic, CPU, TAI, random). */
static int wall_unit(uint32_t key)
{
	uint32_t kind = key & 0xff000000u, detail = key & 0xffffffu;
	if (kind == KEY_CLOCK)
		return detail == CLOCK_REALTIME || detail == CLOCK_REALTIME_COARSE ? 1 : -1;
	if (kind == KEY_GETTIMEOFDAY)
		return 1000;
	if (kind == KEY_TIME)
		return 0;
	if (kind == KEY_WALL_THREAD) {
		unsigned which = (key >> 22) & 3;
		return which == WALL_GETTIMEOFDAY ? 1000 : which == WALL_TIME ? 0 : 1;
	}
	return -1;
}

bool take_frozen(struct virt *V, const struct seccomp_notif *req, uint32_t key, real_fn *real, struct nd_value *v)
{
	int unit = wall_unit(key);
	if (!V->frozen || unit < 0)
		return false;
	if (sup_now() >= V->frozen_until) {
		/* Time goes on from the front: a replica that was behind its
		 * siblings' reads would otherwise follow older entries, earlier
		 * than the frozen time. */
		V->frozen = false;
		for (unsigned i = 0; i < V->S->nslots; i++)
			virt_clocks_now(V, i);
		return false;
	}
	real(req, v);
	if (v->err == 0) {
		v->a = V->frozen_at.tv_sec;
		v->b = unit == 0 ? 0 : V->frozen_at.tv_nsec / unit;
	}
	return true;
}

/* Takes replica vr's next entry of key: a follower gets the log's value, a
 * leader (or a replica lost behind the cap) reads it with real(). */
int take_value(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, uint64_t arg, real_fn *real,
	       struct nd_value *v, uint64_t *index)
{
	struct virt *V = vr->V;
	uint64_t expected;
	if (take_frozen(V, req, key, real, v)) {
		/* Outside the log: a stop's lines carry one time. */
		*index = 0;
		return ND_LOST;
	}
	bool loop = anchorable(vr, req, key);
	bool anchored = loop && anchor_read(vr, req, real, v);
	if (V->fast != NULL && take_thread_key(key)) {
		/* A lane asked for: the marker, then where the thread keeps it. */
		unsigned at = req->data.nr == SYS_time ? 1 : 2;
		uint64_t keeps = fastclock_lane_asked(V->fast, req->data.args[at]) ? req->data.args[at + 1] : 0;
		lane_for(vr, req, key, loop, keeps);
	}
	if (anchored) {
		/* Outside the log too: matched through a step of the
		 * thread's own (anchor.c). */
		*index = 0;
		return ND_LOST;
	}
	int fk = take_fast_key(V, key);
	if (fk >= 0) {
		/* The fallback marker and index follow the call's own arguments. */
		unsigned at = req->data.nr == SYS_time ? 1 : 2;
		uint64_t asked = req->data.args[at + 1];
		bool asks = fastclock_asks(V->fast, req->data.args[at]);
		return fast_take(vr, req, key, (unsigned)fk, asks ? &asked : NULL, real, v, index);
	}
	if (take_wall_or_monotonic(key)) {
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
		disputes_settle(V->disputes, take_still_calling(V->S), false);
	if (take_thread_key(key))
		anchor_returned(vr, req, v, loop); /* a later anchored read never goes back */
	return outcome;
}
