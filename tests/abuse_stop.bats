#!/usr/bin/env bats
# A replica stopped by a signal from outside (issue 37): SIGSTOP of its init,
# of its program (pid 2 in its namespace) or of a process the program
# started. Such a replica is a straggler like a silent one: killed after
# --timeout, the report's `killed` and `found_stopped` say which process was
# stopped, and it never holds the end of the run once the vote has ended.
# Nothing of it outlives the run. A stop diehard forwards itself (kill -TSTP
# of diehard, as a terminal's ^Z) is job control: no replica is a straggler
# for the time diehard was stopped with them.
#
# Each case runs as root and as nobody (the stop sent by the same user),
# with --sandbox on, auto and off where it applies (an init exists only in
# a sandbox; a private network only there too).

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	# A directory nobody may write in too (the test's own may sit in one
	# it cannot enter): control socket, report, lock files.
	W=$(mktemp -d /tmp/diehard-stop.XXXXXX)
	chmod 777 "$W"
	# diehard's working directory: a --ci run that fails writes its
	# recording (diehard-ci-PID.dhr) there, not in the source tree.
	cd "$W"
	MARK="stoptest-$$-$RANDOM"
	BG=()
	WATCH=()
}

teardown() {
	local pid
	for pid in "${BG[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for pid in "${WATCH[@]}"; do
		kill -CONT "$pid" 2>/dev/null || true
	done
	pkill -KILL -f "$MARK" 2>/dev/null || true
	cd /
	rm -rf "$W"
}

# as ROLE CMD...: CMD as root, or as nobody.
as() {
	local role=$1
	shift
	if [[ $role == nobody ]]; then
		as_nobody "$@"
	else
		"$@"
	fi
}

# start ROLE SANDBOX SCRIPT [DIEHARD-ARGS...]: diehard -k 3 --timeout 1
# --sandbox SANDBOX (control socket and report in $W) running sh -c SCRIPT
# with $0 the test's marker and $1 the directory $W, in the background as
# ROLE; its output in $W/out, $W/err, its exit status awaited by finish.
start() {
	local role=$1 sb=$2 script=$3
	shift 3
	rm -f "$W/ctl" "$W/r.json" "$W/out" "$W/err"
	as "$role" timeout 60 "$DIEHARD" --share "$W" -k 3 --timeout 1 --sandbox "$sb" --control "$W/ctl" -r "$W/r.json" "$@" \
		sh -c "$script" "$MARK" "$W" </dev/null >"$W/out" 2>"$W/err" 3>&- &
	BG+=("$!")
	RUN=$!
	wait_until 20 status_ok || fail "diehard's control socket never answered" "$(cat "$W/err")"
}

status_ok() {
	"$DIEHARD" status --control "$W/ctl" --json >"$W/status.json" 2>/dev/null
}

# status_field JQ: a value of diehard status --json (retried while the
# socket answers).
status_field() {
	status_ok && jq -r "$1" "$W/status.json"
}

# running_pids ID: "PROGRAM INIT" of replica ID, once it runs (INIT empty
# without a sandbox).
running_pids() {
	local pids
	for _ in $(seq 1 500); do
		pids=$(status_field ".replicas[] | select(.id == $1 and .state == \"running\") | \"\\(.pid) \\(.init_pid // \"\")\"" || true)
		[[ -n $pids ]] && {
			echo "$pids"
			return 0
		}
		sleep 0.02
	done
	return 1
}

# child_of PID: a child of PID (waited for).
child_of() {
	local c
	for _ in $(seq 1 500); do
		c=$(pgrep -P "$1" | head -n 1 || true)
		[[ -n $c ]] && {
			echo "$c"
			return 0
		}
		sleep 0.02
	done
	return 1
}

