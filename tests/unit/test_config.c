/* Unit tests of config.c: the DIEHARD_* parsers and environment handling. */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "archipelago.h"
#include "config.h"
#include "tap.h"

static void test_seed(void)
{
	uint64_t s[2] = { 7, 7 };
	CHECK(config_parse_seed("1", s) && s[0] == 1 && s[1] == 0, "seed 1");
	CHECK(config_parse_seed("0x00ff", s) && s[0] == 0xff && s[1] == 0, "seed with 0x prefix");
	CHECK(config_parse_seed("0123456789abcdefFEDCBA9876543210", s) &&
		      s[1] == 0x0123456789abcdefULL && s[0] == 0xfedcba9876543210ULL,
	      "32 hex digits fill both words, high word first");
	CHECK(config_parse_seed("123456789abcdef01", s) && s[1] == 0x1 && s[0] == 0x23456789abcdef01ULL,
	      "17 digits carry into the high word");
	s[0] = s[1] = 42;
	CHECK(!config_parse_seed("", s) && s[0] == 42, "empty seed refused, output untouched");
	CHECK(!config_parse_seed("0x", s), "bare prefix refused");
	CHECK(!config_parse_seed("12g4", s), "non-hex digit refused");
	CHECK(!config_parse_seed("0123456789abcdef0123456789abcdef0", s), "33 digits refused");
	CHECK(!config_parse_seed(" 12", s), "leading space refused");
}

static void test_m(void)
{
	unsigned m = 0;
	CHECK(config_parse_m("2", &m) && m == 2 * M_ONE, "M=2");
	CHECK(config_parse_m("1.5", &m) && m == M_ONE + M_ONE / 2, "M=1.5");
	CHECK(config_parse_m("1.1", &m) && m == M_MIN_FIXED, "M=1.1 is the minimum");
	CHECK(config_parse_m("1024", &m) && m == M_MAX_FIXED, "M=1024 is the maximum");
	m = 99;
	CHECK(!config_parse_m("1", &m) && m == 99, "M=1 refused (the heap could fill)");
	CHECK(!config_parse_m("1.05", &m), "M below 1.1 refused");
	CHECK(!config_parse_m("1025", &m), "M above 1024 refused");
	CHECK(!config_parse_m("99999999999999999999", &m), "huge M refused without overflow");
	CHECK(!config_parse_m("2.", &m), "trailing dot refused");
	CHECK(!config_parse_m(".5", &m), "missing integer part refused");
	CHECK(!config_parse_m("2x", &m), "trailing junk refused");
	CHECK(!config_parse_m("", &m), "empty refused");
	CHECK(!config_parse_m("-3", &m), "negative refused");
}

static void test_window(void)
{
	unsigned w = 99;
	CHECK(config_parse_window("4096", &w) && w == 12, "DIEHARD_WINDOW=4096: 2^12 slots");
	CHECK(config_parse_window("64", &w) && w == 6, "64 is the smallest window");
	CHECK(config_parse_window("16777216", &w) && w == 24, "2^24 is the largest window");
	CHECK(config_parse_window("all", &w) && w == 0 && config_parse_window("0", &w) && w == 0,
	      "'all' and 0: the whole class");
	w = 99;
	CHECK(!config_parse_window("32", &w) && w == 99, "below 64 refused, setting untouched");
	CHECK(!config_parse_window("33554432", &w), "above 2^24 refused");
	CHECK(!config_parse_window("3000", &w), "not a power of two refused");
	CHECK(!config_parse_window("99999999999999999999999", &w), "huge refused without overflow");
	CHECK(!config_parse_window("", &w) && !config_parse_window("4k", &w) && !config_parse_window("-64", &w),
	      "empty, suffixed, negative refused");
}

static void test_load(void)
{
	struct config c;
	unsetenv("DIEHARD_SEED");
	unsetenv("DIEHARD_M");
	unsetenv("DIEHARD_FILL");
	unsetenv("DIEHARD_STATS");
	unsetenv("DIEHARD_SAFE_STRINGS");
	unsetenv("DIEHARD_PLACEMENT");
	config_load(&c);
	CHECK(c.m_fixed == 2 * M_ONE && !c.fill && !c.stats && c.safe_strings && !c.seed_given && !c.clustered,
	      "defaults: M=2, no fill, no stats, safe strings on, random seed, scattered placement");
	struct config c2;
	config_load(&c2);
	CHECK(c.seed[0] != c2.seed[0] || c.seed[1] != c2.seed[1], "two random seeds differ");

	setenv("DIEHARD_SEED", "abc", 1);
	setenv("DIEHARD_M", "4", 1);
	setenv("DIEHARD_FILL", "random", 1);
	setenv("DIEHARD_STATS", "1", 1);
	setenv("DIEHARD_SAFE_STRINGS", "0", 1);
	setenv("DIEHARD_PLACEMENT", "clustered", 1);
	config_load(&c);
	CHECK(c.clustered, "DIEHARD_PLACEMENT=clustered read");
	CHECK(c.seed_given && c.seed[0] == 0xabc && c.seed[1] == 0, "DIEHARD_SEED read");
	CHECK(c.m_fixed == 4 * M_ONE && c.fill && c.stats && !c.safe_strings, "every variable read");

	setenv("DIEHARD_M", "zero", 1);
	setenv("DIEHARD_SEED", "not-hex", 1);
	setenv("DIEHARD_FILL", "sometimes", 1);
	setenv("DIEHARD_PLACEMENT", "tidy", 1);
	config_load(&c);
	CHECK(c.m_fixed == 2 * M_ONE && !c.seed_given && !c.fill && !c.clustered, "malformed values fall back to defaults");
	unsetenv("DIEHARD_PLACEMENT");

	CHECK(config_getenv("DIEHARD_STATS") != NULL && strcmp(config_getenv("DIEHARD_STATS"), "1") == 0,
	      "config_getenv finds a variable");
	setenv("DIEHARD_STATSX", "9", 1);
	unsetenv("DIEHARD_STATS");
	CHECK(config_getenv("DIEHARD_STATS") == NULL, "config_getenv does not match a longer name");
}

