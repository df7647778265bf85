/*
 * notify_floor — the bare cost of one seccomp user-notify round trip on this
 * machine, without diehard.
 *
 *   notify_floor [--sync-wake-up] [--epoll] N
 *
 * Why: under diehard every clock, random-number and open call of a replica
 * stops in the kernel until the supervisor answers it (supervisor/virt/virt.c).
 * The least such a call can cost is one notify round trip: the caller
 * sleeps, the listener wakes, receives, sends, the caller wakes. This
 * program measures that floor, so that bench/virtualize can tell the
 * supervisor's own share of a virtualized call from the kernel's.
 *
 * A forked child sets no_new_privs and installs, with raw seccomp(2) and
 * SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
 * (as diehard's replicas do), a hand-written BPF filter that notifies
 * getppid and allows everything else. It passes the listener to the parent
 * over a socketpair (SCM_RIGHTS), waits for the parent's go, then calls
 * getppid N times, checking each answer, and times the loop with
 * CLOCK_MONOTONIC (read through the vDSO: not notified). The parent answers
 * each notification with its own pid, as the real call would return.
 *
 *   --sync-wake-up  first sets SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP on the
 *                   listener (Linux 6.6; diehard sets it): the kernel then
 *                   wakes each side on the other's CPU instead of an idle one
 *   --epoll         the parent waits in epoll_wait (one epoll fd, the
 *                   listener registered for EPOLLIN) before each receive, as
 *                   diehard's libevent loop does; otherwise it blocks in
 *                   SECCOMP_IOCTL_NOTIF_RECV itself
 *
 * Output: one line on stdout, the figure first:
 *     <µs> µs per call (N getppid calls; parent waits in ...; synchronous wake-ups on|off)
 * Exit status: 0; 1 when a system call failed or an answer was wrong (the
 * message says which); 2 on bad usage.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Debian 12's headers (Linux 6.1) predate the synchronous wake-up flag. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* The child, for the parent's error paths (killed, so it cannot hang). */
static pid_t child_pid = -1;

static void on_sigchld(int signal_number)
{
    (void)signal_number;   /* only there to interrupt a blocking receive */
}

static void parent_fail(const char *what, int err)
{
    if (err != 0)
        fprintf(stderr, "notify_floor: %s: %s\n", what, strerror(err));
    else
        fprintf(stderr, "notify_floor: %s\n", what);
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
    }
    exit(1);
}

static void child_fail(const char *what, int err)
{
    if (err != 0)
        fprintf(stderr, "notify_floor (child): %s: %s\n", what, strerror(err));
    else
        fprintf(stderr, "notify_floor (child): %s\n", what);
    _exit(1);
}

static double now_seconds(void (*fail)(const char *, int))
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        fail("clock_gettime(CLOCK_MONOTONIC)", errno);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the child: filter, listener to the parent, the timed loop */

static void send_fd(int sock, int fd)
{
    char byte = 'L';
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.space, .msg_controllen = sizeof control.space,
    };
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    ssize_t sent;
    do {
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != 1)
        child_fail("sending the listener to the parent (sendmsg)", sent < 0 ? errno : 0);
}

