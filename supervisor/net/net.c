/* net.c — see net.h: the replicas' listens, diehard's own listening
 * sockets, accepting, and what the proxy knows of each slot.
 *
 * A listener is an address (family, address, port, and for IPv6 whether it
 * is v6-only) some replica listens on. diehard binds it for real once a
 * quorum of the replicas in the vote listens there (not before: a client
 * connecting earlier is refused, as by a server still starting), with
 * SO_REUSEADDR and the replicas' IPV6_V6ONLY. Bind errors are the run's:
 * one line, exit 125, as the plain daemon would fail to start. Sockets
 * systemd hands over (LISTEN_FDS, TCP, listening) are listeners from the
 * start; the replicas get private copies at the same fds (spawn.c).
 *
 * Bound, it accepts once every replica in the vote listens there too:
 * clients meanwhile wait in the backlog. A replica that missed connections
 * is not the same server as its siblings (a single-threaded one lacks
 * their state; a threaded one numbers its threads by the connections it
 * took, and take.c matches wall clocks per thread number: its threads
 * would pair with other requests' reads). One that still does not listen
 * --timeout after the bind is a straggler: killed, and its replacement
 * replays the connection log before it serves.
 *
 * A replica is reached at the address it bound, or at its loopback when it
 * bound the wildcard (127.0.0.1, ::1), from a socket its init made in its
 * namespace (factory.h).
 *
 * Connections open at once are bounded by the fd limit (each takes 1 + k
 * fds): past it, accepting pauses until one closes, so the kernel's backlog
 * holds the rest. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bufpool.h"
#include "exitcode.h"
#include "factory.h"
#include "files.h"
#include "inputlog.h"
#include "log.h"
#include "netint.h"
#include "dgram.h"
#include "outbound.h"
#include "report.h"
#include "sup.h"
#include "svcenv.h"
#include "voter.h"

static void addr_name(const struct sockaddr_storage *a, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)a;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	}
}

/* Same address, port and family (scope and flow info aside). */
static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

void net_target_of(const struct sockaddr_storage *a, struct sockaddr_storage *t, socklen_t *len)
{
	*t = *a;
	if (a->ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)t;
		if (in->sin_addr.s_addr == htonl(INADDR_ANY))
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof *in;
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)t;
		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
			in6->sin6_addr = in6addr_loopback;
		*len = sizeof *in6;
	}
}

unsigned net_quorum(const struct net *N)
{
	return sup_quorum(N->S);
}

unsigned net_client_quorum(const struct net *N)
{
	return sup_client_quorum_among(N->S, sup_voter_count(N->S));
}

static void on_accept(evutil_socket_t fd, short what, void *arg);

