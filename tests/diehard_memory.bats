#!/usr/bin/env bats
# Planted memory errors under diehard -k 3 (the paper's claims, section 5):
# a heap overflow and a dangling-pointer write are masked (the right answer
# in the large majority of runs, a wrong answer committed at most once in
# ten: DieHard's masking is probabilistic), and an
# uninitialized read is caught (the replicas disagree: exit 123, the
# divergence named).  Each program has a `fixed` mode whose output is the
# right answer, and each bug is shown to corrupt (or hide) under plain glibc.
# See tests/progs/sup_{overflow,dangling,uninit}.c for why.

load helpers

RUNS=10
MIN_RIGHT=8
# A wrong answer is committed when two replicas' heaps put the overflow on
# the same record: measured for sup_overflow (3000 runs of `bug` under the
# preload, 2026-11-24), each replica prints one of seven wrong answers in
# 0.6-1.1% of runs, so two of three agree on one in about 0.15% of runs:
# one in ten runs about 1.4% of the time, two about 0.01%. A regression
# that made replicas fail alike (the same seed: tests/seeds.bats) shows as
# fewer right answers.
MAX_WRONG=1

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
}

# check_masked PROG: PROG bug under glibc prints something else than PROG
# fixed (the bug is real); under diehard -k 3, in RUNS runs, it prints exactly
# the fixed output with exit 0 at least MIN_RIGHT times, every other run
# ends with 123 having committed only a prefix of the right answer, but for
# at most MAX_WRONG runs that commit a wrong answer.
check_masked() {
	local prog=$PROGS/$1 i rc right=0 wrong=0 log=""
	require_prog "$1"
	plain "$prog" fixed >"$T/right" || fail "$1 fixed failed"
	plain "$prog" bug >"$T/glibc" || true
	! cmp -s "$T/right" "$T/glibc" || fail "$1 bug does not corrupt its output under glibc: the test proves nothing"
	for ((i = 0; i < RUNS; i++)); do
		capture "$T/run$i" sup -k 3 -r "$T/run$i.json" "$prog" bug
		rc=$(<"$T/run$i.rc")
		if [[ $rc == 0 ]] && cmp -s "$T/right" "$T/run$i.out"; then
			right=$((right + 1))
		elif [[ $rc == 0 ]] || ! is_prefix "$T/run$i.out" "$T/right"; then
			[[ $rc == 0 || $rc == 123 ]] || fail "run $i of diehard -k 3 $1 bug exited with $rc" "$(cat "$T/run$i.err")"
			wrong=$((wrong + 1))
			log+="run $i: exit $rc, a wrong answer committed (masking failure): $(cat "$T/run$i.out")"$'\n'
		else
			[[ $rc == 123 ]] || fail "run $i of diehard -k 3 $1 bug exited with $rc" "$(cat "$T/run$i.err")"
			log+="run $i: no majority: $(cat "$T/run$i.err")"$'\n'
		fi
	done
	((wrong <= MAX_WRONG)) || fail "$wrong of $RUNS runs of diehard -k 3 $1 bug committed a wrong answer" "$log"
	((right >= MIN_RIGHT)) || fail "only $right of $RUNS runs of diehard -k 3 $1 bug gave the right answer" "$log"
}

@test "heap overflow: glibc prints a corrupted record; diehard -k 3 prints the right answer (>= 8 of 10 runs), a wrong one at most once" {
	check_masked sup_overflow
}

@test "dangling pointer: glibc prints a corrupted record; diehard -k 3 prints the right answer (>= 8 of 10 runs), a wrong one at most once" {
	check_masked sup_dangling
}

@test "uninitialized read: hidden under glibc; diehard -k 3 finds no majority (123) and names the divergence" {
	require_prog sup_uninit
	local prog=$PROGS/sup_uninit
	# Under glibc the bug is invisible: the fresh buffer is zeros, every run.
	plain "$prog" fixed >"$T/right"
	plain "$prog" bug >"$T/glibc1"
	plain "$prog" bug >"$T/glibc2"
	same_bytes "$T/right" "$T/glibc1" "sup_uninit bug under glibc (the bug is hidden)"
	same_bytes "$T/right" "$T/glibc2" "sup_uninit bug under glibc, again"
	# The fixed program runs fine under diehard.
	capture "$T/fixed" sup -k 3 "$prog" fixed
	[[ $(<"$T/fixed.rc") == 0 ]] || fail "diehard -k 3 sup_uninit fixed exited with $(<"$T/fixed.rc")" "$(cat "$T/fixed.err")"
	same_bytes "$T/right" "$T/fixed.out" "diehard -k 3 sup_uninit fixed"
	# The bug: every replica reads different random bytes.
	capture "$T/bug" sup -v -k 3 -r "$T/bug.json" "$prog" bug
	[[ $(<"$T/bug.rc") == 123 ]] || fail "diehard -k 3 sup_uninit bug exited with $(<"$T/bug.rc"), expected 123" "$(cat "$T/bug.out" "$T/bug.err")"
	# "checksum: " is 10 bytes, then 16 hex digits: they differ in there.
	local line offset
	line=$(grep -E '^diehard: no majority on stdout at byte [0-9]+' "$T/bug.err") ||
		fail "no 'no majority' line:" "$(cat "$T/bug.err")"
	offset=$(sed -E 's/.* at byte ([0-9]+).*/\1/' <<<"$line")
	((offset >= 10 && offset < 26)) || fail "divergence at byte $offset, expected within the checksum's digits: $line"
	jq -e --argjson off "$offset" '.exit_code == 123 and .no_quorum.stream == "stdout" and .no_quorum.offset == $off' \
		"$T/bug.json" >/dev/null || fail "report: $(jq -c '{exit_code, no_quorum, divergences}' "$T/bug.json")"
	# Whatever was committed is common to two replicas: never a whole answer.
	! grep -q $'\n' "$T/bug.out" && [[ $(wc -c <"$T/bug.out") -lt 26 ]] ||
		fail "a checksum was committed: $(cat "$T/bug.out")"
	is_prefix <(head -c 10 "$T/bug.out") <(printf 'checksum: ') || fail "committed: $(cat "$T/bug.out")"
}
