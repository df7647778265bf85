/* msg.h — one-line messages on stderr without stdio or allocation.
 *
 * The allocator runs inside programs that may be mid-printf or mid-fork when
 * it has something to say, so it formats into a fixed buffer and write(2)s the
 * line in one call. Text past the buffer is dropped, never overflowed.
 */
#ifndef DIEHARD_MSG_H
#define DIEHARD_MSG_H

#include <stddef.h>
#include <stdint.h>

struct msg {
	char buf[384];
	size_t len;
};

void msg_str(struct msg *m, const char *s);
void msg_u64(struct msg *m, uint64_t v);
/* " NAME=V": one field of a statistics line (name given with its space
 * and '='). */
void msg_field(struct msg *m, const char *name, uint64_t v);
/* v in hexadecimal, zero-padded to digits (1..16). */
void msg_hex(struct msg *m, uint64_t v, int digits);
/* Ends the line and writes it to stderr (or to fd). */
void msg_send(struct msg *m);
void msg_send_to(struct msg *m, int fd);

#endif