static void listener_pause(struct listener *l, bool pause)
{
	if (l->fd < 0 || l->ev == NULL || l->paused == pause)
		return;
	if (pause ? event_del(l->ev) != 0 : event_add(l->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot %s accepting", pause ? "pause" : "resume");
	l->paused = pause;
}

static void listener_start(struct net *N, struct listener *l)
{
	l->ev = event_new(N->S->base, l->fd, EV_READ | EV_PERSIST, on_accept, l);
	if (l->ev == NULL || event_add(l->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot listen on %s: no event", l->name);
	l->paused = false;
	if (N->stopping || l->held != 0 || N->nconns >= N->max_conns || N->quiet_held != 0)
		listener_pause(l, true);
}

/* Accepts on l once every replica in the vote listens there; once
 * --timeout has passed since it was bound, without those that do not
 * (killed as stragglers: their replacements replay what they missed). The
 * replicas' start-ups spread by tenths of a second on a loaded machine
 * (python3 -m http.server on 2 cores): the first clients wait that long,
 * once. */
static void listener_check_start(struct net *N, struct listener *l)
{
	if (l->fd < 0 || l->ev != NULL || N->stopping)
		return;
	unsigned voters = 0;
	uint64_t missing = 0;
	for (unsigned i = 0; i < N->S->nslots; i++) {
		if (!N->slot[i].present || !N->S->r[i].live)
			continue;
		voters++;
		if (!(N->slot[i].listens >> l->index & 1))
			missing |= 1ull << i;
	}
	if (voters == 0)
		return;
	double limit = N->S->o->straggler_ms / 1000.0;
	if (missing != 0 && sup_now() - l->bound_at < limit)
		return;
	/* Started before the kills: each kill comes back here (net_replica_gone). */
	listener_start(N, l);
	for (unsigned i = 0; i < N->S->nslots; i++) {
		if (!(missing >> i & 1))
			continue;
		char why[160];
		snprintf(why, sizeof why, "straggler: does not listen on %s %.1f s after its siblings did", l->name,
			 limit);
		net_kill(N, i, why);
	}
}

/* Binds l for real, as the replicas did. */
static void listener_open(struct net *N, struct listener *l)
{
	int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal(EXIT_INTERNAL, "cannot listen on %s as the replicas do: socket: %s", l->name, strerror(errno));
	int one = 1, v6only = l->v6only;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    (l->addr.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0))
		fatal(EXIT_INTERNAL, "cannot listen on %s as the replicas do: setsockopt: %s", l->name,
		      strerror(errno));
	if (bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) != 0)
		fatal(EXIT_INTERNAL, "cannot listen on %s as the replicas do: %s", l->name, strerror(errno));
	if (listen(fd, 4096) != 0)
		fatal(EXIT_INTERNAL, "cannot listen on %s as the replicas do: listen: %s", l->name, strerror(errno));
	l->fd = fd;
	l->bound_at = sup_now();
	log_event("listening on %s for the replicas", l->name);
	listener_check_start(N, l);
}

static struct listener *listener_find(struct net *N, const struct sockaddr_storage *a, bool v6only)
{
	for (unsigned i = 0; i < N->nl; i++)
		if (same_addr(&N->L[i]->addr, a) && N->L[i]->v6only == v6only)
			return N->L[i];
	return NULL;
}

static struct listener *listener_add(struct net *N, const struct sockaddr_storage *a, socklen_t len, bool v6only)
{
	if (N->nl == NET_MAX_LISTENERS) {
		char name[64];
		addr_name(a, name, sizeof name);
		log_warn("the replicas listen on more than %d addresses: %s is not served", NET_MAX_LISTENERS, name);
		return NULL;
	}
	struct listener *l = calloc(1, sizeof *l);
	if (l == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	*l = (struct listener){ .N = N, .index = N->nl, .addr = *a, .addrlen = len, .v6only = v6only, .fd = -1 };
	net_target_of(a, &l->target, &l->targetlen);
	addr_name(a, l->name, sizeof l->name);
	N->L[N->nl++] = l;
	return l;
}

/* Opens l once a quorum of the replicas in the vote listens there. */
static void listener_check(struct net *N, struct listener *l)
{
	if (l->fd >= 0) {
		listener_check_start(N, l);
		return;
	}
	if (N->stopping)
		return;
	unsigned n = 0;
	for (unsigned i = 0; i < N->S->nslots; i++)
		n += N->slot[i].present && N->S->r[i].live && (N->slot[i].listens & (1ull << l->index));
	if (n >= sup_quorum(N->S))
		listener_open(N, l);
}

void net_replica_listens(struct net *N, unsigned i, const struct sockaddr *addr, socklen_t len, bool v6only,
			 int fd)
{
	if (N == NULL || i >= N->S->nslots || !N->slot[i].present)
		return;
	if ((addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || len > sizeof(struct sockaddr_storage))
		return;
	struct sockaddr_storage a;
	memset(&a, 0, sizeof a);
	memcpy(&a, addr, len);
	if (a.ss_family == AF_INET)
		v6only = false;
	struct listener *l = listener_find(N, &a, v6only);
	if (l == NULL && (l = listener_add(N, &a, len, v6only)) == NULL)
		return;
	N->slot[i].listens |= 1ull << l->index;
	defer_listen(N, i, l, fd);
	listener_check(N, l);
	/* A replacement waiting to replay may now go on. */
	if (N->slot[i].replaying)
		connlog_replay_step(N);
}

int net_bind_at(int fd, int family, const struct sockaddr_storage *a)
{
	struct sockaddr_storage b;
	socklen_t blen = outbound_normalise((const struct sockaddr *)a, &b);
	if (family == AF_INET6 && b.ss_family == AF_INET) {
		struct sockaddr_in s4 = *(struct sockaddr_in *)&b;
		struct sockaddr_in6 *b6 = (struct sockaddr_in6 *)&b;
		memset(&b, 0, sizeof b);
		b6->sin6_family = AF_INET6;
		b6->sin6_port = s4.sin_port;
		b6->sin6_addr.s6_addr[10] = b6->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&b6->sin6_addr.s6_addr[12], &s4.sin_addr, 4);
		blen = sizeof *b6;
	}
	/* A new IPv6 address is tentative for a moment: bound freely. An
	 * IPv4 one is not, and is put on the loopback before (outbound.c):
	 * freely only if it must (a system call a connection and replica). */
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    (b.ss_family == AF_INET6 && setsockopt(fd, SOL_IPV6, IPV6_FREEBIND, &one, sizeof one) != 0))
		return errno;
	if (bind(fd, (const struct sockaddr *)&b, blen) == 0)
		return 0;
	if (errno == EADDRNOTAVAIL && b.ss_family == AF_INET) {
		if (setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof one) != 0)
			return errno;
		if (bind(fd, (const struct sockaddr *)&b, blen) == 0)
			return 0;
	}
	if (errno != EADDRINUSE)
		return errno;
	/* Its port in use in the namespace (the replica's own): the
	 * address alone. */
	if (b.ss_family == AF_INET)
		((struct sockaddr_in *)&b)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&b)->sin6_port = 0;
	return bind(fd, (const struct sockaddr *)&b, blen) == 0 ? 0 : errno;
}

