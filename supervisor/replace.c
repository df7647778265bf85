/* replace.c — replacements: a replica that was killed (it wrote something
 * else, crashed, hung, or was killed from outside) is replaced by a new
 * process with a fresh seed that re-executes the command from the start and
 * replays the run: the whole input from byte 0 (from the input log, at its
 * own pace, never holding back the input ring), and the nondeterminism log
 * (its n-th clock, random or exec call of a kind gets what the n-th call got
 * in the run). Its output is checked against what was committed, byte for
 * byte where the history ring still holds the bytes and by digest for older
 * blocks (output.c); once it reaches the committed frontier on every stream
 * it votes again (replace_check_joined). It is a divergence like any other
 * if it disagrees on the way.
 *
 * The same machinery breaks ties: when the voters disagree and no majority
 * can form (k >= 3), replace_wait starts one more replica in a spare slot
 * (at most one catching up at a time) until a quorum of k agrees; the
 * losers are then killed and replaced like any other. Once every slot holds
 * a voter and still no quorum agrees, the voter that has been in the vote the
 * longest among those that agree with the fewest others (with k = 3: with
 * none) leaves it (evict), so that the next tie-breaker has a slot: the tie
 * goes on while --respawns lasts. The oldest, because it has been compared
 * with the most replicas and matched none: had it been right, any right one
 * among them would have agreed with it, so it is the least likely to be
 * right (keeping the newest instead can keep a panel of wrong replicas that
 * turns every right newcomer away). Leaving changes no quorum: it takes a
 * voter out of 2k, and a commit still needs a majority of k agreeing.
 * Not under --ci: any divergence fails that run already.
 *
 * Bounds: --respawns replacements in the run, --respawn-rate in any minute
 * (a token bucket: a replacement past the rate waits for its turn); and the
 * logs: a replacement is impossible once the input log, the nondeterminism
 * log or the output digests lost their start. Then the run goes on with
 * fewer replicas and says so, once (a -v line and the report).
 *
 * A run that serves has no end to bound: killed now and then for days, a
 * daemon would spend any fixed number. There --respawns bounds the
 * replacements that did not last: one gives its respawn back once it has
 * been in the vote for PROVEN_SECONDS (twice --timeout at least) without
 * exiting, or when a SIGKILL from outside ends
 * it once it is in the vote (the OOM killer, a person: no fault of the
 * program; before, as it starts, it may be its own). A replacement
 * that diverges, crashes or hangs before that keeps it spent, so a program
 * whose replacements never agree still runs out; --respawn-rate bounds the
 * pace either way. A filter's run keeps the plain count: it ends.
 *
 * A replacement runs on a spawn pass (respawn_ev), never inside a vote: a
 * kill only asks for one (replace_request). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>

#include "exitcode.h"
#include "files.h"
#include "log.h"
#include "net.h"
#include "sup.h"

/* How long a serving run's replacement is in the vote before its respawn is
 * given back: PROVEN_SECONDS, and twice --timeout at least (a replacement
 * that hangs as it joins is killed as a straggler --timeout later: it must
 * not have lasted by then). */
#define PROVEN_SECONDS 10.0

static double proven_seconds(const struct sup *S)
{
	double t = 2.0 * S->o->straggler_ms / 1000.0;
	return t > PROVEN_SECONDS ? t : PROVEN_SECONDS;
}

static void on_respawn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	replace_maintain(S);
	/* A replacement may be what a finished run was waiting for. */
	sup_check_done(S);
}

