/*
 * pixels — the ".pix" image cache files and the float expansion of a resized image into
 * Qwen2-VL's pixel_values (lib/formats/pixels.h).
 */
#include "lib/formats/pixels.h"
#include "lib/formats/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/core/banned.h"

const float swift_pixels_clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
const float swift_pixels_clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};

/* The largest image a file may hold: 2^15 patches a side, far above any processor setting. */
#define MAX_GRID 32768u

uint64_t swift_pixels_patches(const struct swift_pixels *px)
{
    return (uint64_t)px->grid_t * px->grid_h * px->grid_w;
}

uint64_t swift_pixels_patch_dim(const struct swift_pixels *px)
{
    return 3ull * px->temporal_patch_size * px->patch_size * px->patch_size;
}

uint64_t swift_pixels_values_size(const struct swift_pixels *px)
{
    return swift_pixels_patches(px) * swift_pixels_patch_dim(px) * sizeof(float);
}

uint64_t swift_pixels_tokens(const struct swift_pixels *px)
{
    return swift_pixels_patches(px) / ((uint64_t)px->merge_size * px->merge_size);
}

void swift_pixels_expand(const struct swift_pixels *px, float *out)
{
    const uint32_t P = px->patch_size, M = px->merge_size, T = px->temporal_patch_size;
    const uint32_t W = px->width;
    float mean[3], stdv[3];
    for (int c = 0; c < 3; c++) {
        /* transformers fuses rescale into normalize: mean and std times 1/rescale_factor (255)
         * as float32 tensors, then (float(x) - mean) / std */
        mean[c] = swift_pixels_clip_mean[c] * 255.0f;
        stdv[c] = swift_pixels_clip_std[c] * 255.0f;
    }
    float *o = out;
    for (uint32_t bh = 0; bh < px->grid_h / M; bh++)
        for (uint32_t bw = 0; bw < px->grid_w / M; bw++)
            for (uint32_t mh = 0; mh < M; mh++)
                for (uint32_t mw = 0; mw < M; mw++) {
                    uint32_t y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    for (uint32_t c = 0; c < 3; c++) {
                        float *first = o;
                        for (uint32_t py = 0; py < P; py++) {
                            const uint8_t *row = px->rgb + ((size_t)(y0 + py) * W + x0) * 3 + c;
                            for (uint32_t q = 0; q < P; q++)
                                *o++ = ((float)row[q * 3] - mean[c]) / stdv[c];
                        }
                        for (uint32_t t = 1; t < T; t++, o += P * P)
                            memcpy(o, first, sizeof(float) * P * P);
                    }
                }
}

