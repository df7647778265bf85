/* exitcode.h — diehard's own exit codes. Otherwise diehard exits with the
 * status the replicas agreed on (their exit code, or 128 + signal number). */
#ifndef DIEHARD_EXITCODE_H
#define DIEHARD_EXITCODE_H

#define EXIT_CI_RECORDING 121 /* --ci: the recording asked for (--record) could not be written */
#define EXIT_NO_QUORUM 123 /* the replicas disagree and no majority exists */
#define EXIT_FILES_FAILED 124 /* the agreed files could not all be committed (each path said) */
#define EXIT_CI_FAILED 122 /* --ci: a divergence or a bad free was found */
#define EXIT_INTERNAL 125  /* bad usage or diehard's own failure */
#define EXIT_CANNOT_EXEC 126 /* the command exists but cannot be run */
#define EXIT_NOT_FOUND 127 /* the command was not found */

#endif
