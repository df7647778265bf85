/* virt.h — every replica sees the same world: the supervisor answers each
 * replica's clock reads, getrandom calls and opens of the random devices
 * (filter.h says which calls reach it) so that the n-th call of a kind
 * returns the same in every replica (ndlog.h says how calls are matched).
 * Clock values are real: the first replica to make a call reads the clock.
 * Random bytes come from a per-run ChaCha20 key (chacha.h, entropy.h).
 * Clock reads of a replica with libdiehard.so loaded mostly never come
 * here: the replicas agree on them in shared memory (fastclock.h), and
 * only what falls back, and the reads of programs without the library, are
 * notified; both are numbered by the same per-slot counts.
 * docs/NONDETERMINISM.md lists what this covers and what it does not.
 * With a private network, the replicas' listen, connect and UDP socket
 * calls come this way too (netcalls.h, docs/NETWORK.md). */
#ifndef DIEHARD_VIRT_H
#define DIEHARD_VIRT_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sup;
struct virt;

/* Builds the filter and the run's key and log; exits 125 on failure. */
struct virt *virt_new(struct sup *S);


/* Serves slot i's listener fd from now on (virt owns it). A slot used
 * before starts from the first call of every kind again (a replacement
 * replays the log). */
void virt_attach(struct virt *V, unsigned i, int listener);

/* A call a handler held (files.h's points) goes on now in the kernel
 * (err 0) or fails with err, if slot i's listener is still the one of
 * generation gen and the call still waits: else nothing (false: its caller
 * is gone, or was interrupted for good). */
bool virt_resume(struct virt *V, unsigned i, uint64_t gen, uint64_t id, int err);
/* That held call answered 0 without going on (diehard made it itself):
 * false when it no longer waits. */
bool virt_reply(struct virt *V, unsigned i, uint64_t gen, uint64_t id);
/* Whether that held call still waits for its answer. */
bool virt_held(struct virt *V, unsigned i, uint64_t gen, uint64_t id);

/* Slot i's process is about to be replaced: its counts go to the report
 * and its listener is closed. */
void virt_detach(struct virt *V, unsigned i);

/* The fast clock path (fastclock.h; NULL/-1/0 when off): slot i's
 * variables (NULL-terminated, owned by V, valid until the next call: the
 * same for every slot), slot i's page's fd and the pages' directory's
 * (*dir) for spawn.h (the slot is taken as in use from then on), the
 * filter's markers (filter.h). */
char *const *virt_replica_env(struct virt *V, unsigned i);
int virt_clock_fds(struct virt *V, unsigned i, int *dir);
void virt_clock_marks(const struct virt *V, uint64_t *pass, uint64_t *ask, uint64_t *exec);

/* The run's random key (CHACHA_KEY_BYTES) and its log of answers: what a
 * recording keeps (ci/record.c). */
const uint8_t *virt_key(const struct virt *V);
struct ndlog *virt_log(const struct virt *V);

/* Slot i's wall and monotonic clocks (not its CPU clocks or random bytes)
 * jump to the front of the log: a replacement that has replayed the past
 * and is about to serve live requests reads the time of now, as the others
 * do. virt_clock_reads: how many wall or monotonic reads slot i made, to
 * tell when it has read the time of now since. */
void virt_clocks_now(struct virt *V, unsigned i);
/* A replacement server whose clocks reached now (after virt_clocks_now)
 * reads them in its own process from here, as an original does: its
 * slot's fast path on again, its event loops' threads in the lanes the
 * originals' read (take.c). Until then it asks diehard for every read,
 * and the whole server goes at its pace. Not for a slot the path was
 * turned off for on its own account (its page written over, a clock
 * dropped from the log), nor during a stop's freeze. */
void virt_fast_join(struct virt *V, unsigned i);
/* Every kind of slot i's calls (clocks, random bytes) jumps to the front:
 * a fresh server (--stateless) joins where the others are, not where they
 * started; its counts skip the past, so the end's count check leaves it
 * out. */
void virt_calls_now(struct virt *V, unsigned i);
/* diehard forwarded a stop (SIGTERM, SIGINT): for the next STOP_FREEZE
 * seconds every wall-clock read of every replica (realtime, gettimeofday,
 * time) gets the wall time of now, outside the log. A daemon's stopping
 * lines (redis's "User requested shutdown", "DB saved on disk") are
 * written at different moments in each replica, each after a number of
 * reads its event loop made as the signal found it: matched by index,
 * their times would differ by milliseconds and no majority would agree.
 * Monotonic clocks go on (timeouts work); a wait measured in wall time
 * lasts at most STOP_FREEZE longer. */
#define STOP_FREEZE 1.0
void virt_stop_clocks(struct virt *V);
uint64_t virt_clock_reads(const struct virt *V, unsigned i);

/* Whether a new replica could replay every logged value (nothing dropped). */
bool virt_replayable(const struct virt *V);

/* Replica i left the vote (killed: its listener is closed too) or exited:
 * its position no longer keeps log entries. */
void virt_retire(struct virt *V, unsigned i, bool killed);

/* At the end: compares how many calls of each kind the replicas that
 * finished made, and writes the counts into the report. */
void virt_finish(struct virt *V);

/* A wait status of pid from our reaping loop: true when it was a process
 * traced to its exec (images.c) and is handled (its new image patched at the
 * exec stop, then left to run untraced), false when the loop should look
 * at it as usual. */
bool virt_traced(struct virt *V, pid_t pid, int wstatus);

#endif
