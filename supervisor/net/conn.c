/* conn.c — one client connection, proxied to every replica and voted.
 *
 * A connection has a client socket and one peer per replica that serves it
 * (its socket made in the replica's namespace, connected to where the
 * replica listens). Bytes flow:
 *
 *   client ──read──► in[] ──write──► peer j (each at its own in_off)
 *   peer j ──read──► its buf[] ─► voter (views at the committed offset)
 *                                 └► client ◄──write── agreed bytes, from
 *                                    the buffer of a replica that agreed
 *
 * One read and one write per byte and replica, no other copy (a buffer is
 * compacted only when a lagging replica holds its front); a side's first
 * buffer comes from the net's pool (bufpool.c) and goes back to it. Offsets are
 * stream offsets of the connection's reply (or request) stream.
 *
 * Invariants, for every peer j still in the connection (alive):
 *   - buf holds j's reply bytes [base, end); base <= D = min(emitted,
 *     min over alive peers of pos); bytes below D are dead;
 *   - pos <= committed: j's bytes before pos were checked against the
 *     committed ones (voted, or compared after the vote as a lagger);
 *     pos == committed: j votes on what comes next;
 *   - any alive peer with pos == committed holds [emitted, committed):
 *     committed bytes are written to the client from it, never copied.
 * Bounds: in[] holds at most NET_IN_CAP bytes not yet written to every peer
 * (the client is not read past it), a peer's buf at most NET_OUT_CAP (the
 * peer is not read past it): a slow client or a slow replica stalls its
 * connection, never diehard's memory.
 *
 * The vote is voter.h's on the reply stream: whole 4 KiB chunks, a final
 * short chunk at end of stream; an agreed prefix as soon as every replica
 * still voting wrote it (request/response protocols get their reply when the
 * slowest replica has sent it, not after --idle), or when a quorum went
 * quiet for --idle, or one replica's reply ended. End of stream (the
 * replica's close or shutdown) is voted like a byte: the client's write side
 * is shut when a quorum ended at the same offset. A replica whose reply
 * differs, ends early, goes on past the agreed end, or trails the others
 * silently for --timeout is killed (net_kill), replaced by replace.c, and
 * dropped from every connection. The client's close or half-close is passed
 * to every replica (shutdown after its last byte); a client that resets or
 * stops the connection mid-reply aborts it (every replica's socket closed,
 * as the plain server would see). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bufpool.h"
#include "exitcode.h"
#include "log.h"
#include "netaddr.h"
#include "netint.h"
#include "outbound.h"
#include "sup.h"
#include "voter.h"

/* A side's buffer is held only while it holds live bytes: given back once
 * every byte in it is dead (client_update_read, peer_update_read: after
 * each read, send and vote), made again at the next read. So a connection
 * between requests (keep-alive; 1000 open at once) costs its structures,
 * not IN_START + k x OUT_START; one in a request's flight, those. */
#define IN_START NET_BUF_START
#define OUT_START NET_BUF_START

struct peer {
	unsigned slot;
	bool alive;              /* still in this connection */
	int fd;
	struct event *rev, *wev;
	bool connecting;
	bool wev_on;
	size_t in_off;           /* client bytes written to it */
	size_t allowed;          /* --serial-clients: client bytes it may have (serial.c) */
	bool eof_ok;             /* --serial-clients: the client's end may reach it */
	bool loose;              /* --serial-clients: fed without rounds until it answers */
	bool in_shut;            /* no more client bytes go to it (shut or refused) */
	unsigned char *buf;
	size_t cap, base, end;
	size_t pos;
	bool eof;
	bool paused;             /* its buf is full: not read */
	bool round_in;           /* it answered the connection's round in flight */
	double last_read;        /* when it last gave reply bytes (or connected) */
	size_t in_seen;          /* in_off at the last tick */
	double in_since;         /* since when it holds input back (0: it does not) */
	double eof_at;           /* when its reply ended (now()), for ended_early */
	struct conn *c;
};

struct conn {
	struct net *N;
	struct conn *prev, *next;
	uint64_t id;
	struct listener *l;
	int cfd;
	struct event *crev, *cwev, *kick, *idle;
	bool crev_on, cwev_on, idle_on;
	unsigned np, nstart;
	struct peer *p;
	char name[NETADDR_TEXT + 64]; /* its listener's address, or "to DEST" */
	struct orec *rec;        /* outbound: where the peer's bytes are recorded (NULL: none) */
	bool unix_;              /* outbound to a unix socket: ancillary data is looked at */
	unsigned char *in;
	size_t in_cap, in_base, in_tail;
	bool in_eof;
	size_t committed, emitted;
	bool ended, out_shut, aborted;
	bool client_gone;        /* reset, or stopped reading: replies are drained */
	double gone_at;
	bool idle_due;           /* the idle timer fired: vote a prefix */
	bool revote;             /* a replica left: vote again (from on_kick) */
	unsigned lost_inside;    /* peers that left but by a SIGKILL from outside (conn_quorum) */
	double dying_since;      /* when a peer was first seen dying, not reaped (peer_dying) */
	double eof_grace_at;     /* when a no-quorum with an ended reply was first seen (eof_grace) */
	struct event *retry;     /* votes again while a dying peer is reaped (NULL: none yet) */
	struct event *turn;      /* the client's bytes held past a second's turn (NULL: none yet) */
	/* A round (turn_lag): client bytes fed while none was in flight, until
	 * every live peer answered. round_fed: when the first peer was fed
	 * (0: no round in flight); round_first: when the first peer answered
	 * (0: none yet). */
	double round_fed, round_first;
	double opened;
};

struct conn *conn_next(const struct conn *c)
{
	return c->next;
}

double conn_opened(const struct conn *c)
{
	return c->opened;
}


static double now(void)
{
	return sup_now();
}

static void ev_set(struct event *ev, bool *on, bool want)
{
	if (want == *on)
		return;
	if (want ? event_add(ev, NULL) != 0 : event_del(ev) != 0)
		fatal(EXIT_INTERNAL, "cannot %s a connection event", want ? "add" : "remove");
	*on = want;
}

/* A read of fd's bytes; on a unix connection by recvmsg, for what the
 * bytes cannot carry: descriptors (closed) and credentials passed along
 * are not proxied, said once a run. */
static ssize_t conn_read(struct conn *c, int fd, void *buf, size_t n)
{
	if (!c->unix_)
		return read(fd, buf, n);
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(64 * sizeof(int))];
	} ctl;
	struct iovec iov = { buf, n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b };
	ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	if (r < 0 || (m.msg_controllen == 0 && !(m.msg_flags & MSG_CTRUNC)))
		return r;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h != NULL; h = CMSG_NXTHDR(&m, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int passed;
				memcpy(&passed, CMSG_DATA(h) + i * sizeof(int), sizeof passed);
				close(passed);
			}
	if (!c->N->said_ancillary) {
		c->N->said_ancillary = true;
		log_warn("descriptors or credentials passed over the connection %s are not carried through diehard (said once)",
			 c->name);
	}
	return r;
}

