/* store — swift-preprocess's build mode after tokenizing: documents into the token store, the
 * seeded train/val split, packing (none, best-fit decreasing, sequential) and the shards plus
 * their index (see preprocess.h; the driver is preprocess.c). */
#include "lib/preprocess/preprocess.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/shard.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/internal.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/preprocess/vision.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_DOCS ((uint64_t)1 << 32)
#define MAX_STORE_TOKENS ((uint64_t)1 << 36)

/* ---- the token store ---- */
/* One entry: ids[0..n), then (a pair's rejected side) ids2[0..n2). */
static int store_add2(struct pp_store *s, const uint32_t *ids, const uint8_t *mask, uint64_t n,
                      const uint32_t *ids2, const uint8_t *mask2, uint64_t n2, int label)
{
    uint64_t n1 = n;
    n += n2;
    if (s->ntok + n > s->cap) {
        uint64_t nc = s->cap ? s->cap : 1 << 20;
        while (nc < s->ntok + n)
            nc *= 2;
        if (nc > MAX_STORE_TOKENS)
            return swift_error("more than %" PRIu64 " tokens", MAX_STORE_TOKENS);
        s->ids = swift_xrealloc(s->ids, nc * sizeof(uint32_t));
        s->mask = swift_xrealloc(s->mask, nc);
        s->cap = nc;
    }
    if (s->ndocs + 2 > s->capd) {
        uint64_t nc = s->capd ? 2 * s->capd : 4096;
        if (nc > MAX_DOCS)
            return swift_error("more than %" PRIu64 " documents", MAX_DOCS);
        s->off = swift_xrealloc(s->off, nc * sizeof(uint64_t));
        s->trained = swift_xrealloc(s->trained, nc * sizeof(uint64_t));
        s->n0 = swift_xrealloc(s->n0, nc * sizeof(uint32_t));
        s->label = swift_xrealloc(s->label, nc);
        if (s->capd == 0)
            s->off[0] = 0;
        s->capd = nc;
    }
    memcpy(s->ids + s->ntok, ids, n1 * sizeof(uint32_t));
    memcpy(s->mask + s->ntok, mask, n1);
    if (n2) {
        memcpy(s->ids + s->ntok + n1, ids2, n2 * sizeof(uint32_t));
        memcpy(s->mask + s->ntok + n1, mask2, n2);
    }
    uint64_t tr = 0;
    for (uint64_t i = 0; i < n; i++)
        tr += s->mask[s->ntok + i];
    s->trained[s->ndocs] = tr;
    s->n0[s->ndocs] = (uint32_t)(n2 ? n1 : 0);
    s->label[s->ndocs] = (uint8_t)label;
    s->ntok += n;
    s->ndocs++;
    s->off[s->ndocs] = s->ntok;
    return 0;
}

static int store_add(struct pp_store *s, const uint32_t *ids, const uint8_t *mask, uint64_t n)
{
    return store_add2(s, ids, mask, n, NULL, NULL, 0, 0);
}

void swift_pp_store_free(struct pp_store *s)
{
    free(s->meta);
    free(s->meta_off);
    free(s->img);
    free(s->img_off);
    free(s->rimg);
    free(s->n0);
    free(s->label);
    free(s->ids);
    free(s->mask);
    free(s->off);
    free(s->trained);
}

/* Truncate per --truncation and add to the store. */
int swift_pp_add_doc(const struct swift_preprocess_opts *o, struct pp_store *s, struct pp_stats *st,
                     const uint32_t *ids, const uint8_t *mask, uint64_t n)
{
    uint64_t max = (uint64_t)o->max_length;
    if (n == 0)
        return 0;
    if (n <= max)
        return store_add(s, ids, mask, n);
    switch (o->truncation) {
    case SWIFT_TRUNC_DELETE:
        st->dropped++;
        return 0;
    case SWIFT_TRUNC_LEFT:
        st->truncated++;
        return store_add(s, ids + (n - max), mask + (n - max), max);
    case SWIFT_TRUNC_RIGHT:
        st->truncated++;
        return store_add(s, ids, mask, max);
    default: /* split */
        st->truncated++;
        for (uint64_t a = 0; a < n; a += max)
            if (store_add(s, ids + a, mask + a, n - a < max ? n - a : max) < 0)
                return -1;
        return 0;
    }
}

