#!/usr/bin/env bats
# Commit points (docs/FILES.md, "Commit points"): a long-running program's
# fsync reaches the real file system once, as the quorum agreed, before the
# call returns in the replicas. tests/scripts/points_writer.py does one
# thing a line of input and says so on stdout: a line diehard committed
# means a quorum passed the point, so the real file must already hold it.

load helpers
load writer

setup() {
	writer_setup
}

@test "fsync: the agreed bytes are in the real file when the call returns, once; the end commits what came after" {
	start_writer -k 3
	say "sync a.txt first" "synced a.txt"
	[[ $(<"$T/w/a.txt") == first ]] || fail "a.txt after its sync: $(cat "$T/w/a.txt" 2>&1)"
	say "append log.txt one" "appended log.txt"
	say "append log.txt two" "appended log.txt"
	[[ $(<"$T/w/log.txt") == $'one\ntwo' ]] || fail "log.txt after two appends: $(cat "$T/w/log.txt")"
	say "sync a.txt second" "synced a.txt"
	[[ $(<"$T/w/a.txt") == second ]] || fail "a.txt after its second sync: $(cat "$T/w/a.txt")"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	validate_report "$T/r.json"
	jq -e '.files.points.committed == 4 and .files.points.failed == 0 and (.files.divergences // []) == []' "$T/r.json" \
		>/dev/null || fail "report: $(jq -c .files.points "$T/r.json")"
	[[ $(<"$T/w/log.txt") == $'one\ntwo' ]]
	! ls "$T/w"/.diehard-commit-* 2>/dev/null || fail "temporary files were left"
	# Its start-state layer is gone (its diehard's pid is in the name).
	[[ -n $DH_PID ]] || fail "diehard's pid was not found"
	! ls -d /dev/shm/diehard-pre-"$DH_PID"-* 2>/dev/null | grep -q . ||
		fail "the start-state layer was left: $(ls -d /dev/shm/diehard-pre-"$DH_PID"-*)"
}

@test "a sync of a real file written in place: a small one and one past 64 MiB keep their inode and hold the agreed bytes when the call returns; one with a second name is renamed into place, the other name keeping the old bytes" {
	printf 'old small\n' >"$T/w/small"
	head -c $((70 << 20)) /dev/zero >"$T/w/big"
	printf 'old linked\n' >"$T/w/linked"
	ln "$T/w/linked" "$T/w/other"
	local small big linked
	small=$(stat -c %i "$T/w/small") big=$(stat -c %i "$T/w/big") linked=$(stat -c %i "$T/w/linked")
	start_writer -k 3
	say "poke small 0 new" "poked small"
	[[ $(<"$T/w/small") == "new small" ]] || fail "small after its sync: $(cat "$T/w/small")"
	[[ $(stat -c %i "$T/w/small") == "$small" ]] || fail "small has another inode"
	say "poke big 5000000 X" "poked big"
	[[ $(dd if="$T/w/big" bs=1 skip=5000000 count=1 status=none) == X ]] || fail "big after its sync"
	[[ $(stat -c %i "$T/w/big") == "$big" && $(stat -c %s "$T/w/big") == $((70 << 20)) ]] ||
		fail "big: $(stat -c '%i %s' "$T/w/big") (inode $big)"
	say "poke linked 0 new" "poked linked"
	[[ $(<"$T/w/linked") == "new linked" && $(<"$T/w/other") == "old linked" ]] ||
		fail "linked: $(cat "$T/w/linked"), other: $(cat "$T/w/other")"
	[[ $(stat -c %i "$T/w/linked") != "$linked" && $(stat -c %i "$T/w/other") == "$linked" ]] ||
		fail "linked was not renamed into place"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	jq -e '.files.points.committed == 3 and .files.points.failed == 0 and (.files.divergences // []) == []' "$T/r.json" \
		>/dev/null || fail "report: $(jq -c .files.points "$T/r.json")"
	# The end found them agreed: nothing renamed over the two in place.
	[[ $(stat -c %i "$T/w/small") == "$small" && $(stat -c %i "$T/w/big") == "$big" ]] || fail "replaced at the end"
	[[ $(<"$T/w/small") == "new small" && $(<"$T/w/other") == "old linked" ]]
	! ls "$T/w"/.diehard-commit-* 2>/dev/null || fail "temporary files were left"
}

