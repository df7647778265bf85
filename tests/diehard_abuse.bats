#!/usr/bin/env bats
# Hostile replicas: programs that abuse what diehard gives them (random
# devices kept open by the thousand, input they stop reading, output floods,
# juggled fds, exec loops). diehard must stay bounded, keep the vote right
# and never hang.

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	export SUP_TIMEOUT=60
}

@test "1000 random devices kept open per replica: every replica reads the same, each pipe holds one page, no warning" {
	require_prog abuse_urandom
	capture "$T/run" sup -k 3 -r "$T/r.json" "$PROGS/abuse_urandom" 1000
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -Eq '^opened 1000, fnv [0-9a-f]{16}, pipe 4096$' "$T/run.out" || fail "output: $(cat "$T/run.out")"
	[[ ! -s $T/run.err ]] || fail "stderr: $(head -c 2000 "$T/run.err")"
	jq -e '.divergences == [] and all(.replicas[]; .status == 0 and .unvirtualized == 0
		and .calls["open(/dev/urandom)"] == 1000)' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, unvirtualized, calls}]' "$T/r.json")"
}

@test "more random devices kept open than diehard's fds allow: EMFILE at the same open in every replica, said once" {
	require_prog abuse_urandom
	# A limit of 600 fds leaves each replica a few dozen pipes of diehard's.
	capture "$T/run" bash -c 'ulimit -n 600 && exec "$@"' sh timeout 60 "$DIEHARD" --share "$T" -k 3 -r "$T/r.json" \
		"$PROGS/abuse_urandom" 500
	[[ $(<"$T/run.rc") == 1 ]] || fail "exit $(<"$T/run.rc"), expected 1 (the program's own, all alike)" "$(cat "$T/run.err")"
	[[ $(grep -c 'random devices open: further opens fail with EMFILE' "$T/run.err") == 1 ]] ||
		fail "stderr: $(cat "$T/run.err")"
	grep -Eq '^abuse_urandom: open [0-9]+: Too many open files$' "$T/run.err" || fail "stderr: $(cat "$T/run.err")"
	jq -e '.divergences == [] and all(.replicas[]; .status == 1 and (has("killed") | not))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{divergences, replicas: [.replicas[] | {status, killed}]}' "$T/r.json")"
}

@test "a replica that stops reading 20 MB of input the others need is a straggler: killed after --timeout, the run ends right" {
	head -c 20000000 /dev/urandom >"$T/in"
	local start elapsed
	start=$(now_ms)
	capture "$T/run" sh -c 'exec "$@" <"$0"' "$T/in" timeout 60 "$DIEHARD" --share "$T" -k 3 --timeout 1 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then head -c 65536 >/dev/null; exec sleep 60; fi
		exec wc -c' sh "$T"
	elapsed=$(($(now_ms) - start))
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 20000000 ]] ||
		fail "exit $(<"$T/run.rc") (124: stalled), output '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
	jq -e '[.replicas[] | select(.killed != null)] | length == 1 and
		(.[0].killed | test("^straggler: stopped reading its input for more than 1.0 s while the others wait for it$"))' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c '[.replicas[] | {status, killed}]' "$T/r.json")"
	((elapsed < 20000)) || fail "took $elapsed ms with --timeout 1"
}

@test "replicas that all read slowly (pauses shorter than --timeout) are not stragglers" {
	head -c 3000000 /dev/urandom >"$T/in"
	capture "$T/run" sh -c 'exec "$@" <"$0"' "$T/in" timeout 60 "$DIEHARD" --share "$T" -k 3 --timeout 1 -r "$T/r.json" sh -c '
		n=0
		while [ "$(dd bs=128k count=1 iflag=fullblock 2>/dev/null | wc -c)" -gt 0 ]; do sleep 0.2; n=$((n + 1)); done
		echo "$n"'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 23 ]] || fail "exit $(<"$T/run.rc"), output '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
	jq -e 'all(.replicas[]; has("killed") | not) and (.replicas | length) == 3' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, killed}]' "$T/r.json")"
}

@test "a replica flooding its output while the others print a line: killed at once, the others' line committed" {
	local start elapsed
	start=$(now_ms)
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then exec yes flood; fi
		echo done' sh "$T"
	elapsed=$(($(now_ms) - start))
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == done ]] || fail "exit $(<"$T/run.rc"), output $(head -c 200 "$T/run.out")"
	jq -e '[.replicas[] | select(.killed != null)] | length >= 1' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, killed}]' "$T/r.json")"
	((elapsed < 15000)) || fail "took $elapsed ms"
}

@test "fd juggling: stdout and stderr swapped, stdin closed early, fds duplicated: the vote follows each stream" {
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c '
		exec 3>&1 1>&2 2>&3 3>&-
		echo "to stderr"; echo "to stdout" >&2
		exec 0<&- 5>&2
		cat 2>/dev/null || echo "stdin closed" >&5
		exec 5>&-'
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	same_bytes <(printf 'to stdout\nstdin closed\n') "$T/run.out" "stdout"
	same_bytes <(printf 'to stderr\n') "$T/run.err" "stderr"
	jq -e 'all(.replicas[]; .status == 0 and (has("killed") | not))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, killed}]' "$T/r.json")"
}

@test "a program that execs itself 50 times agrees (every new image virtualized) and its pid stays 2" {
	printf '%s\n' 'n=${1:-0}' 'if [ "$n" -lt 50 ]; then exec sh "$0" $((n + 1)); fi' 'echo "done $n pid $$ $(date +%s%N)"' \
		>"$T/loop.sh"
	capture "$T/run" sup -k 3 -r "$T/r.json" sh "$T/loop.sh"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -Eq '^done 50 pid 2 [0-9]+$' "$T/run.out" || fail "output: $(cat "$T/run.out")"
	jq -e 'all(.replicas[]; .images >= 51 and .unvirtualized == 0 and (has("killed") | not))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {images, images_stopped, unvirtualized, killed}]' "$T/r.json")"
}
