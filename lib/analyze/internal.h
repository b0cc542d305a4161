/*
 * analyze/internal — what only the files of lib/analyze share (not a public header: nothing
 * outside lib/analyze includes it; the wing's manual is lib/analyze/analyze.h).
 *
 * Memory: lib/core/alloc.h's swift_x* allocations (out of memory exits with a message; the
 * analyzer has nothing to save).
 * Sorting: qsort_r with the context passed in, never a file-scope global.
 */
#ifndef SWIFT_ANALYZE_INTERNAL_H
#define SWIFT_ANALYZE_INTERNAL_H

#include "lib/analyze/analyze.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* qsort_r (glibc) that accepts empty (NULL) arrays; arg is handed to every cmp call. */
static inline void swift_an_sort_r(void *base, size_t n, size_t size,
                                   int (*cmp)(const void *, const void *, void *), void *arg)
{
    if (n > 1)
        qsort_r(base, n, size, cmp, arg);
}

/* ---------- stream.c + scan.c: events from a file ---------- */

/* Called instead of the jansson callback for an event the fast scanner read (scan.c). */
typedef int (*swift_an_fast_fn)(void *ctx, const struct swift_an_fev *fe, uint64_t off, long line);
/* swift_an_stream_file/_buffer (load.h) with a fast path: events the scanner reads go to
 * fast_fn, the others (and every event when fast_fn is NULL) through jansson to fn. Bad lines
 * of a JSONL file are skipped; with dmg they are counted and named there (load.h), without it
 * skipped silently (--merge re-reads files the loader has already reported). */
int swift_an_stream_file_fast(const char *path, swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                              swift_an_meta_fn meta_fn, void *ctx, struct swift_an_damage *dmg);
int swift_an_stream_buffer_fast(const char *name, const void *data, size_t len,
                                swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                                swift_an_meta_fn meta_fn, void *ctx, struct swift_an_damage *dmg);
/* Count one bad line at `line` of `path` in d (may be NULL: nothing counted or said) and name
 * it on stderr ("prog:FILE:LINE: WHAT (line skipped)") while fewer than SWIFT_AN_BAD_SHOWN
 * were. Returns 0 (the caller goes on with the next line). */
int swift_an_damage_note(struct swift_an_damage *d, const char *path, long line, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));
/* on: the calling thread's reads parse on it alone (no OpenMP team of their own), for
 * threads of a pool that each read one file. */
void swift_an_stream_serial(int on);
/* A ".jsonl" name: one event per line (our traces). */
int swift_an_name_is_jsonl(const char *name);

/* The fast event scanner (scan.c). 0: *f holds the event (its strings NUL-terminated in place),
 * *used its length in bytes and *nl the newlines in it (both may be NULL); -1: leave it to
 * jansson (nothing written). With one_line, an event with a newline inside is left to jansson
 * too (JSONL). */
int swift_an_fast_parse(char *buf, size_t len, struct swift_an_fev *f, size_t *used, long *nl,
                        int one_line);

/* ---------- load.c: one file at a time (perrank.c) ---------- */

/* Append to *files (n used, cap allocated; each malloc'ed) the trace files swift_an_load_path
 * would load for path, in its order. Returns how many, or -1 when path itself is unusable
 * (said why; an unusable entry inside a directory is said and skipped). */
int swift_an_list_path(const char *path, int flags, char ***files, size_t *n, size_t *cap);
/* Intern every string of src into dst in src's id order: map[i] = dst's id of src's i. Loading
 * files one after the other into one table or each into its own and merging those in the same
 * order gives the same ids. */
void swift_an_strtab_merge(struct swift_an_strtab *dst, const struct swift_an_strtab *src,
                           uint32_t *map);
/* v: a table of n ids that holds src's strings at their ids map[i] (borrowed; every other id
 * reads ""), for analysing src's file with the ids of the merged table while other threads
 * grow it. Release with swift_an_strtab_view_release. */
