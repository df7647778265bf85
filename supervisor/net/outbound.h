/* outbound.h — the replicas' outbound TCP connections, made once
 * (docs/NETWORK.md, "The way out").
 *
 * A replica's connect() to an address outside its network namespace (or
 * to a port of the host's loopback where it does not listen itself) is held
 * (virt/netcalls.c). The n-th connect of a replica's process to a
 * destination matches the n-th of every other: once a quorum of the voters
 * made it, diehard makes the one real connection from its own network.
 * Refused or failed, every held call fails with its errno. Made, each
 * replica's namespace gets the destination's address on its loopback and a
 * listening socket there, and its held connect goes on in the kernel: the
 * program's socket is really connected to that address and port
 * (getpeername, non-blocking connect, poll and socket options are the
 * kernel's). diehard accepts it and the connection is voted as an inbound
 * one is, mirrored (conn.c): the replicas' bytes are voted and sent once,
 * the peer's go to every replica.
 *
 * A process that was not a voter of a connection (a replacement) is fed
 * the recorded exchange instead, through the same kind of socket: the
 * peer's bytes, each after it sent as many as the voters had sent then;
 * what it sends is read and dropped. The peer is never touched again. */
#ifndef DIEHARD_OUTBOUND_H
#define DIEHARD_OUTBOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct net;
struct orec;
struct outbound;

/* What became of a connect (netcalls.c answers it so). */
enum outcall {
	OUT_HELD,     /* taken: answered later through virt_resume */
	OUT_CONTINUE, /* not an outbound connection: the kernel decides */
	OUT_FAIL,     /* fails at once with *err */
};

struct outbound *outbound_new(struct net *N);
void outbound_free(struct outbound *O);

/* Slot slot's process (its listener of generation gen: virt.h) called
 * connect with notification id on a TCP socket, or a unix stream socket;
 * sock is diehard's own reference to that socket (taken over whatever the
 * answer), dest the destination (len bytes: AF_INET or AF_INET6 outside
 * its namespace, or the absolute path of a host's unix socket). A unix
 * socket is given by connecting it, from diehard, to a listener of
 * diehard's with an abstract name in the replica's namespace. */
enum outcall outbound_connect(struct net *N, unsigned slot, uint64_t gen, uint64_t id, int sock,
			      const struct sockaddr *dest, socklen_t len, int *err);

/* A new process in slot (its counts start again; it votes on none of the
 * connections made so far), or none any more. */
void outbound_slot_started(struct net *N, unsigned slot);
void outbound_slot_gone(struct net *N, unsigned slot);
/* slot, a fresh server joining (net.c's fresh_join), numbers its next
 * connect to each destination after the voters' last: the connects they
 * made while it was not there are not its own. */
void outbound_slot_front(struct net *N, unsigned slot);
/* The straggler tick: held connects whose callers died are forgotten, and
 * connects that may have a quorum now are made. */
void outbound_tick(struct net *N);
/* The run stops: connects still waiting for a quorum fail (EINTR). */
void outbound_stop(struct net *N);
/* a's address (AF_INET or AF_INET6, normalised) on slot's loopback, once
 * (net.c: a client's, so the replica sees it): 0 or an errno. */
int outbound_address(struct net *N, unsigned slot, const struct sockaddr_storage *a);
/* Whether the unix socket bound at path is one of diehard's own (its
 * control socket, a notify socket): never proxied for the replicas. */
bool net_own_socket(const char *path);
/* Whether a is one of the host's own addresses, which every replica's
 * loopback has too (sandbox.h): a port the replica listens on there is its
 * own server. */
bool outbound_is_host(const struct net *N, const struct sockaddr *a);
/* a with an IPv4-mapped IPv6 address as IPv4, in out; its length. */
socklen_t outbound_normalise(const struct sockaddr *a, struct sockaddr_storage *out);
/* Whether a replacement could be fed every connection so far. */
bool outbound_replayable(const struct net *N);

/* conn.c, for an outbound connection's record (NULL: none kept): the
 * peer's bytes and their end as they come, sent: the agreed bytes sent to
 * the peer before them; the connection closed; a voter diverged on it. */
void outbound_data(struct net *N, struct orec *r, const unsigned char *p, size_t n, size_t sent);
void outbound_eof(struct net *N, struct orec *r, size_t sent);
void outbound_sent(struct net *N, struct orec *r, size_t n);
void outbound_closed(struct net *N, struct orec *r);
void outbound_diverged(struct net *N, struct orec *r);
/* The destination's text ("93.184.216.34:80"). */
const char *outbound_name(const struct orec *r);

#endif
