/* caps.h — caps per replica on tasks and memory, so that a fork bomb or a
 * memory hog in one replica stays inside it: never diehard, the other
 * replicas or the host.
 *
 * Each replica (its init and everything it starts) gets a cgroup of its
 * own, made before its first process runs anything, with the run's caps:
 *   cgroup v2, where diehard's cgroup has the pids and memory controllers
 *     and diehard may make children: systemd's Delegate=yes, or the root
 *     cgroup (the no-internal-processes rule: diehard first moves itself
 *     into a leaf of its own, RUN/supervisor, when it is alone in its
 *     cgroup). pids.max, memory.max, memory.swap.max 0 and memory.oom.group
 *     (the OOM killer takes the replica whole). The replica is cloned into
 *     its cgroup (clone3 CLONE_INTO_CGROUP): no migration at all.
 *   cgroup v1, where the pids and memory hierarchies are writable (root):
 *     pids.max, memory.limit_in_bytes (and, with swap, memory.memsw.
 *     limit_in_bytes: no swap past it). The cloned child makes the
 *     replica's directories, writes the caps, then writes 0 into their
 *     `tasks` files, first thing: so the replicas make theirs at once, and
 *     a thread moving itself is migrated without the kernel's global
 *     threadgroup lock, whose first writer waits for an RCU grace period
 *     (10 ms here; writing a pid to cgroup.procs takes that lock).
 *   rlimits otherwise, per process: RLIMIT_DATA for memory (private
 *     writable mappings: what programs commit, not the address space they
 *     reserve, which RLIMIT_AS would count, breaking Java, Go and this
 *     allocator), and RLIMIT_NPROC for tasks only where it counts the
 *     replica alone: in a user namespace of its own (the kernel counts
 *     NPROC per user namespace and uid) and not for uid 0 (never counted).
 * A replica's cgroup is <diehard's cgroup>/diehard-<pidns>-<pid>/r<n> under
 * v2 (RUN = .../diehard-<pidns>-<pid>), <diehard's cgroup>/diehard-<pidns>-
 * <pid>-r<n> in each v1 hierarchy used (no RUN: a mkdir and an rmdir fewer
 * per hierarchy and run). A replica's is removed at its end, RUN at the end
 * of the run, and all by an atexit of the process that made them. A diehard killed outright leaves empty ones: the next diehard
 * started in the same cgroup removes those whose diehard (of its pid
 * namespace) is gone.
 *
 * Over a cap: pids.max refuses the fork and counts it in pids.events; the
 * memory controller's OOM killer kills (one process under v1, the whole
 * cgroup under v2) and counts it. caps_replica_over reads the counters;
 * the supervisor (overcap.c) then kills the replica. Under rlimits there is
 * nothing to read: the fork fails (EAGAIN) or the allocation (ENOMEM), and
 * the vote judges what the program does then. */
#ifndef DIEHARD_CAPS_H
#define DIEHARD_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

enum caps_kind { CAPS_TASKS, CAPS_MEMORY, CAPS_KINDS };

/* How a cap is held. */
enum caps_by { CAPS_BY_NONE, CAPS_BY_CGROUP2, CAPS_BY_CGROUP1, CAPS_BY_RLIMIT };

struct caps;
struct caps_replica;

/* What the start of one replica needs (spawn.c, between fork and exec):
 * made by caps_replica_new. */
struct caps_spawn {
	int cgroup_fd;              /* cgroup v2: the replica's directory, to clone into; -1 */
	bool v2_move;               /* no clone3 here: the child moves itself into it */
	struct {                    /* cgroup v1, per hierarchy (pids, memory): */
		char dir[PATH_MAX - 64]; /* the replica's directory to make and enter; "" */
		char cap[24];       /* the cap to write there, in decimal */
	} v1[CAPS_KINDS];
	bool memsw;                 /* v1 memory: memory.memsw.limit_in_bytes too */
	uint64_t data;              /* RLIMIT_DATA to set (bytes); 0: none */
	uint64_t nproc;             /* RLIMIT_NPROC to set, only in a user namespace of its own; 0 */
};