/* DIEHARD_FENCE and DIEHARD_FENCE_ACTION (fence.h), garbage included. */
static void test_fence(void)
{
	struct fence_config f = { .on = false, .rate = 1, .min = 0, .max = SIZE_MAX, .action = FENCE_READONLY };
	CHECK(fence_parse("all", &f) && f.on && f.rate == 1 && f.min == 0 && f.max == SIZE_MAX &&
	      f.action == FENCE_READONLY, "all: every size, the action kept");
	CHECK(fence_parse("1/1000", &f) && f.rate == 1000, "1/1000: one in a thousand");
	CHECK(fence_parse("1/1:16-4k", &f) && f.rate == 1 && f.min == 16 && f.max == 4096, "a size range, with k");
	CHECK(fence_parse("all:0-0", &f) && f.min == 0 && f.max == 0, "an empty range is a range");
	struct fence_config before = f;
	static const char *const bad[] = { "", "some", "1/0", "1/", "2/3", "1/x", "all:", "all:10", "all:10-",
					   "all:20-10", "all:1-2-3", "1/5 ", "all:-5", "1/99999999999999999999",
					   "all:99999999999999999999k-1", "ALL", "1/1073741825" };
	int refused = 1;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		refused &= !fence_parse(bad[i], &f);
		refused &= memcmp(&f, &before, sizeof f) == 0;
	}
	CHECK(refused, "malformed values refused, the setting untouched");
	enum fence_action a = FENCE_ABORT;
	CHECK(fence_parse_action("readwrite", &a) && a == FENCE_READWRITE && fence_parse_action("readonly", &a) &&
	      a == FENCE_READONLY && fence_parse_action("abort", &a) && a == FENCE_ABORT, "the three actions");
	CHECK(!fence_parse_action("continue", &a) && !fence_parse_action("", &a) && a == FENCE_ABORT,
	      "another action refused");

	setenv("DIEHARD_FENCE", "1/10:1-100", 1);
	setenv("DIEHARD_FENCE_ACTION", "readwrite", 1);
	struct config c;
	config_load(&c);
	CHECK(c.fence.on && c.fence.rate == 10 && c.fence.max == 100 && c.fence.action == FENCE_READWRITE,
	      "DIEHARD_FENCE and DIEHARD_FENCE_ACTION read");
	setenv("DIEHARD_FENCE", "often", 1);
	setenv("DIEHARD_FENCE_ACTION", "pray", 1);
	config_load(&c);
	CHECK(!c.fence.on && c.fence.action == FENCE_ABORT, "malformed: fence off, action abort");
	unsetenv("DIEHARD_FENCE");
	unsetenv("DIEHARD_FENCE_ACTION");
	config_load(&c);
	CHECK(!c.fence.on, "unset: fence off");
}

/* DIEHARD_ARCHIPELAGO (archipelago.h): a hot space of 16 to 2^24 pages. */
static void test_archipelago(void)
{
	size_t hot = 7;
	CHECK(arch_parse("16", &hot) && hot == 16 && arch_parse("16777216", &hot) && hot == 16777216 &&
	      arch_parse("4096", &hot) && hot == 4096, "hot pages read");
	static const char *const bad[] = { "", "15", "0", "16777217", "4k", "-16", " 64", "64 ", "x",
					   "99999999999999999999999", "1e3" };
	int refused = 1;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		refused &= !arch_parse(bad[i], &hot) && hot == 4096;
	CHECK(refused, "malformed or out-of-range hot spaces refused, the value untouched");
	setenv("DIEHARD_ARCHIPELAGO", "128", 1);
	struct config c;
	config_load(&c);
	CHECK(c.arch_hot == 128, "DIEHARD_ARCHIPELAGO read");
	setenv("DIEHARD_ARCHIPELAGO", "lots", 1);
	config_load(&c);
	CHECK(c.arch_hot == 0, "malformed: off");
	unsetenv("DIEHARD_ARCHIPELAGO");
}

int main(void)
{
	test_archipelago();
	test_fence();
	test_seed();
	test_m();
	test_window();
	test_load();
	return tap_done();
}
