/*
 * nd_tree_random: a tree of processes that draws random bytes, its
 * branches run in an order that differs between replicas, for
 * tests/diehard_virtualize.bats.
 *
 *   nd_tree_random
 *
 * The parent forks three workers and lets them run one after another in
 * an order picked from the address malloc returned, so under diehard's
 * randomized heap each replica runs its branches in another order (as a
 * server's processes per connection interleave with timing). Before it
 * forks, each worker starts and joins 0 to 3 threads, again by a heap
 * address (a runtime that starts threads on demand). Each worker then
 * makes two grandchildren: the first by fork, the second by a double fork
 * (its parent exits at once, and it draws only once reparented). Each
 * grandchild draws getrandom(2) bytes, as many as its place says (8 + 4 ×
 * worker + grandchild), and sends them to the parent, which prints one
 * line per grandchild, in place order:
 *   W G <hex>
 * Under diehard every replica must print the same six lines: the n-th
 * process (or thread) a process starts is matched with the n-th one the
 * same process starts in every other replica, whatever the order and
 * whatever pids the tasks get. Exits 1 on any error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
#define GRANDCHILDREN 2
#define MAX_BYTES (8 + 4 * WORKERS + GRANDCHILDREN)

static int out[WORKERS][GRANDCHILDREN][2]; /* a pipe per grandchild */
static int go[WORKERS][2];                 /* a worker's go byte */

static void die(const char *what)
{
	fprintf(stderr, "nd_tree_random: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *idle(void *arg)
{
	return arg;
}

/* A grandchild's draw: its bytes down its pipe. */
static void draw(int w, int g)
{
	unsigned char b[MAX_BYTES];
	size_t n = (size_t)(8 + 4 * w + g);
	if (getrandom(b, n, 0) != (ssize_t)n)
		die("getrandom");
	if (write(out[w][g][1], b, n) != (ssize_t)n)
		die("write");
	_exit(0);
}

/* Waits until the process's parent is no longer parent (reparented). */
static void orphaned_from(pid_t parent)
{
	struct timespec ms = { 0, 1000000 };
	for (int i = 0; getppid() == parent; i++) {
		if (i == 10000)
			die("never reparented");
		nanosleep(&ms, NULL);
	}
}

static void worker(int w, unsigned threads, int next)
{
	char c;
	if (read(go[w][0], &c, 1) != 1)
		die("read go");
	for (unsigned i = 0; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, idle, NULL) != 0 || pthread_join(t, NULL) != 0)
			die("thread");
	}
	pid_t a = fork();
	if (a < 0)
		die("fork");
	if (a == 0)
		draw(w, 0);
	pid_t mid = fork();
	if (mid < 0)
		die("fork");
	if (mid == 0) {
		pid_t me = getpid();
		pid_t b = fork();
		if (b < 0)
			die("fork");
		if (b == 0) {
			orphaned_from(me);
			draw(w, 1);
		}
		_exit(0);
	}
	int st;
	if (waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || waitpid(mid, &st, 0) != mid ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("a grandchild failed");
	/* The orphan is done once its bytes are in; then the next worker. */
	unsigned char b[MAX_BYTES];
	size_t n = (size_t)(8 + 4 * w + 1);
	if (read(out[w][1][0], b, n) != (ssize_t)n)
		die("read the orphan's bytes");
	if (write(out[w][1][1], b, n) != (ssize_t)n)
		die("put them back");
	if (next >= 0 && write(go[next][1], "g", 1) != 1)
		die("write go");
	_exit(0);
}

int main(void)
{
	void *p = malloc(64);
	if (p == NULL)
		die("malloc");
	uintptr_t bits = (uintptr_t)p >> 6;
	/* One of the six orders of the workers, and each one's threads. */
	int order[WORKERS] = { 0, 1, 2 };
	for (int i = WORKERS - 1; i > 0; i--) {
		int j = (int)(bits % (uintptr_t)(i + 1));
		bits /= (uintptr_t)(i + 1);
		int t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int w = 0; w < WORKERS; w++) {
		if (pipe(go[w]) != 0)
			die("pipe");
		for (int g = 0; g < GRANDCHILDREN; g++)
			if (pipe(out[w][g]) != 0)
				die("pipe");
	}
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++) {
		int at = 0;
		while (order[at] != w)
			at++;
		int next = at + 1 < WORKERS ? order[at + 1] : -1;
		unsigned threads = (unsigned)(bits >> (2 * w) & 3);
		if ((pids[w] = fork()) < 0)
			die("fork");
		if (pids[w] == 0)
			worker(w, threads, next);
	}
	if (write(go[order[0]][1], "g", 1) != 1)
		die("write go");
	for (int w = 0; w < WORKERS; w++) {
		int st;
		if (waitpid(pids[w], &st, 0) != pids[w] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("a worker failed");
	}
	for (int w = 0; w < WORKERS; w++)
		for (int g = 0; g < GRANDCHILDREN; g++) {
			unsigned char b[MAX_BYTES];
			size_t n = (size_t)(8 + 4 * w + g);
			if (read(out[w][g][0], b, n) != (ssize_t)n)
				die("read");
			printf("%d %d ", w, g);
			for (size_t i = 0; i < n; i++)
				printf("%02x", b[i]);
			printf("\n");
		}
	free(p);
	return 0;
}
