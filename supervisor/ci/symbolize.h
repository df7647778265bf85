/* symbolize.h — return addresses a replica recorded (an allocation's or a
 * bad free's stack, raw: address, its module's load base and path) turned
 * into function, file and line, outside the replica, with elfutils' libdwfl
 * reading each module's symbol table and DWARF line table (or its separate
 * debug file, where installed). */
#ifndef DIEHARD_SYMBOLIZE_H
#define DIEHARD_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct frame {
	uint64_t addr;  /* a return address (the call is just before it) */
	uint64_t base;  /* its module's load address */
	char *module;   /* its module's path */
	/* Filled by symbolize: NULL when unknown. */
	char *function;
	char *file;     /* as the compiler recorded it: often absolute */
	int line;       /* 0 when unknown */
};

/* Resolves every frame that can be; never fails (unknowns stay NULL). */
void symbolize(struct frame *f, size_t n);

void frames_free(struct frame *f, size_t n);

#endif
