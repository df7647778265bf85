/* dgram.c — see dgram.h: flows of datagrams out of the replicas, voted
 * per datagram and sent once; the answers given to every replica; the
 * state of a run (dgram_int.h), its slots and its tick. UDP servers'
 * sessions are flows too, fed and sent by dserve.c.
 *
 * A destination (ddest: address and port, IPv4-mapped as IPv4; or a unix
 * path) has, per slot, a UDP socket in that replica's namespace bound at
 * its address (made at the slot's first flow there: the address on its
 * loopback as outbound.c puts it, then socket, bind), read by diehard; and
 * its flows in order. A flow (dflow) is the n-th of the replicas' to the
 * destination: per slot the replica socket's name (taken when its flow
 * started: no reference to the socket is kept) and the count of its
 * datagrams; its voters (the eligible slots when it was made: a later
 * process, a replacement, follows it); the datagrams not yet decided, per
 * voter; the decided ones a lagging voter is still to be checked against;
 * diehard's socket connected to the destination, made at the first
 * decision; and the answers, each with the number of datagrams sent before
 * it. A unix datagram flow's side is instead a socket of diehard's in the
 * replica's namespace, connected to the replica's own (dgram_unix).
 *
 * The k-th datagram is decided when a quorum of the voters sent the same
 * bytes as their k-th: sent once. A voter whose k-th differs from the
 * decided one is killed (a divergence, as on a connection). When every
 * live voter sent its k-th and no quorum agrees, the datagram is dropped
 * (lost, as UDP may), and counted. Decisions go in order.
 *
 * Invariants: pend[i] holds voter i's datagrams from index decided on, in
 * order; an answer r is given to slot i once sent[i] >= r.after, in order,
 * each at most once; a flow's slot in its destination's list stays at
 * nhead + n - base for its life (freed: a hole, trimmed from the front of
 * the flows past the start), at n for a flow of the start.
 *
 * The start (--stateless): a fresh server replays the run's start-up, its
 * flows numbered from 0, then joins at the voters' front. So when the
 * answers pass their cap, each destination's flows among the run's
 * first START_FLOWS stay for good (never swept, not counted
 * against FLOWS_MAX; a quiet one's socket closed) with the answers they had then (sans, given before the
 * later ones; those a side skipped, freed meanwhile, are lost as UDP may
 * lose them), and replacements are still possible. */
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
#include <sys/un.h>
#include <unistd.h>

#include "dgram_int.h"
#include "exitcode.h"
#include "factory.h"
#include "log.h"
#include "netaddr.h"
#include "netint.h"
#include "outbound.h"
#include "report.h"
#include "sup.h"
#include "virt.h"
#include "voter.h"

struct sup *dg_sup(const struct dgram *G)
{
	return G->N->S;
}

void *dg_must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

struct blob dg_blob(const void *p, size_t n)
{
	struct blob b = { dg_must(malloc(n > 0 ? n : 1)), n };
	memcpy(b.p, p, n);
	return b;
}

static bool blob_same(const struct blob *a, const struct blob *b)
{
	return a->n == b->n && memcmp(a->p, b->p, a->n) == 0;
}

void dg_close(int *fd)
{
	if (*fd >= 0 && close(*fd) != 0 && errno != EINTR)
		log_warn("close: %s", strerror(errno));
	*fd = -1;
}

bool dg_eligible(const struct dgram *G, unsigned slot)
{
	const struct sup *S = dg_sup(G);
	const struct nslot *ns = &G->N->slot[slot];
	/* A voter whose start the proxy has not heard of yet (its init's
	 * channel read after a sibling's program already sent) will be one:
	 * left out, a flow's decisions would wait for fewer than voted. */
	return S->r[slot].live && !S->r[slot].joining && !S->r[slot].exited && (!ns->present || ns->ready);
}

/* d's counters into its report entry (on the tick and at the end: the
 * datagrams' path allocates nothing for it). */
static void dest_report(struct ddest *d);

static void rep_set(json_t *o, const char *key, uint64_t v)
{
	if (o != NULL)
		json_object_set_new(o, key, json_integer((json_int_t)v));
}

static void dest_report(struct ddest *d)
{
	rep_set(d->rep, "flows", d->nflows);
	rep_set(d->rep, "sent", d->sent);
	rep_set(d->rep, "received", d->received);
	rep_set(d->rep, "divergences", d->diverged);
	rep_set(d->rep, "dropped", d->dropped);
}

static void reports(struct dgram *G)
{
	for (size_t i = 0; i < G->ndest; i++)
		dest_report(G->dest[i]);
	for (size_t i = 0; i < G->nsrv; i++)
		dest_report(G->srv[i]->rep_d);
}

/* Keeping ends (the cap, or too many flows): with --stateless or
 * --durable, each destination's first flows so far, START_FLOWS over all
 * of them, become its start, with their answers; they no longer count
 * against FLOWS_MAX (never freed, they would hold it for good). The later
 * ones go as without keeping. */
