#!/usr/bin/env bats
# Signals: what diehard receives reaches every replica exactly once, and
# diehard ends the way the program does (143 for SIGTERM, 130 for SIGINT);
# no replica outlives diehard, even when diehard itself is killed with
# SIGKILL; a signal ignored when diehard starts (nohup) stays ignored.
#
# diehard runs in the background here.  Bash starts background jobs of a
# non-interactive shell with SIGINT and SIGQUIT ignored, which a program
# started from a terminal would not have: `env --default-signal` undoes that,
# so diehard and its replicas start as they would in a terminal.  Each
# background run is bounded by await_exit (a hang guard). SIGHUP is reset
# too: a test run started under nohup has it ignored, and diehard rightly
# keeps it ignored for the replicas (the nohup test below).

load helpers

setup() {
	require_diehard
	require_prog sup_signals
	require_jq
	T=$BATS_TEST_TMPDIR
}

teardown() {
	# Nothing this test started may survive it.
	if [[ -n ${BG_PID:-} ]] && proc_alive "$BG_PID"; then
		kill -KILL "$BG_PID" 2>/dev/null || true
	fi
	local f pid
	for f in "$T"/*.err; do
		[[ -f $f ]] || continue
		for pid in $(sed -n 's/^diehard: spawn replica [0-9]* (pid \([0-9]*\)).*/\1/p' "$f"); do
			proc_alive "$pid" && kill -KILL "$pid" 2>/dev/null
		done
	done
	return 0
}

# spawned_pids ERRFILE: the replicas' pids from diehard -v's spawn lines.
spawned_pids() {
	sed -n 's/^diehard: spawn replica [0-9]* (pid \([0-9]*\)).*/\1/p' "$1"
}

# count_lines PATTERN FILE: the number of lines of FILE matching PATTERN.
count_lines() {
	grep -c -- "$1" "$2" 2>/dev/null || true
}

# spawned K ERRFILE: diehard -v has started K replicas and they have exec'd
# their command (its /proc/PID/comm is no longer diehard's).
spawned() {
	local pid prog n=0
	[[ $(count_lines '^diehard: spawn replica' "$2") == "$1" ]] || return 1
	for pid in $(spawned_pids "$2"); do
		prog=$(program_of "$pid")
		[[ -n $prog && $(cat "/proc/$prog/comm" 2>/dev/null) != diehard ]] && n=$((n + 1))
	done
	((n == $1))
}

# check_forwarded SIGNAL CODE: `diehard -k 3 sleep 30`, sent SIGNAL, exits
# with CODE promptly, every replica having died of SIGNAL, none left running.
check_forwarded() {
	local sig=$1 code=$2 signum
	signum=$(kill -l "$sig")
	start_bg "$T/dh" env --default-signal=INT,TERM,QUIT,HUP "$DIEHARD" -v -k 3 -r "$T/r.json" sleep 30
	wait_until 10 spawned 3 "$T/dh.err" || fail "the replicas did not start:" "$(cat "$T/dh.err")"
	local pids
	pids=$(spawned_pids "$T/dh.err")
	kill "-$sig" "$BG_PID"
	await_exit "$BG_PID" 5 || fail "$(cat "$T/dh.err")"
	[[ $BG_RC == "$code" ]] || fail "diehard exited with $BG_RC after SIG$sig, expected $code" "$(cat "$T/dh.err")"
	jq -e --argjson s "$signum" '[.replicas[].signal] == [$s, $s, $s]' "$T/r.json" >/dev/null ||
		fail "not every replica died of SIG$sig:" "$(jq -c '[.replicas[] | {pid, status, signal, killed}]' "$T/r.json")"
	[[ $(report_pids "$T/r.json" | sort) == $(sort <<<"$pids") ]] || fail "report pids differ from the spawned ones"
	local pid
	for pid in $pids; do
		proc_gone "$pid" || fail "replica pid $pid is still running after diehard exited"
	done
}

@test "SIGTERM: replicas that stop at different points (0-3 last lines each) are not divergences: the agreed lines pass, exit 0, nobody killed or replaced" {
	require_prog stop_apart
	local run parted=0
	for ((run = 0; run < 6; run++)); do
		start_bg "$T/sa$run" "$DIEHARD" -v -k 3 -r "$T/sa$run.json" "$PROGS/stop_apart"
		wait_until 10 grep -q '^ready$' "$T/sa$run.out" || fail "no ready line:" "$(cat "$T/sa$run.err")"
		kill -TERM "$BG_PID"
		await_exit "$BG_PID" 10
		[[ $BG_RC == 0 ]] || fail "run $run: diehard exited with $BG_RC, expected 0 (the replicas' status)" \
			"$(tail -n 15 "$T/sa$run.err")"
		grep -qvE '^(ready|line [0-2])$' "$T/sa$run.out" && fail "run $run: stdout is not the program's:" "$(cat "$T/sa$run.out")"
		[[ $(head -n 1 "$T/sa$run.out") == ready ]] || fail "run $run: the agreed ready line is missing"
		jq -e '(.divergences | length) == 0 and ([.replicas[] | select(.killed != null)] | length) == 0
		       and (.replacements | length) == 0' "$T/sa$run.json" >/dev/null ||
			fail "run $run: the stop was taken for divergences:" "$(grep '^diehard:' "$T/sa$run.err" | tail -n 10)"
		grep -qE 'as it stops|stopping replicas part' "$T/sa$run.err" && parted=$((parted + 1))
	done
	# The randomized heap gives the replicas different line counts: most
	# runs went through the parting (else this test proved nothing).
	((parted >= 3)) || fail "only $parted of 6 runs had replicas stopping apart"
}

