/* virt_int.h — what virt.c and its parts share (internal to supervisor/virt/).
 *
 * virt.c receives each notification and dispatches it; the answers come
 * from take.c (the nondeterminism log's side of a call: keys, leader and
 * follower, the fast clock path's entries, stale reads, divergences),
 * logcalls.c (the clock, getrandom and random-device calls answered from
 * it) and images.c (new program images: their vDSO, AT_RANDOM, the clock
 * blob, exec tracing). A handler fills the response and says what to do
 * with it (enum answer); it checks the notification is still pending
 * (virt_waiting) after reading or writing the caller and before answering
 * (virt.c's rules). */
#ifndef DIEHARD_VIRT_INT_H
#define DIEHARD_VIRT_INT_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <time.h>

#include "chacha.h"
#include "clockpage.h"
#include "ndlog.h"
#include "sup.h"

/* Keys (ndlog.h): the kind in the top byte, details below. */
enum {
	KEY_CLOCK = 1 << 24,     /* | the clock id, for ids 0..15; 0xffff: any other */
	KEY_CPUCLOCK = 2 << 24,  /* | task number << 3 | thread bit | which */
	KEY_GETTIMEOFDAY = 3 << 24,
	KEY_TIME = 4 << 24,
	KEY_GETRANDOM = 5 << 24, /* | the process's number (take_process_key) */
	KEY_URANDOM = 6 << 24,   /* likewise */
	KEY_RANDOM = 7 << 24,    /* likewise */
	KEY_AT_RANDOM = 8 << 24,
	KEY_WALL_THREAD = 9 << 24, /* | which << 22 | thread number: a server's wall clocks */
};
/* KEY_WALL_THREAD's calls. */
enum { WALL_REALTIME, WALL_REALTIME_COARSE, WALL_GETTIMEOFDAY, WALL_TIME };
/* Keystream domains (chacha.h): one per source of random bytes. */
enum { DOMAIN_GETRANDOM = 1, DOMAIN_URANDOM = 2, DOMAIN_RANDOM = 3, DOMAIN_AT_RANDOM = 4 };

/* CPU-time clocks are keyed by the calling task too (take_clock_key): the
 * tasks of a replica are numbered in the order of their first CPU-clock
 * read, up to this many; later ones share the last number. */
#define CPU_TASKS 256

/* A process traced to its exec (one whose next image lacks libdiehard):
 * the thread that called it, and its process (whose id the exec stop
 * reports when another thread made the call). */
struct traced {
	pid_t pid, tgid;
	unsigned slot;
	struct traced *next;
};

#define LOOP_CACHE 64
#define ANCHOR_THREADS 64

#define WAIT_CHILDREN 8

/* anchor.c: a child noted as a wait began. */
struct anchor_child {
	pid_t pid;
	uint64_t start;
	uint32_t place;
};

/* anchor.c: a thread's anchors (its counts, the last one's reads). */
struct anchor_thread {
	pid_t tid;         /* 0: free */
	uint64_t start;    /* its start time: a reused tid is another thread */
	uint64_t used;     /* vreplica.anchor_clock when last anchored */
	uint32_t count[2]; /* forks; syncs and renames */
	uint64_t id;       /* the last anchor */
	unsigned left, n;  /* reads still matched through it; reads made after it */
	struct anchor_child wait[WAIT_CHILDREN]; /* its own children as its last wait began */
	unsigned nwait;
	int64_t last_ns;   /* the latest wall time a read of it returned (ns; 0: none seen) */
};

