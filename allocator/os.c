/* os.c — system calls behind os.h. See os.h for the rules: no allocation, no
 * stdio, usable from the first malloc call of a process. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

size_t os_page_size(void)
{
	static size_t page;
	if (page == 0) {
		unsigned long v = getauxval(AT_PAGESZ);
		page = v ? (size_t)v : 4096;
	}
	return page;
}

void *os_reserve_at(uintptr_t hint, size_t len)
{
	void *p = mmap((void *)hint, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if ((uintptr_t)p != hint) { /* a kernel before 4.17 took it as a hint */
		(void)munmap(p, len);
		errno = EEXIST;
		return NULL;
	}
	return p;
}

void *os_reserve(size_t len, size_t align)
{
	size_t page = os_page_size();
	if (align < page)
		align = page;
	if (len > SIZE_MAX - align)
		goto nomem;
	size_t span = len + align - page;
	void *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	uintptr_t start = (uintptr_t)raw;
	uintptr_t aligned = os_align_up(start, align);
	size_t head = aligned - start;
	size_t tail = span - head - len;
	/* Trimming can only fail for arguments we computed wrongly; if it does,
	 * the slack stays reserved, which is harmless. */
	if (head > 0)
		(void)munmap(raw, head);
	if (tail > 0)
		(void)munmap((void *)(aligned + len), tail);
	return (void *)aligned;
nomem:
	errno = ENOMEM;
	return NULL;
}

int os_commit(void *p, size_t len)
{
	return mprotect(p, len, PROT_READ | PROT_WRITE);
}

int os_release(void *p, size_t len)
{
	return munmap(p, len);
}

int os_discard(void *p, size_t len)
{
	return mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED ? -1 : 0;
}

void os_purge(void *p, size_t len)
{
	(void)madvise(p, len, MADV_DONTNEED);
}

void *os_map_guarded(size_t len)
{
	size_t page = os_page_size();
	len = os_align_up(len, page);
	if (len > SIZE_MAX - 2 * page) {
		errno = ENOMEM;
		return NULL;
	}
	char *base = os_reserve(len + 2 * page, page);
	if (base == NULL)
		return NULL;
	if (os_commit(base + page, len) != 0) {
		int saved = errno;
		(void)munmap(base, len + 2 * page);
		errno = saved;
		return NULL;
	}
	return base + page;
}

void os_unmap_guarded(void *p, size_t len)
{
	size_t page = os_page_size();
	(void)munmap((char *)p - page, os_align_up(len, page) + 2 * page);
}

static bool read_exact(int fd, unsigned char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

bool os_random(void *buf, size_t len)
{
	unsigned char *b = buf;
	size_t got = 0;
	while (got < len) {
		long n = syscall(SYS_getrandom, b + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == len)
		return true;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = read_exact(fd, b, len);
	(void)close(fd);
	return ok;
}

long os_read_number(const char *path, long fallback)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fallback;
	ssize_t n;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	(void)close(fd);
	if (n <= 0)
		return fallback;
	long v = 0;
	ssize_t i = 0;
	for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
		if (v > LONG_MAX / 10)
			return fallback;
		v = v * 10 + (buf[i] - '0');
	}
	return i > 0 ? v : fallback;
}

void os_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nowhere to report a failed report */
		buf += n;
		len -= (size_t)n;
	}
}
