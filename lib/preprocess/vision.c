/*
 * vision — Qwen2-VL's smart_resize and torch's uint8 bicubic antialiased resize
 * (lib/preprocess/vision.h says which transformers path and why).
 */
#include "lib/preprocess/vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/banned.h"

void swift_vl_opts_default(struct swift_vl_opts *o)
{
    o->min_pixels = SWIFT_VL_MIN_PIXELS;
    o->max_pixels = SWIFT_VL_MAX_PIXELS;
    o->patch_size = 14;
    o->merge_size = 2;
    o->temporal_patch_size = 2;
}

int swift_vl_smart_resize(uint32_t height, uint32_t width, uint32_t factor, uint64_t min_pixels,
                          uint64_t max_pixels, uint32_t *out_h, uint32_t *out_w, char *err,
                          size_t errlen)
{
    double h = height, w = width, f = factor;
    double ratio = (h > w ? h : w) / (h < w ? h : w);
    if (ratio > 200) {
        snprintf(err, errlen, "absolute aspect ratio must be smaller than 200, got %.17g", ratio);
        return -1;
    }
    /* Python's round() is half to even: nearbyint in the default rounding mode */
    double hb = nearbyint(h / f) * f, wb = nearbyint(w / f) * f;
    if (hb * wb > (double)max_pixels) {
        double beta = sqrt((double)((uint64_t)height * width) / (double)max_pixels);
        hb = floor(h / beta / f) * f;
        wb = floor(w / beta / f) * f;
        if (hb < f)
            hb = f;
        if (wb < f)
            wb = f;
    } else if (hb * wb < (double)min_pixels) {
        double beta = sqrt((double)min_pixels / (double)((uint64_t)height * width));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > 1e9 || wb > 1e9) {
        snprintf(err, errlen, "image of %ux%u resizes to %.0fx%.0f pixels", width, height, wb, hb);
        return -1;
    }
    *out_h = (uint32_t)hb;
    *out_w = (uint32_t)wb;
    return 0;
}

/* Keys' cubic convolution, a = -0.5 (torch's and Pillow's bicubic). */
static double cubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0)
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

/* One axis: for output i, taps xmin[i] .. xmin[i] + xsize[i] - 1 with int16 weights
 * w[i * ksize + j] at `prec` bits (torch's _compute_index_ranges_int16_weights). */
struct taps {
    int ksize;
    unsigned prec;
    int32_t *xmin, *xsize;
    int16_t *w;
};

static void taps_make(struct taps *t, uint32_t in, uint32_t out)
{
    double scale = (double)in / out;
    double support = scale >= 1.0 ? 2.0 * scale : 2.0;
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->xmin = swift_xmalloc(sizeof(int32_t) * out);
    t->xsize = swift_xmalloc(sizeof(int32_t) * out);
    t->w = swift_xcalloc((size_t)out * (size_t)t->ksize, sizeof(int16_t));
    double *wf = swift_xcalloc((size_t)out * (size_t)t->ksize, sizeof(double));
    double wmax = 0.0;
    for (uint32_t i = 0; i < out; i++) {
        double center = scale * (i + 0.5);
        int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > (int64_t)in)
            hi = in;
        int64_t n = hi - lo;
        if (n > t->ksize)
            n = t->ksize;
        double *row = wf + (size_t)i * t->ksize, total = 0.0;
        for (int64_t j = 0; j < n; j++) {
            row[j] = cubic(((double)(j + lo) - center + 0.5) * invscale);
            total += row[j];
        }
        for (int64_t j = 0; j < n && total != 0.0; j++) {
            row[j] /= total;
            if (row[j] > wmax)
                wmax = row[j];
        }
        t->xmin[i] = (int32_t)lo;
        t->xsize[i] = (int32_t)n;
    }
    unsigned p;
    for (p = 0; p < 22; p++)
        if ((int)(0.5 + wmax * (double)(1u << (p + 1))) >= (1 << 15))
            break;
    t->prec = p;
    for (size_t k = 0; k < (size_t)out * (size_t)t->ksize; k++) {
        double v = wf[k] * (double)(1u << p);
        t->w[k] = (int16_t)(v < 0 ? v - 0.5 : v + 0.5);
    }
    free(wf);
}

