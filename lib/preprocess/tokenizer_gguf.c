/* tokenizer_gguf — a tokenizer from a GGUF file's tokenizer.ggml.* metadata (what swift-export
 * and llama.cpp's convert_hf_to_gguf.py write for byte-level BPE: model "gpt2"), built to give
 * the ids the model's tokenizer.json gives (see tokenizer.h). */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/sha256.h"
#include "lib/formats/gguf.h"
#include "lib/preprocess/internal.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* llama.cpp's token types (llama_token_type) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* tokenizer.ggml.pre → what the model's tokenizer.json says: the Split regex (Llama 3's and
 * Qwen2's pre_tokenizer; GPT-2's ByteLevel regex), the NFC normalizer (Qwen2), ignore_merges
 * (Llama 3). */
static const struct pre_info {
    const char *name;
    const char *regex;
    int norm, ignore_merges;
} pres[] = {
    {"gpt-2", SWIFT_TOK_GPT2_REGEX, NORM_NONE, 0},
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     NORM_NONE,
     1},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     NORM_NFC,
     0},
};

static const struct swift_gguf_value *str_array(const struct swift_gguf *g, const char *key)
{
    const struct swift_gguf_value *v = swift_gguf_get(g, key);
    return v && v->type == SWIFT_GGUF_ARRAY && v->v.arr.elem_type == SWIFT_GGUF_STRING ? v : NULL;
}

/* Vocabulary entries, then added tokens (CONTROL special, USER not), UNUSED ones left out. */
static int gguf_vocab(struct swift_tokenizer *tok, const struct swift_gguf *g, const char *path,
                      struct swift_sha256 *sh)
{
    const struct swift_gguf_value *tv = str_array(g, "tokenizer.ggml.tokens");
    if (!tv || tv->v.arr.n == 0 || tv->v.arr.n > TOK_MAX_VOCAB)
        return swift_error("%s: tokenizer.ggml.tokens is missing or not a list of strings", path);
    const struct swift_gguf_value *ty = swift_gguf_get(g, "tokenizer.ggml.token_type");
    if (ty && (ty->type != SWIFT_GGUF_ARRAY || ty->v.arr.n != tv->v.arr.n))
        return swift_error("%s: tokenizer.ggml.token_type does not match the tokens", path);
    size_t maxlen = 1;
    for (uint64_t i = 0; i < tv->v.arr.n; i++)
        if (tv->v.arr.items[i].v.str.len > maxlen)
            maxlen = tv->v.arr.items[i].v.str.len;
    char *scratch = swift_xmalloc(maxlen + 1);
    int rc = 0;
    for (uint64_t i = 0; i < tv->v.arr.n && rc == 0; i++) {
        const struct swift_gguf_value *s = &tv->v.arr.items[i];
        int64_t t = TT_NORMAL;
        if (ty && swift_gguf_value_int(&ty->v.arr.items[i], &t) < 0)
            t = TT_NORMAL;
        swift_sha256_update(sh, s->v.str.s, s->v.str.len + 1);
        if (t == TT_UNUSED)
            continue;
        if (t == TT_CONTROL || t == TT_USER)
            rc = swift_tok_added_add(
                tok, s->v.str.s, (size_t)s->v.str.len, (uint32_t)i, t == TT_CONTROL, 0, 0);
        else
            rc = swift_tok_vocab_set(tok, s->v.str.s, (size_t)s->v.str.len, (uint32_t)i, scratch);
    }
    free(scratch);
    return rc < 0 ? -1 : swift_tok_vocab_index(tok);
}

static int gguf_merges(struct swift_tokenizer *tok, const struct swift_gguf *g, const char *path,
                       struct swift_sha256 *sh)
{
    const struct swift_gguf_value *mv = str_array(g, "tokenizer.ggml.merges");
    uint64_t n = mv ? mv->v.arr.n : 0;
    if (!mv && swift_gguf_get(g, "tokenizer.ggml.merges"))
        return swift_error("%s: tokenizer.ggml.merges is not a list of strings", path);
    swift_tok_merges_alloc(tok, (size_t)n);
    size_t cap = 1024;
    char *scratch = swift_xmalloc(cap);
    int rc = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        const char *s = mv->v.arr.items[i].v.str.s;
        size_t len = (size_t)mv->v.arr.items[i].v.str.len;
        swift_sha256_update(sh, s, len + 1);
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) {
            rc = swift_error(
                "%s: tokenizer.ggml.merges[%llu]: expected \"a b\"", path, (unsigned long long)i);
            break;
        }
        if (len + 2 > cap) {
            cap = 2 * len + 16;
            scratch = swift_xrealloc(scratch, cap);
        }
        rc = swift_tok_merge_add(tok,
                                 s,
                                 (size_t)(sp - s),
                                 sp + 1,
                                 len - (size_t)(sp + 1 - s),
                                 (uint32_t)i,
                                 scratch,
                                 (long)i);
    }
    free(scratch);
    return rc;
}

