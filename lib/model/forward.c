/* model forward — the one decoder forward (see model.h): training's over whole rows (activations
 * kept for backward), generation's over a key/value cache (lib/model/kv.h) and inference's over
 * a paged cache (lib/model/pkv.h) run the same layer function; only where attention finds the
 * keys and values differs. */
#include "lib/model/model.h"
#include "lib/core/alloc.h"
#include "lib/core/mem.h"
#include "lib/model/internal.h"
#include "lib/model/kv.h"
#include "lib/model/pkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

/* How one layer call sees its N tokens. */
struct layer_ctx {
    int N;
    const int32_t *pos;    /* (N) position of each token in its document or cache row */
    int B, T;              /* without a cache: B rows of T tokens, causal attention inside each */
    struct swift_kv *kv;   /* NULL, or: keys and values appended at kv->slot, attention over the
                            * rows kv->rowi of the cache */
    struct swift_pkv *pkv; /* NULL, or (with kv = &pkv->s, the scratch): keys and values at the
                            * pool slots kv->slot, attention through the block tables */
    float *xa;             /* (N,r) LoRA scratch shared by the adapters; NULL: each adapter's own
                            * ad->xa, kept for backward */
    int drop;              /* LoRA dropout on (training with a backward to follow) */
    const int32_t *pos3;   /* NULL, or (3, N) host: M-RoPE positions of a cached forward
                            * (swift_pkv_forward_mm); pos stays the cache position */
};

static uint64_t lin_seed(const struct swift_model *m, int l, int k)
{
    uint64_t s = m->dropout_seed ^ ((uint64_t)(l + 1) * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)(k + 1) * 0xc2b2ae3d27d4eb4fULL);
    return swift_splitmix64(&s);
}

/* DoRA's per-forward factors of L: ad->inv = 1 / ||W + s B A||_row (PEFT detaches it: no
 * gradient flows through it) and ad->g = mag * inv. W + s B A is formed by matmul_bwd's input
 * gradient (din = B @ A) on a copy of W; the row norms come from rmsnorm_fwd with eps 0 and unit
 * weights: rstd = sqrt(in) / ||row||. */
static void dora_norm(struct swift_model *m, const struct swift_linear *L,
                      const struct swift_lora_ad *ad)
{
    const struct swift_ops *ops = m->ops;
    struct swift_dora *d = m->dora;
    if (!d->keep_norm) {
        ops->copy(d->w, L->w, (size_t)L->out * L->in);
        ops->matmul_bwd(
            d->w, NULL, NULL, ad->B, NULL, ad->A, L->out, L->in, m->lora_rank, m->lora_scale, 1.0f);
        ops->rmsnorm_fwd(d->w2, ad->inv, d->w, d->ones, L->out, L->in, 0.0f);
        ops->scale(ad->inv, 1.0f / sqrtf((float)L->in), (size_t)L->out);
    }
    ops->mul_cols(ad->g, ad->mag, ad->inv, NULL, 1, L->out, 0.0f);
}

/* The cached forward's (N,out) scratch for DoRA, grown on demand (backend memory). */
static float *dora_z(struct swift_model *m, size_t n)
{
    struct swift_dora *d = m->dora;
    if (n > d->zcap) {
        swift_mem_free(m->ops->free, d->z);
        d->z = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, n * sizeof(float));
        if (!d->z) {
            fprintf(stderr, "error: out of memory for DoRA's %zu floats of scratch\n", n);
            exit(1);
        }
        d->zcap = n;
    }
    return d->z;
}

/* DoRA (PEFT's DoraLinearVariant.forward), g = mag / ||W + s B A||_row:
 * out = beta*out + g * (x W^T + s x A^T B^T) + b; with dropout (xd = dropout(x)) PEFT
 * recomputes the base on xd: out = beta*out + x W^T + b + (g - 1) * xd W^T + g * s xd A^T B^T.
 * zn = (xd W^T + s xd A^T B^T) * inv is kept for the magnitude's gradient. */
