/* commit.c — see commit.h.
 *
 * Invariant: a temporary name (".diehard-commit-PID-N" in the real
 * path's directory) exists only between the first pass and its rename;
 * a version that could not be renamed in is removed, so a failed commit
 * leaves the old file, never a stray copy. */
#include "commit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changes.h"
#include "log.h"

/* The directory part of path, in buf. */
static const char *dir_of(const char *path, char *buf, size_t size)
{
	snprintf(buf, size, "%s", path);
	char *slash = strrchr(buf, '/');
	if (slash == NULL)
		return ".";
	if (slash == buf)
		slash[1] = '\0';
	else
		*slash = '\0';
	return buf;
}

static void say(const char *path, const char *what, int err, struct commit_result *res)
{
	log_warn("cannot commit %s (%s: %s): the real file is as it was", path, what, strerror(err));
	res->failed++;
}

/* Removes path, a directory with everything in it (at fd dir, name). */
static int remove_at(int dir, const char *name)
{
	if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno;
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
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
			err = remove_at(dirfd(d), e->d_name);
	closedir(d);
	if (err == 0 && unlinkat(dir, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		err = errno;
	return err;
}

static int remove_path(const char *path)
{
	return remove_at(AT_FDCWD, path);
}

/* Removes what a directory holds, keeping it. */
static int empty_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return errno;
	}
	int err = 0;
	struct dirent *e;
	while (err == 0 && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			err = remove_at(dirfd(d), e->d_name);
	closedir(d);
	return err;
}

/* Copies all of in to out. */
static int copy_bytes(int in, int out, unsigned long long *bytes)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n > 0) {
			*bytes += (unsigned long long)n;
			continue;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
			return errno;
		break;
	}
	static char buf[1 << 20];
	for (;;) {
		ssize_t r = read(in, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			return 0;
		for (ssize_t o = 0; o < r;) {
			ssize_t w = write(out, buf + o, (size_t)(r - o));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return errno;
			o += w;
		}
		*bytes += (unsigned long long)r;
	}
}

/* The new version of c made beside it under a temporary name (tmp). */
static int make_beside(const struct changes *ch, const struct change *c, char *tmp, size_t size, bool root,
		       unsigned long long *bytes)
{
	static unsigned long counter;
	char dir[4096];
	dir_of(c->path, dir, sizeof dir);
	for (int tries = 0; tries < 100; tries++) {
		snprintf(tmp, size, "%s%s.diehard-commit-%ld-%lu", dir, strcmp(dir, "/") == 0 ? "" : "/", (long)getpid(),
			 ++counter);
		int err = 0;
		switch (c->kind) {
		case CHANGE_FILE: {
			int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (out < 0) {
				err = errno;
				break;
			}
			int in = openat(ch->root, c->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (in < 0 && errno == EACCES && fchmodat(ch->root, c->upper, c->mode | 0400, 0) == 0)
				in = openat(ch->root, c->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (in < 0)
				err = errno;
			else {
				err = copy_bytes(in, out, bytes);
				close(in);
			}
			struct timespec ts[2] = { c->atime, c->mtime };
			if (err == 0 && root && fchown(out, c->uid, c->gid) != 0)
				err = errno;
			if (err == 0 && fchmod(out, c->mode) != 0)
				err = errno;
			if (err == 0 && futimens(out, ts) != 0)
				err = errno;
			if (close(out) != 0 && err == 0)
				err = errno;
			if (err != 0)
				(void)unlink(tmp);
			return err;
		}
		case CHANGE_LINK:
			if (symlink(c->link, tmp) != 0)
				err = errno;
			else if (root && lchown(tmp, c->uid, c->gid) != 0) {
				err = errno;
				(void)unlink(tmp);
			}
			break;
		case CHANGE_FIFO:
		case CHANGE_NODE:
			if (mknod(tmp, c->kind == CHANGE_FIFO ? (S_IFIFO | (c->mode & 07777)) : c->mode, c->rdev) != 0)
				err = errno;
			else if ((root && lchown(tmp, c->uid, c->gid) != 0) || chmod(tmp, c->mode & 07777) != 0) {
				err = errno;
				(void)unlink(tmp);
			}
			break;
		default:
			return EINVAL;
		}
		if (err != EEXIST)
			return err;
	}
	return EEXIST;
}

/* A directory made, or given the agreed mode and owner. */
static int put_dir(const struct change *c, bool root)
{
	struct stat st;
	if (lstat(c->path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(c->path) != 0)
		return errno;
	if (mkdir(c->path, c->mode) != 0 && errno != EEXIST)
		return errno;
	if (c->kind == CHANGE_OPAQUE) {
		int err = empty_dir(c->path);
		if (err != 0)
			return err;
	}
	if (root && lchown(c->path, c->uid, c->gid) != 0)
		return errno;
	return chmod(c->path, c->mode) == 0 ? 0 : errno;
}

/* Syncs the file systems of every view's target. */
static void sync_targets(const struct changes *ch)
{
	for (size_t v = 0; v < ch->ntargets; v++) {
		int fd = open(ch->targets[v], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (syncfs(fd) != 0)
			log_warn("cannot sync the file system of %s: %s", ch->targets[v], strerror(errno));
		close(fd);
	}
}

void commit_apply(const struct changes *ch, struct commit_result *res)
{
	*res = (struct commit_result){ 0 };
	if (ch == NULL || ch->n == 0)
		return;
	bool root = geteuid() == 0;
	char **tmp = calloc(ch->n, sizeof *tmp);
	bool *skip = calloc(ch->n, sizeof *skip);
	if (tmp == NULL || skip == NULL)
		fatal(125, "out of memory");
	/* First pass: directories, and every new version beside its path. */
	for (size_t i = 0; i < ch->n; i++) {
		const struct change *c = &ch->c[i];
		int err = 0;
		switch (c->kind) {
		case CHANGE_DIR:
		case CHANGE_OPAQUE:
			if ((err = put_dir(c, root)) != 0)
				say(c->path, "directory", err, res);
			else
				res->dirs++;
			break;
		case CHANGE_GONE:
			break;
		case CHANGE_NODE:
			if (!root) {
				say(c->path, "a device node, unprivileged", EPERM, res);
				skip[i] = true;
				break;
			}
			/* fall through */
		default: {
			char t[4096 + 64];
			if ((err = make_beside(ch, c, t, sizeof t, root, &res->bytes)) != 0) {
				say(c->path, "a new version beside it", err, res);
				skip[i] = true;
			} else if ((tmp[i] = strdup(t)) == NULL) {
				fatal(125, "out of memory");
			}
		}
		}
	}
	sync_targets(ch);
	/* Second pass: in place, in order. */
	for (size_t i = 0; i < ch->n; i++) {
		const struct change *c = &ch->c[i];
		int err;
		if (c->kind == CHANGE_GONE) {
			if ((err = remove_path(c->path)) != 0)
				say(c->path, "removal", err, res);
			else
				res->removed++;
			continue;
		}
		if (tmp[i] == NULL)
			continue;
		struct stat st;
		if (lstat(c->path, &st) == 0 && S_ISDIR(st.st_mode) && (err = remove_path(c->path)) != 0) {
			say(c->path, "the directory it replaces", err, res);
			(void)unlink(tmp[i]);
		} else if (rename(tmp[i], c->path) != 0) {
			say(c->path, "rename into place", errno, res);
			(void)unlink(tmp[i]);
		} else {
			res->written++;
		}
		free(tmp[i]);
	}
	sync_targets(ch);
	free(tmp);
	free(skip);
}
