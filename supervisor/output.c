/* output.c — replicas' stdout and stderr: read into their rings, voted,
 * committed.
 *
 * Per stream, C bytes are committed. A replica whose ring starts at C votes
 * on what follows; one that has not reached C yet ("behind") is checked
 * against the history ring of committed bytes as its output arrives. Votes
 * happen per 4 KiB chunk as data arrives, on a final short chunk at end of
 * stream, and on any agreed prefix after idle_ms of quiet (interactive
 * programs). Committed bytes are written once, in order, from the history
 * ring, in one write per vote. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "net.h"
#include "pastdigits.h"
#include "spawn.h"
#include "sup.h"


/* The interactive flush. A prefix vote happens once a quorum of the voters
 * has been quiet for idle_ms: not all of them, so a replica that runs at
 * another phase (a replacement started later, one slowed down) cannot keep
 * postponing it by writing while the others wait. The timer is armed by the
 * first write after a vote, not pushed back by every write. */
static void arm_idle_in(struct sup *S, double seconds)
{
	if (seconds < 0.001)
		seconds = 0.001;
	struct timeval tv = { .tv_sec = (time_t)seconds, .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6) };
	if (event_add(S->idle_ev, &tv) != 0)
		fatal(EXIT_INTERNAL, "cannot arm the idle timer");
}


static void arm_idle(struct sup *S)
{
	if (!evtimer_pending(S->idle_ev, NULL))
		arm_idle_in(S, S->o->idle_ms / 1000.0);
}


/* How long until `quorum` voters have been quiet for idle_ms (0: now). */
static double quiet_wait(struct sup *S)
{
	double idle = S->o->idle_ms / 1000.0, now = sup_now(), waits[VOTER_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (r->live && !r->joining) {
			double w = r->last_output + idle - now;
			waits[n++] = w > 0 ? w : 0;
		}
	}
	unsigned q = sup_quorum(S);
	if (q == 0 || n < q)
		return 0;
	/* the q-th smallest wait */
	for (unsigned a = 0; a < q; a++)
		for (unsigned b = a + 1; b < n; b++)
			if (waits[b] < waits[a]) {
				double t = waits[a];
				waits[a] = waits[b];
				waits[b] = t;
			}
	return waits[q - 1];
}


/* Hex excerpt of up to 16 bytes, for messages and the report. */
static void excerpt(char *out, size_t cap, const unsigned char *p, size_t len)
{
	size_t n = len < 16 ? len : 16, o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && o + 3 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%02x", p[i]);
}


/* The replicas (by id) of a mask of slots. */
static void mask_names(const struct sup *S, char *out, size_t cap, uint64_t mask)
{
	size_t o = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < S->nslots && o + 12 < cap; i++)
		if (mask & ((uint64_t)1 << i))
			o += (size_t)snprintf(out + o, cap - o, "%s%u", o ? "," : "", S->r[i].id);
	if (o == 0)
		snprintf(out, cap, "none");
}

static unsigned mask_ids(const struct sup *S, uint64_t mask, unsigned *ids)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		if (mask & ((uint64_t)1 << i))
			ids[n++] = S->r[i].id;
	return n;
}


/* Writes committed bytes to the world; the report counts what was written,
 * not what was voted. A closed reader ends the run the way SIGPIPE ends a
 * plain program; any other failure (a full disk, EIO) ends it with 125:
 * output the majority agreed on could not be delivered. */
static void emit(struct sup *S, struct stream *st, const unsigned char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(st->fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			report_committed(S->report, st->name, (size_t)n);
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
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			/* A socket's peer gone (inetd style) is a closed reader too. */
			log_event("%s closed by its reader: stopping", st->name);
			replicas_kill_all(S);
			report_set_exit(S->report, 128 + SIGPIPE, "output closed");
			report_write(S->report);
			overcap_finish(S); /* no atexit runs: the replicas' cgroups go now */
			signal(SIGPIPE, SIG_DFL);
			raise(SIGPIPE);
		}
		char why[128];
		snprintf(why, sizeof why, "cannot write %s: %s", st->name, strerror(n < 0 ? errno : EIO));
		log_warn("%s", why);
		report_set_exit(S->report, EXIT_INTERNAL, why);
		sup_finish(S, EXIT_INTERNAL); /* first: no replacement is asked for */
		for (unsigned i = 0; i < S->nslots; i++)
			if (S->r[i].used && !S->r[i].exited)
				replica_kill(S, &S->r[i], why);
		replicas_kill_all(S);
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
	char who[256], theirs[40], mine[40] = "";
	mask_names(S, who, sizeof who, agree);
	majority_excerpt(S, st, at, agree, theirs, sizeof theirs);
	struct ring *rr = S->r[i].ring[st - S->s];
	if (rr->head <= at && at < rr->tail)
		excerpt(mine, sizeof mine, ring_at(rr, at), rr->tail - at);
	unsigned ids[VOTER_MAX];
	unsigned nids = mask_ids(S, agree, ids);
	report_divergence(S->report, st->name, at, ids, nids, S->r[i].id, theirs, mine, kind, sup_now() - S->t_start);
	ci_divergence(S, (int)S->r[i].id, st->name, at, mine, theirs);
	log_event("divergence on %s at byte %zu: %s wrote %s, replica %u wrote %s", st->name, at,
		  agree ? who : "the committed output", theirs[0] ? theirs : "(end)", S->r[i].id,
		  mine[0] ? mine : "(end)");
}


