/*
 * progress — the one progress line of every command (swift-train's steps, swift-eval's items,
 * swift-preprocess's rows, swift-download's bytes, GPTQ's layers). It goes to stderr, only when
 * stderr is a terminal in the foreground (or forced with --progress; --no-progress turns it
 * off), is redrawn in place ("\r", the text, erase to the end of the line) at most twice a
 * second (git progress.c) and ends with a newline. When stderr is not a terminal nothing at all
 * is written, so logs, pipes, CI and Slurm output stay byte for byte what they were; periodic
 * status belongs in the trace instead.
 *
 * A counter (items done of a total, with the rate and an ETA):
 *
 *     struct swift_progress pr;
 *     swift_progress_start(&pr, "eval exact", total, "items", SWIFT_PROGRESS_AUTO);
 *     for (...) swift_progress_update(&pr, done);
 *     swift_progress_stop(&pr);            // the final line, ", done." and a newline
 *
 * A line of one's own (swift-train: step, loss, learning rate, tokens/s, elapsed, ETA):
 *
 *     swift_progress_init(&pr, mode);
 *     if (swift_progress_due(&pr))         // the rate limiter: at most one line per 0.5 s
 *         swift_progress_show(&pr, "train: step %ld/%ld, loss %.4f", step, total, loss);
 *     swift_progress_clear(&pr);           // before printing anything else to the terminal
 *     swift_progress_end(&pr);             // a newline after the last line drawn
 *
 * Messages of lib/core/error.h clear the line first (swift_progress_interrupt), so a warning
 * never lands in the middle of it; the next due line redraws it. With TERM=dumb (no escapes)
 * the line is padded with spaces instead of erased. The line has no colours, so NO_COLOR leaves
 * it as it is. On a terminal the text is cut to its width (a wrapped line cannot be redrawn), at
 * the last ", " that fits: put the fields that matter most first.
 * The calls are safe from several threads (one lock), but one line is shown at a time.
 */
#ifndef SWIFT_PROGRESS_H
#define SWIFT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

/* --progress / --no-progress; AUTO (0, a zeroed options struct): when stderr is a terminal */
enum swift_progress_mode {
    SWIFT_PROGRESS_OFF = -1,
    SWIFT_PROGRESS_AUTO = 0,
    SWIFT_PROGRESS_ON = 1,
};

/* The rate limiter's interval: at most two lines a second. */
#define SWIFT_PROGRESS_INTERVAL_NS 500000000LL

struct swift_progress {
    int on;                  /* lines are drawn at all (the mode, the terminal) */
    int forced;              /* --progress: no terminal checks */
    int dumb;                /* TERM=dumb: pad with spaces, no escapes */
    int shown;               /* a line is on the screen, not yet ended */
    int held;                /* t_last holds the next line back (a line drawn or cleared) */
    long draws;              /* lines drawn so far */
    FILE *fp;                /* stderr; tests may point it at a memory stream after init */
    int64_t (*clock)(void);  /* nanoseconds, monotonic; tests may inject one after init */
    int64_t t_start, t_last; /* init and the last line drawn */
    size_t width;            /* of the line on the screen (for TERM=dumb) */
    int cols;                /* the terminal's width; 0: ask it (tests set one) */
    char text[256];          /* the last line drawn */
    /* the counter (swift_progress_start) */
    const char *title, *unit;
    uint64_t total, last_value;
};

/* Whether a command in this mode shows the line: ON yes, OFF no, AUTO when stderr is a
 * terminal. */
int swift_progress_wanted(int mode);

/* A line in this mode (enum swift_progress_mode); nothing is drawn yet. */
void swift_progress_init(struct swift_progress *p, int mode);
/* 1 when a line should be drawn now: on, stderr still in the foreground (unless forced), and
 * none drawn or cleared yet or SWIFT_PROGRESS_INTERVAL_NS since the last draw or clear. */
int swift_progress_due(struct swift_progress *p);
/* Draw this line now (no rate limit: ask swift_progress_due first); a no-op when off. */
void swift_progress_show(struct swift_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Erase the line from the screen before other output; the next line is due an interval later,
 * so that the output lands first (also when it goes through a pipe to the same terminal). */
void swift_progress_clear(struct swift_progress *p);
/* End the line shown with a newline and turn p off; a no-op when none is shown. */
void swift_progress_end(struct swift_progress *p);
/* Clear whichever line is on the screen (lib/core/error.c calls it before every message). */
void swift_progress_interrupt(void);

/* Seconds as "M:SS" or "H:MM:SS" (elapsed times, ETAs). */
void swift_progress_hms(char *buf, size_t cap, double secs);
/* Nanoseconds on CLOCK_MONOTONIC (the default clock). */
int64_t swift_progress_now(void);

/* A counter line "title: done/total unit (pct%), rate unit/s, ETA h:mm:ss" (total 0: unknown,
 * "title: done unit, rate unit/s"). */
void swift_progress_start(struct swift_progress *p, const char *title, uint64_t total,
                          const char *unit, int mode);
void swift_progress_update(struct swift_progress *p, uint64_t value);
/* The final line (if any line was drawn) with ", done." and a newline; p is off after. */
void swift_progress_stop(struct swift_progress *p);

#endif
