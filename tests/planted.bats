#!/usr/bin/env bats
# One planted bug, as DieHard's analysis (paper 001, section 6) counts it:
# tests/progs/plant_overflow.c writes 32 bytes past one of 1000 objects of
# 32 bytes, tests/progs/plant_dangling.c reads an object it freed too soon.
# Alone, libdiehard leaves the slot after the victim free with probability
# at least 1 - 1/M (Theorem 1 with k = 1); under diehard -k 3, with its
# tie-breakers, a one-object overflow is masked in at least 19 runs of 20.
# The numbers behind the bounds are in docs/TOLERANCE.md ("One planted
# bug"); bench/planted measures them at length.

load helpers

setup() {
	require_prog plant_overflow
	require_prog plant_dangling
}

# clean_heaps M SEEDS: how many of the seeds leave the overflow in free
# space (plant_overflow -r says "hits 0"), with DIEHARD_M=M.
clean_heaps() {
	local m=$1 seeds=$2 s clean=0
	for ((s = 1; s <= seeds; s++)); do
		DIEHARD_M=$m DIEHARD_SEED=$s dh "$PROGS/plant_overflow" -r 1000 32 32 2>&1 >/dev/null |
			grep -qx 'hits 0' && clean=$((clean + 1))
	done
	echo "$clean"
}

@test "libdiehard alone: the slot after the victim is free in at least 1 - 1/M of heaps (600 seeds, M = 2 and 4)" {
	# Bound: 1 - 1/M less 5 standard errors of 600 draws (0.100 at M = 2,
	# 0.088 at M = 4). Measured: 0.52 and 0.78; the placement before the
	# groups' caps left 0.365 at M = 2 (the older slots 0.93 full).
	local c2 c4
	c2=$(clean_heaps 2 600)
	((c2 >= 600 * 40 / 100)) || fail "M = 2: the overflow met free space in $c2 of 600 heaps (at least 240)"
	c4=$(clean_heaps 4 600)
	((c4 >= 600 * 66 / 100)) || fail "M = 4: the overflow met free space in $c4 of 600 heaps (at least 396)"
}

@test "diehard -k 3: a one-object overflow among 1000 objects is masked in at least 38 runs of 40" {
	local right masked=0 wrong=0 other=0 i out rc
	right=$("$PROGS/plant_overflow" 1000 32 0)
	for i in $(seq 40); do
		rc=0
		out=$("$DIEHARD" -k 3 "$PROGS/plant_overflow" 1000 32 32 2>"$BATS_TEST_TMPDIR/err") || rc=$?
		if ((rc == 0)) && [[ $out == "$right" ]]; then
			masked=$((masked + 1))
		elif ((rc == 0)); then
			wrong=$((wrong + 1))
		else
			[[ $rc == 123 ]] || fail "run $i: exit $rc" "$(cat "$BATS_TEST_TMPDIR/err")"
			other=$((other + 1))
		fi
	done
	# A wrong commit needs two replicas whose overflows hit the same
	# object: once in 600 pairs or so (tests/unit/test_odds.c, 7e).
	((masked >= 38)) || fail "masked in $masked of 40 runs ($wrong wrong answers, $other with no majority)"
}

@test "diehard -k 3: a dangling read 1000 allocations after its free is masked in at least 38 runs of 40" {
	local right masked=0 i out rc
	# F = 31: 31 right frees after the premature one flush the thread
	# cache, so the freed slot is back in the heap and can be reused.
	right=$(DIEHARD_SEED=1 dh "$PROGS/plant_dangling" 1000 32 0 31)
	[[ $right == *intact* ]] || fail "the reference run: $right"
	for i in $(seq 40); do
		rc=0
		out=$("$DIEHARD" -k 3 "$PROGS/plant_dangling" 1000 32 1000 31 2>"$BATS_TEST_TMPDIR/err") || rc=$?
		((rc == 0)) && [[ $out == "$right" ]] && masked=$((masked + 1))
		((rc == 0 || rc == 123)) || fail "run $i: exit $rc" "$(cat "$BATS_TEST_TMPDIR/err")"
	done
	((masked >= 38)) || fail "masked in $masked of 40 runs"
}
