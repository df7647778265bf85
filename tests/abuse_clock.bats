#!/usr/bin/env bats
# Abuse: a replica attacking the fast clock path's shared memory
# (supervisor/virt/clockfs.h, allocator/clockpage.h; docs/SANDBOX.md, "The
# clock pages"). Each slot's page is a file of its own: a replica can write
# its own page and nothing else, cannot change any page's size, and what it
# writes into its own costs only itself: its siblings are never killed nor
# made to disagree, and diehard's loop never stalls. Run as root and as the
# unprivileged user nobody, sandboxed and not (the page protections do not
# depend on namespaces; without them a replica can still reach a sibling's
# descriptors through /proc, which docs/SANDBOX.md says).

load helpers

setup() {
	require_diehard
	require_jq
	require_prog abuse_clock
	T=$BATS_TEST_TMPDIR
	chmod 755 "$T"
	# Where either user writes (reports, the lock directories): the test's
	# own directory may sit in one nobody cannot enter.
	W=$(mktemp -d /tmp/diehard-abuse-clock.XXXXXX)
	chmod 1777 "$W"
	export SUP_TIMEOUT=120
}

teardown() {
	rm -rf "$W"
}

# run_as WHO ARGS...: diehard ARGS as root (the test's user) or nobody.
run_as() {
	local who=$1
	shift
	if [[ $who == nobody ]]; then
		as_nobody timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$W" "$@"
	else
		timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$W" "$@"
	fi
}

# probe WHO SANDBOX: every attempt on another page, diehard's page, the
# directory's mount and the own page's size is refused, alike in every
# replica.
probe() {
	local who=$1 mode=$2
	capture "$T/probe" run_as "$who" -k 3 --sandbox "$mode" -r "$W/probe-$who-$mode.json" "$PROGS/abuse_clock" probe
	[[ $(<"$T/probe.rc") == 0 ]] || fail "$who, --sandbox $mode: exit $(<"$T/probe.rc")" "$(head -c 2000 "$T/probe.err")"
	local last
	last=$(tail -1 "$T/probe.out")
	[[ $last =~ ^probed\ ([0-9]+)\ open\ 0$ ]] && ((BASH_REMATCH[1] >= 60)) ||
		fail "$who, --sandbox $mode: $last" "$(grep OPEN "$T/probe.out")"
	! grep -q 'OPEN\|failed' "$T/probe.out" || fail "$(grep 'OPEN\|failed' "$T/probe.out")"
	jq -e 'all(.replicas[]; .status == 0 and (has("killed") | not))' "$W/probe-$who-$mode.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, killed}]' "$W/probe-$who-$mode.json")"
}

@test "root, --sandbox on, auto, off: no page but its own can be written, no page's size changed (66 ways, all refused)" {
	[[ $(id -u) == 0 ]] || skip "not root"
	for mode in on auto off; do
		probe root "$mode"
	done
}

@test "nobody, --sandbox on, auto, off: no page but its own can be written, no page's size changed (66 ways, all refused)" {
	require_nobody
	for mode in on auto off; do
		probe nobody "$mode"
	done
}

# scribble WHO SANDBOX MODE: one replica writes MODE over its whole page
# 100 times over, reading clocks meanwhile; every replica's three threads
# read 4000 rounds of three clocks (36000 reads; the bad replica's, its
# page damaged, each a round trip to diehard: most of the run's time). The
# run commits their output, exit 0; nobody but the bad replica is killed,
# and the others read most (more than half) in their replicas.
scribble() {
	local who=$1 sandbox=$2 mode=$3 lock=$W/lock-$1-$2-$3 report=$W/s-$1-$2-$3.json
	capture "$T/s" run_as "$who" -k 3 --sandbox "$sandbox" --no-respawn -r "$report" \
		"$PROGS/abuse_clock" scribble "$mode" 100 4000 "$lock"
	local what="$who, --sandbox $sandbox, $mode"
	[[ $(<"$T/s.rc") == 0 && $(<"$T/s.out") == "ok 4000" ]] ||
		fail "$what: exit $(<"$T/s.rc"), output $(head -c 200 "$T/s.out")" "$(head -c 2000 "$T/s.err")"
	local bad
	bad=$(<"$lock/seed") || fail "$what: no bad replica"
	jq -e --arg bad "$bad" '[.replicas[] | select(.seed != $bad)] | length == 2 and
		all(.[]; .status == 0 and (has("killed") | not) and .clock_reads_in_replica > 18000)' "$report" >/dev/null ||
		fail "$what: the honest replicas (the bad one's seed $bad):" \
			"$(jq -c '[.replicas[] | {seed, status, killed, clock_reads_in_replica}]' "$report")"
}

@test "root: a replica filling its page with zeros, 0xff or random bytes, or its counts with huge numbers, while all read clocks: the others never killed, right output (--sandbox on, off)" {
	[[ $(id -u) == 0 ]] || skip "not root"
	for sandbox in on off; do
		for mode in zero ones random counts; do
			scribble root "$sandbox" "$mode"
		done
	done
}