void swift_an_strtab_view(struct swift_an_strtab *v, const struct swift_an_strtab *src,
                          const uint32_t *map, uint32_t n);
void swift_an_strtab_view_release(struct swift_an_strtab *v);
/* Rewrite s's interned ids (names, categories, string pids/tids, collective args) by map[0..n). */
void swift_an_source_remap(struct swift_an_source *s, const uint32_t *map, uint32_t n);
/* Free s's events, collective args and memory timeline, keeping what describes it. */
void swift_an_source_drop_events(struct swift_an_source *s);

/* ---------- load.c: damaged lines in the report ---------- */

/* A process's damage into its report object: "bad_lines", "bad_line_numbers" (the first
 * ones), "truncated_tail_line" (null when whole). */
void swift_an_damage_json(json_t *proc, const struct swift_an_damage *d);
/* The report's one-line note on a process's damage ("2 bad lines skipped (lines 17, 40)"),
 * into b; NULL when the file was whole. */
const char *swift_an_damage_text(json_t *proc, char *b, size_t n);
/* --strict with bad lines: the error naming the first one and the count. */
void swift_an_damage_strict(const struct swift_an_set *set);

/* ---------- kineto.c + tensorboard.c ---------- */

/* A small int64 -> double hash map (open addressing; INT64_MIN marks an empty slot). Inline:
 * the analyses call it once or twice per event. */
struct swift_an_imap {
    int64_t *key;
    double *val;
    size_t cap, n;
};

static inline size_t swift_an_imap_slot(size_t cap, int64_t k)
{
    return ((uint64_t)k * 0x9e3779b97f4a7c15ULL) & (cap - 1);
}

static inline void swift_an_imap_grow(struct swift_an_imap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 1024;
    int64_t *nk = swift_xmalloc(nc * sizeof(*nk));
    double *nv = swift_xmalloc(nc * sizeof(*nv));
    for (size_t i = 0; i < nc; i++)
        nk[i] = INT64_MIN;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->key[i] == INT64_MIN)
            continue;
        size_t h = swift_an_imap_slot(nc, m->key[i]);
        while (nk[h] != INT64_MIN)
            h = (h + 1) & (nc - 1);
        nk[h] = m->key[i];
        nv[h] = m->val[i];
    }
    free(m->key);
    free(m->val);
    m->key = nk;
    m->val = nv;
    m->cap = nc;
}

/* Insert k with value v; a key already present keeps its value. */
static inline void swift_an_imap_put(struct swift_an_imap *m, int64_t k, double v)
{
    if (m->n * 2 + 2 > m->cap)
        swift_an_imap_grow(m);
    size_t h = swift_an_imap_slot(m->cap, k);
    while (m->key[h] != INT64_MIN && m->key[h] != k)
        h = (h + 1) & (m->cap - 1);
    if (m->key[h] == INT64_MIN) {
        m->key[h] = k;
        m->n++;
        m->val[h] = v;
    }
}

/* The value slot of k, inserted with v when absent. */
static inline double *swift_an_imap_ref(struct swift_an_imap *m, int64_t k, double v)
{
    if (m->n * 2 + 2 > m->cap)
        swift_an_imap_grow(m);
    size_t h = swift_an_imap_slot(m->cap, k);
    while (m->key[h] != INT64_MIN && m->key[h] != k)
        h = (h + 1) & (m->cap - 1);
    if (m->key[h] == INT64_MIN) {
        m->key[h] = k;
        m->n++;
        m->val[h] = v;
    }
    return &m->val[h];
}

/* 1 and *v (may be NULL) when k is present, else 0. */
static inline int swift_an_imap_get(const struct swift_an_imap *m, int64_t k, double *v)
{
    if (!m->cap)
        return 0;
    size_t h = swift_an_imap_slot(m->cap, k);
    while (m->key[h] != INT64_MIN) {
        if (m->key[h] == k) {
            if (v)
                *v = m->val[h];
            return 1;
        }
        h = (h + 1) & (m->cap - 1);
    }
    return 0;
}

