/* export/vocab — tokenizer.ggml.* keys from tokenizer.json + tokenizer_config.json, as
 * llama.cpp's convert_hf_to_gguf.py (_set_vocab_gpt2 + gguf-py SpecialVocab) writes them. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* config.json's vocab_size is input: past this many token slots it is an error, not an
 * allocation (the largest vocabularies in use hold about 256K tokens). */
#define SWIFT_EXPORT_MAX_VOCAB (1 << 24)

enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

/* convert_hf_to_gguf.py does_token_look_special() */
static int looks_special(const char *t)
{
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
        !strcmp(t, "[@BOS@]"))
        return 1;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>"))
        return 1;
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>"))
        return 1;
    if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>')
        return 1;
    return 0;
}

/* "▁" (U+2581) → " " in place (user-defined tokens are stored pre-normalized) */
static void unspace(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (!strncmp(r, "\xe2\x96\x81", 3)) {
            *w++ = ' ';
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

static const char *token_content(json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static const char *detect_pre(json_t *tok, const char *arch)
{
    json_t *pre = json_object_get(tok, "pre_tokenizer");
    const char *type = json_string_value(json_object_get(pre, "type"));
    if (!type)
        return NULL;
    if (!strcmp(type, "ByteLevel"))
        return json_is_true(json_object_get(pre, "use_regex")) ? "gpt-2" : NULL;
    if (strcmp(type, "Sequence"))
        return NULL;
    json_t *list = json_object_get(pre, "pretokenizers");
    size_t i;
    json_t *p;
    json_array_foreach(list, i, p)
    {
        const char *t = json_string_value(json_object_get(p, "type"));
        if (!t || strcmp(t, "Split"))
            continue;
        const char *re = json_string_value(json_object_get(json_object_get(p, "pattern"), "Regex"));
        if (!re)
            continue;
        if (strstr(re, "\\p{N}{1,3}"))
            return "llama-bpe";
        if (strstr(re, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"))
            return "qwen2";
    }
    (void)arch;
    return NULL;
}

/* tokens[id] and types[id] for every id below n: model.vocab, then added_tokens (special ones
 * CONTROL, the others USER with "▁" as a space), the rest "[PADn]" UNUSED. */
static int read_tokens(const char *tpath, json_t *tok, int64_t n, char **tokens, int32_t *types)
{
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val)
    {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0)
            return swift_error("%s: vocab entry '%s' has no valid id", tpath, key);
        if (id >= n)
            return swift_error("%s: token id %lld is not below config.json vocab_size %lld",
                               tpath,
                               (long long)id,
                               (long long)n);
        free(tokens[id]);
        tokens[id] = swift_xstrdup(key);
        types[id] = TOK_NORMAL;
    }
    json_t *added = json_object_get(tok, "added_tokens");
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        const char *content = json_string_value(json_object_get(a, "content"));
        json_t *jid = json_object_get(a, "id");
        if (!content || !json_is_integer(jid) || json_integer_value(jid) < 0)
            return swift_error("%s: added_tokens[%zu] needs \"id\" and \"content\"", tpath, i);
        json_int_t id = json_integer_value(jid);
        if (id >= n)
            return swift_error("%s: added token id %lld is not below config.json vocab_size %lld",
                               tpath,
                               (long long)id,
                               (long long)n);
        free(tokens[id]);
        tokens[id] = swift_xstrdup(content);
        if (json_is_true(json_object_get(a, "special")) || looks_special(content)) {
            types[id] = TOK_CONTROL;
        } else {
            types[id] = TOK_USER;
            unspace(tokens[id]);
        }
    }
    for (int64_t k = 0; k < n; k++) {
        if (!types[k]) {
            char pad[32];
            snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)k);
            tokens[k] = swift_xstrdup(pad);
            types[k] = TOK_UNUSED;
        }
    }
    return 0;
}

/* model.merges as "a b" strings (a list of strings, or of [a, b] pairs). *out (caller frees
 * its *nout strings) is set even on failure. */
