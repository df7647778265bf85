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
 * (replica.c). A replica something outside stopped (SIGSTOP) is silent:
 * the same rules kill it. When no majority can ever form, we stop at once,
 * commit nothing more and exit EXIT_NO_QUORUM. The exit status is voted
 * here; the run ends once it is, whatever killed replicas still do. */
#include "supervisor.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "exitcode.h"
#include "files.h"
#include "fencelog.h"
#include "filter.h"
#include "log.h"
#include "net.h"
#include "notify.h"
#include "sandbox.h"
#include "spawn.h"
#include "sup.h"
#include "svcenv.h"


double sup_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}


unsigned sup_live_count(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		n += S->r[i].live;
	return n;
}

/* The voters: live replicas that take clients. One replaying its
 * connection log, its clocks settling or a fresh server not yet joined
 * (net_takes_clients) is in the vote on the output, as an extra voter, but
 * counts for no quorum: a service whose one voter serves while two
 * replacements replay is degraded, not refusing its clients. */
unsigned sup_voter_count(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		n += S->r[i].live && net_takes_clients(S->net, i);
	return n;
}


bool sup_fresh_servers(const struct sup *S)
{
	return S->o->stateless || S->o->durable;
}

bool sup_serves(const struct sup *S)
{
	const struct svcenv *env = svcenv_get();
	return net_serves(S->net) || (env != NULL && (env->notify || env->listen_fds > 0));
}

/* --min-voters; by default two (one replica alone is never trusted once
 * there were several), but one once the run serves: a service whose other
 * replicas are dead or replaying keeps answering (degraded, said and
 * counted: sup_degraded_tick) rather than refuse every client. */
unsigned sup_min_voters(const struct sup *S)
{
	if (S->k < 2)
		return 1;
	return S->o->min_voters > 0 ? S->o->min_voters : sup_serves(S) ? 1 : 2;
}

/* A strict majority of alive (at most k of them), never fewer than
 * sup_min_voters, and never one while `voters` replicas (two or more)
 * could decide together: one alone decides only as the last one left,
 * never as a part of them (a connection's one peer, the one replica that
 * exited first). With tie-breakers in the vote (more voters than k), a
 * majority of k: the tie is broken once that many agree. */
unsigned sup_quorum_with(const struct sup *S, unsigned alive, unsigned voters)
{
	unsigned n = alive < S->k ? alive : S->k;
	unsigned majority = n / 2 + 1, least = sup_min_voters(S);
	if (least < 2 && S->k >= 2 && voters >= 2)
		least = 2;
	return majority > least ? majority : least;
}

/* The output, files, the exit status and the network's side paths vote
 * among the live replicas: one still replaying connections takes part
 * there (its bytes are checked as it catches up), so it counts. */
unsigned sup_quorum_among(const struct sup *S, unsigned alive)
{
	return sup_quorum_with(S, alive, sup_live_count(S));
}

unsigned sup_quorum(const struct sup *S)
{
	return sup_quorum_among(S, sup_live_count(S));
}

/* A client's connection is voted among the replicas that take clients
 * (sup_voter_count; with none yet, the live ones: two replaying never let
 * one decide alone): one serving while two replay answers, degraded. */
unsigned sup_client_quorum_among(const struct sup *S, unsigned alive)
{
	unsigned voters = sup_voter_count(S);
	return sup_quorum_with(S, alive, voters > 0 ? voters : sup_live_count(S));
}

void sup_committed_by(struct sup *S, unsigned agreeing, size_t bytes)
{
	if (S->k >= 2 && agreeing < S->k / 2 + 1 && bytes > 0) {
		S->degraded_commits++;
		S->degraded_bytes += bytes;
	}
}

enum sup_state sup_state(const struct sup *S)
{
	unsigned live = sup_voter_count(S);
	if (S->k < 2)
		return SUP_VOTING;
	if (live < sup_client_quorum_among(S, live))
		return SUP_REFUSING;
	return live < S->k / 2 + 1 ? SUP_DEGRADED : SUP_VOTING;
}

