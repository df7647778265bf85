/* elfcheck.c — see elfcheck.h. The ELF magic alone let libm.so.6 or an
 * aarch64 build through: the program then ran on glibc's malloc in every
 * replica, and every run "agreed". The mark in the dynamic symbol table is
 * what ld.so itself sees, so what is checked is what gets preloaded.
 *
 * The command's check reads only the first bytes the kernel reads itself
 * (the ELF identification and machine, or the #! line): a 32-bit x86
 * program cannot run under the replicas' filter, and one line before
 * anything starts says so better than k replicas killed by SIGSYS. */
#include "elfcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The machine diehard runs on, decided when it is compiled. */
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#elif defined(__s390x__)
#define HOST_MACHINE EM_S390
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#else
#error "elfcheck.c: add this machine's EM_ constant"
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

/* A machine's name in messages: the common ones by name, others by number. */
static const char *machine_name(unsigned m, char *buf, size_t size)
{
	static const struct {
		unsigned m;
		const char *name;
	} names[] = { { EM_X86_64, "x86-64" }, { EM_AARCH64, "aarch64" }, { EM_386, "i386" },
		      { EM_ARM, "arm" },       { EM_RISCV, "riscv" },     { EM_PPC64, "ppc64" },
		      { EM_S390, "s390" },     { EM_MIPS, "mips" },       { EM_LOONGARCH, "loongarch" } };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].m == m)
			return names[i].name;
	snprintf(buf, size, "ELF machine %u", m);
	return buf;
}

/* What kind of file st is, for the refusal of anything not regular. */
static const char *file_kind(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return "a directory";
	if (S_ISFIFO(st->st_mode))
		return "a FIFO";
	if (S_ISSOCK(st->st_mode))
		return "a socket";
	if (S_ISCHR(st->st_mode))
		return "a character device";
	if (S_ISBLK(st->st_mode))
		return "a block device";
	return "not a plain file";
}

/* Calls fn with each exported definition of the dynamic symbol table (a
 * global or weak symbol, defined, not hidden: what ld.so sees of a
 * preloaded library) until it returns true; whether one did. */
static bool each_export(Elf *elf, bool (*fn)(const char *name, const GElf_Sym *sym, void *arg), void *arg)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (data == NULL)
			return false;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			if (gelf_getsym(data, (int)i, &sym) == NULL)
				break;
			int bind = GELF_ST_BIND(sym.st_info);
			if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
			    GELF_ST_VISIBILITY(sym.st_other) == STV_HIDDEN)
				continue;
			const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (name != NULL && fn(name, &sym, arg))
				return true;
		}
	}
	return false;
}

static bool is_mark(const char *name, const GElf_Sym *sym, void *arg)
{
	(void)sym;
	return strcmp(name, arg) == 0;
}

/* Whether the dynamic symbol table exports mark. */
static bool defines(Elf *elf, const char *mark)
{
	return each_export(elf, is_mark, (void *)mark);
}

struct wanted {
	const char *const *names;
	unsigned long *values;
	size_t n;
};

static bool note_value(const char *name, const GElf_Sym *sym, void *arg)
{
	struct wanted *w = arg;
	for (size_t j = 0; j < w->n; j++)
		if (strcmp(name, w->names[j]) == 0)
			w->values[j] = (unsigned long)sym->st_value;
	return false;
}

int elfcheck_symbols(const char *path, const char *const *names, unsigned long *values, size_t n)
{
	for (size_t j = 0; j < n; j++)
		values[j] = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	int rc = -1;
	if (elf != NULL && elf_kind(elf) == ELF_K_ELF) {
		struct wanted w = { names, values, n };
		(void)each_export(elf, note_value, &w);
		rc = 0;
	}
	if (elf != NULL)
		elf_end(elf);
	close(fd);
	return rc;
}

/* The checks on an ELF file open at fd, in the order a person would want to
 * hear of them: what it is, what it is for, whether it is ours. */
