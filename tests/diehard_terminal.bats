#!/usr/bin/env bats
# diehard at a real terminal (tmux): ^Z stops every replica and diehard with
# them, like any job; fg continues them, and the run completes.

load helpers

setup() {
	command -v tmux >/dev/null || skip "tmux is not installed (make deps installs it)"
	SOCK="$BATS_TEST_TMPDIR/tmux.sock"
	OUT="$BATS_TEST_TMPDIR/out"
}

teardown() {
	tmux -S "$SOCK" kill-server 2>/dev/null || true
}

# Pids of the processes whose command line is exactly the replicas'.
replica_states() {
	ps -eo stat=,args= | awk -v cmd="$1" '$0 ~ cmd && $0 !~ /diehard/ { print substr($1, 1, 1) }'
}

@test "^Z at a terminal stops every replica; fg continues them and the output is complete" {
	local marker="tick-$$-$RANDOM"
	tmux -S "$SOCK" new-session -d -x 150 -y 30 "bash --norc --noprofile"
	# Nothing after diehard on this line: an interactive shell runs the
	# rest of a list as soon as its job is stopped.
	tmux -S "$SOCK" send-keys "cd '$ROOT' && build/diehard -k 3 sh -c 'for i in 1 2 3 4 5 6 7 8; do echo $marker \$i; sleep 0.5; done' > '$OUT'" Enter
	sleep 1.2
	tmux -S "$SOCK" send-keys C-z
	sleep 1
	local states
	states=$(replica_states "sh -c for i in 1 2 3 4 5 6 7 8; do echo $marker")
	[[ $(grep -c . <<<"$states") == 3 ]] || fail "want 3 replicas, got:" "$states"
	[[ $(grep -vc T <<<"$states") == 0 ]] || fail "replicas not all stopped after ^Z:" "$states"
	local before
	before=$(grep -c "$marker" "$OUT" || true)
	sleep 1.5
	[[ $(grep -c "$marker" "$OUT" || true) == "$before" ]] || fail "output went on while stopped"
	tmux -S "$SOCK" send-keys "fg" Enter
	for _ in $(seq 1 40); do
		[[ $(grep -c "$marker" "$OUT") == 8 ]] && break
		sleep 0.25
	done
	[[ $(grep -c "$marker" "$OUT") == 8 ]] || fail "incomplete output after fg:" "$(cat "$OUT")"
	# Typed only once diehard is gone: while it runs, the terminal is its
	# stdin (each replica still sleeps 0.5 s after its last line).
	for _ in $(seq 1 40); do
		pgrep -f "diehard -k 3 sh -c for i in 1 2 3 4 5 6 7 8; do echo $marker" >/dev/null || break
		sleep 0.25
	done
	tmux -S "$SOCK" send-keys "echo status=\$? > '$OUT.status'" Enter
	for _ in $(seq 1 20); do
		[[ -s $OUT.status ]] && break
		sleep 0.25
	done
	grep -qx 'status=0' "$OUT.status" || fail "diehard did not exit 0 after fg:" "$(cat "$OUT.status" 2>&1)"
}

# all_stopped CMD: the processes whose command line has CMD (the trailing
# replica's shell) exist and are all stopped.
all_stopped() {
	local states
	states=$(replica_states "$1")
	[[ -n $states && $(grep -vc T <<<"$states") == 0 ]]
}

@test "^Z held longer than --timeout while a replica trails the others: after fg no replica is a straggler for the time diehard was stopped" {
	require_jq
	local marker="trail-$$-$RANDOM" lock="$BATS_TEST_TMPDIR/lock" report="$BATS_TEST_TMPDIR/r.json"
	tmux -S "$SOCK" new-session -d -x 150 -y 30 "bash --norc --noprofile"
	# The replica that makes the lock first trails the other two by 4 s,
	# silent: a straggler after --timeout 2 of that, but diehard is stopped
	# for 3 s of it (and the replica with it), which must not count. (Were
	# it counted, the replica would be 3 s behind as diehard resumes, its
	# sleep not over yet: killed whatever runs first.)
	tmux -S "$SOCK" send-keys "cd '$ROOT' && build/diehard --share '$BATS_TEST_TMPDIR' -k 3 --timeout 2 -r '$report' sh -c 'if mkdir $lock 2>/dev/null; then sleep 4; fi; echo $marker' > '$OUT'" Enter
	wait_until 20 grep -q "$marker" "$OUT" || fail "the two others never committed their line"
	# A few ticks (100 ms each) for diehard's straggler clock to start.
	sleep 0.5
	tmux -S "$SOCK" send-keys C-z
	wait_until 10 all_stopped "sleep 4; fi; echo $marker" ||
		fail "the trailing replica is not stopped after ^Z:" "$(replica_states "sleep 4; fi; echo $marker")"
	# Held past --timeout: diehard's straggler clock must not count it.
	sleep 3
	tmux -S "$SOCK" send-keys "fg" Enter
	wait_until 30 test -s "$report" || fail "no report after fg"
	jq -e '[.replicas[] | select(.killed != null)] == [] and [.replicas[] | .status] == [0, 0, 0] and .exit_code == 0' \
		"$report" >/dev/null || fail "a replica was judged for the stop: $(jq -c '[.replicas[] | {index, status, killed}]' "$report")"
	[[ $(<"$OUT") == "$marker" ]] || fail "output: $(cat "$OUT")"
}
