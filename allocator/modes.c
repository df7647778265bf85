/* modes.c — config_load: the heap's settings (config.c) and the modes that
 * watch single allocations (fills, flips, traces, statistics, fence,
 * Archipelago), whose parsers live with their modules. Apart from config.c
 * so that a heap without those modules (libdiehard-critical.so's, see
 * critical/backend.h) links without them. */
#include "config.h"

#include <string.h>

#include "archipelago.h"

void config_load(struct config *cfg)
{
	const char *v;

	config_load_heap(cfg);
	cfg->fill = false;
	cfg->fill_mode = FILL_NONE;
	if ((v = config_getenv("DIEHARD_FILL")) != NULL) {
		if (strcmp(v, "random") == 0) {
			cfg->fill = true;
			cfg->fill_mode = FILL_RANDOM;
		} else if (keyed_parse_fill(v, &cfg->fill_mode, &cfg->fill_seed)) {
			/* Keyed: objects are filled at hand-out by keyed.c, not from
			 * the random stream, so placement stays the seed's. */
		} else if (strcmp(v, "") != 0 && strcmp(v, "none") != 0 && strcmp(v, "0") != 0) {
			config_warn_bad("DIEHARD_FILL", v, "'random', 'pattern:HEX', 'inverse:HEX', 'zero' or 'none'", "none");
		}
	}
	cfg->flip = (struct flip){ .on = false };
	if ((v = config_getenv("DIEHARD_FLIP")) != NULL && v[0] != '\0' && !keyed_parse_flip(v, &cfg->flip))
		config_warn_bad("DIEHARD_FLIP", v, "P/T/lo-hi[/blo-bhi]", "no flip");
	cfg->trace_at = (struct keyed_at){ .on = false };
	if ((v = config_getenv("DIEHARD_TRACE_AT")) != NULL && v[0] != '\0' && !keyed_parse_at(v, &cfg->trace_at))
		config_warn_bad("DIEHARD_TRACE_AT", v, "P/T/N", "no trace");

	cfg->stats = config_switch("DIEHARD_STATS", false);
	cfg->safe_strings = config_switch("DIEHARD_SAFE_STRINGS", true);
	cfg->fence = (struct fence_config){ .on = false, .rate = 1, .min = 0, .max = SIZE_MAX, .action = FENCE_ABORT };
	if ((v = config_getenv("DIEHARD_FENCE_ACTION")) != NULL && !fence_parse_action(v, &cfg->fence.action))
		config_warn_bad("DIEHARD_FENCE_ACTION", v, "'abort', 'readonly' or 'readwrite'", "abort");
	if ((v = config_getenv("DIEHARD_FENCE")) != NULL && v[0] != '\0' && !fence_parse(v, &cfg->fence))
		config_warn_bad("DIEHARD_FENCE", v, "'all' or '1/N', optionally ':MIN-MAX' bytes", "no fence");
	if ((v = config_getenv("DIEHARD_FENCE_LOG")) != NULL && v[0] != '\0')
		cfg->fence.log = v;
	cfg->arch_hot = 0;
	if ((v = config_getenv("DIEHARD_ARCHIPELAGO")) != NULL && v[0] != '\0' && !arch_parse(v, &cfg->arch_hot))
		config_warn_bad("DIEHARD_ARCHIPELAGO", v, "a number of hot pages from 16 to 16777216", "off");
}
