/*
 * analyze/kineto — the analyses of PyTorch profiler (Kineto) traces, with the definitions of the
 * tools users compare us with (the figures HTA and TensorBoard compute on real traces are
 * the expectations of tests/unit/test_analyze.c and tests/cli/trace-analyze.bats):
 *
 *  - HTA (Holistic Trace Analysis): ns rounding, irrelevant-kernel filtering, temporal breakdown
 *    (idle / compute / non-compute), idle time by cause per stream (host_wait, kernel_wait,
 *    other), kernel breakdown by type and by name, communication-computation overlap, CUDA
 *    launch statistics, NCCL collective arguments;
 *  - the TensorBoard profiler plugin: per-step time breakdown in its role order (kernel > memcpy
 *    > memset > communication > runtime > DataLoader > CPU exec > other, partitioning the step),
 *    step boundaries extended to the device, GPU utilization over all steps.
 */
#ifndef SWIFT_ANALYZE_KINETO_H
#define SWIFT_ANALYZE_KINETO_H

#include "lib/analyze/breakdown.h"
#include "lib/analyze/load.h"

enum swift_an_ktype {
    SWIFT_KT_COMPUTATION,
    SWIFT_KT_COMMUNICATION,
    SWIFT_KT_MEMORY,
    SWIFT_KT_OTHER
};
/* HTA's get_kernel_type() on a kernel name. */
int swift_an_kernel_type(const char *name);
const char *swift_an_ktype_name(int t);

enum swift_an_tbrole {
    SWIFT_TB_KERNEL,
    SWIFT_TB_MEMCPY,
    SWIFT_TB_MEMSET,
    SWIFT_TB_COMM,
    SWIFT_TB_RUNTIME,
    SWIFT_TB_DATALOADER,
    SWIFT_TB_CPU,
    SWIFT_TB_OTHER,
    SWIFT_TB_NROLE
};
extern const char *const swift_an_tbrole_names[SWIFT_TB_NROLE];

struct swift_an_tbstep {
    int64_t step; /* N of ProfilerStep#N */
    double b, e;  /* extended to the device */
    double role[SWIFT_TB_NROLE];
    struct swift_an_seg *seg; /* timeline of the longest steps only (owned), else NULL */
    size_t nseg;
};

struct swift_an_idle_row {
    int32_t stream;
    double host_wait, kernel_wait, other; /* µs */
};

struct swift_an_krow {
    int type;      /* swift_an_ktype */
    uint32_t name; /* interned; SWIFT_AN_NONE = "others" */
    long count;    /* launches */
    long names;    /* kernel names in the row (1, or those grouped into "others") */
    /* HTA's definition (all_kernel_df): per launch when the type has at most num_kernels names;
     * otherwise HTA regroups on the per-name sums, so max/min/mean/std describe those sums
     * (a named row: max = min = mean = sum, std 0). Sample std (ddof 1), 0 for one value. */
    double sum, max, min, mean, std;
    double lmax, lmin, lmean, lstd; /* always per launch, over the row's launches */
};

/* Labels of HTA's kernel-type combination table (bitmask: 1 comp, 2 comm, 4 memory). */
extern const char *const swift_an_kcombo_names[8];

struct swift_an_kineto {
    int has_gpu;
    /* HTA temporal breakdown */
    double idle_us, compute_us, non_compute_us, kernel_us;
    double idle_pct, compute_pct, non_compute_pct;
    /* HTA kernel breakdown: time per combination label, and per-name rows (top per type) */
    double combo_us[8];
    struct swift_an_krow *krows;
    size_t nkrows;
    /* HTA idle time breakdown (per stream) */
    struct swift_an_idle_row *idle;
    size_t nidle;
    /* HTA communication-computation overlap; -1 when there is no communication kernel */
    double overlap_pct, comm_us, comm_exposed_us;
    /* HTA CUDA launch statistics */
    long launches, short_kernels, runtime_outliers, delay_outliers;
    double launch_cpu_us, launch_delay_us; /* means */
    /* TensorBoard plugin: steps, averages, GPU utilization, tail steps dropped */
    struct swift_an_tbstep *steps;
    size_t nsteps;
    double avg[SWIFT_TB_NROLE], avg_total;
    double gpu_util; /* -1 when there are no kernels */
    double sm_eff;   /* TB "Est. SM Efficiency", -1 when unknown */
    /* NCCL collectives seen on GPU kernels */
    long ncoll;
    double coll_us;
};

struct swift_an_kineto_opts {
    double runtime_cutoff_us;           /* 50: HTA short-kernel / runtime outlier cutoff */
    double launch_delay_cutoff_us;      /* 100 */
    double consecutive_kernel_delay_us; /* 30 */
    int num_kernels;                    /* 10 */
    double duration_ratio;              /* 0.8 */
    int hta_rounding;                   /* 1: HTA's ns rounding on float-ts traces */
};
void swift_an_kineto_opts_default(struct swift_an_kineto_opts *o);

/* Run every analysis on one source. `k` is filled (caller releases). Returns 0 or -1.
 * Our own traces (src->kind SWIFT_AN_SWIFT) go through the same code: their GPU events
 * (lib/model/cupti_conv.c) carry Kineto's categories, names and args (stream, correlation, device),
 * so only three things differ: the steps are our "step" spans (args.step numbers them; they
 * also decide HTA's last-step filter, as ProfilerStep#N names do), a kernel's device is
 * args.device instead of its pid, and host spans other than steps count as CPU ops. */
int swift_an_kineto_analyze(const struct swift_an_set *set, const struct swift_an_source *src,
                            const struct swift_an_kineto_opts *o, struct swift_an_kineto *k);
void swift_an_kineto_release(struct swift_an_kineto *k);

/* NCCL collectives (kernels named ncclKernel... or ncclDevKernel...) with their args, longest
 * first; returns the count and a malloc'ed array of event indices into src->ev. */
size_t swift_an_kineto_nccl(const struct swift_an_set *set, const struct swift_an_source *src,
                            size_t **idx);

#endif
