#include "lib/preprocess/bpe_train.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define GPT2_PATTERN                                                                               \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

unsigned swift_bpe_byte_to_unicode(unsigned char b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    /* the other 68 bytes map to 256.. in byte order */
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174))
            n++;
    return 256 + n;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 63));
    out[2] = (char)(0x80 | (cp & 63));
    return 3;
}

/* ---- distinct words with counts (open addressing on the raw bytes) ---- */
struct word {
    const char *s; /* into the corpus */
    int len;
    long count;
    int *sym, nsym; /* current symbols */
};

struct wordset {
    struct word *w;
    size_t n, cap;  /* entries */
    int64_t *slots; /* index+1, 0 empty */
    size_t nslots;
};

static uint64_t hash_bytes(const char *s, int n)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void ws_grow(struct wordset *ws)
{
    size_t ns = ws->nslots ? ws->nslots * 2 : 1 << 16;
    int64_t *slots = swift_xcalloc(ns, sizeof(*slots));
    for (size_t i = 0; i < ws->n; i++) {
        size_t h = hash_bytes(ws->w[i].s, ws->w[i].len) & (ns - 1);
        while (slots[h])
            h = (h + 1) & (ns - 1);
        slots[h] = (int64_t)i + 1;
    }
    free(ws->slots);
    ws->slots = slots;
    ws->nslots = ns;
}

static void ws_add(struct wordset *ws, const char *s, int len)
{
    if ((ws->n + 1) * 2 > ws->nslots)
        ws_grow(ws);
    size_t h = hash_bytes(s, len) & (ws->nslots - 1);
    while (ws->slots[h]) {
        struct word *w = &ws->w[ws->slots[h] - 1];
        if (w->len == len && !memcmp(w->s, s, (size_t)len)) {
            w->count++;
            return;
        }
        h = (h + 1) & (ws->nslots - 1);
    }
    if (ws->n == ws->cap) {
        ws->cap = ws->cap ? ws->cap * 2 : 4096;
        ws->w = swift_xrealloc(ws->w, ws->cap * sizeof(*ws->w));
    }
    ws->w[ws->n] = (struct word){.s = s, .len = len, .count = 1};
    ws->slots[h] = (int64_t)ws->n + 1;
    ws->n++;
}

/* Split the corpus with the GPT-2 regex and count each distinct word. */
static int count_words(const char *text, size_t len, struct wordset *ws)
{
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN,
                                   PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP,
                                   &errcode,
                                   &erroff,
                                   NULL);
    if (!re)
        return swift_error("cannot compile the GPT-2 pre-tokenizer regex");
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t off = 0;
    int rc = 0;
    while (off < len) {
        int m = pcre2_match(re, (PCRE2_SPTR)text, len, off, 0, md, NULL);
        if (m < 0) {
            if (m == PCRE2_ERROR_NOMATCH)
                break;
            rc = swift_error("corpus is not valid UTF-8 near byte %zu", off);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {
            off++;
            continue;
        }
        ws_add(ws, text + ov[0], (int)(ov[1] - ov[0]));
        off = ov[1];
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc;
}

/* What training learns: the token strings (byte-level unicode, UTF-8) of ids 0..ntok-1 and the
 * merges in rank order. */
struct learned {
    char **tok;
    int ntok;
    int (*merges)[2];
    int done;
};

/* The most frequent adjacent pair over all words (ties: the smallest key) and its count. Pair
 * counts go in an open-addressed table (the vocabulary is too large for a dense one). */
static long best_pair(const struct wordset *ws, uint64_t *keys, long *vals, size_t tabsize,
                      uint64_t *best)
{
    memset(keys, 0xff, tabsize * sizeof(uint64_t));
    *best = UINT64_MAX;
    long bestc = 0;
    for (size_t i = 0; i < ws->n; i++) {
        const struct word *w = &ws->w[i];
        for (int k = 0; k + 1 < w->nsym; k++) {
            uint64_t key = (uint64_t)w->sym[k] << 32 | (uint32_t)w->sym[k + 1];
            size_t h = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 44) & (tabsize - 1);
            while (keys[h] != UINT64_MAX && keys[h] != key)
                h = (h + 1) & (tabsize - 1);
            if (keys[h] == UINT64_MAX) {
                keys[h] = key;
                vals[h] = 0;
            }
            vals[h] += w->count;
            if (vals[h] > bestc || (vals[h] == bestc && key < *best)) {
                bestc = vals[h];
                *best = key;
            }
        }
    }
    return bestc;
}

