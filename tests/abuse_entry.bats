#!/usr/bin/env bats
# System calls through another architecture's entry, and every refusal the
# seccomp filter promises (docs/SANDBOX.md, "The seccomp filter's
# refusals"), made by a hostile replica (tests/progs/abuse_entry.c) through
# the native entry (`syscall`), the i386 one (`int $0x80`, i386 numbers)
# and the x32 one (x32 numbers, bit 30 set): natively each is refused as
# documented; through a foreign entry the attacking replica is killed by
# SIGSYS before the call does anything, and the others go on and commit.
# Each row as root and as nobody, with --sandbox on, auto and off where it
# applies (auto where no namespaces can be made: the unsandboxed rows).
# Only the first replica to make a lock directory attacks (the others are
# the honest majority); the attacker logs what happened to a file of its
# own, outside the vote.

load helpers

setup() {
	require_diehard
	require_jq
	require_prog abuse_entry
	export SUP_TIMEOUT=60
	T=$BATS_TEST_TMPDIR
	# A directory the user nobody may write in (the test's own may sit in
	# one it cannot enter): locks, logs and reports.
	W=$(mktemp -d /tmp/diehard-entry.XXXXXX)
	chmod 777 "$W"
	N=0
	PROBLEMS=()
	EXTRA=() # more options for every run of attack
}

teardown() {
	if [[ -n ${SOCK:-} ]]; then
		tmux -S "$SOCK" kill-server 2>/dev/null || true
	fi
	rm -rf "$W"
}

# require_user USER: root (the tests' own user) or nobody.
require_user() {
	if [[ $1 == nobody ]]; then
		require_nobody
	fi
}

# require_no_namespaces: auto without namespaces is made by a user
# namespace whose limit of pid namespaces is 0 (as in diehard_sandbox.bats).
require_no_namespaces() {
	unshare -Ur true 2>/dev/null || skip "no user namespaces to set the limit in"
}

# The refusals of a sandboxed replica (every one names its init, pid 1) and
# of one without namespaces (diehard is its parent); io_uring in every mode.
SANDBOXED=(
	"tiocsti own" "ptrace init" "process_vm_readv init" "process_vm_writev init" "pidfd_open init" "kcmp init"
)
UNSANDBOXED=(
	"tiocsti own" "ptrace parent" "process_vm_readv parent" "process_vm_writev parent" "pidfd_getfd self"
	"kcmp parent" "pidfd_send_signal parent" "kill parent" "kill parent-group" "kill all" "tkill parent"
	"tgkill parent" "rt_sigqueueinfo parent" "rt_tgsigqueueinfo parent" "pidfd_open parent"
)
IO_URING=("io_uring_setup self" "io_uring_enter self" "io_uring_register self")