void replace_init(struct sup *S)
{
	uint8_t seed[DIGEST_SEED_BYTES];
	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		fatal(EXIT_INTERNAL, "cannot read the run's digest key: %s", strerror(errno));
	digest_key_init(&S->dkey, seed);
	S->respawn_ev = event_new(S->base, -1, 0, on_respawn, S);
	if (S->respawn_ev == NULL)
		fatal(EXIT_INTERNAL, "cannot create the respawn event");
	S->tokens = S->o->respawn_rate;
	S->tokens_at = sup_now();
	for (int s = 0; s < NSTREAMS; s++) {
		digest_init(&S->s[s].cur, &S->dkey);
		S->s[s].pdig_from = SIZE_MAX;
		if ((S->s[s].front = malloc(DIGEST_BLOCK)) == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
	}
}

/* The run ends, or its replicas were asked to stop (SIGTERM, SIGINT):
 * no new replica. */
static bool stopping(const struct sup *S)
{
	return S->stopping || S->stop_ev != NULL;
}

/* While the rate bound defers replacements, the tick alone tries again:
 * a pass asked for by each vote that waits for a tie-breaker would run
 * the loop flat out (a pass ends with a vote that asks for the next). */
void replace_request(struct sup *S)
{
	if (S->o->respawns > 0 && S->respawn_ev != NULL && !stopping(S) && !S->deferred)
		event_active(S->respawn_ev, EV_TIMEOUT, 0);
}

/* Whether a new replica could be brought to the committed frontier: the
 * logs still hold the run from its start (a fresh server's, only what its
 * start-up replays). */
bool replace_replayable(struct sup *S, char *why, size_t size)
{
	if (S->o->respawns == 0) {
		snprintf(why, size, "replacement is off (--respawns 0)");
		return false;
	}
	if (S->respawns - S->respawns_back >= S->o->respawns) {
		if (S->respawns_back > 0 || sup_serves(S))
			snprintf(why, size,
				 "the respawn bound (--respawns %u) is reached: %u replacements have not given theirs "
				 "back (not yet %.0f s in the vote, or never)",
				 S->o->respawns, S->respawns - S->respawns_back, proven_seconds(S));
		else
			snprintf(why, size, "the respawn bound (--respawns %u) is reached", S->o->respawns);
		return false;
	}
	if (!inputlog_complete(S->inlog) && S->in->head != 0) {
		snprintf(why, size, "the input log no longer holds the input from its start (--input-log %zu)",
			 S->o->input_log);
		return false;
	}
	/* A fresh server (--stateless) replays only the run's start, which
	 * the call log keeps past its cap (ndlog_keep_start). */
	if (S->virt != NULL && !net_fresh_start(S->net) && !virt_replayable(S->virt)) {
		snprintf(why, size, "the nondeterminism log dropped its oldest entries (--call-log %zu)",
			 S->o->call_log);
		return false;
	}
	if (!net_replayable(S->net, why, size))
		return false;
	if (S->o->durable && net_fresh_start(S->net) && files_start_layer(S) == NULL) {
		snprintf(why, size, "--durable needs the replicas' private file views and their commit points "
				    "(--files private, a mount namespace)");
		return false;
	}
	for (int s = 0; s < NSTREAMS; s++)
		if (S->s[s].dig_full) {
			snprintf(why, size, "the digests of committed %s reached their cap", S->s[s].name);
			return false;
		}
	return true;
}

static unsigned count_sound(const struct sup *S);

/* Says why replicas can no longer be replaced, each new reason once (the
 * report keeps the first); notes whether it is the respawn bound, which a
 * give-back lifts. */
static void refuse(struct sup *S, const char *why)
{
	S->refused_bound = S->o->respawns > 0 && S->respawns - S->respawns_back >= S->o->respawns;
	if (strcmp(S->refused, why) == 0)
		return; /* said */
	snprintf(S->refused, sizeof S->refused, "%s", why);
	log_event("cannot replace replicas: %s; going on with %u in the vote", why, count_sound(S));
	report_respawn_refused(S->report, why);
}

/* The rate bound: a token bucket of respawn_rate tokens, refilled at
 * respawn_rate a minute. */
static bool take_token(struct sup *S)
{
	double t = sup_now();
	double rate = S->o->respawn_rate;
	S->tokens += (t - S->tokens_at) * rate / 60.0;
	if (S->tokens > rate)
		S->tokens = rate;
	S->tokens_at = t;
	if (S->tokens < 1.0)
		return false;
	S->tokens -= 1.0;
	return true;
}

/* Voters that may still be right: a replica that died of a SIGKILL from
 * outside stays in the vote until someone writes past its end (output.c),
 * but a replacement for it starts at once. */
static unsigned count_sound(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		n += S->r[i].live && !S->r[i].sigkilled;
	return n;
}

static unsigned count_joining(const struct sup *S)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		n += S->r[i].joining;
	return n;
}

