/* changes.h — what one replica changed in its views (view.h), read from
 * its staging tmpfs once it has ended.
 *
 * An overlay's upper layer holds every file the replica made or changed
 * (whole: copy-up copies the file), every directory it made or changed
 * (an opaque one, xattr overlay.opaque=y, replaces the one below), and
 * a whiteout (a 0/0 character device) for every name it removed. The
 * walk turns that into a list of changes in a fixed order (each view,
 * then names sorted, parents before children), dropping what a copy-up
 * brought up unchanged (same type, bytes, mode and owner as the real
 * file below). Contents are compared by a keyed digest (digest.h), so a
 * list holds no file bytes; modification times are kept, not compared
 * (replicas write at different instants), and committed from the winner.
 *
 * Two replicas agree on their files when their lists are equal entry by
 * entry. */
#ifndef DIEHARD_CHANGES_H
#define DIEHARD_CHANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "digest.h"

enum change_kind {
	CHANGE_FILE,   /* a regular file, new or changed */
	CHANGE_DIR,    /* a directory, new or with a new mode or owner */
	CHANGE_OPAQUE, /* a directory that replaces the one below, contents and all */
	CHANGE_LINK,   /* a symbolic link */
	CHANGE_GONE,   /* removed (a whiteout) */
	CHANGE_FIFO,   /* a named pipe */
	CHANGE_NODE,   /* a device node (committed as root only) */
};

/* A file's identity on its file system: its handle (name_to_handle_at:
 * the inode and its generation, so never another file that reused the
 * number), as overlayfs records a copy's origin. */
struct file_id {
	int type;     /* 0: none */
	unsigned len;
	unsigned char h[128];
};
struct change {
	char *path;  /* the real path */
	unsigned view; /* its view: targets[view] */
	size_t rel;  /* path + rel: its path beneath the view's target */
	char *upper; /* where its new version is, relative to the staging root */
	int fd1;     /* or, when > 0, a descriptor of it open for reading, + 1 (points.c) */
	enum change_kind kind;
	mode_t mode; /* permission bits (07777) */
	uid_t uid;
	gid_t gid;
	off_t size;
	dev_t rdev;
	uint8_t digest[DIGEST_BYTES]; /* a file's bytes */
	char *link;                   /* a link's target */
	struct timespec atime, mtime;
	/* A commit point's file (commit.h): written into the real file, which
	 * keeps its inode, when that is a regular file of one link and the
	 * same owner, and the file expect names (else beside and renamed). */
	bool in_place;
	const struct file_id *expect;
};

/* What a replica could not view (the manifest's "-" lines). */
struct unviewed {
	char *path;
	int err;     /* EBUSY: a mount beneath it */
	bool shared; /* left writable, the host's (else read-only in the replica) */
};

struct changes {
	struct change *c;
	size_t n, cap;
	char **targets; /* each view's real directory, by number */
	size_t ntargets;
	struct unviewed *un;
	size_t nun;
	bool user_xattrs; /* the overlays' marks are user.overlay.* (unprivileged), else trusted.* */
	const struct digest_key *verify; /* commit.h: a file's copy must have its digest (NULL: unchecked) */
	bool keep_dirs; /* a commit point's: a real directory in a file's place fails it, never removed */
	int root; /* the staging tmpfs (owned) */
};

/* Reads the manifest of the staging tmpfs at fd root (taken: closed by
 * changes_free). NULL with errno on failure. */
struct changes *changes_open(int root);
/* Walks the upper layers into the list. 0, or an errno with *where the
 * path that failed. */
int changes_scan(struct changes *ch, const struct digest_key *key, const char **where);
void changes_free(struct changes *ch);
/* The view of the real path (the longest target it lies beneath), or -1;
 * *rel where the path beneath it starts. */
int changes_view_of(const struct changes *ch, const char *path, size_t *rel);
/* rel beneath the real directory target (a view's), opened with flags
 * (and mode, when made) by openat2: no link followed, no magic link, no
 * other file system, never blocking on a FIFO; rel "" is target itself.
 * -1 with errno. */
