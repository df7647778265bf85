#!/usr/bin/env bats
# Caps per replica (docs/SANDBOX.md, "Caps on tasks and memory"): a fork
# bomb or a memory hog in ONE replica (the first to make $W/lock) is held at
# --max-tasks / --max-memory, killed like a crash and replaced; diehard, the
# other replicas and the test's shell go on, nothing of the bomb outlives the
# run, and the output is right. As root the caps are cgroups (v1 on this
# machine, v2 where diehard is delegated one), as nobody rlimits. A command
# that needs more than a cap in every replica ends clearly. Each attack runs
# as root and as nobody, with --sandbox on, auto and off where it applies.

load helpers

setup() {
	require_diehard
	require_jq
	require_prog abuse_bomb
	T=$BATS_TEST_TMPDIR
	# A directory nobody may write in too (the test's own may sit in one
	# it cannot enter): the lock, the reports, the bombs' marks.
	W=$(mktemp -d /tmp/diehard-limits.XXXXXX)
	chmod 777 "$W"
	B=$PROGS/abuse_bomb
	export SUP_TIMEOUT=90
}

# bomb_pids: the live processes (zombies are dead) of this test's bombs: named
# dh_bomb and with this test's directory among their arguments.
bomb_pids() {
	local p
	for p in $(pgrep -x dh_bomb); do
		proc_alive "$p" && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$W" && echo "$p"
	done
	return 0
}

teardown() {
	# Nothing of a bomb may outlive its test (a failed one included): this
	# test's own, each by its pid.
	local p
	for p in $(bomb_pids); do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$W"
}

# dh_bg OUT ARGS...: diehard ARGS as $RUNNER in the background under a hang
# guard, output to OUT.out/.err; diehard's own pid in DH_PID (its cgroups
# are named by it), the job's in BG_PID.
dh_bg() {
	local out=$1
	shift
	rm -f "$W/dh.pid"
	start_bg "$out" "${RUNNER[@]}" timeout "$SUP_TIMEOUT" sh -c 'echo $$ >"$0"; exec "$@"' "$W/dh.pid" "$DIEHARD" --share "$W" "$@"
	wait_until 10 test -s "$W/dh.pid" || fail "diehard did not start"
	DH_PID=$(<"$W/dh.pid")
}

# runner_for WHO: the command prefix that runs as WHO (root or nobody).
runner_for() {
	RUNNER=()
	if [[ $1 == nobody ]]; then
		[[ $(id -u) == 0 ]] || skip "not root: cannot become nobody"
		command -v setpriv >/dev/null || skip "no setpriv"
		as_nobody test -x "$DIEHARD" || skip "user nobody cannot run $DIEHARD"
		RUNNER=(as_nobody)
	else
		[[ $(id -u) == 0 ]] || skip "not root"
	fi
}

# require_cgroup_caps: as root, the caps here are cgroups (v1 or v2): the
# pids and memory controllers are there to write to.
require_cgroup_caps() {
	"$DIEHARD" --share "$W" -k 1 -r "$T/probe.json" true >/dev/null 2>&1 || fail "diehard -k 1 true failed"
	jq -e '.caps.tasks.mechanism | test("^cgroup v[12]$")' "$T/probe.json" >/dev/null &&
		jq -e '.caps.memory.mechanism | test("^cgroup v[12]$")' "$T/probe.json" >/dev/null ||
		skip "no writable cgroup for the caps here: $(jq -c .caps "$T/probe.json")"
}

# require_userns_for SANDBOX: as nobody, --sandbox on needs unprivileged
# user namespaces.
require_userns_for() {
	[[ $1 == off ]] && return 0
	as_nobody "$DIEHARD" --share "$W" -k 1 --sandbox on true 2>/dev/null || skip "no unprivileged user namespaces here"
}

# cgroup_dirs PID: the cgroup directories diehard PID made (none once it
# ended): cgroup v1's diehard-NS-PID-rN, v2's diehard-NS-PID (and under it
# rN and supervisor).
cgroup_dirs() {
	find /sys/fs/cgroup -maxdepth 7 -type d \( -name "diehard-*-$1" -o -name "diehard-*-$1-r[0-9]*" \) 2>/dev/null || true
}

# replica_cgroups PID: the replicas' own cgroups among them.
replica_cgroups() {
	find /sys/fs/cgroup -maxdepth 8 -type d \( -name "diehard-*-$1-r[0-9]*" -o -path "*/diehard-*-$1/r[0-9]*" \) \
		2>/dev/null || true
}

