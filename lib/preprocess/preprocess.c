/* preprocess — swift-preprocess's pipeline (see preprocess.h). */
#include "lib/preprocess/preprocess.h"

#include "lib/core/alloc.h"
#include "lib/core/record.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/pool.h"
#include "lib/core/progress.h"
#include "lib/core/trace.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/internal.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/preprocess/vision.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/banned.h"

#define BATCH_ROWS 4096
#define BATCH_BYTES ((size_t)16 << 20)
#define CHUNK_ROWS 32
#define ERR_LEN 512

struct item {
    struct swift_row row;
    const char *file;
    uint32_t *ids;
    uint8_t *mask;
    uint32_t n;
    uint64_t trained;
    char *text; /* render: rendered text; decode: decoded text */
    size_t textlen;
    int kind;        /* SWIFT_KIND_* of the row (dataset.h) */
    uint32_t n0;     /* pairs: tokens of the chosen document (ids[0..n0)), the rejected follows */
    uint32_t prompt; /* pairs, kto: the prompt tokens at the start of each document */
    int label;       /* kto */
    char *text1;     /* render of a pair: the rejected side's text */
    size_t textlen1;
    char *meta; /* prompts: the sample's metadata (JSON text) */
    size_t meta_len;
    struct pp_images im; /* SFT: the row's images (mm.c) */
    int bad;
    char err[ERR_LEN];
};

struct worker {
    struct swift_tok_state *st;
    struct swift_encoded enc, enc1; /* enc1: a pair's rejected side */
    struct swift_conv conv, conv1;
    struct swift_tokens tk;
};

struct ctx {
    const struct swift_preprocess_opts *o;
    const struct swift_tokenizer *tok;
    const struct swift_template *tpl;
    struct swift_columns cols;
    struct swift_vl_opts vo; /* images: Qwen2-VL processor settings */
    struct pp_cache cache;   /* images: the cache being filled (build mode) */
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
    it->ids = swift_xmalloc((n ? n : 1) * sizeof(uint32_t));
    it->mask = mask ? swift_xmalloc(n ? n : 1) : NULL;
    memcpy(it->ids, ids, n * sizeof(uint32_t));
    if (mask)
        memcpy(it->mask, mask, n);
    it->n = (uint32_t)n;
    return 0;
}

static char *dup_text(const struct swift_encoded *e, size_t *len)
{
    char *t = swift_xmalloc(e->len + 1);
    memcpy(t, e->text, e->len + 1);
    *len = e->len;
    return t;
}

/* A preference pair or a KTO row: both sides into one item (chosen, then rejected). */
static int do_pref(struct ctx *c, struct worker *w, struct item *it, json_t *obj)
{
    json_t *owned = NULL;
    int pair = it->kind == SWIFT_KIND_PAIRS;
    size_t prompt = 0;
    int rc = swift_row_to_pref(obj,
                               &c->cols,
                               c->o->system,
                               it->kind,
                               &w->conv,
                               &w->conv1,
                               &it->label,
                               &owned,
                               it->err,
                               ERR_LEN);
    w->conv.agent = w->conv1.agent = c->o->agent;
    if (rc == 0)
        rc = swift_template_encode_pair(c->tpl,
                                        w->st,
                                        c->tok,
                                        &w->conv,
                                        pair ? &w->conv1 : NULL,
                                        &w->enc,
                                        &w->enc1,
                                        &prompt,
                                        it->err,
                                        ERR_LEN);
    size_t n0 = w->enc.tok.n, n1 = pair ? w->enc1.tok.n : 0;
    if (rc == 0 && n0 + n1 > UINT32_MAX) {
        snprintf(it->err, ERR_LEN, "pair of %zu tokens is too long", n0 + n1);
        rc = -1;
    }
    if (rc == 0) {
        it->ids = swift_xmalloc((n0 + n1) * sizeof(uint32_t));
        it->mask = swift_xmalloc(n0 + n1);
        memcpy(it->ids, w->enc.tok.ids, n0 * sizeof(uint32_t));
        memcpy(it->mask, w->enc.mask, n0);
        if (n1) {
            memcpy(it->ids + n0, w->enc1.tok.ids, n1 * sizeof(uint32_t));
            memcpy(it->mask + n0, w->enc1.mask, n1);
        }
        it->n = (uint32_t)(n0 + n1);
        it->n0 = (uint32_t)n0;
        it->prompt = (uint32_t)prompt;
        it->trained = w->enc.trained + (pair ? w->enc1.trained : 0);
        if (c->o->mode == SWIFT_PP_RENDER) {
            it->text = dup_text(&w->enc, &it->textlen);
            if (pair)
                it->text1 = dup_text(&w->enc1, &it->textlen1);
        }
    }
    json_decref(owned);
    return rc;
}

