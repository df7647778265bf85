/* cgpath.c — see cgpath.h. Every parser walks its input a line at a time
 * within the length given, and copies out only what it has checked. */
#include "cgpath.h"

#include <string.h>

/* The next line of text[0..n) from *pos: its start and length (without the
 * newline). false at the end. */
static bool next_line(const char *text, size_t n, size_t *pos, const char **line, size_t *len)
{
	if (*pos >= n)
		return false;
	const char *start = text + *pos;
	const char *nl = memchr(start, '\n', n - *pos);
	size_t l = nl != NULL ? (size_t)(nl - start) : n - *pos;
	*line = start;
	*len = l;
	*pos += l + (nl != NULL);
	return true;
}

/* Whether [s, s + len) is exactly word. */
static bool equals(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* Whether word is one of the sep-separated elements of [s, s + len). */
static bool has_element(const char *s, size_t len, char sep, const char *word)
{
	size_t i = 0;
	while (i <= len) {
		size_t j = i;
		while (j < len && s[j] != sep)
			j++;
		if (equals(s + i, j - i, word))
			return true;
		i = j + 1;
	}
	return false;
}

/* A cgroup path as the kernel writes one: absolute, no NUL, no empty, "."
 * or ".." component (but "/" itself). */
static bool sane_path(const char *p, size_t len)
{
	if (len == 0 || p[0] != '/' || memchr(p, '\0', len) != NULL)
		return false;
	if (len == 1)
		return true;
	size_t i = 1;
	while (i <= len) {
		size_t j = i;
		while (j < len && p[j] != '/')
			j++;
		if (j == i || equals(p + i, j - i, ".") || equals(p + i, j - i, ".."))
			return false;
		i = j + 1;
	}
	return true;
}

static bool copy_out(const char *s, size_t len, char *out, size_t size)
{
	if (size == 0 || len >= size)
		return false;
	memcpy(out, s, len);
	out[len] = '\0';
	return true;
}

bool cgpath_own(const char *text, size_t n, const char *controller, char *out, size_t size)
{
	size_t pos = 0, len;
	const char *line;
	while (next_line(text, n, &pos, &line, &len)) {
		/* ID:CONTROLLERS:PATH; the path may itself hold ':'. */
		const char *c1 = memchr(line, ':', len);
		if (c1 == NULL)
			continue;
		const char *ctl = c1 + 1;
		const char *c2 = memchr(ctl, ':', len - (size_t)(ctl - line));
		if (c2 == NULL)
			continue;
		size_t ctl_len = (size_t)(c2 - ctl);
		const char *path = c2 + 1;
		size_t path_len = len - (size_t)(path - line);
		bool match = controller == NULL ? equals(line, (size_t)(c1 - line), "0") && ctl_len == 0
						: ctl_len > 0 && has_element(ctl, ctl_len, ',', controller);
		if (!match)
			continue;
		return sane_path(path, path_len) && copy_out(path, path_len, out, size);
	}
	return false;
}

/* Decodes mountinfo's octal escapes of [s, s + len) into out. */
static bool unescape(const char *s, size_t len, char *out, size_t size)
{
	size_t o = 0;
	if (size == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '\\') {
			unsigned v = 0;
			for (size_t k = 1; k <= 3; k++) {
				if (i + k >= len || s[i + k] < '0' || s[i + k] > '7')
					return false;
				v = v * 8 + (unsigned)(s[i + k] - '0');
			}
			if (v == 0 || v > 255)
				return false;
			c = (char)v;
			i += 3;
		}
		if (o + 1 >= size)
			return false;
		out[o++] = c;
	}
	out[o] = '\0';
	return true;
}