static void dora_fwd(struct swift_model *m, const struct layer_ctx *cx, int l, int k, float *out,
                     const float *x, float beta)
{
    const struct swift_ops *ops = m->ops;
    struct swift_linear *L = &m->layers[l].lin[k];
    struct swift_lora_ad *ad = L->lora;
    int N = cx->N;
    float *xa = cx->xa ? cx->xa : ad->xa;
    float *zn = cx->xa ? dora_z(m, (size_t)N * L->out) : ad->zn;
    dora_norm(m, L, ad);
    if (cx->drop) {
        ops->matmul_fwd(out, x, L->w, L->b, N, L->in, L->out, 1.0f, beta);
        ops->dropout_fwd(
            ad->xd, ad->mask, x, (size_t)N * L->in, m->lora_dropout, lin_seed(m, l, k));
        ops->matmul_fwd(zn, ad->xd, L->w, NULL, N, L->in, L->out, 1.0f, 0.0f);
        ops->mul_cols(out, zn, m->dora->mones, NULL, (size_t)N, L->out, 1.0f);
        ops->matmul_fwd(xa, ad->xd, ad->A, NULL, N, L->in, m->lora_rank, 1.0f, 0.0f);
        ops->matmul_fwd(zn, xa, ad->B, NULL, N, m->lora_rank, L->out, m->lora_scale, 1.0f);
        ops->mul_cols(out, zn, ad->g, NULL, (size_t)N, L->out, 1.0f);
        ops->mul_cols(zn, zn, ad->inv, NULL, (size_t)N, L->out, 0.0f);
        return;
    }
    ops->matmul_fwd(zn, x, L->w, NULL, N, L->in, L->out, 1.0f, 0.0f);
    ops->matmul_fwd(xa, x, ad->A, NULL, N, L->in, m->lora_rank, 1.0f, 0.0f);
    ops->matmul_fwd(zn, xa, ad->B, NULL, N, m->lora_rank, L->out, m->lora_scale, 1.0f);
    ops->mul_cols(zn, zn, ad->inv, NULL, (size_t)N, L->out, 0.0f);
    ops->mul_cols(out, zn, ad->mag, L->b, (size_t)N, L->out, beta);
}

/* out (N,out) = x (N,in) @ W^T (+b) + scale * dropout(x) A^T B^T (+ beta * out) */
static void lin_fwd(struct swift_model *m, const struct layer_ctx *cx, int l, int k, float *out,
                    const float *x, float beta)
{
    const struct swift_ops *ops = m->ops;
    struct swift_linear *L = &m->layers[l].lin[k];
    int N = cx->N;
    OP_BEGIN();
    struct swift_lora_ad *ad = m->lora_off ? NULL : L->lora;
    if (ad && ad->mag) /* DoRA (not on a 4-bit base: refused at load) */
        dora_fwd(m, cx, l, k, out, x, beta);
    else if (L->q4) /* QLoRA: the 4-bit base, dequantized tile by tile inside the op */
        ops->matmul4_fwd(out, x, L->q4, L->b, N, L->in, L->out, beta);
    else if (L->q8) /* --quant-bits 8: the int8 base, dequantized tile by tile inside the op */
        ops->matmul8_fwd(out, x, L->q8, L->b, N, L->in, L->out, beta);
    else
        ops->matmul_fwd(out, x, L->w, L->b, N, L->in, L->out, 1.0f, beta);
    if (ad && !ad->mag) {
        const float *xin = x;
        float *xa = cx->xa ? cx->xa : ad->xa;
        if (cx->drop) {
            ops->dropout_fwd(
                ad->xd, ad->mask, x, (size_t)N * L->in, m->lora_dropout, lin_seed(m, l, k));
            xin = ad->xd;
        }
        ops->matmul_fwd(xa, xin, ad->A, NULL, N, L->in, m->lora_rank, 1.0f, 0.0f);
        ops->matmul_fwd(out, xa, ad->B, NULL, N, m->lora_rank, L->out, m->lora_scale, 1.0f);
    }
    if (op_t0) {
        char sh[96];
        snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]^T", N, L->in, L->out, L->in);
        OP_END(swift_lin_names[k], swift_matmul_flops(N, L->in, L->out), sh);
    }
}

