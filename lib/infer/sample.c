/* The engine's sampler (see sample.h). */
#include "lib/infer/sample.h"
#include "lib/core/alloc.h"
#include "lib/eval/generate.h"
#include "lib/infer/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_sampler_init(struct swift_sampler *sp, int V)
{
    sp->V = V;
    sp->x = swift_xcalloc((size_t)V, sizeof(double));
    sp->cnt = swift_xcalloc((size_t)V, sizeof(int));
    sp->in = swift_xcalloc((size_t)V, 1);
    sp->cand = swift_xcalloc((size_t)V, sizeof(*sp->cand));
}

void swift_sampler_free(struct swift_sampler *sp)
{
    free(sp->x);
    free(sp->cnt);
    free(sp->in);
    free(sp->cand);
    memset(sp, 0, sizeof(*sp));
}

static int valid(const struct swift_sampler *sp, int32_t t)
{
    return t >= 0 && t < sp->V;
}

void swift_sample_penalize(struct swift_sampler *sp, double *x, const struct swift_sampling *s,
                           const int32_t *prompt, int plen, const int32_t *out, int nout)
{
    double r = s->repetition_penalty;
    if (r != 1.0 && r > 0) { /* each seen token once, whatever its count */
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *t = pass ? out : prompt;
            for (int i = 0, n = pass ? nout : plen; i < n; i++)
                if (valid(sp, t[i]) && !sp->in[t[i]]) {
                    sp->in[t[i]] = 1;
                    x[t[i]] = x[t[i]] > 0 ? x[t[i]] / r : x[t[i]] * r;
                }
        }
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *t = pass ? out : prompt;
            for (int i = 0, n = pass ? nout : plen; i < n; i++)
                if (valid(sp, t[i]))
                    sp->in[t[i]] = 0;
        }
    }
    if (s->presence_penalty == 0 && s->frequency_penalty == 0)
        return;
    for (int i = 0; i < nout; i++)
        if (valid(sp, out[i]))
            sp->cnt[out[i]]++;
    for (int i = 0; i < nout; i++) {
        int32_t t = out[i];
        if (valid(sp, t) && sp->cnt[t] > 0) { /* once per distinct token */
            x[t] -= s->frequency_penalty * sp->cnt[t] + s->presence_penalty;
            sp->cnt[t] = 0;
        }
    }
}

/* larger x first, then lower id */
static int cmp_cand(const void *a, const void *b)
{
    const struct swift_sample_cand *p = a, *q = b;
    if (p->x != q->x)
        return p->x < q->x ? 1 : -1;
    return p->id - q->id;
}

static void swap_cand(struct swift_sample_cand *a, struct swift_sample_cand *b)
{
    struct swift_sample_cand t = *a;
    *a = *b;
    *b = t;
}

/* Reorder c[0..n) so that c[0..k) are the k first in cmp_cand's order (in no particular order
 * among themselves): quickselect, O(n) on average, where a sort of a large vocabulary per
 * token would cost more than a small model's forward. */
static void select_k(struct swift_sample_cand *c, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2; /* median of three as the pivot, moved to hi */
        if (cmp_cand(&c[mid], &c[lo]) < 0)
            swap_cand(&c[mid], &c[lo]);
        if (cmp_cand(&c[hi], &c[lo]) < 0)
            swap_cand(&c[hi], &c[lo]);
        if (cmp_cand(&c[mid], &c[hi]) < 0)
            swap_cand(&c[mid], &c[hi]);
        int st = lo;
        for (int i = lo; i < hi; i++)
            if (cmp_cand(&c[i], &c[hi]) < 0)
                swap_cand(&c[i], &c[st++]);
        swap_cand(&c[st], &c[hi]); /* the pivot at its final place st */
        if (st == k - 1 || st == k)
            return;
        if (st < k)
            lo = st + 1;
        else
            hi = st - 1;
    }
}

