/*
 * sup_signals: prints one line per SIGUSR1 it receives, so that a test can
 * count deliveries.
 *
 *   sup_signals DIR
 *
 * Installs its handlers, then creates DIR/ready.PID (each replica its own
 * file: the test waits until every replica is ready before it signals).
 * For the Nth SIGUSR1 it prints "usr1 N"; on SIGTERM it prints
 * "term after N" and exits 0. Gives up after 60 s (exit 3) so that a broken
 * test cannot leave it running.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t usr1, term, expired;

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

static void on_term(int sig)
{
	(void)sig;
	term = 1;
}

static void on_alarm(int sig)
{
	(void)sig;
	expired = 1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sup_signals DIR\n");
		return 2;
	}
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, &old);
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(60);

	char path[4096];
	snprintf(path, sizeof path, "%s/ready.%s", argv[1], getenv("DIEHARD_SEED") ? getenv("DIEHARD_SEED") : "?");
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	close(fd);

	int printed = 0;
	for (;;) {
		while (printed < usr1) {
			printf("usr1 %d\n", ++printed);
			fflush(stdout);
		}
		if (term) {
			printf("term after %d\n", printed);
			return 0;
		}
		if (expired) {
			printf("gave up after %d\n", printed);
			return 3;
		}
		sigsuspend(&old); /* signals arrive only here: no lost wake-up */
	}
}
