/* arena.h — the shared-memory arena that holds replicas' output.
 *
 * One memfd holds every ring: per replica and stream the bytes not yet
 * verified, and per stream the recently committed bytes (to check replicas
 * that arrive late). Each ring is mapped twice back to back ("magic ring"),
 * so any window of up to its size is contiguous: the supervisor read(2)s a
 * pipe straight into a ring and hands the voter pointers into it, with no
 * copying and no wrap-around cases. Rings are a power of two, a multiple of
 * the 4 KiB chunk.
 */
#ifndef DIEHARD_ARENA_H
#define DIEHARD_ARENA_H

#include <stdbool.h>
#include <stddef.h>

struct ring {
	unsigned char *base; /* two consecutive views of the same size bytes */
	size_t size;
	size_t head; /* stream offset of the oldest byte held */
	size_t tail; /* stream offset just past the newest byte */
};

struct arena;

/* An arena of n rings of size bytes each; NULL with errno on failure. */
struct arena *arena_create(unsigned n, size_t size);
void arena_destroy(struct arena *a);
struct ring *arena_ring(struct arena *a, unsigned i);

static inline size_t ring_used(const struct ring *r)
{
	return r->tail - r->head;
}

static inline size_t ring_free(const struct ring *r)
{
	return r->size - ring_used(r);
}

/* The byte at stream offset off (head <= off <= tail), contiguous for up to
 * size bytes. */
static inline unsigned char *ring_at(const struct ring *r, size_t off)
{
	return r->base + (off & (r->size - 1));
}

/* Drops bytes before off. */
static inline void ring_consume_to(struct ring *r, size_t off)
{
	if (off > r->head)
		r->head = off < r->tail ? off : r->tail;
}

/* Appends len bytes, dropping the oldest ones if needed (history rings). */
void ring_push_overwrite(struct ring *r, const unsigned char *p, size_t len);

#endif