static inline void swift_an_imap_free(struct swift_an_imap *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof(*m));
}

/* The TensorBoard plugin's numbers (tensorboard.c): k->steps, avg, avg_total and gpu_util. */
void swift_an_tensorboard(const struct swift_an_set *set, const struct swift_an_source *src,
                          struct swift_an_kineto *k);

/* ---------- analyze.c ---------- */

/* Our traces' step phases: data_wait, forward, backward, grad_sync, optimizer, other. */
extern const char *const swift_an_phase_names[];
/* The phase a span names by itself (its name, or its category: data, comm, optim), as an index
 * into swift_an_phase_names, or -1 (per-op and other spans: their phase is where they lie). */
int swift_an_phase_of(const char *name, const char *cat);

/* Process i of the set into *p (its part layout, steps, GPU analyses; p->src = &set->src[i]). */
void swift_an_proc_one(const struct swift_an_set *set, const struct swift_analyze_opts *o, size_t i,
                       struct swift_an_proc *p);
/* A process's object of the report's "processes" (docs/formats.md); reads its events; its
 * "worst_step" lanes (lanes.c) when `lanes`, else null. */
json_t *swift_an_proc_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                           const struct swift_analyze_opts *o, int lanes);
/* swift_an_report_build with the processes' objects already built (pjs[i] for procs[i], the
 * references are taken; NULL: built here from the events); their "worst_step" is then set from
 * plane[i] (borrowed; NULL entries: null) for the processes swift_an_lanes_pick keeps. */
json_t *swift_an_report_build_procs(const struct swift_an_set *set,
                                    const struct swift_an_proc *procs, size_t n, json_t **pjs,
                                    json_t *const *plane, const struct swift_analyze_opts *o);

/* ---------- perrank.c: many ranks, each loaded and analysed alone ---------- */

/* Above this many input files (and without --merge) each file is read, analysed and reduced to
 * what the report keeps of it inside the -j pool, one file per task, so memory holds about -j
 * files' events at once (perrank.c); up to it every file is loaded first, as --merge needs. */
#define SWIFT_AN_PER_RANK_MIN (SWIFT_AN_RANKS_DETAIL + 1)
/* Read, analyse and reduce each of files[0..nfiles) (swift_an_list_path's, in load order) in
 * the -j pool, into set (its strings, merged in file order, so every id is the one loading all
 * files into set gives; its sources without their events), procs and the report, as
 * swift_an_procs_build and swift_an_report_build give on the whole set. Returns 0, or
 * SWIFT_FAILED after saying why (swift_an_loaded_check); *procs is then NULL. */
int swift_an_per_rank_run(struct swift_an_set *set, char **files, size_t nfiles,
                          const struct swift_analyze_opts *o, struct swift_an_proc **procs,
                          size_t *nprocs, json_t **report);
/* After loading: --strict with bad lines or failed inputs, or nothing read, fails (said why:
 * SWIFT_FAILED); inputs left out are warned about; else 0. */
int swift_an_loaded_check(const struct swift_an_set *set, const struct swift_analyze_opts *o);

/* ---------- ops.c: the op table of --profile steps, wall time by phase ---------- */

/* Our traces' --profile steps: {"steps": profiled steps, "step_us": their mean, "n_rows":
 * rows in all, "rows": the `top` (op, phase) pairs by self time: name, phase (the enclosing phase
 * span, by containment), calls_per_step, self_us_per_step, total_us_per_step, share (self / step),
 * gflops (args.flops / time, null when the spans carry none)}; null without per-op spans. */
