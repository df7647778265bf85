#!/usr/bin/env bats
# build/diehard started in a hostile environment or given hostile arguments:
# fds 0-2 closed, bytes that are not UTF-8 in arguments and paths, report
# files that are directories, FIFOs or pipes, allocators that are not ours,
# a tiny fd limit, a full disk on stdout, and the values the size options'
# messages offer. Each is either run correctly or refused with one line
# and exit 125 before any replica runs.

load helpers

setup() {
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
	# The command every refused invocation would run: proof that nothing ran.
	PROBE=(sh -c ": >'$T/ran'")
}

# sup ARGS...: as in helpers.bash, but a diehard that ignores the hang
# guard's TERM (as one blocked opening a FIFO did) is killed a second later.
sup() {
	timeout -k 1 "$SUP_TIMEOUT" "$DIEHARD" "$@"
}

# no_kills REPORT: every replica of the run exited 0 by itself.
no_kills() {
	jq -e '.exit_code == 0 and (.replicas | length) == .k and
		all(.replicas[]; .killed == null and .signal == null and .status == 0)' "$1" >/dev/null ||
		fail "replicas were killed or failed:" "$(jq -c '{exit_code, replicas: [.replicas[] | {status, signal, killed}]}' "$1")"
}

# ---- 1. fds 0-2 closed ------------------------------------------------------

@test "fds 0, 1 and 2 all closed: the run goes on, exit 0, no replica killed" {
	local rc=0
	sup -k 3 -r "$T/r.json" echo hi <&- >&- 2>&- || rc=$?
	[[ $rc == 0 ]] || fail "diehard -k 3 echo hi <&- >&- 2>&- exited with $rc"
	no_kills "$T/r.json"
	jq -e '.committed.stdout == 3' "$T/r.json" >/dev/null || fail "committed:" "$(jq -c .committed "$T/r.json")"
}

@test "stdin closed: the program sees end of input, diehard says nothing" {
	local rc=0
	sup -k 3 sh -c 'if read -r line; then echo "read $line"; else echo "end of input"; fi' <&- \
		>"$T/out" 2>"$T/err" || rc=$?
	[[ $rc == 0 ]] || fail "exit $rc" "$(cat "$T/err")"
	[[ $(<"$T/out") == "end of input" ]] || fail "the program saw:" "$(cat "$T/out")"
	[[ ! -s $T/err ]] || fail "diehard wrote to stderr:" "$(cat "$T/err")"
}

@test "stdout closed: exit 0 and nothing on stderr; stderr closed: the output still comes" {
	local rc=0
	sup -k 3 -r "$T/r.json" echo hi >&- 2>"$T/err" || rc=$?
	[[ $rc == 0 ]] || fail "diehard -k 3 echo hi >&- exited with $rc" "$(cat "$T/err")"
	[[ ! -s $T/err ]] || fail "diehard wrote to stderr:" "$(cat "$T/err")"
	no_kills "$T/r.json"
	rc=0
	sup -k 3 echo hi >"$T/out" 2>&- || rc=$?
	[[ $rc == 0 && $(<"$T/out") == hi ]] || fail "diehard -k 3 echo hi 2>&-: exit $rc, output: $(cat "$T/out")"
}

# ---- 2. bytes that are not UTF-8 ------------------------------------------

@test "an argument that is not UTF-8 runs: raw bytes out, exit 0, \\xE9 in the report's command" {
	local rc=0
	sup -k 3 -r "$T/r.json" echo $'caf\xe9' 'café' >"$T/out" 2>"$T/err" || rc=$?
	[[ $rc == 0 ]] || fail "exit $rc" "$(cat "$T/err")"
	same_bytes <(printf 'caf\xe9 café\n') "$T/out" "the program's output"
	jq -e . "$T/r.json" >/dev/null || fail "the report is not valid JSON:" "$(head -c 1000 "$T/r.json")"
	# Invalid bytes as \xNN (the JSON text has the backslash escaped), valid
	# UTF-8 kept as it is.
	grep -qF '"caf\\xE9"' "$T/r.json" || fail "no caf\\\\xE9 in the report:" "$(jq -c .command "$T/r.json")"
	jq -e '.command == ["echo", "caf\\xE9", "café"]' "$T/r.json" >/dev/null ||
		fail "command in the report:" "$(jq -c .command "$T/r.json")"
	# Truncated and overlong sequences, a surrogate, a stray continuation byte.
	sup -k 1 -r "$T/r2.json" true $'\xc3' $'\xc0\xaf' $'\xed\xa0\x80' $'a\x80b' $'\xf4\x90\x80\x80' $'\xf0\x9f\x98\x80' ||
		fail "a run with invalid UTF-8 arguments failed"
	jq -e '.command == ["true", "\\xC3", "\\xC0\\xAF", "\\xED\\xA0\\x80", "a\\x80b", "\\xF4\\x90\\x80\\x80", "😀"]' \
		"$T/r2.json" >/dev/null || fail "command in the report:" "$(jq -c .command "$T/r2.json")"
}

