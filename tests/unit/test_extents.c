/* Unit tests of extents.c, on real files in a temporary directory: dense
 * files, small (read without seeks) and large, read whole, in order, in
 * pieces of the cap asked for; a sparse one read by its data alone, each
 * byte at its offset and no block twice, also with more space reserved past
 * its end than it is long; an empty file read not at all; a piece
 * function's error ending the walk with that error. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "extents.h"
#include "tap.h"

#define MIB (1 << 20)

/* What the walk gave: a copy of the file as read, and how. */
struct seen {
	char *copy;      /* size bytes, zero where nothing was given */
	off_t size;
	off_t next;      /* where the next piece must start, at least */
	size_t pieces;
	size_t bytes;
	size_t max_piece;
	bool in_order;   /* each piece past the last one */
	bool inside;     /* each piece within the file */
	int fail_at;     /* the piece that returns EIO (0: none) */
};

static int take(void *ctx, const char *bytes, size_t n, off_t at)
{
	struct seen *s = ctx;
	s->pieces++;
	if (s->fail_at != 0 && (int)s->pieces == s->fail_at)
		return EIO;
	if (at < s->next)
		s->in_order = false;
	if (at < 0 || at + (off_t)n > s->size) {
		s->inside = false;
		return 0;
	}
	memcpy(s->copy + at, bytes, n);
	s->next = at + (off_t)n;
	s->bytes += n;
	if (n > s->max_piece)
		s->max_piece = n;
	return 0;
}

static int walk(int fd, size_t cap, struct seen *s)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return errno;
	s->size = st.st_size;
	s->copy = calloc(1, (size_t)st.st_size + 1);
	s->next = 0;
	s->in_order = s->inside = true;
	char *buf = malloc(cap);
	int err = extents_each(fd, &st, buf, cap, take, s);
	free(buf);
	return err;
}

static int make(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

int main(void)
{
	char dir[] = "/tmp/diehard-extents-XXXXXX";
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}

	/* Dense: 3 MiB and 5 bytes of a pattern, read in 1 MiB pieces. */
	size_t n = 3 * MIB + 5;
	char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i * 7 + i / 4096 + 1);
	int fd = make(dir, "dense");
	CHECK(fd >= 0 && write(fd, data, n) == (ssize_t)n, "a dense file of 3 MiB and 5 bytes written");
	struct seen s = { 0 };
	CHECK(walk(fd, MIB, &s) == 0, "a dense file: walked");
	CHECK(s.bytes == n && memcmp(s.copy, data, n) == 0, "a dense file: every byte given, at its offset");
	CHECK(s.in_order && s.inside, "a dense file: pieces in order, inside the file");
	CHECK(s.max_piece <= MIB && s.pieces == 4, "a dense file: in pieces of the cap (%zu pieces)", s.pieces);
	free(s.copy);
	close(fd);

	/* Small and dense (the no-seek read): 300000 bytes in 64 KiB pieces. */
	fd = make(dir, "small");
	CHECK(fd >= 0 && write(fd, data, 300000) == 300000, "a small dense file written");
	memset(&s, 0, sizeof s);
	CHECK(walk(fd, 65536, &s) == 0, "a small dense file: walked");
	CHECK(s.bytes == 300000 && memcmp(s.copy, data, 300000) == 0 && s.in_order && s.inside && s.pieces == 5,
	      "a small dense file: every byte in order, in 5 pieces of the cap (%zu)", s.pieces);
	free(s.copy);
	close(fd);

	/* Sparse: 5 bytes at 8 MiB and a block at 12 MiB, 16 MiB long. */
	fd = make(dir, "sparse");
	bool made = fd >= 0 && ftruncate(fd, 16 * MIB) == 0 && pwrite(fd, "hello", 5, 8 * MIB + 10) == 5 &&
		    pwrite(fd, data, 4096, 12 * MIB) == 4096;
	CHECK(made, "a sparse file of 16 MiB with two pieces of data written");
	struct stat st;
	bool sparse = fd >= 0 && fstat(fd, &st) == 0 && (off_t)st.st_blocks * 512 < st.st_size;
	memset(&s, 0, sizeof s);
	CHECK(walk(fd, MIB, &s) == 0, "a sparse file: walked");
	CHECK(memcmp(s.copy + 8 * MIB + 10, "hello", 5) == 0 && memcmp(s.copy + 12 * MIB, data, 4096) == 0,
	      "a sparse file: its data given at its offsets");
	CHECK(s.in_order && s.inside, "a sparse file: pieces in order, inside the file, no block twice");
	if (sparse)
		CHECK(s.bytes <= 64 * 4096, "a sparse file: its data read, not its holes (%zu bytes)", s.bytes);
	else
		CHECK(s.bytes == 16 * MIB, "a file system without holes: the file read whole");
	free(s.copy);

	/* Sparse, with more space reserved past its end than it is long
	 * (fallocate -n): still read by its data alone. */
	int fd2 = make(dir, "reserved");
	made = fd2 >= 0 && ftruncate(fd2, 4 * MIB) == 0 && pwrite(fd2, "hello", 5, 2 * MIB) == 5 &&
	       fallocate(fd2, FALLOC_FL_KEEP_SIZE, 4 * MIB, 8 * MIB) == 0;
	if (made && fstat(fd2, &st) == 0 && (off_t)st.st_blocks * 512 >= st.st_size) {
		memset(&s, 0, sizeof s);
		CHECK(walk(fd2, MIB, &s) == 0 && memcmp(s.copy + 2 * MIB, "hello", 5) == 0,
		      "space reserved past the end: walked, its data at its offset");
		CHECK(s.bytes <= 64 * 4096, "space reserved past the end: its holes not read (%zu bytes)", s.bytes);
		free(s.copy);
	} else {
		printf("# skipped: no reserved space past a file's end here\n");
	}
	if (fd2 >= 0)
		close(fd2);

	/* A piece function's error ends the walk with it. */
	memset(&s, 0, sizeof s);
	s.fail_at = 1;
	CHECK(walk(fd, MIB, &s) == EIO && s.pieces == 1, "the piece function's error is the walk's, at once");
	free(s.copy);
	close(fd);

	/* Empty: nothing given. */
	fd = make(dir, "empty");
	memset(&s, 0, sizeof s);
	CHECK(fd >= 0 && walk(fd, MIB, &s) == 0 && s.pieces == 0, "an empty file: no piece");
	free(s.copy);
	close(fd);

	const char *names[] = { "dense", "small", "sparse", "reserved", "empty" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	free(data);
	return tap_done();
}