static bool keep_end(struct dgram *G)
{
	G->incomplete = true;
	if (!G->start)
		return false;
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		if (d->base != 0 || d->nhead != 0)
			continue; /* cannot be: nothing was swept while kept */
		/* Its flows among the run's first START_FLOWS (a prefix of
		 * its own: numbers grow with them), not the first
		 * destination's all. */
		size_t take = 0;
		while (take < d->nflow && d->flow[take] != NULL && d->flow[take]->made < START_FLOWS)
			take++;
		d->nhead = take;
		d->base = take; /* flow n >= take stays at n: nhead + n - base */
		for (size_t k = 0; k < take; k++) {
			struct dflow *f = d->flow[k];
			if (f == NULL)
				continue; /* cannot be: nothing was swept while kept */
			f->start = true;
			G->flows--;
			f->sans = f->ans;
			f->nsans = f->nans;
			f->ans = NULL;
			f->ans_base = f->nans;
			f->nans = 0;
		}
	}
	return true;
}

void dg_keep(struct dgram *G, size_t n)
{
	if (!G->keep || G->incomplete)
		return;
	if (G->kept + n > G->cap) {
		if (keep_end(G))
			log_event("datagrams: their answers passed --conn-log (%zu bytes): the run's start stays for fresh "
				  "servers, the rest goes once given", G->cap);
		else
			log_warn("datagrams: their answers passed --conn-log (%zu bytes): a replica killed from now on is "
				 "not replaced", G->cap);
		return;
	}
	G->kept += n;
}

/* ---- answers ---- */

/* Gives slot the answers it is due: those that came after no more
 * datagrams than it has sent. */
