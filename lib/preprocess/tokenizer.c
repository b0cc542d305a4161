/* tokenizer — Hugging Face byte-level BPE (see tokenizer.h for the pipeline). */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/pool.h"
#include "lib/core/sha256.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "lib/core/banned.h"

#define MAX_REGEX 4
#define MAX_ADDED 65536
#define MAX_VOCAB (1u << 24)
#define MAX_TEXT ((size_t)1 << 30)
#define MAX_TOKENS ((size_t)1 << 31)
#define MAX_FILE ((size_t)1 << 30)
#define CACHE_SLOTS (1u << 16)
#define CACHE_KEY_MAX 128
#define CACHE_BYTES (1u << 21)
#define CACHE_IDS (1u << 19)

static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

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
    pcre2_code *re[MAX_REGEX];
    int re_jit[MAX_REGEX];
    int nre;
    int add_prefix_space;
    /* post-processor */
    uint32_t *pre_ids, *post_ids;
    size_t npre, npost;
    json_t *config;
};

/* ---- small helpers ---- */
static uint64_t hash_bytes(const unsigned char *p, size_t n)
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
static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* GPT-2 bytes_to_unicode */
static uint16_t byte_cp[256];
static int16_t cp_byte[324];
static void init_bytemap(void)
{
    static atomic_int done;
    if (atomic_load(&done))
        return;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
            byte_cp[b] = (uint16_t)b;
        else
            byte_cp[b] = (uint16_t)(256 + n++);
    }
    for (int i = 0; i < 324; i++)
        cp_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        cp_byte[byte_cp[b]] = (int16_t)b;
    atomic_store(&done, 1);
}

/* Decode one UTF-8 sequence per Unicode Table 3-7. Returns its length (> 0) and *cp, or
 * -(length of the maximal invalid subpart) when ill-formed. */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
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
    uint32_t *ids = realloc(t->ids, nc * sizeof(uint32_t));
    if (!ids)
        return swift_error("out of memory");
    t->ids = ids;
    if (t->want_offsets) {
        uint32_t *o = realloc(t->offsets, nc * sizeof(uint32_t));
        if (!o)
            return swift_error("out of memory");
        t->offsets = o;
    }
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

/* ---- building the tables ---- */
static int add_bytes(struct swift_tokenizer *tok, const char *s, size_t n, uint32_t *off)
{
    if (tok->nbytes + n + 1 > tok->capbytes) {
        size_t nc = tok->capbytes ? tok->capbytes : 1 << 20;
        while (nc < tok->nbytes + n + 1)
            nc *= 2;
        if (nc > ((size_t)1 << 32))
            return swift_error("%s: vocabulary too large", tok->name);
        char *b = realloc(tok->bytes, nc);
        if (!b)
            return swift_error("out of memory");
        tok->bytes = b;
        tok->capbytes = nc;
    }
    memcpy(tok->bytes + tok->nbytes, s, n);
    tok->bytes[tok->nbytes + n] = 0;
    *off = (uint32_t)tok->nbytes;
    tok->nbytes += n + 1;
    return 0;
}

static int ensure_id(struct swift_tokenizer *tok, uint32_t id)
{
    if (id >= MAX_VOCAB)
        return swift_error("%s: token id %u too large", tok->name, id);
    if (id < tok->vocab_size)
        return 0;
    static const size_t step = 4096;
    size_t oldcap = (tok->vocab_size + step - 1) / step * step;
    size_t newcap = ((size_t)id + 1 + step - 1) / step * step;
    if (newcap > oldcap || !tok->info) {
        struct tokinfo *ti = realloc(tok->info, newcap * sizeof(*ti));
        if (!ti)
            return swift_error("out of memory");
        memset(ti + (tok->info ? oldcap : 0), 0, (newcap - (tok->info ? oldcap : 0)) * sizeof(*ti));
        tok->info = ti;
    }
    tok->vocab_size = id + 1;
    return 0;
}

static const char *tok_bytes(const struct swift_tokenizer *tok, uint32_t id, uint32_t *len)
{
    *len = tok->info[id].len;
    return tok->bytes + tok->info[id].off;
}

static long vocab_find(const struct swift_tokenizer *tok, const char *s, size_t n)
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

/* Byte-level string (GPT-2 unicode map) -> raw bytes into buf (cap >= strlen). Returns the
 * byte length, or -1 when a character is outside the map (the string is then used as is). */
static long unmap_bytelevel(const char *s, size_t n, char *buf)
{
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        int k = utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (k < 0 || cp >= 324 || cp_byte[cp] < 0)
            return -1;
        buf[o++] = (char)cp_byte[cp];
        i += (size_t)k;
    }
    return (long)o;
}

