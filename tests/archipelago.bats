#!/usr/bin/env bats
# Archipelago mode (DIEHARD_ARCHIPELAGO=HOT, allocator/archipelago.h): each
# object on pages of its own at random in a sparse region, with at most HOT
# pages accessible; the others compacted and restored on access. The
# program (tests/progs/arch_check.c) checks every byte it wrote.

load helpers

setup() {
	require_prog arch_check
}

# arch NAME [VAR=value ...] -- ARGS...: arch_check ARGS under the preload in
# Archipelago mode with a hot space of 64 pages and statistics on.
arch() {
	capture_dh "$1" "$PROGS/arch_check" DIEHARD_ARCHIPELAGO=64 DIEHARD_STATS=1 "${@:2}"
	STATS=$(stats_lines "$ERR" | tail -n 1)
}

@test "a hot space far smaller than the live set: every object reads back what was written" {
	arch churn -- churn 20000
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "churn: rc $RC" "$(head -c 2000 "$ERR")"
	# 20000 live objects of up to 3000 bytes (about 20000 pages) through 64
	# hot pages: most of them were compacted and restored, many times.
	local hot cold restores
	hot=$(stat_field arch_hot "$STATS")
	cold=$(stat_field arch_cold "$STATS")
	restores=$(stat_field arch_restores "$STATS")
	((hot <= 64)) || fail "hot space above its bound: $hot pages"
	((restores > 20000)) || fail "only $restores restores: the hot space did not bound anything"
	((cold > 0)) || fail "no page was cold at the end"
}

@test "overflows into the sea around an object leave every other object intact" {
	arch ovf -- overflow
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "overflow: rc $RC" "$(head -c 2000 "$ERR")"
	local stray
	stray=$(stat_field arch_stray_pages "$STATS")
	((stray >= 20)) || fail "the overruns through the page after their object's should have met pages of no object, got $stray"
	# The same program without the mode: glibc's heap is corrupted.
	capture "$BATS_TEST_TMPDIR/glibc" plain "$PROGS/arch_check" overflow
	[[ $(<"$BATS_TEST_TMPDIR/glibc.rc") != 0 ]] || fail "the planted overflows are harmless under glibc: not a real test"
}

@test "bytes written past an object's end move with it when it is realloc'd" {
	# Before, a realloc copied only the size asked for: python3 given
	# objects 4 bytes short by the fault injector crashed in 8 runs of 12.
	arch grow -- grow
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "grow: rc $RC" "$(cat "$OUT")" "$(head -c 2000 "$ERR")"
}

@test "a freed object keeps its contents for a while (a dangling read and realloc see them)" {
	arch dgl -- dangling
	[[ $RC == 0 ]] && grep -qx 'read 5a' "$OUT" && grep -qx 'realloc 5a' "$OUT" ||
		fail "dangling: rc $RC, $(cat "$OUT")"
	[[ $(stat_field double_frees "$STATS") == 1 ]] || fail "the second free (by realloc) is a double free: $STATS"
}

@test "threads and fork in Archipelago mode" {
	arch thr -- threads
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "threads: rc $RC" "$(head -c 2000 "$ERR")"
	arch frk -- fork
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "fork: rc $RC" "$(head -c 2000 "$ERR")"
}

@test "a real program runs in Archipelago mode with a small hot space; a malformed value is refused in one line" {
	# awk keeps 5000 strings in an array and walks it: many small objects
	# and far more than the hot space. (python3 made tens of thousands at
	# start-up, each an mprotect: minutes on a VM where those are dear.)
	local want got
	seq 1 5000 | awk '{ print ($1 * 7919) % 5003, $1 }' >"$BATS_TEST_TMPDIR/in"
	local prog='{ a[$1] = $2 } END { n = 0; s = 0; for (k in a) { n++; s += a[k] } print n, s }'
	want=$(plain awk "$prog" "$BATS_TEST_TMPDIR/in")
	got=$(dh DIEHARD_ARCHIPELAGO=256 DIEHARD_STATS=1 awk "$prog" "$BATS_TEST_TMPDIR/in" 2>"$BATS_TEST_TMPDIR/awk.err") ||
		fail "awk in Archipelago mode failed" "$(cat "$BATS_TEST_TMPDIR/awk.err")"
	[[ $got == "$want" ]] || fail "awk in Archipelago mode: '$got', not '$want'"
	grep -Eq 'arch_objects=[1-9][0-9]{3,}' "$BATS_TEST_TMPDIR/awk.err" ||
		fail "too few objects went through Archipelago" "$(grep stats "$BATS_TEST_TMPDIR/awk.err")"
	capture "$BATS_TEST_TMPDIR/bad" dh DIEHARD_ARCHIPELAGO=8 DIEHARD_STATS=1 "$PROGS/arch_check" dangling
	[[ $(grep -c "^diehard: DIEHARD_ARCHIPELAGO='8' is not " "$BATS_TEST_TMPDIR/bad.err") == 1 ]] ||
		fail "one line for a hot space below 16:" "$(cat "$BATS_TEST_TMPDIR/bad.err")"
	! grep -q arch_objects "$BATS_TEST_TMPDIR/bad.err" || fail "the mode should be off"
}

