/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool verbose;

void log_set_verbose(bool on)
{
	verbose = on;
}

bool log_verbose(void)
{
	return verbose;
}

static void vsay(const char *fmt, va_list ap)
{
	/* One fprintf per line, so lines from a forking child never interleave
	 * mid-line with ours. */
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	fprintf(stderr, "diehard: %s\n", line);
}

void log_event(const char *fmt, ...)
{
	if (!verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	exit(code);
}
