/* input.c — stdin, read once into a ring shared by all replicas, each with
 * its own offset into it. Reading stops while the ring is full, so a replica
 * that does not read holds the others back instead of making us grow (and is
 * killed as a straggler if the majority is left waiting). Pipes, terminals
 * and sockets are polled; files and devices are read whenever there is room. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "spawn.h"
#include "sup.h"


/* The input ring may drop what every replica still reading from it has
 * consumed. Replicas fed from the input log (replacements catching up)
 * never hold it back. */
static void input_advance_head(struct sup *S)
{
	size_t low = S->in->tail;
	for (unsigned i = 0; i < S->nslots; i++)
		if (S->r[i].in_fd >= 0 && !S->r[i].log_fed && S->r[i].in_off < low)
			low = S->r[i].in_off;
	ring_consume_to(S->in, low);
}


/* Writes replica r what it has not had yet: a replacement from the input
 * log until it votes and has reached the ring's oldest byte, then (like the
 * others) from the ring. */
static void write_input(struct sup *S, struct replica *r)
{
	if (r->log_fed && r->live && r->in_off >= S->in->head)
		r->log_fed = false;
	while (r->in_fd >= 0 && r->in_off < S->in->tail) {
		size_t want = S->in->tail - r->in_off;
		ssize_t n = r->log_fed ? inputlog_send(S->inlog, r->in_off, r->in_fd, want)
				       : write(r->in_fd, ring_at(S->in, r->in_off), want);
		if (n > 0) {
			r->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0 && errno == ENODATA && r->log_fed) {
			replica_kill(S, r, "the input log no longer holds the input it still needed (--input-log)");
			return;
		}
		/* EPIPE: the program closed its stdin or died; it reads no more. */
		replica_close_input(r);
	}
	if (r->in_fd >= 0 && r->in_off == S->in->tail && S->stdin_eof)
		replica_close_input(r);
}


void input_update(struct sup *S)
{
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (r->in_fd < 0)
			continue;
		if (r->in_off < S->in->tail)
			event_add(r->in_ev, NULL);
		else
			event_del(r->in_ev);
	}
	input_advance_head(S);
	bool want = !S->stdin_eof && ring_free(S->in) > 0;
	if (S->stdin_ev == NULL)
		return;
	if (!S->stdin_pollable) {
		if (want && !event_pending(S->stdin_ev, EV_READ, NULL))
			event_active(S->stdin_ev, EV_READ, 0);
	} else if (want && S->stdin_paused) {
		event_add(S->stdin_ev, NULL);
		S->stdin_paused = false;
	} else if (!want && !S->stdin_paused) {
		event_del(S->stdin_ev);
		S->stdin_paused = true;
	}
}


void input_on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct input_arg *a = arg;
	write_input(a->S, a->r);
	input_update(a->S);
}


void input_on_stdin(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sup *S = arg;
	size_t room = ring_free(S->in);
	if (room == 0) {
		input_update(S);
		return;
	}
	ssize_t n = read(STDIN_FILENO, ring_at(S->in, S->in->tail), room);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		log_warn("reading stdin: %s", strerror(errno));
		n = 0;
	}
	if (n == 0) {
		S->stdin_eof = true;
		if (S->stdin_pollable)
			event_del(S->stdin_ev);
		S->stdin_paused = true;
	} else {
		inputlog_append(S->inlog, ring_at(S->in, S->in->tail), (size_t)n);
		S->in->tail += (size_t)n;
		report_input(S->report, (size_t)n);
	}
	for (unsigned i = 0; i < S->nslots; i++)
		write_input(S, &S->r[i]);
	input_update(S);
}

/* Starts reading stdin. A closed stdin is an empty input. Pipes, terminals
 * and sockets are polled; files and devices epoll refuses are read whenever
 * the input ring has room. */
void input_start(struct sup *S)
{
	if (fcntl(STDIN_FILENO, F_GETFL) < 0) {
		S->stdin_eof = true;
		for (unsigned i = 0; i < S->nslots; i++)
			replica_close_input(&S->r[i]);
	} else {
		struct stat st;
		S->stdin_pollable = fstat(STDIN_FILENO, &st) == 0 &&
				    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(STDIN_FILENO));
		if (S->stdin_pollable) {
			S->stdin_ev = event_new(S->base, STDIN_FILENO, EV_READ | EV_PERSIST, input_on_stdin, S);
			if (S->stdin_ev == NULL || event_add(S->stdin_ev, NULL) != 0)
				fatal(EXIT_INTERNAL, "cannot watch stdin");
		} else {
			S->stdin_ev = event_new(S->base, -1, 0, input_on_stdin, S);
			if (S->stdin_ev == NULL)
				fatal(EXIT_INTERNAL, "cannot watch stdin");
			S->stdin_paused = true;
			input_update(S);
		}
	}
}
