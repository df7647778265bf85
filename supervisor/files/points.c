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
 * they are a list, the last one used first. Renames and removals are
 * decided by a probe: probe.c. */
#include "points_int.h"

#include <errno.h>
#include <event2/event.h>
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
#include "remote.h"
#include "sup.h"
#include "virt.h"


struct points *points_new(struct sup *S, json_t *rep, struct pre *pre, struct logs *logs, struct pidfiles *pids)
{
	struct points *P = points_must(calloc(1, sizeof *P));
	P->pids = pids;
	P->S = S;
	P->logs = logs;
	P->rep = rep;
	P->pre = pre;
	P->held = points_must(calloc(S->nslots, sizeof *P->held));
	P->probe_ev = points_must(evtimer_new(S->base, probe_on_timer, P));
	return P;
}

/* A waiter never held (a late replica's call). */
void points_waiter_drop(struct waiter *w)
{
	if (w->src >= 0)
		close(w->src);
	free(w->from);
	free(w);
}

/* A held one, its call answered or its process gone. */
static void waiter_free(struct points *P, struct waiter *w)
{
	if (P->held[w->slot] > 0)
		P->held[w->slot]--;
	points_waiter_drop(w);
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
		free(pp->quorum_from);
		free(pp->seen);
		free(pp->done);
		free(pp);
	}
	free(P->held);
	if (P->probe_ev != NULL)
		event_free(P->probe_ev);
	free(P);
}

uint64_t points_committed(const struct points *P)
{
	return P == NULL ? 0 : P->committed;
}

bool points_idle(const struct points *P)
{
	for (unsigned i = 0; P != NULL && i < P->S->nslots; i++)
		if (P->held[i] != 0)
			return false;
	return true;
}

void points_caught_up(struct points *P, const char *path)
{
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next)
		if (strcmp(pp->path, path) == 0)
			pp->behind = false;
}

bool points_behind(const struct points *P)
{
	struct stat st;
	for (const struct ppath *pp = P != NULL ? P->paths : NULL; pp != NULL; pp = pp->next) {
		if (!pp->behind)
			continue;
		if (lstat(pp->path, &st) == 0)
			return true;
		/* Absent in the real tree: behind only while a voter has its
		 * own version there (a journal every voter removed is not). */
		for (unsigned i = 0; i < P->S->nslots; i++) {
			const struct replica *r = &P->S->r[i];
			int fd = r->live && r->changes != NULL ? changes_open_version(r->changes, pp->path) : -1;
			if (fd >= 0) {
				close(fd);
				return true;
			}
		}
	}
	return false;
}

