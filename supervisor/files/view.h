/* view.h — each replica's own view of the file system (the init's side).
 *
 * In a sandboxed replica's init, between its /proc and its private /dev
 * (spawn.c), the directories a replica may write become copy-on-write
 * overlays whose upper layers live in a tmpfs of the replica's own (the
 * staging tmpfs): what the program writes lands there, the real file
 * system stays as it was when the run started, and diehard, which gets
 * the staging tmpfs's descriptor, compares and commits the replicas'
 * changes at the end (changes.h, commit.h).
 *
 * - As root, the whole tree: a new root is built in the staging tmpfs, an
 *   overlay of every writable disk file system (ext4, xfs, tmpfs...; /
 *   first), every other visible mount bound as it is (/proc, /sys, /dev,
 *   read-only ones), then pivot_root into it. The staging tmpfs stays
 *   behind with the old root, detached: the program cannot reach it.
 * - Unprivileged (in a user namespace of the user's): overlays can only be
 *   made over directories with no mounts beneath them, so the listed
 *   directories (cwd, $HOME, $TMPDIR, /tmp, /var/tmp, $XDG_RUNTIME_DIR)
 *   get one each, in place, and every other writable disk mount is made
 *   read-only: a write outside the views fails (EROFS) rather than reach
 *   the host unvoted. The staging tmpfs is unmounted (detached) once the
 *   overlays hold it.
 * - Between each view's upper layer and the real directory lies the
 *   run's start-state layer (pre.h), one for all replicas: what diehard
 *   committed at a commit point (points.h) is kept there as it was at the
 *   start, so that a replica that has not reached the point yet, or a
 *   replacement replaying, still sees the start's version.
 * - diehard's own directories that replicas write by path (kept: --ci's
 *   traces, fence logs, the notify sockets' directory) are bound over the
 *   view as the real ones.
 *
 * The staging tmpfs holds, at its root, `manifest`: one line per view,
 * "v<N>\t<target>\n" (upper layer v<N>/u), then one per directory that
 * could have none, "-\t<errno>\t<target>\n" (as root: bound, shared;
 * unprivileged: read-only), one per writable mount that could not be made
 * read-only, "!\t<errno>\t<target>\n" (shared), and "x\tuser" or
 * "x\ttrusted": where the overlays keep their xattrs. Written here before the
 * program runs, unreachable by it, so diehard trusts it.
 *
 * Async-signal-safe: runs in a clone of diehard, no allocation (a buffer
 * mmap'ed for /proc/self/mountinfo), no stdio. */
#ifndef DIEHARD_VIEW_H
#define DIEHARD_VIEW_H

#include <stdbool.h>

#define VIEW_MAX 32     /* views per replica */
/* A name of the start-state layer in each view's top directory, removed as
 * the view is mounted (view.c): never a change of the replica's. */
#define VIEW_WHITEOUT_SEED ".diehard-whiteout-seed"
#define VIEW_DEVS_VAR "DIEHARD_VIEWDEVS"
#define VIEW_DEVS_BYTES 3584 /* its value's room: (3 * VIEW_MAX + 1) pairs */
#define VIEW_KEEP_MAX 16 /* directories bound through: diehard's own, --share's */

struct view_plan {
	bool whole;                     /* root: the whole tree (else the dirs) */
	const char *dirs[VIEW_MAX];     /* unprivileged: directories to view, NULL-ended */
	const char *keep[VIEW_KEEP_MAX + 1]; /* real directories bound over the views, NULL-ended */
	const char *cwd;                /* diehard's working directory: the program's, re-entered */
	const char *pre;                /* the start-state layer's root (files/pre.h), or NULL:
					   each view's lowest layer but one is pre + its target */
	long long start;                /* the run's start (CLOCK_REALTIME seconds): libdiehard
					   stamps files changed after it (allocator/viewstat.h) */
};

/* In the init, in its own mount namespace (slave of the host's, its /proc
 * mounted): makes the views. *staging: an O_RDONLY descriptor of the
 * staging tmpfs's root (the caller's, to pass to diehard). 0, or an errno
 * (*step then names what failed, for the message). */
int view_enter(const struct view_plan *p, int *staging, const char **step);

/* In the program, forked by that init, before exec: the placeholder value
 * of VIEW_DEVS_VAR in envp (files.h) becomes the views' devices and the
 * numbers libdiehard shows for them (allocator/viewstat.h). */
void view_fill_env(char **envp);

#endif
