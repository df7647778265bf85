/* wire.c — see wire.h. */
#include "wire.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum wire_frame wire_frame(const uint8_t *p, size_t n, size_t *len)
{
	if (n < WIRE_HEADER)
		return WIRE_MORE;
	size_t l = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
	if (l > WIRE_MAX)
		return WIRE_TOO_BIG;
	if (n - WIRE_HEADER < l)
		return WIRE_MORE;
	*len = l;
	return WIRE_FRAME;
}

uint8_t *wire_pack(const ProtobufCMessage *m, size_t *n)
{
	size_t l = protobuf_c_message_get_packed_size(m);
	if (l > WIRE_MAX)
		return NULL;
	uint8_t *buf = malloc(WIRE_HEADER + l);
	if (buf == NULL)
		return NULL;
	buf[0] = (uint8_t)(l >> 24);
	buf[1] = (uint8_t)(l >> 16);
	buf[2] = (uint8_t)(l >> 8);
	buf[3] = (uint8_t)l;
	if (protobuf_c_message_pack(m, buf + WIRE_HEADER) != l) {
		free(buf);
		return NULL;
	}
	*n = WIRE_HEADER + l;
	return buf;
}

Diehard__ControlRequest *wire_decode_request(const uint8_t *p, size_t n, char *why, size_t size)
{
	Diehard__ControlRequest *m = diehard__control_request__unpack(NULL, n, p);
	if (m == NULL) {
		snprintf(why, size, "not a control request (%zu bytes that do not decode)", n);
		return NULL;
	}
	if (m->version != WIRE_VERSION)
		snprintf(why, size, "protocol version %u is not supported (this diehard speaks %u)", m->version,
			 WIRE_VERSION);
	else if (m->what_case == DIEHARD__CONTROL_REQUEST__WHAT__NOT_SET)
		snprintf(why, size, "the request asks for nothing (status or events)");
	else
		return m;
	diehard__control_request__free_unpacked(m, NULL);
	return NULL;
}

/* Every replica's seed is what diehard sends: 32 lowercase hex digits
 * (ctl.c prints it as it is; a process that took the socket's place could
 * send a terminal's escape sequences there). */
static bool seeds_sound(const Diehard__RunStatus *st)
{
	for (size_t i = 0; st != NULL && i < st->n_replicas; i++) {
		const char *s = st->replicas[i]->seed;
		size_t n = 0;
		for (; s != NULL && s[n] != '\0'; n++)
			if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
				return false;
		if (n != 32)
			return false;
	}
	return true;
}

Diehard__ControlResponse *wire_decode_response(const uint8_t *p, size_t n, char *why, size_t size)
{
	Diehard__ControlResponse *m = diehard__control_response__unpack(NULL, n, p);
	if (m == NULL) {
		snprintf(why, size, "the server sent %zu bytes that are not a control response", n);
		return NULL;
	}
	if (m->version != WIRE_VERSION)
		snprintf(why, size, "the server speaks protocol version %u, not %u", m->version, WIRE_VERSION);
	else if (m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT__NOT_SET)
		snprintf(why, size, "the server sent an empty response");
	else if (m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT_ERROR && m->error->message == NULL)
		snprintf(why, size, "the server sent an error without a message");
	else if (m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT_STATUS && !seeds_sound(m->status))
		snprintf(why, size, "the server sent a replica's seed that is not 32 hex digits");
	else
		return m;
	diehard__control_response__free_unpacked(m, NULL);
	return NULL;
}
