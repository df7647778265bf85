#!/usr/bin/env bats
# A private network's calls (docs/NETWORK.md, "Calls diehard sees";
# supervisor/virt/netcalls.c): with a network namespace per replica, a
# connect to another host fails in the replica with the kernel's own error
# and is said once per destination in the run (not once per replica) and
# reported; a UDP socket is said once a run; connects to the replica's own
# loopback, the unspecified address and unix sockets are silent; a listen
# is performed by diehard on the replica's socket and answered as the
# kernel would. Every test needs the private network (skipped without it).

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

@test "a connect to another host fails in the replica (ENETUNREACH); said once per destination, not once per replica; reported" {
	cat >"$T/out.py" <<'PY'
import errno, socket
for host in ("192.0.2.1", "192.0.2.1", "2001:db8::1"):
    try:
        socket.create_connection((host, 80), timeout=1)
        print(host, "connected")
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, e.errno))
PY
	sup -k 3 -r "$T/r.json" -- python3 "$T/out.py" >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == $'192.0.2.1 ENETUNREACH\n192.0.2.1 ENETUNREACH\n2001:db8::1 ENETUNREACH' ]] ||
		fail "the replicas' connects:" "$(cat "$T/out")"
	[[ $(grep -c '^diehard: replica [0-9] connects to 192\.0\.2\.1:80: outbound connections are not replicated' "$T/err") == 1 ]] ||
		fail "not one line for 192.0.2.1:80:" "$(cat "$T/err")"
	[[ $(grep -c '^diehard: replica [0-9] connects to \[2001:db8::1\]:80: ' "$T/err") == 1 ]] ||
		fail "not one line for [2001:db8::1]:80:" "$(cat "$T/err")"
	[[ $(grep -c '' "$T/err") == 2 ]] || fail "expected two lines on stderr:" "$(cat "$T/err")"
	jq -e '[.outbound[].address] == ["192.0.2.1:80", "[2001:db8::1]:80"] and
		all(.outbound[]; .replica >= 0 and .replica <= 2 and .time >= 0)' "$T/r.json" >/dev/null ||
		fail "the report's outbound:" "$(jq .outbound "$T/r.json")"
	validate_report "$T/r.json"
}

@test "a process started by the replica is seen too (sh -c): its connect is said once" {
	sup -k 3 -- sh -c 'python3 -c "
import socket
try:
    socket.create_connection((\"198.51.100.7\", 443), timeout=1)
except OSError:
    print(\"error\")
"' >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == error ]] || fail "output" "$(cat "$T/out")"
	[[ $(grep -c 'connects to 198\.51\.100\.7:443: ' "$T/err") == 1 && $(grep -c '' "$T/err") == 1 ]] ||
		fail "expected one line:" "$(cat "$T/err")"
}

@test "UDP sockets are said once a run, whatever their family and flags and however many replicas open them" {
	sup -k 3 -r "$T/r.json" -- python3 -c '
import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("ok")
' >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(<"$T/out") == ok ]] || fail "output" "$(cat "$T/out")"
	grep -q '^diehard: replica [0-9] opened a UDP socket: UDP is not replicated' "$T/err" ||
		fail "no line about UDP:" "$(cat "$T/err")"
	[[ $(grep -c '' "$T/err") == 1 ]] || fail "expected one line on stderr:" "$(cat "$T/err")"
	jq -e 'has("outbound") | not' "$T/r.json" >/dev/null || fail "a UDP socket is no outbound connection"
}

@test "connects to the replica's own listening port (loopback, unspecified) and unix sockets are silent; other loopback ports are said once each" {
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
	# Port 9 of its loopback is where the host's service would be, out of reach: said once, not thrice.
	[[ $(grep -c 'connects to 127.0.0.1:9, where it does not listen' "$T/err") == 1 && $(wc -l <"$T/err") == 1 ]] ||
		fail "expected one line about 127.0.0.1:9 on stderr:" "$(cat "$T/err")"
	jq -e '[.outbound[].address] == ["127.0.0.1:9"]' "$T/r.json" >/dev/null || fail "outbound in the report:" "$(jq .outbound "$T/r.json")"
}

@test "past 16 destinations: one line more, then silence; the report lists the first 16" {
	sup -k 3 -r "$T/r.json" -- python3 -c '
import socket
for i in range(1, 21):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("192.0.2.%d" % i, 80))
    except OSError:
        pass
    s.close()
print("done")
' >"$T/out" 2>"$T/err" || fail "exit $?" "$(cat "$T/err")"
	[[ $(grep -c 'outbound connections are not replicated' "$T/err") == 16 ]] || fail "not 16 lines:" "$(cat "$T/err")"
	[[ $(grep -c 'connects to 192\.0\.2\.17:80 too: further destinations .* are not said' "$T/err") == 1 ]] ||
		fail "no closing line for the 17th:" "$(cat "$T/err")"
	[[ $(grep -c '' "$T/err") == 17 ]] || fail "expected 17 lines:" "$(cat "$T/err")"
	jq -e '[.outbound[].address] == [range(1; 17) | "192.0.2.\(.):80"]' "$T/r.json" >/dev/null ||
		fail "the report's outbound:" "$(jq -c '[.outbound[].address]' "$T/r.json")"
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
	local port=$((20000 + RANDOM % 20000))
	# The kernel's own answers (another port: nothing else listens on it
	# while the replicas run).
	timeout 30 python3 "$T/listen.py" $((port + 1)) >"$T/plain" 2>&1 || fail "python3 alone failed" "$(cat "$T/plain")"
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
