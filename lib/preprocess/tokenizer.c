/* tokenizer — the tables of a byte-level BPE tokenizer, freeing, decoding and queries (see
 * tokenizer.h for the pipeline, internal.h for how the files divide the work). */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/preprocess/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_ADDED 65536

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

/* ---- building the tables ---- */
static int add_bytes(struct swift_tokenizer *tok, const char *s, size_t n, uint32_t *off)
{
    if (tok->nbytes + n + 1 > tok->capbytes) {
        size_t nc = tok->capbytes ? tok->capbytes : 1 << 20;
        while (nc < tok->nbytes + n + 1)
            nc *= 2;
        if (nc > ((size_t)1 << 32))
            return swift_error("%s: vocabulary too large", tok->name);
        tok->bytes = swift_xrealloc(tok->bytes, nc);
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
    if (id >= TOK_MAX_VOCAB)
        return swift_error("%s: token id %u too large", tok->name, id);
    if (id < tok->vocab_size)
        return 0;
    static const size_t step = 4096;
    size_t oldcap = (tok->vocab_size + step - 1) / step * step;
    size_t newcap = ((size_t)id + 1 + step - 1) / step * step;
    if (newcap > oldcap || !tok->info) {
        struct tokinfo *ti = swift_xrealloc(tok->info, newcap * sizeof(*ti));
        memset(ti + (tok->info ? oldcap : 0), 0, (newcap - (tok->info ? oldcap : 0)) * sizeof(*ti));
        tok->info = ti;
    }
    tok->vocab_size = id + 1;
    return 0;
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
int swift_tok_vocab_set(struct swift_tokenizer *tok, const char *s, size_t n, uint32_t id,
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

int swift_tok_vocab_index(struct swift_tokenizer *tok)
{
    uint32_t size = 1024;
    while (size < 2 * tok->vocab_size + 16)
        size *= 2;
    tok->vslot = swift_xcalloc(size, sizeof(uint32_t));
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

void swift_tok_merges_alloc(struct swift_tokenizer *tok, size_t n)
{
    uint64_t size = 1024;
    while (size < 2 * (uint64_t)n + 16)
        size *= 2;
    tok->mslot = swift_xcalloc(size, sizeof(*tok->mslot));
    tok->mmask = size - 1;
}

/* Add merge number `rank` of byte-level strings a and b. */
int swift_tok_merge_add(struct swift_tokenizer *tok, const char *a, size_t na, const char *b,
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

int swift_tok_added_add(struct swift_tokenizer *tok, const char *content, size_t len, uint32_t id,
                        int special, int lstrip, int rstrip)
{
    if (len == 0)
        return swift_error("%s: added token %u has empty content", tok->name, id);
    if (tok->nadded >= MAX_ADDED)
        return swift_error("%s: too many added tokens", tok->name);
    if (ensure_id(tok, id) < 0)
        return -1;
    tok->added = swift_xrealloc(tok->added, (tok->nadded + 1) * sizeof(*tok->added));
    struct added *a = tok->added + tok->nadded;
    a->content = swift_xmalloc(len + 1);
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
    char *scratch = swift_xmalloc(len + 1);
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

static void build_added_index(struct swift_tokenizer *tok)
{
    for (size_t i = 0; i < tok->nadded; i++) {
        unsigned char c = (unsigned char)tok->added[i].content[0];
        uint32_t *p = swift_xrealloc(tok->afirst[c], (tok->nafirst[c] + 1) * sizeof(uint32_t));
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
}

int swift_tok_regex_add(struct swift_tokenizer *tok, const char *pat, size_t n, int literal)
{
    if (tok->nre >= TOK_MAX_REGEX)
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

void swift_tok_finish(struct swift_tokenizer *tok)
{
    tok->bytepair = swift_xcalloc(65536, sizeof(*tok->bytepair));
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
            tok->bytepair[a << 8 | b] =
                merge_find(tok, (uint32_t)tok->byte_id[a], (uint32_t)tok->byte_id[b]);
    build_added_index(tok);
}

struct swift_tokenizer *swift_tok_new(const char *name)
{
    init_bytemap();
    struct swift_tokenizer *tok = swift_xcalloc(1, sizeof(*tok));
    tok->name = swift_xstrdup(name);
    return tok;
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
    unsigned char *raw = swift_xmalloc(total + 1);
    char *res = swift_xmalloc(3 * total + 1); /* each bad byte becomes 3 bytes at most */
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
