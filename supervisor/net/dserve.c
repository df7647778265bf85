/* dserve.c — UDP servers as voted replicas (dgram.h's dgram_bound).
 *
 * A replica's bind of a UDP socket (made by diehard: virt/netcalls.c)
 * names an address; once a quorum of the voters bound it, diehard binds it
 * for real. Each client is a session: a flow (dgram_int.h) whose peer is
 * the client. In every replica's namespace a socket of diehard's is bound
 * at the client's own address (put on the loopback as outbound.c does; the
 * loopback's addresses full: a loopback address, said nowhere) and sends
 * it the client's datagrams, to where its server is reached; the replies
 * arrive there and are voted as any flow's datagrams (dgram.c), and what
 * is decided is sent to the client from the real socket. A replica is
 * given its server's datagrams in the order they came over all sessions,
 * as its one socket would have received them, each once it answered as
 * many in that session as the others had (a replacement follows the
 * sessions made before it the same way, from their first datagram).
 * Sessions past SESSIONS_MAX are freed from the idlest; without
 * replacements, one quiet for SESSION_IDLE too. */
#include "dgram.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dgram_int.h"
#include "exitcode.h"
#include "factory.h"
#include "log.h"
#include "netint.h"
#include "outbound.h"
#include "report.h"
#include "sup.h"

/* A server's clients' datagrams are given to a replica in the order they
 * came, over all its sessions, as one socket would have received them
 * (a replacement's, too: its replay never overtakes itself), each once
 * the replica has sent as many replies in its session as the others had
 * then. One lost meanwhile (its session freed) is skipped. */
void dserve_give(struct dgram *G, struct dsrv *v, unsigned slot)
{
	(void)G;
	for (;;) {
		struct dflow *at = NULL;
		uint64_t least = UINT64_MAX;
		for (struct dflow *f = v->sessions; f != NULL; f = f->snext) {
			struct dside *s = &f->side[slot];
			if (s->given < f->ans_base)
				s->given = f->ans_base;
			if (s->given >= f->ans_base + f->nans)
				continue;
			uint64_t seq = f->ans[s->given - f->ans_base].seq;
			if (seq < least) {
				least = seq;
				at = f;
			}
		}
		if (at == NULL)
			return;
		struct dside *s = &at->side[slot];
		struct answer *a = &at->ans[s->given - at->ans_base];
		if (s->own < 0) {
			s->given++; /* no socket for it there: lost to it, as UDP may */
			continue;
		}
		if (a->after > s->sent)
			return;
		(void)sendto(s->own, a->b.p, a->b.n, MSG_DONTWAIT, (const struct sockaddr *)&s->src, s->srclen);
		s->given++;
	}
}


#define SESSIONS_MAX 4096    /* a server's clients at once: the idlest freed first */


/* slot's socket of session f, bound at the client's address in its
 * namespace (the address on its loopback first; its port if free there),
 * to give it the client's datagrams and read its server's replies. */
static bool own_socket(struct dgram *G, struct dflow *f, unsigned slot)
{
	struct dside *s = &f->side[slot];
	if (s->own >= 0)
		return true;
	struct nslot *sl = &G->N->slot[slot];
	if (sl->F == NULL || sl->unanswered)
		return false;
	/* The loopback's addresses full: the client seen from the loopback. */
	bool real = outbound_address(G->N, slot, &f->client) == 0;
	int fd = factory_take_type(sl->F, f->srv->target.ss_family, SOCK_DGRAM);
	if (fd < 0) {
		if (errno == ETIMEDOUT)
			sl->unanswered = true;
		return false;
	}
	struct sockaddr_storage b = f->client;
	if (!real) {
		memset(&b, 0, sizeof b);
		b.ss_family = f->client.ss_family;
		if (b.ss_family == AF_INET)
			((struct sockaddr_in *)&b)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)&b)->sin6_addr = in6addr_loopback;
	}
	bool ok = net_bind_at(fd, f->srv->target.ss_family, &b) == 0;
	if (!ok) {
		close(fd);
		return false;
	}
	int big = RCVBUF;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	struct own_arg *a = dg_must(malloc(sizeof *a));
	*a = (struct own_arg){ G, f, slot };
	s->own = fd;
	s->own_ev = event_new(dg_sup(G)->base, fd, EV_READ | EV_PERSIST, dg_on_own, a);
	if (s->own_ev == NULL || event_add(s->own_ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's datagram socket");
	/* Its server's replies come from the address it bound. */
	s->known = true;
	s->src = f->srv->target;
	s->srclen = f->srv->tlen;
	return true;
}

void dg_on_own(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	const struct own_arg *a = arg;
	struct dgram *G = a->G;
	struct dflow *f = a->f;
	unsigned slot = a->slot; /* a is freed if the replica is killed */
	static unsigned char buf[DG_MAX];
	for (int rounds = 0; rounds < 64; rounds++) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0)
			return;
		dg_datagram(G, f, slot, buf, (size_t)n);
		if (f->side[slot].own != fd)
			return; /* its replica was killed meanwhile */
	}
}

void dserve_session_free(struct dgram *G, struct dflow *f)
{
	struct dflow **pp = &f->srv->sessions;
	while (*pp != f)
		pp = &(*pp)->snext;
	*pp = f->snext;
	f->srv->nsessions--;
	dg_flow_free(G, f);
}

