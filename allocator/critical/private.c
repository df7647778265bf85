/* private.c — critical memory's backend inside libdiehard-critical.so: a
 * randomized DieHard heap of its own (backend.h), for critical objects and
 * their shadows only. The program's other objects stay on its own malloc.
 *
 * Configured by the same variables as libdiehard.so (DIEHARD_SEED, DIEHARD_M,
 * DIEHARD_WINDOW); never filled, no statistics. All calls come under
 * critical.c's lock, so one random stream serves them.
 */
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "config.h"
#include "heap.h"
#include "large.h"
#include "msg.h"
#include "random.h"
#include "sizeclass.h"

/* A class region of up to 1 GiB: critical data is a small part of a program. */
#define PRIVATE_REGION_SHIFT 30u

static struct heap *heap;
static struct large *large;
static struct rng rng;

static void *private_alloc(size_t n)
{
	if (n <= SMALL_MAX)
		return heap_alloc(heap, sizeclass_of(n), &rng, false);
	return large_alloc(large, n, 0, &rng, false, false);
}

static void private_release(void *p)
{
	if (heap_contains(heap, p))
		(void)heap_free(heap, p);
	else
		(void)large_free(large, p);
}

static void fork_prepare(void)
{
	large_lock(large);
	heap_lock_all(heap);
}

static void fork_parent(void)
{
	heap_unlock_all(heap);
	large_unlock(large);
}

static void fork_child(void)
{
	heap_reset_locks(heap);
	large_reset_lock(large);
}

const struct crit_backend *crit_backend(void)
{
	static struct crit_backend be = { .alloc = private_alloc, .release = private_release, .free_foreign = free };
	struct config cfg;
	config_load_heap(&cfg);
	heap = heap_create(&cfg, PRIVATE_REGION_SHIFT);
	if (heap != NULL)
		large = large_create(&cfg, heap);
	if (heap == NULL || large == NULL) {
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: critical: cannot reserve the heap's address space; critical_malloc will fail");
		msg_send(&m);
		return NULL;
	}
	rng_derive(&rng, cfg.seed, 0x637269746963616cULL);
	(void)pthread_atfork(fork_prepare, fork_parent, fork_child);
	be.heap = heap;
	return &be;
}
