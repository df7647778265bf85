/* Unit tests of inputlog.c: appends of every size (a byte, records that
 * fill the tail to its edge, chunks larger than the tail) read back
 * byte-exact by inputlog_read and inputlog_send (a pipe), at offsets that
 * straddle what reached the memfd and what waits in the tail, also between
 * appends; the count includes the tail; a log over its cap releases its
 * front (reads there fail, later ones hold) and says it is no longer
 * complete; a log without a cap is none. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inputlog.h"
#include "tap.h"

#define TOTAL ((size_t)3 << 20)

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A size for the next append: mostly small, sometimes about the tail's
 * 64 KiB, sometimes more. */
static size_t pick(void)
{
	unsigned r = (unsigned)(next() % 64);
	if (r < 8)
		return 1;
	if (r == 8)
		return (64u << 10) - 1 + next() % 3;
	if (r == 9)
		return (64u << 10) + next() % (200u << 10);
	return 1 + next() % 600;
}

static bool read_is(struct inputlog *l, const unsigned char *ref, size_t off, size_t n)
{
	unsigned char *b = malloc(n ? n : 1);
	bool ok = b != NULL && inputlog_read(l, off, b, n) && memcmp(b, ref + off, n) == 0;
	free(b);
	return ok;
}

/* Bytes [off, off + n) of the log through a pipe, as input.c sends them. */
static bool send_is(struct inputlog *l, const unsigned char *ref, size_t off, size_t n)
{
	int p[2];
	if (pipe2(p, O_NONBLOCK) != 0)
		return false;
	bool ok = true;
	unsigned char buf[4096];
	size_t got = 0;
	while (ok && got < n) {
		size_t want = n - got < sizeof buf ? n - got : sizeof buf;
		ssize_t w = inputlog_send(l, off + got, p[1], want);
		if (w <= 0) {
			ok = false;
			break;
		}
		size_t have = 0;
		while (have < (size_t)w) {
			ssize_t r = read(p[0], buf + have, (size_t)w - have);
			if (r <= 0) {
				ok = false;
				break;
			}
			have += (size_t)r;
		}
		ok = ok && memcmp(buf, ref + off + got, have) == 0;
		got += have;
	}
	close(p[0]);
	close(p[1]);
	return ok;
}

int main(void)
{
	CHECK(inputlog_new(0) == NULL, "a log without a cap is none");

	unsigned char *ref = malloc(TOTAL + (300u << 10));
	for (size_t i = 0; i < TOTAL + (300u << 10); i++)
		ref[i] = (unsigned char)next();

	struct inputlog *l = inputlog_new((size_t)1 << 30);
	size_t n = 0;
	unsigned appends = 0;
	bool counts = true, reads = true, sends = true;
	while (n < TOTAL) {
		size_t k = pick();
		inputlog_append(l, ref + n, k);
		n += k;
		appends++;
		counts = counts && inputlog_bytes(l) == n;
		if (appends % 7 == 0) {
			/* The last bytes (in the tail, or straddling it) and a
			 * span from further back. */
			size_t back = n < 700 ? n : 700;
			reads = reads && read_is(l, ref, n - back, back);
			size_t from = (size_t)(next() % n);
			size_t len = n - from < 5000 ? n - from : 5000;
			reads = reads && read_is(l, ref, from, len);
		}
		if (appends % 11 == 0) {
			size_t back = n < 3000 ? n : 3000;
			sends = sends && send_is(l, ref, n - back, back);
		}
	}
	CHECK(counts, "the count includes the bytes still in the tail (%u appends)", appends);
	CHECK(reads, "reads between appends, over the tail's edge, are the bytes appended");
	CHECK(sends, "sends between appends are the bytes appended");
	CHECK(read_is(l, ref, 0, n), "the whole log reads back byte-exact (%zu bytes)", n);
	CHECK(send_is(l, ref, 0, n), "the whole log sends byte-exact");
	unsigned char b;
	inputlog_append(l, ref + n, 10); /* something in the tail */
	n += 10;
	unsigned char six[6];
	CHECK(!inputlog_read(l, n, &b, 1) && !inputlog_read(l, n + 5, &b, 1) && !inputlog_read(l, n - 5, six, 6),
	      "no byte past the end, the tail's included");
	CHECK(inputlog_send(l, n, 1, 10) == 0, "nothing to send past the end");
	CHECK(inputlog_complete(l), "a log within its cap is complete");
	inputlog_free(l);

	/* A cap of 1 MiB: after 3 MiB the front is released, in 4 MiB steps
	 * once the log is 5 MiB past its start. */
	l = inputlog_new((size_t)1 << 20);
	n = 0;
	while (n < TOTAL) {
		size_t k = pick();
		inputlog_append(l, ref + n, k);
		n += k;
	}
	CHECK(inputlog_retained_from(l) == 0 && inputlog_complete(l), "under cap plus a step nothing is released");
	for (int round = 0; round < 3; round++) {
		size_t m = 0;
		while (m < TOTAL) {
			size_t k = pick();
			inputlog_append(l, ref + m, k);
			m += k;
			n += k;
		}
	}
	/* What stays: the last cap bytes at least; ref's bytes repeat every
	 * round, so compare with a copy of the last round's. */
	size_t from = inputlog_retained_from(l);
	CHECK(from > 0 && from % ((size_t)4 << 20) == 0, "the front is released in steps (from %zu)", from);
	CHECK(n - from >= ((size_t)1 << 20), "at least the cap is kept (%zu of %zu)", n - from, n);
	CHECK(!inputlog_complete(l), "a log that lost its front is not complete");
	CHECK(!inputlog_read(l, 0, &b, 1) && !inputlog_read(l, from - 1, &b, 1), "released bytes do not read");
	CHECK(inputlog_read(l, from, &b, 1) && inputlog_read(l, n - 1, &b, 1), "kept bytes do");
	inputlog_free(l);
	free(ref);
	return tap_done();
}