/* The token drawn from x (processed logits) as s says: the top_k best (ties: lower id), the
 * smallest prefix of those in order whose mass reaches top_p, those at least min_p times as
 * likely as the best, then a draw in proportion. */
static int32_t pick(struct swift_sampler *sp, const double *x, const struct swift_sampling *s,
                    uint64_t rng[4])
{
    int V = sp->V, best = -1;
    for (int v = 0; v < V; v++)
        if (x[v] > -INFINITY && (best < 0 || x[v] > x[best]))
            best = v;
    if (best < 0 || s->temperature <= 0)
        return best;
    struct swift_sample_cand *c = sp->cand;
    int n = 0;
    for (int v = 0; v < V; v++)
        if (x[v] > -INFINITY)
            c[n++] = (struct swift_sample_cand){x[v], v};
    if (s->top_k > 0 && s->top_k < n) {
        select_k(c, n, s->top_k);
        n = s->top_k;
    }
    if (s->top_p < 1.0)
        qsort(c, (size_t)n, sizeof(*c), cmp_cand);
    double mx = x[best], sum = 0;
    for (int i = 0; i < n; i++) {
        c[i].x = exp((c[i].x - mx) / s->temperature); /* the best is 1 */
        sum += c[i].x;
    }
    if (s->top_p < 1.0) { /* the smallest prefix whose mass reaches top_p, at least one */
        double cum = 0, tot = sum;
        int k = 0;
        sum = 0;
        while (k < n) {
            cum += c[k].x / tot;
            sum += c[k].x;
            k++;
            if (cum >= s->top_p)
                break;
        }
        n = k;
    }
    if (s->min_p > 0) { /* the best (1) is always kept */
        int k = 0;
        sum = 0;
        for (int i = 0; i < n; i++)
            if (c[i].x >= s->min_p) {
                c[k] = c[i];
                sum += c[k++].x;
            }
        n = k;
    }
    double u = swift_rng_uniform(rng) * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += c[i].x;
        if (u < cum)
            return c[i].id;
    }
    return c[n - 1].id;
}

/* the ntop best raw logits, best first (ties: lower id), as log-probabilities */
static void top_alternatives(const float *logits, int V, double lse, int ntop, struct swift_pick *p)
{
    if (ntop > 20)
        ntop = 20;
    if (ntop > V)
        ntop = V;
    int n = 0;
    for (int v = 0; v < V && ntop > 0; v++) {
        float l = logits[v];
        if (isnan(l) || (n == ntop && !(l > logits[p->top_ids[n - 1]])))
            continue;
        int at = n < ntop ? n++ : n - 1;
        while (at > 0 && l > logits[p->top_ids[at - 1]]) {
            p->top_ids[at] = p->top_ids[at - 1];
            at--;
        }
        p->top_ids[at] = v;
    }
    p->ntop = n;
    for (int i = 0; i < n; i++)
        p->top_logprobs[i] = (float)((double)logits[p->top_ids[i]] - lse);
}

void swift_sample_next(struct swift_sampler *sp, const float *logits,
                       const struct swift_sampling *s, const int32_t *prompt, int plen,
                       const int32_t *out, int nout, uint64_t rng[4], struct swift_pick *p)
{
    int V = sp->V;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) {
        sp->x[v] = isnan(logits[v]) ? -INFINITY : (double)logits[v];
        if (sp->x[v] > mx)
            mx = sp->x[v];
    }
    for (int v = 0; v < V && mx > -INFINITY; v++)
        sum += exp(sp->x[v] - mx);
    double lse = mx + log(sum);
    swift_sample_penalize(sp, sp->x, s, prompt, plen, out, nout);
    p->token = pick(sp, sp->x, s, rng);
    p->logprob = p->token >= 0 ? (float)((double)logits[p->token] - lse) : -INFINITY;
    p->ntop = 0;
    top_alternatives(logits, V, lse, s->top_logprobs, p);
}
