/* replay.c — see replay.h. The replay is an ordinary supervised run of one
 * replica: the supervisor takes its seed, fill and clock and random answers
 * from the recording (replica.c, virt.c), its stdin is a memfd holding the
 * recorded input, and the environment and working directory are the
 * recording's. At its end ci.c compares what it wrote with the recorded
 * digests and says whether the replay is exact. */
#include "replay.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elfcheck.h"
#include "exitcode.h"
#include "log.h"
#include "sandbox.h"
#include "supervisor.h"

static const char usage[] =
	"usage: diehard replay FILE [--replica N] [--gdb]\n"
	"Runs replica N of the run recorded in FILE (diehard --record, or what --ci wrote)\n"
	"again, exactly: its seed and heap fill, the recorded command, environment, working\n"
	"directory, input, clock and random values. Its output goes to stdout and stderr;\n"
	"exit status: the replica's; 125 when FILE cannot be replayed.\n"
	"\n"
	"  --replica N       the replica (default: the first that left the vote, else 0)\n"
	"  --gdb             run it under gdb, stopped at its first instruction\n"
	"  --flip SPEC       invert the fill of some allocations (DIEHARD_FLIP)\n"
	"  --trace FILE      the allocator's trace file (DIEHARD_TRACE)\n"
	"  --trace-at SPEC   record one allocation's stack (DIEHARD_TRACE_AT)\n"
	"  --quiet           no verdict line at the end\n";

static _Noreturn void bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "diehard replay: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(EXIT_INTERNAL);
}

/* A spec the allocator parses is only passed through: refuse what would
 * break the environment line. */
static const char *spec_arg(const char *s, const char *what)
{
	if (s[0] == '\0' || strlen(s) > 200 || strpbrk(s, "\n=") != NULL)
		bad("%s must be a short allocator spec", what);
	return s;
}

