/*
 * internal.h — what the files of the preprocess wing share and nobody else may include.
 *
 * The tokenizer is one object built in three files:
 *   tokenizer.c         the tables (id -> bytes, bytes -> id, merges, added tokens, regexes),
 *                       freeing, decoding and the small queries;
 *   tokenizer_json.c    loading: tokenizer.json (normalizer, pre_tokenizer, model, post_processor,
 *                       added_tokens), GPT-2's encoder.json + vocab.bpe, tokenizer_config.json;
 *   tokenizer_encode.c  encoding: added-token split, normalizer, regex pre-tokenizer, the BPE
 *                       merge of each piece with its per-state cache, and the token list.
 * swift-preprocess's build mode keeps its documents in a token store (store.c: store, split,
 * pack, write shards) that the driver (preprocess.c) fills in input order.
 * The lookups the hot path needs (hashes, UTF-8 decoding, vocabulary and merge probes) are
 * static inline here so that splitting the files costs no call per byte.
 */
#ifndef SWIFT_PREPROCESS_INTERNAL_H
#define SWIFT_PREPROCESS_INTERNAL_H

#include "lib/preprocess/preprocess.h"
#include "lib/preprocess/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* err (errlen bytes) = the formatted message; returns -1 (the row readers' errors: dataset.c,
 * pref.c, prompts.c) */
int swift_row_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- tokenizer ---- */
/* GPT-2's pre-tokenizer regex (ByteLevel with use_regex) */
#define SWIFT_TOK_GPT2_REGEX                                                                       \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define TOK_MAX_REGEX 4
#define TOK_MAX_VOCAB (1u << 24)

enum { TI_PRESENT = 1, TI_ADDED = 2, TI_SPECIAL = 4, TI_RAW = 8 };
enum { NORM_NONE, NORM_NFC, NORM_NFKC };

struct tokinfo {
    uint32_t off, len; /* bytes in tok->bytes */
    uint32_t flags;
};

struct added {
    char *content;
    size_t len;
    uint32_t id;
    int special, lstrip, rstrip;
};

struct merge_slot {
    uint64_t key;  /* left << 32 | right */
    uint32_t rank; /* rank + 1; 0 = empty */
    uint32_t id;
};

struct swift_tokenizer {
    char *name;
    char sha[65];
    /* id -> bytes */
    struct tokinfo *info;
    uint32_t vocab_size; /* 1 + max id */
    char *bytes;
    size_t nbytes, capbytes;
    /* bytes -> id for model vocabulary entries */
    uint32_t *vslot; /* id + 1; 0 empty */
    uint32_t vmask;
    int32_t byte_id[256];
    const struct merge_slot **bytepair; /* [a << 8 | b]: merge of the byte tokens a, b */
    /* merges */
    struct merge_slot *mslot;
    uint64_t mmask;
    int ignore_merges;
    /* added tokens, and for each first byte the indices sorted longest first */
    struct added *added;
    size_t nadded;
    uint32_t *afirst[256];
    uint32_t nafirst[256];
    /* normalizer and pre-tokenizer */
    int norm;
    pcre2_code *re[TOK_MAX_REGEX];
    int re_jit[TOK_MAX_REGEX];
    int nre;
    int add_prefix_space;
    /* post-processor */
    uint32_t *pre_ids, *post_ids;
    size_t npre, npost;
    json_t *config;
};

/* ---- lookups shared by loading and encoding ---- */
static inline uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}
static inline uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Decode one UTF-8 sequence per Unicode Table 3-7. Returns its length (> 0) and *cp, or
 * -(length of the maximal invalid subpart) when ill-formed. */
static inline int utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        len = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0)
            lo = 0xA0;
        else if (b0 == 0xED)
            hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F;
    } else
        return -1;
    uint32_t c = b0 & (0xFF >> (len + 1));
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n)
            return -k;
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return -k;
        c = c << 6 | (b & 0x3F);
    }
    *cp = c;
    return len;
}

static inline const char *tok_bytes(const struct swift_tokenizer *tok, uint32_t id, uint32_t *len)
{
    *len = tok->info[id].len;
    return tok->bytes + tok->info[id].off;
}

static inline long vocab_find(const struct swift_tokenizer *tok, const char *s, size_t n)
{
    if (!tok->vslot)
        return -1;
    uint64_t h = hash_bytes((const unsigned char *)s, n);
    for (uint32_t i = (uint32_t)h & tok->vmask;; i = (i + 1) & tok->vmask) {
        uint32_t v = tok->vslot[i];
        if (!v)
            return -1;
        uint32_t len;
        const char *b = tok_bytes(tok, v - 1, &len);
        if (len == n && !memcmp(b, s, n))
            return (long)(v - 1);
    }
}

static inline const struct merge_slot *merge_find(const struct swift_tokenizer *tok, uint32_t a,
                                                  uint32_t b)
{
    uint64_t key = (uint64_t)a << 32 | b;
    for (uint64_t i = hash_u64(key) & tok->mmask;; i = (i + 1) & tok->mmask) {
        const struct merge_slot *s = &tok->mslot[i];
        if (!s->rank)
            return NULL;
        if (s->key == key)
            return s;
    }
}

