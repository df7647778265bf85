/* live.h — for unit tests of the heap: the claimed slots of a class, summed
 * over its stripes, each read under its lock; a generator from a seed. */
#ifndef DIEHARD_TEST_LIVE_H
#define DIEHARD_TEST_LIVE_H

#include <pthread.h>

#include "heap.h"

/* A generator on the stream a heap seeded with seed would use first. */
static inline struct rng rng_with(uint64_t seed)
{
	struct rng r;
	const uint64_t s[2] = { seed, 0 };
	rng_derive(&r, s, 0);
	return r;
}

static inline size_t class_live(struct heap *h, unsigned ci)
{
	size_t n = 0;
	for (unsigned s = 0; s < HEAP_STRIPES; s++) {
		struct heap_class *c = heap_part(h, ci, s);
		pthread_mutex_lock(&c->lock);
		n += c->live;
		pthread_mutex_unlock(&c->lock);
	}
	return n;
}

#endif
