/* dgram.c — see dgram.h: flows of datagrams out of the replicas, voted
 * per datagram and sent once; the answers given to every replica.
 *
 * A destination (ddest: address and port, IPv4-mapped as IPv4) has, per
 * slot, a UDP socket in that replica's namespace bound at its address
 * (made at the slot's first flow there: the address on its loopback as
 * outbound.c puts it, then socket, bind), read by diehard; and its flows
 * in order. A flow (dflow) is the n-th of the replicas' to the
 * destination: per slot the replica socket's name (from the reference
 * taken when its flow started, until its first datagram names it) and
 * the count of its datagrams; its voters (the eligible slots when it was
 * made: a later process, a replacement, follows it); the datagrams not
 * yet decided, per voter; the decided ones a lagging voter is still to be
 * checked against; diehard's socket connected to the destination, made at
 * the first decision; and the answers, each with the number of datagrams
 * sent before it.
 *
 * The k-th datagram is decided when a quorum of the voters sent the same
 * bytes as their k-th: sent once. A voter whose k-th differs from the
 * decided one is killed (a divergence, as on a connection). When every
 * live voter sent its k-th and no quorum agrees, the datagram is dropped
 * (lost, as UDP may), and counted. Decisions go in order.
 *
 * Invariants: a flow's decided count <= every voter's count of sent ones
 * only for the quorum's members; pending[i] holds voter i's datagrams
 * from index decided on, in order; an answer r is given to slot i once
 * sent[i] >= r.after, in order, each at most once. */
#include "dgram.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcode.h"
#include "factory.h"
#include "log.h"
#include "netaddr.h"
#include "netint.h"
#include "outbound.h"
#include "report.h"
#include "sup.h"
#include "voter.h"

#define DG_MAX 65536        /* the largest datagram read */
#define DEST_MAX 4096       /* destinations in a run */
#define FLOWS_MAX 65536     /* flows alive at once in a run */
#define PENDING_MAX 256     /* undecided datagrams per voter and flow: then dropped */
#define ANSWERS_MAX 1024    /* answers kept per flow when no replacement may need them */
#define IDLE_SECONDS 120.0  /* a flow quiet that long is freed (unless kept) */

struct blob {
	unsigned char *p;
	size_t n;
};

struct answer {
	struct blob b;
	uint64_t after;          /* datagrams sent to the destination before it */
};

struct dside {               /* one slot's side of a flow */
	int sock;                /* our reference to its socket, until named (-1) */
	dev_t dev;
	ino_t ino;               /* its socket: one flow per socket and destination */
	bool started, known;
	struct sockaddr_storage src;
	socklen_t srclen;
	uint64_t sent;           /* its datagrams so far */
	size_t given;            /* answers given to it */
	struct blob *pend;       /* voters: undecided datagrams, from index decided */
	size_t npend;
};

struct ddest;

struct dflow {
	struct ddest *d;
	uint64_t n;
	uint64_t voters;
	struct dside *side;      /* per slot */
	uint64_t decided;        /* datagrams decided (sent or dropped) */
	struct blob *dec;        /* decided datagrams from dec_base, for laggers */
	uint64_t dec_base;
	size_t ndec;
	int real;                /* diehard's socket to the destination (-1) */
	struct event *ev;
	struct answer *ans;
	size_t nans, ans_base;   /* answers before ans_base freed */
	double last;
	bool dead;               /* freed at the tick */
};

struct dlocal {              /* per slot at a destination */
	int fd;                  /* its socket bound at the destination, in its namespace */
	struct event *ev;
	uint64_t flows;          /* flows its process started here */
	struct dgram *G;
	struct ddest *d;
	unsigned slot;
};

struct ddest {
	struct sockaddr_storage addr;
	socklen_t len;
	char name[NETADDR_TEXT];
	struct dlocal *ns;     /* per slot */
	struct dflow **flow;     /* flow base + i */
	size_t nflow, capflow;
	uint64_t base;
	json_t *rep;
	uint64_t nflows, sent, received, diverged, dropped;
};

struct dgram {
	struct net *N;
	struct ddest **dest;
	size_t ndest;
	size_t flows;            /* alive */
	bool keep;               /* answers kept for replacements */
	size_t kept, cap;
	bool incomplete;
	json_t *rep;
	bool said_full;
};

static struct sup *sup_of(const struct dgram *G)
{
	return G->N->S;
}

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

