/* netcalls.c — see netcalls.h.
 *
 * A listen is taken over rather than watched: were it left to the kernel,
 * the supervisor could look at the socket only after the program had
 * started to accept, and a listen that failed would have to be told from
 * one that did. Performing it on our own reference (the same open socket,
 * so the replica's fd listens) gives both the result and the address in one
 * round trip. The reference comes from pidfd_getfd on a pidfd of the
 * calling thread (Linux 6.9, PIDFD_THREAD), or before that of its thread
 * group (Tgid in /proc/TID/status), checked to be the caller's file: a
 * thread may have unshared its fd table. As for every notification
 * (virt.c), the id is checked after the caller was read from and before
 * anything is done or said: a tid whose thread died could name another
 * process by then.
 *
 * A connect's destination is read from the caller's memory (at most a
 * sockaddr_storage: the kernel refuses longer ones). Nothing is done for a
 * destination inside the namespace, nor for other families (unix sockets),
 * which cost the read alone. */
#include "netcalls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "net.h"
#include "netaddr.h"
#include "dgram.h"
#include "outbound.h"
#include "remote.h"
#include "report.h"
#include "sup.h"

/* Linux 6.9: a pidfd of a thread, not only of a thread-group leader. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

struct netcalls {
	struct sup *S;
	bool blind_said;  /* a listen we could not see into */
};

struct netcalls *netcalls_new(struct sup *S)
{
	struct netcalls *N = calloc(1, sizeof *N);
	if (N == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	N->S = S;
	return N;
}

static bool still_waiting(int listener, uint64_t id)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static unsigned replica_id(const struct netcalls *N, unsigned slot)
{
	return N->S->r[slot].id;
}

/* ---- listen ---- */

/* Why a listen could not be seen into: said once a run. */
static void blind(struct netcalls *N, unsigned slot, const char *why)
{
	if (N->blind_said)
		return;
	N->blind_said = true;
	log_warn("replica %u listens, but diehard cannot learn where (%s): clients cannot reach its server through "
		 "diehard (said once)", replica_id(N, slot), why);
}

/* Whether ours is the file behind path, /proc/TID/fd/FD: the fd in thread
 * TID's own table. */
static bool same_file(const char *path, int ours)
{
	struct stat theirs, mine;
	return stat(path, &theirs) == 0 && fstat(ours, &mine) == 0 && theirs.st_dev == mine.st_dev &&
	       theirs.st_ino == mine.st_ino;
}

/* Our own reference to the file behind fd in thread tid, or -1 with errno:
 * ESRCH or ENOENT when the thread is gone, EBADF when fd is not open,
 * EPERM when we may not (the ptrace rules), EXDEV when an older kernel
 * cannot reach the thread's own fd table (it unshared it, or its group's
 * leader exited). */
static int take_fd(pid_t tid, int fd)
{
	bool group = false;
	int pidfd = pidfd_open(tid, PIDFD_THREAD);
	if (pidfd < 0 && errno == EINVAL) {
		pid_t tgid = remote_thread_group(tid);
		if (tgid < 0)
			return -1;
		group = tgid != tid;
		pidfd = pidfd_open(tgid, 0);
	}
	if (pidfd < 0)
		return -1;
	int ours = pidfd_getfd(pidfd, fd, 0);
	int err = errno;
	close(pidfd);
	if (group) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
		if (ours >= 0 && !same_file(path, ours)) {
			close(ours);
			ours = -1;
			err = EXDEV;
		} else if (ours < 0 && err == EBADF && access(path, F_OK) == 0) {
			err = EXDEV; /* open in the thread's table, not the group's */
		}
	}
	errno = err;
	return ours;
}

static bool sockopt_int(int fd, int level, int name, int *v)
{
	socklen_t len = sizeof *v;
	return getsockopt(fd, level, name, v, &len) == 0 && len == sizeof *v;
}

/* A listening socket of TCP, whose connections the proxy can make. */
static bool tcp(int fd, int *domain)
{
	int type, proto;
	return sockopt_int(fd, SOL_SOCKET, SO_DOMAIN, domain) && (*domain == AF_INET || *domain == AF_INET6) &&
	       sockopt_int(fd, SOL_SOCKET, SO_TYPE, &type) && type == SOCK_STREAM &&
	       sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL, &proto) && (proto == IPPROTO_TCP || proto == IPPROTO_MPTCP);
}

