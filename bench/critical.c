/* critical.c — what critical memory costs (<diehard/critical.h>): ns per
 * 8-byte critical_load and critical_store against a plain load and store,
 * on one object (the thread's one-record cache hits) and over many objects
 * in random order (every access looks its object up), and
 * critical_malloc + critical_free against malloc + free.
 *
 *   critical [objects] [rounds]
 *
 * Prints one line per case: "case ns_per_op plain_ns_per_op ratio".
 */
#include <diehard/critical.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Keeps the compiler from dropping plain loads. */
static volatile uint64_t sink;

static void line(const char *what, double crit, double plain)
{
	printf("%-24s %8.1f %8.1f %7.1fx\n", what, crit, plain, crit / plain);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	long rounds = argc > 2 ? atol(argv[2]) : 200;
	if (n == 0 || rounds <= 0) {
		fprintf(stderr, "usage: critical [objects > 0] [rounds > 0]\n");
		return 2;
	}
	uint64_t **crit = malloc(n * sizeof *crit), **plain = malloc(n * sizeof *plain);
	size_t *order = malloc(n * sizeof *order);
	if (crit == NULL || plain == NULL || order == NULL)
		return 1;
	for (size_t i = 0; i < n; i++) {
		crit[i] = critical_calloc(4, sizeof(uint64_t));
		plain[i] = calloc(4, sizeof(uint64_t));
		if (crit[i] == NULL || plain[i] == NULL)
			return 1;
		order[i] = i;
	}
	srand(1);
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	long ops = rounds * (long)n;
	uint64_t acc = 0;
	double t0, tc, tp;

	/* One object, again and again. */
	t0 = now();
	for (long i = 0; i < ops; i++)
		acc += critical_load_u64(&crit[0][1]);
	tc = (now() - t0) / (double)ops;
	t0 = now();
	for (long i = 0; i < ops; i++)
		acc += *(volatile uint64_t *)&plain[0][1];
	tp = (now() - t0) / (double)ops;
	line("load, one object", tc, tp);

	t0 = now();
	for (long i = 0; i < ops; i++)
		critical_store_u64(&crit[0][1], (uint64_t)i);
	tc = (now() - t0) / (double)ops;
	t0 = now();
	for (long i = 0; i < ops; i++)
		*(volatile uint64_t *)&plain[0][1] = (uint64_t)i;
	tp = (now() - t0) / (double)ops;
	line("store, one object", tc, tp);

	/* Every access another object, in random order. */
	t0 = now();
	for (long r = 0; r < rounds; r++)
		for (size_t i = 0; i < n; i++)
			acc += critical_load_u64(&crit[order[i]][2]);
	tc = (now() - t0) / (double)ops;
	t0 = now();
	for (long r = 0; r < rounds; r++)
		for (size_t i = 0; i < n; i++)
			acc += *(volatile uint64_t *)&plain[order[i]][2];
	tp = (now() - t0) / (double)ops;
	line("load, many objects", tc, tp);

	t0 = now();
	for (long r = 0; r < rounds; r++)
		for (size_t i = 0; i < n; i++)
			critical_store_u64(&crit[order[i]][2], (uint64_t)r);
	tc = (now() - t0) / (double)ops;
	t0 = now();
	for (long r = 0; r < rounds; r++)
		for (size_t i = 0; i < n; i++)
			*(volatile uint64_t *)&plain[order[i]][2] = (uint64_t)r;
	tp = (now() - t0) / (double)ops;
	line("store, many objects", tc, tp);

	long allocs = ops / 20 > 0 ? ops / 20 : 1;
	t0 = now();
	for (long i = 0; i < allocs; i++)
		critical_free(critical_malloc(32));
	tc = (now() - t0) / (double)allocs;
	t0 = now();
	for (long i = 0; i < allocs; i++) {
		void *p = malloc(32);
		sink = (uint64_t)(uintptr_t)p;
		free(p);
	}
	tp = (now() - t0) / (double)allocs;
	line("malloc+free 32 B", tc, tp);

	sink = acc;
	struct critical_counts c;
	critical_counts(&c);
	if (c.detected != 0 || c.uninitialized != 0) {
		fprintf(stderr, "critical: copies disagreed on a clean run (%llu, %llu)\n", c.detected, c.uninitialized);
		return 1;
	}
	return 0;
}
