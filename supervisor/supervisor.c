/* supervisor.c — the replicas, their pipes and the vote, in one libevent loop.
 *
 * Data flow:
 *   stdin --read--> input ring --write--> each replica's stdin pipe
 *   replica stdout/stderr pipe --read--> its ring in the arena
 *       --voter--> committed bytes --write--> our stdout/stderr (+ history ring)
 *
 * Input: stdin is read once into a ring shared by all replicas; each replica
 * has its own offset into it. Reading stops while the ring is full, so a
 * replica that does not read holds the others back instead of making us grow
 * (and is then killed as a straggler if the quorum is left waiting).
 *
 * Output: per stream, C bytes are committed. A replica whose ring starts at C
 * votes on what follows; one that has not reached C yet ("behind") is checked
 * against the history ring of committed bytes as its output arrives. Voting
 * happens per 4 KiB chunk as data arrives, on a final short chunk at end of
 * stream, and on any agreed prefix when the replicas have been quiet for
 * idle_ms (interactive programs).
 *
 * Verdicts: a replica that wrote something else than what was committed, that
 * trails the quorum for longer than straggler_ms or by more than its window,
 * or that does not exit within straggler_ms of the quorum, is killed with
 * SIGKILL and leaves the vote. When no quorum can ever form, we stop at once,
 * commit nothing more and exit EXIT_NO_QUORUM. The exit status is voted too.
 */
#include "supervisor.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "exitcode.h"
#include "inputlog.h"
#include "log.h"
#include "report.h"
#include "spawn.h"
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
	double behind_since;       /* when it started trailing a committed offset */
	double exit_wait_since;    /* when the quorum had exited without it */
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
	int exit_code;
	struct report *report;
	double t_start;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned live_count(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->k; i++)
		n += S->r[i].live;
	return n;
}

static void finish(struct sup *S, int code)
{
	if (S->stopping)
		return;
	S->stopping = true;
	S->exit_code = code;
	event_base_loopbreak(S->base);
}

/* ---- replicas ------------------------------------------------------- */

static void update_input_events(struct sup *S);

static void close_input(struct replica *r)
{
	if (r->in_fd < 0)
		return;
	event_free(r->in_ev);
	r->in_ev = NULL;
	close(r->in_fd);
	r->in_fd = -1;
}

static void close_output(struct replica *r, int s)
{
	if (r->out_fd[s] < 0)
		return;
	event_free(r->out_ev[s]);
	r->out_ev[s] = NULL;
	close(r->out_fd[s]);
	r->out_fd[s] = -1;
	r->eof[s] = true;
}

/* Signals a replica's process group (it leads one: spawn.c), as a terminal
 * signals a whole job, so its own children get it too. */
static void signal_replica(struct replica *r, int sig)
{
	if (kill(-r->pid, sig) != 0 && kill(r->pid, sig) != 0 && errno != ESRCH)
		log_warn("cannot signal replica %u (pid %d): %s", r->index, (int)r->pid, strerror(errno));
}

/* Takes r out of the vote for good and kills it. */
static void replica_kill(struct sup *S, struct replica *r, const char *why)
{
	if (!r->live)
		return;
	r->live = false;
	r->killed = true;
	snprintf(r->why, sizeof r->why, "%s", why);
	if (!r->exited)
		signal_replica(r, SIGKILL);
	log_event("kill replica %u (pid %d): %s", r->index, (int)r->pid, why);
	report_kill(S->report, r->index, why, now() - S->t_start);
	close_input(r);
	for (int s = 0; s < NSTREAMS; s++)
		close_output(r, s);
	update_input_events(S); /* it may have been the slowest reader */
}

static void kill_all(struct sup *S)
{
	for (unsigned i = 0; i < S->k; i++)
		if (!S->r[i].exited)
			signal_replica(&S->r[i], SIGKILL);
}

/* ---- input ---------------------------------------------------------- */

static void update_input_events(struct sup *S);

/* The input ring may drop what every replica still reading has consumed. */
static void input_advance_head(struct sup *S)
{
	size_t low = S->in->tail;
	for (unsigned i = 0; i < S->k; i++)
		if (S->r[i].in_fd >= 0 && S->r[i].in_off < low)
			low = S->r[i].in_off;
	ring_consume_to(S->in, low);
}

