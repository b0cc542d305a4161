/*
 * analyze/rule_rl — the bottleneck rules of RL (GRPO) steps (docs/bottlenecks.md), read from a
 * process's "rl" view (rl.c): generation_bound (generating completions takes most of the
 * step), reward_stall (scoring them stalls the step, most often an external reward program)
 * and ref_logps_cost (the reference model's forward, which --beta 0 removes). Their thresholds
 * and ids live with the others in thresholds.c; the bottleneck object has their layout (rules.h).
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

/* reward_stall also fires when one reward function alone takes more than this fraction of the
 * rule's threshold (5 % of the step at the default 10 %): one slow checker among fast ones is
 * the one to fix, even while the rewards together stay under the threshold. */
#define REWARD_FN_OF_THRESHOLD 0.5
/* generation_bound's command raises --num-iterations (each generation batch reused for that
 * many updates) up to this; beyond it the policy drifts too far from the one that generated
 * (TRL and ms-swift document 1 to 4). */
#define NUM_ITERATIONS_MAX 4

/* The traced command line with --opt set to value, or NULL without a recorded argv. */
static char *command_with(const struct swift_an_proc *p, const char *opt, const char *value)
{
    json_t *argv = p->src->argv;
    return argv && json_array_size(argv) ? swift_an_argv_with(argv, opt, value) : NULL;
}

/* ---------- generation_bound: generating completions takes most of the step ---------- */

static void rule_generation(json_t *list, const struct swift_an_proc *p, json_t *rl,
                            const struct swift_analyze_opts *o)
{
    json_t *g = json_object_get(rl, "generating"), *gen = json_object_get(rl, "generate");
    double step = swift_an_jnum(g, "step_us"), us = swift_an_jnum(g, "generate_us");
    double v = 100 * us / step, th = o->th.generation_bound_pct;
    if (!(step > 0) || !(v > th))
        return;
    double tps = swift_an_jnum(gen, "decode_tokens_per_s");
    double rows = swift_an_jnum(gen, "rows_per_generate");
    char s[512], d1[32], d2[32], rate[64], rw[64];
    snprintf(rate, sizeof(rate), isfinite(tps) ? "%.0f tokens/s" : "an unknown rate", tps);
    snprintf(rw, sizeof(rw), isfinite(rows) ? "%.4g rows" : "an unknown number of rows", rows);
    snprintf(s,
             sizeof(s),
             "generation takes %.2f%% of the generating steps' time (%s of %s per step; %lld of "
             "%lld steps generate): decode runs at %s with %s per decode forward",
             v,
             swift_an_ms_text(d1, sizeof(d1), us),
             swift_an_ms_text(d2, sizeof(d2), step),
             (long long)json_integer_value(json_object_get(rl, "generating_steps")),
             (long long)json_integer_value(json_object_get(rl, "steps")),
             rate,
             rw);
    json_t *b = swift_an_bottleneck(
        list, "generation_bound", swift_an_sev_above(v, th), p, v, th, "% of step time", s);
    long mu = p->src->argv ? swift_an_argv_long(p->src->argv, "num-iterations", 1) : 1;
    json_t *ev = json_pack("{s:f,s:O,s:O,s:f,s:O,s:O,s:O,s:O,s:O}",
                           "generate_us",
                           us,
                           "prefill_us",
                           json_object_get(g, "prefill_us"),
                           "decode_us",
                           json_object_get(g, "decode_us"),
                           "step_us",
                           step,
                           "generating_steps",
                           json_object_get(rl, "generating_steps"),
                           "steps",
                           json_object_get(rl, "steps"),
                           "decode_tokens_per_s",
                           json_object_get(gen, "decode_tokens_per_s"),
                           "rows_per_generate",
                           json_object_get(gen, "rows_per_generate"),
                           "worst_spans",
                           json_object_get(json_object_get(rl, "worst_spans"), "generate"));
    json_object_set_new(ev, "num_iterations", json_integer(mu));
    json_object_set_new(b, "evidence", ev);
    char *cmd = NULL;
    if (mu < NUM_ITERATIONS_MAX) {
        char nv[32];
        snprintf(nv, sizeof(nv), "%ld", mu * 2 < NUM_ITERATIONS_MAX ? mu * 2 : NUM_ITERATIONS_MAX);
        cmd = command_with(p, "num-iterations", nv);
    }
    swift_an_set_remedy(
        b,
        "decode more completions together: a larger --per-device-train-batch-size (the "
        "rows of one decode forward); fewer or shorter completions: --num-generations, "
        "--max-completion-length; --num-iterations 2..4 reuses each generation batch for "
        "that many updates, so only every N-th step generates",
        cmd);
}

/* ---------- reward_stall: scoring the completions stalls the step ---------- */

