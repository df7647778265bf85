#!/usr/bin/env bats
# Replacement with replay: a killed replica (it wrote something else,
# crashed, hung, or was killed from outside) is replaced by a fresh-seeded
# one that re-runs the command, replays the input and the logged clock and
# random values, is checked against the committed output and votes again.
# Ties are broken by extra replicas; hangs end in bounded time; the bounds
# (--respawns, logs) are said out loud.
#
# As in diehard_vote.bats, one replica is made to behave differently by a
# race for a lock directory (mkdir is atomic).

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	ulimit -c 0
}

# K_LIVE_AT_END: a jq test that k = 3 replicas were in the vote at the end,
# or two and either a replacement that the run ended before it caught up (a
# kill in the run's last moments: sup_check_done does not wait for it, and
# the report says so), or one replica killed, and not replaced, once the
# others had ended (a divergence found by the final vote: the vote was
# over, a replacement could change nothing, sup_vote_over).
K_LIVE_AT_END='(.live_at_end == 3 or (.live_at_end == 2 and
	(([.replicas[] | select(.stopped == "the run ended before it caught up")] | length) == 1 or
	 (. as $r | [.replicas[] | select(.killed != null) | select(.index as $i | all($r.replacements[]; .replaces != $i))] |
	  length == 1 and .[0].killed_at >= ([$r.replicas[] | select(.killed == null and .end != null) | .end] | max)))))'

# live_pids PATTERN: pids of processes whose command line matches PATTERN.
live_pids() {
	pgrep -f -- "$1" || true
}

@test "a producer whose replicas are killed from outside one after another: exact output, k live at the end (or one still catching up, reported), every replacement reported" {
	# The producer writes a line for each line of input. The test kills a
	# replica, then feeds 10 lines, and again once the replacement caught
	# up, then feeds the rest: the run lasts until the test has killed
	# enough replicas, however slow the machine (a producer of its own pace
	# ended, on a loaded machine, after 4 kills), and a replacement has at
	# most 10 lines a kill to replay.
	local lines=${REPLACE_LINES:-400} want_kills=${REPLACE_KILLS:-8}
	cat >"$T/prod.sh" <<-'EOF'
		while read -r i; do echo "line $i of the producer"; sleep 0.01; done
	EOF
	mkfifo "$T/in.fifo"
	SUP_TIMEOUT=240 sup -v -k 3 --respawns 1000 --respawn-rate 1000 -r "$T/r.json" \
		bash "$T/prod.sh" <"$T/in.fifo" >"$T/run.out" 2>"$T/run.err" &
	local dh=$! kills=0 fed=0 t_end=$((SECONDS + 180))
	exec 7>"$T/in.fifo"
	trap '' PIPE
	while ((fed < lines)) && ((SECONDS < t_end)) && proc_alive "$dh"; do
		local victim spawned caught n
		if ((kills < want_kills)); then
			# Not while a replacement still catches up: kills at a
			# fixed pace would only ever kill replacements.
			spawned=$(grep -c ': replaces replica ' "$T/run.err" || true)
			caught=$(grep -c ' caught up after ' "$T/run.err" || true)
			if ((caught < spawned)); then
				sleep 0.2
				continue
			fi
			victim=$(live_pids "^bash $T/prod.sh" | shuf -n 1)
			if [[ -n $victim ]] && kill -KILL "$victim" 2>/dev/null; then
				kills=$((kills + 1))
			fi
		fi
		for ((n = 0; n < 10; n++)); do
			echo "$fed" >&7 || break
			fed=$((fed + 1))
		done
		sleep 0.2
	done
	exec 7>&-
	seq 0 $((fed - 1)) | bash "$T/prod.sh" >"$T/plain"
	await_exit "$dh" 240
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC, expected 0" "$(tail -20 "$T/run.err")"
	same_bytes "$T/plain" "$T/run.out" "the producer's output with replicas killed one after another"
	((kills >= want_kills)) || fail "only $kills replicas were killed in 180 s: the test did not test"
	# Every replica killed from outside was replaced (a kill may also hit a
	# replacement, or land on a process as it exits).
	jq -e --argjson kills "$kills" '
		(.replacements | length) >= ($kills * 3 / 4) and
		all(.replacements[]; (.replaces | type) == "number" and (.old_seed | test("^[0-9a-f]{32}$"))
			and (.seed | test("^[0-9a-f]{32}$")) and .seed != .old_seed and (.why | length) > 0
			and .time > 0) and
		'"$K_LIVE_AT_END"' and .respawns.used == (.replacements | length)' "$T/r.json" >/dev/null ||
		fail "report ($kills kills):" "$(jq -c '{live_at_end, respawns, n: (.replacements | length),
			stopped: [.replicas[] | select(.stopped) | {index, stopped}], last: .replacements[-2:]}' "$T/r.json")" \
			"$(grep -E 'kill|caught up|spawn|exited' "$T/run.err" | tail -12)"
	# The replicas in the vote at the end caught up: their report says so.
	jq -e '[.replacements[] | select(.caught_up)] | length > 0 and
		all(.[]; .catch_up_seconds >= 0 and .output_bytes_checked.stdout >= 0)' "$T/r.json" >/dev/null ||
		fail "no replacement caught up:" "$(jq -c '.replacements[-3:]' "$T/r.json")"
	grep -q 'spawn replica [0-9]* (pid [0-9]*) seed [0-9a-f]*: replaces replica [0-9]* (' "$T/run.err" ||
		fail "no -v line for a replacement:" "$(head -20 "$T/run.err")"
	grep -q 'caught up after [0-9.]* s' "$T/run.err" || fail "no -v line for a catch-up"
}

