#!/usr/bin/env bats
# diehard as a service (docs/SERVICES.md): sd_notify by majority, watchdogs,
# reload and stop, socket activation (inetd style and LISTEN_FDS), journal
# priorities. The manager is tests/tools/manager.py: a real NOTIFY_SOCKET
# datagram socket that logs what diehard sends (with the sender's pid from
# the kernel's credentials); sockets come from systemd-socket-activate.
# One replica is made to behave differently by a race for a lock directory
# (mkdir is atomic), as in diehard_vote.bats.

load helpers

MANAGER="$ROOT/tests/tools/manager.py"

setup() {
	require_diehard
	require_prog svc_notify
	T=$BATS_TEST_TMPDIR
}

teardown() {
	# Nothing of a test may outlive it.
	pkill -KILL -f "$T/" 2>/dev/null || true
}

# messages LOG: the manager's log, messages only ("MAINPID READY=1|...").
messages() {
	cut -d' ' -f3- "$1"
}

# manager LOG ARGS... : the manager running diehard, under a hang guard.
manager() {
	local log=$1
	shift
	timeout 60 python3 "$MANAGER" "$log" "$@"
}


# client PORT: sends stdin to 127.0.0.1:PORT, half-closes, prints the answer
# until the server's end of stream.
client() {
	timeout 20 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=15)
s.sendall(sys.stdin.buffer.read())
s.shutdown(socket.SHUT_WR)
while True:
    b = s.recv(65536)
    if not b:
        break
    sys.stdout.buffer.write(b)
' "$1"
}

@test "READY=1 reaches the manager once a majority of replicas said it, from diehard's pid, MAINPID rewritten" {
	printf 'one\ntwo\n' >"$T/in"
	manager "$T/log" -- "$DIEHARD" --share "$T" -v -k 3 "$PROGS/svc_notify" <"$T/in" >"$T/out" 2>"$T/err" ||
		fail "manager/diehard failed" "$(cat "$T/err")"
	printf 'got one\ngot two\n' | same_bytes /dev/stdin "$T/out" "the service's voted output"
	! grep -q ' OTHER ' "$T/log" || fail "a process other than diehard notified the manager:" "$(cat "$T/log")"
	local ready
	ready=$(grep -c 'READY=1' "$T/log")
	((ready == 1)) || fail "READY=1 sent $ready times, expected once:" "$(cat "$T/log")"
	# Sent by diehard, naming diehard: the replicas' own MAINPID= never passes.
	local sender mainpid
	sender=$(grep 'READY=1' "$T/log" | cut -d' ' -f2)
	mainpid=$(grep -o 'MAINPID=[0-9]*' "$T/log" | cut -d= -f2 | sort -u)
	[[ $mainpid == "$sender" ]] || fail "MAINPID=$mainpid, but diehard is pid $sender" "$(cat "$T/log")"
	# Said only after two replicas said it.
	local before
	before=$(sed -n '/ready: a majority/q;p' "$T/err" | grep -c 'says READY=1')
	((before >= 2)) || fail "diehard was ready after $before replicas said READY=1:" "$(cat "$T/err")"
	grep -q 'STATUS=3/3 replicas live, 0 replaced, 0 divergences; serving' "$T/log" ||
		fail "the status does not carry diehard's summary and the replicas' agreed text:" "$(cat "$T/log")"
}