json_t *swift_an_ops_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top);
/* A process without steps: {"wall_us", "untraced_us" (wall covered by no span), "n_rows":
 * rows in all, "rows": the `top` top-level spans by name (on any thread; nested ones belong to
 * them) by time: name, cat, count, us, share (of wall)}; null when the process has steps. */
json_t *swift_an_phases_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                             int top);

/* Indices of the `top` longest steps, longest first (malloc'ed); returns min(top, nsteps). */
size_t swift_an_worst_steps(const struct swift_an_proc *p, int top, size_t **out);

/* ---------- infer.c + rule_infer.c: the view of an inference run (swift-infer) ---------- */

/* The q-quantile (0..1) of v[0..n) with linear interpolation between the closest ranks (numpy's
 * default); sorts v. NAN when n is 0. */
double swift_an_percentile(double *v, size_t n, double q);
/* The report's "inference" (docs/formats.md) from the process's infer spans; null without. */
json_t *swift_an_infer_json(const struct swift_an_proc *p);
/* rule_infer.c: queue_bound_ttft, kv_pressure, low_occupancy and prefill_interference on one
 * process (its report object `proc`, with "inference"). */
void swift_an_rules_infer(json_t *list, const struct swift_an_proc *p, json_t *proc,
                          const struct swift_analyze_opts *o);
/* The "inference" view of one process's report object in text (md: Markdown); nothing without. */
void swift_an_infer_print(FILE *fp, json_t *proc, int md);
/* The same in the HTML report, every process with one. */
void swift_an_html_infer(FILE *fp, json_t *ps);

/* ---------- rules.c: a bottleneck object, shared by the rule_*.c files ---------- */

/* SWIFT_SEV_CRITICAL when v is at least twice the threshold, else SWIFT_SEV_WARN. */
int swift_an_sev_above(double v, double th);
/* Append {rule, severity, process, rank, value (2 decimals), threshold, unit, summary} to the
 * bottlenecks `list` (p NULL: the run's, rank -1) and return it (borrowed). */
json_t *swift_an_bottleneck(json_t *list, const char *rule, int sev, const struct swift_an_proc *p,
                            double value, double th, const char *unit, const char *summary);
/* b's remedy text and, when command is not NULL, its command (freed here). */
void swift_an_set_remedy(json_t *b, const char *remedy, char *command);

/* ---------- rl.c + rule_rl.c: the view of an RL (GRPO) step ---------- */

/* The RL spans of our traces' step thread (docs/trace-schema.md, docs/grpo.md), by name:
 * generate (with prefill and decode inside), reward (with one reward.NAME per function),
 * ref_logps, old_logps, and train (around the step's forward and backward); -1 for any other
 * name. */
enum {
    SWIFT_AN_RL_GENERATE,
    SWIFT_AN_RL_PREFILL,
    SWIFT_AN_RL_DECODE,
    SWIFT_AN_RL_REWARD,
    SWIFT_AN_RL_REWARD_FN,
    SWIFT_AN_RL_REF,
    SWIFT_AN_RL_OLD,
    SWIFT_AN_RL_TRAIN
};
int swift_an_rl_kind(const char *name);
/* 1 for the kinds whose inner spans are theirs (generate, reward, ref_logps, old_logps): not
 * forward in the step's phase breakdown, not ops in the op table. */
int swift_an_rl_container(int kind);
/* The report's "rl" (docs/formats.md): per-step means of generate (prefill, decode), reward,
 * ref_logps, old_logps, train, data_wait, optimizer, grad_sync and other over the steps that
 * generated and over all steps, the reward functions (slowest first), the decode rate and
 * rows per generate, shares of the generating steps' time, and the `top` worst steps by
 * generate, reward and ref_logps; null when no step holds a generate span. */
json_t *swift_an_rl_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top);
/* The `top` steps of p with the most of a per-step column (col[i * stride] for step i; ties:
 * the earlier step), as rules.c's worst_spans: name "step", step, rank, ts (aligned), dur_us and
 * the column's µs under `key`. Shared by the rl and multimodal views. */