/* The caps of a run: max_tasks tasks and max_memory bytes per replica, 0
 * for none; or, max_memory 0 and memory_share > 0, a memory_share-th of
 * the memory the host gives diehard (MemTotal, or its cgroup's limit, an
 * ancestor's included, where that is lower), in whole MiB, at least
 * CAPS_MEMORY_MIN. userns: the replicas get a user namespace of their own
 * (for RLIMIT_NPROC). Chooses the mechanism of each cap (above), making
 * the run's directories. NULL only when out of memory: a cap that cannot
 * be held is CAPS_BY_NONE, and caps_how says why. */
struct caps *caps_new(uint64_t max_tasks, uint64_t max_memory, unsigned memory_share, bool userns);
#define CAPS_MEMORY_MIN ((uint64_t)16 << 20)

/* The replicas' user namespaces came or went (the sandbox fell back): the
 * task cap by RLIMIT_NPROC holds only with them. */
void caps_set_userns(struct caps *c, bool userns);

enum caps_by caps_by(const struct caps *c, enum caps_kind k);
uint64_t caps_limit(const struct caps *c, enum caps_kind k);
/* How the cap is held, in words ("cgroup v1 pids.max", "RLIMIT_DATA, per
 * process"), or why there is none. */
const char *caps_how(const struct caps *c, enum caps_kind k);

/* The next replica's cgroups (if any) and what its start needs. NULL with
 * errno when a cgroup cannot be made; NULL and errno 0 when no cgroup is
 * used (sp still filled: rlimits). */
struct caps_replica *caps_replica_new(struct caps *c, struct caps_spawn *sp);
/* The start is over (the child has its copies): closes sp's descriptors. */
void caps_spawn_done(struct caps_spawn *sp);

/* In the cloned child, before anything else: makes the replica's v1
 * cgroups and enters them, and its rlimits (RLIMIT_NPROC only if own_userns). Sandboxed
 * (the child is the init of namespaces of its own), also a cgroup
 * namespace rooted at its cgroup, where the kernel allows one: every
 * replica then reads "/" as its cgroup in /proc/self/cgroup, as it reads
 * pid 2 as its pid, and under cgroup v2 (nsdelegate) it cannot move itself
 * out. 0, or an errno. Async-signal-safe. */
int caps_enter(const struct caps_spawn *sp, bool sandboxed, bool own_userns);
/* clone(2) as fork (no new stack) with flags, into sp's cgroup v2
 * directory (clone3 CLONE_INTO_CGROUP): the child returns 0. For
 * sp->cgroup_fd >= 0 only. Where clone3 is refused outright (ENOSYS: an
 * older kernel, or a seccomp filter such as systemd's RestrictNamespaces=,
 * which cannot look at clone3's flags), a plain clone, and the child moves
 * itself in first thing (caps_enter: the whole process, through
 * cgroup.procs, which costs the kernel an RCU grace period). */
pid_t caps_clone(struct caps_spawn *sp, unsigned long flags);
/* Whether caps_clone's errno err is the cgroup's refusal (its directory,
 * permission, domain, pids.max), not the namespaces'. */
bool caps_clone_refused(int err);

/* Whether the replica went over a cap, as its cgroup's counters say: the
 * kind (and why, in words, into why), or -1. */
int caps_replica_over(struct caps_replica *cr, char *why, size_t size);
/* Kills every process left in the replica's cgroups (for a replica
 * without an init of its own, whose children may have left its process
 * group). */
void caps_replica_kill(struct caps_replica *cr);
/* The replica ended: its cgroups are removed, now or (while processes
 * are still in them) by caps_tick or caps_free; kill: caps_replica_kill
 * first. cr is the caps' from now on. */
void caps_replica_end(struct caps_replica *cr, bool kill);
/* Removes the cgroups of ended replicas that have emptied since. */
void caps_tick(struct caps *c);
/* The end: kills what is left in every replica's cgroup, removes them and
 * the run's directories. NULL is fine. */
void caps_free(struct caps *c);

/* "64M", "6G", or bytes (as the options take them): the shortest exact
 * name of v bytes, into buf. */
void caps_size_text(char *buf, size_t size, uint64_t v);

#endif
