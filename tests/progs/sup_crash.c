/*
 * sup_crash: prints one line, flushes it, then dies.
 *
 *   sup_crash segv     writes through a null pointer (a real SIGSEGV)
 *   sup_crash SIGNUM   raises signal SIGNUM (default action restored first)
 *   sup_crash exit N   exits with status N
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sup_crash segv | SIGNUM | exit N\n");
		return 2;
	}
	printf("about to stop: %s\n", argv[1]);
	fflush(stdout);
	if (strcmp(argv[1], "segv") == 0) {
		volatile int *volatile null = NULL;
		*null = 42;
		return 0; /* not reached */
	}
	if (strcmp(argv[1], "exit") == 0)
		return argc > 2 ? atoi(argv[2]) : 0;
	int sig = atoi(argv[1]);
	signal(sig, SIG_DFL);
	raise(sig);
	return 0; /* not reached for a terminating signal */
}
