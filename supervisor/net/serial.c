/* serial.c — --serial-clients: each replica takes one client's request at
 * a time, in the order diehard received them.
 *
 * Why: a server takes requests that come on different connections at once
 * in an order of its own: which connections one `epoll_wait` returns, and
 * in which order, follows where its loop stood when each client's bytes
 * landed (docs/NETWORK.md, "Not agreed either"). Replies that depend on
 * that order (the length of a list several clients push to, a counter they
 * share) then differ between replicas, a replica is outvoted, and with two
 * left a connection can lose its majority. Here no replica holds two
 * connections' unanswered bytes at once, so its loop has one to take, and
 * every replica takes them in diehard's order.
 *
 * How: each replica slot has a lane, a queue of entries (connection, the
 * client's offset up to which its bytes came, whether its input ended
 * there, the connection's committed reply then), one per read of a
 * client's bytes or its end, appended to every lane at once: one order for
 * all. A replica is fed the lane's front entry when no round is in flight
 * in its lane, and that starts a round; the round ends when the replica
 * answers on that connection: its reply goes past the mark, the more of
 * its own reply when fed and the committed reply when the bytes came (a
 * server acts on a request before it answers it; a replica still sending
 * its last reply's tail has not answered), or its reply ends (a server
 * closes when its client did). Entries of the round's connection at the
 * front join the round (a request that came in pieces), the mark raised to
 * their committed reply. Then the next entry goes. The second's turn is
 * kept here too: a round does not start in the guard before a wall-clock
 * second ends (conn.c's hold_for_turn) but just past it, so that a lane
 * fed later than the client's bytes came does not read another second
 * than a sibling fed earlier.
 *
 * A peer that cannot answer (its reply ended, or it is not read because
 * its client does not read) is fed without a round; so is a connection
 * whose round went unanswered for SERIAL_WAIT_MS (said once a lane), until
 * it answers again: a request that gets no reply (a blocking command, a
 * client that sends half a request) costs a lane that long once, not once
 * an entry. A lane whose front entry waited --timeout while a sibling's
 * lane moves is a straggler's: its replica is killed. A lane holds
 * SERIAL_MAX_ENTRIES at most: no client is read while one does.
 *
 * Not covered (docs/NETWORK.md, "One client at a time"): requests fed
 * without a round may be taken before or after another client's; so may a
 * pipelining client's next request; bytes a server pushes unasked end a
 * round early; a replacement's replayed connections are ordered by
 * connlog.c, live ones by its lane, but not one against the other.
 *
 * Invariants: a lane's entries are in arrival order; an entry whose
 * connection, or whose connection's peer of the lane's slot, left has a
 * NULL connection and is skipped; cur != NULL iff a round is in flight
 * (the timer armed for its wait); a lane whose replica left is empty.
 */
#include <stdlib.h>
#include <string.h>

#include "exitcode.h"
#include "log.h"
#include "netint.h"
#include "sup.h"

/* How long a round waits for its answer before the next client's go. */
#define SERIAL_WAIT_MS 1000
/* Entries a lane holds at most (40 bytes each): while one holds this many,
 * no client is read (serial_crowded), so clients that send in many small
 * reads cannot make diehard's memory grow past it; read again once every
 * lane is down to half. */
#define SERIAL_MAX_ENTRIES ((size_t)1 << 16)
/* A lane's ring is given back once empty if it grew past this. */
#define SERIAL_KEEP_ENTRIES 1024u

struct entry {
	struct conn *c;   /* NULL: gone, or a record of the connection log */
	size_t upto;      /* the client's bytes up to here */
	size_t committed; /* the connection's committed reply when they came */
	double at;        /* when the first of them came (sup_now) */
	bool eof;         /* the client's input ended there */
	bool log;         /* one record (bytes or end) of a connection its
			     replica was replayed, fed by connlog.c */
};