double sup_state_seconds(const struct sup *S, enum sup_state st)
{
	return S->state_seconds[st] + (S->state == st && st != SUP_VOTING ? sup_now() - S->state_since : 0);
}

/* Says when the run enters and leaves the degraded and refusing states,
 * and counts them (the report, diehard status, STATUS=). */
void sup_degraded_tick(struct sup *S)
{
	enum sup_state now = sup_state(S);
	if (now == S->state || S->stopping || S->stop_ev != NULL || sup_vote_over(S))
		return;
	double t = sup_now();
	if (S->state != SUP_VOTING)
		S->state_seconds[S->state] += t - S->state_since;
	unsigned live = sup_voter_count(S), majority = S->k / 2 + 1;
	if (now == SUP_DEGRADED) {
		S->state_periods[SUP_DEGRADED]++;
		log_warn("degraded: %u of the %u replicas vote (a majority is %u); what %s agrees on is committed "
			 "until replacements join (--min-voters %u)", live, S->k, majority,
			 live == 1 ? "that one" : "they all", sup_min_voters(S));
	} else if (now == SUP_REFUSING) {
		S->state_periods[SUP_REFUSING]++;
		log_warn("refusing: %u of the %u replicas vote, fewer than --min-voters %u: nothing is committed "
			 "until replacements join", live, S->k, sup_min_voters(S));
	} else {
		log_warn("%u of the %u replicas vote again: no longer %s (%.1f s)", live, S->k,
			 S->state == SUP_DEGRADED ? "degraded" : "refusing", t - S->state_since);
	}
	S->state = now;
	S->state_since = t;
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


/* Whether r's exit status votes: a live replica's does, but not one the
 * stop found still replaying connections (net.c), unless no other is left. */
static bool status_votes(const struct sup *S, const struct replica *r, unsigned unready)
{
	if (!r->live)
		return false;
	if (!r->stop_unready)
		return true;
	unsigned live = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		live += S->r[i].live;
	return live == unready;
}

/* Two voters' results agree: the same exit status and the same changes
 * to their files (files.h). */
static bool same_result(const struct sup *S, const struct replica *a, const struct replica *b)
{
	(void)S;
	return replica_status(a->wstatus) == replica_status(b->wstatus) && files_agree(a, b);
}

static bool same_status(const void *ctx, unsigned i, unsigned j)
{
	const struct sup *S = ctx;
	return same_result(S, &S->r[i], &S->r[j]);
}

/* The voters whose exit status the fewest others share (slot bits): in a
 * tie with every slot taken, one of them leaves the vote (replace_wait). */
static uint64_t status_weakest(const struct sup *S, unsigned unready)
{
	uint64_t voters = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		voters |= (uint64_t)status_votes(S, &S->r[i], unready) << i;
	return replace_loners(voters, S->nslots, same_status, S);
}

/* Whether every voter is reaped with no pipe open. Replicas out of the
 * vote are not waited for: a killed one may be kept stopped by whoever
 * stopped it (its end comes with the run's: replicas_end), and
 * replacements still catching up have nothing to say yet. */
static bool voters_done(const struct sup *S)
{
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (!r->used || !r->live || r->joining)
			continue;
		if (!r->exited || r->out_fd[0] >= 0 || r->out_fd[1] >= 0)
			return false;
	}
	return true;
}

/* The voters' results (exit status and files: same_result), their slots
 * in slots[0..*n), and the one a quorum of them agrees on (true, *code and
 * *winner, a slot that holds it), the most common if several could. */
