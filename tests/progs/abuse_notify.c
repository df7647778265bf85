/*
 * abuse_notify: a replica that tries to make diehard ready for its siblings,
 * for the abuse tests (tests/abuse_sockets.bats).
 *
 *   abuse_notify DIR K HONEST
 *
 * The first HONEST replicas to create DIR/honest.N (mkdir is atomic) are
 * honest: each says READY=1 on its own NOTIFY_SOCKET, from its own process.
 * The others attack: 20 times over, to every other socket in the directory
 * of its NOTIFY_SOCKET (its siblings'), each sends READY=1
 *   - from a child that exits at once (reaped before diehard may read it),
 *   - from a grandchild whose parent has exited (an orphan),
 *   - from itself,
 *   - from itself with credentials naming pid 1 (SCM_CREDENTIALS; the kernel
 *     lets only a process with CAP_SYS_ADMIN name another pid),
 * then marks itself done (DIR/done.N). Every replica then waits until the
 * K - HONEST attackers are done (15 s at most), prints "ok" (so that all
 * agree) and exits 0. What each attacker sent is counted in
 * DIR/sent.N ("sent S"), for the test to compare with diehard's count.
 */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *dir;

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Sends text to the socket at path; with creds_pid, with credentials naming
 * it. 0, or -1 (errno). */
static int send_to(const char *path, const char *text, pid_t creds_pid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof a.sun_path)
		return -1;
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct iovec iov = { (void *)text, strlen(text) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	struct msghdr m = { .msg_name = &a, .msg_namelen = sizeof a, .msg_iov = &iov, .msg_iovlen = 1 };
	if (creds_pid > 0) {
		memset(&ctl, 0, sizeof ctl);
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof ctl.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
		struct ucred u = { .pid = creds_pid, .uid = getuid(), .gid = getgid() };
		memcpy(CMSG_DATA(c), &u, sizeof u);
	}
	int r = sendmsg(fd, &m, 0) < 0 ? -1 : 0;
	close(fd);
	return r;
}

/* The first free DIR/NAME.N, made: its N. */
static int take(const char *name)
{
	char p[4096];
	for (int i = 0; i < 64; i++) {
		snprintf(p, sizeof p, "%s/%s.%d", dir, name, i);
		if (mkdir(p, 0777) == 0)
			return i;
	}
	return -1;
}

static int count(const char *prefix)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (d == NULL)
		return 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static int attack(const char *own)
{
	char sockdir[4096];
	snprintf(sockdir, sizeof sockdir, "%s", own);
	char *slash = strrchr(sockdir, '/');
	if (slash == NULL)
		return 0;
	*slash = '\0';
	int sent = 0;
	for (int round = 0; round < 20; round++) {
		DIR *d = opendir(sockdir);
		if (d == NULL) {
			fprintf(stderr, "abuse_notify: %s: %s\n", sockdir, strerror(errno));
			return sent;
		}
		for (struct dirent *e; (e = readdir(d)) != NULL;) {
			size_t len = strlen(e->d_name);
			char path[4096 + 256];
			snprintf(path, sizeof path, "%s/%s", sockdir, e->d_name);
			if (len < 5 || strcmp(e->d_name + len - 5, ".sock") != 0 || strcmp(path, own) == 0)
				continue;
			pid_t c = fork();
			if (c == 0)
				_exit(send_to(path, "READY=1", 0) == 0 ? 0 : 1);
			int st;
			if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0)
				sent++;
			c = fork();
			if (c == 0) {
				if (fork() == 0) {
					pause_ms(5); /* its parent is gone by now */
					_exit(send_to(path, "READY=1", 0) == 0 ? 0 : 1);
				}
				_exit(0);
			}
			if (c > 0)
				(void)waitpid(c, &st, 0);
			sent += send_to(path, "READY=1", 0) == 0;
			sent += send_to(path, "READY=1", 1) == 0;
		}
		closedir(d);
		pause_ms(20);
	}
	return sent;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: abuse_notify DIR K HONEST\n");
		return 2;
	}
	dir = argv[1];
	int k = atoi(argv[2]), honest = atoi(argv[3]);
	const char *own = getenv("NOTIFY_SOCKET");
	if (own == NULL || own[0] != '/') {
		fprintf(stderr, "abuse_notify: no NOTIFY_SOCKET path\n");
		return 2;
	}
	int me = take("honest");
	if (me >= 0 && me < honest) {
		if (send_to(own, "READY=1", 0) != 0)
			fprintf(stderr, "abuse_notify: %s: %s\n", own, strerror(errno));
	} else {
		int sent = attack(own);
		int n = take("done");
		char p[4096];
		snprintf(p, sizeof p, "%s/sent.%d", dir, n);
		FILE *f = fopen(p, "w");
		if (f != NULL) {
			fprintf(f, "sent %d\n", sent);
			fclose(f);
		}
	}
	for (int i = 0; i < 1500 && count("done.") < k - honest; i++)
		pause_ms(10);
	printf("ok\n");
	return 0;
}
