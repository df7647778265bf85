#!/usr/bin/env bats
# What build/diehard lets through: the replicas' agreed output, byte for byte,
# whatever its size or content (text, binary with NUL bytes, nothing at all,
# exact multiples of the 4 KiB vote chunk, hundreds of MB), with input
# streamed to every replica without deadlock, interactive programs answered
# line by line, a closed reader ending the run, and any number of replicas.
# The reference is always the same command run plainly.

load helpers

setup_file() {
	require_diehard
	export DATA="$BATS_FILE_TMPDIR/data.txt"
	gen_text "$DATA" 20000 20250101
}

setup() {
	require_diehard
	require_jq
	require_prog sup_gen
	T=$BATS_TEST_TMPDIR
	GEN=$PROGS/sup_gen
}

# same_run NAME CMD...: `diehard -k 3 CMD` and CMD run plainly give the same
# stdout, stderr and exit status 0.  Extra diehard options in SUP_OPTS.
same_run() {
	local name=$1
	shift
	capture "$T/$name.plain" plain "$@"
	capture "$T/$name.sup" sup ${SUP_OPTS:--k 3} "$@"
	[[ $(<"$T/$name.plain.rc") == 0 ]] || fail "plain run of '$*' failed: $(<"$T/$name.plain.rc")"
	[[ $(<"$T/$name.sup.rc") == 0 ]] ||
		fail "diehard ${SUP_OPTS:--k 3} $* exited with $(<"$T/$name.sup.rc")" "$(head -c 2000 "$T/$name.sup.err")"
	same_bytes "$T/$name.plain.out" "$T/$name.sup.out" "stdout of diehard ${SUP_OPTS:--k 3} $*"
	same_bytes "$T/$name.plain.err" "$T/$name.sup.err" "stderr of diehard ${SUP_OPTS:--k 3} $*"
}

@test "text: stdout and stderr are passed through byte for byte, each on its own stream" {
	same_run text cat "$DATA"
	same_run streams sh -c 'echo "to stdout"; echo "to stderr" >&2; printf "no newline at the end"; printf "err again" >&2'
	[[ $(<"$T/streams.sup.err") == $'to stderr\nerr again' ]] || fail "stderr: $(cat "$T/streams.sup.err")"
}

@test "binary: NUL bytes and every byte value survive, as program output and through stdin" {
	same_run gen "$GEN" 100000 7
	# A few NULs in a row, a NUL first and last, no trailing newline.
	same_run nuls printf '\0a\0\0b\0\nc\0\0\0'
	[[ $(wc -c <"$T/nuls.sup.out") == 11 ]] || fail "expected 11 bytes, got $(wc -c <"$T/nuls.sup.out")"
	"$GEN" 300000 8 >"$T/bin.in"
	sup -k 3 cat <"$T/bin.in" >"$T/bin.out" || fail "diehard -k 3 cat <binary exited with $?"
	same_bytes "$T/bin.in" "$T/bin.out" "binary stdin through diehard -k 3 cat"
	head -c 65536 /dev/zero >"$T/zeros.in"
	sup -k 3 cat <"$T/zeros.in" >"$T/zeros.out" || fail "diehard -k 3 cat <zeros exited with $?"
	same_bytes "$T/zeros.in" "$T/zeros.out" "64 KiB of NUL bytes through diehard -k 3 cat"
}

