/* points.h — commit points: a long-running program's files made durable
 * and visible when it says so, once, as a quorum agreed.
 *
 * A run-to-completion program's file changes are voted and committed when
 * it ends (files.h). A program that runs for long makes files durable as
 * it goes: each fsync or fdatasync of a file the replica changed in its
 * views (a database's commit, an editor's save), or msync (MS_SYNC) of a
 * shared mapping of one, is a point, its version the file's bytes, size,
 * mode and owner. The replica's call is held until a quorum of voters
 * made the same point (the same path, the same number of syncs of it so
 * far) with the same version, and no other replica of the run would see
 * the real path change (each has its own copy of it in its upper layer:
 * changes.h's masks; one that has not made the file --timeout after the
 * quorum is killed as a straggler); that version is then committed to the
 * real file system (commit.h: a copy beside checked against the digest
 * voted, then written into the real file, which keeps its inode, or
 * renamed into place when there is none; synced) and only then do the
 * calls return. A point is no verdict: what a file holds at a sync can
 * depend on when it came (a timer's sync), so a replica of another version
 * is outvoted there and goes on, and a point where no quorum can form, or
 * none formed within --timeout while every other replica waits at another
 * point, goes on uncommitted; the end's vote judges the replicas. A
 * replica that reaches a point already decided (a late one, a replacement
 * replaying) is compared with the committed version and never commits
 * again. A stop (SIGTERM, SIGINT) lets every held call go on.
 *
 * Points are counted per path and kind, not per replica: threads that
 * sync different files in another order in each replica still agree.
 * Anything else goes on at once: a sync of a file the replica did not
 * change, of a descriptor that is no file of a view (a pipe, a socket, a
 * file of a kept directory, a removed file), and every call in a replay
 * (diehard replay and --ci's origin search commit nothing).
 *
 * Renames and removals that make a change visible are points too, judged
 * by the kernel before anything real changes:
 * - a rename (no flag) of a file the replica made or changed (its upper
 *   layer's) onto a name where the real tree has a regular file, or of a
 *   file a point made real (both names in one view): a point of the new
 *   name, its version the file's and the old name's;
 * - an unlink of a file the replica has its own copy of, whose real file
 *   is the one a point of this run made (a database's journal): a point of
 *   the name, every removal of it the same version.
 * Once a quorum agreed and nobody would see it early, one replica of the
 * quorum (the probe) goes on alone and the kernel judges its call in its
 * views: rights, a name gone. Its upper layer showing the call made, with
 * every directory above the names a copy of the real one, the real tree
 * gets it (the new name the bytes voted, written beside and renamed; the
 * old name, or the removed one, unlinked if it is still the file a point
 * of this run made: never another's put there since, never a directory);
 * then the others go on. A refusal (the thread past its call, the layer
 * unchanged), or no outcome within --timeout, lets the point go on
 * uncommitted: each replica gets its own kernel's answer. With a quorum
 * of two or more, no quorum of replicas is past the call before its
 * commit, so nothing they say after it reaches the world first.
 *
 * Invariants: for every path, the points committed are numbered 0 .. n-1
 * and were committed in that order; a held call belongs to a participant
 * of the id it was made by (others are dropped before any count); a slot's
 * counts start from 0 with each process it holds; a path's start-state
 * version is in pre.h's layer before the real path first changes. */
#ifndef DIEHARD_POINTS_H
#define DIEHARD_POINTS_H

#include <stdbool.h>
#include <stdint.h>

struct sup;
struct points;
struct logs;
struct pidfiles;
struct pre;
struct seccomp_notif;
typedef struct json_t json_t;

/* The points of a run whose replicas have views; rep: the report's
 * "files" object, where "points" goes; pre: the start-state layer every
 * view has (pre.h), kept before each path's first commit; logs: the
 * append-only files (logs.h), whose syncs are their streams'. */
struct points *points_new(struct sup *S, json_t *rep, struct pre *pre, struct logs *logs, struct pidfiles *pids);
void points_free(struct points *P);
/* Slot slot's process made the call in req (fsync, fdatasync, msync,
 * rename, renameat, renameat2), received
 * by the listener of generation gen (virt.h): true when the call is held,
 * to be answered through virt_resume; false: it goes on now. */
bool points_call(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req);
/* A new process in slot: its counts start again. */
void points_restart(struct points *P, unsigned slot);
/* Slot's process, a fresh server, joins the vote (net/fresh.c): its next
 * point of each path is numbered after the voters' last, not from its own
 * start. */
void points_slot_front(struct points *P, unsigned slot);
/* Every held call answered (a stop: the replicas may end). */
void points_release(struct points *P);
/* The supervisor's tick: replicas without their own copy of a path
 * --timeout after a quorum synced it are killed as stragglers, and the
 * point decided; a point without a quorum for --timeout goes on
 * uncommitted. */
void points_tick(struct points *P);
/* Points committed so far. */
uint64_t points_committed(const struct points *P);
/* Whether no replica's call waits at a point now. */
bool points_idle(const struct points *P);
/* Whether a path's last point went uncommitted (no point of any kind
 * committed there since) while its real file is there, or a live voter
 * has its own version of it: the real file may lag what they wrote. */
bool points_behind(const struct points *P);

#endif
