/* changes.c — see changes.h. Runs in diehard, after a replica ended: its
 * staging tmpfs is reached only through the descriptor its init sent, and
 * nothing in it runs any more, so the walk reads a still tree.
 *
 * Invariant of a list: entries in walk order (view by view, each
 * directory's names sorted, a directory before its contents); the real
 * path of each is its view's target joined with its path in the upper
 * layer. */
#include "changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "extents.h"
#include "log.h"
#include "view.h"

#define READ_CHUNK (1u << 20)
#define BLOCK EXTENT_BLOCK
#define DEPTH_MAX 1024 /* directories deep, below a view's top */

static char *dup_or_die(const char *s)
{
	char *d = strdup(s);
	if (d == NULL)
		fatal(125, "out of memory");
	return d;
}

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	size_t c = *cap ? *cap * 2 : 64;
	void *q = realloc(p, c * size);
	if (q == NULL)
		fatal(125, "out of memory");
	*cap = c;
	return q;
}

struct changes *changes_open(int root)
{
	struct changes *ch = calloc(1, sizeof *ch);
	if (ch == NULL)
		return NULL;
	ch->root = root;
	int fd = openat(root, "manifest", O_RDONLY | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (f == NULL) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(ch);
		errno = err;
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0, tcap = 0, ucap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		char *tab = strchr(line, '\t');
		if (tab == NULL)
			continue;
		*tab = '\0';
		if (line[0] == 'v') {
			unsigned long n = strtoul(line + 1, NULL, 10);
			if (n != ch->ntargets)
				continue; /* views are numbered in order */
			ch->targets = grow(ch->targets, &tcap, ch->ntargets, sizeof *ch->targets);
			ch->targets[ch->ntargets++] = dup_or_die(tab + 1);
		} else if (line[0] == '-' || line[0] == '!') {
			char *tab2 = strchr(tab + 1, '\t');
			if (tab2 == NULL)
				continue;
			ch->un = grow(ch->un, &ucap, ch->nun, sizeof *ch->un);
			ch->un[ch->nun++] = (struct unviewed){ dup_or_die(tab2 + 1), atoi(tab + 1), line[0] == '!' };
		} else if (line[0] == 'x') {
			ch->user_xattrs = strcmp(tab + 1, "user") == 0;
		}
	}
	free(line);
	fclose(f);
	return ch;
}

void changes_free(struct changes *ch)
{
	if (ch == NULL)
		return;
	for (size_t i = 0; i < ch->n; i++) {
		free(ch->c[i].path);
		free(ch->c[i].upper);
		free(ch->c[i].link);
	}
	free(ch->c);
	for (size_t i = 0; i < ch->ntargets; i++)
		free(ch->targets[i]);
	free(ch->targets);
	for (size_t i = 0; i < ch->nun; i++)
		free(ch->un[i].path);
	free(ch->un);
	if (ch->root >= 0)
		close(ch->root);
	free(ch);
}

/* a + "/" + b, malloc'ed ("/" + b when a is "/"). */
static char *path_join(const char *a, const char *b)
{
	char *p;
	if (asprintf(&p, "%s%s%s", strcmp(a, "/") == 0 ? "" : a, "/", b) < 0)
		fatal(125, "out of memory");
	return p;
}

/* Opens a file of the upper layer for reading. Unprivileged, a mode
 * without the owner's read bit keeps diehard (its owner) out: granted for
 * the moment and put back. */
static int open_upper(int dir, const char *name, mode_t mode, int flags)
{
	int fd = openat(dir, name, flags | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 || errno != EACCES)
		return fd;
	if (fchmodat(dir, name, mode | 0500, 0) != 0)
		return -1;
	fd = openat(dir, name, flags | O_CLOEXEC | O_NOFOLLOW);
	int err = errno;
	(void)fchmodat(dir, name, mode, 0);
	errno = err;
	return fd;
}

static bool zero_block(const char *p, size_t n)
{
	static const char zero[BLOCK];
	return memcmp(p, zero, n) == 0;
}

/* One piece of a file for the digest: each non-zero block with its
 * number. */
