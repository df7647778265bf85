/* envkeep.c — see envkeep.h. */
#include "envkeep.h"

#include <string.h>

void envkeep_entry(struct envkeep *k, const char *entry, const char *lib, size_t lib_len, const char *clocks)
{
	if (strncmp(entry, "DIEHARD_CLOCKS=", 15) == 0) {
		k->clocks = strcmp(entry, clocks) == 0;
		return;
	}
	if (strncmp(entry, "LD_PRELOAD=", 11) != 0)
		return;
	k->preload = false;
	for (const char *p = entry + 11; *p != '\0';) {
		size_t n = strcspn(p, ": ");
		if (n == lib_len && memcmp(p, lib, n) == 0)
			k->preload = true;
		p += n;
		p += *p != '\0';
	}
}
