/* entropy.h — what an open of /dev/urandom or /dev/random in a replica
 * gets: the read end of a pipe that yields the run's shared keystream for
 * that open (chacha.h), kept full by the loop until the reader closes it.
 * The n-th such open in every replica reads the same bytes. Unlike the
 * device, the fd is a pipe (fstat says FIFO, lseek fails) and a reader that
 * outruns the loop may get a short read; docs/NONDETERMINISM.md says so. */
#ifndef DIEHARD_ENTROPY_H
#define DIEHARD_ENTROPY_H

#include <event2/event.h>
#include <stdint.h>

#include "chacha.h"

struct entropy;

struct entropy *entropy_new(struct event_base *base, const uint8_t key[CHACHA_KEY_BYTES]);
void entropy_free(struct entropy *E);

/* A new pipe for keystream (domain, n), already holding its first page.
 * Returns the read end (close-on-exec, O_NONBLOCK if nonblocking) for the
 * caller to hand over and close, or -1 with errno. *open counts the pipes
 * alive for the caller: one more now, one less when its reader is gone. */
int entropy_open(struct entropy *E, uint32_t domain, uint64_t n, int nonblocking, unsigned *open);

#endif
