/*
 * abuse_clock: a replica attacking the fast clock path's shared memory
 * (supervisor/virt/clockfs.h, allocator/clockpage.h), for
 * tests/abuse_clock.bats.
 *
 *   abuse_clock probe
 *       every way this process might write a page that is not its own (the
 *       other slots' and diehard's, all in the directory at DIEHARD_CLOCKS'
 *       dir) or change any page's size; one line per attempt,
 *       "<what>: blocked (<errno>)" or "<what>: OPEN", then "probed N open M";
 *       exits 0.
 *   abuse_clock scribble MODE PASSES READS LOCKDIR
 *       the replica that creates LOCKDIR first is the bad one (its
 *       DIEHARD_SEED goes to LOCKDIR/seed): it writes
 *       MODE (zero, ones, random, propose) over every byte of the one page it
 *       can write, PASSES times over (a pass is a few milliseconds; not
 *       timed by its own clock, which its damage may stop); or, for MODE
 *       counts, huge random numbers over its page's read counts only, as
 *       long; while a thread of its own reads
 *       clocks; every replica (the bad one too) has 3 threads read
 *       CLOCK_MONOTONIC, CLOCK_REALTIME and gettimeofday READS times each,
 *       checking the monotonic clock never steps back, then prints
 *       "ok READS" and exits 0 (1 if a clock stepped back or a call failed).
 *   abuse_clock read SECONDS
 *       reads clocks in a loop for SECONDS (for a SIGTERM during them).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clockpage.h"

static long setting(const char *name)
{
	const char *spec = getenv("DIEHARD_CLOCKS");
	size_t len = strlen(name);
	for (const char *p = spec; p != NULL && *p != '\0';) {
		if (strncmp(p, name, len) == 0 && p[len] == '=')
			return strtol(p + len + 1, NULL, 10);
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return -1;
}

static int opened, tried;

static void say(const char *what, int ok)
{
	tried++;
	if (ok) {
		printf("%s: OPEN\n", what);
		opened++;
	} else {
		printf("%s: blocked (%s)\n", what, strerror(errno));
	}
}

/* Every attempt on one page file f (read-only, from the directory). */
static void probe_file(const char *label, const char *file, int dir, int f)
{
	const char *name = label;
	char what[128], path[64];
	size_t page = 4096;
	void *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	snprintf(what, sizeof what, "mmap %s read-write", name);
	say(what, m != MAP_FAILED);
	m = mmap(NULL, page, PROT_READ, MAP_SHARED, f, 0);
	if (m != MAP_FAILED) {
		snprintf(what, sizeof what, "mprotect %s's read-only mapping writable", name);
		say(what, mprotect(m, page, PROT_READ | PROT_WRITE) == 0);
		snprintf(what, sizeof what, "mremap %s's mapping bigger", name);
		void *r = mremap(m, page, 2 * page, MREMAP_MAYMOVE);
		errno = r == MAP_FAILED ? errno : 0;
		/* Bigger is allowed; writable is not: try it. */
		say(what, r != MAP_FAILED && mprotect(r, 2 * page, PROT_READ | PROT_WRITE) == 0);
		munmap(r == MAP_FAILED ? m : r, r == MAP_FAILED ? page : 2 * page);
	}
	int w = openat(dir, file, O_RDWR);
	snprintf(what, sizeof what, "openat %s read-write", name);
	say(what, w >= 0);
	snprintf(path, sizeof path, "/proc/self/fd/%d", f);
	w = open(path, O_RDWR);
	snprintf(what, sizeof what, "reopen %s read-write through /proc/self/fd", name);
	say(what, w >= 0);
	snprintf(what, sizeof what, "fchmod %s 0666", name);
	say(what, fchmod(f, 0666) == 0);
	snprintf(what, sizeof what, "chmod /proc/self/fd of %s 0666", name);
	say(what, chmod(path, 0666) == 0);
	snprintf(what, sizeof what, "truncate %s through /proc/self/fd", name);
	say(what, truncate(path, 0) == 0);
	snprintf(what, sizeof what, "write to %s", name);
	say(what, pwrite(f, "x", 1, 0) == 1);
}

