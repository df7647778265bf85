#!/usr/bin/env bats
# build/diehard's command line: bad options, a missing or unrunnable command
# and a bad allocator each give one clear line on stderr and the documented
# exit code (125 usage or internal error, 126 not executable, 127 not found),
# and no replica is started.

load helpers

setup() {
	require_diehard
	T=$BATS_TEST_TMPDIR
	# The command every failing invocation would run: proof that nothing ran.
	PROBE=(sh -c ": >'$T/ran'")
}

@test "--help prints the usage on stdout and exits 0; --version prints the version" {
	capture "$T/help" sup --help
	[[ $(<"$T/help.rc") == 0 ]] || fail "--help exited with $(<"$T/help.rc")"
	grep -q '^usage: diehard ' "$T/help.out" || fail "no usage line:" "$(cat "$T/help.out")"
	for opt in --replicas --allocator --report --verbose --idle --timeout; do
		grep -q -- "$opt" "$T/help.out" || fail "--help does not mention $opt"
	done
	[[ ! -s $T/help.err ]] || fail "--help wrote to stderr: $(cat "$T/help.err")"
	capture "$T/version" sup --version
	[[ $(<"$T/version.rc") == 0 ]] || fail "--version exited with $(<"$T/version.rc")"
	grep -Eq '^diehard [0-9]+\.[0-9]+' "$T/version.out" || fail "--version printed: $(cat "$T/version.out")"
}

@test "an unknown option: 125 and one line naming it" {
	expect_error 125 "--bogus" --bogus "${PROBE[@]}"
	expect_error 125 "'-x'" -x "${PROBE[@]}"
}

@test "-k 0, -k abc, -k 65, -k -1, -k 3x: 125 and one line naming -k and the value" {
	expect_error 125 "-k.*'0'" -k 0 "${PROBE[@]}"
	expect_error 125 "-k.*'abc'" -k abc "${PROBE[@]}"
	expect_error 125 "-k.*'65'" -k 65 "${PROBE[@]}"
	expect_error 125 "-k.*'-1'" -k -1 "${PROBE[@]}"
	expect_error 125 "-k.*'3x'" --replicas 3x "${PROBE[@]}"
}

@test "an option without its value (-k, --timeout, --report at the end): 125 and one line saying it needs a value" {
	# Not "unknown option": the option exists, its value is missing.
	expect_error 125 "-k.*(value|argument)" -k
	expect_error 125 "--timeout.*(value|argument)" --timeout
	expect_error 125 "--report.*(value|argument)" --report
}

@test "--timeout 0, --timeout abc, --timeout -5: 125 and one line naming --timeout" {
	expect_error 125 "--timeout.*'0'" --timeout 0 "${PROBE[@]}"
	expect_error 125 "--timeout.*'abc'" --timeout abc "${PROBE[@]}"
	expect_error 125 "--timeout.*'-5'" --timeout -5 "${PROBE[@]}"
	expect_error 125 "--idle.*'0'" --idle 0 "${PROBE[@]}"
}

@test "--serial-clients where diehard does not proxy the network (--net host, --sandbox off, --no-virtualize): 125 and one line naming it" {
	expect_error 125 "--serial-clients.*--net host" --serial-clients --net host "${PROBE[@]}"
	expect_error 125 "--serial-clients.*--net host" --serial-clients --sandbox off "${PROBE[@]}"
	expect_error 125 "--serial-clients.*--net host" --serial-clients --no-virtualize "${PROBE[@]}"
}

@test "no command: 125 and one line saying so" {
	expect_error 125 "no command"
	expect_error 125 "no command" -k 3
	expect_error 125 "no command" -k 3 --
}

@test "a command that does not exist: 127 and one line naming it" {
	expect_error 127 "no-such-command-$$" -k 3 "no-such-command-$$"
	expect_error 127 "$T/nowhere/prog" -k 3 "$T/nowhere/prog"
	expect_error 127 "no-such-command-$$" -k 1 "no-such-command-$$" arg
}

@test "a command that is not executable (a plain file, a directory): 126 and one line naming it" {
	printf '#!/bin/sh\n: >"%s/ran"\n' "$T" >"$T/script"
	chmod 644 "$T/script"
	expect_error 126 "$T/script" -k 3 "$T/script"
	mkdir "$T/adir"
	expect_error 126 "$T/adir" -k 3 "$T/adir"
	# Found on PATH but not executable there.
	mkdir "$T/bin"
	cp "$T/script" "$T/bin/notexec-$$"
	PATH="$T/bin:$PATH" expect_error 126 "notexec-$$" -k 3 "notexec-$$"
}

@test "exec fails in the replica (file busy being written): 126, one line, and diehard's caller survives" {
	# ETXTBSY is only found by execve itself, after the replicas are
	# forked: diehard must then kill its own replicas and nothing else
	# (once it sent SIGKILL to its own process group and to pid 1).
	# --files shared: the writer is outside the replicas' views, and
	# through an overlay the kernel lets the exec go on (docs/FILES.md).
	cp "$(type -P true)" "$T/busy"
	local writer
	exec {writer}>>"$T/busy" # bats owns fd 3
	run setsid bash -c '"$1" --files shared -k 3 "$2"; echo "rc=$?"' _ "$DIEHARD" "$T/busy"
	exec {writer}>&-
	[[ $output == *"rc=126"* ]] || fail "the shell that ran diehard did not survive, or diehard did not exit 126:" "$output"
	[[ $output == *"diehard: $T/busy: Text file busy"* ]] || fail "no message naming the file and the error:" "$output"
}

@test "a script without #! is run by /bin/sh, as execvp does" {
	printf 'echo "args: $1 $2"\n' >"$T/noshebang"
	chmod 755 "$T/noshebang"
	capture "$T/run" sup -k 3 "$T/noshebang" one two
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(<"$T/run.err")"
	[[ $(<"$T/run.out") == "args: one two" ]] || fail "output:" "$(<"$T/run.out")"
}

@test "an allocator that is missing, not a shared library, or a directory: 125 and one line naming it" {
	expect_error 125 "$T/missing.so" -a "$T/missing.so" -k 3 "${PROBE[@]}"
	echo 'not an ELF file' >"$T/text.so"
	expect_error 125 "$T/text.so" --allocator "$T/text.so" -k 3 "${PROBE[@]}"
	: >"$T/empty.so"
	expect_error 125 "$T/empty.so" -a "$T/empty.so" -k 3 "${PROBE[@]}"
	mkdir "$T/dir.so"
	expect_error 125 "$T/dir.so" -a "$T/dir.so" -k 3 "${PROBE[@]}"
}

@test "the same allocator given explicitly runs the command" {
	capture "$T/ok" sup -a "$LIB" -k 3 sh -c 'echo ran'
	[[ $(<"$T/ok.rc") == 0 ]] || fail "exit $(<"$T/ok.rc")" "$(cat "$T/ok.err")"
	[[ $(<"$T/ok.out") == ran ]] || fail "output: $(cat "$T/ok.out")"
}
