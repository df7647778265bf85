/*
 * svc_notify: a small Type=notify daemon for diehard's service tests.
 *
 *   svc_notify [--odd DIR MODE] [--die-on-term]
 *
 * Speaks sd_notify(3) itself (a datagram to NOTIFY_SOCKET, '@' for an
 * abstract name): READY=1 with MAINPID= (its own pid, which diehard must
 * drop) and STATUS=serving, then echoes each line of stdin as "got LINE"
 * until end of input (exit 0). With WATCHDOG_USEC it sends WATCHDOG=1
 * every quarter interval, and only if WATCHDOG_PID is its own pid. SIGHUP:
 * RELOADING=1, STATUS=reloaded, READY=1. SIGTERM: STOPPING=1 then exit 0
 * (--die-on-term: dies of the signal instead).
 *
 * --odd DIR MODE: the first replica to create DIR (mkdir is atomic) is the
 * odd one: MODE noready never says READY=1; nowatchdog stops pinging after
 * its first ping; both: the others behave.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_hup, got_term;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
}

static void notify(const char *text)
{
	const char *e = getenv("NOTIFY_SOCKET");
	if (e == NULL)
		return;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = strlen(e);
	if (n == 0 || n >= sizeof a.sun_path)
		return;
	memcpy(a.sun_path, e, n);
	if (e[0] == '@')
		a.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (e[0] != '@'));
	if (sendto(fd, text, strlen(text), 0, (struct sockaddr *)&a, len) < 0)
		fprintf(stderr, "svc_notify: sendto %s: %s\n", e, strerror(errno));
	close(fd);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *odd_mode = NULL;
	int die_on_term = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--odd") == 0 && i + 2 < argc) {
			if (mkdir(argv[i + 1], 0700) == 0)
				odd_mode = argv[i + 2];
			i += 2;
		} else if (strcmp(argv[i], "--die-on-term") == 0) {
			die_on_term = 1;
		} else {
			fprintf(stderr, "usage: svc_notify [--odd DIR MODE] [--die-on-term]\n");
			return 2;
		}
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGHUP, &sa, NULL);
	if (!die_on_term)
		sigaction(SIGTERM, &sa, NULL);
	double interval = 0;
	const char *wu = getenv("WATCHDOG_USEC"), *wp = getenv("WATCHDOG_PID");
	if (wu != NULL && (wp == NULL || atol(wp) == (long)getpid()))
		interval = atof(wu) / 1e6 / 4;
	int noready = odd_mode != NULL && strcmp(odd_mode, "noready") == 0;
	int nowatchdog = odd_mode != NULL && strcmp(odd_mode, "nowatchdog") == 0;
	char msg[128];
	snprintf(msg, sizeof msg, "MAINPID=%ld\nSTATUS=serving\n%s", (long)getpid(), noready ? "" : "READY=1\n");
	notify(msg);
	int pings = 0;
	double next = now();
	char line[4096];
	size_t have = 0;
	for (;;) {
		if (got_term) {
			notify("STOPPING=1");
			return 0;
		}
		if (got_hup) {
			got_hup = 0;
			notify("RELOADING=1");
			notify(noready ? "STATUS=reloaded" : "STATUS=reloaded\nREADY=1");
		}
		if (interval > 0 && now() >= next && !(nowatchdog && pings >= 1)) {
			notify("WATCHDOG=1");
			pings++;
			next = now() + interval;
		}
		struct pollfd p = { .fd = 0, .events = POLLIN };
		int timeout = interval > 0 ? (int)(interval * 1000) + 1 : 200;
		int r = poll(&p, 1, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 1;
		if (r == 0)
			continue;
		ssize_t got = read(0, line + have, sizeof line - 1 - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return 0;
		have += (size_t)got;
		char *nl;
		while ((nl = memchr(line, '\n', have)) != NULL) {
			size_t n = (size_t)(nl - line) + 1;
			printf("got %.*s", (int)n, line);
			fflush(stdout);
			memmove(line, line + n, have - n);
			have -= n;
		}
		if (have == sizeof line - 1)
			have = 0;
	}
}
