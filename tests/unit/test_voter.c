/* Unit tests of voter.c: the quorum rule, CHUNKS and PREFIX decisions on
 * hand-made cases (agreement, a minority, byte-exact comparison, lengths,
 * detect-only k=2, lagging and ending replicas, waiting, dead replicas, k=16
 * and k=64), whole streams pushed through a small supervisor loop, and a
 * randomized differential test against a slow reference written from the
 * contract in voter.h, comparing every field of the result. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "voter.h"

/* A literal with its length, NUL bytes included: running(S("a\0b")). */
#define S(lit) (const unsigned char *)(lit), (sizeof(lit) - 1)

static struct voter_view running(const unsigned char *data, size_t len)
{
	return (struct voter_view){ data, len, false, true };
}

static struct voter_view at_eof(const unsigned char *data, size_t len)
{
	return (struct voter_view){ data, len, true, true };
}

/* A dead replica with a length no one may trust: reading it would crash. */
static struct voter_view dead(void)
{
	return (struct voter_view){ NULL, 1000, false, false };
}

static uint64_t bit(unsigned i)
{
	return (uint64_t)1 << i;
}

static uint64_t all_of(unsigned n)
{
	return n >= 64 ? ~(uint64_t)0 : bit(n) - 1;
}

static unsigned live_count(const struct voter_view *views, unsigned n)
{
	unsigned live = 0;
	for (unsigned i = 0; i < n; i++)
		live += views[i].live;
	return live;
}

/* The result is filled with garbage first: every field must be written. */
static struct voter_result vote_q(const struct voter_view *views, unsigned n, unsigned quorum, size_t chunk,
				  enum voter_mode mode)
{
	struct voter_result r;
	memset(&r, 0xa5, sizeof r);
	voter_decide(views, n, quorum, chunk, mode, &r);
	return r;
}

/* With the quorum the supervisor would use: n replicas, the live ones voting. */
static struct voter_result vote(const struct voter_view *views, unsigned n, size_t chunk, enum voter_mode mode)
{
	return vote_q(views, n, voter_quorum(live_count(views, n), n), chunk, mode);
}

static void show(const char *what, const struct voter_result *r)
{
	printf("#   %s commit=%zu ended=%d agree=%#llx diverged=%#llx no_quorum=%d diff_offset=%zu\n", what,
	       r->commit, r->ended, (unsigned long long)r->agree, (unsigned long long)r->diverged, r->no_quorum,
	       r->diff_offset);
}

static bool same_result(const struct voter_result *a, const struct voter_result *b)
{
	return a->commit == b->commit && a->ended == b->ended && a->agree == b->agree &&
	       a->diverged == b->diverged && a->no_quorum == b->no_quorum && a->diff_offset == b->diff_offset;
}

/* Does r say exactly this? Prints what it says otherwise. */
static bool is(struct voter_result r, size_t commit, bool ended, uint64_t agree, uint64_t diverged,
	       bool no_quorum, size_t diff_offset)
{
	struct voter_result want = { commit, ended, agree, diverged, no_quorum, diff_offset };
	if (same_result(&r, &want))
		return true;
	show("got ", &r);
	show("want", &want);
	return false;
}

static bool waiting(struct voter_result r)
{
	return is(r, 0, false, 0, 0, false, 0);
}

static bool no_quorum_at(struct voter_result r, size_t diff_offset)
{
	return is(r, 0, false, 0, 0, true, diff_offset);
}

/* ---- the quorum rule ---------------------------------------------------- */

static void test_quorum(void)
{
	for (unsigned k = 1; k <= 16; k++) {
		bool ok = true;
		for (unsigned live = 0; live <= k; live++) {
			/* The smallest strict majority of `live`, from its definition. */
			unsigned majority = 0;
			while (2 * majority <= live)
				majority++;
			unsigned want = k == 1 ? 1 : (majority < 2 ? 2 : majority);
			unsigned got = voter_quorum(live, k);
			if (got != want) {
				printf("#   voter_quorum(%u, %u) = %u, want %u\n", live, k, got, want);
				ok = false;
			}
		}
		CHECK(ok, "voter_quorum(live, %u) for every live count 0..%u", k, k);
	}
	CHECK(voter_quorum(1, 1) == 1 && voter_quorum(0, 1) == 1, "k=1: one replica is its own quorum");
	CHECK(voter_quorum(2, 2) == 2 && voter_quorum(1, 2) == 2, "k=2: both must agree, one alone never");
	CHECK(voter_quorum(3, 3) == 2 && voter_quorum(2, 3) == 2 && voter_quorum(1, 3) == 2,
	      "k=3: two of three, two of two, never one");
	CHECK(voter_quorum(4, 4) == 3 && voter_quorum(5, 5) == 3 && voter_quorum(6, 6) == 4,
	      "k=4,5,6: strict majorities 3, 3, 4");
	CHECK(voter_quorum(16, 16) == 9 && voter_quorum(9, 16) == 5 && voter_quorum(64, 64) == 33,
	      "k=16: 9 of 16, 5 of 9 live; k=64: 33");
}

/* ---- CHUNKS mode: agreement and a minority ----------------------------- */

static void test_all_agree(void)
{
	struct voter_view v[3];
	for (int i = 0; i < 3; i++)
		v[i] = running(S("abcdefghXYZ"));
	CHECK(is(vote(v, 3, 8, VOTER_CHUNKS), 8, false, 7, 0, false, 0),
	      "k=3 all agree: a whole chunk committed, all agree");

	static unsigned char page[4096 + 100];
	for (size_t i = 0; i < sizeof page; i++)
		page[i] = (unsigned char)(i * 7 + 3);
	bool ok = true;
	for (unsigned k = 1; k <= 16; k++) {
		struct voter_view many[16];
		for (unsigned i = 0; i < k; i++)
			many[i] = running(page, 4096 + i * 5);
		ok &= is(vote(many, k, 4096, VOTER_CHUNKS), 4096, false, all_of(k), 0, false, 0);
	}
	CHECK(ok, "k=1..16 all agree on a 4 KiB chunk (longer buffers vote on the first chunk only)");

	struct voter_view one = at_eof(S("tail"));
	CHECK(is(vote(&one, 1, 8, VOTER_CHUNKS), 4, true, 1, 0, false, 0),
	      "k=1: the lone replica's final proposal commits and ends");

	struct voter_view separate[3] = { running(S("abcdefgh")), running(S("abcdefgh")), running(S("abcdefgh")) };
	unsigned char copy[8];
	memcpy(copy, "abcdefgh", 8);
	separate[1].data = copy;
	CHECK(is(vote(separate, 3, 8, VOTER_CHUNKS), 8, false, 7, 0, false, 0),
	      "equal bytes in different buffers agree");
	struct voter_result first = vote(separate, 3, 8, VOTER_CHUNKS);
	struct voter_result again = vote(separate, 3, 8, VOTER_CHUNKS);
	CHECK(same_result(&first, &again), "stateless: the same views give the same answer twice");
}

