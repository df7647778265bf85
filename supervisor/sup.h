/* sup.h — the supervisor's shared state, for its modules:
 *   supervisor.c  the loop: set-up, signals, the straggler tick, the end
 *   replica.c     starting, signalling, killing and reaping replicas
 *   input.c       stdin, read once and broadcast to every replica
 *   output.c      replicas' output: capture, vote, commit
 *   virt/         replicas' clock and random calls, answered alike
 *   replace.c     replacements: fresh-seeded replicas that replay the run
 * Everything runs on one libevent loop; nothing here is thread-safe or
 * needs to be. See supervisor.h for the public entry point.
 */
#ifndef DIEHARD_SUP_H
#define DIEHARD_SUP_H

#include <event2/event.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>

#include "arena.h"
#include "ci.h"
#include "digest.h"
#include "inputlog.h"
#include "net.h"
#include "relines.h"
#include "report.h"
#include "supervisor.h"
#include "virt.h"
#include "voter.h"

#define CHUNK 4096u
#define NSTREAMS 2
#define TICK_MS 100u
/* Committed output is digested in blocks of this size (a power of two, no
 * larger than the smallest --window): older output than the history ring
 * holds is checked by digest, a block at a time. */
#define DIGEST_BLOCK ((size_t)64 << 10)

struct sup;

/* Callback arguments: the loop hands each event its replica (and stream). */
struct input_arg {
	struct sup *S;
	struct replica *r;
};

struct output_arg {
	struct sup *S;
	struct replica *r;
	int s;
};

/* A slot holds one replica process at a time; a replacement takes the slot
 * of the one it replaces (or a spare slot, to break a tie). Slots index the
 * voter's views, the rings and the logs; ids name processes to people. */
struct replica {
	unsigned index;            /* its slot in S->r */
	unsigned id;               /* the process's number in messages and the report */
	bool used;                 /* the slot holds (or held) a process */
	pid_t pid;
	uint64_t seed[2];
	int in_fd;                 /* our end of its stdin; -1 once closed */
	int status_fd;             /* sandboxed: its init's report of the program's
				      wait status; -1 otherwise */
	int net_fd;                /* a private network: our end of its init's socket
				      channel (factory.h) until net.c takes it over
				      at its start; -1 otherwise */
	pid_t program_pid;         /* sandboxed: its program (the init's child) */
	int program_pidfd;         /* sandboxed: a pidfd of it (replica_dying), or -1 */
	pid_t dying_pid;           /* replica_dying's last answer was for this pid, */
	bool dying;                /* this answer (true stays true for that pid), */
	struct timeval dying_turn; /* given in the loop turn of this cached time */
	struct caps_replica *caps; /* its cgroups (caps.h), until it ends; NULL */
	int out_fd[NSTREAMS];      /* our ends of its stdout, stderr; -1 at EOF */
	struct event *in_ev;
	struct event *out_ev[NSTREAMS];
	bool out_paused[NSTREAMS]; /* its ring is full: stop reading */
	size_t in_off;             /* input bytes written to it */
	struct ring *ring[NSTREAMS];
	bool eof[NSTREAMS];
	bool stop_cut[NSTREAMS]; /* its output ended short as it stopped (SIGTERM): said once */
	bool live;                 /* votes; false once killed or diverged */
	bool joining;              /* a replacement catching up: checked against the
				      committed output, not yet voting */
	bool log_fed;              /* its input comes from the input log, not the ring */
	bool replacement;          /* started by replace.c: it may skip sleeps */
	bool fresh;                /* a replacement that starts as a fresh server (--stateless):
				      its start-up checked against the committed output, then it
				      joins at a quiet point (net.c's fresh_join), not by catching up */
	bool from_files;           /* a durable server's fresh replacement (--durable): its views
				      show the files as committed at its start (files_plan_for),
				      its start-up output is its own (dropped, not checked) */
	bool stop_unready;         /* the stop found it still fed the connection log:
				      its exit status tells its replay, not the run */
	char fill[80];             /* its DIEHARD_FILL (ci.h) */
	struct digest dg[NSTREAMS]; /* catching up: digest of its current block */
	struct digest pdg[NSTREAMS]; /* the same over its bytes with digits '0' (stream.pdig) */
	double spawn_time;         /* seconds after the start */
	int replaces;              /* id of the replica it replaced; -1: none */
	struct input_arg in_arg;
	struct output_arg out_arg[NSTREAMS];
	bool exited;               /* reaped */
	int wstatus;
	bool killed;               /* by us; why says why */
	double killed_at;          /* when (sup_now()) */
	bool forced;               /* still there KILL_GRACE later: its init SIGKILLed (replica.c) */
	const char *found_stopped; /* as it was killed: "init", "program" or "descendant" was
				      found stopped (SIGSTOP from outside); NULL: none */
	pid_t found_stopped_pid;
	bool sigkilled;            /* died of a SIGKILL we did not send */
	bool replaced;             /* a replacement was started for it */
	bool spent;                /* a replacement whose respawn is not given back (replace_give_back) */
	double joined_at;          /* a replacement: when it joined the vote (sup_now()); 0: not yet */
	size_t past_end[NSTREAMS]; /* a replacement that replayed the connection log: its output
				      before this offset re-lived the past (output_past_ended) */
	bool past_said[NSTREAMS];  /* its past's digits taken as committed: said once */
	double past_at;            /* when that past ended (sup_now()); 0: not yet, or none */
	char why[192];
	double behind_since;       /* since when it trails the committed output without writing */
	double exit_wait_since;    /* since when it runs, silent, after the majority exited */
	double input_stall_since;  /* since when it holds back input the others wait for */
	size_t input_seen;         /* its in_off then: reading any restarts the clock */
	double last_output;        /* when it last wrote to stdout or stderr */
	double end_time;
	struct changes *changes;   /* its views' changes (files.h); NULL: no views */
	bool changes_read;         /* read once it ended */
	bool changes_bad;          /* could not be read: it agrees with nobody */
};

