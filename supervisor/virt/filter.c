/* filter.c — see filter.h.
 *
 * libseccomp 2.5.4 (Debian 12) writes the filter but cannot load it with
 * SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: without that flag a replica that
 * takes signals while the supervisor answers can livelock (the kernel
 * restarts the call and notifies it again, forever). So the program is
 * exported as raw BPF here and loaded with seccomp(2) in the child. */
#include "filter.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "prologue.h"

/* Every call the supervisor answers (virt.c says how). */
static const int notified[] = {
	SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(getrandom), SCMP_SYS(arch_prctl),
	/* Every new task, so that it is named by its place in the process
	 * tree (lineage.h): a notification per thread or process started. */
	SCMP_SYS(clone), SCMP_SYS(clone3), SCMP_SYS(fork), SCMP_SYS(vfork),
	/* A wait that reaps a child anchors the clock reads after it
	 * (anchor.c). */
	SCMP_SYS(wait4), SCMP_SYS(waitid),
};

/* Opens are answered only when they may be a read-only open of a random
 * device; the filter cannot see the path, but it can leave the others
 * (writes, directories, O_PATH, O_CREAT) in the kernel. */
#define NOT_A_DEVICE_READ ((scmp_datum_t)FILTER_NOT_A_DEVICE_READ)

/* The exported program, read back from a memfd. */
static int export_program(scmp_filter_ctx ctx, struct sock_fprog *prog)
{
	int fd = memfd_create("diehard-filter", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = seccomp_export_bpf(ctx, fd);
	struct stat st;
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = -errno;
	if (rc == 0 && (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
			st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS))
		rc = -EINVAL;
	struct sock_filter *insns = NULL;
	if (rc == 0 && (insns = malloc((size_t)st.st_size)) == NULL)
		rc = -ENOMEM;
	if (rc == 0 && pread(fd, insns, (size_t)st.st_size, 0) != st.st_size)
		rc = -EIO;
	close(fd);
	if (rc != 0) {
		free(insns);
		return rc;
	}
	prog->filter = insns;
	prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	return 0;
}

/* With the fast path, an openat made from where shared libraries are
 * mapped stays in the kernel when it has O_CLOEXEC or comes from libc's
 * own internal open, unless it carries the asking marker (libdiehard's
 * open of a random device, kernel.c). That is what the dynamic loader's
 * and libc's own opens are (libraries, locales, gconv, time zones: some
 * thirty round trips per process, most of what virtualizing a short
 * command still cost), and none of them opens a random device; a
 * program's own opens go through libdiehard, which checks. A static
 * program's calls come from its own image, which the kernel maps low (a
 * fixed address, or a PIE's base near 0x5555...), so they are all still
 * seen; what is not is a random device opened with O_CLOEXEC, or through
 * libc's internal open (fopen's "c" mode), by a process without
 * libdiehard, or by a raw system call made through libc's syscall()
 * (docs/NONDETERMINISM.md).
 *
 * libc's internal open (__open64_nocancel) is recognised by where its
 * system call instruction lies within its page: libraries are mapped at
 * page granularity, so the instruction pointer's low 12 bits are the same
 * in every process using the libc diehard runs on (the replicas' libc:
 * the same file). Another library's call that happens to lie at the same
 * offset is let through too (1 in 4096); a replica on another libc only
 * loses the shortcut. glibc opens gconv-modules.cache that way, without
 * O_CLOEXEC, in nearly every program that sets a locale.
 *
 * libseccomp cannot compare the instruction pointer, so these few
 * instructions go before its program (whose jumps are all relative). */
#define LIBRARY_FLOOR_HIGH 0x6800u /* the upper half of 0x680000000000 */
#define MAX_SITES 4

/* The page offsets of the instruction after each system call instruction
 * (the bytes 0f 05: a false match only widens the 1 in 4096) in the libc
 * function name of version (NULL: the default one), in our own process:
 * how many, at most max; 0 when it cannot be found, -1 when it has more. */
static int syscall_sites(const char *name, const char *version, uint32_t *sites, int max)
{
	void *fn = version ? dlvsym(RTLD_DEFAULT, name, version) : dlsym(RTLD_DEFAULT, name);
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (fn == NULL || dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL ||
	    sym->st_size < 2 || sym->st_size > 4096)
		return 0;
	size_t at[MAX_SITES];
	int n = prologue_syscalls(fn, sym->st_size, at, max < MAX_SITES ? max : MAX_SITES);
	for (int i = 0; i < n; i++)
		sites[i] = (uint32_t)(((uintptr_t)fn + at[i]) & 0xfff);
	return n;
}

/* The sites of libc's internal open (__open64_nocancel); none (no
 * shortcut) when it cannot be found or when one coincides with a site of
 * the public open or openat, through which a process without libdiehard
 * opens what the program names. */
static size_t libc_open_sites(uint32_t *sites)
{
	int n = syscall_sites("__open64_nocancel", "GLIBC_PRIVATE", sites, MAX_SITES);
	if (n <= 0)
		return 0;
	const char *const public[] = { "open64", "openat64" };
	for (size_t f = 0; f < sizeof public / sizeof public[0]; f++) {
		uint32_t other[MAX_SITES];
		int m = syscall_sites(public[f], NULL, other, MAX_SITES);
		if (m < 0)
			return 0;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < m; j++)
				if (sites[i] == other[j])
					return 0;
	}
	return (size_t)n;
}

