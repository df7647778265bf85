/* kernel.c — memory the program hands the kernel, made accessible first.
 *
 * In Archipelago mode (archipelago.h) a cold page is inaccessible until a
 * fault restores it, and the kernel's own accesses raise no fault: a system
 * call given a cold file name, buffer or array fails with EFAULT (and
 * diehard, reading a file name from the replica's memory for its seccomp
 * notifications, would read a released page). These wrappers of the libc
 * calls that pass the kernel memory restore the pages involved
 * (arch_prepare), then make the call.
 *
 * Making the call without dlsym (start-up may not depend on it:
 * tests/library.bats): where libc exports its function under a second name
 * (__read, __write, __pread64, __pwrite64, __recv, __send, __connect,
 * __poll, __open64, __fstat64, _IO_fopen) that is called, so cancellation
 * points stay what they were. The others are single system calls in glibc
 * too (2.36, x86-64), made here with syscall(2) as glibc makes them: the
 * same system call numbers and arguments (diehard's seccomp filter sees no
 * difference), and those that are cancellation points (openat, readv,
 * writev, the socket calls that wait, epoll_wait) with asynchronous
 * cancellation enabled around the call, as glibc did before 2.34.
 *
 * Covered: file names (open, openat, creat, fopen, opendir, stat, lstat,
 * fstatat, access, faccessat, unlink, unlinkat, rename, mkdir, rmdir,
 * chdir, readlink), I/O buffers (read, write, pread, pwrite, readv,
 * writev, the send and recv families with their msghdr), socket addresses
 * and options, event arrays (epoll_wait, epoll_pwait, epoll_ctl, poll),
 * fstat's buffer, and execve's and execv's file, arguments and
 * environment. Not covered (still EFAULT on a cold page): calls not listed
 * (ioctl's argument, execvp, freopen, ...), and calls libc makes inside
 * itself without the PLT on memory the program gave it (fopen's own
 * buffers are pinned pages, archipelago.h).
 *
 * Outside Archipelago mode each wrapper costs one predictable branch. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <utime.h>
#include <unistd.h>

#include "clocks.h"
#include "viewstat.h"
#include "exec.h"
#include "archipelago.h"

#define EXPORT __attribute__((visibility("default")))
/* The ...64 names: the same functions on a 64-bit system. */
#define SAME_AS(name) __attribute__((alias(#name), visibility("default")))

/* libc's functions under their second names. */
extern ssize_t __read(int, void *, size_t);
extern ssize_t __write(int, const void *, size_t);
extern ssize_t __pread64(int, void *, size_t, off_t);
extern ssize_t __pwrite64(int, const void *, size_t, off_t);
extern ssize_t __recv(int, void *, size_t, int);
extern ssize_t __send(int, const void *, size_t, int);
extern int __connect(int, const struct sockaddr *, socklen_t);
extern int __poll(struct pollfd *, nfds_t, int);
extern int __open64(const char *, int, ...);
extern int __fstat64(int, struct stat *);

extern FILE *_IO_fopen(const char *, const char *);
extern FILE *_IO_fdopen(int, const char *);

/* A system call that is a cancellation point: cancellable while it waits. */
static long waiting(long nr, long a, long b, long c, long d, long e, long f)
{
	int old;
	if (pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old) != 0)
		old = PTHREAD_CANCEL_DEFERRED;
	long r = syscall(nr, a, b, c, d, e, f);
	int err = errno;
	(void)pthread_setcanceltype(old, NULL);
	errno = err;
	return r;
}

#define L(x) ((long)(x))

static inline void str(const char *s)
{
	if (__builtin_expect(arch_on, 0) && s != NULL)
		arch_prepare_string(s);
}

static inline void buf(const void *p, size_t n)
{
	if (__builtin_expect(arch_on, 0) && p != NULL)
		arch_prepare((uintptr_t)p, n);
}

static void iov(const struct iovec *v, int n)
{
	if (!arch_on || v == NULL || n <= 0)
		return;
	arch_prepare((uintptr_t)v, (size_t)n * sizeof *v);
	for (int i = 0; i < n; i++)
		arch_prepare((uintptr_t)v[i].iov_base, v[i].iov_len);
}

