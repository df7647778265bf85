#!/usr/bin/env bats
# The DIEHARD_* settings from a user's side: a malformed value never breaks
# the program (it runs as with the default, saying so in at most one line on
# stderr that names the variable), and valid values are accepted silently.

load helpers

setup() {
	require_prog entry
	CHECKS=(posix_memalign_small memalign_big aligned_realloc usable_size realloc_edges malloc0 valloc libc_aliases)
}

@test "valid settings are accepted silently and the program runs correctly" {
	local v
	for v in "DIEHARD_M=1.5" "DIEHARD_M=8" "DIEHARD_M=3" "DIEHARD_SEED=0" "DIEHARD_SEED=DeadBeef" \
		"DIEHARD_FILL=random" "DIEHARD_SAFE_STRINGS=0" "DIEHARD_SAFE_STRINGS=1" "DIEHARD_STATS=0"; do
		run --separate-stderr dh "$v" "$PROGS/entry" "${CHECKS[@]}"
		((status == 0)) || fail "entry failed with $v:" "$output" "$stderr"
		[[ -z $stderr ]] || fail "$v produced a message:" "$stderr"
	done
}

@test "malformed settings do not break the program and produce at most one line naming the variable" {
	local ref="$BATS_TEST_TMPDIR/ref" v name
	plain "$PROGS/entry" "${CHECKS[@]}" >"$ref"
	for v in "DIEHARD_M=abc" "DIEHARD_M=0.5" "DIEHARD_M=1" "DIEHARD_M=-4" "DIEHARD_M=" \
		"DIEHARD_SEED=not-hex" "DIEHARD_SEED=123456789012345678901234567890123" "DIEHARD_SEED=" \
		"DIEHARD_FILL=sometimes" "DIEHARD_SAFE_STRINGS=maybe"; do
		name=${v%%=*}
		run --separate-stderr dh "$v" "$PROGS/entry" "${CHECKS[@]}"
		((status == 0)) || fail "entry failed with $v:" "$output" "$stderr"
		same_bytes "$ref" <(printf '%s\n' "$output") "stdout of entry with $v"
		(($(grep -c '' <<<"$stderr") <= 1)) || fail "$v: more than one line on stderr:" "$stderr"
		[[ -z $stderr || $stderr == *"$name"* ]] || fail "$v: the message does not name $name:" "$stderr"
	done
}
