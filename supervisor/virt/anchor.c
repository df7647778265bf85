/* anchor.c — an event loop's clock reads anchored to what its thread does
 * (virt_int.h).
 *
 * An event loop's wall-clock reads (take.c's loop_thread) follow the
 * front: its n-th read is not its siblings' n-th (their loops iterate
 * otherwise). So the time it reads right after a slow step of its own is
 * each replica's own, and a log line that prints it to the millisecond
 * differs in every replica: redis's "Background saving started" after a
 * fork, "Background saving terminated" after reaping the child, "DB saved
 * on disk" after a SAVE's fsync and rename. Those steps are calls diehard
 * sees, made at one point of the program in every replica: anchors. The
 * first ANCHOR_READS wall-clock reads a loop thread makes after one are
 * matched by (the thread's place in the process tree, the anchor, the
 * read's number after it) instead: the first replica there reads the real
 * time, the others get that value, unless their own clock is ANCHOR_STALE
 * or more away from it (a replica that far behind keeps its own time), or
 * it is more than ANCHOR_BACK_NS before the latest time the follower's
 * thread was given (its reads follow the front: its own time, later than
 * the leader's when it lags; a step back of at most that much, as an NTP
 * step may make, is the price of agreeing).
 *
 * Anchors, each a thread's own: its n-th process fork, its n-th fsync,
 * fdatasync, msync or rename (counted per thread from the replica's listen
 * on: a replica that does not listen has no event loop), and a wait4 or
 * waitid that reaped a child: the thread's own children are noted as the
 * wait begins (WAIT_CHILDREN at most), and at the thread's next read the
 * one that is gone (exactly one; two: none) is the one it reaped, the
 * anchor named by the child's place in the process tree (seen after the
 * fact, so a child that exits while the wait is on its way is no race).
 * Counts are kept per tid for ANCHOR_THREADS threads of a replica (the
 * least recently anchored goes); a tid reused by a new thread is told by
 * its start time.
 *
 * Entries: (anchor, read) with the leader's value and when it was led;
 * gone ANCHOR_KEEP seconds after, or when the table is full, the oldest.
 * A replica's reads are anchored only while it is joined and not
 * replaying (as take.c's staleness rule): a replacement's replayed past
 * reads the log. What a hostile replica can do: lead an entry with its own
 * real time, which a sibling takes only within ANCHOR_STALE of its own. */
#include "virt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "exitcode.h"
#include "lineage.h"
#include "log.h"
#include "net.h"
#include "remote.h"

/* Reads after an anchor that are matched through it. */
#define ANCHOR_READS 2
/* A leader's value older than this (against the follower's own real
 * time) is not taken. */
#define ANCHOR_STALE_NS 1000000000LL
/* A follower's wall clock may step back this much (from the latest time
 * its thread was given) to take the leader's value: a second, as its
 * reads may have gone that far ahead at the front (redis reaps its child
 * at its timer, 100 ms apart between replicas, and more under load: 100 ms
 * split a line once in 15 runs beside a test suite). */
#define ANCHOR_BACK_NS 1000000000LL
/* Entries live this long (seconds). */
#define ANCHOR_KEEP 10.0
#define ANCHOR_ENTRIES 256

enum { ANCHOR_FORK = 1, ANCHOR_SYNC = 2, ANCHOR_REAP = 3 };

struct anchor_entry {
	uint64_t id;     /* 0: free */
	unsigned n;      /* the read's number after the anchor */
	int unit;        /* the read's kind: values of another kind are not taken */
	struct nd_value v;
	double at;       /* when it was led (sup_now()) */
};

struct anchors {
	struct anchor_entry e[ANCHOR_ENTRIES];
};

struct anchors *anchors_new(void)
{
	struct anchors *A = calloc(1, sizeof *A);
	if (A == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return A;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 31);
}

/* tid's entry in vr, made (or taken over: a reused tid, the least recently
 * used slot) when make. NULL: none. */
static struct anchor_thread *thread_of(struct vreplica *vr, pid_t tid, bool make)
{
	struct anchor_thread *oldest = NULL;
	for (unsigned i = 0; i < ANCHOR_THREADS; i++) {
		struct anchor_thread *t = &vr->anchored[i];
		if (t->tid == tid && tid != 0)
			return t;
		if (oldest == NULL || t->used < oldest->used)
			oldest = t;
	}
	if (!make)
		return NULL;
	*oldest = (struct anchor_thread){ .tid = tid, .start = remote_start_time(tid, NULL) };
	return oldest;
}

