#!/usr/bin/env bats
# A private network's calls (docs/NETWORK.md, "Calls diehard sees";
# supervisor/virt/netcalls.c): with a network namespace per replica, a
# connect to another host is made once by diehard (tests/outbound.bats has
# the connections themselves): refused, it fails in every replica as it
# would plain, silently, and is reported; opening a socket says nothing;
# connects to the replica's own loopback ports, the unspecified address and
# unix sockets stay in its namespace; a listen is performed by diehard on
# the replica's socket and answered as the kernel would. Every test needs
# the private network (skipped without it).

load helpers


setup() {
	require_diehard
	require_jq
	require_cmd python3
	T=$BATS_TEST_TMPDIR
	export SUP_TIMEOUT=60
	require_private_net
}

# require_private_net: a replica's network namespace is not diehard's
# (--net private, the default where the sandbox can be made).
require_private_net() {
	local ours theirs
	ours=$(readlink /proc/self/ns/net) || skip "no /proc/self/ns/net"
	theirs=$(sup -k 1 -- readlink /proc/self/ns/net 2>/dev/null) || skip "diehard -k 1 readlink failed"
	[[ -n $theirs && $theirs != "$ours" ]] || skip "the replicas share diehard's network namespace here"
}

@test "a connect to a port nobody listens on fails in every replica as it would plain (ECONNREFUSED), silently; reported" {
	local port
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cat >"$T/out.py" <<'PY'
import errno, socket, sys
port = int(sys.argv[1])
for host in ("127.0.0.1", "127.0.0.1", "::1"):
    try:
        socket.create_connection((host, port), timeout=5)
        print(host, "connected")
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, e.errno))
PY
	python3 "$T/out.py" "$port" >"$T/plain" || fail "plain"
	sup -k 3 -r "$T/r.json" -- python3 "$T/out.py" "$port" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == $(<"$T/plain") && $(head -c 25 "$T/out") == "127.0.0.1 ECONNREFUSED"* ]] ||
		fail "the replicas' connects:" "$(cat "$T/out")" "plain:" "$(cat "$T/plain")"
	[[ ! -s $T/err ]] || fail "expected nothing on stderr:" "$(cat "$T/err")"
	jq -e --arg a "127.0.0.1:$port" --arg b "[::1]:$port" '[.outbound[] | [.address, .connections, .failed]] ==
		[[$a, 0, 2], [$b, 0, 1]] and all(.outbound[]; .replica >= 0 and .replica <= 2 and .time >= 0)' \
		"$T/r.json" >/dev/null || fail "the report's outbound:" "$(jq .outbound "$T/r.json")"
	validate_report "$T/r.json"
}

@test "a process started by the replica is seen too (sh -c): its connection reaches the server once" {
	python3 "$BATS_TEST_DIRNAME/tools/upstream.py" "$T/up.port" "$T/up.log" http &
	local up=$!
	wait_until 10 test -s "$T/up.port" || fail "the upstream server did not start"
	local port
	port=$(<"$T/up.port")
	cat >"$T/get.py" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
print(s.makefile("rb").read().decode().splitlines()[-1])
PY
	sup -k 3 -- sh -c 'python3 "$1" "$2"' sh "$T/get.py" "$port" >"$T/out" 2>"$T/err" ||
		{ kill "$up"; fail "exit $?" "$(cat "$T/err")"; }
	kill "$up"
	[[ $(<"$T/out") == "reply 1" ]] || fail "output" "$(cat "$T/out")"
	[[ ! -s $T/err ]] || fail "expected nothing on stderr:" "$(cat "$T/err")"
	[[ $(wc -l <"$T/up.log") == 1 ]] || fail "the server saw more than one connection:" "$(cat "$T/up.log")"
}

@test "opening sockets of any family and type says nothing: UDP's datagrams are voted when they go out (tests/outbound.bats, tests/udp.bats)" {
	sup -k 3 -r "$T/r.json" -- python3 -c '
import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("ok")
' >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == ok ]] || fail "output" "$(cat "$T/out")"
	[[ ! -s $T/err ]] || fail "expected nothing on stderr:" "$(cat "$T/err")"
	jq -e '(has("outbound") or has("datagrams")) | not' "$T/r.json" >/dev/null || fail "sockets alone are no traffic"
}

