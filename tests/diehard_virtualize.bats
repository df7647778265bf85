#!/usr/bin/env bats
# Virtualization: in every replica (and every process a replica starts) the
# clocks (clock_gettime with any clock id, gettimeofday, time, and so
# timespec_get and ftime), getrandom(2) and reads of /dev/urandom and
# /dev/random give the same values, so that programs that look at the time or
# at random bytes still agree: the n-th call of a kind gets real time (taken by
# the first replica to get there) or bytes from a per-run random stream.
# Real programs (date, ls, python3, perl, bash, sh -c date), dynamically and
# statically linked helpers, threads, many calls in a row, bad arguments (the
# replica gets EFAULT or EINVAL as from the kernel), a replica whose call
# differs (a "call divergence"), --no-virtualize, and the report.
#
# "Real time" is checked against the test's own clock read just before and just
# after the run: a value must lie between the two (the first one rounded down
# to the second, for clocks that count whole seconds).

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	# This file runs twice: as itself, where clock reads take the fast
	# path (in the replicas' shared memory) wherever libdiehard.so is
	# loaded, and as diehard_virtualize_notify.bats (a link to it), where
	# every read asks diehard through seccomp user-notify.
	if [[ $BATS_TEST_FILENAME == *_notify.bats ]]; then
		SUP_FLAGS=(--no-fast-clocks)
	fi
	if [[ -x /usr/bin/python3 ]]; then
		PYTHON=/usr/bin/python3
	else
		PYTHON=$(command -v python3) || PYTHON=python3
	fi
}

# in_window VALUE WHAT: VALUE is a number of seconds since the epoch between
# the clock readings T0 (rounded down) and T1 taken around the last run.
# T0 is taken 50 ms early: time(), the *_COARSE clocks and the times the
# kernel stamps on files come from its coarse clock, which lags the clock
# $EPOCHREALTIME reads by up to a tick (a file touched at 283.001 may say 282).
in_window() {
	awk -v v="$1" -v lo="$T0" -v hi="$T1" 'BEGIN {
		exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && int(lo - 0.05) <= v + 0 && v + 0 <= hi + 0) }' ||
		fail "$2: '$1' is not a time between $T0 and $T1 (the test's clock before and after the run)"
}

# is_number VALUE WHAT: VALUE is a non-negative decimal number.
is_number() {
	[[ $1 =~ ^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$ ]] || fail "$2: '$1' is not a number"
}

# clean_report REPORT: the report says the run was virtualized, no replica
# made a call the others did not (call_divergences), none wrote anything else
# or was killed, all exited 0, and every call was virtualized.
clean_report() {
	jq -e '.virtualize == true and .call_divergences == [] and .divergences == []
		and all(.replicas[]; (has("killed") | not) and .status == 0
			and (.calls | type) == "object" and .unvirtualized == 0)' "$1" >/dev/null ||
		fail "the report of a clean virtualized run:" \
			"$(jq -c '{virtualize, call_divergences, divergences, replicas: [.replicas[] | {index, status, killed, unvirtualized, calls}]}' "$1")"
}

# calls_at_least REPORT CALL N: every replica made at least N calls of CALL
# that diehard answered (e.g. "clock_gettime(CLOCK_REALTIME)", "getrandom").
calls_at_least() {
	jq -e --arg c "$2" --argjson n "$3" 'all(.replicas[]; (.calls[$c] // 0) >= $n)' "$1" >/dev/null ||
		fail "not every replica made $3 or more virtualized calls of $2:" "$(jq -c '[.replicas[] | .calls]' "$1")"
}

# same_calls REPORT: every replica made the same calls, as many of each kind.
same_calls() {
	jq -e '[.replicas[].calls] | unique | length == 1' "$1" >/dev/null ||
		fail "the replicas made different calls:" "$(jq -c '[.replicas[] | .calls]' "$1")"
}

