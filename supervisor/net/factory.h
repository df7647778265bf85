/* factory.h — TCP sockets made inside a replica's network namespace.
 *
 * A socket belongs to the network namespace of the process that creates
 * it, and diehard cannot enter a replica's (unprivileged, setns needs
 * CAP_SYS_ADMIN in our own user namespace). So the replica's init
 * (sandbox.h: pid 1 of its namespaces, outside the program's reach) makes
 * them on request and hands them over with SCM_RIGHTS; diehard connects
 * them to the program's listening address itself.
 *
 * Channel (SOCK_SEQPACKET, one message each way per request):
 *   diehard -> init: 2 bytes { family: 4 or 6 (1: AF_UNIX), | FACTORY_UDP
 *                    for datagram sockets; count: 1..64 }
 *   init -> diehard: 1 byte { 0, or the errno (capped at 255) of the first
 *                    socket() that failed } with SCM_RIGHTS carrying the
 *                    sockets made (count of them when the byte is 0):
 *                    TCP or UDP (unix stream or datagram), non-blocking,
 *                    close-on-exec.
 *   diehard -> init: { 'P', 0, tag }, or { 'P', 1, tag, pid (4 bytes,
 *                    little-endian) }
 *   init -> diehard: { 0 or errno, tag, pid (4 bytes, little-endian) }: the
 *                    namespace's last pid (ns_last_pid), read, or written
 *                    first: the next process or thread gets the one after;
 *                    the tag tells a late answer from the one awaited.
 * Sockets are taken from a pool per family, refilled a batch at a time by
 * one synchronous round trip (the init answers in microseconds). */
#ifndef DIEHARD_FACTORY_H
#define DIEHARD_FACTORY_H

struct factory;

#include <sys/types.h>

#define FACTORY_BATCH 32
#define FACTORY_UDP 0x10

/* Takes over fd (diehard's end of the channel). NULL on allocation failure. */
struct factory *factory_new(int fd);
/* Closes the channel and the pooled sockets. NULL is fine. */
void factory_free(struct factory *F);
/* A fresh TCP socket (family AF_INET or AF_INET6) made in the replica's
 * namespace, non-blocking and close-on-exec; -1 with errno when the init
 * is gone (EPIPE), did not answer within a second (ETIMEDOUT), or could not
 * make one (its errno). */
int factory_take(struct factory *F, int family);
/* The same of type SOCK_STREAM (TCP) or SOCK_DGRAM (UDP); of family
 * AF_UNIX too (a unix socket belongs to a network namespace as well: its
 * abstract names are looked up there). */
int factory_take_type(struct factory *F, int family, int type);
/* The replica's pid namespace's last pid, read into *value, or first set
 * to set (>= 0): 0, or an errno (ENOENT: the init has no way to it). One
 * synchronous round trip. */
int factory_last_pid(struct factory *F, long set, pid_t *value);

#endif
