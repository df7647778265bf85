#!/usr/bin/env bats
# Programs with double and invalid frees (tests/progs/badfree.c) run to
# completion on the DieHard heap: the bad frees are ignored (never acted on)
# and counted in the DIEHARD_STATS=1 line.  Without the preload, glibc
# aborts the same programs, which shows the planted bugs are real.

load helpers

setup() {
	require_prog badfree
}

# badfree_dh MODE [VAR=value ...]: runs `badfree MODE` under the preload with
# DIEHARD_STATS=1.  It must exit 0 and print its "MODE: ok" line; sets STATS
# to its one stats line, which must belong to the process.
badfree_dh() {
	local mode=$1 out="$BATS_TEST_TMPDIR/badfree.$1"
	shift
	capture "$out" dh DIEHARD_STATS=1 "$@" "$PROGS/badfree" "$mode"
	[[ $(<"$out.rc") == 0 ]] ||
		fail "badfree $mode under the preload ($*) exited with status $(<"$out.rc")" "$(head -c 2000 "$out.err")"
	grep -q "^$mode: ok" "$out.out" || fail "badfree $mode did not report success:" "$(cat "$out.out")"
	local pid
	pid=$(sed -n 's/^pid=//p' "$out.out")
	stats_lines "$out.err" >"$out.stats"
	[[ $(wc -l <"$out.stats") == 1 ]] || fail "expected one stats line:" "$(cat "$out.stats")"
	STATS=$(<"$out.stats")
	[[ $(stat_field pid "$STATS") == "$pid" ]] || fail "stats line is not from pid $pid: $STATS"
	# Nothing else on stderr: ignoring a bad free is silent.
	strip_stats "$out.err" "$out.rest"
	[[ ! -s $out.rest ]] || fail "unexpected output on stderr:" "$(head -c 2000 "$out.rest")"
}

# glibc_rejects MODE: without the preload the program dies (glibc aborts).
glibc_rejects() {
	run plain "$PROGS/badfree" "$1"
	((status != 0)) || fail "badfree $1 exited 0 without the preload: the planted bug is not real"
}

@test "double frees of small objects are ignored and counted; the heap stays consistent" {
	glibc_rejects double
	badfree_dh double
	[[ $(stat_field double_frees "$STATS") == 3 ]] || fail "want double_frees=3: $STATS"
	[[ $(stat_field invalid_frees "$STATS") == 0 ]] || fail "want invalid_frees=0: $STATS"
}

@test "a double free just before exit is counted in the exit-time statistics" {
	glibc_rejects double-exit
	badfree_dh double-exit
	[[ $(stat_field double_frees "$STATS") == 1 ]] || fail "want double_frees=1: $STATS"
	[[ $(stat_field invalid_frees "$STATS") == 0 ]] || fail "want invalid_frees=0: $STATS"
}

@test "frees of stack, global, literal, foreign-mmap, wild and misaligned pointers are ignored and counted" {
	glibc_rejects invalid
	badfree_dh invalid
	[[ $(stat_field invalid_frees "$STATS") == 8 ]] || fail "want invalid_frees=8: $STATS"
	[[ $(stat_field double_frees "$STATS") == 0 ]] || fail "want double_frees=0: $STATS"
}

@test "an interior free does not free the enclosing object (its slot is not reused, its data survive)" {
	glibc_rejects interior
	badfree_dh interior
	[[ $(stat_field invalid_frees "$STATS") == 4200 ]] || fail "want invalid_frees=4200: $STATS"
	[[ $(stat_field double_frees "$STATS") == 0 ]] || fail "want double_frees=0: $STATS"
	badfree_dh interior DIEHARD_FILL=random DIEHARD_M=1.5
	[[ $(stat_field invalid_frees "$STATS") == 4200 ]] || fail "want invalid_frees=4200 (M=1.5): $STATS"
}

@test "a large object freed through interior pointers stays mapped; its double free is ignored; all counted" {
	glibc_rejects large
	badfree_dh large
	local dbl inv
	dbl=$(stat_field double_frees "$STATS")
	inv=$(stat_field invalid_frees "$STATS")
	# Three interior/guard-page frees are invalid; the second free of the
	# object may be classified either way once its mapping is gone.
	((inv >= 3 && dbl + inv == 4)) || fail "want 3 invalid + 1 double or invalid free: $STATS"
}

@test "a correct program reports no ignored frees and plausible allocation counts" {
	run -0 plain "$PROGS/badfree" clean
	badfree_dh clean
	local allocs frees peak
	allocs=$(stat_field allocations "$STATS")
	frees=$(stat_field frees "$STATS")
	peak=$(stat_field peak_live_bytes "$STATS")
	[[ $(stat_field double_frees "$STATS") == 0 && $(stat_field invalid_frees "$STATS") == 0 ]] ||
		fail "a correct program reported ignored frees: $STATS"
	# 1000 objects of 1000 bytes live at once, plus a realloc chain.
	((allocs >= 1010)) || fail "allocations=$allocs < 1010: $STATS"
	((frees >= 1010)) || fail "frees=$frees < 1010: $STATS"
	((frees <= allocs)) || fail "more frees than allocations: $STATS"
	((peak >= 1000000)) || fail "peak_live_bytes=$peak < 1000 x 1000: $STATS"
	((peak < 64 * 1024 * 1024)) || fail "peak_live_bytes=$peak is implausibly large: $STATS"
}

@test "without DIEHARD_STATS the allocator prints nothing, even while ignoring bad frees" {
	local mode
	for mode in double double-exit invalid interior large; do
		run --separate-stderr -0 dh "$PROGS/badfree" "$mode"
		[[ -z $stderr ]] || fail "badfree $mode wrote to stderr:" "$stderr"
		[[ ${lines[1]} == "$mode: ok"* ]] || fail "badfree $mode: unexpected output:" "$output"
	done
}