json_t *swift_an_worst_by(const struct swift_an_proc *p, const double *col, size_t stride,
                          const char *key, int top);
/* rule_rl.c: the rules generation_bound, reward_stall and ref_logps_cost on one process (its
 * report object `proc`, with "rl"); appends to the bottlenecks `list` when they fire. */
void swift_an_rules_rl(json_t *list, const struct swift_an_proc *p, json_t *proc,
                       const struct swift_analyze_opts *o);
/* vl.c: the report's "multimodal" (docs/formats.md): a VL training step's parts per step
 * (data_wait, forward_backward with vision, llm, llm_backward, vision_backward inside,
 * optimizer, other), their shares, the loader's image_load time against its prefetch time,
 * the forward_backward spans' FLOPs (vision vs language model) and the MFU, the `top` worst
 * steps by data_wait and vision; null without vision spans or FLOPs records. */
json_t *swift_an_vl_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top);
/* rule_vl.c: image_starved and vision_bound on one process (its report object, with
 * "multimodal"). */
void swift_an_rules_vl(json_t *list, const struct swift_an_proc *p, json_t *proc,
                       const struct swift_analyze_opts *o);
/* vl.c: the "multimodal" table of one process's report object in text (md: Markdown); the
 * same in HTML for every process of ps with one. */
void swift_an_vl_print(FILE *fp, json_t *proc, int md);
void swift_an_html_vl(FILE *fp, json_t *ps);
/* rl_report.c: the "rl" table of one process's report object in text (md: Markdown); nothing
 * without one. */
void swift_an_rl_print(FILE *fp, json_t *proc, int md);
/* The same table in HTML for every process of ps (the report's "processes") with one
 * (rl_report.c, with report_table.c's cells). */
void swift_an_html_rl(FILE *fp, json_t *ps);

/* ---------- lanes.c: the worst step per thread and stream ---------- */

/* The report's "worst_step" (docs/formats.md): the longest step's spans per host thread and GPU
 * stream, with their nesting depth, bounded (lanes, depth, boxes per lane; tiny runs merged);
 * null without steps. */
json_t *swift_an_lanes_json(const struct swift_an_set *set, const struct swift_an_proc *p);
/* Which of n processes get lanes (malloc'ed flags, caller frees): every process with steps, or
 * with more than SWIFT_AN_RANKS_DETAIL processes the SWIFT_AN_LANES_PROCS whose longest step is
 * the longest (many ranks: the slow ones, not hundreds of timelines). */
#define SWIFT_AN_LANES_PROCS 4
char *swift_an_lanes_pick(const struct swift_an_proc *ps, size_t n);

/* ---------- collectives.c: collectives matched across ranks, skew vs transfer ---------- */

/* Processes of one job: same format, stage and world size (>= 2); Kineto traces also in the
 * same directory (a multi-rank set). */
int swift_an_same_job(const struct swift_an_proc *a, const struct swift_an_proc *b);
/* Fill each process's coll (analyze.h) from the collectives matched across its job's ranks. */
void swift_an_collectives(const struct swift_an_set *set, struct swift_an_proc *ps, size_t n);
/* The report's "collectives": one row per process with matched collectives (docs/formats.md). */
json_t *swift_an_collectives_json(const struct swift_an_proc *ps, size_t n);
/* The link between the GPUs of s (by its deviceProperties name): its name and per-direction
 * GB/s; 0, or -1 (nothing set) for a device the table in collectives.c does not know. */
int swift_an_link_of(const struct swift_an_source *s, const char **name, double *gbps);
/* One process's collectives (what the matching reads: start, end, bytes, kind, group size and
 * the key, an id of set's strings, so keys compare across ranks only when they share one string
 * table: the set's, or views of it, see perrank.c); empty unless its world size is >= 2.
 * Caller frees with swift_an_crank_free. */
