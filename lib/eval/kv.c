/* Inference forward with a key/value cache (see kv.h). */
#include "lib/eval/kv.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_HEAD_DIM 512 /* the attention_cached op's limit (kernels/ops.h) */

static void *zalloc(size_t n)
{
    return calloc(1, n ? n : 1);
}

int swift_kv_init(struct swift_kv *kv, struct swift_model *m, int rows, int cap, int max_tokens)
{
    memset(kv, 0, sizeof(*kv));
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    if (!ops->copy_rows || !ops->attention_cached)
        return swift_error("the '%s' backend has no key/value cache ops (copy_rows, "
                           "attention_cached)",
                           ops->name);
    if (c->head_dim > MAX_HEAD_DIM)
        return swift_error("head_dim %d is larger than %d", c->head_dim, MAX_HEAD_DIM);
    if (rows < 1 || cap < 1 || max_tokens < 1)
        return swift_error("bad cache size %d x %d", rows, cap);
    if ((long long)rows * cap > INT32_MAX)
        return swift_error("cache of %d x %d tokens: more than %d positions", rows, cap, INT32_MAX);
    kv->m = m;
    kv->rows = rows;
    kv->cap = cap;
    kv->max_tokens = max_tokens;
    size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t QD = (size_t)c->num_heads * c->head_dim, KD = (size_t)c->num_kv_heads * c->head_dim;
    size_t N = (size_t)max_tokens;
    size_t cache = (size_t)c->num_layers * rows * cap * KD;
    size_t wide = QD > H ? QD : H;
    /* host: row lengths and the per-call index arrays the ops take */
    kv->len = zalloc((size_t)rows * sizeof(int));
    kv->pos = zalloc(N * sizeof(int32_t));
    kv->rowi = zalloc(N * sizeof(int32_t));
    kv->slot = zalloc(N * sizeof(int32_t));
    kv->wanti = zalloc(N * sizeof(int32_t));
    /* backend memory: the cache and the scratch (ops->alloc zeroes) */
    kv->k = ops->alloc(cache * sizeof(float));
    kv->v = ops->alloc(cache * sizeof(float));
    kv->x = ops->alloc(N * H * sizeof(float));
    kv->h = ops->alloc(N * (wide > I ? wide : I) * sizeof(float));
    kv->rstd = ops->alloc(N * (size_t)(c->num_heads > 1 ? c->num_heads : 1) * sizeof(float));
    kv->q = ops->alloc(N * QD * sizeof(float));
    kv->kk = ops->alloc(N * KD * sizeof(float));
    kv->vv = ops->alloc(N * KD * sizeof(float));
    kv->att = ops->alloc(N * wide * sizeof(float));
    kv->gate = ops->alloc(N * I * sizeof(float));
    kv->up = ops->alloc(N * I * sizeof(float));
    kv->xa = ops->alloc(N * (size_t)(m->lora_rank > 0 ? m->lora_rank : 1) * sizeof(float));
    kv->sel = ops->alloc(N * H * sizeof(float));
    if (!kv->len || !kv->pos || !kv->rowi || !kv->slot || !kv->wanti || !kv->k || !kv->v ||
        !kv->x || !kv->h || !kv->rstd || !kv->q || !kv->kk || !kv->vv || !kv->att || !kv->gate ||
        !kv->up || !kv->xa || !kv->sel) {
        swift_kv_release(kv);
        return swift_error(
            "out of memory for a key/value cache of %d x %d tokens on %s", rows, cap, ops->name);
    }
    return 0;
}

void swift_kv_release(struct swift_kv *kv)
{
    if (kv->m) {
        const struct swift_ops *ops = kv->m->ops;
        /* every backend's free accepts NULL */
        ops->free(kv->k);
        ops->free(kv->v);
        ops->free(kv->x);
        ops->free(kv->h);
        ops->free(kv->rstd);
        ops->free(kv->q);
        ops->free(kv->kk);
        ops->free(kv->vv);
        ops->free(kv->att);
        ops->free(kv->gate);
        ops->free(kv->up);
        ops->free(kv->xa);
        ops->free(kv->sel);
        ops->free(kv->logits);
    }
    free(kv->len);
    free(kv->pos);
    free(kv->rowi);
    free(kv->slot);
    free(kv->wanti);
    memset(kv, 0, sizeof(*kv));
}

void swift_kv_reset(struct swift_kv *kv, int row)
{
    if (row < 0)
        memset(kv->len, 0, (size_t)kv->rows * sizeof(int));
    else if (row < kv->rows)
        kv->len[row] = 0;
}

static size_t kd_of(const struct swift_kv *kv)
{
    return (size_t)kv->m->cfg.num_kv_heads * kv->m->cfg.head_dim;
}

