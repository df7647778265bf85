/* dgram.h — the replicas' outbound datagrams (UDP), each sent once
 * (docs/NETWORK.md, "Datagrams").
 *
 * A replica's UDP socket that connects to, or sends to, an address outside
 * its network namespace starts a flow there (virt/netcalls.c tells this
 * module; the call goes on in the kernel at once). The n-th flow of a
 * replica's process to a destination matches the n-th of every other. For
 * each destination diehard keeps, in each replica's namespace, the
 * destination's address on the loopback and a UDP socket bound there: the
 * replicas' datagrams arrive at diehard, by their source (the replica
 * socket's own name) in their flow. The k-th datagram of a flow is sent
 * once, from diehard's own network, when a quorum of the flow's voters sent
 * the same bytes; a voter whose k-th datagram differs is killed. What the
 * destination answers goes to every replica's socket, from the
 * destination's address, each answer once the replica has sent as many
 * datagrams as had been sent when it came (so a replica that lags gets its
 * answer after its own request). A replacement is a follower of the flows
 * made before it: its datagrams are counted, never sent, and it gets the
 * answers the same way (they are kept with --respawns, up to --conn-log
 * bytes). */
#ifndef DIEHARD_DGRAM_H
#define DIEHARD_DGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct net;
struct dgram;

struct dgram *dgram_new(struct net *N);
void dgram_free(struct dgram *G);

/* Slot slot's process starts a flow to dest (AF_INET or AF_INET6, outside
 * its namespace) on its UDP socket; sock: diehard's reference to that
 * socket (taken over). true when diehard serves the destination (the call
 * then goes on); false with *err when it cannot (no room, no socket in the
 * namespace): the call fails so. A socket already started to dest is not
 * a new flow. */
bool dgram_flow(struct net *N, unsigned slot, int sock, const struct sockaddr *dest, socklen_t len, int *err);

/* Slot slot's UDP server bound addr (its port not 0; v6only: its
 * IPV6_V6ONLY): diehard binds it for real once a quorum of the voters did,
 * gives every client's datagrams to each replica's server from the
 * client's own address (a socket in its namespace bound there), and sends
 * each reply once a quorum of the replicas sent the same one. */
void dgram_bound(struct net *N, unsigned slot, const struct sockaddr *addr, socklen_t len, bool v6only);

/* Slot slot's process (listener generation gen, notification id)
 * connects its unix datagram socket (sock: diehard's reference to it,
 * taken over) to the absolute path dest, the host's socket: a flow like a
 * UDP one. diehard connects the program's own socket to a socket of its
 * own in the replica's namespace (and that one back to it) and answers
 * the call 0: 0 (or its caller gone); else the errno it is to fail with. */
int dgram_unix(struct net *N, unsigned slot, uint64_t gen, uint64_t id, int sock, const struct sockaddr *dest,
	       socklen_t len);

/* Slot's program is about to bind a UDP socket at addr: a socket of
 * diehard's for a flow there makes way. */
void dgram_unbind(struct net *N, unsigned slot, const struct sockaddr *addr);

/* A new process in slot, or none any more. */
void dgram_slot_started(struct net *N, unsigned slot);
void dgram_slot_gone(struct net *N, unsigned slot);
/* slot, a fresh server joining, numbers its next flow to each destination
 * after the voters' last (outbound_slot_front's twin). */
void dgram_slot_front(struct net *N, unsigned slot);
/* The straggler tick: idle flows freed (when nothing can need them). */
void dgram_tick(struct net *N);
/* Whether a replacement could be fed every flow so far. */
bool dgram_replayable(const struct net *N);
/* Whether diehard bound a UDP address for real (a quorum of the voters
 * bound it): the run serves datagrams. */
bool dgram_serving(const struct net *N);

#endif
