/* pidfile.c — see pidfile.h.
 *
 * Each path created is looked at for LOOK_TICKS ticks after its creation
 * was notified (a daemon writes its pid right after it opens the file);
 * the contents last made real are kept so that the same ones are not made
 * again. Paths are few (a daemon's one or two pid files): a list, at most
 * PATHS_MAX. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changes.h"
#include "exitcode.h"
#include "log.h"
#include "named.h"
#include "pre.h"
#include "sup.h"

#define LOOK_TICKS 50 /* 5 s */
#define PATHS_MAX 64
#define CONTENT_MAX 32
/* A pid file's path beneath its view: bytes, and names deep. Past that
 * it is left to the end (each look walks it in every replica). */
#define REL_MAX 255
#define DEPTH_MAX 16

struct pentry {
	char *path;
	char *target;        /* its view's real directory */
	unsigned ticks;      /* looks left */
	uint64_t who;        /* slots that made it anew (only they vote) */
	bool kept;           /* its start version is in the start-state layer */
	bool failed;         /* could not be made: left to the end (said once) */
	char made[CONTENT_MAX + 1]; /* the replicas' contents last made real */
	struct pentry *next;
};

struct pidfiles {
	struct sup *S;
	json_t *rep;
	struct pre *pre;
	struct pentry *paths;
	unsigned npaths, made;
};

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

struct pidfiles *pidfile_new(struct sup *S, json_t *rep, struct pre *pre)
{
	struct pidfiles *F = must(calloc(1, sizeof *F));
	F->S = S;
	F->rep = rep;
	F->pre = pre;
	return F;
}

void pidfile_free(struct pidfiles *F)
{
	if (F == NULL)
		return;
	for (struct pentry *e = F->paths, *next; e != NULL; e = next) {
		next = e->next;
		free(e->path);
		free(e->target);
		free(e);
	}
	free(F);
}

void pidfile_creating(struct pidfiles *F, unsigned slot, pid_t tid, int dirfd, const char *path)
{
	if (F == NULL || slot >= F->S->nslots)
		return;
	size_t len = strlen(path);
	if (len < 5 || strcmp(path + len - 4, ".pid") != 0)
		return;
	for (const char *c = path; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return; /* a name that would forge or garble log lines */
	const struct replica *r = &F->S->r[slot];
	if (!replica_in_run(r) || r->changes == NULL)
		return;
	char real[4096];
	size_t rel;
	int v;
	if (!named_path(tid, dirfd, path, real, sizeof real) || (v = changes_view_of(r->changes, real, &rel)) < 0)
		return;
	unsigned depth = 0;
	for (const char *c = real + rel; *c != '\0'; c++)
		depth += *c == '/';
	if (strlen(real + rel) > REL_MAX || depth >= DEPTH_MAX)
		return;
	unsigned mine = 0;
	for (struct pentry *e = F->paths; e != NULL; e = e->next) {
		if (strcmp(e->path, real) == 0) {
			e->ticks = e->failed ? 0 : LOOK_TICKS;
			if (slot < 64)
				e->who |= 1ull << slot;
			return;
		}
		mine += slot < 64 && (e->who & (1ull << slot)) != 0;
	}
	/* Each slot a share: one replica's opens never crowd out another's. */
	if (F->npaths == PATHS_MAX || mine >= PATHS_MAX / F->S->nslots)
		return;
	struct pentry *e = must(calloc(1, sizeof *e));
	e->path = must(strdup(real));
	e->target = must(strdup(r->changes->targets[v]));
	e->ticks = LOOK_TICKS;
	e->who = slot < 64 ? 1ull << slot : 0;
	e->next = F->paths;
	F->paths = e;
	F->npaths++;
}

/* A replica's version of the path, if it is a pid file: its contents
 * (NUL-terminated) and attributes. */
struct pversion {
	char text[CONTENT_MAX + 1];
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

static bool version_of(const struct replica *r, const char *path, struct pversion *pv)
{
	int fd = changes_open_version(r->changes, path);
	if (fd < 0)
		return false;
	struct stat st;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= CONTENT_MAX)
		n = pread(fd, pv->text, CONTENT_MAX, 0);
	close(fd);
	if (n <= 0 || n != st.st_size)
		return false;
	pv->text[n] = '\0';
	size_t digits = strspn(pv->text, "0123456789");
	if (digits == 0 || digits > 10 || !(pv->text[digits] == '\0' || strcmp(pv->text + digits, "\n") == 0))
		return false;
	pv->mode = st.st_mode & 07777;
	pv->uid = st.st_uid;
	pv->gid = st.st_gid;
	return true;
}

static bool same(const struct pversion *a, const struct pversion *b)
{
	return strcmp(a->text, b->text) == 0 && a->mode == b->mode && a->uid == b->uid && a->gid == b->gid;
}

/* Makes e's real file hold diehard's pid (with the newline pv has): beside,
 * synced, renamed into place, its directory synced; the directory opened
 * beneath the view's target, no link followed. 0 or an errno. */
static int make_real(struct pidfiles *F, struct pentry *e, const struct pversion *pv)
{
	const char *name;
	int dir = changes_open_real_parent(e->target, e->path, &name);
	if (dir < 0)
		return errno;
	/* What is there now must be nothing or a small regular file (no
	 * FIFO, no huge file for the start-state layer to copy). */
	struct stat now;
	if (fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && (!S_ISREG(now.st_mode) || now.st_size > 4096)) {
		close(dir);
		return EEXIST;
	}
	if (!e->kept) {
		int err = pre_keep(F->pre, e->target, e->path);
		if (err != 0) {
			close(dir);
			return err;
		}
		e->kept = true;
	}
	/* Made and renamed as the owner the replicas gave it, so that the
	 * kernel checks what it checks for them (a sticky /tmp, a directory
	 * of another user's); root's own rights are not lent. */
	bool as_owner = geteuid() == 0;
	if (as_owner) {
		(void)setfsgid(pv->gid);
		(void)setfsuid(pv->uid);
		if ((uid_t)setfsuid((uid_t)-1) != pv->uid || (gid_t)setfsgid((gid_t)-1) != pv->gid) {
			(void)setfsuid(0);
			(void)setfsgid(0);
			close(dir);
			return EPERM;
		}
	}
	char tmp[64], text[48];
	snprintf(tmp, sizeof tmp, ".diehard-pid-%d-%u", (int)getpid(), F->made);
	int len = snprintf(text, sizeof text, "%d%s", (int)getpid(), strchr(pv->text, '\n') ? "\n" : "");
	int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, pv->mode & 0666);
	int err = fd < 0 ? errno : 0;
	if (fd >= 0) {
		if (write(fd, text, (size_t)len) != len)
			err = errno ? errno : EIO;
		if (err == 0 && fchmod(fd, pv->mode & 0666) != 0)
			err = errno;
		if (err == 0 && fsync(fd) != 0)
			err = errno;
		close(fd);
		if (err == 0 && renameat(dir, tmp, dir, name) != 0)
			err = errno;
		if (err != 0)
			(void)unlinkat(dir, tmp, 0);
		else
			(void)fsync(dir);
	}
	if (as_owner) {
		(void)setfsuid(0);
		(void)setfsgid(0);
	}
	close(dir);
	return err;
}

