/*
 * analyze/rl — the view of an RL (GRPO) step in our traces (docs/grpo.md, "The analyzer's view
 * of an RL step"): where the step's time goes between generating completions (prefill and
 * decode), scoring them (each reward function), the reference's and the old policy's
 * log-probs and the training itself, averaged over the steps that generated and over all
 * steps, with the decode rate and the rows decoded together. The report's "rl" object
 * (docs/formats.md); the rules that read it are in rule_rl.c. See internal.h.
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

int swift_an_rl_kind(const char *name)
{
    static const char *const names[] = {
        "generate", "prefill", "decode", "reward", NULL, "ref_logps", "old_logps", "train"};
    if (!strncmp(name, "reward.", 7) && name[7])
        return SWIFT_AN_RL_REWARD_FN;
    for (int k = 0; k < (int)(sizeof(names) / sizeof(names[0])); k++)
        if (names[k] && !strcmp(name, names[k]))
            return k;
    return -1;
}

int swift_an_rl_container(int kind)
{
    return kind == SWIFT_AN_RL_GENERATE || kind == SWIFT_AN_RL_REWARD || kind == SWIFT_AN_RL_REF ||
           kind == SWIFT_AN_RL_OLD;
}

/* The columns of the view, in the report's order: the RL spans, then the step thread's
 * other phase spans. F_OTHER is the step's time outside every top-level one of them. */
enum {
    F_GEN,
    F_PREFILL,
    F_DECODE,
    F_REWARD,
    F_REF,
    F_OLD,
    F_TRAIN,
    F_DATA,
    F_OPT,
    F_SYNC,
    F_OTHER,
    F_N
};
static const char *const field_keys[F_N] = {"generate_us",
                                            "prefill_us",
                                            "decode_us",
                                            "reward_us",
                                            "ref_logps_us",
                                            "old_logps_us",
                                            "train_us",
                                            "data_wait_us",
                                            "optimizer_us",
                                            "grad_sync_us",
                                            "other_us"};

/* One reward function: its spans' time and how many steps had it. */
struct rlfn {
    uint32_t name;
    int program;
    double us;
};

struct rlacc {
    double (*f)[F_N];          /* per step */
    char *gen;                 /* per step: it has a generate span */
    struct swift_an_ival *top; /* the top-level spans (aligned times) */
    size_t *top_step, ntop;    /* and the step of each */
    struct rlfn *fn;
    size_t nfn;
    long generates, rows, prefill_tok, decode_tok;
    double prefill_us, decode_us;
};

static json_t *num(double v)
{
    return isfinite(v) ? json_real(round(v * 1000) / 1000) : json_null();
}

/* The column of a span of the step thread, or -1 (not one of the view's). */
static int field_of(const char *nm, const char *cat)
{
    switch (swift_an_rl_kind(nm)) {
    case SWIFT_AN_RL_GENERATE:
        return F_GEN;
    case SWIFT_AN_RL_PREFILL:
        return F_PREFILL;
    case SWIFT_AN_RL_DECODE:
        return F_DECODE;
    case SWIFT_AN_RL_REWARD:
        return F_REWARD;
    case SWIFT_AN_RL_REF:
        return F_REF;
    case SWIFT_AN_RL_OLD:
        return F_OLD;
    case SWIFT_AN_RL_TRAIN:
        return F_TRAIN;
    default:
        break;
    }
    if (!strcmp(nm, "data_wait") || !strcmp(cat, "data"))
        return F_DATA;
    if (!strcmp(nm, "optimizer") || !strcmp(cat, "optim"))
        return F_OPT;
    if (!strcmp(nm, "grad_sync") || !strcmp(cat, "comm"))
        return F_SYNC;
    return -1;
}

static void note_fn(struct rlacc *a, uint32_t name, int program, double us)
{
    size_t i;
    for (i = 0; i < a->nfn && a->fn[i].name != name; i++)
        ;
    if (i == a->nfn) {
        a->fn = swift_xrealloc(a->fn, (a->nfn + 1) * sizeof(*a->fn));
        a->fn[a->nfn++] = (struct rlfn){.name = name};
    }
    a->fn[i].us += us;
    a->fn[i].program |= program;
}

/* One pass over the step thread's events: per-step sums of each column, the reward functions,
 * the generation's rows and tokens, and the top-level spans for "other". 0 when no step holds
 * a generate span (not an RL run). */
