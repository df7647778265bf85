/* Unit tests of voter/relines.c: lines swapped, rotated, repeated, empty;
 * a line shared in part before the difference; real differences (a changed
 * line, a missing one, one that never comes before the limit); lines not
 * whole yet; and a randomized test against a slow reference written from
 * the contract in relines.h (the smallest block end where both sides' first
 * n lines are the same multiset), on blocks of permuted lines with and
 * without a changed byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relines.h"
#include "tap.h"

static size_t first_diff(const char *a, const char *b)
{
	size_t d = 0;
	while (a[d] != '\0' && a[d] == b[d])
		d++;
	return d;
}

/* relines_match on two C strings from their first difference. */
static enum relines_verdict match(const char *a, const char *b, bool more, size_t *end)
{
	*end = 0;
	return relines_match((const unsigned char *)a, strlen(a), more, (const unsigned char *)b, strlen(b), more,
			     first_diff(a, b), end);
}

/* The reference: lines of p as (offset, length), up to max. */
static unsigned split(const unsigned char *p, size_t len, size_t *off, size_t *ln, unsigned max)
{
	unsigned n = 0;
	size_t o = 0;
	while (n < max && o < len) {
		const unsigned char *nl = memchr(p + o, '\n', len - o);
		if (nl == NULL)
			break;
		off[n] = o;
		ln[n] = (size_t)(nl - p) + 1 - o;
		o += ln[n++];
	}
	return n;
}

/* Whether a's first n lines and b's are one multiset (slowly: sorted). */
static bool multiset(const unsigned char *a, const size_t *ao, const size_t *al, const unsigned char *b,
		     const size_t *bo, const size_t *bl, unsigned n)
{
	unsigned char used[RELINES_MAX_LINES] = { 0 };
	for (unsigned i = 0; i < n; i++) {
		bool found = false;
		for (unsigned j = 0; j < n && !found; j++)
			if (!used[j] && al[i] == bl[j] && memcmp(a + ao[i], b + bo[j], al[i]) == 0)
				used[j] = found = true;
		if (!found)
			return false;
	}
	return true;
}

