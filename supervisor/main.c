/* main.c — the diehard command line. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "ctl.h"
#include "elfcheck.h"
#include "exitcode.h"
#include "log.h"
#include "net.h"
#include "replay.h"
#include "files.h"
#include "sandbox.h"
#include "spawn.h"
#include "supervisor.h"
#include "svcenv.h"
#include "voter.h"

#ifndef DIEHARD_VERSION
#define DIEHARD_VERSION "0.1.0"
#endif
#ifndef DIEHARD_LIBDIR
#define DIEHARD_LIBDIR "/usr/local/lib"
#endif
#ifndef DIEHARD_LIBEXECDIR
#define DIEHARD_LIBEXECDIR "/usr/local/libexec/diehard"
#endif

static const char usage[] =
	"usage: diehard [options] [--] COMMAND [ARG]...\n"
	"       diehard replay FILE [--replica N] [--gdb]   (diehard replay --help)\n"
	"       diehard status|events [--control PATH] ...   (diehard status --help)\n"
	"Runs COMMAND as k replicas on differently seeded randomized heaps; only output\n"
	"a majority agrees on is written. Exit status: the majority's; 123 no majority;\n"
	"124 agreed files that could not be committed; 125 diehard's own error; 126\n"
	"command not executable; 127 command not found; 122 --ci found a memory error.\n"
	"\n"
	"  -k, --replicas N      replicas (1-64; default 3; 1 runs on the randomized heap\n"
	"                        only, 2 detects without masking)\n"
	"  -a, --allocator PATH  libdiehard.so to preload (default: beside diehard, else\n"
	"                        " DIEHARD_LIBDIR ")\n"
	"  -r, --report FILE     write a JSON report of the run (docs/REPORT.md); FILE is\n"
	"                        created before anything runs (a FIFO needs a reader)\n"
	"  -v, --verbose         one line on stderr per event (spawn, divergence, kill, exit)\n"
	"      --ci              a test run (docs/CI.md): fills that cannot agree by chance;\n"
	"                        any divergence, even one the majority masked, or a bad free\n"
	"                        fails the run (exit 122) with where the uninitialized bytes\n"
	"                        came from and a command that replays the failing replica\n"
	"      --record FILE     write the run's recording to FILE (for diehard replay); with\n"
	"                        --ci the default is diehard-ci-PID.dhr, on failure only\n"
	"      --stop-timeout SECONDS  after SIGTERM or SIGINT (forwarded), how long the\n"
	"                        replicas get before they are killed (default 5)\n"
	"      --idle MS         quiet time before a partial chunk is voted (default 50)\n"
	"      --timeout SECONDS how long a replica may trail the majority silently (default 10)\n"
	"      --window BYTES    output a replica may run ahead or behind (default 1M;\n"
	"                        up to 1G)\n"
	"      --respawns N      replacements allowed in the run (default 16): a killed\n"
	"                        replica is replaced by a fresh-seeded one that re-runs\n"
	"                        the command from the start, replaying input, clocks and\n"
	"                        random values; ties are broken by extra replicas.\n"
	"                        Once the run serves, only replacements that did not\n"
	"                        last count: one in the vote for 10 s (2 x --timeout\n"
	"                        if longer) without exiting, or ended there\n"
	"                        by a SIGKILL from outside, gives its respawn back\n"
	"      --no-respawn      the same as --respawns 0: for commands whose side\n"
	"                        effects (files written, messages sent) must not happen again\n"
	"      --respawn-rate N  at most N replacements in any minute (default 30)\n"
	"      --min-voters N    the fewest replicas that must agree before anything is\n"
	"                        committed (default 2, but 1 once the run serves: a\n"
	"                        service with one replica left keeps answering, degraded,\n"
	"                        said and counted; 2 refuses instead: docs/SERVICES.md)\n"
	"      --input-log BYTES input kept for replaying to new replicas (default 64M;\n"
	"                        0: none; up to 64G)\n"
	"      --conn-log BYTES  client bytes of a TCP server's connections kept for\n"
	"                        rebuilding a new replica's state (default 64M; 0: new\n"
	"                        replicas start with a fresh server; up to 64G)\n"
	"      --stateless       the service keeps no state from one connection to the\n"
	"                        next: a replacement starts as a fresh server and joins\n"
	"                        at the first quiet moment (no client connected, output\n"
	"                        agreed), whatever the history (no connection log)\n"
	"      --durable         the service keeps its state in the files it writes and\n"
	"                        syncs (a database): a replacement starts as a fresh\n"
	"                        server from the files the replicas committed, at a quiet\n"
	"                        moment while new clients wait, whatever the history\n"
	"                        (no connection log; docs/FILES.md)\n"
	"      --strict-order    a server's stdout and stderr voted byte for byte: lines\n"
	"                        its threads write in another order in each replica\n"
	"                        (a shared log) diverge (default: such lines are taken\n"
	"                        in one replica's order; docs/NETWORK.md)\n"
	"      --serial-clients  a TCP server's replicas take one client's request at a\n"
	"                        time, in the order diehard received them: replies that\n"
	"                        depend on the clients' order (a list several push to,\n"
	"                        a shared counter) agree; slower (docs/NETWORK.md)\n"
	"      --call-log N      clock and random answers kept per kind of call for new\n"
	"                        replicas (default 512K entries, 16 bytes a clock's, 56\n"
	"                        another's; up to 64M)\n"
	"      --sandbox MODE    auto (default): each replica in its own user (unless\n"
	"                        root), pid and mount namespaces, or, where the kernel\n"
	"                        refuses them, a warning and none; on: namespaces or\n"
	"                        nothing runs; off: none (docs/SANDBOX.md)\n"
	"      --net MODE        private (default): each sandboxed replica in a network\n"
	"                        namespace of its own (servers bind their ports without\n"
	"                        colliding, diehard proxies clients to them; what goes out\n"
	"                        is made once, voted: docs/NETWORK.md); host: the replicas\n"
	"                        share diehard's network (as with --sandbox off or\n"
	"                        --no-virtualize)\n"
	"      --files MODE      private (default): each sandboxed replica writes into\n"
	"                        copy-on-write views of its own; the changes a majority\n"
	"                        agrees on (with its exit status) are committed once at\n"
	"                        the end, each file atomically (docs/FILES.md); shared:\n"
	"                        the replicas write the real files, each of them\n"
	"      --share DIR       with --files private, DIR (and what is in it) is the real\n"
	"                        directory in every replica, not viewed: each replica\n"
	"                        writes it (locks, FIFOs, sockets shared with the world)\n"
	"      --no-virtualize   let each replica read its own clocks and random bytes\n"
	"                        (by default they all see the same: docs/NONDETERMINISM.md)\n"
	"      --no-fast-clocks  every virtualized clock read asks diehard (no shared\n"
	"                        clock log in the replicas' memory; slower)\n"
	"      --no-lanes        a server's event loops read their clocks through diehard,\n"
	"                        not in the replicas (slower: docs/NONDETERMINISM.md)\n"
	"      --control PATH    serve diehard status and events on a unix socket at PATH\n"
	"                        (mode 0600; default $RUNTIME_DIRECTORY/control if set)\n"
	"      --max-tasks N     tasks (processes and threads) per replica, 2 to 4194304\n"
	"                        (default 4096; 0 or off: none); a replica over it is\n"
	"                        killed and replaced (docs/SANDBOX.md: caps)\n"
	"      --max-memory BYTES  memory per replica, 16M to 64T (default: a (k+1)-th of\n"
	"                        the RAM, or of diehard's cgroup limit; 0 or off: none);\n"
	"                        a replica over it is killed and replaced\n"
	"  -h, --help            this text\n"
	"  -V, --version         the version\n";

static _Noreturn void bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "diehard: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try diehard --help)\n");
	exit(EXIT_INTERNAL);
}

static unsigned long parse_number(const char *s, const char *what, unsigned long lo, unsigned long hi)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
		char msg[128];
		snprintf(msg, sizeof msg, "%s must be a number from %lu to %lu, not '%%s'", what, lo, hi);
		bad_usage(msg, s);
	}
	return v;
}

/* Seconds from 0.1 to a day, as milliseconds. */
static unsigned parse_ms(const char *s, const char *what)
{
	char *end;
	double t = strtod(s, &end);
	if (end == s || *end != '\0' || !(t >= 0.1 && t <= 86400)) {
		char msg[96];
		snprintf(msg, sizeof msg, "%s must be seconds from 0.1 to 86400, not '%%s'", what);
		bad_usage(msg, s);
	}
	return (unsigned)(t * 1000);
}