/* fd, a socket in slot i's namespace, bound to the client's address and
 * port (the address put on the replica's loopback first), so that the
 * replica sees the client as the plain server would (getpeername, accept,
 * its logs and address rules); *t the address to connect to (a dual-stack
 * listener's IPv4 client reaches it through its IPv4 loopback). false: it
 * stays unbound (the replica sees its own loopback), said once a run. */
static bool bind_client(struct net *N, unsigned i, int fd, const struct listener *l,
			const struct sockaddr_storage *client, struct sockaddr_storage *t, socklen_t *tlen)
{
	struct sockaddr_storage src;
	(void)outbound_normalise((const struct sockaddr *)client, &src);
	const char *why = NULL;
	int err = 0;
	if (l->target.ss_family == AF_INET6 && src.ss_family == AF_INET) {
		/* IPv4 on a dual-stack listener: an IPv4 connection, from and
		 * to IPv4-mapped addresses. */
		struct sockaddr_in6 *t6 = (struct sockaddr_in6 *)t;
		if (!IN6_IS_ADDR_LOOPBACK(&t6->sin6_addr)) {
			why = "an IPv4 client of a replica listening on an IPv6 address alone";
		} else {
			memset(&t6->sin6_addr, 0, sizeof t6->sin6_addr);
			t6->sin6_addr.s6_addr[10] = t6->sin6_addr.s6_addr[11] = 0xff;
			t6->sin6_addr.s6_addr[12] = 127;
			t6->sin6_addr.s6_addr[15] = 1;
			*tlen = sizeof *t6;
		}
	} else if (l->target.ss_family != src.ss_family) {
		why = "a client of another family";
	}
	if (why == NULL && ((err = outbound_address(N, i, &src)) != 0 || (err = net_bind_at(fd, l->target.ss_family, &src)) != 0))
		why = strerror(err);
	if (why == NULL)
		return true;
	if (!N->said_client) {
		N->said_client = true;
		log_warn("replica %u sees a connection from its own loopback, not from its client: %s (said once)",
			 N->S->r[i].id, why);
	}
	return false;
}

int net_connect_replica(struct net *N, unsigned i, const struct listener *l, const struct sockaddr_storage *client)
{
	struct nslot *ns = &N->slot[i];
	/* An init that did not answer once (stopped by a signal from
	 * outside, or starved) is not asked again: each request would hold
	 * diehard's loop a second (factory.c). Its replica is killed at the
	 * next tick. */
	if (ns->F == NULL || ns->unanswered)
		return -1;
	int fd = factory_take(ns->F, l->target.ss_family);
	if (fd < 0) {
		/* A replica that misses connections is no longer the server
		 * its siblings are. */
		if (errno == ETIMEDOUT)
			ns->unanswered = true;
		log_event("replica %u: no socket in its namespace: %s", N->S->r[i].id, strerror(errno));
		return -1;
	}
	struct sockaddr_storage t = l->target;
	socklen_t tlen = l->targetlen;
	bool bound = false;
	if (client != NULL && client->ss_family != AF_UNSPEC && !(bound = bind_client(N, i, fd, l, client, &t, &tlen))) {
		/* A socket left half-set: a fresh one, unbound. */
		close(fd);
		t = l->target;
		tlen = l->targetlen;
		if ((fd = factory_take(ns->F, l->target.ss_family)) < 0) {
			log_event("replica %u: no socket in its namespace: %s", N->S->r[i].id, strerror(errno));
			return -1;
		}
	}
	if (connect(fd, (const struct sockaddr *)&t, tlen) == 0 || errno == EINPROGRESS)
		return fd;
	if (errno == EADDRNOTAVAIL && bound) {
		/* The client's address and port are still taken in the
		 * namespace by an earlier connection's TIME_WAIT (a replay
		 * goes through a history's connections in moments, and
		 * clients reuse their ports): the client's address, from
		 * another port. */
		close(fd);
		struct sockaddr_storage any = *client;
		if (any.ss_family == AF_INET)
			((struct sockaddr_in *)&any)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&any)->sin6_port = 0;
		t = l->target;
		tlen = l->targetlen;
		if ((fd = factory_take(ns->F, l->target.ss_family)) < 0) {
			log_event("replica %u: no socket in its namespace: %s", N->S->r[i].id, strerror(errno));
			return -1;
		}
		if (bind_client(N, i, fd, l, &any, &t, &tlen) &&
		    (connect(fd, (const struct sockaddr *)&t, tlen) == 0 || errno == EINPROGRESS))
			return fd;
	}
	log_event("replica %u: connect to %s: %s", N->S->r[i].id, l->name, strerror(errno));
	close(fd);
	return -1;
}

bool net_reaches(const struct net *N, unsigned i, const struct listener *l)
{
	const struct nslot *ns = &N->slot[i];
	return ns->present && ns->ready && !ns->clocks_behind && (ns->listens & (1ull << l->index));
}

/* The replicas a connection on l would reach now. */
static unsigned takers(const struct net *N, const struct listener *l)
{
	unsigned n = 0;
	for (unsigned i = 0; i < N->S->nslots; i++)
		n += net_reaches(N, i, l);
	return n;
}

