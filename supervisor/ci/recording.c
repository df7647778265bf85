/* recording.c — see recording.h.
 *
 * Writing: the whole file into FILE.tmpPID beside FILE (0600), every write
 * checked, fsync'ed, closed, then renamed over FILE. fsync because some
 * file systems report a full disk, a quota or an I/O error only there or
 * at close (NFS, delayed allocation), and a recording is read when a run
 * failed, perhaps after the machine did: a name that points at an empty
 * file would be worse than none. It costs one fsync a run that writes a
 * recording. Any failure removes the temporary file and, since the run
 * was to replace it, an older recording at FILE: what is left under the
 * name is this run's recording or nothing.
 *
 * Layout: "DHREC\0\1\n" (8 bytes), the message length (8 bytes, little
 * endian), a checksum of the message (8 bytes: SipHash-2-4 under the zero
 * key, digest.h), the packed message. The length makes truncation certain
 * to be seen (protobuf alone would decode a prefix cut at a field boundary
 * as a shorter, valid message); the checksum, a flipped bit (protobuf would
 * decode most as another valid recording: another command, another seed). */
#include "recording.h"
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char magic[8] = { 'D', 'H', 'R', 'E', 'C', 0, 1, '\n' };
#define HEADER 24

static void checksum(const unsigned char *p, size_t n, unsigned char out[8])
{
	static const uint8_t zero[16];
	uint8_t h[16];
	digest_siphash128(zero, p, n, h);
	memcpy(out, h, 8);
}

static bool write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0)
			errno = ENOSPC; /* nothing taken, no error: no room */
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

bool recording_write(const char *path, const Diehard__Recording *rec, char *why, size_t size)
{
	size_t len = diehard__recording__get_packed_size(rec);
	if (len > RECORDING_MAX) {
		snprintf(why, size, "the recording would be %zu bytes, over the 2 GiB a recording may hold", len);
		return false;
	}
	unsigned char *buf = malloc(HEADER + len);
	if (buf == NULL) {
		snprintf(why, size, "out of memory for a recording of %zu bytes", len);
		return false;
	}
	memcpy(buf, magic, sizeof magic);
	for (int i = 0; i < 8; i++)
		buf[8 + i] = (unsigned char)((uint64_t)len >> (8 * i));
	diehard__recording__pack(rec, buf + HEADER);
	checksum(buf + HEADER, len, buf + 16);
	char *tmp;
	if (asprintf(&tmp, "%s.tmp%d", path, (int)getpid()) < 0) {
		free(buf);
		snprintf(why, size, "out of memory");
		return false;
	}
	/* 0600: it holds the run's environment, which may hold secrets. */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && write_all(fd, buf, HEADER + len) && fsync(fd) == 0;
	int err = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = false;
		err = errno;
	}
	if (ok && rename(tmp, path) != 0) {
		ok = false;
		err = errno;
	}
	if (!ok) {
		snprintf(why, size, "cannot write the recording %s: %s", path, strerror(err));
		if (fd >= 0)
			(void)unlink(tmp);
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			(void)unlink(path);
	}
	free(tmp);
	free(buf);
	return ok;
}

static bool has_nul(const ProtobufCBinaryData *b)
{
	return b->len > 0 && memchr(b->data, 0, b->len) != NULL;
}

