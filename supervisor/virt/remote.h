/* remote.h — reading and writing a replica's memory for the answers of
 * notified calls (and the arguments they point to). Writes go through process_vm_writev, which honours the
 * caller's page protections: a pointer to read-only memory gets EFAULT, as
 * from the kernel (/proc/PID/mem would write through them). */
#ifndef DIEHARD_REMOTE_H
#define DIEHARD_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes n bytes at addr in thread tid's process. Returns how many were
 * written (fewer when a page past addr is bad), or -errno when none were:
 * EFAULT for a bad address, EPERM or EACCES when we may not, ESRCH when the
 * caller is gone. */
ssize_t remote_write(pid_t tid, uint64_t addr, const void *buf, size_t n);

/* remote_write of all n bytes: 0, or -errno (a short write is -EFAULT). */
int remote_write_all(pid_t tid, uint64_t addr, const void *buf, size_t n);

/* Reads n bytes at addr in thread tid's process into buf: 0, or -errno
 * (a short read is -EFAULT). */
int remote_read_all(pid_t tid, uint64_t addr, void *buf, size_t n);

/* Reads a NUL-terminated string of at most size-1 bytes into buf, a page at
 * a time so that the end of the string's page is never overrun. 0, or
 * -errno (ENAMETOOLONG when it does not fit). */
int remote_read_string(pid_t tid, uint64_t addr, char *buf, size_t size);

/* Thread tid's /proc/TID/status, its first size - 1 bytes at most, into
 * buf (NUL-terminated; one read: the kernel makes it whole). 0, or -1
 * with errno. */
int remote_status(pid_t tid, char *buf, size_t size);

/* Thread tid's thread group (its process), from /proc/TID/status; -1
 * with errno. */
pid_t remote_thread_group(pid_t tid);

/* Whether process pid listens on TCP (IPv4 or IPv6): its descriptors'
 * socket inodes (/proc/PID/fd) looked up among its network namespace's
 * listening sockets (/proc/PID/net/tcp, tcp6), however many. REMOTE_LISTENS:
 * it holds one; REMOTE_UNREADABLE: /proc could not tell (gone, not ours,
 * out of memory); 0: it holds none. */
enum { REMOTE_LISTENS = 1, REMOTE_UNREADABLE = 2 };
unsigned remote_tcp_roles(pid_t pid);

/* Thread tid's process and that process's parent, from
 * /proc/TID/status: false when it cannot be read (gone). */
bool remote_family(pid_t tid, pid_t *tgid, pid_t *ppid);

/* Task tid's start time (clock ticks since boot, /proc/TID/stat), and its
 * state letter into *state unless state is NULL; 0 when it is gone. */
uint64_t remote_start_time(pid_t tid, char *state);

/* pid's state letter ('T': stopped by a signal) and parent, from
 * /proc/PID/stat: true, or false when it cannot be read (gone). */
bool remote_stat(pid_t pid, char *state, pid_t *ppid);

#endif
