/* tokenizer_json — loading a tokenizer: tokenizer.json, GPT-2's encoder.json + vocab.bpe, and
 * tokenizer_config.json next to them (see tokenizer.h; the tables are built by tokenizer.c). */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/preprocess/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define MAX_FILE ((size_t)1 << 30)

static const char GPT2_REGEX[] = SWIFT_TOK_GPT2_REGEX;

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
            return swift_tok_regex_add(tok, GPT2_REGEX, strlen(GPT2_REGEX), 0);
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
            return swift_tok_regex_add(tok, json_string_value(re), json_string_length(re), 0);
        if (json_is_string(str))
            return swift_tok_regex_add(tok, json_string_value(str), json_string_length(str), 1);
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
                json_integer_value(x) >= TOK_MAX_VOCAB)
                return bad(tok, "TemplateProcessing: bad id");
            uint32_t **arr = seen_a ? &tok->post_ids : &tok->pre_ids;
            size_t *cnt = seen_a ? &tok->npost : &tok->npre;
            if (*cnt >= 64)
                return bad(tok, "TemplateProcessing: too many tokens");
            uint32_t *q = swift_xrealloc(*arr, (*cnt + 1) * sizeof(uint32_t));
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
    char *scratch = swift_xmalloc(maxlen + 1);
    json_object_foreach(vocab, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= TOK_MAX_VOCAB) {
            free(scratch);
            return swift_error("%s: vocab entry '%s': id must be an integer in [0, %u)",
                               tok->name,
                               k,
                               TOK_MAX_VOCAB);
        }
        if (swift_tok_vocab_set(tok, k, strlen(k), (uint32_t)json_integer_value(v), scratch) < 0) {
            free(scratch);
            return -1;
        }
    }
    free(scratch);
    return swift_tok_vocab_index(tok);
}

static int parse_merges(struct swift_tokenizer *tok, json_t *merges)
{
    if (!json_is_array(merges))
        return bad(tok, "model.merges must be an array");
    size_t n = json_array_size(merges);
    swift_tok_merges_alloc(tok, n);
    size_t cap = 1024;
    char *scratch = swift_xmalloc(cap);
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
            scratch = swift_xrealloc(scratch, cap);
        }
        rc = swift_tok_merge_add(tok, a, na, b, nb, (uint32_t)i, scratch, (long)i);
    }
    free(scratch);
    return rc;
}

int swift_tokenizer_load_json(struct swift_tokenizer **out, const char *text, size_t len,
                              const char *name)
{
    *out = NULL;
    struct swift_tokenizer *tok = swift_tok_new(name);
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
                json_integer_value(id) >= TOK_MAX_VOCAB || !json_is_string(c))
                rc = swift_error(
                    "%s: added_tokens[%zu]: needs \"id\" and \"content\"", tok->name, i);
            else
                rc = swift_tok_added_add(tok,
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
        swift_tok_finish(tok);
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
    struct swift_tokenizer *tok = swift_tok_new(name);
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
        swift_tok_merges_alloc(tok, nlines + 1);
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
            scratch = swift_xrealloc(scratch, cap);
        }
        rc = swift_tok_merge_add(
            tok, l, (size_t)(sp - l), sp + 1, n - (size_t)(sp + 1 - l), rank, scratch, lineno);
        rank++;
    }
    free(scratch);
    if (rc == 0)
        rc = swift_tok_regex_add(tok, GPT2_REGEX, strlen(GPT2_REGEX), 0);
    if (rc == 0) {
        long eot = vocab_find(tok, "<|endoftext|>", 13);
        if (eot >= 0)
            rc = swift_tok_added_add(tok, "<|endoftext|>", 13, (uint32_t)eot, 1, 0, 0);
    }
    if (rc == 0)
        swift_tok_finish(tok);
    if (rc < 0) {
        swift_tokenizer_free(tok);
        return -1;
    }
    *out = tok;
    return 0;
}

/* A GGUF file: named *.gguf, or starting with the magic */
static int is_gguf(const char *path)
{
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".gguf"))
        return 1;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, fp);
    fclose(fp);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

int swift_tokenizer_load(struct swift_tokenizer **out, const char *dir)
{
    *out = NULL;
    char *path;
    int is_file = !swift_is_dir(dir);
    if (is_file && is_gguf(dir))
        return swift_tokenizer_load_gguf(out, dir);
    path = is_file ? swift_xstrdup(dir) : swift_path_join(dir, "tokenizer.json");
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
