/*
 * analyze/rules — the bottleneck rules (docs/bottlenecks.md): thresholds, one function per rule,
 * and swift_an_rules_apply, which runs them and orders what they found. See rules.h; the
 * remedies' command lines are built in cmdline.c.
 */
#include "lib/analyze/rules.h"
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* ---------- helpers ---------- */

/* A duration people read in a summary, from µs: "1.25 s", "312 ms", "30.0 ms", "4.20 ms",
 * "0.019 ms" (the report's units; evidence keeps µs numbers). Returns b. */
static const char *ms_text(char *b, size_t n, double us)
{
    double ms = us / 1e3, a = fabs(ms);
    if (!isfinite(us))
        snprintf(b, n, "-");
    else if (a >= 1e3)
        snprintf(b, n, "%.2f s", ms / 1e3);
    else
        snprintf(b,
                 n,
                 a >= 100  ? "%.0f ms"
                 : a >= 10 ? "%.1f ms"
                 : a >= 1  ? "%.2f ms"
                           : "%.3f ms",
                 ms);
    return b;
}

const char *swift_an_ms_text(char *b, size_t n, double us)
{
    return ms_text(b, n, us);
}

static const char *sev_name(int s)
{
    return s == SWIFT_SEV_CRITICAL ? "critical" : s == SWIFT_SEV_WARN ? "warn" : "info";
}

int swift_an_sev_above(double v, double th)
{
    return v >= 2 * th ? SWIFT_SEV_CRITICAL : SWIFT_SEV_WARN;
}

static int sev_below(double v, double th)
{
    return v <= th / 2 ? SWIFT_SEV_CRITICAL : SWIFT_SEV_WARN;
}

static double r2(double x)
{
    return round(x * 100) / 100;
}

static json_t *worst_spans(const struct swift_an_proc *p, int part, int top)
{
    /* steps with the most time in `part` (or the longest steps when part < 0) */
    json_t *a = json_array();
    size_t n = p->nsteps;
    size_t *idx = swift_xmalloc((n + 1) * sizeof(*idx));
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (int t = 0; t < top && (size_t)t < n; t++) {
        size_t best = (size_t)t;
        for (size_t i = (size_t)t + 1; i < n; i++) {
            double x = part >= 0 ? p->steps[idx[i]].part[part] : p->steps[idx[i]].dur;
            double y = part >= 0 ? p->steps[idx[best]].part[part] : p->steps[idx[best]].dur;
            if (x > y)
                best = i;
        }
        size_t tmp = idx[t];
        idx[t] = idx[best];
        idx[best] = tmp;
        const struct swift_an_step *sp = &p->steps[idx[t]];
        json_t *o = json_pack("{s:s,s:I,s:i,s:f,s:f}",
                              "name",
                              "step",
                              "step",
                              (json_int_t)sp->step,
                              "rank",
                              p->rank,
                              "ts",
                              sp->ts,
                              "dur_us",
                              r2(sp->dur));
        if (part >= 0)
            json_object_set_new(o, p->part_names[part], json_real(r2(sp->part[part])));
        json_array_append_new(a, o);
    }
    free(idx);
    return a;
}

json_t *swift_an_bottleneck(json_t *list, const char *rule, int sev, const struct swift_an_proc *p,
                            double value, double th, const char *unit, const char *summary)
{
    json_t *b = json_pack("{s:s,s:s,s:s,s:i,s:f,s:f,s:s,s:s}",
                          "rule",
                          rule,
                          "severity",
                          sev_name(sev),
                          "process",
                          p ? p->label : "run",
                          "rank",
                          p ? p->rank : -1,
                          "value",
                          r2(value),
                          "threshold",
                          th,
                          "unit",
                          unit,
                          "summary",
                          summary);
    json_array_append_new(list, b);
    return b;
}

void swift_an_set_remedy(json_t *b, const char *remedy, char *command)
{
    json_object_set_new(b, "remedy", json_string(remedy));
    if (command) {
        json_object_set_new(b, "command", json_string(command));
        free(command);
    }
}

static int is_stage(const struct swift_an_proc *p, const char *stage)
{
    return p->src->stage && !strcmp(p->src->stage, stage);
}

/* ---------- the rules ---------- */