struct swift_an_crank;
struct swift_an_crank *swift_an_coll_collect(const struct swift_an_set *set,
                                             const struct swift_an_proc *p);
void swift_an_crank_free(struct swift_an_crank *c);
/* swift_an_collectives from what was collected: items[i] are ps[i]'s (borrowed). */
void swift_an_coll_match(struct swift_an_proc *ps, size_t n, struct swift_an_crank *const *items);
/* nccl-tests' busbw/algbw factor of a collective named like "allreduce" for n ranks (NAN when
 * unknown). */
double swift_an_busbw_factor(const char *collective, int n);
/* A bandwidth in GB/s rounded to 4 significant digits (a network link's 0.0025 GB/s as well as
 * NVLink's 450; NAN stays NAN). */
double swift_an_bw_round(double gbps);

/* ---------- ranks.c: many ranks summarised ---------- */

/* Above this many processes, text and Markdown show the ranks' summary (ranks.c) instead of
 * every process in full. */
#define SWIFT_AN_RANKS_DETAIL 16
/* The report's "ranks" (docs/formats.md): busy time per step (outside communication, as the
 * rule straggler compares) min/median/p90/max with their ranks, the `top` slowest ranks, and
 * per_rank [rank, steps, step_us, busy_us] in process order; null with fewer than 2 processes
 * with steps. */
json_t *swift_an_ranks_json(const struct swift_an_proc *ps, size_t n, int top);
/* Its text (md: Markdown) rendering, with the straggler found and a heatmap of one character
 * per rank; nothing when r has no "ranks" or no more than SWIFT_AN_RANKS_DETAIL processes. */
void swift_an_ranks_print(FILE *fp, json_t *r, int md);
/* keep[i] (rows has n elements) set for the `top` rows with the largest number `key`, or for
 * every row when there are no more than SWIFT_AN_RANKS_DETAIL of them. */
void swift_an_ranks_pick(json_t *rows, const char *key, int top, char *keep);
/* Many ranks' bottlenecks, one per rule: 1 when bs[i]'s rule came before it (the text shows
 * only the first, the worst); else 0, and `more` says on which further ranks it also fired
 * ("also on 31 more ranks: 0-4,6-31"; "" when none). */
int swift_an_ranks_repeat(json_t *bs, size_t i, char *more, size_t n);

/* ---------- oproof.c: the op roofline table of a Kineto trace with record_shapes ---------- */

/* While loading: keep event ev (record made, its fields f; e its jansson object or NULL when the
 * fast scanner read it) in s->shape when it is a CPU op with shapes. */
void swift_an_oproof_note(struct swift_an_source *s, const struct swift_an_ev *ev,
                          const struct swift_an_fev *f, json_t *e);
void swift_an_oproof_free(struct swift_an_source *s);
/* {"device" (deviceProperties name or null), "peak" ({tflops_16bit, tflops_fp32, tbps} or null
 * for a device roofline.c does not know), "span_us" (the steps' time, or the wall time),
 * "ops_with_shapes", "n_rows", "rows": the `top` (op name, input shape) pairs by device time:
 * name, class, input_dims, input_types, calls, device_us, share (of span_us), gflop, gb,
 * tflops, tbps, intensity (FLOP/byte), bound ("compute"/"memory"), roofline_fraction,
 * lost_us (device time x (1 - fraction))}; the FLOP-derived fields null where no formula
 * fits. null for our traces, traces without GPU work and traces without record_shapes. */
json_t *swift_an_oproof_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                             int top);

/* oproof_spans.c: the same table for our --profile traces, from the op spans' "shape" and
 * "flops" args (docs/formats.md): per (span name, shape) in the steps, input_dims and
 * input_types read from the shape (fp32), calls, device_us (the spans' time), share, gflop,
 * gb (roofline.h's formula), gflops, tflops, tbps, intensity, bound (null: no memory roof),
 * roofline_fraction (achieved GFLOP/s over the run's peak_gflops), lost_us; top level adds
 * "peak_gflops" and "peak" {"gflops"}. null when no span carries a shape. */
