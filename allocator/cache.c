/* cache.c — slow paths of the per-thread cache. See cache.h. */
#include "cache.h"

#include <pthread.h>

#include "keyed.h"

__thread struct cache cache_self __attribute__((tls_model("initial-exec")));

static pthread_key_t exit_key;
static struct heap *cache_heap;
static bool caches_on;

static void at_thread_exit(void *unused)
{
	(void)unused;
	cache_drain(cache_heap);
	cache_self.state = CACHE_DEAD;
	keyed_thread_exit();
}

bool cache_setup(struct heap *h)
{
	cache_heap = h;
	caches_on = pthread_key_create(&exit_key, at_thread_exit) == 0;
	return caches_on;
}

/* Makes the calling thread's cache usable; false when it cannot be. */
static bool start(void)
{
	if (cache_self.state == CACHE_ACTIVE)
		return true;
	if (cache_self.state == CACHE_DEAD || !caches_on)
		return false;
	/* Active first: pthread_setspecific may allocate, and that allocation
	 * must find a working cache, not recurse into this function. */
	cache_self.state = CACHE_ACTIVE;
	if (pthread_setspecific(exit_key, &cache_self) != 0) {
		cache_drain(cache_heap);
		cache_self.state = CACHE_DEAD;
		return false;
	}
	return true;
}

void *cache_refill(struct heap *h, unsigned ci, struct rng *r)
{
	struct cache_class *c = &cache_self.cls[ci];
	void *p;
	if (!start())
		return heap_claim(h, ci, r, &p, 1) == 1 ? p : NULL;
	c->nclaimed = heap_claim(h, ci, r, c->claimed, cache_batch(ci));
	if (c->nclaimed == 0)
		return NULL;
	return c->claimed[--c->nclaimed];
}

void cache_flush(struct heap *h, unsigned ci)
{
	struct cache_class *c = &cache_self.cls[ci];
	if (c->nfreed == 0)
		return;
	heap_release(h, ci, c->freed, c->nfreed, true);
	c->nfreed = 0;
}

void cache_free_slow(struct heap *h, unsigned ci, void *p)
{
	if (!start()) {
		heap_release(h, ci, &p, 1, true);
		return;
	}
	cache_free(h, ci, p);
}

void cache_drain(struct heap *h)
{
	for (unsigned ci = 0; ci < NCLASSES; ci++) {
		struct cache_class *c = &cache_self.cls[ci];
		cache_flush(h, ci);
		if (c->nclaimed > 0)
			heap_release(h, ci, c->claimed, c->nclaimed, false);
		c->nclaimed = 0;
	}
}