# stop_process ROLE PID: SIGSTOP from outside, by ROLE; the process is then
# seen stopped.
stop_process() {
	as "$1" kill -STOP "$2" || fail "kill -STOP $2 as $1 failed"
	WATCH+=("$2")
	wait_until 10 is_stopped "$2" || fail "process $2 is not stopped: $(cat "/proc/$2/status" 2>&1 | grep State)"
}

is_stopped() {
	[[ $(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) == T ]]
}

# finish SECONDS: waits for the run; its exit status in RC.
finish() {
	await_exit "$RUN" "$1" || fail "diehard still running after $1 s:" "$(cat "$W/err")"
	RC=$BG_RC
}

# all_gone PID...: none of the processes exists any more (a zombie left to
# the system's init counts as gone), nor anything running the marker.
all_gone() {
	local pid
	for pid in "$@"; do
		proc_gone "$pid" || return 1
	done
	! pgrep -f "$MARK" >/dev/null
}

# check_stopped_kill WHAT PID: the report shows exactly one replica killed,
# as a straggler, its WHAT (init, program, descendant) PID found stopped.
check_stopped_kill() {
	local what=$1 pid=$2 phrase
	case $what in
	init) phrase="its init" ;;
	program) phrase="its program" ;;
	descendant) phrase="a process it started" ;;
	esac
	jq -e --arg re "^straggler: .*; $phrase \\(pid $pid\\) was stopped$" --arg what "$what" --argjson pid "$pid" '
		[.replicas[] | select(.killed != null)] | length == 1 and
		(.[0].killed | test($re)) and .[0].found_stopped == {process: $what, pid: $pid}' "$W/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {index, status, killed, found_stopped}]' "$W/r.json")"
	validate_report "$W/r.json"
}

# release ROLE ID: replica ID's program goes on to print "done" and exit:
# its child (sleep 60) is ended by a SIGTERM from outside.
release() {
	local pids program init child
	pids=$(running_pids "$2") || fail "replica $2 never ran"
	read -r program init <<<"$pids"
	child=$(child_of "$program") || fail "replica $2's program $program has no child"
	as "$1" kill -TERM "$child" || fail "cannot end replica $2's child $child"
}

# stop_one ROLE SANDBOX WHAT: every replica waits for a child (sleep 60);
# replica 0's WHAT (init, program, grandchild: that child) is stopped, then
# the children of replicas 1 and 2 are ended, so that those two print
# "done" and exit 0. The stopped one is killed as a straggler, the run ends
# with "done" and 0, and none of its processes is left.
stop_one() {
	local role=$1 sb=$2 what=$3 pids program init target kind grandchild
	start "$role" "$sb" 'sleep 60 & wait $!; echo done'
	pids=$(running_pids 0) || fail "replica 0 never ran" "$(cat "$W/err")"
	read -r program init <<<"$pids"
	grandchild=$(child_of "$program") || fail "replica 0's program $program has no child"
	case $what in
	init) target=$init kind=init ;;
	program) target=$program kind=program ;;
	grandchild) target=$grandchild kind=descendant ;;
	esac
	[[ -n $target ]] || fail "no $what to stop (sandbox $sb)"
	stop_process "$role" "$target"
	release "$role" 1
	release "$role" 2
	finish 50
	[[ $RC == 0 && $(<"$W/out") == done ]] ||
		fail "$role, --sandbox $sb, $what stopped: exit $RC, stdout '$(cat "$W/out")'" "$(cat "$W/err")"
	check_stopped_kill "$kind" "$target"
	jq -e '.exit_code == 0' "$W/r.json" >/dev/null || fail "report exit code: $(jq .exit_code "$W/r.json")"
	wait_until 5 all_gone $init "$program" "$grandchild" ||
		fail "$role, --sandbox $sb: processes left after the run:" "$(ps -o pid,stat,args -p "$init $program $grandchild" 2>&1)" "$(pgrep -af "$MARK")"
}

