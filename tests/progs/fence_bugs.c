/* fence_bugs.c — planted bugs for fence mode (tests/fence.bats).
 *
 *   fence_bugs overflow N   overflows N objects of 100 bytes in turn, by a
 *                           loop writing 40 bytes past each end
 *   fence_bugs underflow N  writes the byte before each of N objects
 *   fence_bugs uaf-read     reads an object after freeing it
 *   fence_bugs uaf-write    writes an object after freeing it
 *   fence_bugs handler      catches its own deliberate NULL write with a
 *                           SIGSEGV handler, then frees and allocates
 *   fence_bugs threads      4 threads allocate, check and free 20000 objects
 *   fence_bugs fork         a child allocates and uses memory after fork
 * Each prints "done" when it gets to its end; make, overflow and underflow
 * are not inlined, so the reports name each frame. Contents are checked, so
 * a fence that moved or lost bytes fails. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned char sink;

__attribute__((noinline)) static unsigned char *make(size_t n, int v)
{
	unsigned char *p = malloc(n);
	if (p == NULL) {
		perror("malloc");
		exit(2);
	}
	memset(p, v, n);
	return p;
}

__attribute__((noinline)) static void overflow(int n)
{
	for (int k = 0; k < n; k++) {
		unsigned char *volatile p = make(100, k); /* volatile: stores before free stay */
		for (int i = 0; i < 140; i++) /* the planted bug: 40 bytes too far */
			p[i] = (unsigned char)i;
		free(p);
	}
}

__attribute__((noinline)) static void underflow(int n)
{
	for (int k = 0; k < n; k++) {
		unsigned char *volatile p = make(64, k);
		p[-1] = 1; /* the planted bug */
		free(p);
	}
}

static sigjmp_buf escape;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(escape, 1);
}

static int handler(void)
{
	if (signal(SIGSEGV, on_segv) == SIG_ERR)
		return 1;
	if (sigsetjmp(escape, 1) == 0) {
		*(volatile int *)NULL = 1; /* the program's own fault */
		return 1;
	}
	puts("caught");
	unsigned char *p = make(200, 7);
	for (int i = 0; i < 200; i++)
		if (p[i] != 7)
			return 1;
	free(p);
	return 0;
}

static void *worker(void *arg)
{
	int seed = (int)(long)arg;
	for (int i = 0; i < 20000; i++) {
		size_t n = 1 + (size_t)((i * 7919 + seed) % 300);
		unsigned char *p = make(n, i & 0xff);
		for (size_t j = 0; j < n; j++)
			if (p[j] != (i & 0xff))
				abort();
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int n = argc > 2 ? atoi(argv[2]) : 1;
	if (strcmp(argv[1], "overflow") == 0) {
		overflow(n);
	} else if (strcmp(argv[1], "underflow") == 0) {
		underflow(n);
	} else if (strcmp(argv[1], "uaf-read") == 0) {
		unsigned char *volatile p = make(48, 5);
		free(p);
		sink = p[10]; /* the planted bug */
		printf("read %d\n", sink);
	} else if (strcmp(argv[1], "uaf-write") == 0) {
		unsigned char *volatile p = make(48, 5);
		free(p);
		p[10] = 9; /* the planted bug */
	} else if (strcmp(argv[1], "handler") == 0) {
		if (handler() != 0)
			return 1;
	} else if (strcmp(argv[1], "threads") == 0) {
		pthread_t t[4];
		for (long i = 0; i < 4; i++)
			if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
				return 1;
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	} else if (strcmp(argv[1], "fork") == 0) {
		unsigned char *p = make(500, 3);
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			worker((void *)1);
			_exit(p[499] == 3 ? 0 : 1);
		}
		int status;
		if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			return 1;
		free(p);
	} else {
		return 2;
	}
	puts("done");
	return 0;
}
