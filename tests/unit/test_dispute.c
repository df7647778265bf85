/* Unit tests of dispute.c: who is odd when replicas made the same call with
 * different arguments.
 *
 * An odd callback records every verdict (replica, key, index, expected, got);
 * the checks look at the whole record, so "named exactly once, nobody else"
 * is what passes. Covered: a follower odd and the leader odd (k=3), waiting
 * for every still-running replica and settling when one exits, force, no
 * majority (k=2, a three-way split, a 2-2 split; ties go to the first
 * argument, whichever replica made it), notes for undisputed calls,
 * several disputes open at once on different keys and indices, the made mask
 * of disputes_open (and that it does not overwrite an open dispute), k=5 with
 * two odd replicas, and k=64 with replica 63 odd and leading. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dispute.h"
#include "tap.h"

/* ---- a recording odd callback ------------------------------------------- */

struct verdict {
	unsigned replica;
	uint32_t key;
	uint64_t index;
	uint64_t expected;
	uint64_t got;
};

struct record {
	unsigned n;
	bool bad_ctx; /* odd was called with a ctx other than this record */
	struct verdict v[256];
};

static struct record rec;

static void on_odd(void *ctx, unsigned replica, uint32_t key, uint64_t index, uint64_t expected, uint64_t got)
{
	struct record *R = ctx;
	if (R != &rec) {
		rec.bad_ctx = true;
		return;
	}
	if (R->n < sizeof R->v / sizeof R->v[0])
		R->v[R->n] = (struct verdict){ replica, key, index, expected, got };
	R->n++;
}

static struct disputes *fresh(unsigned k)
{
	memset(&rec, 0, sizeof rec);
	return disputes_new(k, on_odd, &rec);
}

/* How many recorded verdicts are exactly this one. */
static unsigned named(unsigned replica, uint32_t key, uint64_t index, uint64_t expected, uint64_t got)
{
	unsigned c = 0;
	for (unsigned i = 0; i < rec.n && i < sizeof rec.v / sizeof rec.v[0]; i++) {
		const struct verdict *v = &rec.v[i];
		c += v->replica == replica && v->key == key && v->index == index && v->expected == expected &&
		     v->got == got;
	}
	return c;
}

static void show(void)
{
	for (unsigned i = 0; i < rec.n && i < sizeof rec.v / sizeof rec.v[0]; i++)
		printf("#   odd(replica %u, key %u, index %llu, expected %#llx, got %#llx)\n", rec.v[i].replica,
		       (unsigned)rec.v[i].key, (unsigned long long)rec.v[i].index,
		       (unsigned long long)rec.v[i].expected, (unsigned long long)rec.v[i].got);
	if (rec.bad_ctx)
		printf("#   odd was called with the wrong ctx\n");
}

/* The record is exactly the given verdicts (in any order), each once. */
static bool only(unsigned count, const struct verdict *want)
{
	bool ok = rec.n == count && !rec.bad_ctx;
	for (unsigned i = 0; ok && i < count; i++)
		ok = named(want[i].replica, want[i].key, want[i].index, want[i].expected, want[i].got) == 1;
	if (!ok)
		show();
	return ok;
}

static bool none(void)
{
	return only(0, NULL);
}

#define BIT(i) ((uint64_t)1 << (i))
#define ALL(k) ((k) == 64 ? ~(uint64_t)0 : BIT(k) - 1)

enum { KEY = 7, KEY2 = 9 };
static const uint64_t A = 0x100000020ull; /* getrandom: 32 bytes, flags 1 */
static const uint64_t B = 0x000000020ull; /* 32 bytes, flags 0 */
static const uint64_t C = 0x000000010ull; /* 16 bytes, flags 0 */

/* ---- the tests ------------------------------------------------------------ */

/* Nothing open: notes are one test and do nothing. */
static void test_undisputed(void)
{
	struct disputes *D = fresh(3);
	CHECK(D != NULL && !disputes_pending(D), "new: nothing pending");
	for (unsigned r = 0; r < 3; r++)
		disputes_note(D, KEY, 0, r, r == 1 ? B : A);
	disputes_settle(D, ALL(3), false);
	disputes_settle(D, ALL(3), true);
	CHECK(!disputes_pending(D) && none(), "notes with no dispute open open none and name nobody");
	disputes_free(D);
}