static void rule_data_stall(json_t *list, const struct swift_an_proc *p,
                            const struct swift_analyze_opts *o)
{
    if (p->data_part < 0 || !p->nsteps || p->step_avg <= 0)
        return;
    double v = 100 * p->part_avg[p->data_part] / p->step_avg;
    double th = o->th.data_stall_pct;
    if (v <= th)
        return;
    char s[512], d1[32], d2[32];
    snprintf(s,
             sizeof(s),
             "%.2f%% of step time is spent waiting for data (%s of %s per step)",
             v,
             ms_text(d1, sizeof(d1), p->part_avg[p->data_part]),
             ms_text(d2, sizeof(d2), p->step_avg));
    json_t *b = swift_an_bottleneck(
        list, "data_stall", swift_an_sev_above(v, th), p, v, th, "% of step time", s);
    json_t *ev = json_pack("{s:f,s:f,s:I}",
                           "data_us_per_step",
                           r2(p->part_avg[p->data_part]),
                           "step_us",
                           r2(p->step_avg),
                           "steps",
                           (json_int_t)p->nsteps);
    json_object_set_new(ev, "worst_spans", worst_spans(p, p->data_part, o->top));
    json_object_set_new(b, "evidence", ev);
    if (p->src->kind == SWIFT_AN_KINETO) {
        swift_an_set_remedy(
            b,
            "load batches in parallel: DataLoader(num_workers=N (e.g. the CPU cores per GPU), "
            "pin_memory=True, persistent_workers=True, prefetch_factor=2); pre-tokenize "
            "with swift-preprocess so the loader only reads shards",
            NULL);
    } else {
        json_t *argv = p->src->argv;
        char *cmd = NULL;
        if (argv && json_array_size(argv)) {
            long nw = swift_an_argv_long(argv, "num-workers", 0);
            long pf = swift_an_argv_long(argv, "prefetch", 0);
            char v1[32], v2[32];
            /* swift-train's --prefetch counts whole steps ready ahead, for all workers
             * together (default 3): keep two per worker */
            long w2 = nw > 0 ? nw * 2 : 4, p2 = pf > 0 ? pf * 2 : 0;
            if (p2 < 2 * w2)
                p2 = 2 * w2;
            snprintf(v1, sizeof(v1), "%ld", w2);
            snprintf(v2, sizeof(v2), "%ld", p2);
            json_t *a1 = swift_an_argv_set(argv, "num-workers", v1);
            json_t *a2 = swift_an_argv_set(a1, "prefetch", v2);
            cmd = swift_an_argv_command(a2);
            json_decref(a1);
            json_decref(a2);
        }
        swift_an_set_remedy(
            b,
            "feed the step faster: swift-train --num-workers N (loader threads) and "
            "--prefetch N (batches ready ahead); pre-tokenize with swift-preprocess "
            "--threads N; --packing to cut padding",
            cmd);
    }
}

static void rule_comm_bound(json_t *list, const struct swift_an_proc *p,
                            const struct swift_analyze_opts *o)
{
    double v, exposed, base;
    int kineto = p->src->kind == SWIFT_AN_KINETO;
    /* GPU communication kernels (Kineto traces, ours with CUPTI events) when there are any;
     * else, on our traces, the step thread's grad_sync spans */
    int gpu = p->has_kineto && p->k.comm_us > 0 && p->k.kernel_us > 0;
    /* the skew of collectives matched across ranks (collectives.c) is waiting for a slow
     * rank, not transfer: it goes to straggler, and only the rest can make a rank comm-bound */
    double skew = 0;
    if (gpu) {
        exposed = p->k.comm_exposed_us;
        base = p->k.kernel_us;
        skew = p->coll.skew_us;
    } else if (kineto) {
        return;
    } else {
        if (p->comm_part < 0 || !p->nsteps || p->step_avg <= 0)
            return;
        exposed = p->part_avg[p->comm_part];
        base = p->step_avg;
        skew = p->coll.skew_us / (double)p->nsteps;
    }
    double waited = fmin(skew, exposed);
    exposed -= waited;
    v = 100 * exposed / base;
    double th = o->th.comm_bound_pct;
    if (v <= th)
        return;
    char s[512];
    snprintf(s,
             sizeof(s),
             "%.2f%% of %s is communication not hidden under computation%s",
             v,
             gpu ? "GPU time" : "step time",
             waited > 0 ? " (waiting for other ranks not counted)" : "");
    json_t *b = swift_an_bottleneck(
        list, "comm_bound", swift_an_sev_above(v, th), p, v, th, "% of step time", s);
    json_t *ev = json_pack("{s:f,s:f}", "exposed_comm_us", r2(exposed), "base_us", r2(base));
    if (p->coll.n)
        json_object_set_new(ev, "skew_us", json_real(r2(waited)));
    if (p->coll.bw_us > 0) { /* the transfer's bus bandwidth against the link (collectives.c) */
        double bus = p->coll.bus_bytes / p->coll.bw_us / 1e3, lg;
        const char *ln;
        json_object_set_new(ev, "busbw_gbps", json_real(swift_an_bw_round(bus)));
        if (swift_an_link_of(p->src, &ln, &lg) == 0) {
            json_object_set_new(ev, "link", json_string(ln));
            json_object_set_new(ev, "link_gbps", json_real(lg));
            json_object_set_new(ev, "busbw_link_fraction", json_real(round(bus / lg * 1e4) / 1e4));
        }
    }
    if (gpu)
        json_object_set_new(ev, "comm_comp_overlap_pct", json_real(p->k.overlap_pct));
    json_object_set_new(ev, "worst_spans", worst_spans(p, p->comm_part, o->top));
    json_object_set_new(b, "evidence", ev);
    char *cmd = NULL;
    if (!kineto && p->src->argv) {
        long ga = swift_an_argv_long(p->src->argv, "gradient-accumulation-steps", 1);
        char val[32];
        snprintf(val, sizeof(val), "%ld", ga * 2);
        cmd = swift_an_argv_with(p->src->argv, "gradient-accumulation-steps", val);
    }
    swift_an_set_remedy(
        b,
        kineto ? "communicate less often or overlap it: gradient accumulation with "
                 "DDP no_sync(), a larger batch per GPU, DDP bucket_cap_mb, ZeRO/FSDP sharding; "
                 "check the NCCL transport (NCCL_DEBUG=INFO: NVLink/IB, not sockets)"
               : "all-reduce less often: swift-train --gradient-accumulation-steps N (x2), a "
                 "larger --per-device-train-batch-size; check the NCCL transport",
        cmd);
}

