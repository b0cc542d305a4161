/*
 * analyze/compare — swift-trace-analyze --compare CONTROL TEST: what changed between two runs.
 *
 * Each side is a file or a directory, in any format the loader reads (our JSONL traces, Kineto
 * JSON, plain or gzip). Each is loaded and analysed as a report of its own (analyze.h), then:
 *
 *  - ops: HTA's TraceDiff.compare_traces and ops_diff (hta/trace_diff.py) on the same events HTA
 *    keeps (cat present and not "Trace"; Kineto timestamps with a fraction rounded as HTA
 *    rounds them unless --no-ns-rounding): per op or kernel name, the count and total duration in
 *    control and test over the chosen ranks and iterations, their differences, the sign of the
 *    count change ("+", "-", "=") and the ops_diff bucket (added, deleted, increased,
 *    decreased, unchanged). Ranks: --ranks LIST, default the lowest rank of each side (HTA's
 *    default). Iterations: --steps A-B on both sides, default the first iteration of each side
 *    (HTA's default). An event's iteration is HTA's: a host event's is the ProfilerStep#N (our
 *    traces: the "step" span, args.step) whose [ts, ts + dur) holds its start, the last such in
 *    file order; a GPU event (stream > 0) takes the iteration of the host event with its
 *    correlation id; stream 0 events have none. A side without steps is compared whole.
 *  - step time: the mean, median and per-part mean step time of the chosen ranks over every
 *    step (or --steps A-B): our phases (data_wait, forward, ...) or the TensorBoard plugin's
 *    roles for Kineto traces, part by part, with HTA's temporal breakdown (idle, compute,
 *    non-compute) and GPU utilization where there are GPU events;
 *  - bottlenecks: the rules' ids found in control only (resolved), in test only (new), in both
 *    (persisting), each at its worst severity on that side.
 *
 * --fail-on regression[=PCT] fails (exit 1) when the test's mean step time is more than PCT %
 * (default 5) above control's; --fail-on warn|critical when the test has a bottleneck at that
 * level that control did not have at that level (new, or worse than before).
 *
 * The document (docs/formats.md, "compare report") is rendered as text, Markdown, JSON or an
 * HTML page with side-by-side tables.
 */
#ifndef SWIFT_ANALYZE_COMPARE_H
#define SWIFT_ANALYZE_COMPARE_H

#include "lib/analyze/analyze.h"

#include <jansson.h>
#include <stdio.h>

/* One side of a comparison: its loaded set, analyses and report (a new reference). */
struct swift_an_side {
    const char *path;
    struct swift_an_set set;
    struct swift_an_proc *procs;
    size_t nprocs;
    json_t *report;
};

/* Load and analyse one side. Returns 0, or SWIFT_FAILED after reporting (caller still releases
 * with swift_an_side_release). */
int swift_an_side_load(struct swift_an_side *sd, const char *path,
                       const struct swift_analyze_opts *o);
void swift_an_side_release(struct swift_an_side *sd);

/* The compare document of two analysed sides (a new reference), or NULL after reporting an
 * error (--steps A-B outside a side's steps). */
json_t *swift_an_compare_build(const struct swift_an_side *control,
                               const struct swift_an_side *test,
                               const struct swift_analyze_opts *o);

/* Render it: text, Markdown, JSON or HTML (swift_an_format). Returns 0 or -1 (write error). */
int swift_an_compare_print(FILE *fp, json_t *doc, int format, int top);

/* --compare: load o->paths[0] (control) and o->paths[1] (test), compare, write, apply the
 * --fail-on gates. Returns 0, or SWIFT_FAILED after reporting (unreadable input, gate hit). */
int swift_an_compare_run(const struct swift_analyze_opts *o);

/* compare_mem.c: the document's "roofline" (the `top` op_roofline rows of the two processes'
 * reports matched by name and input_dims, by the larger device time: control_/test_device_us,
 * _tflops, _fraction, delta_us; null when neither has op_roofline) and "memory" (the peaks:
 * control_/test_peak_bytes, delta_bytes, delta_pct; null when neither recorded memory). */
json_t *swift_an_compare_roofline(json_t *cproc, json_t *tproc, int top);
json_t *swift_an_compare_memory(double cpeak, double tpeak);
/* Their text or Markdown sections. */
void swift_an_compare_print_mem(FILE *fp, json_t *doc, int md, int top);

#endif
