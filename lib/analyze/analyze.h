/*
 * analyze — the lib/analyze wing, swift-trace-analyze's library: it reads traces (our JSONL
 * trace files and PyTorch profiler (Kineto) JSON traces, plain or gzip, always as streams), runs
 * per process HTA's and the TensorBoard plugin's analyses and our step-phase breakdown, applies
 * the bottleneck rules, and builds one report document that every output format renders.
 *
 *     struct swift_analyze_opts o;
 *     swift_analyze_opts_default(&o);
 *     o.paths = argv + argi; o.npaths = argc - argi;
 *     int rc = swift_analyze_run(&o);   // 0 ok, 1 failure or --fail-on hit, reported
 *
 * The report is one JSON document (docs/formats.md, section "report"): text, Markdown and HTML
 * are renderings of it (lib/analyze/report.h), so every format says the same thing.
 *
 * The files, in the order the data flows through them:
 *   stream.c       bytes to events: a reader over gzip, plain files or memory, a cutter of one
 *                  JSON value at a time, and the walker that hands each event to scan.c or, in
 *                  parallel batches, to jansson, in file order (load.h: swift_an_stream_file)
 *   scan.c         the fast event scanner: the few fields the loader reads, grammar-checked
 *                  (anything unusual is left to jansson, so results and errors are jansson's)
 *   load.c         events to records (load.h): interning, one compact record per duration
 *                  event, memory counters, metadata, collectives; files and directories
 *   breakdown.c    time intervals (merge, intersection, difference) and step timelines
 *   kineto.c       HTA's numbers (kineto.h): temporal, kernel types and names, idle time by
 *                  cause, communication-computation overlap, launch statistics, NCCL
 *   tensorboard.c  the TensorBoard plugin's numbers: roles, steps extended to the device,
 *                  each step claimed by the roles in order, GPU utilization
 *   analyze.c      per process: our phases (data_wait, forward, ...) or the Kineto roles; the
 *                  report document; swift_analyze_run
 *   perrank.c      many ranks (more than 16 files, no --merge): each file read, analysed and
 *                  reduced to its report object and summaries in the -j pool, its events freed
 *   ops.c          the per-op table of --profile steps (op, phase by containment, time per
 *                  step, share, calls, GFLOP/s) and the wall time by phase of a process
 *                  without steps (its top-level spans)
 *   collectives.c  each collective matched across the ranks of a job: skew (waiting for the
 *                  last rank) vs transfer, nccl-tests' algbw/busbw, skew charged to the late rank
 *   roofline.c     FLOPs and bytes per op class from input shapes, device peaks (roofline.h)
 *   oproof.c       the op roofline table of Kineto traces with record_shapes ("op_roofline")
 *   memory.c       device memory per device: peak, reserved and fragmentation at the peak,
 *                  a bounded timeline (Kineto [memory] instants, our memory counters)
 *   rules.c        the bottleneck rules (rules.h, docs/bottlenecks.md); rule_roofline.c the
 *                  rule low_efficiency on the op roofline table; rule_rl.c the RL rules;
 *                  rule_infer.c the inference rules; thresholds.c the ids and thresholds
 *   rl.c           the view of an RL (GRPO) step: generate (prefill, decode), reward (per
 *                  function), ref_logps, old_logps, train per step; decode rate ("rl")
 *   infer.c        the view of a swift-infer run: TTFT and TPOT percentiles, throughput,
 *                  batch occupancy, KV cache pressure, prefill/decode interference
 *                  ("inference"); infer_report.c its text
 *   cmdline.c      the exact new command line a remedy gives
 *   patch.c        --emit-patch: a remedy's command as a unified diff of the run's config
 *                  file (swift_meta.config, checked by sha256) or of command.sh
 *   lanes.c        the longest step's spans per host thread and GPU stream, bounded
 *                  ("worst_step": the HTML report's lanes)
 *   report.c       text and Markdown, and the atomic write (report.h); report_html.c the page,
 *                  report_svg.c its charts, report_table.c what it shares with the compare
 *                  page (head, script, tables and cells)
 *   merge.c        --merge: one Perfetto-loadable trace of every input (merge.h)
 *   compare.c      --compare CONTROL TEST: HTA TraceDiff per op, step time by part,
 *                  bottlenecks resolved and new, the regression gate (compare.h);
 *                  compare_report.c its text, Markdown and HTML
 *   internal.h     what only these files share (allocation, qsort_r, the fast path, ...)
 *
 * A new bottleneck rule goes in rules.c (or a rule_AREA.c beside it):
 *   1. its threshold: a field of struct swift_an_thresholds (below), its default in
 *      swift_an_thresholds_default() (thresholds.c), its id in swift_an_rule_ids[] and the field's
 * address at the same index in swift_an_threshold_set(), so --threshold ID=VALUE sets it;
 *   2. a function rule_ID(list, p, o) that reads the analyses of one process (struct
 *      swift_an_proc: steps and their parts, GPU figures in p->k) and, when the value crosses
 *      the threshold, calls add() with sev_above() or sev_below(), sets "evidence" (the figures
 *      and worst_spans()) and set_remedy() with the advice and, when the trace recorded its
 *      argv, the exact new command line (swift_an_argv_with());
 *   3. a call in swift_an_rules_apply() (per process, or once over all of them as straggler);
 *   4. a section in docs/bottlenecks.md and a case in tests/unit/test_analyze.c.
 * Ordering, --fail-on and every output format pick it up with no other change.
 */
