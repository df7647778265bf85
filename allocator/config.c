/* config.c — the DIEHARD_* variables: the environment, the heap's settings
 * and the parsers; the modes' are read by modes.c. See config.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "os.h"

extern char **environ;

/* When malloc is first called from inside ld.so, libc's environ may not be set
 * yet. We then read /proc/self/environ once and keep just the DIEHARD_*
 * entries, NUL-separated, in this buffer. */
static char proc_env[1024];
static size_t proc_env_len;
static bool proc_env_read;

static void proc_env_keep(const char *entry, size_t len)
{
	if (len < 8 || strncmp(entry, "DIEHARD_", 8) != 0)
		return;
	if (proc_env_len + len + 1 > sizeof proc_env)
		return;
	memcpy(proc_env + proc_env_len, entry, len);
	proc_env_len += len;
	proc_env[proc_env_len++] = '\0';
}

static void proc_env_load(void)
{
	char block[4096];
	char entry[256];
	size_t elen = 0;
	bool too_long = false;

	proc_env_read = true;
	int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t n = read(fd, block, sizeof block);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (block[i] == '\0') {
				if (!too_long)
					proc_env_keep(entry, elen);
				elen = 0;
				too_long = false;
			} else if (elen < sizeof entry) {
				entry[elen++] = block[i];
			} else {
				too_long = true;
			}
		}
	}
	(void)close(fd);
}

static const char *match(const char *entry, const char *name, size_t nlen)
{
	if (strncmp(entry, name, nlen) == 0 && entry[nlen] == '=')
		return entry + nlen + 1;
	return NULL;
}

const char *config_getenv(const char *name)
{
	size_t nlen = strlen(name);
	const char *v;

	if (environ != NULL) {
		for (char **e = environ; *e != NULL; e++)
			if ((v = match(*e, name, nlen)) != NULL)
				return v;
		return NULL;
	}
	if (!proc_env_read)
		proc_env_load();
	for (size_t off = 0; off < proc_env_len; off += strlen(proc_env + off) + 1)
		if ((v = match(proc_env + off, name, nlen)) != NULL)
			return v;
	return NULL;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool config_parse_seed(const char *s, uint64_t seed[2])
{
	uint64_t lo = 0, hi = 0;
	size_t n = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s[n] != '\0'; n++) {
		int d = hex_value(s[n]);
		if (d < 0 || n >= 32)
			return false;
		hi = (hi << 4) | (lo >> 60);
		lo = (lo << 4) | (uint64_t)d;
	}
	if (n == 0)
		return false;
	seed[0] = lo;
	seed[1] = hi;
	return true;
}

bool config_parse_m(const char *s, unsigned *m_fixed)
{
	uint64_t whole = 0, frac_num = 0, frac_den = 1;
	size_t i = 0;

	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		whole = whole * 10 + (uint64_t)(s[i] - '0');
		if (whole > 1024)
			return false;
	}
	if (i == 0)
		return false;
	if (s[i] == '.') {
		size_t digits = 0;
		for (i++; s[i] >= '0' && s[i] <= '9'; i++, digits++) {
			if (digits >= 6)
				return false;
			frac_num = frac_num * 10 + (uint64_t)(s[i] - '0');
			frac_den *= 10;
		}
		if (digits == 0)
			return false;
	}
	if (s[i] != '\0')
		return false;
	uint64_t fixed = whole * M_ONE + (frac_num * M_ONE + frac_den / 2) / frac_den;
	if (fixed < M_MIN_FIXED || fixed > M_MAX_FIXED)
		return false;
	*m_fixed = (unsigned)fixed;
	return true;
}

bool config_parse_window(const char *s, unsigned *window_shift)
{
	if (strcmp(s, "all") == 0 || strcmp(s, "0") == 0) {
		*window_shift = 0;
		return true;
	}
	uint64_t n = 0;
	size_t i = 0;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		n = n * 10 + (uint64_t)(s[i] - '0');
		if (n > ((uint64_t)1 << WINDOW_MAX_SHIFT))
			return false;
	}
	if (i == 0 || s[i] != '\0' || (n & (n - 1)) != 0 || n < ((uint64_t)1 << WINDOW_MIN_SHIFT))
		return false;
	*window_shift = (unsigned)__builtin_ctzll(n);
	return true;
}