static struct sock_filter insn(uint16_t code, uint32_t k)
{
	return (struct sock_filter){ .code = code, .jt = 0, .jf = 0, .k = k };
}

/* The jump at index at, to the absolute indexes yes and no. */
static struct sock_filter jump(uint16_t op, uint32_t k, size_t at, size_t yes, size_t no)
{
	return (struct sock_filter){ .code = (uint16_t)(BPF_JMP | op | BPF_K), .jt = (uint8_t)(yes - at - 1),
				     .jf = (uint8_t)(no - at - 1), .k = k };
}

/* A load of the 32-bit word at offset off of struct seccomp_data. */
static struct sock_filter load(size_t off)
{
	return insn(BPF_LD | BPF_W | BPF_ABS, (uint32_t)off);
}

/* Puts n instructions before the program. */
static int prepend(struct sock_fprog *prog, const struct sock_filter *prefix, size_t n)
{
	if ((size_t)prog->len + n > BPF_MAXINSNS)
		return -E2BIG;
	struct sock_filter *insns = malloc(((size_t)prog->len + n) * sizeof *insns);
	if (insns == NULL)
		return -ENOMEM;
	memcpy(insns, prefix, n * sizeof *insns);
	memcpy(insns + n, prog->filter, (size_t)prog->len * sizeof *insns);
	free(prog->filter);
	prog->filter = insns;
	prog->len = (unsigned short)(prog->len + n);
	return 0;
}

/* A prefix's first instructions (FROM_LIBRARY of them): a call nr made
 * from where shared libraries are mapped goes on, anything else to the
 * index end (the program after the prefix). The architecture needs no
 * check here: prefix_native_only, before every prefix, has killed any
 * other than x86-64's. */
#define FROM_LIBRARY 4
static size_t from_library(struct sock_filter *p, int nr, size_t end)
{
	const size_t ip = offsetof(struct seccomp_data, instruction_pointer);
	size_t n = 0;
	p[n] = load(offsetof(struct seccomp_data, nr)), n++;
	p[n] = jump(BPF_JEQ, (uint32_t)nr, n, n + 1, end), n++;
	p[n] = load(ip + 4), n++;
	p[n] = jump(BPF_JGE, LIBRARY_FLOOR_HIGH, n, n + 1, end), n++;
	return n;
}

static int prefix_library_opens(struct sock_fprog *prog, uint64_t ask, bool appends)
{
	uint32_t sites[MAX_SITES];
	size_t nsites = libc_open_sites(sites);
	/* 0-3: an openat from above the floor, else to the end (the first
	 * instruction of libseccomp's program); 4: its flags; with appends,
	 * O_APPEND or O_TRUNC goes to the end (logs.h, pidfile.h); then
	 * O_CLOEXEC goes to the
	 * marker check; then libc's sites, which go there too; then the
	 * marker check: the asking marker goes to the end, the rest is
	 * allowed. */
	const size_t flags_at = FROM_LIBRARY + 1 + (appends ? 1 : 0);
	const size_t sites_at = flags_at + 1, mark_at = sites_at + (nsites ? 2 + nsites : 0), end = mark_at + 5;
	struct sock_filter prefix[FROM_LIBRARY + 3 + 2 + MAX_SITES + 5];
	const size_t ip = offsetof(struct seccomp_data, instruction_pointer);
	const size_t arg4 = offsetof(struct seccomp_data, args[4]);
	size_t n = from_library(prefix, SYS_openat, end);
	prefix[n] = load(offsetof(struct seccomp_data, args[2])), n++;
	if (appends)
		prefix[n] = jump(BPF_JSET, O_APPEND | O_TRUNC, n, end, n + 1), n++;
	prefix[n] = jump(BPF_JSET, O_CLOEXEC, n, mark_at, nsites ? sites_at : end), n++;
	if (nsites) {
		prefix[n] = load(ip), n++;
		prefix[n] = insn(BPF_ALU | BPF_AND | BPF_K, 0xfff), n++;
		for (size_t i = 0; i < nsites; i++, n++)
			prefix[n] = jump(BPF_JEQ, sites[i], n, mark_at, i + 1 < nsites ? n + 1 : end);
	}
	prefix[n] = load(arg4), n++;
	prefix[n] = jump(BPF_JEQ, (uint32_t)ask, n, n + 1, end - 1), n++;
	prefix[n] = load(arg4 + 4), n++;
	prefix[n] = jump(BPF_JEQ, (uint32_t)(ask >> 32), n, end, n + 1), n++;
	prefix[n] = insn(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), n++;
	if (n != end)
		return -EINVAL;
	return prepend(prog, prefix, n);
}

