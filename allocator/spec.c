/* spec.c — see spec.h. */
#include "spec.h"

#include <string.h>
#include <unistd.h>

_Noreturn void spec_die(const char *var, const char *what, const char *arg)
{
	static const char pre[] = "diehard: ";
	(void)!write(2, pre, sizeof pre - 1);
	(void)!write(2, var, strlen(var));
	(void)!write(2, ": ", 2);
	(void)!write(2, what, strlen(what));
	if (arg != NULL) {
		(void)!write(2, ": ", 2);
		(void)!write(2, arg, strlen(arg));
	}
	(void)!write(2, "\n", 1);
	_exit(125);
}

uint64_t spec_u64(const char *var, const char *s, const char *end, const char *what)
{
	if (s == end)
		spec_die(var, "empty number in", what);
	uint64_t v = 0;
	for (const char *c = s; c < end; c++) {
		if (*c < '0' || *c > '9' || v > (UINT64_MAX - 9) / 10)
			spec_die(var, "not a number in", what);
		v = v * 10 + (uint64_t)(*c - '0');
	}
	return v;
}

uint64_t spec_rate(const char *var, const char *s, const char *end, const char *what)
{
	uint64_t whole = 0, frac = 0, scale = 1;
	const char *c = s;
	for (; c < end && *c >= '0' && *c <= '9'; c++)
		whole = whole * 10 + (uint64_t)(*c - '0');
	if (c < end && *c == '.')
		for (c++; c < end && *c >= '0' && *c <= '9' && scale < 1000000000000ULL; c++) {
			frac = frac * 10 + (uint64_t)(*c - '0');
			scale *= 10;
		}
	if (c != end || c == s || whole > 1 || (whole == 1 && frac != 0))
		spec_die(var, "a rate must be a number from 0 to 1 in", what);
	if (whole == 1)
		return UINT64_MAX;
	/* frac / scale x 2^64, in 128-bit arithmetic */
	unsigned __int128 x = ((unsigned __int128)frac << 64) / scale;
	return (uint64_t)x;
}

bool spec_next(const char *var, const char *spec, const char **at, struct spec_item *it)
{
	const char *s = *at;
	if (*s == '\0')
		return false;
	const char *end = strchr(s, ',');
	if (end == NULL)
		end = s + strlen(s);
	const char *eq = memchr(s, '=', (size_t)(end - s));
	if (eq == NULL)
		spec_die(var, "expected KEY=VALUE", spec);
	*it = (struct spec_item){ .key = s, .klen = (size_t)(eq - s), .value = eq + 1, .end = end };
	*at = *end ? end + 1 : end;
	return true;
}