/* la->att = GQA causal attention of la->q over the keys and values of the context */
static void attend(struct swift_model *m, int l, const struct layer_ctx *cx, struct layer_acts *la)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int N = cx->N, NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    struct swift_kv *kv = cx->kv;
    struct swift_pkv *pk = cx->pkv;
    if (pk) { /* the same with the pool's slots and block tables */
        size_t KD = (size_t)NKV * D, off = (size_t)l * pk->num_blocks * pk->block_size * KD;
        float *kc = pk->k + off, *vc = pk->v + off;
        ops->copy_rows(kc, kv->slot, la->k, NULL, N, (int)KD);
        ops->copy_rows(vc, kv->slot, la->v, NULL, N, (int)KD);
        ops->attention_paged(la->att,
                             la->q,
                             kc,
                             vc,
                             cx->pos,
                             pk->toff,
                             pk->tables,
                             pk->ntables,
                             pk->block_size,
                             N,
                             NH,
                             NKV,
                             D);
        return;
    }
    if (kv) { /* the new tokens' keys and values into their rows, then attention over them */
        size_t KD = (size_t)NKV * D, off = (size_t)l * kv->rows * kv->cap * KD;
        float *kc = kv->k + off, *vc = kv->v + off;
        ops->copy_rows(kc, kv->slot, la->k, NULL, N, (int)KD);
        ops->copy_rows(vc, kv->slot, la->v, NULL, N, (int)KD);
        ops->attention_cached(
            la->att, la->q, kc, vc, cx->pos, kv->rowi, (size_t)kv->cap * KD, N, NH, NKV, D);
        return;
    }
    int B = cx->B, T = cx->T;
    OP_BEGIN();
    ops->attention_fwd(la->att, la->probs, la->q, la->k, la->v, cx->pos, B, T, NH, NKV, D);
    char sh[96];
    snprintf(sh, sizeof(sh), "B=%d T=%d NH=%d NKV=%d D=%d", B, T, NH, NKV, D);
    OP_END("attention", 2.0 * B * NH * (double)T * T * D, sh);
}

/* One decoder layer: x (N,H) -> y (N,H) through la (la->mid and y may alias x). */
static void layer_fwd(struct swift_model *m, int l, const struct layer_ctx *cx, const float *x,
                      float *y, struct layer_acts *la)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    struct swift_layer *Ly = &m->layers[l];
    int N = cx->N, H = c->hidden_size, I = c->intermediate_size;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    int64_t lt0 = swift_trace_detail() ? swift_trace_now() : 0;
    ops->rmsnorm_fwd(la->ln1, la->rstd1, x, Ly->ln1, N, H, c->rms_norm_eps);
    lin_fwd(m, cx, l, SWIFT_LIN_Q, c->qk_norm ? la->qraw : la->q, la->ln1, 0.0f);
    lin_fwd(m, cx, l, SWIFT_LIN_K, c->qk_norm ? la->kraw : la->k, la->ln1, 0.0f);
    lin_fwd(m, cx, l, SWIFT_LIN_V, la->v, la->ln1, 0.0f);
    if (c->qk_norm) {
        ops->rmsnorm_fwd(la->q, la->qrstd, la->qraw, Ly->qn, N * NH, D, c->rms_norm_eps);
        ops->rmsnorm_fwd(la->k, la->krstd, la->kraw, Ly->kn, N * NKV, D, c->rms_norm_eps);
    }
    if (m->mrope_pos && !cx->kv) { /* M-RoPE: t, h, w each over its section */
        size_t h2 = (size_t)D / 2;
        for (int s = 0; s < 3; s++) {
            ops->rope_fwd(la->q, m->mrope_pos + (size_t)s * N, m->mrope_freq + s * h2, N, NH, D);
            ops->rope_fwd(la->k, m->mrope_pos + (size_t)s * N, m->mrope_freq + s * h2, N, NKV, D);
        }
    } else if (cx->pos3) { /* the same over a cache: the positions are not the cache's */
        size_t h2 = (size_t)D / 2;
        for (int s = 0; s < 3; s++) {
            ops->rope_fwd(la->q, cx->pos3 + (size_t)s * N, m->mrope_freq + s * h2, N, NH, D);
            ops->rope_fwd(la->k, cx->pos3 + (size_t)s * N, m->mrope_freq + s * h2, N, NKV, D);
        }
    } else {
        ops->rope_fwd(la->q, cx->pos, m->inv_freq, N, NH, D);
        ops->rope_fwd(la->k, cx->pos, m->inv_freq, N, NKV, D);
    }
    attend(m, l, cx, la);
    if (la->mid != x)
        ops->copy(la->mid, x, (size_t)N * H);
    lin_fwd(m, cx, l, SWIFT_LIN_O, la->mid, la->att, 1.0f); /* residual */
    ops->rmsnorm_fwd(la->ln2, la->rstd2, la->mid, Ly->ln2, N, H, c->rms_norm_eps);
    lin_fwd(m, cx, l, SWIFT_LIN_GATE, la->gate, la->ln2, 0.0f);
    lin_fwd(m, cx, l, SWIFT_LIN_UP, la->up, la->ln2, 0.0f);
    ops->swiglu_fwd(la->act, la->gate, la->up, (size_t)N * I);
    if (y != la->mid)
        ops->copy(y, la->mid, (size_t)N * H);
    lin_fwd(m, cx, l, SWIFT_LIN_DOWN, y, la->act, 1.0f); /* residual */
    if (lt0) {
        char nm[32];
        snprintf(nm, sizeof(nm), "layer.%d.forward", l);
        struct swift_targ la_[1] = {SWIFT_TARG_I("layer", l)};
        swift_trace_span("compute", nm, lt0, swift_trace_now(), la_, 1);
    }
}

