/* log.h — the supervisor's messages on stderr.
 *
 * Every line starts with "diehard: ". log_event lines (one per event: spawn,
 * divergence, kill, exit) appear only with -v; log_warn always; fatal prints
 * and exits with the given code (125 for our own failures, see exitcode.h).
 */
#ifndef DIEHARD_LOG_H
#define DIEHARD_LOG_H

#include <stdbool.h>

enum log_kind { LOG_EVENT, LOG_WARN };

/* fn(arg, kind, line) sees every line log_event and log_warn produce,
 * whether -v prints it or not (the control socket's events, control.h);
 * line has no "diehard: " and no newline. A line logged from inside fn
 * is printed but not passed to it again. NULL: none. */
typedef void log_hook_fn(void *arg, enum log_kind kind, const char *line);
void log_set_hook(log_hook_fn *fn, void *arg);
void log_set_verbose(bool on);
/* stderr is the journal (JOURNAL_STREAM): every line gets a syslog priority
 * prefix, <3> for fatal, <4> for log_warn, <5> for log_event. */
void log_set_journal(bool on);
bool log_verbose(void);
void log_event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
