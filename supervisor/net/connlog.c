/* connlog.c — the connection log, and its replay to a replacement.
 *
 * A server's state is what its clients sent it. When replacements may be
 * started (--respawns), every client connection is logged as it happens, in
 * one memfd (inputlog.h, capped by --conn-log): records of
 *   OPEN id listener client | DATA id bytes | EOF id | CLOSE id
 * each with the reply bytes committed over all connections until then.
 *
 * A replacement (fresh seed, a program started from scratch, the clocks and
 * random bytes of the run replayed by virt) is fed the log before it takes
 * new connections: for each logged connection diehard opens one to it,
 * sends the client's bytes, half-closes and closes where the client did, in
 * the logged order; before each record it waits until the replacement has
 * given as many reply bytes as had been committed at that point (a request
 * another connection's reply made possible is sent after that reply; no
 * longer than --timeout without progress). Its replies on these
 * connections are read and dropped: they were already voted. Once it has
 * been fed the whole log it serves new connections like any replica;
 * connections opened before that go on being fed from the log as their
 * clients send more.
 *
 * Limits (docs/NETWORK.md): a log past its cap can no longer rebuild a
 * server (replacements are refused, as with the input log); concurrent
 * connections are replayed in the order their records were logged, which
 * rebuilds a server whose state depends on the order requests were
 * answered, not on timing; a server that keeps state outside its clients'
 * bytes (files it writes, another service) is not rebuilt by this. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exitcode.h"
#include "inputlog.h"
#include "log.h"
#include "netint.h"
#include "sup.h"

enum { REC_OPEN = 1, REC_DATA, REC_EOF, REC_CLOSE };

struct rec {
	uint64_t id;
	uint32_t kind;
	uint32_t listener;
	uint64_t len;        /* bytes that follow (DATA: the client's; OPEN: its address) */
	uint64_t reply_total; /* reply bytes committed before this record */
};

/* A logged connection being replayed to one replacement. */
struct replay_conn {
	struct replay_conn *next;
	struct net *N;
	unsigned slot;
	uint64_t id;
	int fd;
	struct event *rev, *wev;
	bool connected;
	bool eof;
	bool closing; /* its client closed (CLOSE): its replies still read, to its end */
	uint64_t fed;      /* the client's bytes sent to it */
	uint64_t received; /* reply bytes read from it */
};

#define CHUNK_MAX ((size_t)64 << 10)
/* Connections closed by their clients whose replies are still read, at
 * most (each holds a descriptor). */
#define CLOSING_MAX 256u

static struct replay_conn *rc_find(struct nslot *ns, uint64_t id);

static void append(struct net *N, uint32_t kind, uint64_t id, uint32_t listener, const void *p, size_t n)
{
	if (N->log == NULL)
		return;
	struct rec r = { .id = id, .kind = kind, .listener = listener, .len = n, .reply_total = N->reply_total };
	inputlog_append(N->log, &r, sizeof r);
	if (n > 0)
		inputlog_append(N->log, p, n);
	/* --serial-clients: a replica that serves takes its replayed
	 * connections' new records in its lane's order (rp_turn). */
	for (unsigned i = 0; N->serial != NULL && (kind == REC_DATA || kind == REC_EOF) && i < N->S->nslots; i++) {
		struct nslot *ns = &N->slot[i];
		if (ns->present && ns->F != NULL && !ns->replaying && rc_find(ns, id) != NULL)
			serial_arrived_log(N->serial, i);
	}
	/* A client's bytes go to a replacement fed from the log when conn.c
	 * feeds them to the live replicas (rp_hold_for_turn), the rest now. */
	if (kind != REC_DATA)
		connlog_replay_step(N);
}

void connlog_open(struct net *N, uint64_t id, unsigned listener, const struct sockaddr_storage *client)
{
	append(N, REC_OPEN, id, listener, client, sizeof *client);
}

void connlog_data(struct net *N, uint64_t id, const void *p, size_t n)
{
	append(N, REC_DATA, id, 0, p, n);
}

void connlog_eof(struct net *N, uint64_t id)
{
	append(N, REC_EOF, id, 0, NULL, 0);
}

void connlog_close(struct net *N, uint64_t id)
{
	append(N, REC_CLOSE, id, 0, NULL, 0);
}

static void rc_free(struct replay_conn *rc)
{
	if (rc->rev != NULL)
		event_free(rc->rev);
	if (rc->wev != NULL)
		event_free(rc->wev);
	if (rc->fd >= 0)
		close(rc->fd);
	free(rc);
}

static struct replay_conn *rc_find(struct nslot *ns, uint64_t id)
{
	for (struct replay_conn *rc = ns->rp_conns; rc != NULL; rc = rc->next)
		if (rc->id == id)
			return rc;
	return NULL;
}

