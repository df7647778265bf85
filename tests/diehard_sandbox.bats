#!/usr/bin/env bats
# The sandbox (docs/SANDBOX.md): each replica in its own user, pid, mount
# and IPC namespaces (as root, the user namespace is the program's own). A replica can
# reach neither diehard nor its siblings: not their memory, not their fds,
# not by ptrace, not by signals; its pid is the same in every replica; and
# nothing it starts outlives it, or diehard.

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	export SUP_TIMEOUT=60
}

teardown() {
	# Nothing of a test may be left running (a failed one included).
	pkill -KILL -f "sleep 171[0-9]" 2>/dev/null || true
}

# require_nobody: skips the test unless the unprivileged user (as_nobody,
# helpers.bash) can run the build tree.
require_nobody() {
	[[ $(id -u) == 0 ]] || skip "not root: the other tests already run unprivileged"
	command -v setpriv >/dev/null || skip "no setpriv"
	as_nobody test -x "$DIEHARD" || skip "user nobody cannot run $DIEHARD"
	as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null || skip "no unprivileged user namespaces here"
	chmod 777 "$T"
}

# check_no_escape OUT: abuse_escape's lines in OUT show every attempt
# blocked (as root too: the program's user namespace keeps it from its init,
# which stays root of the host's); nothing else is visible.
check_no_escape() {
	local out=$1 open
	grep -q '^others seen in /proc: 0$' "$out" || fail "the replica sees other processes:" "$(cat "$out")"
	open=$(grep ': OPEN$' "$out" || true)
	[[ -z $open ]] || fail "escapes that worked:" "$open"
	# Its init (pid 1) was tried, and diehard's pid means nothing inside.
	grep -q '^ptrace-seize 1: blocked' "$out" || fail "pid 1 was not tried:" "$(cat "$out")"
}

@test "every replica has pid 2 and parent 1, so \$\$ agrees; the report names the namespaces" {
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c 'echo "$$ $PPID"; set -- /proc/[0-9]*; echo "$# $*"'
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	# The processes the shell sees, listed by the shell itself (a pipeline's
	# second process may or may not have started yet): the init and sh.
	same_bytes <(printf '2 1\n2 /proc/1 /proc/2\n') "$T/run.out" "pids inside the replicas"
	local want='user, pid, mount, ipc, network'
	jq -e --arg ns "$want" '.sandbox.namespaces == $ns and .exit_code == 0
		and all(.replicas[]; has("killed") | not)' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{sandbox, exit_code}' "$T/r.json")"
}

@test "escapes from a replica (memory, process_vm, ptrace, pidfd_getfd, kcmp, /proc fds, TIOCSTI) all fail" {
	require_prog abuse_escape
	capture "$T/run" sup -k 3 -r "$T/r.json" "$PROGS/abuse_escape"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.out" "$T/run.err")"
	check_no_escape "$T/run.out"
	jq -e '.divergences == [] and all(.replicas[]; has("killed") | not)' "$T/r.json" >/dev/null ||
		fail "the replicas did not agree: $(jq -c .divergences "$T/r.json")"
}

@test "unprivileged (a user namespace): the same escapes all fail, and files written belong to the user" {
	require_prog abuse_escape
	require_nobody
	# A directory of the user's (the test's own may sit in one it cannot
	# enter; one of root's, even mode 777, cannot be written through an
	# unprivileged view: docs/FILES.md).
	local dir owner
	dir=$(mktemp -d /tmp/diehard-sandbox.XXXXXX)
	chown 65534:65534 "$dir"
	capture "$T/run" as_nobody timeout 60 "$DIEHARD" -k 3 -r "$dir/r.json" "$PROGS/abuse_escape"
	cp "$dir/r.json" "$T/r.json" 2>/dev/null || true
	capture "$T/id" as_nobody timeout 60 "$DIEHARD" -k 3 sh -c 'echo hi >"$1/made"; id -u' sh "$dir"
	owner=$(stat -c %u "$dir/made" 2>&1)
	rm -rf "$dir"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.out" "$T/run.err")"
	check_no_escape "$T/run.out"
	jq -e '.sandbox.namespaces == "user, pid, mount, ipc, network"' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .sandbox "$T/r.json")"
	[[ $(<"$T/id.out") == 65534 ]] || fail "id -u inside: $(cat "$T/id.out")" "$(cat "$T/id.err")"
	[[ $owner == 65534 ]] || fail "the file written belongs to uid $owner"
}