static int probe(void)
{
	long fd = setting("fd"), dir = setting("dir"), slots = setting("slots");
	if (fd < 0 || dir < 0 || slots <= 0) {
		fprintf(stderr, "abuse_clock: no DIEHARD_CLOCKS with fd, dir and slots\n");
		return 1;
	}
	/* The others' pages and diehard's, from the directory. */
	for (long i = 0; i <= slots; i++) {
		char name[24];
		if (i == slots)
			snprintf(name, sizeof name, "d");
		else
			snprintf(name, sizeof name, "%ld", i);
		int f = openat((int)dir, name, O_RDONLY | O_CLOEXEC);
		if (f < 0) {
			printf("open %s read-only: failed (%s)\n", name, strerror(errno));
			continue;
		}
		struct stat a, b;
		if (fstat(f, &a) == 0 && fstat((int)fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			close(f); /* our own page: writable through fd, as it should be */
			continue;
		}
		/* Said the same in every replica: a sibling's page, or diehard's. */
		probe_file(i == slots ? "diehard's page" : "a sibling's page", name, (int)dir, f);
		close(f);
	}
	/* The directory and its mount. */
	struct mount_attr clr = { .attr_clr = MOUNT_ATTR_RDONLY };
	say("mount_setattr the directory's mount read-write",
	    syscall(SYS_mount_setattr, dir, "", AT_EMPTY_PATH, &clr, sizeof clr) == 0);
	int t = (int)syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | AT_EMPTY_PATH);
	say("open_tree a clone of the directory's mount", t >= 0);
	if (t >= 0)
		say("mount_setattr the clone read-write", syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &clr, sizeof clr) == 0);
	t = (int)syscall(SYS_open_tree, dir, "", AT_EMPTY_PATH);
	if (t >= 0)
		say("mount_setattr the directory's mount (open_tree) read-write",
		    syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &clr, sizeof clr) == 0);
	say("mount -o remount,rw the directory", mount(NULL, "/proc/self/fd/1001", NULL, MS_REMOUNT | MS_BIND, NULL) == 0);
	int c = openat((int)dir, "new", O_RDWR | O_CREAT, 0600);
	say("create a file in the directory", c >= 0);
	say("unlink a page", unlinkat((int)dir, "d", 0) == 0);
	say("rename a page", renameat((int)dir, "d", (int)dir, "e") == 0);
	/* The size of our own page: its readers would fault past a shrunk end. */
	say("ftruncate its own page", ftruncate((int)fd, 4096) == 0);
	int again = open("/proc/self/fd/1000", O_RDWR);
	say("reopen its own page and ftruncate it", again >= 0 && ftruncate(again, 4096) == 0);
	say("truncate its own page through /proc/self/fd", truncate("/proc/self/fd/1000", 4096) == 0);
	int tr = open("/proc/self/fd/1000", O_RDWR | O_TRUNC);
	say("open its own page with O_TRUNC", tr >= 0);
	/* Memory: its page's file system holds a page and no more. */
	struct stat own;
	say("grow its own page by a gibibyte (fallocate)",
	    fstat((int)fd, &own) == 0 && fallocate((int)fd, 0, own.st_size, 1L << 30) == 0);
	printf("probed %d open %d\n", tried, opened);
	return 0;
}

static atomic_bool stop;
static long reads;
static atomic_int backwards, failures;

static void *reader(void *arg)
{
	(void)arg;
	struct timespec last = { 0, 0 }, m, r;
	struct timeval tv;
	for (long i = 0; i < reads; i++) {
		if (clock_gettime(CLOCK_MONOTONIC, &m) != 0 || clock_gettime(CLOCK_REALTIME, &r) != 0 ||
		    gettimeofday(&tv, NULL) != 0)
			failures++;
		if (m.tv_sec < last.tv_sec || (m.tv_sec == last.tv_sec && m.tv_nsec < last.tv_nsec))
			backwards++;
		last = m;
	}
	return NULL;
}

