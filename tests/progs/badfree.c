/*
 * badfree: programs with planted invalid frees.  On the DieHard heap every
 * one of them is ignored, so each mode runs to completion, checks that the
 * heap and the program's data are still intact, prints "MODE: ok ..." and
 * exits 0.  (Under glibc most of them abort.)  The first line is always
 * "pid=N" so the stats line can be matched to the process.
 *
 *   badfree double     3 small objects freed twice            (3 double frees)
 *   badfree double-exit  one object freed twice just before exit (1 double
 *                      free, which the exit-time statistics must include)
 *   badfree invalid    stack, global, string literal, foreign mmap pages,
 *                      wild and misaligned pointers           (8 invalid frees)
 *   badfree interior   4200 frees of pointers into the middle of live small
 *                      objects; none of those objects may be freed (4200)
 *   badfree large      a >64 KiB object freed through interior pointers and
 *                      its guard page (3), then freed twice (1 more)
 *   badfree clean      a correct program: no ignored frees, 1000 x 1000-byte
 *                      objects live at the peak
 */
#undef _FORTIFY_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Planted bugs go through this pointer so the compiler cannot see (and warn
 * about, or optimise around) the invalid frees. */
static void (*volatile bad_free)(void *) = free;

static char global_buf[64];

static void fail(const char *what)
{
	fprintf(stderr, "badfree: FAILED: %s\n", what);
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		fail("malloc returned NULL");
	return p;
}

static unsigned char pat(uint64_t id, size_t i)
{
	uint64_t z = (id + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
	return (unsigned char)(z >> 56);
}

static void fill(void *p, size_t n, uint64_t id)
{
	unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		c[i] = pat(id, i);
}

static int intact(const void *p, size_t n, uint64_t id)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != pat(id, i))
			return 0;
	return 1;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

/* Allocate `count` objects of `size` bytes, each with its own pattern, then
 * check that no two overlap and that all patterns survived.  This is what a
 * heap corrupted by an earlier bad free (e.g. a slot handed out twice) fails. */
static void churn_and_check(size_t size, size_t count, uint64_t salt)
{
	void **p = xmalloc(count * sizeof *p);
	for (size_t i = 0; i < count; i++) {
		p[i] = xmalloc(size);
		fill(p[i], size, salt + i);
	}
	for (size_t i = 0; i < count; i++)
		if (!intact(p[i], size, salt + i))
			fail("an object was overwritten: the heap hands out memory that is in use");
	void **s = xmalloc(count * sizeof *s);
	memcpy(s, p, count * sizeof *s);
	qsort(s, count, sizeof *s, cmp_ptr);
	for (size_t i = 1; i < count; i++)
		if ((uintptr_t)s[i] < (uintptr_t)s[i - 1] + size)
			fail("two live objects overlap");
	for (size_t i = 0; i < count; i++)
		free(p[i]);
	free(s);
	free(p);
}

static void mode_double(void)
{
	size_t sizes[3] = {16, 100, 4000};
	void *p[3];
	for (int i = 0; i < 3; i++) {
		p[i] = xmalloc(sizes[i]);
		fill(p[i], sizes[i], (uint64_t)i);
	}
	for (int i = 0; i < 3; i++) {
		bad_free(p[i]); /* the legitimate free */
		bad_free(p[i]); /* double free */
	}
	for (int i = 0; i < 3; i++)
		churn_and_check(sizes[i], 20000, 1000u * (uint64_t)(i + 1));
	printf("double: ok\n");
}

static void mode_double_exit(void)
{
	void *p = xmalloc(40);
	fill(p, 40, 1);
	bad_free(p); /* the legitimate free */
	bad_free(p); /* double free */
	printf("double-exit: ok\n");
}

static void mode_invalid(void)
{
	volatile int stack_var[8];
	for (int i = 0; i < 8; i++)
		stack_var[i] = i * 7;
	fill(global_buf, sizeof global_buf, 77);
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *foreign = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (foreign == MAP_FAILED)
		fail("mmap");
	fill(foreign, (size_t)page * 2, 78);
	unsigned char *obj = xmalloc(64);
	fill(obj, 64, 79);

	bad_free((void *)stack_var);            /* 1: stack */
	bad_free(global_buf);                   /* 2: global */
	bad_free((void *)"a string literal");   /* 3: read-only data */
	bad_free(foreign);                      /* 4: memory the allocator never mapped */
	bad_free(foreign + page);               /* 5 */
	bad_free((void *)(uintptr_t)0x10);      /* 6: wild pointer */
	bad_free((void *)(uintptr_t)0x7ffffffff000ull); /* 7: wild pointer near the top of user space */
	bad_free(obj + 3);                      /* 8: misaligned pointer into a live object */

	for (int i = 0; i < 8; i++)
		if (stack_var[i] != i * 7)
			fail("the stack variable changed");
	if (!intact(global_buf, sizeof global_buf, 77))
		fail("the global buffer changed");
	if (!intact(foreign, (size_t)page * 2, 78)) /* faults if the allocator unmapped it */
		fail("the foreign mapping changed");
	if (!intact(obj, 64, 79))
		fail("the object behind the misaligned pointer changed");
	churn_and_check(64, 20000, 5000);
	if (!intact(obj, 64, 79))
		fail("the object behind the misaligned pointer was reused");
	free(obj);
	munmap(foreign, (size_t)page * 2);
	printf("invalid: ok\n");
}

