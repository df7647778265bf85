/* Unit tests of remote.c's /proc readers against the process itself: the
 * start time (field 22 of /proc/PID/stat), the state letter and the parent
 * are read right even when the process's name holds spaces and ')' (the
 * name is the one field that may); a process gone reads as gone; its
 * family (thread group and parent) comes from /proc/PID/status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote.h"
#include "tap.h"

/* Field 22 of /proc/self/stat, split by hand from the last ')'. */
static unsigned long long start_by_hand(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	if (f == NULL || fgets(buf, sizeof buf, f) == NULL)
		return 0;
	fclose(f);
	char *p = strrchr(buf, ')') + 2; /* field 3 */
	for (int field = 3; field < 22; field++)
		p = strchr(p, ' ') + 1;
	return strtoull(p, NULL, 10);
}

int main(void)
{
	const char *const names[] = { "plain", "a) b c", ") ) )", "x (y) z" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		prctl(PR_SET_NAME, names[i], 0, 0, 0);
		char state = '?';
		unsigned long long want = start_by_hand(), got = remote_start_time(getpid(), &state);
		CHECK(want != 0 && got == want && state == 'R', "name '%s': start time %llu (want %llu), state %c", names[i],
		      got, want, state);
		CHECK(remote_start_time(getpid(), NULL) == want, "name '%s': the start time without the state", names[i]);
		char s;
		pid_t ppid;
		CHECK(remote_stat(getpid(), &s, &ppid) && s == 'R' && ppid == getppid(), "name '%s': state and parent",
		      names[i]);
	}
	pid_t tgid, ppid;
	CHECK(remote_family(getpid(), &tgid, &ppid) && tgid == getpid() && ppid == getppid(), "thread group and parent");
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	waitpid(c, NULL, 0);
	char s;
	CHECK(remote_start_time(c, &s) == 0 && !remote_stat(c, &s, &ppid) && !remote_family(c, &tgid, &ppid),
	      "a process gone reads as gone");
	return tap_done();
}