static void on_stdin(evutil_socket_t fd, short what, void *arg);

static void write_input(struct sup *S, struct replica *r)
{
	while (r->in_fd >= 0 && r->in_off < S->in->tail) {
		ssize_t n = write(r->in_fd, ring_at(S->in, r->in_off), S->in->tail - r->in_off);
		if (n > 0) {
			r->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		/* EPIPE: the program closed its stdin or died; it reads no more. */
		close_input(r);
	}
	if (r->in_fd >= 0 && r->in_off == S->in->tail && S->stdin_eof)
		close_input(r);
}

static void on_input_writable(evutil_socket_t fd, short what, void *arg);

static void update_input_events(struct sup *S)
{
	for (unsigned i = 0; i < S->k; i++) {
		struct replica *r = &S->r[i];
		if (r->in_fd < 0)
			continue;
		if (r->in_off < S->in->tail)
			event_add(r->in_ev, NULL);
		else
			event_del(r->in_ev);
	}
	input_advance_head(S);
	bool want = !S->stdin_eof && ring_free(S->in) > 0;
	if (S->stdin_ev == NULL)
		return;
	if (!S->stdin_pollable) {
		if (want && !event_pending(S->stdin_ev, EV_READ, NULL))
			event_active(S->stdin_ev, EV_READ, 0);
	} else if (want && S->stdin_paused) {
		event_add(S->stdin_ev, NULL);
		S->stdin_paused = false;
	} else if (!want && !S->stdin_paused) {
		event_del(S->stdin_ev);
		S->stdin_paused = true;
	}
}

struct input_arg {
	struct sup *S;
	struct replica *r;
};

static void on_input_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct input_arg *a = arg;
	write_input(a->S, a->r);
	update_input_events(a->S);
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	size_t room = ring_free(S->in);
	if (room == 0) {
		update_input_events(S);
		return;
	}
	ssize_t n = read(STDIN_FILENO, ring_at(S->in, S->in->tail), room);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		log_warn("reading stdin: %s", strerror(errno));
		n = 0;
	}
	if (n == 0) {
		S->stdin_eof = true;
		if (S->stdin_pollable)
			event_del(S->stdin_ev);
		S->stdin_paused = true;
	} else {
		inputlog_append(S->inlog, ring_at(S->in, S->in->tail), (size_t)n);
		S->in->tail += (size_t)n;
		report_input(S->report, (size_t)n);
	}
	for (unsigned i = 0; i < S->k; i++)
		write_input(S, &S->r[i]);
	update_input_events(S);
}

/* ---- output and the vote ---------------------------------------------- */

static void arm_idle(struct sup *S)
{
	struct timeval tv = { .tv_sec = S->o->idle_ms / 1000, .tv_usec = (S->o->idle_ms % 1000) * 1000 };
	event_add(S->idle_ev, &tv);
}

/* Hex excerpt of up to 16 bytes, for messages and the report. */
static void excerpt(char *out, size_t cap, const unsigned char *p, size_t len)
{
	size_t n = len < 16 ? len : 16, o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && o + 3 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%02x", p[i]);
}

static void mask_names(char *out, size_t cap, uint64_t mask)
{
	size_t o = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < 64 && o + 4 < cap; i++)
		if (mask & ((uint64_t)1 << i))
			o += (size_t)snprintf(out + o, cap - o, "%s%u", o ? "," : "", i);
	if (o == 0)
		snprintf(out, cap, "none");
}

/* Writes committed bytes to the world. A closed reader ends the run the way
 * SIGPIPE ends a plain program. */
static void emit(struct sup *S, struct stream *st, const unsigned char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(st->fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* Our fd is non-blocking (shared with someone who set it so):
			 * wait for room rather than spin. */
			fd_set w;
			FD_ZERO(&w);
			FD_SET(st->fd, &w);
			(void)select(st->fd + 1, NULL, &w, NULL, NULL);
			continue;
		}
		if (n < 0 && errno == EPIPE) {
			log_event("%s closed by its reader: stopping", st->name);
			kill_all(S);
			report_set_exit(S->report, 128 + SIGPIPE, "output closed");
			report_write(S->report);
			signal(SIGPIPE, SIG_DFL);
			raise(SIGPIPE);
		}
		log_warn("writing %s: %s", st->name, strerror(errno));
		kill_all(S);
		finish(S, EXIT_INTERNAL);
		return;
	}
}

