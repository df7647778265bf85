/*
 * sup_gen: writes a deterministic stream of pseudo-random bytes (NULs and
 * every other byte value included) for the supervisor's end-to-end tests.
 *
 *   sup_gen BYTES [SEED]
 *
 * BYTES is a decimal count with an optional K, M or G suffix (powers of
 * 1024). The same BYTES and SEED always give the same bytes, so a plain run
 * is the reference for a run under diehard.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	switch (*end) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	default: break;
	}
	if (errno != 0 || end == s || *end != '\0') {
		fprintf(stderr, "sup_gen: bad size '%s'\n", s);
		exit(2);
	}
	return (uint64_t)v << shift;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: sup_gen BYTES [SEED]\n");
		return 2;
	}
	uint64_t left = parse_size(argv[1]);
	uint64_t x = 0x9e3779b97f4a7c15ULL ^ (argc == 3 ? strtoull(argv[2], NULL, 10) : 1);
	static uint64_t buf[8192];
	while (left > 0) {
		for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
			/* splitmix64 */
			uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			buf[i] = z ^ (z >> 31);
		}
		size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
		const char *p = (const char *)buf;
		while (n > 0) {
			ssize_t w = write(STDOUT_FILENO, p, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				perror("sup_gen: write");
				return 1;
			}
			p += w;
			n -= (size_t)w;
			left -= (uint64_t)w;
		}
	}
	return 0;
}
