#!/usr/bin/env bats
# The vote: replicas that write different bytes, crash, hang or exit
# differently.  k=2 detects (exit 123 and where), k>=3 masks (the majority's
# output and status, the odd replica reported and killed).  Exit statuses,
# signals, and the --report file.
#
# To make one replica behave differently, deterministically, the replicas race
# for a lock directory (mkdir is atomic): exactly one wins, and writes its pid
# into the lock so the test knows which replica it was.

load helpers

setup() {
	require_diehard
	require_jq
	require_prog sup_gen
	require_prog sup_crash
	T=$BATS_TEST_TMPDIR
	ulimit -c 0 # crashing replicas leave no core files
}

# winner_pid: the seed of the replica that took the lock (pids are alike
# in sandboxed replicas; their DIEHARD_SEED is not).
winner_pid() {
	[[ -s $T/lock/pid ]] || fail "no replica took the lock"
	cat "$T/lock/pid"
}

# replica_index REPORT SEED: the index of the replica with that seed.
replica_index() {
	local i
	i=$(jq --arg seed "$2" '.replicas[] | select(.seed == $seed) | .index' "$1")
	[[ $i =~ ^[0-9]+$ ]] || fail "no replica with seed $2 in $1:" "$(cat "$1")"
	echo "$i"
}

# A replica whose output differs: the lock winner writes ODD, the others
# seq 10; WHEN says who is slow: "early" (the others wait 0.5 s, so the odd
# replica's output is voted on first) or "late" (the odd one waits, so its
# output arrives after the majority has committed everything).
ODD_SCRIPT='
if mkdir "$1/lock" 2>/dev/null; then
	echo $DIEHARD_SEED >"$1/lock/pid"
	[ "$2" = late ] && sleep 0.5
	eval "$3"
else
	[ "$2" = early ] && sleep 0.5
	seq 10
fi'

# check_odd_replica WHEN ODD-COMMAND OFFSET: diehard -k 3 commits seq 10, exits
# 0, names the odd replica's divergence at OFFSET in -v output and the report,
# and kills it.
check_odd_replica() {
	local when=$1 odd=$2 offset=$3
	capture "$T/run" sup -v -k 3 -r "$T/r.json" sh -c "$ODD_SCRIPT" sh "$T" "$when" "$odd"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0 (the majority's)" "$(cat "$T/run.err")"
	same_bytes <(seq 10) "$T/run.out" "the majority's output"
	local pid idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	pid=$(jq ".replicas[$idx].pid" "$T/r.json")
	grep -Eq "divergence on stdout at byte $offset: .*replica $idx wrote" "$T/run.err" ||
		fail "-v does not report replica $idx's divergence at byte $offset:" "$(cat "$T/run.err")"
	grep -Eq "kill replica $idx \(pid $pid\)" "$T/run.err" ||
		fail "-v does not report killing replica $idx (pid $pid):" "$(cat "$T/run.err")"
	jq -e --argjson i "$idx" --argjson off "$offset" '
		[.divergences[] | select(.stream == "stdout")] as $d
		| ($d | length) == 1 and $d[0].replica == $i and $d[0].offset == $off
		  and ($d[0].agreed | index($i) | not)' "$T/r.json" >/dev/null ||
		fail "the report does not show replica $idx diverging at $offset:" "$(jq -c .divergences "$T/r.json")"
	jq -e --argjson i "$idx" '
		(.replicas[$i] | has("killed"))
		and ([.replicas[] | select(.index != $i and has("killed"))] | length) == 0
		and .exit_code == 0 and .committed.stdout == 21' "$T/r.json" >/dev/null ||
		fail "the report does not show replica $idx (alone) killed:" "$(jq -c '[.replicas[] | {index, pid, status, killed}], .committed' "$T/r.json")"
}

@test "k=2: \"ab\" against \"ba\" is no majority: exit 123, nothing written, the offset named" {
	capture "$T/run" sup -k 2 -r "$T/r.json" sh -c \
		'if mkdir "$1/lock" 2>/dev/null; then printf ab; else printf ba; fi' sh "$T"
	[[ $(<"$T/run.rc") == 123 ]] || fail "exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	[[ ! -s $T/run.out ]] || fail "something was committed: $(cat "$T/run.out")"
	grep -q 'no majority on stdout at byte 0' "$T/run.err" || fail "no offset in the message:" "$(cat "$T/run.err")"
	jq -e '.no_quorum.stream == "stdout" and .no_quorum.offset == 0 and .exit_code == 123' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{no_quorum, exit_code}' "$T/r.json")"
}

@test "k=2: \"hello ab\" against \"hello ba\": exit 123 at byte 6, at most the agreed prefix written" {
	capture "$T/run" sup -k 2 -r "$T/r.json" sh -c \
		'if mkdir "$1/lock" 2>/dev/null; then printf "hello ab"; else printf "hello ba"; fi' sh "$T"
	[[ $(<"$T/run.rc") == 123 ]] || fail "exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	is_prefix "$T/run.out" <(printf 'hello ') || fail "committed: $(cat "$T/run.out")"
	grep -q 'no majority on stdout at byte 6' "$T/run.err" || fail "no offset in the message:" "$(cat "$T/run.err")"
	jq -e '.no_quorum.stream == "stdout" and .no_quorum.offset == 6' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .no_quorum "$T/r.json")"
}

