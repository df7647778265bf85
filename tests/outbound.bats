#!/usr/bin/env bats
# Outbound connections made once (issue 40; docs/NETWORK.md, "The way
# out"; supervisor/net/outbound.c): a replica's connect to a server outside
# its network namespace is held until a quorum of the replicas made the
# same one, diehard makes the one real connection, the replicas' bytes are
# voted and sent once and the server's go to every replica; a refused
# connect fails in every replica as it would plain; a replica whose request
# differs is killed and its replacement is fed the recorded exchange,
# never touching the server again.
#
# Real clients (curl, wget, python's urllib, redis-cli, our C client
# tests/progs/out_client.c) against real servers the test starts on the
# host: tests/tools/upstream.py (logs each connection it takes, with the
# bytes it got) and redis-server. Every wait is bounded.

load helpers

UPSTREAM="$ROOT/tests/tools/upstream.py"

setup() {
	require_diehard
	require_jq
	require_cmd python3
	T=$BATS_TEST_TMPDIR
	export SUP_TIMEOUT=120
	BG=()
	ours=$(readlink /proc/self/ns/net) || skip "no /proc/self/ns/net"
	theirs=$(sup -k 1 -- readlink /proc/self/ns/net 2>/dev/null) || skip "diehard -k 1 readlink failed"
	[[ -n $theirs && $theirs != "$ours" ]] || skip "the replicas share diehard's network namespace here"
}

teardown() {
	local pid
	for pid in "${BG[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}

# upstream NAME MODE [HOST]: starts upstream.py on a free port of HOST
# (default 127.0.0.1); its port in UP_PORT, its log $T/NAME.log.
upstream() {
	python3 "$UPSTREAM" "$T/$1.port" "$T/$1.log" "$2" "${3:-127.0.0.1}" 2>"$T/$1.err" &
	BG+=($!)
	wait_until 10 test -s "$T/$1.port" || fail "upstream $1 did not start:" "$(cat "$T/$1.err")"
	UP_PORT=$(<"$T/$1.port")
}

# conns NAME: connections the upstream NAME logged so far.
conns() {
	if [[ -e $T/$1.log ]]; then wc -l <"$T/$1.log"; else echo 0; fi
}

# own_addrs: this machine's global addresses, one a line (IPv4, then IPv6),
# as the host reaches itself: never on the wire.
own_addrs() {
	ip -o addr show scope global 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4 }'
}

@test "curl and wget reach a server on the host once per run, over the loopback (IPv4, IPv6) and the host's own addresses; the body is the server's" {
	require_cmd curl wget
	upstream web http ::
	local hosts=(127.0.0.1 "[::1]") a
	while read -r a; do
		[[ $a == *:* ]] && a="[$a]"
		hosts+=("$a")
	done < <(own_addrs)
	local h n=0
	for h in "${hosts[@]}"; do
		sup -k 3 -r "$T/curl.json" -- curl -sS "http://$h:$UP_PORT/x" >"$T/curl.out" 2>"$T/curl.err" ||
			fail "curl $h: exit $?" "$(cat "$T/curl.err")"
		n=$((n + 1))
		[[ $(<"$T/curl.out") == "reply $n" ]] || fail "curl $h: the body:" "$(cat "$T/curl.out")"
		[[ $(conns web) == "$n" ]] || fail "curl $h: the server saw $(conns web) connections in $n runs:" "$(cat "$T/web.log")"
		sup -k 3 -- wget -q -O - "http://$h:$UP_PORT/y" >"$T/wget.out" 2>"$T/wget.err" ||
			fail "wget $h: exit $?" "$(cat "$T/wget.err")"
		n=$((n + 1))
		[[ $(<"$T/wget.out") == "reply $n" ]] || fail "wget $h: the body:" "$(cat "$T/wget.out")"
		[[ $(conns web) == "$n" ]] || fail "wget $h: the server saw $(conns web) connections in $n runs"
		[[ ! -s $T/curl.err && ! -s $T/wget.err ]] || fail "something said:" "$(cat "$T/curl.err" "$T/wget.err")"
	done
	# Each request reached the server whole, as the client made it.
	jq -e -s 'all(.[]; .got | test("^GET /[xy] HTTP/1\\.[01]\r\n"))' "$T/web.log" >/dev/null ||
		fail "the requests:" "$(cat "$T/web.log")"
	jq -e '.outbound | length == 1 and .[0].connections == 1 and .[0].failed == 0 and .[0].divergences == 0 and
		.[0].sent > 0 and .[0].received > 0' "$T/curl.json" >/dev/null ||
		fail "the report's outbound:" "$(jq .outbound "$T/curl.json")"
	validate_report "$T/curl.json"
}

