/* model backward — gradients of the training forward (see model.h), layer by layer in reverse;
 * with activation checkpointing each layer's forward is recomputed first. */
#include "lib/model/model.h"
#include "lib/model/internal.h"

#include <stdio.h>

#include "lib/core/trace.h"
#include "lib/core/banned.h"

/* DoRA's backward (forward.c's dora_fwd; the norm is detached, g = mag * inv a constant but
 * for mag): gmag += inv * colsum(dout * z) (zn holds z * inv), dz = g * dout flows into the LoRA
 * factors and, without dropout, into x through W; with dropout x also gets dout W directly and
 * xd gets ((g - 1) * dout) W + the LoRA path. The base stays frozen (L->gw, L->gb unused). */
static void dora_bwd(struct swift_model *m, struct swift_linear *L, float *dx, float dx_beta,
                     const float *dout, const float *x, int N)
{
    const struct swift_ops *ops = m->ops;
    struct swift_lora_ad *ad = L->lora;
    struct swift_model_acts *a = m->acts;
    int r = m->lora_rank, drop = m->lora_dropout > 0 && m->training;
    size_t n = (size_t)N * L->out;
    ops->mul_cols(a->dtmp, dout, ad->zn, NULL, 1, (int)n, 0.0f);
    ops->matmul_bwd(NULL, NULL, ad->gmag, a->dtmp, NULL, NULL, N, 1, L->out, 1.0f, 0.0f);
    float *dz = a->ddora;
    ops->mul_cols(dz, dout, ad->g, NULL, (size_t)N, L->out, 0.0f);
    ops->matmul_bwd(a->dxa, ad->gB, NULL, dz, ad->xa, ad->B, N, r, L->out, m->lora_scale, 0.0f);
    if (!drop) {
        ops->matmul_bwd(dx, NULL, NULL, dz, x, L->w, N, L->in, L->out, 1.0f, dx_beta);
        ops->matmul_bwd(dx, ad->gA, NULL, a->dxa, x, ad->A, N, L->in, r, 1.0f, 1.0f);
        return;
    }
    float *tmp = a->dtmp;
    ops->matmul_bwd(dx, NULL, NULL, dout, x, L->w, N, L->in, L->out, 1.0f, dx_beta);
    ops->matmul_bwd(tmp, NULL, NULL, dz, x, L->w, N, L->in, L->out, 1.0f, 0.0f);
    ops->matmul_bwd(tmp, NULL, NULL, dout, x, L->w, N, L->in, L->out, -1.0f, 1.0f);
    ops->matmul_bwd(tmp, ad->gA, NULL, a->dxa, ad->xd, ad->A, N, L->in, r, 1.0f, 1.0f);
    ops->dropout_bwd(dx, tmp, ad->mask, (size_t)N * L->in, m->lora_dropout);
}

static void lin_bwd(struct swift_model *m, int l, int k, float *dx, float dx_beta,
                    const float *dout, const float *x, int N)
{
    const struct swift_ops *ops = m->ops;
    struct swift_linear *L = &m->layers[l].lin[k];
    OP_BEGIN();
    struct swift_lora_ad *ad = L->lora;
    if (ad && ad->mag)
        dora_bwd(m, L, dx, dx_beta, dout, x, N);
    else if (L->q4) /* QLoRA: a frozen 4-bit base, the input gradient only */
        ops->matmul4_bwd(dx, dout, L->q4, N, L->in, L->out, dx_beta);
    else if (L->q8) /* --quant-bits 8: a frozen int8 base, the input gradient only */
        ops->matmul8_bwd(dx, dout, L->q8, N, L->in, L->out, dx_beta);
    else
        ops->matmul_bwd(dx, L->gw, L->gb, dout, x, L->w, N, L->in, L->out, 1.0f, dx_beta);
    if (ad && !ad->mag) {
        float *dxa = m->acts->dxa;
        int r = m->lora_rank;
        ops->matmul_bwd(dxa, ad->gB, NULL, dout, ad->xa, ad->B, N, r, L->out, m->lora_scale, 0.0f);
        if (m->lora_dropout > 0 && m->training) {
            float *tmp = m->acts->dtmp;
            ops->matmul_bwd(tmp, ad->gA, NULL, dxa, ad->xd, ad->A, N, L->in, r, 1.0f, 0.0f);
            ops->dropout_bwd(dx, tmp, ad->mask, (size_t)N * L->in, m->lora_dropout);
        } else {
            ops->matmul_bwd(dx, ad->gA, NULL, dxa, x, ad->A, N, L->in, r, 1.0f, 1.0f);
        }
    }
    if (op_t0) {
        char sh[96], nm[64];
        snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]", N, L->out, L->out, L->in);
        snprintf(nm, sizeof(nm), "%s.backward", swift_lin_names[k]);
        OP_END(nm, swift_matmul_flops(N, L->in, L->out) * (L->gw ? 2 : 1), sh);
    }
    if (m->grad_ready && L->gw)
        m->grad_ready(m->grad_ready_ctx, l, k);
}

/* lm_head's backward into the final norm's output, then the rest. */
void swift_model_backward(struct swift_model *m, const struct swift_batch *b)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int N = b->B * b->T, H = c->hidden_size, V = c->vocab_size;
    struct swift_model_acts *a = m->acts;
    {
        OP_BEGIN();
        ops->matmul_bwd(
            a->dln, m->glm_head, NULL, a->logits, a->lnf, m->lm_head, N, H, V, 1.0f, 0.0f);
        char sh[96] = "";
        if (op_t0)
            snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]", N, V, V, H);
        OP_END("lm_head.backward", swift_matmul_flops(N, H, V) * (m->glm_head ? 2 : 1), sh);
    }
    swift_model_backward_from_lnf(m, b);
}