@test "connects to the replica's own listening port (loopback, unspecified) and unix sockets stay in its namespace; another loopback port is the host's, tried once" {
	sup -k 3 -r "$T/r.json" -- python3 -c '
import socket
srv = socket.socket(socket.AF_INET6)
srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
srv.bind(("::", 0))
srv.listen()
port = srv.getsockname()[1]
for fam, addr in [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET, ("127.3.2.1", port)),
                  (socket.AF_INET, ("0.0.0.0", port)), (socket.AF_INET6, ("::1", port)),
                  (socket.AF_INET6, ("::ffff:127.0.0.1", port)), (socket.AF_INET6, ("::", port)),
                  (socket.AF_UNIX, "/nonexistent/socket"), (socket.AF_INET, ("127.0.0.1", 9))]:
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.connect(addr)
        print("connected")
    except OSError:
        print("error")
    s.close()
' >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(grep -c '^connected$' "$T/out") == 6 && $(grep -c '^error$' "$T/out") == 2 ]] || fail "output" "$(cat "$T/out")"
	# Port 9 of its loopback is the host's (nothing listens there): one
	# outbound attempt, refused, for the three replicas; nothing said.
	[[ ! -s $T/err ]] || fail "expected nothing on stderr:" "$(cat "$T/err")"
	jq -e '[.outbound[] | [.address, .connections, .failed]] == [["127.0.0.1:9", 0, 1]]' "$T/r.json" >/dev/null ||
		fail "outbound in the report:" "$(jq .outbound "$T/r.json")"
}

@test "listen is answered as the kernel would: servers in the replica accept, errors are the kernel's, each replica's address is learned" {
	cat >"$T/listen.py" <<'PY'
import ctypes, errno, socket, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def try_listen(name, fd, backlog=1):
    rc = libc.listen(fd, backlog)
    print(name, "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()])
port = int(sys.argv[1])
s = socket.socket()
s.bind(("127.0.0.1", port))
try_listen("tcp", s.fileno(), 5)
c = socket.create_connection(("127.0.0.1", port))
a, _ = s.accept()
a.sendall(b"hello")
print("served", c.recv(5).decode())
s6 = socket.socket(socket.AF_INET6)
s6.bind(("::", 0))
try_listen("tcp6", s6.fileno(), -1)
t = socket.socket()
t.bind(("127.0.0.1", 0))
th = threading.Thread(target=try_listen, args=("thread", t.fileno()))
th.start()
th.join()
print("thread served", socket.create_connection(t.getsockname()) is not None and t.accept() is not None)
u = socket.socket(socket.AF_UNIX)
u.bind("")
try_listen("unix", u.fileno())
try_listen("udp", socket.socket(socket.AF_INET, socket.SOCK_DGRAM).fileno())
try_listen("connected", c.fileno())
r, w = __import__("os").pipe()
try_listen("pipe", r)
try_listen("closed", 999)
PY
	local port=$((20000 + RANDOM % 20000)) free
	# The kernel's own answers, on a port free on the host now (the
	# replicas' is in their own namespaces).
	free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	timeout 30 python3 "$T/listen.py" "$free" >"$T/plain" 2>&1 || fail "python3 alone failed" "$(cat "$T/plain")"
	sup -v -k 3 -- python3 "$T/listen.py" "$port" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	diff "$T/plain" "$T/out" || fail "the replicas' listens differ from the kernel's"
	local i
	for i in 0 1 2; do
		grep -q "^diehard: replica $i listens on 127\.0\.0\.1:$port\$" "$T/err" ||
			fail "replica $i's address not learned:" "$(cat "$T/err")"
		grep -q "^diehard: replica $i listens on \[::\]:[0-9]* (IPv4 too)\$" "$T/err" ||
			fail "replica $i's IPv6 address not learned:" "$(cat "$T/err")"
	done
	! grep -q 'cannot learn where' "$T/err" || fail "$(cat "$T/err")"
}