# hang_run I: one run of sup_hang under diehard, judged; counts into right,
# all_spun and spun_logs (the caller's locals).
hang_run() {
	local i=$1 t0 rc
	t0=$(now_ms)
	capture "$T/run$i" timeout 15 "$DIEHARD" --share "$T" -v -k 3 --timeout 0.5 -r "$T/r$i.json" "$PROGS/sup_hang" 3
	rc=$(<"$T/run$i.rc")
	if [[ $rc == 124 ]]; then
		# All three spinning (one run in 64) looks like a long
		# computation: nothing to vote against, the paper's admitted
		# hang. Any other hang is a bug.
		! grep -q 'exited with' "$T/run$i.err" ||
			fail "run $i hung after a replica finished (killed by the test's timeout after 15 s)" "$(cat "$T/run$i.err")"
		# Every replica got as far as the loop: the lines before
		# it were agreed and committed. Less is a hang elsewhere.
		same_bytes <(printf 'line 0\nline 1\nline 2\n') "$T/run$i.out" \
			"run $i hung before its replicas reached the loop: $(cat "$T/run$i.err")"
		all_spun=$((all_spun + 1))
		spun_logs+="run $i: $(tr '\n' ' ' <"$T/run$i.err")"$'\n'
		return 0
	fi
	if [[ $rc == 0 ]]; then
		same_bytes "$T/right" "$T/run$i.out" "run $i: exit 0 must come with the right output"
		right=$((right + 1))
	else
		[[ $rc == 123 ]] || fail "run $i exited $rc" "$(cat "$T/run$i.err")"
		is_prefix "$T/run$i.out" "$T/right" || fail "run $i wrote a wrong answer" "$(cat "$T/run$i.out")"
	fi
	# (respawns + 1) x timeout, plus start-up slack.
	(($(now_ms) - t0 < 17 * 500 + 5000)) || fail "run $i took $(($(now_ms) - t0)) ms"
}

@test "a program that spins forever on one heap layout in four: the right output in every run, or 123 in bounded time, never a hang" {
	require_prog sup_hang
	local right=0 runs=20 all_spun=0 spun_logs=
	printf 'line 0\nline 1\nline 2\nanswer 42\n' >"$T/right"
	for i in $(seq "$runs"); do
		hang_run "$i"
	done
	((all_spun <= 2)) || fail "$all_spun of $runs runs had every replica spinning: expected one in 64" "$spun_logs"
	((right >= runs - all_spun - 1)) || fail "only $right of $runs runs gave the right answer"
	# Spinning replicas were found: some run replaced a straggler. That
	# takes two of a run's three spinning (one run in six or seven), so
	# 20 runs miss it one time in 30: then more runs, up to 60 in all
	# (one time in 25,000), each judged alike.
	local i=$runs
	until cat "$T"/r*.json | jq -s -e '[.[].replacements[] | select(.why | test("straggler"))] | length > 0' >/dev/null; do
		((i < 60)) || fail "no run of $i replaced a straggler (1 in 4 replicas spins: the test did not test)"
		i=$((i + 1))
		hang_run "$i"
	done
}