/* Whether a replica is on its way to taking clients: a replacement
 * catching up, replaying connections, its clocks settling, or a fresh
 * server not yet joined. */
static bool someone_joining(const struct net *N)
{
	const struct sup *S = N->S;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (N->slot[i].present && !r->killed && replica_joining(S, r))
			return true;
	}
	return false;
}

/* Too few replicas take l's clients while replacements join: its new
 * connections wait in the kernel's backlog rather than be closed at once
 * (a client gets its answer late, not an error), for --timeout at most
 * (a replacement that never comes to listen); net_tick lets them in. */
static bool hold_clients(struct net *N, struct listener *l)
{
	if (l->hold_spent || takers(N, l) >= net_client_quorum(N) || !someone_joining(N))
		return false;
	double t = sup_now();
	if (l->held == 0) {
		l->held = t;
		log_event("too few replicas take clients on %s (%u, a quorum is %u): new connections wait until "
			  "replacements join",
			  l->name, takers(N, l), net_client_quorum(N));
	} else if (t - l->held > N->S->o->straggler_ms / 1000.0) {
		return false; /* conn_open says why it closes them */
	}
	listener_pause(l, true);
	return true;
}

/* A held listener let in again: enough replicas take its clients, nobody
 * joins any more, or it held them --timeout. */
static void hold_check(struct net *N, struct listener *l)
{
	bool enough = takers(N, l) >= net_client_quorum(N), joining = someone_joining(N);
	if (enough)
		l->hold_spent = false;
	if (l->held == 0)
		return;
	bool spent = sup_now() - l->held > N->S->o->straggler_ms / 1000.0;
	if (!enough && joining && !spent)
		return;
	log_event("%s: %s: new connections are let in", l->name,
		  enough     ? "replicas take clients again"
		  : !joining ? "no replica is on its way to take them"
			     : "none came to take them within --timeout");
	l->hold_spent = !enough;
	l->held = 0;
	if (!N->stopping && N->nconns < N->max_conns && N->quiet_held == 0)
		listener_pause(l, false);
}

/* A quiet moment not found by itself within this long (QUIET_CHANCE for a
 * durable server's replacement, FRESH_CHANCE for a fresh server ready to
 * join), one is made: new connections wait while the open ones finish (a
 * drain), QUIET_DRAIN at most; a drain that fails lets them in and the
 * next waits QUIET_BACKOFF, doubled up to QUIET_BACKOFF_MAX. No drain
 * while a connection open is older than QUIET_DRAIN: a persistent
 * client's, or a long transfer, it is not likely to end within one. */
#define QUIET_CHANCE 1.0
#define FRESH_CHANCE 0.25
#define QUIET_DRAIN 2.0
#define QUIET_BACKOFF 5.0
#define QUIET_BACKOFF_MAX 60.0

static bool drain_hopeful(const struct net *N, double now)
{
	for (const struct conn *c = N->conns; c != NULL; c = conn_next(c))
		if (now - conn_opened(c) > QUIET_DRAIN)
			return false;
	return true;
}

static void quiet_hold(struct net *N, bool draining)
{
	if (N->quiet_held == 0) {
		N->quiet_held = sup_now();
		for (unsigned i = 0; i < N->nl; i++)
			listener_pause(N->L[i], true);
	}
	N->quiet_draining = draining;
}

bool net_durable_begin(struct net *N)
{
	double now = sup_now();
	if (N->quiet_held != 0 && !N->quiet_draining) {
		N->quiet_started = now; /* another, in the same hold: its own --timeout */
		return true;
	}
	bool files_ready = files_committed_state(N->S);
	if (N->conns == NULL && files_ready) {
		log_event("a quiet moment%s: new connections wait while a replacement starts from the committed files "
			  "(--durable)",
			  N->quiet_draining ? " (the connections open finished)" : "");
		quiet_hold(N, false);
		N->quiet_started = now;
		N->quiet_wanted = 0;
		N->quiet_backoff = 0;
		return true;
	}
	if (N->quiet_wanted == 0)
		N->quiet_wanted = now;
	/* A drain only helps when connections are what keeps the moment
	 * away: the files' state is the replicas' to reach. */
	if (N->quiet_held == 0 && files_ready && N->conns != NULL && now - N->quiet_wanted >= QUIET_CHANCE &&
	    now >= N->quiet_next && drain_hopeful(N, now)) {
		log_event("no quiet moment for %.1f s: new connections wait while the %u open finish (%.0f s at most), "
			  "for a replacement from the committed files (--durable)",
			  now - N->quiet_wanted, N->nconns, QUIET_DRAIN);
		quiet_hold(N, true);
	}
	return false;
}