void swift_model_layer_train(struct swift_model *m, int l, const struct swift_batch *b,
                             struct layer_acts *la)
{
    size_t NH = (size_t)b->B * b->T * m->cfg.hidden_size;
    struct layer_ctx cx = {.N = b->B * b->T,
                           .pos = b->pos,
                           .B = b->B,
                           .T = b->T,
                           .drop = m->lora_dropout > 0 && m->training};
    float *res = m->acts->res + (size_t)l * NH;
    layer_fwd(m, l, &cx, res, res + NH, la);
}

int swift_model_forward_logits(struct swift_model *m, const struct swift_batch *b, int train)
{
    if (swift_model_forward_hidden(m, b, train) < 0)
        return -1;
    const struct swift_model_config *c = &m->cfg;
    int N = b->B * b->T, H = c->hidden_size, V = c->vocab_size;
    struct swift_model_acts *a = m->acts;
    OP_BEGIN();
    m->ops->matmul_fwd(a->logits, a->lnf, m->lm_head, NULL, N, H, V, 1.0f, 0.0f);
    char sh[96];
    snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]^T", N, H, V, H);
    OP_END("lm_head", swift_matmul_flops(N, H, V), sh);
    return 0;
}

int swift_model_forward_hidden(struct swift_model *m, const struct swift_batch *b, int train)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int B = b->B, T = b->T, N = B * T, H = c->hidden_size, V = c->vocab_size;
    if (swift_model_reserve(m, B, T) < 0)
        return -1;
    for (int n = 0; n < N; n++) {
        if (b->tokens[n] < 0 || b->tokens[n] >= V)
            return swift_error(
                "token id %d at position %d is outside the vocabulary (%d)", b->tokens[n], n, V);
        if (b->targets[n] >= V)
            return swift_error("target id %d is outside the vocabulary (%d)", b->targets[n], V);
        if (b->pos[n] < 0 || b->pos[n] > n % T)
            return swift_error("position %d of token %d runs before its row", b->pos[n], n);
    }
    struct swift_model_acts *a = m->acts;
    m->training = train; /* dropout only when a backward pass follows */
    ops->embed_fwd(a->res, b->tokens, m->embed, N, H);
    for (int l = 0; l < c->num_layers; l++)
        swift_model_layer_train(m, l, b, &a->la[m->act_ckpt ? 0 : l]);
    float *last = a->res + (size_t)c->num_layers * N * H;
    ops->rmsnorm_fwd(a->lnf, a->rstdf, last, m->norm, N, H, c->rms_norm_eps);
    return 0;
}

int swift_model_forward(struct swift_model *m, const struct swift_batch *b, struct swift_loss *loss,
                        float dscale)
{
    if (swift_model_forward_logits(m, b, dscale != 0.0f) < 0)
        return -1;
    int N = b->B * b->T, V = m->cfg.vocab_size;
    float *lg = m->acts->logits;
    OP_BEGIN();
    m->ops->cross_entropy(dscale != 0.0f ? lg : NULL,
                          &loss->sum,
                          &loss->count,
                          &loss->correct,
                          lg,
                          b->targets,
                          N,
                          V,
                          dscale);
    char ce[48] = "";
    if (op_t0)
        snprintf(ce, sizeof(ce), "[%d,%d]", N, V);
    OP_END("cross_entropy", 3.0 * N * V, ce);
    return 0;
}

