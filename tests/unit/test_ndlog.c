/* Unit tests of the supervisor's two pure modules.
 *
 * chacha.c: the RFC 8439 test vectors (the section 2.3.2 block, the section
 * 2.4.2 "sunscreen" encryption, appendix A.1 keystreams 1 and 2), reads in odd
 * pieces against one big read, and the (domain, n) stream numbering.
 *
 * ndlog.c: leading and following, sequences, keys that never cross, argument
 * mismatches, a replica running ahead, the counters, trimming and the cap
 * (ND_LOST), retirement, k=1, 100000 entries through a growing ring, and a
 * randomized differential test against a small model written from the
 * contract in ndlog.h; entries kept narrow (a clock's: 16-byte cells) and
 * wide, each side of their bounds, mixed (values two in three narrow). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chacha.h"
#include "ndlog.h"
#include "tap.h"

/* ---- helpers ------------------------------------------------------------ */

static void hexdump(const char *what, const uint8_t *p, size_t n)
{
	printf("#   %s", what);
	for (size_t i = 0; i < n; i++)
		printf("%s%02x", i % 16 == 0 ? "\n#     " : " ", p[i]);
	printf("\n");
}

static bool same_bytes(const uint8_t *got, const uint8_t *want, size_t n)
{
	if (memcmp(got, want, n) == 0)
		return true;
	hexdump("got:", got, n);
	hexdump("want:", want, n);
	return false;
}

/* A small deterministic generator for the randomized parts. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static unsigned below(unsigned n)
{
	return (unsigned)(rnd() % n);
}

/* ---- ChaCha20 ----------------------------------------------------------- */

static const uint8_t rfc_key[CHACHA_KEY_BYTES] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};

/* RFC 8439 section 2.3.2: the serialized block for counter 1. */
static void test_chacha_block(void)
{
	static const uint8_t nonce[CHACHA_NONCE_BYTES] = { 0x00, 0x00, 0x00, 0x09, 0x00, 0x00,
							    0x00, 0x4a, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t want[64] = {
		0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20, 0x71, 0xc4,
		0xc7, 0xd1, 0xf4, 0xc7, 0x33, 0xc0, 0x68, 0x03, 0x04, 0x22, 0xaa, 0x9a, 0xc3, 0xd4, 0x6c, 0x4e,
		0xd2, 0x82, 0x64, 0x46, 0x07, 0x9f, 0xaa, 0x09, 0x14, 0xc2, 0xd7, 0x05, 0xd9, 0x8b, 0x02, 0xa2,
		0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9, 0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e,
	};
	struct chacha c;
	uint8_t got[128];
	chacha_init(&c, rfc_key, nonce, 1);
	chacha_read(&c, got, sizeof got);
	CHECK(same_bytes(got, want, 64), "chacha: RFC 8439 2.3.2 block (key 00..1f, nonce ..09..4a.., counter 1)");

	/* The second block is the one for counter 2: the counter moves on. */
	uint8_t second[64];
	chacha_init(&c, rfc_key, nonce, 2);
	chacha_read(&c, second, sizeof second);
	CHECK(same_bytes(got + 64, second, 64), "chacha: the block after counter 1's is counter 2's");
}

/* RFC 8439 section 2.4.2: plaintext XOR keystream (counter 1) = ciphertext. */
static void test_chacha_sunscreen(void)
{
	static const uint8_t nonce[CHACHA_NONCE_BYTES] = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
							    0x00, 0x4a, 0x00, 0x00, 0x00, 0x00 };
	static const char plain[] = "Ladies and Gentlemen of the class of '99: If I could offer you only one "
				    "tip for the future, sunscreen would be it.";
	static const uint8_t want[114] = {
		0x6e, 0x2e, 0x35, 0x9a, 0x25, 0x68, 0xf9, 0x80, 0x41, 0xba, 0x07, 0x28, 0xdd, 0x0d, 0x69, 0x81,
		0xe9, 0x7e, 0x7a, 0xec, 0x1d, 0x43, 0x60, 0xc2, 0x0a, 0x27, 0xaf, 0xcc, 0xfd, 0x9f, 0xae, 0x0b,
		0xf9, 0x1b, 0x65, 0xc5, 0x52, 0x47, 0x33, 0xab, 0x8f, 0x59, 0x3d, 0xab, 0xcd, 0x62, 0xb3, 0x57,
		0x16, 0x39, 0xd6, 0x24, 0xe6, 0x51, 0x52, 0xab, 0x8f, 0x53, 0x0c, 0x35, 0x9f, 0x08, 0x61, 0xd8,
		0x07, 0xca, 0x0d, 0xbf, 0x50, 0x0d, 0x6a, 0x61, 0x56, 0xa3, 0x8e, 0x08, 0x8a, 0x22, 0xb6, 0x5e,
		0x52, 0xbc, 0x51, 0x4d, 0x16, 0xcc, 0xf8, 0x06, 0x81, 0x8c, 0xe9, 0x1a, 0xb7, 0x79, 0x37, 0x36,
		0x5a, 0xf9, 0x0b, 0xbf, 0x74, 0xa3, 0x5b, 0xe6, 0xb4, 0x0b, 0x8e, 0xed, 0xf2, 0x78, 0x5e, 0x42,
		0x87, 0x4d,
	};
	_Static_assert(sizeof plain - 1 == sizeof want, "the RFC's plaintext is 114 bytes");

	struct chacha c;
	uint8_t ks[114], ct[114];
	chacha_init(&c, rfc_key, nonce, 1);
	chacha_read(&c, ks, sizeof ks);
	for (size_t i = 0; i < sizeof ct; i++)
		ct[i] = (uint8_t)plain[i] ^ ks[i];
	CHECK(same_bytes(ct, want, sizeof want), "chacha: RFC 8439 2.4.2 sunscreen ciphertext (114 bytes)");
}

/* RFC 8439 appendix A.1 test vectors 1 and 2 (zero key, zero nonce, counters
 * 0 and 1) are the stream (domain 0, n 0) read for 128 bytes. */
static void test_chacha_zero(void)
{
	static const uint8_t zero_key[CHACHA_KEY_BYTES] = { 0 };
	static const uint8_t want[128] = {
		0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90, 0x40, 0x5d, 0x6a, 0xe5, 0x53, 0x86, 0xbd, 0x28,
		0xbd, 0xd2, 0x19, 0xb8, 0xa0, 0x8d, 0xed, 0x1a, 0xa8, 0x36, 0xef, 0xcc, 0x8b, 0x77, 0x0d, 0xc7,
		0xda, 0x41, 0x59, 0x7c, 0x51, 0x57, 0x48, 0x8d, 0x77, 0x24, 0xe0, 0x3f, 0xb8, 0xd8, 0x4a, 0x37,
		0x6a, 0x43, 0xb8, 0xf4, 0x15, 0x18, 0xa1, 0x1c, 0xc3, 0x87, 0xb6, 0x69, 0xb2, 0xee, 0x65, 0x86,
		0x9f, 0x07, 0xe7, 0xbe, 0x55, 0x51, 0x38, 0x7a, 0x98, 0xba, 0x97, 0x7c, 0x73, 0x2d, 0x08, 0x0d,
		0xcb, 0x0f, 0x29, 0xa0, 0x48, 0xe3, 0x65, 0x69, 0x12, 0xc6, 0x53, 0x3e, 0x32, 0xee, 0x7a, 0xed,
		0x29, 0xb7, 0x21, 0x76, 0x9c, 0xe6, 0x4e, 0x43, 0xd5, 0x71, 0x33, 0xb0, 0x74, 0xd8, 0x39, 0xd5,
		0x31, 0xed, 0x1f, 0x28, 0x51, 0x0a, 0xfb, 0x45, 0xac, 0xe1, 0x0a, 0x1f, 0x4b, 0x79, 0x4d, 0x6f,
	};
	struct chacha c;
	uint8_t got[128];
	chacha_init_stream(&c, zero_key, 0, 0);
	chacha_read(&c, got, sizeof got);
	CHECK(same_bytes(got, want, sizeof want), "chacha: RFC 8439 A.1 vectors 1 and 2 as stream (0, 0)");
}