static bool status_quorum(const struct sup *S, int *code, unsigned *winner, unsigned *slots, unsigned *n)
{
	unsigned unready = 0;
	*n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		unready += S->r[i].live && S->r[i].stop_unready;
	for (unsigned i = 0; i < S->nslots; i++)
		if (status_votes(S, &S->r[i], unready))
			slots[(*n)++] = i;
	/* Replicas the stop found replaying took no client: the status is
	 * voted among those that did, as a client's reply was (one left
	 * decides, degraded). */
	unsigned quorum = unready > 0 ? sup_quorum_with(S, *n, *n) : sup_quorum(S);
	int best = -1;
	unsigned best_same = 0;
	for (unsigned i = 0; i < *n; i++) {
		unsigned same = 0;
		for (unsigned j = 0; j < *n; j++)
			same += same_result(S, &S->r[slots[j]], &S->r[slots[i]]);
		if (same >= quorum && same > best_same) {
			best = (int)i;
			best_same = same;
		}
	}
	if (best >= 0) {
		*winner = slots[best];
		*code = replica_status(S->r[*winner].wstatus);
	}
	return best >= 0;
}

bool sup_vote_over(const struct sup *S)
{
	if (S->stopping || !voters_done(S))
		return false;
	for (int s = 0; s < NSTREAMS; s++)
		if (!S->s[s].ended)
			return false;
	int code;
	unsigned n, winner, slots[VOTER_MAX];
	return status_quorum(S, &code, &winner, slots, &n);
}

/* Everything is over when every voter is reaped with no pipe open, the
 * streams' ends are agreed and a quorum agrees on the exit status. Neither
 * replicas killed (reaped or not) nor replacements still catching up are
 * waited for. */
void sup_check_done(struct sup *S)
{
	if (S->stopping || !voters_done(S))
		return;
	/* Final votes: every stream is at end of stream for every voter. */
	for (int s = 0; s < NSTREAMS; s++) {
		output_vote(S, &S->s[s], VOTER_CHUNKS);
		if (S->stopping)
			return;
	}
	for (int s = 0; s < NSTREAMS; s++)
		if (!S->s[s].ended)
			return; /* a replacement is to break a tie */
	/* The exit status, voted among the replicas still in the vote. */
	int code;
	unsigned n, winner, slots[VOTER_MAX], unready = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		unready += S->r[i].live && S->r[i].stop_unready;
	if (status_quorum(S, &code, &winner, slots, &n)) {
		S->files_winner = (int)winner + 1;
		for (unsigned j = 0; j < S->nslots; j++) {
			struct replica *r = &S->r[j];
			if (status_votes(S, r, unready) && replica_status(r->wstatus) == code &&
			    !files_agree(r, &S->r[winner])) {
				files_divergence(S, r, &S->r[winner]);
				r->live = false;
				continue;
			}
			if (status_votes(S, r, unready) && replica_status(r->wstatus) != code) {
				char why[96];
				snprintf(why, sizeof why, "exit status %d differs from the majority's %d",
					 replica_status(r->wstatus), code);
				report_status_divergence(S->report, r->id, replica_status(r->wstatus), code);
				char mine[16], theirs[16];
				snprintf(mine, sizeof mine, "%d", replica_status(r->wstatus));
				snprintf(theirs, sizeof theirs, "%d", code);
				ci_divergence(S, (int)r->id, "status", 0, mine, theirs);
				log_event("divergence: replica %u %s", r->id, why);
				r->live = false;
			}
		}
		report_set_exit(S->report, code, NULL);
		sup_finish(S, code);
		return;
	}
	if (S->k >= 3 && n > 0 && replace_wait(S, "no majority on the exit status and files", status_weakest(S, unready)))
		return;
	/* Where the statuses alone would agree, the files are what split them. */
	bool files_split = false, statuses_split = false;
	for (unsigned i = 0; i + 1 < n; i++)
		for (unsigned j = i + 1; j < n; j++) {
			bool same = replica_status(S->r[slots[i]].wstatus) == replica_status(S->r[slots[j]].wstatus);
			statuses_split |= !same;
			if (same && !files_split && !files_agree(&S->r[slots[i]], &S->r[slots[j]])) {
				files_divergence(S, &S->r[slots[j]], &S->r[slots[i]]);
				files_split = true;
			}
		}
	if (files_split && !statuses_split) {
		log_warn("no majority on the files the replicas wrote (their exit status, %d, agrees): nothing is committed",
			 replica_status(S->r[slots[0]].wstatus));
		report_no_quorum(S->report, "files", 0, "the files written disagree", "");
		sup_finish(S, EXIT_NO_QUORUM);
		return;
	}
	char list[256];
	size_t o = 0;
	list[0] = '\0';
	for (unsigned i = 0; i < S->nslots && o + 32 < sizeof list; i++)
		if (status_votes(S, &S->r[i], unready))
			o += (size_t)snprintf(list + o, sizeof list - o, "%sreplica %u: %d", o ? ", " : "", S->r[i].id,
					      replica_status(S->r[i].wstatus));
	log_warn("no majority on the exit status (%s)", n ? list : "no replica left");
	report_no_quorum(S->report, "status", 0, "the exit statuses disagree", list);
	ci_divergence(S, -1, "status", 0, NULL, NULL);
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

/* Whether r holds back the input a quorum of the other voters wait for:
 * the ring is full, r has not read its oldest byte, and they have read all
 * of it (or closed their stdin). */
static bool holds_input(struct sup *S, const struct replica *r)
{
	if (!r->live || r->in_fd < 0 || r->log_fed || ring_free(S->in) > 0 || r->in_off > S->in->head ||
	    r->in_off >= S->in->tail)
		return false;
	unsigned waiting = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *o = &S->r[i];
		waiting += o != r && o->live && !o->exited && (o->in_fd < 0 || o->in_off >= S->in->tail);
	}
	return waiting >= sup_quorum(S);
}