/* ---- building the tables (tokenizer.c); each int one returns 0 or -1 after reporting ---- */
/* A new empty tokenizer named `name` (for messages). */
struct swift_tokenizer *swift_tok_new(const char *name);
/* Set vocabulary entry id <- byte-level string s (scratch holds strlen(s) bytes). */
int swift_tok_vocab_set(struct swift_tokenizer *tok, const char *s, size_t n, uint32_t id,
                        char *scratch);
/* Index the vocabulary by bytes once every entry is set; checks that all 256 bytes have a token. */
int swift_tok_vocab_index(struct swift_tokenizer *tok);
/* Room for n merges, then swift_tok_merge_add each by rank (scratch holds na + nb + 2 bytes;
 * index names the entry in messages). */
void swift_tok_merges_alloc(struct swift_tokenizer *tok, size_t n);
int swift_tok_merge_add(struct swift_tokenizer *tok, const char *a, size_t na, const char *b,
                        size_t nb, uint32_t rank, char *scratch, long index);
/* Add an added token (content matched in the raw text before normalization). */
int swift_tok_added_add(struct swift_tokenizer *tok, const char *content, size_t len, uint32_t id,
                        int special, int lstrip, int rstrip);
/* Append a pre-tokenizer split (a PCRE2 regex, or a literal string). */
int swift_tok_regex_add(struct swift_tokenizer *tok, const char *pat, size_t n, int literal);
/* Build the byte-pair table and the added-token index once loading is done. */
void swift_tok_finish(struct swift_tokenizer *tok);

/* ---- build mode of swift-preprocess (store.c) ---- */
struct swift_template;

/* Every kept document's ids and loss mask end to end; document d is [off[d], off[d + 1]). With
 * kind SWIFT_KIND_PAIRS an entry is a whole pair: its chosen document is the first n0[d] tokens,
 * the rejected one the rest; with SWIFT_KIND_KTO label[d] is the row's label; with
 * SWIFT_KIND_PROMPTS document d's metadata (JSON text) is meta[meta_off[d], meta_off[d + 1]). */
struct pp_store {
    int kind; /* SWIFT_KIND_* (dataset.h) */
    uint32_t *ids;
    uint8_t *mask;
    uint64_t ntok, cap;
    uint64_t *off; /* ndocs + 1 */
    uint64_t *trained;
    uint32_t *n0;
    uint8_t *label;
    uint64_t ndocs, capd;
    char *meta;         /* prompts */
    uint64_t *meta_off; /* prompts: capd entries, [0] = 0 */
    uint64_t meta_n, meta_cap;
    /* images (mm.c): per document the cache keys of its images, as JSON strings joined by
     * commas, in img[img_off[d] .. img_off[d + 1]) for d < img_docs (later documents: none) */
    int images; /* some document has images: samples get {"images": [...]} metadata */
    char *img;
    uint64_t *img_off; /* img_offcap entries, [0] = 0 */
    uint64_t img_n, img_cap, img_offcap, img_docs;
    /* --render --packing: every stored document's images in store order (grids for the
     * output) and the <|image_pad|> id */
    struct pp_image *rimg;
    uint64_t nrimg, caprimg;
    uint32_t pad_id;
};

#define PP_NBAD 5 /* skipped rows quoted in the summary */
struct pp_stats {
    uint64_t rows, invalid, dropped, truncated;
    char bad[PP_NBAD][600];
    int nbad;
};

/* What one written split holds. */
struct pp_split {
    uint64_t samples, docs, tokens, trained;
    double efficiency;
};

/* Truncate a document of n tokens per --truncation (counting it in st) and add it to s. */
int swift_pp_add_doc(const struct swift_preprocess_opts *o, struct pp_store *s, struct pp_stats *st,
                     const uint32_t *ids, const uint8_t *mask, uint64_t n);
/* A pair (n1 > 0: chosen ids[0..n0), rejected ids[n0..n0+n1)) or a KTO row (n1 = 0) whose
 * documents begin with the same `prompt` tokens: cut per --max-prompt-length, --max-length and
 * --truncation (docs/preprocess.md) and add to s, or count it dropped. */
int swift_pp_add_pref(const struct swift_preprocess_opts *o, struct pp_store *s,
                      struct pp_stats *st, const uint32_t *ids, const uint8_t *mask, uint64_t n0,
                      uint64_t n1, uint64_t prompt, int label);
/* A GRPO prompt of n tokens (mask 0) and its metadata: longer than --max-prompt-length or
 * --max-length, it keeps its end (--truncation left; --max-prompt-length always) or is dropped
 * (--truncation delete); counted in st. */
int swift_pp_add_prompt(const struct swift_preprocess_opts *o, struct pp_store *s,
                        struct pp_stats *st, const uint32_t *ids, const uint8_t *mask, uint64_t n,
                        const char *meta, size_t meta_len);