# attack USER MODE ENTRY ATTACK TARGET: one run of diehard -v -k 3 (and
# EXTRA's options) in which
# the first replica to make the lock directory attacks; RUN names its files
# (RUN.out, .err, .rc, .json, .log). MODE is a --sandbox mode, or
# auto-none: auto where no pid namespace can be made.
attack() {
	local user=$1 mode=$2 entry=$3 what=$4 target=$5 pre=() sandbox
	N=$((N + 1))
	RUN=$W/run.$N
	[[ $user == nobody ]] && pre=(as_nobody)
	sandbox=(--sandbox "$mode")
	if [[ $mode == auto-none ]]; then
		pre+=(unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_pid_namespaces && exec "$@"' sh)
		sandbox=(--sandbox auto)
	fi
	capture "$RUN" "${pre[@]}" timeout 60 "$DIEHARD" --share "$W" -v -k 3 "${sandbox[@]}" ${EXTRA[@]+"${EXTRA[@]}"} -r "$RUN.json" \
		"$PROGS/abuse_entry" --lock "$RUN.lock" --log "$RUN.log" "$entry" "$what" "$target"
}

# problem TEXT...: notes a failed check of the row being run (all rows run;
# the test fails at the end with every problem).
problem() {
	PROBLEMS+=("$(printf '%s\n' "$@")")
}

# check_row ENTRY ATTACK TARGET NAMESPACES: the run in RUN went on and
# committed the honest replicas' "done"; its namespaces were as the row
# says ("none", or made); natively the call was refused (EPERM, ENOSYS for
# io_uring) and nothing was pushed into a terminal; through a foreign entry
# the attacker logged nothing after trying, one replica died of SIGSYS,
# which the report and the -v event name as the filter's kill.
check_row() {
	local entry=$1 what=$2 target=$3 ns=$4 label="$1 $2 $3" want log
	local details="exit $(<"$RUN.rc"), stdout '$(head -c 200 "$RUN.out")'"$'\n'"log: $(cat "$RUN.log" 2>&1)"$'\n'"stderr: $(head -c 3000 "$RUN.err")"
	if [[ $(<"$RUN.rc") != 0 || $(<"$RUN.out") != done ]]; then
		problem "$label: the run did not commit the honest output" "$details"
		return
	fi
	if [[ $ns == none ]]; then
		jq -e '.sandbox.namespaces == "none"' "$RUN.json" >/dev/null || problem "$label: namespaces were made" "$(jq -c .sandbox "$RUN.json")"
	else
		jq -e '.sandbox.namespaces | test("pid")' "$RUN.json" >/dev/null || problem "$label: no pid namespace" "$(jq -c .sandbox "$RUN.json")"
	fi
	log=$(cat "$RUN.log" 2>/dev/null)
	if [[ $entry == native ]]; then
		want="$label: trying"$'\n'"$label: error EPERM"
		[[ $what == io_uring_* ]] && want="$label: trying"$'\n'"$label: error ENOSYS"
		[[ $what == tiocsti ]] && want+=$'\n'"$label: pushed 0"
		[[ $log == "$want" ]] || problem "$label: not refused as documented" "$details"
		jq -e 'all(.replicas[]; has("signal") | not)' "$RUN.json" >/dev/null ||
			problem "$label: a replica died of a signal" "$(jq -c '[.replicas[] | {status, signal, killed}]' "$RUN.json")"
		return
	fi
	[[ $log == "$label: trying" ]] || problem "$label: the call returned" "$details"
	if [[ $entry == i386 ]] && ! i386_entry; then
		jq -e '([.replicas[] | select(.signal == 11)] | length == 1) and
			all(.replicas[] | select(.signal != 11); has("signal") | not)' "$RUN.json" >/dev/null ||
			problem "$label: no i386 entry here, yet the attacker did not die of SIGSEGV alone" \
				"$(jq -c '[.replicas[] | {status, signal, killed}]' "$RUN.json")"
		return
	fi
	jq -e '[.replicas[] | select(.signal == 31)] | length == 1 and
		(.[0].signal_cause | test("^SIGSYS: diehard.s filter kills a system call made through another architecture.s entry, i386 or x32$"))' \
		"$RUN.json" >/dev/null ||
		problem "$label: the attacker was not killed by SIGSYS" "$(jq -c '[.replicas[] | {status, signal, signal_cause, killed}]' "$RUN.json")"
	jq -e 'all(.replicas[] | select(.signal != 31); has("signal") | not)' "$RUN.json" >/dev/null ||
		problem "$label: an honest replica died of a signal" "$(jq -c '[.replicas[] | {status, signal, killed}]' "$RUN.json")"
	grep -Eq "^diehard: replica [0-9]+ \(pid [0-9]+\) killed by signal 31 \(SIGSYS: diehard's filter kills a system call made through another architecture's entry, i386 or x32\)$" "$RUN.err" ||
		problem "$label: no -v event of the kill" "$details"
}

# i386_entry: whether `int $0x80` reaches the kernel here. Some kernels and
# virtual machines (a PVM guest, for one) have no i386 entry: the
# instruction faults (SIGSEGV) before any system call, so there is nothing
# to refuse through it, and its rows check that the attacker died of that
# fault with nothing done.
i386_entry() {
	if [[ -z ${I386:-} ]]; then
		local rc=0
		timeout 10 "$PROGS/abuse_entry" i386 io_uring_setup self >/dev/null 2>&1 || rc=$?
		I386=yes
		((rc == 139)) && I386=no
	fi
	[[ $I386 == yes ]]
}

# rows USER MODE NAMESPACES ROW...: every row through every entry.
rows() {
	local user=$1 mode=$2 ns=$3 row entry
	shift 3
	for row in "$@"; do
		for entry in native i386 x32; do
			# shellcheck disable=SC2086 # a row is "ATTACK TARGET"
			attack "$user" "$mode" "$entry" $row
			# shellcheck disable=SC2086
			check_row "$entry" $row "$ns"
		done
	done
	# The last run's report (x32: signal_cause and all) as the schema says.
	validate_report "$RUN.json"
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

@test "control: outside diehard each attack reaches a child of its own through the native and i386 entries (x32: ENOSYS where the kernel lacks it)" {
	local row entry what out
	for row in "${UNSANDBOXED[@]}" "${IO_URING[@]}"; do
		what=${row%% *}
		for entry in native i386 x32; do
			# No i386 entry: int $0x80 faults, and a child the attack
			# made would be left holding the output.
			[[ $entry == i386 ]] && ! i386_entry && continue
			case $what in
			tiocsti) out=$(timeout 60 "$PROGS/abuse_entry" "$entry" tiocsti own) || true ;;
			io_uring_*) out=$(timeout 60 "$PROGS/abuse_entry" "$entry" "$what" self) || true ;;
			*) out=$(timeout 60 "$PROGS/abuse_entry" "$entry" "$what" child) || true ;;
			esac
			if [[ $entry == x32 ]] && grep -q ': error ENOSYS$' <<<"$out"; then
				continue # a kernel without CONFIG_X86_X32_ABI: every x32 call is ENOSYS
			fi
			case $what in
			tiocsti) [[ $out == *": returned 0"$'\n'*": pushed 1" ]] ;;
			kill | tkill | tgkill | rt_sigqueueinfo | rt_tgsigqueueinfo | pidfd_send_signal)
				[[ $out == *": returned 0"$'\n'*": child killed" ]] ;;
			process_vm_*) [[ $out == *": returned 1" ]] ;;
			io_uring_setup) [[ $out == *": returned "[0-9]* ]] ||
				grep -q 1 /proc/sys/kernel/io_uring_disabled 2>/dev/null ;;
			io_uring_*) [[ $out == *": error E"[BI]* ]] ;; # EBADF, EINVAL: the kernel looked
			*) [[ $out == *": returned "[0-9]* ]] ;;
			esac || problem "$entry $what: the attack does not work without diehard" "$out"
		done
	done
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

