/* Unit tests of services/wire.c, the control socket's framing and message
 * checks: what a client or a server sends is outside input. Frames and
 * messages round-trip; lengths past the limit, every truncation, flipped
 * bits and random bytes are refused (or decode to a checked message) and
 * never crash the decoder (it runs under ASan here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "wire.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Decodes a frame's bytes as both message kinds; whatever comes back is
 * checked as wire.h promises. Returns how many decoded. */
static int decode_both(const uint8_t *p, size_t n)
{
	char why[160];
	int ok = 0;
	Diehard__ControlRequest *q = wire_decode_request(p, n, why, sizeof why);
	if (q != NULL) {
		ok += q->version == WIRE_VERSION && q->what_case != DIEHARD__CONTROL_REQUEST__WHAT__NOT_SET;
		diehard__control_request__free_unpacked(q, NULL);
	} else if (why[0] == '\0') {
		ok = -100; /* refused without a reason */
	}
	why[0] = '\0';
	Diehard__ControlResponse *r = wire_decode_response(p, n, why, sizeof why);
	if (r != NULL) {
		ok += r->version == WIRE_VERSION && r->what_case != DIEHARD__CONTROL_RESPONSE__WHAT__NOT_SET;
		diehard__control_response__free_unpacked(r, NULL);
	} else if (why[0] == '\0') {
		ok = -100;
	}
	return ok;
}

