# Shared helpers for the end-to-end tests (tests/*.bats).  Load with `load helpers`.
#
# Every run of a program under test goes through `plain` or `dh` (the preload),
# both wrapped in `timeout`: a deadlocked allocator must fail its test, not
# stall the suite.  The timeout is a hang guard, not a timing assertion.

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
# DIEHARD_TEST_LIB tests another build of the library (e.g. an installed one).
LIB="${DIEHARD_TEST_LIB:-$ROOT/build/libdiehard.so}"
PROGS="$ROOT/build/tests"
DH_TIMEOUT=${DH_TIMEOUT:-120}

# Reproducible reference runs: fixed locale and hash seeds for the interpreters,
# and nothing inherited from the caller's environment that would change the
# allocator's behaviour.
export LC_ALL=C
export PYTHONHASHSEED=0 PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
unset LD_PRELOAD DIEHARD_SEED DIEHARD_FILL DIEHARD_M DIEHARD_STATS DIEHARD_SAFE_STRINGS DIEHARD_FENCE DIEHARD_FENCE_ACTION

# One stats line, as printed at exit with DIEHARD_STATS=1: the documented
# fields in the documented order; further key=value fields may follow.
STATS_RE='^diehard: stats pid=[0-9]+ seed=[0-9a-fA-F]{32} allocations=[0-9]+ frees=[0-9]+ peak_live_bytes=[0-9]+ double_frees=[0-9]+ invalid_frees=[0-9]+( [a-z_]+=[^ ]+)*$'

# Extra preloaded variants for check_program, e.g. DH_VARIANTS=("DIEHARD_M=4").
DH_VARIANTS=()

fail() {
	printf '%s\n' "$@" >&2
	return 1
}

require_lib() {
	[[ -f $LIB ]] || fail "$LIB does not exist: run make first"
}

# require_prog NAME: the helper program build/tests/NAME exists.
require_prog() {
	require_lib
	[[ -x $PROGS/$1 ]] || fail "$PROGS/$1 does not exist: run make first"
}

# plain [VAR=value ...] cmd args...: run without the preload.
plain() {
	timeout "$DH_TIMEOUT" env "$@"
}

# dh [VAR=value ...] cmd args...: run under the preload.
dh() {
	timeout "$DH_TIMEOUT" env LD_PRELOAD="$LIB" "$@"
}

# capture NAME cmd args...: stdout to NAME.out, stderr to NAME.err, exit status
# to NAME.rc.  Never fails itself.  stdin is /dev/null.
capture() {
	local name=$1 rc=0
	shift
	"$@" >"$name.out" 2>"$name.err" </dev/null || rc=$?
	echo "$rc" >"$name.rc"
}

# capture_dh NAME PROG [VAR=value ...] -- ARGS...: PROG ARGS under the preload
# with the variables, captured as NAME (in the test's directory); sets OUT and
# ERR to the files and RC to the exit status.
capture_dh() {
	local name=$BATS_TEST_TMPDIR/$1 prog=$2
	shift 2
	local vars=()
	while [[ $1 != -- ]]; do
		vars+=("$1")
		shift
	done
	shift
	capture "$name" dh "${vars[@]}" "$prog" "$@"
	OUT=$name.out ERR=$name.err RC=$(<"$name.rc")
}

# same_bytes EXPECTED ACTUAL WHAT: the two files are byte for byte identical;
# otherwise show where they differ and an excerpt of the diff.
same_bytes() {
	local exp=$1 act=$2 what=$3
	# Pipes (process substitutions) can be read only once: keep a copy.
	if [[ ! -f $exp ]]; then
		cat -- "$exp" >"$BATS_TEST_TMPDIR/same_bytes.expected"
		exp="$BATS_TEST_TMPDIR/same_bytes.expected"
	fi
	if [[ ! -f $act ]]; then
		cat -- "$act" >"$BATS_TEST_TMPDIR/same_bytes.actual"
		act="$BATS_TEST_TMPDIR/same_bytes.actual"
	fi
	cmp -s -- "$exp" "$act" && return 0
	{
		echo "MISMATCH: $what"
		echo "  expected: $exp ($(wc -c <"$exp") bytes)"
		echo "  actual:   $act ($(wc -c <"$act") bytes)"
		cmp -- "$exp" "$act" 2>&1 | head -n 1 | sed 's/^/  /'
		diff -a -u -- "$exp" "$act" 2>&1 | head -n 40 | cut -c 1-200 | sed 's/^/  | /'
	} >&2
	return 1
}

