/* supervisor.c — the loop that owns everything: set-up, signals, the
 * straggler tick, and the end of a run.
 *
 * Data flow (modules in sup.h):
 *   stdin --read--> input ring --write--> each replica's stdin pipe   (input.c)
 *   replica stdout/stderr pipe --read--> its ring in the arena
 *       --voter--> committed bytes --write--> our stdout/stderr       (output.c)
 *
 * Verdicts: a replica that wrote something else than what was committed,
 * or that trails the committed output (or still runs after the majority
 * exited) without writing anything for straggler_ms, is killed with SIGKILL
 * and leaves the vote
 * (replica.c). When no majority can ever form, we stop at once, commit
 * nothing more and exit EXIT_NO_QUORUM. The exit status is voted here. */
#include "supervisor.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "spawn.h"
#include "sup.h"


double sup_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}


unsigned sup_live_count(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->k; i++)
		n += S->r[i].live;
	return n;
}


void sup_finish(struct sup *S, int code)
{
	if (S->stopping)
		return;
	S->stopping = true;
	S->exit_code = code;
	event_base_loopbreak(S->base);
}


int replica_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return EXIT_INTERNAL;
}


/* Everything is over when every replica is reaped and has no pipe open. */
void sup_check_done(struct sup *S)
{
	if (S->stopping)
		return;
	for (unsigned i = 0; i < S->k; i++) {
		struct replica *r = &S->r[i];
		if (!r->exited || r->out_fd[0] >= 0 || r->out_fd[1] >= 0)
			return;
	}
	/* Final votes: every stream is at end of stream for everyone. */
	for (int s = 0; s < NSTREAMS; s++) {
		output_vote(S, &S->s[s], VOTER_CHUNKS);
		if (S->stopping)
			return;
	}
	/* The exit status, voted among the replicas still in the vote. */
	int codes[VOTER_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < S->k; i++)
		if (S->r[i].live)
			codes[n++] = replica_status(S->r[i].wstatus);
	unsigned quorum = voter_quorum(n, S->k);
	for (unsigned i = 0; i < n; i++) {
		unsigned same = 0;
		for (unsigned j = 0; j < n; j++)
			same += codes[j] == codes[i];
		if (same >= quorum) {
			for (unsigned j = 0; j < S->k; j++) {
				struct replica *r = &S->r[j];
				if (r->live && replica_status(r->wstatus) != codes[i]) {
					char why[96];
					snprintf(why, sizeof why, "exit status %d differs from the majority's %d",
						 replica_status(r->wstatus), codes[i]);
					report_status_divergence(S->report, j, replica_status(r->wstatus), codes[i]);
					log_event("divergence: replica %u %s", j, why);
					r->live = false;
				}
			}
			report_set_exit(S->report, codes[i], NULL);
			sup_finish(S, codes[i]);
			return;
		}
	}
	char list[256];
	size_t o = 0;
	list[0] = '\0';
	for (unsigned i = 0; i < S->k && o + 32 < sizeof list; i++)
		if (S->r[i].live)
			o += (size_t)snprintf(list + o, sizeof list - o, "%sreplica %u: %d", o ? ", " : "", i,
					      replica_status(S->r[i].wstatus));
	log_warn("no majority on the exit status (%s)", n ? list : "no replica left");
	report_no_quorum(S->report, "status", 0, "the exit statuses disagree", list);
	sup_finish(S, EXIT_NO_QUORUM);
}

/* Whether cond has held for longer than limit seconds; *since remembers
 * when it started to hold (0: it does not). */
static bool overdue(double *since, bool cond, double t, double limit)
{
	if (!cond) {
		*since = 0;
		return false;
	}
	if (*since == 0)
		*since = t;
	return t - *since > limit;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	double t = sup_now(), limit = S->o->straggler_ms / 1000.0;
	unsigned exited_live = 0;
	for (unsigned i = 0; i < S->k; i++)
		exited_live += S->r[i].live && S->r[i].exited;
	unsigned quorum = voter_quorum(sup_live_count(S), S->k);
	for (unsigned i = 0; i < S->k; i++) {
		struct replica *r = &S->r[i];
		if (!r->live)
			continue;
		bool behind = false;
		for (int s = 0; s < NSTREAMS; s++)
			behind |= r->ring[s]->head < S->s[s].committed;
		char why[128];
		if (overdue(&r->behind_since, behind, t, limit)) {
			snprintf(why, sizeof why, "straggler: behind the committed output and silent for more than %.1f s",
				 limit);
			replica_kill(S, r, why);
		} else if (overdue(&r->exit_wait_since, !r->exited && exited_live >= quorum, t, limit)) {
			snprintf(why, sizeof why, "straggler: still running, silent, %.1f s after the majority exited", limit);
			replica_kill(S, r, why);
		}
	}
	for (int s = 0; s < NSTREAMS; s++)
		output_vote(S, &S->s[s], VOTER_CHUNKS);
	input_update(S);
	sup_check_done(S);
}


