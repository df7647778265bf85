/* stop_apart.c — a program whose replicas stop at different points.
 *
 * Prints "ready", waits for SIGTERM, then prints 0 to 3 lines, the number
 * taken from where malloc placed a block: on diehard's randomized heap each
 * replica (its own seed) usually prints another number of lines, as a
 * server's replicas stopped by SIGTERM end their output at points of their
 * own. Exits 0. (tests/diehard_signals.bats) */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_term };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) != 0)
		return 2;
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	puts("ready");
	if (fflush(stdout) != 0)
		return 2;
	while (!stop)
		sigsuspend(&old);
	void *p = malloc(100);
	if (p == NULL)
		return 2;
	unsigned n = (unsigned)(((uintptr_t)p >> 9) % 4);
	for (unsigned i = 0; i < n; i++) {
		printf("line %u\n", i);
		if (fflush(stdout) != 0)
			return 2;
	}
	free(p);
	return 0;
}