@test "SIGTERM to diehard reaches every replica; diehard exits 143 promptly and no replica is left" {
	check_forwarded TERM 143
}

@test "SIGINT to diehard (as from ^C) reaches every replica; diehard exits 130 promptly and no replica is left" {
	check_forwarded INT 130
}

@test "SIGHUP to diehard reaches every replica; diehard exits 129" {
	check_forwarded HUP 129
}

@test "each SIGUSR1 sent to diehard's process group reaches each replica exactly once" {
	# setsid: diehard leads its own process group, like a terminal's
	# foreground job, and the signal goes to the whole group.
	mkdir "$T/ready"
	start_bg "$T/dh" setsid "$DIEHARD" --share "$T" -v -k 3 -r "$T/r.json" "$PROGS/sup_signals" "$T/ready"
	wait_until 10 eval '[[ $(ls "$T/ready" | wc -l) == 3 ]]' ||
		fail "the replicas did not get ready:" "$(ls "$T/ready")" "$(cat "$T/dh.err")"
	[[ $(cat "/proc/$BG_PID/comm") == diehard && $(pgid "$BG_PID") == "$BG_PID" ]] ||
		fail "diehard (pid $BG_PID) does not lead its own process group"
	kill -USR1 -- "-$BG_PID"
	wait_until 10 grep -q '^usr1 1$' "$T/dh.out" || fail "no 'usr1 1':" "$(cat "$T/dh.out" "$T/dh.err")"
	kill -USR1 -- "-$BG_PID"
	wait_until 10 grep -q '^usr1 2$' "$T/dh.out" || fail "no 'usr1 2':" "$(cat "$T/dh.out" "$T/dh.err")"
	kill -TERM -- "-$BG_PID"
	await_exit "$BG_PID" 5 || fail "$(cat "$T/dh.err")"
	# The program handles SIGTERM and exits 0: its status, not 143.
	[[ $BG_RC == 0 ]] || fail "diehard exited with $BG_RC, expected 0" "$(cat "$T/dh.err")"
	same_bytes <(printf 'usr1 1\nusr1 2\nterm after 2\n') "$T/dh.out" "one line per signal"
	jq -e '.divergences == [] and ([.replicas[].status] == [0, 0, 0])' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.divergences, [.replicas[] | {status, killed}]' "$T/r.json")"
}

@test "after diehard itself is killed with SIGKILL, its replicas die too (within 2 s)" {
	start_bg "$T/dh" "$DIEHARD" -v -k 3 sleep 30
	wait_until 10 spawned 3 "$T/dh.err" || fail "the replicas did not start:" "$(cat "$T/dh.err")"
	local pids pid
	pids=$(spawned_pids "$T/dh.err")
	for pid in $pids; do
		[[ $(cat "/proc/$(program_of "$pid")/comm") == sleep ]] || fail "pid $pid is not a replica of sleep"
	done
	kill -KILL "$BG_PID"
	await_exit "$BG_PID" 5
	for pid in $pids; do
		wait_until 2 proc_gone "$pid" || fail "replica pid $pid still runs 2 s after diehard was killed"
	done
}

@test "a replica's children do not keep diehard waiting once the replicas have exited and closed their output" {
	# Each replica starts a background sleep with its output elsewhere, then exits.
	local start elapsed pid
	start=$(now_ms)
	capture "$T/run" sup -k 3 sh -c 'sleep 30 >/dev/null 2>&1 </dev/null & echo $! >>"$1/bgpids"; echo started' sh "$T"
	elapsed=$(($(now_ms) - start))
	for pid in $(cat "$T/bgpids"); do
		kill "$pid" 2>/dev/null || true
	done
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == started ]] || fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")"
	((elapsed < 20000)) || fail "took $elapsed ms: diehard waited for the replicas' children"
}

@test "a signal ignored when diehard starts (nohup) stays ignored by the replicas" {
	# The reference: the program alone, started with SIGHUP ignored, survives it.
	start_bg "$T/plain" env --ignore-signal=HUP sh -c 'sleep 1; echo survived'
	sleep 0.3
	kill -HUP "$BG_PID"
	await_exit "$BG_PID" 10
	[[ $BG_RC == 0 && $(<"$T/plain.out") == survived ]] || skip "the reference run did not survive SIGHUP"
	# Under diehard, the same: `nohup diehard -k 3 server &` must survive a hangup.
	start_bg "$T/dh" env --ignore-signal=HUP "$DIEHARD" -v -k 3 sh -c 'sleep 1; echo survived'
	wait_until 10 spawned 3 "$T/dh.err" || fail "the replicas did not start:" "$(cat "$T/dh.err")"
	kill -HUP "$BG_PID"
	await_exit "$BG_PID" 10 || fail "$(cat "$T/dh.err")"
	[[ $BG_RC == 0 && $(<"$T/dh.out") == survived ]] ||
		fail "diehard started with SIGHUP ignored exited with $BG_RC after SIGHUP (plain: 0, survived)" "$(cat "$T/dh.err")"
}
