/*
 * abuse_control: a raw client of diehard's control socket, for the abuse
 * tests (tests/abuse_sockets.bats), run from inside a replica.
 *
 *   abuse_control PATH
 *
 * Connects to the unix socket PATH, sends one well-formed status request
 * (a frame: 4-byte big-endian length, then the ControlRequest
 * { version: 1, status {} } as protobuf bytes), reads until the server
 * closes (10 s at most) and prints what came as one line:
 *   got N bytes: TEXT      (bytes outside printable ASCII as '.')
 * so that an error's message, or a status's seeds and pids, can be read by
 * the test. "connect: ERROR" when it cannot connect. Exit 0 when it read
 * something, 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: abuse_control PATH\n");
		return 2;
	}
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(argv[1]) >= sizeof a.sun_path) {
		fprintf(stderr, "abuse_control: path too long\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		perror("abuse_control: socket");
		return 2;
	}
	struct timeval tv = { 10, 0 };
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
		perror("abuse_control: setsockopt");
		return 2;
	}
	if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
		printf("connect: %s\n", strerror(errno));
		return 1;
	}
	static const unsigned char request[] = { 0, 0, 0, 4, 0x08, 0x01, 0x12, 0x00 };
	/* A refused connection may be closed before this is sent: its
	 * error is still there to read. */
	(void)send(s, request, sizeof request, MSG_NOSIGNAL);
	static unsigned char buf[1 << 20];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(s, buf + got, sizeof buf - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (got += (size_t)n) == sizeof buf)
			break;
	}
	close(s);
	printf("got %zu bytes: ", got);
	for (size_t i = 0; i < got; i++)
		putchar(buf[i] >= 0x20 && buf[i] < 0x7f ? buf[i] : '.');
	putchar('\n');
	return got > 0 ? 0 : 1;
}