@test "a replica that never says READY=1 does not hold back readiness; none at all: no READY and one clear line" {
	printf 'x\n' | manager "$T/log" -- "$DIEHARD" --share "$T" -k 3 "$PROGS/svc_notify" --odd "$T/odd" noready >"$T/out" 2>"$T/err" ||
		fail "diehard failed" "$(cat "$T/err")"
	[[ -d $T/odd ]] || fail "no replica played the odd one"
	grep -q 'READY=1' "$T/log" || fail "two ready replicas of three did not make diehard ready:" "$(cat "$T/log")"
	# A command that never notifies: the manager is never told, and the
	# journal says why.
	printf 'x\n' | manager "$T/log2" -- "$DIEHARD" --share "$T" -k 3 cat >"$T/out2" 2>"$T/err2" || fail "diehard cat failed" "$(cat "$T/err2")"
	[[ $(<"$T/out2") == x ]] || fail "cat's output" "$(cat "$T/out2")"
	! grep -q 'READY=1' "$T/log2" || fail "READY=1 sent though no replica said it:" "$(cat "$T/log2")"
	grep -q 'never told READY=1: 0 of the 3' "$T/err2" || fail "no line about readiness:" "$(cat "$T/err2")"
	[[ $(grep -c '' "$T/err2") == 1 ]] || fail "expected one line on stderr:" "$(cat "$T/err2")"
}

@test "systemd-notify (with its BARRIER=1) inside a replica: readiness and status pass, nothing hangs" {
	require_cmd systemd-notify
	for sandbox in auto off; do
		printf 'a\n' | manager "$T/log.$sandbox" -- "$DIEHARD" --share "$T" -k 3 --sandbox "$sandbox" -- \
			bash -c 'systemd-notify --ready --status="up and running" && cat' >"$T/out" 2>"$T/err" ||
			fail "--sandbox $sandbox: failed" "$(cat "$T/err")"
		[[ $(<"$T/out") == a ]] || fail "--sandbox $sandbox: output" "$(cat "$T/out")"
		grep -q 'READY=1|MAINPID=[0-9]*|STATUS=3/3 replicas live, 0 replaced, 0 divergences; up and running' \
			"$T/log.$sandbox" || fail "--sandbox $sandbox: no READY with the status:" "$(cat "$T/log.$sandbox")"
	done
}


@test "replicas that say READY=1 and exit at once were ready: the manager hears READY=1, then STOPPING=1" {
	# No input: each replica notifies and ends straight away, often before
	# diehard read its message (its sender is gone by then) or before a tick
	# could tell the manager. Several runs, since it is a race. diehard's
	# last words may reach the manager after diehard exited (LATE: read
	# without credentials), as they may reach systemd.
	local log
	for sandbox in auto off; do
		for run in 1 2 3 4 5; do
			log=$T/log.$sandbox.$run
			manager "$log" -- "$DIEHARD" --share "$T" -k 3 --sandbox "$sandbox" "$PROGS/svc_notify" </dev/null \
				>"$T/out" 2>"$T/err" || fail "--sandbox $sandbox run $run: diehard failed" "$(cat "$T/err")"
			grep -Eq ' (MAINPID|LATE) READY=1\|MAINPID=' "$log" ||
				fail "--sandbox $sandbox run $run: READY=1 lost:" "$(cat "$log")" "$(cat "$T/err")"
			! grep -q ' OTHER ' "$log" || fail "--sandbox $sandbox run $run: a message not from diehard:" "$(cat "$log")"
			[[ $(tail -n 1 "$log") == *' STOPPING=1' ]] ||
				fail "--sandbox $sandbox run $run: the last word is not STOPPING=1:" "$(cat "$log")"
			[[ ! -s $T/err ]] || fail "--sandbox $sandbox run $run: diehard said something" "$(cat "$T/err")"
		done
	done
}