/* the first float of layer l's cache (rows x cap positions of KD floats) */
static size_t layer_off(const struct swift_kv *kv, int l)
{
    return (size_t)l * kv->rows * kv->cap * kd_of(kv);
}

void swift_kv_copy_row(struct swift_kv *kv, int dst, int src)
{
    if (dst == src || dst < 0 || src < 0 || dst >= kv->rows || src >= kv->rows)
        return;
    const struct swift_ops *ops = kv->m->ops;
    size_t KD = kd_of(kv), n = (size_t)kv->len[src] * KD;
    for (int l = 0; l < kv->m->cfg.num_layers && n > 0; l++) {
        size_t so = layer_off(kv, l) + (size_t)src * kv->cap * KD;
        size_t d = layer_off(kv, l) + (size_t)dst * kv->cap * KD;
        ops->copy(kv->k + d, kv->k + so, n); /* device-side copies */
        ops->copy(kv->v + d, kv->v + so, n);
    }
    kv->len[dst] = kv->len[src];
}

/* out (N,O) = alpha * x (N,I) @ w (O,I)^T + beta * out (+ bias): the op table's matmul_fwd
 * (the CPU's runs one row, every decode step of a single sequence, as sgemv). */
static void mm(const struct swift_kv *kv, float *out, const float *x, const float *w,
               const float *b, int N, int in, int on, float alpha, float beta)
{
    kv->m->ops->matmul_fwd(out, x, w, b, N, in, on, alpha, beta);
}

/* out (N,O) = x (N,I) @ W^T (+b) (+ LoRA), beta as in matmul_fwd. */
static void linear(struct swift_kv *kv, const struct swift_linear *L, float *out, const float *x,
                   int N, float beta)
{
    struct swift_model *m = kv->m;
    mm(kv, out, x, L->w, L->b, N, L->in, L->out, 1.0f, beta);
    if (L->lora) {
        mm(kv, kv->xa, x, L->lora->A, NULL, N, L->in, m->lora_rank, 1.0f, 0.0f);
        mm(kv, out, kv->xa, L->lora->B, NULL, N, m->lora_rank, L->out, m->lora_scale, 1.0f);
    }
    kv->flops += 2.0 * N * L->in * L->out;
}