static struct blob blob_of(const void *p, size_t n)
{
	struct blob b = { must(malloc(n > 0 ? n : 1)), n };
	memcpy(b.p, p, n);
	return b;
}

static bool blob_same(const struct blob *a, const struct blob *b)
{
	return a->n == b->n && memcmp(a->p, b->p, a->n) == 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0 && close(*fd) != 0 && errno != EINTR)
		log_warn("close: %s", strerror(errno));
	*fd = -1;
}

static bool eligible(const struct dgram *G, unsigned slot)
{
	const struct sup *S = sup_of(G);
	const struct nslot *ns = &G->N->slot[slot];
	return S->r[slot].live && !S->r[slot].joining && ns->present && ns->ready;
}

static void rep_set(json_t *o, const char *key, uint64_t v)
{
	if (o != NULL)
		json_object_set_new(o, key, json_integer((json_int_t)v));
}

static void keep_add(struct dgram *G, size_t n)
{
	if (!G->keep || G->incomplete)
		return;
	if (G->kept + n > G->cap) {
		G->incomplete = true;
		log_warn("datagrams: their answers passed --conn-log (%zu bytes): a replica killed from now on is not "
			 "replaced", G->cap);
		return;
	}
	G->kept += n;
}

/* ---- answers ---- */

/* Gives slot the answers it is due: those that came after no more
 * datagrams than it has sent. */
static void give(struct dgram *G, struct dflow *f, unsigned slot)
{
	struct dside *s = &f->side[slot];
	struct dlocal *ns = &f->d->ns[slot];
	if (!s->known || ns->fd < 0)
		return;
	if (s->given < f->ans_base)
		s->given = f->ans_base; /* freed before it came: lost, as UDP may */
	while (s->given < f->ans_base + f->nans) {
		struct answer *a = &f->ans[s->given - f->ans_base];
		if (a->after > s->sent)
			break;
		/* One datagram; a full buffer drops it, as the network would. */
		(void)sendto(ns->fd, a->b.p, a->b.n, MSG_DONTWAIT, (const struct sockaddr *)&s->src, s->srclen);
		s->given++;
	}
	(void)G;
}

/* Answers every side has had, and past ANSWERS_MAX the oldest, freed
 * (unless kept for replacements). */
static void answers_trim(struct dgram *G, struct dflow *f)
{
	if (G->keep && !G->incomplete)
		return;
	size_t least = f->ans_base + f->nans;
	for (unsigned i = 0; i < sup_of(G)->nslots; i++)
		if (G->N->slot[i].present && f->side[i].started && f->side[i].given < least)
			least = f->side[i].given;
	if (f->nans > ANSWERS_MAX && least < f->ans_base + f->nans - ANSWERS_MAX)
		least = f->ans_base + f->nans - ANSWERS_MAX;
	size_t k = least - f->ans_base;
	if (k == 0)
		return;
	for (size_t i = 0; i < k; i++)
		free(f->ans[i].b.p);
	memmove(f->ans, f->ans + k, (f->nans - k) * sizeof *f->ans);
	f->nans -= k;
	f->ans_base += k;
}

static void on_real(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct dflow *f = arg;
	struct ddest *d = f->d;
	struct dgram *G = d->ns[0].G;
	static unsigned char buf[DG_MAX];
	for (int rounds = 0; rounds < 64; rounds++) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0) {
			/* An ICMP error (ECONNREFUSED: nothing there): the
			 * replicas see their own timeouts. */
			return;
		}
		f->ans = must(realloc(f->ans, (f->nans + 1) * sizeof *f->ans));
		f->ans[f->nans++] = (struct answer){ blob_of(buf, (size_t)n), f->decided };
		keep_add(G, (size_t)n + sizeof(struct answer));
		d->received += (uint64_t)n;
		rep_set(d->rep, "received", d->received);
		f->last = sup_now();
		for (unsigned i = 0; i < sup_of(G)->nslots; i++)
			give(G, f, i);
		answers_trim(G, f);
	}
}

/* ---- decisions ---- */

static void pend_pop(struct dside *s)
{
	free(s->pend[0].p);
	memmove(s->pend, s->pend + 1, (s->npend - 1) * sizeof *s->pend);
	s->npend--;
}

/* The decided datagram k (sent, or dropped: n == SIZE_MAX), kept while a
 * voter has yet to send its own. */
