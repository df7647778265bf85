#!/usr/bin/env bats
# The fast clock path (docs/NONDETERMINISM.md, "The fast path"): replicas
# read clock_gettime, gettimeofday and time from a log in memory they share
# with each other and with diehard, without a round trip: through
# libdiehard.so in dynamic programs, through the clock blob diehard grafts
# into static ones (supervisor/virt/graft.h); everything else (programs
# started without libdiehard, fallbacks) asks diehard, and both paths
# number reads alike. The virtualization tests themselves run on both
# paths (diehard_virtualize.bats and its _notify twin); these are the cases
# the fast path adds: threads and fork at once, a static program exec'd
# from a dynamic one, and replicas that damage the shared log or forge an
# entry in it, each with the dynamic nd_fastpath and its static build.

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	FP=$PROGS/nd_fastpath
	FPS=$PROGS/static/nd_fastpath
	[[ -x $FP && -x $FPS ]] || fail "$FP or $FPS does not exist: run make first"
}

# Every replica of the run whose report is $1 grafted the blob into $2
# images.
grafted() {
	jq -e --argjson n "$2" 'all(.replicas[]; .images_grafted == $n)' "$1" >/dev/null ||
		fail "not $2 image(s) grafted in every replica:" "$(jq -c '[.replicas[] | {images, images_stopped, images_grafted}]' "$1")"
}

# The run's "now SECONDS" line is a real time: between the test's clock
# before and after the run.
now_is_real() {
	local now
	now=$(awk '$1 == "now" { print $2 }' "$1")
	[[ $now =~ ^[0-9]+$ ]] || fail "no 'now SECONDS' line in:" "$(head -c 1000 "$1")"
	((now >= ${T0%.*} && now <= ${T1%.*} + 1)) ||
		fail "'now $now' is not a time between $T0 and $T1 (the test's clock before and after the run)"
}

run_fp() {
	local name=$1
	shift
	T0=$EPOCHREALTIME
	capture "$T/$name" sup "$@"
	T1=$EPOCHREALTIME
}

# RUNS runs of PROGRAM threads 20000: 5 threads x 20000 rounds of each
# clock, plus the last read, agreed and nearly all in the replicas.
threads_runs() {
	local prog=$1 runs=$2 i
	for ((i = 1; i <= runs; i++)); do
		run_fp t$i -k 3 -r "$T/t$i.json" "$prog" threads 20000
		[[ $(<"$T/t$i.rc") == 0 ]] || fail "run $i exited $(<"$T/t$i.rc")" "$(head -c 2000 "$T/t$i.err")"
		[[ $(head -1 "$T/t$i.out") == "ok threads" ]] || fail "run $i:" "$(head -c 500 "$T/t$i.out")"
		now_is_real "$T/t$i.out"
		jq -e '.call_divergences == [] and .divergences == [] and all(.replicas[];
			.status == 0 and (has("killed") | not)
			and .calls["clock_gettime(CLOCK_MONOTONIC)"] == 100000
			and .calls["clock_gettime(CLOCK_REALTIME)"] == 100001
			and .clock_reads_in_replica > 150000)' "$T/t$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, killed, calls, clock_reads_in_replica}]]' "$T/t$i.json")"
	done
}

@test "threads and a forked child read both clocks at once: agreed, monotonic, real; nearly every read in the replicas (5 runs)" {
	threads_runs "$FP" 5
	grafted "$T/t1.json" 0
}