int swift_kv_forward(struct swift_kv *kv, const int32_t *tokens, const int *rowof, int N,
                     const int *want, int nwant, float *logits)
{
    struct swift_model *m = kv->m;
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    size_t KD = kd_of(kv);
    if (N < 0 || N > kv->max_tokens)
        return swift_error("%d tokens in one call, more than %d", N, kv->max_tokens);
    if (N == 0)
        return 0;
    /* positions; check everything before changing anything */
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return swift_error("token id %d is outside the vocabulary (%d)", tokens[i], V);
        if (rowof[i] < 0 || rowof[i] >= kv->rows)
            return swift_error("row %d out of range (%d rows)", rowof[i], kv->rows);
    }
    for (int i = 0; i < N; i++) {
        kv->pos[i] = kv->len[rowof[i]]++;
        kv->rowi[i] = rowof[i];
        kv->slot[i] = rowof[i] * kv->cap + kv->pos[i]; /* < rows*cap <= INT32_MAX */
    }
    for (int i = 0; i < N; i++)
        if (kv->pos[i] >= kv->cap) {
            for (int j = 0; j < N; j++)
                kv->len[rowof[j]]--;
            return swift_error("sequence longer than the cache (%d tokens)", kv->cap);
        }
    for (int w = 0; w < nwant; w++)
        if (want[w] < 0 || want[w] >= N) {
            for (int j = 0; j < N; j++)
                kv->len[rowof[j]]--;
            return swift_error("logits wanted for token %d of %d", want[w], N);
        }
    if (nwant > kv->logits_rows) { /* grows to the largest nwant asked for */
        float *lg = ops->alloc((size_t)nwant * V * sizeof(float));
        if (!lg) {
            for (int j = 0; j < N; j++)
                kv->len[rowof[j]]--;
            return swift_error("out of memory for %d x %d logits on %s", nwant, V, ops->name);
        }
        if (kv->logits)
            ops->free(kv->logits);
        kv->logits = lg;
        kv->logits_rows = nwant;
    }
    double fl = 0;
    for (int i = 0; i < N; i++)
        fl += 4.0 * NH * D * (kv->pos[i] + 1);

    float *x = kv->x;
    ops->embed_fwd(x, tokens, m->embed, N, H);
    for (int l = 0; l < c->num_layers; l++) {
        struct swift_layer *Ly = &m->layers[l];
        ops->rmsnorm_fwd(kv->h, kv->rstd, x, Ly->ln1, N, H, c->rms_norm_eps);
        linear(kv, &Ly->lin[SWIFT_LIN_Q], kv->q, kv->h, N, 0.0f);
        linear(kv, &Ly->lin[SWIFT_LIN_K], kv->kk, kv->h, N, 0.0f);
        linear(kv, &Ly->lin[SWIFT_LIN_V], kv->vv, kv->h, N, 0.0f);
        if (c->qk_norm) {
            /* in place: rmsnorm reads a row fully before writing it */
            ops->rmsnorm_fwd(kv->att, kv->rstd, kv->q, Ly->qn, N * NH, D, c->rms_norm_eps);
            ops->copy(kv->q, kv->att, (size_t)N * NH * D);
            ops->rmsnorm_fwd(kv->att, kv->rstd, kv->kk, Ly->kn, N * NKV, D, c->rms_norm_eps);
            ops->copy(kv->kk, kv->att, (size_t)N * NKV * D);
        }
        ops->rope_fwd(kv->q, kv->pos, m->inv_freq, N, NH, D);
        ops->rope_fwd(kv->kk, kv->pos, m->inv_freq, N, NKV, D);
        /* the new tokens' keys and values into their rows' caches, then attention over them */
        float *kc = kv->k + layer_off(kv, l), *vc = kv->v + layer_off(kv, l);
        ops->copy_rows(kc, kv->slot, kv->kk, NULL, N, (int)KD);
        ops->copy_rows(vc, kv->slot, kv->vv, NULL, N, (int)KD);
        ops->attention_cached(
            kv->att, kv->q, kc, vc, kv->pos, kv->rowi, (size_t)kv->cap * KD, N, NH, NKV, D);
        kv->flops += fl;
        linear(kv, &Ly->lin[SWIFT_LIN_O], x, kv->att, N, 1.0f); /* residual */
        ops->rmsnorm_fwd(kv->h, kv->rstd, x, Ly->ln2, N, H, c->rms_norm_eps);
        linear(kv, &Ly->lin[SWIFT_LIN_GATE], kv->gate, kv->h, N, 0.0f);
        linear(kv, &Ly->lin[SWIFT_LIN_UP], kv->up, kv->h, N, 0.0f);
        ops->swiglu_fwd(kv->gate, kv->gate, kv->up, (size_t)N * I);
        linear(kv, &Ly->lin[SWIFT_LIN_DOWN], x, kv->gate, N, 1.0f); /* residual */
    }
    if (nwant == 0)
        return 0;
    for (int w = 0; w < nwant; w++)
        kv->wanti[w] = want[w];
    ops->copy_rows(kv->sel, NULL, x, kv->wanti, nwant, H);
    ops->rmsnorm_fwd(kv->h, kv->rstd, kv->sel, m->norm, nwant, H, c->rms_norm_eps);
    mm(kv, kv->logits, kv->h, m->lm_head, NULL, nwant, H, V, 1.0f, 0.0f);
    kv->flops += 2.0 * nwant * H * V;
    ops->download(logits, kv->logits, (size_t)nwant * V * sizeof(float));
    return 0;
}

/* Fold LoRA adapters into the base weights: W += scale * B @ A; then run without them. */
int swift_kv_merge_adapters(struct swift_model *m)
{
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!L->lora)
                continue;
            int rk = m->lora_rank;
            size_t na = (size_t)L->in * rk;
            /* A is backend memory: transposed on the host, the transpose uploaded */
            float *A = malloc(na * sizeof(float)), *At = malloc(na * sizeof(float));
            float *dAt = m->ops->alloc(na * sizeof(float));
            if (!A || !At || !dAt) {
                free(A);
                free(At);
                if (dAt)
                    m->ops->free(dAt);
                return swift_error("out of memory");
            }
            m->ops->download(A, L->lora->A, na * sizeof(float));
            for (int a = 0; a < rk; a++)
                for (int i = 0; i < L->in; i++)
                    At[(size_t)i * rk + a] = A[(size_t)a * L->in + i];
            m->ops->upload(dAt, At, na * sizeof(float));
            /* W (out,in) += scale * B (out,r) @ At (in,r)^T */
            m->ops->matmul_fwd(L->w, L->lora->B, dAt, NULL, L->out, rk, L->in, m->lora_scale, 1.0f);
            m->ops->free(dAt);
            free(A);
            free(At);
            free(L->lora); /* A and B live in m->lora_params, freed with the model */
            L->lora = NULL;
        }
    return 0;
}

double swift_logprob(const float *logits, int V, int target)
{
    double mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double s = 0;
    for (int i = 0; i < V; i++)
        s += exp((double)logits[i] - mx);
    return (double)logits[target] - mx - log(s);
}