static void rule_reward(json_t *list, const struct swift_an_proc *p, json_t *rl,
                        const struct swift_analyze_opts *o)
{
    json_t *g = json_object_get(rl, "generating");
    json_t *fn = json_array_get(json_object_get(rl, "rewards"), 0); /* the slowest */
    double step = swift_an_jnum(g, "step_us"), us = swift_an_jnum(g, "reward_us");
    double th = o->th.reward_stall_pct, v = 100 * us / step;
    double fus = fn ? swift_an_jnum(fn, "generating_us") : NAN, fv = 100 * fus / step;
    double fth = th * REWARD_FN_OF_THRESHOLD;
    if (!(step > 0) || (!(v > th) && !(fv > fth)))
        return;
    int one = !(v > th); /* fired on the one function */
    int program = fn && json_is_true(json_object_get(fn, "program"));
    char s[512], d1[32], d2[32], d3[32], slow[192] = "";
    if (fn)
        snprintf(slow,
                 sizeof(slow),
                 "; the slowest function, %s (%s), takes %s per step (%.2f%%)",
                 swift_an_jstr(fn, "function"),
                 program ? "a --reward-cmd program" : "built in",
                 swift_an_ms_text(d3, sizeof(d3), fus),
                 fv);
    snprintf(s,
             sizeof(s),
             "reward scoring takes %.2f%% of the generating steps' time (%s of %s per step)%s",
             v,
             swift_an_ms_text(d1, sizeof(d1), us),
             swift_an_ms_text(d2, sizeof(d2), step),
             slow);
    double bv = one ? fv : v, bth = one ? fth : th;
    json_t *b = swift_an_bottleneck(
        list, "reward_stall", swift_an_sev_above(bv, bth), p, bv, bth, "% of step time", s);
    json_t *ev = json_pack("{s:f,s:f,s:O,s:O}",
                           "reward_us",
                           us,
                           "step_us",
                           step,
                           "functions",
                           json_object_get(rl, "rewards"),
                           "worst_spans",
                           json_object_get(json_object_get(rl, "worst_spans"), "reward"));
    json_object_set_new(ev, "slowest", fn ? json_incref(fn) : json_null());
    json_object_set_new(b, "evidence", ev);
    swift_an_set_remedy(
        b,
        program ? "make the reward program keep up: answer each line as it arrives "
                  "(print and flush per row) or score the rows in batches inside it, "
                  "use a faster checker, or a built-in function (accuracy, format, "
                  "length) where one fits; --reward-timeout S ends a program that hangs "
                  "instead of stalling the run"
                : "make the slow reward cheaper: a faster checker or a simpler built-in "
                  "function (format, length), or fewer completions to score "
                  "(--num-generations); --reward-timeout S bounds a reward program that "
                  "hangs",
        NULL);
}

/* ---------- ref_logps_cost: the reference model's forward ---------- */

static void rule_ref(json_t *list, const struct swift_an_proc *p, json_t *rl,
                     const struct swift_analyze_opts *o)
{
    json_t *g = json_object_get(rl, "generating");
    double step = swift_an_jnum(g, "step_us"), us = swift_an_jnum(g, "ref_logps_us");
    double v = 100 * us / step, th = o->th.ref_logps_cost_pct;
    if (!(step > 0) || !(v > th))
        return;
    char s[512], d1[32], d2[32];
    snprintf(s,
             sizeof(s),
             "the reference model's log-probs take %.2f%% of the generating steps' time (%s of "
             "%s per step)",
             v,
             swift_an_ms_text(d1, sizeof(d1), us),
             swift_an_ms_text(d2, sizeof(d2), step));
    json_t *b = swift_an_bottleneck(
        list, "ref_logps_cost", swift_an_sev_above(v, th), p, v, th, "% of step time", s);
    json_object_set_new(
        b,
        "evidence",
        json_pack("{s:f,s:f,s:O}",
                  "ref_logps_us",
                  us,
                  "step_us",
                  step,
                  "worst_spans",
                  json_object_get(json_object_get(rl, "worst_spans"), "ref_logps")));
    swift_an_set_remedy(
        b,
        "the KL term to the reference costs a forward of the reference model per "
        "generation batch: --beta 0 (TRL's default) drops the term and the reference "
        "model with it (no reference weights in memory either); keep --beta > 0 when "
        "the policy must stay near the reference",
        command_with(p, "beta", "0"));
}

void swift_an_rules_rl(json_t *list, const struct swift_an_proc *p, json_t *proc,
                       const struct swift_analyze_opts *o)
{
    json_t *rl = json_object_get(proc, "rl");
    if (!json_is_object(rl))
        return;
    rule_generation(list, p, rl, o);
    rule_reward(list, p, rl, o);
    rule_ref(list, p, rl, o);
}