/* The row's kind: --kind, or what its fields say (after --columns). */
static int row_kind(struct ctx *c, json_t *obj)
{
    if (c->o->kind >= 0)
        return c->o->kind;
    if (!c->cols.n)
        return swift_row_kind(obj);
    json_t *holder = json_array();
    int k = swift_row_kind(swift_row_rename(obj, &c->cols, holder));
    json_decref(holder);
    return k;
}

static int do_sample(struct ctx *c, struct worker *w, struct item *it)
{
    json_t *obj, *owned = NULL;
    it->kind = -1;
    if (swift_row_parse(&it->row, &obj, it->err, ERR_LEN) < 0)
        return -1;
    it->kind = row_kind(c, obj);
    if (swift_pp_images_unsupported(obj, it->kind, it->err, ERR_LEN) < 0) {
        json_decref(obj);
        return -1;
    }
    if (it->kind == SWIFT_KIND_PAIRS || it->kind == SWIFT_KIND_KTO) {
        int rc = do_pref(c, w, it, obj);
        json_decref(obj);
        return rc;
    }
    int rc;
    if (it->kind == SWIFT_KIND_PROMPTS) {
        rc = swift_row_to_prompt(obj,
                                 &c->cols,
                                 c->o->system,
                                 &w->conv,
                                 &it->meta,
                                 &it->meta_len,
                                 &owned,
                                 it->err,
                                 ERR_LEN);
        w->conv.agent = c->o->agent;
        if (rc == 0)
            rc = swift_template_encode_prompt(
                c->tpl, w->st, c->tok, &w->conv, &w->enc, it->err, ERR_LEN);
    } else {
        rc = swift_row_to_conv(obj, &c->cols, c->o->system, &w->conv, &owned, it->err, ERR_LEN);
        w->conv.agent = c->o->agent;
        json_t *hold = json_array(); /* the conversation's strings with image tokens */
        if (rc == 0)
            rc = swift_pp_row_images(obj,
                                     it->file,
                                     &c->vo,
                                     c->tok,
                                     c->o->mode == SWIFT_PP_BUILD ? &c->cache : NULL,
                                     &w->conv,
                                     hold,
                                     &it->im,
                                     it->err,
                                     ERR_LEN);
        if (rc == 0)
            rc = swift_template_encode(
                c->tpl, w->st, c->tok, &w->conv, c->o->loss, &w->enc, it->err, ERR_LEN);
        json_decref(hold);
    }
    if (rc == 0)
        rc = copy_out(it, w->enc.tok.ids, w->enc.mask, w->enc.tok.n);
    if (rc == 0) {
        it->trained = w->enc.trained;
        if (c->o->mode == SWIFT_PP_RENDER) {
            it->text = swift_xmalloc(w->enc.len + 1);
            memcpy(it->text, w->enc.text, w->enc.len + 1);
            it->textlen = w->enc.len;
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
    uint32_t *ids = swift_xmalloc((n ? n : 1) * sizeof(uint32_t));
    int rc = 0;
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

/* {"text", "ids", "mask", "tokens", "trained_tokens"} of n tokens (without the braces). */
static void put_rendered(const char *text, size_t textlen, const uint32_t *ids, const uint8_t *mask,
                         uint32_t n)
{
    json_t *s = json_stringn(text ? text : "", textlen);
    char *d = json_dumps(s, JSON_ENCODE_ANY);
    fputs("\"text\":", stdout);
    fputs(d ? d : "null", stdout);
    free(d);
    json_decref(s);
    fputs(",\"ids\":", stdout);
    put_ids(stdout, ids, n);
    fputs(",\"mask\":[", stdout);
    uint64_t trained = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            fputc(',', stdout);
        fputc('0' + mask[i], stdout);
        trained += mask[i];
    }
    fprintf(stdout, "],\"tokens\":%u,\"trained_tokens\":%" PRIu64, n, trained);
}

/* --render of a pair: {"kind", "prompt_tokens", "chosen": {...}, "rejected": {...}}; of a KTO
 * row: the SFT record with "kind", "label" and "prompt_tokens". */
static void emit_pref(const struct item *it)
{
    fprintf(stdout, "{\"kind\":\"%s\",", swift_row_kind_name(it->kind));
    if (it->kind == SWIFT_KIND_KTO) {
        put_rendered(it->text, it->textlen, it->ids, it->mask, it->n);
        fprintf(stdout,
                ",\"label\":%s,\"prompt_tokens\":%u}\n",
                it->label ? "true" : "false",
                it->prompt);
        return;
    }
    fprintf(stdout, "\"prompt_tokens\":%u,\"chosen\":{", it->prompt);
    put_rendered(it->text, it->textlen, it->ids, it->mask, it->n0);
    fputs("},\"rejected\":{", stdout);
    put_rendered(it->text1, it->textlen1, it->ids + it->n0, it->mask + it->n0, it->n - it->n0);
    fputs("}}\n", stdout);
}

static void emit_line(const struct swift_preprocess_opts *o, const struct item *it)
{
    if (it->bad) {
        fputs("null\n", stdout);
        return;
    }
    if (o->mode == SWIFT_PP_RENDER && it->kind == SWIFT_KIND_PROMPTS) {
        fputs("{\"kind\":\"prompts\",", stdout); /* the SFT record and the sample's metadata */
        put_rendered(it->text, it->textlen, it->ids, it->mask, it->n);
        fputs(",\"meta\":", stdout);
        fwrite(it->meta, 1, it->meta_len, stdout);
        fputs("}\n", stdout);
        return;
    }
    if (o->mode == SWIFT_PP_RENDER && it->kind != SWIFT_KIND_SFT) {
        emit_pref(it);
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
        fprintf(stdout, "],\"tokens\":%u,\"trained_tokens\":%" PRIu64, it->n, it->trained);
        swift_pp_put_image_spans(stdout, &it->im, it->ids, it->n);
        fputs("}\n", stdout);
    }
}

/* ---- driver ---- */
struct run {
    const struct swift_preprocess_opts *o;
    struct ctx c;
    struct swift_pool *pool;
    struct pp_store s;
    struct pp_stats st;
    uint64_t in_bytes, all_tokens;
    int kind;        /* of the first good row (every row must have it); -1 before */
    char first[600]; /* where that row is, for messages */
    int64_t t_start;
    struct swift_progress prog; /* rows read, on a terminal (building shards only) */
};

static void free_items(struct item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        swift_row_release(&items[i].row);
        free(items[i].ids);
        free(items[i].mask);
        free(items[i].text);
        free(items[i].text1);
        free(items[i].meta);
        swift_pp_images_free(&items[i].im);
    }
}

static int take_bad(const struct swift_preprocess_opts *o, struct pp_stats *st,
                    const struct item *it)
{
    if (!o->skip_invalid)
        return swift_error_at(it->file, it->row.line, "%s", it->err);
    st->invalid++;
    if (st->nbad < PP_NBAD)
        snprintf(
            st->bad[st->nbad++], sizeof(st->bad[0]), "%s:%ld: %s", it->file, it->row.line, it->err);
    return 0;
}

/* The template and columns of build and render modes, and build mode's check of the output. */
static int prepare(const struct swift_preprocess_opts *o, struct ctx *c)
{
    if (o->mode == SWIFT_PP_BUILD || o->mode == SWIFT_PP_RENDER) {
        const char *name = o->template_name;
        if (!name) {
            name = swift_template_guess(c->tok);
            if (!name)
                return swift_error("cannot tell the chat template from '%s'; use --template (%s)",
                                   o->tokenizer,
                                   swift_template_names());
        }
        c->tpl = swift_template_find(name);
        if (!c->tpl)
            return swift_error("unknown template '%s' (%s)", name, swift_template_names());
        if (swift_columns_parse(&c->cols, o->columns) < 0)
            return -1;
    }
    if (o->mode == SWIFT_PP_BUILD) {
        struct stat sb;
        if (stat(o->output, &sb) == 0 && !o->force) {
            swift_error("'%s' exists; use --force to replace it", o->output);
            swift_columns_release(&c->cols);
            return -1;
        }
    }
    return 0;
}

/* The pool, one tokenizer state per worker and the batch of items. */
static int start_workers(struct run *r)
{
    struct ctx *c = &r->c;
    r->pool = swift_pool_new(r->o->threads);
    c->nw = swift_pool_size(r->pool);
    c->w = swift_xcalloc((size_t)c->nw, sizeof(*c->w));
    c->items = swift_xcalloc(BATCH_ROWS, sizeof(*c->items));
    for (int i = 0; i < c->nw; i++)
        if (!(c->w[i].st = swift_tok_state_new(c->tok)))
            return -1;
    return 0;
}

/* Read the next batch of rows into c.items[0..*nrows); *more = 0 at the end of the file. */
static int read_batch(struct run *r, struct swift_dataset *ds, const char *fname, size_t *nrows,
                      int *more)
{
    int64_t t0 = swift_trace_now();
    size_t n = 0, bytes = 0;
    int rc = 0;
    while (n < BATCH_ROWS && bytes < BATCH_BYTES) {
        struct item *it = &r->c.items[n];
        memset(it, 0, sizeof(*it));
        int k = swift_dataset_next(ds, &it->row);
        if (k < 0) {
            rc = -1;
            break;
        }
        if (k == 0) {
            *more = 0;
            break;
        }
        it->file = fname;
        bytes += it->row.len;
        if (it->row.obj && !it->row.len)
            bytes += json_string_length(json_object_get(it->row.obj, "text"));
        n++;
    }
    r->in_bytes += bytes;
    swift_trace_span("io",
                     "read",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("rows", n), SWIFT_TARG_I("bytes", bytes)},
                     2);
    *nrows = n;
    return rc;
}

