/* Unit tests of utf8.c: valid UTF-8 of every length kept as it is (the
 * boundaries of each range included), and every kind of invalid sequence
 * written byte by byte as \xNN: stray continuation bytes, truncated
 * sequences (also at the end of the string), overlong forms, surrogates,
 * code points past U+10FFFF, bytes F5-FF; NUL kept; lengths exact. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "utf8.h"

/* Whether escaping in (n bytes) gives exactly want. */
static bool escapes_to(const char *in, size_t n, const char *want, size_t want_len)
{
	size_t len = 0;
	char *got = utf8_escape(in, n, &len);
	bool ok = got != NULL && len == want_len && memcmp(got, want, len) == 0 && got[len] == '\0';
	if (!ok)
		printf("#   got '%s' (%zu bytes), want '%s' (%zu bytes)\n", got ? got : "(null)", len, want, want_len);
	free(got);
	return ok;
}

#define SAME(s) escapes_to(s, sizeof s - 1, s, sizeof s - 1)
#define ESC(s, w) escapes_to(s, sizeof s - 1, w, sizeof w - 1)

int main(void)
{
	CHECK(SAME(""), "the empty string");
	CHECK(SAME("plain ASCII \x01\x7f"), "ASCII, control bytes and DEL kept");
	CHECK(SAME("caf\xc3\xa9 \xc2\x80 \xdf\xbf"), "two-byte sequences, C2 80 and DF BF included");
	CHECK(SAME("\xe0\xa0\x80 \xe2\x82\xac \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf"),
	      "three-byte sequences: E0 A0 80, the euro sign, ED 9F BF (last before the surrogates), EF BF BF");
	CHECK(SAME("\xf0\x90\x80\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), "four-byte sequences up to U+10FFFF");
	CHECK(ESC("caf\xe9", "caf\\xE9"), "Latin-1 e-acute: \\xE9, uppercase hex");
	CHECK(ESC("a\x80z", "a\\x80z"), "a stray continuation byte");
	CHECK(ESC("\xc3", "\\xC3"), "a sequence cut by the end of the string");
	CHECK(ESC("\xe2\x82", "\\xE2\\x82"), "a three-byte sequence cut after two bytes");
	CHECK(ESC("\xe2\x82z", "\\xE2\\x82z"), "a sequence cut by an ASCII byte");
	CHECK(ESC("\xc0\xaf \xc1\xbf", "\\xC0\\xAF \\xC1\\xBF"), "overlong two-byte forms (C0, C1)");
	CHECK(ESC("\xe0\x80\xaf", "\\xE0\\x80\\xAF"), "an overlong three-byte form");
	CHECK(ESC("\xf0\x80\x80\xaf", "\\xF0\\x80\\x80\\xAF"), "an overlong four-byte form");
	CHECK(ESC("\xed\xa0\x80", "\\xED\\xA0\\x80"), "a surrogate (U+D800)");
	CHECK(ESC("\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80"), "U+110000, past the last code point");
	CHECK(ESC("\xf5\xff\xfe", "\\xF5\\xFF\\xFE"), "bytes F5-FF");
	CHECK(ESC("\xe9\xc3\xa9", "\\xE9\xc3\xa9"), "an invalid byte, then a valid sequence kept");
	CHECK(ESC("\\xE9", "\\xE9"), "a literal backslash-x is kept as it is");
	CHECK(escapes_to("a\0b", 3, "a\0b", 3), "a NUL byte is valid UTF-8: kept");
	CHECK(utf8_sequence((const unsigned char *)"\xf0\x9f\x98\x80", 4) == 4 &&
		      utf8_sequence((const unsigned char *)"\xf0\x9f\x98\x80", 3) == 0 &&
		      utf8_sequence((const unsigned char *)"x", 0) == 0,
	      "utf8_sequence: the length, 0 when cut short or empty");
	/* Every single byte: valid alone only below 80. */
	bool all = true;
	for (int b = 0; b < 256; b++) {
		unsigned char c = (unsigned char)b;
		all &= utf8_sequence(&c, 1) == (b < 0x80 ? 1u : 0u);
	}
	CHECK(all, "each byte alone: valid below 80, invalid from 80 on");
	return tap_done();
}
