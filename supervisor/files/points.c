/* points.c — see points.h.
 *
 * A point's path is found as the replica sees it: a sync's by its
 * descriptor (/proc/TID/fd/N), an unlink's or a rename's by the name in
 * its memory resolved from its directory descriptor, its cwd or its root
 * (/proc/TID/fd/N, cwd, root), whose real path the kernel gives (the views
 * lie over the same real paths). Its version is read through the replica's
 * own view while the call waits: a sync's from its upper layer (changes.h:
 * "vN/u/" and the path beneath view N's target; a file not there is no
 * change of its), a rename's from the source it names. The descriptor is
 * kept with the held call, and the version committed is one replica's of
 * the quorum, through commit.c (beneath the view's target, no link
 * followed, beside then renamed, synced before and after), with any
 * directory above it that the real tree lacks (from that replica's upper
 * layer), after pre.c kept the start's version of every path it changes.
 *
 * Each path keeps the versions committed (48 bytes a point) for the late
 * replicas' checks, and the calls held on it. Paths are few in the
 * programs that sync (a database's files, a log), so they are a list, the
 * last one used first. */
#include "points.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

enum vkind { V_FILE, V_GONE };

struct version {
	enum vkind kind;
	uint8_t dg[DIGEST_BYTES]; /* V_FILE: its bytes */
	off_t size;
	mode_t mode;
	uint64_t from; /* a rename's source path (a hash), removed with it; 0: none */
};

/* A call held until its point is decided. */
struct waiter {
	unsigned slot, rid; /* the slot and the id of the process that made it */
	uint64_t gen, id;   /* its listener's generation, the notification */
	uint64_t m;         /* its number among the path's points */
	struct version v;
	int src;            /* V_FILE: the version, open for reading */
	char *from;         /* a rename's source path, or NULL */
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
	uint64_t committed, failed, late_checked;
	uint64_t by_kind[3]; /* syncs, renames, removals committed */
	bool said_cap;
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
	return P;
}

static void waiter_free(struct waiter *w)
{
	if (w->src >= 0)
		close(w->src);
	free(w->from);
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
			waiter_free(w);
		}
		free(pp->path);
		free(pp->seen);
		free(pp->done);
		free(pp);
	}
	free(P);
}

uint64_t points_committed(const struct points *P)
{
	return P == NULL ? 0 : P->committed;
}

static void report_counts(struct points *P)
{
	json_object_set_new(P->rep, "points",
			    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "committed", (json_int_t)P->committed, "syncs",
				      (json_int_t)P->by_kind[0], "renames", (json_int_t)P->by_kind[1], "removals",
				      (json_int_t)P->by_kind[2], "failed", (json_int_t)P->failed, "late_checked",
				      (json_int_t)P->late_checked));
}

void points_restart(struct points *P, unsigned slot)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next)
		pp->seen[slot] = 0;
}

/* ---- the file of a point ---- */

static uint64_t path_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h | 1;
}

/* The view of path in ch (the longest target it lies beneath), or -1;
 * *rel where the path beneath it starts. */
static int view_of(const struct changes *ch, const char *path, size_t *rel)
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

/* Opens a file of the upper layer for reading (unprivileged, a mode
 * without the owner's read bit is granted for the moment). */