static int digest_piece(void *ctx, const char *bytes, size_t n, off_t at)
{
	struct digest *d = ctx;
	for (size_t b = 0; b < n; b += BLOCK) {
		size_t len = n - b < BLOCK ? n - b : BLOCK;
		if (zero_block(bytes + b, len))
			continue;
		uint64_t no = (uint64_t)(at + (off_t)b) / BLOCK;
		digest_update(d, &no, sizeof no);
		digest_update(d, bytes + b, len);
	}
	return 0;
}

static int digest_fd(int fd, const struct digest_key *key, uint8_t out[DIGEST_BYTES], char *buf)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return errno;
	struct digest d;
	digest_init(&d, key);
	uint64_t size = (uint64_t)st.st_size;
	digest_update(&d, &size, sizeof size);
	int err = extents_each(fd, &st, buf, READ_CHUNK, digest_piece, &d);
	if (err != 0)
		return err;
	digest_final(&d, out);
	return 0;
}

int changes_digest_fd(int fd, const struct digest_key *key, uint8_t out[DIGEST_BYTES])
{
	char *buf = malloc(READ_CHUNK);
	if (buf == NULL)
		return ENOMEM;
	int err = digest_fd(fd, key, out, buf);
	free(buf);
	return err;
}

struct walk {
	struct changes *ch;
	unsigned view;  /* the view walked */
	size_t rel;     /* where paths beneath its target start */
	unsigned depth; /* directories deep */
	const struct digest_key *key;
	char *buf;
	const char *where;
	char *where_buf;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether the upper directory open at fd is opaque, by the mark of the
 * namespace its overlay uses (another's is the program's own xattr). */
static bool opaque_fd(int fd, bool user)
{
	char proc[64], v[4];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return getxattr(proc, user ? "user.overlay.opaque" : "trusted.overlay.opaque", v, sizeof v) == 1 &&
	       v[0] == 'y';
}

/* name beneath dir as an O_PATH descriptor, through no link at all (the
 * last component may be one): a replica that swapped a directory of its
 * layer for a link meanwhile gets nothing looked up outside it. */
static int open_layer_path(int dir, const char *name)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	return (int)syscall(SYS_openat2, dir, name, &how, sizeof how);
}

int changes_layer_stat(const struct changes *ch, const char *upper, struct stat *st)
{
	int fd = open_layer_path(ch->root, upper);
	if (fd < 0)
		return -1;
	int rc = fstat(fd, st), err = errno;
	close(fd);
	errno = err;
	return rc;
}

/* The same, of name beneath dir. */
static bool opaque(int dir, const char *name, bool user)
{
	int fd = open_layer_path(dir, name);
	if (fd < 0)
		return false;
	bool yes = opaque_fd(fd, user);
	close(fd);
	return yes;
}

/* Whether the real file (st of the upper version) is the same as it: a
 * copy-up of something unchanged. */
static bool unchanged(struct walk *w, const struct change *c, const struct stat *up)
{
	struct stat real;
	if (lstat(c->path, &real) != 0 || (real.st_mode & S_IFMT) != (up->st_mode & S_IFMT) ||
	    (real.st_mode & 07777) != (up->st_mode & 07777) || real.st_uid != up->st_uid || real.st_gid != up->st_gid)
		return false;
	if (S_ISDIR(up->st_mode))
		return true;
	if (S_ISLNK(up->st_mode)) {
		char t[4096];
		ssize_t n = readlink(c->path, t, sizeof t - 1);
		if (n < 0)
			return false;
		t[n] = '\0';
		return strcmp(t, c->link) == 0;
	}
	if (!S_ISREG(up->st_mode) || real.st_size != up->st_size)
		return false;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	uint8_t dg[DIGEST_BYTES];
	int err = digest_fd(fd, w->key, dg, w->buf);
	close(fd);
	return err == 0 && memcmp(dg, c->digest, DIGEST_BYTES) == 0;
}

static int walk_dir(struct walk *w, int dir, const char *real, const char *upper, bool below_opaque);

