/* tokenizer_encode — text to ids: added tokens, normalizer, regex pre-tokenizer, BPE merges
 * with a per-state piece cache (see tokenizer.h for the pipeline). */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/pool.h"
#include "lib/preprocess/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "lib/core/banned.h"

#define MAX_TEXT ((size_t)1 << 30)
#define MAX_TOKENS ((size_t)1 << 31)
#define CACHE_SLOTS (1u << 16)
#define CACHE_KEY_MAX 128
#define CACHE_BYTES (1u << 21)
#define CACHE_IDS (1u << 19)

/* Offset of the first invalid byte, or -1 when s is valid UTF-8. */
static long utf8_invalid_at(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* fast ASCII run */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            if (v & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        uint32_t cp;
        int k = utf8_next(p + i, n - i, &cp);
        if (k < 0)
            return (long)i;
        i += (size_t)k;
    }
    return -1;
}

void swift_tokens_release(struct swift_tokens *t)
{
    free(t->ids);
    free(t->offsets);
    t->ids = t->offsets = NULL;
    t->n = t->cap = 0;
}

static int tokens_reserve(struct swift_tokens *t, size_t extra)
{
    if (t->n + extra <= t->cap && (!t->want_offsets || t->offsets))
        return 0;
    if (t->n + extra > MAX_TOKENS)
        return swift_error("too many tokens (more than %zu)", MAX_TOKENS);
    size_t nc = t->cap ? t->cap : 256;
    while (nc < t->n + extra)
        nc *= 2;
    t->ids = swift_xrealloc(t->ids, nc * sizeof(uint32_t));
    if (t->want_offsets)
        t->offsets = swift_xrealloc(t->offsets, nc * sizeof(uint32_t));
    t->cap = nc;
    return 0;
}

int swift_tokens_push(struct swift_tokens *t, uint32_t id, uint32_t offset)
{
    if (t->n >= t->cap || (t->want_offsets && !t->offsets))
        if (tokens_reserve(t, 1) < 0)
            return -1;
    if (t->want_offsets)
        t->offsets[t->n] = offset;
    t->ids[t->n++] = id;
    return 0;
}

/* ---- encoding ---- */
struct cache_slot { /* 16 bytes: the table is probed once per piece */
    uint32_t hash;  /* 0 = empty */
    uint32_t key_off;
    uint32_t ids_off;
    uint16_t key_len;
    uint16_t nids;
};

struct heap_ent {
    uint32_t rank, pos, id;
    uint32_t left, right; /* the pair's ids when pushed: unchanged means still valid */
};

struct swift_tok_state {
    const struct swift_tokenizer *tok;
    pcre2_match_data *md[TOK_MAX_REGEX];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    /* BPE scratch */
    uint32_t *sid;
    int32_t *sprev, *snext;
    uint32_t *slen;
    struct heap_ent *heap;
    size_t scap, hcap;
    /* piece cache */
    struct cache_slot *cslot;
    unsigned char *ckeys;
    uint32_t *cids;
    size_t ckeys_n, cids_n, ccount;
    /* text scratch (prefix space) */
    char *tbuf;
    size_t tcap;
};

struct swift_tok_state *swift_tok_state_new(const struct swift_tokenizer *tok)
{
    struct swift_tok_state *st = swift_xcalloc(1, sizeof(*st));
    st->tok = tok;
    st->mctx = pcre2_match_context_create(NULL);
    st->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!st->mctx || !st->jstack)
        goto oom;
    pcre2_jit_stack_assign(st->mctx, NULL, st->jstack);
    for (int i = 0; i < tok->nre; i++)
        if (!(st->md[i] = pcre2_match_data_create_from_pattern(tok->re[i], NULL)))
            goto oom;
    st->cslot = swift_xcalloc(CACHE_SLOTS, sizeof(*st->cslot));
    st->ckeys = swift_xmalloc(CACHE_BYTES);
    st->cids = swift_xmalloc(CACHE_IDS * sizeof(uint32_t));
    return st;
oom: /* PCRE2 allocates with its own malloc */
    swift_tok_state_free(st);
    swift_error("out of memory");
    return NULL;
}