/* No quorum can form: say where and who, and stop. */
static void stop_no_quorum(struct sup *S, struct stream *st, const struct voter_result *res, const char *why)
{
	size_t at = st->committed + res->diff_offset;
	char sides[512];
	size_t o = 0;
	sides[0] = '\0';
	for (unsigned i = 0; i < S->nslots && o + 64 < sizeof sides; i++) {
		struct replica *r = &S->r[i];
		if (!r->live)
			continue;
		struct ring *rr = r->ring[st - S->s];
		char ex[40] = "";
		if (rr->head <= at && rr->tail > at)
			excerpt(ex, sizeof ex, ring_at(rr, at), rr->tail - at);
		o += (size_t)snprintf(sides + o, sizeof sides - o, "%sreplica %u: %s", o ? "; " : "", r->id,
				      ex[0] ? ex : "(end)");
	}
	log_warn("no majority on %s at byte %zu (%s): %s", st->name, at, why, sides);
	ci_divergence(S, -1, st->name, at, NULL, NULL);
	report_no_quorum(S->report, st->name, at, why, sides);
	replicas_kill_all(S);
	sup_finish(S, EXIT_NO_QUORUM);
}


/* Feeds n bytes at p into digest d with every digit '0' (pastdigits.h). */
static void masked_update(struct digest *d, const unsigned char *p, size_t n)
{
	static unsigned char buf[16384];
	for (size_t c; n > 0; p += c, n -= c) {
		c = n < sizeof buf ? n : sizeof buf;
		pastdigits_mask(buf, p, c);
		digest_update(d, buf, c);
	}
}

static void rdig_init(struct sup *S, struct replica *r, int s)
{
	digest_init(&r->dg[s], &S->dkey);
	digest_init(&r->pdg[s], &S->dkey);
}

static size_t past_limit(const struct sup *S, const struct replica *r, int s);

/* Feeds what replica r wrote on stream s in [from, to) into its digest, a
 * block at a time: at each block's end, compares with the committed block's
 * digest (a block of its replayed past also with the committed block's
 * masked digest: its times may differ, pastdigits.h). False (and r killed)
 * on a mismatch. */
static bool absorb(struct sup *S, struct stream *st, struct replica *r, size_t from, size_t to)
{
	int s = (int)(st - S->s);
	struct ring *rr = r->ring[s];
	if (S->o->respawns == 0)
		return true;
	while (from < to) {
		size_t block = from / DIGEST_BLOCK, end = (block + 1) * DIGEST_BLOCK;
		size_t n = (to < end ? to : end) - from;
		digest_update(&r->dg[s], ring_at(rr, from), n);
		masked_update(&r->pdg[s], ring_at(rr, from), n);
		from += n;
		if (from != end)
			break;
		uint8_t d[DIGEST_BYTES], pd[DIGEST_BYTES];
		digest_final(&r->dg[s], d);
		digest_final(&r->pdg[s], pd);
		rdig_init(S, r, s);
		bool past = end <= past_limit(S, r, s) && st->pdig_from != SIZE_MAX && block >= st->pdig_from &&
			    block < st->ndig && memcmp(pd, st->pdig[block], sizeof pd) == 0;
		if (past && memcmp(d, st->dig[block], sizeof d) != 0 && !r->past_said[s]) {
			r->past_said[s] = true;
			log_event("replica %u's replayed %s differs from the committed in digits within bytes %zu-%zu "
				  "(times its replay read otherwise): taken as committed",
				  r->id, st->name, block * DIGEST_BLOCK, end - 1);
		}
		if (block < st->ndig && !past && memcmp(d, st->dig[block], sizeof d) != 0) {
			record_divergence(S, st, block * DIGEST_BLOCK, 0, r->index, "late output differs (by digest)");
			char why[160];
			snprintf(why, sizeof why, "its output differs from the committed %s within bytes %zu-%zu", st->name,
				 block * DIGEST_BLOCK, end - 1);
			replica_kill(S, r, why);
			return false;
		}
	}
	return true;
}


/* r's output on st ended before the committed output: a divergence,
 * unless diehard forwarded SIGTERM or SIGINT (stop_ev): replicas stop at
 * points of their own (a server between two requests' log lines), and
 * what the majority wrote before is committed either way. */
static void ended_early(struct sup *S, struct stream *st, struct replica *r)
{
	if (S->stop_ev != NULL) {
		/* Out of this stream's vote, not killed: it is stopping as
		 * asked. What the others still agree on is committed. */
		if (!r->stop_cut[st - S->s])
			log_event("replica %u's %s ends at byte %zu as it stops, the others' goes on: out of its vote",
				  r->id, st->name, r->ring[st - S->s]->tail);
		r->stop_cut[st - S->s] = true;
		return;
	}
	record_divergence(S, st, r->ring[st - S->s]->tail, 0, r->index, "output ended early");
	replica_kill(S, r, "its output ended before the committed output");
}

/* A replica r behind the committed offset whose bytes differ from the
 * committed ones at d (from its ring's head): whether they are the same
 * lines in another order (outorder.c). The reference is the committed
 * bytes from r's head on, then what the first voter at the front wrote
 * past them: lines r wrote early may be ones the voters have not
 * committed yet, which with r's vote missing (two left) they never could
 * alone. SAME: r's bytes take the reference's order, in place. */