/* The closing connection made first (the list is newest first). */
static struct replay_conn *oldest_closing(struct nslot *ns)
{
	struct replay_conn *old = NULL;
	for (struct replay_conn *rc = ns->rp_conns; rc != NULL; rc = rc->next)
		if (rc->closing)
			old = rc;
	return old;
}

static void rc_remove(struct nslot *ns, struct replay_conn *rc)
{
	if (rc->closing)
		ns->rp_closing--;
	if (ns->rp_round == rc) {
		ns->rp_round = NULL;
		if (ns->rp_lane_round) {
			ns->rp_lane_round = false;
			serial_log_answered(rc->N->serial, rc->slot);
		}
	}
	for (struct replay_conn **pp = &ns->rp_conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == rc) {
			*pp = rc->next;
			break;
		}
	rc_free(rc);
}

/* Replies on replayed connections: counted, dropped. */
static void on_rc_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct replay_conn *rc = arg;
	struct nslot *ns = &rc->N->slot[rc->slot];
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	struct net *N = rc->N;
	if (n > 0) {
		net_slot_answers(N, rc->slot);
		rc->received += (uint64_t)n;
		ns->rp_received += (uint64_t)n;
		ns->rp_progress = sup_now();
	} else {
		rc->eof = true;
	}
	if (ns->rp_lane_round && ns->rp_round == rc && (rc->eof || rc->received > ns->rp_mark)) {
		ns->rp_lane_round = false; /* it answered: its lane goes on */
		serial_log_answered(N->serial, rc->slot);
	}
	if (n <= 0) {
		if (event_del(rc->rev) != 0)
			fatal(EXIT_INTERNAL, "cannot remove a replay event");
		if (rc->closing)
			rc_remove(ns, rc); /* every reply of it counted */
	}
	connlog_replay_step(N);
}

