/* extents.h — a file's data, extent by extent: what changes.c hashes and
 * commit.c copies, holes skipped (SEEK_DATA, SEEK_HOLE), so that a sparse
 * file costs its data alone (a `truncate -s 8E` is read in no time); and
 * the whole positioned write with which a copy puts each piece. */
#ifndef DIEHARD_EXTENTS_H
#define DIEHARD_EXTENTS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define EXTENT_BLOCK 4096 /* extents are read from their block's start */
#define DENSE_MAX (1 << 20) /* a file up to this long may be read without seeks */

/* fn(ctx, bytes, n, at): n bytes of the file at offset at; 0, or an errno
 * that ends the walk. */
typedef int (*extents_fn)(void *ctx, const char *bytes, size_t n, off_t at);

/* Calls fn for every data extent of fd (st: its fstat), in order, read in
 * pieces of at most cap bytes into buf, each extent from the start of its
 * first block and no block twice. A file of at most DENSE_MAX bytes with
 * as many bytes allocated as its size is one extent, read without a seek
 * (a hole in it, beside blocks reserved past its end, is read as the
 * zeros it holds). 0, or an errno (the read's or fn's). */
int extents_each(int fd, const struct stat *st, char *buf, size_t cap, extents_fn fn, void *ctx);

/* Writes n bytes at offset at of fd, whole (a short write or EINTR goes
 * on). 0, or an errno (EIO: nothing written). */
int extents_write(int fd, const char *bytes, size_t n, off_t at);

#endif
