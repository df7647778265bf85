/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool verbose;
static log_hook_fn *hook;
static void *hook_arg;
static bool in_hook;

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

/* Prints the line (print) and hands it to the hook (kind); the hook is
 * not re-entered by what it logs itself. */
static void vsay(bool print, enum log_kind kind, const char *fmt, va_list ap)
{
	/* One fprintf per line, so lines from a forking child never interleave
	 * mid-line with ours. */
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	if (print)
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
	vsay(verbose, LOG_EVENT, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(true, LOG_WARN, fmt, ap);
	va_end(ap);
}

void fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	hook = NULL; /* the end: nobody is served any more */
	vsay(true, LOG_WARN, fmt, ap);
	va_end(ap);
	exit(code);
}