/* The shortest name of a size: 1G, 64M, 65536. The messages print their
 * maximum with it, so what they offer is what the check accepts. */
static void size_name(char *buf, size_t size, unsigned long long v)
{
	static const char suffix[] = "KMGT";
	int i = -1;
	while (i < 3 && v != 0 && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, size, "%llu", v);
	else
		snprintf(buf, size, "%llu%c", v, suffix[i]);
}

/* A number with an optional K, M, G or T (powers of 1024), from min to max:
 * --window and --input-log take bytes, --call-log entries. A bad value
 * gets one line offering the examples given and the maximum, each of
 * which this accepts. */
static unsigned long long parse_size(const char *s, const char *what, const char *like, unsigned long long min,
				     unsigned long long max)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	else if (*end == 'T' || *end == 't')
		shift = 40;
	if (shift)
		end++;
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max >> shift || v << shift < min) {
		char msg[160], top[32];
		size_name(top, sizeof top, max);
		snprintf(msg, sizeof msg, "%s must be %s, up to %s, not '%%s'", what, like, top);
		bad_usage(msg, s);
	}
	return v << shift;
}

/* --max-tasks: 0 (none), or 2 (the init and the program) to the kernel's
 * most pids. */
static uint64_t parse_cap_tasks(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 1 || v > 4194304)
		bad_usage("--max-tasks must be a number from 2 to 4194304, or 0 or off (none), not '%s'", s);
	return v;
}