/* Reading in pieces gives the same bytes as one big read. */
static void test_chacha_pieces(void)
{
	enum { TOTAL = 4096 };
	static uint8_t whole[TOTAL], pieces[TOTAL];
	static const uint8_t nonce[CHACHA_NONCE_BYTES] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	struct chacha c;

	chacha_init(&c, rfc_key, nonce, 7);
	chacha_read(&c, whole, TOTAL);

	static const size_t sizes[] = { 1, 7, 64, 100, 0, 3, 63, 1, 65, 128, 200, 5, 64, 64, 1000, 13 };
	chacha_init(&c, rfc_key, nonce, 7);
	memset(pieces, 0xa5, sizeof pieces);
	size_t off = 0;
	for (size_t i = 0; off < TOTAL; i++) {
		size_t n = sizes[i % (sizeof sizes / sizeof sizes[0])];
		if (n > TOTAL - off)
			n = TOTAL - off;
		chacha_read(&c, pieces + off, n);
		off += n;
	}
	CHECK(memcmp(whole, pieces, TOTAL) == 0, "chacha: reads of 1, 7, 64, 100, 0, 3, 63, ... bytes = one %d-byte read",
	      TOTAL);

	/* Byte at a time across several block boundaries. */
	chacha_init(&c, rfc_key, nonce, 7);
	bool same = true;
	for (size_t i = 0; i < 300; i++) {
		uint8_t b;
		chacha_read(&c, &b, 1);
		same &= b == whole[i];
	}
	CHECK(same, "chacha: 300 one-byte reads = the first 300 bytes of one big read");

	/* A read of 0 bytes writes nothing and does not move the stream. */
	uint8_t guard[4] = { 0xee, 0xee, 0xee, 0xee };
	uint8_t next[16];
	chacha_init(&c, rfc_key, nonce, 7);
	chacha_read(&c, next, 10);
	chacha_read(&c, guard, 0);
	chacha_read(&c, next, 16);
	CHECK(guard[0] == 0xee && memcmp(next, whole + 10, 16) == 0,
	      "chacha: a 0-byte read writes nothing and does not consume keystream");
}

/* The (domain, n) numbering of streams. */
static void test_chacha_streams(void)
{
	struct chacha c;
	uint8_t a[200], b[200];

	/* The layout the header states: domain then n, little-endian, counter 0. */
	uint32_t domain = 0x11223344;
	uint64_t n = 0x0102030405060708ull;
	uint8_t nonce[CHACHA_NONCE_BYTES] = { 0x44, 0x33, 0x22, 0x11, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01 };
	chacha_init_stream(&c, rfc_key, domain, n);
	chacha_read(&c, a, sizeof a);
	chacha_init(&c, rfc_key, nonce, 0);
	chacha_read(&c, b, sizeof b);
	CHECK(memcmp(a, b, sizeof a) == 0,
	      "chacha: stream (domain, n) = nonce domain LE || n LE, counter 0, as the header says");

	chacha_init_stream(&c, rfc_key, 3, 42);
	chacha_read(&c, a, sizeof a);
	chacha_init_stream(&c, rfc_key, 3, 42);
	chacha_read(&c, b, sizeof b);
	CHECK(memcmp(a, b, sizeof a) == 0, "chacha: the same (key, domain, n) gives the same bytes every time");

	/* Every pair among these differs (first 32 bytes compared). */
	static const struct {
		uint32_t domain;
		uint64_t n;
	} ids[] = {
		{ 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 }, { 0, (uint64_t)1 << 32 }, { 0, (uint64_t)1 << 63 },
		{ 2, 1 }, { 1, 2 }, { 0xffffffffu, 0 }, { 0, ~(uint64_t)0 },
	};
	enum { NIDS = sizeof ids / sizeof ids[0] };
	uint8_t out[NIDS][32];
	for (int i = 0; i < NIDS; i++) {
		chacha_init_stream(&c, rfc_key, ids[i].domain, ids[i].n);
		chacha_read(&c, out[i], sizeof out[i]);
	}
	bool distinct = true;
	for (int i = 0; i < NIDS; i++)
		for (int j = i + 1; j < NIDS; j++)
			if (memcmp(out[i], out[j], sizeof out[i]) == 0) {
				printf("#   streams (%u, %llu) and (%u, %llu) are the same\n", ids[i].domain,
				       (unsigned long long)ids[i].n, ids[j].domain, (unsigned long long)ids[j].n);
				distinct = false;
			}
	CHECK(distinct, "chacha: %d different (domain, n) give %d different streams (incl. n's high bits, swaps)",
	      NIDS, NIDS);

	uint8_t other_key[CHACHA_KEY_BYTES];
	memcpy(other_key, rfc_key, sizeof other_key);
	other_key[31] ^= 1;
	chacha_init_stream(&c, rfc_key, 5, 5);
	chacha_read(&c, a, 32);
	chacha_init_stream(&c, other_key, 5, 5);
	chacha_read(&c, b, 32);
	CHECK(memcmp(a, b, 32) != 0, "chacha: a key differing in one bit gives a different stream");
}

/* ---- ndlog helpers ------------------------------------------------------ */

/* The value entry n of key returns (salt tells runs apart). */
/* Two values in three are a clock's (a, and b below 2^32: kept narrow in
 * a 16-byte cell), the third uses every field (kept wide). */
static struct nd_value val_s(uint32_t key, uint64_t n, uint64_t salt)
{
	if ((n + salt) % 3 != 0)
		return (struct nd_value){ .a = (int64_t)(key * 1000003ull + n + salt * 7),
					  .b = (int64_t)((n * 7919 + 13 + salt) & 0xffffffffu) };
	return (struct nd_value){
		.a = (int64_t)(key * 1000003ull + n + salt * 7),
		.b = (int64_t)(n * 7919 + 13 + salt),
		.c = (int32_t)key,
		.d = (int32_t)(n ^ 0x5555),
		.err = (int32_t)(n % 5),
	};
}

static struct nd_value val(uint32_t key, uint64_t n)
{
	return val_s(key, n, 0);
}

static bool same_value(const struct nd_value *x, const struct nd_value *y)
{
	return x->a == y->a && x->b == y->b && x->c == y->c && x->d == y->d && x->err == y->err;
}

struct took {
	int out;
	uint64_t index;
	struct nd_value v;
	uint64_t expected;
};

/* ndlog_take with its outputs filled with garbage first. */
static struct took take(struct ndlog *log, unsigned r, uint32_t key, uint64_t arg)
{
	struct took t;
	memset(&t, 0xa5, sizeof t);
	t.out = ndlog_take(log, r, key, arg, &t.index, &t.v, &t.expected);
	return t;
}

static const char *outname(int out)
{
	switch (out) {
	case ND_LEAD: return "LEAD";
	case ND_FOLLOW: return "FOLLOW";
	case ND_MISMATCH: return "MISMATCH";
	case ND_LOST: return "LOST";
	case -1: return "-1";
	default: return "?";
	}
}

static void show_took(const char *what, struct took t)
{
	printf("#   %s: %s index=%llu value.a=%lld expected=%llu\n", what, outname(t.out),
	       (unsigned long long)t.index, (long long)t.v.a, (unsigned long long)t.expected);
}

static bool is_out(struct took t, int out, uint64_t index)
{
	if (t.out == out && t.index == index)
		return true;
	show_took("got", t);
	printf("#   want: %s index=%llu\n", outname(out), (unsigned long long)index);
	return false;
}

static bool is_lead(struct took t, uint64_t index)
{
	return is_out(t, ND_LEAD, index);
}

static bool is_lost(struct took t, uint64_t index)
{
	return is_out(t, ND_LOST, index);
}

static bool is_follow(struct took t, uint64_t index, struct nd_value v)
{
	if (!is_out(t, ND_FOLLOW, index))
		return false;
	if (same_value(&t.v, &v))
		return true;
	printf("#   value.a=%lld, want %lld\n", (long long)t.v.a, (long long)v.a);
	return false;
}

static bool is_mismatch(struct took t, uint64_t index, struct nd_value v, uint64_t expected)
{
	if (!is_out(t, ND_MISMATCH, index))
		return false;
	if (same_value(&t.v, &v) && t.expected == expected)
		return true;
	printf("#   value.a=%lld expected=%llu, want %lld and %llu\n", (long long)t.v.a,
	       (unsigned long long)t.expected, (long long)v.a, (unsigned long long)expected);
	return false;
}

/* r leads entry `index` of key with arg and puts val(key, index). */
static bool lead(struct ndlog *log, unsigned r, uint32_t key, uint64_t arg, uint64_t index)
{
	struct took t = take(log, r, key, arg);
	if (!is_lead(t, index))
		return false;
	struct nd_value v = val(key, index);
	ndlog_put(log, r, key, &v);
	return true;
}

/* r takes entry `index` of key with arg and follows with val(key, index). */
static bool follow(struct ndlog *log, unsigned r, uint32_t key, uint64_t arg, uint64_t index)
{
	return is_follow(take(log, r, key, arg), index, val(key, index));
}

enum { KEY_A = 0x101, KEY_B = 0x202, KEY_C = 0x303 };

/* ---- ndlog: leading and following --------------------------------------- */