@test "stop: SIGSTOP of a replica's init, as root (--sandbox on, auto): killed as a straggler after --timeout, the run ends with the others' output and exit, nothing left" {
	for sb in on auto; do
		stop_one root "$sb" init
	done
}

@test "stop: SIGSTOP of a replica's init, as nobody (--sandbox on, auto): killed as a straggler after --timeout, the run ends with the others' output and exit, nothing left" {
	require_nobody
	for sb in on auto; do
		stop_one nobody "$sb" init
	done
}

@test "stop: SIGSTOP of a replica's program, as root (--sandbox on, auto, off): killed as a straggler, the report names the program, nothing left" {
	for sb in on auto off; do
		stop_one root "$sb" program
	done
}

@test "stop: SIGSTOP of a replica's program, as nobody (--sandbox on, auto, off): killed as a straggler, the report names the program, nothing left" {
	require_nobody
	for sb in on auto off; do
		stop_one nobody "$sb" program
	done
}

@test "stop: SIGSTOP of a process a replica's program started, as root (--sandbox on, auto, off): killed as a straggler, nothing left" {
	for sb in on auto off; do
		stop_one root "$sb" grandchild
	done
}

@test "stop: SIGSTOP of a process a replica's program started, as nobody (--sandbox on, auto, off): killed as a straggler, nothing left" {
	require_nobody
	for sb in on auto off; do
		stop_one nobody "$sb" grandchild
	done
}

# stop_late ROLE SANDBOX: one replica (the one that makes $W/lock first)
# sleeps 40 s while the other two print "done" and exit; once they have,
# its init (its program without a sandbox) is stopped. It is killed after
# --timeout and the run ends then, long before the sleep would.
stop_late() {
	local role=$1 sb=$2 id pids program init target start_ms
	rm -rf "$W/lock"
	start "$role" "$sb" 'if mkdir "$1/lock" 2>/dev/null; then exec sleep 40; fi; echo done'
	start_ms=$(now_ms)
	wait_until 20 two_exited || fail "the two others never exited" "$(cat "$W/status.json")"
	id=$(status_field '.replicas[] | select(.state == "running") | .id') || fail "no replica left running"
	pids=$(running_pids "$id") || fail "replica $id is not running"
	read -r program init <<<"$pids"
	target=${init:-$program}
	stop_process "$role" "$target"
	finish 50
	[[ $RC == 0 && $(<"$W/out") == done ]] ||
		fail "$role, --sandbox $sb: exit $RC, stdout '$(cat "$W/out")'" "$(cat "$W/err")"
	check_stopped_kill "$([[ -n $init ]] && echo init || echo program)" "$target"
	# Hang guard, not a timing: the sleep would have held it 40 s.
	(($(now_ms) - start_ms < 30000)) || fail "the run waited for the stopped replica"
	jq -e '.replacements == []' "$W/r.json" >/dev/null ||
		fail "a replacement ran once the vote had ended: $(jq -c .replacements "$W/r.json")"
	wait_until 5 all_gone "$program" ${init:+"$init"} || fail "processes left after the run"
}

two_exited() {
	[[ $(status_field '[.replicas[] | select(.state == "exited")] | length') == 2 ]]
}

@test "stop: a replica stopped after the others finished does not hold the run: killed after --timeout, no replacement, as root (--sandbox on, auto, off)" {
	for sb in on auto off; do
		stop_late root "$sb"
	done
}

@test "stop: a replica stopped after the others finished does not hold the run: killed after --timeout, no replacement, as nobody (--sandbox on, auto, off)" {
	require_nobody
	for sb in on auto off; do
		stop_late nobody "$sb"
	done
}

