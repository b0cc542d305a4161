/* pkv — the paged key/value cache's pool and block tables (see pkv.h); the forward is in
 * forward.c. */
#include "lib/model/pkv.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/mem.h"
#include "lib/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static size_t kd_of(const struct swift_pkv *c)
{
    return (size_t)c->m->cfg.num_kv_heads * c->m->cfg.head_dim;
}

int swift_pkv_init(struct swift_pkv *c, struct swift_model *m, int num_blocks, int block_size,
                   int max_tokens)
{
    memset(c, 0, sizeof(*c));
    const struct swift_ops *ops = m->ops;
    if (!ops->attention_paged)
        return swift_error("the '%s' backend has no paged attention op", ops->name);
    if (num_blocks < 1 || block_size < 1 || max_tokens < 1)
        return swift_error("bad paged cache size: %d blocks of %d tokens, %d tokens per forward",
                           num_blocks,
                           block_size,
                           max_tokens);
    if ((long long)num_blocks * block_size > INT32_MAX)
        return swift_error("paged cache of %d blocks of %d tokens: more than %d slots",
                           num_blocks,
                           block_size,
                           INT32_MAX);
    if (swift_kv_init(&c->s, m, 1, 1, max_tokens) < 0) /* scratch; checks head_dim, copy_rows */
        return -1;
    c->m = m;
    c->num_blocks = num_blocks;
    c->block_size = block_size;
    c->max_tokens = max_tokens;
    size_t pool = (size_t)m->cfg.num_layers * num_blocks * block_size * kd_of(c);
    c->k = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, pool * sizeof(float));
    c->v = swift_mem_alloc(ops->alloc, SWIFT_MEM_ACTIVATIONS, pool * sizeof(float));
    if (!c->k || !c->v) {
        swift_pkv_release(c);
        return swift_error("out of memory for a paged cache of %d blocks of %d tokens on %s",
                           num_blocks,
                           block_size,
                           ops->name);
    }
    c->ref = swift_xcalloc((size_t)num_blocks, sizeof(int));
    c->freel = swift_xcalloc((size_t)num_blocks, sizeof(int32_t));
    for (int b = 0; b < num_blocks; b++) /* block 0 on top: taken first */
        c->freel[b] = num_blocks - 1 - b;
    c->nfree = num_blocks;
    c->toff = swift_xcalloc((size_t)max_tokens, sizeof(int32_t));
    c->bparent = swift_xcalloc((size_t)num_blocks, sizeof(int32_t));
    for (int b = 0; b < num_blocks; b++)
        c->bparent[b] = -2;
    c->btok = swift_xcalloc((size_t)num_blocks * block_size, sizeof(int32_t));
    c->hcap = 16;
    while (c->hcap < 2 * num_blocks)
        c->hcap *= 2;
    c->htab = swift_xcalloc((size_t)c->hcap, sizeof(int32_t));
    for (int i = 0; i < c->hcap; i++)
        c->htab[i] = -1;
    c->lru_prev = swift_xcalloc((size_t)num_blocks, sizeof(int32_t));
    c->lru_next = swift_xcalloc((size_t)num_blocks, sizeof(int32_t));
    c->lru_head = c->lru_tail = -1;
    return 0;
}

void swift_pkv_release(struct swift_pkv *c)
{
    if (c->m) {
        swift_mem_free(c->m->ops->free, c->k);
        swift_mem_free(c->m->ops->free, c->v);
    }
    swift_kv_release(&c->s);
    free(c->ref);
    free(c->freel);
    free(c->toff);
    free(c->tables);
    free(c->bparent);
    free(c->btok);
    free(c->htab);
    free(c->lru_prev);
    free(c->lru_next);
    memset(c, 0, sizeof(*c));
}

int swift_pkv_used(const struct swift_pkv *c)
{
    return c->num_blocks - c->nfree - c->nevict;
}

int swift_pkv_cached(const struct swift_pkv *c)
{
    return c->nevict;
}

/* ---- the evictable list (registered blocks with ref 0), oldest at the head ---- */

static void lru_push(struct swift_pkv *c, int32_t b)
{
    c->lru_prev[b] = c->lru_tail;
    c->lru_next[b] = -1;
    if (c->lru_tail >= 0)
        c->lru_next[c->lru_tail] = b;
    else
        c->lru_head = b;
    c->lru_tail = b;
    c->nevict++;
}