void swift_pp_store_free(struct pp_store *s);

/* ---- images (mm.c, docs/multimodal.md) ---- */
struct pp_image {
    char hex[65];            /* the cache file's name: its sha256 (lib/formats/pixels.h) */
    uint32_t grid_h, grid_w; /* patches (grid_t is 1) */
    uint64_t tokens;         /* its <|image_pad|> tokens */
};
struct pp_images {
    struct pp_image *v;
    size_t n;
    char *keys; /* "hex","hex",... (keys_len bytes) */
    size_t keys_len;
    uint32_t pad_id; /* <|image_pad|> */
};
struct swift_vl_opts;
struct swift_conv;
/* The image cache being filled while the rows are read (build mode): made on first use by
 * whichever worker gets there (mkdtemp "<--output>.images-XXXXXX" beside the output), each image
 * written there by its worker as soon as it is resized (so a batch holds no pixels), and moved to
 * "<output>/images" at the end. */
struct pp_cache {
    pthread_mutex_t lock;
    char *dir;
    const char *output;
};
/* A row's "images" (paths relative to `file`, the data file): each decoded, resized and
 * serialized into im (nothing when the row has none), and each "<image>" placeholder of conv
 * (none: all before the first user message, as ms-swift) replaced by the image's vision tokens;
 * the new strings live in hold. Each image is written to cache (NULL: none, --render). Returns 0,
 * or -1 with "image 'path': why" in err. */
int swift_pp_row_images(json_t *obj, const char *file, const struct swift_vl_opts *vo,
                        const struct swift_tokenizer *tok, struct pp_cache *cache,
                        struct swift_conv *conv, json_t *hold, struct pp_images *im, char *err,
                        size_t errlen);
/* -1 with a message when a row of another kind than SFT has images (not supported yet). */
int swift_pp_images_unsupported(json_t *obj, int kind, char *err, size_t errlen);
void swift_pp_images_free(struct pp_images *im);
/* Move the cache *dir to "<out>/images" (*dir freed and NULL on success). Returns 0 or -1. */
int swift_pp_move_images(char **dir, const char *out);
/* --render: ,"images":[{"sha256","grid_thw","start","tokens"}] (start: the first
 * <|image_pad|> of the image's span in ids); nothing for a row without images. */
void swift_pp_put_image_spans(FILE *fp, const struct pp_images *im, const uint32_t *ids,
                              uint32_t n);
/* A document with images: dropped (counted) when longer than --max-length, whatever
 * --truncation says (a cut would split an image's tokens from its pixels), else stored with its
 * cache keys. Returns 0 or -1. */
int swift_pp_add_doc_images(const struct swift_preprocess_opts *o, struct pp_store *s,
                            struct pp_stats *st, const uint32_t *ids, const uint8_t *mask,
                            uint64_t n, const struct pp_images *im);
/* The sample of documents order[a..b): {"images":[keys of each document in order]} into *buf
 * (grown; *cap bytes). Returns its length. */
size_t swift_pp_sample_images(const struct pp_store *s, const uint64_t *order, uint64_t a,
                              uint64_t b, char **buf, size_t *cap);
/* Mean, standard deviation, min and max of the document lengths (a pair's two counted apart). */
void swift_pp_len_stats(const struct pp_store *s, double lenstats[4]);
/* Docs 0..n-1 into train[] and val[] (each room for n) per --val-ratio, --seed, --shuffle. */
int swift_pp_split(const struct swift_preprocess_opts *o, uint64_t n, uint64_t *train,
                   uint64_t *ntrain, uint64_t *val, uint64_t *nval);
/* Pack docs[0..n) (ids into the store) per mode (enum swift_packing) into samples of at most
 * max tokens: order[] (n) the doc ids, start[0..*nsamples] offsets into order. */
void swift_pp_pack(const struct pp_store *s, int mode, uint64_t max, const uint64_t *docs,
                   uint64_t n, uint64_t *order, uint64_t *start, uint64_t *nsamples);
/* --render with --packing: the documents are stored as for shards, then packed and printed,
 * one JSON line a packed sample (render.c). */
#define SWIFT_PP_RENDER_PACKS(o) ((o)->mode == SWIFT_PP_RENDER && (o)->packing != SWIFT_PACK_NONE)
int swift_pp_render_packed(const struct swift_preprocess_opts *o, const struct swift_tokenizer *tok,
                           const struct pp_store *s, const struct pp_stats *st);
/* Pack docs[0..n) per --packing and write them as shards plus index.json under dir. */
int swift_pp_write_split(const struct swift_preprocess_opts *o, const struct swift_tokenizer *tok,
                         const struct swift_template *tpl, const struct pp_store *s,
                         const struct pp_stats *st, const uint64_t *docs, uint64_t n,
                         const char *dir, const char *split, const double lenstats[4],
                         struct pp_split *res);

#endif