/* --max-memory: 0 (none), or 16M (the dynamic loader and this allocator
 * start in less, little else does) to 64T. */
static uint64_t parse_cap_memory(const char *s)
{
	uint64_t v = parse_size(s, "--max-memory", "bytes like 512M or 4G, or 0 or off (none)", 0, 64ULL << 40);
	if (v != 0 && v < (16ULL << 20))
		bad_usage("--max-memory must be at least 16M, or 0 or off (none), not '%s'", s);
	return v;
}

/* A ring's size for a --window: a power of two of at least 64 KiB. */
static size_t ring_size(unsigned long long bytes)
{
	size_t ring = 64 << 10;
	while (ring < bytes)
		ring <<= 1;
	return ring;
}

/* NAME beside our own executable (the build tree) if it is there with
 * mode (R_OK, X_OK), else in the installed directory dir. */
static const char *find_beside(const char *name, int mode, const char *dir)
{
	char path[PATH_MAX], self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		snprintf(path, sizeof path, "%s/%s", dirname(self), name);
		if (access(path, mode) == 0)
			return strdup(path);
	}
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return strdup(path);
}

/* diehard-init beside us or installed; NULL: the sandbox's init stays a
 * copy of diehard. */
static const char *find_init(void)
{
	const char *p = find_beside("diehard-init", X_OK, DIEHARD_LIBEXECDIR);
	return p != NULL && access(p, X_OK) == 0 ? p : NULL;
}

/* libdiehard.so beside our own executable (the build tree), else installed. */
static const char *find_allocator(void)
{
	return find_beside("libdiehard.so", R_OK, DIEHARD_LIBDIR);
}

/* The allocator must be ours (elfcheck.h): a wrong one would run every
 * replica on glibc's malloc and make every run agree. Then its absolute
 * path, as LD_PRELOAD takes it. */