/* From the contract: lines from the start of the line holding from. */
static enum relines_verdict reference(const unsigned char *a, size_t alen, bool a_more, const unsigned char *b,
				      size_t blen, bool b_more, size_t from, size_t *end)
{
	static size_t ao[RELINES_MAX_LINES], al[RELINES_MAX_LINES], bo[RELINES_MAX_LINES], bl[RELINES_MAX_LINES];
	size_t s0 = 0;
	for (size_t i = 0; i < from && i < alen && i < blen; i++)
		if (a[i] == '\n')
			s0 = i + 1;
	unsigned na = split(a + s0, alen - s0, ao, al, RELINES_MAX_LINES);
	unsigned nb = split(b + s0, blen - s0, bo, bl, RELINES_MAX_LINES);
	unsigned n = na < nb ? na : nb;
	for (unsigned i = 1; i <= n; i++) {
		size_t ea = s0 + ao[i - 1] + al[i - 1], eb = s0 + bo[i - 1] + bl[i - 1];
		if (ea == eb && ea > from && multiset(a + s0, ao, al, b + s0, bo, bl, i)) {
			*end = ea;
			return RELINES_SAME;
		}
	}
	if (n == RELINES_MAX_LINES)
		return RELINES_NO;
	bool more = na <= nb ? a_more : b_more; /* the side that ran out first (a looked at first) */
	return more ? RELINES_WAIT : RELINES_NO;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* Random log-like lines into p (count lines), each from a small alphabet so
 * that repeats happen; returns the length. Line i's bounds in off, ln. */
static size_t make_lines(unsigned char *p, unsigned count, size_t *off, size_t *ln)
{
	size_t o = 0;
	for (unsigned i = 0; i < count; i++) {
		off[i] = o;
		unsigned len = rnd(6);
		for (unsigned j = 0; j < len; j++)
			p[o++] = (unsigned char)('a' + rnd(3));
		p[o++] = '\n';
		ln[i] = o - off[i];
	}
	return o;
}

static void randomized(void)
{
	static unsigned char a[8192], b[8192];
	static size_t off[300], ln[300];
	unsigned agree = 0, runs = 20000, same = 0, no = 0, wait = 0, said = 0;
	for (unsigned run = 0; run < runs; run++) {
		unsigned count = 1 + rnd(run % 10 == 0 ? 300 : 12);
		size_t len = make_lines(a, count, off, ln);
		/* b: a's lines, shuffled within random blocks */
		unsigned order[300];
		for (unsigned i = 0; i < count; i++)
			order[i] = i;
		for (unsigned i = 0; i < count;) {
			unsigned blk = 1 + rnd(5);
			if (i + blk > count)
				blk = count - i;
			for (unsigned j = blk; j > 1; j--) {
				unsigned x = rnd(j), t = order[i + j - 1];
				order[i + j - 1] = order[i + x];
				order[i + x] = t;
			}
			i += blk;
		}
		size_t o = 0;
		for (unsigned i = 0; i < count; i++) {
			memcpy(b + o, a + off[order[i]], ln[order[i]]);
			o += ln[order[i]];
		}
		size_t blen = o;
		if (rnd(4) == 0 && blen > 0)
			b[rnd((unsigned)blen)] ^= (unsigned char)(1 + rnd(2)); /* a changed byte ('\n' may go) */
		size_t alen = len, cut = rnd(3);
		if (cut == 1 && alen > 0)
			alen -= rnd((unsigned)alen); /* a side not all there yet */
		else if (cut == 2 && blen > 0)
			blen -= rnd((unsigned)blen);
		size_t m = alen < blen ? alen : blen, d = 0;
		while (d < m && a[d] == b[d])
			d++;
		if (d == m)
			continue; /* no difference to explain */
		bool a_more = rnd(2) == 0, b_more = rnd(2) == 0;
		size_t e1 = 0, e2 = 0;
		enum relines_verdict v1 = relines_match(a, alen, a_more, b, blen, b_more, d, &e1);
		enum relines_verdict v2 = reference(a, alen, a_more, b, blen, b_more, d, &e2);
		if (v1 == v2 && (v1 != RELINES_SAME || e1 == e2))
			agree++;
		else if (!said++)
			printf("# run %u: %d (end %zu) against the reference's %d (end %zu)\n", run, (int)v1, e1, (int)v2, e2);
		same += v1 == RELINES_SAME;
		no += v1 == RELINES_NO;
		wait += v1 == RELINES_WAIT;
	}
	unsigned asked = same + no + wait;
	CHECK(agree == asked, "randomized: %u of %u answers as the reference's (%u same, %u no, %u wait)", agree, asked,
	      same, no, wait);
	CHECK(same > 1000 && no > 1000 && wait > 100, "randomized: every verdict was exercised");
}

int main(void)
{
	size_t e;
	CHECK(match("one 33]\ntwo 34]\n", "two 34]\none 33]\n", false, &e) == RELINES_SAME && e == 16,
	      "two lines swapped: the block ends after both");
	CHECK(match("x\none 33]\ntwo 34]\ntail a\n", "x\ntwo 34]\none 33]\ntail b\n", false, &e) == RELINES_SAME &&
		      e == 18,
	      "the block after a shared line, the difference after it left to the vote");
	CHECK(match("[14:17:33] a\n[14:17:34] b\n", "[14:17:34] b\n[14:17:33] a\n", false, &e) == RELINES_SAME &&
		      e == 26,
	      "lines that share a prefix up to the difference");
	CHECK(match("A\nB\nC\n", "B\nC\nA\n", false, &e) == RELINES_SAME && e == 6, "three lines rotated");
	CHECK(match("A\nA\nB\n", "A\nB\nA\n", false, &e) == RELINES_SAME && e == 6, "a repeated line");
	CHECK(match("\nB\n", "B\n\n", false, &e) == RELINES_SAME && e == 3, "an empty line");
	CHECK(match("A\nB\n", "A\nC\n", false, &e) == RELINES_NO, "a changed line: no");
	CHECK(match("A\nB\n", "A\nC\n", true, &e) == RELINES_WAIT, "a changed line, more to come: wait");
	CHECK(match("A\nB\nC\n", "B\nC\nD\n", false, &e) == RELINES_NO, "a line in one side only: no");
	CHECK(match("A\nB", "B\nA", true, &e) == RELINES_WAIT, "lines not whole yet: wait");
	CHECK(match("A\nB", "B\nA", false, &e) == RELINES_NO, "lines never whole: no");
	CHECK(match("A\nBx\n", "Bx\nA\n", false, &e) == RELINES_SAME && e == 5, "lines of other lengths");
	CHECK(match("A\nB\n", "B\nAA\n", true, &e) == RELINES_WAIT, "blocks of other lengths, more to come: wait");

	/* A line that comes only past the limit. */
	static char a[8192], b[8192];
	size_t o = 0, p = 0;
	o += (size_t)sprintf(a + o, "first\n");
	for (int i = 0; i < RELINES_MAX_LINES + 4; i++) {
		o += (size_t)sprintf(a + o, "%d\n", i);
		p += (size_t)sprintf(b + p, "%d\n", i);
	}
	p += (size_t)sprintf(b + p, "first\n");
	CHECK(match(a, b, true, &e) == RELINES_NO, "a line moved past %d lines: no, even with more to come",
	      RELINES_MAX_LINES);
	/* Just within it. */
	o = p = 0;
	o += (size_t)sprintf(a + o, "first\n");
	for (int i = 0; i < RELINES_MAX_LINES - 1; i++) {
		o += (size_t)sprintf(a + o, "%d\n", i);
		p += (size_t)sprintf(b + p, "%d\n", i);
	}
	p += (size_t)sprintf(b + p, "first\n");
	CHECK(match(a, b, false, &e) == RELINES_SAME && e == o, "a line moved by %d lines: the same",
	      RELINES_MAX_LINES - 1);
	/* The limit counts from the line where the sides part, not from
	 * the start: 400 lines alike, then two swapped. */
	o = p = 0;
	for (int i = 0; i < 400; i++) {
		o += (size_t)sprintf(a + o, "%d\n", i);
		p += (size_t)sprintf(b + p, "%d\n", i);
	}
	size_t before = o;
	o += (size_t)sprintf(a + o, "x 1\nx 2\n");
	p += (size_t)sprintf(b + p, "x 2\nx 1\n");
	CHECK(match(a, b, false, &e) == RELINES_SAME && e == o, "400 lines alike, then two swapped: the same (block %zu-%zu)",
	      before, o);
	/* The side that ran out decides between waiting and no. */
	CHECK(relines_match((const unsigned char *)"A\nB\n", 4, false, (const unsigned char *)"B\nC\nA\n", 6, true, 0, &e) ==
		      RELINES_NO,
	      "the reference ended, its lines all looked at: no, though the other writes on");
	CHECK(relines_match((const unsigned char *)"A\nB\nC\n", 6, false, (const unsigned char *)"B\nA", 3, true, 0, &e) ==
		      RELINES_WAIT,
	      "the side that ran out writes on: wait");

	const unsigned char *ls = (const unsigned char *)"ab\ncd\nef";
	CHECK(relines_line_start(ls, 8) == 6 && relines_line_start(ls, 6) == 6 && relines_line_start(ls, 5) == 3 &&
		      relines_line_start(ls, 2) == 0 && relines_line_start(NULL, 0) == 0,
	      "relines_line_start: just past the last newline before the offset, or 0");

	randomized();
	return tap_done();
}