/* Record merge a + b, give the joined string an id, and rewrite every word with it. */
static void apply_merge(struct wordset *ws, struct learned *l, int a, int b)
{
    l->merges[l->done][0] = a;
    l->merges[l->done][1] = b;
    size_t la = strlen(l->tok[a]), lb = strlen(l->tok[b]);
    char *joined = swift_xmalloc(la + lb + 1);
    memcpy(joined, l->tok[a], la);
    memcpy(joined + la, l->tok[b], lb + 1);
    /* Two merges can spell the same token ("a"+"bc", "ab"+"c"): reuse its id. */
    int id = -1;
    for (int t = 256; t < l->ntok && id < 0; t++)
        if (!strcmp(l->tok[t], joined))
            id = t;
    if (id < 0) {
        id = l->ntok++;
        l->tok[id] = joined;
    } else {
        free(joined);
    }
    for (size_t i = 0; i < ws->n; i++) {
        struct word *w = &ws->w[i];
        int j = 0;
        for (int k = 0; k < w->nsym; k++) {
            if (k + 1 < w->nsym && w->sym[k] == a && w->sym[k + 1] == b) {
                w->sym[j++] = id;
                k++;
            } else {
                w->sym[j++] = w->sym[k];
            }
        }
        w->nsym = j;
    }
}

/* Learn up to vocab_size - 256 merges, stopping when no pair occurs twice. */
static void learn(struct wordset *ws, int vocab_size, struct learned *l)
{
    /* symbols start as bytes */
    for (size_t i = 0; i < ws->n; i++) {
        struct word *w = &ws->w[i];
        w->sym = swift_xmalloc((size_t)w->len * sizeof(int));
        for (int k = 0; k < w->len; k++)
            w->sym[k] = (unsigned char)w->s[k];
        w->nsym = w->len;
    }
    int nmerges = vocab_size - 256;
    l->merges = swift_xcalloc((size_t)nmerges + 1, sizeof(*l->merges));
    l->tok = swift_xcalloc((size_t)vocab_size, sizeof(char *));
    for (int b = 0; b < 256; b++) {
        char buf[4];
        size_t n = put_utf8(buf, swift_bpe_byte_to_unicode((unsigned char)b));
        l->tok[b] = swift_xstrndup(buf, n);
    }
    l->done = 0;
    l->ntok = 256;
    size_t tabsize = 1 << 20;
    uint64_t *keys = swift_xmalloc(tabsize * sizeof(uint64_t));
    long *vals = swift_xmalloc(tabsize * sizeof(long));
    for (; l->done < nmerges && l->ntok < vocab_size; l->done++) {
        uint64_t best;
        if (best_pair(ws, keys, vals, tabsize, &best) < 2)
            break; /* nothing left worth merging */
        apply_merge(ws, l, (int)(best >> 32), (int)(best & 0xffffffff));
    }
    free(keys);
    free(vals);
}

static json_t *byte_level(int add_prefix_space, int trim_offsets)
{
    return json_pack("{s:s,s:b,s:b,s:b}",
                     "type",
                     "ByteLevel",
                     "add_prefix_space",
                     add_prefix_space,
                     "trim_offsets",
                     trim_offsets,
                     "use_regex",
                     1);
}

/* The "model" object: BPE with the learned vocabulary and merges. */
static json_t *model_json(const struct learned *l)
{
    json_t *model = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_null());
    json_object_set_new(model, "end_of_word_suffix", json_null());
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "byte_fallback", json_false());
    json_object_set_new(model, "ignore_merges", json_false());
    json_t *vocab = json_object();
    for (int i = 0; i < l->ntok; i++)
        json_object_set_new(vocab, l->tok[i], json_integer(i));
    json_object_set_new(model, "vocab", vocab);
    json_t *mj = json_array();
    for (int i = 0; i < l->done; i++) {
        const char *a = l->tok[l->merges[i][0]], *b = l->tok[l->merges[i][1]];
        char *m = swift_xmalloc(strlen(a) + strlen(b) + 2);
        size_t la = strlen(a);
        memcpy(m, a, la);
        m[la] = ' ';
        memcpy(m + la + 1, b, strlen(b) + 1);
        json_array_append_new(mj, json_string(m));
        free(m);
    }
    json_object_set_new(model, "merges", mj);
    return model;
}

