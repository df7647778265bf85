/* netint.h — the proxy's shared state, for net.c (replicas, listeners,
 * accepting), conn.c (one client connection, voted) and connlog.c (the
 * connection log and its replay to a replacement). See net.h. */
#ifndef DIEHARD_NETINT_H
#define DIEHARD_NETINT_H

#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "net.h"

struct sup;
struct factory;
struct inputlog;
struct conn;
struct replay_conn;
struct orec;
struct outbound;
struct bufpool;

#define NET_MAX_LISTENERS 64
/* Client bytes a connection holds for its slowest replica, and reply bytes
 * held per replica (from the oldest one not yet emitted or checked): past
 * either, reading stops (backpressure). */
#define NET_IN_CAP ((size_t)256 << 10)
#define NET_OUT_CAP ((size_t)256 << 10)
/* A side's first buffer (conn.c), from the net's pool (bufpool.c), which
 * keeps at most NET_BUF_KEEP idle ones. */
#define NET_BUF_START ((size_t)16 << 10)
#define NET_BUF_KEEP 64

/* An address diehard listens on for the replicas. */
struct listener {
	struct net *N;
	unsigned index;
	struct sockaddr_storage addr; /* as the replicas bound it */
	socklen_t addrlen;
	bool v6only;
	struct sockaddr_storage target; /* where a replica is reached in its namespace */
	socklen_t targetlen;
	int fd;                  /* ours, listening; -1 until a quorum listens */
	double bound_at;         /* when fd was bound (not adopted): accepting waits
				    for the rest of the vote to listen (net.c) */
	bool adopted;            /* handed to us by systemd (LISTEN_FDS) */
	bool defer_off;          /* the server speaks first: accepts not deferred (defer.c) */
	struct event *ev;        /* accepting: NULL until then */
	bool paused;             /* too many connections, out of fds, or held */
	double held;             /* since when its clients wait for replicas to take
				    them (net.c's hold_clients; 0: they do not) */
	bool hold_spent;         /* a hold ran out: none again until replicas take them */
	char name[64];           /* "127.0.0.1:8080", "[::]:80" */
};

/* What the proxy knows of the process in a slot. */
struct nslot {
	bool present;            /* a process holds the slot, in the vote or catching up */
	bool unanswered;         /* its init did not answer a request for sockets: killed
				    at the next tick (net_tick) */
	struct factory *F;       /* sockets in its namespace */
	uint64_t listens;        /* bit l: it listens on listener l */
	bool ready;              /* serves new connections (a replacement: its replay reached the log's end) */
	bool replaying;          /* a replacement being fed the connection log */
	bool fresh;              /* a replacement started as a fresh server (no connection
				    log: --stateless): it joins at a quiet point (fresh_join) */
	bool clocks_behind;      /* a replacement whose clocks still replay the past: no live
				    connection reaches it (net_clocks_settled) */
	double clock_moved;      /* when they jumped to now (0: not yet): net_clocks_settled */
	time_t clock_sec[2];     /* the wall and monotonic seconds then */
	double clock_turned;     /* when both had turned since (0: not yet) */
	uint64_t clock_reads;    /* its wall and monotonic reads then */
	/* replay (connlog.c) */
	size_t rp_off;           /* next record in the log */
	size_t rp_sent;          /* bytes of its DATA record already sent */
	uint64_t rp_join;        /* connections numbered below this are replayed, above served live */
	uint64_t rp_received;    /* reply bytes it gave on replayed connections */
	double rp_progress;      /* when it last moved */
	double rp_done;          /* when its replay reached the log's end (0: not yet) */
	double streams_since;    /* a fresh server: since when only the voters' file
				    streams keep it from joining (fresh.c; 0: not) */
	bool answered;           /* it has answered a client (net_answered) */
	bool fed;                /* it was given a client's bytes (net_fed) */
	uint64_t answered_ticks; /* when first: clock ticks since boot, as /proc's start times */
	double conns_since;      /* a fresh server: since when it listens where it should
				    while connections are open (fresh.c; 0: not) */
	struct replay_conn *rp_conns;
	/* --serial-clients: the replayed connection last sent a record, its
	 * reply bytes then, when (connlog.c's rp_turn) */
	struct replay_conn *rp_round;
	uint64_t rp_mark;
	double rp_round_at;
	/* --serial-clients, once it serves: records of its replayed
	 * connections go when its lane says (rp_go: one may), and the round
	 * of the one sent last is its lane's (rp_lane_round) */
	bool rp_go, rp_lane_round;
	bool rp_blocked;         /* a record waits for its connection's connect, or a
				    second's turn (rp_hold_for_turn) */
	unsigned rp_closing;     /* of them, closed by their clients, their replies read on */
	bool rp_said_slow;
	/* defer.c */
	uint64_t deferred;       /* bit l: dfd[l] holds its listener l, deferring */
	int dfd[NET_MAX_LISTENERS];
};

