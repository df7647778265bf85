/* exec.c — every exec of this process, through libc, tells diehard's filter
 * whether the new image will carry libdiehard (issue 16's zero-stop
 * design, docs/PERFORMANCE.md).
 *
 * With the fast clock path, diehard does not stop a new image at its
 * loader's arch_prctl: libdiehard patches the image's vDSO itself
 * (early.c). An image that will not load libdiehard (an environment without
 * it: `env -i`, a sanitized one) must still be stopped. So libc's execve,
 * the entry point every exec function of libc reaches (execvp, posix_spawn,
 * system, popen), and kernel.c's execve jump here, and an environment that
 * preloads this library and keeps DIEHARD_CLOCKS makes the system call
 * carry the exec marker (fourth argument), which the filter lets through.
 * Any other exec is seen by diehard, which reads its environment and traces
 * one without libdiehard to its exec (images.c). */
#include "exec.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clocks.h"
#include "config.h"
#include "envkeep.h"
#include "os.h"
#include "viewstat.h"

static uint64_t mark_exec;
static char self_path[4096];
static size_t self_len;
static char clocks[512]; /* our DIEHARD_CLOCKS=... */

/* Whether env preloads this library and hands on our DIEHARD_CLOCKS as it
 * is (early.c's recipe and key). */
static bool carries_us(char *const env[])
{
	struct envkeep k = { false, false };
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		envkeep_entry(&k, env[i], self_path, self_len, clocks);
	return envkeep_ok(&k);
}

/* Whether env preloads this library (whatever its DIEHARD_CLOCKS). */
static bool carries_us_lib(char *const env[])
{
	struct envkeep k = { false, false };
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		envkeep_entry(&k, env[i], self_path, self_len, clocks);
	return k.preload;
}

static long dh_execve_as(const char *path, char *const argv[], char *const envp[]);

/* The exec, with DIEHARD_VIEWDEVS put back (hidden from the program:
 * viewstat.h) into a copy of envp on the stack, when envp still preloads
 * this library and lacks it. */
#define ENV_COPY_MAX 1024 /* entries: the copy is on the stack (8 KiB), which a vfork child shares */

static long dh_execve(const char *path, char *const argv[], char *const envp[])
{
	const char *view = viewstat_var();
	size_t n = 0;
	bool has = false;
	for (; view != NULL && envp != NULL && envp[n] != NULL && n < ENV_COPY_MAX; n++)
		has |= strncmp(envp[n], "DIEHARD_VIEWDEVS=", 17) == 0;
	if (view != NULL && envp != NULL && !has && n < ENV_COPY_MAX && carries_us_lib(envp)) {
		char *copy[n + 2];
		memcpy(copy, envp, n * sizeof *copy);
		copy[n] = (char *)view;
		copy[n + 1] = NULL;
		return dh_execve_as(path, argv, copy);
	}
	return dh_execve_as(path, argv, envp);
}

static long dh_execve_as(const char *path, char *const argv[], char *const envp[])
{
	uint64_t mark = mark_exec != 0 && carries_us(envp) ? mark_exec : 0;
	long r = os_raw_syscall(SYS_execve, (long)path, (long)argv, (long)envp, (long)mark, 0, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

void exec_start(void)
{
	uint64_t mark = clocks_exec_mark(); /* clocks_start has read DIEHARD_CLOCKS */
	const char *spec = config_getenv("DIEHARD_CLOCKS");
	/* The hook is wanted for the exec marker, or to hand on the views'
	 * devices (viewstat.h). */
	if ((mark == 0 || spec == NULL) && viewstat_var() == NULL)
		return;
	Dl_info info;
	if (dladdr((void *)exec_start, &info) == 0 || info.dli_fname == NULL ||
	    (self_len = strlen(info.dli_fname)) >= sizeof self_path)
		return;
	memcpy(self_path, info.dli_fname, self_len + 1);
	size_t n = spec != NULL ? strlen(spec) : 0;
	if (mark != 0 && spec != NULL && n + 16 <= sizeof clocks) {
		memcpy(clocks, "DIEHARD_CLOCKS=", 15);
		memcpy(clocks + 15, spec, n + 1);
		mark_exec = mark;
	}
	/* libc's execve: movabs rax, dh_execve; jmp rax over its entry. */
	uint8_t *fn = dlsym(RTLD_NEXT, "execve"); /* libc's (kernel.c's is ours) */
	if (fn == NULL || fn[0] != 0xb8 || fn[1] != SYS_execve)
		return; /* not the wrapper we know: execs go unmarked (seen) */
	uintptr_t page = (uintptr_t)fn & ~(uintptr_t)4095;
	size_t span = ((uintptr_t)fn + 12 - page + 4095) & ~(size_t)4095;
	if (mprotect((void *)page, span, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return;
	uint8_t j[12] = { 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0 };
	uintptr_t to = (uintptr_t)dh_execve;
	memcpy(j + 2, &to, sizeof to);
	memcpy(fn, j, sizeof j);
	(void)mprotect((void *)page, span, PROT_READ | PROT_EXEC);
}

int exec_call(const char *path, char *const argv[], char *const envp[])
{
	return (int)dh_execve(path, argv, envp);
}