static void rule_launch_bound(json_t *list, const struct swift_an_proc *p,
                              const struct swift_analyze_opts *o)
{
    if (!p->has_kineto || p->k.launches < 100)
        return;
    double v = 100.0 * (double)p->k.short_kernels / (double)p->k.launches;
    double th = o->th.launch_short_pct;
    double host_wait = 0, idle = 0;
    for (size_t i = 0; i < p->k.nidle; i++) {
        host_wait += p->k.idle[i].host_wait;
        idle += p->k.idle[i].host_wait + p->k.idle[i].kernel_wait + p->k.idle[i].other;
    }
    /* the host, not the input pipeline, must be what keeps the GPU waiting */
    double data =
        p->step_avg > 0 && p->data_part >= 0 ? 100 * p->part_avg[p->data_part] / p->step_avg : 0;
    if (v <= th || idle <= 0 || host_wait < 0.5 * idle || data > o->th.data_stall_pct)
        return;
    char s[512], d1[32];
    snprintf(s,
             sizeof(s),
             "%.2f%% of %ld kernel launches run shorter on the GPU than their launch call on the "
             "CPU (mean launch %s); host wait is %.1f%% of stream idle time",
             v,
             p->k.launches,
             ms_text(d1, sizeof(d1), p->k.launch_cpu_us),
             idle > 0 ? 100 * host_wait / idle : 0);
    json_t *b = swift_an_bottleneck(
        list, "launch_bound", swift_an_sev_above(v, th), p, v, th, "% of launches", s);
    json_object_set_new(b,
                        "evidence",
                        json_pack("{s:I,s:I,s:f,s:f,s:f,s:o}",
                                  "launches",
                                  (json_int_t)p->k.launches,
                                  "short_kernels",
                                  (json_int_t)p->k.short_kernels,
                                  "mean_launch_us",
                                  r2(p->k.launch_cpu_us),
                                  "host_wait_us",
                                  r2(host_wait),
                                  "idle_us",
                                  r2(idle),
                                  "worst_spans",
                                  worst_spans(p, -1, o->top)));
    if (p->src->kind == SWIFT_AN_KINETO) {
        swift_an_set_remedy(
            b,
            "fewer, larger kernels: torch.compile (fusion), CUDA graphs "
            "(torch.cuda.graphs / mode=\"reduce-overhead\"), a larger batch per step",
            NULL);
    } else {
        char *cmd = NULL;
        long bs =
            p->src->argv ? swift_an_argv_long(p->src->argv, "per-device-train-batch-size", 0) : 0;
        if (bs > 0) {
            char val[32];
            snprintf(val, sizeof(val), "%ld", bs * 2);
            cmd = swift_an_argv_with(p->src->argv, "per-device-train-batch-size", val);
        }
        swift_an_set_remedy(
            b,
            "more work per kernel launch: a larger --per-device-train-batch-size (x2; "
            "halve --gradient-accumulation-steps to keep the global batch) or a longer "
            "--max-length (swift-preprocess --packing fills it)",
            cmd);
    }
}

