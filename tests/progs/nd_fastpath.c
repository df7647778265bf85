/*
 * nd_fastpath: the fast clock path's cases, for tests/fastclock.bats:
 * threads and a forked child reading at once, a static program exec'd from
 * a dynamic one, and a replica that damages the shared clock log or forges
 * an entry in it (allocator/clockpage.h, supervisor/virt/fastclock.h).
 *
 *   nd_fastpath threads N        3 threads and a forked child (2 threads)
 *                                each read CLOCK_MONOTONIC and
 *                                CLOCK_REALTIME N times, each thread
 *                                checking they never step back
 *   nd_fastpath exec N PROGRAM   N reads, then exec PROGRAM (static)
 *   nd_fastpath garbage N        slot 0 only: after N reads, random bytes
 *                                over everything of the log it may write
 *                                (its own page), then N more reads in 3
 *                                threads
 *   nd_fastpath forge N          slot 0 only: first leads one
 *                                CLOCK_REALTIME entry an hour ahead of the
 *                                real clock, checksum and all (it knows the
 *                                key); then N reads
 *   nd_fastpath stall N          slot 0 only: a thread that keeps proposing
 *                                (never publishing) the next ring of
 *                                CLOCK_MONOTONIC's entries in its own page,
 *                                as a leader does just before its real
 *                                read; every slot: N reads in 3 threads
 *   nd_fastpath push N           every slot reads CLOCK_REALTIME N times,
 *                                printing each second read's seconds; slot
 *                                0, at its third read, sets its count for
 *                                it near the log's front plus 4 rings and
 *                                64 Ki (as far as the log's own bound lets
 *                                a count go) and asks diehard for that
 *                                entry with a raw system call, 40 times
 *                                over: diehard must not settle (and log)
 *                                that far past the others, whose entries
 *                                the log's cap would then drop
 *   nd_fastpath misread N        N reads; then one more CLOCK_MONOTONIC
 *                                read, which slot 0 takes and marks done
 *                                with the term of another value than the
 *                                log's (as a fast path that consumed
 *                                something else would) instead of reading
 *
 * Output (the same in every replica when the log works): the mode's "ok"
 * lines, then "now SECONDS" — CLOCK_REALTIME read once more at the end
 * (the test checks it is real) — except forge, which prints only "ok"
 * (its replicas may have read the forged hour), and misread, which
 * prints "ok misread" and "now". Exits 1 when a clock
 * steps back or a call fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clockpage.h"

static long rounds;

static void die(const char *what)
{
	fprintf(stderr, "nd_fastpath: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int later_or_same(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

static long long setting(const char *name, int base);

/* N rounds of both clocks, each checked against the round before. */
static void *reader(void *arg)
{
	(void)arg;
	struct timespec m0 = { 0, 0 }, r0 = { 0, 0 }, m, r;
	for (long i = 0; i < rounds; i++) {
		if (clock_gettime(CLOCK_MONOTONIC, &m) != 0 || clock_gettime(CLOCK_REALTIME, &r) != 0)
			die("clock_gettime");
		if (!later_or_same(&m, &m0)) {
			fprintf(stderr, "nd_fastpath: CLOCK_MONOTONIC went back at round %ld\n", i);
			exit(1);
		}
		m0 = m;
		r0 = r;
	}
	(void)r0;
	return NULL;
}

