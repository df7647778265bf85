#!/usr/bin/env bats
# Real programs under LD_PRELOAD=build/libdiehard.so produce the same bytes as
# without it: with default settings, with DIEHARD_FILL=random (a correct
# program must not care what fresh memory holds) and, for some, with
# DIEHARD_M=4.  See check_program in helpers.bash.

load helpers

setup_file() {
	require_lib
	# Inputs generated deterministically (and without the preload):
	# DATA ~3.8 MB / 80000 records for the stream tools, SMALL for interpreters.
	export DATA="$BATS_FILE_TMPDIR/data.txt" SMALL="$BATS_FILE_TMPDIR/small.txt"
	gen_text "$DATA" 80000 20240611
	head -n 20000 "$DATA" >"$SMALL"
	# For sqlite3's .import: a header row names the columns.
	export SQLDATA="$BATS_FILE_TMPDIR/records.tsv"
	{
		printf 'key\tn\tx\twords\n'
		head -n 10000 "$DATA"
	} >"$SQLDATA"
}

setup() {
	require_lib
	# The real interpreter, not a version-manager shim script.
	if [[ -x /usr/bin/python3 ]]; then
		PYTHON=/usr/bin/python3
	else
		PYTHON=$(python3 -c 'import sys; print(sys.executable)')
	fi
	SCRIPTS="$ROOT/tests/scripts"
}

@test "sort: records sorted by word then number match a plain run (also DIEHARD_M=4)" {
	DH_VARIANTS=("DIEHARD_M=4")
	check_program sort -t $'\t' -k4,4 -k2,2n "$DATA"
}

@test "sort --parallel=2: in-memory parallel sort matches a plain run" {
	check_program sort --parallel=2 -S 200M -t $'\t' -k3,3g -k1,1 "$DATA"
}

@test "sort --parallel=2 -S 1M: sort through temporary files and merges matches a plain run" {
	check_program sort --parallel=2 -S 1M -T "$BATS_TEST_TMPDIR" -u -k2,2n -k1,1r "$DATA"
}

@test "python3: JSON round trips match a plain run (also DIEHARD_M=4)" {
	DH_VARIANTS=("DIEHARD_M=4")
	check_program "$PYTHON" "$SCRIPTS/json_work.py" "$SMALL"
}

@test "python3: dict- and set-heavy work, every object from malloc (PYTHONMALLOC=malloc), matches a plain run" {
	check_program env PYTHONMALLOC=malloc "$PYTHON" "$SCRIPTS/dict_work.py" "$SMALL"
}

@test "python3: a threaded workload (PYTHONMALLOC=malloc) matches a plain run" {
	check_program env PYTHONMALLOC=malloc "$PYTHON" "$SCRIPTS/threads_work.py" "$SMALL"
}

@test "perl: hash-heavy work matches a plain run" {
	check_program perl "$SCRIPTS/hashes.pl" "$SMALL"
}

@test "gcc: the generated assembly is identical to a plain run's (also DIEHARD_M=4)" {
	DH_VARIANTS=("DIEHARD_M=4")
	check_program gcc -std=c11 -Wall -Wextra -D_GNU_SOURCE -O2 -S -o - "$ROOT/tests/progs/stress.c"
}

@test "gcc: object file and linked program are identical to a plain build, and the program works" {
	local src="$ROOT/tests/progs/stress.c" d="$BATS_TEST_TMPDIR"
	local -a cc=(gcc -std=c11 -Wall -Wextra -D_GNU_SOURCE -O2 -pthread)
	plain "${cc[@]}" -c -o "$d/plain.o" "$src"
	dh "${cc[@]}" -c -o "$d/dh.o" "$src"
	same_bytes "$d/plain.o" "$d/dh.o" "object file compiled under the preload"
	plain "${cc[@]}" -o "$d/plain.bin" "$src"
	dh DIEHARD_FILL=random "${cc[@]}" -o "$d/dh.bin" "$src"
	same_bytes "$d/plain.bin" "$d/dh.bin" "program compiled and linked under the preload with DIEHARD_FILL=random"
	run -0 plain "$d/dh.bin" 2 2000 3
	[[ $output == "stress: ok threads=2 ops=2000 child=ok" ]]
}

@test "gawk: word statistics match a plain run" {
	check_program gawk -f "$SCRIPTS/words.awk" "$DATA"
}

@test "sed: a multi-command script matches a plain run" {
	check_program sed -f "$SCRIPTS/edit.sed" "$DATA"
}

@test "gzip: compression is byte-identical and round trips across preloaded and plain runs" {
	local d="$BATS_TEST_TMPDIR"
	check_program gzip -c -n -6 "$DATA"
	# Compressed under the preload, decompressed plainly.
	dh gzip -c -n -6 "$DATA" >"$d/dh.gz"
	plain gzip -dc "$d/dh.gz" >"$d/back1"
	same_bytes "$DATA" "$d/back1" "gzip under the preload, gunzip plain"
	# Compressed plainly, decompressed under the preload.
	plain gzip -c -n -6 "$DATA" >"$d/plain.gz"
	check_program gzip -dc "$d/plain.gz"
	dh DIEHARD_FILL=random gzip -dc "$d/plain.gz" >"$d/back2"
	same_bytes "$DATA" "$d/back2" "gzip plain, gunzip under the preload"
}

@test "xz -T2: multi-threaded compression is byte-identical and round trips across preloaded and plain runs" {
	local d="$BATS_TEST_TMPDIR"
	local -a xz=(xz -T2 --block-size=512KiB -1 -c)
	check_program "${xz[@]}" "$DATA"
	dh "${xz[@]}" "$DATA" >"$d/dh.xz"
	plain xz -dc "$d/dh.xz" >"$d/back1"
	same_bytes "$DATA" "$d/back1" "xz under the preload, unxz plain"
	plain "${xz[@]}" "$DATA" >"$d/plain.xz"
	dh DIEHARD_FILL=random xz -dc "$d/plain.xz" >"$d/back2"
	same_bytes "$DATA" "$d/back2" "xz plain, unxz under the preload"
}

@test "sqlite3: import, indexes, joins, window functions, updates, VACUUM and integrity check match a plain run" {
	command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
	DH_VARIANTS=("DIEHARD_M=1.5")
	check_program sqlite3 -bail -cmd '.mode tabs' -cmd ".import $SQLDATA t" :memory: ".read $SCRIPTS/queries.sql"
}

@test "git: commits, branches, a merge, blame, threaded gc, fsck and archive match a plain run" {
	command -v git >/dev/null || skip "git is not installed"
	check_program bash "$SCRIPTS/git_work.bash" "$BATS_TEST_TMPDIR/git" "$SMALL"
}

@test "bash: a script with arrays, string operations, subshells and pipelines matches a plain run" {
	check_program bash "$SCRIPTS/workload.bash" "$DATA"
}
