/* pool.c — see pool.h. */
#include "pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os.h"

#define POOL_FD_MIN 512

static bool pool_create(struct pool *p, struct rng *r)
{
	p->failed = true; /* until proven otherwise */
	int fd = memfd_create("diehard-fill", MFD_CLOEXEC);
	if (fd < 0)
		return false;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, POOL_FD_MIN);
	(void)close(fd);
	if (high < 0)
		return false;
	struct stat st;
	void *m = MAP_FAILED;
	if (ftruncate(high, (off_t)POOL_SIZE) != 0 || fstat(high, &st) != 0 ||
	    (m = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, high, 0)) == MAP_FAILED) {
		(void)close(high);
		return false;
	}
	rng_fill(r, m, POOL_SIZE);
	(void)munmap(m, POOL_SIZE);
	p->fd = high;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->failed = false;
	return true;
}

/* The descriptor is still our pool (the program may have closed it, or
 * reused its number for a file of its own). */
static bool pool_intact(const struct pool *p)
{
	struct stat st;
	return fstat(p->fd, &st) == 0 && st.st_dev == p->dev && st.st_ino == p->ino;
}

bool pool_map(struct pool *p, void *addr, size_t len, struct rng *r)
{
	if (p->failed)
		return false;
	if (p->fd < 0 ? !pool_create(p, r) : !pool_intact(p)) {
		p->failed = true;
		return false;
	}
	size_t page = os_page_size();
	size_t off = (size_t)rng_below(r, POOL_SIZE / page) * page;
	char *at = addr;
	while (len > 0) {
		size_t n = POOL_SIZE - off < len ? POOL_SIZE - off : len;
		if (mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, p->fd, (off_t)off) == MAP_FAILED)
			return false; /* the caller fills eagerly: every page is still ours */
		at += n;
		len -= n;
		off = 0;
	}
	return true;
}