static void test_one_differs(void)
{
	const unsigned char good[] = "abcdefgh";
	bool ok = true;
	for (unsigned odd = 0; odd < 3; odd++)
		for (size_t at = 0; at < 8; at++) {
			unsigned char bad[8];
			memcpy(bad, good, 8);
			bad[at] ^= 0x20;
			struct voter_view v[3];
			for (unsigned i = 0; i < 3; i++)
				v[i] = running(i == odd ? bad : good, 8);
			ok &= is(vote(v, 3, 8, VOTER_CHUNKS), 8, false, 7 & ~bit(odd), bit(odd), false, at);
		}
	CHECK(ok, "k=3, one replica differs at any offset: majority committed, the odd one diverged there");

	struct voter_view v[5] = { running(S("12345678")), running(S("1234x678")), running(S("12345678")),
				   running(S("12y45678")), running(S("12345678")) };
	CHECK(is(vote(v, 5, 8, VOTER_CHUNKS), 8, false, 0x15, 0x0a, false, 2),
	      "k=5, two differ: 3 commit, diff_offset is the smallest of the two");

	struct voter_view w[3] = { running(S("abcdefgh")), running(S("abcdefgh")), running(S("abcdefgX")) };
	CHECK(is(vote(w, 3, 8, VOTER_CHUNKS), 8, false, 3, 4, false, 7), "a difference in the last byte of a chunk");
	struct voter_view past[3] = { running(S("abcdefgh1")), running(S("abcdefgh2")), running(S("abcdefgh3")) };
	CHECK(is(vote(past, 3, 8, VOTER_CHUNKS), 8, false, 7, 0, false, 0),
	      "bytes past the chunk are not part of this vote");
}

static void test_byte_exact(void)
{
	struct voter_view ab[2] = { at_eof(S("ab")), at_eof(S("ba")) };
	CHECK(no_quorum_at(vote(ab, 2, 8, VOTER_CHUNKS), 0), "\"ab\" vs \"ba\" differ (a sum of bytes would not)");
	struct voter_view ab3[3] = { at_eof(S("ab")), at_eof(S("ba")), at_eof(S("ab")) };
	CHECK(is(vote(ab3, 3, 8, VOTER_CHUNKS), 2, true, 5, 2, false, 0), "k=3: \"ab\" wins over \"ba\"");
	struct voter_view sums[3] = { running(S("acacacac")), running(S("bbbbbbbb")), running(S("acacacac")) };
	CHECK(is(vote(sums, 3, 8, VOTER_CHUNKS), 8, false, 5, 2, false, 0), "same byte sum, different bytes");

	struct voter_view nul[3] = { running(S("a\0b\0c\0d\0")), running(S("a\0b\0c\0d\0")),
				     running(S("a\0b\0c\0e\0")) };
	CHECK(is(vote(nul, 3, 8, VOTER_CHUNKS), 8, false, 3, 4, false, 6), "NUL bytes compared, not skipped");
	struct voter_view zeros[3] = { running(S("\0\0\0\0")), running(S("\0\0\0\0")), running(S("\0\0\0\1")) };
	CHECK(is(vote(zeros, 3, 4, VOTER_CHUNKS), 4, false, 3, 4, false, 3), "an all-NUL chunk against a 1 byte");
	struct voter_view nul_len[3] = { at_eof(S("\0\0")), at_eof(S("\0\0")), at_eof(S("\0")) };
	CHECK(is(vote(nul_len, 3, 8, VOTER_CHUNKS), 2, true, 3, 4, false, 1),
	      "\"\\0\\0\" and \"\\0\" differ in length (no string functions)");
	struct voter_view dropped[3] = { at_eof(S("ab")), at_eof(S("a\0b")), at_eof(S("a\0b")) };
	CHECK(is(vote(dropped, 3, 8, VOTER_CHUNKS), 3, true, 6, 1, false, 1),
	      "a replica that drops a NUL byte diverges");
	struct voter_view high[3] = { running(S("\xff\x80\x7f\x01")), running(S("\xff\x80\x7f\x01")),
				      running(S("\xff\x80\xff\x01")) };
	CHECK(is(vote(high, 3, 4, VOTER_CHUNKS), 4, false, 3, 4, false, 2), "bytes above 0x7f compared exactly");
}

static void test_lengths(void)
{
	struct voter_view finals[3] = { at_eof(S("abc")), at_eof(S("abcd")), at_eof(S("abc")) };
	CHECK(is(vote(finals, 3, 8, VOTER_CHUNKS), 3, true, 5, 2, false, 3),
	      "final proposals of different lengths differ where the shorter ends");
	struct voter_view longer_wins[3] = { at_eof(S("abc")), at_eof(S("abcd")), at_eof(S("abcd")) };
	CHECK(is(vote(longer_wins, 3, 8, VOTER_CHUNKS), 4, true, 6, 1, false, 3), "the longer one can be the majority");
	struct voter_view whole_vs_final[3] = { running(S("abcdefgh")), at_eof(S("abcdefg")), running(S("abcdefgh")) };
	CHECK(is(vote(whole_vs_final, 3, 8, VOTER_CHUNKS), 8, false, 5, 2, false, 7),
	      "a final proposal one byte short of a chunk never equals the whole chunk");
	struct voter_view k2[2] = { at_eof(S("abc")), at_eof(S("abcd")) };
	CHECK(no_quorum_at(vote(k2, 2, 8, VOTER_CHUNKS), 3), "k=2: lengths differ -> no quorum at the shorter's end");
}

/* ---- k=2 detects only, k=3 all differ ----------------------------------- */