@test "--respawns 0: a spinning replica is still killed once another finished, but not replaced" {
	require_prog sup_hang
	# Find a run where some replica spins: about 58% of runs have one.
	local found=0
	for i in $(seq 30); do
		capture "$T/run" timeout 10 "$DIEHARD" --share "$T" -v -k 3 --respawns 0 --timeout 0.5 -r "$T/r.json" "$PROGS/sup_hang" 1
		if [[ $(<"$T/run.rc") == 124 ]]; then
			# All three spinning (one run in 64): nothing finished, so
			# nothing is a straggler (as in the test above). A hang
			# after some replica finished is the bug.
			! grep -q 'exited with' "$T/run.err" ||
				fail "diehard --respawns 0 hung after a replica finished" "$(cat "$T/run.err")"
			continue
		fi
		if jq -e '[.replicas[] | select(.killed != null)] | length > 0' "$T/r.json" >/dev/null; then
			found=1
			break
		fi
	done
	((found)) || fail "no run of 30 had a spinning replica"
	jq -e '(.replacements | length) == 0 and .respawns.limit == 0 and (.replicas | length) == 3
		and any(.replicas[]; (.killed // "") | test("straggler"))' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements, respawns, r: [.replicas[] | {index, killed}]}' "$T/r.json")"
}

@test "replicas that go wrong at random (planted uninitialized read): the right output, k live at the end" {
	require_prog sup_flaky
	plain "$PROGS/sup_flaky" 25 1 >"$T/right" # under glibc the bug never shows
	local replaced=0 i n
	# 80 ms between lines: each line is voted as it comes (--idle is 50),
	# so a wrong line is caught while the run goes on, and replaced.
	# Three runs, and up to three more while none has diverged yet.
	for i in 1 2 3 4 5 6; do
		((i <= 3 || replaced == 0)) || break
		capture "$T/run$i" sup -v -k 3 -r "$T/r$i.json" "$PROGS/sup_flaky" 25 32 80
		[[ $(<"$T/run$i.rc") == 0 ]] || fail "run $i: exit $(<"$T/run$i.rc")" "$(tail -20 "$T/run$i.err")"
		same_bytes "$T/right" "$T/run$i.out" "run $i of sup_flaky under diehard -k 3"
		n=$(jq '.replacements | length' "$T/r$i.json")
		replaced=$((replaced + n))
		jq -e "$K_LIVE_AT_END"' or .respawns.used == .respawns.limit' "$T/r$i.json" >/dev/null ||
			fail "run $i: report:" "$(jq -c '{live_at_end, respawns, replacements}' "$T/r$i.json")"
	done
	# A replica goes wrong in a round with probability 1/32: 25 rounds x
	# 3 replicas x 6 runs leave no divergence at all with probability 6e-7.
	((replaced > 0)) || fail "no replica was replaced in 6 runs: the test did not test"
}

@test "a replacement replays the clock, getrandom and /dev/urandom values the others saw" {
	require_cmd python3
	cat >"$T/nd.py" <<-'EOF'
		import os, sys, time
		print("time", time.time(), time.monotonic_ns())
		print("getrandom", os.getrandom(16).hex())
		with open("/dev/urandom", "rb") as f:
		    print("urandom", f.read(16).hex())
		print("set", sorted(set(["a", "b", "c"])), hash("abc"))
		sys.stdout.flush()
		if os.path.isdir(sys.argv[1]) and not os.path.exists(sys.argv[1] + "/lock"):
		    try:
		        os.mkdir(sys.argv[1] + "/lock")
		        os.kill(os.getpid(), 9)
		    except FileExistsError:
		        pass
		# The first two here wait for the third (the replacement, as a
		# rule): a byte each from the FIFO, which the third writes
		# (opened for reading and writing: no open waits, no read sees
		# an end). No clock, so no timing: the replacement always
		# catches up before the others end.
		i = 0
		while True:
		    try:
		        os.mkdir(sys.argv[1] + "/arrived%d" % i)
		        break
		    except FileExistsError:
		        i += 1
		fd = os.open(sys.argv[1] + "/gate", os.O_RDWR)
		if i < 2:
		    os.read(fd, 1)
		else:
		    os.write(fd, b"xx")
		print("done", time.time())
	EOF
	mkfifo "$T/gate"
	capture "$T/run" sup -v -k 3 -r "$T/r.json" env -u PYTHONHASHSEED python3 "$T/nd.py" "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(grep -c . "$T/run.out") == 5 ]] || fail "output:" "$(cat "$T/run.out")"
	# The replica that killed itself was replaced; its replacement saw the
	# same time, random bytes and hash seed as the committed output (or it
	# would have been killed for differing), caught up and voted.
	jq -e '(.replacements | length) == 1 and .replacements[0].caught_up and .live_at_end == 3
		and ([.divergences[] | select(.replica == 3)] | length) == 0
		and .replicas[3].calls.getrandom == .replicas[1].calls.getrandom' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements, divergences, live_at_end}' "$T/r.json")"
}

@test "two of three replicas wrong, each differently: a fresh replica breaks the tie, the right output and exit 0" {
	capture "$T/run" sup -v -k 3 -r "$T/r.json" sh -c '
		if mkdir "$1/lock1" 2>/dev/null; then echo "wrong one"; exit 0; fi
		if mkdir "$1/lock2" 2>/dev/null; then echo "wrong two"; exit 0; fi
		echo "right"' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == right ]] || fail "stdout: $(cat "$T/run.out")"
	grep -q 'tie (no majority on stdout at byte 0): starting one more replica' "$T/run.err" ||
		fail "no -v line for the tie:" "$(cat "$T/run.err")"
	jq -e 'any(.replacements[]; has("replaces") | not) and ([.divergences[] | select(.stream == "stdout")] | length) == 2
		and .exit_code == 0' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements, divergences}' "$T/r.json")"
	# Without replacement it is no majority, as before.
	rm -rf "$T/lock1" "$T/lock2"
	capture "$T/run0" sup -k 3 --respawns 0 sh -c '
		if mkdir "$1/lock1" 2>/dev/null; then echo "wrong one"; exit 0; fi
		if mkdir "$1/lock2" 2>/dev/null; then echo "wrong two"; exit 0; fi
		echo "right"' sh "$T"
	[[ $(<"$T/run0.rc") == 123 ]] || fail "--respawns 0: exit $(<"$T/run0.rc"), expected 123"
}

