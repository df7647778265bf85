/*
 * outbound_client: the client side of bench/outbound, run plain and under
 * diehard: request/response round trips to a server outside.
 *
 *   outbound_client PORT rtt N    one connection to 127.0.0.1:PORT, N round
 *                                 trips ("ECHO n\n", its line back)
 *   outbound_client PORT conn N   N connections, one round trip each
 *   outbound_client PORT udp N    N datagram round trips on one connected
 *                                 UDP socket (the server echoes each)
 *   outbound_client PORT echo 0   that UDP echo server, on 127.0.0.1:PORT
 *
 * Prints "N SECONDS" (the loop's own time, from the first connect); a
 * wrong reply or any failure: one line on stderr, exit 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;

static void die(const char *what)
{
	fprintf(stderr, "outbound_client: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
		die("connect");
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* One request, its whole line back. */
static void round_trip(int fd, long i)
{
	char req[64], want[64], got[64];
	int n = snprintf(req, sizeof req, "ECHO %ld\n", i);
	int w = snprintf(want, sizeof want, "%ld\n", i);
	if (write(fd, req, (size_t)n) != n)
		die("write");
	int have = 0;
	while (have < w) {
		ssize_t r = read(fd, got + have, (size_t)(w - have));
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			die("read");
		}
		have += (int)r;
	}
	if (memcmp(got, want, (size_t)w) != 0) {
		fprintf(stderr, "outbound_client: round trip %ld: a wrong reply\n", i);
		exit(1);
	}
}

static void udp_echo(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
		die("bind");
	fprintf(stderr, "listening\n");
	for (;;) {
		char buf[2048];
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		if (n >= 0)
			(void)sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
}

static void udp_round_trips(long n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
		die("udp connect");
	for (long i = 0; i < n; i++) {
		char req[32], got[32];
		int len = snprintf(req, sizeof req, "%ld", i);
		if (send(fd, req, (size_t)len, 0) != len)
			die("send");
		ssize_t r = recv(fd, got, sizeof got, 0);
		if (r != len || memcmp(req, got, (size_t)len) != 0) {
			fprintf(stderr, "outbound_client: datagram %ld: a wrong echo\n", i);
			exit(1);
		}
	}
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[2], "rtt") != 0 && strcmp(argv[2], "conn") != 0 &&
			  strcmp(argv[2], "udp") != 0 && strcmp(argv[2], "echo") != 0)) {
		fprintf(stderr, "usage: outbound_client PORT rtt|conn|udp|echo N\n");
		return 2;
	}
	port = atoi(argv[1]);
	long n = atol(argv[3]);
	if (strcmp(argv[2], "echo") == 0)
		udp_echo();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (strcmp(argv[2], "udp") == 0) {
		udp_round_trips(n);
	} else if (strcmp(argv[2], "rtt") == 0) {
		int fd = dial();
		for (long i = 0; i < n; i++)
			round_trip(fd, i);
		close(fd);
	} else {
		for (long i = 0; i < n; i++) {
			int fd = dial();
			round_trip(fd, i);
			close(fd);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%ld %.6f\n", n, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