static void test_detect_only(void)
{
	struct voter_view same[2] = { running(S("abcdefgh")), running(S("abcdefgh")) };
	CHECK(is(vote(same, 2, 8, VOTER_CHUNKS), 8, false, 3, 0, false, 0), "k=2 agree: commit");
	bool ok = true;
	for (size_t at = 0; at < 8; at++) {
		unsigned char bad[8];
		memcpy(bad, "abcdefgh", 8);
		bad[at] = '!';
		struct voter_view v[2] = { running(S("abcdefgh")), running(bad, 8) };
		ok &= no_quorum_at(vote(v, 2, 8, VOTER_CHUNKS), at);
		struct voter_view w[2] = { running(bad, 8), running(S("abcdefgh")) };
		ok &= no_quorum_at(vote(w, 2, 8, VOTER_CHUNKS), at);
	}
	CHECK(ok, "k=2: a difference at any offset, either replica -> no_quorum at that offset, nothing marked");
	struct voter_view prefix[2] = { running(S("abcdefgh")), running(S("abc")) };
	CHECK(waiting(vote(prefix, 2, 8, VOTER_CHUNKS)), "k=2: the other is a prefix so far -> wait");
	struct voter_view early[2] = { running(S("abcdefgh")), running(S("abX")) };
	CHECK(no_quorum_at(vote(early, 2, 8, VOTER_CHUNKS), 2),
	      "k=2: an incomplete replica that already differs -> no_quorum at once");
	struct voter_view ends[2] = { at_eof(S("")), running(S("abcdefgh")) };
	CHECK(no_quorum_at(vote(ends, 2, 8, VOTER_CHUNKS), 0), "k=2: one ends, the other goes on -> no_quorum at 0");
	struct voter_view lone[2] = { running(S("abcdefgh")), dead() };
	CHECK(no_quorum_at(vote(lone, 2, 8, VOTER_CHUNKS), 0), "k=2 with one dead: one alone is no quorum");
}

static void test_all_differ(void)
{
	struct voter_view v[3] = { running(S("aaaaXaaa")), running(S("aaaaaaYa")), running(S("aaZaaaaa")) };
	CHECK(no_quorum_at(vote(v, 3, 8, VOTER_CHUNKS), 2), "k=3 all differ: no_quorum at the first split (2)");
	struct voter_view f[3] = { at_eof(S("x")), at_eof(S("xy")), at_eof(S("xyz")) };
	CHECK(no_quorum_at(vote(f, 3, 8, VOTER_CHUNKS), 1), "k=3 three different ends: no_quorum at 1");
	struct voter_view none[3] = { dead(), dead(), dead() };
	CHECK(no_quorum_at(vote(none, 3, 8, VOTER_CHUNKS), 0), "no live replica: no_quorum");
	CHECK(no_quorum_at(vote(none, 0, 8, VOTER_CHUNKS), 0) && no_quorum_at(vote(none, 0, 8, VOTER_PREFIX), 0),
	      "no replica at all: no_quorum in both modes");
}

/* ---- lagging replicas, waiting ----------------------------------------- */

static void test_lagging(void)
{
	struct voter_view v[3] = { running(S("abcdefgh")), running(S("abcdefgh")), running(S("abc")) };
	CHECK(is(vote(v, 3, 8, VOTER_CHUNKS), 8, false, 3, 0, false, 0),
	      "a lagging prefix does not block the quorum, and is pending (neither agree nor diverged)");
	for (unsigned lag = 0; lag < 3; lag++) {
		struct voter_view w[3];
		for (unsigned i = 0; i < 3; i++)
			w[i] = i == lag ? running(S("abX")) : running(S("abcdefgh"));
		CHECK(is(vote(w, 3, 8, VOTER_CHUNKS), 8, false, 7 & ~bit(lag), bit(lag), false, 2),
		      "a lagging replica %u contradicting the winner is diverged at once (offset 2)", lag);
	}
	struct voter_view empty[3] = { running(S("abcdefgh")), running(NULL, 0), running(S("abcdefgh")) };
	CHECK(is(vote(empty, 3, 8, VOTER_CHUNKS), 8, false, 5, 0, false, 0),
	      "a replica with nothing yet (data NULL) is pending");
	struct voter_view past_end[3] = { at_eof(S("abc")), at_eof(S("abc")), running(S("abcd")) };
	CHECK(is(vote(past_end, 3, 8, VOTER_CHUNKS), 3, true, 3, 4, false, 3),
	      "an incomplete replica longer than the agreed end diverges where the stream ends");
	struct voter_view at_end[3] = { at_eof(S("abc")), at_eof(S("abc")), running(S("abc")) };
	CHECK(is(vote(at_end, 3, 8, VOTER_CHUNKS), 3, true, 3, 0, false, 0),
	      "an incomplete replica exactly at the agreed end is pending (it may still end)");
}

static void test_waiting(void)
{
	struct voter_view v[3] = { running(S("abcdefgh")), running(S("abc")), running(S("ab")) };
	CHECK(waiting(vote(v, 3, 8, VOTER_CHUNKS)), "one complete, two prefixes: wait");
	struct voter_view split[3] = { running(S("abcdefgh")), running(S("abcdXfgh")), running(S("abc")) };
	CHECK(waiting(vote(split, 3, 8, VOTER_CHUNKS)), "1-1 split, the third still a prefix of both: wait");
	struct voter_view choose[3] = { running(S("abcdefgh")), running(S("abcdXfgh")), running(S("abcdX")) };
	CHECK(waiting(vote(choose, 3, 8, VOTER_CHUNKS)), "1-1 split, the third a prefix of one: wait");
	struct voter_view neither[3] = { running(S("abcdefgh")), running(S("abcdXfgh")), running(S("aY")) };
	CHECK(no_quorum_at(vote(neither, 3, 8, VOTER_CHUNKS), 1),
	      "1-1 split, the third a prefix of neither: no_quorum without waiting");
	struct voter_view chain[3] = { running(S("a")), running(S("abc")), running(S("ab")) };
	CHECK(waiting(vote(chain, 3, 8, VOTER_CHUNKS)), "all incomplete, a chain of prefixes: wait");
	struct voter_view fan[3] = { running(S("ab")), running(S("ac")), running(S("ad")) };
	CHECK(no_quorum_at(vote(fan, 3, 8, VOTER_CHUNKS), 1), "all incomplete, pairwise different: no_quorum");
	struct voter_view two_of_fan[3] = { running(S("ab")), running(S("ac")), running(S("a")) };
	CHECK(waiting(vote(two_of_fan, 3, 8, VOTER_CHUNKS)), "two different, one a prefix of both: wait");
	struct voter_view fin[3] = { at_eof(S("ab")), running(S("abcdefgh")), running(S("a")) };
	CHECK(waiting(vote(fin, 3, 8, VOTER_CHUNKS)), "a final and a whole chunk, the third a prefix of both: wait");
	struct voter_view fin2[3] = { at_eof(S("ab")), running(S("abcdefgh")), running(S("abc")) };
	CHECK(waiting(vote(fin2, 3, 8, VOTER_CHUNKS)), "the third already past the final one's end: can still join the chunk");
	struct voter_view fin3[3] = { at_eof(S("ab")), running(S("abcdefgh")), running(S("abx")) };
	CHECK(no_quorum_at(vote(fin3, 3, 8, VOTER_CHUNKS), 2), "the third contradicts both: no_quorum");

	/* k=5, quorum 3. */
	struct voter_view five[5] = { running(S("XXXXXXXX")), running(S("XXXXXXXX")), running(S("YYYYYYYY")),
				      running(S("YY")), running(S("Y")) };
	CHECK(waiting(vote(five, 5, 8, VOTER_CHUNKS)), "k=5: the minority proposal can still reach 3: wait");
	struct voter_view five_no[5] = { running(S("XXXXXXXX")), running(S("XXXXXXXX")), running(S("YYYYYYYY")),
					 running(S("ZZ")), running(S("Z")) };
	CHECK(no_quorum_at(vote(five_no, 5, 8, VOTER_CHUNKS), 0),
	      "k=5: 2 + 1 + a chain of 2: nobody can reach 3: no_quorum");
	struct voter_view five_chain[5] = { running(S("XXXXXXXX")), running(S("YYYYYYYY")), running(S("ZZ")),
					    running(S("Z")), running(S("ZZZ")) };
	CHECK(waiting(vote(five_chain, 5, 8, VOTER_CHUNKS)), "k=5: three incomplete in a chain can still make 3: wait");
}

