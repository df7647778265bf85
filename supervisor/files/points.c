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
 * voted (commit.h's verify), else the next replica of the quorum's is
 * tried. A quorum whose files have all grown since (a thread that writes
 * on while another syncs) commits nothing at that point: said, and the
 * calls go on (the end, or a later point, commits what they wrote).
 *
 * Each path keeps the versions committed (40 bytes a point) for the late
 * replicas' checks, and the calls held on it; a replica holds at most
 * HELD_MAX calls at once (past that, its syncs go on unvoted, said once).
 * Paths are few in the programs that sync (a database's files, a log), so
 * they are a list, the last one used first. */
#include "points.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "changes.h"
#include "commit.h"
#include "exitcode.h"
#include "log.h"
#include "logs.h"
#include "pre.h"
#include "sup.h"
#include "virt.h"

/* Versions kept per path for the late replicas' checks; past this, later
 * points of the path are committed but no longer checked against a late
 * replica (said once). */
#define DONE_MAX (1u << 20)
/* Calls held per replica at once. */
#define HELD_MAX 256

struct version {
	uint8_t dg[DIGEST_BYTES]; /* its bytes */
	off_t size;               /* NO_VERSION: a point that went on unsettled */
	mode_t mode;
	uid_t uid;                /* the owner too: one replica never picks it */
	gid_t gid;
};
#define NO_VERSION ((off_t)-1)

/* A call held until its point is decided. */
struct waiter {
	unsigned slot, rid; /* the slot and the id of the process that made it */
	uint64_t gen, id;   /* its listener's generation, the notification */
	uint64_t m;         /* its number among the path's points */
	struct version v;
	int src;            /* the version, open for reading */
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
				 a replica's views still showed the real path
				 (0: not so) */
	struct ppath *next;
};

struct points {
	struct sup *S;
	struct logs *logs;    /* the streams (logs.h), whose syncs are theirs */
	json_t *rep;
	struct pre *pre;
	struct ppath *paths;
	unsigned *held;       /* per slot: calls held */
	uint64_t committed, failed, skipped, late_checked, outvoted, unsettled;
	bool said_cap, said_held;
};

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

struct points *points_new(struct sup *S, json_t *rep, struct pre *pre, struct logs *logs)
{
	struct points *P = must(calloc(1, sizeof *P));
	P->S = S;
	P->logs = logs;
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
			    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "committed", (json_int_t)P->committed, "skipped",
				      (json_int_t)P->skipped, "failed", (json_int_t)P->failed, "late_checked",
				      (json_int_t)P->late_checked, "outvoted", (json_int_t)P->outvoted, "unsettled",
				      (json_int_t)P->unsettled));
}

void points_restart(struct points *P, unsigned slot)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next)
		pp->seen[slot] = 0;
}

/* ---- the file of a point ---- */

/* The version of the open regular file fd. false on failure. */
static bool version_of(struct points *P, int fd, struct version *v)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || changes_digest_fd(fd, &P->S->dkey, v->dg) != 0)
		return false;
	v->size = st.st_size;
	v->mode = st.st_mode & 07777;
	v->uid = st.st_uid;
	v->gid = st.st_gid;
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

/* The real path of the file whose shared mapping holds addr in thread
 * tid (from /proc/TID/maps), into buf. false: none (a private or
 * anonymous mapping, a removed file, no mapping there). */
static bool map_path(pid_t tid, uint64_t addr, char *buf, size_t size)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/%d/maps", (int)tid);
	FILE *f = fopen(proc, "re");
	if (f == NULL)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned long lo, hi;
		char perms[8];
		int at = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &at) != 3 || at == 0 || addr < lo ||
		    addr >= hi)
			continue;
		/* The mapping of addr: the point's only if shared and a file's. */
		size_t n = strcspn(line + at, "\n");
		static const char deleted[] = " (deleted)";
		size_t dl = sizeof deleted - 1;
		if (perms[3] == 's' && line[at] == '/' && n < size && !(n > dl && memcmp(line + at + n - dl, deleted, dl) == 0)) {
			memcpy(buf, line + at, n);
			buf[n] = '\0';
			found = true;
		}
		break;
	}
	free(line);
	fclose(f);
	return found;
}

/* A sync's file: its real path (copied into *path, malloc'ed) and the
 * replica's version, open at in (taken: kept in *src, or closed), digested
 * into v. false: no point. */