/* The committed (or majority) bytes at stream offset at, for messages. */
static void majority_excerpt(struct sup *S, struct stream *st, size_t at, uint64_t agree, char *out, size_t cap)
{
	out[0] = '\0';
	if (st->hist->head <= at && at < st->hist->tail) {
		excerpt(out, cap, ring_at(st->hist, at), st->hist->tail - at);
		return;
	}
	if (agree == 0)
		return;
	struct ring *wr = S->r[__builtin_ctzll(agree)].ring[st - S->s];
	if (wr->head <= at && at < wr->tail)
		excerpt(out, cap, ring_at(wr, at), wr->tail - at);
}

/* Records that replica i wrote something else than the majority (agree; 0:
 * the committed output) at stream offset at. */
static void record_divergence(struct sup *S, struct stream *st, size_t at, uint64_t agree, unsigned i,
			      const char *kind)
{
	char who[128], theirs[40], mine[40] = "";
	mask_names(who, sizeof who, agree);
	majority_excerpt(S, st, at, agree, theirs, sizeof theirs);
	struct ring *rr = S->r[i].ring[st - S->s];
	if (rr->head <= at && at < rr->tail)
		excerpt(mine, sizeof mine, ring_at(rr, at), rr->tail - at);
	report_divergence(S->report, st->name, at, agree, i, theirs, mine, kind, now() - S->t_start);
	log_event("divergence on %s at byte %zu: %s wrote %s, replica %u wrote %s", st->name, at,
		  agree ? who : "the committed output", theirs[0] ? theirs : "(end)", i, mine[0] ? mine : "(end)");
}

/* No quorum can form: say where and who, and stop. */
static void stop_no_quorum(struct sup *S, struct stream *st, const struct voter_result *res, const char *why)
{
	size_t at = st->committed + res->diff_offset;
	char sides[512];
	size_t o = 0;
	sides[0] = '\0';
	for (unsigned i = 0; i < S->k && o + 64 < sizeof sides; i++) {
		struct replica *r = &S->r[i];
		if (!r->live)
			continue;
		struct ring *rr = r->ring[st - S->s];
		char ex[40] = "";
		if (rr->head <= at && rr->tail > at)
			excerpt(ex, sizeof ex, ring_at(rr, at), rr->tail - at);
		o += (size_t)snprintf(sides + o, sizeof sides - o, "%sreplica %u: %s", o ? "; " : "", i,
				      ex[0] ? ex : "(end)");
	}
	log_warn("no majority on %s at byte %zu (%s): %s", st->name, at, why, sides);
	report_no_quorum(S->report, st->name, at, why, sides);
	kill_all(S);
	finish(S, EXIT_NO_QUORUM);
}

/* A replica that has not reached the committed offset: check what it wrote
 * since against the committed history. */
static void catch_up(struct sup *S, struct stream *st, struct replica *r)
{
	int s = (int)(st - S->s);
	struct ring *rr = r->ring[s];
	if (!r->live || (rr->head >= st->committed && !(st->ended && rr->tail > st->committed)))
		return;
	if (st->hist->head > rr->head) {
		char why[160];
		snprintf(why, sizeof why, "more than %zu bytes behind on %s", st->hist->size, st->name);
		replica_kill(S, r, why);
		return;
	}
	size_t end = rr->tail < st->committed ? rr->tail : st->committed;
	size_t n = end - rr->head;
	const unsigned char *mine = ring_at(rr, rr->head), *ours = ring_at(st->hist, rr->head);
	if (memcmp(mine, ours, n) != 0) {
		size_t d = 0;
		while (mine[d] == ours[d])
			d++;
		record_divergence(S, st, rr->head + d, 0, r->index, "late output differs");
		replica_kill(S, r, "output differs from the committed output");
		return;
	}
	if (r->eof[s] && rr->tail < st->committed) {
		record_divergence(S, st, rr->tail, 0, r->index, "output ended early");
		replica_kill(S, r, "its output ended before the committed output");
		return;
	}
	if (st->ended && rr->tail > st->committed) {
		record_divergence(S, st, st->committed, 0, r->index, "output past the agreed end");
		replica_kill(S, r, "wrote past the end the majority agreed on");
		return;
	}
	ring_consume_to(rr, end);
}

