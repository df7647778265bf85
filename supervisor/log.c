/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool verbose;
static bool journal; /* stderr is the journal: lines carry <N> priorities */

void log_set_journal(bool on)
{
	journal = on;
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

static void vsay(int prio, const char *fmt, va_list ap)
{
	/* One fprintf per line, so lines from a forking child never interleave
	 * mid-line with ours. */
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	if (journal)
		fprintf(stderr, "<%d>diehard: %s\n", prio, line);
	else
		fprintf(stderr, "diehard: %s\n", line);
}

void log_event(const char *fmt, ...)
{
	if (!verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay(PRIO_NOTICE, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(PRIO_WARNING, fmt, ap);
	va_end(ap);
}

void fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(PRIO_ERR, fmt, ap);
	va_end(ap);
	exit(code);
}
