/* image — a swift-infer request's images (see image.h): data:, file:// and path URLs read,
 * decoded, processed as Qwen2-VL's image processor does, and the prompt's pads expanded. */
#include "lib/infer/image.h"
#include "lib/core/alloc.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/image.h"
#include "lib/formats/pixels.h"
#include "lib/infer/batch.h"
#include "lib/model/vlm.h"
#include "lib/preprocess/vision.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_IMAGE_FILE ((size_t)64 << 20)

void swift_infer_pixels_release(struct swift_infer_pixels *px)
{
    free(px->pixels);
    free(px->grid);
    memset(px, 0, sizeof(*px));
}

static int b64(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int swift_infer_data_url(const char *url, size_t len, unsigned char **data, size_t *n, char *err,
                         size_t errlen)
{
    *data = NULL;
    *n = 0;
    if (len < 5 || strncmp(url, "data:", 5)) {
        snprintf(err, errlen, "not a data: URL");
        return -1;
    }
    const char *comma = memchr(url, ',', len);
    if (!comma) {
        snprintf(err, errlen, "a data: URL needs a ',' before its data");
        return -1;
    }
    const char *meta = url + 5;
    size_t mlen = (size_t)(comma - meta);
    if (mlen < 7 || memcmp(comma - 7, ";base64", 7)) {
        snprintf(err, errlen, "only base64 data: URLs are read (data:image/png;base64,...)");
        return -1;
    }
    size_t tlen = strcspn(meta, ";,");
    if (tlen > 0 && (tlen < 6 || strncmp(meta, "image/", 6))) {
        snprintf(err,
                 errlen,
                 "data: URL of type '%.*s', not an image",
                 (int)(tlen > 64 ? 64 : tlen),
                 meta);
        return -1;
    }
    const unsigned char *p = (const unsigned char *)comma + 1,
                        *end = (const unsigned char *)url + len;
    unsigned char *out = swift_xmalloc((size_t)(end - p) / 4 * 3 + 3);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    for (; p < end; p++) {
        if (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
            continue;
        if (*p == '=') {
            pad++;
            continue;
        }
        int v = b64(*p);
        if (v < 0 || pad) {
            free(out);
            snprintf(err,
                     errlen,
                     "bad base64 in the data: URL at byte %zu",
                     (size_t)(p - (const unsigned char *)url));
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits >= 6 || pad > 2) {
        free(out);
        snprintf(err, errlen, "truncated base64 in the data: URL");
        return -1;
    }
    *data = out;
    *n = o;
    return 0;
}

/* The whole file, or -1 with the reason in err. */
static int slurp(const char *path, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = swift_xmalloc(cap);
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_IMAGE_FILE) {
                fclose(f);
                free(b);
                snprintf(err, errlen, "'%s' is over %zu bytes", path, MAX_IMAGE_FILE);
                return -1;
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
        snprintf(err, errlen, "cannot read '%s'", path);
        return -1;
    }
    *data = b;
    *len = n;
    return 0;
}

/* The bytes an image reference names. */
static int image_bytes(const char *ref, const char *base, unsigned char **data, size_t *len,
                       char *err, size_t errlen)
{
    if (!strncmp(ref, "data:", 5))
        return swift_infer_data_url(ref, strlen(ref), data, len, err, errlen);
    if (!strncmp(ref, "http://", 7) || !strncmp(ref, "https://", 8)) {
        snprintf(err,
                 errlen,
                 "image URLs are not fetched: download the image and give its path "
                 "or a data: URL");
        return -1;
    }
    const char *path = ref;
    if (!strncmp(ref, "file://", 7)) {
        path = ref + 7;
        if (!strncmp(path, "localhost/", 10))
            path += 9;
        if (path[0] != '/') {
            snprintf(err, errlen, "a file:// URL must name an absolute local path");
            return -1;
        }
    }
    if (!path[0]) {
        snprintf(err, errlen, "empty image path");
        return -1;
    }
    int rc;
    if (base && path[0] != '/' && path == ref) {
        char *full = swift_asprintf("%s/%s", base, path);
        rc = slurp(full, data, len, err, errlen);
        free(full);
    } else {
        rc = slurp(path, data, len, err, errlen);
    }
    return rc;
}

int swift_infer_image_load(const char *ref, const char *base, const struct swift_vl_opts *vo,
                           int patch_dim, struct swift_infer_pixels *px, char *err, size_t errlen)
{
    unsigned char *data = NULL;
    size_t len = 0;
    struct swift_image img = {0};
    struct swift_pixels p;
    uint8_t *rgb = NULL;
    int64_t t0 = swift_trace_now();
    int rc = image_bytes(ref, base, &data, &len, err, errlen);
    if (rc == 0)
        rc = swift_image_decode(data, len, SWIFT_IMAGE_MAX_PIXELS, &img, err, errlen);
    free(data);
    if (rc == 0)
        rc = swift_vl_process(&img, vo, &p, &rgb, err, errlen);
    if (rc == 0) {
        size_t np = (size_t)swift_pixels_patches(&p), pd = (size_t)swift_pixels_patch_dim(&p);
        if (pd != (size_t)patch_dim) {
            snprintf(err, errlen, "%zu floats per patch, the model takes %d", pd, patch_dim);
            rc = -1;
        } else {
            px->pixels =
                swift_xrealloc(px->pixels, ((size_t)px->npatches + np) * pd * sizeof(float));
            swift_pixels_expand(&p, px->pixels + (size_t)px->npatches * pd);
            px->npatches += (int)np;
            px->grid = swift_xrealloc(px->grid, ((size_t)px->nimages + 1) * 3 * sizeof(int32_t));
            int32_t *g = px->grid + 3 * px->nimages++;
            g[0] = (int32_t)p.grid_t;
            g[1] = (int32_t)p.grid_h;
            g[2] = (int32_t)p.grid_w;
        }
    }
    if (swift_trace_enabled())
        swift_trace_span("io",
                         "image_decode",
                         t0,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_I("bytes", len),
                                               SWIFT_TARG_I("width", img.width),
                                               SWIFT_TARG_I("height", img.height)},
                         3);
    swift_image_release(&img);
    free(rgb);
    return rc;
}

int swift_infer_expand_pads(int32_t pad, int merge_size, const struct swift_infer_pixels *px,
                            int32_t **ids, int *n, char *err, size_t errlen)
{
    int ms = merge_size, have = 0;
    long total = *n;
    for (int i = 0; i < *n; i++)
        have += (*ids)[i] == pad;
    if (have != px->nimages) {
        snprintf(err,
                 errlen,
                 "the prompt has %d image pads for %d images (an image's place is one image_url "
                 "part, or one <image> in a row)",
                 have,
                 px->nimages);
        return -1;
    }
    for (int k = 0; k < px->nimages; k++)
        total += (long)px->grid[3 * k] * px->grid[3 * k + 1] * px->grid[3 * k + 2] / (ms * ms) - 1;
    if (total > INT32_MAX / 2) {
        snprintf(err, errlen, "the images take too many tokens");
        return -1;
    }
    int32_t *out = swift_xmalloc((size_t)total * sizeof(int32_t));
    int o = 0, k = 0;
    for (int i = 0; i < *n; i++) {
        if ((*ids)[i] != pad) {
            out[o++] = (*ids)[i];
            continue;
        }
        int cnt = px->grid[3 * k] * px->grid[3 * k + 1] * px->grid[3 * k + 2] / (ms * ms);
        for (int j = 0; j < cnt; j++)
            out[o++] = pad;
        k++;
    }
    free(*ids);
    *ids = out;
    *n = o;
    return 0;
}

int swift_infer_images(const struct swift_infer_model *im, const struct swift_oai_request *rq,
                       const char *base, int32_t **ids, int *n, struct swift_infer_pixels *px,
                       struct swift_oai_error *er)
{
    memset(px, 0, sizeof(*px));
    if (rq->nimages == 0)
        return 0;
    if (!im->vlm)
        return swift_oai_fail(
            er, 400, "messages", NULL, "the model takes no images (not a vision-language model)");
    char err[400];
    for (int k = 0; k < rq->nimages; k++) {
        if (swift_infer_image_load(rq->images[k],
                                   rq->images_rel ? base : NULL,
                                   &im->vo,
                                   im->vlm->vc.patch_dim,
                                   px,
                                   err,
                                   sizeof(err)) < 0) {
            swift_infer_pixels_release(px);
            return swift_oai_fail(er, 400, "messages", "invalid_image", "image %d: %s", k, err);
        }
    }
    if (swift_infer_expand_pads(
            im->vlm->vc.image_token_id, im->vlm->vc.merge_size, px, ids, n, err, sizeof(err)) < 0) {
        swift_infer_pixels_release(px);
        return swift_oai_fail(er, 400, "messages", NULL, "%s", err);
    }
    return 0;
}