static void kick(struct conn *c)
{
	event_active(c->kick, EV_TIMEOUT, 0);
}

static void round_settle(struct conn *c);

/* Closes a peer's socket and frees its buffer: it is out of this
 * connection for good. */
static void peer_drop(struct peer *p)
{
	if (!p->alive)
		return;
	p->alive = false;
	if (p->rev != NULL)
		event_free(p->rev);
	if (p->wev != NULL)
		event_free(p->wev);
	p->rev = p->wev = NULL;
	if (p->fd >= 0 && close(p->fd) != 0 && errno != EINTR)
		log_warn("close: %s", strerror(errno));
	p->fd = -1;
	bufpool_put(p->c->N->bufs, p->buf, p->cap);
	p->buf = NULL;
	p->cap = 0;
	round_settle(p->c); /* it may have been the last to answer */
	if (p->c->l != NULL && p->c->N->serial != NULL)
		serial_forget(p->c->N->serial, p->c, p->slot);
}

static unsigned alive_count(const struct conn *c)
{
	unsigned n = 0;
	for (unsigned j = 0; j < c->np; j++)
		n += c->p[j].alive;
	return n;
}

/* Whether an alive peer's replica has died, not yet reaped (replica_dying),
 * for less than 5 s (an init stopped by something else is killed by
 * then: replicas_force): its reply ended with it. */
static bool peer_dying(struct conn *c)
{
	double t = now();
	bool any = false;
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && replica_dying(c->N->S, &c->N->S->r[c->p[j].slot]))
			any = true;
	if (!any) {
		c->dying_since = 0;
		return false;
	}
	if (c->dying_since == 0)
		c->dying_since = t;
	return t - c->dying_since < 5.0;
}

/* A reply that ended where the others go on may be a death the kernel
 * has not finished yet (its sockets close before its pidfd reads): such
 * a no-quorum waits 0.2 s once before it closes the connection. */
static bool eof_grace(struct conn *c)
{
	bool any = false;
	for (unsigned j = 0; j < c->np && !any; j++)
		any = c->p[j].alive && c->p[j].eof;
	if (!any)
		return false;
	double t = now();
	if (c->eof_grace_at == 0)
		c->eof_grace_at = t;
	return t - c->eof_grace_at < 0.2;
}

/* How many of a connection's alive peers must agree: sup_client_quorum_among,
 * except that a peer a SIGKILL from outside took (a person, the OOM
 * killer: sup.h's sigkilled) says nothing of those left. Down to one that
 * way, or opened with one while the run was degraded (voters that joined
 * since are its peers only once a replay adopts it: conn_adopt), the
 * connection goes on as a run down to its
 * last voter would: that one decides, degraded (unless --min-voters asks
 * for more), rather than its client losing a request. A peer lost any other way
 * (a divergence, a crash, a straggler) leaves the rule as it is: one
 * alone never decides while the run has other voters. */
static unsigned conn_quorum(const struct conn *c, unsigned alive)
{
	const struct sup *S = c->N->S;
	unsigned q = sup_client_quorum_among(S, alive);
	if (alive == 1 && q > 1 && c->lost_inside == 0 && sup_min_voters(S) <= 1)
		return 1;
	return q;
}

/* The offset below which no alive peer's bytes are needed. */
static size_t drop_point(const struct conn *c)
{
	size_t d = c->emitted;
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && c->p[j].pos < d)
			d = c->p[j].pos;
	return d;
}

/* The slowest alive peer's input offset: client bytes before it are sent. */
static size_t in_low(const struct conn *c)
{
	size_t low = c->in_tail;
	for (unsigned j = 0; j < c->np; j++) {
		const struct peer *p = &c->p[j];
		if (p->alive && !p->in_shut && p->in_off < low)
			low = p->in_off;
	}
	return low;
}

void conn_free(struct conn *c)
{
	struct net *N = c->N;
	for (unsigned j = 0; j < c->np; j++)
		peer_drop(&c->p[j]);
	free(c->p);
	event_free(c->crev);
	event_free(c->cwev);
	event_free(c->kick);
	event_free(c->idle);
	if (c->retry != NULL)
		event_free(c->retry);
	if (c->turn != NULL)
		event_free(c->turn);
	if (c->cfd >= 0 && close(c->cfd) != 0 && errno != EINTR)
		log_warn("close: %s", strerror(errno));
	bufpool_put(N->bufs, c->in, c->in_cap);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		N->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (c->l != NULL)
		connlog_close(N, c->id);
	else
		outbound_closed(N, c->rec);
	free(c);
	net_conn_closed(N);
}

/* Gives up the connection: the client and every replica see it closed. */
static void conn_abort(struct conn *c, const char *why)
{
	if (c->aborted)
		return;
	c->aborted = true;
	if (why != NULL)
		log_event("connection %llu %s: %s: closed", (unsigned long long)c->id, c->name, why);
	kick(c);
}

/* The client's (an outbound connection's peer's) bytes, and their end:
 * logged for replacements. */
static void in_data(struct conn *c, const unsigned char *p, size_t n)
{
	if (c->l != NULL)
		connlog_data(c->N, c->id, p, n);
	else
		outbound_data(c->N, c->rec, p, n, c->emitted);
}

static void in_ended(struct conn *c)
{
	if (c->l != NULL)
		connlog_eof(c->N, c->id);
	else
		outbound_eof(c->N, c->rec, c->emitted);
}

/* The client reset the connection or went away mid-reply. Closing every
 * replica's socket now would reach each at a different point of its work
 * (one logs a broken pipe, another had finished): instead their input ends
 * (shutdown after what they had) and their replies are read to the end,
 * still voted and checked, and dropped; for at most --timeout. */
static void send_all(struct conn *c);

/* --serial-clients: the client's bytes up to in_tail, or its end, came:
 * an entry in the lane of every replica that takes them (serial.c). */
static void serial_came(struct conn *c)
{
	if (c->l == NULL || c->N->serial == NULL)
		return;
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && !c->p[j].in_shut)
			serial_arrived(c->N->serial, c, c->p[j].slot, c->in_tail, c->committed, c->in_eof);
}

static void conn_client_gone(struct conn *c, const char *why)
{
	if (c->client_gone)
		return;
	c->client_gone = true;
	c->gone_at = now();
	log_event("connection %llu %s: the %s went away (%s): replies drained", (unsigned long long)c->id, c->name,
		  c->l != NULL ? "client" : "peer", why);
	if (!c->in_eof) {
		c->in_eof = true;
		in_ended(c);
		serial_came(c);
	}
	ev_set(c->crev, &c->crev_on, false);
	ev_set(c->cwev, &c->cwev_on, false);
	send_all(c);
	kick(c);
}

/* --- client → replicas -------------------------------------------------- */

static void peer_want_write(struct peer *p, bool want)
{
	if (p->alive)
		ev_set(p->wev, &p->wev_on, want);
}

