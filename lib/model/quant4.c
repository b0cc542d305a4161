/* model quant4 — QLoRA's 4-bit and 8-bit bases (see swift_model_quantize4/8 in model.h): the
 * base linears quantized to bitsandbytes' formats (kernels/quant4.h, kernels/quant8.h) at load,
 * their float32 copies dropped. */
#include "lib/model/model.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/model/internal.h"
#include "kernels/quant4.h"
#include "kernels/quant8.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static void q4_release(const struct swift_ops *ops, struct swift_q4 *q)
{
    if (!q)
        return;
    void *arr[4] = {q->codes, q->absmax, q->qabsmax, q->absmax2};
    for (int i = 0; i < 4; i++)
        if (arr[i])
            swift_mem_free(ops->free, arr[i]);
    free(q);
}

static void q8_release(const struct swift_ops *ops, struct swift_q8 *q)
{
    if (!q)
        return;
    if (q->cb)
        swift_mem_free(ops->free, q->cb);
    if (q->scb)
        swift_mem_free(ops->free, q->scb);
    free(q);
}

void swift_model_q4_free(struct swift_model *m)
{
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            q4_release(m->ops, m->layers[l].lin[k].q4);
            m->layers[l].lin[k].q4 = NULL;
            q8_release(m->ops, m->layers[l].lin[k].q8);
            m->layers[l].lin[k].q8 = NULL;
        }
}

struct swift_q4 *swift_model_q4_upload(struct swift_model *m, const struct swift_q4 *h,
                                       const char *name)
{
    const struct swift_ops *ops = m->ops;
    size_t n = h->n, nb = swift_q4_nblocks(n), nb2 = swift_q4_nblocks2(n);
    int dq = h->dq;
    struct swift_q4 *q = swift_xcalloc(1, sizeof(*q));
    *q = *h;
    q->codes = swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, (n + 1) / 2);
    q->absmax = dq ? NULL : swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, nb * sizeof(float));
    q->qabsmax = dq ? swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, nb) : NULL;
    q->absmax2 = dq ? swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, nb2 * sizeof(float)) : NULL;
    if (!q->codes || !(dq ? q->qabsmax && q->absmax2 : q->absmax != NULL)) {
        swift_error("%s: out of memory for its 4-bit copy", name);
        q4_release(ops, q);
        return NULL;
    }
    ops->upload(q->codes, h->codes, (n + 1) / 2);
    if (dq) {
        ops->upload(q->qabsmax, h->qabsmax, nb);
        ops->upload(q->absmax2, h->absmax2, nb2 * sizeof(float));
    } else {
        ops->upload(q->absmax, h->absmax, nb * sizeof(float));
    }
    return q;
}

/* One linear's weight (backend memory) into a new 4-bit struct whose arrays are backend memory;
 * host holds out*in floats of scratch. NULL: out of memory (reported). */
static struct swift_q4 *quantize_linear(struct swift_model *m, const struct swift_linear *L,
                                        int type, int dq, float *host)
{
    size_t n = (size_t)L->out * L->in, nb = swift_q4_nblocks(n), nb2 = swift_q4_nblocks2(n);
    struct swift_q4 h = {.type = type, .dq = dq, .n = n};
    h.codes = swift_xcalloc((n + 1) / 2, 1);
    h.absmax = dq ? NULL : swift_xcalloc(nb, sizeof(float));
    h.qabsmax = dq ? swift_xcalloc(nb, 1) : NULL;
    h.absmax2 = dq ? swift_xcalloc(nb2, sizeof(float)) : NULL;
    m->ops->download(host, L->w, n * sizeof(float));
    struct swift_q4 *q = NULL;
    if (swift_q4_quantize(&h, host) == 0)
        q = swift_model_q4_upload(m, &h, L->name);
    else
        swift_error("%s: out of memory for its 4-bit copy", L->name);
    free(h.codes);
    free(h.absmax);
    free(h.qabsmax);
    free(h.absmax2);
    return q;
}

/* Where a pointer into the old parameter buffer lands in the new one (NULL stays NULL). */
static float *moved(const struct swift_model *m, const size_t *newoff, float *fresh, float *p)
{
    if (!p)
        return NULL;
    for (int i = 0; i < m->np; i++)
        if (p >= m->p[i].w && p < m->p[i].w + m->p[i].numel)
            return newoff[i] == (size_t)-1 ? NULL : fresh + newoff[i] + (size_t)(p - m->p[i].w);
    return p;
}

/* The base parameters without the quantized linears' weights: a smaller buffer, every pointer
 * into the old one moved. */
static int repack(struct swift_model *m)
{
    const struct swift_ops *ops = m->ops;
    size_t *newoff = swift_xcalloc((size_t)m->np, sizeof(size_t)), total = 0;
    for (int i = 0; i < m->np; i++) {
        newoff[i] = (size_t)-1;
        int dropped = 0;
        for (int l = 0; l < m->cfg.num_layers && !dropped; l++)
            for (int k = 0; k < SWIFT_LIN_COUNT; k++)
                dropped |= (m->layers[l].lin[k].q4 || m->layers[l].lin[k].q8) &&
                           m->layers[l].lin[k].w == m->p[i].w;
        if (!dropped) {
            newoff[i] = total;
            total += m->p[i].numel;
        }
    }
    float *fresh =
        swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, (total ? total : 1) * sizeof(float));
    if (!fresh) {
        free(newoff);
        return swift_error("out of memory: %zu parameters", total);
    }
    for (int i = 0; i < m->np; i++)
        if (newoff[i] != (size_t)-1)
            ops->copy(fresh + newoff[i], m->p[i].w, m->p[i].numel);