@test "msync (MS_SYNC) of a shared mapping is a point: the mapped bytes are in the real file when it returns" {
	start_writer -k 3 -v
	say "mmap m.bin mapped-bytes" "mapped m.bin"
	[[ $(<"$T/w/m.bin") == mapped-bytes ]] || fail "m.bin after its msync: $(cat "$T/w/m.bin" 2>&1)" "$(tail "$T/run.err")"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	jq -e '.files.points.committed == 1 and .files.points.outvoted == 0' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .files.points "$T/r.json")"
}

@test "SQLite (WAL): each transaction is in the real database when the program goes on, a plain reader agrees; a replica killed mid-way is replaced and checked" {
	require_cmd sqlite3
	# Made in WAL mode beforehand: switching to it in the run is a
	# transaction with a rollback journal, whose removal is no point
	# (docs/FILES.md): a reader would roll it back.
	sqlite3 "$T/w/t.db" 'pragma journal_mode=wal; create table t(n);' >/dev/null
	start_writer -k 3 -v
	local n victim
	for n in 1 2 3 4 5 6; do
		say "row $n" "row $n"
		# A copy of the real files, read: a reader of the real ones
		# would checkpoint them on its close, a change from outside the
		# run (docs/FILES.md's limits).
		rm -rf "$T/copy"
		mkdir "$T/copy"
		cp "$T/w/t.db" "$T/w/t.db-wal" "$T/copy/"
		[[ $(sqlite3 "$T/copy/t.db" 'select count(*) from t') == "$n" ]] ||
			fail "after row $n the real database has $(sqlite3 "$T/copy/t.db" 'select count(*) from t' 2>&1) rows" \
				"$(grep -E 'sync|point|straggler|kill|caught|outvoted' "$T/run.err" | tail -n 15)"
		if ((n == 3)); then
			victim=$(writer_pids | shuf -n 1)
			[[ -n $victim ]] || fail "no replica to kill"
			kill -KILL "$victim"
		fi
	done
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(sqlite3 "$T/w/t.db" 'select group_concat(n) from t') == 1,2,3,4,5,6 ]] ||
		fail "after the run: $(sqlite3 "$T/w/t.db" 'select group_concat(n) from t' 2>&1)" "$(tail -n 15 "$T/run.err")"
	[[ $(sqlite3 "$T/w/t.db" 'pragma integrity_check') == ok ]] || fail "integrity: $(sqlite3 "$T/w/t.db" 'pragma integrity_check' 2>&1)"
	jq -e '.files.points.committed > 0 and .files.points.failed == 0 and
		(.files.divergences // []) == [] and (.replacements | length) >= 1' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '{points: .files.points, div: .files.divergences, rep: (.replacements | length)}' "$T/r.json")" \
			"$(grep -E 'kill|replace|caught|diverg' "$T/run.err" | tail)"
}

@test "SQLite in its default journal mode: the journal's removal is a point, so after each transaction the real directory has the database and no journal, a plain reader sees every row, and the program keeps writing (its database keeps its inode)" {
	require_cmd sqlite3
	sqlite3 "$T/w/j.db" 'create table t(n);'
	start_writer -k 3
	local n
	for n in 1 2 3 4; do
		say "jrow $n" "jrow $n"
		[[ ! -e $T/w/j.db-journal ]] || fail "after row $n the real journal is there (a reader would roll it back)"
		[[ $(sqlite3 -readonly "$T/w/j.db" 'select count(*) from t') == "$n" ]] ||
			fail "after row $n the real database has $(sqlite3 -readonly "$T/w/j.db" 'select count(*) from t' 2>&1) rows" \
				"$(grep -E 'point|removal|uncommitted|straggler|kill' "$T/run.err" | tail -n 15)"
	done
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(sqlite3 "$T/w/j.db" 'select group_concat(n) from t') == 1,2,3,4 ]]
	jq -e '.files.points.removed == 4 and .files.points.failed == 0 and .files.points.unsettled == 0' "$T/r.json" \
		>/dev/null || fail "report: $(jq -c .files.points "$T/r.json")"
	# The CLI: three transactions in one process (each a sync of the
	# database in place, its inode kept: a new one read as a moved
	# database, "attempt to write a readonly database").
	cd "$T/w"
	capture "$T/cli" timeout 120 "$DIEHARD" -k 3 sqlite3 j.db 'insert into t values(5); insert into t values(6);
		insert into t values(7); select count(*) from t;'
	[[ $(<"$T/cli.rc") == 0 && $(<"$T/cli.out") == 7 ]] || fail "the CLI: exit $(<"$T/cli.rc"), '$(<"$T/cli.out")'" "$(tail "$T/cli.err")"
}

