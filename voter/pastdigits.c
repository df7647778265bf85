/* pastdigits.c — see pastdigits.h. Runs only at a replacement's
 * divergence or over its old blocks: plain loops. */
#include "pastdigits.h"

static int digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

size_t pastdigits_alike(const unsigned char *a, const unsigned char *b, size_t n)
{
	size_t i = 0;
	while (i < n && (a[i] == b[i] || (digit(a[i]) && digit(b[i]))))
		i++;
	return i;
}

void pastdigits_mask(unsigned char *dst, const unsigned char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = digit(src[i]) ? '0' : src[i];
}
