/* shard_index — index.json of a shard directory: writing, parsing, the kind checks (see
 * shard.h; the binary files are shard.c's). */
#include "lib/formats/shard.h"
#include "lib/core/alloc.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/core/sha256.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define INDEX_MAX_BYTES ((size_t)256 << 20)

/* ---- index.json ---- */
void swift_shard_index_init(struct swift_shard_index *ix)
{
    memset(ix, 0, sizeof(*ix));
    ix->version = SWIFT_SHARD_INDEX_VERSION;
}

void swift_shard_index_release(struct swift_shard_index *ix)
{
    free(ix->tokenizer);
    free(ix->tokenizer_sha256);
    free(ix->template_name);
    free(ix->loss);
    free(ix->truncation);
    free(ix->packing);
    free(ix->split);
    free(ix->kind);
    for (size_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i].file);
    free(ix->shards);
    free(ix->image_cache);
    memset(ix, 0, sizeof(*ix));
}

int swift_shard_index_add(struct swift_shard_index *ix, const char *file, uint64_t samples,
                          uint64_t tokens, uint32_t crc)
{
    ix->shards = swift_xrealloc(ix->shards, (ix->n_shards + 1) * sizeof(*ix->shards));
    struct swift_shard_entry *e = &ix->shards[ix->n_shards];
    e->file = swift_xstrdup(file);
    e->samples = samples;
    e->tokens = tokens;
    e->crc32 = crc;
    ix->n_shards++;
    return 0;
}

static void set_str(json_t *o, const char *k, const char *v)
{
    json_object_set_new(o, k, v ? json_string(v) : json_null());
}

int swift_shard_index_write(const struct swift_shard_index *ix, const char *dir)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string(SWIFT_SHARD_INDEX_FORMAT));
    int sft = !strcmp(swift_shard_index_kind(ix), "sft");
    json_object_set_new(o,
                        "version",
                        json_integer(ix->image_cache ? SWIFT_SHARD_INDEX_VERSION_IMAGES
                                     : sft           ? SWIFT_SHARD_INDEX_VERSION
                                                     : SWIFT_SHARD_INDEX_VERSION_KIND));
    if (!sft) /* SFT indexes stay as they were (no "kind", version 1) */
        set_str(o, "kind", ix->kind);
    set_str(o, "split", ix->split);
    set_str(o, "tokenizer", ix->tokenizer);
    set_str(o, "tokenizer_sha256", ix->tokenizer_sha256);
    set_str(o, "template", ix->template_name);
    set_str(o, "loss", ix->loss);
    set_str(o, "truncation", ix->truncation);
    set_str(o, "packing", ix->packing);
    json_object_set_new(o, "max_length", json_integer((json_int_t)ix->max_length));
    json_object_set_new(o, "vocab_size", json_integer((json_int_t)ix->vocab_size));
    json_object_set_new(o, "seed", json_integer((json_int_t)ix->seed));
    json_t *c = json_object();
    json_object_set_new(c, "samples", json_integer((json_int_t)ix->samples));
    json_object_set_new(c, "documents", json_integer((json_int_t)ix->documents));
    json_object_set_new(c, "dropped", json_integer((json_int_t)ix->dropped));
    json_object_set_new(c, "truncated", json_integer((json_int_t)ix->truncated));
    json_object_set_new(c, "tokens", json_integer((json_int_t)ix->tokens));
    json_object_set_new(c, "trained_tokens", json_integer((json_int_t)ix->trained_tokens));
    json_object_set_new(o, "counts", c);
    json_object_set_new(o, "packing_efficiency", json_real(ix->packing_efficiency));
    json_t *ls = json_object();
    json_object_set_new(ls, "mean", json_real(ix->len_mean));
    json_object_set_new(ls, "std", json_real(ix->len_std));
    json_object_set_new(ls, "min", json_integer((json_int_t)ix->len_min));
    json_object_set_new(ls, "max", json_integer((json_int_t)ix->len_max));
    json_object_set_new(o, "length", ls);
    json_t *sh = json_array();
    for (size_t i = 0; i < ix->n_shards; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "file", json_string(ix->shards[i].file));
        json_object_set_new(e, "samples", json_integer((json_int_t)ix->shards[i].samples));
        json_object_set_new(e, "tokens", json_integer((json_int_t)ix->shards[i].tokens));
        json_object_set_new(e, "crc32", json_integer((json_int_t)ix->shards[i].crc32));
        json_array_append_new(sh, e);
    }
    json_object_set_new(o, "shards", sh);
    if (ix->image_cache) {
        json_t *im = json_object();
        json_object_set_new(im, "cache", json_string(ix->image_cache));
        json_object_set_new(im, "references", json_integer((json_int_t)ix->image_refs));
        json_object_set_new(im, "processor", json_string("qwen2_vl"));
        json_object_set_new(im, "min_pixels", json_integer((json_int_t)ix->image_min_pixels));
        json_object_set_new(im, "max_pixels", json_integer((json_int_t)ix->image_max_pixels));
        json_object_set_new(o, "images", im);
    }
    char *path = swift_path_join(dir, "index.json");
    int rc = swift_json_write_file(path, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    free(path);
    return rc;
}

