/*
 * nd_fork_signals: forks while a periodic timer's signal keeps coming, for
 * tests/diehard_virtualize.bats.
 *
 *   nd_fork_signals N USEC [restart]
 *
 * A SIGALRM every USEC microseconds, its handler doing nothing, installed
 * with SA_RESTART only when "restart" is given. The program forks N
 * children one after another; each draws 4 bytes by getrandom(2) and sends
 * them to the parent, which prints "I <hex>" per child. fork never fails
 * with EINTR natively: if it does, the program says "fork: EINTR" and
 * exits 2. Under diehard each fork is a notified call: a signal while it
 * waits must neither fail it nor make it count twice (every later child
 * would then draw another process's bytes in that replica). Exits 1 on any
 * other error.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "nd_fork_signals: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void tick(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: nd_fork_signals N USEC [restart]\n");
		return 1;
	}
	int n = atoi(argv[1]);
	long usec = atol(argv[2]);
	struct sigaction sa = { .sa_handler = tick, .sa_flags = argc > 3 && strcmp(argv[3], "restart") == 0 ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	struct itimerval it = { { 0, usec }, { 0, usec } };
	if (sigaction(SIGALRM, &sa, NULL) != 0 || setitimer(ITIMER_REAL, &it, NULL) != 0)
		die("timer");
	for (int i = 0; i < n; i++) {
		int p[2];
		if (pipe(p) != 0)
			die("pipe");
		pid_t c = fork();
		if (c < 0 && errno == EINTR) {
			fprintf(stderr, "fork: EINTR\n");
			return 2;
		}
		if (c < 0)
			die("fork");
		if (c == 0) { /* the timer is not inherited */
			unsigned char b[4];
			if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b || write(p[1], b, sizeof b) != (ssize_t)sizeof b)
				_exit(1);
			_exit(0);
		}
		close(p[1]);
		unsigned char b[4];
		ssize_t r;
		while ((r = read(p[0], b, sizeof b)) < 0 && errno == EINTR)
			;
		if (r != (ssize_t)sizeof b)
			die("read");
		close(p[0]);
		int st;
		while (waitpid(c, &st, 0) < 0)
			if (errno != EINTR)
				die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("a child failed");
		printf("%d %02x%02x%02x%02x\n", i, b[0], b[1], b[2], b[3]);
	}
	return 0;
}
