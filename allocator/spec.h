/* spec.h — parsing the KEY=VALUE,... settings of the fault injectors
 * (DIEHARD_INJECT, inject.h; DIEHARD_CORRUPT, corrupt.h).
 *
 * A bad value is fatal: one line naming the variable, exit status 125. An
 * injector that silently injected nothing would make a benchmark lie. No
 * allocation, no stdio: these run inside the allocator's start-up.
 */
#ifndef DIEHARD_SPEC_H
#define DIEHARD_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One KEY=VALUE piece of a setting: the key [key, key + klen), the value
 * [value, end). */
struct spec_item {
	const char *key;
	size_t klen;
	const char *value;
	const char *end;
};

/* The next piece of spec at *at (moved past it and its comma); false at the
 * end. A piece without '=' is fatal. */
bool spec_next(const char *var, const char *spec, const char **at, struct spec_item *it);

/* Whether the piece's key is key. */
static inline bool spec_is(const struct spec_item *it, const char *key)
{
	return it->klen == strlen(key) && memcmp(it->key, key, it->klen) == 0;
}

/* "diehard: VAR: what: arg" on stderr, then _exit(125); arg may be NULL. */
_Noreturn void spec_die(const char *var, const char *what, const char *arg);

/* The decimal number in [s, end); what names the whole setting in errors. */
uint64_t spec_u64(const char *var, const char *s, const char *end, const char *what);

/* A probability in [s, end): "0.5", "1", "0", ".01" -> rate x 2^64, saturated. */
uint64_t spec_rate(const char *var, const char *s, const char *end, const char *what);

#endif