static int install_filter(void)
{
    struct sock_filter insns[] = {
#ifdef NATIVE_ARCH
        /* Another ABI's calls (i386 on x86-64) are allowed as they are. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
#endif
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof insns / sizeof insns[0], .filter = insns };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        child_fail("prctl(PR_SET_NO_NEW_PRIVS)", errno);
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
    if (fd < 0) {
        int err = errno;
        if (err == EINVAL)
            child_fail("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV) "
                       "(Linux 5.19 or later is needed)", err);
        child_fail("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV)", err);
    }
    return (int)fd;
}

static int run_child(int sock, pid_t parent, unsigned long long n, const char *waiting, const char *sync_wake_up)
{
    /* A parent that dies leaves no one to answer: die with it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        child_fail("prctl(PR_SET_PDEATHSIG)", errno);
    if (getppid() != parent)
        child_fail("the parent is already gone", 0);

    int listener = install_filter();
    send_fd(sock, listener);
    if (close(listener) != 0)
        child_fail("close(listener)", errno);

    /* The parent's go: it holds the listener and has set it up. */
    char go;
    ssize_t got;
    do {
        got = read(sock, &go, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 1)
        child_fail("waiting for the parent's go (read)", got < 0 ? errno : 0);

    double start = now_seconds(child_fail);
    for (unsigned long long i = 0; i < n; i++) {
        errno = 0;
        pid_t answer = getppid();
        if (answer != parent) {
            fprintf(stderr, "notify_floor (child): getppid call %llu returned %ld, expected %ld%s%s\n",
                    i + 1, (long)answer, (long)parent, errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
            _exit(1);
        }
    }
    double elapsed = now_seconds(child_fail) - start;

    if (printf("%.3f µs per call (%llu getppid calls; parent waits in %s; synchronous wake-ups %s)\n",
               elapsed * 1e6 / (double)n, n, waiting, sync_wake_up) < 0 ||
        fflush(stdout) != 0)
        child_fail("writing the result", errno);
    return 0;
}

/* ---- the parent: receives the listener, answers every notification */

static int receive_fd(int sock)
{
    char byte;
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.space, .msg_controllen = sizeof control.space,
    };
    ssize_t got;
    do {
        got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0)
        parent_fail("receiving the listener from the child (recvmsg)", errno);
    if (got == 0)
        parent_fail("the child closed the socket before sending its listener (see its message above)", 0);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    if (cmsg == NULL || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS ||
        cmsg->cmsg_len != CMSG_LEN(sizeof(int)) || (msg.msg_flags & MSG_CTRUNC))
        parent_fail("the child's message carries no file descriptor", 0);
    int fd;
    memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
    return fd;
}

/* After an interrupted or failed wait: fails if the child has ended. */
static void check_child(unsigned long long answered)
{
    int status;
    pid_t waited = waitpid(child_pid, &status, WNOHANG);
    if (waited < 0)
        parent_fail("waitpid", errno);
    if (waited == child_pid) {
        char what[160];
        if (WIFSIGNALED(status))
            snprintf(what, sizeof what, "the child was killed by signal %d after %llu answered calls",
                     WTERMSIG(status), answered);
        else
            snprintf(what, sizeof what, "the child exited with status %d after %llu answered calls",
                     WEXITSTATUS(status), answered);
        child_pid = -1;
        parent_fail(what, 0);
    }
}

static void serve(int listener, int epfd, unsigned long long n, pid_t parent)
{
    unsigned long long answered = 0;
    while (answered < n) {
        if (epfd >= 0) {
            struct epoll_event ev;
            int ready = epoll_wait(epfd, &ev, 1, -1);
            if (ready < 0) {
                if (errno != EINTR)
                    parent_fail("epoll_wait", errno);
                check_child(answered);
                continue;
            }
            if (ready == 0)
                continue;
            if (!(ev.events & EPOLLIN)) {
                check_child(answered);
                parent_fail("the listener hung up with calls still expected", 0);
            }
        }
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);   /* the kernel refuses a dirty one */
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
            int err = errno;
            if (err == EINTR || err == ENOENT) {
                /* ENOENT: the caller died, or (Linux 6.6) no process is
                 * left on the filter. */
                check_child(answered);
                if (err == ENOENT)
                    parent_fail("SECCOMP_IOCTL_NOTIF_RECV: the caller is gone", err);
                continue;
            }
            parent_fail("ioctl(SECCOMP_IOCTL_NOTIF_RECV)", err);
        }
        if (req.data.nr != __NR_getppid) {
            char what[80];
            snprintf(what, sizeof what, "notified of system call %d, expected getppid (%d)",
                     req.data.nr, __NR_getppid);
            parent_fail(what, 0);
        }
        struct seccomp_notif_resp resp = { .id = req.id, .val = parent, .error = 0, .flags = 0 };
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0)
            parent_fail("ioctl(SECCOMP_IOCTL_NOTIF_SEND)", errno);
        answered++;
    }
}

