/* Unit tests of prologue.c: which first bytes of a function may run from a
 * trampoline. Real prologues (this kernel's vDSO clock_gettime, one with
 * endbr64, one with an immediate) give the span of whole instructions
 * reaching the jump's 12 bytes; an operand relative to the instruction
 * pointer (the vDSO's gettimeofday), a memory operand, a branch, a call, a
 * ret, or bytes that end mid-instruction give 0; no read past the bytes
 * given. And where a function's system calls are. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prologue.h"
#include "tap.h"

/* The bytes in a buffer of exactly their size (ASan sees any overrun);
 * the caller frees it. */
static uint8_t *exact(const uint8_t *bytes, size_t len)
{
	uint8_t *copy = malloc(len);
	if (copy == NULL)
		abort();
	memcpy(copy, bytes, len);
	return copy;
}

static size_t span_of(const uint8_t *bytes, size_t len, size_t need)
{
	uint8_t *copy = exact(bytes, len);
	size_t r = prologue_span(copy, len, need);
	free(copy);
	return r;
}

static int sites_of(const uint8_t *bytes, size_t len, size_t *at, int max)
{
	uint8_t *copy = exact(bytes, len);
	int r = prologue_syscalls(copy, len, at, max);
	free(copy);
	return r;
}

int main(void)
{
	/* Linux 6.18's __vdso_clock_gettime: push rbp; mov rbp,rsp; push r14;
	 * push rbx; and rsp,-16; sub rsp,16; cmp edi,23 (then ja). */
	static const uint8_t vdso[] = { 0x55, 0x48, 0x89, 0xe5, 0x41, 0x56, 0x53, 0x48, 0x83, 0xe4, 0xf0,
					0x48, 0x83, 0xec, 0x10, 0x83, 0xff, 0x17, 0x0f, 0x87, 0xd2, 0, 0, 0 };
	CHECK(span_of(vdso, sizeof vdso, 12) == 15, "the vDSO's clock_gettime: 15 bytes (the sub that the 12th byte is in)");
	CHECK(span_of(vdso, sizeof vdso, 11) == 11, "11 needed: 11 (an instruction boundary)");
	CHECK(span_of(vdso, sizeof vdso, 16) == 18, "16 needed: through the cmp, 18");
	CHECK(span_of(vdso, sizeof vdso, 19) == 0, "19 needed: the ja is a branch: 0");
	CHECK(span_of(vdso, 14, 12) == 0, "the bytes end inside the sub: 0");

	/* endbr64; push r15; mov r15,rdi; push r14; mov eax, 7; xor ecx,ecx */
	static const uint8_t ibt[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57, 0x49, 0x89, 0xff, 0x41, 0x56,
				       0xb8, 7, 0, 0, 0, 0x31, 0xc9 };
	CHECK(span_of(ibt, sizeof ibt, 12) == 16, "endbr64, pushes, mov r15,rdi, mov eax,imm32: 16");
	/* movabs rax, imm64; sub rsp, imm32; nop; 66 nop */
	static const uint8_t imm[] = { 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 0x48, 0x81, 0xec, 0, 1, 0, 0, 0x90, 0x66, 0x90 };
	CHECK(span_of(imm, sizeof imm, 12) == 17, "movabs and sub rsp,imm32: 17");
	CHECK(span_of(imm, sizeof imm, 18) == 18, "then a nop: 18");
	CHECK(span_of(imm, sizeof imm, 19) == 20, "then a 2-byte nop: 20");
	/* mov r64, imm32 sign-extended (c7 /0) and c7 /1 (not a mov). */
	static const uint8_t c7[] = { 0x48, 0xc7, 0xc0, 1, 0, 0, 0, 0x48, 0xc7, 0xc8, 1, 0, 0, 0 };
	CHECK(span_of(c7, sizeof c7, 7) == 7, "mov rax, imm32 (c7 /0): 7");
	CHECK(span_of(c7, sizeof c7, 8) == 0, "c7 /1: 0");

	/* Linux 6.18's __vdso_gettimeofday: push rbp; lea r10,[rip-0x6818]. */
	static const uint8_t rip[] = { 0x55, 0x4c, 0x8d, 0x15, 0xe8, 0x97, 0xff, 0xff, 0x48, 0x89, 0xe5,
				       0x48, 0x83, 0xe4, 0xf0 };
	CHECK(span_of(rip, sizeof rip, 12) == 0, "an operand relative to rip: 0");
	static const uint8_t mem[] = { 0x55, 0x48, 0x89, 0x7d, 0xf8, 0x48, 0x89, 0xe5, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(mem, sizeof mem, 12) == 0, "a store to memory (mov [rbp-8],rdi): 0");
	static const uint8_t branch[] = { 0x55, 0xeb, 0x00, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(branch, sizeof branch, 12) == 0, "a short jump: 0");
	static const uint8_t call[] = { 0x55, 0xe8, 0, 0, 0, 0, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(call, sizeof call, 12) == 0, "a call: 0");
	static const uint8_t ret[] = { 0x55, 0x5d, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(ret, sizeof ret, 12) == 0, "a ret: 0");
	static const uint8_t syscall[] = { 0xb8, 0xe4, 0, 0, 0, 0x0f, 0x05, 0xc3, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(syscall, sizeof syscall, 12) == 0, "the system-call stub (mov eax; syscall; ret): 0");
	static const uint8_t rex2[] = { 0x48, 0x41, 0x50, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	CHECK(span_of(rex2, sizeof rex2, 12) == 0, "two REX prefixes: 0");

	/* Truncated forms never read past the end. */
	static const uint8_t cut[][3] = { { 0x48, 0, 0 }, { 0x48, 0x83, 0 }, { 0x48, 0x83, 0xec }, { 0xf3, 0x0f, 0x1e },
					  { 0x48, 0xb8, 1 }, { 0x66, 0, 0 } };
	static const size_t cut_len[] = { 1, 2, 3, 3, 3, 1 };
	for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
		CHECK(span_of(cut[i], cut_len[i], 1) == 0, "cut short (%zu bytes, first %02x): 0", cut_len[i], cut[i][0]);
	CHECK(prologue_span(vdso, sizeof vdso, 0) == 0, "nothing needed: 0 bytes");

	/* System call sites: the offset past each 0f 05, a pair inside a
	 * longer instruction too; more than max: -1; a 0f at the end alone
	 * is none (no read past the bytes). */
	static const uint8_t calls[] = { 0xb8, 0xe4, 0, 0, 0, 0x0f, 0x05, 0xc3, 0x48, 0xb8, 0x0f, 0x05, 0, 0, 0, 0, 0, 0, 0x0f };
	size_t at[4] = { 0 };
	CHECK(sites_of(calls, sizeof calls, at, 4) == 2 && at[0] == 7 && at[1] == 12,
	      "two sites, past each pair (%zu, %zu)", at[0], at[1]);
	CHECK(sites_of(calls, sizeof calls, at, 1) == -1, "more than max: -1");
	CHECK(sites_of(calls, 6, at, 4) == 0, "a 0f at the end alone: none");
	CHECK(sites_of(calls, 7, at, 4) == 1 && at[0] == 7, "a pair ending at the end: one");
	return tap_done();
}