/* A gap between two ticks longer than this is time diehard did not run
 * (it was stopped: ^Z, SIGSTOP; or starved of CPU): it counts against no
 * replica. */
#define TICK_GAP 1.0

/* Moves a straggler clock started before a gap of `gap` seconds on by as
 * much. */
static void pause_clock(double *since, double gap)
{
	if (*since != 0)
		*since += gap;
}

/* diehard did not run for gap seconds: its straggler clocks did not run
 * either. A ^Z stops the replicas with diehard (it forwards the stop) and
 * a fg continues them after it: none of them is a straggler for the time
 * the user held the job, nor for the moment it takes them to run again. */
static void pause_clocks(struct sup *S, double gap)
{
	log_event("diehard did not run for %.1f s (stopped, or starved of CPU): the straggler clocks skip that time",
		  gap);
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		pause_clock(&r->behind_since, gap);
		pause_clock(&r->exit_wait_since, gap);
		pause_clock(&r->input_stall_since, gap);
		if (r->killed_at != 0)
			r->killed_at += gap;
	}
	for (size_t z = 0; z < S->nzombies; z++)
		S->zombies[z].killed_at += gap;
	net_pause(S->net, gap);
}

/* Stragglers: a voter or a replacement that trails the committed output,
 * or a voter still running once the majority exited or once another voter
 * finished (exited, not by a signal) while it stays silent, or a voter
 * that stopped reading the input the others wait for, for longer than
 * --timeout. Output (or, for the last, reading) restarts the clock: slow
 * is not hung. A replica stopped by a signal from outside (its program,
 * anything it started, or its init, which then cannot report its end) is
 * silent: a straggler by the same rules. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	overcap_tick(S);
	double t = sup_now(), limit = S->o->straggler_ms / 1000.0;
	if (S->last_tick != 0 && t - S->last_tick > TICK_GAP)
		pause_clocks(S, t - S->last_tick - TICK_MS / 1000.0);
	S->last_tick = t;
	replicas_force(S);
	unsigned exited_live = 0, finished = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		/* A replica killed from outside did not finish. */
		exited_live += r->live && r->exited && !r->sigkilled;
		finished += r->live && r->exited && WIFEXITED(r->wstatus);
	}
	unsigned quorum = sup_quorum(S);
	/* A daemon's replica that ended by itself while the others serve on
	 * (a quorum runs, and clients were answered after it ended): after
	 * --timeout it is the odd one (killed and replaced), not they
	 * stragglers. A daemon that ends of itself ends in every replica
	 * within that time; a program that listens but has answered no one
	 * since (a test suite's server) keeps the usual rule. Not under --ci. */
	double first_end = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		double end = S->t_start + r->end_time;
		if (r->live && r->exited && !r->sigkilled && (first_end == 0 || end < first_end))
			first_end = end;
	}
	bool serving_on = sup_serves(S) && !S->o->ci && !S->stopping && S->stop_ev == NULL && exited_live < quorum &&
			  first_end != 0 && net_last_answer(S->net) > first_end;
	if (serving_on)
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *r = &S->r[i];
			if (r->live && r->exited && !r->sigkilled && t - S->t_start - r->end_time > limit) {
				char why[128];
				snprintf(why, sizeof why, "ended by itself (status %d) while the others serve on",
					 replica_status(r->wstatus));
				replica_kill(S, r, why);
			}
		}
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		replace_give_back(S, r);
		if (!r->live && !r->joining)
			continue;
		/* A fresh server waiting for a quiet point to join is behind
		 * by design (net.c). */
		bool behind = false;
		for (int s = 0; s < NSTREAMS && !r->fresh; s++)
			behind |= r->ring[s]->head < S->s[s].committed;
		char why[128];
		if (overdue(&r->behind_since, behind, t, limit)) {
			snprintf(why, sizeof why, "straggler: behind the committed output and silent for more than %.1f s",
				 limit);
			replica_kill(S, r, why);
		} else if (overdue(&r->exit_wait_since,
				   r->live && !r->exited && (exited_live >= quorum || (finished > 0 && !serving_on)), t,
				   limit)) {
			snprintf(why, sizeof why, "straggler: still running, silent, %.1f s after %s", limit,
				 exited_live >= quorum ? "the majority exited" : "another replica finished");
			replica_kill(S, r, why);
		} else {
			if (r->in_off != r->input_seen)
				r->input_stall_since = 0;
			r->input_seen = r->in_off;
			if (overdue(&r->input_stall_since, holds_input(S, r), t, limit)) {
				snprintf(why, sizeof why,
					 "straggler: stopped reading its input for more than %.1f s while the others "
					 "wait for it", limit);
				replica_kill(S, r, why);
			}
		}
	}
	sup_degraded_tick(S);
	if (S->notify != NULL)
		notify_tick(S->notify);
	net_tick(S->net);
	files_tick(S);
	replace_maintain(S);
	for (int s = 0; s < NSTREAMS; s++)
		output_vote(S, &S->s[s], VOTER_CHUNKS);
	input_update(S);
	sup_check_done(S);
}


