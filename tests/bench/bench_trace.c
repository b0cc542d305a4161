/*
 * bench_trace — the trace writer's cost: ns per span event (formatting included) on one thread,
 * and the slowdown of a tight loop with a span per iteration, tracing on vs off.
 * Prints one JSON line per figure on stdout.
 */
#include "lib/core/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile double sink;

/* ~1 µs of arithmetic: the "work" inside a traced region. */
static void work(int n)
{
    double x = 1.0;
    for (int i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
    sink = x;
}

static double loop(long iters, int n)
{
    int64_t t0 = swift_trace_now();
    for (long i = 0; i < iters; i++) {
        SWIFT_SPAN_BEGIN(s);
        work(n);
        SWIFT_SPAN_END(s, "compute", "work");
    }
    return (double)(swift_trace_now() - t0);
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
    char path[] = "/tmp/swift-bench-trace-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    struct swift_trace_config tc = {.stage = "bench", .path = path, .world_size = 1};

    /* 1. raw event cost with two integer args, as swift-train's step spans carry */
    swift_trace_open(&tc);
    int64_t t0 = swift_trace_now();
    for (long i = 0; i < events; i++) {
        struct swift_targ a[] = {SWIFT_TARG_I("step", i), SWIFT_TARG_I("tokens", 4096)};
        swift_trace_span("step", "step", t0 + i * 1000, t0 + i * 1000 + 900, a, 2);
    }
    swift_trace_flush();
    double ns = (double)(swift_trace_now() - t0) / (double)events;
    swift_trace_close();
    printf("{\"bench\":\"trace_event\",\"events\":%ld,\"ns_per_event\":%.1f,\"target_ns\":300}\n",
           events,
           ns);

    /* 2. a tight loop of ~1 µs bodies, off vs on */
    long iters = events / 4;
    double off = loop(iters, 400);
    swift_trace_open(&tc);
    double on = loop(iters, 400);
    swift_trace_close();
    double off2 = loop(iters, 400); /* again, to bound the noise */
    double base = off < off2 ? off : off2;
    printf("{\"bench\":\"trace_overhead\",\"iters\":%ld,\"body_ns\":%.1f,\"on_ns\":%.1f,"
           "\"overhead_pct\":%.2f}\n",
           iters,
           base / (double)iters,
           on / (double)iters,
           100.0 * (on - base) / base);
    unlink(path);
    return 0;
}
