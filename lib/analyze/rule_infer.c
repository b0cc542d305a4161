/*
 * analyze/rule_infer — the bottleneck rules of an inference run (docs/bottlenecks.md), read from
 * a process's "inference" view (infer.c): queue_bound_ttft (requests wait for a slot more than
 * they prefill), kv_pressure (the paged KV cache near full or preempting), low_occupancy (the
 * running batch well below max_num_seqs while requests wait) and prefill_interference (decode
 * steps that carry prompt chunks run much longer than pure decode steps). Their remedies name
 * swift-infer's flags with the values the trace recorded. Thresholds and ids are in
 * thresholds.c; the bottleneck object has their layout (rules.h).
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

static json_t *add(json_t *list, const char *rule, const struct swift_an_proc *p, double v,
                   double th, const char *sev, const char *unit, const char *summary,
                   json_t *evidence)
{
    json_t *b = json_pack("{s:s,s:s,s:s,s:i,s:f,s:f,s:s,s:s,s:o}",
                          "rule",
                          rule,
                          "severity",
                          sev,
                          "process",
                          p->label,
                          "rank",
                          p->rank,
                          "value",
                          round(v * 100) / 100,
                          "threshold",
                          th,
                          "unit",
                          unit,
                          "summary",
                          summary,
                          "evidence",
                          evidence);
    json_array_append_new(list, b);
    return b;
}

/* The remedy, and the traced command line with --opt set to value (none without an argv). */
static void remedy(json_t *b, const struct swift_an_proc *p, const char *text, const char *opt,
                   long value)
{
    json_object_set_new(b, "remedy", json_string(text));
    json_t *argv = p->src->argv;
    if (!opt || !argv || !json_array_size(argv))
        return;
    char v[32];
    snprintf(v, sizeof(v), "%ld", value);
    char *cmd = swift_an_argv_with(argv, opt, v);
    if (cmd)
        json_object_set_new(b, "command", json_string(cmd));
    free(cmd);
}

