#!/usr/bin/env bats
# Hostile replicas against diehard's sockets (docs/CONTROL.md "Who may
# connect", docs/SERVICES.md "Readiness", docs/SANDBOX.md "The control and
# notify sockets"):
#   - the control socket refuses the replicas' processes and what they start
#     (orphans included): `diehard status`, `diehard events` and a raw
#     connect from inside a replica get one error line and no seed or host
#     pid, while a client outside is still served; nothing in a replica's
#     environment names the socket's directory;
#   - a replica cannot make diehard tell the manager READY=1 for its
#     siblings: READY=1 sent to their notify sockets from children that exit
#     at once, from orphans, from itself and with credentials naming another
#     pid is dropped and counted (the report's notify_dropped, -v's
#     notify_dropped events).
# Each runs as root and as the unprivileged user nobody, with --sandbox on,
# auto and off. The manager is tests/tools/manager.py, as in services.bats.

load helpers

MANAGER="$ROOT/tests/tools/manager.py"

setup() {
	require_diehard
	require_jq
	require_cmd python3
	T=$BATS_TEST_TMPDIR
	# A directory every user of the test can write in (the test's own may
	# sit in one that nobody cannot enter).
	W=$(mktemp -d /tmp/abuse-sockets.XXXXXX)
	chmod 777 "$W"
}

teardown() {
	# Only what this test started: the FIFO holders by pid, then the
	# runs, by their directory (every command line names it).
	local p
	for p in ${HOLDERS:-}; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[[ -n ${W:-} ]] && pkill -KILL -f "$W/" 2>/dev/null || true
	[[ -n ${W:-} ]] && rm -rf "$W"
}

# runner_for USER: sets RUNNER, the prefix that runs a command as USER
# (root: none); skips when nobody cannot run the build tree or make the
# user namespaces --sandbox on needs.
runner_for() {
	RUNNER=()
	[[ $1 == root ]] && return 0
	[[ $(id -u) == 0 ]] || skip "not root: cannot run as nobody"
	command -v setpriv >/dev/null || skip "no setpriv"
	as_nobody test -x "$DIEHARD" || skip "user nobody cannot run $DIEHARD"
	as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null || skip "no unprivileged user namespaces here"
	RUNNER=(as_nobody)
}

# The replicas' side of the control test: tries the socket every way a
# program inside a replica could, each attempt's output in OUT/rN/log.
write_attack() {
	cat >"$W/attack.sh" <<-'SH'
		# attack.sh DIEHARD CTL OUT ABUSE_CONTROL RUNTIME_DIR
		d=$1 ctl=$2 out=$3 raw=$4 rt=$5
		i=0
		while ! mkdir "$out/r$i" 2>/dev/null; do
			i=$((i + 1))
			[ $i -lt 16 ] || exit 1
		done
		o=$out/r$i
		{
			echo "--- environment"
			echo "notify socket: ${NOTIFY_SOCKET:+given}"
			env | grep -F -e "$rt" -e RUNTIME_DIRECTORY || echo "nothing names it"
			echo "--- status"
			"$d" status --control "$ctl"; echo "rc=$?"
			echo "--- status --json"
			"$d" status --json --control "$ctl"; echo "rc=$?"
			echo "--- events"
			"$d" events --control "$ctl"; echo "rc=$?"
			echo "--- events --follow"
			timeout 20 "$d" events --follow --json --control "$ctl"; echo "rc=$?"
			echo "--- status, default path"
			"$d" status; echo "rc=$?"
			echo "--- raw connect"
			"$raw" "$ctl"; echo "rc=$?"
			echo "--- orphan"
			# Its parent exits at once: the orphan is adopted by the
			# replica's init, or (no namespaces) by diehard. The
			# command substitution waits for it through the pipe.
			echo "$( (sh -c 'sleep 0.2; "$1" status --control "$2" 2>&1; echo "rc=$?"' sh "$d" "$ctl" &) )"
		} >"$o/log" 2>&1
		# Held until the test has asked the status from outside.
		exec 3<"$out/go"
		mkdir "$o/done"
		cat <&3 >/dev/null
		echo ok
	SH
}

