/* Unit tests of netaddr.c: which destinations of a replica's connect stay
 * in its network namespace (IPv4 loopback 127/8 and 0.0.0.0, IPv6 ::1 and
 * ::, their IPv4-mapped forms) and which leave it (every other address,
 * the IPv4-compatible ::127.0.0.1 and the boundaries next to 127/8
 * included); addresses too short for their family and other families are
 * neither; the text of each, with ports and scope ids, exact, cut short
 * into a small buffer never overrun; unaligned input read safely. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "netaddr.h"
#include "tap.h"

static struct sockaddr_in v4(const char *a, unsigned port)
{
	struct sockaddr_in s;
	memset(&s, 0, sizeof s);
	s.sin_family = AF_INET;
	s.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, a, &s.sin_addr) != 1)
		printf("# bad test address %s\n", a);
	return s;
}

static struct sockaddr_in6 v6(const char *a, unsigned port, uint32_t scope)
{
	struct sockaddr_in6 s;
	memset(&s, 0, sizeof s);
	s.sin6_family = AF_INET6;
	s.sin6_port = htons((uint16_t)port);
	s.sin6_scope_id = scope;
	if (inet_pton(AF_INET6, a, &s.sin6_addr) != 1)
		printf("# bad test address %s\n", a);
	return s;
}

static enum netaddr_kind kind4(const char *a)
{
	struct sockaddr_in s = v4(a, 80);
	return netaddr_classify(&s, sizeof s);
}

static enum netaddr_kind kind6(const char *a)
{
	struct sockaddr_in6 s = v6(a, 80, 0);
	return netaddr_classify(&s, sizeof s);
}

/* Whether sa (len bytes) formats as want. */
static bool text_is(const void *sa, size_t len, const char *want)
{
	char buf[NETADDR_TEXT];
	memset(buf, 'x', sizeof buf);
	bool ok = netaddr_format(sa, len, buf, sizeof buf);
	if (!ok || strcmp(buf, want) != 0) {
		printf("#   got '%s' (%s), want '%s'\n", buf, ok ? "true" : "false", want);
		return false;
	}
	return true;
}

