/* view.c — see view.h. Runs in the init, between clone and the program's
 * fork: system calls only, buffers from mmap, strings formatted by hand.
 *
 * The mount table is read once, before anything is mounted here. Of its
 * entries only the visible ones count: a mount whose root another mount
 * covers (same mount point, the covering one its child: the init's new
 * /proc over the host's), and everything under it but the cover, is
 * hidden and left out of the new tree. Mount points are kept in the
 * table's order, which puts every parent before its children. */
#include "view.h"
#include "viewdev.h"

#include <errno.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#define TABLE_BYTES (4u << 20)
#define MOUNTS_MAX 4096
#define PATH_BYTES 4096

struct mnt {
	int id, parent;
	char *path;
	const char *fstype;
	bool rw;
	unsigned long flags; /* MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_NOATIME... as mounted */
	bool hidden;
};

struct table {
	struct mnt *m;
	unsigned n;
};

/* Whether path is dir or beneath it. */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The kernel's interfaces and the devices: bound as they are, never viewed. */
static bool kernel_path(const char *path)
{
	return under(path, "/proc") || under(path, "/sys") || under(path, "/dev");
}

/* File systems that hold files a program writes: every one but the
 * kernel's own interfaces (a type not known here is data: viewed when
 * read-write, never left writable and shared by oversight). The kernel's
 * (proc, sysfs, devtmpfs, cgroup, bpf, nsfs...) are bound as they are. */
static bool data_fs(const char *t)
{
	static const char *const kernel[] = { "proc",     "sysfs",     "devtmpfs",   "devpts",   "cgroup",
					      "cgroup2",  "debugfs",   "tracefs",    "securityfs", "pstore",
					      "bpf",      "configfs",  "fusectl",    "hugetlbfs", "mqueue",
					      "autofs",   "binfmt_misc", "nsfs",     "efivarfs", "rpc_pipefs",
					      "nfsd",     "selinuxfs", "smackfs",    "apparmorfs" };
	for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++)
		if (strcmp(t, kernel[i]) == 0)
			return false;
	return true;
}

/* mountinfo's octal escapes (\040 for a space...) decoded in place. */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p != '\0'; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* The next space-separated field of *s (NUL-terminated in place), or NULL. */
static char *field(char **s)
{
	char *p = *s;
	while (*p == ' ')
		p++;
	if (*p == '\0' || *p == '\n')
		return NULL;
	char *start = p;
	while (*p != ' ' && *p != '\0' && *p != '\n')
		p++;
	if (*p != '\0')
		*p++ = '\0';
	*s = p;
	return start;
}

