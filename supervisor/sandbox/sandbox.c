/* sandbox.c — see sandbox.h. The init side runs between clone and exit in
 * a copy of diehard, or in diehard-init (single-threaded, so plain libc is
 * safe there, but it allocates nothing and uses no stdio).
 *
 * The init waits on two things at once: its signals (all blocked, taken
 * through a signalfd, so that each comes with its sender as sigwaitinfo
 * gave it) and diehard's requests on the socket channel (factory.h). Each
 * request is answered at once, in one message: the sockets made (socket(2)
 * in the init's network namespace, which is the program's) and a byte
 * saying whether all of them could be.
 *
 * The namespaces' set-up runs in the init and, for the program's own (as
 * root: a user and mount namespace; the network one), in the program
 * between its fork and its exec: system calls only, formatted by hand
 * (sandbox_enter, sandbox_program_enter, sandbox_map_program). */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ipv6.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

unsigned long sandbox_clone_flags(bool private_net)
{
	unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;
	if (private_net)
		flags |= CLONE_NEWNET;
	return flags;
}

const char *sandbox_describe(unsigned long flags)
{
	/* One static string per combination, so that the name outlives the
	 * flags (the report and the fatal lines keep it). */
	static char names[32][40];
	static const struct {
		unsigned long flag;
		const char *name;
	} ns[] = { { CLONE_NEWUSER, "user" }, { CLONE_NEWPID, "pid" },     { CLONE_NEWNS, "mount" },
		   { CLONE_NEWIPC, "ipc" },   { CLONE_NEWNET, "network" } };
	unsigned index = 0;
	for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; i++)
		if (flags & ns[i].flag)
			index |= 1u << i;
	char *out = names[index];
	if (out[0] != '\0')
		return out;
	size_t len = 0;
	for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		if (!(index & (1u << i)))
			continue;
		len += (size_t)snprintf(out + len, sizeof names[0] - len, "%s%s", len ? ", " : "", ns[i].name);
	}
	return index == 0 ? "none" : out;
}

unsigned long sandbox_init_flags(unsigned long flags)
{
	unsigned long init = flags & (CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC);
	if (geteuid() != 0)
		init |= flags & CLONE_NEWUSER;
	return init;
}

bool sandbox_program_user(unsigned long flags)
{
	return (flags & CLONE_NEWUSER) && geteuid() == 0;
}

int sandbox_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t n = strlen(s);
	ssize_t w = write(fd, s, n);
	int err = w == (ssize_t)n ? 0 : w < 0 ? errno : EIO;
	close(fd);
	return err;
}

/* "ID ID 1\n" without stdio. */
static void format_map(char *buf, unsigned long id)
{
	char digits[24];
	int n = 0;
	do
		digits[n++] = (char)('0' + id % 10);
	while ((id /= 10) != 0);
	char *p = buf;
	for (int rep = 0; rep < 2; rep++) {
		for (int i = n - 1; i >= 0; i--)
			*p++ = digits[i];
		*p++ = ' ';
	}
	memcpy(p, "1\n", 3);
}

/* A new network namespace has its loopback (127.0.0.1, and ::1 once up)
 * and nothing else, down: up it goes, so that the program reaches its own
 * listening sockets and diehard's sockets made in there reach them too.
 * The interface ioctls reach the devices of the socket's namespace
 * whatever its family: a unix socket does, where a service manager allows
 * no other (RestrictAddressFamilies=AF_UNIX). */
static int loopback_up(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", sizeof "lo");
	int err = 0;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
		err = errno;
	} else if (!(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP);
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
			err = errno;
	}
	close(fd);
	return err;
}

/* Whether path is a directory (a mount point to cover). */
static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The replica's own /dev/shm, /dev/mqueue and /dev/pts over the host's,
 * each where the host has the directory. /dev/shm: POSIX shared memory
 * and semaphores (shm_open, sem_open) are files there, shared with the
 * host and every sibling until covered; a tmpfs of its own, as the host's
 * (1777, no devices, no setuid). /dev/mqueue shows the message queues of
 * the mounter's IPC namespace: the host's files (which open the host's
 * queues) until covered by one of the replica's. /dev/pts: a devpts
 * instance of its own, so that the host's terminals (the one diehard was
 * started from among them) are not there to open by name; /dev/ptmx
 * makes its ptys in the devpts at /dev/pts beside it, so ptys still work.
 * 0, or an errno. */