static void test_basic(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	CHECK(log != NULL, "ndlog: ndlog_new(3, 1000, false) succeeds");
	if (log == NULL)
		return;

	struct took t = take(log, 0, KEY_A, 16);
	CHECK(is_lead(t, 0), "ndlog: the first replica to take a key leads, at index 0");
	struct nd_value v = val(KEY_A, 0);
	ndlog_put(log, 0, KEY_A, &v);
	CHECK(is_follow(take(log, 1, KEY_A, 16), 0, v), "ndlog: replica 1 follows entry 0 with the leader's value");
	CHECK(is_follow(take(log, 2, KEY_A, 16), 0, v), "ndlog: replica 2 follows entry 0 with the leader's value");
	CHECK(lead(log, 2, KEY_A, 16, 1), "ndlog: after everyone took entry 0, the next take leads entry 1");
	ndlog_free(log);
	ndlog_free(NULL);
	CHECK(1, "ndlog: ndlog_free(NULL) is harmless");
}

static void test_sequence(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	bool ok = true;
	for (uint64_t i = 0; i < 6; i++)
		ok &= lead(log, 0, KEY_A, 8, i);
	CHECK(ok, "ndlog: replica 0 leads 6 entries in a row, indices 0..5");
	ok = true;
	for (uint64_t i = 0; i < 6; i++)
		ok &= follow(log, 1, KEY_A, 8, i);
	CHECK(ok, "ndlog: replica 1 then follows all 6 in order with their values");
	ok = true;
	for (uint64_t i = 0; i < 6; i++)
		ok &= follow(log, 2, KEY_A, 8, i);
	CHECK(ok, "ndlog: replica 2 then follows all 6 in order with their values");
	ndlog_free(log);
}

/* The n-th call of key A gets A's n-th value whatever the order of keys. */
static void test_keys_do_not_cross(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	/* Replica 0: A B A B A C. */
	bool ok = lead(log, 0, KEY_A, 1, 0) && lead(log, 0, KEY_B, 2, 0) && lead(log, 0, KEY_A, 1, 1) &&
		  lead(log, 0, KEY_B, 2, 1) && lead(log, 0, KEY_A, 1, 2) && lead(log, 0, KEY_C, 3, 0);
	CHECK(ok, "ndlog: interleaved keys each count their own indices from 0 (leader A B A B A C)");
	/* Replica 1: B B C A A A. */
	ok = follow(log, 1, KEY_B, 2, 0) && follow(log, 1, KEY_B, 2, 1) && follow(log, 1, KEY_C, 3, 0) &&
	     follow(log, 1, KEY_A, 1, 0) && follow(log, 1, KEY_A, 1, 1) && follow(log, 1, KEY_A, 1, 2);
	CHECK(ok, "ndlog: a follower taking B B C A A A gets each key's own n-th value");
	/* Replica 2: C A B A B A. */
	ok = follow(log, 2, KEY_C, 3, 0) && follow(log, 2, KEY_A, 1, 0) && follow(log, 2, KEY_B, 2, 0) &&
	     follow(log, 2, KEY_A, 1, 1) && follow(log, 2, KEY_B, 2, 1) && follow(log, 2, KEY_A, 1, 2);
	CHECK(ok, "ndlog: a follower taking C A B A B A gets each key's own n-th value");
	/* A key nobody else has reached yet is led by whoever gets there. */
	CHECK(lead(log, 2, KEY_B, 2, 2), "ndlog: the third B is led by replica 2, the first to reach it");
	CHECK(follow(log, 0, KEY_B, 2, 2), "ndlog: and replica 0 follows it");

	/* Puts of two leads may come in either order. */
	struct took ta = take(log, 1, 0x404, 10), tb = take(log, 1, 0x505, 20);
	struct nd_value va = val(0x404, 0), vb = val(0x505, 0);
	ndlog_put(log, 1, 0x505, &vb);
	ndlog_put(log, 1, 0x404, &va);
	CHECK(is_lead(ta, 0) && is_lead(tb, 0) && is_follow(take(log, 0, 0x404, 10), 0, va) &&
		      is_follow(take(log, 0, 0x505, 20), 0, vb),
	      "ndlog: two leads of different keys put in reverse order are both recorded right");
	ndlog_free(log);
}

static void test_mismatch(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	lead(log, 0, KEY_A, 16, 0);
	struct took t = take(log, 1, KEY_A, 32);
	CHECK(is_mismatch(t, 0, val(KEY_A, 0), 16),
	      "ndlog: a differing argument gives ND_MISMATCH, *expected = the leader's 16, the leader's value");
	CHECK(follow(log, 2, KEY_A, 16, 0), "ndlog: another replica with the leader's argument still follows");
	CHECK(lead(log, 1, KEY_A, 32, 1), "ndlog: a mismatch consumes the entry: the mismatched replica's next is index 1");
	CHECK(is_mismatch(take(log, 0, KEY_A, 0), 1, val(KEY_A, 1), 32),
	      "ndlog: the argument compared is the leader's of that entry (32), not an earlier one");
	CHECK(is_follow(take(log, 2, KEY_A, 32), 1, val(KEY_A, 1)), "ndlog: a matching follower of entry 1 follows");

	/* Arguments are compared in all 64 bits. */
	lead(log, 0, KEY_B, (uint64_t)1 << 40, 0);
	CHECK(is_mismatch(take(log, 1, KEY_B, 0), 0, val(KEY_B, 0), (uint64_t)1 << 40),
	      "ndlog: arguments differing only above bit 31 mismatch, *expected = 1<<40");
	ndlog_free(log);
}

/* A replica running ahead leads later entries while others follow earlier. */
static void test_run_ahead(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	bool ok = lead(log, 0, KEY_A, 0, 0) && follow(log, 1, KEY_A, 0, 0) && lead(log, 1, KEY_A, 0, 1) &&
		  lead(log, 1, KEY_A, 0, 2) && lead(log, 1, KEY_A, 0, 3);
	CHECK(ok, "ndlog: replica 1 follows entry 0 then runs ahead, leading entries 1..3");
	ok = follow(log, 0, KEY_A, 0, 1) && follow(log, 0, KEY_A, 0, 2) && follow(log, 0, KEY_A, 0, 3) &&
	     lead(log, 0, KEY_A, 0, 4);
	CHECK(ok, "ndlog: replica 0 follows 1..3 (led by replica 1), then leads 4");
	ok = follow(log, 2, KEY_A, 0, 0) && follow(log, 2, KEY_A, 0, 1) && follow(log, 2, KEY_A, 0, 2) &&
	     follow(log, 2, KEY_A, 0, 3) && follow(log, 2, KEY_A, 0, 4) && follow(log, 1, KEY_A, 0, 4);
	CHECK(ok, "ndlog: the slowest replica follows all of 0..4, whoever led them");
	ndlog_free(log);
}

/* ---- ndlog: counters ---------------------------------------------------- */

static void test_counters(void)
{
	struct ndlog *log = ndlog_new(3, 1000, false);
	uint32_t keys[8];
	CHECK(ndlog_keys(log, keys, 8) == 0 && ndlog_entries(log) == 0 && ndlog_count(log, 0, KEY_A) == 0,
	      "ndlog: a new log has no keys, no entries, no calls");

	lead(log, 0, 7, 0, 0);
	lead(log, 0, 7, 0, 1);
	lead(log, 1, 3, 0, 0);
	follow(log, 1, 7, 0, 0);
	lead(log, 2, 9, 0, 0);
	follow(log, 2, 3, 0, 0);
	take(log, 2, 7, 99); /* a mismatch is a call too */

	CHECK(ndlog_count(log, 0, 7) == 2 && ndlog_count(log, 1, 7) == 1 && ndlog_count(log, 2, 7) == 1,
	      "ndlog: ndlog_count per replica of key 7: 2, 1, 1 (a mismatch counts)");
	CHECK(ndlog_count(log, 0, 3) == 0 && ndlog_count(log, 1, 3) == 1 && ndlog_count(log, 2, 3) == 1 &&
		      ndlog_count(log, 2, 9) == 1 && ndlog_count(log, 0, 9) == 0,
	      "ndlog: ndlog_count per replica and key: keys 3 and 9");
	CHECK(ndlog_count(log, 1, 12345) == 0, "ndlog: ndlog_count of a key never seen is 0");

	memset(keys, 0, sizeof keys);
	size_t nk = ndlog_keys(log, keys, 8);
	CHECK(nk == 3 && keys[0] == 7 && keys[1] == 3 && keys[2] == 9 && keys[3] == 0,
	      "ndlog: ndlog_keys gives 7, 3, 9 in first-seen order (across replicas), once each");
	uint32_t two[3] = { 0, 0, 0xdead };
	CHECK(ndlog_keys(log, two, 2) == 3 && two[0] == 7 && two[1] == 3 && two[2] == 0xdead,
	      "ndlog: ndlog_keys with max 2 writes 2 keys, no more, and still returns 3");
	CHECK(ndlog_keys(log, NULL, 0) == 3, "ndlog: ndlog_keys(NULL, 0) just counts");
	CHECK(ndlog_entries(log) == 4, "ndlog: ndlog_entries counts the 4 led entries, not follows or mismatches");
	ndlog_free(log);
}

