/* outbound.c — see outbound.h: held connects, the one real connection, the
 * replicas' sockets connected to it through their namespaces, the record
 * and its replay to replacements.
 *
 * A destination (odest) is an address and port, an IPv4-mapped IPv6
 * address taken as its IPv4 one. Its n-th connection (orec) goes through:
 *   WAIT        connects of voters held until a quorum of them made it;
 *   CONNECTING  diehard's own non-blocking connect, from its network;
 *   OPEN        made: conn.c votes it; each replica's held connect goes on
 *               to a listener in its namespace at the destination's
 *               address (added to its loopback), and is accepted there;
 *   CLOSED      the connection ended; its record stays for replacements;
 *   FAILED      the real connect's errno, every call's answer.
 * A replica's socket is matched to its held call by address: the accepted
 * connection's peer is the replica socket's own name (diehard keeps a
 * reference to the socket, taken when the call arrived).
 *
 * The namespace's side is made by diehard on sockets its init made there
 * (factory.h): a socket acts in the namespace it was made in, and diehard
 * holds CAP_NET_ADMIN over the replica's user namespace (it made it, or is
 * root), so the address goes on with SIOCSIFADDR (IPv4: an alias "lo:N",
 * /32; IPv6: /128) and the listener binds there. A listener lives while
 * connects wait to be accepted on it, no longer: a port of the program's
 * own stays free.
 *
 * The start (--stateless): a fresh server replays the run's start-up, its
 * connects numbered from 0, then joins at the voters' front. So when the
 * record passes its cap, each destination's records so far stay for good
 * as its start (rec[0 .. nhead), connections 0 .. nhead - 1; those still
 * open then are cut: their later bytes are not kept, and they are not fed
 * to anyone), and only the later ones go once everyone passed them (base
 * numbers rec[nhead]); replacements are still possible.
 *
 * Invariants: a slot's call in a record is held (answered later), or
 * joined (its socket matched), or neither; every held call is answered
 * exactly once, or its process is gone; a voter of an OPEN connection
 * that never joins is a peer still connecting there, killed as a
 * straggler after --timeout (conn.c). */
#include "outbound.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/ipv6.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "factory.h"
#include "log.h"
#include "netaddr.h"
#include "netint.h"
#include "report.h"
#include "sandbox.h"
#include "sup.h"
#include "virt.h"

/* Bounds against a replica that runs off alone (a bug, or hostile): the
 * run's destinations; addresses on one replica's loopback; destinations
 * only one replica reached so far, and connections one replica was the
 * first to reach that still wait for a quorum (each held connect blocks
 * its thread: a program in step with its siblings leads a handful; one
 * whose callers die while held could lead without end), past either of
 * which it is killed; connects one replica may have held at once (past it
 * they fail with ENOBUFS). */
#define DEST_MAX 65536
#define ALIAS_MAX 16384
#define ALONE_MAX 4096
#define LEAD_MAX 4096
#define HELD_MAX 4096
/* The host's own addresses given to every replica's loopback, at most. */
#define HOST_ADDRS SANDBOX_HOST_ADDRS

enum rstate { R_WAIT, R_CONNECTING, R_OPEN, R_CLOSED, R_FAILED };

struct ocall {
	bool held;               /* answered later */
	bool replay;             /* its process votes on none of it: fed the record */
	bool joined;             /* its socket was matched */
	uint64_t gen, id;
	int sock;                /* our reference to its socket (-1: none) */
};

struct mark {
	size_t at;               /* the record's offset where these bytes start */
	size_t sent;             /* agreed bytes sent to the peer before them */
};

struct oreplay;

struct orec {
	struct outbound *O;
	struct odest *d;
	uint64_t n;
	enum rstate state;
	int err;
	int leader;              /* the slot that reached it first, while it waits (-1: none) */
	uint64_t voters;         /* fixed at the open */
	struct ocall *call;      /* per slot */
	int fd;                  /* the real connect in flight */
	struct event *ev;
	struct conn *c;
	unsigned char *data;     /* the peer's bytes (kept for replacements) */
	size_t len, cap;
	struct mark *marks;
	size_t nmarks, capmarks;
	bool eof;
	size_t eof_sent;         /* agreed bytes sent to the peer before its end */
	struct oreplay *replays;
	bool cut;                /* in the start, open when the record passed its cap */
};

struct olisten {
	struct outbound *O;
	struct odest *d;
	unsigned slot;
	int fd;
	struct event *ev;
	struct event *retry;     /* accepting paused (out of fds): resumes */
	unsigned pending;        /* calls let through to it, not yet accepted */
};

struct odest {
	struct sockaddr_storage addr; /* normalised: IPv4-mapped as IPv4 */
	socklen_t len;
	char name[NETADDR_TEXT + 40];
	bool loopback;           /* already local in every namespace */
	bool unix_path;          /* a unix socket's path: given through an abstract listener */
	uint64_t *count;         /* per slot: connects its process made here */
	uint64_t reached;        /* slots whose process connected here */
	struct orec **rec;       /* connections 0 .. nhead - 1, then base + i - nhead */
	size_t nrec, caprec;
	size_t nhead;            /* the start's records, kept for good (above) */
	uint64_t base;           /* connections before it freed (passed by all), past the start */
	struct olisten **lis;    /* per slot */
	json_t *rep;             /* its entry in the report's "outbound" */
	uint64_t connections, failed, diverged, sent, received;
};

/* A replacement fed a record. */
struct oreplay {
	struct orec *r;
	unsigned slot;
	int fd;
	struct event *rev, *wev;
	bool wev_on, shut, their_eof;
	size_t off;              /* record bytes written to it */
	size_t rx;               /* its bytes read (and dropped) */
	size_t mark;             /* the first of the record's marks past rx */
	struct oreplay *next;    /* in r->replays */
};

struct oslot {
	struct sockaddr_storage *addrs; /* added to its loopback */
	unsigned naddrs;
	int ctl[2];              /* a socket of each family in its namespace, for ioctls */
	unsigned held;           /* its calls held now */
	unsigned alone;          /* destinations only it reached */
	unsigned leading;        /* connections it reached first, still waiting */
};