@test "python's urllib, and a C client's non-blocking connect: EINPROGRESS, getpeername is the destination, lines each way, its half-close" {
	require_prog out_client
	upstream lines line ::
	local h n=0 want
	for h in 127.0.0.1 ::1; do
		sup -k 3 -- "$PROGS/out_client" "$h" "$UP_PORT" "one" "two two" >"$T/c.out" 2>"$T/c.err" ||
			fail "out_client $h: exit $?" "$(cat "$T/c.out" "$T/c.err")"
		n=$((n + 1))
		[[ $h == *:* ]] && want="[$h]:$UP_PORT" || want="$h:$UP_PORT"
		[[ $(<"$T/c.out") == $'connect: EINPROGRESS\npeer '"$want"$'\ngot one\ngot two two' ]] ||
			fail "out_client $h:" "$(cat "$T/c.out" "$T/c.err")"
		[[ $(conns lines) == "$n" ]] || fail "$(conns lines) connections, expected $n:" "$(cat "$T/lines.log")"
		[[ $(jq -r -s '.[-1].got' "$T/lines.log") == $'one\ntwo two' ]] || fail "the server got:" "$(cat "$T/lines.log")"
	done
	upstream web http
	sup -k 3 -- python3 -c '
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/p" % sys.argv[1]).read().decode(), end="")' "$UP_PORT" \
		>"$T/py.out" 2>"$T/py.err" || fail "urllib: exit $?" "$(cat "$T/py.err")"
	[[ $(<"$T/py.out") == "reply 1" && $(conns web) == 1 ]] || fail "urllib:" "$(cat "$T/py.out" "$T/web.log")"
}

@test "a refused port: curl fails in every replica as plain (exit 7), once; the report counts it" {
	require_cmd curl
	local port rc=0 prc=0
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	curl -sS "http://127.0.0.1:$port/" >/dev/null 2>&1 || prc=$?
	sup -k 3 -r "$T/r.json" -- curl -sS "http://127.0.0.1:$port/" >"$T/out" 2>"$T/err" || rc=$?
	((prc == 7 && rc == 7)) || fail "plain exit $prc, through diehard $rc:" "$(cat "$T/err")"
	[[ $(grep -c "Failed to connect" "$T/err") == 1 && $(grep -c '^diehard:' "$T/err") == 0 ]] ||
		fail "stderr:" "$(cat "$T/err")"
	jq -e '[.outbound[] | [.connections, .failed]] == [[0, 1]]' "$T/r.json" >/dev/null ||
		fail "the report's outbound:" "$(jq .outbound "$T/r.json")"
}

@test "redis-cli INCR 100 times against a redis outside: the counter is exactly +100" {
	require_cmd redis-server redis-cli
	local port
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" >"$T/redis.log" 2>&1 &
	BG+=($!)
	wait_until 10 redis-cli -p "$port" PING >/dev/null 2>&1 || fail "redis did not start" "$(cat "$T/redis.log")"
	redis-cli -p "$port" SET c 1000 >/dev/null
	sup -k 3 -r "$T/r.json" -- sh -c 'for i in $(seq 100); do redis-cli -p "$1" INCR c; done' sh "$port" \
		>"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(redis-cli -p "$port" GET c) == 1100 ]] || fail "the counter: $(redis-cli -p "$port" GET c), expected 1100"
	[[ $(<"$T/out") == $(seq 1001 1100) ]] || fail "the replies:" "$(head "$T/out")"
	jq -e '.outbound[0].connections == 100 and .outbound[0].divergences == 0' "$T/r.json" >/dev/null ||
		fail "the report's outbound:" "$(jq .outbound "$T/r.json")"
}