/* Set the model vocabulary entry id <- byte-level string s. */
static int vocab_set(struct swift_tokenizer *tok, const char *s, size_t n, uint32_t id,
                     char *scratch)
{
    if (ensure_id(tok, id) < 0)
        return -1;
    if (tok->info[id].flags & TI_PRESENT)
        return swift_error("%s: token id %u used twice in the vocabulary", tok->name, id);
    long bl = unmap_bytelevel(s, n, scratch);
    uint32_t off;
    if (bl < 0) {
        if (add_bytes(tok, s, n, &off) < 0)
            return -1;
        tok->info[id] = (struct tokinfo){off, (uint32_t)n, TI_PRESENT | TI_RAW};
        return 0;
    }
    if (add_bytes(tok, scratch, (size_t)bl, &off) < 0)
        return -1;
    tok->info[id] = (struct tokinfo){off, (uint32_t)bl, TI_PRESENT};
    return 0;
}

static int build_vocab_hash(struct swift_tokenizer *tok)
{
    uint32_t size = 1024;
    while (size < 2 * tok->vocab_size + 16)
        size *= 2;
    tok->vslot = calloc(size, sizeof(uint32_t));
    if (!tok->vslot)
        return swift_error("out of memory");
    tok->vmask = size - 1;
    for (int b = 0; b < 256; b++)
        tok->byte_id[b] = -1;
    for (uint32_t id = 0; id < tok->vocab_size; id++) {
        const struct tokinfo *ti = &tok->info[id];
        if (!(ti->flags & TI_PRESENT) || (ti->flags & (TI_RAW | TI_ADDED)))
            continue;
        const char *b = tok->bytes + ti->off;
        if (vocab_find(tok, b, ti->len) >= 0)
            continue; /* two strings for the same bytes: the first id wins */
        uint64_t h = hash_bytes((const unsigned char *)b, ti->len);
        uint32_t i = (uint32_t)h & tok->vmask;
        while (tok->vslot[i])
            i = (i + 1) & tok->vmask;
        tok->vslot[i] = id + 1;
        if (ti->len == 1 && tok->byte_id[(unsigned char)b[0]] < 0)
            tok->byte_id[(unsigned char)b[0]] = (int32_t)id;
    }
    for (int b = 0; b < 256; b++)
        if (tok->byte_id[b] < 0)
            return swift_error(
                "%s: not a byte-level BPE vocabulary (no token for byte 0x%02x)", tok->name, b);
    return 0;
}

