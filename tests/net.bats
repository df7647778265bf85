#!/usr/bin/env bats
# The replicas' networks (docs/SANDBOX.md, "The network namespace"): with
# --net private (the default when sandboxed) every replica has a network
# namespace of its own, whose loopback is up and holds nothing else, so that
# an unmodified server binds its configured port in every replica without
# colliding with its siblings or the host; --net host shares diehard's
# network. Socket-activated TCP listeners become the replica's own, on the
# same address. Servers on the host are started here as real processes
# (Bats uses fd 3: background processes get 3>&-).

load helpers

setup() {
	require_diehard
	T=$BATS_TEST_TMPDIR
	: >"$T/pids"
}

teardown() {
	# Nothing a test started may outlive it.
	local pid
	while read -r pid; do
		kill -KILL "$pid" 2>/dev/null || true
	done <"$T/pids"
}


# host_v6: the host has an IPv6 loopback.
host_v6() {
	python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null
}

# listening PORT: something on the host accepts connections on 127.0.0.1:PORT.
listening() {
	python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()' "$1" \
		2>/dev/null
}

# hold PORT: a process of the test binds and listens on 127.0.0.1:PORT
# until the test ends.
hold() {
	python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
time.sleep(120)' "$1" </dev/null >/dev/null 2>&1 3>&- &
	echo $! >>"$T/pids"
	disown $!
	wait_until 10 listening "$1" || fail "the host's holder of port $1 did not start"
}

# http_server PORT: python3 -m http.server on the host's 127.0.0.1:PORT.
http_server() {
	python3 -m http.server "$1" --bind 127.0.0.1 --directory "$T" </dev/null >/dev/null 2>&1 3>&- &
	echo $! >>"$T/pids"
	disown $!
	wait_until 10 listening "$1" || fail "http.server on port $1 did not start"
}

# The issue's server: binds 127.0.0.1:PORT with SO_REUSEADDR and listens;
# then holds it SECONDS (argv[2], default none).
BIND='import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("bound")
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)'

# Connects to its own listening socket on 127.0.0.1 (and ::1 when asked),
# through the loopback, and exchanges a word.
LOOPBACK='import socket, sys
for fam, host in [(socket.AF_INET, "127.0.0.1")] + ([(socket.AF_INET6, "::1")] if sys.argv[1] == "v6" else []):
    s = socket.socket(fam)
    s.bind((host, 0))
    s.listen()
    c = socket.create_connection(s.getsockname()[:2], timeout=5)
    a, _ = s.accept()
    a.sendall(b"ping")
    print(host, c.recv(4).decode())'

# Connects to 127.0.0.1:PORT: "connected", or "failed" and why.
CONNECT='import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("connected")
except OSError as e:
    print("failed", type(e).__name__)'

# require_nobody: the test is skipped unless as_nobody (helpers.bash) works:
# skipped when that cannot run the build tree or a python3 outside root's
# home, or when the kernel gives it no user namespaces.
require_nobody() {
	[[ $(id -u) == 0 ]] || skip "not root: the other tests already run unprivileged"
	command -v setpriv >/dev/null || skip "no setpriv"
	as_nobody test -x "$DIEHARD" || skip "user nobody cannot run $DIEHARD"
	NOBODY_PY=
	local p
	for p in /usr/bin/python3 /usr/local/bin/python3; do
		if as_nobody "$p" -c 'pass' 2>/dev/null; then
			NOBODY_PY=$p
			break
		fi
	done
	[[ -n $NOBODY_PY ]] || skip "user nobody has no python3 to run"
	as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null || skip "no unprivileged user namespaces here"
}

@test "private (the default): every replica binds the port; one the host holds is diehard's to take: one line, 125" {
	require_jq
	local port
	port=$(free_port)
	capture "$T/run" sup -k 3 -r "$T/r.json" python3 -c "$BIND" "$port"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == bound ]] ||
		fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	local want='user, pid, mount, ipc, network'
	jq -e --arg ns "$want" '.sandbox.namespaces == $ns and .divergences == []
		and all(.replicas[]; has("killed") | not)' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{sandbox, divergences}' "$T/r.json")"
	# The replicas still bind it privately, but diehard cannot listen there
	# for them (the plain program would have failed to bind): one line.
	hold "$port"
	capture "$T/run" sup -k 3 python3 -c "$BIND" "$port" 2
	[[ $(<"$T/run.rc") == 125 ]] || fail "held by the host: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q "^diehard: cannot listen on 127.0.0.1:$port as the replicas do: Address already in use$" "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
	listening "$port" || fail "the host's holder lost its port"
}

