#include "lib/core/progress.h"
#include "lib/core/trace.h"

#include <stdio.h>
#include <unistd.h>

#include "lib/core/banned.h"

void swift_progress_start(struct swift_progress *p, const char *title, uint64_t total,
                          const char *unit, int force)
{
    p->on = force || isatty(2);
    p->title = title;
    p->unit = unit ? unit : "";
    p->total = total;
    p->last_value = 0;
    p->t_start = swift_trace_now();
    p->t_last = 0;
}

static void draw(struct swift_progress *p, uint64_t v, int final)
{
    double secs = (double)(swift_trace_now() - p->t_start) / 1e9;
    double rate = secs > 0 ? (double)v / secs : 0;
    if (p->total)
        fprintf(stderr,
                "\r%s: %3.0f%% (%llu/%llu %s) %.1f %s/s%s",
                p->title,
                100.0 * (double)v / (double)p->total,
                (unsigned long long)v,
                (unsigned long long)p->total,
                p->unit,
                rate,
                p->unit,
                final ? ", done.\n" : "");
    else
        fprintf(stderr,
                "\r%s: %llu %s, %.1f %s/s%s",
                p->title,
                (unsigned long long)v,
                p->unit,
                rate,
                p->unit,
                final ? ", done.\n" : "");
    fflush(stderr);
}

void swift_progress_update(struct swift_progress *p, uint64_t value)
{
    p->last_value = value;
    if (!p->on)
        return;
    int64_t now = swift_trace_now();
    if (now - p->t_last < 500000000)
        return;
    p->t_last = now;
    draw(p, value, 0);
}

void swift_progress_stop(struct swift_progress *p)
{
    if (p->on && p->t_last)
        draw(p, p->last_value, 1);
    p->on = 0;
}
