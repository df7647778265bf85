/*
 * nd_rawstart: a static program with no libc at all, whose first clock
 * read comes right after its first arch_prctl, for tests/fastclock.bats:
 * diehard grafts its clock blob into the image at that arch_prctl, and the
 * thread must not run (into a vDSO entry point about to be rewritten)
 * before the graft is done.
 *
 *   nd_rawstart N      N clock_gettime(CLOCK_MONOTONIC) reads through the
 *                      vDSO's own symbol, then "ok N" ("bad N" when a read
 *                      failed or stepped back); exit status 0 or 1
 *
 * Built -nostdlib -static (Makefile): _start finds the vDSO in the auxiliary
 * vector and __vdso_clock_gettime in its dynamic symbols.
 */
#include <asm/prctl.h>
#include <elf.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

static long raw(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

static int same(const char *a, const char *b)
{
	while (*a != '\0' && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

typedef long gettime_fn(clockid_t, struct timespec *);

/* __vdso_clock_gettime in the vDSO at base, or 0. */
static gettime_fn *vdso_gettime(uintptr_t base)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	uintptr_t link = 0;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD) {
			link = ph[i].p_vaddr - ph[i].p_offset;
			break;
		}
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
		const char *names = (const char *)(base + sh[sh[i].sh_link].sh_offset);
		for (uint64_t j = 0; j < sh[i].sh_size / sizeof *sym; j++)
			if (same(names + sym[j].st_name, "__vdso_clock_gettime"))
				return (gettime_fn *)(base + sym[j].st_value - link);
	}
	return 0;
}

static uint64_t tls[32];

static void say(const char *word, long n)
{
	char line[40];
	int len = 0;
	while (*word != '\0')
		line[len++] = *word++;
	line[len++] = ' ';
	char digits[24];
	int d = 0;
	do
		digits[d++] = (char)('0' + n % 10);
	while ((n /= 10) > 0);
	while (d > 0)
		line[len++] = digits[--d];
	line[len++] = '\n';
	raw(SYS_write, 1, (long)line, len);
}

void start(long *sp);
void start(long *sp)
{
	long argc = sp[0], n = 0;
	char **argv = (char **)(sp + 1), **envp = argv + argc + 1;
	for (const char *c = argc > 1 ? argv[1] : "1000"; *c >= '0' && *c <= '9'; c++)
		n = n * 10 + (*c - '0');
	while (*envp != 0)
		envp++;
	uintptr_t vdso = 0;
	for (const Elf64_auxv_t *av = (const Elf64_auxv_t *)(envp + 1); av->a_type != AT_NULL; av++)
		if (av->a_type == AT_SYSINFO_EHDR)
			vdso = av->a_un.a_val;
	gettime_fn *gettime = vdso != 0 ? vdso_gettime(vdso) : 0;
	tls[0] = (uint64_t)tls;
	raw(SYS_arch_prctl, ARCH_SET_FS, (long)tls, 0);
	long bad = gettime == 0;
	struct timespec ts, last = { 0, 0 };
	for (long i = 0; i < n && !bad; i++) {
		if (gettime(CLOCK_MONOTONIC, &ts) != 0 || ts.tv_sec < last.tv_sec ||
		    (ts.tv_sec == last.tv_sec && ts.tv_nsec < last.tv_nsec))
			bad = 1;
		last = ts;
	}
	say(bad ? "bad" : "ok", n);
	raw(SYS_exit_group, bad, 0, 0);
}

__asm__(".globl _start\n"
	"_start:\n"
	"\tmov %rsp, %rdi\n"
	"\tand $-16, %rsp\n"
	"\tcall start\n"
	"\thlt\n");