static int parse_int(const char *s)
{
	int v = 0;
	for (; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (*s - '0');
	return v;
}

static void parse_options(struct mnt *m, char *opts)
{
	m->rw = false;
	m->flags = 0;
	for (char *p = opts; p != NULL && *p != '\0';) {
		char *comma = strchr(p, ',');
		if (comma != NULL)
			*comma = '\0';
		if (strcmp(p, "rw") == 0)
			m->rw = true;
		else if (strcmp(p, "nosuid") == 0)
			m->flags |= MS_NOSUID;
		else if (strcmp(p, "nodev") == 0)
			m->flags |= MS_NODEV;
		else if (strcmp(p, "noexec") == 0)
			m->flags |= MS_NOEXEC;
		else if (strcmp(p, "noatime") == 0)
			m->flags |= MS_NOATIME;
		else if (strcmp(p, "nodiratime") == 0)
			m->flags |= MS_NODIRATIME;
		else if (strcmp(p, "relatime") == 0)
			m->flags |= MS_RELATIME;
		p = comma != NULL ? comma + 1 : NULL;
	}
}

/* /proc/self/mountinfo into t (buffers mmap'ed, never freed: the init
 * execs or exits soon). 0, or an errno. */
static int read_table(struct table *t)
{
	char *buf = mmap(NULL, TABLE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t->m = mmap(NULL, MOUNTS_MAX * sizeof *t->m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || t->m == MAP_FAILED)
		return errno;
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, TABLE_BYTES - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			close(fd);
			return err;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == TABLE_BYTES - 1) {
			close(fd);
			return E2BIG;
		}
	}
	close(fd);
	buf[len] = '\0';
	t->n = 0;
	for (char *line = buf; *line != '\0';) {
		char *end = strchr(line, '\n');
		if (end != NULL)
			*end = '\0';
		if (t->n == MOUNTS_MAX)
			return E2BIG;
		struct mnt *m = &t->m[t->n];
		char *s = line;
		char *id = field(&s), *parent = field(&s), *dev = field(&s), *root = field(&s), *path = field(&s),
		     *opts = field(&s);
		(void)dev;
		(void)root;
		char *f;
		while ((f = field(&s)) != NULL && strcmp(f, "-") != 0)
			; /* optional fields */
		char *fstype = f != NULL ? field(&s) : NULL;
		if (id != NULL && parent != NULL && path != NULL && opts != NULL && fstype != NULL) {
			m->id = parse_int(id);
			m->parent = parse_int(parent);
			unescape(path);
			m->path = path;
			m->fstype = fstype;
			parse_options(m, opts);
			m->hidden = false;
			t->n++;
		}
		if (end == NULL)
			break;
		line = end + 1;
	}
	/* Covered: a child at the same mount point hides its parent's root
	 * and every other child of that parent, with their subtrees. */
	for (unsigned i = 0; i < t->n; i++) {
		struct mnt *m = &t->m[i];
		for (unsigned j = 0; j < i; j++) {
			const struct mnt *p = &t->m[j];
			if (p->id != m->parent)
				continue;
			bool p_covered = false;
			for (unsigned c = j + 1; c < t->n && !p_covered; c++)
				p_covered = t->m[c].parent == p->id && strcmp(t->m[c].path, p->path) == 0;
			m->hidden = p->hidden || (p_covered && strcmp(m->path, p->path) != 0);
			break;
		}
	}
	for (unsigned i = 0; i < t->n; i++)
		for (unsigned c = i + 1; c < t->n; c++)
			if (t->m[c].parent == t->m[i].id && strcmp(t->m[c].path, t->m[i].path) == 0)
				t->m[i].hidden = true;
	return 0;
}

/* The visible mount that holds path (the deepest whose point it is under). */
static const struct mnt *holder(const struct table *t, const char *path)
{
	const struct mnt *best = NULL;
	size_t best_len = 0;
	for (unsigned i = 0; i < t->n; i++) {
		const struct mnt *m = &t->m[i];
		size_t len = strlen(m->path);
		if (!m->hidden && under(path, m->path) && (best == NULL || len >= best_len)) {
			best = m;
			best_len = len;
		}
	}
	return best;
}

/* dst = a + b (b may be empty); false when it does not fit. */
static bool join(char *dst, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la + lb + 1 > PATH_BYTES)
		return false;
	memcpy(dst, a, la);
	memcpy(dst + la, b, lb + 1);
	return true;
}

static char *put(char *o, const char *end, const char *s)
{
	while (*s != '\0' && o < end)
		*o++ = *s++;
	return o;
}

static char *put_uint(char *o, const char *end, unsigned v)
{
	char d[12];
	int n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0 && o < end)
		*o++ = d[--n];
	return o;
}

/* The views' devices as stat shows them, and the numbers every replica
 * shows instead (allocator/viewstat.h): "real:canonical,..." in hex. */
static char devs[VIEW_DEVS_BYTES];
static size_t ndevs_len;

static char *put_hex(char *o, const char *end, unsigned long long v)
{
	char d[20];
	int n = 0;
	do
		d[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) != 0);
	while (n > 0 && o < end)
		*o++ = d[--n];
	return o;
}

static long long run_start; /* the plan's: the run's start, for libdiehard's stamps */

