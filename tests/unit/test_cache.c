/* Unit tests of the per-thread cache: batches, pending frees, double frees
 * caught at release, no reuse by the freeing thread, drain at thread exit. */
#include <pthread.h>
#include <string.h>

#include "cache.h"
#include "live.h"
#include "tap.h"

static struct heap *h;


static void test_batches(void)
{
	struct rng r = rng_with(1);
	unsigned ci = 1, k = cache_batch(ci);
	CHECK(k == CACHE_MAX && cache_batch(NCLASSES - 1) == 4, "batch sizes: 32 small, 4 for 64 KiB");
	void *p = cache_alloc(h, ci, &r);
	CHECK(p != NULL && cache_self.cls[ci].nclaimed == k - 1, "first malloc claims a batch");
	CHECK(class_live(h, ci) == k, "the whole batch counts as live");
	CHECK(heap_usable(h, p) == 32, "the object is allocated in the bitmap");

	cache_free(h, ci, p);
	CHECK(cache_self.cls[ci].nfreed == 1 && heap_usable(h, p) == 32, "a free is pending, not yet released");
	int reused = 0;
	void *more[200];
	for (int i = 0; i < 200; i++) {
		more[i] = cache_alloc(h, ci, &r);
		reused += more[i] == p;
	}
	CHECK(reused == 0, "a pending-free slot is never handed out again");
	cache_free(h, ci, p); /* double free while still pending */
	size_t doubles = atomic_load(&h->double_frees);
	for (int i = 0; i < 200; i++)
		cache_free(h, ci, more[i]);
	cache_flush(h, ci);
	CHECK(atomic_load(&h->double_frees) == doubles + 1, "a double free is caught when the batch is released");
	CHECK(heap_usable(h, p) == 0, "released objects are free in the bitmap");
	CHECK(class_live(h, ci) == cache_self.cls[ci].nclaimed, "only the cached claims remain live");
}

static void *thread_body(void *arg)
{
	struct rng r = rng_with((uint64_t)(uintptr_t)arg);
	void *keep[100];
	for (int i = 0; i < 100; i++)
		keep[i] = cache_alloc(h, 3, &r);
	for (int i = 0; i < 100; i++)
		cache_free(h, 3, keep[i]);
	return NULL;
}

static void test_thread_exit(void)
{
	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread_body, (void *)(i + 10));
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(class_live(h, 3) == 0, "exited threads return their claims and pending frees");
}

int main(void)
{
	struct config cfg = { .seed = { 1, 2 }, .m_fixed = 2 * M_ONE, .safe_strings = true };
	h = heap_create(&cfg, 28);
	CHECK(h != NULL && cache_setup(h), "heap and caches set up");
	test_batches();
	test_thread_exit();
	return tap_done();
}
