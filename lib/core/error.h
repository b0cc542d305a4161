/*
 * error — how every part of swift-tools reports a problem.
 *
 * Library code never exits: it reports the error once, where the file and line are known,
 * and returns a negative value (git's error()). Only cmd/ turns that into an exit code.
 *
 *     if (!fp)
 *         return swift_error_errno("cannot open '%s'", path);
 *     ...
 *     return swift_error_at(path, lineno, "expected object, got %s", kind);
 *
 * Messages go to stderr as "swift-X: message" or "swift-X:FILE:LINE: message": lowercase,
 * no final period (GNU error(3)). Exit codes are fixed for every command
 * (docs/architecture.md, "The cmd/lib contract").
 */
#ifndef SWIFT_ERROR_H
#define SWIFT_ERROR_H

#include <stdio.h>

enum swift_exit {
    SWIFT_EXIT_OK = 0,
    SWIFT_EXIT_FAIL = 1,        /* the job ran and failed */
    SWIFT_EXIT_USAGE = 2,       /* bad command line */
    SWIFT_EXIT_INTERRUPTED = 75 /* stopped cleanly after a checkpoint, safe to requeue */
};

/*
 * What a stage's swift_X_run() returns. Library code decides no exit code: it returns 0, or -1
 * after reporting the error, or one of these for the two outcomes an exit code must tell apart;
 * only cmd/ maps the result to an exit code, with swift_exit_code().
 */
enum swift_status {
    SWIFT_DONE = 0,
    SWIFT_FAILED = -1,   /* reported; exit 1 */
    SWIFT_MISUSED = -2,  /* reported as a usage error (swift_usage); exit 2 */
    SWIFT_STOPPED = -75, /* stopped cleanly after a checkpoint (SIGTERM/SIGUSR1); exit 75 */
};
/* 0 -> 0, SWIFT_MISUSED -> 2, SWIFT_STOPPED -> 75, any other negative value -> 1. */
int swift_exit_code(int status);

/* Set the program name used as the message prefix; takes the basename of argv0. */
void swift_set_progname(const char *argv0);
const char *swift_progname(void);

/* Redirect messages (tests capture them with fmemopen); NULL restores stderr. */
void swift_error_set_stream(FILE *fp);

/* "prog: msg"; returns -1. */
int swift_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: msg: strerror(errno)"; returns -1. errno is read before anything else runs. */
int swift_error_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog:FILE:LINE: msg" (LINE omitted when <= 0); returns -1. */
int swift_error_at(const char *file, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "prog: warning: msg". */
void swift_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: msg" (informational, stderr). Silenced by swift_set_quiet(1). */
void swift_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void swift_set_quiet(int quiet);

/* Usage error: "prog: msg" + "Try 'prog --help' for more information."; returns 2. */
int swift_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same at a position: "prog:FILE:LINE: msg" (LINE omitted when <= 0) + the hint; returns 2
 * (a config file's unknown key is a usage error like an unknown flag). */
int swift_usage_at(const char *file, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Number of errors reported so far in this process. */
long swift_error_count(void);

#endif
