#!/usr/bin/env bats
# The C unit tests (tests/unit/test_*.c), built under ASan and UBSan. Each is a
# TAP producer; here each binary is one test, its output shown on failure.

setup() {
	ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
}

run_unit() {
	local bin="$ROOT/build/tests/unit/$1"
	[ -x "$bin" ] || { echo "missing $bin: run make"; return 1; }
	run "$bin"
	echo "$output"
	[ "$status" -eq 0 ]
	# A binary that stopped early would print no plan.
	[[ "$output" == *"1.."* ]]
	[[ "$output" != *"not ok"* ]]
}

@test "unit: configuration parsing (DIEHARD_SEED, DIEHARD_M, switches)" {
	run_unit test_config
}

@test "unit: random generator and per-thread / per-fork streams" {
	run_unit test_random
}

@test "unit: small-object heap (classes, bitmaps, 1/M bound, growth, frees, fill, threads)" {
	run_unit test_heap
}

@test "unit: placement's odds against the paper's (neighbours, evenness, reuse, seeds, Theorems 1 and 2)" {
	run_unit test_odds
}

@test "unit: large objects (guards, alignment, table, quarantine, resize)" {
	run_unit test_large
}

@test "unit: per-thread cache (batches, pending frees, double frees, thread exit)" {
	run_unit test_cache
}

@test "unit: voter (quorum, chunks, prefixes, divergence, no quorum)" {
	run_unit test_voter
}

@test "unit: nondeterminism log and ChaCha20 (RFC 8439 vectors, lead/follow, mismatch, cap, retire, keep and restart)" {
	run_unit test_ndlog
}

@test "unit: call disputes (majority decides who is odd, waiting, force, no majority, k=64)" {
	run_unit test_dispute
}

@test "unit: output digests (SipHash-2-4-128 reference vectors, NH+SipHash fed in pieces across segments, one-bit changes, swaps, lengths)" {
	run_unit test_digest
}

@test "unit: the input and connection logs (appends of every size through the tail, read and sent back byte-exact between appends, the front released past the cap)" {
	run_unit test_inputlog
}

@test "unit: UTF-8 escaping for the report (valid sequences kept, each invalid byte as \\xNN: cut, overlong, surrogates, past U+10FFFF)" {
	run_unit test_utf8
}

@test "unit: file extents (a dense file read whole in pieces of the cap, a sparse one by its data alone at its offsets, an empty one not at all, a piece's error the walk's)" {
	run_unit test_extents
}

@test "unit: keyed fills (pattern and inverse complements, zero, flips) and their parsers fed garbage" {
	run_unit test_keyed
}

@test "unit: a replica's trace file parsed, and garbage, huge lines and past-bound records skipped" {
	run_unit test_trace
}

@test "unit: recordings read back; every truncation and flipped bit refused; random messages decoded safely" {
	run_unit test_recording
}

@test "unit: control socket framing and messages (round trips, garbage, truncations, lengths)" {
	run_unit test_control
}

@test "unit: the proxy's buffer pool (reuse, at most keep idle, other sizes freed, tiny buffers)" {
	run_unit test_bufpool
}

@test "unit: socket factory (pools per family, batches, errno answers, garbage answers, timeouts, closed channels, the real init's loop)" {
	run_unit test_factory
}

@test "unit: socket addresses of a replica's calls (loopback and unspecified vs remote, IPv4-mapped, short and other families, text with ports and scopes, small buffers, unaligned)" {
	run_unit test_netaddr
}

@test "unit: cgroup files as text (a process's cgroup per hierarchy, mounts with escapes and subtrees, directories, counters; dot components, garbage, every truncation and flipped byte)" {
	run_unit test_cgpath
}

@test "unit: which first bytes of a function run from a trampoline (the vDSO's prologues; rip-relative, memory, branches, cut short refused)" {
	run_unit test_prologue
}

@test "unit: critical memory over its own heap (round trips, repair of each copy, no majority, corrupted records, misuse, random operations against a model in threads)" {
	run_unit test_critical
}

@test "unit: the shared clock log (3 replicas x 3 threads agree on every entry, monotonic; still with one scribbling over its page and the claims; a leader held up while diehard takes its entry over)" {
	run_unit test_clockpage
}

@test "unit: the clock blob as diehard grafts it (two copies, one slot, harvested, gettimeofday, time, not ready; its loader: mappings, descriptor, errors)" {
	run_unit test_clockblob
}

@test "unit: an exec's environment judged for libdiehard and the run's DIEHARD_CLOCKS (zero-stop images)" {
	run_unit test_envkeep
}

@test "unit: fence-mode reports parsed from a replica's fence log (ci/fenceparse.c: records, truncation, garbage)" {
	run_unit test_fencelog
}

@test "unit: tasks named by their place in a replica's process tree (lineage.c against a simulated kernel: shared pid space, wrapping ids, reparenting)" {
	run_unit test_lineage
}

@test "unit: lines alike but for the order of whole lines (voter/relines.c; randomized against a reference)" {
	run_unit test_relines
}

@test "unit: a replacement's replayed past alike but for digits (voter/pastdigits.c; every byte pair, randomized against the mask)" {
	run_unit test_pastdigits
}

@test "unit: /proc readers of a replica's tasks (remote.c: start time, state, parent, listening TCP sockets, 80 listeners, a process gone)" {
	run_unit test_remote
}

@test "every C unit test (tests/unit/test_*.c) is run here" {
	local f missing=()
	for f in "$ROOT"/tests/unit/test_*.c; do
		f=$(basename "$f" .c)
		grep -q "run_unit $f\$" "$BATS_TEST_FILENAME" || missing+=("$f")
	done
	echo "not run by tests/unit.bats: ${missing[*]}"
	((${#missing[@]} == 0))
}
