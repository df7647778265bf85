/* extents.h — a file's data, extent by extent: what changes.c hashes and
 * commit.c copies, holes skipped (SEEK_DATA, SEEK_HOLE), so that a sparse
 * file costs its data alone (a `truncate -s 8E` is read in no time). */
#ifndef DIEHARD_EXTENTS_H
#define DIEHARD_EXTENTS_H

#include <stddef.h>
#include <sys/types.h>

#define EXTENT_BLOCK 4096 /* extents are read from their block's start */

/* fn(ctx, bytes, n, at): n bytes of the file at offset at; 0, or an errno
 * that ends the walk. */
typedef int (*extents_fn)(void *ctx, const char *bytes, size_t n, off_t at);

/* Calls fn for every data extent of fd (size bytes long), in order, read
 * in pieces of at most cap bytes into buf, each extent from the start of
 * its first block and no block twice. 0, or an errno (the read's or fn's). */
int extents_each(int fd, off_t size, char *buf, size_t cap, extents_fn fn, void *ctx);

#endif