/* Whether entry t is still its thread's; if not (a new thread with an old
 * tid), it is cleared. */
static bool same_thread(struct anchor_thread *t)
{
	if (t->start == remote_start_time(t->tid, NULL))
		return true;
	*t = (struct anchor_thread){ 0 };
	return false;
}

/* tid's entry, when it is still the thread that made it. */
static struct anchor_thread *live_thread(struct vreplica *vr, pid_t tid, bool make)
{
	struct anchor_thread *t = thread_of(vr, tid, false);
	if (t != NULL && !same_thread(t))
		t = NULL;
	return t != NULL || !make ? t : thread_of(vr, tid, true);
}

/* Thread tid of vr passed an anchor: kind, and detail (a reaped child's
 * place) or, with detail 0, the thread's count of such anchors. */
static void anchored(struct vreplica *vr, pid_t tid, unsigned kind, uint64_t detail)
{
	struct virt *V = vr->V;
	if (!net_listening(V->S->net, vr->index))
		return;
	uint32_t place = lineage_thread(V->lineage, vr->index, tid);
	if (place == 0)
		return; /* not placed: nothing to match it by */
	struct anchor_thread *t = live_thread(vr, tid, true);
	if (detail == 0)
		detail = ++t->count[kind == ANCHOR_FORK ? 0 : 1];
	t->id = mix(mix(mix(0x616e63686f72ull, place), kind), detail);
	if (t->id == 0)
		t->id = 1;
	t->left = ANCHOR_READS;
	t->n = 0;
	t->used = ++vr->anchor_clock;
	take_lane_divert(vr, tid, true); /* its next reads come here */
}

bool anchor_pending(struct vreplica *vr, pid_t tid)
{
	struct anchor_thread *t = thread_of(vr, tid, false);
	return t != NULL && (t->left > 0 || t->nwait > 0);
}

void anchor_drop_pending(struct vreplica *vr)
{
	for (unsigned j = 0; j < ANCHOR_THREADS; j++) {
		vr->anchored[j].left = 0;
		vr->anchored[j].nwait = 0;
	}
}

void anchor_fork(struct vreplica *vr, pid_t tid)
{
	anchored(vr, tid, ANCHOR_FORK, 0);
}

void anchor_sync(struct vreplica *vr, pid_t tid)
{
	anchored(vr, tid, ANCHOR_SYNC, 0);
}

/* Notes thread t's own children (those it forked; up to WAIT_CHILDREN:
 * more, and none is noted) as a wait of t begins: at t's next read, the
 * one that is gone is the one the wait reaped. Another thread's children
 * are not looked at: one file a wait, whatever the threads. */
static void note_children(struct vreplica *vr, struct anchor_thread *t, pid_t tgid)
{
	char path[96], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)tgid, (int)t->tid);
	t->nwait = 0;
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	size_t got = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[got] = '\0';
	for (char *p = buf, *end;; p = end) {
		long c = strtol(p, &end, 10);
		if (end == p)
			break;
		if (t->nwait == WAIT_CHILDREN) {
			t->nwait = 0; /* too many to tell */
			return;
		}
		uint64_t start = remote_start_time((pid_t)c, NULL);
		uint32_t place = start != 0 ? lineage_process(vr->V->lineage, vr->index, (pid_t)c) : 0;
		if (place != 0)
			t->wait[t->nwait++] = (struct anchor_child){ .pid = (pid_t)c, .start = start, .place = place };
	}
}

enum answer anchor_wait(struct vreplica *vr, const struct seccomp_notif *req)
{
	struct virt *V = vr->V;
	pid_t tid = (pid_t)req->pid;
	if (!net_listening(V->S->net, vr->index) || V->lineage == NULL)
		return CONTINUE;
	if (req->data.nr == SYS_waitid && ((int)req->data.args[3] & WNOWAIT))
		return CONTINUE; /* reaps nothing */
	pid_t tgid = remote_thread_group(tid);
	if (tgid <= 0)
		return CONTINUE;
	struct anchor_thread *t = live_thread(vr, tid, true);
	note_children(vr, t, tgid);
	if (t->nwait > 0)
		take_lane_divert(vr, tid, true); /* its next read names what it reaped */
	return CONTINUE;
}