@test "no output and empty input: nothing is written, exit 0" {
	capture "$T/true" sup -k 3 -r "$T/true.json" true
	[[ $(<"$T/true.rc") == 0 ]] || fail "diehard -k 3 true exited with $(<"$T/true.rc")" "$(cat "$T/true.err")"
	[[ ! -s $T/true.out && ! -s $T/true.err ]] || fail "diehard -k 3 true wrote something" "$(cat "$T/true.out" "$T/true.err")"
	jq -e '.committed.stdout == 0 and .committed.stderr == 0 and .input_bytes == 0 and .exit_code == 0' \
		"$T/true.json" >/dev/null || fail "report of an empty run:" "$(cat "$T/true.json")"
	# Empty input from /dev/null, from an empty file and from an empty pipe.
	capture "$T/devnull" sup -k 3 cat
	[[ $(<"$T/devnull.rc") == 0 && ! -s $T/devnull.out ]] || fail "cat </dev/null: exit $(<"$T/devnull.rc")"
	: >"$T/empty"
	sup -k 3 cat <"$T/empty" >"$T/empty.out" || fail "cat <empty file exited with $?"
	[[ ! -s $T/empty.out ]] || fail "cat <empty file wrote something"
	: | sup -k 3 wc -c >"$T/pipe.out" || fail "wc -c <empty pipe exited with $?"
	[[ $(<"$T/pipe.out") == 0 ]] || fail "wc -c of an empty pipe printed: $(cat "$T/pipe.out")"
}

@test "outputs of exactly 4096, 8192, 12288 and 1 MiB bytes (and one byte either side) are complete, k=2 and k=3" {
	local n k
	for n in 4095 4096 4097 8192 12288 1048576; do
		"$GEN" "$n" "$n" >"$T/expected"
		for k in 2 3; do
			capture "$T/out" sup -k "$k" "$GEN" "$n" "$n"
			[[ $(<"$T/out.rc") == 0 ]] || fail "diehard -k $k sup_gen $n exited with $(<"$T/out.rc")" "$(cat "$T/out.err")"
			same_bytes "$T/expected" "$T/out.out" "diehard -k $k sup_gen $n"
			sup -k "$k" cat <"$T/expected" >"$T/cat.out" || fail "diehard -k $k cat of $n bytes exited with $?"
			same_bytes "$T/expected" "$T/cat.out" "$n bytes through diehard -k $k cat"
		done
	done
}

@test "a 300 MB pseudo-random stream through diehard -k 3 cat has the plain checksum" {
	local want got SUP_TIMEOUT=20 # ~2 s here
	want=$("$GEN" 300M 42 | md5sum)
	got=$("$GEN" 300M 42 | sup -k 3 cat | md5sum; exit "${PIPESTATUS[1]}") ||
		fail "diehard -k 3 cat exited with $? (124: hung, killed by the hang guard)"
	[[ $got == "$want" ]] || fail "checksum of 300 MB through diehard: $got, plain: $want"
}

@test "2 GiB through diehard -k 3 cat: every byte arrives" {
	# Zeros, counted: the size the issue asks for, in ~8 s on 2 cores.
	local n SUP_TIMEOUT=30 # ~8 s here
	n=$(head -c 2G /dev/zero | sup -k 3 cat | wc -c; exit "${PIPESTATUS[1]}") ||
		fail "diehard -k 3 cat exited with $? (124: hung, killed by the hang guard)"
	[[ $n == 2147483648 ]] || fail "2 GiB through diehard -k 3 cat gave $n bytes"
}

@test "a correct program streaming 300 MB keeps all its replicas (none killed, no divergence)" {
	# cat's replicas write identical bytes; a momentary lag of one of them on
	# a busy machine is no reason to kill it (design: only replicas that
	# crash, disagree or miss the straggler timeout are killed).
	local SUP_TIMEOUT=20 # ~2 s here
	"$GEN" 300M 43 | sup -k 3 -r "$T/r.json" cat >/dev/null ||
		fail "diehard -k 3 cat exited with $? (124: hung, killed by the hang guard)"
	jq -e '(.divergences | length) == 0 and ([.replicas[] | select(has("killed"))] | length) == 0' \
		"$T/r.json" >/dev/null ||
		fail "replicas of cat were killed or diverged:" \
			"$(jq -c '.divergences, [.replicas[] | {index, killed, killed_at, bytes}]' "$T/r.json")"
	jq -e '.committed.stdout == 314572800 and .input_bytes == 314572800' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{committed, input_bytes}' "$T/r.json")"
}

