/*
 * seeds: prints where the allocator puts objects and what fresh objects
 * contain, so that runs can be compared for reproducibility.
 *
 *   seeds          100 small mallocs of 12 sizes, then 6 never-written buffers
 *   seeds fork     allocates, forks; the child and then the parent each
 *                  allocate and print the same sequence of requests
 *
 * Output lines:
 *   addr I SIZE 0xADDRESS        absolute address of allocation I
 *   off I SIZE DELTA             address minus that of the first allocation
 *                                of the same size (independent of where the
 *                                heap itself was mapped)
 *   bytes NAME SIZE HEX          the first 32 bytes of a buffer that was
 *                                allocated and never written
 * In fork mode every line is prefixed with "child " or "parent ".
 *
 * Everything is allocated before anything is printed, so stdio's own
 * allocations do not interleave with the measured ones.
 */
#undef _FORTIFY_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 100
static const size_t sizes[] = {1, 8, 16, 24, 33, 64, 100, 250, 512, 1000, 2048, 4000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct fresh {
	const char *name;
	size_t size;
	unsigned char *p;
};

static struct fresh fresh[] = {
	{"malloc32", 32, NULL},      {"malloc200", 200, NULL},      {"malloc4096", 4096, NULL},
	{"malloc20000", 20000, NULL}, {"malloc100000", 100000, NULL}, {"memalign64", 128, NULL},
};
#define NFRESH (sizeof fresh / sizeof fresh[0])

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		perror("malloc");
		exit(1);
	}
	return p;
}

/* Read memory the program never wrote.  The empty asm tells the compiler the
 * bytes may have been set elsewhere, which they have: by the allocator. */
static void print_bytes(const char *prefix, const struct fresh *f)
{
	unsigned char *p = f->p;
	__asm__ volatile("" : : "r"(p) : "memory");
	printf("%sbytes %s %zu ", prefix, f->name, f->size);
	for (int i = 0; i < 32; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static void run(const char *prefix)
{
	void *p[N];
	for (int i = 0; i < N; i++)
		p[i] = xmalloc(sizes[i % NSIZES]);
	for (size_t i = 0; i < NFRESH; i++) {
		if (strcmp(fresh[i].name, "memalign64") == 0)
			fresh[i].p = memalign(64, fresh[i].size);
		else
			fresh[i].p = malloc(fresh[i].size);
		if (fresh[i].p == NULL) {
			perror("malloc");
			exit(1);
		}
	}
	for (int i = 0; i < N; i++)
		printf("%saddr %d %zu %p\n", prefix, i, sizes[i % NSIZES], p[i]);
	for (int i = (int)NSIZES; i < N; i++)
		printf("%soff %d %zu %lld\n", prefix, i, sizes[i % NSIZES],
		       (long long)((intptr_t)p[i] - (intptr_t)p[i % NSIZES]));
	for (size_t i = 0; i < NFRESH; i++)
		print_bytes(prefix, &fresh[i]);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "fork") == 0) {
		/* Some history before the fork. */
		void *warm[40];
		for (int i = 0; i < 40; i++)
			warm[i] = xmalloc(sizes[i % NSIZES]);
		for (int i = 0; i < 40; i += 2)
			free(warm[i]);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			run("child ");
			exit(0);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "seeds: child failed\n");
			return 1;
		}
		run("parent ");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: seeds [fork]\n");
		return 2;
	}
	run("");
	return 0;
}
