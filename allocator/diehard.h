/* diehard.h — the process's one allocator instance, shared by the exported
 * entry points (entry.c) and the bounded string functions (strings.c).
 *
 * The instance is built on the first call of any entry point (there is no
 * constructor: ld.so and libc call malloc before constructors run) and is
 * immutable afterwards but for what heap and large guard themselves.
 */
#ifndef DIEHARD_DIEHARD_H
#define DIEHARD_DIEHARD_H

#include <stdatomic.h>
#include <stdbool.h>

#include "config.h"
#include "heap.h"
#include "large.h"

enum diehard_state { DIEHARD_UNINIT, DIEHARD_STARTING, DIEHARD_READY, DIEHARD_FAILED };

struct diehard {
	struct heap *heap;
	struct large *large;
	struct config cfg;
};

extern struct diehard diehard;
extern _Atomic int diehard_state;

/* Set once the instance is ready, when nothing watches single allocations
 * (no fill, statistics, keyed fills or fault injection): malloc and free
 * then take the thread cache's inline paths (entry.c). */
extern _Atomic bool diehard_plain;

/* Builds the instance; false when it cannot (then every allocation fails with
 * ENOMEM and a message said why). */
bool diehard_start(void);

/* The one-line summary DIEHARD_STATS=1 prints at exit (and malloc_stats). */
void diehard_report(void);

static inline bool diehard_ready(void)
{
	if (__builtin_expect(atomic_load_explicit(&diehard_state, memory_order_acquire) == DIEHARD_READY, 1))
		return true;
	return diehard_start();
}

/* Exported (exports.map), never called: the supervisor checks that the
 * library it is told to preload defines it, so a wrong -a (another .so,
 * one for another machine) is refused instead of running every replica on
 * glibc's malloc. A new number when what diehard relies on changes (the
 * DIEHARD_* variables it sets, the fill and seed semantics). */
extern const char diehard_abi_2[];

/* free without the injector's check (entry.c): the injector's early frees. */
void diehard_free_object(void *p) __attribute__((weak));

#endif
