/* files.c — see files.h: the supervisor's side of the file views. */
#include "files.h"

#include <errno.h>
#include <jansson.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "changes.h"
#include "commit.h"
#include "exitcode.h"
#include "log.h"
#include "logs.h"
#include "pidfile.h"
#include "points.h"
#include "pre.h"
#include "report.h"
#include "sandbox.h"
#include "sup.h"
#include "supervisor.h"
#include "view.h"

#include "ci.h"

struct files {
	bool private;          /* views are made */
	struct view_plan plan;
	char *cwd;
	bool said_unviewed;
	json_t *rep;           /* the report's "files" object */
	struct points *points; /* commit points (points.h), or NULL */
	struct logs *logs;     /* append-only files (logs.h), or NULL */
	struct pidfiles *pids; /* pid files (pidfile.h), or NULL */
	struct pre *pre;       /* their start-state layer (pre.h), or NULL */
	struct pre **layer;    /* per slot: its process's epoch layer (--durable), or NULL: pre's */
	struct view_plan *slot_plan; /* per slot: the plan with that layer */
};

static char *keep_dirs[VIEW_KEEP_MAX];
static unsigned nkeep;

void files_keep(const char *dir)
{
	if (dir == NULL || nkeep == VIEW_KEEP_MAX)
		return;
	char *d = realpath(dir, NULL);
	if (d != NULL)
		keep_dirs[nkeep++] = d;
}

static json_t *must(json_t *j)
{
	if (j == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return j;
}

/* dir added to the plan's directories once, resolved (a symlinked $HOME
 * is viewed where it really is). */
static void add_dir(struct view_plan *p, unsigned *n, const char *dir)
{
	if (dir == NULL || dir[0] != '/' || *n + 1 >= VIEW_MAX)
		return;
	char *real = realpath(dir, NULL);
	if (real == NULL)
		return;
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(p->dirs[i], real) == 0) {
			free(real);
			return;
		}
	p->dirs[(*n)++] = real;
}

/* A replay's start-state layer, from the run that searches (ci.c): a
 * directory of ours, 0700, where pre.c makes them; else none. */
static const char *replay_layer(void)
{
	const char *l = getenv(FILES_START_LAYER_VAR);
	if (l == NULL || strncmp(l, "/dev/shm/diehard-pre-", 21) != 0 || strchr(l + 21, '/') == NULL ||
	    strcmp(strchr(l + 21, '/'), "/r") != 0)
		return NULL;
	/* Both of its own components: directories of ours, no link. */
	char dir[96];
	snprintf(dir, sizeof dir, "%.*s", (int)(strchr(l + 21, '/') - l), l);
	struct stat a, b;
	if (lstat(dir, &a) != 0 || !S_ISDIR(a.st_mode) || a.st_uid != geteuid() || (a.st_mode & 077) != 0 ||
	    lstat(l, &b) != 0 || !S_ISDIR(b.st_mode) || b.st_uid != geteuid())
		return NULL;
	return l;
}