# run_bomb SANDBOX ARGS... -- MODE...: diehard -k 3 -v --sandbox SANDBOX
# ARGS, as $RUNNER, running MODE in the first replica to make $W/lock and
# in the others `echo start; sleep $HONEST_SLEEP; echo ok` (4 s by default:
# the vote is still open when the bomb is killed, so that it is replaced;
# once the vote is over, no replica is); in the background, sampled every
# 20 ms: the most
# live bomb processes seen (MAX_BOMB) and whether the test's shell could
# start a process each time (it must). Output in $T/run.*, report $W/r.json,
# diehard's pid in DH_PID.
run_bomb() {
	local sandbox=$1
	shift
	local args=()
	while [[ $1 != -- ]]; do args+=("$1"); shift; done
	shift
	rm -rf "$W/lock" "$W/eagain"
	dh_bg "$T/run" -v -k 3 --sandbox "$sandbox" "${args[@]}" -r "$W/r.json" \
		sh -c 'if mkdir "$1/lock" 2>/dev/null; then shift 2; exec "$@"; fi; echo start; sleep "$2"; echo ok' sh "$W" \
		"${HONEST_SLEEP:-4}" "$B" "$@" "$W"
	MAX_BOMB=0
	local n tries=$((SUP_TIMEOUT * 50))
	while proc_alive "$DH_PID"; do
		n=$(bomb_pids | wc -l)
		((n > MAX_BOMB)) && MAX_BOMB=$n
		/bin/true || fail "the test's shell could not start a process during the bomb"
		((tries-- > 0)) || break
		sleep 0.02
	done
	await_exit "$BG_PID" 10
	echo "$BG_RC" >"$T/run.rc"
	cp "$W/r.json" "$T/r.json" 2>/dev/null || true
}

# check_survived WHY [after-the-vote]: the run's output is right (start, ok;
# exit 0), one replica was killed (its reason matching WHY) and replaced (or,
# killed after the vote ended, not: no replica is then), and nothing of the
# bomb is left once diehard has exited, nor any cgroup of diehard's.
check_survived() {
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == $'start\nok' ]] ||
		fail "exit $(<"$T/run.rc"), output '$(cat "$T/run.out")'" "$(tail -n 20 "$T/run.err")"
	jq -e --arg why "$1" '[.replicas[] | select(.killed != null)] | length == 1 and (.[0].killed | test($why))' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c '[.replicas[] | {killed, status}]' "$T/r.json")"
	if [[ ${2:-} == after-the-vote ]]; then
		jq -e '.replacements == []' "$T/r.json" >/dev/null ||
			fail "replaced after the vote: $(jq -c '.replacements' "$T/r.json")"
	else
		jq -e '[.replicas[] | select(.killed != null) | .index] as $k | .replacements | length >= 1 and
			(.[0].replaces == $k[0])' "$T/r.json" >/dev/null ||
			fail "not replaced: $(jq -c '.replacements' "$T/r.json")"
	fi
	validate_report "$T/r.json"
	wait_until 10 eval '[[ -z $(bomb_pids) ]]' || fail "processes of the bomb left after the run:" "$(bomb_pids)"
	[[ -z $(cgroup_dirs "$DH_PID") ]] || fail "cgroups left after the run:" "$(cgroup_dirs "$DH_PID")"
}

# ---- a fork bomb in one replica -------------------------------------------

fork_bomb_cgroup() {
	runner_for root
	require_cgroup_caps
	run_bomb "$1" --max-tasks 64 -- fork
	check_survived '^over its task cap \(pids\.max 64, cgroup v[12]\): [0-9]+ forks? refused$'
	((MAX_BOMB <= 64)) || fail "$MAX_BOMB bomb processes at once, over the cap of 64"
	grep -q '^diehard: caps per replica: 64 tasks (cgroup v[12] pids.max); ' "$T/run.err" ||
		fail "no line saying how the caps are held:" "$(head -n 3 "$T/run.err")"
	jq -e '.caps.tasks.killed == 1 and .caps.tasks.limit == 64' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .caps "$T/r.json")"
}

@test "root, --sandbox on: a fork bomb in one replica is held at --max-tasks 64 (cgroup pids.max), killed over its task cap and replaced; output right, nothing left" {
	fork_bomb_cgroup on
}

