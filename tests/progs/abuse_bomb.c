/* abuse_bomb — a replica that takes more than its share (tests/abuse_limits.bats).
 *
 *   abuse_bomb fork [DIR]       a fork bomb: every process forks two more, down
 *                               to a depth of 10 (2047 processes at most, should
 *                               every cap fail), then waits forever; a fork
 *                               refused (EAGAIN) creates DIR/eagain and is tried
 *                               again every 10 ms. Never exits.
 *   abuse_bomb tasks N          needs N processes at once: forks N children that
 *                               wait, then says "started N" and ends them (0); a
 *                               fork refused: "abuse_bomb: fork: ..." on stderr,
 *                               exit 1.
 *   abuse_bomb memory MIB       a memory hog: mallocs MIB blocks of 1 MiB and
 *                               writes every byte, then says "allocated MIB MiB"
 *                               (0); malloc refused: "abuse_bomb: out of memory"
 *                               on stderr, exit 1.
 *   abuse_bomb wait             waits forever (a daemon left behind).
 * Every process of it is named dh_bomb (comm), so that a test can look for
 * what is left of it; further arguments are ignored (a test's own mark, so
 * that it finds its processes and no one else's). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 10

static void nap_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&t, NULL);
}

/* Forks until it works, marking each refusal. */
static pid_t fork_hard(const char *dir)
{
	for (;;) {
		pid_t pid = fork();
		if (pid >= 0)
			return pid;
		if (errno == EAGAIN && dir != NULL) {
			char path[4096];
			snprintf(path, sizeof path, "%s/eagain", dir);
			int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
			if (fd >= 0)
				close(fd);
		}
		nap_ms(10);
	}
}

static _Noreturn void bomb(const char *dir)
{
	for (int depth = 0; depth < DEPTH; depth++) {
		/* Two children; the second goes on down, so does this one. */
		if (fork_hard(dir) == 0)
			continue;
		if (fork_hard(dir) == 0)
			continue;
		break;
	}
	for (;;)
		pause();
}

static int tasks(long n)
{
	pid_t *kids = calloc((size_t)n, sizeof *kids);
	if (kids == NULL) {
		fprintf(stderr, "abuse_bomb: out of memory\n");
		return 1;
	}
	long made = 0;
	int rc = 0;
	for (; made < n; made++) {
		pid_t pid = fork();
		if (pid == 0) {
			for (;;)
				pause();
		}
		if (pid < 0) {
			fprintf(stderr, "abuse_bomb: fork: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		kids[made] = pid;
	}
	if (rc == 0)
		printf("started %ld\n", n);
	for (long i = 0; i < made; i++)
		kill(kids[i], SIGKILL);
	for (long i = 0; i < made; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	return rc;
}

static int memory(long mib)
{
	for (long i = 0; i < mib; i++) {
		char *p = malloc(1 << 20);
		if (p == NULL) {
			fprintf(stderr, "abuse_bomb: out of memory\n");
			return 1;
		}
		memset(p, (int)(i % 255) + 1, 1 << 20);
	}
	printf("allocated %ld MiB\n", mib);
	return 0;
}

int main(int argc, char **argv)
{
	prctl(PR_SET_NAME, "dh_bomb", 0, 0, 0);
	if (argc >= 2 && strcmp(argv[1], "fork") == 0)
		bomb(argc >= 3 ? argv[2] : NULL);
	if (argc >= 3 && strcmp(argv[1], "tasks") == 0)
		return tasks(atol(argv[2]));
	if (argc >= 3 && strcmp(argv[1], "memory") == 0)
		return memory(atol(argv[2]));
	if (argc >= 2 && strcmp(argv[1], "wait") == 0)
		for (;;)
			pause();
	fprintf(stderr, "usage: abuse_bomb fork [DIR] | tasks N | memory MIB | wait [MARK]\n");
	return 2;
}