@test "three different exit statuses: tie-breakers decide the status" {
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c '
		if mkdir "$1/lock" 2>/dev/null; then exit 1; fi
		if mkdir "$1/lock2" 2>/dev/null; then exit 2; fi
		exit 0' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	jq -e '(.replacements | length) >= 1 and ([.divergences[] | select(.stream == "status")] | length) == 2' \
		"$T/r.json" >/dev/null || fail "report:" "$(jq -c '{replacements, divergences}' "$T/r.json")"
}

@test "every replica disagreeing (an uninitialized read): tie-breakers are bounded by --respawns, then no majority (123)" {
	require_prog sup_uninit
	local t0
	t0=$(now_ms)
	capture "$T/run" sup -v -k 3 -r "$T/r.json" "$PROGS/sup_uninit" bug
	[[ $(<"$T/run.rc") == 123 ]] || fail "exit $(<"$T/run.rc"), expected 123" "$(cat "$T/run.err")"
	[[ ! -s $T/run.out ]] || fail "no majority, yet stdout was written:" "$(cat "$T/run.out")"
	# k=3 has three spare slots for tie-breakers; then the oldest voter
	# leaves the vote for each next one, until the 16 respawns are used.
	jq -e '(.replacements | length) == 16 and .respawns.used == 16 and .respawns.left_in_ties == 13
		and all(.replacements[]; has("replaces") | not) and .no_quorum.stream == "stdout"
		and (.respawns.refused | test("respawn bound"))' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements: (.replacements | length), respawns, no_quorum}' "$T/r.json")"
	(($(now_ms) - t0 < 60000)) || fail "took $(($(now_ms) - t0)) ms: 19 runs of a small program"
}

