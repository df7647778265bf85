/*
 * entry: checks the malloc entry points the way a program relies on them.
 *
 *   entry all            every portable check (must also pass under glibc)
 *   entry CHECK...       the named checks
 *   entry list           the names
 *
 * Prints "ok CHECK" for each passing check and "FAIL CHECK: why" for each
 * failing one; exits 1 if any failed.
 *
 * Two checks are not part of "all" because they only mean something on the
 * DieHard heap:
 *   fill_random    run with DIEHARD_FILL=random: fresh objects, including
 *                  ones placed in memory that was used and freed before,
 *                  are not zero
 *   realloc0_loop  20000 x (malloc 4000 bytes, realloc to 0); the bats test
 *                  reads peak_live_bytes to see that realloc(p, 0) freed p
 */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* glibc exports these; programs and libraries (and the dynamic linker's
 * users) call them directly. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* Sizes the compiler cannot see, so it neither warns about nor folds the
 * deliberately absurd requests. */
static volatile size_t v_size_max = SIZE_MAX;
static volatile size_t v_half = SIZE_MAX / 2;
static volatile size_t v_three = 3;
static volatile size_t v_2_32 = (size_t)1 << 32;
static volatile size_t v_2_48 = (size_t)1 << 48;

/* A failed realloc leaves the original object valid; reading it afterwards is
 * correct, but the compiler cannot know the call failed and warns. */
static void *(*volatile realloc_fn)(void *, size_t) = realloc;
static void *(*volatile reallocarray_fn)(void *, size_t, size_t) = reallocarray;

static int failures;
static const char *current;
static int current_failed;

#define CHECK(cond, ...)                                                                                          \
	do {                                                                                                      \
		if (!(cond)) {                                                                                    \
			printf("FAIL %s: ", current);                                                             \
			printf(__VA_ARGS__);                                                                      \
			printf(" [%s:%d: %s]\n", __FILE__, __LINE__, #cond);                                     \
			current_failed = 1;                                                                       \
		}                                                                                                 \
	} while (0)

/* Stores followed by free() are dead to the compiler, which would drop them;
 * these tests need them to happen, so the memory is declared used. */
static void keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void fill(void *p, size_t n, unsigned seed)
{
	unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

static int intact(const void *p, size_t n, unsigned seed)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 9)))
			return 0;
	return 1;
}

static int all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != 0)
			return 0;
	return 1;
}

static int aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static void check_posix_memalign_einval(void)
{
	static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 1000, 4097, 3 * 4096};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		void *p = (void *)&p;
		int rc = posix_memalign(&p, bad[i], 64);
		CHECK(rc == EINVAL, "posix_memalign(alignment %zu) returned %d, want EINVAL", bad[i], rc);
		if (rc == 0)
			free(p);
	}
}

static void check_posix_memalign_small(void)
{
	/* Size below, at and above the alignment; every alignment 8 B .. 1 MiB.
	 * All of them live at once, so overlaps show up as damaged patterns. */
	enum { NA = 18, NS = 5 };
	void *p[NA][NS];
	size_t sz[NA][NS];
	for (int a = 0; a < NA; a++) {
		size_t al = (size_t)8 << a;
		size_t sizes[NS] = {1, al / 2 ? al / 2 : 1, al - 1, al, al + 1};
		for (int s = 0; s < NS; s++) {
			sz[a][s] = sizes[s];
			p[a][s] = NULL;
			int rc = posix_memalign(&p[a][s], al, sizes[s]);
			CHECK(rc == 0 && p[a][s] != NULL, "posix_memalign(%zu, %zu) failed with %d", al, sizes[s], rc);
			if (rc != 0) {
				p[a][s] = NULL;
				continue;
			}
			CHECK(aligned(p[a][s], al), "posix_memalign(%zu, %zu) returned %p", al, sizes[s], p[a][s]);
			CHECK(malloc_usable_size(p[a][s]) >= sizes[s], "usable size %zu < %zu",
			      malloc_usable_size(p[a][s]), sizes[s]);
			fill(p[a][s], sizes[s], (unsigned)(a * NS + s));
		}
	}
	for (int a = 0; a < NA; a++)
		for (int s = 0; s < NS; s++)
			if (p[a][s] != NULL) {
				CHECK(intact(p[a][s], sz[a][s], (unsigned)(a * NS + s)),
				      "aligned object (%zu, %zu) at %p was overwritten", (size_t)8 << a, sz[a][s], p[a][s]);
				free(p[a][s]);
			}
}

