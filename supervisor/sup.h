/* sup.h — the supervisor's shared state, for its modules:
 *   supervisor.c  the loop: set-up, signals, the straggler tick, the end
 *   replica.c     starting, signalling, killing and reaping replicas
 *   input.c       stdin, read once and broadcast to every replica
 *   output.c      replicas' output: capture, vote, commit
 *   virt.c        replicas' clock and random calls, answered alike
 * Everything runs on one libevent loop; nothing here is thread-safe or
 * needs to be. See supervisor.h for the public entry point.
 */
#ifndef DIEHARD_SUP_H
#define DIEHARD_SUP_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "arena.h"
#include "inputlog.h"
#include "report.h"
#include "supervisor.h"
#include "virt.h"
#include "voter.h"

#define CHUNK 4096u
#define NSTREAMS 2
#define TICK_MS 100u

struct replica {
	unsigned index;
	pid_t pid;
	uint64_t seed[2];
	int in_fd;                 /* our end of its stdin; -1 once closed */
	int out_fd[NSTREAMS];      /* our ends of its stdout, stderr; -1 at EOF */
	struct event *in_ev;
	struct event *out_ev[NSTREAMS];
	bool out_paused[NSTREAMS]; /* its ring is full: stop reading */
	size_t in_off;             /* input bytes written to it */
	struct ring *ring[NSTREAMS];
	bool eof[NSTREAMS];
	bool live;                 /* votes; false once killed or diverged */
	bool exited;               /* reaped */
	int wstatus;
	bool killed;               /* by us; why says why */
	char why[192];
	double behind_since;       /* since when it trails the committed output without writing */
	double exit_wait_since;    /* since when it runs, silent, after the majority exited */
	double end_time;
};

struct stream {
	int fd;
	const char *name;
	size_t committed;
	size_t emitted;    /* committed bytes already written out */
	struct ring *hist; /* recently committed bytes; emitted from here */
	bool ended;        /* the quorum agreed the stream ends */
};

struct sup {
	const struct options *o;
	struct event_base *base;
	unsigned k;
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
	double t_start;
};

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

/* supervisor.c */
double sup_now(void);
unsigned sup_live_count(const struct sup *S);
void sup_finish(struct sup *S, int code);
void sup_check_done(struct sup *S);

/* replica.c */
void replica_start(struct sup *S, unsigned i);
int replica_status(int wstatus);
void replica_close_input(struct replica *r);
void replica_close_output(struct replica *r, int s);
void replica_signal(struct replica *r, int sig);
void replica_kill(struct sup *S, struct replica *r, const char *why);
void replicas_kill_all(struct sup *S);
void replicas_reap(struct sup *S);

/* input.c */
void input_start(struct sup *S);
void input_update(struct sup *S);
void input_on_writable(evutil_socket_t fd, short what, void *arg);
void input_on_stdin(evutil_socket_t fd, short what, void *arg);

/* output.c */
void output_vote(struct sup *S, struct stream *st, enum voter_mode mode);
void output_on_readable(evutil_socket_t fd, short what, void *arg);
void output_on_idle(evutil_socket_t fd, short what, void *arg);

#endif
