/*
 * render — `--render --packing`: the documents, stored as for shards (store.c: truncation, the
 * drop of too-long documents with images), packed as the shards would be (swift_pp_pack, every
 * document, in input order, no split), and printed one JSON line per packed sample:
 * {"text", "ids", "mask", "tokens", "trained_tokens", "documents": [{"start", "tokens",
 * "trained_tokens"}], "images": [{"sha256", "grid_thw", "document", "start", "tokens"}]}: where
 * each document starts in the row (its positions restart there, docs/preprocess.md) and each
 * image's <|image_pad|> span (multimodal.md).
 */
#include "lib/preprocess/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/banned.h"

/* How many images document d has: its keys are "hex" strings joined by commas. */
static uint64_t doc_images(const struct pp_store *s, uint64_t d)
{
    if (d >= s->img_docs)
        return 0;
    uint64_t q = 0;
    for (uint64_t i = s->img_off[d]; i < s->img_off[d + 1]; i++)
        q += s->img[i] == '"';
    return q / 2;
}

/* The images of the sample order[a..b) (ids: its tokens, dstart: its documents' starts). */
static json_t *sample_images(const struct pp_store *s, const uint64_t *order, uint64_t a,
                             uint64_t b, const uint64_t *first, const uint32_t *ids, uint64_t len,
                             const uint64_t *dstart)
{
    json_t *arr = json_array();
    uint64_t pos = 0;
    for (uint64_t j = a; j < b; j++) {
        uint64_t d = order[j], k0 = first[d], k1 = first[d + 1];
        uint64_t end = dstart[j - a + 1];
        for (uint64_t k = k0; k < k1 && k < s->nrimg; k++) {
            const struct pp_image *im = &s->rimg[k];
            while (pos < end && ids[pos] != s->pad_id) /* the next run of <|image_pad|> */
                pos++;
            int64_t start = pos < end ? (int64_t)pos : -1;
            while (pos < len && ids[pos] == s->pad_id)
                pos++;
            json_array_append_new(arr,
                                  json_pack("{s:s,s:[i,i,i],s:I,s:I,s:I}",
                                            "sha256",
                                            im->hex,
                                            "grid_thw",
                                            1,
                                            (int)im->grid_h,
                                            (int)im->grid_w,
                                            "document",
                                            (json_int_t)(j - a),
                                            "start",
                                            (json_int_t)start,
                                            "tokens",
                                            (json_int_t)im->tokens));
        }
        pos = end;
    }
    return arr;
}

/* One packed sample, order[a..b), as a JSON object. */
static json_t *sample_json(const struct pp_store *s, const struct swift_tokenizer *tok,
                           const uint64_t *order, uint64_t a, uint64_t b, const uint64_t *first)
{
    uint64_t len = 0, trained = 0;
    uint64_t *dstart = swift_xmalloc((size_t)(b - a + 1) * sizeof(uint64_t));
    for (uint64_t j = a; j < b; j++) {
        dstart[j - a] = len;
        len += s->off[order[j] + 1] - s->off[order[j]];
    }
    dstart[b - a] = len;
    uint32_t *ids = swift_xmalloc((size_t)(len ? len : 1) * sizeof(uint32_t));
    json_t *jids = json_array(), *jmask = json_array(), *docs = json_array();
    for (uint64_t j = a; j < b; j++) {
        uint64_t d = order[j], o0 = s->off[d], n = s->off[d + 1] - o0;
        memcpy(ids + dstart[j - a], s->ids + o0, n * sizeof(uint32_t));
        for (uint64_t i = 0; i < n; i++) {
            json_array_append_new(jids, json_integer(s->ids[o0 + i]));
            json_array_append_new(jmask, json_integer(s->mask[o0 + i]));
        }
        trained += s->trained[d];
        json_array_append_new(docs,
                              json_pack("{s:I,s:I,s:I}",
                                        "start",
                                        (json_int_t)dstart[j - a],
                                        "tokens",
                                        (json_int_t)n,
                                        "trained_tokens",
                                        (json_int_t)s->trained[d]));
    }
    char *text = NULL;
    size_t textlen = 0;
    if (swift_tokenizer_decode(tok, ids, (size_t)len, 0, &text, &textlen) < 0)
        textlen = 0;
    json_t *rec = json_object();
    json_object_set_new(rec, "text", json_stringn(text ? text : "", textlen));
    free(text);
    json_object_set_new(rec, "ids", jids);
    json_object_set_new(rec, "mask", jmask);
    json_object_set_new(rec, "tokens", json_integer((json_int_t)len));
    json_object_set_new(rec, "trained_tokens", json_integer((json_int_t)trained));
    json_object_set_new(rec, "documents", docs);
    if (s->images) {
        json_t *im = sample_images(s, order, a, b, first, ids, len, dstart);
        if (json_array_size(im))
            json_object_set_new(rec, "images", im);
        else
            json_decref(im);
    }
    free(ids);
    free(dstart);
    return rec;
}

int swift_pp_render_packed(const struct swift_preprocess_opts *o, const struct swift_tokenizer *tok,
                           const struct pp_store *s, const struct pp_stats *st)
{
    uint64_t n = s->ndocs, ns = 0;
    if (st->dropped || st->truncated)
        swift_info("%" PRIu64 " documents dropped and %" PRIu64 " truncated as longer than "
                   "--max-length %ld",
                   st->dropped,
                   st->truncated,
                   o->max_length);
    uint64_t *docs = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *order = swift_xmalloc((n ? n : 1) * sizeof(uint64_t));
    uint64_t *start = swift_xmalloc((n + 1) * sizeof(uint64_t));
    uint64_t *first = swift_xmalloc((n + 1) * sizeof(uint64_t)); /* doc d's first image */
    first[0] = 0;
    for (uint64_t d = 0; d < n; d++) {
        docs[d] = d;
        first[d + 1] = first[d] + doc_images(s, d);
    }
    swift_pp_pack(s, o->packing, (uint64_t)o->max_length, docs, n, order, start, &ns);
    int rc = 0;
    for (uint64_t k = 0; k < ns && rc == 0; k++) {
        json_t *rec = sample_json(s, tok, order, start[k], start[k + 1], first);
        if (json_dumpf(rec, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0 ||
            fputc('\n', stdout) == EOF)
            rc = swift_error_errno("cannot write the rendered samples");
        json_decref(rec);
    }
    free(docs);
    free(order);
    free(start);
    free(first);
    return rc;
}