# control_run USER SANDBOX: one run of attack.sh as USER, as a service (the
# manager's NOTIFY_SOCKET, RUNTIME_DIRECTORY with the control socket); its
# files in $W/USER.SANDBOX (R).
control_run() {
	local user=$1 sb=$2 p
	R=$W/$user.$sb
	mkdir -p "$R/rt" "$R/out"
	mkfifo "$R/out/go"
	chmod -R 777 "$R"
	# The FIFO's writer: opened once a replica opens it for reading.
	sleep 600 >"$R/out/go" &
	p=$!
	HOLDERS="${HOLDERS:-} $p"
	"${RUNNER[@]}" env RUNTIME_DIRECTORY="$R/rt" timeout 60 python3 "$MANAGER" "$R/manager.log" -- \
		"$DIEHARD" --share "$R" -v -k 3 --sandbox "$sb" -r "$R/r.json" -- \
		sh "$W/attack.sh" "$DIEHARD" "$R/rt/control" "$R/out" "$PROGS/abuse_control" "$R/rt" \
		>"$R/run.out" 2>"$R/run.err" &
	local run=$!
	wait_until 40 test -d "$R/out/r0/done" -a -d "$R/out/r1/done" -a -d "$R/out/r2/done" ||
		fail "$user, --sandbox $sb: the replicas did not finish their attempts" "$(cat "$R/run.err")" \
			"$(cat "$R"/out/r*/log 2>/dev/null)"
	# A client outside the replicas is served all along, seeds and all.
	"${RUNNER[@]}" "$DIEHARD" status --json --control "$R/rt/control" >"$R/outside.json" ||
		fail "$user, --sandbox $sb: the status from outside failed" "$(cat "$R/run.err")"
	jq -e '.replicas | length == 3 and all(.[]; .seed | test("^[0-9a-f]{32}$"))' "$R/outside.json" >/dev/null ||
		fail "$user, --sandbox $sb: the outside status: $(cat "$R/outside.json")"
	# So is root's client, for a run of nobody's (whose diehard may not read
	# root's pid namespace: the ancestry tells).
	if [[ $user != root ]]; then
		"$DIEHARD" status --json --control "$R/rt/control" >/dev/null ||
			fail "$user, --sandbox $sb: root's status from outside failed" "$(cat "$R/run.err")"
	fi
	kill "$p"
	await_exit "$run" 60
	[[ $BG_RC == 0 && $(<"$R/run.out") == ok ]] ||
		fail "$user, --sandbox $sb: diehard exited $BG_RC, output '$(cat "$R/run.out")'" "$(cat "$R/run.err")"
}

