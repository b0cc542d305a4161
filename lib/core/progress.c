#include "lib/core/progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* One lock for every line (download draws from its workers, messages come from any thread) and
 * the line on the screen now, which a message clears first. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct swift_progress *active;

int64_t swift_progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int swift_progress_wanted(int mode)
{
    return mode == SWIFT_PROGRESS_ON || (mode == SWIFT_PROGRESS_AUTO && isatty(2));
}

void swift_progress_init(struct swift_progress *p, int mode)
{
    memset(p, 0, sizeof(*p));
    p->on = swift_progress_wanted(mode);
    p->forced = mode == SWIFT_PROGRESS_ON;
    const char *term = getenv("TERM");
    p->dumb = term && !strcmp(term, "dumb");
    p->fp = stderr;
    p->clock = swift_progress_now;
    p->t_start = p->clock();
}

/* A background job (`cmd &` on a terminal) draws nothing: the line would land in the middle of
 * whatever the user does next (git's is_foreground_fd). */
static int foreground(const struct swift_progress *p)
{
    int fd = fileno(p->fp);
    pid_t fg = tcgetpgrp(fd);
    return fg < 0 || fg == getpgrp();
}

int swift_progress_due(struct swift_progress *p)
{
    if (!p->on)
        return 0;
    if (p->held && p->clock() - p->t_last < SWIFT_PROGRESS_INTERVAL_NS)
        return 0;
    return p->forced || foreground(p);
}

/* Erase the line (mu held). */
static void erase(struct swift_progress *p)
{
    if (!p->shown)
        return;
    if (p->dumb)
        fprintf(p->fp, "\r%*s\r", (int)p->width, "");
    else
        fputs("\r\033[K", p->fp);
    fflush(p->fp);
    p->shown = 0;
    p->width = 0;
    if (active == p)
        active = NULL;
}

/* How much of the text fits in cols - 1 columns (a full last column wraps on some terminals):
 * up to the last ", " that fits, so that whole fields go (lines put the important ones first). */
static size_t fit(const char *text, size_t n, int cols)
{
    if (cols <= 1 || n < (size_t)cols)
        return n;
    size_t cut = (size_t)cols - 1;
    for (size_t k = cut; k > 0; k--)
        if (text[k - 1] == ',' && text[k] == ' ')
            return k - 1;
    return cut;
}

/* Draw p->text (mu held), cut to the terminal's width. */
static void draw(struct swift_progress *p)
{
    struct winsize ws;
    int cols = p->cols;
    if (!cols && ioctl(fileno(p->fp), TIOCGWINSZ, &ws) == 0)
        cols = ws.ws_col;
    size_t n = fit(p->text, strlen(p->text), cols);
    if (active && active != p)
        erase(active);
    if (p->dumb) {
        int pad = p->width > n ? (int)(p->width - n) : 0;
        fprintf(p->fp, "\r%.*s%*s", (int)n, p->text, pad, "");
    } else {
        fprintf(p->fp, "\r%.*s\033[K", (int)n, p->text);
    }
    fflush(p->fp);
    p->width = n > p->width ? n : p->width;
    p->shown = 1;
    p->draws++;
    p->held = 1;
    p->t_last = p->clock();
    active = p;
}

void swift_progress_show(struct swift_progress *p, const char *fmt, ...)
{
    if (!p->on)
        return;
    pthread_mutex_lock(&mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->text, sizeof(p->text), fmt, ap);
    va_end(ap);
    draw(p);
    pthread_mutex_unlock(&mu);
}

void swift_progress_clear(struct swift_progress *p)
{
    if (!p->on)
        return;
    pthread_mutex_lock(&mu);
    erase(p);
    /* the caller writes something now (maybe through another process: `| jq`): it has an
     * interval to land before the line comes back */
    p->held = 1;
    p->t_last = p->clock();
    pthread_mutex_unlock(&mu);
}

void swift_progress_end(struct swift_progress *p)
{
    pthread_mutex_lock(&mu);
    if (p->on && p->shown) {
        fputc('\n', p->fp);
        fflush(p->fp);
    }
    p->shown = 0;
    p->on = 0;
    if (active == p)
        active = NULL;
    pthread_mutex_unlock(&mu);
}

void swift_progress_interrupt(void)
{
    pthread_mutex_lock(&mu);
    if (active)
        erase(active);
    pthread_mutex_unlock(&mu);
}

void swift_progress_hms(char *buf, size_t cap, double secs)
{
    long s = secs > 0 && secs < 1e9 ? (long)(secs + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

void swift_progress_start(struct swift_progress *p, const char *title, uint64_t total,
                          const char *unit, int mode)
{
    swift_progress_init(p, mode);
    p->title = title;
    p->unit = unit ? unit : "";
    p->total = total;
}

static void counter(struct swift_progress *p, uint64_t v, int final)
{
    double secs = (double)(p->clock() - p->t_start) / 1e9;
    double rate = secs > 0 ? (double)v / secs : 0;
    int prec = rate >= 100 ? 0 : rate >= 1 || rate == 0 ? 1 : 2; /* 0.04 layers/s, not 0.0 */
    char eta[48] = "";
    if (!final && p->total > v && rate > 0) {
        char t[24];
        swift_progress_hms(t, sizeof(t), (double)(p->total - v) / rate);
        snprintf(eta, sizeof(eta), ", ETA %s", t);
    }
    if (p->total)
        swift_progress_show(p,
                            "%s: %llu/%llu %s (%.0f%%), %.*f %s/s%s%s",
                            p->title,
                            (unsigned long long)v,
                            (unsigned long long)p->total,
                            p->unit,
                            100.0 * (double)v / (double)p->total,
                            prec,
                            rate,
                            p->unit,
                            eta,
                            final ? ", done." : "");
    else
        swift_progress_show(p,
                            "%s: %llu %s, %.*f %s/s%s",
                            p->title,
                            (unsigned long long)v,
                            p->unit,
                            prec,
                            rate,
                            p->unit,
                            final ? ", done." : "");
}

void swift_progress_update(struct swift_progress *p, uint64_t value)
{
    p->last_value = value;
    if (swift_progress_due(p))
        counter(p, value, 0);
}

void swift_progress_stop(struct swift_progress *p)
{
    if (p->on && p->draws)
        counter(p, p->last_value, 1);
    swift_progress_end(p);
}