/* Whether the voters that have ended (reaped, output closed) are enough
 * to decide the exit status on their own: a quorum of them, counted as if
 * the others had left the vote, agree. */
static bool ended_decide(const struct sup *S)
{
	int codes[VOTER_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (r->used && r->live && !r->joining && r->exited && r->out_fd[0] < 0 && r->out_fd[1] < 0)
			codes[n++] = replica_status(r->wstatus);
	}
	unsigned quorum = sup_quorum_among(S, n);
	for (unsigned i = 0; i < n; i++) {
		unsigned same = 0;
		for (unsigned j = 0; j < n; j++)
			same += codes[j] == codes[i];
		if (same >= quorum)
			return true;
	}
	return false;
}

/* The replicas had --stop-timeout to end after a SIGTERM or SIGINT. When
 * enough of them ended to decide the vote, the ones still running are
 * stragglers (stopped by a signal from outside, perhaps): killed, and the
 * run ends with the vote. Otherwise what still runs is killed, and the
 * stop was not clean. */
static void on_stop_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	char why[128];
	snprintf(why, sizeof why, "still running %.1f s after signal %d (--stop-timeout)", S->o->stop_ms / 1000.0,
		 S->stop_signal);
	if (ended_decide(S)) {
		char straggler[160];
		snprintf(straggler, sizeof straggler, "straggler: %s", why);
		for (unsigned i = 0; i < S->nslots; i++)
			if (S->r[i].live && !S->r[i].joining && !S->r[i].exited)
				replica_kill(S, &S->r[i], straggler);
		sup_check_done(S);
		if (S->stopping)
			return;
	}
	log_warn("replicas %s: killed", why);
	report_set_exit(S->report, 128 + SIGKILL, why);
	sup_finish(S, 128 + SIGKILL);
}


