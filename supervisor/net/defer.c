/* defer.c — a replica's listener hands it a connection only once the
 * connection's first bytes are there (TCP_DEFER_ACCEPT).
 *
 * Why: an event loop answers a request with the time it read at the top
 * of an iteration. lighttpd reads the monotonic clock there and, when its
 * second has turned, the wall clock: its Date. A connection whose request
 * is already in the socket when the server accepts it is answered in the
 * iteration of the accept, with the time read before it; one whose bytes
 * come a moment later is answered one iteration on, after a fresh read.
 * diehard writes the client's bytes to each replica's connection when it
 * can, so which of the two a replica sees is a race of its own, and at a
 * second's turn the replicas disagree on their Date. Deferred, every
 * replica accepts the connection with its first bytes in: the same
 * iteration in all of them.
 *
 * A server that speaks first (an SMTP or FTP banner) would wait for bytes
 * that never come: the kernel hands it the connection after its defer
 * period anyway (one SYN-ACK retransmit, about a second). diehard sees a
 * reply come before any request and turns deferral off for that address
 * for good (said in one line); only its first connection paid the second.
 *
 * Invariant: bit l of ns->deferred is set iff ns->dfd[l] is a descriptor of
 * the replica's listening socket for listener l, deferral on. Listeners
 * handed over by systemd (adopted) are made in the replica and not deferred.
 */

#include "netint.h"
#include "log.h"
#include "sup.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

/* Seconds, which the kernel turns into SYN-ACK retransmits: one. */
#define DEFER_SECONDS 1

static void drop(struct nslot *ns, unsigned l)
{
	if (!(ns->deferred & (1ull << l)))
		return;
	if (close(ns->dfd[l]) != 0)
		log_event("close of a replica's listener: %s", strerror(errno));
	ns->deferred &= ~(1ull << l);
}

void defer_listen(struct net *N, unsigned i, struct listener *l, int fd)
{
	struct nslot *ns = &N->slot[i];
	if (fd < 0 || l->adopted || l->defer_off)
		return;
	int secs = DEFER_SECONDS;
	if (setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof secs) != 0) {
		log_event("replica %u: its listener on %s cannot defer accepts: %s", N->S->r[i].id, l->name,
			  strerror(errno));
		return;
	}
	int mine = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (mine < 0) {
		/* Out of descriptors: it stays deferred, and a server that
		 * speaks first waits a second per connection there. */
		log_event("replica %u: keeping its listener on %s: %s", N->S->r[i].id, l->name, strerror(errno));
		return;
	}
	drop(ns, l->index);
	ns->dfd[l->index] = mine;
	ns->deferred |= 1ull << l->index;
}

void defer_server_first(struct net *N, struct listener *l)
{
	if (l->defer_off)
		return;
	l->defer_off = true;
	int off = 0;
	for (unsigned i = 0; i < N->S->nslots; i++) {
		struct nslot *ns = &N->slot[i];
		if (!(ns->deferred & (1ull << l->index)))
			continue;
		if (setsockopt(ns->dfd[l->index], IPPROTO_TCP, TCP_DEFER_ACCEPT, &off, sizeof off) != 0)
			log_event("replica %u: its listener on %s goes on deferring accepts: %s", N->S->r[i].id,
				  l->name, strerror(errno));
		drop(ns, l->index);
	}
	log_event("the server on %s speaks first: connections reach its replicas without waiting for the "
		  "client's first bytes (times in replies may then differ at a second's turn)",
		  l->name);
}

void defer_slot_gone(struct net *N, unsigned i)
{
	struct nslot *ns = &N->slot[i];
	for (unsigned l = 0; l < NET_MAX_LISTENERS; l++)
		drop(ns, l);
}
