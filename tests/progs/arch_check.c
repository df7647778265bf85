/* arch_check.c — Archipelago mode's checks (tests/archipelago.bats): every
 * object must read back what was written, however its pages were compacted
 * and restored, and overflows into the sea around an object must not touch
 * any other object.
 *
 *   arch_check churn N     N live objects of 1-3000 bytes, rewritten and
 *                          checked in random order over 4 passes, half of
 *                          them replaced on each
 *   arch_check overflow    1000 objects of 100 bytes; 100 of them overrun by
 *                          200 bytes and 20 to the end of the page after
 *                          theirs; every other object checked intact
 *   arch_check grow        1000 objects of 100 bytes written 8 bytes past
 *                          their end, then realloc'd to 300: the 108 bytes
 *                          move with them
 *   arch_check dangling    a freed object read back at once, and
 *                          realloc'd: its bytes
 *   arch_check threads     churn 3000 in each of 4 threads
 *   arch_check fork        churn 2000 in a child, the parent's objects
 *                          checked in both
 *   arch_check kernel FILE small objects handed to the kernel when cold
 *                          (2000 other objects made since they were last
 *                          touched): FILE's name to open, stat and fopen,
 *                          read and readv buffers, a write buffer, epoll's
 *                          array, exec's arguments; FILE must hold
 *                          "0123456789"; ends by exec'ing /bin/echo
 *   arch_check cancel      threads blocked in readv, epoll_wait, accept
 *                          and recvmsg (calls libdiehard makes itself,
 *                          kernel.c) are cancelled by pthread_cancel
 * Prints "ok" at the end; any mismatch prints where and exits 1. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

struct obj {
	unsigned char *p;
	size_t n;
	uint32_t tag;
};

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static unsigned char byte_of(uint32_t tag, size_t i)
{
	return (unsigned char)((tag * 2654435761u) >> 24 ^ (uint32_t)i * 31u);
}

static void make(struct obj *o, uint64_t *s, uint32_t tag)
{
	o->n = 1 + (size_t)(next(s) % 3000);
	o->p = malloc(o->n);
	if (o->p == NULL) {
		perror("malloc");
		exit(2);
	}
	o->tag = tag;
	for (size_t i = 0; i < o->n; i++)
		o->p[i] = byte_of(tag, i);
}

static int check(const struct obj *o, const char *where)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->p[i] != byte_of(o->tag, i)) {
			fprintf(stderr, "%s: object %u byte %zu of %zu: %02x, not %02x\n", where, o->tag, i, o->n,
				o->p[i], byte_of(o->tag, i));
			return 1;
		}
	return 0;
}

static int churn(size_t n, uint64_t seed)
{
	struct obj *v = calloc(n, sizeof *v);
	if (v == NULL)
		return 2;
	uint64_t s = seed | 1;
	uint32_t tag = (uint32_t)seed << 20;
	for (size_t i = 0; i < n; i++)
		make(&v[i], &s, tag++);
	for (int pass = 0; pass < 4; pass++) {
		for (size_t k = 0; k < n; k++) {
			struct obj *o = &v[next(&s) % n];
			if (check(o, "churn"))
				return 1;
			if (next(&s) & 1) {
				free(o->p);
				make(o, &s, tag++);
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (check(&v[i], "final"))
			return 1;
		free(v[i].p);
	}
	free(v);
	return 0;
}

/* 2000 objects made and written: with a hot space of 64 pages every
 * object not touched since is cold. Kept live (leaked) so they stay. */
static void cool(void)
{
	for (int i = 0; i < 2000; i++) {
		void *q = malloc(100);
		if (q == NULL)
			exit(2);
		memset(q, 1, 100);
	}
}

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int kernel(const char *file)
{
	char *path = strdup(file), *mode = strdup("r");
	char *buf = malloc(100), *a = malloc(4), *b = malloc(6);
	struct stat *st = malloc(sizeof *st);
	struct iovec *iv = malloc(2 * sizeof *iv);
	struct epoll_event *ev = malloc(4 * sizeof *ev);
	static const char text[] = "kernel ok\n";
	char *msg = malloc(sizeof text);
	char **args = malloc(3 * sizeof *args);
	if (!path || !mode || !buf || !a || !b || !st || !iv || !ev || !msg || !args)
		return 2;
	memcpy(msg, text, sizeof text);
	iv[0] = (struct iovec){ a, 4 };
	iv[1] = (struct iovec){ b, 6 };
	args[0] = strdup("/bin/echo");
	args[1] = strdup("exec ok");
	args[2] = NULL;
	cool();
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail("open");
	cool();
	if (read(fd, buf, 100) != 10 || memcmp(buf, "0123456789", 10) != 0)
		return fail("read");
	cool();
	if (lseek(fd, 0, SEEK_SET) != 0 || readv(fd, iv, 2) != 10 || memcmp(a, "0123", 4) || memcmp(b, "456789", 6))
		return fail("readv");
	cool();
	if (stat(path, st) != 0 || st->st_size != 10)
		return fail("stat");
	cool();
	FILE *f = fopen(path, mode);
	if (f == NULL)
		return fail("fopen");
	fclose(f);
	cool();
	if (write(1, msg, sizeof text - 1) != (ssize_t)(sizeof text - 1))
		return fail("write");
	int p[2], ep = epoll_create1(0);
	if (ep < 0 || pipe(p) != 0 || write(p[1], "x", 1) != 1)
		return fail("pipe");
	struct epoll_event want = { .events = EPOLLIN, .data.u32 = 77 };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &want) != 0)
		return fail("epoll_ctl");
	cool();
	if (epoll_wait(ep, ev, 4, 1000) != 1 || ev[0].data.u32 != 77)
		return fail("epoll_wait");
	cool();
	fflush(stdout);
	execv(args[0], args);
	return fail("execv");
}