static enum relines_verdict behind_reorder(struct sup *S, struct stream *st, struct replica *r, size_t d)
{
	static unsigned char *ref; /* the reference's bytes around d */
	static size_t ref_size;
	int s = (int)(st - S->s);
	struct ring *rr = r->ring[s];
	/* A replacement's replayed past (past_limit): its replay feeds each
	 * logged connection as fast as it takes it, so a line may come far
	 * later than the committed one, which the reference then holds from
	 * r's head on; and its digits are its own (past_digits): lines alike
	 * but for them are the same line, up to the end of its past or of
	 * what was committed (beyond, the lead's bytes are nobody's past). */
	const size_t past = past_limit(S, r, s);
	const size_t pre = past > rr->head + d ? d : OUTORDER_PRE, window = OUTORDER_WINDOW;
	if (ref_size < pre + window) {
		unsigned char *bigger = realloc(ref, pre + window);
		if (bigger == NULL)
			return RELINES_NO;
		ref = bigger;
		ref_size = pre + window;
	}
	const struct replica *lead = NULL;
	for (unsigned i = 0; i < S->nslots && lead == NULL; i++) {
		const struct replica *o = &S->r[i];
		if (o != r && o->live && !o->stop_cut[s] && o->ring[s]->head == st->committed)
			lead = o;
	}
	size_t done = st->committed - rr->head, ahead = lead != NULL ? lead->ring[s]->tail - st->committed : 0;
	size_t from = d > pre ? d - pre : 0, to = done + ahead < d + window ? done + ahead : d + window;
	size_t n = to - from, c = done - from < n ? done - from : n;
	size_t lim = past < st->committed ? past : st->committed;
	size_t digits = lim > rr->head + from ? lim - (rr->head + from) : 0;
	memcpy(ref, ring_at(st->hist, rr->head + from), c);
	if (n > c)
		memcpy(ref + c, ring_at(lead->ring[s], st->committed), n - c);
	/* More may come to the reference while a voter still writes (a
	 * second of quiet: a slow thread's line, not a line of r's own). */
	bool more = false;
	for (unsigned i = 0; i < S->nslots && !more; i++) {
		const struct replica *o = &S->r[i];
		more = o != r && o->live && !o->eof[s] && sup_now() - o->last_output < 1.0 && !st->ended;
	}
	return outorder_match(S, st, rr->head + from, ref, n, more, ring_at(rr, rr->head + from),
			      rr->tail - rr->head - from, !r->eof[s], d - from, digits);
}

/* The offset of r's output on stream s below which it re-lived the past
 * (net_past: a replacement that replays the connection log, until its
 * clocks reach now; SIZE_MAX while it still does), 0: none. */
static size_t past_limit(const struct sup *S, const struct replica *r, int s)
{
	if (!r->replacement || r->fresh)
		return 0;
	return net_past(S->net, r->index) ? SIZE_MAX : r->past_end[s];
}

void output_past_ended(struct sup *S, struct replica *r)
{
	for (int s = 0; s < NSTREAMS; s++) {
		int waiting = 0;
		/* What it wrote and we did not read yet is as old; so is what
		 * it still buffers of the committed bytes (stdio's buffer in
		 * the program, a reply it has not finished): the past is the
		 * committed bytes at least. */
		if (r->out_fd[s] >= 0 && ioctl(r->out_fd[s], FIONREAD, &waiting) != 0)
			waiting = 0;
		size_t end = r->ring[s]->tail + (size_t)(waiting > 0 ? waiting : 0);
		r->past_end[s] = end > S->s[s].committed ? end : S->s[s].committed;
	}
	r->past_at = sup_now();
}

/* r's bytes at mine differ from the committed ones at ours from d on (n
 * bytes from its ring's head): while they re-live the past, digits that
 * differ are the committed ones (pastdigits.h), in place. true: some were. */
static bool past_digits(struct sup *S, struct stream *st, struct replica *r, unsigned char *mine,
			const unsigned char *ours, size_t d, size_t n)
{
	int s = (int)(st - S->s);
	size_t past = past_limit(S, r, s), head = r->ring[s]->head;
	if (head + d >= past)
		return false;
	size_t lim = past - head < n ? past - head : n;
	size_t a = d + pastdigits_alike(mine + d, ours + d, lim - d);
	if (a == d)
		return false;
	memcpy(mine + d, ours + d, a - d);
	if (!r->past_said[s]) {
		r->past_said[s] = true;
		log_event("replica %u's replayed %s differs from the committed in digits from byte %zu (times its "
			  "replay read otherwise): taken as committed",
			  r->id, st->name, head + d);
	}
	return true;
}

/* A replica that has not reached the committed offset (a slow one, or a
 * replacement catching up): check what it wrote since against the committed
 * output. Bytes the history ring still holds are compared byte for byte;
 * older ones by digest (absorb). */