/* Every row of a run holds the kind of the first good one; pairs and KTO rows are neither
 * packed nor split. A row of another kind becomes a bad row; -1 for options that do not fit. */
static int same_kind(struct run *r, struct item *it)
{
    const struct swift_preprocess_opts *o = r->o;
    if (r->kind < 0) {
        if (it->bad)
            return 0;
        r->kind = it->kind;
        r->s.kind = it->kind;
        snprintf(r->first, sizeof(r->first), "%s:%ld", it->file, it->row.line);
        if (it->kind != SWIFT_KIND_SFT && o->packing != SWIFT_PACK_NONE)
            return swift_error_at(it->file,
                                  it->row.line,
                                  "%s rows are not packed (one per sample); drop --packing",
                                  it->kind == SWIFT_KIND_PAIRS ? "preference"
                                  : it->kind == SWIFT_KIND_KTO ? "KTO"
                                                               : "prompt");
        if (it->kind == SWIFT_KIND_PROMPTS &&
            (o->truncation == SWIFT_TRUNC_RIGHT || o->truncation == SWIFT_TRUNC_SPLIT))
            return swift_error_at(it->file,
                                  it->row.line,
                                  "--truncation %s would cut the generation prompt off a prompt "
                                  "(use delete or left)",
                                  o->truncation == SWIFT_TRUNC_RIGHT ? "right" : "split");
        if (it->kind != SWIFT_KIND_SFT && o->truncation == SWIFT_TRUNC_SPLIT)
            return swift_error_at(it->file,
                                  it->row.line,
                                  "--truncation split cannot cut a preference pair or a KTO row "
                                  "(use delete, left or right)");
        return 0;
    }
    if (it->kind >= 0 && it->kind != r->kind) {
        static const char *const what[] = {
            "an SFT row",
            "not a preference pair (no \"chosen\" and \"rejected\", or \"rejected_response\")",
            "not a KTO row (no boolean \"label\")",
            "not a prompt"};
        snprintf(it->err,
                 ERR_LEN,
                 "%s, unlike the first row (%.300s); one kind per run (--kind %s)",
                 r->kind == SWIFT_KIND_SFT
                     ? (it->kind == SWIFT_KIND_PAIRS ? "a preference pair" : "a KTO row")
                     : what[r->kind],
                 r->first,
                 swift_row_kind_name(r->kind));
        it->bad = 1;
        free(it->ids);
        free(it->mask);
        it->ids = NULL;
        it->mask = NULL;
    }
    return 0;
}

