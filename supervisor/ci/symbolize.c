/* symbolize.c — see symbolize.h. One Dwfl session per call: modules are
 * reported at the base each frame names (PIE and shared objects; an ET_EXEC
 * program sits where its headers say), and each address looked up one byte
 * before the return address, inside the call instruction, so that the line
 * is the call's and not the next statement's. */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

static char *debuginfo_path;

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static char *dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

void symbolize(struct frame *f, size_t n)
{
	Dwfl *dwfl = dwfl_begin(&callbacks);
	if (dwfl == NULL)
		return;
	dwfl_report_begin(dwfl);
	for (size_t i = 0; i < n; i++) {
		if (f[i].module == NULL)
			continue;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = f[j].module != NULL && f[j].base == f[i].base && strcmp(f[j].module, f[i].module) == 0;
		if (!seen)
			(void)dwfl_report_elf(dwfl, f[i].module, f[i].module, -1, f[i].base, false);
	}
	dwfl_report_end(dwfl, NULL, NULL);
	for (size_t i = 0; i < n; i++) {
		Dwarf_Addr pc = f[i].addr ? f[i].addr - 1 : 0;
		Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
		if (mod == NULL)
			continue;
		GElf_Off off;
		GElf_Sym sym;
		const char *name = dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL);
		f[i].function = dup_or_null(name);
		Dwfl_Line *line = dwfl_module_getsrc(mod, pc);
		if (line != NULL) {
			int lineno = 0;
			const char *file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
			f[i].file = dup_or_null(file);
			f[i].line = lineno;
		}
	}
	dwfl_end(dwfl);
}

void frames_free(struct frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].module);
		free(f[i].function);
		free(f[i].file);
	}
	free(f);
}