/* ---- end of stream ------------------------------------------------------ */

static void test_end_of_stream(void)
{
	struct voter_view v[3] = { at_eof(NULL, 0), at_eof(S("")), at_eof(NULL, 0) };
	CHECK(is(vote(v, 3, 8, VOTER_CHUNKS), 0, true, 7, 0, false, 0), "all at eof with nothing left: ended");
	struct voter_view tail[3] = { at_eof(S("xyz")), at_eof(S("xyz")), at_eof(S("xyz")) };
	CHECK(is(vote(tail, 3, 8, VOTER_CHUNKS), 3, true, 7, 0, false, 0),
	      "an agreed final proposal commits its bytes and ends");
	struct voter_view full[3] = { at_eof(S("abcdefgh")), at_eof(S("abcdefgh")), at_eof(S("abcdefgh")) };
	CHECK(is(vote(full, 3, 8, VOTER_CHUNKS), 8, false, 7, 0, false, 0),
	      "eof with exactly one chunk left: the chunk is committed, the end comes next");
	struct voter_view lag[3] = { at_eof(NULL, 0), running(NULL, 0), at_eof(NULL, 0) };
	CHECK(is(vote(lag, 3, 8, VOTER_CHUNKS), 0, true, 5, 0, false, 0),
	      "two agree on the end, the third has nothing yet: ended, third pending");
	struct voter_view lone_end[3] = { at_eof(NULL, 0), running(NULL, 0), running(NULL, 0) };
	CHECK(waiting(vote(lone_end, 3, 8, VOTER_CHUNKS)), "one at eof, two with nothing yet: wait");
}

static void test_ends_early(void)
{
	struct voter_view v[3] = { running(S("abcdefgh")), running(S("abcdefgh")), at_eof(S("abc")) };
	CHECK(is(vote(v, 3, 8, VOTER_CHUNKS), 8, false, 3, 4, false, 3),
	      "a replica that ends early diverges where it ends");
	struct voter_view none[3] = { running(S("abcdefgh")), at_eof(NULL, 0), running(S("abcdefgh")) };
	CHECK(is(vote(none, 3, 8, VOTER_CHUNKS), 8, false, 5, 2, false, 0),
	      "a replica that ends with nothing while the others go on diverges at 0");
	struct voter_view goes_on[3] = { at_eof(NULL, 0), at_eof(NULL, 0), running(S("q")) };
	CHECK(is(vote(goes_on, 3, 8, VOTER_CHUNKS), 0, true, 3, 4, false, 0),
	      "the others end, one goes on writing: it diverges at 0");
	struct voter_view goes_on_whole[3] = { at_eof(NULL, 0), running(S("12345678")), at_eof(NULL, 0) };
	CHECK(is(vote(goes_on_whole, 3, 8, VOTER_CHUNKS), 0, true, 5, 2, false, 0),
	      "the others end, one has a whole chunk more: it diverges at 0");
}

/* ---- whole streams through a supervisor loop ---------------------------- */

/* Pushes k complete streams (all at eof) through the voter, committing what it
 * says, as the supervisor would. A replica found diverged is killed (live =
 * false). Returns the committed length, or (size_t)-1 on no_quorum; the
 * committed bytes go to out, the absolute divergence offset of each replica
 * to killed_at ((size_t)-1 if never killed). */
static size_t run_streams(const unsigned char *const *streams, const size_t *lens, unsigned k, size_t chunk,
			  enum voter_mode mode, unsigned char *out, size_t *killed_at)
{
	bool alive[VOTER_MAX];
	for (unsigned i = 0; i < k; i++) {
		alive[i] = true;
		killed_at[i] = (size_t)-1;
	}
	size_t committed = 0;
	for (int rounds = 0; rounds < 10000; rounds++) {
		struct voter_view v[VOTER_MAX];
		unsigned live = 0;
		for (unsigned i = 0; i < k; i++) {
			/* A stream shorter than the committed output must have been diverged. */
			size_t from = committed < lens[i] ? committed : lens[i];
			v[i] = (struct voter_view){ streams[i] + from, lens[i] - from, true, alive[i] };
			live += alive[i];
		}
		struct voter_result r = vote_q(v, k, voter_quorum(live, k), chunk, mode);
		if (r.no_quorum)
			return (size_t)-1;
		for (unsigned i = 0; i < k; i++)
			if (r.diverged & bit(i)) {
				alive[i] = false;
				killed_at[i] = committed + r.diff_offset;
			}
		for (unsigned i = 0; i < k && r.commit; i++)
			if (r.agree & bit(i)) {
				memcpy(out + committed, v[i].data, r.commit);
				break;
			}
		committed += r.commit;
		if (r.ended)
			return committed;
	}
	return (size_t)-2;
}