struct outbound {
	struct net *N;
	struct odest **dest;
	size_t ndest, capdest;
	struct oslot *slot;
	bool keep;               /* records kept (replacements may come) */
	size_t kept, cap;        /* record bytes, and their bound (--conn-log) */
	bool incomplete;         /* a record was dropped: replacements cannot be fed */
	bool start;              /* past the cap, the start is kept (--stateless) */
	bool dest_full_said;
	json_t *rep;
	struct sockaddr_storage host[HOST_ADDRS]; /* the host's own addresses */
	unsigned nhost;
};

static struct sup *sup_of(const struct outbound *O)
{
	return O->N->S;
}

static void *must_alloc(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

static void grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	size_t c = *cap == 0 ? 8 : *cap;
	while (c < need)
		c *= 2;
	*p = must_alloc(realloc(*p, c * size));
	*cap = c;
}

static void close_fd(int *fd)
{
	if (*fd >= 0 && close(*fd) != 0 && errno != EINTR)
		log_warn("close: %s", strerror(errno));
	*fd = -1;
}

/* ---- addresses ---- */

/* a with an IPv4-mapped IPv6 address as IPv4 (what the kernel connects
 * to), in out; its length. */
static socklen_t normalise(const struct sockaddr *a, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof *out);
	if (a->sa_family == AF_UNIX) {
		const struct sockaddr_un *u = (const void *)a;
		struct sockaddr_un *o = (void *)out;
		o->sun_family = AF_UNIX;
		memcpy(o->sun_path, u->sun_path, sizeof o->sun_path - 1);
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(o->sun_path) + 1);
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)a;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			struct sockaddr_in *s4 = (void *)out;
			s4->sin_family = AF_INET;
			s4->sin_port = s6->sin6_port;
			memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
			return sizeof *s4;
		}
		struct sockaddr_in6 *o6 = (void *)out;
		o6->sin6_family = AF_INET6;
		o6->sin6_port = s6->sin6_port;
		o6->sin6_addr = s6->sin6_addr;
		o6->sin6_scope_id = s6->sin6_scope_id;
		return sizeof *o6;
	}
	const struct sockaddr_in *s4 = (const void *)a;
	struct sockaddr_in *o4 = (void *)out;
	o4->sin_family = AF_INET;
	o4->sin_port = s4->sin_port;
	o4->sin_addr = s4->sin_addr;
	return sizeof *o4;
}

/* Same address and port (normalised, scope aside). */
static bool same(const struct sockaddr_storage *a, const struct sockaddr_storage *b, bool port)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_UNIX)
		return strcmp(((const struct sockaddr_un *)a)->sun_path, ((const struct sockaddr_un *)b)->sun_path) == 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return (!port || x->sin_port == y->sin_port) && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return (!port || x->sin6_port == y->sin6_port) && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

static bool is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_UNIX)
		return true; /* no address to add */
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* A socket of family in slot's namespace for its interface ioctls. */
static int ctl_socket(struct outbound *O, unsigned slot, int family)
{
	struct oslot *os = &O->slot[slot];
	int *fd = &os->ctl[family == AF_INET ? 0 : 1];
	struct nslot *ns = &O->N->slot[slot];
	if (*fd < 0 && ns->F != NULL && !ns->unanswered) {
		*fd = factory_take(ns->F, family);
		if (*fd < 0 && errno == ETIMEDOUT)
			ns->unanswered = true;
	}
	return *fd;
}

/* a's address (normalised) on slot's loopback (once): 0 or an errno. */
static int address_add(struct outbound *O, unsigned slot, const struct sockaddr_storage *a)
{
	struct oslot *os = &O->slot[slot];
	if (is_loopback(a))
		return 0;
	for (unsigned i = 0; i < os->naddrs; i++)
		if (same(&os->addrs[i], a, false))
			return 0;
	if (os->naddrs == ALIAS_MAX)
		return ENOSPC;
	int fd = ctl_socket(O, slot, a->ss_family);
	if (fd < 0)
		return errno != 0 ? errno : EPIPE;
	if (a->ss_family == AF_INET) {
		struct ifreq ifr;
		memset(&ifr, 0, sizeof ifr);
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo:%u", os->naddrs + 1);
		struct sockaddr_in *s = (struct sockaddr_in *)&ifr.ifr_addr;
		s->sin_family = AF_INET;
		s->sin_addr = ((const struct sockaddr_in *)a)->sin_addr;
		if (ioctl(fd, SIOCSIFADDR, &ifr) != 0)
			return errno;
		/* SIOCSIFADDR gives the class's prefix (a /8 for 93.x): the
		 * address alone is local. */
		s->sin_addr.s_addr = htonl(0xffffffffu);
		if (ioctl(fd, SIOCSIFNETMASK, &ifr) != 0)
			return errno;
	} else {
		struct ifreq ifr;
		memset(&ifr, 0, sizeof ifr);
		memcpy(ifr.ifr_name, "lo", sizeof "lo");
		if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0)
			return errno;
		struct in6_ifreq r6 = { .ifr6_prefixlen = 128, .ifr6_ifindex = ifr.ifr_ifindex };
		r6.ifr6_addr = ((const struct sockaddr_in6 *)a)->sin6_addr;
		if (ioctl(fd, SIOCSIFADDR, &r6) != 0 && errno != EEXIST)
			return errno;
	}
	os->addrs = must_alloc(realloc(os->addrs, (os->naddrs + 1) * sizeof *os->addrs));
	os->addrs[os->naddrs++] = *a;
	return 0;
}

int outbound_address(struct net *N, unsigned slot, const struct sockaddr_storage *a)
{
	return address_add(N->out, slot, a);
}

/* The host's addresses a program sees as its own: not a loopback, not
 * IPv6 link-local; IPv4 first. */