static bool point_file(struct points *P, int in, const char *real, char **path, struct version *v, int *src)
{
	if (!version_of(P, in, v)) {
		close(in);
		return false;
	}
	*src = in;
	*path = must(strdup(real));
	return true;
}

/* ---- the vote ---- */

static bool same_version(const struct version *a, const struct version *b)
{
	return a->size == b->size && a->mode == b->mode && a->uid == b->uid && a->gid == b->gid &&
	       memcmp(a->dg, b->dg, sizeof a->dg) == 0;
}

/* How a's version differs from b's, in the report's words: the bytes (or
 * the size), the owner, or the mode. */
static const char *how_differs(const struct version *a, const struct version *b)
{
	if (a->size != b->size || memcmp(a->dg, b->dg, sizeof a->dg) != 0)
		return "bytes";
	return a->uid != b->uid || a->gid != b->gid ? "owner" : "mode";
}

static bool waiter_valid(const struct sup *S, const struct waiter *w)
{
	const struct replica *r = &S->r[w->slot];
	return replica_in_run(r) && r->id == w->rid;
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

/* r's file differs at point m of pp from the version committed there: it
 * is outvoted, not killed. What a file holds at a sync can depend on when
 * the sync came (a timer's, a thread's), which differs between replicas
 * that are all correct; the end's vote, or the output's, judges the
 * replica. */
static void outvoted(struct points *P, const struct replica *r, const struct ppath *pp, uint64_t m, const char *what)
{
	P->outvoted++;
	log_event("replica %u's file %s at its sync %llu differs from the version committed there (%s): outvoted at "
		  "that point, it goes on (the end's vote judges it)",
		  r->id, pp->path, (unsigned long long)m + 1, what);
}

/* Commits w's version of pp's path: the directories above it the real
 * tree lacks (from w's replica's upper layer) and the file (from w->src,
 * its copy checked against the version voted). The start's version kept
 * first (pre.h). 0, or an errno (said). */
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
	struct change c = { .path = (char *)path, .view = (unsigned)v, .rel = rel, .kind = CHANGE_FILE };
	int err = pre_keep(P->pre, ch->targets[v], path);
	if (err == 0) {
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

/* Point m of pp is decided: v (NO_VERSION: none) kept for the late
 * replicas' checks, the point counted done. */
static void point_done(struct points *P, struct ppath *pp, const struct version *v)
{
	if (pp->ndone < DONE_MAX) {
		if (pp->ndone == pp->cap) {
			pp->cap = pp->cap ? 2 * pp->cap : 4;
			pp->done = must(realloc(pp->done, pp->cap * sizeof *pp->done));
		}
		pp->done[pp->ndone] = *v;
	} else if (!P->said_cap) {
		P->said_cap = true;
		log_warn("%s: more than %u points: later ones are no longer checked in late replicas", pp->path,
			 DONE_MAX);
	}
	pp->ndone++;
	pp->quorum_since = 0;
	report_counts(P);
}

/* Point m of pp goes on with nothing committed (no quorum formed: why):
 * its calls return; the end, or a later point, commits what the replicas
 * wrote. */
static void unsettle(struct points *P, struct ppath *pp, uint64_t m, const char *why)
{
	struct sup *S = P->S;
	P->unsettled++;
	log_event("%s: its sync %llu goes on uncommitted: %s", pp->path, (unsigned long long)m + 1, why);
	struct version none = { .size = NO_VERSION };
	point_done(P, pp, &none);
	for (struct waiter **w = &pp->wait; *w != NULL;) {
		struct waiter *a = *w;
		if (a->m != m) {
			w = &a->next;
			continue;
		}
		*w = a->next;
		if (waiter_valid(S, a))
			virt_resume(S->virt, a->slot, a->gen, a->id, 0);
		waiter_free(P, a);
	}
}

/* The participants whose views would show a commit of pp's real path:
 * no view of theirs hides it (changes.h's masks; being at the point is no
 * proof: another thread may have moved the file since). *first one of
 * them, if any. */
static unsigned exposed(struct points *P, const struct ppath *pp, struct replica **first)
{
	struct sup *S = P->S;
	unsigned n = 0;
	*first = NULL;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (!replica_in_run(r) || (r->changes != NULL && changes_masks(r->changes, pp->path)))
			continue;
		if (n++ == 0)
			*first = r;
	}
	return n;
}

/* Decides pp's next points while one can be: committed when a quorum of
 * voters agrees on its version and no participant's views would show the
 * real path change (overlayfs keeps a directory's layers as it first
 * looked them up, so the start-state layer only serves views made after:
 * a replica whose upper layer lacks the path would see the commit);
 * unsettled when no quorum can form any more. The calls of a committed
 * point return (EIO when it could not be committed), those of another
 * version too, outvoted. */
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
		unsigned best_n = 0, voted = 0, live = sup_live_count(S);
		for (const struct waiter *a = pp->wait; a != NULL; a = a->next) {
			if (a->m != m || !waiter_votes(S, a))
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
		if (best == NULL || best_n < sup_quorum(S))
			pp->quorum_since = 0;
		if (best == NULL)
			return;
		if (best_n < sup_quorum(S)) {
			/* The voters not there yet cannot make a quorum. */
			if (best_n + (live > voted ? live - voted : 0) < sup_quorum(S))
				unsettle(P, pp, m, "the voters' files differ there, no quorum");
			return;
		}
		struct replica *show;
		if (exposed(P, pp, &show) > 0) {
			/* The tick kills it as a straggler after --timeout. */
			if (pp->quorum_since == 0)
				pp->quorum_since = sup_now();
			return;
		}
		struct version v = best->v;
		/* From the quorum's replicas in turn, each whose file still has
		 * the size voted: one that wrote on after its sync fails the
		 * copy's check (commit.h's verify). None left: skipped. */
		int err = ESTALE;
		for (const struct waiter *a = pp->wait; a != NULL && err != 0; a = a->next) {
			struct stat now;
			if (a->m == m && waiter_votes(S, a) && same_version(&a->v, &v) && fstat(a->src, &now) == 0 &&
			    now.st_size == v.size)
				err = commit_version(P, pp, a);
		}
		if (err == 0) {
			P->committed++;
		} else if (err == ESTALE) {
			/* Not a failure of the real file system: the calls go on;
			 * a later point, or the end, commits what they wrote. */
			P->skipped++;
			log_warn("%s: not committed at its sync %llu: the replicas wrote on while it was voted", pp->path,
				 (unsigned long long)m + 1);
			err = 0;
		} else {
			P->failed++;
		}
		point_done(P, pp, &v);
		/* Answer every call at this point; another version is outvoted. */
		for (struct waiter **w = &pp->wait; *w != NULL;) {
			struct waiter *a = *w;
			if (a->m != m) {
				w = &a->next;
				continue;
			}
			*w = a->next;
			bool same = same_version(&a->v, &v);
			if (!same)
				outvoted(P, &S->r[a->slot], pp, m, how_differs(&a->v, &v));
			virt_resume(S->virt, a->slot, a->gen, a->id, same && err != 0 ? EIO : 0);
			waiter_free(P, a);
		}
	}
}