/* k=3: leader 0 made it with A, replica 1 with B, replica 2 with A. */
static void test_follower_odd(void)
{
	struct disputes *D = fresh(3);
	disputes_open(D, KEY, 4, A, BIT(0), 1, B);
	CHECK(disputes_pending(D), "k=3: replica 1 differing from the leader opens a dispute");
	disputes_settle(D, ALL(3), false);
	CHECK(disputes_pending(D) && none(),
	      "k=3: not settled while replica 2 (running) has not made the call");
	disputes_note(D, KEY, 4, 2, A);
	disputes_settle(D, ALL(3), false);
	CHECK(only(1, (struct verdict[]){ { 1, KEY, 4, A, B } }),
	      "k=3: once all made it, replica 1 named once (expected A, got B), nobody else");
	CHECK(!disputes_pending(D), "k=3: the settled dispute is gone");
	disputes_settle(D, ALL(3), false);
	disputes_settle(D, ALL(3), true);
	CHECK(rec.n == 1, "k=3: settling again names nobody a second time");
	disputes_free(D);
}

/* The leader is the odd one: the majority, not the first, decides. */
static void test_leader_odd(void)
{
	struct disputes *D = fresh(3);
	disputes_open(D, KEY, 0, A, BIT(0), 1, B);
	disputes_note(D, KEY, 0, 2, B);
	disputes_settle(D, ALL(3), false);
	CHECK(only(1, (struct verdict[]){ { 0, KEY, 0, B, A } }) && !disputes_pending(D),
	      "k=3: leader 0 with A, replicas 1 and 2 with B: the leader named (expected B, got A)");
	disputes_free(D);
}

/* Waiting: a replica that exits no longer holds a dispute open. */
static void test_waiting(void)
{
	struct disputes *D = fresh(5);
	disputes_open(D, KEY, 2, A, BIT(0), 1, B);
	disputes_note(D, KEY, 2, 2, A);
	disputes_note(D, KEY, 2, 3, A);
	disputes_settle(D, ALL(5), false);
	CHECK(disputes_pending(D) && none(), "k=5: not settled while replica 4 is still running and has not made it");
	disputes_settle(D, ALL(5) & ~BIT(4), false);
	CHECK(only(1, (struct verdict[]){ { 1, KEY, 2, A, B } }) && !disputes_pending(D),
	      "k=5: settled once replica 4 leaves waiting; the majority of those who made it names replica 1");
	disputes_free(D);

	/* k=3, replica 2 exits before the call: A against B, no majority. */
	D = fresh(3);
	disputes_open(D, KEY, 0, A, BIT(0), 1, B);
	disputes_settle(D, BIT(0) | BIT(1) | BIT(2), false);
	bool held = disputes_pending(D) && rec.n == 0;
	disputes_settle(D, BIT(0) | BIT(1), false);
	CHECK(held && only(1, (struct verdict[]){ { 1, KEY, 0, A, B } }) && !disputes_pending(D),
	      "k=3: replica 2 exits first: settled with the two, the one differing from the first named");
	disputes_free(D);
}

/* Force: every dispute settles on what is known. */
static void test_force(void)
{
	struct disputes *D = fresh(5);
	disputes_open(D, KEY, 1, A, BIT(0) | BIT(2), 1, B); /* 0, 2: A; 1: B; 3, 4 not yet */
	disputes_open(D, KEY2, 8, C, BIT(3), 4, A);         /* 3: C; 4: A; others not yet */
	disputes_note(D, KEY2, 8, 0, A);                    /* 0: A: majority A of three */
	disputes_settle(D, ALL(5), false);
	CHECK(disputes_pending(D) && none(), "force: before it, neither incomplete dispute settles");
	disputes_settle(D, ALL(5), true);
	CHECK(only(2, (struct verdict[]){ { 1, KEY, 1, A, B }, { 3, KEY2, 8, A, C } }),
	      "force: both disputes settle on the replicas that made the call");
	CHECK(!disputes_pending(D), "force: nothing left pending");
	disputes_free(D);
}