static void msghdr(const struct msghdr *m)
{
	if (!arch_on || m == NULL)
		return;
	arch_prepare((uintptr_t)m, sizeof *m);
	arch_prepare((uintptr_t)m->msg_name, m->msg_namelen);
	arch_prepare((uintptr_t)m->msg_control, m->msg_controllen);
	iov(m->msg_iov, (int)m->msg_iovlen);
}

static void strings(char *const *v)
{
	if (!arch_on || v == NULL)
		return;
	for (size_t i = 0;; i++) {
		arch_prepare((uintptr_t)&v[i], sizeof v[i]);
		if (v[i] == NULL)
			return;
		arch_prepare_string(v[i]);
	}
}

/* A socket address whose length is in *len (accept, getsockname). */
static void addr_out(const void *a, const socklen_t *len)
{
	if (!arch_on || a == NULL || len == NULL)
		return;
	arch_prepare((uintptr_t)len, sizeof *len);
	arch_prepare((uintptr_t)a, *len);
}

/* ---- file names ---- */

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* Under diehard, a read-only open of a file reaches diehard (the filter
 * cannot see the path, and /dev/urandom's opens are answered there): a
 * round trip per open, most of a python3 start-up's virtualization cost.
 * With the fast clock path set up, the open is made with the run's marker
 * in an argument openat does not use, which the filter lets through, and
 * only an open that turns out to be of a random device (the kernel's
 * /dev/random or /dev/urandom, however named) is closed and made again
 * with the asking marker, which the filter sends to diehard whatever the
 * flags (an unmarked one with O_CLOEXEC stays in the kernel). The fd, or
 * -1 and errno; -2: not this way (the caller makes the call as ever). */
static int open_unwatched(int dir, const char *path, int flags, mode_t mode)
{
	uint64_t mark = clocks_mark();
	if (mark == 0 || (flags & (O_ACCMODE | O_DIRECTORY | O_PATH | O_CREAT)) != 0)
		return -2;
	int fd = (int)waiting(SYS_openat, dir, L(path), flags, mode, (long)mark, 0);
	if (fd < 0)
		return fd;
	struct stat st;
	if (__fstat64(fd, &st) != 0 ||
	    (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && (minor(st.st_rdev) == 8 || minor(st.st_rdev) == 9))) {
		(void)syscall(SYS_close, fd);
		return (int)waiting(SYS_openat, dir, L(path), flags, mode, (long)clocks_ask_mark(), 0);
	}
	return fd;
}

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	str(path);
	int fd = open_unwatched(AT_FDCWD, path, flags, mode);
	return fd != -2 ? fd : __open64(path, flags, mode);
}

EXPORT int openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	str(path);
	int fd = open_unwatched(dir, path, flags, mode);
	return fd != -2 ? fd : (int)waiting(SYS_openat, dir, L(path), flags, mode, 0, 0);
}

extern __typeof__(open) open64 SAME_AS(open);
extern __typeof__(openat) openat64 SAME_AS(openat);

/* _FORTIFY_SOURCE's opens (what Debian's python3, perl and date call for
 * an open whose flags the compiler cannot see): glibc's checks, then the
 * same open. A mode-needing open without one ends as glibc ends it. */
