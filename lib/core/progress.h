/*
 * progress — a progress line on stderr, only when stderr is a terminal (or forced with
 * --progress), redrawn at most twice a second (git progress.c). Slurm logs stay clean;
 * periodic status belongs in the trace instead.
 *
 *     struct swift_progress pr;
 *     swift_progress_start(&pr, "tokenizing", total, "docs", force);
 *     for (...) swift_progress_update(&pr, done);
 *     swift_progress_stop(&pr);
 */
#ifndef SWIFT_PROGRESS_H
#define SWIFT_PROGRESS_H

#include <stdint.h>

struct swift_progress {
    int on;
    const char *title, *unit;
    uint64_t total, last_value;
    int64_t t_start, t_last;
};

void swift_progress_start(struct swift_progress *p, const char *title, uint64_t total,
                          const char *unit, int force);
void swift_progress_update(struct swift_progress *p, uint64_t value);
void swift_progress_stop(struct swift_progress *p);

#endif