# tie_script N: a command whose first N processes (in the order they start,
# replacements included: each takes the next free lock directory) each
# write "wrong I", and every later one "right". Tie-breakers start one at a
# time, each once the one before has spoken, so which process writes what
# does not depend on timing.
TIE_SCRIPT='i=0; while ! mkdir "$1/l$i" 2>/dev/null; do i=$((i + 1)); done
	if [ "$i" -lt "$2" ]; then echo "wrong $i"; else echo right; fi'

@test "a tie with every slot taken goes on: the oldest voter leaves the vote for the next tie-breaker, until two agree" {
	# Processes 0-6 all disagree: 3 replicas and 3 tie-breakers fill the
	# 6 slots; then replicas 0, 1, 2 leave in turn for tie-breakers 6, 7,
	# 8, and 7 and 8 agree.
	capture "$T/run" sup -v -k 3 -r "$T/r.json" sh -c "$TIE_SCRIPT" sh "$T" 7
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == right ]] || fail "stdout: $(cat "$T/run.out")" "$(cat "$T/run.err")"
	jq -e '.respawns.left_in_ties == 3 and
		([.replicas[] | select(.killed != null and (.killed | startswith("left the vote in a tie"))) | .index]
			| sort) == [0, 1, 2] and
		([.replacements[] | select(has("replaces") | not)] | length) == 6 and
		([.replacements[] | select(.why | test("in the slot replica [0-2] left"))] | length) == 3 and
		([.divergences[] | select(.stream == "stdout")] | length) == 4 and .exit_code == 0' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{respawns, replicas: [.replicas[] | {index, slot, killed}],
			why: [.replacements[].why], divergences: [.divergences[] | .replica]}' "$T/r.json")"
	grep -q 'tie (no majority on stdout at byte [0-9]*) with every slot taken: replica [0-2], which agrees' "$T/run.err" ||
		fail "no -v line for a voter leaving the vote:" "$(cat "$T/run.err")"
	grep -q 'kill replica [0-2] (pid [0-9]*): left the vote in a tie' "$T/run.err" ||
		fail "no -v kill line for a voter leaving the vote:" "$(cat "$T/run.err")"
	# The same disagreement with fewer respawns than it takes: no
	# majority, nothing written, the bound said.
	rm -rf "$T"/l*
	capture "$T/run5" sup -k 3 --respawns 5 -r "$T/r5.json" sh -c "$TIE_SCRIPT" sh "$T" 7
	[[ $(<"$T/run5.rc") == 123 ]] || fail "--respawns 5: exit $(<"$T/run5.rc"), expected 123" "$(cat "$T/run5.err")"
	[[ ! -s $T/run5.out ]] || fail "--respawns 5: stdout written: $(cat "$T/run5.out")"
	jq -e '.respawns.used == 5 and .respawns.left_in_ties == 2 and (.respawns.refused | test("respawn bound"))
		and .no_quorum.stream == "stdout"' "$T/r5.json" >/dev/null ||
		fail "--respawns 5: report:" "$(jq -c '{respawns, no_quorum}' "$T/r5.json")"
	# And without leaving, as before: with --respawns 0 no tie-breaker at all.
	rm -rf "$T"/l*
	capture "$T/run0" sup -k 3 --respawns 0 sh -c "$TIE_SCRIPT" sh "$T" 7
	[[ $(<"$T/run0.rc") == 123 ]] || fail "--respawns 0: exit $(<"$T/run0.rc"), expected 123"
}

