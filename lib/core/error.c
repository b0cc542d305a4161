#include "lib/core/error.h"
#include "lib/core/progress.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

static char progname[64] = "swift";
static FILE *errstream;
static long nerrors;
static int quiet;

void swift_set_progname(const char *argv0)
{
    const char *base = argv0 ? strrchr(argv0, '/') : NULL;
    base = base ? base + 1 : (argv0 ? argv0 : "swift");
    snprintf(progname, sizeof(progname), "%s", base);
}

const char *swift_progname(void)
{
    return progname;
}

void swift_error_set_stream(FILE *fp)
{
    errstream = fp;
}

void swift_set_quiet(int q)
{
    quiet = q;
}

long swift_error_count(void)
{
    return nerrors;
}

static FILE *out(void)
{
    return errstream ? errstream : stderr;
}

static void vreport(const char *prefix, const char *file, long line, const char *suffix,
                    const char *fmt, va_list ap)
{
    /* Format into one buffer so concurrent threads do not interleave halves of lines. */
    char buf[4096];
    int n = 0;
    if (file && line > 0)
        n = snprintf(buf, sizeof(buf), "%s:%s:%ld: %s", progname, file, line, prefix);
    else if (file)
        n = snprintf(buf, sizeof(buf), "%s:%s: %s", progname, file, prefix);
    else
        n = snprintf(buf, sizeof(buf), "%s: %s", progname, prefix);
    if (n < 0 || (size_t)n >= sizeof(buf))
        n = (int)sizeof(buf) - 1;
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    if (m > 0)
        n += m;
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    if (suffix)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", suffix);
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    swift_progress_interrupt(); /* not in the middle of a progress line */
    fwrite(buf, 1, (size_t)n, out());
    fflush(out());
}

int swift_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("", NULL, 0, NULL, fmt, ap);
    va_end(ap);
    nerrors++;
    return -1;
}

int swift_error_errno(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    vreport("", NULL, 0, strerror(e), fmt, ap);
    va_end(ap);
    nerrors++;
    return -1;
}

int swift_error_at(const char *file, long line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("", file ? file : "-", line, NULL, fmt, ap);
    va_end(ap);
    nerrors++;
    return -1;
}

void swift_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("warning: ", NULL, 0, NULL, fmt, ap);
    va_end(ap);
}

void swift_info(const char *fmt, ...)
{
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vreport("", NULL, 0, NULL, fmt, ap);
    va_end(ap);
}

int swift_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("", NULL, 0, NULL, fmt, ap);
    va_end(ap);
    fprintf(out(), "Try '%s --help' for more information.\n", progname);
    return SWIFT_EXIT_USAGE;
}

int swift_usage_at(const char *file, long line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("", file ? file : "-", line, NULL, fmt, ap);
    va_end(ap);
    fprintf(out(), "Try '%s --help' for more information.\n", progname);
    return SWIFT_EXIT_USAGE;
}

int swift_exit_code(int status)
{
    switch (status) {
    case SWIFT_DONE:
        return SWIFT_EXIT_OK;
    case SWIFT_MISUSED:
        return SWIFT_EXIT_USAGE;
    case SWIFT_STOPPED:
        return SWIFT_EXIT_INTERRUPTED;
    default:
        return SWIFT_EXIT_FAIL;
    }
}