/* The backlog a replica's listening socket gets, whatever it asked for
 * (the kernel caps it at the namespace's somaxconn: 4096 by default since
 * Linux 5.4, 128 before). Its
 * only client is diehard's proxy, which opens a connection to every
 * replica as a client connects: a replica that falls behind (descheduled,
 * or slower by its seed) has a queue of them. Past its own backlog (5 for
 * python's socketserver) the kernel drops the newest, their clients
 * retransmit, and it accepts them in another order than its siblings did:
 * its threads' numbers then name other requests, and per-thread clock
 * matching (take.c) hands them another request's time (measured: in
 * tests/tcp.bats's http.server runs, each `Date` that differed, unless the
 * odd replica had started listening late (net.c), came with
 * ListenOverflows in its namespace). The clients' own backlog is
 * diehard's listener's. */
#define REPLICA_BACKLOG 4096

/* listen(2) on ours, the caller's socket, for the caller. */
static enum netcall listen_on(struct netcalls *N, unsigned slot, int ours, int domain, int backlog,
			      struct seccomp_notif_resp *resp)
{
	if (listen(ours, backlog > REPLICA_BACKLOG ? backlog : REPLICA_BACKLOG) != 0) {
		resp->error = -errno;
		return NETCALL_ANSWER;
	}
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int v6only = 0;
	memset(&ss, 0, sizeof ss);
	if (getsockname(ours, (struct sockaddr *)&ss, &len) != 0 ||
	    (domain == AF_INET6 && !sockopt_int(ours, IPPROTO_IPV6, IPV6_V6ONLY, &v6only))) {
		char why[96];
		snprintf(why, sizeof why, "its socket's address: %s", strerror(errno));
		blind(N, slot, why);
		return NETCALL_ANSWER; /* it listens all the same */
	}
	if (len > sizeof ss)
		len = sizeof ss; /* cut (never for AF_INET, AF_INET6) */
	char text[NETADDR_TEXT];
	if (netaddr_format(&ss, len, text, sizeof text))
		log_event("replica %u listens on %s%s", replica_id(N, slot), text,
			  domain == AF_INET6 && !v6only ? " (IPv4 too)" : "");
	net_replica_listens(N->S->net, slot, (const struct sockaddr *)&ss, len, v6only != 0, ours);
	return NETCALL_ANSWER;
}

static enum netcall on_listen(struct netcalls *N, int listener, unsigned slot, const struct seccomp_notif *req,
			      struct seccomp_notif_resp *resp)
{
	if (N->S->net == NULL)
		return NETCALL_CONTINUE; /* no proxy to tell */
	int fd = (int)(int32_t)req->data.args[0];
	int backlog = (int)(int32_t)req->data.args[1];
	int ours = take_fd((pid_t)req->pid, fd);
	if (ours < 0) {
		/* Gone, or not an fd: the kernel says what it would. */
		int err = errno;
		if (err == ESRCH || err == ENOENT || err == EBADF)
			return NETCALL_CONTINUE;
		/* Nothing is said of a tid that may name another process now. */
		if (!still_waiting(listener, req->id))
			return NETCALL_DROP;
		char why[96];
		if (err == EXDEV)
			snprintf(why, sizeof why, "its thread's descriptors are out of reach before Linux 6.9");
		else if (err == EPERM || err == EACCES)
			snprintf(why, sizeof why, "pidfd_getfd: %s: a non-dumpable program, or the ptrace rules",
				 strerror(err));
		else
			snprintf(why, sizeof why, "pidfd_getfd: %s", strerror(err));
		blind(N, slot, why);
		return NETCALL_CONTINUE;
	}
	enum netcall a = NETCALL_CONTINUE;
	int domain;
	if (!still_waiting(listener, req->id))
		a = NETCALL_DROP;
	else if (tcp(ours, &domain))
		a = listen_on(N, slot, ours, domain, backlog, resp);
	close(ours);
	return a;
}

/* ---- connect, bind, sendto ---- */

/* The address of req's arguments at (pointer) and at + 1 (its length),
 * read from the caller into ss (zeroed past it), its length in *len: at
 * most a sockaddr_storage, for the kernel refuses what is too long
 * (EINVAL) or unreadable (EFAULT); false when there is none to judge (no
 * proxy, none given, or what we may not read: EPERM). */
