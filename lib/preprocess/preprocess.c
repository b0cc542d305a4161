/* preprocess — swift-preprocess's pipeline (see preprocess.h). */
#include "lib/preprocess/preprocess.h"

#include "lib/preprocess/dataset.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/pool.h"
#include "lib/formats/shard.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/core/trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/banned.h"

#define BATCH_ROWS 4096
#define BATCH_BYTES ((size_t)16 << 20)
#define CHUNK_ROWS 32
#define MAX_DOCS ((uint64_t)1 << 32)
#define MAX_STORE_TOKENS ((uint64_t)1 << 36)
#define ERR_LEN 512
#define NBAD 5

struct item {
    struct swift_row row;
    const char *file;
    uint32_t *ids;
    uint8_t *mask;
    uint32_t n;
    uint64_t trained;
    char *text; /* render: rendered text; decode: decoded text */
    size_t textlen;
    int bad;
    char err[ERR_LEN];
};

struct worker {
    struct swift_tok_state *st;
    struct swift_encoded enc;
    struct swift_conv conv;
    struct swift_tokens tk;
};

struct ctx {
    const struct swift_preprocess_opts *o;
    const struct swift_tokenizer *tok;
    const struct swift_template *tpl;
    struct swift_columns cols;
    struct worker *w;
    int nw;
    struct item *items;
    size_t nitems;
};

/* ---- per-row work (runs on pool workers) ---- */
static int copy_out(struct item *it, const uint32_t *ids, const uint8_t *mask, size_t n)
{
    if (n > UINT32_MAX) {
        snprintf(it->err, ERR_LEN, "sample of %zu tokens is too long", n);
        return -1;
    }
    it->ids = malloc((n ? n : 1) * sizeof(uint32_t));
    it->mask = mask ? malloc(n ? n : 1) : NULL;
    if (!it->ids || (mask && !it->mask)) {
        snprintf(it->err, ERR_LEN, "out of memory");
        return -1;
    }
    memcpy(it->ids, ids, n * sizeof(uint32_t));
    if (mask)
        memcpy(it->mask, mask, n);
    it->n = (uint32_t)n;
    return 0;
}

static int do_sample(struct ctx *c, struct worker *w, struct item *it)
{
    json_t *obj, *owned = NULL;
    if (swift_row_parse(&it->row, &obj, it->err, ERR_LEN) < 0)
        return -1;
    int rc = swift_row_to_conv(obj, &c->cols, c->o->system, &w->conv, &owned, it->err, ERR_LEN);
    if (rc == 0)
        rc = swift_template_encode(
            c->tpl, w->st, c->tok, &w->conv, c->o->loss, &w->enc, it->err, ERR_LEN);
    if (rc == 0)
        rc = copy_out(it, w->enc.tok.ids, w->enc.mask, w->enc.tok.n);
    if (rc == 0) {
        it->trained = w->enc.trained;
        if (c->o->mode == SWIFT_PP_RENDER) {
            it->text = malloc(w->enc.len + 1);
            if (it->text) {
                memcpy(it->text, w->enc.text, w->enc.len + 1);
                it->textlen = w->enc.len;
            }
        }
    }
    json_decref(owned);
    json_decref(obj);
    return rc;
}

static int do_encode(struct ctx *c, struct worker *w, struct item *it)
{
    json_t *v;
    json_error_t je;
    v = json_loadb(it->row.text, it->row.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
        snprintf(it->err, ERR_LEN, "invalid JSON: %s", je.text);
        return -1;
    }
    json_t *s = json_is_object(v) ? json_object_get(v, "text") : v;
    if (!json_is_string(s)) {
        json_decref(v);
        snprintf(it->err, ERR_LEN, "expected a JSON string or {\"text\": string}");
        return -1;
    }
    int flags = c->o->raw ? 0 : SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL;
    w->tk.n = 0;
    int rc =
        swift_tokenizer_encode(w->st, json_string_value(s), json_string_length(s), flags, &w->tk);
    if (rc < 0)
        snprintf(it->err, ERR_LEN, "cannot tokenize");
    else
        rc = copy_out(it, w->tk.ids, NULL, w->tk.n);
    json_decref(v);
    return rc;
}