/* The bad replica's own clock reads while it damages its page. */
static void *bad_reader(void *arg)
{
	(void)arg;
	struct timespec ts;
	while (!atomic_load(&stop))
		(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return NULL;
}

static uint64_t x = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* Writes mode over the page (len bytes at p) once. */
static void damage(volatile uint64_t *p, size_t len, const char *mode)
{
	size_t words = len / 8;
	if (strcmp(mode, "counts") == 0) {
		/* Only the counts, over and over: diehard, finding one far
		 * past the log, moves it back and reads it again, while this
		 * writes it over again. */
		volatile uint64_t *count = p + offsetof(struct cp_page, count) / 8;
		for (size_t i = 0; i < words / 4; i++)
			for (unsigned k = 0; k < CP_KEYS; k++)
				count[k] = next_random() | 1ull << 62;
		return;
	}
	if (strcmp(mode, "propose") == 0) {
		/* Every ring position proposed for the entries about to come:
		 * a tag of 1 << 63 | n + 1 for n from 0 to a few rings. */
		for (size_t i = 0; i < words; i++)
			p[i] = 1ull << 63 | (i % 40000);
		return;
	}
	for (size_t i = 0; i < words; i++)
		p[i] = strcmp(mode, "zero") == 0 ? 0 : strcmp(mode, "ones") == 0 ? ~0ull : next_random();
}

static int scribble(const char *mode, long passes, const char *lockdir)
{
	pthread_t t[3], b;
	bool bad = mkdir(lockdir, 0700) == 0;
	if (bad) {
		/* Who it is, for the test: its seed, as the report gives it. */
		char path[4096];
		snprintf(path, sizeof path, "%s/seed", lockdir);
		FILE *f = fopen(path, "w");
		const char *seed = getenv("DIEHARD_SEED");
		if (f == NULL || fprintf(f, "%s\n", seed ? seed : "") < 0 || fclose(f) != 0) {
			fprintf(stderr, "abuse_clock: cannot write %s\n", path);
			return 1;
		}
		long fd = setting("fd");
		struct stat st;
		if (fd < 0 || fstat((int)fd, &st) != 0) {
			fprintf(stderr, "abuse_clock: no page to scribble over\n");
			return 1;
		}
		volatile uint64_t *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "abuse_clock: mmap: %s\n", strerror(errno));
			return 1;
		}
		pthread_create(&b, NULL, bad_reader, NULL);
		for (long pass = 0; pass < passes; pass++)
			damage(p, (size_t)st.st_size, mode);
		atomic_store(&stop, true);
		pthread_join(b, NULL);
	}
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, reader, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	if (backwards > 0 || failures > 0) {
		fprintf(stderr, "abuse_clock: %d went back, %d failed\n", backwards, failures);
		return 1;
	}
	printf("ok %ld\n", reads);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "probe") == 0)
		return probe();
	if (argc == 6 && strcmp(argv[1], "scribble") == 0) {
		reads = strtol(argv[4], NULL, 10);
		return scribble(argv[2], strtol(argv[3], NULL, 10), argv[5]);
	}
	if (argc == 3 && strcmp(argv[1], "read") == 0) {
		struct timespec t0, now;
		clock_gettime(CLOCK_MONOTONIC_RAW, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &now);
		while (clock_gettime(CLOCK_MONOTONIC_RAW, &now) == 0 &&
		       (double)(now.tv_sec - t0.tv_sec) < strtod(argv[2], NULL));
		printf("read\n");
		return 0;
	}
	fputs("usage: abuse_clock probe | scribble zero|ones|random|propose|counts PASSES READS LOCKDIR | read SECONDS\n",
	      stderr);
	return 2;
}