static void give(struct dgram *G, struct dflow *f, unsigned slot)
{
	if (f->srv != NULL) {
		dserve_give(G, f->srv, slot);
		return;
	}
	struct dside *s = &f->side[slot];
	int fd = s->own >= 0 ? s->own : f->d->ns[slot].fd; /* a unix flow's pair, or the namespace's socket */
	if (!s->known || fd < 0)
		return;
	for (;;) {
		const struct answer *a;
		if (s->given < f->nsans) {
			a = &f->sans[s->given];
		} else {
			if (s->given < f->ans_base)
				s->given = f->ans_base; /* freed before it came: lost, as UDP may */
			if (s->given >= f->ans_base + f->nans)
				break;
			a = &f->ans[s->given - f->ans_base];
		}
		if (a->after > s->sent)
			break;
		/* One datagram; a full buffer drops it, as the network would. */
		if (s->own >= 0)
			(void)send(fd, a->b.p, a->b.n, MSG_DONTWAIT);
		else
			(void)sendto(fd, a->b.p, a->b.n, MSG_DONTWAIT, (const struct sockaddr *)&s->src, s->srclen);
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
	for (unsigned i = 0; i < dg_sup(G)->nslots; i++) {
		const struct dside *s = &f->side[i];
		bool in = f->srv != NULL ? s->own >= 0 : s->started;
		if (G->N->slot[i].present && in && s->given < least)
			least = s->given;
	}
	if (least < f->ans_base)
		least = f->ans_base; /* a side still given the start's (sans) skips to here after them */
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

/* f's peer (the destination; a session's client) sent n bytes: given to
 * every replica in turn. */
void dg_answer(struct dgram *G, struct dflow *f, const unsigned char *p, size_t n)
{
	struct ddest *d = f->d;
	f->ans = dg_must(realloc(f->ans, (f->nans + 1) * sizeof *f->ans));
	f->ans[f->nans++] = (struct answer){ dg_blob(p, n), f->decided, f->srv != NULL ? f->srv->seq++ : 0 };
	dg_keep(G, n + sizeof(struct answer));
	d->received += (uint64_t)n;
	f->last = sup_now();
	for (unsigned i = 0; i < dg_sup(G)->nslots; i++)
		give(G, f, i);
	answers_trim(G, f);
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
		dg_answer(G, f, buf, (size_t)n);
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
	f->dec = dg_must(realloc(f->dec, (f->ndec + 1) * sizeof *f->dec));
	f->dec[f->ndec++] = b;
	/* Drop those every voter has passed, and past PENDING_MAX the
	 * oldest (a voter that far behind goes unchecked there). */
	uint64_t least = f->decided;
	for (unsigned i = 0; i < dg_sup(G)->nslots; i++)
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
	struct sup *S = dg_sup(G);
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
	/* A unix one named (an abstract name of the kernel's choosing), so
	 * that its server can answer. */
	sa_family_t unix_family = AF_UNIX;
	if (fd >= 0 && d->addr.ss_family == AF_UNIX &&
	    bind(fd, (const struct sockaddr *)&unix_family, sizeof unix_family) != 0) {
		close(fd);
		fd = -1;
	}
	if (fd < 0 || connect(fd, (const struct sockaddr *)&d->addr, d->len) != 0) {
		log_warn("datagrams to %s: %s: not sent", d->name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	f->real = fd;
	f->ev = event_new(dg_sup(G)->base, fd, EV_READ | EV_PERSIST, on_real, f);
	if (f->ev == NULL || event_add(f->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a datagram socket");
	return true;
}

/* Decided datagrams a flow holds while its peer has no room: a unix
 * datagram socket's queue is short (net.unix.max_dgram_qlen, 10 here),
 * and the program's own blocking send would have waited for it. */
#define OUTQ_MAX PENDING_MAX

static void outq_pop(struct dflow *f)
{
	free(f->outq[0].p);
	memmove(f->outq, f->outq + 1, (f->noutq - 1) * sizeof *f->outq);
	f->noutq--;
}

/* Sends what the queue holds, in order, while the peer takes it. */
static void outq_flush(struct dflow *f)
{
	while (f->noutq > 0) {
		struct blob *b = &f->outq[0];
		if (send(f->real, b->p, b->n, MSG_DONTWAIT) >= 0) {
			f->d->sent += b->n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR) {
			if (event_add(f->wev, NULL) != 0)
				fatal(EXIT_INTERNAL, "cannot watch a datagram socket");
			return;
		} else {
			f->d->dropped++; /* the peer refuses it (gone, too large): as a send would */
		}
		outq_pop(f);
	}
	if (f->wev != NULL)
		event_del(f->wev);
}

static void on_room(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	outq_flush(arg);
}

/* Sends decided datagram b to f's destination, or queues it behind those
 * waiting for room (dropped and counted past OUTQ_MAX). */
static void flow_send(struct dgram *G, struct dflow *f, const struct blob *b)
{
	if (!real_socket(G, f))
		return;
	if (f->noutq == 0) {
		if (send(f->real, b->p, b->n, MSG_DONTWAIT) >= 0) {
			f->d->sent += b->n;
			return;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS && errno != EINTR) {
			f->d->dropped++;
			return;
		}
	}
	if (f->noutq == OUTQ_MAX) {
		f->d->dropped++;
		log_event("flow %llu to %s: %d datagrams wait for room at the destination: one dropped",
			  (unsigned long long)f->n + 1, f->d->name, OUTQ_MAX);
		return;
	}
	if (f->wev == NULL && (f->wev = event_new(dg_sup(G)->base, f->real, EV_WRITE, on_room, f)) == NULL)
		fatal(EXIT_INTERNAL, "cannot watch a datagram socket");
	f->outq = dg_must(realloc(f->outq, (f->noutq + 1) * sizeof *f->outq));
	f->outq[f->noutq++] = dg_blob(b->p, b->n);
	if (f->noutq == 1 && event_add(f->wev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a datagram socket");
}

/* Decides f's next datagrams while it can. */
static void decide(struct dgram *G, struct dflow *f)
{
	struct sup *S = dg_sup(G);
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
		unsigned quorum = sup_quorum_among(S, alive);
		int pick = -1;
		unsigned agreeing = 0;
		for (unsigned i = 0; i < S->nslots && pick < 0; i++) {
			if (!(f->voters & (1ull << i)) || !S->r[i].live || f->side[i].npend == 0)
				continue;
			unsigned same = 0;
			for (unsigned j = 0; j < S->nslots; j++)
				if ((f->voters & (1ull << j)) && S->r[j].live && f->side[j].npend > 0 &&
				    blob_same(&f->side[i].pend[0], &f->side[j].pend[0]))
					same++;
			if (same >= quorum) {
				pick = (int)i;
				agreeing = same;
			}
		}
		uint64_t k = f->decided;
		struct blob b = { NULL, SIZE_MAX };
		if (pick >= 0) {
			/* Taken over from the pick's queue: kept for laggers. */
			b = f->side[pick].pend[0];
			f->side[pick].pend[0].p = NULL;
			if (f->srv != NULL) {
				if (f->srv->fd >= 0 && sendto(f->srv->fd, b.p, b.n, MSG_DONTWAIT,
							      (const struct sockaddr *)&f->client, f->clen) >= 0)
					f->d->sent += b.n;
			} else {
				flow_send(G, f, &b);
			}
			sup_committed_by(S, agreeing, b.n);
		} else if (have < alive) {
			return; /* the rest may still make a quorum */
		} else {
			f->d->dropped++;
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
			if (pick >= 0 && (int)i != pick && !blob_same(&s->pend[0], &b))
				bad |= 1ull << i;
			pend_pop(s);
		}
		decided_keep(G, f, b);
		for (unsigned i = 0; i < S->nslots; i++)
			if ((bad & (1ull << i)) && S->r[i].live) /* not killed by a nested decision */
				diverged(G, f, i, k);
	}
}

/* Slot's datagram p (n bytes) in flow f. */
void dg_datagram(struct dgram *G, struct dflow *f, unsigned slot, const unsigned char *p, size_t n)
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
			char why[160];
			snprintf(why, sizeof why, "its datagrams on flow %llu to %s ran %d ahead of the other replicas'",
				 (unsigned long long)f->n + 1, f->d->name, PENDING_MAX);
			net_kill(G->N, slot, why);
			return;
		} else {
			s->pend = dg_must(realloc(s->pend, (s->npend + 1) * sizeof *s->pend));
			s->pend[s->npend++] = dg_blob(p, n);
			decide(G, f);
		}
	}
	if (dg_sup(G)->r[slot].live || dg_sup(G)->r[slot].joining || G->N->slot[slot].present)
		give(G, f, slot);
}

/* ---- the namespace's side ---- */

/* Whether a datagram from src (normalised) comes from the socket named
 * mine (normalised; an unconnected socket's address is the wildcard: its
 * port alone names it). */
static bool same_src(const struct sockaddr_storage *mine, const struct sockaddr_storage *src)
{
	struct sockaddr_storage m;
	(void)outbound_normalise((const struct sockaddr *)mine, &m);
	if (m.ss_family != src->ss_family)
		return false;
	if (m.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&m, *y = (const void *)src;
		return x->sin_port == y->sin_port && (x->sin_addr.s_addr == y->sin_addr.s_addr || x->sin_addr.s_addr == 0);
	}
	const struct sockaddr_in6 *x = (const void *)&m, *y = (const void *)src;
	return x->sin6_port == y->sin6_port &&
	       (memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 || IN6_IS_ADDR_UNSPECIFIED(&x->sin6_addr));
}

/* The name of the program's socket (ours: a reference to it), bound to a
 * port first if it has none (as the kernel's own autobind would, at its
 * first datagram or connect). false: it cannot be named. */
static bool name_of(int ours, struct sockaddr_storage *name, socklen_t *len)
{
	*len = sizeof *name;
	memset(name, 0, sizeof *name);
	if (getsockname(ours, (struct sockaddr *)name, len) != 0)
		return false;
	in_port_t port = name->ss_family == AF_INET ? ((struct sockaddr_in *)name)->sin_port
						    : ((struct sockaddr_in6 *)name)->sin6_port;
	if (port != 0)
		return true;
	struct sockaddr_storage any;
	memset(&any, 0, sizeof any);
	any.ss_family = name->ss_family;
	socklen_t alen = any.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	*len = sizeof *name;
	return bind(ours, (const struct sockaddr *)&any, alen) == 0 &&
	       getsockname(ours, (struct sockaddr *)name, len) == 0;
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
			if (g == NULL || !g->side[ns->slot].started)
				continue;
			struct dside *s = &g->side[ns->slot];
			if (same_src(&s->src, &src)) {
				/* Answers go where its datagrams come from. */
				s->src = ss;
				s->srclen = len;
				s->known = true;
				f = g;
			}
		}
		(void)slen;
		if (f == NULL)
			continue; /* a socket whose flow we did not see start (sendmsg): dropped */
		dg_datagram(ns->G, f, ns->slot, buf, (size_t)n);
		if (ns->fd != fd)
			return; /* its replica was killed meanwhile */
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
					  : setsockopt(fd, SOL_IPV6, IPV6_FREEBIND, &one, sizeof one)) != 0 ||
	    bind(fd, (const struct sockaddr *)&d->addr, d->len) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return false;
	}
	int big = RCVBUF;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	ns->fd = fd;
	ns->ev = event_new(dg_sup(G)->base, fd, EV_READ | EV_PERSIST, on_ns, ns);
	if (ns->ev == NULL || event_add(ns->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's datagram socket");
	return true;
}

/* ---- flows and destinations ---- */

/* A session side's socket in its replica's namespace closed. */
void dg_own_close(struct dside *s)
{
	if (s->own_ev != NULL) {
		free(event_get_callback_arg(s->own_ev));
		event_free(s->own_ev);
	}
	s->own_ev = NULL;
	dg_close(&s->own);
}

void dg_flow_free(struct dgram *G, struct dflow *f)
{
	struct sup *S = dg_sup(G);
	if (f->leader >= 0 && G->leading[f->leader] > 0)
		G->leading[f->leader]--;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct dside *s = &f->side[i];
		dg_close(&s->sock);
		dg_own_close(s);
		for (size_t k = 0; k < s->npend; k++)
			free(s->pend[k].p);
		free(s->pend);
	}
	for (size_t k = 0; k < f->ndec; k++)
		free(f->dec[k].p);
	for (size_t k = 0; k < f->nans; k++)
		free(f->ans[k].b.p);
	for (size_t k = 0; k < f->nsans; k++)
		free(f->sans[k].b.p);
	free(f->sans);
	if (f->ev != NULL)
		event_free(f->ev);
	if (f->wev != NULL)
		event_free(f->wev);
	for (size_t k = 0; k < f->noutq; k++)
		free(f->outq[k].p);
	free(f->outq);
	dg_close(&f->real);
	free(f->side);
	free(f->dec);
	free(f->ans);
	if (!f->start)
		G->flows--;
	free(f);
}

/* A flow of the start, quiet: its socket to the destination closed (made
 * again if its replicas send more); what it keeps for fresh servers stays. */
static void flow_rest(struct dflow *f)
{
	if (f->ev != NULL)
		event_free(f->ev);
	if (f->wev != NULL)
		event_free(f->wev);
	f->ev = f->wev = NULL;
	dg_close(&f->real);
}

/* Flows of the start rested, and those past it quiet for idle seconds freed, wherever they are (a
 * hole stays: numbers go on matching by the base), the leading holes
 * trimmed. */
static void sweep(struct dgram *G, double idle)
{
	double t = sup_now();
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		for (size_t k = 0; k < d->nhead; k++)
			if (d->flow[k] != NULL && t - d->flow[k]->last >= IDLE_SECONDS && d->flow[k]->noutq == 0)
				flow_rest(d->flow[k]);
		for (size_t k = d->nhead; k < d->nflow; k++)
			if (d->flow[k] != NULL && t - d->flow[k]->last >= idle && d->flow[k]->noutq == 0) {
				dg_flow_free(G, d->flow[k]);
				d->flow[k] = NULL;
			}
		size_t k = d->nhead;
		while (k < d->nflow && d->flow[k] == NULL)
			k++;
		size_t gone = k - d->nhead;
		if (gone == 0)
			continue;
		memmove(d->flow + d->nhead, d->flow + k, (d->nflow - k) * sizeof *d->flow);
		d->nflow -= gone;
		d->base += gone;
	}
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
	struct sup *S = dg_sup(G);
	struct ddest *d = dg_must(calloc(1, sizeof *d));
	d->addr = *a;
	d->len = len;
	if (!netaddr_format(a, len, d->name, sizeof d->name))
		snprintf(d->name, sizeof d->name, "?");
	if (a->ss_family == AF_UNIX)
		snprintf(d->name, sizeof d->name, "unix:%.66s", ((const struct sockaddr_un *)a)->sun_path);
	d->ns = dg_must(calloc(S->nslots, sizeof *d->ns));
	for (unsigned i = 0; i < S->nslots; i++)
		d->ns[i] = (struct dlocal){ .fd = -1, .G = G, .d = d, .slot = i };
	G->dest = dg_must(realloc(G->dest, (G->ndest + 1) * sizeof *G->dest));
	G->dest[G->ndest++] = d;
	if (G->rep == NULL) {
		G->rep = dg_must(json_array());
		report_attach(S->report, "datagrams", G->rep);
	}
	d->rep = dg_must(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "address", d->name, "flows", 0, "sent", 0, "received", 0,
				"divergences", 0, "dropped", 0));
	if (json_array_append_new(G->rep, d->rep) != 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return d;
}

/* The number of d's next flow: past the start's and those in the list. */
static uint64_t flow_end(const struct ddest *d)
{
	return d->base + (d->nflow - d->nhead);
}

static struct dflow *flow_get(struct dgram *G, struct ddest *d, uint64_t n)
{
	if (n < d->nhead)
		return d->flow[n];
	if (n < d->base)
		return NULL;
	if (n < flow_end(d))
		return d->flow[d->nhead + (n - d->base)]; /* NULL: freed while idle */
	if (n > flow_end(d))
		return NULL;
	if (G->flows >= FLOWS_MAX) {
		if (G->keep && !G->incomplete) {
			if (keep_end(G))
				log_event("datagrams: %d flows kept: the run's start stays for fresh servers, later flows "
					  "go once quiet", FLOWS_MAX);
			else
				log_warn("datagrams: %d flows kept: their answers are no longer kept for replacements (a "
					 "replica killed from now on is not replaced)", FLOWS_MAX);
		}
		if (G->flows >= FLOWS_MAX) /* the start, no longer counted, may have made room */
			sweep(G, 0.0);
		if (G->flows >= FLOWS_MAX)
			return NULL;
	}
	struct sup *S = dg_sup(G);
	struct dflow *f = dg_must(calloc(1, sizeof *f));
	f->d = d;
	f->n = n;
	f->made = G->made++;
	f->real = -1;
	f->leader = -1;
	f->last = sup_now();
	f->side = dg_must(calloc(S->nslots, sizeof *f->side));
	for (unsigned i = 0; i < S->nslots; i++) {
		f->side[i].sock = f->side[i].own = -1;
		if (dg_eligible(G, i))
			f->voters |= 1ull << i;
	}
	if (d->nflow == d->capflow) {
		d->capflow = d->capflow == 0 ? 8 : d->capflow * 2;
		d->flow = dg_must(realloc(d->flow, d->capflow * sizeof *d->flow));
	}
	d->flow[d->nflow++] = f;
	G->flows++;
	d->nflows++;
	dg_keep(G, sizeof *f + S->nslots * sizeof *f->side);
	return f;
}

/* Whether a is the client of one of slot's server sessions: its server
 * answering (sendto the client), not a flow out. */
static bool session_client(const struct dgram *G, unsigned slot, const struct sockaddr_storage *a, socklen_t len)
{
	for (size_t i = 0; i < G->nsrv; i++)
		for (const struct dflow *f = G->srv[i]->sessions; f != NULL; f = f->snext)
			if (f->side[slot].own >= 0 && f->clen == len && memcmp(&f->client, a, len) == 0)
				return true;
	return false;
}

bool dgram_flow(struct net *N, unsigned slot, int sock, const struct sockaddr *dest, socklen_t len, int *err)
{
	(void)len;
	struct dgram *G = N->dgram;
	struct sup *S = N->S;
	struct sockaddr_storage a, name;
	socklen_t alen = outbound_normalise(dest, &a), nlen;
	struct stat st;
	if (session_client(G, slot, &a, alen) || fstat(sock, &st) != 0) {
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
		struct dflow *g = d->flow[k];
		if (g != NULL && g->side[slot].started && g->side[slot].dev == st.st_dev && g->side[slot].ino == st.st_ino) {
			close(sock);
			return true;
		}
	}
	/* Named now (bound to a port if it had none, as the kernel would at
	 * its first dg_datagram): no reference to it is kept. */
	bool named = name_of(sock, &name, &nlen);
	close(sock);
	if (!named || !ns_socket(G, d, slot)) {
		log_event("replica %u: datagrams to %s cannot reach diehard (%s): the kernel decides", S->r[slot].id,
			  d->name, strerror(errno));
		return false;
	}
	uint64_t n = d->ns[slot].flows++;
	bool fresh = n >= flow_end(d);
	struct dflow *f = flow_get(G, d, n);
	if (f == NULL) {
		*err = ENOBUFS;
		return false;
	}
	if (fresh) {
		f->leader = (int)slot;
		if (++G->leading[slot] > LEAD_MAX) {
			char why[160];
			snprintf(why, sizeof why, "%u of its datagram flows found no other replica's to match", G->leading[slot]);
			net_kill(N, slot, why);
			*err = ECONNREFUSED;
			return false;
		}
	} else if (f->leader >= 0 && f->leader != (int)slot) {
		if (G->leading[f->leader] > 0)
			G->leading[f->leader]--;
		f->leader = -1;
	}
	struct dside *s = &f->side[slot];
	*s = (struct dside){ .sock = -1, .own = -1, .dev = st.st_dev, .ino = st.st_ino, .started = true, .known = true,
			     .src = name, .srclen = nlen };
	log_event("replica %u sends datagrams to %s (its flow %llu there)", S->r[slot].id, d->name,
		  (unsigned long long)n + 1);
	return true;
}

/* Slot's program binds a UDP socket at addr: diehard's own socket there in
 * its namespace (for a flow it started, a probe's connect of glibc's
 * getaddrinfo included) makes way. */
void dgram_unbind(struct net *N, unsigned slot, const struct sockaddr *addr)
{
	struct dgram *G = N->dgram;
	struct sockaddr_storage a;
	(void)outbound_normalise(addr, &a);
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		struct dlocal *ns = &d->ns[slot];
		if (ns->fd < 0 || !same_src(&a, &d->addr))
			continue;
		event_free(ns->ev);
		ns->ev = NULL;
		dg_close(&ns->fd);
	}
}