# stats_lines FILE: the stats lines in FILE (a captured stderr); fails when
# there are none, or when a line starting with "diehard: stats" is malformed.
stats_lines() {
	local file=$1 line n=0
	while IFS= read -r line; do
		[[ $line == 'diehard: stats'* ]] || continue
		[[ $line =~ $STATS_RE ]] || fail "malformed stats line in $file:" "  $line"
		printf '%s\n' "$line"
		n=$((n + 1))
	done <"$file"
	((n > 0)) || fail "no 'diehard: stats' line in $file (was the preload active?)" \
		"--- $file ---" "$(head -c 2000 "$file")"
}

# stat_field FIELD LINE: the value of FIELD in a stats line.
stat_field() {
	local re="(^| )$1=([0-9a-fA-F]+)( |\$)"
	[[ $2 =~ $re ]] || fail "no field $1 in: $2"
	printf '%s\n' "${BASH_REMATCH[2]}"
}

# strip_stats IN OUT: IN without its stats lines.
strip_stats() {
	grep -v '^diehard: stats ' -- "$1" >"$2" || true
}

# check_no_bad_frees STATSFILE: every stats line reports zero ignored frees
# (a correct program never frees an invalid pointer, so any count is the
# allocator rejecting a legitimate free).
check_no_bad_frees() {
	local line
	while IFS= read -r line; do
		[[ $(stat_field double_frees "$line") == 0 && $(stat_field invalid_frees "$line") == 0 ]] ||
			fail "a correct program reported ignored frees:" "  $line"
	done <"$1"
}