/* Writes out what was committed and not yet emitted: one write per vote,
 * not per chunk. */
static void flush(struct sup *S, struct stream *st)
{
	if (st->committed > st->emitted && !S->stopping) {
		emit(S, st, ring_at(st->hist, st->emitted), st->committed - st->emitted);
		st->emitted = st->committed;
	}
}

static void commit(struct sup *S, struct stream *st, const struct voter_result *res)
{
	int s = (int)(st - S->s);
	if (res->commit > 0) {
		unsigned w = (unsigned)__builtin_ctzll(res->agree);
		const unsigned char *p = ring_at(S->r[w].ring[s], st->committed);
		/* The history ring must not overwrite bytes not yet written out. */
		if (st->committed + res->commit - st->emitted > st->hist->size)
			flush(S, st);
		if (S->stopping)
			return;
		ring_push_overwrite(st->hist, p, res->commit);
		st->committed += res->commit;
		report_committed(S->report, st->name, res->commit);
		for (unsigned i = 0; i < S->k; i++)
			if (res->agree & ((uint64_t)1 << i))
				ring_consume_to(S->r[i].ring[s], st->committed);
	}
	if (res->ended) {
		flush(S, st);
		st->ended = true;
		log_event("%s: end agreed after %zu bytes", st->name, st->committed);
	}
}

/* Resumes reading replicas whose rings have room again. */
static void resume_reading(struct sup *S, int s)
{
	for (unsigned i = 0; i < S->k; i++) {
		struct replica *r = &S->r[i];
		if (r->out_paused[s] && r->out_fd[s] >= 0 && ring_free(r->ring[s]) > 0) {
			r->out_paused[s] = false;
			event_add(r->out_ev[s], NULL);
		}
	}
}

/* How far the committed output may still advance: never so far that a live
 * replica still behind could no longer be checked against the history ring.
 * Lag is bounded by backpressure, not by killing: scheduling alone puts one
 * replica of three on two cores megabytes behind. A replica that stays
 * behind is killed by the straggler timeout instead. */
static size_t commit_room(struct sup *S, struct stream *st)
{
	int s = (int)(st - S->s);
	size_t slowest = st->committed;
	for (unsigned i = 0; i < S->k; i++)
		if (S->r[i].live && S->r[i].ring[s]->head < slowest)
			slowest = S->r[i].ring[s]->head;
	return slowest + st->hist->size - st->committed;
}

/* Where diverged replica i first differs from the winning replica (the
 * voter's diff_offset is the smallest over all of them). */
static size_t first_difference(const struct voter_view *v, const struct voter_result *res, unsigned i)
{
	if (res->agree == 0)
		return res->diff_offset;
	const struct voter_view *w = &v[__builtin_ctzll(res->agree)];
	size_t n = v[i].len < w->len ? v[i].len : w->len, d = 0;
	while (d < n && v[i].data[d] == w->data[d])
		d++;
	return d;
}