/* tokenizer.json in the layout of Hugging Face tokenizers; specials follow the vocabulary. */
static json_t *tokenizer_json(const struct learned *l, const struct swift_bpe_train_opts *o)
{
    json_t *root = json_object();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_t *added = json_array();
    for (int i = 0; o->specials && o->specials[i]; i++) {
        json_t *t = json_object();
        json_object_set_new(t, "id", json_integer(l->ntok + i));
        json_object_set_new(t, "content", json_string(o->specials[i]));
        json_object_set_new(t, "single_word", json_false());
        json_object_set_new(t, "lstrip", json_false());
        json_object_set_new(t, "rstrip", json_false());
        json_object_set_new(t, "normalized", json_false());
        json_object_set_new(t, "special", json_true());
        json_array_append_new(added, t);
    }
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", byte_level(0, 1));
    json_object_set_new(root, "post_processor", byte_level(0, 0));
    json_object_set_new(root, "decoder", byte_level(1, 1));
    json_object_set_new(root, "model", model_json(l));
    return root;
}

static json_t *config_json(const struct swift_bpe_train_opts *o)
{
    json_t *cfg = json_object();
    json_object_set_new(cfg, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    json_object_set_new(cfg, "add_bos_token", json_false());
    json_object_set_new(cfg, "bos_token", json_null());
    json_object_set_new(cfg, "eos_token", o->eos_token ? json_string(o->eos_token) : json_null());
    json_object_set_new(cfg, "pad_token", o->pad_token ? json_string(o->pad_token) : json_null());
    json_object_set_new(cfg, "model_max_length", json_integer(4096));
    if (o->chat_template)
        json_object_set_new(cfg, "chat_template", json_string(o->chat_template));
    return cfg;
}

static int write_files(const char *dir, json_t *root, json_t *cfg)
{
    if (swift_mkdirs(dir, 0755) < 0)
        return -1;
    int rc = 0;
    char *p1 = swift_path_join(dir, "tokenizer.json");
    char *p2 = swift_path_join(dir, "tokenizer_config.json");
    char *s1 = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    char *s2 = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!s1 || !s2 || swift_atomic_write(p1, s1, strlen(s1)) < 0 ||
        swift_atomic_write(p2, s2, strlen(s2)) < 0)
        rc = -1;
    free(s1);
    free(s2);
    free(p1);
    free(p2);
    return rc;
}

int swift_bpe_train(const char *text, size_t len, const char *dir,
                    const struct swift_bpe_train_opts *o)
{
    if (o->vocab_size < 256 || o->vocab_size > 65536)
        return swift_error("vocab size must be between 256 and 65536, got %d", o->vocab_size);
    struct wordset ws = {0};
    int rc = count_words(text, len, &ws);
    if (rc == 0) {
        struct learned l;
        learn(&ws, o->vocab_size, &l);
        json_t *root = tokenizer_json(&l, o);
        json_t *cfg = config_json(o);
        rc = write_files(dir, root, cfg);
        json_decref(root);
        json_decref(cfg);
        for (int i = 0; i < l.ntok; i++)
            free(l.tok[i]);
        free(l.tok);
        free(l.merges);
    }
    for (size_t i = 0; i < ws.n; i++)
        free(ws.w[i].sym);
    free(ws.w);
    free(ws.slots);
    return rc;
}

int swift_bpe_train_file(const char *path, const char *dir, const struct swift_bpe_train_opts *o)
{
    char *text;
    size_t len;
    if (swift_read_file(path, (size_t)256 << 20, &text, &len) < 0)
        return -1;
    int rc = swift_bpe_train(text, len, dir, o);
    free(text);
    return rc;
}

int swift_bpe_train_files(const char *const *paths, int n, const char *dir,
                          const struct swift_bpe_train_opts *o)
{
    char *all = NULL;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        char *text;
        size_t len;
        if (swift_read_file(paths[i], (size_t)256 << 20, &text, &len) < 0) {
            free(all);
            return -1;
        }
        all = swift_xrealloc(all, total + len + 2);
        memcpy(all + total, text, len);
        total += len;
        if (len && text[len - 1] != '\n')
            all[total++] = '\n';
        all[total] = 0;
        free(text);
    }
    int rc = swift_bpe_train(all ? all : "", total, dir, o);
    free(all);
    return rc;
}