# Four runs at once, each of three replicas of six readers, on however few
# CPUs: readers are held up at every step, the load of their own making.
# A reader held up before its proposal once led an entry already led,
# harvested and written over (two values of one entry: sums that differ,
# or CLOCK_MONOTONIC going back in a thread).
@test "four runs at once, dynamic and static, four times over: every replica agreed on every clock entry, none went back" {
	local round p prog pids
	for round in 1 2 3 4; do
		pids=()
		for p in 1 2 3 4; do
			prog=$FP
			((p % 2)) || prog=$FPS
			sup -k 3 -r "$T/c$round.$p.json" "$prog" threads 20000 >"$T/c$round.$p.out" 2>"$T/c$round.$p.err" &
			pids+=($!)
		done
		for p in 1 2 3 4; do
			wait "${pids[p - 1]}" || fail "round $round, run $p exited $?" "$(head -c 2000 "$T/c$round.$p.err")"
			jq -e '.call_divergences == [] and .divergences == [] and all(.replicas[]; .status == 0 and (has("killed") | not))' \
				"$T/c$round.$p.json" >/dev/null ||
				fail "round $round, run $p:" "$(jq -c '[.call_divergences, [.replicas[] | {status, killed}]]' "$T/c$round.$p.json")"
		done
	done
}

@test "static: threads and a forked child read both clocks at once through the grafted blob: agreed, monotonic, real (3 runs)" {
	threads_runs "$FPS" 3
	grafted "$T/t1.json" 1
}

@test "Go (static, its runtime reading the vDSO itself): goroutines' clock reads in the replicas through the blob; the wall clock agreed and real (3 runs)" {
	local G=$PROGS/go/goclock i
	[[ -x $G ]] || skip "no Go program: Go is not installed (make deps installs it)"
	for i in 1 2 3; do
		run_fp go$i -k 3 -r "$T/go$i.json" "$G" 4 20000
		[[ $(<"$T/go$i.rc") == 0 ]] || fail "run $i exited $(<"$T/go$i.rc")" "$(head -c 2000 "$T/go$i.err")"
		[[ $(head -1 "$T/go$i.out") == "ok 4 x 20000" ]] || fail "run $i:" "$(head -c 500 "$T/go$i.out")"
		now_is_real "$T/go$i.out"
		# 80000 reads of the program's, and the runtime's own: nearly all
		# in the replica (a read a ring ahead of diehard's log asks it).
		jq -e 'all(.replicas[]; .status == 0 and (has("killed") | not) and .images_grafted == 1
			and .calls["clock_gettime(CLOCK_MONOTONIC)"] >= 80000
			and .clock_reads_in_replica > 79000)' "$T/go$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.replicas[] | {status, killed, calls, clock_reads_in_replica, images_grafted}]' "$T/go$i.json")"
	done
}

@test "a program without libc reading the vDSO right after its first arch_prctl: grafted before it runs on, nearly every read in the replicas (20 runs)" {
	local R=$PROGS/static/nd_rawstart i
	[[ -x $R ]] || fail "$R does not exist: run make first"
	# Before, the thread ran on from the arch_prctl while diehard grafted,
	# into the clock stub diehard was rewriting: about half the runs died.
	for i in $(seq 20); do
		run_fp r$i -k 3 -r "$T/r$i.json" "$R" 2000
		[[ $(<"$T/r$i.rc") == 0 && $(<"$T/r$i.out") == "ok 2000" ]] ||
			fail "run $i exited $(<"$T/r$i.rc")" "$(cat "$T/r$i.out")" "$(head -c 2000 "$T/r$i.err")"
		# Nearly every read in the replica (one whose leader is held up
		# off its CPU for 2048 checks asks diehard).
		jq -e 'all(.replicas[]; .status == 0 and .images_grafted == 1
			and .calls["clock_gettime(CLOCK_MONOTONIC)"] == 2000 and .clock_reads_in_replica > 1900)' \
			"$T/r$i.json" >/dev/null || fail "run $i's report:" "$(jq -c '[.replicas[] | {status, killed, images_grafted, calls, clock_reads_in_replica}]' "$T/r$i.json")"
	done
	# No descriptor can be handed to it (no free fd under its limit): not
	# grafted, let go as it was, its reads asking diehard.
	run_fp lim -k 3 -r "$T/lim.json" sh -c "ulimit -n 3 && exec $R 500"
	[[ $(<"$T/lim.rc") == 0 && $(<"$T/lim.out") == "ok 500" ]] ||
		fail "ulimit -n 3: exited $(<"$T/lim.rc")" "$(cat "$T/lim.out")" "$(head -c 2000 "$T/lim.err")"
	jq -e 'all(.replicas[]; .status == 0 and .images_grafted == 0 and .clock_reads_in_replica == 0
		and .calls["clock_gettime(CLOCK_MONOTONIC)"] == 500)' "$T/lim.json" >/dev/null ||
		fail "ulimit -n 3: the report:" "$(jq -c '[.replicas[] | {status, images_grafted, clock_reads_in_replica, calls}]' "$T/lim.json")"
}