@test "a web application under diehard -k 3 whose handler calls redis: 1000 requests, each outbound call made once, every reply in order" {
	require_cmd redis-server redis-cli
	local rport port
	rport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" >"$T/redis.log" 2>&1 &
	BG+=($!)
	wait_until 10 redis-cli -p "$rport" PING >/dev/null 2>&1 || fail "redis did not start" "$(cat "$T/redis.log")"
	cat >"$T/app.py" <<'PY'
import http.server, socket, sys
def incr():
    s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    s.sendall(b"*2\r\n$4\r\nINCR\r\n$4\r\nhits\r\n")
    got = b""
    while not got.endswith(b"\r\n"):
        got += s.recv(64)
    s.close()
    return int(got[1:])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hit %d\n" % incr()
        # No Date header: a second read as the clock turns may differ
        # between replicas (docs/NETWORK.md, "Clocks per connection").
        self.send_response_only(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
	cat >"$T/drive.py" <<'PY'
import sys, time, urllib.request
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(300):
    try:
        first = int(urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=30).read().split()[1])
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the application did not answer")
bad = 0
for i in range(1, n + 1):
    v = int(urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=30).read().split()[1])
    bad += v != first + i
print(first, bad)
PY
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$DIEHARD" --share "$T" -k 3 -r "$T/r.json" -- python3 "$T/app.py" "$port" "$rport" >"$T/dh.out" 2>"$T/dh.err" &
	local dh=$!
	BG+=($dh)
	timeout 300 python3 "$T/drive.py" "$port" 1000 >"$T/drive.out" 2>&1 || fail "the client:" "$(cat "$T/drive.out" "$T/dh.err")"
	kill -TERM "$dh"
	await_exit "$dh" 30
	[[ $(<"$T/drive.out") == "1 0" ]] || fail "first reply and wrong ones:" "$(cat "$T/drive.out")"
	[[ $(redis-cli -p "$rport" GET hits) == 1001 ]] || fail "redis counted $(redis-cli -p "$rport" GET hits) calls for 1001 requests"
	jq -e '.outbound[0].connections == 1001 and .outbound[0].failed == 0 and .outbound[0].divergences == 0 and
		(.divergences | length) == 0' "$T/r.json" >/dev/null ||
		fail "the report:" "$(jq -c '.outbound, .divergences' "$T/r.json")"
}

@test "a replica with a planted bug sends a wrong request: the right one reaches the server once, the replica is replaced and its replacement fed the recorded exchange, round by round" {
	upstream lines line
	cat >"$T/bug.py" <<'PY'
import os, socket, sys
# The first replica to make the lock is the buggy one (the test's
# directory is shared with the replicas: the lock is real).
try:
    os.mkdir(sys.argv[2] + "/lock")
    bad = True
except FileExistsError:
    bad = False
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
for word in ("alpha", "beta", "gamma"):
    line = word + ("-WRONG" if bad and word == "beta" else "")
    s.sendall(line.encode() + b"\n")
    print(f.readline().decode(), end="", flush=True)
s.shutdown(socket.SHUT_WR)
print(f.read().decode() or "end", flush=True)
# Ends with its input: the test's, once the replacement was fed.
sys.stdin.read()
PY
	mkfifo "$T/in"
	sup -v -k 3 -r "$T/r.json" -- python3 "$T/bug.py" "$UP_PORT" "$T" <"$T/in" >"$T/out" 2>"$T/err" &
	local dh=$!
	BG+=($dh)
	local w
	exec {w}>"$T/in"
	wait_until 60 grep -q "replayed from its record" "$T/err"
	exec {w}>&-
	await_exit "$dh" 60
	((BG_RC == 0)) || fail "exit $BG_RC" "$(grep -v spawn "$T/err")"
	[[ $(<"$T/out") == $'got alpha\ngot beta\ngot gamma\nend' ]] || fail "output:" "$(cat "$T/out")"
	[[ $(conns lines) == 1 && $(jq -r .got "$T/lines.log") == $'alpha\nbeta\ngamma' ]] ||
		fail "the server got:" "$(cat "$T/lines.log")"
	jq -e '(.divergences | map(select(.stream == "outbound" and .kind == "differs")) | length) == 1 and
		(.replacements | length) == 1 and .outbound[0].divergences == 1 and
		.outbound[0].connections == 1' "$T/r.json" >/dev/null ||
		fail "the report:" "$(jq -c '.divergences, .replacements, .outbound' "$T/r.json")"
	grep -q "outbound connection 1 to 127.0.0.1:$UP_PORT replayed from its record" "$T/err" ||
		fail "the replacement was not fed the record:" "$(grep -v spawn "$T/err")"
	validate_report "$T/r.json"
}

