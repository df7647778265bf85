/* nd_atrandom: prints this program image's 16 AT_RANDOM bytes (the
 * kernel's random bytes for each exec, which diehard makes the same in
 * every replica: the n-th image of each gets the same), in hex. */
#include <stdio.h>
#include <sys/auxv.h>

int main(void)
{
	const unsigned char *p = (const unsigned char *)getauxval(AT_RANDOM);
	if (p == NULL)
		return 1;
	for (int i = 0; i < 16; i++)
		printf("%02x", p[i]);
	printf("\n");
	return 0;
}