int dgram_unix(struct net *N, unsigned slot, uint64_t gen, uint64_t id, int sock, const struct sockaddr *dest,
	       socklen_t len)
{
	struct dgram *G = N->dgram;
	struct sup *S = N->S;
	struct sockaddr_storage a;
	socklen_t alen = outbound_normalise(dest, &a); /* its path: bytes past the NUL ignored */
	(void)len;
	struct ddest *d = dest_get(G, &a, alen);
	struct nslot *sl = &N->slot[slot];
	if (d == NULL || sl->F == NULL || sl->unanswered) {
		close(sock);
		return ENOBUFS;
	}
	/* diehard's socket in the replica's namespace (an abstract name of
	 * the kernel's choosing), and the replica's own named too (if it was
	 * not), each connected to the other: its datagrams come to diehard,
	 * answers go to it alone. */
	int ours = factory_take_type(sl->F, AF_UNIX, SOCK_DGRAM);
	if (ours < 0 && errno == ETIMEDOUT)
		sl->unanswered = true;
	sa_family_t fam = AF_UNIX;
	struct sockaddr_un on, tn;
	socklen_t olen = sizeof on, tlen = sizeof tn;
	memset(&tn, 0, sizeof tn);
	bool ok = ours >= 0 && bind(ours, (const struct sockaddr *)&fam, sizeof fam) == 0 &&
		  getsockname(ours, (struct sockaddr *)&on, &olen) == 0 &&
		  getsockname(sock, (struct sockaddr *)&tn, &tlen) == 0;
	if (ok && tlen <= sizeof(sa_family_t)) {
		tlen = sizeof tn;
		ok = bind(sock, (const struct sockaddr *)&fam, sizeof fam) == 0 &&
		     getsockname(sock, (struct sockaddr *)&tn, &tlen) == 0;
	}
	/* A program's socket bound to a path of its view is beyond diehard's
	 * reach by that name: its datagrams still go out; answers to it are
	 * dropped. */
	ok = ok && (connect(ours, (const struct sockaddr *)&tn, tlen) == 0 || tn.sun_path[0] != '\0') &&
	     connect(sock, (const struct sockaddr *)&on, olen) == 0;
	int err = errno;
	close(sock);
	if (!ok) {
		if (ours >= 0)
			close(ours);
		return err != 0 ? err : EPROTO;
	}
	uint64_t n = d->ns[slot].flows++;
	struct dflow *f = flow_get(G, d, n);
	if (f == NULL) {
		close(ours);
		return ENOBUFS;
	}
	if (!virt_reply(S->virt, slot, gen, id)) {
		close(ours);
		return 0; /* its caller is gone: nothing to answer */
	}
	struct dside *s = &f->side[slot];
	*s = (struct dside){ .sock = -1, .own = ours, .started = true, .known = true };
	struct own_arg *arg = dg_must(malloc(sizeof *arg));
	*arg = (struct own_arg){ G, f, slot };
	s->own_ev = event_new(S->base, ours, EV_READ | EV_PERSIST, dg_on_own, arg);
	if (s->own_ev == NULL || event_add(s->own_ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's datagram socket");
	log_event("replica %u sends datagrams to %s (its flow %llu there)", S->r[slot].id, d->name,
		  (unsigned long long)n + 1);
	give(G, f, slot);
	return 0;
}

/* ---- slots, the tick ---- */

static void slot_clear(struct dgram *G, unsigned slot, bool keep)
{
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		struct dlocal *ns = &d->ns[slot];
		if (ns->ev != NULL)
			event_free(ns->ev);
		ns->ev = NULL;
		dg_close(&ns->fd);
		ns->flows = 0;
		for (size_t k = 0; k < d->nflow; k++) {
			struct dflow *f = d->flow[k];
			if (f == NULL)
				continue;
			if (f->leader == (int)slot) {
				if (G->leading[slot] > 0)
					G->leading[slot]--;
				f->leader = -1;
			}
			struct dside *s = &f->side[slot];
			dg_close(&s->sock);
			dg_own_close(s);
			if (keep)
				continue; /* what it sent still votes */
			for (size_t j = 0; j < s->npend; j++)
				free(s->pend[j].p);
			free(s->pend);
			*s = (struct dside){ .sock = -1, .own = -1 };
			f->voters &= ~(1ull << slot);
		}
	}
	for (size_t i = 0; i < G->nsrv; i++) {
		struct dsrv *v = G->srv[i];
		v->bound &= ~(1ull << slot);
		for (struct dflow *f = v->sessions; f != NULL; f = f->snext) {
			struct dside *s = &f->side[slot];
			dg_own_close(s);
			for (size_t j = 0; j < s->npend; j++)
				free(s->pend[j].p);
			free(s->pend);
			*s = (struct dside){ .sock = -1, .own = -1 };
			f->voters &= ~(1ull << slot);
		}
	}
}

void dgram_slot_started(struct net *N, unsigned slot)
{
	if (N->dgram != NULL)
		slot_clear(N->dgram, slot, false);
}

void dgram_slot_front(struct net *N, unsigned slot)
{
	struct dgram *G = N->dgram;
	struct sup *S = N->S;
	for (size_t i = 0; G != NULL && i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		for (unsigned j = 0; j < S->nslots; j++)
			if (j != slot && N->slot[j].present && S->r[j].live && d->ns[j].flows > d->ns[slot].flows)
				d->ns[slot].flows = d->ns[j].flows;
	}
}

void dgram_slot_gone(struct net *N, unsigned slot)
{
	struct dgram *G = N->dgram;
	if (G == NULL)
		return;
	/* A replica that ended by itself, still a voter: the datagrams it sent
	 * vote as its output does, those still in its sockets read first
	 * (under load it may exit before diehard read what it sent, and its
	 * siblings' then lacked a quorum: dropped). */
	bool keep = N->S->r[slot].live;
	for (size_t i = 0; keep && i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		for (int rounds = 0; rounds < 64 && d->ns[slot].fd >= 0; rounds++)
			on_ns(d->ns[slot].fd, EV_READ, &d->ns[slot]);
		/* A unix flow's: the socket of ours its own is connected to. */
		for (size_t k = 0; k < d->nflow; k++)
			for (int rounds = 0; rounds < 64 && d->flow[k] != NULL && d->flow[k]->side[slot].own >= 0 &&
					     d->flow[k]->side[slot].own_ev != NULL;
			     rounds++)
				dg_on_own(d->flow[k]->side[slot].own, EV_READ,
					  event_get_callback_arg(d->flow[k]->side[slot].own_ev));
	}
	slot_clear(G, slot, keep);
	/* Fewer voters: a quorum may be there now. */
	for (size_t i = 0; i < G->ndest; i++)
		for (size_t k = 0; k < G->dest[i]->nflow; k++)
			if (G->dest[i]->flow[k] != NULL)
				decide(G, G->dest[i]->flow[k]);
	for (size_t i = 0; i < G->nsrv; i++)
		for (struct dflow *f = G->srv[i]->sessions; f != NULL; f = f->snext)
			decide(G, f);
}

/* A voter that trails a flow's decided datagrams (it did not send what a
 * quorum sent), silent there for --timeout: a straggler, killed. */
static void straggle(struct dgram *G, struct dflow *f, double t)
{
	struct sup *S = dg_sup(G);
	double limit = S->o->straggler_ms / 1000.0;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct dside *s = &f->side[i];
		if (!(f->voters & (1ull << i)) || !S->r[i].live || s->sent >= f->decided) {
			s->behind = 0;
			continue;
		}
		if (s->behind == 0)
			s->behind = t;
		else if (t - s->behind > limit) {
			char why[200];
			snprintf(why, sizeof why, "straggler: its datagrams on flow %llu %s %s trail the others', silent for "
				 "more than %.1f s", (unsigned long long)f->n + 1, f->srv != NULL ? "of" : "to", f->d->name,
				 limit);
			net_kill(G->N, i, why);
		}
	}
}