void swift_tok_state_free(struct swift_tok_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < TOK_MAX_REGEX; i++)
        if (st->md[i])
            pcre2_match_data_free(st->md[i]);
    if (st->mctx)
        pcre2_match_context_free(st->mctx);
    if (st->jstack)
        pcre2_jit_stack_free(st->jstack);
    free(st->sid);
    free(st->sprev);
    free(st->snext);
    free(st->slen);
    free(st->heap);
    free(st->cslot);
    free(st->ckeys);
    free(st->cids);
    free(st->tbuf);
    free(st);
}

static void scratch_reserve(struct swift_tok_state *st, size_t n)
{
    if (n <= st->scap)
        return;
    size_t nc = st->scap ? st->scap : 256;
    while (nc < n)
        nc *= 2;
    st->sid = swift_xrealloc(st->sid, nc * sizeof(uint32_t));
    st->sprev = swift_xrealloc(st->sprev, nc * sizeof(int32_t));
    st->snext = swift_xrealloc(st->snext, nc * sizeof(int32_t));
    st->slen = swift_xrealloc(st->slen, nc * sizeof(uint32_t));
    st->scap = nc;
}

static void heap_push(struct swift_tok_state *st, size_t *hn, struct heap_ent e)
{
    if (*hn >= st->hcap) {
        size_t nc = st->hcap ? 2 * st->hcap : 256;
        st->heap = swift_xrealloc(st->heap, nc * sizeof(*st->heap));
        st->hcap = nc;
    }
    struct heap_ent *h = st->heap;
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].rank < e.rank || (h[p].rank == e.rank && h[p].pos < e.pos))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static struct heap_ent heap_pop(struct swift_tok_state *st, size_t *hn)
{
    struct heap_ent *h = st->heap;
    struct heap_ent top = h[0];
    struct heap_ent last = h[--*hn];
    size_t n = *hn, i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct heap_ent *best = &last;
        if (l < n &&
            (h[l].rank < best->rank || (h[l].rank == best->rank && h[l].pos < best->pos))) {
            m = l;
            best = &h[l];
        }
        if (r < n && (h[r].rank < best->rank || (h[r].rank == best->rank && h[r].pos < best->pos)))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0)
        h[i] = last;
    return top;
}

static void push_pair(struct swift_tok_state *st, size_t *hn, int32_t i, int32_t j)
{
    uint32_t a = st->sid[i], b = st->sid[j];
    const struct merge_slot *m = merge_find(st->tok, a, b);
    if (m)
        heap_push(st, hn, (struct heap_ent){m->rank, (uint32_t)i, m->id, a, b});
}

/* Merges of two single bytes, looked up directly (every piece starts with byte pairs). */
static void push_byte_pair(struct swift_tok_state *st, size_t *hn, int32_t i, unsigned char a,
                           unsigned char b)
{
    const struct merge_slot *m = st->tok->bytepair[a << 8 | b];
    if (m)
        heap_push(
            st, hn, (struct heap_ent){m->rank, (uint32_t)i, m->id, st->sid[i], st->sid[i + 1]});
}

/* The cached ids of piece u[0..n) appended to out (returns 1), or 0 with *slot the free slot
 * where the piece goes once merged (NULL when too long to cache); -1 on error. */
static int cache_lookup(struct swift_tok_state *st, const unsigned char *u, size_t n, uint32_t off,
                        struct swift_tokens *out, uint64_t *hh, struct cache_slot **slot)
{
    *slot = NULL;
    if (n > CACHE_KEY_MAX)
        return 0;
    *hh = hash_bytes(u, n);
    uint32_t h = (uint32_t)(*hh >> 32) | 1;
    for (uint32_t i = (uint32_t)*hh & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        struct cache_slot *s = &st->cslot[i];
        if (!s->hash) {
            *slot = s;
            return 0;
        }
        if (s->hash == h && s->key_len == n && !memcmp(st->ckeys + s->key_off, u, n)) {
            if (tokens_reserve(out, s->nids) < 0)
                return -1;
            const uint32_t *ids = st->cids + s->ids_off;
            if (out->want_offsets)
                for (uint32_t k = 0; k < s->nids; k++) {
                    out->offsets[out->n + k] = off;
                    off += st->tok->info[ids[k]].len;
                }
            memcpy(out->ids + out->n, ids, s->nids * sizeof(uint32_t));
            out->n += s->nids;
            return 1;
        }
    }
}

