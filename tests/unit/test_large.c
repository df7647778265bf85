/* Unit tests of large objects: guard pages, alignment, the validity table,
 * quarantine, resizing by moving pages, the unguarded fallback. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <stdio.h>

#include "large.h"
#include "os.h"
#include "tap.h"

static struct config cfg_fill(bool fill)
{
	struct config c = { .seed = { 9, 9 }, .m_fixed = 2 * M_ONE, .fill = fill, .safe_strings = true };
	return c;
}

/* True when touching *p in a child process kills it with SIGSEGV. */
static bool faults(volatile char *p, bool write)
{
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* not the sanitizer's report-and-exit */
		if (write)
			*p = 1;
		else
			(void)*p;
		_exit(0);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return false;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static bool pattern_ok(const unsigned char *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return false;
	return true;
}

static void pattern_put(unsigned char *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static void test_basic(struct large *l, struct rng *r)
{
	size_t page = os_page_size();
	char *p = large_alloc(l, 100000, 0, r, false, false);
	CHECK(p != NULL && ((uintptr_t)p & (page - 1)) == 0, "100000 B: page-aligned");
	size_t n = large_usable(l, p);
	CHECK(n >= 100000 && n < 100000 + page, "usable size is the page-rounded request (%zu)", n);
	memset(p, 0xab, n);
	CHECK(faults(p - 1, false), "the page before the object is a guard");
	CHECK(faults(p + n, true), "the page after the object is a guard");
	CHECK(large_free(l, p + 4096) == HEAP_INVALID, "an interior pointer is refused");
	CHECK(large_usable(l, p) == n && (unsigned char)p[n - 1] == 0xab, "and the object is intact");
	int local;
	CHECK(large_free(l, &local) == HEAP_INVALID, "a foreign pointer is refused");
	CHECK(large_free(l, p) == HEAP_FREED, "the object is freed");
	CHECK(large_free(l, p) == HEAP_DOUBLE, "a second free is recognised as a double free");
	CHECK(faults(p, false), "a freed object's memory faults (quarantine)");
	CHECK(large_usable(l, p) == 0, "a freed object has no usable size");
}

static void test_align(struct large *l, struct rng *r)
{
	size_t aligns[] = { 8192, 65536, (size_t)1 << 20, (size_t)2 << 20, (size_t)64 << 20 };
	int ok = 1;
	for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
		char *p = large_alloc(l, (size_t)3 << 20, aligns[i], r, false, false);
		ok &= p != NULL && ((uintptr_t)p & (aligns[i] - 1)) == 0;
		if (p != NULL) {
			p[0] = 1;
			p[(3 << 20) - 1] = 1;
			ok &= large_free(l, p) == HEAP_FREED;
		}
	}
	CHECK(ok, "3 MiB objects aligned to 8 KiB .. 64 MiB");
}

static void test_resize(struct large *l, struct rng *r)
{
	unsigned char *p = large_alloc(l, 200000, 0, r, false, false);
	pattern_put(p, 200000, 3);
	unsigned char *q = large_resize(l, p, 50 << 20, r, &(bool){ false });
	CHECK(q != NULL && pattern_ok(q, 200000, 3), "growing to 50 MiB keeps the data");
	CHECK(large_usable(l, q) >= (50u << 20), "and the object is 50 MiB");
	memset(q + 200000, 1, (50 << 20) - 200000);
	CHECK(q == p || faults((char *)p, false), "the old address faults once the object moved");
	CHECK(faults((char *)q + large_usable(l, q), true), "the grown object has a trailing guard");
	bool known = false;
	unsigned char *s = large_resize(l, q, 100000, r, &known);
	CHECK(known && s == q && pattern_ok(s, 100000, 3), "shrinking stays in place and keeps the data");
	CHECK(large_usable(l, s) < 100000 + 4096, "the shrunk object's size is the new size");
	CHECK(faults((char *)s + large_usable(l, s), true), "the shrunk object ends at a guard");
	int local;
	CHECK(large_resize(l, &local, 100000, r, &known) == NULL && !known, "resizing a foreign pointer: unknown");
	CHECK(large_free(l, s) == HEAP_FREED, "freed");

	unsigned char *a = large_alloc(l, 1 << 20, (size_t)1 << 20, r, false, false);
	pattern_put(a, 1 << 20, 9);
	unsigned char *b = large_resize(l, a, 8 << 20, r, &known);
	CHECK(b != NULL && ((uintptr_t)b & ((1 << 20) - 1)) == 0 && pattern_ok(b, 1 << 20, 9),
	      "growing an aligned object keeps its alignment and data");
	large_free(l, b);
}

static void test_many(struct large *l, struct rng *r)
{
	enum { N = 3000 };
	static char *p[N];
	int ok = 1;
	for (int i = 0; i < N; i++) {
		p[i] = large_alloc(l, 70000 + (size_t)i, 0, r, false, false);
		ok &= p[i] != NULL;
		if (p[i])
			p[i][0] = (char)i;
	}
	CHECK(ok && l->count == N, "3000 live large objects (the table grew)");
	int found = 1;
	for (int i = 0; i < N; i++)
		found &= large_usable(l, p[i]) >= 70000u + (size_t)i && p[i][0] == (char)i;
	CHECK(found, "every one is found after the table grew");
	int freed = 1;
	for (int i = 0; i < N; i += 2)
		freed &= large_free(l, p[i]) == HEAP_FREED;
	for (int i = 1; i < N; i += 2)
		freed &= large_usable(l, p[i]) != 0;
	for (int i = 1; i < N; i += 2)
		freed &= large_free(l, p[i]) == HEAP_FREED;
	CHECK(freed && l->count == 0, "freed in two passes, deletions keep the rest findable");
}

static void test_fill_and_unguarded(struct rng *r)
{
	struct config cfg = cfg_fill(true);
	struct large *l = large_create(&cfg, NULL);
	unsigned char *p = large_alloc(l, 100000, 0, r, true, false);
	int zeros = 0;
	for (int i = 0; i < 100000; i++)
		zeros += p[i] == 0;
	CHECK(zeros < 100000 / 64, "fill: a new large object is random (%d zeros)", zeros);
	bool known;
	unsigned char *q = large_resize(l, p, 400000, r, &known);
	zeros = 0;
	for (int i = 100000 + 4096; i < 400000; i++)
		zeros += q[i] == 0;
	CHECK(zeros < 300000 / 64, "fill: the grown part of a resize is random (%d zeros)", zeros);
	unsigned char *z = large_alloc(l, 100000, 0, r, false, true);
	int nonzero = 0;
	for (int i = 0; i < 100000; i++)
		nonzero += z[i] != 0;
	CHECK(nonzero == 0, "an object asked without fill (calloc) is zero");

	l->guard_budget = 0;
	char *u = large_alloc(l, 100000, 0, r, false, false);
	CHECK(u != NULL && l->unguarded == 1, "past the mapping budget an object gets no guards");
	memset(u, 1, 100000);
	CHECK(large_free(l, u) == HEAP_FREED, "and is freed normally");
	large_destroy(l);
}

static void test_reuse(struct large *l, struct rng *r)
{
	enum { N = 8 };
	char *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = large_alloc(l, 300000, 0, r, false, false);
		memset(p[i], 0x5a, 300000);
	}
	for (int i = 0; i < N; i++)
		large_free(l, p[i]);
	CHECK(faults(p[0], false) && faults(p[N - 1], false), "freed objects fault while their pages are kept");
	CHECK(large_free(l, p[N - 1]) == HEAP_DOUBLE, "a retained object's second free is a double free");
	char *z = large_alloc(l, 300000, 0, r, false, true);
	int zero = 1;
	for (int i = 0; i < 300000; i++)
		zero &= z[i] == 0;
	CHECK(zero, "an allocation that must be zero never reuses kept pages");
	char *q = large_alloc(l, 250000, 0, r, false, false);
	int reused = -1;
	for (int i = 0; i < N; i++)
		if (q == p[i])
			reused = i;
	CHECK(reused >= 0 && reused < N - 4, "a new object reuses the oldest kept range (got %d)", reused);
	CHECK(large_usable(l, q) < 250000 + 4096 && faults(q + large_usable(l, q), true),
	      "the reused range is cut to the new size, with a guard after it");
	memset(q, 1, 250000);
	large_free(l, q);
	large_free(l, z);
}

