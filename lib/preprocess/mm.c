/*
 * mm — a multimodal row's images (docs/multimodal.md): read each file named in the row's
 * "images" (relative to the data file), decode it [trace span image_decode], resize it as
 * Qwen2-VL's processor does, serialize it for the content-addressed cache
 * (lib/formats/pixels.h), and put the image's tokens where its "<image>" placeholder was:
 * <|vision_start|> + <|image_pad|> x (grid_h * grid_w / merge^2) + <|vision_end|>, as
 * Qwen2-VL's processor expands the chat template's single <|image_pad|>.
 */
#include "lib/preprocess/internal.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/image.h"
#include "lib/formats/pixels.h"
#include "lib/preprocess/vision.h"
#include "lib/core/banned.h"

#define PLACEHOLDER "<image>"
#define MAX_IMAGE_FILE ((size_t)1 << 30)
#define MAX_ROW_IMAGES 256

void swift_pp_images_free(struct pp_images *im)
{
    free(im->v);
    free(im->keys);
    memset(im, 0, sizeof *im);
}

/* The whole file, or -1 with "cannot open: reason" in err. */
static int slurp(const char *path, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return swift_row_errf(err, errlen, "cannot open: %s", strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = swift_xmalloc(cap);
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_IMAGE_FILE) {
                fclose(f);
                free(b);
                return swift_row_errf(err, errlen, "file over %zu bytes", MAX_IMAGE_FILE);
            }
            cap *= 2;
            b = swift_xrealloc(b, cap);
        }
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return swift_row_errf(err, errlen, "read error");
    }
    *data = b;
    *len = n;
    return 0;
}

/* The image's path as the row names it: a string, or {"path": string} (ms-swift / datasets). */
static const char *image_ref(json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "path");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Decode and process one image into im->v[i]; *tokens gets its <|image_pad|> count. */
/* The cache directory, made by the first worker that needs it. Returns it or NULL (reported). */
static const char *cache_dir(struct pp_cache *cache)
{
    pthread_mutex_lock(&cache->lock);
    if (!cache->dir) {
        char *d = swift_asprintf("%s.images-XXXXXX", cache->output);
        char *slash = strrchr(d, '/');
        if (slash) { /* the output's parent, as swift_atomic_dir_begin makes it */
            *slash = 0;
            swift_mkdirs(d, 0755);
            *slash = '/';
        }
        if (!mkdtemp(d)) {
            swift_error_errno("cannot create '%s'", d);
            free(d);
        } else {
            chmod(d, 0755); /* mkdtemp's 0700 would become the output's images/ */
            cache->dir = d;
        }
    }
    const char *dir = cache->dir;
    pthread_mutex_unlock(&cache->lock);
    return dir;
}

/* px into the cache (content addressed: concurrent writers of one image write the same bytes
 * under the same name, each atomically) or, without a cache, just its name. */
static int cache_put(struct pp_cache *cache, const struct swift_pixels *px, char hex[65], char *why,
                     size_t whylen)
{
    if (!cache) {
        unsigned char *buf;
        size_t len;
        swift_pixels_serialize(px, &buf, &len, hex);
        free(buf);
        return 0;
    }
    const char *dir = cache_dir(cache);
    if (!dir || swift_pixels_store(px, dir, hex) < 0)
        return swift_row_errf(why, whylen, "cannot write the image cache (see above)");
    return 0;
}

