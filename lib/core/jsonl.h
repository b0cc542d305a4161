/*
 * jsonl — read JSON Lines (one value per line) with jansson, with positions for errors.
 *
 *     struct swift_jsonl r;
 *     if (swift_jsonl_open(&r, path, 0) < 0)          // "-" reads stdin
 *         return -1;
 *     json_t *v;
 *     int rc;
 *     while ((rc = swift_jsonl_next(&r, &v)) > 0) {
 *         ... use v (caller owns one reference) ...
 *         json_decref(v);
 *     }
 *     swift_jsonl_close(&r);                          // rc < 0: error already reported
 *
 * Blank lines are skipped. A line longer than max_line bytes (default 64 MiB) is an error, so a
 * file without newlines cannot exhaust memory. With SWIFT_JSONL_SKIP_INVALID, bad lines are
 * counted (r.skipped) and the first few positions kept in r.first_bad[] instead of failing.
 */
#ifndef SWIFT_JSONL_H
#define SWIFT_JSONL_H

#include <jansson.h>
#include <stdio.h>

enum { SWIFT_JSONL_SKIP_INVALID = 1 };
#define SWIFT_JSONL_MAX_LINE_DEFAULT ((size_t)64 << 20)

struct swift_jsonl {
    FILE *fp;
    const char *path; /* borrowed, for messages ("-" prints as "<stdin>") */
    long line;        /* line number of the value last returned */
    int flags;
    size_t max_line;
    char *buf;
    size_t cap;
    long skipped;
    long first_bad[5];
    int nbad;
    int owns_fp; /* opened by swift_jsonl_open */
};

int swift_jsonl_open(struct swift_jsonl *r, const char *path, int flags);
/* Use an open stream (not closed by swift_jsonl_close). */
void swift_jsonl_init_fp(struct swift_jsonl *r, FILE *fp, const char *name, int flags);
/* 1 and *out set (a new reference), 0 at end of input, -1 after reporting an error. */
int swift_jsonl_next(struct swift_jsonl *r, json_t **out);
/* Raw next line (without the newline), NUL-terminated, borrowed until the next call.
 * Returns its length, -2 at end of input, -1 on error. */
long swift_jsonl_next_line(struct swift_jsonl *r, char **line);
void swift_jsonl_close(struct swift_jsonl *r);
/* The name used in messages. */
const char *swift_jsonl_name(const struct swift_jsonl *r);

#endif