@test "nobody: a replica filling its page with zeros, 0xff or random bytes, or its counts with huge numbers, while all read clocks: the others never killed, right output (--sandbox on, off)" {
	require_nobody
	for sandbox in on off; do
		for mode in zero ones random counts; do
			scribble nobody "$sandbox" "$mode"
		done
	done
}

@test "a replica proposing every next entry in its page and never publishing: the others read on in their replicas (root and nobody)" {
	scribble root on propose
	if [[ $(id -u) == 0 ]] && as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null; then
		scribble nobody on propose
	fi
}

# The time from SIGTERM to diehard's exit while a replica fills its page
# with MODE over and over and the others spin on their clocks: under 5 s
# (a hang guard: it takes milliseconds; a diehard stuck in a loop over a
# page would never end).
term_while_scribbling() {
	local who=$1 mode=$2 lock=$W/term-$1-$2 pid start elapsed
	local cmd=("$DIEHARD" --share "$W" -k 3 --no-respawn "$PROGS/abuse_clock" scribble "$mode" 1000000000 1000000000 "$lock")
	if [[ $who == nobody ]]; then
		# setpriv itself (as_nobody is a function: in the background it
		# would be a subshell's child), so that $! is diehard's pid.
		setpriv --reuid=65534 --regid=65534 --clear-groups "${cmd[@]}" >"$T/term.out" 2>"$T/term.err" &
	else
		"${cmd[@]}" >"$T/term.out" 2>"$T/term.err" &
	fi
	pid=$! # diehard itself (setpriv execs it)
	wait_until 30 test -e "$lock/seed" || {
		kill -9 "$pid"
		fail "$who $mode: the bad replica never started" "$(head -c 1000 "$T/term.err")"
	}
	sleep 0.5
	start=$(now_ms)
	kill -TERM "$pid"
	wait_until 5 eval '! proc_alive '"$pid" || {
		kill -9 "$pid" 2>/dev/null
		fail "$who $mode: diehard did not end within 5 s of SIGTERM"
	}
	elapsed=$(($(now_ms) - start))
	wait "$pid" || true
	echo "# $who $mode: diehard ended $elapsed ms after SIGTERM" >&3
}

@test "SIGTERM while a replica fills its page with 0x00, 0xff, random bytes, or its counts with huge numbers: diehard ends at once (root and nobody)" {
	for mode in zero ones random counts; do
		term_while_scribbling root "$mode"
	done
	if [[ $(id -u) == 0 ]] && as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null; then
		for mode in zero ones random counts; do
			term_while_scribbling nobody "$mode"
		done
	fi
}

@test "a replica proposing the next ring of entries from diehard's harvest on, over and over (it reads diehard's page): the others agree and read on in their replicas" {
	require_prog nd_fastpath
	capture "$T/stall" sup -k 3 --no-respawn -r "$W/stall.json" "$PROGS/nd_fastpath" stall 20000
	[[ $(<"$T/stall.rc") == 0 && $(head -1 "$T/stall.out") == "ok stall" ]] ||
		fail "exit $(<"$T/stall.rc"), output $(head -c 200 "$T/stall.out")" "$(head -c 2000 "$T/stall.err")"
	# Slot 0 stalls; the others read 120000 clocks each, nearly all in
	# their replicas.
	jq -e '[.replicas[] | select(.slot != 0)] | length == 2 and
		all(.[]; .status == 0 and (has("killed") | not) and .clock_reads_in_replica > 100000)' "$W/stall.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {slot, status, killed, clock_reads_in_replica}]' "$W/stall.json")"
}

@test "a replica asking diehard again and again for clock entries as far ahead as the log's bound allows: diehard does not settle past the others (the log's cap would drop what they need), they agree and commit (root and nobody)" {
	require_prog nd_fastpath
	capture "$T/push" sup -k 3 --no-respawn -r "$W/push.json" "$PROGS/nd_fastpath" push 20000
	[[ $(<"$T/push.rc") == 0 && $(tail -1 "$T/push.out") == "ok push" && $(grep -c '' "$T/push.out") == 10001 ]] ||
		fail "exit $(<"$T/push.rc"), $(grep -c '' "$T/push.out") lines" "$(head -c 2000 "$T/push.err")"
	jq -e '[.replicas[] | select(.slot != 0)] | all(.status == 0 and (has("killed") | not))' "$W/push.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {slot, status, killed}]' "$W/push.json")"
	if [[ $(id -u) == 0 ]] && as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null; then
		capture "$T/push" as_nobody timeout 120 "$DIEHARD" -k 3 --no-respawn "$PROGS/nd_fastpath" push 20000
		[[ $(<"$T/push.rc") == 0 && $(tail -1 "$T/push.out") == "ok push" ]] ||
			fail "nobody: exit $(<"$T/push.rc")" "$(head -c 2000 "$T/push.err")"
	fi
}