static void stragglers(struct dgram *G)
{
	double t = sup_now();
	for (size_t i = 0; i < G->ndest; i++)
		for (size_t k = 0; k < G->dest[i]->nflow; k++)
			if (G->dest[i]->flow[k] != NULL)
				straggle(G, G->dest[i]->flow[k], t);
	for (size_t i = 0; i < G->nsrv; i++)
		for (struct dflow *f = G->srv[i]->sessions; f != NULL; f = f->snext)
			straggle(G, f, t);
}

void dgram_tick(struct net *N)
{
	struct dgram *G = N->dgram;
	if (G == NULL)
		return;
	reports(G);
	stragglers(G);
	if (G->keep && !G->incomplete)
		return;
	double t = sup_now();
	for (size_t i = 0; i < G->nsrv; i++)
		for (struct dflow *f = G->srv[i]->sessions, *next; f != NULL; f = next) {
			next = f->snext;
			if (t - f->last > SESSION_IDLE)
				dserve_session_free(G, f);
		}
	sweep(G, IDLE_SECONDS);
}

bool dgram_replayable(const struct net *N)
{
	return N->dgram == NULL || !N->dgram->incomplete;
}

struct dgram *dgram_new(struct net *N)
{
	struct sup *S = N->S;
	struct dgram *G = dg_must(calloc(1, sizeof *G));
	G->N = N;
	G->keep = S->o->respawns > 0 && S->o->conn_log > 0;
	G->start = sup_fresh_servers(S);
	G->cap = S->o->conn_log;
	G->leading = dg_must(calloc(S->nslots, sizeof *G->leading));
	return G;
}

