/* netcalls.h — a replica's network calls, with a private network (net.h: a
 * network namespace per replica), where filter.c sends them to the
 * supervisor:
 *   listen   of a TCP socket (AF_INET, AF_INET6) is performed by the
 *            supervisor, on its own reference to the replica's socket
 *            (pidfd_getfd), and answered with its result: so diehard
 *            learns the address (getsockname) before the program can
 *            accept, and tells the proxy (net_replica_listens). Other
 *            listens go on in the kernel;
 *   connect  of an unconnected TCP socket to an address outside the
 *            replica's namespace (not its loopback's ports it listens on,
 *            not the unspecified address: netaddr.h), or of a unix stream
 *            socket to a host socket by absolute path (resolved in the
 *            replica's root, the same inode as the host's; not one of
 *            diehard's own), is held and made once for the quorum
 *            (net/outbound.h); a unix datagram socket's to such a path
 *            starts a flow (net/dgram.h); others go on;
 *   bind     of a UDP socket is performed by the supervisor on its own
 *            reference (as listen), and the address given to the UDP
 *            proxy (net/dgram.h); others go on;
 *   sendto   with an address: a UDP socket's first datagram to a
 *            destination outside starts its flow (net/dgram.h), and goes
 *            on; so does a UDP socket's connect.
 * Each costs the one round trip of its notification; an outbound
 * connect's socket is kept until the replica's connection is matched. */
#ifndef DIEHARD_NETCALLS_H
#define DIEHARD_NETCALLS_H

#include <linux/seccomp.h>
#include <stdint.h>

struct sup;
struct netcalls;

/* What to do with a notification, as virt.c's handlers (virt_int.h) decide: answer
 * with resp, let the call go on in the kernel, or nothing (the caller is
 * gone: no answer is wanted). */
enum netcall { NETCALL_ANSWER, NETCALL_CONTINUE, NETCALL_DROP };

/* The run's state (what was said already), for its lifetime. Exits 125
 * out of memory. */
struct netcalls *netcalls_new(struct sup *S);

/* Handles req, a listen, connect or socket call of slot's process,
 * received on listener (checked again before acting on the caller). Any
 * other call goes on. */
enum netcall netcalls_handle(struct netcalls *N, int listener, unsigned slot, uint64_t gen,
			     const struct seccomp_notif *req, struct seccomp_notif_resp *resp);

#endif
