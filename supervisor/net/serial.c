/* serial.c — --serial-clients: each replica takes one client's request at
 * a time, in the order diehard received them.
 *
 * Why: a server takes requests that come on different connections at once
 * in an order of its own: which connections one `epoll_wait` returns, and
 * in which order, follows where its loop stood when each client's bytes
 * landed (docs/NETWORK.md, "Not agreed either"). Replies that depend on
 * that order (the length of a list several clients push to, a counter they
 * share) then differ between replicas, a replica is outvoted, and with two
 * left a connection can lose its majority. Here no replica ever holds two
 * connections' unanswered bytes at once, so its loop has one to take, and
 * every replica takes them in diehard's order.
 *
 * How: each replica slot has a lane, a queue of entries (connection, the
 * client's offset up to which its bytes came), one per read of a client's
 * bytes, appended to every lane at once: one order for all. A replica is
 * fed the lane's front entry when no round is in flight in its lane, and
 * that starts a round; the round ends when the replica answers on that
 * connection: its reply bytes go past the mark, the more of its own reply
 * and the committed reply when it was fed (a server that takes a request
 * before it answers it took this one; a replica still sending its last
 * reply's tail has not answered yet), or its reply ends. Entries of the
 * round's connection at the front are fed at once and stay in the round (a
 * request that came in pieces, a next request of the same client), the
 * mark raised to the committed reply then (a client that waited for its
 * reply before sending more). Then the next entry goes.
 *
 * Not covered (docs/NETWORK.md, "One client at a time"): a request that
 * gets no reply (a blocking command, a client that sends half a request)
 * holds its lane for SERIAL_WAIT_MS, then the next entry goes (said once a
 * lane); a client that pipelines (sends its next request before
 * its reply) may have the next taken before or after another client's.
 *
 * Invariants: a lane's entries are in arrival order; an entry whose
 * connection, or whose connection's peer of the lane's slot, left has a
 * NULL connection and is skipped; cur != NULL iff a round is in flight
 * (its timer armed); a lane whose replica left is empty.
 */
#include <stdlib.h>
#include <string.h>

#include "exitcode.h"
#include "log.h"
#include "netint.h"
#include "sup.h"

/* How long a round waits for its answer before the next client's go. */
#define SERIAL_WAIT_MS 1000
/* Entries a lane holds at most (16 bytes each): while one holds this many,
 * no client is read (serial_crowded), so clients that send in many small
 * reads cannot make diehard's memory grow past it; read again once every
 * lane is down to half. */
#define SERIAL_MAX_ENTRIES ((size_t)1 << 16)

struct entry {
	struct conn *c;
	size_t upto;
};

struct lane {
	struct serial *s;
	unsigned slot;
	struct entry *q; /* ring: len entries from head */
	size_t head, len, cap;
	struct conn *cur; /* the round's connection (NULL: none in flight) */
	size_t mark;      /* the round ends when the reply goes past it */
	struct event *timer, *kick;
	bool said_wait;
};

struct serial {
	struct net *N;
	unsigned nslots;
	bool crowded;        /* a lane reached SERIAL_MAX_ENTRIES: clients not read */
	struct lane lane[];
};

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
	l->len--;
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
	while (l->cur == NULL && l->len > 0) {
		struct conn *c = at(l, 0)->c;
		if (c == NULL) {
			pop(l);
			continue;
		}
		size_t len = l->len;
		if (!conn_serial_feed(c, l->slot)) {
			serial_forget(l->s, c, l->slot); /* no peer of this slot takes it */
			continue;
		}
		/* Fed (a round in flight), or entries it had already had
		 * taken (go on), or its peer cannot take bytes yet
		 * (connecting, held for a second's turn): its peer_send then
		 * takes them. */
		if (l->len == len)
			break;
	}
	if (l->s->crowded)
		uncrowd(l->s);
}

static void on_wait(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct lane *l = arg;
	if (l->cur == NULL)
		return;
	if (!l->said_wait) {
		l->said_wait = true;
		log_warn("--serial-clients: replica %u had no answer on connection %llu for %d ms: the next client's "
			 "bytes go ahead (its order may differ from a sibling's; said once a replica slot)",
			 l->s->N->S->r[l->slot].id, (unsigned long long)conn_id(l->cur), SERIAL_WAIT_MS);
	}
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
		l->timer = evtimer_new(N->S->base, on_wait, l);
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

void serial_arrived(struct serial *s, struct conn *c, unsigned slot, size_t upto)
{
	struct lane *l = &s->lane[slot];
	if (l->len > 0 && at(l, l->len - 1)->c == c) {
		at(l, l->len - 1)->upto = upto; /* the same client again: one entry */
		return;
	}
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
	*at(l, l->len++) = (struct entry){ c, upto };
	if (l->len >= SERIAL_MAX_ENTRIES && !s->crowded) {
		s->crowded = true;
		log_event("--serial-clients: replica %u has %zu clients' reads waiting: no client is read until "
			  "every replica is down to half",
			  s->N->S->r[slot].id, l->len);
	}
	if (l->cur == NULL)
		event_active(l->kick, EV_TIMEOUT, 0);
}

bool serial_crowded(const struct serial *s)
{
	return s != NULL && s->crowded;
}

size_t serial_allow(struct serial *s, struct conn *c, unsigned slot, size_t allowed, size_t fed, size_t end,
		    size_t committed)
{
	struct lane *l = &s->lane[slot];
	if (l->cur != NULL && l->cur != c)
		return allowed;
	bool took = false;
	while (l->len > 0 && (at(l, 0)->c == c || at(l, 0)->c == NULL)) {
		if (at(l, 0)->c == c) {
			if (at(l, 0)->upto > allowed)
				allowed = at(l, 0)->upto;
			took = true;
		}
		pop(l);
	}
	if (!took || (l->cur == NULL && allowed <= fed))
		return allowed; /* nothing new for it: no round */
	if (l->cur == NULL) {
		l->cur = c;
		l->mark = end > committed ? end : committed;
		struct timeval tv = { SERIAL_WAIT_MS / 1000, SERIAL_WAIT_MS % 1000 * 1000 };
		if (evtimer_add(l->timer, &tv) != 0)
			fatal(EXIT_INTERNAL, "cannot arm a lane's timer");
	} else if (committed > l->mark) {
		l->mark = committed;
	}
	return allowed;
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
}

void serial_slot_gone(struct serial *s, unsigned slot)
{
	struct lane *l = &s->lane[slot];
	l->len = 0;
	l->head = 0;
	if (l->cur != NULL)
		round_end(l);
	l->said_wait = false;
	if (s->crowded)
		uncrowd(s);
}