int main(void)
{
	/* A request round-trips through its frame. */
	Diehard__ControlRequest req = DIEHARD__CONTROL_REQUEST__INIT;
	Diehard__EventsRequest er = DIEHARD__EVENTS_REQUEST__INIT;
	er.has_follow = er.follow = 1;
	req.version = WIRE_VERSION;
	req.what_case = DIEHARD__CONTROL_REQUEST__WHAT_EVENTS;
	req.events = &er;
	size_t n, len = 0;
	uint8_t *f = wire_pack(&req.base, &n);
	CHECK(f != NULL && n > WIRE_HEADER, "a request packs");
	CHECK(wire_frame(f, n, &len) == WIRE_FRAME && len == n - WIRE_HEADER, "its frame is whole");
	char why[160] = "";
	Diehard__ControlRequest *q = wire_decode_request(f + WIRE_HEADER, len, why, sizeof why);
	CHECK(q != NULL && q->what_case == DIEHARD__CONTROL_REQUEST__WHAT_EVENTS && q->events->follow,
	      "and decodes to what was sent");
	if (q != NULL)
		diehard__control_request__free_unpacked(q, NULL);
	/* Every truncation of the frame is incomplete, never a frame. */
	int partial = 0;
	for (size_t i = 0; i < n; i++)
		partial += wire_frame(f, i, &len) == WIRE_MORE;
	CHECK(partial == (int)n, "every truncation of the frame waits for more (%d of %zu)", partial, n);
	/* Every truncation of the message is refused with a reason or, where
	 * it still decodes, is a checked request. */
	int bad = 0;
	for (size_t i = 0; i < n - WIRE_HEADER; i++)
		bad += decode_both(f + WIRE_HEADER, i) < 0;
	CHECK(bad == 0, "every truncation of the message is refused with a reason or checked");
	/* Every flipped bit. */
	bad = 0;
	for (size_t i = WIRE_HEADER; i < n; i++)
		for (int b = 0; b < 8; b++) {
			f[i] ^= (uint8_t)(1u << b);
			bad += decode_both(f + WIRE_HEADER, n - WIRE_HEADER) < 0;
			f[i] ^= (uint8_t)(1u << b);
		}
	CHECK(bad == 0, "every flipped bit is refused with a reason or checked");
	free(f);

	/* Another version, and a request for nothing, are refused. */
	req.version = 2;
	f = wire_pack(&req.base, &n);
	why[0] = '\0';
	q = wire_decode_request(f + WIRE_HEADER, n - WIRE_HEADER, why, sizeof why);
	CHECK(q == NULL && strstr(why, "version 2") != NULL, "version 2 is refused: %s", why);
	free(f);
	req.version = WIRE_VERSION;
	req.what_case = DIEHARD__CONTROL_REQUEST__WHAT__NOT_SET;
	f = wire_pack(&req.base, &n);
	q = wire_decode_request(f + WIRE_HEADER, n - WIRE_HEADER, why, sizeof why);
	CHECK(q == NULL, "a request for nothing is refused: %s", why);
	free(f);
	CHECK(wire_decode_request(NULL, 0, why, sizeof why) == NULL, "an empty message is refused: %s", why);

	/* Lengths: the limit is a frame, one past it is too big, whatever follows. */
	uint8_t hdr[8] = { 0, 1, 0, 0 };
	CHECK(wire_frame(hdr, 4, &len) == WIRE_MORE, "a 64 KiB length waits for its bytes");
	hdr[3] = 1;
	CHECK(wire_frame(hdr, 4, &len) == WIRE_TOO_BIG, "65537 is too big");
	memset(hdr, 0xff, 4);
	CHECK(wire_frame(hdr, 8, &len) == WIRE_TOO_BIG, "0xffffffff is too big");
	memset(hdr, 0, 4);
	CHECK(wire_frame(hdr, 4, &len) == WIRE_FRAME && len == 0, "a zero length is a frame (of an empty message)");

	/* A response with a status round-trips; responses too long for a frame
	 * are not packed. */
	Diehard__ReplicaStatus rs = DIEHARD__REPLICA_STATUS__INIT, *rsp = &rs;
	rs.seed = (char *)"0123456789abcdef0123456789abcdef";
	rs.has_why = 1;
	rs.why = (ProtobufCBinaryData){ 4, (uint8_t *)"\xff\x00" "ab" };
	Diehard__RunStatus st = DIEHARD__RUN_STATUS__INIT;
	st.k = 3;
	st.n_replicas = 1;
	st.replicas = &rsp;
	Diehard__ControlResponse resp = DIEHARD__CONTROL_RESPONSE__INIT;
	resp.version = WIRE_VERSION;
	resp.what_case = DIEHARD__CONTROL_RESPONSE__WHAT_STATUS;
	resp.status = &st;
	f = wire_pack(&resp.base, &n);
	Diehard__ControlResponse *r = f ? wire_decode_response(f + WIRE_HEADER, n - WIRE_HEADER, why, sizeof why) : NULL;
	CHECK(r != NULL && r->status->k == 3 && r->status->n_replicas == 1 && r->status->replicas[0]->why.len == 4,
	      "a status round-trips");
	if (r != NULL)
		diehard__control_response__free_unpacked(r, NULL);
	bad = 0;
	for (size_t i = 0; i < n - WIRE_HEADER; i++)
		bad += decode_both(f + WIRE_HEADER, i) < 0;
	CHECK(bad == 0, "every truncation of a status is refused with a reason or checked");
	free(f);
	/* A seed that is not 32 hex digits (a terminal's escape sequence sent
	 * by whoever took the socket's place) is refused, not printed. */
	static const char *const bad_seeds[] = { "\x1b[2J\x1b[Hforged seed, 32 chars long!!", "0123456789abcdef",
						 "0123456789ABCDEF0123456789abcdef", "" };
	bad = 0;
	for (size_t i = 0; i < sizeof bad_seeds / sizeof bad_seeds[0]; i++) {
		rs.seed = (char *)bad_seeds[i];
		f = wire_pack(&resp.base, &n);
		why[0] = '\0';
		r = f ? wire_decode_response(f + WIRE_HEADER, n - WIRE_HEADER, why, sizeof why) : NULL;
		bad += r != NULL || strstr(why, "seed") == NULL;
		if (r != NULL)
			diehard__control_response__free_unpacked(r, NULL);
		free(f);
	}
	rs.seed = (char *)"0123456789abcdef0123456789abcdef";
	CHECK(bad == 0, "a status whose seed is not 32 lowercase hex digits is refused (escape sequences never printed)");
	static uint8_t big[70000];
	ProtobufCBinaryData arg = { sizeof big, big };
	st.n_command = 1;
	st.command = &arg;
	CHECK(wire_pack(&resp.base, &n) == NULL, "a response longer than 64 KiB is not packed");

	/* Random bytes, as frames and as messages. */
	static uint8_t buf[512];
	bad = 0;
	int frames = 0;
	for (int t = 0; t < 20000; t++) {
		size_t m = next() % sizeof buf;
		for (size_t i = 0; i < m; i++)
			buf[i] = (uint8_t)next();
		/* Half the time a small length, so whole frames come up. */
		if (t % 2 && m >= 4) {
			buf[0] = buf[1] = 0;
			buf[2] = (uint8_t)(next() % 2);
		}
		enum wire_frame w = wire_frame(buf, m, &len);
		if (w == WIRE_FRAME) {
			frames++;
			bad += len > m - WIRE_HEADER || len > WIRE_MAX;
			bad += decode_both(buf + WIRE_HEADER, len) < 0;
		}
		bad += decode_both(buf, m) < 0;
	}
	CHECK(bad == 0, "20000 random inputs: no frame past its bytes, every refusal with a reason (%d frames)", frames);
	return tap_done();
}