# check_control_refused USER SANDBOX: what the replicas of control_run saw.
check_control_refused() {
	local user=$1 sb=$2 i log seed pid refusal
	refusal="diehard refused: permission denied: the replicas' processes (and what they start) may not use the control socket"
	for i in 0 1 2; do
		log=$R/out/r$i/log
		[[ -f $log ]] || fail "$user, --sandbox $sb: no log of replica $i"
		# Each client: its one line, exit 125.
		[[ $(grep -cxF "diehard status: $refusal" "$log") == 3 ]] ||
			fail "$user, --sandbox $sb: status (table, JSON, orphan) not refused in one line each:" "$(cat "$log")"
		[[ $(grep -cxF "diehard events: $refusal" "$log") == 2 ]] ||
			fail "$user, --sandbox $sb: events (and --follow) not refused in one line each:" "$(cat "$log")"
		[[ $(grep -cx 'rc=125' "$log") == 6 ]] || fail "$user, --sandbox $sb: exit statuses:" "$(cat "$log")"
		grep -qxF 'diehard status: no control socket: give --control PATH (or set RUNTIME_DIRECTORY)' "$log" ||
			fail "$user, --sandbox $sb: the default path found a socket:" "$(cat "$log")"
		grep -qx "got [0-9]* bytes: .*permission denied: the replicas' processes (and what they start) may not use the control socket" "$log" ||
			fail "$user, --sandbox $sb: the raw connect was not refused:" "$(cat "$log")"
		sed -n '/^--- environment$/,/^--- status$/p' "$log" | grep -qx 'nothing names it' ||
			fail "$user, --sandbox $sb: the environment names the socket's directory:" "$(cat "$log")"
		grep -qx 'notify socket: given' "$log" || fail "$user, --sandbox $sb: no NOTIFY_SOCKET:" "$(cat "$log")"
		# No seed, no host pid (diehard's, an init's, a program's).
		! grep -Eq '[0-9a-f]{32}' "$log" || fail "$user, --sandbox $sb: a seed leaked:" "$(cat "$log")"
		for pid in $(jq -r '.pid, (.replicas[] | .pid, .init_pid // empty)' "$R/outside.json"); do
			! grep -Eqw "$pid" "$log" || fail "$user, --sandbox $sb: host pid $pid leaked:" "$(cat "$log")"
		done
	done
	# Each refusal counted (six a replica), said as an event, the run right.
	jq -e '.control_refused == 18 and .exit_code == 0 and .divergences == []
		and all(.replicas[]; has("killed") | not)' "$R/r.json" >/dev/null ||
		fail "$user, --sandbox $sb: report: $(jq -c '{control_refused, exit_code, divergences}' "$R/r.json")"
	validate_report "$R/r.json"
	grep -q "control: refused a connection from replica [0-9]*'s process" "$R/run.err" ||
		fail "$user, --sandbox $sb: no refusal event:" "$(cat "$R/run.err")"
	grep -q "the replicas' RUNTIME_DIRECTORY leaves out $R/rt, where the control socket is (they get none)" "$R/run.err" ||
		fail "$user, --sandbox $sb: RUNTIME_DIRECTORY not said:" "$(cat "$R/run.err")"
}

@test "control socket from inside a replica, as root (--sandbox on, auto, off): status, events, --follow, a raw connect and an orphan refused in one line, no seed or host pid; outside still served; the environment does not lead there" {
	require_prog abuse_control
	runner_for root
	write_attack
	local sb
	for sb in on auto off; do
		control_run root "$sb"
		check_control_refused root "$sb"
	done
}

@test "control socket from inside a replica, as nobody (--sandbox on, auto, off): status, events, --follow, a raw connect and an orphan refused in one line, no seed or host pid; outside still served; the environment does not lead there" {
	require_prog abuse_control
	runner_for nobody
	write_attack
	local sb
	for sb in on auto off; do
		control_run nobody "$sb"
		check_control_refused nobody "$sb"
	done
}

# notify_run USER SANDBOX HONEST: abuse_notify under diehard -k 3 under the
# manager, as USER; its files in $W/USER.SANDBOX.HONEST (R).
notify_run() {
	local user=$1 sb=$2 honest=$3
	R=$W/notify.$user.$sb.$honest
	mkdir -p "$R/x"
	chmod -R 777 "$R"
	"${RUNNER[@]}" timeout 60 python3 "$MANAGER" "$R/log" -- "$DIEHARD" --share "$R" -v -k 3 --sandbox "$sb" -r "$R/r.json" \
		"$PROGS/abuse_notify" "$R/x" 3 "$honest" </dev/null >"$R/out" 2>"$R/err" ||
		fail "$user, --sandbox $sb: manager/diehard failed" "$(cat "$R/err")"
	[[ $(<"$R/out") == ok ]] || fail "$user, --sandbox $sb: output '$(cat "$R/out")'" "$(cat "$R/err")"
	! grep -q ' OTHER ' "$R/log" || fail "$user, --sandbox $sb: a message not from diehard:" "$(cat "$R/log")"
	# Every forgery dropped and counted: at least what the attackers
	# counted as sent (orphans' sends come on top).
	local sent dropped
	sent=$(cat "$R"/x/sent.* | awk '{ s += $2 } END { print s + 0 }')
	dropped=$(jq '.notify_dropped' "$R/r.json")
	((sent > 0 && dropped >= sent)) ||
		fail "$user, --sandbox $sb: $sent forgeries sent, $dropped dropped" "$(cat "$R/err")"
	grep -q '^diehard: notify_dropped: ' "$R/err" || fail "$user, --sandbox $sb: no notify_dropped event:" "$(cat "$R/err")"
	jq -e '.exit_code == 0 and .divergences == [] and all(.replicas[]; has("killed") | not)' "$R/r.json" >/dev/null ||
		fail "$user, --sandbox $sb: report: $(jq -c '{exit_code, divergences}' "$R/r.json")"
	validate_report "$R/r.json"
}

