/*
 * safestr: heap overflows through strcpy, strncpy, strcat and memcpy, with a
 * way to see what they did.
 *
 *   safestr strcpy  SIZE OFFSET SRCLEN        strcpy(a + OFFSET, <SRCLEN chars>)
 *   safestr strncpy SIZE OFFSET SRCLEN N      strncpy(a + OFFSET, <SRCLEN chars>, N)
 *   safestr strcat  SIZE OFFSET PRELEN SRCLEN a + OFFSET holds PRELEN chars;
 *                                             strcat(a + OFFSET, <SRCLEN chars>)
 *   safestr memcpy  SIZE OFFSET N             memcpy(a + OFFSET, <N bytes>, N)
 *   safestr normal                            in-bounds copies into heap, stack,
 *                                             global and mmap memory are exact
 *   safestr large                             memcpy 8 KiB past the end of a
 *                                             100000-byte object; prints
 *                                             "large: survived" or "large:
 *                                             faulted", then neighbour=...
 *
 * For the first four, the program allocates objects of SIZE bytes until it
 * holds two, a and b, in adjacent slots (b = a + SLOT, where SLOT is SIZE
 * rounded up to a power of two, at least 16: the allocator's size classes).
 * Every object allocated on the way stays live as a canary.  It then does the
 * copy into a and reports, one per line:
 *   room=R          bytes from the destination to the end of a's slot
 *   len=L           string ops: strnlen of the destination, read across into b
 *                   (for strncpy at most N); memcpy: how many leading bytes of
 *                   the destination equal the source
 *   content=ok|bad  the destination holds what the call should have written,
 *                   as far as it got (and strncpy's padding, and nothing
 *                   changed in a's slot beyond the call's reach)
 *   ret=ok|bad      the call returned its destination argument
 *   neighbour=intact|overwritten     b, the object right after a
 *   canaries=intact|damaged:N        every other object allocated on the way
 */
#undef _FORTIFY_SOURCE
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Called through volatile pointers so the compiler neither warns about the
 * planted overflows nor replaces the calls with inline code: the program must
 * really call the (possibly interposed) library functions. */
static char *(*volatile strcpy_fn)(char *, const char *) = strcpy;
static char *(*volatile strncpy_fn)(char *, const char *, size_t) = strncpy;
static char *(*volatile strcat_fn)(char *, const char *) = strcat;
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

static void die(const char *msg)
{
	fprintf(stderr, "safestr: %s\n", msg);
	exit(2);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		die("malloc returned NULL");
	return p;
}

/* Canary bytes are never zero, so strnlen reading into a canary object does
 * not stop early. */
static unsigned char canary_byte(size_t id, size_t i)
{
	return (unsigned char)(0x80 | ((id * 37 + i * 11) & 0x7f));
}

static void fill_canary(unsigned char *p, size_t n, size_t id)
{
	for (size_t i = 0; i < n; i++)
		p[i] = canary_byte(id, i);
}

static int canary_intact(const unsigned char *p, size_t n, size_t id)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != canary_byte(id, i))
			return 0;
	return 1;
}

/* Source strings: lowercase letters, distinct from canary and 'Z' bytes. */
static char *make_src(size_t len, char first)
{
	char *s = xmalloc(len + 1);
	for (size_t i = 0; i < len; i++)
		s[i] = (char)(first + (char)(i % 26));
	s[len] = '\0';
	return s;
}

/* A pointer set (open addressing) to spot adjacent slots quickly. */
#define SET_BITS 22
static uintptr_t *set;

static size_t set_hash(uintptr_t p)
{
	return (size_t)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - SET_BITS));
}

static void set_add(uintptr_t p)
{
	size_t i = set_hash(p);
	while (set[i] != 0)
		i = (i + 1) & ((1u << SET_BITS) - 1);
	set[i] = p;
}

static int set_has(uintptr_t p)
{
	for (size_t i = set_hash(p); set[i] != 0; i = (i + 1) & ((1u << SET_BITS) - 1))
		if (set[i] == p)
			return 1;
	return 0;
}

static size_t slot_of(size_t size)
{
	size_t s = 16;
	while (s < size)
		s *= 2;
	return s;
}

struct layout {
	size_t size, slot, n;
	unsigned char **obj; /* every object allocated, in order */
	unsigned char *a, *b;
	size_t ia, ib;
};