@test "root, --sandbox auto: a fork bomb in one replica is held at --max-tasks 64 (cgroup pids.max), killed over its task cap and replaced; output right, nothing left" {
	fork_bomb_cgroup auto
}

@test "root, --sandbox off: a fork bomb in one replica is held at --max-tasks 64 (cgroup pids.max), killed over its task cap, every process of it (not only its group) killed, replaced; output right" {
	fork_bomb_cgroup off
}

fork_bomb_nproc() {
	runner_for nobody
	require_userns_for "$1"
	# RLIMIT_NPROC refuses the fork (the bomb marks each refusal); diehard
	# sees no counter: the replica is a straggler --timeout after the others
	# finished, when the vote is over: not replaced.
	HONEST_SLEEP=0 run_bomb "$1" --max-tasks 64 --timeout 2 -- fork
	[[ -e $W/eagain ]] || fail "no fork was refused: the cap did not hold"
	check_survived '^straggler: ' after-the-vote
	((MAX_BOMB <= 64 && MAX_BOMB >= 2)) || fail "$MAX_BOMB bomb processes at once (cap 64)"
	grep -q '^diehard: caps per replica: 64 tasks (RLIMIT_NPROC in its user namespace); ' "$T/run.err" ||
		fail "no line saying how the caps are held:" "$(head -n 3 "$T/run.err")"
}

@test "nobody, --sandbox on: a fork bomb in one replica is held at --max-tasks 64 by RLIMIT_NPROC in its user namespace, killed as a straggler once the vote is over; output right, nothing left" {
	fork_bomb_nproc on
}

@test "nobody, --sandbox auto: a fork bomb in one replica is held at --max-tasks 64 by RLIMIT_NPROC in its user namespace, killed as a straggler once the vote is over; output right, nothing left" {
	fork_bomb_nproc auto
}

@test "nobody, --sandbox off: no task cap (RLIMIT_NPROC would count every process of the user): said always when asked for, in the report, and nothing is limited" {
	runner_for nobody
	capture "$T/run" "${RUNNER[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox off --max-tasks 64 -r "$W/r.json" "$B" tasks 100 "$W"
	cp "$W/r.json" "$T/r.json"
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == "started 100" ]] ||
		fail "exit $(<"$T/run.rc"), output '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
	[[ $(grep -c '' "$T/run.err") == 1 ]] || fail "not one line on stderr:" "$(cat "$T/run.err")"
	grep -Eq '^diehard: caps per replica: no task cap \(no cgroup to make, and without a user namespace of its own RLIMIT_NPROC would count every process of the user\); [0-9]+M of memory \(RLIMIT_DATA, per process\)$' "$T/run.err" ||
		fail "the line:" "$(cat "$T/run.err")"
	jq -e '.caps.tasks.mechanism == "none" and .caps.tasks.limit == 64 and (.caps.tasks.how | test("every process of the user"))
		and .caps.memory.mechanism == "rlimit"' "$T/r.json" >/dev/null || fail "report: $(jq -c .caps "$T/r.json")"
	# The default (not asked for): said with -v only.
	capture "$T/dflt" "${RUNNER[@]}" timeout 60 "$DIEHARD" --share "$W" -k 1 --sandbox off true
	[[ $(<"$T/dflt.rc") == 0 && ! -s $T/dflt.err ]] || fail "the default cap warned:" "$(cat "$T/dflt.err")"
}

# ---- a memory hog in one replica -------------------------------------------

memory_hog_cgroup() {
	runner_for root
	require_cgroup_caps
	run_bomb "$1" --max-memory 64M -- memory 400
	check_survived '^over its memory cap \(memory\.(limit_in_bytes|max) 64M, cgroup v[12]\): out of memory, the kernel killed '
	jq -e '.caps.memory.killed == 1 and .caps.memory.limit == 67108864' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .caps "$T/r.json")"
}

@test "root, --sandbox on: a memory hog in one replica (400 MiB touched) is held at --max-memory 64M (cgroup), killed over its memory cap and replaced; output right, nothing left" {
	memory_hog_cgroup on
}

@test "root, --sandbox auto: a memory hog in one replica (400 MiB touched) is held at --max-memory 64M (cgroup), killed over its memory cap and replaced; output right, nothing left" {
	memory_hog_cgroup auto
}

@test "root, --sandbox off: a memory hog in one replica (400 MiB touched) is held at --max-memory 64M (cgroup), killed over its memory cap and replaced; output right, nothing left" {
	memory_hog_cgroup off
}