static void rule_gpu_idle(json_t *list, const struct swift_an_proc *p,
                          const struct swift_analyze_opts *o)
{
    if (p->gpu_util < 0)
        return;
    double v = 100 * p->gpu_util, th = o->th.gpu_idle_pct;
    if (v >= th)
        return;
    /* attribute the idle time: data loading, host (runtime + cpu), sync/other */
    const char *biggest = "host";
    double best = -1;
    const char *names[] = {"data loading", "host (CPU ops and launches)", "communication", "other"};
    double vals[4] = {0};
    if (p->src->kind == SWIFT_AN_KINETO) {
        vals[0] = p->part_avg[SWIFT_TB_DATALOADER];
        vals[1] = p->part_avg[SWIFT_TB_CPU] + p->part_avg[SWIFT_TB_RUNTIME];
        vals[2] = p->part_avg[SWIFT_TB_COMM];
        vals[3] = p->part_avg[SWIFT_TB_OTHER] + p->part_avg[SWIFT_TB_MEMCPY] +
                  p->part_avg[SWIFT_TB_MEMSET];
    } else if (p->has_kineto) {
        /* our traces with GPU events: GPU idle time under each phase of the step thread */
        vals[0] = p->gpu_idle_part[0];                                             /* data_wait */
        vals[1] = p->gpu_idle_part[1] + p->gpu_idle_part[2] + p->gpu_idle_part[4]; /* fwd+bwd+opt */
        vals[2] = p->gpu_idle_part[3];                                             /* grad_sync */
        vals[3] = p->gpu_idle_part[5];                                             /* other */
    } else {
        vals[0] = p->part_avg[0]; /* data_wait */
        vals[2] = p->part_avg[3]; /* grad_sync */
        vals[3] = p->part_avg[5]; /* other */
    }
    for (int i = 0; i < 4; i++)
        if (vals[i] > best)
            best = vals[i], biggest = names[i];
    char s[512], d1[32];
    snprintf(s,
             sizeof(s),
             "GPU busy %.2f%% of step time; the biggest share of the rest is %s "
             "(%s per step)",
             v,
             biggest,
             ms_text(d1, sizeof(d1), best));
    json_t *b = swift_an_bottleneck(list, "gpu_idle", sev_below(v, th), p, v, th, "% GPU busy", s);
    json_t *ev = json_pack("{s:f,s:f,s:f,s:f,s:f}",
                           "gpu_utilization_pct",
                           r2(v),
                           "data_loading_us",
                           r2(vals[0]),
                           "host_us",
                           r2(vals[1]),
                           "comm_us",
                           r2(vals[2]),
                           "other_us",
                           r2(vals[3]));
    json_object_set_new(ev, "worst_spans", worst_spans(p, -1, o->top));
    json_object_set_new(b, "evidence", ev);
    if (p->src->kind == SWIFT_AN_KINETO)
        swift_an_set_remedy(
            b,
            vals[0] == best ? "the GPU waits for input: see data_stall (DataLoader num_workers, "
                              "pin_memory)"
                            : "give the GPU more work per launch: a larger batch, fewer host syncs "
                              "(.item(), .cpu() in the loop), CUDA graphs",
            NULL);
    else
        swift_an_set_remedy(
            b,
            vals[0] == best ? "the GPU waits for input: see data_stall (swift-train --num-workers, "
                              "--prefetch)"
                            : "give the GPU more work per launch: a larger "
                              "--per-device-train-batch-size; see launch_bound when launches are "
                              "short",
            NULL);
}

/* Fragmentation worth a finding: this share of the reserved bytes unused at the peak, and at
 * least MEM_FRAG_MIN bytes of them. */
#define MEM_FRAG_PCT 30.0
#define MEM_FRAG_MIN 1073741824.0

static void rule_memory(json_t *list, const struct swift_an_proc *p,
                        const struct swift_analyze_opts *o)
{
    if (p->mem_peak <= 0)
        return;
    double v = p->mem_total > 0 ? 100 * p->mem_peak / p->mem_total : 0;
    double th = o->th.memory_headroom_pct;
    double frag = p->mem_reserved >= 0 ? p->mem_reserved - p->mem_peak : 0;
    double fpct = p->mem_reserved > 0 ? 100 * frag / p->mem_reserved : 0;
    int full = p->mem_total > 0 && v > th;
    int fragmented = fpct >= MEM_FRAG_PCT && frag >= MEM_FRAG_MIN;
    if (!full && !fragmented)
        return;
    char s[256];
    if (full)
        snprintf(s,
                 sizeof(s),
                 "peak memory %.2f GiB is %.1f%% of the device's %.2f GiB",
                 p->mem_peak / 1073741824.0,
                 v,
                 p->mem_total / 1073741824.0);
    else
        snprintf(s,
                 sizeof(s),
                 "at the peak %.2f GiB of the %.2f GiB reserved (%.1f%%) hold no tensor "
                 "(fragmentation)",
                 frag / 1073741824.0,
                 p->mem_reserved / 1073741824.0,
                 fpct);
    json_t *b =
        swift_an_bottleneck(list,
                            "memory_headroom",
                            full && v >= 98 ? SWIFT_SEV_CRITICAL : SWIFT_SEV_WARN,
                            p,
                            full ? v : fpct,
                            full ? th : MEM_FRAG_PCT,
                            full ? "% of device memory" : "% of reserved memory unused at the peak",
                            s);
    json_t *ev = json_pack("{s:f,s:f,s:f}",
                           "peak_bytes",
                           p->mem_peak,
                           "device_bytes",
                           p->mem_total,
                           "peak_ts",
                           p->mem_peak_ts);
    json_object_set_new(ev,
                        "reserved_at_peak_bytes",
                        p->mem_reserved >= 0 ? json_real(p->mem_reserved) : json_null());
    json_object_set_new(
        ev, "fragmentation_bytes", p->mem_reserved >= 0 ? json_real(frag) : json_null());
    json_t *bc = swift_an_memory_categories_json(p->src); /* what the bytes are, if we know */
    json_object_set_new(ev, "by_category", bc ? bc : json_null());
    json_object_set_new(b, "evidence", ev);
    char *cmd = NULL;
    if (full && p->src->kind != SWIFT_AN_KINETO && p->src->argv) {
        long bs = swift_an_argv_long(p->src->argv, "per-device-train-batch-size", 0);
        if (bs > 1) {
            char val[32];
            snprintf(val, sizeof(val), "%ld", bs / 2);
            cmd = swift_an_argv_with(p->src->argv, "per-device-train-batch-size", val);
        }
    }
    swift_an_set_remedy(
        b,
        !full ? "let the caching allocator grow segments instead of splitting them: "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or "
                "max_split_size_mb:128); allocate long-lived buffers first"
        : p->src->kind == SWIFT_AN_KINETO
            ? "keep 10% headroom: activation checkpointing "
              "(torch.utils.checkpoint), mixed precision (torch.autocast), a smaller "
              "micro-batch with gradient accumulation"
            : "keep 10% headroom: halve --per-device-train-batch-size and double "
              "--gradient-accumulation-steps, or --gradient-checkpointing",
        cmd);
}