@test "Latin-1 names: the program's path, the report's path, the allocator's directory, the environment" {
	local prog=$T/prog$'\xe9' report=$T/r$'\xe9'.json rc=0
	printf '#!/bin/sh\necho "ran $X"\n' >"$prog"
	chmod +x "$prog"
	mkdir "$T/lib"$'\xe9'
	cp "$LIB" "$T/lib"$'\xe9'/libdiehard.so
	X=$'\xe9' sup -k 3 -r "$report" -a "$T/lib"$'\xe9'/libdiehard.so "$prog" >"$T/out" 2>"$T/err" || rc=$?
	[[ $rc == 0 ]] || fail "exit $rc" "$(cat "$T/err")"
	same_bytes <(printf 'ran \xe9\n') "$T/out" "the program's output"
	jq -e . "$report" >/dev/null || fail "the report is not valid JSON:" "$(head -c 1000 "$report")"
	jq -e --arg p "$T/prog\\xE9" --arg a "$T/lib\\xE9/libdiehard.so" \
		'.command == [$p] and .allocator == $a' "$report" >/dev/null ||
		fail "paths in the report:" "$(jq -c '{command, allocator}' "$report")"
}

# ---- 3. the report file: errors before the run, FIFOs and pipes -----------

@test "-r a directory, a missing directory, a file without permission: 125, one line, nothing runs" {
	expect_error 125 "$T.*[Ii]s a directory" -k 3 -r "$T" "${PROBE[@]}"
	expect_error 125 "$T/nowhere/r.json.*No such file" -k 3 -r "$T/nowhere/r.json" "${PROBE[@]}"
	if [[ $(id -u) == 0 ]]; then
		# root may write anywhere in a file system, but not here
		expect_error 125 "/proc/sys/kernel/osrelease.*Permission denied" -k 3 -r /proc/sys/kernel/osrelease "${PROBE[@]}"
	else
		mkdir "$T/ro"
		chmod 555 "$T/ro"
		expect_error 125 "$T/ro/r.json.*Permission denied" -k 3 -r "$T/ro/r.json" "${PROBE[@]}"
	fi
}

@test "-r a FIFO without a reader: 125 at once, 'has no reader', nothing runs" {
	mkfifo "$T/fifo"
	local t0
	t0=$(now_ms)
	SUP_TIMEOUT=5 expect_error 125 "$T/fifo.*has no reader" -k 3 -r "$T/fifo" "${PROBE[@]}"
	(($(now_ms) - t0 < 4000)) || fail "took $(($(now_ms) - t0)) ms"
}

# fifo_reader_waits PID: process PID is in its open of a FIFO, waiting for a
# writer (a reader the kernel already counts).
fifo_reader_waits() {
	[[ $(cat /proc/"$1"/wchan 2>/dev/null) == wait_for_partner ]]
}

@test "-r a pipe with a reader (/dev/fd/N, a process substitution, a FIFO being read): the report arrives" {
	sup -k 3 -r /dev/fd/3 echo hi 3> >(cat >"$T/fd.json") >"$T/out"
	sup -k 3 -r >(jq . >"$T/subst.json") echo hi >/dev/null
	mkfifo "$T/fifo"
	cat "$T/fifo" >"$T/fifo.json" &
	local reader=$!
	# diehard refuses a FIFO nobody reads yet (a non-blocking open): it
	# starts once cat has it open. A failure kills the reader, which
	# would otherwise hold bats' output open and hang the whole file.
	wait_until 10 fifo_reader_waits "$reader" || { kill "$reader"; fail "cat never opened the FIFO"; }
	sup -k 3 -r "$T/fifo" echo hi >/dev/null || { kill "$reader"; fail "diehard -r FIFO failed"; }
	wait "$reader"
	# The process substitutions end after diehard does: give them time.
	wait_until 5 jq -e '.exit_code == 0' "$T/fd.json" || fail "no report through /dev/fd/3:" "$(cat "$T/fd.json")"
	wait_until 5 jq -e '.exit_code == 0' "$T/subst.json" || fail "no report through >(jq):" "$(cat "$T/subst.json")"
	jq -e '.exit_code == 0' "$T/fifo.json" >/dev/null || fail "no report through the FIFO:" "$(cat "$T/fifo.json")"
	[[ $(<"$T/out") == hi ]] || fail "output: $(cat "$T/out")"
}