struct vreplica {
	struct virt *V;
	unsigned index;       /* the slot */
	bool used;            /* a process was attached */
	bool reported;        /* its call counts are in the report */
	int fd;               /* the listener; -1 once closed */
	uint64_t gen;         /* which attach made it (virt_resume) */
	struct event *ev;
	uint64_t unvirtualized;
	uint64_t images_stopped; /* new images diehard patched (stopped) */
	uint64_t images_grafted; /* of those, given the clock blob (graft.h) */
	uint64_t opens_checked; /* opens we looked at that were no random device */
	pid_t cpu_task[CPU_TASKS]; /* tids, numbered by first CPU-clock read */
	unsigned ncpu_tasks;
	uint64_t fast_notified; /* reads of the fast path's keys that reached us */
	uint64_t fast_lost;   /* a bit per fast key: behind the log's cap (real values) */
	pid_t lane_host[CP_LANES]; /* the thread named for each lane in its page (host tid; 0 none) */
	uint32_t lane_ns[CP_LANES]; /* and its id in the replica's pid namespace, as named */
	uint64_t clock_reads; /* wall and monotonic reads answered (but those
				 of the fast path's keys: its page counts them) */
	bool fast_joined;     /* a replacement server that reads through its
				 page again (virt_fast_join) */
	bool uncounted;       /* a fresh server joined at the front (virt_calls_now):
				 its counts skip the past, not compared at the end */
	struct {              /* take.c's loop_thread, by tid (direct-mapped) */
		pid_t tid;    /* 0: empty */
		bool loop;
	} loops[LOOP_CACHE];
	struct anchor_thread anchored[ANCHOR_THREADS];
	uint64_t anchor_clock;
};

struct virt {
	struct sup *S;
	struct ndlog *log;
	struct disputes *disputes;
	struct entropy *entropy;
	struct netcalls *net;     /* a private network's calls */
	uint8_t key[CHACHA_KEY_BYTES];
	struct vreplica *r;
	bool vdso_warned;
	uint64_t attaches;        /* listeners attached so far: their generations */
	uint64_t vdso_fallbacks;  /* leaders' vDSO reads that made a system call */
	uint64_t skipped_sleeps;  /* by replacements catching up */
	uint64_t clock_resyncs;   /* a server's stale clock reads moved to the front */
	bool frozen;              /* a stop was forwarded (virt_stop_clocks): wall clocks */
	struct timespec frozen_at; /* read this (the wall time then) */
	double frozen_until;      /* until then (sup_now()) */
	uint64_t open_failures;   /* random device opens we could not answer */
	unsigned *random_open;    /* per slot: its random-device pipes alive */
	unsigned random_cap;      /* at most this many per slot (the rest EMFILE) */
	bool cap_said;
	struct fastclock *fast;   /* the in-replica clock path, or NULL */
	struct traced *traced;    /* processes traced to their exec */
	struct lineage *lineage;  /* the replicas' process trees (lineage.h), or NULL */
	struct event *harvest_ev; /* brings its entries into the log */
	uint64_t fast_damaged;    /* slots turned to notify: damaged counts */
	struct anchors *anchors;  /* anchor.c's entries */
	uint64_t anchor_follows;  /* reads that took a sibling's anchored value */
	uint32_t lane_thread[CP_LANES]; /* each lane's thread number (take.c's thread_number; 0: free) */
};

/* What a handler decided. */
enum answer { ANSWER, CONTINUE, DROP };

/* Reads the real value of a call, for a leader. */
typedef void real_fn(const struct seccomp_notif *req, struct nd_value *v);