static int any_trained(const uint8_t *m, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (m[i])
            return 1;
    return 0;
}

int swift_pp_add_pref(const struct swift_preprocess_opts *o, struct pp_store *s,
                      struct pp_stats *st, const uint32_t *ids, const uint8_t *mask, uint64_t n0,
                      uint64_t n1, uint64_t prompt, int label)
{
    uint64_t max = (uint64_t)o->max_length, mp = (uint64_t)o->max_prompt_length, k = 0;
    int cut = 0;
    if (mp && prompt > mp) { /* the prompt keeps its end (TRL's keep_end on the prompt) */
        k = prompt - mp;
        prompt = mp;
        cut = 1;
    }
    uint64_t a = k, b = n0 + k; /* where each document starts in ids */
    n0 -= k;
    n1 = n1 ? n1 - k : 0;
    uint64_t longest = n0 > n1 ? n0 : n1;
    if (longest > max) {
        switch (o->truncation) {
        case SWIFT_TRUNC_DELETE:
            st->dropped++;
            return 0;
        case SWIFT_TRUNC_LEFT: /* the same prompt tokens go from both: the prompt keeps its end */
            k = longest - max;
            if (k >= prompt) {
                st->dropped++;
                return 0;
            }
            a += k;
            b += k;
            n0 -= k;
            n1 = n1 ? n1 - k : 0;
            prompt -= k;
            break;
        case SWIFT_TRUNC_RIGHT: /* TRL's keep_start: each document keeps its first max tokens */
            if (prompt >= max) {
                st->dropped++;
                return 0;
            }
            n0 = n0 < max ? n0 : max;
            n1 = n1 < max ? n1 : max;
            break;
        default:
            return swift_error("--truncation split cannot cut a preference pair or a KTO row (use "
                               "delete, left or right)");
        }
        cut = 1;
    }
    if (!any_trained(mask + a, n0) || (n1 && !any_trained(mask + b, n1))) {
        st->dropped++; /* the cut left a response without a trained token */
        return 0;
    }
    st->truncated += (uint64_t)cut;
    return store_add2(s, ids + a, mask + a, n0, ids + b, mask + b, n1, label);
}

