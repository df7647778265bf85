/*
 * nd_random: reads random bytes every way a program usually does, for the
 * virtualization tests (tests/diehard_virtualize.bats).
 *
 *   nd_random
 *
 * Prints seven lines, "WHAT HEX": getrandom(2) of 32 bytes, getrandom with
 * GRND_NONBLOCK of 16 bytes, 32 bytes read(2) from /dev/urandom, 32 from
 * /dev/random, 16 through fopen("/dev/urandom") and fread, and the 64-bit
 * FNV-1a hash of 1 MiB from getrandom and of 1 MiB read from /dev/urandom in a
 * loop.  Plainly run, every run prints other bytes; under diehard's
 * virtualization every replica prints the same ones.  Exits 1 on any error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static void die(const char *what)
{
	fprintf(stderr, "nd_random: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void print_hex(const char *what, const unsigned char *p, size_t n)
{
	printf("%s ", what);
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* getrandom until N bytes are in (a big request may come back short). */
static void fill_getrandom(unsigned char *p, size_t n, unsigned flags, const char *what)
{
	while (n > 0) {
		ssize_t r = getrandom(p, n, flags);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			die(what);
		}
		p += r;
		n -= (size_t)r;
	}
}

/* read(2) until N bytes are in; the device is opened and closed here. */
static void read_device(const char *path, unsigned char *p, size_t n, size_t chunk)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	while (n > 0) {
		ssize_t r = read(fd, p, n < chunk ? n : chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			die(path);
		}
		p += r;
		n -= (size_t)r;
	}
	if (close(fd) != 0)
		die(path);
}

int main(void)
{
	unsigned char b[32];

	fill_getrandom(b, 32, 0, "getrandom(32)");
	print_hex("getrandom", b, 32);

	fill_getrandom(b, 16, GRND_NONBLOCK, "getrandom(16, GRND_NONBLOCK)");
	print_hex("getrandom_nonblock", b, 16);

	read_device("/dev/urandom", b, 32, 32);
	print_hex("dev_urandom", b, 32);

	read_device("/dev/random", b, 32, 32);
	print_hex("dev_random", b, 32);

	FILE *f = fopen("/dev/urandom", "rb");
	if (f == NULL)
		die("fopen /dev/urandom");
	if (fread(b, 1, 16, f) != 16) {
		if (!ferror(f))
			errno = EIO;
		die("fread /dev/urandom");
	}
	if (fclose(f) != 0)
		die("fclose /dev/urandom");
	print_hex("fopen_urandom", b, 16);

	unsigned char *big = malloc(MIB);
	if (big == NULL)
		die("malloc");
	fill_getrandom(big, MIB, 0, "getrandom(1 MiB)");
	printf("getrandom_1MiB_fnv1a %016llx\n", (unsigned long long)fnv1a(big, MIB));

	read_device("/dev/urandom", big, MIB, 64 * 1024);
	printf("dev_urandom_1MiB_fnv1a %016llx\n", (unsigned long long)fnv1a(big, MIB));
	free(big);

	if (fflush(stdout) != 0)
		die("stdout");
	return 0;
}