static int read_merges(const char *tpath, json_t *tok, char ***out, size_t *nout)
{
    json_t *jm = json_object_get(json_object_get(tok, "model"), "merges");
    size_t nmerges = *nout = json_array_size(jm);
    char **merges = *out = swift_xcalloc(nmerges ? nmerges : 1, sizeof(*merges));
    for (size_t k = 0; k < nmerges; k++) {
        json_t *m = json_array_get(jm, k);
        if (json_is_string(m)) {
            merges[k] = swift_xstrdup(json_string_value(m));
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            const char *l = json_string_value(json_array_get(m, 0));
            const char *r = json_string_value(json_array_get(m, 1));
            size_t len = strlen(l) + strlen(r) + 2;
            merges[k] = swift_xmalloc(len);
            snprintf(merges[k], len, "%s %s", l, r);
        } else {
            return swift_error(
                "%s: model.merges[%zu] is neither \"a b\" nor [\"a\",\"b\"]", tpath, k);
        }
    }
    return 0;
}

/* The id of special token `typ` ("bos", ...): tokenizer_config's TYP_token content looked up in
 * added_tokens (then the vocab), else config.json's TYP_token_id (gguf-py SpecialVocab); -1. */
static int64_t special_id(const char *typ, json_t *tok, json_t *tcfg, const json_t *config)
{
    char k[64];
    snprintf(k, sizeof(k), "%s_token", typ);
    const char *content = token_content(json_object_get(tcfg, k));
    int64_t id = -1;
    if (content) {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(tok, "added_tokens"), i, a)
        {
            const char *c = json_string_value(json_object_get(a, "content"));
            if (c && !strcmp(c, content)) {
                id = json_integer_value(json_object_get(a, "id"));
                break;
            }
        }
        json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
        if (id < 0 && json_is_integer(json_object_get(vocab, content)))
            id = json_integer_value(json_object_get(vocab, content));
    }
    if (id < 0) {
        snprintf(k, sizeof(k), "%s_token_id", typ);
        json_t *v = json_object_get(config, k);
        if (json_is_integer(v))
            id = json_integer_value(v);
        else if (json_is_array(v) && json_is_integer(json_array_get(v, 0)))
            id = json_integer_value(json_array_get(v, 0));
    }
    return id;
}

/* tokenizer.ggml.*_token_id and add_{bos,eos}_token. */
static int set_specials(struct swift_gguf_writer *w, json_t *tok, json_t *tcfg,
                        const struct swift_hparams *hp)
{
    static const struct {
        const char *typ, *key;
    } specials[] = {{"bos", "tokenizer.ggml.bos_token_id"},
                    {"eos", "tokenizer.ggml.eos_token_id"},
                    {"unk", "tokenizer.ggml.unknown_token_id"},
                    {"sep", "tokenizer.ggml.seperator_token_id"},
                    {"pad", "tokenizer.ggml.padding_token_id"},
                    {"cls", "tokenizer.ggml.cls_token_id"},
                    {"mask", "tokenizer.ggml.mask_token_id"}};
    for (size_t s = 0; s < sizeof(specials) / sizeof(specials[0]); s++) {
        int64_t id = special_id(specials[s].typ, tok, tcfg, hp->config);
        if (id >= 0 && id < hp->vocab_size &&
            swift_gguf_set_u32(w, specials[s].key, (uint32_t)id) < 0)
            return -1;
    }
    static const char *const addk[][2] = {{"add_bos_token", "tokenizer.ggml.add_bos_token"},
                                          {"add_eos_token", "tokenizer.ggml.add_eos_token"}};
    for (int s = 0; s < 2; s++) {
        json_t *v = json_object_get(tcfg, addk[s][0]);
        if (json_is_boolean(v) && swift_gguf_set_bool(w, addk[s][1], json_is_true(v)) < 0)
            return -1;
    }
    return 0;
}

/* tokenizer.chat_template: tokenizer_config's chat_template (a string, or a list of named ones
 * whose "default" is used), else MODEL_DIR/chat_template.jinja, else nothing. */