static int private_dev(bool ipc)
{
	if (is_dir("/dev/shm") && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
		return errno;
	if (ipc && is_dir("/dev/mqueue") &&
	    mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return errno;
	if (is_dir("/dev/pts") && mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
					"newinstance,ptmxmode=0666,mode=0620") != 0)
		return errno;
	return 0;
}

int sandbox_enter(unsigned long flags, uid_t uid, gid_t gid)
{
	int err;
	if (flags & CLONE_NEWUSER) {
		/* The user is itself inside, not root: files it makes are its
		 * own, programs that refuse to run as root still run. The
		 * kernel wants setgroups denied before an unprivileged gid map. */
		/* Our /proc files belong to root while we are not dumpable
		 * (diehard is not, and we are its copy): dumpable for the three
		 * writes, while nothing can name us yet but diehard's user. */
		char map[64];
		if (prctl(PR_SET_DUMPABLE, 1) != 0)
			return errno;
		format_map(map, uid);
		err = sandbox_write_file("/proc/self/uid_map", map);
		if (err == 0)
			err = sandbox_write_file("/proc/self/setgroups", "deny");
		format_map(map, gid);
		if (err == 0)
			err = sandbox_write_file("/proc/self/gid_map", map);
		if (prctl(PR_SET_DUMPABLE, 0) != 0 && err == 0)
			err = errno;
		if (err != 0)
			return err;
	}
	/* Nothing mounted here may reach the host's mount table: as root the
	 * copies are shared with it (in a new user namespace the kernel made
	 * them slaves already). Then a /proc of the new pid namespace over
	 * the old one. */
	if (!(flags & CLONE_NEWUSER) && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
		return errno;
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return errno;
	return 0;
}

int sandbox_enter_dev(unsigned long flags)
{
	return private_dev(flags & CLONE_NEWIPC);
}

/* path bound onto itself and made read-only (no setuid, devices or
 * programs either); where there is no such file, nothing. 0, or an errno. */
static int readonly(const char *path)
{
	if (mount(path, path, NULL, MS_BIND, NULL) != 0)
		return errno == ENOENT ? 0 : errno;
	if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return errno;
	return 0;
}

int sandbox_guard_kernel(void)
{
	/* The kernel's knobs that host root may write by file permissions
	 * alone (owned by uid 0, which root of the program's user namespace
	 * is): core_pattern and every other sysctl, the magic SysRq key,
	 * interrupt affinities, /sys's attributes. Read-only here; copied into
	 * the program's namespace, they stay so (MNT_LOCK_READONLY). */
	static const char *const paths[] = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus",
					     "/proc/fs" };
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		int err = readonly(paths[i]);
		if (err != 0)
			return err;
	}
	/* /sys and every mount under it (cgroups, debugfs, securityfs...),
	 * in one call; before Linux 5.12, /sys itself. */
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
	if (!is_dir("/sys") || syscall(SYS_mount_setattr, AT_FDCWD, "/sys", AT_RECURSIVE, &ro, sizeof ro) == 0)
		return 0;
	if (errno != ENOSYS)
		return errno;
	return mount(NULL, "/sys", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0 ? 0 : errno;
}

/* The host's own addresses, for every new network namespace's loopback
 * (sandbox_host_addrs: set before the replicas are forked). */
static struct sockaddr_storage host_addrs[SANDBOX_HOST_ADDRS];
static unsigned nhost_addrs;

void sandbox_host_addrs(const struct sockaddr_storage *a, unsigned n)
{
	nhost_addrs = n < SANDBOX_HOST_ADDRS ? n : SANDBOX_HOST_ADDRS;
	memcpy(host_addrs, a, nhost_addrs * sizeof *a);
}

/* The host's addresses on the loopback (IPv4 as aliases lo:1.., each a
 * /32; IPv6 a /128), so that a program asking which families the machine
 * has (getaddrinfo's AI_ADDRCONFIG) sees the host's answer. Best effort:
 * a service manager may allow no such socket. */
static void host_addrs_up(void)
{
	int fd4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int fd6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned label = 0;
	for (unsigned i = 0; i < nhost_addrs; i++) {
		if (host_addrs[i].ss_family == AF_INET && fd4 >= 0) {
			struct ifreq ifr;
			memset(&ifr, 0, sizeof ifr);
			char *o = ifr.ifr_name;
			*o++ = 'l';
			*o++ = 'o';
			*o++ = ':';
			*o = (char)('1' + label++); /* at most SANDBOX_HOST_ADDRS: one digit */
			memcpy(&ifr.ifr_addr, &host_addrs[i], sizeof(struct sockaddr_in));
			if (ioctl(fd4, SIOCSIFADDR, &ifr) == 0) {
				struct sockaddr_in *m = (struct sockaddr_in *)&ifr.ifr_addr;
				m->sin_addr.s_addr = 0xffffffffu;
				(void)ioctl(fd4, SIOCSIFNETMASK, &ifr);
			}
		} else if (host_addrs[i].ss_family == AF_INET6 && fd6 >= 0) {
			struct in6_ifreq r6;
			memset(&r6, 0, sizeof r6);
			r6.ifr6_addr = ((const struct sockaddr_in6 *)&host_addrs[i])->sin6_addr;
			r6.ifr6_prefixlen = 128;
			r6.ifr6_ifindex = 1; /* lo, the namespace's first and only device */
			(void)ioctl(fd6, SIOCSIFADDR, &r6);
		}
	}
	if (fd4 >= 0)
		close(fd4);
	if (fd6 >= 0)
		close(fd6);
}

int sandbox_program_enter(unsigned long flags, unsigned long *step, int *net_fd)
{
	*net_fd = -1;
	*step = CLONE_NEWUSER;
	/* Root's user namespace, and a mount namespace in it: the mounts
	 * copied into a namespace of a less privileged user namespace are
	 * locked together (the kernel's MNT_LOCKED), so the init's /proc,
	 * /dev/shm and /dev/pts cannot be unmounted to show the host's. */
	if (sandbox_program_user(flags) && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
		return errno;
	if (!(flags & CLONE_NEWNET))
		return 0;
	/* The network namespace: made here, in the program, so that it
	 * belongs to the program's user namespace (as root, binding port 80
	 * needs that), and not by diehard's clone: the costliest to create
	 * (about 0.4 ms), so diehard's launches of the replicas do not wait
	 * for one another's. We hold CAP_NET_ADMIN over it until our exec. */
	*step = CLONE_NEWNET;
	int err;
	if (unshare(CLONE_NEWNET) != 0)
		return errno;
	if ((err = loopback_up()) != 0)
		return err;
	host_addrs_up();
	*net_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	return *net_fd < 0 ? errno : 0;
}

/* Appends v and then c to buf (of cap bytes) at *o, without stdio (we
 * are between fork and exec); false when it does not fit. */
static bool append_number(char *buf, size_t cap, size_t *o, unsigned long v, char c)
{
	char digits[24];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	if (*o + (size_t)n + 1 >= cap)
		return false;
	while (n > 0)
		buf[(*o)++] = digits[--n];
	buf[(*o)++] = c;
	buf[*o] = '\0';
	return true;
}

/* Reads /proc/self/{uid,gid}_map (kind "uid" or "gid") and writes its
 * ranges as seen from inside ("FIRST FIRST COUNT" for each line "FIRST
 * OUTSIDE COUNT") to /proc/PROG/{uid,gid}_map: every id we have is itself
 * in the program's namespace (all of them, on a host). At most the
 * kernel's 340 lines. 0, or an errno. */
static int copy_map(pid_t prog, const char *kind)
{
	char path[64], in[340 * 36], out[340 * 36];
	int fd = open(kind[0] == 'u' ? "/proc/self/uid_map" : "/proc/self/gid_map", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t len = 0;
	ssize_t n = 0;
	while (len < sizeof in && (n = read(fd, in + len, sizeof in - len)) != 0) {
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0)
			len += (size_t)n;
	}
	int err = n < 0 ? errno : len == sizeof in ? E2BIG : 0;
	close(fd);
	if (err != 0)
		return err;
	/* Three decimals a line, as the kernel prints them. */
	size_t o = 0;
	unsigned long field[3];
	int nf = 0;
	bool in_num = false;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];
		if (c >= '0' && c <= '9') {
			if (!in_num) {
				if (nf == 3)
					return EINVAL;
				field[nf++] = 0;
				in_num = true;
			}
			field[nf - 1] = field[nf - 1] * 10 + (unsigned long)(c - '0');
			if (field[nf - 1] > 0xffffffffUL)
				return EINVAL;
			continue;
		}
		in_num = false;
		if (c == ' ')
			continue;
		if (c != '\n' || nf != 3)
			return EINVAL;
		if (!append_number(out, sizeof out, &o, field[0], ' ') ||
		    !append_number(out, sizeof out, &o, field[0], ' ') ||
		    !append_number(out, sizeof out, &o, field[2], '\n'))
			return E2BIG;
		nf = 0;
	}
	if (nf != 0 || o == 0)
		return EINVAL;
	size_t p = 6;
	memcpy(path, "/proc/", 6);
	if (!append_number(path, sizeof path, &p, (unsigned long)prog, '/'))
		return E2BIG;
	memcpy(path + p, kind[0] == 'u' ? "uid_map" : "gid_map", sizeof "uid_map");
	return sandbox_write_file(path, out);
}

