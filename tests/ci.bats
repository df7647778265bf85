#!/usr/bin/env bats
# diehard --ci and diehard replay (docs/CI.md): planted uninitialized reads
# are caught every time with their origin's file:line, clean programs never
# fail, recordings replay exactly, bad recordings are refused in one line.

load helpers

DIEHARD="$ROOT/build/diehard"

setup() {
	require_prog ci_bugs
	cd "$BATS_TEST_TMPDIR"
}

# The line of tests/progs/ci_bugs.c marked "ORIGIN: KIND".
origin_line() {
	grep -n "ORIGIN: $1 \*/\$" "$ROOT/tests/progs/ci_bugs.c" | cut -d: -f1
}

# ci_bug KIND RUN: one --ci run of a planted bug must fail with exit 122 and
# name the ORIGIN line as the first frame of the allocation's stack.
ci_bug() {
	local kind=$1 run=$2 line
	line=$(origin_line "$kind")
	timeout 300 "$DIEHARD" --ci --record "ci.dhr" -r report.json "$PROGS/ci_bugs" "$kind" >out 2>err && rc=0 || rc=$?
	[[ $rc -eq 122 ]] || fail "$kind run $run: exit $rc, not 122" "$(cat err)"
	validate_report report.json
	jq -e --arg f "ci_bugs.c" --argjson l "$line" '
		[.ci.findings[] | select(.kind == "uninitialized_read")][0].origin.stack[0]
		| (.file | endswith($f)) and .line == $l' report.json >/dev/null ||
		fail "$kind run $run: the origin is not ci_bugs.c:$line" "$(jq -c '.ci.findings' report.json)" "$(cat err)"
	grep -q "ci_bugs.c:$line)" err || fail "$kind run $run: stderr does not name ci_bugs.c:$line" "$(cat err)"
	grep -q "reproduce: diehard replay $BATS_TEST_TMPDIR/ci.dhr --replica [0-9]" err ||
		fail "$kind run $run: no reproduce command" "$(cat err)"
}

# Runs of each planted bug and clean program: a check that it holds, not the
# rate's measurement (bench/ci runs BENCH_DETECT, 20, of each: its table is
# in docs/PERFORMANCE.md, "CI mode"). CI_RUNS=20 for the full count.
RUNS=${CI_RUNS:-4} CLEAN_RUNS=${CI_RUNS:-6}

@test "ci: every planted bug is caught in every run, with its origin's file:line" {
	for kind in bit word padding realloc branch; do
		for run in $(seq "$RUNS"); do
			ci_bug "$kind" "$run"
		done
	done
}

@test "ci: a late leak after 5 MB of correct output is caught, with its origin, in every run" {
	for run in $(seq "$RUNS"); do
		ci_bug late "$run"
	done
	# What came before the bug was committed (all but the last chunk, which
	# the replicas split on): a prefix of the right output.
	plain "$PROGS/ci_bugs" late fixed >want
	[[ $(stat -c %s out) -ge 5096000 ]]
	cmp -n "$(stat -c %s out)" out want
}

@test "ci: the fixed programs pass with their own output and status" {
	for kind in bit word padding realloc late branch; do
		for run in 1 2 3 4 5; do
			run -0 timeout 120 "$DIEHARD" --ci "$PROGS/ci_bugs" "$kind" fixed
		done
		plain "$PROGS/ci_bugs" "$kind" fixed >want
		timeout 120 "$DIEHARD" --ci "$PROGS/ci_bugs" "$kind" fixed >got
		cmp want got
	done
	run -2 timeout 60 "$DIEHARD" --ci "$PROGS/ci_bugs" nonsense
	[[ $output == *usage:* ]]
}