@test "--net host: the same replicas collide, with the host's holder and with each other" {
	local port
	port=$(free_port)
	# Held a second, so that they all hold it at once.
	capture "$T/run" sup -k 3 --net host python3 -c "$BIND" "$port" 1
	[[ $(<"$T/run.rc") != 0 ]] || fail "three replicas bound one port on the host's network: $(cat "$T/run.out")"
	grep -q 'Address already in use' "$T/run.err" || fail "stderr: $(cat "$T/run.err")"
	capture "$T/run" sup -k 3 python3 -c "$BIND" "$port" 1
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == bound ]] ||
		fail "private, held at once: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	hold "$port"
	capture "$T/run" sup -k 3 --net host python3 -c "$BIND" "$port"
	[[ $(<"$T/run.rc") != 0 ]] || fail "the replicas bound a port the host holds: $(cat "$T/run.out")"
	grep -q 'Address already in use' "$T/run.err" || fail "stderr: $(cat "$T/run.err")"
}

@test "the loopback is up inside: a replica connects to its own listening socket (127.0.0.1, ::1)" {
	local v6=v4 want='127.0.0.1 ping'
	if host_v6; then
		v6=v6
		want=$'127.0.0.1 ping\n::1 ping'
	fi
	capture "$T/run" sup -k 3 python3 -c "$LOOPBACK" "$v6"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == "$want" ]] ||
		fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
}

@test "private: a service on the host's loopback is reached through diehard (made once: tests/outbound.bats); --net host: by each replica itself" {
	local port
	port=$(free_port)
	http_server "$port"
	capture "$T/run" sup -k 3 python3 -c "$CONNECT" "$port"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == connected ]] ||
		fail "private: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	listening "$port" || fail "the host's http.server is not there: the test did not test"
	capture "$T/run" sup -k 3 --net host python3 -c "$CONNECT" "$port"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == connected ]] ||
		fail "--net host: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
}

@test "unprivileged (a user namespace): the port is bound in every replica, the loopback is up, the host's service is reached through diehard" {
	require_jq
	require_nobody
	local port web dir
	port=$(free_port)
	# A directory the user may write its report in (the test's own may
	# sit in one it cannot enter).
	dir=$(mktemp -d /tmp/diehard-net.XXXXXX)
	chmod 777 "$dir"
	capture "$T/run" as_nobody timeout 60 "$DIEHARD" -k 3 -r "$dir/r.json" "$NOBODY_PY" -c "$BIND" "$port"
	cp "$dir/r.json" "$T/r.json" 2>/dev/null || true
	rm -rf "$dir"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == bound ]] ||
		fail "bind: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	jq -e '.sandbox.namespaces == "user, pid, mount, ipc, network"' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .sandbox "$T/r.json")"
	capture "$T/run" as_nobody timeout 60 "$DIEHARD" -k 3 "$NOBODY_PY" -c "$LOOPBACK" v4
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == '127.0.0.1 ping' ]] ||
		fail "loopback: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	web=$(free_port)
	http_server "$web"
	capture "$T/run" as_nobody timeout 60 "$DIEHARD" -k 3 "$NOBODY_PY" -c "$CONNECT" "$web"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == connected ]] ||
		fail "connect: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	capture "$T/run" as_nobody timeout 60 "$DIEHARD" -k 3 --net host "$NOBODY_PY" -c "$CONNECT" "$web"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == connected ]] ||
		fail "--net host connect: exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
}

