/*
 * device — which accelerator this process can use, and how a backend reports what it observes.
 *
 * Queries. Built with CUDA (make CUDA=1, the default when nvcc is present),
 * swift_device_query() asks the CUDA runtime (kernels/cuda/device.cu); a CUDA build on a machine
 * without a usable GPU reports 0 devices and the reason (every command falls back to the CPU with
 * a one-line notice), and -1 and "no CUDA driver" on a machine without a driver at all (then the
 * fallback is silent: nothing was asked of a GPU). Built without CUDA it reports 0 and "built
 * without CUDA".
 *
 * Reports. Nothing under kernels/ includes lib/: what a backend observes on the device (CUPTI
 * activity, kernels/cuda/cupti.c; NCCL collectives, kernels/cuda/comm_nccl.c) and the errors of
 * those calls go through one sink of callbacks that lib/ installs (swift_trace_open does it,
 * lib/core/trace.h). lib/ writes each swift_dev_event as the trace event of the same phase, and
 * each message as "prog: msg" (swift_error / swift_warn). Without a sink, events are dropped and
 * messages go to stderr as they are.
 *
 *     struct swift_targ a[] = {SWIFT_TARG_I("bytes", n), SWIFT_TARG_S("dtype", "f32")};
 *     swift_dev_emit(&(struct swift_dev_event){.ph = 'X', .cat = "comm", .name = "all_reduce",
 *                                              .ts = t0, .dur = swift_dev_now() - t0,
 *                                              .args = a, .nargs = 2});
 *     return swift_dev_error("%s:%d: %s: %s", __FILE__, __LINE__, #call, why);   // -1
 */
#ifndef SWIFT_KERNELS_DEVICE_H
#define SWIFT_KERNELS_DEVICE_H

#include <stddef.h>
#include <stdint.h>

struct swift_device_info {
    int index;
    char name[256];
    size_t total_mem; /* bytes */
    int cc_major, cc_minor;
    int sm_count;
};

/* Fill up to max entries; returns the number of usable CUDA devices, 0 with why[] set (a driver
 * but no usable device), or -1 with why[] "no CUDA driver ..." when the machine has no CUDA
 * driver at all (a CUDA build on a machine without a GPU stack). */
int swift_device_query(struct swift_device_info *info, int max, char *why, size_t whylen);
/* 1 if this binary was built with CUDA support. */
int swift_device_built_with_cuda(void);

#ifdef SWIFT_HAVE_CUDA
/* Implemented in kernels/cuda/device.cu; swift_device_query() calls it. */
int swift_cuda_query(struct swift_device_info *info, int max, char *why, size_t whylen);
#endif

/* ---- reports ---- */

/* One argument of a trace event: what a backend reports with, and what lib/core/trace.h's
 * spans, counters and instants take (lib/ uses this definition; kernels/ cannot include lib/). */
enum swift_targ_type { SWIFT_TARG_INT, SWIFT_TARG_DBL, SWIFT_TARG_STR, SWIFT_TARG_RAW };
struct swift_targ {
    const char *key;
    int type;
    union {
        int64_t i;
        double d;
        const char *s; /* STR: escaped on output; RAW: a JSON value written as is */
    } v;
};
#define SWIFT_TARG_I(k, x)                                                                         \
    {                                                                                              \
        .key = (k), .type = SWIFT_TARG_INT, .v.i = (int64_t)(x)                                    \
    }
#define SWIFT_TARG_D(k, x)                                                                         \
    {                                                                                              \
        .key = (k), .type = SWIFT_TARG_DBL, .v.d = (double)(x)                                     \
    }
#define SWIFT_TARG_S(k, x)                                                                         \
    {                                                                                              \
        .key = (k), .type = SWIFT_TARG_STR, .v.s = (x)                                             \
    }
#define SWIFT_TARG_RAW(k, x)                                                                       \
    {                                                                                              \
        .key = (k), .type = SWIFT_TARG_RAW, .v.s = (x)                                             \
    }

/* One observation, in Chrome Trace Event terms (docs/trace-schema.md). Strings are borrowed for
 * the duration of the call. */
struct swift_dev_event {
    char ph;          /* 'X' span, 's' / 'f' flow start / finish, 'C' counter, 'M' track name */
    const char *cat;  /* X s f: the category ("kernel", "gpu_memcpy", "comm", "flow", ...) */
    const char *name; /* X s f C: the event's name; M: the name given to track tid */
    int64_t tid;      /* X s f M: the track (a GPU stream's, a host thread's); 0: the calling
                         thread's. C: always the calling thread's */
    int64_t ts, dur;  /* ns on the sink's clock (swift_dev_now()); dur for X only */
    uint64_t id;      /* s f: the flow id (CUPTI's correlation id) */
    const struct swift_targ *args; /* X: its args; C: the counter's series */
    int nargs;
};

/* What lib/ hands the kernels. Every member is required. */
struct swift_dev_sink {
    int (*enabled)(void); /* nonzero while events are wanted (a trace is being written) */
    int64_t (*now)(void); /* the trace clock in ns */
    int64_t (*tid)(void); /* the calling thread's track */
    void (*event)(const struct swift_dev_event *e);
    void (*message)(int warning, const char *msg); /* one line without its newline */
};

/* Install a sink (borrowed: it must outlive every report); NULL restores the default. Call it
 * before the device threads that report start (CUPTI's buffer callbacks). */
void swift_dev_set_sink(const struct swift_dev_sink *sink);

/* For backends: report through the installed sink. */
int swift_dev_tracing(void);
int64_t swift_dev_now(void);
int64_t swift_dev_tid(void);
void swift_dev_emit(const struct swift_dev_event *e);
/* An error ("%s:%d: call: why", formatted like printf); returns -1. */
int swift_dev_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void swift_dev_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