void swift_model_token_nll(struct swift_model *m, const int32_t *targets, int n0, int n1,
                           struct swift_loss *loss, int grad)
{
    int V = m->cfg.vocab_size;
    if (n1 <= n0)
        return;
    float *lg = m->acts->logits + (size_t)n0 * V;
    OP_BEGIN();
    m->ops->cross_entropy(grad ? lg : NULL,
                          &loss->sum,
                          &loss->count,
                          &loss->correct,
                          lg,
                          targets + n0,
                          n1 - n0,
                          V,
                          1.0f);
    char ce[48] = "";
    if (op_t0)
        snprintf(ce, sizeof(ce), "[%d,%d]", n1 - n0, V);
    OP_END("cross_entropy", 3.0 * (n1 - n0) * V, ce);
}

void swift_model_scale_dlogits(struct swift_model *m, int n0, int n1, float f)
{
    size_t V = (size_t)m->cfg.vocab_size;
    if (n1 > n0 && f != 1.0f)
        m->ops->scale(m->acts->logits + (size_t)n0 * V, f, (size_t)(n1 - n0) * V);
}

int swift_model_row_logps(struct swift_model *m, const struct swift_batch *b, double *logp,
                          long *count)
{
    if (swift_model_forward_logits(m, b, 0) < 0)
        return -1;
    for (int r = 0; r < b->B; r++) {
        struct swift_loss l = {0};
        swift_model_token_nll(m, b->targets, r * b->T, (r + 1) * b->T, &l, 0);
        logp[r] = -l.sum;
        if (count)
            count[r] = l.count;
    }
    return 0;
}

int swift_model_logit_sums(struct swift_model *m, int N, float *out)
{
    const struct swift_ops *ops = m->ops;
    int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    float *dones = swift_model_acts_lsum(m);
    if (!dones)
        return -1;
    float *colsum = dones + V, *sums = dones + V + H;
    /* colsum (1,H) = ones (1,V) @ lm_head (V,H); the sums (N,1) = lnf (N,H) @ colsum^T */
    ops->matmul_bwd(colsum, NULL, NULL, dones, NULL, m->lm_head, 1, H, V, 1.0f, 0.0f);
    ops->matmul_fwd(sums, m->acts->lnf, colsum, NULL, N, H, 1, 1.0f, 0.0f);
    ops->download(out, sums, (size_t)N * sizeof(float));
    return 0;
}

void swift_model_layer_forward(struct swift_model *m, int l, const struct swift_batch *b,
                               const float *x, float *y, const float *in[SWIFT_LIN_COUNT])
{
    size_t NH = (size_t)b->B * b->T * m->cfg.hidden_size;
    struct swift_model_acts *a = m->acts;
    struct layer_acts *la = &a->la[m->act_ckpt ? 0 : l];
    float *res = a->res + (size_t)l * NH;
    m->training = 0;
    m->ops->copy(res, x, NH);
    swift_model_layer_train(m, l, b, la);
    if (y)
        m->ops->copy(y, res + NH, NH);
    in[SWIFT_LIN_Q] = in[SWIFT_LIN_K] = in[SWIFT_LIN_V] = la->ln1;
    in[SWIFT_LIN_O] = la->att;
    in[SWIFT_LIN_GATE] = in[SWIFT_LIN_UP] = la->ln2;
    in[SWIFT_LIN_DOWN] = la->act;
}

int swift_model_embed(struct swift_model *m, const struct swift_batch *b, float *x)
{
    int N = b->B * b->T, V = m->cfg.vocab_size;
    for (int n = 0; n < N; n++)
        if (b->tokens[n] < 0 || b->tokens[n] >= V)
            return swift_error(
                "token id %d at position %d is outside the vocabulary (%d)", b->tokens[n], n, V);
    m->ops->embed_fwd(x, b->tokens, m->embed, N, m->cfg.hidden_size);
    return 0;
}

/* Check want[] against N tokens and grow kv's logits buffer to nwant rows. */
static int kv_want(struct swift_kv *kv, int N, const int *want, int nwant)
{
    const struct swift_ops *ops = kv->m->ops;
    int V = kv->m->cfg.vocab_size;
    for (int w = 0; w < nwant; w++)
        if (want[w] < 0 || want[w] >= N)
            return swift_error("logits wanted for token %d of %d", want[w], N);
    if (nwant > kv->logits_rows) { /* grows to the largest nwant asked for */
        float *lg =
            swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, (size_t)nwant * V * sizeof(float));
        if (!lg)
            return swift_error("out of memory for %d x %d logits on %s", nwant, V, ops->name);
        if (kv->logits)
            swift_mem_free(ops->free, kv->logits);
        kv->logits = lg;
        kv->logits_rows = nwant;
    }
    return 0;
}