memory_hog_rlimit() {
	runner_for nobody
	require_userns_for "$1"
	run_bomb "$1" --max-memory 64M -- memory 400
	# RLIMIT_DATA: its malloc fails, it says so and exits 1 where the
	# others print ok: a divergence, killed and replaced like any.
	check_survived '.'
	! grep -q 'abuse_bomb' "$T/run.err" || fail "the hog's line reached stderr:" "$(cat "$T/run.err")"
	grep -Eq '^diehard: caps per replica: (no task cap \(.*\)|[0-9]+ tasks \(.*\)); 64M of memory \(RLIMIT_DATA, per process\)$' "$T/run.err" ||
		fail "no line saying how the caps are held:" "$(head -n 3 "$T/run.err")"
}

@test "nobody, --sandbox on: a memory hog in one replica is held at --max-memory 64M by RLIMIT_DATA (its malloc fails), killed as divergent and replaced; output right, nothing left" {
	memory_hog_rlimit on
}

@test "nobody, --sandbox auto: a memory hog in one replica is held at --max-memory 64M by RLIMIT_DATA (its malloc fails), killed as divergent and replaced; output right, nothing left" {
	memory_hog_rlimit auto
}

@test "nobody, --sandbox off: a memory hog in one replica is held at --max-memory 64M by RLIMIT_DATA (its malloc fails), killed as divergent and replaced; output right, nothing left" {
	memory_hog_rlimit off
}

# ---- a command that needs more than a cap in every replica ------------------

@test "root: a command that needs more tasks or memory than the cap in every replica ends with 137 and one line; each replica killed alike" {
	runner_for root
	require_cgroup_caps
	local sb
	for sb in on off; do
		capture "$T/t" sup -k 3 --sandbox "$sb" --max-tasks 64 -r "$T/t.json" "$B" tasks 200 "$W"
		[[ $(<"$T/t.rc") == 137 && ! -s $T/t.out ]] || fail "tasks, --sandbox $sb: exit $(<"$T/t.rc")" "$(cat "$T/t.out" "$T/t.err")"
		# diehard's one line; before it, the program's own line may have been
		# agreed on and committed (two replicas said it before either was
		# seen over the cap).
		[[ $(grep -c '^diehard: ' "$T/t.err") == 1 && -z $(grep -v '^diehard: ' "$T/t.err" |
			grep -vx 'abuse_bomb: fork: Resource temporarily unavailable') ]] ||
			fail "tasks, --sandbox $sb: not one line of diehard's:" "$(cat "$T/t.err")"
		grep -Eq '^diehard: 2 of 3 replicas went over the task cap \(64 tasks, cgroup v[12] pids.max\): the command needs more than --max-tasks allows \(raise it, or --max-tasks off\); stopping \(137\)$' "$T/t.err" ||
			fail "tasks, --sandbox $sb:" "$(cat "$T/t.err")"
		jq -e '.exit_code == 137 and (.exit_reason | test("replicas went over the task cap")) and .caps.tasks.killed >= 2
			and ([.replicas[] | select(.killed != null) | .killed | test("^over its task cap")] | all and length >= 2)' \
			"$T/t.json" >/dev/null || fail "tasks, --sandbox $sb: report: $(jq -c '{exit_code, exit_reason, caps}' "$T/t.json")"
		validate_report "$T/t.json"

		capture "$T/m" sup -k 3 --sandbox "$sb" --max-memory 64M -r "$T/m.json" "$B" memory 400 "$W"
		[[ $(<"$T/m.rc") == 137 && ! -s $T/m.out ]] || fail "memory, --sandbox $sb: exit $(<"$T/m.rc")" "$(cat "$T/m.out" "$T/m.err")"
		[[ $(grep -c '' "$T/m.err") == 1 ]] || fail "memory, --sandbox $sb: not one line:" "$(cat "$T/m.err")"
		grep -Eq '^diehard: 2 of 3 replicas went over the memory cap \(64M of memory, cgroup v[12] memory\.(limit_in_bytes|max)\): the command needs more than --max-memory allows \(raise it, or --max-memory off\); stopping \(137\)$' "$T/m.err" ||
			fail "memory, --sandbox $sb:" "$(cat "$T/m.err")"
		jq -e '.exit_code == 137 and .caps.memory.killed >= 2' "$T/m.json" >/dev/null ||
			fail "memory, --sandbox $sb: report: $(jq -c '{exit_code, exit_reason, caps}' "$T/m.json")"
	done
	wait_until 10 eval '[[ -z $(bomb_pids) ]]' || fail "processes left:" "$(bomb_pids)"
}