static void dev_pair(dev_t real, unsigned minor_no)
{
	char *o = devs + ndevs_len, *end = devs + sizeof devs - 1;
	if (end - o < 40)
		return;
	if (ndevs_len == 0) {
		*o++ = 'T';
		o = put_hex(o, end, (unsigned long long)run_start);
	}
	*o++ = ',';
	o = put_hex(o, end, (unsigned long long)real);
	*o++ = ':';
	o = put_hex(o, end, (unsigned long long)makedev(VIEW_DEV_MAJOR, minor_no));
	*o = '\0';
	ndevs_len = (size_t)(o - devs);
}

/* The device a view shows for the files of its lower layer (overlayfs
 * gives each lower file system a pseudo device of its own): the first
 * regular file found at dir's top or one level down. 0: none. */
static dev_t lower_dev(const char *dir, int depth)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[8192];
	dev_t found = 0;
	long n;
	while (found == 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n && found == 0;) {
			struct linux_dirent64 {
				unsigned long long ino;
				long long off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *e = (void *)(buf + off);
			off += e->reclen;
			if (e->name[0] == '.' && (e->name[1] == '\0' || (e->name[1] == '.' && e->name[2] == '\0')))
				continue;
			struct stat st;
			bool unknown = e->type == DT_UNKNOWN && fstatat(fd, e->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
			unsigned char type = unknown ? (S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : 0) : e->type;
			if (type == DT_REG && fstatat(fd, e->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				found = st.st_dev;
			else if (type == DT_DIR && depth > 0) {
				char sub[PATH_BYTES];
				if (join(sub, dir, strcmp(dir, "/") == 0 ? "" : "/") && strlen(sub) + strlen(e->name) < PATH_BYTES) {
					strcat(sub, e->name);
					found = lower_dev(sub, depth - 1);
				}
			}
		}
	}
	close(fd);
	return found;
}

/* The device a view shows for the files made in it (its upper layer's
 * pseudo device): a file made and removed at its top, which leaves
 * nothing behind in the upper layer. 0: none. */
static dev_t upper_dev(const char *dir)
{
	char probe[PATH_BYTES];
	if (!join(probe, dir, strcmp(dir, "/") == 0 ? ".diehard-probe" : "/.diehard-probe"))
		return 0;
	int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return 0;
	struct stat st;
	dev_t dev = fstat(fd, &st) == 0 ? st.st_dev : 0;
	close(fd);
	(void)unlink(probe);
	return dev;
}

/* View number v at path (through its overlay): its devices. */
static void view_devs(unsigned v, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return;
	dev_pair(st.st_dev, 4 * v);
	dev_t lower = lower_dev(path, 1), upper = upper_dev(path);
	if (lower != 0 && lower != st.st_dev)
		dev_pair(lower, 4 * v + 1);
	if (upper != 0 && upper != st.st_dev && upper != lower)
		dev_pair(upper, 4 * v + VIEW_DEV_UPPER);
}

void view_fill_env(char **envp)
{
	static const char name[] = VIEW_DEVS_VAR "=";
	for (char **e = envp; envp != NULL && *e != NULL; e++) {
		if (strncmp(*e, name, sizeof name - 1) != 0)
			continue;
		char *o = *e + sizeof name - 1;
		if (strlen(o) >= ndevs_len) {
			memcpy(o, devs, ndevs_len);
			o[ndevs_len] = '\0';
		}
	}
}

struct stage {
	const char *dir; /* where the staging tmpfs is mounted */
	int fd;
	int pre;         /* the start-state layer's root (view.h), or -1 */
	int manifest;
	unsigned views;
};

static void manifest_line(struct stage *st, const char *tag, int err, const char *path)
{
	char line[PATH_BYTES + 32];
	char *o = line, *end = line + sizeof line - 1;
	o = put(o, end, tag);
	*o++ = '\t';
	if (err != 0) {
		o = put_uint(o, end, (unsigned)err);
		*o++ = '\t';
	}
	o = put(o, end, path);
	*o++ = '\n';
	(void)!write(st->manifest, line, (size_t)(o - line));
}

/* Paths overlayfs's options cannot carry (its separators), nor the
 * manifest (lines). */
static bool option_safe(const char *p)
{
	return strpbrk(p, ",:\\\n") == NULL;
}

/* The directories of path (absolute) made beneath the start-state layer's
 * root pre, each with the real one's mode, owner and times: overlayfs
 * shows a directory with its topmost lower layer's, so one made 0755
 * would show /tmp as 0755 in an overlay of /, and a replica that wrote
 * there would copy that up, and the commit would set it. 0, or an errno. */
static int pre_dirs(int pre, const char *path)
{
	char part[PATH_BYTES];
	size_t n = strlen(path);
	if (n >= sizeof part)
		return ENAMETOOLONG;
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		memcpy(part, path, i);
		part[i] = '\0';
		const char *rel = part + 1;
		if (rel[0] == '\0')
			continue;
		struct stat real, here;
		if (fstatat(pre, rel, &here, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* another replica's init made it */
		if (stat(part, &real) != 0)
			return errno;
		/* Made whole under a name of its own beside the layer's root,
		 * then moved in: no replica ever sees it half made. */
		char tmp[48] = "../dir-", *o = tmp + 7;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		o = put_uint(o, tmp + sizeof tmp - 12, (unsigned)now.tv_nsec);
		*o++ = '-';
		o = put_uint(o, tmp + sizeof tmp - 1, (unsigned)i);
		*o = '\0';
		if (mkdirat(pre, tmp, 0700) != 0)
			return errno;
		struct timespec ts[2] = { real.st_atim, real.st_mtim };
		/* The owner as far as this namespace maps it (a user's init
		 * cannot give root's /tmp to root: the mode matters most). */
		(void)fchownat(pre, tmp, real.st_uid, real.st_gid, AT_SYMLINK_NOFOLLOW);
		int err = 0;
		if (fchmodat(pre, tmp, real.st_mode & 07777, 0) != 0 || utimensat(pre, tmp, ts, AT_SYMLINK_NOFOLLOW) != 0)
			err = errno;
		else if (syscall(SYS_renameat2, pre, tmp, pre, rel, RENAME_NOREPLACE) != 0 && errno != EEXIST)
			err = errno;
		(void)unlinkat(pre, tmp, AT_REMOVEDIR); /* left only when another came first */
		if (err != 0)
			return err;
	}
	return 0;
}

/* The next view's upper and work directories made in the staging tmpfs;
 * its overlay of lower mounted at target. 0, or an errno. */
/* A name the start-state layer has in every view's top directory, removed
 * in each view as soon as it is mounted: the overlay's first whiteout,
 * which takes an inode number of the staging tmpfs (later whiteouts are
 * links to it), is so made at the same moment in every replica. A commit
 * point's call that goes on in one replica first (points.h's probe) may
 * then make a whiteout the others do not (the real name gone by the time
 * they make theirs) without shifting the inode numbers of the files it
 * makes next, which git's index records. The whiteout left is no change
 * (changes.c: nothing real to remove). */
#define WHITEOUT_SEED VIEW_WHITEOUT_SEED

/* The seed in the start-state layer's directory for lower (made by the
 * first replica's init; there already after): true when it is there and
 * the real directory has no such name (a real one is never hidden, and
 * then there is no seed to remove). */
static bool seed_whiteout(int pre, const char *lower)
{
	char path[PATH_BYTES], real[PATH_BYTES];
	bool root = strcmp(lower, "/") == 0;
	struct stat st;
	if ((size_t)snprintf(path, sizeof path, "%s%s%s", root ? "" : lower + 1, root ? "" : "/", WHITEOUT_SEED) >=
		    sizeof path ||
	    (size_t)snprintf(real, sizeof real, "%s/%s", root ? "" : lower, WHITEOUT_SEED) >= sizeof real ||
	    lstat(real, &st) == 0 || errno != ENOENT)
		return false;
	int fd = openat(pre, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	return (fd >= 0 || errno == EEXIST) && fstatat(pre, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

static int overlay(struct stage *st, const char *lower, const char *target, unsigned long flags, bool user)
{
	if (st->views == VIEW_MAX)
		return ENOSPC;
	char name[16] = "v", *o = put_uint(name + 1, name + sizeof name - 1, st->views);
	*o = '\0';
	/* The top of the view shows the upper layer's root: the lower's mode
	 * (a 1777 /tmp stays one), and as root its owner. A file mounted on
	 * its own (a container's /etc/resolv.conf) has no view: nothing is
	 * made for it, in the start-state layer least of all, whose directory
	 * of that name would hide the file in every other view. */
	struct stat low;
	if (stat(lower, &low) != 0)
		return errno;
	if (!S_ISDIR(low.st_mode))
		return ENOTDIR;
	if (mkdirat(st->fd, name, 0700) != 0)
		return errno;
	char sub[32];
	if (!join(sub, name, "/u") || mkdirat(st->fd, sub, 0700) != 0 ||
	    (!user && fchownat(st->fd, sub, low.st_uid, low.st_gid, 0) != 0) ||
	    fchmodat(st->fd, sub, low.st_mode & 07777, 0) != 0 || !join(sub, name, "/w") ||
	    mkdirat(st->fd, sub, 0700) != 0)
		return errno;
	char opts[4 * PATH_BYTES];
	char *p = opts, *end = opts + sizeof opts - 1;
	bool seeded = false;
	p = put(p, end, "lowerdir=");
	if (st->pre >= 0) {
		/* The start-state layer first, its directory for this view made
		 * (by another replica's init too: EEXIST). */
		int err = pre_dirs(st->pre, lower);
		if (err != 0)
			return err;
		seeded = seed_whiteout(st->pre, lower);
		p = put(p, end, "/proc/self/fd/");
		p = put_uint(p, end, (unsigned)st->pre);
		if (strcmp(lower, "/") != 0)
			p = put(p, end, lower);
		p = put(p, end, ":");
	}
	p = put(p, end, lower);
	p = put(p, end, ",upperdir=");
	p = put(p, end, st->dir);
	p = put(p, end, "/");
	p = put(p, end, name);
	p = put(p, end, "/u,workdir=");
	p = put(p, end, st->dir);
	p = put(p, end, "/");
	p = put(p, end, name);
	p = put(p, end, "/w");
	/* Renamed directories and metadata-only copies would leave xattrs
	 * (redirects, metacopy) that changes.c would have to follow: off,
	 * so a directory's rename is EXDEV and programs copy (mv does). */
	p = put(p, end, user ? ",userxattr" : ",redirect_dir=off,metacopy=off,index=off,xino=off");
	if (p == end)
		return ENAMETOOLONG;
	*p = '\0';
	if (mount("overlay", target, "overlay", flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME |
							  MS_NODIRATIME | MS_RELATIME), opts) != 0) {
		/* Its directories go, so that the number can be tried again. */
		int err = errno;
		char w[32];
		if (join(w, name, "/w/work"))
			(void)unlinkat(st->fd, w, AT_REMOVEDIR);
		if (join(w, name, "/u"))
			(void)unlinkat(st->fd, w, AT_REMOVEDIR);
		if (join(w, name, "/w"))
			(void)unlinkat(st->fd, w, AT_REMOVEDIR);
		(void)unlinkat(st->fd, name, AT_REMOVEDIR);
		return err;
	}
	if (seeded) {
		char seed[PATH_BYTES];
		if ((size_t)snprintf(seed, sizeof seed, "%s/%s", strcmp(target, "/") == 0 ? "" : target, WHITEOUT_SEED) <
		    sizeof seed)
			(void)unlink(seed);
	}
	manifest_line(st, name, 0, lower);
	view_devs(st->views, target);
	st->views++;
	return 0;
}

static int stage_open(struct stage *st)
{
	static const char *const dirs[] = { "/dev/shm", "/mnt", "/media", "/srv" };
	st->dir = NULL;
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && st->dir == NULL; i++) {
		struct stat s;
		if (stat(dirs[i], &s) == 0 && S_ISDIR(s.st_mode))
			st->dir = dirs[i];
	}
	if (st->dir == NULL)
		return ENOENT;
	if (mount("tmpfs", st->dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") != 0)
		return errno;
	st->fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->fd < 0)
		return errno;
	st->manifest = openat(st->fd, "manifest", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (st->manifest < 0)
		return errno;

	st->views = 0;
	struct stat s;
	if (fstat(st->fd, &s) == 0)
		dev_pair(s.st_dev, VIEW_DEV_STAGING);
	return 0;
}

static int pivot(const char *root, const char *cwd)
{
	if (chdir(root) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0)
		return errno;
	if (chdir("/") != 0)
		return errno;
	if (cwd != NULL && chdir(cwd) != 0)
		return errno;
	return 0;
}

/* Root: the whole tree, rebuilt at <stage>/root, entered by pivot_root. */
static int whole(const struct view_plan *p, const struct table *t, struct stage *st, const char **step)
{
	char root[PATH_BYTES], target[PATH_BYTES];
	if (!join(root, st->dir, "/root"))
		return ENAMETOOLONG;
	*step = "a directory for the new root";
	if (mkdirat(st->fd, "root", 0755) != 0)
		return errno;
	const struct mnt *top = holder(t, "/");
	*step = "an overlay of /";
	int err = overlay(st, "/", root, top != NULL ? top->flags : 0, false);
	if (err != 0)
		return err;
	for (unsigned i = 0; i < t->n; i++) {
		const struct mnt *m = &t->m[i];
		if (m->hidden || m == top || strcmp(m->path, "/") == 0)
			continue;
		/* The init's own comes after the pivot (sandbox_enter_dev). */
		if (under(m->path, "/dev/shm") || under(m->path, "/dev/pts") || under(m->path, "/dev/mqueue"))
			continue;
		if (!join(target, root, m->path))
			return ENAMETOOLONG;
		if (m->rw && data_fs(m->fstype) && !kernel_path(m->path)) {
			err = option_safe(m->path) ? overlay(st, m->path, target, m->flags, false) : EINVAL;
			if (err == 0)
				continue;
			manifest_line(st, "-", err, m->path);
		}
		if (mount(m->path, target, NULL, MS_BIND, NULL) != 0) {
			if (errno == ENOENT)
				continue;
			*step = m->path;
			return errno;
		}
		/* Devices stay usable, but nothing new is made in the host's
		 * /dev: read-only (device nodes are written all the same). */
		if (under(m->path, "/dev") && m->rw &&
		    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | m->flags, NULL) != 0) {
			*step = m->path;
			return errno;
		}
	}
	for (unsigned i = 0; p->keep[i] != NULL; i++) {
		if (!join(target, root, p->keep[i]))
			return ENAMETOOLONG;
		if (mount(p->keep[i], target, NULL, MS_BIND, NULL) != 0) {
			*step = p->keep[i];
			return errno;
		}
	}
	*step = "pivot_root";
	return pivot(root, p->cwd);
}

/* Unprivileged: the listed directories viewed in place, the other
 * writable disk mounts made read-only. */
static int dirs(const struct view_plan *p, const struct table *t, struct stage *st, const char **step)
{
	bool want[VIEW_MAX] = { false };
	unsigned n = 0;
	while (n < VIEW_MAX && p->dirs[n] != NULL)
		n++;
	for (unsigned i = 0; i < n; i++) {
		const char *d = p->dirs[i];
		struct stat s;
		if (d[0] != '/' || stat(d, &s) != 0 || !S_ISDIR(s.st_mode) || kernel_path(d))
			continue;
		bool dup = false;
		for (unsigned j = 0; j < i && !dup; j++)
			dup = strcmp(p->dirs[j], d) == 0;
		const struct mnt *h = holder(t, d);
		if (dup || h == NULL || !h->rw)
			continue;
		int err = option_safe(d) ? 0 : EINVAL;
		for (unsigned k = 0; k < t->n && err == 0; k++)
			if (!t->m[k].hidden && under(t->m[k].path, d) && strcmp(t->m[k].path, d) != 0)
				err = EBUSY; /* overlayfs refuses a lower with mounts beneath, unprivileged */
		if (err != 0) {
			manifest_line(st, "-", err, d);
			continue;
		}
		want[i] = true;
	}
	/* A directory beneath another viewed one is in that view. */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n && want[i]; j++)
			if (j != i && want[j] && under(p->dirs[i], p->dirs[j]) && strcmp(p->dirs[i], p->dirs[j]) != 0)
				want[i] = false;
	/* diehard's own directories, held before anything covers them. */
	int keep_fd[VIEW_KEEP_MAX] = { -1 };
	unsigned nkeep = 0;
	for (; nkeep < VIEW_KEEP_MAX && p->keep[nkeep] != NULL; nkeep++)
		if ((keep_fd[nkeep] = open(p->keep[nkeep], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			*step = p->keep[nkeep];
			return errno;
		}
	/* Read-only: every writable disk mount, before the views go on top
	 * (a view's own lower is a private clone, unaffected). */
	for (unsigned i = 0; i < t->n; i++) {
		const struct mnt *m = &t->m[i];
		if (m->hidden || !m->rw || !data_fs(m->fstype) || kernel_path(m->path))
			continue;
		if (mount(NULL, m->path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | m->flags, NULL) == 0 ||
		    errno == ENOENT)
			continue;
		/* Out of the user's reach (a root-only directory above it,
		 * /var/lib/docker): the user cannot write there either. */
		if (errno == EACCES)
			continue;
		manifest_line(st, "!", errno, m->path);
	}
	for (unsigned i = 0; i < n; i++) {
		if (!want[i])
			continue;
		const struct mnt *h = holder(t, p->dirs[i]);
		int err = overlay(st, p->dirs[i], p->dirs[i], h->flags, true);
		if (err != 0)
			manifest_line(st, "-", err, p->dirs[i]);
	}
	for (unsigned i = 0; i < nkeep; i++) {
		char src[32] = "/proc/self/fd/";
		*put_uint(src + 14, src + sizeof src - 1, (unsigned)keep_fd[i]) = '\0';
		if (mount(src, p->keep[i], NULL, MS_BIND, NULL) != 0 ||
		    mount(NULL, p->keep[i], NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0) {
			*step = p->keep[i];
			return errno;
		}
		close(keep_fd[i]);
	}
	/* The working directory again, through the view over it. */
	*step = "the working directory";
	if (p->cwd != NULL && chdir(p->cwd) != 0)
		return errno;
	*step = "the staging tmpfs's unmount";
	return umount2(st->dir, MNT_DETACH) == 0 ? 0 : errno;
}

int view_enter(const struct view_plan *p, int *staging, const char **step)
{
	*staging = -1;
	struct table t;
	*step = "the mount table";
	int err = read_table(&t);
	if (err != 0)
		return err;
	struct stage st = { .fd = -1, .manifest = -1, .pre = -1 };
	/* Opened before the staging tmpfs covers /dev/shm, where it is. */
	*step = "the start-state layer";
	if (p->pre != NULL && (st.pre = open(p->pre, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errno;
	*step = "the staging tmpfs";
	run_start = p->start;
	if ((err = stage_open(&st)) != 0) {
		if (st.pre >= 0)
			close(st.pre);
		return err;
	}
	/* Which xattrs the overlays keep their marks in (changes.c), and so
	 * which views: the whole tree needs the trusted ones, which only root
	 * of the host's user namespace has. A root that is not (in a user
	 * namespace of its own, where / has mounts beneath it) gets the
	 * directories' views, as a user does. */
	err = EPERM;
	if (p->whole) {
		manifest_line(&st, "x", 0, "trusted");
		err = whole(p, &t, &st, step);
	}
	if (err != 0 && st.views == 0) {
		manifest_line(&st, "x", 0, "user");
		err = dirs(p, &t, &st, step);
	}
	close(st.manifest);
	if (st.pre >= 0)
		close(st.pre);
	if (err != 0) {
		close(st.fd);
		return err;
	}
	*staging = st.fd;
	return 0;
}