static void catch_up(struct sup *S, struct stream *st, struct replica *r)
{
	int s = (int)(st - S->s);
	struct ring *rr = r->ring[s];
	if (r->from_files && r->joining) {
		/* A durable server's replacement: its start-up (loading its
		 * files) is its own, neither checked nor voted. */
		ring_consume_to(rr, rr->tail);
		return;
	}
	if ((!r->live && !r->joining) || (rr->head >= st->committed && !(st->ended && rr->tail > st->committed)))
		return;
	if (st->ended && S->stop_ev != NULL && rr->head >= st->committed) {
		/* Stopping, it wrote past where the others ended: that goes,
		 * so it is never held back. */
		ring_consume_to(rr, rr->tail);
		return;
	}
	if (r->fresh && rr->head < st->front_len) {
		/* A fresh server's start-up, against the run's start kept
		 * whole: the history ring and the digests of whole blocks
		 * would leave a short start-up unchecked. */
		size_t end = rr->tail < st->front_len ? rr->tail : st->front_len;
		const unsigned char *mine = ring_at(rr, rr->head), *ours = st->front + rr->head;
		if (memcmp(mine, ours, end - rr->head) != 0) {
			size_t d = 0;
			while (mine[d] == ours[d])
				d++;
			record_divergence(S, st, rr->head + d, 0, r->index, "start-up output differs");
			replica_kill(S, r, "its start-up output differs from the run's");
			return;
		}
		ring_consume_to(rr, end);
		if (end == DIGEST_BLOCK)
			rdig_init(S, r, s); /* the next block is checked whole */
	}
	if (st->hist->head > rr->head) {
		if (r->live || S->o->respawns == 0) {
			/* Backpressure keeps voters inside the history ring. */
			char why[160];
			snprintf(why, sizeof why, "more than %zu bytes behind on %s", st->hist->size, st->name);
			replica_kill(S, r, why);
			return;
		}
		size_t to = rr->tail < st->hist->head ? rr->tail : st->hist->head;
		if (!absorb(S, st, r, rr->head, to))
			return;
		ring_consume_to(rr, to);
		if (rr->head < st->hist->head) {
			if (r->eof[s])
				ended_early(S, st, r);
			return;
		}
	}
	size_t end = rr->tail < st->committed ? rr->tail : st->committed;
	size_t n = end - rr->head;
	unsigned char *mine = ring_at(rr, rr->head);
	const unsigned char *ours = ring_at(st->hist, rr->head);
	while (memcmp(mine, ours, n) != 0) {
		size_t d = 0;
		while (mine[d] == ours[d])
			d++;
		if (past_digits(S, st, r, mine, ours, d, n))
			continue;
		if (outorder_free(S, st)) {
			/* The committed lines in another order, perhaps (a
			 * server's threads): taken in their order. */
			enum relines_verdict o = behind_reorder(S, st, r, d);
			if (o == RELINES_SAME)
				continue;
			if (o == RELINES_WAIT)
				return; /* checked again as more comes */
		}
		record_divergence(S, st, rr->head + d, 0, r->index, "late output differs");
		replica_kill(S, r, "output differs from the committed output");
		return;
	}
	if (r->eof[s] && rr->tail < st->committed) {
		ended_early(S, st, r);
		return;
	}
	if (st->ended && rr->tail > st->committed) {
		if (S->stop_ev != NULL) {
			ring_consume_to(rr, rr->tail); /* as above */
			return;
		}
		record_divergence(S, st, st->committed, 0, r->index, "output past the agreed end");
		replica_kill(S, r, "wrote past the end the majority agreed on");
		return;
	}
	if (r->joining && !absorb(S, st, r, rr->head, end))
		return;
	ring_consume_to(rr, end);
}


/* Digests committed bytes block by block, for replacements that will need
 * to check output older than the history ring. Past the cap, digests stop
 * and replacement becomes impossible (replace_replayable says so). */
#define MAX_DIGESTS ((size_t)4 << 20) /* 256 GiB of output a stream, 64 MiB of digests (and as many masked) */

void output_digest_commit(struct sup *S, struct stream *st, const unsigned char *p, size_t n)
{
	if (S->o->respawns == 0 || st->dig_full)
		return;
	size_t at = st->committed;
	if (st->pdig_from == SIZE_MAX && sup_serves(S)) {
		/* Masked digests from this block on (a serving run's
		 * replacements replay: output_past_ended); its start is still
		 * in the history ring (at least a block long), else the next. */
		size_t start = at / DIGEST_BLOCK * DIGEST_BLOCK;
		void *room = st->dig_size > 0 ? realloc(st->pdig, st->dig_size * sizeof *st->pdig) : st->pdig;
		if (room != NULL)
			st->pdig = room;
		if ((room != NULL || st->dig_size == 0) && (st->hist->head <= start || at % DIGEST_BLOCK == 0)) {
			digest_init(&st->pcur, &S->dkey);
			masked_update(&st->pcur, ring_at(st->hist, start), at - start);
			st->pdig_from = at / DIGEST_BLOCK;
		}
	}
	while (n > 0) {
		size_t end = (at / DIGEST_BLOCK + 1) * DIGEST_BLOCK;
		size_t m = end - at < n ? end - at : n;
		digest_update(&st->cur, p, m);
		if (st->pdig_from != SIZE_MAX)
			masked_update(&st->pcur, p, m);
		p += m;
		n -= m;
		at += m;
		if (at != end)
			continue;
		if (st->ndig == st->dig_size) {
			size_t size = st->dig_size ? 2 * st->dig_size : 1024;
			void *grown = size <= MAX_DIGESTS ? realloc(st->dig, size * sizeof *st->dig) : NULL;
			/* Masked ones only once the run serves. */
			void *pgrown = grown == NULL		      ? NULL
				       : st->pdig_from == SIZE_MAX ? st->pdig
								   : realloc(st->pdig, size * sizeof *st->pdig);
			if (grown != NULL)
				st->dig = grown;
			if (grown == NULL || (pgrown == NULL && st->pdig_from != SIZE_MAX)) {
				st->dig_full = true;
				log_event("%s: no more room for output digests after %zu bytes", st->name, at);
				return;
			}
			st->pdig = pgrown;
			st->dig_size = size;
		}
		if (st->pdig_from != SIZE_MAX) {
			digest_final(&st->pcur, st->pdig[st->ndig]);
			digest_init(&st->pcur, &S->dkey);
		}
		digest_final(&st->cur, st->dig[st->ndig++]);
		digest_init(&st->cur, &S->dkey);
	}
}


