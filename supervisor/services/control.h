/* control.h — the control socket (--control PATH; docs/CONTROL.md): a unix
 * stream socket on the supervisor's loop that answers `diehard status` and
 * streams `diehard events`. Only diehard's own user and root are served,
 * and never a process of the replicas or one they started (peer.h): the
 * status holds every replica's seed. A client never disturbs the run:
 * whatever it sends, however slowly it reads, the worst it gets is an
 * error and a closed connection. */
#ifndef DIEHARD_CONTROL_H
#define DIEHARD_CONTROL_H

struct sup;
struct control;

/* The default path: $RUNTIME_DIRECTORY/control (its first entry when it
 * lists several, as systemd's RuntimeDirectory= may), malloc'ed; NULL
 * when the variable is unset or empty. */
char *control_default_path(void);

/* Creates the listening socket at path, mode 0600, before anything runs
 * (main.c). A socket nobody listens on is replaced; a live one or any
 * other file is refused (one line, exit 125). The file is removed when
 * diehard exits, however it exits through exit(3). The replicas'
 * RUNTIME_DIRECTORY then leaves out the entries that hold it (svcenv.h). */
void control_listen(const char *path);

/* Serves the socket control_listen made on S's loop and starts recording
 * events (log.h's hook); makes diehard a child subreaper (peer.h); NULL
 * when there is none. */
struct control *control_open(struct sup *S);

/* At the end of the run: what followers have not been sent yet is written
 * if the socket takes it at once, every connection is closed and the
 * socket file removed. NULL: nothing. */
void control_close(struct control *c);

#endif