static void host_addresses(struct outbound *O)
{
	struct ifaddrs *all;
	if (getifaddrs(&all) != 0)
		return;
	for (int fam = 0; fam < 2; fam++)
		for (struct ifaddrs *i = all; i != NULL && O->nhost < HOST_ADDRS; i = i->ifa_next) {
			if (i->ifa_addr == NULL || i->ifa_addr->sa_family != (fam == 0 ? AF_INET : AF_INET6))
				continue;
			struct sockaddr_storage a;
			(void)normalise(i->ifa_addr, &a);
			if (is_loopback(&a) ||
			    (a.ss_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&a)->sin6_addr)))
				continue;
			if (a.ss_family == AF_INET6)
				((struct sockaddr_in6 *)&a)->sin6_scope_id = 0;
			O->host[O->nhost++] = a;
		}
	freeifaddrs(all);
}

bool net_own_socket(const char *path)
{
	/* The sockfs inodes bound at path, in diehard's network namespace
	 * (its /proc/net/unix), then whether one of them is a descriptor of
	 * diehard's. */
	FILE *f = fopen("/proc/self/net/unix", "re");
	if (f == NULL)
		return true; /* unknown: refused */
	unsigned long inodes[16];
	unsigned n = 0;
	char line[512];
	while (n < 16 && fgets(line, sizeof line, f) != NULL) {
		unsigned long ino;
		char p[256];
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &ino, p) == 2 && strcmp(p, path) == 0)
			inodes[n++] = ino;
	}
	fclose(f);
	if (n == 0)
		return false;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return true;
	bool own = false;
	struct dirent *e;
	while (!own && (e = readdir(d)) != NULL) {
		char target[64];
		ssize_t m = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
		unsigned long ino;
		if (m <= 0)
			continue;
		target[m] = '\0';
		if (sscanf(target, "socket:[%lu]", &ino) == 1)
			for (unsigned i = 0; i < n && !own; i++)
				own = inodes[i] == ino;
	}
	closedir(d);
	return own;
}

bool outbound_is_host(const struct net *N, const struct sockaddr *a)
{
	if (N == NULL || N->out == NULL)
		return false;
	struct sockaddr_storage n;
	(void)normalise(a, &n);
	for (unsigned i = 0; i < N->out->nhost; i++)
		if (same(&N->out->host[i], &n, false))
			return true;
	return false;
}

socklen_t outbound_normalise(const struct sockaddr *a, struct sockaddr_storage *out)
{
	return normalise(a, out);
}

/* ---- listeners in a namespace ---- */

static void on_listen_accept(evutil_socket_t fd, short what, void *arg);
static void on_listen_retry(evutil_socket_t fd, short what, void *arg);

static void listen_close(struct olisten *l)
{
	if (l == NULL)
		return;
	l->d->lis[l->slot] = NULL;
	if (l->ev != NULL)
		event_free(l->ev);
	if (l->retry != NULL)
		event_free(l->retry);
	close_fd(&l->fd);
	free(l);
}

/* Binds fd to d's address. A new IPv6 address is tentative for a moment
 * (its duplicate detection, skipped on a loopback, still completes from a
 * work queue), and neither bound nor routed until then: the bind is tried
 * again for up to a second. 0 or -1 with errno. */
static int bind_settled(int fd, const struct odest *d)
{
	for (int tries = 0;; tries++) {
		if (bind(fd, (const struct sockaddr *)&d->addr, d->len) == 0)
			return 0;
		if (errno != EADDRNOTAVAIL || d->addr.ss_family != AF_INET6 || tries == 2000)
			return -1;
		struct timespec ts = { 0, 500000 };
		(void)nanosleep(&ts, NULL);
	}
}

/* slot's listener at d, made when missing: NULL with errno. */
static struct olisten *listen_get(struct outbound *O, unsigned slot, struct odest *d)
{
	if (d->lis[slot] != NULL)
		return d->lis[slot];
	int err = address_add(O, slot, &d->addr);
	if (err != 0) {
		errno = err;
		return NULL;
	}
	struct nslot *ns = &O->N->slot[slot];
	if (ns->F == NULL || ns->unanswered) {
		errno = EPIPE;
		return NULL;
	}
	int fd = factory_take(ns->F, d->addr.ss_family);
	if (fd < 0) {
		if (errno == ETIMEDOUT)
			ns->unanswered = true;
		return NULL;
	}
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    (d->addr.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
	    bind_settled(fd, d) != 0 || listen(fd, 4096) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	struct olisten *l = must_alloc(calloc(1, sizeof *l));
	*l = (struct olisten){ .O = O, .d = d, .slot = slot, .fd = fd };
	l->ev = event_new(sup_of(O)->base, fd, EV_READ | EV_PERSIST, on_listen_accept, l);
	l->retry = evtimer_new(sup_of(O)->base, on_listen_retry, l);
	if (l->ev == NULL || l->retry == NULL || event_add(l->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's outbound listener");
	d->lis[slot] = l;
	return l;
}

/* ---- the record's replay ---- */

static void replay_free(struct oreplay *rp)
{
	struct oreplay **pp = &rp->r->replays;
	while (*pp != rp)
		pp = &(*pp)->next;
	*pp = rp->next;
	event_free(rp->rev);
	event_free(rp->wev);
	close_fd(&rp->fd);
	free(rp);
}

/* The record's bytes rp may have now: those the peer sent before the
 * voters had sent more than rp has. */
static size_t replay_allowed(struct oreplay *rp)
{
	const struct orec *r = rp->r;
	while (rp->mark < r->nmarks && r->marks[rp->mark].sent <= rp->rx)
		rp->mark++;
	return rp->mark < r->nmarks ? r->marks[rp->mark].at : r->len;
}

static void replay_pump(struct oreplay *rp)
{
	struct orec *r = rp->r;
	size_t upto = replay_allowed(rp);
	while (rp->off < upto) {
		ssize_t w = write(rp->fd, r->data + rp->off, upto - rp->off);
		if (w > 0) {
			rp->off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!rp->wev_on && event_add(rp->wev, NULL) != 0)
				fatal(EXIT_INTERNAL, "cannot add a replay event");
			rp->wev_on = true;
			return;
		}
		/* It closed its end: nothing more goes to it. */
		rp->off = r->len;
		rp->shut = true;
		break;
	}
	if (rp->wev_on && event_del(rp->wev) != 0)
		fatal(EXIT_INTERNAL, "cannot remove a replay event");
	rp->wev_on = false;
	/* The peer's end, once it has sent what the voters had then; or
	 * the connection's, cut short. */
	bool ended = (r->eof && rp->rx >= r->eof_sent) || (r->state == R_CLOSED && !r->eof);
	if (ended && rp->off == r->len && !rp->shut) {
		(void)shutdown(rp->fd, SHUT_WR);
		rp->shut = true;
	}
	/* Done once both ends ended. */
	if (rp->shut && rp->their_eof && rp->off == r->len)
		replay_free(rp);
}

static void on_replay_read(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct oreplay *rp = arg;
	unsigned char buf[16384];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n > 0) {
		rp->rx += (size_t)n;
	} else {
		rp->their_eof = true;
		if (event_del(rp->rev) != 0)
			fatal(EXIT_INTERNAL, "cannot remove a replay event");
	}
	replay_pump(rp);
}

static void on_replay_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	replay_pump(arg);
}