/* Remember piece u[0..n) -> ids in the free slot cache_lookup found (hash hh); the cache is
 * emptied when full. */
static void cache_store(struct swift_tok_state *st, const unsigned char *u, size_t n, uint64_t hh,
                        struct cache_slot *slot, const uint32_t *ids, size_t nids)
{
    if (st->ccount * 4 >= CACHE_SLOTS * 3 || st->ckeys_n + n > CACHE_BYTES ||
        st->cids_n + nids > CACHE_IDS) {
        memset(st->cslot, 0, CACHE_SLOTS * sizeof(*st->cslot));
        st->ckeys_n = st->cids_n = st->ccount = 0;
        /* the free slot found above is still free after clearing */
        slot = &st->cslot[(uint32_t)hh & (CACHE_SLOTS - 1)];
    }
    memcpy(st->ckeys + st->ckeys_n, u, n);
    memcpy(st->cids + st->cids_n, ids, nids * sizeof(uint32_t));
    *slot = (struct cache_slot){.hash = (uint32_t)(hh >> 32) | 1,
                                .key_off = (uint32_t)st->ckeys_n,
                                .ids_off = (uint32_t)st->cids_n,
                                .key_len = (uint16_t)n,
                                .nids = (uint16_t)nids};
    st->ckeys_n += n;
    st->cids_n += nids;
    st->ccount++;
}

/* Merge the n bytes u[0..n) by rank (lowest first, leftmost on ties); append the ids
 * starting at offset off. */
