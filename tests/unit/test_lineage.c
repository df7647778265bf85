/* Unit tests of lineage.c against a simulated kernel: one pid space shared
 * by the replicas (as the host's is), ids handed out in turn and wrapping
 * at a small pid_max, tasks that exit (zombies, then gone) and ids reused.
 * Each replica builds the same process tree in another interleaving, with
 * other threads started on the way (by other processes, or by the same
 * one after those compared: a thread is named by its order in its
 * process); every logical task must get the same
 * place in every replica: forks and threads by their order in their
 * parent, orphans (double forks) whose parent is gone, a wrap of the pid
 * space between a clone and its child's first sight, an id reused by a
 * new task, a fresh server aligned with its siblings, a subreaper's
 * adopted grandchildren and a CLONE_PARENT child; unknown tasks get 0;
 * the table stays bounded as tasks come and go. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lineage.h"
#include "tap.h"

#define PID_MAX 1000
#define FIRST_PID 300 /* where ids start again after a wrap, as in Linux */

enum state { NONE, RUNNING, ZOMBIE };

struct task {
	enum state state;
	pid_t tgid, ppid;
	uint64_t start;
};

static struct task tasks[PID_MAX];
static pid_t last;          /* the last id given */
static uint64_t clock_tick; /* start times */

static bool op_task(void *ctx, pid_t tid, struct lineage_task *t)
{
	(void)ctx;
	if (tid <= 0 || tid >= PID_MAX || tasks[tid].state == NONE)
		return false;
	*t = (struct lineage_task){ .tgid = tasks[tid].tgid, .ppid = tasks[tid].ppid, .start = tasks[tid].start };
	return true;
}

static uint64_t op_started(void *ctx, pid_t tid)
{
	(void)ctx;
	return tid > 0 && tid < PID_MAX && tasks[tid].state != NONE ? tasks[tid].start : 0;
}

static bool op_running(void *ctx, pid_t pid, uint64_t start)
{
	(void)ctx;
	return pid > 0 && pid < PID_MAX && tasks[pid].state == RUNNING && tasks[pid].start == start;
}

static pid_t op_last(void *ctx)
{
	(void)ctx;
	return last;
}

static const struct lineage_ops ops = {
	.task = op_task, .started = op_started, .running = op_running, .last_pid = op_last, .pid_max = PID_MAX,
};

/* A monotonic clock for the recheck window, and how often /proc's start
 * time was asked. */
static uint64_t now_ns;
static unsigned started_asked;

static uint64_t op_now(void *ctx)
{
	(void)ctx;
	return now_ns;
}

static uint64_t op_started_counted(void *ctx, pid_t tid)
{
	started_asked++;
	return op_started(ctx, tid);
}

static const struct lineage_ops timed_ops = {
	.task = op_task, .started = op_started_counted, .running = op_running, .last_pid = op_last,
	.now = op_now, .pid_max = PID_MAX,
};

/* The kernel's next free id. */
static pid_t alloc_pid(void)
{
	pid_t p = last;
	for (int tries = 0; tries < PID_MAX; tries++) {
		p = p + 1 >= PID_MAX ? FIRST_PID : p + 1;
		if (tasks[p].state == NONE) {
			last = p;
			return p;
		}
	}
	abort();
}

static pid_t spawn_root(void)
{
	pid_t p = alloc_pid();
	tasks[p] = (struct task){ RUNNING, p, 1, ++clock_tick };
	return p;
}

/* Task tid of slot makes a clone (notified first, then made). */
static pid_t do_clone(struct lineage *L, unsigned slot, pid_t tid, bool thread)
{
	lineage_clone(L, slot, tid, thread ? LINEAGE_THREAD : LINEAGE_FORK);
	pid_t c = alloc_pid();
	pid_t tgid = tasks[tid].tgid;
	tasks[c] = (struct task){ RUNNING, thread ? tgid : c, thread ? tasks[tgid].ppid : tgid, ++clock_tick };
	return c;
}

/* Noise: another program on the host takes n ids. */
static void others(unsigned n)
{
	while (n-- > 0) {
		pid_t p = alloc_pid();
		tasks[p] = (struct task){ RUNNING, p, 1, ++clock_tick };
		tasks[p].state = NONE;
	}
}

/* Process pid exits: its children go to reaper, it stays a zombie. */
static void exit_process(pid_t pid, pid_t reaper)
{
	for (pid_t i = 0; i < PID_MAX; i++)
		if (tasks[i].state != NONE && tasks[i].tgid == i && tasks[i].ppid == pid)
			tasks[i].ppid = reaper;
	for (pid_t i = 0; i < PID_MAX; i++)
		if (tasks[i].state == RUNNING && tasks[i].tgid == pid && i != pid)
			tasks[i].state = NONE;
	tasks[pid].state = ZOMBIE;
}

