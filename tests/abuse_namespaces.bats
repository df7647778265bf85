#!/usr/bin/env bats
# Attacks on what a replica's namespaces keep from it (docs/SANDBOX.md,
# issue 37): the terminal diehard was started from and its process group,
# the host's /proc under the replica's (as root), SysV IPC, POSIX message
# queues and /dev/shm shared with the host or between siblings. Each attack
# (tests/progs/abuse_ns.c) runs as root and as the unprivileged user
# nobody, with --sandbox on, auto and off where the row applies.

load helpers

setup() {
	require_diehard
	require_prog abuse_ns
	T=$BATS_TEST_TMPDIR
	chmod 755 "$T"
	P=$PROGS/abuse_ns
	KEY=$((0x4d480000 + RANDOM))
	MQ=/diehard-abuse-$$-$RANDOM
}

teardown() {
	# Whatever an attack left on the host (nothing, when it passes).
	"$PROGS/abuse_ns" remove "$KEY" "$MQ" >/dev/null 2>&1 || true
	rm -f "/dev/shm/diehard-abuse-$$"-*
}

# who_can USER: skips unless USER (root or nobody) can run the build tree
# here (require_nobody); sets who_cmd, the prefix that runs a command as
# USER (root runs everything as it is).
who_can() {
	who_cmd=()
	[[ $1 == root ]] && { [[ $(id -u) == 0 ]] || skip "not root"; return 0; }
	require_nobody
	chmod 777 "$T"
	who_cmd=(setpriv --reuid=65534 --regid=65534 --clear-groups)
}

# as USER CMD...: CMD as root (as it is) or as nobody.
as() {
	local who=$1
	shift
	if [[ $who == root ]]; then "$@"; else as_nobody "$@"; fi
}

# in_pty OUT CMD...: CMD at a new pseudo-terminal (its controlling
# terminal, and its 0-2), its last argument the terminal's name; everything
# the terminal showed goes to OUT, CMD's exit status to OUT.rc.
in_pty() {
	local out=$1
	shift
	timeout 60 python3 - "$out" "$@" <<'EOF'
import os, pty, sys
out = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:] + [os.ttyname(0)])
seen = bytearray()
while True:
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    seen.extend(data)
_, status = os.waitpid(pid, 0)
open(out, "wb").write(bytes(seen))
open(out + ".rc", "w").write("%d\n" % os.waitstatus_to_exitcode(status))
EOF
}

# tty_row USER MODE: the terminal attack as USER with --sandbox MODE.
tty_row() {
	local who=$1 mode=$2
	who_can "$who"
	require_cmd python3
	in_pty "$T/tty" "${who_cmd[@]}" "$DIEHARD" -k 3 --sandbox "$mode" "$P" tty
	local got
	got=$(tr -d '\r' <"$T/tty")
	[[ $(<"$T/tty.rc") == 0 ]] || fail "$who, --sandbox $mode: exit $(<"$T/tty.rc")" "$got"
	local want='descriptors of a terminal: 0
open /dev/tty: No such device or address
controlling terminal: none
session: its own
process group: its own'
	# By name: the replica's /dev/pts is its own. Without namespaces the
	# host's is there: root opens it (nothing to be done: docs/SANDBOX.md),
	# nobody may not.
	case $mode/$who in
	off/root) want+=$'\nopen diehard\'s terminal by name: ok\nwrite to it: ok' ;;
	off/nobody) want+=$'\nopen diehard\'s terminal by name: Permission denied' ;;
	*) want+=$'\nopen diehard\'s terminal by name: No such file or directory' ;;
	esac
	if [[ $mode/$who == off/root ]]; then
		# Each replica's own write reached the terminal (three lines);
		# the vote's output is there too.
		got=$(grep -v '^UNVOTED LINE ON THE TERMINAL$' <<<"$got")
	fi
	same_bytes <(printf '%s\n' "$want") <(printf '%s\n' "$got") "$who, --sandbox $mode: what the terminal showed"
}

@test "terminal, root, --sandbox on: no /dev/tty, no controlling terminal, a session of its own, diehard's pty not there by name" {
	tty_row root on
}

@test "terminal, root, --sandbox auto: no /dev/tty, no controlling terminal, a session of its own, diehard's pty not there by name" {
	tty_row root auto
}

@test "terminal, root, --sandbox off: no /dev/tty, no controlling terminal, a session of its own (the pty opens by name: no namespace)" {
	tty_row root off
}

