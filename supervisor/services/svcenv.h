/* svcenv.h — what a service manager handed diehard, read once at start.
 *
 * systemd speaks to a service through its environment: NOTIFY_SOCKET (where
 * sd_notify messages go), WATCHDOG_USEC/WATCHDOG_PID (the watchdog),
 * LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES (sockets from fd 3 on). They are
 * diehard's, not its replicas': svcenv_capture takes them out of the
 * environment before anything else runs (so no replica, replay probe or
 * debugger inherits them) and services/notify.c gives each replica its own.
 * Values meant for another process (a LISTEN_PID or WATCHDOG_PID that is
 * not ours) are dropped, as sd_listen_fds(3) and sd_watchdog_enabled(3) do.
 */
#ifndef DIEHARD_SVCENV_H
#define DIEHARD_SVCENV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

struct svcenv {
	bool notify;                 /* NOTIFY_SOCKET was set and usable */
	struct sockaddr_un addr;     /* its address (abstract: sun_path[0] == 0) */
	socklen_t addr_len;
	uint64_t watchdog_usec;      /* 0: no watchdog for us */
	unsigned listen_fds;         /* sockets at fds 3 .. 3 + listen_fds - 1 */
	char *listen_names;          /* LISTEN_FDNAMES as given, or NULL */
	bool journal;                /* stderr is the journal (JOURNAL_STREAM) */
};

/* Reads and removes the variables; a malformed one is a one-line error and
 * exit 125 (usage). Call once, first thing in main. */
void svcenv_capture(void);
const struct svcenv *svcenv_get(void);

/* RUNTIME_DIRECTORY (systemd's, a list separated by ':') stays in our
 * environment for the replicas, who may keep their own files there, but
 * without the entries that hold path, the control socket (control.c): the
 * replicas must not be told where it is. By default that is the first
 * entry (control.h); with `RuntimeDirectory=app-diehard app` the program
 * sees RUNTIME_DIRECTORY=/run/app. Entries are compared as real paths
 * (symbolic links resolved where they exist). */
void svcenv_hide_runtime_dir(const char *path);

#endif
