/*
 * measure — runs one command and reports its wall time and peak resident set.
 *
 *   measure [-o FILE] [-t SECONDS] [-e VAR=VALUE]... -- CMD [ARG]...
 *
 * Why: bench/run compares allocators by LD_PRELOADing them into the very same
 * command, so the preload must reach the command and nothing else (least of all
 * this measuring process or the shell around it). Each -e puts VAR=VALUE into the
 * child's environment only. The command inherits stdin, stdout and stderr, so the
 * caller redirects them as it likes. With -t, a command still running after
 * SECONDS (a whole number) is killed with SIGKILL, so one pathological run
 * cannot stall a whole benchmark suite.
 *
 * Output: one line
 *     wall_s=<seconds> maxrss_kb=<ru_maxrss of the child> status=<exit code>
 * appended to FILE when -o is given, otherwise written to stderr. A command
 * killed by signal N reports status=128+N, like the shell does; one killed for
 * running past -t reports status=137 and says so on stderr as well.
 *
 * Exit status: the command's own (the same number as status=), or 125 when
 * measure itself failed (bad usage, fork, wait4, -o file) and 127 when the
 * command could not be executed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_MEASURE_FAILED = 125, EXIT_EXEC_FAILED = 127 };

/* The child being measured, for the -t alarm handler. */
static volatile sig_atomic_t measured_child;
static volatile sig_atomic_t time_limit_hit;

static void usage(void)
{
    fputs("usage: measure [-o FILE] [-t SECONDS] [-e VAR=VALUE]... -- CMD [ARG]...\n", stderr);
    exit(EXIT_MEASURE_FAILED);
}

static void on_time_limit(int signal_number)
{
    (void)signal_number;
    time_limit_hit = 1;
    kill(measured_child, SIGKILL);   /* async-signal-safe */
}

static unsigned parse_seconds(const char *text)
{
    char *end;
    errno = 0;
    unsigned long seconds = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || seconds == 0 || seconds > 86400) {
        fprintf(stderr, "measure: -t needs a whole number of seconds (1-86400), got '%s'\n", text);
        exit(EXIT_MEASURE_FAILED);
    }
    return (unsigned)seconds;
}

static double now_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("measure: clock_gettime");
        exit(EXIT_MEASURE_FAILED);
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* In the child: apply the -e assignments, then become the command. */
static void exec_command(char **assignments, int assignment_count, char **argv)
{
    for (int i = 0; i < assignment_count; i++) {
        char *equals = strchr(assignments[i], '=');
        /* Checked in main; the name is the part before '='. */
        *equals = '\0';
        if (setenv(assignments[i], equals + 1, 1) != 0) {
            perror("measure: setenv");
            _exit(EXIT_MEASURE_FAILED);
        }
    }
    execvp(argv[0], argv);
    fprintf(stderr, "measure: cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(EXIT_EXEC_FAILED);
}

static int exit_code_of(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return EXIT_MEASURE_FAILED;
}

int main(int argc, char **argv)
{
    const char *report_path = NULL;
    unsigned time_limit = 0;
    char **assignments = calloc((size_t)argc, sizeof *assignments);
    int assignment_count = 0;
    int i = 1;

    if (assignments == NULL) {
        perror("measure: calloc");
        return EXIT_MEASURE_FAILED;
    }
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            report_path = argv[++i];
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            time_limit = parse_seconds(argv[++i]);
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            char *value = argv[++i];
            char *equals = strchr(value, '=');
            if (equals == NULL || equals == value) {
                fprintf(stderr, "measure: -e needs VAR=VALUE, got '%s'\n", value);
                return EXIT_MEASURE_FAILED;
            }
            assignments[assignment_count++] = value;
        } else {
            usage();
        }
    }
    if (i + 1 >= argc)
        usage();
    char **command = &argv[i + 1];

    /* Open the report before running, so a bad path fails fast. */
    FILE *report = stderr;
    if (report_path != NULL) {
        int fd = open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "measure: %s: %s\n", report_path, strerror(errno));
            return EXIT_MEASURE_FAILED;
        }
        report = fdopen(fd, "a");
        if (report == NULL) {
            perror("measure: fdopen");
            return EXIT_MEASURE_FAILED;
        }
    }

    if (fflush(NULL) != 0) {
        perror("measure: fflush");
        return EXIT_MEASURE_FAILED;
    }
    double start = now_seconds();
    pid_t child = fork();
    if (child < 0) {
        perror("measure: fork");
        return EXIT_MEASURE_FAILED;
    }
    if (child == 0)
        exec_command(assignments, assignment_count, command);
    measured_child = child;
    if (time_limit > 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_time_limit;
        if (sigemptyset(&action.sa_mask) != 0 || sigaction(SIGALRM, &action, NULL) != 0) {
            perror("measure: sigaction");
            kill(child, SIGKILL);
            return EXIT_MEASURE_FAILED;
        }
        alarm(time_limit);
    }

    /* Wait without reaping first: until the alarm is off, the child's pid must
     * stay ours (a zombie), so the handler can never signal a stranger. */
    siginfo_t exited;
    int waited_status;
    do {
        waited_status = waitid(P_PID, (id_t)child, &exited, WEXITED | WNOWAIT);
    } while (waited_status < 0 && errno == EINTR);
    double end = now_seconds();
    alarm(0);
    if (waited_status != 0) {
        perror("measure: waitid");
        return EXIT_MEASURE_FAILED;
    }

    int wait_status = 0;
    struct rusage usage_of_child;
    pid_t waited;
    do {
        waited = wait4(child, &wait_status, 0, &usage_of_child);
    } while (waited < 0 && errno == EINTR);
    if (waited != child) {
        perror("measure: wait4");
        return EXIT_MEASURE_FAILED;
    }
    if (time_limit_hit)
        fprintf(stderr, "measure: killed %s after the %u s time limit\n", command[0], time_limit);

    int code = exit_code_of(wait_status);
    if (fprintf(report, "wall_s=%.6f maxrss_kb=%ld status=%d\n",
                end - start, usage_of_child.ru_maxrss, code) < 0 ||
        fflush(report) != 0) {
        perror("measure: writing the report");
        return EXIT_MEASURE_FAILED;
    }
    if (report != stderr && fclose(report) != 0) {
        perror("measure: closing the report");
        return EXIT_MEASURE_FAILED;
    }
    free(assignments);
    return code;
}