void files_init(struct sup *S)
{
	struct files *F = calloc(1, sizeof *F);
	if (F == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	S->files = F;
	F->rep = must(json_object());
	report_attach(S->report, "files", F->rep);
	bool mount_ns = (S->ns_flags & CLONE_NEWNS) != 0;
	F->private = S->o->files == FILES_PRIVATE && mount_ns;
	const char *why = S->o->files == FILES_SHARED ? "--files shared" : !mount_ns ? "no mount namespace" : NULL;
	json_object_set_new(F->rep, "mode", must(json_string(F->private ? "private" : "shared")));
	if (why != NULL)
		json_object_set_new(F->rep, "why_shared", must(json_string(why)));
	if (!F->private) {
		if (S->o->files_given && S->o->files == FILES_PRIVATE)
			log_warn("files are shared by the replicas: %s (--sandbox off, or the kernel refused the namespaces)",
				 why);
		return;
	}
	json_t *shared = must(json_array());
	for (unsigned i = 0; i < S->o->nshare; i++) {
		files_keep(S->o->share[i]);
		json_array_append_new(shared, must(json_string(S->o->share[i])));
	}
	json_object_set_new(F->rep, "shared", shared);
	F->layer = calloc(S->nslots, sizeof *F->layer);
	F->slot_plan = calloc(S->nslots, sizeof *F->slot_plan);
	if (F->layer == NULL || F->slot_plan == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	if (files_points_wanted(S) && (F->pre = pre_new()) != NULL) {
		F->logs = logs_new(S, F->rep, F->pre);
		F->pids = pidfile_new(S, F->rep, F->pre);
		F->points = points_new(S, F->rep, F->pre, F->logs, F->pids);
		F->plan.pre = pre_root(F->pre);
	} else if (S->o->replay != NULL) {
		F->plan.pre = replay_layer();
	}
	F->cwd = getcwd(NULL, 0);
	F->plan.cwd = F->cwd;
	F->plan.start = (long long)time(NULL);
	F->plan.whole = !(sandbox_init_flags(S->ns_flags) & CLONE_NEWUSER);
	/* The directories too: where the whole tree cannot be viewed (a root
	 * that is not the host's), its init views them instead (view.c). */
	unsigned n = 0;
	add_dir(&F->plan, &n, F->cwd);
	add_dir(&F->plan, &n, getenv("HOME"));
	add_dir(&F->plan, &n, getenv("TMPDIR"));
	add_dir(&F->plan, &n, "/tmp");
	add_dir(&F->plan, &n, "/var/tmp");
	add_dir(&F->plan, &n, getenv("XDG_RUNTIME_DIR"));
	add_dir(&F->plan, &n, getenv("STATE_DIRECTORY"));
	add_dir(&F->plan, &n, getenv("CACHE_DIRECTORY"));
	add_dir(&F->plan, &n, getenv("LOGS_DIRECTORY"));
	F->plan.dirs[n] = NULL;
}

bool files_points_wanted(const struct sup *S)
{
	return S->o->files == FILES_PRIVATE && (S->ns_flags & CLONE_NEWNS) && S->o->replay == NULL &&
	       S->virt != NULL;
}

const char *files_start_layer(const struct sup *S)
{
	return S->files != NULL ? pre_root(S->files->pre) : NULL;
}

void files_tick(struct sup *S)
{
	struct files *F = S->files;
	if (F == NULL)
		return;
	points_tick(F->points);
	logs_tick(F->logs);
	pidfile_tick(F->pids);
	/* A replacement whose layer could not keep a committed file may
	 * see that commit before it makes its own: out. */
	for (unsigned i = 0; F->layer != NULL && i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (pre_epoch_broken(F->layer[i]) && (r->live || r->joining) && !r->killed)
			replica_kill(S, r, "its layer of the committed files could not keep a file a commit changed");
	}
}

void files_end(struct sup *S)
{
	struct files *F = S->files;
	if (F == NULL)
		return;
	points_free(F->points);
	F->points = NULL;
	logs_free(F->logs);
	F->logs = NULL;
	pidfile_free(F->pids);
	F->pids = NULL;
	pre_free(F->pre);
	F->pre = NULL;
	for (unsigned i = 0; F->layer != NULL && i < S->nslots; i++)
		F->layer[i] = NULL; /* freed with pre */
}

bool files_streams_quiet(struct sup *S)
{
	return S->files == NULL || logs_quiet(S->files->logs);
}

bool files_committed_state(struct sup *S)
{
	struct files *F = S->files;
	return F != NULL && F->private && F->pre != NULL && logs_quiet(F->logs) && points_idle(F->points) &&
	       !points_behind(F->points);
}

void files_streams_rebase(struct sup *S, unsigned slot, bool force)
{
	if (S->files != NULL) {
		logs_rebase(S->files->logs, slot, force);
		points_slot_front(S->files->points, slot);
	}
}

void files_past_ended(struct sup *S, unsigned slot)
{
	if (S->files != NULL)
		logs_past_ended(S->files->logs, slot);
}

void files_appending(struct sup *S, unsigned slot, pid_t tid)
{
	if (S->files != NULL)
		logs_opening(S->files->logs, slot, tid);
}

void files_creating(struct sup *S, unsigned slot, pid_t tid, int dirfd, const char *path)
{
	if (S->files != NULL)
		pidfile_creating(S->files->pids, slot, tid, dirfd, path);
}

bool files_point(struct sup *S, unsigned slot, uint64_t gen, const struct seccomp_notif *req)
{
	struct files *F = S->files;
	return F != NULL && F->points != NULL && points_call(F->points, slot, gen, req);
}

const struct view_plan *files_plan_for(struct sup *S, unsigned slot, bool from_files)
{
	const struct view_plan *p = files_plan(S);
	struct files *F = S->files;
	if (p == NULL)
		return NULL;
	/* The slot's last process is gone: so is what its layer was for
	 * (a killed replica's changes are not read; one that ended was
	 * read as it was reaped). */
	pre_epoch_free(F->pre, F->layer[slot]);
	F->layer[slot] = NULL;
	if (!from_files || F->pre == NULL)
		return p;
	/* Its epoch begins now: what is committed later is kept in its
	 * layer as it is now, first (pre_keep). */
	struct pre *e = pre_epoch(F->pre);
	if (e == NULL)
		return p; /* said: it sees the start's versions, and will be outvoted */
	F->layer[slot] = e;
	F->slot_plan[slot] = *p;
	F->slot_plan[slot].pre = pre_root(e);
	return &F->slot_plan[slot];
}

const struct view_plan *files_plan(struct sup *S)
{
	struct files *F = S->files;
	if (F == NULL || !F->private || !(S->ns_flags & CLONE_NEWNS))
		return NULL;
	/* diehard's directories made since (the notify sockets' comes with
	 * the first replica's environment). */
	for (unsigned i = 0; i < nkeep; i++)
		F->plan.keep[i] = keep_dirs[i];
	F->plan.keep[nkeep] = NULL;
	return &F->plan;
}

char *const *files_env(struct sup *S)
{
	static char var[sizeof VIEW_DEVS_VAR + VIEW_DEVS_BYTES];
	static char *list[2] = { var, NULL };
	if (files_plan(S) == NULL)
		return NULL;
	if (var[0] == '\0') {
		memcpy(var, VIEW_DEVS_VAR "=", sizeof VIEW_DEVS_VAR);
		memset(var + sizeof VIEW_DEVS_VAR, '-', VIEW_DEVS_BYTES - 1);
	}
	return list;
}

static const char *unviewed_why(int err)
{
	return err == EBUSY	 ? "mounts beneath it"
	       : err == EINVAL	 ? "its path has ',', ':' or '\\' in it"
	       : err == ENOTDIR ? "a file mounted on its own"
				 : strerror(err);
}

void files_started(struct sup *S, struct replica *r, int fd)
{
	struct files *F = S->files;
	files_release(r);
	if (F != NULL)
		points_restart(F->points, r->index);
	if (fd < 0)
		return;
	r->changes = changes_open(fd);
	if (r->changes == NULL) {
		/* Its writes cannot be read: it agrees with nobody. */
		log_warn("cannot read replica %u's view manifest: %s", r->id, strerror(errno));
		close(fd);
		r->changes_bad = true;
		return;
	}
	if (F->said_unviewed)
		return;
	F->said_unviewed = true;
	json_t *views = must(json_array()), *un = must(json_array());
	for (size_t i = 0; i < r->changes->ntargets; i++)
		json_array_append_new(views, must(json_string(r->changes->targets[i])));
	json_object_set_new(F->rep, "viewed", views);
	json_object_set_new(F->rep, "views", must(json_string(r->changes->user_xattrs ? "directories" : "the whole tree")));
	for (size_t i = 0; i < r->changes->nun; i++) {
		const struct unviewed *u = &r->changes->un[i];
		log_warn("no view of %s for the replicas (%s): %s", u->path, unviewed_why(u->err),
			 !r->changes->user_xattrs || u->shared ? "shared by them, written by each" : "read-only in them");
		json_array_append_new(un, json_pack("{s:s,s:s}", "path", u->path, "why", unviewed_why(u->err)));
	}
	json_object_set_new(F->rep, "unviewed", un);
}

void files_ended(struct sup *S, struct replica *r)
{
	if (r->changes == NULL || r->changes_read)
		return;
	const char *where = NULL;
	struct files *F = S->files;
	logs_ended(F->logs, r->index);
	int err = changes_scan(r->changes, &S->dkey, &where);
	struct pre *layer = F->layer != NULL && F->layer[r->index] != NULL ? F->layer[r->index] : F->pre;
	if (err == 0 && (err = pre_complete(layer, r->changes, &S->dkey)) != 0)
		where = "the start-state layer";
	r->changes_read = true;
	if (err != 0) {
		/* Unreadable: it agrees with nobody. */
		log_warn("cannot read replica %u's changes at %s: %s", r->id, where != NULL ? where : "?", strerror(err));
		r->changes_bad = true;
	}
	log_event("replica %u changed %zu paths", r->id, r->changes->n);
}

void files_release(struct replica *r)
{
	changes_free(r->changes);
	r->changes = NULL;
	r->changes_read = false;
	r->changes_bad = false;
}

bool files_agree(const struct replica *a, const struct replica *b)
{
	if (a->changes_bad || b->changes_bad)
		return false;
	if (a->changes == NULL || b->changes == NULL)
		return a->changes == NULL && b->changes == NULL;
	return changes_same(a->changes, b->changes);
}

void files_divergence(struct sup *S, struct replica *r, const struct replica *maj)
{
	const char *path = "?", *what = "unreadable";
	off_t off = 0;
	if (r->changes != NULL && maj->changes != NULL && !r->changes_bad)
		(void)changes_diff(r->changes, maj->changes, &path, &off, &what);
	log_event("divergence: replica %u's files differ from the majority's at %s (%s, byte %lld)", r->id, path, what,
		  (long long)off);
	json_t *list = json_object_get(S->files->rep, "divergences");
	if (list == NULL) {
		list = must(json_array());
		json_object_set_new(S->files->rep, "divergences", list);
	}
	json_array_append_new(list, json_pack("{s:i,s:s,s:s,s:I}", "replica", (int)r->id, "path", path, "what", what,
					       "offset", (json_int_t)off));
	char mine[64];
	snprintf(mine, sizeof mine, "%s", what);
	ci_divergence(S, (int)r->id, "files", (size_t)off, mine, path);
}

void files_uncommitted(struct sup *S)
{
	if (S->files == NULL || !S->files->private || S->o->replay != NULL)
		return;
	size_t most = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (r->changes != NULL && r->exited && !r->killed)
			files_ended(S, r);
		if (r->changes != NULL && r->changes_read && r->changes->n > most)
			most = r->changes->n;
	}
	if (most > 0)
		log_warn("the replicas' file changes (up to %zu paths) are not committed: the run ended without an agreed "
			 "result", most);
	json_object_set_new(S->files->rep, "uncommitted", json_integer((json_int_t)most));
}

bool files_commit(struct sup *S, const struct replica *winner)
{
	struct files *F = S->files;
	if (F == NULL || winner == NULL || winner->changes == NULL || S->o->replay != NULL)
		return true;
	struct commit_result res;
	commit_apply(winner->changes, &res);
	json_t *list = must(json_array());
	const size_t max_listed = 1000;
	for (size_t i = 0; i < winner->changes->n && i < max_listed; i++)
		json_array_append_new(list, must(json_string(winner->changes->c[i].path)));
	json_object_set_new(F->rep, "committed",
			    json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:o}", "from_replica", (int)winner->id, "written",
				      (json_int_t)res.written, "directories", (json_int_t)res.dirs, "removed",
				      (json_int_t)res.removed, "failed", (json_int_t)res.failed, "bytes",
				      (json_int_t)res.bytes, "paths", list));
	log_event("files committed from replica %u: %zu written, %zu directories, %zu removed, %zu failed",
		  winner->id, res.written, res.dirs, res.removed, res.failed);
	return res.failed == 0;
}