static const char *check_allocator(const char *path)
{
	char why[160];
	if (!elfcheck_allocator(path, why, sizeof why))
		fatal(EXIT_INTERNAL, "the allocator %s %s", path, why);
	char *abs = realpath(path, NULL);
	if (abs == NULL)
		fatal(EXIT_INTERNAL, "the allocator %s cannot be read: %s", path, strerror(errno));
	if (strchr(abs, ':') != NULL || strchr(abs, ' ') != NULL)
		fatal(EXIT_INTERNAL, "the allocator's path %s cannot be preloaded (it has ':' or ' ')", abs);
	return abs;
}

/* Descriptors 0-2 closed when we start would be taken by our own (the
 * loop's signal pipe on 1-2 reads our error messages back as signals):
 * each closed one becomes /dev/null, as daemons do. Before anything else,
 * stdio included. Without a stderr the message is lost; the status is not. */
static void reserve_std_fds(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int got = open("/dev/null", O_RDWR);
		if (got != fd)
			fatal(EXIT_INTERNAL, "cannot open /dev/null for the closed fd %d: %s", fd,
			      got < 0 ? strerror(errno) : "another fd was free first");
	}
}

/* The report file, opened (created or truncated) before anything runs, so
 * that its errors come first and the run's end cannot block on it: a FIFO
 * with no reader is refused (ENXIO of a non-blocking open), then writes
 * block again as a file's do. */
static int open_report(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
	if (fd < 0 && errno == ENXIO)
		fatal(EXIT_INTERNAL, "the report %s is a FIFO that has no reader", path);
	if (fd < 0)
		fatal(EXIT_INTERNAL, "cannot write the report %s: %s", path, strerror(errno));
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
		fatal(EXIT_INTERNAL, "the report %s: fcntl: %s", path, strerror(errno));
	return fd;
}

/* libevent ends the process with exit(1) when it cannot go on (a
 * socketpair refused for lack of fds while the loop is built); its log
 * callback (supervisor.c) has said why in one line by then. Our own
 * failures exit 125. */
static void libevent_fatal(int err)
{
	(void)err;
	exit(EXIT_INTERNAL);
}

/* Descriptors a run needs to start its replicas, measured (ulimit -n at
 * which `diehard -k K` just starts): per replica, while all are being
 * started at once, both ends of its three pipes and its report socket,
 * sandboxed its init's status pipe, virtualized its seccomp listener, with
 * a private network its init's socket channel; ten
 * for the loop, the arena, the input log; the report file; those already
 * open. The
 * supervisor raises its soft limit to the hard one, so the hard one counts.
 * Short of it, a run would fail half-started with a message from whichever
 * part ran out first: one line now instead. A large limit is not counted. */
static void check_fd_limit(const struct options *o)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		fatal(EXIT_INTERNAL, "getrlimit: %s", strerror(errno));
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096)
		return;
	unsigned long open_now = 0;
	for (int fd = 0; fd < (int)rl.rlim_max; fd++)
		open_now += fcntl(fd, F_GETFD) >= 0;
	unsigned long per = 7UL + (o->sandbox != SANDBOX_OFF) + o->virtualize + (o->net == NET_PRIVATE);
	unsigned long need = open_now + 10 + per * o->k + (o->report_path != NULL);
	if (rl.rlim_max < need)
		fatal(EXIT_INTERNAL, "too few file descriptors: -k %u needs %lu, the limit (ulimit -n) is %lu", o->k,
		      need, (unsigned long)rl.rlim_max);
}