static void decided_keep(struct dgram *G, struct dflow *f, struct blob b)
{
	f->dec = must(realloc(f->dec, (f->ndec + 1) * sizeof *f->dec));
	f->dec[f->ndec++] = b;
	/* Drop those every voter has passed, and past PENDING_MAX the
	 * oldest (a voter that far behind goes unchecked there). */
	uint64_t least = f->decided;
	for (unsigned i = 0; i < sup_of(G)->nslots; i++)
		if ((f->voters & (1ull << i)) && f->side[i].sent < least)
			least = f->side[i].sent;
	if (f->decided - least > PENDING_MAX)
		least = f->decided - PENDING_MAX;
	size_t k = least > f->dec_base ? (size_t)(least - f->dec_base) : 0;
	if (k > f->ndec)
		k = f->ndec;
	for (size_t i = 0; i < k; i++)
		free(f->dec[i].p);
	memmove(f->dec, f->dec + k, (f->ndec - k) * sizeof *f->dec);
	f->ndec -= k;
	f->dec_base += k;
}

static void diverged(struct dgram *G, struct dflow *f, unsigned slot, uint64_t k)
{
	struct sup *S = sup_of(G);
	char why[200];
	snprintf(why, sizeof why, "its datagram %llu of flow %llu to %s differs from the agreed one",
		 (unsigned long long)k + 1, (unsigned long long)f->n + 1, f->d->name);
	f->d->diverged++;
	rep_set(f->d->rep, "divergences", f->d->diverged);
	report_conn_divergence(S->report, "datagram", (unsigned long long)f->n + 1, f->d->name, (size_t)k,
			       S->r[slot].id, "differs", sup_now() - S->t_start);
	log_event("divergence on flow %llu to %s: replica %u's datagram %llu differs", (unsigned long long)f->n + 1,
		  f->d->name, S->r[slot].id, (unsigned long long)k + 1);
	net_kill(G->N, slot, why);
}