@test "k=3: one replica writes something else first: the majority's output, exit 0, the odd one reported and killed" {
	check_odd_replica early 'seq 10 | sed "s/^5\$/FIVE/"' 8
}

@test "k=3: one replica writes something else after the majority finished: still compared, reported and killed" {
	# Design: the slowest replica is not waited for, "but it is still
	# compared when it arrives".
	check_odd_replica late 'seq 10 | sed "s/^5\$/FIVE/"' 8
}

@test "k=3: one replica writes more than the majority, after it finished: reported and killed" {
	check_odd_replica late 'seq 10; echo extra' 21
}

@test "k=3: a replica whose stderr differs: the majority's stderr, exit 0, the odd one reported" {
	capture "$T/run" sup -v -k 3 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then echo $DIEHARD_SEED >"$1/lock/pid"; echo "warning: 1" >&2
		else sleep 0.5; echo "warning: 2" >&2; fi
		echo done' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == done ]] || fail "stdout: $(cat "$T/run.out")"
	grep -qx 'warning: 2' "$T/run.err" || fail "the majority's stderr is missing:" "$(cat "$T/run.err")"
	! grep -q 'warning: 1' "$T/run.err" || fail "the odd replica's stderr was committed:" "$(cat "$T/run.err")"
	local idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	jq -e --argjson i "$idx" 'any(.divergences[]; .stream == "stderr" and .replica == $i and .offset == 9)
		and (.replicas[$i] | has("killed"))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.divergences, [.replicas[] | {index, killed}]' "$T/r.json")"
}

@test "k=3: a replica that crashes (SIGSEGV) mid-stream: the output is complete, not truncated" {
	capture "$T/run" sup -v -k 3 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then
			echo $DIEHARD_SEED >"$1/lock/pid"; seq 100000 | head -c 300000; kill -SEGV $$
		else
			seq 100000
		fi' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	same_bytes <(seq 100000) "$T/run.out" "output with one replica crashing after 300000 bytes"
	local idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	# The crashed replica is replaced, unless the others had already
	# finished when its crash was found; the run does not wait for a
	# replacement to catch up once the others agree on everything.
	jq -e --argjson i "$idx" '.replicas[$i].signal == 11 and .replicas[$i].status == 139
		and ([.replicas[] | select(.index != $i and (has("replaces") | not)) | .status] == [0, 0])
		and ([.replacements[] | .replaces] | . == [$i] or . == [])' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {index, status, signal, killed}], .replacements' "$T/r.json")"
}

@test "k=2: a replica that crashes mid-stream is detected: exit 123, output never longer than the crash point" {
	capture "$T/run" sup -k 2 sh -c '
		if mkdir "$1/lock" 2>/dev/null; then seq 100000 | head -c 300000; kill -SEGV $$
		else seq 100000; fi' sh "$T"
	[[ $(<"$T/run.rc") == 123 ]] || fail "exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	is_prefix "$T/run.out" <(seq 100000 | head -c 300000) || fail "committed $(wc -c <"$T/run.out") bytes"
}

@test "k=3: a replica in an infinite loop is killed as a straggler after --timeout; the majority's output and status" {
	local start elapsed
	start=$(now_ms)
	capture "$T/run" sup -v -k 3 --timeout 1 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then echo $DIEHARD_SEED >"$1/lock/pid"; while :; do :; done; fi
		echo done; exit 4' sh "$T"
	elapsed=$(($(now_ms) - start))
	[[ $(<"$T/run.rc") == 4 ]] || fail "exit $(<"$T/run.rc"), expected 4 (the majority's)" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == done ]] || fail "stdout: $(cat "$T/run.out")"
	local pid idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	pid=$(jq ".replicas[$idx].pid" "$T/r.json")
	grep -Eq "kill replica $idx \(pid $pid\): .*straggler" "$T/run.err" ||
		fail "-v does not report the straggler:" "$(cat "$T/run.err")"
	jq -e --argjson i "$idx" '(.replicas[$i].killed | test("straggler")) and .replicas[$i].signal == 9
		and .exit_code == 4' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '[.replicas[] | {index, status, killed}]' "$T/r.json")"
	proc_gone "$pid" || fail "the straggler (pid $pid) is still running"
	((elapsed < 15000)) || fail "took $elapsed ms with --timeout 1"
}