void net_fresh_drain(struct net *N, double since)
{
	double now = sup_now();
	if (N->quiet_held != 0 || N->conns == NULL || now - since < FRESH_CHANCE || now < N->quiet_next ||
	    !drain_hopeful(N, now))
		return;
	log_event("a fresh server waits %.2f s for a quiet point: new connections wait while the %u open finish "
		  "(%.0f s at most)",
		  now - since, N->nconns, QUIET_DRAIN);
	quiet_hold(N, true);
}

void net_quiet_drained(struct net *N, bool wanted)
{
	if (N->quiet_held == 0 || !N->quiet_draining)
		return;
	if (!wanted) {
		net_quiet_end(N, "no replacement waits for a quiet moment any more");
		return;
	}
	if (sup_now() - N->quiet_held <= QUIET_DRAIN)
		return;
	N->quiet_backoff = N->quiet_backoff == 0 ? QUIET_BACKOFF : N->quiet_backoff * 2;
	if (N->quiet_backoff > QUIET_BACKOFF_MAX)
		N->quiet_backoff = QUIET_BACKOFF_MAX;
	N->quiet_next = sup_now() + N->quiet_backoff;
	char why[200];
	if (N->conns != NULL)
		snprintf(why, sizeof why, "the connections open did not finish within %.0f s (the next try in %.0f s)",
			 QUIET_DRAIN, N->quiet_backoff);
	else
		snprintf(why, sizeof why,
			 "no quiet point within %.0f s though no connection is open (the voters' output or the files "
			 "they append to not at one point; the next try in %.0f s)",
			 QUIET_DRAIN, N->quiet_backoff);
	net_quiet_end(N, why);
}

void net_quiet_end(struct net *N, const char *why)
{
	if (N->quiet_held == 0)
		return;
	log_event("new connections are let in again after %.3f s: %s", sup_now() - N->quiet_held, why);
	N->quiet_held = 0;
	N->quiet_draining = false;
	for (unsigned i = 0; i < N->nl; i++) {
		struct listener *l = N->L[i];
		if (l->held == 0 && !N->stopping && N->nconns < N->max_conns)
			listener_pause(l, false);
	}
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct listener *l = arg;
	struct net *N = l->N;
	if (N->quiet_held != 0) {
		listener_pause(l, true); /* a durable server's replacement starts: they wait */
		return;
	}
	for (int n = 0; n < 64; n++) {
		if (hold_clients(N, l))
			return;
		if (N->nconns >= N->max_conns) {
			if (!N->said_full)
				log_warn("%u connections open (the fd limit allows no more): new ones wait in the backlog",
					 N->nconns);
			N->said_full = true;
			for (unsigned i = 0; i < N->nl; i++)
				listener_pause(N->L[i], true);
			return;
		}
		struct sockaddr_storage client;
		socklen_t clen = sizeof client;
		memset(&client, 0, sizeof client);
		int cfd = accept4(fd, (struct sockaddr *)&client, &clen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of fds: wait for connections to close
				 * (net_conn_closed), or a second. */
				log_warn("accept on %s: %s: pausing", l->name, strerror(errno));
				for (unsigned i = 0; i < N->nl; i++)
					listener_pause(N->L[i], true);
				struct timeval sec = { 1, 0 };
				if (evtimer_add(N->resume_ev, &sec) != 0)
					fatal(EXIT_INTERNAL, "cannot arm a timer");
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED &&
				   errno != EPROTO && errno != EPERM) {
				log_warn("accept on %s: %s", l->name, strerror(errno));
			}
			return;
		}
		conn_open(N, l, cfd, &client);
	}
}

static void resume(struct net *N)
{
	if (N->stopping || N->nconns >= N->max_conns || N->quiet_held != 0)
		return;
	N->said_full = false;
	for (unsigned i = 0; i < N->nl; i++)
		if (N->L[i]->held == 0)
			listener_pause(N->L[i], false);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	resume(arg);
}


void net_conn_closed(struct net *N)
{
	N->nconns--;
	resume(N);
	/* The quiet point a fresh server waits for comes between two
	 * connections: looked for at once, outside the connection's own
	 * handling. */
	fresh_closed(N);
}

void net_kill(struct net *N, unsigned i, const char *why)
{
	struct replica *r = &N->S->r[i];
	if (r->live || r->joining)
		replica_kill(N->S, r, why);
	else
		net_replica_gone(N, i); /* already out of the vote: out of the connections too */
}

/* Socket-activated listening sockets of TCP become listeners at once. */
static void adopt_listen_fds(struct net *N)
{
	const struct svcenv *env = svcenv_get();
	for (unsigned k = 0; env != NULL && k < env->listen_fds; k++) {
		int fd = 3 + (int)k, domain = 0, type = 0, acc = 0;
		socklen_t len = sizeof domain;
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || (domain != AF_INET && domain != AF_INET6))
			continue;
		len = sizeof type;
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
			continue;
		len = sizeof acc;
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) != 0 || !acc)
			continue;
		struct sockaddr_storage a;
		socklen_t alen = sizeof a;
		int v6only = 0;
		len = sizeof v6only;
		if (getsockname(fd, (struct sockaddr *)&a, &alen) != 0 ||
		    (domain == AF_INET6 && getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len) != 0))
			continue;
		struct listener *l = listener_add(N, &a, alen, v6only != 0);
		if (l == NULL)
			continue;
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
			fatal(EXIT_INTERNAL, "fcntl: %s", strerror(errno));
		l->fd = fd;
		l->adopted = true;
		log_event("socket-activated %s: served by the replicas' private copies", l->name);
		listener_start(N, l);
	}
}

