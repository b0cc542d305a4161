/* Inference forward with a key/value cache (see kv.h). */
#include "eval/kv.h"
#include "error.h"
#include "lib/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "banned.h"

#define MAX_HEAD_DIM 512

static void *zalloc(size_t n)
{
    return calloc(1, n ? n : 1);
}

int swift_kv_init(struct swift_kv *kv, struct swift_model *m, int rows, int cap, int max_tokens)
{
    memset(kv, 0, sizeof(*kv));
    const struct swift_model_config *c = &m->cfg;
    if (strncmp(m->ops->name, "cpu", 3)) /* "cpu", "cpu-strict" */
        return swift_error("the key/value cache needs the cpu backend, not '%s'", m->ops->name);
    if (c->head_dim > MAX_HEAD_DIM)
        return swift_error("head_dim %d is larger than %d", c->head_dim, MAX_HEAD_DIM);
    if (rows < 1 || cap < 1 || max_tokens < 1)
        return swift_error("bad cache size %d x %d", rows, cap);
    kv->m = m;
    kv->rows = rows;
    kv->cap = cap;
    kv->max_tokens = max_tokens;
    size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t QD = (size_t)c->num_heads * c->head_dim, KD = (size_t)c->num_kv_heads * c->head_dim;
    size_t N = (size_t)max_tokens;
    size_t cache = (size_t)c->num_layers * rows * cap * KD;
    size_t wide = QD > H ? QD : H;
    kv->len = zalloc((size_t)rows * sizeof(int));
    kv->k = malloc(cache * sizeof(float));
    kv->v = malloc(cache * sizeof(float));
    kv->x = zalloc(N * H * sizeof(float));
    kv->h = zalloc(N * (wide > I ? wide : I) * sizeof(float));
    kv->rstd = zalloc(N * (size_t)(c->num_heads > 1 ? c->num_heads : 1) * sizeof(float));
    kv->q = zalloc(N * QD * sizeof(float));
    kv->kk = zalloc(N * KD * sizeof(float));
    kv->vv = zalloc(N * KD * sizeof(float));
    kv->att = zalloc(N * wide * sizeof(float));
    kv->gate = zalloc(N * I * sizeof(float));
    kv->up = zalloc(N * I * sizeof(float));
    kv->xa = zalloc(N * (size_t)(m->lora_rank > 0 ? m->lora_rank : 1) * sizeof(float));
    kv->sel = zalloc(N * H * sizeof(float));
    kv->pos = zalloc(N * sizeof(int32_t));
    if (!kv->len || !kv->k || !kv->v || !kv->x || !kv->h || !kv->rstd || !kv->q || !kv->kk ||
        !kv->vv || !kv->att || !kv->gate || !kv->up || !kv->xa || !kv->sel || !kv->pos) {
        swift_kv_release(kv);
        return swift_error("out of memory for a key/value cache of %d x %d tokens", rows, cap);
    }
    return 0;
}

void swift_kv_release(struct swift_kv *kv)
{
    free(kv->len);
    free(kv->k);
    free(kv->v);
    free(kv->x);
    free(kv->h);
    free(kv->rstd);
    free(kv->q);
    free(kv->kk);
    free(kv->vv);
    free(kv->att);
    free(kv->gate);
    free(kv->up);
    free(kv->xa);
    free(kv->sel);
    free(kv->pos);
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

void swift_kv_copy_row(struct swift_kv *kv, int dst, int src)
{
    if (dst == src || dst < 0 || src < 0 || dst >= kv->rows || src >= kv->rows)
        return;
    size_t KD = kd_of(kv), n = (size_t)kv->len[src] * KD;
    for (int l = 0; l < kv->m->cfg.num_layers; l++) {
        size_t so = ((size_t)l * kv->rows + src) * kv->cap * KD;
        size_t d = ((size_t)l * kv->rows + dst) * kv->cap * KD;
        memcpy(kv->k + d, kv->k + so, n * sizeof(float));
        memcpy(kv->v + d, kv->v + so, n * sizeof(float));
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

/* Causal attention of N new tokens against their rows' caches (which already hold them).
 * q (N,NH,D), out (N,NH,D). */
static void cached_attention(struct swift_kv *kv, int l, float *out, const float *q,
                             const int *rowof, int N)
{
    const struct swift_model_config *c = &kv->m->cfg;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim, G = NH / NKV;
    size_t KD = kd_of(kv);
    float scale = 1.0f / sqrtf((float)D);
    const int32_t *pos = kv->pos;
    double fl = 0;
    for (int i = 0; i < N; i++)
        fl += 4.0 * NH * D * (pos[i] + 1);
    kv->flops += fl;
#pragma omp parallel for collapse(2) schedule(dynamic, 4) if (N * NH > 8)
    for (int i = 0; i < N; i++) {
        for (int h = 0; h < NH; h++) {
            const float *qi = q + ((size_t)i * NH + h) * D;
            size_t base = ((size_t)l * kv->rows + rowof[i]) * kv->cap * KD + (size_t)(h / G) * D;
            const float *kb = kv->k + base, *vb = kv->v + base;
            float acc[MAX_HEAD_DIM];
            float mx = -INFINITY, sum = 0.0f;
            for (int d = 0; d < D; d++)
                acc[d] = 0.0f;
            for (int j = 0; j <= pos[i]; j++) {
                const float *kj = kb + (size_t)j * KD, *vj = vb + (size_t)j * KD;
                float s = 0.0f;
                for (int d = 0; d < D; d++)
                    s += qi[d] * kj[d];
                s *= scale;
                if (s > mx) {
                    float r = expf(mx - s);
                    sum *= r;
                    for (int d = 0; d < D; d++)
                        acc[d] *= r;
                    mx = s;
                }
                float p = expf(s - mx);
                sum += p;
                for (int d = 0; d < D; d++)
                    acc[d] += p * vj[d];
            }
            float *o = out + ((size_t)i * NH + h) * D;
            for (int d = 0; d < D; d++)
                o[d] = acc[d] / sum;
        }
    }
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
    for (int i = 0; i < N; i++)
        kv->pos[i] = kv->len[rowof[i]]++;
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
        for (int i = 0; i < N; i++) {
            size_t o = (((size_t)l * kv->rows + rowof[i]) * kv->cap + kv->pos[i]) * KD;
            memcpy(kv->k + o, kv->kk + (size_t)i * KD, KD * sizeof(float));
            memcpy(kv->v + o, kv->vv + (size_t)i * KD, KD * sizeof(float));
        }
        cached_attention(kv, l, kv->att, kv->q, rowof, N);
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
        memcpy(kv->sel + (size_t)w * H, x + (size_t)want[w] * H, (size_t)H * sizeof(float));
    ops->rmsnorm_fwd(kv->h, kv->rstd, kv->sel, m->norm, nwant, H, c->rms_norm_eps);
    mm(kv, logits, kv->h, m->lm_head, NULL, nwant, H, V, 1.0f, 0.0f);
    kv->flops += 2.0 * nwant * H * V;
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