@test "terminal, nobody, --sandbox on: no /dev/tty, no controlling terminal, a session of its own, diehard's pty not there by name" {
	tty_row nobody on
}

@test "terminal, nobody, --sandbox auto: no /dev/tty, no controlling terminal, a session of its own, diehard's pty not there by name" {
	tty_row nobody auto
}

@test "terminal, nobody, --sandbox off: no /dev/tty, no controlling terminal, a session of its own, diehard's pty refused" {
	tty_row nobody off
}

# signal_row USER MODE: SIGUSR1 from inside the replicas to the process
# group diehard runs in, led by a shell that traps it.
signal_row() {
	local who=$1 mode=$2
	who_can "$who"
	capture "$T/sig" timeout 60 setsid bash -c '
		trap "echo SIGUSR1 REACHED THE GROUP" USR1
		"$@" $$; echo "diehard: $?"; sleep 0.3; echo "the group: still here"' bash \
		"${who_cmd[@]}" "$DIEHARD" -k 3 --sandbox "$mode" "$P" signal
	local answer='No such process'
	[[ $mode == off ]] && answer='Operation not permitted'
	same_bytes <(printf '%s\n' "kill(-PGID, SIGUSR1): $answer" 'kill(0, SIGUSR1): ok' 'diehard: 0' \
		'the group: still here') "$T/sig.out" "$who, --sandbox $mode: the signals' results" ||
		fail "stderr: $(cat "$T/sig.err")"
}

@test "signals, root, --sandbox on: kill of diehard's process group from inside reaches nothing" {
	signal_row root on
}

@test "signals, root, --sandbox auto: kill of diehard's process group from inside reaches nothing" {
	signal_row root auto
}

@test "signals, root, --sandbox off: kill of diehard's process group from inside is refused" {
	signal_row root off
}

@test "signals, nobody, --sandbox on: kill of diehard's process group from inside reaches nothing" {
	signal_row nobody on
}

@test "signals, nobody, --sandbox auto: kill of diehard's process group from inside reaches nothing" {
	signal_row nobody auto
}

@test "signals, nobody, --sandbox off: kill of diehard's process group from inside is refused" {
	signal_row nobody off
}

# proc_row USER MODE: unmounting /proc, mounting another, the host's
# processes and diehard's stdout, from inside; the output file holds the
# vote and nothing else.
proc_row() {
	local who=$1 mode=$2
	who_can "$who"
	local refused='Invalid argument' mount='Operation not permitted'
	[[ $who == root ]] || refused='Operation not permitted'
	printf 'before\n' >"$T/out"
	# A directory nobody may write the report in (the test's own may sit
	# in one it cannot enter).
	local dir
	dir=$(mktemp -d /tmp/diehard-abuse.XXXXXX)
	chmod 777 "$dir"
	# diehard's pid is the shell's that execs it.
	local rc=0
	"${who_cmd[@]}" timeout 60 sh -c 'exec "$0" -k 3 --sandbox "$1" -r "$2" "$3" proc $$' \
		"$DIEHARD" "$mode" "$dir/r.json" "$P" >>"$T/out" 2>"$T/err" || rc=$?
	cp "$dir/r.json" "$T/r.json" 2>/dev/null || true
	rm -rf "$dir"
	[[ $rc == 0 ]] || fail "exit $rc" "$(cat "$T/err")"
	same_bytes <(printf '%s\n' before "umount /proc: $refused" "umount -l /proc: $refused" \
		"mount a new proc: $mount" "processes in /proc: only the replica's" "open diehard's stdout: failed") \
		"$T/out" "$who, --sandbox $mode: the committed output" || fail "stderr: $(cat "$T/err")"
	jq -e '.sandbox.namespaces == "user, pid, mount, ipc, network" and .divergences == []' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{sandbox, divergences}' "$T/r.json")"
}

@test "/proc, root, --sandbox on: umount /proc and umount -l fail (locked), no new proc, no host process, diehard's stdout out of reach" {
	require_jq
	proc_row root on
}

@test "/proc, root, --sandbox auto: umount /proc and umount -l fail (locked), no new proc, no host process, diehard's stdout out of reach" {
	require_jq
	proc_row root auto
}

@test "/proc, nobody, --sandbox on: umount /proc fails, no new proc, no host process, diehard's stdout out of reach" {
	require_jq
	proc_row nobody on
}

@test "/proc, nobody, --sandbox auto: umount /proc fails, no new proc, no host process, diehard's stdout out of reach" {
	require_jq
	proc_row nobody auto
}