static int set_chat_template(struct swift_gguf_writer *w, json_t *tcfg, const char *model_dir)
{
    json_t *ct = json_object_get(tcfg, "chat_template");
    const char *tmpl = json_string_value(ct);
    if (json_is_array(ct)) {
        size_t i;
        json_t *a;
        json_array_foreach(ct, i, a)
        {
            const char *nm = json_string_value(json_object_get(a, "name"));
            if (nm && !strcmp(nm, "default"))
                tmpl = json_string_value(json_object_get(a, "template"));
        }
    }
    char *jinja = NULL;
    if (!tmpl) {
        char *jp = swift_path_join(model_dir, "chat_template.jinja");
        size_t len;
        if (access(jp, R_OK) == 0 && swift_read_file(jp, 16 << 20, &jinja, &len) < 0) {
            free(jp);
            return -1;
        }
        free(jp);
        tmpl = jinja;
    }
    int rc = tmpl ? swift_gguf_set_str(w, "tokenizer.chat_template", tmpl) : 0;
    free(jinja);
    return rc < 0 ? -1 : 0;
}

int swift_export_tokenizer(struct swift_gguf_writer *w, const char *model_dir,
                           const struct swift_hparams *hp, const char *pre_override)
{
    char *tpath = swift_path_join(model_dir, "tokenizer.json");
    char *cpath = swift_path_join(model_dir, "tokenizer_config.json");
    json_t *tok = NULL, *tcfg = NULL;
    char **tokens = NULL;
    int32_t *types = NULL;
    char **merges = NULL;
    size_t nmerges = 0;
    int64_t n = hp->vocab_size;
    int rc = -1;

    tok = swift_json_load(tpath);
    if (!tok)
        goto out;
    if (access(cpath, R_OK) == 0 && !(tcfg = swift_json_load(cpath)))
        goto out;
    if (!tcfg)
        tcfg = json_object();
    json_t *model = json_object_get(tok, "model");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (!mtype || strcmp(mtype, "BPE")) {
        swift_error("%s: tokenizer model '%s' is not supported (byte-level BPE only)",
                    tpath,
                    mtype ? mtype : "?");
        goto out;
    }
    if (!json_is_object(json_object_get(model, "vocab"))) {
        swift_error("%s: model.vocab is not an object", tpath);
        goto out;
    }
    if (n > SWIFT_EXPORT_MAX_VOCAB) {
        swift_error("%s/config.json: vocab_size %lld is more than %d",
                    model_dir,
                    (long long)n,
                    SWIFT_EXPORT_MAX_VOCAB);
        goto out;
    }
    tokens = swift_xcalloc((size_t)n, sizeof(*tokens));
    types = swift_xcalloc((size_t)n, sizeof(*types));
    if (read_tokens(tpath, tok, n, tokens, types) < 0 ||
        read_merges(tpath, tok, &merges, &nmerges) < 0)
        goto out;
    const char *pre = pre_override ? pre_override : detect_pre(tok, hp->arch);
    if (!pre) {
        swift_error("%s: cannot tell the pre-tokenizer (gpt-2, llama-bpe or qwen2) from "
                    "pre_tokenizer; pass --tokenizer-pre NAME",
                    tpath);
        goto out;
    }
    if (swift_gguf_set_str(w, "tokenizer.ggml.model", "gpt2") < 0 ||
        swift_gguf_set_str(w, "tokenizer.ggml.pre", pre) < 0 ||
        swift_gguf_set_arr_str(
            w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n) < 0 ||
        swift_gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n) < 0 ||
        swift_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, nmerges) <
            0)
        goto out;
    if (set_specials(w, tok, tcfg, hp) < 0 || set_chat_template(w, tcfg, model_dir) < 0)
        goto out;
    rc = 0;
out:
    if (tokens)
        for (int64_t k = 0; k < n; k++)
            free(tokens[k]);
    free(tokens);
    free(types);
    if (merges)
        for (size_t k = 0; k < nmerges; k++)
            free(merges[k]);
    free(merges);
    json_decref(tok);
    json_decref(tcfg);
    free(tpath);
    free(cpath);
    return rc;
}