struct net *net_new(struct sup *S)
{
	if (!S->net_private)
		return NULL;
	struct net *N = calloc(1, sizeof *N);
	if (N == NULL || (N->slot = calloc(S->nslots, sizeof *N->slot)) == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	N->S = S;
	N->bufs = bufpool_new(NET_BUF_START, NET_BUF_KEEP);
	/* Each connection: the client, one socket per replica; the rest of
	 * the run keeps a quarter of the limit. */
	rlim_t limit = S->nofile.rlim_max == RLIM_INFINITY ? 1 << 20 : S->nofile.rlim_max;
	rlim_t per = 1 + S->nslots;
	rlim_t max = limit / 4 * 3 / per;
	N->max_conns = max < 1 ? 1 : max > 1000000 ? 1000000 : (unsigned)max;
	N->resume_ev = evtimer_new(S->base, on_resume, N);
	N->fresh_ev = fresh_event(N);
	if (N->resume_ev == NULL || N->fresh_ev == NULL)
		fatal(EXIT_INTERNAL, "cannot create the proxy's events");
	if (S->o->respawns > 0 && S->o->conn_log > 0 && !sup_fresh_servers(S))
		N->log = inputlog_new(S->o->conn_log);
	N->out = outbound_new(N);
	N->dgram = dgram_new(N);
	if (S->o->serial_clients)
		N->serial = serial_new(N, S->nslots);
	adopt_listen_fds(N);
	return N;
}

void net_free(struct net *N)
{
	if (N == NULL)
		return;
	while (N->conns != NULL)
		conn_free(N->conns);
	outbound_free(N->out);
	dgram_free(N->dgram);
	serial_free(N->serial);
	for (unsigned i = 0; i < N->S->nslots; i++) {
		connlog_replay_stop(N, i);
		defer_slot_gone(N, i);
		factory_free(N->slot[i].F);
	}
	for (unsigned i = 0; i < N->nl; i++) {
		if (N->L[i]->ev != NULL)
			event_free(N->L[i]->ev);
		if (N->L[i]->fd >= 0 && !N->L[i]->adopted)
			close(N->L[i]->fd);
		free(N->L[i]);
	}
	event_free(N->resume_ev);
	event_free(N->fresh_ev);
	inputlog_free(N->log);
	bufpool_free(N->bufs); /* after every connection gave its buffers back */
	free(N->slot);
	free(N);
}

void net_replica_started(struct net *N, unsigned i, int factory_fd)
{
	if (N == NULL) {
		if (factory_fd >= 0)
			close(factory_fd);
		return;
	}
	struct nslot *ns = &N->slot[i];
	connlog_replay_stop(N, i);
	defer_slot_gone(N, i);
	factory_free(ns->F);
	*ns = (struct nslot){ .present = true };
	outbound_slot_started(N, i);
	dgram_slot_started(N, i);
	if (factory_fd >= 0 && (ns->F = factory_new(factory_fd)) == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned l = 0; l < N->nl; l++)
		if (N->L[l]->adopted)
			ns->listens |= 1ull << l;
	ns->clocks_behind = N->S->r[i].replacement;
	if (N->S->r[i].replacement && N->log != NULL) {
		connlog_replay_start(N, i);
	} else if (N->S->r[i].replacement && N->nl > 0) {
		/* No connection to replay: a fresh server (fresh_join). */
		ns->fresh = true;
		N->S->r[i].fresh = true;
	} else {
		ns->ready = true;
	}
}

/* A replacement's clocks replay the past while it catches up; then they
 * read the real time, kept out of the log the others follow (an extra read
 * there, made as its clocks jump, would shift their matching by one: at the
 * next turn they would follow its older second), and it is let in, its
 * clocks at the log's front, once it has read the time again after both
 * the wall and the monotonic second turned.
 * A server caches the time it reads (lighttpd reads the monotonic clock at
 * the top of its event loop, before it blocks, and the wall clock only when
 * that second turns: its Date), and its cache still holds a time of the
 * past: let in at once, it would answer with that and be outvoted. An
 * event loop wakes at least once a second; one that does not read the
 * clock while idle is let in CLOCK_SETTLE seconds after the turn anyway. */
#define CLOCK_SETTLE 1.5
#define CLOCK_SETTLE_FRESH 0.5

static void clock_seconds(time_t sec[2])
{
	struct timespec ts[2];
	if (clock_gettime(CLOCK_REALTIME, &ts[0]) != 0 || clock_gettime(CLOCK_MONOTONIC, &ts[1]) != 0)
		fatal(EXIT_INTERNAL, "clock_gettime: %s", strerror(errno));
	sec[0] = ts[0].tv_sec;
	sec[1] = ts[1].tv_sec;
}

bool net_clocks_aside(const struct net *N, unsigned i)
{
	return N != NULL && N->slot[i].clocks_behind && N->slot[i].clock_moved != 0;
}

bool net_past(const struct net *N, unsigned i)
{
	/* A run that logs connections and listens (diehard does): a filter's
	 * replacement, or one before any listener, has no replayed past. */
	return N != NULL && N->log != NULL && N->nl > 0 && N->slot[i].present && N->slot[i].clocks_behind &&
	       !N->slot[i].fresh;
}

/* Slot i's clocks reached now: its replayed past ends here (net_past). */
static void past_ended(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	ns->clocks_behind = false;
	if (ns->fresh)
		return;
	output_past_ended(N->S, &N->S->r[i]);
	files_past_ended(N->S, i);
}

bool net_clocks_settled(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	struct sup *S = N->S;
	if (!ns->clocks_behind)
		return true;
	double t = sup_now();
	uint64_t reads = virt_clock_reads(S->virt, i);
	time_t sec[2];
	clock_seconds(sec);
	if (ns->clock_moved == 0) {
		if (reads == 0) {
			past_ended(N, i); /* it keeps no time to correct */
			return true;
		}
		ns->clock_moved = t; /* its reads are its own from here: net_clocks_aside */
		memcpy(ns->clock_sec, sec, sizeof sec);
		return false;
	}
	if (ns->clock_turned == 0) {
		/* A fresh server (fresh_join) kept no time of the past since
		 * its start-up: one second turned will do. */
		bool turned = ns->fresh ? sec[0] != ns->clock_sec[0] || sec[1] != ns->clock_sec[1]
					: sec[0] != ns->clock_sec[0] && sec[1] != ns->clock_sec[1];
		if (!turned)
			return false;
		ns->clock_turned = t;
		ns->clock_reads = reads;
		return false;
	}
	if (reads == ns->clock_reads && t - ns->clock_turned < (ns->fresh ? CLOCK_SETTLE_FRESH : CLOCK_SETTLE))
		return false;
	past_ended(N, i);
	virt_clocks_now(S->virt, i);
	log_event("replica %u read the time of now %.3f s after its clocks left the past: it serves", S->r[i].id,
		  t - ns->clock_moved);
	virt_fast_join(S->virt, i);
	return true;
}

void net_replica_gone(struct net *N, unsigned i)
{
	if (N == NULL || !N->slot[i].present)
		return;
	struct nslot *ns = &N->slot[i];
	ns->present = false;
	ns->ready = false;
	ns->listens = 0;
	connlog_replay_stop(N, i);
	defer_slot_gone(N, i);
	for (struct conn *c = N->conns; c != NULL; c = conn_next(c))
		conn_replica_gone(c, i);
	if (N->serial != NULL)
		serial_slot_gone(N->serial, i);
	outbound_slot_gone(N, i);
	dgram_slot_gone(N, i);
	factory_free(ns->F);
	ns->F = NULL;
	/* The rest of the vote may all listen now. */
	for (unsigned l = 0; l < N->nl; l++)
		listener_check_start(N, N->L[l]);
}

void net_pause(struct net *N, double gap)
{
	if (N == NULL)
		return;
	for (struct conn *c = N->conns; c != NULL; c = conn_next(c))
		conn_pause(c, gap);
	for (unsigned l = 0; l < N->nl; l++)
		if (N->L[l]->fd >= 0)
			N->L[l]->bound_at += gap;
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].rp_progress != 0)
			N->slot[i].rp_progress += gap;
}