@test "a tie on the exit status with every slot taken goes on the same way: the status of the two that agree" {
	# Processes 0-6 exit 1-7, every later one 0.
	capture "$T/run" sup -k 3 -r "$T/r.json" sh -c '
		i=0; while ! mkdir "$1/l$i" 2>/dev/null; do i=$((i + 1)); done
		if [ "$i" -lt 7 ]; then exit $((i + 1)); fi
		exit 0' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	jq -e '.respawns.left_in_ties == 3 and
		([.replicas[] | select(.killed != null and (.killed | startswith("left the vote in a tie"))) | .index]
			| sort) == [0, 1, 2] and
		([.divergences[] | select(.stream == "status")] | length) == 4 and .exit_code == 0' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{respawns, replicas: [.replicas[] | {index, status, killed}], divergences}' "$T/r.json")"
}

@test "k=5: in a tie with every slot taken, a voter that agrees with another stays; one that agrees with none leaves" {
	# Processes 0-9 fill the 10 slots: 0-3 write "wrong 0".."wrong 3",
	# 4-9 write "pair 0", "pair 0", "pair 1", "pair 1", ... : pairs, no
	# three alike (the quorum of 5). The loners 0-3 leave first, oldest
	# first, although the pairs' members are older than the newest loners.
	capture "$T/run" sup -v -k 5 -r "$T/r.json" sh -c '
		i=0; while ! mkdir "$1/l$i" 2>/dev/null; do i=$((i + 1)); done
		if [ "$i" -lt 4 ]; then echo "wrong $i"
		elif [ "$i" -lt 10 ]; then echo "pair $(( (i - 4) / 2 ))"
		else echo right; fi' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc"), expected 0" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == right ]] || fail "stdout: $(cat "$T/run.out")" "$(cat "$T/run.err")"
	# Processes 10, 11, 12 write "right": they take the slots of three of the
	# loners, and agree as a quorum of three.
	jq -e '.respawns.left_in_ties == 3 and
		all(.replicas[] | select(.killed != null and (.killed | startswith("left the vote in a tie"))); .index < 4)' \
		"$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{respawns, replicas: [.replicas[] | {index, killed}]}' "$T/r.json")"
}

@test "a replacement checks output older than the history ring by digest: caught up past a 64K window" {
	capture "$T/run" sup -v -k 3 --window 64K -r "$T/r.json" sh -c '
		seq 1 300000
		if mkdir "$1/lock" 2>/dev/null; then kill -KILL $$; fi
		sleep 1
		seq 300001 300010' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(tail "$T/run.err")"
	same_bytes <(seq 1 300010) "$T/run.out" "seq with one replica killed after 2 MB"
	jq -e '(.replacements | length) == 1 and .replacements[0].caught_up and .replacements[0].replaces >= 0
		and .replacements[0].output_bytes_checked.stdout == 1988895 and .live_at_end == 3' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements, live_at_end}' "$T/r.json")"
}

@test "a replacement whose old output differs is caught by digest and killed; the run goes on" {
	# Replicas number themselves by how many came before: 0, 1, 2 print the
	# same; a replacement (number 3 on) prints something else at the start,
	# far behind the history ring by the time it runs.
	mkdir "$T/n"
	capture "$T/run" sup -v -k 3 --window 64K --respawns 2 -r "$T/r.json" sh -c '
		n=$(ls "$1/n" | wc -l); mkdir "$1/n/$n.$DIEHARD_SEED"
		if [ "$n" -ge 3 ]; then echo replacement; else echo original; fi
		seq 1 300000
		if mkdir "$1/lock" 2>/dev/null; then kill -KILL $$; fi
		sleep 1
		echo end' sh "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(tail "$T/run.err")"
	same_bytes <(echo original; seq 1 300000; echo end) "$T/run.out" "the originals' output"
	jq -e '[.divergences[] | select(.kind == "late output differs (by digest)" and .offset == 0)] | length >= 1' \
		"$T/r.json" >/dev/null || fail "report:" "$(jq -c '.divergences' "$T/r.json")"
	grep -q 'its output differs from the committed stdout within bytes 0-65535' "$T/run.err" ||
		fail "no kill line naming the digest block:" "$(grep kill "$T/run.err")"
}