static uint32_t crc_of(const unsigned char *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int swift_pixels_check(struct swift_pixels *px, const unsigned char *buf, size_t len, char *err,
                       size_t errlen)
{
    memset(px, 0, sizeof *px);
    if (len < SWIFT_PIXELS_HEADER_SIZE)
        return fail(err, errlen, "offset 0: file of %zu bytes is shorter than the header", len);
    if (memcmp(buf, SWIFT_PIXELS_MAGIC, 8) != 0)
        return fail(err, errlen, "offset 0: bad magic (not an image cache file)");
    uint32_t version = swift_le_get32(buf + 8), hsize = swift_le_get32(buf + 12);
    if (version != SWIFT_PIXELS_VERSION)
        return fail(err, errlen, "offset 8: unsupported image cache version %u", version);
    if (hsize < SWIFT_PIXELS_HEADER_SIZE || hsize > len)
        return fail(err, errlen, "offset 12: bad header size %u", hsize);
    px->grid_t = swift_le_get32(buf + 16);
    px->grid_h = swift_le_get32(buf + 20);
    px->grid_w = swift_le_get32(buf + 24);
    px->patch_size = swift_le_get32(buf + 28);
    px->merge_size = swift_le_get32(buf + 32);
    px->temporal_patch_size = swift_le_get32(buf + 36);
    if (px->grid_t != 1 || px->patch_size == 0 || px->patch_size > 64 || px->merge_size == 0 ||
        px->merge_size > 8 || px->temporal_patch_size == 0 || px->temporal_patch_size > 8)
        return fail(err, errlen, "offset 16: bad processor settings");
    if (px->grid_h == 0 || px->grid_w == 0 || px->grid_h > MAX_GRID || px->grid_w > MAX_GRID ||
        px->grid_h % px->merge_size || px->grid_w % px->merge_size)
        return fail(err, errlen, "offset 20: bad grid %ux%u", px->grid_h, px->grid_w);
    px->height = px->grid_h * px->patch_size;
    px->width = px->grid_w * px->patch_size;
    uint64_t want = (uint64_t)px->height * px->width * 3, payload = swift_le_get64(buf + 40);
    if (payload != want || payload != len - hsize)
        return fail(err,
                    errlen,
                    "offset 40: payload of %llu bytes, expected %llu",
                    (unsigned long long)payload,
                    (unsigned long long)want);
    if (crc_of(buf + hsize, payload) != swift_le_get32(buf + 48))
        return fail(err, errlen, "offset %u: payload CRC mismatch (corrupt file)", hsize);
    px->rgb = buf + hsize;
    return 0;
}

int swift_pixels_parse(struct swift_pixels *px, const unsigned char *buf, size_t len,
                       const char *name)
{
    char err[200];
    if (swift_pixels_check(px, buf, len, err, sizeof err) < 0)
        return swift_error("%s: %s", name, err);
    return 0;
}

int swift_pixels_serialize(const struct swift_pixels *px, unsigned char **buf, size_t *len,
                           char hex[65])
{
    uint64_t payload = (uint64_t)px->height * px->width * 3;
    size_t n = SWIFT_PIXELS_HEADER_SIZE + (size_t)payload;
    unsigned char *b = swift_xcalloc(1, n);
    memcpy(b, SWIFT_PIXELS_MAGIC, 8);
    swift_le_put32(b + 8, SWIFT_PIXELS_VERSION);
    swift_le_put32(b + 12, SWIFT_PIXELS_HEADER_SIZE);
    swift_le_put32(b + 16, px->grid_t);
    swift_le_put32(b + 20, px->grid_h);
    swift_le_put32(b + 24, px->grid_w);
    swift_le_put32(b + 28, px->patch_size);
    swift_le_put32(b + 32, px->merge_size);
    swift_le_put32(b + 36, px->temporal_patch_size);
    swift_le_put64(b + 40, payload);
    memcpy(b + SWIFT_PIXELS_HEADER_SIZE, px->rgb, (size_t)payload);
    swift_le_put32(b + 48, crc_of(b + SWIFT_PIXELS_HEADER_SIZE, payload));
    swift_sha256_hex(b, n, hex);
    *buf = b;
    *len = n;
    return 0;
}

int swift_pixels_store(const struct swift_pixels *px, const char *dir, char hex[65])
{
    unsigned char *buf;
    size_t len;
    swift_pixels_serialize(px, &buf, &len, hex);
    char *path = swift_asprintf("%s/%s%s", dir, hex, SWIFT_PIXELS_EXT);
    struct stat st;
    int rc = 0;
    if (stat(path, &st) != 0 || (size_t)st.st_size != len)
        rc = swift_atomic_write(path, buf, len);
    free(path);
    free(buf);
    return rc;
}

int swift_pixels_load(struct swift_pixels *px, unsigned char **buf, const char *dir,
                      const char *hex)
{
    char *path = swift_asprintf("%s/%s%s", dir, hex, SWIFT_PIXELS_EXT);
    char *data;
    size_t len;
    *buf = NULL;
    if (swift_read_file(path, (size_t)1 << 34, &data, &len) < 0) {
        free(path);
        return -1;
    }
    char got[65];
    swift_sha256_hex(data, len, got);
    int rc = swift_pixels_parse(px, (const unsigned char *)data, len, path);
    if (rc == 0 && strcmp(got, hex) != 0)
        rc = swift_error("%s: content hashes to %s, not to its name (corrupt file)", path, got);
    free(path);
    if (rc < 0) {
        free(data);
        memset(px, 0, sizeof *px);
        return -1;
    }
    *buf = (unsigned char *)data;
    return 0;
}
