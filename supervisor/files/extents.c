/* extents.c — see extents.h. Invariant: done, a block boundary, is where
 * the blocks already given to fn end; an extent that starts inside one of
 * them starts after it. */
#include "extents.h"

#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

int extents_each(int fd, const struct stat *st, char *buf, size_t cap, extents_fn fn, void *ctx)
{
	off_t pos = 0, done = 0, size = st->st_size;
	/* A small file with as many bytes allocated as it is long: read
	 * whole, no seek. (Blocks reserved past its end could hide a hole:
	 * its zeros are then read, at most DENSE_MAX of them.) */
	bool dense = size <= DENSE_MAX && (off_t)st->st_blocks * 512 >= size;
	while (pos < size) {
		off_t data = dense ? 0 : lseek(fd, pos, SEEK_DATA);
		if (data < 0)
			break; /* ENXIO: no data past pos */
		off_t hole = dense ? size : lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > size)
			hole = size;
		off_t at = data / EXTENT_BLOCK * EXTENT_BLOCK;
		if (at < done)
			at = done;
		while (at < hole) {
			size_t want = (size_t)(hole - at < (off_t)cap ? hole - at : (off_t)cap);
			ssize_t r = pread(fd, buf, want, at);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return errno;
			if (r == 0)
				break;
			int err = fn(ctx, buf, (size_t)r, at);
			if (err != 0)
				return err;
			at += r;
		}
		done = (at + EXTENT_BLOCK - 1) / EXTENT_BLOCK * EXTENT_BLOCK;
		pos = hole;
	}
	return 0;
}

int extents_write(int fd, const char *bytes, size_t n, off_t at)
{
	for (size_t o = 0; o < n;) {
		ssize_t w = pwrite(fd, bytes + o, n - o, at + (off_t)o);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		o += (size_t)w;
	}
	return 0;
}
