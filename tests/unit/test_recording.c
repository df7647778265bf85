/* Unit tests of ci/recording.c: a recording written and read back is the
 * same; truncated, foreign, corrupt and random bytes are refused with a
 * reason and never crash the reader (it runs under ASan here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "recording.h"
#include "tap.h"

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	unsigned char *buf = malloc(1 << 20);
	*n = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

int main(void)
{
	Diehard__Recording rec = DIEHARD__RECORDING__INIT;
	ProtobufCBinaryData argv[2] = { { 4, (uint8_t *)"sort" }, { 2, (uint8_t *)"-n" } };
	ProtobufCBinaryData env[1] = { { 5, (uint8_t *)"A=b c" } };
	uint8_t key[32] = { 1 }, dseed[16] = { 2 }, seed[16] = { 3 }, dig[16] = { 4 };
	Diehard__Replica r = DIEHARD__REPLICA__INIT, *rp = &r;
	r.id = 1;
	r.seed = (ProtobufCBinaryData){ 16, seed };
	r.fill = (char *)"inverse:00000000000000ff";
	r.stdout_digest = (ProtobufCBinaryData){ 16, dig };
	r.stdout_bytes = 12;
	r.verdict = (char *)"agreed";
	Diehard__Call call = DIEHARD__CALL__INIT, *callp = &call;
	call.a = 1700000000;
	call.b = 5;
	Diehard__CallLog cl = DIEHARD__CALL_LOG__INIT, *clp = &cl;
	cl.key = 0x1000001;
	cl.n_calls = 1;
	cl.calls = &callp;
	rec.format = RECORDING_FORMAT;
	rec.n_argv = 2;
	rec.argv = argv;
	rec.path = (ProtobufCBinaryData){ 9, (uint8_t *)"/bin/sort" };
	rec.n_env = 1;
	rec.env = env;
	rec.key = (ProtobufCBinaryData){ 32, key };
	rec.digest_seed = (ProtobufCBinaryData){ 16, dseed };
	rec.input = (ProtobufCBinaryData){ 6, (uint8_t *)"3\n1\n2\n" };
	rec.input_complete = true;
	rec.n_calls = 1;
	rec.calls = &clp;
	rec.n_replicas = 1;
	rec.replicas = &rp;

	char path[] = "/tmp/test_recording_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "a temporary file");
	close(fd);
	char why[256];
	CHECK(recording_write(path, &rec, why, sizeof why), "written");
	Diehard__Recording *back = recording_read(path, why, sizeof why);
	CHECK(back != NULL && back->n_argv == 2 && memcmp(back->argv[1].data, "-n", 2) == 0 && back->n_replicas == 1 &&
		      strcmp(back->replicas[0]->fill, "inverse:00000000000000ff") == 0 && back->n_calls == 1 &&
		      back->calls[0]->calls[0]->a == 1700000000 && back->input.len == 6,
	      "read back the same");
	recording_free(back);

	size_t n;
	unsigned char *good = slurp(path, &n);
	unsigned char *bad = malloc(n + 400);
	/* Every truncation. */
	bool all = true;
	for (size_t cut = 0; cut < n; cut++) {
		Diehard__Recording *x = recording_parse(good, cut, why, sizeof why);
		all &= x == NULL && why[0] != '\0';
		recording_free(x);
	}
	CHECK(all, "every truncation of %zu bytes is refused", n);
	/* Every single flipped bit. */
	all = true;
	for (size_t i = 0; i < n * 8; i++) {
		memcpy(bad, good, n);
		bad[i / 8] ^= (unsigned char)(1u << (i % 8));
		Diehard__Recording *x = recording_parse(bad, n, why, sizeof why);
		all &= x == NULL;
		recording_free(x);
	}
	CHECK(all, "every flipped bit is refused");
	memcpy(bad, good, n);
	memcpy(bad + n, "junk", 4);
	Diehard__Recording *x = recording_parse(bad, n + 4, why, sizeof why);
	CHECK(x == NULL && strstr(why, "corrupt") != NULL, "bytes after the end are refused: %s", why);
	x = recording_parse((const unsigned char *)"#!/bin/sh\necho hi\n", 18, why, sizeof why);
	CHECK(x == NULL && strstr(why, "not a diehard recording") != NULL, "a script is foreign: %s", why);
	/* Random messages behind a valid header and checksum, so that the
	 * decoder and the checks see them: refused or accepted safely, never
	 * a crash. Half are the good message with random bytes changed. */
	unsigned seed_r = 7;
	size_t accepted = 0;
	for (int round = 0; round < 5000; round++) {
		size_t len = round % 2 ? n - 24 : (size_t)(rand_r(&seed_r) % 300);
		unsigned char *msg = bad + 24;
		if (round % 2) {
			memcpy(msg, good + 24, len);
			for (int k = 0; k < 3; k++)
				msg[rand_r(&seed_r) % len] = (unsigned char)rand_r(&seed_r);
		} else {
			for (size_t i = 0; i < len; i++)
				msg[i] = (unsigned char)rand_r(&seed_r);
		}
		memcpy(bad, good, 8);
		for (int i = 0; i < 8; i++)
			bad[8 + i] = (unsigned char)((uint64_t)len >> (8 * i));
		uint8_t h[16];
		static const uint8_t zero[16];
		digest_siphash128(zero, msg, len, h);
		memcpy(bad + 16, h, 8);
		x = recording_parse(bad, 24 + len, why, sizeof why);
		if (x != NULL) {
			accepted++;
			/* What was accepted holds what replay relies on. */
			if (x->n_argv == 0 || x->n_replicas == 0 || x->key.len != 32 || x->replicas[0]->seed.len != 16)
				break;
		}
		recording_free(x);
		if (round == 4999)
			CHECK(1, "5000 random messages decoded safely (%zu accepted, each complete)", accepted);
	}
	/* A message that decodes but breaks the checks: no replica. */
	rec.n_replicas = 0;
	CHECK(recording_write(path, &rec, why, sizeof why), "written without replicas");
	x = recording_read(path, why, sizeof why);
	CHECK(x == NULL && strstr(why, "no replica") != NULL, "refused: %s", why);
	rec.n_replicas = 1;
	rec.format = 99;
	recording_write(path, &rec, why, sizeof why);
	x = recording_read(path, why, sizeof why);
	CHECK(x == NULL && strstr(why, "format 99") != NULL, "a newer format is refused: %s", why);
	rec.format = RECORDING_FORMAT - 1;
	recording_write(path, &rec, why, sizeof why);
	x = recording_read(path, why, sizeof why);
	CHECK(x == NULL && strstr(why, "format 1") != NULL,
	      "an older format (processes keyed by pid) is refused too: %s", why);
	unlink(path);
	free(good);
	free(bad);
	return tap_done();
}