@test "--sandbox on, as root: TIOCSTI and ptrace/process_vm_readv/writev/pidfd_open/kcmp of the init: EPERM natively; i386 and x32 kill the attacker (SIGSYS), the others commit" {
	rows root on made "${SANDBOXED[@]}"
}

@test "--sandbox on, as nobody: TIOCSTI and ptrace/process_vm_readv/writev/pidfd_open/kcmp of the init: EPERM natively; i386 and x32 kill the attacker (SIGSYS), the others commit" {
	require_user nobody
	rows nobody on made "${SANDBOXED[@]}"
}

@test "--sandbox auto (namespaces made), as root and nobody: the init's refusals: EPERM natively; i386 and x32 kill the attacker" {
	rows root auto made "${SANDBOXED[@]}"
	require_user nobody
	rows nobody auto made "${SANDBOXED[@]}"
}

@test "--sandbox off, as root: TIOCSTI, ptrace/process_vm_*/pidfd_getfd/kcmp/pidfd_send_signal, signals and pidfd_open naming diehard: EPERM natively; i386 and x32 kill the attacker, diehard lives and commits" {
	rows root off none "${UNSANDBOXED[@]}"
}

@test "--sandbox off, as nobody: TIOCSTI, ptrace/process_vm_*/pidfd_getfd/kcmp/pidfd_send_signal, signals and pidfd_open naming diehard: EPERM natively; i386 and x32 kill the attacker, diehard lives and commits" {
	require_user nobody
	rows nobody off none "${UNSANDBOXED[@]}"
}

@test "--sandbox auto where no namespaces can be made, as root and as nobody (each root in a user namespace): the unsandboxed refusals: EPERM natively; i386 and x32 kill the attacker" {
	require_no_namespaces
	rows root auto-none none "${UNSANDBOXED[@]}"
	require_user nobody
	rows nobody auto-none none "${UNSANDBOXED[@]}"
}