/* The idx-th space-separated field of [s, s + len). */
static bool field(const char *s, size_t len, unsigned idx, const char **f, size_t *flen)
{
	size_t i = 0;
	for (unsigned k = 0;; k++) {
		while (i < len && s[i] == ' ')
			i++;
		if (i >= len)
			return false;
		size_t j = i;
		while (j < len && s[j] != ' ')
			j++;
		if (k == idx) {
			*f = s + i;
			*flen = j - i;
			return true;
		}
		i = j;
	}
}

bool cgpath_mount(const char *text, size_t n, const char *controller, char *mnt, size_t msize, char *root,
		  size_t rsize)
{
	size_t pos = 0, len;
	const char *line;
	while (next_line(text, n, &pos, &line, &len)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS */
		const char *f, *r, *m;
		size_t flen, rlen, mlen;
		if (!field(line, len, 3, &r, &rlen) || !field(line, len, 4, &m, &mlen))
			continue;
		unsigned sep = 6;
		while (field(line, len, sep, &f, &flen) && !equals(f, flen, "-"))
			sep++;
		const char *type, *super;
		size_t tlen, slen;
		if (!field(line, len, sep + 1, &type, &tlen) || !field(line, len, sep + 3, &super, &slen))
			continue;
		bool match = controller == NULL ? equals(type, tlen, "cgroup2")
						: equals(type, tlen, "cgroup") && has_element(super, slen, ',', controller);
		if (!match)
			continue;
		return unescape(m, mlen, mnt, msize) && unescape(r, rlen, root, rsize) && mnt[0] == '/' &&
		       sane_path(root, strlen(root));
	}
	return false;
}

bool cgpath_dir(const char *mnt, const char *root, const char *path, char *out, size_t size)
{
	size_t rlen = strlen(root);
	const char *below;
	if (strcmp(root, "/") == 0)
		below = path;
	else if (strncmp(path, root, rlen) == 0 && (path[rlen] == '\0' || path[rlen] == '/'))
		below = path + rlen;
	else
		return false;
	if (strcmp(below, "/") == 0)
		below = "";
	size_t mlen = strlen(mnt);
	/* A mount point "/" would double the slash. */
	if (mlen == 1 && below[0] == '/')
		mlen = 0;
	size_t blen = strlen(below);
	if (mlen + blen >= size)
		return false;
	memcpy(out, mnt, mlen);
	memcpy(out + mlen, below, blen + 1);
	return true;
}

bool cgpath_counter(const char *text, size_t n, const char *key, uint64_t *v)
{
	size_t pos = 0, len;
	const char *line;
	size_t klen = strlen(key);
	while (next_line(text, n, &pos, &line, &len)) {
		if (len <= klen + 1 || memcmp(line, key, klen) != 0 || line[klen] != ' ')
			continue;
		uint64_t x = 0;
		size_t i = klen + 1;
		for (; i < len; i++) {
			if (line[i] < '0' || line[i] > '9')
				return false;
			unsigned d = (unsigned)(line[i] - '0');
			if (x > (UINT64_MAX - d) / 10)
				return false;
			x = x * 10 + d;
		}
		*v = x;
		return true;
	}
	return false;
}

bool cgpath_has_word(const char *text, size_t n, const char *word)
{
	size_t i = 0;
	while (i < n) {
		while (i < n && (text[i] == ' ' || text[i] == '\n'))
			i++;
		size_t j = i;
		while (j < n && text[j] != ' ' && text[j] != '\n')
			j++;
		if (j > i && equals(text + i, j - i, word))
			return true;
		i = j;
	}
	return false;
}

bool cgpath_only_pid(const char *text, size_t n, long pid)
{
	size_t pos = 0, len;
	const char *line;
	unsigned lines = 0;
	bool ours = false;
	while (next_line(text, n, &pos, &line, &len)) {
		if (len == 0)
			continue;
		lines++;
		long v = 0;
		size_t i = 0;
		for (; i < len && i < 12 && line[i] >= '0' && line[i] <= '9'; i++)
			v = v * 10 + (line[i] - '0');
		ours = i == len && v == pid;
	}
	return lines == 1 && ours;
}