struct loader_scan {
	uintptr_t base;
	uint32_t sites[MAX_SITES];
	int n;
};

/* The page offsets past each `mov eax, SYS_arch_prctl` ... `syscall` in
 * the loader's executable segments. */
static int scan_loader(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct loader_scan *ls = arg;
	if (info->dlpi_addr != ls->base)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		const uint8_t *code = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		for (size_t j = 0; j + 5 < ph->p_filesz; j++) {
			if (code[j] != 0xb8 || code[j + 1] != SYS_arch_prctl || code[j + 2] || code[j + 3] || code[j + 4])
				continue;
			/* Its system call: the first within the next 25 bytes. */
			size_t after[13], from = j + 5, len = ph->p_filesz - from < 25 ? ph->p_filesz - from : 25;
			if (prologue_syscalls(code + from, len, after, 13) <= 0)
				continue;
			if (ls->n == MAX_SITES) {
				ls->n = -1;
				return 1;
			}
			ls->sites[ls->n++] = (uint32_t)(((uintptr_t)code + from + after[0]) & 0xfff);
		}
	}
	return 1;
}

/* With the fast path, the dynamic loader's own arch_prctl (thread-local
 * storage for a new image) stays in the kernel: libdiehard patches the
 * image's vDSO and gives it its AT_RANDOM bytes itself (early.c). Found,
 * like libc's internal open, by where its system call lies in its page,
 * from the library range. */
static int prefix_loader_tls(struct sock_fprog *prog)
{
	/* Our own loader, the replicas' (the same file, or the sites do not
	 * match and their arch_prctl is seen as before). */
	struct loader_scan ls = { .base = (uintptr_t)getauxval(AT_BASE) };
	if (ls.base == 0)
		return 0;
	dl_iterate_phdr(scan_loader, &ls);
	if (ls.n <= 0)
		return 0;
	const size_t ip = offsetof(struct seccomp_data, instruction_pointer);
	const size_t sites_at = FROM_LIBRARY + 2, end = sites_at + (size_t)ls.n + 1;
	struct sock_filter prefix[FROM_LIBRARY + 2 + MAX_SITES + 1];
	size_t n = from_library(prefix, SYS_arch_prctl, end);
	prefix[n] = load(ip), n++;
	prefix[n] = insn(BPF_ALU | BPF_AND | BPF_K, 0xfff), n++;
	for (int i = 0; i < ls.n; i++, n++)
		prefix[n] = jump(BPF_JEQ, ls.sites[i], n, end - 1, i + 1 < ls.n ? n + 1 : end);
	prefix[n] = insn(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), n++;
	if (n != end)
		return -EINVAL;
	return prepend(prog, prefix, n);
}

/* The first instructions of every program, before the prefixes above and
 * libseccomp's own: a system call made through another architecture's
 * entry kills the process (SECCOMP_RET_KILL_PROCESS). A 64-bit process
 * can enter the kernel as an i386 one (`int $0x80`, or far calls into a
 * 32-bit code segment) with the i386 numbers, or as an x32 one (the
 * x86-64 `syscall` with __X32_SYSCALL_BIT in the number); a rule written
 * for x86-64's numbers does not see either, so every refusal of this
 * filter would be one instruction away from a replica that wants past it
 * (TIOCSTI into the terminal, ptrace of the init or of diehard).
 *
 * Killed, not refused: a 64-bit program makes such calls only from
 * hand-written assembly (and a 32-bit one cannot run: main.c says so
 * before anything starts), so one that does is most likely an attack,
 * and it learns nothing by probing. An i386 call is recognised by its
 * arch field. An x32 call is an x86-64 one whose number lies in
 * [0x40000000, 0x7fffffff]: the kernel takes a number as x32's when bit
 * 30 is set and the rest is within x32's table, and the whole range is
 * killed rather than the table's size, which grows with each kernel. Numbers with bit 31 set
 * are no call at all in either table: -1 is what tracers and probes use
 * to skip a call, and the kernel answers those with ENOSYS, which they
 * still get (libseccomp's bad-arch action, below). */
