/* points.c — see points.h.
 *
 * A sync's file is named by the replica's descriptor (/proc/TID/fd/N: the
 * path in the replica's views, which lie over the same real paths), found
 * in the replica's upper layer (changes.h: "vN/u/" and the path beneath
 * view N's target; a file not there is no change of its), opened there
 * beneath the staging root without following any link, and digested while
 * the call waits; the descriptor is kept with the held call. The version
 * committed is one replica's of the quorum, through commit.c (beneath the
 * view's target, no link followed, beside then renamed, synced), with any
 * directory above it the real tree lacks, after pre.c kept the start's
 * version; the copy made beside is digested again and must be the version
 * voted (a replica that writes on after its sync is not committed), else
 * the next replica of the quorum's is tried.
 *
 * An unlink is a point only for a path a point of the same replica
 * committed. It is made by a helper process in the replica's namespaces,
 * root, working directory and credentials (unlink_as), which also says
 * what real path it removed: the kernel decides whether the replica may,
 * as it would have, and diehard, perhaps root, never removes a real file
 * the program could not have removed. The call is then answered with that
 * result once the removal is committed.
 *
 * Each path keeps the versions committed (40 bytes a point) for the late
 * replicas' checks, and the calls held on it; a replica holds at most
 * HELD_MAX calls at once (past that, its syncs go on unvoted, said once).
 * Paths are few in the programs that sync (a database's files, a log), so
 * they are a list, the last one used first. */
#include "points.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "changes.h"
#include "ci.h"
#include "commit.h"
#include "exitcode.h"
#include "log.h"
#include "pre.h"
#include "remote.h"
#include "report.h"
#include "sup.h"
#include "virt.h"

/* Versions kept per path for the late replicas' checks; past this, later
 * points of the path are committed but no longer checked against a late
 * replica (said once). */
#define DONE_MAX (1u << 20)
/* Calls held per replica at once. */
#define HELD_MAX 256

enum vkind { V_FILE, V_GONE };

struct version {
	enum vkind kind;
	uint8_t dg[DIGEST_BYTES]; /* V_FILE: its bytes */
	off_t size;
	mode_t mode;
};

/* A call held until its point is decided. */
struct waiter {
	unsigned slot, rid; /* the slot and the id of the process that made it */
	uint64_t gen, id;   /* its listener's generation, the notification */
	uint64_t m;         /* its number among the path's points */
	struct version v;
	int src;            /* V_FILE: the version, open for reading; else -1 */
	bool made;          /* the call was made for it (unlink_as): answered 0 */
	double since;       /* when it came */
	struct waiter *next;
};

struct ppath {
	char *path;
	uint64_t *seen;       /* per slot: the path's points its process reached */
	struct version *done; /* committed, by number */
	uint64_t ndone;       /* points committed (those past DONE_MAX not kept) */
	size_t cap;
	struct waiter *wait;
	double quorum_since;  /* when a quorum agreed on its next point while
				 others were not there yet (0: not so) */
	struct ppath *next;
};

struct points {
	struct sup *S;
	json_t *rep;
	struct pre *pre;
	struct ppath *paths;
	unsigned *held;       /* per slot: calls held */
	uint64_t committed, failed, late_checked;
	uint64_t by_kind[2];  /* syncs, removals committed */
	bool said_cap, said_held;
};

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

struct points *points_new(struct sup *S, json_t *rep, struct pre *pre)
{
	struct points *P = must(calloc(1, sizeof *P));
	P->S = S;
	P->rep = rep;
	P->pre = pre;
	P->held = must(calloc(S->nslots, sizeof *P->held));
	return P;
}

static void waiter_free(struct points *P, struct waiter *w)
{
	if (w->src >= 0)
		close(w->src);
	if (P->held[w->slot] > 0)
		P->held[w->slot]--;
	free(w);
}

void points_free(struct points *P)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths, *next; pp != NULL; pp = next) {
		next = pp->next;
		for (struct waiter *w = pp->wait, *wn; w != NULL; w = wn) {
			wn = w->next;
			waiter_free(P, w);
		}
		free(pp->path);
		free(pp->seen);
		free(pp->done);
		free(pp);
	}
	free(P->held);
	free(P);
}

uint64_t points_committed(const struct points *P)
{
	return P == NULL ? 0 : P->committed;
}