static void open_needs_mode(int flags)
{
	if (!(flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE)
		return;
	static const char msg[] = "*** invalid open call: O_CREAT or O_TMPFILE without mode ***: terminated\n";
	(void)syscall(SYS_write, 2, msg, sizeof msg - 1);
	abort();
}

EXPORT int __open_2(const char *path, int flags)
{
	open_needs_mode(flags);
	return open(path, flags);
}

EXPORT int __openat_2(int dir, const char *path, int flags)
{
	open_needs_mode(flags);
	return openat(dir, path, flags);
}

extern __typeof__(__open_2) __open64_2 SAME_AS(__open_2);
extern __typeof__(__openat_2) __openat64_2 SAME_AS(__openat_2);

EXPORT int creat(const char *path, mode_t mode)
{
	str(path);
	return __open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* fopen for reading ("r", with any of b and e after it) through
 * open_unwatched (what it opens is then fdopen's); any other mode, or an
 * open that must be watched, as glibc does it. */
static FILE *fopen_unwatched(const char *path, const char *mode, bool *done)
{
	*done = false;
	if (mode == NULL || mode[0] != 'r' || clocks_mark() == 0)
		return NULL;
	int flags = O_RDONLY;
	for (const char *m = mode + 1; *m != '\0'; m++) {
		if (*m == 'e')
			flags |= O_CLOEXEC;
		else if (*m != 'b')
			return NULL;
	}
	int fd = open_unwatched(AT_FDCWD, path, flags, 0);
	if (fd == -2)
		return NULL;
	*done = true;
	if (fd < 0)
		return NULL;
	FILE *f = _IO_fdopen(fd, "r");
	if (f == NULL) {
		int err = errno;
		(void)syscall(SYS_close, fd);
		errno = err;
	}
	return f;
}

EXPORT FILE *fopen(const char *restrict path, const char *restrict mode)
{
	str(path);
	str(mode);
	bool done;
	FILE *f = fopen_unwatched(path, mode, &done);
	return done ? f : _IO_fopen(path, mode);
}

extern __typeof__(fopen) fopen64 SAME_AS(fopen);

/* glibc's opendir: the directory opened so, then fdopendir's checks. */
EXPORT DIR *opendir(const char *path)
{
	str(path);
	int fd = __open64(path, O_RDONLY | O_NDELAY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int err = errno;
		close(fd);
		errno = err;
	}
	return d;
}

/* A result on a file view shows what every replica sees (viewstat.h):
 * the file at (dir, path, flags), or the descriptor dir when path is NULL. */
static inline int fixed(int rc, struct stat *st, int dir, const char *path, int flags)
{
	if (__builtin_expect(viewstat_on, 0) && rc == 0)
		viewstat_fix(st, dir, path, flags);
	return rc;
}

EXPORT int stat(const char *restrict path, struct stat *restrict st)
{
	str(path);
	buf(st, sizeof *st);
	return fixed((int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0), st, AT_FDCWD, path, 0);
}

EXPORT int lstat(const char *restrict path, struct stat *restrict st)
{
	str(path);
	buf(st, sizeof *st);
	return fixed((int)syscall(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW), st, AT_FDCWD, path,
		     AT_SYMLINK_NOFOLLOW);
}

EXPORT int fstatat(int dir, const char *restrict path, struct stat *restrict st, int flags)
{
	str(path);
	buf(st, sizeof *st);
	return fixed((int)syscall(SYS_newfstatat, dir, path, st, flags), st, dir, path, flags);
}

EXPORT int fstat(int fd, struct stat *st)
{
	buf(st, sizeof *st);
	return fixed(__fstat64(fd, st), st, fd, NULL, 0);
}

/* The ...64 names: struct stat64 is struct stat on x86-64. */
EXPORT int stat64(const char *restrict path, struct stat64 *restrict st)
{
	return stat(path, (struct stat *)st);
}

EXPORT int lstat64(const char *restrict path, struct stat64 *restrict st)
{
	return lstat(path, (struct stat *)st);
}

EXPORT int fstatat64(int dir, const char *restrict path, struct stat64 *restrict st, int flags)
{
	return fstatat(dir, path, (struct stat *)st, flags);
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}

/* glibc's older entry points (programs built before 2.33 call these);
 * on x86-64 the kernel's struct stat is the program's, whatever ver. */
EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return stat(path, st);
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return lstat(path, st);
}

EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	(void)ver;
	return fstat(fd, st);
}

EXPORT int __fxstatat(int ver, int dir, const char *path, struct stat *st, int flags)
{
	(void)ver;
	return fstatat(dir, path, st, flags);
}

int __xstat64(int, const char *, struct stat *) SAME_AS(__xstat);
int __lxstat64(int, const char *, struct stat *) SAME_AS(__lxstat);
int __fxstat64(int, int, struct stat *) SAME_AS(__fxstat);
int __fxstatat64(int, int, const char *, struct stat *, int) SAME_AS(__fxstatat);

EXPORT int statx(int dir, const char *restrict path, int flags, unsigned mask, struct statx *restrict stx)
{
	str(path);
	buf(stx, sizeof *stx);
	int rc = (int)syscall(SYS_statx, dir, path, flags, mask, stx);
	if (__builtin_expect(viewstat_on, 0) && rc == 0)
		viewstat_fix_statx(stx, dir, path, flags);
	return rc;
}

/* A utimensat whose "now" viewstat made the agreed time: explicit times
 * need the file's ownership where "now" needs only write permission, so
 * EPERM retries with the caller's own times. */
static int utimens(int dir, const char *path, const struct timespec *times, int flags)
{
	struct timespec out[2];
	const struct timespec *t = viewstat_times(times, out);
	int rc = (int)syscall(SYS_utimensat, dir, path, t, flags);
	if (rc != 0 && errno == EPERM && t != times)
		rc = (int)syscall(SYS_utimensat, dir, path, times, flags);
	return rc;
}

EXPORT int utimensat(int dir, const char *path, const struct timespec times[2], int flags)
{
	str(path);
	return utimens(dir, path, times, flags);
}

EXPORT int futimens(int fd, const struct timespec times[2])
{
	return utimens(fd, NULL, times, 0);
}

EXPORT int utimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];
	if (tv != NULL)
		for (int i = 0; i < 2; i++)
			ts[i] = (struct timespec){ tv[i].tv_sec, tv[i].tv_usec * 1000 };
	str(path);
	return utimens(AT_FDCWD, path, tv != NULL ? ts : NULL, 0);
}