static void vote(struct sup *S, struct stream *st, enum voter_mode mode)
{
	int s = (int)(st - S->s);
	for (unsigned i = 0; i < S->k; i++)
		catch_up(S, st, &S->r[i]);
	while (!S->stopping && !st->ended) {
		for (unsigned i = 0; i < S->k; i++)
			catch_up(S, st, &S->r[i]);
		unsigned live = live_count(S);
		unsigned quorum = voter_quorum(live, S->k);
		if (live < quorum) {
			struct voter_result none = { 0 };
			stop_no_quorum(S, st, &none, "too few replicas left");
			return;
		}
		struct voter_view v[VOTER_MAX];
		for (unsigned i = 0; i < S->k; i++) {
			struct replica *r = &S->r[i];
			struct ring *rr = r->ring[s];
			bool at_c = rr->head == st->committed;
			v[i] = (struct voter_view){
				.data = at_c ? ring_at(rr, st->committed) : NULL,
				.len = at_c ? rr->tail - st->committed : 0,
				.eof = at_c && r->eof[s],
				.live = r->live,
			};
		}
		struct voter_result res;
		voter_decide(v, S->k, quorum, CHUNK, mode, &res);
		for (unsigned i = 0; i < S->k; i++)
			if (res.diverged & ((uint64_t)1 << i)) {
				record_divergence(S, st, st->committed + first_difference(v, &res, i), res.agree, i,
						  "differs from the majority");
				replica_kill(S, &S->r[i], "output differs from the majority");
			}
		if (res.no_quorum) {
			stop_no_quorum(S, st, &res, "the replicas disagree");
			return;
		}
		if (res.commit == 0 && !res.ended)
			break;
		if (res.commit > commit_room(S, st))
			break; /* the slowest replica must catch up first */
		commit(S, st, &res);
		mode = VOTER_CHUNKS; /* a prefix vote commits once, then chunks go on */
	}
	flush(S, st);
	resume_reading(S, s);
}

static void check_done(struct sup *S);

struct output_arg {
	struct sup *S;
	struct replica *r;
	int s;
};

static void on_output(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct output_arg *a = arg;
	struct sup *S = a->S;
	struct replica *r = a->r;
	int s = a->s;
	struct ring *rr = r->ring[s];
	size_t room = ring_free(rr);
	if (room == 0) {
		event_del(r->out_ev[s]);
		r->out_paused[s] = true;
		vote(S, &S->s[s], VOTER_CHUNKS);
		return;
	}
	ssize_t n = read(fd, ring_at(rr, rr->tail), room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close_output(r, s);
	} else {
		rr->tail += (size_t)n;
		report_bytes(S->report, r->index, S->s[s].name, (size_t)n);
	}
	arm_idle(S);
	vote(S, &S->s[s], VOTER_CHUNKS);
	check_done(S);
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	for (int s = 0; s < NSTREAMS; s++)
		vote(S, &S->s[s], VOTER_PREFIX);
	check_done(S);
}

/* ---- exits, stragglers, the end ----------------------------------------- */

static int status_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return EXIT_INTERNAL;
}

/* Everything is over when every replica is reaped and has no pipe open. */
static void check_done(struct sup *S)
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
		vote(S, &S->s[s], VOTER_CHUNKS);
		if (S->stopping)
			return;
	}
	/* The exit status, voted among the replicas still in the vote. */
	int codes[VOTER_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < S->k; i++)
		if (S->r[i].live)
			codes[n++] = status_code(S->r[i].wstatus);
	unsigned quorum = voter_quorum(n, S->k);
	for (unsigned i = 0; i < n; i++) {
		unsigned same = 0;
		for (unsigned j = 0; j < n; j++)
			same += codes[j] == codes[i];
		if (same >= quorum) {
			for (unsigned j = 0; j < S->k; j++) {
				struct replica *r = &S->r[j];
				if (r->live && status_code(r->wstatus) != codes[i]) {
					char why[96];
					snprintf(why, sizeof why, "exit status %d differs from the majority's %d",
						 status_code(r->wstatus), codes[i]);
					report_status_divergence(S->report, j, status_code(r->wstatus), codes[i]);
					log_event("divergence: replica %u %s", j, why);
					r->live = false;
				}
			}
			report_set_exit(S->report, codes[i], NULL);
			finish(S, codes[i]);
			return;
		}
	}
	char list[256];
	size_t o = 0;
	list[0] = '\0';
	for (unsigned i = 0; i < S->k && o + 32 < sizeof list; i++)
		if (S->r[i].live)
			o += (size_t)snprintf(list + o, sizeof list - o, "%sreplica %u: %d", o ? ", " : "", i,
					      status_code(S->r[i].wstatus));
	log_warn("no majority on the exit status (%s)", n ? list : "no replica left");
	report_no_quorum(S->report, "status", 0, "the exit statuses disagree", list);
	finish(S, EXIT_NO_QUORUM);
}