/* ---- ndlog: trimming and the cap ---------------------------------------- */

static void test_trim(void)
{
	/* Everyone keeps up, cap 2: the log never loses an entry. */
	struct ndlog *log = ndlog_new(3, 2, false);
	bool ok = lead(log, 0, KEY_A, 1, 0) && lead(log, 0, KEY_A, 1, 1) && follow(log, 1, KEY_A, 1, 0) &&
		  follow(log, 1, KEY_A, 1, 1) && follow(log, 2, KEY_A, 1, 0) && follow(log, 2, KEY_A, 1, 1);
	CHECK(ok, "ndlog: cap 2: two entries led, both followed by both followers");
	ok = lead(log, 0, KEY_A, 1, 2) && lead(log, 0, KEY_A, 1, 3) && follow(log, 1, KEY_A, 1, 2) &&
	     follow(log, 2, KEY_A, 1, 2) && follow(log, 1, KEY_A, 1, 3) && follow(log, 2, KEY_A, 1, 3);
	CHECK(ok, "ndlog: cap 2: two more led after the first two were taken by all: followed, not lost");
	ok = true;
	for (uint64_t i = 4; i < 1000; i += 2) {
		unsigned who = (unsigned)(i / 2) % 3; /* the leader changes */
		ok &= lead(log, who, KEY_A, 1, i) && lead(log, who, KEY_A, 1, i + 1);
		for (unsigned r = 0; r < 3; r++)
			if (r != who)
				ok &= follow(log, r, KEY_A, 1, i) && follow(log, r, KEY_A, 1, i + 1);
	}
	CHECK(ok, "ndlog: cap 2: 996 more entries in pairs, leaders rotating, nothing lost");
	CHECK(ndlog_entries(log) == 1000, "ndlog: ndlog_entries is 1000 after that");
	ndlog_free(log);

	/* cap 1 in lockstep. */
	log = ndlog_new(3, 1, false);
	ok = true;
	for (uint64_t i = 0; i < 200; i++)
		ok &= lead(log, (unsigned)i % 3, KEY_B, i, i) && follow(log, (unsigned)(i + 1) % 3, KEY_B, i, i) &&
		      follow(log, (unsigned)(i + 2) % 3, KEY_B, i, i);
	CHECK(ok, "ndlog: cap 1: 200 entries each taken by all three before the next: nothing lost");
	ndlog_free(log);
}

static void test_cap(void)
{
	/* k=2, cap 2: replica 0 leads 5, replica 1 has taken none. */
	struct ndlog *log = ndlog_new(2, 2, false);
	bool ok = true;
	for (uint64_t i = 0; i < 5; i++)
		ok &= lead(log, 0, KEY_A, 4, i);
	CHECK(ok, "ndlog: cap 2: replica 0 leads 5 entries while replica 1 takes none");
	CHECK(is_lost(take(log, 1, KEY_A, 4), 0) && is_lost(take(log, 1, KEY_A, 4), 1) &&
		      is_lost(take(log, 1, KEY_A, 4), 2),
	      "ndlog: cap 2: replica 1's takes of the dropped entries 0..2 are ND_LOST, indices 0..2");
	CHECK(is_lost(take(log, 1, KEY_A, 4), 3) && is_lost(take(log, 1, KEY_A, 4), 4),
	      "ndlog: cap 2: once lost, replica 1 stays lost on the kept entries 3, 4 (no clock going back)");
	CHECK(is_lost(take(log, 1, KEY_A, 4), 5) && lead(log, 0, KEY_A, 4, 5),
	      "ndlog: a lost replica never leads; replica 0 still leads entry 5");
	CHECK(ndlog_count(log, 1, KEY_A) == 6 && ndlog_entries(log) == 6,
	      "ndlog: lost takes count as calls (6) and only led entries count as entries (6)");
	ndlog_free(log);

	/* k=3, cap 2: replica 2 keeps up, replica 1 lags. */
	log = ndlog_new(3, 2, false);
	ok = true;
	for (uint64_t i = 0; i < 5; i++)
		ok &= lead(log, 0, KEY_A, 4, i) && follow(log, 2, KEY_A, 4, i);
	CHECK(ok, "ndlog: cap 2, k=3: replica 2 follows each of 5 entries as it is led");
	ok = is_lost(take(log, 1, KEY_A, 4), 0) && is_lost(take(log, 1, KEY_A, 4), 1) &&
	     is_lost(take(log, 1, KEY_A, 4), 2) && is_lost(take(log, 1, KEY_A, 4), 3) &&
	     is_lost(take(log, 1, KEY_A, 4), 4);
	CHECK(ok, "ndlog: cap 2, k=3: the laggard is lost from its first dropped entry on");
	/* A lost replica does not disturb the others' later entries, nor keeps
	 * entries: the other two go on under the cap. */
	ok = true;
	for (uint64_t i = 5; i < 20; i++)
		ok &= lead(log, 2, KEY_A, 4, i) && follow(log, 0, KEY_A, 4, i) && is_lost(take(log, 1, KEY_A, 4), i);
	CHECK(ok, "ndlog: cap 2, k=3: the two others stay in step; the lost one keeps reading real values");
	ndlog_free(log);

	/* The cap is per key: a busy key does not push out another key's entries. */
	log = ndlog_new(2, 2, false);
	ok = lead(log, 0, KEY_B, 0, 0);
	for (uint64_t i = 0; i < 10; i++)
		ok &= lead(log, 0, KEY_A, 0, i);
	ok &= follow(log, 1, KEY_B, 0, 0);
	CHECK(ok, "ndlog: the cap is per key: 10 entries of A leave B's single entry in place");
	ndlog_free(log);
}

/* ---- ndlog: retirement, k=1 --------------------------------------------- */

static void test_retire(void)
{
	/* The laggard retires: the others go on, unaffected. */
	struct ndlog *log = ndlog_new(3, 2, false);
	ndlog_retire(log, 2);
	bool ok = true;
	for (uint64_t i = 0; i < 50; i += 2)
		ok &= lead(log, 0, KEY_A, 0, i) && lead(log, 0, KEY_A, 0, i + 1) && follow(log, 1, KEY_A, 0, i) &&
		      follow(log, 1, KEY_A, 0, i + 1);
	CHECK(ok, "ndlog: cap 2, laggard retired: 50 entries led two at a time, all followed by the third");
	ndlog_free(log);

	/* Retiring after some entries: what the live ones need stays. */
	log = ndlog_new(3, 4, false);
	ok = lead(log, 0, KEY_A, 0, 0) && lead(log, 0, KEY_A, 0, 1) && lead(log, 0, KEY_A, 0, 2);
	ndlog_retire(log, 0); /* the leader goes */
	ok &= follow(log, 1, KEY_A, 0, 0) && follow(log, 2, KEY_A, 0, 0) && follow(log, 1, KEY_A, 0, 1) &&
	      follow(log, 1, KEY_A, 0, 2) && follow(log, 2, KEY_A, 0, 1) && follow(log, 2, KEY_A, 0, 2);
	CHECK(ok, "ndlog: retiring the leader keeps the entries the live replicas still need");
	ok = lead(log, 2, KEY_A, 0, 3) && follow(log, 1, KEY_A, 0, 3);
	CHECK(ok, "ndlog: after the leader retires, the others lead and follow among themselves");
	ndlog_retire(log, 0);
	ok = lead(log, 1, KEY_A, 0, 4) && follow(log, 2, KEY_A, 0, 4);
	CHECK(ok, "ndlog: retiring a replica twice changes nothing");

	/* Down to one live replica: it leads everything it takes next. */
	ndlog_retire(log, 2);
	ok = true;
	for (uint64_t i = 5; i < 40; i++)
		ok &= lead(log, 1, KEY_A, 0, i);
	CHECK(ok, "ndlog: with one live replica left, each of its takes leads");
	ndlog_free(log);
}

static void test_k1(void)
{
	struct ndlog *log = ndlog_new(1, 1, false);
	bool ok = log != NULL;
	for (uint64_t i = 0; ok && i < 1000; i++)
		ok &= lead(log, 0, (uint32_t)(i % 3), 5, i / 3);
	CHECK(ok, "ndlog: k=1, cap 1: every take of every key leads, indices counting per key");
	CHECK(ndlog_entries(log) == 1000 && ndlog_count(log, 0, 0) == 334 && ndlog_count(log, 0, 2) == 333,
	      "ndlog: k=1: 1000 entries, 334 calls of key 0 and 333 of key 2");
	ndlog_free(log);
}

