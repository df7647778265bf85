/* probe.c — renames and removals as commit points (points.h), decided by
 * a probe: see points_int.h for what it shares with points.c.
 *
 * A rename or an unlink that would make a change visible is held like a
 * sync (points_arrive), but its version is no proof that the kernel would
 * let it happen: rights, a sticky directory, a name gone, RENAME_NOREPLACE
 * are judged by the kernel in each replica's views. So once a quorum holds
 * the same call and nobody is exposed, one of them (the probe) goes on
 * alone with SECCOMP_USER_NOTIF_FLAG_CONTINUE, and its outcome is read
 * from its upper layer: the new name holding the inode the old name had
 * (the old a whiteout, nothing, or a new file), or the removed name gone;
 * /proc/TID/syscall past the call with the layer unchanged is a refusal.
 * The look is a timer: 50 us after the probe goes on (the kernel's call
 * takes tens of microseconds, and the quorum waits), doubling to 2 ms,
 * and the tick; no outcome within --timeout lets the point go on
 * unsettled. Made, the real tree gets it (the bytes voted at the new name,
 * written beside and renamed, if the real one is still the file the call
 * found; the old or removed name unlinked only if it is still the file a
 * point of this run made, never a directory), then the others go on.
 *
 * Nothing real is read or kept before the kernel has judged: a rename onto
 * another user's large file costs nothing when refused. */
#include "points_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "logs.h"
#include "named.h"
#include "pidfile.h"
#include "pre.h"
#include "remote.h"
#include "sup.h"
#include "virt.h"

/* Whether the real file at path is the one a point of this run made (a
 * file another put there since, or one the run started with, is not).
 * The only real file a rename's old name or a removal takes away: the
 * kernel judged the replica's removal of its own file, which has rights
 * of its own (another user's file appearing there later has others). */
static bool ours(struct points *P, const struct changes *ch, const char *path, struct file_id *id)
{
	struct ppath *sp = points_path(P, path, SYNC, false);
	struct stat st;
	return sp != NULL && changes_real_id(ch, path, id, &st) == 0 && S_ISREG(st.st_mode) &&
	       changes_same_id(id, &sp->made);
}

/* Removes the real file at path if it is still this run's (ours): never a
 * directory, nothing followed; its directory synced. 0 (also when it is
 * gone), EEXIST when another file is there now, or an errno. */
static int remove_real(struct points *P, const struct changes *ch, const char *path, const struct file_id *expect)
{
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	const char *name;
	if (v < 0)
		return EXDEV;
	int dir = changes_open_real_parent(ch->targets[v], path, &name);
	if (dir < 0)
		return errno == ENOENT ? 0 : errno;
	struct ppath *sp = points_path(P, path, SYNC, false);
	struct stat st;
	struct file_id id;
	int err = 0;
	int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		err = errno == ENOENT ? 0 : errno;
	else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || changes_fd_id(fd, &id) != 0 || expect == NULL ||
		 !changes_same_id(&id, expect))
		err = EEXIST;
	else if ((err = pre_keep(P->pre, ch->targets[v], path)) == 0 && unlinkat(dir, name, 0) != 0)
		err = errno;
	else if (err == 0 && fsync(dir) != 0)
		log_warn("cannot sync the directory of %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (err == 0 && sp != NULL && expect != NULL && changes_same_id(&sp->made, expect))
		sp->made.type = 0;
	close(dir);
	return err;
}

/* The probes' timer: soon after a probe starts (a rename or an unlink
 * takes the kernel tens of microseconds, and every replica of the quorum
 * waits for its outcome), then less often, so that a probe that takes
 * long (a slow disk, a loaded machine) costs diehard a look every
 * PROBE_LAST_US. */
