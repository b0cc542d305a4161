/*
 * analyze/infer — the view of an inference run in our traces (swift-infer, lib/infer; spans in
 * docs/trace-schema.md, "Inference engine spans"): per request the time to first token
 * (request_queued + request_prefill) and the time per output token (request_decode over its
 * completion tokens after the first), their percentiles; throughput; per engine step the batch
 * against max_num_seqs, the KV cache blocks against num_blocks, preemptions; and how much longer
 * the decode steps that also carried prompt chunks took than the pure decode steps. The report's
 * "inference" object (docs/formats.md); the rules that read it are in rule_infer.c.
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* One request, from its three spans (joined by args.req). */
struct ireq {
    int64_t req;
    double t_add, t_first, t_end; /* µs, trace clock */
    double queued, prefill, decode;
    int64_t prompt, completion;
    int seen; /* bits: 1 queued, 2 prefill, 4 decode */
};

static json_t *num(double v)
{
    return isfinite(v) ? json_real(round(v * 1000) / 1000) : json_null();
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double swift_an_percentile(double *v, size_t n, double q)
{
    if (!n)
        return NAN;
    swift_an_sort(v, n, sizeof(*v), cmp_dbl);
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = (size_t)ceil(pos);
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

/* {n, mean_us, p50_us, p90_us, p99_us, max_us} of v[0..n) (sorted in place). */
static json_t *dist_json(double *v, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)n));
    json_object_set_new(o, "mean_us", num(n ? sum / (double)n : NAN));
    json_object_set_new(o, "p50_us", num(swift_an_percentile(v, n, 0.5)));
    json_object_set_new(o, "p90_us", num(swift_an_percentile(v, n, 0.9)));
    json_object_set_new(o, "p99_us", num(swift_an_percentile(v, n, 0.99)));
    json_object_set_new(o, "max_us", num(n ? v[n - 1] : NAN));
    return o;
}

static struct ireq *req_of(struct ireq **r, size_t *n, int64_t id)
{
    for (size_t i = *n; i-- > 0;) /* the three spans of a request are written together */
        if ((*r)[i].req == id)
            return &(*r)[i];
    *r = swift_xrealloc(*r, (*n + 1) * sizeof(**r));
    struct ireq *q = &(*r)[(*n)++];
    memset(q, 0, sizeof(*q));
    q->req = id;
    return q;
}

/* The requests of s (those with all three spans), in the order their spans were written. */
static size_t requests(const struct swift_an_source *s, struct ireq **out)
{
    struct ireq *r = NULL;
    size_t n = 0;
    for (size_t i = 0; i < s->ninf; i++) {
        const struct swift_an_inf *e = &s->inf[i];
        if (e->kind < SWIFT_AN_INF_QUEUED || e->kind > SWIFT_AN_INF_DECODE ||
            e->a[SWIFT_AN_IA_REQ] < 0)
            continue;
        struct ireq *q = req_of(&r, &n, e->a[SWIFT_AN_IA_REQ]);
        if (e->kind == SWIFT_AN_INF_QUEUED) {
            q->t_add = e->ts;
            q->queued = e->dur;
            q->seen |= 1;
        } else if (e->kind == SWIFT_AN_INF_PREFILL) {
            q->prefill = e->dur;
            q->seen |= 2;
        } else {
            q->t_first = e->ts;
            q->t_end = e->ts + e->dur;
            q->decode = e->dur;
            q->prompt = e->a[SWIFT_AN_IA_PROMPT];
            q->completion = e->a[SWIFT_AN_IA_COMPLETION];
            q->seen |= 4;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].seen == 7)
            r[k++] = r[i];
    *out = r;
    return k;
}

/* The engine's settings: from the first engine_step that records them (-1: not recorded). */
static int64_t setting(const struct swift_an_source *s, int ia)
{
    for (size_t i = 0; i < s->ninf; i++)
        if (s->inf[i].kind == SWIFT_AN_INF_STEP && s->inf[i].a[ia] >= 0)
            return s->inf[i].a[ia];
    return -1;
}

