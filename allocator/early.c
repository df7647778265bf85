/* early.c — what libdiehard.so does while the loader relocates it, before
 * any constructor runs (issue 16's zero-stop design, docs/PERFORMANCE.md):
 * under diehard's fast clock path, it patches this process's vDSO itself
 * (the clock entry points jump to clocks.c's diehard_vdso_*, getrandom's
 * returns -ENOSYS, the trampoline for leaders' real reads is written), and
 * gives the image its agreed AT_RANDOM bytes, so that diehard need not stop
 * the image at its first arch_prctl.
 *
 * It runs from an IFUNC resolver: the loader runs those while relocating the
 * library, after every library it depends on is relocated and before any
 * constructor (a program library's constructors run before a preloaded
 * library's, so a constructor would be too late). Nothing here may call
 * libc or go through this library's own GOT beyond what is relocated
 * before IRELATIVE relocations: raw system calls and hidden symbols only,
 * and the process's start (argv, the environment, auxv) is read from
 * __libc_stack_end.
 *
 * What it needs diehard hands it in DIEHARD_CLOCKS (clocks.c):
 *   vdso=CG.CGLEN.TOD.TODLEN.TIME.TIMELEN.RAND.RANDLEN.DISPLACED
 * (hex: each entry point's offset in the vDSO and its length, 0 where it
 * has none; DISPLACED: how many bytes of clock_gettime's entry a jump
 * displaces, 0 when they cannot run elsewhere) and images=K0.K1 (the
 * 128-bit key of the AT_RANDOM bytes, clockpage.h's cp_at_random). Anything missing or odd (a program that closed the
 * region's descriptor, memory-deny-write-execute refusing the mprotect):
 * it asks diehard, with an arch_prctl made from here, which the filter
 * sends it (only the loader's own stays in the kernel), and diehard patches
 * the image as it does a stopped one. Without the exec marker in
 * DIEHARD_CLOCKS (not under diehard, --no-fast-clocks) it does nothing:
 * diehard then stops every image itself. */
#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "clockpage.h"
#include "os.h"

extern void *__libc_stack_end;

/* clocks.c's entry points, by hidden aliases (no GOT). */
long dh_vdso_real(clockid_t id, void *ts);
long dh_vdso_clock_gettime(clockid_t id, void *ts);
long dh_vdso_gettimeofday(void *tv, void *tz);
long dh_vdso_time(void *t);

static void copy(volatile uint8_t *to, const uint8_t *from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		to[i] = from[i];
}

/* The value of NAME= in env, or NULL. */
static const char *env_value(char **env, const char *name)
{
	for (; *env != NULL; env++) {
		const char *e = *env, *n = name;
		while (*n != '\0' && *e == *n)
			e++, n++;
		if (*n == '\0' && *e == '=')
			return e + 1;
	}
	return NULL;
}

/* The hex number at *s; advances *s past it and a '.' after it. false when
 * there is none. */
