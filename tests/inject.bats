#!/usr/bin/env bats
# The fault injector (allocator/inject.h; DIEHARD_INJECT), which
# bench/tolerance uses to repeat the DieHard paper's section 7.3.1: objects
# under-allocated or freed early, the same ones in every replica given a
# seed, in libdiehard.so and in build/libinject.so over glibc's malloc.

load helpers

INJ="$ROOT/build/libinject.so"

setup() {
	require_prog inject_probe
	[[ -f $INJ ]] || fail "$INJ does not exist: run make first"
	T=$BATS_TEST_TMPDIR
	P=$PROGS/inject_probe
}

@test "overflow: hit requests are under-allocated; the seed alone decides which, alike over glibc and libdiehard" {
	local clean glibc7 again7 dh7 glibc8
	clean=$(plain LD_PRELOAD="$INJ" "$P" pattern 200)
	[[ $clean == $(printf '.%.0s' {1..200}) ]] || fail "without DIEHARD_INJECT: $clean"
	glibc7=$(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=0.5:60,seed=7 "$P" pattern 200)
	again7=$(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=0.5:60,seed=7 "$P" pattern 200)
	dh7=$(dh DIEHARD_FILL=random DIEHARD_INJECT=overflow=0.5:60,seed=7 "$P" pattern 200)
	glibc8=$(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=0.5:60,seed=8 "$P" pattern 200)
	[[ $glibc7 == "$again7" ]] || fail "seed 7 twice:" "$glibc7" "$again7"
	[[ $glibc7 == "$dh7" ]] || fail "seed 7 over glibc and over libdiehard:" "$glibc7" "$dh7"
	[[ $glibc7 != "$glibc8" ]] || fail "seeds 7 and 8 hit the same allocations: $glibc7"
	local hits=${glibc7//[^x]/}
	((${#hits} > 60 && ${#hits} < 140)) || fail "rate 0.5 hit ${#hits} of 200"
	[[ $(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=1:60 "$P" pattern 10) == xxxxxxxxxx ]] || fail "rate 1"
	[[ $(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=0:60 "$P" pattern 10) == .......... ]] || fail "rate 0"
}

@test "overflow under diehard -k 3: every replica gets the same injected bugs, so they agree" {
	require_diehard
	local want
	want=$(plain LD_PRELOAD="$INJ" DIEHARD_INJECT=overflow=0.5:60,seed=3 "$P" pattern 300)
	capture "$T/run" env DIEHARD_INJECT=overflow=0.5:60,seed=3 "$DIEHARD" -k 3 "$P" pattern 300
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == "$want" ]] || fail "diehard: $(cat "$T/run.out")" "glibc:   $want"
}

@test "dangling: with the program's own trace, an object freed early is reused under glibc; diehard -k 3 masks it" {
	require_diehard
	capture "$T/trace" env LD_PRELOAD="$INJ" DIEHARD_INJECT=trace="$T/trace.bin" "$P" dangling
	[[ $(<"$T/trace.out") == intact ]] || fail "tracing run: $(cat "$T/trace.out" "$T/trace.err")"
	local size
	size=$(stat -c %s "$T/trace.bin")
	((size > 0 && size % 16 == 0)) || fail "trace of $size bytes"
	# Every object is freed 10 allocations early: A's memory goes to a
	# later object under glibc (or glibc aborts on what follows).
	capture "$T/glibc" timeout 20 env LD_PRELOAD="$INJ" DIEHARD_INJECT=dangling=1:10,trace="$T/trace.bin" "$P" dangling
	[[ $(<"$T/glibc.out") != intact ]] || fail "glibc with A freed early still says intact: the injector did nothing"
	# Without the fault, glibc is fine: the injector is what breaks it.
	capture "$T/none" env LD_PRELOAD="$INJ" DIEHARD_INJECT=dangling=0:10,trace="$T/trace.bin" "$P" dangling
	[[ $(<"$T/none.out") == intact ]] || fail "rate 0: $(cat "$T/none.out" "$T/none.err")"
	capture "$T/dh" env DIEHARD_INJECT=dangling=1:10,trace="$T/trace.bin" "$DIEHARD" -k 3 "$P" dangling
	[[ $(<"$T/dh.rc") == 0 && $(<"$T/dh.out") == intact ]] ||
		fail "diehard -k 3: exit $(<"$T/dh.rc"), $(cat "$T/dh.out")" "$(cat "$T/dh.err")"
}

@test "bad DIEHARD_INJECT values: one line naming the problem, exit 125, over libdiehard and libinject" {
	local spec lib
	for lib in "$LIB" "$INJ"; do
		for spec in bogus=1 overflow=2:4 overflow=0.5 overflow=0.5:x dangling=0.5:10 \
			"overflow=0.01:4,seed=x" "trace=$T/t,overflow=0.1:4"; do
			capture "$T/bad" env LD_PRELOAD="$lib" DIEHARD_INJECT="$spec" "$P" pattern 3
			[[ $(<"$T/bad.rc") == 125 ]] || fail "$lib, '$spec': exit $(<"$T/bad.rc")"
			[[ $(wc -l <"$T/bad.err") == 1 ]] && grep -q '^diehard: DIEHARD_INJECT: ' "$T/bad.err" ||
				fail "$lib, '$spec': $(cat "$T/bad.err")"
		done
	done
	capture "$T/missing" env LD_PRELOAD="$INJ" DIEHARD_INJECT=dangling=0.5:10,trace="$T/none" "$P" pattern 3
	[[ $(<"$T/missing.rc") == 125 ]] && grep -q 'cannot read the trace' "$T/missing.err" ||
		fail "missing trace: exit $(<"$T/missing.rc"), $(cat "$T/missing.err")"
}