@test "k=3: a replica that stops reading its input is killed; the others still get all of it" {
	# 5 MiB of input, more than the input ring and every pipe buffer: the
	# lock winner never reads (it sleeps), the two others cat.
	local SUP_TIMEOUT=20 # ~2 s here
	"$PROGS/sup_gen" 5M 11 >"$T/in"
	capture "$T/run" sh -c 'exec "$@" <"$0"' "$T/in" \
		timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T" -v -k 3 --timeout 1 -r "$T/r.json" sh -c '
			if mkdir "$1/lock" 2>/dev/null; then echo $DIEHARD_SEED >"$1/lock/pid"; exec sleep 60; fi
			exec cat' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] ||
		fail "exit $(<"$T/run.rc"), expected 0 (124: hung, killed by the hang guard)" "$(cat "$T/run.err")"
	same_bytes "$T/in" "$T/run.out" "5 MiB through the two replicas that read"
	local idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	jq -e --argjson i "$idx" '(.replicas[$i] | has("killed")) and .input_bytes == 5242880' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.input_bytes, [.replicas[] | {index, killed}]' "$T/r.json")"
	# The same with the input from a pipe.
	rm -rf "$T/lock"
	"$PROGS/sup_gen" 5M 11 | sup -k 3 --timeout 1 sh -c '
		if mkdir "$1/lock" 2>/dev/null; then exec sleep 60; fi
		exec cat' sh "$T" >"$T/pipe.out" ||
		fail "input from a pipe: exit $? (124: hung, killed by the hang guard)"
	same_bytes "$T/in" "$T/pipe.out" "5 MiB from a pipe through the two replicas that read"
}

@test "exit status: a program exiting 3 makes diehard exit 3 (k=1, 2, 3)" {
	local k
	for k in 1 2 3; do
		capture "$T/run" sup -k "$k" sh -c 'echo out; echo err >&2; exit 3'
		[[ $(<"$T/run.rc") == 3 ]] || fail "-k $k: exit $(<"$T/run.rc"), expected 3" "$(cat "$T/run.err")"
		[[ $(<"$T/run.out") == out && $(<"$T/run.err") == err ]] || fail "-k $k: output $(cat "$T/run.out" "$T/run.err")"
	done
}

@test "exit status: a program that segfaults in every replica makes diehard exit 139, its flushed output kept" {
	capture "$T/run" sup -k 3 "$PROGS/sup_crash" segv
	[[ $(<"$T/run.rc") == 139 ]] || fail "exit $(<"$T/run.rc"), expected 139" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == 'about to stop: segv' ]] || fail "stdout: $(cat "$T/run.out")"
}

@test "exit status: every replica killed by the same signal gives 128+signal (SIGABRT, SIGUSR1, SIGKILL)" {
	local sig
	for sig in 6 10 9; do
		capture "$T/run" sup -k 3 -r "$T/r.json" "$PROGS/sup_crash" "$sig"
		[[ $(<"$T/run.rc") == $((128 + sig)) ]] || fail "signal $sig: exit $(<"$T/run.rc"), expected $((128 + sig))" "$(cat "$T/run.err")"
		jq -e --argjson s "$sig" '[.replicas[].signal] == [$s, $s, $s]' "$T/r.json" >/dev/null ||
			fail "report: $(jq -c '[.replicas[] | {status, signal}]' "$T/r.json")"
	done
}

@test "exit status is voted: k=3 with one replica exiting 7 gives the majority's 0 and reports the odd status" {
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c \
		'echo same; if mkdir "$1/lock" 2>/dev/null; then echo $DIEHARD_SEED >"$1/lock/pid"; exit 7; fi' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == same ]] || fail "stdout: $(cat "$T/run.out")"
	local idx
	idx=$(replica_index "$T/r.json" "$(winner_pid)")
	jq -e --argjson i "$idx" 'any(.divergences[]; .stream == "status" and .replica == $i
		and .status == 7 and .majority_status == 0)' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .divergences "$T/r.json")"
}

@test "exit status is voted: k=2 with different statuses, or k=3 --respawns 0 with three different ones, is no majority (123)" {
	capture "$T/run" sup -k 2 sh -c 'if mkdir "$1/lock" 2>/dev/null; then exit 7; fi' sh "$T"
	[[ $(<"$T/run.rc") == 123 ]] || fail "k=2: exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	grep -q 'exit status' "$T/run.err" || fail "k=2: the message does not name the exit status:" "$(cat "$T/run.err")"
	rm -rf "$T/lock"
	# Without replacement (tie-breaking replicas: tests/diehard_replace.bats).
	capture "$T/run" sup -k 3 --respawns 0 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then exit 1; fi
		if mkdir "$1/lock2" 2>/dev/null; then exit 2; fi
		exit 0' sh "$T"
	[[ $(<"$T/run.rc") == 123 ]] || fail "k=3: exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	jq -e '.no_quorum.stream == "status" and ([.replicas[].status] | sort) == [0, 1, 2]' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.no_quorum, [.replicas[].status]' "$T/r.json")"
}