void net_tick(struct net *N)
{
	if (N == NULL)
		return;
	double t = sup_now();
	/* An init that stopped answering (stopped by a signal from outside:
	 * its program may still serve, but no connection reaches it). The
	 * flag stays until the slot's next process (net_replica_started). */
	for (unsigned i = 0; i < N->S->nslots; i++)
		if (N->slot[i].present && N->slot[i].unanswered)
			net_kill(N, i, "straggler: its init did not answer diehard's request for sockets in its network "
				       "within 1 s");
	for (struct conn *c = N->conns; c != NULL; c = conn_next(c))
		conn_tick(c, t);
	connlog_tick(N, t);
	serial_tick(N->serial, t);
	outbound_tick(N);
	dgram_tick(N);
	for (unsigned l = 0; l < N->nl; l++)
		listener_check_start(N, N->L[l]);
	/* A replacement that listens once its replay is over (or with no
	 * log to replay): connections reach it once its clocks read now. */
	for (unsigned i = 0; i < N->S->nslots; i++) {
		struct nslot *ns = &N->slot[i];
		if (ns->present && ns->clocks_behind && !ns->replaying && ns->listens != 0)
			(void)net_clocks_settled(N, i);
	}
	fresh_tick(N, t);
	/* A replacement that replayed the log but does not listen --timeout
	 * later takes no client ever: its slot is for one that will. */
	for (unsigned i = 0; i < N->S->nslots; i++) {
		struct nslot *ns = &N->slot[i];
		double limit = N->S->o->straggler_ms / 1000.0;
		if (ns->present && ns->rp_done != 0 && ns->listens == 0 && N->nl > 0 && t - ns->rp_done > limit) {
			char why[160];
			snprintf(why, sizeof why, "straggler: does not listen %.1f s after it replayed the connection log",
				 limit);
			ns->rp_done = 0;
			net_kill(N, i, why);
		}
	}
	for (unsigned l = 0; l < N->nl; l++)
		hold_check(N, N->L[l]);
}

