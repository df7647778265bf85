/* net.h — TCP servers as voted replicas (docs/NETWORK.md).
 *
 * With --net private (the default when sandboxed) every replica has a
 * network namespace of its own (sandbox.h): an unmodified daemon binds and
 * listens on the address and port in its configuration, in every replica,
 * without colliding. The replicas' listen() calls reach the supervisor
 * (virt/netcalls.c), which performs them and tells this module the address.
 * Once a quorum of the live replicas listens on an address, diehard listens
 * on it for real (or it was handed the socket by systemd, LISTEN_FDS), and
 * accepts. Each client connection is proxied: one connection to every live
 * replica listening there (its socket made inside the replica's namespace
 * by the replica's init: factory.h), the client's bytes sent to all of
 * them, each replica's reply stream voted as stdout is (voter.h: 4 KiB
 * chunks, the agreed prefix once the replies go quiet, end of stream by
 * quorum), and only agreed bytes written to the client. A replica whose
 * reply differs, or that trails the others past --timeout, is killed and
 * replaced; the replacement rebuilds the server's state by replaying the
 * connection log (connlog.h), then serves new connections. */
#ifndef DIEHARD_NET_H
#define DIEHARD_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>

struct sup;
struct net;

enum net_mode {
	NET_PRIVATE, /* a network namespace per replica, diehard proxies (default) */
	NET_HOST,    /* the replicas share diehard's network: no proxy, no voting of sockets */
};

/* The proxy of a run whose replicas have private networks; NULL (nothing
 * to do) otherwise. Takes over socket-activated listening sockets
 * (svcenv.h) of TCP. */
struct net *net_new(struct sup *S);
void net_free(struct net *N);

/* replica.c: the process in slot i started; factory_fd is diehard's end of
 * its init's socket channel (taken over), -1 when it has none. */
void net_replica_started(struct net *N, unsigned i, int factory_fd);
/* replica.c: the process in slot i left the vote (killed, diverged, ended):
 * its connections are dropped from every vote, its listens forgotten. */
void net_replica_gone(struct net *N, unsigned i);

/* take.c: slot i is a replacement between its replayed past and the time
 * of now (net.c): its wall and monotonic reads are real and not logged. */
bool net_clocks_aside(const struct net *N, unsigned i);

/* output.c, files/logs.c: slot i is a replacement that replays the
 * connection log and has not reached the time of now yet: what it writes
 * re-lives the past, whose times it may read otherwise (pastdigits.h). At
 * its end net.c calls output_past_ended and files_past_ended. */
bool net_past(const struct net *N, unsigned i);

/* virt/netcalls.c: slot i's program now listens on addr (a TCP socket of
 * AF_INET or AF_INET6; v6only its IPV6_V6ONLY); fd: diehard's descriptor of
 * that socket, for the time of the call (-1: none). */
void net_replica_listens(struct net *N, unsigned i, const struct sockaddr *addr, socklen_t len, bool v6only,
			 int fd);

/* Whether the replicas serve: some address is listened on (take.c: a
 * server's clocks, net.h's rules). */
bool net_serving(const struct net *N);
/* Whether diehard listens for the replicas (a quorum of the voters
 * listened there, or systemd handed the socket over), TCP or UDP: the run
 * serves clients (sup_serves). */
bool net_serves(const struct net *N);

/* When slot i's program first answered a client, in clock ticks since boot
 * (as /proc/PID/stat's start times: take.c tells a process started before
 * from one forked since); 0: not yet. */
uint64_t net_answered_ticks(const struct net *N, unsigned i);

/* When a client's reply bytes were last committed (sup_now()); 0: never. */
double net_last_answer(const struct net *N);

/* Whether slot i's program has answered a client (take.c: it serves, no
 * longer starting). */
bool net_answered(const struct net *N, unsigned i);

/* Whether slot i's program was given a client's bytes; when a replica first
 * was (the wall clock's seconds; 0: none yet). take.c: a time read before
 * any client came is no request's. */
bool net_fed(const struct net *N, unsigned i);
double net_first_fed(const struct net *N);

/* Whether slot i's program listens on some address (take.c: a server's
 * wall clocks go per thread from then on). */
bool net_listening(const struct net *N, unsigned i);

/* Whether slot i listens on a's port (a loopback or unspecified address of
 * AF_INET or AF_INET6): a connect there reaches the replica's own server. */
bool net_listens_port(const struct net *N, unsigned i, const struct sockaddr *a);

/* The straggler tick (supervisor.c): connections whose replicas trail. */
void net_tick(struct net *N);
/* diehard did not run for gap seconds (stopped, starved: supervisor.c's
 * tick saw the gap): the proxy's straggler clocks skip that time. */
void net_pause(struct net *N, double gap);
/* Stop accepting (SIGTERM: the replicas are stopping). */
void net_stop(struct net *N);

/* replace.c: whether a new replica can rebuild the servers' state (the
 * connection log is complete); why not in why. */
bool net_replayable(const struct net *N, char *why, size_t size);

/* Whether a replacement now starts as a fresh server (no connection log,
 * a listener to serve: fresh.c) whose start the logs keep past their caps
 * (--stateless: ndlog_keep_start, and the outbound and datagram records'
 * starts): the history then never refuses it. */
bool net_fresh_start(const struct net *N);

/* A durable server's replacement (--durable) may start now: no connection
 * is open and the committed files hold what the replicas wrote
 * (files_committed_state). Then new connections wait in the backlog from
 * now until it joins (fresh.c), --timeout at most: it starts from the
 * files as they are, and nothing changes them meanwhile. Without such a
 * moment for a second, one is made: new connections wait while the open
 * ones finish (a drain, 2 s at most; one that fails lets them in, and the
 * next waits 5 s, doubling to 60). true: held for the replacement (or
 * held already); false: not quiet yet (a connection's close, and the
 * tick, ask again). */
bool net_durable_begin(struct net *N);
/* replace.c: slot i's process is a replacement catching up: it serves the
 * connection log before it takes new connections. */
bool net_joined(const struct net *N, unsigned i);
/* Whether slot i's replica takes new client connections (a replacement
 * still replaying the connection log, or whose clocks still replay the
 * past, or a fresh server waiting for its quiet point, does not): what
 * diehard status calls joining, from the service's side. */
bool net_takes_clients(const struct net *N, unsigned i);

#endif
