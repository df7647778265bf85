/*
 * filter_walk — how many BPF instructions a process's seccomp filter runs
 * for a given system call, and what it returns.
 *
 *   filter_walk PID NR[@IP][/ARCH]...
 *
 * Why: bench/filter times diehard's filter through whole runs, where a few
 * nanoseconds per call drown in the machine's noise; the instructions a
 * call runs are exact, and what the kernel's JIT turns each into costs
 * about the same. The filter is read with PTRACE_SECCOMP_GET_FILTER (needs
 * CAP_SYS_ADMIN: root) and run here over a seccomp_data of the call number
 * NR (strtoul's base 0; -1 allowed), the instruction pointer IP (default
 * 0x401000, an executable's; 0x7f0000000000 is a shared library's) and
 * the architecture ARCH (default AUDIT_ARCH_X86_64), every argument 0.
 * Only the first (innermost) filter is read.
 *
 * Output per call: "NR IP ARCH: N instructions, returns 0xACTION"; then
 * "length L". Exit status 0; 1 when the filter cannot be read or holds an
 * instruction this walker does not know; 2 on bad usage.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

/* Runs prog over d: the instructions run (0: a bad program), the return
 * value in *ret. */
static int walk(const struct sock_filter *prog, long len, const struct seccomp_data *d, uint32_t *ret)
{
	uint32_t a = 0;
	int steps = 0;
	for (long pc = 0; pc >= 0 && pc < len; steps++) {
		const struct sock_filter *i = &prog[pc];
		uint32_t k = i->k;
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (k > sizeof *d - 4 || k % 4)
				return 0;
			memcpy(&a, (const char *)d + k, 4);
			pc++;
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= k;
			pc++;
			break;
		case BPF_JMP | BPF_JA:
			pc += 1 + (long)k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += 1 + (a == k ? i->jt : i->jf);
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += 1 + (a >= k ? i->jt : i->jf);
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += 1 + (a > k ? i->jt : i->jf);
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += 1 + ((a & k) ? i->jt : i->jf);
			break;
		case BPF_RET | BPF_K:
			*ret = k;
			return steps + 1;
		default:
			fprintf(stderr, "filter_walk: instruction code %#x at %ld not known here\n", i->code, pc);
			return 0;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fputs("usage: filter_walk PID NR[@IP][/ARCH]...\n", stderr);
		return 2;
	}
	pid_t pid = (pid_t)atoi(argv[1]);
	static struct sock_filter prog[BPF_MAXINSNS];
	int st;
	if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) != 0 || ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) != 0 ||
	    waitpid(pid, &st, __WALL) != pid) {
		fprintf(stderr, "filter_walk: cannot stop %d: %s\n", (int)pid, strerror(errno));
		return 1;
	}
	long len = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, 0L, prog);
	int err = errno;
	(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
	if (len <= 0 || len > BPF_MAXINSNS) {
		fprintf(stderr, "filter_walk: cannot read %d's filter: %s\n", (int)pid, strerror(err));
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		struct seccomp_data d = { .arch = AUDIT_ARCH_X86_64, .instruction_pointer = 0x401000 };
		char *p = argv[i], *end;
		d.nr = (int)strtol(p, &end, 0);
		if (end == p)
			return fprintf(stderr, "filter_walk: bad call '%s'\n", argv[i]), 2;
		if (*end == '@')
			d.instruction_pointer = strtoull(end + 1, &end, 0);
		if (*end == '/')
			d.arch = (uint32_t)strtoul(end + 1, &end, 0);
		if (*end != '\0')
			return fprintf(stderr, "filter_walk: bad call '%s'\n", argv[i]), 2;
		uint32_t ret = 0;
		int n = walk(prog, len, &d, &ret);
		if (n == 0)
			return 1;
		printf("%s: %d instructions, returns %#x\n", argv[i], n, ret);
	}
	printf("length %ld\n", len);
	return 0;
}
