/* forkmask.h — the signal mask around the kernel's fork (forkmask.c). */
#ifndef DIEHARD_FORKMASK_H
#define DIEHARD_FORKMASK_H

/* The last of the fork handlers' prepare (after every lock is taken):
 * blocks every signal a handler could take but the synchronous faults. */
void forkmask_block(void);

/* The first of the parent's and the child's: the mask as it was. */
void forkmask_restore(void);

#endif