/* Take the worked batch in input order: line tools print, build mode stores. */
static int take_batch(struct run *r, size_t n)
{
    const struct swift_preprocess_opts *o = r->o;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct item *it = &r->c.items[i];
        r->st.rows++;
        r->all_tokens += it->n;
        if (o->mode != SWIFT_PP_BUILD && !SWIFT_PP_RENDER_PACKS(o)) {
            if (it->bad && take_bad(o, &r->st, it) < 0)
                rc = -1;
            else if (!it->bad || o->mode != SWIFT_PP_RENDER)
                emit_line(o, it);
            continue;
        }
        if (same_kind(r, it) < 0)
            return -1;
        if (it->bad) {
            if (take_bad(o, &r->st, it) < 0)
                rc = -1;
            continue;
        }
        if (it->kind == SWIFT_KIND_SFT && it->im.n)
            rc = swift_pp_add_doc_images(o, &r->s, &r->st, it->ids, it->mask, it->n, &it->im);
        else if (it->kind == SWIFT_KIND_SFT)
            rc = swift_pp_add_doc(o, &r->s, &r->st, it->ids, it->mask, it->n);
        else if (it->kind == SWIFT_KIND_PROMPTS)
            rc = swift_pp_add_prompt(
                o, &r->s, &r->st, it->ids, it->mask, it->n, it->meta, it->meta_len);
        else
            rc = swift_pp_add_pref(o,
                                   &r->s,
                                   &r->st,
                                   it->ids,
                                   it->mask,
                                   it->kind == SWIFT_KIND_PAIRS ? it->n0 : it->n,
                                   it->kind == SWIFT_KIND_PAIRS ? it->n - it->n0 : 0,
                                   it->prompt,
                                   it->label);
    }
    return rc;
}

