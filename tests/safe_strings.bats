#!/usr/bin/env bats
# strcpy, strncpy, strcat and memcpy never write past the end of a
# destination object on the small heap (paper section 4.4): an overflowing
# copy is cut at the end of the destination's slot (strings stay
# NUL-terminated inside it) and the object in the next slot is untouched.
# With DIEHARD_SAFE_STRINGS=0 the same overflows really happen.
#
# tests/progs/safestr.c finds two of its objects in adjacent slots, a and b,
# copies into a, and reports what it sees (see the comment there).

load helpers

setup() {
	require_prog safestr
}

# safestr_dh [VAR=value ...] -- ARGS...: run safestr under the preload; it
# must exit 0.  Its report lines are in $output / ${lines[@]}.
safestr_dh() {
	local -a envs=()
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	run --separate-stderr dh "${envs[@]}" "$PROGS/safestr" "$@"
	((status == 0)) || fail "safestr $* (${envs[*]:-defaults}) exited with status $status" "$stderr"
}

# expect KEY=VALUE...: each line is in the report.
expect() {
	local want
	for want in "$@"; do
		grep -qx -- "$want" <<<"$output" || fail "want '$want' in the report:" "$output"
	done
}

@test "strcpy of 100 characters into malloc(16): cut to 15 characters, neighbours intact" {
	safestr_dh -- strcpy 16 0 100
	expect room=16 len=15 content=ok ret=ok neighbour=intact canaries=intact
}

@test "strcpy of 40 characters into malloc(17) (a 32-byte slot): cut to 31 characters, the next slot intact" {
	safestr_dh -- strcpy 17 0 40
	expect room=32 len=31 content=ok ret=ok neighbour=intact canaries=intact
}

@test "DIEHARD_SAFE_STRINGS=0: the same strcpy really overflows into the next slot" {
	safestr_dh DIEHARD_SAFE_STRINGS=0 -- strcpy 17 0 40
	expect room=32 len=40 content=ok ret=ok neighbour=overwritten canaries=intact
}

@test "strcpy that exactly fills the slot is not cut" {
	safestr_dh -- strcpy 17 0 31
	expect room=32 len=31 content=ok ret=ok neighbour=intact canaries=intact
}

@test "strcpy into the middle of an object is bounded by the end of that object" {
	safestr_dh -- strcpy 17 8 40
	expect room=24 len=23 content=ok ret=ok neighbour=intact canaries=intact
}

@test "strncpy with a length beyond the object: no NUL padding past the slot" {
	safestr_dh -- strncpy 16 0 2 64
	expect room=16 len=2 content=ok ret=ok neighbour=intact canaries=intact
	safestr_dh DIEHARD_SAFE_STRINGS=0 -- strncpy 16 0 2 64
	expect neighbour=overwritten
}

@test "strncpy within bounds keeps its exact semantics (padding to n, nothing beyond)" {
	safestr_dh -- strncpy 64 0 10 20
	expect room=64 len=10 content=ok ret=ok neighbour=intact canaries=intact
	safestr_dh -- strncpy 64 8 30 20
	expect room=56 len=20 content=ok ret=ok neighbour=intact canaries=intact
}

@test "strcat past the end of malloc(17): cut and terminated inside the slot, neighbour intact" {
	safestr_dh -- strcat 17 0 10 30
	expect room=32 len=31 content=ok ret=ok neighbour=intact canaries=intact
	safestr_dh DIEHARD_SAFE_STRINGS=0 -- strcat 17 0 10 30
	expect len=40 neighbour=overwritten
}

@test "memcpy of 48 bytes into malloc(17): 32 bytes copied, neighbour intact" {
	safestr_dh -- memcpy 17 0 48
	expect room=32 len=32 content=ok ret=ok neighbour=intact canaries=intact
	safestr_dh DIEHARD_SAFE_STRINGS=0 -- memcpy 17 0 48
	expect len=48 neighbour=overwritten
}

@test "memcpy that exactly fills the slot, or a larger class, is complete" {
	safestr_dh -- memcpy 17 0 32
	expect room=32 len=32 content=ok ret=ok neighbour=intact canaries=intact
	safestr_dh -- memcpy 3000 100 3996
	expect room=3996 len=3996 content=ok ret=ok neighbour=intact canaries=intact
}

@test "in-bounds copies into heap, stack, global and mmap memory are exact" {
	run -0 plain "$PROGS/safestr" normal
	[[ $output == "normal: ok" ]]
	safestr_dh -- normal
	[[ $output == "normal: ok" ]]
	safestr_dh DIEHARD_FILL=random -- normal
	[[ $output == "normal: ok" ]]
}

@test "an overflow of a large object never reaches another object (cut, or stopped by a guard page)" {
	# (Without the preload, glibc places both objects in one arena and the
	# neighbour is overwritten.)
	safestr_dh -- large
	[[ ${lines[0]} == "large: survived" || ${lines[0]} == "large: faulted" ]] || fail "unexpected output:" "$output"
	expect neighbour=intact
}
