/* logs.h — append-only files voted as streams: a daemon's log line reaches
 * the real log once, as it comes, as a quorum wrote it.
 *
 * A file a replica opened with O_APPEND in its views (a daemon's access
 * log, a shell's >>) is a stream like stdout: what each replica appended
 * to its own version of it (in its upper layer) past the file's size when
 * the stream began is voted with voter.h (the longest prefix a quorum
 * shares, cut at its last newline) and appended to the real file, once,
 * while the run goes on. The seccomp filter notifies O_APPEND opens (the
 * library prefix too); the listener goes on at once and asks for a look at
 * the thread's descriptors at the next tick, where /proc/TID/fdinfo says
 * which are in append mode and /proc/TID/fd which real path each names.
 *
 * Like a commit point (points.h), a stream appends only while no
 * participant's views would show the real file change (each has its own
 * version of it: changes_masks), keeps the path's start version in the
 * start-state layer before its first append (pre.h), and is no verdict:
 * a replica whose bytes contradict what a quorum appended leaves the
 * stream (outvoted, not killed: a log line's time can differ by when it
 * came), and a stream with no quorum left stops (unsettled, said); in
 * both cases the end's vote commits the whole file as it does any other.
 * A replica that joins later (a replacement replaying, or one that opened
 * the file late) is compared with what was appended, read back from the
 * real file, before it votes; a fresh server (--stateless) is not compared
 * but set to it as it joins (logs_rebase). A file whose real version is not a plain
 * regular file of one link, or whose directory the real tree lacks, is not
 * streamed (the end commits it).
 *
 * Invariants: a stream's committed bytes lie in the real file at [base,
 * base + committed) and were agreed by a quorum of voters; a member votes
 * only once its bytes up to committed were compared; at most one member
 * per slot, of the process the slot holds. */
#ifndef DIEHARD_LOGS_H
#define DIEHARD_LOGS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sup;
struct logs;
struct pre;
typedef struct json_t json_t;

/* The streams of a run whose replicas have views; rep: the report's
 * "files" object, where "logs" goes; pre: the start-state layer. */
struct logs *logs_new(struct sup *S, json_t *rep, struct pre *pre);
void logs_free(struct logs *L);
/* Thread tid of slot's process is opening a file with O_APPEND: its
 * descriptors are looked at from the next tick. */
void logs_opening(struct logs *L, unsigned slot, pid_t tid);
/* A sync (fsync, fdatasync, msync) by slot's replica of path, whose
 * version is open at version: when path is a stream the replica is a
 * member of, the call is held until the stream appended the bytes the
 * replica's file holds now and the real file is synced (or the stream
 * stops, or the replica leaves it), and true; false: not a stream's. */
bool logs_sync(struct logs *L, unsigned slot, uint64_t gen, uint64_t id, const char *path, int version);
/* Whether path is voted as a stream now (a rename of it is no point: the
 * stream sees the rotation and stops). */
bool logs_streamed(const struct logs *L, const char *path);
/* Slot's replica ended, its changes not read yet (files_ended): in a
 * serving run, what it appended to a stream past the committed bytes,
 * where it holds a sibling's lines (one whose changes were read: final) in
 * another order, takes the sibling's order in place (outorder.c), so that
 * the end's vote finds their versions alike. */
void logs_ended(struct logs *L, unsigned slot);
/* Every held sync answered (a stop). */
void logs_release(struct logs *L);
/* The supervisor's tick: new streams found, each replica's new bytes
 * read and voted, the agreed ones appended. */
void logs_tick(struct logs *L);
/* Whether the voters stand at one point in every stream: all they wrote
 * read, and what is past the appended bytes the same in each (a fresh
 * server's quiet point waits for that, --timeout at most); voters behind
 * the appended bytes are not waited for. */
bool logs_quiet(struct logs *L);
/* Slot's replica, a fresh server (--stateless), joins the vote: a fresh
 * server was never compared with the streams (its start-up appends are
 * its own); its version of each is made the real file's bytes so far and
 * the voters' bytes past them, in place, and it votes from the stream's
 * committed point on. force: the voters stood at no one point within
 * --timeout; it leaves the streams where they do not. */
void logs_rebase(struct logs *L, unsigned slot, bool force);
/* Slot's replica, a replacement that replayed the connection log, reached
 * the time of now (net_past): what its versions of the streams hold now
 * re-lived the past, where digits that differ from the real file's (its
 * replay read other times) are made the real file's (pastdigits.h); past
 * that, its bytes are compared as any voter's. */
void logs_past_ended(struct logs *L, unsigned slot);

#endif