static void report_counts(struct points *P)
{
	json_object_set_new(P->rep, "points",
			    json_pack("{s:I,s:I,s:I,s:I,s:I}", "committed", (json_int_t)P->committed, "syncs",
				      (json_int_t)P->by_kind[0], "removals", (json_int_t)P->by_kind[1], "failed",
				      (json_int_t)P->failed, "late_checked", (json_int_t)P->late_checked));
}

void points_restart(struct points *P, unsigned slot)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next)
		pp->seen[slot] = 0;
}

/* ---- the file of a point ---- */

/* Opens upper (beneath the staging root, no link followed anywhere, no
 * other file system, never blocking on a FIFO) for reading: a regular
 * file's descriptor, or -1. Unprivileged, a mode without the owner's read
 * bit is granted for the moment, through the file's own O_PATH descriptor. */
static int open_upper(int root, const char *upper)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, root, upper, &how, sizeof how);
	if (fd < 0 && errno == EACCES) {
		how.flags = O_PATH | O_CLOEXEC;
		int path = (int)syscall(SYS_openat2, root, upper, &how, sizeof how);
		struct stat st;
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", path);
		if (path >= 0 && fstat(path, &st) == 0 && S_ISREG(st.st_mode) && chmod(proc, (st.st_mode & 07777) | 0400) == 0) {
			fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
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

/* The version of the open regular file fd. false on failure. */
static bool version_of(struct points *P, int fd, struct version *v)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || changes_digest_fd(fd, &P->S->dkey, v->dg) != 0)
		return false;
	v->kind = V_FILE;
	v->size = st.st_size;
	v->mode = st.st_mode & 07777;
	return true;
}

/* The real path a descriptor link (/proc/.../fd/N, cwd) names, into buf.
 * false when it is none the replica's views show (removed, or out of
 * reach). */
static bool fd_path(const char *proc, char *buf, size_t size)
{
	ssize_t n = readlink(proc, buf, size - 1);
	if (n <= 0 || (size_t)n >= size - 1)
		return false;
	buf[n] = '\0';
	static const char deleted[] = " (deleted)";
	size_t dl = sizeof deleted - 1;
	return buf[0] == '/' && !((size_t)n > dl && strcmp(buf + n - dl, deleted) == 0);
}

/* A sync's file: the replica's descriptor's, in its upper layer. Its real
 * path (malloc'ed), version and an open descriptor of it. false: no point
 * (not a file the replica changed in a view). */
static bool sync_file(struct points *P, const struct changes *ch, pid_t tid, int fd, char **path, struct version *v,
		      int *src)
{
	char proc[64], buf[4096], upper[4200];
	size_t rel;
	snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)tid, fd);
	if (!fd_path(proc, buf, sizeof buf))
		return false;
	int vi = changes_view_of(ch, buf, &rel);
	if (vi < 0 || (size_t)snprintf(upper, sizeof upper, "v%d/u/%s", vi, buf + rel) >= sizeof upper)
		return false;
	int in = open_upper(ch->root, upper);
	if (in < 0)
		return false;
	if (!version_of(P, in, v)) {
		close(in);
		return false;
	}
	*src = in;
	*path = must(strdup(buf));
	return true;
}

/* ---- unlink ---- */

/* The path an unlink names (at addr, relative to dirfd) as a string, by
 * the text of the replica's cwd or descriptor, "." and ".." taken
 * lexically: a guess, only to skip the helper for the paths no point
 * committed (unlink_as finds the true one). false: none. */
static bool guess_path(pid_t tid, int dirfd, uint64_t addr, char *out, size_t size)
{
	char name[4096], proc[64], base[4096];
	if (remote_read_string(tid, addr, name, sizeof name) != 0 || name[0] == '\0')
		return false;
	base[0] = '\0';
	if (name[0] != '/') {
		if (dirfd == AT_FDCWD)
			snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)tid);
		else
			snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)tid, dirfd);
		if (!fd_path(proc, base, sizeof base))
			return false;
	}
	char joined[8200];
	snprintf(joined, sizeof joined, "%s/%s", base, name);
	/* Lexical normalization into out. */
	size_t o = 0;
	out[o++] = '/';
	for (char *save = NULL, *c = strtok_r(joined, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--;
			continue;
		}
		size_t n = strlen(c);
		if (o + n + 2 >= size)
			return false;
		if (o > 1)
			out[o++] = '/';
		memcpy(out + o, c, n);
		o += n;
	}
	out[o] = '\0';
	return o > 1;
}