EXPORT int utime(const char *path, const struct utimbuf *b)
{
	struct timespec ts[2];
	if (b != NULL) {
		ts[0] = (struct timespec){ b->actime, 0 };
		ts[1] = (struct timespec){ b->modtime, 0 };
	}
	str(path);
	return utimens(AT_FDCWD, path, b != NULL ? ts : NULL, 0);
}

EXPORT int access(const char *path, int how)
{
	str(path);
	return (int)syscall(SYS_access, path, how);
}

EXPORT int faccessat(int dir, const char *path, int how, int flags)
{
	str(path);
	if (flags == 0)
		return (int)syscall(SYS_faccessat, dir, path, how);
	return (int)syscall(SYS_faccessat2, dir, path, how, flags);
}

EXPORT int unlink(const char *path)
{
	str(path);
	return (int)syscall(SYS_unlink, path);
}

EXPORT int unlinkat(int dir, const char *path, int flags)
{
	str(path);
	return (int)syscall(SYS_unlinkat, dir, path, flags);
}

EXPORT int rename(const char *from, const char *to)
{
	str(from);
	str(to);
	return (int)syscall(SYS_rename, from, to);
}

EXPORT int mkdir(const char *path, mode_t mode)
{
	str(path);
	return (int)syscall(SYS_mkdir, path, mode);
}

EXPORT int rmdir(const char *path)
{
	str(path);
	return (int)syscall(SYS_rmdir, path);
}

EXPORT int chdir(const char *path)
{
	str(path);
	return (int)syscall(SYS_chdir, path);
}

EXPORT ssize_t readlink(const char *restrict path, char *restrict out, size_t n)
{
	str(path);
	buf(out, n);
	return syscall(SYS_readlink, path, out, n);
}

