#!/usr/bin/env bats
# The randomized multi-threaded stress program (tests/progs/stress.c): every
# object is verified before it is freed or reallocated, alignments up to
# 1 MiB are checked, calloc memory must be zero, objects cross threads, and a
# forked child keeps allocating.  It must report success under the preload
# with every setting a user may choose.

load helpers

setup() {
	require_prog stress
}

# stress_dh [VAR=value ...] -- ARGS...: run stress under the preload with
# DIEHARD_STATS=1; it must succeed, and both the parent and the forked child
# must print a stats line reporting no ignored frees.
stress_dh() {
	local -a envs=()
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	local out="$BATS_TEST_TMPDIR/stress"
	capture "$out" dh DIEHARD_STATS=1 "${envs[@]}" "$PROGS/stress" "$@"
	[[ $(<"$out.rc") == 0 ]] ||
		fail "stress $* under the preload (${envs[*]:-defaults}) exited with status $(<"$out.rc")" "$(head -c 3000 "$out.err")"
	[[ $(<"$out.out") == "stress: ok threads=$1 ops=$2 child=ok" ]] || fail "unexpected output:" "$(cat "$out.out")"
	stats_lines "$out.err" >"$out.stats"
	check_no_bad_frees "$out.stats"
	[[ $(wc -l <"$out.stats") == 2 ]] || fail "want a stats line from the parent and one from the forked child:" "$(cat "$out.stats")"
	local p1 p2
	p1=$(stat_field pid "$(sed -n 1p "$out.stats")")
	p2=$(stat_field pid "$(sed -n 2p "$out.stats")")
	[[ $p1 != "$p2" ]] || fail "both stats lines claim pid $p1"
	strip_stats "$out.err" "$out.rest"
	[[ ! -s $out.rest ]] || fail "unexpected output on stderr:" "$(head -c 2000 "$out.rest")"
}

@test "stress: the program itself passes without the preload" {
	run -0 plain "$PROGS/stress" 4 20000 11
	[[ $output == "stress: ok threads=4 ops=20000 child=ok" ]]
}

@test "stress: 4 threads with a fork, default settings" {
	stress_dh -- 4 40000 1
}

@test "stress: 4 threads with a fork, DIEHARD_FILL=random" {
	stress_dh DIEHARD_FILL=random -- 4 40000 2
}

@test "stress: 4 threads with a fork, DIEHARD_M=1.5 (a tight heap)" {
	stress_dh DIEHARD_M=1.5 -- 4 40000 3
}

@test "stress: 4 threads with a fork, DIEHARD_M=8 and random fill" {
	stress_dh DIEHARD_M=8 DIEHARD_FILL=random -- 4 40000 4
}

@test "stress: 8 threads on 2 cores, fixed seed" {
	stress_dh DIEHARD_SEED=0123456789abcdef0123456789abcdef -- 8 15000 5
}
