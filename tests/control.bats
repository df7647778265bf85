#!/usr/bin/env bats
# The control socket (--control PATH, docs/CONTROL.md): `diehard status`
# and `diehard events` against a running diehard; clients that send
# garbage, too much, the wrong version, or come from another user are
# refused and never disturb the run; the socket file is private, removed at
# exit, replaced when stale and refused when it is something else.
#
# The run under test is `cat` reading a FIFO that a `sleep` holds open: it
# runs until the test kills that sleep (by its pid).

load helpers

setup() {
	require_diehard
	require_jq
	require_cmd python3
	T=$BATS_TEST_TMPDIR
	CTL=$T/ctl
	# A raw client: sends hex bytes, prints the first message's text (an
	# error's message is in it as plain bytes) and whether the server closed.
	cat >"$T/raw.py" <<-'PY'
		import socket, struct, sys
		s = socket.socket(socket.AF_UNIX)
		s.settimeout(10)
		s.connect(sys.argv[1])
		try:
		    s.sendall(bytes.fromhex(sys.argv[2]))
		except OSError:
		    pass
		data = b""
		while True:
		    try:
		        b = s.recv(65536)
		    except ConnectionResetError:
		        break
		    if not b:
		        break
		    data += b
		n = struct.unpack(">I", data[:4])[0] if len(data) >= 4 else -1
		print(data[4:4 + n].decode("utf-8", "replace") if n >= 0 else "nothing")
		print("closed")
	PY
}

teardown() {
	# A run left behind by a failed test: its pid only, never a name.
	local p
	for p in ${RUN_PID:-} ${HOLD_PID:-}; do
		if proc_alive "$p"; then
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
}

# hold_input: $T/in, a FIFO held open for writing by a sleep (HOLD_PID).
hold_input() {
	mkfifo "$T/in"
	sleep 600 >"$T/in" &
	HOLD_PID=$!
}

# answers: the control socket $CTL answers a status.
answers() {
	"$DIEHARD" status --control "$CTL" >/dev/null 2>&1
}

# start_run [DIEHARD OPTIONS...]: diehard -k 3 --control $CTL ... -- cat,
# reading $T/in; its pid in RUN_PID; waits until the socket answers.
start_run() {
	hold_input
	"$DIEHARD" -k 3 --control "$CTL" "$@" -- cat <"$T/in" >"$T/run.out" 2>"$T/run.err" &
	RUN_PID=$!
	wait_until 10 answers || fail "no answer at $CTL" "$(cat "$T/run.err")"
}

# end_run: feeds two lines, ends the input; diehard exits 0 with them.
end_run() {
	printf 'one\ntwo\n' >"$T/in"
	kill "$HOLD_PID"
	wait "$HOLD_PID" 2>/dev/null || true
	await_exit "$RUN_PID" 30
	[[ $BG_RC == 0 ]] || fail "diehard exited $BG_RC" "$(cat "$T/run.err")"
	[[ $(cat "$T/run.out") == $'one\ntwo' ]] || fail "wrong output:" "$(cat "$T/run.out")"
}

status_json() {
	"$DIEHARD" status --control "$CTL" --json
}

@test "status: three replicas whose pids exist, as a table and as JSON with every field; the socket is 0600 and removed at exit" {
	start_run
	[[ $(stat -c %a "$T/ctl") == 600 ]] || fail "mode $(stat -c %a "$T/ctl")"
	run "$DIEHARD" status --control "$T/ctl"
	[[ $status == 0 ]] || fail "status exited $status: $output"
	[[ $(grep -cE '^[0-9]+ +[0-9]+ +[0-9a-f]{32} +[0-9.]+s +[0-9]+ +[0-9]+ +running$' <<<"$output") == 3 ]] ||
		fail "not three running replicas:" "$output"
	[[ $output == *'replicas: k 3, 3 in the vote, 0 replacements started'* && $output == *'command: cat'* ]] ||
		fail "no run-wide lines:" "$output"
	status_json >"$T/s.json"
	jq -e '.k == 3 and .live == 3 and .replacements == 0 and .divergences.output == 0
		and .divergences.status == 0 and (.divergences.calls | type) == "number"
		and .committed.stdout == 0 and .committed.stderr == 0 and .uptime >= 0 and .command == ["cat"]
		and (.replicas | length) == 3
		and all(.replicas[]; (.id | type) == "number" and (.pid | type) == "number"
			and (.seed | test("^[0-9a-f]{32}$")) and .uptime >= 0 and .bytes.stdout == 0
			and .bytes.stderr == 0 and .state == "running")' "$T/s.json" >/dev/null ||
		fail "status JSON:" "$(cat "$T/s.json")"
	local pid
	for pid in $(jq -r '.replicas[].pid' "$T/s.json"); do
		proc_alive "$pid" || fail "replica pid $pid does not exist"
		[[ $(cat "/proc/$pid/comm") == cat ]] || fail "pid $pid is $(cat "/proc/$pid/comm"), not the program"
	done
	end_run
	[[ ! -e $T/ctl ]] || fail "the socket is still there after the run"
}