/* Reads a field of a /proc status file ("Uid:" ...) as up to n numbers in
 * base (10, or 16 for capabilities). The count read. */
static int status_field(const char *status, const char *key, unsigned long long *v, int n, int base)
{
	const char *p = strstr(status, key);
	if (p == NULL)
		return 0;
	p += strlen(key);
	int got = 0;
	while (got < n) {
		char *end;
		unsigned long long x = strtoull(p, &end, base);
		if (end == p)
			break;
		v[got++] = x;
		p = end;
		if (*p == '\n')
			break;
	}
	return got;
}

/* In the helper: takes on the credentials of the status text (read in the
 * replica's user namespace). 0, or an errno. */
static int become(const char *status)
{
	unsigned long long uid[4], gid[4], groups[64], eff[1], prm[1], inh[1];
	if (status_field(status, "\nUid:", uid, 4, 10) != 4 || status_field(status, "\nGid:", gid, 4, 10) != 4 ||
	    status_field(status, "\nCapEff:", eff, 1, 16) != 1 || status_field(status, "\nCapPrm:", prm, 1, 16) != 1 ||
	    status_field(status, "\nCapInh:", inh, 1, 16) != 1)
		return EINVAL;
	int ng = status_field(status, "\nGroups:", groups, 64, 10);
	gid_t g[64];
	for (int i = 0; i < ng; i++)
		g[i] = (gid_t)groups[i];
	if (setgroups((size_t)ng, g) != 0 && errno != EPERM)
		return errno;
	if (setresgid((gid_t)gid[0], (gid_t)gid[1], (gid_t)gid[2]) != 0)
		return errno;
	(void)setfsgid((gid_t)gid[3]);
	if (setresuid((uid_t)uid[0], (uid_t)uid[1], (uid_t)uid[2]) != 0)
		return errno;
	(void)setfsuid((uid_t)uid[3]);
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {
		{ .effective = (uint32_t)eff[0], .permitted = (uint32_t)prm[0], .inheritable = (uint32_t)inh[0] },
		{ .effective = (uint32_t)(eff[0] >> 32), .permitted = (uint32_t)(prm[0] >> 32),
		  .inheritable = (uint32_t)(inh[0] >> 32) }
	};
	return syscall(SYS_capset, &h, d) == 0 ? 0 : errno;
}

/* The unlink of name (relative to dirfd) made as thread tid would make
 * it: in a child that joins its user and mount namespaces, its root and
 * working directory, takes on its credentials and capabilities, and
 * resolves the name as the kernel would for it. The child first says the
 * real path of what it would remove (into path); unlink_as removes it only
 * when want(ctx, path) says so. 0 when removed, an errno when the call
 * failed (the replica's result), -1 when it was not made (not wanted, or
 * the helper failed: the call then goes on in the kernel). */
