#!/usr/bin/env bats
# A recording that cannot be written (issue 37): --record FILE onto a full
# file system. Under --ci the run fails with exit 121 (its own code), in
# any mode the failure is one line on stderr naming the file and the errno,
# said once, the report says so (`recording`), and nothing is left at FILE:
# no temporary file, no part of a recording, no older recording either.
#
# The full file system is a 64 KiB tmpfs filled up, mounted in a mount
# namespace of the test's own (unshare -m as root; unshare -rm as nobody,
# who then runs diehard as nobody again in a nested user namespace), so the
# host's mounts are never touched.

load helpers

setup() {
	require_diehard
	require_jq
	command -v unshare >/dev/null || skip "no unshare"
	T=$BATS_TEST_TMPDIR
	W=$(mktemp -d /tmp/diehard-record.XXXXXX)
	chmod 777 "$W"
	mkdir -m 777 "$W/full"
}

teardown() {
	rm -rf "$W"
}

# require_nobody_mounts: require_nobody (helpers.bash), and nobody can
# make a user and mount namespace of its own (for the full tmpfs).
require_nobody_mounts() {
	require_nobody
	as_nobody unshare -rm true 2>/dev/null || skip "nobody cannot make a user and mount namespace"
}

# The script run in the private mount namespace: $1 the mount point, then
# the command. A tmpfs of 64 KiB, filled to the last page, with an older
# recording in it (made before the fill: it must be gone after the run), a
# listing of what is left after the command, and the command's exit status
# as its own.
FULL_SCRIPT='
	dir=$1
	shift
	mount -t tmpfs -o size=64k,mode=0777 tmpfs "$dir" || exit 99
	printf "an older recording\n" >"$dir/run.dhr"
	cat /dev/zero >"$dir/fill" 2>/dev/null
	[ "$(df --output=avail "$dir" | tail -n 1 | tr -d " ")" = 0 ] || exit 98
	rc=0
	"$@" || rc=$?
	ls -A "$dir" >"$LISTING"
	exit "$rc"'

# on_full ROLE CMD...: CMD (diehard ...) with a full tmpfs at $W/full, its
# output in $T/run.out, .err, .rc and the tmpfs's listing after it in
# $T/left. As nobody: a user and mount namespace for the tmpfs, and inside
# it diehard as nobody again (a nested user namespace mapping nobody).
# Callers give --files shared: the full tmpfs mounted beneath /tmp leaves
# /tmp without a view for nobody, a line of its own (docs/FILES.md).
on_full() {
	local role=$1
	shift
	rm -f "$W/r.json" "$W/left"
	if [[ $role == nobody ]]; then
		capture "$T/run" as_nobody env LISTING="$W/left" timeout 120 unshare -rm sh -c "$FULL_SCRIPT" sh "$W/full" \
			unshare -U --map-user=65534 --map-group=65534 "$@"
	else
		capture "$T/run" env LISTING="$W/left" timeout 120 unshare -m sh -c "$FULL_SCRIPT" sh "$W/full" "$@"
	fi
	RC=$(<"$T/run.rc")
	[[ $RC != 98 && $RC != 99 ]] || fail "cannot make the full tmpfs as $role (exit $RC)" "$(cat "$T/run.err")"
}

# check_said_once FILE: stderr is exactly one line, "diehard: cannot write
# the recording FILE: No space left on device".
check_said_once() {
	local want="diehard: cannot write the recording $1: No space left on device"
	[[ $(<"$T/run.err") == "$want" ]] || fail "stderr is not exactly the one line '$want':" "$(cat "$T/run.err")"
}

# check_nothing_left: only the filler is left on the tmpfs (no recording,
# no temporary file, not the older recording).
check_nothing_left() {
	[[ $(<"$W/left") == fill ]] || fail "left on the full file system: $(tr '\n' ' ' <"$W/left")"
}

# check_report PATH CODE: the report says the recording was not written,
# and why, and the run's exit code.
check_report() {
	jq -e --arg path "$1" --argjson code "$2" '.recording == {path: $path, written: false,
		error: ("cannot write the recording " + $path + ": No space left on device")} and .exit_code == $code' \
		"$W/r.json" >/dev/null || fail "report: $(jq -c '{recording, exit_code, exit_reason}' "$W/r.json")"
	validate_report "$W/r.json"
}

ci_full() {
	local role=$1 sb
	for sb in on auto off; do
		on_full "$role" "$DIEHARD" --files shared --ci --sandbox "$sb" --record "$W/full/run.dhr" -r "$W/r.json" sh -c 'echo hello'
		[[ $RC == 121 && $(<"$T/run.out") == hello ]] ||
			fail "$role, --sandbox $sb: exit $RC (want 121), stdout '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
		check_said_once "$W/full/run.dhr"
		check_nothing_left
		check_report "$W/full/run.dhr" 121
		jq -e '.exit_reason == "cannot write the recording " + .recording.path + ": No space left on device" and
			.ci.failed == false' "$W/r.json" >/dev/null || fail "report: $(jq -c '{exit_reason, ci}' "$W/r.json")"
	done
}