@test "the report: valid JSON with the command, distinct 32-hex-digit seeds, pids, statuses, byte counts" {
	printf 'hello\n' >"$T/in"
	capture "$T/run" sh -c 'exec "$@" <"$0"' "$T/in" \
		timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T" -v -k 3 -r "$T/r.json" sh -c 'cat; exec "$0" 10000 3' "$PROGS/sup_gen"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	local size
	size=$(wc -c <"$T/run.out")
	((size == 10006)) || fail "output of $size bytes, expected 10006"
	jq -e . "$T/r.json" >/dev/null || fail "not valid JSON:" "$(head -c 2000 "$T/r.json")"
	jq -e --arg lib "$(realpath "$LIB")" --arg gen "$PROGS/sup_gen" '
		.version == 1 and .k == 3 and .allocator == $lib
		and .command == ["sh", "-c", "cat; exec \"$0\" 10000 3", $gen]
		and (.start | type) == "number" and (.wall_seconds | type) == "number" and .wall_seconds >= 0
		and .input_bytes == 6 and .exit_code == 0
		and .committed == {"stdout": 10006, "stderr": 0}
		and .divergences == [] and (has("no_quorum") | not)' "$T/r.json" >/dev/null ||
		fail "report header:" "$(jq -c 'del(.replicas)' "$T/r.json")"
	jq -e '
		(.replicas | length) == 3
		and ([.replicas[].index] == [0, 1, 2])
		and all(.replicas[]; (.seed | test("^[0-9a-f]{32}$")) and (.pid | type) == "number" and .pid > 1
			and .status == 0 and (has("signal") | not) and (has("killed") | not)
			and .bytes == {"stdout": 10006, "stderr": 0} and (.end | type) == "number")
		and ([.replicas[].seed] | unique | length) == 3
		and ([.replicas[].pid] | unique | length) == 3' "$T/r.json" >/dev/null ||
		fail "report replicas:" "$(jq -c .replicas "$T/r.json")"
	# The -v spawn lines name the same pids and seeds.
	local i pid seed
	for i in 0 1 2; do
		pid=$(jq ".replicas[$i].pid" "$T/r.json")
		seed=$(jq -r ".replicas[$i].seed" "$T/r.json")
		grep -q "spawn replica $i (pid $pid) seed $seed" "$T/run.err" ||
			fail "no spawn line for replica $i (pid $pid, seed $seed):" "$(cat "$T/run.err")"
		proc_gone "$pid" || fail "replica $i (pid $pid) outlived diehard"
	done
}

@test "the replica runs on the randomized heap with the seed the report names, and random fill" {
	# (dash leaves with _exit, skipping the statistics: exec a program that does not.)
	capture "$T/run" env DIEHARD_STATS=1 timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T" -k 1 -r "$T/r.json" sh -c \
		'printf "%s\n" "$DIEHARD_SEED" "$DIEHARD_FILL" "$LD_PRELOAD"; exec "$0"' /bin/true
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	local seed
	seed=$(jq -r '.replicas[0].seed' "$T/r.json")
	mapfile -t lines <"$T/run.out"
	[[ ${lines[0],,} == "$seed" ]] || fail "DIEHARD_SEED=${lines[0]}, report seed $seed"
	[[ ${lines[1]} == random ]] || fail "DIEHARD_FILL=${lines[1]}"
	[[ ${lines[2]} == *"$(realpath "$LIB")"* ]] || fail "LD_PRELOAD=${lines[2]}"
	# The allocator's own statistics line (at the replica's exit) names it too.
	local stats
	stats=$(stats_lines "$T/run.err") || return 1
	[[ ${stats,,} == *"seed=$seed "* ]] || fail "stats line with another seed:" "$stats" "report: $seed"
}

@test "replicas see the same environment but for their seeds" {
	# Different seeds: three different outputs, no majority.
	capture "$T/seeds" sup -k 3 sh -c 'echo "$DIEHARD_SEED"'
	[[ $(<"$T/seeds.rc") == 123 ]] || fail "printing DIEHARD_SEED: exit $(<"$T/seeds.rc"), expected 123"
	# Everything else agrees.
	capture "$T/env" sup -k 3 sh -c 'env | grep -v "^DIEHARD_SEED=" | sort; pwd; ulimit -a; ls -l /proc/self/fd | wc -l'
	[[ $(<"$T/env.rc") == 0 ]] || fail "exit $(<"$T/env.rc")" "$(cat "$T/env.err")"
	grep -qx 'DIEHARD_FILL=random' "$T/env.out" || fail "no DIEHARD_FILL=random in the environment"
}