static void test_streams(void)
{
	static unsigned char text[64], odd[64], out[64];
	for (size_t i = 0; i < sizeof text; i++)
		text[i] = (unsigned char)(i % 5 == 4 ? '\0' : 'a' + i % 26);

	bool ok = true;
	for (int mode = VOTER_CHUNKS; mode <= VOTER_PREFIX; mode++)
		for (size_t len = 0; len <= 40; len++) {
			const unsigned char *s[3] = { text, text, text };
			size_t l[3] = { len, len, len }, killed[3];
			size_t got = run_streams(s, l, 3, 8, (enum voter_mode)mode, out, killed);
			ok &= got == len && memcmp(out, text, len) == 0;
			for (unsigned i = 0; i < 3; i++)
				ok &= killed[i] == (size_t)-1;
		}
	CHECK(ok, "k=3 agreeing streams of 0..40 bytes (multiples of chunk 8 included) come out whole, both modes");

	ok = true;
	for (int mode = VOTER_CHUNKS; mode <= VOTER_PREFIX; mode++)
		for (size_t at = 0; at < 33; at++)
			for (unsigned bad = 0; bad < 3; bad++) {
				memcpy(odd, text, sizeof odd);
				odd[at] ^= 1;
				const unsigned char *s[3] = { text, text, text };
				s[bad] = odd;
				size_t l[3] = { 33, 33, 33 }, killed[3];
				size_t got = run_streams(s, l, 3, 8, (enum voter_mode)mode, out, killed);
				for (unsigned i = 0; i < 3; i++)
					ok &= killed[i] == (i == bad ? at : (size_t)-1);
				ok &= got == 33 && memcmp(out, text, 33) == 0;
			}
	CHECK(ok, "k=3, one corrupt byte anywhere: output exact, the bad replica killed at the right offset");

	ok = true;
	for (size_t cut = 0; cut < 33; cut++) {
		const unsigned char *s[3] = { text, text, text };
		size_t l[3] = { 33, cut, 33 }, killed[3];
		size_t got = run_streams(s, l, 3, 8, VOTER_CHUNKS, out, killed);
		ok &= got == 33 && memcmp(out, text, 33) == 0 && killed[1] == cut && killed[0] == (size_t)-1;
	}
	CHECK(ok, "k=3, one stream ends early at any offset: killed where it ends, output whole");

	const unsigned char *s[2] = { text, odd };
	memcpy(odd, text, sizeof odd);
	odd[20] = '#';
	size_t l[2] = { 33, 33 }, killed[2];
	CHECK(run_streams(s, l, 2, 8, VOTER_CHUNKS, out, killed) == (size_t)-1 && memcmp(out, text, 16) == 0,
	      "k=2: the two chunks before the difference come out, then the run stops");
}

/* ---- PREFIX mode --------------------------------------------------------- */

static void test_prefix(void)
{
	struct voter_view v[3] = { running(S("hello\n")), running(S("hello\n")), running(S("hello\n")) };
	CHECK(is(vote(v, 3, 4096, VOTER_PREFIX), 6, false, 7, 0, false, 0),
	      "quiet replicas agree on a partial chunk: committed without waiting for 4 KiB");
	CHECK(waiting(vote(v, 3, 4096, VOTER_CHUNKS)), "(CHUNKS mode would wait for it)");
	struct voter_view lag[3] = { running(S("hello\n")), running(S("hel")), running(S("hello\n")) };
	CHECK(is(vote(lag, 3, 4096, VOTER_PREFIX), 6, false, 5, 0, false, 0),
	      "a lagging replica does not hold the prefix back, and is pending");
	struct voter_view shortest[3] = { running(S("hello world")), running(S("hello")), running(S("hello wor")) };
	CHECK(is(vote(shortest, 3, 4096, VOTER_PREFIX), 9, false, 5, 0, false, 0),
	      "the longest prefix two share, no further than the shorter of them");
	struct voter_view fork[3] = { running(S("abcdef")), running(S("abcxyz")), running(S("abc")) };
	CHECK(is(vote(fork, 3, 4096, VOTER_PREFIX), 3, false, 7, 0, false, 0),
	      "replicas that fork after 3 bytes: the common 3 bytes committed, nobody diverged yet");
	struct voter_view bad[3] = { running(S("abcdef")), running(S("abcd")), running(S("zzz")) };
	CHECK(is(vote(bad, 3, 4096, VOTER_PREFIX), 4, false, 3, 4, false, 0),
	      "a contradicting replica is diverged at its first difference");
	struct voter_view bad_mid[3] = { running(S("abcdef")), running(S("abXdef")), running(S("abcdef")) };
	CHECK(is(vote(bad_mid, 3, 4096, VOTER_PREFIX), 6, false, 5, 2, false, 2), "one differs in the middle");

	struct voter_view bye[3] = { at_eof(S("bye\n")), at_eof(S("bye\n")), running(S("bye\n")) };
	CHECK(is(vote(bye, 3, 4096, VOTER_PREFIX), 4, true, 3, 0, false, 0),
	      "a quorum at eof right at the prefix: ended; the third is pending");
	struct voter_view more[3] = { at_eof(S("bye\n")), running(S("bye\nmore")), at_eof(S("bye\n")) };
	CHECK(is(vote(more, 3, 4096, VOTER_PREFIX), 4, true, 5, 2, false, 4),
	      "a replica that writes past the agreed end diverges there");
	struct voter_view one_eof[3] = { at_eof(S("bye")), running(S("bye")), running(S("bye")) };
	CHECK(is(vote(one_eof, 3, 4096, VOTER_PREFIX), 3, false, 7, 0, false, 0),
	      "only one at eof: the bytes are committed, the end is not");
	struct voter_view early[3] = { at_eof(S("ab")), running(S("abcd")), running(S("abcd")) };
	CHECK(is(vote(early, 3, 4096, VOTER_PREFIX), 4, false, 6, 1, false, 2),
	      "a replica that ended before the committed prefix diverges where it ended");
	struct voter_view long_one[3] = { running(S("abcdefghij")), running(S("abcdefghij")), running(S("abcdefghij")) };
	CHECK(is(vote(long_one, 3, 4, VOTER_PREFIX), 10, false, 7, 0, false, 0),
	      "the prefix is not capped at the chunk size");

	struct voter_view nothing[3] = { running(NULL, 0), running(S("")), running(NULL, 0) };
	CHECK(waiting(vote(nothing, 3, 8, VOTER_PREFIX)), "nothing written yet: wait");
	struct voter_view xyz[3] = { running(S("x")), running(S("y")), running(S("z")) };
	CHECK(no_quorum_at(vote(xyz, 3, 8, VOTER_PREFIX), 0), "empty shared prefix and no quorum possible: no_quorum");
	struct voter_view could[3] = { running(S("x")), running(S("y")), running(NULL, 0) };
	CHECK(waiting(vote(could, 3, 8, VOTER_PREFIX)), "empty shared prefix, the third could still side: wait");
	struct voter_view end0[3] = { at_eof(NULL, 0), running(NULL, 0), at_eof(NULL, 0) };
	CHECK(is(vote(end0, 3, 8, VOTER_PREFIX), 0, true, 5, 0, false, 0), "a quorum at eof with nothing left: ended");
	struct voter_view end0_more[3] = { at_eof(NULL, 0), running(S("tail")), at_eof(NULL, 0) };
	CHECK(is(vote(end0_more, 3, 8, VOTER_PREFIX), 0, true, 5, 2, false, 0),
	      "ended at 0 while one still writes: it diverges at 0");
	struct voter_view k2[2] = { running(S("abcd")), running(S("abXd")) };
	CHECK(is(vote(k2, 2, 8, VOTER_PREFIX), 2, false, 3, 0, false, 0),
	      "k=2: the common prefix before a difference is still committed");
	struct voter_view k2b[2] = { running(S("Xd")), running(S("Yd")) };
	CHECK(no_quorum_at(vote(k2b, 2, 8, VOTER_PREFIX), 0), "k=2: then no_quorum at the difference");
	struct voter_view four[4] = { at_eof(S("ab")), at_eof(S("ab")), running(S("abc")), running(S("abc")) };
	CHECK(is(vote(four, 4, 8, VOTER_PREFIX), 2, false, 15, 0, false, 0), "k=4, 2 end and 2 go on: only the bytes");
	struct voter_view four_next[4] = { at_eof(NULL, 0), at_eof(NULL, 0), running(S("c")), running(S("c")) };
	CHECK(no_quorum_at(vote(four_next, 4, 8, VOTER_PREFIX), 0), "k=4, then a 2-2 split: no_quorum");
}