#define MOVE(f) f = moved(m, newoff, fresh, f)
    MOVE(m->embed);
    MOVE(m->norm);
    MOVE(m->lm_head);
    MOVE(m->score);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        struct swift_layer *Ly = &m->layers[l];
        MOVE(Ly->ln1);
        MOVE(Ly->ln2);
        MOVE(Ly->qn);
        MOVE(Ly->kn);
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            MOVE(Ly->lin[k].w);
            MOVE(Ly->lin[k].b);
        }
    }
#undef MOVE
    int np = 0;
    for (int i = 0; i < m->np; i++) {
        if (newoff[i] == (size_t)-1) {
            free(m->p[i].name);
            continue;
        }
        m->p[np] = m->p[i];
        m->p[np++].w = fresh + newoff[i];
    }
    m->np = np;
    swift_mem_free(ops->free, m->params);
    m->params = fresh;
    m->nparams = total;
    free(newoff);
    return 0;
}

/* 0 when m's base linears can be quantized to bits (4 or 8): not already quantized (a
 * bitsandbytes directory, bnb.c), frozen, and the backend has the fused matmul of that width;
 * -1 (reported) when not. */
static int quantizable(const struct swift_model *m, int bits)
{
    const char *a = bits == 8 ? "an" : "a"; /* "an 8-bit base", "a 4-bit base" */
    if (m->cfg.bnb_bits)
        return swift_error("the model is already saved in bitsandbytes' %d-bit layout: it loads "
                           "as stored, without --quant-bits",
                           m->cfg.bnb_bits);
    if (m->grads)
        return swift_error("%s %d-bit base must be frozen (LoRA on top)", a, bits);
    const struct swift_ops *ops = m->ops;
    if (bits == 8 ? !ops->matmul8_fwd || !ops->matmul8_bwd : !ops->matmul4_fwd || !ops->matmul4_bwd)
        return swift_error("%s %d-bit base needs the fused %d-bit matmul, which the %s backend "
                           "does not have (use --device cpu)",
                           a,
                           bits,
                           bits,
                           ops->name);
    return 0;
}

/* Host scratch for the largest base linear's float32 weight; the caller frees it. */
static float *linear_scratch(const struct swift_model *m)
{
    size_t maxn = 1;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            size_t n = (size_t)m->layers[l].lin[k].out * m->layers[l].lin[k].in;
            maxn = n > maxn ? n : maxn;
        }
    return swift_xmalloc(maxn * sizeof(float));
}

int swift_model_q_drop_float(struct swift_model *m)
{
    if (repack(m) < 0)
        return -1;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++)
            if (m->layers[l].lin[k].q4 || m->layers[l].lin[k].q8)
                m->layers[l].lin[k].w = NULL;
    return 0;
}

int swift_model_quantize4(struct swift_model *m, int type, int dq)
{
    if (quantizable(m, 4) < 0)
        return -1;
    float *host = linear_scratch(m);
    m->q4_numel = m->q4_bytes = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            L->q4 = quantize_linear(m, L, type, dq, host);
            if (!L->q4) {
                free(host);
                return -1;
            }
            m->q4_numel += L->q4->n;
            m->q4_bytes += swift_q4_bytes(L->q4->n, dq);
        }
    free(host);
    return swift_model_q_drop_float(m);
}

struct swift_q8 *swift_model_q8_upload(struct swift_model *m, const struct swift_q8 *h,
                                       const char *name)
{
    const struct swift_ops *ops = m->ops;
    size_t n = (size_t)h->rows * h->cols;
    struct swift_q8 *q = swift_xcalloc(1, sizeof(*q));
    *q = *h;
    q->cb = swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, n ? n : 1);
    q->scb = swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, (size_t)h->rows * sizeof(float));
    if (!q->cb || !q->scb) {
        swift_error("%s: out of memory for its 8-bit copy", name);
        q8_release(ops, q);
        return NULL;
    }
    ops->upload(q->cb, h->cb, n);
    ops->upload(q->scb, h->scb, (size_t)h->rows * sizeof(float));
    return q;
}

/* One linear's weight (backend memory) into a new 8-bit struct whose arrays are backend memory;
 * host holds out*in floats of scratch. NULL: out of memory (reported). */
static struct swift_q8 *quantize_linear8(struct swift_model *m, const struct swift_linear *L,
                                         float *host)
{
    size_t n = (size_t)L->out * L->in;
    struct swift_q8 h = {.rows = L->out, .cols = L->in};
    h.cb = swift_xmalloc(n);
    h.scb = swift_xmalloc((size_t)L->out * sizeof(float));
    m->ops->download(host, L->w, n * sizeof(float));
    swift_q8_quantize(&h, host);
    struct swift_q8 *q = swift_model_q8_upload(m, &h, L->name);
    free(h.cb);
    free(h.scb);
    return q;
}

int swift_model_quantize8(struct swift_model *m)
{
    if (quantizable(m, 8) < 0)
        return -1;
    float *host = linear_scratch(m);
    m->q4_numel = m->q4_bytes = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            L->q8 = quantize_linear8(m, L, host);
            if (!L->q8) {
                free(host);
                return -1;
            }
            m->q4_numel += (size_t)L->out * L->in;
            m->q4_bytes += swift_q8_bytes(L->out, L->in);
        }
    free(host);
    return swift_model_q_drop_float(m);
}