void net_stop(struct net *N)
{
	if (N == NULL || N->stopping)
		return;
	N->stopping = true;
	for (unsigned i = 0; i < N->nl; i++)
		listener_pause(N->L[i], true);
	outbound_stop(N);
	/* A replacement still fed old connections stops with them open,
	 * which a server may tell in its exit status (lighttpd: 1). */
	for (unsigned i = 0; i < N->S->nslots; i++) {
		struct replica *r = &N->S->r[i];
		if (N->slot[i].replaying && r->live && !r->exited) {
			r->stop_unready = true;
			log_event("replica %u was still replaying connections when the stop began: its exit status "
				  "does not vote",
				  r->id);
		}
	}
}

bool net_fresh_start(const struct net *N)
{
	return N != NULL && N->log == NULL && N->nl > 0 && sup_fresh_servers(N->S);
}

bool net_replayable(const struct net *N, char *why, size_t size)
{
	/* A fresh server replays only the run's start, which the records
	 * keep past their cap with --stateless. */
	if (net_fresh_start(N))
		return true;
	if (N != NULL && !dgram_replayable(N)) {
		snprintf(why, size, "the record of datagram answers no longer holds every one (--conn-log %zu)",
			 N->S->o->conn_log);
		return false;
	}
	if (N != NULL && !outbound_replayable(N)) {
		snprintf(why, size, "the record of outbound connections no longer holds every byte their peers sent "
				    "(--conn-log %zu)", N->S->o->conn_log);
		return false;
	}
	if (N == NULL || N->log == NULL || inputlog_complete(N->log))
		return true;
	snprintf(why, size, "the connection log no longer holds every connection from the start (--conn-log %zu)",
		 N->S->o->conn_log);
	return false;
}

static unsigned port_of(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)a)->sin_port)
				       : ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

bool net_listens_port(const struct net *N, unsigned i, const struct sockaddr *a)
{
	if (N == NULL || i >= N->S->nslots || (a->sa_family != AF_INET && a->sa_family != AF_INET6))
		return false;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	memcpy(&ss, a, a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	for (unsigned l = 0; l < N->nl; l++)
		if ((N->slot[i].listens & (1ull << l)) && port_of(&N->L[l]->addr) == port_of(&ss))
			return true;
	return false;
}

bool net_serving(const struct net *N)
{
	return N != NULL && N->nl > 0;
}

bool net_serves(const struct net *N)
{
	if (N == NULL)
		return false;
	for (unsigned i = 0; i < N->nl; i++)
		if (N->L[i]->fd >= 0)
			return true;
	return dgram_serving(N);
}

void net_slot_answers(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	if (ns->answered)
		return;
	ns->answered = true;
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);
	if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0 && hz > 0)
		ns->answered_ticks = (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec * (uint64_t)hz / 1000000000u;
}

void net_slot_fed(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	if (ns->fed)
		return;
	ns->fed = true;
	struct timespec ts;
	if (N->first_fed_wall == 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0)
		N->first_fed_wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool net_fed(const struct net *N, unsigned i)
{
	return N != NULL && N->slot[i].fed;
}

double net_first_fed(const struct net *N)
{
	return N != NULL ? N->first_fed_wall : 0;
}

uint64_t net_answered_ticks(const struct net *N, unsigned i)
{
	return N != NULL && N->slot[i].answered ? N->slot[i].answered_ticks : 0;
}

double net_last_answer(const struct net *N)
{
	return N != NULL ? N->last_answer : 0;
}

bool net_answered(const struct net *N, unsigned i)
{
	return N != NULL && N->slot[i].answered;
}

bool net_listening(const struct net *N, unsigned i)
{
	return N != NULL && N->slot[i].listens != 0;
}

bool net_joined(const struct net *N, unsigned i)
{
	return N == NULL || N->slot[i].ready;
}

bool net_takes_clients(const struct net *N, unsigned i)
{
	if (N == NULL || !N->slot[i].present || N->nl == 0)
		return true;
	/* A fresh server waits to listen, and to join, and a replacement
	 * to listen and replay; any other replica that does not listen
	 * takes no client to begin with. */
	if (N->slot[i].listens == 0 && !N->slot[i].fresh && !N->S->r[i].replacement)
		return true;
	return N->slot[i].ready && !N->slot[i].clocks_behind && !N->slot[i].fresh;
}
