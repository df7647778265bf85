/* sdnotify.h — diehard's own messages to its service manager: one datagram
 * per call to NOTIFY_SOCKET (svcenv.h), written directly (no libsystemd),
 * with our credentials attached so the manager knows the main pid sent it. */
#ifndef DIEHARD_SDNOTIFY_H
#define DIEHARD_SDNOTIFY_H

#include <stdbool.h>

/* Sends text ("READY=1\nSTATUS=..."); false (said once) when the manager
 * cannot be reached. Nothing is sent without NOTIFY_SOCKET. */
bool sdnotify_send(const char *text);

#endif