static int read_input(struct run *r, const char *path, const char *fmt)
{
    struct swift_dataset *ds;
    if (swift_dataset_open(&ds, path, fmt) < 0)
        return -1;
    const char *fname = swift_dataset_name(ds);
    int more = 1, rc = 0;
    while (rc == 0 && more) {
        size_t n = 0;
        if (read_batch(r, ds, fname, &n, &more) < 0) {
            free_items(r->c.items, n + 1);
            rc = -1;
            break;
        }
        r->c.nitems = n;
        swift_pool_for(r->pool, (long)((n + CHUNK_ROWS - 1) / CHUNK_ROWS), 1, work_chunk, &r->c);
        rc = take_batch(r, n);
        free_items(r->c.items, n);
        swift_progress_update(&r->prog, r->st.rows);
        if (swift_trace_enabled())
            swift_trace_counter("tokens", (double)r->all_tokens);
    }
    swift_dataset_close(ds);
    return rc;
}

/* Split the stored documents and write train (and val) into a temporary directory that
 * replaces the output once complete; *tmpdir stays set when it must be aborted. */
static int build_output(struct run *r, char **tmpdir, double lenstats[4], struct pp_split *tr,
                        struct pp_split *va)
{
    const struct swift_preprocess_opts *o = r->o;
    const struct ctx *c = &r->c;
    swift_pp_len_stats(&r->s, lenstats);
    uint64_t n = r->s.ndocs, ntrain = 0, nval = 0;
    uint64_t *train = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *val = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    int rc = swift_pp_split(o, n, train, &ntrain, val, &nval);
    if (rc == 0 && swift_atomic_dir_begin(o->output, tmpdir) < 0)
        rc = -1;
    if (rc == 0 && r->c.cache.dir && r->s.images) /* the image cache: DIR/images */
        rc = swift_pp_move_images(&r->c.cache.dir, *tmpdir);
    if (rc == 0)
        rc = swift_pp_write_split(
            o, c->tok, c->tpl, &r->s, &r->st, train, ntrain, *tmpdir, "train", lenstats, tr);
    if (rc == 0 && nval) {
        char *vdir = swift_path_join(*tmpdir, "val");
        rc = swift_mkdirs(vdir, 0755);
        if (rc == 0)
            rc = swift_pp_write_split(
                o, c->tok, c->tpl, &r->s, &r->st, val, nval, vdir, "val", lenstats, va);
        free(vdir);
    }
    if (rc == 0) {
        rc = swift_atomic_dir_commit(*tmpdir, o->output, o->force);
        if (rc == 0)
            *tmpdir = NULL;
    }
    free(train);
    free(val);
    return rc;
}