@test "record: --ci --record onto a full file system fails with exit 121 and one line, leaves no file, and the report says so, as root (--sandbox on, auto, off)" {
	ci_full root
}

@test "record: --ci --record onto a full file system fails with exit 121 and one line, leaves no file, and the report says so, as nobody (--sandbox on, auto, off)" {
	require_nobody_mounts
	ci_full nobody
}

plain_full() {
	local role=$1 sb
	for sb in on auto off; do
		on_full "$role" "$DIEHARD" --files shared -k 3 --sandbox "$sb" --record "$W/full/run.dhr" -r "$W/r.json" sh -c 'echo hello; exit 3'
		[[ $RC == 3 && $(<"$T/run.out") == hello ]] ||
			fail "$role, --sandbox $sb: exit $RC (want the program's 3), stdout '$(cat "$T/run.out")'" "$(cat "$T/run.err")"
		check_said_once "$W/full/run.dhr"
		check_nothing_left
		check_report "$W/full/run.dhr" 3
	done
}

@test "record: --record (no --ci) onto a full file system: the program's exit status, the line said once, no file left, the report says so, as root (--sandbox on, auto, off)" {
	plain_full root
}

@test "record: --record (no --ci) onto a full file system: the program's exit status, the line said once, no file left, the report says so, as nobody (--sandbox on, auto, off)" {
	require_nobody_mounts
	plain_full nobody
}

ci_finding_full() {
	local role=$1
	on_full "$role" "$DIEHARD" --files shared --ci --record "$W/full/run.dhr" -r "$W/r.json" "$PROGS/ci_bugs" bit
	[[ $RC == 122 ]] || fail "$role: exit $RC (want 122: the finding comes first)" "$(cat "$T/run.err")"
	[[ $(grep -c 'cannot write the recording' "$T/run.err") == 1 ]] ||
		fail "$role: the recording's failure is not said once:" "$(cat "$T/run.err")"
	grep -qx "diehard: cannot write the recording $W/full/run.dhr: No space left on device" "$T/run.err" ||
		fail "$role: stderr:" "$(cat "$T/run.err")"
	check_nothing_left
	check_report "$W/full/run.dhr" 122
	jq -e '.ci.failed and .ci.recording == null and (.ci.findings | length) >= 1' "$W/r.json" >/dev/null ||
		fail "$role: report: $(jq -c .ci "$W/r.json")"
}

@test "record: --ci with a finding onto a full file system: still exit 122 with the finding, the recording's failure said once, no file left, as root and as nobody" {
	require_prog ci_bugs
	ci_finding_full root
	require_nobody_mounts
	ci_finding_full nobody
}

@test "record: --record onto something that is not a regular file (a device, a FIFO, a directory) is refused before anything runs, and is left as it was" {
	# Made here, never the system's own: a diehard that renamed over
	# them (what a recording's rename would do) damages only the test's.
	local what list=("$W/fifo" "$W/dir")
	mkfifo "$W/fifo"
	mkdir "$W/dir"
	# A device needs root to make.
	mknod "$W/null" c 1 3 2>/dev/null && list+=("$W/null")
	for what in "${list[@]}"; do
		capture "$T/run" sup --record "$what" sh -c 'touch "$1/ran"' sh "$W"
		[[ $(<"$T/run.rc") == 125 && ! -e $W/ran ]] || fail "--record $what: exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
		[[ $(<"$T/run.err") == "diehard: cannot write the recording $what: not a regular file (a recording replaces the file)" ]] ||
			fail "--record $what: stderr:" "$(cat "$T/run.err")"
	done
	[[ -p $W/fifo && -d $W/dir && (! -e $W/null || -c $W/null) ]] || fail "not left as they were: $(ls -l "$W")"
}

@test "record: a recording written where there is room replaces an older one whole, and replays" {
	printf 'an older recording\n' >"$W/run.dhr"
	capture "$T/run" sup -k 3 --record "$W/run.dhr" sh -c 'echo hello'
	[[ $(<"$T/run.rc") == 0 && $(<"$T/run.out") == hello && ! -s $T/run.err ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ -z $(find "$W" -maxdepth 1 -name 'run.dhr.tmp*') ]] || fail "a temporary file is left: $(ls "$W")"
	capture "$T/replay" sup replay "$W/run.dhr" --replica 1
	[[ $(<"$T/replay.rc") == 0 && $(<"$T/replay.out") == hello ]] ||
		fail "replay: exit $(<"$T/replay.rc"), stdout '$(cat "$T/replay.out")'" "$(cat "$T/replay.err")"
}