@test "unprivileged: the command cannot open its init's memory even as it starts (it waits until the init is undumpable)" {
	require_prog abuse_escape
	require_prog slow_exec
	# An init is dumpable from its exec of diehard-init until that makes it
	# undumpable; a command running in between could open /proc/1/mem (1 run
	# in 10 to 40 before the command waited). A copy of diehard whose
	# diehard-init takes 300 ms to become the real one makes that window
	# certain: the command must still wait it out.
	local runner=()
	if [[ $(id -u) == 0 ]]; then
		require_nobody
		runner=(as_nobody)
	fi
	local dir i
	dir=$(mktemp -d /tmp/diehard-gate.XXXXXX)
	chmod 755 "$dir"
	cp "$DIEHARD" "$dir/diehard"
	ln -s "$ROOT/build/libdiehard.so" "$dir/libdiehard.so"
	cp "$PROGS/slow_exec" "$dir/diehard-init"
	for i in 1 2; do
		capture "$T/run" "${runner[@]}" env SLOW_EXEC_TARGET="$ROOT/build/diehard-init" SLOW_EXEC_MS=300 \
			timeout 60 "$dir/diehard" -k 3 "$PROGS/abuse_escape" --no-scan 1
		[[ $(<"$T/run.rc") == 0 ]] || { rm -rf "$dir"; fail "run $i: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"; }
		! grep -q OPEN "$T/run.out" || { rm -rf "$dir"; fail "run $i: the init's memory opened" "$(cat "$T/run.out")"; }
		grep -q 'open-mem-rw 1: blocked' "$T/run.out" || { rm -rf "$dir"; fail "run $i: no attempt on pid 1" "$(cat "$T/run.out")"; }
		! grep -q 'diehard:' "$T/run.err" || { rm -rf "$dir"; fail "run $i: a replica disagreed" "$(cat "$T/run.err")"; }
	done
	rm -rf "$dir"
}

@test "a replica writing to /proc/\$PPID/fd/1 reaches nothing: the output file holds the vote, untruncated" {
	printf 'before\n' >"$T/out"
	timeout 60 "$DIEHARD" -k 3 sh -c 'echo INJECT >/proc/$PPID/fd/1; echo INJECT >>/proc/1/fd/1; echo normal' \
		>>"$T/out" 2>"$T/err"
	same_bytes <(printf 'before\nnormal\n') "$T/out" "stdout after the injection attempts"
}

@test "signals from inside a replica (to its parent, to pid 1, to every process, to diehard's pid) are never forwarded" {
	# diehard's pid is the shell's that execs it.
	capture "$T/run" sh -c 'exec "$0" -k 3 -r "$1" sh -c "
		kill -USR1 \$PPID; kill -USR1 1; kill -TERM -1 2>/dev/null; kill -USR1 $$ 2>/dev/null
		sleep 0.3; echo alive" sh' "$DIEHARD" "$T/r.json"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == alive ]] ||
		fail "exit $(<"$T/run.rc") (138: SIGUSR1 reached the replicas), output '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
	jq -e 'all(.replicas[]; .status == 0)' "$T/r.json" >/dev/null || fail "report: $(jq -c .replicas "$T/r.json")"
}

@test "--sandbox off: the filter still refuses ptrace, process_vm_*, pidfd_getfd, kcmp and signals towards diehard" {
	require_prog abuse_escape
	# Its parent is diehard; /proc differs between the replicas here, so
	# only the parent is tried (--no-scan).
	capture "$T/run" sh -c 'exec "$0" -k 3 --sandbox off -r "$1" sh -c "
		kill -USR1 \$PPID 2>/dev/null || echo refused; exec \"\$0\" --no-scan" "$2"' "$DIEHARD" "$T/r.json" "$PROGS/abuse_escape"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(head -n 1 "$T/run.out") == refused ]] || fail "kill of diehard was not refused:" "$(head -n 3 "$T/run.out")"
	local what
	for what in process_vm_readv process_vm_writev ptrace-seize pidfd_open kcmp; do
		grep -q "^$what [0-9]*: blocked (Operation not permitted)" "$T/run.out" ||
			fail "$what towards diehard was not refused:" "$(cat "$T/run.out")"
	done
	# Not dumpable: its memory is closed to a replica that is not root.
	if [[ $(id -u) != 0 ]]; then
		! grep -q '^open-mem.*OPEN' "$T/run.out" || fail "diehard's memory opened:" "$(cat "$T/run.out")"
	fi
	jq -e '.sandbox.namespaces == "none" and .sandbox.why_none == "--sandbox off"' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .sandbox "$T/r.json")"
}