@test "root: the kernel's settings (/proc/sys, /sys) are read-only in a replica and cannot be remounted writable" {
	who_can root
	# The value written is the one already there: should the write go
	# through, nothing changes.
	capture "$T/run" timeout 60 "$DIEHARD" -k 3 sh -c '
		v=$(cat /proc/sys/kernel/core_pattern)
		printf "%s\n" "$v" 2>/dev/null >/proc/sys/kernel/core_pattern && echo "core_pattern: WRITTEN" || echo "core_pattern: refused"
		v=$(cat /proc/sys/vm/overcommit_memory)
		echo "$v" 2>/dev/null >/proc/sys/vm/overcommit_memory && echo "overcommit_memory: WRITTEN" || echo "overcommit_memory: refused"
		mount -o remount,bind,rw /proc/sys 2>/dev/null && echo "/proc/sys: REMOUNTED" || echo "/proc/sys: stays read-only"
		umount /proc/sys 2>/dev/null && echo "/proc/sys: UNMOUNTED" || echo "/proc/sys: stays mounted"
		mount -o remount,rw /sys 2>/dev/null && echo "/sys: REMOUNTED" || echo "/sys: stays read-only"
		touch /sys/kernel/uevent_helper 2>/dev/null && echo "/sys: WRITTEN" || echo "/sys: refused"'
	same_bytes <(printf '%s\n' 'core_pattern: refused' 'overcommit_memory: refused' '/proc/sys: stays read-only' \
		'/proc/sys: stays mounted' '/sys: stays read-only' '/sys: refused') "$T/run.out" "root in a replica" ||
		fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
}

@test "root: where the kernel refuses the user namespace, auto says so once and runs without it (report: refused.user); on refuses (125)" {
	require_jq
	who_can root
	unshare -Ur true 2>/dev/null || skip "no user namespaces to set the limit in"
	# diehard as root of a user namespace whose nested ones are used up.
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_user_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 -r "$T/r.json" sh -c 'echo $$'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == 2 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(grep -c '' "$T/run.err") == 1 ]] && grep -q '^diehard: no user namespace for the replicas (No space left on device): root in them' "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
	jq -e '.sandbox.namespaces == "pid, mount, ipc, network" and (.sandbox.refused.user | test("No space left"))' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c .sandbox "$T/r.json")"
	capture "$T/run" unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_user_namespaces && exec "$@"' sh \
		timeout 60 "$DIEHARD" -k 3 --sandbox on true
	[[ $(<"$T/run.rc") == 125 && $(grep -c '' "$T/run.err") == 1 ]] || fail "--sandbox on: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	grep -q "^diehard: cannot make replica 0's namespaces (user, pid, mount, ipc, network): No space left on device (--sandbox auto runs without the user namespace" "$T/run.err" ||
		fail "stderr: $(cat "$T/run.err")"
}

# ipc_row USER MODE: the host's SysV objects and message queue are not
# seen; each replica makes its own with one key and one name (a second
# one would fail if they shared a namespace); none reaches the host.
ipc_row() {
	local who=$1 mode=$2
	who_can "$who"
	"$P" make "$KEY" "$MQ" || fail "cannot make the host's objects"
	capture "$T/ipc" "${who_cmd[@]}" timeout 60 "$DIEHARD" -k 3 --sandbox "$mode" "$P" ipc "$KEY" "$MQ"
	[[ $(<"$T/ipc.rc") == 0 ]] || fail "$who, --sandbox $mode: exit $(<"$T/ipc.rc")" "$(cat "$T/ipc.out" "$T/ipc.err")"
	same_bytes <(printf '%s\n' "host's shm: No such file or directory" "host's msg: No such file or directory" \
		"host's sem: No such file or directory" "host's mqueue: No such file or directory" \
		'SysV objects seen before: 0 0 0' 'own shm: ok' 'own msg: ok' 'own sem: ok' 'own mqueue: ok') \
		"$T/ipc.out" "$who, --sandbox $mode: SysV IPC and message queues" || fail "$(cat "$T/ipc.err")"
	[[ $("$P" remove "$KEY" "$MQ") == "replicas' objects on the host: 0" ]] || fail "a replica's objects reached the host"
}

@test "SysV IPC and message queues, root, --sandbox on: the host's are not seen, each replica's are its own, none reaches the host" {
	ipc_row root on
}

@test "SysV IPC and message queues, root, --sandbox auto: the host's are not seen, each replica's are its own, none reaches the host" {
	ipc_row root auto
}