static void rule_ckpt(json_t *list, const struct swift_an_proc *p,
                      const struct swift_analyze_opts *o)
{
    double wall = p->t1 - p->t0;
    if (p->ckpt_us <= 0 || wall <= 0)
        return;
    double v = 100 * p->ckpt_us / wall, th = o->th.ckpt_stall_pct;
    if (v <= th)
        return;
    char s[256];
    snprintf(s,
             sizeof(s),
             "checkpoints take %.2f%% of wall time (%.1f s of %.1f s)",
             v,
             p->ckpt_us / 1e6,
             wall / 1e6);
    json_t *b = swift_an_bottleneck(
        list, "ckpt_stall", swift_an_sev_above(v, th), p, v, th, "% of wall time", s);
    json_object_set_new(
        b, "evidence", json_pack("{s:f,s:f}", "ckpt_us", r2(p->ckpt_us), "wall_us", r2(wall)));
    char *cmd = NULL;
    if (p->src->argv) {
        long ss = swift_an_argv_long(p->src->argv, "save-steps", 0);
        if (ss > 0) {
            long ns = (long)ceil((double)ss * v / th);
            char val[32];
            snprintf(val, sizeof(val), "%ld", ns);
            cmd = swift_an_argv_with(p->src->argv, "save-steps", val);
        }
    }
    swift_an_set_remedy(
        b,
        "checkpoint less often: swift-train --save-steps N (raised so checkpoints stay "
        "under the threshold), --save-total-limit to bound disk; save adapters only with "
        "LoRA",
        cmd);
}

static void rule_serial_preprocess(json_t *list, const struct swift_an_proc *p,
                                   const struct swift_analyze_opts *o)
{
    double wall = p->t1 - p->t0;
    if (!p->tok_threads || wall <= 0)
        return;
    double conc = p->tok_busy_us > 0 ? p->tok_sum_us / p->tok_busy_us : 0;
    double v = 100 * p->tok_busy_us / wall, th = o->th.serial_preprocess_pct;
    if (v <= th || conc >= 1.5)
        return;
    char s[256];
    snprintf(
        s,
        sizeof(s),
        "tokenization fills %.1f%% of wall time with %.2f threads busy on average (%d thread%s)",
        v,
        conc,
        p->tok_threads,
        p->tok_threads > 1 ? "s" : "");
    json_t *b = swift_an_bottleneck(
        list, "serial_preprocess", swift_an_sev_above(v, th), p, v, th, "% of wall time", s);
    json_object_set_new(b,
                        "evidence",
                        json_pack("{s:f,s:f,s:i,s:f}",
                                  "tokenize_busy_us",
                                  r2(p->tok_busy_us),
                                  "wall_us",
                                  r2(wall),
                                  "threads",
                                  p->tok_threads,
                                  "concurrency",
                                  r2(conc)));
    char *cmd = NULL;
    if (p->src->argv) {
        long t = swift_an_argv_long(p->src->argv, "threads", 1);
        char val[32];
        snprintf(val, sizeof(val), "%ld", t > 1 ? t * 2 : 8);
        cmd = swift_an_argv_with(p->src->argv, "threads", val);
    }
    swift_an_set_remedy(
        b,
        "tokenize in parallel: swift-preprocess --threads N (one per core), batched "
        "tokenization",
        cmd);
}

/* ---------- oversubscription: host phases far slower than their median ---------- */

/* The host phases whose spread the rule reads (our traces; OpenMP and BLAS threads work in
 * them), and the share of the mean step a phase needs to matter. */