int swift_pp_add_prompt(const struct swift_preprocess_opts *o, struct pp_store *s,
                        struct pp_stats *st, const uint32_t *ids, const uint8_t *mask, uint64_t n,
                        const char *meta, size_t meta_len)
{
    uint64_t max = (uint64_t)o->max_length, mp = (uint64_t)o->max_prompt_length, keep = n;
    if (mp && keep > mp) /* TRL's max_prompt_length: the prompt keeps its end */
        keep = mp;
    if (keep > max) {
        if (o->truncation != SWIFT_TRUNC_LEFT) { /* delete (right and split are refused) */
            st->dropped++;
            return 0;
        }
        keep = max;
    }
    if (s->meta_n + meta_len > MAX_STORE_TOKENS)
        return swift_error("more than %" PRIu64 " bytes of prompt metadata", MAX_STORE_TOKENS);
    uint64_t capd = s->capd;
    if (store_add(s, ids + (n - keep), mask + (n - keep), keep) < 0)
        return -1;
    st->truncated += keep < n;
    if (capd != s->capd || !s->meta_off) {
        s->meta_off = swift_xrealloc(s->meta_off, s->capd * sizeof(uint64_t));
        if (!capd)
            s->meta_off[0] = 0;
    }
    if (s->meta_n + meta_len > s->meta_cap) {
        uint64_t nc = s->meta_cap ? s->meta_cap : 1 << 16;
        while (nc < s->meta_n + meta_len)
            nc *= 2;
        s->meta = swift_xrealloc(s->meta, nc);
        s->meta_cap = nc;
    }
    memcpy(s->meta + s->meta_n, meta, meta_len);
    s->meta_n += meta_len;
    s->meta_off[s->ndocs] = s->meta_n;
    return 0;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- split ---- */
void swift_pp_len_stats(const struct pp_store *s, double lenstats[4])
{
    uint64_t mn = UINT64_MAX, mx = 0;
    double sum = 0, sq = 0;
    for (int i = 0; i < 4; i++)
        lenstats[i] = 0;
    uint64_t nd = 0;
    for (uint64_t d = 0; d < s->ndocs; d++) {
        uint64_t len = s->off[d + 1] - s->off[d], n0 = s->n0[d];
        uint64_t part[2] = {n0 ? n0 : len, len - n0};
        for (int k = 0; k < (n0 ? 2 : 1); k++) {
            uint64_t l = part[k];
            sum += (double)l;
            sq += (double)l * (double)l;
            mn = l < mn ? l : mn;
            mx = l > mx ? l : mx;
            nd++;
        }
    }
    if (nd) {
        lenstats[0] = sum / (double)nd;
        double var = sq / (double)nd - lenstats[0] * lenstats[0];
        lenstats[1] = var > 0 ? sqrt(var) : 0;
        lenstats[2] = (double)mn;
        lenstats[3] = (double)mx;
    }
}

int swift_pp_split(const struct swift_preprocess_opts *o, uint64_t n, uint64_t *train,
                   uint64_t *ntrain, uint64_t *val, uint64_t *nval)
{
    uint64_t *perm = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint8_t *is_val = swift_xcalloc(n ? n : 1, 1);
    *ntrain = *nval = 0;
    uint64_t seed = o->seed;
    for (uint64_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = splitmix(&seed) % i;
        uint64_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    uint64_t want = (uint64_t)floor(o->val_ratio * (double)n + 0.5);
    if (o->val_ratio > 0 && want == 0 && n > 1)
        want = 1;
    if (want >= n && n > 0)
        want = n - 1;
    for (uint64_t i = 0; i < want; i++)
        is_val[perm[i]] = 1;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t d = o->shuffle ? perm[k] : k;
        if (is_val[d])
            val[(*nval)++] = d;
        else
            train[(*ntrain)++] = d;
    }
    free(perm);
    free(is_val);
    return 0;
}

/* ---- pack ---- */
static int cmp_len_desc(const void *a, const void *b, void *lens)
{
    const uint64_t *len = lens;
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (len[x] != len[y])
        return len[x] > len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Best-fit decreasing: seq[] becomes the placement order (longest first) and bin[i] the bin of
 * doc i. Bins are bucketed by remaining capacity, with a bitset of non-empty buckets to find the
 * smallest remaining capacity >= len. */
static void best_fit(const uint64_t *len, uint64_t n, uint64_t max, uint64_t *seq, uint64_t *bin,
                     uint64_t *nbins)
{
    qsort_r(seq, n, sizeof(uint64_t), cmp_len_desc, (void *)len);
    uint64_t words = max / 64 + 1;
    uint64_t *bits = swift_xcalloc(words, sizeof(uint64_t));
    uint64_t *head = swift_xmalloc((max + 1) * sizeof(uint64_t));
    uint64_t *next = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *rem = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    for (uint64_t r = 0; r <= max; r++)
        head[r] = UINT64_MAX;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = seq[k], l = len[i];
        uint64_t found = UINT64_MAX;
        for (uint64_t wi = l / 64; wi < words; wi++) {
            uint64_t m = bits[wi];
            if (wi == l / 64)
                m &= ~0ull << (l % 64);
            if (m) {
                found = wi * 64 + (uint64_t)__builtin_ctzll(m);
                break;
            }
        }
        uint64_t b;
        if (found != UINT64_MAX && found <= max) {
            b = head[found];
            head[found] = next[b];
            if (head[found] == UINT64_MAX)
                bits[found / 64] &= ~(1ull << (found % 64));
        } else {
            b = (*nbins)++;
            rem[b] = max;
        }
        rem[b] -= l;
        bin[i] = b;
        next[b] = head[rem[b]];
        head[rem[b]] = b;
        bits[rem[b] / 64] |= 1ull << (rem[b] % 64);
    }
    free(bits);
    free(head);
    free(next);
    free(rem);
}

/* Group the placed docs by bin, keeping placement order inside a bin: order[] of doc ids and
 * start[0..nbins] offsets into it. */
static void group_bins(const uint64_t *docs, uint64_t n, const uint64_t *seq, const uint64_t *bin,
                       uint64_t nbins, uint64_t *order, uint64_t *start)
{
    for (uint64_t b = 0; b <= nbins; b++)
        start[b] = 0;
    for (uint64_t i = 0; i < n; i++)
        start[bin[i] + 1]++;
    for (uint64_t b = 0; b < nbins; b++)
        start[b + 1] += start[b];
    uint64_t *fillp = swift_xmalloc((nbins + 1) * sizeof(uint64_t));
    memcpy(fillp, start, (nbins + 1) * sizeof(uint64_t));
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = seq[k];
        order[fillp[bin[i]]++] = docs[i];
    }
    free(fillp);
}