struct lane {
	struct serial *s;
	unsigned slot;
	struct entry *q; /* ring: len entries from head */
	size_t head, len, cap;
	struct conn *cur; /* the round's connection (NULL: none in flight; or
			     &log_round: a record of the connection log) */
	size_t mark;      /* the round ends when the reply goes past it */
	struct event *timer, *kick;
	bool said_wait;
};

struct serial {
	struct net *N;
	unsigned nslots;
	bool crowded; /* a lane reached SERIAL_MAX_ENTRIES: clients not read */
	struct lane lane[];
};

/* cur while connlog.c's round is in flight. */
static char log_round_mark;
#define LOG_ROUND ((struct conn *)(void *)&log_round_mark)

static struct entry *at(struct lane *l, size_t i)
{
	return &l->q[(l->head + i) % l->cap];
}

/* Clients are read again once every lane is down to half its most. */
static void uncrowd(struct serial *s)
{
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->lane[i].len > SERIAL_MAX_ENTRIES / 2)
			return;
	s->crowded = false;
	for (struct conn *c = s->N->conns; c != NULL; c = conn_next(c))
		conn_read_again(c);
}

static void pop(struct lane *l)
{
	l->head = (l->head + 1) % l->cap;
	if (--l->len == 0 && l->cap > SERIAL_KEEP_ENTRIES) {
		free(l->q); /* a burst's ring given back */
		l->q = NULL;
		l->cap = 0;
		l->head = 0;
	}
}

/* Drops the gone entries at the front. */
static void skip_gone(struct lane *l)
{
	while (l->len > 0 && at(l, 0)->c == NULL && !at(l, 0)->log)
		pop(l);
}

static void arm(struct lane *l, long ns)
{
	struct timeval tv = { ns / 1000000000L, ns % 1000000000L / 1000 };
	/* From now, not from the loop turn's cached time: a wait for a
	 * second's turn would end before it (conn.c's net_turn_wait). */
	if (event_base_update_cache_time(event_get_base(l->timer)) != 0 || evtimer_add(l->timer, &tv) != 0)
		fatal(EXIT_INTERNAL, "cannot arm a lane's timer");
}

static void round_end(struct lane *l)
{
	l->cur = NULL;
	if (evtimer_del(l->timer) != 0)
		fatal(EXIT_INTERNAL, "cannot remove a lane's timer");
	event_active(l->kick, EV_TIMEOUT, 0);
}

/* Feeds the front entries until a round is in flight or none is left.
 * Deferred (the lane's kick): a round ends inside conn.c's own calls. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct lane *l = arg;
	for (;;) {
		skip_gone(l);
		if (l->cur != NULL || l->len == 0)
			break;
		if (at(l, 0)->log) {
			/* connlog.c feeds the record: a round in flight, or
			 * nothing left to feed (the entry goes), or not yet
			 * (its connect or its last write still pending: it
			 * kicks again). */
			l->cur = LOG_ROUND; /* before: its answer may come inside */
			int fed = connlog_serial_feed(l->s->N, l->slot);
			if (l->len == 0 || !at(l, 0)->log) {
				l->cur = NULL; /* its replica killed inside: the lane emptied */
				break;
			}
			if (fed <= 0 || l->cur != LOG_ROUND) {
				l->cur = NULL; /* none, or already answered */
				if (fed == 0)
					break;
				pop(l);
				continue;
			}
			pop(l);
			arm(l, SERIAL_WAIT_MS * 1000000L);
			continue;
		}
		struct conn *c = at(l, 0)->c;
		size_t len = l->len;
		if (!conn_serial_feed(c, l->slot)) {
			serial_forget(l->s, c, l->slot); /* no peer of this slot takes it */
			continue;
		}
		/* Fed (a round in flight, or fed without one: go on), or its
		 * peer cannot take bytes yet (connecting, the second's turn
		 * ahead): its peer_send or the timer takes them then. */
		if (l->len == len)
			break;
	}
	if (l->s->crowded)
		uncrowd(l->s);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct lane *l = arg;
	if (l->cur == NULL) {
		on_kick(-1, 0, l); /* past the second's turn */
		return;
	}
	if (l->cur == LOG_ROUND) {
		l->s->N->slot[l->slot].rp_lane_round = false; /* a replayed request got no answer */
		round_end(l);
		return;
	}
	if (!l->said_wait) {
		l->said_wait = true;
		log_warn("--serial-clients: replica %u had no answer on connection %llu for %d ms: the next client's "
			 "bytes go ahead, and that connection's go without waiting until it answers (said once a "
			 "replica slot)",
			 l->s->N->S->r[l->slot].id, (unsigned long long)conn_id(l->cur), SERIAL_WAIT_MS);
	}
	conn_serial_unanswered(l->cur, l->slot);
	round_end(l);
}