static void check_memalign_big(void)
{
	size_t two_mib = (size_t)2 << 20;
	unsigned char *p = memalign(two_mib, 3 * ((size_t)1 << 20));
	CHECK(p != NULL, "memalign(2 MiB, 3 MiB) returned NULL");
	if (p != NULL) {
		CHECK(aligned(p, two_mib), "memalign(2 MiB, 3 MiB) returned %p", (void *)p);
		CHECK(malloc_usable_size(p) >= 3 * ((size_t)1 << 20), "usable size %zu", malloc_usable_size(p));
		fill(p, 3 << 20, 5);
		CHECK(intact(p, 3 << 20, 5), "memalign(2 MiB, 3 MiB) memory does not hold data");
		free(p);
	}
	unsigned char *q = aligned_alloc(two_mib, 2 * two_mib);
	CHECK(q != NULL && aligned(q, two_mib), "aligned_alloc(2 MiB, 4 MiB) returned %p", (void *)q);
	if (q != NULL) {
		fill(q, 2 * two_mib, 6);
		CHECK(intact(q, 2 * two_mib, 6), "aligned_alloc(2 MiB, 4 MiB) memory does not hold data");
		free(q);
	}
}

static void check_aligned_realloc(void)
{
	unsigned char *p = aligned_alloc(64, 256);
	CHECK(p != NULL && aligned(p, 64), "aligned_alloc(64, 256) returned %p", (void *)p);
	if (p == NULL)
		return;
	fill(p, 256, 9);
	static const size_t steps[] = {100000, 40, 5000, 300000, 256};
	size_t keep = 256;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		unsigned char *q = realloc(p, steps[i]);
		CHECK(q != NULL, "realloc(aligned, %zu) returned NULL", steps[i]);
		if (q == NULL)
			break;
		p = q;
		if (steps[i] < keep)
			keep = steps[i];
		CHECK(intact(p, keep, 9), "realloc(aligned object, %zu) lost the first %zu bytes", steps[i], keep);
		fill(p + keep, steps[i] - keep, 9 + 1000);
	}
	free(p);

	void *v = NULL;
	int rc = posix_memalign(&v, 4096, 100);
	CHECK(rc == 0 && aligned(v, 4096), "posix_memalign(4096, 100) failed");
	if (rc == 0) {
		fill(v, 100, 11);
		unsigned char *w = realloc(v, 70000);
		CHECK(w != NULL && intact(w, 100, 11), "realloc of a posix_memalign object lost data");
		free(w);
	}
}

static void check_calloc_overflow(void)
{
	struct {
		size_t n, m;
	} cases[] = {{v_half, v_three}, {v_size_max, v_size_max}, {v_2_32, v_2_32}, {v_three, v_half}, {v_size_max, 2}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		void *p = calloc(cases[i].n, cases[i].m);
		CHECK(p == NULL, "calloc(%zu, %zu) overflows but returned %p", cases[i].n, cases[i].m, p);
		CHECK(errno == ENOMEM, "calloc(%zu, %zu): errno %d, want ENOMEM", cases[i].n, cases[i].m, errno);
		free(p);
	}
}

static void check_calloc_zero(void)
{
	static const size_t sizes[] = {1, 15, 16, 17, 100, 1000, 4096, 5000, 65536, 65537, 200000, 1 << 21};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		unsigned char *p = calloc(1, sizes[i]);
		CHECK(p != NULL && all_zero(p, sizes[i]), "calloc(1, %zu) not zeroed", sizes[i]);
		free(p);
		p = calloc(sizes[i], 3);
		CHECK(p != NULL && all_zero(p, sizes[i] * 3), "calloc(%zu, 3) not zeroed", sizes[i]);
		free(p);
	}
	/* Dirty memory that is freed and handed out again must still be zeroed. */
	static const size_t dirty[] = {16, 64, 1000, 8192, 100000};
	for (size_t d = 0; d < sizeof dirty / sizeof dirty[0]; d++) {
		size_t n = dirty[d] >= 65536 ? 16 : 3000;
		unsigned char **v = malloc(n * sizeof *v);
		CHECK(v != NULL, "malloc");
		if (v == NULL)
			return;
		for (int round = 0; round < 3; round++) {
			for (size_t i = 0; i < n; i++) {
				v[i] = malloc(dirty[d]);
				if (v[i] != NULL) {
					memset(v[i], 0xff, dirty[d]);
					keep(v[i]);
				}
			}
			for (size_t i = 0; i < n; i++)
				free(v[i]);
			size_t bad = 0;
			for (size_t i = 0; i < n; i++) {
				v[i] = calloc(1, dirty[d]);
				if (v[i] == NULL || !all_zero(v[i], dirty[d]))
					bad++;
			}
			CHECK(bad == 0, "%zu of %zu calloc(1, %zu) after freeing dirty objects were not zeroed", bad, n,
			      dirty[d]);
			for (size_t i = 0; i < n; i++)
				free(v[i]);
		}
		free(v);
	}
}

