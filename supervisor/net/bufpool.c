/* bufpool.c — buffers of one size kept for reuse.
 *
 * A connection holds a buffer per side only while it holds live bytes
 * (conn.c: 1000 keep-alive connections between requests cost no buffers),
 * so a request/response exchange takes four 16 KiB buffers at k = 3 and
 * gives them back within microseconds. From malloc, that was four trips
 * through glibc's bins (16 KiB is past its per-thread cache) and, as the
 * heap's top grew and shrank, a brk about every ninth request: 5 % of
 * diehard's time under redis-benchmark -c 50. The pool keeps the idle ones
 * on a free list, threaded through their first bytes.
 *
 * Invariants: the list holds `idle` <= `keep` buffers, each `size` bytes,
 * owned by the pool; a buffer handed out is the caller's until put back.
 * Bounded memory: at most keep x size bytes idle (64 x 16 KiB = 1 MiB for
 * diehard's connections), whatever the peak. */
#include <stdlib.h>

#include "bufpool.h"
#include "exitcode.h"
#include "log.h"

struct bufpool {
	size_t size;  /* the buffers' size, as the callers know it */
	size_t alloc; /* what each is made with: room for the list's link */
	unsigned keep, idle;
	void *head; /* the idle buffers: each one's first bytes point to the next */
};

struct bufpool *bufpool_new(size_t size, unsigned keep)
{
	struct bufpool *P = calloc(1, sizeof *P);
	if (P == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	P->size = size;
	P->alloc = size < sizeof(void *) ? sizeof(void *) : size;
	P->keep = keep;
	return P;
}

unsigned char *bufpool_get(struct bufpool *P)
{
	void *b = P->head;
	if (b != NULL) {
		P->head = *(void **)b;
		P->idle--;
		return b;
	}
	if ((b = malloc(P->alloc)) == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return b;
}

void bufpool_put(struct bufpool *P, unsigned char *b, size_t cap)
{
	if (b == NULL)
		return;
	if (cap != P->size || P->idle >= P->keep) {
		free(b);
		return;
	}
	*(void **)(void *)b = P->head;
	P->head = b;
	P->idle++;
}

unsigned bufpool_idle(const struct bufpool *P)
{
	return P->idle;
}

void bufpool_free(struct bufpool *P)
{
	if (P == NULL)
		return;
	while (P->head != NULL) {
		void *b = P->head;
		P->head = *(void **)b;
		free(b);
	}
	free(P);
}
