# tests/writer.bash: a long-running writer under diehard, driven a line
# at a time (tests/scripts/points_writer.py does one thing a line of input
# and says so on stdout, flushed): for tests/points.bats and tests/logs.bats.
# writer_setup makes $T/w (the writer's directory) and $T/shared (--share'd).

WRITER=$ROOT/tests/scripts/points_writer.py

# writer_setup: a test's $T, its $T/w and $T/shared; the work directory
# is viewed, as any other (no --share of the test's directory).
writer_setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	export SUP_TIMEOUT=240
	SUP_SHARE= # the work directory is viewed, as any other
	mkdir "$T/w" "$T/shared"
}

# start_writer ARGS...: diehard ARGS... running the writer in $T/w, its
# input the fifo on fd 7, its output in $T/run.out; WRITER_AS: words
# before the writer's python3 (setpriv ..., to run it as another user).
start_writer() {
	mkfifo "$T/in"
	# shellcheck disable=SC2086 # WRITER_AS is a list of words
	(cd "$T/w" && POINTS_LOCK=$T/shared/lock exec timeout "$SUP_TIMEOUT" "$DIEHARD" --share "$T/shared" "$@" \
		-r "$T/r.json" ${WRITER_AS:-} python3 "$WRITER" <"$T/in" >"$T/run.out" 2>"$T/run.err") &
	DH=$!
	exec 7>"$T/in"
	DH_PID=
	wait_until 30 eval 'DH_PID=$(pgrep -P "$DH" -x diehard)' || true
}

# say LINE WANT: one command; waits (120 s at most) until the committed
# output has one line WANT more than before it (a command said twice
# waits for its second answer, not the first's).
say() {
	local i had n
	had=$(grep -cxF -- "$2" "$T/run.out" 2>/dev/null) || true
	echo "$1" >&7
	for ((i = 0; i < 6000; i++)); do
		n=$(grep -cxF -- "$2" "$T/run.out" 2>/dev/null) || true
		((${n:-0} > ${had:-0})) && return 0
		proc_alive "$DH" || break
		sleep 0.02
	done
	fail "no line '$2' after '$1'" "$(cat "$T/run.out")" "$(tail -20 "$T/run.err")"
}

# writer_pids: the replicas' writers.
writer_pids() {
	local p
	for p in $(pgrep -x python3); do
		grep -qF points_writer "/proc/$p/cmdline" 2>/dev/null && echo "$p"
	done
	return 0
}

# finish: the input ends; diehard's exit status in BG_RC.
finish() {
	exec 7>&-
	await_exit "$DH" 240
}

