/* symbolize_tool.c — diehard-symbolize: the fence report's symbolizer.
 *
 * libdiehard.so's fence mode (allocator/fence.h) cannot read DWARF inside a
 * faulting process, so it pipes its report here: every line is copied to
 * stderr, except frame lines "    #N 0xPC 0xBASE MODULE", which come out as
 * "    #N FUNCTION FILE:LINE (MODULE)" (as much of it as is known). Exit 0
 * once the whole report is written, so the library does not repeat it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize.h"

static void put_frame(const char *num, struct frame *f)
{
	symbolize(f, 1);
	fprintf(stderr, "    #%s ", num);
	if (f->function != NULL)
		fprintf(stderr, "%s ", f->function);
	if (f->file != NULL)
		fprintf(stderr, "%s:%d ", f->file, f->line);
	if (f->function == NULL && f->file == NULL)
		fprintf(stderr, "0x%llx ", (unsigned long long)(f->addr - f->base));
	fprintf(stderr, "(%s)\n", f->module);
}

int main(void)
{
	char line[4096];
	while (fgets(line, sizeof line, stdin) != NULL) {
		char num[16], module[4000];
		unsigned long long pc, base;
		if (sscanf(line, "    #%15[0-9] 0x%llx 0x%llx %3999[^\n]", num, &pc, &base, module) == 4) {
			struct frame *f = calloc(1, sizeof *f);
			if (f == NULL)
				return 1;
			f->addr = pc;
			f->base = base;
			f->module = strdup(module);
			if (f->module == NULL)
				return 1;
			put_frame(num, f);
			frames_free(f, 1);
		} else {
			fputs(line, stderr);
		}
	}
	return fflush(stderr) == 0 ? 0 : 1;
}
