/*
 * nd_fork_random: two child processes draw random bytes in an order that
 * differs between replicas, for tests/diehard_virtualize.bats.
 *
 *   nd_fork_random
 *
 * The parent forks children A and B, then lets one of them go first: which
 * one is a bit of the address malloc returned, so under diehard's
 * randomized heap the order differs from replica to replica (as the order
 * of a server's processes per connection does with timing). Each child
 * draws 16 bytes by getrandom(2) and 16 read from /dev/urandom, sends them
 * to the parent, and exits; the parent prints A's line, then B's:
 *   A <hex of 32 bytes>
 *   B <hex of 32 bytes>
 * Under diehard every replica must print the same two lines whichever
 * child went first (the n-th call of each process matches the n-th call of
 * the same process). Exits 1 on any error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "nd_fork_random: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A child: waits for the go byte on in, draws, writes 32 bytes to out,
 * then passes the go byte on to next (-1: none). */
static void child(int in, int out, int next)
{
	char go;
	if (read(in, &go, 1) != 1)
		die("read go");
	unsigned char b[32];
	if (getrandom(b, 16, 0) != 16)
		die("getrandom");
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, b + 16, 16) != 16)
		die("/dev/urandom");
	close(fd);
	if (write(out, b, sizeof b) != (ssize_t)sizeof b)
		die("write");
	if (next >= 0 && write(next, "g", 1) != 1)
		die("write go");
	_exit(0);
}

int main(void)
{
	void *p = malloc(64);
	if (p == NULL)
		die("malloc");
	int a_first = ((uintptr_t)p >> 6) & 1;
	int goa[2], gob[2], outa[2], outb[2];
	if (pipe(goa) != 0 || pipe(gob) != 0 || pipe(outa) != 0 || pipe(outb) != 0)
		die("pipe");
	pid_t a = fork();
	if (a < 0)
		die("fork");
	if (a == 0)
		child(goa[0], outa[1], a_first ? gob[1] : -1);
	pid_t b = fork();
	if (b < 0)
		die("fork");
	if (b == 0)
		child(gob[0], outb[1], a_first ? -1 : goa[1]);
	if (write(a_first ? goa[1] : gob[1], "g", 1) != 1)
		die("write go");
	unsigned char ra[32], rb[32];
	if (read(outa[0], ra, 32) != 32 || read(outb[0], rb, 32) != 32)
		die("read");
	int st;
	if (waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || waitpid(b, &st, 0) != b ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("a child failed");
	printf("A ");
	for (int i = 0; i < 32; i++)
		printf("%02x", ra[i]);
	printf("\nB ");
	for (int i = 0; i < 32; i++)
		printf("%02x", rb[i]);
	printf("\n");
	free(p);
	return 0;
}