@test "a static program under a storm of signals as it starts: grafted or not, its own files get the same numbers in every replica (10 runs)" {
	local S=$PROGS/static/nd_static i grafted=0
	# A signal met in the middle of a graft ends it there (the signal goes
	# on as it came), leaving the region's descriptor in the process: at a
	# number above the region's own, never one the program's next file
	# would take.
	for i in $(seq 10); do
		run_fp w$i -k 3 -r "$T/w$i.json" sh -c "while kill -WINCH \$\$ 2>/dev/null; do :; done & exec $S fd"
		[[ $(<"$T/w$i.rc") == 0 && $(<"$T/w$i.out") == "fd 3" ]] ||
			fail "run $i exited $(<"$T/w$i.rc")" "$(cat "$T/w$i.out")" "$(head -c 2000 "$T/w$i.err")"
		jq -e '.divergences == [] and all(.replicas[]; .status == 0)' "$T/w$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.divergences, [.replicas[] | {status, killed, images_grafted}]]' "$T/w$i.json")"
		grafted=$((grafted + $(jq '[.replicas[].images_grafted] | add' "$T/w$i.json")))
	done
	echo "# $grafted of 30 images grafted" >&3
}

@test "a static program that starts with SIGTRAP blocked and ignored keeps it so (the graft's trap would undo both): on the notify path" {
	local S=$PROGS/static/nd_static py=/usr/bin/python3
	[[ -x $py ]] || py=$(command -v python3) || skip "no python3"
	run_fp st -k 3 -r "$T/st.json" "$py" -c "import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTRAP})
signal.signal(signal.SIGTRAP, signal.SIG_IGN)
os.execv('$S', ['nd_static', 'sigtrap'])"
	[[ $(<"$T/st.rc") == 0 && $(<"$T/st.out") == "SIGTRAP blocked ignored" ]] ||
		fail "exited $(<"$T/st.rc")" "$(cat "$T/st.out")" "$(head -c 2000 "$T/st.err")"
	grafted "$T/st.json" 0
	# And a plain start is grafted, its SIGTRAP as it was.
	run_fp sp -k 3 -r "$T/sp.json" "$S" sigtrap
	[[ $(<"$T/sp.rc") == 0 && $(<"$T/sp.out") == "SIGTRAP unblocked handled" ]] ||
		fail "exited $(<"$T/sp.rc")" "$(cat "$T/sp.out")"
	grafted "$T/sp.json" 1
}

