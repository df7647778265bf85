/* prologue.c — see prologue.h. */
#include "prologue.h"

#include <stdbool.h>

/* Opcodes (after an optional REX prefix) that take a ModRM byte and no
 * immediate: add, or, and, sub, xor, cmp (both directions), test, mov.
 * Only their register-to-register form (ModRM mod 3) is accepted. */
static bool reg_reg_op(uint8_t op)
{
	switch (op) {
	case 0x01: case 0x03: /* add */
	case 0x09: case 0x0b: /* or */
	case 0x21: case 0x23: /* and */
	case 0x29: case 0x2b: /* sub */
	case 0x31: case 0x33: /* xor */
	case 0x39: case 0x3b: /* cmp */
	case 0x85:            /* test */
	case 0x89: case 0x8b: /* mov */
		return true;
	default:
		return false;
	}
}

/* The length of the accepted instruction at code (avail bytes), or 0. */
static size_t one(const uint8_t *code, size_t avail)
{
	static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	if (avail >= sizeof endbr64 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
		return sizeof endbr64;
	if (avail >= 2 && code[0] == 0x66 && code[1] == 0x90)
		return 2; /* xchg ax, ax: a 2-byte nop */
	size_t rex = avail >= 1 && (code[0] & 0xf0) == 0x40 ? 1 : 0;
	bool wide = rex && (code[0] & 0x08);
	if (avail < rex + 1)
		return 0;
	uint8_t op = code[rex];
	if (op == 0x90 || (op >= 0x50 && op <= 0x57))
		return rex + 1; /* nop; push r64 */
	if (op >= 0xb8 && op <= 0xbf) {
		size_t len = rex + 1 + (wide ? 8 : 4); /* mov r, imm32 / imm64 */
		return avail >= len ? len : 0;
	}
	if (avail < rex + 2 || (code[rex + 1] & 0xc0) != 0xc0)
		return 0; /* needs ModRM, register form */
	if (reg_reg_op(op))
		return rex + 2;
	size_t imm = op == 0x83 ? 1 : op == 0x81 || op == 0xc7 ? 4 : 0;
	/* c7 is mov only with ModRM reg 0. */
	if (imm == 0 || (op == 0xc7 && (code[rex + 1] & 0x38) != 0))
		return 0;
	return avail >= rex + 2 + imm ? rex + 2 + imm : 0;
}

int prologue_syscalls(const uint8_t *code, size_t len, size_t *at, int max)
{
	int n = 0;
	for (size_t i = 0; i + 2 <= len; i++) {
		if (code[i] != 0x0f || code[i + 1] != 0x05)
			continue;
		if (n == max)
			return -1;
		at[n++] = i + 2;
	}
	return n;
}

size_t prologue_span(const uint8_t *code, size_t avail, size_t need)
{
	size_t at = 0;
	while (at < need) {
		size_t len = one(code + at, avail - at);
		if (len == 0)
			return 0;
		at += len;
	}
	return at;
}