void config_warn_bad(const char *name, const char *value, const char *expected, const char *fallback)
{
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: ");
	msg_str(&m, name);
	msg_str(&m, "='");
	msg_str(&m, value);
	msg_str(&m, "' is not ");
	msg_str(&m, expected);
	msg_str(&m, "; using ");
	msg_str(&m, fallback);
	msg_send(&m);
}

bool config_switch(const char *name, bool fallback)
{
	static const char *const on[] = { "1", "on", "yes", "true" };
	static const char *const off[] = { "", "0", "off", "no", "false" };
	const char *v = config_getenv(name);

	if (v == NULL)
		return fallback;
	for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
		if (strcmp(v, on[i]) == 0)
			return true;
	for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
		if (strcmp(v, off[i]) == 0)
			return false;
	config_warn_bad(name, v, "1 or 0", fallback ? "1" : "0");
	return fallback;
}

void config_load_heap(struct config *cfg)
{
	const char *v;

	cfg->m_fixed = 2 * M_ONE;
	if ((v = config_getenv("DIEHARD_M")) != NULL && !config_parse_m(v, &cfg->m_fixed))
		config_warn_bad("DIEHARD_M", v, "a number from 1.1 to 1024", "2");
	cfg->window_shift = WINDOW_DEFAULT_SHIFT;
	if ((v = config_getenv("DIEHARD_WINDOW")) != NULL && !config_parse_window(v, &cfg->window_shift))
		config_warn_bad("DIEHARD_WINDOW", v, "a power of two from 64 to 16777216, or 'all'", "4096");

	cfg->clustered = false;
	if ((v = config_getenv("DIEHARD_PLACEMENT")) != NULL) {
		if (strcmp(v, "clustered") == 0)
			cfg->clustered = true;
		else if (strcmp(v, "scattered") != 0)
			config_warn_bad("DIEHARD_PLACEMENT", v, "'scattered' or 'clustered'", "scattered");
	}

	/* Every mode off: config_load (modes.c) reads them. */
	cfg->fill = false;
	cfg->fill_mode = FILL_NONE;
	cfg->fill_seed = 0;
	cfg->flip = (struct flip){ .on = false };
	cfg->trace_at = (struct keyed_at){ .on = false };
	cfg->stats = false;
	cfg->safe_strings = true;
	cfg->fence = (struct fence_config){ .on = false, .rate = 1, .min = 0, .max = SIZE_MAX, .action = FENCE_ABORT };
	cfg->arch_hot = 0;

	cfg->seed_given = false;
	if ((v = config_getenv("DIEHARD_SEED")) != NULL) {
		if (config_parse_seed(v, cfg->seed))
			cfg->seed_given = true;
		else
			config_warn_bad("DIEHARD_SEED", v, "1 to 32 hex digits", "a random seed");
	}
	if (!cfg->seed_given && !os_random(cfg->seed, sizeof cfg->seed)) {
		/* No entropy source at all (a sandbox without /dev): fall back on
		 * what differs between runs, and say so, since the heap is then
		 * far less random than the user expects. */
		uintptr_t here = (uintptr_t)&here;
		cfg->seed[0] = (uint64_t)here ^ ((uint64_t)getpid() << 32);
		cfg->seed[1] = (uint64_t)(uintptr_t)cfg ^ (uint64_t)(uintptr_t)environ;
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: no getrandom or /dev/urandom; heap seed is weak");
		msg_send(&m);
	}
	if (!cfg->seed_given) {
		/* Under diehard, getrandom, /dev/urandom and even AT_RANDOM give
		 * every replica the same bytes (a program's own randomness must
		 * agree), but heaps must differ: a replica's process that lost
		 * DIEHARD_SEED (a cleared environment) still gets its own heap
		 * from what nothing virtualizes: the time-stamp counter and where
		 * the kernel put its stack. */
		uintptr_t here = (uintptr_t)&here;
#if defined(__x86_64__)
		cfg->seed[0] ^= (uint64_t)__builtin_ia32_rdtsc();
#endif
		cfg->seed[1] ^= (uint64_t)here;
	}
}
