/* points_int.h — what points.c (the points' vote, and syncs) and probe.c
 * (renames and removals, decided by a probe) share: the held calls, the
 * paths' points, and the steps of a point's decision. Not for other
 * modules: points.h is the interface.
 *
 * Invariants (points.h's, and): a waiter is on exactly one path's wait
 * list from points_arrive until points_answer, points_unsettle or its
 * process's end frees it; a path's probe, when set, is one of its waiters,
 * continued, at point ndone; P->held[slot] counts the waiters of slot. */
#ifndef DIEHARD_POINTS_INT_H
#define DIEHARD_POINTS_INT_H

#include <event2/event.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "changes.h"
#include "digest.h"
#include "exitcode.h"
#include "log.h"
#include "points.h"

struct replica;

/* Versions kept per path for the late replicas' checks; past this, later
 * points of the path are committed but no longer checked against a late
 * replica (said once). */
#define DONE_MAX (1u << 20)
/* Calls held per replica at once. */
#define HELD_MAX 256
#define PROBE_FIRST_US 50 /* the probes' timer (probe_arm) */
#define PROBE_LAST_US 2000

struct version {
	uint8_t dg[DIGEST_BYTES]; /* its bytes */
	off_t size;               /* NO_VERSION: a point that went on unsettled */
	mode_t mode;
	uid_t uid;                /* the owner too: one replica never picks it */
	gid_t gid;
	uint64_t from;            /* a rename's: the name it had (a hash) */
};
#define NO_VERSION ((off_t)-1)

/* A call held until its point is decided. */
struct waiter {
	unsigned slot, rid; /* the slot and the id of the process that made it */
	uint64_t gen, id;   /* its listener's generation, the notification */
	uint64_t m;         /* its number among the path's points */
	struct version v;
	int src;            /* the version, open for reading */
	double since;       /* when it came (a probe: when it went on) */
	/* A rename's: the name its file had, the thread and its call, the
	 * file in its upper layer; continued: it went on, as the probe. */
	char *from;
	pid_t tid;
	struct seccomp_data call;
	dev_t dev;
	ino_t ino;
	struct file_id real_id; /* the real file at the name (a sync's, a rename's
				   new name) when the call came (type 0: none) */
	struct file_id gone_id; /* the real file a removal or a rename's old
				   name takes away (type 0: none) */
	bool continued;
	struct waiter *next;
};

enum kind { SYNC, RENAME, REMOVAL };

struct ppath {
	char *path;
	enum kind kind;       /* its points: syncs, renames onto it, removals */
	struct waiter *probe; /* a rename's call that went on first, whose
				 outcome decides the point (one of wait) */
	uint64_t *seen;       /* per slot: the path's points its process reached */
	struct version *done; /* committed, by number */
	uint64_t ndone;       /* points committed (those past DONE_MAX not kept) */
	size_t cap;
	struct waiter *wait;
	double quorum_since;  /* when a quorum agreed on its next point while
				 a replica's views still showed the real path
				 (0: not so) */
	char *quorum_from;    /* that quorum's old name, a rename's */
	bool behind;          /* its last point went uncommitted (unsettled, skipped,
				 failed): the real file may lag what the replicas wrote */
	struct file_id made;  /* the real file a point of this run made last at
				 the path (type 0: none): the only one a
				 rename's old name or a removal may take away */
	struct ppath *next;
};

struct points {
	struct sup *S;
	struct logs *logs;    /* the streams (logs.h), whose syncs are theirs */
	struct pidfiles *pids; /* pid files (pidfile.h), renamed into place too */
	json_t *rep;
	struct pre *pre;
	struct ppath *paths;
	unsigned *held;       /* per slot: calls held */
	struct event *probe_ev; /* looks at the probes' outcomes */
	long probe_us;        /* its next interval: PROBE_FIRST_US after a probe
				 starts, doubled each look to PROBE_LAST_US */
	uint64_t committed, renamed, removed, failed, skipped, late_checked, outvoted, unsettled;
	bool said_cap, said_held;
};

static inline void *points_must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

/* ---- points.c: the calls held and the vote ---- */

/* A point of path committed: whatever kind of point went uncommitted
 * there before (points_behind), the real file is the replicas' again. */
void points_caught_up(struct points *P, const char *path);

/* A waiter never held (a late replica's call), freed. */
void points_waiter_drop(struct waiter *w);
/* Whether a's and b's versions are one. */
bool points_same_version(const struct version *a, const struct version *b);
/* Whether w's process is still the one that made the call, and voting. */
bool points_waiter_valid(const struct sup *S, const struct waiter *w);
bool points_waiter_votes(const struct sup *S, const struct waiter *w);
/* The points of path of kind (made when make). */
struct ppath *points_path(struct points *P, const char *path, enum kind kind, bool make);
/* What pp's points are, in lines. */
const char *points_call_name(const struct ppath *pp);
/* The file a sync (or a rename) had: its version. */
bool points_version_of(struct points *P, int fd, struct version *v);
/* Whether slot may hold one more call. */
bool points_room(struct points *P, unsigned slot);
/* Slot slot reached a point of path with w's version: true when held. */
bool points_arrive(struct points *P, unsigned slot, uint64_t gen, uint64_t id, const char *path, enum kind kind,
		  struct waiter *w);
/* The next points of pp decided while one can be (a rename's or a
 * removal's by its probe: probe_start). */
void points_decide(struct points *P, struct ppath *pp);
/* Point m of pp decided with v: kept for the late; the calls answered. */
void points_done(struct points *P, struct ppath *pp, const struct version *v);
void points_answer(struct points *P, struct ppath *pp, uint64_t m, const struct version *v, int err);
/* Point m of pp goes on with nothing committed, said why. */
void points_unsettle(struct points *P, struct ppath *pp, uint64_t m, const char *why);
/* The participants whose views would show a commit of pp now. */
unsigned points_exposed(struct points *P, const struct ppath *pp, uint64_t m, const char *from, struct replica **first);
/* The real file: whether a point may replace it, whether it is still the
 * one id names, the one a point just made remembered; a version
 * committed. */
bool points_may_replace(struct points *P, const struct changes *ch, const char *path, pid_t tid, struct file_id *id);
bool points_still(const struct changes *ch, const char *path, const struct file_id *id);
void points_remember_real(struct points *P, const struct changes *ch, const char *path);
int points_commit_version(struct points *P, const struct ppath *pp, const struct waiter *w, unsigned dirs_from);

/* ---- probe.c: renames and removals ---- */

/* The calls (rename, renameat, renameat2; unlink, unlinkat): true when
 * held. */
bool probe_rename(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req);
bool probe_unlink(struct points *P, unsigned slot, uint64_t gen, const struct seccomp_notif *req);
/* A quorum agreed on pp's next point and nobody is exposed: its probe a
 * goes on alone. */
void probe_start(struct points *P, struct ppath *pp, struct waiter *a);
/* The probe's outcome looked at (and the point decided once known): true
 * while it is still awaited. The timer's callback (arg: the points). */
bool probe_check(struct points *P, struct ppath *pp);
void probe_on_timer(evutil_socket_t fd, short what, void *arg);

#endif
