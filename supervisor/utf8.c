/* utf8.c — see utf8.h. The validity rules are RFC 3629's (table 3-7 of the
 * Unicode standard), the same jansson checks, so what comes out is always
 * accepted by json_stringn. */
#include "utf8.h"

#include <stdbool.h>
#include <stdlib.h>

/* Whether b is a continuation byte within [lo, hi] (the second byte of
 * some sequences has a narrower range than 80-BF). */
static bool cont(unsigned char b, unsigned char lo, unsigned char hi)
{
	return b >= lo && b <= hi;
}

size_t utf8_sequence(const unsigned char *p, size_t n)
{
	if (n == 0)
		return 0;
	unsigned char b = p[0];
	if (b < 0x80)
		return 1;
	/* The first byte decides the length and the range of the second. */
	size_t len = 0;
	unsigned char lo = 0x80, hi = 0xBF;
	if (b >= 0xC2 && b <= 0xDF) {
		len = 2;
	} else if (b >= 0xE0 && b <= 0xEF) {
		len = 3;
		if (b == 0xE0)
			lo = 0xA0; /* no overlong forms */
		if (b == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (b >= 0xF0 && b <= 0xF4) {
		len = 4;
		if (b == 0xF0)
			lo = 0x90; /* no overlong forms */
		if (b == 0xF4)
			hi = 0x8F; /* nothing past U+10FFFF */
	}
	if (len == 0)
		return 0; /* 80-C1: a continuation byte or an overlong form; F5-FF */
	if (n < len || !cont(p[1], lo, hi))
		return 0;
	for (size_t i = 2; i < len; i++)
		if (!cont(p[i], 0x80, 0xBF))
			return 0;
	return len;
}

char *utf8_escape(const char *s, size_t n, size_t *outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	/* Each byte becomes at most four. */
	if (n > ((size_t)-1 - 1) / 4)
		return NULL;
	char *out = malloc(4 * n + 1), *o = out;
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_sequence(p + i, n - i);
		if (len == 0) {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[p[i] >> 4];
			*o++ = hex[p[i] & 15];
			i++;
			continue;
		}
		for (size_t j = 0; j < len; j++)
			*o++ = (char)p[i + j];
		i += len;
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return out;
}
