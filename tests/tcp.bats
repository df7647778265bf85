#!/usr/bin/env bats
# TCP servers as voted replicas (issue 12): `diehard -k 3 -- SERVER ARGS`
# runs an unmodified daemon as three replicas, each binding its configured
# port in a network namespace of its own; diehard listens on the same address
# for real, proxies every client connection to every replica, votes on their
# reply streams and writes only agreed bytes to the client. A replica whose
# replies differ, or that stops answering, is killed and replaced by one that
# replays the connection log.
#
# Real daemons (lighttpd, also socket-activated; python3 -m http.server;
# redis-server) are driven by real clients (curl, wget, ab, redis-cli); our
# own line_server and buggy_server (tests/progs/line_server.c, buggy_server.c)
# with tests/tools/lineclient.py cover state across connections, large
# replies, clients that misbehave, 1000 connections at once, a planted heap
# bug, a replica that stops reading, and an outbound connection (made once);
# tests/tools/thread_clock_server.py (each reply its thread's clock, to the
# nanosecond) covers replicas that fall behind, listen late or never.
#
# Every server gets a port nothing listens on, and every wait is bounded.
# teardown kills whatever a test started and fails the test if a server
# process outlives diehard or its port is still listened on.

load helpers

LINECLIENT="$ROOT/tests/tools/lineclient.py"

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	BG=()    # background pids: diehard, plain servers, listeners
	LEFT=()  # pgrep -f patterns: server processes that must be gone at the end
	PORTS=() # ports that must be free at the end
}

