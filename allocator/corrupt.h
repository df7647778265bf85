/* corrupt.h — the heap corruptor (DIEHARD_CORRUPT): random bytes written
 * into random heap objects, to show what critical memory (critical.h)
 * protects and what it does not.
 *
 *   DIEHARD_CORRUPT=rate=R[,bytes=B][,size=MIN-MAX][,seed=N]
 *
 * On each allocator call (malloc, calloc, realloc, free and their kin; a
 * realloc that moves its object also allocates and frees), with
 * probability R (0 to 1), one object is chosen at random from the small heap
 * (a stripe weighted by its live objects, as the Samurai paper's injector
 * weighs partitions, then a random claimed slot of it), a random offset in
 * it, and up to B bytes from there (default: to the slot's end, uniformly)
 * are overwritten with random bytes. size= chooses only among objects whose
 * slot is MIN to MAX bytes (the paper injected into critical data and into
 * the rest separately; this aims at one kind of object, and spares libc's
 * own, such as a thread's TLS vector, whose corruption ends any program
 * before it says anything). Which calls inject and what they write
 * follow from N alone (default 0), so a single-threaded run reproduces;
 * every replica under diehard gets the same draws on its own heap layout.
 * Large objects (above SMALL_MAX) are not chosen; nor is metadata, which is
 * not on the heap. A bad value prints one line and exits with 125.
 */
#ifndef DIEHARD_CORRUPT_H
#define DIEHARD_CORRUPT_H

#include <stdbool.h>

#include "heap.h"

extern bool corrupt_on;

void corrupt_start(const char *spec, struct heap *h);

/* An allocator call: maybe corrupt an object. */
void corrupt_tick(void);

/* Objects corrupted so far (statistics). */
unsigned long corrupt_count(void);

#endif