@test "io_uring_setup/enter/register: ENOSYS natively (sandboxed or not, as root and nobody); i386 and x32 kill the attacker" {
	rows root on made "${IO_URING[@]}"
	rows root off none "${IO_URING[@]}"
	require_user nobody
	rows nobody on made "${IO_URING[@]}"
	rows nobody off none "${IO_URING[@]}"
}

@test "system call numbers: -1 and those with bit 31 set get ENOSYS (not killed), as does 0x3fffffff; x32's range 0x40000000-0x7fffffff kills, with --no-virtualize too" {
	local nr want flags out
	for flags in "" --no-virtualize; do
		for nr in -1 0x80000000 0xfffff000 0x3fffffff 0x40000000 0x40000027 0x7fffffff; do
			capture "$T/run" sup -k 1 $flags -r "$T/r.json" "$PROGS/abuse_entry" native raw "$nr"
			out=$(cat "$T/run.out")
			case $nr in
			0x4* | 0x7*) want="native raw $nr: trying" ;;
			*) want="native raw $nr: trying"$'\n'"native raw $nr: error ENOSYS" ;;
			esac
			[[ $out == "$want" ]] || problem "$nr ${flags:-virtualized}: $out (exit $(<"$T/run.rc"))"
			if [[ $nr == 0x4* || $nr == 0x7* ]]; then
				jq -e '.replicas[0].signal == 31' "$T/r.json" >/dev/null || problem "$nr ${flags:-virtualized}: not killed"
			fi
		done
	done
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

@test "--no-virtualize (the filter without a listener): every refusal, sandboxed and not, as root and nobody: EPERM natively; i386 and x32 kill the attacker" {
	EXTRA=(--no-virtualize)
	rows root on made "${SANDBOXED[@]}"
	rows root off none "${UNSANDBOXED[@]}" "${IO_URING[@]}"
	jq -e '.virtualize == false' "$RUN.json" >/dev/null || fail "virtualized: $(jq -c .virtualize "$RUN.json")"
	require_user nobody
	rows nobody on made "${SANDBOXED[@]}" "${IO_URING[@]}"
	rows nobody off none "${UNSANDBOXED[@]}"
}

# hello32 PATH: assembles tests/progs/i386/hello32.s into PATH with the
# 64-bit toolchain; skips the test where binutils cannot make i386 code.
hello32() {
	as --32 -o "$1.o" "$ROOT/tests/progs/i386/hello32.s" 2>"$T/as.err" && ld -m elf_i386 -o "$1" "$1.o" 2>>"$T/as.err" ||
		skip "binutils cannot make an i386 program here: $(cat "$T/as.err")"
	chmod 755 "$1"
}

# refused_32 USER PATH LINE: diehard -k 3 PATH as USER exits 126 before any
# replica runs (the program would print), with LINE alone on stderr.
refused_32() {
	local pre=()
	[[ $1 == nobody ]] && pre=(as_nobody)
	capture "$T/run" "${pre[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 "$2"
	[[ $(<"$T/run.rc") == 126 && ! -s $T/run.out ]] ||
		problem "$1 $2: exit $(<"$T/run.rc") (126 expected), stdout '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
	[[ $(cat "$T/run.err") == "$3" ]] || problem "$1 $2: stderr:" "$(cat "$T/run.err")" "expected:" "$3"
}

