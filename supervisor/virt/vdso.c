/* vdso.c — see vdso.h. */
#include "vdso.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "blob/clockblob.h"
#include "elfcheck.h"
#include "prologue.h"

#define STUB_BYTES 14
/* The stubs' common start, mov eax, NR; syscall (what an image's own patch,
 * allocator/early.c, writes too, with a ret after it). */
#define STUB_CALL_BYTES 7
#define SHORT_STUB_BYTES 8 /* the call and a ret: an entry point shorter than the stub */
/* movabs rax, imm64; jmp rax */
#define JUMP_BYTES 12

struct target {
	const char *name;   /* the vDSO's own symbol */
	uint8_t stub[STUB_BYTES];
	uint64_t offset;    /* from the vDSO's start; 0: absent */
	uint64_t size;      /* the entry point's bytes */
	const char *ours;   /* libdiehard's function for it, or NULL */
	unsigned long ours_off; /* its offset in libdiehard.so; 0: none */
	int blob_off;       /* its entry in the clock blob (clockblob.h); -1: none */
};

/* mov eax, NR; syscall; cmp rax, -EINTR; je back to the mov; ret. A
 * notified call is interruptible until diehard has received it, and a
 * signal whose handler lacks SA_RESTART then ends it with EINTR, which no
 * clock read returns in the kernel (a program that does not look takes
 * what its buffer held for the time): diehard never saw the call, so it
 * is made again, as clockpath.h's entry points do. */
#define SYSCALL_STUB(nr)                                                                                              \
	{ 0xb8, (uint8_t)(nr), (uint8_t)((nr) >> 8), 0, 0, 0x0f, 0x05, 0x48, 0x83, 0xf8, (uint8_t)-EINTR, 0x74, 0xf3, 0xc3 }

static struct target targets[] = {
	{ "__vdso_clock_gettime", SYSCALL_STUB(SYS_clock_gettime), 0, 0, "diehard_vdso_clock_gettime", 0,
	  BLOB_CLOCK_GETTIME },
	{ "__vdso_gettimeofday", SYSCALL_STUB(SYS_gettimeofday), 0, 0, "diehard_vdso_gettimeofday", 0,
	  BLOB_GETTIMEOFDAY },
	{ "__vdso_time", SYSCALL_STUB(SYS_time), 0, 0, "diehard_vdso_time", 0, BLOB_TIME },
	/* mov rax, -ENOSYS; ret: glibc then falls back to the system call. */
	{ "__vdso_getrandom",
	  { 0x48, 0xc7, 0xc0, (uint8_t)-ENOSYS, 0xff, 0xff, 0xff, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc },
	  0, 0, NULL, 0, -1 },
};
#define NTARGETS (sizeof targets / sizeof targets[0])

/* The fast path's leaders' real clock_gettime (vdso.h): the bytes of the
 * vDSO's entry point the jump covers, relocatable (prologue.h), and the
 * trampoline's place in libdiehard.so. */
#define REAL_SYMBOL "diehard_vdso_real_clock_gettime"
#define REAL_BYTES 64      /* the trampoline's room in libdiehard.so */
#define BACK_BYTES 14      /* jmp *0(%rip); .quad address */
#define MAX_SITES 8
static uint8_t displaced[REAL_BYTES - BACK_BYTES];
static size_t displaced_len;
static unsigned long real_off;
/* Offsets in the vDSO just past each system call instruction of its
 * clock_gettime's body (past the displaced bytes): where a leader's read
 * enters the kernel when the vDSO falls back to the system call. */
static uint64_t sites[MAX_SITES];
static size_t nsites;

static bool have_targets;
/* The first target present: the patch writes it last, and an image whose
 * entry there is a patch's was patched already (vdso_patched). */
static size_t first;
/* libdiehard.so, as /proc/PID/maps names its file: device and inode. */
static bool have_ours;
static dev_t ours_dev;
static ino_t ours_ino;

/* The vDSO's size, from its line in /proc/self/maps; 0 if not found. */
static size_t own_vdso_size(uintptr_t base)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (f == NULL)
		return 0;
	char line[512];
	size_t size = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi;
		if (strstr(line, "[vdso]") != NULL && sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == base) {
			size = hi - lo;
			break;
		}
	}
	fclose(f);
	return size;
}