@test "ci: clean real programs never fail, in any run" {
	seq 1 2000 | shuf --random-source=<(yes) >numbers
	cat >hello.c <<'C'
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
C
	printf 'create table t(a, b);\ninsert into t values (1, 2), (3, 4);\nselect a + b from t;\n' >q.sql
	for run in $(seq "$CLEAN_RUNS"); do
		run -0 timeout 120 "$DIEHARD" --ci sort -n numbers
		run -0 timeout 120 "$DIEHARD" --ci python3 -c 'import random, time, os; d = {str(i): i for i in range(5000)}; print(len(d), sum(d.values()), random.random() < 2, time.time() > 0, len(os.urandom(8)))'
		run -0 timeout 120 "$DIEHARD" --ci perl -e 'my %h = map { $_ => $_ * 2 } 1 .. 5000; print scalar(keys %h), "\n"'
		run -0 timeout 120 "$DIEHARD" --ci gcc -O2 -c hello.c -o hello.o
		run -0 timeout 120 "$DIEHARD" --ci sqlite3 :memory: <q.sql
		run -0 timeout 120 "$DIEHARD" --ci "$PROGS/ci_threads"
		run -0 timeout 120 "$DIEHARD" --ci "$PROGS/nd_clocks"
		run -0 timeout 120 "$DIEHARD" --ci "$PROGS/nd_random"
	done
	[[ ! -e diehard-ci-*.dhr ]] || fail "a passing run left a recording"
}

@test "ci: the test's own exit status passes through when everything agreed" {
	run -3 timeout 60 "$DIEHARD" --ci sh -c 'echo fine; exit 3'
	[[ $output == fine ]]
}

@test "ci: a double free fails the run and is named with its stack" {
	require_prog badfree
	run -122 timeout 120 "$DIEHARD" --ci -r report.json "$PROGS/badfree" double
	validate_report report.json
	jq -e '[.ci.findings[] | select(.kind == "double_free")] | length >= 1' report.json
	jq -e '[.ci.findings[] | select(.kind == "double_free")][0].stack | map(.file // "" | endswith("badfree.c")) | any' report.json
	[[ $output == *"double free of 0x"* ]]
	[[ $output == *"badfree.c:"* ]]
}

@test "ci: on GitHub Actions the origin is an ::error annotation at its file and line" {
	line=$(origin_line bit)
	GITHUB_ACTIONS=true GITHUB_WORKSPACE="$ROOT" run -122 timeout 300 "$DIEHARD" --ci "$PROGS/ci_bugs" bit
	[[ $output == *"::error file=tests/progs/ci_bugs.c,line=$line,title=diehard --ci::uninitialised heap memory"* ]]
	# Without GITHUB_ACTIONS, no workflow commands.
	run -122 env -u GITHUB_ACTIONS timeout 300 "$DIEHARD" --ci "$PROGS/ci_bugs" bit
	[[ $output != *"::error"* ]]
}

@test "ci: without --record a failing run leaves diehard-ci-PID.dhr, and its report names it" {
	run -122 timeout 300 "$DIEHARD" --ci -r report.json "$PROGS/ci_bugs" word
	rec=$(jq -r .ci.recording report.json)
	[[ $rec == "$BATS_TEST_TMPDIR"/diehard-ci-*.dhr && -f $rec ]]
}

@test "replay: a recorded failing run replays each replica's exact output" {
	# One uninitialized bit: two replicas of three agree on it, whichever
	# it is, so the run goes on and commits their output.
	timeout 300 "$DIEHARD" --ci --record ci.dhr -r report.json "$PROGS/ci_bugs" bit >committed 2>/dev/null && rc=0 || rc=$?
	[[ $rc -eq 122 ]]
	bad=$(jq '[.ci.findings[] | select(.kind == "uninitialized_read")][0].origin.replica' report.json)
	for id in $(jq -r '.replicas[].index' report.json); do
		timeout 60 "$DIEHARD" replay ci.dhr --replica "$id" >"replay.$id" 2>"replay.$id.err"
		grep -q "replay of replica $id reproduced the recording" "replay.$id.err" || fail "$(cat "replay.$id.err")"
	done
	# The committed output is the majority's: the replicas that agreed
	# replay it byte for byte; the one searched wrote something else.
	for id in $(jq -r '.replicas[] | select(.killed == null and .stopped == null) | .index' report.json); do
		cmp "replay.$id" committed
	done
	for id in $(jq -r '.replicas[] | select(.killed != null and .index < 3) | .index' report.json); do
		! cmp -s "replay.$id" committed
	done
	[[ -n $bad ]]
}