/* ---- exec ---- */

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	str(path);
	strings(argv);
	strings(envp);
	return exec_call(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

/* ---- I/O buffers ---- */

EXPORT ssize_t read(int fd, void *p, size_t n)
{
	buf(p, n);
	return __read(fd, p, n);
}

EXPORT ssize_t write(int fd, const void *p, size_t n)
{
	buf(p, n);
	return __write(fd, p, n);
}

EXPORT ssize_t pread(int fd, void *p, size_t n, off_t off)
{
	buf(p, n);
	return __pread64(fd, p, n, off);
}

EXPORT ssize_t pwrite(int fd, const void *p, size_t n, off_t off)
{
	buf(p, n);
	return __pwrite64(fd, p, n, off);
}

extern __typeof__(pread) pread64 SAME_AS(pread);
extern __typeof__(pwrite) pwrite64 SAME_AS(pwrite);

EXPORT ssize_t readv(int fd, const struct iovec *v, int n)
{
	iov(v, n);
	return waiting(SYS_readv, fd, L(v), n, 0, 0, 0);
}

EXPORT ssize_t writev(int fd, const struct iovec *v, int n)
{
	iov(v, n);
	return waiting(SYS_writev, fd, L(v), n, 0, 0, 0);
}

EXPORT ssize_t recv(int fd, void *p, size_t n, int flags)
{
	buf(p, n);
	return __recv(fd, p, n, flags);
}

EXPORT ssize_t recvfrom(int fd, void *restrict p, size_t n, int flags, struct sockaddr *restrict a,
			socklen_t *restrict len)
{
	buf(p, n);
	addr_out(a, len);
	return waiting(SYS_recvfrom, fd, L(p), L(n), flags, L(a), L(len));
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	msghdr(m);
	return waiting(SYS_recvmsg, fd, L(m), flags, 0, 0, 0);
}

EXPORT ssize_t send(int fd, const void *p, size_t n, int flags)
{
	buf(p, n);
	return __send(fd, p, n, flags);
}

EXPORT ssize_t sendto(int fd, const void *p, size_t n, int flags, const struct sockaddr *a, socklen_t len)
{
	buf(p, n);
	buf(a, len);
	return waiting(SYS_sendto, fd, L(p), L(n), flags, L(a), L(len));
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	msghdr(m);
	return waiting(SYS_sendmsg, fd, L(m), flags, 0, 0, 0);
}

/* ---- sockets ---- */

EXPORT int bind(int fd, const struct sockaddr *a, socklen_t len)
{
	buf(a, len);
	return (int)syscall(SYS_bind, fd, a, len);
}

EXPORT int connect(int fd, const struct sockaddr *a, socklen_t len)
{
	buf(a, len);
	return __connect(fd, a, len);
}

EXPORT int accept(int fd, struct sockaddr *restrict a, socklen_t *restrict len)
{
	addr_out(a, len);
	return (int)waiting(SYS_accept, fd, L(a), L(len), 0, 0, 0);
}

EXPORT int accept4(int fd, struct sockaddr *restrict a, socklen_t *restrict len, int flags)
{
	addr_out(a, len);
	return (int)waiting(SYS_accept4, fd, L(a), L(len), flags, 0, 0);
}

EXPORT int getsockname(int fd, struct sockaddr *restrict a, socklen_t *restrict len)
{
	addr_out(a, len);
	return (int)syscall(SYS_getsockname, fd, a, len);
}

EXPORT int getpeername(int fd, struct sockaddr *restrict a, socklen_t *restrict len)
{
	addr_out(a, len);
	return (int)syscall(SYS_getpeername, fd, a, len);
}

EXPORT int getsockopt(int fd, int level, int name, void *restrict v, socklen_t *restrict len)
{
	addr_out(v, len);
	return (int)syscall(SYS_getsockopt, fd, level, name, v, len);
}

EXPORT int setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
	buf(v, len);
	return (int)syscall(SYS_setsockopt, fd, level, name, v, len);
}

/* ---- event arrays ---- */

EXPORT int epoll_wait(int fd, struct epoll_event *ev, int n, int timeout)
{
	if (n > 0)
		buf(ev, (size_t)n * sizeof *ev);
	return (int)waiting(SYS_epoll_wait, fd, L(ev), n, timeout, 0, 0);
}

EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int n, int timeout, const sigset_t *mask)
{
	if (n > 0)
		buf(ev, (size_t)n * sizeof *ev);
	buf(mask, sizeof *mask);
	return (int)waiting(SYS_epoll_pwait, fd, L(ev), n, timeout, L(mask), _NSIG / 8);
}

EXPORT int epoll_ctl(int fd, int op, int target, struct epoll_event *ev)
{
	buf(ev, sizeof *ev);
	return (int)syscall(SYS_epoll_ctl, fd, op, target, ev);
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	buf(fds, (size_t)n * sizeof *fds);
	return __poll(fds, n, timeout);
}