static void lru_remove(struct swift_pkv *c, int32_t b)
{
    int32_t p = c->lru_prev[b], n = c->lru_next[b];
    if (p >= 0)
        c->lru_next[p] = n;
    else
        c->lru_head = n;
    if (n >= 0)
        c->lru_prev[n] = p;
    else
        c->lru_tail = p;
    c->nevict--;
}

static void unregister(struct swift_pkv *c, int32_t b);

/* Unregister b and every registered block whose chain passes through it (their keys name b,
 * which is about to hold other tokens); those no sequence holds go to the free stack. */
static void drop_chain(struct swift_pkv *c, int32_t b)
{
    unregister(c, b);
    for (int32_t k = 0; k < c->num_blocks; k++)
        if (c->bparent[k] == b) {
            if (c->ref[k] == 0) {
                lru_remove(c, k);
                c->freel[c->nfree++] = k;
            }
            drop_chain(c, k);
        }
}

/* the block receiving the next token when it is in the table and shared, else -1 */
static int shared_next(const struct swift_pkv *c, const struct swift_pkv_seq *s)
{
    int bi = s->len / c->block_size;
    if (s->len % c->block_size == 0 || bi >= s->nblocks)
        return -1;
    return c->ref[s->blocks[bi]] > 1 ? bi : -1;
}

int swift_pkv_need(const struct swift_pkv *c, const struct swift_pkv_seq *s, int n)
{
    long want = ((long)s->len + n + c->block_size - 1) / c->block_size;
    int more = want > s->nblocks ? (int)(want - s->nblocks) : 0;
    return more + (n > 0 && shared_next(c, s) >= 0);
}

/* Blocks a reservation may take: the free ones and the evictable ones. */
static int available(const struct swift_pkv *c)
{
    return c->nfree + c->nevict;
}

static int32_t take_block(struct swift_pkv *c)
{
    if (c->nfree == 0) { /* evict the least recently freed cached block */
        int32_t e = c->lru_head;
        lru_remove(c, e);
        drop_chain(c, e);
        c->freel[c->nfree++] = e;
    }
    int32_t b = c->freel[--c->nfree];
    c->ref[b] = 1;
    int used = swift_pkv_used(c);
    if (used > c->peak)
        c->peak = used;
    return b;
}

static void put_block(struct swift_pkv *c, int32_t b)
{
    if (--c->ref[b] == 0) {
        if (c->bparent[b] != -2)
            lru_push(c, b); /* kept for a later hit */
        else
            c->freel[c->nfree++] = b;
    }
}

/* dst's first n positions = src's, in every layer (device-side copies) */
static void copy_block(struct swift_pkv *c, int32_t dst, int32_t src, int n)
{
    const struct swift_ops *ops = c->m->ops;
    size_t KD = kd_of(c), bsz = (size_t)c->block_size * KD;
    size_t layer = (size_t)c->num_blocks * bsz;
    for (int l = 0; l < c->m->cfg.num_layers; l++) {
        size_t d = l * layer + (size_t)dst * bsz, s = l * layer + (size_t)src * bsz;
        ops->copy(c->k + d, c->k + s, (size_t)n * KD);
        ops->copy(c->v + d, c->v + s, (size_t)n * KD);
    }
}

int swift_pkv_reserve(struct swift_pkv *c, struct swift_pkv_seq *s, int n)
{
    if (n <= 0)
        return 0;
    int need = swift_pkv_need(c, s, n);
    if (need > available(c))
        return -1;
    int bi = shared_next(c, s);
    if (bi >= 0) { /* copy-on-write of the partial block the next token goes to */
        int32_t nb = take_block(c), old = s->blocks[bi];
        copy_block(c, nb, old, s->len % c->block_size);
        put_block(c, old);
        s->blocks[bi] = nb;
    }
    int want = (int)(((long)s->len + n + c->block_size - 1) / c->block_size);
    if (want > s->cap) {
        int cap = s->cap ? s->cap : 4;
        while (cap < want)
            cap *= 2;
        s->blocks = swift_xrealloc(s->blocks, (size_t)cap * sizeof(int32_t));
        s->cap = cap;
    }
    while (s->nblocks < want)
        s->blocks[s->nblocks++] = take_block(c);
    return 0;
}

void swift_pkv_seq_clear(struct swift_pkv *c, struct swift_pkv_seq *s)
{
    for (int i = s->nblocks; i-- > 0;) /* the last first: a chain is evicted from its end */
        put_block(c, s->blocks[i]);
    s->nblocks = 0;
    s->len = 0;
    s->nreg = 0;
}

