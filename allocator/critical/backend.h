/* backend.h — where critical memory's objects and shadows come from.
 *
 * critical.c is built twice, each time with one backend:
 * - shared.c, inside libdiehard.so: the process's own allocator (malloc and
 *   free, which are libdiehard's when it is preloaded), so critical objects
 *   and their shadows lie among all the program's objects on the one
 *   randomized heap, and the fault injector (corrupt.h) reaches them too;
 * - private.c, inside libdiehard-critical.so (what -ldiehard-critical links
 *   when nothing is preloaded): a DieHard heap of its own, used only for
 *   critical objects and shadows, while the program's malloc stays glibc's.
 * A program linked with libdiehard-critical.so and run with libdiehard.so
 * preloaded (or under diehard) calls libdiehard's copy: preloaded symbols
 * come first, so the linked copy is never used.
 *
 * Every call but crit_backend is made with critical.c's lock held.
 */
#ifndef DIEHARD_CRITICAL_BACKEND_H
#define DIEHARD_CRITICAL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

struct heap;

struct crit_backend {
	/* The randomized small heap objects come from, for the slot arithmetic
	 * that finds an object from an interior pointer (heap.h); NULL: none. */
	struct heap *heap;
	/* n (> 0) bytes of any content; NULL when out of memory. */
	void *(*alloc)(size_t n);
	void (*release)(void *p);
	/* Frees a promoted object (the program's memory): the process's free. */
	void (*free_foreign)(void *p);
};

/* Starts the backend on first use; NULL when it cannot (a message said
 * why). Called once, under critical.c's start-up. */
const struct crit_backend *crit_backend(void);

/* For the unit tests (tests/unit/test_critical.c), which corrupt critical
 * memory's parts on purpose: the live object holding p, its shadows, and
 * its record's table entry and mirror (64 bytes each). False: none. */
bool crit_test_parts(const void *p, void **object, void *shadow[2], void **entry, void **mirror);

#endif