static void test_exhaustion(struct large *l, struct rng *r)
{
	errno = 0;
	CHECK(large_alloc(l, (size_t)1 << 48, 0, r, false, false) == NULL && errno == ENOMEM, "256 TiB: NULL, ENOMEM");
	errno = 0;
	CHECK(large_alloc(l, SIZE_MAX, 0, r, false, false) == NULL && errno == ENOMEM, "SIZE_MAX: NULL, ENOMEM");
	errno = 0;
	CHECK(large_alloc(l, SIZE_MAX - 4096 * 3, (size_t)1 << 20, r, false, false) == NULL && errno == ENOMEM,
	      "near SIZE_MAX with alignment: NULL, ENOMEM (no overflow)");
}

static long rss_kb(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	if (f)
		fclose(f);
	return resident * (long)(os_page_size() / 1024);
}

static void test_pool(struct rng *r)
{
	struct config cfg = cfg_fill(true);
	struct large *l = large_create(&cfg, NULL);
	long before = rss_kb();
	unsigned char *p = large_alloc(l, (size_t)256 << 20, 0, r, true, false);
	long grown = rss_kb() - before;
	CHECK(p != NULL && grown < 40 * 1024, "fill: a 256 MiB object costs little memory until written (%ld KiB)", grown);
	int zeros = 0;
	for (size_t i = 0; i < ((size_t)256 << 20); i += 4099)
		zeros += p[i] == 0;
	CHECK(zeros < 65000 / 64, "fill: its bytes read as random (%d zeros in ~65000 samples)", zeros);
	unsigned char *q = large_alloc(l, (size_t)4 << 20, 0, r, true, false);
	CHECK(memcmp(p, q, 4096) != 0, "two pool-filled objects do not start with the same bytes");
	pattern_put(p, (size_t)32 << 20, 7);
	pattern_put(p + ((size_t)200 << 20), 4096, 8);
	bool known;
	unsigned char *g = large_resize(l, p, (size_t)300 << 20, r, &known);
	CHECK(g != NULL && pattern_ok(g, (size_t)32 << 20, 7) && pattern_ok(g + ((size_t)200 << 20), 4096, 8),
	      "growing an object made of several pool mappings keeps its data");
	CHECK(large_free(l, g) == HEAP_FREED && large_free(l, q) == HEAP_FREED, "freed");

	/* A program that closes the pool's descriptor and opens a file of its
	 * own under that number must never see that file mapped into memory. */
	char path[] = "/tmp/diehard-pool-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)POOL_SIZE) == 0, "a file of the program's");
	unlink(path);
	CHECK(dup2(fd, l->pool.fd) == l->pool.fd, "reuses the pool's descriptor number");
	unsigned char *h = large_alloc(l, (size_t)8 << 20, 0, r, true, false);
	zeros = 0;
	for (size_t i = 0; i < ((size_t)8 << 20); i += 997)
		zeros += h[i] == 0;
	CHECK(zeros < 8500 / 64, "the object is still random, not the (all-zero) file (%d zeros)", zeros);
	CHECK(l->pool.failed, "and the pool is given up for good");
	large_free(l, h);
	close(fd);
	large_destroy(l);
}

int main(void)
{
	struct config cfg = cfg_fill(false);
	struct large *l = large_create(&cfg, NULL);
	struct rng r;
	const uint64_t seed[2] = { 1, 1 };
	rng_derive(&r, seed, 0);
	CHECK(l != NULL, "created");
	test_basic(l, &r);
	test_align(l, &r);
	test_resize(l, &r);
	test_many(l, &r);
	test_reuse(l, &r);
	test_exhaustion(l, &r);
	large_destroy(l);
	test_fill_and_unguarded(&r);
	test_pool(&r);
	return tap_done();
}