@test "replay: a recording of a clean run reproduces its output, clocks and random values" {
	timeout 60 "$DIEHARD" --record run.dhr python3 -c 'import random, time, os; print(random.random(), time.time(), os.urandom(4).hex())' >first
	for id in 0 1 2; do
		timeout 60 "$DIEHARD" replay run.dhr --replica "$id" >again 2>err
		cmp first again
		grep -q "reproduced the recording" err
	done
	# The input too.
	seq 1 1000 | shuf >input
	timeout 60 "$DIEHARD" --record sort.dhr sort -n <input >sorted
	timeout 60 "$DIEHARD" replay sort.dhr </dev/null >again
	cmp sorted again
}

@test "replay: a foreign, truncated or corrupt recording is one line and exit 125" {
	timeout 60 "$DIEHARD" --record good.dhr echo hello >/dev/null
	head -c 200 /dev/urandom >foreign.dhr
	head -c "$(($(stat -c %s good.dhr) - 7))" good.dhr >truncated.dhr
	python3 -c 'import sys; d = bytearray(open("good.dhr", "rb").read()); d[40] ^= 1; open("corrupt.dhr", "wb").write(d)'
	printf '' >empty.dhr
	run -125 "$DIEHARD" replay foreign.dhr
	[[ ${#lines[@]} -eq 1 && $output == *"not a diehard recording"* ]]
	run -125 "$DIEHARD" replay truncated.dhr
	[[ ${#lines[@]} -eq 1 && $output == *"truncated"* ]]
	run -125 "$DIEHARD" replay corrupt.dhr
	[[ ${#lines[@]} -eq 1 && $output == *"corrupt"* ]]
	run -125 "$DIEHARD" replay empty.dhr
	[[ ${#lines[@]} -eq 1 ]]
	run -125 "$DIEHARD" replay missing.dhr
	[[ ${#lines[@]} -eq 1 && $output == *"No such file"* ]]
	run -125 "$DIEHARD" replay good.dhr --replica 9
	[[ ${#lines[@]} -eq 1 && $output == *"no replica 9"* ]]
	run -125 "$DIEHARD" replay
	[[ ${#lines[@]} -eq 1 ]]
	# Garbage of every length: always refused, never a crash.
	for n in 1 8 16 17 24 25 64 300; do
		head -c "$n" good.dhr >cut.dhr
		run -125 "$DIEHARD" replay cut.dhr
		[[ ${#lines[@]} -eq 1 ]]
	done
}

@test "ci: bad usage is one line and exit 125" {
	run -125 "$DIEHARD" --ci -k 1 true
	[[ ${#lines[@]} -eq 1 && $output == *"--ci needs two replicas"* ]]
	run -125 "$DIEHARD" --record "" true
	[[ ${#lines[@]} -eq 1 ]]
	run -125 "$DIEHARD" --record /nonexistent/dir/x.dhr true
	[[ ${#lines[@]} -eq 1 ]]
}

@test "replay --gdb: the failing replica runs under gdb, stops where asked, and still reproduces" {
	command -v gdb >/dev/null || skip "gdb is not installed (make deps)"
	line=$(origin_line bit)
	run -122 timeout 300 "$DIEHARD" --ci --record ci.dhr -r report.json "$PROGS/ci_bugs" bit
	id=$(jq '[.ci.findings[] | select(.kind == "uninitialized_read")][0].origin.replica' report.json)
	run -0 bash -c "printf 'break ci_bugs.c:$line\ncontinue\nbt 1\ncontinue\n' | timeout 120 '$DIEHARD' replay ci.dhr --replica $id --gdb"
	[[ $output == *"stopped before its exec"* ]]
	[[ $output == *"ci_bugs.c:$line"* ]]
	[[ $output == *"exited normally"* ]]
	[[ $output == *"replay of replica $id reproduced the recording"* ]]
}