json_t *swift_an_oproof_spans_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                                   int top);

/* rule_roofline.c: the rule low_efficiency on one process (its report object `proc`, with
 * "op_roofline"); appends to the bottlenecks `list` when it fires. */
void swift_an_rule_low_efficiency(json_t *list, const struct swift_an_proc *p, json_t *proc,
                                  const struct swift_analyze_opts *o);

/* ---------- memory.c: device memory over time ---------- */

struct swift_an_source;
/* One memory event of device dev at ts (trace clock): delta (Kineto "Bytes", NAN when absent),
 * total (allocated after it: Kineto "Total Allocated" or our counter's "allocated", NAN when
 * absent: the running sum of delta stands in), reserved ("Total Reserved", NAN when absent),
 * tid the host thread of a Kineto instant (INT64_MIN: none).
 * Updates s->mem_peak/mem_peak_ts and the kept timeline (bounded). */
void swift_an_mem_note(struct swift_an_source *s, int dev, double delta, double total,
                       double reserved, double ts, int64_t tid);
void swift_an_mem_free(struct swift_an_source *s);
/* Reserved bytes at device dev's peak, -1 when the trace does not say. */
double swift_an_mem_reserved_at_peak(const struct swift_an_source *s, int dev);
/* The report's memory "devices" array (docs/formats.md), times relative to t0 (trace clock),
 * "peak_ops" the CPU ops (set's names) around the allocation that reached the peak;
 * NULL when no device memory was recorded. */
/* {"params","grads","optimizer","activations","other","total"} bytes at swift-train's accounted
 * peak (the counter memory_by_category), NULL without one (memory.c). */
json_t *swift_an_memory_categories_json(const struct swift_an_source *s);
json_t *swift_an_memory_devices_json(const struct swift_an_set *set,
                                     const struct swift_an_source *s, double t0);
/* 1 when path (gzip or plain) holds torch.profiler's export_memory_timeline raw list
 * ([[ts_ns, action, bytes, category], ...]): told by its first bytes, not its name. */
int swift_an_memtl_sniff(const char *path);
/* Read that file into s (its device 0, HTA memory_analysis's definitions); -1 after saying why. */
int swift_an_memtl_load(struct swift_an_source *s, const char *path);

/* ---------- cmdline.c: the command lines of remedies ---------- */

/* A new argv array with --opt set to value (replaced in place, or appended); caller decrefs. */
json_t *swift_an_argv_set(json_t *argv, const char *opt, const char *value);
/* The argv array as one shell-quoted command line (malloc'ed). */
char *swift_an_argv_quote(json_t *argv);
/* A copy of argv whose output (-o, --output-dir, --output) and --trace are new names that do
 * not exist yet, so a remedy never walks into the traced run (see cmdline.c); caller decrefs. */
json_t *swift_an_argv_fresh(json_t *argv);
/* A new argv array without the short option -c ("-c V" or "-cV"); caller decrefs. */
json_t *swift_an_argv_drop_short(json_t *argv, char c);
/* Current integer value of option `opt` in argv ("--opt N", "--opt=N", '_' for '-'), or dflt. */
long swift_an_argv_long(json_t *argv, const char *opt, long dflt);

/* ---------- patch.c: remedies as unified diffs (--emit-patch) ---------- */

/* The file a command-line patch edits: the traced command on one line. */
#define SWIFT_AN_PATCH_COMMAND_FILE "command.sh"
struct swift_an_source;
/* Give each bottleneck of list[from..] whose remedy command changes options a "patch" object
 * {file, changes{option: value}, diff (unified, for patch -p0) or error} against src's config
 * file (when the run read one and its sha256 still matches) or command.sh; a config run's
 * "command" becomes its given command line with the changes on top. */
