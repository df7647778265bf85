/* named.c — see named.h.
 *
 * The base directory is read from /proc/TID/cwd or /proc/TID/fd/N: the
 * path as the thread's mount namespace has it, relative to diehard's own
 * root (both are the real root: a replica's views are mounted over the
 * same paths). A link that is no absolute path (a removed directory, a
 * pipe, a socket) names nothing. */
#include "named.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* path made absolute against base and cleaned of ".", ".." and repeated
 * slashes, into out. false when it does not fit. */
static bool absolute(const char *base, const char *path, char *out, size_t size)
{
	char joined[8192];
	int n = path[0] == '/' ? snprintf(joined, sizeof joined, "%s", path)
			       : snprintf(joined, sizeof joined, "%s/%s", base, path);
	if (n < 0 || (size_t)n >= sizeof joined || size < 2)
		return false;
	size_t o = 0;
	for (char *save = NULL, *c = strtok_r(joined, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		size_t len = strlen(c);
		if (o + 1 + len + 1 > size)
			return false;
		out[o++] = '/';
		memcpy(out + o, c, len);
		o += len;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return true;
}

bool named_path(pid_t tid, int dirfd, const char *path, char *out, size_t size)
{
	char link[64], base[4096] = "/";
	if (path[0] == '\0')
		return false;
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD)
			snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
		else if (dirfd >= 0)
			snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, dirfd);
		else
			return false;
		ssize_t n = readlink(link, base, sizeof base - 1);
		if (n <= 0 || base[0] != '/')
			return false;
		base[n] = '\0';
		static const char deleted[] = " (deleted)";
		size_t dl = sizeof deleted - 1;
		if ((size_t)n > dl && strcmp(base + n - dl, deleted) == 0)
			return false;
	}
	return absolute(base, path, out, size);
}
