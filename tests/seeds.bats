#!/usr/bin/env bats
# DIEHARD_SEED makes a single-threaded run reproducible: the same seed gives
# the same heap layout and the same DIEHARD_FILL=random bytes; different
# seeds, or no seed, give different ones.  tests/progs/seeds.c prints
# absolute addresses ("addr"), addresses relative to the first object of the
# same size ("off": the heap layout, independent of where the kernel maps the
# heap) and the first bytes of never-written buffers ("bytes").
#
# Absolute addresses also depend on address-space layout randomization of
# the heap's own mapping, so tests comparing them run with ASLR disabled
# (setarch -R), as a user reproducing a run would.

load helpers

setup() {
	require_prog seeds
}

# seeds_run NAME [VAR=value ...] [-- ARGS]: run seeds under the preload with
# DIEHARD_FILL=random; output in $BATS_TEST_TMPDIR/NAME.out.  NORAND=1 runs it
# with ASLR disabled.
seeds_run() {
	local name=$1
	shift
	local -a envs=() args=()
	while (($#)) && [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	(($#)) && shift
	args=("$@")
	local -a pre=()
	[[ ${NORAND:-0} == 1 ]] && pre=(setarch -R)
	capture "$BATS_TEST_TMPDIR/$name" "${pre[@]}" timeout "$DH_TIMEOUT" env LD_PRELOAD="$LIB" DIEHARD_FILL=random \
		"${envs[@]}" "$PROGS/seeds" "${args[@]}"
	[[ $(<"$BATS_TEST_TMPDIR/$name.rc") == 0 ]] ||
		fail "seeds $name exited with status $(<"$BATS_TEST_TMPDIR/$name.rc")" "$(cat "$BATS_TEST_TMPDIR/$name.err")"
	[[ $(grep -c '' "$BATS_TEST_TMPDIR/$name.out") -ge 194 ]] || fail "seeds $name: short output"
}

# section NAME KIND [PREFIX]: lines of kind addr/off/bytes, prefix removed.
section() {
	sed -n "s/^${3:-}$2 //p" "$BATS_TEST_TMPDIR/$1.out"
}

# all_bytes_differ A B [PREFIXA PREFIXB]: every fresh buffer's bytes differ.
all_bytes_differ() {
	local same
	same=$(comm -12 <(section "$1" bytes "${3:-}" | sort) <(section "$2" bytes "${4:-}" | sort))
	[[ -z $same ]] || fail "fresh buffers with identical random bytes in $1 and $2:" "$same"
}

@test "same DIEHARD_SEED twice (ASLR off): identical addresses and identical fill bytes" {
	NORAND=1 seeds_run a DIEHARD_SEED=5eed
	NORAND=1 seeds_run b DIEHARD_SEED=5eed
	same_bytes "$BATS_TEST_TMPDIR/a.out" "$BATS_TEST_TMPDIR/b.out" "two runs with DIEHARD_SEED=5eed"
}

@test "same DIEHARD_SEED twice (ASLR on): identical addresses, heap layout and fill bytes" {
	seeds_run a DIEHARD_SEED=0123456789abcdef0123456789abcdef
	seeds_run b DIEHARD_SEED=0123456789abcdef0123456789abcdef
	same_bytes <(section a off) <(section b off) "heap layout of two runs with the same seed"
	same_bytes <(section a bytes) <(section b bytes) "fill bytes of two runs with the same seed"
	# The small-object heap is placed at a seed-derived address, so even
	# with ASLR on the absolute addresses repeat (pointer-hashing programs
	# reproduce too).
	same_bytes <(section a addr) <(section b addr) "absolute addresses of two runs with the same seed"
}

@test "different seeds give a different heap layout and different fill bytes" {
	seeds_run a DIEHARD_SEED=1
	seeds_run b DIEHARD_SEED=2
	! cmp -s <(section a off) <(section b off) || fail "seeds 1 and 2 give the same heap layout"
	all_bytes_differ a b
}

@test "all 128 bits of the seed count: seeds differing only in the top digit differ" {
	seeds_run a DIEHARD_SEED=00000000000000000000000000000001
	seeds_run b DIEHARD_SEED=10000000000000000000000000000001
	! cmp -s <(section a off) <(section b off) || fail "the top 64 bits of the seed are ignored (layout)"
	all_bytes_differ a b
}

@test "without DIEHARD_SEED two runs differ in heap layout and fill bytes" {
	seeds_run a
	seeds_run b
	! cmp -s <(section a off) <(section b off) || fail "two unseeded runs have the same heap layout"
	all_bytes_differ a b
}

@test "the seed reported by DIEHARD_STATS=1 reproduces an unseeded run" {
	NORAND=1 seeds_run a DIEHARD_STATS=1
	local line seed
	line=$(stats_lines "$BATS_TEST_TMPDIR/a.err")
	seed=$(stat_field seed "$line")
	NORAND=1 seeds_run b DIEHARD_SEED="$seed"
	same_bytes "$BATS_TEST_TMPDIR/a.out" "$BATS_TEST_TMPDIR/b.out" "a run and its replay with DIEHARD_SEED=$seed"
}

@test "the stats line reports the seed given, as 32 hex digits" {
	run --separate-stderr -0 dh DIEHARD_SEED=abc DIEHARD_STATS=1 "$PROGS/seeds"
	local line
	line=$(grep '^diehard: stats ' <<<"$stderr")
	[[ $line =~ $STATS_RE ]] || fail "malformed stats line: $line"
	[[ ${line,,} == *" seed=00000000000000000000000000000abc "* ]] || fail "DIEHARD_SEED=abc reported as: $line"
	run --separate-stderr -0 dh DIEHARD_SEED=FEDCBA9876543210fedcba9876543210 DIEHARD_STATS=1 "$PROGS/seeds"
	line=$(grep '^diehard: stats ' <<<"$stderr")
	[[ ${line,,} == *" seed=fedcba9876543210fedcba9876543210 "* ]] || fail "a 32-digit seed reported as: $line"
}

@test "fork under a fixed seed: the child's allocations are reproducible" {
	NORAND=1 seeds_run a DIEHARD_SEED=f00d -- fork
	NORAND=1 seeds_run b DIEHARD_SEED=f00d -- fork
	same_bytes <(grep '^child ' "$BATS_TEST_TMPDIR/a.out") <(grep '^child ' "$BATS_TEST_TMPDIR/b.out") \
		"the forked child's output in two runs with the same seed"
	same_bytes <(grep '^parent ' "$BATS_TEST_TMPDIR/a.out") <(grep '^parent ' "$BATS_TEST_TMPDIR/b.out") \
		"the parent's output after fork in two runs with the same seed"
}

@test "fork: the child's random stream differs from the parent's continuing stream" {
	seeds_run a DIEHARD_SEED=f00d -- fork
	[[ -n $(section a addr "child ") && -n $(section a addr "parent ") ]] || fail "missing child or parent output"
	# Same address space, same requests: only the random stream can differ.
	! cmp -s <(section a addr "child ") <(section a addr "parent ") ||
		fail "child and parent got the same addresses after fork"
	all_bytes_differ a a "child " "parent "
}