/* Writes out what was committed and not yet emitted: one write per output_vote,
 * not per chunk. */
static void flush(struct sup *S, struct stream *st)
{
	if (st->committed > st->emitted && !S->stopping) {
		emit(S, st, ring_at(st->hist, st->emitted), st->committed - st->emitted);
		st->emitted = st->committed;
	}
}


/* Inetd style (a socket on stdout, often stdin too): once every stream
 * written to that socket has ended, its write side is shut so the client
 * sees the end of the answer even while the replicas still run (or the
 * connection stays open for reading). Not a socket: nothing to do. */
static void shut_socket(struct sup *S, const struct stream *st)
{
	struct stat a, b;
	if (S->stopping || fstat(st->fd, &a) != 0 || !S_ISSOCK(a.st_mode))
		return;
	for (int s = 0; s < NSTREAMS; s++) {
		const struct stream *o = &S->s[s];
		if (o != st && !o->ended && fstat(o->fd, &b) == 0 && b.st_dev == a.st_dev && b.st_ino == a.st_ino)
			return; /* the other stream still writes to it */
	}
	if (shutdown(st->fd, SHUT_WR) != 0 && errno != ENOTCONN && errno != ENOTSOCK)
		log_warn("cannot shut the write side of the %s socket: %s", st->name, strerror(errno));
	else
		log_event("%s: end of output, the socket's write side is shut", st->name);
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
		if (st->front_len < DIGEST_BLOCK && st->front != NULL) {
			size_t n = DIGEST_BLOCK - st->front_len < res->commit ? DIGEST_BLOCK - st->front_len : res->commit;
			memcpy(st->front + st->front_len, p, n);
			st->front_len += n;
		}
		output_digest_commit(S, st, p, res->commit);
		sup_committed_by(S, (unsigned)__builtin_popcountll(res->agree), res->commit);
		st->committed += res->commit;
		for (unsigned i = 0; i < S->nslots; i++)
			if (res->agree & ((uint64_t)1 << i))
				ring_consume_to(S->r[i].ring[s], st->committed);
	}
	if (res->ended) {
		flush(S, st);
		st->ended = true;
		log_event("%s: end agreed after %zu bytes", st->name, st->committed);
		shut_socket(S, st);
	}
}


/* Resumes reading replicas whose rings have room again. */
static void resume_reading(struct sup *S, int s)
{
	for (unsigned i = 0; i < S->nslots; i++) {
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
	for (unsigned i = 0; i < S->nslots; i++)
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


/* Whether a replica other than r still runs that votes or will: a voter,
 * or a replacement catching up. */
static bool others_running(const struct sup *S, const struct replica *r)
{
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *o = &S->r[i];
		if (o != r && (o->live || o->joining) && !o->exited)
			return true;
	}
	return false;
}


/* Whether r's stream s counts as ended for the vote. The end of a replica
 * that died of a SIGKILL from outside is wherever it happened to be: once
 * another voter has written past it, the replica is out (it would have gone
 * on); while another replica still runs, its end waits (two replicas killed
 * at the same offset must not agree that the output ends there). Until r is
 * reaped we cannot tell how it died, so its end waits too. A program that
 * SIGKILLs itself does so at the same point in every replica: once no other
 * runs, those ends count. */
static bool ended(struct sup *S, struct replica *r, int s)
{
	if (!r->eof[s])
		return false;
	if (r->exited && !r->sigkilled)
		return true;
	if (r->sigkilled)
		for (unsigned i = 0; i < S->nslots; i++) {
			const struct replica *o = &S->r[i];
			if (o != r && o->live && o->ring[s]->tail > r->ring[s]->tail) {
				replica_kill(S, r, "killed by a SIGKILL from outside diehard while the others went on");
				return false;
			}
		}
	return !others_running(S, r);
}


/* Whether a voter's stream ended at the committed offset and another voter
 * already wrote past that end: then the vote is a prefix vote, so that a
 * replica that died early (a crash) is found wrong now, not once a whole
 * chunk is full. */
static bool contradicted_end(const struct voter_view *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!v[i].live || !v[i].eof)
			continue;
		for (unsigned j = 0; j < n; j++)
			if (v[j].live && v[j].data != NULL && v[j].len > v[i].len)
				return true;
	}
	return false;
}


/* Whether two of the replicas that agree on a prefix provably differ at the
 * first byte after it (different bytes, or one ended there). */
static bool parting(const struct voter_view *v, unsigned n, const struct voter_result *res)
{
	size_t c = res->commit;
	int first = -1;
	for (unsigned i = 0; i < n; i++) {
		if (!(res->agree & ((uint64_t)1 << i)))
			continue;
		bool said = v[i].len > c || v[i].eof;
		if (!said)
			continue;
		if (first < 0) {
			first = (int)i;
			continue;
		}
		const struct voter_view *a = &v[first], *b = &v[i];
		bool a_ends = a->len == c, b_ends = b->len == c;
		if (a_ends != b_ends || (!a_ends && a->data[c] != b->data[c]))
			return true;
	}
	return false;
}


