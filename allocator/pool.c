/* pool.c — see pool.h. */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os.h"

#define POOL_FD_MIN 512

/* The pool's file: random bytes, then sealed, so that nothing (a stray
 * write or truncate on its descriptor) can change what its unwritten
 * private pages read or make them fault. The program's errno is kept. */
static bool pool_create(struct pool *p, struct rng *r)
{
	int saved = errno;
	p->failed = true; /* until proven otherwise */
	int fd = memfd_create("diehard-fill", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int high = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, POOL_FD_MIN) : -1;
	if (fd >= 0)
		(void)close(fd);
	struct stat st;
	bool ok = high >= 0 && ftruncate(high, (off_t)p->size) == 0 && fstat(high, &st) == 0;
	/* Written through a buffer, not a mapping: a page fault costs 20 us on
	 * some virtual machines (a 1 MiB pool took 5 ms a process that way). */
	uint64_t buf[2048];
	for (size_t off = 0; ok && off < p->size; off += sizeof buf) {
		size_t n = p->size - off < sizeof buf ? p->size - off : sizeof buf;
		rng_fill(r, buf, n);
		ok = pwrite(high, buf, n, (off_t)off) == (ssize_t)n;
	}
	ok = ok && fcntl(high, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0;
	if (!ok) {
		if (high >= 0)
			(void)close(high);
		errno = saved;
		return false;
	}
	p->salt = (size_t)rng_below(r, p->size / os_page_size());
	p->fd = high;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->failed = false;
	errno = saved;
	return true;
}

/* The descriptor is still our pool (the program may have closed it, or
 * reused its number for a file of its own). */
static bool pool_intact(const struct pool *p)
{
	struct stat st;
	return fstat(p->fd, &st) == 0 && st.st_dev == p->dev && st.st_ino == p->ino;
}

void pool_init(struct pool *p, size_t size)
{
	p->fd = -1;
	p->failed = false;
	p->size = size;
	p->salt = 0;
}

void pool_close(struct pool *p)
{
	if (p->fd >= 0)
		(void)close(p->fd);
	p->fd = -1;
}

bool pool_open(struct pool *p, struct rng *r)
{
	if (p->failed)
		return false;
	int saved = errno;
	if (p->fd < 0 ? !pool_create(p, r) : !pool_intact(p)) {
		p->failed = true;
		errno = saved;
		return false;
	}
	return true;
}

/* Maps [addr, addr + len) from pool offset off on, wrapping at its end. */
static bool map_from(struct pool *p, char *at, size_t len, size_t off, size_t *maps)
{
	while (len > 0) {
		size_t n = p->size - off < len ? p->size - off : len;
		if (mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, p->fd, (off_t)off) == MAP_FAILED) {
			/* A failed MAP_FIXED may have unmapped the range: make
			 * the rest plain memory again, which the caller fills. */
			int saved = errno;
			(void)mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			errno = saved;
			return false;
		}
		if (maps != NULL)
			++*maps;
		at += n;
		len -= n;
		off = 0;
	}
	return true;
}

bool pool_map(struct pool *p, void *addr, size_t len, struct rng *r)
{
	if (!pool_open(p, r))
		return false;
	size_t page = os_page_size();
	return map_from(p, addr, len, (size_t)rng_below(r, p->size / page) * page, NULL);
}

bool pool_map_along(struct pool *p, void *addr, size_t len, struct rng *r, size_t *maps)
{
	if (!pool_open(p, r))
		return false;
	size_t page = os_page_size(), pages = p->size / page;
	return map_from(p, addr, len, ((uintptr_t)addr / page + p->salt) % pages * page, maps);
}