static void find_adjacent(struct layout *l, size_t size)
{
	size_t max = (size_t)1 << (SET_BITS - 1);
	set = calloc((size_t)1 << SET_BITS, sizeof *set);
	l->obj = malloc(max * sizeof *l->obj);
	if (set == NULL || l->obj == NULL)
		die("out of memory");
	l->size = size;
	l->ia = l->ib = 0;
	l->a = l->b = NULL;
	l->slot = slot_of(size);
	for (l->n = 0; l->n < max; l->n++) {
		unsigned char *p = xmalloc(size);
		l->obj[l->n] = p;
		fill_canary(p, size, l->n);
		uintptr_t u = (uintptr_t)p;
		if (set_has(u - l->slot) || set_has(u + l->slot)) {
			unsigned char *other = set_has(u - l->slot) ? p - l->slot : p + l->slot;
			l->a = p < other ? p : other;
			l->b = p < other ? other : p;
			l->n++;
			for (size_t i = 0; i < l->n; i++) {
				if (l->obj[i] == l->a)
					l->ia = i;
				if (l->obj[i] == l->b)
					l->ib = i;
			}
			return;
		}
		set_add(u);
	}
	die("found no two objects in adjacent slots");
}

static void report_neighbours(const struct layout *l)
{
	printf("neighbour=%s\n", canary_intact(l->b, l->size, l->ib) ? "intact" : "overwritten");
	size_t damaged = 0;
	for (size_t i = 0; i < l->n; i++)
		if (i != l->ia && i != l->ib && !canary_intact(l->obj[i], l->size, i))
			damaged++;
	if (damaged)
		printf("canaries=damaged:%zu\n", damaged);
	else
		printf("canaries=intact\n");
}

static size_t arg(char **argv, int i)
{
	char *end;
	unsigned long long v = strtoull(argv[i], &end, 10);
	if (*end != '\0')
		die("bad number");
	return (size_t)v;
}

static int overflow_case(int argc, char **argv)
{
	const char *op = argv[1];
	int want = strcmp(op, "strncpy") == 0 || strcmp(op, "strcat") == 0 ? 6 : 5;
	if (argc != want)
		die("wrong number of arguments");
	size_t size = arg(argv, 2), off = arg(argv, 3);
	struct layout l;
	find_adjacent(&l, size);
	if (off >= l.slot)
		die("offset beyond the slot");
	size_t room = l.slot - off;
	char *d = (char *)l.a + off;
	size_t probe = 2 * l.slot - off; /* readable bytes from d: a's slot and b */
	size_t own = malloc_usable_size(l.a); /* a's own bytes */
	if (own > l.slot)
		own = l.slot;
	memset(l.a, 'Z', own); /* to see what changed */
	printf("room=%zu\n", room);

	int content = 1;
	void *ret;
	size_t len;
	if (strcmp(op, "strcpy") == 0) {
		size_t srclen = arg(argv, 4);
		char *src = make_src(srclen, 'a');
		ret = strcpy_fn(d, src);
		len = strnlen(d, probe);
		content = len <= srclen && memcmp(d, src, len) == 0;
	} else if (strcmp(op, "strncpy") == 0) {
		size_t srclen = arg(argv, 4), n = arg(argv, 5);
		char *src = make_src(srclen, 'a');
		ret = strncpy_fn(d, src, n);
		len = strnlen(d, n < probe ? n : probe); /* no NUL when srclen >= n */
		size_t copied = srclen < n ? srclen : n;
		size_t reach = n < room ? n : room; /* bytes the call may write */
		content = len <= copied && memcmp(d, src, len < copied ? len : copied) == 0;
		for (size_t i = copied; i < reach; i++) /* strncpy pads with NULs */
			if (d[i] != '\0')
				content = 0;
		for (size_t i = off + reach; i < own && reach == n; i++) /* beyond n: untouched */
			if (l.a[i] != 'Z')
				content = 0;
	} else if (strcmp(op, "strcat") == 0) {
		size_t prelen = arg(argv, 4), srclen = arg(argv, 5);
		if (prelen >= room)
			die("PRELEN must fit in the slot");
		char *pre = make_src(prelen, 'n');
		char *src = make_src(srclen, 'a');
		memcpy(d, pre, prelen + 1);
		ret = strcat_fn(d, src);
		len = strnlen(d, probe);
		content = len >= prelen && len <= prelen + srclen && memcmp(d, pre, prelen) == 0 &&
		          memcmp(d + prelen, src, len - prelen) == 0;
	} else if (strcmp(op, "memcpy") == 0) {
		size_t n = arg(argv, 4);
		char *src = make_src(n, 'a');
		ret = memcpy_fn(d, src, n);
		size_t limit = n < probe ? n : probe;
		for (len = 0; len < limit && d[len] == src[len]; len++)
			;
		for (size_t i = off + len; i < own && len == n; i++) /* beyond n: untouched */
			if (l.a[i] != 'Z')
				content = 0;
	} else {
		die("unknown operation");
	}
	printf("len=%zu\n", len);
	printf("content=%s\n", content ? "ok" : "bad");
	printf("ret=%s\n", ret == d ? "ok" : "bad");
	report_neighbours(&l);
	return 0;
}