@test "the report's format: two-space indent, sorted keys, no newline at the end, the same through a pipe" {
	sup -k 3 -r "$T/file.json" echo hi >/dev/null
	[[ $(head -n 2 "$T/file.json") == $'{\n  "allocator": '* ]] || fail "format:" "$(head -n 3 "$T/file.json")"
	[[ $(tail -c 1 "$T/file.json" | od -An -c | tr -d ' ') == '}' ]] || fail "ends with: $(tail -c 5 "$T/file.json" | od -c)"
	jq -e '.exit_code == 0' "$T/file.json" >/dev/null
	# A run that exists before is truncated, not appended to.
	sup -k 1 -r "$T/file.json" true
	jq -e '.k == 1' "$T/file.json" >/dev/null || fail "not one report:" "$(head -c 300 "$T/file.json")"
}

# ---- 4. the allocator is ours --------------------------------------------

@test "-a libm.so.6 (a shared library, not ours): 125, one line naming it, nothing runs" {
	local libm
	libm=$(ldconfig -p | awk '$1 == "libm.so.6" && /x86-64|AArch64|64bit/ {print $NF; exit}')
	[[ -n $libm && -f $libm ]] || libm=$(gcc -print-file-name=libm.so.6)
	[[ -f $libm ]] || skip "no libm.so.6 found"
	expect_error 125 "$libm.*not libdiehard\\.so" -a "$libm" -k 3 "${PROBE[@]}"
}

@test "-a a copy of libdiehard.so built for another machine (e_machine 183): refused as such" {
	cp "$LIB" "$T/aarch64.so"
	printf '\267\000' | dd of="$T/aarch64.so" bs=1 seek=18 conv=notrunc status=none
	expect_error 125 "$T/aarch64.so.*(another machine|built for)" -a "$T/aarch64.so" -k 3 "${PROBE[@]}"
}

@test "-a a FIFO: refused at once without opening it; a text file: refused; the real library: accepted" {
	mkfifo "$T/fifo.so"
	local t0
	t0=$(now_ms)
	SUP_TIMEOUT=5 expect_error 125 "$T/fifo.so.*not a regular file" -a "$T/fifo.so" -k 3 "${PROBE[@]}"
	(($(now_ms) - t0 < 4000)) || fail "took $(($(now_ms) - t0)) ms"
	printf 'INPUT(libc.so.6)\n' >"$T/script.so"
	expect_error 125 "$T/script.so.*not an ELF" -a "$T/script.so" -k 3 "${PROBE[@]}"
	# An ELF file that is ours but not a shared library: the symbol alone is
	# not enough.
	expect_error 125 "$DIEHARD.*not libdiehard\\.so" -a "$DIEHARD" -k 3 "${PROBE[@]}"
	capture "$T/ok" sup -a "$LIB" -k 3 echo ran
	[[ $(<"$T/ok.rc") == 0 && $(<"$T/ok.out") == ran ]] || fail "the real library: exit $(<"$T/ok.rc")" "$(cat "$T/ok.err")"
}

# ---- 5. a tiny fd limit -------------------------------------------------

# under_limit N ARGS...: diehard ARGS with the fd limit at N and only fds 0-2
# open (bats keeps others open), stdin from /dev/null; capture to $T/lim.
under_limit() {
	local n=$1
	shift
	capture "$T/lim" timeout "$SUP_TIMEOUT" bash -c '
		for f in /proc/$$/fd/*; do f=${f##*/}; ((f > 2)) && eval "exec $f>&-"; done
		ulimit -n "$1"; shift; exec "$@"' _ "$n" "$DIEHARD" "$@"
}

@test "ulimit -n 5: exit 125 and one line starting 'diehard:'" {
	under_limit 5 -k 3 true
	[[ $(<"$T/lim.rc") == 125 ]] || fail "exit $(<"$T/lim.rc"), expected 125" "$(cat "$T/lim.err")"
	[[ $(grep -c '' "$T/lim.err") == 1 ]] || fail "expected one line on stderr:" "$(cat "$T/lim.err")"
	grep -q '^diehard: ' "$T/lim.err" || fail "$(cat "$T/lim.err")"
}

@test "ulimit -n 20 and 64 with -k 3: the run works, or fails with 125 and one line" {
	for n in 20 64; do
		under_limit "$n" -k 3 sh -c 'echo ok'
		local rc
		rc=$(<"$T/lim.rc")
		if [[ $rc == 0 ]]; then
			[[ $(<"$T/lim.out") == ok ]] || fail "ulimit -n $n: output:" "$(cat "$T/lim.out")"
		else
			[[ $rc == 125 ]] || fail "ulimit -n $n: exit $rc" "$(cat "$T/lim.err")"
			[[ $(grep -c '' "$T/lim.err") == 1 ]] && grep -q '^diehard: ' "$T/lim.err" ||
				fail "ulimit -n $n: not one 'diehard:' line:" "$(cat "$T/lim.err")"
		fi
	done
	# 64 is plenty for three replicas.
	[[ $rc == 0 ]] || fail "ulimit -n 64 -k 3 failed" "$(cat "$T/lim.err")"
}