/* The seccomp filter for the current sandbox (rebuilt when namespaces turn
 * out to be refused). */
static void build_filter(struct sup *S)
{
	free(S->filter.filter);
	struct filter_spec spec = { .notify = S->virt != NULL, .sleeps = S->o->respawns > 0,
				    .sandboxed = S->ns_flags != 0, .net_private = S->net_private,
				    .points = files_points_wanted(S), .supervisor = getpid(), .supervisor_group = getpgrp() };
	if (S->virt != NULL)
		virt_clock_marks(S->virt, &spec.pass_mark, &spec.ask_mark, &spec.exec_mark);
	S->exec_mark = spec.exec_mark;
	if (filter_build(&S->filter, &spec) != 0)
		fatal(EXIT_INTERNAL, "cannot build the seccomp filter");
}


bool sup_sandbox_refused(struct sup *S, int err, unsigned long which)
{
	if (S->o->sandbox == SANDBOX_ON)
		return false;
	/* One namespace alone (the replica said which): the others are kept,
	 * and it is said once. */
	if (which == CLONE_NEWNET) {
		log_warn("no network namespace for the replicas (%s): they share diehard's network, where servers "
			 "among them collide on their ports (--net host: this without the warning)",
			 strerror(err));
		S->ns_flags &= ~(unsigned long)CLONE_NEWNET;
		S->net_private = false;
		report_sandbox(S->report, sandbox_describe(S->ns_flags), NULL);
		report_sandbox_refused(S->report, "network", strerror(err));
		build_filter(S);
		return true;
	}
	if (which == CLONE_NEWUSER) {
		log_warn("no user namespace for the replicas (%s): root in them is root of the host's, and can "
			 "unmount their /proc to reach the host's processes (--sandbox on: refuse to run instead)",
			 strerror(err));
		S->ns_flags &= ~(unsigned long)CLONE_NEWUSER;
		report_sandbox(S->report, sandbox_describe(S->ns_flags), NULL);
		report_sandbox_refused(S->report, "user", strerror(err));
		return true;
	}
	log_warn("no namespaces for the replicas (%s: %s): they run in diehard's pid space and /proc, where a "
		 "replica can still open another's /proc/PID/mem; the seccomp filter refuses them ptrace, "
		 "process_vm_*, pidfd_getfd, kcmp and signals to diehard (--sandbox off: this without the warning)",
		 sandbox_describe(S->ns_flags), strerror(err));
	S->ns_flags = 0;
	S->net_private = false;
	report_sandbox(S->report, "none", strerror(err));
	build_filter(S);
	overcap_sandbox(S);
	return true;
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
	if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
		S->stop_signal = (int)sig; /* the run may end by it: so do we */
	if ((sig == SIGTERM || sig == SIGINT) && S->stop_ev == NULL) {
		if (S->notify != NULL)
			notify_stopping(S->notify);
		virt_stop_clocks(S->virt);
		net_stop(S->net);
		struct timeval grace = { .tv_sec = S->o->stop_ms / 1000, .tv_usec = (S->o->stop_ms % 1000) * 1000 };
		S->stop_at = sup_now() - S->t_start;
		S->stop_ev = evtimer_new(S->base, on_stop_timeout, S);
		if (S->stop_ev == NULL || evtimer_add(S->stop_ev, &grace) != 0)
			fatal(EXIT_INTERNAL, "cannot start the stop timer");
	}
	int forward = sig == SIGTSTP ? SIGSTOP : (int)sig;
	bool running = false;
	for (unsigned i = 0; i < S->nslots; i++)
		if (S->r[i].used && !S->r[i].exited) {
			replica_signal(&S->r[i], forward);
			running = true;
		}
	/* Nobody left to end by it: the run ends as the signal asked. */
	if (!running && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)) {
		log_warn("signal %d and no replica running: stopping", (int)sig);
		sup_finish(S, 128 + (int)sig);
		return;
	}
	if (sig == SIGTSTP)
		(void)kill(getpid(), SIGSTOP); /* stop ourselves too, like a shell job */
}


