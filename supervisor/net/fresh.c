/* fresh.c — fresh servers (--stateless, --durable; docs/NETWORK.md, "Fresh
 * servers"): a replacement with no connection log to replay starts as a new
 * server and joins the vote at a quiet point instead of catching up.
 *
 * A durable server's (--durable: its state is in the files it commits)
 * starts from the committed files at a quiet moment while new clients wait
 * (net_durable_begin), so that nothing changes its state before it joins;
 * the hold ends as it joins, as it goes, or --timeout after it began (the
 * replacement then killed). Its start-up output is its own (output.c).
 *
 * Until then it is a joiner net.c gives no connection (its slot not ready):
 * its start-up output is checked against the run's start (output.c), its
 * clocks settle (net_clocks_settled). At the quiet point (fresh_join) its
 * output is rebased, its calls, connects and flows numbered from the
 * voters' front and its pids aligned with theirs, and it is a voter.
 * Looked for at every connection's close (an event of its own, outside
 * the connection's handling) and at the tick; one that does not listen
 * where it should --timeout after its start is killed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dgram.h"
#include "factory.h"
#include "files.h"
#include "log.h"
#include "netint.h"
#include "outbound.h"
#include "report.h"
#include "sup.h"

/* The next thread or process fresh server i makes gets the pid its
 * siblings' next one will get: a thread per connection (or a process:
 * sshd, PostgreSQL) is numbered as theirs, and take.c matches a server's
 * clock reads per thread number. Best effort: without the voters' last
 * pid, or the right to set the joiner's, pids come as they come (said
 * once). */
static void align_pids(struct net *N, unsigned i)
{
	struct sup *S = N->S;
	pid_t want = -1;
	int err = ENOENT;
	for (unsigned j = 0; j < S->nslots; j++) {
		pid_t v;
		if (j == i || !N->slot[j].present || !S->r[j].live || N->slot[j].F == NULL || N->slot[j].unanswered)
			continue;
		if ((err = factory_last_pid(N->slot[j].F, -1, &v)) == 0 && v > want)
			want = v;
		if (err == ETIMEDOUT)
			N->slot[j].unanswered = true; /* never asked again: net_tick kills it */
	}
	pid_t got = 0;
	if (want >= 0 && N->slot[i].F != NULL && !N->slot[i].unanswered &&
	    (err = factory_last_pid(N->slot[i].F, want, &got)) == 0)
		return;
	if (err == ETIMEDOUT)
		N->slot[i].unanswered = true;
	if (want < 0 && err == ENOENT && !N->said_pids)
		return; /* no voter left to align with: nothing to say */
	if (!N->said_pids)
		log_event("replica %u's pids not aligned with its siblings' (%s): a server that starts a thread or "
			  "process per connection may read other clocks (said once)",
			  S->r[i].id, strerror(err));
	N->said_pids = true;
}

/* Where a fresh server in slot i must listen before it joins: where the
 * voters listen; with none left, where diehard does. */
static uint64_t fresh_wants(const struct net *N, unsigned i)
{
	const struct sup *S = N->S;
	uint64_t want = 0;
	bool voters = false;
	for (unsigned j = 0; j < S->nslots; j++)
		if (j != i && N->slot[j].present && S->r[j].live) {
			want |= N->slot[j].listens;
			voters = true;
		}
	for (unsigned l = 0; l < N->nl && !voters; l++)
		if (N->L[l]->fd >= 0)
			want |= 1ull << l;
	return want;
}

static void quiet_release(struct net *N, const char *joined);

/* Slot i, a fresh server (a replacement with no connection log to replay:
 * --stateless), joins the vote at a quiet point: it listens where every
 * voter does and its clocks read now (net_clocks_settled), no connection
 * is open (a client's it did not take would end in log lines it never
 * writes; an outbound one of the voters' is not its own), the voters'
 * appends to files are all appended (files_streams_quiet), and their
 * output stands at one point, agreed (output_quiet_point). There its
 * streams go on from that point, its versions of appended files are set
 * to the real ones (files_streams_rebase), its calls, outbound connects and flows
 * are numbered from the voters' front, its pids from theirs, and new
 * connections reach it. Its start-up output was checked against the run's
 * start as it came. */
