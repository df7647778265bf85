/* status.h — the run as `diehard status` shows it: a RunStatus message
 * (proto/control.proto) built from the supervisor's state. */
#ifndef DIEHARD_STATUS_H
#define DIEHARD_STATUS_H

#include "control.pb-c.h"

struct sup;

/* Never fails (out of memory is fatal, as elsewhere in the supervisor);
 * free with status_free. Small enough for one frame (wire.h) whatever the
 * command line: long commands are cut. */
Diehard__RunStatus *status_build(struct sup *S);
void status_free(Diehard__RunStatus *st);

#endif
