/* shared.c — critical memory's backend inside libdiehard.so: the process's
 * allocator (backend.h). */
#include <stdlib.h>

#include "backend.h"
#include "diehard.h"

static void *shared_alloc(size_t n)
{
	return malloc(n);
}

static void shared_free(void *p)
{
	free(p);
}

const struct crit_backend *crit_backend(void)
{
	static struct crit_backend be = { .alloc = shared_alloc, .release = shared_free, .free_foreign = shared_free };
	/* libdiehard.so loaded without being the process's malloc (dlopen, or
	 * linked after libc): malloc is then glibc's, whose objects the heap's
	 * arithmetic must not be used on. */
	void *probe = malloc(1);
	bool ours = diehard_ready() && heap_contains(diehard.heap, probe);
	free(probe);
	be.heap = ours ? diehard.heap : NULL;
	return &be;
}
