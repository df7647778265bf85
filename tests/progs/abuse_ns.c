/*
 * abuse_ns: a replica reaching for what its namespaces should keep from
 * it, for tests/abuse_namespaces.bats. Each mode prints lines that are the
 * same in every replica (the vote must agree), and exits 0.
 *
 *   abuse_ns tty [PTY]     its terminal: descriptors it was given that are
 *                          terminals, /dev/tty, its controlling terminal
 *                          (the tty field of /proc/self/stat), whether it
 *                          leads a session of its own, and (PTY) opening
 *                          the terminal diehard was started from by name
 *   abuse_ns signal PGID   SIGUSR1 to the process group PGID (diehard's)
 *                          and to its own group (0): what the kernel
 *                          answered
 *   abuse_ns proc PID      as root: unmount /proc (plain, then lazily),
 *                          mount a new proc, then count the processes its
 *                          /proc shows and write a line to
 *                          /proc/PID/fd/1 (PID: diehard's, outside)
 *   abuse_ns ipc KEY NAME  SysV shared memory, message queue and
 *                          semaphores of key KEY and the POSIX message
 *                          queue NAME (the host's), then objects of its
 *                          own made exclusively with key KEY + 1 (the same
 *                          in every replica: a second one fails if they
 *                          share) and the SysV objects its /proc shows
 *   abuse_ns shm FILE NEW  /dev/shm/FILE (the host's) looked up, then
 *                          /dev/shm/NEW made exclusively (the same in every
 *                          replica), and /dev/shm's mode and mount options
 *
 * And for the test itself, on the host:
 *   abuse_ns make KEY NAME    the SysV objects of key KEY and the POSIX
 *                             message queue NAME, as the host's
 *   abuse_ns remove KEY NAME  removes those, and any a replica left with
 *                             KEY + 1 and NAME-own outside its namespace
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

/* "ok" or the errno's name as strerror says it. */
static const char *result(int rc)
{
	return rc >= 0 ? "ok" : strerror(errno);
}

/* The tty_nr field (7th) of /proc/self/stat: 0 without a controlling
 * terminal. -1 if it cannot be read. */
static long tty_nr(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command's name may hold spaces: fields count from its ')'. */
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	char state;
	int ppid, pgrp, session;
	long tty;
	if (sscanf(p + 1, " %c %d %d %d %ld", &state, &ppid, &pgrp, &session, &tty) != 5)
		return -1;
	return tty;
}

static int do_tty(const char *pty)
{
	/* What it was given: no descriptor of a terminal (diehard's 0-2 may
	 * be one; the replica's are pipes). */
	int ttys = 0;
	for (int i = 0; i < 1024; i++)
		ttys += isatty(i);
	printf("descriptors of a terminal: %d\n", ttys);
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY);
	printf("open /dev/tty: %s\n", result(fd));
	printf("controlling terminal: %s\n", tty_nr() == 0 ? "none" : "yes");
	pid_t sid = getsid(0);
	printf("session: %s\n", sid == getpid() ? "its own" : "another's");
	printf("process group: %s\n", getpgrp() == getpid() ? "its own" : "another's");
	if (pty != NULL) {
		fd = open(pty, O_WRONLY | O_NOCTTY);
		printf("open diehard's terminal by name: %s\n", result(fd));
		if (fd >= 0) {
			static const char line[] = "UNVOTED LINE ON THE TERMINAL\n";
			ssize_t w = write(fd, line, sizeof line - 1);
			printf("write to it: %s\n", result(w >= 0 ? 0 : -1));
		}
	}
	return 0;
}

static int do_signal(pid_t pgid)
{
	printf("kill(-PGID, SIGUSR1): %s\n", result(kill(-pgid, SIGUSR1)));
	/* Its own group: nothing but itself (the signal is ignored here). */
	signal(SIGUSR1, SIG_IGN);
	printf("kill(0, SIGUSR1): %s\n", result(kill(0, SIGUSR1)));
	return 0;
}

/* Numeric entries in /proc. */
static int processes(void)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}

static int do_proc(const char *pid)
{
	printf("umount /proc: %s\n", result(umount2("/proc", 0)));
	printf("umount -l /proc: %s\n", result(umount2("/proc", MNT_DETACH)));
	char dir[] = "/tmp/abuse_ns.XXXXXX";
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	int rc = mount("proc", dir, "proc", 0, NULL);
	printf("mount a new proc: %s\n", result(rc));
	if (rc == 0)
		(void)umount2(dir, MNT_DETACH);
	rmdir(dir);
	/* Its init and itself (no child is running): at most 2. */
	int n = processes();
	printf("processes in /proc: %s\n", n >= 1 && n <= 2 ? "only the replica's" : "MORE");
	char path[64];
	snprintf(path, sizeof path, "/proc/%s/fd/1", pid);
	int fd = open(path, O_WRONLY | O_APPEND);
	printf("open diehard's stdout: %s\n", fd >= 0 ? "OPEN" : "failed");
	if (fd >= 0) {
		static const char line[] = "UNVOTED LINE\n";
		(void)!write(fd, line, sizeof line - 1);
	}
	return 0;
}

/* The SysV objects its /proc shows in FILE (/proc/sysvipc/shm...): lines
 * but the heading. */