static int get_str(json_t *o, const char *k, char **dst, const char *name)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return swift_error_at(name, 0, "\"%s\" must be a string", k);
    *dst = swift_xstrdup(json_string_value(v));
    return 0;
}

static int get_u64j(json_t *o, const char *k, uint64_t *dst, const char *name, int required)
{
    json_t *v = json_object_get(o, k);
    if (!v) {
        if (required)
            return swift_error_at(name, 0, "missing \"%s\"", k);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return swift_error_at(name, 0, "\"%s\" must be a non-negative integer", k);
    *dst = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_dbl(json_t *o, const char *k, double *dst, const char *name)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return swift_error_at(name, 0, "\"%s\" must be a number", k);
    *dst = json_number_value(v);
    return 0;
}

/* Version 3: an SFT index with the "images" object (and only version 3 has one). */
static int parse_images(struct swift_shard_index *ix, json_t *o, uint64_t ver, const char *name)
{
    json_t *im = json_object_get(o, "images");
    if ((ver == SWIFT_SHARD_INDEX_VERSION_IMAGES) != (im != NULL))
        return swift_error_at(name,
                              0,
                              im ? "\"images\" needs index version %d"
                                 : "index version %d needs an \"images\" object",
                              SWIFT_SHARD_INDEX_VERSION_IMAGES);
    if (!im)
        return 0;
    if (strcmp(swift_shard_index_kind(ix), "sft"))
        return swift_error_at(name, 0, "\"images\" with kind \"%s\"", ix->kind);
    if (!json_is_object(im))
        return swift_error_at(name, 0, "\"images\" must be an object");
    if (get_str(im, "cache", &ix->image_cache, name) < 0 ||
        get_u64j(im, "references", &ix->image_refs, name, 0) < 0 ||
        get_u64j(im, "min_pixels", &ix->image_min_pixels, name, 0) < 0 ||
        get_u64j(im, "max_pixels", &ix->image_max_pixels, name, 0) < 0)
        return -1;
    const char *c = ix->image_cache;
    if (!c || !*c || (strcmp(c, "images") && strcmp(c, "../images")))
        return swift_error_at(name, 0, "\"images\".\"cache\" must be \"images\" or \"../images\"");
    return 0;
}

static int parse_obj(struct swift_shard_index *ix, json_t *o, const char *name)
{
    if (!json_is_object(o))
        return swift_error_at(name, 0, "index must be a JSON object");
    json_t *f = json_object_get(o, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), SWIFT_SHARD_INDEX_FORMAT))
        return swift_error_at(
            name, 0, "not a shard index (\"format\" is not \"%s\")", SWIFT_SHARD_INDEX_FORMAT);
    uint64_t ver = 0;
    if (get_u64j(o, "version", &ver, name, 1) < 0)
        return -1;
    if (ver != SWIFT_SHARD_INDEX_VERSION && ver != SWIFT_SHARD_INDEX_VERSION_KIND &&
        ver != SWIFT_SHARD_INDEX_VERSION_IMAGES)
        return swift_error_at(name,
                              0,
                              "unsupported index version %" PRIu64 " (this build reads %d to %d)",
                              ver,
                              SWIFT_SHARD_INDEX_VERSION,
                              SWIFT_SHARD_INDEX_VERSION_IMAGES);
    ix->version = (int)ver;
    if (get_str(o, "kind", &ix->kind, name) < 0)
        return -1;
    if (ix->kind && strcmp(ix->kind, "sft") && strcmp(ix->kind, "pairs") &&
        strcmp(ix->kind, "kto") && strcmp(ix->kind, "prompts"))
        return swift_error_at(
            name,
            0,
            "unknown \"kind\" '%s' (this build reads sft, pairs, kto and prompts)",
            ix->kind);
    if (get_str(o, "split", &ix->split, name) < 0 ||
        get_str(o, "tokenizer", &ix->tokenizer, name) < 0 ||
        get_str(o, "tokenizer_sha256", &ix->tokenizer_sha256, name) < 0 ||
        get_str(o, "template", &ix->template_name, name) < 0 ||
        get_str(o, "loss", &ix->loss, name) < 0 ||
        get_str(o, "truncation", &ix->truncation, name) < 0 ||
        get_str(o, "packing", &ix->packing, name) < 0 ||
        get_u64j(o, "max_length", &ix->max_length, name, 1) < 0 ||
        get_u64j(o, "vocab_size", &ix->vocab_size, name, 0) < 0 ||
        get_u64j(o, "seed", &ix->seed, name, 0) < 0 ||
        get_dbl(o, "packing_efficiency", &ix->packing_efficiency, name) < 0)
        return -1;
    if (parse_images(ix, o, ver, name) < 0)
        return -1;
    json_t *c = json_object_get(o, "counts");
    if (!json_is_object(c))
        return swift_error_at(name, 0, "missing \"counts\" object");
    if (get_u64j(c, "samples", &ix->samples, name, 1) < 0 ||
        get_u64j(c, "documents", &ix->documents, name, 0) < 0 ||
        get_u64j(c, "dropped", &ix->dropped, name, 0) < 0 ||
        get_u64j(c, "truncated", &ix->truncated, name, 0) < 0 ||
        get_u64j(c, "tokens", &ix->tokens, name, 1) < 0 ||
        get_u64j(c, "trained_tokens", &ix->trained_tokens, name, 0) < 0)
        return -1;
    json_t *ls = json_object_get(o, "length");
    if (ls) {
        if (!json_is_object(ls))
            return swift_error_at(name, 0, "\"length\" must be an object");
        if (get_dbl(ls, "mean", &ix->len_mean, name) < 0 ||
            get_dbl(ls, "std", &ix->len_std, name) < 0 ||
            get_u64j(ls, "min", &ix->len_min, name, 0) < 0 ||
            get_u64j(ls, "max", &ix->len_max, name, 0) < 0)
            return -1;
    }
    json_t *sh = json_object_get(o, "shards");
    if (!json_is_array(sh))
        return swift_error_at(name, 0, "missing \"shards\" array");
    uint64_t tot_s = 0, tot_t = 0;
    for (size_t i = 0; i < json_array_size(sh); i++) {
        json_t *e = json_array_get(sh, i);
        json_t *file = json_object_get(e, "file");
        uint64_t s = 0, t = 0, crc = 0;
        if (!json_is_object(e) || !json_is_string(file))
            return swift_error_at(name, 0, "shards[%zu]: expected {\"file\": ...}", i);
        const char *fn = json_string_value(file);
        if (!*fn || strchr(fn, '/') || !strcmp(fn, ".") || !strcmp(fn, ".."))
            return swift_error_at(
                name, 0, "shards[%zu]: file name '%s' must be a plain name", i, fn);
        if (get_u64j(e, "samples", &s, name, 1) < 0 || get_u64j(e, "tokens", &t, name, 1) < 0 ||
            get_u64j(e, "crc32", &crc, name, 0) < 0)
            return -1;
        if (crc > UINT32_MAX)
            return swift_error_at(name, 0, "shards[%zu]: crc32 out of range", i);
        if (swift_shard_index_add(ix, fn, s, t, (uint32_t)crc) < 0)
            return -1;
        tot_s += s;
        tot_t += t;
    }
    if (tot_s != ix->samples || tot_t != ix->tokens)
        return swift_error_at(name,
                              0,
                              "shard list holds %" PRIu64 " samples / %" PRIu64
                              " tokens, counts say %" PRIu64 " / %" PRIu64,
                              tot_s,
                              tot_t,
                              ix->samples,
                              ix->tokens);
    return 0;
}