# stop_term ROLE SANDBOX TIMEOUT STOP_TIMEOUT: replica 0's init stopped,
# then SIGTERM to diehard: the init cannot pass it on, the others die of
# it. The stopped replica is killed (after --timeout, or at --stop-timeout
# if that comes first) and diehard ends as the others did, by SIGTERM (143),
# not by the stop timeout's SIGKILL (137).
stop_term() {
	local role=$1 sb=$2 pids program init dh
	start "$role" "$sb" 'sleep 40; echo done' --timeout "$3" --stop-timeout "$4"
	pids=$(running_pids 0) || fail "replica 0 never ran"
	read -r program init <<<"$pids"
	running_pids 1 >/dev/null && running_pids 2 >/dev/null || fail "replicas 1 and 2 never ran"
	stop_process "$role" "$init"
	dh=$(status_field .pid)
	as "$role" kill -TERM "$dh"
	finish 50
	[[ $RC == 143 && ! -s $W/out ]] || fail "$role, --sandbox $sb: exit $RC, stdout '$(cat "$W/out")'" "$(cat "$W/err")"
	check_stopped_kill init "$init"
	wait_until 5 all_gone "$program" "$init" || fail "processes left after the run"
}

@test "stop: SIGTERM while a replica's init is stopped: the stopped one is a straggler (--timeout 1, or --stop-timeout 1 first), diehard exits 143, as root and as nobody (--sandbox on, auto)" {
	for sb in on auto; do
		stop_term root "$sb" 1 30
		stop_term root "$sb" 30 1
	done
	require_nobody
	for sb in on auto; do
		stop_term nobody "$sb" 1 30
		stop_term nobody "$sb" 30 1
	done
}

# job_control ROLE SANDBOX: one replica (the lock's winner) trails the
# others' committed output by 4 s, silent; kill -TSTP diehard (which stops
# the replicas, then itself) is held 3 s, longer than --timeout 2, then
# kill -CONT: diehard stopped the replicas itself, so none is a straggler
# for that time, and the run ends with all three agreeing. (Counted, the
# trailing replica would be 3 s and more behind as diehard resumes, its
# sleep not over yet: killed whatever runs first.)
job_control() {
	local role=$1 sb=$2 dh id pids program init
	rm -rf "$W/lock"
	start "$role" "$sb" 'if mkdir "$1/lock" 2>/dev/null; then sleep 4; fi; echo done' --timeout 2
	wait_until 20 two_exited || fail "the two others never exited" "$(cat "$W/status.json")"
	id=$(status_field '.replicas[] | select(.state == "running") | .id') || fail "no replica left running"
	pids=$(running_pids "$id") || fail "replica $id is not running"
	read -r program init <<<"$pids"
	dh=$(status_field .pid)
	# A few ticks (100 ms each) for diehard's straggler clock to start.
	sleep 0.5
	as "$role" kill -TSTP "$dh"
	WATCH+=("$dh" "$program")
	wait_until 10 is_stopped "$dh" || fail "diehard did not stop"
	wait_until 10 is_stopped "$program" || fail "diehard stopped, its replica $id (pid $program) did not"
	sleep 3
	as "$role" kill -CONT "$dh"
	finish 50
	[[ $RC == 0 && $(<"$W/out") == done ]] || fail "$role, --sandbox $sb: exit $RC, stdout '$(cat "$W/out")'" "$(cat "$W/err")"
	jq -e '[.replicas[] | select(.killed != null)] == [] and [.replicas[] | .status] == [0, 0, 0]' "$W/r.json" >/dev/null ||
		fail "$role, --sandbox $sb: a replica stopped with diehard was judged: $(jq -c '[.replicas[] | {index, status, killed}]' "$W/r.json")"
}

@test "stop: diehard stopped with its replicas (kill -TSTP, as ^Z does) for longer than --timeout: no straggler once continued, as root and as nobody (--sandbox on, auto, off)" {
	for sb in on auto off; do
		job_control root "$sb"
	done
	require_nobody
	for sb in on auto off; do
		job_control nobody "$sb"
	done
}