static void fresh_join(struct net *N, unsigned i)
{
	struct sup *S = N->S;
	struct nslot *ns = &N->slot[i];
	struct replica *r = &S->r[i];
	if (!ns->present || !ns->fresh || ns->clocks_behind || !r->joining || r->exited || N->stopping ||
	    S->stopping || S->stop_ev != NULL)
		return;
	uint64_t want = fresh_wants(N, i);
	if (want == 0 || (ns->listens & want) != want)
		return;
	if (N->conns != NULL) {
		/* Under a steady load some connection is always open: one
		 * is made quiet (a drain), new clients waiting meanwhile. */
		if (ns->conns_since == 0)
			ns->conns_since = sup_now();
		net_fresh_drain(N, ns->conns_since);
		return;
	}
	/* The voters' appends to files at one point too; a voter that keeps
	 * them from it (a line it never ends) holds the join --timeout at
	 * most: then it joins, and leaves the streams not at one point. */
	bool quiet = files_streams_quiet(S);
	if (quiet) {
		ns->streams_since = 0;
	} else {
		if (ns->streams_since == 0)
			ns->streams_since = sup_now();
		if (sup_now() - ns->streams_since <= S->o->straggler_ms / 1000.0)
			return;
	}
	size_t at[NSTREAMS];
	if (!output_quiet_point(S, r, at) || !r->joining || !ns->present)
		return;
	output_rebase(S, r, at);
	files_streams_rebase(S, i, !quiet);
	align_pids(N, i);
	outbound_slot_front(N, i);
	dgram_slot_front(N, i);
	ns->fresh = false;
	ns->conns_since = 0;
	ns->ready = true;
	r->fresh = false;
	r->joining = false;
	r->live = true;
	r->behind_since = 0;
	replace_joined(S, r);
	virt_calls_now(S->virt, i);
	double t = sup_now() - S->t_start;
	log_event("replica %u joins as a fresh server %.3f s after its start%s (stdout at byte %zu, stderr at byte "
		  "%zu): it votes",
		  r->id, t - r->spawn_time, r->from_files ? ", from the committed files" : "", at[0], at[1]);
	report_caught_up(S->report, r->id, t, t - r->spawn_time, 0, at[0], at[1]);
	sup_degraded_tick(S);
	quiet_release(N, r->from_files ? "the replacement from the committed files joined" : "the fresh server joined");
}

/* Whether slot i holds a durable server's replacement on its way to join. */
static bool durable_joiner(const struct net *N, unsigned i)
{
	const struct replica *r = &N->S->r[i];
	return N->slot[i].present && N->slot[i].fresh && r->from_files && r->joining && !r->killed;
}

static bool durable_joining(const struct net *N)
{
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (durable_joiner(N, i))
			return true;
	return false;
}

/* Whether a fresh server (not a durable one's) waits for its quiet point. */
static bool fresh_waiting(const struct net *N)
{
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].present && N->slot[i].fresh && N->S->r[i].joining && !N->S->r[i].from_files)
			return true;
	return false;
}

/* A drain ends once nobody wants it (the fresh servers joined, or went),
 * or past its bound. The durable hold ends once no replacement it was for
 * is on its way (all joined, or gone); one that takes longer than
 * --timeout is a straggler: killed, and the clients let in (the next
 * replacement waits for the next quiet moment). */
static void quiet_release(struct net *N, const char *joined)
{
	struct sup *S = N->S;
	if (N->quiet_held == 0)
		return;
	if (N->quiet_draining) {
		bool wanted = S->durable_wait || fresh_waiting(N);
		if (!wanted && joined != NULL)
			net_quiet_end(N, joined);
		else
			net_quiet_drained(N, wanted);
		return;
	}
	if (!durable_joining(N)) {
		net_quiet_end(N, joined != NULL ? joined : "no replacement from the files is on its way any more");
		return;
	}
	double limit = S->o->straggler_ms / 1000.0;
	if (sup_now() - N->quiet_started <= limit)
		return;
	for (unsigned i = 0; i < S->nslots; i++)
		if (durable_joiner(N, i)) {
			char why[160];
			snprintf(why, sizeof why, "straggler: a replacement from the committed files that did not join "
						  "within %.1f s while new clients waited", limit);
			net_kill(N, i, why);
		}
	net_quiet_end(N, "the replacement did not join within --timeout");
}

static void fresh_joins(struct net *N)
{
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].fresh)
			fresh_join(N, i);
}

/* A fresh server that does not listen where the voters do --timeout after
 * its start (hung in its start-up) is a straggler: its slot is for one
 * that will. Waiting for a quiet point once it listens is not bounded: it
 * says so (joining), and the service goes on meanwhile. */
static void fresh_stragglers(struct net *N, double now)
{
	struct sup *S = N->S;
	double limit = S->o->straggler_ms / 1000.0;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct nslot *ns = &N->slot[i];
		struct replica *r = &S->r[i];
		if (!ns->present || !ns->fresh || !r->joining || now - S->t_start - r->spawn_time < limit)
			continue;
		uint64_t want = fresh_wants(N, i);
		if (want != 0 && (ns->listens & want) == want)
			continue;
		char why[160];
		snprintf(why, sizeof why, "straggler: a fresh server that does not listen where the others do %.1f s after "
					  "its start",
			 limit);
		net_kill(N, i, why);
	}
}

static void on_fresh(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	fresh_joins(arg);
}

struct event *fresh_event(struct net *N)
{
	return event_new(N->S->base, -1, 0, on_fresh, N);
}

void fresh_closed(struct net *N)
{
	if (N->S->durable_wait)
		replace_request(N->S); /* a quiet moment, perhaps */
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].fresh) {
			event_active(N->fresh_ev, EV_TIMEOUT, 0);
			return;
		}
}

void fresh_tick(struct net *N, double now)
{
	fresh_stragglers(N, now);
	fresh_joins(N);
	quiet_release(N, NULL);
}