static bool call_addr(const struct netcalls *N, const struct seccomp_notif *req, int at,
		      struct sockaddr_storage *ss, int *len)
{
	uint64_t addr = req->data.args[at];
	*len = (int)(int32_t)req->data.args[at + 1];
	if (N->S->net == NULL || addr == 0 || *len < (int)sizeof(sa_family_t) || (size_t)*len > sizeof *ss)
		return false;
	memset(ss, 0, sizeof *ss);
	return remote_read_all((pid_t)req->pid, addr, ss, (size_t)*len) == 0;
}

/* An unconnected socket of TCP whose connect to ss the kernel would make:
 * a second connect on one connected or connecting is the kernel's to
 * answer (EISCONN, EALREADY), and so is an address of another family
 * (EAFNOSUPPORT) or an IPv4-mapped one on a v6-only socket (ENETUNREACH). */
static bool tcp_connectable(int fd, const struct sockaddr_storage *ss)
{
	int domain, v6only = 0;
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	if (!tcp(fd, &domain) || domain != ss->ss_family ||
	    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_state != TCP_CLOSE)
		return false;
	if (domain == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)ss)->sin6_addr) &&
	    (!sockopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only) || v6only != 0))
		return false;
	return true;
}

/* A UDP socket whose datagrams to ss the kernel would send (the family
 * its own; an IPv4-mapped address on a socket not v6-only). */
static bool udp_for(int fd, const struct sockaddr_storage *ss)
{
	int domain, type, proto, v6only = 0;
	if (!sockopt_int(fd, SOL_SOCKET, SO_DOMAIN, &domain) || domain != ss->ss_family ||
	    !sockopt_int(fd, SOL_SOCKET, SO_TYPE, &type) || type != SOCK_DGRAM ||
	    !sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL, &proto) || proto != IPPROTO_UDP)
		return false;
	if (domain == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)ss)->sin6_addr) &&
	    (!sockopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only) || v6only != 0))
		return false;
	return true;
}

/* A UDP socket's flow to ss starts (dgram.h): the call goes on, unless
 * diehard cannot serve the destination for a reason the program is told. */
static enum netcall datagrams(struct netcalls *N, unsigned slot, int ours, const struct sockaddr_storage *ss,
			      socklen_t len, struct seccomp_notif_resp *resp)
{
	int err = 0;
	if (!dgram_flow(N->S->net, slot, ours, (const struct sockaddr *)ss, len, &err) && err != 0) {
		resp->error = -err;
		return NETCALL_ANSWER;
	}
	return NETCALL_CONTINUE;
}

static bool unspecified(const struct sockaddr_storage *ss)
{
	static const unsigned char zero[16];
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	const unsigned char *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
	static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
	return memcmp(a, zero, 16) == 0 || (memcmp(a, mapped, 12) == 0 && memcmp(a + 12, zero, 4) == 0);
}

/* Whether path, resolved in thread tid's root (its view of the file
 * system: no magic links, no way out of its root), is the host's socket
 * at the same path (the same inode: a socket file in a view's lower
 * layer, or an unviewed one). Not so (the replica's own socket, in its
 * view's upper layer; a path that leads elsewhere in its view): false,
 * and the kernel decides. */
static bool host_socket(pid_t tid, const char *path)
{
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root", (int)tid);
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return false;
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof how);
	close(rfd);
	if (fd < 0)
		return false;
	struct stat in, out;
	bool ok = fstat(fd, &in) == 0 && S_ISSOCK(in.st_mode) && stat(path, &out) == 0 && S_ISSOCK(out.st_mode) &&
		  in.st_ino == out.st_ino;
	close(fd);
	return ok;
}

/* A unix stream socket's connect to an absolute path outside the
 * replica's own servers: made once, for a quorum (outbound.h). Abstract
 * names are the namespace's own; relative paths and datagram sockets go
 * on in the kernel, unvoted. */