static const char *const host_phases[] = {"forward", "backward", "optimizer", NULL};
#define OVERSUB_MIN_SHARE_PCT 10.0
#define OVERSUB_MIN_STEPS 8

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The phase of p (a part of its steps) whose p90/median is highest among those with a
 * meaningful share of the step; its figures into *f. Returns the part index or -1. */
struct spread {
    double median, p90, max, mean, share_pct, ratio;
};
static int worst_spread(const struct swift_an_proc *p, struct spread *f)
{
    int best = -1;
    double *v = swift_xmalloc(p->nsteps * sizeof(*v));
    for (int k = 0; k < p->npart; k++) {
        int host = 0;
        for (int h = 0; host_phases[h]; h++)
            host |= !strcmp(p->part_names[k], host_phases[h]);
        if (!host)
            continue;
        double sum = 0;
        for (size_t i = 0; i < p->nsteps; i++)
            sum += v[i] = p->steps[i].part[k];
        swift_an_sort(v, p->nsteps, sizeof(*v), cmp_dbl);
        struct spread c = {.median = v[p->nsteps / 2],
                           .p90 = v[(size_t)ceil(0.9 * (double)p->nsteps) - 1],
                           .max = v[p->nsteps - 1],
                           .mean = sum / (double)p->nsteps};
        c.share_pct = p->step_avg > 0 ? 100 * c.mean / p->step_avg : 0;
        c.ratio = c.median > 0 ? c.p90 / c.median : 0;
        if (c.share_pct >= OVERSUB_MIN_SHARE_PCT && (best < 0 || c.ratio > f->ratio)) {
            best = k;
            *f = c;
        }
    }
    free(v);
    return best;
}

static void rule_oversubscription(json_t *list, const struct swift_an_proc *p,
                                  const struct swift_analyze_opts *o)
{
    const char *dev = p->src->device;
    if (p->src->kind != SWIFT_AN_SWIFT || p->nsteps < OVERSUB_MIN_STEPS ||
        (dev && strcmp(dev, "cpu")))
        return; /* CPU runs: on a GPU the host phases also wait for the device */
    struct spread f;
    int k = worst_spread(p, &f);
    double th = o->th.oversubscription_x;
    if (k < 0 || !(f.ratio > th))
        return;
    const char *pn = p->part_names[k];
    const char *pol = p->src->omp_wait_policy;
    char s[512], b1[32], b2[32], b3[32], how[128] = "thread count and wait policy not recorded";
    if (p->src->omp_threads > 0)
        snprintf(how,
                 sizeof(how),
                 "%d OpenMP thread%s, wait policy %s",
                 p->src->omp_threads,
                 p->src->omp_threads == 1 ? "" : "s",
                 pol ? pol : "not recorded");
    snprintf(s,
             sizeof(s),
             "%s time varies between identical steps: median %s, p90 %s (%.1fx), max %s, "
             "%.1f%% of the mean step: threads wait for cores (%s)",
             pn,
             swift_an_dur(b1, sizeof(b1), f.median),
             swift_an_dur(b2, sizeof(b2), f.p90),
             f.ratio,
             swift_an_dur(b3, sizeof(b3), f.max),
             f.share_pct,
             how);
    json_t *b = swift_an_bottleneck(
        list, "oversubscription", swift_an_sev_above(f.ratio, th), p, f.ratio, th, "x median", s);
    json_t *ev = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:I}",
                           "phase",
                           pn,
                           "median_us",
                           r2(f.median),
                           "p90_us",
                           r2(f.p90),
                           "max_us",
                           r2(f.max),
                           "mean_us",
                           r2(f.mean),
                           "share_pct",
                           r2(f.share_pct),
                           "steps",
                           (json_int_t)p->nsteps);
    json_object_set_new(
        ev, "omp_threads", p->src->omp_threads ? json_integer(p->src->omp_threads) : json_null());
    json_object_set_new(ev, "omp_wait_policy", pol ? json_string(pol) : json_null());
    json_object_set_new(ev, "worst_spans", worst_spans(p, k, o->top));
    json_object_set_new(b, "evidence", ev);
    /* the command: passive waiting when the run spun, and half the threads */
    char *cmd = NULL;
    int passive = pol && !strncmp(pol, "passive", 7);
    if (p->src->argv && (p->src->omp_threads > 1 || !passive)) {
        char *c;
        if (p->src->omp_threads > 1) {
            char val[32];
            snprintf(val, sizeof(val), "%d", p->src->omp_threads / 2);
            json_t *a = swift_an_argv_drop_short(p->src->argv, 'j');
            c = swift_an_argv_with(a, "threads", val);
            json_decref(a);
        } else {
            c = swift_an_argv_command(p->src->argv);
        }
        if (passive) {
            cmd = c;
        } else {
            size_t l = strlen(c) + 32;
            cmd = swift_xmalloc(l);
            snprintf(cmd, l, "OMP_WAIT_POLICY=passive %s", c);
            free(c);
        }
    }
    swift_an_set_remedy(
        b,
        passive ? "the machine is shared or oversubscribed: fewer --threads than free "
                  "cores (-j N), and check other load (another run, other jobs: top, "
                  "nproc)"
                : "OpenMP threads spin while they wait and take the cores busy ones "
                  "need: OMP_WAIT_POLICY=passive (swift-tools' default when unset), "
                  "fewer --threads than free cores (-j N) when sharing the machine, and "
                  "check other load (top, nproc)",
        cmd);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *d, size_t m)
{
    swift_an_sort(d, m, sizeof(*d), cmp_d);
    return m % 2 ? d[m / 2] : (d[m / 2 - 1] + d[m / 2]) / 2;
}