static void probe_arm(struct points *P, bool started)
{
	if (started)
		P->probe_us = PROBE_FIRST_US;
	else if (evtimer_pending(P->probe_ev, NULL))
		return;
	struct timeval soon = { .tv_sec = 0, .tv_usec = P->probe_us };
	P->probe_us = P->probe_us * 2 < PROBE_LAST_US ? P->probe_us * 2 : PROBE_LAST_US;
	if (evtimer_add(P->probe_ev, &soon) != 0)
		log_warn("cannot arm the rename probes' timer: the tick looks at them");
}

/* A quorum agreed on a rename onto pp's path (or a removal of it), and
 * nobody would see it early: one of them (a) goes on first, alone, and
 * the kernel judges its call in its views (rights, RENAME_NOREPLACE, a
 * name gone); its outcome decides the point (probe_check). No quorum of
 * replicas is past the call before that outcome is committed, so nothing
 * they say after it reaches the world first. Nothing real is read or
 * kept before the kernel has judged (pre.h's copy of a file the replica
 * may not replace would cost its size). */
void probe_start(struct points *P, struct ppath *pp, struct waiter *a)
{
	struct sup *S = P->S;
	const struct changes *ch = S->r[a->slot].changes;
	int to = changes_real_kind(ch, pp->path), from = a->from != NULL ? changes_real_kind(ch, a->from) : 0;
	if (to < 0 || from < 0 || (pp->kind == REMOVAL && to == 0)) {
		points_unsettle(P, pp, pp->ndone, "its names in the real tree are no plain files now");
		return;
	}
	a->continued = true;
	a->since = sup_now();
	pp->probe = a;
	pp->quorum_since = 0;
	virt_resume(S->virt, a->slot, a->gen, a->id, 0);
	probe_arm(P, true);
}

/* Commits the rename its probe a made in its views: the name gets the
 * bytes voted (from a's file, renamed there, or another of the quorum's
 * held ones: the same bytes), with the directories above it the real tree
 * lacks as a's upper layer has them, and the old name, when the real tree
 * has it, goes. The calls held go on either way: a rename promises no
 * durability, and the probe's already returned. */
static void commit_rename(struct points *P, struct ppath *pp, struct waiter *a)
{
	struct sup *S = P->S;
	uint64_t m = pp->ndone;
	struct version v = a->v;
	const struct changes *ch = S->r[a->slot].changes;
	/* The real new name as the probe's call found it (the same file, or
	 * still nothing): what the kernel judged there. */
	int err = points_still(ch, pp->path, &a->real_id) ? ESTALE : EXDEV;
	struct stat now;
	if (err == ESTALE && fstat(a->src, &now) == 0 && now.st_size == v.size)
		err = points_commit_version(P, pp, a, a->slot);
	for (struct waiter *w = pp->wait; w != NULL && err == ESTALE; w = w->next)
		if (w != a && w->m == m && points_waiter_votes(S, w) && points_same_version(&w->v, &v) &&
		    fstat(w->src, &now) == 0 && now.st_size == v.size)
			err = points_commit_version(P, pp, w, a->slot);
	if (err == 0) {
		P->committed++;
		P->renamed++;
		points_caught_up(P, pp->path);
		points_remember_real(P, ch, pp->path);
		/* The old name goes when the real one is the file a point of
		 * this run made; another (a file put there since) is left. */
		int gone = a->gone_id.type != 0 ? remove_real(P, ch, a->from, &a->gone_id) : 0;
		if (gone != 0 && gone != EEXIST)
			log_warn("%s: its old name %s could not be removed at its rename %llu: %s", pp->path, a->from,
				 (unsigned long long)m + 1, strerror(gone));
	} else if (err == ESTALE) {
		P->skipped++;
		pp->behind = true;
		log_warn("%s: not committed at its rename %llu: the replicas wrote on while it was voted", pp->path,
			 (unsigned long long)m + 1);
	} else {
		P->failed++;
		pp->behind = true;
		if (err == EXDEV)
			log_warn("%s: not committed at its rename %llu: the real file there changed since the call", pp->path,
				 (unsigned long long)m + 1);
	}
	points_done(P, pp, &v);
	points_answer(P, pp, m, &v, 0);
}