/* Whether notification id of vr's listener still waits for its answer. */
static inline bool virt_waiting(const struct vreplica *vr, uint64_t id)
{
	return ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* take.c */
void take_key_name(uint32_t key, char *buf, size_t size);
uint32_t take_clock_key(struct vreplica *vr, clockid_t id, pid_t tid);
uint32_t take_wall_key(struct vreplica *vr, unsigned which, uint32_t key, pid_t tid);
bool take_thread_key(uint32_t key);
/* A wall clock's read during a stop's first moments (virt_stop_clocks):
 * true with *v the stop's time in the read's form (real() first gives the
 * rest: a timezone, an error); false otherwise. */
bool take_frozen(struct virt *V, const struct seccomp_notif *req, uint32_t key, real_fn *real, struct nd_value *v);
/* key (getrandom, a random device's open) for tid's process: | its number,
 * cut from its place in the replica's process tree (lineage.h), so that the
 * n-th call of each process matches the n-th of the same process in every
 * replica, however the processes' calls interleave (a server's process per
 * connection, with processes of its own); its id in the replica's pid
 * namespace where lineage cannot place it; key itself when neither is
 * known. */
uint32_t take_process_key(struct vreplica *vr, uint32_t key, pid_t tid);
/* The keystream (chacha.h) of a keyed call's index-th value: a process's
 * streams apart from every other's. */
uint64_t take_stream_of(uint32_t key, uint64_t index);
void take_divergence(struct vreplica *vr, uint32_t key, uint64_t index, const char *expected, const char *got);
uint64_t take_still_calling(const struct sup *S);
void take_on_odd(void *ctx, unsigned r, uint32_t key, uint64_t index, uint64_t expected, uint64_t got);
real_fn take_real_clock, take_real_gettimeofday, take_real_time, take_no_real;
bool take_wall_or_monotonic(uint32_t key);
void take_fast_put(unsigned fk, uint64_t n, const struct cp_value *cv, unsigned by, void *arg);
int take_fast_key(const struct virt *V, uint32_t key);
uint32_t take_log_key(const struct virt *V, unsigned fk);
/* A wall read of thread tid of vr passed an anchor (anchor.c): while on, its
 * lane (if any) sends its reads to diehard. */
void take_lane_divert(struct vreplica *vr, pid_t tid, bool on);
/* The keys the log may forget once idle: a thread's wall clock, but for a
 * thread given a lane (its entries are numbered on in the shared pages). */
bool take_reclaimable(uint32_t key);
void take_harvest(struct virt *V);
void take_kill_forged(struct virt *V);
void take_on_harvest(evutil_socket_t fd, short what, void *arg);
int take_value(struct vreplica *vr, const struct seccomp_notif *req, uint32_t key, uint64_t arg, real_fn *real,
	       struct nd_value *v, uint64_t *index);

/* logcalls.c */
enum answer logcalls_clock_gettime(struct vreplica *vr, const struct seccomp_notif *req,
				   struct seccomp_notif_resp *resp);
enum answer logcalls_gettimeofday(struct vreplica *vr, const struct seccomp_notif *req,
				  struct seccomp_notif_resp *resp);
enum answer logcalls_time(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp);
enum answer logcalls_getrandom(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp);
enum answer logcalls_open(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp);

/* tasks.c: the run's lineage (NULL, said, when the last pid cannot be
 * read), and a clone, fork or vfork noted in it (it goes on). */
struct lineage *tasks_lineage(unsigned nslots);
enum answer tasks_clone(struct vreplica *vr, const struct seccomp_notif *req);

/* anchor.c: a loop thread's first reads after a step of its own (a fork,
 * a sync or rename, reaping a child) matched through that step. */
struct anchors *anchors_new(void);
void anchor_fork(struct vreplica *vr, pid_t tid);
void anchor_sync(struct vreplica *vr, pid_t tid);
/* wait4, waitid: the caller's children noted (a child it reaps is an
 * anchor, seen at its next read); it goes on. */
enum answer anchor_wait(struct vreplica *vr, const struct seccomp_notif *req);
/* An anchored read of tid (req->pid): true with *v its value (the
 * sibling's that led it, or real()'s); false: not anchored. */
bool anchor_read(struct vreplica *vr, const struct seccomp_notif *req, real_fn *real, struct nd_value *v);
/* Whether thread tid's next wall read would be anchored (a count of
 * anchored reads left, or children noted by a wait). */
bool anchor_pending(struct vreplica *vr, pid_t tid);
/* A replacement that caught up (virt_fast_join): the anchors of its
 * replayed past match no read of its (a replaying replica's reads are not
 * anchored), and none carries over into its present; its counts of
 * forks and syncs stay, which name its later anchors as its siblings'. */
void anchor_drop_pending(struct vreplica *vr);
/* A wall read of tid returned v (take_value): an anchored read after it
 * never takes an earlier time. loop: tid is an event loop's thread (its
 * entry made if it has none). */
void anchor_returned(struct vreplica *vr, const struct seccomp_notif *req, const struct nd_value *v, bool loop);

/* images.c (and virt.h's virt_traced) */
enum answer images_arch_prctl(struct vreplica *vr, const struct seccomp_notif *req);
enum answer images_execve(struct vreplica *vr, const struct seccomp_notif *req);
void images_at_random_key(const struct virt *V, uint64_t key[2]);

#endif