static void reap(struct sup *S)
{
	for (;;) {
		int wstatus;
		pid_t pid = waitpid(-1, &wstatus, WNOHANG);
		if (pid <= 0)
			break;
		for (unsigned i = 0; i < S->k; i++) {
			struct replica *r = &S->r[i];
			if (r->pid != pid || r->exited)
				continue;
			r->exited = true;
			r->wstatus = wstatus;
			r->end_time = now() - S->t_start;
			report_exit(S->report, i, status_code(wstatus), WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0,
				    r->end_time);
			if (WIFSIGNALED(wstatus))
				log_event("replica %u (pid %d) killed by signal %d", i, (int)pid, WTERMSIG(wstatus));
			else
				log_event("replica %u (pid %d) exited with %d", i, (int)pid, WEXITSTATUS(wstatus));
		}
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	double t = now(), limit = S->o->straggler_ms / 1000.0;
	unsigned exited_live = 0;
	for (unsigned i = 0; i < S->k; i++)
		exited_live += S->r[i].live && S->r[i].exited;
	unsigned quorum = voter_quorum(live_count(S), S->k);
	for (unsigned i = 0; i < S->k; i++) {
		struct replica *r = &S->r[i];
		if (!r->live)
			continue;
		bool behind = false;
		for (int s = 0; s < NSTREAMS; s++)
			behind |= r->ring[s]->head < S->s[s].committed;
		if (!behind)
			r->behind_since = 0;
		else if (r->behind_since == 0)
			r->behind_since = t;
		else if (t - r->behind_since > limit) {
			char why[128];
			snprintf(why, sizeof why, "straggler: behind the committed output for more than %.1f s", limit);
			replica_kill(S, r, why);
			continue;
		}
		if (r->exited || exited_live < quorum)
			r->exit_wait_since = 0;
		else if (r->exit_wait_since == 0)
			r->exit_wait_since = t;
		else if (t - r->exit_wait_since > limit) {
			char why[128];
			snprintf(why, sizeof why, "straggler: still running %.1f s after the majority exited", limit);
			replica_kill(S, r, why);
		}
	}
	for (int s = 0; s < NSTREAMS; s++)
		vote(S, &S->s[s], VOTER_CHUNKS);
	update_input_events(S);
	check_done(S);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct sup *S = arg;
	if (sig == SIGCHLD) {
		reap(S);
		for (int s = 0; s < NSTREAMS; s++)
			vote(S, &S->s[s], VOTER_CHUNKS);
		check_done(S);
		return;
	}
	log_event("forwarding signal %d", (int)sig);
	int forward = sig == SIGTSTP ? SIGSTOP : (int)sig;
	for (unsigned i = 0; i < S->k; i++)
		if (!S->r[i].exited)
			signal_replica(&S->r[i], forward);
	if (sig == SIGTSTP)
		(void)kill(getpid(), SIGSTOP); /* stop ourselves too, like a shell job */
}

/* ---- set-up ------------------------------------------------------------- */

static void seed_from_urandom(uint64_t seed[2])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, seed, 2 * sizeof seed[0]) != (ssize_t)(2 * sizeof seed[0]))
		fatal(EXIT_INTERNAL, "cannot read /dev/urandom: %s", strerror(errno));
	close(fd);
}

static void set_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		fatal(EXIT_INTERNAL, "fcntl: %s", strerror(errno));
}