/* In-bounds copies must be exact, wherever the destination is. */
static int normal_case(void)
{
	static char global_dst[512];
	char stack_dst[512];
	long page = sysconf(_SC_PAGESIZE);
	char *mapped = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mapped == MAP_FAILED)
		die("mmap");
	char *big_src = make_src(300, 'a');
	int bad = 0;

	for (size_t n = 0; n <= 300; n++) {
		char *src = make_src(n, 'a');
		/* Heap destinations that fit exactly: the last byte must arrive. */
		char *h = xmalloc(n + 1);
		if (strcpy_fn(h, src) != h || strcmp(h, src) != 0)
			bad |= 1;
		memset(h, 'Z', n + 1);
		if (memcpy_fn(h, src, n + 1) != h || memcmp(h, src, n + 1) != 0)
			bad |= 2;
		memset(h, 'Z', n + 1);
		if (strncpy_fn(h, src, n + 1) != h || memcmp(h, src, n + 1) != 0)
			bad |= 4;
		if (n >= 2) {
			memcpy(h, src, 2);
			h[2] = '\0';
			if (strcat_fn(h, src + 2) != h || strcmp(h, src) != 0)
				bad |= 8;
		}
		/* Interior heap destination, exact fit up to the end of the usable size. */
		size_t us = malloc_usable_size(h);
		if (us > n + 1) {
			char *d = h + (us - n - 1);
			if (strcpy_fn(d, src) != d || strcmp(d, src) != 0)
				bad |= 16;
		}
		/* strncpy pads with NULs up to n and writes nothing beyond. */
		char *p = xmalloc(2 * n + 8);
		memset(p, 'Z', 2 * n + 8);
		strncpy_fn(p, src, 2 * n + 4);
		if (memcmp(p, src, n) != 0 || p[2 * n + 4] != 'Z' || p[2 * n + 7] != 'Z')
			bad |= 32;
		for (size_t i = n; i < 2 * n + 4; i++)
			if (p[i] != '\0')
				bad |= 32;
		/* Non-heap destinations are never limited. */
		if (strcpy_fn(stack_dst, src) != stack_dst || strcmp(stack_dst, src) != 0)
			bad |= 64;
		if (memcpy_fn(global_dst, big_src, n) != global_dst || memcmp(global_dst, big_src, n) != 0)
			bad |= 128;
		if (strcpy_fn(mapped + 100, src) != mapped + 100 || strcmp(mapped + 100, src) != 0)
			bad |= 256;
		free(p);
		free(h);
		free(src);
	}
	/* Large objects: copies that fit are exact. */
	char *big = xmalloc(200000);
	char *src = make_src(199999, 'a');
	if (strcpy_fn(big, src) != big || strcmp(big, src) != 0)
		bad |= 512;
	memset(big, 'Z', 200000);
	if (memcpy_fn(big, src, 200000) != big || memcmp(big, src, 200000) != 0)
		bad |= 1024;
	free(big);
	free(src);
	free(big_src);
	munmap(mapped, (size_t)page);
	if (bad) {
		printf("normal: FAILED mask=%d\n", bad);
		return 1;
	}
	printf("normal: ok\n");
	return 0;
}

/* An overflow of a large object must not silently reach another object:
 * it is either cut at the object's end or stopped by a guard page.  A fault
 * is caught and reported, so the neighbour can be checked either way. */
static sigjmp_buf fault_jmp;

static void on_fault(int sig)
{
	siglongjmp(fault_jmp, sig);
}

static int large_case(void)
{
	size_t size = 100000, over = 8192;
	unsigned char *l = xmalloc(size);
	unsigned char *m = xmalloc(size);
	fill_canary(m, size, 4242);
	char *src = make_src(size + over, 'a');
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fault;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(fault_jmp, 1) == 0) {
		memcpy_fn(l, src, size + over);
		printf("large: survived\n");
	} else {
		printf("large: faulted\n");
	}
	printf("neighbour=%s\n", canary_intact(m, size, 4242) ? "intact" : "overwritten");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: safestr strcpy|strncpy|strcat|memcpy|normal|large ARGS...");
	if (strcmp(argv[1], "normal") == 0)
		return normal_case();
	if (strcmp(argv[1], "large") == 0)
		return large_case();
	return overflow_case(argc, argv);
}
