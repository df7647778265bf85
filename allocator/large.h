/* large.h — objects above SMALL_MAX, each in its own mapping.
 *
 * Design:
 * - Layout [guard page][object, page-rounded][guard page]; the guards are
 *   PROT_NONE, so running off either end faults instead of corrupting.
 * - Every live object is in a hash table keyed by its address (metadata in a
 *   guarded mapping of its own). free accepts only exact keys: an interior or
 *   foreign pointer is counted and ignored (the paper's validity check).
 * - A freed object's address range is not returned at once: it is made
 *   PROT_NONE (its memory released) and kept in a quarantine ring. A dangling
 *   access then faults, a second free is recognised as a double free, and the
 *   address cannot be handed to a new object and freed by the stale pointer.
 *   The oldest entries are unmapped when the ring or its address budget fills.
 *   Recently freed objects keep their pages (inaccessible, within a budget of
 *   resident memory), and a new object may reuse the oldest fitting range:
 *   what glibc gains by reusing warm heap memory, without fresh page faults,
 *   while every just-freed object still faults for the next few frees.
 * - vm.max_map_count: each guarded object costs up to three mappings. Past a
 *   budget derived from the limit, new objects get no guard pages (counted).
 * - realloc grows in place into an inaccessible reservation (one mprotect),
 *   or, past it, moves the pages with mremap (no copy) to a new reservation
 *   twice the size, so growing by small steps costs O(log n) moves (each
 *   move flushes TLBs: ~3 ms for a few MiB on the VMs we measured). Shrinking
 *   returns the tail to the reservation. Beyond the accessible size there is
 *   always an inaccessible page, so the trailing guard holds throughout.
 *
 * All state is under one lock: large objects are rare and each costs system
 * calls far dearer than the lock.
 */
#ifndef DIEHARD_LARGE_H
#define DIEHARD_LARGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "heap.h"
#include "pool.h"
#include "random.h"

struct large_entry {
	uintptr_t user;   /* what malloc returned; 0 = empty slot */
	size_t size;      /* accessible bytes at user, page multiple */
	uintptr_t map;    /* whole reservation: guards and room to grow included */
	size_t map_len;
	size_t align;
	/* In the quarantine only: */
	bool retained;    /* pages still resident, for reuse */
	uint64_t seq;     /* which free put it there */
};

#define LARGE_QUARANTINE 256

struct large {
	pthread_mutex_t lock;
	struct large_entry *table; /* open addressing, linear probing */
	size_t slots;              /* power of two */
	size_t count;
	size_t guarded;            /* live objects with guard pages */
	size_t guard_budget;       /* most guarded objects we allow */
	struct large_entry quarantine[LARGE_QUARANTINE];
	size_t q_next;             /* ring position of the next entry */
	size_t q_bytes;            /* address space held by the ring */
	size_t retained_bytes;     /* resident memory held by the ring */
	uint64_t q_seq;            /* frees so far */
	bool fill;
	struct pool pool;     /* lazily random pages for big objects, fill mode */
	struct heap *counter; /* live and peak bytes, with stats on */
	/* Statistics. */
	size_t live_bytes;
	size_t allocations;
	size_t frees;
	size_t unguarded;
};

/* NULL on failure (errno set). With stats on, live bytes are added to
 * counter's, so its peak covers both kinds of object. */
struct large *large_create(const struct config *cfg, struct heap *counter);
void large_destroy(struct large *l);

/* A new object of at least size bytes aligned to align (a power of two);
 * random-filled when fill, all zero when zeroed (else possibly stale bytes
 * of a reused range). NULL with errno ENOMEM. */
void *large_alloc(struct large *l, size_t size, size_t align, struct rng *r, bool fill, bool zeroed);

/* HEAP_FREED, HEAP_DOUBLE (in quarantine), or HEAP_INVALID (never ours). */
enum heap_verdict large_free(struct large *l, void *p);

/* Accessible bytes of the live object at p; 0 when p is not one. */
size_t large_usable(struct large *l, const void *p);

/* Resizes the live object p to at least size (> SMALL_MAX) bytes, in place or
 * by moving its pages; the grown part is random-filled when the config says
 * fill. Returns the new address, or NULL with errno ENOMEM (p untouched).
 * *known is false when p is not a live large object. */
void *large_resize(struct large *l, void *p, size_t size, struct rng *r, bool *known);

void large_lock(struct large *l);
void large_unlock(struct large *l);
void large_reset_lock(struct large *l);

#endif
