/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool verbose;
static bool journal; /* stderr is the journal: lines carry <N> priorities */
static log_hook_fn *hook;
static void *hook_arg;
static bool in_hook;

void log_set_journal(bool on)
{
	journal = on;
}

void log_set_hook(log_hook_fn *fn, void *arg)
{
	hook = fn;
	hook_arg = arg;
}

void log_set_verbose(bool on)
{
	verbose = on;
}

bool log_verbose(void)
{
	return verbose;
}

/* syslog priorities, as sd-daemon(3) prefixes them. */
enum { PRIO_ERR = 3, PRIO_WARNING = 4, PRIO_NOTICE = 5 };

/* Prints the line (print) with its priority when stderr is the journal,
 * and hands it to the hook (kind); the hook is not re-entered by what it
 * logs itself. */
static void vsay(bool print, int prio, enum log_kind kind, const char *fmt, va_list ap)
{
	/* One fprintf per line, so lines from a forking child never interleave
	 * mid-line with ours. */
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	if (print && journal)
		fprintf(stderr, "<%d>diehard: %s\n", prio, line);
	else if (print)
		fprintf(stderr, "diehard: %s\n", line);
	if (hook != NULL && !in_hook) {
		in_hook = true;
		hook(hook_arg, kind, line);
		in_hook = false;
	}
}

void log_event(const char *fmt, ...)
{
	/* Formatted only when someone reads it. */
	if (!verbose && hook == NULL)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay(verbose, PRIO_NOTICE, LOG_EVENT, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(true, PRIO_WARNING, LOG_WARN, fmt, ap);
	va_end(ap);
}

void fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	hook = NULL; /* the end: nobody is served any more */
	vsay(true, PRIO_ERR, LOG_WARN, fmt, ap);
	va_end(ap);
	exit(code);
}