static void replay_start(struct outbound *O, struct orec *r, unsigned slot, int fd)
{
	struct sup *S = sup_of(O);
	struct oreplay *rp = must_alloc(calloc(1, sizeof *rp));
	*rp = (struct oreplay){ .r = r, .slot = slot, .fd = fd, .next = r->replays };
	rp->rev = event_new(S->base, fd, EV_READ | EV_PERSIST, on_replay_read, rp);
	rp->wev = event_new(S->base, fd, EV_WRITE | EV_PERSIST, on_replay_write, rp);
	if (rp->rev == NULL || rp->wev == NULL || event_add(rp->rev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot create a replay's events");
	r->replays = rp;
	log_event("replica %u: outbound connection %llu to %s replayed from its record", S->r[slot].id,
		  (unsigned long long)r->n + 1, r->d->name);
	replay_pump(rp);
}

/* Wakes r's replays: its record grew or ended. */
static void replays_pump(struct orec *r)
{
	for (struct oreplay *rp = r->replays, *next; rp != NULL; rp = next) {
		next = rp->next;
		replay_pump(rp);
	}
}

/* ---- accepting a replica's socket ---- */

/* c's socket reference dropped, its hold too (it was answered, or its
 * caller is gone). */
static void call_forget(struct outbound *O, unsigned slot, struct ocall *c)
{
	close_fd(&c->sock);
	if (c->held && O->slot[slot].held > 0)
		O->slot[slot].held--;
	c->held = false;
}

/* Whether sock's own name is peer. */
static bool named(int sock, const struct sockaddr_storage *peer)
{
	struct sockaddr_storage ss, n;
	socklen_t len = sizeof ss;
	memset(&ss, 0, sizeof ss);
	if (sock < 0 || getsockname(sock, (struct sockaddr *)&ss, &len) != 0)
		return false;
	(void)normalise((const struct sockaddr *)&ss, &n);
	return same(&n, peer, true);
}

/* One connect fewer waits on l: true when l was closed. */
static bool listen_release(struct olisten *l)
{
	if (l->pending > 0)
		l->pending--;
	if (l->pending > 0)
		return false;
	listen_close(l);
	return true;
}

static void on_listen_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct olisten *l = arg;
	if (event_add(l->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's outbound listener");
}

static void on_listen_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct olisten *l = arg;
	struct outbound *O = l->O;
	struct odest *d = l->d;
	unsigned slot = l->slot;
	for (int rounds = 0; rounds < 64; rounds++) {
		struct sockaddr_storage ss, peer;
		socklen_t len = sizeof ss;
		int afd = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (afd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: the connect waits in the
				 * backlog; a second, then again. */
				log_warn("replica %u: accept on its outbound listener for %s: %s: pausing 1 s",
					 sup_of(O)->r[slot].id, d->name, strerror(errno));
				struct timeval sec = { 1, 0 };
				if (event_del(l->ev) != 0 || evtimer_add(l->retry, &sec) != 0)
					fatal(EXIT_INTERNAL, "cannot pause a replica's outbound listener");
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
				log_warn("replica %u: accept on its outbound listener for %s: %s", sup_of(O)->r[slot].id,
					 d->name, strerror(errno));
			}
			return;
		}
		(void)normalise((const struct sockaddr *)&ss, &peer);
		struct orec *r = NULL;
		for (size_t k = 0; k < d->nrec && r == NULL; k++) {
			struct ocall *c = &d->rec[k]->call[slot];
			if (c->sock >= 0 && !c->held && !c->joined && named(c->sock, &peer))
				r = d->rec[k];
		}
		if (r == NULL) {
			/* Not a connect we let through (another of its sockets
			 * raced to this address): refused, in effect. */
			close(afd);
			continue;
		}
		struct ocall *c = &r->call[slot];
		c->joined = true;
		close_fd(&c->sock);
		if (c->replay)
			replay_start(O, r, slot, afd);
		else if (r->c == NULL || !conn_join(r->c, slot, afd))
			close(afd); /* the connection ended meanwhile, or dropped it */
		if (listen_release(l))
			return; /* closed: nothing more waits on it */
	}
}

/* ---- a record's calls ---- */

/* slot's held call of r answered with err (0: it goes on); false when its
 * caller was gone, and then slot leaves r's connection (not killed: its
 * program's own process died, or was killed, while it waited). */
static bool answer(struct outbound *O, struct orec *r, unsigned slot, int err)
{
	struct ocall *c = &r->call[slot];
	bool ok = virt_resume(sup_of(O)->virt, slot, c->gen, c->id, err);
	if (c->held && O->slot[slot].held > 0)
		O->slot[slot].held--;
	c->held = false;
	if (!ok || err != 0) {
		close_fd(&c->sock);
		if (r->c != NULL)
			conn_replica_gone(r->c, slot);
	}
	return ok;
}

/* A unix socket's connect, made by diehard on the replica's own socket
 * (its reference: the same open file) to a listener of diehard's with an
 * abstract name in the replica's network namespace (made by its init), and
 * answered 0: the program's socket is really connected, its options and
 * copies kept; the accepted end is diehard's, for the connection or the
 * record. */
static void give_unix(struct outbound *O, struct orec *r, unsigned slot)
{
	struct sup *S = sup_of(O);
	struct ocall *c = &r->call[slot];
	struct nslot *ns = &O->N->slot[slot];
	int l = ns->F != NULL && !ns->unanswered ? factory_take_type(ns->F, AF_UNIX, SOCK_STREAM) : -1;
	sa_family_t fam = AF_UNIX;
	struct sockaddr_un name;
	socklen_t nlen = sizeof name;
	int ours = -1;
	if (l >= 0 && bind(l, (const struct sockaddr *)&fam, sizeof fam) == 0 && listen(l, 1) == 0 &&
	    getsockname(l, (struct sockaddr *)&name, &nlen) == 0 &&
	    connect(c->sock, (const struct sockaddr *)&name, nlen) == 0)
		ours = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	int err = errno;
	if (l >= 0)
		close(l);
	if (ours < 0) {
		log_warn("replica %u: its connection to %s cannot be given to it (%s): the connect fails", S->r[slot].id,
			 r->d->name, strerror(err));
		(void)answer(O, r, slot, ECONNREFUSED);
		return;
	}
	bool given = virt_reply(S->virt, slot, c->gen, c->id);
	if (O->slot[slot].held > 0)
		O->slot[slot].held--;
	c->held = false;
	close_fd(&c->sock);
	c->joined = true;
	if (!given) {
		close(ours);
		if (r->c != NULL)
			conn_replica_gone(r->c, slot);
		return;
	}
	if (c->replay)
		replay_start(O, r, slot, ours);
	else if (r->c == NULL || !conn_join(r->c, slot, ours))
		close(ours);
}

/* Lets slot's held call of r go on to its listener; or fails it. */
static void let_through(struct outbound *O, struct orec *r, unsigned slot)
{
	if (r->d->unix_path) {
		give_unix(O, r, slot);
		return;
	}
	struct olisten *l = listen_get(O, slot, r->d);
	if (l == NULL) {
		log_warn("replica %u: its outbound connection to %s cannot be given to it (%s): the connect fails",
			 sup_of(O)->r[slot].id, r->d->name, strerror(errno));
		(void)answer(O, r, slot, ECONNREFUSED);
		return;
	}
	l->pending++;
	if (!answer(O, r, slot, 0))
		(void)listen_release(l);
}

/* Whether r's record holds all the peer sent there, so a replacement can
 * be fed it. */
static bool rec_feedable(const struct outbound *O, const struct orec *r)
{
	return O->keep && (!O->incomplete || (r->n < r->d->nhead && !r->cut));
}

/* Every held call of r answered as its state says. */
static void settle(struct outbound *O, struct orec *r)
{
	struct sup *S = sup_of(O);
	for (unsigned i = 0; i < S->nslots; i++) {
		struct ocall *c = &r->call[i];
		if (!c->held)
			continue;
		if (r->state == R_FAILED) {
			(void)answer(O, r, i, r->err);
		} else if (r->state == R_OPEN || r->state == R_CLOSED) {
			c->replay = !(r->voters & (1ull << i));
			if (c->replay && !rec_feedable(O, r)) {
				(void)answer(O, r, i, ECONNREFUSED); /* nothing to feed it */
				continue;
			}
			let_through(O, r, i);
		}
	}
}

/* Whether slot's process votes on outbound connections opened now. */
static bool eligible(const struct outbound *O, unsigned slot)
{
	const struct sup *S = sup_of(O);
	const struct nslot *ns = &O->N->slot[slot];
	return S->r[slot].live && !S->r[slot].joining && ns->present && ns->ready;
}

/* Held calls whose callers are gone, forgotten: they make no quorum. */
static void prune(struct outbound *O, struct orec *r)
{
	struct sup *S = sup_of(O);
	for (unsigned i = 0; i < S->nslots; i++) {
		struct ocall *c = &r->call[i];
		if (c->held && !virt_held(S->virt, i, c->gen, c->id))
			call_forget(O, i, c);
	}
}

static void dest_trim(struct outbound *O, struct odest *d);

static void rec_open(struct outbound *O, struct orec *r, int fd)
{
	struct sup *S = sup_of(O);
	uint64_t voters = 0;
	for (unsigned i = 0; i < S->nslots; i++)
		if (eligible(O, i))
			voters |= 1ull << i;
	r->voters = voters;
	r->state = R_OPEN;
	r->d->connections++;
	if (r->d->rep != NULL)
		json_object_set_new(r->d->rep, "connections", json_integer((json_int_t)r->d->connections));
	r->c = conn_open_out(O->N, fd, r->d->name, voters, r);
	settle(O, r);
}

static void rec_fail(struct outbound *O, struct orec *r, int err)
{
	r->state = R_FAILED;
	r->err = err;
	r->d->failed++;
	if (r->d->rep != NULL)
		json_object_set_new(r->d->rep, "failed", json_integer((json_int_t)r->d->failed));
	log_event("outbound connection to %s: %s: the replicas' connects fail so", r->d->name, strerror(err));
	settle(O, r);
	dest_trim(O, r->d);
}

static void on_connected(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct orec *r = arg;
	struct outbound *O = r->O;
	event_free(r->ev);
	r->ev = NULL;
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	r->fd = -1;
	if (err != 0) {
		close(fd);
		rec_fail(O, r, err);
		return;
	}
	rec_open(O, r, fd);
}

/* Whether some eligible slot with a call in r can take d's address on
 * its loopback. */
static bool room(const struct outbound *O, const struct orec *r)
{
	const struct odest *d = r->d;
	if (d->loopback)
		return true;
	for (unsigned i = 0; i < sup_of(O)->nslots; i++) {
		const struct oslot *os = &O->slot[i];
		if (!r->call[i].held)
			continue;
		if (os->naddrs < ALIAS_MAX)
			return true;
		for (unsigned a = 0; a < os->naddrs; a++)
			if (same(&os->addrs[a], &d->addr, false))
				return true;
	}
	return false;
}

/* r no longer waits for a quorum. */
static void rec_led(struct outbound *O, struct orec *r)
{
	if (r->leader >= 0 && O->slot[r->leader].leading > 0)
		O->slot[r->leader].leading--;
	r->leader = -1;
}

/* A quorum made r's connect: diehard makes it, once. */
static void rec_connect(struct outbound *O, struct orec *r)
{
	struct sup *S = sup_of(O);
	r->state = R_CONNECTING;
	rec_led(O, r);
	if (!room(O, r)) {
		log_warn("outbound connection to %s: the replicas' loopbacks hold %d addresses already: it fails",
			 r->d->name, ALIAS_MAX);
		rec_fail(O, r, ENETUNREACH);
		return;
	}
	int fd = socket(r->d->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rec_fail(O, r, errno);
		return;
	}
	if (connect(fd, (const struct sockaddr *)&r->d->addr, r->d->len) == 0) {
		rec_open(O, r, fd);
		return;
	}
	if (errno != EINPROGRESS) {
		int err = errno;
		close(fd);
		rec_fail(O, r, err);
		return;
	}
	r->fd = fd;
	r->ev = event_new(S->base, fd, EV_WRITE, on_connected, r);
	if (r->ev == NULL || event_add(r->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch an outbound connect");
}

/* A quorum of the eligible replicas holds a call of r: connect. */
static void rec_check(struct outbound *O, struct orec *r)
{
	if (r->state != R_WAIT)
		return;
	prune(O, r);
	unsigned have = 0;
	for (unsigned i = 0; i < sup_of(O)->nslots; i++)
		have += r->call[i].held && eligible(O, i);
	if (have > 0 && have >= net_quorum(O->N))
		rec_connect(O, r);
}

/* ---- destinations ---- */

static struct odest *dest_get(struct outbound *O, const struct sockaddr_storage *a, socklen_t len)
{
	for (size_t i = 0; i < O->ndest; i++)
		if (same(&O->dest[i]->addr, a, true))
			return O->dest[i];
	if (O->ndest == DEST_MAX)
		return NULL;
	struct sup *S = sup_of(O);
	struct odest *d = must_alloc(calloc(1, sizeof *d));
	d->addr = *a;
	d->len = len;
	d->loopback = is_loopback(a);
	d->unix_path = a->ss_family == AF_UNIX;
	if (d->unix_path)
		snprintf(d->name, sizeof d->name, "unix:%.100s", ((const struct sockaddr_un *)a)->sun_path);
	else if (!netaddr_format(a, len, d->name, sizeof d->name))
		snprintf(d->name, sizeof d->name, "?");
	d->count = must_alloc(calloc(S->nslots, sizeof *d->count));
	d->lis = must_alloc(calloc(S->nslots, sizeof *d->lis));
	grow((void **)&O->dest, &O->capdest, O->ndest + 1, sizeof *O->dest);
	O->dest[O->ndest++] = d;
	return d;
}

static void dest_report(struct outbound *O, struct odest *d, unsigned slot)
{
	struct sup *S = sup_of(O);
	if (d->rep != NULL)
		return;
	if (O->rep == NULL) {
		O->rep = json_array();
		if (O->rep == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		report_attach(S->report, "outbound", O->rep);
	}
	d->rep = json_pack("{s:s,s:i,s:f,s:i,s:i,s:i,s:i,s:i}", "address", d->name, "replica", S->r[slot].id, "time",
			   sup_now() - S->t_start, "connections", 0, "failed", 0, "divergences", 0, "sent", 0,
			   "received", 0);
	if (d->rep == NULL || json_array_append_new(O->rep, d->rep) != 0)
		fatal(EXIT_INTERNAL, "out of memory");
}

/* The bytes a record's structures take, counted with its data. */
static size_t rec_size(const struct outbound *O)
{
	return sizeof(struct orec) + sup_of(O)->nslots * sizeof(struct ocall);
}

/* The record passed its cap (--stateless): every destination's records
 * so far become its start (above). */
static void keep_start(struct outbound *O)
{
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		if (d->base != 0 || d->nhead != 0)
			continue; /* cannot be: nothing went while kept */
		d->nhead = d->nrec;
		d->base = d->nrec;
		for (size_t k = 0; k < d->nrec; k++)
			d->rec[k]->cut = d->rec[k]->state != R_CLOSED && d->rec[k]->state != R_FAILED;
	}
}

static void keep_add(struct outbound *O, size_t n)
{
	if (!O->keep || O->incomplete)
		return;
	if (O->kept + n > O->cap) {
		O->incomplete = true;
		if (O->start) {
			keep_start(O);
			log_event("outbound connections: their record passed --conn-log (%zu bytes): the run's start "
				  "stays for fresh servers, the rest goes once every replica passed it", O->cap);
			return;
		}
		log_warn("outbound connections: their record passed --conn-log (%zu bytes): a replica killed from now "
			 "on is not replaced", O->cap);
		return;
	}
	O->kept += n;
}

/* The number of d's next connection: past the start's and those kept. */
static uint64_t rec_end(const struct odest *d)
{
	return d->base + (d->nrec - d->nhead);
}

/* The n-th connection to d: made when n is the next; NULL when it was
 * freed (every process then had passed it, and no replacement can be fed
 * it: a new process's connect there fails). */
static struct orec *rec_get(struct outbound *O, struct odest *d, uint64_t n)
{
	if (n < d->nhead)
		return d->rec[n];
	if (n < d->base)
		return NULL;
	if (n < rec_end(d))
		return d->rec[d->nhead + (n - d->base)];
	if (n > rec_end(d))
		return NULL; /* never: counts go one by one */
	struct sup *S = sup_of(O);
	struct orec *r = must_alloc(calloc(1, sizeof *r));
	*r = (struct orec){ .O = O, .d = d, .n = n, .fd = -1, .leader = -1 };
	r->call = must_alloc(calloc(S->nslots, sizeof *r->call));
	for (unsigned i = 0; i < S->nslots; i++)
		r->call[i].sock = -1;
	grow((void **)&d->rec, &d->caprec, d->nrec + 1, sizeof *d->rec);
	d->rec[d->nrec++] = r;
	keep_add(O, rec_size(O));
	return r;
}

static void record_drop(struct outbound *O, struct orec *r);

/* Whether r is of no use any more: ended, nothing waits on it, and every
 * process has passed it; its record not needed (no replacement may come,
 * or none can be fed). */
static bool rec_done(const struct outbound *O, const struct orec *r)
{
	struct sup *S = sup_of(O);
	if ((r->state != R_CLOSED && r->state != R_FAILED) || r->c != NULL || r->ev != NULL || r->replays != NULL ||
	    (O->keep && !O->incomplete))
		return false;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct ocall *c = &r->call[i];
		if (c->held || c->sock >= 0 || (O->N->slot[i].present && r->d->count[i] <= r->n))
			return false;
	}
	return true;
}

/* d's connections of no use any more freed, from its oldest past the
 * start. */
static void dest_trim(struct outbound *O, struct odest *d)
{
	size_t k = d->nhead;
	while (k < d->nrec && rec_done(O, d->rec[k])) {
		record_drop(O, d->rec[k]);
		free(d->rec[k]->call);
		free(d->rec[k]);
		k++;
	}
	size_t gone = k - d->nhead;
	if (gone == 0)
		return;
	memmove(d->rec + d->nhead, d->rec + k, (d->nrec - k) * sizeof *d->rec);
	d->nrec -= gone;
	d->base += gone;
}

/* Slot's process reached d for the first time: destinations only one
 * process reached are counted against it. */
static void dest_reach(struct outbound *O, struct odest *d, unsigned slot)
{
	uint64_t bit = 1ull << slot;
	if (d->reached & bit)
		return;
	if (d->reached == 0)
		O->slot[slot].alone++;
	else if (__builtin_popcountll(d->reached) == 1)
		O->slot[__builtin_ctzll(d->reached)].alone--;
	d->reached |= bit;
}

/* Whether slot's process runs off alone: more destinations than its
 * siblings ever reached, or more connections it reached first that wait
 * for a quorum. Then it is killed (why). */
static bool runs_off(const struct outbound *O, unsigned slot, char *why, size_t size)
{
	const struct oslot *os = &O->slot[slot];
	if (os->alone > ALONE_MAX) {
		snprintf(why, size, "it connected to %u destinations no other replica did", os->alone);
		return true;
	}
	if (os->leading > LEAD_MAX) {
		snprintf(why, size, "%u of its outbound connects found no other replica's to match", os->leading);
		return true;
	}
	return false;
}

enum outcall outbound_connect(struct net *N, unsigned slot, uint64_t gen, uint64_t id, int sock,
			      const struct sockaddr *dest, socklen_t len, int *err)
{
	(void)len;
	struct outbound *O = N->out;
	struct sup *S = N->S;
	struct sockaddr_storage a;
	socklen_t alen = normalise(dest, &a);
	struct odest *d = dest_get(O, &a, alen);
	if (d == NULL || O->slot[slot].held >= HELD_MAX) {
		log_warn("replica %u: an outbound connect fails (ENOBUFS): %s", S->r[slot].id,
			 d == NULL ? "the run's destinations are too many" : "too many of its connects wait already");
		close(sock);
		*err = ENOBUFS;
		return OUT_FAIL;
	}
	dest_report(O, d, slot);
	dest_reach(O, d, slot);
	uint64_t n = d->count[slot]++;
	bool fresh = n >= rec_end(d);
	struct orec *r = rec_get(O, d, n);
	if (fresh && r != NULL) {
		r->leader = (int)slot;
		O->slot[slot].leading++;
	}
	char why[160];
	if (runs_off(O, slot, why, sizeof why)) {
		net_kill(N, slot, why);
		close(sock);
		*err = ECONNREFUSED;
		return OUT_FAIL;
	}
	if (r == NULL || r->call[slot].held || r->call[slot].joined || r->call[slot].sock >= 0) {
		/* Freed (a new process past what could be kept), or taken
		 * (cannot be: the count moved on). */
		close(sock);
		*err = ECONNREFUSED;
		return OUT_FAIL;
	}
	r->call[slot] = (struct ocall){ .held = true, .gen = gen, .id = id, .sock = sock };
	O->slot[slot].held++;
	log_event("replica %u connects to %s (its connection %llu there)", S->r[slot].id, d->name,
		  (unsigned long long)n + 1);
	if (r->state == R_WAIT)
		rec_check(O, r);
	else if (r->state != R_CONNECTING)
		settle(O, r);
	dest_trim(O, d);
	return OUT_HELD;
}

/* ---- the record ---- */

static void record_drop(struct outbound *O, struct orec *r)
{
	if (O->kept >= r->len)
		O->kept -= r->len;
	free(r->data);
	free(r->marks);
	r->data = NULL;
	r->marks = NULL;
	r->len = r->cap = r->nmarks = r->capmarks = 0;
}

void outbound_data(struct net *N, struct orec *r, const unsigned char *p, size_t n, size_t sent)
{
	struct outbound *O = N->out;
	r->d->received += n;
	keep_add(O, n);
	if (!O->keep || O->incomplete)
		return;
	grow((void **)&r->data, &r->cap, r->len + n, 1);
	if (r->nmarks == 0 || r->marks[r->nmarks - 1].sent != sent) {
		grow((void **)&r->marks, &r->capmarks, r->nmarks + 1, sizeof *r->marks);
		r->marks[r->nmarks++] = (struct mark){ .at = r->len, .sent = sent };
	}
	memcpy(r->data + r->len, p, n);
	r->len += n;
	replays_pump(r);
}

void outbound_eof(struct net *N, struct orec *r, size_t sent)
{
	(void)N;
	r->eof = true;
	r->eof_sent = sent;
	replays_pump(r);
}

void outbound_closed(struct net *N, struct orec *r)
{
	if (r == NULL)
		return;
	r->c = NULL;
	r->state = R_CLOSED;
	replays_pump(r);
	dest_trim(N->out, r->d);
}

void outbound_diverged(struct net *N, struct orec *r)
{
	(void)N;
	r->d->diverged++;
	if (r->d->rep != NULL)
		json_object_set_new(r->d->rep, "divergences", json_integer((json_int_t)r->d->diverged));
}

void outbound_sent(struct net *N, struct orec *r, size_t n)
{
	(void)N;
	r->d->sent += n;
}

const char *outbound_name(const struct orec *r)
{
	return r->d->name;
}

/* ---- slots ---- */

/* Forgets slot's process in every record: its calls, sockets, listeners,
 * replays, votes and counts. */
static void slot_clear(struct outbound *O, unsigned slot)
{
	struct oslot *os = &O->slot[slot];
	uint64_t bit = 1ull << slot;
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		d->count[slot] = 0;
		if (d->reached & bit) {
			d->reached &= ~bit;
			if (__builtin_popcountll(d->reached) == 1)
				O->slot[__builtin_ctzll(d->reached)].alone++;
		}
		listen_close(d->lis[slot]);
		for (size_t k = 0; k < d->nrec; k++) {
			struct orec *r = d->rec[k];
			if (r->leader == (int)slot)
				r->leader = -1;
			call_forget(O, slot, &r->call[slot]);
			r->call[slot] = (struct ocall){ .sock = -1 };
			r->voters &= ~bit;
			for (struct oreplay *rp = r->replays, *next; rp != NULL; rp = next) {
				next = rp->next;
				if (rp->slot == slot)
					replay_free(rp);
			}
		}
	}
	close_fd(&os->ctl[0]);
	close_fd(&os->ctl[1]);
	free(os->addrs);
	os->addrs = NULL;
	os->naddrs = 0;
	os->held = 0;
	os->alone = 0;
	os->leading = 0;
}

/* Each destination's connections still waiting for a quorum looked at
 * again (callers gone, replicas that left or became voters), and its
 * finished ones trimmed. */
static void recheck(struct outbound *O)
{
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		for (size_t k = 0; k < d->nrec; k++)
			rec_check(O, d->rec[k]);
		dest_trim(O, d);
	}
}