#define X32_SYSCALL_BIT 0x40000000u
static int prefix_native_only(struct sock_fprog *prog)
{
	const size_t kill_at = 5, end = 6;
	struct sock_filter prefix[6];
	size_t n = 0;
	prefix[n] = load(offsetof(struct seccomp_data, arch)), n++;
	prefix[n] = jump(BPF_JEQ, AUDIT_ARCH_X86_64, n, n + 1, kill_at), n++;
	prefix[n] = load(offsetof(struct seccomp_data, nr)), n++;
	prefix[n] = jump(BPF_JGE, X32_SYSCALL_BIT, n, n + 1, end), n++;
	prefix[n] = jump(BPF_JGE, 0x80000000u, n, end, kill_at), n++;
	prefix[n] = insn(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS), n++;
	if (n != end)
		return -EINVAL;
	return prepend(prog, prefix, n);
}

const char *filter_kill_cause(int sig)
{
	return sig == SIGSYS ? "SIGSYS: diehard's filter kills a system call made through another architecture's "
			       "entry, i386 or x32"
			     : NULL;
}

/* A pid argument compared as the 32-bit int it is (the upper half of the
 * register is not defined for an int). */
#define PID_IS(arg, pid) SCMP_CMP((arg), SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)(uint32_t)(pid))

/* Refusals: sandboxed, only the init (pid 1) can be named from inside, so
 * only it is guarded; unsandboxed, diehard and the siblings share our pid
 * space: the calls that reach another process's memory or fds are refused
 * outright, and signals to diehard by pid, group or broadcast. */
