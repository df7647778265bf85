/* commit.c — see commit.h.
 *
 * Every path is reached from its view's target directory, opened once,
 * with openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV:
 * a symbolic link or a mount put in the way meanwhile (by anyone who may
 * write the real tree while diehard, perhaps root, commits) fails that
 * path instead of sending the commit elsewhere. The upper layer never
 * holds a path through a link (overlayfs resolved it in the replica), so
 * an honest commit meets none. The last component is made, renamed or
 * removed relative to its parent's descriptor, never followed.
 *
 * Invariants: a temporary name (".diehard-commit-PID-N" in the path's
 * directory) exists only between the first pass and its rename, and is
 * removed when the rename cannot be made; entries beneath a directory that
 * could not be committed are skipped (said once, with the directory);
 * directories are made writable by their owner while the commit fills
 * them and get their agreed modes last, deepest first. */
#include "commit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "changes.h"
#include "extents.h"
#include "log.h"

#define COPY_CHUNK (1u << 20)
/* A file to write in place is copied into memory first up to this size;
 * a larger one beside its path (on disk, as a renamed one is). */
#define PRIVATE_MAX (64ull << 20)
/* An in-place write compares and writes in blocks of this many bytes. */
#define BLOCK 4096
/* Commits of at most this many paths sync file by file (commit_apply). */
#define COMMIT_FEW 16

static void say(const char *path, const char *what, int err, struct commit_result *res)
{
	log_warn("cannot commit %s (%s: %s)", path, what, strerror(err));
	res->failed++;
}

/* The last parent opened (parent_of), kept for the next entry of the same
 * directory: a tree of files costs one openat2 per directory, not two per
 * file. */
static struct {
	int fd;
	int tdir;
	char dir[4096];
} last = { .fd = -1 };

static void parent_forget(void)
{
	if (last.fd >= 0)
		close(last.fd);
	last.fd = -1;
}

/* The parent directory of c, beneath its view's target (fd tdir); *name
 * its last component. A descriptor (the caller's: a dup of the one kept),
 * or -1 with errno. */
static int parent_of(int tdir, const struct change *c, const char **name)
{
	const char *rel = c->path + c->rel;
	const char *slash = strrchr(rel, '/');
	*name = slash != NULL ? slash + 1 : rel;
	char dir[4096];
	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if ((size_t)(slash - rel) >= sizeof dir) {
		errno = ENAMETOOLONG;
		return -1;
	} else {
		memcpy(dir, rel, (size_t)(slash - rel));
		dir[slash - rel] = '\0';
	}
	if (last.fd >= 0 && last.tdir == tdir && strcmp(last.dir, dir) == 0)
		return fcntl(last.fd, F_DUPFD_CLOEXEC, 0);
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
					   RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, tdir, dir, &how, sizeof how);
	if (fd < 0)
		return -1;
	parent_forget();
	last.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	last.tdir = tdir;
	snprintf(last.dir, sizeof last.dir, "%s", dir);
	return fd;
}

/* Removes name in dir and, a directory, everything in it on the same file
 * system (a mount inside is left: EXDEV). */