/* Whether c is done but for the client's end, which has come: every
 * replica still in it ended its reply where it was agreed, and that was
 * written and shut. It is closed at the kick that follows (finished), and
 * a replica's close then carries the end of the client's input as its
 * shutdown would have (its reply was read to its end: nothing unread
 * turns the close into a reset). */
static bool closing_now(const struct conn *c)
{
	if (c->aborted || !c->out_shut)
		return false;
	for (unsigned j = 0; j < c->np; j++) {
		const struct peer *p = &c->p[j];
		if (p->alive && !(p->eof && p->pos == c->committed))
			return false;
	}
	return true;
}

static void round_start(struct conn *c);

/* Writes what p has not had of the client's bytes; shuts its write side
 * after the last one once the client's input ended (left to the close
 * when the connection closes now: a system call a replica). */
static void peer_send(struct conn *c, struct peer *p)
{
	if (!p->alive || p->connecting || p->in_shut)
		return;
	struct serial *sr = c->l != NULL ? c->N->serial : NULL;
	size_t limit = c->in_tail;
	if (sr != NULL)
		limit = p->allowed = serial_allow(sr, c, p->slot, p->allowed, p->in_off, p->end,
						  !p->eof && !p->paused && !p->loose, &p->eof_ok);
	while (p->in_off < limit) {
		ssize_t w = write(p->fd, c->in + (p->in_off - c->in_base), limit - p->in_off);
		if (w > 0) {
			p->in_off += (size_t)w;
			if (c->round_fed == 0 && c->l != NULL)
				round_start(c);
			if (c->l != NULL)
				net_slot_fed(c->N, p->slot);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			peer_want_write(p, true);
			return;
		}
		/* The replica closed its end (EPIPE, ECONNRESET): it takes no
		 * more input, like a plain server's client would see. Its
		 * reply is still voted. */
		p->in_shut = true;
		peer_want_write(p, false);
		if (sr != NULL)
			serial_forget(sr, c, p->slot);
		return;
	}
	peer_want_write(p, false);
	if (c->in_eof && p->in_off == c->in_tail && (sr == NULL || p->eof_ok)) {
		if (!closing_now(c) && shutdown(p->fd, SHUT_WR) != 0 && errno != ENOTCONN)
			log_event("connection %llu: shutdown: %s", (unsigned long long)c->id, strerror(errno));
		p->in_shut = true;
	}
}

static void client_update_read(struct conn *c);

/* A request that reaches the replicas in the last moments of a wall-clock
 * second is answered with that second by some and the next by others: a
 * replica reads the time for it a moment after its sibling, and a second
 * printed in the reply (HTTP Date) or its log line differs. So a client's
 * bytes that come within the guard of a turn (of the wall or the monotonic
 * second: turn_clocks) are held until just past it (TURN_PAST and a coarse
 * tick), when every replica reads the new second. The guard is
 * twice the widest spread between the replicas' answers to a round of
 * the client's bytes seen lately (a window of TURN_LAG_WINDOW seconds and
 * the one before it), plus TURN_GUARD / 4, within [TURN_GUARD,
 * TURN_GUARD_MAX]; the most until a first spread is known (a server's
 * first requests, answered while its replicas still start up, the widest
 * apart). A client's request waits that long at most: about one in 20 on
 * a quiet machine (two turns a second, each held for the guard and the
 * time past it). What a loaded machine does past the guard (a replica
 * held off its CPU longer than twice the spread just seen) still splits a
 * second: a divergence, the minority replaced. */
#define TURN_GUARD_NS 20000000L
#define TURN_GUARD_MAX_NS 250000000L
#define TURN_PAST_NS 1000000L
#define TURN_LAG_WINDOW 5.0
/* The turns held for: the wall clock's (the time a reply prints) and the
 * monotonic clock's, whose second turns at another moment of the wall
 * second (its origin is the boot): an event loop that refreshes its cached
 * time when the monotonic second turns (lighttpd: CLOCK_MONOTONIC_COARSE at
 * the top of every iteration, time(2) only when that second turned) stamps
 * the requests after one iteration with the second read there. A replica
 * whose iteration after a request ended a moment past the monotonic turn
 * and a sibling whose ended a moment before answered the next request with
 * different seconds, and a guard at the wall turn alone did not see it.
 * Past a turn by the coarse clocks' tick too (time(2) is the coarse wall
 * clock, which turns at the first tick after the second does). */
static const clockid_t turn_clocks[] = { CLOCK_REALTIME, CLOCK_MONOTONIC };

/* A round's answers came `spread` seconds apart (the first peer's first
 * bytes and another's). Only a light request's (its first answer within
 * TURN_LIGHT of its bytes): a heavy one's spread grows with its work, while
 * its time was read as it came in; one client's heavy requests must not
 * hold every client's. */
#define TURN_LIGHT 0.25

static void turn_lag(struct net *N, double t, double spread)
{
	if (!N->lag_known || t - N->lag_since >= TURN_LAG_WINDOW) {
		N->lag[1] = N->lag_known && t - N->lag_since < 2 * TURN_LAG_WINDOW ? N->lag[0] : 0;
		N->lag[0] = 0;
		N->lag_since = t;
		N->lag_known = true;
	}
	if (spread > N->lag[0])
		N->lag[0] = spread;
}

static long turn_guard(const struct net *N)
{
	if (!N->lag_known)
		return TURN_GUARD_MAX_NS;
	double lag = N->lag[0] > N->lag[1] ? N->lag[0] : N->lag[1];
	double g = 2 * lag * 1e9 + TURN_GUARD_NS / 4;
	return g < TURN_GUARD_NS ? TURN_GUARD_NS : g > TURN_GUARD_MAX_NS ? TURN_GUARD_MAX_NS : (long)g;
}

/* The coarse clocks' tick (clock_getres), asked once: 4 ms at HZ 250. */
static long coarse_tick(void)
{
	static long tick = -1;
	if (tick < 0) {
		struct timespec r;
		tick = clock_getres(CLOCK_REALTIME_COARSE, &r) == 0 && r.tv_sec == 0 ? r.tv_nsec : 10000000L;
	}
	return tick;
}

/* How long a client's bytes that come now wait (ns): to just past the turn
 * of a second of turn_clocks that is within the guard or was less than the
 * time past it ago (the coarse clocks may not have turned yet: time(2) read
 * 4 ms after a turn said the second before in one replica, the new one in
 * its sibling a moment later), past the next one too if that is within the
 * guard of the first's end; 0 if none is. */
long net_turn_wait(const struct net *N)
{
	long guard = turn_guard(N), past = TURN_PAST_NS + coarse_tick(), wait = 0;
	for (unsigned round = 0; round < 2; round++) {
		long more = 0;
		for (size_t i = 0; i < sizeof turn_clocks / sizeof turn_clocks[0]; i++) {
			struct timespec ts;
			if (clock_gettime(turn_clocks[i], &ts) != 0)
				continue;
			long to_turn = 1000000000L - ts.tv_nsec - wait;
			if (to_turn < 0)
				to_turn += 1000000000L;
			long since = 1000000000L - to_turn;
			if (to_turn <= guard && to_turn + past > more)
				more = to_turn + past;
			else if (since < past && past - since > more)
				more = past - since;
		}
		if (more == 0)
			break;
		wait += more;
	}
	return wait;
}