static void reap(pid_t pid)
{
	tasks[pid].state = NONE;
}

static void reset(void)
{
	memset(tasks, 0, sizeof tasks);
	last = FIRST_PID;
}

/* One replica's tree, in steps: a server (root) forks a session per
 * client; each session starts threads (extra ones in some replicas), forks
 * a helper and double-forks a daemon. Sessions are made in client order
 * (as connections reach every replica in one order) but run their work in
 * an order of the replica's own. */
struct replica {
	unsigned slot;
	pid_t root, session[3], thread[3][4], helper[3], daemon[3];
};

static void build(struct lineage *L, struct replica *r, const int order[3], unsigned extra_threads, unsigned noise)
{
	r->root = spawn_root();
	lineage_start(L, r->slot, r->root);
	for (int c = 0; c < 3; c++) {
		r->session[c] = do_clone(L, r->slot, r->root, false);
		others(noise);
	}
	for (int k = 0; k < 3; k++) {
		int c = order[k];
		pid_t s = r->session[c];
		for (unsigned t = 0; t < extra_threads; t++) { /* the server's, on demand */
			pid_t x = do_clone(L, r->slot, r->root, true);
			tasks[x].state = NONE;
		}
		for (int t = 0; t < 2; t++)
			r->thread[c][t] = do_clone(L, r->slot, s, true);
		/* A thread of the session forks the helper. */
		r->helper[c] = do_clone(L, r->slot, r->thread[c][1], false);
		for (unsigned t = 0; t < extra_threads; t++) { /* the session's, after the others */
			pid_t x = do_clone(L, r->slot, s, true);
			tasks[x].state = NONE;
		}
		others(noise);
		pid_t mid = do_clone(L, r->slot, s, false);
		r->daemon[c] = do_clone(L, r->slot, mid, false);
		exit_process(mid, r->root - 1); /* to the replica's init */
		if (k == 1)
			reap(mid);
	}
}

static void test_interleavings(void)
{
	reset();
	struct lineage *L = lineage_new(3, &ops);
	CHECK(L != NULL, "a lineage of 3 slots");
	struct replica r[3] = { { .slot = 0 }, { .slot = 1 }, { .slot = 2 } };
	const int orders[3][3] = { { 0, 1, 2 }, { 2, 0, 1 }, { 1, 2, 0 } };
	for (unsigned i = 0; i < 3; i++)
		build(L, &r[i], orders[i], i, i * 7);
	/* Seen only now (first keyed calls come late): the daemons are
	 * orphans, some of their parents zombies, some gone. */
	bool same = true, distinct = true;
	uint64_t seen[64];
	unsigned nseen = 0;
	for (int c = 0; c < 3; c++) {
		pid_t *a[] = { &r[0].session[c], &r[0].thread[c][0], &r[0].thread[c][1], &r[0].helper[c], &r[0].daemon[c] };
		for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
			size_t off = (size_t)((char *)a[k] - (char *)&r[0]);
			uint64_t p0 = lineage_place(L, 0, *(pid_t *)((char *)&r[0] + off));
			for (unsigned i = 1; i < 3; i++) {
				uint64_t pi = lineage_place(L, i, *(pid_t *)((char *)&r[i] + off));
				if (pi != p0 || p0 == 0) {
					same = false;
					printf("#   client %d task %zu: slot 0 %016llx, slot %u %016llx\n", c, k,
					       (unsigned long long)p0, i, (unsigned long long)pi);
				}
			}
			for (unsigned j = 0; j < nseen; j++)
				if (seen[j] == p0)
					distinct = false;
			seen[nseen++] = p0;
		}
	}
	CHECK(same, "sessions, their threads, helpers forked by a thread and double-forked daemons: one place in "
		    "every replica, whatever the interleaving, extra threads and pids");
	CHECK(distinct, "and no two tasks share a place");
	CHECK(lineage_place(L, 0, r[0].root) == LINEAGE_ROOT && lineage_place(L, 2, r[2].root) == LINEAGE_ROOT,
	      "the program's place is the root's");
	CHECK(lineage_thread(L, 0, r[0].session[0]) == lineage_process(L, 0, r[0].session[0]) >> 2,
	      "a process's first thread has the process's place");
	CHECK(lineage_process(L, 1, r[1].thread[2][1]) == lineage_process(L, 1, r[1].session[2]) &&
		      lineage_process(L, 1, r[1].thread[2][1]) != 0,
	      "a thread's process key is its process's");
	CHECK(lineage_thread(L, 0, r[0].thread[1][0]) == lineage_thread(L, 2, r[2].thread[1][0]) &&
		      lineage_thread(L, 0, r[0].thread[1][0]) != lineage_thread(L, 0, r[0].thread[1][1]),
	      "threads keyed alike across replicas, apart within one");
	lineage_free(L);
}

