/* ctl.h — `diehard status` and `diehard events`: clients of a running
 * diehard's control socket (control.h, docs/CONTROL.md). */
#ifndef DIEHARD_CTL_H
#define DIEHARD_CTL_H

/* argv[0] is "status" or "events". Returns the exit code: 0, or 125 when
 * the socket cannot be reached or answers an error or garbage. */
int ctl_main(int argc, char **argv);

#endif
