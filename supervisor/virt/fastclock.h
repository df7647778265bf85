/* fastclock.h — diehard's side of the in-replica clock fast path
 * (allocator/clockpage.h, allocator/clocks.c; docs/NONDETERMINISM.md).
 *
 * A replica whose vDSO leads into libdiehard.so reads the system clocks,
 * gettimeofday and time from a log in memory it shares with the other
 * replicas and with diehard, without a system call when some replica
 * already read the value. This module owns that memory: it creates it (a
 * memfd each replica maps, its own page writable, the others read-only),
 * gives each replica its DIEHARD_CLOCKS variable and the marker its
 * leaders' real clock reads carry past the filter, answers the reads that
 * still reach diehard (a fallback naming its entry, or a call of a program
 * without the library: both take their index from the slot's page, so both
 * paths number reads alike), and brings published entries into the
 * nondeterminism log (harvest), checking each against the real clock.
 *
 * The authoritative copy of every entry diehard answered or harvested is
 * in its log (ndlog.h); the shared pages only carry entries from the
 * replica that read them to the others until then. */
#ifndef DIEHARD_FASTCLOCK_H
#define DIEHARD_FASTCLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "clockpage.h"

struct fastclock;

/* The least --call-log the fast path runs with: the log keeps every entry
 * from the first read of each slot not yet done (a thread held up inside
 * a read, its siblings reading on: a ring or more behind their count), and
 * a cap below a few rings would drop what such a read still asks for. */
#define FASTCLOCK_MIN_LOG (4 * CP_RING)

/* The fd numbers a replica finds its own page and the pages' directory at
 * (spawn.c puts them there). */
#define FASTCLOCK_FD 1000
#define FASTCLOCK_DIR_FD 1001

/* For nslots replica slots, under a log of log_cap entries per clock (a
 * count more than half of it past every other slot's is damage). NULL
 * (said with -v) when it cannot be set up: every clock read then takes the
 * notify path. */
struct fastclock *fastclock_new(unsigned nslots, const uint64_t images_key[2], uint64_t log_cap);

/* Slot i's page, read-write (close-on-exec here: spawn.c places a copy at
 * FASTCLOCK_FD in the replica; its header names the slot), the pages'
 * directory, read-only (at FASTCLOCK_DIR_FD), the replicas' variable
 * (NAME=value, owned by F: the same for every slot), and the filter's two
 * markers (filter.h): *pass, of a call that stays in the kernel (a
 * leader's real read, an open libdiehard checked or makes of a page), and
 * *ask, of one that asks diehard (a fallback, an open of a random device). */
int fastclock_fd(const struct fastclock *F, unsigned i);
int fastclock_dir(const struct fastclock *F);

/* Slot i is about to have a process: its page is looked at from now on
 * (clockpage.h's used). */
void fastclock_use(struct fastclock *F, unsigned i);

/* The slots whose proposals stalled the others too often (a bit each):
 * their pages are damaged, or they lie; the caller kills them. */
uint64_t fastclock_stalled(const struct fastclock *F);
const char *fastclock_env(struct fastclock *F);
void fastclock_marks(const struct fastclock *F, uint64_t *pass, uint64_t *ask);

/* Whether a notified call's argument is the fallback marker (then the next
 * argument is the entry's index). */
bool fastclock_asks(const struct fastclock *F, uint64_t arg);

/* Whether a notified wall read's argument is the lane marker: then the
 * next argument is where the calling thread keeps its lane (clocks.c's
 * thread-local struct clockpath_lane), which diehard fills in when it
 * names the thread for a lane. */
bool fastclock_lane_asked(const struct fastclock *F, uint64_t arg);

/* The index of slot i's notified read of key (cp_served): the entry a
 * fallback asks for, if it is one the slot has reached, else the slot's
 * next. */
uint64_t fastclock_index(struct fastclock *F, unsigned i, unsigned key, const uint64_t *asked);

/* Whether slot i's read index n of key is too far past the log, or more
 * than half the log's cap past every other slot's count, to be a sound
 * count's (the slot's page is damaged, or it pushes the log on purpose):
 * not settled, answered apart. */
bool fastclock_too_far(const struct fastclock *F, unsigned i, unsigned key, uint64_t n);

/* Whether read index n of slot i is more than a ring and a slot's threads
 * in flight past every other live slot's count: sound (a thread polling
 * the clock reads more than its siblings) but not settled into the log,
 * whose front would move away from what the others still need; the
 * caller answers it with a real value of its own. */
bool fastclock_beyond(const struct fastclock *F, unsigned i, unsigned key, uint64_t n);

/* Entries of key below this are in the caller's log. */
uint64_t fastclock_harvested(const struct fastclock *F, unsigned key);

/* Puts entry n of key, led by slot by (nslots: diehard), into the caller's
 * log. Entries reach it in order, each once. */
typedef void fastclock_put_fn(unsigned key, uint64_t n, const struct cp_value *v, unsigned by, void *arg);

/* Settles every entry of key up to n (cp_settle; what diehard leads, it
 * reads from the real clock itself) and puts each: 0, or -1 when the real
 * clock could not be read or n is too far past the log to be a sound
 * count's (nothing settled). */
int fastclock_settle(struct fastclock *F, unsigned key, uint64_t n, fastclock_put_fn *put, void *arg);

/* Puts every entry published since the last harvest, every key. */
void fastclock_harvest(struct fastclock *F, fastclock_put_fn *put, void *arg);

/* How long until the next harvest (microseconds), now being sup_now():
 * cp_harvest_pace of the entries the log gained since the last call
 * (harvests and fallbacks alike). */
