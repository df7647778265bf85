/* bufpool.h — buffers of one size kept for reuse (bufpool.c). */
#ifndef DIEHARD_BUFPOOL_H
#define DIEHARD_BUFPOOL_H

#include <stddef.h>

struct bufpool;

/* A pool of `size`-byte buffers that keeps at most `keep` idle ones. */
struct bufpool *bufpool_new(size_t size, unsigned keep);
/* A buffer of the pool's size: an idle one, else a new one. */
unsigned char *bufpool_get(struct bufpool *P);
/* Gives b (cap bytes, NULL allowed) back: kept when it has the pool's size
 * and fewer than `keep` are idle, else freed. */
void bufpool_put(struct bufpool *P, unsigned char *b, size_t cap);
/* Idle buffers kept now. */
unsigned bufpool_idle(const struct bufpool *P);
void bufpool_free(struct bufpool *P);

#endif