/* diehard's own socket for f, connected to its destination. */
static bool real_socket(struct dgram *G, struct dflow *f)
{
	if (f->real >= 0)
		return true;
	struct ddest *d = f->d;
	int fd = socket(d->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)&d->addr, d->len) != 0) {
		log_warn("datagrams to %s: %s: not sent", d->name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	f->real = fd;
	f->ev = event_new(sup_of(G)->base, fd, EV_READ | EV_PERSIST, on_real, f);
	if (f->ev == NULL || event_add(f->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a datagram socket");
	return true;
}

/* Decides f's next datagrams while it can. */
static void decide(struct dgram *G, struct dflow *f)
{
	struct sup *S = sup_of(G);
	for (;;) {
		unsigned alive = 0, have = 0;
		for (unsigned i = 0; i < S->nslots; i++) {
			if (!(f->voters & (1ull << i)) || !S->r[i].live)
				continue;
			alive++;
			have += f->side[i].npend > 0;
		}
		if (have == 0)
			return;
		unsigned quorum = voter_quorum(alive, (unsigned)__builtin_popcountll(f->voters));
		int pick = -1;
		for (unsigned i = 0; i < S->nslots && pick < 0; i++) {
			if (!(f->voters & (1ull << i)) || !S->r[i].live || f->side[i].npend == 0)
				continue;
			unsigned same = 0;
			for (unsigned j = 0; j < S->nslots; j++)
				if ((f->voters & (1ull << j)) && S->r[j].live && f->side[j].npend > 0 &&
				    blob_same(&f->side[i].pend[0], &f->side[j].pend[0]))
					same++;
			if (same >= quorum)
				pick = (int)i;
		}
		uint64_t k = f->decided;
		struct blob b = { NULL, SIZE_MAX };
		if (pick >= 0) {
			b = blob_of(f->side[pick].pend[0].p, f->side[pick].pend[0].n);
			if (real_socket(G, f) && send(f->real, b.p, b.n, MSG_DONTWAIT) >= 0) {
				f->d->sent += b.n;
				rep_set(f->d->rep, "sent", f->d->sent);
			}
		} else if (have < alive) {
			return; /* the rest may still make a quorum */
		} else {
			f->d->dropped++;
			rep_set(f->d->rep, "dropped", f->d->dropped);
			log_event("flow %llu to %s: no majority of the replicas agrees on datagram %llu: dropped",
				  (unsigned long long)f->n + 1, f->d->name, (unsigned long long)k + 1);
		}
		f->decided++;
		/* Every voter's k-th against it; kills after. */
		uint64_t bad = 0;
		for (unsigned i = 0; i < S->nslots; i++) {
			struct dside *s = &f->side[i];
			if (!(f->voters & (1ull << i)) || s->npend == 0)
				continue;
			if (pick >= 0 && !blob_same(&s->pend[0], &b))
				bad |= 1ull << i;
			pend_pop(s);
		}
		decided_keep(G, f, b);
		for (unsigned i = 0; i < S->nslots; i++)
			if (bad & (1ull << i))
				diverged(G, f, i, k);
	}
}

/* Slot's datagram p (n bytes) in flow f. */
static void datagram(struct dgram *G, struct dflow *f, unsigned slot, const unsigned char *p, size_t n)
{
	struct dside *s = &f->side[slot];
	uint64_t k = s->sent++;
	f->last = sup_now();
	if (f->voters & (1ull << slot)) {
		if (k < f->decided) {
			/* A lagger: against the decided one, if kept. */
			if (k >= f->dec_base && k - f->dec_base < f->ndec) {
				struct blob *dec = &f->dec[k - f->dec_base];
				struct blob got = { (unsigned char *)p, n };
				if (dec->n != SIZE_MAX && !blob_same(dec, &got)) {
					diverged(G, f, slot, k);
					return;
				}
			}
		} else if (s->npend == PENDING_MAX) {
			f->d->dropped++;
			rep_set(f->d->rep, "dropped", f->d->dropped);
		} else {
			s->pend = must(realloc(s->pend, (s->npend + 1) * sizeof *s->pend));
			s->pend[s->npend++] = blob_of(p, n);
			decide(G, f);
		}
	}
	if (sup_of(G)->r[slot].live || sup_of(G)->r[slot].joining || G->N->slot[slot].present)
		give(G, f, slot);
}

/* ---- the namespace's side ---- */

static bool named(int sock, const struct sockaddr_storage *src)
{
	struct sockaddr_storage ss, n;
	socklen_t len = sizeof ss;
	memset(&ss, 0, sizeof ss);
	if (sock < 0 || getsockname(sock, (struct sockaddr *)&ss, &len) != 0)
		return false;
	(void)outbound_normalise((const struct sockaddr *)&ss, &n);
	if (n.ss_family != src->ss_family)
		return false;
	/* An unconnected socket is named by its port alone (0.0.0.0:P): the
	 * kernel picked the source address per datagram. */
	if (n.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&n, *b = (const void *)src;
		return a->sin_port == b->sin_port && (a->sin_addr.s_addr == b->sin_addr.s_addr || a->sin_addr.s_addr == 0);
	}
	const struct sockaddr_in6 *a = (const void *)&n, *b = (const void *)src;
	return a->sin6_port == b->sin6_port &&
	       (memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0 || IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr));
}

static void on_ns(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct dlocal *ns = arg;
	struct ddest *d = ns->d;
	static unsigned char buf[DG_MAX];
	for (int rounds = 0; rounds < 64; rounds++) {
		struct sockaddr_storage ss, src;
		socklen_t len = sizeof ss;
		ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&ss, &len);
		if (n < 0)
			return;
		socklen_t slen = outbound_normalise((const struct sockaddr *)&ss, &src);
		struct dflow *f = NULL;
		for (size_t k = 0; k < d->nflow && f == NULL; k++) {
			struct dflow *g = d->flow[k];
			struct dside *s = &g->side[ns->slot];
			if (!s->started)
				continue;
			if (s->known) {
				if (memcmp(&s->src, &ss, len < sizeof s->src ? len : sizeof s->src) == 0 && s->srclen == len)
					f = g;
			} else if (named(s->sock, &src)) {
				s->known = true;
				s->src = ss;
				s->srclen = len;
				close_fd(&s->sock);
				f = g;
			}
		}
		(void)slen;
		if (f == NULL)
			continue; /* a socket whose flow we did not see start (sendmsg): dropped */
		datagram(ns->G, f, ns->slot, buf, (size_t)n);
	}
}

/* slot's socket at d, made when missing: false with errno. */
static bool ns_socket(struct dgram *G, struct ddest *d, unsigned slot)
{
	struct dlocal *ns = &d->ns[slot];
	if (ns->fd >= 0)
		return true;
	int err = outbound_address(G->N, slot, &d->addr);
	if (err != 0) {
		errno = err;
		return false;
	}
	struct nslot *sl = &G->N->slot[slot];
	if (sl->F == NULL || sl->unanswered) {
		errno = EPIPE;
		return false;
	}
	int fd = factory_take_type(sl->F, d->addr.ss_family, SOCK_DGRAM);
	if (fd < 0) {
		if (errno == ETIMEDOUT)
			sl->unanswered = true;
		return false;
	}
	int one = 1;
	if ((d->addr.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
	    (d->addr.ss_family == AF_INET ? setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof one)
					  : setsockopt(fd, SOL_IPV6, 78 /* IPV6_FREEBIND */, &one, sizeof one)) != 0 ||
	    bind(fd, (const struct sockaddr *)&d->addr, d->len) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return false;
	}
	ns->fd = fd;
	ns->ev = event_new(sup_of(G)->base, fd, EV_READ | EV_PERSIST, on_ns, ns);
	if (ns->ev == NULL || event_add(ns->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's datagram socket");
	return true;
}

/* ---- flows and destinations ---- */

static void flow_free(struct dgram *G, struct dflow *f)
{
	struct sup *S = sup_of(G);
	for (unsigned i = 0; i < S->nslots; i++) {
		struct dside *s = &f->side[i];
		close_fd(&s->sock);
		for (size_t k = 0; k < s->npend; k++)
			free(s->pend[k].p);
		free(s->pend);
	}
	for (size_t k = 0; k < f->ndec; k++)
		free(f->dec[k].p);
	for (size_t k = 0; k < f->nans; k++)
		free(f->ans[k].b.p);
	if (f->ev != NULL)
		event_free(f->ev);
	close_fd(&f->real);
	free(f->side);
	free(f->dec);
	free(f->ans);
	free(f);
	G->flows--;
}

static struct ddest *dest_get(struct dgram *G, const struct sockaddr_storage *a, socklen_t len)
{
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		if (d->len == len && memcmp(&d->addr, a, len) == 0)
			return d;
	}
	if (G->ndest == DEST_MAX)
		return NULL;
	struct sup *S = sup_of(G);
	struct ddest *d = must(calloc(1, sizeof *d));
	d->addr = *a;
	d->len = len;
	if (!netaddr_format(a, len, d->name, sizeof d->name))
		snprintf(d->name, sizeof d->name, "?");
	d->ns = must(calloc(S->nslots, sizeof *d->ns));
	for (unsigned i = 0; i < S->nslots; i++)
		d->ns[i] = (struct dlocal){ .fd = -1, .G = G, .d = d, .slot = i };
	G->dest = must(realloc(G->dest, (G->ndest + 1) * sizeof *G->dest));
	G->dest[G->ndest++] = d;
	if (G->rep == NULL) {
		G->rep = must(json_array());
		report_attach(S->report, "datagrams", G->rep);
	}
	d->rep = must(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "address", d->name, "flows", 0, "sent", 0, "received", 0,
				"divergences", 0, "dropped", 0));
	if (json_array_append_new(G->rep, d->rep) != 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return d;
}

static struct dflow *flow_get(struct dgram *G, struct ddest *d, uint64_t n)
{
	if (n < d->base)
		return NULL;
	if (n - d->base < d->nflow)
		return d->flow[n - d->base];
	if (n - d->base > d->nflow || G->flows >= FLOWS_MAX)
		return NULL;
	struct sup *S = sup_of(G);
	struct dflow *f = must(calloc(1, sizeof *f));
	f->d = d;
	f->n = n;
	f->real = -1;
	f->last = sup_now();
	f->side = must(calloc(S->nslots, sizeof *f->side));
	for (unsigned i = 0; i < S->nslots; i++) {
		f->side[i].sock = -1;
		if (eligible(G, i))
			f->voters |= 1ull << i;
	}
	if (d->nflow == d->capflow) {
		d->capflow = d->capflow == 0 ? 8 : d->capflow * 2;
		d->flow = must(realloc(d->flow, d->capflow * sizeof *d->flow));
	}
	d->flow[d->nflow++] = f;
	G->flows++;
	d->nflows++;
	rep_set(d->rep, "flows", d->nflows);
	keep_add(G, sizeof *f + S->nslots * sizeof *f->side);
	return f;
}

bool dgram_flow(struct net *N, unsigned slot, int sock, const struct sockaddr *dest, socklen_t len, int *err)
{
	(void)len;
	struct dgram *G = N->dgram;
	struct sup *S = N->S;
	struct sockaddr_storage a;
	socklen_t alen = outbound_normalise(dest, &a);
	struct stat st;
	if (fstat(sock, &st) != 0) {
		close(sock);
		return false; /* the kernel answers */
	}
	struct ddest *d = dest_get(G, &a, alen);
	if (d == NULL) {
		if (!G->said_full)
			log_warn("replica %u sends datagrams to more than %d destinations: the rest fail (ENOBUFS)",
				 S->r[slot].id, DEST_MAX);
		G->said_full = true;
		close(sock);
		*err = ENOBUFS;
		return false;
	}
	/* A socket already started here is no new flow (sendto again). */
	for (size_t k = 0; k < d->nflow; k++) {
		struct dside *s = &d->flow[k]->side[slot];
		if (s->started && s->dev == st.st_dev && s->ino == st.st_ino) {
			close(sock);
			return true;
		}
	}
	if (!ns_socket(G, d, slot)) {
		int e = errno;
		log_event("replica %u: datagrams to %s cannot reach diehard (%s): the kernel decides", S->r[slot].id,
			  d->name, strerror(e));
		close(sock);
		return false;
	}
	uint64_t n = d->ns[slot].flows++;
	struct dflow *f = flow_get(G, d, n);
	if (f == NULL) {
		close(sock);
		*err = ENOBUFS;
		return false;
	}
	struct dside *s = &f->side[slot];
	close_fd(&s->sock);
	*s = (struct dside){ .sock = sock, .dev = st.st_dev, .ino = st.st_ino, .started = true };
	log_event("replica %u sends datagrams to %s (its flow %llu there)", S->r[slot].id, d->name,
		  (unsigned long long)n + 1);
	return true;
}

/* ---- slots, the tick ---- */

static void slot_clear(struct dgram *G, unsigned slot)
{
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		struct dlocal *ns = &d->ns[slot];
		if (ns->ev != NULL)
			event_free(ns->ev);
		ns->ev = NULL;
		close_fd(&ns->fd);
		ns->flows = 0;
		for (size_t k = 0; k < d->nflow; k++) {
			struct dflow *f = d->flow[k];
			struct dside *s = &f->side[slot];
			close_fd(&s->sock);
			for (size_t j = 0; j < s->npend; j++)
				free(s->pend[j].p);
			free(s->pend);
			*s = (struct dside){ .sock = -1 };
			f->voters &= ~(1ull << slot);
		}
	}
}

void dgram_slot_started(struct net *N, unsigned slot)
{
	if (N->dgram != NULL)
		slot_clear(N->dgram, slot);
}

void dgram_slot_gone(struct net *N, unsigned slot)
{
	struct dgram *G = N->dgram;
	if (G == NULL)
		return;
	slot_clear(G, slot);
	/* Fewer voters: a quorum may be there now. */
	for (size_t i = 0; i < G->ndest; i++)
		for (size_t k = 0; k < G->dest[i]->nflow; k++)
			decide(G, G->dest[i]->flow[k]);
}

void dgram_tick(struct net *N)
{
	struct dgram *G = N->dgram;
	if (G == NULL || (G->keep && !G->incomplete))
		return;
	double t = sup_now();
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		/* Idle flows from the oldest: their numbers stay matched by
		 * the base. */
		size_t k = 0;
		while (k < d->nflow && t - d->flow[k]->last > IDLE_SECONDS) {
			flow_free(G, d->flow[k]);
			k++;
		}
		if (k == 0)
			continue;
		memmove(d->flow, d->flow + k, (d->nflow - k) * sizeof *d->flow);
		d->nflow -= k;
		d->base += k;
	}
}

bool dgram_replayable(const struct net *N)
{
	return N->dgram == NULL || !N->dgram->incomplete;
}

struct dgram *dgram_new(struct net *N)
{
	struct sup *S = N->S;
	struct dgram *G = must(calloc(1, sizeof *G));
	G->N = N;
	G->keep = S->o->respawns > 0 && S->o->conn_log > 0;
	G->cap = S->o->conn_log;
	return G;
}

void dgram_free(struct dgram *G)
{
	if (G == NULL)
		return;
	struct sup *S = sup_of(G);
	for (unsigned i = 0; i < S->nslots; i++)
		slot_clear(G, i);
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		for (size_t k = 0; k < d->nflow; k++)
			flow_free(G, d->flow[k]);
		free(d->flow);
		free(d->ns);
		free(d);
	}
	free(G->dest);
	free(G);
}
