/* Unit tests of random.h and stream.c: determinism, independence of streams,
 * range and rough uniformity of rng_below, fill. */
#include <stdbool.h>
#include <string.h>

#include "random.h"
#include "stream.h"
#include "tap.h"

static void test_determinism(void)
{
	const uint64_t seed[2] = { 1, 2 };
	struct rng a, b, c;
	rng_derive(&a, seed, 0);
	rng_derive(&b, seed, 0);
	rng_derive(&c, seed, 1);
	int same = 1, differ = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = rng_next(&a), y = rng_next(&b), z = rng_next(&c);
		same &= x == y;
		differ += x != z;
	}
	CHECK(same, "same seed and tag give the same stream");
	CHECK(differ > 990, "another tag gives an unrelated stream");

	const uint64_t zero[2] = { 0, 0 };
	rng_derive(&a, zero, 0);
	CHECK((a.s[0] | a.s[1] | a.s[2] | a.s[3]) != 0, "an all-zero seed still gives a live state");
	const uint64_t seed2[2] = { 1, 3 };
	rng_derive(&b, seed2, 0);
	rng_derive(&a, seed, 0);
	CHECK(rng_next(&a) != rng_next(&b), "one bit of the high seed word changes the stream");
}

static void test_below(void)
{
	struct rng r;
	const uint64_t seed[2] = { 99, 0 };
	rng_derive(&r, seed, 0);
	int counts[10] = { 0 };
	int in_range = 1;
	for (int i = 0; i < 100000; i++) {
		uint64_t v = rng_below(&r, 10);
		in_range &= v < 10;
		if (v < 10)
			counts[v]++;
	}
	CHECK(in_range, "rng_below(10) stays below 10");
	int flat = 1;
	for (int i = 0; i < 10; i++)
		flat &= counts[i] > 9500 && counts[i] < 10500;
	CHECK(flat, "rng_below is roughly uniform (each bucket within 5%%)");
	int ones = 1;
	for (int i = 0; i < 100; i++)
		ones &= rng_below(&r, 1) == 0;
	CHECK(ones, "rng_below(1) is always 0");
}

static void test_fill(void)
{
	struct rng r;
	const uint64_t seed[2] = { 5, 5 };
	rng_derive(&r, seed, 0);
	unsigned char buf[67];
	memset(buf, 0, sizeof buf);
	rng_fill(&r, buf + 1, 65);
	CHECK(buf[0] == 0 && buf[66] == 0, "rng_fill writes exactly len bytes");
	int zeros = 0;
	for (int i = 1; i < 66; i++)
		zeros += buf[i] == 0;
	CHECK(zeros < 8, "filled bytes are not zero");
	CHECK(memcmp(buf + 1, buf + 9, 8) != 0 && memcmp(buf + 1, buf + 17, 8) != 0,
	      "fill is not a repeated word");
	/* The fill is rng_next's words in order, a partial last word's low
	 * bytes first, and leaves the state where as many draws would: at
	 * every length around its 128-byte chunks. */
	bool same = true, after = true;
	for (size_t len = 0; len <= 600; len++) {
		struct rng a, b;
		rng_derive(&a, seed, len);
		b = a;
		unsigned char got[608], want[608];
		rng_fill(&a, got, len);
		for (size_t i = 0; i < len; i += 8) {
			uint64_t v = rng_next(&b);
			for (size_t j = 0; j < 8 && i + j < len; j++)
				want[i + j] = (unsigned char)(v >> (8 * j));
		}
		same = same && memcmp(got, want, len) == 0;
		after = after && rng_next(&a) == rng_next(&b);
	}
	CHECK(same, "rng_fill gives rng_next's words in order, at every length up to 600");
	CHECK(after, "and leaves the generator where that many draws would");
}

static void test_streams(void)
{
	const uint64_t seed[2] = { 0x1234, 0x5678 };
	stream_seed(seed);
	uint64_t first = rng_next(stream_get());
	stream_self.ready = false; /* as a new thread would be */
	stream_seed(seed);
	CHECK(rng_next(stream_get()) == first, "the first thread's stream depends on the seed alone");

	stream_seed(seed);
	stream_self.ready = false;
	(void)stream_get();
	struct rng parent_copy = stream_self.rng;
	stream_fork_prepare();
	rng_next(&parent_copy); /* prepare drew one value */
	uint64_t parent_next = rng_next(&parent_copy);
	stream_fork_child();
	uint64_t child_next = rng_next(stream_get());
	CHECK(child_next != parent_next, "a fork child's stream differs from the parent's");

	/* Same again: the child's stream is a function of the parent's state. */
	stream_seed(seed);
	stream_self.ready = false;
	(void)stream_get();
	stream_fork_prepare();
	stream_fork_child();
	CHECK(rng_next(stream_get()) == child_next, "a fork child's stream is reproducible");
}

int main(void)
{
	test_determinism();
	test_below();
	test_fill();
	test_streams();
	return tap_done();
}
