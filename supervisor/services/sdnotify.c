/* sdnotify.c — see sdnotify.h. A datagram socket of our own, kept open:
 * the watchdog pings every few seconds for months. */
#include "sdnotify.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "svcenv.h"

static int sock = -1;
static bool complained;

bool sdnotify_send(const char *text)
{
	const struct svcenv *e = svcenv_get();
	if (!e->notify)
		return false;
	if (sock < 0 && (sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		if (!complained)
			log_warn("cannot make a socket to notify the service manager: %s", strerror(errno));
		complained = true;
		return false;
	}
	struct iovec iov = { (void *)text, strlen(text) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr msg = { .msg_name = (void *)&e->addr, .msg_namelen = e->addr_len, .msg_iov = &iov,
			      .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
	struct ucred cred = { .pid = getpid(), .uid = geteuid(), .gid = getegid() };
	memcpy(CMSG_DATA(c), &cred, sizeof cred);
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)iov.iov_len) {
		complained = false;
		return true;
	}
	if (!complained)
		log_warn("cannot notify the service manager (NOTIFY_SOCKET): %s", n < 0 ? strerror(errno) : "short send");
	complained = true;
	return false;
}