@test "a 32-bit i386 program: one line and exit 126 before any replica runs (root and nobody); a script whose #! names one too" {
	hello32 "$W/hello32"
	# It runs outside diehard: the refusal is diehard's, not the kernel's.
	[[ $("$W/hello32") == "hello from i386" ]] || skip "this kernel cannot run i386 programs (no IA32 emulation)"
	printf '#!%s\n' "$W/hello32" >"$W/script"
	chmod 755 "$W/script"
	local why="diehard's seccomp filter kills every system call made through the i386 or x32 entry, so it cannot run as replicas"
	refused_32 root "$W/hello32" "diehard: $W/hello32 is a 32-bit i386 program: $why"
	refused_32 root "$W/script" "diehard: $W/script runs $W/hello32, a 32-bit i386 program: $why"
	require_user nobody
	refused_32 nobody "$W/hello32" "diehard: $W/hello32 is a 32-bit i386 program: $why"
	refused_32 nobody "$W/script" "diehard: $W/script runs $W/hello32, a 32-bit i386 program: $why"
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

@test "a 32-bit i386 program started inside the replicas dies of SIGSYS at its first call and writes nothing; the run agrees on it (root and nobody, sandbox on and off)" {
	hello32 "$W/hello32"
	[[ $("$W/hello32") == "hello from i386" ]] || skip "this kernel cannot run i386 programs (no IA32 emulation)"
	local user mode pre
	for user in root nobody; do
		pre=()
		if [[ $user == nobody ]]; then
			require_user nobody
			pre=(as_nobody)
		fi
		for mode in on off; do
			capture "$T/run" "${pre[@]}" timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox "$mode" -r "$W/r.json" \
				sh -c '"$0" 2>/dev/null; echo "status $?"' "$W/hello32"
			[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == "status 159" ]] ||
				problem "$user $mode: exit $(<"$T/run.rc"), stdout '$(cat "$T/run.out")' (status 159: SIGSYS)" "$(cat "$T/run.err")"
			jq -e '.divergences == [] and all(.replicas[]; .status == 0)' "$W/r.json" >/dev/null ||
				problem "$user $mode: $(jq -c '{divergences, r: [.replicas[] | {status, killed}]}' "$W/r.json")"
			rm -f "$W/r.json"
		done
	done
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

# in_pane CMD: types CMD and Enter into the tmux pane.
in_pane() {
	tmux -S "$SOCK" send-keys -l "$1"
	tmux -S "$SOCK" send-keys Enter
}

@test "TIOCSTI into the terminal diehard was started from (tmux): outside diehard a pushed command runs; from a replica, natively, i386 or x32, as root or nobody, sandbox on or off, nothing reaches the shell" {
	require_cmd tmux
	SOCK=$W/tmux.sock
	tmux -S "$SOCK" new-session -d -x 200 -y 50 "bash --norc --noprofile"
	local tty user mode entry pre n=0
	tty=$(tmux -S "$SOCK" display-message -p '#{pane_tty}')
	# The control: the attack pushes a command the shell then runs.
	local control=i386
	i386_entry || control=native
	in_pane "'$PROGS/abuse_entry' --push \$'touch $W/control\\n' $control tiocsti /dev/tty >/dev/null"
	wait_until 20 test -e "$W/control" || fail "the control's pushed command did not run: TIOCSTI does not reach this terminal"
	for user in root nobody; do
		pre=
		if [[ $user == nobody ]]; then
			require_user nobody
			pre="setpriv --reuid=65534 --regid=65534 --clear-groups"
		fi
		for mode in on off; do
			for entry in native i386 x32; do
				n=$((n + 1))
				# The replica tries its controlling terminal, then the
				# pane's by name (root may open it even without one).
				in_pane "$pre '$DIEHARD' --share '$W' -k 3 --sandbox $mode -r '$W/t$n.json' '$PROGS/abuse_entry' --lock '$W/t$n.lock' --log '$W/t$n.log' --push \$'touch $W/pwned.$n\\n' $entry tiocsti /dev/tty:$tty </dev/null >'$W/t$n.out' 2>'$W/t$n.err'; echo \$? >'$W/t$n.rc'"
				wait_until 60 test -s "$W/t$n.rc" || { problem "$user $mode $entry: diehard did not finish"; continue; }
				# Typed after anything pushed: when it has run, so has that.
				in_pane "touch '$W/sentinel.$n'"
				wait_until 20 test -e "$W/sentinel.$n" || problem "$user $mode $entry: the shell did not run the sentinel"
				[[ ! -e $W/pwned.$n ]] || problem "$user $mode $entry: the pushed command ran in the user's shell" "$(cat "$W/t$n.log")"
				[[ $(<"$W/t$n.rc") == 0 && $(<"$W/t$n.out") == done ]] ||
					problem "$user $mode $entry: exit $(<"$W/t$n.rc"), stdout $(cat "$W/t$n.out")" "$(cat "$W/t$n.err")"
				# What the attacker met: no terminal to open (a replica
				# without one), the filter's EPERM, or its SIGSYS.
				local log label="$entry tiocsti /dev/tty:$tty"
				log=$(cat "$W/t$n.log" 2>&1)
				case $entry in
				native) [[ $log == "$label: trying"$'\n'"$label: error EPERM" || $log == "$label: open failed "* ]] ;;
				*) local sig=31
					[[ $entry == i386 ]] && ! i386_entry && sig=11 # no i386 entry: int $0x80 faults
					[[ $log == "$label: trying" || $log == "$label: open failed "* ]] &&
					{ [[ $log == *"open failed"* ]] || jq -e --argjson s "$sig" '[.replicas[] | select(.signal == $s)] | length == 1' "$W/t$n.json" >/dev/null; } ;;
				esac || problem "$user $mode $entry: the attacker's log: $log" "$(jq -c '[.replicas[] | {status, signal}]' "$W/t$n.json" 2>&1)"
			done
		done
	done
	((${#PROBLEMS[@]} == 0)) || fail "${PROBLEMS[@]}"
}

# owner WHO SANDBOX TARGET: tests/progs/abuse_owner against TARGET ("ppid":
# its parent, diehard when unsandboxed; else a pid), as WHO: every attempt
# refused (EPERM, none DONE), diehard lives and commits "done" from all.
owner() {
	local who=$1 sandbox=$2 target=$3 lock=$W/owner-$1-$2
	local run=(timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox "$sandbox" sh -c 'exec "$0" "${1:-$PPID}" "$2"'
		"$PROGS/abuse_owner" "$([[ $target == ppid ]] || echo "$target")" "$lock")
	if [[ $who == nobody ]]; then
		capture "$T/own" as_nobody "${run[@]}"
	else
		capture "$T/own" "${run[@]}"
	fi
	[[ $(<"$T/own.rc") == 0 && $(<"$T/own.out") == done ]] ||
		fail "$who, --sandbox $sandbox: exit $(<"$T/own.rc"), output $(head -c 200 "$T/own.out")" "$(head -c 1000 "$T/own.err")"
	[[ -s $lock/log ]] || fail "$who, --sandbox $sandbox: no attempt logged"
	! grep -v ': EPERM$' "$lock/log" | grep -q . ||
		fail "$who, --sandbox $sandbox: not refused:" "$(grep -v ': EPERM$' "$lock/log")"
}

@test "without namespaces a replica cannot have the kernel act on diehard (F_SETOWN/F_SETOWN_EX/F_SETSIG/FIOSETOWN with SIGKILL, prlimit RLIMIT_CPU, scheduling and priorities, PRIO_USER) nor use userfaultfd: EPERM, diehard lives and commits (root and nobody)" {
	owner root off ppid
	require_nobody
	owner nobody off ppid
}

@test "userfaultfd (a page that would stall diehard's reads of the replica's memory) is refused sandboxed too (root and nobody)" {
	# Sandboxed, the replica names only its own namespace's processes (the
	# owner rows then do not reach diehard: pid 1 is its init); userfaultfd
	# is refused all the same.
	capture "$T/u" timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox on "$PROGS/abuse_owner" 1 "$W/uffd-root"
	[[ $(<"$T/u.rc") == 0 ]] || fail "exit $(<"$T/u.rc")" "$(cat "$T/u.err")"
	grep -qx 'userfaultfd: EPERM' "$W/uffd-root/log" || fail "log: $(cat "$W/uffd-root/log")"
	require_nobody
	capture "$T/u" as_nobody timeout 60 "$DIEHARD" --share "$W" -k 3 --sandbox on "$PROGS/abuse_owner" 1 "$W/uffd-nobody"
	[[ $(<"$T/u.rc") == 0 ]] || fail "exit $(<"$T/u.rc")" "$(cat "$T/u.err")"
	grep -qx 'userfaultfd: EPERM' "$W/uffd-nobody/log" || fail "log: $(cat "$W/uffd-nobody/log")"
}