static void test_wrap_and_reuse(void)
{
	reset();
	struct lineage *L = lineage_new(2, &ops);
	pid_t a = spawn_root();
	lineage_start(L, 0, a);
	others(PID_MAX - FIRST_PID - 40); /* near the end of the pid space */
	pid_t b = spawn_root();
	lineage_start(L, 1, b);
	pid_t ac[60], bc[60];
	for (int i = 0; i < 60; i++) {
		ac[i] = do_clone(L, 0, a, false);
		bc[i] = do_clone(L, 1, b, false);
		others(3);
	}
	bool wrapped = false, same = true;
	for (int i = 0; i < 60; i++) {
		wrapped |= i > 0 && ac[i] < ac[i - 1];
		same &= lineage_place(L, 0, ac[i]) == lineage_place(L, 1, bc[i]) && lineage_place(L, 0, ac[i]) != 0;
	}
	CHECK(wrapped, "the pid space wrapped during the test");
	CHECK(same, "children seen late across a wrap still match their fork");
	/* Child 5 of slot 0 ends; its id goes to a task of another tree;
	 * then a new child of the root reuses it. */
	uint64_t old = lineage_place(L, 0, ac[5]);
	pid_t id = ac[5];
	reap(id);
	last = id - 1;
	lineage_clone(L, 0, a, LINEAGE_FORK);
	pid_t n = alloc_pid();
	tasks[n] = (struct task){ RUNNING, n, a, ++clock_tick };
	CHECK(n == id, "the new child got the old one's id");
	uint64_t now = lineage_place(L, 0, n);
	lineage_clone(L, 1, b, LINEAGE_FORK);
	pid_t m = alloc_pid();
	tasks[m] = (struct task){ RUNNING, m, b, ++clock_tick };
	CHECK(now != old && now != 0 && now == lineage_place(L, 1, m),
	      "a reused id is a new task: the root's 61st child, in both replicas");
	/* A task of no slot's tree. */
	pid_t stranger = spawn_root();
	CHECK(lineage_place(L, 0, stranger) == 0 && lineage_process(L, 0, stranger) == 0,
	      "a task outside the tree has no place, key 0");
	CHECK(lineage_place(L, 0, 999999) == 0 && lineage_place(L, 0, -1) == 0 && lineage_place(L, 7, a) == 0,
	      "bad ids and slots: no place");
	lineage_free(L);
}

/* A known task's start time is read again only LINEAGE_RECHECK_NS after
 * it was last read; then an id reused by a new task names the new one. */
static void test_recheck_window(void)
{
	reset();
	now_ns = 1000;
	struct lineage *L = lineage_new(1, &timed_ops);
	pid_t a = spawn_root();
	lineage_start(L, 0, a);
	pid_t c = do_clone(L, 0, a, false);
	uint64_t first = lineage_place(L, 0, c);
	unsigned asked = started_asked;
	for (int i = 0; i < 100; i++) {
		now_ns += LINEAGE_RECHECK_NS / 200;
		(void)lineage_place(L, 0, c);
	}
	CHECK(first != 0 && started_asked == asked, "lookups within the window read no start time");
	now_ns += LINEAGE_RECHECK_NS;
	CHECK(lineage_place(L, 0, c) == first && started_asked == asked + 1,
	      "past the window the start time is read again, once");
	reap(c);
	last = c - 1;
	lineage_clone(L, 0, a, LINEAGE_FORK);
	pid_t n = alloc_pid();
	tasks[n] = (struct task){ RUNNING, n, a, ++clock_tick };
	now_ns += LINEAGE_RECHECK_NS;
	uint64_t again = lineage_place(L, 0, n);
	CHECK(n == c && again != first && again != 0, "the id reused past the window is the new task");
	lineage_free(L);
}