/* ---- ndlog: many entries -------------------------------------------------- */

/* Leader 0 runs ahead in bursts of up to `burst` entries; followers 1 and 2
 * catch up by random amounts, so the ring grows and wraps. */
static bool many(size_t cap, uint64_t total, unsigned burst, uint64_t *max_lag)
{
	struct ndlog *log = ndlog_new(3, cap, false);
	uint64_t led = 0, f[3] = { 0, 0, 0 };
	unsigned bad = 0;
	*max_lag = 0;
	while (f[1] < total || f[2] < total) {
		unsigned b = 1 + below(burst);
		for (unsigned i = 0; i < b && led < total; i++, led++) {
			struct took t = take(log, 0, KEY_C, led * 3);
			if (t.out != ND_LEAD || t.index != led) {
				if (bad++ < 5)
					show_took("leader", t);
				continue;
			}
			struct nd_value v = val_s(KEY_C, led, 77);
			ndlog_put(log, 0, KEY_C, &v);
		}
		for (unsigned r = 1; r <= 2; r++) {
			if (led - f[r] > *max_lag)
				*max_lag = led - f[r];
			uint64_t m = led == total ? led - f[r] : rnd() % (led - f[r] + 1);
			for (uint64_t j = 0; j < m; j++, f[r]++) {
				struct took t = take(log, r, KEY_C, f[r] * 3);
				struct nd_value want = val_s(KEY_C, f[r], 77);
				if (t.out != ND_FOLLOW || t.index != f[r] || !same_value(&t.v, &want)) {
					if (bad++ < 5) {
						printf("#   follower %u at %llu:\n", r, (unsigned long long)f[r]);
						show_took("got", t);
					}
				}
			}
		}
	}
	bad += ndlog_entries(log) != total;
	bad += ndlog_count(log, 0, KEY_C) != total || ndlog_count(log, 1, KEY_C) != total ||
	       ndlog_count(log, 2, KEY_C) != total;
	ndlog_free(log);
	return bad == 0;
}

static void test_many(void)
{
	uint64_t lag;
	bool ok = many((size_t)1 << 20, 100000, 700, &lag);
	CHECK(ok, "ndlog: 100000 entries, cap 2^20, followers up to %llu behind: all values and indices exact",
	      (unsigned long long)lag);
	CHECK(lag > 100, "ndlog: (that run's followers did lag by more than a ring's first size: %llu)",
	      (unsigned long long)lag);
	ok = many((size_t)-1, 20000, 300, &lag);
	CHECK(ok, "ndlog: 20000 entries with cap SIZE_MAX (ring growth never capped): exact");
	ok = many(1200, 100000, 100, &lag);
	CHECK(ok && lag <= 1200, "ndlog: 100000 entries, cap 1200, lag at most %llu <= cap: nothing lost",
	      (unsigned long long)lag);
}

/* ---- ndlog: randomized differential test against a model ---------------- */

/* The model, from ndlog.h: per key, every entry ever led (arg, value) and
 * each replica's next index. A live replica taking index n of a key with T
 * entries led: n == T leads; n + cap < T was pushed out by the cap (the cap
 * drops oldest first, and trimming only drops what every live replica has
 * passed), so it is lost; otherwise it follows or mismatches entry n. */
enum { MK = 5, MKEYS = 4, MSTEPS = 3000 };

struct model_key {
	uint32_t key;
	uint64_t total;
	uint64_t args[MSTEPS];
	uint64_t pos[MK];
	bool lost[MK];
};

static struct model_key mkeys[MKEYS];

static bool random_trial(unsigned trial)
{
	unsigned k = 1 + below(MK);
	size_t cap = below(4) == 0 ? 1000000 : 1 + below(8);
	struct ndlog *log = ndlog_new(k, cap, false);
	bool live[MK];
	unsigned nlive = k;
	uint32_t seen[MKEYS];
	size_t nseen = 0;
	uint64_t total_led = 0;
	/* Some replicas are made faster than others, so lag builds up. */
	unsigned weight[MK];
	for (unsigned r = 0; r < MK; r++) {
		live[r] = r < k;
		weight[r] = 1 + below(6);
	}
	for (unsigned i = 0; i < MKEYS; i++)
		mkeys[i] = (struct model_key){ .key = 0x1000u * (trial + 1) + i * 17 };

	for (unsigned step = 0; step < MSTEPS; step++) {
		if (nlive > 1 && below(400) == 0) {
			unsigned r;
			do
				r = below(k);
			while (!live[r]);
			live[r] = false;
			nlive--;
			ndlog_retire(log, r);
			continue;
		}
		unsigned sum = 0, r = 0;
		for (unsigned i = 0; i < k; i++)
			sum += live[i] ? weight[i] : 0;
		unsigned pick = below(sum);
		for (r = 0; r < k; r++) {
			if (!live[r])
				continue;
			if (pick < weight[r])
				break;
			pick -= weight[r];
		}
		struct model_key *mk = &mkeys[below(below(3) == 0 ? MKEYS : 2)];
		uint64_t n = mk->pos[r]++;
		uint64_t arg;
		if (n < mk->total && below(10) != 0)
			arg = mk->args[n];
		else
			arg = rnd() % 4;

		bool is_new = true;
		for (size_t i = 0; i < nseen; i++)
			is_new &= seen[i] != mk->key;
		if (is_new)
			seen[nseen++] = mk->key;

		struct took t = take(log, r, mk->key, arg);
		bool ok;
		const char *want;
		if (mk->lost[r] || n + cap < mk->total) {
			want = "LOST";
			ok = t.out == ND_LOST && t.index == n;
			mk->lost[r] = true;
		} else if (n == mk->total) {
			want = "LEAD";
			ok = t.out == ND_LEAD && t.index == n;
			mk->args[mk->total++] = arg;
			total_led++;
			struct nd_value v = val_s(mk->key, n, trial);
			ndlog_put(log, r, mk->key, &v);
		} else {
			struct nd_value v = val_s(mk->key, n, trial);
			bool match = mk->args[n] == arg;
			want = match ? "FOLLOW" : "MISMATCH";
			ok = t.out == (match ? ND_FOLLOW : ND_MISMATCH) && t.index == n && same_value(&t.v, &v) &&
			     (match || t.expected == mk->args[n]);
		}
		if (!ok) {
			printf("#   trial %u (k=%u cap=%zu) step %u: replica %u key %#x index %llu of %llu led, want %s\n",
			       trial, k, cap, step, r, mk->key, (unsigned long long)n, (unsigned long long)mk->total,
			       want);
			show_took("got", t);
			ndlog_free(log);
			return false;
		}
	}

	bool ok = ndlog_entries(log) == total_led;
	for (unsigned i = 0; i < MKEYS; i++)
		for (unsigned r = 0; r < k; r++)
			ok &= ndlog_count(log, r, mkeys[i].key) == mkeys[i].pos[r];
	uint32_t keys[MKEYS + 1];
	ok &= ndlog_keys(log, keys, MKEYS + 1) == nseen && memcmp(keys, seen, nseen * sizeof keys[0]) == 0;
	if (!ok)
		printf("#   trial %u: counters differ from the model\n", trial);
	ndlog_free(log);
	return ok;
}

static void test_random(void)
{
	unsigned passed = 0, trials = 300;
	for (unsigned trial = 0; trial < trials; trial++)
		if (random_trial(trial))
			passed++;
		else
			break;
	CHECK(passed == trials,
	      "ndlog: %u random runs (k 1..5, cap 1..8 or large, 4 keys, mismatches, retirements) match the model",
	      trials);
}

/* ndlog_last: the value put last for a key, kept after every replica took
 * it (take.c keeps CPU-time clocks from going back with it). */
static void test_last(void)
{
	struct ndlog *log = ndlog_new(2, 4, false);
	CHECK(ndlog_last(log, KEY_A) == NULL, "ndlog: ndlog_last is NULL for a key never seen");
	struct took t = take(log, 0, KEY_A, 0);
	CHECK(is_lead(t, 0) && ndlog_last(log, KEY_A) == NULL, "ndlog: ndlog_last is NULL until a value is put");
	struct nd_value v = val(KEY_A, 0);
	ndlog_put(log, 0, KEY_A, &v);
	const struct nd_value *last = ndlog_last(log, KEY_A);
	CHECK(last != NULL && last->a == v.a && last->b == v.b, "ndlog: ndlog_last is the value just put");
	bool ok = follow(log, 1, KEY_A, 0, 0) && lead(log, 1, KEY_A, 0, 1) && follow(log, 0, KEY_A, 0, 1);
	last = ndlog_last(log, KEY_A);
	v = val(KEY_A, 1);
	CHECK(ok && last != NULL && last->a == v.a && last->b == v.b,
	      "ndlog: ndlog_last is the newest value once every replica took it (the entry itself is dropped)");
	CHECK(ndlog_last(log, KEY_B) == NULL, "ndlog: ndlog_last is per key");
	ndlog_free(log);
}

