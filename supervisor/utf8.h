/* utf8.h — any byte string as valid UTF-8, for the JSON report: jansson
 * refuses strings that are not UTF-8, and argv, paths and the environment
 * are bytes (a Latin-1 file name is not UTF-8). */
#ifndef DIEHARD_UTF8_H
#define DIEHARD_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if the
 * bytes there are not one: a stray or missing continuation byte, an
 * overlong form, a surrogate, a code point past U+10FFFF. */
size_t utf8_sequence(const unsigned char *p, size_t n);

/* s (n bytes) with valid UTF-8 kept as it is and each byte that is not
 * part of a valid sequence written as the four characters \xNN (uppercase
 * hex). Returns a malloc'ed string of *outlen bytes, NUL-terminated, or
 * NULL when out of memory. A NUL byte in s is valid UTF-8 and kept. */
char *utf8_escape(const char *s, size_t n, size_t *outlen);

#endif