/* At t's first read after a wait: the child noted then that is gone now
 * (exactly one) was reaped by it, an anchor named by its place. */
static void reaped(struct vreplica *vr, struct anchor_thread *t)
{
	uint32_t place = 0;
	unsigned gone = 0;
	for (unsigned i = 0; i < t->nwait; i++)
		if (remote_start_time(t->wait[i].pid, NULL) != t->wait[i].start) {
			place = t->wait[i].place;
			gone++;
		}
	t->nwait = 0;
	if (gone == 1)
		anchored(vr, t->tid, ANCHOR_REAP, place);
}

/* The read's kind, so that a gettimeofday never takes a time()'s value. */
static int read_unit(const struct seccomp_notif *req)
{
	switch (req->data.nr) {
	case SYS_gettimeofday: return 1;
	case SYS_time: return 2;
	default: return 3 + (int)req->data.args[0];
	}
}

/* A wall read's value in nanoseconds. */
static int64_t ns_of(const struct nd_value *v, int unit)
{
	int64_t scale = unit == 1 ? 1000 : unit == 2 ? 0 : 1;
	return v->a * 1000000000LL + v->b * scale;
}

void anchor_returned(struct vreplica *vr, const struct seccomp_notif *req, const struct nd_value *v, bool loop)
{
	struct anchor_thread *t = thread_of(vr, (pid_t)req->pid, false);
	if (t == NULL && loop) {
		t = live_thread(vr, (pid_t)req->pid, true);
		t->used = ++vr->anchor_clock;
	}
	if (t == NULL || v->err != 0)
		return;
	int64_t ns = ns_of(v, read_unit(req));
	if (ns > t->last_ns)
		t->last_ns = ns;
}

bool anchor_read(struct vreplica *vr, const struct seccomp_notif *req, real_fn *real, struct nd_value *v)
{
	struct virt *V = vr->V;
	/* The common case (a loop's read with no anchor before it) costs a
	 * look at the table only: the tid's start time is read when there is
	 * something to match. */
	struct anchor_thread *t = thread_of(vr, (pid_t)req->pid, false);
	if (t == NULL || (t->left == 0 && t->nwait == 0) || !same_thread(t))
		return false;
	if (t->nwait > 0)
		reaped(vr, t);
	if (t->left == 0)
		return false;
	t->left--;
	unsigned n = t->n++;
	int unit = read_unit(req);
	real(req, v);
	if (v->err != 0)
		return true;
	struct anchors *A = V->anchors;
	double now = sup_now();
	struct anchor_entry *free_e = NULL, *oldest = NULL;
	for (unsigned i = 0; i < ANCHOR_ENTRIES; i++) {
		struct anchor_entry *e = &A->e[i];
		if (e->id != 0 && now - e->at > ANCHOR_KEEP)
			e->id = 0;
		if (e->id == t->id && e->n == n) {
			/* Not a second away from its own time, and not more than
			 * ANCHOR_BACK_NS before a time this thread was given
			 * already (a follower whose reads went to the front
			 * since the leader's: its wall clock steps back that
			 * much at most, as an NTP step may). */
			int64_t led = ns_of(&e->v, unit), own = ns_of(v, unit);
			if (e->unit == unit && llabs(own - led) < ANCHOR_STALE_NS && led + ANCHOR_BACK_NS >= t->last_ns) {
				/* The leader's time, with the kernel's rest (a
				 * timezone) as this read got it. */
				v->a = e->v.a;
				v->b = e->v.b;
				V->anchor_follows++;
			}
			if (ns_of(v, unit) > t->last_ns)
				t->last_ns = ns_of(v, unit);
			return true;
		}
		if (e->id == 0 && free_e == NULL)
			free_e = e;
		if (oldest == NULL || e->at < oldest->at)
			oldest = e;
	}
	struct anchor_entry *e = free_e != NULL ? free_e : oldest;
	*e = (struct anchor_entry){ .id = t->id, .n = n, .unit = unit, .v = *v, .at = now };
	if (ns_of(v, unit) > t->last_ns)
		t->last_ns = ns_of(v, unit);
	return true;
}