@test "a replica that stops pinging its watchdog is replaced; diehard keeps pinging the manager" {
	require_jq
	# 0.4 s interval: each replica pings every 0.1 s; the odd one once.
	(sleep 3; echo hello) | manager "$T/log" --watchdog 400000 -- "$DIEHARD" --share "$T" -k 3 -r "$T/r.json" \
		"$PROGS/svc_notify" --odd "$T/odd" nowatchdog >"$T/out" 2>"$T/err" || fail "diehard failed" "$(cat "$T/err")"
	[[ $(<"$T/out") == "got hello" ]] || fail "output" "$(cat "$T/out")"
	jq -e '[.replacements[] | select(.why | test("watchdog: no WATCHDOG=1"))] | length >= 1' "$T/r.json" >/dev/null ||
		fail "the silent replica was not replaced:" "$(jq -c '{replicas: [.replicas[] | {index, killed}], replacements}' "$T/r.json")"
	jq -e '.exit_code == 0 and ([.replicas[] | select(.killed == null)] | length) == 3' "$T/r.json" >/dev/null ||
		fail "three replicas should end well" "$(jq -c . "$T/r.json")"
	# Pings all along: over 3 s at 0.2 s, and never a gap of the interval.
	local pings
	pings=$(grep -c ' WATCHDOG=1$' "$T/log")
	((pings >= 10)) || fail "only $pings pings reached the manager:" "$(cat "$T/log")"
	awk '/ WATCHDOG=1$/ { if (last && $1 - last > 400) { print "gap of " $1 - last " ms"; bad = 1 } last = $1 }
	     END { exit bad }' "$T/log" || fail "diehard's pings stopped for longer than the interval"
	grep -q 'STATUS=3/3 replicas live, 1 replaced' "$T/log" || fail "the status did not say a replica was replaced:" "$(cat "$T/log")"
}

@test "no majority healthy: diehard stops pinging, so the manager's watchdog fires" {
	# Every replica pings once, then never: all are killed for it, and the
	# replacements do the same until respawns run out.
	(sleep 2.5) | manager "$T/log" --watchdog 300000 -- "$DIEHARD" --share "$T" -k 3 --respawns 2 -- \
		bash -c 'systemd-notify WATCHDOG=1 READY=1; exec sleep 30' >"$T/out" 2>"$T/err" 3>&- &
	local pid=$!
	sleep 2.5
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || true
	local last
	last=$(grep ' WATCHDOG=1$' "$T/log" | tail -n 1 | cut -d' ' -f1)
	[[ -n $last ]] && ((last < 1500)) || fail "diehard still pinged at ${last:-never} ms with no healthy replica:" "$(cat "$T/log")"
}

@test "degraded with no replacement possible (--respawns 0): diehard serves on with the replica left, says so in STATUS=, and stops pinging, so the manager's watchdog restarts the service" {
	manager "$T/log" --watchdog 300000 -- "$DIEHARD" --share "$T" -k 3 --respawns 0 --control "$T/ctl" -- \
		bash -c 'systemd-notify READY=1; while :; do systemd-notify WATCHDOG=1; echo tick; sleep 0.1; done' \
		>"$T/out" 2>"$T/err" 3>&- &
	local mgr=$! pids n1 n2
	wait_until 20 grep -qs 'READY=1' "$T/log" || fail "never ready" "$(cat "$T/log" "$T/err")"
	wait_until 20 grep -qs ' WATCHDOG=1$' "$T/log" || fail "never pinged" "$(cat "$T/log")"
	pids=$("$DIEHARD" status --control "$T/ctl" --json | jq -r '.replicas[:2][].pid')
	kill -KILL $pids
	wait_until 20 grep -qs 'diehard: degraded: 1 of the 3 replicas vote' "$T/err" ||
		fail "not degraded after two kills" "$(cat "$T/err")"
	wait_until 20 grep -qs 'STATUS=1/3 replicas live (degraded)' "$T/log" || fail "STATUS= does not say degraded" "$(cat "$T/log")"
	# A tick after the state changed: any ping already sent is counted.
	sleep 0.5
	n1=$(grep -c ' WATCHDOG=1$' "$T/log")
	sleep 1.5
	n2=$(grep -c ' WATCHDOG=1$' "$T/log")
	((n2 == n1)) || fail "diehard still pinged the manager ($n1, then $n2) with no way back to a majority" "$(tail -n 5 "$T/log")"
	grep -q 'tick' "$T/out" || fail "the replica left did not serve on"
	kill -TERM "$mgr" 2>/dev/null || true
	wait "$mgr" || true
}