static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct sup *S = arg;
	if (sig == SIGCHLD) {
		replicas_reap(S);
		for (int s = 0; s < NSTREAMS; s++)
			output_vote(S, &S->s[s], VOTER_CHUNKS);
		sup_check_done(S);
		return;
	}
	log_event("forwarding signal %d", (int)sig);
	int forward = sig == SIGTSTP ? SIGSTOP : (int)sig;
	for (unsigned i = 0; i < S->k; i++)
		if (!S->r[i].exited)
			replica_signal(&S->r[i], forward);
	if (sig == SIGTSTP)
		(void)kill(getpid(), SIGSTOP); /* stop ourselves too, like a shell job */
}


/* libevent's own diagnostics (such as epoll refusing a regular file on
 * stdin, which we handle) are events, not errors. */
static void libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_ERR)
		log_warn("libevent: %s", msg);
	else
		log_event("libevent: %s", msg);
}


int supervisor_run(const struct options *o)
{
	struct sup S0 = { .o = o, .k = o->k, .exit_code = EXIT_INTERNAL };
	struct sup *S = &S0;
	S->t_start = sup_now();
	S->report = report_new(o);
	struct sigaction pipe_was;
	S->pipe_ignored = sigaction(SIGPIPE, NULL, &pipe_was) == 0 && pipe_was.sa_handler == SIG_IGN;
	signal(SIGPIPE, SIG_IGN); /* EPIPE is handled where it happens */
	/* As many fds as we may: every replica's open random device is a pipe
	 * we feed (entropy.c). The replicas get the limit back (spawn.c). */
	if (getrlimit(RLIMIT_NOFILE, &S->nofile) != 0)
		fatal(EXIT_INTERNAL, "getrlimit: %s", strerror(errno));
	struct rlimit raised = { S->nofile.rlim_max, S->nofile.rlim_max };
	if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
		log_event("cannot raise the fd limit: %s", strerror(errno));

	event_set_log_callback(libevent_log);
	S->base = event_base_new();
	if (S->base == NULL)
		fatal(EXIT_INTERNAL, "cannot create the event loop");
	/* Rings: per replica stdout, stderr; per stream the history; the input. */
	unsigned nrings = S->k * NSTREAMS + NSTREAMS + 1;
	S->arena = arena_create(nrings, o->window);
	if (S->arena == NULL)
		fatal(EXIT_INTERNAL, "cannot create the output arena: %s", strerror(errno));
	for (int s = 0; s < NSTREAMS; s++)
		S->s[s] = (struct stream){ .fd = s + 1, .name = s == 0 ? "stdout" : "stderr",
					   .hist = arena_ring(S->arena, S->k * NSTREAMS + (unsigned)s) };
	S->in = arena_ring(S->arena, nrings - 1);
	S->inlog = inputlog_new(o->input_log);

	/* Signals first, so no child exit or ^C is missed. */
	static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP };
	S->sig_ev[S->nsig++] = evsignal_new(S->base, SIGCHLD, on_signal, S);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
		/* A signal ignored when we start (nohup, a background job of a
		 * script) stays ignored: not watching it leaves SIG_IGN in place,
		 * and the replicas inherit it across exec, as a plain run would. */
		struct sigaction old;
		if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		S->sig_ev[S->nsig++] = evsignal_new(S->base, forwarded[i], on_signal, S);
	}
	for (unsigned i = 0; i < S->nsig; i++)
		if (S->sig_ev[i] == NULL || event_add(S->sig_ev[i], NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot watch signals");

	report_virtualize(S->report, o->virtualize);
	if (o->virtualize)
		S->virt = virt_new(S);

	S->r = calloc(S->k, sizeof *S->r);
	if (S->r == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned i = 0; i < S->k; i++)
		replica_start(S, i);

	input_start(S);
	S->idle_ev = evtimer_new(S->base, output_on_idle, S);
	S->tick_ev = event_new(S->base, -1, EV_PERSIST, on_tick, S);
	struct timeval tick = { .tv_sec = 0, .tv_usec = TICK_MS * 1000 };
	if (S->idle_ev == NULL || S->tick_ev == NULL || event_add(S->tick_ev, &tick) != 0)
		fatal(EXIT_INTERNAL, "cannot create timers");

	event_base_dispatch(S->base);
	replicas_kill_all(S);
	if (S->virt != NULL)
		virt_finish(S->virt);
	report_set_exit(S->report, S->exit_code, NULL);
	report_input_log(S->report, inputlog_bytes(S->inlog), inputlog_retained_from(S->inlog),
			 inputlog_complete(S->inlog) || (S->inlog != NULL && inputlog_bytes(S->inlog) == 0));
	report_write(S->report);
	inputlog_free(S->inlog);
	return S->exit_code;
}