struct net {
	struct sup *S;
	struct nslot *slot;          /* S->nslots */
	struct listener *L[NET_MAX_LISTENERS];
	unsigned nl;
	struct conn *conns;          /* every open connection */
	unsigned nconns;
	unsigned max_conns;          /* from the fd limit */
	uint64_t next_conn;          /* numbers connections, from 1 */
	uint64_t next_out;           /* numbers outbound connections, from 1 */
	struct outbound *out;        /* the replicas' outbound connections (outbound.c) */
	struct dgram *dgram;         /* their outbound datagrams (dgram.c) */
	uint64_t reply_total;        /* reply bytes committed over all connections */
	double last_answer;          /* when a client's reply bytes were last committed (sup_now()) */
	double first_fed_wall;       /* when a replica was first given a client's bytes
					(CLOCK_REALTIME seconds; 0: not yet): net_first_fed */
	double lag[2], lag_since;    /* conn.c's turn guard: the widest spread of a round's
					answers in this window (since lag_since) and the last */
	bool lag_known;              /* a spread was seen (else the guard is its most) */
	struct bufpool *bufs;        /* connections' first buffers (NET_BUF_START bytes) */
	struct serial *serial;       /* --serial-clients: the replicas' lanes (serial.c; NULL: off) */
	bool stopping;
	bool said_full;
	bool said_client;            /* a replica could not see its client's address */
	bool said_ancillary;         /* descriptors passed over a unix connection */
	bool said_pids;              /* a fresh server's pids could not be aligned */
	struct inputlog *log;        /* the connection log (NULL: none kept) */
	struct event *resume_ev;     /* listeners paused for want of fds */
	struct event *fresh_ev;      /* a connection closed: a fresh server may join */
	double quiet_held;           /* since when new clients wait for a quiet moment: a
				        durable server's replacement (net_durable_begin), or a
				        drain for a fresh server's join (net_fresh_drain); 0:
				        they do not */
	bool quiet_draining;         /* that hold waits for the open connections to finish:
				        no durable replacement started yet */
	double quiet_wanted;         /* since when a durable replacement waits for a quiet moment (0: none) */
	double quiet_started;        /* when the hold's last durable replacement started: its --timeout */
	double quiet_next;           /* no drain before then (a drain failed) */
	double quiet_backoff;        /* the wait after the last failed drain (0: none failed) */
};

#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78 /* Linux 4.15; Debian 12's libc headers lack it */
#endif

/* net.c */
unsigned net_quorum(const struct net *N);
/* The quorum of a client's connection: among the replicas that take
 * clients (sup_client_quorum_among). */
unsigned net_client_quorum(const struct net *N);
/* Whether a new connection on l reaches the replica in slot i now: it
 * listens there, and takes clients (its replay over, its clocks now). */
bool net_reaches(const struct net *N, unsigned i, const struct listener *l);
/* Where a replica listening (or bound, UDP) at a is reached from inside
 * its namespace: the wildcard as its loopback. */