@test "a rename is a point: the name has the bytes in the real tree and the old name is gone when the call returns; RENAME_NOREPLACE (no point) is refused as the kernel says, nothing committed" {
	start_writer -k 3 -v
	echo old >"$T/w/conf"
	say "sync conf.tmp new" "synced conf.tmp"
	[[ $(<"$T/w/conf.tmp") == new ]]
	say "mv conf.tmp conf" "moved conf.tmp"
	[[ ! -e $T/w/conf.tmp && $(<"$T/w/conf") == new ]] || fail "after the rename: conf '$(cat "$T/w/conf")'" "$(ls -la "$T/w")"
	# A file never synced, renamed over a real one: a point too.
	echo draft >"$T/w/draft"
	say "sync conf.tmp newer" "synced conf.tmp"
	say "mv conf.tmp conf" "moved conf.tmp"
	[[ ! -e $T/w/conf.tmp && $(<"$T/w/conf") == newer ]] || fail "after the second rename: conf '$(cat "$T/w/conf")'" "$(ls -la "$T/w")" "$(cat "$T/run.err")" "$(cat "$T/run.out")"
	# RENAME_NOREPLACE is no point: each replica's kernel refuses it
	# (conf is there), nothing committed.
	say "sync conf.tmp third" "synced conf.tmp"
	say "mvx conf.tmp conf" "refused conf.tmp FileExistsError"
	[[ $(<"$T/w/conf") == newer && $(<"$T/w/conf.tmp") == third ]] || fail "after the refused rename: conf '$(cat "$T/w/conf")'"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(<"$T/w/conf") == newer && $(<"$T/w/conf.tmp") == third ]] || fail "after the run: $(ls -la "$T/w")"
	validate_report "$T/r.json"
	jq -e '.files.points.renamed == 2 and .files.points.unsettled == 0 and .files.points.failed == 0 and
		(.files.divergences // []) == []' "$T/r.json" >/dev/null || fail "report: $(jq -c .files.points "$T/r.json")"
}

@test "renames a nobody program may not make: over root's file in a sticky directory (no point), and over its own file in root's directory (the probe is refused): refused in every replica, the real files stay" {
	[[ $(id -u) == 0 ]] || skip "needs root (the writer runs as nobody)"
	require_nobody
	local dir
	dir=$(mktemp -d /tmp/diehard-rename.XXXXXX)
	chmod 755 "$dir"
	mkdir "$dir/w" "$dir/shared" "$dir/w/ro"
	chmod 1777 "$dir/w" "$dir/shared"
	echo "root's" >"$dir/w/conf"
	echo "nobody's" >"$dir/w/ro/conf"
	chown 65534:65534 "$dir/w/ro/conf"
	rmdir "$T/w" "$T/shared"
	ln -s "$dir/w" "$T/w"
	ln -s "$dir/shared" "$T/shared"
	WRITER_AS="setpriv --reuid=65534 --regid=65534 --clear-groups env PATH=/usr/bin:/bin" start_writer -k 3
	say "sync conf.tmp mine" "synced conf.tmp"
	say "mv conf.tmp conf" "refused conf.tmp PermissionError"
	say "mv conf.tmp ro/conf" "refused conf.tmp PermissionError"
	local during during_ro
	during=$(cat "$dir/w/conf")
	during_ro=$(cat "$dir/w/ro/conf")
	finish
	local after owner after_ro
	after=$(cat "$dir/w/conf")
	owner=$(stat -c %u "$dir/w/conf")
	after_ro=$(cat "$dir/w/ro/conf")
	rm -rf "$dir"
	[[ $during == "root's" && $after == "root's" && $owner == 0 ]] ||
		fail "conf: '$during' during, '$after' after, owner $owner" "$(tail -20 "$T/run.err")"
	[[ $during_ro == "nobody's" && $after_ro == "nobody's" ]] || fail "ro/conf: '$during_ro' during, '$after_ro' after"
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	jq -e '.files.points.renamed == 0 and .files.points.unsettled == 1' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .files.points "$T/r.json")"
}