@test "SIGHUP is forwarded; RELOADING=1 then READY=1 once a majority reloaded; SIGTERM: STOPPING=1, a clean stop, nothing left" {
	mkfifo "$T/fifo"
	manager "$T/log" -- "$DIEHARD" --share "$T" -k 3 "$PROGS/svc_notify" <"$T/fifo" >"$T/out" 2>"$T/err" 3>&- &
	local mgr=$! w
	exec {w}>"$T/fifo"
	wait_until 10 grep -qs 'READY=1' "$T/log" || fail "never ready" "$(cat "$T/log")"
	local dh
	dh=$(grep 'READY=1' "$T/log" | cut -d' ' -f2)
	kill -HUP "$dh"
	wait_until 10 grep -qs 'RELOADING=1' "$T/log" || fail "no RELOADING=1 after SIGHUP" "$(cat "$T/log")"
	wait_until 10 grep -qs 'STATUS=.*; reloaded' "$T/log" || fail "no status after the reload" "$(cat "$T/log")"
	# Each its own message: systemd reads READY=1 before RELOADING=1 in one.
	[[ $(grep -o -e 'READY=1' -e 'RELOADING=1' "$T/log" | tr '\n' ' ') == "READY=1 RELOADING=1 READY=1 " ]] ||
		fail "expected READY=1, RELOADING=1, READY=1 in three messages:" "$(cat "$T/log")"
	local t0
	t0=$(now_ms)
	kill -TERM "$dh"
	await_exit "$mgr" 10
	exec {w}>&-
	((BG_RC == 0)) || fail "a replica that stops cleanly on SIGTERM: diehard exited $BG_RC" "$(cat "$T/err")"
	grep -q 'STOPPING=1' "$T/log" || fail "no STOPPING=1" "$(cat "$T/log")"
	! pgrep -f "$PROGS/svc_notify" >/dev/null || fail "replicas left running"
}

@test "SIGTERM to a service that ignores it: replicas killed after --stop-timeout, diehard exits 137, nothing left" {
	mkfifo "$T/fifo"
	"$DIEHARD" --share "$T" -k 3 --stop-timeout 1 -- bash -c "trap '' TERM; echo up; while :; do sleep 0.1; done; : $T/" \
		<"$T/fifo" >"$T/out" 2>"$T/err" 3>&- &
	local dh=$! w
	exec {w}>"$T/fifo"
	wait_until 10 grep -qs up "$T/out" || fail "never up" "$(cat "$T/err")"
	local t0
	t0=$(now_ms)
	kill -TERM "$dh"
	await_exit "$dh" 10
	exec {w}>&-
	local took=$(($(now_ms) - t0))
	((BG_RC == 137)) || fail "exit $BG_RC, expected 137" "$(cat "$T/err")"
	((took >= 900 && took < 5000)) || fail "stopped after $took ms with --stop-timeout 1"
	grep -q 'still running 1.0 s after signal 15 (--stop-timeout): killed' "$T/err" || fail "no line" "$(cat "$T/err")"
	sleep 0.2
	! pgrep -f "while :; do sleep 0.1; done; : $T/" >/dev/null || fail "replicas left running"
}

