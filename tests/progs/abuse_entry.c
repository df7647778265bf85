/*
 * abuse_entry: a replica making the system calls diehard's seccomp filter
 * refuses (docs/SANDBOX.md, "The seccomp filter's refusals"), through a
 * chosen entry into the kernel, for tests/abuse_entry.bats.
 *
 *   abuse_entry [--lock DIR] [--log FILE] [--push TEXT] ENTRY ATTACK TARGET
 *
 * ENTRY is how the call enters the kernel:
 *   native   the x86-64 `syscall` instruction with x86-64's numbers
 *   i386     `int $0x80` with i386's numbers and 32-bit arguments (every
 *            pointer into memory mapped below 4 GiB, MAP_32BIT)
 *   x32      `syscall` with x32's numbers (__X32_SYSCALL_BIT, 0x40000000,
 *            set; x32's own numbers where it has them) and x32's 32-bit
 *            structures
 * ATTACK and what TARGET names:
 *   tiocsti TTY          ioctl(TIOCSTI) of each byte of TEXT (default "X")
 *                        into the terminal TTY: "own" (a pseudo-terminal
 *                        the process makes its controlling one, in a new
 *                        session: the call reaches the kernel without
 *                        privilege, and the bytes that arrived in its input
 *                        are counted), or paths separated by ':', the
 *                        first that opens
 *   ptrace PID           PTRACE_SEIZE
 *   process_vm_readv PID, process_vm_writev PID
 *                        one byte, in a child at an address of this
 *                        program's own low memory, in anything else at
 *                        0x1000 (never mapped: EFAULT then means the
 *                        call reached it)
 *   pidfd_open PID
 *   kcmp PID             kcmp(self, PID, KCMP_VM)
 *   pidfd_getfd PID      fd 0 of PID, through a pidfd opened natively
 *   pidfd_send_signal PID  through /proc/PID opened natively
 *   kill PID, tkill PID, tgkill PID, rt_sigqueueinfo PID,
 *   rt_tgsigqueueinfo PID
 *                        SIGKILL to a PID above 0, signal 0 to a group
 *                        or to every process (-1): a check, harmless
 *   io_uring_setup -, io_uring_enter -, io_uring_register -
 *                        a ring of one entry; enter and register on fd -1
 *                        (EBADF and EINVAL when they reach the kernel)
 *   raw NR               the system call numbered NR (strtoul's base 0:
 *                        0x40000027, -1) with no arguments, through the
 *                        native entry only: which numbers the filter
 *                        kills as x32's, and which the kernel answers
 *                        ENOSYS
 * PID is a number or: parent, parent-group (minus its process group),
 * all (-1), self, init (1), or child (a child made for the attempt, which
 * shows what a call that is let through does).
 *
 * Lines, to FILE (appended) with --log, else to stdout:
 *   "ENTRY ATTACK TARGET: trying"           before the call, flushed
 *   "ENTRY ATTACK TARGET: returned N"       or "error ENAME", after it
 *   "ENTRY ATTACK TARGET: pushed N"         tiocsti own: bytes in the
 *                                           terminal's input after it
 *   "ENTRY ATTACK TARGET: child killed"     the child target died of it
 *   "ENTRY ATTACK TARGET: open failed ENAME"  tiocsti: no terminal opened
 * A process the filter kills writes nothing after "trying".
 *
 * With --lock DIR only the process that makes the directory DIR attacks
 * (one replica of several); every process then prints "done" on stdout
 * and exits 0, so that the replicas that are left agree. Exit status 2:
 * bad usage or a failed set-up step.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define X32_BIT 0x40000000L

enum entry { NATIVE, I386, X32 };

/* Each attack's numbers: x86-64's (asm/unistd_64.h), i386's
 * (asm/unistd_32.h) and x32's without its bit (asm/unistd_x32.h: x32's
 * own entry points, 512 and up, where its structures differ from
 * x86-64's). */
struct call {
	const char *name;
	long nr[3];
};