/* Asked to stop by sig, the replicas died of it: so does diehard, as a
 * shell does, which a service manager counts as a clean stop (an exit
 * status of 143 it would not). */
static void die_by(int sig)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (signal(sig, SIG_DFL) == SIG_ERR || sigprocmask(SIG_UNBLOCK, &set, NULL) != 0 || raise(sig) != 0)
		return; /* the status then says it (128 + sig) */
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
	/* Not dumpable: no process of the same user (a replica without
	 * namespaces, or anything else) may trace us or open our memory. */
	if (prctl(PR_SET_DUMPABLE, 0) != 0)
		fatal(EXIT_INTERNAL, "prctl(PR_SET_DUMPABLE): %s", strerror(errno));
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
	/* Precise timers (a timerfd under epoll, not epoll's milliseconds):
	 * the fast clock path's harvest comes every few hundred microseconds
	 * while replicas read a clock hard (take.c, fastclock_harvest_delay). */
	struct event_config *cfg = event_config_new();
	if (cfg == NULL || event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER) != 0)
		fatal(EXIT_INTERNAL, "cannot configure the event loop");
	S->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (S->base == NULL)
		fatal(EXIT_INTERNAL, "cannot create the event loop");
	/* Slots: k, and as many spares for tie-breakers when k >= 3. */
	S->nslots = S->k;
	if (S->k >= 3 && o->respawns > 0)
		S->nslots = 2 * S->k < VOTER_MAX ? 2 * S->k : VOTER_MAX;
	/* Rings: per slot stdout, stderr; per stream the history; the input. */
	unsigned nrings = S->nslots * NSTREAMS + NSTREAMS + 1;
	S->arena = arena_create(nrings, o->window);
	if (S->arena == NULL)
		fatal(EXIT_INTERNAL, "cannot create the output arena: %s", strerror(errno));
	for (int s = 0; s < NSTREAMS; s++)
		S->s[s] = (struct stream){ .fd = s + 1, .name = s == 0 ? "stdout" : "stderr", .client_reads = -1,
					   .hist = arena_ring(S->arena, S->nslots * NSTREAMS + (unsigned)s) };
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

	replace_init(S);
	report_virtualize(S->report, o->virtualize);
	report_respawns(S->report, o->respawns, o->respawn_rate);
	if (o->virtualize)
		S->virt = virt_new(S);
	/* A private network needs namespaces, and the seccomp listener
	 * through which the proxy learns of the replicas' listen() calls
	 * (virt/netcalls.c): main.c said so when it mattered. */
	S->net_private = o->net == NET_PRIVATE && o->sandbox != SANDBOX_OFF && S->virt != NULL;
	S->ns_flags = o->sandbox == SANDBOX_OFF ? 0 : sandbox_clone_flags(S->net_private);
	report_sandbox(S->report, S->ns_flags ? sandbox_describe(S->ns_flags) : "none",
		       S->ns_flags ? NULL : "--sandbox off");
	build_filter(S);

	S->ci = ci_new(S);
	S->fencelog = fencelog_new(S->report);
	S->r = calloc(S->nslots, sizeof *S->r);
	if (S->r == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	if (o->replay == NULL)
		S->notify = notify_new(S);
	S->net = net_new(S);
	files_init(S);
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		*r = (struct replica){ .index = i, .in_fd = -1, .status_fd = -1, .net_fd = -1, .program_pidfd = -1, .out_fd = { -1, -1 },
				       .replaces = -1 };
		for (int s = 0; s < NSTREAMS; s++)
			r->ring[s] = arena_ring(S->arena, i * NSTREAMS + (unsigned)s);
	}
	S->control = control_open(S); /* before the first spawn: its events are in the history */
	overcap_init(S);
	replicas_start(S, S->k);

	input_start(S);
	S->idle_ev = evtimer_new(S->base, output_on_idle, S);
	S->tick_ev = event_new(S->base, -1, EV_PERSIST, on_tick, S);
	struct timeval tick = { .tv_sec = 0, .tv_usec = TICK_MS * 1000 };
	if (S->idle_ev == NULL || S->tick_ev == NULL || event_add(S->tick_ev, &tick) != 0)
		fatal(EXIT_INTERNAL, "cannot create timers");

	event_base_dispatch(S->base);
	for (unsigned i = 0; i < S->nslots; i++) {
		if (S->r[i].joining && !S->r[i].exited)
			report_stopped(S->report, S->r[i].id, "the run ended before it caught up", sup_now() - S->t_start,
				       S->r[i].in_off);
		if (S->r[i].used && !S->r[i].exited && !S->r[i].killed)
			report_input_fed(S->report, S->r[i].id, S->r[i].in_off);
	}
	if (S->notify != NULL)
		notify_finish(S->notify);
	report_end(S->report, sup_live_count(S), S->respawns, S->respawns_back, S->tie_evictions);
	report_quorum(S->report, sup_min_voters(S), S->state_periods[SUP_DEGRADED],
		      sup_state_seconds(S, SUP_DEGRADED), S->state_periods[SUP_REFUSING],
		      sup_state_seconds(S, SUP_REFUSING), S->degraded_commits, S->degraded_bytes);
	for (unsigned i = 0; i < S->nslots; i++)
		ci_retire(S, &S->r[i]);
	/* Whatever is left (replicas the vote did not wait for, killed ones
	 * something keeps stopped) is killed and reaped: nothing of the run
	 * outlives it. Then their cgroups go. */
	replicas_end(S);
	overcap_finish(S);
	for (unsigned i = 0; i < S->nslots; i++)
		fencelog_collect(S->fencelog, i);
	net_free(S->net);
	S->net = NULL;
	if (S->virt != NULL)
		virt_finish(S->virt);
	S->exit_code = ci_finish(S, S->exit_code);
	/* The files last: a replay --ci's search started saw the run's
	 * starting state, as every replica did. */
	/* --ci that found a memory error commits nothing: the run's results
	 * are suspect, as its verdict says. */
	if (S->o->ci && S->exit_code == EXIT_CI_FAILED)
		S->files_winner = 0;
	if (S->files_winner > 0 && !files_commit(S, &S->r[S->files_winner - 1]) && S->exit_code == 0)
		S->exit_code = EXIT_FILES_FAILED;
	else if (S->files_winner == 0)
		files_uncommitted(S);
	for (unsigned i = 0; i < S->nslots; i++)
		files_release(&S->r[i]);
	files_end(S);
	report_set_exit(S->report, S->exit_code, NULL);
	/* complete first: it flushes the log's tail, which may release its
	 * front. */
	bool in_complete = inputlog_complete(S->inlog) || (S->inlog != NULL && inputlog_bytes(S->inlog) == 0);
	report_input_log(S->report, inputlog_bytes(S->inlog), inputlog_retained_from(S->inlog), in_complete);
	report_write(S->report);
	fencelog_free(S->fencelog);
	inputlog_free(S->inlog);
	control_close(S->control);
	if (S->stop_signal != 0 && S->exit_code == 128 + S->stop_signal)
		die_by(S->stop_signal);
	return S->exit_code;
}