@test "stdin much larger than the pipe buffers, read and written concurrently (cat, tr), does not deadlock" {
	# Through a pipe (polled)...
	"$GEN" 24M 5 | sup -k 3 cat >"$T/cat.out" || fail "diehard -k 3 cat exited with $?"
	same_bytes <("$GEN" 24M 5) "$T/cat.out" "24 MiB through diehard -k 3 cat"
	# ...and from a regular file (which epoll refuses), through a filter.
	sup -k 3 tr 'a-z' 'A-Z' <"$DATA" >"$T/tr.out" || fail "diehard -k 3 tr <file exited with $?"
	same_bytes <(tr 'a-z' 'A-Z' <"$DATA") "$T/tr.out" "tr a-z A-Z of a $(wc -c <"$DATA")-byte file"
	cat "$DATA" "$DATA" "$DATA" "$DATA" | sup -k 3 tr -d '0-9' >"$T/trd.out" || fail "diehard -k 3 tr -d exited with $?"
	same_bytes <(cat "$DATA" "$DATA" "$DATA" "$DATA" | tr -d '0-9') "$T/trd.out" "tr -d 0-9 of a 4x file through a pipe"
}

@test "k=1, 2, 3, 5 and 16 replicas of sort give the plain output byte for byte" {
	sort -t $'\t' -k4,4 -k2,2n "$DATA" >"$T/expected"
	local k
	for k in 1 2 3 5 16; do
		capture "$T/k$k" sup -k "$k" -r "$T/k$k.json" sort -t $'\t' -k4,4 -k2,2n "$DATA"
		[[ $(<"$T/k$k.rc") == 0 ]] || fail "diehard -k $k sort exited with $(<"$T/k$k.rc")" "$(head -c 2000 "$T/k$k.err")"
		same_bytes "$T/expected" "$T/k$k.out" "diehard -k $k sort"
		[[ ! -s $T/k$k.err ]] || fail "diehard -k $k sort wrote to stderr:" "$(head -c 2000 "$T/k$k.err")"
		[[ $(jq '.replicas | length' "$T/k$k.json") == "$k" ]] || fail "the report of -k $k lists $(jq '.replicas | length' "$T/k$k.json") replicas"
	done
	# sort reading its input from stdin.
	sup -k 5 sort -t $'\t' -k4,4 -k2,2n <"$DATA" >"$T/stdin.out" || fail "diehard -k 5 sort <file exited with $?"
	same_bytes "$T/expected" "$T/stdin.out" "diehard -k 5 sort <file"
}

@test "diehard -k 3 yes | head -1 prints y and ends at once, like yes | head -1" {
	local out start elapsed
	start=$(now_ms)
	out=$(sup -k 3 yes | head -n 1; echo "status ${PIPESTATUS[0]}")
	elapsed=$(($(now_ms) - start))
	# diehard dies of SIGPIPE as yes does (124 would be the hang guard).
	[[ $out == $'y\nstatus 141' ]] || fail "got: $out"
	((elapsed < 10000)) || fail "took $elapsed ms"
}

@test "interactive: (echo 1+1; sleep 2; echo 2+2) | diehard -k 3 bc answers 2 before the second line is sent" {
	require_cmd bc
	local start line first="" second=""
	start=$(now_ms)
	while IFS= read -r line; do
		case $line in
		2) first=$(($(now_ms) - start)) ;;
		4) second=$(($(now_ms) - start)) ;;
		*) fail "unexpected line from bc: $line" ;;
		esac
	done < <( (echo 1+1; sleep 2; echo 2+2) | sup -k 3 bc)
	[[ -n $first && -n $second ]] || fail "bc's answers: 2 at '${first}' ms, 4 at '${second}' ms"
	# The answer to the first line must not wait for more input or for 4 KiB.
	((first < 1500)) || fail "2 arrived after $first ms (the second line is sent at 2000 ms)"
	((second >= 1900)) || fail "4 arrived after $second ms, before 2+2 was sent?"
}
