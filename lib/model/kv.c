/* kv — the key/value cache's memory (see kv.h); the cached forward is in forward.c. */
#include "lib/model/kv.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_HEAD_DIM 512 /* the attention_cached op's limit (kernels/ops.h) */

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
    kv->len = swift_xcalloc((size_t)rows, sizeof(int));
    kv->pos = swift_xcalloc(N, sizeof(int32_t));
    kv->rowi = swift_xcalloc(N, sizeof(int32_t));
    kv->slot = swift_xcalloc(N, sizeof(int32_t));
    kv->wanti = swift_xcalloc(N, sizeof(int32_t));
    /* backend memory: the cache and the scratch (ops->alloc zeroes) */
    kv->k = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, cache * sizeof(float));
    kv->v = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, cache * sizeof(float));
    kv->x = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * H * sizeof(float));
    kv->h = swift_mem_alloc(
        ops->alloc, SWIFT_MEM_ACTIVATIONS, N * (wide > I ? wide : I) * sizeof(float));
    kv->rstd = swift_mem_alloc(ops->alloc,
                               SWIFT_MEM_ACTIVATIONS,
                               N * (size_t)(c->num_heads > 1 ? c->num_heads : 1) * sizeof(float));
    kv->q = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * QD * sizeof(float));
    kv->kk = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * KD * sizeof(float));
    /* QK-norm's input of the keys (the queries' goes to att, free until attention) */
    kv->kraw = swift_mem_alloc(
        ops->alloc, SWIFT_MEM_ACTIVATIONS, (c->qk_norm ? N * KD : 1) * sizeof(float));
    kv->vv = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * KD * sizeof(float));
    kv->att = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * wide * sizeof(float));
    kv->gate = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * I * sizeof(float));
    kv->up = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * I * sizeof(float));
    kv->xa = swift_mem_alloc(ops->alloc,
                             SWIFT_MEM_ACTIVATIONS,
                             N * (size_t)(m->lora_rank > 0 ? m->lora_rank : 1) * sizeof(float));
    kv->sel = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, N * H * sizeof(float));
    if (!kv->k || !kv->v || !kv->x || !kv->h || !kv->rstd || !kv->q || !kv->kraw || !kv->kk ||
        !kv->vv || !kv->att || !kv->gate || !kv->up || !kv->xa || !kv->sel) {
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
        swift_mem_free(ops->free, kv->k);
        swift_mem_free(ops->free, kv->v);
        swift_mem_free(ops->free, kv->x);
        swift_mem_free(ops->free, kv->h);
        swift_mem_free(ops->free, kv->rstd);
        swift_mem_free(ops->free, kv->q);
        swift_mem_free(ops->free, kv->kraw);
        swift_mem_free(ops->free, kv->kk);
        swift_mem_free(ops->free, kv->vv);
        swift_mem_free(ops->free, kv->att);
        swift_mem_free(ops->free, kv->gate);
        swift_mem_free(ops->free, kv->up);
        swift_mem_free(ops->free, kv->xa);
        swift_mem_free(ops->free, kv->sel);
        swift_mem_free(ops->free, kv->logits);
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