static int open_upper(int root, const char *upper, mode_t mode)
{
	int fd = openat(root, upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 || errno != EACCES)
		return fd;
	if (fchmodat(root, upper, mode | 0400, 0) != 0)
		return -1;
	fd = openat(root, upper, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int err = errno;
	(void)fchmodat(root, upper, mode, 0);
	errno = err;
	return fd;
}

/* The version of the open file fd (regular). false on failure. */
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

/* The real path of the directory open at fd, into buf. false when it is
 * none the replica's views show (removed, or out of reach). */
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
	int vi = view_of(ch, buf, &rel);
	if (vi < 0 || (size_t)snprintf(upper, sizeof upper, "v%d/u/%s", vi, buf + rel) >= sizeof upper)
		return false;
	struct stat st;
	if (fstatat(ch->root, upper, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
		return false;
	int in = open_upper(ch->root, upper, st.st_mode & 07777);
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

/* A name a call of the replica's passes (at addr, relative to dirfd): its
 * real path (malloc'ed) and its parent directory as the replica sees it
 * (an O_PATH descriptor, *parent), the last component in *base (into
 * path). The name is made absolute with the path of the replica's cwd or
 * descriptor, then its directories are resolved from the replica's root
 * with RESOLVE_IN_ROOT and no magic links: a link the replica planted
 * cannot send diehard out of its tree (into diehard's own /proc/self, or
 * a directory the views hide). false: not a name a point can be made of
 * (unreadable, empty, a "." or ".." or a trailing '/' at its end, out of
 * the views). */
static bool resolve(const struct changes *ch, pid_t tid, int dirfd, uint64_t addr, char **path, int *parent,
		    const char **base)
{
	char name[4096];
	if (remote_read_string(tid, addr, name, sizeof name) != 0 || name[0] == '\0')
		return false;
	char *slash = strrchr(name, '/');
	const char *last = slash != NULL ? slash + 1 : name;
	if (last[0] == '\0' || strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
		return false;
	char proc[64], where[4096], dir[8200];
	if (name[0] == '/') {
		where[0] = '\0';
	} else {
		if (dirfd == AT_FDCWD)
			snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)tid);
		else
			snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)tid, dirfd);
		if (!fd_path(proc, where, sizeof where))
			return false;
	}
	/* where + "/" + the name's directories: the directory, absolute. */
	if (slash == NULL)
		snprintf(dir, sizeof dir, "%s/", where);
	else if (slash == name)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%s/%.*s", where, (int)(slash - name), name);
	snprintf(proc, sizeof proc, "/proc/%d/root", (int)tid);
	int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return false;
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int pfd = (int)syscall(SYS_openat2, root, dir, &how, sizeof how);
	close(root);
	if (pfd < 0)
		return false;
	char real[4096];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	size_t rel;
	char *full = NULL;
	if (!fd_path(proc, real, sizeof real) ||
	    asprintf(&full, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", last) < 0 || view_of(ch, full, &rel) < 0) {
		free(full);
		close(pfd);
		return false;
	}
	*path = full;
	*parent = pfd;
	*base = strrchr(full, '/') + 1;
	return true;
}

/* ---- the vote ---- */

static bool same_version(const struct version *a, const struct version *b)
{
	return a->kind == b->kind && a->size == b->size && a->mode == b->mode && a->from == b->from &&
	       memcmp(a->dg, b->dg, sizeof a->dg) == 0;
}

/* How a's version differs from b's, in the report's words: the bytes
 * (or size), the mode, "missing" (a removed where b kept), "extra" (the
 * reverse), "source" (a rename's, from another path). */
static const char *how_differs(const struct version *a, const struct version *b)
{
	if (a->kind != b->kind)
		return a->kind == V_GONE ? "missing" : "extra";
	if (a->from != b->from)
		return "source";
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

/* Whether a point committed path (its removal and renames are points from
 * then on). */
static bool committed_path(struct points *P, const char *path)
{
	const struct ppath *pp = path_lookup(P, path, false);
	return pp != NULL && pp->ndone > 0;
}

/* r's file differs from what a quorum agreed at point m of pp: reported
 * and r killed (then replaced). */
static void diverge(struct points *P, struct replica *r, const struct ppath *pp, uint64_t m, const char *what)
{
	struct sup *S = P->S;
	char why[256];
	snprintf(why, sizeof why, "its %s at its point %llu differs from the committed version (%s)", pp->path,
		 (unsigned long long)m + 1, what);
	log_event("divergence: replica %u's file %s at its point %llu (a sync, rename or removal) differs from the "
		  "committed version (%s)",
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

/* A change of path for commit.c, its view's numbers from ch. */
static bool change_at(const struct changes *ch, const char *path, enum change_kind kind, struct change *c)
{
	size_t rel;
	int v = view_of(ch, path, &rel);
	if (v < 0)
		return false;
	*c = (struct change){ .path = (char *)path, .view = (unsigned)v, .rel = rel, .kind = kind };
	return true;
}

/* Commits w's version of pp's path: the directories above it the real
 * tree lacks (from w's replica's upper layer), the file (from w->src), a
 * rename's source removed; or the path removed. The start's versions kept
 * first (pre.h). 0, or an errno (said). */
static int commit_version(struct points *P, const struct ppath *pp, const struct waiter *w)
{
	const struct changes *ch = P->S->r[w->slot].changes;
	const char *path = pp->path;
	struct change list[66];
	char *owned[66];
	size_t n = 0, nowned = 0;
	struct change c;
	if (!change_at(ch, path, w->v.kind == V_GONE ? CHANGE_GONE : CHANGE_FILE, &c))
		return EXDEV;
	int err = pre_keep(P->pre, ch->targets[c.view], path);
	if (err == 0 && w->from != NULL) {
		size_t rel;
		int fv = view_of(ch, w->from, &rel);
		err = fv < 0 ? EXDEV : pre_keep(P->pre, ch->targets[fv], w->from);
	}
	if (err == 0 && w->v.kind == V_FILE) {
		/* The directories above it, top down, that the real tree lacks. */
		for (const char *s = strchr(path + c.rel, '/'); s != NULL && n + 2 < 64; s = strchr(s + 1, '/')) {
			char *dir = must(strndup(path, (size_t)(s - path)));
			char *up = NULL;
			struct stat real, st;
			if (lstat(dir, &real) == 0 || errno != ENOENT ||
			    asprintf(&up, "v%u/u/%s", c.view, dir + c.rel) < 0 ||
			    fstatat(ch->root, up, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
				free(dir);
				free(up);
				continue;
			}
			list[n++] = (struct change){ .path = dir, .view = c.view, .rel = c.rel, .upper = up,
						     .kind = CHANGE_DIR, .mode = st.st_mode & 07777, .uid = st.st_uid,
						     .gid = st.st_gid, .atime = st.st_atim, .mtime = st.st_mtim };
			owned[nowned++] = dir;
			owned[nowned++] = up;
		}
		struct stat st;
		if (fstat(w->src, &st) != 0)
			err = errno;
		else {
			c.fd1 = w->src + 1;
			c.mode = st.st_mode & 07777;
			c.uid = st.st_uid;
			c.gid = st.st_gid;
			c.size = st.st_size;
			c.atime = st.st_atim;
			c.mtime = st.st_mtim;
		}
	}
	if (err == 0) {
		list[n++] = c;
		if (w->from != NULL && change_at(ch, w->from, CHANGE_GONE, &list[n]))
			n++;
		struct changes one = { .c = list, .n = n, .targets = ch->targets, .ntargets = ch->ntargets,
				       .user_xattrs = ch->user_xattrs, .root = ch->root };
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

/* Every voter reached point m of pp and no version has a quorum: the run
 * ends as on output with no majority. */
static void no_quorum(struct points *P, struct ppath *pp, uint64_t m)
{
	struct sup *S = P->S;
	char sides[512], why[96];
	size_t o = 0;
	sides[0] = '\0';
	for (struct waiter *w = pp->wait; w != NULL && o + 64 < sizeof sides; w = w->next)
		if (w->m == m && waiter_valid(S, w))
			o += (size_t)snprintf(sides + o, sizeof sides - o, "%sreplica %u: %s %lld bytes, digest %02x%02x%02x%02x",
					      o ? "; " : "", w->rid, w->v.kind == V_GONE ? "removed" : "a file of",
					      (long long)w->v.size, w->v.dg[0], w->v.dg[1], w->v.dg[2], w->v.dg[3]);
	snprintf(why, sizeof why, "its point %llu", (unsigned long long)m + 1);
	log_warn("no majority on the file %s at %s: %s", pp->path, why, sides);
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
			waiter_free(dead);
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
				no_quorum(P, pp, m);
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
		int err = commit_version(P, pp, best);
		if (err == 0) {
			P->committed++;
			P->by_kind[v.kind == V_GONE ? 2 : v.from != 0 ? 1 : 0]++;
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
				virt_resume(S->virt, a->slot, a->gen, a->id, err == 0 ? 0 : EIO);
			else if (waiter_valid(S, a))
				diverge(P, &S->r[a->slot], pp, m, how_differs(&a->v, &v));
			waiter_free(a);
		}
	}
}

/* Slot slot reached a point of path with version v (src: its bytes, taken;
 * from: a rename's source, taken). true: the call is held. */
static bool arrive(struct points *P, unsigned slot, uint64_t gen, uint64_t id, char *path, const struct version *v,
		   int src, char *from)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	struct ppath *pp = path_lookup(P, path, true);
	free(path);
	uint64_t m = pp->seen[slot]++;
	if (m < pp->ndone) {
		/* Committed: a late replica, or a replacement replaying. */
		if (src >= 0)
			close(src);
		free(from);
		if (m >= DONE_MAX)
			return false;
		P->late_checked++;
		report_counts(P);
		if (same_version(&pp->done[m], v))
			return false;
		diverge(P, r, pp, m, how_differs(v, &pp->done[m]));
		return true;
	}
	struct waiter *w = must(calloc(1, sizeof *w));
	*w = (struct waiter){ .slot = slot, .rid = r->id, .gen = gen, .id = id, .m = m, .v = *v, .src = src,
			      .from = from, .next = pp->wait };
	pp->wait = w;
	decide(P, pp);
	return true;
}

static bool on_sync(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct replica *r = &P->S->r[slot];
	char *path;
	struct version v = { 0 };
	int src;
	if (!sync_file(P, r->changes, (pid_t)req->pid, (int)(int32_t)req->data.args[0], &path, &v, &src))
		return false;
	return arrive(P, slot, gen, req->id, path, &v, src, NULL);
}

/* unlink, unlinkat: the removal of a path a point committed. */
static bool on_unlink(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct replica *r = &P->S->r[slot];
	bool at = req->data.nr == SYS_unlinkat;
	if (at && (req->data.args[2] & AT_REMOVEDIR))
		return false;
	char *path;
	int parent;
	const char *base;
	if (!resolve(r->changes, (pid_t)req->pid, at ? (int)(int32_t)req->data.args[0] : AT_FDCWD,
		     req->data.args[at ? 1 : 0], &path, &parent, &base))
		return false;
	close(parent);
	if (!committed_path(P, path)) {
		free(path);
		return false;
	}
	struct version v = { .kind = V_GONE };
	return arrive(P, slot, gen, req->id, path, &v, -1, NULL);
}

/* rename, renameat, renameat2: a regular file renamed over an existing
 * one, or a file a point committed renamed. */
static bool on_rename(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct replica *r = &P->S->r[slot];
	pid_t tid = (pid_t)req->pid;
	int nr = (int)req->data.nr;
	if (nr == SYS_renameat2 && (req->data.args[4] & (RENAME_EXCHANGE | RENAME_WHITEOUT)))
		return false;
	bool at = nr != SYS_rename;
	int odir = at ? (int)(int32_t)req->data.args[0] : AT_FDCWD, ndir = at ? (int)(int32_t)req->data.args[2] : AT_FDCWD;
	uint64_t oname = req->data.args[at ? 1 : 0], nname = req->data.args[at ? 3 : 1];
	char *from, *to;
	int ofd, nfd;
	const char *obase, *nbase;
	if (!resolve(r->changes, tid, odir, oname, &from, &ofd, &obase))
		return false;
	if (!resolve(r->changes, tid, ndir, nname, &to, &nfd, &nbase)) {
		free(from);
		close(ofd);
		return false;
	}
	struct stat os, ns;
	bool over = fstatat(nfd, nbase, &ns, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ns.st_mode);
	bool point = fstatat(ofd, obase, &os, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(os.st_mode) &&
		     strcmp(from, to) != 0 && (over || committed_path(P, from));
	int src = point ? openat(ofd, obase, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	close(ofd);
	close(nfd);
	struct version v = { 0 };
	if (src < 0 || !version_of(P, src, &v)) {
		if (src >= 0)
			close(src);
		free(from);
		free(to);
		return false;
	}
	v.from = path_hash(from);
	return arrive(P, slot, gen, req->id, to, &v, src, from);
}

bool points_call(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	if (S->o->replay != NULL || S->stopping || r->changes == NULL || r->changes_bad || !participant(r))
		return false;
	switch (req->data.nr) {
	case SYS_fsync:
	case SYS_fdatasync: return on_sync(P, slot, gen, req);
	case SYS_unlink:
	case SYS_unlinkat: return on_unlink(P, slot, gen, req);
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2: return on_rename(P, slot, gen, req);
	default: return false;
	}
}

void points_tick(struct points *P)
{
	if (P == NULL)
		return;
	struct sup *S = P->S;
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
}