static const char *const pack_names[] = {"none", "binpack", "sequential"};

/* What became of the rows that gave no document: "62 of 100 rows dropped as longer than
 * --max-length 128 (use --truncation left, right or split to keep them)", with the invalid
 * rows --skip-invalid skipped when invalid_too; "" when none were lost. */
static void describe_losses(const struct run *r, int invalid_too, char *buf, size_t len)
{
    const struct pp_stats *st = &r->st;
    size_t k = 0;
    buf[0] = 0;
    if (st->dropped && r->kind == SWIFT_KIND_PROMPTS)
        k += (size_t)snprintf(buf,
                              len,
                              "%" PRIu64 " of %" PRIu64 " rows dropped as prompts longer than "
                              "--max-length %ld (use --truncation left to keep their end, or a "
                              "larger --max-length)",
                              st->dropped,
                              st->rows,
                              r->o->max_length);
    else if (st->dropped && r->kind > SWIFT_KIND_SFT)
        k += (size_t)snprintf(buf,
                              len,
                              "%" PRIu64 " of %" PRIu64 " rows dropped as longer than "
                              "--max-length %ld (use --truncation right or left to keep them, "
                              "or a larger --max-length; with right or left, a row is dropped "
                              "when no response token is left)",
                              st->dropped,
                              st->rows,
                              r->o->max_length);
    else if (st->dropped)
        k += (size_t)snprintf(buf,
                              len,
                              "%" PRIu64 " of %" PRIu64 " rows dropped as longer than "
                              "--max-length %ld (use --truncation left, right or split to "
                              "keep them, or a larger --max-length)",
                              st->dropped,
                              st->rows,
                              r->o->max_length);
    if (invalid_too && st->invalid && k < len)
        snprintf(buf + k,
                 len - k,
                 "%s%" PRIu64 " of %" PRIu64 " rows invalid (skipped by --skip-invalid)",
                 k ? "; " : "",
                 st->invalid,
                 st->rows);
}

/* Build mode with nothing to write: an error that says what was read and what was lost. */
static int no_samples(const struct run *r)
{
    const struct swift_preprocess_opts *o = r->o;
    char why[512];
    describe_losses(r, 1, why, sizeof(why));
    if (why[0])
        return swift_error("no samples to write: %s", why);
    if (o->ninputs == 1)
        return swift_error(
            "no samples to write: %" PRIu64 " rows read from '%s'", r->st.rows, o->inputs[0]);
    return swift_error("no samples to write: %" PRIu64 " rows read from %s",
                       r->st.rows,
                       o->ninputs ? "the inputs" : "standard input");
}