@test "as nobody (unprivileged namespaces): curl to the host's loopback and to its own address, once each" {
	require_nobody
	require_cmd curl
	upstream web http ::
	as_nobody "$DIEHARD" -k 3 -- curl -sS "http://127.0.0.1:$UP_PORT/a" >"$T/out" 2>"$T/err" ||
		fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == "reply 1" && $(conns web) == 1 ]] || fail "loopback:" "$(cat "$T/out" "$T/err")"
	local own
	own=$(own_addrs | head -n 1)
	[[ -n $own ]] || skip "no global address here: the loopback alone was tried"
	[[ $own == *:* ]] && own="[$own]"
	as_nobody "$DIEHARD" -k 3 -- curl -sS "http://$own:$UP_PORT/b" >"$T/out" 2>"$T/err" ||
		fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == "reply 2" && $(conns web) == 2 ]] || fail "$own:" "$(cat "$T/out" "$T/err")"
}

@test "datagrams: a DNS client in the replicas (its own queries, and glibc's resolver through resolv.conf) reaches a dnsmasq outside once per query; the answers are the server's" {
	require_cmd dnsmasq
	local port
	port=$(free_dual_port) # dnsmasq binds UDP and TCP
	dnsmasq --no-daemon --port="$port" --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
		--address=/test.example/192.0.2.9 --log-queries --log-facility="$T/dns.log" \
		>"$T/dnsmasq.out" 2>&1 &
	BG+=($!)
	cat >"$T/q.py" <<'PY'
import socket, struct, sys
# A DNS query for NAME of type A (id fixed), its answers' addresses printed;
# a name nobody knows gets none (NXDOMAIN's rcode printed).
port, names = int(sys.argv[1]), sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(20)
for i, name in enumerate(names):
    q = struct.pack(">HHHHHH", 0x1000 + i, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(q, ("127.0.0.1", port))
    a = s.recv(512)
    ident, flags, qd, an = struct.unpack(">HHHH", a[:8])
    ips = [socket.inet_ntoa(a[j - 4:j]) for j in range(len(a), 12, -1) if a[j - 6:j - 4] == b"\0\4"][:an]
    print(name, ident == 0x1000 + i, flags & 0xf, " ".join(ips))
PY
	wait_until 10 grep -qs 'started, version' "$T/dnsmasq.out" "$T/dns.log" ||
		fail "dnsmasq did not start" "$(cat "$T/dnsmasq.out")"
	python3 "$T/q.py" "$port" test.example nothing.invalid >"$T/plain" || fail "plain"
	[[ $(<"$T/plain") == $'test.example True 0 192.0.2.9\nnothing.invalid True '[35]' ' ]] || fail "plain:" "$(cat "$T/plain")"
	: >"$T/dns.log"
	SUP_TIMEOUT=60 sup -k 3 -r "$T/r.json" -- python3 "$T/q.py" "$port" test.example nothing.invalid test.example \
		>"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(sed -n 1,2p "$T/out") == $(<"$T/plain") && $(sed -n 3p "$T/out") == "test.example True 0 192.0.2.9" ]] ||
		fail "through diehard:" "$(cat "$T/out")" "plain:" "$(cat "$T/plain")"
	[[ $(grep -c 'query\[A\]' "$T/dns.log") == 3 ]] || fail "dnsmasq saw:" "$(cat "$T/dns.log")"
	jq -e '.datagrams[0].flows == 1 and .datagrams[0].sent > 0 and .datagrams[0].received > 0 and
		.datagrams[0].divergences == 0 and .datagrams[0].dropped == 0' "$T/r.json" >/dev/null ||
		fail "the report:" "$(jq -c .datagrams "$T/r.json")"
	# glibc's resolver, through a resolv.conf naming a dnsmasq on port 53
	# of a loopback address (as root: the file bound over /etc/resolv.conf
	# in a mount namespace of the test's own).
	[[ $(id -u) == 0 ]] && unshare -m true 2>/dev/null || skip "not root: glibc's resolver not tried"
	local ns="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))" q
	dnsmasq --no-daemon --port=53 --listen-address="$ns" --bind-interfaces --no-resolv --no-hosts \
		--address=/test.example/192.0.2.9 --log-queries --log-facility="$T/dns53.log" >"$T/dnsmasq53.out" 2>&1 &
	BG+=($!)
	wait_until 10 grep -qs 'started, version' "$T/dnsmasq53.out" "$T/dns53.log" ||
		fail "dnsmasq on $ns:53 did not start" "$(cat "$T/dnsmasq53.out")"
	echo "nameserver $ns" >"$T/resolv.conf"
	for q in "getent hosts test.example" "getent ahostsv4 test.example"; do
		: >"$T/dns53.log"
		unshare -m sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' sh "$T/resolv.conf" $q >"$T/plain" ||
			fail "plain $q"
		local plain_q
		plain_q=$(grep -o 'query\[[A-Z]*\] test.example' "$T/dns53.log")
		: >"$T/dns53.log"
		unshare -m sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' sh "$T/resolv.conf" \
			timeout 60 "$DIEHARD" -k 3 -- $q >"$T/out" 2>"$T/err" || fail "$q: exit $?" "$(cat "$T/err")"
		[[ $(<"$T/out") == $(<"$T/plain") && $(<"$T/out") == *192.0.2.9* ]] ||
			fail "$q through diehard:" "$(cat "$T/out")" "plain:" "$(cat "$T/plain")"
		[[ $(grep -o 'query\[[A-Z]*\] test.example' "$T/dns53.log") == "$plain_q" ]] ||
			fail "$q: dnsmasq saw" "$(cat "$T/dns53.log")" "plain:" "$plain_q"
	done
}

@test "unix stream sockets by path: redis-cli -s INCR 20 times against a redis outside is exactly +20; descriptors passed along are said once; a replica's own unix server stays its own" {
	require_cmd redis-server redis-cli
	local sock="$T/redis.sock"
	redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$T" >"$T/redis.log" 2>&1 &
	BG+=($!)
	wait_until 10 redis-cli -s "$sock" PING >/dev/null 2>&1 || fail "redis did not start" "$(cat "$T/redis.log")"
	redis-cli -s "$sock" SET c 100 >/dev/null
	SUP_SHARE= SUP_TIMEOUT=120 sup -k 3 -r "$T/r.json" -- sh -c 'for i in $(seq 20); do redis-cli -s "$1" INCR c; done' sh \
		"$sock" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(redis-cli -s "$sock" GET c) == 120 ]] || fail "the counter: $(redis-cli -s "$sock" GET c), expected 120"
	[[ $(<"$T/out") == $(seq 101 120) ]] || fail "the replies:" "$(head "$T/out")"
	jq -e --arg a "unix:$sock" '[.outbound[] | select(.address == $a)] | .[0].connections == 20' "$T/r.json" >/dev/null ||
		fail "the report:" "$(jq -c .outbound "$T/r.json")"
	# A server passing a descriptor along its answer: the bytes come
	# through, the descriptor does not, one line says so.
	cat >"$T/fdserver.py" <<'PY'
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
open(sys.argv[1] + ".ready", "w").close()
while True:
    c, _ = s.accept()
    c.recv(100)
    c.sendmsg([b"here\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0]))])
    c.close()
PY
	python3 "$T/fdserver.py" "$T/fd.sock" &
	BG+=($!)
	wait_until 10 test -e "$T/fd.sock.ready" || fail "the fd server did not start"
	SUP_SHARE= SUP_TIMEOUT=60 sup -k 3 -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"hi")
print(s.makefile().read(), end="")
# Its own server, in its own view and namespace: the kernel connects it.
own = socket.socket(socket.AF_UNIX)
own.bind(sys.argv[2])
own.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect(sys.argv[2])
print("own", own.accept()[0] is not None)
' "$T/fd.sock" "/tmp/own.$$.$RANDOM.sock" >"$T/out2" 2>"$T/err2" || fail "exit $?" "$(cat "$T/err2")"
	[[ $(<"$T/out2") == $'here\nown True' ]] || fail "output:" "$(cat "$T/out2")"
	[[ $(grep -c 'descriptors or credentials passed over the connection to unix:.* are not carried' "$T/err2") == 1 ]] ||
		fail "not one line about the descriptor:" "$(cat "$T/err2")"
}