static int collect(const struct swift_an_set *set, const struct swift_an_proc *p, struct rlacc *a)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    double off = s->clock_offset_us;
    int64_t tid = INT64_MIN;
    for (size_t i = 0; i < s->n && tid == INT64_MIN; i++)
        if (!strcmp(swift_an_str(st, s->ev[i].cat), "step") &&
            !strcmp(swift_an_str(st, s->ev[i].name), "step"))
            tid = s->ev[i].tid;
    a->f = swift_xcalloc(p->nsteps, sizeof(*a->f));
    a->gen = swift_xcalloc(p->nsteps + 1, 1);
    a->top = swift_xmalloc((s->n + 1) * sizeof(*a->top));
    a->top_step = swift_xmalloc((s->n + 1) * sizeof(*a->top_step));
    int any = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->tid != tid)
            continue;
        const char *nm = swift_an_str(st, e->name), *cat = swift_an_str(st, e->cat);
        int f = field_of(nm, cat);
        int k = swift_an_rl_kind(nm);
        long si = f >= 0 || k >= 0 ? swift_an_step_of(p, e->ts - off) : -1;
        if (si < 0)
            continue;
        if (k == SWIFT_AN_RL_REWARD_FN) {
            note_fn(a, e->name, e->aux == 1, e->dur);
            continue;
        }
        a->f[si][f] += e->dur;
        if (f == F_GEN) {
            a->gen[si] = 1;
            any = 1;
            a->generates++;
            a->rows += e->aux > 0 ? e->aux : 0;
        } else if (f == F_PREFILL) {
            a->prefill_tok += e->aux;
            a->prefill_us += e->dur;
        } else if (f == F_DECODE) {
            a->decode_tok += e->aux;
            a->decode_us += e->dur;
        }
        if (f != F_PREFILL && f != F_DECODE) { /* top level: "other" is the step minus these */
            a->top[a->ntop] = (struct swift_an_ival){e->ts - off, e->ts - off + e->dur};
            a->top_step[a->ntop++] = (size_t)si;
        }
    }
    return any;
}

/* F_OTHER of each step: its time outside the union of its top-level spans. */
static void other_time(const struct swift_an_proc *p, struct rlacc *a)
{
    struct swift_an_ival *v = swift_xmalloc((a->ntop + 1) * sizeof(*v));
    size_t *cnt = swift_xcalloc(p->nsteps + 1, sizeof(*cnt));
    size_t *at = swift_xcalloc(p->nsteps + 1, sizeof(*at));
    for (size_t i = 0; i < a->ntop; i++)
        cnt[a->top_step[i]]++;
    for (size_t i = 1; i <= p->nsteps; i++)
        at[i] = at[i - 1] + cnt[i - 1];
    for (size_t i = 0; i < a->ntop; i++) { /* grouped by step */
        size_t si = a->top_step[i];
        const struct swift_an_step *sp = &p->steps[si];
        struct swift_an_ival c = a->top[i];
        c.b = c.b < sp->ts ? sp->ts : c.b;
        c.e = c.e > sp->ts + sp->dur ? sp->ts + sp->dur : c.e;
        v[at[si] + --cnt[si]] = c;
    }
    for (size_t si = 0; si < p->nsteps; si++) {
        size_t n = at[si + 1] - at[si];
        n = swift_an_ival_merge(v + at[si], n);
        double o = p->steps[si].dur - swift_an_ival_len(v + at[si], n);
        a->f[si][F_OTHER] = o > 0 ? o : 0;
    }
    free(v);
    free(cnt);
    free(at);
}

/* Per-step means of each column over the steps with gen[i] == want (want < 0: all). */
static json_t *means_json(const struct swift_an_proc *p, const struct rlacc *a, int want,
                          double *step_us)
{
    double sum[F_N] = {0}, st = 0;
    size_t n = 0;
    for (size_t i = 0; i < p->nsteps; i++) {
        if (want >= 0 && a->gen[i] != want)
            continue;
        n++;
        st += p->steps[i].dur;
        for (int k = 0; k < F_N; k++)
            sum[k] += a->f[i][k];
    }
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer((json_int_t)n));
    *step_us = n ? st / (double)n : NAN;
    json_object_set_new(o, "step_us", num(*step_us));
    for (int k = 0; k < F_N; k++)
        json_object_set_new(o, field_keys[k], num(n ? sum[k] / (double)n : NAN));
    return o;
}

static int cmp_fn(const void *x, const void *y)
{
    const struct rlfn *a = x, *b = y;
    return (a->us < b->us) - (a->us > b->us);
}

