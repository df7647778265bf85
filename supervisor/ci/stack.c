/* stack.c — see stack.h. */
#include "stack.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "utf8.h"

json_t *stack_jstr(const char *s)
{
	size_t n;
	char *esc = utf8_escape(s, strlen(s), &n);
	json_t *j = esc ? json_stringn(esc, n) : NULL;
	free(esc);
	return j ? j : json_null();
}

json_t *stack_json(const struct trace_stack *st)
{
	json_t *a = json_array();
	for (size_t i = 0; a != NULL && i < st->nframes; i++) {
		const struct frame *f = &st->frames[i];
		char addr[32];
		snprintf(addr, sizeof addr, "0x%" PRIx64, f->addr - f->base);
		json_t *o = json_pack("{s:s,s:o}", "offset", addr, "module", stack_jstr(f->module ? f->module : "?"));
		if (f->function)
			json_object_set_new(o, "function", stack_jstr(f->function));
		if (f->file) {
			json_object_set_new(o, "file", stack_jstr(f->file));
			json_object_set_new(o, "line", json_integer(f->line));
		}
		json_array_append_new(a, o);
	}
	return a ? a : json_null();
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

void stack_print(const struct trace_stack *st)
{
	for (size_t i = 0; i < st->nframes; i++) {
		const struct frame *f = &st->frames[i];
		char where[PATH_MAX + 32];
		if (f->file)
			snprintf(where, sizeof where, "%s:%d", f->file, f->line);
		else
			snprintf(where, sizeof where, "%s", base_name(f->module ? f->module : "?"));
		log_warn("   %s 0x%" PRIx64 ": %s (%s)", i == 0 ? "at" : "by", f->addr - f->base,
			 f->function ? f->function : "???", where);
	}
	if (st->nframes == 0)
		log_warn("   (no stack was recorded)");
}

static bool system_module(const char *m)
{
	static const char *const names[] = { "libc.so", "ld-linux", "libdiehard.so" };
	const char *b = base_name(m ? m : "");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strncmp(b, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

const struct frame *stack_top(const struct trace_stack *st)
{
	for (size_t i = 0; i < st->nframes; i++)
		if (!system_module(st->frames[i].module))
			return &st->frames[i];
	return st->nframes > 0 ? &st->frames[0] : NULL;
}

void stack_where(const struct frame *f, char *buf, size_t n)
{
	if (f == NULL)
		snprintf(buf, n, "(no stack)");
	else if (f->file)
		snprintf(buf, n, "%s (%s:%d)", f->function ? f->function : "???", base_name(f->file), f->line);
	else
		snprintf(buf, n, "%s (%s+0x%" PRIx64 ")", f->function ? f->function : "???",
			 base_name(f->module ? f->module : "?"), f->addr - f->base);
}

/* GitHub Actions: a workflow command, its text escaped as the runner wants.
 * On stderr: the runner reads commands from both streams of a step, and
 * stdout is the test's own output (a file, a pipe to a checker). */
void stack_annotate(const struct trace_stack *st, const char *msg)
{
	const char *ga = getenv("GITHUB_ACTIONS");
	if (ga == NULL || strcmp(ga, "true") != 0)
		return;
	const struct frame *f = NULL;
	for (size_t i = 0; i < st->nframes && f == NULL; i++)
		if (st->frames[i].file != NULL && st->frames[i].line > 0)
			f = &st->frames[i];
	char esc[1024];
	size_t o = 0;
	for (const char *p = msg; *p && o + 4 < sizeof esc; p++) {
		if (*p == '%' || *p == '\r' || *p == '\n') {
			o += (size_t)snprintf(esc + o, sizeof esc - o, "%%%02X", (unsigned char)*p);
		} else {
			esc[o++] = *p;
		}
	}
	esc[o] = '\0';
	if (f == NULL) {
		fprintf(stderr, "::error title=diehard --ci::%s\n", esc);
	} else {
		const char *file = f->file, *ws = getenv("GITHUB_WORKSPACE");
		size_t wl = ws ? strlen(ws) : 0;
		if (ws && wl > 0 && strncmp(file, ws, wl) == 0 && file[wl] == '/')
			file += wl + 1;
		char prop[PATH_MAX];
		size_t q = 0;
		for (const char *p = file; *p && q + 4 < sizeof prop; p++) {
			if (*p == '%' || *p == ':' || *p == ',' || *p == '\r' || *p == '\n')
				q += (size_t)snprintf(prop + q, sizeof prop - q, "%%%02X", (unsigned char)*p);
			else
				prop[q++] = *p;
		}
		prop[q] = '\0';
		fprintf(stderr, "::error file=%s,line=%d,title=diehard --ci::%s\n", prop, f->line, esc);
	}
	fflush(stderr);
}