@test "unix datagrams to a slow log socket (a short queue, a reader that takes a millisecond each): 600 lines arrive once each, in order, none dropped" {
	cat >"$T/slowsrv.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[2], "a") as f:
    while True:
        d = s.recv(65536)
        f.write(d.decode(errors="replace") + "\n")
        f.flush()
        time.sleep(0.001)
PY
	python3 "$T/slowsrv.py" "$T/slow.sock" "$T/slow.txt" &
	BG+=($!)
	wait_until 10 test -e "$T/slow.sock.ready" || fail "the log socket's server did not start"
	SUP_TIMEOUT=120 sup -k 3 -r "$T/r.json" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(sys.argv[1])
for i in range(600):
    s.send(b"line %d" % i)
print("sent")' "$T/slow.sock" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	wait_until 30 eval '[[ $(wc -l <"$T/slow.txt") -ge 600 ]]' || fail "$(wc -l <"$T/slow.txt") of 600 lines arrived"
	python3 - "$T/slow.txt" <<'PY' || fail "the lines are not 0..599 once each in order:" "$(head -n 5 "$T/slow.txt")"
import sys
lines = open(sys.argv[1]).read().split("\n")[:-1]
sys.exit(0 if lines == ["line %d" % i for i in range(600)] else 1)
PY
	jq -e '.datagrams[0].dropped == 0' "$T/r.json" >/dev/null || fail "dropped:" "$(jq -c .datagrams "$T/r.json")"
}

