#!/usr/bin/env bats
# C++ on the DieHard heap: over-aligned operator new (alignas(64) and
# alignas(4096) types), standard containers, shared_ptr, exceptions and
# std::thread (tests/progs/churn.cc), and g++ itself under the preload.

load helpers

CXXFLAGS=(-std=c++17 -O2 -Wall -Wextra -Werror -pthread)

setup_file() {
	require_lib
	command -v g++ >/dev/null || return 0
	export CHURN="$BATS_FILE_TMPDIR/churn"
	g++ "${CXXFLAGS[@]}" -o "$CHURN" "$ROOT/tests/progs/churn.cc"
}

setup() {
	require_lib
	command -v g++ >/dev/null || skip "g++ is not installed"
}

@test "C++: aligned new, containers, exceptions and threads give the same output as a plain run" {
	DH_VARIANTS=("DIEHARD_M=4")
	# churn prints MISALIGNED and exits 1 on a misaligned object.
	check_program "$CHURN"
}

@test "g++ under the preload (DIEHARD_FILL=random) builds a byte-identical program" {
	dh DIEHARD_FILL=random g++ "${CXXFLAGS[@]}" -o "$BATS_TEST_TMPDIR/churn" "$ROOT/tests/progs/churn.cc"
	same_bytes "$CHURN" "$BATS_TEST_TMPDIR/churn" "churn built by g++ under the preload"
}
