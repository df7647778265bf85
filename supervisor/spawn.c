/* spawn.c — see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"

extern char **environ;

/* What execve would say about path: 0 if it can run it. */
static int check_executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EACCES;
	if (access(path, X_OK) != 0)
		return errno;
	return 0;
}

int spawn_resolve(const char *cmd, char **path)
{
	int err = ENOENT;
	if (cmd[0] == '\0')
		goto fail;
	if (strchr(cmd, '/') != NULL) {
		err = check_executable(cmd);
		if (err == 0 && (*path = strdup(cmd)) != NULL)
			return 0;
		goto fail;
	}
	/* execvp: search PATH (default as glibc's), remember EACCES if nothing
	 * runnable is found. */
	const char *search = getenv("PATH");
	if (search == NULL)
		search = "/bin:/usr/bin";
	bool saw_eacces = false;
	for (const char *p = search;; p++) {
		const char *end = strchrnul(p, ':');
		const char *dir = end == p ? "." : p;
		int dlen = end == p ? 1 : (int)(end - p);
		char *candidate;
		if (asprintf(&candidate, "%.*s/%s", dlen, dir, cmd) < 0)
			fatal(EXIT_INTERNAL, "out of memory");
		int e = check_executable(candidate);
		if (e == 0) {
			*path = candidate;
			return 0;
		}
		free(candidate);
		saw_eacces |= e == EACCES;
		if (*end == '\0')
			break;
		p = end;
	}
	err = saw_eacces ? EACCES : ENOENT;
fail:
	log_warn("%s: %s", cmd, strerror(err));
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

static char *format_var(const char *name, const char *value)
{
	char *s;
	if (asprintf(&s, "%s=%s", name, value) < 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return s;
}

char **spawn_environment(const char *allocator, const uint64_t seed[2])
{
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **envp = calloc(n + 4, sizeof *envp);
	if (envp == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	size_t out = 0;
	const char *preload = NULL;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0) {
			preload = environ[i] + 11;
			continue;
		}
		if (strncmp(environ[i], "DIEHARD_SEED=", 13) == 0 || strncmp(environ[i], "DIEHARD_FILL=", 13) == 0)
			continue;
		if ((envp[out++] = strdup(environ[i])) == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
	}
	char seedhex[33];
	snprintf(seedhex, sizeof seedhex, "%016" PRIx64 "%016" PRIx64, seed[1], seed[0]);
	envp[out++] = format_var("DIEHARD_SEED", seedhex);
	envp[out++] = format_var("DIEHARD_FILL", "random");
	if (preload != NULL && preload[0] != '\0') {
		char *both;
		if (asprintf(&both, "LD_PRELOAD=%s:%s", allocator, preload) < 0)
			fatal(EXIT_INTERNAL, "out of memory");
		envp[out++] = both;
	} else {
		envp[out++] = format_var("LD_PRELOAD", allocator);
	}
	envp[out] = NULL;
	return envp;
}

void spawn_environment_free(char **envp)
{
	for (char **e = envp; *e != NULL; e++)
		free(*e);
	free(envp);
}

/* In the child: never returns. Reports an exec failure's errno through
 * report_fd (close-on-exec, so a successful exec closes it silently). */
static _Noreturn void child(const struct spawn_request *r, pid_t parent, int report_fd)
{
	int err;
	/* Die with the supervisor: otherwise a replica outlives it, and its
	 * virtualized system calls would fail forever. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
		err = errno ? errno : ESRCH;
		goto fail;
	}
	/* Its own process group: a terminal's ^C reaches diehard alone, which
	 * forwards it, so every replica gets each signal exactly once. */
	(void)setpgid(0, 0);
	for (int i = 0; i < 3; i++)
		if (dup2(r->fds[i], i) != i) {
			err = errno;
			goto fail;
		}
	/* Only fds 0-2 are inherited. */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != report_fd)
			(void)close(fd);
	(void)close_range(1024, ~0U, 0);
	/* The supervisor ignores SIGPIPE for itself; the program gets what
	 * diehard was started with. */
	if (!r->pipe_ignored)
		signal(SIGPIPE, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(r->path, r->argv, r->envp);
	err = errno;
fail:
	(void)!write(report_fd, &err, sizeof err);
	_exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

pid_t spawn_replica(const struct spawn_request *r, int *exec_errno)
{
	int report[2];
	if (pipe2(report, O_CLOEXEC) != 0)
		return -1;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int saved = errno;
		close(report[0]);
		close(report[1]);
		errno = saved;
		return -1;
	}
	if (pid == 0) {
		close(report[0]);
		child(r, parent, report[1]);
	}
	close(report[1]);
	/* Also here, so the group exists before we might signal it (the child
	 * may not have run yet); EACCES once it has exec'ed is harmless. */
	(void)setpgid(pid, pid);
	int err = 0;
	ssize_t n;
	do
		n = read(report[0], &err, sizeof err);
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n == (ssize_t)sizeof err) {
		*exec_errno = err;
		(void)waitpid(pid, NULL, 0);
		errno = err;
		return -1;
	}
	*exec_errno = 0;
	return pid;
}
