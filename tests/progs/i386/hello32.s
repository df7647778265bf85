/* hello32: a static 32-bit i386 program, assembled by tests/abuse_entry.bats
 * with the 64-bit toolchain (as --32, ld -m elf_i386: no multilib needed).
 * It writes "hello from i386" through int $0x80 and exits 0, so that its
 * run shows whether its system calls reached the kernel. */
	.globl _start
	.text
_start:
	movl $4, %eax		/* write */
	movl $1, %ebx
	movl $msg, %ecx
	movl $len, %edx
	int $0x80
	movl $1, %eax		/* exit */
	xorl %ebx, %ebx
	int $0x80

	.data
msg:	.ascii "hello from i386\n"
	len = . - msg
