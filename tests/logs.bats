#!/usr/bin/env bats
# Append-only files voted as streams (docs/FILES.md, "Append-only files"):
# a file a replica opened with O_APPEND in its views is voted like stdout,
# and what a quorum appended reaches the real file once, while the run
# goes on. tests/scripts/points_writer.py (through tests/writer.bash) keeps
# its log open as a daemon does; lighttpd's access log is the real thing.

load helpers
load writer

setup() {
	writer_setup
}

# log_is FILE TEXT: FILE holds TEXT (waits 60 s at most: a stream appends
# at diehard's next tick after a quorum wrote).
log_is() {
	local i
	for ((i = 0; i < 3000; i++)); do
		[[ "$(cat "$1" 2>/dev/null)" == "$2" ]] && return 0
		sleep 0.02
	done
	fail "$1 holds '$(cat "$1" 2>&1)', not '$2'" "$(tail -20 "$T/run.err")"
}

# lines_are FILE N: FILE has N lines.
lines_are() {
	(($(grep -c '' "$1") == $2))
}

@test "a log kept open: each line reaches the real file once while the run goes on, after what it held; the end writes nothing more" {
	printf 'before\n' >"$T/w/app.log"
	start_writer -k 3 -v
	say "log app.log one" "logged app.log one"
	log_is "$T/w/app.log" $'before\none'
	say "log app.log two" "logged app.log two"
	log_is "$T/w/app.log" $'before\none\ntwo'
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(<"$T/w/app.log") == $'before\none\ntwo' ]] || fail "after the run: $(cat "$T/w/app.log")"
	validate_report "$T/r.json"
	jq -e '.files.logs == {streams: 1, bytes: 8, outvoted: 0, unsettled: 0} and .files.committed.written == 0' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c '.files | del(.committed.paths)' "$T/r.json")"
}

@test "an fsync of a log returns once its bytes are in the real file, a record with no newline too" {
	start_writer -k 3 -v
	say "log app.log one" "logged app.log one"
	# The stream opened at the tick after the first open: from here on,
	# the syncs are the stream's.
	log_is "$T/w/app.log" one
	say "logsync app.log rec1" "logsynced app.log rec1"
	[[ $(<"$T/w/app.log") == $'one\nrec1' ]] || fail "when the sync returned: '$(cat "$T/w/app.log")'" "$(tail "$T/run.err")"
	say "logsync app.log rec2" "logsynced app.log rec2"
	[[ $(<"$T/w/app.log") == $'one\nrec1rec2' ]] || fail "when the sync returned: '$(cat "$T/w/app.log")'"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	jq -e '.files.logs.bytes == 12 and (.files.points.committed // 0) == 0' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{logs: .files.logs, points: .files.points}' "$T/r.json")"
}

@test "a replica whose appended line differs leaves the stream, not killed: the quorum's line is appended, the end's vote outvotes it" {
	start_writer -k 3 -v
	say "log-odd app.log even" "logged app.log even"
	log_is "$T/w/app.log" even
	say "log app.log after" "logged app.log after"
	log_is "$T/w/app.log" $'even\nafter'
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(<"$T/w/app.log") == $'even\nafter' ]] || fail "after the run: $(cat "$T/w/app.log")"
	grep -q "replica [0-9]*'s appends to $T/w/app.log differ from a quorum's at byte 0: it leaves the stream" \
		"$T/run.err" || fail "$(cat "$T/run.err")"
	jq -e --arg f "$T/w/app.log" '.files.logs.outvoted == 1 and (.replacements | length) == 0
		and (.files.divergences | any(.path == $f))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{files: (.files | del(.committed.paths)), replacements}' "$T/r.json")"
}

@test "two replicas whose lines differ: no quorum, the stream stops (said) with what was agreed; the end has no majority (123)" {
	start_writer -k 2 -v
	say "log app.log one" "logged app.log one"
	log_is "$T/w/app.log" one
	say "log-odd app.log two" "logged app.log two"
	wait_until 60 grep -q "$T/w/app.log: no longer streamed after 4 bytes: the replicas' appends differ, no quorum" \
		"$T/run.err" || fail "$(cat "$T/run.err")"
	[[ $(<"$T/w/app.log") == one ]] || fail "while it runs: $(cat "$T/w/app.log")"
	finish
	[[ $BG_RC == 123 ]] || fail "exit $BG_RC, not 123" "$(tail "$T/run.err")"
	[[ $(<"$T/w/app.log") == one ]] || fail "after the run: $(cat "$T/w/app.log")"
}

@test "a replica killed mid-way: its replacement's lines are compared with the real file's and it votes again; no line twice" {
	start_writer -k 3 -v
	local i victim
	for i in 1 2 3; do say "log app.log line$i" "logged app.log line$i"; done
	log_is "$T/w/app.log" $'line1\nline2\nline3'
	victim=$(writer_pids | head -n 1)
	[[ -n $victim ]] || fail "no replica to kill"
	kill -KILL "$victim"
	for i in 4 5 6; do say "log app.log line$i" "logged app.log line$i"; done
	log_is "$T/w/app.log" "$(printf 'line%s\n' 1 2 3 4 5 6 | head -c -1)"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(<"$T/w/app.log") == "$(printf 'line%s\n' 1 2 3 4 5 6 | head -c -1)" ]] || fail "after: $(cat "$T/w/app.log")"
	jq -e '.files.logs.outvoted == 0 and .files.logs.unsettled == 0 and (.replacements | length) >= 1' "$T/r.json" \
		>/dev/null || fail "report: $(jq -c '{logs: .files.logs, replacements}' "$T/r.json")" "$(grep -E "streamed|appends|kill" "$T/run.err")"
	grep -q "replica 3 appends to $T/w/app.log" "$T/run.err" || fail "the replacement never joined: $(cat "$T/run.err")"
}