int sandbox_map_program(pid_t prog)
{
	/* setgroups stays allowed (the kernel's default for a map written
	 * from outside): root's daemons drop to another user with
	 * initgroups. */
	int err = copy_map(prog, "uid");
	return err != 0 ? err : copy_map(prog, "gid");
}

/* Reaps every child that has ended; true (and *st) when prog is one. */
static bool reap(pid_t prog, int *st)
{
	bool ended = false;
	for (;;) {
		int s;
		pid_t p = waitpid(-1, &s, WNOHANG | __WALL);
		if (p <= 0)
			return ended;
		if (p != prog)
			continue;
		if (WIFSTOPPED(s)) {
			/* The program asked to be traced by its parent (us): we
			 * are no debugger, let it go on. */
			(void)ptrace(PTRACE_DETACH, prog, NULL, (void *)(long)WSTOPSIG(s));
			continue;
		}
		*st = s;
		ended = true;
	}
}

/* The program ended with status st: diehard gets it, and our exit kills
 * whatever the program left behind. */
static _Noreturn void report_end(int status_fd, int st)
{
	ssize_t w;
	do
		w = write(status_fd, &st, sizeof st);
	while (w < 0 && errno == EINTR);
	_exit(w == (ssize_t)sizeof st ? 0 : 125);
}