# stop_server ROLE SANDBOX: line_server as three replicas with private
# networks; replica 0's init stopped before any client: diehard asks that
# init for sockets to reach its server, gets no answer within 1 s, and
# kills the replica (a straggler) instead of asking again for every
# connection; every client gets its right reply, and no other replica is
# killed.
stop_server() {
	local role=$1 sb=$2 port pids program init n dh
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	rm -f "$W/ctl" "$W/r.json"
	as "$role" timeout 60 "$DIEHARD" --share "$W" -k 3 --timeout 1 --sandbox "$sb" --control "$W/ctl" -r "$W/r.json" -- \
		"$PROGS/line_server" "$port" </dev/null >"$W/out" 2>"$W/err" 3>&- &
	BG+=("$!")
	RUN=$!
	wait_until 20 status_ok || fail "no control socket" "$(cat "$W/err")"
	wait_until 20 grep -q 'listening on' "$W/err" || fail "line_server never listened" "$(cat "$W/err")"
	pids=$(running_pids 0) || fail "replica 0 never ran"
	read -r program init <<<"$pids"
	stop_process "$role" "$init"
	for n in 1 2 3 4 5 6; do
		[[ $(timeout 30 python3 "$ROOT/tests/tools/lineclient.py" send "$port" "ECHO $MARK $n") == "$MARK $n" ]] ||
			fail "$role, --sandbox $sb: connection $n got a wrong reply" "$(cat "$W/err")"
	done
	dh=$(status_field .pid)
	as "$role" kill -TERM "$dh"
	finish 30
	[[ $RC == 143 ]] || fail "$role, --sandbox $sb: exit $RC" "$(cat "$W/err")"
	jq -e --argjson pid "$init" '[.replicas[] | select(.killed != null)] | length == 1 and
		(.[0].index == 0) and (.[0].killed | test("^straggler: its init did not answer diehard.s request for sockets")) and
		.[0].found_stopped == {process: "init", pid: $pid}' "$W/r.json" >/dev/null ||
		fail "$role, --sandbox $sb: report: $(jq -c '[.replicas[] | {index, status, killed, found_stopped}]' "$W/r.json")"
	wait_until 5 all_gone "$program" "$init" || fail "processes left after the run"
}

@test "stop: a server replica whose init is stopped is killed once its init does not answer for sockets; every client answered right, no honest replica killed, as root and as nobody (--sandbox on, auto)" {
	require_prog line_server
	require_cmd python3
	for sb in on auto; do
		stop_server root "$sb"
	done
	require_nobody
	for sb in on auto; do
		stop_server nobody "$sb"
	done
}

# stop_ci ROLE SANDBOX: under --ci, replica 0's init stopped (as in
# stop_one): it is killed as a straggler, but a stop from outside is no
# heap-dependent hang: no finding, the run passes with the program's status.
stop_ci() {
	local role=$1 sb=$2 pids program init
	start "$role" "$sb" 'sleep 60 & wait $!; echo done' --ci
	pids=$(running_pids 0) || fail "replica 0 never ran"
	read -r program init <<<"$pids"
	stop_process "$role" "$init"
	release "$role" 1
	release "$role" 2
	finish 50
	[[ $RC == 0 && $(<"$W/out") == done ]] || fail "$role, --sandbox $sb: exit $RC, stdout '$(cat "$W/out")'" "$(cat "$W/err")"
	check_stopped_kill init "$init"
	jq -e '.ci.failed == false and .ci.findings == []' "$W/r.json" >/dev/null ||
		fail "$role, --sandbox $sb: a stop from outside became a finding: $(jq -c .ci "$W/r.json")"
	wait_until 5 all_gone "$program" "$init" || fail "processes left after the run"
}

@test "stop: under --ci a replica whose init is stopped is killed as a straggler but is no finding: exit 0, as root and as nobody (--sandbox on, auto)" {
	for sb in on auto; do
		stop_ci root "$sb"
	done
	require_nobody
	for sb in on auto; do
		stop_ci nobody "$sb"
	done
}