static enum netcall unix_connect(struct netcalls *N, int listener, unsigned slot, uint64_t gen,
				 const struct seccomp_notif *req, struct seccomp_notif_resp *resp,
				 struct sockaddr_storage *ss, socklen_t len)
{
	struct sockaddr_un *u = (struct sockaddr_un *)ss;
	int fd = (int)(int32_t)req->data.args[0];
	/* The program's path, NUL-terminated where its length ends (a path
	 * of all 108 bytes has none of its own: the storage has room). */
	((char *)ss)[len < sizeof *ss ? len : sizeof *ss - 1] = '\0';
	if (len <= offsetof(struct sockaddr_un, sun_path) || u->sun_path[0] != '/' ||
	    !host_socket((pid_t)req->pid, u->sun_path))
		return NETCALL_CONTINUE;
	/* diehard's own sockets (its control socket, a notify socket) are
	 * never reached through diehard: the kernel connects the replica
	 * itself, and they judge it as a replica's (control.c refuses it). */
	if (net_own_socket(u->sun_path))
		return NETCALL_CONTINUE;
	int ours = take_fd((pid_t)req->pid, fd);
	if (ours < 0)
		return NETCALL_CONTINUE;
	int type, accepting, domain;
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	if (!still_waiting(listener, req->id)) {
		close(ours);
		return NETCALL_DROP;
	}
	if (!sockopt_int(ours, SOL_SOCKET, SO_DOMAIN, &domain) || domain != AF_UNIX ||
	    !sockopt_int(ours, SOL_SOCKET, SO_TYPE, &type) || (type != SOCK_STREAM && type != SOCK_DGRAM) ||
	    !sockopt_int(ours, SOL_SOCKET, SO_ACCEPTCONN, &accepting) || accepting ||
	    getpeername(ours, (struct sockaddr *)&peer, &plen) == 0 || errno != ENOTCONN) {
		close(ours);
		return NETCALL_CONTINUE;
	}
	if (type == SOCK_DGRAM) {
		int err = dgram_unix(N->S->net, slot, gen, req->id, ours, (const struct sockaddr *)ss, len);
		if (err == 0)
			return NETCALL_DROP; /* answered */
		resp->error = -err;
		return NETCALL_ANSWER;
	}
	int err = 0;
	switch (outbound_connect(N->S->net, slot, gen, req->id, ours, (const struct sockaddr *)ss, len, &err)) {
	case OUT_HELD: return NETCALL_DROP;
	case OUT_FAIL: resp->error = -err; return NETCALL_ANSWER;
	case OUT_CONTINUE: break;
	}
	return NETCALL_CONTINUE;
}

static enum netcall on_connect(struct netcalls *N, int listener, unsigned slot, uint64_t gen,
			       const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	int fd = (int)(int32_t)req->data.args[0];
	struct sockaddr_storage ss;
	int len;
	if (!call_addr(N, req, 1, &ss, &len))
		return NETCALL_CONTINUE;
	if (ss.ss_family == AF_UNIX)
		return unix_connect(N, listener, slot, gen, req, resp, &ss, (socklen_t)len);
	enum netaddr_kind kind = netaddr_classify(&ss, (size_t)len);
	/* Other families; the unspecified address (Linux
	 * connects to the namespace itself); the replica's own listening
	 * port on its loopback: its own business. */
	if (kind == NETADDR_OTHER || unspecified(&ss) ||
	    ((kind == NETADDR_LOCAL || outbound_is_host(N->S->net, (const struct sockaddr *)&ss)) &&
	     net_listens_port(N->S->net, slot, (const struct sockaddr *)&ss)))
		return NETCALL_CONTINUE;
	int ours = take_fd((pid_t)req->pid, fd);
	if (ours < 0)
		return NETCALL_CONTINUE; /* gone, not an fd, or out of reach: the kernel answers */
	if (!still_waiting(listener, req->id)) {
		close(ours);
		return NETCALL_DROP;
	}
	if (udp_for(ours, &ss))
		return datagrams(N, slot, ours, &ss, (socklen_t)len, resp);
	if (!tcp_connectable(ours, &ss)) {
		close(ours);
		return NETCALL_CONTINUE;
	}
	int err = 0;
	switch (outbound_connect(N->S->net, slot, gen, req->id, ours, (const struct sockaddr *)&ss, (socklen_t)len,
				 &err)) {
	case OUT_HELD: return NETCALL_DROP;
	case OUT_FAIL: resp->error = -err; return NETCALL_ANSWER;
	case OUT_CONTINUE: break;
	}
	return NETCALL_CONTINUE;
}

/* Whether thread tid holds CAP_NET_BIND_SERVICE (its effective set, in
 * its own user namespace, which owns the replica's network namespace). */
