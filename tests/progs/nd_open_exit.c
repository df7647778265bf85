/* nd_open_exit: opens /dev/urandom once, right at start, and exits at once,
 * so that under diehard the replicas' opens are answered while sibling
 * replicas exit (and diehard gets their SIGCHLD). The open must return a new
 * descriptor that reads bytes: it prints "ok", or why not and exits 1. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned char b[16];
	if (fd < 3 || fstat(fd, &st) != 0) {
		printf("open returned %d, not a new descriptor\n", fd);
		return 1;
	}
	if (read(fd, b, sizeof b) != (ssize_t)sizeof b) {
		printf("short read from descriptor %d\n", fd);
		return 1;
	}
	puts("ok");
	return 0;
}