int main(void)
{
	CHECK(kind4("127.0.0.1") == NETADDR_LOCAL && kind4("127.255.255.254") == NETADDR_LOCAL &&
		      kind4("127.1.2.3") == NETADDR_LOCAL,
	      "IPv4 loopback: all of 127/8");
	CHECK(kind4("0.0.0.0") == NETADDR_LOCAL, "0.0.0.0: Linux connects to it locally");
	CHECK(kind4("126.255.255.255") == NETADDR_REMOTE && kind4("128.0.0.0") == NETADDR_REMOTE &&
		      kind4("0.0.0.1") == NETADDR_REMOTE,
	      "the neighbours of 127/8 and 0.0.0.0 are remote");
	CHECK(kind4("93.184.216.34") == NETADDR_REMOTE && kind4("192.0.2.1") == NETADDR_REMOTE &&
		      kind4("10.0.0.1") == NETADDR_REMOTE && kind4("255.255.255.255") == NETADDR_REMOTE,
	      "public, documentation, private and broadcast IPv4 addresses are remote");
	CHECK(kind6("::1") == NETADDR_LOCAL && kind6("::") == NETADDR_LOCAL, "IPv6 ::1 and :: are local");
	CHECK(kind6("::ffff:127.0.0.1") == NETADDR_LOCAL && kind6("::ffff:127.9.9.9") == NETADDR_LOCAL &&
		      kind6("::ffff:0.0.0.0") == NETADDR_LOCAL,
	      "IPv4-mapped loopback and unspecified are local");
	CHECK(kind6("::ffff:93.184.216.34") == NETADDR_REMOTE && kind6("::ffff:128.0.0.1") == NETADDR_REMOTE,
	      "other IPv4-mapped addresses are remote");
	CHECK(kind6("::2") == NETADDR_REMOTE && kind6("::127.0.0.1") == NETADDR_REMOTE &&
		      kind6("fe80::1") == NETADDR_REMOTE && kind6("2001:db8::1") == NETADDR_REMOTE &&
		      kind6("ff02::1") == NETADDR_REMOTE,
	      "::2, IPv4-compatible ::127.0.0.1, link-local, global and multicast IPv6 are remote");

	struct sockaddr_in s4 = v4("127.0.0.1", 80);
	struct sockaddr_in6 s6 = v6("::1", 8080, 0);
	CHECK(netaddr_classify(&s4, sizeof s4 - 1) == NETADDR_OTHER &&
		      netaddr_classify(&s4, 0) == NETADDR_OTHER &&
		      netaddr_classify(&s4, 1) == NETADDR_OTHER,
	      "an IPv4 address shorter than a sockaddr_in is neither (the kernel says EINVAL)");
	CHECK(netaddr_classify(&s6, 24) == NETADDR_LOCAL &&
		      netaddr_classify(&s6, 23) == NETADDR_OTHER,
	      "IPv6: 24 bytes (no scope id) suffice, 23 do not");
	struct sockaddr_un su;
	memset(&su, 0, sizeof su);
	su.sun_family = AF_UNIX;
	strcpy(su.sun_path, "/run/x");
	CHECK(netaddr_classify(&su, sizeof su) == NETADDR_OTHER,
	      "a unix socket address is neither");
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	CHECK(netaddr_classify(&unspec, sizeof unspec) == NETADDR_OTHER, "AF_UNSPEC (a disconnect) is neither");

	CHECK(text_is(&s4, sizeof s4, "127.0.0.1:80"), "127.0.0.1:80");
	CHECK(text_is(&s6, sizeof s6, "[::1]:8080"), "[::1]:8080");
	struct sockaddr_in a = v4("93.184.216.34", 443);
	CHECK(text_is(&a, sizeof a, "93.184.216.34:443"), "93.184.216.34:443");
	struct sockaddr_in z = v4("0.0.0.0", 0);
	CHECK(text_is(&z, sizeof z, "0.0.0.0:0"), "port 0");
	struct sockaddr_in m = v4("255.255.255.255", 65535);
	CHECK(text_is(&m, sizeof m, "255.255.255.255:65535"), "the longest IPv4 text");
	struct sockaddr_in6 mapped = v6("::ffff:192.0.2.1", 25, 0);
	CHECK(text_is(&mapped, sizeof mapped, "[::ffff:192.0.2.1]:25"), "IPv4-mapped: [::ffff:192.0.2.1]:25");
	struct sockaddr_in6 scoped = v6("fe80::1", 22, 2);
	CHECK(text_is(&scoped, sizeof scoped, "[fe80::1%2]:22"), "a scope id: [fe80::1%%2]:22");
	CHECK(text_is(&scoped, 24, "[fe80::1]:22"), "a scope id past the caller's 24 bytes is not read");
	struct sockaddr_in6 longest = v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, 4294967295u);
	CHECK(text_is(&longest, sizeof longest, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%4294967295]:65535"),
	      "a long IPv6 text, with the largest scope id and port");

	char small[8];
	memset(small, 'x', sizeof small);
	CHECK(!netaddr_format(&a, sizeof a, small, sizeof small) && small[0] == '\0',
	      "too small a buffer: false, the empty string, nothing past it written");
	memset(small, 'x', sizeof small);
	CHECK(!netaddr_format(&a, sizeof a, small, 0) && small[0] == 'x',
	      "a buffer of size 0 is not touched");
	char buf[NETADDR_TEXT] = "junk";
	CHECK(!netaddr_format(&su, sizeof su, buf, sizeof buf) && buf[0] == '\0',
	      "a unix address has no text");
	CHECK(!netaddr_format(&s4, 3, buf, sizeof buf) && buf[0] == '\0',
	      "a cut address has no text");

	/* The bytes come from a replica's memory: one byte off alignment. */
	unsigned char raw[1 + sizeof(struct sockaddr_in6)];
	memcpy(raw + 1, &mapped, sizeof mapped);
	CHECK(netaddr_classify(raw + 1, sizeof mapped) == NETADDR_REMOTE &&
		      text_is(raw + 1, sizeof mapped, "[::ffff:192.0.2.1]:25"),
	      "an unaligned address is read safely (UBSan)");
	return tap_done();
}