@test "a replica whose file differs at a point is outvoted there: the majority's version is committed, the replica goes on; the end's vote outvotes it, the path reported" {
	start_writer -k 3 -v
	say "odd f" "wrote f"
	[[ $(<"$T/w/f") == even ]] || fail "f: $(cat "$T/w/f")"
	say "sync g after" "synced g"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	[[ $(<"$T/w/f") == even && $(<"$T/w/g") == after ]] || fail "$(ls -la "$T/w")"
	validate_report "$T/r.json"
	jq -e --arg f "$T/w/f" '.files.points.outvoted == 1 and .files.points.committed == 2
		and (.files.divergences | any(.path == $f))' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .files "$T/r.json")"
	grep -q "replica [0-9]*'s file $T/w/f at its sync 1 differs from the version committed there (bytes): outvoted" \
		"$T/run.err" || fail "$(cat "$T/run.err")"
}

@test "two replicas: a file that differs at a point is no quorum there: the calls go on uncommitted, the end has no majority (123); nothing of it committed" {
	start_writer -k 2 -v
	echo "odd f" >&7
	finish
	[[ $BG_RC == 123 ]] || fail "exit $BG_RC, not 123" "$(tail "$T/run.err")"
	[[ ! -e $T/w/f ]] || fail "f was committed: $(cat "$T/w/f")"
	grep -q "$T/w/f: its sync 1 goes on uncommitted: the voters' files differ there, no quorum" "$T/run.err" ||
		fail "$(cat "$T/run.err")"
	jq -e '.files.points.unsettled == 1 and .files.points.committed == 0' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .files "$T/r.json")"
}

@test "a replica that wrote the file but has not synced it (a timer's sync, later or never) is not waited for: the quorum's version is committed at once, nobody killed" {
	start_writer -k 3 -v --timeout 1
	say "nosync-odd f" "wrote f"
	[[ $(<"$T/w/f") == even ]] || fail "f: $(cat "$T/w/f")"
	say "sync g after" "synced g"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	! grep -q "straggler" "$T/run.err" || fail "$(grep straggler "$T/run.err")"
	jq -e '.files.points.committed == 2 and (.replacements | length) == 0 and (.files.divergences // []) == []' \
		"$T/r.json" >/dev/null || fail "report: $(jq -c '{files, replacements}' "$T/r.json")"
}

@test "a replica that never makes the file the others synced is killed as a straggler after --timeout, and the point committed" {
	start_writer -k 3 -v --timeout 1
	say "skip-odd f" "wrote f"
	[[ $(<"$T/w/f") == even ]] || fail "f: $(cat "$T/w/f")"
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	grep -q "straggler: no file $T/w/f of its own 1.0 s after a quorum synced it" "$T/run.err" ||
		fail "$(grep -E 'kill' "$T/run.err")"
}

@test "two replicas that sync two files in another order each: no quorum forms within --timeout, the calls go on uncommitted, the end commits both" {
	start_writer -k 2 -v --timeout 1
	echo "order a b" >&7
	finish
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail "$T/run.err")"
	[[ $(<"$T/w/a") == a && $(<"$T/w/b") == b ]] || fail "$(ls -la "$T/w")"
	grep -q "$T/w/[ab]: its sync 1 goes on uncommitted: no quorum within 1.0 s" "$T/run.err" ||
		fail "$(cat "$T/run.err")"
}