/* A round begins: the client's bytes go to a first peer while no round is
 * in flight (a connection's first request, the next one once every peer
 * answered the last: a kept-alive connection is measured as it goes). */
static void round_start(struct conn *c)
{
	c->round_fed = now();
	c->round_first = 0;
	for (unsigned j = 0; j < c->np; j++)
		c->p[j].round_in = false;
}

/* Peer p's first reply bytes of the round in flight, at t: the spread
 * from the first peer's (turn_lag); the round ends once every live peer
 * answered. */
static void round_answer(struct conn *c, struct peer *p, double t)
{
	p->round_in = true;
	if (c->round_first == 0)
		c->round_first = t;
	else if (c->round_first - c->round_fed < TURN_LIGHT)
		turn_lag(c->N, t, t - c->round_first);
	round_settle(c);
}

/* The round in flight ends once every live peer answered it (one that
 * left no longer counts). */
static void round_settle(struct conn *c)
{
	if (c->round_fed == 0)
		return;
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && !c->p[j].round_in)
			return;
	c->round_fed = 0;
}

static void on_turn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	for (unsigned j = 0; j < c->np; j++)
		peer_send(c, &c->p[j]);
	connlog_turn_passed(c->N); /* a replacement fed from the log gets them now too */
	client_update_read(c);
}

/* Whether c's new bytes wait for the turn (its timer armed). */
static bool hold_for_turn(struct conn *c)
{
	if (conn_turn_held(c))
		return true;
	if (c->l == NULL)
		return false; /* outbound: the replicas' bytes, not a client's request */
	/* New bytes for every live replica, two at least: one alone cannot
	 * split a second, and holding some while others already have the
	 * bytes (a full socket took part of them before) would split it. */
	unsigned fresh = 0, live = 0;
	for (unsigned j = 0; j < c->np; j++) {
		const struct peer *p = &c->p[j];
		live += p->alive && !p->in_shut;
		fresh += p->alive && !p->in_shut && p->in_off < c->in_tail;
	}
	long wait;
	if (fresh == 0 || fresh != live || live < 2 || (wait = net_turn_wait(c->N)) == 0)
		return false;
	if (c->turn == NULL && (c->turn = evtimer_new(c->N->S->base, on_turn, c)) == NULL)
		fatal(EXIT_INTERNAL, "cannot create a connection timer");
	struct timeval tv = { wait / 1000000000L, wait % 1000000000L / 1000 };
	/* From now, not from the loop turn's cached time, which may be
	 * milliseconds old: the bytes would go before the turn. */
	if (event_base_update_cache_time(c->N->S->base) != 0 || evtimer_add(c->turn, &tv) != 0)
		fatal(EXIT_INTERNAL, "cannot arm a connection timer");
	return true;
}

static void send_all(struct conn *c)
{
	if (!hold_for_turn(c)) {
		for (unsigned j = 0; j < c->np; j++)
			peer_send(c, &c->p[j]);
		if (c->l != NULL && c->N->log != NULL)
			connlog_replay_step(c->N); /* with them: connlog.c's rp_hold_for_turn */
	}
	client_update_read(c);
}

/* Room for the client's bytes: the front every peer has had is dropped
 * (moved only when something is still held; the buffer given back when
 * nothing is), the buffer grows to its cap. */
static size_t in_room(struct conn *c)
{
	size_t low = in_low(c);
	if (low == c->in_tail) {
		c->in_base = c->in_tail;
		if (c->in != NULL) {
			bufpool_put(c->N->bufs, c->in, c->in_cap); /* every peer had it all */
			c->in = NULL;
			c->in_cap = 0;
		}
		return IN_START; /* made at the read */
	} else if (c->in_cap - (c->in_tail - c->in_base) < c->in_cap / 4 && low > c->in_base) {
		memmove(c->in, c->in + (low - c->in_base), c->in_tail - low);
		c->in_base = low;
	}
	size_t held = c->in_tail - c->in_base;
	if (held == c->in_cap && c->in_cap < NET_IN_CAP) {
		size_t cap = c->in_cap == 0 ? IN_START : c->in_cap * 2;
		unsigned char *in = c->in_cap == 0 ? bufpool_get(c->N->bufs) : realloc(c->in, cap);
		if (in == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		c->in = in;
		c->in_cap = cap;
	}
	return c->in_cap - held;
}

static void client_update_read(struct conn *c)
{
	bool want = !c->in_eof && !c->aborted && in_room(c) > 0 && !(c->l != NULL && serial_crowded(c->N->serial));
	ev_set(c->crev, &c->crev_on, want);
}

static void on_client_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct conn *c = arg;
	size_t room = in_room(c);
	if (room == 0 || (c->l != NULL && serial_crowded(c->N->serial))) {
		client_update_read(c);
		return;
	}
	if (c->in == NULL) {
		c->in = bufpool_get(c->N->bufs);
		c->in_cap = IN_START;
	}
	ssize_t n = conn_read(c, fd, c->in + (c->in_tail - c->in_base), room);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n < 0) {
		conn_client_gone(c, strerror(errno));
		return;
	}
	if (n == 0) {
		c->in_eof = true;
		in_ended(c);
	} else {
		in_data(c, c->in + (c->in_tail - c->in_base), (size_t)n);
		c->in_tail += (size_t)n;
	}
	serial_came(c);
	send_all(c);
	kick(c); /* a close may finish the connection */
}

/* --- replicas → client ---------------------------------------------------- */

/* Room in p's buffer: dead bytes dropped first (all dead: the buffer
 * given back), then grown to the cap. */
static size_t out_room(struct conn *c, struct peer *p)
{
	size_t d = drop_point(c);
	if (d >= p->end) {
		p->base = p->end = d;
		if (p->buf != NULL) {
			bufpool_put(c->N->bufs, p->buf, p->cap); /* every byte in it is dead */
			p->buf = NULL;
			p->cap = 0;
		}
		return OUT_START; /* made at the read */
	}
	if (d > p->base) {
		if (p->cap - (p->end - p->base) < p->cap / 4) {
			memmove(p->buf, p->buf + (d - p->base), p->end - d);
			p->base = d;
		}
	}
	size_t held = p->end - p->base;
	if (held == p->cap && p->cap < NET_OUT_CAP) {
		size_t cap = p->cap == 0 ? OUT_START : p->cap * 2;
		unsigned char *b = p->cap == 0 ? bufpool_get(c->N->bufs) : realloc(p->buf, cap);
		if (b == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		p->buf = b;
		p->cap = cap;
	}
	return p->cap - held;
}

static void peer_update_read(struct conn *c, struct peer *p)
{
	if (!p->alive || p->connecting || p->eof)
		return;
	bool want = out_room(c, p) > 0;
	if (want == !p->paused)
		return;
	p->paused = !want;
	if (want ? event_add(p->rev, NULL) != 0 : event_del(p->rev) != 0)
		fatal(EXIT_INTERNAL, "cannot %s a connection event", want ? "add" : "remove");
}

static void conn_vote(struct conn *c);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_vote(arg);
}