int main(int argc, char **argv)
{
	reserve_std_fds();
	enum { OPT_IDLE = 256, OPT_TIMEOUT, OPT_WINDOW, OPT_INPUT_LOG, OPT_NO_VIRTUALIZE, OPT_NO_FAST_CLOCKS, OPT_LANES, OPT_NO_LANES, OPT_RESPAWNS, OPT_NO_RESPAWN,
	       OPT_RESPAWN_RATE, OPT_CALL_LOG, OPT_SANDBOX, OPT_NET, OPT_FILES, OPT_SHARE, OPT_CI, OPT_RECORD, OPT_STOP_TIMEOUT, OPT_CONTROL,
	       OPT_CONN_LOG, OPT_MAX_TASKS, OPT_MAX_MEMORY, OPT_MIN_VOTERS, OPT_STATELESS, OPT_DURABLE, OPT_STRICT_ORDER, OPT_SERIAL_CLIENTS };
	static const struct option longopts[] = {
		{ "replicas", required_argument, NULL, 'k' }, { "allocator", required_argument, NULL, 'a' },
		{ "report", required_argument, NULL, 'r' },   { "verbose", no_argument, NULL, 'v' },
		{ "idle", required_argument, NULL, OPT_IDLE }, { "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "window", required_argument, NULL, OPT_WINDOW }, { "help", no_argument, NULL, 'h' },
		{ "input-log", required_argument, NULL, OPT_INPUT_LOG },
		{ "conn-log", required_argument, NULL, OPT_CONN_LOG },
		{ "max-tasks", required_argument, NULL, OPT_MAX_TASKS },
		{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
		{ "no-virtualize", no_argument, NULL, OPT_NO_VIRTUALIZE },
		{ "no-fast-clocks", no_argument, NULL, OPT_NO_FAST_CLOCKS },
		{ "lanes", no_argument, NULL, OPT_LANES },
		{ "no-lanes", no_argument, NULL, OPT_NO_LANES },
		{ "respawns", required_argument, NULL, OPT_RESPAWNS },
		{ "no-respawn", no_argument, NULL, OPT_NO_RESPAWN },
		{ "respawn-rate", required_argument, NULL, OPT_RESPAWN_RATE },
		{ "min-voters", required_argument, NULL, OPT_MIN_VOTERS },
		{ "stateless", no_argument, NULL, OPT_STATELESS },
		{ "durable", no_argument, NULL, OPT_DURABLE },
		{ "strict-order", no_argument, NULL, OPT_STRICT_ORDER },
		{ "serial-clients", no_argument, NULL, OPT_SERIAL_CLIENTS },
		{ "call-log", required_argument, NULL, OPT_CALL_LOG },
		{ "sandbox", required_argument, NULL, OPT_SANDBOX },
		{ "net", required_argument, NULL, OPT_NET },
		{ "files", required_argument, NULL, OPT_FILES },
		{ "share", required_argument, NULL, OPT_SHARE },
		{ "ci", no_argument, NULL, OPT_CI },
		{ "record", required_argument, NULL, OPT_RECORD },
		{ "stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "version", no_argument, NULL, 'V' },         { NULL, 0, NULL, 0 },
	};
	struct options o = { .k = 3, .report_fd = -1, .idle_ms = 50, .straggler_ms = 10000, .stop_ms = 5000,
			     .window = 1 << 20,
			     .input_log = (size_t)64 << 20, .conn_log = (size_t)64 << 20, .virtualize = true, .fast_clocks = true, .lanes = true, .respawns = 16, .respawn_rate = 30,
			     .call_log = (size_t)512 << 10, .max_tasks = CAPS_DEFAULT, .max_memory = CAPS_DEFAULT };
	const char *allocator = NULL;
	bool k_given = false, net_given = false;
	int c;
	event_set_fatal_callback(libevent_fatal);
	/* The service manager's variables are diehard's alone (svcenv.h). */
	svcenv_capture();
	/* diehard replay ...: a program named replay runs as diehard -- replay. */
	if (argc > 1 && strcmp(argv[1], "replay") == 0)
		return replay_main(argc - 1, argv + 1, find_init());
	if (argc > 1 && (strcmp(argv[1], "status") == 0 || strcmp(argv[1], "events") == 0))
		return ctl_main(argc - 1, argv + 1);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:k:a:r:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			o.k = (unsigned)parse_number(optarg, "-k", 1, VOTER_MAX);
			k_given = true;
			break;
		case OPT_CI:
			o.ci = true;
			break;
		case OPT_RECORD:
			if (optarg[0] == '\0')
				bad_usage("%s", "--record needs a file name");
			o.record_path = optarg;
			break;
		case OPT_CONTROL:
			if (optarg[0] == '\0')
				bad_usage("%s", "--control needs a socket path");
			o.control_path = optarg;
			break;
		case 'a':
			allocator = optarg;
			break;
		case 'r':
			o.report_path = optarg;
			break;
		case 'v':
			log_set_verbose(true);
			break;
		case OPT_IDLE:
			o.idle_ms = (unsigned)parse_number(optarg, "--idle", 1, 600000);
			break;
		case OPT_TIMEOUT:
			o.straggler_ms = parse_ms(optarg, "--timeout");
			break;
		case OPT_STOP_TIMEOUT:
			o.stop_ms = parse_ms(optarg, "--stop-timeout");
			break;
		case OPT_WINDOW:
			o.window = ring_size(parse_size(optarg, "--window", "bytes like 1M or 65536", 1, 1ULL << 30));
			break;
		case OPT_MAX_TASKS:
			o.max_tasks = strcmp(optarg, "off") == 0 ? 0 : parse_cap_tasks(optarg);
			break;
		case OPT_MAX_MEMORY:
			o.max_memory = strcmp(optarg, "off") == 0 ? 0 : parse_cap_memory(optarg);
			break;
		case OPT_CONN_LOG:
			o.conn_log = parse_size(optarg, "--conn-log", "bytes like 64M or 0 (none)", 0, 64ULL << 30);
			break;
		case OPT_INPUT_LOG:
			o.input_log = parse_size(optarg, "--input-log", "bytes like 64M or 0 (none)", 0, 64ULL << 30);
			break;
		case OPT_CALL_LOG:
			o.call_log = parse_size(optarg, "--call-log", "a number of entries like 512K or 1000", 1,
					       64ULL << 20);
			break;
		case OPT_RESPAWNS:
			o.respawns = (unsigned)parse_number(optarg, "--respawns", 0, 1000000);
			break;
		case OPT_NO_RESPAWN:
			o.respawns = 0;
			break;
		case OPT_RESPAWN_RATE:
			o.respawn_rate = (unsigned)parse_number(optarg, "--respawn-rate", 1, 1000000);
			break;
		case OPT_STATELESS:
			o.stateless = true;
			break;
		case OPT_DURABLE:
			o.durable = true;
			break;
		case OPT_STRICT_ORDER:
			o.strict_order = true;
			break;
		case OPT_SERIAL_CLIENTS:
			o.serial_clients = true;
			break;
		case OPT_MIN_VOTERS:
			o.min_voters = (unsigned)parse_number(optarg, "--min-voters", 1, 64);
			break;
		case OPT_SANDBOX:
			if (strcmp(optarg, "auto") == 0)
				o.sandbox = SANDBOX_AUTO;
			else if (strcmp(optarg, "on") == 0)
				o.sandbox = SANDBOX_ON;
			else if (strcmp(optarg, "off") == 0)
				o.sandbox = SANDBOX_OFF;
			else
				bad_usage("--sandbox must be auto, on or off, not '%s'", optarg);
			break;
		case OPT_FILES:
			if (strcmp(optarg, "private") == 0)
				o.files = FILES_PRIVATE;
			else if (strcmp(optarg, "shared") == 0)
				o.files = FILES_SHARED;
			else
				bad_usage("--files must be private or shared, not '%s'", optarg);
			o.files_given = true;
			break;
		case OPT_SHARE: {
			struct stat st;
			if (stat(optarg, &st) != 0 || !S_ISDIR(st.st_mode))
				bad_usage("--share needs an existing directory, not '%s'", optarg);
			if (o.nshare == sizeof o.share / sizeof o.share[0])
				bad_usage("--share: at most 8 directories ('%s' is one more)", optarg);
			o.share[o.nshare++] = optarg;
			break;
		}
		case OPT_NET:
			if (strcmp(optarg, "private") == 0)
				o.net = NET_PRIVATE;
			else if (strcmp(optarg, "host") == 0)
				o.net = NET_HOST;
			else
				bad_usage("--net must be private or host, not '%s'", optarg);
			net_given = o.net == NET_PRIVATE;
			break;
		case OPT_NO_FAST_CLOCKS:
			o.fast_clocks = false;
			break;
		case OPT_LANES: /* the default; kept for scripts that ask */
			o.lanes = true;
			break;
		case OPT_NO_LANES:
			o.lanes = false;
			break;
		case OPT_NO_VIRTUALIZE:
			o.virtualize = false;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			printf("diehard %s\n", DIEHARD_VERSION);
			return 0;
		case ':':
			bad_usage("option %s needs a value", argv[optind - 1]);
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		bad_usage("%s", "no command given");
	if (o.min_voters > o.k) {
		char n[64];
		snprintf(n, sizeof n, "%u is more than the %u replicas (-k)", o.min_voters, o.k);
		bad_usage("--min-voters %s", n);
	}
	if (o.stateless && o.durable)
		bad_usage("%s", "--stateless and --durable: a server keeps no state, or keeps it in its files; not both");
	if (o.ci && k_given && o.k < 2)
		bad_usage("%s", "--ci needs two replicas or more (-k 2 detects, -k 3 also masks)");
	/* A private network is the sandbox's (none: the host's); its proxy
	 * learns of the replicas' listen() calls through the seccomp
	 * listener, which --no-virtualize takes away. */
	if (o.sandbox == SANDBOX_OFF)
		o.net = NET_HOST;
	if (!o.virtualize && o.net == NET_PRIVATE && net_given)
		bad_usage("%s", "--net private needs the seccomp listener (not with --no-virtualize)");
	if (!o.virtualize)
		o.net = NET_HOST;
	if (o.serial_clients && o.net == NET_HOST)
		bad_usage("%s", "--serial-clients orders what diehard's proxy feeds the replicas: not with --net host, "
				"--sandbox off or --no-virtualize");
	o.record = o.ci || o.record_path != NULL;
	if (o.record_path != NULL) {
		/* Written at the end: its directory must take it. And it
		 * replaces FILE by a rename (recording.c): a device, a FIFO
		 * or a directory there (/dev/null, /dev/stdout) would be
		 * replaced, not written to. */
		char *copy = strdup(o.record_path);
		if (copy == NULL || access(dirname(copy), W_OK | X_OK) != 0)
			fatal(EXIT_INTERNAL, "cannot write the recording %s: %s", o.record_path,
			      copy ? strerror(errno) : "out of memory");
		free(copy);
		struct stat st;
		if (stat(o.record_path, &st) == 0 && !S_ISREG(st.st_mode))
			fatal(EXIT_INTERNAL, "cannot write the recording %s: not a regular file (a recording replaces "
					     "the file)", o.record_path);
	}
	o.argv = argv + optind;
	o.allocator = check_allocator(allocator ? allocator : find_allocator());
	o.init_path = find_init();
	char *path;
	int code = spawn_resolve(o.argv[0], &path);
	if (code != 0)
		return code;
	/* Said here, before any replica starts, rather than as k replicas
	 * killed by SIGSYS at their first call. */
	char why[PATH_MAX];
	if (elfcheck_foreign_entry(path, why, sizeof why)) {
		log_warn("%s %s: diehard's seccomp filter kills every system call made through the i386 or x32 "
			 "entry, so it cannot run as replicas",
			 path, why);
		return EXIT_CANNOT_EXEC;
	}
	o.path = path;
	check_fd_limit(&o);
	if (o.control_path == NULL)
		o.control_path = control_default_path();
	if (o.control_path != NULL)
		control_listen(o.control_path);
	/* The last check: a command line refused above leaves an old report
	 * as it was. */
	if (o.report_path != NULL)
		o.report_fd = open_report(o.report_path);
	return supervisor_run(&o);
}