void outbound_slot_started(struct net *N, unsigned slot)
{
	struct outbound *O = N->out;
	if (O == NULL)
		return;
	slot_clear(O, slot);
	/* Its namespace was made with the host's addresses on its loopback
	 * (sandbox.h): its own aliases are numbered after theirs. */
	struct oslot *os = &O->slot[slot];
	os->addrs = must_alloc(malloc((O->nhost > 0 ? O->nhost : 1) * sizeof *os->addrs));
	memcpy(os->addrs, O->host, O->nhost * sizeof *os->addrs);
	os->naddrs = O->nhost;
}

void outbound_slot_front(struct net *N, unsigned slot)
{
	struct outbound *O = N->out;
	struct sup *S = N->S;
	if (O == NULL)
		return;
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		for (unsigned j = 0; j < S->nslots; j++)
			if (j != slot && N->slot[j].present && S->r[j].live && d->count[j] > d->count[slot])
				d->count[slot] = d->count[j];
	}
}

void outbound_slot_gone(struct net *N, unsigned slot)
{
	struct outbound *O = N->out;
	if (O == NULL)
		return;
	slot_clear(O, slot);
	recheck(O); /* a quorum of fewer may be there now */
}

/* Byte counts into the report (on the tick and at the end: the bytes'
 * path allocates nothing for it). */
