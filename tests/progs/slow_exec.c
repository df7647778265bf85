/*
 * slow_exec: a stand-in for diehard-init that takes its time to become it,
 * for tests/diehard_sandbox.bats: a sandboxed replica's init is dumpable
 * from its exec until diehard-init makes it undumpable, and the command
 * must not run in between (spawn.c's gate). Installed as "diehard-init"
 * beside a copy of diehard, it sleeps SLOW_EXEC_MS milliseconds (default
 * 300), then execs SLOW_EXEC_TARGET (the real diehard-init) with the same
 * arguments, environment, descriptors and signal mask.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	(void)argc;
	const char *target = getenv("SLOW_EXEC_TARGET"), *ms = getenv("SLOW_EXEC_MS");
	if (target == NULL) {
		fputs("slow_exec: no SLOW_EXEC_TARGET\n", stderr);
		return 125;
	}
	long wait = ms != NULL ? strtol(ms, NULL, 10) : 300;
	struct timespec ts = { wait / 1000, (wait % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	execv(target, argv);
	fprintf(stderr, "slow_exec: %s: %s\n", target, strerror(errno));
	return 125;
}