static bool hex_at(const char **s, uint64_t *v)
{
	const char *c = *s;
	uint64_t x = 0;
	unsigned digits = 0;
	for (;; c++, digits++) {
		int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
		if (d < 0)
			break;
		if (digits == 16)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	if (digits == 0)
		return false;
	*v = x;
	*s = *c != '\0' && *c != ',' ? c + 1 : c;
	return true;
}

/* The hex value of key in a DIEHARD_CLOCKS spec (key=...), or NULL. */
static const char *spec_value(const char *spec, const char *key)
{
	for (const char *at = spec; *at != '\0';) {
		const char *k = key, *c = at;
		while (*k != '\0' && *c == *k)
			c++, k++;
		if (*k == '\0' && *c == '=')
			return c + 1;
		while (*at != '\0' && *at != ',')
			at++;
		if (*at == ',')
			at++;
	}
	return NULL;
}

enum { T_CG, T_TOD, T_TIME, T_RAND, NT };

/* Whether clock_gettime's entry is already what diehard writes there: a
 * jump into libdiehard, or the system call. */
static bool patched(const uint8_t *entry)
{
	/* mov eax, NR; syscall: diehard's stub goes on past it (vdso.c). */
	static const uint8_t stub[7] = { 0xb8, (uint8_t)SYS_clock_gettime, 0, 0, 0, 0x0f, 0x05 };
	bool is_stub = true;
	for (unsigned i = 0; i < sizeof stub; i++)
		is_stub = is_stub && entry[i] == stub[i];
	return is_stub || (entry[0] == 0x48 && entry[1] == 0xb8 && entry[10] == 0xff && entry[11] == 0xe0);
}

/* Patches this image's vDSO and writes its AT_RANDOM bytes: 1 when done, 0
 * when diehard did (it stopped the image), -1 when it cannot. The vDSO is
 * made writable whole (the kernel will not split it) and only while the
 * loader runs alone; the AT_RANDOM count is taken only once it is done. */
static int self_patch(const char *spec, char **e)
{
	uint64_t vdso = 0, random = 0;
	for (Elf64_auxv_t *av = (Elf64_auxv_t *)(e + 1); av->a_type != AT_NULL; av++)
		if (av->a_type == AT_SYSINFO_EHDR)
			vdso = av->a_un.a_val;
		else if (av->a_type == AT_RANDOM)
			random = av->a_un.a_val;
	const char *r = spec_value(spec, "vdso"), *im = spec_value(spec, "images"), *fds = spec_value(spec, "fd");
	uint64_t off[NT], len[NT], displaced, key[2], fd = 0;
	if (vdso == 0 || r == NULL || im == NULL || fds == NULL || !hex_at(&im, &key[0]) || !hex_at(&im, &key[1]))
		return -1;
	for (const char *c = fds; *c >= '0' && *c <= '9' && fd < 1 << 20; c++)
		fd = fd * 10 + (uint64_t)(*c - '0'); /* decimal, as clocks.c reads it */
	for (unsigned t = 0; t < NT; t++)
		if (!hex_at(&r, &off[t]) || !hex_at(&r, &len[t]))
			return -1;
	if (!hex_at(&r, &displaced))
		return -1;
	const uint8_t *img = (const uint8_t *)vdso;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (eh->e_ident[0] != 0x7f || eh->e_ident[1] != 'E' || eh->e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	uint64_t size = 0;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_memsz > size)
			size = ph[i].p_offset + ph[i].p_memsz;
	size = (size + 4095) & ~(uint64_t)4095;
	for (unsigned t = 0; t < NT; t++)
		if (off[t] != 0 && (off[t] + len[t] > size || len[t] < 8))
			return -1;
	if (off[T_CG] == 0)
		return -1;
	if (patched(img + off[T_CG]))
		return 0; /* diehard stopped this image and did it all */

	/* AT_RANDOM: the slot's next image number, from its page's header
	 * (the slot's own page: fd). */
	struct stat st;
	if (os_raw_syscall(SYS_fstat, (long)fd, (long)&st, 0, 0, 0, 0) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < cp_page_size())
		return -1; /* not our page (a program put another file there): a read of it could fault */
	long hdr = os_raw_syscall(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (long)fd, 0);
	if (hdr < 0 && hdr > -4096)
		return -1;
	struct cp_page *pg = (struct cp_page *)hdr;
	if (pg->magic != CP_MAGIC || pg->slot >= CP_MAX_SLOTS) {
		os_raw_syscall(SYS_munmap, hdr, 4096, 0, 0, 0, 0);
		return -1;
	}

	/* The trampoline: the displaced instructions, then back past them. */
	uint8_t code[64];
	unsigned n = 0;
	if (displaced != 0 && displaced <= 64 - 14) {
		copy(code, img + off[T_CG], displaced);
		n = (unsigned)displaced;
		uint64_t back = vdso + off[T_CG] + displaced;
		static const uint8_t jmp[] = { 0xff, 0x25, 0, 0, 0, 0 };
		copy(code + n, jmp, sizeof jmp);
		copy(code + n + sizeof jmp, (const uint8_t *)&back, 8);
		n += 14;
		long page = (long)((uintptr_t)dh_vdso_real & ~(uintptr_t)4095);
		if (os_raw_syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) == 0) {
			copy((volatile uint8_t *)(uintptr_t)dh_vdso_real, code, n);
			os_raw_syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_EXEC, 0, 0, 0);
		}
	}
	if (os_raw_syscall(SYS_mprotect, (long)vdso, (long)size, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) != 0) {
		os_raw_syscall(SYS_munmap, hdr, 4096, 0, 0, 0, 0);
		return -1;
	}
	const uintptr_t ours[NT] = { (uintptr_t)dh_vdso_clock_gettime, (uintptr_t)dh_vdso_gettimeofday,
				     (uintptr_t)dh_vdso_time, 0 };
	static const uint8_t nosys[8] = { 0x48, 0xc7, 0xc0, (uint8_t)-38, 0xff, 0xff, 0xff, 0xc3 };
	for (unsigned t = NT; t-- > 0;) {
		if (off[t] == 0)
			continue;
		volatile uint8_t *at_entry = (volatile uint8_t *)(uintptr_t)(vdso + off[t]);
		if (ours[t] == 0) {
			copy(at_entry, nosys, sizeof nosys);
			continue;
		}
		if (len[t] < 12) {
			static const long nr[NT] = { SYS_clock_gettime, SYS_gettimeofday, SYS_time, 0 };
			uint8_t stub[8] = { 0xb8, (uint8_t)nr[t], (uint8_t)(nr[t] >> 8), 0, 0, 0x0f, 0x05, 0xc3 };
			copy(at_entry, stub, sizeof stub);
			continue;
		}
		uint8_t j[12] = { 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0 };
		copy(j + 2, (const uint8_t *)&ours[t], 8);
		copy(at_entry, j, sizeof j);
	}
	os_raw_syscall(SYS_mprotect, (long)vdso, (long)size, PROT_READ | PROT_EXEC, 0, 0, 0);

	uint64_t nth = atomic_fetch_add(&pg->images, 1);
	if (random != 0) {
		uint8_t bytes[16];
		cp_at_random(key, nth, bytes);
		copy((volatile uint8_t *)(uintptr_t)random, bytes, 16);
	}
	os_raw_syscall(SYS_munmap, hdr, 4096, 0, 0, 0, 0);
	return 1;
}