@test "nobody: a command that needs more memory (RLIMIT_DATA) or tasks (RLIMIT_NPROC, sandboxed) than the cap in every replica fails alike: its own exit status and message, once" {
	runner_for nobody
	require_userns_for on
	local sb
	for sb in on off; do
		capture "$T/m" as_nobody timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox "$sb" --max-memory 64M -r "$W/m.json" "$B" memory 400 "$W"
		cp "$W/m.json" "$T/m.json"
		[[ $(<"$T/m.rc") == 1 && ! -s $T/m.out && $(<"$T/m.err") == "abuse_bomb: out of memory" ]] ||
			fail "memory, --sandbox $sb: exit $(<"$T/m.rc")" "$(cat "$T/m.out" "$T/m.err")"
		jq -e '.exit_code == 1 and all(.replicas[]; .status == 1 and (has("killed") | not))' "$T/m.json" >/dev/null ||
			fail "memory, --sandbox $sb: report: $(jq -c '[.replicas[] | {status, killed}]' "$T/m.json")"
	done
	capture "$T/t" as_nobody timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox on --max-tasks 64 "$B" tasks 200 "$W"
	[[ $(<"$T/t.rc") == 1 && ! -s $T/t.out && $(<"$T/t.err") == "abuse_bomb: fork: Resource temporarily unavailable" ]] ||
		fail "tasks: exit $(<"$T/t.rc")" "$(cat "$T/t.out" "$T/t.err")"
}

# ---- the caps themselves --------------------------------------------------

@test "the defaults: 4096 tasks and a (k+1)-th of the RAM (or of a lower cgroup limit) per replica, in whole MiB; the -v line and the report say how each is held" {
	local total budget limit k
	total=$(awk '/^MemTotal:/ { print $2 * 1024 }' /proc/meminfo)
	budget=$total
	# diehard's memory cgroup (v1) may be limited below the RAM.
	local rel dir
	rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
	dir=/sys/fs/cgroup/memory$rel
	if [[ -n $rel && -r $dir/memory.stat ]]; then
		limit=$(awk '$1 == "hierarchical_memory_limit" { print $2 }' "$dir/memory.stat")
		[[ -n $limit ]] && ((limit < budget)) && budget=$limit
	fi
	for k in 1 3; do
		capture "$T/d$k" sup -v -k "$k" -r "$T/d$k.json" true
		[[ $(<"$T/d$k.rc") == 0 ]] || fail "-k $k: exit $(<"$T/d$k.rc")" "$(cat "$T/d$k.err")"
		local want=$((budget / (k + 1) / 1048576 * 1048576))
		jq -e --argjson m "$want" '.caps.tasks.limit == 4096 and .caps.memory.limit == $m' "$T/d$k.json" >/dev/null ||
			fail "-k $k: expected 4096 tasks and $want bytes: $(jq -c .caps "$T/d$k.json")"
		grep -Eq "^diehard: caps per replica: 4096 tasks \\(.+\\); $((want / 1048576))M of memory \\(.+\\)$" "$T/d$k.err" ||
			fail "-k $k: the line:" "$(grep caps "$T/d$k.err")"
	done
	if [[ $(id -u) == 0 ]]; then
		jq -e '.caps.tasks.mechanism | test("^(cgroup v[12]|none)$")' "$T/d3.json" >/dev/null ||
			fail "root: $(jq -c .caps "$T/d3.json")"
	fi
}

@test "--max-tasks off and --max-memory 0: no cap, no cgroup made, the report says off" {
	runner_for root
	require_cgroup_caps
	dh_bg "$T/run" -k 3 --max-tasks off --max-memory 0 -r "$T/r.json" sh -c 'sleep 0.5; echo ok'
	sleep 0.3
	[[ -z $(cgroup_dirs "$DH_PID") ]] || fail "cgroups made:" "$(cgroup_dirs "$DH_PID")"
	await_exit "$BG_PID" 30
	[[ $BG_RC == 0 && $(<"$T/run.out") == ok ]] || fail "exit $BG_RC" "$(cat "$T/run.err")"
	jq -e '.caps.tasks == {"limit": null, "mechanism": "off", "how": "off", "killed": 0} and
		.caps.memory.mechanism == "off" and .caps.memory.limit == null' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .caps "$T/r.json")"
	validate_report "$T/r.json"
}

