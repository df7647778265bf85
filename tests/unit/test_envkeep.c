/* test_envkeep.c — an exec's environment judged for libdiehard and the
 * run's DIEHARD_CLOCKS (envkeep.h): what makes an exec go unstopped. */
#include <stdbool.h>
#include <string.h>

#include "envkeep.h"
#include "tap.h"

#define LIB "/opt/dh/libdiehard.so"
#define CLOCKS "DIEHARD_CLOCKS=fd=1000,slots=3,exec=8f"

static bool keeps(const char *const *env)
{
	struct envkeep k = { false, false };
	for (; *env != NULL; env++)
		envkeep_entry(&k, *env, LIB, strlen(LIB), CLOCKS);
	return envkeep_ok(&k);
}

int main(void)
{
	const char *both[] = { "PATH=/bin", "LD_PRELOAD=" LIB, CLOCKS, NULL };
	const char *among[] = { CLOCKS, "LD_PRELOAD=/x/a.so:" LIB " /y/b.so", NULL };
	const char *none[] = { NULL };
	const char *no_clocks[] = { "LD_PRELOAD=" LIB, NULL };
	const char *other_clocks[] = { "LD_PRELOAD=" LIB, CLOCKS ",x=1", NULL };
	const char *prefix[] = { "LD_PRELOAD=" LIB ".old", CLOCKS, NULL };
	const char *suffix[] = { "LD_PRELOAD=/x" LIB, CLOCKS, NULL };
	const char *last[] = { "LD_PRELOAD=" LIB, CLOCKS, "LD_PRELOAD=/x/a.so", NULL };
	const char *empty[] = { "LD_PRELOAD=", CLOCKS, NULL };
	CHECK(keeps(both), "LD_PRELOAD naming the library and the run's DIEHARD_CLOCKS");
	CHECK(keeps(among), "the library among others, ':' and ' ' apart, in any order");
	CHECK(!keeps(none), "an empty environment (env -i)");
	CHECK(!keeps(no_clocks), "without DIEHARD_CLOCKS");
	CHECK(!keeps(other_clocks), "another DIEHARD_CLOCKS");
	CHECK(!keeps(prefix) && !keeps(suffix), "a path that only begins or ends like the library's");
	CHECK(!keeps(last), "the last LD_PRELOAD decides, as the loader reads it");
	CHECK(!keeps(empty), "an empty LD_PRELOAD");
	return tap_done();
}