void net_target_of(const struct sockaddr_storage *a, struct sockaddr_storage *t, socklen_t *len);
/* fd, a socket of family in a replica's namespace, bound at a (as an
 * IPv4-mapped address when family is AF_INET6 and a is IPv4), with
 * SO_REUSEADDR and freely (a new IPv6 address may be tentative); its port
 * in use there: the address alone. 0, or an errno. */
int net_bind_at(int fd, int family, const struct sockaddr_storage *a);
/* A socket of the replica in slot i, connected (or connecting) to l's
 * target, from the client's address and port when client is given (not
 * NULL, not AF_UNSPEC; else from the replica's loopback); -1 (logged)
 * when none can be made. */
int net_connect_replica(struct net *N, unsigned i, const struct listener *l, const struct sockaddr_storage *client);
void net_conn_closed(struct net *N);
/* replace.c's straggler and divergence kill, for a connection's replica. */
void net_kill(struct net *N, unsigned i, const char *why);
/* Whether replacement i's clocks have left its replayed past (a step of
 * that on each call; true once done, or never behind). */
bool net_clocks_settled(struct net *N, unsigned i);
/* The hold for a quiet moment ends (fresh.c): new connections are let in
 * again, where nothing else holds them; why is said. */
void net_quiet_end(struct net *N, const char *why);
/* Fresh server: ready to join since `since` but for the connections open:
 * FRESH_CHANCE after, a drain (new connections wait while the open ones
 * finish), where one may help and none failed lately. */
void net_fresh_drain(struct net *N, double since);
/* A drain (net_durable_begin) ends: no replacement wants it any more, or
 * the open connections did not finish within its bound (the next drain
 * then waits, longer each time). */
void net_quiet_drained(struct net *N, bool wanted);

/* fresh.c: fresh servers. fresh_event: the event fresh_closed makes
 * active (a connection closed: a quiet point, maybe); fresh_tick: the
 * tick's joins and stragglers. */
struct event *fresh_event(struct net *N);
void fresh_closed(struct net *N);
void fresh_tick(struct net *N, double now);

/* conn.c */
void conn_open(struct net *N, struct listener *l, int cfd, const struct sockaddr_storage *client);
/* An outbound connection: cfd the real peer's socket (connected), dest
 * its name; each slot of voters joins it with the socket accepted from its
 * replica (conn_join), the peer's bytes kept for it until then; rec
 * records the peer's bytes for replacements (outbound.c). */
struct conn *conn_open_out(struct net *N, int cfd, const char *dest, uint64_t voters, struct orec *rec);
/* slot's socket fd (taken over) joins c: false (fd not taken) when c
 * expects none of slot. */
bool conn_join(struct conn *c, unsigned slot, int fd);
/* A replacement's socket fd to slot, on which the connection log's replay
 * fed `fed` client bytes of c and read `received` reply bytes, joins c as
 * a voting peer (taken over: true) when that is all c's client sent and
 * all it committed, at a quiet point (every peer has written what was
 * committed and been given every byte; nothing agreed waits for the
 * client). connlog.c: clients that keep their connection open get voters
 * back as replicas are replaced. */
bool conn_adopt(struct conn *c, unsigned slot, int fd, uint64_t fed, uint64_t received);
/* Slot i's program answered a client (now): net_answered, net_answered_ticks. */
void net_slot_answers(struct net *N, unsigned i);
/* Slot i's program was given a client's bytes (now): net_fed, net_first_fed. */
void net_slot_fed(struct net *N, unsigned i);
uint64_t conn_id(const struct conn *c);
/* serial.c: feeds c's peer of slot what its lane allows; false when c has
 * no peer there that takes bytes. */
bool conn_serial_feed(struct conn *c, unsigned slot);

/* serial.c: --serial-clients, one client's request at a time per replica,
 * in the order diehard received them. */
struct serial *serial_new(struct net *N, unsigned nslots);
void serial_free(struct serial *s);
/* c's client bytes came up to offset upto (eof: and ended there), its
 * committed reply then, for its peer of slot. */