static void check_huge(void)
{
	struct {
		const char *what;
		size_t n;
	} cases[] = {{"1 << 48", v_2_48}, {"SIZE_MAX", v_size_max}, {"SIZE_MAX - 4096", v_size_max - 4096},
	             {"SIZE_MAX / 2", v_half}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		void *p = malloc(cases[i].n);
		CHECK(p == NULL && errno == ENOMEM, "malloc(%s) returned %p, errno %d", cases[i].what, p, errno);
		free(p);
		errno = 0;
		p = memalign(64, cases[i].n);
		CHECK(p == NULL && errno == ENOMEM, "memalign(64, %s) returned %p, errno %d", cases[i].what, p, errno);
		free(p);
		p = NULL;
		int rc = posix_memalign(&p, 4096, cases[i].n);
		CHECK(rc == ENOMEM, "posix_memalign(4096, %s) returned %d", cases[i].what, rc);
		if (rc == 0)
			free(p);
		errno = 0;
		p = valloc(cases[i].n);
		CHECK(p == NULL && errno == ENOMEM, "valloc(%s) returned %p, errno %d", cases[i].what, p, errno);
		free(p);
		errno = 0;
		p = pvalloc(cases[i].n); /* rounds up to a page: must not wrap around to a small size */
		CHECK(p == NULL && errno == ENOMEM, "pvalloc(%s) returned %p, errno %d", cases[i].what, p, errno);
		free(p);
	}
	unsigned char *q = malloc(1000);
	CHECK(q != NULL, "malloc(1000)");
	if (q == NULL)
		return;
	fill(q, 1000, 21);
	errno = 0;
	void *r = realloc_fn(q, v_2_48);
	CHECK(r == NULL && errno == ENOMEM, "realloc(p, 1 << 48) returned %p, errno %d", r, errno);
	CHECK(intact(q, 1000, 21), "a failed realloc changed the original object");
	errno = 0;
	r = realloc_fn(q, v_size_max);
	CHECK(r == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX) returned %p, errno %d", r, errno);
	CHECK(intact(q, 1000, 21), "a failed realloc changed the original object");
	free(q);
}

static void check_free_errno(void)
{
	static const size_t sizes[] = {0, 16, 1000, 65536, 65537, 300000};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = malloc(sizes[i]);
		errno = EILSEQ;
		free(p);
		CHECK(errno == EILSEQ, "free(malloc(%zu)) changed errno to %d", sizes[i], errno);
		p = memalign(8192, sizes[i] + 1);
		errno = EILSEQ;
		free(p);
		CHECK(errno == EILSEQ, "free(memalign(8192, %zu)) changed errno to %d", sizes[i] + 1, errno);
	}
	errno = EILSEQ;
	free(NULL);
	CHECK(errno == EILSEQ, "free(NULL) changed errno to %d", errno);
}

static void check_usable_size(void)
{
	enum { N = 400 };
	void *p[N];
	size_t sz[N], us[N];
	for (int i = 0; i < N; i++) {
		sz[i] = i < 300 ? (size_t)i * 37 % 5000 : (size_t)i * 997 % 300000;
		p[i] = malloc(sz[i]);
		CHECK(p[i] != NULL, "malloc(%zu) returned NULL", sz[i]);
		if (p[i] == NULL)
			return;
		us[i] = malloc_usable_size(p[i]);
		CHECK(us[i] >= sz[i], "malloc_usable_size(malloc(%zu)) = %zu", sz[i], us[i]);
	}
	/* The whole usable size is the program's to use. */
	for (int i = 0; i < N; i++)
		fill(p[i], us[i], (unsigned)i);
	for (int i = 0; i < N; i++) {
		CHECK(intact(p[i], us[i], (unsigned)i), "using all %zu usable bytes of malloc(%zu) damaged another object",
		      us[i], sz[i]);
		free(p[i]);
	}
	CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
}