struct stream {
	int fd;
	const char *name;
	size_t committed;
	size_t emitted;    /* committed bytes already written out */
	struct ring *hist; /* recently committed bytes; emitted from here */
	bool ended;        /* the quorum agreed the stream ends */
	/* Digests of the committed output, block by block (replacements only):
	 * dig[n] covers bytes [n, n+1) * DIGEST_BLOCK. */
	uint8_t (*dig)[DIGEST_BYTES];
	size_t ndig, dig_size;
	struct digest cur; /* the block being committed */
	bool dig_full;     /* past the cap: older output can no longer be checked */
	/* Once the run serves, the same per block over the bytes with every
	 * digit '0' (pastdigits.h): a replacement's replayed past whose times
	 * differ is checked against them. pdig[n] is kept for n >= pdig_from. */
	uint8_t (*pdig)[DIGEST_BYTES];
	size_t pdig_from;  /* SIZE_MAX: none kept yet */
	struct digest pcur;
	bool said_order;   /* lines taken in another order (outorder.c): said once */
	signed char client_reads; /* outorder.c: a client reads it (1), not (0), not known yet (-1) */
	/* The first DIGEST_BLOCK committed bytes, kept: a fresh server's
	 * start-up output is checked against them byte for byte, however
	 * long the run (net.c's fresh_join). */
	unsigned char *front;
	size_t front_len;
};

/* A killed process whose slot was taken before it was reaped. */
struct zombie {
	pid_t pid;
	unsigned id;
	int status_fd; /* sandboxed: its init's status pipe (replica.c) */
	double killed_at;
	bool forced;   /* its init SIGKILLed (replicas_force) */
};

