/*
 * leader_exit: a TCP server whose main thread ends (pthread_exit) while a
 * thread of it serves on, for tests/daemons.bats: its process is a zombie
 * leader in /proc, alive, and its replies must end when it closes them.
 *
 *   leader_exit PORT
 *
 * Each connection gets "hello\n", then the server closes it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int lfd = -1;

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			continue;
		static const char hello[] = "hello\n";
		if (write(c, hello, sizeof hello - 1) < 0)
			perror("write");
		close(c);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: leader_exit PORT\n");
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 64) != 0) {
		perror("leader_exit: listen");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, serve, NULL) != 0) {
		fprintf(stderr, "leader_exit: pthread_create failed\n");
		return 1;
	}
	pthread_exit(NULL);
}