void pidfile_tick(struct pidfiles *F)
{
	if (F == NULL || F->S->stopping)
		return;
	struct sup *S = F->S;
	for (struct pentry *e = F->paths; e != NULL; e = e->next) {
		if (e->ticks == 0)
			continue;
		e->ticks--;
		struct pversion v[64];
		bool has[64] = { false };
		unsigned n = S->nslots < 64 ? S->nslots : 64;
		/* Only the voters that made the file anew vote (a copy-up of
		 * the real one is no pid file of theirs). */
		for (unsigned i = 0; i < n; i++) {
			const struct replica *r = &S->r[i];
			has[i] = (e->who & (1ull << i)) && replica_in_run(r) && r->live && r->changes != NULL &&
				 version_of(r, e->path, &v[i]);
		}
		const struct pversion *best = NULL;
		unsigned best_n = 0;
		for (unsigned i = 0; i < n; i++) {
			unsigned k = 0;
			for (unsigned j = 0; has[i] && j < n; j++)
				k += has[j] && same(&v[i], &v[j]);
			if (k > best_n) {
				best_n = k;
				best = &v[i];
			}
		}
		if (best == NULL || best_n < sup_quorum(S) || strcmp(best->text, e->made) == 0)
			continue;
		bool masked = true;
		for (unsigned i = 0; i < S->nslots && masked; i++) {
			const struct replica *r = &S->r[i];
			masked = !replica_in_run(r) || (r->changes != NULL && changes_masks(r->changes, e->path));
		}
		if (!masked)
			continue;
		int err = make_real(F, e, best);
		if (err != 0) {
			log_warn("%s: cannot make the pid file real: %s (the end commits it)", e->path, strerror(err));
			e->ticks = 0;
			e->failed = true;
			continue;
		}
		snprintf(e->made, sizeof e->made, "%s", best->text);
		F->made++;
		json_object_set_new(F->rep, "pid_files", json_integer((json_int_t)F->made));
		log_event("%s: a pid file (the replicas' %.*s): made real with diehard's pid %d", e->path,
			  (int)strcspn(best->text, "\n"), best->text, (int)getpid());
	}
}