static int sysv_seen(const char *file)
{
	FILE *f = fopen(file, "re");
	if (f == NULL)
		return -1;
	int n = -1;
	char line[512];
	while (fgets(line, sizeof line, f) != NULL)
		n++;
	fclose(f);
	return n;
}

static int do_ipc(const char *keys, const char *name)
{
	key_t key = (key_t)strtol(keys, NULL, 0);
	printf("host's shm: %s\n", result(shmget(key, 0, 0)));
	printf("host's msg: %s\n", result(msgget(key, 0)));
	printf("host's sem: %s\n", result(semget(key, 0, 0)));
	mqd_t q = mq_open(name, O_RDONLY);
	printf("host's mqueue: %s\n", result(q == (mqd_t)-1 ? -1 : 0));
	printf("SysV objects seen before: %d %d %d\n", sysv_seen("/proc/sysvipc/shm"), sysv_seen("/proc/sysvipc/msg"),
	       sysv_seen("/proc/sysvipc/sem"));
	/* Left for the namespace's end: a sibling trying after us must still
	 * find them if we shared one. */
	key_t own = key + 1;
	printf("own shm: %s\n", result(shmget(own, 4096, IPC_CREAT | IPC_EXCL | 0600)));
	printf("own msg: %s\n", result(msgget(own, IPC_CREAT | IPC_EXCL | 0600)));
	printf("own sem: %s\n", result(semget(own, 1, IPC_CREAT | IPC_EXCL | 0600)));
	char own_name[128];
	snprintf(own_name, sizeof own_name, "%s-own", name);
	struct mq_attr attr = { .mq_maxmsg = 1, .mq_msgsize = 16 };
	q = mq_open(own_name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
	printf("own mqueue: %s\n", result(q == (mqd_t)-1 ? -1 : 0));
	/* Time for the siblings to try theirs while ours stand. */
	usleep(300 * 1000);
	return 0;
}

/* The mount options of the mount at path in /proc/self/mountinfo (its
 * sixth field), into opts. */
static void mount_opts(const char *path, char *opts, size_t size)
{
	snprintf(opts, size, "?");
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return;
	char line[1024], mnt[512], o[256];
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "%*s %*s %*s %*s %511s %255s", mnt, o) == 2 && strcmp(mnt, path) == 0)
			snprintf(opts, size, "%s", o); /* the last (topmost) wins */
	fclose(f);
}

static int do_shm(const char *file, const char *made)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof path, "/dev/shm/%s", file);
	printf("host's file: %s\n", stat(path, &st) == 0 ? "SEEN" : strerror(errno));
	snprintf(path, sizeof path, "/dev/shm/%s", made);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	printf("own file: %s\n", result(fd));
	char opts[256];
	mount_opts("/dev/shm", opts, sizeof opts);
	printf("/dev/shm: mode %o, %s, %s\n", stat("/dev/shm", &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0u,
	       strstr(opts, "nosuid") != NULL ? "nosuid" : "SUID", strstr(opts, "nodev") != NULL ? "nodev" : "DEV");
	usleep(300 * 1000);
	return 0;
}

static int do_make(const char *keys, const char *name)
{
	key_t key = (key_t)strtol(keys, NULL, 0);
	mqd_t q = mq_open(name, O_RDWR | O_CREAT, 0600, NULL);
	if (shmget(key, 4096, IPC_CREAT | 0600) < 0 || msgget(key, IPC_CREAT | 0600) < 0 ||
	    semget(key, 1, IPC_CREAT | 0600) < 0 || q == (mqd_t)-1) {
		perror("abuse_ns make");
		return 1;
	}
	return 0;
}

static int do_remove(const char *keys, const char *name)
{
	key_t key = (key_t)strtol(keys, NULL, 0);
	char own_name[128];
	snprintf(own_name, sizeof own_name, "%s-own", name);
	int left = 0;
	for (key_t k = key; k <= key + 1; k++) {
		int shm = shmget(k, 0, 0), msg = msgget(k, 0), sem = semget(k, 0, 0);
		if (shm >= 0)
			(void)shmctl(shm, IPC_RMID, NULL);
		if (msg >= 0)
			(void)msgctl(msg, IPC_RMID, NULL);
		if (sem >= 0)
			(void)semctl(sem, 0, IPC_RMID);
		if (k != key)
			left += (shm >= 0) + (msg >= 0) + (sem >= 0);
	}
	(void)mq_unlink(name);
	if (mq_unlink(own_name) == 0)
		left++;
	/* A replica's objects found here reached the host. */
	printf("replicas' objects on the host: %d\n", left);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "tty") == 0)
		return do_tty(argc > 2 ? argv[2] : NULL);
	if (argc == 3 && strcmp(argv[1], "signal") == 0)
		return do_signal((pid_t)atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "proc") == 0)
		return do_proc(argv[2]);
	if (argc == 4 && strcmp(argv[1], "ipc") == 0)
		return do_ipc(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "shm") == 0)
		return do_shm(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "make") == 0)
		return do_make(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "remove") == 0)
		return do_remove(argv[2], argv[3]);
	fprintf(stderr, "usage: abuse_ns tty [PTY] | signal PGID | proc PID | ipc KEY NAME | shm FILE NEW | make KEY NAME | "
			"remove KEY NAME\n");
	return 2;
}