# virt_run NAME LINES CMD...: diehard -k $K (default 3) -r $T/NAME.json CMD
# between two readings of the clock (T0, T1 for in_window).  It must exit 0,
# write exactly LINES lines to stdout, and leave a clean report.  Output in
# $T/NAME.out, $T/NAME.err.
virt_run() {
	local name=$1 lines=$2 n
	shift 2
	T0=$EPOCHREALTIME
	capture "$T/$name" sup -k "${K:-3}" -r "$T/$name.json" "$@"
	T1=$EPOCHREALTIME
	[[ $(<"$T/$name.rc") == 0 ]] ||
		fail "diehard -k ${K:-3} $* exited with $(<"$T/$name.rc")" "$(head -c 2000 "$T/$name.err")" \
			"--- stdout ---" "$(head -c 2000 "$T/$name.out")"
	n=$(wc -l <"$T/$name.out")
	((n == lines)) || fail "diehard -k ${K:-3} $*: $n lines, expected $lines:" "$(head -c 2000 "$T/$name.out")"
	clean_report "$T/$name.json"
}

@test "date: one line, the same in every replica, at the real time; the report: virtualized, no call divergence" {
	virt_run date 1 date
	# date reads CLOCK_REALTIME through the vDSO: diehard saw (and answered)
	# the call in every replica, and every replica made the same calls.
	calls_at_least "$T/date.json" "clock_gettime(CLOCK_REALTIME)" 1
	same_calls "$T/date.json"
	virt_run epoch 1 date +%s
	in_window "$(<"$T/epoch.out")" "diehard -k 3 date +%s"
	# Nanoseconds: three replicas agree only if they got the same value.
	virt_run nanos 1 date +%s.%N
	in_window "$(<"$T/nanos.out")" "diehard -k 3 date +%s.%N"
}

@test "k=1: date is virtualized the same way (one line, real time, calls counted)" {
	K=1 virt_run date 1 date +%s.%N
	in_window "$(<"$T/date.out")" "diehard -k 1 date +%s.%N"
	calls_at_least "$T/date.json" "clock_gettime(CLOCK_REALTIME)" 1
	jq -e '.k == 1 and (.replicas | length) == 1' "$T/date.json" >/dev/null ||
		fail "report: $(jq -c '{k, replicas}' "$T/date.json")"
}

@test "ls -l --time-style=+%s: the listing, with the files' real times" {
	mkdir "$T/dir"
	T0=$EPOCHREALTIME
	touch "$T/dir/a" "$T/dir/b" "$T/dir/c"
	local c0=$T0 c1=$EPOCHREALTIME
	virt_run ls 4 ls -l --time-style=+%s "$T/dir"
	[[ $(head -n 1 "$T/ls.out") == "total "* ]] || fail "no total line:" "$(cat "$T/ls.out")"
	local perms links owner group size mtime name
	T0=$c0 T1=$c1
	while read -r perms links owner group size mtime name; do
		[[ $perms == total ]] && continue
		in_window "$mtime" "the time ls shows for $name"
	done <"$T/ls.out"
	[[ $(awk 'NR > 1 { print $7 }' "$T/ls.out" | tr '\n' ' ') == "a b c " ]] ||
		fail "the listing:" "$(cat "$T/ls.out")"
}

@test "python3: time.time(), datetime.now(), monotonic(), perf_counter(), process_time() agree; the wall clock is real" {
	virt_run py 5 "$PYTHON" -c 'import time, datetime
print(time.time())
print(datetime.datetime.now())
print(time.monotonic())
print(time.perf_counter())
print(time.process_time())'
	mapfile -t v <"$T/py.out"
	in_window "${v[0]}" "time.time()"
	[[ ${v[1]} =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$ ]] ||
		fail "datetime.datetime.now(): '${v[1]}'"
	in_window "$(date -d "${v[1]}" +%s.%N)" "datetime.datetime.now() (${v[1]}, local time)"
	is_number "${v[2]}" "time.monotonic()"
	is_number "${v[3]}" "time.perf_counter()"
	is_number "${v[4]}" "time.process_time()"
}

@test "perl: time and Time::HiRes::time are real and agree" {
	virt_run perl 2 perl -MTime::HiRes -e 'print time, "\n", Time::HiRes::time(), "\n"'
	mapfile -t v <"$T/perl.out"
	in_window "${v[0]}" "perl time"
	in_window "${v[1]}" "perl Time::HiRes::time"
}