teardown() {
	local pid pat p bad=()
	for pid in "${BG[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for pid in "${BG[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	for pat in "${LEFT[@]}"; do
		wait_until 5 no_process "$pat" || bad+=("processes left over ($pat):" "$(pgrep -af "$pat")")
		pkill -KILL -f "$pat" 2>/dev/null || true
	done
	for p in "${PORTS[@]}"; do
		wait_until 5 port_free "$p" || bad+=("port $p is still listened on:" "$(ss -Htlnp "sport = :$p")")
	done
	((${#bad[@]} == 0)) || fail "${bad[@]}"
}

# ---- helpers -----------------------------------------------------------------


no_process() {
	! pgrep -f "$1" >/dev/null
}

port_free() {
	[[ -z $(ss -Htln "sport = :$1") ]]
}

# background NAME CMD...: CMD in the background (stdin /dev/null, out to $T/NAME.out,
# err to $T/NAME.err, Bats' fd 3 closed); its pid in BG_PID, killed in teardown.
background() {
	local name=$1
	shift
	"$@" </dev/null >"$T/$name.out" 2>"$T/$name.err" 3>&- &
	BG_PID=$!
	BG+=("$BG_PID")
}

# dh NAME DIEHARD-ARGS...: diehard in the background, with -v and a report
# ($T/NAME.json); its pid in DH.
dh() {
	local name=$1
	shift
	background "$name" "$DIEHARD" ${DH_SHARE-"--share" "$T"} -v --report "$T/$name.json" "$@"
	DH=$BG_PID
}

# wait_port PORT PID [SECONDS]: PORT on 127.0.0.1 accepts a connection, within
# SECONDS (20); fails at once if PID (the server) exits first.
wait_port() {
	local port=$1 pid=$2 tries=$((${3:-20} * 20))
	PORTS+=("$port")
	while ! timeout 2 bash -c ": <>/dev/tcp/127.0.0.1/$port" 2>/dev/null; do
		proc_alive "$pid" || fail "the server (pid $pid) exited before it listened on $port"
		((tries-- > 0)) || fail "nothing listens on $port after ${3:-20} s"
		sleep 0.05
	done
}

# stop_dh PID NAME EXPECTED-STATUS: SIGTERM to diehard, which forwards it; it
# must exit within 15 s with EXPECTED-STATUS (0 when the server exits 0 on
# SIGTERM; 143 when it dies of it, as diehard then does too).
stop_dh() {
	kill -TERM "$1"
	await_exit "$1" 15 || fail "diehard did not end after SIGTERM" "$(tail -n 20 "$T/$2.err")"
	[[ $BG_RC == "$3" ]] || fail "diehard exited with $BG_RC after SIGTERM, expected $3" "$(tail -n 20 "$T/$2.err")"
}

# clean_report NAME: the run's report shows no divergence and no replica killed.
clean_report() {
	jq -e '(.divergences | length) == 0 and ([.replicas[] | select(.killed != null)] | length) == 0
	       and (.replacements | length) == 0' "$T/$1.json" >/dev/null ||
		fail "the report of $1 shows divergences or kills:" \
			"$(jq -c '{divergences, replicas: [.replicas[] | {index, killed}], replacements: [.replacements[] | .why]}' "$T/$1.json")" \
			"$(grep '^diehard:' "$T/$1.err" | tail -n 20)"
}

# diag TEXT: a note in the TAP output (prove -v shows it).
diag() {
	printf '# %s\n' "$@" >&3
}

lc() {
	timeout 120 python3 "$LINECLIENT" "$@"
}

# line_server_dh NAME PORT [DIEHARD-ARGS...]: diehard -k 3 line_server PORT in
# the background (as dh NAME), waited for.
line_server_dh() {
	local name=$1 port=$2
	shift 2
	dh "$name" -k 3 "$@" -- "$PROGS/line_server" "$port"
	LEFT+=("line_server .*$port\$")
	wait_port "$port" "$DH"
}

# lighttpd_conf FILE PORT [EXTRA]: a configuration serving $T/www on 127.0.0.1:PORT.
lighttpd_conf() {
	cat >"$1" <<-EOF
		# tests/tcp.bats: $T
		server.document-root = "$T/www"
		server.bind = "127.0.0.1"
		server.port = $2
		server.tag = "lighttpd"
		# Its start and stop lines carry the time to the second; the stop
		# line's second is read when SIGTERM arrives, which is not the
		# same moment in every replica (docs/NETWORK.md, clocks): the
		# error log goes to a file of the test, not to the vote.
		server.errorlog = "$T/error.log"
		mimetype.assign = ( ".html" => "text/html", "" => "application/octet-stream" )
		$3
	EOF
}

# served_by_all K N: lighttpd's access log ($T/access.log, shared by the
# replicas, written at the latest when they stop) has each of N requests
# K times: every replica served every request.
served_by_all() {
	local lines
	lines=$(grep -c '' "$T/access.log" 2>/dev/null || true)
	((lines == $1 * $2)) || fail "the access log has ${lines:-no} lines for $2 requests, expected $1 × $2:" \
		"$(sort "$T/access.log" 2>/dev/null | uniq -c | sort -rn | head -n 5)"
}

# date_splits_only NAME HEADERS...: NAME's report has divergences, every
# one a connection's reply whose first differing byte lies in the Date
# line of one of the HEADERS files (plain lighttpd's reply headers, each
# request on a connection of its own, so the offset is the header's).
date_splits_only() {
	local name=$1
	shift
	python3 - "$T/$name.json" "$@" <<-'EOF'
		import json, sys
		ranges = []
		for h in sys.argv[2:]:
		    head = open(h, "rb").read()
		    at = head.find(b"\r\nDate: ")
		    if at >= 0:
		        ranges.append((at + 2, head.index(b"\r\n", at + 2)))
		divs = json.load(open(sys.argv[1]))["divergences"]
		ok = divs and ranges and all(
		    d.get("stream") == "connection" and any(a <= d["offset"] < b for a, b in ranges) for d in divs)
		sys.exit(0 if ok else 1)
	EOF
}

make_docroot() {
	mkdir -p "$T/www"
	printf '<h1>hello from %s</h1>\n' "diehard" >"$T/www/small.html"
	head -c 1048576 /dev/urandom >"$T/www/big.bin"
}

# ---- real servers ------------------------------------------------------------

@test "lighttpd: curl and wget through diehard -k 3 get what plain lighttpd serves; ab -n 1000 -c 10 without a failure or a divergence; SIGTERM ends it cleanly" {
	require_cmd lighttpd curl wget ab
	make_docroot
	local p1 p2
	p1=$(free_port)
	p2=$(free_port)
	lighttpd_conf "$T/plain.conf" "$p1"
	# Every replica logs to the same file: each request three times.
	lighttpd_conf "$T/dh.conf" "$p2" "server.modules += ( \"mod_accesslog\" )
		accesslog.filename = \"$T/access.log\""
	LEFT+=("lighttpd -D -f $T/")
	background plain lighttpd -D -f "$T/plain.conf"
	wait_port "$p1" "$BG_PID"
	dh lt -k 3 -- lighttpd -D -f "$T/dh.conf"
	wait_port "$p2" "$DH"
	local f
	for f in small.html big.bin; do
		curl -sS -m 20 -D "$T/plain.$f.h" -o "$T/plain.$f" "http://127.0.0.1:$p1/$f" || fail "plain curl $f"
		curl -sS -m 20 -D "$T/dh.$f.h" -o "$T/dh.$f" "http://127.0.0.1:$p2/$f" ||
			fail "curl $f through diehard failed" "$(tail -n 20 "$T/lt.err")"
		same_bytes "$T/www/$f" "$T/plain.$f" "$f from plain lighttpd"
		same_bytes "$T/plain.$f" "$T/dh.$f" "$f through diehard -k 3, against plain lighttpd"
		# The headers too, but the Date (a second apart, or not).
		same_bytes <(grep -v '^Date:' "$T/plain.$f.h") <(grep -v '^Date:' "$T/dh.$f.h") "the headers of $f"
	done
	wget -q -T 20 -O "$T/wget.big" "http://127.0.0.1:$p2/big.bin" || fail "wget through diehard failed"
	same_bytes "$T/www/big.bin" "$T/wget.big" "big.bin through diehard by wget"
	curl -sS -m 20 -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$p2/missing" >"$T/code"
	[[ $(<"$T/code") == 404 ]] || fail "a missing page through diehard: HTTP $(cat "$T/code")"

	timeout 120 ab -q -n 1000 -c 10 "http://127.0.0.1:$p2/small.html" >"$T/ab.out" 2>&1 ||
		fail "ab failed" "$(tail -n 30 "$T/ab.out")" "$(tail -n 20 "$T/lt.err")"
	grep -q '^Complete requests: *1000$' "$T/ab.out" && grep -q '^Failed requests: *0$' "$T/ab.out" &&
		! grep -q '^Non-2xx responses' "$T/ab.out" || fail "ab through diehard:" "$(cat "$T/ab.out")"
	diag "lighttpd through diehard -k 3, ab -n 1000 -c 10: $(awk '/^Requests per second/ { print $4 }' "$T/ab.out") requests/s"
	timeout 120 ab -q -n 30 -c 3 "http://127.0.0.1:$p2/big.bin" >"$T/ab2.out" 2>&1 || fail "ab of big.bin failed" "$(cat "$T/ab2.out")"
	grep -q '^Failed requests: *0$' "$T/ab2.out" || fail "ab of big.bin through diehard:" "$(cat "$T/ab2.out")"

	# lighttpd exits 0 on SIGTERM, and so does diehard then.
	stop_dh "$DH" lt 0
	if date_splits_only lt "$T"/plain.*.h; then
		# What diehard cannot fix yet (docs/NETWORK.md, "Clocks per
		# connection"): a request in flight as the second turns. The
		# clients got the majority's replies (above); the odd replica
		# was replaced, so the log and the count at the end differ.
		diag "lighttpd: $(jq '.divergences | length' "$T/lt.json") reply(ies) outvoted on their Date header only"
		return 0
	fi
	clean_report lt
	served_by_all 3 $((4 + 1000 + 30))
	jq -e '.exit_code == 0 and .live_at_end == 3' "$T/lt.json" >/dev/null ||
		fail "report: $(jq -c '{exit_code, live_at_end}' "$T/lt.json")"
}

@test "lighttpd's Date agrees in every replica across second turns, sparse requests and a replacement's first ones included; the replacement then reads its clocks in its own process" {
	# lighttpd answers with the time it read at the top of its event loop;
	# a replica that got the request in the same iteration as the accept
	# and one that got it an iteration later disagreed on the Date at a
	# turn of the second, and a replacement answered with a time replayed
	# from the past (docs/NETWORK.md, clocks): 17 divergences in 40 such
	# requests before. Requests 0.11 s apart cross a turn every ninth.
	require_cmd lighttpd curl
	make_docroot
	local port
	port=$(free_port)
	lighttpd_conf "$T/dh.conf" "$port"
	LEFT+=("lighttpd -D -f $T/")
	dh dt -k 3 -- lighttpd -D -f "$T/dh.conf"
	wait_port "$port" "$DH"
	local i pids
	for i in $(seq 60); do
		if ((i == 20)); then
			# A replica dies: its replacement replays the 19 connections
			# (and the clocks of their time), then serves.
			pids=($(pgrep -f "^lighttpd -D -f $T/dh.conf"))
			((${#pids[@]} == 3)) || fail "expected 3 lighttpd replicas, found: ${pids[*]}"
			kill -KILL "${pids[1]}"
		fi
		curl -sS -m 20 -D "$T/h.$i" -o "$T/got" "http://127.0.0.1:$port/small.html" ||
			fail "curl $i through diehard failed" "$(tail -n 20 "$T/dt.err")"
		same_bytes "$T/www/small.html" "$T/got" "small.html, request $i"
		sleep 0.11
	done
	wait_until 10 grep -q 'replica 3 read the time of now' "$T/dt.err" ||
		fail "the replacement never served live requests" "$(grep '^diehard:' "$T/dt.err" | tail -n 20)"
	# From then on it reads its clocks in its own process, in the lanes
	# its siblings' loops read (before, every read asked diehard for the
	# rest of the run, and the server went at that replica's pace).
	wait_until 10 grep -q 'replica 3 reads its clocks in its own process again' "$T/dt.err" ||
		fail "the replacement's clock reads stayed with diehard" "$(grep '^diehard:' "$T/dt.err" | tail -n 20)"
	curl -sS -m 20 -o "$T/got" "http://127.0.0.1:$port/small.html" || fail "curl through diehard failed"
	wait_until 10 grep -q "replica 3: its event loop's thread [0-9]* reads its wall clocks in lane" "$T/dt.err" ||
		fail "the replacement's loop was not given its siblings' lane" "$(grep '^diehard:' "$T/dt.err" | tail -n 20)"
	# Requests after it was let in reached it too, across three turns of
	# the second.
	for i in $(seq 61 90); do
		curl -sS -m 20 -o "$T/got" "http://127.0.0.1:$port/small.html" || fail "curl $i through diehard failed"
		sleep 0.11
	done
	stop_dh "$DH" dt 0
	local dates
	dates=$(cat "$T"/h.* | grep -c '^Date:')
	((dates == 60)) || fail "$dates Date headers in 60 replies"
	# The replica killed from outside is reported (its status 137), nothing else.
	jq -e '([.divergences[] | select(.stream != "status" or .status != 137)] | length) == 0
	       and (.replacements | length) == 1' "$T/dt.json" >/dev/null ||
		fail "divergences or replacements other than the one caused:" \
			"$(jq -c '{divergences, replacements: [.replacements[] | .why]}' "$T/dt.json")"
	jq -e '[.replicas[] | select(.index == 3) | .status] == [0]' "$T/dt.json" >/dev/null ||
		fail "the replacement did not run to the end with the others" "$(jq -c '.replicas' "$T/dt.json")"
}

@test "a reply's lagging replica left alone (the two that agreed SIGKILLed from outside before it answered): taken at its word, the connection goes on, replacements join it later; diehard neither crashes nor kills it" {
	# From a hostile review: the lagger's bytes were compared against a
	# replacement that had joined since (its buffer starts at the
	# committed offset): a read before that buffer, SIGSEGV or a correct
	# replica killed as 'differs'; with no replacement yet, the next
	# request hung until the lagger was killed as a straggler.
	local port a b c
	port=$(free_port)
	line_server_dh lag "$port"
	a=$(replica_program lag 0) && b=$(replica_program lag 1) && c=$(replica_program lag 2) ||
		fail "the replicas' programs not found" "$(tail -n 20 "$T/lag.err")"
	timeout 120 python3 - "$port" "$a" "$b" "$c" "$T/lag.err" <<-'PY' || fail "the client's conversation failed" "$(grep '^diehard:' "$T/lag.err" | tail -n 20)"
		import os, signal, socket, sys, time
		port, a, b, c, err = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
		s = socket.create_connection(("127.0.0.1", port))
		s.settimeout(60)
		f = s.makefile("rb")
		def ask(m):
		    s.sendall(m + b"\n")
		    return f.readline()
		assert ask(b"ECHO a") == b"a\n"
		os.kill(c, signal.SIGSTOP)
		# Answered by a and b (after --idle): c is behind it.
		assert ask(b"ECHO b") == b"b\n"
		for p in (a, b):
		    os.kill(p, signal.SIGKILL)
		for i in range(1200):
		    if open(err).read().count("killed by a SIGKILL from outside") >= 2:
		        break
		    time.sleep(0.05)
		else:
		    sys.exit("diehard never saw the two die")
		os.kill(c, signal.SIGCONT)
		got = ask(b"ECHO c")
		assert got == b"c\n", got
		PY
	grep -q 'replica 2, the one left, is taken at its word' "$T/lag.err" ||
		fail "the lagger was not taken at its word" "$(grep '^diehard:' "$T/lag.err" | tail -n 20)"
	! grep -q 'differs\|straggler' "$T/lag.err" ||
		fail "a replica was killed" "$(grep '^diehard:' "$T/lag.err" | tail -n 20)"
	proc_alive "$DH" || fail "diehard died" "$(tail -n 20 "$T/lag.err")"
	stop_dh "$DH" lag 143
}

@test "a server that speaks first (an SMTP banner) is detected: its first client waits for the defer period once, the next ones get the banner at once" {
	python3 -W ignore -c 'import smtpd' 2>/dev/null || skip "python3 has no smtpd module"
	local port
	port=$(free_port)
	LEFT+=("smtpd -n -c DebuggingServer 127.0.0.1:$port")
	dh smtp -k 3 -- python3 -W ignore -m smtpd -n -c DebuggingServer "127.0.0.1:$port"
	wait_port "$port" "$DH"
	# The client waits for the banner before it says anything.
	timeout 60 python3 - "$port" >"$T/banners" 2>&1 <<-'EOF' || fail "SMTP clients:" "$(cat "$T/banners")"
		import socket, sys, time
		for i in range(3):
		    t = time.monotonic()
		    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
		    banner = s.recv(200)
		    waited = time.monotonic() - t
		    s.sendall(b"QUIT\r\n")
		    bye = s.recv(200)
		    s.close()
		    print("%.3f %s %s" % (waited, banner.split()[0].decode(), bye.split()[0].decode()))
	EOF
	diag "SMTP banner waits: $(awk '{ print $1 }' "$T/banners" | tr '\n' ' ')"
	[[ $(awk '{ print $2 $3 }' "$T/banners" | sort -u) == 220221 ]] || fail "banners and replies:" "$(cat "$T/banners")"
	grep -q "the server on 127.0.0.1:$port speaks first" "$T/smtp.err" ||
		fail "the server was not found to speak first" "$(grep '^diehard:' "$T/smtp.err")"
	# Deferral is off from the first connection on: the later banners do
	# not wait for the kernel's second.
	awk 'NR > 1 && $1 >= 0.9 { bad = 1 } END { exit bad }' "$T/banners" ||
		fail "a later client still waited for the defer period:" "$(cat "$T/banners")"
	# smtpd dies of SIGTERM.
	stop_dh "$DH" smtp 143
	clean_report smtp
}

@test "lighttpd with its own socket activation: systemd-socket-activate hands diehard the socket, curl gets the files" {
	require_cmd lighttpd curl systemd-socket-activate
	make_docroot
	local port
	port=$(free_port)
	lighttpd_conf "$T/sa.conf" "$port" "server.systemd-socket-activation = \"enable\"
		server.modules += ( \"mod_accesslog\" )
		accesslog.filename = \"$T/access.log\""
	LEFT+=("lighttpd -D -f $T/")
	PORTS+=("$port")
	# Without --inetd: one diehard (Accept=no), started at the first connection.
	background ssa systemd-socket-activate -l "127.0.0.1:$port" "$DIEHARD" --share "$T" -v -k 3 --report "$T/ssa.json" -- \
		lighttpd -D -f "$T/sa.conf"
	local ssa=$BG_PID
	wait_until 10 grep -qs Listening "$T/ssa.err" || fail "systemd-socket-activate did not start" "$(cat "$T/ssa.err")"
	local f i
	for i in 1 2; do
		for f in small.html big.bin; do
			curl -sS -m 30 -o "$T/got.$f" "http://127.0.0.1:$port/$f" ||
				fail "curl $f (round $i) failed" "$(tail -n 20 "$T/ssa.err")"
			same_bytes "$T/www/$f" "$T/got.$f" "$f through socket-activated diehard (round $i)"
		done
	done
	grep -q 'Execing' "$T/ssa.err" || fail "systemd-socket-activate did not start diehard" "$(cat "$T/ssa.err")"
	stop_dh "$ssa" ssa 0
	clean_report ssa
	# Served by every replica, through the proxy: not by whichever replica
	# took the connection off a socket they all share (diehard's Accept=no
	# without private networks).
	served_by_all 3 4
}

@test "python3 -m http.server (threaded) through diehard -k 3: 100 curl fetches and 200 ab requests get the file; its request log passes, divergences reported" {
	require_cmd curl ab
	mkdir -p "$T/www" "$T/got"
	head -c 20000 /dev/urandom | base64 >"$T/www/page.txt"
	local port
	port=$(free_port)
	LEFT+=("http.server $port")
	dh py -k 3 -- python3 -m http.server "$port" --bind 127.0.0.1 --directory "$T/www"
	wait_port "$port" "$DH" 30
	# One curl, 100 transfers; http.server speaks HTTP/1.0: a connection each.
	local args=() i
	for ((i = 0; i < 100; i++)); do
		args+=(-o "$T/got/$i" "http://127.0.0.1:$port/page.txt")
	done
	timeout 120 curl -sS -m 20 "${args[@]}" || fail "curl through diehard failed" "$(tail -n 20 "$T/py.err")"
	for ((i = 0; i < 100; i++)); do
		same_bytes "$T/www/page.txt" "$T/got/$i" "fetch $i of page.txt through diehard"
	done
	# One request at a time (each on a thread of its own in every replica):
	# with several at once the replicas' threads would log in orders of
	# their own, and the log is voted like the replies.
	timeout 120 ab -q -n 200 -c 1 "http://127.0.0.1:$port/page.txt" >"$T/ab.out" 2>&1 || fail "ab failed" "$(cat "$T/ab.out")"
	grep -q '^Complete requests: *200$' "$T/ab.out" && grep -q '^Failed requests: *0$' "$T/ab.out" ||
		fail "ab through diehard:" "$(cat "$T/ab.out")"
	# python dies of SIGTERM: so does diehard.
	stop_dh "$DH" py 143
	# Each request is logged on stderr with a timestamp: voted like the
	# replies. Whether the replicas' logs agreed (the clock is virtualized;
	# the threads' order is not) is reported, not required.
	local div
	div=$(jq -r '[.divergences[] | .stream] | group_by(.) | map("\(.[0]): \(length)") | join(", ")' "$T/py.json")
	diag "python3 -m http.server: divergences by stream: ${div:-none}; replacements: $(jq '.replacements | length' "$T/py.json")"
	grep -q 'GET /page.txt' "$T/py.err" || fail "the request log did not pass through diehard:" "$(tail -n 5 "$T/py.err")"
}

# clock_ask PORT: one request to thread_clock_server.py; its reply (a time in
# nanoseconds) on stdout. Fails when there is none within 20 s.
clock_ask() {
	local got
	got=$(timeout 20 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo hi >&3 && read -r line <&3 && echo "$line"' _ "$1") || true
	[[ $got =~ ^[0-9]{19}$ ]] || return 1
	echo "$got"
}

# replica_program NAME ID: the pid of replica ID's program, from $T/NAME.err
# (diehard -v names each replica's pid as it spawns it): the child of its
# init (diehard-init), or the pid itself unsandboxed; while the pid is still
# diehard's fork, not yet either, it waits (up to 10 s).
replica_program() {
	local pid comm child tries=1000
	while ((tries-- > 0)); do
		pid=$(sed -n "s/^diehard: spawn replica $2 (pid \([0-9]*\)).*/\1/p" "$T/$1.err")
		comm=$(cat "/proc/${pid:-0}/comm" 2>/dev/null) || comm=
		if [[ $comm == diehard-init ]]; then
			child=$(pgrep -P "$pid" | head -n 1)
			[[ -n $child ]] && echo "$child" && return 0
		elif [[ -n $comm && $comm != diehard ]]; then
			echo "$pid"
			return 0
		fi
		sleep 0.01
	done
	return 1
}

# no_conns_in PID PORT: the network namespace of process PID has no connection
# to local port PORT open or waiting to be accepted (established, half-open,
# closing on the peer's side): it has answered every one.
no_conns_in() {
	local hex
	hex=$(printf '%04X' "$2")
	! awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p && ($4 == "01" || $4 == "03" || $4 == "08") { found = 1 }
		END { exit !found }' "/proc/$1/net/tcp" "/proc/$1/net/tcp6" 2>/dev/null
}

# queued_on PORT: a client waits in the backlog of what listens on PORT here.
queued_on() {
	local q
	q=$(ss -Htln "sport = :$1" | awk '{ print $2; exit }')
	[[ -n $q ]] && ((q >= 1))
}

# no_clock_mispairing NAME: diehard's report says nobody diverged (in replies or
# calls: the calls of replicas that end on SIGTERM, threads found
# mid-request, are not counted) and nobody was replaced.
no_clock_mispairing() {
	jq -e '.divergences == [] and .call_divergences == [] and .replacements == [] and all(.replicas[]; .killed == null)' \
		"$T/$1.json" >/dev/null ||
		fail "a replica's replies differed:" \
			"$(jq -c '{divergences, call_divergences, replacements: [.replacements[] | .why]}' "$T/$1.json")" \
			"$(grep '^diehard: \(kill\|divergence\)' "$T/$1.err")"
}

# stopped_before_listen NAME PORT DIEHARD-ARGS...: thread_clock_server.py on
# PORT under diehard (dh NAME DIEHARD-ARGS), replica 2's program stopped
# (SIGSTOP) before it listens; returns once diehard listens for the other
# two. The program's pid in VICTIM. Skips the test when replica 2 listened
# before it could be stopped.
stopped_before_listen() {
	local name=$1 port=$2
	shift 2
	LEFT+=("thread_clock_server.py $port")
	PORTS+=("$port")
	dh "$name" "$@" -- python3 "$ROOT/tests/tools/thread_clock_server.py" "$port"
	VICTIM=$(replica_program "$name" 2) || fail "replica 2's program not found"
	kill -STOP "$VICTIM"
	wait_until 30 grep -q "^diehard: listening on 127.0.0.1:$port for the replicas" "$T/$name.err" ||
		{ kill -CONT "$VICTIM"; fail "diehard did not listen for replicas 0 and 1" "$(cat "$T/$name.err")"; }
	if grep -q '^diehard: replica 2 listens' "$T/$name.err"; then
		kill -CONT "$VICTIM"
		skip "replica 2 listened before the test could stop it"
	fi
}

@test "a threaded server's replica that falls behind by more connections than its backlog takes them in its siblings' order: its threads' clocks pair with theirs" {
	local port
	port=$(free_port)
	LEFT+=("thread_clock_server.py $port")
	dh lag -k 3 -- python3 "$ROOT/tests/tools/thread_clock_server.py" "$port"
	wait_port "$port" "$DH" 30
	clock_ask "$port" >/dev/null || fail "no reply" "$(tail -n 5 "$T/lag.err")"
	local victim
	victim=$(replica_program lag 0) || fail "replica 0's program not found"
	# Stopped, it falls 8 connections behind (its server's backlog is 1);
	# the other two answer meanwhile.
	kill -STOP "$victim"
	local i t0=$EPOCHREALTIME
	for ((i = 0; i < 8; i++)); do
		clock_ask "$port" >/dev/null || { kill -CONT "$victim"; fail "request $i while a replica is stopped: no reply" "$(tail -n 5 "$T/lag.err")"; }
	done
	local ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	kill -CONT "$victim"
	# A thread's clock read that trails its siblings' by more than a second
	# reads the clock anew (take.c): a stop that long tests that, not order.
	((ms < 800)) || skip "the replica was stopped ${ms} ms (the machine is loaded): over the 1 s a thread's read may trail"
	# It answers the 8: compared with what its siblings answered, to the
	# nanosecond.
	wait_until 20 no_conns_in "$victim" "$port" || fail "the stopped replica did not answer its connections"
	for ((i = 0; i < 5; i++)); do
		clock_ask "$port" >/dev/null || fail "request $i after the replica caught up: no reply"
	done
	stop_dh "$DH" lag 143
	no_clock_mispairing lag
}

@test "a threaded server's replica that listens after its siblings gets their first connections too: diehard accepts once every replica listens" {
	local port
	port=$(free_port)
	stopped_before_listen slow "$port" -k 3
	# The first client connects (diehard listens: a quorum does) and waits
	# in the backlog until the slow replica listens too.
	clock_ask "$port" >"$T/first" &
	local first=$!
	wait_until 20 queued_on "$port" || { kill -CONT "$VICTIM"; fail "the first client is not waiting in diehard's backlog"; }
	kill -CONT "$VICTIM"
	wait "$first" || fail "the first request got no reply" "$(tail -n 5 "$T/slow.err")"
	grep -q '^diehard: connection 1 on .*: 3 replicas$' "$T/slow.err" ||
		fail "the first connection did not reach every replica:" "$(grep '^diehard: connection 1 ' "$T/slow.err")"
	local i
	for ((i = 0; i < 10; i++)); do
		clock_ask "$port" >/dev/null || fail "request $i: no reply" "$(tail -n 5 "$T/slow.err")"
	done
	stop_dh "$DH" slow 143
	no_clock_mispairing slow
}

@test "a server's replica that never listens is killed as a straggler after --timeout; the clients that waited for it are served by the others" {
	local port
	port=$(free_port)
	stopped_before_listen never "$port" -k 3 --timeout 1
	local t0=$EPOCHREALTIME
	clock_ask "$port" >/dev/null || fail "the client that waited got no reply" "$(tail -n 5 "$T/never.err")"
	local ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	grep -q "^diehard: kill replica 2 .*straggler: does not listen on 127.0.0.1:$port" "$T/never.err" ||
		fail "replica 2 was not killed as a straggler:" "$(grep '^diehard:' "$T/never.err")"
	diag "a client that waited for a replica that never listens (--timeout 1): answered after ${ms} ms"
	local i
	for ((i = 0; i < 5; i++)); do
		clock_ask "$port" >/dev/null || fail "request $i after the kill: no reply" "$(tail -n 5 "$T/never.err")"
	done
	stop_dh "$DH" never 143
	jq -e '([.replicas[] | select(.killed != null)] | length) == 1 and (.replacements | length) >= 1' "$T/never.json" >/dev/null ||
		fail "the report:" "$(jq -c '{replicas: [.replicas[] | {index, killed}], replacements: [.replacements[] | .why]}' "$T/never.json")"
}

@test "redis-server through diehard -k 3: SET then GET over separate connections, INCR 100 times, values right" {
	require_cmd redis-server redis-cli
	local port
	port=$(free_port)
	LEFT+=("redis-server.*$port")
	dh redis -k 3 -- redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--logfile "$T/redis.log"
	wait_port "$port" "$DH" 30
	local cli=(timeout 60 redis-cli -p "$port")
	[[ $("${cli[@]}" SET greeting 'hello, world') == OK ]] || fail "SET" "$(tail -n 20 "$T/redis.err")"
	[[ $("${cli[@]}" GET greeting) == 'hello, world' ]] || fail "GET on another connection" "$(tail -n 20 "$T/redis.err")"
	"${cli[@]}" -r 100 INCR counter >"$T/incr" || fail "INCR"
	same_bytes <(seq 1 100) "$T/incr" "100 INCRs on one connection"
	local i
	for i in 1 2 3 4 5; do
		[[ $("${cli[@]}" INCR counter) == $((100 + i)) ]] || fail "INCR on connection $i"
	done
	[[ $("${cli[@]}" GET counter) == 105 ]] || fail "GET counter"
	[[ $("${cli[@]}" DBSIZE) == 2 ]] || fail "DBSIZE"
	# redis-server exits 0 on SIGTERM (a clean shutdown).
	stop_dh "$DH" redis 0
	diag "redis-server: divergences: $(jq -c '[.divergences[] | {stream, replica, kind}]' "$T/redis.json"); replacements: $(jq '.replacements | length' "$T/redis.json")"
}

# ---- line_server -------------------------------------------------------------

@test "line_server through diehard -k 3: state across connections, BIG 1000000 byte for byte, 1000 requests from 10 clients at once" {
	require_prog line_server
	local port
	port=$(free_port)
	line_server_dh ls "$port"
	[[ $(lc send "$port" "SET colour blue" "INCR hits") == $'OK\n1' ]] || fail "SET, INCR" "$(tail "$T/ls.err")"
	[[ $(lc send "$port" "GET colour" "INCR hits" "ECHO a b  c") == $'blue\n2\na b  c' ]] ||
		fail "state from another connection" "$(tail "$T/ls.err")"
	lc send "$port" "BIG 1000000" >"$T/big" || fail "BIG 1000000" "$(tail "$T/ls.err")"
	same_bytes <(lc pattern 1000000) "$T/big" "BIG 1000000 through diehard"
	lc send "$port" "BIG 5000" "BIG 4096" "BIG 1" "ECHO end" >"$T/bigs" || fail "small BIGs"
	same_bytes <(lc pattern 5000; lc pattern 4096; lc pattern 1; echo end) "$T/bigs" "BIGs across chunk boundaries"
	local pids=() i
	for ((i = 0; i < 10; i++)); do
		lc load "$port" 100 >"$T/load.$i" 2>&1 3>&- &
		pids+=($!)
	done
	for ((i = 0; i < 10; i++)); do
		wait "${pids[$i]}" || fail "load client $i failed:" "$(cat "$T/load.$i")" "$(tail "$T/ls.err")"
	done
	[[ $(lc send "$port" "GET colour" QUIT) == $'blue\nBYE' ]] || fail "after the load"
	stop_dh "$DH" ls 143
	clean_report ls
}

@test "--serial-clients: 50 clients of a server whose every answer counts the lines it took over all its clients (epoll level- and edge-triggered), 100 lines each: every replica takes them in one order (no replica outvoted, no connection closed), the answers 1..5000 each once" {
	# Without the option the replicas take concurrent clients in orders
	# of their own and these answers split them (docs/NETWORK.md, "Not
	# agreed either"; bench/client_order counts how often).
	local mode port out
	for mode in lt et; do
		port=$(free_port)
		dh "ser$mode" -k 3 --serial-clients -- python3 "$ROOT/tests/tools/client_order.py" server "$port" "$mode"
		LEFT+=("client_order.py server $port")
		wait_port "$port" "$DH"
		out=$(timeout 120 python3 "$ROOT/tests/tools/client_order.py" client "$port" 50 100 2>&1) ||
			fail "$mode: the client failed: $out" "$(grep '^diehard:' "$T/ser$mode.err" | tail -n 10)"
		[[ $out == "closed 0 answers 1..5000 each once" ]] ||
			fail "$mode: $out" "$(grep '^diehard:' "$T/ser$mode.err" | grep -v 'connection [0-9]* on' | tail -n 10)"
		stop_dh "$DH" "ser$mode" 143
		clean_report "ser$mode"
	done
}

@test "--serial-clients with a replacement: a replica SIGKILLed while 20 clients of the counter server run; its replacement replays their connections one request at a time and goes on in the lane's order: no replica outvoted, the answers 1..10000 each once" {
	local port out pid
	port=$(free_port)
	dh serrep -k 3 --serial-clients -- python3 "$ROOT/tests/tools/client_order.py" server "$port" lt
	LEFT+=("client_order.py server $port")
	wait_port "$port" "$DH"
	timeout 120 python3 "$ROOT/tests/tools/client_order.py" client "$port" 20 500 >"$T/serrep.client" 2>&1 &
	local client=$!
	# Wherever the kill lands in the run (before, during or after the
	# clients' requests), the answers and the vote must hold.
	sleep 0.3
	pid=$(pgrep -f "^[^ ]*python3 [^ ]*client_order.py server $port" | head -n 1)
	[[ -n $pid ]] || fail "no replica found"
	kill -KILL "$pid"
	wait "$client" || fail "the client failed: $(cat "$T/serrep.client")" "$(grep '^diehard:' "$T/serrep.err" | tail -n 10)"
	out=$(<"$T/serrep.client")
	[[ $out == "closed 0 answers 1..10000 each once" ]] ||
		fail "$out" "$(grep '^diehard:' "$T/serrep.err" | grep -v 'connection [0-9]* on' | tail -n 10)"
	stop_dh "$DH" serrep 143
	# The one replica killed from outside, replaced once; nothing else.
	jq -e '([.divergences[] | select(.stream != "status" or .status != 137)] | length) == 0
	       and (.replacements | length) == 1' "$T/serrep.json" >/dev/null ||
		fail "divergences or replacements other than the one caused:" \
			"$(jq -c '{divergences, replacements: [.replacements[] | .why]}' "$T/serrep.json")"
}

# A line_server --clock 2 through diehard -k 3 (more options in $@) under
# 4 x 200 requests: the report of its run in $T/$name.json.
lane_run() {
	local name=$1 port pids=() i
	shift
	port=$(free_port)
	dh "$name" -k 3 "$@" -- "$PROGS/line_server" --clock 2 "$port"
	LEFT+=("line_server .*$port\$")
	wait_port "$port" "$DH"
	[[ $(lc send "$port" "ECHO first") == first ]] || fail "ECHO" "$(tail "$T/$name.err")"
	for ((i = 0; i < 4; i++)); do
		lc load "$port" 200 >"$T/$name.load.$i" 2>&1 3>&- &
		pids+=($!)
	done
	for ((i = 0; i < 4; i++)); do
		wait "${pids[$i]}" || fail "load client $i failed:" "$(cat "$T/$name.load.$i")" "$(tail "$T/$name.err")"
	done
	stop_dh "$DH" "$name" 143
	clean_report "$name"
}

@test "an event loop's wall-clock reads stay in the replicas (lanes, the default): line_server --clock 2 through diehard -k 3, 4 x 200 requests, nearly every read in the replicas, every reply right; with --no-lanes they ask diehard" {
	require_prog line_server
	# Its one thread reads CLOCK_REALTIME twice a command. Once the replica
	# listens and has answered a client, that thread is an event loop's:
	# its first wall read through diehard gives it a lane, and its reads
	# stay in the replica from then on (docs/NONDETERMINISM.md, "Servers:
	# lanes"). Before lanes (--no-lanes), every read of a server's after
	# its listen is a round trip to diehard.
	lane_run lane
	# 4 x 200 requests, 2 reads each: 1600 reads and more.
	jq -e '[.replicas[] | (.calls["clock_gettime(CLOCK_REALTIME)"] // 0) as $all
		| $all >= 1600 and .clock_reads_in_replica >= $all * 0.9] | length == 3 and all' "$T/lane.json" >/dev/null ||
		fail "not nearly every read in the replicas:" \
			"$(jq -c '[.replicas[] | {index, clock_reads_in_replica, calls}]' "$T/lane.json")"
	lane_run nolane --no-lanes
	jq -e '[.replicas[] | (.calls["clock_gettime(CLOCK_REALTIME)"] // 0) as $all
		| $all >= 1600 and .clock_reads_in_replica < $all * 0.5] | length == 3 and all' "$T/nolane.json" >/dev/null ||
		fail "--no-lanes: the reads stayed in the replicas:" \
			"$(jq -c '[.replicas[] | {index, clock_reads_in_replica, calls}]' "$T/nolane.json")"
}

@test "lanes: a server's loop thread that forks (fork(), _Fork, the fork system call): the child reads apart from its parent's lane, and every replica agrees on both" {
	require_prog lane_server
	# The child of a thread with a lane inherits its thread-local lane; one
	# made without glibc's fork runs no fork handler, and would go on in
	# its parent's lane (one numbering for two threads, interleaved
	# otherwise in each replica): its 200 times, printed, would differ.
	local mode port
	for mode in libc raw _Fork; do
		port=$(free_port)
		dh "fork$mode" -k 3 -- "$PROGS/lane_server" "$port" fork "$mode"
		LEFT+=("lane_server $port")
		wait_port "$port" "$DH"
		# wait_port's connection is its first client.
		[[ $(lc send "$port" x) == hi ]] || fail "$mode: the client" "$(tail "$T/fork$mode.err")"
		await_exit "$DH" 60 || fail "$mode: diehard did not end" "$(tail "$T/fork$mode.err")"
		[[ $BG_RC == 0 ]] || fail "$mode: diehard exited $BG_RC" "$(grep '^diehard:' "$T/fork$mode.err" | grep -v 'connection [0-9]* on' | tail)"
		[[ $(grep -c '' "$T/fork$mode.out") == 201 && $(tail -n 1 "$T/fork$mode.out") == done ]] ||
			fail "$mode: the child's 200 times and done expected" "$(head -3 "$T/fork$mode.out")"
		jq -e '(.divergences | length) == 0 and (.replacements | length) == 0' "$T/fork$mode.json" >/dev/null ||
			fail "$mode: divergences" "$(jq -c '{divergences, r: [.replacements[].why]}' "$T/fork$mode.json")"
	done
}

@test "lanes: a replica that leads entries in its clock page's lanes before any thread has one cannot make its siblings disagree: every reply (the time to the microsecond) right, none replaced" {
	require_prog lane_server
	# It knows the run's secret (DIEHARD_CLOCKS): its entries are sound as
	# it writes them, in lanes nobody has yet. A lane's entries are checked
	# under a salt diehard draws when it gives the lane, and diehard takes
	# nothing from a lane before: what it wrote there is garbage then.
	local port i
	port=$(free_port)
	dh poison -k 3 -- "$PROGS/lane_server" "$port" poison "$T/poison.lock"
	LEFT+=("lane_server $port")
	wait_port "$port" "$DH"
	for i in $(seq 30); do
		lc send "$port" x >>"$T/poison.replies" || fail "request $i" "$(grep '^diehard:' "$T/poison.err" | grep -v 'connection [0-9]* on' | tail)"
	done
	[[ $(grep -c '^[0-9]*\.[0-9]\{6\}$' "$T/poison.replies") == 30 ]] || fail "30 times expected" "$(cat "$T/poison.replies")"
	lc send "$port" q >/dev/null 2>&1 || true
	await_exit "$DH" 30 || fail "diehard did not end"
	(($(cat "$T/poison.lock/led" 2>/dev/null || echo 0) > 0)) || fail "no replica wrote its lanes" "$(tail "$T/poison.err")"
	jq -e '(.replacements | length) == 0 and (.divergences | length) == 0' "$T/poison.json" >/dev/null ||
		fail "divergences or replacements" "$(jq -c '{divergences, r: [.replacements[].why]}' "$T/poison.json")"
}

@test "buggy_server: a heap overflow that empties a value on some heaps is masked: every reply right, the wrong replica replaced, the server serves on" {
	require_prog buggy_server
	# The bug is real: with the allocator alone, some seeds answer wrong
	# (17 % of them at 30 keys, buggy_server.c), and glibc never does.
	lc bugrate "$PROGS/buggy_server" "$LIB" 40 30 >"$T/rate" 2>/dev/null || fail "bugrate failed" "$(cat "$T/rate")"
	local wrong
	wrong=$(awk '{ print $1 }' "$T/rate")
	((wrong > 0 && wrong < 40)) || fail "with the allocator alone $wrong of 40 seeds were wrong: the test proves nothing"
	diag "buggy_server with the allocator alone: $(cat "$T/rate")"
	# Through diehard -k 7 with 10 keys (a replica wrong in 8 % of heaps
	# alone, about twice that under diehard), runs until one had a replica
	# replaced (each run: at least one replica wrong with probability about
	# 0.6). Wrong replicas leave a connection one at a time, and a
	# replacement joins new connections only (docs/NETWORK.md), so the
	# connection is lost once all but one of its replicas were wrong: with
	# -k 3, two wrong replicas of three; with -k 5 and 30 keys, four of five
	# (3 % of runs measured: 3 of 120); with -k 7 and 10 keys, six of seven
	# (about 1 in 10,000).
	local s port replaced=0 name
	for ((s = 0; s < 20 && replaced == 0; s++)); do
		name=bug$s
		port=$(free_port)
		dh "$name" -k 7 -- "$PROGS/buggy_server" "$port"
		LEFT+=("buggy_server .*$port\$")
		wait_port "$port" "$DH"
		lc bugcheck "$port" 10 >"$T/$name.check" 2>&1 ||
			fail "run $s: a wrong or missing reply through diehard -k 7 (a masking failure):" "$(cat "$T/$name.check")" \
				"$(grep '^diehard:' "$T/$name.err" | tail -n 20)"
		# It serves on, the replacement included.
		lc load "$port" 30 >"$T/$name.load" 2>&1 || fail "run $s: the server stopped serving:" "$(cat "$T/$name.load")"
		# Keys set before the replacement (rebuilt by its replay). Not c:
		# its 16 digits fill their slot with no NUL of their own (the
		# bug), so on a heap where an object of the load took the slot
		# after it, GET c reads on into that object (the check of c
		# failed once in 60 runs).
		[[ $(lc send "$port" "GET k007" "GET k000") == $'value-007-abcde\nvalue-000-abcde' ]] ||
			fail "run $s: state after the replacement"
		stop_dh "$DH" "$name" 143
		replaced=$(jq '.replacements | length' "$T/$name.json")
	done
	((replaced > 0)) || fail "no replica was replaced in $s runs (each replica is wrong in about 8 % of heaps)"
	diag "buggy_server: a replica replaced in run $((s - 1)) of diehard -k 7"
	grep -q '^diehard: kill replica' "$T/$name.err" || fail "no kill line on stderr (-v):" "$(grep '^diehard:' "$T/$name.err")"
	jq -e '(.divergences | length) >= 1 and ([.replicas[] | select(.killed != null)] | length) >= 1' "$T/$name.json" >/dev/null ||
		fail "the report does not show the divergence:" "$(jq -c '{divergences, replicas: [.replicas[] | {index, killed}]}' "$T/$name.json")"
}

# ---- misbehaving clients ------------------------------------------------------

@test "line_server: clients that disconnect mid-reply (close, reset) leave the server serving, no replica harmed" {
	require_prog line_server
	local port
	port=$(free_port)
	line_server_dh dc "$port"
	lc disconnect "$port" 10000000 100000 || fail "disconnect" "$(tail "$T/dc.err")"
	[[ $(lc send "$port" "ECHO after a close") == "after a close" ]] || fail "after a close mid-reply" "$(tail "$T/dc.err")"
	lc disconnect "$port" 10000000 5000 rst || fail "disconnect with a reset"
	[[ $(lc send "$port" "ECHO after a reset") == "after a reset" ]] || fail "after a reset mid-reply" "$(tail "$T/dc.err")"
	lc send "$port" "BIG 2000000" | cmp -s - <(lc pattern 2000000) || fail "BIG 2000000 after the disconnects"
	stop_dh "$DH" dc 143
	clean_report dc
}

@test "line_server: half-closed clients get their replies to EOF (nc -N, shutdown(SHUT_WR))" {
	require_prog line_server
	require_cmd nc
	local port
	port=$(free_port)
	line_server_dh hc "$port"
	[[ $(printf 'ECHO hi\n' | timeout 20 nc -N 127.0.0.1 "$port") == hi ]] || fail "nc -N" "$(tail "$T/hc.err")"
	# A last line without \n is answered too, then the server closes.
	[[ $(printf 'SET h x\nECHO one\nGET h' | lc halfclose "$port") == $'OK\none\nx' ]] || fail "SHUT_WR" "$(tail "$T/hc.err")"
	printf 'BIG 300000\n' | lc halfclose "$port" >"$T/big" || fail "BIG after SHUT_WR"
	same_bytes <(lc pattern 300000) "$T/big" "BIG 300000 to a half-closed client"
	stop_dh "$DH" hc 143
	clean_report hc
}

@test "line_server: random bytes and a line over 1 MiB from clients are answered alike by every replica; the server serves on" {
	require_prog line_server
	local port
	port=$(free_port)
	line_server_dh gb "$port"
	lc garbage "$port" 100000 || fail "garbage" "$(tail "$T/gb.err")"
	lc garbage "$port" 2000 || fail "garbage"
	# A line longer than 1 MiB: ERR, then the server closes that connection.
	lc long "$port" 1500000 || fail "a line of 1.5 MB" "$(tail "$T/gb.err")"
	[[ $(lc send "$port" "SET g ok" "GET g") == $'OK\nok' ]] || fail "after the garbage" "$(tail "$T/gb.err")"
	stop_dh "$DH" gb 143
	clean_report gb
}

@test "line_server: 1000 connections open at once, a request on each, all answered right" {
	require_prog line_server
	# diehard holds each client's connection and one to every replica.
	local want=16384 hard
	hard=$(ulimit -Hn)
	[[ $hard == unlimited ]] || ((hard >= want)) || want=$hard
	[[ $(ulimit -Sn) == unlimited ]] || (($(ulimit -Sn) >= want)) || ulimit -Sn "$want"
	local port
	port=$(free_port)
	line_server_dh mc "$port"
	lc many "$port" 1000 >"$T/many" 2>&1 || fail "1000 connections:" "$(cat "$T/many")" "$(tail "$T/mc.err")"
	[[ $(lc send "$port" "ECHO still here") == "still here" ]] || fail "after 1000 connections"
	stop_dh "$DH" mc 143
	clean_report mc
}

# ---- replicas that misbehave ---------------------------------------------------

@test "a replica that stops reading a connection is killed as a straggler after --timeout and replaced; the client's connection goes on with right answers" {
	require_prog line_server
	# Plain, the odd process (the one that creates the directory) stalls.
	local p0
	p0=$(free_port)
	background plain "$PROGS/line_server" --odd "$T/odd.plain" "$p0"
	LEFT+=("line_server .*$p0\$")
	wait_port "$p0" "$BG_PID"
	local rc=0
	LINECLIENT_TIMEOUT=1 lc send "$p0" "STALL" >"$T/plain.stall" 2>&1 || rc=$?
	((rc == 2)) || fail "plain line_server --odd: STALL answered (status $rc):" "$(cat "$T/plain.stall")"
	# Through diehard one replica of three wins the race and stalls.
	local port
	port=$(free_port)
	dh st -k 3 --timeout 1 -- "$PROGS/line_server" --odd "$T/odd" "$port"
	LEFT+=("line_server .*$port\$")
	wait_port "$port" "$DH"
	[[ -d $T/odd ]] || fail "no replica created $T/odd"
	lc send "$port" "SET s 1" STALL @sleep=3 "GET s" "INCR s" "ECHO same connection" "BIG 100000" >"$T/st.got" ||
		fail "the client's connection failed:" "$(cat "$T/st.got")" "$(grep '^diehard:' "$T/st.err")"
	same_bytes <(printf 'OK\nOK\n1\n2\nsame connection\n'; lc pattern 100000) "$T/st.got" "the replies around the stall"
	[[ $(lc send "$port" "GET s") == 2 ]] || fail "a new connection after the replacement"
	grep -q '^diehard: kill replica' "$T/st.err" || fail "the stalled replica was not killed:" "$(grep '^diehard:' "$T/st.err")"
	stop_dh "$DH" st 143
	jq -e '([.replicas[] | select(.killed != null)] | length) == 1 and (.replacements | length) >= 1 and .live_at_end == 3' \
		"$T/st.json" >/dev/null ||
		fail "the report:" "$(jq -c '{replicas: [.replicas[] | {index, killed}], replacements: [.replacements[] | .why], live_at_end}' "$T/st.json")"
}

@test "a server's outbound connection reaches the host once, not once per replica; its own port stays its own; nothing said" {
	require_prog line_server
	# A listener on the host's loopback that counts the connections it gets
	# until the file $T/stop exists (60 s at most).
	local hp
	hp=$(free_port)
	background listener python3 -c '
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
s.settimeout(0.05)
print("listening", flush=True)
end = time.monotonic() + 60
n = 0
while time.monotonic() < end and not os.path.exists(sys.argv[2]):
    try:
        s.accept()[0].close()
        n += 1
    except socket.timeout:
        pass
print(n, flush=True)' "$hp" "$T/stop"
	local listener=$BG_PID
	wait_until 5 grep -qs listening "$T/listener.out" || fail "the listener did not start"
	# Plain, CONNECT reaches it.
	local p0
	p0=$(free_port)
	background plain "$PROGS/line_server" "$p0"
	LEFT+=("line_server .*$p0\$")
	wait_port "$p0" "$BG_PID"
	[[ $(lc send "$p0" "CONNECT $hp") == CONNECTED ]] || fail "plain line_server could not connect to the listener"
	# Through diehard (no -v: warnings only) a replica's loopback is its own
	# for its own port; the host's listener is reached once for the three
	# replicas (docs/NETWORK.md, "The way out").
	local port
	port=$(free_port)
	background out "$DIEHARD" --share "$T" -k 3 --report "$T/out.json" -- "$PROGS/line_server" "$port"
	DH=$BG_PID
	LEFT+=("line_server .*$port\$")
	wait_port "$port" "$DH"
	[[ $(lc send "$port" "CONNECT $port") == CONNECTED ]] || fail "a replica could not connect to its own port" "$(cat "$T/out.err")"
	lc send "$port" "CONNECT $hp" "ECHO after" >"$T/got" || fail "CONNECT through diehard" "$(cat "$T/out.err")"
	[[ $(<"$T/got") == $'CONNECTED\nafter' ]] || fail "CONNECT through diehard:" "$(cat "$T/got")" "$(cat "$T/out.err")"
	local want=("127.0.0.1:$hp") conns=2
	# This machine's own address (never on the wire, whatever happens), where
	# the listener (on the loopback) is not: refused, as for the plain server.
	local own
	own=$(ip -o -4 addr show scope global 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
	if [[ -n $own ]]; then
		local i plain_own
		plain_own=$(lc send "$p0" "CONNECT $own $hp")
		[[ $plain_own == "CONNECT FAILED: "* ]] || fail "plain CONNECT $own $hp: $plain_own"
		for i in 1 2; do
			lc send "$port" "CONNECT $own $hp" >"$T/got.own" || fail "CONNECT $own through diehard" "$(cat "$T/out.err")"
			[[ $(<"$T/got.own") == "$plain_own" ]] ||
				fail "CONNECT $own $hp: plain $plain_own, through diehard:" "$(cat "$T/got.own")" "$(cat "$T/out.err")"
		done
		want+=("$own:$hp")
	else
		diag "no global IPv4 address here: only the loopback connects were tried"
	fi
	touch "$T/stop"
	await_exit "$listener" 10
	[[ $(tail -n 1 "$T/listener.out") == "$conns" ]] ||
		fail "the host listener got $(tail -n 1 "$T/listener.out") connections, expected $conns (the plain server's and diehard's)"
	stop_dh "$DH" out 143
	local warn
	warn=$(grep -ciE '^diehard: .*(outbound|connect)' "$T/out.err" || true)
	((warn == 0)) || fail "expected nothing said about outbound connections:" "$(cat "$T/out.err")"
	jq -e --args '[.outbound[]? | .address] == $ARGS.positional' "${want[@]}" <"$T/out.json" >/dev/null ||
		fail "the report's outbound connections: $(jq -c '.outbound' "$T/out.json"), expected ${want[*]}"
}

@test "redis-server through diehard -k 3: 1000 connections open at once, each pipelining 20 SET/GET/INCR requests with values up to 20 KiB, get byte-exact replies" {
	require_cmd redis-server
	# Issue 42. diehard holds each client's connection and one to every
	# replica (1 + k descriptors, three quarters of its limit go to
	# connections: docs/NETWORK.md, "Bounds"); every connection stays open
	# until all are answered, so all 1000 must fit at once: 4000 and more.
	# The replicas and the client inherit the limit too.
	local want=16384 need=6000 hard
	hard=$(ulimit -Hn)
	if [[ $hard != unlimited ]] && ((hard < want)); then
		ulimit -Hn "$want" 2>/dev/null || want=$hard # with CAP_SYS_RESOURCE
	fi
	[[ $(ulimit -Sn) == unlimited ]] || (($(ulimit -Sn) >= want)) || ulimit -Sn "$want"
	[[ $(ulimit -Sn) == unlimited ]] || (($(ulimit -Sn) >= need)) ||
		skip "the fd limit is $(ulimit -Sn) (hard $(ulimit -Hn)): 1000 connections through diehard -k 3 need $need"
	local port
	port=$(free_port)
	LEFT+=("redis-server.*$port")
	dh pipe -k 3 -- redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--logfile "$T/redis.log"
	wait_port "$port" "$DH" 30
	# All 1000 connected before any sends; each then sends its 20 requests
	# in up to three writes cut anywhere and reads its replies: 37 MB
	# sent, 19 MB of replies compared byte for byte (the client computes
	# them: tests/tools/pipelined_clients.py). Its own bound (120 s) is a
	# hang guard: this takes seconds.
	timeout 150 python3 "$ROOT/tests/tools/pipelined_clients.py" "$port" -c 1000 -r 20 --timeout 120 \
		>"$T/pipe.client" 2>&1 ||
		fail "the clients did not all get their replies byte for byte:" "$(cat "$T/pipe.client")" \
			"$(grep '^diehard:' "$T/pipe.err" | grep -v '^diehard: connection [0-9]* on ' | tail -n 20)"
	diag "$(cat "$T/pipe.client")"
	# Every connection reached every replica (the port probe's and the 1000).
	local conns partial
	conns=$(grep -c '^diehard: connection [0-9]* on ' "$T/pipe.err" || true)
	partial=$(grep '^diehard: connection [0-9]* on ' "$T/pipe.err" | grep -v ': 3 replicas$' | head -n 5 || true)
	((conns >= 1001)) && [[ -z $partial ]] ||
		fail "diehard saw $conns connections (expected 1001), these not with 3 replicas:" "$partial"
	# redis-server exits 0 on SIGTERM (a clean shutdown), and so does diehard.
	stop_dh "$DH" pipe 0
	clean_report pipe
	! grep -E '^diehard: .*(divergence|kill replica)' "$T/pipe.err" >&2 || fail "diehard reported a divergence or a kill (above)"
	jq -e '.exit_code == 0 and .live_at_end == 3' "$T/pipe.json" >/dev/null ||
		fail "report: $(jq -c '{exit_code, live_at_end}' "$T/pipe.json")"
}