static int unlink_as(pid_t tid, int dirfd, const char *name, char *path, size_t size,
		     bool (*want)(void *ctx, const char *path), void *ctx)
{
	char proc[64];
	int fds[5] = { -1, -1, -1, -1, -1 }; /* user ns, mount ns, root, start, status */
	const char *what[5] = { "ns/user", "ns/mnt", "root", NULL, "status" };
	for (int i = 0; i < 5; i++) {
		if (i == 3) {
			if (name[0] == '/')
				continue;
			if (dirfd == AT_FDCWD)
				snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)tid);
			else
				snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)tid, dirfd);
		} else {
			snprintf(proc, sizeof proc, "/proc/%d/%s", (int)tid, what[i]);
		}
		fds[i] = open(proc, (i == 2 || i == 3 ? O_PATH | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
		if (fds[i] < 0) {
			for (int j = 0; j < i; j++)
				if (fds[j] >= 0)
					close(fds[j]);
			return -1;
		}
	}
	int up[2], down[2];
	if (pipe2(up, O_CLOEXEC) != 0) {
		for (int j = 0; j < 5; j++)
			if (fds[j] >= 0)
				close(fds[j]);
		return -1;
	}
	if (pipe2(down, O_CLOEXEC) != 0) {
		close(up[0]);
		close(up[1]);
		for (int j = 0; j < 5; j++)
			if (fds[j] >= 0)
				close(fds[j]);
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* The helper: system calls only from here (a fork of an event
		 * loop's process, single-threaded). */
		struct stat mine, theirs;
		int err = 0;
		if (stat("/proc/self/ns/user", &mine) == 0 && fstat(fds[0], &theirs) == 0 && mine.st_ino != theirs.st_ino &&
		    setns(fds[0], CLONE_NEWUSER) != 0)
			err = errno;
		static char status[8192];
		ssize_t n = err == 0 ? pread(fds[4], status, sizeof status - 1, 0) : -1;
		if (err == 0 && n <= 0)
			err = EIO;
		if (n > 0)
			status[n] = '\0';
		if (err == 0 && setns(fds[1], CLONE_NEWNS) != 0)
			err = errno;
		if (err == 0 && (fchdir(fds[2]) != 0 || chroot(".") != 0))
			err = errno;
		if (err == 0 && fds[3] >= 0 && fchdir(fds[3]) != 0)
			err = errno;
		if (err == 0)
			err = become(status);
		/* The directory of the name, as the replica would reach it. */
		static char dir[4096], where[4096];
		const char *slash = strrchr(name, '/'), *last = slash != NULL ? slash + 1 : name;
		if (slash == name)
			snprintf(dir, sizeof dir, "/");
		else if (slash != NULL)
			snprintf(dir, sizeof dir, "%.*s", (int)(slash - name), name);
		else
			snprintf(dir, sizeof dir, ".");
		int parent = err == 0 ? openat(name[0] == '/' || fds[3] < 0 || dirfd == AT_FDCWD ? AT_FDCWD : fds[3], dir,
					       O_RDONLY | O_DIRECTORY | O_CLOEXEC)
				      : -1;
		if (err == 0 && parent < 0)
			err = errno;
		if (err == 0 && (fchdir(parent) != 0 || getcwd(where, sizeof where) == NULL))
			err = errno;
		char verdict = 0;
		if (err == 0) {
			size_t len = strlen(where);
			if (write(up[1], where, len + 1) != (ssize_t)(len + 1) || read(down[0], &verdict, 1) != 1)
				_exit(255);
		}
		if (err == 0 && verdict != 'u')
			_exit(255);
		if (err == 0 && unlinkat(parent, last, 0) != 0)
			err = errno;
		_exit(err > 0 && err < 255 ? err : err == 0 ? 0 : 255);
	}
	for (int j = 0; j < 5; j++)
		if (fds[j] >= 0)
			close(fds[j]);
	close(up[1]);
	close(down[0]);
	if (pid < 0) {
		close(up[0]);
		close(down[1]);
		return -1;
	}
	char where[4096];
	ssize_t got = 0, n;
	while (got < (ssize_t)sizeof where && (n = read(up[0], where + got, sizeof where - (size_t)got)) > 0) {
		got += n;
		if (where[got - 1] == '\0')
			break;
	}
	close(up[0]);
	const char *slash = strrchr(name, '/'), *last = slash != NULL ? slash + 1 : name;
	bool ok = got > 1 && where[got - 1] == '\0' && where[0] == '/' && strcmp(last, ".") != 0 &&
		  strcmp(last, "..") != 0 && last[0] != '\0' &&
		  (size_t)snprintf(path, size, "%s%s%s", where, strcmp(where, "/") == 0 ? "" : "/", last) < size;
	char verdict = ok && want(ctx, path) ? 'u' : 'n';
	if (got > 0)
		(void)write(down[1], &verdict, 1);
	close(down[1]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* Not made (the helper stopped before it, or it was not wanted): the
	 * kernel makes the call, and says what it says of it. */
	if (verdict != 'u' || !WIFEXITED(st) || WEXITSTATUS(st) == 255)
		return -1;
	return WEXITSTATUS(st);
}

/* ---- the vote ---- */

static bool same_version(const struct version *a, const struct version *b)
{
	return a->kind == b->kind && a->size == b->size && a->mode == b->mode && memcmp(a->dg, b->dg, sizeof a->dg) == 0;
}

/* How a's version differs from b's, in the report's words: the bytes
 * (or size), the mode, "missing" (a removed where b kept), "extra" (the
 * reverse). */
static const char *how_differs(const struct version *a, const struct version *b)
{
	if (a->kind != b->kind)
		return a->kind == V_GONE ? "missing" : "extra";
	return a->mode != b->mode && a->size == b->size && memcmp(a->dg, b->dg, sizeof a->dg) == 0 ? "mode" : "bytes";
}

/* In the run: a voter, or a replacement catching up; either must reach
 * a point before it is committed. */
static bool participant(const struct replica *r)
{
	return r->used && (r->live || r->joining) && !r->killed && !r->exited;
}

static bool waiter_valid(const struct sup *S, const struct waiter *w)
{
	const struct replica *r = &S->r[w->slot];
	return participant(r) && r->id == w->rid;
}

static bool waiter_votes(const struct sup *S, const struct waiter *w)
{
	return S->r[w->slot].live;
}

static struct ppath *path_lookup(struct points *P, const char *path, bool make)
{
	struct ppath **pp = &P->paths;
	for (; *pp != NULL; pp = &(*pp)->next)
		if (strcmp((*pp)->path, path) == 0) {
			struct ppath *found = *pp;
			*pp = found->next; /* to the front */
			found->next = P->paths;
			P->paths = found;
			return found;
		}
	if (!make)
		return NULL;
	struct ppath *n = must(calloc(1, sizeof *n));
	n->path = must(strdup(path));
	n->seen = must(calloc(P->S->nslots, sizeof *n->seen));
	n->next = P->paths;
	P->paths = n;
	return n;
}

/* Whether a point committed path and slot's process has passed one on it:
 * its removal is a point for that process from then on (a replacement's
 * removal of the path before its own first sync of it is none, as it was
 * none for the replicas it replays). */
static bool committed_for(struct points *P, unsigned slot, const char *path)
{
	const struct ppath *pp = path_lookup(P, path, false);
	return pp != NULL && pp->ndone > 0 && pp->seen[slot] > 0;
}

/* r's file differs from what a quorum agreed at point m of pp: reported
 * and r killed (then replaced). */
static void diverge(struct points *P, struct replica *r, const struct ppath *pp, uint64_t m, const char *what)
{
	struct sup *S = P->S;
	char why[256];
	snprintf(why, sizeof why, "its %s at its point %llu differs from the committed version (%s)", pp->path,
		 (unsigned long long)m + 1, what);
	log_event("divergence: replica %u's file %s at its point %llu (a sync or removal) differs from the committed "
		  "version (%s)",
		  r->id, pp->path, (unsigned long long)m + 1, what);
	json_t *list = json_object_get(P->rep, "divergences");
	if (list == NULL) {
		list = must(json_array());
		json_object_set_new(P->rep, "divergences", list);
	}
	json_array_append_new(list, json_pack("{s:i,s:s,s:s,s:I,s:s}", "replica", (int)r->id, "path", pp->path,
					      "what", what, "offset", (json_int_t)0, "at", "point"));
	ci_divergence(S, (int)r->id, "files", 0, what, pp->path);
	replica_kill(S, r, why);
}

/* Commits w's version of pp's path: the directories above it the real
 * tree lacks (from w's replica's upper layer) and the file (from w->src,
 * its copy checked against the version voted), or the path's removal.
 * The start's version kept first (pre.h). 0, or an errno (said). */
static int commit_version(struct points *P, const struct ppath *pp, const struct waiter *w)
{
	const struct changes *ch = P->S->r[w->slot].changes;
	const char *path = pp->path;
	enum { MAX_DIRS = 64 };
	struct change list[MAX_DIRS + 1];
	char *owned[2 * MAX_DIRS];
	size_t n = 0, nowned = 0, rel;
	int v = changes_view_of(ch, path, &rel);
	if (v < 0)
		return EXDEV;
	struct change c = { .path = (char *)path, .view = (unsigned)v, .rel = rel,
			    .kind = w->v.kind == V_GONE ? CHANGE_GONE : CHANGE_FILE };
	int err = pre_keep(P->pre, ch->targets[v], path);
	if (err == 0 && w->v.kind == V_FILE) {
		/* The directories above it, top down, that the real tree lacks. */
		for (const char *s = strchr(path + rel, '/'); s != NULL && n < MAX_DIRS; s = strchr(s + 1, '/')) {
			char *dir = must(strndup(path, (size_t)(s - path)));
			char *up = NULL;
			struct stat real, st;
			if (lstat(dir, &real) == 0 || errno != ENOENT || asprintf(&up, "v%d/u/%s", v, dir + rel) < 0 ||
			    fstatat(ch->root, up, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
				free(dir);
				free(up);
				continue;
			}
			list[n++] = (struct change){ .path = dir, .view = (unsigned)v, .rel = rel, .upper = up,
						     .kind = CHANGE_DIR, .mode = st.st_mode & 07777, .uid = st.st_uid,
						     .gid = st.st_gid, .atime = st.st_atim, .mtime = st.st_mtim };
			owned[nowned++] = dir;
			owned[nowned++] = up;
		}
		struct stat st;
		if (fstat(w->src, &st) != 0) {
			err = errno;
		} else {
			c.fd1 = w->src + 1;
			c.mode = w->v.mode;
			c.uid = st.st_uid;
			c.gid = st.st_gid;
			c.size = w->v.size;
			memcpy(c.digest, w->v.dg, sizeof c.digest);
			c.atime = st.st_atim;
			c.mtime = st.st_mtim;
		}
	}
	if (err == 0) {
		list[n++] = c;
		/* key: the copy's digest must be the one voted (commit.h). */
		struct changes one = { .c = list, .n = n, .targets = ch->targets, .ntargets = ch->ntargets,
				       .user_xattrs = ch->user_xattrs, .root = ch->root, .verify = &P->S->dkey };
		struct commit_result res;
		commit_apply(&one, &res);
		err = res.failed == 0 ? 0 : EIO;
	} else {
		log_warn("cannot commit %s at its point: %s", path, strerror(err));
	}
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
	return err;
}

/* No quorum can form at point m of pp: the run ends as on output with no
 * majority. */
static void no_quorum(struct points *P, struct ppath *pp, uint64_t m, const char *how)
{
	struct sup *S = P->S;
	char sides[512], why[160];
	size_t o = 0;
	sides[0] = '\0';
	for (struct waiter *w = pp->wait; w != NULL && o + 64 < sizeof sides; w = w->next)
		if (w->m == m && waiter_valid(S, w))
			o += (size_t)snprintf(sides + o, sizeof sides - o, "%sreplica %u: %s %lld bytes, digest %02x%02x%02x%02x",
					      o ? "; " : "", w->rid, w->v.kind == V_GONE ? "removed" : "a file of",
					      (long long)w->v.size, w->v.dg[0], w->v.dg[1], w->v.dg[2], w->v.dg[3]);
	snprintf(why, sizeof why, "its point %llu%s", (unsigned long long)m + 1, how);
	log_warn("no majority on the file %s at %s: %s", pp->path, why, sides[0] ? sides : "(no replica there)");
	ci_divergence(S, -1, "files", 0, NULL, pp->path);
	report_no_quorum(S->report, pp->path, 0, why, sides);
	replicas_kill_all(S);
	sup_finish(S, EXIT_NO_QUORUM);
}

/* Decides pp's next points while a quorum agrees on one and every replica
 * of the run is there; the held calls of a decided point go on (or fail
 * with EIO when it could not be committed), those of another version die. */
static void decide(struct points *P, struct ppath *pp)
{
	struct sup *S = P->S;
	while (!S->stopping) {
		/* Calls of processes that are gone or out of the vote. */
		for (struct waiter **w = &pp->wait; *w != NULL;) {
			if (waiter_valid(S, *w)) {
				w = &(*w)->next;
				continue;
			}
			struct waiter *dead = *w;
			*w = dead->next;
			waiter_free(P, dead);
		}
		uint64_t m = pp->ndone;
		const struct waiter *best = NULL;
		unsigned best_n = 0, arrived = 0, voted = 0, in_run = 0;
		for (const struct waiter *a = pp->wait; a != NULL; a = a->next) {
			if (a->m != m)
				continue;
			arrived++;
			if (!waiter_votes(S, a))
				continue;
			voted++;
			unsigned same = 0;
			for (const struct waiter *b = pp->wait; b != NULL; b = b->next)
				same += b->m == m && waiter_votes(S, b) && same_version(&a->v, &b->v);
			if (same > best_n) {
				best = a;
				best_n = same;
			}
		}
		for (unsigned i = 0; i < S->nslots; i++)
			in_run += participant(&S->r[i]);
		if (best == NULL)
			return;
		if (best_n < sup_quorum(S)) {
			if (voted >= sup_live_count(S) && sup_live_count(S) >= S->k)
				no_quorum(P, pp, m, "");
			return;
		}
		/* Every replica of the run at the point first: one that has not
		 * reached it may not have its own version of the path yet, and
		 * would see the committed one through its views (overlayfs
		 * keeps a directory's layers as it first looked them up: the
		 * start-state layer only serves views made after). The tick
		 * ends a wait longer than --timeout (points_tick). */
		if (arrived < in_run) {
			if (pp->quorum_since == 0)
				pp->quorum_since = sup_now();
			return;
		}
		pp->quorum_since = 0;
		struct version v = best->v;
		/* From the quorum's replicas in turn: one that wrote on after
		 * its sync fails the copy's check. */
		int err = EIO;
		for (const struct waiter *a = pp->wait; a != NULL && err != 0; a = a->next)
			if (a->m == m && waiter_votes(S, a) && same_version(&a->v, &v))
				err = commit_version(P, pp, a);
		if (err == 0) {
			P->committed++;
			P->by_kind[v.kind == V_GONE]++;
		} else {
			P->failed++;
		}
		if (pp->ndone < DONE_MAX) {
			if (pp->ndone == pp->cap) {
				pp->cap = pp->cap ? 2 * pp->cap : 4;
				pp->done = must(realloc(pp->done, pp->cap * sizeof *pp->done));
			}
			pp->done[pp->ndone] = v;
		} else if (!P->said_cap) {
			P->said_cap = true;
			log_warn("%s: more than %u points: later ones are no longer checked in late replicas", pp->path,
				 DONE_MAX);
		}
		pp->ndone++;
		report_counts(P);
		/* Answer the quorum, kill the others at this point. */
		for (struct waiter **w = &pp->wait; *w != NULL;) {
			struct waiter *a = *w;
			if (a->m != m) {
				w = &a->next;
				continue;
			}
			*w = a->next;
			if (same_version(&a->v, &v))
				virt_resume(S->virt, a->slot, a->gen, a->id, err == 0 ? 0 : EIO, a->made);
			else if (waiter_valid(S, a))
				diverge(P, &S->r[a->slot], pp, m, how_differs(&a->v, &v));
			waiter_free(P, a);
		}
	}
}

/* Slot slot reached a point of path with version v (src: its bytes,
 * taken; made: the call was made for it). true: the call is held (or
 * answered). */
static bool arrive(struct points *P, unsigned slot, uint64_t gen, uint64_t id, const char *path,
		   const struct version *v, int src, bool made)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	struct ppath *pp = path_lookup(P, path, true);
	uint64_t m = pp->seen[slot]++;
	if (m < pp->ndone) {
		/* Committed: a late replica, or a replacement replaying. */
		if (src >= 0)
			close(src);
		if (m < DONE_MAX) {
			P->late_checked++;
			report_counts(P);
			if (!same_version(&pp->done[m], v)) {
				diverge(P, r, pp, m, how_differs(v, &pp->done[m]));
				return true;
			}
		}
		if (!made)
			return false;
		virt_resume(S->virt, slot, gen, id, 0, true);
		return true;
	}
	struct waiter *w = must(calloc(1, sizeof *w));
	*w = (struct waiter){ .slot = slot, .rid = r->id, .gen = gen, .id = id, .m = m, .v = *v, .src = src,
			      .made = made, .since = sup_now(), .next = pp->wait };
	pp->wait = w;
	P->held[slot]++;
	decide(P, pp);
	return true;
}

/* Whether a replica may hold one more call (else its syncs go on
 * unvoted, said once). */
static bool room(struct points *P, unsigned slot)
{
	if (P->held[slot] < HELD_MAX)
		return true;
	if (!P->said_held) {
		P->said_held = true;
		log_warn("replica %u holds %u calls at commit points: its further syncs go on unvoted",
			 P->S->r[slot].id, HELD_MAX);
	}
	return false;
}

static bool on_sync(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct replica *r = &P->S->r[slot];
	char *path;
	struct version v = { 0 };
	int src;
	if (!room(P, slot) ||
	    !sync_file(P, r->changes, (pid_t)req->pid, (int)(int32_t)req->data.args[0], &path, &v, &src))
		return false;
	bool held = arrive(P, slot, gen, req->id, path, &v, src, false);
	free(path);
	return held;
}

struct want_ctx {
	struct points *P;
	unsigned slot;
};

static bool want_unlink(void *ctx, const char *path)
{
	struct want_ctx *c = ctx;
	return committed_for(c->P, c->slot, path);
}

/* unlink, unlinkat: the removal of a path a point committed. */
static bool on_unlink(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	bool at = req->data.nr == SYS_unlinkat;
	if (at && (req->data.args[2] & AT_REMOVEDIR))
		return false;
	pid_t tid = (pid_t)req->pid;
	int dirfd = at ? (int)(int32_t)req->data.args[0] : AT_FDCWD;
	uint64_t addr = req->data.args[at ? 1 : 0];
	char guess[4096], name[4096], path[8200];
	if (!room(P, slot) || !guess_path(tid, dirfd, addr, guess, sizeof guess) || !committed_for(P, slot, guess) ||
	    remote_read_string(tid, addr, name, sizeof name) != 0)
		return false;
	struct want_ctx ctx = { P, slot };
	int err = unlink_as(tid, dirfd, name, path, sizeof path, want_unlink, &ctx);
	if (err < 0)
		return false; /* not a point: the kernel makes the call */
	if (err > 0) {
		/* Refused, as the kernel refuses the replica: its answer. */
		virt_resume(P->S->virt, slot, gen, req->id, err, true);
		return true;
	}
	struct version v = { .kind = V_GONE };
	return arrive(P, slot, gen, req->id, path, &v, -1, true);
}

bool points_call(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	if (S->o->replay != NULL || S->stopping || S->stop_ev != NULL || r->changes == NULL || r->changes_bad ||
	    !participant(r))
		return false;
	switch (req->data.nr) {
	case SYS_fsync:
	case SYS_fdatasync: return on_sync(P, slot, gen, req);
	case SYS_unlink:
	case SYS_unlinkat: return on_unlink(P, slot, gen, req);
	default: return false;
	}
}

void points_release(struct points *P)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next) {
		while (pp->wait != NULL) {
			struct waiter *w = pp->wait;
			pp->wait = w->next;
			if (waiter_valid(P->S, w))
				virt_resume(P->S->virt, w->slot, w->gen, w->id, 0, w->made);
			waiter_free(P, w);
		}
		pp->quorum_since = 0;
	}
}