/* Whether a live voter has said nothing yet past offset c (no byte there, no
 * end): it may still side with one of the parting replicas. */
static bool pending(const struct voter_view *v, unsigned n, size_t c)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].live && !(v[i].len > c || v[i].eof))
			return true;
	return false;
}


/* Whether diverged replica i wrote what the winner wrote as far as both
 * go: one of them just ended sooner, as stopping replicas do. */
static bool stop_apart(const struct voter_view *v, const struct voter_result *res, unsigned i)
{
	if (res->agree == 0)
		return false;
	const struct voter_view *w = &v[__builtin_ctzll(res->agree)];
	return first_difference(v, res, i) == (v[i].len < w->len ? v[i].len : w->len);
}

/* Whether every two live views agree as far as both go (one just ended
 * sooner): stopping apart, not disagreeing. */
static bool views_nested(const struct voter_view *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++) {
			if (!v[i].live || !v[j].live)
				continue;
			size_t m = v[i].len < v[j].len ? v[i].len : v[j].len;
			if (m > 0 && memcmp(v[i].data, v[j].data, m) != 0)
				return false;
		}
	return true;
}

/* Whether two live views agree as far as both have spoken: neither has a
 * different byte where both wrote one, nor ended where the other goes on. */
static bool views_agree(const struct voter_view *a, const struct voter_view *b)
{
	size_t m = a->len < b->len ? a->len : b->len;
	if (m > 0 && memcmp(a->data, b->data, m) != 0)
		return false;
	return !(a->eof && b->len > a->len) && !(b->eof && a->len > b->len);
}

static bool views_agree_at(const void *ctx, unsigned i, unsigned j)
{
	const struct voter_view *v = ctx;
	return views_agree(&v[i], &v[j]);
}

/* The live voters that agree with the fewest others (slot bits): in a tie
 * with every slot taken, one of them leaves the vote to make room for the
 * next tie-breaker (replace_wait). With k = 3 and no majority possible,
 * that is every voter: no two agree. */
static uint64_t weakest(const struct voter_view *v, unsigned n)
{
	uint64_t live = 0;
	for (unsigned i = 0; i < n; i++)
		live |= (uint64_t)v[i].live << i;
	return replace_loners(live, n, views_agree_at, v);
}

/* Whether view i may still write more before its lines are compared in
 * another order: not at its end, and, in a prefix vote (a quorum quiet),
 * still writing itself. */
static bool view_more(const struct sup *S, const struct voter_view *v, unsigned i, enum voter_mode mode)
{
	return !v[i].eof && (mode == VOTER_CHUNKS || sup_now() - S->r[i].last_output < S->o->idle_ms / 1000.0);
}

/* Where two views first differ; their shorter length when they do not. */
static size_t view_diff(const struct voter_view *a, const struct voter_view *b)
{
	size_t n = a->len < b->len ? a->len : b->len, d = 0;
	while (d < n && a->data[d] == b->data[d])
		d++;
	return d;
}

/* With no majority, the reference is the live view the most others agree
 * with, as they are or with their lines in its order (the lowest on a
 * tie): one wrong voter, whatever its slot, is not the order two right
 * ones are measured by. */
static int reference_view(struct sup *S, const struct stream *st, const struct voter_view *v, enum voter_mode mode)
{
	int best = -1;
	unsigned most = 0;
	for (unsigned w = 0; w < S->nslots; w++) {
		if (!v[w].live || v[w].data == NULL)
			continue;
		unsigned n = 1;
		for (unsigned i = 0; i < S->nslots; i++) {
			if (i == w || !v[i].live || v[i].data == NULL)
				continue;
			size_t d = view_diff(&v[w], &v[i]), end;
			n += d == (v[i].len < v[w].len ? v[i].len : v[w].len) ||
			     outorder_check(st, st->committed, v[w].data, v[w].len, view_more(S, v, w, mode), v[i].data,
					    v[i].len, view_more(S, v, i, mode), d, 0, &end) == RELINES_SAME;
		}
		if (n > most) {
			most = n;
			best = (int)w;
		}
	}
	return best;
}

/* A server's stdout or stderr where the voters differ (outorder.c): each
 * live view that differs from the reference (the lowest of agree, or with
 * none reference_view's) only in the order of whole lines is given the
 * reference's order, in place. True when one was (vote again); *waiting:
 * the views that may still prove so once they, or the reference, write
 * more. */
static bool reorder(struct sup *S, struct stream *st, const struct voter_view *v, uint64_t agree,
		    enum voter_mode mode, uint64_t *waiting)
{
	int s = (int)(st - S->s);
	*waiting = 0;
	if (!voter_views_differ(v, S->nslots) || !outorder_free(S, st))
		return false; /* cheap first: called whenever nothing is committed */
	int w = agree != 0 ? __builtin_ctzll(agree) : reference_view(S, st, v, mode);
	if (w < 0)
		return false;
	bool changed = false;
	for (unsigned i = 0; i < S->nslots; i++) {
		if (i == (unsigned)w || !v[i].live || v[i].data == NULL)
			continue;
		size_t d = view_diff(&v[w], &v[i]);
		if (d == (v[i].len < v[w].len ? v[i].len : v[w].len))
			continue; /* no byte differs: one just goes further */
		enum relines_verdict o =
			outorder_match(S, st, st->committed, v[w].data, v[w].len, view_more(S, v, (unsigned)w, mode),
				       ring_at(S->r[i].ring[s], st->committed), v[i].len, view_more(S, v, i, mode), d, 0);
		if (o == RELINES_SAME)
			changed = true;
		else if (o == RELINES_WAIT)
			*waiting |= (uint64_t)1 << i;
	}
	if (*waiting != 0)
		arm_idle(S); /* decided at the latest once they are quiet */
	return changed;
}

