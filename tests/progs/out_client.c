/*
 * out_client: a C client of an outbound connection, as a program under
 * diehard makes one (tests/outbound.bats).
 *
 *   out_client HOST PORT LINE...
 *
 * Connects to HOST:PORT (numeric, IPv4 or IPv6) with a non-blocking
 * connect and poll, prints "connect: EINPROGRESS" or "connect: done" as the
 * call answered, then the socket's peer as getpeername names it, sends each
 * LINE with a newline, half-closes its side and prints everything the peer
 * sends until its end. A failed connect prints the errno's name and exits 3;
 * any other failure exits 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENETUNREACH: return "ENETUNREACH";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	default: return strerror(e);
	}
}

static void die(const char *what)
{
	fprintf(stderr, "out_client: %s: %s\n", what, strerror(errno));
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: out_client HOST PORT LINE...\n");
		return 2;
	}
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t len;
	int port = atoi(argv[2]);
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, argv[1], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((unsigned short)port);
		len = sizeof *s4;
	} else if (inet_pton(AF_INET6, argv[1], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((unsigned short)port);
		len = sizeof *s6;
	} else {
		fprintf(stderr, "out_client: not a numeric address: %s\n", argv[1]);
		return 2;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&ss, len) == 0) {
		printf("connect: done\n");
	} else if (errno == EINPROGRESS) {
		printf("connect: EINPROGRESS\n");
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 30000) != 1)
			die("poll");
		int err = 0;
		socklen_t el = sizeof err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
			die("getsockopt");
		if (err != 0) {
			printf("connect: %s\n", errname(err));
			return 3;
		}
	} else {
		printf("connect: %s\n", errname(errno));
		return 3;
	}
	struct sockaddr_storage peer;
	socklen_t pl = sizeof peer;
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
		die("getpeername");
	char host[INET6_ADDRSTRLEN];
	if (peer.ss_family == AF_INET)
		printf("peer %s:%u\n", inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, host, sizeof host),
		       ntohs(((struct sockaddr_in *)&peer)->sin_port));
	else
		printf("peer [%s]:%u\n",
		       inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, host, sizeof host),
		       ntohs(((struct sockaddr_in6 *)&peer)->sin6_port));
	fflush(stdout);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
		die("fcntl");
	for (int i = 3; i < argc; i++) {
		size_t n = strlen(argv[i]);
		if (write(fd, argv[i], n) != (ssize_t)n || write(fd, "\n", 1) != 1)
			die("write");
	}
	if (shutdown(fd, SHUT_WR) != 0)
		die("shutdown");
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			die("fwrite");
	if (n < 0)
		die("read");
	return 0;
}