/* Votes c again in a moment. */
static void retry_soon(struct conn *c)
{
	struct timeval soon = { 0, 20000 };
	if (c->retry == NULL && (c->retry = evtimer_new(c->N->S->base, on_retry, c)) == NULL)
		fatal(EXIT_INTERNAL, "cannot create a connection timer");
	if (evtimer_add(c->retry, &soon) != 0)
		fatal(EXIT_INTERNAL, "cannot arm a connection timer");
}

static void on_peer_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct peer *p = arg;
	struct conn *c = p->c;
	size_t room = out_room(c, p);
	if (room == 0) {
		peer_update_read(c, p);
		return;
	}
	if (p->buf == NULL) {
		p->buf = bufpool_get(c->N->bufs);
		p->cap = OUT_START;
	}
	ssize_t n = conn_read(c, fd, p->buf + (p->end - p->base), room);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n > 0) {
		double t = now();
		if (p->end == 0 && c->l != NULL)
			net_slot_answers(c->N, p->slot);
		if (c->round_fed != 0 && !p->round_in)
			round_answer(c, p, t);
		p->end += (size_t)n;
		p->last_read = t;
		p->loose = false; /* it answers */
		if (c->l != NULL && c->N->serial != NULL)
			serial_answered(c->N->serial, c, p->slot, p->end, false);
		if (c->in_tail == 0 && !c->in_eof && c->l != NULL)
			defer_server_first(c->N, c->l); /* a reply before any request */
	} else {
		/* A close, or a reset: the reply ends here (voted). Its
		 * replica may have died a moment ago, since replica_dying
		 * last looked in this loop turn: asked again. */
		p->eof = true;
		p->eof_at = now();
		if (c->l != NULL && c->N->serial != NULL)
			serial_answered(c->N->serial, c, p->slot, p->end, true);
		replica_dying_forget(&c->N->S->r[p->slot]);
		if (event_del(p->rev) != 0)
			fatal(EXIT_INTERNAL, "cannot remove a connection event");
	}
	conn_vote(c);
}

static void on_peer_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct peer *p = arg;
	struct conn *c = p->c;
	if (p->connecting) {
		int err = 0;
		socklen_t len = sizeof err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		p->connecting = false;
		p->last_read = now();
		if (err != 0) {
			/* It does not take the connection (it stopped
			 * listening): a reply of nothing, voted as such. */
			log_event("connection %llu: replica %u refused it: %s", (unsigned long long)c->id,
				  c->N->S->r[p->slot].id, strerror(err));
			p->eof = true;
			p->in_shut = true;
			peer_want_write(p, false);
			if (c->l != NULL && c->N->serial != NULL)
				serial_forget(c->N->serial, c, p->slot);
			conn_vote(c);
			return;
		}
		if (event_add(p->rev, NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot add a connection event");
	}
	peer_send(c, p);
	client_update_read(c);
}

/* A loopback connect is established by the time connect returns (the
 * listener's answer is taken in as the socket is released), though a
 * non-blocking one says EINPROGRESS: p connected at once when its peer's
 * address is there, without waiting for writability (two epoll_ctl and a
 * loop turn a replica). Else, or when it was refused, on_peer_writable
 * finds out. */
static void peer_connected_now(struct peer *p)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof a;
	if (getpeername(p->fd, (struct sockaddr *)&a, &len) != 0)
		return;
	p->connecting = false;
	if (event_add(p->rev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot add a connection event");
}

static void client_want_write(struct conn *c, bool want)
{
	ev_set(c->cwev, &c->cwev_on, want);
}

/* A peer that holds the committed bytes from offset `from` on (its pos is
 * the committed offset, its buffer starts at or before from), or NULL: a
 * replica that joined since (conn_adopt: its buffer starts at the
 * committed offset) holds none before it. */
static struct peer *holder_from(struct conn *c, size_t from)
{
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && c->p[j].pos == c->committed && c->p[j].base <= from)
			return &c->p[j];
	return NULL;
}

/* Writes committed bytes to the client; shuts its write side after the
 * agreed end. */
static void emit(struct conn *c)
{
	if (c->aborted)
		return;
	if (c->client_gone)
		c->emitted = c->committed;
	while (c->emitted < c->committed) {
		struct peer *h = holder_from(c, c->emitted);
		if (h == NULL) {
			conn_abort(c, "every replica that agreed on the reply left before it was sent");
			return;
		}
		ssize_t w = write(c->cfd, h->buf + (c->emitted - h->base), c->committed - c->emitted);
		if (w > 0) {
			c->emitted += (size_t)w;
			if (c->l == NULL)
				outbound_sent(c->N, c->rec, (size_t)w);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			client_want_write(c, true);
			return;
		}
		/* The client went away mid-reply. */
		conn_client_gone(c, w < 0 ? strerror(errno) : "short write");
		c->emitted = c->committed;
		break;
	}
	if (!c->client_gone)
		client_want_write(c, false);
	if (c->client_gone && c->ended) {
		c->out_shut = true;
	} else if (c->ended && !c->out_shut) {
		if (shutdown(c->cfd, SHUT_WR) != 0 && errno != ENOTCONN) {
			conn_abort(c, strerror(errno));
			return;
		}
		c->out_shut = true;
		kick(c);
	}
	/* Emitted bytes free room: replicas stopped for it read again. */
	for (unsigned j = 0; j < c->np; j++)
		peer_update_read(c, &c->p[j]);
}

static void on_client_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	emit(arg);
}

/* --- the vote ------------------------------------------------------------- */

static void describe(struct conn *c, char *buf, size_t size, const char *what, size_t off)
{
	snprintf(buf, size, "its %s on connection %llu (%s) %s at byte %zu", c->l != NULL ? "reply" : "request",
		 (unsigned long long)c->id, c->name, what, off);
}

/* A replica SIGKILLed from outside closes its sockets a moment before its
 * death can be seen (replica_dying): a reply that ended short is called
 * so only EOF_GRACE after its end while its replica still looks alive
 * (asked again then: c->retry), so that such a death is taken for what it
 * is (conn_replica_gone, a SIGKILL from outside) rather than a divergence
 * that would also keep the connection from going on with one replica
 * (conn_quorum). */
#define EOF_GRACE 0.2

static void retry_soon(struct conn *c);

static bool ended_early(struct conn *c, const struct peer *p)
{
	if (replica_dying(c->N->S, &c->N->S->r[p->slot]))
		return false; /* the reap takes it out */
	if (p->eof_at != 0 && now() - p->eof_at < EOF_GRACE) {
		retry_soon(c);
		return false;
	}
	return true;
}