/* A slot for a new replica: one whose process left the vote, the original
 * k first, then the spares. */
static int free_slot(const struct sup *S)
{
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (!r->used || (!r->live && !r->joining))
			return (int)i;
	}
	return -1;
}

void replace_maintain(struct sup *S)
{
	if (stopping(S) || S->k < 2 || S->o->respawns == 0)
		return;
	/* A replica killed once the vote has ended (a straggler still
	 * running, stopped perhaps, after a quorum exited alike) changes
	 * nothing a replacement could vote on: the run ends now, and the
	 * command is not run once more for nothing. */
	if (sup_vote_over(S))
		return;
	for (;;) {
		unsigned in_vote = count_sound(S) + count_joining(S);
		bool extra = S->want_extra && count_joining(S) == 0;
		if (in_vote >= S->k && !extra) {
			S->deferred = false; /* nothing is held back */
			S->durable_wait = false;
			return;
		}
		char why[160];
		if (!replace_replayable(S, why, sizeof why)) {
			refuse(S, why);
			S->want_extra = false;
			return;
		}
		int slot = free_slot(S);
		if (slot < 0) {
			refuse(S, "every spare slot holds a replica that is still in the vote");
			S->want_extra = false;
			return;
		}
		if (!take_token(S)) {
			if (!S->deferred)
				log_event("replacement deferred: --respawn-rate %u a minute reached", S->o->respawn_rate);
			S->deferred = true;
			return; /* the tick tries again */
		}
		S->deferred = false;
		/* A durable server's replacement starts from the committed
		 * files at a quiet moment, new clients held meanwhile. */
		if (S->o->durable && net_fresh_start(S->net) && !net_durable_begin(S->net)) {
			S->tokens += 1.0; /* not spent */
			if (!S->durable_wait)
				log_event("a replacement from the committed files waits for a quiet moment (no connection "
					  "open, every append and sync committed)");
			S->durable_wait = true;
			return;
		}
		S->durable_wait = false;
		/* Whom it replaces: a replica killed, or dead of a SIGKILL from
		 * outside, that has no replacement yet; else it breaks a tie. */
		struct replica *old = NULL;
		for (unsigned i = 0; i < S->nslots && old == NULL; i++) {
			struct replica *r = &S->r[i];
			if (r->used && !r->replaced && (r->killed || (r->live && r->sigkilled)))
				old = r;
		}
		char cause[256];
		if (old != NULL && old->killed)
			snprintf(cause, sizeof cause, "replaces replica %u (%s)", old->id, old->why);
		else if (old != NULL)
			snprintf(cause, sizeof cause, "replaces replica %u (killed by a SIGKILL from outside diehard)",
				 old->id);
		else if (S->tie_left > 0)
			snprintf(cause, sizeof cause,
				 "breaks a tie: no majority among the replicas in the vote (in the slot replica %d left)",
				 S->tie_left - 1);
		else
			snprintf(cause, sizeof cause, "breaks a tie: no majority among the replicas in the vote");
		S->tie_left = 0;
		if (old != NULL)
			old->replaced = true;
		if (extra)
			S->want_extra = false;
		S->respawns++;
		replica_start(S, (unsigned)slot, old != NULL ? (int)old->id : -1,
			      old != NULL ? old->seed : NULL, cause);
		S->r[slot].spent = true;
	}
}