static bool inside(size_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

/* The vDSO's clock_gettime (targets[0]): how much of its entry a jump
 * displaces, and where its own system calls are. */
static void find_real(const uint8_t *img, size_t size)
{
	const struct target *t = &targets[0];
	if (t->offset == 0 || !inside(size, t->offset, t->size))
		return;
	const uint8_t *code = img + t->offset;
	/* Past the system-call stub too: a process first given the stub
	 * (images.c) and then the jump keeps the stub's last bytes after the
	 * jump, so the trampoline's way back must land beyond them. */
	size_t span = prologue_span(code, t->size, STUB_BYTES > JUMP_BYTES ? STUB_BYTES : JUMP_BYTES);
	if (span == 0 || span > sizeof displaced)
		return;
	/* A site too many only costs a look at the caller's auxv; one
	 * missed would be taken for an ordinary read: more than we keep, no
	 * trampoline. */
	size_t at[MAX_SITES];
	int n = prologue_syscalls(code + span, t->size - span, at, MAX_SITES);
	if (n < 0)
		return;
	for (int i = 0; i < n; i++)
		sites[i] = t->offset + span + at[i];
	nsites = (size_t)n;
	memcpy(displaced, code, span);
	displaced_len = span;
}

int vdso_init(void)
{
	uintptr_t base = getauxval(AT_SYSINFO_EHDR);
	size_t size = base ? own_vdso_size(base) : 0;
	if (size < sizeof(Elf64_Ehdr))
		return -1;
	const uint8_t *img = (const uint8_t *)base;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || !inside(size, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return -1;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	/* Its first loadable segment says where the link-time addresses start. */
	uint64_t link_base = 0;
	if (inside(size, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
		for (unsigned i = 0; i < eh->e_phnum; i++)
			if (ph[i].p_type == PT_LOAD) {
				link_base = ph[i].p_vaddr - ph[i].p_offset;
				break;
			}
	}
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum ||
		    !inside(size, sh[i].sh_offset, sh[i].sh_size))
			continue;
		const Elf64_Shdr *strsec = &sh[sh[i].sh_link];
		if (!inside(size, strsec->sh_offset, strsec->sh_size))
			continue;
		const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
		const char *str = (const char *)(img + strsec->sh_offset);
		for (size_t j = 0; j < sh[i].sh_size / sizeof *sym; j++) {
			if (sym[j].st_name >= strsec->sh_size || ELF64_ST_TYPE(sym[j].st_info) != STT_FUNC)
				continue;
			const char *name = str + sym[j].st_name;
			if (strnlen(name, strsec->sh_size - sym[j].st_name) == strsec->sh_size - sym[j].st_name)
				continue;
			for (size_t t = 0; t < NTARGETS; t++) {
				uint64_t off = sym[j].st_value - link_base;
				if (strcmp(name, targets[t].name) == 0 && sym[j].st_size >= SHORT_STUB_BYTES &&
				    inside(size, off, sym[j].st_size < STUB_BYTES ? SHORT_STUB_BYTES : STUB_BYTES)) {
					targets[t].offset = off;
					targets[t].size = sym[j].st_size;
					have_targets = true;
				}
			}
		}
	}
	if (!have_targets)
		return -1;
	while (targets[first].offset == 0)
		first++;
	if (!inside(size, targets[first].offset, JUMP_BYTES))
		return -1;
	find_real(img, size);
	return 0;
}

void vdso_jump_to(const char *allocator)
{
	const char *names[NTARGETS + 1];
	unsigned long values[NTARGETS + 1];
	struct stat st;
	for (size_t t = 0; t < NTARGETS; t++)
		names[t] = targets[t].ours != NULL ? targets[t].ours : "";
	names[NTARGETS] = REAL_SYMBOL;
	if (stat(allocator, &st) != 0 || elfcheck_symbols(allocator, names, values, NTARGETS + 1) != 0)
		return;
	real_off = values[NTARGETS];
	for (size_t t = 0; t < NTARGETS; t++)
		if (targets[t].ours != NULL && targets[t].size >= JUMP_BYTES && values[t] != 0) {
			targets[t].ours_off = values[t];
			have_ours = true;
		}
	ours_dev = st.st_dev;
	ours_ino = st.st_ino;
}

/* PROCMAP_QUERY (Linux 6.11, uapi/linux/fs.h; defined here for older
 * headers): one mapping of a /proc/PID/maps descriptor, by address. */
struct maps_query {
	uint64_t size, flags, addr;
	uint64_t start, end, vma_flags, page_size, offset, inode;
	uint32_t dev_major, dev_minor, name_size, build_id_size;
	uint64_t name_addr, build_id_addr;
};
#define MAPS_QUERY _IOWR('f', 17, struct maps_query)
#define QUERY_COVERING_OR_NEXT 0x10
#define QUERY_FILE_BACKED 0x20
/* Mappings looked at from each guess below the hint before the next. */
#define QUERY_NEAR 8

/* The mapping of our library at file offset 0 among the file-backed
 * mappings from addr up, looking at most at max of them (0: all): its
 * start, 0 when not found, or -1 when the kernel has no PROCMAP_QUERY. */
static int64_t query_from(int fd, uint64_t addr, uint64_t stop, unsigned max)
{
	for (unsigned i = 0; max == 0 || i < max; i++) {
		struct maps_query q = { .size = sizeof q, .flags = QUERY_COVERING_OR_NEXT | QUERY_FILE_BACKED, .addr = addr };
		if (ioctl(fd, MAPS_QUERY, &q) != 0)
			return errno == ENOENT ? 0 : -1;
		if (q.offset == 0 && q.inode == (uint64_t)ours_ino && makedev(q.dev_major, q.dev_minor) == ours_dev)
			return (int64_t)q.start;
		if (q.end <= addr || q.start >= stop)
			return 0;
		addr = q.end;
	}
	return 0;
}

/* The same from the text of /proc/PID/maps, for kernels before 6.11. */
static uint64_t parse_maps(int fd)
{
	FILE *f = fdopen(fd, "r");
	if (f == NULL) {
		close(fd);
		return 0;
	}
	char line[4096];
	uint64_t base = 0;
	while (base == 0 && fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi, off, ino;
		unsigned maj, min;
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj, &min, &ino) == 6 && off == 0 &&
		    ino == (unsigned long)ours_ino && makedev(maj, min) == ours_dev)
			base = lo;
	}
	fclose(f);
	return base;
}