/* ---- dead replicas, many replicas, odd arguments ------------------------ */

static void test_dead(void)
{
	struct voter_view v[3] = { running(S("abcdefgh")), dead(), running(S("abcdefgh")) };
	CHECK(is(vote(v, 3, 8, VOTER_CHUNKS), 8, false, 5, 0, false, 0),
	      "k=3, one dead (never read): the two live ones commit, the dead one in no mask");
	CHECK(is(vote(v, 3, 8, VOTER_PREFIX), 8, false, 5, 0, false, 0), "the same in PREFIX mode");
	struct voter_view w[3] = { running(S("abcdefgh")), dead(), running(S("abcdXfgh")) };
	CHECK(no_quorum_at(vote(w, 3, 8, VOTER_CHUNKS), 4), "k=3, one dead, the two live differ: no_quorum");
	struct voter_view d[5] = { dead(), running(S("abcdefgh")), dead(), running(S("abcdefgh")), running(S("zzzzzzzz")) };
	CHECK(is(vote(d, 5, 8, VOTER_CHUNKS), 8, false, 0x0a, 0x10, false, 0),
	      "k=5, two dead: 2 of 3 live commit, the live odd one diverged");
}

static void test_many(void)
{
	static unsigned char good[9] = "GOODGOOD", bad[7][8];
	bool ok = true;
	for (unsigned layout = 0; layout < 50; layout++) {
		/* 9 agreeing and 7 divergent replicas, in a different arrangement each time. */
		unsigned char order[16];
		for (unsigned i = 0; i < 16; i++)
			order[i] = (unsigned char)i;
		uint64_t x = layout * 0x9e3779b97f4a7c15ULL + 1;
		for (unsigned i = 15; i > 0; i--) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			unsigned j = (unsigned)(x % (i + 1));
			unsigned char t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		struct voter_view v[16];
		uint64_t agree = 0, diverged = 0;
		for (unsigned i = 0; i < 16; i++) {
			unsigned slot = order[i];
			if (slot < 9) {
				v[i] = running(good, 8);
				agree |= bit(i);
			} else {
				memcpy(bad[slot - 9], good, 8);
				bad[slot - 9][slot - 9 + 1] = '?'; /* offsets 1..7 */
				v[i] = running(bad[slot - 9], 8);
				diverged |= bit(i);
			}
		}
		ok &= is(vote(v, 16, 8, VOTER_CHUNKS), 8, false, agree, diverged, false, 1);
		ok &= is(vote(v, 16, 8, VOTER_PREFIX), 8, false, agree, diverged, false, 1);
	}
	CHECK(ok, "k=16: 9 agree, 7 each different, any arrangement: 9 commit, 7 diverged, first offset 1");

	struct voter_view v[16];
	for (unsigned i = 0; i < 16; i++)
		v[i] = i % 2 ? running(S("BBBBBBBB")) : running(S("AAAAAAAA"));
	CHECK(no_quorum_at(vote(v, 16, 8, VOTER_CHUNKS), 0), "k=16, 8 against 8: no_quorum");
	for (unsigned i = 0; i < 16; i++)
		v[i] = i < 7 ? running(S("BBBBBBBB")) : running(S("AAAAAAAA"));
	CHECK(is(vote(v, 16, 8, VOTER_CHUNKS), 8, false, 0xff80, 0x7f, false, 0),
	      "k=16, 9 against a group of 7 that agree among themselves: the 9 win");
	v[15] = running(S("AAAA"));
	CHECK(waiting(vote(v, 16, 8, VOTER_CHUNKS)), "k=16, 8 + one lagging prefix against 7: wait");
	v[15] = running(S("AAAB"));
	CHECK(no_quorum_at(vote(v, 16, 8, VOTER_CHUNKS), 0), "k=16, 8 + one contradicting against 7: no_quorum");

	struct voter_view all[64];
	for (unsigned i = 0; i < 64; i++)
		all[i] = running(S("abcdefgh"));
	CHECK(is(vote(all, 64, 8, VOTER_CHUNKS), 8, false, ~(uint64_t)0, 0, false, 0), "k=64 all agree: all 64 bits");
	all[63] = running(S("abcdefgX"));
	CHECK(is(vote(all, 64, 8, VOTER_CHUNKS), 8, false, ~(uint64_t)0 >> 1, bit(63), false, 7),
	      "k=64, replica 63 differs: bit 63 set");
	CHECK(is(vote(all, 64, 8, VOTER_PREFIX), 8, false, ~(uint64_t)0 >> 1, bit(63), false, 7),
	      "k=64 PREFIX, replica 63 differs: bit 63 set");
}

static void test_odd_arguments(void)
{
	struct voter_view v[3] = { running(S("ab")), running(S("ab")), running(S("ab")) };
	CHECK(is(vote_q(v, 3, 2, 0, VOTER_CHUNKS), 1, false, 7, 0, false, 0), "chunk 0 counts as 1");
	struct voter_view w[2] = { running(S("abcdefgh")), running(S("zzzzzzzz")) };
	CHECK(is(vote_q(w, 2, 0, 8, VOTER_CHUNKS), 8, false, 1, 2, false, 0),
	      "quorum 0 counts as 1 (the lowest-numbered group wins the tie)");
	struct voter_view four[4] = { running(S("YYYYYYYY")), running(S("XXXXXXXX")), running(S("XXXXXXXX")),
				      running(S("YYYYYYYY")) };
	CHECK(is(vote_q(four, 4, 2, 8, VOTER_CHUNKS), 8, false, 9, 6, false, 0),
	      "quorum 2 of 4 live, 2-2: the group holding replica 0 wins");
	struct voter_view five[5] = { running(S("YYYYYYYY")), running(S("XXXXXXXX")), running(S("XXXXXXXX")),
				      running(S("XXXXXXXX")), running(S("YYYYYYYY")) };
	CHECK(is(vote_q(five, 5, 2, 8, VOTER_CHUNKS), 8, false, 14, 17, false, 0),
	      "quorum 2 of 5 live, 3-2: the larger group wins");
	CHECK(no_quorum_at(vote_q(v, 3, 4, 8, VOTER_CHUNKS), 0), "a quorum above the live count: no_quorum");
	struct voter_view many[65];
	for (unsigned i = 0; i < 65; i++)
		many[i] = running(S("abcdefgh"));
	many[64] = dead();
	many[64].live = true; /* would be read if views past VOTER_MAX were looked at */
	CHECK(is(vote_q(many, 65, 33, 8, VOTER_CHUNKS), 8, false, ~(uint64_t)0, 0, false, 0),
	      "views past VOTER_MAX are not looked at");
}