/* ---- ndlog: keep mode and restart (replacement replicas) ------------- */

static void test_keep_restart(void)
{
	/* k=3 positions, keep: replica 0 and 1 take 50 entries of two keys;
	 * nothing is dropped although everyone passed them. */
	struct ndlog *log = ndlog_new(3, 1000, true);
	bool ok = true;
	for (uint64_t i = 0; i < 50; i++)
		ok &= lead(log, 0, KEY_A, 7, i) && follow(log, 1, KEY_A, 7, i) && lead(log, 1, KEY_B, 8, i) &&
		      follow(log, 0, KEY_B, 8, i);
	CHECK(ok, "ndlog keep: 50 entries of two keys led and followed");
	CHECK(ndlog_complete(log), "ndlog keep: complete while nothing was dropped");
	/* Replica 2 dies and a new one takes its position. */
	ndlog_retire(log, 2);
	CHECK(ndlog_restart(log, 2), "ndlog keep: restart of position 2 can replay everything");
	ok = true;
	for (uint64_t i = 0; i < 50; i++)
		ok &= follow(log, 2, KEY_A, 7, i) && follow(log, 2, KEY_B, 8, i);
	CHECK(ok, "ndlog keep: the new replica 2 follows all 100 old entries with their logged values");
	CHECK(lead(log, 2, KEY_A, 7, 50) && follow(log, 0, KEY_A, 7, 50),
	      "ndlog keep: past the log's end the new replica leads, and the others follow it");
	/* Replica 0 is replaced too, after entry 50. */
	CHECK(ndlog_restart(log, 0) && ndlog_count(log, 0, KEY_A) == 0 && follow(log, 0, KEY_A, 7, 0),
	      "ndlog keep: a restarted position counts from 0 and follows entry 0 again");
	CHECK(ndlog_memory(log) >= 101 * 40 - 1000, "ndlog keep: memory counts the kept entries (%zu bytes)",
	      ndlog_memory(log));
	ndlog_free(log);

	/* The cap still bounds a key: past it the log is incomplete, and a
	 * restarted position is lost on the dropped key but not on others. */
	log = ndlog_new(2, 4, true);
	ok = true;
	for (uint64_t i = 0; i < 6; i++)
		ok &= lead(log, 0, KEY_A, 1, i) && follow(log, 1, KEY_A, 1, i);
	ok &= lead(log, 0, KEY_B, 1, 0);
	CHECK(ok && !ndlog_complete(log), "ndlog keep, cap 4: 6 entries drop 2: the log is incomplete");
	CHECK(!ndlog_restart(log, 1), "ndlog keep, cap 4: a restart says it cannot replay everything");
	CHECK(is_lost(take(log, 1, KEY_A, 1), 0) && follow(log, 1, KEY_B, 1, 0),
	      "ndlog keep, cap 4: the restarted replica is lost on the truncated key, follows the other");
	ndlog_free(log);

	/* Without keep, restart after trimming is incomplete. */
	log = ndlog_new(2, 100, false);
	ok = lead(log, 0, KEY_A, 1, 0) && follow(log, 1, KEY_A, 1, 0);
	CHECK(ok && !ndlog_complete(log) && !ndlog_restart(log, 1),
	      "ndlog without keep: never complete, a restart cannot replay");
	ndlog_free(log);
}

/* ---- ndlog: to the front (a server's stale clock reads) --------------- */

static bool only_a(uint32_t key)
{
	return key == KEY_A;
}

static void test_to_front(void)
{
	struct ndlog *log = ndlog_new(3, 1000, true);
	bool ok = true;
	for (uint64_t i = 0; i < 20; i++)
		ok &= lead(log, 0, KEY_A, 7, i) && lead(log, 0, KEY_B, 8, i);
	CHECK(ok && follow(log, 1, KEY_A, 7, 0), "ndlog front: replica 0 led 20 entries, replica 1 followed one");
	ndlog_to_front_key(log, 1, KEY_A);
	CHECK(ndlog_count(log, 1, KEY_A) == 20 && lead(log, 1, KEY_A, 7, 20) && follow(log, 0, KEY_A, 7, 20),
	      "ndlog front: one key moved to its front: the next call leads, the one ahead follows it");
	CHECK(follow(log, 1, KEY_B, 8, 0), "ndlog front: the other key stays where it was");
	ndlog_to_front(log, 2, only_a);
	CHECK(ndlog_count(log, 2, KEY_A) == 21 && ndlog_count(log, 2, KEY_B) == 0 && follow(log, 2, KEY_B, 8, 0),
	      "ndlog front: by predicate, only the keys it accepts move");
	ndlog_to_front_key(log, 0, KEY_A);
	CHECK(ndlog_count(log, 0, KEY_A) == 21, "ndlog front: a position at the front stays there");
	ndlog_to_front_key(log, 0, 0xdead);
	CHECK(ndlog_complete(log), "ndlog front: an unknown key is no-op, nothing dropped");
	ndlog_free(log);
}

/* ---- ndlog: the start kept past the cap (fresh servers) ---------------- */

static void test_keep_start(void)
{
	/* k=3, cap 10 per kind, the start 8 per kind. KEY_A and KEY_B (one
	 * kind): A 0..3, B 0..2, then A 4..20; keep ends at the 11th entry
	 * (A 7, with 7 of A and 3 of B kept): level 5 fits (5 + 3), 6 does
	 * not: A keeps 0..4 as its start, B all of its 0..2. */
	struct ndlog *log = ndlog_new(3, 10, true);
	ndlog_keep_start(log, 8);
	bool ok = true;
	for (uint64_t i = 0; i < 4; i++)
		ok &= lead(log, 0, KEY_A, 7, i) && follow(log, 1, KEY_A, 7, i) && follow(log, 2, KEY_A, 7, i);
	for (uint64_t i = 0; i < 3; i++)
		ok &= lead(log, 1, KEY_B, 8, i) && follow(log, 0, KEY_B, 8, i) && follow(log, 2, KEY_B, 8, i);
	CHECK(ok && ndlog_complete(log) && ndlog_started(log) == 0, "ndlog start: nothing kept as the start before the cap");
	for (uint64_t i = 4; i < 21; i++)
		ok &= lead(log, 0, KEY_A, 7, i) && follow(log, 1, KEY_A, 7, i) && follow(log, 2, KEY_A, 7, i);
	CHECK(ok && !ndlog_complete(log) && ndlog_started(log) == 8,
	      "ndlog start: past the cap, incomplete, 8 entries kept as the start (%zu)", ndlog_started(log));
	struct nd_value v;
	CHECK(ndlog_value(log, KEY_A, 4, &v) && v.a == val(KEY_A, 4).a && !ndlog_value(log, KEY_A, 5, &v) &&
		      ndlog_value(log, KEY_B, 2, &v) && v.a == val(KEY_B, 2).a && !ndlog_value(log, KEY_B, 3, &v),
	      "ndlog start: entries 0..4 of A and 0..2 of B are found by number; A 5 and B 3 are gone");
	/* Replica 2 is replaced: it replays the start, then is lost past it. */
	ndlog_retire(log, 2);
	CHECK(!ndlog_restart(log, 2), "ndlog start: a restart still says it cannot replay everything");
	ok = true;
	for (uint64_t i = 0; i < 5; i++)
		ok &= follow(log, 2, KEY_A, 7, i);
	CHECK(ok, "ndlog start: the new replica follows A's start, 0..4, with the logged values");
	CHECK(is_lost(take(log, 2, KEY_A, 7), 5) && is_lost(take(log, 2, KEY_A, 7), 6),
	      "ndlog start: past the start it is lost on A (the entries went)");
	CHECK(is_mismatch(take(log, 2, KEY_B, 9), 0, val(KEY_B, 0), 8) && follow(log, 2, KEY_B, 8, 1) &&
		      follow(log, 2, KEY_B, 8, 2),
	      "ndlog start: a start entry's argument is checked; B's whole start follows");
	CHECK(lead(log, 2, KEY_B, 8, 3) && follow(log, 0, KEY_B, 8, 3),
	      "ndlog start: B's start was all of B: past it the new replica leads B's next, the others follow");
	/* The others went on meanwhile, untouched; at the front it leads. */
	CHECK(lead(log, 0, KEY_A, 7, 21) && follow(log, 1, KEY_A, 7, 21), "ndlog start: the others go on as before");
	ndlog_to_front(log, 2, only_a);
	CHECK(lead(log, 2, KEY_A, 7, 22) && follow(log, 0, KEY_A, 7, 22) && follow(log, 1, KEY_A, 7, 22),
	      "ndlog start: moved to the front, the new replica leads again and the others follow");
	CHECK(ndlog_memory(log) >= 8 * sizeof(struct nd_value), "ndlog start: memory counts the start");
	/* The start is never dropped, however far everyone goes. */
	ok = true;
	for (uint64_t i = 23; i < 200; i++)
		ok &= lead(log, 0, KEY_A, 7, i) && follow(log, 1, KEY_A, 7, i) && follow(log, 2, KEY_A, 7, i);
	ndlog_retire(log, 1);
	(void)ndlog_restart(log, 1);
	CHECK(ok && follow(log, 1, KEY_A, 7, 0) && follow(log, 1, KEY_A, 7, 1) && ndlog_started(log) == 8,
	      "ndlog start: 200 entries on, a second new replica replays the same start");
	ndlog_free(log);

	/* Without keep_start (the default), keep's end keeps no start. */
	log = ndlog_new(2, 4, true);
	ok = true;
	for (uint64_t i = 0; i < 6; i++)
		ok &= lead(log, 0, KEY_A, 1, i) && follow(log, 1, KEY_A, 1, i);
	ndlog_retire(log, 1);
	(void)ndlog_restart(log, 1);
	CHECK(ok && ndlog_started(log) == 0 && is_lost(take(log, 1, KEY_A, 1), 0),
	      "ndlog without a start: a restarted position is lost from entry 0");
	ndlog_free(log);
}