/* Commits the removal its probe a made in its views: the real file goes
 * when it is still the one a point of this run made (remove_real). The
 * calls held go on. */
static void commit_removal(struct points *P, struct ppath *pp, struct waiter *a)
{
	uint64_t m = pp->ndone;
	int err = remove_real(P, P->S->r[a->slot].changes, pp->path, &a->gone_id);
	pp->behind = err != 0;
	if (err == 0) {
		P->committed++;
		P->removed++;
		points_caught_up(P, pp->path);
	} else {
		P->failed++;
		log_warn("%s: not committed at its removal %llu: %s", pp->path, (unsigned long long)m + 1,
			 err == EEXIST ? "another file is there now" : strerror(err));
	}
	points_done(P, pp, &a->v);
	points_answer(P, pp, m, &a->v, 0);
}

enum outcome { PENDING, MADE, FAILED };

/* Whether a's call is made in its replica's upper layer: the file renamed
 * (its inode at the new name, the old name a whiteout or nothing), or
 * removed (a whiteout, or nothing where its own file was). */
static bool made(const struct ppath *pp, const struct waiter *a, const struct changes *ch)
{
	if (pp->kind == RENAME)
		return changes_renamed(ch, a->from, pp->path, a->dev, a->ino);
	return changes_removed(ch, pp->path, a->ino);
}

/* What became of the probe a's call: seen in its upper layer, or the
 * thread past the call (/proc/TID/syscall no longer shows it waiting in
 * it) with the upper layer unchanged. */
static enum outcome probe_outcome(const struct ppath *pp, const struct waiter *a, const struct changes *ch)
{
	if (made(pp, a, ch))
		return MADE;
	char proc[64], line[512];
	snprintf(proc, sizeof proc, "/proc/%d/syscall", (int)a->tid);
	int fd = open(proc, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof line - 1);
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		line[n] = '\0';
		if (strncmp(line, "running", 7) == 0)
			return PENDING; /* in its call still, or past it: looked at again */
		long nr;
		unsigned long long arg[5];
		if (sscanf(line, "%ld %llx %llx %llx %llx %llx", &nr, &arg[0], &arg[1], &arg[2], &arg[3], &arg[4]) == 6 &&
		    nr == a->call.nr) {
			bool same = true;
			for (int i = 0; i < 5; i++)
				same = same && arg[i] == a->call.args[i];
			if (same)
				return PENDING;
		}
	} else if (fd >= 0 || errno != ENOENT) {
		return PENDING; /* unreadable: the time limit decides */
	}
	/* Past it (or gone): its effect, if any, is in the layer now. */
	return made(pp, a, ch) ? MADE : FAILED;
}

/* Whether nobody would see the commit of the probe a's call early (a
 * replica that came while it went on: a replacement, a tie-breaker). One
 * that still would --timeout after it is killed as a straggler; false
 * while it is waited for, or when a's process went meanwhile. */
static bool unexposed(struct points *P, struct ppath *pp, struct waiter *a)
{
	struct sup *S = P->S;
	uint64_t m = pp->ndone;
	double limit = S->o->straggler_ms / 1000.0;
	const char *from =
		a->from != NULL && changes_real_kind(S->r[a->slot].changes, a->from) > 0 ? a->from : NULL;
	struct replica *show;
	if (points_exposed(P, pp, m, from, &show) == 0) {
		pp->quorum_since = 0;
		return true;
	}
	if (pp->quorum_since == 0)
		pp->quorum_since = sup_now();
	if (sup_now() - pp->quorum_since <= limit)
		return false;
	while (!S->stopping && points_exposed(P, pp, m, from, &show) > 0) {
		char why[256];
		snprintf(why, sizeof why, "straggler: no file %s of its own %.1f s after a quorum's %s of it", pp->path,
			 limit, points_call_name(pp));
		replica_kill(S, show, why);
	}
	pp->quorum_since = 0;
	return !S->stopping && points_waiter_valid(S, a);
}