static const struct merge_slot *merge_find(const struct swift_tokenizer *tok, uint32_t a,
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

static int merges_alloc(struct swift_tokenizer *tok, size_t n)
{
    uint64_t size = 1024;
    while (size < 2 * (uint64_t)n + 16)
        size *= 2;
    tok->mslot = calloc(size, sizeof(*tok->mslot));
    if (!tok->mslot)
        return swift_error("out of memory");
    tok->mmask = size - 1;
    return 0;
}

/* Add merge number `rank` of byte-level strings a and b. */
static int merge_add(struct swift_tokenizer *tok, const char *a, size_t na, const char *b,
                     size_t nb, uint32_t rank, char *scratch, long index)
{
    long la = unmap_bytelevel(a, na, scratch);
    long ia = la < 0 ? -1 : vocab_find(tok, scratch, (size_t)la);
    long lb = unmap_bytelevel(b, nb, scratch + la + 1);
    long ib = (la < 0 || lb < 0) ? -1 : vocab_find(tok, scratch + la + 1, (size_t)lb);
    if (ia < 0 || ib < 0)
        return swift_error("%s: merges[%ld]: token '%.*s' not in the vocabulary",
                           tok->name,
                           index,
                           ia < 0 ? (int)na : (int)nb,
                           ia < 0 ? a : b);
    memmove(scratch + la, scratch + la + 1, (size_t)lb);
    long im = vocab_find(tok, scratch, (size_t)(la + lb));
    if (im < 0)
        return swift_error("%s: merges[%ld]: merged token '%.*s%.*s' not in the vocabulary",
                           tok->name,
                           index,
                           (int)na,
                           a,
                           (int)nb,
                           b);
    uint64_t key = (uint64_t)ia << 32 | (uint64_t)ib;
    uint64_t i = hash_u64(key) & tok->mmask;
    while (tok->mslot[i].rank) {
        if (tok->mslot[i].key == key)
            return 0; /* duplicate merge: HF keeps the first rank */
        i = (i + 1) & tok->mmask;
    }
    tok->mslot[i] = (struct merge_slot){key, rank + 1, (uint32_t)im};
    return 0;
}

static int added_add(struct swift_tokenizer *tok, const char *content, size_t len, uint32_t id,
                     int special, int lstrip, int rstrip)
{
    if (len == 0)
        return swift_error("%s: added token %u has empty content", tok->name, id);
    if (tok->nadded >= MAX_ADDED)
        return swift_error("%s: too many added tokens", tok->name);
    if (ensure_id(tok, id) < 0)
        return -1;
    struct added *a = realloc(tok->added, (tok->nadded + 1) * sizeof(*a));
    if (!a)
        return swift_error("out of memory");
    tok->added = a;
    a += tok->nadded;
    a->content = malloc(len + 1);
    if (!a->content)
        return swift_error("out of memory");
    memcpy(a->content, content, len);
    a->content[len] = 0;
    a->len = len;
    a->id = id;
    a->special = special;
    a->lstrip = lstrip;
    a->rstrip = rstrip;
    tok->nadded++;
    /* decode bytes: HF maps each char through the byte-level table when all map, else raw */
    uint32_t off;
    char *scratch = malloc(len + 1);
    if (!scratch)
        return swift_error("out of memory");
    long bl = unmap_bytelevel(content, len, scratch);
    int rc =
        bl < 0 ? add_bytes(tok, content, len, &off) : add_bytes(tok, scratch, (size_t)bl, &off);
    free(scratch);
    if (rc < 0)
        return -1;
    struct tokinfo *ti = &tok->info[id];
    int was_vocab = (ti->flags & TI_PRESENT) && !(ti->flags & TI_ADDED);
    if (!was_vocab)
        *ti = (struct tokinfo){off, bl < 0 ? (uint32_t)len : (uint32_t)bl, TI_PRESENT};
    ti->flags |= TI_ADDED | (special ? TI_SPECIAL : 0);
    if (!was_vocab && bl < 0)
        ti->flags |= TI_RAW;
    return 0;
}

static int build_added_index(struct swift_tokenizer *tok)
{
    for (size_t i = 0; i < tok->nadded; i++) {
        unsigned char c = (unsigned char)tok->added[i].content[0];
        uint32_t *p = realloc(tok->afirst[c], (tok->nafirst[c] + 1) * sizeof(uint32_t));
        if (!p)
            return swift_error("out of memory");
        p[tok->nafirst[c]++] = (uint32_t)i;
        tok->afirst[c] = p;
    }
    /* longest first, then lowest id (insertion sort: the lists are short) */
    for (int c = 0; c < 256; c++) {
        uint32_t *v = tok->afirst[c];
        for (uint32_t i = 1; i < tok->nafirst[c]; i++) {
            uint32_t x = v[i];
            uint32_t j = i;
            while (j > 0) {
                const struct added *a = &tok->added[v[j - 1]], *b = &tok->added[x];
                if (a->len > b->len || (a->len == b->len && a->id <= b->id))
                    break;
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    }
    return 0;
}

static int add_regex(struct swift_tokenizer *tok, const char *pat, size_t n, int literal)
{
    if (tok->nre >= MAX_REGEX)
        return swift_error("%s: too many pre-tokenizer splits", tok->name);
    int err;
    PCRE2_SIZE eoff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, n, opts, &err, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return swift_error(
            "%s: pre-tokenizer regex: %s at offset %zu", tok->name, (char *)msg, (size_t)eoff);
    }
    tok->re_jit[tok->nre] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    tok->re[tok->nre++] = re;
    return 0;
}

/* ---- tokenizer.json ---- */
static int bad(const struct swift_tokenizer *tok, const char *what)
{
    return swift_error("%s: %s", tok->name, what);
}

static int parse_normalizer(struct swift_tokenizer *tok, json_t *n)
{
    if (!n || json_is_null(n))
        return 0;
    json_t *t = json_object_get(n, "type");
    if (!json_is_string(t))
        return bad(tok, "normalizer without a \"type\"");
    const char *ty = json_string_value(t);
    if (!strcmp(ty, "NFC"))
        tok->norm = NORM_NFC;
    else if (!strcmp(ty, "NFKC"))
        tok->norm = NORM_NFKC;
    else if (!strcmp(ty, "Sequence")) {
        json_t *v = json_object_get(n, "normalizers");
        if (!json_is_array(v))
            return bad(tok, "normalizer Sequence without \"normalizers\"");
        for (size_t i = 0; i < json_array_size(v); i++)
            if (parse_normalizer(tok, json_array_get(v, i)) < 0)
                return -1;
    } else
        return swift_error("%s: unsupported normalizer '%s' (NFC, NFKC, Sequence)", tok->name, ty);
    return 0;
}

static int parse_pretok(struct swift_tokenizer *tok, json_t *p, int *bytelevel)
{
    if (!p || json_is_null(p))
        return 0;
    json_t *t = json_object_get(p, "type");
    if (!json_is_string(t))
        return bad(tok, "pre_tokenizer without a \"type\"");
    const char *ty = json_string_value(t);
    if (!strcmp(ty, "Sequence")) {
        json_t *v = json_object_get(p, "pretokenizers");
        if (!json_is_array(v))
            return bad(tok, "pre_tokenizer Sequence without \"pretokenizers\"");
        for (size_t i = 0; i < json_array_size(v); i++)
            if (parse_pretok(tok, json_array_get(v, i), bytelevel) < 0)
                return -1;
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) {
        *bytelevel = 1;
        json_t *ur = json_object_get(p, "use_regex");
        if (ur && !json_is_boolean(ur))
            return bad(tok, "ByteLevel \"use_regex\" must be a boolean");
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            tok->add_prefix_space = 1;
        if (!ur || json_is_true(ur))
            return add_regex(tok, GPT2_REGEX, strlen(GPT2_REGEX), 0);
        return 0;
    }
    if (!strcmp(ty, "Split")) {
        json_t *pat = json_object_get(p, "pattern");
        json_t *beh = json_object_get(p, "behavior");
        if (!json_is_object(pat))
            return bad(tok, "Split without a \"pattern\" object");
        if (!json_is_string(beh) || strcmp(json_string_value(beh), "Isolated"))
            return bad(tok, "Split: only behavior \"Isolated\" is supported");
        if (json_is_true(json_object_get(p, "invert")))
            return bad(tok, "Split: \"invert\": true is not supported");
        json_t *re = json_object_get(pat, "Regex");
        json_t *str = json_object_get(pat, "String");
        if (json_is_string(re))
            return add_regex(tok, json_string_value(re), json_string_length(re), 0);
        if (json_is_string(str))
            return add_regex(tok, json_string_value(str), json_string_length(str), 1);
        return bad(tok, "Split pattern needs \"Regex\" or \"String\"");
    }
    return swift_error(
        "%s: unsupported pre_tokenizer '%s' (ByteLevel, Split, Sequence)", tok->name, ty);
}

static int parse_post(struct swift_tokenizer *tok, json_t *p)
{
    if (!p || json_is_null(p))
        return 0;
    json_t *t = json_object_get(p, "type");
    if (!json_is_string(t))
        return bad(tok, "post_processor without a \"type\"");
    const char *ty = json_string_value(t);
    if (!strcmp(ty, "ByteLevel"))
        return 0;
    if (!strcmp(ty, "Sequence")) {
        json_t *v = json_object_get(p, "processors");
        if (!json_is_array(v))
            return bad(tok, "post_processor Sequence without \"processors\"");
        for (size_t i = 0; i < json_array_size(v); i++)
            if (parse_post(tok, json_array_get(v, i)) < 0)
                return -1;
        return 0;
    }
    if (strcmp(ty, "TemplateProcessing"))
        return swift_error("%s: unsupported post_processor '%s'", tok->name, ty);
    json_t *single = json_object_get(p, "single");
    json_t *sp = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
        return bad(tok, "TemplateProcessing without \"single\"");
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *e = json_array_get(single, i);
        json_t *st = json_object_get(e, "SpecialToken");
        if (json_is_object(json_object_get(e, "Sequence"))) {
            seen_a = 1;
            continue;
        }
        json_t *idv = json_object_get(st, "id");
        if (!json_is_string(idv))
            return bad(tok, "TemplateProcessing: bad \"single\" entry");
        json_t *def = json_object_get(sp, json_string_value(idv));
        json_t *ids = json_object_get(def, "ids");
        if (!json_is_array(ids))
            return swift_error("%s: TemplateProcessing: special token '%s' not defined",
                               tok->name,
                               json_string_value(idv));
        for (size_t k = 0; k < json_array_size(ids); k++) {
            json_t *x = json_array_get(ids, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) >= MAX_VOCAB)
                return bad(tok, "TemplateProcessing: bad id");
            uint32_t **arr = seen_a ? &tok->post_ids : &tok->pre_ids;
            size_t *cnt = seen_a ? &tok->npost : &tok->npre;
            if (*cnt >= 64)
                return bad(tok, "TemplateProcessing: too many tokens");
            uint32_t *q = realloc(*arr, (*cnt + 1) * sizeof(uint32_t));
            if (!q)
                return swift_error("out of memory");
            q[(*cnt)++] = (uint32_t)json_integer_value(x);
            *arr = q;
        }
    }
    return 0;
}

