/* pre.c — see pre.h.
 *
 * The layer's root is <dir>/r; a real path P is mirrored at <dir>/r/P,
 * so a view of target T takes <dir>/r/T as its layer (view.c makes those
 * directories in each replica's init). Paths are reached from the root's
 * descriptor one component at a time, never through a link (the layer
 * holds none but what diehard put there). */
#include "pre.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "changes.h"
#include "exitcode.h"
#include "extents.h"
#include "log.h"

/* What the layer holds, as pre_keep put it there. */
struct kept {
	char *path;    /* the real path */
	bool whiteout; /* absent at the start (else a copy of the file) */
};

struct pre {
	struct pre *epochs;  /* the run's layer: the later epochs' (pre_epoch), newest first */
	struct pre *next;    /* an epoch's: the one made before it */
	bool broken;         /* an epoch's: a path could not be kept in it (pre_keep) */
	char dir[64];  /* /dev/shm/diehard-pre-PID-XXXXXX */
	char root[72]; /* dir + /r */
	int fd;        /* root's descriptor */
	struct kept *k;
	size_t n, cap;
};

static void remember(struct pre *p, const char *path, size_t len, bool whiteout)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 16;
		p->k = realloc(p->k, p->cap * sizeof *p->k);
		if (p->k == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
	}
	char *copy = strndup(path, len);
	if (copy == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	p->k[p->n++] = (struct kept){ copy, whiteout };
}

/* The layer to remove at exit, whichever way diehard ends (fatal's exit
 * too; only a SIGKILL leaves it). */
static struct pre *live;
static pid_t live_owner; /* a fork of diehard that exits leaves it */

static void remove_at_exit(void)
{
	struct pre *p = live;
	if (p == NULL || getpid() != live_owner)
		return;
	live = NULL;
	pre_free(p);
}

static void remove_tree(int dir, int depth);

/* Layers that diehards killed by SIGKILL left (their pid, in the name,
 * is gone), of this user: removed. A live pid, even reused, keeps its. */