/* A rank's own time per step: its step time less the time it spent in communication, which in
 * a synchronous job is mostly waiting for the slowest rank (so every rank's step time is
 * about the same, and only the busy time tells the straggler apart). */
static double busy_avg(const struct swift_an_proc *p)
{
    double c = p->comm_part >= 0 && p->comm_part < p->npart ? p->part_avg[p->comm_part] : 0;
    return p->step_avg - c;
}

static void rule_straggler(json_t *list, const struct swift_an_proc *ps, size_t n,
                           const struct swift_analyze_opts *o)
{
    double *d = swift_xmalloc((n + 1) * sizeof(*d));
    for (size_t g = 0; g < n; g++) {
        const struct swift_an_proc *a = &ps[g];
        if (!a->nsteps)
            continue;
        int lead = 1; /* the first process of each job leads it */
        for (size_t h = 0; h < g && lead; h++)
            if (ps[h].nsteps && swift_an_same_job(&ps[h], a))
                lead = 0;
        if (!lead)
            continue;
        size_t m = 0;
        for (size_t h = 0; h < n; h++)
            if (ps[h].nsteps && swift_an_same_job(&ps[h], a))
                d[m++] = busy_avg(&ps[h]);
        if (m < 2)
            continue;
        double med = median(d, m);
        for (size_t h = 0; h < n; h++) {
            const struct swift_an_proc *p = &ps[h];
            if (!p->nsteps || !swift_an_same_job(p, a))
                continue;
            double v = med > 0 ? 100 * (busy_avg(p) - med) / med : 0;
            double th = o->th.straggler_pct;
            if (v <= th)
                continue;
            /* the phase where it loses most against the median of that phase over the job */
            int worst = -1;
            double loss = 0;
            for (int k = 0; k < p->npart; k++) {
                if (k == p->comm_part)
                    continue;
                size_t mm = 0;
                for (size_t q = 0; q < n; q++)
                    if (ps[q].nsteps && swift_an_same_job(&ps[q], a))
                        d[mm++] = ps[q].part_avg[k];
                double pm = median(d, mm);
                if (p->part_avg[k] - pm > loss)
                    loss = p->part_avg[k] - pm, worst = k;
            }
            char s[512], w[160] = "", d1[32], d2[32], d3[32];
            double caused = p->coll.caused_us / (double)p->nsteps;
            if (caused > 0)
                snprintf(w,
                         sizeof(w),
                         "; the other ranks wait %s per step for it in collectives",
                         ms_text(d1, sizeof(d1), caused));
            snprintf(s,
                     sizeof(s),
                     "rank %d's steps take %.1f%% longer than the median rank (%s vs %s "
                     "outside communication); it loses most in %s (+%s per step)%s",
                     p->rank,
                     v,
                     ms_text(d1, sizeof(d1), busy_avg(p)),
                     ms_text(d2, sizeof(d2), med),
                     worst >= 0 ? p->part_names[worst] : "?",
                     ms_text(d3, sizeof(d3), loss),
                     w);
            json_t *b = swift_an_bottleneck(
                list, "straggler", swift_an_sev_above(v, th), p, v, th, "% above median", s);
            json_t *ev = json_pack("{s:f,s:f,s:f,s:s,s:f}",
                                   "step_us",
                                   r2(p->step_avg),
                                   "busy_us",
                                   r2(busy_avg(p)),
                                   "median_us",
                                   r2(med),
                                   "phase",
                                   worst >= 0 ? p->part_names[worst] : "?",
                                   "phase_loss_us",
                                   r2(loss));
            if (p->coll.n) {
                json_object_set_new(ev, "skew_caused_us", json_real(r2(caused)));
                json_object_set_new(ev, "arrived_last", json_integer((json_int_t)p->coll.last_n));
            }
            json_object_set_new(ev, "worst_spans", worst_spans(p, worst, o->top));
            json_object_set_new(b, "evidence", ev);
            swift_an_set_remedy(
                b,
                worst == p->data_part
                    ? "this rank waits for data: check its node's disk/CPU, give it more "
                      "loader workers, shard the data evenly"
                    : "check this rank's host (thermal throttling, other jobs, NIC), and that "
                      "its data shard is not longer than the others'",
                NULL);
        }
    }
    free(d);
}