static int one_image(const char *ref, const char *file, const struct swift_vl_opts *vo,
                     struct pp_cache *cache, struct pp_image *pi, uint64_t *tokens, char *err,
                     size_t errlen)
{
    if (!strncmp(ref, "http://", 7) || !strncmp(ref, "https://", 8))
        return swift_row_errf(
            err, errlen, "image '%s': URLs are not fetched (download it, name the file)", ref);
    char *path = NULL;
    const char *slash = strrchr(file, '/');
    if (ref[0] == '/' || !slash)
        path = swift_xstrdup(ref);
    else
        path = swift_asprintf("%.*s/%s", (int)(slash - file), file, ref);
    int64_t t0 = swift_trace_now();
    unsigned char *data = NULL;
    size_t len = 0;
    char why[300];
    struct swift_image img = {0};
    struct swift_pixels px;
    uint8_t *rgb = NULL;
    int rc = slurp(path, &data, &len, why, sizeof why);
    if (rc == 0)
        rc = swift_image_decode(data, len, SWIFT_IMAGE_MAX_PIXELS, &img, why, sizeof why);
    free(data);
    if (rc == 0)
        rc = swift_vl_process(&img, vo, &px, &rgb, why, sizeof why);
    if (rc == 0) {
        rc = cache_put(cache, &px, pi->hex, why, sizeof why);
        *tokens = pi->tokens = swift_pixels_tokens(&px);
        pi->grid_h = px.grid_h;
        pi->grid_w = px.grid_w;
    }
    if (swift_trace_enabled())
        swift_trace_span("io",
                         "image_decode",
                         t0,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_S("path", path),
                                               SWIFT_TARG_I("bytes", len),
                                               SWIFT_TARG_I("width", img.width),
                                               SWIFT_TARG_I("height", img.height),
                                               SWIFT_TARG_I("tokens", rc == 0 ? *tokens : 0)},
                         5);
    swift_image_release(&img);
    free(rgb);
    if (rc < 0)
        swift_row_errf(err, errlen, "image '%s': %s", path, why);
    free(path);
    return rc;
}

static char *put(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

static size_t count_placeholders(const char *s, size_t n)
{
    size_t k = 0;
    for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), PLACEHOLDER, 7)); p += 7)
        k++;
    return k;
}

/* Replace each placeholder of conv's messages by its image's tokens (text; special tokens
 * are parsed when the template tokenizes the content). New strings are kept alive in hold. */
static void expand(struct swift_conv *conv, const uint64_t *tokens, size_t nimg, json_t *hold)
{
    size_t next = 0;
    for (size_t m = 0; m < conv->n && next < nimg; m++) {
        struct swift_message *msg = &conv->msg[m];
        size_t k = count_placeholders(msg->content, msg->len);
        if (!k)
            continue;
        size_t cap = msg->len + 1;
        for (size_t i = next; i < next + k && i < nimg; i++)
            cap += 40 + tokens[i] * 13;
        char *out = swift_xmalloc(cap), *o = out;
        const char *p = msg->content, *end = msg->content + msg->len;
        while (p < end) {
            const char *q = memmem(p, (size_t)(end - p), PLACEHOLDER, 7);
            if (!q || next >= nimg) {
                q = end;
            }
            memcpy(o, p, (size_t)(q - p));
            o += q - p;
            if (q == end)
                break;
            o = put(o, "<|vision_start|>");
            for (uint64_t t = 0; t < tokens[next]; t++)
                o = put(o, "<|image_pad|>");
            o = put(o, "<|vision_end|>");
            next++;
            p = q + 7;
        }
        json_t *s = json_stringn_nocheck(out, (size_t)(o - out));
        free(out);
        json_array_append_new(hold, s);
        msg->content = json_string_value(s);
        msg->len = json_string_length(s);
    }
}

int swift_pp_images_unsupported(json_t *obj, int kind, char *err, size_t errlen)
{
    json_t *list = json_object_get(obj, "images");
    if (kind == SWIFT_KIND_SFT || !list || json_is_null(list) ||
        (json_is_array(list) && json_array_size(list) == 0))
        return 0;
    return swift_row_errf(err,
                          errlen,
                          "\"images\" in a %s row: images are read in SFT rows only, so far",
                          swift_row_kind_name(kind));
}