void dgram_free(struct dgram *G)
{
	if (G == NULL)
		return;
	struct sup *S = dg_sup(G);
	/* What waits for room at a destination goes out now, as the
	 * program's blocking send would have: until one waits a second. */
	for (size_t i = 0; i < G->ndest; i++)
		for (size_t k = 0; k < G->dest[i]->nflow; k++) {
			struct dflow *f = G->dest[i]->flow[k];
			if (f == NULL || f->noutq == 0)
				continue;
			struct timeval sec = { 1, 0 };
			int fl = fcntl(f->real, F_GETFL);
			if (fl >= 0 && fcntl(f->real, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
			    setsockopt(f->real, SOL_SOCKET, SO_SNDTIMEO, &sec, sizeof sec) == 0)
				while (f->noutq > 0) {
					struct blob *b = &f->outq[0];
					if (send(f->real, b->p, b->n, 0) < 0)
						break; /* no room within the second: the rest are dropped */
					f->d->sent += b->n;
					outq_pop(f);
				}
			f->d->dropped += f->noutq;
		}
	reports(G);
	for (unsigned i = 0; i < S->nslots; i++)
		slot_clear(G, i, false);
	for (size_t i = 0; i < G->nsrv; i++) {
		struct dsrv *v = G->srv[i];
		while (v->sessions != NULL)
			dserve_session_free(G, v->sessions);
		if (v->ev != NULL)
			event_free(v->ev);
		dg_close(&v->fd);
		free(v->rep_d->ns);
		free(v->rep_d);
		free(v);
	}
	free(G->srv);
	for (size_t i = 0; i < G->ndest; i++) {
		struct ddest *d = G->dest[i];
		for (size_t k = 0; k < d->nflow; k++)
			if (d->flow[k] != NULL)
				dg_flow_free(G, d->flow[k]);
		free(d->flow);
		free(d->ns);
		free(d);
	}
	free(G->dest);
	free(G->leading);
	free(G);
}