@test "SIGKILL of diehard leaves no process behind, not even a replica's background grandchildren" {
	start_bg "$T/dh" "$DIEHARD" -k 3 sh -c 'sleep 1711 & (sleep 1712 &); sleep 1713; wait'
	wait_until 10 eval '[[ $(pgrep -c -f "^sleep 171[123]$") == 9 ]]' ||
		fail "the replicas' sleeps did not start:" "$(pgrep -af "sleep 171")"
	kill -KILL "$BG_PID"
	await_exit "$BG_PID" 5
	wait_until 3 eval '[[ $(pgrep -c -f "^sleep 171[123]$") == 0 ]]' ||
		fail "left running after diehard's SIGKILL:" "$(pgrep -af "sleep 171")"
}

@test "a background child still holding stdout does not keep the run alive; it dies with its replica" {
	local start elapsed
	start=$(now_ms)
	capture "$T/run" sup -k 3 sh -c '(sleep 1714; echo late) & echo done'
	elapsed=$(($(now_ms) - start))
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == done ]] || fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")"
	((elapsed < 10000)) || fail "took $elapsed ms: the background child kept the run alive"
	wait_until 3 eval '[[ $(pgrep -c -f "^sleep 1714$") == 0 ]]' || fail "the background child outlived the run"
}

@test "diehard inside diehard: runs with --no-virtualize (without namespaces: one line, when Landlock or root's locked /proc/sys refuse the inner one's mounts; with them under an outer --no-fast-clocks, unprivileged); without it, one clear line and exit 125" {
	# The outer replicas are under Landlock (the clock pages, clockfs.h),
	# which refuses them mounts, and as root their /proc/sys is locked
	# read-only, so the kernel refuses them a new proc: the inner diehard
	# runs its replicas without namespaces and says so once.
	capture "$T/run" sup -k 3 "$DIEHARD" -k 3 --no-virtualize sh -c 'echo hi'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == hi ]] || fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	[[ $(grep -c '' "$T/run.err") == 1 ]] &&
		grep -q '^diehard: no namespaces for the replicas (user, pid, mount, ipc: Operation not permitted)' "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
	# Unprivileged and without the outer's fast clocks (no pages, no
	# Landlock), the inner one makes its own namespaces inside the outer's.
	local runner=()
	if [[ $(id -u) == 0 ]]; then
		require_nobody
		runner=(as_nobody)
	fi
	capture "$T/run" "${runner[@]}" timeout 60 "$DIEHARD" -k 3 --no-fast-clocks "$DIEHARD" -k 3 --no-virtualize sh -c 'echo $$'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 2 ]] || fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
	capture "$T/run" sup -k 3 "$DIEHARD" -k 3 true
	[[ $(<"$T/run.rc") == 125 ]] || fail "exit $(<"$T/run.rc"), expected 125" "$(cat "$T/run.err")"
	grep -q '^diehard: cannot install the seccomp filter in a replica: .*another seccomp listener' "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
}

@test "a thread's CPU clock named by its id (pthread_getcpuclockid) reads inside the sandbox" {
	require_cmd python3
	capture "$T/run" sup -k 3 python3 -c '
import threading, time
c = time.pthread_getcpuclockid(threading.get_ident())
print(time.clock_gettime(c) >= 0)'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == True ]] || fail "exit $(<"$T/run.rc"), output $(cat "$T/run.out")" "$(cat "$T/run.err")"
}

@test "--sandbox: on runs in namespaces, a bad mode is one line and 125, and where none can be made auto says so once" {
	capture "$T/run" sup -k 3 --sandbox on sh -c 'echo $$'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 2 ]] || fail "--sandbox on: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	capture "$T/run" sup -k 3 --sandbox maybe true
	[[ $(<"$T/run.rc") == 125 && $(wc -l <"$T/run.err") == 1 ]] || fail "--sandbox maybe: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q "^diehard: --sandbox must be auto, on or off, not 'maybe'" "$T/run.err" || fail "$(cat "$T/run.err")"
	# No pid namespaces left to make (a user namespace whose limit is 0):
	# auto warns once and runs; on refuses.
	unshare -Ur true 2>/dev/null || skip "no user namespaces to set the limit in"
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_pid_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 -r "$T/r.json" sh -c 'echo ran'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == ran ]] || fail "auto without namespaces: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(grep -c '^diehard: no namespaces for the replicas' "$T/run.err") == 1 ]] || fail "stderr: $(cat "$T/run.err")"
	jq -e '.sandbox.namespaces == "none" and (.sandbox.why_none | test("No space left"))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .sandbox "$T/r.json")"
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_pid_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 --sandbox on sh -c 'echo ran'
	[[ $(<"$T/run.rc") == 125 && ! -s $T/run.out ]] || fail "on without namespaces: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q "^diehard: cannot make replica 0's namespaces" "$T/run.err" || fail "stderr: $(cat "$T/run.err")"
}
