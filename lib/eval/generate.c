/* Batched generation on the key/value cache (see generate.h). */
#include "lib/eval/generate.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/eval/kv.h"
#include "lib/model/model.h"
#include "lib/core/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void swift_rng_seed(uint64_t rng[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        rng[i] = z ^ (z >> 31);
    }
}

double swift_rng_uniform(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}

struct pi {
    double p;
    int i;
};

static int cmp_pi(const void *a, const void *b)
{
    const struct pi *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return x->i - y->i;
}

int swift_sample(const float *logits, int V, double temperature, double top_p, uint64_t rng[4])
{
    int best = -1;
    for (int i = 0; i < V; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best]))
            best = i;
    if (best < 0 || temperature <= 0.0)
        return best;
    struct pi *p = swift_xmalloc((size_t)V * sizeof(*p));
    double mx = logits[best], sum = 0;
    for (int i = 0; i < V; i++) {
        p[i].i = i;
        p[i].p = isnan(logits[i]) ? 0.0 : exp(((double)logits[i] - mx) / temperature);
        sum += p[i].p;
    }
    int n = V;
    if (top_p < 1.0) {
        qsort(p, (size_t)V, sizeof(*p), cmp_pi);
        /* keep the smallest prefix whose mass reaches top_p (at least one token) */
        double c = 0;
        for (n = 0; n < V;) {
            c += p[n].p / sum;
            n++;
            if (c >= top_p)
                break;
        }
        sum = 0;
        for (int i = 0; i < n; i++)
            sum += p[i].p;
    }
    double u = swift_rng_uniform(rng) * sum, c = 0;
    int id = p[n - 1].i;
    for (int i = 0; i < n; i++) {
        c += p[i].p;
        if (u < c) {
            id = p[i].i;
            break;
        }
    }
    free(p);
    return id;
}

static double now_s(void)
{
    return (double)swift_trace_now() * 1e-9;
}

/* One generation's host buffers: prefill takes up to M tokens per call, decode up to n. */
struct gen {
    struct swift_kv *kv;
    struct swift_gen_seq *seqs;
    int n, V, M;
    float *logits; /* (n, V): each sequence's latest logits */
    int32_t *tok;
    int *rowof, *want, *wrow, *next;
    uint64_t (*rng)[4];
};

static void gen_free(struct gen *g)
{
    free(g->logits);
    free(g->tok);
    free(g->rowof);
    free(g->want);
    free(g->wrow);
    free(g->rng);
    free(g->next);
}

/* Buffers, checks of every sequence, the output arrays and the RNGs. */
static int gen_init(struct gen *g, const struct swift_gen_opts *o)
{
    int n = g->n, V = g->V, M = g->M;
    size_t T = (size_t)(M > n ? M : n), n1 = (size_t)(n > 0 ? n : 1);
    struct swift_gen_seq *seqs = g->seqs;
    for (int i = 0; i < n; i++) /* freed on error */
        seqs[i].out = NULL;
    g->logits = swift_xmalloc(n1 * V * sizeof(float));
    g->tok = swift_xmalloc(T * sizeof(int32_t));
    g->rowof = swift_xmalloc(T * sizeof(int));
    g->want = swift_xmalloc(T * sizeof(int));
    g->wrow = swift_xmalloc(T * sizeof(int));
    g->rng = swift_xmalloc(n1 * sizeof(*g->rng));
    g->next = swift_xmalloc(n1 * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        seqs[i].n_out = 0;
        seqs[i].stopped = 0;
        if (seqs[i].prompt_len < 1)
            return swift_error("sequence %d has an empty prompt", i);
        if (seqs[i].prompt_len + o->max_new > g->kv->cap)
            return swift_error("prompt of %d tokens + %d new tokens exceed the cache (%d)",
                               seqs[i].prompt_len,
                               o->max_new,
                               g->kv->cap);
        int sh = seqs[i].share - 1;
        if (seqs[i].share &&
            (sh < 0 || sh >= i || seqs[sh].share || seqs[sh].prompt_len != seqs[i].prompt_len))
            return swift_error("sequence %d shares the prompt of sequence %d, which is not an "
                               "earlier one of the same length that prefills its own",
                               i,
                               sh);
        seqs[i].out = swift_xmalloc((size_t)o->max_new * sizeof(int32_t));
        swift_rng_seed(g->rng[i], seqs[i].seed);
    }
    return 0;
}

/* Prompt tokens in chunks of M; the logits of each prompt's last token. Returns the tokens
 * run, or -1. */
static long prefill(struct gen *g)
{
    struct swift_gen_seq *seqs = g->seqs;
    int V = g->V;
    long ptoks = 0;
    int si = 0, sp = 0; /* sequence and position of the next prompt token */
    while (si < g->n && seqs[si].share)
        si++;
    while (si < g->n) {
        int N = 0, nw = 0;
        while (si < g->n && N < g->M) {
            g->tok[N] = seqs[si].prompt[sp];
            g->rowof[N] = si;
            if (sp == seqs[si].prompt_len - 1) {
                g->want[nw] = N;
                g->wrow[nw++] = si;
            }
            N++;
            if (++sp == seqs[si].prompt_len) {
                si++;
                sp = 0;
                while (si < g->n && seqs[si].share) /* copied below */
                    si++;
            }
        }
        float *lg = swift_xmalloc((size_t)(nw > 0 ? nw : 1) * V * sizeof(float));
        if (swift_kv_forward(g->kv, g->tok, g->rowof, N, g->want, nw, lg) < 0) {
            free(lg);
            return -1;
        }
        for (int w = 0; w < nw; w++)
            memcpy(
                g->logits + (size_t)g->wrow[w] * V, lg + (size_t)w * V, (size_t)V * sizeof(float));
        free(lg);
        ptoks += N;
    }
    for (int i = 0; i < g->n; i++) /* the shared prompts: the prefilled row and its logits */
        if (seqs[i].share) {
            swift_kv_copy_row(g->kv, i, seqs[i].share - 1);
            memcpy(g->logits + (size_t)i * V,
                   g->logits + (size_t)(seqs[i].share - 1) * V,
                   (size_t)V * sizeof(float));
        }
    return ptoks;
}