@test "events --follow sees a replica killed from outside and its replacement, then ends with diehard (exit 0); events alone prints the history" {
	start_run
	"$DIEHARD" events --control "$T/ctl" --follow >"$T/ev.out" 2>"$T/ev.err" &
	local follower=$!
	wait_until 10 grep -q 'spawn replica 2 ' "$T/ev.out" || fail "no spawn events:" "$(cat "$T/ev.out" "$T/ev.err")"
	local victim
	victim=$(status_json | jq -r '.replicas[1].pid')
	kill -KILL "$victim"
	wait_until 10 grep -q 'killed by signal 9' "$T/ev.out" ||
		fail "no kill event:" "$(cat "$T/ev.out" "$T/ev.err")"
	wait_until 10 grep -q 'spawn replica 3 .*replaces replica 1' "$T/ev.out" ||
		fail "no replacement event:" "$(cat "$T/ev.out")"
	grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z spawn replica 0 \(pid [0-9]+\) seed [0-9a-f]{32}$' \
		"$T/ev.out" || fail "events without a time:" "$(cat "$T/ev.out")"
	jq -e '.replacements == 1 and (.replicas | length) == 4' <(status_json) >/dev/null ||
		fail "status after the kill:" "$(status_json)"
	run "$DIEHARD" events --control "$T/ctl" --json
	[[ $status == 0 ]] || fail "events exited $status: $output"
	jq -se 'length >= 5 and all(.[]; (.seq | type) == "number" and .time > 1e9
		and (.kind == "event" or .kind == "warning") and (.text | length) > 0)
		and any(.[]; .text | test("killed by signal 9"))' <<<"$output" >/dev/null ||
		fail "events --json:" "$output"
	end_run
	await_exit "$follower" 10
	[[ $BG_RC == 0 ]] || fail "the follower exited $BG_RC" "$(cat "$T/ev.err")"
}

@test "garbage, an undecodable frame, an oversized length, a wrong version, two requests: each refused and closed; the run goes on with the right output" {
	start_run
	local out
	out=$(python3 "$T/raw.py" "$T/ctl" "$(printf 'garbage garbage garbage\n' | od -An -tx1 | tr -d ' \n')")
	[[ $out == *'longer than 65536 bytes'*closed ]] || fail "garbage: $out"
	out=$(python3 "$T/raw.py" "$T/ctl" 0000000affffffffffffffffffff)
	[[ $out == *'not a control request'*closed ]] || fail "undecodable: $out"
	out=$(python3 "$T/raw.py" "$T/ctl" 00010001)
	[[ $out == *'longer than 65536 bytes'*closed ]] || fail "oversized: $out"
	# version 2, status: field 1 = 2, field 2 = empty message.
	out=$(python3 "$T/raw.py" "$T/ctl" 0000000408021200)
	[[ $out == *'version 2 is not supported'*closed ]] || fail "version: $out"
	out=$(python3 "$T/raw.py" "$T/ctl" 00000004080112000000000408011200)
	[[ $out == *'one request per connection'*closed ]] || fail "two requests: $out"
	# A truncated frame, then the client goes away.
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"\0\0\0\x20abc")' "$T/ctl"
	proc_alive "$RUN_PID" || fail "diehard died"
	jq -e '.live == 3 and .replacements == 0' <(status_json) >/dev/null || fail "the run was disturbed: $(status_json)"
	end_run
}