static int add_refusals(scmp_filter_ctx ctx, const struct filter_spec *spec)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
				  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)TIOCSTI));
	/* io_uring's operations (openat, connect, read of a random device)
	 * are made by the kernel for the ring and never pass this filter:
	 * they would get around the virtualization of random devices and of
	 * a private network's calls. ENOSYS, what a kernel built without
	 * io_uring answers: liburing's users (and libuv, tokio, QEMU) already
	 * fall back to plain system calls on it. */
	static const int io_uring[] = { SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter),
					SCMP_SYS(io_uring_register) };
	for (size_t i = 0; rc == 0 && i < sizeof io_uring / sizeof io_uring[0]; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), io_uring[i], 0);
	/* userfaultfd: a page the replica registers and never fills blocks
	 * whoever touches it, diehard's process_vm_readv of a notified call's
	 * argument included, uninterruptibly (SIGTERM unanswered). Refused
	 * as a kernel with unprivileged userfaultfd off refuses it, the
	 * system call and /dev/userfaultfd's ioctl alike. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(userfaultfd), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)USERFAULTFD_IOC_NEW));
	if (spec->sandboxed) {
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ptrace), 1, PID_IS(1, 1));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(process_vm_readv), 1, PID_IS(0, 1));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(process_vm_writev), 1, PID_IS(0, 1));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(pidfd_open), 1, PID_IS(0, 1));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(kcmp), 1, PID_IS(0, 1));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(kcmp), 1, PID_IS(1, 1));
		return rc;
	}
	static const int everywhere[] = { SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
					  SCMP_SYS(pidfd_getfd), SCMP_SYS(kcmp), SCMP_SYS(pidfd_send_signal) };
	for (size_t i = 0; rc == 0 && i < sizeof everywhere / sizeof everywhere[0]; i++)
		rc = seccomp_rule_add(ctx, eperm, everywhere[i], 0);
	const pid_t us = spec->supervisor, group = spec->supervisor_group;
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(kill), 1, PID_IS(0, us));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(kill), 1, PID_IS(0, -group));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(kill), 1, PID_IS(0, -1));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(tkill), 1, PID_IS(0, us));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(tgkill), 1, PID_IS(0, us));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(rt_sigqueueinfo), 1, PID_IS(0, us));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(rt_tgsigqueueinfo), 1, PID_IS(0, us));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(pidfd_open), 1, PID_IS(0, us));
	/* The kernel signals for the replica too: a descriptor's owner gets
	 * SIGIO (or F_SETSIG's signal, SIGKILL included) when it is ready,
	 * and that owner may be any process: diehard. Nor may the replica set
	 * diehard's limits (RLIMIT_CPU of 1 s kills it, RLIMIT_NOFILE of 3
	 * ends the run), its scheduling or priorities: every one of these names
	 * diehard by pid, its group, or every process of the user. */
	static const unsigned long owners[] = { F_SETOWN, F_SETOWN_EX, F_SETSIG };
	for (size_t i = 0; rc == 0 && i < sizeof owners / sizeof owners[0]; i++)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(fcntl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)owners[i]));
	static const unsigned long owner_ioctls[] = { FIOSETOWN, SIOCSPGRP };
	for (size_t i = 0; rc == 0 && i < sizeof owner_ioctls / sizeof owner_ioctls[0]; i++)
		rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)owner_ioctls[i]));
	static const int by_pid[] = { SCMP_SYS(prlimit64), SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_setscheduler),
				      SCMP_SYS(sched_setparam), SCMP_SYS(sched_setattr) };
	for (size_t i = 0; rc == 0 && i < sizeof by_pid / sizeof by_pid[0]; i++)
		rc = seccomp_rule_add(ctx, eperm, by_pid[i], 1, PID_IS(0, us));
	/* setpriority and ioprio_set name their target by (which, who):
	 * diehard's pid, its group, or every process of a user. */
	static const struct {
		int nr;
		unsigned process, group, user;
	} prio[] = { { SCMP_SYS(setpriority), PRIO_PROCESS, PRIO_PGRP, PRIO_USER },
		     { SCMP_SYS(ioprio_set), 1, 2, 3 } /* IOPRIO_WHO_PROCESS, _PGRP, _USER */ };
	for (size_t i = 0; rc == 0 && i < sizeof prio / sizeof prio[0]; i++) {
		rc = seccomp_rule_add(ctx, eperm, prio[i].nr, 2, PID_IS(0, prio[i].process), PID_IS(1, us));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, prio[i].nr, 2, PID_IS(0, prio[i].group), PID_IS(1, group));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, eperm, prio[i].nr, 1, PID_IS(0, prio[i].user));
	}
	return rc;
}

/* The calls the supervisor answers. */
static int add_notified(scmp_filter_ctx ctx, bool sleeps, uint64_t mark)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < sizeof notified / sizeof notified[0]; i++) {
		/* The fast path's leaders read the real clock with the run's
		 * marker in the third argument, which neither call uses
		 * (fastclock.h): those stay in the kernel. */
		bool marked = mark != 0 && (notified[i] == SCMP_SYS(clock_gettime) || notified[i] == SCMP_SYS(gettimeofday));
		if (marked)
			rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, notified[i], 1,
					      SCMP_A2_64(SCMP_CMP_NE, (scmp_datum_t)mark));
		else
			rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, notified[i], 0);
	}
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(open), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, NOT_A_DEVICE_READ, 0));
	/* libdiehard's openat carrying the marker in its unused fifth
	 * argument has checked the file is no random device (kernel.c). */
	if (rc == 0 && mark != 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(openat), 2,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, NOT_A_DEVICE_READ, 0),
				      SCMP_A4_64(SCMP_CMP_NE, (scmp_datum_t)mark));
	else if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(openat), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, NOT_A_DEVICE_READ, 0));
	/* Relative sleeps, so that a replacement catching up skips them (an
	 * absolute one ends at once anyway: its deadline, read from the
	 * logged clock, is in the past). */
	if (rc == 0 && sleeps)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(nanosleep), 0);
	if (rc == 0 && sleeps)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(clock_nanosleep), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, TIMER_ABSTIME, 0));
	return rc;
}

/* A private network's calls (netcalls.h): every listen, connect and bind
 * (the socket's type and the address are out of BPF's sight), and sendto
 * with an address. The domain
 * is an int; the type carries SOCK_NONBLOCK and SOCK_CLOEXEC above its low
 * four bits. */
