/* dgram_int.h — what dgram.c (flows out: the replicas' datagrams voted
 * and sent once, the answers given back; the state of a run) and dserve.c
 * (UDP servers: their binds, a session per client) share. See dgram.h.
 * A server's session is a flow whose peer is the client: dgram.c votes it
 * as any flow, dserve.c feeds it and sends what is decided. */
#ifndef DIEHARD_DGRAM_INT_H
#define DIEHARD_DGRAM_INT_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "netaddr.h"

struct net;
struct sup;

#define DG_MAX 65536        /* the largest datagram read */
#define DEST_MAX 4096       /* destinations in a run */
#define FLOWS_MAX 65536     /* flows alive at once in a run */
#define PENDING_MAX 4096    /* undecided datagrams per voter and flow: a voter past it is killed */
#define LEAD_MAX 4096       /* flows one replica started that no other did yet: past it, killed */
#define SRV_MAX 256         /* UDP server addresses in a run */
#define RCVBUF (4 << 20)    /* diehard's sockets in the namespaces: a burst is not lost there */
#define ANSWERS_MAX 1024    /* answers kept per flow when no replacement may need them */
#define START_FLOWS 1024    /* flows kept as the run's start at most (--stateless, --durable) */
#define IDLE_SECONDS 120.0  /* a flow quiet that long is freed (unless kept) */
#define SESSION_IDLE 60.0   /* a server's session quiet that long likewise */

struct blob {
	unsigned char *p;
	size_t n;
};

struct answer {
	struct blob b;
	uint64_t after;          /* datagrams sent to the destination before it */
	uint64_t seq;            /* a server's: its order among all its clients' datagrams */
};

struct dside {               /* one slot's side of a flow */
	int sock;                /* our reference to its socket, until named (-1) */
	int own;                 /* a server's session: our socket in its namespace, bound at the client (-1) */
	struct event *own_ev;
	dev_t dev;
	ino_t ino;               /* its socket: one flow per socket and destination */
	bool started, known;
	struct sockaddr_storage src;
	socklen_t srclen;
	uint64_t sent;           /* its datagrams so far */
	size_t given;            /* answers given to it */
	double behind;           /* since when it trails the decided ones (0: it does not) */
	struct blob *pend;       /* voters: undecided datagrams, from index decided */
	size_t npend;
};

struct ddest;
struct dsrv;

/* A flow out (to d), or a server's session with one client (srv): then
 * the answers are the client's datagrams, given to each replica's server
 * from a socket in its namespace bound at the client's address, and the
 * decided datagrams are the replicas' replies, sent to the client. */
struct dflow {
	struct ddest *d;
	struct dsrv *srv;
	struct sockaddr_storage client;
	socklen_t clen;
	struct dflow *snext;     /* in srv's sessions */
	uint64_t n;
	uint64_t voters;
	struct dside *side;      /* per slot */
	uint64_t decided;        /* datagrams decided (sent or dropped) */
	struct blob *dec;        /* decided datagrams from dec_base, for laggers */
	uint64_t dec_base;
	size_t ndec;
	int real;                /* diehard's socket to the destination (-1) */
	struct event *ev;
	struct blob *outq;       /* decided, waiting for room in real (a unix peer's queue full) */
	size_t noutq;
	struct event *wev;       /* real writable: the queue goes on */
	struct answer *ans;
	size_t nans, ans_base;   /* answers before ans_base freed */
	struct answer *sans;     /* a flow of the start: answers 0 .. nsans - 1, kept for good */
	size_t nsans;
	bool start;              /* one of the start's: kept to the end, not counted in flows */
	uint64_t made;           /* its number among all flows out made in the run */
	double last;
	int leader;              /* the slot that started it first, while it is alone (-1) */
};

struct dlocal {              /* per slot at a destination */
	int fd;                  /* its socket bound at the destination, in its namespace */
	struct event *ev;
	uint64_t flows;          /* flows its process started here */
	struct dgram *G;
	struct ddest *d;
	unsigned slot;
};

struct ddest {
	struct sockaddr_storage addr;
	socklen_t len;
	char name[NETADDR_TEXT];
	struct dlocal *ns;     /* per slot */
	struct dflow **flow;     /* flows 0 .. nhead - 1, then base + i - nhead */
	size_t nflow, capflow;
	size_t nhead;            /* the start's flows, kept for good (dgram.c) */
	uint64_t base;
	json_t *rep;
	uint64_t nflows, sent, received, diverged, dropped;
};

/* An address the replicas' UDP servers bound: diehard binds it for real
 * once a quorum of the voters did, and keeps a session per client. */
struct dsrv {
	struct dgram *G;
	struct sockaddr_storage addr;   /* as bound */
	socklen_t len;
	bool v6only;
	struct sockaddr_storage target; /* where a replica's server is reached in its namespace */
	socklen_t tlen;
	char name[NETADDR_TEXT];
	uint64_t bound;                 /* slots whose server bound it */
	int fd;                         /* ours, on the host (-1 until a quorum bound) */
	struct event *ev;
	struct dflow *sessions;
	size_t nsessions;
	struct ddest *rep_d;            /* its report entry's counters */
	uint64_t seq;                   /* its clients' datagrams so far */
};

struct dgram {
	struct net *N;
	struct ddest **dest;
	size_t ndest;
	struct dsrv **srv;
	size_t nsrv;
	size_t flows;            /* alive */
	uint64_t made;           /* flows out made so far (dflow's made) */
	bool keep;               /* answers kept for replacements */
	size_t kept, cap;
	bool incomplete;
	bool start;              /* past the cap, the start is kept (--stateless) */
	json_t *rep;
	bool said_full;
	unsigned *leading;       /* per slot: flows it started that no other did yet */
};

struct own_arg {             /* the event's argument: a session's side, or a unix flow's */
	struct dgram *G;
	struct dflow *f;
	unsigned slot;
};

/* dgram.c */
struct sup *dg_sup(const struct dgram *G);
/* p, or exit 125 (out of memory). */
void *dg_must(void *p);
/* A copy of n bytes at p. */
struct blob dg_blob(const void *p, size_t n);
void dg_close(int *fd);
/* Whether slot's process votes on flows made now (live, voting, ready). */
bool dg_eligible(const struct dgram *G, unsigned slot);
/* n bytes more kept for replacements (past --conn-log: none any more). */
void dg_keep(struct dgram *G, size_t n);
/* f's peer sent n bytes at p: given to every replica in turn. */
void dg_answer(struct dgram *G, struct dflow *f, const unsigned char *p, size_t n);
/* slot's datagram p (n bytes) in f: voted, checked or counted. */
void dg_datagram(struct dgram *G, struct dflow *f, unsigned slot, const unsigned char *p, size_t n);
/* s's socket in its replica's namespace (and its event) closed. */
void dg_own_close(struct dside *s);
void dg_flow_free(struct dgram *G, struct dflow *f);

/* dserve.c */
/* A session side's socket readable (arg: its own_arg): its datagrams. */
void dg_on_own(evutil_socket_t fd, short what, void *arg);
/* v's clients' datagrams due to slot, given in the order they came. */
void dserve_give(struct dgram *G, struct dsrv *v, unsigned slot);
/* f, a session of its server, freed. */
void dserve_session_free(struct dgram *G, struct dflow *f);

#endif