/* Asked to stop (diehard forwarded SIGTERM or SIGINT), the replicas end
 * their output where the signal found each of them, so past some point no
 * quorum agrees any more: st ends at what was agreed, and what fewer than
 * a quorum wrote after it is dropped, neither a divergence nor the end of
 * the run (which ends as the replicas exit). Replicas that wrote different
 * bytes still stop the run with no majority. */
static void stop_end(struct sup *S, struct stream *st)
{
	log_event("%s: the stopping replicas part after %zu agreed bytes: the rest is dropped", st->name,
		  st->committed);
	flush(S, st);
	st->ended = true;
	shut_socket(S, st);
}

void output_vote(struct sup *S, struct stream *st, enum voter_mode mode)
{
	int s = (int)(st - S->s);
	for (;;) {
		/* Late replicas are checked even once the stream has ended: one
		 * may still write past the agreed end. Replacements that reach
		 * the frontier vote from here on. */
		for (unsigned i = 0; i < S->nslots; i++) {
			catch_up(S, st, &S->r[i]);
			replace_check_joined(S, &S->r[i]);
		}
		if (S->stopping || st->ended)
			break;
		unsigned live = sup_live_count(S);
		unsigned quorum = sup_quorum(S);
		if (live < quorum) {
			if (S->stop_ev != NULL) {
				stop_end(S, st);
				break;
			}
			if (replace_wait(S, "too few replicas left", 0))
				break;
			struct voter_result none = { 0 };
			stop_no_quorum(S, st, &none, "too few replicas left");
			return;
		}
		struct voter_view v[VOTER_MAX];
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *r = &S->r[i];
			struct ring *rr = r->ring[s];
			bool at_c = r->live && !r->stop_cut[s] && rr->head == st->committed;
			bool eof = at_c && ended(S, r, s);
			v[i] = (struct voter_view){
				.data = at_c ? ring_at(rr, st->committed) : NULL,
				.len = at_c ? rr->tail - st->committed : 0,
				.eof = eof,
				.live = r->live && !r->stop_cut[s],
			};
		}
		if (live != sup_live_count(S))
			continue; /* ended() took a replica out: count again */
		/* Whole chunks first: exact, and what breaks a tie once a fresh
		 * replica agrees with one side. A prefix vote only when that
		 * decides nothing: the replicas went quiet (mode), or one's
		 * output ended where another's goes on (a crash shows now,
		 * not once a chunk is full). */
		struct voter_result res;
		voter_decide(v, S->nslots, quorum, CHUNK, VOTER_CHUNKS, &res);
		/* A server's lines in another order (outorder.c): vote again
		 * once they are in one. Looked at whenever nothing is
		 * committed (two voters that differ in order wait for a third
		 * as well). */
		uint64_t waiting = 0;
		if ((res.diverged != 0 || res.no_quorum || (res.commit == 0 && !res.ended)) &&
		    reorder(S, st, v, res.agree, mode, &waiting))
			continue;
		if (waiting != 0 && res.commit == 0 && !res.ended)
			break; /* no majority yet: the lines may still prove the same */
		res.diverged &= ~waiting; /* behind now: checked against the committed output */
		bool undecided = res.commit == 0 && !res.ended && res.diverged == 0;
		if (undecided && (mode == VOTER_PREFIX || contradicted_end(v, S->nslots))) {
			if (res.no_quorum && S->k >= 3) {
				char why[64];
				snprintf(why, sizeof why, "no majority on %s at byte %zu", st->name,
					 st->committed + res.diff_offset);
				if (replace_wait(S, why, weakest(v, S->nslots)))
					break;
			}
			voter_decide(v, S->nslots, quorum, CHUNK, VOTER_PREFIX, &res);
			bool parts = res.commit > 0 && !res.ended && S->k >= 3 && parting(v, S->nslots, &res);
			if ((res.diverged != 0 || res.no_quorum || parts) &&
			    reorder(S, st, v, res.agree, mode, &waiting))
				continue;
			if (waiting != 0 && (res.no_quorum || parts))
				break;
			res.diverged &= ~waiting;
			/* The replicas that share this prefix part ways right after
			 * it: with two of three wrong, their common prefix is no
			 * answer. Whole chunks said a quorum may still form: wait
			 * for it. */
			if (parts) {
				if (pending(v, S->nslots, res.commit))
					break; /* a voter yet to speak may still decide it */
				if (S->stop_ev != NULL && views_nested(v, S->nslots)) {
					stop_end(S, st);
					break;
				}
				char why[64];
				snprintf(why, sizeof why, "no majority on %s at byte %zu", st->name,
					 st->committed + res.commit);
				if (replace_wait(S, why, weakest(v, S->nslots)))
					break;
				/* No tie-breaker can come: no majority past here. */
				struct voter_result at = { .no_quorum = true, .diff_offset = res.commit };
				stop_no_quorum(S, st, &at, "the replicas disagree");
				return;
			}
		}
		for (unsigned i = 0; i < S->nslots; i++)
			if (res.diverged & ((uint64_t)1 << i)) {
				if (S->stop_ev != NULL && stop_apart(v, &res, i)) {
					if (v[i].eof)
						ended_early(S, st, &S->r[i]); /* cut short by the stop */
					continue; /* or went on: its excess goes (catch_up) */
				}
				record_divergence(S, st, st->committed + first_difference(v, &res, i), res.agree, i,
						  "differs from the majority");
				replica_kill(S, &S->r[i], "output differs from the majority");
			}
		if (res.no_quorum && S->stop_ev != NULL && views_nested(v, S->nslots)) {
			stop_end(S, st);
			break;
		}
		if (res.no_quorum) {
			/* k = 2 detects only: any disagreement stops the run. */
			char why[64];
			snprintf(why, sizeof why, "no majority on %s at byte %zu", st->name, st->committed + res.diff_offset);
			if (S->k >= 3 && replace_wait(S, why, weakest(v, S->nslots)))
				break;
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


void output_on_readable(evutil_socket_t fd, short what, void *arg)
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
		output_vote(S, &S->s[s], VOTER_CHUNKS);
		return;
	}
	ssize_t n = read(fd, ring_at(rr, rr->tail), room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		replica_close_output(r, s);
	} else {
		ci_output(S, r, s, ring_at(rr, rr->tail), (size_t)n);
		rr->tail += (size_t)n;
		r->last_output = sup_now();
		report_bytes(S->report, r->id, S->s[s].name, (size_t)n);
		/* Progress: a replica that still writes is slow, not hung (three
		 * CPU-bound replicas on two cores trail each other by seconds).
		 * Its straggler clocks start again. */
		if (r->behind_since != 0)
			r->behind_since = sup_now();
		if (r->exit_wait_since != 0)
			r->exit_wait_since = sup_now();
	}
	arm_idle(S);
	output_vote(S, &S->s[s], VOTER_CHUNKS);
	sup_check_done(S);
}