static void on_rc_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct replay_conn *rc = arg;
	if (event_del(rc->wev) != 0)
		fatal(EXIT_INTERNAL, "cannot remove a replay event");
	if (!rc->connected) {
		rc->connected = true;
		if (event_add(rc->rev, NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot add a replay event");
		struct nslot *ns = &rc->N->slot[rc->slot];
		if (ns->rp_blocked && rc->N->serial != NULL) {
			ns->rp_blocked = false;
			serial_kick(rc->N->serial, rc->slot); /* its record may go now */
		}
	}
	connlog_replay_step(rc->N);
}

static bool rc_open(struct net *N, unsigned i, uint64_t id, unsigned listener, const struct sockaddr_storage *client)
{
	struct nslot *ns = &N->slot[i];
	int fd = net_connect_replica(N, i, N->L[listener], client);
	if (fd < 0)
		return false;
	struct replay_conn *rc = calloc(1, sizeof *rc);
	if (rc == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	*rc = (struct replay_conn){ .N = N, .slot = i, .id = id, .fd = fd };
	rc->rev = event_new(N->S->base, fd, EV_READ | EV_PERSIST, on_rc_readable, rc);
	rc->wev = event_new(N->S->base, fd, EV_WRITE, on_rc_writable, rc);
	if (rc->rev == NULL || rc->wev == NULL || event_add(rc->wev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot create a replay connection's events");
	rc->next = ns->rp_conns;
	ns->rp_conns = rc;
	return true;
}

/* Sends what is left of a DATA record (ns->rp_sent of its bytes went
 * already); true when it all went. */
static bool rc_send(struct net *N, struct nslot *ns, struct replay_conn *rc, size_t off, size_t len, size_t *sent)
{
	char buf[CHUNK_MAX];
	while (*sent < len) {
		size_t n = len - *sent < sizeof buf ? len - *sent : sizeof buf;
		if (!inputlog_read(N->log, off + *sent, buf, n))
			return true; /* released: cannot happen while replayable */
		ssize_t w = write(rc->fd, buf, n);
		if (w > 0) {
			*sent += (size_t)w;
			rc->fed += (uint64_t)w;
			ns->rp_progress = sup_now();
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (event_add(rc->wev, NULL) != 0)
				fatal(EXIT_INTERNAL, "cannot add a replay event");
			return false;
		}
		return true; /* it closed its end: as the original replicas may have */
	}
	return true;
}

/* --serial-clients (serial.c): a record of another connection than the
 * one last sent one waits until the replica answered that one (its replies
 * there went past what they were when it was sent), or its reply ended, or
 * RP_ROUND_WAIT went by: it takes the clients' requests one at a time, in
 * the order they came, as the live replicas' lanes give them. A replica
 * still replaying is sent the next record at once otherwise (the log is
 * all there): it would take a batch of them in an order of its own. */
#define RP_ROUND_WAIT 1.0

static bool rp_turn(struct nslot *ns, struct replay_conn *rc)
{
	const struct replay_conn *r = ns->rp_round;
	if (!ns->replaying) {
		/* It serves: its lane says when (connlog_serial_feed). */
		if (!ns->rp_go)
			return false;
		ns->rp_go = false;
		ns->rp_lane_round = true;
		ns->rp_round = rc;
		ns->rp_mark = rc->received;
		return true;
	}
	if (r != NULL && r != rc && !r->eof && r->received <= ns->rp_mark && sup_now() - ns->rp_round_at < RP_ROUND_WAIT)
		return false;
	if (r != rc) {
		ns->rp_round = rc;
		ns->rp_mark = rc->received;
		ns->rp_round_at = sup_now();
	}
	return true;
}

/* Whether a client's bytes logged for slot i wait, on connection id, for
 * a second's turn, as the live replicas' do (conn.c's hold_for_turn): once
 * its clocks read now (aside while it catches up, or at the front once it
 * serves), the time it reads for a request is its siblings' only if it
 * gets the request when they do. conn.c walks the log (connlog_replay_step)
 * as it feeds them. A replacement fed each record as it was logged, ahead
 * of its siblings held at a turn, read the second before theirs (lighttpd's
 * Date, cached at the first iteration after the monotonic second turns) and
 * was outvoted on its first live reply (2 runs of 15 beside three busy
 * loops). */
static bool rp_hold_for_turn(struct net *N, unsigned i, uint64_t id)
{
	const struct nslot *ns = &N->slot[i];
	if (ns->replaying && !net_clocks_aside(N, i))
		return false; /* the past: its clocks replay the log */
	for (struct conn *c = N->conns; c != NULL; c = conn_next(c))
		if (conn_id(c) == id)
			return conn_turn_held(c);
	return false;
}

/* Feeds slot i what it can of the log; true when it stopped to wait. */
static void replay_slot(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	struct sup *S = N->S;
	for (;;) {
		size_t end = inputlog_bytes(N->log);
		if (ns->rp_off >= end) {
			if (ns->replaying) {
				if (ns->listens != 0 && !net_clocks_settled(N, i))
					return; /* a server: not before its clocks read now */
				ns->replaying = false;
				ns->ready = true;
				ns->rp_done = sup_now();
				/* No record waits for their replies any more. */
				for (struct replay_conn *rc = ns->rp_conns, *next; rc != NULL; rc = next) {
					next = rc->next;
					if (rc->closing)
						rc_remove(ns, rc);
				}
				ns->rp_join = N->next_conn + 1;
				log_event("replica %u replayed %llu connections: it serves new ones", S->r[i].id,
					  (unsigned long long)N->next_conn);
			}
			return;
		}
		struct rec r;
		if (!inputlog_read(N->log, ns->rp_off, &r, sizeof r))
			return;
		/* Live for it: nothing to replay. */
		if (!ns->replaying && r.id >= ns->rp_join) {
			ns->rp_off += sizeof r + r.len;
			continue;
		}
		/* Causality while catching up: what the clients had been
		 * answered before this record, it has answered too. */
		if (ns->replaying && ns->rp_received < r.reply_total &&
		    sup_now() - ns->rp_progress < S->o->straggler_ms / 1000.0)
			return;
		struct replay_conn *rc = rc_find(ns, r.id);
		switch (r.kind) {
		case REC_OPEN:
			if (r.listener >= N->nl || !(ns->listens & (1ull << r.listener))) {
				if (sup_now() - ns->rp_progress < S->o->straggler_ms / 1000.0)
					return; /* not listening yet */
				char why[160];
				snprintf(why, sizeof why, "replaying connections: it does not listen on %s",
					 r.listener < N->nl ? N->L[r.listener]->name : "?");
				net_kill(N, i, why);
				return;
			}
			struct sockaddr_storage client;
			memset(&client, 0, sizeof client);
			if (r.len == sizeof client && !inputlog_read(N->log, ns->rp_off + sizeof r, &client, sizeof client))
				return;
			if (!rc_open(N, i, r.id, r.listener, &client)) {
				net_kill(N, i, "replaying connections: cannot connect to it");
				return;
			}
			break;
		case REC_DATA: {
			if (rc != NULL) {
				if (!rc->connected) {
					ns->rp_blocked = true;
					return;
				}
				/* Held before a lane's round begins: the lane's
				 * entry waits (connlog_serial_feed's 0) until
				 * connlog_turn_passed. */
				if (ns->rp_sent == 0 && rp_hold_for_turn(N, i, r.id)) {
					ns->rp_blocked = true;
					return;
				}
				if (N->serial != NULL && ns->rp_sent == 0 && !rp_turn(ns, rc))
					return;
				size_t sent = ns->rp_sent;
				bool done = rc_send(N, ns, rc, ns->rp_off + sizeof r, r.len, &sent);
				ns->rp_sent = sent;
				if (!done)
					return;
				ns->rp_sent = 0;
			}
			break;
		}
		case REC_EOF:
			if (rc != NULL) {
				if (!rc->connected) {
					ns->rp_blocked = true;
					return;
				}
				if (N->serial != NULL && !rp_turn(ns, rc))
					return;
				(void)shutdown(rc->fd, SHUT_WR);
			}
			break;
		case REC_CLOSE:
			/* Not closed at once: the replies it still gives are
			 * ones the clients were given (the count each record
			 * waits for is over all connections, which may have
			 * answered in another order), so they are read to its
			 * end; its client's end is its EOF. */
			if (rc != NULL && (rc->eof || !rc->connected)) {
				rc_remove(ns, rc);
			} else if (rc != NULL && !rc->closing) {
				rc->closing = true;
				ns->rp_closing++;
				(void)shutdown(rc->fd, SHUT_WR);
				if (ns->rp_closing > CLOSING_MAX)
					rc_remove(ns, oldest_closing(ns)); /* a server that never closes */
			}
			break;
		default:
			net_kill(N, i, "replaying connections: the log is corrupt");
			return;
		}
		ns->rp_off += sizeof r + r.len;
		ns->rp_progress = sup_now();
	}
}

void connlog_replay_step(struct net *N)
{
	if (N->log == NULL)
		return;
	/* Once a replacement serves, the log is walked only while it still
	 * has replayed connections open (their clients' later records are
	 * fed to it; newer ones are skipped): it has none again before it is
	 * replayed the log anew (connlog_replay_start). */
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].present && N->slot[i].F != NULL && (N->slot[i].replaying || N->slot[i].rp_conns != NULL))
			replay_slot(N, i);
}

void connlog_turn_passed(struct net *N)
{
	for (unsigned i = 0; N->serial != NULL && i < N->S->nslots; i++)
		if (N->slot[i].present && N->slot[i].rp_blocked) {
			N->slot[i].rp_blocked = false;
			serial_kick(N->serial, i); /* its record may go now */
		}
	connlog_replay_step(N);
}

void connlog_replay_start(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	ns->replaying = true;
	ns->ready = false;
	ns->rp_off = 0;
	ns->rp_received = 0;
	ns->rp_progress = sup_now();
	log_event("replica %u: replaying %zu bytes of connection log before it serves", N->S->r[i].id,
		  inputlog_bytes(N->log));
}

void connlog_replay_stop(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	while (ns->rp_conns != NULL) {
		struct replay_conn *rc = ns->rp_conns;
		ns->rp_conns = rc->next;
		rc_free(rc);
	}
	ns->rp_closing = 0;
	ns->rp_round = NULL;
	ns->rp_go = ns->rp_lane_round = ns->rp_blocked = false;
	ns->replaying = false;
}

int connlog_serial_feed(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	if (N->log == NULL || !ns->present || ns->F == NULL || ns->replaying)
		return -1;
	ns->rp_go = true;
	ns->rp_blocked = false;
	replay_slot(N, i);
	if (!ns->rp_go)
		return 1; /* a record went: its round is the lane's */
	ns->rp_go = false;
	return ns->rp_blocked ? 0 : -1;
}

/* A replacement that cannot move for --timeout is let go on (a wait for
 * replies it will not give) or, not listening, killed: replay_slot. */
/* Slot i has replayed the whole log and votes: each connection it was
 * replayed that its client keeps open joins the live one (conn_adopt)
 * once that one is quiet, so that a client that never reconnects (HTTP
 * keep-alive, redis-benchmark, a database's pool) gets voters back as
 * replicas are replaced, rather than losing its connection with the last
 * of the replicas that took it. */
static void adopt(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	if (ns->replaying || !ns->ready || ns->rp_sent != 0 || ns->rp_off < inputlog_bytes(N->log))
		return;
	for (struct replay_conn *rc = ns->rp_conns, *next; rc != NULL; rc = next) {
		next = rc->next;
		if (rc->closing || rc->eof || !rc->connected)
			continue;
		for (struct conn *c = N->conns; c != NULL; c = conn_next(c)) {
			if (conn_id(c) != rc->id)
				continue;
			if (conn_adopt(c, i, rc->fd, rc->fed, rc->received)) {
				rc->fd = -1; /* c's now */
				rc_remove(ns, rc);
			}
			break;
		}
	}
}

void connlog_tick(struct net *N, double now)
{
	(void)now;
	connlog_replay_step(N);
	if (N->log == NULL)
		return;
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].present && N->slot[i].rp_conns != NULL)
			adopt(N, i);
}
