/* relines.c — two sides' lines, the same in another order (relines.h).
 *
 * Both sides are walked a line at a time in step: after n lines of each, a
 * running balance of line hashes (+1 for a's, -1 for b's) tells whether
 * the two blocks of n lines could hold the same lines; where it is even
 * and both blocks end at one offset past `from`, the lines are compared
 * byte for byte (a hash is never trusted alone), and a match ends the
 * walk. Costs O(n^2) for n <= RELINES_MAX_LINES lines, on the stack: the
 * caller asks only at a divergence. */
#include "relines.h"

#include <stdint.h>
#include <string.h>

struct line {
	size_t off, len; /* '\n' included */
	uint64_t hash;
};

struct tally {
	uint64_t hash;
	int count; /* a's lines minus b's with this hash */
};

static uint64_t line_hash(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The line of p[0, len) that starts at off; false if none is whole yet. */
static bool next_line(const unsigned char *p, size_t len, size_t off, struct line *l)
{
	if (off >= len)
		return false;
	const unsigned char *nl = memchr(p + off, '\n', len - off);
	if (nl == NULL)
		return false;
	l->off = off;
	l->len = (size_t)(nl - (p + off)) + 1;
	l->hash = line_hash(p + off, l->len);
	return true;
}

/* Adds d to hash h's balance; returns the change in the number of hashes
 * whose balance is not zero. */
static int tally_add(struct tally *t, unsigned *nt, uint64_t h, int d)
{
	for (unsigned i = 0; i < *nt; i++)
		if (t[i].hash == h) {
			int was = t[i].count;
			t[i].count += d;
			return (was == 0) - (t[i].count == 0);
		}
	t[(*nt)++] = (struct tally){ h, d };
	return 1;
}

/* Whether a's first n lines and b's are the same lines, byte for byte. */
static bool same_lines(const unsigned char *a, const struct line *la, const unsigned char *b, const struct line *lb,
		       unsigned n)
{
	bool used[RELINES_MAX_LINES] = { false };
	for (unsigned i = 0; i < n; i++) {
		unsigned j = 0;
		for (; j < n; j++)
			if (!used[j] && lb[j].len == la[i].len && lb[j].hash == la[i].hash &&
			    memcmp(b + lb[j].off, a + la[i].off, la[i].len) == 0)
				break;
		if (j == n)
			return false;
		used[j] = true;
	}
	return true;
}

size_t relines_line_start(const unsigned char *p, size_t at)
{
	while (at > 0 && p[at - 1] != '\n')
		at--;
	return at;
}

enum relines_verdict relines_match(const unsigned char *a, size_t alen, bool a_more, const unsigned char *b,
				   size_t blen, bool b_more, size_t from, size_t *end)
{
	struct line la[RELINES_MAX_LINES], lb[RELINES_MAX_LINES];
	struct tally t[2 * RELINES_MAX_LINES];
	unsigned nt = 0, n = 0;
	int uneven = 0; /* hashes whose balance is not zero */
	/* Whole lines before the one where they part are the same in both:
	 * the block starts there. */
	size_t s0 = relines_line_start(a, from < alen && from < blen ? from : (alen < blen ? alen : blen));
	size_t ea = s0, eb = s0;
	while (n < RELINES_MAX_LINES) {
		bool got_a = next_line(a, alen, ea, &la[n]), got_b = got_a && next_line(b, blen, eb, &lb[n]);
		if (!got_a)
			return a_more ? RELINES_WAIT : RELINES_NO;
		if (!got_b)
			return b_more ? RELINES_WAIT : RELINES_NO;
		ea += la[n].len;
		eb += lb[n].len;
		uneven += tally_add(t, &nt, la[n].hash, 1);
		uneven += tally_add(t, &nt, lb[n].hash, -1);
		n++;
		if (uneven == 0 && ea == eb && ea > from && same_lines(a, la, b, lb, n)) {
			*end = ea;
			return RELINES_SAME;
		}
	}
	return RELINES_NO;
}