@test "bash: \$EPOCHREALTIME, \$EPOCHSECONDS (real) and \$SRANDOM (getrandom) agree" {
	# Not $RANDOM: bash seeds it with its pid, which differs between replicas.
	virt_run bash 1 bash -c 'echo $EPOCHREALTIME $EPOCHSECONDS $SRANDOM'
	local realtime seconds srandom extra
	read -r realtime seconds srandom extra <"$T/bash.out"
	[[ -n $srandom && -z $extra ]] || fail "expected three fields:" "$(cat "$T/bash.out")"
	in_window "$realtime" "\$EPOCHREALTIME"
	in_window "$seconds" "\$EPOCHSECONDS"
	[[ $srandom =~ ^[0-9]+$ ]] || fail "\$SRANDOM: '$srandom'"
	calls_at_least "$T/bash.json" getrandom 1
}

@test "nd_clocks: every clock id, gettimeofday, time, timespec_get and ftime agree, the wall clocks are real" {
	require_prog nd_clocks
	virt_run clocks 13 "$PROGS/nd_clocks"
	local name value
	while read -r name value; do
		case $name in
		CLOCK_REALTIME | CLOCK_REALTIME_COARSE | gettimeofday | 'time(NULL)' | 'time(&t)' | timespec_get | ftime)
			in_window "$value" "$name" ;;
		*)
			is_number "$value" "$name" ;;
		esac
	done <"$T/clocks.out"
	local r=$T/clocks.json
	calls_at_least "$r" "clock_gettime(CLOCK_REALTIME)" 1
	calls_at_least "$r" "clock_gettime(CLOCK_MONOTONIC)" 1
	calls_at_least "$r" gettimeofday 1
	same_calls "$r"
	# All 13 readings went through diehard, whatever the kind they count as.
	jq -e 'all(.replicas[]; ([.calls[]] | add) >= 13)' "$r" >/dev/null ||
		fail "fewer than 13 virtualized calls:" "$(jq -c '[.replicas[].calls]' "$r")"
}

@test "sh -c 'date; date': children of a replica are virtualized too" {
	virt_run sh 2 sh -c 'date +%s.%N; date +%s.%N'
	mapfile -t v <"$T/sh.out"
	in_window "${v[0]}" "the first date"
	in_window "${v[1]}" "the second date"
	awk -v a="${v[0]}" -v b="${v[1]}" 'BEGIN { exit !(a + 0 <= b + 0) }' ||
		fail "the second date (${v[1]}) is before the first (${v[0]})"
}

@test "a statically linked program: its vDSO clock calls are virtualized too" {
	[[ -x $PROGS/static/nd_static ]] || fail "$PROGS/static/nd_static does not exist: run make first"
	virt_run static 3 "$PROGS/static/nd_static"
	local name value
	while read -r name value; do
		in_window "$value" "nd_static: $name"
	done <"$T/static.out"
	calls_at_least "$T/static.json" "clock_gettime(CLOCK_REALTIME)" 1
	calls_at_least "$T/static.json" gettimeofday 1
}

@test "a statically linked program's raw open of /dev/urandom, with O_CLOEXEC or not: the same bytes in every replica" {
	# With the fast path, an O_CLOEXEC open made from a shared library
	# stays in the kernel (filter.c): a static program's comes from its
	# own image, and is still seen.
	local m
	for m in plain cloexec; do
		virt_run "s$m" 1 "$PROGS/static/nd_static" urandom "$m"
		[[ $(<"$T/s$m.out") =~ ^[0-9a-f]{32}$ ]] || fail "$m: not 16 bytes in hex:" "$(<"$T/s$m.out")"
		calls_at_least "$T/s$m.json" "open(/dev/urandom)" 1
	done
}

