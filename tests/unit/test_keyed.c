/* Unit tests of keyed.c: the fill, flip and trace-at parsers (fed garbage),
 * and the fills themselves: pattern and inverse are exact complements, a
 * byte's value never depends on where a fill starts, zero is zero. */
#include <stdlib.h>
#include <string.h>

#include "keyed.h"
#include "tap.h"

static void test_parse_fill(void)
{
	enum fill_mode m = FILL_NONE;
	uint64_t s = 0;
	CHECK(keyed_parse_fill("pattern:1234", &m, &s) && m == FILL_PATTERN && s == 0x1234, "pattern:1234");
	CHECK(keyed_parse_fill("inverse:ffffffffffffffff", &m, &s) && m == FILL_INVERSE && s == UINT64_MAX,
	      "inverse with 16 digits");
	CHECK(keyed_parse_fill("zero", &m, &s) && m == FILL_ZERO, "zero");
	m = FILL_NONE;
	s = 9;
	static const char *const bad[] = { "", "pattern", "pattern:", "pattern:xyz", "pattern:12345678901234567",
					   "inverse:-1", "zero:1", "Zero", "pattern:12 ", "random:1", "pattern:0x12" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(!keyed_parse_fill(bad[i], &m, &s) && m == FILL_NONE && s == 9, "fill '%s' refused", bad[i]);
}

static void test_parse_flip(void)
{
	struct flip f = { .on = false };
	CHECK(keyed_parse_flip("*/*/0-inf", &f) && f.on && f.pkey == KEYED_ANY && f.thread == KEYED_ANY && f.lo == 0 &&
		      f.hi == UINT64_MAX && f.blo == 0 && f.bhi == UINT64_MAX,
	      "everything");
	CHECK(keyed_parse_flip("2/1/5-6/3-4", &f) && f.pkey == 2 && f.thread == 1 && f.lo == 5 && f.hi == 6 &&
		      f.blo == 3 && f.bhi == 4,
	      "one allocation, one byte");
	f = (struct flip){ .on = false };
	static const char *const bad[] = { "", "1/2/3", "1/2/5-5", "1/2/6-5", "a/b/c", "1/2/3-4/", "1/2/3-4/5",
					   "1/2/3-4/5-5", "99999999999999999999/0/0-1", "1/2/3-4x", "1//3-4", "*/*/-inf",
					   "1/2/3-infx", "/*/0-1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(!keyed_parse_flip(bad[i], &f) && !f.on, "flip '%s' refused", bad[i]);
	CHECK(keyed_flips(&(struct flip){ .on = true, .pkey = KEYED_ANY, .thread = 0, .lo = 3, .hi = 5 }, 7, 0, 4),
	      "a flip matches inside its range");
	CHECK(!keyed_flips(&(struct flip){ .on = true, .pkey = KEYED_ANY, .thread = 0, .lo = 3, .hi = 5 }, 7, 0, 5),
	      "and not at its end");
	CHECK(!keyed_flips(&(struct flip){ .on = true, .pkey = 2, .thread = 0, .lo = 0, .hi = 9 }, 3, 0, 1),
	      "nor in another process");
	CHECK(!keyed_flips(&(struct flip){ .on = false }, 0, 0, 0), "an unset flip matches nothing");
}

static void test_parse_at(void)
{
	struct keyed_at a = { .on = false };
	CHECK(keyed_parse_at("2/0/17", &a) && a.on && a.pkey == 2 && a.thread == 0 && a.n == 17, "2/0/17");
	a = (struct keyed_at){ .on = false };
	static const char *const bad[] = { "", "2/0", "2/0/", "*/0/1", "2/0/1/", "2/0/x", "-1/0/1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(!keyed_parse_at(bad[i], &a) && !a.on, "at '%s' refused", bad[i]);
}

static void test_fills(void)
{
	enum { N = 203 };
	unsigned char p[N], q[N], r[N];
	bool complement = true, stable = true, differ = false;
	for (uint64_t n = 0; n < 50; n++) {
		keyed_fill_bytes(FILL_PATTERN, 0xabc, 2, 1, n, p, 0, N);
		keyed_fill_bytes(FILL_INVERSE, 0xabc, 2, 1, n, q, 0, N);
		memset(r, 0x55, sizeof r);
		keyed_fill_bytes(FILL_PATTERN, 0xabc, 2, 1, n, r, 5, N - 3);
		for (size_t i = 0; i < N; i++) {
			complement &= (unsigned char)~p[i] == q[i];
			if (i >= 5 && i < N - 3)
				stable &= r[i] == p[i];
			else
				stable &= r[i] == 0x55;
		}
		keyed_fill_bytes(FILL_PATTERN, 0xabc, 2, 1, n + 1, q, 0, N);
		differ |= memcmp(p, q, N) != 0;
	}
	CHECK(complement, "inverse is the bitwise complement of pattern, byte for byte");
	CHECK(stable, "a byte's fill does not depend on where the fill starts, and nothing outside is written");
	CHECK(differ, "allocations get different fills");
	keyed_fill_bytes(FILL_PATTERN, 1, 0, 0, 0, p, 0, N);
	keyed_fill_bytes(FILL_PATTERN, 2, 0, 0, 0, q, 0, N);
	CHECK(memcmp(p, q, N) != 0, "seeds give different fills");
	keyed_fill_bytes(FILL_PATTERN, 1, 0, 0, 0, p, 0, N);
	keyed_fill_bytes(FILL_PATTERN, 1, 0, 1, 0, q, 0, N);
	CHECK(memcmp(p, q, N) != 0, "threads give different fills");
	memset(p, 0xee, N);
	keyed_fill_bytes(FILL_ZERO, 1, 0, 0, 0, p, 0, N);
	bool zero = true;
	for (size_t i = 0; i < N; i++)
		zero &= p[i] == 0;
	CHECK(zero, "zero fills zeros");
	/* Bits: over many bytes, about half of the pattern's are set. */
	unsigned ones = 0;
	for (size_t i = 0; i < N; i++)
		ones += (unsigned)__builtin_popcount(r[i]);
	CHECK(ones > N * 8 / 3 && ones < N * 8 * 2 / 3, "the pattern looks random (%u of %u bits set)", ones, N * 8);
}

int main(void)
{
	test_parse_fill();
	test_parse_flip();
	test_parse_at();
	test_fills();
	return tap_done();
}