/* The probe of pp's next point: its outcome, once known, decides the
 * point; one not known --timeout after it went on lets the point go on
 * uncommitted. true while it is still awaited. */
bool probe_check(struct points *P, struct ppath *pp)
{
	struct sup *S = P->S;
	struct waiter *a = pp->probe;
	uint64_t m = pp->ndone;
	char why[160];
	if (!points_waiter_valid(S, a)) {
		points_decide(P, pp); /* its process is gone: another goes */
		return pp->probe != NULL;
	}
	const struct replica *r = &S->r[a->slot];
	switch (probe_outcome(pp, a, r->changes)) {
	case PENDING:
		if (sup_now() - a->since <= S->o->straggler_ms / 1000.0)
			return true;
		snprintf(why, sizeof why, "what became of replica %u's %s was not seen within %.1f s", r->id,
			 points_call_name(pp), S->o->straggler_ms / 1000.0);
		points_unsettle(P, pp, m, why);
		break;
	case FAILED:
		snprintf(why, sizeof why, "it failed in replica %u's views (the kernel's answer there)", r->id);
		points_unsettle(P, pp, m, why);
		break;
	case MADE:
		/* What the kernel let the replica do in its views holds for
		 * the real tree only if the directories it checked are the
		 * real ones (no copy of the replica's making). */
		if (!changes_dirs_real(r->changes, pp->path) || (a->from != NULL && !changes_dirs_real(r->changes, a->from))) {
			snprintf(why, sizeof why, "the directories above it in replica %u's views are not the real ones",
				 r->id);
			points_unsettle(P, pp, m, why);
			break;
		}
		if (!unexposed(P, pp, a))
			return pp->probe != NULL;
		if (pp->kind == RENAME)
			commit_rename(P, pp, a);
		else
			commit_removal(P, pp, a);
		break;
	}
	points_decide(P, pp);
	return pp->probe != NULL;
}

void probe_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct points *P = arg;
	bool again = false;
	for (struct ppath *pp = P->paths; pp != NULL && !P->S->stopping; pp = pp->next)
		if (pp->probe != NULL)
			again |= probe_check(P, pp);
	if (again)
		probe_arm(P, false);
}

/* A cheap hash of a rename's old name, for its version. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h | 1; /* never 0, a sync's */
}

/* rename, renameat, renameat2 (RENAME_NOREPLACE or no flag): a point when
 * both names lie in one view (not a --share'd directory, no stream), the
 * replica's file at the old name is one of its upper layer (one it made
 * or changed), both names are nothing or a regular file in the real tree
 * and one of them is there: a file put in place of a real one, or one a
 * sync made real moved to its name. The names are read from the replica
 * and trusted only as far as its upper layer shows the rename made
 * (probe_check). */