static int do_decode(struct ctx *c, struct worker *w, struct item *it)
{
    (void)w;
    json_error_t je;
    json_t *v = json_loadb(it->row.text, it->row.len, JSON_DECODE_ANY, &je);
    if (!v) {
        snprintf(it->err, ERR_LEN, "invalid JSON: %s", je.text);
        return -1;
    }
    json_t *a = json_is_object(v) ? json_object_get(v, "ids") : v;
    if (!json_is_array(a)) {
        json_decref(v);
        snprintf(it->err, ERR_LEN, "expected a JSON array of ids or {\"ids\": [...]}");
        return -1;
    }
    size_t n = json_array_size(a);
    uint32_t *ids = malloc((n ? n : 1) * sizeof(uint32_t));
    int rc = ids ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= swift_tokenizer_vocab_size(c->tok)) {
            snprintf(it->err, ERR_LEN, "ids[%zu] is not a token id of this tokenizer", i);
            rc = -1;
        } else
            ids[i] = (uint32_t)json_integer_value(x);
    }
    if (rc == 0 && swift_tokenizer_decode(c->tok,
                                          ids,
                                          n,
                                          c->o->skip_special ? SWIFT_TOK_SKIP_SPECIAL : 0,
                                          &it->text,
                                          &it->textlen) < 0) {
        snprintf(it->err, ERR_LEN, "cannot decode");
        rc = -1;
    }
    free(ids);
    json_decref(v);
    return rc;
}

static void work_chunk(void *vctx, long chunk, int worker)
{
    struct ctx *c = vctx;
    struct worker *w = &c->w[worker];
    int64_t t0 = swift_trace_now();
    size_t lo = (size_t)chunk * CHUNK_ROWS, hi = lo + CHUNK_ROWS;
    if (hi > c->nitems)
        hi = c->nitems;
    uint64_t tokens = 0;
    for (size_t i = lo; i < hi; i++) {
        struct item *it = &c->items[i];
        int rc;
        if (c->o->mode == SWIFT_PP_ENCODE)
            rc = do_encode(c, w, it);
        else if (c->o->mode == SWIFT_PP_DECODE)
            rc = do_decode(c, w, it);
        else
            rc = do_sample(c, w, it);
        it->bad = rc < 0;
        tokens += it->n;
    }
    if (swift_trace_enabled())
        swift_trace_span(
            "tokenize",
            "tokenize_batch",
            t0,
            swift_trace_now(),
            (struct swift_targ[]){SWIFT_TARG_I("rows", hi - lo), SWIFT_TARG_I("tokens", tokens)},
            2);
}

/* ---- the token store (build mode) ---- */
struct store {
    uint32_t *ids;
    uint8_t *mask;
    uint64_t ntok, cap;
    uint64_t *off; /* ndocs + 1 */
    uint64_t *trained;
    uint64_t ndocs, capd;
};

static int store_add(struct store *s, const uint32_t *ids, const uint8_t *mask, uint64_t n)
{
    if (s->ntok + n > s->cap) {
        uint64_t nc = s->cap ? s->cap : 1 << 20;
        while (nc < s->ntok + n)
            nc *= 2;
        if (nc > MAX_STORE_TOKENS)
            return swift_error("more than %" PRIu64 " tokens", MAX_STORE_TOKENS);
        uint32_t *a = realloc(s->ids, nc * sizeof(uint32_t));
        if (a)
            s->ids = a;
        uint8_t *b = realloc(s->mask, nc);
        if (b)
            s->mask = b;
        if (!a || !b)
            return swift_error("out of memory");
        s->cap = nc;
    }
    if (s->ndocs + 2 > s->capd) {
        uint64_t nc = s->capd ? 2 * s->capd : 4096;
        if (nc > MAX_DOCS)
            return swift_error("more than %" PRIu64 " documents", MAX_DOCS);
        uint64_t *o = realloc(s->off, nc * sizeof(uint64_t));
        if (o)
            s->off = o;
        uint64_t *t = realloc(s->trained, nc * sizeof(uint64_t));
        if (t)
            s->trained = t;
        if (!o || !t)
            return swift_error("out of memory");
        if (s->capd == 0)
            s->off[0] = 0;
        s->capd = nc;
    }
    memcpy(s->ids + s->ntok, ids, n * sizeof(uint32_t));
    memcpy(s->mask + s->ntok, mask, n);
    uint64_t tr = 0;
    for (uint64_t i = 0; i < n; i++)
        tr += mask[i];
    s->trained[s->ndocs] = tr;
    s->ntok += n;
    s->ndocs++;
    s->off[s->ndocs] = s->ntok;
    return 0;
}