@test "python3 with hash randomization on: a set prints in the same order in every replica (20 runs)" {
	# helpers.bash exports PYTHONHASHSEED=0, which would make this pass
	# without any virtualization: every run here has it unset, so python
	# seeds its string hashes from getrandom.
	local i
	for i in $(seq 20); do
		capture "$T/set" env -u PYTHONHASHSEED timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T" -k 3 \
			"$PYTHON" -c 'print({"a","b","c","d","e","f"})'
		[[ $(<"$T/set.rc") == 0 ]] || fail "run $i: exit $(<"$T/set.rc")" "$(head -c 2000 "$T/set.err")"
		[[ $(<"$T/set.out") =~ ^\{(\'[a-f]\',\ ){5}\'[a-f]\'\}$ ]] || fail "run $i: stdout $(cat "$T/set.out")"
	done
	# The same without virtualization: the replicas' orders differ, so
	# (nearly always) there is no majority.  This shows the loop above can fail.
	local split=0
	for i in $(seq 5); do
		capture "$T/novirt" env -u PYTHONHASHSEED timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T" -k 3 --no-virtualize \
			"$PYTHON" -c 'print({"a","b","c","d","e","f"})'
		[[ $(<"$T/novirt.rc") == 123 ]] && split=$((split + 1))
	done
	((split > 0)) || fail "with --no-virtualize, 5 runs out of 5 still agreed: is PYTHONHASHSEED set?"
}

@test "nd_fork_random: two child processes draw random bytes in an order each replica's heap picks; each process gets the same bytes in every replica (per-process numbering), 6 runs" {
	require_prog nd_fork_random
	local i
	for i in 1 2 3 4 5 6; do
		virt_run fork$i 2 "$PROGS/nd_fork_random"
		grep -Eq '^A [0-9a-f]{64}$' "$T/fork$i.out" && grep -Eq '^B [0-9a-f]{64}$' "$T/fork$i.out" ||
			fail "run $i printed:" "$(cat "$T/fork$i.out")"
		[[ $(sed -n 1p "$T/fork$i.out" | cut -c3-) != $(sed -n 2p "$T/fork$i.out" | cut -c3-) ]] ||
			fail "run $i: both children got the same bytes"
		same_calls "$T/fork$i.json"
	done
}

@test "nd_tree_random: a process tree whose branches run in an order each replica's heap picks, threads started on demand and double forks: each grandchild draws the same bytes in every replica (numbered by place in the tree, not by pid), 6 runs, also unsandboxed" {
	require_prog nd_tree_random
	local i opts
	for i in 1 2 3 4 5 6; do
		opts=()
		((i > 4)) && opts=(--sandbox off)
		virt_run tree$i 6 "${opts[@]}" "$PROGS/nd_tree_random"
		for w in 0 1 2; do
			for g in 0 1; do
				grep -Eq "^$w $g [0-9a-f]{$((2 * (8 + 4 * w + g)))}\$" "$T/tree$i.out" ||
					fail "run $i: no line for grandchild $w $g:" "$(cat "$T/tree$i.out")"
			done
		done
		[[ $(cut -d' ' -f3 "$T/tree$i.out" | cut -c1-16 | sort -u | wc -l) == 6 ]] ||
			fail "run $i: two grandchildren got the same bytes:" "$(cat "$T/tree$i.out")"
		same_calls "$T/tree$i.json"
	done
}

@test "nd_fork_signals: 200 forks under a 1 ms timer's signal, its handler with SA_RESTART and without: no fork fails with EINTR, none is counted twice (each child draws the same bytes in every replica), 2 runs each" {
	require_prog nd_fork_signals
	local i how
	for i in 1 2; do
		for how in restart plain; do
			virt_run fs$how$i 200 "$PROGS/nd_fork_signals" 200 1000 $how
			[[ $(cut -d' ' -f2 "$T/fs$how$i.out" | sort -u | wc -l) == 200 ]] ||
				fail "run $i ($how): the children drew the same bytes" "$(sort "$T/fs$how$i.out" | uniq -c -f1 | sort -rn | head -5)"
			same_calls "$T/fs$how$i.json"
		done
	done
}

@test "nd_clock_signals: 6000 clock reads (clock_gettime, gettimeofday, time) while another thread signals the reader as fast as it can (up to 16 signals a read), the handler without SA_RESTART: none fails with EINTR, none goes back (a notified read interrupted before diehard took it is made again)" {
	require_prog nd_clock_signals
	virt_run cs 1 "$PROGS/nd_clock_signals" 6000
	[[ $(<"$T/cs.out") == "6000 reads: 0 failed, 0 went back" ]] || fail "the reads under signals:" "$(<"$T/cs.out")"
}

@test "nd_random: getrandom, /dev/urandom, /dev/random and fopen give the same bytes in every replica, other bytes in each run" {
	require_prog nd_random
	# The helper itself (plainly run).
	capture "$T/plain" plain "$PROGS/nd_random"
	[[ $(<"$T/plain.rc") == 0 && $(wc -l <"$T/plain.out") == 7 ]] ||
		fail "plain nd_random: exit $(<"$T/plain.rc")" "$(cat "$T/plain.out" "$T/plain.err")"
	virt_run r1 7 "$PROGS/nd_random"
	virt_run r2 7 "$PROGS/nd_random"
	local expect=(getrandom:64 getrandom_nonblock:32 dev_urandom:64 dev_random:64 fopen_urandom:32
		getrandom_1MiB_fnv1a:16 dev_urandom_1MiB_fnv1a:16)
	mapfile -t a <"$T/r1.out"
	mapfile -t b <"$T/r2.out"
	local i name hex
	for i in "${!expect[@]}"; do
		name=${expect[i]%%:*}
		[[ ${a[i]} =~ ^$name\ ([0-9a-f]{${expect[i]##*:}})$ ]] || fail "line $((i + 1)): '${a[i]}', expected $name and hex"
		hex=${BASH_REMATCH[1]}
		[[ $hex =~ [1-9a-f] ]] || fail "$name: all zeros"
		# A per-run stream, not a constant: the next run gets other bytes.
		[[ ${b[i]} != "${a[i]}" ]] || fail "two runs gave the same $name: ${a[i]}"
	done
	# And one stream: no two reads gave the same bytes.
	local dup
	dup=$(cut -d' ' -f2 "$T/r1.out" | sort | uniq -d)
	[[ -z $dup ]] || fail "the same bytes came twice in one run: $dup"
	local r=$T/r1.json
	calls_at_least "$r" getrandom 3
	calls_at_least "$r" "open(/dev/urandom)" 3
	calls_at_least "$r" "open(/dev/random)" 1
	same_calls "$r"
}

@test "--no-virtualize: nd_random's replicas read different bytes, so no majority (123); the report says virtualize: false" {
	require_prog nd_random
	capture "$T/run" sup -k 3 --no-virtualize -r "$T/r.json" "$PROGS/nd_random"
	[[ $(<"$T/run.rc") == 123 ]] || fail "exit $(<"$T/run.rc"), expected 123" "$(head -c 2000 "$T/run.err")"
	jq -e '.virtualize == false and .exit_code == 123' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{virtualize, exit_code}' "$T/r.json")"
	# A program that does not look at random bytes or sub-second time still runs.
	capture "$T/date" sup -k 3 --no-virtualize -r "$T/d.json" date +%Y
	[[ $(<"$T/date.rc") == 0 && $(<"$T/date.out") == "$(date +%Y)" ]] ||
		fail "diehard -k 3 --no-virtualize date +%Y: exit $(<"$T/date.rc"), stdout $(cat "$T/date.out")" "$(head -c 2000 "$T/date.err")"
	jq -e '.virtualize == false' "$T/d.json" >/dev/null || fail "report: $(jq -c '{virtualize}' "$T/d.json")"
}

@test "nd_threads: four threads reading the clocks at once finish, and each sees time go forward" {
	require_prog nd_threads
	local SUP_TIMEOUT=180 # a hang guard: every call is a round trip to diehard
	virt_run threads 1 "$PROGS/nd_threads" 10000
	[[ $(<"$T/threads.out") == 'ok: 4 threads x 10000 rounds' ]] || fail "stdout: $(cat "$T/threads.out")"
	calls_at_least "$T/threads.json" "clock_gettime(CLOCK_MONOTONIC)" 40000
	calls_at_least "$T/threads.json" gettimeofday 40000
}

@test "nd_loop: 100000 clock_gettime calls in a row finish, monotonic, every one virtualized" {
	require_prog nd_loop
	local SUP_TIMEOUT=180 # a hang guard: every call is a round trip to diehard
	virt_run loop 1 "$PROGS/nd_loop" 100000
	[[ $(<"$T/loop.out") == '100000 calls' ]] || fail "stdout: $(cat "$T/loop.out")"
	calls_at_least "$T/loop.json" "clock_gettime(CLOCK_MONOTONIC)" 100000
}

@test "nd_efault: bad pointers give EFAULT, a bad clock id or getrandom flags EINVAL, in the replica (k=3 and k=1)" {
	require_prog nd_efault
	local k
	for k in 3 1; do
		T0=$EPOCHREALTIME
		capture "$T/k$k" sup -k "$k" -r "$T/k$k.json" "$PROGS/nd_efault"
		T1=$EPOCHREALTIME
		[[ $(<"$T/k$k.rc") == 0 ]] ||
			fail "-k $k: exit $(<"$T/k$k.rc"), expected 0" "$(head -c 2000 "$T/k$k.err")" "--- stdout ---" "$(cat "$T/k$k.out")"
		same_bytes <(printf '%s\n' \
			'clock_gettime(CLOCK_REALTIME, 16): EFAULT ok' \
			'gettimeofday(16, NULL): EFAULT ok' \
			'time(16): EFAULT ok' \
			'getrandom(16, 16, 0): EFAULT ok' \
			'clock_gettime(12345, &ts): EINVAL ok' \
			'getrandom(buf, 16, 0x100): EINVAL ok') <(head -n 6 "$T/k$k.out") "-k $k: the error checks"
		[[ $(wc -l <"$T/k$k.out") == 7 ]] || fail "-k $k: stdout:" "$(cat "$T/k$k.out")"
		local name value
		read -r name value < <(tail -n 1 "$T/k$k.out")
		[[ $name == CLOCK_REALTIME ]] || fail "-k $k: last line: $name $value"
		in_window "$value" "-k $k: the clock after the bad calls"
		jq -e '.virtualize == true and .call_divergences == [] and .exit_code == 0
			and all(.replicas[]; (has("killed") | not) and .status == 0)' "$T/k$k.json" >/dev/null ||
			fail "-k $k: report:" "$(jq -c '{virtualize, call_divergences, exit_code, replicas: [.replicas[] | {index, status, killed}]}' "$T/k$k.json")"
	done
}

# winner_pid: the seed of the replica that took the lock ($T/lock; pids are
# alike in sandboxed replicas, their DIEHARD_SEED is not).
winner_pid() {
	[[ -s $T/lock/pid ]] || fail "no replica took the lock"
	cat "$T/lock/pid"
}

# check_mismatch WHEN: nd_mismatch's lock winner asks getrandom for 8 bytes,
# the others for 16 (WHEN: the winner's call comes "early" or "late"); the
# output agrees, so exit 0; the report has exactly one call divergence, of the
# winner's getrandom, and -v names it.
check_mismatch() {
	require_prog nd_mismatch
	capture "$T/run" sup -v -k 3 -r "$T/r.json" "$PROGS/nd_mismatch" "$T/lock" "$1"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(head -c 2000 "$T/run.err")"
	[[ $(<"$T/run.out") == done ]] || fail "stdout: $(cat "$T/run.out")"
	local pid idx
	pid=$(winner_pid)
	idx=$(jq --arg seed "$pid" '.replicas[] | select(.seed == $seed) | .index' "$T/r.json")
	[[ $idx =~ ^[0-9]+$ ]] || fail "no replica with seed $pid in the report:" "$(jq -c '[.replicas[] | {index, pid}]' "$T/r.json")"
	jq -e --argjson i "$idx" '
		(.call_divergences | length) == 1
		and (.call_divergences[0] | .replica == $i and .call == "getrandom"
			and (.index | type) == "number" and (.time | type) == "number"
			and (.expected | test("(^|[^0-9])16([^0-9]|$)"))
			and (.got | test("(^|[^0-9])8([^0-9]|$)")))' "$T/r.json" >/dev/null ||
		fail "the report does not show one getrandom call divergence of replica $idx (8 bytes, not 16):" \
			"$(jq -c '{call_divergences, replicas: [.replicas[] | {index, pid, calls}]}' "$T/r.json")"
	grep -q 'call divergence' "$T/run.err" || fail "-v does not report the call divergence:" "$(cat "$T/run.err")"
}

@test "a replica that reads another clock than the others: call divergences on both clocks, that replica, exit 0" {
	require_prog nd_mismatch
	capture "$T/run" sup -v -k 3 -r "$T/r.json" "$PROGS/nd_mismatch" "$T/lock" clock
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == done ]] ||
		fail "exit $(<"$T/run.rc"), stdout $(cat "$T/run.out")" "$(head -c 2000 "$T/run.err")"
	local pid idx
	pid=$(winner_pid)
	idx=$(jq --arg seed "$pid" '.replicas[] | select(.seed == $seed) | .index' "$T/r.json")
	jq -e --argjson i "$idx" '
		(.call_divergences | length) == 2 and all(.call_divergences[]; .replica == $i)
		and ([.call_divergences[] | .call] | sort) == ["clock_gettime(CLOCK_MONOTONIC)", "clock_gettime(CLOCK_REALTIME)"]
		and any(.call_divergences[]; .call == "clock_gettime(CLOCK_REALTIME)" and .got == "1 call" and .expected == "0 calls")' 		"$T/r.json" >/dev/null ||
		fail "the report does not blame replica $idx for reading CLOCK_REALTIME instead of CLOCK_MONOTONIC:" \
			"$(jq -c '{call_divergences, replicas: [.replicas[] | {index, pid, calls}]}' "$T/r.json")"
	grep -q "call divergence: replica $idx, clock_gettime(CLOCK_REALTIME)" "$T/run.err" ||
		fail "-v does not report it:" "$(cat "$T/run.err")"
}

@test "a replica whose getrandom differs in size (its call first): one call divergence, that replica, exit 0" {
	check_mismatch early
}

@test "a replica whose getrandom differs in size (its call last): one call divergence, that replica, exit 0" {
	check_mismatch late
}

@test "opening /dev/urandom while sibling replicas exit: every open gets its descriptor (60 runs)" {
	# The fd is installed and the call answered in one ioctl, which a
	# signal (a replica's SIGCHLD) once interrupted: the open then returned
	# 0 in one replica in about 1 run of 15.
	require_prog nd_open_exit
	local i
	for i in $(seq 60); do
		capture "$T/o" sup -k 3 -r "$T/o.json" "$PROGS/nd_open_exit"
		[[ $(<"$T/o.rc") == 0 && $(<"$T/o.out") == ok ]] ||
			fail "run $i: exit $(<"$T/o.rc")" "$(<"$T/o.out")" "$(<"$T/o.err")"
		jq -e '.divergences == [] and all(.replicas[]; .status == 0)' "$T/o.json" >/dev/null ||
			fail "run $i: a replica's open went wrong:" "$(jq -c '{divergences, replicas: [.replicas[] | {index, status, killed}]}' "$T/o.json")"
	done
}

@test "a replica spinning on clock reads is killed as a straggler mid-call; the others' output and status, no hang" {
	# The lock winner reads the clock forever (every read a round trip
	# to diehard); the others print and exit. diehard must kill it while
	# it waits in a notified call, and neither it nor diehard may hang.
	require_prog nd_loop
	local start elapsed
	start=$(now_ms)
	capture "$T/spin" sup -k 3 --timeout 1 -r "$T/spin.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then echo $DIEHARD_SEED >"$1/lock/pid"; exec "$2" 1000000000000; fi
		echo done' sh "$T" "$PROGS/nd_loop"
	elapsed=$(($(now_ms) - start))
	[[ $(<"$T/spin.rc") == 0 && $(<"$T/spin.out") == done ]] ||
		fail "exit $(<"$T/spin.rc"), stdout $(cat "$T/spin.out")" "$(head -c 2000 "$T/spin.err")"
	local pid
	pid=$(jq --arg seed "$(<"$T/lock/pid")" '.replicas[] | select(.seed == $seed) | .pid' "$T/spin.json")
	jq -e --argjson pid "$pid" '.replicas[] | select(.pid == $pid) | (.killed | test("straggler")) and .signal == 9' \
		"$T/spin.json" >/dev/null || fail "report: $(jq -c '[.replicas[] | {pid, status, killed}]' "$T/spin.json")"
	proc_gone "$pid" || fail "the spinning replica (pid $pid) is still running"
	((elapsed < 15000)) || fail "took $elapsed ms with --timeout 1"
}