static bool may_bind_service(pid_t tid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	unsigned long long eff = 0;
	bool found = false;
	while (!found && fgets(line, sizeof line, f) != NULL)
		found = sscanf(line, "CapEff: %llx", &eff) == 1;
	fclose(f);
	return found && (eff & (1ull << 10)); /* CAP_NET_BIND_SERVICE */
}

/* bind of a UDP socket is performed here, on our reference to it (as
 * listen is): its result is the program's, and a server's address, port
 * not 0, goes to dgram.h before the program can receive. Anything else
 * goes on in the kernel. */
static enum netcall on_bind(struct netcalls *N, int listener, unsigned slot, const struct seccomp_notif *req,
			    struct seccomp_notif_resp *resp)
{
	int fd = (int)(int32_t)req->data.args[0];
	struct sockaddr_storage ss;
	int len;
	if (!call_addr(N, req, 1, &ss, &len) || netaddr_classify(&ss, (size_t)len) == NETADDR_OTHER)
		return NETCALL_CONTINUE;
	int ours = take_fd((pid_t)req->pid, fd);
	if (ours < 0)
		return NETCALL_CONTINUE;
	enum netcall a = NETCALL_CONTINUE;
	int domain, type, proto, v6only = 0;
	if (!still_waiting(listener, req->id)) {
		a = NETCALL_DROP;
	} else if (sockopt_int(ours, SOL_SOCKET, SO_DOMAIN, &domain) && domain == ss.ss_family &&
		   sockopt_int(ours, SOL_SOCKET, SO_TYPE, &type) && type == SOCK_DGRAM &&
		   sockopt_int(ours, SOL_SOCKET, SO_PROTOCOL, &proto) && proto == IPPROTO_UDP) {
		in_port_t port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
							 : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		/* A port below 1024 wants the caller's privilege, not ours: the
		 * kernel judges that call itself. */
		if (port != 0 && port < 1024 && !may_bind_service((pid_t)req->pid)) {
			close(ours);
			return NETCALL_CONTINUE;
		}
		dgram_unbind(N->S->net, slot, (const struct sockaddr *)&ss);
		a = NETCALL_ANSWER;
		if (bind(ours, (const struct sockaddr *)&ss, (socklen_t)len) != 0) {
			resp->error = -errno;
		} else {
			struct sockaddr_storage got;
			socklen_t glen = sizeof got;
			memset(&got, 0, sizeof got);
			if (getsockname(ours, (struct sockaddr *)&got, &glen) == 0 &&
			    (domain != AF_INET6 || sockopt_int(ours, IPPROTO_IPV6, IPV6_V6ONLY, &v6only)) &&
			    (got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
						      : ((struct sockaddr_in6 *)&got)->sin6_port) != 0)
				dgram_bound(N->S->net, slot, (const struct sockaddr *)&got, glen, v6only != 0);
		}
	}
	close(ours);
	return a;
}

/* sendto with an address (the filter sends no other): a UDP socket's
 * first datagram to a destination outside starts its flow there. */
static enum netcall on_sendto(struct netcalls *N, int listener, unsigned slot, const struct seccomp_notif *req,
			      struct seccomp_notif_resp *resp)
{
	int fd = (int)(int32_t)req->data.args[0];
	struct sockaddr_storage ss;
	int len;
	if (!call_addr(N, req, 4, &ss, &len))
		return NETCALL_CONTINUE;
	if (netaddr_classify(&ss, (size_t)len) == NETADDR_OTHER || unspecified(&ss))
		return NETCALL_CONTINUE;
	int ours = take_fd((pid_t)req->pid, fd);
	if (ours < 0)
		return NETCALL_CONTINUE;
	if (!still_waiting(listener, req->id)) {
		close(ours);
		return NETCALL_DROP;
	}
	if (!udp_for(ours, &ss)) {
		close(ours);
		return NETCALL_CONTINUE;
	}
	return datagrams(N, slot, ours, &ss, (socklen_t)len, resp);
}

enum netcall netcalls_handle(struct netcalls *N, int listener, unsigned slot, uint64_t gen,
			     const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	switch (req->data.nr) {
	case SYS_listen: return on_listen(N, listener, slot, req, resp);
	case SYS_connect: return on_connect(N, listener, slot, gen, req, resp);
	case SYS_sendto: return on_sendto(N, listener, slot, req, resp);
	case SYS_bind: return on_bind(N, listener, slot, req, resp);
	default: return NETCALL_CONTINUE;
	}
}