static int blocked_pipe[2];

static void *in_readv(void *arg)
{
	(void)arg;
	char b[4];
	struct iovec v = { b, sizeof b };
	(void)readv(blocked_pipe[0], &v, 1);
	return NULL;
}

static void *in_epoll_wait(void *arg)
{
	(void)arg;
	int ep = epoll_create1(0);
	struct epoll_event e = { .events = EPOLLIN }, out[2];
	if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, blocked_pipe[0], &e) == 0)
		(void)epoll_wait(ep, out, 2, -1);
	return NULL;
}

static void *in_accept(void *arg)
{
	(void)arg;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(s, 1) == 0)
		(void)accept(s, NULL, NULL);
	return NULL;
}

static void *in_recvmsg(void *arg)
{
	(void)arg;
	int sv[2];
	char b[4];
	struct iovec v = { b, sizeof b };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0)
		(void)recvmsg(sv[0], &m, 0);
	return NULL;
}

static int cancel(void)
{
	static void *(*const blocked[])(void *) = { in_readv, in_epoll_wait, in_accept, in_recvmsg };
	static const char *const names[] = { "readv", "epoll_wait", "accept", "recvmsg" };
	if (pipe(blocked_pipe) != 0)
		return 2;
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		void *r;
		if (pthread_create(&t, NULL, blocked[i], NULL) != 0)
			return 2;
		usleep(100000);
		if (pthread_cancel(t) != 0 || pthread_join(t, &r) != 0)
			return 2;
		if (r != PTHREAD_CANCELED) {
			printf("%s: not cancelled\n", names[i]);
			return 1;
		}
	}
	return 0;
}

static void *worker(void *arg)
{
	return (void *)(intptr_t)churn(3000, (uint64_t)(intptr_t)arg * 7919 + 1);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "churn") == 0) {
		if (churn(argc > 2 ? (size_t)atol(argv[2]) : 10000, 42))
			return 1;
	} else if (strcmp(argv[1], "overflow") == 0) {
		enum { N = 1000 };
		static struct obj v[N];
		uint64_t s = 7;
		for (uint32_t i = 0; i < N; i++) {
			v[i].n = 100;
			v[i].p = malloc(100);
			v[i].tag = i;
			if (v[i].p == NULL)
				return 2;
			for (size_t j = 0; j < 100; j++)
				v[i].p[j] = byte_of(i, j);
		}
		for (uint32_t i = 0; i < 120; i++) {
			unsigned char *volatile p = v[i * 7].p;
			/* The planted bugs: 200 bytes, or through the whole page
			 * after the object's, the sea Archipelago keeps on each
			 * side of every object. (A fixed 6000 bytes could reach
			 * the page after that, which may be another object's:
			 * one run in 150 failed so.) */
			size_t far = 200;
			if (i >= 100) {
				uintptr_t end = (uintptr_t)p + 100, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
				far = (size_t)((end + pg - 1) / pg * pg + pg - end);
			}
			for (size_t j = 100; j < 100 + far; j++)
				p[j] = (unsigned char)next(&s);
		}
		for (uint32_t i = 0; i < N; i++)
			if (i % 7 != 0 || i / 7 >= 120)
				if (check(&v[i], "overflow"))
					return 1;
	} else if (strcmp(argv[1], "grow") == 0) {
		for (uint32_t i = 0; i < 1000; i++) {
			unsigned char *volatile p = malloc(100);
			if (p == NULL)
				return 2;
			for (size_t j = 0; j < 108; j++) /* the planted bug: 8 bytes too far */
				p[j] = byte_of(i, j);
			struct obj o = { realloc(p, 300), 108, i };
			if (o.p == NULL)
				return 2;
			if (check(&o, "grow"))
				return 1;
			free(o.p);
		}
	} else if (strcmp(argv[1], "dangling") == 0) {
		unsigned char *volatile p = malloc(64);
		if (p == NULL)
			return 2;
		memset(p, 0x5a, 64);
		free(p);
		printf("read %02x\n", p[10]); /* the planted bug */
		unsigned char *q = realloc(p, 200); /* and a realloc through it */
		printf("realloc %02x\n", q != NULL ? q[10] : 0);
		free(q);
	} else if (strcmp(argv[1], "threads") == 0) {
		pthread_t t[4];
		for (intptr_t i = 0; i < 4; i++)
			if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
				return 2;
		for (int i = 0; i < 4; i++) {
			void *rc;
			pthread_join(t[i], &rc);
			if (rc != NULL)
				return 1;
		}
	} else if (strcmp(argv[1], "cancel") == 0) {
		if (cancel())
			return 1;
	} else if (strcmp(argv[1], "kernel") == 0 && argc > 2) {
		return kernel(argv[2]);
	} else if (strcmp(argv[1], "fork") == 0) {
		struct obj v[500];
		uint64_t s = 99;
		for (uint32_t i = 0; i < 500; i++)
			make(&v[i], &s, i);
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			for (int i = 0; i < 500; i++)
				if (check(&v[i], "child"))
					_exit(1);
			_exit(churn(2000, 5));
		}
		int st;
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
		for (int i = 0; i < 500; i++)
			if (check(&v[i], "parent"))
				return 1;
	} else {
		return 2;
	}
	puts("ok");
	return 0;
}
