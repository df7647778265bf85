/* Unit tests of remote.c's /proc readers against the process itself: the
 * start time (field 22 of /proc/PID/stat), the state letter and the parent
 * are read right even when the process's name holds spaces and ')' (the
 * name is the one field that may); a process gone reads as gone; its
 * family (thread group and parent) comes from /proc/PID/status; it listens
 * (remote_tcp_roles) while it holds a TCP socket that listens, IPv4 or
 * IPv6, 80 of them too, not for a socket only bound, connected or closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

static unsigned roles(pid_t pid)
{
	return remote_tcp_roles(pid);
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
	CHECK(roles(getpid()) == 0, "no socket: no role");
	int v4 = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(v4 >= 0 && bind(v4, (struct sockaddr *)&a, sizeof a) == 0, "an IPv4 socket bound");
	CHECK(roles(getpid()) == 0, "a socket bound but not listening: no role");
	CHECK(listen(v4, 4) == 0 && roles(getpid()) == REMOTE_LISTENS, "an IPv4 socket that listens: listens");
	socklen_t al = sizeof a;
	int out = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(getsockname(v4, (struct sockaddr *)&a, &al) == 0 && out >= 0 &&
	      connect(out, (struct sockaddr *)&a, sizeof a) == 0, "a connection to it");
	CHECK(roles(getpid()) == REMOTE_LISTENS, "a connection made, not accepted: listens only");
	int in = accept(v4, NULL, NULL);
	CHECK(in >= 0 && roles(getpid()) == REMOTE_LISTENS, "a connection accepted: listens");
	int out2 = socket(AF_INET, SOCK_STREAM, 0);
	int in2 = out2 >= 0 && connect(out2, (struct sockaddr *)&a, sizeof a) == 0 ? accept(v4, NULL, NULL) : -1;
	CHECK(in2 >= 0 && roles(getpid()) == REMOTE_LISTENS, "two accepted: listens");
	close(in2);
	close(out2);
	close(in);
	CHECK(roles(getpid()) == REMOTE_LISTENS, "the accepted ones closed: listens only");
	close(v4);
	CHECK(roles(getpid()) == 0, "its listener closed, a connection left: no role");
	close(out);
	int many[80];
	for (int i = 0; i < 80; i++) {
		many[i] = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (many[i] < 0 || bind(many[i], (struct sockaddr *)&any, sizeof any) != 0 || listen(many[i], 1) != 0)
			many[i] = -1;
	}
	CHECK(roles(getpid()) == REMOTE_LISTENS, "80 listeners: listens");
	for (int i = 0; i < 80; i++)
		if (many[i] >= 0)
			close(many[i]);
	CHECK(roles(getpid()) == 0, "all 80 closed: no role");
	int v6 = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	if (v6 >= 0 && bind(v6, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(v6, 4) == 0)
		CHECK(roles(getpid()) == REMOTE_LISTENS, "an IPv6 socket that listens: listens");
	if (v6 >= 0)
		close(v6);
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	waitpid(c, NULL, 0);
	char s;
	CHECK(remote_start_time(c, &s) == 0 && !remote_stat(c, &s, &ppid) && !remote_family(c, &tgid, &ppid) &&
	      roles(c) == REMOTE_UNREADABLE,
	      "a process gone reads as gone");
	return tap_done();
}