/* Pack docs[0..n) (doc ids into the store) into samples. Output: order[] of doc ids, and
 * start[0..*nsamples] offsets into order. */
void swift_pp_pack(const struct pp_store *s, int mode, uint64_t max, const uint64_t *docs,
                   uint64_t n, uint64_t *order, uint64_t *start, uint64_t *nsamples)
{
    if (mode == SWIFT_PACK_NONE) {
        for (uint64_t i = 0; i < n; i++) {
            order[i] = docs[i];
            start[i] = i;
        }
        start[n] = n;
        *nsamples = n;
        return;
    }
    uint64_t *len = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *bin = swift_xmalloc((n ? n : 1) * sizeof(uint64_t)); /* bin of the i-th placed doc */
    uint64_t *seq = swift_xmalloc((n ? n : 1) * sizeof(uint64_t)); /* placement order (positions) */
    uint64_t nbins = 0;
    for (uint64_t i = 0; i < n; i++) {
        len[i] = s->off[docs[i] + 1] - s->off[docs[i]];
        seq[i] = i;
    }
    if (mode == SWIFT_PACK_SEQUENTIAL) {
        uint64_t fill = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (nbins == 0 || fill + len[i] > max) {
                nbins++;
                fill = 0;
            }
            fill += len[i];
            bin[i] = nbins - 1;
        }
    } else
        best_fit(len, n, max, seq, bin, &nbins);
    group_bins(docs, n, seq, bin, nbins, order, start);
    free(len);
    free(bin);
    free(seq);
    *nsamples = nbins;
}

/* ---- write ---- */
/* The shard being written and the buffers one packed sample is gathered into. */
struct shard_out {
    const char *dir;
    uint64_t shard_tokens;
    struct swift_shard_index *ix;
    struct swift_shard_writer *w;
    int shard_no;
    char name[64];
    uint32_t *ids, *dl;
    uint8_t *mask;
    uint64_t cap, capd;
    int label;        /* the sample's KTO label, or -1 */
    const char *meta; /* the sample's prompt metadata, or NULL */
    uint32_t meta_len;
    char *imgbuf; /* a multimodal sample's {"images": [...]} (mm.c) */
    size_t imgcap;
    uint64_t image_refs;
};

static int grow(struct shard_out *so, uint64_t len, uint64_t nd)
{
    if (len > so->cap) {
        so->cap = len;
        so->ids = swift_xrealloc(so->ids, so->cap * sizeof(uint32_t));
        so->mask = swift_xrealloc(so->mask, so->cap);
    }
    if (nd > so->capd) {
        so->capd = nd;
        so->dl = swift_xrealloc(so->dl, so->capd * sizeof(uint32_t));
    }
    return 0;
}

/* Commit the open shard (if any) and list it in the index. */
static int close_shard(struct shard_out *so)
{
    if (!so->w)
        return 0;
    uint32_t crc;
    uint64_t ws = swift_shard_writer_samples(so->w), wt = swift_shard_writer_tokens(so->w);
    int rc = swift_shard_writer_commit(so->w, &crc);
    so->w = NULL;
    if (rc == 0)
        rc = swift_shard_index_add(so->ix, so->name, ws, wt, crc);
    return rc;
}