@test "a shell's >> in a run to completion: each line once, read back by the program from its own view" {
	cd "$T/w"
	capture "$T/run" sup -k 3 sh -c 'echo one >> out.log; echo two >> out.log; cat out.log'
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == $'one\ntwo' && $(<"$T/w/out.log") == $'one\ntwo' ]] ||
		fail "out: $(cat "$T/run.out"); file: $(cat "$T/w/out.log")"
}

@test "lighttpd's access log in its view: one line per request in the real log while it serves, and after SIGTERM" {
	require_cmd lighttpd curl
	local port i n=40
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$T/w/www" "$T/w/logs"
	echo hello >"$T/w/www/index.html"
	cat >"$T/w/lt.conf" <<-EOF
		server.document-root = "$T/w/www"
		server.bind = "127.0.0.1"
		server.port = $port
		server.modules += ( "mod_accesslog" )
		accesslog.filename = "$T/w/logs/access.log"
		accesslog.format = "%h %r %>s %b"
		server.errorlog = "$T/shared/error.log"
	EOF
	: >"$T/w/logs/access.log"
	(cd "$T/w" && exec timeout 200 "$DIEHARD" -k 3 -v --share "$T/shared" -r "$T/r.json" -- lighttpd -D -f "$T/w/lt.conf" \
		>"$T/run.out" 2>"$T/run.err") &
	DH=$!
	wait_until 60 eval "curl -sf -o /dev/null http://127.0.0.1:$port/index.html" ||
		fail "lighttpd did not serve" "$(tail "$T/run.err")"
	for ((i = 1; i < n; i++)); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/index.html?$i" || fail "request $i"
	done
	wait_until 60 lines_are "$T/w/logs/access.log" "$n" ||
		fail "the real access log has $(grep -c '' "$T/w/logs/access.log") lines for $n requests while lighttpd runs" \
			"$(sort "$T/w/logs/access.log" | uniq -c | sort -rn | head -3)" "$(tail "$T/run.err")"
	kill -TERM "$DH"
	await_exit "$DH" 60 || fail "diehard did not end after SIGTERM"
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	(($(grep -c '' "$T/w/logs/access.log") == n)) || fail "after the stop: $(grep -c '' "$T/w/logs/access.log") lines"
	(($(sort -u "$T/w/logs/access.log" | grep -c '') == n)) || fail "a line twice: $(sort "$T/w/logs/access.log" | uniq -d)"
	jq -e '.files.logs.streams >= 1 and .files.logs.unsettled == 0' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.files.logs' "$T/r.json")"
}

@test "nginx's access log in its view (the master opens it, a worker writes): one line per request in the real log while it serves, and after SIGTERM; its pid file holds diehard's pid, which signals reach" {
	require_cmd nginx curl
	local port i n=40
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$T/w/www"
	echo hello >"$T/w/www/index.html"
	nginx_conf "$T/w" "$port" "$T/w/www" 1 "$T/shared/error.log notice" '$remote_addr "$request" $status $body_bytes_sent'
	(cd "$T/w" && exec timeout 200 "$DIEHARD" -k 3 -v --share "$T/shared" -r "$T/r.json" -- nginx -c "$T/w/nginx.conf" \
		>"$T/run.out" 2>"$T/run.err") &
	DH=$!
	wait_until 60 eval "curl -sf -o /dev/null http://127.0.0.1:$port/index.html" ||
		fail "nginx did not serve" "$(tail "$T/run.err")" "$(cat "$T/shared/error.log" 2>/dev/null)"
	# Its pid file holds diehard's pid (docs/FILES.md, "Pid files"), whose
	# signals reach every replica: USR1 makes nginx reopen its logs.
	local dh_pid
	dh_pid=$(pgrep -P "$DH" -x diehard)
	wait_until 60 eval '[[ $(cat "$T/w/nginx.pid" 2>/dev/null) == "$dh_pid" ]]' ||
		fail "nginx.pid holds '$(cat "$T/w/nginx.pid" 2>&1)', not diehard's pid $dh_pid" "$(grep -i pid "$T/run.err")"
	kill -USR1 "$(cat "$T/w/nginx.pid")"
	wait_until 60 grep -q "reopening logs" "$T/shared/error.log" || fail "USR1 through the pid file did not reach nginx"
	for ((i = 1; i < n; i++)); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/index.html?$i" || fail "request $i"
	done
	wait_until 60 lines_are "$T/w/logs/access.log" "$n" ||
		fail "the real access log has $(grep -c '' "$T/w/logs/access.log" 2>/dev/null) lines for $n requests while nginx runs" \
			"$(grep -E 'stream|append' "$T/run.err")"
	kill -TERM "$DH"
	await_exit "$DH" 60 || fail "diehard did not end after SIGTERM"
	(($(grep -c '' "$T/w/logs/access.log") == n)) || fail "after the stop: $(grep -c '' "$T/w/logs/access.log") lines"
	(($(sort -u "$T/w/logs/access.log" | grep -c '') == n)) || fail "a line twice: $(sort "$T/w/logs/access.log" | uniq -d)"
	jq -e '.files.logs.streams >= 1 and .files.logs.unsettled == 0 and .files.pid_files == 1' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{logs: .files.logs, pid_files: .files.pid_files}' "$T/r.json")" "$(grep -E 'stream' "$T/run.err")"
	# nginx removes its pid file as it exits: so does the end's commit.
	[[ ! -e $T/w/nginx.pid ]] || fail "nginx.pid left: $(cat "$T/w/nginx.pid")"
}
