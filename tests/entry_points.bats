#!/usr/bin/env bats
# The malloc entry points as programs use them (tests/progs/entry.c): every
# check passes without the preload (so the checks encode glibc-compatible
# behaviour) and must pass under it, with and without random fill.

load helpers

setup() {
	require_prog entry
}

# entry_dh CHECK... : the checks pass under the preload with default settings
# and with DIEHARD_FILL=random, and report no ignored frees.
entry_dh() {
	local v out="$BATS_TEST_TMPDIR/entry"
	for v in "" "DIEHARD_FILL=random"; do
		local -a envs=()
		read -r -a envs <<<"$v"
		capture "$out" dh DIEHARD_STATS=1 "${envs[@]}" "$PROGS/entry" "$@"
		[[ $(<"$out.rc") == 0 ]] ||
			fail "entry $* under the preload (${v:-defaults}) exited with status $(<"$out.rc"):" \
				"$(grep -v '^ok ' "$out.out")" "$(head -c 2000 "$out.err")"
		local c
		for c in "$@"; do
			grep -qx "ok $c" "$out.out" || fail "check $c did not pass:" "$(cat "$out.out")"
		done
		stats_lines "$out.err" >"$out.stats"
		check_no_bad_frees "$out.stats"
	done
}

@test "entry: every check passes without the preload (the checks are sound)" {
	run -0 plain "$PROGS/entry" all
	[[ $output != *FAIL* ]]
	[[ ${#lines[@]} == 15 ]]
}

@test "entry: every check passes under the preload with identical output" {
	check_program "$PROGS/entry" all
}

@test "posix_memalign returns EINVAL for a non-power-of-two alignment or one not a multiple of sizeof(void *)" {
	entry_dh posix_memalign_einval
}

@test "posix_memalign honours alignments from 8 B to 1 MiB, including sizes below the alignment" {
	entry_dh posix_memalign_small
}

@test "memalign(2 MiB, 3 MiB) and aligned_alloc(2 MiB, 4 MiB) are 2 MiB-aligned and usable" {
	entry_dh memalign_big
}

@test "aligned_alloc and posix_memalign objects keep their data through realloc" {
	entry_dh aligned_realloc
}

@test "calloc overflow (calloc(SIZE_MAX/2, 3), 2^32 x 2^32, ...) returns NULL with ENOMEM" {
	entry_dh calloc_overflow
}

@test "calloc memory is zero, also when reusing dirty memory and under DIEHARD_FILL=random" {
	entry_dh calloc_zero
}

@test "malloc(1 << 48), malloc(SIZE_MAX) and friends fail promptly with ENOMEM; a failed realloc keeps the object" {
	# A hang (e.g. probing forever for room) is a failure too.
	DH_TIMEOUT=10 entry_dh huge
}

@test "free preserves errno" {
	entry_dh free_errno
}

@test "malloc_usable_size is at least the request, and all of it is usable" {
	entry_dh usable_size
}

@test "realloc(NULL, n), realloc(p, 0), realloc to the same size and large-to-small realloc behave" {
	entry_dh realloc_edges
}

@test "realloc(p, 0) frees p: 20000 rounds of malloc(4000) + realloc(p, 0) keep the peak small" {
	local out="$BATS_TEST_TMPDIR/r0"
	capture "$out" dh DIEHARD_STATS=1 "$PROGS/entry" realloc0_loop
	[[ $(<"$out.rc") == 0 ]] || fail "realloc0_loop failed:" "$(cat "$out.out" "$out.err")"
	local line peak
	line=$(stats_lines "$out.err")
	peak=$(stat_field peak_live_bytes "$line")
	check_no_bad_frees <(printf '%s\n' "$line")
	# Leaking would keep 20000 x 4000 bytes = 80 MB live.
	((peak < 8 * 1024 * 1024)) || fail "peak_live_bytes=$peak: realloc(p, 0) did not free p" "$line"
}

@test "reallocarray overflow returns NULL with ENOMEM and keeps the object" {
	entry_dh reallocarray
}

@test "malloc(0) returns unique non-NULL pointers" {
	entry_dh malloc0
}

@test "valloc and pvalloc return page-aligned memory; pvalloc rounds up to whole pages" {
	entry_dh valloc
}

@test "__libc_malloc, __libc_calloc, __libc_realloc, __libc_memalign and __libc_free are the same allocator as malloc and free" {
	entry_dh libc_aliases
}

@test "malloc_trim, mallopt and mallinfo2 are harmless" {
	entry_dh misc
}

@test "DIEHARD_FILL=random: fresh objects are not zero, including reused memory that was zeroed" {
	run -0 dh DIEHARD_FILL=random "$PROGS/entry" fill_random
	[[ $output == "ok fill_random" ]]
	# Without the preload the same check fails: fresh memory is mostly zero.
	run plain "$PROGS/entry" fill_random
	((status != 0))
}
