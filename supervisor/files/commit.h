/* commit.h — the agreed changes (changes.h) applied to the real file
 * system, once.
 *
 * Each file, link or pipe is made beside its real path under a temporary
 * name, then renamed over it, so that a reader sees the old version or
 * the new one, never half of one. The order keeps that promise durable:
 * every new version is written, then each file system holding one is
 * synced, then the renames and removals are made in list order (a
 * directory before its contents), then the file systems are synced
 * again; a commit of a few paths (a commit point's, points.h) syncs each
 * new file before its rename and each directory after instead, cheaper
 * than whole file systems others write too. A sync point's file that
 * keeps its inode (changes.h's in_place) is instead copied into memory (a
 * larger one beside), checked against the digest voted, and written into
 * the real file in place, only the 4 KiB blocks that differ, then synced:
 * its directory is not touched, so not synced. Directories are made (or
 * given their mode) as the list reaches them; an opaque one has its old
 * contents removed first.
 *
 * Owners are kept as root only (unprivileged, every file is the user's).
 * A failure on one path is said in one line and the rest still goes in. */
#ifndef DIEHARD_COMMIT_H
#define DIEHARD_COMMIT_H

#include <stddef.h>

struct changes;

struct commit_result {
	size_t written;  /* files, links, pipes and nodes put in place */
	size_t dirs;     /* directories made or changed */
	size_t removed;  /* paths removed */
	size_t failed;   /* paths that could not be committed (said) */
	unsigned long long bytes; /* bytes of the files written */
};

/* Applies ch. The result counts what went in. */
void commit_apply(const struct changes *ch, struct commit_result *res);

#endif