/* One signal taken (code and sender as siginfo_t has them). */
static void take_signal(pid_t prog, int status_fd, int sig, int code, pid_t sender)
{
	if (sig == SIGCHLD) {
		int st;
		if (reap(prog, &st))
			report_end(status_fd, st);
		return;
	}
	/* From diehard (outside the namespace: no pid here) and sent with
	 * kill(): forwarded as diehard forwards a terminal's signals, to the
	 * whole job. From inside, or from the kernel: dropped. */
	if (code != SI_USER || sender != 0)
		return;
	int forward = sig == SIGTSTP ? SIGSTOP : sig == SANDBOX_KILL_SIGNAL ? SIGKILL : sig;
	if (kill(-prog, forward) != 0 || forward == SIGKILL)
		(void)kill(prog, forward);
}

/* Signals alone, should there be no signalfd (the kernel is out of
 * memory): the channel was closed, diehard reads its end as EPIPE. */
static _Noreturn void wait_signals(pid_t prog, int status_fd)
{
	sigset_t all;
	sigfillset(&all);
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);
		if (sig >= 0)
			take_signal(prog, status_fd, sig, si.si_code, si.si_pid);
	}
}

static void format_int(char *buf, int v);

/* The namespace's ns_last_pid (sandbox_init_run), or -1. */
static int last_pid = -1;

/* The last pid request (factory.h): read, or written first (set >= 0).
 * 0 and *value, or an errno. */
