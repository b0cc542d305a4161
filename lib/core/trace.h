/*
 * trace — trace events from every swift-tools program (docs/trace-schema.md).
 *
 * One Chrome Trace Event object per line (JSONL), so a file is readable line by line even when
 * the writer was killed, and swift-trace-analyze can stream it. Timestamps are CLOCK_REALTIME
 * microseconds (with ns fractions) so files from one host line up.
 *
 *     struct swift_trace_config tc = {.stage = "preprocess", .path = opts.trace, .argc = argc,
 *                                      .argv = argv};
 *     if (swift_trace_open(&tc) < 0)        // no-op when neither --trace nor SWIFT_TRACE is set
 *         return 1;
 *     int64_t t0 = swift_trace_now();
 *     ... work ...
 *     swift_trace_span("tokenize", "tokenize_batch", t0, swift_trace_now(),
 *                      (struct swift_targ[]){SWIFT_TARG_I("docs", n)}, 1);
 *     swift_trace_counter("tokens/s", rate);
 *     swift_trace_close();                  // also runs at exit and on fatal signals
 *
 * Cost: every call returns at once when tracing is off. When on, each thread formats into its
 * own buffer (no lock on the hot path) and hands whole lines to the kernel with one write(2)
 * on an O_APPEND descriptor when the buffer fills; buffers are flushed at exit, at
 * swift_trace_flush(), and on SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL/SIGINT/SIGTERM/SIGHUP (then the
 * signal's previous disposition runs).
 *
 * Categories are a closed set (swift_trace_categories); the analyzer relies on them.
 */
#ifndef SWIFT_TRACE_H
#define SWIFT_TRACE_H

#include <stdint.h>

#include "kernels/device.h"

struct swift_trace_config {
    const char *stage;    /* "train", "preprocess", ... (required) */
    const char *path;     /* --trace: a file, or a directory if it ends in '/' or exists;
                             NULL: use $SWIFT_TRACE (a directory); neither: tracing off */
    int rank, world_size; /* 0 and 1 for single-process programs */
    const char *device;   /* "cpu", "cuda:0", ... (NULL: "cpu") */
    int argc;             /* recorded in swift_meta.argv */
    char **argv;
    double clock_offset_us; /* this host's clock minus rank 0's, measured at start-up */
};

/* Route what the backends report (kernels/device.h: CUPTI activity, NCCL timings, the errors of
 * those calls) into this trace and into swift_error/swift_warn (lib/core/trace_device.c).
 * swift_trace_open() calls it first, also when tracing stays off. */
void swift_trace_attach_devices(void);

/* Open the trace file and write the metadata events. Returns 0 (also when tracing stays off)
 * or -1 after reporting an error. */
int swift_trace_open(const struct swift_trace_config *cfg);
/* Flush every thread's buffer and close. Safe to call twice. */
void swift_trace_close(void);
/* Write out the calling thread's buffer and every idle buffer. */
void swift_trace_flush(void);
/* Nonzero when events are being recorded. */
int swift_trace_enabled(void);
/* The file being written (NULL when off); borrowed. */
const char *swift_trace_path(void);

/* Wall clock in nanoseconds (CLOCK_REALTIME). */
int64_t swift_trace_now(void);

/* struct swift_targ and SWIFT_TARG_I/D/S/RAW(key, value): kernels/device.h, shared with the
 * backends' device events. */

/* A complete span ("ph":"X") from t0 to t1 (ns from swift_trace_now()). */
void swift_trace_span(const char *cat, const char *name, int64_t t0, int64_t t1,
                      const struct swift_targ *args, int nargs);
/* A counter ("ph":"C") named `name` with one series of the same name. */
void swift_trace_counter(const char *name, double value);
/* A counter with several series: {"args":{k1:v1,k2:v2}}. */
void swift_trace_counters(const char *name, const struct swift_targ *series, int n);
/* The same at a given time (ns on the trace clock), for device-side samples. */
void swift_trace_counters_at(const char *name, int64_t ts, const struct swift_targ *series, int n);
/* An instant ("ph":"i", thread scope) now. */
void swift_trace_instant(const char *cat, const char *name, const struct swift_targ *args,
                         int nargs);
/* A flow event: ph 's' (start) or 'f' (finish, binding to the enclosing slice), at ts ns. */
void swift_trace_flow(char ph, const char *cat, const char *name, uint64_t id, int64_t ts);
/* The same on another track (a GPU stream). */
void swift_trace_flow_tid(char ph, const char *cat, const char *name, uint64_t id, int64_t tid,
                          int64_t ts);
/* Name the calling thread ("thread_name" metadata); the main thread is named at open. */
void swift_trace_thread_name(const char *name);
/* Name another track (a GPU stream: "stream 7"). */
void swift_trace_track_name(int64_t tid, const char *name);
/* The calling thread's track id (its tid). */
int64_t swift_trace_tid(void);
/* Write a span for another track (a GPU stream, a worker): pid stays ours, tid given. */
void swift_trace_span_tid(const char *cat, const char *name, int64_t tid, int64_t t0, int64_t t1,
                          const struct swift_targ *args, int nargs);

/* Detail level: per-op/per-layer spans are emitted only while detail is on (the active steps of
 * a --profile schedule). Cheap to read on the hot path. */
void swift_trace_set_detail(int on);
int swift_trace_detail(void);

/* The closed set of categories, NULL-terminated; swift_trace_category_known() checks one. */
extern const char *const swift_trace_categories[];
int swift_trace_category_known(const char *cat);

/* RAII-style helper for C: SWIFT_SPAN_BEGIN(var); ...; SWIFT_SPAN_END(var, "cat", "name"). */
#define SWIFT_SPAN_BEGIN(var) int64_t var = swift_trace_enabled() ? swift_trace_now() : 0
#define SWIFT_SPAN_END(var, cat, name)                                                             \
    do {                                                                                           \
        if (swift_trace_enabled())                                                                 \
            swift_trace_span(cat, name, var, swift_trace_now(), 0, 0);                             \
    } while (0)

#endif