# check_program cmd args...
# Runs cmd plainly (the reference; it must succeed), then under the preload
#   - with default settings,
#   - with DIEHARD_FILL=random and DIEHARD_STATS=1,
#   - with each entry of DH_VARIANTS (space-separated VAR=value words).
# Each preloaded run must give the same exit status, stdout and stderr as the
# reference, byte for byte (stats lines removed).  Runs with DIEHARD_STATS=1
# must print at least one well-formed stats line (proof that the preload was
# active) and report no ignored frees.
check_program() {
	local d v tag
	d=$(mktemp -d "$BATS_TEST_TMPDIR/run.XXXXXX")
	capture "$d/plain" plain "$@"
	[[ $(<"$d/plain.rc") == 0 ]] ||
		fail "reference (plain) run of '$*' failed with status $(<"$d/plain.rc")" "$(head -c 2000 "$d/plain.err")"
	for v in "" "DIEHARD_FILL=random DIEHARD_STATS=1" "${DH_VARIANTS[@]}"; do
		local -a envs=()
		read -r -a envs <<<"$v"
		tag=${v:-default}
		tag=${tag// /_}
		tag=${tag//=/-}
		capture "$d/$tag" dh "${envs[@]}" "$@"
		[[ $(<"$d/$tag.rc") == $(<"$d/plain.rc") ]] ||
			fail "'$*' under the preload (${v:-defaults}) exited with status $(<"$d/$tag.rc"), plain run with $(<"$d/plain.rc")" \
				"$(head -c 2000 "$d/$tag.err")"
		if [[ $v == *DIEHARD_STATS=1* ]]; then
			stats_lines "$d/$tag.err" >"$d/$tag.stats"
			check_no_bad_frees "$d/$tag.stats"
			strip_stats "$d/$tag.err" "$d/$tag.err.nostats"
			mv -- "$d/$tag.err.nostats" "$d/$tag.err"
		fi
		same_bytes "$d/plain.out" "$d/$tag.out" "stdout of '$*' under the preload (${v:-defaults})"
		same_bytes "$d/plain.err" "$d/$tag.err" "stderr of '$*' under the preload (${v:-defaults})"
	done
}

# gen_text FILE LINES SEED: a deterministic text file of LINES tab-separated
# records (hex key, signed integer, decimal, a few words).  Generated without
# the preload.
gen_text() {
	gawk -v n="$2" -v seed="$3" 'BEGIN {
		srand(seed)
		nw = split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega", w, " ")
		for (i = 1; i <= n; i++) {
			k = 1 + int(rand() * 7)
			line = ""
			for (j = 0; j < k; j++) {
				word = w[1 + int(rand() * nw)]
				if (rand() < 0.3) word = word int(rand() * 1000)
				if (rand() < 0.1) word = toupper(word)
				line = line (j ? " " : "") word
			}
			printf "%08x\t%d\t%.3f\t%s\n", int(rand() * 4294967296), int(rand() * 100000) - 50000, rand() * 1000, line
		}
	}' >"$1"
}

# ---- The supervisor (tests/diehard_*.bats) ----------------------------------
#
# build/diehard runs a command as k replicas and writes only what a majority
# agrees on.  Every run goes through `sup` (or, for runs in the background,
# through `start_bg` and `await_exit`): a hung supervisor fails its test
# instead of stalling the suite.  The bounds are hang guards, not timings.

DIEHARD="$ROOT/build/diehard"

# python_json NAME VAR=value...: python3 (the interpreter itself, not a
# version manager's shim; every object through malloc, not pymalloc's
# arenas) builds a dict of 20,000 keys and round-trips it through JSON under
# the preload with the variables; fails unless it prints what it prints
# without the preload. Its streams are NAME.out/.err/.rc in the test's
# directory.
python_json() {
	require_cmd python3
	local name=$1 py=python3 want
	shift
	[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
	local script='import json; d = {str(i): [i] * (i % 7) for i in range(20000)}; s = json.dumps(d); print(len(s), len(json.loads(s)))'
	want=$(plain "$py" -c "$script")
	capture "$BATS_TEST_TMPDIR/$name" dh PYTHONMALLOC=malloc "$@" "$py" -c "$script"
	[[ $(<"$BATS_TEST_TMPDIR/$name.rc") == 0 && $(<"$BATS_TEST_TMPDIR/$name.out") == "$want" ]] ||
		fail "python3 with $*: $(cat "$BATS_TEST_TMPDIR/$name.out")" "$(head -c 2000 "$BATS_TEST_TMPDIR/$name.err")"
}

# validate_report FILE: diehard's --report FILE conforms to
# docs/report.schema.json (python3-jsonschema, make deps).
validate_report() {
	python3 - "$ROOT/docs/report.schema.json" "$1" <<'PY' || fail "$1 does not match docs/report.schema.json"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.validate(json.load(open(sys.argv[2])), schema, cls=jsonschema.Draft202012Validator)
PY
}
SUP_TIMEOUT=${SUP_TIMEOUT:-60}

require_diehard() {
	require_lib
	[[ -x $DIEHARD ]] || fail "$DIEHARD does not exist: run make first"
}

# require_cmd NAME...: skips the test when a command the test needs is missing.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c is not installed (add it to .ci/deps)"
	done
}

# require_jq: the tests read diehard's JSON reports with jq (a test
# dependency, like bats: missing, it is an error, not a skip).
require_jq() {
	command -v jq >/dev/null || fail "jq is not installed: the report tests need it (.ci/deps)"
}

# pgid PID: the process group of PID.
pgid() {
	local stat
	stat=$(cat "/proc/$1/stat") || return 1
	stat=${stat##*) }
	read -r _ _ pg _ <<<"$stat"
	echo "$pg"
}

# sup ARGS...: build/diehard ARGS under a hang guard of SUP_TIMEOUT seconds.
# SUP_FLAGS (an array): options every run of the test file gets first
# (tests/diehard_virtualize_notify.bats: the notify path for clocks).
# The test's own directory is --share'd with the replicas (SUP_SHARE names
# another, or none when empty: tests/files.bats), so that its lock
# directories ("the first replica to make $T/lock misbehaves"), FIFOs and
# marks are the real ones in every replica, as before the file views.
sup() {
	local pre=() share=${SUP_SHARE-$BATS_TEST_TMPDIR}
	if [[ -n $share && ${1-} != replay && ${1-} != status && ${1-} != events ]]; then
		pre=(--share "$share")
	fi
	timeout "$SUP_TIMEOUT" "$DIEHARD" ${pre[@]+"${pre[@]}"} ${SUP_FLAGS[@]+"${SUP_FLAGS[@]}"} "$@"
}

# proc_alive PID: PID is a live process (a zombie is not).
proc_alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# proc_gone PID: PID has exited (it no longer exists, or is a zombie).
proc_gone() {
	! proc_alive "$1"
}

# wait_until SECONDS CMD [ARGS...]: polls CMD every 20 ms until it succeeds;
# fails after SECONDS.
wait_until() {
	local tries=$(($1 * 50))
	shift
	while ! "$@"; do
		((tries-- > 0)) || return 1
		sleep 0.02
	done
}

# start_bg OUT CMD [ARGS...]: starts CMD in the background with stdin from
# /dev/null, stdout to OUT.out and stderr to OUT.err; its pid in BG_PID.
start_bg() {
	local out=$1
	shift
	"$@" </dev/null >"$out.out" 2>"$out.err" &
	BG_PID=$!
}

# await_exit PID SECONDS: waits for the background job PID to end; its exit
# status in BG_RC.  After SECONDS it is killed (SIGKILL) and the test fails.
await_exit() {
	local pid=$1
	if ! wait_until "$2" proc_gone "$pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		fail "process $pid still running after $2 s: killed"
		return 1
	fi
	BG_RC=0
	wait "$pid" || BG_RC=$?
}

# report_pids REPORT: the replicas' pids in a --report file, one a line.
report_pids() {
	jq -r '.replicas[].pid' "$1"
}

# is_prefix FILE WHOLE: FILE's bytes are a prefix of WHOLE's (either may be
# a pipe, such as a process substitution).
is_prefix() {
	local part=$1 whole=$2
	if [[ ! -f $part ]]; then
		cat -- "$part" >"$BATS_TEST_TMPDIR/is_prefix.part"
		part="$BATS_TEST_TMPDIR/is_prefix.part"
	fi
	if [[ ! -f $whole ]]; then
		cat -- "$whole" >"$BATS_TEST_TMPDIR/is_prefix.whole"
		whole="$BATS_TEST_TMPDIR/is_prefix.whole"
	fi
	local n
	n=$(wc -c <"$part")
	((n <= $(wc -c <"$whole"))) && cmp -s -n "$n" -- "$part" "$whole"
}

# now_ms: milliseconds since the epoch (for hang guards and loose orderings).
now_ms() {
	local t=$EPOCHREALTIME
	echo $((${t/./} / 1000))
}

# program_of PID: the process running a replica's program: PID itself, or,
# when PID is a sandboxed replica's init (diehard-init), its child.
program_of() {
	if [[ $(cat "/proc/$1/comm" 2>/dev/null) == diehard-init ]]; then
		pgrep -P "$1" | head -n 1
	else
		echo "$1"
	fi
}

# expect_error CODE PATTERN DIEHARD-ARGS...: diehard exits with CODE, prints
# nothing on stdout and exactly one line on stderr, starting "diehard: " and
# matching the extended regex PATTERN; no replica ran (none made $T/ran).
expect_error() {
	local code=$1 pattern=$2
	shift 2
	capture "$T/run" sup "$@"
	local rc err
	rc=$(<"$T/run.rc")
	err=$(<"$T/run.err")
	[[ $rc == "$code" ]] || fail "diehard $* exited with $rc, expected $code" "stderr: $err"
	[[ ! -s $T/run.out ]] || fail "diehard $* wrote to stdout:" "$(head -c 500 "$T/run.out")"
	[[ $(grep -c '' "$T/run.err") == 1 ]] || fail "diehard $*: expected one line on stderr, got:" "$err"
	[[ $err == 'diehard: '* ]] || fail "diehard $*: the message does not start with 'diehard: ':" "$err"
	[[ $err =~ $pattern ]] || fail "diehard $*: the message does not match /$pattern/:" "$err"
	[[ ! -e $T/ran ]] || fail "diehard $*: a replica ran although the invocation is wrong"
}

# as_nobody CMD...: CMD as the unprivileged user nobody (from root).
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# require_nobody: skips the test unless the unprivileged user can run
# diehard from the build tree sandboxed (unprivileged user namespaces).
# (diehard_sandbox.bats and net.bats have their own, which do more.)
require_nobody() {
	[[ $(id -u) == 0 ]] || skip "not root: the other tests already run unprivileged"
	command -v setpriv >/dev/null || skip "no setpriv"
	as_nobody test -x "$DIEHARD" || skip "user nobody cannot run $DIEHARD"
	as_nobody "$DIEHARD" -k 1 --sandbox on true 2>/dev/null || skip "no unprivileged user namespaces here"
}

# free_dual_port: a port of 127.0.0.1 free now for UDP and for TCP alike (a
# DNS server binds both).
free_dual_port() {
	python3 -c '
import socket
while True:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", u.getsockname()[1]))
    except OSError:
        continue
    print(u.getsockname()[1])
    break'
}

# nginx_conf DIR PORT ROOT WORKERS ERROR_LOG FORMAT: DIR/nginx.conf, nginx
# in the foreground as root with WORKERS workers serving ROOT on
# 127.0.0.1:PORT, its error log at ERROR_LOG (a path, and a level if any),
# its pid file, temp paths (DIR/tmp) and access log (DIR/logs/access.log, in
# FORMAT, given quoted: '$remote_addr $request') under DIR.
nginx_conf() {
	local dir=$1 port=$2 root=$3 workers=$4 errlog=$5 format=$6
	mkdir -p "$dir/tmp" "$dir/logs"
	cat >"$dir/nginx.conf" <<-EOF
		daemon off;
		user root;
		worker_processes $workers;
		pid $dir/nginx.pid;
		error_log $errlog;
		events { worker_connections 64; }
		http {
			client_body_temp_path $dir/tmp/body;
			proxy_temp_path $dir/tmp/proxy;
			fastcgi_temp_path $dir/tmp/fastcgi;
			uwsgi_temp_path $dir/tmp/uwsgi;
			scgi_temp_path $dir/tmp/scgi;
			log_format plain '$format';
			access_log $dir/logs/access.log plain;
			server { listen 127.0.0.1:$port; root $root; }
		}
	EOF
}

# free_port: a TCP port of 127.0.0.1 nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# require_private_net: skips the test unless the replicas get a network
# namespace of their own here (--net private: diehard proxies their
# connections).
require_private_net() {
	local ours theirs
	ours=$(readlink /proc/self/ns/net) || skip "no /proc/self/ns/net"
	theirs=$(SUP_TIMEOUT=60 sup -k 1 -- readlink /proc/self/ns/net 2>/dev/null) || skip "diehard -k 1 readlink failed"
	[[ -n $theirs && $theirs != "$ours" ]] || skip "the replicas share diehard's network namespace here"
}