static int last_pid_op(long set, uint32_t *value)
{
	if (last_pid < 0)
		return ENOENT;
	char buf[24];
	if (set >= 0) {
		format_int(buf, (int)set);
		size_t len = strlen(buf);
		buf[len++] = '\n'; /* the number ends there, whatever was longer before */
		if (pwrite(last_pid, buf, len, 0) != (ssize_t)len)
			return errno ? errno : EIO;
	}
	ssize_t n = pread(last_pid, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return n < 0 ? errno : EIO;
	buf[n] = '\0';
	uint32_t v = 0;
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (uint32_t)(buf[i] - '0');
	*value = v;
	return 0;
}

/* A last pid request answered: { 'P', 0, tag } reads it, { 'P', 1, tag,
 * value (4 bytes, little-endian) } writes it first; the answer is { errno
 * or 0, tag, the value now (4 bytes, little-endian) }. */
static bool serve_last_pid(int fd, const unsigned char *req, ssize_t n)
{
	uint32_t v = 0;
	int err = EINVAL;
	unsigned char tag = n >= 3 ? req[2] : 0;
	if (n == 3 && req[1] == 0) {
		err = last_pid_op(-1, &v);
	} else if (n == 7 && req[1] == 1) {
		uint32_t set = (uint32_t)req[3] | (uint32_t)req[4] << 8 | (uint32_t)req[5] << 16 | (uint32_t)req[6] << 24;
		err = set > INT32_MAX ? EINVAL : last_pid_op((long)set, &v);
	}
	unsigned char answer[6] = { (unsigned char)(err > 255 ? 255 : err), tag, (unsigned char)v, (unsigned char)(v >> 8),
				    (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	return send(fd, answer, sizeof answer, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof answer ||
	       (errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN && errno != EBADF);
}

/* One request on the socket channel (factory.h) answered: { family 4 or
 * 6, or 1 for AF_UNIX (| 0x10: datagram sockets), count
 * 1..SANDBOX_SOCKETS_MAX } gets the sockets made and 0, or the
 * errno of the first socket() that failed (EINVAL for a malformed
 * request) with those made before it. false once the channel is done
 * (diehard closed it, or it broke). */
static bool serve_request(int fd)
{
	unsigned char req[8];
	ssize_t n = recv(fd, req, sizeof req, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	if (req[0] == SANDBOX_LAST_PID)
		return serve_last_pid(fd, req, n);
	int family = (req[0] & 0xef) == 4 ? AF_INET : (req[0] & 0xef) == 6 ? AF_INET6 : (req[0] & 0xef) == 1 ? AF_UNIX : AF_UNSPEC;
	int type = (req[0] & 0x10) ? SOCK_DGRAM : SOCK_STREAM;
	unsigned count = n == 2 ? req[1] : 0;
	int fds[SANDBOX_SOCKETS_MAX];
	unsigned made = 0;
	int err = 0;
	if (n != 2 || family == AF_UNSPEC || count < 1 || count > SANDBOX_SOCKETS_MAX)
		err = EINVAL;
	while (err == 0 && made < count) {
		int s = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s < 0)
			err = errno;
		else
			fds[made++] = s;
	}
	unsigned char answer = (unsigned char)(err > 255 ? 255 : err);
	struct iovec iov = { &answer, 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(SANDBOX_SOCKETS_MAX * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (made > 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(made * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(made * sizeof(int));
		memcpy(CMSG_DATA(c), fds, made * sizeof(int));
	}
	/* Never blocking: signals wait behind us. An answer that cannot go
	 * now is lost, and diehard's wait for it times out. */
	bool alive = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 || (errno != EPIPE && errno != ECONNRESET &&
									     errno != ENOTCONN && errno != EBADF);
	/* Sent, they are diehard's (ours were copies). */
	for (unsigned i = 0; i < made; i++)
		close(fds[i]);
	return alive;
}

_Noreturn void sandbox_init_run(pid_t prog, int status_fd, int net_fd, int gate_fd, int last_pid_fd)
{
	last_pid = last_pid_fd;
	/* Tracing us would only let the program lie about its own status,
	 * but nothing needs to; then the program may go on to its exec. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	if (gate_fd >= 0)
		close(gate_fd);
	/* Every signal stays blocked (as spawn.c forked us) and is taken
	 * here: a blocked signal is queued even for a namespace's init,
	 * with its sender. */
	sigset_t all;
	sigfillset(&all);
	int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		if (net_fd >= 0)
			close(net_fd);
		wait_signals(prog, status_fd);
	}
	struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = net_fd, .events = POLLIN } };
	nfds_t n = net_fd >= 0 ? 2 : 1;
	for (;;) {
		if (poll(p, n, -1) < 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				take_signal(prog, status_fd, (int)si.ssi_signo, si.ssi_code, (pid_t)si.ssi_pid);
		}
		/* Its end (or an error) only stops the answers: the program
		 * runs on, and its status still goes to diehard. */
		if (n == 2 && p[1].revents != 0 && !serve_request(net_fd)) {
			close(net_fd);
			n = 1;
		}
	}
}

/* A decimal int without stdio (-1 for a negative one: the only one used). */
static void format_int(char *buf, int v)
{
	char digits[16];
	int n = 0;
	if (v < 0) {
		*buf++ = '-';
		v = 1;
	}
	unsigned u = (unsigned)v;
	do
		digits[n++] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	while (n > 0)
		*buf++ = digits[--n];
	*buf = '\0';
}

/* CAP_CHECKPOINT_RESTORE kept across the exec of diehard-init (as an
 * ambient capability), for writes to ns_last_pid: the kernel asks for it in
 * the pid namespace's user namespace at each write. Unprivileged, the init
 * holds every capability there (it made the namespace) but is not uid 0 in
 * it, so its exec would drop them all. Best effort: without it (before
 * Linux 5.9) pids are not aligned, said by diehard. Only that capability:
 * the init needs no other after its exec. */
static void keep_checkpoint_cap(void)
{
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return;
	unsigned word = CAP_CHECKPOINT_RESTORE / 32, bit = 1u << (CAP_CHECKPOINT_RESTORE % 32);
	if (!(d[word].permitted & bit))
		return;
	d[word].inheritable |= bit;
	if (syscall(SYS_capset, &h, d) != 0)
		return;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHECKPOINT_RESTORE, 0, 0);
}

_Noreturn void sandbox_init_exec(const char *init_path, pid_t prog, int status_fd, int net_fd, int gate_fd,
				 int last_pid_fd)
{
	if (last_pid_fd >= 0)
		keep_checkpoint_cap();
	extern char **environ;
	char p[16], f[16], c[16], g[16], l[16];
	format_int(p, (int)prog);
	format_int(f, status_fd);
	format_int(c, net_fd);
	format_int(g, gate_fd);
	format_int(l, last_pid_fd);
	char *argv[] = { (char *)"diehard-init", p, f, c, g, l, NULL };
	/* Signals stay blocked (and queued) across the exec. */
	if (init_path != NULL && fcntl(status_fd, F_SETFD, 0) == 0 && (net_fd < 0 || fcntl(net_fd, F_SETFD, 0) == 0) &&
	    (gate_fd < 0 || fcntl(gate_fd, F_SETFD, 0) == 0) && (last_pid_fd < 0 || fcntl(last_pid_fd, F_SETFD, 0) == 0))
		execve(init_path, argv, environ);
	sandbox_init_run(prog, status_fd, net_fd, gate_fd, last_pid_fd);
}

/* Reads the NSpid line of /proc/PID[/task/TID]/status: its first and last
 * fields. false if there is none. */
static bool read_nspid(const char *status_path, pid_t *first, pid_t *last, int *levels)
{
	FILE *f = fopen(status_path, "re");
	if (f == NULL)
		return false;
	char line[256];
	bool found = false;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		char *p = line + 6, *end;
		*levels = 0;
		for (;;) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			if (*levels == 0)
				*first = (pid_t)v;
			*last = (pid_t)v;
			++*levels;
			p = end;
		}
		found = *levels > 0;
		break;
	}
	fclose(f);
	return found;
}

/* Searches dir (/proc or /proc/PID/task) for the entry in tid's pid
 * namespace whose innermost pid is nspid. */
static pid_t search(const char *dir, const struct stat *ns, pid_t nspid)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	pid_t found = 0;
	struct dirent *e;
	while (found == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end != '\0')
			continue;
		char path[512];
		pid_t first, last;
		int levels;
		snprintf(path, sizeof path, "%s/%ld/status", dir, pid);
		if (!read_nspid(path, &first, &last, &levels) || levels < 2 || last != nspid)
			continue;
		if (sandbox_in_pidns(first, ns))
			found = first;
	}
	closedir(d);
	return found;
}

bool sandbox_pidns(pid_t pid, struct stat *ns)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
	return stat(path, ns) == 0;
}

bool sandbox_in_pidns(pid_t pid, const struct stat *ns)
{
	struct stat st;
	return sandbox_pidns(pid, &st) && st.st_ino == ns->st_ino && st.st_dev == ns->st_dev;
}

pid_t sandbox_global_pid(pid_t tid, pid_t nspid)
{
	char path[64];
	pid_t first, last;
	int levels;
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	if (!read_nspid(path, &first, &last, &levels) || levels < 2)
		return nspid; /* not in a namespace of ours */
	if (last == nspid)
		return tid;
	struct stat ns;
	if (!sandbox_pidns(tid, &ns))
		return 0;
	/* Its own threads first (pthread_getcpuclockid), then processes. */
	snprintf(path, sizeof path, "/proc/%d/task", (int)tid);
	pid_t g = search(path, &ns, nspid);
	return g != 0 ? g : search("/proc", &ns, nspid);
}
