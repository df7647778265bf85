/*
 * lane_server: a one-thread TCP server whose wall-clock reads are an event
 * loop's (allocator/clockpage.h's lanes), for tests/tcp.bats.
 *
 *   lane_server PORT fork MODE
 *       answers 2 clients ("hi"), reading CLOCK_REALTIME 5 times after each
 *       (its thread gets a lane), then forks (MODE: libc fork(), raw the
 *       fork system call, _Fork): the child reads CLOCK_REALTIME 200 times
 *       and prints them (nanoseconds), while the parent reads 300 times;
 *       then the parent prints "done" and exits 0. A child that went
 *       on in its parent's lane (no fork handler ran in it) would interleave
 *       with it in one numbering, otherwise in each replica.
 *   lane_server PORT poison LOCKDIR
 *       the replica that creates LOCKDIR first writes, before it listens,
 *       200 entries it leads in each lane's keys of its own clock page (as
 *       a replica that knows the run's secret in DIEHARD_CLOCKS can; no
 *       lane is anyone's yet), and how many it led to LOCKDIR/led; then
 *       every replica answers each client with
 *       the CLOCK_REALTIME it read for it, to the microsecond, until a
 *       client sends "q".
 */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clockpage.h"

extern pid_t _Fork(void);

static long long now_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		exit(2);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int listen_on(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 16) != 0) {
		perror("lane_server: listen");
		exit(2);
	}
	fprintf(stderr, "listening on %d\n", port);
	return s;
}

/* A client's line in; reply out (NULL: the time to the microsecond).
 * false once a client sent "q". */
static int serve_one(int s, const char *reply)
{
	int c = accept(s, NULL, NULL);
	if (c < 0)
		exit(2);
	char buf[64], out[64];
	ssize_t k = read(c, buf, sizeof buf);
	if (k > 0 && buf[0] == 'q') {
		close(c);
		return 0;
	}
	if (reply == NULL) {
		long long t = now_ns();
		snprintf(out, sizeof out, "%lld.%06lld\n", t / 1000000000, t % 1000000000 / 1000);
		reply = out;
	}
	if (write(c, reply, strlen(reply)) < 0)
		exit(2);
	close(c);
	return 1;
}

static int forks(int port, const char *mode)
{
	int s = listen_on(port);
	for (int k = 0; k < 2; k++) {
		serve_one(s, "hi\n");
		volatile long long x = 0;
		for (int i = 0; i < 5; i++)
			x += now_ns();
	}
	fflush(stdout);
	pid_t p = strcmp(mode, "raw") == 0 ? (pid_t)syscall(SYS_fork) : strcmp(mode, "_Fork") == 0 ? _Fork() : fork();
	if (p < 0)
		return 2;
	/* The child's reads are a thread's first (fewer than 256: a thread
	 * past that is an event loop's, whose lagging reads go to the front,
	 * take.c), paired read by read; the parent's go on in its lane. */
	static long long v[300];
	int reads = p == 0 ? 200 : 300;
	for (int i = 0; i < reads; i++) {
		v[i] = now_ns();
		usleep(100);
	}
	if (p == 0) {
		for (int i = 0; i < reads; i++)
			printf("%lld\n", v[i]);
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	if (waitpid(p, &st, 0) != p || st != 0)
		return 3;
	printf("done\n");
	return 0;
}

/* A DIEHARD_CLOCKS setting (hex or decimal), or -1. */
static long long setting(const char *name, int base)
{
	const char *spec = getenv("DIEHARD_CLOCKS");
	size_t len = strlen(name);
	for (const char *p = spec; p != NULL && *p != '\0';) {
		if (strncmp(p, name, len) == 0 && p[len] == '=')
			return (long long)strtoull(p + len + 1, NULL, base);
		p = strchr(p, ',');
		p = p != NULL ? p + 1 : NULL;
	}
	return -1;
}

static int real(unsigned key, struct cp_value *out, void *arg)
{
	(void)arg;
	long long t = now_ns();
	key = cp_key_base(key);
	*out = (struct cp_value){ .a = t / 1000000000, .b = t % 1000000000 };
	if (key == CP_KEY_GETTIMEOFDAY)
		out->b /= 1000;
	if (key == CP_KEY_TIME)
		out->b = 0;
	return 0;
}

/* Leads 200 entries of every lane key in its own page. */
static void poison(const char *lockdir)
{
	long long fd = setting("fd", 10), dir = setting("dir", 10), slots = setting("slots", 10);
	struct {
		uint64_t magic;
		uint32_t slot, nslots;
	} head; /* a page's first words (its header) */
	if (fd < 0 || dir < 0 || slots <= 0 || slots > CP_MAX_SLOTS ||
	    pread((int)fd, &head, sizeof head, 0) != (ssize_t)sizeof head || head.slot >= slots) {
		fprintf(stderr, "lane_server: no clock pages\n");
		return;
	}
	size_t page = cp_page_size();
	char *base = mmap(NULL, (size_t)(slots + 1) * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct cp_view v = { .nslots = (unsigned)slots, .self = head.slot };
	for (long long i = 0; base != MAP_FAILED && i <= slots; i++) {
		char name[4];
		cp_page_name((unsigned)i, (unsigned)slots, name);
		int f = i == head.slot ? (int)fd : openat((int)dir, name, O_RDONLY | O_CLOEXEC);
		if (f < 0 || mmap(base + i * page, page, i == head.slot ? PROT_READ | PROT_WRITE : PROT_READ,
				  MAP_SHARED | MAP_FIXED, f, 0) == MAP_FAILED)
			exit(2);
		v.pages[i] = (struct cp_page *)(void *)(base + i * page);
	}
	v.secret = (uint64_t)setting("secret", 16);
	unsigned led = 0;
	for (unsigned j = 0; j < CP_LANES; j++)
		for (unsigned w = 0; w < CP_LANE_WALLS; w++)
			for (int r = 0; r < 200; r++) {
				struct cp_value out;
				uint64_t n;
				led += cp_read(&v, cp_lane_key(j, w), real, NULL, &out, &n) == CP_LED;
			}
	char path[4096];
	snprintf(path, sizeof path, "%s/led", lockdir);
	FILE *f = fopen(path, "w");
	if (f != NULL) {
		fprintf(f, "%u\n", led);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[2], "fork") == 0)
		return forks(atoi(argv[1]), argv[3]);
	if (argc == 4 && strcmp(argv[2], "poison") == 0) {
		if (mkdir(argv[3], 0700) == 0)
			poison(argv[3]);
		int s = listen_on(atoi(argv[1]));
		while (serve_one(s, NULL))
			;
		return 0;
	}
	fprintf(stderr, "usage: lane_server PORT fork libc|raw|_Fork | lane_server PORT poison LOCKDIR\n");
	return 2;
}