/* Slot slot reached a point of path with version v (src: its bytes,
 * taken). true: the call is held. */
static bool arrive(struct points *P, unsigned slot, uint64_t gen, uint64_t id, const char *path,
		   const struct version *v, int src)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	struct ppath *pp = path_lookup(P, path, true);
	uint64_t m = pp->seen[slot]++;
	if (m < pp->ndone) {
		/* Decided: a late replica, or a replacement replaying. */
		bool kept = m < DONE_MAX && pp->done[m].size != NO_VERSION;
		if (kept && same_version(&pp->done[m], v)) {
			P->late_checked++;
			report_counts(P);
			close(src);
			return false;
		}
		/* A voter whose count fell behind the others' (a timer's syncs):
		 * the version it has is that of a later point it passed, on
		 * that evidence only; else the point is used up here, its
		 * version outvoted (never moved ahead to the next point: that
		 * count would stay off for good). */
		for (uint64_t k = m + 1; r->live && k < pp->ndone && k < DONE_MAX && k < m + 64; k++)
			if (pp->done[k].size != NO_VERSION && same_version(&pp->done[k], v)) {
				pp->seen[slot] = k + 1;
				P->late_checked++;
				report_counts(P);
				close(src);
				return false;
			}
		if (kept) {
			P->late_checked++;
			outvoted(P, r, pp, m, how_differs(v, &pp->done[m]));
			report_counts(P);
		}
		close(src);
		return false;
	}
	struct waiter *w = must(calloc(1, sizeof *w));
	*w = (struct waiter){ .slot = slot, .rid = r->id, .gen = gen, .id = id, .m = m, .v = *v, .src = src,
			      .since = sup_now(), .next = pp->wait };
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

