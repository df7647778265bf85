/* lineage.h — each task of a replica named by its place in the replica's
 * process tree, so that the n-th process (or thread) a task starts in one
 * replica is matched with the n-th one the same task starts in every other,
 * however the replicas' processes interleave.
 *
 * A place is a 64-bit name: the program's own is fixed (LINEAGE_ROOT); the
 * n-th process a process forks is named from its parent's place, "fork"
 * and n; the n-th thread it starts, from its place, "thread" and n (a
 * process's first thread has the process's place). Names are hashes, not
 * numbers handed out, so that every replica, a replacement, a fresh server
 * and a recording's replay all name a place alike without a table; the
 * keys cut from them (lineage_process, lineage_thread) are 24 and 22 bits,
 * so two places may share a key now and then: their calls then form one
 * sequence, as all of a replica's calls of a kind did before (never one
 * value twice: a key's stream goes on).
 *
 * Which clone made a task is not something the kernel says after the
 * fact: it is found from clone calls seen as they are made (lineage_clone,
 * on the seccomp notification, before the kernel makes the task). Each
 * clone notes the last pid given in diehard's pid namespace then (its
 * snapshot); the task a clone makes gets a higher pid, and the next clone
 * of the same thread, made once this one returned, a snapshot at least as
 * high. So the clone that made task t is the last one of its parent
 * (its process, for a thread) whose snapshot precedes t: pids wrap at
 * pid_max, and "precedes" counts forward from the snapshot, within what
 * was given since. A clone record, once it made a task, names no other.
 * Clones made at once by two threads of one process may be told apart
 * wrongly, and so may a clone the kernel restarts (a signal came while it
 * was notified) that tasks.c did not see coming: it is counted twice
 * (libdiehard blocks signals around the kernel's fork: allocator/forkmask.c).
 *
 * A process whose parent is gone before it is first seen (a daemon's
 * double fork) was reparented, and a CLONE_PARENT child is its maker's
 * parent's in /proc: both are matched against the slot's last forks whose
 * maker is gone, or that were CLONE_PARENT (forks notified in the same
 * moment by two makers that are both gone may be swapped).
 *
 * Tasks are known by their host id and start time (ids are reused); a
 * task's place is found when it is first seen: at its first clone or its
 * first keyed call. A known task's start time is read again at a lookup
 * only if it was last read LINEAGE_RECHECK_NS before or more: an id is
 * given again only once the namespace's ids went round pid_max (at least
 * 32768 tasks made), which no machine does in that time, so within it an
 * id names the task it named (reading /proc at every keyed call was a
 * fifth of diehard's time under a server that reads the clock per
 * request). Known tasks that ended are swept as their number
 * doubles.
 *
 * Single-threaded, like the loop that owns it. What it reads of /proc
 * comes through ops, so that the rules are tested alone (tests/unit). */
#ifndef DIEHARD_LINEAGE_H
#define DIEHARD_LINEAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define LINEAGE_ROOT 0x6469656861726431ull /* the program's place */
#define LINEAGE_RECHECK_NS 10000000ull   /* 10 ms */

struct lineage_task {
	pid_t tgid;     /* its process */
	pid_t ppid;     /* its process's parent */
	uint64_t start; /* its start time (distinguishes reused ids) */
};

struct lineage_ops {
	/* What /proc says of task tid: false when it is gone. */
	bool (*task)(void *ctx, pid_t tid, struct lineage_task *t);
	/* Task tid's start time alone, or 0 when it is gone. */
	uint64_t (*started)(void *ctx, pid_t tid);
	/* Whether process pid, started at start, still runs (neither gone
	 * nor a zombie: a process that exited has no children left). */
	bool (*running)(void *ctx, pid_t pid, uint64_t start);
	/* The last pid given in diehard's pid namespace. */
	pid_t (*last_pid)(void *ctx);
	/* A monotonic time in nanoseconds, or NULL: then a known task is
	 * checked against /proc (started) at every lookup. */
	uint64_t (*now)(void *ctx);
	pid_t pid_max; /* where ids wrap */
	void *ctx;
};

struct lineage;

/* nslots slots, none started. NULL when out of memory. */
struct lineage *lineage_new(unsigned nslots, const struct lineage_ops *ops);
void lineage_free(struct lineage *L);

/* Slot's program, task root, starts (what the slot knew before is
 * forgotten). */
void lineage_start(struct lineage *L, unsigned slot, pid_t root);

/* Task tid of slot makes a clone: a process, a thread, or a process whose
 * parent will be tid's own parent (CLONE_PARENT). A clone the kernel will
 * restart (a signal is pending) must not be told: it comes again. */
enum lineage_clone { LINEAGE_FORK, LINEAGE_THREAD, LINEAGE_ADOPTED };
void lineage_clone(struct lineage *L, unsigned slot, pid_t tid, enum lineage_clone kind);

/* Task tid's place, 0 when it cannot be known (not a task of the slot's
 * tree, or gone). */
uint64_t lineage_place(struct lineage *L, unsigned slot, pid_t tid);

/* Keys cut from places: task tid's process's (24 bits), task tid's own
 * (22 bits); never 0 for a known place, 0 for an unknown one. */
uint32_t lineage_process(struct lineage *L, unsigned slot, pid_t tid);
uint32_t lineage_thread(struct lineage *L, unsigned slot, pid_t tid);

/* A fresh server in slot to joins its siblings: each process of it that
 * shares a place with a process of slot from counts its clones from the
 * higher of the two, so that what both start from now on is named alike. */
void lineage_align(struct lineage *L, unsigned to, unsigned from);

/* Tasks known in slot (tests, the report). */
size_t lineage_known(const struct lineage *L, unsigned slot);

#endif