@test "a sync 40 directories deep, all new: committed with every directory" {
	local p=d1 i
	for i in $(seq 2 40); do p=$p/d$i; done
	(cd "$T/w" && capture "$T/run" timeout 60 "$DIEHARD" -k 2 -r "$T/r.json" \
		sh -c "mkdir -p $p && echo deep | dd of=$p/f conv=fsync status=none && test -s $p/f")
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $(<"$T/w/$p/f") == deep ]]
	jq -e '.files.points.committed == 1 and .files.points.failed == 0' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c .files.points "$T/r.json")"
}

@test "unprivileged: a point commits as the user, into the user's directory" {
	require_nobody
	local dir
	dir=$(mktemp -d /tmp/diehard-points.XXXXXX)
	mkdir "$dir/w" "$dir/shared"
	chown -R 65534:65534 "$dir"
	mkfifo "$dir/in"
	chmod 666 "$dir/in"
	(cd "$dir/w" && as_nobody env HOME="$dir" POINTS_LOCK="$dir/shared/lock" timeout 120 "$DIEHARD" -k 3 \
		--share "$dir/shared" -r "$dir/r.json" python3 "$WRITER" <"$dir/in" >"$T/run.out" 2>"$T/run.err") &
	DH=$!
	exec 7>"$dir/in"
	say "sync a.txt mine" "synced a.txt"
	local content owner
	content=$(cat "$dir/w/a.txt" 2>&1)
	owner=$(stat -c %u "$dir/w/a.txt" 2>&1)
	finish
	cp "$dir/r.json" "$T/r.json" 2>/dev/null || true
	rm -rf "$dir"
	[[ $content == mine && $owner == 65534 ]] || fail "a.txt after its sync: '$content', owner $owner" "$(cat "$T/run.err")"
	[[ $BG_RC == 0 ]] || fail "exit $BG_RC" "$(tail -20 "$T/run.err")"
	jq -e '.files.views == "directories" and .files.points.committed == 1' "$T/r.json" >/dev/null ||
		fail "report: $(jq -c '.files | del(.committed.paths)' "$T/r.json")"
}

@test "--ci: a program with a commit point before its bug: the origin is still found (the search's replays see the start through the start-state layer)" {
	require_prog ci_bugs
	cd "$T/w"
	local line
	line=$(grep -n "ORIGIN: bit \*/\$" "$ROOT/tests/progs/ci_bugs.c" | cut -d: -f1)
	capture "$T/run" timeout 120 "$DIEHARD" --ci -r "$T/r.json" sh -c \
		'test -e f && echo "f was there"; echo data | dd of=f conv=fsync status=none; "$1" bit' sh "$PROGS/ci_bugs"
	[[ $(<"$T/run.rc") == 122 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	jq -e '.files.points.committed == 1' "$T/r.json" >/dev/null || fail "no point: $(jq -c .files "$T/r.json")"
	grep -q "ci_bugs.c:$line)" "$T/run.err" || fail "no origin at ci_bugs.c:$line" "$(cat "$T/run.err")"
	[[ $(<f) == data ]]
}

@test "as root with a mount beneath a directory (its own view): the directories above it keep their modes in the other views, and the commit leaves them so" {
	[[ $(id -u) == 0 ]] || skip "needs root (a mount namespace of the test's own)"
	require_cmd unshare
	mkdir -p "$T/a/m"
	chmod 1777 "$T/a"
	local before_tmp
	before_tmp=$(stat -c %a /tmp)
	capture "$T/run" unshare -m sh -c 'mount -t tmpfs none "$1/a/m" && cd "$1/a" &&
		exec timeout 60 "$2" -k 2 -r "$1/r.json" sh -c "echo hi > $1/a/probe"' sh "$T" "$DIEHARD"
	local mode_a mode_tmp
	mode_a=$(stat -c %a "$T/a")
	mode_tmp=$(stat -c %a /tmp)
	[[ $mode_tmp == "$before_tmp" ]] || { chmod "$before_tmp" /tmp; fail "/tmp went from $before_tmp to $mode_tmp"; }
	[[ $(<"$T/run.rc") == 0 ]] || fail "exit $(<"$T/run.rc")" "$(cat "$T/run.err")"
	[[ $mode_a == 1777 ]] || fail "$T/a went to $mode_a (committed: $(jq -c .files.committed.paths "$T/r.json"))"
	[[ $(<"$T/a/probe") == hi ]]
}
