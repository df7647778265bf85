#!/usr/bin/env bats
# UDP servers as voted replicas (issue 40; docs/NETWORK.md, "Datagrams";
# supervisor/net/dgram.c): `diehard -k 3 -- dnsmasq ...` binds in every
# replica's namespace; diehard binds the address for real once a quorum
# did, gives each client datagram to every replica from the client's own
# address, and sends each reply once, when a quorum of the replicas sent
# the same bytes. A replica whose reply differs is killed; its replacement
# is given the clients' datagrams again and serves on.
#
# dnsmasq (from Debian) against our own DNS client (1000 queries, compared
# byte for byte with plain dnsmasq's answers), and a small python UDP
# server of our own (its replies name the client; a planted wrong reply).
# Every wait is bounded.

load helpers

setup() {
	require_diehard
	require_jq
	require_cmd python3
	T=$BATS_TEST_TMPDIR
	BG=()
	require_private_net
	cat >"$T/dq.py" <<'PY'
import hashlib, socket, struct, sys
# N DNS queries to 127.0.0.1:PORT (ids 1..N, three names in turn), each
# answered before the next: the count answered and a digest of the answers.
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
h, got = hashlib.sha256(), 0
for i in range(1, n + 1):
    name = ["test.example", "nothing.invalid", "www.test.example"][i % 3]
    q = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(q, ("127.0.0.1", port))
    try:
        a = s.recv(4096)
    except socket.timeout:
        continue
    got += 1
    h.update(a)
print(got, h.hexdigest())
PY
}

teardown() {
	local pid
	for pid in "${BG[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}


dnsmasq_args() {
	echo --no-daemon --port="$1" --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
		--address=/test.example/192.0.2.9 --user=root
}

@test "dnsmasq under diehard -k 3 answers 1000 queries over UDP byte for byte as plain dnsmasq, each answer sent once" {
	require_cmd dnsmasq
	local plain port
	plain=$(free_dual_port)
	# shellcheck disable=SC2046
	dnsmasq $(dnsmasq_args "$plain") >"$T/plain.err" 2>&1 &
	BG+=($!)
	port=$(free_dual_port)
	# shellcheck disable=SC2046
	"$DIEHARD" -k 3 -r "$T/r.json" -- dnsmasq $(dnsmasq_args "$port") >"$T/dh.out" 2>"$T/dh.err" &
	local dh=$!
	BG+=($dh)
	wait_until 30 eval '[[ $(timeout 5 python3 "$T/dq.py" "$plain" 1) == 1\ * ]]' || fail "plain dnsmasq did not answer"
	wait_until 60 eval 'proc_gone $dh || [[ $(timeout 5 python3 "$T/dq.py" "$port" 1) == 1\ * ]]' && proc_alive "$dh" ||
		fail "dnsmasq under diehard did not answer" "$(cat "$T/dh.err")"
	timeout 120 python3 "$T/dq.py" "$plain" 1000 >"$T/plain.out" || fail "plain queries"
	timeout 120 python3 "$T/dq.py" "$port" 1000 >"$T/dh.q" || fail "queries through diehard" "$(tail "$T/dh.err")"
	[[ $(<"$T/plain.out") == 1000\ * && $(<"$T/dh.q") == $(<"$T/plain.out") ]] ||
		fail "plain: $(cat "$T/plain.out"), through diehard: $(cat "$T/dh.q")" "$(tail "$T/dh.err")"
	kill -TERM "$dh"
	await_exit "$dh" 60
	# The waits' queries and the 1000: one reply each, none dropped.
	jq -e '[.datagrams[] | select(.server)] | length == 1 and .[0].divergences == 0 and .[0].dropped == 0 and
		.[0].flows >= 1' "$T/r.json" >/dev/null || fail "the report:" "$(jq -c .datagrams "$T/r.json")"
	jq -e '.divergences == []' "$T/r.json" >/dev/null || fail "divergences:" "$(jq -c .divergences "$T/r.json")"
}

@test "a UDP server of our own: each replica sees the client's own address; a replica with a planted wrong reply is outvoted, killed and replaced, and the replacement serves on" {
	cat >"$T/echo.py" <<'PY'
import os, socket, sys
# Each datagram answered "N HOST PORT TEXT": N the count of datagrams so
# far, HOST PORT the client as recvfrom gave it. The first replica to make
# the lock answers its third datagram wrong.
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
try:
    os.mkdir(sys.argv[2] + "/lock")
    odd = True
except FileExistsError:
    odd = False
n = 0
while True:
    data, peer = s.recvfrom(4096)
    n += 1
    reply = "%d %s %d %s" % (n, peer[0], peer[1], data.decode())
    if odd and n == 3:
        reply = "wrong"
    s.sendto(reply.encode(), peer)
PY
	cat >"$T/client.py" <<'PY'
import socket, sys
# Sends each TEXT from one socket, prints its own address and the reply.
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(20)
s.connect(("127.0.0.1", port))
me = s.getsockname()
for text in sys.argv[2:]:
    s.send(text.encode())
    print("%s %d" % me, s.recv(4096).decode())
PY
	local port
	port=$(free_dual_port)
	"$DIEHARD" -k 3 --share "$T" -v -r "$T/r.json" -- python3 "$T/echo.py" "$port" "$T" >"$T/dh.out" 2>"$T/dh.err" &
	local dh=$!
	BG+=($dh)
	wait_until 60 grep -q "UDP 0.0.0.0:$port bound for the replicas" "$T/dh.err" || fail "not bound" "$(cat "$T/dh.err")"
	timeout 60 python3 "$T/client.py" "$port" one two three >"$T/c1" || fail "client:" "$(cat "$T/c1")" "$(tail "$T/dh.err")"
	local me
	me=$(head -n 1 "$T/c1" | cut -d' ' -f1,2)
	[[ $(<"$T/c1") == "$me 1 $me one"$'\n'"$me 2 $me two"$'\n'"$me 3 $me three" ]] ||
		fail "replies:" "$(cat "$T/c1")" "$(grep -v spawn "$T/dh.err")"
	# The odd replica was killed at the third; its replacement was given
	# the three datagrams again, and agrees from the fourth on.
	wait_until 60 grep -q "replica 3's UDP server is bound" "$T/dh.err" ||
		fail "no replacement bound the port" "$(grep -v spawn "$T/dh.err")"
	timeout 60 python3 "$T/client.py" "$port" four five >"$T/c2" || fail "client:" "$(cat "$T/c2")"
	me=$(head -n 1 "$T/c2" | cut -d' ' -f1,2)
	[[ $(<"$T/c2") == "$me 4 $me four"$'\n'"$me 5 $me five" ]] || fail "replies:" "$(cat "$T/c2")" "$(grep -v spawn "$T/dh.err")"
	kill -TERM "$dh"
	await_exit "$dh" 60
	jq -e '([.divergences[] | select(.stream == "datagram")] | length) == 1 and (.replacements | length) == 1' \
		"$T/r.json" >/dev/null || fail "the report:" "$(jq -c '.divergences, .replacements, .datagrams' "$T/r.json")"
}
