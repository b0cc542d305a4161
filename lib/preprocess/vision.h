/*
 * vision — Qwen2-VL's image processor up to the cache (docs/multimodal.md "Images"): smart_resize
 * to multiples of 28 (patch 14 x merge 2) within min_pixels..max_pixels, then the bicubic
 * antialiased resize, into a struct swift_pixels that lib/formats/pixels.h stores and expands.
 *
 * Which transformers path this matches: transformers 5.24's AutoImageProcessor gives Qwen2-VL
 * the torchvision backend (Qwen2VLImageProcessor; Qwen2VLImageProcessorPil only without
 * torchvision). Its resize is torchvision's resize on the uint8 CHW tensor, bicubic with
 * antialias, which on CPU runs torch's native uint8 kernel (_upsample_bicubic2d_aa): Keys'
 * cubic with a = -0.5, support 2 * max(scale, 1), weights normalized per output pixel and then
 * rounded to int16 with the largest precision (<= 22 bits) that keeps the largest weight under
 * 2^15; horizontal pass first, each pass rounding (+2^(p-1), arithmetic shift) and clipping
 * to 0..255. That is Pillow's BICUBIC (ImagingResample) except for Pillow's fixed 22-bit
 * precision, which changes about one pixel in a hundred by 1; we follow torch, the default, and
 * are bit-exact with it (tests/unit/test_vision.c against tests/ref/gen_vision_fixtures.py).
 *
 *     struct swift_vl_opts o;
 *     swift_vl_opts_default(&o);                // 56*56 .. 28*28*1280 pixels
 *     struct swift_pixels px;
 *     uint8_t *rgb;
 *     if (swift_vl_process(&img, &o, &px, &rgb, err, sizeof err) < 0) ...;
 *     ... swift_pixels_store(&px, dir, hex) / swift_pixels_expand(&px, pixel_values) ...
 *     free(rgb);
 */
#ifndef SWIFT_VISION_H
#define SWIFT_VISION_H

#include <stddef.h>
#include <stdint.h>

#include "lib/formats/image.h"
#include "lib/formats/pixels.h"

#define SWIFT_VL_MIN_PIXELS (56ull * 56ull)           /* Qwen2-VL's size["shortest_edge"] */
#define SWIFT_VL_MAX_PIXELS (28ull * 28ull * 1280ull) /* size["longest_edge"] */

struct swift_vl_opts {
    uint64_t min_pixels, max_pixels;
    uint32_t patch_size;          /* 14 */
    uint32_t merge_size;          /* 2 */
    uint32_t temporal_patch_size; /* 2 */
};

void swift_vl_opts_default(struct swift_vl_opts *o);

/* transformers' smart_resize(height, width, factor, min_pixels, max_pixels): Python's round
 * (half to even), floor and ceil on the same double expressions. Returns 0, or -1 with
 * transformers' message ("absolute aspect ratio must be smaller than 200, got ...") in err. */
int swift_vl_smart_resize(uint32_t height, uint32_t width, uint32_t factor, uint64_t min_pixels,
                          uint64_t max_pixels, uint32_t *out_h, uint32_t *out_w, char *err,
                          size_t errlen);

/* The uint8 bicubic antialiased resize above, RGB interleaved: src h x w -> dst oh x ow (dst
 * has oh * ow * 3 bytes). Returns 0 (out of memory is fatal). */
int swift_vl_resize(const uint8_t *src, uint32_t h, uint32_t w, uint8_t *dst, uint32_t oh,
                    uint32_t ow);

/* smart_resize + resize: *px describes the resized image, whose pixels (*rgb, malloc'ed) the
 * caller frees. Returns 0, or -1 with a message in err. */
int swift_vl_process(const struct swift_image *img, const struct swift_vl_opts *o,
                     struct swift_pixels *px, uint8_t **rgb, char *err, size_t errlen);

#endif