static json_t *opt_int(int64_t v)
{
    return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

/* Whether a step that carried prompt chunks ran inside [b, e). */
static int prefill_during(const struct swift_an_source *s, double b, double e)
{
    for (size_t i = 0; i < s->ninf; i++) {
        const struct swift_an_inf *x = &s->inf[i];
        if (x->kind == SWIFT_AN_INF_STEP && x->a[SWIFT_AN_IA_PREFILL] > 0 && x->ts >= b &&
            x->ts + x->dur <= e)
            return 1;
    }
    return 0;
}

/* TTFT, TPOT, throughput and the interference split of the requests. */
static void requests_json(json_t *o, const struct swift_an_source *s, const struct ireq *r,
                          size_t n)
{
    double *ttft = swift_xmalloc((n + 1) * sizeof(double)),
           *tpot = swift_xmalloc((n + 1) * sizeof(double));
    double *queued = swift_xmalloc((n + 1) * sizeof(double));
    double q_sum = 0, t_sum = 0, t0 = INFINITY, t1 = -INFINITY, sum_mixed = 0, sum_clean = 0;
    size_t nf = 0, nt = 0, n_mixed = 0, n_clean = 0;
    int64_t out_tok = 0;
    for (size_t i = 0; i < n; i++) {
        t0 = r[i].t_add < t0 ? r[i].t_add : t0;
        t1 = r[i].t_end > t1 ? r[i].t_end : t1;
        if (r[i].completion < 1) /* cancelled before its first token: no TTFT */
            continue;
        ttft[nf] = r[i].queued + r[i].prefill;
        queued[nf] = r[i].queued;
        q_sum += r[i].queued;
        t_sum += ttft[nf++];
        out_tok += r[i].completion;
        if (r[i].completion < 2)
            continue;
        double v = r[i].decode / (double)(r[i].completion - 1);
        tpot[nt++] = v;
        if (prefill_during(s, r[i].t_first, r[i].t_end)) {
            sum_mixed += v;
            n_mixed++;
        } else {
            sum_clean += v;
            n_clean++;
        }
    }
    double wall = n ? t1 - t0 : NAN;
    json_object_set_new(o, "requests", json_integer((json_int_t)n));
    json_object_set_new(o, "output_tokens", json_integer((json_int_t)out_tok));
    json_object_set_new(o, "wall_us", num(wall));
    json_object_set_new(o, "requests_per_s", num(wall > 0 ? 1e6 * (double)n / wall : NAN));
    json_object_set_new(
        o, "output_tokens_per_s", num(wall > 0 ? 1e6 * (double)out_tok / wall : NAN));
    json_object_set_new(o, "ttft", dist_json(ttft, nf));
    json_object_set_new(o, "queued", dist_json(queued, nf));
    json_object_set_new(o, "queued_share_of_ttft", num(t_sum > 0 ? q_sum / t_sum : NAN));
    json_object_set_new(o, "tpot", dist_json(tpot, nt));
    json_object_set_new(o,
                        "tpot_split",
                        json_pack("{s:I,s:o,s:I,s:o}",
                                  "with_prefill_requests",
                                  (json_int_t)n_mixed,
                                  "with_prefill_mean_us",
                                  num(n_mixed ? sum_mixed / (double)n_mixed : NAN),
                                  "without_prefill_requests",
                                  (json_int_t)n_clean,
                                  "without_prefill_mean_us",
                                  num(n_clean ? sum_clean / (double)n_clean : NAN)));
    free(ttft);
    free(tpot);
    free(queued);
}

/* Batch occupancy, KV cache pressure and the step kinds from the engine_step spans. */
static void steps_json(json_t *o, const struct swift_an_source *s)
{
    int64_t max_seqs = setting(s, SWIFT_AN_IA_MAX_SEQS), nb = setting(s, SWIFT_AN_IA_NUM_BLOCKS);
    size_t steps = 0, nwait = 0, nmixed = 0, npure = 0, nprefill = 0;
    double seqs = 0, seqs_wait = 0, tok_wait = 0, blocks = 0, mixed_us = 0, pure_us = 0;
    int64_t peak = 0, preempt = 0;
    for (size_t i = 0; i < s->ninf; i++) {
        const struct swift_an_inf *e = &s->inf[i];
        if (e->kind != SWIFT_AN_INF_STEP || e->a[SWIFT_AN_IA_SEQS] <= 0)
            continue;
        const int64_t *a = e->a;
        steps++;
        seqs += (double)a[SWIFT_AN_IA_SEQS];
        blocks += a[SWIFT_AN_IA_BLOCKS] > 0 ? (double)a[SWIFT_AN_IA_BLOCKS] : 0;
        peak = a[SWIFT_AN_IA_BLOCKS] > peak ? a[SWIFT_AN_IA_BLOCKS] : peak;
        preempt = a[SWIFT_AN_IA_PREEMPT] > preempt ? a[SWIFT_AN_IA_PREEMPT] : preempt;
        if (a[SWIFT_AN_IA_WAITING] > 0) {
            nwait++;
            seqs_wait += (double)a[SWIFT_AN_IA_SEQS];
            tok_wait += a[SWIFT_AN_IA_TOKENS] > 0 ? (double)a[SWIFT_AN_IA_TOKENS] : 0;
        }
        if (a[SWIFT_AN_IA_DECODE] > 0 && a[SWIFT_AN_IA_PREFILL] > 0) {
            nmixed++;
            mixed_us += e->dur;
        } else if (a[SWIFT_AN_IA_DECODE] > 0) {
            npure++;
            pure_us += e->dur;
        } else {
            nprefill++;
        }
    }
    double ms = (double)max_seqs, mean = steps ? seqs / (double)steps : NAN;
    double mean_wait = nwait ? seqs_wait / (double)nwait : NAN;
    json_object_set_new(o, "steps", json_integer((json_int_t)steps));
    json_object_set_new(o,
                        "batch",
                        json_pack("{s:o,s:o,s:o,s:I,s:o,s:o,s:o}",
                                  "mean_seqs",
                                  num(mean),
                                  "max_num_seqs",
                                  opt_int(max_seqs),
                                  "occupancy",
                                  num(max_seqs > 0 ? mean / ms : NAN),
                                  "steps_with_waiting",
                                  (json_int_t)nwait,
                                  "mean_seqs_with_waiting",
                                  num(mean_wait),
                                  "occupancy_with_waiting",
                                  num(max_seqs > 0 ? mean_wait / ms : NAN),
                                  "mean_tokens_with_waiting",
                                  num(nwait ? tok_wait / (double)nwait : NAN)));
    double mb = steps ? blocks / (double)steps : NAN;
    json_object_set_new(o,
                        "kv_cache",
                        json_pack("{s:o,s:I,s:o,s:o,s:o,s:I}",
                                  "num_blocks",
                                  opt_int(nb),
                                  "peak_blocks",
                                  (json_int_t)peak,
                                  "mean_blocks",
                                  num(mb),
                                  "peak_share",
                                  num(nb > 0 ? (double)peak / (double)nb : NAN),
                                  "mean_share",
                                  num(nb > 0 ? mb / (double)nb : NAN),
                                  "preemptions",
                                  (json_int_t)preempt));
    double mm = nmixed ? mixed_us / (double)nmixed : NAN,
           pm = npure ? pure_us / (double)npure : NAN;
    json_object_set_new(o,
                        "interference",
                        json_pack("{s:I,s:I,s:I,s:o,s:o,s:o}",
                                  "prefill_steps",
                                  (json_int_t)nprefill,
                                  "pure_decode_steps",
                                  (json_int_t)npure,
                                  "mixed_steps",
                                  (json_int_t)nmixed,
                                  "pure_decode_step_us",
                                  num(pm),
                                  "mixed_step_us",
                                  num(mm),
                                  "mixed_over_pure",
                                  num(pm > 0 ? mm / pm : NAN)));
}

json_t *swift_an_infer_json(const struct swift_an_proc *p)
{
    const struct swift_an_source *s = p->src;
    if (s->kind != SWIFT_AN_SWIFT || !s->ninf)
        return json_null();
    struct ireq *r = NULL;
    size_t n = requests(s, &r);
    json_t *o = json_object();
    json_object_set_new(o,
                        "settings",
                        json_pack("{s:o,s:o,s:o,s:o,s:o}",
                                  "max_num_seqs",
                                  opt_int(setting(s, SWIFT_AN_IA_MAX_SEQS)),
                                  "max_num_batched_tokens",
                                  opt_int(setting(s, SWIFT_AN_IA_MAX_BATCHED)),
                                  "num_blocks",
                                  opt_int(setting(s, SWIFT_AN_IA_NUM_BLOCKS)),
                                  "max_model_len",
                                  opt_int(setting(s, SWIFT_AN_IA_MAX_LEN)),
                                  "chunked_prefill",
                                  opt_int(setting(s, SWIFT_AN_IA_CHUNKED))));
    requests_json(o, s, r, n);
    steps_json(o, s);
    free(r);
    return o;
}