static void test_align(void)
{
	reset();
	struct lineage *L = lineage_new(2, &ops);
	pid_t v = spawn_root();
	lineage_start(L, 0, v);
	for (int i = 0; i < 25; i++) {
		pid_t c = do_clone(L, 0, v, false);
		(void)lineage_place(L, 0, c);
		exit_process(c, 1);
		reap(c);
		pid_t t = do_clone(L, 0, v, true);
		tasks[t].state = NONE;
	}
	/* A fresh server in slot 1: a clone or two of its own start-up. */
	pid_t f = spawn_root();
	lineage_start(L, 1, f);
	pid_t early = do_clone(L, 1, f, false);
	(void)lineage_place(L, 1, early);
	lineage_align(L, 1, 0);
	pid_t vc = do_clone(L, 0, v, false), fc = do_clone(L, 1, f, false);
	pid_t vt = do_clone(L, 0, v, true), ft = do_clone(L, 1, f, true);
	CHECK(lineage_place(L, 0, vc) == lineage_place(L, 1, fc) && lineage_place(L, 0, vc) != 0,
	      "after the join, the next fork of the fresh server is named as its sibling's");
	CHECK(lineage_thread(L, 0, vt) == lineage_thread(L, 1, ft) && lineage_thread(L, 0, vt) != 0,
	      "and the next thread");
	lineage_free(L);
}

/* Slot's root is a subreaper: a child A double-forks B0 and B1, which come
 * back to the root as children; a child P makes C with CLONE_PARENT (the
 * root's child in /proc) and then forks D. Seen after A has gone. */
static void adopted_tree(struct lineage *L, unsigned slot, unsigned noise, pid_t out[6])
{
	pid_t root = spawn_root();
	lineage_start(L, slot, root);
	pid_t a = do_clone(L, slot, root, false);
	others(noise);
	pid_t b0 = do_clone(L, slot, a, false);
	others(noise);
	pid_t b1 = do_clone(L, slot, a, false);
	exit_process(a, root);
	reap(a);
	pid_t p = do_clone(L, slot, root, false);
	lineage_clone(L, slot, p, LINEAGE_ADOPTED);
	pid_t c = alloc_pid();
	tasks[c] = (struct task){ RUNNING, c, root, ++clock_tick };
	others(noise);
	pid_t d = do_clone(L, slot, p, false);
	pid_t order[6] = { b1, c, b0, d, p, root };
	if (noise & 1) { /* first seen in another order */
		order[0] = d;
		order[3] = b1;
	}
	for (int i = 0; i < 6; i++)
		(void)lineage_place(L, slot, order[i]);
	pid_t all[6] = { b0, b1, c, d, p, root };
	memcpy(out, all, sizeof all);
}

static void test_adopted(void)
{
	reset();
	struct lineage *L = lineage_new(2, &ops);
	pid_t x[6], y[6];
	adopted_tree(L, 0, 0, x);
	adopted_tree(L, 1, 5, y);
	bool same = true, distinct = true;
	for (int i = 0; i < 6; i++) {
		uint64_t px = lineage_place(L, 0, x[i]);
		same &= px != 0 && px == lineage_place(L, 1, y[i]);
		for (int j = 0; j < i; j++)
			distinct &= px != lineage_place(L, 0, x[j]);
	}
	CHECK(same, "under a subreaper, double-forked children and a CLONE_PARENT child: one place in both replicas");
	CHECK(distinct, "and each its own (not its maker's sibling's, not its maker's)");
	lineage_free(L);
}

static void test_bounded(void)
{
	reset();
	struct lineage *L = lineage_new(1, &ops);
	pid_t root = spawn_root();
	lineage_start(L, 0, root);
	size_t most = 0;
	bool placed = true;
	for (int i = 0; i < 20000; i++) {
		pid_t t = do_clone(L, 0, root, i & 1);
		placed &= lineage_place(L, 0, t) != 0;
		if (t != root) {
			if (i & 1)
				tasks[t].state = NONE;
			else {
				exit_process(t, 1);
				reap(t);
			}
		}
		if (lineage_known(L, 0) > most)
			most = lineage_known(L, 0);
	}
	CHECK(placed, "20000 short-lived tasks, each placed");
	CHECK(most < 1024, "the table stays bounded as they end (at most %zu known)", most);
	lineage_free(L);
	CHECK(lineage_place(NULL, 0, 1) == 0 && lineage_process(NULL, 0, 1) == 0, "no lineage: no place");
	lineage_clone(NULL, 0, 1, LINEAGE_FORK);
	lineage_align(NULL, 0, 1);
}

int main(void)
{
	test_interleavings();
	test_wrap_and_reuse();
	test_recheck_window();
	test_align();
	test_adopted();
	test_bounded();
	return tap_done();
}
