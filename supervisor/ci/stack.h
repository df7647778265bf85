/* stack.h — a recorded stack (trace.h: raw frames a replica wrote, once
 * symbolize.h has resolved them) shown to people and to programs: in the
 * JSON report, and memcheck's way on stderr. */
#ifndef DIEHARD_STACK_H
#define DIEHARD_STACK_H

#include <jansson.h>

#include "trace.h"

/* A JSON string of s, bytes that are not UTF-8 as \xNN (utf8.h). */
json_t *stack_jstr(const char *s);

/* The frames as report.schema.json's stack: offset, module, function,
 * file, line. */
json_t *stack_json(const struct trace_stack *st);

/* "at" the innermost frame, "by" the rest, one log_warn line each. */
void stack_print(const struct trace_stack *st);

/* The frame a one-line summary names: the first outside the C library,
 * the dynamic loader and libdiehard (the program's own code that made the
 * call), else the innermost; NULL for an empty stack. */
const struct frame *stack_top(const struct trace_stack *st);

/* "function (file:line)" of f, or its module's name and offset. */
void stack_where(const struct frame *f, char *buf, size_t n);

/* On GitHub Actions (GITHUB_ACTIONS=true): msg as an ::error workflow
 * command on stderr, at the first frame of st with a file and line (made
 * relative to GITHUB_WORKSPACE when inside it). Elsewhere nothing. */
void stack_annotate(const struct trace_stack *st, const char *msg);

#endif