static void report_counts(struct points *P)
{
	json_object_set_new(P->rep, "points",
			    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "committed", (json_int_t)P->committed, "renamed",
				      (json_int_t)P->renamed, "removed", (json_int_t)P->removed, "skipped",
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

void points_slot_front(struct points *P, unsigned slot)
{
	if (P == NULL)
		return;
	for (struct ppath *pp = P->paths; pp != NULL; pp = pp->next) {
		uint64_t front = pp->seen[slot];
		for (unsigned j = 0; j < P->S->nslots; j++)
			if (j != slot && P->S->r[j].live && pp->seen[j] > front)
				front = pp->seen[j];
		pp->seen[slot] = front;
	}
}

/* ---- the file of a point ---- */

/* The version of the open regular file fd. false on failure. */
bool points_version_of(struct points *P, int fd, struct version *v)
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

/* ---- the vote ---- */

bool points_same_version(const struct version *a, const struct version *b)
{
	return a->size == b->size && a->mode == b->mode && a->uid == b->uid && a->gid == b->gid &&
	       a->from == b->from && memcmp(a->dg, b->dg, sizeof a->dg) == 0;
}

/* How a's version differs from b's, in the report's words: the bytes (or
 * the size), the owner, or the mode. */
static const char *how_differs(const struct version *a, const struct version *b)
{
	if (a->from != b->from)
		return "the name renamed";
	if (a->size != b->size || memcmp(a->dg, b->dg, sizeof a->dg) != 0)
		return "bytes";
	return a->uid != b->uid || a->gid != b->gid ? "owner" : "mode";
}

bool points_waiter_valid(const struct sup *S, const struct waiter *w)
{
	const struct replica *r = &S->r[w->slot];
	return replica_in_run(r) && r->id == w->rid;
}

bool points_waiter_votes(const struct sup *S, const struct waiter *w)
{
	return S->r[w->slot].live;
}

struct ppath *points_path(struct points *P, const char *path, enum kind kind, bool make)
{
	struct ppath **pp = &P->paths;
	for (; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->kind == kind && strcmp((*pp)->path, path) == 0) {
			struct ppath *found = *pp;
			*pp = found->next; /* to the front */
			found->next = P->paths;
			P->paths = found;
			return found;
		}
	if (!make)
		return NULL;
	struct ppath *n = points_must(calloc(1, sizeof *n));
	n->path = points_must(strdup(path));
	n->kind = kind;
	n->seen = points_must(calloc(P->S->nslots, sizeof *n->seen));
	n->next = P->paths;
	P->paths = n;
	return n;
}

/* What pp's points are, in lines. */
const char *points_call_name(const struct ppath *pp)
{
	return pp->kind == RENAME ? "rename" : pp->kind == REMOVAL ? "removal" : "sync";
}

/* r's file differs at point m of pp from the version committed there: it
 * is outvoted, not killed. What a file holds at a sync can depend on when
 * the sync came (a timer's, a thread's), which differs between replicas
 * that are all correct; the end's vote, or the output's, judges the
 * replica. */
static void outvoted(struct points *P, const struct replica *r, const struct ppath *pp, uint64_t m, const char *what)
{
	P->outvoted++;
	log_event("replica %u's file %s at its %s %llu differs from the version committed there (%s): outvoted at "
		  "that point, it goes on (the end's vote judges it)",
		  r->id, pp->path, points_call_name(pp), (unsigned long long)m + 1, what);
}

/* The real file a point just made at path is remembered as this run's. */
void points_remember_real(struct points *P, const struct changes *ch, const char *path)
{
	struct stat st;
	struct ppath *sp = points_path(P, path, SYNC, true);
	if (changes_real_id(ch, path, &sp->made, &st) != 0 || !S_ISREG(st.st_mode))
		sp->made.type = 0;
}

/* The fsuid of thread tid (as diehard's user namespace sees it), or -1. */
static long fsuid_of(pid_t tid)
{
	char status[4096];
	long r, e, sv, fs;
	const char *uid = remote_status(tid, status, sizeof status) == 0 ? strstr(status, "\nUid:") : NULL;
	return uid != NULL && sscanf(uid, "\nUid: %ld %ld %ld %ld", &r, &e, &sv, &fs) == 4 ? fs : -1;
}

/* Whether a point of slot's replica (thread tid) may replace the real
 * file at path, the one *id (type 0: nothing there) names: nothing there;
 * the file a point of this run made; the file the replica's own copy was
 * made from (its overlay origin); or one its fsuid owns (or root's
 * rights). Not another's that came after the replica looked (overlayfs
 * keeps a name it found missing: the replica made its own, and had no
 * right to the other's). */
bool points_may_replace(struct points *P, const struct changes *ch, const char *path, pid_t tid, struct file_id *id)
{
	struct stat st;
	int err = changes_real_id(ch, path, id, &st);
	if (err == ENOENT) {
		id->type = 0;
		return true;
	}
	if (err != 0 || !S_ISREG(st.st_mode))
		return false;
	struct ppath *sp = points_path(P, path, SYNC, false);
	struct file_id origin;
	if ((sp != NULL && changes_same_id(id, &sp->made)) ||
	    (changes_origin_id(ch, path, &origin) == 0 && changes_same_id(id, &origin)))
		return true;
	long fsuid = fsuid_of(tid);
	return fsuid == 0 || (fsuid > 0 && (uid_t)fsuid == st.st_uid);
}

/* Whether the real file at path is still the one id names (type 0:
 * still nothing there). */
bool points_still(const struct changes *ch, const char *path, const struct file_id *id)
{
	struct file_id now;
	struct stat st;
	int err = changes_real_id(ch, path, &now, &st);
	return id->type == 0 ? err == ENOENT : err == 0 && changes_same_id(&now, id);
}

/* Commits w's version of pp's path: the directories above it the real
 * tree lacks (from the upper layer of dirs_from's replica) and the file
 * (from w->src, its copy checked against the version voted). The start's
 * version kept first (pre.h). 0, or an errno (said). */
int points_commit_version(struct points *P, const struct ppath *pp, const struct waiter *w, unsigned dirs_from)
{
	const struct changes *ch = P->S->r[dirs_from].changes;
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
			char *dir = points_must(strndup(path, (size_t)(s - path)));
			char *up = NULL;
			struct stat real, st;
			if (lstat(dir, &real) == 0 || errno != ENOENT || asprintf(&up, "v%d/u/%s", v, dir + rel) < 0 ||
			    changes_layer_stat(ch, up, &st) != 0 || !S_ISDIR(st.st_mode)) {
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
			c.uid = w->v.uid; /* the owner voted */
			c.gid = w->v.gid;
			/* A sync's file keeps its real inode (changes.h): the very
			 * file the call found. */
			c.in_place = pp->kind == SYNC && w->real_id.type != 0;
			c.expect = &w->real_id;
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
				       .user_xattrs = ch->user_xattrs, .root = ch->root, .verify = &P->S->dkey,
				       .keep_dirs = true };
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
void points_done(struct points *P, struct ppath *pp, const struct version *v)
{
	if (pp->ndone < DONE_MAX) {
		if (pp->ndone == pp->cap) {
			pp->cap = pp->cap ? 2 * pp->cap : 4;
			pp->done = points_must(realloc(pp->done, pp->cap * sizeof *pp->done));
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
void points_unsettle(struct points *P, struct ppath *pp, uint64_t m, const char *why)
{
	struct sup *S = P->S;
	P->unsettled++;
	pp->behind = true;
	log_event("%s: its %s %llu goes on uncommitted: %s", pp->path, points_call_name(pp), (unsigned long long)m + 1,
		  why);
	pp->probe = NULL;
	struct version none = { .size = NO_VERSION };
	points_done(P, pp, &none);
	for (struct waiter **w = &pp->wait; *w != NULL;) {
		struct waiter *a = *w;
		if (a->m != m) {
			w = &a->next;
			continue;
		}
		*w = a->next;
		if (points_waiter_valid(S, a) && !a->continued)
			virt_resume(S->virt, a->slot, a->gen, a->id, 0);
		waiter_free(P, a);
	}
}

/* Whether slot i's process has a call held at point m of pp. */
static bool held_at(const struct points *P, const struct ppath *pp, uint64_t m, unsigned i)
{
	for (const struct waiter *w = pp->wait; w != NULL; w = w->next)
		if (w->slot == i && w->m == m && w->rid == P->S->r[i].id)
			return true;
	return false;
}

/* The participants whose views would show a commit of pp's real path:
 * no view of theirs hides it (changes.h's masks; being at a sync is no
 * proof: another thread may have moved the file since). A rename's: the
 * old name from too, but a replica held at the rename (its own rename
 * puts its file in the name's place before it goes on). *first one of
 * them, if any. */
unsigned points_exposed(struct points *P, const struct ppath *pp, uint64_t m, const char *from, struct replica **first)
{
	struct sup *S = P->S;
	unsigned n = 0;
	*first = NULL;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (!replica_in_run(r) || (pp->kind != SYNC && held_at(P, pp, m, i)) ||
		    (r->changes != NULL && changes_masks(r->changes, pp->path) &&
		     (from == NULL || changes_masks(r->changes, from))))
			continue;
		if (n++ == 0)
			*first = r;
	}
	return n;
}

/* Answers every call held at point m of pp, decided with version v: one
 * of another version is outvoted there; those of v get err (a sync that
 * could not be committed: EIO). The probe went on already. */
void points_answer(struct points *P, struct ppath *pp, uint64_t m, const struct version *v, int err)
{
	struct sup *S = P->S;
	for (struct waiter **w = &pp->wait; *w != NULL;) {
		struct waiter *a = *w;
		if (a->m != m) {
			w = &a->next;
			continue;
		}
		*w = a->next;
		bool same = points_same_version(&a->v, v);
		if (!same)
			outvoted(P, &S->r[a->slot], pp, m, how_differs(&a->v, v));
		if (!a->continued)
			virt_resume(S->virt, a->slot, a->gen, a->id, same ? err : 0);
		waiter_free(P, a);
	}
	pp->probe = NULL;
}

/* Decides pp's next points while one can be: committed when a quorum of
 * voters agrees on its version and no participant's views would show the
 * real path change (overlayfs keeps a directory's layers as it first
 * looked them up, so the start-state layer only serves views made after:
 * a replica whose upper layer lacks the path would see the commit);
 * unsettled when no quorum can form any more. The calls of a committed
 * point return (EIO when it could not be committed), those of another
 * version too, outvoted. A rename's point is decided by its probe's
 * outcome (probe_start). */
void points_decide(struct points *P, struct ppath *pp)
{
	struct sup *S = P->S;
	while (!S->stopping) {
		/* Calls of processes that are gone or out of the vote. */
		for (struct waiter **w = &pp->wait; *w != NULL;) {
			if (points_waiter_valid(S, *w)) {
				w = &(*w)->next;
				continue;
			}
			struct waiter *dead = *w;
			*w = dead->next;
			if (dead == pp->probe)
				pp->probe = NULL;
			waiter_free(P, dead);
		}
		if (pp->probe != NULL)
			return; /* probe_check decides */
		uint64_t m = pp->ndone;
		struct waiter *best = NULL;
		unsigned best_n = 0, coming = 0;
		/* The voters that may still come to m: not there, and not past
		 * it (a count moved ahead, a late check: its call m was made). */
		for (unsigned i = 0; i < S->nslots; i++) {
			bool there = false;
			for (const struct waiter *a = pp->wait; a != NULL && !there; a = a->next)
				there = a->slot == i && a->m == m;
			coming += S->r[i].live && !there && pp->seen[i] <= m;
		}
		for (struct waiter *a = pp->wait; a != NULL; a = a->next) {
			if (a->m != m || !points_waiter_votes(S, a))
				continue;
			unsigned same = 0;
			for (const struct waiter *b = pp->wait; b != NULL; b = b->next)
				same += b->m == m && points_waiter_votes(S, b) && points_same_version(&a->v, &b->v);
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
			if (best_n + coming < sup_quorum(S))
				points_unsettle(P, pp, m, "the voters' files differ there, no quorum");
			return;
		}
		/* A rename's old name matters when the real tree has it (the
		 * commit takes it away). */
		const char *from = best->from != NULL && changes_real_kind(S->r[best->slot].changes, best->from) > 0
					   ? best->from
					   : NULL;
		struct replica *show;
		if (points_exposed(P, pp, m, from, &show) > 0) {
			/* The tick kills it as a straggler after --timeout. */
			if (pp->quorum_since == 0)
				pp->quorum_since = sup_now();
			free(pp->quorum_from);
			pp->quorum_from = from != NULL ? points_must(strdup(from)) : NULL;
			return;
		}
		if (pp->kind != SYNC) {
			probe_start(P, pp, best);
			continue; /* unsettled at once, or waits for the probe */
		}
		struct version v = best->v;
		/* From the quorum's replicas in turn, each whose file still has
		 * the size voted: one that wrote on after its sync fails the
		 * copy's check (commit.h's verify). None left: skipped. */
		int err = ESTALE;
		for (const struct waiter *a = pp->wait; a != NULL && err != 0; a = a->next) {
			struct stat now;
			/* The real file as that replica's call found it. */
			if (a->m == m && points_waiter_votes(S, a) && points_same_version(&a->v, &v) &&
			    fstat(a->src, &now) == 0 && now.st_size == v.size && points_still(S->r[a->slot].changes, pp->path, &a->real_id))
				err = points_commit_version(P, pp, a, a->slot);
		}
		pp->behind = err != 0;
		if (err == 0) {
			P->committed++;
			points_caught_up(P, pp->path);
			points_remember_real(P, S->r[best->slot].changes, pp->path);
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
		points_done(P, pp, &v);
		points_answer(P, pp, m, &v, err != 0 ? EIO : 0);
	}
}

/* Slot slot reached a point of path (a rename onto it, or a sync) with
 * w's version (w made by the caller: its version, src, and a rename's
 * fields; taken). true: the call is held. */
bool points_arrive(struct points *P, unsigned slot, uint64_t gen, uint64_t id, const char *path, enum kind kind,
		   struct waiter *w)
{
	struct sup *S = P->S;
	struct replica *r = &S->r[slot];
	struct ppath *pp = points_path(P, path, kind, true);
	uint64_t m = pp->seen[slot]++;
	const struct version *v = &w->v;
	if (m < pp->ndone) {
		/* Decided: a late replica, or a replacement replaying. */
		bool kept = m < DONE_MAX && pp->done[m].size != NO_VERSION;
		if (kept && points_same_version(&pp->done[m], v)) {
			P->late_checked++;
			report_counts(P);
			points_waiter_drop(w);
			return false;
		}
		/* A voter whose count fell behind the others' (a timer's syncs):
		 * the version it has is that of a later point it passed, on
		 * that evidence only; else the point is used up here, its
		 * version outvoted (never moved ahead to the next point: that
		 * count would stay off for good). */
		for (uint64_t k = m + 1; r->live && k < pp->ndone && k < DONE_MAX && k < m + 64; k++)
			if (pp->done[k].size != NO_VERSION && points_same_version(&pp->done[k], v)) {
				pp->seen[slot] = k + 1;
				P->late_checked++;
				report_counts(P);
				points_waiter_drop(w);
				return false;
			}
		if (kept) {
			P->late_checked++;
			outvoted(P, r, pp, m, how_differs(v, &pp->done[m]));
			report_counts(P);
		}
		points_waiter_drop(w);
		return false;
	}
	P->held[slot]++;
	w->slot = slot;
	w->rid = r->id;
	w->gen = gen;
	w->id = id;
	w->m = m;
	w->since = sup_now();
	w->next = pp->wait;
	pp->wait = w;
	points_decide(P, pp);
	return true;
}

/* Whether a replica may hold one more call (else its syncs go on
 * unvoted, said once). */
bool points_room(struct points *P, unsigned slot)
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
	char real[4096];
	if (!points_room(P, slot))
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
	struct waiter *w = points_must(calloc(1, sizeof *w));
	w->src = in;
	w->tid = (pid_t)req->pid;
	/* Not a real file the replica may not replace (may_replace): the end
	 * judges it. */
	if (!points_version_of(P, in, &w->v) || !points_may_replace(P, r->changes, real, w->tid, &w->real_id)) {
		points_waiter_drop(w);
		return false;
	}
	return points_arrive(P, slot, gen, req->id, real, SYNC, w);
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
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2: return probe_rename(P, slot, gen, req);
	case SYS_unlink:
	case SYS_unlinkat: return probe_unlink(P, slot, gen, req);
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
			if (points_waiter_valid(P->S, w) && !w->continued)
				virt_resume(P->S->virt, w->slot, w->gen, w->id, 0);
			waiter_free(P, w);
		}
		pp->probe = NULL;
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
			there = w->slot == i && w->rid == r->id && w->m == m && !w->continued;
		/* Past m on this path: its call m was made (and answered). */
		elsewhere = !there && pp->seen[i] > m;
		for (const struct ppath *q = P->paths; q != NULL && !there && !elsewhere; q = q->next)
			for (const struct waiter *w = q->wait; w != NULL && !elsewhere; w = w->next)
				elsewhere = w->slot == i && w->rid == r->id && !w->continued && (q != pp || w->m != m);
		if (!there && !elsewhere)
			return false;
	}
	return true;
}

/* --timeouts a point waits for a voter that runs on (points_tick). */
#define RUNS_ON 6

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
		if (pp->probe != NULL) {
			(void)probe_check(P, pp); /* the timer's, if it could not be armed */
			continue;
		}
		/* A replica that ended or was killed since is no longer
		 * waited for. */
		points_decide(P, pp);
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
			const char *from = pp->kind == RENAME ? pp->quorum_from : NULL;
			while (!S->stopping && points_exposed(P, pp, m, from, &r) > 0) {
				char why[256];
				snprintf(why, sizeof why, "straggler: no file %s of its own %.1f s after a quorum %s it (its %s %llu)",
					 pp->path, limit,
					 pp->kind == RENAME    ? "renamed a file onto"
					 : pp->kind == REMOVAL ? "removed"
							       : "synced",
					 points_call_name(pp),
					 (unsigned long long)m + 1);
				replica_kill(S, r, why);
			}
			pp->quorum_since = 0;
			points_decide(P, pp);
		} else if (now - old->since > limit && (others_held(P, pp, m) || now - old->since > RUNS_ON * limit)) {
			/* No quorum within --timeout, and every voter not there
			 * waits at another point: none can come (syncs in
			 * another order in each replica). A voter that runs on is
			 * waited for: a slow one comes, and one that never does
			 * is a straggler of the output; but not for good: the
			 * program may have taken another way in it (redis
			 * answers a SAVE with an error in a replica whose
			 * BGSAVE's child is not reaped yet), and the calls held
			 * would hold their clients for good. After RUNS_ON times
			 * --timeout they go on, unsettled (the end, or a later
			 * point, commits what they wrote). */
			bool held = others_held(P, pp, m);
			char why[160];
			snprintf(why, sizeof why, "no quorum within %.1f s (every other replica %s)",
				 held ? limit : RUNS_ON * limit, held ? "waits at another point" : "runs on without it");
			points_unsettle(P, pp, m, why);
			points_decide(P, pp);
		}
	}
}