bool probe_rename(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	const struct replica *r = &P->S->r[slot];
	const __u64 *arg = req->data.args;
	bool at = req->data.nr != SYS_rename;
	int from_dir = at ? (int)(int32_t)arg[0] : AT_FDCWD, to_dir = at ? (int)(int32_t)arg[2] : AT_FDCWD;
	uint64_t from_at = at ? arg[1] : arg[0], to_at = at ? arg[3] : arg[1];
	unsigned flags = req->data.nr == SYS_renameat2 ? (unsigned)arg[4] : 0;
	char name[4096], from[4096], to[4096];
	pid_t tid = (pid_t)req->pid;
	/* RENAME_NOREPLACE is no point: once the real name is made, a
	 * replica held at the same call that never looked it up would find
	 * it there and fail. */
	if (flags != 0 || !points_room(P, slot))
		return false;
	if (remote_read_string(tid, from_at, name, sizeof name) != 0 || !named_path(tid, from_dir, name, from, sizeof from))
		return false;
	if (remote_read_string(tid, to_at, name, sizeof name) != 0 || !named_path(tid, to_dir, name, to, sizeof to))
		return false;
	size_t rel_from, rel_to;
	int v = changes_view_of(r->changes, to, &rel_to);
	if (v < 0 || changes_view_of(r->changes, from, &rel_from) != v || strcmp(from, to) == 0 ||
	    strchr(from, '\n') != NULL || strchr(to, '\n') != NULL || logs_streamed(P->logs, from) ||
	    logs_streamed(P->logs, to))
		return false;
	/* A pid file put in place by a rename: pidfile.h makes it real with
	 * diehard's pid. */
	size_t tl = strlen(to);
	if (tl > 4 && strcmp(to + tl - 4, ".pid") == 0) {
		pidfile_creating(P->pids, slot, tid, AT_FDCWD, to);
		return false;
	}
	/* The new name: nothing, or a file the replica may replace; the old
	 * one: nothing, or the file a point of this run made (kept: only
	 * that one is taken away), or another's, left. One of them real. */
	struct file_id to_id, gone_id = { 0 };
	int real_from = changes_real_kind(r->changes, from);
	if (!points_may_replace(P, r->changes, to, tid, &to_id) || real_from < 0 || (to_id.type == 0 && real_from == 0))
		return false;
	if (real_from > 0 && !ours(P, r->changes, from, &gone_id))
		gone_id.type = 0;
	int in = changes_open_version(r->changes, from);
	if (in < 0)
		return false;
	struct waiter *w = points_must(calloc(1, sizeof *w));
	w->src = in;
	struct stat st;
	if (fstat(in, &st) != 0 || !points_version_of(P, in, &w->v)) {
		points_waiter_drop(w);
		return false;
	}
	w->v.from = name_hash(from);
	w->from = points_must(strdup(from));
	w->tid = tid;
	w->call = req->data;
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	w->real_id = to_id;
	w->gone_id = gone_id;
	return points_arrive(P, slot, gen, req->id, to, RENAME, w);
}

/* unlink, unlinkat (no flag): a point when the name lies in a view (not a
 * --share'd directory, no stream), the replica has its own file there, and
 * the real one is the file a point of this run made (a database's journal
 * a sync made real; ours).
 * Every removal of the name agrees with every other: the version is the
 * name alone. */
bool probe_unlink(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	const struct replica *r = &P->S->r[slot];
	const __u64 *arg = req->data.args;
	bool at = req->data.nr == SYS_unlinkat;
	char name[4096], path[4096];
	pid_t tid = (pid_t)req->pid;
	if ((at && arg[2] != 0) || !points_room(P, slot))
		return false;
	if (remote_read_string(tid, at ? arg[1] : arg[0], name, sizeof name) != 0 ||
	    !named_path(tid, at ? (int)(int32_t)arg[0] : AT_FDCWD, name, path, sizeof path))
		return false;
	size_t rel;
	struct file_id gone_id;
	if (changes_view_of(r->changes, path, &rel) < 0 || strchr(path, '\n') != NULL || logs_streamed(P->logs, path))
		return false;
	/* Its own file there: one a replica that never had it (only the
	 * real one, through its lower layers) could not remove once the
	 * real one is gone, so such a removal is left to the end. */
	int in = changes_open_version(r->changes, path);
	struct stat st;
	if (in < 0 || fstat(in, &st) != 0) {
		if (in >= 0)
			close(in);
		return false;
	}
	close(in);
	if (!ours(P, r->changes, path, &gone_id)) {
		/* A replica behind the others removes its own file after a
		 * quorum's point took the real one away: it reached that
		 * point, late (every removal of a name agrees). Uncounted, it
		 * would stay a point behind for good, and the others would
		 * wait for it at the next one in vain. */
		struct ppath *pp = points_path(P, path, REMOVAL, false);
		if (pp != NULL && pp->seen[slot] < pp->ndone) {
			pp->seen[slot]++;
			P->late_checked++;
		}
		return false;
	}
	struct waiter *w = points_must(calloc(1, sizeof *w));
	w->src = -1;
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	w->gone_id = gone_id;
	w->v.from = 1;
	w->tid = tid;
	w->call = req->data;
	return points_arrive(P, slot, gen, req->id, path, REMOVAL, w);
}