/* One name of an upper directory. */
static int walk_entry(struct walk *w, int dir, const char *name, const char *real, const char *upper,
		      bool below_opaque)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno;
	/* The whiteout of view.c's seed at a view's top: no change (the real
	 * directory had no such name, or it would have had no seed). */
	if (strcmp(name, VIEW_WHITEOUT_SEED) == 0 && strchr(upper, '/') == strrchr(upper, '/') && S_ISCHR(st.st_mode) &&
	    st.st_rdev == 0) {
		struct stat real_st;
		char *rp = path_join(real, name);
		bool absent = lstat(rp, &real_st) != 0 && errno == ENOENT;
		free(rp);
		if (absent)
			return 0;
	}
	struct change c = { .path = path_join(real, name), .upper = path_join(upper, name), .view = w->view, .rel = w->rel,
			    .mode = st.st_mode & 07777,
			    .uid = st.st_uid, .gid = st.st_gid, .atime = st.st_atim, .mtime = st.st_mtim };
	int err = 0;
	bool keep = true;
	switch (st.st_mode & S_IFMT) {
	case S_IFCHR:
		if (major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) {
			c.kind = CHANGE_GONE;
			c.mode = 0;
			c.uid = 0;
			c.gid = 0;
			/* Nothing real to remove (a commit point removed it
			 * already): no change, as for a replica that never saw
			 * it (points.h). */
			struct stat real;
			keep = below_opaque || lstat(c.path, &real) == 0 || (errno != ENOENT && errno != ENOTDIR);
			break;
		}
		/* fall through */
	case S_IFBLK:
		c.kind = CHANGE_NODE;
		c.rdev = st.st_rdev;
		c.mode |= st.st_mode & S_IFMT;
		break;
	case S_IFIFO:
		c.kind = CHANGE_FIFO;
		break;
	case S_IFSOCK:
		keep = false; /* a bound socket's name: nothing to commit */
		break;
	case S_IFLNK: {
		char t[4096];
		ssize_t n = readlinkat(dir, name, t, sizeof t - 1);
		if (n < 0) {
			err = errno;
			break;
		}
		t[n] = '\0';
		c.kind = CHANGE_LINK;
		c.link = dup_or_die(t);
		keep = below_opaque || !unchanged(w, &c, &st);
		break;
	}
	case S_IFREG: {
		c.kind = CHANGE_FILE;
		c.size = st.st_size;
		int fd = open_upper(dir, name, c.mode, O_RDONLY);
		if (fd < 0) {
			err = errno;
			break;
		}
		err = digest_fd(fd, w->key, c.digest, w->buf);
		close(fd);
		if (err == 0)
			keep = below_opaque || !unchanged(w, &c, &st);
		break;
	}
	case S_IFDIR: {
		bool op = below_opaque || opaque(dir, name, w->ch->user_xattrs);
		c.kind = op && !below_opaque ? CHANGE_OPAQUE : CHANGE_DIR;
		keep = below_opaque || c.kind == CHANGE_OPAQUE || !unchanged(w, &c, &st);
		if (keep) {
			w->ch->c = grow(w->ch->c, &w->ch->cap, w->ch->n, sizeof *w->ch->c);
			w->ch->c[w->ch->n++] = c;
		}
		int sub = w->depth >= DEPTH_MAX ? (errno = ELOOP, -1) : open_upper(dir, name, c.mode, O_RDONLY | O_DIRECTORY);
		if (sub < 0) {
			err = errno;
		} else {
			w->depth++;
			err = walk_dir(w, sub, c.path, c.upper, op);
			w->depth--;
		}
		if (err != 0 && w->where == NULL) {
			free(w->where_buf);
			w->where = w->where_buf = dup_or_die(c.path);
		}
		if (!keep) {
			free(c.path);
			free(c.upper);
		}
		return err;
	}
	default:
		keep = false;
	}
	if (err != 0 && w->where == NULL) {
		free(w->where_buf);
		w->where = w->where_buf = dup_or_die(c.path);
	}
	if (err == 0 && keep) {
		w->ch->c = grow(w->ch->c, &w->ch->cap, w->ch->n, sizeof *w->ch->c);
		w->ch->c[w->ch->n++] = c;
	} else {
		free(c.path);
		free(c.upper);
		free(c.link);
	}
	return err;
}

/* Walks directory fd (taken), whose real path is real. */
static int walk_dir(struct walk *w, int fd, const char *real, const char *upper, bool below_opaque)
{
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int err = errno;
		close(fd);
		return err;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		names = grow(names, &cap, n, sizeof *names);
		names[n++] = dup_or_die(e->d_name);
	}
	int err = errno;
	if (n > 1)
		qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n && err == 0; i++)
		err = walk_entry(w, dirfd(d), names[i], real, upper, below_opaque);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return err;
}