/* Where libdiehard.so starts in process pid (its mapping at file offset
 * 0), or 0 when it is not loaded there. near: an address in the dynamic
 * loader, which maps the preloaded library first, just below itself: the
 * few mappings from a little below it are asked about first. */
static uint64_t ours_in(pid_t pid, uint64_t near)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* 1, 8, 64 MiB below: the library (some 200 KiB) usually sits
	 * between the loader and libc (2 MiB), a few mappings up from the
	 * first guess; else every file-backed mapping from the bottom. */
	int64_t base = 0;
	for (unsigned shift = 20; base == 0 && shift <= 26 && near > (uint64_t)1 << shift; shift += 3)
		base = query_from(fd, near - ((uint64_t)1 << shift), near, QUERY_NEAR);
	if (base == 0)
		base = query_from(fd, 0, UINT64_MAX, 0);
	if (base < 0)
		return parse_maps(fd); /* closes fd */
	close(fd);
	return (uint64_t)base;
}

/* Target t's bytes for a process whose libdiehard.so starts at lib, or
 * else whose clock blob starts at blob (0: none): a jump to ours, or the
 * system-call stub. */
static size_t stub_for(size_t t, uint64_t lib, uint64_t blob, uint8_t *out)
{
	uint64_t to = 0;
	if (lib != 0 && targets[t].ours_off != 0)
		to = lib + targets[t].ours_off;
	else if (lib == 0 && blob != 0 && targets[t].blob_off >= 0)
		to = blob + (uint64_t)targets[t].blob_off;
	if (to == 0 || targets[t].size < JUMP_BYTES) {
		memcpy(out, targets[t].stub, STUB_BYTES);
		if (targets[t].size >= STUB_BYTES)
			return STUB_BYTES;
		/* An entry too short for the retry: the call and ret alone. */
		out[STUB_CALL_BYTES] = 0xc3;
		return SHORT_STUB_BYTES;
	}
	out[0] = 0x48;
	out[1] = 0xb8;
	memcpy(out + 2, &to, sizeof to);
	out[10] = 0xff;
	out[11] = 0xe0;
	return JUMP_BYTES;
}

int vdso_auxv(pid_t tid, uint64_t *vdso, uint64_t *random)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/auxv", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	Elf64_auxv_t aux[64];
	ssize_t n = read(fd, aux, sizeof aux);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	*vdso = *random = 0;
	for (size_t i = 0; i < (size_t)n / sizeof aux[0] && aux[i].a_type != AT_NULL; i++) {
		if (aux[i].a_type == AT_SYSINFO_EHDR)
			*vdso = aux[i].a_un.a_val;
		else if (aux[i].a_type == AT_RANDOM)
			*random = aux[i].a_un.a_val;
	}
	return 0;
}

bool vdso_real_clock(void)
{
	return have_ours && real_off != 0 && displaced_len != 0 && targets[0].ours_off != 0;
}

/* Whether a blob's trampoline can be written: the displaced bytes and the
 * jump back fit its room. */
static bool blob_real_clock(void)
{
	return displaced_len != 0 && displaced_len + BACK_BYTES <= BLOB_REAL_BYTES &&
	       targets[0].size >= JUMP_BYTES;
}

/* The trampoline at at (in libdiehard.so or the blob) for the vDSO at
 * base: the displaced instructions, then a jump back past them. Not
 * written, it stays -ENOSYS, and leaders make the system call. */