static int parse_vocab_obj(struct swift_tokenizer *tok, json_t *vocab)
{
    if (!json_is_object(vocab))
        return bad(tok, "model.vocab must be an object");
    size_t maxlen = 0;
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v)
    {
        size_t n = strlen(k);
        if (n > maxlen)
            maxlen = n;
    }
    char *scratch = malloc(maxlen + 1);
    if (!scratch)
        return swift_error("out of memory");
    json_object_foreach(vocab, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= MAX_VOCAB) {
            free(scratch);
            return swift_error(
                "%s: vocab entry '%s': id must be an integer in [0, %u)", tok->name, k, MAX_VOCAB);
        }
        if (vocab_set(tok, k, strlen(k), (uint32_t)json_integer_value(v), scratch) < 0) {
            free(scratch);
            return -1;
        }
    }
    free(scratch);
    return build_vocab_hash(tok);
}

static int parse_merges(struct swift_tokenizer *tok, json_t *merges)
{
    if (!json_is_array(merges))
        return bad(tok, "model.merges must be an array");
    size_t n = json_array_size(merges);
    if (merges_alloc(tok, n) < 0)
        return -1;
    size_t cap = 1024;
    char *scratch = malloc(cap);
    if (!scratch)
        return swift_error("out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t na, nb;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = swift_error("%s: merges[%zu]: expected \"a b\"", tok->name, i);
                break;
            }
            a = s;
            na = (size_t)(sp - s);
            b = sp + 1;
            nb = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            na = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            nb = json_string_length(json_array_get(m, 1));
        } else {
            rc = swift_error("%s: merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", tok->name, i);
            break;
        }
        if (na + nb + 2 > cap) {
            cap = 2 * (na + nb + 2);
            char *q = realloc(scratch, cap);
            if (!q) {
                rc = swift_error("out of memory");
                break;
            }
            scratch = q;
        }
        rc = merge_add(tok, a, na, b, nb, (uint32_t)i, scratch, (long)i);
    }
    free(scratch);
    return rc;
}

