/*
 * rate_meter — reads a stream to its end and records how fast it arrived.
 *
 *   rate_meter [-l LOG] [-i MS]
 *
 * Why: bench/replace asks whether the committed output of `diehard -k 3`
 * slows down while a replacement catches up, so it needs the arrival rate of
 * diehard's stdout over time, not only the total. Every MS milliseconds
 * (default 50) one line "SECONDS BYTES" is appended to LOG: the time since
 * rate_meter started (CLOCK_MONOTONIC) and the bytes read so far. The stream
 * is also hashed, so that a benchmark can check that what arrived is its
 * input byte for byte without another process in the pipe (`rate_meter <
 * input` prints the reference).
 *
 * Output on stdout at end of input: "bytes=N hash=H" (H: 16 hex digits of a
 * 64-bit multiply-rotate hash over 8-byte words, the tail zero-padded: fast,
 * not cryptographic; it only has to tell a wrong or shifted stream apart).
 * Exit status: 0, or 1 on a read or write error or bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1 << 20)

static double now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		perror("rate_meter: clock_gettime");
		exit(1);
	}
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w * 0x9e3779b97f4a7c15ULL;
	h = (h << 29) | (h >> 35);
	return h * 0xbf58476d1ce4e5b9ULL;
}

int main(int argc, char **argv)
{
	const char *log_path = NULL;
	long interval_ms = 50;
	int c;
	while ((c = getopt(argc, argv, "l:i:")) != -1) {
		if (c == 'l')
			log_path = optarg;
		else if (c == 'i' && (interval_ms = atol(optarg)) > 0)
			continue;
		else {
			fprintf(stderr, "usage: rate_meter [-l LOG] [-i MS]\n");
			return 1;
		}
	}
	FILE *log = NULL;
	if (log_path != NULL && (log = fopen(log_path, "w")) == NULL) {
		fprintf(stderr, "rate_meter: %s: %s\n", log_path, strerror(errno));
		return 1;
	}
	static unsigned char buf[BUF_SIZE + 8];
	uint64_t h = 0x243f6a8885a308d3ULL, total = 0;
	size_t carry = 0; /* bytes of an incomplete word kept at buf[0..carry) */
	double t0 = now(), next = t0 + (double)interval_ms / 1000.0;
	for (;;) {
		ssize_t n = read(0, buf + carry, BUF_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("rate_meter: read");
			return 1;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		size_t have = carry + (size_t)n, words = have / 8;
		for (size_t i = 0; i < words; i++) {
			uint64_t w;
			memcpy(&w, buf + i * 8, 8);
			h = mix(h, w);
		}
		carry = have - words * 8;
		memmove(buf, buf + words * 8, carry);
		if (log != NULL) {
			double t = now();
			if (t >= next) {
				fprintf(log, "%.3f %" PRIu64 "\n", t - t0, total);
				next = t + (double)interval_ms / 1000.0;
			}
		}
	}
	if (carry > 0) {
		uint64_t w = 0;
		memcpy(&w, buf, carry);
		h = mix(h, w);
	}
	h = mix(h, total);
	if (log != NULL) {
		fprintf(log, "%.3f %" PRIu64 "\n", now() - t0, total);
		if (fclose(log) != 0) {
			perror("rate_meter: log");
			return 1;
		}
	}
	if (printf("bytes=%" PRIu64 " hash=%016" PRIx64 "\n", total, h) < 0 || fflush(stdout) != 0)
		return 1;
	return 0;
}