@test "a replica dying of SIGTERM: diehard dies of SIGTERM too (a clean stop for a manager)" {
	mkfifo "$T/fifo"
	"$DIEHARD" --share "$T" -k 3 "$PROGS/svc_notify" --die-on-term <"$T/fifo" >"$T/out" 2>"$T/err" 3>&- &
	local dh=$! w
	exec {w}>"$T/fifo"
	echo hi >&"$w"
	wait_until 10 grep -qs 'got hi' "$T/out" || fail "no answer" "$(cat "$T/err")"
	kill -TERM "$dh"
	await_exit "$dh" 10
	exec {w}>&-
	((BG_RC == 143)) || fail "exit $BG_RC" "$(cat "$T/err")"
	# Killed by the signal, not exit(143): python tells them apart.
	python3 -c '
import subprocess, sys
p = subprocess.Popen([sys.argv[1], "-k", "3", sys.argv[2], "--die-on-term"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
p.stdin.write(b"x\n"); p.stdin.flush(); p.stdout.readline()
p.terminate()
sys.exit(0 if p.wait(10) == -15 else 1)' "$DIEHARD" "$PROGS/svc_notify" || fail "diehard did not die of SIGTERM"
}

@test "inetd style: a line service answers a real TCP client with voted bytes, even with one replica diverging" {
	require_cmd systemd-socket-activate
	local port
	port=$(free_port)
	systemd-socket-activate --inetd -a -l "127.0.0.1:$port" "$DIEHARD" --share "$T" -k 3 -r "$T/r.json" -- \
		bash -c "if mkdir $T/odd.\$PPID 2>/dev/null; then exec sed -u 's/^/WRONG: /'; else exec sed -u 's/^/echo: /'; fi" \
		2>"$T/ssa.err" 3>&- &
	local ssa=$!
	wait_until 10 grep -qs Listening "$T/ssa.err" || fail "systemd-socket-activate did not start" "$(cat "$T/ssa.err")"
	seq 1 2000 | sed 's/^/line /' >"$T/in"
	sed 's/^/echo: /' "$T/in" >"$T/want"
	client "$port" <"$T/in" >"$T/got" || fail "the client failed" "$(cat "$T/ssa.err")"
	same_bytes "$T/want" "$T/got" "the answer through diehard -k 3 (one replica writes WRONG)"
	ls -d "$T"/odd.* >/dev/null || fail "no replica diverged: the test did not test"
	jq -e '[.replicas[] | select(.killed != null and (.killed | test("differs")))] | length >= 1' "$T/r.json" >/dev/null ||
		fail "the odd replica was not caught:" "$(jq -c '[.replicas[] | {index, killed}]' "$T/r.json")"
	# Another connection, another diehard.
	echo again | client "$port" >"$T/got2"
	[[ $(<"$T/got2") == "echo: again" ]] || fail "second connection: $(cat "$T/got2")"
	kill "$ssa"
	wait "$ssa" || true
}

@test "inetd style: micro-httpd through diehard -k 3 serves a file to curl" {
	require_cmd systemd-socket-activate curl
	[[ -x /usr/sbin/micro-httpd ]] || skip "micro-httpd is not installed (.ci/deps)"
	local port
	port=$(free_port)
	mkdir "$T/www"
	head -c 100000 /dev/urandom | base64 >"$T/www/page.txt"
	systemd-socket-activate --inetd -a -l "127.0.0.1:$port" "$DIEHARD" --share "$T" -k 3 -- /usr/sbin/micro-httpd "$T/www" \
		2>"$T/ssa.err" 3>&- &
	local ssa=$!
	wait_until 10 grep -qs Listening "$T/ssa.err" || fail "systemd-socket-activate did not start" "$(cat "$T/ssa.err")"
	for i in 1 2 3; do
		curl -sS -m 10 -o "$T/got" -w '%{http_code}\n' "http://127.0.0.1:$port/page.txt" >"$T/code" ||
			fail "curl failed" "$(cat "$T/ssa.err")"
		[[ $(<"$T/code") == 200 ]] || fail "HTTP $(cat "$T/code")"
		same_bytes "$T/www/page.txt" "$T/got" "the page through diehard"
	done
	curl -sS -m 10 -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/missing" >"$T/code"
	[[ $(<"$T/code") == 404 ]] || fail "a missing page: HTTP $(cat "$T/code")"
	kill "$ssa"
	wait "$ssa" || true
}

@test "Accept=no: every replica gets the sockets, their names, and LISTEN_PID as its own pid" {
	require_cmd systemd-socket-activate
	local port prog
	port=$(free_port)
	prog='import os, socket
s = socket.socket(fileno=3)
mine = os.environ.get("LISTEN_PID") == str(os.getpid())
print(os.environ.get("LISTEN_FDS"), os.environ.get("LISTEN_FDNAMES"), mine, s.getsockname()[1], s.type == socket.SOCK_STREAM)'
	for sandbox in auto off; do
		timeout 20 systemd-socket-activate -l "127.0.0.1:$port" --fdname=web "$DIEHARD" --share "$T" -k 3 --sandbox "$sandbox" -- \
			python3 -c "$prog" >"$T/out" 2>"$T/err" 3>&- &
		local ssa=$!
		wait_until 10 grep -qs Listening "$T/err" || fail "systemd-socket-activate did not start" "$(cat "$T/err")"
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()' "$port"
		wait "$ssa" || fail "--sandbox $sandbox: failed" "$(cat "$T/err")"
		[[ $(<"$T/out") == "1 web True $port True" ]] || fail "--sandbox $sandbox: the replicas saw" "$(cat "$T/out")" "$(cat "$T/err")"
	done
}

@test "stderr is the journal (JOURNAL_STREAM): diehard's lines carry priorities, the replicas' pass untouched" {
	: >"$T/err"
	local stream
	stream=$(stat -c '%d:%i' "$T/err")
	JOURNAL_STREAM=$stream sup -v -k 3 -- bash -c 'echo to-stderr >&2; exit 3' 2>>"$T/err" || true
	grep -qx 'to-stderr' "$T/err" || fail "the replicas' stderr changed:" "$(cat "$T/err")"
	grep -q '^<5>diehard: spawn replica 0' "$T/err" || fail "no notice priority:" "$(cat "$T/err")"
	! grep -q '^diehard:' "$T/err" || fail "a line of diehard's without priority:" "$(cat "$T/err")"
	# Another stderr than the journal's: no prefixes.
	JOURNAL_STREAM=1:1 sup -v -k 3 true 2>"$T/err2"
	grep -q '^diehard: spawn replica 0' "$T/err2" || fail "prefixes where stderr is not the journal:" "$(cat "$T/err2")"
}

@test "malformed service variables: one line, exit 125; variables meant for another process are ignored" {
	capture "$T/run" env NOTIFY_SOCKET=relative/path "$DIEHARD" --share "$T" -k 3 true
	[[ $(<"$T/run.rc") == 125 && $(grep -c '' "$T/run.err") == 1 ]] || fail "NOTIFY_SOCKET=relative: $(cat "$T/run.rc")" "$(cat "$T/run.err")"
	grep -q '^diehard: NOTIFY_SOCKET must be' "$T/run.err" || fail "$(cat "$T/run.err")"
	capture "$T/run" bash -c 'exec 3>&- 4>&-; export LISTEN_PID=$$ LISTEN_FDS=abc; exec "$0" -k 3 true' "$DIEHARD"
	[[ $(<"$T/run.rc") == 125 ]] && grep -q '^diehard: LISTEN_FDS must be' "$T/run.err" || fail "LISTEN_FDS=abc:" "$(cat "$T/run.err")"
	capture "$T/run" bash -c 'exec 3>&- 4>&- 5>&-; export LISTEN_PID=$$ LISTEN_FDS=2; exec "$0" -k 3 true' "$DIEHARD"
	[[ $(<"$T/run.rc") == 125 ]] && grep -q 'fd 3 is not open' "$T/run.err" || fail "LISTEN_FDS=2 without fds:" "$(cat "$T/run.err")"
	# Meant for another pid: dropped, and not passed to the replicas either.
	capture "$T/run" env LISTEN_PID=1 LISTEN_FDS=1 WATCHDOG_PID=1 WATCHDOG_USEC=1000 "$DIEHARD" --share "$T" -k 3 -- \
		sh -c 'echo "${LISTEN_FDS:-none} ${WATCHDOG_USEC:-none} ${NOTIFY_SOCKET:-none}"'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == "none none none" ]] || fail "foreign variables:" "$(cat "$T/run.out" "$T/run.err")"
	capture "$T/run" "$DIEHARD" --share "$T" --stop-timeout 0 true
	[[ $(<"$T/run.rc") == 125 ]] && grep -q -- '--stop-timeout must be seconds' "$T/run.err" || fail "--stop-timeout 0:" "$(cat "$T/run.err")"
}