json_t *swift_an_worst_by(const struct swift_an_proc *p, const double *col, size_t stride,
                          const char *key, int top)
{
    json_t *arr = json_array();
    char *used = swift_xcalloc(p->nsteps + 1, 1);
    for (int t = 0; t < top; t++) {
        long best = -1;
        for (size_t i = 0; i < p->nsteps; i++)
            if (!used[i] && col[i * stride] > 0 &&
                (best < 0 || col[i * stride] > col[(size_t)best * stride]))
                best = (long)i;
        if (best < 0)
            break;
        used[best] = 1;
        const struct swift_an_step *sp = &p->steps[best];
        json_t *o = json_pack("{s:s,s:I,s:i,s:f,s:o}",
                              "name",
                              "step",
                              "step",
                              (json_int_t)sp->step,
                              "rank",
                              p->rank,
                              "ts",
                              sp->ts,
                              "dur_us",
                              num(sp->dur));
        json_object_set_new(o, key, num(col[(size_t)best * stride]));
        json_array_append_new(arr, o);
    }
    free(used);
    return arr;
}

/* The `top` steps with the most time in column f. */
static json_t *worst_json(const struct swift_an_proc *p, const struct rlacc *a, int f,
                          const char *key, int top)
{
    return swift_an_worst_by(p, p->nsteps ? &a->f[0][f] : NULL, F_N, key, top);
}

/* part / whole, to 6 decimals (null when whole is 0 or part unknown). */
static json_t *share(double part, double whole)
{
    return whole > 0 && isfinite(part) ? json_real(round(part / whole * 1e6) / 1e6) : json_null();
}

json_t *swift_an_rl_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top)
{
    /* no generate span anywhere (every SFT trace): nothing to read */
    if (p->src->kind != SWIFT_AN_SWIFT || !p->nsteps ||
        swift_an_lookup(&set->strs, "generate") == UINT32_MAX)
        return json_null();
    struct rlacc a = {0};
    json_t *out = json_null();
    if (!collect(set, p, &a))
        goto done;
    other_time(p, &a);
    double gstep, astep;
    json_t *g = means_json(p, &a, 1, &gstep), *all = means_json(p, &a, -1, &astep);
    size_t ng = (size_t)json_integer_value(json_object_get(g, "steps"));
    /* reward functions, slowest first: per generating step and per step */
    swift_an_sort(a.fn, a.nfn, sizeof(*a.fn), cmp_fn);
    json_t *fns = json_array();
    for (size_t i = 0; i < a.nfn; i++) {
        const char *nm = swift_an_str(&set->strs, a.fn[i].name) + 7;
        double per = a.fn[i].us / (double)ng;
        json_array_append_new(fns,
                              json_pack("{s:s,s:b,s:o,s:o,s:o}",
                                        "function",
                                        nm,
                                        "program",
                                        a.fn[i].program,
                                        "generating_us",
                                        num(per),
                                        "all_us",
                                        num(a.fn[i].us / (double)p->nsteps),
                                        "share",
                                        (share(per, gstep))));
    }
    json_t *gen = json_pack(
        "{s:I,s:I,s:o,s:I,s:I,s:o,s:o,s:o,s:o}",
        "spans",
        (json_int_t)a.generates,
        "rows",
        (json_int_t)a.rows,
        "rows_per_generate",
        a.rows > 0 ? num((double)a.rows / (double)a.generates) : json_null(),
        "prefill_tokens",
        (json_int_t)a.prefill_tok,
        "decode_tokens",
        (json_int_t)a.decode_tok,
        "prefill_us",
        num(a.prefill_us),
        "decode_us",
        num(a.decode_us),
        "prefill_tokens_per_s",
        a.prefill_us > 0 && a.prefill_tok > 0 ? num(1e6 * (double)a.prefill_tok / a.prefill_us)
                                              : json_null(),
        "decode_tokens_per_s",
        a.decode_us > 0 && a.decode_tok > 0 ? num(1e6 * (double)a.decode_tok / a.decode_us)
                                            : json_null());
    out = json_pack("{s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o}",
                    "steps",
                    (json_int_t)p->nsteps,
                    "generating_steps",
                    (json_int_t)ng,
                    "generating",
                    g,
                    "all",
                    all,
                    "generate",
                    gen,
                    "rewards",
                    fns,
                    "shares",
                    json_pack("{s:o,s:o,s:o}",
                              "generate",
                              (share(swift_an_jnum(g, "generate_us"), gstep)),
                              "reward",
                              (share(swift_an_jnum(g, "reward_us"), gstep)),
                              "ref_logps",
                              (share(swift_an_jnum(g, "ref_logps_us"), gstep))),
                    "worst_spans",
                    json_pack("{s:o,s:o,s:o}",
                              "generate",
                              worst_json(p, &a, F_GEN, "generate_us", top),
                              "reward",
                              worst_json(p, &a, F_REWARD, "reward_us", top),
                              "ref_logps",
                              worst_json(p, &a, F_REF, "ref_logps_us", top)));
    (void)astep;
done:
    free(a.f);
    free(a.gen);
    free(a.top);
    free(a.top_step);
    free(a.fn);
    return out;
}