static int add_net(scmp_filter_ctx ctx)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(listen), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
	/* bind and sendto only with an address of an IPv4 or IPv6 size (or a
	 * sockaddr_storage's): a unix socket's, or send() and sendto without
	 * an address, stay in the kernel at no cost. */
	static const scmp_datum_t sizes[] = { sizeof(struct sockaddr_in), sizeof(struct sockaddr_in6),
					      sizeof(struct sockaddr_storage) };
	for (size_t i = 0; rc == 0 && i < sizeof sizes / sizeof sizes[0]; i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(bind), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, sizes[i]));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 2, SCMP_A4(SCMP_CMP_NE, 0),
					      SCMP_A5(SCMP_CMP_MASKED_EQ, 0xffffffffu, sizes[i]));
	}
	return rc;
}

/* The file views' commit points (points.h): the calls that make a file
 * durable (syncs) or visible (renames, removals). */
static int add_points(scmp_filter_ctx ctx)
{
	static const int calls[] = { SCMP_SYS(fsync),	 SCMP_SYS(fdatasync), SCMP_SYS(rename), SCMP_SYS(renameat),
				     SCMP_SYS(renameat2), SCMP_SYS(unlink),	SCMP_SYS(unlinkat) };
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < sizeof calls / sizeof calls[0]; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, calls[i], 0);
	/* msync with MS_SYNC only: MS_ASYNC promises nothing (a no-op in
	 * Linux). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(msync), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, MS_SYNC, MS_SYNC));
	/* Opens in append mode: the files voted as streams (logs.h). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(open), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, O_APPEND, O_APPEND));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(openat), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, O_APPEND, O_APPEND));
	/* Files made anew (O_CREAT with O_TRUNC): a daemon's pid file
	 * (pidfile.h). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(open), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, O_CREAT | O_TRUNC, O_CREAT | O_TRUNC));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(openat), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, O_CREAT | O_TRUNC, O_CREAT | O_TRUNC));
	return rc;
}

int filter_build(struct sock_fprog *prog, const struct filter_spec *spec)
{
	if (spec->net_private && !spec->notify) {
		log_warn("a private network needs the supervisor to see the replicas' calls (not with --no-virtualize)");
		return -1;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL) {
		log_warn("seccomp_init failed");
		return -1;
	}
	/* libseccomp's program sees only x86-64 calls (prefix_native_only
	 * kills the others first); its bad-arch action then applies to the
	 * numbers above 0x7fffffff but -1, which it lets through to its rules
	 * (ENOSYS in the kernel): ENOSYS is what the kernel would say of them
	 * too. */
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
	/* The rules' system calls as a binary tree by number rather than a
	 * list tried in turn: a call the filter runs for (one with a rule on
	 * its arguments, such as ioctl and openat; the kernel skips the filter
	 * for the others) meets about 5 comparisons of its number instead of
	 * up to 25 (ioctl: 23 instructions in all instead of 29, openat 29
	 * instead of 44: bench/filter). Never with no rule (libseccomp before
	 * 2.5.4 then lost the default action): TIOCSTI's is always there. */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc == 0 && spec->notify)
		rc = add_notified(ctx, spec->sleeps, spec->pass_mark);
	if (rc == 0 && spec->notify && spec->exec_mark != 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 1,
				      SCMP_A3_64(SCMP_CMP_NE, (scmp_datum_t)spec->exec_mark));
	if (rc == 0 && spec->notify && spec->exec_mark != 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 1,
				      SCMP_A5_64(SCMP_CMP_NE, (scmp_datum_t)spec->exec_mark));
	if (rc == 0 && spec->net_private)
		rc = add_net(ctx);
	if (rc == 0 && spec->notify && spec->points)
		rc = add_points(ctx);
	if (rc == 0)
		rc = add_refusals(ctx, spec);
	if (rc == 0)
		rc = export_program(ctx, prog);
	if (rc == 0 && spec->notify && spec->pass_mark != 0)
		rc = prefix_library_opens(prog, spec->ask_mark, spec->points);
	if (rc == 0 && spec->notify && spec->exec_mark != 0)
		rc = prefix_loader_tls(prog);
	/* Prepended last, so first of all. */
	if (rc == 0)
		rc = prefix_native_only(prog);
	seccomp_release(ctx);
	if (rc != 0) {
		log_warn("cannot build the seccomp filter: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

int filter_install(const struct sock_fprog *prog, bool listener)
{
	unsigned long flags = listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV : 0;
	/* Without no_new_privs only a privileged supervisor may install a
	 * filter; trying that first keeps setuid programs working under a root
	 * diehard. */
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);
	if (fd < 0 && errno == EACCES) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			return -1;
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);
	}
	return fd < 0 ? -1 : listener ? (int)fd : 0;
}