/* Every slot holds a voter and no quorum can form: of the voters in
 * `weakest` (those that agree with the fewest others), the one that has
 * been in the vote the longest (started first: compared with the most
 * replicas, matched by none) leaves it, so that the next tie-breaker has a
 * slot. Killed like a divergent replica, but not replaced: the tie-breaker
 * that takes its slot is one. NULL when there is none to take out. */
static struct replica *evict(struct sup *S, uint64_t weakest, const char *why)
{
	struct replica *out = NULL;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (!(weakest & ((uint64_t)1 << i)) || !r->live || r->joining || r->sigkilled)
			continue;
		if (out == NULL || r->spawn_time < out->spawn_time || (r->spawn_time == out->spawn_time && r->id < out->id))
			out = r;
	}
	if (out == NULL)
		return NULL;
	log_event("tie (%s) with every slot taken: replica %u, which agrees with no more replicas than any other and "
		  "has been in the vote the longest, leaves it for the next tie-breaker", why, out->id);
	out->replaced = true; /* the tie-breaker takes its slot; nothing replaces it */
	S->tie_left = (int)out->id + 1;
	S->tie_evictions++;
	replica_kill(S, out, "left the vote in a tie: it agreed with no more replicas than any other, had voted the "
			     "longest, and every slot was taken");
	return out;
}

uint64_t replace_loners(uint64_t voters, unsigned n, bool (*agree)(const void *ctx, unsigned i, unsigned j),
			const void *ctx)
{
	unsigned fewest = ~0u;
	uint64_t mask = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!(voters >> i & 1))
			continue;
		unsigned mates = 0;
		for (unsigned j = 0; j < n; j++)
			mates += j != i && (voters >> j & 1) && agree(ctx, i, j);
		if (mates < fewest) {
			fewest = mates;
			mask = 0;
		}
		if (mates == fewest)
			mask |= (uint64_t)1 << i;
	}
	return mask;
}

/* A vote cannot be decided with the voters there are. Whether it should
 * wait for a replica that is catching up or about to be started (true), or
 * give up (false: nothing more can be done). weakest: the voters that agree
 * with the fewest others (slot bits), of which one may leave the vote to
 * make room (0: none may). */
bool replace_wait(struct sup *S, const char *why, uint64_t weakest)
{
	if (stopping(S) || S->k < 2)
		return false;
	if (count_joining(S) > 0)
		return true;
	char no[160];
	if (!replace_replayable(S, no, sizeof no)) {
		refuse(S, no);
		return false;
	}
	/* Under --ci any divergence fails the run already: a longer tie would
	 * only run the test again for the same verdict. */
	if (sup_live_count(S) >= S->k && free_slot(S) < 0 && (S->o->ci || evict(S, weakest, why) == NULL)) {
		refuse(S, "every spare slot holds a replica that is still in the vote");
		return false;
	}
	if (!S->want_extra && sup_live_count(S) >= S->k)
		log_event("tie (%s): starting one more replica to break it", why);
	S->want_extra = sup_live_count(S) >= S->k;
	replace_request(S);
	return true;
}

/* A replacement that has reached the committed frontier on every stream
 * votes from now on. */
void replace_check_joined(struct sup *S, struct replica *r)
{
	/* A fresh server joins at a quiet point instead (net.c). */
	if (!r->joining || r->fresh)
		return;
	for (int s = 0; s < NSTREAMS; s++)
		if (r->ring[s]->head != S->s[s].committed)
			return;
	r->joining = false;
	r->live = true;
	r->behind_since = 0;
	replace_joined(S, r);
	double t = sup_now() - S->t_start;
	size_t checked = S->s[0].committed + S->s[1].committed;
	log_event("replica %u caught up after %.3f s (%zu input bytes replayed, %zu output bytes checked): it votes",
		  r->id, t - r->spawn_time, r->in_off, checked);
	report_caught_up(S->report, r->id, t, t - r->spawn_time, r->in_off, S->s[0].committed, S->s[1].committed);
	sup_degraded_tick(S);
}