/* The build summary on stderr. */
static void report_build(const struct run *r, const double lenstats[4], const struct pp_split *tr,
                         const struct pp_split *va, double secs)
{
    const struct swift_preprocess_opts *o = r->o;
    const struct pp_stats *st = &r->st;
    char what[64] = "";
    if (r->kind == SWIFT_KIND_PAIRS)
        snprintf(what, sizeof(what), " pairs (%" PRIu64 " documents)", 2 * r->s.ndocs);
    else
        snprintf(what,
                 sizeof(what),
                 "%s",
                 r->kind == SWIFT_KIND_KTO       ? " KTO documents"
                 : r->kind == SWIFT_KIND_PROMPTS ? " prompts"
                                                 : " documents");
    swift_info("%" PRIu64 " rows: %" PRIu64 "%s, %" PRIu64 " invalid, %" PRIu64 " dropped, %" PRIu64
               " truncated",
               st->rows,
               r->s.ndocs,
               what,
               st->invalid,
               st->dropped,
               st->truncated);
    swift_info("Dataset Token Length: %.1f\xc2\xb1%.1f, min=%.0f, max=%.0f",
               lenstats[0],
               lenstats[1],
               lenstats[2],
               lenstats[3]);
    swift_info("train: %" PRIu64 " samples, %" PRIu64 " tokens (%" PRIu64 " trained); val: %" PRIu64
               " samples; packing %s%s",
               tr->samples,
               tr->tokens,
               tr->trained,
               va->samples,
               pack_names[o->packing],
               o->packing ? "" : "");
    if (o->packing)
        swift_info("packing efficiency %.2f%%", 100.0 * tr->efficiency);
    swift_info("%.2f s, %.0f tokens/s, %.1f MB/s with %d threads",
               secs,
               secs > 0 ? (double)r->all_tokens / secs : 0.0,
               secs > 0 ? (double)r->in_bytes / secs / 1e6 : 0.0,
               r->c.nw);
    for (int i = 0; i < st->nbad; i++)
        swift_info("skipped %s", st->bad[i]);
    char why[512];
    describe_losses(r, 0, why, sizeof(why));
    if (why[0])
        swift_warn("%s", why);
}

/* The build record on stdout. */
static int print_build(const struct run *r, const double lenstats[4], const struct pp_split *tr,
                       const struct pp_split *va, double secs)
{
    const struct swift_preprocess_opts *o = r->o;
    const struct pp_stats *st = &r->st;
    json_t *j =
        json_pack("{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:{s:f,s:f,s:I,s:I},"
                  "s:I,s:I,s:f,s:f,s:I,s:i}",
                  "version",
                  1,
                  "output",
                  o->output,
                  "template",
                  swift_template_name(r->c.tpl),
                  "packing",
                  pack_names[o->packing],
                  "rows",
                  (json_int_t)st->rows,
                  "documents",
                  (json_int_t)(r->kind == SWIFT_KIND_PAIRS ? 2 * r->s.ndocs : r->s.ndocs),
                  "invalid",
                  (json_int_t)st->invalid,
                  "dropped",
                  (json_int_t)st->dropped,
                  "truncated",
                  (json_int_t)st->truncated,
                  "samples",
                  (json_int_t)tr->samples,
                  "val_samples",
                  (json_int_t)va->samples,
                  "tokens",
                  (json_int_t)(tr->tokens + va->tokens),
                  "trained_tokens",
                  (json_int_t)(tr->trained + va->trained),
                  "packing_efficiency",
                  tr->efficiency,
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
                  (json_int_t)r->in_bytes,
                  "tokenized",
                  (json_int_t)r->all_tokens,
                  "seconds",
                  secs,
                  "tokens_per_s",
                  secs > 0 ? (double)r->all_tokens / secs : 0.0,
                  "max_length",
                  (json_int_t)o->max_length,
                  "threads",
                  r->c.nw);
    if (j && r->kind > SWIFT_KIND_SFT) /* SFT records stay as they were */
        json_object_set_new(j, "kind", json_string(swift_row_kind_name(r->kind)));
    if (j && r->kind == SWIFT_KIND_PAIRS)
        json_object_set_new(j, "pairs", json_integer((json_int_t)r->s.ndocs));
    int rc = j && swift_record_print(stdout, j, SWIFT_RECORD_DIGITS) < 0 ? -1 : 0;
    json_decref(j);
    return rc;
}