@test "root: each replica in a cgroup of its own while it runs (pids.max and memory.limit_in_bytes set), /proc/self/cgroup alike in every sandboxed replica; all removed at the end" {
	runner_for root
	require_cgroup_caps
	dh_bg "$T/run" -k 3 --max-tasks 100 --max-memory 100M -r "$T/r.json" sh -c 'grep -E "pids|memory" /proc/self/cgroup; sleep 1; echo ok'
	local dirs
	wait_until 10 eval '[[ $(replica_cgroups "$DH_PID" | wc -l) -ge 3 ]]' || fail "no cgroups made"
	sleep 0.3
	dirs=$(replica_cgroups "$DH_PID")
	local r n=0 pids=0 mem=0
	for r in $dirs; do
		n=$((n + 1))
		if [[ -e $r/pids.max ]]; then
			[[ $(<"$r/pids.max") == 100 ]] || fail "$r/pids.max: $(<"$r/pids.max")"
			pids=$((pids + 1))
		fi
		if [[ -e $r/memory.limit_in_bytes ]]; then
			[[ $(<"$r/memory.limit_in_bytes") == 104857600 ]] || fail "$r: $(<"$r/memory.limit_in_bytes")"
			mem=$((mem + 1))
		elif [[ -e $r/memory.max ]]; then
			[[ $(<"$r/memory.max") == 104857600 ]] || fail "$r: $(<"$r/memory.max")"
			mem=$((mem + 1))
		fi
		[[ -n $(<"$r/cgroup.procs") ]] || fail "$r is empty while its replica runs"
	done
	((pids == 3 && mem == 3)) || fail "$pids pids and $mem memory cgroups for 3 replicas:" "$dirs"
	await_exit "$BG_PID" 30
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(cat "$T/run.out" "$T/run.err")"
	# Every replica reads "/" (a cgroup namespace of its own): they agree.
	[[ $(grep -Ec '^[0-9]+:(pids|memory):/$' "$T/run.out") == 2 && $(tail -n 1 "$T/run.out") == ok ]] ||
		fail "output:" "$(cat "$T/run.out")"
	[[ -z $(cgroup_dirs "$DH_PID") ]] || fail "cgroups left:" "$(cgroup_dirs "$DH_PID")"
}