/* The run as a whole (sup_state): a majority of k votes; fewer, but at
 * least --min-voters (what they agree on is committed: degraded); fewer
 * still (nothing is committed until replacements join). */
enum sup_state { SUP_VOTING, SUP_DEGRADED, SUP_REFUSING, SUP_NSTATES };

struct sup {
	const struct options *o;
	struct event_base *base;
	unsigned k;               /* replicas wanted in the vote */
	unsigned nslots;          /* k, plus spares for tie-breakers (k >= 3) */
	unsigned next_id;
	struct replica *r;
	struct stream s[NSTREAMS];
	struct arena *arena;
	struct ring *in;          /* input ring: head = slowest open replica */
	struct inputlog *inlog;   /* all input, for replaying to new replicas */
	struct event *stdin_ev;
	bool stdin_pollable;       /* a pipe, tty or socket; else read when there is room */
	bool stdin_paused;
	bool stdin_eof;
	struct event *idle_ev;
	struct event *tick_ev;
	struct event *sig_ev[12];
	unsigned nsig;
	bool stopping;
	bool pipe_ignored;        /* SIGPIPE was ignored when we started */
	struct rlimit nofile;     /* the fd limit we started with, for the replicas */
	int exit_code;
	struct report *report;
	struct virt *virt;        /* NULL with --no-virtualize */
	struct ci *ci;            /* NULL unless a recording is wanted (ci.h) */
	struct fencelog *fencelog; /* NULL unless DIEHARD_FENCE is set (fencelog.h) */
	struct notify *notify;    /* the service side (notify.h); NULL in a replay */
	struct event *stop_ev;    /* asked to stop: the replicas' grace (--stop-timeout) */
	double stop_at;           /* when (since t_start) the stop was forwarded; with stop_ev */
	int stop_signal;          /* that signal (SIGTERM, SIGINT), 0: none */
	struct sock_fprog filter; /* the seccomp filter every replica runs under */
	uint64_t exec_mark;       /* its exec marker (filter.h), or 0 */
	unsigned long ns_flags;   /* sandbox.h: each replica's namespaces (0: none) */
	bool net_private;         /* CLONE_NEWNET is in ns_flags: each replica has a
				     network of its own (--net private, net.h) */
	double t_start;
	double last_tick;         /* when the straggler tick last ran (supervisor.c) */
	/* replace.c */
	struct digest_key dkey; /* the run's digest key */
	struct event *respawn_ev;  /* a deferred replacement pass */
	unsigned respawns;         /* replacements started */
	unsigned respawns_back;    /* of them, given back: they lasted (replace_give_back) */
	bool refused_bound;        /* refused is the respawn bound: a give-back lifts it */
	double tokens;             /* the rate bound's bucket */
	double tokens_at;
	bool deferred;             /* the rate bound holds a replacement back: the tick retries */
	bool durable_wait;         /* a durable server's replacement waits for a quiet moment
				      (net_durable_begin): each connection's close and the tick retry */
	bool want_extra;           /* a tie: one more voter is wanted */
	int tie_left;              /* id + 1 of the voter that left the vote in a tie to
				      make room for the next tie-breaker; 0: none */
	unsigned tie_evictions;    /* voters that left the vote so */
	char refused[160];         /* why replacement is impossible, once said */
	struct zombie *zombies;
	size_t nzombies, zombies_size;
	struct control *control;   /* the control socket (services/control.h), or NULL */
	struct net *net;           /* the TCP proxy (net/net.h); NULL unless --net private */
	struct caps *caps;         /* the replicas' caps (caps.h, overcap.c) */
	unsigned over_cap[2];      /* replicas killed over their task, memory cap */
	struct files *files;       /* the file views (files/files.h) */
	int files_winner;          /* slot + 1 whose changes the agreed status carries; 0: none */
	/* sup_degraded_tick: the state last said, since when, and totals per state */
	enum sup_state state;
	double state_since;
	unsigned state_periods[SUP_NSTATES];
	double state_seconds[SUP_NSTATES];
	uint64_t degraded_commits;  /* votes decided by fewer than a majority of k */
	uint64_t degraded_bytes;    /* and the bytes they committed */
};