@test "SysV IPC and message queues, nobody, --sandbox on: the host's are not seen, each replica's are its own, none reaches the host" {
	ipc_row nobody on
}

@test "SysV IPC and message queues, nobody, --sandbox auto: the host's are not seen, each replica's are its own, none reaches the host" {
	ipc_row nobody auto
}

# shm_row USER MODE: a file of the host's in /dev/shm is not seen, each
# replica makes the same name exclusively, and none reaches the host.
shm_row() {
	local who=$1 mode=$2
	who_can "$who"
	local host=diehard-abuse-$$-host made=diehard-abuse-$$-made
	: >"/dev/shm/$host"
	capture "$T/shm" "${who_cmd[@]}" timeout 60 "$DIEHARD" -k 3 --sandbox "$mode" "$P" shm "$host" "$made"
	[[ $(<"$T/shm.rc") == 0 ]] || fail "$who, --sandbox $mode: exit $(<"$T/shm.rc")" "$(cat "$T/shm.out" "$T/shm.err")"
	same_bytes <(printf '%s\n' "host's file: No such file or directory" 'own file: ok' '/dev/shm: mode 1777, nosuid, nodev') \
		"$T/shm.out" "$who, --sandbox $mode: /dev/shm" || fail "$(cat "$T/shm.err")"
	[[ ! -e /dev/shm/$made ]] || fail "a replica's /dev/shm file reached the host"
}

@test "/dev/shm, root, --sandbox on: the host's files are not seen, a replica's reach neither the host nor its siblings; 1777, nosuid, nodev" {
	shm_row root on
}

@test "/dev/shm, root, --sandbox auto: the host's files are not seen, a replica's reach neither the host nor its siblings; 1777, nosuid, nodev" {
	shm_row root auto
}

@test "/dev/shm, nobody, --sandbox on: the host's files are not seen, a replica's reach neither the host nor its siblings; 1777, nosuid, nodev" {
	shm_row nobody on
}

@test "/dev/shm, nobody, --sandbox auto: the host's files are not seen, a replica's reach neither the host nor its siblings; 1777, nosuid, nodev" {
	shm_row nobody auto
}

# job_row USER MODE: SIGUSR1 to diehard reaches each replica's whole job:
# the command and the child it started (which writes to a file the
# replicas share), through the init's forwarding or diehard's kill of the
# group.
job_row() {
	local who=$1 mode=$2
	who_can "$who"
	local dir
	dir=$(mktemp -d /tmp/diehard-abuse.XXXXXX)
	chmod 777 "$dir"
	# No timeout in between: the signal goes to diehard's pid (setpriv
	# execs it); the test ends it itself.
	start_bg "$T/job" "${who_cmd[@]}" "$DIEHARD" --share "$dir" -k 3 --sandbox "$mode" sh -c '
		trap "echo command" USR1
		sh -c "trap \"echo child >>$1/got\" USR1; echo >>$1/ready; sleep 20 & wait" &
		sleep 20 & wait; wait' sh "$dir"
	wait_until 30 eval '[[ $(grep -c "" "$dir/ready" 2>/dev/null) == 3 ]]' ||
		{ rm -rf "$dir"; fail "the replicas' children did not start" "$(cat "$T/job.err")"; }
	kill -USR1 "$BG_PID"
	wait_until 30 eval '[[ $(grep -c "" "$dir/got" 2>/dev/null) == 3 ]]' || true
	local got
	got=$(grep -c "" "$dir/got" 2>/dev/null || true)
	# The commands end on their own after it (their wait returns); if not,
	# they are stopped.
	kill -TERM "$BG_PID" 2>/dev/null || true
	await_exit "$BG_PID" 10 || true
	rm -rf "$dir"
	[[ $got == 3 ]] || fail "$who, --sandbox $mode: $got of 3 children got the signal" "$(cat "$T/job.err")"
	grep -qx command "$T/job.out" || fail "$who, --sandbox $mode: the commands did not get it" "$(cat "$T/job.out" "$T/job.err")"
}

@test "signals, root, --sandbox on: a signal diehard forwards reaches each replica's whole job, in its own session" {
	job_row root on
}

@test "signals, root, --sandbox off: a signal diehard forwards reaches each replica's whole job, in its own session" {
	job_row root off
}

@test "signals, nobody, --sandbox auto: a signal diehard forwards reaches each replica's whole job, in its own session" {
	job_row nobody auto
}

@test "signals, nobody, --sandbox off: a signal diehard forwards reaches each replica's whole job, in its own session" {
	job_row nobody off
}