static int finish(struct swift_tokenizer *tok)
{
    tok->bytepair = calloc(65536, sizeof(*tok->bytepair));
    if (!tok->bytepair)
        return swift_error("out of memory");
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
            tok->bytepair[a << 8 | b] =
                merge_find(tok, (uint32_t)tok->byte_id[a], (uint32_t)tok->byte_id[b]);
    return build_added_index(tok);
}

static struct swift_tokenizer *tok_new(const char *name)
{
    init_bytemap();
    struct swift_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok || !(tok->name = strdup(name))) {
        free(tok);
        swift_error("out of memory");
        return NULL;
    }
    return tok;
}

int swift_tokenizer_load_json(struct swift_tokenizer **out, const char *text, size_t len,
                              const char *name)
{
    *out = NULL;
    struct swift_tokenizer *tok = tok_new(name);
    if (!tok)
        return -1;
    swift_sha256_hex(text, len, tok->sha);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root) {
        swift_error_at(name, jerr.line, "%s", jerr.text);
        swift_tokenizer_free(tok);
        return -1;
    }
    int rc = 0;
    json_t *model = json_object_get(root, "model");
    json_t *ty = json_object_get(model, "type");
    int bytelevel = 0;
    if (!json_is_object(root) || !json_is_object(model))
        rc = bad(tok, "not a tokenizer.json (no \"model\" object)");
    else if (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "BPE")))
        rc = swift_error("%s: unsupported model type '%s' (only BPE)",
                         tok->name,
                         json_is_string(ty) ? json_string_value(ty) : "?");
    else if (json_is_true(json_object_get(model, "byte_fallback")))
        rc = bad(tok, "byte_fallback BPE (SentencePiece style) is not supported");
    if (rc == 0) {
        json_t *cp = json_object_get(model, "continuing_subword_prefix");
        json_t *ew = json_object_get(model, "end_of_word_suffix");
        if ((json_is_string(cp) && json_string_length(cp)) ||
            (json_is_string(ew) && json_string_length(ew)))
            rc = bad(tok, "continuing_subword_prefix / end_of_word_suffix are not supported");
    }
    if (rc == 0) {
        tok->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
        rc = parse_vocab_obj(tok, json_object_get(model, "vocab"));
    }
    if (rc == 0)
        rc = parse_merges(tok, json_object_get(model, "merges"));
    if (rc == 0)
        rc = parse_normalizer(tok, json_object_get(root, "normalizer"));
    if (rc == 0)
        rc = parse_pretok(tok, json_object_get(root, "pre_tokenizer"), &bytelevel);
    if (rc == 0 && !bytelevel) {
        json_t *dec = json_object_get(root, "decoder");
        json_t *dt = json_object_get(dec, "type");
        if (!json_is_string(dt) || strcmp(json_string_value(dt), "ByteLevel"))
            rc = bad(tok, "only byte-level BPE is supported (no ByteLevel pre-tokenizer)");
    }
    if (rc == 0)
        rc = parse_post(tok, json_object_get(root, "post_processor"));
    json_t *added = json_object_get(root, "added_tokens");
    if (rc == 0 && added && !json_is_null(added)) {
        if (!json_is_array(added))
            rc = bad(tok, "\"added_tokens\" must be an array");
        for (size_t i = 0; rc == 0 && i < json_array_size(added); i++) {
            json_t *a = json_array_get(added, i);
            json_t *id = json_object_get(a, "id");
            json_t *c = json_object_get(a, "content");
            if (!json_is_integer(id) || json_integer_value(id) < 0 ||
                json_integer_value(id) >= MAX_VOCAB || !json_is_string(c))
                rc = swift_error(
                    "%s: added_tokens[%zu]: needs \"id\" and \"content\"", tok->name, i);
            else
                rc = added_add(tok,
                               json_string_value(c),
                               json_string_length(c),
                               (uint32_t)json_integer_value(id),
                               json_is_true(json_object_get(a, "special")),
                               json_is_true(json_object_get(a, "lstrip")),
                               json_is_true(json_object_get(a, "rstrip")));
        }
    }
    for (size_t i = 0; rc == 0 && i < tok->npre + tok->npost; i++) {
        uint32_t id = i < tok->npre ? tok->pre_ids[i] : tok->post_ids[i - tok->npre];
        if (id >= tok->vocab_size || !(tok->info[id].flags & TI_PRESENT))
            rc = swift_error(
                "%s: post_processor token id %u is not in the vocabulary", tok->name, id);
    }
    if (rc == 0)
        rc = finish(tok);
    json_decref(root);
    if (rc < 0) {
        swift_tokenizer_free(tok);
        return -1;
    }
    *out = tok;
    return 0;
}