static void taps_free(struct taps *t)
{
    free(t->xmin);
    free(t->xsize);
    free(t->w);
}

static uint8_t clip8(int64_t s, unsigned prec)
{
    /* arithmetic shift as _mm_srai_epi32, written as floor division */
    int64_t v = s >= 0 ? s >> prec : -((-s + (1ll << prec) - 1) >> prec);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Resample along x: src rows of w pixels -> dst rows of ow pixels, `rows` rows. */
static void pass_x(const uint8_t *src, uint32_t w, uint32_t rows, uint8_t *dst, uint32_t ow)
{
    struct taps t;
    taps_make(&t, w, ow);
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *s = src + (size_t)y * w * 3;
        uint8_t *d = dst + (size_t)y * ow * 3;
        for (uint32_t x = 0; x < ow; x++) {
            const int16_t *k = t.w + (size_t)x * t.ksize;
            for (int c = 0; c < 3; c++) {
                int64_t acc = 1ll << (t.prec - 1);
                for (int32_t j = 0; j < t.xsize[x]; j++)
                    acc += (int64_t)s[(size_t)(t.xmin[x] + j) * 3 + c] * k[j];
                d[(size_t)x * 3 + c] = clip8(acc, t.prec);
            }
        }
    }
    taps_free(&t);
}

/* Resample along y: h rows -> oh rows of w pixels. */
static void pass_y(const uint8_t *src, uint32_t h, uint32_t w, uint8_t *dst, uint32_t oh)
{
    struct taps t;
    taps_make(&t, h, oh);
    size_t stride = (size_t)w * 3;
    int64_t *acc = swift_xmalloc(sizeof(int64_t) * stride);
    for (uint32_t y = 0; y < oh; y++) {
        const int16_t *k = t.w + (size_t)y * t.ksize;
        for (size_t i = 0; i < stride; i++)
            acc[i] = 1ll << (t.prec - 1);
        for (int32_t j = 0; j < t.xsize[y]; j++) {
            const uint8_t *s = src + (size_t)(t.xmin[y] + j) * stride;
            for (size_t i = 0; i < stride; i++)
                acc[i] += (int64_t)s[i] * k[j];
        }
        uint8_t *d = dst + (size_t)y * stride;
        for (size_t i = 0; i < stride; i++)
            d[i] = clip8(acc[i], t.prec);
    }
    free(acc);
    taps_free(&t);
}

int swift_vl_resize(const uint8_t *src, uint32_t h, uint32_t w, uint8_t *dst, uint32_t oh,
                    uint32_t ow)
{
    if (ow == w && oh == h) {
        memcpy(dst, src, (size_t)h * w * 3);
        return 0;
    }
    if (oh == h) {
        pass_x(src, w, h, dst, ow);
        return 0;
    }
    if (ow == w) {
        pass_y(src, h, w, dst, oh);
        return 0;
    }
    uint8_t *mid = swift_xmalloc((size_t)h * ow * 3);
    pass_x(src, w, h, mid, ow);
    pass_y(mid, h, ow, dst, oh);
    free(mid);
    return 0;
}

int swift_vl_process(const struct swift_image *img, const struct swift_vl_opts *o,
                     struct swift_pixels *px, uint8_t **rgb, char *err, size_t errlen)
{
    uint32_t factor = o->patch_size * o->merge_size, oh, ow;
    memset(px, 0, sizeof *px);
    *rgb = NULL;
    if (swift_vl_smart_resize(
            img->height, img->width, factor, o->min_pixels, o->max_pixels, &oh, &ow, err, errlen) <
        0)
        return -1;
    uint8_t *dst = swift_xmalloc((size_t)oh * ow * 3);
    swift_vl_resize(img->rgb, img->height, img->width, dst, oh, ow);
    px->grid_t = 1;
    px->grid_h = oh / o->patch_size;
    px->grid_w = ow / o->patch_size;
    px->patch_size = o->patch_size;
    px->merge_size = o->merge_size;
    px->temporal_patch_size = o->temporal_patch_size;
    px->height = oh;
    px->width = ow;
    px->rgb = dst;
    *rgb = dst;
    return 0;
}