void serial_arrived(struct serial *s, struct conn *c, unsigned slot, size_t upto, size_t committed, bool eof);
/* How far c's peer of slot may be fed (from allowed; fed: what it has had,
 * end: its reply so far; answers: it can answer, its reply not ended nor
 * paused, nor loose); sets *eof_ok once the client's end may reach it.
 * Starts a round when it may have more and answers. */
size_t serial_allow(struct serial *s, struct conn *c, unsigned slot, size_t allowed, size_t fed, size_t end,
		    bool answers, bool *eof_ok);
/* c's peer of slot gave reply bytes up to end, or its reply ended. */
void serial_answered(struct serial *s, struct conn *c, unsigned slot, size_t end, bool ended);
/* c's peer of slot left, or takes no more bytes. */
void serial_forget(struct serial *s, struct conn *c, unsigned slot);
/* Slot's replica left: its lane is emptied. */
void serial_slot_gone(struct serial *s, unsigned slot);
/* connlog.c: a record (bytes or end) came for a connection slot's replica
 * was replayed, once it serves: an entry in its lane; that round was
 * answered. */
void serial_arrived_log(struct serial *s, unsigned slot);
void serial_log_answered(struct serial *s, unsigned slot);
/* The lane of slot looks at its front again (a connect it waited for). */
void serial_kick(struct serial *s, unsigned slot);
/* connlog.c for serial.c: feeds slot's replica the next record its lane
 * holds an entry for: 1 fed (a round in flight until serial_log_answered),
 * 0 not yet (it is asked again), -1 none left to feed. */
int connlog_serial_feed(struct net *N, unsigned slot);
/* A lane whose front waited --timeout while a sibling's moves: its
 * replica killed as a straggler. */
void serial_tick(struct serial *s, double now);
/* conn.c for serial.c: c's peer of slot left a round unanswered (fed
 * without rounds until it answers); how long until just past the
 * second's turn when now is within its guard (0: not). */
void conn_serial_unanswered(struct conn *c, unsigned slot);
long conn_turn_wait(const struct conn *c);
/* How long (ns) a client's bytes that come now are held for a second's
 * turn (conn.c's hold_for_turn); 0: not held. */
long net_turn_wait(const struct net *N);
/* Whether c's client bytes are held for a second's turn now. */
bool conn_turn_held(const struct conn *c);
/* Whether a lane holds its most entries: no client is read (conn.c) until
 * serial.c calls conn_read_again for every connection. */
bool serial_crowded(const struct serial *s);
void conn_read_again(struct conn *c);
void conn_replica_gone(struct conn *c, unsigned i);
void conn_tick(struct conn *c, double now);
/* diehard did not run for gap seconds: c's straggler clocks skip them. */
void conn_pause(struct conn *c, double gap);
void conn_free(struct conn *c);
struct conn *conn_next(const struct conn *c);
/* When c was opened (sup_now()). */
double conn_opened(const struct conn *c);

/* defer.c: replicas' listeners accept a connection once its first bytes
 * are in. defer_listen: slot i's program listens on fd (its socket, which
 * is not kept) for l; defer_server_first: a reply came on l before any
 * request; defer_slot_gone: slot i's descriptors closed. */
void defer_listen(struct net *N, unsigned i, struct listener *l, int fd);
void defer_server_first(struct net *N, struct listener *l);
void defer_slot_gone(struct net *N, unsigned i);

/* connlog.c: the log of client connections (only when replacements may
 * need it). Records are appended as the connection's events happen. */
void connlog_open(struct net *N, uint64_t id, unsigned listener, const struct sockaddr_storage *client);
void connlog_data(struct net *N, uint64_t id, const void *p, size_t n);
void connlog_eof(struct net *N, uint64_t id);
void connlog_close(struct net *N, uint64_t id);
/* A replacement in slot i starts being fed the log. */
void connlog_replay_start(struct net *N, unsigned i);
void connlog_replay_stop(struct net *N, unsigned i);
void connlog_replay_step(struct net *N);
/* A connection's bytes held for a second's turn went to the live replicas:
 * a replacement's record held with them goes too (a lane's entry again). */
void connlog_turn_passed(struct net *N);
void connlog_tick(struct net *N, double now);

#endif