static void store_free(struct store *s)
{
    free(s->ids);
    free(s->mask);
    free(s->off);
    free(s->trained);
}

struct stats {
    uint64_t rows, invalid, dropped, truncated;
    char bad[NBAD][600];
    int nbad;
};

/* Truncate per --truncation and add to the store. */
static int add_doc(const struct swift_preprocess_opts *o, struct store *s, struct stats *st,
                   const struct item *it)
{
    uint64_t n = it->n, max = (uint64_t)o->max_length;
    if (n == 0)
        return 0;
    if (n <= max)
        return store_add(s, it->ids, it->mask, n);
    switch (o->truncation) {
    case SWIFT_TRUNC_DELETE:
        st->dropped++;
        return 0;
    case SWIFT_TRUNC_LEFT:
        st->truncated++;
        return store_add(s, it->ids + (n - max), it->mask + (n - max), max);
    case SWIFT_TRUNC_RIGHT:
        st->truncated++;
        return store_add(s, it->ids, it->mask, max);
    default: /* split */
        st->truncated++;
        for (uint64_t a = 0; a < n; a += max)
            if (store_add(s, it->ids + a, it->mask + a, n - a < max ? n - a : max) < 0)
                return -1;
        return 0;
    }
}

/* ---- output of the line tools ---- */
static void put_ids(FILE *fp, const uint32_t *ids, uint32_t n)
{
    char buf[16];
    fputc('[', fp);
    for (uint32_t i = 0; i < n; i++) {
        int k = 0;
        uint32_t v = ids[i];
        do {
            buf[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (i)
            fputc(',', fp);
        while (k)
            fputc(buf[--k], fp);
    }
    fputc(']', fp);
}

static void emit_line(const struct swift_preprocess_opts *o, const struct item *it)
{
    if (it->bad) {
        fputs("null\n", stdout);
        return;
    }
    if (o->mode == SWIFT_PP_ENCODE) {
        put_ids(stdout, it->ids, it->n);
        fputc('\n', stdout);
    } else if (o->mode == SWIFT_PP_DECODE) {
        json_t *s = json_stringn(it->text, it->textlen);
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        fputs(d ? d : "null", stdout);
        fputc('\n', stdout);
        free(d);
        json_decref(s);
    } else {
        json_t *s = json_stringn(it->text ? it->text : "", it->textlen);
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        fputs("{\"text\":", stdout);
        fputs(d ? d : "null", stdout);
        free(d);
        json_decref(s);
        fputs(",\"ids\":", stdout);
        put_ids(stdout, it->ids, it->n);
        fputs(",\"mask\":[", stdout);
        for (uint32_t i = 0; i < it->n; i++) {
            if (i)
                fputc(',', stdout);
            fputc('0' + it->mask[i], stdout);
        }
        fprintf(stdout, "],\"tokens\":%u,\"trained_tokens\":%" PRIu64 "}\n", it->n, it->trained);
    }
}

/* ---- split, pack, write ---- */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const uint64_t *pack_lens; /* for qsort: set before sorting, single-threaded */
static int cmp_len_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (pack_lens[x] != pack_lens[y])
        return pack_lens[x] > pack_lens[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Pack docs[0..n) (doc ids into the store) into samples. Output: order[] of doc ids, and
 * start[0..*nsamples] offsets into order. Returns 0 or -1. */
static int pack(const struct store *s, int mode, uint64_t max, const uint64_t *docs, uint64_t n,
                uint64_t *order, uint64_t *start, uint64_t *nsamples)
{
    if (mode == SWIFT_PACK_NONE) {
        for (uint64_t i = 0; i < n; i++) {
            order[i] = docs[i];
            start[i] = i;
        }
        start[n] = n;
        *nsamples = n;
        return 0;
    }
    uint64_t *len = malloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *bin = malloc((n ? n : 1) * sizeof(uint64_t)); /* bin of the i-th placed doc */
    uint64_t *seq = malloc((n ? n : 1) * sizeof(uint64_t)); /* placement order (positions) */
    if (!len || !bin || !seq) {
        free(len);
        free(bin);
        free(seq);
        return swift_error("out of memory");
    }
    for (uint64_t i = 0; i < n; i++) {
        len[i] = s->off[docs[i] + 1] - s->off[docs[i]];
        seq[i] = i;
    }
    uint64_t nbins = 0;
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
    } else {
        /* best-fit decreasing: bins bucketed by remaining capacity, a bitset of non-empty
         * buckets to find the smallest remaining capacity >= len */
        pack_lens = len;
        qsort(seq, n, sizeof(uint64_t), cmp_len_desc);
        uint64_t words = max / 64 + 1;
        uint64_t *bits = calloc(words, sizeof(uint64_t));
        uint64_t *head = malloc((max + 1) * sizeof(uint64_t));
        uint64_t *next = malloc((n ? n : 1) * sizeof(uint64_t));
        uint64_t *rem = malloc((n ? n : 1) * sizeof(uint64_t));
        if (!bits || !head || !next || !rem) {
            free(bits);
            free(head);
            free(next);
            free(rem);
            free(len);
            free(bin);
            free(seq);
            return swift_error("out of memory");
        }
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
                b = nbins++;
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
    /* group by bin, keeping placement order inside a bin */
    for (uint64_t b = 0; b <= nbins; b++)
        start[b] = 0;
    for (uint64_t i = 0; i < n; i++)
        start[bin[i] + 1]++;
    for (uint64_t b = 0; b < nbins; b++)
        start[b + 1] += start[b];
    uint64_t *fillp = malloc((nbins + 1) * sizeof(uint64_t));
    if (!fillp) {
        free(len);
        free(bin);
        free(seq);
        return swift_error("out of memory");
    }
    memcpy(fillp, start, (nbins + 1) * sizeof(uint64_t));
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = seq[k];
        order[fillp[bin[i]]++] = docs[i];
    }
    free(fillp);
    free(len);
    free(bin);
    free(seq);
    *nsamples = nbins;
    return 0;
}

struct split_out {
    uint64_t samples, docs, tokens, trained;
    double efficiency;
};

static int write_split(const struct swift_preprocess_opts *o, const struct swift_tokenizer *tok,
                       const struct swift_template *tpl, const struct store *s,
                       const struct stats *st, const uint64_t *docs, uint64_t n, const char *dir,
                       const char *split, const double lenstats[4], struct split_out *res)
{
    static const char *const pack_names[] = {"none", "binpack", "sequential"};
    static const char *const trunc_names[] = {"delete", "left", "right", "split"};
    uint64_t *order = malloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *start = malloc((n + 1) * sizeof(uint64_t));
    if (!order || !start) {
        free(order);
        free(start);
        return swift_error("out of memory");
    }
    int64_t t0 = swift_trace_now();
    uint64_t nsamples = 0;
    int rc = pack(s, o->packing, (uint64_t)o->max_length, docs, n, order, start, &nsamples);
    swift_trace_span("pack",
                     "pack",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_S("split", split),
                                           SWIFT_TARG_I("docs", n),
                                           SWIFT_TARG_I("samples", rc == 0 ? nsamples : 0)},
                     3);
    if (rc < 0) {
        free(order);
        free(start);
        return -1;
    }
    t0 = swift_trace_now();
    struct swift_shard_index ix;
    swift_shard_index_init(&ix);
    uint32_t *ids = NULL, *dl = NULL;
    uint8_t *mask = NULL;
    uint64_t cap = 0, capd = 0;
    struct swift_shard_writer *w = NULL;
    uint64_t tokens = 0, trained = 0;
    int shard_no = 0;
    char name[64];
    for (uint64_t k = 0; rc == 0 && k < nsamples; k++) {
        uint64_t len = 0, nd = start[k + 1] - start[k];
        for (uint64_t j = start[k]; j < start[k + 1]; j++)
            len += s->off[order[j] + 1] - s->off[order[j]];
        if (len > cap) {
            cap = len;
            uint32_t *a = realloc(ids, cap * sizeof(uint32_t));
            if (a)
                ids = a;
            uint8_t *b = realloc(mask, cap);
            if (b)
                mask = b;
            if (!a || !b) {
                rc = swift_error("out of memory");
                break;
            }
        }
        if (nd > capd) {
            capd = nd;
            uint32_t *d = realloc(dl, capd * sizeof(uint32_t));
            if (!d) {
                rc = swift_error("out of memory");
                break;
            }
            dl = d;
        }
        uint64_t p = 0;
        for (uint64_t j = start[k]; j < start[k + 1]; j++) {
            uint64_t d = order[j], a = s->off[d], l = s->off[d + 1] - a;
            memcpy(ids + p, s->ids + a, l * sizeof(uint32_t));
            memcpy(mask + p, s->mask + a, l);
            dl[j - start[k]] = (uint32_t)l;
            trained += s->trained[d];
            p += l;
        }
        if (w && swift_shard_writer_tokens(w) > 0 &&
            swift_shard_writer_tokens(w) + len > o->shard_tokens) {
            uint32_t crc;
            uint64_t ws = swift_shard_writer_samples(w), wt = swift_shard_writer_tokens(w);
            rc = swift_shard_writer_commit(w, &crc);
            w = NULL;
            if (rc == 0)
                rc = swift_shard_index_add(&ix, name, ws, wt, crc);
        }
        if (rc == 0 && !w) {
            snprintf(name, sizeof(name), "shard-%05d.bin", shard_no++);
            char *path = swift_path_join(dir, name);
            w = swift_shard_writer_new(path);
            free(path);
            if (!w)
                rc = -1;
        }
        if (rc == 0)
            rc = swift_shard_writer_add(w, ids, mask, (uint32_t)len, dl, (uint32_t)nd);
        tokens += len;
    }
    if (rc == 0 && w) {
        uint32_t crc;
        uint64_t ws = swift_shard_writer_samples(w), wt = swift_shard_writer_tokens(w);
        rc = swift_shard_writer_commit(w, &crc);
        w = NULL;
        if (rc == 0)
            rc = swift_shard_index_add(&ix, name, ws, wt, crc);
    }
    swift_shard_writer_free(w);
    free(ids);
    free(mask);
    free(dl);
    free(order);
    free(start);
    res->samples = nsamples;
    res->docs = n;
    res->tokens = tokens;
    res->trained = trained;
    res->efficiency = o->packing != SWIFT_PACK_NONE && nsamples
                          ? (double)tokens / ((double)nsamples * (double)o->max_length)
                          : 0.0;
    if (rc == 0) {
        ix.tokenizer = strdup(o->tokenizer);
        ix.tokenizer_sha256 = strdup(swift_tokenizer_sha256(tok));
        ix.template_name = strdup(swift_template_name(tpl));
        ix.loss = strdup(swift_loss_name(o->loss));
        ix.truncation = strdup(trunc_names[o->truncation]);
        ix.packing = strdup(pack_names[o->packing]);
        ix.split = strdup(split);
        ix.max_length = (uint64_t)o->max_length;
        ix.vocab_size = swift_tokenizer_vocab_size(tok);
        ix.seed = o->seed;
        ix.samples = nsamples;
        ix.documents = n;
        ix.dropped = st->dropped + st->invalid;
        ix.truncated = st->truncated;
        ix.tokens = tokens;
        ix.trained_tokens = trained;
        ix.packing_efficiency = res->efficiency;
        ix.len_mean = lenstats[0];
        ix.len_std = lenstats[1];
        ix.len_min = (uint64_t)lenstats[2];
        ix.len_max = (uint64_t)lenstats[3];
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

/* ---- driver ---- */
static void free_items(struct item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        swift_row_release(&items[i].row);
        free(items[i].ids);
        free(items[i].mask);
        free(items[i].text);
    }
}

static int take_bad(const struct swift_preprocess_opts *o, struct stats *st, const struct item *it)
{
    if (!o->skip_invalid)
        return swift_error_at(it->file, it->row.line, "%s", it->err);
    st->invalid++;
    if (st->nbad < NBAD)
        snprintf(
            st->bad[st->nbad++], sizeof(st->bad[0]), "%s:%ld: %s", it->file, it->row.line, it->err);
    return 0;
}

int swift_preprocess_run(const struct swift_preprocess_opts *o)
{
    int64_t t_start = swift_trace_now();
    struct ctx c = {.o = o};
    struct swift_tokenizer *tok = NULL;
    int64_t t0 = swift_trace_now();
    if (swift_tokenizer_load(&tok, o->tokenizer) < 0)
        return SWIFT_EXIT_FAIL;
    swift_trace_span("io", "load_tokenizer", t0, swift_trace_now(), NULL, 0);
    c.tok = tok;
    int rc = 0;
    char *tmpdir = NULL;
    if (o->mode == SWIFT_PP_BUILD || o->mode == SWIFT_PP_RENDER) {
        const char *name = o->template_name;
        if (!name) {
            name = swift_template_guess(tok);
            if (!name) {
                swift_error("cannot tell the chat template from '%s'; use --template (%s)",
                            o->tokenizer,
                            swift_template_names());
                swift_tokenizer_free(tok);
                return SWIFT_EXIT_FAIL;
            }
        }
        c.tpl = swift_template_find(name);
        if (!c.tpl) {
            swift_error("unknown template '%s' (%s)", name, swift_template_names());
            swift_tokenizer_free(tok);
            return SWIFT_EXIT_FAIL;
        }
        if (swift_columns_parse(&c.cols, o->columns) < 0) {
            swift_tokenizer_free(tok);
            return SWIFT_EXIT_FAIL;
        }
    }
    if (o->mode == SWIFT_PP_BUILD) {
        struct stat sb;
        if (stat(o->output, &sb) == 0 && !o->force) {
            swift_error("'%s' exists; use --force to replace it", o->output);
            swift_columns_release(&c.cols);
            swift_tokenizer_free(tok);
            return SWIFT_EXIT_FAIL;
        }
    }
    struct swift_pool *pool = swift_pool_new(o->threads);
    c.nw = swift_pool_size(pool);
    c.w = calloc((size_t)c.nw, sizeof(*c.w));
    c.items = calloc(BATCH_ROWS, sizeof(*c.items));
    if (!c.w || !c.items)
        rc = swift_error("out of memory");
    for (int i = 0; rc == 0 && i < c.nw; i++)
        if (!(c.w[i].st = swift_tok_state_new(tok)))
            rc = -1;

    struct store s = {0};
    struct stats st = {0};
    uint64_t in_bytes = 0, all_tokens = 0;
    int ninputs = o->ninputs ? o->ninputs : 1;
    const char *fmt =
        (o->mode == SWIFT_PP_ENCODE || o->mode == SWIFT_PP_DECODE) ? "jsonl" : o->format;
    for (int fi = 0; rc == 0 && fi < ninputs; fi++) {
        const char *path = o->ninputs ? o->inputs[fi] : "-";
        struct swift_dataset *ds;
        if (swift_dataset_open(&ds, path, fmt) < 0) {
            rc = -1;
            break;
        }
        const char *fname = swift_dataset_name(ds);
        int more = 1;
        while (rc == 0 && more) {
            t0 = swift_trace_now();
            size_t n = 0, bytes = 0;
            while (n < BATCH_ROWS && bytes < BATCH_BYTES) {
                struct item *it = &c.items[n];
                memset(it, 0, sizeof(*it));
                int r = swift_dataset_next(ds, &it->row);
                if (r < 0) {
                    rc = -1;
                    break;
                }
                if (r == 0) {
                    more = 0;
                    break;
                }
                it->file = fname;
                bytes += it->row.len;
                if (it->row.obj && !it->row.len)
                    bytes += json_string_length(json_object_get(it->row.obj, "text"));
                n++;
            }
            in_bytes += bytes;
            swift_trace_span(
                "io",
                "read",
                t0,
                swift_trace_now(),
                (struct swift_targ[]){SWIFT_TARG_I("rows", n), SWIFT_TARG_I("bytes", bytes)},
                2);
            if (rc < 0) {
                free_items(c.items, n + 1);
                break;
            }
            c.nitems = n;
            swift_pool_for(pool, (long)((n + CHUNK_ROWS - 1) / CHUNK_ROWS), 1, work_chunk, &c);
            for (size_t i = 0; rc == 0 && i < n; i++) {
                struct item *it = &c.items[i];
                st.rows++;
                all_tokens += it->n;
                if (o->mode != SWIFT_PP_BUILD) {
                    if (it->bad && take_bad(o, &st, it) < 0)
                        rc = -1;
                    else if (!it->bad || o->mode != SWIFT_PP_RENDER)
                        emit_line(o, it);
                    continue;
                }
                if (it->bad) {
                    if (take_bad(o, &st, it) < 0)
                        rc = -1;
                    continue;
                }
                if (add_doc(o, &s, &st, it) < 0)
                    rc = -1;
            }
            free_items(c.items, n);
            if (swift_trace_enabled())
                swift_trace_counter("tokens", (double)all_tokens);
        }
        swift_dataset_close(ds);
    }

    double secs = (double)(swift_trace_now() - t_start) / 1e9;
    if (rc == 0 && o->mode == SWIFT_PP_BUILD) {
        /* length statistics over the stored documents */
        double lenstats[4] = {0, 0, 0, 0};
        uint64_t mn = UINT64_MAX, mx = 0;
        double sum = 0, sq = 0;
        for (uint64_t d = 0; d < s.ndocs; d++) {
            uint64_t l = s.off[d + 1] - s.off[d];
            sum += (double)l;
            sq += (double)l * (double)l;
            mn = l < mn ? l : mn;
            mx = l > mx ? l : mx;
        }
        if (s.ndocs) {
            lenstats[0] = sum / (double)s.ndocs;
            double var = sq / (double)s.ndocs - lenstats[0] * lenstats[0];
            lenstats[1] = var > 0 ? sqrt(var) : 0;
            lenstats[2] = (double)mn;
            lenstats[3] = (double)mx;
        }
        /* train/val split and order */
        uint64_t n = s.ndocs;
        uint64_t *perm = malloc((n ? n : 1) * sizeof(uint64_t));
        uint8_t *is_val = calloc(n ? n : 1, 1);
        uint64_t *train = malloc((n ? n : 1) * sizeof(uint64_t));
        uint64_t *val = malloc((n ? n : 1) * sizeof(uint64_t));
        uint64_t ntrain = 0, nval = 0;
        if (!perm || !is_val || !train || !val)
            rc = swift_error("out of memory");
        if (rc == 0) {
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
                    val[nval++] = d;
                else
                    train[ntrain++] = d;
            }
        }
        struct split_out tr = {0}, va = {0};
        if (rc == 0 && swift_atomic_dir_begin(o->output, &tmpdir) < 0)
            rc = -1;
        if (rc == 0)
            rc = write_split(o, tok, c.tpl, &s, &st, train, ntrain, tmpdir, "train", lenstats, &tr);
        if (rc == 0 && nval) {
            char *vdir = swift_path_join(tmpdir, "val");
            rc = swift_mkdirs(vdir, 0755);
            if (rc == 0)
                rc = write_split(o, tok, c.tpl, &s, &st, val, nval, vdir, "val", lenstats, &va);
            free(vdir);
        }
        if (rc == 0) {
            rc = swift_atomic_dir_commit(tmpdir, o->output, o->force);
            if (rc == 0)
                tmpdir = NULL;
        }
        free(perm);
        free(is_val);
        free(train);
        free(val);
        secs = (double)(swift_trace_now() - t_start) / 1e9;
        if (rc == 0) {
            static const char *const pack_names[] = {"none", "binpack", "sequential"};
            uint64_t tokens = tr.tokens + va.tokens;
            swift_info("%" PRIu64 " rows: %" PRIu64 " documents, %" PRIu64 " invalid, %" PRIu64
                       " dropped, %" PRIu64 " truncated",
                       st.rows,
                       s.ndocs,
                       st.invalid,
                       st.dropped,
                       st.truncated);
            swift_info("Dataset Token Length: %.1f\xc2\xb1%.1f, min=%.0f, max=%.0f",
                       lenstats[0],
                       lenstats[1],
                       lenstats[2],
                       lenstats[3]);
            swift_info("train: %" PRIu64 " samples, %" PRIu64 " tokens (%" PRIu64
                       " trained); val: %" PRIu64 " samples; packing %s%s",
                       tr.samples,
                       tr.tokens,
                       tr.trained,
                       va.samples,
                       pack_names[o->packing],
                       o->packing ? "" : "");
            if (o->packing)
                swift_info("packing efficiency %.2f%%", 100.0 * tr.efficiency);
            swift_info("%.2f s, %.0f tokens/s, %.1f MB/s with %d threads",
                       secs,
                       secs > 0 ? (double)all_tokens / secs : 0.0,
                       secs > 0 ? (double)in_bytes / secs / 1e6 : 0.0,
                       c.nw);
            for (int i = 0; i < st.nbad; i++)
                swift_info("skipped %s", st.bad[i]);
            json_t *j = json_pack(
                "{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:{s:f,s:f,s:I,s:I},"
                "s:I,s:I,s:f,s:f,s:I,s:i}",
                "version",
                1,
                "output",
                o->output,
                "template",
                swift_template_name(c.tpl),
                "packing",
                pack_names[o->packing],
                "rows",
                (json_int_t)st.rows,
                "documents",
                (json_int_t)s.ndocs,
                "invalid",
                (json_int_t)st.invalid,
                "dropped",
                (json_int_t)st.dropped,
                "truncated",
                (json_int_t)st.truncated,
                "samples",
                (json_int_t)tr.samples,
                "val_samples",
                (json_int_t)va.samples,
                "tokens",
                (json_int_t)tokens,
                "trained_tokens",
                (json_int_t)(tr.trained + va.trained),
                "packing_efficiency",
                tr.efficiency,
                "length",
                "mean",
                lenstats[0],
                "std",
                lenstats[1],
                "min",
                (json_int_t)lenstats[2],
                "max",
                (json_int_t)lenstats[3],
                "input_bytes",
                (json_int_t)in_bytes,
                "tokenized",
                (json_int_t)all_tokens,
                "seconds",
                secs,
                "tokens_per_s",
                secs > 0 ? (double)all_tokens / secs : 0.0,
                "max_length",
                (json_int_t)o->max_length,
                "threads",
                c.nw);
            if (j && swift_json_print_line(stdout, j) < 0)
                rc = -1;
            json_decref(j);
        }
    } else if (rc == 0) {
        if (st.invalid)
            swift_info("%" PRIu64 " of %" PRIu64 " rows invalid%s",
                       st.invalid,
                       st.rows,
                       st.nbad ? ", first:" : "");
        for (int i = 0; i < st.nbad; i++)
            swift_info("skipped %s", st.bad[i]);
    }
    if (tmpdir)
        swift_atomic_dir_abort(tmpdir);
    for (int i = 0; c.w && i < c.nw; i++) {
        swift_tok_state_free(c.w[i].st);
        swift_encoded_release(&c.w[i].enc);
        free(c.w[i].conv.msg);
        swift_tokens_release(&c.w[i].tk);
    }
    free(c.w);
    free(c.items);
    store_free(&s);
    swift_pool_free(pool);
    swift_columns_release(&c.cols);
    swift_tokenizer_free(tok);
    return rc < 0 ? SWIFT_EXIT_FAIL : SWIFT_EXIT_OK;
}