/* Laggers (pos < committed): their new bytes against the committed ones;
 * after the agreed end, the others must end there too. Returns the mask of
 * peers proved wrong (offsets in off[]). A lagger whose every holder is
 * gone (SIGKILLed from outside: the connection goes on with those left,
 * conn_quorum) is taken at its word when it is the one left, as the one
 * left decides; with others left it waits for a holder, or --timeout. */
static uint64_t check_laggers(struct conn *c, size_t *off, const char **what)
{
	uint64_t bad = 0;
	for (unsigned j = 0; j < c->np; j++) {
		struct peer *p = &c->p[j];
		if (!p->alive)
			continue;
		struct peer *ref = p->pos < c->committed ? holder_from(c, p->pos) : NULL;
		if (p->pos < c->committed && ref == NULL && alive_count(c) == 1 && conn_quorum(c, 1) == 1) {
			size_t upto = p->end < c->committed ? p->end : c->committed;
			if (upto > p->pos)
				log_event("connection %llu %s: replica %u, the one left, is taken at its word for reply "
					  "bytes %zu to %zu (those who agreed on them are gone)",
					  (unsigned long long)c->id, c->name, c->N->S->r[p->slot].id, p->pos, upto);
			p->pos = upto;
		} else if (p->pos < c->committed && ref != NULL) {
			size_t upto = p->end < c->committed ? p->end : c->committed;
			size_t n = upto - p->pos, i = n;
			if (n > 0) {
				const unsigned char *a = p->buf + (p->pos - p->base), *b = ref->buf + (p->pos - ref->base);
				if (memcmp(a, b, n) != 0)
					for (i = 0; a[i] == b[i]; i++)
						;
			}
			if (i < n) {
				bad |= 1ull << j;
				off[j] = p->pos + i;
				what[j] = "differs";
				continue;
			}
			p->pos = upto;
			/* Cut short by its death (not reaped yet): its end
			 * says nothing; the reap takes it out. */
			if (p->eof && p->end < c->committed && ended_early(c, p)) {
				bad |= 1ull << j;
				off[j] = p->end;
				what[j] = "ends early";
				continue;
			}
		}
		if (c->ended && p->pos == c->committed && p->end > c->committed) {
			bad |= 1ull << j;
			off[j] = c->committed;
			what[j] = "goes on past the agreed end";
		}
	}
	return bad;
}

static void arm_idle(struct conn *c)
{
	if (c->idle_on)
		return;
	unsigned ms = c->N->S->o->idle_ms;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	if (evtimer_add(c->idle, &tv) != 0)
		fatal(EXIT_INTERNAL, "cannot arm a connection timer");
	c->idle_on = true;
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	c->idle_on = false;
	c->idle_due = true;
	conn_vote(c);
}

/* One decision at the committed offset; true when it committed or ended
 * something (another may follow). Diverged peers are added to *bad. */
static bool vote_once(struct conn *c, uint64_t *bad, size_t *off, const char **what)
{
	struct voter_view views[VOTER_MAX];
	unsigned n = c->np, alive = 0;
	uint64_t voters = 0;
	bool any_eof = false;
	for (unsigned j = 0; j < n; j++) {
		struct peer *p = &c->p[j];
		bool votes = p->alive && p->pos == c->committed && !p->connecting;
		alive += p->alive;
		/* A lagger (or one still connecting) may yet complete a
		 * quorum: it is shown as a reply with nothing so far. */
		views[j] = (struct voter_view){ .live = p->alive };
		if (!votes)
			continue;
		voters |= 1ull << j;
		views[j].len = p->end - c->committed;
		views[j].data = views[j].len > 0 ? p->buf + (c->committed - p->base) : NULL;
		/* The end of a reply whose replica has died, not reaped yet,
		 * is its death's, not its answer: not voted (its bytes are). */
		views[j].eof = p->eof && !replica_dying(c->N->S, &c->N->S->r[p->slot]);
		any_eof |= views[j].eof;
	}
	unsigned quorum = conn_quorum(c, alive);
	struct voter_result res;
	voter_decide(views, n, quorum, CHUNK, VOTER_CHUNKS, &res);
	if (res.commit == 0 && !res.ended && !res.no_quorum) {
		struct voter_result pre;
		voter_decide(views, n, quorum, CHUNK, VOTER_PREFIX, &pre);
		/* Unanimous (every alive peer votes and wrote it): nothing can
		 * contradict it, commit now. Else after --idle, or when one
		 * reply ended where others go on. */
		bool unanimous = pre.diverged == 0 && (pre.commit > 0 || pre.ended) && pre.agree == voters &&
				 __builtin_popcountll(voters) == alive;
		if (unanimous || c->idle_due || any_eof)
			res = pre;
		else if (pre.commit > 0 || pre.ended)
			arm_idle(c);
	}
	c->idle_due = false;
	if (!res.no_quorum)
		c->dying_since = 0;
	if (res.no_quorum && (peer_dying(c) || eof_grace(c))) {
		/* A peer's reply ended because its replica was killed: its
		 * end, once reaped, takes it out of this connection (and a
		 * SIGKILL from outside leaves the others to decide:
		 * conn_quorum). Asked again in a moment. */
		retry_soon(c);
		return false;
	}
	if (res.no_quorum) {
		char why[160];
		snprintf(why, sizeof why, "no majority of the %u replicas left agrees on the reply at byte %zu", alive,
			 c->committed + res.diff_offset);
		conn_abort(c, why);
		return false;
	}
	for (unsigned j = 0; j < n; j++)
		if (res.diverged & (1ull << j)) {
			/* Ended where the others go on: its death's, maybe. */
			if (views[j].eof && views[j].len <= res.diff_offset && !ended_early(c, &c->p[j]))
				continue;
			*bad |= 1ull << j;
			off[j] = c->committed + res.diff_offset;
			what[j] = "differs";
		}
	if (res.commit == 0 && !res.ended)
		return false;
	c->committed += res.commit;
	c->N->reply_total += res.commit;
	if (c->l != NULL && res.commit > 0)
		c->N->last_answer = sup_now();
	sup_committed_by(c->N->S, (unsigned)__builtin_popcountll(res.agree), res.commit);
	for (unsigned j = 0; j < n; j++)
		if (res.agree & (1ull << j))
			c->p[j].pos = c->committed;
	if (res.ended)
		c->ended = true;
	if (c->idle_on) {
		if (event_del(c->idle) != 0)
			fatal(EXIT_INTERNAL, "cannot remove a connection timer");
		c->idle_on = false;
	}
	return !res.ended;
}