/* Give token i its row's next position and cache slot; grow the logits buffer to nwant rows.
 * Checks everything first: on error (reported) nothing has changed. */
static int kv_place(struct swift_kv *kv, const int32_t *tokens, const int *rowof, int N,
                    const int *want, int nwant)
{
    int V = kv->m->cfg.vocab_size;
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
    int rc = 0;
    for (int i = 0; i < N && rc == 0; i++)
        if (kv->pos[i] >= kv->cap)
            rc = swift_error("sequence longer than the cache (%d tokens)", kv->cap);
    if (rc == 0)
        rc = kv_want(kv, N, want, nwant);
    if (rc < 0)
        for (int j = 0; j < N; j++)
            kv->len[rowof[j]]--;
    return rc;
}

/* The cached forward of N placed tokens (kv->pos, kv->slot set) through cx: the layers, then
 * the final norm and lm_head on the wanted tokens; flops added to *flops. */
static void cached_run(struct swift_model *m, struct swift_kv *kv, const struct layer_ctx *cx,
                       const int32_t *tokens, const int *want, int nwant, float *logits,
                       double *flops, const struct swift_pkv_mm *mm)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int N = cx->N, H = c->hidden_size, V = c->vocab_size;
    /* the layer's buffers in the cache's scratch: what nothing reads again is shared */
    struct layer_acts la = {.ln1 = kv->h,
                            .rstd1 = kv->rstd,
                            .qraw = kv->att,
                            .qrstd = kv->rstd,
                            .kraw = kv->kraw,
                            .krstd = kv->rstd,
                            .q = kv->q,
                            .k = kv->kk,
                            .v = kv->vv,
                            .att = kv->att,
                            .mid = kv->x,
                            .ln2 = kv->h,
                            .rstd2 = kv->rstd,
                            .gate = kv->gate,
                            .up = kv->up,
                            .act = kv->gate};
    double lin = 0, att = 0;
    for (int k = 0; k < SWIFT_LIN_COUNT; k++)
        lin += 2.0 * N * m->layers[0].lin[k].in * m->layers[0].lin[k].out;
    for (int i = 0; i < N; i++)
        att += 4.0 * c->num_heads * c->head_dim * (kv->pos[i] + 1);
    *flops += (lin + att) * c->num_layers;

    ops->embed_fwd(kv->x, tokens, m->embed, N, H);
    if (mm && mm->nemb > 0) { /* given embeddings over their tokens' (kv->h is free here) */
        ops->upload(kv->h, mm->embeds, (size_t)mm->nemb * H * sizeof(float));
        ops->copy_rows(kv->x, mm->embed_at, kv->h, NULL, mm->nemb, H);
    }
    for (int l = 0; l < c->num_layers; l++)
        layer_fwd(m, l, cx, kv->x, kv->x, &la);
    if (nwant == 0)
        return;
    /* the final norm and lm_head on the wanted tokens only */
    for (int w = 0; w < nwant; w++)
        kv->wanti[w] = want[w];
    ops->copy_rows(kv->sel, NULL, kv->x, kv->wanti, nwant, H);
    ops->rmsnorm_fwd(kv->h, kv->rstd, kv->sel, m->norm, nwant, H, c->rms_norm_eps);
    ops->matmul_fwd(kv->logits, kv->h, m->lm_head, NULL, nwant, H, V, 1.0f, 0.0f);
    *flops += 2.0 * nwant * H * V;
    ops->download(logits, kv->logits, (size_t)nwant * V * sizeof(float));
}

int swift_kv_forward(struct swift_kv *kv, const int32_t *tokens, const int *rowof, int N,
                     const int *want, int nwant, float *logits)
{
    if (N < 0 || N > kv->max_tokens)
        return swift_error("%d tokens in one call, more than %d", N, kv->max_tokens);
    if (N == 0)
        return 0;
    if (kv_place(kv, tokens, rowof, N, want, nwant) < 0)
        return -1;
    struct layer_ctx cx = {.N = N, .pos = kv->pos, .kv = kv, .xa = kv->xa};
    cached_run(kv->m, kv, &cx, tokens, want, nwant, logits, &kv->flops, NULL);
    return 0;
}

