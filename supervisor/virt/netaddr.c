/* netaddr.c — see netaddr.h. The bytes came from a replica's memory and
 * may be unaligned: each address is copied into its family's struct, never
 * read through a cast pointer. */
#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The shortest address the kernel takes for each family: a sockaddr_in,
 * and a sockaddr_in6 without its scope id (RFC 2133's size). */
#define IN4_MIN sizeof(struct sockaddr_in)
#define IN6_MIN offsetof(struct sockaddr_in6, sin6_scope_id)

_Static_assert(NETADDR_TEXT >= sizeof "[" + INET6_ADDRSTRLEN + sizeof "%4294967295]:65535" - 2,
	       "NETADDR_TEXT holds the longest text");

static int family(const void *sa, size_t len)
{
	sa_family_t f;
	if (len < sizeof f)
		return AF_UNSPEC;
	memcpy(&f, sa, sizeof f);
	if ((f == AF_INET && len >= IN4_MIN) || (f == AF_INET6 && len >= IN6_MIN))
		return f;
	return AF_UNSPEC;
}

static struct sockaddr_in copy4(const void *sa)
{
	struct sockaddr_in s4;
	memcpy(&s4, sa, sizeof s4);
	return s4;
}

/* The scope id is 0 when len leaves it out. */
static struct sockaddr_in6 copy6(const void *sa, size_t len)
{
	struct sockaddr_in6 s6;
	memset(&s6, 0, sizeof s6);
	memcpy(&s6, sa, len < sizeof s6 ? len : sizeof s6);
	return s6;
}

/* 127/8 or 0.0.0.0, the address in host order. */
static bool local4(uint32_t a)
{
	return a == 0 || a >> 24 == 127;
}

enum netaddr_kind netaddr_classify(const void *sa, size_t len)
{
	switch (family(sa, len)) {
	case AF_INET: {
		struct sockaddr_in s4 = copy4(sa);
		return local4(ntohl(s4.sin_addr.s_addr)) ? NETADDR_LOCAL : NETADDR_REMOTE;
	}
	case AF_INET6: {
		struct sockaddr_in6 s6 = copy6(sa, len);
		const struct in6_addr *a = &s6.sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a))
			return NETADDR_LOCAL;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			uint32_t v4;
			memcpy(&v4, &a->s6_addr[12], sizeof v4);
			return local4(ntohl(v4)) ? NETADDR_LOCAL : NETADDR_REMOTE;
		}
		return NETADDR_REMOTE;
	}
	default: return NETADDR_OTHER;
	}
}

bool netaddr_format(const void *sa, size_t len, char *buf, size_t size)
{
	if (size == 0)
		return false;
	char host[INET6_ADDRSTRLEN];
	int n = -1;
	switch (family(sa, len)) {
	case AF_INET: {
		struct sockaddr_in s4 = copy4(sa);
		if (inet_ntop(AF_INET, &s4.sin_addr, host, sizeof host) != NULL)
			n = snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(s4.sin_port));
		break;
	}
	case AF_INET6: {
		struct sockaddr_in6 s6 = copy6(sa, len);
		if (inet_ntop(AF_INET6, &s6.sin6_addr, host, sizeof host) == NULL)
			break;
		if (s6.sin6_scope_id != 0)
			n = snprintf(buf, size, "[%s%%%u]:%u", host, (unsigned)s6.sin6_scope_id,
				     (unsigned)ntohs(s6.sin6_port));
		else
			n = snprintf(buf, size, "[%s]:%u", host, (unsigned)ntohs(s6.sin6_port));
		break;
	}
	default: break;
	}
	if (n < 0 || (size_t)n >= size) {
		buf[0] = '\0';
		return false;
	}
	return true;
}