@test "root, --sandbox off: a daemon a replica leaves behind runs until the run's end, then dies with the replica's cgroup" {
	runner_for root
	require_cgroup_caps
	# Each replica goes on only once the test saw the three daemons (its
	# go file; --sandbox off: the real /tmp), however loaded the machine.
	dh_bg "$T/run" -k 3 --sandbox off sh -c '"$1" wait "$2" >/dev/null 2>&1 </dev/null &
		i=0; while [ ! -e "$2/go" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done; echo ok' sh "$B" "$W"
	wait_until 30 eval '[[ $(bomb_pids | wc -l) == 3 ]]' || fail "daemons: $(bomb_pids | wc -l)"
	[[ -n $(cgroup_dirs "$DH_PID") ]] || fail "no cgroup of diehard $DH_PID while it runs"
	touch "$W/go"
	await_exit "$BG_PID" 30
	[[ $BG_RC == 0 && $(<"$T/run.out") == ok ]] || fail "exit $BG_RC" "$(cat "$T/run.err")"
	wait_until 10 eval '[[ -z $(bomb_pids) ]]' || fail "daemons left after the run:" "$(bomb_pids)"
	[[ -z $(cgroup_dirs "$DH_PID") ]] || fail "cgroups left:" "$(cgroup_dirs "$DH_PID")"
}

@test "real programs (python3, sort, java, a Go program) run under the default caps as root and nobody, as they do plainly" {
	local who py=python3
	[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
	seq 100000 -1 1 >"$W/in"
	chmod 644 "$W/in"
	for who in root nobody; do
		[[ $who == nobody && $(id -u) != 0 ]] && continue
		runner_for "$who"
		capture "$T/py" "${RUNNER[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 "$py" -c 'import json; d = {str(i): [i] * 5 for i in range(100000)}; print(len(json.dumps(d)))'
		[[ $(<"$T/py.rc") == 0 && $(<"$T/py.out") == "$("$py" -c 'import json; d = {str(i): [i] * 5 for i in range(100000)}; print(len(json.dumps(d)))')" ]] ||
			fail "$who: python3: exit $(<"$T/py.rc")" "$(cat "$T/py.err")"
		capture "$T/sort" "${RUNNER[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 sort -n "$W/in"
		[[ $(<"$T/sort.rc") == 0 ]] && same_bytes <(seq 1 100000) "$T/sort.out" "$who: sort" ||
			fail "$who: sort: exit $(<"$T/sort.rc")" "$(cat "$T/sort.err")"
		if command -v java >/dev/null; then
			capture "$T/java" "${RUNNER[@]}" timeout 120 "$DIEHARD" --share "$W" -k 3 java -XX:-UsePerfData -version
			[[ $(<"$T/java.rc") == 0 ]] && grep -q 'version' "$T/java.err" || fail "$who: java: exit $(<"$T/java.rc")" "$(cat "$T/java.err")"
		fi
		if [[ -x $PROGS/go/goclock ]]; then
			capture "$T/go" "${RUNNER[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 "$PROGS/go/goclock" 2 100
			[[ $(<"$T/go.rc") == 0 && -s $T/go.out ]] || fail "$who: goclock: exit $(<"$T/go.rc")" "$(cat "$T/go.err")"
		fi
	done
}

@test "bad --max-tasks and --max-memory values: 125 and one line naming the option and the value; what the messages offer is accepted" {
	local args v
	for args in "--max-tasks 1" "--max-tasks -1" "--max-tasks x" "--max-tasks 4194305" "--max-tasks 3x" "--max-tasks" \
		"--max-memory 1M" "--max-memory 15M" "--max-memory x" "--max-memory 64G0" "--max-memory 65537G" \
		"--max-memory -1" "--max-memory 65T" "--max-memory 1P" "--max-memory"; do
		# shellcheck disable=SC2086
		capture "$T/bad" "$DIEHARD" $args true
		[[ $(<"$T/bad.rc") == 125 ]] || fail "$args: exit $(<"$T/bad.rc"), expected 125" "$(cat "$T/bad.err")"
		[[ $(grep -c '' "$T/bad.err") == 1 ]] || fail "$args: not one line:" "$(cat "$T/bad.err")"
		grep -q "^diehard: .*${args%% *}" "$T/bad.err" || fail "$args: the line does not name the option:" "$(cat "$T/bad.err")"
		[[ $args != *" "* ]] || grep -qF "'${args#* }'" "$T/bad.err" || fail "$args: the line does not quote the value:" "$(cat "$T/bad.err")"
	done
	for args in --max-tasks --max-memory; do
		capture "$T/bad" "$DIEHARD" "$args" bogus true
		for v in $(sed "s/, not '.*//" "$T/bad.err" | grep -oE '\b[0-9]+[KMG]?\b|\boff\b'); do
			capture "$T/ok" sup "$args" "$v" -k 3 echo ok
			[[ $(<"$T/ok.rc") == 0 && $(<"$T/ok.out") == ok ]] ||
				fail "$args $v (offered by '$(cat "$T/bad.err")') refused: exit $(<"$T/ok.rc")" "$(cat "$T/ok.err")"
		done
	done
	diehard_help=$("$DIEHARD" --share "$W" --help)
	[[ $diehard_help == *--max-tasks* && $diehard_help == *--max-memory* ]] || fail "--help does not name them"
}

@test "root: a diehard killed outright (SIGKILL) leaves its replicas' cgroups empty behind; the next diehard in the same cgroup removes them on its first tick" {
	runner_for root
	require_cgroup_caps
	dh_bg "$T/run" -k 3 --sandbox on sh -c 'sleep 30'
	wait_until 10 eval '[[ $(replica_cgroups "$DH_PID" | wc -l) -ge 3 ]]' || fail "no cgroups made"
	local left
	kill -KILL "$DH_PID"
	await_exit "$BG_PID" 20
	# The replicas die with diehard (their init's parent-death signal); their
	# cgroups stay, empty: no atexit ran.
	wait_until 10 eval '[[ -z $(for d in $(replica_cgroups "$DH_PID"); do cat "$d/cgroup.procs"; done) ]]' ||
		fail "processes still in the cgroups of a killed diehard"
	left=$(replica_cgroups "$DH_PID")
	[[ -n $left ]] || fail "the killed diehard's cgroups are already gone (nothing to sweep)"
	capture "$T/next" sup -k 1 sleep 0.5
	[[ $(<"$T/next.rc") == 0 ]] || fail "the next run: exit $(<"$T/next.rc")" "$(cat "$T/next.err")"
	[[ -z $(cgroup_dirs "$DH_PID") ]] || fail "not swept:" "$(cgroup_dirs "$DH_PID")"
}

@test "--ci: a replica over its cap is a finding (exit 122, one line naming it); a command over the cap in every replica is not (137)" {
	runner_for root
	require_cgroup_caps
	capture "$T/one" sh -c 'cd "$1" && shift && exec "$@"' sh "$W" timeout 120 "$DIEHARD" --share "$W" --ci -k 3 --max-tasks 64 -r "$T/one.json" \
		sh -c 'if mkdir "$1/lock" 2>/dev/null; then exec "$2" fork "$1"; fi; echo ok' sh "$W" "$B"
	[[ $(<"$T/one.rc") == 122 && $(<"$T/one.out") == ok ]] || fail "exit $(<"$T/one.rc")" "$(cat "$T/one.err")"
	grep -Eq '^diehard: replica [0-9]+ was killed over its task cap \(pids\.max 64, cgroup v[12]\): [0-9]+ forks? refused: a heap-dependent runaway$' "$T/one.err" ||
		fail "no line naming the runaway:" "$(cat "$T/one.err")"
	jq -e '.ci.failed and (.ci.findings | map(select(.stream == "caps")) | length == 1)' "$T/one.json" >/dev/null ||
		fail "report: $(jq -c .ci.findings "$T/one.json")"
	validate_report "$T/one.json"
	capture "$T/all" sh -c 'cd "$1" && shift && exec "$@"' sh "$W" timeout 120 "$DIEHARD" --share "$W" --ci -k 3 --max-tasks 64 -r "$T/all.json" "$B" tasks 200 "$W"
	[[ $(<"$T/all.rc") == 137 ]] || fail "exit $(<"$T/all.rc")" "$(cat "$T/all.err")"
	jq -e '(.ci.failed | not) and .ci.findings == []' "$T/all.json" >/dev/null || fail "report: $(jq -c .ci "$T/all.json")"
}

@test "root: a diehard inside a sandboxed replica makes no cgroup outside that replica's (it sees its cgroup namespace: rlimits there)" {
	runner_for root
	require_cgroup_caps
	# The inner diehard is pid 2 of the replica's pid namespace: cgroups of
	# its would be named diehard-NS-2-rN.
	capture "$T/run" sup -k 1 "$DIEHARD" --share "$W" -k 1 --no-virtualize -r "$W/inner.json" sh -c \
		'find /sys/fs/cgroup -maxdepth 7 -type d -name "diehard-*-2-r[0-9]*"; echo done'
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/run.out") == done ]] || fail "cgroups of the inner run:" "$(cat "$T/run.out")"
	jq -e '.caps.tasks.mechanism == "none" and .caps.memory.mechanism == "rlimit"' "$W/inner.json" >/dev/null ||
		fail "inner report: $(jq -c .caps "$W/inner.json")"
}

@test "root, --sandbox on: a replica cannot write itself out of its cgroup (its /sys is read-only); --sandbox off: it can, as documented" {
	runner_for root
	require_cgroup_caps
	local f
	f=$(find /sys/fs/cgroup -maxdepth 2 -name tasks -path '*pids*' | head -n 1)
	[[ -n $f ]] || skip "no cgroup v1 pids hierarchy"
	capture "$T/on" sup -k 1 --sandbox on sh -c 'echo 0 >"$1" && echo moved || echo refused' sh "$f"
	[[ $(<"$T/on.rc") == 0 && $(<"$T/on.out") == refused ]] ||
		fail "sandboxed: exit $(<"$T/on.rc"), '$(cat "$T/on.out")'" "$(cat "$T/on.err")"
	grep -q 'Read-only file system' "$T/on.err" || fail "not refused by a read-only /sys:" "$(cat "$T/on.err")"
	capture "$T/off" sup -k 1 --sandbox off sh -c 'echo 0 >"$1" && echo moved || echo refused' sh "$f"
	[[ $(<"$T/off.out") == moved ]] || fail "unsandboxed root could not move (the docs say it can):" "$(cat "$T/off.out" "$T/off.err")"
}