uint64_t fastclock_harvest_delay(struct fastclock *F, double now);

/* The slots whose entries failed their clock's bounds since the last
 * call (a bit each): forged, or garbage that passed the checksum. */
uint64_t fastclock_forged(struct fastclock *F);
/* The first entry slot i forged since (key and index). */
void fastclock_forged_entry(const struct fastclock *F, unsigned i, unsigned *key, uint64_t *n);

/* Slot i's reads of key. */
uint64_t fastclock_count(const struct fastclock *F, unsigned i, unsigned key);
/* Once no process of slot i is left: the sum over the values it consumed
 * of key (the terms of its completion marks: cp_floor, cp_sum_rest) in
 * *sum; false when it is not to be compared: it may miss terms (a read
 * that never finished, or finished a CP_DONE behind its slot's count; a
 * count moved to the front) or the slot read values outside the log
 * (fastclock_unsummed). */
bool fastclock_sum(struct fastclock *F, unsigned i, unsigned key, uint64_t *sum);

/* Slot i read a value of key outside the log (its own real one): its sum
 * is not compared (reset with fastclock_reset). */
void fastclock_unsummed(struct fastclock *F, unsigned i, unsigned key);

/* A new process in slot i: its reads start from 0 again (it replays the
 * log: entries it reaches that the ring no longer holds come from diehard). */
void fastclock_reset(struct fastclock *F, unsigned i);

/* Slot i's next read of key is the front: an entry nobody has reached
 * (a damaged count, too far ahead, comes back to it too). */
void fastclock_to_front(struct fastclock *F, unsigned i, unsigned key);

/* Slot i's read n of key is answered with value v (cp_done; NULL: a real
 * value of its own, outside the log: fastclock_unsummed); the slot's first read of
 * key not yet done, below count (its count): the log keeps the entries
 * from there for it (cp_floor), and the terms of the marks passed add to
 * the slot's sum. */
void fastclock_done(struct fastclock *F, unsigned i, unsigned key, uint64_t n, const struct cp_value *v);
uint64_t fastclock_floor(struct fastclock *F, unsigned i, unsigned key, uint64_t count);

/* The slots that pace the others (clockpage.h): of live (a bit per
 * slot: in the vote, not exited), those the path is on for whose counts
 * keep up with the log, or keep moving (now: seconds, any fixed origin). */
void fastclock_pace(struct fastclock *F, uint64_t live, double now);

/* Slot i makes every read the notify way from now on (a server's: its
 * wall clocks are matched per thread, take.c). */
void fastclock_off(struct fastclock *F, unsigned i);
/* Slot i reads through its page again (a replacement that caught up:
 * virt_fast_join). */
void fastclock_on(struct fastclock *F, unsigned i);
/* The same, and the others no longer look at its page (it was found
 * written over: clockpage.h's ignore), until its next process. */
void fastclock_ignore(struct fastclock *F, unsigned i);
bool fastclock_is_off(const struct fastclock *F, unsigned i);

/* From now on every slot's leaders read the real clock by system call
 * rather than through the vDSO's own code (vdso.h: the vDSO was seen
 * making the system call itself); whether that was said. */
void fastclock_real_by_syscall(struct fastclock *F);
bool fastclock_is_real_by_syscall(const struct fastclock *F);

/* Entries some slot reached but nobody published (a reader killed between
 * claim and publication): settled at the end, so the log holds every
 * entry a count says was read. */
void fastclock_settle_all(struct fastclock *F, fastclock_put_fn *put, void *arg);

/* AT_RANDOM's bytes for slot's next program image (the count in its
 * page, shared with libdiehard's early.c). */
void fastclock_at_random(struct fastclock *F, unsigned slot, uint8_t out[16]);

/* The entries' checksum key (a graft's blob needs it: graft.h). */
uint64_t fastclock_secret(const struct fastclock *F);

/* exec.c's marker: an exec that keeps libdiehard (its image patches
 * itself and is not stopped). */
uint64_t fastclock_exec_mark(const struct fastclock *F);

/* The program images slot has started (its page's count). */
uint64_t fastclock_images(const struct fastclock *F, unsigned slot);

/* Slot i is a server (it listens): its base wall keys are read per
 * thread, in the lanes diehard names, or through diehard; what it follows
 * of a monotonic key or a lane must be fresh (clockpage.h). Ended by
 * fastclock_off (the notify path for everything) or the slot's reset. */
void fastclock_serve(struct fastclock *F, unsigned i);
bool fastclock_serving(const struct fastclock *F, unsigned i);

/* Lanes (clockpage.h). A lane's key starts in slot i at read n (the
 * thread's reads of it so far, through diehard): its count and floor;
 * its sum is not compared. */
void fastclock_lane_count(struct fastclock *F, unsigned i, unsigned key, uint64_t n);
/* A lane's key, given while the log already holds front entries of the
 * thread's reads: entries below front are in the log, and entry front - 1
 * (last, NULL: none kept) is published in diehard's page, where a leader
 * of front looks for the entry before its own. Once, before any slot
 * reads the key. */
void fastclock_lane_seed(struct fastclock *F, unsigned key, uint64_t front, const struct cp_value *last);
/* Names thread tid (its id in slot i's pid namespace; 0: none) lane's. */
void fastclock_lane_name(struct fastclock *F, unsigned i, unsigned lane, uint32_t tid);
/* While on, lane's thread in slot i makes its wall reads through diehard. */
void fastclock_divert(struct fastclock *F, unsigned i, unsigned lane, bool on);
bool fastclock_diverted(const struct fastclock *F, unsigned i, unsigned lane);

#endif