static char *cstr(const ProtobufCBinaryData *b)
{
	char *s = malloc(b->len + 1);
	if (s == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	memcpy(s, b->data, b->len);
	s[b->len] = '\0';
	return s;
}

void replay_debugger(const struct replay *rp, pid_t pid)
{
	char p[32];
	snprintf(p, sizeof p, "%d", (int)pid);
	log_warn("replica %u is pid %d, stopped before its exec: gdb attaches and stops it at its first "
		 "instruction (catch exec); set breakpoints, then continue", rp->rep->id, (int)pid);
	pid_t g = fork();
	if (g < 0)
		fatal(EXIT_INTERNAL, "fork: %s", strerror(errno));
	if (g == 0) {
		/* gdb talks on diehard's stdin and stderr: the replica's stdout
		 * stays its own. */
		if (dup2(rp->gdb_stdin, STDIN_FILENO) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(EXIT_INTERNAL);
		execlp("gdb", "gdb", "-q", "-p", p, "-ex", "handle SIGSTOP nostop noprint nopass", "-ex", "catch exec", "-ex",
		       "continue", (char *)NULL);
		fprintf(stderr, "diehard replay: cannot run gdb: %s\n", strerror(errno));
		(void)kill(pid, SIGKILL);
		_exit(EXIT_CANNOT_EXEC);
	}
}

int replay_main(int argc, char **argv, const char *init_path)
{
	enum { OPT_REPLICA = 256, OPT_FLIP, OPT_TRACE, OPT_TRACE_AT, OPT_QUIET, OPT_GDB };
	static const struct option longopts[] = {
		{ "replica", required_argument, NULL, OPT_REPLICA }, { "flip", required_argument, NULL, OPT_FLIP },
		{ "trace", required_argument, NULL, OPT_TRACE },     { "trace-at", required_argument, NULL, OPT_TRACE_AT },
		{ "quiet", no_argument, NULL, OPT_QUIET },           { "gdb", no_argument, NULL, OPT_GDB },
		{ "help", no_argument, NULL, 'h' },                  { NULL, 0, NULL, 0 },
	};
	struct replay rp = { 0 };
	const char *replica = NULL;
	bool gdb = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_REPLICA:
			replica = optarg;
			break;
		case OPT_FLIP:
			rp.flip = spec_arg(optarg, "--flip");
			break;
		case OPT_TRACE:
			rp.trace = optarg;
			break;
		case OPT_TRACE_AT:
			rp.trace_at = spec_arg(optarg, "--trace-at");
			break;
		case OPT_QUIET:
			rp.quiet = true;
			break;
		case OPT_GDB:
			gdb = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			bad("option %s needs a value (try diehard replay --help)", argv[optind - 1]);
		default:
			bad("unknown option '%s' (try diehard replay --help)", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		bad("%s", optind >= argc ? "no recording given (try diehard replay --help)"
					 : "one recording at a time (try diehard replay --help)");
	const char *file = argv[optind];
	char why[256];
	Diehard__Recording *rec = recording_read(file, why, sizeof why);
	if (rec == NULL) {
		fprintf(stderr, "diehard replay: %s: %s\n", file, why);
		return EXIT_INTERNAL;
	}
	rp.rec = rec;
	if (replica != NULL) {
		char *end;
		errno = 0;
		unsigned long id = strtoul(replica, &end, 10);
		if (errno != 0 || end == replica || *end != '\0' || replica[0] == '-')
			bad("--replica must be a replica number, not '%s'", replica);
		for (size_t i = 0; i < rec->n_replicas; i++)
			if (rec->replicas[i]->id == id)
				rp.rep = rec->replicas[i];
		if (rp.rep == NULL)
			bad("the recording has no replica %s", replica);
	} else {
		rp.rep = rec->replicas[0];
		for (size_t i = 0; i < rec->n_replicas; i++)
			if (strcmp(rec->replicas[i]->verdict, "agreed") != 0) {
				rp.rep = rec->replicas[i];
				break;
			}
	}
	if (!rec->input_complete)
		bad("%s: the recording lost the start of the input (--input-log): it cannot be replayed", file);
	if (rec->virtualize && !rec->calls_complete)
		bad("%s: the recording lost early clock and random answers (--call-log): it cannot be replayed", file);

	/* The recorded world: environment, directory, input. */
	char *cwd = cstr(&rec->cwd);
	if (cwd[0] != '\0' && chdir(cwd) != 0) {
		fprintf(stderr, "diehard replay: cannot enter the recorded directory %s: %s\n", cwd, strerror(errno));
		return EXIT_INTERNAL;
	}
	if (clearenv() != 0)
		fatal(EXIT_INTERNAL, "clearenv failed");
	for (size_t i = 0; i < rec->n_env; i++)
		if (putenv(cstr(&rec->env[i])) != 0)
			fatal(EXIT_INTERNAL, "putenv: %s", strerror(errno));
	rp.gdb_stdin = -1;
	if (gdb && (rp.gdb_stdin = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)) < 0)
		fatal(EXIT_INTERNAL, "cannot keep stdin for gdb: %s", strerror(errno));
	int in = memfd_create("diehard-replay-input", MFD_CLOEXEC);
	if (in < 0)
		fatal(EXIT_INTERNAL, "memfd_create: %s", strerror(errno));
	size_t done = 0;
	while (done < rec->input.len) {
		ssize_t w = write(in, rec->input.data + done, rec->input.len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fatal(EXIT_INTERNAL, "cannot hold the recorded input: %s", strerror(errno));
		done += (size_t)w;
	}
	if (lseek(in, 0, SEEK_SET) != 0 || dup2(in, STDIN_FILENO) != STDIN_FILENO)
		fatal(EXIT_INTERNAL, "cannot give the replica its input: %s", strerror(errno));
	close(in);

	char **args = calloc(rec->n_argv + 1, sizeof *args);
	if (args == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (size_t i = 0; i < rec->n_argv; i++)
		args[i] = cstr(&rec->argv[i]);
	char *alloc = cstr(&rec->allocator);
	if (!elfcheck_allocator(alloc, why, sizeof why))
		fatal(EXIT_INTERNAL, "the recorded allocator %s %s", alloc, why);
	rp.gdb = gdb;
	struct options o = { .k = 1, .report_fd = -1, .idle_ms = 50, .straggler_ms = 10000, .window = 1 << 20,
			     .input_log = (size_t)64 << 20, .virtualize = rec->virtualize, .respawns = 0,
			     .respawn_rate = 30, .call_log = (size_t)512 << 10,
			     .sandbox = rec->sandboxed ? SANDBOX_ON : SANDBOX_OFF, .init_path = init_path,
			     .argv = args, .path = cstr(&rec->path), .allocator = alloc, .record = true, .replay = &rp,
			     .max_tasks = CAPS_DEFAULT, .max_memory = CAPS_DEFAULT };
	return supervisor_run(&o);
}
