/*
 * clock_calls — reads CLOCK_MONOTONIC N times and checks that it never goes
 * backwards.
 *
 *   clock_calls N
 *
 * Why: bench/virtualize times `diehard -k K clock_calls N` against
 * `clock_calls 0`; the difference over N is what one virtualized clock call
 * costs a replica (diehard patches the vDSO so that each call enters the
 * kernel and is answered by the supervisor through seccomp user-notify).
 * The calls go through glibc's clock_gettime, as any program's do.
 *
 * Output: "N calls" on stdout. Exit status 0; 1 when the clock went
 * backwards or a call failed; 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: clock_calls N\n", stderr);
        return 2;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(argv[1], &end, 10);
    if (errno != 0 || end == argv[1] || *end != '\0' || argv[1][0] == '-') {
        fprintf(stderr, "clock_calls: N must be a whole number, got '%s'\n", argv[1]);
        return 2;
    }

    struct timespec previous = { 0, 0 };
    for (unsigned long long i = 0; i < n; i++) {
        struct timespec now;
        if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
            fprintf(stderr, "clock_calls: clock_gettime (call %llu): %s\n", i + 1, strerror(errno));
            return 1;
        }
        if (now.tv_sec < previous.tv_sec ||
            (now.tv_sec == previous.tv_sec && now.tv_nsec < previous.tv_nsec)) {
            fprintf(stderr, "clock_calls: CLOCK_MONOTONIC went backwards at call %llu: "
                    "%lld.%09ld after %lld.%09ld\n", i + 1, (long long)now.tv_sec, now.tv_nsec,
                    (long long)previous.tv_sec, previous.tv_nsec);
            return 1;
        }
        previous = now;
    }
    if (printf("%llu calls\n", n) < 0 || fflush(stdout) != 0) {
        perror("clock_calls: writing the result");
        return 1;
    }
    return 0;
}