@test "a follower that never reads is dropped once 512 KiB wait for it; the loop never blocks on it" {
	start_run -v
	python3 - "$CTL" >"$T/slow.out" <<-'PY'
		import socket, struct, sys, time
		path = sys.argv[1]
		f = socket.socket(socket.AF_UNIX)
		f.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
		f.connect(path)
		# version 1, events { follow: true }
		f.sendall(struct.pack(">I", 6) + bytes.fromhex("08011a020801"))
		# Each refused client is an event (about 80 bytes framed) for the follower.
		t0 = time.time()
		for i in range(12000):
		    c = socket.socket(socket.AF_UNIX)
		    c.settimeout(10)
		    c.connect(path)
		    c.sendall(b"\xff\xff\xff\xff")
		    assert c.recv(4096), "no answer: the loop is blocked"
		    c.close()
		print("spam %.1f s" % (time.time() - t0))
		f.settimeout(10)
		n = 0
		while True:
		    b = f.recv(1 << 20)
		    if not b:
		        break
		    n += len(b)
		print("follower got %d bytes, then the end" % n)
	PY
	grep -q 'then the end' "$T/slow.out" || fail "the follower was not dropped:" "$(cat "$T/slow.out")"
	# (-v prints what the events say; the ring has moved on since.)
	grep -q 'control: a client reads too slowly: dropped' "$T/run.err" ||
		fail "no event for the dropped follower" "$(tail -3 "$T/run.err")"
	jq -e '.live == 3 and .replacements == 0' <(status_json) >/dev/null || fail "the run was disturbed: $(status_json)"
	end_run
}

@test "another user cannot connect (0600), and is refused by its credentials when the mode lets it" {
	require_cmd setpriv
	[[ $(id -u) == 0 ]] || skip "needs root to run a client as another user"
	# A directory the other user can reach (the test's own is private).
	local d
	d=$(mktemp -d /tmp/diehard-control.XXXXXX)
	chmod 0755 "$d"
	CTL=$d/ctl
	start_run
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$DIEHARD" status --control "$CTL"
	[[ $status == 125 && $output == 'diehard status: cannot connect to '*'Permission denied' ]] ||
		fail "another user: $status $output"
	chmod 0666 "$CTL"
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$DIEHARD" status --control "$CTL"
	[[ $status == 125 && $output == *'permission denied: uid 65534'* ]] || fail "by credentials: $status $output"
	chmod 0600 "$CTL"
	jq -e '.live == 3' <(status_json) >/dev/null || fail "status after the refusals"
	end_run
	[[ ! -e $CTL ]] || fail "the socket is still there"
	rmdir "$d"
}

@test "a stale socket file is replaced; a live one and a regular file are refused with one line and 125" {
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$T/ctl"
	[[ -S $T/ctl ]]
	start_run
	jq -e '.k == 3' <(status_json) >/dev/null || fail "no status over the replaced socket"
	expect_error 125 'control socket .* is in use by another process' -k 3 --control "$T/ctl" -- true
	echo precious >"$T/file"
	expect_error 125 'control socket .*/file exists and is not a socket' -k 3 --control "$T/file" -- true
	[[ $(cat "$T/file") == precious ]] || fail "the file was changed"
	end_run
}

@test "the default socket is \$RUNTIME_DIRECTORY/control (its first entry); the clients find it there too" {
	mkdir -p "$T/rt" "$T/rt2"
	hold_input
	RUNTIME_DIRECTORY="$T/rt:$T/rt2" "$DIEHARD" -k 3 -- cat <"$T/in" >"$T/run.out" 2>"$T/run.err" &
	RUN_PID=$!
	wait_until 10 test -S "$T/rt/control" || fail "no socket at $T/rt/control" "$(cat "$T/run.err")"
	RUNTIME_DIRECTORY="$T/rt:$T/rt2" run "$DIEHARD" status --json
	[[ $status == 0 ]] && jq -e '.k == 3' <<<"$output" >/dev/null || fail "status: $output"
	end_run
	[[ ! -e $T/rt/control ]] || fail "the socket is still there"
}

@test "client errors: no socket, nothing listening, no path, a bad option: one line and 125; --help" {
	run "$DIEHARD" status --control "$T/nothing"
	[[ $status == 125 && $output == 'diehard status: cannot connect to '*'No such file or directory' ]] ||
		fail "$status $output"
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$T/stale"
	run "$DIEHARD" events --control "$T/stale"
	[[ $status == 125 && $output == 'diehard events: cannot connect to '*'Connection refused' ]] ||
		fail "$status $output"
	run env -u RUNTIME_DIRECTORY "$DIEHARD" status
	[[ $status == 125 && $output == 'diehard status: no control socket'* ]] || fail "$status $output"
	run "$DIEHARD" status --follow --control x
	[[ $status == 125 && $(wc -l <<<"$output") == 1 ]] || fail "$status $output"
	run "$DIEHARD" events --help
	[[ $status == 0 && $output == 'usage: diehard events'* ]] || fail "$status $output"
	run "$DIEHARD" status --help
	[[ $status == 0 && $output == 'usage: diehard status'* ]] || fail "$status $output"
}