/* supervisor.c */
double sup_now(void);
/* The kernel refused a replica's namespaces (err): which alone
 * (CLONE_NEWNET, or root's CLONE_NEWUSER: spawn.h's ns_refused), or all of
 * them (0). true when the run goes on with fewer (said once, the filter
 * rebuilt), false when --sandbox on asked for them. */
bool sup_sandbox_refused(struct sup *S, int err, unsigned long which);
unsigned sup_live_count(const struct sup *S);
/* The live replicas that take clients (all of them in a run that does not
 * listen): the count client connections' quorums and the run's state
 * (degraded, refusing) are taken among. */
unsigned sup_voter_count(const struct sup *S);
/* Whether the run serves: it listens (TCP, UDP), was handed sockets, or
 * runs under a service manager (NOTIFY_SOCKET). */
bool sup_serves(const struct sup *S);
/* Whether a server's replacements start as fresh servers (no connection
 * log; the logs keep the run's start for them): --stateless, --durable. */
bool sup_fresh_servers(const struct sup *S);
/* The fewest agreeing voters that commit anything (--min-voters). */
unsigned sup_min_voters(const struct sup *S);
/* How many must agree for a commit: with alive voters (a flow's, the exit
 * statuses that ended), or the run's live ones. */
unsigned sup_quorum_among(const struct sup *S, unsigned alive);
/* The rule itself: a strict majority of alive (at most k), never fewer
 * than sup_min_voters, never one while `voters` (two or more) could
 * decide together. */
unsigned sup_quorum_with(const struct sup *S, unsigned alive, unsigned voters);
unsigned sup_quorum(const struct sup *S);
/* The same for a client's connection, whose peers are replicas that take
 * clients: among those (sup_voter_count), not every live one. */
unsigned sup_client_quorum_among(const struct sup *S, unsigned alive);
/* A vote committed bytes with `agreeing` voters: counted when they were
 * fewer than a majority of k (degraded). */
void sup_committed_by(struct sup *S, unsigned agreeing, size_t bytes);
enum sup_state sup_state(const struct sup *S);
/* The state said and counted as it changes (the tick). */
void sup_degraded_tick(struct sup *S);
/* Seconds spent in state so far, the current period included. */
double sup_state_seconds(const struct sup *S, enum sup_state st);
void sup_finish(struct sup *S, int code);
void sup_check_done(struct sup *S);
/* Whether the vote has ended: every voter exited with its output closed,
 * every stream's end agreed and a quorum of the voters agree on the exit
 * status. Replicas out of the vote (killed, stopped or not) never hold it. */
bool sup_vote_over(const struct sup *S);

/* replica.c */
/* Starts a process in slot i: an original replica (why NULL) or one that
 * replays the run (replace.c), replacing replica `replaces` whose seed was
 * old_seed (-1, NULL: a tie-breaker). */
void replica_start(struct sup *S, unsigned i, int replaces, const uint64_t *old_seed, const char *why);
/* The first n replicas, forked all at once. */
void replicas_start(struct sup *S, unsigned n);
int replica_status(int wstatus);
/* A sandboxed replica's program's wait status, read from its init's pipe (closed
 * then); init_status when the init wrote none (it was killed). */
int replica_program_status(int *status_fd, int init_status);
/* What sent the signal that ended replica id, where diehard can tell (the
 * seccomp filter's SIGSYS, filter.h): put in the report and returned for
 * the -v event; NULL otherwise. */
const char *replica_signal_cause(struct sup *S, unsigned id, int wstatus);
void replica_close_input(struct replica *r);
void replica_close_output(struct replica *r, int s);
void replica_signal(struct replica *r, int sig);
void replica_kill(struct sup *S, struct replica *r, const char *why);
/* In the run: a voter, or a replacement catching up, neither killed nor
 * exited (what the file effects wait for). */