@test "unix datagram sockets by path: logger's line and a program's five reach a log socket outside once each" {
	require_cmd logger
	cat >"$T/logsrv.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
open(sys.argv[1] + ".ready", "w").close()
while True:
    d = s.recv(65536)
    with open(sys.argv[2], "a") as f:
        f.write(d.decode(errors="replace") + "\n")
PY
	python3 "$T/logsrv.py" "$T/log.sock" "$T/log.txt" &
	BG+=($!)
	wait_until 10 test -e "$T/log.sock.ready" || fail "the log socket's server did not start"
	SUP_TIMEOUT=60 sup -k 3 -r "$T/r.json" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(sys.argv[1])
for i in range(5):
    s.send(b"line %d" % i)
print("sent")' "$T/log.sock" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	SUP_TIMEOUT=60 sup -k 3 -- logger -u "$T/log.sock" "one line from logger" 2>>"$T/err" || fail "logger: exit $?" "$(cat "$T/err")"
	wait_until 10 grep -q "one line from logger" "$T/log.txt" || fail "logger's line did not arrive"
	[[ $(grep -c '^line [0-4]$' "$T/log.txt") == 5 && $(sort -u "$T/log.txt" | grep -c '^line') == 5 &&
		$(grep -c 'one line from logger' "$T/log.txt") == 1 ]] || fail "the log:" "$(cat "$T/log.txt")"
	jq -e '.datagrams[0].flows == 1 and .datagrams[0].divergences == 0' "$T/r.json" >/dev/null ||
		fail "the report:" "$(jq -c .datagrams "$T/r.json")"
}