int swift_tokenizer_load_gpt2(struct swift_tokenizer **out, const char *encoder_json,
                              size_t enc_len, const char *vocab_bpe, size_t bpe_len,
                              const char *name)
{
    *out = NULL;
    struct swift_tokenizer *tok = tok_new(name);
    if (!tok)
        return -1;
    struct swift_sha256 sh;
    swift_sha256_init(&sh);
    swift_sha256_update(&sh, encoder_json, enc_len);
    swift_sha256_update(&sh, vocab_bpe, bpe_len);
    swift_sha256_final(&sh, tok->sha);
    json_error_t jerr;
    json_t *enc = json_loadb(encoder_json, enc_len, 0, &jerr);
    int rc = 0;
    if (!enc)
        rc = swift_error_at(name, jerr.line, "encoder.json: %s", jerr.text);
    if (rc == 0)
        rc = parse_vocab_obj(tok, enc);
    json_decref(enc);
    /* vocab.bpe: "#version: 0.2" then "a b" per line */
    size_t nlines = 0;
    for (size_t i = 0; i < bpe_len; i++)
        nlines += vocab_bpe[i] == '\n';
    if (rc == 0)
        rc = merges_alloc(tok, nlines + 1);
    char *scratch = NULL;
    size_t cap = 0;
    uint32_t rank = 0;
    size_t pos = 0;
    long lineno = 0;
    while (rc == 0 && pos < bpe_len) {
        const char *l = vocab_bpe + pos;
        const char *nl = memchr(l, '\n', bpe_len - pos);
        size_t n = nl ? (size_t)(nl - l) : bpe_len - pos;
        pos += n + 1;
        lineno++;
        if (n && l[n - 1] == '\r')
            n--;
        if (n == 0 || (lineno == 1 && n >= 8 && !memcmp(l, "#version", 8)))
            continue;
        const char *sp = memchr(l, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - l))) {
            rc = swift_error_at(name, lineno, "vocab.bpe: expected \"a b\"");
            break;
        }
        if (n + 2 > cap) {
            cap = 2 * n + 16;
            char *q = realloc(scratch, cap);
            if (!q) {
                rc = swift_error("out of memory");
                break;
            }
            scratch = q;
        }
        rc = merge_add(
            tok, l, (size_t)(sp - l), sp + 1, n - (size_t)(sp + 1 - l), rank, scratch, lineno);
        rank++;
    }
    free(scratch);
    if (rc == 0)
        rc = add_regex(tok, GPT2_REGEX, strlen(GPT2_REGEX), 0);
    if (rc == 0) {
        long eot = vocab_find(tok, "<|endoftext|>", 13);
        if (eot >= 0)
            rc = added_add(tok, "<|endoftext|>", 13, (uint32_t)eot, 1, 0, 0);
    }
    if (rc == 0)
        rc = finish(tok);
    if (rc < 0) {
        swift_tokenizer_free(tok);
        return -1;
    }
    *out = tok;
    return 0;
}

int swift_tokenizer_load(struct swift_tokenizer **out, const char *dir)
{
    *out = NULL;
    char *path;
    int is_file = !swift_is_dir(dir);
    path = is_file ? strdup(dir) : swift_path_join(dir, "tokenizer.json");
    if (!path)
        return swift_error("out of memory");
    char *text;
    size_t len;
    int rc;
    if (is_file || access(path, F_OK) == 0) {
        rc = swift_read_file(path, MAX_FILE, &text, &len);
        if (rc == 0) {
            rc = swift_tokenizer_load_json(out, text, len, path);
            free(text);
        }
    } else {
        char *ep = swift_path_join(dir, "encoder.json");
        char *bp = swift_path_join(dir, "vocab.bpe");
        char *etext = NULL, *btext = NULL;
        size_t elen = 0, blen = 0;
        if (access(ep, F_OK) != 0) {
            rc = swift_error("'%s': no tokenizer.json or encoder.json + vocab.bpe", dir);
        } else {
            rc = swift_read_file(ep, MAX_FILE, &etext, &elen);
            if (rc == 0)
                rc = swift_read_file(bp, MAX_FILE, &btext, &blen);
            if (rc == 0)
                rc = swift_tokenizer_load_gpt2(out, etext, elen, btext, blen, ep);
        }
        free(etext);
        free(btext);
        free(ep);
        free(bp);
    }
    free(path);
    if (rc < 0 || is_file)
        return rc;
    char *cpath = swift_path_join(dir, "tokenizer_config.json");
    if (access(cpath, F_OK) == 0) {
        json_error_t jerr;
        json_t *cfg = json_load_file(cpath, JSON_DECODE_INT_AS_REAL, &jerr);
        if (!cfg || !json_is_object(cfg)) {
            rc = swift_error_at(cpath, jerr.line, "%s", cfg ? "not a JSON object" : jerr.text);
            json_decref(cfg);
            swift_tokenizer_free(*out);
            *out = NULL;
        } else
            (*out)->config = cfg;
    }
    free(cpath);
    return rc;
}