static const struct call calls[] = {
	{ "tiocsti", { SYS_ioctl, 54, 514 } },
	{ "ptrace", { SYS_ptrace, 26, 521 } },
	{ "process_vm_readv", { SYS_process_vm_readv, 347, 539 } },
	{ "process_vm_writev", { SYS_process_vm_writev, 348, 540 } },
	{ "pidfd_open", { SYS_pidfd_open, 434, 434 } },
	{ "kcmp", { SYS_kcmp, 349, 312 } },
	{ "pidfd_getfd", { SYS_pidfd_getfd, 438, 438 } },
	{ "pidfd_send_signal", { SYS_pidfd_send_signal, 424, 424 } },
	{ "kill", { SYS_kill, 37, 62 } },
	{ "tkill", { SYS_tkill, 238, 200 } },
	{ "tgkill", { SYS_tgkill, 270, 234 } },
	{ "rt_sigqueueinfo", { SYS_rt_sigqueueinfo, 178, 524 } },
	{ "rt_tgsigqueueinfo", { SYS_rt_tgsigqueueinfo, 335, 536 } },
	{ "io_uring_setup", { SYS_io_uring_setup, 425, 425 } },
	{ "io_uring_enter", { SYS_io_uring_enter, 426, 426 } },
	{ "io_uring_register", { SYS_io_uring_register, 427, 427 } },
	{ "raw", { 0, 0, 0 } },
};

static FILE *out;
static char label[256];

static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(out, "%s: ", label);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	va_end(ap);
	fflush(out);
}