#ifndef SWIFT_ANALYZE_H
#define SWIFT_ANALYZE_H

#include "lib/analyze/kineto.h"
#include "lib/analyze/load.h"

#include <jansson.h>

#define SWIFT_REPORT_SCHEMA_VERSION 1

enum swift_an_format { SWIFT_FMT_TEXT, SWIFT_FMT_MD, SWIFT_FMT_JSON, SWIFT_FMT_HTML };
enum swift_an_severity { SWIFT_SEV_NONE = 0, SWIFT_SEV_INFO, SWIFT_SEV_WARN, SWIFT_SEV_CRITICAL };

/* Rule thresholds (docs/bottlenecks.md); set with --threshold RULE=VALUE. */
struct swift_an_thresholds {
    double data_stall_pct;      /* 10: data wait share of step time */
    double comm_bound_pct;      /* 40: exposed communication share of step time */
    double launch_short_pct;    /* 30: share of launches whose kernel is shorter than the launch */
    double gpu_idle_pct;        /* 50: GPU busy below this share of step time */
    double straggler_pct;       /* 10: a rank's step time above the median */
    double memory_headroom_pct; /* 90: peak above this share of device memory */
    double ckpt_stall_pct;      /* 5: checkpoint share of wall time */
    double serial_preprocess_pct; /* 50: tokenization share of wall time on one thread */
    double oversubscription_x;    /* 3: a host phase's p90 over its median across steps */
    double low_efficiency_pct;    /* 20: device time lost against the ops' roofline, of steps */
    double generation_bound_pct;  /* 50: RL: generate share of the generating steps' time */
    double reward_stall_pct;      /* 10: RL: reward share of the generating steps' time */
    double ref_logps_cost_pct;    /* 20: RL: reference log-probs share of the same */
    double queue_bound_ttft_pct;  /* 50: inference: queue share of the time to first token */
    double kv_pressure_pct;       /* 95: inference: peak KV blocks used of the pool */
    double low_occupancy_pct;     /* 50: inference: running batch of max_num_seqs, queue waiting */
    double prefill_interference_pct; /* 50: inference: mixed steps slower than pure decode ones */
    double image_starved_pct;        /* 10: VL steps: data wait while the loader loads images */
    double vision_bound_pct;         /* 50: VL steps: the vision tower's share of the model */
};
void swift_an_thresholds_default(struct swift_an_thresholds *t);
/* "data_stall=15" → sets one threshold; returns 0 or -1 (unknown rule or bad number). */
int swift_an_threshold_set(struct swift_an_thresholds *t, const char *spec);
/* Rule ids in report order, NULL-terminated. */
extern const char *const swift_an_rule_ids[];

/* One step of one process, with its time split into the process's parts (roles or phases). */
#define SWIFT_AN_MAX_PARTS 8
struct swift_an_step {
    int64_t step;
    double ts, dur; /* µs, aligned to rank 0's clock */
    double part[SWIFT_AN_MAX_PARTS];
    struct swift_an_seg *seg; /* the parts in time order (owned; Kineto: longest steps only) */
    size_t nseg;
};

