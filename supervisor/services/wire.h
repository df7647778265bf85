/* wire.h — the control socket's framing and messages (proto/control.proto,
 * docs/CONTROL.md): a 4-byte big-endian length, then one protobuf message
 * of at most WIRE_MAX bytes. Pure: no I/O, so the server (control.c), the
 * client (ctl.c) and the unit test share one decoder of outside bytes. */
#ifndef DIEHARD_WIRE_H
#define DIEHARD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"

#define WIRE_VERSION 1u
#define WIRE_HEADER 4u
#define WIRE_MAX ((size_t)64 << 10)

enum wire_frame {
	WIRE_MORE,    /* not a whole frame yet */
	WIRE_FRAME,   /* a whole frame: *len bytes of message after the header */
	WIRE_TOO_BIG, /* the length says more than WIRE_MAX: nothing after it can be trusted */
};

/* What the n bytes at p start with. */
enum wire_frame wire_frame(const uint8_t *p, size_t n, size_t *len);

/* m framed, in a malloc'ed buffer of *n bytes; NULL when it is too big or
 * memory is short. */
uint8_t *wire_pack(const ProtobufCMessage *m, size_t *n);

/* The message in a frame's n bytes, checked: it decodes, its version is
 * WIRE_VERSION and it says what it is. NULL otherwise, with why (a line
 * for the other side) in why. Free with the generated free_unpacked. */
Diehard__ControlRequest *wire_decode_request(const uint8_t *p, size_t n, char *why, size_t size);
Diehard__ControlResponse *wire_decode_response(const uint8_t *p, size_t n, char *why, size_t size);

#endif
