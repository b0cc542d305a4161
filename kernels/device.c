/* device — see device.h: the device query and the report sink's default. */
#include "kernels/device.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "kernels/banned.h"

int swift_device_built_with_cuda(void)
{
#ifdef SWIFT_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int swift_device_query(struct swift_device_info *info, int max, char *why, size_t whylen)
{
#ifdef SWIFT_HAVE_CUDA
    return swift_cuda_query(info, max, why, whylen);
#else
    (void)info;
    (void)max;
    snprintf(why, whylen, "built without CUDA");
    return 0;
#endif
}

/* ---- the default sink: no trace, messages on stderr ---- */

static int no_trace(void)
{
    return 0;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t no_tid(void)
{
    return 0;
}

static void drop(const struct swift_dev_event *e)
{
    (void)e;
}

static void to_stderr(int warning, const char *msg)
{
    fprintf(stderr, "%s%s\n", warning ? "warning: " : "", msg);
}

static const struct swift_dev_sink default_sink = {
    .enabled = no_trace,
    .now = realtime_ns,
    .tid = no_tid,
    .event = drop,
    .message = to_stderr,
};
static const struct swift_dev_sink *sink = &default_sink;

void swift_dev_set_sink(const struct swift_dev_sink *s)
{
    sink = s ? s : &default_sink;
}

int swift_dev_tracing(void)
{
    return sink->enabled();
}

int64_t swift_dev_now(void)
{
    return sink->now();
}

int64_t swift_dev_tid(void)
{
    return sink->tid();
}

void swift_dev_emit(const struct swift_dev_event *e)
{
    sink->event(e);
}

static void report(int warning, const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    sink->message(warning, msg);
}

int swift_dev_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(0, fmt, ap);
    va_end(ap);
    return -1;
}

void swift_dev_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(1, fmt, ap);
    va_end(ap);
}