/* Jobs without steps (no step time to compare): the rank the others wait for in collectives,
 * when that wait is more than the threshold's share of the wall time. */
static void rule_straggler_skew(json_t *list, const struct swift_an_proc *ps, size_t n,
                                const struct swift_analyze_opts *o)
{
    for (size_t h = 0; h < n; h++) {
        const struct swift_an_proc *p = &ps[h];
        double wall = p->t1 - p->t0;
        if (p->nsteps || p->coll.caused_us <= 0 || wall <= 0)
            continue;
        double v = 100 * p->coll.caused_us / wall, th = o->th.straggler_pct;
        if (v <= th)
            continue;
        char s[512], d1[32];
        snprintf(s,
                 sizeof(s),
                 "the other ranks wait for rank %d in collectives: it arrived last at %zu of "
                 "%zu, %s in all (%.1f%% of the wall time)",
                 p->rank,
                 p->coll.last_n,
                 p->coll.n,
                 ms_text(d1, sizeof(d1), p->coll.caused_us),
                 v);
        json_t *b = swift_an_bottleneck(
            list, "straggler", swift_an_sev_above(v, th), p, v, th, "% of wall time", s);
        json_object_set_new(b,
                            "evidence",
                            json_pack("{s:f,s:I,s:I,s:f}",
                                      "skew_caused_us",
                                      r2(p->coll.caused_us),
                                      "arrived_last",
                                      (json_int_t)p->coll.last_n,
                                      "matched",
                                      (json_int_t)p->coll.n,
                                      "wall_us",
                                      r2(wall)));
        swift_an_set_remedy(
            b,
            "check this rank's host (thermal throttling, other jobs, NIC) and its share "
            "of the work (data shard, pipeline stage) before the collectives it is late to",
            NULL);
    }
}

static int sev_rank(const char *s)
{
    return !strcmp(s, "critical") ? 2 : !strcmp(s, "warn") ? 1 : 0;
}

static int cmp_bottleneck(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int sx = sev_rank(json_string_value(json_object_get(x, "severity")));
    int sy = sev_rank(json_string_value(json_object_get(y, "severity")));
    if (sx != sy)
        return sy - sx;
    double rx = json_number_value(json_object_get(x, "value")) /
                fmax(1e-9, json_number_value(json_object_get(x, "threshold")));
    double ry = json_number_value(json_object_get(y, "value")) /
                fmax(1e-9, json_number_value(json_object_get(y, "threshold")));
    const char *rule = json_string_value(json_object_get(x, "rule"));
    if (!strcmp(rule, "gpu_idle"))
        rx = 1 / fmax(rx, 1e-9);
    rule = json_string_value(json_object_get(y, "rule"));
    if (!strcmp(rule, "gpu_idle"))
        ry = 1 / fmax(ry, 1e-9);
    return (rx < ry) - (rx > ry);
}

int swift_an_rules_apply(json_t *report, const struct swift_an_set *set,
                         const struct swift_an_proc *procs, size_t n,
                         const struct swift_analyze_opts *o)
{
    (void)set;
    json_t *list = json_object_get(report, "bottlenecks");
    for (size_t i = 0; i < n; i++) {
        const struct swift_an_proc *p = &procs[i];
        size_t from = json_array_size(list);
        rule_data_stall(list, p, o);
        rule_comm_bound(list, p, o);
        rule_launch_bound(list, p, o);
        rule_gpu_idle(list, p, o);
        rule_memory(list, p, o);
        rule_ckpt(list, p, o);
        if (is_stage(p, "preprocess") || p->tok_threads)
            rule_serial_preprocess(list, p, o);
        rule_oversubscription(list, p, o);
        json_t *pj = json_array_get(json_object_get(report, "processes"), i);
        swift_an_rule_low_efficiency(list, p, pj, o);
        swift_an_rules_rl(list, p, pj, o);
        swift_an_rules_vl(list, p, pj, o);
        swift_an_rules_infer(list, p, pj, o);
        swift_an_patch_attach(list, from, p->src); /* --emit-patch: remedies as diffs */
    }
    rule_straggler(list, procs, n, o);
    rule_straggler_skew(list, procs, n, o);
    size_t m = json_array_size(list);
    json_t **arr = swift_xmalloc((m + 1) * sizeof(*arr));
    for (size_t i = 0; i < m; i++)
        arr[i] = json_incref(json_array_get(list, i));
    swift_an_sort(arr, m, sizeof(*arr), cmp_bottleneck);
    json_array_clear(list);
    int sev = 0;
    for (size_t i = 0; i < m; i++) {
        int s = sev_rank(json_string_value(json_object_get(arr[i], "severity")));
        int v = s == 2 ? SWIFT_SEV_CRITICAL : s == 1 ? SWIFT_SEV_WARN : SWIFT_SEV_INFO;
        if (v > sev)
            sev = v;
        json_array_append_new(list, arr[i]);
    }
    free(arr);
    return sev;
}