/* The tokenizer_config.json keys the rest of the code reads: bos/eos/pad/unk tokens (from the
 * ids), chat_template, add_bos_token / add_eos_token. */
static json_t *gguf_config(const struct swift_gguf *g)
{
    static const char *const sp[][2] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
                                        {"tokenizer.ggml.eos_token_id", "eos_token"},
                                        {"tokenizer.ggml.padding_token_id", "pad_token"},
                                        {"tokenizer.ggml.unknown_token_id", "unk_token"}};
    json_t *cfg = json_object();
    const struct swift_gguf_value *tv = str_array(g, "tokenizer.ggml.tokens");
    for (size_t k = 0; k < sizeof(sp) / sizeof(sp[0]); k++) {
        int64_t id;
        const struct swift_gguf_value *v = swift_gguf_get(g, sp[k][0]);
        if (v && swift_gguf_value_int(v, &id) == 0 && id >= 0 && (uint64_t)id < tv->v.arr.n)
            json_object_set_new(cfg, sp[k][1], json_string(tv->v.arr.items[id].v.str.s));
    }
    const struct swift_gguf_value *ct = swift_gguf_get(g, "tokenizer.chat_template");
    if (ct && ct->type == SWIFT_GGUF_STRING)
        json_object_set_new(cfg, "chat_template", json_string(ct->v.str.s));
    static const char *const addk[][2] = {{"tokenizer.ggml.add_bos_token", "add_bos_token"},
                                          {"tokenizer.ggml.add_eos_token", "add_eos_token"}};
    for (int k = 0; k < 2; k++) {
        const struct swift_gguf_value *v = swift_gguf_get(g, addk[k][0]);
        if (v && v->type == SWIFT_GGUF_BOOL)
            json_object_set_new(cfg, addk[k][1], json_boolean(v->v.u));
    }
    return cfg;
}

static int gguf_build(struct swift_tokenizer *tok, const struct swift_gguf *g, const char *path)
{
    const struct swift_gguf_value *m = swift_gguf_get(g, "tokenizer.ggml.model");
    if (!m || m->type != SWIFT_GGUF_STRING)
        return swift_error("%s: no tokenizer.ggml.model", path);
    if (strcmp(m->v.str.s, "gpt2"))
        return swift_error(
            "%s: tokenizer model '%s' is not supported (byte-level BPE, \"gpt2\", only)",
            path,
            m->v.str.s);
    const struct swift_gguf_value *pv = swift_gguf_get(g, "tokenizer.ggml.pre");
    const char *pre = pv && pv->type == SWIFT_GGUF_STRING ? pv->v.str.s : "gpt-2";
    const struct pre_info *pi = NULL;
    for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++)
        if (!strcmp(pres[i].name, pre))
            pi = &pres[i];
    if (!pi)
        return swift_error(
            "%s: tokenizer.ggml.pre '%s' is not supported (gpt-2, llama-bpe, qwen2)", path, pre);
    struct swift_sha256 sh;
    swift_sha256_init(&sh);
    if (gguf_vocab(tok, g, path, &sh) < 0 || gguf_merges(tok, g, path, &sh) < 0) {
        char unused[65];
        swift_sha256_final(&sh, unused); /* frees the context */
        return -1;
    }
    swift_sha256_update(&sh, pre, strlen(pre));
    swift_sha256_final(&sh, tok->sha);
    tok->norm = pi->norm;
    tok->ignore_merges = pi->ignore_merges;
    if (swift_tok_regex_add(tok, pi->regex, strlen(pi->regex), 0) < 0)
        return -1;
    tok->config = gguf_config(g);
    return 0;
}

int swift_tokenizer_from_gguf(struct swift_tokenizer **out, const struct swift_gguf *g,
                              const char *name)
{
    *out = NULL;
    struct swift_tokenizer *tok = swift_tok_new(name);
    if (gguf_build(tok, g, name) < 0) {
        swift_tokenizer_free(tok);
        return -1;
    }
    swift_tok_finish(tok);
    *out = tok;
    return 0;
}

int swift_tokenizer_load_gguf(struct swift_tokenizer **out, const char *path)
{
    *out = NULL;
    struct swift_gguf *g;
    if (swift_gguf_open(path, &g) < 0)
        return -1;
    int rc = swift_tokenizer_from_gguf(out, g, path);
    swift_gguf_free(g);
    return rc;
}