static void remove_stale(void)
{
	DIR *d = opendir("/dev/shm");
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		long pid;
		char rest[16];
		struct stat st;
		if (sscanf(e->d_name, "diehard-pre-%ld-%15s", &pid, rest) != 2 || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			remove_tree(fd, 0);
		(void)unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

/* An empty layer in a directory of its own; NULL, errno set, when none
 * can be made. */
static struct pre *layer_new(void)
{
	struct pre *p = calloc(1, sizeof *p);
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	snprintf(p->dir, sizeof p->dir, "/dev/shm/diehard-pre-%ld-XXXXXX", (long)getpid());
	if (mkdtemp(p->dir) == NULL) {
		free(p);
		return NULL;
	}
	snprintf(p->root, sizeof p->root, "%s/r", p->dir);
	if (mkdir(p->root, 0755) != 0 || (p->fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		int err = errno;
		(void)rmdir(p->root);
		(void)rmdir(p->dir);
		free(p);
		errno = err;
		return NULL;
	}
	return p;
}

struct pre *pre_new(void)
{
	remove_stale();
	struct pre *p = layer_new();
	if (p == NULL) {
		log_warn("no start-state layer in /dev/shm (%s): files are committed when the run ends, not at its "
			 "syncs", strerror(errno));
		return NULL;
	}
	live = p;
	live_owner = getpid();
	static bool registered;
	if (!registered && atexit(remove_at_exit) == 0)
		registered = true;
	return p;
}

struct pre *pre_epoch(struct pre *run)
{
	struct pre *e = layer_new();
	if (e == NULL) {
		log_warn("no layer for a new epoch in /dev/shm: %s", strerror(errno));
		return NULL;
	}
	e->next = run->epochs;
	run->epochs = e;
	return e;
}

void pre_epoch_free(struct pre *run, struct pre *e)
{
	if (run == NULL || e == NULL)
		return;
	for (struct pre **pp = &run->epochs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			pre_free(e);
			return;
		}
}

const char *pre_root(const struct pre *p)
{
	return p == NULL ? NULL : p->root;
}

/* Removes everything in dir (a descriptor, taken). */
static void remove_tree(int dir, int depth)
{
	DIR *d = fdopendir(dir);
	if (d == NULL) {
		close(dir);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno != EISDIR || depth > 4096)
			continue;
		int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			remove_tree(sub, depth + 1);
		(void)unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

void pre_free(struct pre *p)
{
	if (p == NULL)
		return;
	if (live == p)
		live = NULL;
	for (struct pre *e = p->epochs, *next; e != NULL; e = next) {
		next = e->next;
		e->next = NULL;
		pre_free(e);
	}
	remove_tree(p->fd, 0);
	int top = open(p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top >= 0)
		remove_tree(top, 0); /* a copy's temporary name, if one was left */
	if (rmdir(p->dir) != 0)
		log_warn("cannot remove the start-state layer %s: %s", p->dir, strerror(errno));
	for (size_t i = 0; i < p->n; i++)
		free(p->k[i].path);
	free(p->k);
	free(p);
}

/* The layer's entry for the real path's first len bytes (a directory
 * there, mirrored), with its real attributes, made if missing. */
static int put_dir(struct pre *p, const char *path, size_t len)
{
	char real[4096];
	if (len >= sizeof real)
		return ENAMETOOLONG;
	memcpy(real, path, len);
	real[len] = '\0';
	struct stat st;
	if (lstat(real, &st) != 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	const char *rel = real + 1;
	struct stat here;
	if (fstatat(p->fd, rel, &here, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISDIR(here.st_mode) ? 0 : ENOTDIR;
	/* Made whole under a name of its own, then moved in: overlayfs shows
	 * a directory with its topmost lower layer's mode and owner, and a
	 * replica must never see it half made (a 0700 /tmp, copied up). */
	static unsigned long counter;
	char tmp[64];
	snprintf(tmp, sizeof tmp, "../dir-%lu", ++counter);
	if (mkdirat(p->fd, tmp, 0700) != 0)
		return errno;
	int fd = openat(p->fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int err = fd < 0 ? errno : 0;
	struct timespec ts[2] = { st.st_atim, st.st_mtim };
	if (err == 0 && geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) != 0)
		err = errno;
	if (err == 0 && fchmod(fd, st.st_mode & 07777) != 0)
		err = errno;
	if (err == 0 && futimens(fd, ts) != 0)
		err = errno;
	if (fd >= 0)
		close(fd);
	if (err == 0 && renameat(p->fd, tmp, p->fd, rel) != 0)
		err = errno;
	if (err != 0)
		(void)unlinkat(p->fd, tmp, AT_REMOVEDIR);
	return err;
}

/* Whether path or one of its directories below the target's (from) is
 * in the layer already (a file kept, or a whiteout above it). */
static bool kept(const struct pre *p, const char *path, size_t from)
{
	char part[4096];
	size_t n = strlen(path);
	if (n >= sizeof part)
		return false;
	for (size_t i = from + 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		memcpy(part, path + 1, i - 1);
		part[i - 1] = '\0';
		struct stat st;
		if (fstatat(p->fd, part, &st, AT_SYMLINK_NOFOLLOW) != 0)
			return false;
		/* A whiteout (absent at the start), the path's own copy, or a
		 * file kept where the path has a directory now: what it hides
		 * was not there at the start either. */
		if (!S_ISDIR(st.st_mode) || i == n)
			return true;
	}
	return false;
}

/* extents.h's walk: n bytes of the file written at the same offset of
 * the copy (*ctx, a descriptor). */
static int put_piece(void *ctx, const char *bytes, size_t n, off_t at)
{
	return extents_write(*(int *)ctx, bytes, n, at);
}

/* A copy of the real file at path into the layer (its directories made). */
static int copy_file(struct pre *p, const char *path, const struct stat *st)
{
	/* Never waiting on a FIFO put there since the lstat: what is open
	 * must still be a regular file. */
	int in = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return errno;
	struct stat now;
	if (fstat(in, &now) != 0 || !S_ISREG(now.st_mode)) {
		close(in);
		return EINVAL;
	}
	/* A name of the layer's own beside the root, never a mirrored one. */
	char tmp[64];
	static unsigned long counter;
	snprintf(tmp, sizeof tmp, "../copy-%lu", ++counter);
	int out = openat(p->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int err = out < 0 ? errno : 0;
	/* Its data alone, holes kept (a sparse file costs what it holds);
	 * the size the file has now. */
	static char buf[1 << 16];
	if (err == 0)
		err = extents_each(in, &now, buf, sizeof buf, put_piece, &out);
	if (err == 0 && ftruncate(out, now.st_size) != 0)
		err = errno;
	close(in);
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	if (err == 0 && geteuid() == 0 && fchown(out, st->st_uid, st->st_gid) != 0)
		err = errno;
	if (err == 0 && fchmod(out, st->st_mode & 07777) != 0)
		err = errno;
	if (err == 0 && futimens(out, ts) != 0)
		err = errno;
	if (out >= 0 && close(out) != 0 && err == 0)
		err = errno;
	if (err == 0 && renameat(p->fd, tmp, p->fd, path + 1) != 0)
		err = errno;
	if (err != 0 && out >= 0)
		(void)unlinkat(p->fd, tmp, 0);
	return err;
}

/* pre_keep in one layer. */
static int keep_one(struct pre *p, const char *target, const char *path)
{
	size_t from = strcmp(target, "/") == 0 ? 0 : strlen(target);
	if (path[0] != '/' || strncmp(path, target, from) != 0 || path[from] != '/')
		return EINVAL;
	if (kept(p, path, from))
		return 0;
	size_t n = strlen(path);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return EINVAL;
		/* Its directories, then the file. */
		int err = 0;
		for (size_t i = from + 1; i < n && err == 0; i++)
			if (path[i] == '/')
				err = put_dir(p, path, i);
		if (err == 0 && (err = copy_file(p, path, &st)) == 0)
			remember(p, path, n, false);
		return err;
	}
	if (errno != ENOENT && errno != ENOTDIR)
		return errno;
	/* Absent: a whiteout at its topmost missing directory (or itself). */
	int err = 0;
	for (size_t i = from + 1; i <= n && err == 0; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		char part[4096];
		if (i >= sizeof part)
			return ENAMETOOLONG;
		memcpy(part, path, i);
		part[i] = '\0';
		if (lstat(part, &st) == 0) {
			if (S_ISDIR(st.st_mode) && i < n) {
				err = put_dir(p, path, i);
				continue;
			}
			return EINVAL; /* it came meanwhile: not the start's */
		}
		if (mknodat(p->fd, part + 1, S_IFCHR | 0000, makedev(0, 0)) != 0)
			return errno;
		remember(p, path, i, true);
		return 0;
	}
	return err;
}

int pre_keep(struct pre *p, const char *target, const char *path)
{
	int err = keep_one(p, target, path);
	if (err != 0)
		return err;
	/* Every epoch that lacks it wants the real file as it is now: a copy
	 * each (not linked: a view whose lower file is a copy would show it
	 * with several links, which some programs refuse). An epoch that
	 * cannot keep it is broken (its replacement would see this commit
	 * early): said, and taken out by files.c; the run's commit goes on. */
	for (struct pre *e = p->epochs; e != NULL; e = e->next) {
		if (e->broken)
			continue;
		int more = keep_one(e, target, path);
		if (more != 0) {
			e->broken = true;
			log_warn("the layer of a replacement from the committed files cannot keep %s (%s): that replacement "
				 "is taken out", path, strerror(more));
		}
	}
	return 0;
}

bool pre_epoch_broken(const struct pre *e)
{
	return e != NULL && e->broken;
}

/* Whether ch's upper layer v has its own version of path (rel: beneath
 * the view), or of a directory above it that hides the lower ones (a
 * whiteout, an opaque directory). */
static bool covered(const struct changes *ch, unsigned v, const char *path, size_t rel)
{
	char upper[4200];
	size_t n = strlen(path);
	for (size_t i = rel; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		if ((size_t)snprintf(upper, sizeof upper, "v%u/u/%.*s", v, (int)(i - rel), path + rel) >= sizeof upper)
			return true; /* not reachable: nothing to add */
		struct stat st;
		if (changes_layer_stat(ch, upper, &st) != 0)
			return errno == ELOOP; /* a link on the way hides what is below */
		if (i == n || !S_ISDIR(st.st_mode))
			return true;
		for (size_t c = 0; c < ch->n; c++)
			if (ch->c[c].kind == CHANGE_OPAQUE && ch->c[c].view == v &&
			    strlen(ch->c[c].path) == i && strncmp(ch->c[c].path, path, i) == 0)
				return true;
	}
	return false;
}

int pre_complete(const struct pre *p, struct changes *ch, const struct digest_key *key)
{
	if (p == NULL || p->n == 0)
		return 0;
	size_t before = ch->n;
	for (size_t i = 0; i < p->n; i++) {
		const struct kept *k = &p->k[i];
		size_t rel;
		int v = changes_view_of(ch, k->path, &rel);
		if (v < 0 || covered(ch, (unsigned)v, k->path, rel))
			continue;
		struct stat real;
		bool here = lstat(k->path, &real) == 0;
		struct change c = { .path = k->path, .view = (unsigned)v, .rel = rel };
		if (k->whiteout) {
			if (!here)
				continue;
			c.kind = CHANGE_GONE;
			changes_add(ch, &c);
			continue;
		}
		/* The start's copy, unless the real file is the same again. */
		char copy[4200];
		snprintf(copy, sizeof copy, "%s%s", p->root, k->path);
		int fd = open(copy, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0) {
			int err = errno;
			if (fd >= 0)
				close(fd);
			return err;
		}
		int err = changes_digest_fd(fd, key, c.digest);
		close(fd);
		if (err != 0)
			return err;
		c.kind = CHANGE_FILE;
		c.upper = copy; /* absolute: commit.c's openat takes it as it is */
		c.mode = st.st_mode & 07777;
		c.uid = st.st_uid;
		c.gid = st.st_gid;
		c.size = st.st_size;
		c.atime = st.st_atim;
		c.mtime = st.st_mtim;
		if (here && S_ISREG(real.st_mode) && (real.st_mode & 07777) == c.mode && real.st_uid == c.uid &&
		    real.st_gid == c.gid && real.st_size == c.size) {
			uint8_t dg[DIGEST_BYTES];
			int rfd = open(k->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			bool same = rfd >= 0 && changes_digest_fd(rfd, key, dg) == 0 && memcmp(dg, c.digest, sizeof dg) == 0;
			if (rfd >= 0)
				close(rfd);
			if (same)
				continue;
		}
		changes_add(ch, &c);
	}
	if (ch->n != before)
		changes_sort(ch);
	return 0;
}