/* No majority: those differing from the first argument are named. */
static void test_no_majority(void)
{
	struct disputes *D = fresh(2);
	disputes_open(D, KEY, 3, A, BIT(0), 1, B);
	disputes_settle(D, ALL(2), false);
	CHECK(only(1, (struct verdict[]){ { 1, KEY, 3, A, B } }) && !disputes_pending(D),
	      "k=2, A against B: settled at once, replica 1 (differing from the first) named");
	disputes_free(D);

	D = fresh(3);
	disputes_open(D, KEY, 3, A, BIT(0), 1, B);
	disputes_note(D, KEY, 3, 2, C);
	disputes_settle(D, ALL(3), false);
	CHECK(only(2, (struct verdict[]){ { 1, KEY, 3, A, B }, { 2, KEY, 3, A, C } }),
	      "k=3, three-way split A/B/C: replicas 1 and 2 named against A, the leader not");
	disputes_free(D);

	/* The first argument, not the lowest replica's, wins a tie. */
	D = fresh(2);
	disputes_open(D, KEY, 3, A, BIT(1), 0, B);
	disputes_settle(D, ALL(2), false);
	CHECK(only(1, (struct verdict[]){ { 0, KEY, 3, A, B } }),
	      "k=2, leader 1 with A, replica 0 with B: replica 0 named against A");
	disputes_free(D);

	D = fresh(4);
	disputes_open(D, KEY, 3, A, BIT(2) | BIT(3), 0, B);
	disputes_note(D, KEY, 3, 1, B);
	disputes_settle(D, ALL(4), false);
	CHECK(only(2, (struct verdict[]){ { 0, KEY, 3, A, B }, { 1, KEY, 3, A, B } }),
	      "k=4, 2-2 split, leader 2: replicas 0 and 1 (differing from the first) named");
	disputes_free(D);
}

/* Several disputes at once, on different keys and indices, stay apart. */
static void test_several(void)
{
	const uint32_t bigkey = 0xfffffffeu;
	const uint64_t bigindex = ((uint64_t)1 << 40) + 7;
	struct disputes *D = fresh(3);
	disputes_open(D, KEY, 5, A, BIT(0), 1, B);           /* leader 0 */
	disputes_open(D, KEY2, 5, A, BIT(1), 0, C);          /* leader 1 */
	disputes_open(D, KEY, 6, B, BIT(2), 0, C);           /* leader 2 */
	disputes_open(D, bigkey, bigindex, C, BIT(0), 2, A); /* leader 0 */
	/* Notes for calls next to the disputed ones, with odd arguments. */
	disputes_note(D, KEY, 4, 2, C);
	disputes_note(D, KEY, 7, 2, C);
	disputes_note(D, KEY2, 6, 2, C);
	disputes_note(D, 8, 5, 2, C);
	disputes_settle(D, ALL(3), false);
	CHECK(disputes_pending(D) && none(), "several: none complete, none settled; neighbouring notes count for none");

	disputes_note(D, KEY2, 5, 2, C); /* (KEY2, 5): 0 C, 1 A, 2 C: replica 1 odd */
	disputes_settle(D, ALL(3), false);
	CHECK(only(1, (struct verdict[]){ { 1, KEY2, 5, C, A } }) && disputes_pending(D),
	      "several: completing one settles that one alone, the others stay pending");

	disputes_note(D, KEY, 5, 2, A);           /* A B A: replica 1 odd */
	disputes_note(D, KEY, 6, 1, B);           /* C B B: replica 0 odd */
	disputes_note(D, bigkey, bigindex, 1, C); /* C C A: replica 2 odd */
	disputes_settle(D, ALL(3), false);
	CHECK(only(4, (struct verdict[]){ { 1, KEY2, 5, C, A },
					 { 1, KEY, 5, A, B },
					 { 0, KEY, 6, B, C },
					 { 2, bigkey, bigindex, C, A } }) &&
		      !disputes_pending(D),
	      "several: each settles with its own verdict, key and 64-bit index passed through unchanged");
	disputes_free(D);
}