@test "socket activation: a TCP listener becomes the replica's own on the same address, a unix one is passed as it is" {
	require_cmd systemd-socket-activate
	local port v6port='' ssa mode child fd
	port=$(free_port)
	local -a listen=(-l "127.0.0.1:$port" -l "$T/u.sock")
	if host_v6; then
		v6port=$(free_port)
		listen+=(-l "[::1]:$v6port")
	fi
	# Each replica: whether each fd is the manager's socket (its inode is
	# in the file argv[2]), and, private, a connection through its own
	# loopback to each TCP listener it was given (under --net host they
	# are one socket, shared by the replicas: not tried).
	local prog='import os, socket, sys
ino = dict(line.split() for line in open(sys.argv[2]))
for fd in range(3, 3 + int(os.environ["LISTEN_FDS"])):
    s = socket.socket(fileno=fd)
    same = "same" if str(os.fstat(fd).st_ino) == ino[str(fd)] else "other"
    line = "%d %s %d %s" % (fd, s.family.name, s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN), same)
    if s.family == socket.AF_UNIX:
        line += " " + s.getsockname()
    elif sys.argv[1] == "private":
        c = socket.create_connection(s.getsockname()[:2], timeout=5)
        # diehard proxies the client that woke systemd-socket-activate:
        # its connection may be queued first.
        while True:
            a, peer = s.accept()
            if peer == c.getsockname():
                break
        a.sendall(b"hi")
        line += " %s %d" % (c.recv(2).decode(), s.getsockname()[1])
    s.detach()
    print(line)'
	for mode in private host; do
		rm -f "$T/u.sock" "$T/inodes"
		timeout 30 systemd-socket-activate "${listen[@]}" "$DIEHARD" -k 3 --net "$mode" -- \
			python3 -c "$prog" "$mode" "$T/inodes" >"$T/out" 2>"$T/err" 3>&- &
		ssa=$!
		echo "$ssa" >>"$T/pids"
		wait_until 10 grep -qs Listening "$T/err" || fail "systemd-socket-activate did not start" "$(cat "$T/err")"
		# Its sockets, which diehard gets at the same fds.
		child=$(pgrep -P "$ssa")
		for fd in 3 4 5; do
			[[ $fd != 5 || -n $v6port ]] || continue
			echo "$fd $(readlink "/proc/$child/fd/$fd" | tr -dc 0-9)" >>"$T/inodes"
		done
		# The first connection starts diehard (Accept=no).
		listening "$port" || fail "no listener on $port" "$(cat "$T/err")"
		wait "$ssa" || fail "--net $mode: diehard failed" "$(cat "$T/out" "$T/err")"
		local want
		if [[ $mode == private ]]; then
			want="3 AF_INET 1 other hi $port"$'\n'"4 AF_UNIX 1 same $T/u.sock"
			[[ -z $v6port ]] || want+=$'\n'"5 AF_INET6 1 other hi $v6port"
		else
			want="3 AF_INET 1 same"$'\n'"4 AF_UNIX 1 same $T/u.sock"
			[[ -z $v6port ]] || want+=$'\n'"5 AF_INET6 1 same"
		fi
		same_bytes <(printf '%s\n' "$want") "$T/out" "--net $mode: the replicas' fds" || fail "$(cat "$T/err")"
	done
}

@test "the kernel refuses the network namespace alone: one line, host networking; --sandbox on stops" {
	require_jq
	unshare -Ur true 2>/dev/null || skip "no user namespaces to set the limit in"
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_net_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 -r "$T/r.json" sh -c 'echo $$'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 2 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(grep -c '' "$T/run.err") == 1 ]] && grep -q '^diehard: no network namespace for the replicas' "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
	jq -e '.sandbox.namespaces == "user, pid, mount, ipc" and (.sandbox.refused.network | test("No space left"))' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c .sandbox "$T/r.json")"
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_net_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 --sandbox on true
	[[ $(<"$T/run.rc") == 125 && $(grep -c '' "$T/run.err") == 1 ]] || fail "--sandbox on: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q "^diehard: cannot make replica 0's namespaces (user, pid, mount, ipc, network).*--net host" "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
	# No namespaces at all: the one line names the network namespace too.
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_pid_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 true
	[[ $(<"$T/run.rc") == 0 && $(grep -c '' "$T/run.err") == 1 ]] || fail "no namespaces: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q '^diehard: no namespaces for the replicas (user, pid, mount, ipc, network: ' "$T/run.err" || fail "stderr: $(cat "$T/run.err")"
}

@test "--net: a bad mode, and private with --no-virtualize, are one line and 125; --sandbox off and --no-virtualize mean host" {
	require_jq
	expect_error 125 "^diehard: --net must be private or host, not 'maybe'" --net maybe touch "$T/ran"
	expect_error 125 '^diehard: --net private needs the seccomp listener \(not with --no-virtualize\)' \
		--net private --no-virtualize touch "$T/ran"
	local args want
	for args in "--net host:user, pid, mount, ipc" "--no-virtualize:user, pid, mount, ipc" "--sandbox off:none" \
		"--net private --sandbox off:none" "--net private:user, pid, mount, ipc, network"; do
		want=${args#*:}
		# shellcheck disable=SC2086
		capture "$T/run" sup -k 3 -r "$T/r.json" ${args%%:*} true
		[[ $(<"$T/run.rc") == 0 && ! -s $T/run.err ]] || fail "${args%%:*}: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
		jq -e --arg ns "$want" '.sandbox.namespaces == $ns' "$T/r.json" >/dev/null ||
			fail "${args%%:*}: report: $(jq -c .sandbox "$T/r.json")"
	done
}