struct serial *serial_new(struct net *N, unsigned nslots)
{
	struct serial *s = calloc(1, sizeof *s + nslots * sizeof s->lane[0]);
	if (s == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	s->N = N;
	s->nslots = nslots;
	for (unsigned i = 0; i < nslots; i++) {
		struct lane *l = &s->lane[i];
		l->s = s;
		l->slot = i;
		l->timer = evtimer_new(N->S->base, on_timer, l);
		l->kick = event_new(N->S->base, -1, 0, on_kick, l);
		if (l->timer == NULL || l->kick == NULL)
			fatal(EXIT_INTERNAL, "cannot create a lane's events");
	}
	return s;
}

void serial_free(struct serial *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; i < s->nslots; i++) {
		event_free(s->lane[i].timer);
		event_free(s->lane[i].kick);
		free(s->lane[i].q);
	}
	free(s);
}

/* A new entry at the lane's end. */
static struct entry *push(struct serial *s, struct lane *l)
{
	if (l->len == l->cap) {
		size_t cap = l->cap == 0 ? 64 : 2 * l->cap;
		struct entry *q = malloc(cap * sizeof *q);
		if (q == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		for (size_t i = 0; i < l->len; i++)
			q[i] = *at(l, i);
		free(l->q);
		l->q = q;
		l->cap = cap;
		l->head = 0;
	}
	struct entry *e = at(l, l->len++);
	if (l->len >= SERIAL_MAX_ENTRIES && !s->crowded) {
		s->crowded = true;
		log_event("--serial-clients: replica %u has %zu clients' reads waiting: no client is read until "
			  "every replica is down to half",
			  s->N->S->r[l->slot].id, l->len);
	}
	if (l->cur == NULL)
		event_active(l->kick, EV_TIMEOUT, 0);
	return e;
}

void serial_arrived(struct serial *s, struct conn *c, unsigned slot, size_t upto, size_t committed, bool eof)
{
	struct lane *l = &s->lane[slot];
	if (l->len > 0 && at(l, l->len - 1)->c == c) {
		struct entry *e = at(l, l->len - 1); /* the same client again: one entry */
		e->upto = upto;
		e->committed = committed;
		e->eof |= eof;
		return;
	}
	*push(s, l) = (struct entry){ .c = c, .upto = upto, .committed = committed, .at = sup_now(), .eof = eof };
}

void serial_arrived_log(struct serial *s, unsigned slot)
{
	*push(s, &s->lane[slot]) = (struct entry){ .at = sup_now(), .log = true };
}

void serial_kick(struct serial *s, unsigned slot)
{
	if (s->lane[slot].cur == NULL)
		event_active(s->lane[slot].kick, EV_TIMEOUT, 0);
}

void serial_log_answered(struct serial *s, unsigned slot)
{
	if (s->lane[slot].cur == LOG_ROUND)
		round_end(&s->lane[slot]);
}

bool serial_crowded(const struct serial *s)
{
	return s != NULL && s->crowded;
}

size_t serial_allow(struct serial *s, struct conn *c, unsigned slot, size_t allowed, size_t fed, size_t end,
		    bool answers, bool *eof_ok)
{
	struct lane *l = &s->lane[slot];
	if (l->cur != NULL && l->cur != c)
		return allowed;
	skip_gone(l);
	if (l->len == 0 || at(l, 0)->c != c)
		return allowed;
	if (l->cur == NULL && answers) {
		long wait = conn_turn_wait(c);
		if (wait > 0) {
			if (!evtimer_pending(l->timer, NULL))
				arm(l, wait);
			return allowed;
		}
	}
	size_t upto = allowed, committed = 0;
	bool eof = false;
	while (l->len > 0 && (at(l, 0)->c == c || (at(l, 0)->c == NULL && !at(l, 0)->log))) {
		const struct entry *e = at(l, 0);
		if (e->c == c) {
			upto = e->upto > upto ? e->upto : upto;
			committed = e->committed > committed ? e->committed : committed;
			eof |= e->eof;
		}
		pop(l);
	}
	bool more = upto > fed || (eof && !*eof_ok);
	if (eof)
		*eof_ok = true;
	if (l->cur == NULL) {
		if (!answers || !more)
			return upto; /* fed without a round */
		l->cur = c;
		l->mark = end > committed ? end : committed;
		if (evtimer_pending(l->timer, NULL) && evtimer_del(l->timer) != 0)
			fatal(EXIT_INTERNAL, "cannot remove a lane's timer");
		arm(l, SERIAL_WAIT_MS * 1000000L);
	} else if (committed > l->mark) {
		l->mark = committed;
	}
	return upto;
}

void serial_answered(struct serial *s, struct conn *c, unsigned slot, size_t end, bool ended)
{
	struct lane *l = &s->lane[slot];
	if (l->cur == c && (ended || end > l->mark))
		round_end(l);
}

void serial_forget(struct serial *s, struct conn *c, unsigned slot)
{
	struct lane *l = &s->lane[slot];
	for (size_t i = 0; i < l->len; i++)
		if (at(l, i)->c == c)
			at(l, i)->c = NULL;
	if (l->cur == c)
		round_end(l);
	else if (l->cur == NULL && l->len > 0)
		event_active(l->kick, EV_TIMEOUT, 0); /* its front may have been c's */
}

void serial_slot_gone(struct serial *s, unsigned slot)
{
	struct lane *l = &s->lane[slot];
	l->len = 0;
	l->head = 0;
	if (l->cur != NULL)
		round_end(l);
	else if (evtimer_pending(l->timer, NULL) && evtimer_del(l->timer) != 0)
		fatal(EXIT_INTERNAL, "cannot remove a lane's timer");
	l->said_wait = false;
	if (s->crowded)
		uncrowd(s);
}

/* How long lane l's front entry has waited (0: none waits). */
static double front_age(struct lane *l, double now)
{
	skip_gone(l);
	return l->len > 0 ? now - at(l, 0)->at : 0;
}

void serial_tick(struct serial *s, double now)
{
	if (s == NULL)
		return;
	struct net *N = s->N;
	double limit = N->S->o->straggler_ms / 1000.0;
	for (unsigned i = 0; i < s->nslots; i++) {
		if (!N->slot[i].present || front_age(&s->lane[i], now) <= limit)
			continue;
		/* A straggler's lane, while a sibling's moves (all stuck: the
		 * clients' doing, not a replica's). */
		bool moving = false;
		for (unsigned j = 0; j < s->nslots && !moving; j++)
			moving = j != i && N->slot[j].present && front_age(&s->lane[j], now) < limit / 2;
		if (!moving)
			continue;
		char why[160];
		snprintf(why, sizeof why,
			 "straggler: its clients' bytes waited more than %.1f s for their turn (--serial-clients) "
			 "while the others took theirs",
			 limit);
		net_kill(N, i, why);
	}
}
