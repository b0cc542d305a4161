/* Fuzz the image decoders' entry point (lib/formats/image.c: JPEG, PNG, WebP, sniffed from the
 * first bytes) and the image cache file checker (lib/formats/pixels.c). The first byte picks:
 * 'S' (then "WPIXEL"...): a cache file, which when accepted is expanded to pixel_values; anything
 * else: the decoders, with a pixel limit small enough that a forged header cannot make the fuzzer
 * allocate much. A decoded image must have the size it says and then goes through Qwen2-VL's
 * processor (smart_resize + resize + expansion) when its aspect ratio allows. */
#include "lib/core/error.h"
#include "lib/formats/image.h"
#include "lib/formats/pixels.h"
#include "lib/preprocess/vision.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_cache(const uint8_t *data, size_t size)
{
    struct swift_pixels px;
    char err[256];
    if (swift_pixels_check(&px, data, size, err, sizeof err) < 0)
        return;
    if (swift_pixels_patches(&px) > 4096)
        return;
    float *pv = malloc(swift_pixels_values_size(&px));
    if (!pv)
        return;
    swift_pixels_expand(&px, pv);
    free(pv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    if (size >= 1 && data[0] == 'S') {
        fuzz_cache(data, size);
        return 0;
    }
    struct swift_image img;
    char err[256];
    if (swift_image_decode(data, size, 1u << 20, &img, err, sizeof err) < 0) {
        if (img.rgb || !err[0])
            abort(); /* a failure leaves no image and says why */
        return 0;
    }
    if (!img.rgb || !img.width || !img.height || (uint64_t)img.width * img.height > (1u << 20))
        abort();
    volatile uint8_t sink = img.rgb[(size_t)img.width * img.height * 3 - 1];
    (void)sink;
    struct swift_vl_opts o;
    swift_vl_opts_default(&o);
    o.max_pixels = 28 * 28 * 64; /* keep each run fast */
    struct swift_pixels px;
    uint8_t *rgb;
    if (swift_vl_process(&img, &o, &px, &rgb, err, sizeof err) == 0) {
        float *pv = malloc(swift_pixels_values_size(&px));
        if (pv)
            swift_pixels_expand(&px, pv);
        free(pv);
        free(rgb);
    }
    swift_image_release(&img);
    return 0;
}
