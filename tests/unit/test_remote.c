/* Unit tests of remote.c's /proc readers against the process itself: the
 * start time (field 22 of /proc/PID/stat), the state letter and the parent
 * are read right even when the process's name holds spaces and ')' (the
 * name is the one field that may); a process gone reads as gone; its
 * family (thread group and parent) comes from /proc/PID/status; its TCP
 * roles (remote_tcp_roles): it listens while it holds a TCP socket that
 * listens, IPv4 or IPv6, not for a socket only bound or closed; it has
 * accepted while it holds a connection on a listener's port (not the
 * client's end of it, nor once the listener is closed). */
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
	CHECK(remote_tcp_roles(getpid()) == 0, "no socket: no role");
	int v4 = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(v4 >= 0 && bind(v4, (struct sockaddr *)&a, sizeof a) == 0, "an IPv4 socket bound");
	CHECK(remote_tcp_roles(getpid()) == 0, "a socket bound but not listening: no role");
	CHECK(listen(v4, 4) == 0 && remote_tcp_roles(getpid()) == REMOTE_LISTENS, "an IPv4 socket that listens: listens");
	socklen_t al = sizeof a;
	int out = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(getsockname(v4, (struct sockaddr *)&a, &al) == 0 && out >= 0 &&
	      connect(out, (struct sockaddr *)&a, sizeof a) == 0, "a connection to it");
	CHECK(remote_tcp_roles(getpid()) == REMOTE_LISTENS, "a connection made, not accepted: listens only");
	int in = accept(v4, NULL, NULL);
	CHECK(in >= 0 && remote_tcp_roles(getpid()) == (REMOTE_LISTENS | REMOTE_ACCEPTED), "accepted: both roles");
	close(in);
	CHECK(remote_tcp_roles(getpid()) == REMOTE_LISTENS, "the accepted one closed: listens only");
	close(v4);
	CHECK(remote_tcp_roles(getpid()) == 0, "its listener closed, a connection left: no role");
	close(out);
	int v6 = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	if (v6 >= 0 && bind(v6, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(v6, 4) == 0)
		CHECK(remote_tcp_roles(getpid()) == REMOTE_LISTENS, "an IPv6 socket that listens: listens");
	if (v6 >= 0)
		close(v6);
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	waitpid(c, NULL, 0);
	char s;
	CHECK(remote_start_time(c, &s) == 0 && !remote_stat(c, &s, &ppid) && !remote_family(c, &tgid, &ppid) &&
	      remote_tcp_roles(c) == 0,
	      "a process gone reads as gone");
	return tap_done();
}