void swift_pkv_seq_free(struct swift_pkv *c, struct swift_pkv_seq *s)
{
    swift_pkv_seq_clear(c, s);
    free(s->blocks);
    memset(s, 0, sizeof(*s));
}

void swift_pkv_fork(struct swift_pkv *c, struct swift_pkv_seq *dst, const struct swift_pkv_seq *src)
{
    if (dst == src)
        return;
    swift_pkv_seq_clear(c, dst);
    int n = (src->len + c->block_size - 1) / c->block_size;
    if (n > dst->cap) {
        dst->blocks = swift_xrealloc(dst->blocks, (size_t)n * sizeof(int32_t));
        dst->cap = n;
    }
    for (int i = 0; i < n; i++) {
        dst->blocks[i] = src->blocks[i];
        c->ref[src->blocks[i]]++;
    }
    dst->nblocks = n;
    dst->len = src->len;
    dst->nreg = src->nreg;
}

/* ---- the prefix cache ---- */

static uint64_t key_hash(int32_t parent, const int32_t *tokens, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uint32_t)parent;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i];
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    return h;
}

static int same_key(const struct swift_pkv *c, int32_t b, int32_t parent, const int32_t *tokens)
{
    return c->bparent[b] == parent && !memcmp(c->btok + (size_t)b * c->block_size,
                                              tokens,
                                              (size_t)c->block_size * sizeof(int32_t));
}

int32_t swift_pkv_prefix_find(const struct swift_pkv *c, int32_t parent, const int32_t *tokens)
{
    size_t mask = (size_t)c->hcap - 1, i = key_hash(parent, tokens, c->block_size) & mask;
    for (;; i = (i + 1) & mask) { /* an empty slot always ends the probe (load <= 3/4) */
        int32_t b = c->htab[i];
        if (b == -1)
            return -1;
        if (b >= 0 && same_key(c, b, parent, tokens))
            return b;
    }
}

static void insert(struct swift_pkv *c, int32_t b)
{
    size_t mask = (size_t)c->hcap - 1;
    size_t i = key_hash(c->bparent[b], c->btok + (size_t)b * c->block_size, c->block_size) & mask;
    while (c->htab[i] >= 0)
        i = (i + 1) & mask;
    if (c->htab[i] == -2)
        c->hdel--;
    c->htab[i] = b;
}

static void unregister(struct swift_pkv *c, int32_t b)
{
    size_t mask = (size_t)c->hcap - 1;
    size_t i = key_hash(c->bparent[b], c->btok + (size_t)b * c->block_size, c->block_size) & mask;
    while (c->htab[i] != b)
        i = (i + 1) & mask;
    c->htab[i] = -2;
    c->bparent[b] = -2;
    if (++c->hdel > c->hcap / 4) { /* too many deleted slots: rebuild */
        for (int k = 0; k < c->hcap; k++)
            c->htab[k] = -1;
        c->hdel = 0;
        for (int32_t k = 0; k < c->num_blocks; k++)
            if (c->bparent[k] != -2)
                insert(c, k);
    }
}

void swift_pkv_share(struct swift_pkv *c, struct swift_pkv_seq *s, int32_t b)
{
    if (s->nblocks + 1 > s->cap) {
        int cap = s->cap ? s->cap * 2 : 4;
        s->blocks = swift_xrealloc(s->blocks, (size_t)cap * sizeof(int32_t));
        s->cap = cap;
    }
    s->blocks[s->nblocks++] = b;
    if (c->ref[b]++ == 0) { /* back from the evictable list */
        lru_remove(c, b);
        int used = swift_pkv_used(c);
        if (used > c->peak)
            c->peak = used;
    }
    s->len += c->block_size;
    s->nreg = s->nblocks;
}

void swift_pkv_prefix_add(struct swift_pkv *c, struct swift_pkv_seq *s, const int32_t *tokens)
{
    int i = s->nreg;
    if (i >= s->nblocks || (i + 1) * c->block_size > s->len)
        return; /* not a full block */
    s->nreg++;
    int32_t b = s->blocks[i], parent = i > 0 ? s->blocks[i - 1] : -1;
    if (c->bparent[b] != -2 || swift_pkv_prefix_find(c, parent, tokens) >= 0)
        return; /* registered already (shared), or an equal block is */
    if (parent >= 0 && c->bparent[parent] == -2)
        return; /* after an unregistered block: its key would outlive what it names */
    c->bparent[b] = parent;
    memcpy(c->btok + (size_t)b * c->block_size, tokens, (size_t)c->block_size * sizeof(int32_t));
    insert(c, b);
}
