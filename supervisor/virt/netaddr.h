/* netaddr.h — the socket addresses of a replica's network calls, as the
 * supervisor judges and names them: whether a destination stays inside the
 * replica's own network namespace (its loopback, or the unspecified
 * address, which Linux connects to locally), and its text in messages and
 * the report ("127.0.0.1:80", "[::1]:8080"). Pure: no system calls. */
#ifndef DIEHARD_NETADDR_H
#define DIEHARD_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Room for the longest text: "[" INET6_ADDRSTRLEN "%" scope "]:" port. */
#define NETADDR_TEXT 72

enum netaddr_kind {
	NETADDR_OTHER,  /* not AF_INET or AF_INET6, or too short for its family */
	NETADDR_LOCAL,  /* loopback (127/8, ::1, ::ffff:127/104) or unspecified
			   (0.0.0.0, ::, ::ffff:0.0.0.0) */
	NETADDR_REMOTE, /* anything else of AF_INET or AF_INET6 */
};

/* The kind of the len bytes at sa (len as the caller passed it: an address
 * the kernel would refuse as too short is NETADDR_OTHER). sa need not be
 * aligned. */
enum netaddr_kind netaddr_classify(const void *sa, size_t len);

/* Writes sa's address and port into buf (NETADDR_TEXT bytes suffice):
 * "a.b.c.d:port", "[v6]:port", "[v6%scope]:port". False, with buf the
 * empty string (when size > 0), for NETADDR_OTHER addresses or too small
 * a buf. */
bool netaddr_format(const void *sa, size_t len, char *buf, size_t size);

#endif