/* The line tools' summary of invalid rows. */
static void report_tools(const struct pp_stats *st)
{
    if (st->invalid)
        swift_info("%" PRIu64 " of %" PRIu64 " rows invalid%s",
                   st->invalid,
                   st->rows,
                   st->nbad ? ", first:" : "");
    for (int i = 0; i < st->nbad; i++)
        swift_info("skipped %s", st->bad[i]);
}

static void release(struct run *r)
{
    struct ctx *c = &r->c;
    for (int i = 0; c->w && i < c->nw; i++) {
        swift_tok_state_free(c->w[i].st);
        swift_encoded_release(&c->w[i].enc);
        swift_encoded_release(&c->w[i].enc1);
        free(c->w[i].conv.msg);
        free(c->w[i].conv1.msg);
        swift_tokens_release(&c->w[i].tk);
    }
    free(c->w);
    free(c->items);
    swift_pp_store_free(&r->s);
    if (c->cache.dir) /* a failed run leaves no image cache behind */
        swift_remove_tree(c->cache.dir);
    free(c->cache.dir);
    swift_pool_free(r->pool);
    swift_columns_release(&c->cols);
}

int swift_preprocess_run(const struct swift_preprocess_opts *o)
{
    struct run r = {
        .o = o,
        .c = {.o = o, .cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .output = o->output}},
        .kind = -1,
        .t_start = swift_trace_now()};
    struct swift_tokenizer *tok = NULL;
    int64_t t0 = swift_trace_now();
    if (swift_tokenizer_load(&tok, o->tokenizer) < 0)
        return SWIFT_FAILED;
    swift_trace_span("io", "load_tokenizer", t0, swift_trace_now(), NULL, 0);
    r.c.tok = tok;
    swift_vl_opts_default(&r.c.vo);
    if (o->min_pixels)
        r.c.vo.min_pixels = o->min_pixels;
    if (o->max_pixels)
        r.c.vo.max_pixels = o->max_pixels;
    if (prepare(o, &r.c) < 0) {
        swift_tokenizer_free(tok);
        return SWIFT_FAILED;
    }
    int rc = start_workers(&r);
    int ninputs = o->ninputs ? o->ninputs : 1;
    const char *fmt =
        (o->mode == SWIFT_PP_ENCODE || o->mode == SWIFT_PP_DECODE) ? "jsonl" : o->format;
    /* the line tools' output is their progress (and may share the terminal) */
    swift_progress_start(&r.prog,
                         "preprocess",
                         0,
                         "rows",
                         o->mode == SWIFT_PP_BUILD ? o->progress : SWIFT_PROGRESS_OFF);
    for (int fi = 0; rc == 0 && fi < ninputs; fi++)
        rc = read_input(&r, o->ninputs ? o->inputs[fi] : "-", fmt);
    if (rc == 0)
        swift_progress_stop(&r.prog);
    swift_progress_end(&r.prog);
    char *tmpdir = NULL;
    if (rc == 0 && o->mode == SWIFT_PP_BUILD && r.s.ndocs == 0)
        rc = no_samples(&r);
    else if (rc == 0 && o->mode == SWIFT_PP_BUILD) {
        double lenstats[4] = {0, 0, 0, 0};
        struct pp_split tr = {0}, va = {0};
        rc = build_output(&r, &tmpdir, lenstats, &tr, &va);
        double secs = (double)(swift_trace_now() - r.t_start) / 1e9;
        if (rc == 0) {
            report_build(&r, lenstats, &tr, &va, secs);
            rc = print_build(&r, lenstats, &tr, &va, secs);
        }
    } else if (rc == 0) {
        report_tools(&r.st);
        if (SWIFT_PP_RENDER_PACKS(o)) /* the packed samples, after the rows are all read */
            rc = swift_pp_render_packed(o, tok, &r.s, &r.st);
    }
    if (tmpdir)
        swift_atomic_dir_abort(tmpdir);
    release(&r);
    swift_tokenizer_free(tok);
    return rc < 0 ? SWIFT_FAILED : SWIFT_DONE;
}