/* Append one sample of len tokens from nd docs, starting a new shard when this one is full. */
static int put_sample(struct shard_out *so, uint64_t len, uint64_t nd)
{
    int rc = 0;
    if (so->w && swift_shard_writer_tokens(so->w) > 0 &&
        swift_shard_writer_tokens(so->w) + len > so->shard_tokens)
        rc = close_shard(so);
    if (rc == 0 && !so->w) {
        snprintf(so->name, sizeof(so->name), "shard-%05d.bin", so->shard_no++);
        char *path = swift_path_join(so->dir, so->name);
        so->w = swift_shard_writer_new(path);
        free(path);
        if (!so->w)
            rc = -1;
    }
    if (rc == 0 && so->meta)
        rc = swift_shard_writer_add_meta(
            so->w, so->ids, so->mask, (uint32_t)len, so->dl, (uint32_t)nd, so->meta, so->meta_len);
    else if (rc == 0 && so->label >= 0)
        rc = swift_shard_writer_add_labeled(
            so->w, so->ids, so->mask, (uint32_t)len, so->dl, (uint32_t)nd, (uint8_t)so->label);
    else if (rc == 0)
        rc = swift_shard_writer_add(so->w, so->ids, so->mask, (uint32_t)len, so->dl, (uint32_t)nd);
    return rc;
}

/* Write the packed samples as shards under so->dir; counts the tokens and trained tokens. */
static int write_samples(struct shard_out *so, const struct pp_store *s, const uint64_t *order,
                         const uint64_t *start, uint64_t nsamples, uint64_t *tokens,
                         uint64_t *trained)
{
    int rc = 0;
    for (uint64_t k = 0; rc == 0 && k < nsamples; k++) {
        uint64_t len = 0, nd = 0;
        for (uint64_t j = start[k]; j < start[k + 1]; j++)
            len += s->off[order[j] + 1] - s->off[order[j]];
        if (grow(so, len, 2 * (start[k + 1] - start[k])) < 0)
            return -1;
        uint64_t p = 0;
        for (uint64_t j = start[k]; j < start[k + 1]; j++) {
            uint64_t d = order[j], a = s->off[d], l = s->off[d + 1] - a;
            memcpy(so->ids + p, s->ids + a, l * sizeof(uint32_t));
            memcpy(so->mask + p, s->mask + a, l);
            if (s->n0[d]) { /* a pair: chosen, rejected */
                so->dl[nd++] = s->n0[d];
                so->dl[nd++] = (uint32_t)(l - s->n0[d]);
            } else
                so->dl[nd++] = (uint32_t)l;
            *trained += s->trained[d];
            p += l;
        }
        so->label = s->kind == SWIFT_KIND_KTO ? s->label[order[start[k]]] : -1;
        so->meta = NULL;
        if (s->kind == SWIFT_KIND_PROMPTS) { /* one document a sample */
            uint64_t d = order[start[k]], a = s->meta_off[d];
            so->meta = s->meta + a;
            so->meta_len = (uint32_t)(s->meta_off[d + 1] - a);
        }
        if (s->images) { /* its images' cache keys, in token order */
            so->meta_len = (uint32_t)swift_pp_sample_images(
                s, order, start[k], start[k + 1], &so->imgbuf, &so->imgcap);
            so->meta = so->imgbuf;
            for (uint32_t i = 0; i < so->meta_len; i++)
                so->image_refs += so->imgbuf[i] == '"';
        }
        rc = put_sample(so, len, nd);
        *tokens += len;
    }
    if (rc == 0)
        rc = close_shard(so);
    return rc;
}

