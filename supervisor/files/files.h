/* files.h — every file effect once: the replicas' file systems as an
 * effect voted and committed like their output.
 *
 * With --files private (the default) each sandboxed replica writes into
 * views of its own (view.h); when it ends, its changes are read
 * (changes.h) and become part of its result: two replicas agree only if
 * their exit statuses and their changes do (supervisor.c's status vote),
 * so a replica that wrote a wrong file is outvoted like one that printed
 * a wrong line, and the report names the path and the byte. The winner's
 * changes are then committed to the real file system once (commit.h),
 * before diehard exits; a replay (diehard replay) commits nothing. While
 * the run goes, its syncs of files are commit points (points.h),
 * committed as they come, the start's versions kept for
 * the replicas that come later (pre.h).
 *
 * With --files shared, or without a mount namespace (--sandbox off, or
 * the kernel refused it), the replicas share the real file system, as
 * before this module: said in the report (and in a line when --files
 * private was asked for). */
#ifndef DIEHARD_FILES_H
#define DIEHARD_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sup;
struct seccomp_notif;
struct replica;
struct view_plan;

enum files_mode {
	FILES_PRIVATE,
	FILES_SHARED,
};

/* diehard's own directory dir, which replicas write by path (traces, fence
 * logs, notify sockets), or one of --share's: seen as the real one through
 * every view. Called before the first replica starts. */
void files_keep(const char *dir);

/* The run's state, made once the sandbox is decided (S->ns_flags). */
void files_init(struct sup *S);
/* The views a new replica's init makes (spawn.h), or NULL: shared. */
const struct view_plan *files_plan(struct sup *S);
/* The plan for the process starting in slot: from_files (a durable
 * server's replacement, --durable) gets a layer of its own whose epoch
 * begins now (pre_epoch): its views show the files as committed now, and
 * later commits stay hidden from it until it makes its own. */
const struct view_plan *files_plan_for(struct sup *S, unsigned slot, bool from_files);
/* Whether the committed files now hold all the replicas have written to
 * be kept: views private, every append to a stream appended, no call
 * waiting at a commit point, no path whose last point went uncommitted
 * while its real file is there (a durable server's replacement may start
 * from them, at a quiet moment: fresh.c). */
bool files_committed_state(struct sup *S);
/* The variables a replica with views gets (its init fills them in:
 * view.h's VIEW_DEVS_VAR), or NULL. */
char *const *files_env(struct sup *S);
/* Whether the replicas' syncs are commit points (points.h): views are
 * made, and this is no replay. */
bool files_points_wanted(const struct sup *S);
/* Slot slot's fsync or fdatasync (req, through the listener of
 * generation gen): true when points.h holds it. */
bool files_point(struct sup *S, unsigned slot, uint64_t gen, const struct seccomp_notif *req);
/* Replica r started with its staging tmpfs at fd (-1: no views). */
void files_started(struct sup *S, struct replica *r, int fd);
/* Whether the voters stand at one point in every stream, and slot's
 * replica, a fresh server, set to the streams as it joins (logs.h), its
 * commit points numbered from the voters' (points.h). */
bool files_streams_quiet(struct sup *S);
void files_streams_rebase(struct sup *S, unsigned slot, bool force);
/* Slot's replica, a replacement that replayed the connection log, reached
 * the time of now (net.c): its versions of the streamed files up to their
 * sizes now re-lived the past (logs_past_ended). */
void files_past_ended(struct sup *S, unsigned slot);
/* Thread tid of slot's replica opens a file to append to (logs.h). */
void files_appending(struct sup *S, unsigned slot, pid_t tid);
/* Thread tid of slot's replica makes path anew (O_CREAT, O_TRUNC; relative
 * to dirfd or its cwd): a pid file, maybe (pidfile.h). */
void files_creating(struct sup *S, unsigned slot, pid_t tid, int dirfd, const char *path);
/* r ended: its changes are read. */
void files_ended(struct sup *S, struct replica *r);
/* r's slot is reused or the run ends: its views go. */
void files_release(struct replica *r);
/* Whether a and b, both ended, agree on their files. */
bool files_agree(const struct replica *a, const struct replica *b);
/* r's files differ from the majority's (maj): reported, with the path. */
void files_divergence(struct sup *S, struct replica *r, const struct replica *maj);
/* The run ended without an agreed result (no majority, a stop past
 * --stop-timeout, diehard's own error): whatever the replicas wrote is
 * dropped; said in one line when any of them had changes. */
void files_uncommitted(struct sup *S);
/* The start-state layer's root (pre.h), or NULL. --ci's origin search
 * hands it to its replays in FILES_START_LAYER_VAR, so that they see the
 * start as the run's replicas did; a replay takes it from there. */
#define FILES_START_LAYER_VAR "DIEHARD_START_LAYER"
const char *files_start_layer(const struct sup *S);
/* The supervisor's tick (points.h's stragglers). */
void files_tick(struct sup *S);
/* The run is over (every replica reaped): the commit points' state and
 * the start-state layer go. */
void files_end(struct sup *S);
/* Commits winner's changes (the run's exit status was agreed with them).
 * false when a path could not be committed (said). */
bool files_commit(struct sup *S, const struct replica *winner);

#endif