static void start_replica(struct sup *S, unsigned i)
{
	struct replica *r = &S->r[i];
	int in[2], out[NSTREAMS][2];
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out[0], O_CLOEXEC) != 0 || pipe2(out[1], O_CLOEXEC) != 0)
		fatal(EXIT_INTERNAL, "pipe: %s", strerror(errno));
	seed_from_urandom(r->seed);
	char **envp = spawn_environment(S->o->allocator, r->seed);
	struct spawn_request req = { .path = S->o->path, .argv = S->o->argv, .envp = envp,
				     .fds = { in[0], out[0][1], out[1][1] }, .pipe_ignored = S->pipe_ignored };
	int exec_errno;
	r->pid = spawn_replica(&req, &exec_errno);
	spawn_environment_free(envp);
	if (r->pid < 0) {
		int code = exec_errno == ENOENT ? EXIT_NOT_FOUND : exec_errno ? EXIT_CANNOT_EXEC : EXIT_INTERNAL;
		kill_all(S);
		fatal(code, "%s: %s", S->o->argv[0], strerror(errno));
	}
	close(in[0]);
	close(out[0][1]);
	close(out[1][1]);
	r->index = i;
	r->live = true;
	r->in_fd = in[1];
	set_nonblocking(r->in_fd);
	struct input_arg *ia = malloc(sizeof *ia);
	if (ia == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	*ia = (struct input_arg){ S, r };
	r->in_ev = event_new(S->base, r->in_fd, EV_WRITE | EV_PERSIST, on_input_writable, ia);
	for (int s = 0; s < NSTREAMS; s++) {
		r->out_fd[s] = out[s][0];
		set_nonblocking(r->out_fd[s]);
		r->ring[s] = arena_ring(S->arena, i * NSTREAMS + (unsigned)s);
		struct output_arg *oa = malloc(sizeof *oa);
		if (oa == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		*oa = (struct output_arg){ S, r, s };
		r->out_ev[s] = event_new(S->base, r->out_fd[s], EV_READ | EV_PERSIST, on_output, oa);
		if (r->out_ev[s] == NULL || event_add(r->out_ev[s], NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot watch replica %u's output", i);
	}
	if (r->in_ev == NULL)
		fatal(EXIT_INTERNAL, "cannot watch replica %u's input", i);
	report_replica(S->report, i, r->pid, r->seed);
	log_event("spawn replica %u (pid %d) seed %016" PRIx64 "%016" PRIx64, i, (int)r->pid, r->seed[1],
		  r->seed[0]);
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
	S->t_start = now();
	S->report = report_new(o);
	struct sigaction pipe_was;
	S->pipe_ignored = sigaction(SIGPIPE, NULL, &pipe_was) == 0 && pipe_was.sa_handler == SIG_IGN;
	signal(SIGPIPE, SIG_IGN); /* EPIPE is handled where it happens */

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

	S->r = calloc(S->k, sizeof *S->r);
	if (S->r == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned i = 0; i < S->k; i++)
		start_replica(S, i);

	/* stdin: a closed stdin is an empty input. Pipes, terminals and
	 * sockets are polled; files and devices epoll refuses are read
	 * whenever the input ring has room. */
	if (fcntl(STDIN_FILENO, F_GETFL) < 0) {
		S->stdin_eof = true;
		for (unsigned i = 0; i < S->k; i++)
			close_input(&S->r[i]);
	} else {
		struct stat st;
		S->stdin_pollable = fstat(STDIN_FILENO, &st) == 0 &&
				    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(STDIN_FILENO));
		if (S->stdin_pollable) {
			S->stdin_ev = event_new(S->base, STDIN_FILENO, EV_READ | EV_PERSIST, on_stdin, S);
			if (S->stdin_ev == NULL || event_add(S->stdin_ev, NULL) != 0)
				fatal(EXIT_INTERNAL, "cannot watch stdin");
		} else {
			S->stdin_ev = event_new(S->base, -1, 0, on_stdin, S);
			if (S->stdin_ev == NULL)
				fatal(EXIT_INTERNAL, "cannot watch stdin");
			S->stdin_paused = true;
			update_input_events(S);
		}
	}
	S->idle_ev = evtimer_new(S->base, on_idle, S);
	S->tick_ev = event_new(S->base, -1, EV_PERSIST, on_tick, S);
	struct timeval tick = { .tv_sec = 0, .tv_usec = TICK_MS * 1000 };
	if (S->idle_ev == NULL || S->tick_ev == NULL || event_add(S->tick_ev, &tick) != 0)
		fatal(EXIT_INTERNAL, "cannot create timers");

	event_base_dispatch(S->base);
	kill_all(S);
	report_set_exit(S->report, S->exit_code, NULL);
	report_input_log(S->report, inputlog_bytes(S->inlog), inputlog_retained_from(S->inlog),
			 inputlog_complete(S->inlog) || (S->inlog != NULL && inputlog_bytes(S->inlog) == 0));
	report_write(S->report);
	inputlog_free(S->inlog);
	return S->exit_code;
}