static void threads(int n)
{
	pthread_t t[8];
	for (int i = 0; i < n; i++)
		if ((errno = pthread_create(&t[i], NULL, reader, NULL)) != 0)
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* Garbage (xorshift: no system call per byte) over n bytes at p. */
static void scribble(char *p, size_t n)
{
	static uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static void print_now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		die("clock_gettime");
	printf("now %lld\n", (long long)ts.tv_sec);
}

/* DIEHARD_CLOCKS's value of name (hex for the keys), or -1 if absent;
 * "slot": the slot its own page's header names. */
static long long setting(const char *name, int base)
{
	const char *spec = getenv("DIEHARD_CLOCKS");
	if (strcmp(name, "slot") == 0) {
		long long fd = setting("fd", 10);
		uint32_t hdr[4];
		return fd < 0 || pread((int)fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr ? -1 : (long long)hdr[2];
	}
	char key[32];
	snprintf(key, sizeof key, "%s=", name);
	for (const char *p = spec; p != NULL && *p != '\0';) {
		if (strncmp(p, key, strlen(key)) == 0)
			return (long long)strtoull(p + strlen(key), NULL, base);
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return -1;
}

/* The pages, mapped as the replica may: its own read-write, the others
 * read-only from their files in the directory. */
static struct cp_view map_log(char **page_at)
{
	long long fd = setting("fd", 10), dir = setting("dir", 10), slot = setting("slot", 10),
		  slots = setting("slots", 10);
	if (fd < 0 || dir < 0 || slot < 0 || slots <= 0) {
		fprintf(stderr, "nd_fastpath: no DIEHARD_CLOCKS (not under diehard's fast path)\n");
		exit(1);
	}
	size_t page = cp_page_size();
	char *base = mmap(NULL, (size_t)(slots + 1) * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		die("mmap");
	struct cp_view v = { .nslots = (unsigned)slots, .self = (unsigned)slot };
	for (long long i = 0; i <= slots; i++) {
		char name[4];
		cp_page_name((unsigned)i, (unsigned)slots, name);
		int f = i == slot ? (int)fd : openat((int)dir, name, O_RDONLY | O_CLOEXEC);
		if (f < 0 || mmap(base + i * page, page, i == slot ? PROT_READ | PROT_WRITE : PROT_READ,
				  MAP_SHARED | MAP_FIXED, f, 0) == MAP_FAILED)
			die("mmap");
		if (f != fd)
			close(f);
		v.pages[i] = (struct cp_page *)(base + i * page);
	}
	v.secret = (uint64_t)setting("secret", 16);
	*page_at = base + slot * page;
	return v;
}

/* The forged value: read before the entry is proposed (a clock read while
 * proposing it would wait for this very entry). */
static struct timespec forge_base;

static int forged(unsigned key, struct cp_value *out, void *arg)
{
	(void)arg;
	if (key != CLOCK_REALTIME)
		return -1;
	*out = (struct cp_value){ .a = forge_base.tv_sec + 3600, .b = forge_base.tv_nsec };
	return 0;
}

/* Slot 0's staller: proposals of every entry of CLOCK_MONOTONIC from
 * diehard's harvest on, a ring of them, over and over. */
static void *staller(void *arg)
{
	struct cp_view *v = arg;
	struct cp_page *own = v->pages[v->self], *dh = v->pages[v->nslots];
	for (;;) {
		uint64_t h = atomic_load(&dh->harvested[CLOCK_MONOTONIC]);
		for (uint64_t n = h; n < h + CP_RING; n++)
			atomic_store(&own->ring[CLOCK_MONOTONIC][n % CP_RING].tag, (1ull << 63) | (n + 1));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fputs("usage: nd_fastpath threads|exec|garbage|forge|stall|push|misread N [PROGRAM]\n", stderr);
		return 2;
	}
	rounds = strtol(argv[2], NULL, 10);
	const char *mode = argv[1];
	if (strcmp(mode, "threads") == 0) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		threads(pid == 0 ? 2 : 3);
		if (pid == 0)
			_exit(0);
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "nd_fastpath: the forked child failed\n");
			return 1;
		}
		printf("ok threads\n");
		print_now();
	} else if (strcmp(mode, "exec") == 0 && argc == 4) {
		reader(NULL);
		printf("ok exec\n");
		print_now();
		fflush(stdout);
		execl(argv[3], argv[3], (char *)NULL);
		die("exec");
	} else if (strcmp(mode, "garbage") == 0) {
		reader(NULL);
		if (setting("slot", 10) == 0) {
			char *page;
			(void)map_log(&page);
			scribble(page, cp_page_size());
		}
		threads(3);
		printf("ok garbage\n");
		print_now();
	} else if (strcmp(mode, "forge") == 0) {
		/* Slot 0 forges first thing, while no replica is a ring
		 * ahead of another (a slot that ran a ring ahead could lead
		 * nothing: clockpage's pace), then all read. */
		if (setting("slot", 10) == 0) {
			char *page;
			struct cp_view v = map_log(&page);
			struct cp_value out;
			uint64_t n;
			/* Until it leads one: a read that finds its entry led
			 * by another replica follows it. */
			enum cp_outcome o = CP_FOLLOWED;
			for (int tries = 0; o != CP_LED && tries < 100000; tries++) {
				if (clock_gettime(CLOCK_REALTIME, &forge_base) != 0)
					die("clock_gettime");
				o = cp_read(&v, CLOCK_REALTIME, forged, NULL, &out, &n);
			}
			if (o != CP_LED)
				fprintf(stderr, "nd_fastpath: no entry could be forged\n");
		}
		reader(NULL);
		printf("ok forge\n");
	} else if (strcmp(mode, "stall") == 0) {
		if (setting("slot", 10) == 0) {
			char *page;
			static struct cp_view v;
			v = map_log(&page);
			pthread_t t;
			if ((errno = pthread_create(&t, NULL, staller, &v)) != 0)
				die("pthread_create");
		}
		threads(3);
		printf("ok stall\n");
		print_now();
	} else if (strcmp(mode, "push") == 0) {
		struct cp_view v;
		char *page;
		bool pusher = setting("slot", 10) == 0;
		if (pusher)
			v = map_log(&page);
		for (long i = 0; i < rounds; i++) {
			struct timespec ts;
			if (pusher && i == 3)
				for (int r = 0; r < 40; r++) {
					uint64_t h = atomic_load(&v.pages[v.nslots]->harvested[CLOCK_REALTIME]);
					atomic_store(&v.pages[v.self]->count[CLOCK_REALTIME], h + 4 * CP_RING + 65536 - 16);
					(void)syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
				}
			if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
				die("clock_gettime");
			if (i % 2)
				printf("%lld\n", (long long)ts.tv_sec);
		}
		printf("ok push\n");
	} else if (strcmp(mode, "misread") == 0) {
		reader(NULL);
		if (setting("slot", 10) == 0) {
			char *page;
			struct cp_view v = map_log(&page);
			struct cp_page *own = v.pages[v.self];
			uint64_t n = atomic_fetch_add(&own->count[CLOCK_MONOTONIC], 1);
			struct cp_value other = { .a = 1, .b = 2 };
			cp_done(own, CLOCK_MONOTONIC, n, cp_sum_term(&v, CLOCK_MONOTONIC, n, &other));
		} else {
			struct timespec ts;
			if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
				die("clock_gettime");
		}
		printf("ok misread\n");
		print_now();
	} else {
		fputs("usage: nd_fastpath threads|exec|garbage|forge|stall|push|misread N [PROGRAM]\n", stderr);
		return 2;
	}
	return 0;
}