int swift_shard_index_parse(struct swift_shard_index *ix, const char *text, size_t len,
                            const char *name)
{
    swift_shard_index_init(ix);
    json_error_t err;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!o)
        return swift_error_at(name, err.line, "%s", err.text);
    int rc = parse_obj(ix, o, name);
    json_decref(o);
    if (rc < 0)
        swift_shard_index_release(ix);
    return rc;
}

int swift_shard_index_read(struct swift_shard_index *ix, const char *dir)
{
    swift_shard_index_init(ix);
    char *path = swift_path_join(dir, "index.json");
    char *text;
    size_t len;
    int rc = swift_read_file(path, INDEX_MAX_BYTES, &text, &len);
    if (rc == 0) {
        rc = swift_shard_index_parse(ix, text, len, path);
        free(text);
    }
    free(path);
    return rc;
}

const char *swift_shard_index_kind(const struct swift_shard_index *ix)
{
    if (ix->kind &&
        (!strcmp(ix->kind, "pairs") || !strcmp(ix->kind, "kto") || !strcmp(ix->kind, "prompts")))
        return ix->kind;
    return "sft";
}

int swift_shard_index_check_kind(const struct swift_shard_index *ix, const char *want,
                                 const char *what, const char *data_dir)
{
    const char *have = swift_shard_index_kind(ix);
    if (!strcmp(have, want))
        return 0;
    static const char *const desc[][2] = {{"sft", "SFT samples"},
                                          {"pairs", "preference pairs"},
                                          {"kto", "KTO's labelled samples"},
                                          {"prompts", "prompts (GRPO)"}};
    const char *dh = have, *dw = want;
    for (size_t i = 0; i < sizeof(desc) / sizeof(desc[0]); i++) {
        if (!strcmp(have, desc[i][0]))
            dh = desc[i][1];
        if (!strcmp(want, desc[i][0]))
            dw = desc[i][1];
    }
    return swift_error("%s/index.json: the shards hold %s (kind \"%s\"), %s needs %s (make them "
                       "with swift-preprocess --kind %s)",
                       data_dir,
                       dh,
                       have,
                       what,
                       dw,
                       want);
}

int swift_shard_index_check_tokenizer(const struct swift_shard_index *ix, const char *model_dir,
                                      const char *data_dir)
{
    if (!ix->tokenizer_sha256)
        return 0;
    char *tj = swift_path_join(model_dir, "tokenizer.json");
    if (access(tj, R_OK) < 0) {
        free(tj);
        return 0;
    }
    char hex[65];
    int rc = swift_sha256_file(tj, hex);
    if (rc == 0 && strcmp(hex, ix->tokenizer_sha256))
        rc = swift_error("%s/index.json: shards were made with another tokenizer (sha256 %.12s…, "
                         "the model's tokenizer.json is %.12s…)",
                         data_dir,
                         ix->tokenizer_sha256,
                         hex);
    free(tj);
    return rc;
}