static void usage(void)
{
    fputs("usage: notify_floor [--sync-wake-up] [--epoll] N\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    int sync_wake_up = 0, use_epoll = 0;
    const char *count_text = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sync-wake-up") == 0)
            sync_wake_up = 1;
        else if (strcmp(argv[i], "--epoll") == 0)
            use_epoll = 1;
        else if (count_text == NULL && argv[i][0] != '-')
            count_text = argv[i];
        else
            usage();
    }
    if (count_text == NULL)
        usage();
    char *end;
    errno = 0;
    unsigned long long n = strtoull(count_text, &end, 10);
    if (errno != 0 || end == count_text || *end != '\0' || n == 0) {
        fprintf(stderr, "notify_floor: N must be a positive whole number, got '%s'\n", count_text);
        return 2;
    }
    const char *waiting = use_epoll ? "epoll_wait, then SECCOMP_IOCTL_NOTIF_RECV"
                                    : "a blocking SECCOMP_IOCTL_NOTIF_RECV";

    /* The kernel's structures must fit ours (they have not grown since 5.0). */
    struct seccomp_notif_sizes sizes;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
        parent_fail("seccomp(SECCOMP_GET_NOTIF_SIZES) (Linux 5.0 or later is needed)", errno);
    if (sizes.seccomp_notif > sizeof(struct seccomp_notif) ||
        sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp))
        parent_fail("the kernel's notification structures are larger than this program's headers", 0);

    /* A child that dies interrupts a blocking receive (no SA_RESTART). */
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigchld;
    action.sa_flags = SA_NOCLDSTOP;
    if (sigemptyset(&action.sa_mask) != 0 || sigaction(SIGCHLD, &action, NULL) != 0)
        parent_fail("sigaction(SIGCHLD)", errno);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        parent_fail("socketpair", errno);
    pid_t parent = getpid();
    if (fflush(NULL) != 0)
        parent_fail("fflush", errno);
    child_pid = fork();
    if (child_pid < 0)
        parent_fail("fork", errno);
    if (child_pid == 0) {
        child_pid = -1;
        close(sv[0]);
        _exit(run_child(sv[1], parent, n, waiting, sync_wake_up ? "on" : "off"));
    }
    if (close(sv[1]) != 0)
        parent_fail("close", errno);

    int listener = receive_fd(sv[0]);
    if (sync_wake_up &&
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) != 0)
        parent_fail("ioctl(SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) "
                    "(Linux 6.6 or later is needed)", errno);
    int epfd = -1;
    if (use_epoll) {
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0)
            parent_fail("epoll_create1", errno);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = listener };
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, listener, &ev) != 0)
            parent_fail("epoll_ctl(EPOLL_CTL_ADD, listener)", errno);
    }

    ssize_t written;
    do {
        written = write(sv[0], "g", 1);
    } while (written < 0 && errno == EINTR);
    if (written != 1)
        parent_fail("sending the child its go (write)", written < 0 ? errno : 0);

    serve(listener, epfd, n, parent);

    int status;
    pid_t waited;
    do {
        waited = waitpid(child_pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    if (waited != child_pid)
        parent_fail("waitpid", errno);
    child_pid = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char what[80];
        if (WIFSIGNALED(status))
            snprintf(what, sizeof what, "the child was killed by signal %d", WTERMSIG(status));
        else
            snprintf(what, sizeof what, "the child exited with status %d", WEXITSTATUS(status));
        parent_fail(what, 0);
    }
    if ((epfd >= 0 && close(epfd) != 0) || close(listener) != 0 || close(sv[0]) != 0)
        parent_fail("close", errno);
    return 0;
}