static bool check_elf(int fd, char *why, size_t size)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(why, size, "cannot be checked: libelf: %s", elf_errmsg(-1));
		return false;
	}
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf == NULL || elf_kind(elf) != ELF_K_ELF) {
		snprintf(why, size, "is not an ELF file (not a shared library)");
		if (elf != NULL)
			elf_end(elf);
		return false;
	}
	bool ok = false;
	char buf[32], host[32];
	const char *ident = elf_getident(elf, NULL);
	GElf_Ehdr eh;
	if (ident == NULL || gelf_getehdr(elf, &eh) == NULL)
		snprintf(why, size, "is not a valid ELF file: %s", elf_errmsg(-1));
	else if (ident[EI_CLASS] != HOST_CLASS)
		snprintf(why, size, "is a %d-bit ELF file; diehard is %d-bit", ident[EI_CLASS] == ELFCLASS64 ? 64 : 32,
			 HOST_CLASS == ELFCLASS64 ? 64 : 32);
	else if (ident[EI_DATA] != HOST_DATA)
		snprintf(why, size, "is %s-endian; diehard is not", ident[EI_DATA] == ELFDATA2MSB ? "big" : "little");
	else if (eh.e_machine != HOST_MACHINE)
		snprintf(why, size, "is built for another machine (%s; diehard runs on %s)",
			 machine_name(eh.e_machine, buf, sizeof buf), machine_name(HOST_MACHINE, host, sizeof host));
	else if (eh.e_type != ET_DYN)
		snprintf(why, size, "is not a shared library (ELF type %u), so not libdiehard.so", (unsigned)eh.e_type);
	else if (!defines(elf, ELFCHECK_MARK))
		snprintf(why, size, "is not libdiehard.so: its dynamic symbols do not define %s", ELFCHECK_MARK);
	else
		ok = true;
	elf_end(elf);
	return ok;
}

bool elfcheck_allocator(const char *path, char *why, size_t size)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		snprintf(why, size, "cannot be read: %s", strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, size, "is not a regular file (%s)", file_kind(&st));
		return false;
	}
	/* Non-blocking, and checked again once open: the name may have been
	 * replaced by a FIFO since stat. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, size, "cannot be read: %s", strerror(errno));
		return false;
	}
	bool ok;
	if (fstat(fd, &st) != 0) {
		snprintf(why, size, "cannot be read: %s", strerror(errno));
		ok = false;
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(why, size, "is not a regular file (%s)", file_kind(&st));
		ok = false;
	} else {
		ok = check_elf(fd, why, size);
	}
	if (close(fd) != 0 && ok) {
		snprintf(why, size, "cannot be read: %s", strerror(errno));
		ok = false;
	}
	return ok;
}

/* The kernel reads this much of a file to choose how to run it (the #!
 * line included: a longer one is cut). */
#define EXEC_HEAD 256
/* Interpreters it follows from a script before it gives up (ELOOP). */
#define MAX_INTERPRETERS 4

/* What the file at path is when its calls would enter the kernel through
 * another entry than x86-64's, as a phrase ("a 32-bit i386 program");
 * NULL when it is not (or cannot be read: its exec will say). For a
 * script, its interpreter's, with the interpreter's path in interp. */
static const char *foreign_kind(const char *path, int depth, char *interp, size_t size)
{
#if defined(__x86_64__)
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	unsigned char head[EXEC_HEAD + 1];
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, head, EXEC_HEAD, 0) : -1;
	close(fd);
	if (n >= EI_NIDENT + 4 && memcmp(head, ELFMAG, SELFMAG) == 0 && head[EI_DATA] == ELFDATA2LSB &&
	    head[EI_CLASS] == ELFCLASS32) {
		/* e_machine: at the same offset in both classes. */
		unsigned machine = head[EI_NIDENT + 2] | (unsigned)head[EI_NIDENT + 3] << 8;
		return machine == EM_386 ? "a 32-bit i386 program" : machine == EM_X86_64 ? "an x32 program" : NULL;
	}
	if (n < 3 || head[0] != '#' || head[1] != '!' || depth == MAX_INTERPRETERS)
		return NULL;
	/* The interpreter: after blanks, up to a blank or the line's end. */
	head[n] = '\0';
	char *p = (char *)head + 2;
	p += strspn(p, " \t");
	size_t len = strcspn(p, " \t\n");
	if (len == 0)
		return NULL;
	p[len] = '\0';
	const char *kind = foreign_kind(p, depth + 1, interp, size);
	if (kind != NULL && depth == 0)
		snprintf(interp, size, "%s", p);
	return kind;
#else
	(void)path, (void)depth, (void)interp, (void)size;
	return NULL;
#endif
}

bool elfcheck_foreign_entry(const char *path, char *why, size_t size)
{
	char interp[EXEC_HEAD];
	interp[0] = '\0';
	const char *kind = foreign_kind(path, 0, interp, sizeof interp);
	if (kind == NULL)
		return false;
	if (interp[0] != '\0')
		snprintf(why, size, "runs %s, %s", interp, kind);
	else
		snprintf(why, size, "is %s", kind);
	return true;
}