void swift_tokenizer_free(struct swift_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->name);
    free(tok->info);
    free(tok->bytes);
    free(tok->vslot);
    free(tok->mslot);
    free(tok->bytepair);
    for (size_t i = 0; i < tok->nadded; i++)
        free(tok->added[i].content);
    free(tok->added);
    for (int c = 0; c < 256; c++)
        free(tok->afirst[c]);
    for (int i = 0; i < tok->nre; i++)
        pcre2_code_free(tok->re[i]);
    free(tok->pre_ids);
    free(tok->post_ids);
    json_decref(tok->config);
    free(tok);
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
    pcre2_match_data *md[MAX_REGEX];
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
    struct swift_tok_state *st = calloc(1, sizeof(*st));
    if (!st)
        goto oom;
    st->tok = tok;
    st->mctx = pcre2_match_context_create(NULL);
    st->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!st->mctx || !st->jstack)
        goto oom;
    pcre2_jit_stack_assign(st->mctx, NULL, st->jstack);
    for (int i = 0; i < tok->nre; i++)
        if (!(st->md[i] = pcre2_match_data_create_from_pattern(tok->re[i], NULL)))
            goto oom;
    st->cslot = calloc(CACHE_SLOTS, sizeof(*st->cslot));
    st->ckeys = malloc(CACHE_BYTES);
    st->cids = malloc(CACHE_IDS * sizeof(uint32_t));
    if (!st->cslot || !st->ckeys || !st->cids)
        goto oom;
    return st;
oom:
    swift_tok_state_free(st);
    swift_error("out of memory");
    return NULL;
}

void swift_tok_state_free(struct swift_tok_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < MAX_REGEX; i++)
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

static int scratch_reserve(struct swift_tok_state *st, size_t n)
{
    if (n <= st->scap)
        return 0;
    size_t nc = st->scap ? st->scap : 256;
    while (nc < n)
        nc *= 2;
    uint32_t *a = realloc(st->sid, nc * sizeof(uint32_t));
    if (a)
        st->sid = a;
    int32_t *b = realloc(st->sprev, nc * sizeof(int32_t));
    if (b)
        st->sprev = b;
    int32_t *c = realloc(st->snext, nc * sizeof(int32_t));
    if (c)
        st->snext = c;
    uint32_t *d = realloc(st->slen, nc * sizeof(uint32_t));
    if (d)
        st->slen = d;
    if (!a || !b || !c || !d)
        return swift_error("out of memory");
    st->scap = nc;
    return 0;
}