void swift_model_backward_from_lnf(struct swift_model *m, const struct swift_batch *b)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int B = b->B, T = b->T, N = B * T, H = c->hidden_size, I = c->intermediate_size;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    struct swift_model_acts *a = m->acts;
    float *last = a->res + (size_t)c->num_layers * N * H;
    ops->zero(a->dres, (size_t)N * H);
    ops->rmsnorm_bwd(a->dres, m->gnorm, a->dln, last, m->norm, a->rstdf, N, H);
    for (int l = c->num_layers - 1; l >= 0; l--) {
        struct swift_layer *Ly = &m->layers[l];
        struct layer_acts *la = &a->la[m->act_ckpt ? 0 : l];
        float *res = a->res + (size_t)l * N * H;
        if (m->act_ckpt) /* recompute this layer's activations (same dropout masks) */
            swift_model_layer_train(m, l, b, la);
        int64_t lt0 = swift_trace_detail() ? swift_trace_now() : 0;
        /* MLP: dres is d(next) = d(mid) + path through down/up/gate */
        lin_bwd(m, l, SWIFT_LIN_DOWN, a->dact, 0.0f, a->dres, la->act, N);
        ops->swiglu_bwd(a->dgate, a->dup, a->dact, la->gate, la->up, (size_t)N * I);
        lin_bwd(m, l, SWIFT_LIN_GATE, a->dln, 0.0f, a->dgate, la->ln2, N);
        lin_bwd(m, l, SWIFT_LIN_UP, a->dln, 1.0f, a->dup, la->ln2, N);
        ops->rmsnorm_bwd(a->dres, Ly->gln2, a->dln, la->mid, Ly->ln2, la->rstd2, N, H);
        /* attention: dres is now d(mid) */
        lin_bwd(m, l, SWIFT_LIN_O, a->datt, 0.0f, a->dres, la->att, N);
        {
            OP_BEGIN();
            ops->attention_bwd(a->dq,
                               a->dk,
                               a->dv,
                               a->datt,
                               la->probs,
                               la->q,
                               la->k,
                               la->v,
                               b->pos,
                               B,
                               T,
                               NH,
                               NKV,
                               D);
            char sh[96] = "";
            if (op_t0)
                snprintf(sh, sizeof(sh), "B=%d T=%d NH=%d NKV=%d D=%d", B, T, NH, NKV, D);
            OP_END("attention.backward", 4.0 * B * NH * (double)T * T * D, sh);
        }
        if (m->mrope_pos) { /* M-RoPE (forward.c): the three rotations undone */
            size_t h2 = (size_t)D / 2;
            for (int s = 2; s >= 0; s--) {
                const int32_t *mp = m->mrope_pos + (size_t)s * N;
                ops->rope_bwd(a->dq, mp, m->mrope_freq + s * h2, N, NH, D);
                ops->rope_bwd(a->dk, mp, m->mrope_freq + s * h2, N, NKV, D);
            }
        } else {
            ops->rope_bwd(a->dq, b->pos, m->inv_freq, N, NH, D);
            ops->rope_bwd(a->dk, b->pos, m->inv_freq, N, NKV, D);
        }
        float *dqp = a->dq, *dkp = a->dk;
        if (c->qk_norm) {
            ops->zero(a->dqraw, (size_t)N * NH * D);
            ops->zero(a->dkraw, (size_t)N * NKV * D);
            ops->rmsnorm_bwd(a->dqraw, Ly->gqn, a->dq, la->qraw, Ly->qn, la->qrstd, N * NH, D);
            ops->rmsnorm_bwd(a->dkraw, Ly->gkn, a->dk, la->kraw, Ly->kn, la->krstd, N * NKV, D);
            dqp = a->dqraw;
            dkp = a->dkraw;
        }
        lin_bwd(m, l, SWIFT_LIN_Q, a->dln, 0.0f, dqp, la->ln1, N);
        lin_bwd(m, l, SWIFT_LIN_K, a->dln, 1.0f, dkp, la->ln1, N);
        lin_bwd(m, l, SWIFT_LIN_V, a->dln, 1.0f, a->dv, la->ln1, N);
        ops->rmsnorm_bwd(a->dres, Ly->gln1, a->dln, res, Ly->ln1, la->rstd1, N, H);
        if (lt0) {
            char nm[32];
            snprintf(nm, sizeof(nm), "layer.%d.backward", l);
            struct swift_targ la_[1] = {SWIFT_TARG_I("layer", l)};
            swift_trace_span("compute", nm, lt0, swift_trace_now(), la_, 1);
        }
    }
    if (m->gembed)
        ops->embed_bwd(m->gembed, a->dres, b->tokens, N, H);
}

double swift_model_flops_per_token(const struct swift_model *m, int T)
{
    const struct swift_model_config *c = &m->cfg;
    double lin = 0;
    for (int k = 0; k < SWIFT_LIN_COUNT; k++)
        lin += (double)m->layers[0].lin[k].in * m->layers[0].lin[k].out;
    lin = lin * c->num_layers + (double)c->vocab_size * c->hidden_size;
    /* forward 2 per weight, backward 2 for the input gradient and 2 for the weight gradient */
    double per = (m->grads ? 6.0 : 4.0) * lin;
    /* causal attention: QK^T and PV, on average T/2 keys, forward + 2x backward */
    per += 6.0 * c->num_layers * (double)c->num_heads * c->head_dim * T;
    return per;
}