bool replica_in_run(const struct replica *r);
/* Still joining: catching up on the output, or in the vote but not yet
 * taking clients (replaying connections, its clocks settling, a fresh
 * server not yet joined). */
bool replica_joining(const struct sup *S, const struct replica *r);
/* It (its init, sandboxed) has ended, and diehard has not reaped it yet:
 * its sockets closed as it died, before its end is known. */
bool replica_dying(struct sup *S, struct replica *r);
/* The next replica_dying looks again, even in this loop turn (a socket of
 * r's ended: its death may be what ended it). */
void replica_dying_forget(struct replica *r);
/* SIGKILL to every process not reaped yet, stopped or not: the replicas
 * still running and those killed before (sandboxed: their inits). */
void replicas_kill_all(struct sup *S);
/* Killed processes that did not end within KILL_GRACE (something keeps
 * their init stopped): SIGKILL to the init itself (from the tick). */
void replicas_force(struct sup *S);
void replicas_reap(struct sup *S);
/* The end of the run: kills every process of ours still there (those
 * killed in the run get a moment to end by themselves first) and reaps
 * them, waiting a bounded time. */
void replicas_end(struct sup *S);

/* input.c */
void input_start(struct sup *S);
void input_update(struct sup *S);
void input_on_writable(evutil_socket_t fd, short what, void *arg);
void input_on_stdin(evutil_socket_t fd, short what, void *arg);

/* replace.c */
void replace_init(struct sup *S);
void replace_request(struct sup *S);
void replace_maintain(struct sup *S);
/* No quorum can form among the voters: true to wait for a tie-breaker
 * (started here, or catching up), false when none can come. weakest: the
 * voters (slot bits) that agree with the fewest others; with every slot
 * taken the oldest of them leaves the vote to make room (0: none may). */
bool replace_wait(struct sup *S, const char *why, uint64_t weakest);
/* Of the voters (slot bits, n slots), those that agree (agree(ctx, i, j))
 * with the fewest others: the ones a tie may make leave (replace_wait). */
uint64_t replace_loners(uint64_t voters, unsigned n, bool (*agree)(const void *ctx, unsigned i, unsigned j),
			const void *ctx);
bool replace_replayable(struct sup *S, char *why, size_t size);
void replace_check_joined(struct sup *S, struct replica *r);
void replace_joined(struct sup *S, struct replica *r);
void replace_give_back(struct sup *S, struct replica *r);
bool replace_replaying(const struct sup *S, const struct replica *r);
void replace_zombie(struct sup *S, pid_t pid, unsigned id, int status_fd, double killed_at);
bool replace_reap_zombie(struct sup *S, pid_t pid, int wstatus);

/* overcap.c: the replicas' caps on tasks and memory (caps.h) */
struct caps_spawn;
/* The run's caps, chosen and said (-v, the report) before any replica. */
void overcap_init(struct sup *S);
/* r's cgroup (if any) and what its start needs, into sp; exits 125 when a
 * cgroup cannot be made. The one its slot held before ends first. */
void overcap_prepare(struct sup *S, struct replica *r, struct caps_spawn *sp);
/* Whether r, being killed, went over a cap (then why, into why): that is
 * why it dies, whatever else its end set off (its output cut short). It is
 * counted; when as many as a quorum went over the same cap, the command
 * needs more: the run ends (137, one line). */
bool overcap_over(struct sup *S, struct replica *r, char *why, size_t size);
/* The tick: a replica over a cap is killed like a crash (replica_kill,
 * then replaced). */
void overcap_tick(struct sup *S);
/* r was reaped: over a cap (it is killed now, as above), and its cgroup
 * removed. */
void overcap_reaped(struct sup *S, struct replica *r);
/* r is being killed: without an init of its own, every process in its
 * cgroup is, whatever process group it is in. */