/* fsync, fdatasync (a descriptor) or msync with MS_SYNC (an address in a
 * shared mapping of the file). */
static bool on_sync(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct replica *r = &P->S->r[slot];
	char *path, real[4096];
	struct version v = { 0 };
	int src;
	if (!room(P, slot))
		return false;
	if (req->data.nr == SYS_msync) {
		if (!map_path((pid_t)req->pid, req->data.args[0], real, sizeof real))
			return false;
	} else {
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)req->pid, (int)(int32_t)req->data.args[0]);
		if (!fd_path(proc, real, sizeof real))
			return false;
	}
	/* Not a file the replica changed in a view: no point. */
	int in = changes_open_version(r->changes, real);
	if (in < 0)
		return false;
	/* A file voted as a stream: the stream's own sync (logs.h). */
	if (logs_sync(P->logs, slot, gen, req->id, real, in)) {
		close(in);
		return true;
	}
	if (!point_file(P, in, real, &path, &v, &src))
		return false;
	bool held = arrive(P, slot, gen, req->id, path, &v, src);
	free(path);
	return held;
}

bool points_call(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	if (S->o->replay != NULL || S->stopping || S->stop_ev != NULL || r->changes == NULL || r->changes_bad ||
	    !replica_in_run(r))
		return false;
	switch (req->data.nr) {
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_msync: return on_sync(P, slot, gen, req);
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
				virt_resume(P->S->virt, w->slot, w->gen, w->id, 0);
			waiter_free(P, w);
		}
		pp->quorum_since = 0;
	}
}

/* The oldest call held at point m of pp, or NULL. */
static const struct waiter *oldest_at(const struct ppath *pp, uint64_t m)
{
	const struct waiter *old = NULL;
	for (const struct waiter *w = pp->wait; w != NULL; w = w->next)
		if (w->m == m && (old == NULL || w->since < old->since))
			old = w;
	return old;
}

/* Whether every live voter without a call held at point m of pp has one
 * held at another point. */
static bool others_held(struct points *P, const struct ppath *pp, uint64_t m)
{
	struct sup *S = P->S;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (!r->live || !replica_in_run(r))
			continue;
		bool there = false, elsewhere = false;
		for (const struct waiter *w = pp->wait; w != NULL && !there; w = w->next)
			there = w->slot == i && w->rid == r->id && w->m == m;
		for (const struct ppath *q = P->paths; q != NULL && !there && !elsewhere; q = q->next)
			for (const struct waiter *w = q->wait; w != NULL && !elsewhere; w = w->next)
				elsewhere = w->slot == i && w->rid == r->id && (q != pp || w->m != m);
		if (!there && !elsewhere)
			return false;
	}
	return true;
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
		if (pp->wait == NULL)
			continue;
		/* A replica that ended or was killed since is no longer
		 * waited for. */
		decide(P, pp);
		uint64_t m = pp->ndone;
		const struct waiter *old = oldest_at(pp, m);
		if (S->stopping || old == NULL)
			continue;
		if (pp->quorum_since != 0) {
			if (now - pp->quorum_since <= limit)
				continue;
			/* A quorum agreed, and a replica's views still show the
			 * real path: it never made the file a quorum synced. */
			struct replica *r;
			while (!S->stopping && exposed(P, pp, &r) > 0) {
				char why[256];
				snprintf(why, sizeof why,
					 "straggler: no file %s of its own %.1f s after a quorum synced it (its sync %llu)",
					 pp->path, limit, (unsigned long long)m + 1);
				replica_kill(S, r, why);
			}
			pp->quorum_since = 0;
			decide(P, pp);
		} else if (now - old->since > limit && others_held(P, pp, m)) {
			/* No quorum within --timeout, and every voter not there
			 * waits at another point: none can come (syncs in
			 * another order in each replica). A voter that runs on is
			 * waited for: a slow one comes, and one that never does
			 * is a straggler of the output. */
			char why[160];
			snprintf(why, sizeof why, "no quorum within %.1f s (every other replica waits at another point)",
				 limit);
			unsettle(P, pp, m, why);
			decide(P, pp);
		}
	}
}
