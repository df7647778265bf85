/*
 * nd_mismatch: one replica makes a different random call from the others, for
 * the virtualization tests (tests/diehard_virtualize.bats): diehard reports a
 * "call divergence" naming that replica.
 *
 *   nd_mismatch LOCKDIR [early|late|clock]
 *
 * The replicas race for mkdir(LOCKDIR) (atomic: exactly one wins).  The winner
 * writes its pid to LOCKDIR/pid and calls getrandom for 8 bytes; the others
 * call it for 16.  With "early" the others wait 0.5 s first, so the winner's
 * call comes first; with "late" the winner waits.  Nobody prints the bytes:
 * every replica prints "done" and exits 0, so the output agrees.  With
 * "clock" the winner reads CLOCK_REALTIME where the others read
 * CLOCK_MONOTONIC (a different clock id: a difference seen in the counts at
 * the end), instead of calling getrandom.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "nd_mismatch: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void pause_half_second(void)
{
	struct timespec d = {0, 500 * 1000 * 1000};
	while (nanosleep(&d, &d) != 0)
		if (errno != EINTR)
			die("nanosleep");
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 ||
	    (argc == 3 && strcmp(argv[2], "early") != 0 && strcmp(argv[2], "late") != 0 && strcmp(argv[2], "clock") != 0)) {
		fprintf(stderr, "usage: nd_mismatch LOCKDIR [early|late|clock]\n");
		return 2;
	}
	const char *when = argc == 3 ? argv[2] : "";
	int winner = 0;
	if (mkdir(argv[1], 0700) == 0)
		winner = 1;
	else if (errno != EEXIST)
		die(argv[1]);

	if (winner) {
		char path[4096];
		if (snprintf(path, sizeof path, "%s/pid", argv[1]) >= (int)sizeof path) {
			fprintf(stderr, "nd_mismatch: lock path too long\n");
			return 1;
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			die(path);
		if (dprintf(fd, "%s\n", getenv("DIEHARD_SEED") ? getenv("DIEHARD_SEED") : "?") < 0)
			die(path);
		if (close(fd) != 0)
			die(path);
	}
	if ((winner && strcmp(when, "late") == 0) || (!winner && strcmp(when, "early") == 0))
		pause_half_second();

	if (strcmp(when, "clock") == 0) {
		struct timespec ts;
		if (clock_gettime(winner ? CLOCK_REALTIME : CLOCK_MONOTONIC, &ts) != 0)
			die("clock_gettime");
		printf("done\n");
		if (fflush(stdout) != 0)
			die("stdout");
		return 0;
	}
	unsigned char buf[16];
	size_t n = winner ? 8 : 16;
	ssize_t r;
	do
		r = getrandom(buf, n, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		die("getrandom");
	if ((size_t)r != n) {
		fprintf(stderr, "nd_mismatch: getrandom gave %zd bytes of %zu\n", r, n);
		return 1;
	}
	printf("done\n");
	if (fflush(stdout) != 0)
		die("stdout");
	return 0;
}