static bool check(const Diehard__Recording *rec, char *why, size_t size)
{
	if (rec->format != RECORDING_FORMAT) {
		snprintf(why, size, "recording format %u, this diehard reads format %d", rec->format, RECORDING_FORMAT);
		return false;
	}
	if (rec->n_argv == 0 || rec->path.len == 0 || rec->n_replicas == 0) {
		snprintf(why, size, "the recording has no %s", rec->n_argv == 0 ? "command" :
							rec->path.len == 0  ? "program path" : "replica");
		return false;
	}
	if (rec->key.len != 32 || rec->digest_seed.len != 16) {
		snprintf(why, size, "the recording's keys have the wrong size");
		return false;
	}
	for (size_t i = 0; i < rec->n_replicas; i++) {
		const Diehard__Replica *r = rec->replicas[i];
		if (r->seed.len != 16 || (r->stdout_digest.len != 16 && r->stdout_digest.len != 0) ||
		    (r->stderr_digest.len != 16 && r->stderr_digest.len != 0)) {
			snprintf(why, size, "replica %u's seed or digests have the wrong size", r->id);
			return false;
		}
		if (strlen(r->fill) > 64 || strpbrk(r->fill, "=\n") != NULL) {
			snprintf(why, size, "replica %u's fill setting is malformed", r->id);
			return false;
		}
	}
	/* Strings that become C strings (argv, env, paths) must hold no NUL. */
	for (size_t i = 0; i < rec->n_argv; i++)
		if (has_nul(&rec->argv[i])) {
			snprintf(why, size, "argument %zu holds a NUL byte", i);
			return false;
		}
	for (size_t i = 0; i < rec->n_env; i++)
		if (has_nul(&rec->env[i]) || rec->env[i].len == 0 ||
		    memchr(rec->env[i].data, '=', rec->env[i].len) == NULL) {
			snprintf(why, size, "environment entry %zu is malformed", i);
			return false;
		}
	if (has_nul(&rec->path) || has_nul(&rec->cwd) || has_nul(&rec->allocator)) {
		snprintf(why, size, "a path in the recording holds a NUL byte");
		return false;
	}
	return true;
}

Diehard__Recording *recording_parse(const unsigned char *p, size_t n, char *why, size_t size)
{
	if (n < sizeof magic || memcmp(p, magic, 5) != 0) {
		snprintf(why, size, "not a diehard recording (no DHREC header)");
		return NULL;
	}
	if (memcmp(p, magic, sizeof magic) != 0) {
		snprintf(why, size, "a diehard recording of another layout (header version %u)", p[6]);
		return NULL;
	}
	if (n < HEADER) {
		snprintf(why, size, "truncated: %zu bytes, shorter than the header", n);
		return NULL;
	}
	uint64_t len = 0;
	for (int i = 0; i < 8; i++)
		len |= (uint64_t)p[8 + i] << (8 * i);
	if (len > RECORDING_MAX) {
		snprintf(why, size, "corrupt: it claims %llu bytes", (unsigned long long)len);
		return NULL;
	}
	if (len > n - HEADER) {
		snprintf(why, size, "truncated: %zu of %llu bytes", n - HEADER, (unsigned long long)len);
		return NULL;
	}
	if (len < n - HEADER) {
		snprintf(why, size, "corrupt: %zu bytes after the recording's end", n - HEADER - (size_t)len);
		return NULL;
	}
	unsigned char sum[8];
	checksum(p + HEADER, (size_t)len, sum);
	if (memcmp(sum, p + 16, sizeof sum) != 0) {
		snprintf(why, size, "corrupt: its checksum does not match");
		return NULL;
	}
	Diehard__Recording *rec = diehard__recording__unpack(NULL, (size_t)len, p + HEADER);
	if (rec == NULL) {
		snprintf(why, size, "corrupt: the message does not decode");
		return NULL;
	}
	if (!check(rec, why, size)) {
		diehard__recording__free_unpacked(rec, NULL);
		return NULL;
	}
	return rec;
}

Diehard__Recording *recording_read(const char *path, char *why, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(why, size, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, size, "not a regular file");
		close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > RECORDING_MAX + HEADER) {
		snprintf(why, size, "too big for a recording (%lld bytes)", (long long)st.st_size);
		close(fd);
		return NULL;
	}
	size_t n = (size_t)st.st_size, got = 0;
	unsigned char *buf = malloc(n ? n : 1);
	if (buf == NULL) {
		snprintf(why, size, "out of memory");
		close(fd);
		return NULL;
	}
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, size, "%s", strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	Diehard__Recording *rec = recording_parse(buf, got, why, size);
	free(buf);
	return rec;
}

void recording_free(Diehard__Recording *rec)
{
	if (rec != NULL)
		diehard__recording__free_unpacked(rec, NULL);
}
