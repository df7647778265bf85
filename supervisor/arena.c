/* arena.c — see arena.h. */
#include "arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct arena {
	int fd;
	unsigned n;
	size_t size;
	unsigned char *map; /* n * 2 * size bytes of address space */
	struct ring rings[];
};

struct arena *arena_create(unsigned n, size_t size)
{
	struct arena *a = calloc(1, sizeof *a + n * sizeof(struct ring));
	if (a == NULL)
		return NULL;
	a->n = n;
	a->size = size;
	a->fd = memfd_create("diehard-arena", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)(n * size)) != 0)
		goto fail;
	a->map = mmap(NULL, 2 * n * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->map == MAP_FAILED) {
		a->map = NULL;
		goto fail;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned char *view = a->map + 2 * i * size;
		for (int twice = 0; twice < 2; twice++)
			if (mmap(view + twice * size, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
				 (off_t)(i * size)) == MAP_FAILED)
				goto fail;
		a->rings[i] = (struct ring){ .base = view, .size = size };
	}
	return a;
fail:;
	int saved = errno;
	arena_destroy(a);
	errno = saved;
	return NULL;
}

void arena_destroy(struct arena *a)
{
	if (a->map != NULL)
		(void)munmap(a->map, 2 * a->n * a->size);
	if (a->fd >= 0)
		(void)close(a->fd);
	free(a);
}

struct ring *arena_ring(struct arena *a, unsigned i)
{
	return &a->rings[i];
}

void ring_push_overwrite(struct ring *r, const unsigned char *p, size_t len)
{
	if (len > r->size) {
		p += len - r->size;
		r->tail += len - r->size;
		r->head = r->tail;
		len = r->size;
	}
	if (ring_free(r) < len)
		r->head = r->tail + len - r->size;
	memcpy(ring_at(r, r->tail), p, len);
	r->tail += len;
}