/* Sample the next token of every live sequence into tok/rowof/next (N of them), updating
 * *live. Returns N, or -1. */
static int sample_step(struct gen *g, const struct swift_gen_opts *o, swift_gen_stop_fn stop,
                       void *ctx, int *live)
{
    int N = 0, V = g->V;
    for (int i = 0; i < g->n; i++) {
        struct swift_gen_seq *s = &g->seqs[i];
        if (s->stopped || s->n_out >= o->max_new)
            continue;
        int id = swift_sample(g->logits + (size_t)i * V, V, o->temperature, o->top_p, g->rng[i]);
        if (id < 0)
            return swift_error("no token to sample (NaN logits)");
        s->out[s->n_out++] = id;
        for (int k = 0; k < o->nstop; k++)
            if (o->stop_ids[k] == id)
                s->stopped = 1;
        if (!s->stopped && stop && stop(ctx, i, s->out, s->n_out))
            s->stopped = 2;
        if (s->stopped || s->n_out >= o->max_new) {
            (*live)--;
            continue;
        }
        g->tok[N] = id;
        g->rowof[N] = i;
        g->want[N] = N;
        g->next[N] = i;
        N++;
    }
    return N;
}

/* Run the N sampled tokens (chunks of M when rows > max_tokens); their logits into place. */
static int decode_step(struct gen *g, int N)
{
    int V = g->V, M = g->M;
    for (int b = 0; b < N; b += M) {
        int nb = N - b < M ? N - b : M;
        float *lg = swift_xmalloc((size_t)nb * V * sizeof(float));
        for (int k = 0; k < nb; k++)
            g->want[b + k] = k;
        if (swift_kv_forward(g->kv, g->tok + b, g->rowof + b, nb, g->want + b, nb, lg) < 0) {
            free(lg);
            return -1;
        }
        for (int k = 0; k < nb; k++)
            memcpy(g->logits + (size_t)g->next[b + k] * V,
                   lg + (size_t)k * V,
                   (size_t)V * sizeof(float));
        free(lg);
    }
    return 0;
}

/* Decode: one token per live sequence per step. Returns the tokens run, or -1. */
static long decode(struct gen *g, const struct swift_gen_opts *o, swift_gen_stop_fn stop, void *ctx)
{
    long dtoks = 0;
    int live = g->n;
    while (live > 0) {
        int N = sample_step(g, o, stop, ctx, &live);
        if (N < 0)
            return -1;
        if (N == 0)
            break;
        /* N <= n <= rows */
        if (decode_step(g, N) < 0)
            return -1;
        dtoks += N;
    }
    return dtoks;
}

int swift_generate(struct swift_kv *kv, struct swift_gen_seq *seqs, int n,
                   const struct swift_gen_opts *o, swift_gen_stop_fn stop, void *ctx,
                   struct swift_gen_stats *st)
{
    if (n > kv->rows)
        return swift_error("%d sequences for a cache of %d rows", n, kv->rows);
    if (o->max_new < 1)
        return swift_error("max new tokens must be at least 1");
    struct gen g = {
        .kv = kv, .seqs = seqs, .n = n, .V = kv->m->cfg.vocab_size, .M = kv->max_tokens};
    int rc = -1;
    if (gen_init(&g, o) < 0)
        goto out;
    swift_kv_reset(kv, -1);
    double t0 = now_s();
    int64_t tt0 = swift_trace_now();
    long ptoks = prefill(&g);
    if (ptoks < 0)
        goto out;
    double t1 = now_s();
    if (swift_trace_enabled()) {
        struct swift_targ a[2] = {SWIFT_TARG_I("tokens", ptoks), SWIFT_TARG_I("sequences", n)};
        swift_trace_span("eval", "prefill", tt0, swift_trace_now(), a, 2);
    }
    int64_t dt0 = swift_trace_now();
    long dtoks = decode(&g, o, stop, ctx);
    if (dtoks < 0)
        goto out;
    double t2 = now_s();
    if (swift_trace_enabled()) {
        struct swift_targ a[2] = {SWIFT_TARG_I("tokens", dtoks), SWIFT_TARG_I("sequences", n)};
        swift_trace_span("eval", "decode", dt0, swift_trace_now(), a, 2);
        struct swift_targ c[2] = {
            SWIFT_TARG_D("prefill", t1 > t0 ? (double)ptoks / (t1 - t0) : 0.0),
            SWIFT_TARG_D("decode", t2 > t1 ? (double)dtoks / (t2 - t1) : 0.0)};
        swift_trace_counters("tokens/s", c, 2);
    }
    if (st) {
        st->prefill_tokens += ptoks;
        st->decode_tokens += dtoks;
        st->prefill_s += t1 - t0;
        st->decode_s += t2 - t1;
    }
    rc = 0;
out:
    if (rc < 0)
        for (int i = 0; i < n; i++) {
            free(seqs[i].out);
            seqs[i].out = NULL;
        }
    gen_free(&g);
    return rc;
}