static int write_real(int mem, uint64_t base, uint64_t at)
{
	uint8_t code[REAL_BYTES];
	uint64_t back = base + targets[0].offset + displaced_len;
	memcpy(code, displaced, displaced_len);
	static const uint8_t jmp[] = { 0xff, 0x25, 0, 0, 0, 0 }; /* jmp *0(%rip) */
	memcpy(code + displaced_len, jmp, sizeof jmp);
	memcpy(code + displaced_len + sizeof jmp, &back, sizeof back);
	size_t len = displaced_len + BACK_BYTES;
	ssize_t w = pwrite(mem, code, len, (off_t)at);
	return w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
}

bool vdso_real_fallback(pid_t tid, uint64_t ip)
{
	size_t i = 0;
	while (i < nsites && (sites[i] & 0xfff) != (ip & 0xfff))
		i++;
	if (i == nsites)
		return false; /* not at a site's place in its page: the usual case */
	uint64_t base, random;
	if (vdso_auxv(tid, &base, &random) != 0 || base == 0 || ip < base)
		return false;
	for (i = 0; i < nsites; i++)
		if (ip - base == sites[i])
			return true;
	return false;
}

uint64_t vdso_library(pid_t pid, uint64_t near)
{
	return have_ours ? ours_in(pid, near) : 0;
}

bool vdso_patched(int mem, uint64_t base)
{
	uint8_t now[JUMP_BYTES];
	if (!have_targets || base == 0)
		return true; /* nothing to patch */
	if (pread(mem, now, sizeof now, (off_t)(base + targets[first].offset)) != (ssize_t)sizeof now)
		return false; /* then the patch fails, and says so */
	/* What a patch writes (ours, or early.c's in an image that patched
	 * itself): the stub, or movabs rax, ...; jmp rax. Anything else is
	 * the vDSO's own code (our own vDSO's bytes are not the reference: a
	 * diehard run with libdiehard loaded has its own patched). */
	return memcmp(now, targets[first].stub, STUB_CALL_BYTES) == 0 ||
	       (now[0] == 0x48 && now[1] == 0xb8 && now[10] == 0xff && now[11] == 0xe0);
}

bool vdso_in_entry(uint64_t base, uint64_t ip)
{
	for (size_t t = 0; t < NTARGETS; t++)
		if (targets[t].offset != 0 && ip >= base + targets[t].offset &&
		    ip < base + targets[t].offset + JUMP_BYTES)
			return true;
	return false;
}

uint64_t vdso_site(uint64_t base)
{
	for (size_t t = 0; t < NTARGETS; t++)
		if (targets[t].offset != 0 && targets[t].blob_off >= 0)
			return base + targets[t].offset + 5; /* SYSCALL_STUB: mov eax, NR; here */
	return 0;
}

int vdso_patch(int mem, uint64_t base, uint64_t lib, uint64_t blob)
{
	if (!have_targets || base == 0)
		return 0;
	/* Writes through /proc/PID/mem pass the page protections (the vDSO
	 * is read-only and executable), copying the page for this process;
	 * the same for the trampoline, written first: the jumps lead to code
	 * that calls it. The first target is written last. */
	if (lib != 0 && vdso_real_clock())
		(void)write_real(mem, base, lib + real_off); /* failed: leaders make the system call */
	else if (lib == 0 && blob != 0 && blob_real_clock())
		(void)write_real(mem, base, blob + BLOB_REAL);
	uint8_t want[STUB_BYTES > JUMP_BYTES ? STUB_BYTES : JUMP_BYTES];
	for (size_t t = NTARGETS; t-- > 0;) {
		if (targets[t].offset == 0)
			continue;
		size_t len = stub_for(t, lib, blob, want);
		ssize_t w = pwrite(mem, want, len, (off_t)(base + targets[t].offset));
		if (w != (ssize_t)len)
			return w < 0 ? -errno : -EIO;
	}
	return 1;
}

size_t vdso_recipe(char *buf, size_t size)
{
	if (!have_targets)
		return 0;
	size_t n = 0;
	for (size_t t = 0; t < NTARGETS && n < size; t++) {
		int w = snprintf(buf + n, size - n, "%" PRIx64 ".%" PRIx64 ".", targets[t].offset,
				 targets[t].offset ? targets[t].size : 0);
		if (w < 0)
			return 0;
		n += (size_t)w;
	}
	if (n >= size)
		return 0;
	int w = snprintf(buf + n, size - n, "%zx", vdso_real_clock() ? displaced_len : (size_t)0);
	return w < 0 || (size_t)w >= size - n ? 0 : n + (size_t)w;
}