# ---- 6. a full disk on stdout ---------------------------------------------

@test "stdout is /dev/full: one line, the run ends (125), committed counts only bytes written" {
	[[ -w /dev/full ]] || skip "no /dev/full"
	local rc=0 t0
	t0=$(now_ms)
	sup -k 3 -r "$T/r.json" sh -c 'echo hi; exec sleep 30' >/dev/full 2>"$T/err" || rc=$?
	[[ $rc == 125 ]] || fail "exit $rc, expected 125" "$(cat "$T/err")"
	(($(now_ms) - t0 < 20000)) || fail "the run did not end when stdout failed"
	[[ $(grep -c '' "$T/err") == 1 ]] || fail "expected one line:" "$(cat "$T/err")"
	grep -Eq '^diehard: .*stdout: No space left on device' "$T/err" || fail "$(cat "$T/err")"
	jq -e '.committed.stdout == 0 and .exit_code == 125 and (.exit_reason | test("stdout.*No space left"))
		and all(.replicas[]; .killed != null or .signal == 9)' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{committed, exit_code, exit_reason, replicas: [.replicas[] | {killed, signal}]}' "$T/r.json")"
	# A short run too.
	rc=0
	sup -k 3 -r "$T/r2.json" echo hi >/dev/full 2>"$T/err" || rc=$?
	[[ $rc == 125 ]] || fail "echo: exit $rc, expected 125" "$(cat "$T/err")"
	jq -e '.committed.stdout == 0' "$T/r2.json" >/dev/null || fail "report:" "$(jq -c .committed "$T/r2.json")"
}

@test "a closed reader still ends the run like SIGPIPE (141), committed counts what was written" {
	local out
	out=$(sup -k 3 -r "$T/r.json" seq 100000 | head -n 1; echo "status ${PIPESTATUS[0]}")
	[[ $out == $'1\nstatus 141' ]] || fail "got: $out"
	jq -e '.exit_code == 141 and .exit_reason == "output closed" and .committed.stdout >= 2
		and .committed.stdout < 588895' "$T/r.json" >/dev/null ||
		fail "report:" "$(jq -c '{committed, exit_code, exit_reason}' "$T/r.json")"
}

# ---- 7. the size options' own examples ------------------------------------

@test "every value a size option's message offers (examples, maximum) is accepted" {
	local opt msg values v
	for opt in --window --input-log --call-log; do
		capture "$T/bad" sup "$opt" bogus true
		[[ $(<"$T/bad.rc") == 125 ]] || fail "$opt bogus: exit $(<"$T/bad.rc")"
		msg=$(<"$T/bad.err")
		# "... like 1M or 65536, up to 1G ...": every number with an
		# optional suffix before the value quoted back.
		values=$(sed "s/, not '.*//" <<<"$msg" | grep -oE '\b[0-9]+[KMG]?\b')
		[[ -n $values ]] || fail "$opt: no value offered:" "$msg"
		for v in $values; do
			capture "$T/ok" sup "$opt" "$v" -k 3 echo ok
			[[ $(<"$T/ok.rc") == 0 && $(<"$T/ok.out") == ok ]] ||
				fail "$opt $v (offered by '$msg') refused: exit $(<"$T/ok.rc")" "$(cat "$T/ok.err")"
		done
		# One past the maximum is refused.
		local max
		max=$(grep -oE 'up to [0-9]+[KMG]?' <<<"$msg" | grep -oE '[0-9]+[KMG]?$')
		local n=${max%[KMG]} unit=${max##*[0-9]}
		capture "$T/over" sup "$opt" "$((n + 1))$unit" true
		[[ $(<"$T/over.rc") == 125 ]] || fail "$opt $((n + 1))$unit (over $max) accepted"
	done
}

@test "--call-log N keeps N entries, not a power of two above it" {
	require_prog nd_loop
	capture "$T/run" sup -k 3 --call-log 1000 -r "$T/r.json" "$PROGS/nd_loop" 5000
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	jq -e '.call_log.complete == false' "$T/r.json" >/dev/null ||
		fail "5000 clock calls fit in --call-log 1000:" "$(jq -c .call_log "$T/r.json")"
	capture "$T/run" sup -k 3 --call-log 10000 -r "$T/r.json" "$PROGS/nd_loop" 5000
	jq -e '.call_log.complete == true' "$T/r.json" >/dev/null ||
		fail "5000 clock calls do not fit in --call-log 10000:" "$(jq -c .call_log "$T/r.json")"
}