static void conn_vote(struct conn *c)
{
	if (c->aborted) {
		kick(c);
		return;
	}
	uint64_t bad = 0;
	size_t off[VOTER_MAX] = { 0 };
	const char *what[VOTER_MAX] = { 0 };
	for (int rounds = 0; rounds < 1024; rounds++) {
		bad |= check_laggers(c, off, what);
		if (c->ended || c->aborted || !vote_once(c, &bad, off, what))
			break;
	}
	bad |= check_laggers(c, off, what);
	/* Kill after the vote: each kill drops the replica from every
	 * connection, this one included (conn_replica_gone). */
	for (unsigned j = 0; j < c->np; j++) {
		if (!(bad & (1ull << j)) || !c->p[j].alive)
			continue;
		if (c->N->stopping && strcmp(what[j], "ends early") == 0) {
			/* diehard forwarded SIGTERM or SIGINT: a replica's
			 * reply cut short by it is the signal, not its memory. */
			log_event("connection %llu: a replica's reply ends at byte %zu as it stops",
				  (unsigned long long)c->id, off[j]);
			peer_drop(&c->p[j]);
			continue;
		}
		char why[192];
		size_t at = 0;
		struct sup *S = c->N->S;
		const struct replica *r = &S->r[c->p[j].slot];
		/* Its reply cut short by its own end: the end is the
		 * cause, the reply its sign. */
		if (r->exited && !r->sigkilled && strcmp(what[j], "ends early") == 0)
			at = (size_t)snprintf(why, sizeof why, "ended by itself (status %d): ",
					      replica_status(r->wstatus));
		describe(c, why + at, sizeof why - at, what[j], off[j]);
		report_conn_divergence(S->report, c->l != NULL ? "connection" : "outbound", (unsigned long long)c->id,
				       c->l != NULL ? c->l->name : outbound_name(c->rec), off[j], S->r[c->p[j].slot].id,
				       what[j], sup_now() - S->t_start);
		if (c->l == NULL)
			outbound_diverged(c->N, c->rec);
		log_event("divergence on connection %llu %s: replica %u %s at byte %zu", (unsigned long long)c->id,
			  c->name, S->r[c->p[j].slot].id, what[j], off[j]);
		net_kill(c->N, c->p[j].slot, why);
		peer_drop(&c->p[j]);
		c->lost_inside++;
	}
	emit(c);
	for (unsigned j = 0; j < c->np; j++)
		peer_update_read(c, &c->p[j]);
	kick(c);
}

/* Closes the connection once nothing more can move: the agreed reply was
 * written and shut, every replica still in it ended its reply there (one
 * closed early would see a reset the others did not), and the client's
 * side ended too (or no replica takes input any more). A client gone for
 * --timeout: closed wherever the replicas are. */
static bool finished(const struct conn *c)
{
	if (c->aborted)
		return true;
	if (c->client_gone && now() - c->gone_at > c->N->S->o->straggler_ms / 1000.0)
		return true;
	if (!c->out_shut)
		return false;
	for (unsigned j = 0; j < c->np; j++) {
		const struct peer *p = &c->p[j];
		if (p->alive && !(p->eof && p->pos == c->committed))
			return false;
	}
	if (c->in_eof)
		return true;
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].alive && !c->p[j].in_shut)
			return false;
	return true;
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	if (c->revote && !c->aborted) {
		c->revote = false;
		conn_vote(c); /* kicks again */
		return;
	}
	if (!c->aborted && !c->ended && alive_count(c) < conn_quorum(c, alive_count(c)))
		conn_abort(c, "too few of its replicas are left for a majority");
	if (finished(c))
		conn_free(c);
}

void conn_replica_gone(struct conn *c, unsigned slot)
{
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].slot == slot && c->p[j].alive) {
			const struct replica *r = &c->N->S->r[slot];
			if (c->p[j].eof && r->exited && WIFEXITED(r->wstatus)) {
				/* It answered and exited: its end, held back
				 * while it was dying (vote_once), now votes. */
				c->revote = true;
				kick(c);
				continue;
			}
			peer_drop(&c->p[j]);
			if (!r->sigkilled)
				c->lost_inside++;
			/* The others may now decide (a quorum of fewer), and
			 * a lagger may have held the front. */
			c->idle_due = true;
			c->revote = true;
			kick(c);
		}
}

/* Stragglers: a replica that trails the committed reply (or has not ended
 * where the others did) and gives nothing for --timeout; one that does not
 * read the client's bytes the others have all read. */
void conn_tick(struct conn *c, double t)
{
	const struct sup *S = c->N->S;
	double limit = S->o->straggler_ms / 1000.0;
	unsigned alive = alive_count(c), done_reading = 0;
	for (unsigned j = 0; j < c->np; j++)
		done_reading += c->p[j].alive && (c->p[j].in_shut || c->p[j].in_off == c->in_tail);
	for (unsigned j = 0; j < c->np; j++) {
		struct peer *p = &c->p[j];
		if (!p->alive)
			continue;
		char why[384];
		bool behind = p->connecting || p->pos < c->committed || (c->ended && !p->eof);
		if (behind && t - p->last_read > limit) {
			snprintf(why, sizeof why,
				 "straggler: its %s on connection %llu %s trails the others, silent for more than %.1f s",
				 p->fd < 0 ? "connect" : c->l != NULL ? "reply" : "request", (unsigned long long)c->id,
				 c->name, limit);
			net_kill(c->N, p->slot, why);
			continue;
		}
		if (p->in_off != p->in_seen || p->in_shut || p->in_off == c->in_tail)
			p->in_since = 0;
		p->in_seen = p->in_off;
		bool holds = !p->in_shut && p->in_off < c->in_tail && done_reading >= conn_quorum(c, alive);
		if (holds && p->in_since == 0)
			p->in_since = t;
		if (holds && t - p->in_since > limit) {
			snprintf(why, sizeof why,
				 "straggler: stopped reading connection %llu %s for more than %.1f s while the others did",
				 (unsigned long long)c->id, c->name, limit);
			net_kill(c->N, p->slot, why);
		}
	}
}

void conn_pause(struct conn *c, double gap)
{
	if (c->client_gone)
		c->gone_at += gap;
	for (unsigned j = 0; j < c->np; j++) {
		c->p[j].last_read += gap;
		if (c->p[j].in_since != 0)
			c->p[j].in_since += gap;
	}
}

/* --- opening -------------------------------------------------------------- */

static void set_nodelay(int fd)
{
	int one = 1;
	/* Replies are written as they are agreed: Nagle would hold a short
	 * one back waiting for an ACK. Best effort. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connection with no replica in it yet: cfd the client's socket (the
 * peer's, outbound), numbered and listed. */
static struct conn *conn_new(struct net *N, struct listener *l, int cfd)
{
	struct sup *S = N->S;
	struct conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	c->N = N;
	c->l = l;
	c->cfd = cfd;
	c->id = l != NULL ? ++N->next_conn : ++N->next_out;
	c->opened = now();
	c->p = calloc(S->nslots, sizeof *c->p);
	if (c->p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	set_nodelay(cfd);
	c->crev = event_new(S->base, cfd, EV_READ | EV_PERSIST, on_client_readable, c);
	c->cwev = event_new(S->base, cfd, EV_WRITE | EV_PERSIST, on_client_writable, c);
	c->kick = event_new(S->base, -1, 0, on_kick, c);
	c->idle = evtimer_new(S->base, on_idle, c);
	if (c->crev == NULL || c->cwev == NULL || c->kick == NULL || c->idle == NULL)
		fatal(EXIT_INTERNAL, "cannot create a connection's events");
	c->next = N->conns;
	if (N->conns != NULL)
		N->conns->prev = c;
	N->conns = c;
	N->nconns++;
	return c;
}

/* p's events, on its socket fd. */
static void peer_events(struct conn *c, struct peer *p, int fd)
{
	struct event_base *base = c->N->S->base;
	p->fd = fd;
	set_nodelay(fd);
	p->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_peer_readable, p);
	p->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_peer_writable, p);
	if (p->rev == NULL || p->wev == NULL)
		fatal(EXIT_INTERNAL, "cannot create a connection's events");
}

