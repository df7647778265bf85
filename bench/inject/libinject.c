/* libinject.c — the fault injector (allocator/inject.h) over glibc's malloc,
 * for the glibc column of bench/tolerance and for recording traces:
 *
 *   LD_PRELOAD=build/libinject.so DIEHARD_INJECT=trace=FILE CMD
 *   LD_PRELOAD=build/libinject.so DIEHARD_INJECT=overflow=0.01:4,seed=7 CMD
 *
 * It wraps malloc, calloc, realloc and free around glibc's exported
 * __libc_malloc family (no dlsym, so nothing to bootstrap); everything else
 * (memalign, malloc_usable_size, ...) stays glibc's own. The injector starts
 * at the first call, as libdiehard's does, so both number allocations alike. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

#define EXPORT __attribute__((visibility("default")))

static atomic_int state; /* 0: not started, 1: starting, 2: started */

static void start(void)
{
	int expected = 0;
	if (atomic_compare_exchange_strong(&state, &expected, 1)) {
		const char *spec = getenv("DIEHARD_INJECT");
		if (spec != NULL && spec[0] != '\0')
			inject_start(spec, __libc_free);
		atomic_store(&state, 2);
	}
}

static inline bool on(void)
{
	if (__builtin_expect(atomic_load_explicit(&state, memory_order_acquire) != 2, 0))
		start();
	return inject_on;
}

EXPORT void *malloc(size_t size)
{
	if (!on())
		return __libc_malloc(size);
	uint64_t idx;
	void *p = __libc_malloc(inject_request(size, &idx));
	inject_allocated(p, size, idx);
	return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;
	if (!on() || __builtin_mul_overflow(n, size, &total))
		return __libc_calloc(n, size);
	uint64_t idx;
	void *p = __libc_calloc(1, inject_request(total, &idx));
	inject_allocated(p, total, idx);
	return p;
}

EXPORT void *realloc(void *p, size_t size)
{
	if (p == NULL)
		return malloc(size);
	if (!on())
		return __libc_realloc(p, size);
	if (size == 0) {
		free(p);
		return NULL;
	}
	void *q = __libc_realloc(p, size);
	if (q != NULL && q != p)
		inject_moved(p, q);
	return q;
}

EXPORT void free(void *p)
{
	if (on() && inject_free(p))
		return;
	__libc_free(p);
}