static int bpe_merge(struct swift_tok_state *st, const unsigned char *u, size_t n, uint32_t off,
                     struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    scratch_reserve(st, n);
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        st->sid[i] = (uint32_t)tok->byte_id[u[i]];
        st->sprev[i] = (int32_t)i - 1;
        st->snext[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        st->slen[i] = 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_byte_pair(st, &hn, (int32_t)i, u[i], u[i + 1]);
    while (hn > 0) {
        struct heap_ent e = heap_pop(st, &hn);
        int32_t i = (int32_t)e.pos;
        if (!st->slen[i])
            continue;
        int32_t j = st->snext[i];
        if (j < 0)
            continue;
        if (st->sid[i] != e.left || st->sid[j] != e.right) {
            /* the pair changed: HF still merges when it maps to the same new token */
            const struct merge_slot *m = merge_find(tok, st->sid[i], st->sid[j]);
            if (!m || m->id != e.id)
                continue;
        }
        st->sid[i] = e.id;
        st->slen[i] += st->slen[j];
        st->slen[j] = 0;
        st->snext[i] = st->snext[j];
        if (st->snext[j] >= 0)
            st->sprev[st->snext[j]] = i;
        if (st->sprev[i] >= 0)
            push_pair(st, &hn, st->sprev[i], i);
        if (st->snext[i] >= 0)
            push_pair(st, &hn, i, st->snext[i]);
    }
    for (int32_t i = 0; i >= 0; i = st->snext[i]) {
        if (swift_tokens_push(out, st->sid[i], off) < 0)
            return -1;
        off += st->slen[i];
    }
    return 0;
}

/* BPE-merge the n bytes at p; append ids starting at offset off. */
static int bpe_piece(struct swift_tok_state *st, const char *p, size_t n, uint32_t off,
                     struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    const unsigned char *u = (const unsigned char *)p;
    uint64_t hh = 0;
    struct cache_slot *slot;
    int hit = cache_lookup(st, u, n, off, out, &hh, &slot);
    if (hit)
        return hit < 0 ? -1 : 0;
    size_t first = out->n;
    long id = -1;
    if (n == 1 || tok->ignore_merges)
        id = n == 1 ? tok->byte_id[u[0]] : vocab_find(tok, p, n);
    if (id >= 0 ? swift_tokens_push(out, (uint32_t)id, off) < 0 : bpe_merge(st, u, n, off, out) < 0)
        return -1;
    if (slot)
        cache_store(st, u, n, hh, slot, out->ids + first, out->n - first);
    return 0;
}

static size_t utf8_len1(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static int pretok(struct swift_tok_state *st, int level, const char *p, size_t n, uint32_t off,
                  struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    if (n == 0)
        return 0;
    if (level >= tok->nre)
        return bpe_piece(st, p, n, off, out);
    pcre2_match_data *md = st->md[level];
    size_t pos = 0;
    while (pos < n) {
        int rc = tok->re_jit[level]
                     ? pcre2_jit_match(tok->re[level], (PCRE2_SPTR)p, n, pos, 0, md, st->mctx)
                     : pcre2_match(
                           tok->re[level], (PCRE2_SPTR)p, n, pos, PCRE2_NO_UTF_CHECK, md, st->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            return swift_error("pre-tokenizer regex failed: %s", (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e <= s) { /* empty match: skip one character */
            e = s + utf8_len1((unsigned char)p[s]);
            if (e > n)
                e = n;
            if (s > pos && pretok(st, level + 1, p + pos, s - pos, off + (uint32_t)pos, out) < 0)
                return -1;
            if (pretok(st, level + 1, p + s, e - s, off + (uint32_t)s, out) < 0)
                return -1;
            pos = e;
            continue;
        }
        if (s > pos && pretok(st, level + 1, p + pos, s - pos, off + (uint32_t)pos, out) < 0)
            return -1;
        if (pretok(st, level + 1, p + s, e - s, off + (uint32_t)s, out) < 0)
            return -1;
        pos = e;
    }
    if (pos < n)
        return pretok(st, level + 1, p + pos, n - pos, off + (uint32_t)pos, out);
    return 0;
}

/* 1 when NFC leaves the text unchanged for certain (quick check on ranges whose characters are
 * NFC_QC=Yes and never combine with a neighbour). */
static int nfc_quick_yes(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = utf8_next(u + i, n - i, &cp);
        if (k < 0)
            return 0;
        if (!(cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3041 && cp <= 0x3096) ||
              (cp >= 0x30A1 && cp <= 0x30FA) || (cp >= 0x1F300 && cp <= 0x1FAFF)))
            return 0;
        i += (size_t)k;
    }
    return 1;
}

static int normalize(const struct swift_tokenizer *tok, const char *s, size_t n, char **out,
                     size_t *outlen)
{
    *out = NULL;
    if (tok->norm == NORM_NONE || (tok->norm == NORM_NFC && nfc_quick_yes(s, n)))
        return 0;
    utf8proc_uint8_t *dst = NULL;
    int opts = UTF8PROC_STABLE | UTF8PROC_COMPOSE | (tok->norm == NORM_NFKC ? UTF8PROC_COMPAT : 0);
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, opts);
    if (r < 0)
        return swift_error("cannot normalize text: %s", utf8proc_errmsg(r));
    *out = (char *)dst;
    *outlen = (size_t)r;
    return 0;
}

int swift_tokenizer_normalize(const struct swift_tokenizer *tok, const char *text, size_t len,
                              char **out, size_t *outlen)
{
    long bad_at = utf8_invalid_at(text, len);
    if (bad_at >= 0)
        return swift_error("text is not valid UTF-8 (byte offset %ld)", bad_at);
    char *norm;
    size_t nlen;
    if (normalize(tok, text, len, &norm, &nlen) < 0)
        return -1;
    if (!norm) {
        norm = swift_xmalloc(len + 1);
        memcpy(norm, text, len);
        norm[len] = 0;
        nlen = len;
    }
    *out = norm;
    *outlen = nlen;
    return 0;
}

/* Tokenize a segment without added tokens. */
static int encode_segment(struct swift_tok_state *st, const char *p, size_t n, uint32_t off,
                          int flags, struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    if (n == 0)
        return 0;
    char *norm = NULL;
    size_t nlen = 0;
    if (!(flags & SWIFT_TOK_NO_NORMALIZE) && normalize(tok, p, n, &norm, &nlen) < 0)
        return -1;
    if (norm) {
        p = norm;
        n = nlen;
    }
    int rc;
    if (tok->add_prefix_space && p[0] != ' ') {
        if (n + 1 > st->tcap) {
            size_t nc = 2 * (n + 1);
            st->tbuf = swift_xrealloc(st->tbuf, nc);
            st->tcap = nc;
        }
        st->tbuf[0] = ' ';
        memcpy(st->tbuf + 1, p, n);
        /* offsets: the added space maps to the segment start */
        size_t before = out->n;
        rc = pretok(st, 0, st->tbuf, n + 1, off, out);
        if (out->want_offsets)
            for (size_t i = before; i < out->n; i++)
                if (out->offsets[i] > off)
                    out->offsets[i]--;
    } else
        rc = pretok(st, 0, p, n, off, out);
    free(norm);
    return rc;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int swift_tokenizer_encode(struct swift_tok_state *st, const char *text, size_t len, int flags,
                           struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    if (len > MAX_TEXT)
        return swift_error("text too long (%zu bytes, at most %zu)", len, MAX_TEXT);
    long bad_at = utf8_invalid_at(text, len);
    if (bad_at >= 0)
        return swift_error("text is not valid UTF-8 (byte offset %ld)", bad_at);
    if (flags & SWIFT_TOK_ADD_SPECIAL)
        for (size_t i = 0; i < tok->npre; i++)
            if (swift_tokens_push(out, tok->pre_ids[i], 0) < 0)
                return -1;
    const unsigned char *u = (const unsigned char *)text;
    size_t seg = 0, i = 0;
    while (i < len) {
        unsigned c = u[i];
        uint32_t na = tok->nafirst[c];
        const struct added *hit = NULL;
        for (uint32_t k = 0; k < na; k++) {
            const struct added *a = &tok->added[tok->afirst[c][k]];
            if (a->special && !(flags & SWIFT_TOK_PARSE_SPECIAL))
                continue;
            if (a->len <= len - i && !memcmp(text + i, a->content, a->len)) {
                hit = a;
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        size_t s = i, e = i + hit->len;
        if (hit->lstrip)
            while (s > seg && is_ws(u[s - 1]))
                s--;
        if (hit->rstrip)
            while (e < len && is_ws(u[e]))
                e++;
        if (encode_segment(st, text + seg, s - seg, (uint32_t)seg, flags, out) < 0 ||
            swift_tokens_push(out, hit->id, (uint32_t)s) < 0)
            return -1;
        seg = i = e;
    }
    if (encode_segment(st, text + seg, len - seg, (uint32_t)seg, flags, out) < 0)
        return -1;
    if (flags & SWIFT_TOK_ADD_SPECIAL)
        for (size_t k = 0; k < tok->npost; k++)
            if (swift_tokens_push(out, tok->post_ids[k], (uint32_t)len) < 0)
                return -1;
    return 0;
}

struct many_ctx {
    const struct swift_tokenizer *tok;
    struct swift_tok_state **st;
    const char *const *texts;
    const size_t *lens;
    int flags;
    struct swift_tokens *out;
    atomic_int failed;
};

static void many_one(void *vctx, long i, int worker)
{
    struct many_ctx *c = vctx;
    if (atomic_load(&c->failed))
        return;
    if (!c->st[worker])
        c->st[worker] = swift_tok_state_new(c->tok);
    if (!c->st[worker] ||
        swift_tokenizer_encode(c->st[worker], c->texts[i], c->lens[i], c->flags, &c->out[i]) < 0)
        atomic_store(&c->failed, 1);
}

int swift_tokenizer_encode_many(const struct swift_tokenizer *tok, struct swift_pool *pool,
                                size_t n, const char *const *texts, const size_t *lens, int flags,
                                struct swift_tokens *out)
{
    int nw = pool ? swift_pool_size(pool) : 1;
    struct many_ctx c = {
        tok, swift_xcalloc((size_t)nw, sizeof(void *)), texts, lens, flags, out, 0};
    if (pool)
        swift_pool_for(pool, (long)n, 0, many_one, &c);
    else
        for (size_t i = 0; i < n; i++)
            many_one(&c, (long)i, 0);
    for (int w = 0; w < nw; w++)
        swift_tok_state_free(c.st[w]);
    free(c.st);
    return atomic_load(&c.failed) ? -1 : 0;
}