int changes_scan(struct changes *ch, const struct digest_key *key, const char **where)
{
	struct walk w = { .ch = ch, .key = key, .buf = malloc(READ_CHUNK) };
	if (w.buf == NULL)
		fatal(125, "out of memory");
	int err = 0;
	for (size_t v = 0; v < ch->ntargets && err == 0; v++) {
		char upper[32];
		snprintf(upper, sizeof upper, "v%zu/u", v);
		int fd = openat(ch->root, upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			err = errno;
			w.where = ch->targets[v];
			break;
		}
		w.view = (unsigned)v;
		w.rel = strcmp(ch->targets[v], "/") == 0 ? 1 : strlen(ch->targets[v]) + 1;
		err = walk_dir(&w, fd, ch->targets[v], upper, false);
	}
	free(w.buf);
	static char last[4096];
	if (err != 0 && where != NULL) {
		snprintf(last, sizeof last, "%s", w.where != NULL ? w.where : "?");
		*where = last;
	}
	free(w.where_buf);
	return err;
}

int changes_view_of(const struct changes *ch, const char *path, size_t *rel)
{
	int best = -1;
	size_t best_len = 0;
	for (size_t v = 0; v < ch->ntargets; v++) {
		const char *t = ch->targets[v];
		size_t n = strlen(t);
		bool root = strcmp(t, "/") == 0;
		if (root ? path[0] != '/' : strncmp(path, t, n) != 0 || path[n] != '/')
			continue;
		if (best < 0 || n >= best_len) {
			best = (int)v;
			best_len = n;
			*rel = root ? 1 : n + 1;
		}
	}
	return best;
}

/* Opens upper (beneath the staging root, no link followed anywhere, no
 * other file system, never blocking on a FIFO) for reading: a regular
 * file's descriptor, or -1. Unprivileged, a mode without the owner's read
 * bit is granted for the moment, through the file's own O_PATH descriptor. */
