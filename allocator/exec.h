/* exec.h — marks this process's execs for diehard's filter (exec.c). */
#ifndef DIEHARD_EXEC_H
#define DIEHARD_EXEC_H

/* Under the fast clock path with zero-stop images (DIEHARD_CLOCKS has
 * exec=): points libc's execve and kernel.c's at the marking wrapper. */
void exec_start(void);

/* execve, with the marker when envp keeps libdiehard (exec_start). */
int exec_call(const char *path, char *const argv[], char *const envp[]);

#endif