int swift_pp_row_images(json_t *obj, const char *file, const struct swift_vl_opts *vo,
                        const struct swift_tokenizer *tok, struct pp_cache *cache,
                        struct swift_conv *conv, json_t *hold, struct pp_images *im, char *err,
                        size_t errlen)
{
    memset(im, 0, sizeof *im);
    json_t *list = json_object_get(obj, "images");
    if (!list || json_is_null(list))
        return 0;
    if (json_is_string(list) || json_is_object(list)) {
        json_t *one = json_array();
        json_array_append(one, list);
        json_array_append_new(hold, one);
        list = one;
    }
    if (!json_is_array(list))
        return swift_row_errf(err, errlen, "\"images\" must be a list of paths");
    size_t n = json_array_size(list);
    if (n == 0)
        return 0;
    if (n > MAX_ROW_IMAGES)
        return swift_row_errf(err, errlen, "%zu images in one row (at most %d)", n, MAX_ROW_IMAGES);
    static const char *const need[] = {"<|vision_start|>", "<|image_pad|>", "<|vision_end|>"};
    for (int i = 0; i < 3; i++)
        if (swift_tokenizer_token_id(tok, need[i]) < 0)
            return swift_row_errf(err,
                                  errlen,
                                  "the tokenizer has no %s token (images need a Qwen2-VL "
                                  "tokenizer)",
                                  need[i]);
    size_t have = 0, first_user = conv->n;
    for (size_t m = 0; m < conv->n; m++) {
        have += count_placeholders(conv->msg[m].content, conv->msg[m].len);
        if (first_user == conv->n && conv->msg[m].role == SWIFT_ROLE_USER)
            first_user = m;
    }
    if (have == 0 && first_user < conv->n) {
        /* ms-swift's default: no placeholder at all puts every image before the first query */
        size_t len = conv->msg[first_user].len;
        char *t = swift_xmalloc(n * 7 + len + 1);
        for (size_t i = 0; i < n; i++)
            memcpy(t + i * 7, PLACEHOLDER, 7);
        memcpy(t + n * 7, conv->msg[first_user].content, len);
        json_t *s = json_stringn_nocheck(t, n * 7 + len);
        free(t);
        json_array_append_new(hold, s);
        conv->msg[first_user].content = json_string_value(s);
        conv->msg[first_user].len = json_string_length(s);
        have = n;
    }
    if (have != n)
        return swift_row_errf(
            err, errlen, "%zu <image> placeholders for %zu images in \"images\"", have, n);
    im->v = swift_xcalloc(n, sizeof *im->v);
    im->pad_id = (uint32_t)swift_tokenizer_token_id(tok, "<|image_pad|>");
    uint64_t *tokens = swift_xcalloc(n, sizeof *tokens);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *ref = image_ref(json_array_get(list, i));
        if (!ref)
            rc = swift_row_errf(err, errlen, "images[%zu] is not a path", i);
        else
            rc = one_image(ref, file, vo, cache, &im->v[i], &tokens[i], err, errlen);
        if (rc == 0)
            im->n++;
    }
    if (rc == 0) {
        expand(conv, tokens, n, hold);
        /* the document's cache keys, as JSON strings joined by commas ("hex","hex") */
        im->keys = swift_xmalloc(n * 68 + 1);
        char *o = im->keys;
        for (size_t i = 0; i < n; i++) {
            if (i)
                *o++ = ',';
            *o++ = '"';
            o = put(o, im->v[i].hex);
            *o++ = '"';
        }
        *o = 0;
        im->keys_len = (size_t)(o - im->keys);
    }
    free(tokens);
    if (rc < 0)
        swift_pp_images_free(im);
    return rc;
}