/* ---- the reference: slow, written from voter.h ---------------------------- */

enum { SYM_UNKNOWN = -1, SYM_EOF = 256 };

/* What a replica has said: known bytes, then end-of-stream or unknown. */
struct said {
	const unsigned char *bytes;
	size_t len;
	bool ends;
	bool complete;
};

static int symbol_at(const struct said *s, size_t offset)
{
	if (offset < s->len)
		return s->bytes[offset];
	if (offset == s->len && s->ends)
		return SYM_EOF;
	return SYM_UNKNOWN;
}

/* First offset where both say something and not the same thing; SIZE_MAX if none. */
static size_t ref_difference(const struct said *a, const struct said *b)
{
	for (size_t offset = 0;; offset++) {
		int x = symbol_at(a, offset), y = symbol_at(b, offset);
		if (x == SYM_UNKNOWN || y == SYM_UNKNOWN)
			return SIZE_MAX;
		if (x != y)
			return offset;
		if (x == SYM_EOF)
			return SIZE_MAX;
	}
}

static bool ref_bytes_equal(const unsigned char *a, const unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

static struct said ref_proposal(const struct voter_view *v, size_t chunk)
{
	if (v->len >= chunk)
		return (struct said){ v->data, chunk, false, true };
	if (v->eof)
		return (struct said){ v->data, v->len, true, true };
	return (struct said){ v->data, v->len, false, false };
}

static bool ref_same_proposal(const struct said *a, const struct said *b)
{
	return a->complete && b->complete && a->len == b->len && a->ends == b->ends &&
	       ref_bytes_equal(a->bytes, b->bytes, a->len);
}

/* Could replica x still make the complete proposal p? */
static bool ref_could_make(const struct said *x, const struct said *p)
{
	if (x->complete)
		return ref_same_proposal(x, p);
	return x->len <= p->len && ref_bytes_equal(x->bytes, p->bytes, x->len);
}

static void ref_undecided(const struct voter_view *v, unsigned n, unsigned quorum, size_t chunk,
			  struct voter_result *out)
{
	/* Candidates: every complete proposal, and every incomplete replica's
	 * bytes as if it ended now (that proposal can collect every incomplete
	 * replica that is a prefix of it, the most any extension of it can). */
	for (unsigned c = 0; c < n; c++) {
		if (!v[c].live)
			continue;
		struct said p = ref_proposal(&v[c], chunk);
		p.ends = !p.complete ? true : p.ends;
		p.complete = true;
		unsigned votes = 0;
		for (unsigned i = 0; i < n; i++) {
			struct said x = ref_proposal(&v[i], chunk);
			votes += v[i].live && ref_could_make(&x, &p);
		}
		if (votes >= quorum)
			return; /* wait */
	}
	out->no_quorum = true;
	size_t first = SIZE_MAX;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n; j++)
			if (i != j && v[i].live && v[j].live) {
				struct said a = ref_proposal(&v[i], chunk), b = ref_proposal(&v[j], chunk);
				size_t d = ref_difference(&a, &b);
				if (d < first)
					first = d;
			}
	out->diff_offset = first == SIZE_MAX ? 0 : first;
}

static void ref_diverged(const struct said *decided, const struct said *each, const struct voter_view *v,
			 unsigned n, struct voter_result *out)
{
	size_t first = SIZE_MAX;
	for (unsigned i = 0; i < n; i++) {
		if (!v[i].live || (out->agree & bit(i)))
			continue;
		size_t d = ref_difference(decided, &each[i]);
		if (d != SIZE_MAX) {
			out->diverged |= bit(i);
			if (d < first)
				first = d;
		}
	}
	out->diff_offset = first == SIZE_MAX ? 0 : first;
}

static void ref_chunks(const struct voter_view *v, unsigned n, unsigned quorum, size_t chunk,
		       struct voter_result *out)
{
	struct said p[VOTER_MAX];
	for (unsigned i = 0; i < n; i++)
		if (v[i].live)
			p[i] = ref_proposal(&v[i], chunk);
	int winner = -1;
	unsigned winner_votes = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!v[i].live || !p[i].complete)
			continue;
		unsigned votes = 0;
		for (unsigned j = 0; j < n; j++)
			votes += v[j].live && ref_same_proposal(&p[i], &p[j]);
		if (votes >= quorum && votes > winner_votes) {
			winner = (int)i;
			winner_votes = votes;
		}
	}
	if (winner < 0) {
		ref_undecided(v, n, quorum, chunk, out);
		return;
	}
	out->commit = p[winner].len;
	out->ended = p[winner].ends;
	for (unsigned j = 0; j < n; j++)
		if (v[j].live && ref_same_proposal(&p[winner], &p[j]))
			out->agree |= bit(j);
	ref_diverged(&p[winner], p, v, n, out);
}

static void ref_prefix(const struct voter_view *v, unsigned n, unsigned quorum, size_t chunk,
		       struct voter_result *out)
{
	size_t longest = 0;
	for (unsigned i = 0; i < n; i++)
		if (v[i].live && v[i].len > longest)
			longest = v[i].len;
	/* From the longest length down, the first length some quorum shares. */
	for (size_t len = longest + 1; len-- > 0;) {
		uint64_t best = 0;
		unsigned best_size = 0;
		for (unsigned i = 0; i < n; i++) {
			if (!v[i].live || v[i].len < len)
				continue;
			uint64_t sharing = 0;
			for (unsigned j = 0; j < n; j++)
				if (v[j].live && v[j].len >= len && ref_bytes_equal(v[i].data, v[j].data, len))
					sharing |= bit(j);
			unsigned size = 0;
			for (unsigned j = 0; j < n; j++)
				size += (sharing & bit(j)) != 0;
			/* i runs upwards, so on a tie the class met first holds the lowest replica. */
			if (size >= quorum && size > best_size) {
				best = sharing;
				best_size = size;
			}
		}
		if (!best_size)
			continue;
		uint64_t at_end = 0;
		unsigned ending = 0, first = n;
		for (unsigned j = 0; j < n; j++)
			if (best & bit(j)) {
				if (first == n)
					first = j;
				if (v[j].eof && v[j].len == len) {
					at_end |= bit(j);
					ending++;
				}
			}
		bool ended = ending >= quorum;
		if (len == 0 && !ended)
			break;
		out->commit = len;
		out->ended = ended;
		out->agree = ended ? at_end : best;
		struct said decided = { v[first].data, len, ended, true };
		struct said each[VOTER_MAX];
		for (unsigned j = 0; j < n; j++)
			each[j] = (struct said){ v[j].data, v[j].len, v[j].eof, v[j].eof };
		ref_diverged(&decided, each, v, n, out);
		return;
	}
	ref_undecided(v, n, quorum, chunk, out);
}