/* Asks diehard to do what self_patch could not: an arch_prctl from here
 * (not the loader's place) is sent to it, which patches the image as it
 * does at a stopped image's (supervisor/virt/images.c). */
static void ask_diehard(void)
{
	unsigned long fs;
	(void)os_raw_syscall(SYS_arch_prctl, 0x1003 /* ARCH_GET_FS */, (long)&fs, 0, 0, 0, 0);
}

static void early(void)
{
	long *sp = __libc_stack_end;
	if (sp == NULL)
		return;
	char **env = (char **)(sp + 1 + sp[0] + 1);
	char **e = env;
	while (*e != NULL)
		e++;
	const char *spec = env_value(env, "DIEHARD_CLOCKS");
	/* Without the exec marker diehard stops every image itself. */
	if (spec == NULL || spec_value(spec, "exec") == NULL)
		return;
	if (self_patch(spec, e) < 0)
		ask_diehard();
}

static void nothing(void)
{
}

typedef void hook_fn(void);

static hook_fn *early_resolve(void)
{
	early();
	return nothing;
}

/* The IFUNC and the one reference to it that makes the loader resolve it
 * while relocating the library (an IRELATIVE relocation). */
static void early_hook(void) __attribute__((ifunc("early_resolve")));
void (*volatile diehard_early_ref)(void) __attribute__((visibility("hidden"))) = early_hook;