static void check_realloc_edges(void)
{
	unsigned char *p = realloc(NULL, 100);
	CHECK(p != NULL && malloc_usable_size(p) >= 100, "realloc(NULL, 100) returned %p", (void *)p);
	if (p == NULL)
		return;
	fill(p, 100, 31);
	unsigned char *q = realloc(p, 100);
	CHECK(q != NULL && intact(q, 100, 31), "realloc to the same size lost data");
	p = q;
	q = realloc(p, 0);
	/* C17 allows either: p freed and NULL returned, or a new minimal object. */
	free(q);
	p = realloc(NULL, 200000);
	CHECK(p != NULL, "realloc(NULL, 200000) returned NULL");
	if (p != NULL) {
		fill(p, 200000, 32);
		q = realloc(p, 16);
		CHECK(q != NULL && intact(q, 16, 32), "shrinking a large object to 16 bytes lost data");
		free(q);
	}
}

static void check_reallocarray(void)
{
	unsigned char *p = reallocarray(NULL, 10, 10);
	CHECK(p != NULL, "reallocarray(NULL, 10, 10) returned NULL");
	if (p == NULL)
		return;
	fill(p, 100, 41);
	errno = 0;
	void *q = reallocarray_fn(p, v_half, v_three);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray(p, SIZE_MAX/2, 3) returned %p, errno %d", q, errno);
	CHECK(intact(p, 100, 41), "a failed reallocarray changed the original object");
	errno = 0;
	q = reallocarray_fn(p, v_2_32, v_2_32);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray(p, 2^32, 2^32) returned %p, errno %d", q, errno);
	q = reallocarray_fn(p, 1000, 8);
	CHECK(q != NULL && intact(q, 100, 41), "reallocarray(p, 1000, 8) lost data");
	if (q != NULL)
		p = q;
	free(p);
}

static void check_malloc0(void)
{
	enum { N = 1000 };
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = malloc(0);
		CHECK(p[i] != NULL, "malloc(0) returned NULL");
		if (p[i] == NULL)
			return;
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			if (p[i] == p[j]) {
				CHECK(0, "malloc(0) returned %p twice", p[i]);
				goto out;
			}
out:
	for (int i = 0; i < N; i++)
		free(p[i]);
}

static void check_valloc(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	static const size_t sizes[] = {1, 100, 4096, 5000, 70000};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		unsigned char *p = valloc(sizes[i]);
		CHECK(p != NULL && aligned(p, page), "valloc(%zu) returned %p", sizes[i], (void *)p);
		if (p != NULL) {
			fill(p, sizes[i], 51);
			CHECK(intact(p, sizes[i], 51), "valloc memory");
		}
		unsigned char *q = pvalloc(sizes[i]);
		size_t rounded = (sizes[i] + page - 1) / page * page;
		CHECK(q != NULL && aligned(q, page), "pvalloc(%zu) returned %p", sizes[i], (void *)q);
		if (q != NULL) {
			CHECK(malloc_usable_size(q) >= rounded, "pvalloc(%zu): usable size %zu < %zu", sizes[i],
			      malloc_usable_size(q), rounded);
			fill(q, rounded, 52); /* pvalloc promises whole pages */
			CHECK(intact(q, rounded, 52), "pvalloc memory");
		}
		if (p != NULL)
			CHECK(intact(p, sizes[i], 51), "pvalloc's pages overlap a valloc object");
		free(p);
		free(q);
	}
}

static void check_libc_aliases(void)
{
	/* The __libc_* names must be the same allocator as malloc/free: memory
	 * from one family is freed by the other. */
	unsigned char *p = __libc_malloc(100);
	CHECK(p != NULL, "__libc_malloc(100) returned NULL");
	if (p != NULL) {
		CHECK(malloc_usable_size(p) >= 100, "malloc_usable_size(__libc_malloc(100)) = %zu", malloc_usable_size(p));
		fill(p, 100, 61);
		unsigned char *q = realloc(p, 5000);
		CHECK(q != NULL && intact(q, 100, 61), "realloc of __libc_malloc memory lost data");
		free(q);
	}
	p = malloc(300);
	if (p != NULL) {
		fill(p, 300, 62);
		unsigned char *q = __libc_realloc(p, 100000);
		CHECK(q != NULL && intact(q, 300, 62), "__libc_realloc of malloc memory lost data");
		__libc_free(q);
	}
	p = __libc_calloc(10, 100);
	CHECK(p != NULL && all_zero(p, 1000), "__libc_calloc(10, 100) not zeroed");
	free(p);
	p = __libc_memalign(4096, 10);
	CHECK(p != NULL && aligned(p, 4096), "__libc_memalign(4096, 10) returned %p", (void *)p);
	free(p);
	p = malloc(70000);
	__libc_free(p);
}

