/* cache.h — each thread's batches of claimed slots and of pending frees.
 *
 * Design: malloc pops a slot the thread claimed earlier, in a batch, from the
 * shared bitmap (heap_claim: uniformly random free slots, so placement is
 * exactly as random as claiming one at a time). free only validates the
 * pointer (lock-free: alignment and bounds) and appends it to a pending list;
 * a full list is released in one batch (heap_release), where a double free is
 * recognised by its bit being already clear.
 *
 * What this keeps from DieHard: a freed slot is never handed out again by the
 * thread that freed it; it goes back to the shared bitmap, and only after a
 * delay (the pending list), which makes reuse of a dangling object's slot
 * even less likely than in the paper. The 1/M bound counts cached slots as
 * live, so it still holds.
 *
 * Thread exit returns everything through a pthread key destructor; a thread
 * whose cache has been torn down (allocating from a later destructor) goes
 * straight to the heap. State is initial-exec TLS.
 */
#ifndef DIEHARD_CACHE_H
#define DIEHARD_CACHE_H

#include "heap.h"

#define CACHE_MAX 32u

struct cache_class {
	unsigned nclaimed;
	unsigned nfreed;
	void *claimed[CACHE_MAX];
	void *freed[CACHE_MAX];
};

enum cache_state { CACHE_NEW, CACHE_ACTIVE, CACHE_DEAD };

struct cache {
	int state;
	struct cache_class cls[NCLASSES];
};

extern __thread struct cache cache_self __attribute__((tls_model("initial-exec")));

/* Batch size of class ci: 32 small objects, fewer large ones, so a thread
 * holds at most a few tens of KiB of claimed slots per class. */
static inline unsigned cache_batch(unsigned ci)
{
	unsigned k = 32768u >> sizeclass_shift(ci);
	return k < 4 ? 4 : k > CACHE_MAX ? CACHE_MAX : k;
}

/* Once per process, with the heap every cache feeds. False if thread-exit
 * cleanup cannot be arranged: then caches stay off and every call goes to
 * the heap directly. */
bool cache_setup(struct heap *h);

/* Slow paths. */
void *cache_refill(struct heap *h, unsigned ci, struct rng *r);
void cache_free_slow(struct heap *h, unsigned ci, void *p);
void cache_flush(struct heap *h, unsigned ci);

/* A claimed slot of class ci, or NULL with ENOMEM. */
static inline void *cache_alloc(struct heap *h, unsigned ci, struct rng *r)
{
	struct cache_class *c = &cache_self.cls[ci];
	if (__builtin_expect(c->nclaimed > 0, 1))
		return c->claimed[--c->nclaimed];
	return cache_refill(h, ci, r);
}

/* Frees p, which passed heap_check and is of class ci. */
static inline void cache_free(struct heap *h, unsigned ci, void *p)
{
	struct cache_class *c = &cache_self.cls[ci];
	if (__builtin_expect(cache_self.state != CACHE_ACTIVE, 0)) {
		cache_free_slow(h, ci, p);
		return;
	}
	c->freed[c->nfreed++] = p;
	if (c->nfreed >= cache_batch(ci))
		cache_flush(h, ci);
}

/* Returns every cached slot of the calling thread to the heap. */
void cache_drain(struct heap *h);

#endif