int changes_open_real(const char *target, const char *rel, int flags, mode_t mode);
/* The real directory of path (a path beneath the view's target), opened
 * as changes_open_real does, for reading; *name its last name. -1 with
 * errno. */
int changes_open_real_parent(const char *target, const char *path, const char **name);
/* The replica's own version of the real path (in its upper layer), open
 * for reading: opened beneath the staging root, no link followed, no other
 * file system, never waiting on a FIFO; a regular file, or -1. */
int changes_open_version(const struct changes *ch, const char *path);
/* The same, open for reading and writing (logs.c's rebase of a fresh
 * server's version of a stream). */
int changes_open_version_rw(const struct changes *ch, const char *path);
/* Whether the replica's views hide the real path from it: its upper
 * layer has the path, or a directory above it opaque, or a non-directory
 * (a whiteout) in a directory's place above it. A change of the real path
 * then never shows in them (a commit made while the replica runs). */
bool changes_masks(const struct changes *ch, const char *path);

/* fstat of upper (a name beneath the staging root, "vN/u/..."), reached
 * through no symbolic link but a last one (a replica's layer is its own to
 * fill with links to anywhere). 0, or -1 with errno (ELOOP: a link on the
 * way). */
int changes_layer_stat(const struct changes *ch, const char *upper, struct stat *st);
/* The real file at path: its identity (and *st). 0, ENOENT when there is
 * nothing there, or an errno. */
int changes_real_id(const struct changes *ch, const char *path, struct file_id *id, struct stat *st);
/* The real file the replica's upper copy of path was copied from (its
 * overlay origin). 0, ENODATA when it has none (made in the views), or an
 * errno (no upper copy). */
int changes_origin_id(const struct changes *ch, const char *path, struct file_id *id);
bool changes_same_id(const struct file_id *a, const struct file_id *b);
/* An open file's identity. 0 or an errno. */
int changes_fd_id(int fd, struct file_id *id);
/* What the real path is: 0 nothing (nor a directory above it), 1 a
 * regular file, -1 anything else or out of reach (a link on the way). */
int changes_real_kind(const struct changes *ch, const char *path);
/* Whether every directory above path in the replica's upper layer is a
 * copy of the real one (not opaque, the same mode and owner) or one the
 * real tree lacks: then what the kernel let the replica do there, it
 * checked against the real directories' rights. */
bool changes_dirs_real(const struct changes *ch, const char *path);
/* Whether the replica's upper layer shows its file (dev, ino), once at
 * from, renamed to to: to is that file, and from a whiteout, nothing, or
 * another file made since. */
bool changes_renamed(const struct changes *ch, const char *from, const char *to, dev_t dev, ino_t ino);
/* Whether the replica's upper layer shows its own file ino at path
 * removed: a whiteout, nothing, or another file made since (a database's
 * next journal). */
bool changes_removed(const struct changes *ch, const char *path, ino_t ino);
/* Adds a copy of c (its strings copied) at the end of the list; then
 * changes_sort puts the list back in the walk's order. */
void changes_add(struct changes *ch, const struct change *c);
void changes_sort(struct changes *ch);
/* The keyed digest of fd's contents, of its size and of each 4 KiB block
 * that holds a byte other than zero, with its number: files of the same
 * bytes agree whatever their holes, and a sparse file costs its data only
 * (extents.h). What the walk records per file. 0, or an errno. */
int changes_digest_fd(int fd, const struct digest_key *key, uint8_t out[DIGEST_BYTES]);

/* Whether a and b hold the same changes. */
bool changes_same(const struct changes *a, const struct changes *b);
/* Where a and b first differ: the real path and, for a file in both, the
 * first byte that differs (else 0); *what says how ("bytes", "missing",
 * "extra", "mode", "type", "owner", "link"). false when they agree. */
bool changes_diff(const struct changes *a, const struct changes *b, const char **path, off_t *offset,
		  const char **what);

#endif