/* v's session with client c (made at its first dg_datagram). */
static struct dflow *session_get(struct dgram *G, struct dsrv *v, const struct sockaddr_storage *c, socklen_t clen)
{
	for (struct dflow *f = v->sessions; f != NULL; f = f->snext)
		if (f->clen == clen && memcmp(&f->client, c, clen) == 0)
			return f;
	if (v->nsessions >= SESSIONS_MAX || G->flows >= FLOWS_MAX) {
		struct dflow *idlest = NULL;
		for (struct dflow *f = v->sessions; f != NULL; f = f->snext)
			if (idlest == NULL || f->last < idlest->last)
				idlest = f;
		if (idlest == NULL)
			return NULL;
		dserve_session_free(G, idlest);
	}
	struct sup *S = dg_sup(G);
	struct dflow *f = dg_must(calloc(1, sizeof *f));
	f->d = v->rep_d;
	f->srv = v;
	f->client = *c;
	f->clen = clen;
	f->real = -1;
	f->last = sup_now();
	f->n = v->rep_d->nflows++;
	f->side = dg_must(calloc(S->nslots, sizeof *f->side));
	for (unsigned i = 0; i < S->nslots; i++) {
		f->side[i].sock = f->side[i].own = -1;
		if ((v->bound & (1ull << i)) && dg_eligible(G, i))
			f->voters |= 1ull << i;
	}
	f->snext = v->sessions;
	v->sessions = f;
	v->nsessions++;
	G->flows++;
	dg_keep(G, sizeof *f + S->nslots * sizeof *f->side);
	for (unsigned i = 0; i < S->nslots; i++)
		if ((v->bound & (1ull << i)) && G->N->slot[i].present)
			(void)own_socket(G, f, i);
	return f;
}

static void on_host(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct dsrv *v = arg;
	struct dgram *G = v->G;
	static unsigned char buf[DG_MAX];
	for (int rounds = 0; rounds < 64; rounds++) {
		struct sockaddr_storage ss, c;
		socklen_t len = sizeof ss;
		ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&ss, &len);
		if (n < 0)
			return;
		socklen_t clen = outbound_normalise((const struct sockaddr *)&ss, &c);
		struct dflow *f = session_get(G, v, &c, clen);
		if (f != NULL)
			dg_answer(G, f, buf, (size_t)n);
	}
}

/* v bound for real, once a quorum of the voters bound it: as the plain
 * server would, or one line and 125. */
static void srv_open(struct dgram *G, struct dsrv *v)
{
	int fd = socket(v->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, v6only = v->v6only;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    (v->addr.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0) ||
	    bind(fd, (const struct sockaddr *)&v->addr, v->len) != 0)
		fatal(EXIT_INTERNAL, "cannot bind UDP %s as the replicas do: %s", v->name, strerror(errno));
	v->fd = fd;
	v->ev = event_new(dg_sup(G)->base, fd, EV_READ | EV_PERSIST, on_host, v);
	if (v->ev == NULL || event_add(v->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a UDP server's socket");
	log_event("UDP %s bound for the replicas", v->name);
}

void dgram_bound(struct net *N, unsigned slot, const struct sockaddr *addr, socklen_t len, bool v6only)
{
	struct dgram *G = N->dgram;
	struct sup *S = N->S;
	struct sockaddr_storage a;
	memset(&a, 0, sizeof a);
	memcpy(&a, addr, len < sizeof a ? len : sizeof a);
	struct dsrv *v = NULL;
	for (size_t i = 0; i < G->nsrv && v == NULL; i++)
		if (G->srv[i]->len == len && memcmp(&G->srv[i]->addr, &a, len) == 0 && G->srv[i]->v6only == v6only)
			v = G->srv[i];
	if (v == NULL) {
		if (G->nsrv == SRV_MAX)
			return;
		v = dg_must(calloc(1, sizeof *v));
		*v = (struct dsrv){ .G = G, .addr = a, .len = len, .v6only = v6only, .fd = -1 };
		net_target_of(&a, &v->target, &v->tlen);
		if (!netaddr_format(&a, len, v->name, sizeof v->name))
			snprintf(v->name, sizeof v->name, "?");
		struct ddest *d = dg_must(calloc(1, sizeof *d));
		d->addr = a;
		d->len = len;
		memcpy(d->name, v->name, sizeof d->name);
		d->ns = dg_must(calloc(S->nslots, sizeof *d->ns));
		for (unsigned i = 0; i < S->nslots; i++)
			d->ns[i] = (struct dlocal){ .fd = -1, .G = G, .d = d, .slot = i };
		if (G->rep == NULL) {
			G->rep = dg_must(json_array());
			report_attach(S->report, "datagrams", G->rep);
		}
		d->rep = dg_must(json_pack("{s:s,s:b,s:i,s:i,s:i,s:i,s:i}", "address", d->name, "server", 1, "flows", 0,
					"sent", 0, "received", 0, "divergences", 0, "dropped", 0));
		if (json_array_append_new(G->rep, d->rep) != 0)
			fatal(EXIT_INTERNAL, "out of memory");
		v->rep_d = d;
		G->srv = dg_must(realloc(G->srv, (G->nsrv + 1) * sizeof *G->srv));
		G->srv[G->nsrv++] = v;
	}
	v->bound |= 1ull << slot;
	log_event("replica %u's UDP server is bound at %s", S->r[slot].id, v->name);
	/* Sessions made before: it follows them (a replacement is given
	 * their clients' datagrams, paced by its replies). */
	for (struct dflow *f = v->sessions; f != NULL; f = f->snext)
		if (own_socket(G, f, slot))
			dserve_give(G, f->srv, slot);
	if (v->fd < 0) {
		unsigned have = 0;
		for (unsigned i = 0; i < S->nslots; i++)
			have += (v->bound & (1ull << i)) && dg_eligible(G, i);
		if (have >= net_quorum(N))
			srv_open(G, v);
	}
}

bool dgram_serving(const struct net *N)
{
	const struct dgram *G = N->dgram;
	for (size_t i = 0; G != NULL && i < G->nsrv; i++)
		if (G->srv[i]->fd >= 0)
			return true;
	return false;
}