static void check_misc(void)
{
	/* Tuning calls are accepted and change nothing the program can see. */
	malloc_trim(0);
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, 1);
	mallopt(M_ARENA_MAX, 1);
	struct mallinfo2 mi = mallinfo2();
	(void)mi;
	unsigned char *p = malloc(300000);
	CHECK(p != NULL, "malloc(300000) after mallopt returned NULL");
	if (p != NULL) {
		fill(p, 300000, 71);
		CHECK(intact(p, 300000, 71), "large object after mallopt");
	}
	free(p);
	CHECK(malloc_trim(0) >= 0, "malloc_trim");
}

/* Not part of "all": meaningful under DIEHARD_FILL=random only. */
static void check_fill_random(void)
{
	static const size_t sizes[] = {16, 64, 1000, 8192, 100000};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		size_t n = sizes[s] >= 65536 ? 8 : 2000;
		unsigned char **v = malloc(n * sizeof *v);
		if (v == NULL)
			return;
		size_t zero = 0;
		for (int round = 0; round < 2; round++) {
			for (size_t i = 0; i < n; i++) {
				v[i] = malloc(sizes[s]);
				keep(v[i]);
				if (v[i] == NULL || all_zero(v[i], sizes[s] < 64 ? sizes[s] : 64))
					zero++;
			}
			/* Zero them so a reused slot that is not refilled shows up. */
			for (size_t i = 0; i < n; i++) {
				memset(v[i], 0, sizes[s]);
				keep(v[i]);
				free(v[i]);
			}
		}
		CHECK(zero == 0, "%zu of %zu fresh malloc(%zu) objects start with zeros under DIEHARD_FILL=random", zero,
		      2 * n, sizes[s]);
		free(v);
	}
	unsigned char *m = memalign(256, 512);
	keep(m);
	CHECK(m != NULL && !all_zero(m, 512), "a fresh memalign(256, 512) object is all zeros");
	free(m);
}

static void check_realloc0_loop(void)
{
	for (int i = 0; i < 20000; i++) {
		void *p = malloc(4000);
		CHECK(p != NULL, "malloc(4000)");
		if (p == NULL)
			return;
		memset(p, i, 4000);
		keep(p);
		void *q = realloc(p, 0);
		free(q);
	}
}

static const struct {
	const char *name;
	void (*fn)(void);
	int in_all;
} checks[] = {
	{"posix_memalign_einval", check_posix_memalign_einval, 1},
	{"posix_memalign_small", check_posix_memalign_small, 1},
	{"memalign_big", check_memalign_big, 1},
	{"aligned_realloc", check_aligned_realloc, 1},
	{"calloc_overflow", check_calloc_overflow, 1},
	{"calloc_zero", check_calloc_zero, 1},
	{"huge", check_huge, 1},
	{"free_errno", check_free_errno, 1},
	{"usable_size", check_usable_size, 1},
	{"realloc_edges", check_realloc_edges, 1},
	{"reallocarray", check_reallocarray, 1},
	{"malloc0", check_malloc0, 1},
	{"valloc", check_valloc, 1},
	{"libc_aliases", check_libc_aliases, 1},
	{"misc", check_misc, 1},
	{"fill_random", check_fill_random, 0},
	{"realloc0_loop", check_realloc0_loop, 0},
};
#define NCHECKS (sizeof checks / sizeof checks[0])

static void run_check(size_t i)
{
	current = checks[i].name;
	current_failed = 0;
	checks[i].fn();
	if (current_failed)
		failures++;
	else
		printf("ok %s\n", current);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: entry all|list|CHECK...\n");
		return 2;
	}
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "list") == 0) {
			for (size_t i = 0; i < NCHECKS; i++)
				printf("%s%s\n", checks[i].name, checks[i].in_all ? "" : " (not in all)");
			continue;
		}
		int found = 0;
		for (size_t i = 0; i < NCHECKS; i++)
			if (strcmp(argv[a], "all") == 0 ? checks[i].in_all : strcmp(argv[a], checks[i].name) == 0) {
				run_check(i);
				found = 1;
			}
		if (!found) {
			fprintf(stderr, "entry: unknown check %s\n", argv[a]);
			return 2;
		}
	}
	return failures ? 1 : 0;
}