static void die(const char *what)
{
	fprintf(stderr, "abuse_entry: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The x86-64 entry (native, and x32 with its bit in nr). */
static long entry_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The i386 entry from 64-bit code: arguments in ebx, ecx, edx, esi, edi,
 * ebp, truncated to 32 bits by the kernel; the result in eax. ebp is
 * saved around the call below the red zone. */
static long entry_int80(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r8 __asm__("r8") = f;
	long ret;
	__asm__ volatile("sub $128, %%rsp\n\t"
			 "push %%rbp\n\t"
			 "mov %%r8d, %%ebp\n\t"
			 "int $0x80\n\t"
			 "pop %%rbp\n\t"
			 "add $128, %%rsp"
			 : "=a"(ret), "+r"(r8)
			 : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
			 : "r9", "r10", "r11", "r12", "r13", "r14", "r15", "memory");
	return (long)(int)ret;
}

static enum entry how;
static const struct call *call;

/* One call of the attack through the chosen entry: the result, or -1
 * with errno. */
static long attempt(long a, long b, long c, long d, long e, long f)
{
	long r;
	if (how == NATIVE)
		r = entry_syscall(call->nr[NATIVE], a, b, c, d, e, f);
	else if (how == X32)
		r = entry_syscall(call->nr[X32] | X32_BIT, a, b, c, d, e, f);
	else
		r = entry_int80(call->nr[I386], a, b, c, d, e, f);
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static const char *errname(int e)
{
	static char buf[32];
	static const struct {
		int e;
		const char *name;
	} names[] = { { EPERM, "EPERM" },   { ENOSYS, "ENOSYS" }, { EFAULT, "EFAULT" }, { ESRCH, "ESRCH" },
		      { EBADF, "EBADF" },   { EINVAL, "EINVAL" }, { EACCES, "EACCES" }, { ENXIO, "ENXIO" },
		      { ENOENT, "ENOENT" }, { EIO, "EIO" },       { ENOTTY, "ENOTTY" } };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].e == e)
			return names[i].name;
	snprintf(buf, sizeof buf, "errno %d", e);
	return buf;
}

static void result(long r)
{
	if (r < 0)
		say("error %s", errname(errno));
	else
		say("returned %ld", r);
}

/* Memory for every pointer argument, below 4 GiB for the i386 entry. */
static char *low;

/* What process_vm_* aim at in a child target: in low memory, which the
 * child shares by fork at the same address (an i386 pointer). */
#define PROBE 1024

static pid_t child = -1;

static pid_t target_pid(const char *t)
{
	if (strcmp(t, "parent") == 0)
		return getppid();
	if (strcmp(t, "parent-group") == 0)
		return -getpgid(getppid());
	if (strcmp(t, "all") == 0)
		return -1;
	if (strcmp(t, "self") == 0)
		return getpid();
	if (strcmp(t, "init") == 0)
		return 1;
	if (strcmp(t, "child") == 0) {
		child = fork();
		if (child < 0)
			die("fork");
		if (child == 0) {
			for (;;)
				pause();
		}
		return child;
	}
	char *end;
	long v = strtol(t, &end, 10);
	if (end == t || *end != '\0')
		return 0;
	return (pid_t)v;
}

/* An iovec of one (base, len) at p in the entry's layout; its size. */
static size_t iovec_at(char *p, void *base, size_t len)
{
	if (how == NATIVE) {
		uint64_t v[2] = { (uint64_t)(uintptr_t)base, len };
		memcpy(p, v, sizeof v);
		return sizeof v;
	}
	uint32_t v[2] = { (uint32_t)(uintptr_t)base, (uint32_t)len };
	memcpy(p, v, sizeof v);
	return sizeof v;
}

/* The process becomes the leader of a new session, so that a terminal it
 * opens becomes its controlling one: TIOCSTI then needs no privilege. A
 * process group leader cannot make a session: it first joins the group
 * of a child of its own (it is then no leader), which it then ends. */
static void new_session(void)
{
	if (getsid(0) == getpid())
		return;
	if (getpgrp() == getpid()) {
		int gate[2];
		if (pipe(gate) != 0)
			die("pipe");
		pid_t c = fork();
		if (c < 0)
			die("fork");
		if (c == 0) {
			char b;
			close(gate[1]);
			(void)!read(gate[0], &b, 1);
			_exit(0);
		}
		close(gate[0]);
		if (setpgid(c, c) != 0 || setpgid(0, c) != 0)
			die("setpgid");
		if (setsid() < 0)
			die("setsid");
		close(gate[1]);
		if (waitpid(c, NULL, 0) != c)
			die("waitpid");
		return;
	}
	if (setsid() < 0)
		die("setsid");
}

/* A pseudo-terminal, the caller's controlling one, in raw mode (every
 * pushed byte counts at once): its side's fd. */
static int own_terminal(void)
{
	new_session();
	int master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
		die("posix_openpt");
	const char *name = ptsname(master);
	if (name == NULL)
		die("ptsname");
	int fd = open(name, O_RDWR);
	if (fd < 0)
		die("open the terminal");
	struct termios t;
	if (tcgetattr(fd, &t) != 0)
		die("tcgetattr");
	cfmakeraw(&t);
	if (tcsetattr(fd, TCSANOW, &t) != 0)
		die("tcsetattr");
	return fd;
}

static void tiocsti(const char *target, const char *text)
{
	int fd = -1;
	if (strcmp(target, "own") == 0) {
		fd = own_terminal();
	} else {
		char paths[4096];
		snprintf(paths, sizeof paths, "%s", target);
		int err = ENOENT;
		for (char *save, *p = strtok_r(paths, ":", &save); p != NULL && fd < 0; p = strtok_r(NULL, ":", &save))
			if ((fd = open(p, O_RDWR | O_NOCTTY)) < 0)
				err = errno;
		if (fd < 0) {
			say("open failed %s", errname(err));
			return;
		}
	}
	size_t n = strlen(text);
	if (n > 4096)
		n = 4096;
	memcpy(low, text, n);
	say("trying");
	long r = 0;
	for (size_t i = 0; i < n && r == 0; i++)
		r = attempt(fd, TIOCSTI, (long)(uintptr_t)(low + i), 0, 0, 0);
	result(r);
	if (strcmp(target, "own") == 0) {
		int queued = -1;
		if (ioctl(fd, FIONREAD, &queued) != 0)
			die("FIONREAD");
		say("pushed %d", queued);
	}
}

static void attack(const char *target)
{
	pid_t pid = target_pid(target);
	if (pid == 0) {
		fprintf(stderr, "abuse_entry: bad target '%s'\n", target);
		exit(2);
	}
	const char *name = call->name;
	int sig = pid > 0 ? SIGKILL : 0;
	/* The calls that send sig: their child target is waited for. */
	bool sends = strcmp(name, "kill") == 0 || strcmp(name, "tkill") == 0 || strcmp(name, "tgkill") == 0 ||
		     strncmp(name, "rt_", 3) == 0 || strcmp(name, "pidfd_send_signal") == 0;
	long r;
	if (strcmp(name, "ptrace") == 0) {
		say("trying");
		r = attempt(PTRACE_SEIZE, pid, 0, 0, 0, 0);
	} else if (strncmp(name, "process_vm_", 11) == 0) {
		/* The local buffer, then the two iovecs, in low memory. */
		size_t l = iovec_at(low + 64, low, 1);
		iovec_at(low + 64 + l, child > 0 ? (void *)(low + PROBE) : (void *)0x1000, 1);
		say("trying");
		r = attempt(pid, (long)(uintptr_t)(low + 64), 1, (long)(uintptr_t)(low + 64 + l), 1, 0);
	} else if (strcmp(name, "pidfd_open") == 0) {
		say("trying");
		r = attempt(pid, 0, 0, 0, 0, 0);
	} else if (strcmp(name, "kcmp") == 0) {
		say("trying");
		r = attempt(getpid(), pid, KCMP_VM, 0, 0, 0);
	} else if (strcmp(name, "pidfd_getfd") == 0) {
		int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pidfd < 0)
			die("pidfd_open (native, to set up)");
		say("trying");
		r = attempt(pidfd, 0, 0, 0, 0, 0);
	} else if (strcmp(name, "pidfd_send_signal") == 0) {
		char path[32];
		snprintf(path, sizeof path, "/proc/%d", (int)pid);
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			die(path);
		say("trying");
		r = attempt(fd, sig, 0, 0, 0, 0);
	} else if (strcmp(name, "kill") == 0) {
		say("trying");
		r = attempt(pid, sig, 0, 0, 0, 0);
	} else if (strcmp(name, "tkill") == 0) {
		say("trying");
		r = attempt(pid, sig, 0, 0, 0, 0);
	} else if (strcmp(name, "tgkill") == 0) {
		say("trying");
		r = attempt(pid, pid, sig, 0, 0, 0);
	} else if (strncmp(name, "rt_", 3) == 0) {
		/* A siginfo: signo, errno, code at the same offsets in every
		 * layout; SI_QUEUE, which another process may send. */
		int32_t head[3] = { sig, 0, SI_QUEUE };
		memset(low, 0, 128);
		memcpy(low, head, sizeof head);
		say("trying");
		if (strcmp(name, "rt_sigqueueinfo") == 0)
			r = attempt(pid, sig, (long)(uintptr_t)low, 0, 0, 0);
		else
			r = attempt(pid, pid, sig, (long)(uintptr_t)low, 0, 0);
	} else if (strcmp(name, "io_uring_setup") == 0) {
		memset(low, 0, 256); /* struct io_uring_params: 120 bytes */
		say("trying");
		r = attempt(1, (long)(uintptr_t)low, 0, 0, 0, 0);
	} else if (strcmp(name, "io_uring_enter") == 0) {
		say("trying");
		r = attempt(-1, 0, 0, 0, 0, 0);
	} else {
		say("trying");
		r = attempt(-1, 0, 0, 0, 0, 0);
	}
	result(r);
	if (child > 0) {
		/* Given 5 s to die of a signal that was let through (only a
		 * call that sends one: another's child is ended at once). */
		int st;
		pid_t w = 0;
		for (int t = 0; t < 500 && w == 0 && r >= 0 && sends && sig == SIGKILL; t++)
			if ((w = waitpid(child, &st, WNOHANG)) == 0)
				usleep(10000);
		if (w == child && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			say("child killed");
		if (w != child && (kill(child, SIGKILL) != 0 || waitpid(child, &st, 0) != child))
			die("the child");
	}
}

static void raw(const char *number)
{
	char *end;
	errno = 0;
	long nr = (long)(int)strtoul(number, &end, 0);
	if (end == number || *end != '\0' || errno != 0 || how != NATIVE) {
		fprintf(stderr, "abuse_entry: raw takes a number, through the native entry\n");
		exit(2);
	}
	say("trying");
	long r = entry_syscall(nr, 0, 0, 0, 0, 0, 0);
	if (r < 0 && r > -4096)
		errno = (int)-r, r = -1;
	result(r);
}

int main(int argc, char **argv)
{
	const char *lock = NULL, *log = NULL, *text = "X";
	int i = 1;
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--lock") == 0)
			lock = argv[i + 1];
		else if (strcmp(argv[i], "--log") == 0)
			log = argv[i + 1];
		else if (strcmp(argv[i], "--push") == 0)
			text = argv[i + 1];
		else
			break;
	}
	if (argc - i != 3) {
		fprintf(stderr, "usage: abuse_entry [--lock DIR] [--log FILE] [--push TEXT] native|i386|x32 ATTACK TARGET\n");
		return 2;
	}
	const char *entry = argv[i], *name = argv[i + 1], *target = argv[i + 2];
	if (strcmp(entry, "native") == 0)
		how = NATIVE;
	else if (strcmp(entry, "i386") == 0)
		how = I386;
	else if (strcmp(entry, "x32") == 0)
		how = X32;
	else
		return fprintf(stderr, "abuse_entry: no entry '%s'\n", entry), 2;
	for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++)
		if (strcmp(calls[c].name, name) == 0)
			call = &calls[c];
	if (call == NULL)
		return fprintf(stderr, "abuse_entry: no attack '%s'\n", name), 2;
	snprintf(label, sizeof label, "%s %s %s", entry, name, target);
	setvbuf(stdout, NULL, _IOLBF, 0);
	out = stdout;
	if (log != NULL && (out = fopen(log, "a")) == NULL)
		die(log);
	low = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (low == MAP_FAILED)
		die("mmap below 4 GiB");
	if (lock == NULL || mkdir(lock, 0700) == 0) {
		if (strcmp(name, "tiocsti") == 0)
			tiocsti(target, text);
		else if (strcmp(name, "raw") == 0)
			raw(target);
		else
			attack(target);
	} else if (errno != EEXIST) {
		die(lock);
	}
	if (lock != NULL)
		puts("done");
	return 0;
}