/* Every participant is held, none at a point that can be decided, for
 * longer than limit: the oldest held point is where no quorum formed. */
static bool stuck(struct points *P, double now, double limit, struct ppath **at, uint64_t *m)
{
	struct sup *S = P->S;
	unsigned in_run = 0, held = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		if (!participant(&S->r[i]))
			continue;
		in_run++;
		held += P->held[i] > 0;
	}
	if (in_run == 0 || held < in_run)
		return false;
	double oldest = now;
	*at = NULL;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next)
		for (const struct waiter *w = pp->wait; w != NULL; w = w->next)
			if (waiter_valid(S, w) && w->since < oldest) {
				oldest = w->since;
				*at = pp;
				*m = w->m;
			}
	return *at != NULL && now - oldest > limit;
}

void points_tick(struct points *P)
{
	if (P == NULL)
		return;
	struct sup *S = P->S;
	if (S->stop_ev != NULL) {
		points_release(P);
		return;
	}
	double limit = S->o->straggler_ms / 1000.0, now = sup_now();
	for (struct ppath *pp = P->paths; pp != NULL && !S->stopping; pp = pp->next) {
		if (pp->quorum_since == 0 || now - pp->quorum_since <= limit) {
			/* A replica that ended or was killed since is no longer
			 * waited for. */
			if (pp->wait != NULL)
				decide(P, pp);
			continue;
		}
		uint64_t m = pp->ndone;
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *r = &S->r[i];
			if (!participant(r))
				continue;
			bool there = false;
			for (const struct waiter *w = pp->wait; w != NULL && !there; w = w->next)
				there = w->slot == i && w->rid == r->id && w->m == m;
			if (there)
				continue;
			char why[256];
			snprintf(why, sizeof why, "straggler: not at its point %llu of %s %.1f s after a quorum was",
				 (unsigned long long)m + 1, pp->path, limit);
			replica_kill(S, r, why);
		}
		pp->quorum_since = 0;
		decide(P, pp);
	}
	/* Each waits at a point the others never reach (another order of
	 * syncs in each replica): no quorum can form anywhere. */
	struct ppath *at;
	uint64_t m;
	if (!S->stopping && stuck(P, now, limit, &at, &m))
		no_quorum(P, at, m, ": every replica waits at a point none of the others reaches");
}
