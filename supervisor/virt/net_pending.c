/* net_pending.c — a stand-in for the proxy's entry point that netcalls.c
 * calls, so that this tree links before supervisor/net/net.c exists. Weak:
 * net.c's definition takes its place at link time. Delete this file once
 * net.c is in. */
#include "net.h"

__attribute__((weak)) void net_replica_listens(struct net *N, unsigned i, const struct sockaddr *addr, socklen_t len,
					       bool v6only)
{
	(void)N;
	(void)i;
	(void)addr;
	(void)len;
	(void)v6only;
}