/* This process's collectives matched across the ranks of its job (collectives.c), summed. */
struct swift_an_coll_stats {
    size_t n;                          /* matched collectives */
    double us, skew_us, transfer_us;   /* their time on this rank, split */
    double bw_bytes, bw_us, bus_bytes; /* those with known bytes: bytes, transfer time, bytes x
                                          nccl-tests' bus factor */
    size_t last_n;    /* collectives this rank arrived last at (and made others wait) */
    double caused_us; /* the longest wait of another rank at each of those, summed */
};

/* The analysis of one input process. */
struct swift_an_proc {
    const struct swift_an_source *src;
    char label[256]; /* "swift-train rank 3 @ host" or the Kineto trace's name */
    int rank;
    int npart;
    const char *const *part_names;
    int data_part, comm_part; /* index of the data-wait and communication parts, -1 */
    struct swift_an_step *steps;
    size_t nsteps;
    double part_avg[SWIFT_AN_MAX_PARTS], step_avg, step_median, step_max;
    double t0, t1;           /* first start, last end (aligned) */
    double ckpt_us, eval_us; /* spans outside steps */
    double gpu_util;         /* -1 when unknown */
    /* our traces with GPU events: per step, the time the GPU (kernels, copies, memsets) is
     * idle while each part runs (the host phase the GPU waits on), averaged over steps */
    double gpu_idle_part[SWIFT_AN_MAX_PARTS];
    int has_kineto; /* k is filled: Kineto traces, and ours with GPU events (the same
                       analyses; src->kind tells the part layout apart) */
    struct swift_an_kineto k;
    /* preprocess */
    double tok_busy_us, tok_sum_us;
    int tok_threads;
    double mem_peak, mem_total, mem_peak_ts;
    double mem_reserved; /* reserved bytes at the peak (Kineto "Total Reserved"), -1 unknown */
    int mem_dev;         /* the device of mem_peak */
    struct swift_an_coll_stats coll;
};

struct swift_analyze_opts {
    char **paths;
    int npaths;
    int format;         /* swift_an_format */
    const char *output; /* report file (atomic) instead of stdout; NULL: stdout */
    int fail_on;        /* SWIFT_SEV_WARN / _CRITICAL, 0: never */
    int strict;         /* a damaged input fails the run */
    int top;            /* rows in the kernel table and worst spans (default 5) */
    int threads;        /* -j: processes analysed (and, above 16 files, read) in parallel
                           (default 1; 0: one per CPU) */
    struct swift_an_thresholds th;
    struct swift_an_kineto_opts kopts;
    /* --merge */
    const char *merge;     /* OUT.json or OUT.json.gz */
    long step_lo, step_hi; /* --steps A-B; -1 = all */
    const char *ranks;     /* --ranks LIST */
    int window;            /* --window N: N steps around each worst step, -1 = off */
    unsigned long long merge_warn_bytes;
    const char *trace; /* --trace (our own trace of this run) */
    int emit_patch;    /* --emit-patch: 1 the first bottleneck's patch, 2 all; 0 the report */
    /* --compare CONTROL TEST (compare.h): paths[0] against paths[1]; --steps and --ranks
     * choose what is compared */
    int compare;
    double regress_pct; /* --fail-on regression[=PCT]: fail above PCT % slower; < 0: off */
};
#define SWIFT_AN_REGRESSION_PCT 5.0 /* --fail-on regression without =PCT */
void swift_analyze_opts_default(struct swift_analyze_opts *o);

/* Load, analyse, report (with o->compare: compare two runs, lib/analyze/compare.h). Returns 0,
 * or SWIFT_FAILED after reporting (lib/core/error.h). */
int swift_analyze_run(const struct swift_analyze_opts *o);

/* The step of p whose span holds ts (p->steps in time order, as built), or -1. */
long swift_an_step_of(const struct swift_an_proc *p, double ts);
/* The pieces, for tests: analyse a loaded set into procs (caller frees with
 * swift_an_procs_free), and build the report document (a new reference). */
int swift_an_procs_build(const struct swift_an_set *set, const struct swift_analyze_opts *o,
                         struct swift_an_proc **procs, size_t *nprocs);
void swift_an_procs_free(struct swift_an_proc *procs, size_t n);
json_t *swift_an_report_build(const struct swift_an_set *set, const struct swift_an_proc *procs,
                              size_t n, const struct swift_analyze_opts *o);

#endif