@test "a dynamic program that execs a static one: one numbering of reads over libdiehard and the grafted blob, all in the replicas" {
	[[ -x $PROGS/static/nd_static ]] || fail "$PROGS/static/nd_static does not exist: run make first"
	run_fp e -k 3 -r "$T/e.json" "$FP" exec 5000 "$PROGS/static/nd_static"
	[[ $(<"$T/e.rc") == 0 ]] || fail "exited $(<"$T/e.rc")" "$(head -c 2000 "$T/e.err")"
	now_is_real "$T/e.out"
	local secs
	secs=$(awk '$1 == "clock_gettime" { print int($2) }' "$T/e.out")
	[[ -n $secs ]] && ((secs >= ${T0%.*} && secs <= ${T1%.*} + 1)) ||
		fail "the static program's clock_gettime line is not a real time:" "$(cat "$T/e.out")"
	# The dynamic part: 5000 reads of each clock and one more of
	# CLOCK_REALTIME; the static one's clock_gettime, gettimeofday and
	# time: 10004 in all, nearly all in the replica (a read a ring ahead
	# of diehard's log asks it), the static one's through the blob.
	jq -e '.call_divergences == [] and all(.replicas[]; .status == 0
		and .calls["clock_gettime(CLOCK_REALTIME)"] == 5002 and .calls.gettimeofday == 1 and .calls.time == 1
		and .clock_reads_in_replica > 9000 and .clock_reads_in_replica <= 10004)' "$T/e.json" >/dev/null ||
		fail "the report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, calls, clock_reads_in_replica}]]' "$T/e.json")"
	grafted "$T/e.json" 1
	# A static program that execs a static one: both grafted.
	run_fp s -k 3 -r "$T/s.json" "$FPS" exec 5000 "$PROGS/static/nd_static"
	[[ $(<"$T/s.rc") == 0 ]] || fail "exited $(<"$T/s.rc")" "$(head -c 2000 "$T/s.err")"
	jq -e '.call_divergences == [] and all(.replicas[]; .status == 0 and .clock_reads_in_replica > 9000)' \
		"$T/s.json" >/dev/null || fail "the report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, calls, clock_reads_in_replica}]]' "$T/s.json")"
	grafted "$T/s.json" 2
}

# The images report: every replica started n images, stopped of them (by
# diehard) between lo and hi, and none went unvirtualized.
images_are() {
	jq -e --argjson n "$2" --argjson lo "$3" --argjson hi "$4" 'all(.replicas[]; .status == 0 and .images == $n
		and .images_stopped >= $lo and .images_stopped <= $hi and .unvirtualized == 0)' "$1" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {status, images, images_stopped, unvirtualized}]' "$1")"
}

@test "new images that keep libdiehard patch themselves (not stopped): AT_RANDOM agreed, a fresh one per image" {
	local A=$PROGS/nd_atrandom
	run_fp a -k 3 -r "$T/a.json" sh -c "$A; $A; date +%s.%N"
	[[ $(<"$T/a.rc") == 0 ]] || fail "exited $(<"$T/a.rc")" "$(head -c 2000 "$T/a.err")"
	mapfile -t v <"$T/a.out"
	[[ ${v[0]} =~ ^[0-9a-f]{32}$ && ${v[1]} =~ ^[0-9a-f]{32}$ && ${v[0]} != "${v[1]}" ]] ||
		fail "two images' AT_RANDOM bytes (agreed by the vote, distinct):" "$(cat "$T/a.out")"
	local secs=${v[2]%.*}
	((secs >= ${T0%.*} && secs <= ${T1%.*} + 1)) || fail "date: ${v[2]}"
	# sh, two nd_atrandom, date: four images, none stopped.
	images_are "$T/a.json" 4 0 0
}