void swift_an_patch_attach(json_t *list, size_t from, const struct swift_an_source *src);
/* --emit-patch: the first bottleneck's patch (all: every one, in rank order, each against the
 * original file, with a "# N. rule" line before it) to fp. -1 after saying why there is none
 * (or the first one's file changed since the run). */
int swift_an_patch_emit(FILE *fp, json_t *report, int all);
/* The same to path (atomically; NULL or "-": stdout); mode 1 the first, 2 all. */
int swift_an_patch_write(json_t *report, const char *path, int mode);

/* ---------- report.c + report_html.c ---------- */

/* o[k] as a number (NAN when absent or not a number) / as a string ("" when not one). */
double swift_an_jnum(json_t *o, const char *k);
const char *swift_an_jstr(json_t *o, const char *k);
/* A short human duration of `us` microseconds ("1.50 ms", "-" when not finite) into b. */
const char *swift_an_dur(char *b, size_t n, double us);
/* A bandwidth people read: "1.25 GB/s", below 1 GB/s "2.5 MB/s" ("-" when not finite). */
const char *swift_an_bw_text(char *b, size_t n, double gbps);
/* s cut to fit n bytes with "..." at the end when longer. */
void swift_an_trunc_name(char *out, size_t n, const char *s);
/* The HTML page (report_html.c). Returns 0 or -1 (write error). */
int swift_an_print_html(FILE *fp, json_t *r, int top);
/* Its pieces shared with report_svg.c: s HTML-escaped; a duration in ms (s from 10 s) into b;
 * the colours of parts (9); idx[0..m) = the m rows of a with the largest a[i][key]. */
void swift_an_html_esc(FILE *fp, const char *s);
const char *swift_an_html_ms(char *b, size_t n, double us);
extern const char *const swift_an_html_palette[9];
void swift_an_html_top_rows(json_t *a, const char *key, size_t *idx, size_t n, size_t m);
/* report_table.c, the pieces both HTML pages (report, compare) share: the page's head (title
 * as <title> and <h1>, the shared CSS plus extra_css) and end (the copy and sort script; returns
 * 0 or -1 on a write error); a table's opening with its headings (HTML, NULL-terminated;
 * sortable: a click on a heading sorts); cells: text (escaped, in <code> with code), a number
 * shown as `shown` with data-v for sorting and an extra class (may be NULL; "-" when not
 * finite), a fraction as a bar and %, a duration in ms, a number with prec decimals (< 0: %g);
 * a per-process section: its <h2> once (*head counts), then "<p>label" left open. */
void swift_an_html_page_head(FILE *fp, const char *title, const char *extra_css);
int swift_an_html_page_end(FILE *fp);
void swift_an_html_table(FILE *fp, int sortable, const char *head, ...) __attribute__((sentinel));
void swift_an_html_text_cell(FILE *fp, const char *s, int code);
void swift_an_html_num_cell(FILE *fp, double v, const char *shown, const char *cls);
void swift_an_html_bar_cell(FILE *fp, double fr, const char *colour);
void swift_an_html_ms_cell(FILE *fp, double us);
void swift_an_html_fmt_cell(FILE *fp, int prec, double v);
void swift_an_html_proc_head(FILE *fp, json_t *p, int *head, const char *title);
/* The step-time chart over the run (every process with steps) and one process's `top` worst
 * steps on a time axis (report_svg.c). */
void swift_an_html_step_chart(FILE *fp, json_t *ps);
void swift_an_html_worst_steps(FILE *fp, json_t *p, int top);
/* One process's longest step lane by lane ("worst_step": threads and streams, on a time axis)
 * and every process's device memory over time with the peak marked (report_svg.c); nothing
 * where the report has no such data. */
void swift_an_html_lanes(FILE *fp, json_t *p);
void swift_an_html_memory(FILE *fp, json_t *ps);

#endif