static void ref_decide(const struct voter_view *v, unsigned n, unsigned quorum, size_t chunk,
		       enum voter_mode mode, struct voter_result *out)
{
	*out = (struct voter_result){ 0 };
	if (quorum == 0)
		quorum = 1;
	if (chunk == 0)
		chunk = 1;
	if (mode == VOTER_PREFIX)
		ref_prefix(v, n, quorum, chunk, out);
	else
		ref_chunks(v, n, quorum, chunk, out);
}

/* ---- the randomized differential test ---------------------------------- */

static uint64_t rng_state;

static uint64_t next_random(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned below(unsigned bound)
{
	return (unsigned)(next_random() % bound);
}

static void print_case(const struct voter_view *v, unsigned n, unsigned quorum, size_t chunk,
		       enum voter_mode mode)
{
	printf("#   n=%u quorum=%u chunk=%zu mode=%s\n", n, quorum, chunk, mode == VOTER_PREFIX ? "PREFIX" : "CHUNKS");
	for (unsigned i = 0; i < n; i++) {
		printf("#   [%u] %s%s len=%zu \"", i, v[i].live ? "live" : "dead", v[i].eof ? " eof" : "", v[i].len);
		for (size_t j = 0; j < v[i].len && v[i].data; j++)
			printf(v[i].data[j] >= 32 && v[i].data[j] < 127 ? "%c" : "\\x%02x", v[i].data[j]);
		printf("\"\n");
	}
}

/* One random case: a few base strings over a tiny alphabet, replicas made of
 * them truncated, mutated or extended, so that equal chunks, prefixes and
 * near misses are all frequent. Returns whether voter and reference agree. */
static bool random_case(unsigned max_n, unsigned *shown, unsigned stats[4])
{
	enum { MAX_LEN = 40 };
	static unsigned char buffers[VOTER_MAX][MAX_LEN];
	static const size_t chunks[] = { 1, 2, 3, 4, 8, 8, 8, 16 };
	static const unsigned char alphabet[] = { 'a', 'b', '\0' };
	unsigned char base[3][MAX_LEN];
	size_t base_len[3];
	struct voter_view v[VOTER_MAX];

	size_t chunk = chunks[below(sizeof chunks / sizeof chunks[0])];
	unsigned letters = 1 + below(3);
	unsigned bases = 1 + below(3);
	unsigned n = below(max_n + 1);
	size_t span = 2 * chunk + 3 < MAX_LEN ? 2 * chunk + 3 : MAX_LEN;
	for (unsigned b = 0; b < bases; b++) {
		base_len[b] = below((unsigned)span + 1);
		for (size_t j = 0; j < base_len[b]; j++)
			base[b][j] = alphabet[below(letters)];
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned b = below(bases);
		size_t len = base_len[b];
		memcpy(buffers[i], base[b], len);
		if (below(3) == 0)
			len = below((unsigned)len + 1); /* lagging or ended early */
		if (len > 0 && below(5) == 0)
			buffers[i][below((unsigned)len)] = alphabet[below(letters)]; /* may rewrite the same byte */
		if (below(8) == 0)
			while (len < MAX_LEN && below(3))
				buffers[i][len++] = alphabet[below(letters)];
		v[i].data = len == 0 && below(2) ? NULL : buffers[i];
		v[i].len = len;
		v[i].eof = below(2);
		v[i].live = below(10) != 0;
	}
	unsigned live = live_count(v, n);
	unsigned quorum = below(10) < 7 ? voter_quorum(live, n) : below(n + 2);
	enum voter_mode mode = below(2) ? VOTER_PREFIX : VOTER_CHUNKS;

	struct voter_result got, want;
	memset(&got, 0x5a, sizeof got);
	voter_decide(v, n, quorum, chunk, mode, &got);
	ref_decide(v, n, quorum, chunk, mode, &want);
	stats[want.no_quorum ? 0 : want.ended ? 1 : want.commit || want.agree ? 2 : 3]++;
	if (same_result(&got, &want))
		return true;
	if ((*shown)++ < 5) {
		print_case(v, n, quorum, chunk, mode);
		show("voter    ", &got);
		show("reference", &want);
	}
	return false;
}

static void test_random(void)
{
	const char *seed = getenv("VOTER_TEST_SEED");
	uint64_t start = seed ? strtoull(seed, NULL, 0) : 20240601;
	printf("# random seed %llu (set VOTER_TEST_SEED to change)\n", (unsigned long long)start);
	rng_state = start;

	static const struct {
		unsigned max_n, cases;
		const char *what;
	} runs[] = {
		{ 2, 20000, "k<=2" },   { 3, 40000, "k<=3" },  { 5, 40000, "k<=5" },
		{ 9, 30000, "k<=9" },   { 16, 5000, "k<=16" }, { 64, 500, "k<=64" },
	};
	for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
		unsigned failed = 0, shown = 0, stats[4] = { 0 };
		for (unsigned c = 0; c < runs[r].cases; c++)
			failed += !random_case(runs[r].max_n, &shown, stats);
		printf("#   %s: %u no_quorum, %u ended, %u committed, %u waited\n", runs[r].what, stats[0], stats[1],
		       stats[2], stats[3]);
		CHECK(failed == 0, "random differential, %s: %u cases, every field equal to the reference (%u differ)",
		      runs[r].what, runs[r].cases, failed);
	}
}

int main(void)
{
	test_quorum();
	test_all_agree();
	test_one_differs();
	test_byte_exact();
	test_lengths();
	test_detect_only();
	test_all_differ();
	test_lagging();
	test_waiting();
	test_end_of_stream();
	test_ends_early();
	test_streams();
	test_prefix();
	test_dead();
	test_many();
	test_odd_arguments();
	test_random();
	{
		struct voter_view dv[4] = { running(S("a\nb")), dead(), running(S("a\nbc")), running(S("")) };
		CHECK(!voter_views_differ(dv, 4), "views_differ: one going further, a dead one and an empty one: no");
		dv[3] = running(S("a\nc"));
		CHECK(voter_views_differ(dv, 4), "views_differ: a byte differs where both have one: yes");
	}
	return tap_done();
}