/* ---- ndlog: many keys (a server's threads), a kind's cap, reclaiming -- */

enum { THREAD_KIND = 9u << 24 };

static bool thread_kind(uint32_t key)
{
	return (key & 0xff000000u) == THREAD_KIND;
}

static void test_thread_keys(void)
{
	/* 20000 keys of one kind, two entries each, led by 0 and followed
	 * by 1 and 2 in another order: every value found through the index. */
	enum { N = 20000 };
	struct ndlog *log = ndlog_new(3, 1u << 20, true);
	bool ok = true;
	for (uint32_t t = 1; t <= N; t++)
		ok &= lead(log, 0, THREAD_KIND | t, 0, 0) && lead(log, 0, THREAD_KIND | t, 0, 1);
	for (uint32_t t = N; t >= 1; t--)
		ok &= follow(log, 1, THREAD_KIND | t, 0, 0) && follow(log, 2, THREAD_KIND | t, 0, 0) &&
		      follow(log, 2, THREAD_KIND | t, 0, 1) && follow(log, 1, THREAD_KIND | t, 0, 1);
	CHECK(ok, "ndlog threads: 20000 keys led by one replica, followed in reverse order by two");
	CHECK(ndlog_keys(log, NULL, 0) == N && ndlog_complete(log) && ndlog_count(log, 1, THREAD_KIND | 777) == 2,
	      "ndlog threads: keep mode keeps all 20000 keys, complete, counts per key");
	uint32_t first[3];
	ndlog_keys(log, first, 3);
	CHECK(first[0] == (THREAD_KIND | 1) && first[1] == (THREAD_KIND | 2) && first[2] == (THREAD_KIND | 3),
	      "ndlog threads: keys listed in first-seen order");
	ndlog_free(log);

	/* Keep mode, cap 100 per kind: the 101st entry of the kind, over 60
	 * keys, ends keep mode (incomplete); a key of another kind is kept
	 * until its own cap. */
	log = ndlog_new(2, 100, true);
	ok = true;
	for (uint32_t t = 1; t <= 50; t++)
		ok &= lead(log, 0, THREAD_KIND | t, 0, 0) && lead(log, 0, THREAD_KIND | t, 0, 1);
	CHECK(ok && ndlog_complete(log), "ndlog kind cap: 100 entries over 50 keys of one kind: still complete");
	ok = lead(log, 0, KEY_A, 0, 0);
	CHECK(ok && ndlog_complete(log), "ndlog kind cap: another kind's entry does not count against it");
	ok = lead(log, 0, THREAD_KIND | 51, 0, 0);
	CHECK(ok && !ndlog_complete(log), "ndlog kind cap: the 101st entry of the kind: the log is incomplete");
	CHECK(follow(log, 1, THREAD_KIND | 7, 0, 0) && follow(log, 1, THREAD_KIND | 7, 0, 1) &&
		      follow(log, 1, KEY_A, 0, 0),
	      "ndlog kind cap: entries not yet taken by every replica are still served");
	ndlog_free(log);

	/* Without keep, reclaimable keys go once idle: 100000 keys taken by
	 * both replicas leave few tracked; a key of another kind stays; a
	 * key replica 1 has not caught up on stays, with its values. */
	log = ndlog_new(2, 1000, false);
	ndlog_reclaim(log, thread_kind);
	ok = lead(log, 0, KEY_A, 0, 0) && follow(log, 1, KEY_A, 0, 0) && lead(log, 0, THREAD_KIND | 0x3fffff, 0, 0);
	for (uint32_t t = 1; t <= 100000; t++)
		ok &= lead(log, 0, THREAD_KIND | t, 0, 0) && follow(log, 1, THREAD_KIND | t, 0, 0);
	size_t tracked = ndlog_keys(log, NULL, 0);
	CHECK(ok && tracked < 1000, "ndlog reclaim: 100000 idle thread keys swept: %zu tracked", tracked);
	uint32_t keys[1000];
	ndlog_keys(log, keys, 1000);
	bool has_a = false, has_behind = false;
	for (size_t i = 0; i < tracked && i < 1000; i++) {
		has_a |= keys[i] == KEY_A;
		has_behind |= keys[i] == (THREAD_KIND | 0x3fffff);
	}
	CHECK(has_a && has_behind && keys[0] == KEY_A && ndlog_count(log, 0, KEY_A) == 1,
	      "ndlog reclaim: the other kind's key stays, first, with its count");
	CHECK(follow(log, 1, THREAD_KIND | 0x3fffff, 0, 0), "ndlog reclaim: the key a replica is behind on kept its value");
	CHECK(lead(log, 1, THREAD_KIND | 5, 0, 0) && follow(log, 0, THREAD_KIND | 5, 0, 0),
	      "ndlog reclaim: a forgotten key seen again starts afresh: the next call leads, the other follows");
	ndlog_free(log);
}

/* The fast clock path's use (fastclock.h): entries preloaded in order are
 * found by their own numbers; seeking replicas forward drops what all
 * passed (not in keep mode), and a value below the kept ones is gone. */
static void test_value_seek(void)
{
	struct ndlog *log = ndlog_new(2, 1000, false);
	bool ok = true;
	for (int i = 0; i < 50; i++) {
		struct nd_value v = { .a = i, .b = 7 };
		ok &= ndlog_preload(log, KEY_A, 0, &v) == 0;
	}
	struct nd_value v;
	ok &= ndlog_value(log, KEY_A, 0, &v) && v.a == 0 && ndlog_value(log, KEY_A, 49, &v) && v.a == 49;
	CHECK(ok && !ndlog_value(log, KEY_A, 50, &v) && !ndlog_value(log, KEY_B, 0, &v),
	      "ndlog: preloaded entries are found by number, none past the last or of another key");
	ndlog_seek(log, 0, KEY_A, 30);
	CHECK(ndlog_value(log, KEY_A, 0, &v), "ndlog: one replica's seek drops nothing while another is behind");
	ndlog_seek(log, 1, KEY_A, 20);
	CHECK(!ndlog_value(log, KEY_A, 19, &v) && ndlog_value(log, KEY_A, 20, &v) && v.a == 20 &&
		      ndlog_count(log, 0, KEY_A) == 30 && ndlog_count(log, 1, KEY_A) == 20,
	      "ndlog: seeks drop the entries every replica passed; counts follow");
	ndlog_seek(log, 1, KEY_A, 1000);
	CHECK(ndlog_count(log, 1, KEY_A) == 50, "ndlog: a seek past the end stops at the entries put");
	ndlog_seek(log, 0, KEY_B, 5); /* an unknown key: nothing */
	CHECK(ndlog_count(log, 0, KEY_B) == 0, "ndlog: seeking an unknown key does nothing");
	ndlog_free(log);

	/* Keep mode: seeks drop nothing (a replacement replays from 0). */
	log = ndlog_new(2, 1000, true);
	for (int i = 0; i < 10; i++) {
		struct nd_value x = { .a = i };
		ndlog_preload(log, KEY_A, 0, &x);
	}
	ndlog_seek(log, 0, KEY_A, 10);
	ndlog_seek(log, 1, KEY_A, 10);
	CHECK(ndlog_value(log, KEY_A, 0, &v) && v.a == 0 && ndlog_complete(log),
	      "ndlog: in keep mode, seeks past every entry drop none");
	ndlog_free(log);
}