static int remove_at(int dir, const char *name, dev_t dev, int depth)
{
	if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno;
	if (depth > 4096)
		return ELOOP;
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_dev != dev) {
		close(fd);
		return EXDEV;
	}
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int err = errno;
		close(fd);
		return err;
	}
	int err = 0;
	struct dirent *e;
	while (err == 0 && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			err = remove_at(dirfd(d), e->d_name, dev, depth + 1);
	closedir(d);
	if (err == 0 && unlinkat(dir, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		err = errno;
	return err;
}

static int remove_in(int parent, const char *name)
{
	struct stat st;
	if (fstat(parent, &st) != 0)
		return errno;
	return remove_at(parent, name, st.st_dev, 0);
}

struct copy {
	int out;
	unsigned long long *bytes;
};

static int copy_piece(void *ctx, const char *bytes, size_t n, off_t at)
{
	struct copy *c = ctx;
	int err = extents_write(c->out, bytes, n, at);
	if (err == 0)
		*c->bytes += n;
	return err;
}

/* Copies in's data to out, holes left as holes (extents.h), then out's
 * size: in's as fstat says now, or as known says (a size checked: no more
 * is read, whatever the file grew to since). */
static int copy_bytes(int in, int out, const struct stat *known, unsigned long long *bytes)
{
	struct stat st;
	if (known != NULL)
		st = *known;
	else if (fstat(in, &st) != 0)
		return errno;
	static char buf[COPY_CHUNK];
	struct copy c = { out, bytes };
	int err = extents_each(in, &st, buf, sizeof buf, copy_piece, &c);
	if (err != 0)
		return err;
	return ftruncate(out, st.st_size) == 0 ? 0 : errno;
}

/* Whether the copy open at fd has c's digest: the bytes voted, not what
 * the source held a moment later (points.h). 0, or ESTALE. */
static int verify_fd(const struct changes *ch, const struct change *c, int fd)
{
	uint8_t dg[DIGEST_BYTES];
	int err = changes_digest_fd(fd, ch->verify, dg);
	if (err != 0)
		return err;
	return memcmp(dg, c->digest, sizeof dg) == 0 ? 0 : ESTALE;
}

/* The same, of the copy tmp in parent. */
static int verify_copy(const struct changes *ch, const struct change *c, int parent, const char *tmp)
{
	int fd = openat(parent, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = verify_fd(ch, c, fd);
	close(fd);
	return err;
}

/* c's new version open for reading (a descriptor of the caller's), or -1
 * with errno. */
static int open_source(const struct changes *ch, const struct change *c)
{
	if (c->fd1 > 0)
		return fcntl(c->fd1 - 1, F_DUPFD_CLOEXEC, 0);
	int in = openat(ch->root, c->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0 && errno == EACCES && fchmodat(ch->root, c->upper, c->mode | 0400, 0) == 0)
		in = openat(ch->root, c->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	return in;
}

/* c's new version copied into memory (a memfd) and verified: what an
 * in-place write takes its bytes from (write_in_place). Nothing is made in
 * the real directory, so a commit written in place leaves no directory to
 * sync; nor in the replica's staging tmpfs, whose inode numbers its
 * program sees (a file made there would shift the next one's, in one
 * replica only: git's index records them). A descriptor, or -1 with
 * errno. */
static int copy_private(const struct changes *ch, const struct change *c, unsigned long long *bytes)
{
	int in = open_source(ch, c);
	if (in < 0)
		return -1;
	/* Its size now the size voted (else the check fails anyway), so
	 * that memory holds no more than PRIVATE_MAX. */
	struct stat st;
	int err = fstat(in, &st) != 0 ? errno : st.st_size != c->size ? ESTALE : 0;
	int out = err == 0 ? memfd_create("diehard-commit", MFD_CLOEXEC) : -1;
	unsigned long long n = 0;
	if (err == 0)
		err = out < 0 ? errno : copy_bytes(in, out, &st, &n);
	close(in);
	if (err == 0 && ch->verify != NULL)
		err = verify_fd(ch, c, out);
	if (err != 0) {
		if (out >= 0)
			close(out);
		errno = err;
		return -1;
	}
	*bytes += n;
	return out;
}

/* The new version of c made in parent under a temporary name (tmp): from
 * the replica's layer, or (from >= 0) from copy_private's copy, checked
 * already. */
static int make_beside(const struct changes *ch, const struct change *c, int parent, char *tmp, size_t size,
		       bool root, bool each, int from, unsigned long long *bytes)
{
	static unsigned long counter;
	for (int tries = 0; tries < 100; tries++) {
		snprintf(tmp, size, ".diehard-commit-%ld-%lu", (long)getpid(), ++counter);
		int err = 0;
		switch (c->kind) {
		case CHANGE_FILE: {
			int out = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (out < 0) {
				err = errno;
				break;
			}
			int in = from >= 0 ? fcntl(from, F_DUPFD_CLOEXEC, 0) : open_source(ch, c);
			if (in < 0)
				err = errno;
			else {
				err = copy_bytes(in, out, NULL, bytes);
				close(in);
			}
			struct timespec ts[2] = { c->atime, c->mtime };
			if (err == 0 && root && fchown(out, c->uid, c->gid) != 0)
				err = errno;
			if (err == 0 && fchmod(out, c->mode) != 0)
				err = errno;
			if (err == 0 && futimens(out, ts) != 0)
				err = errno;
			if (err == 0 && each && !c->in_place && fsync(out) != 0)
				err = errno;
			if (close(out) != 0 && err == 0)
				err = errno;
			if (err == 0 && ch->verify != NULL && from < 0)
				err = verify_copy(ch, c, parent, tmp);
			if (err != 0)
				(void)unlinkat(parent, tmp, 0);
			return err;
		}
		case CHANGE_LINK:
			if (symlinkat(c->link, parent, tmp) != 0)
				err = errno;
			else if (root && fchownat(parent, tmp, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) != 0) {
				err = errno;
				(void)unlinkat(parent, tmp, 0);
			}
			break;
		case CHANGE_FIFO:
		case CHANGE_NODE: {
			mode_t m = c->kind == CHANGE_FIFO ? (S_IFIFO | (c->mode & 07777)) : c->mode;
			if (mknodat(parent, tmp, m, c->rdev) != 0) {
				err = errno;
				break;
			}
			/* A node's mode and owner, by a descriptor that cannot
			 * follow anything (O_PATH of the node itself). */
			int fd = openat(parent, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			char proc[64];
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
			if (fd < 0 || (root && fchownat(fd, "", c->uid, c->gid, AT_EMPTY_PATH) != 0) ||
			    chmod(proc, c->mode & 07777) != 0) {
				err = errno;
				(void)unlinkat(parent, tmp, 0);
			}
			if (fd >= 0)
				close(fd);
			break;
		}
		default:
			return EINVAL;
		}
		if (err != EEXIST)
			return err;
	}
	return EEXIST;
}

/* Writes the verified copy open at in (copy_private) into the real file
 * name, in place: only the blocks that differ, then its size, mode and times,
 * synced. The real file keeps its inode, so that a replica's views, whose
 * copy of it records the real one as its origin, keep showing the same
 * inode number (SQLite takes a changed one for a moved database and goes
 * read-only). 0; ENOTSUP when the real file is none to write so (not a
 * regular file of one link and c's owner, not writable): the caller
 * renames instead; another errno (said) when it failed part way. */
static int write_in_place(int parent, int in, const char *name, const struct change *c)
{
	int out = openat(parent, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st, src;
	struct file_id id;
	/* The very file the replicas' views showed (their copies' origin,
	 * or the one a point made), not one swapped in since; and no sparse
	 * copy (written whole, its holes would be filled). */
	if (out < 0 || in < 0 || fstat(out, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != c->uid || st.st_gid != c->gid || c->expect == NULL || changes_fd_id(out, &id) != 0 ||
	    !changes_same_id(&id, c->expect) || fstat(in, &src) != 0 || (off_t)src.st_blocks * 512 < src.st_size) {
		if (out >= 0)
			close(out);
		return ENOTSUP;
	}
	int err = 0;
	static char a[COPY_CHUNK / 2], b[COPY_CHUNK / 2];
	for (off_t at = 0; err == 0 && at < c->size;) {
		size_t want = (size_t)(c->size - at < (off_t)sizeof a ? c->size - at : (off_t)sizeof a);
		ssize_t n = pread(in, a, want, at);
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			break;
		}
		ssize_t m = pread(out, b, (size_t)n, at);
		if (m < 0) {
			err = errno;
			break;
		}
		/* Only the blocks that differ (past the real end: all), runs
		 * of them written at once: a database's commit dirties the
		 * pages it changed, not the whole file. */
		for (ssize_t o = 0; err == 0 && o < n;) {
			ssize_t len = n - o < BLOCK ? n - o : BLOCK;
			if (o + len <= m && memcmp(a + o, b + o, (size_t)len) == 0) {
				o += len;
				continue;
			}
			ssize_t end = o + len;
			while (end < n) {
				ssize_t l = n - end < BLOCK ? n - end : BLOCK;
				if (end + l <= m && memcmp(a + end, b + end, (size_t)l) == 0)
					break;
				end += l;
			}
			err = extents_write(out, a + o, (size_t)(end - o), at + o);
			o = end;
		}
		at += n;
	}
	struct timespec ts[2] = { c->atime, c->mtime };
	if (err == 0 && st.st_size != c->size && ftruncate(out, c->size) != 0)
		err = errno;
	if (err == 0 && (st.st_mode & 07777) != c->mode && fchmod(out, c->mode) != 0)
		err = errno;
	if (err == 0 && futimens(out, ts) != 0)
		err = errno;
	if (err == 0 && fsync(out) != 0)
		err = errno;
	close(out);
	return err;
}

/* A directory made (writable by its owner until set_dir), or kept; an
 * opaque one emptied first. */
static int put_dir(int parent, const char *name, const struct change *c)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    unlinkat(parent, name, 0) != 0)
		return errno;
	if (mkdirat(parent, name, (c->mode | 0700) & 07777) != 0 && errno != EEXIST)
		return errno;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = 0;
	if (fchmod(fd, (c->mode | 0700) & 07777) != 0)
		err = errno;
	if (err == 0 && c->kind == CHANGE_OPAQUE) {
		DIR *d = fdopendir(fd);
		if (d == NULL) {
			err = errno;
		} else {
			fd = -1;
			struct dirent *e;
			while (err == 0 && (e = readdir(d)) != NULL)
				if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
					err = remove_in(dirfd(d), e->d_name);
			closedir(d);
		}
	}
	if (fd >= 0)
		close(fd);
	return err;
}

/* A directory's agreed mode and owner, last. */
static int set_dir(int parent, const char *name, const struct change *c, bool root)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = 0;
	if (root && fchown(fd, c->uid, c->gid) != 0)
		err = errno;
	if (err == 0 && fchmod(fd, c->mode) != 0)
		err = errno;
	close(fd);
	return err;
}

/* Syncs the file systems of every view's target. */
static void sync_targets(const int *tdir, size_t n, const struct changes *ch)
{
	for (size_t v = 0; v < n; v++)
		if (tdir[v] >= 0 && syncfs(tdir[v]) != 0)
			log_warn("cannot sync the file system of %s: %s", ch->targets[v], strerror(errno));
}

/* Whether path lies beneath one of the directories that failed. */
static bool beneath_failed(char **failed, size_t nfailed, const char *path)
{
	for (size_t i = 0; i < nfailed; i++) {
		size_t n = strlen(failed[i]);
		if (strncmp(path, failed[i], n) == 0 && path[n] == '/')
			return true;
	}
	return false;
}

/* Syncs the directory whose O_PATH descriptor is dir (fsync needs one
 * opened for reading). */
static int sync_dir(int dir)
{
	int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int err = errno;
	close(fd);
	errno = err;
	return rc;
}

void commit_apply(const struct changes *ch, struct commit_result *res)
{
	*res = (struct commit_result){ 0 };
	if (ch == NULL || ch->n == 0)
		return;
	bool root = geteuid() == 0;
	/* A few paths (a commit point's): each file and each directory synced
	 * on its own, cheaper than two syncs of whole file systems that other
	 * programs write too. */
	bool each = ch->n <= COMMIT_FEW;
	char **tmp = calloc(ch->n, sizeof *tmp);
	int *priv = malloc(ch->n * sizeof *priv); /* copy_private's, or -1 */
	bool *done = calloc(ch->n, sizeof *done);
	char **failed = calloc(ch->n, sizeof *failed);
	int *tdir = calloc(ch->ntargets + 1, sizeof *tdir);
	size_t nfailed = 0;
	if (tmp == NULL || priv == NULL || done == NULL || failed == NULL || tdir == NULL)
		fatal(125, "out of memory");
	for (size_t i = 0; i < ch->n; i++)
		priv[i] = -1;
	/* The targets of the views the changes lie in (a point's: one); the
	 * end's, all (each synced: a log's bytes may be in one unchanged). */
	for (size_t v = 0; v < ch->ntargets; v++)
		tdir[v] = each ? -2 : -1;
	for (size_t i = 0; i < ch->n; i++)
		if (ch->c[i].view < ch->ntargets)
			tdir[ch->c[i].view] = -1;
	for (size_t v = 0; v < ch->ntargets; v++)
		if (tdir[v] == -1 && (tdir[v] = open(ch->targets[v], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			log_warn("cannot open %s to commit into it: %s", ch->targets[v], strerror(errno));
	/* First pass: directories, and every new version beside its path. */
	for (size_t i = 0; i < ch->n; i++) {
		const struct change *c = &ch->c[i];
		const char *name;
		if (beneath_failed(failed, nfailed, c->path))
			continue;
		if (c->kind == CHANGE_GONE)
			continue;
		int parent = c->view < ch->ntargets && tdir[c->view] >= 0 ? parent_of(tdir[c->view], c, &name) : -1;
		if (parent < 0) {
			say(c->path, "its directory", errno ? errno : ENOENT, res);
			failed[nfailed++] = c->path;
			continue;
		}
		int err;
		char t[128];
		switch (c->kind) {
		case CHANGE_DIR:
		case CHANGE_OPAQUE:
			if ((err = put_dir(parent, name, c)) != 0) {
				say(c->path, "directory", err, res);
				failed[nfailed++] = c->path;
			} else {
				done[i] = true;
				res->dirs++;
			}
			break;
		case CHANGE_NODE:
			if (!root) {
				say(c->path, "a device node, unprivileged", EPERM, res);
				break;
			}
			/* fall through */
		default:
			/* A file to write in place is copied into memory;
			 * beside it when too large or that cannot be made. */
			err = 0;
			if (c->kind == CHANGE_FILE && c->in_place && (unsigned long long)c->size <= PRIVATE_MAX &&
			    (priv[i] = copy_private(ch, c, &res->bytes)) < 0)
				err = errno;
			if (err == ESTALE)
				say(c->path, "its copy", err, res);
			else if (priv[i] < 0 &&
				 (err = make_beside(ch, c, parent, t, sizeof t, root, each, -1, &res->bytes)) != 0)
				say(c->path, "a new version beside it", err, res);
			else if (priv[i] < 0 && (tmp[i] = strdup(t)) == NULL)
				fatal(125, "out of memory");
		}
		close(parent);
	}
	parent_forget();
	if (!each)
		sync_targets(tdir, ch->ntargets, ch);
	/* Second pass: in place, in order. */
	for (size_t i = 0; i < ch->n; i++) {
		const struct change *c = &ch->c[i];
		if ((c->kind != CHANGE_GONE && tmp[i] == NULL && priv[i] < 0) ||
		    beneath_failed(failed, nfailed, c->path))
			continue;
		const char *name;
		int parent = c->view < ch->ntargets && tdir[c->view] >= 0 ? parent_of(tdir[c->view], c, &name) : -1;
		int err;
		bool changed = true; /* the directory's entries */
		if (parent < 0) {
			say(c->path, "its directory", errno ? errno : ENOENT, res);
		} else if (c->kind == CHANGE_GONE) {
			parent_forget(); /* what it removes may be a directory kept */
			if ((err = remove_in(parent, name)) != 0)
				say(c->path, "removal", err, res);
			else
				res->removed++;
		} else {
			struct stat st;
			bool dir = fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
			err = ENOTSUP;
			if (!dir && c->kind == CHANGE_FILE && c->in_place) {
				int in = priv[i] >= 0 ? priv[i] : openat(parent, tmp[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
				if (in >= 0)
					err = write_in_place(parent, in, name, c);
				if (in >= 0 && priv[i] < 0)
					close(in);
			}
			if (err == ENOTSUP && tmp[i] == NULL) {
				/* Not to be written in place after all: beside now,
				 * from the copy checked (its bytes counted once). */
				char t[128];
				unsigned long long again = 0;
				if ((err = make_beside(ch, c, parent, t, sizeof t, root, each, priv[i], &again)) != 0) {
					say(c->path, "a new version beside it", err, res);
					goto next;
				}
				if ((tmp[i] = strdup(t)) == NULL)
					fatal(125, "out of memory");
				err = ENOTSUP;
			}
			if (err == ENOTSUP && c->in_place && each) {
				/* Renamed after all: its copy synced first. */
				int fd = openat(parent, tmp[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
				if (fd < 0 || fsync(fd) != 0)
					err = errno ? errno : EIO;
				if (fd >= 0)
					close(fd);
			}
			if (dir)
				parent_forget();
			if (err != ENOTSUP) {
				if (err != 0)
					say(c->path, "write in place", err, res);
				else
					res->written++;
				changed = tmp[i] != NULL;
				if (tmp[i] != NULL)
					(void)unlinkat(parent, tmp[i], 0);
			} else if (dir && ch->keep_dirs) {
				say(c->path, "a directory in its place", EISDIR, res);
				(void)unlinkat(parent, tmp[i], 0);
			} else if (dir && (err = remove_in(parent, name)) != 0) {
				say(c->path, "the directory it replaces", err, res);
				(void)unlinkat(parent, tmp[i], 0);
			} else if (renameat(parent, tmp[i], parent, name) != 0) {
				say(c->path, "rename into place", errno, res);
				(void)unlinkat(parent, tmp[i], 0);
			} else {
				res->written++;
			}
		}
		if (each && changed && parent >= 0 && sync_dir(parent) != 0)
			log_warn("cannot sync the directory of %s: %s", c->path, strerror(errno));
	next:
		if (parent >= 0)
			close(parent);
		free(tmp[i]);
		tmp[i] = NULL;
		if (priv[i] >= 0)
			close(priv[i]);
		priv[i] = -1;
	}
	parent_forget();
	/* Directories' modes, deepest first (a 0555 tree was filled first). */
	for (size_t i = ch->n; i-- > 0;) {
		const struct change *c = &ch->c[i];
		const char *name;
		if (!done[i])
			continue;
		int parent = parent_of(tdir[c->view], c, &name), err;
		if (parent < 0 || (err = set_dir(parent, name, c, root)) != 0)
			say(c->path, "directory's mode", parent < 0 ? errno : err, res);
		else if (each && sync_dir(parent) != 0)
			log_warn("cannot sync the directory of %s: %s", c->path, strerror(errno));
		if (parent >= 0)
			close(parent);
	}
	parent_forget();
	if (!each)
		sync_targets(tdir, ch->ntargets, ch);
	for (size_t v = 0; v < ch->ntargets; v++)
		if (tdir[v] >= 0)
			close(tdir[v]);
	free(tdir);
	for (size_t i = 0; i < ch->n; i++)
		if (priv[i] >= 0)
			close(priv[i]);
	free(priv);
	free(tmp);
	free(done);
	free(failed);
}