static long iget(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* ---------- queue_bound_ttft: requests wait for a slot more than they prefill ---------- */

static void rule_queue(json_t *list, const struct swift_an_proc *p, json_t *inf, double th)
{
    double v = 100 * swift_an_jnum(inf, "queued_share_of_ttft");
    if (!(v > th))
        return;
    json_t *ttft = json_object_get(inf, "ttft"), *q = json_object_get(inf, "queued");
    long seqs = iget(json_object_get(inf, "settings"), "max_num_seqs");
    char s[512], d1[32], d2[32], r[512];
    snprintf(s,
             sizeof(s),
             "requests spend %.2f%% of their time to first token queued (mean %s queued of %s; "
             "%ld requests, --max-num-seqs %ld)",
             v,
             swift_an_ms_text(d1, sizeof(d1), swift_an_jnum(q, "mean_us")),
             swift_an_ms_text(d2, sizeof(d2), swift_an_jnum(ttft, "mean_us")),
             iget(inf, "requests"),
             seqs);
    json_t *ev = json_pack("{s:O,s:O,s:O,s:O}",
                           "queued_share_of_ttft",
                           json_object_get(inf, "queued_share_of_ttft"),
                           "ttft",
                           ttft,
                           "queued",
                           q,
                           "max_num_seqs",
                           json_object_get(json_object_get(inf, "settings"), "max_num_seqs"));
    json_t *b = add(list,
                    "queue_bound_ttft",
                    p,
                    v,
                    th,
                    v >= 2 * th || v >= 90 ? "critical" : "warn",
                    "% of TTFT",
                    s,
                    ev);
    snprintf(r,
             sizeof(r),
             "run more requests at once: raise --max-num-seqs (now %ld; the KV pool must hold "
             "them: --num-blocks), or add capacity (another replica) when the batch is already "
             "as large as the device allows",
             seqs);
    remedy(b, p, r, seqs > 0 ? "max-num-seqs" : NULL, 2 * seqs);
}

/* ---------- kv_pressure: the KV cache pool near full, or preempting ---------- */

static void rule_kv(json_t *list, const struct swift_an_proc *p, json_t *inf, double th)
{
    json_t *kv = json_object_get(inf, "kv_cache"), *st = json_object_get(inf, "settings");
    double v = 100 * swift_an_jnum(kv, "peak_share");
    long pre = iget(kv, "preemptions"), nb = iget(st, "num_blocks"),
         len = iget(st, "max_model_len");
    if (!(v >= th) && pre <= 0)
        return;
    char s[512], r[512];
    snprintf(s,
             sizeof(s),
             "the KV cache peaked at %ld of %ld blocks (%.2f%%, mean %.2f%%) with %ld "
             "preemptions (a preempted sequence is recomputed from its prompt)",
             iget(kv, "peak_blocks"),
             nb,
             v,
             100 * swift_an_jnum(kv, "mean_share"),
             pre);
    json_t *b = add(list,
                    "kv_pressure",
                    p,
                    isfinite(v) ? v : 0,
                    th,
                    pre > 0 ? "critical" : "warn",
                    "% of KV blocks",
                    s,
                    json_deep_copy(kv));
    snprintf(r,
             sizeof(r),
             "give the cache more room: raise --num-blocks (now %ld) if memory allows, or lower "
             "--max-model-len (now %ld) or --max-num-seqs so fewer tokens compete for the pool",
             nb,
             len);
    remedy(b, p, r, nb > 0 ? "num-blocks" : NULL, 2 * nb);
}

/* ---------- low_occupancy: a small running batch while requests wait ---------- */

static void rule_occupancy(json_t *list, const struct swift_an_proc *p, json_t *inf, double th)
{
    json_t *bt = json_object_get(inf, "batch"), *st = json_object_get(inf, "settings");
    double v = 100 * swift_an_jnum(bt, "occupancy_with_waiting");
    long nw = iget(bt, "steps_with_waiting"), steps = iget(inf, "steps");
    long seqs = iget(st, "max_num_seqs"), budget = iget(st, "max_num_batched_tokens");
    /* a tenth of the steps at least: a queue that waits one step is no pattern */
    if (!(v < th) || nw <= 0 || 10 * nw < steps)
        return;
    double tok = swift_an_jnum(bt, "mean_tokens_with_waiting");
    int budget_bound = budget > 0 && tok >= 0.9 * (double)budget;
    char s[512], r[512];
    snprintf(s,
             sizeof(s),
             "in %ld of %ld steps requests waited while the batch ran %.2f of %ld sequences "
             "(%.2f%%); those steps fed %.0f tokens of --max-num-batched-tokens %ld",
             nw,
             steps,
             swift_an_jnum(bt, "mean_seqs_with_waiting"),
             seqs,
             v,
             tok,
             budget);
    json_t *ev = json_deep_copy(bt);
    json_object_set_new(ev, "max_num_batched_tokens", json_integer(budget));
    json_t *b = add(list,
                    "low_occupancy",
                    p,
                    v,
                    th,
                    v <= th / 2 ? "critical" : "warn",
                    "% of max_num_seqs",
                    s,
                    ev);
    snprintf(r,
             sizeof(r),
             budget_bound ? "admit more per step: raise --max-num-batched-tokens (now %ld), the "
                            "token budget the waiting prompts ran out of"
                          : "admit more per step: raise --max-num-batched-tokens (now %ld); the "
                            "steps did not fill it, so the KV pool may be what holds requests "
                            "back (--num-blocks, see kv_pressure)",
             budget);
    remedy(b, p, r, budget > 0 ? "max-num-batched-tokens" : NULL, 2 * budget);
}

/* ---------- prefill_interference: prompt chunks slow the decode steps they join ---------- */

static void rule_interference(json_t *list, const struct swift_an_proc *p, json_t *inf, double th)
{
    json_t *it = json_object_get(inf, "interference"), *st = json_object_get(inf, "settings");
    json_t *sp = json_object_get(inf, "tpot_split");
    double v = 100 * (swift_an_jnum(it, "mixed_over_pure") - 1);
    if (!(v > th) || iget(it, "mixed_steps") <= 0 || iget(it, "pure_decode_steps") <= 0)
        return;
    long budget = iget(st, "max_num_batched_tokens"), seqs = iget(st, "max_num_seqs");
    long chunked = iget(st, "chunked_prefill");
    char s[512], r[512], d1[32], d2[32], d3[32], d4[32];
    snprintf(s,
             sizeof(s),
             "%ld decode steps that also carried prompt chunks took %.2f%% longer than the %ld "
             "pure decode steps (%s vs %s); time per output token %s while others prefilled, "
             "%s otherwise",
             iget(it, "mixed_steps"),
             v,
             iget(it, "pure_decode_steps"),
             swift_an_ms_text(d1, sizeof(d1), swift_an_jnum(it, "mixed_step_us")),
             swift_an_ms_text(d2, sizeof(d2), swift_an_jnum(it, "pure_decode_step_us")),
             swift_an_ms_text(d3, sizeof(d3), swift_an_jnum(sp, "with_prefill_mean_us")),
             swift_an_ms_text(d4, sizeof(d4), swift_an_jnum(sp, "without_prefill_mean_us")));
    json_t *ev = json_deep_copy(it);
    json_object_set_new(ev, "tpot_split", json_deep_copy(sp));
    json_t *b = add(list,
                    "prefill_interference",
                    p,
                    v,
                    th,
                    v >= 2 * th ? "critical" : "warn",
                    "% slower decode steps",
                    s,
                    ev);
    long half = budget / 2 > seqs ? budget / 2 : seqs;
    if (chunked == 0)
        snprintf(r,
                 sizeof(r),
                 "turn chunked prefill on, so a long prompt is fed in chunks of at most "
                 "--max-num-batched-tokens (now %ld) between decode steps",
                 budget);
    else
        snprintf(r,
                 sizeof(r),
                 "smaller prompt chunks: lower --max-num-batched-tokens (now %ld, at least "
                 "--max-num-seqs %ld) so each decode step carries less prefill; time to first "
                 "token grows in exchange",
                 budget,
                 seqs);
    remedy(b, p, r, budget > half ? "max-num-batched-tokens" : NULL, half);
}

void swift_an_rules_infer(json_t *list, const struct swift_an_proc *p, json_t *proc,
                          const struct swift_analyze_opts *o)
{
    json_t *inf = json_object_get(proc, "inference");
    if (!json_is_object(inf))
        return;
    rule_queue(list, p, inf, o->th.queue_bound_ttft_pct);
    rule_kv(list, p, inf, o->th.kv_pressure_pct);
    rule_occupancy(list, p, inf, o->th.low_occupancy_pct);
    rule_interference(list, p, inf, o->th.prefill_interference_pct);
}