/* Reads what r has written to stream s and not yet been read (FIONREAD):
 * true when nothing was left unread. */
static bool drained(struct sup *S, struct replica *r, int s)
{
	int n = 0;
	for (int tries = 0; tries < 4; tries++) {
		if (r->out_fd[s] < 0 || r->out_paused[s])
			return r->out_fd[s] < 0;
		if (ioctl(r->out_fd[s], FIONREAD, &n) != 0 || n == 0)
			return n == 0;
		output_on_readable(r->out_fd[s], EV_READ, &r->out_arg[s]);
		if (S->stopping)
			return false;
	}
	return false;
}

/* Whether the voters' output on st, their pipes read out, stands at one
 * offset with the same bytes (r aside): committed then, if it was not
 * (a prefix vote: every voter wrote it, and none wrote more). */
static bool voters_at_one_point(struct sup *S, struct stream *st, const struct replica *r)
{
	int s = (int)(st - S->s);
	for (int round = 0; round < 2; round++) {
		size_t c = st->committed, at = c;
		const struct replica *lead = NULL;
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *o = &S->r[i];
			if (o == r || !o->live)
				continue;
			if (!drained(S, o, s) || !o->live || o->ring[s]->head != c || o->eof[s] != r->eof[s])
				return false;
			if (lead == NULL) {
				lead = o;
				at = o->ring[s]->tail;
			} else if (o->ring[s]->tail != at ||
				   memcmp(ring_at(o->ring[s], c), ring_at(lead->ring[s], c), at - c) != 0) {
				return false;
			}
		}
		if (at == c)
			return true;
		if (round == 0)
			output_vote(S, st, VOTER_PREFIX);
		if (S->stopping || !r->joining)
			return false;
	}
	return false;
}

bool output_quiet_point(struct sup *S, struct replica *r, size_t at[NSTREAMS])
{
	if (sup_now() - r->last_output < S->o->idle_ms / 1000.0)
		return false; /* its start-up output may not be whole yet */
	for (int s = 0; s < NSTREAMS; s++) {
		if (!voters_at_one_point(S, &S->s[s], r) || !drained(S, r, s) || !r->joining)
			return false;
		/* What it wrote up to the committed offset is checked
		 * (catch_up); anything past it (start-up output the voters
		 * have not written yet: a banner still in their stdio
		 * buffers) waits for them there. */
		at[s] = S->s[s].committed;
		if (r->ring[s]->head < at[s] && r->ring[s]->head < r->ring[s]->tail)
			return false;
	}
	return true;
}

void output_rebase(struct sup *S, struct replica *r, const size_t at[NSTREAMS])
{
	for (int s = 0; s < NSTREAMS; s++) {
		struct ring *rr = r->ring[s];
		if (rr->tail <= at[s] || r->from_files)
			rr->head = rr->tail = at[s];
		else
			rr->head = at[s]; /* the rest waits for the voters there */
		rdig_init(S, r, s);
	}
}


void output_on_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	double wait = quiet_wait(S);
	if (wait > 0) {
		arm_idle_in(S, wait);
		return;
	}
	for (int s = 0; s < NSTREAMS; s++)
		output_vote(S, &S->s[s], VOTER_PREFIX);
	sup_check_done(S);
}