/* Whether r, a replacement, is still replaying the run: catching up on the
 * committed output, or behind the output of the voter furthest ahead. Such
 * a replica skips its relative sleeps (virt.c): it re-lives the past, whose
 * clock readings it gets from the log anyway, as fast as it can. */
bool replace_replaying(const struct sup *S, const struct replica *r)
{
	if (!r->replacement)
		return false;
	if (r->joining)
		return true;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *o = &S->r[i];
		if (o == r || !o->live)
			continue;
		for (int s = 0; s < NSTREAMS; s++)
			if (o->ring[s]->tail > r->ring[s]->tail)
				return true;
	}
	return false;
}

void replace_zombie(struct sup *S, pid_t pid, unsigned id, int status_fd, double killed_at)
{
	if (S->nzombies == S->zombies_size) {
		size_t n = S->zombies_size ? 2 * S->zombies_size : 8;
		struct zombie *z = realloc(S->zombies, n * sizeof *z);
		if (z == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		S->zombies = z;
		S->zombies_size = n;
	}
	S->zombies[S->nzombies++] = (struct zombie){ .pid = pid, .id = id, .status_fd = status_fd,
						      .killed_at = killed_at };
}

bool replace_reap_zombie(struct sup *S, pid_t pid, int wstatus)
{
	for (size_t i = 0; i < S->nzombies; i++)
		if (S->zombies[i].pid == pid) {
			wstatus = replica_program_status(&S->zombies[i].status_fd, wstatus);
			report_exit(S->report, S->zombies[i].id, replica_status(wstatus),
				    WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0, sup_now() - S->t_start);
			/* Killed by us, but perhaps by the filter first (its
			 * output ended, and we noticed that before its exit). */
			const char *cause = replica_signal_cause(S, S->zombies[i].id, wstatus);
			if (cause != NULL)
				log_event("replica %u (pid %d) killed by signal %d (%s)", S->zombies[i].id, (int)pid,
					  WTERMSIG(wstatus), cause);
			S->zombies[i] = S->zombies[--S->nzombies];
			return true;
		}
	return false;
}

/* r, a replacement, votes from now on (caught up, or joined as a fresh
 * server). */
void replace_joined(struct sup *S, struct replica *r)
{
	(void)S;
	r->joined_at = sup_now();
}

/* A serving run's replacement that lasted gives its respawn back: in the
 * vote for PROVEN_SECONDS, or ended by a SIGKILL from outside once it had
 * joined the vote (the reaper calls this before the slot can be reused;
 * the tick, for the live). Not one killed so while it caught up: a
 * program that SIGKILLs itself as it starts, or is OOM-killed there,
 * keeps spending (one that does so later loops at --respawn-rate). A
 * bound reached is lifted: replacements resume, said once. */
void replace_give_back(struct sup *S, struct replica *r)
{
	if (!r->spent || !sup_serves(S))
		return;
	bool lasted = r->live && !r->exited && r->joined_at > 0 && sup_now() - r->joined_at >= proven_seconds(S);
	if (!lasted && !(r->sigkilled && r->joined_at > 0))
		return;
	r->spent = false;
	S->respawns_back++;
	if (S->refused_bound && S->respawns - S->respawns_back < S->o->respawns) {
		S->refused[0] = '\0';
		S->refused_bound = false;
		char why[160];
		if (!replace_replayable(S, why, sizeof why)) {
			refuse(S, why);
			return;
		}
		log_event("replica %u %s: its respawn is given back, and replicas are replaced again (--respawns %u)",
			  r->id, lasted ? "lasted in the vote" : "was killed from outside", S->o->respawns);
		replace_request(S);
	}
}