int swift_pp_add_doc_images(const struct swift_preprocess_opts *o, struct pp_store *s,
                            struct pp_stats *st, const uint32_t *ids, const uint8_t *mask,
                            uint64_t n, const struct pp_images *im)
{
    const char *keys = im->keys;
    size_t keys_len = im->keys_len;
    if (n == 0)
        return 0;
    if (n > (uint64_t)o->max_length) {
        st->dropped++;
        return 0;
    }
    if (swift_pp_add_doc(o, s, st, ids, mask, n) < 0)
        return -1;
    uint64_t d = s->ndocs - 1; /* the document just stored */
    if (s->img_offcap < s->ndocs + 1) {
        uint64_t nc = s->img_offcap ? s->img_offcap : 1024;
        while (nc < s->ndocs + 1)
            nc *= 2;
        s->img_off = swift_xrealloc(s->img_off, nc * sizeof(uint64_t));
        if (!s->img_offcap)
            s->img_off[0] = 0;
        s->img_offcap = nc;
    }
    for (uint64_t k = s->img_docs; k < d; k++) /* documents before it without images */
        s->img_off[k + 1] = s->img_n;
    if (s->img_n + keys_len > s->img_cap) {
        uint64_t nc = s->img_cap ? s->img_cap : 1 << 16;
        while (nc < s->img_n + keys_len)
            nc *= 2;
        s->img = swift_xrealloc(s->img, nc);
        s->img_cap = nc;
    }
    memcpy(s->img + s->img_n, keys, keys_len);
    s->img_n += keys_len;
    s->img_off[d + 1] = s->img_n;
    s->img_docs = d + 1;
    s->images = 1;
    if (o->mode == SWIFT_PP_RENDER) { /* the grids, for --render --packing's output */
        if (s->nrimg + im->n > s->caprimg) {
            s->caprimg = 2 * (s->nrimg + im->n);
            s->rimg = swift_xrealloc(s->rimg, s->caprimg * sizeof(*s->rimg));
        }
        memcpy(s->rimg + s->nrimg, im->v, im->n * sizeof(*s->rimg));
        s->nrimg += im->n;
        s->pad_id = im->pad_id;
    }
    return 0;
}

size_t swift_pp_sample_images(const struct pp_store *s, const uint64_t *order, uint64_t a,
                              uint64_t b, char **buf, size_t *cap)
{
    size_t need = 16;
    for (uint64_t j = a; j < b; j++)
        if (order[j] < s->img_docs)
            need += s->img_off[order[j] + 1] - s->img_off[order[j]] + 1;
    if (need > *cap) {
        *cap = need;
        *buf = swift_xrealloc(*buf, need);
    }
    char *o = put(*buf, "{\"images\":[");
    int first = 1;
    for (uint64_t j = a; j < b; j++) {
        uint64_t d = order[j];
        if (d >= s->img_docs || s->img_off[d + 1] == s->img_off[d])
            continue;
        if (!first)
            *o++ = ',';
        memcpy(o, s->img + s->img_off[d], s->img_off[d + 1] - s->img_off[d]);
        o += s->img_off[d + 1] - s->img_off[d];
        first = 0;
    }
    o = put(o, "]}");
    return (size_t)(o - *buf);
}

int swift_pp_move_images(char **dir, const char *out)
{
    char *dst = swift_path_join(out, "images");
    int rc = rename(*dir, dst);
    if (rc < 0)
        swift_error_errno("cannot move '%s' to '%s'", *dir, dst);
    else {
        free(*dir);
        *dir = NULL;
    }
    free(dst);
    return rc < 0 ? -1 : 0;
}

void swift_pp_put_image_spans(FILE *fp, const struct pp_images *im, const uint32_t *ids, uint32_t n)
{
    if (!im->n)
        return;
    fputs(",\"images\":[", fp);
    uint32_t pos = 0;
    for (size_t k = 0; k < im->n; k++) {
        while (pos < n && ids[pos] != im->pad_id) /* the next run of <|image_pad|> */
            pos++;
        int64_t start = pos < n ? (int64_t)pos : -1;
        while (pos < n && ids[pos] == im->pad_id)
            pos++;
        fprintf(fp,
                "%s{\"sha256\":\"%s\",\"grid_thw\":[1,%u,%u],\"start\":%" PRId64
                ",\"tokens\":%" PRIu64 "}",
                k ? "," : "",
                im->v[k].hex,
                im->v[k].grid_h,
                im->v[k].grid_w,
                start,
                im->v[k].tokens);
    }
    fputs("]", fp);
}