/* disputes_open's made mask: those replicas made it with first_arg. */
static void test_made(void)
{
	struct disputes *D = fresh(3);
	disputes_open(D, KEY, 0, A, BIT(0) | BIT(2), 1, B);
	disputes_settle(D, ALL(3), false);
	CHECK(only(1, (struct verdict[]){ { 1, KEY, 0, A, B } }) && !disputes_pending(D),
	      "made: replica 2 in made counts as having made it: settled without a note from it");
	disputes_free(D);

	/* k=5: 0, 1, 2 made it with A before 3 differed; 3, 4 with B. Counting
	 * only the leader would make B the majority and name replica 0. */
	D = fresh(5);
	disputes_open(D, KEY, 0, A, BIT(0) | BIT(1) | BIT(2), 3, B);
	disputes_note(D, KEY, 0, 4, B);
	disputes_settle(D, ALL(5), false);
	CHECK(only(2, (struct verdict[]){ { 3, KEY, 0, A, B }, { 4, KEY, 0, A, B } }),
	      "made: replicas in made counted with first_arg in the majority");
	disputes_free(D);

	/* A second disagreement on an open dispute: its made (which, as the
	 * supervisor computes it, includes replica 1) must not turn replica
	 * 1's B into first_arg. */
	D = fresh(3);
	disputes_open(D, KEY, 0, A, BIT(0), 1, B);
	disputes_open(D, KEY, 0, A, BIT(0) | BIT(1), 2, C);
	disputes_settle(D, ALL(3), false);
	CHECK(only(2, (struct verdict[]){ { 1, KEY, 0, A, B }, { 2, KEY, 0, A, C } }),
	      "made: a second open on the same call keeps the arguments already collected");
	disputes_free(D);
}

/* k=5 with two odd replicas, and with the leader in the minority. */
static void test_k5(void)
{
	struct disputes *D = fresh(5);
	disputes_open(D, KEY, 9, A, BIT(0), 3, B);
	disputes_note(D, KEY, 9, 1, A);
	disputes_note(D, KEY, 9, 4, C);
	disputes_settle(D, ALL(5), false);
	bool held = disputes_pending(D) && rec.n == 0;
	disputes_note(D, KEY, 9, 2, A);
	disputes_settle(D, ALL(5), false);
	CHECK(held && only(2, (struct verdict[]){ { 3, KEY, 9, A, B }, { 4, KEY, 9, A, C } }),
	      "k=5: A A A B C: replicas 3 and 4 named, each with its own argument");
	disputes_free(D);

	D = fresh(5);
	disputes_open(D, KEY, 9, A, BIT(0), 1, B);
	disputes_note(D, KEY, 9, 2, B);
	disputes_note(D, KEY, 9, 3, B);
	disputes_note(D, KEY, 9, 4, A);
	disputes_settle(D, ALL(5), false);
	CHECK(only(2, (struct verdict[]){ { 0, KEY, 9, B, A }, { 4, KEY, 9, B, A } }),
	      "k=5: A B B B A: the leader and replica 4 named against the majority B");
	disputes_free(D);
}

/* k=64: replica 63, the last bit of the masks. */
static void test_k64(void)
{
	struct disputes *D = fresh(64);
	disputes_open(D, KEY, 1, A, BIT(0), 63, B);
	for (unsigned r = 1; r < 62; r++)
		disputes_note(D, KEY, 1, r, A);
	disputes_settle(D, ALL(64), false);
	bool held = disputes_pending(D) && rec.n == 0;
	disputes_note(D, KEY, 1, 62, A);
	disputes_settle(D, ALL(64), false);
	CHECK(held && only(1, (struct verdict[]){ { 63, KEY, 1, A, B } }) && !disputes_pending(D),
	      "k=64: replica 63 odd: held until replica 62 made it, then named alone");
	disputes_free(D);

	D = fresh(64);
	disputes_open(D, KEY, 2, A, BIT(63), 0, B);
	for (unsigned r = 1; r < 63; r++)
		disputes_note(D, KEY, 2, r, B);
	disputes_settle(D, ALL(64), false);
	CHECK(only(1, (struct verdict[]){ { 63, KEY, 2, B, A } }) && !disputes_pending(D),
	      "k=64: leader 63 in made and odd: named against the majority");
	disputes_free(D);
}

/* Freeing with disputes open reports nothing (and, under ASan, leaks none). */
static void test_free_open(void)
{
	struct disputes *D = fresh(3);
	disputes_open(D, KEY, 0, A, BIT(0), 1, B);
	disputes_open(D, KEY2, 0, A, BIT(0), 2, B);
	disputes_free(D);
	CHECK(none(), "free with disputes open names nobody");
	disputes_free(NULL);
}

int main(void)
{
	test_undisputed();
	test_follower_odd();
	test_leader_odd();
	test_waiting();
	test_force();
	test_no_majority();
	test_several();
	test_made();
	test_k5();
	test_k64();
	test_free_open();
	return tap_done();
}