/* The index's description of how the split was made. */
static void describe(struct swift_shard_index *ix, const struct swift_preprocess_opts *o,
                     const struct swift_tokenizer *tok, const struct swift_template *tpl,
                     const struct pp_stats *st, const char *split, const double lenstats[4],
                     const struct pp_split *res, int s_kind)
{
    static const char *const pack_names[] = {"none", "binpack", "sequential"};
    static const char *const trunc_names[] = {"delete", "left", "right", "split"};
    ix->tokenizer = swift_xstrdup(o->tokenizer);
    ix->tokenizer_sha256 = swift_xstrdup(swift_tokenizer_sha256(tok));
    ix->template_name = swift_xstrdup(swift_template_name(tpl));
    /* pairs and KTO rows train their final response only, whatever --loss says; prompts train
     * nothing ("loss": null) */
    if (s_kind != SWIFT_KIND_PROMPTS)
        ix->loss = swift_xstrdup(
            swift_loss_name(s_kind != SWIFT_KIND_SFT ? SWIFT_LOSS_LAST_ROUND : o->loss));
    ix->truncation = swift_xstrdup(trunc_names[o->truncation]);
    ix->packing = swift_xstrdup(pack_names[o->packing]);
    ix->split = swift_xstrdup(split);
    if (s_kind != SWIFT_KIND_SFT)
        ix->kind = swift_xstrdup(swift_row_kind_name(s_kind));
    ix->max_length = (uint64_t)o->max_length;
    ix->vocab_size = swift_tokenizer_vocab_size(tok);
    ix->seed = o->seed;
    ix->samples = res->samples;
    ix->documents = res->docs;
    ix->dropped = st->dropped + st->invalid;
    ix->truncated = st->truncated;
    ix->tokens = res->tokens;
    ix->trained_tokens = res->trained;
    ix->packing_efficiency = res->efficiency;
    ix->len_mean = lenstats[0];
    ix->len_std = lenstats[1];
    ix->len_min = (uint64_t)lenstats[2];
    ix->len_max = (uint64_t)lenstats[3];
}

int swift_pp_write_split(const struct swift_preprocess_opts *o, const struct swift_tokenizer *tok,
                         const struct swift_template *tpl, const struct pp_store *s,
                         const struct pp_stats *st, const uint64_t *docs, uint64_t n,
                         const char *dir, const char *split, const double lenstats[4],
                         struct pp_split *res)
{
    uint64_t *order = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *start = swift_xmalloc((n + 1) * sizeof(uint64_t));
    int64_t t0 = swift_trace_now();
    uint64_t nsamples = 0;
    swift_pp_pack(s, o->packing, (uint64_t)o->max_length, docs, n, order, start, &nsamples);
    swift_trace_span("pack",
                     "pack",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_S("split", split),
                                           SWIFT_TARG_I("docs", n),
                                           SWIFT_TARG_I("samples", nsamples)},
                     3);
    t0 = swift_trace_now();
    struct swift_shard_index ix;
    swift_shard_index_init(&ix);
    struct shard_out so = {.dir = dir, .shard_tokens = o->shard_tokens, .ix = &ix};
    uint64_t tokens = 0, trained = 0;
    int rc = write_samples(&so, s, order, start, nsamples, &tokens, &trained);
    swift_shard_writer_free(so.w);
    free(so.imgbuf);
    free(so.ids);
    free(so.mask);
    free(so.dl);
    free(order);
    free(start);
    res->samples = nsamples;
    res->docs = s->kind == SWIFT_KIND_PAIRS ? 2 * n : n;
    res->tokens = tokens;
    res->trained = trained;
    res->efficiency = o->packing != SWIFT_PACK_NONE && nsamples
                          ? (double)tokens / ((double)nsamples * (double)o->max_length)
                          : 0.0;
    if (rc == 0) {
        describe(&ix, o, tok, tpl, st, split, lenstats, res, s->kind);
        if (s->images) { /* the cache is the top directory's images/ (docs/formats.md) */
            ix.image_cache = swift_xstrdup(strcmp(split, "val") ? "images" : "../images");
            ix.image_refs = (so.image_refs - 2 * nsamples) / 2; /* minus the "images" keys */
            ix.image_min_pixels = o->min_pixels ? o->min_pixels : SWIFT_VL_MIN_PIXELS;
            ix.image_max_pixels = o->max_pixels ? o->max_pixels : SWIFT_VL_MAX_PIXELS;
        }
        rc = swift_shard_index_write(&ix, dir);
    }
    swift_shard_index_release(&ix);
    swift_trace_span(
        "io",
        "write_shards",
        t0,
        swift_trace_now(),
        (struct swift_targ[]){SWIFT_TARG_S("split", split), SWIFT_TARG_I("tokens", tokens)},
        2);
    return rc;
}