static int heap_push(struct swift_tok_state *st, size_t *hn, struct heap_ent e)
{
    if (*hn >= st->hcap) {
        size_t nc = st->hcap ? 2 * st->hcap : 256;
        struct heap_ent *h = realloc(st->heap, nc * sizeof(*h));
        if (!h)
            return swift_error("out of memory");
        st->heap = h;
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
    return 0;
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

static int push_pair(struct swift_tok_state *st, size_t *hn, int32_t i, int32_t j)
{
    uint32_t a = st->sid[i], b = st->sid[j];
    const struct merge_slot *m = merge_find(st->tok, a, b);
    if (!m)
        return 0;
    return heap_push(st, hn, (struct heap_ent){m->rank, (uint32_t)i, m->id, a, b});
}

/* Merges of two single bytes, looked up directly (every piece starts with byte pairs). */
static int push_byte_pair(struct swift_tok_state *st, size_t *hn, int32_t i, unsigned char a,
                          unsigned char b)
{
    const struct merge_slot *m = st->tok->bytepair[a << 8 | b];
    if (!m)
        return 0;
    return heap_push(
        st, hn, (struct heap_ent){m->rank, (uint32_t)i, m->id, st->sid[i], st->sid[i + 1]});
}

/* BPE-merge the n bytes at p; append ids starting at offset off. */
static int bpe_piece(struct swift_tok_state *st, const char *p, size_t n, uint32_t off,
                     struct swift_tokens *out)
{
    const struct swift_tokenizer *tok = st->tok;
    const unsigned char *u = (const unsigned char *)p;
    uint64_t hh = 0;
    uint32_t h = 0;
    struct cache_slot *slot = NULL;
    if (n <= CACHE_KEY_MAX) {
        hh = hash_bytes(u, n);
        h = (uint32_t)(hh >> 32) | 1;
        uint32_t i = (uint32_t)hh & (CACHE_SLOTS - 1);
        for (;; i = (i + 1) & (CACHE_SLOTS - 1)) {
            struct cache_slot *s = &st->cslot[i];
            if (!s->hash) {
                slot = s;
                break;
            }
            if (s->hash == h && s->key_len == n && !memcmp(st->ckeys + s->key_off, u, n)) {
                if (tokens_reserve(out, s->nids) < 0)
                    return -1;
                const uint32_t *ids = st->cids + s->ids_off;
                if (out->want_offsets)
                    for (uint32_t k = 0; k < s->nids; k++) {
                        out->offsets[out->n + k] = off;
                        off += tok->info[ids[k]].len;
                    }
                memcpy(out->ids + out->n, ids, s->nids * sizeof(uint32_t));
                out->n += s->nids;
                return 0;
            }
        }
    }
    size_t first = out->n;
    if (n == 1 || tok->ignore_merges) {
        long id = n == 1 ? tok->byte_id[u[0]] : vocab_find(tok, p, n);
        if (id >= 0) {
            if (swift_tokens_push(out, (uint32_t)id, off) < 0)
                return -1;
            goto cache;
        }
    }
    if (scratch_reserve(st, n) < 0)
        return -1;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        st->sid[i] = (uint32_t)tok->byte_id[u[i]];
        st->sprev[i] = (int32_t)i - 1;
        st->snext[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        st->slen[i] = 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (push_byte_pair(st, &hn, (int32_t)i, u[i], u[i + 1]) < 0)
            return -1;
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
        if (st->sprev[i] >= 0 && push_pair(st, &hn, st->sprev[i], i) < 0)
            return -1;
        if (st->snext[i] >= 0 && push_pair(st, &hn, i, st->snext[i]) < 0)
            return -1;
    }
    for (int32_t i = 0; i >= 0; i = st->snext[i]) {
        if (swift_tokens_push(out, st->sid[i], off) < 0)
            return -1;
        off += st->slen[i];
    }
cache:
    if (slot) {
        size_t nids = out->n - first;
        if (st->ccount * 4 >= CACHE_SLOTS * 3 || st->ckeys_n + n > CACHE_BYTES ||
            st->cids_n + nids > CACHE_IDS) {
            memset(st->cslot, 0, CACHE_SLOTS * sizeof(*st->cslot));
            st->ckeys_n = st->cids_n = st->ccount = 0;
            /* the free slot found above is still free after clearing */
            slot = &st->cslot[(uint32_t)hh & (CACHE_SLOTS - 1)];
        }
        memcpy(st->ckeys + st->ckeys_n, u, n);
        memcpy(st->cids + st->cids_n, out->ids + first, nids * sizeof(uint32_t));
        *slot = (struct cache_slot){.hash = h,
                                    .key_off = (uint32_t)st->ckeys_n,
                                    .ids_off = (uint32_t)st->cids_n,
                                    .key_len = (uint16_t)n,
                                    .nids = (uint16_t)nids};
        st->ckeys_n += n;
        st->cids_n += nids;
        st->ccount++;
    }
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
        norm = malloc(len + 1);
        if (!norm)
            return swift_error("out of memory");
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
            char *b = realloc(st->tbuf, nc);
            if (!b) {
                free(norm);
                return swift_error("out of memory");
            }
            st->tbuf = b;
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
    struct many_ctx c = {tok, calloc((size_t)nw, sizeof(void *)), texts, lens, flags, out, 0};
    if (!c.st)
        return swift_error("out of memory");
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

/* ---- decoding ---- */
int swift_tokenizer_decode(const struct swift_tokenizer *tok, const uint32_t *ids, size_t n,
                           int flags, char **text, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= tok->vocab_size || !(tok->info[ids[i]].flags & TI_PRESENT))
            return swift_error("unknown token id %u", ids[i]);
        total += tok->info[ids[i]].len;
    }
    unsigned char *raw = malloc(total + 1);
    char *res = malloc(3 * total + 1); /* each bad byte becomes 3 bytes at most */
    if (!raw || !res) {
        free(raw);
        free(res);
        return swift_error("out of memory");
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tokinfo *ti = &tok->info[ids[i]];
        if ((flags & SWIFT_TOK_SKIP_SPECIAL) && (ti->flags & TI_SPECIAL))
            continue;
        memcpy(raw + r, tok->bytes + ti->off, ti->len);
        r += ti->len;
    }
    size_t o = 0, i = 0;
    while (i < r) {
        uint32_t cp;
        int k = utf8_next(raw + i, r - i, &cp);
        if (k > 0) {
            memcpy(res + o, raw + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(res + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    res[o] = 0;
    free(raw);
    *text = res;
    if (len)
        *len = o;
    return 0;
}

/* ---- queries ---- */
long swift_tokenizer_token_id(const struct swift_tokenizer *tok, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < tok->nadded; i++)
        if (tok->added[i].len == n && !memcmp(tok->added[i].content, s, n))
            return tok->added[i].id;
    return vocab_find(tok, s, n);
}

uint32_t swift_tokenizer_vocab_size(const struct swift_tokenizer *tok)
{
    return tok->vocab_size;
}

const char *swift_tokenizer_token_bytes(const struct swift_tokenizer *tok, uint32_t id, size_t *len)
{
    if (id >= tok->vocab_size || !(tok->info[id].flags & TI_PRESENT))
        return NULL;
    *len = tok->info[id].len;
    return tok->bytes + tok->info[id].off;
}

int swift_tokenizer_is_special(const struct swift_tokenizer *tok, uint32_t id)
{
    return id < tok->vocab_size && (tok->info[id].flags & TI_SPECIAL);
}

const char *swift_tokenizer_sha256(const struct swift_tokenizer *tok)
{
    return tok->sha;
}

const char *swift_tokenizer_config_str(const struct swift_tokenizer *tok, const char *key)
{
    json_t *v = json_object_get(tok->config, key);
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}