struct victims {
	size_t size, offset, count, fresh;
};

static void mode_interior(void)
{
	/* Offsets are multiples of 16, i.e. valid object starts in smaller size
	 * classes: only the object's own size class makes them interior. */
	static const struct victims v[3] = {
		{64, 16, 3000, 60000},
		{256, 128, 1000, 20000},
		{4096, 1024, 200, 2000},
	};
	size_t total = 0;
	for (int c = 0; c < 3; c++) {
		size_t n = v[c].count;
		unsigned char **a = xmalloc(n * sizeof *a);
		for (size_t i = 0; i < n; i++) {
			a[i] = xmalloc(v[c].size);
			fill(a[i], v[c].size, 100000u * (uint64_t)c + i);
		}
		for (size_t i = 0; i < n; i++)
			bad_free(a[i] + v[c].offset); /* interior free */
		total += n;

		/* If the allocator freed the enclosing objects, these requests of
		 * the same size would be given some of them. */
		unsigned char **sorted = xmalloc(n * sizeof *sorted);
		memcpy(sorted, a, n * sizeof *sorted);
		qsort(sorted, n, sizeof *sorted, cmp_ptr);
		unsigned char **f = xmalloc(v[c].fresh * sizeof *f);
		for (size_t i = 0; i < v[c].fresh; i++) {
			f[i] = xmalloc(v[c].size);
			memset(f[i], 0x5A, v[c].size);
			if (bsearch(&f[i], sorted, n, sizeof *sorted, cmp_ptr) != NULL) {
				fprintf(stderr, "badfree: malloc(%zu) returned %p, a live object whose interior was freed\n",
				        v[c].size, (void *)f[i]);
				exit(1);
			}
		}
		for (size_t i = 0; i < n; i++)
			if (!intact(a[i], v[c].size, 100000u * (uint64_t)c + i)) {
				fprintf(stderr, "badfree: object %p (size %zu) changed after free(%p)\n", (void *)a[i],
				        v[c].size, (void *)(a[i] + v[c].offset));
				exit(1);
			}
		for (size_t i = 0; i < v[c].fresh; i++)
			free(f[i]);
		for (size_t i = 0; i < n; i++)
			free(a[i]);
		free(f);
		free(sorted);
		free(a);
	}
	printf("interior: ok victims=%zu\n", total);
}

static void mode_large(void)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size = 200000;
	unsigned char *big = xmalloc(size);
	fill(big, size, 900);
	bad_free(big + page);   /* interior, page aligned */
	bad_free(big + 100);    /* interior */
	bad_free(big - page);   /* the guard page (or whatever precedes the object) */
	if (!intact(big, size, 900)) /* faults if the object was unmapped */
		fail("the large object changed after interior frees");
	fill(big, size, 901);
	if (!intact(big, size, 901))
		fail("the large object is not writable after interior frees");
	churn_and_check(size, 20, 950);
	if (!intact(big, size, 901))
		fail("the large object changed after more large allocations");
	bad_free(big); /* the legitimate free */
	bad_free(big); /* double free of a large object */
	churn_and_check(size, 20, 970);
	printf("large: ok\n");
}

static void mode_clean(void)
{
	enum { N = 1000, SZ = 1000 };
	void **p = xmalloc(N * sizeof *p);
	for (int i = 0; i < N; i++) {
		p[i] = xmalloc(SZ);
		fill(p[i], SZ, (uint64_t)i);
	}
	for (int i = 0; i < N; i++) {
		if (!intact(p[i], SZ, (uint64_t)i))
			fail("object changed");
		free(p[i]);
	}
	for (int i = 0; i < 10; i++)
		free(NULL);
	void *q = NULL;
	for (size_t n = 1; n < 300000; n = n * 3 + 1)
		if ((q = realloc(q, n)) == NULL)
			fail("realloc");
	free(q);
	free(p);
	printf("clean: ok allocations=%d\n", N);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: badfree double|double-exit|invalid|interior|large|clean\n");
		return 2;
	}
	printf("pid=%d\n", (int)getpid());
	fflush(stdout);
	if (strcmp(argv[1], "double") == 0)
		mode_double();
	else if (strcmp(argv[1], "double-exit") == 0)
		mode_double_exit();
	else if (strcmp(argv[1], "invalid") == 0)
		mode_invalid();
	else if (strcmp(argv[1], "interior") == 0)
		mode_interior();
	else if (strcmp(argv[1], "large") == 0)
		mode_large();
	else if (strcmp(argv[1], "clean") == 0)
		mode_clean();
	else {
		fprintf(stderr, "badfree: unknown mode %s\n", argv[1]);
		return 2;
	}
	return 0;
}