@test "a log that lost its start refuses replacement with a clear line; the run goes on with fewer replicas" {
	# 6.9 MB of input against a 1K input log: the log's front is released.
	capture "$T/run" sh -c 'seq 1000000 | "$0" --share "$1" -v -k 3 --input-log 1K -r "$1/r.json" sh -c "
		cat >/dev/null
		if mkdir \"$1/lock\" 2>/dev/null; then kill -KILL \$\$; fi
		sleep 0.5; echo done"' "$DIEHARD" "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(tail "$T/run.err")"
	[[ $(<"$T/run.out") == done ]] || fail "stdout: $(cat "$T/run.out")"
	grep -q 'cannot replace replicas: the input log no longer holds the input from its start (--input-log 1024); going on with 2 in the vote' "$T/run.err" ||
		fail "no clear line:" "$(grep -v 'call div' "$T/run.err" | tail)"
	jq -e '(.replacements | length) == 0 and (.respawns.refused | test("input log")) and .live_at_end == 2
		and .input_log.complete == false' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{replacements, respawns, live_at_end, input_log}' "$T/r.json")"
}

@test "a replacement replays the whole input from byte 0 and catches up" {
	seq 200000 >"$T/in"
	capture "$T/run" sh -c 'exec "$0" --share "$1" -v -k 3 -r "$1/r.json" sh -c "
		head -c 600000
		if mkdir \"$1/lock\" 2>/dev/null; then kill -KILL \$\$; fi
		sleep 0.5
		cat" <"$1/in"' "$DIEHARD" "$T"
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(tail "$T/run.err")"
	same_bytes "$T/in" "$T/run.out" "head then cat of the input"
	jq -e '.replacements[0].caught_up and .replacements[0].input_bytes_replayed > 0 and .live_at_end == 3' \
		"$T/r.json" >/dev/null || fail "report:" "$(jq -c '{replacements, live_at_end}' "$T/r.json")"
}

@test "interactive bc with a replica killed between two lines still answers" {
	require_cmd bc
	mkfifo "$T/in"
	"$DIEHARD" --share "$T" -k 3 -v -r "$T/r.json" bc -q <"$T/in" >"$T/out" 2>"$T/err" &
	local dh=$!
	exec 7>"$T/in"
	echo '1+1' >&7
	wait_until 10 grep -qx 2 "$T/out" || fail "no answer to 1+1" "$(cat "$T/err")"
	local victim
	local p
	for p in $(pgrep -P "$dh"); do
		p=$(program_of "$p")
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == bc ]] && victim=$p && break
	done
	[[ -n $victim ]] || fail "no bc replica found under diehard $dh"
	kill -KILL "$victim"
	sleep 0.3
	echo '2+3' >&7
	wait_until 10 grep -qx 5 "$T/out" || fail "no answer to 2+3 after a replica was killed" "$(cat "$T/err")"
	echo '7*6' >&7
	wait_until 10 grep -qx 42 "$T/out" || fail "no answer to 7*6" "$(cat "$T/err")"
	exec 7>&-
	await_exit "$dh" 20
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(cat "$T/err")"
	[[ $(cat "$T/out") == $'2\n5\n42' ]] || fail "output:" "$(cat "$T/out")"
	jq -e '(.replacements | length) == 1 and .replacements[0].caught_up' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '.replacements' "$T/r.json")"
}

@test "bad respawn options are refused with one line and exit 125" {
	for args in "--respawns -1" "--respawns x" "--respawns 1000001" "--respawn-rate 0" "--call-log 0" \
		"--call-log 65M" "--input-log 65G" "--respawns"; do
		# shellcheck disable=SC2086
		capture "$T/bad" "$DIEHARD" $args true
		[[ $(<"$T/bad.rc") == 125 ]] || fail "$args: exit $(<"$T/bad.rc"), expected 125"
		[[ $(wc -l <"$T/bad.err") == 1 ]] || fail "$args: not one line:" "$(cat "$T/bad.err")"
		grep -q '^diehard: ' "$T/bad.err" || fail "$args:" "$(cat "$T/bad.err")"
	done
	capture "$T/ok" "$DIEHARD" --share "$T" --no-respawn --respawn-rate 5 --call-log 1K --input-log 2G -k 3 echo hi
	[[ $(<"$T/ok.rc") == 0 && $(<"$T/ok.out") == hi ]] || fail "valid options refused:" "$(cat "$T/ok.err")"
}