void overcap_killed(struct sup *S, struct replica *r);
/* The sandbox fell back (its user namespaces went): said if a cap changed. */
void overcap_sandbox(struct sup *S);
/* The end of the run: every cgroup emptied and removed. */
void overcap_finish(struct sup *S);

/* output.c */
void output_digest_commit(struct sup *S, struct stream *st, const unsigned char *p, size_t n);
void output_vote(struct sup *S, struct stream *st, enum voter_mode mode);
void output_on_readable(evutil_socket_t fd, short what, void *arg);
void output_on_idle(evutil_socket_t fd, short what, void *arg);
/* A point where r, a fresh server (net.c), may join the output vote: r
 * quiet for --idle, and on each stream the voters, their pipes read out,
 * at the committed offset (at), what they all wrote past it committed
 * first by a prefix vote; r's output checked up to there. Reading and
 * voting may kill: false then, as when there is no such point now. */
bool output_quiet_point(struct sup *S, struct replica *r, size_t at[NSTREAMS]);
/* r's streams go on from at: what it wrote up to there (its start-up) is
 * dropped, checked; anything past it (start-up output the voters have not
 * written yet) waits to be voted there with theirs. */
void output_rebase(struct sup *S, struct replica *r, const size_t at[NSTREAMS]);
/* r, a replacement that replayed the connection log, reached the time of
 * now (net.c): what it wrote up to here, in its ring or still in its pipe,
 * re-lived the past (r->past_end; pastdigits.h). */
void output_past_ended(struct sup *S, struct replica *r);

/* outorder.c: whether a log's lines may be taken in another order (a
 * serving run, no --strict-order); outorder_free: st's, st not a client's
 * connection besides. */
bool outorder_serving(const struct sup *S);
bool outorder_free(const struct sup *S, struct stream *st);
#define OUTORDER_PRE ((size_t)4096)     /* the committed part of a block's first line, at most */
#define OUTORDER_WINDOW ((size_t)65536) /* a block's bytes from the line where the sides part, at most */
/* Whether mine differs from ref (both from a line's start, or from the
 * npre bytes of its start at pre, the same in both) only in the order of
 * whole lines, the first difference at d (relines.h); SAME: *end, the
 * block's end past pre. Nothing is changed. digits: in the first digits
 * bytes of ref and mine, lines alike but for their digits are the same
 * line (a replacement's replayed past, whose times were its own, against
 * committed bytes: pastdigits.h); past them, byte for byte. */
enum relines_verdict outorder_lines(const unsigned char *pre, size_t npre, const unsigned char *ref, size_t nref,
				    bool ref_more, const unsigned char *mine, size_t nmine, bool mine_more, size_t d,
				    size_t digits, size_t *end);
/* A block [from, to) of what (a stream's or a file's name) taken in
 * another order: counted in the report, said once (said). */
void outorder_said(struct sup *S, const char *what, bool *said, size_t from, size_t to);
/* outorder_match's verdict, nothing changed (*end: the block's end). */
enum relines_verdict outorder_check(const struct stream *st, size_t at, const unsigned char *ref, size_t nref,
				    bool ref_more, const unsigned char *mine, size_t nmine, bool mine_more, size_t d,
				    size_t digits, size_t *end);
/* Whether mine (nmine bytes of a replica's st from offset at, in its ring:
 * writable) differs from ref (nref bytes from at: the majority's, or the
 * committed output) only in the order of whole lines, the first difference
 * at d; *_more: whether that side may still write more. RELINES_SAME: mine
 * now starts with ref's block, in place (counted, said once). */
enum relines_verdict outorder_match(struct sup *S, struct stream *st, size_t at, const unsigned char *ref,
				    size_t nref, bool ref_more, unsigned char *mine, size_t nmine, bool mine_more,
				    size_t d, size_t digits);

#endif