void conn_open(struct net *N, struct listener *l, int cfd, const struct sockaddr_storage *client)
{
	struct sup *S = N->S;
	struct conn *c = conn_new(N, l, cfd);
	snprintf(c->name, sizeof c->name, "on %s", l->name);
	connlog_open(N, c->id, l->index, client);
	unsigned dying = 0;
	for (unsigned i = 0; i < S->nslots; i++) {
		if (!net_reaches(N, i, l))
			continue;
		int fd = net_connect_replica(N, i, l, client);
		if (fd < 0) {
			dying += replica_dying(S, &S->r[i]);
			continue;
		}
		struct peer *p = &c->p[c->np++];
		/* Its clock starts now: making its socket may have taken a
		 * while (an init slow to answer, factory.c). */
		*p = (struct peer){ .slot = i, .alive = true, .connecting = true, .c = c, .last_read = now() };
		peer_events(c, p, fd);
		/* Nothing to send yet: the client's first bytes come later. */
		peer_connected_now(p);
		if (p->connecting)
			peer_want_write(p, true); /* connected when writable */
	}
	c->nstart = c->np;
	unsigned q = net_client_quorum(N);
	if (c->np < q && dying > 0) {
		/* A replica killed a moment ago, not reaped yet, could make no
		 * socket: the others take the client as they will once its
		 * end is seen. */
		unsigned v = sup_voter_count(S);
		v = v > dying ? v - dying : 0;
		q = sup_quorum_with(S, v, v);
	}
	if (c->np < q) {
		char why[128];
		snprintf(why, sizeof why, "only %u replicas can take it, a majority needs %u", c->np, q);
		conn_abort(c, why);
		return;
	}
	log_event("connection %llu on %s: %u replicas", (unsigned long long)c->id, l->name, c->np);
	client_update_read(c);
}

struct conn *conn_open_out(struct net *N, int cfd, const char *dest, uint64_t voters, struct orec *rec)
{
	struct sup *S = N->S;
	struct conn *c = conn_new(N, NULL, cfd);
	snprintf(c->name, sizeof c->name, "to %s", dest);
	c->rec = rec;
	c->unix_ = strncmp(dest, "unix:", 5) == 0;
	/* Each voter joins when its own connect reaches the listener made
	 * for it in its namespace (conn_join); until then it is a peer still
	 * connecting: the peer's bytes are kept for it, and the straggler
	 * tick gives it --timeout. */
	for (unsigned i = 0; i < S->nslots; i++)
		if (voters & (1ull << i))
			c->p[c->np++] = (struct peer){ .slot = i, .alive = true, .fd = -1, .connecting = true, .c = c,
						       .last_read = now() };
	c->nstart = c->np;
	log_event("outbound connection %llu to %s: %u replicas", (unsigned long long)c->id, dest, c->np);
	client_update_read(c);
	return c;
}

uint64_t conn_id(const struct conn *c)
{
	return c->id;
}

void conn_read_again(struct conn *c)
{
	client_update_read(c);
}

void conn_serial_unanswered(struct conn *c, unsigned slot)
{
	for (unsigned j = 0; j < c->np; j++)
		if (c->p[j].slot == slot && c->p[j].alive)
			c->p[j].loose = true;
}

bool conn_turn_held(const struct conn *c)
{
	return c->turn != NULL && evtimer_pending(c->turn, NULL);
}

long conn_turn_wait(const struct conn *c)
{
	if (c->l == NULL || alive_count(c) < 2)
		return 0;
	return net_turn_wait(c->N);
}

bool conn_serial_feed(struct conn *c, unsigned slot)
{
	bool held = conn_turn_held(c); /* on_turn feeds it */
	for (unsigned j = 0; j < c->np; j++) {
		struct peer *p = &c->p[j];
		if (p->slot != slot || !p->alive)
			continue;
		if (p->in_shut)
			return false;
		if (!held) {
			peer_send(c, p);
			client_update_read(c);
		}
		return true;
	}
	return false;
}

bool conn_adopt(struct conn *c, unsigned slot, int fd, uint64_t fed, uint64_t received)
{
	const struct replica *r = &c->N->S->r[slot];
	if (c->l == NULL || c->ended || c->aborted || c->client_gone || c->out_shut || !r->live || r->joining ||
	    fed != c->in_tail || received != c->committed || c->emitted != c->committed)
		return false;
	struct peer *free_p = NULL;
	for (unsigned j = 0; j < c->np; j++) {
		struct peer *p = &c->p[j];
		if (!p->alive) {
			if (free_p == NULL)
				free_p = p;
			continue;
		}
		if (p->slot == slot || p->connecting || p->eof || p->end != c->committed || p->pos != c->committed ||
		    p->in_off != c->in_tail)
			return false; /* not quiet: a lagger not yet checked holds no bytes past pos for a joiner */
	}
	if (free_p == NULL) {
		if (c->np == c->N->S->nslots)
			return false;
		free_p = &c->p[c->np++];
	}
	struct peer *p = free_p;
	/* Not in the round in flight: its answer to a later request is no
	 * spread of this one's. */
	*p = (struct peer){ .slot = slot, .alive = true, .fd = -1, .c = c, .last_read = now(), .in_off = c->in_tail,
			    .allowed = c->in_tail, .eof_ok = c->in_eof, .in_shut = c->in_eof, .base = c->committed, .end = c->committed, .pos = c->committed,
			    .round_in = c->round_fed != 0 };
	peer_events(c, p, fd);
	if (event_add(p->rev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot add a connection event");
	log_event("connection %llu %s: replica %u joins it (its replay fed it the client's %llu bytes and read the "
		  "%zu reply bytes committed): it votes",
		  (unsigned long long)c->id, c->name, r->id, (unsigned long long)fed, c->committed);
	return true;
}

bool conn_join(struct conn *c, unsigned slot, int fd)
{
	for (unsigned j = 0; j < c->np; j++) {
		struct peer *p = &c->p[j];
		if (p->slot != slot || !p->alive || p->fd >= 0)
			continue;
		peer_events(c, p, fd);
		p->connecting = false;
		p->last_read = now();
		if (event_add(p->rev, NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot add a connection event");
		peer_send(c, p);
		conn_vote(c);
		client_update_read(c);
		return true;
	}
	return false;
}