@test "I/O buffers the kernel fills stay accessible: a C++ word count through std::cin with a tiny hot space" {
	command -v g++ >/dev/null || skip "g++ is not installed"
	g++ -O2 -o "$BATS_TEST_TMPDIR/wordfreq" "$ROOT/bench/tolerance.d/wordfreq.cpp"
	gen_text "$BATS_TEST_TMPDIR/in.txt" 1500 7
	plain "$BATS_TEST_TMPDIR/wordfreq" <"$BATS_TEST_TMPDIR/in.txt" >"$BATS_TEST_TMPDIR/want"
	# iostream's 8 KiB buffer is read(2) into: cold, the call would fail
	# with EFAULT and the count stop early (it did, before pinning).
	dh DIEHARD_ARCHIPELAGO=16 DIEHARD_STATS=1 "$BATS_TEST_TMPDIR/wordfreq" <"$BATS_TEST_TMPDIR/in.txt" \
		>"$BATS_TEST_TMPDIR/got.out" 2>"$BATS_TEST_TMPDIR/got.err" ||
		fail "wordfreq failed in Archipelago mode:" "$(head -c 2000 "$BATS_TEST_TMPDIR/got.err")"
	same_bytes "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got.out" "the word count in Archipelago mode"
	local st
	st=$(stats_lines "$BATS_TEST_TMPDIR/got.err" | tail -n 1)
	(($(stat_field arch_pinned "$st") >= 2)) || fail "the 8 KiB buffer should be pinned: $st"
	(($(stat_field arch_restores "$st") > 0)) || fail "nothing was compacted: the hot space did not bite"
}

@test "small objects the kernel reads or fills while cold: file names, read/readv/write buffers, epoll's array, exec's arguments" {
	printf 0123456789 >"$BATS_TEST_TMPDIR/ten"
	capture_dh kern "$PROGS/arch_check" DIEHARD_ARCHIPELAGO=64 -- kernel "$BATS_TEST_TMPDIR/ten"
	# Before kernel.c the first call, open, failed: EFAULT, "Bad address".
	[[ $RC == 0 ]] || fail "rc $RC:" "$(head -c 2000 "$ERR")"
	[[ $(<"$OUT") == $'kernel ok\nexec ok' ]] || fail "output:" "$(cat "$OUT")"
}

@test "redis-server serves in Archipelago mode with a hot space far below its live objects" {
	require_cmd redis-server
	require_cmd redis-cli
	local port=$((20000 + RANDOM % 20000))
	LD_PRELOAD=$LIB DIEHARD_ARCHIPELAGO=64 DIEHARD_STATS=1 redis-server --port "$port" --bind 127.0.0.1 \
		--save '' --appendonly no --dir "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/redis.log" 2>&1 &
	local pid=$!
	local up=
	# A hang guard, not a timing: its start takes 9 s on a PVM guest (every
	# cold page an mprotect), more under load.
	for _ in $(seq 900); do
		redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && { up=1; break; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	[[ -n $up ]] || { kill "$pid" 2>/dev/null; fail "redis-server did not start:" "$(tail -n 5 "$BATS_TEST_TMPDIR/redis.log")"; }
	for i in $(seq 300); do echo "SET key:$i value-$i-$((i * i))"; done | redis-cli -p "$port" >/dev/null
	for i in $(seq 300); do echo "GET key:$i"; done | redis-cli -p "$port" >"$BATS_TEST_TMPDIR/got"
	redis-cli -p "$port" save >/dev/null
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$pid" || true
	for i in $(seq 300); do echo "value-$i-$((i * i))"; done >"$BATS_TEST_TMPDIR/want"
	same_bytes "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got" "redis GETs in Archipelago mode"
	[[ -s $BATS_TEST_TMPDIR/dump.rdb ]] || fail "SAVE wrote no dump.rdb:" "$(tail -n 5 "$BATS_TEST_TMPDIR/redis.log")"
	local st
	st=$(stats_lines "$BATS_TEST_TMPDIR/redis.log" | tail -n 1)
	(($(stat_field arch_restores "$st") > 0)) || fail "nothing was compacted: the hot space did not bite: $st"
}

@test "the wrapped calls that wait stay cancellation points (readv, epoll_wait, accept, recvmsg), in any mode" {
	capture_dh cnp "$PROGS/arch_check" -- cancel
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "default mode: rc $RC" "$(cat "$OUT" "$ERR")"
	capture_dh cna "$PROGS/arch_check" DIEHARD_ARCHIPELAGO=64 -- cancel
	[[ $RC == 0 ]] && grep -qx ok "$OUT" || fail "Archipelago mode: rc $RC" "$(cat "$OUT" "$ERR")"
}