static int open_beneath(int root, const char *upper, int access)
{
	struct open_how how = { .flags = (uint64_t)access | O_NONBLOCK | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, root, upper, &how, sizeof how);
	if (fd < 0 && errno == EACCES) {
		how.flags = O_PATH | O_CLOEXEC;
		int path = (int)syscall(SYS_openat2, root, upper, &how, sizeof how);
		struct stat st;
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", path);
		mode_t need = access == O_RDONLY ? 0400 : 0600;
		if (path >= 0 && fstat(path, &st) == 0 && S_ISREG(st.st_mode) && chmod(proc, (st.st_mode & 07777) | need) == 0) {
			fd = open(proc, access | O_NONBLOCK | O_CLOEXEC);
			(void)chmod(proc, st.st_mode & 07777);
		}
		if (path >= 0)
			close(path);
	}
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int changes_open_real(const char *target, const char *rel, int flags, mode_t mode)
{
	int top = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return -1;
	/* openat2 takes no other flag with O_PATH. */
	int more = (flags & O_PATH) ? O_NOFOLLOW | O_CLOEXEC : O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	struct open_how how = { .flags = (uint64_t)(flags | more), .mode = mode,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, top, rel[0] != '\0' ? rel : ".", &how, sizeof how);
	int err = errno;
	close(top);
	errno = err;
	return fd;
}

int changes_open_real_parent(const char *target, const char *path, const char **name)
{
	size_t t = strcmp(target, "/") == 0 ? 0 : strlen(target);
	*name = strrchr(path, '/') + 1;
	char parent[4096];
	size_t plen = *name - 1 > path + t + 1 ? (size_t)(*name - 1 - (path + t + 1)) : 0;
	if (plen >= sizeof parent) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(parent, path + t + 1, plen);
	parent[plen] = '\0';
	return changes_open_real(target, parent, O_RDONLY | O_DIRECTORY, 0);
}

static int open_version(const struct changes *ch, const char *path, int access)
{
	char upper[4200];
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	if (v < 0 || (size_t)snprintf(upper, sizeof upper, "v%d/u/%s", v, path + rel) >= sizeof upper)
		return -1;
	return open_beneath(ch->root, upper, access);
}

int changes_open_version(const struct changes *ch, const char *path)
{
	return open_version(ch, path, O_RDONLY);
}

int changes_open_version_rw(const struct changes *ch, const char *path)
{
	return open_version(ch, path, O_RDWR);
}

bool changes_masks(const struct changes *ch, const char *path)
{
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	if (v < 0)
		return false;
	char upper[4200];
	int n = snprintf(upper, sizeof upper, "v%d/u/%s", v, path + rel);
	if (n < 0 || (size_t)n >= sizeof upper)
		return false;
	/* Top down from the view's target: the first name the upper layer
	 * lacks lets the lower layers show; a non-directory (a whiteout, a
	 * file put in a directory's place) or an opaque directory hides
	 * everything beneath it. */
	size_t base = strlen(upper) - strlen(path + rel);
	/* The path itself in the upper layer (the common case: the replica
	 * wrote the file) masks it, whatever lies above. */
	int fd;
	if (path[rel] != '\0' && (fd = open_layer_path(ch->root, upper)) >= 0) {
		close(fd);
		return true;
	}
	if (path[rel] == '\0')
		return false; /* the target itself */
	/* Not there itself: the directories above it, top down. */
	for (char *s = upper + base + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		struct stat st;
		/* A link on the way is no directory: it masks (ELOOP). */
		if ((fd = open_layer_path(ch->root, upper)) < 0)
			return errno == ELOOP;
		if (fstat(fd, &st) != 0) {
			close(fd);
			return false;
		}
		bool masks = !S_ISDIR(st.st_mode) || opaque_fd(fd, ch->user_xattrs);
		close(fd);
		if (masks)
			return true;
		*s = '/';
	}
	return false;
}

/* path's upper name, "vN/u/REL", into buf; its view's index (or -1) and
 * where REL starts in buf. */
static int upper_name(const struct changes *ch, const char *path, char *buf, size_t size, size_t *at)
{
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	if (v < 0)
		return -1;
	int n = snprintf(buf, size, "v%d/u/%s", v, path + rel);
	if (n < 0 || (size_t)n >= size)
		return -1;
	*at = (size_t)n - strlen(path + rel);
	return v;
}

int changes_fd_id(int fd, struct file_id *id)
{
	struct {
		struct file_handle fh;
		unsigned char room[sizeof id->h];
	} u;
	u.fh.handle_bytes = sizeof id->h;
	int mnt;
	if (name_to_handle_at(fd, "", &u.fh, &mnt, AT_EMPTY_PATH) != 0)
		return errno;
	id->type = u.fh.handle_type;
	id->len = u.fh.handle_bytes;
	memcpy(id->h, u.fh.f_handle, id->len);
	return 0;
}

bool changes_same_id(const struct file_id *a, const struct file_id *b)
{
	return a->type != 0 && a->type == b->type && a->len == b->len && memcmp(a->h, b->h, a->len) == 0;
}

/* The real file at path, its attributes into *st and (id not NULL) its
 * identity: 0, ENOENT when there is nothing there, or an errno. */
static int real_at(const struct changes *ch, const char *path, struct file_id *id, struct stat *st)
{
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	if (v < 0)
		return EXDEV;
	int fd = changes_open_real(ch->targets[v], path + rel, O_PATH, 0);
	if (fd < 0)
		return errno;
	int err = fstat(fd, st) != 0 ? errno : id != NULL ? changes_fd_id(fd, id) : 0;
	close(fd);
	return err;
}

int changes_real_id(const struct changes *ch, const char *path, struct file_id *id, struct stat *st)
{
	return real_at(ch, path, id, st);
}

int changes_origin_id(const struct changes *ch, const char *path, struct file_id *id)
{
	char up[4200], proc[64];
	size_t at;
	if (upper_name(ch, path, up, sizeof up, &at) < 0)
		return EXDEV;
	int fd = open_layer_path(ch->root, up);
	if (fd < 0)
		return errno;
	/* overlayfs's origin record: version, magic 0xfb, length, flags,
	 * handle type, the lower file system's uuid (16), the handle. */
	unsigned char v[4 + 1 + 16 + sizeof id->h];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	ssize_t n = getxattr(proc, ch->user_xattrs ? "user.overlay.origin" : "trusted.overlay.origin", v, sizeof v);
	int err = n < 0 ? (errno == ENODATA ? ENODATA : errno) : 0;
	close(fd);
	if (err != 0)
		return err;
	if (n < 21 || v[1] != 0xfb || v[2] != n)
		return EINVAL;
	id->type = v[4];
	id->len = (unsigned)n - 21;
	memcpy(id->h, v + 21, id->len);
	return 0;
}

int changes_real_kind(const struct changes *ch, const char *path)
{
	struct stat st;
	int err = real_at(ch, path, NULL, &st);
	return err == ENOENT ? 0 : err == 0 && S_ISREG(st.st_mode) ? 1 : -1;
}

bool changes_dirs_real(const struct changes *ch, const char *path)
{
	char upper[4200];
	size_t at, rel;
	int v = upper_name(ch, path, upper, sizeof upper, &at);
	if (v < 0 || changes_view_of(ch, path, &rel) != v)
		return false;
	bool real_gone = false;
	for (char *s = strchr(upper + at, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		struct stat up, real;
		bool has_up = changes_layer_stat(ch, upper, &up) == 0;
		if (!has_up && errno == ELOOP) {
			has_up = true; /* a link on the way: the replica's, no directory */
			up.st_mode = S_IFLNK;
		}
		int fd = real_gone ? -1 : changes_open_real(ch->targets[v], upper + at, O_PATH | O_DIRECTORY, 0);
		bool ok;
		if (fd < 0 && !real_gone && errno != ENOENT)
			ok = false; /* a link, another file system, no directory */
		else if (fd < 0) {
			/* The real tree lacks it (and all beneath): the
			 * replica's own, made in the directory above. */
			real_gone = true;
			ok = !has_up || S_ISDIR(up.st_mode);
		} else
			ok = fstat(fd, &real) == 0 && (!has_up || (S_ISDIR(up.st_mode) && !opaque(ch->root, upper, ch->user_xattrs) &&
								  (up.st_mode & 07777) == (real.st_mode & 07777) &&
								  up.st_uid == real.st_uid && up.st_gid == real.st_gid));
		if (fd >= 0)
			close(fd);
		*s = '/';
		if (!ok)
			return false;
	}
	return true;
}

bool changes_renamed(const struct changes *ch, const char *from, const char *to, dev_t dev, ino_t ino)
{
	char up_from[4200], up_to[4200];
	size_t at;
	if (upper_name(ch, from, up_from, sizeof up_from, &at) < 0 || upper_name(ch, to, up_to, sizeof up_to, &at) < 0)
		return false;
	struct stat st;
	if (changes_layer_stat(ch, up_to, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != dev || st.st_ino != ino)
		return false;
	/* Gone from the old name: nothing, a whiteout, or another file made
	 * there since (the program's next save). */
	if (changes_layer_stat(ch, up_from, &st) != 0)
		return errno == ENOENT;
	return (S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) || st.st_ino != ino;
}

bool changes_removed(const struct changes *ch, const char *path, ino_t ino)
{
	char up[4200];
	size_t at;
	if (upper_name(ch, path, up, sizeof up, &at) < 0)
		return false;
	struct stat st;
	if (changes_layer_stat(ch, up, &st) != 0)
		return errno == ENOENT;
	return (S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) || st.st_ino != ino;
}

void changes_add(struct changes *ch, const struct change *c)
{
	ch->c = grow(ch->c, &ch->cap, ch->n, sizeof *ch->c);
	ch->c[ch->n] = *c;
	ch->c[ch->n].path = dup_or_die(c->path);
	ch->c[ch->n].upper = c->upper != NULL ? dup_or_die(c->upper) : NULL;
	ch->c[ch->n].link = c->link != NULL ? dup_or_die(c->link) : NULL;
	ch->n++;
}

/* The walk's order: by view, then beneath it name by name ('/' before any
 * other byte: a directory's entries right after it). */
static int walk_order(const void *pa, const void *pb)
{
	const struct change *a = pa, *b = pb;
	if (a->view != b->view)
		return a->view < b->view ? -1 : 1;
	const unsigned char *x = (const unsigned char *)a->path + a->rel, *y = (const unsigned char *)b->path + b->rel;
	for (;; x++, y++) {
		unsigned cx = *x == '/' ? 1 : *x == 0 ? 0 : *x + 1u, cy = *y == '/' ? 1 : *y == 0 ? 0 : *y + 1u;
		if (cx != cy)
			return cx < cy ? -1 : 1;
		if (cx == 0)
			return 0;
	}
}

void changes_sort(struct changes *ch)
{
	if (ch->n > 1)
		qsort(ch->c, ch->n, sizeof *ch->c, walk_order);
}

static bool same_entry(const struct change *a, const struct change *b)
{
	return a->kind == b->kind && strcmp(a->path, b->path) == 0 && a->mode == b->mode && a->uid == b->uid &&
	       a->gid == b->gid && a->size == b->size && a->rdev == b->rdev &&
	       memcmp(a->digest, b->digest, DIGEST_BYTES) == 0 &&
	       (a->link == NULL) == (b->link == NULL) && (a->link == NULL || strcmp(a->link, b->link) == 0);
}

bool changes_same(const struct changes *a, const struct changes *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!same_entry(&a->c[i], &b->c[i]))
			return false;
	return true;
}

static const struct change *find(const struct changes *ch, const char *path)
{
	for (size_t i = 0; i < ch->n; i++)
		if (strcmp(ch->c[i].path, path) == 0)
			return &ch->c[i];
	return NULL;
}

/* The first byte where two open files differ (their common length when
 * one is a prefix of the other); closes both (either may be -1). */
static off_t first_byte_fds(int fa, int fb)
{
	off_t off = 0;
	char x[65536], y[65536];
	/* Bounded: a difference past 1 GiB (in a huge sparse file) is named
	 * at 1 GiB. */
	while (fa >= 0 && fb >= 0 && off < (1 << 30)) {
		ssize_t na = read(fa, x, sizeof x), nb = read(fb, y, sizeof y);
		if (na <= 0 || nb <= 0)
			break;
		ssize_t m = na < nb ? na : nb, i = 0;
		while (i < m && x[i] == y[i])
			i++;
		off += i;
		if (i < m || na != nb)
			break;
	}
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return off;
}

/* The first byte where two upper files differ. */
static off_t first_byte(const struct changes *a, const struct change *ca, const struct changes *b,
			const struct change *cb)
{
	return first_byte_fds(openat(a->root, ca->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW),
			      openat(b->root, cb->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
}

bool changes_diff(const struct changes *a, const struct changes *b, const char **path, off_t *offset,
		  const char **what)
{
	*offset = 0;
	size_t n = a->n > b->n ? a->n : b->n;
	for (size_t i = 0; i < n; i++) {
		const struct change *ca = i < a->n ? &a->c[i] : NULL, *cb = i < b->n ? &b->c[i] : NULL;
		if (ca != NULL && cb != NULL && same_entry(ca, cb))
			continue;
		/* The first entry that differs: is it in the other list at all? */
		const struct change *x = ca != NULL ? ca : cb;
		const struct change *other = ca != NULL ? find(b, ca->path) : find(a, cb->path);
		*path = x->path;
		if (other == NULL) {
			*what = ca != NULL ? "extra" : "missing";
			/* The other left the path as the real tree has it: where
			 * that is a file and so is this one, they differ in bytes
			 * (a dump written again with other contents), and the
			 * offset is where this one leaves the real file. */
			const struct changes *xs = ca != NULL ? a : b;
			int real = x->kind == CHANGE_FILE ? open(x->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
			struct stat st;
			if (real >= 0 && fstat(real, &st) == 0 && S_ISREG(st.st_mode)) {
				*what = "bytes";
				*offset = first_byte_fds(openat(xs->root, x->upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), real);
			} else if (real >= 0) {
				close(real);
			}
			return true;
		}
		const struct change *pa = ca != NULL ? ca : other, *pb = ca != NULL ? other : cb;
		if (pa->kind != pb->kind)
			*what = "type";
		else if (pa->mode != pb->mode)
			*what = "mode";
		else if (pa->uid != pb->uid || pa->gid != pb->gid)
			*what = "owner";
		else if (pa->kind == CHANGE_LINK)
			*what = "link";
		else {
			*what = "bytes";
			if (pa->kind == CHANGE_FILE)
				*offset = first_byte(a, pa, b, pb);
		}
		return true;
	}
	return false;
}