/* A ring grows in place while nothing was dropped from it (realloc: no
 * copy, no second touch of its pages), and is unrolled when it has wrapped:
 * either way every entry keeps its number and value. */
static void test_growth(void)
{
	enum { N = 100000 };
	struct ndlog *log = ndlog_new(2, 1u << 20, true);
	bool ok = log != NULL;
	for (uint64_t i = 0; ok && i < N; i++) {
		struct nd_value v = val(KEY_A, i);
		ok = ndlog_preload(log, KEY_A, i, &v) == 0;
	}
	for (uint64_t i = 0; ok && i < N; i++) {
		uint64_t arg;
		struct nd_value v;
		struct nd_value want = val(KEY_A, i);
		ok = ndlog_entry(log, KEY_A, i, &arg, &v) && arg == i && same_value(&v, &want);
	}
	CHECK(ok && ndlog_kept(log, KEY_A) == N && ndlog_complete(log),
	      "ndlog: %d entries kept from the start (the ring grown in place): each at its number", N);
	ndlog_free(log);

	/* Wrapped: replica 1 keeps taking what replica 0 led (the front
	 * drops, the ring's start moves), then falls behind while the ring
	 * grows from 4 slots to 1024 around the wrap. */
	log = ndlog_new(2, 1u << 20, false);
	ok = log != NULL;
	uint64_t next = 0, taken = 0;
	for (int i = 0; ok && i < 3; i++)
		ok = lead(log, 0, KEY_B, 1, next++);
	for (int i = 0; ok && i < 2; i++)
		ok = follow(log, 1, KEY_B, 1, taken++);
	for (int i = 0; ok && i < 1000; i++)
		ok = lead(log, 0, KEY_B, 1, next++);
	while (ok && taken < next)
		ok = follow(log, 1, KEY_B, 1, taken++);
	CHECK(ok && ndlog_kept(log, KEY_B) == 0,
	      "ndlog: a ring grown after it wrapped: the laggard follows all %llu entries in order",
	      (unsigned long long)next);
	ndlog_free(log);
}

/* Cells: an entry is kept narrow exactly when its argument is below 2^31,
 * its b in [0, 2^32) and the rest 0; each side of every bound, mixed, comes
 * back whole through the ring's growth, its wrap and the cap's drops. */
static void test_cells(void)
{
	static const struct {
		uint64_t arg;
		struct nd_value v;
	} kinds[] = {
		{ 0, { .a = 1700000000, .b = 999999999 } },
		{ 0x7fffffff, { .a = INT64_MIN, .b = 0xffffffff } },
		{ 0x80000000, { .a = 1, .b = 2 } },
		{ UINT64_MAX, { .a = INT64_MAX, .b = 0 } },
		{ 3, { .a = 5, .b = 0x100000000 } },
		{ 3, { .a = 5, .b = -1 } },
		{ 3, { .a = 5, .b = INT64_MIN } },
		{ 3, { .a = 5, .c = -60 } },
		{ 3, { .a = 5, .d = 1 } },
		{ 3, { .a = 5, .err = 22 } },
		{ 7, { .a = -1, .b = 1, .c = 1, .d = 1, .err = 1 } },
	};
	enum { NK = sizeof kinds / sizeof kinds[0], N = 5000, CAP = 37 };
	struct ndlog *log = ndlog_new(2, CAP, false);
	bool ok = log != NULL;
	uint64_t taken = 0;
	for (uint64_t n = 0; ok && n < N; n++) {
		/* A pattern that is not periodic in the ring's sizes. */
		unsigned i = (unsigned)((n * n + 3 * n) % NK);
		struct nd_value v = kinds[i].v;
		v.a += (int64_t)(n % 2) * (kinds[i].v.a < INT64_MAX);
		struct took t = take(log, 0, KEY_A, kinds[i].arg);
		ok = is_lead(t, n);
		ndlog_put(log, 0, KEY_A, &v);
		/* Replica 1 lags by up to CAP - 1, then catches up. */
		if (ok && (n % CAP == CAP - 1 || n == N - 1))
			while (ok && taken <= n) {
				unsigned j = (unsigned)((taken * taken + 3 * taken) % NK);
				struct nd_value w = kinds[j].v;
				w.a += (int64_t)(taken % 2) * (kinds[j].v.a < INT64_MAX);
				ok = is_follow(take(log, 1, KEY_A, kinds[j].arg), taken, w);
				taken++;
			}
	}
	CHECK(ok && taken == N, "ndlog: %d entries of %d kinds, narrow and wide on each side of their bounds, "
	      "through a ring capped at %d: each follows with its own argument and value", N, NK, CAP);
	ndlog_free(log);

	/* The cap drops wide and narrow entries alike: the ring keeps the
	 * last CAP, each readable at its number. */
	log = ndlog_new(1, CAP, true);
	ok = log != NULL;
	for (uint64_t n = 0; ok && n < 1000; n++) {
		struct nd_value v = kinds[n % NK].v;
		v.a ^= (int64_t)n;
		ok = ndlog_preload(log, KEY_B, kinds[n % NK].arg, &v) == 0;
	}
	for (size_t i = 0; ok && i < CAP; i++) {
		uint64_t n = 1000 - CAP + i, arg;
		struct nd_value v, want = kinds[n % NK].v;
		want.a ^= (int64_t)n;
		ok = ndlog_entry(log, KEY_B, i, &arg, &v) && arg == kinds[n % NK].arg && same_value(&v, &want);
	}
	CHECK(ok && ndlog_kept(log, KEY_B) == CAP, "ndlog: past the cap, the last %d entries, narrow and wide, "
	      "each at its place", CAP);
	ndlog_free(log);

	/* Memory: what a key keeps is counted, wide entries whole, and stays
	 * bounded by the cap however many went through (the wide ring drops
	 * with its cells and grows no further than the cap). */
	struct nd_value wide = { .a = 1, .err = 5 }, narrow = { .a = 1, .b = 2 };
	log = ndlog_new(1, 1u << 20, true);
	size_t empty = ndlog_memory(log);
	for (uint64_t n = 0; n < 1024; n++)
		(void)ndlog_preload(log, KEY_A, n, &narrow);
	size_t narrow_mem = ndlog_memory(log) - empty;
	for (uint64_t n = 0; n < 1024; n++)
		(void)ndlog_preload(log, KEY_B, n, &wide);
	size_t wide_mem = ndlog_memory(log) - empty - narrow_mem;
	CHECK(narrow_mem >= 1024 * 16 && narrow_mem < 1024 * 40 && wide_mem >= 1024 * (16 + 40),
	      "ndlog: 1024 clock entries counted in %zu bytes (16 each, not 40); 1024 wide ones in %zu (16 + 40 each)",
	      narrow_mem, wide_mem);
	ndlog_free(log);
	log = ndlog_new(2, CAP, false);
	size_t most = 0;
	ok = true;
	for (uint64_t n = 0; ok && n < 20000; n++) {
		struct nd_value v = n % 3 == 0 ? narrow : wide;
		ok = is_lead(take(log, 0, KEY_A, 1), n);
		ndlog_put(log, 0, KEY_A, &v);
		if (n % 2 == 1)
			for (uint64_t m = n - 1; ok && m <= n; m++)
				ok = is_follow(take(log, 1, KEY_A, 1), m, m % 3 == 0 ? narrow : wide);
		size_t mem = ndlog_memory(log);
		most = mem > most ? mem : most;
	}
	CHECK(ok && most < 2 * CAP * (16 + 40) + 4096,
	      "ndlog: 20000 entries, two in three wide, through a log capped at %d: at most %zu bytes kept", CAP, most);
	ndlog_free(log);
}

int main(void)
{
	test_chacha_block();
	test_chacha_sunscreen();
	test_chacha_zero();
	test_chacha_pieces();
	test_chacha_streams();

	test_basic();
	test_sequence();
	test_keys_do_not_cross();
	test_mismatch();
	test_run_ahead();
	test_counters();
	test_trim();
	test_cap();
	test_retire();
	test_k1();
	test_many();
	test_random();
	test_last();
	test_keep_restart();
	test_keep_start();
	test_to_front();
	test_thread_keys();
	test_value_seek();
	test_growth();
	test_cells();
	return tap_done();
}