@test "a program started without libdiehard (env -i): stopped at its exec and patched there; it and its children agree" {
	local A=$PROGS/nd_atrandom
	run_fp e -k 3 -r "$T/e.json" sh -c "env -i $A; env -i /bin/sh -c '$A; date +%s.%N'"
	[[ $(<"$T/e.rc") == 0 ]] || fail "exited $(<"$T/e.rc")" "$(head -c 2000 "$T/e.err")"
	mapfile -t v <"$T/e.out"
	[[ ${#v[@]} == 3 && ${v[0]} =~ ^[0-9a-f]{32}$ && ${v[1]} =~ ^[0-9a-f]{32}$ ]] || fail "output:" "$(cat "$T/e.out")"
	local secs=${v[2]%.*}
	((secs >= ${T0%.*} && secs <= ${T1%.*} + 1)) || fail "date: ${v[2]}"
	# sh, env, env: three that keep it; nd_atrandom, sh, nd_atrandom and
	# date without it: four stopped.
	images_are "$T/e.json" 7 4 4
	# The same from a thread other than the process's first (the exec
	# stop then names the process, not the thread that asked).
	run_fp t -k 3 -r "$T/t.json" /usr/bin/python3 -c "import os, threading, time
threading.Thread(target=lambda: os.execve('$A', ['nd_atrandom'], {})).start()
time.sleep(30)"
	[[ $(<"$T/t.rc") == 0 && $(<"$T/t.out") =~ ^[0-9a-f]{32}$ ]] ||
		fail "exited $(<"$T/t.rc")" "$(head -c 2000 "$T/t.err")" "$(cat "$T/t.out")"
	images_are "$T/t.json" 2 1 1
}

@test "where a process may not make its vDSO writable (memory-deny-write-execute), diehard patches it: the images agree" {
	local A=$PROGS/nd_atrandom
	run "$PROGS/mdwe_exec" /bin/true
	((status != 77)) || skip "no PR_SET_MDWE in this kernel"
	run_fp m -k 3 -r "$T/m.json" "$PROGS/mdwe_exec" /bin/sh -c "$A; date +%s.%N"
	[[ $(<"$T/m.rc") == 0 ]] || fail "exited $(<"$T/m.rc")" "$(head -c 2000 "$T/m.err")"
	mapfile -t v <"$T/m.out"
	[[ ${#v[@]} == 2 && ${v[0]} =~ ^[0-9a-f]{32}$ ]] || fail "output:" "$(cat "$T/m.out")"
	# mdwe_exec patches itself; sh, nd_atrandom and date cannot.
	images_are "$T/m.json" 4 3 3
}

# RUNS runs of PROGRAM garbage 20000: replica 0 (slot 0) scribbles over
# its page and the claims; it is told apart, by its calls or its output;
# 1 and 2 are not.
garbage_runs() {
	local prog=$1 runs=$2 i
	for ((i = 1; i <= runs; i++)); do
		run_fp g$i -k 3 --respawns 0 -r "$T/g$i.json" "$prog" garbage 20000
		[[ $(<"$T/g$i.rc") == 0 ]] || fail "run $i exited $(<"$T/g$i.rc")" "$(head -c 2000 "$T/g$i.err")"
		[[ $(head -1 "$T/g$i.out") == "ok garbage" ]] || fail "run $i:" "$(head -c 500 "$T/g$i.out")"
		now_is_real "$T/g$i.out"
		jq -e '([.call_divergences[] | .replica] | all(. == 0))
			and ((.call_divergences | length) > 0 or (.replicas[0] | has("killed")))
			and all(.replicas[1:3][]; .status == 0 and (has("killed") | not))' "$T/g$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, killed}]]' "$T/g$i.json")"
	done
}

@test "a replica that writes garbage over its part of the clock log: caught (count, values or output), the others unaffected (5 runs)" {
	garbage_runs "$FP" 5
}

@test "static: a replica that writes garbage over its part of the clock log, read through the blob: caught, the others unaffected (3 runs)" {
	garbage_runs "$FPS" 3
	grafted "$T/g1.json" 1
}

# RUNS runs of PROGRAM forge 20000: replica 0 leads a CLOCK_REALTIME entry
# an hour ahead, checksum and all; killed as forged, the others finish.
forge_runs() {
	local prog=$1 runs=$2 i
	for ((i = 1; i <= runs; i++)); do
		run_fp f$i -k 3 --respawns 0 -r "$T/f$i.json" "$prog" forge 20000
		[[ $(<"$T/f$i.rc") == 0 ]] || fail "run $i exited $(<"$T/f$i.rc")" "$(head -c 2000 "$T/f$i.err")"
		[[ $(<"$T/f$i.out") == "ok forge" ]] || fail "run $i:" "$(head -c 500 "$T/f$i.out")"
		grep -q "replica 0 published a clock value its clock cannot have had: killed" "$T/f$i.err" ||
			fail "run $i: no word of the forgery:" "$(head -c 2000 "$T/f$i.err")"
		jq -e '(.replicas[0].killed | test("forged"))
			and any(.call_divergences[]; .replica == 0 and (.got | test("forged")))
			and all(.replicas[1:3][]; .status == 0 and (has("killed") | not))' "$T/f$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, killed}]]' "$T/f$i.json")"
	done
}

@test "a replica that forges a clock entry (checksum and all) an hour ahead: killed as forged, the others finish (5 runs)" {
	forge_runs "$FP" 5
}

@test "static: a replica that forges a clock entry the others read through the blob: killed as forged, the others finish (3 runs)" {
	forge_runs "$FPS" 3
}

# RUNS runs of PROGRAM misread 5000: replica 0's last read consumes
# another value than the log's; its sum at the end tells it apart.
misread_runs() {
	local prog=$1 runs=$2 i
	for ((i = 1; i <= runs; i++)); do
		run_fp s$i -k 3 --respawns 0 -r "$T/s$i.json" "$prog" misread 5000
		[[ $(<"$T/s$i.rc") == 0 ]] || fail "run $i exited $(<"$T/s$i.rc")" "$(head -c 2000 "$T/s$i.err")"
		[[ $(head -1 "$T/s$i.out") == "ok misread" ]] || fail "run $i:" "$(head -c 500 "$T/s$i.out")"
		now_is_real "$T/s$i.out"
		jq -e '[.call_divergences[] | select(.replica == 0 and .got == "other values")] | length == 1' \
			"$T/s$i.json" >/dev/null &&
			jq -e '[.call_divergences[] | select(.replica != 0)] | length == 0' "$T/s$i.json" >/dev/null ||
			fail "run $i's report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, killed}]]' "$T/s$i.json")"
	done
}

@test "a replica whose fast path consumed another value than the log's: told apart by its page's sum at the end, the others not" {
	misread_runs "$FP" 3
}

@test "static: a replica whose blob consumed another value than the log's: told apart by its page's sum at the end" {
	misread_runs "$FPS" 2
}

@test "which programs take which path: date, python3, perl, bash, a static program and one started without libdiehard read in the replicas; one that also lost the region and --no-fast-clocks ask diehard" {
	require_cmd perl
	local py=/usr/bin/python3 f
	[[ -x $py ]] || py=$(command -v python3) || skip "no python3"
	sup -k 3 -r "$T/date.json" date >/dev/null
	sup -k 3 -r "$T/py.json" "$py" -c 'import time; time.time(); time.monotonic(); print("x")' >/dev/null
	sup -k 3 -r "$T/perl.json" perl -MTime::HiRes=time -e 'print time > 0 ? "x\n" : "y\n"' >/dev/null
	sup -k 3 -r "$T/bash.json" bash -c 'echo ${EPOCHREALTIME%%.*}' >/dev/null
	sup -k 3 -r "$T/static.json" "$PROGS/static/nd_static" >/dev/null
	# Started without libdiehard: stopped at its exec, and given the blob
	# there through the region's descriptor it inherited.
	sup -k 3 -r "$T/envi.json" env -i "$PROGS/static/nd_static" >/dev/null
	sup -k 3 -r "$T/envd.json" env -i date >/dev/null
	# The same after the descriptor was closed: nothing to graft with.
	# (--files shared: with the file views, this image is grafted by the
	# arch_prctl path instead, its exec not stopped: not yet understood,
	# the clocks agree either way; issue 39's note.)
	sup -k 3 --files shared -r "$T/lost.json" bash -c "exec 1000>&-; exec env -i $PROGS/static/nd_static" >/dev/null
	sup -k 3 --no-fast-clocks -r "$T/slow.json" date >/dev/null
	# Every read in the replica, but for the fallback a reader takes when
	# a sibling holds the entry it waits for past 2048 checks (a loaded
	# machine: one in 239 of python's, once in CI): at most 1 + 1%.
	for f in date py perl bash static envi envd; do
		jq -e 'all(.replicas[]; ([.calls | to_entries[] | select(.key | test("^(clock_gettime|gettimeofday|time)")) | .value] | add) as $all
			| .clock_reads_in_replica > 0 and .clock_reads_in_replica <= $all
			and .clock_reads_in_replica >= $all - 1 - ($all / 100 | floor))' \
			"$T/$f.json" >/dev/null || fail "$f: not every clock read in the replica:" "$(jq -c '[.replicas[] | {calls, clock_reads_in_replica}]' "$T/$f.json")"
	done
	grafted "$T/static.json" 1
	grafted "$T/envi.json" 1
	grafted "$T/envd.json" 1
	grafted "$T/date.json" 0
	# nd_static's three reads (one of each) asked diehard; bash's own, if
	# any, were in the replica.
	jq -e 'all(.replicas[]; .images_grafted == 0 and .calls.time == 1 and .clock_reads_in_replica + 3
		<= ([.calls | to_entries[] | select(.key | test("^(clock_gettime|gettimeofday|time)")) | .value] | add))' \
		"$T/lost.json" >/dev/null || fail "lost the region:" "$(jq -c '[.replicas[] | {calls, clock_reads_in_replica, images_grafted}]' "$T/lost.json")"
	jq -e 'all(.replicas[]; (has("clock_reads_in_replica") | not) and .calls["clock_gettime(CLOCK_REALTIME)"] == 1)' "$T/slow.json" >/dev/null ||
		fail "--no-fast-clocks:" "$(jq -c '[.replicas[] | {calls, clock_reads_in_replica}]' "$T/slow.json")"
}

@test "a child that lost the region (python3 subprocess closes fds): its reads ask diehard, numbered with the parent's; its random device opens too" {
	# python3's subprocess closes the child's fds (close_fds), so the date
	# it runs finds no region and asks diehard; the parent reads in its own.
	# The child python3 opens /dev/urandom with O_CLOEXEC (as python's open
	# does), which the filter leaves in the kernel but for libdiehard's
	# asking marker: known without the region too.
	local py=/usr/bin/python3
	[[ -x $py ]] || py=$(command -v python3) || skip "no python3"
	run_fp c -k 3 -r "$T/c.json" "$py" -c '
import subprocess, sys, time
for _ in range(3):
    time.monotonic()
    subprocess.run(["date", "+%s"], check=True)
subprocess.run([sys.executable, "-c", "print(open(\"/dev/urandom\", \"rb\").read(16).hex())"], check=True)
print(int(time.time()))'
	[[ $(<"$T/c.rc") == 0 ]] || fail "exited $(<"$T/c.rc")" "$(head -c 2000 "$T/c.err")"
	[[ $(wc -l <"$T/c.out") == 5 ]] || fail "five lines expected:" "$(cat "$T/c.out")"
	jq -e 'all(.replicas[]; .calls["open(/dev/urandom)"] == 1)' "$T/c.json" >/dev/null ||
		fail "the child's open was not answered by diehard:" "$(jq -c '[.replicas[] | .calls]' "$T/c.json")"
	jq -e '.call_divergences == [] and .divergences == [] and all(.replicas[]; .status == 0)' "$T/c.json" >/dev/null ||
		fail "the report:" "$(jq -c '[.call_divergences, [.replicas[] | {status, calls}]]' "$T/c.json")"
}

@test "opens: the loader's and libc's own (gconv too) stay in the kernel; a process without libdiehard (env -i) still has its plain open of /dev/urandom answered" {
	require_cmd perl
	require_cmd od
	local py=/usr/bin/python3
	[[ -x $py ]] || py=$(command -v python3) || skip "no python3"
	# In a UTF-8 locale date, python3 and perl make glibc open its
	# gconv-modules.cache without O_CLOEXEC, through its internal open.
	local -x LC_ALL=C.UTF-8
	sup -k 3 -r "$T/date.json" date >/dev/null
	sup -k 3 -r "$T/py.json" "$py" -c 'print("x")' >/dev/null
	sup -k 3 -r "$T/perl.json" perl -e 'print "x\n"' >/dev/null
	local f
	for f in date py perl; do
		jq -e 'all(.replicas[]; .opens_checked == 0)' "$T/$f.json" >/dev/null ||
			fail "$f: opens reached diehard:" "$(jq -c '[.replicas[] | .opens_checked]' "$T/$f.json")"
	done
	# The notify path sees every read-only open (and counts them).
	sup -k 3 --no-fast-clocks -r "$T/slow.json" date >/dev/null
	jq -e 'all(.replicas[]; .opens_checked > 0)' "$T/slow.json" >/dev/null ||
		fail "--no-fast-clocks: no open counted:" "$(jq -c '[.replicas[] | .opens_checked]' "$T/slow.json")"
	validate_report "$T/slow.json"
	# env -i drops LD_PRELOAD: od opens the device through libc's open.
	capture "$T/od" sup -k 3 -r "$T/od.json" env -i "$(command -v od)" -An -tx1 -N16 /dev/urandom
	[[ $(<"$T/od.rc") == 0 ]] || fail "exited $(<"$T/od.rc")" "$(head -c 2000 "$T/od.err")"
	grep -Eq '^( [0-9a-f]{2}){16}$' "$T/od.out" || fail "od printed:" "$(cat "$T/od.out")"
	jq -e 'all(.replicas[]; .calls["open(/dev/urandom)"] == 1) and .divergences == []' "$T/od.json" >/dev/null ||
		fail "the open was not answered by diehard:" "$(jq -c '[.divergences, [.replicas[] | .calls]]' "$T/od.json")"
}

@test "leaders read the real clock through the vDSO's own code; a vDSO read that makes the system call itself is let through, and leaders then make it (nd_vdso_real)" {
	sup -k 3 -r "$T/date.json" date >/dev/null
	local why
	why=$(jq -r '.clock_leaders.why // empty' "$T/date.json")
	[[ -z $why ]] || skip "leaders read by system call on this machine: $why"
	jq -e '.clock_leaders == {"read": "vdso", "vdso_fallbacks": 0}' "$T/date.json" >/dev/null ||
		fail "date:" "$(jq -c .clock_leaders "$T/date.json")"
	# The trampoline with the CPU-time clock: the vDSO's system call, as
	# it makes it for every clock where the clock source is no TSC.
	capture "$T/real" sup -k 3 -v -r "$T/real.json" "$PROGS/nd_vdso_real" 20000
	[[ $(<"$T/real.rc") == 0 ]] || fail "exit $(<"$T/real.rc"):" "$(<"$T/real.err")"
	[[ $(<"$T/real.out") == $'trampoline: ok\n20000 reads, forward' ]] || fail "output:" "$(<"$T/real.out")"
	grep -q "the vDSO's clock_gettime makes system calls here" "$T/real.err" || fail "no message:" "$(<"$T/real.err")"
	jq -e '.clock_leaders.read == "system call" and .clock_leaders.vdso_fallbacks == 3
		and (.clock_leaders.why | test("system calls itself"))
		and all(.replicas[]; .status == 0 and .clock_reads_in_replica > 19000) and .call_divergences == []' \
		"$T/real.json" >/dev/null || fail "report:" "$(jq -c '[.clock_leaders, [.replicas[] | {status, clock_reads_in_replica}], .call_divergences]' "$T/real.json")"
	# Without diehard the trampoline is there but never written.
	run env LD_PRELOAD="$LIB" "$PROGS/nd_vdso_real" 10
	[[ $output == $'trampoline: absent\n10 reads, forward' ]] || fail "plain:" "$output"
}