static void reports(struct outbound *O)
{
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		if (d->rep == NULL)
			continue;
		json_object_set_new(d->rep, "sent", json_integer((json_int_t)d->sent));
		json_object_set_new(d->rep, "received", json_integer((json_int_t)d->received));
	}
}

void outbound_tick(struct net *N)
{
	if (N->out != NULL) {
		recheck(N->out);
		reports(N->out);
	}
}

void outbound_stop(struct net *N)
{
	struct outbound *O = N->out;
	if (O == NULL)
		return;
	for (size_t i = 0; i < O->ndest; i++)
		for (size_t k = 0; k < O->dest[i]->nrec; k++) {
			struct orec *r = O->dest[i]->rec[k];
			if (r->state != R_WAIT)
				continue;
			for (unsigned s = 0; s < sup_of(O)->nslots; s++)
				if (r->call[s].held)
					(void)answer(O, r, s, EINTR);
		}
}

bool outbound_replayable(const struct net *N)
{
	return N->out == NULL || !N->out->incomplete;
}

struct outbound *outbound_new(struct net *N)
{
	struct sup *S = N->S;
	struct outbound *O = must_alloc(calloc(1, sizeof *O));
	O->N = N;
	O->slot = must_alloc(calloc(S->nslots, sizeof *O->slot));
	for (unsigned i = 0; i < S->nslots; i++)
		O->slot[i].ctl[0] = O->slot[i].ctl[1] = -1;
	O->keep = S->o->respawns > 0 && S->o->conn_log > 0;
	O->start = sup_fresh_servers(S);
	O->cap = S->o->conn_log;
	host_addresses(O);
	sandbox_host_addrs(O->host, O->nhost);
	return O;
}

void outbound_free(struct outbound *O)
{
	if (O == NULL)
		return;
	struct sup *S = sup_of(O);
	reports(O);
	for (unsigned i = 0; i < S->nslots; i++)
		slot_clear(O, i);
	for (size_t i = 0; i < O->ndest; i++) {
		struct odest *d = O->dest[i];
		for (size_t k = 0; k < d->nrec; k++) {
			struct orec *r = d->rec[k];
			if (r->ev != NULL)
				event_free(r->ev);
			close_fd(&r->fd);
			r->c = NULL; /* freed by net_free already */
			record_drop(O, r);
			free(r->call);
			free(r);
		}
		free(d->rec);
		free(d->count);
		free(d->lis);
		free(d);
	}
	free(O->dest);
	free(O->slot);
	free(O);
}
