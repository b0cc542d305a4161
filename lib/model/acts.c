/* model activations — the training forward's buffers, grown by swift_model_reserve (see
 * model.h). */
#include "lib/model/model.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/model/internal.h"

#include <stdlib.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static float *act_alloc(struct swift_model *m, size_t n)
{
    struct swift_model_acts *a = m->acts;
    if (a->nblocks == a->capblocks) {
        int nc = a->capblocks ? a->capblocks * 2 : 64;
        a->blocks = swift_xrealloc(a->blocks, (size_t)nc * sizeof(*a->blocks));
        a->capblocks = nc;
    }
    float *p = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, (n ? n : 1) * sizeof(float));
    if (p)
        a->blocks[a->nblocks++] = p;
    return p;
}

void swift_model_acts_free(struct swift_model *m)
{
    struct swift_model_acts *a = m->acts;
    if (!a)
        return;
    for (int i = 0; i < a->nblocks; i++)
        swift_mem_free(m->ops->free, a->blocks[i]);
    free(a->blocks);
    free(a->la);
    free(a);
    m->acts = NULL;
    m->capB = m->capT = 0;
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_lora_ad *ad = m->layers[l].lin[k].lora;
            if (ad) {
                ad->xa = ad->xd = ad->zn = NULL;
                ad->mask = NULL;
            }
        }
}

float *swift_model_acts_lsum(struct swift_model *m)
{
    struct swift_model_acts *a = m->acts;
    if (a->lsum)
        return a->lsum;
    size_t V = (size_t)m->cfg.vocab_size, H = (size_t)m->cfg.hidden_size;
    float *p = act_alloc(m, V + H + (size_t)m->capB * m->capT);
    if (!p) {
        swift_error("out of memory for the logits' sums of %d tokens", m->capB * m->capT);
        return NULL;
    }
    float *ones = swift_xmalloc(V * sizeof(float));
    for (size_t v = 0; v < V; v++)
        ones[v] = 1.0f;
    m->ops->upload(p, ones, V * sizeof(float));
    free(ones);
    return a->lsum = p;
}

int swift_model_reserve(struct swift_model *m, int B, int T)
{
    if (m->acts && B <= m->capB && T == m->capT)
        return 0;
    swift_model_acts_free(m);
    const struct swift_model_config *c = &m->cfg;
    size_t N = (size_t)B * T, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t QD = (size_t)c->num_heads * c->head_dim, KD = (size_t)c->num_kv_heads * c->head_dim;
    size_t V = (size_t)c->vocab_size, L = (size_t)c->num_layers;
    m->acts = swift_xcalloc(1, sizeof(*m->acts));
    struct swift_model_acts *a = m->acts;
    a->la = swift_xcalloc(L, sizeof(*a->la));
#define A(ptr, n)                                                                                  \
    do {                                                                                           \
        if (!((ptr) = act_alloc(m, (n))))                                                          \
            goto oom;                                                                              \
    } while (0)
    A(a->res, (L + 1) * N * H);
    /* with activation checkpointing one set of layer activations is reused by every layer:
     * backward recomputes a layer's forward from its saved input res[l] */
    size_t nla = m->act_ckpt ? 1 : L;
    for (size_t l = 0; l < L; l++) {
        struct layer_acts *la = &a->la[l];
        if (l >= nla)
            goto lora_bufs;
        A(la->ln1, N * H);
        A(la->rstd1, N);
        if (c->qk_norm) {
            A(la->qraw, N * QD);
            A(la->qrstd, N * c->num_heads);
            A(la->kraw, N * KD);
            A(la->krstd, N * c->num_kv_heads);
        }
        A(la->q, N * QD);
        A(la->k, N * KD);
        A(la->v, N * KD);
        A(la->probs, (size_t)B * c->num_heads * T * T);
        A(la->att, N * QD);
        A(la->mid, N * H);
        A(la->ln2, N * H);
        A(la->rstd2, N);
        A(la->gate, N * I);
        A(la->up, N * I);
        A(la->act, N * I);
    lora_bufs:
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *lin = &m->layers[l].lin[k];
            if (!lin->lora)
                continue;
            A(lin->lora->xa, N * m->lora_rank);
            if (lin->lora->mag)
                A(lin->lora->zn, N * lin->out);
            if (m->lora_dropout > 0) {
                A(lin->lora->xd, N * lin->in);
                float *mk;
                A(mk, (N * lin->in + 3) / 4);
                lin->lora->mask = (uint8_t *)mk;
            }
        }
    }
    size_t maxin = I > QD ? I : QD;
    if (H > maxin)
        maxin = H;
    A(a->lnf, N * H);
    A(a->rstdf, N);
    A(a->logits, N * V);
    A(a->dres, N * H);
    A(a->dln, N * H);
    A(a->datt, N * QD);
    A(a->dq, N * QD);
    A(a->dk, N * KD);
    A(a->dv, N * KD);
    A(a->dqraw, N * QD);
    A(a->dkraw, N * KD);
    A(a->dgate, N * I);
    A(a->dup, N * I);
    A(a->dact, N * I);
    A(a->dxa, N * (m->lora_rank > 0 ? (size_t)m->lora_rank : 1));
    A(a->dtmp, N * maxin);
    if (m->dora)
        A(a->ddora, N * maxin);
#undef A
    m->capB = B;
    m->capT = T;
    return 0;
oom: /* backend memory is reported, not exited */
    swift_model_acts_free(m);
    return swift_error("out of memory for activations of %d x %d tokens", B, T);
}

void swift_model_zero_grad(struct swift_model *m)
{
    if (m->grads)
        m->ops->zero(m->grads, m->nparams);
    if (m->lora_grads)
        m->ops->zero(m->lora_grads, m->nlora);
}

const float *swift_model_logits(const struct swift_model *m)
{
    return m->acts ? m->acts->logits : NULL;
}
