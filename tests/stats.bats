#!/usr/bin/env bats
# DIEHARD_STATS=1: one line per process on stderr at exit, in the documented
# format; nothing at all without it.

load helpers

setup() {
	require_prog badfree
}

@test "DIEHARD_STATS=1 prints exactly one well-formed line, with the process's pid, and leaves stdout alone" {
	run --separate-stderr -0 dh DIEHARD_STATS=1 "$PROGS/badfree" clean
	[[ ${lines[1]} == "clean: ok allocations=1000" && ${#lines[@]} == 2 ]] || fail "stdout changed:" "$output"
	local pid=${lines[0]#pid=} n
	n=$(grep -c '' <<<"$stderr")
	((n == 1)) || fail "want exactly one line on stderr:" "$stderr"
	[[ $stderr =~ $STATS_RE ]] || fail "malformed stats line: $stderr"
	[[ $(stat_field pid "$stderr") == "$pid" ]] || fail "stats line is not from pid $pid: $stderr"
}

@test "DIEHARD_STATS=1: each process of a pipeline and of a forking shell prints its own line" {
	local err="$BATS_TEST_TMPDIR/err"
	# bash forks a subshell and runs two programs; every process exits normally.
	dh DIEHARD_STATS=1 bash -c '(echo x | "$1" clean >/dev/null); "$1" clean >/dev/null; exit 0' sh "$PROGS/badfree" 2>"$err"
	stats_lines "$err" >"$err.stats"
	local n pids
	n=$(grep -c '' "$err.stats")
	pids=$(sed 's/.* pid=\([0-9]*\) .*/\1/' "$err.stats" | sort -u | grep -c '')
	((n >= 3)) || fail "want a line from bash and from both programs:" "$(cat "$err")"
	((pids == n)) || fail "several lines from one process:" "$(cat "$err.stats")"
	check_no_bad_frees "$err.stats"
}

@test "DIEHARD_STATS=1 still reports for programs that close stderr before exiting (coreutils, gzip)" {
	# sort, cat and gzip close stdout and stderr in an atexit handler, which
	# runs before the library's destructor.  A user asking for the stats
	# line still expects it.
	local prog
	for prog in "sort /etc/passwd" "cat /etc/passwd" "gzip -c /etc/passwd"; do
		run --separate-stderr dh DIEHARD_STATS=1 $prog
		((status == 0)) || fail "$prog failed: $stderr"
		[[ $stderr =~ $STATS_RE ]] || fail "no stats line from '$prog' (stderr: '$stderr')"
	done
}

@test "without DIEHARD_STATS (or with DIEHARD_STATS=0) nothing is written to stderr" {
	local v
	for v in "" "DIEHARD_STATS=0" "DIEHARD_FILL=random DIEHARD_SEED=1 DIEHARD_M=3"; do
		local -a envs=()
		read -r -a envs <<<"$v"
		run --separate-stderr -0 dh "${envs[@]}" "$PROGS/badfree" clean
		[[ -z $stderr ]] || fail "stderr with '${v:-defaults}':" "$stderr"
	done
}
