/*
 * abuse_urandom: a replica that keeps COUNT random devices open.
 *
 *   abuse_urandom COUNT   opens /dev/urandom COUNT times, keeping every fd,
 *                         reads 16 bytes from each, then 64 KiB from the
 *                         first (more than a page); prints
 *                         "opened COUNT, fnv HASH, pipe SIZE" where SIZE is
 *                         the first fd's pipe size (-1: not a pipe, i.e. the
 *                         real device) and HASH covers every byte read.
 *                         Exit 0, or 1 with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* read(2) until n bytes or an error. */
static int read_all(int fd, unsigned char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 1000;
	int *fds = calloc((size_t)count, sizeof *fds);
	static unsigned char big[65536];
	if (count < 1 || fds == NULL)
		return 1;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < count; i++) {
		fds[i] = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			fprintf(stderr, "abuse_urandom: open %d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	for (int i = 0; i < count; i++) {
		unsigned char b[16];
		if (read_all(fds[i], b, sizeof b) != 0) {
			fprintf(stderr, "abuse_urandom: read %d: %s\n", i, strerror(errno));
			return 1;
		}
		h = fnv(h, b, sizeof b);
	}
	if (read_all(fds[0], big, sizeof big) != 0) {
		fprintf(stderr, "abuse_urandom: big read: %s\n", strerror(errno));
		return 1;
	}
	h = fnv(h, big, sizeof big);
	printf("opened %d, fnv %016llx, pipe %d\n", count, (unsigned long long)h, fcntl(fds[0], F_GETPIPE_SZ));
	return 0;
}