# check_notify_forged USER: one honest replica of three: the manager never
# hears READY=1; diehard heard READY=1 from that one only.
check_notify_forged() {
	local user=$1 sb
	for sb in on auto off; do
		notify_run "$user" "$sb" 1
		! grep -q 'READY=1' "$R/log" ||
			fail "$user, --sandbox $sb: READY=1 told with one replica of three ready:" "$(cat "$R/log")" "$(cat "$R/err")"
		[[ $(grep -c 'says READY=1' "$R/err") == 1 ]] ||
			fail "$user, --sandbox $sb: forged READY=1 counted for a sibling:" "$(cat "$R/err")"
		grep -q 'never told READY=1: 1 of the 3 live replicas said it' "$R/err" ||
			fail "$user, --sandbox $sb: no line about readiness:" "$(cat "$R/err")"
	done
}

@test "forged READY=1 to siblings' notify sockets as root (--sandbox on, auto, off), from exited children, orphans, itself and forged credentials: never READY=1 with one replica of three ready; each dropped and counted" {
	require_prog abuse_notify
	runner_for root
	check_notify_forged root
}

@test "forged READY=1 to siblings' notify sockets as nobody (--sandbox on, auto, off), from exited children, orphans and itself: never READY=1 with one replica of three ready; each dropped and counted" {
	require_prog abuse_notify
	runner_for nobody
	check_notify_forged nobody
}

@test "with a real quorum (two honest replicas, one forging for them, root and nobody, --sandbox on and off): READY=1 is told once, after both said it, and only their words count" {
	require_prog abuse_notify
	local user sb before
	for user in root nobody; do
		runner_for "$user"
		for sb in on off; do
			notify_run "$user" "$sb" 2
			[[ $(grep -c 'READY=1' "$R/log") == 1 ]] ||
				fail "$user, --sandbox $sb: READY=1 not told exactly once:" "$(cat "$R/log")" "$(cat "$R/err")"
			[[ $(grep -c 'says READY=1' "$R/err") == 2 ]] ||
				fail "$user, --sandbox $sb: words counted beyond the two honest replicas':" "$(cat "$R/err")"
			before=$(sed -n '/ready: a majority/q;p' "$R/err" | grep -c 'says READY=1')
			((before == 2)) || fail "$user, --sandbox $sb: ready after $before replicas said it:" "$(cat "$R/err")"
		done
	done
}

@test "the replicas' RUNTIME_DIRECTORY leaves out the entries that hold the control socket (the first by default, the one --control names, through a symbolic link) and keeps the others" {
	local out
	mkdir -p "$W/a" "$W/b"
	ln -s "$W/a" "$W/link"
	out=$(RUNTIME_DIRECTORY="$W/a:$W/b" sup -k 3 sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == "$W/b" ]] || fail "default socket in the first entry: the replicas see '$out'"
	out=$(RUNTIME_DIRECTORY="$W/a" sup -k 3 sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == unset ]] || fail "one entry: the replicas see '$out'"
	out=$(RUNTIME_DIRECTORY="$W/a:$W/b" sup -k 3 --control "$W/b/ctl" sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == "$W/a" ]] || fail "--control in the second entry: the replicas see '$out'"
	out=$(RUNTIME_DIRECTORY="$W/link:$W/b" sup -k 3 --control "$W/a/ctl" sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == "$W/b" ]] || fail "an entry that links to the socket's directory: the replicas see '$out'"
	out=$(RUNTIME_DIRECTORY="$W/a:$W/b" sup -k 3 --control "$T/ctl" sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == "$W/a:$W/b" ]] || fail "--control elsewhere: the replicas see '$out'"
	out=$(unset RUNTIME_DIRECTORY && sup -k 3 sh -c 'echo "${RUNTIME_DIRECTORY-unset}"')
	[[ $out == unset ]] || fail "no RUNTIME_DIRECTORY: the replicas see '$out'"
}
