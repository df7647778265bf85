/* test_critical.c — critical memory (allocator/critical/critical.c) over its
 * own heap (libdiehard-critical.so's build), under ASan and UBSan: round
 * trips, repair of each copy, what cannot be repaired, corrupted metadata,
 * misuse, and random operations checked against a plain model while single
 * copies are corrupted at random, from several threads at once.
 */
#include <diehard/critical.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "critical/backend.h"
#include "tap.h"

static struct critical_counts counts(void)
{
	struct critical_counts c;
	critical_counts(&c);
	return c;
}

/* Frees an object of its own: every thread's one-record cache is dropped,
 * so the next access looks its object up in the table. */
static void drop_caches(void)
{
	critical_free(critical_malloc(8));
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void basics(void)
{
	unsigned char want[100], got[100];
	for (int i = 0; i < 100; i++)
		want[i] = (unsigned char)(i * 7 + 1);
	unsigned char *p = critical_malloc(100);
	CHECK(p != NULL && critical_is(p) && critical_is(p + 99) && !critical_is(want), "critical_malloc, critical_is");
	critical_store(p, want, 100);
	critical_load(got, p, 100);
	CHECK(memcmp(got, want, 100) == 0 && memcmp(p, want, 100) == 0, "store then load: the same bytes, object written too");

	struct critical_counts before = counts();
	p[10] ^= 0xff; /* a stray plain write */
	p[70] = 0;
	critical_load(got, p + 8, 4);
	CHECK(memcmp(got, want + 8, 4) == 0 && p[10] == want[10] && p[70] == want[70],
	      "a stray write into the object is repaired, all of the object");
	CHECK(counts().repaired == before.repaired + 1 && counts().detected == before.detected + 1, "counted once");

	void *obj, *sh[2], *entry, *mirror;
	CHECK(crit_test_parts(p + 50, &obj, sh, &entry, &mirror) && obj == p && entry != NULL, "parts found");
	unsigned char *s0 = sh[0], *s1 = sh[1];
	CHECK(memcmp(s0, want, 100) == 0 && memcmp(s1, want, 100) == 0, "both shadows hold the data");
	CHECK((uintptr_t)s0 - (uintptr_t)p >= 100 && (uintptr_t)p - (uintptr_t)s0 >= 100 &&
		      (uintptr_t)s1 - (uintptr_t)s0 >= 100 && (uintptr_t)s0 - (uintptr_t)s1 >= 100,
	      "three separate objects");

	/* A corrupted shadow: seen within two swap periods of loads. */
	before = counts();
	s1[20] ^= 0x5a;
	s0[30] ^= 0x33;
	for (int i = 0; i < 250; i++)
		critical_load(got, p, 100);
	CHECK(s0[30] == want[30] && s1[20] == want[20] && memcmp(got, want, 100) == 0, "corrupted shadows are repaired");
	CHECK(counts().repaired > before.repaired, "and counted");

	/* Three different bytes: no majority. */
	before = counts();
	p[5] = 1;
	s0[5] = 2;
	s1[5] = 3;
	critical_load(got, p, 8);
	CHECK(counts().unrepairable == before.unrepairable + 1 && got[5] == 1 && s0[5] == 1 && s1[5] == 1,
	      "no majority: counted, the object's byte kept in all three");

	/* Past the end. */
	before = counts();
	unsigned char big[120];
	memset(big, 0xee, sizeof big);
	critical_store(p + 90, big, 20);
	CHECK(counts().out_of_bounds == before.out_of_bounds + 1 && p[89] == want[89] && p[90] == 0xee &&
		      p[99] == 0xee && s0[99] == 0xee,
	      "a store past the end writes the object's part");
	critical_free(p);
	CHECK(!critical_is(p) && counts().bad_frees == before.bad_frees, "freed");
}

static void uninitialized(void)
{
	struct critical_counts before = counts();
	uint64_t *p = critical_malloc(16), v;
	critical_load(&v, p, sizeof v);
	CHECK(v == 0xa5a5a5a5a5a5a5a5ULL && counts().uninitialized == before.uninitialized + 1,
	      "an uninitialized critical load: the sentinel, counted");
	critical_store_u64(p + 1, 42);
	CHECK(critical_load_u64(p + 1) == 42 && counts().uninitialized == before.uninitialized + 1,
	      "stored bytes are not uninitialized");
	critical_free(p);
	uint32_t *z = critical_calloc(10, sizeof *z);
	CHECK(z != NULL && critical_load_u32(z + 9) == 0 && counts().uninitialized == before.uninitialized + 1,
	      "critical_calloc: zero, initialized");
	critical_free(z);
	errno = 0;
	CHECK(critical_calloc(SIZE_MAX / 2, 4) == NULL && errno == ENOMEM, "critical_calloc overflow: ENOMEM");
}

static void misuse(void)
{
	struct critical_counts before = counts();
	void *p = critical_malloc(32);
	critical_free(p);
	critical_free(p);
	char stack[16];
	critical_free(stack);
	void *m = malloc(8);
	critical_free(m);
	free(m);
	critical_free(NULL);
	CHECK(counts().bad_frees == before.bad_frees + 3, "double, stack and foreign critical_free: counted, ignored");
	errno = 0;
	CHECK(critical_realloc(stack, 8) == NULL && errno == EINVAL, "critical_realloc of a foreign pointer: EINVAL");
	critical_demote(stack);
	CHECK(counts().bad_frees == before.bad_frees + 5, "and counted, as is demote of no promoted range");
	char plain[4] = "abc", out[4];
	critical_store(plain, "xyz", 3);
	critical_load(out, plain, 4);
	CHECK(memcmp(plain, "xyz", 4) == 0 && memcmp(out, "xyz", 4) == 0, "on plain memory: memmove");
}

static void realloc_promote(void)
{
	unsigned char *p = critical_malloc(10);
	critical_store(p, "0123456789", 10);
	p[3] = 'X'; /* corrupted before the move: the move votes first */
	unsigned char *q = critical_realloc(p, 5000);
	char got[11] = { 0 };
	critical_load(got, q, 10);
	CHECK(q != NULL && memcmp(got, "0123456789", 10) == 0, "realloc keeps the voted contents");
	struct critical_counts before = counts();
	uint64_t tail;
	critical_load(&tail, q + 4000, 8);
	CHECK(counts().uninitialized == before.uninitialized + 1, "the grown tail is uninitialized");
	q = critical_realloc(q, 3);
	critical_load(got, q, 3);
	CHECK(memcmp(got, "012", 3) == 0, "shrinking keeps the head");
	CHECK(critical_realloc(q, 0) == NULL && !critical_is(q), "realloc to 0 frees");

	static char table[64] = "static data";
	CHECK(critical_promote(table, sizeof table) == 0 && critical_is(table + 63), "promote static memory");
	errno = 0;
	CHECK(critical_promote(table + 8, 8) == -1 && errno == EINVAL, "overlapping promote: EINVAL");
	table[0] = 'S';
	critical_load(got, table, 6);
	CHECK(memcmp(got, "static", 6) == 0 && table[0] == 's', "a promoted range is repaired");
	critical_demote(table);
	table[0] = 'S';
	critical_load(got, table, 6);
	CHECK(!critical_is(table) && got[0] == 'S', "demoted: plain again");
	char *m = malloc(300);
	memset(m, 7, 300);
	CHECK(critical_promote(m, 300) == 0, "promote a malloc'd object");
	critical_free(m); /* demotes and frees: ASan checks the free */
	CHECK(!critical_is(m), "critical_free of a promoted object frees it");

	/* A large object spans many granules. */
	size_t n = 300000;
	unsigned char *big = critical_malloc(n);
	critical_store_u64((uint64_t *)(big + n - 8), 77);
	big[n - 5] ^= 1;
	CHECK(critical_load_u64((uint64_t *)(big + n - 8)) == 77, "a large object: found from its last page, repaired");
	critical_free(big);
}

static void metadata(void)
{
	uint64_t *p = critical_malloc(64);
	critical_store_u64(p, 1234);
	void *obj, *sh[2], *entry, *mirror;
	CHECK(crit_test_parts(p, &obj, sh, &entry, &mirror), "parts");
	struct critical_counts before = counts();
	/* Garbage in the table's entry (not its key): restored from the mirror. */
	memset((char *)entry + 8, 0x41, 48);
	drop_caches();
	CHECK(critical_load_u64(p) == 1234 && critical_is(p) && counts().metadata_repairs > before.metadata_repairs,
	      "a corrupted table entry is restored from the mirror");
	/* Garbage in the mirror: restored from the entry when next locked. */
	CHECK(crit_test_parts(p, &obj, sh, &entry, &mirror), "parts again");
	before = counts();
	memset(mirror, 0x42, 64);
	critical_free(p);
	CHECK(!critical_is(p) && counts().bad_frees == before.bad_frees &&
		      counts().metadata_repairs > before.metadata_repairs,
	      "a corrupted mirror is restored; the free goes through");
	/* Both corrupted: the object is lost to critical memory, nothing crashes. */
	p = critical_malloc(64);
	critical_store_u64(p, 99);
	CHECK(crit_test_parts(p, &obj, sh, &entry, &mirror), "parts of another");
	memset((char *)entry + 8, 0x43, 56);
	memset(mirror, 0x44, 64);
	drop_caches();
	uint64_t v;
	critical_load(&v, p, 8);
	CHECK(v == 99 && !critical_is(p), "both copies corrupted: plain loads");
	before = counts();
	critical_free(p);
	CHECK(counts().bad_frees == before.bad_frees + 1, "and its free is refused");
}

/* Random operations on a thread's own objects, checked against a model,
 * with one copy of a random object corrupted at a random byte now and then:
 * never a second copy at a byte whose corruption may be outstanding (two
 * wrong copies of three out-vote the right one: no repair can exist), so
 * every load must be right. */
struct worker {
	uint64_t seed;
	int ops;
	int wrong;
};

#define WOBJ 64
static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned char *obj[WOBJ] = { 0 }, *model[WOBJ] = { 0 }, *mark[WOBJ] = { 0 };
	size_t size[WOBJ] = { 0 };
	unsigned char buf[512];
	for (int op = 0; op < w->ops; op++) {
		int i = (int)(rnd(&w->seed) % WOBJ);
		uint64_t r = rnd(&w->seed);
		if (obj[i] == NULL || r % 50 == 0) {
			if (obj[i] != NULL) {
				critical_free(obj[i]);
				free(model[i]);
				free(mark[i]);
			}
			size[i] = 1 + (size_t)(rnd(&w->seed) % 300);
			obj[i] = critical_calloc(1, size[i]);
			model[i] = calloc(1, size[i]);
			mark[i] = calloc(1, size[i]); /* 1 + the copy corrupted at each byte */
			continue;
		}
		size_t off = (size_t)(rnd(&w->seed) % size[i]);
		size_t len = 1 + (size_t)(rnd(&w->seed) % (size[i] - off));
		if (r % 3 == 0) {
			for (size_t k = 0; k < len; k++)
				buf[k] = (unsigned char)rnd(&w->seed);
			critical_store(obj[i] + off, buf, len);
			memcpy(model[i] + off, buf, len);
			memset(mark[i] + off, 0, len);
		} else if (r % 3 == 1) {
			critical_load(buf, obj[i] + off, len);
			if (memcmp(buf, model[i] + off, len) != 0)
				w->wrong++;
		} else {
			/* corrupt one copy at one byte */
			void *o, *sh[2], *e, *m;
			unsigned c = (unsigned)(rnd(&w->seed) % 3);
			if ((mark[i][off] == 0 || mark[i][off] == c + 1) && crit_test_parts(obj[i], &o, sh, &e, &m)) {
				unsigned char *which[3] = { o, sh[0], sh[1] };
				which[c][off] ^= (unsigned char)(1 + rnd(&w->seed) % 255);
				mark[i][off] = (unsigned char)(c + 1);
			}
		}
	}
	for (int i = 0; i < WOBJ; i++)
		if (obj[i] != NULL) {
			critical_load(buf, obj[i], size[i]);
			if (memcmp(buf, model[i], size[i]) != 0)
				w->wrong++;
			critical_free(obj[i]);
			free(model[i]);
			free(mark[i]);
		}
	return NULL;
}

static void random_ops(void)
{
	unsigned long long live = counts().objects;
	struct worker one = { .seed = 88172645463325252ULL, .ops = 200000 };
	(void)work(&one);
	CHECK(one.wrong == 0, "200000 random operations, single copies corrupted: every load right (%d wrong)", one.wrong);

	pthread_t t[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .seed = 1000003ULL * (uint64_t)(i + 1), .ops = 60000 };
		CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0, "thread %d started", i);
	}
	/* Meanwhile the table grows and shrinks under them. */
	static void *many[20000];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 20000; i++)
			many[i] = critical_malloc(24);
		for (int i = 0; i < 20000; i++)
			critical_free(many[i]);
	}
	int wrong = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		wrong += w[i].wrong;
	}
	CHECK(wrong == 0, "4 threads with their own critical data, the table growing beside them: every load right");
	CHECK(counts().objects == live, "nothing left live");
}

int main(void)
{
	basics();
	uninitialized();
	misuse();
	realloc_promote();
	metadata();
	random_ops();
	return tap_done();
}
