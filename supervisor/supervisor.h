/* supervisor.h — runs k replicas of a command under one libevent loop and
 * lets only the output a quorum of them agrees on through. */
#ifndef DIEHARD_SUPERVISOR_H
#define DIEHARD_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct options {
	unsigned k;               /* replicas */
	const char *allocator;    /* path of libdiehard.so */
	const char *report_path;  /* JSON report, or NULL */
	int report_fd;            /* that file, opened before the run; -1: none */
	unsigned idle_ms;         /* quiet time before a partial chunk is voted */
	unsigned straggler_ms;    /* how long a replica may trail the quorum */
	unsigned stop_ms;         /* after SIGTERM or SIGINT, the replicas' grace */
	size_t window;            /* bytes a replica may be ahead or behind */
	size_t input_log;         /* input bytes kept for replay (0: none) */
	size_t conn_log;          /* client bytes of connections kept for replay (net.h; 0: none) */
	bool stateless;           /* --stateless: no connection log; a replacement starts as a
				     fresh server and joins at a quiet point (net.c) */
	bool durable;             /* --durable: no connection log; the server's state is in the
				     files it commits: a replacement starts fresh from them while
				     new clients wait (net/fresh.c) */
	bool strict_order;        /* --strict-order: a server's log lines are never taken in
				     another order (outorder.c) */
	bool serial_clients;      /* --serial-clients: a replica takes one client's request at a
				     time, in diehard's order (net/serial.c) */
	unsigned respawns;        /* replacements allowed in the run (0: none) */
	unsigned respawn_rate;    /* at most this many in any minute */
	unsigned min_voters;      /* the fewest agreeing voters that commit (sup_min_voters);
				     0: the default, 1 once the run serves, else 2 */
	size_t call_log;          /* entries kept per kind of virtualized call */
	bool virtualize;          /* same clocks and randomness in every replica */
	bool fast_clocks;         /* clock reads agreed in shared memory (fastclock.h) */
	bool lanes;               /* a server's reads too (clockpage.h's serve); --no-lanes */
	int sandbox;              /* enum sandbox_mode (sandbox.h) */
	int net;                  /* enum net_mode (net.h): NET_PRIVATE wanted (taken
				     only with the sandbox and the seccomp listener) */
	const char *init_path;    /* diehard-init, or NULL */
	char **argv;              /* the command */
	const char *path;         /* argv[0] resolved */
	bool ci;                  /* --ci (ci.h) */
	bool record;              /* keep what a recording needs: --ci, --record, a replay */
	const char *record_path;  /* --record FILE, or NULL */
	const struct replay *replay; /* diehard replay (replay.h), or NULL */
	const char *control_path; /* the control socket (control.h), or NULL */
	uint64_t max_tasks;       /* per replica (caps.h); 0: none; CAPS_DEFAULT: overcap.c's */
	uint64_t max_memory;      /* bytes per replica, likewise */
	int files;                /* enum files_mode (files.h) */
	bool files_given;         /* --files was given */
	const char *share[8];     /* --share DIR: real in every replica (files.h) */
	unsigned nshare;
};

/* --max-tasks and --max-memory not given: overcap.c's defaults. */
#define CAPS_DEFAULT UINT64_MAX

/* Runs to completion; returns diehard's exit code. */
int supervisor_run(const struct options *o);

#endif
