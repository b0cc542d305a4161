/* Batched generation on the key/value cache (see generate.h). */
#include "lib/eval/generate.h"
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
    struct pi *p = malloc((size_t)V * sizeof(*p));
    if (!p)
        return -1;
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

int swift_generate(struct swift_kv *kv, struct swift_gen_seq *seqs, int n,
                   const struct swift_gen_opts *o, swift_gen_stop_fn stop, void *ctx,
                   struct swift_gen_stats *st)
{
    int V = kv->m->cfg.vocab_size, M = kv->max_tokens;
    if (n > kv->rows)
        return swift_error("%d sequences for a cache of %d rows", n, kv->rows);
    if (o->max_new < 1)
        return swift_error("max new tokens must be at least 1");
    int rc = -1;
    /* prefill fills up to M tokens per call, decode up to n (one per sequence) */
    size_t T = (size_t)(M > n ? M : n);
    float *logits = malloc((size_t)(n > 0 ? n : 1) * V * sizeof(float));
    int32_t *tok = malloc(T * sizeof(int32_t));
    int *rowof = malloc(T * sizeof(int)), *want = malloc(T * sizeof(int));
    int *wrow = malloc(T * sizeof(int));
    uint64_t(*rng)[4] = malloc((size_t)(n > 0 ? n : 1) * sizeof(*rng));
    int32_t *next = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!logits || !tok || !rowof || !want || !wrow || !rng || !next) {
        swift_error("out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        seqs[i].out = NULL;
    for (int i = 0; i < n; i++) {
        seqs[i].n_out = 0;
        seqs[i].stopped = 0;
        if (seqs[i].prompt_len < 1) {
            swift_error("sequence %d has an empty prompt", i);
            goto out;
        }
        if (seqs[i].prompt_len + o->max_new > kv->cap) {
            swift_error("prompt of %d tokens + %d new tokens exceed the cache (%d)",
                        seqs[i].prompt_len,
                        o->max_new,
                        kv->cap);
            goto out;
        }
        seqs[i].out = malloc((size_t)o->max_new * sizeof(int32_t));
        if (!seqs[i].out) {
            swift_error("out of memory");
            goto out;
        }
        swift_rng_seed(rng[i], seqs[i].seed);
    }
    swift_kv_reset(kv, -1);

    /* prefill: prompt tokens in chunks; logits of each prompt's last token */
    double t0 = now_s();
    int64_t tt0 = swift_trace_now();
    long ptoks = 0;
    int si = 0, sp = 0; /* sequence and position of the next prompt token */
    while (si < n) {
        int N = 0, nw = 0;
        while (si < n && N < M) {
            tok[N] = seqs[si].prompt[sp];
            rowof[N] = si;
            if (sp == seqs[si].prompt_len - 1) {
                want[nw] = N;
                wrow[nw++] = si;
            }
            N++;
            if (++sp == seqs[si].prompt_len) {
                si++;
                sp = 0;
            }
        }
        float *lg = malloc((size_t)(nw > 0 ? nw : 1) * V * sizeof(float));
        if (!lg) {
            swift_error("out of memory");
            goto out;
        }
        if (swift_kv_forward(kv, tok, rowof, N, want, nw, lg) < 0) {
            free(lg);
            goto out;
        }
        for (int w = 0; w < nw; w++)
            memcpy(logits + (size_t)wrow[w] * V, lg + (size_t)w * V, (size_t)V * sizeof(float));
        free(lg);
        ptoks += N;
    }
    double t1 = now_s();
    if (swift_trace_enabled()) {
        struct swift_targ a[2] = {SWIFT_TARG_I("tokens", ptoks), SWIFT_TARG_I("sequences", n)};
        swift_trace_span("eval", "prefill", tt0, swift_trace_now(), a, 2);
    }

    /* decode: one token per live sequence per step */
    long dtoks = 0;
    int live = n;
    int64_t dt0 = swift_trace_now();
    while (live > 0) {
        int N = 0;
        for (int i = 0; i < n; i++) {
            struct swift_gen_seq *s = &seqs[i];
            if (s->stopped || s->n_out >= o->max_new)
                continue;
            int id = swift_sample(logits + (size_t)i * V, V, o->temperature, o->top_p, rng[i]);
            if (id < 0) {
                swift_error("no token to sample (out of memory or NaN logits)");
                goto out;
            }
            s->out[s->n_out++] = id;
            for (int k = 0; k < o->nstop; k++)
                if (o->stop_ids[k] == id)
                    s->stopped = 1;
            if (!s->stopped && stop && stop(ctx, i, s->out, s->n_out))
                s->stopped = 2;
            if (s->stopped || s->n_out >= o->max_new) {
                live--;
                continue;
            }
            tok[N] = id;
            rowof[N] = i;
            want[N] = N;
            next[N] = i;
            N++;
        }
        if (N == 0)
            break;
        /* N <= n <= rows; chunk when rows > max_tokens */
        for (int b = 0; b < N; b += M) {
            int nb = N - b < M ? N - b : M;
            float *lg = malloc((size_t)nb * V * sizeof(float));
            if (!lg) {
                swift_error("out of memory");
                goto out;
            }
            for (int k = 0; k < nb; k++)
                want[b + k] = k;
            if (swift_kv_forward(kv, tok + b, rowof + b, nb, want + b, nb, lg) < 0) {
                free(lg);
                goto out;
            }
            for (int k = 0; k < nb; k++)
                memcpy(logits + (size_t)next[b + k] * V,
                       lg + (size_t)k * V,
                       (size_t)V * sizeof(float));
            free(lg);
        }
        dtoks += N;
    }
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
    free(logits);
    free(tok);
    free(rowof);
    free(want);
    free(wrow);
    free(rng);
    free(next);
    return rc;
}