/* Checks, then token i's position, pool slot and block table (the tables of the call's
 * sequences one after the other in c->tables). On error (reported) nothing has changed. */
static int pkv_place(struct swift_pkv *c, struct swift_pkv_seq *const *seqs, int nseqs,
                     const int32_t *tokens, const int *seqof, int N)
{
    struct swift_kv *kv = &c->s;
    int V = c->m->cfg.vocab_size, bs = c->block_size;
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return swift_error("token id %d is outside the vocabulary (%d)", tokens[i], V);
        if (seqof[i] < 0 || seqof[i] >= nseqs)
            return swift_error("sequence %d out of range (%d sequences)", seqof[i], nseqs);
    }
    int rc = 0;
    for (int i = 0; i < N; i++) {
        struct swift_pkv_seq *s = seqs[seqof[i]];
        kv->pos[i] = s->len++;
        if (kv->pos[i] >= s->nblocks * bs && rc == 0)
            rc = swift_error("sequence %d has no room for position %d", seqof[i], kv->pos[i]);
    }
    if (rc < 0) {
        for (int i = 0; i < N; i++)
            seqs[seqof[i]]->len--;
        return rc;
    }
    int total = 0;
    for (int q = 0; q < nseqs; q++)
        total += seqs[q]->nblocks;
    if (total > c->tables_cap || !c->tables) {
        free(c->tables);
        c->tables_cap = total > 1 ? total : 1;
        c->tables = swift_xcalloc((size_t)c->tables_cap, sizeof(int32_t));
    }
    /* a sequence's table is placed once, at its first token (tokens of unused sequences are
     * not copied); the rest of the array keeps whatever it held */
    int at = 0;
    for (int i = 0; i < N; i++) {
        const struct swift_pkv_seq *s = seqs[seqof[i]];
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = seqof[j] != seqof[i];
        if (first) {
            memcpy(c->tables + at, s->blocks, (size_t)s->nblocks * sizeof(int32_t));
            c->toff[i] = at;
            at += s->nblocks;
        } else {
            for (int j = 0; j < i; j++)
                if (seqof[j] == seqof[i]) {
                    c->toff[i] = c->toff[j];
                    break;
                }
        }
        kv->slot[i] = s->blocks[kv->pos[i] / bs] * bs + kv->pos[i] % bs;
    }
    c->ntables = at;
    return 0;
}

int swift_pkv_forward(struct swift_pkv *c, struct swift_pkv_seq *const *seqs, int nseqs,
                      const int32_t *tokens, const int *seqof, int N, const int *want, int nwant,
                      float *logits)
{
    return swift_pkv_forward_mm(c, seqs, nseqs, tokens, seqof, N, want, nwant, logits, NULL);
}

int swift_pkv_forward_mm(struct swift_pkv *c, struct swift_pkv_seq *const *seqs, int nseqs,
                         const int32_t *tokens, const int *seqof, int N, const int *want, int nwant,
                         float *logits, const struct swift_pkv_mm *mm)
{
    struct swift_kv *kv = &c->s;
    if (N < 0 || N > c->max_tokens)
        return swift_error("%d tokens in one call, more than %d", N, c->max_tokens);
    if (N == 0)
        return 0;
    if (mm) {
        if (mm->pos3 && !c->m->mrope_freq)
            return swift_error("M-RoPE positions for a model without M-RoPE");
        if (mm->nemb < 0 || mm->nemb > N || (mm->nemb > 0 && (!mm->embeds || !mm->embed_at)))
            return swift_error("%d input embeddings for %d tokens", mm->nemb, N);
        for (int i = 0; i < mm->nemb; i++)
            if (mm->embed_at[i] < 0 || mm->embed_at[i] >= N)
                return swift_error("input embedding for token %d of %d", mm->embed_at[i], N);
    }
    if (kv_want(kv, N, want, nwant) < 0 || pkv_place(c, seqs, nseqs, tokens, seqof, N) < 0)
        return -1;
    struct layer_ctx cx = {
        .N = N, .pos = kv->pos, .kv = kv, .pkv = c, .xa = kv->xa, .pos3 = mm ? mm->pos3 : NULL};
    cached_run(c->m, kv, &cx, tokens, want, nwant, logits, &c->flops, mm);
    return 0;
}
