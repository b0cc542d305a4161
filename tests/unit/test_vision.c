/* Qwen2-VL image preprocessing against transformers 5.24's Qwen2VLImageProcessor
 * (tests/ref/gen_vision_fixtures.py -> tests/fixtures/vision): decode (lib/formats/image.c),
 * smart_resize + bicubic resize (lib/preprocess/vision.c), normalize + patchify
 * (lib/formats/pixels.c). Tolerance: the pixel_values are asserted BIT-EXACT (sha256 of the
 * float32 bytes equal to transformers'), the sampled values to 0 absolute error, and the sums to
 * 1e-9 relative (they are float64 sums of equal floats, summed in another order). */
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/formats/image.h"
#include "lib/formats/pixels.h"
#include "lib/formats/shard.h"
#include "lib/preprocess/preprocess.h"
#include "lib/preprocess/vision.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX "tests/fixtures/vision"

static const char *shared_dir(void)
{
    const char *s = getenv("SHARED");
    return s ? s : "../shared";
}

static json_t *expected(void)
{
    json_error_t je;
    json_t *doc = json_load_file(FIX "/expected.json", 0, &je);
    if (!doc)
        fail_msg("%s: %s", FIX "/expected.json", je.text);
    return doc;
}

/* Returns 0 with the file's bytes, 1 when a SHARED file is absent (skipped outside CI). */
static int read_case_file(const char *rel, char **data, size_t *len)
{
    char path[1024];
    if (strncmp(rel, "SHARED:", 7) == 0)
        snprintf(path, sizeof path, "%s/%s", shared_dir(), rel + 7);
    else
        snprintf(path, sizeof path, "%s/%s", FIX, rel);
    if (access(path, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", path);
        return 1;
    }
    assert_int_equal(swift_read_file(path, (size_t)1 << 30, data, len), 0);
    return 0;
}

/* Decode, process and expand one case; the caller frees *pv. */
static void run_case(json_t *c, float **pv, struct swift_pixels *px, int *skipped)
{
    const char *file = json_string_value(json_object_get(c, "file"));
    char *data, err[256];
    size_t len;
    *skipped = read_case_file(file, &data, &len);
    if (*skipped)
        return;
    struct swift_image img;
    if (swift_image_decode(
            (const unsigned char *)data, len, SWIFT_IMAGE_MAX_PIXELS, &img, err, sizeof err) != 0)
        fail_msg("%s: %s", file, err);
    free(data);
    struct swift_vl_opts o;
    swift_vl_opts_default(&o);
    o.min_pixels = (uint64_t)json_integer_value(json_object_get(c, "min_pixels"));
    o.max_pixels = (uint64_t)json_integer_value(json_object_get(c, "max_pixels"));
    uint8_t *rgb;
    if (swift_vl_process(&img, &o, px, &rgb, err, sizeof err) != 0)
        fail_msg("%s: %s", file, err);
    swift_image_release(&img);
    *pv = malloc(swift_pixels_values_size(px));
    swift_pixels_expand(px, *pv);
    /* keep the pixels alive with the view: the caller frees both through px->rgb */
}

static void test_cases(void **state)
{
    (void)state;
    json_t *doc = expected(), *cases = json_object_get(doc, "cases"), *c;
    size_t i;
    int ran = 0;
    json_array_foreach(cases, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        float *pv;
        struct swift_pixels px;
        int skipped;
        run_case(c, &pv, &px, &skipped);
        if (skipped)
            continue;
        json_t *g = json_object_get(c, "grid_thw"), *sh = json_object_get(c, "shape");
        if ((json_int_t)px.grid_t != json_integer_value(json_array_get(g, 0)) ||
            (json_int_t)px.grid_h != json_integer_value(json_array_get(g, 1)) ||
            (json_int_t)px.grid_w != json_integer_value(json_array_get(g, 2)))
            fail_msg("%s: grid %u,%u,%u", name, px.grid_t, px.grid_h, px.grid_w);
        uint64_t n = swift_pixels_patches(&px), d = swift_pixels_patch_dim(&px);
        assert_int_equal(n, json_integer_value(json_array_get(sh, 0)));
        assert_int_equal(d, json_integer_value(json_array_get(sh, 1)));
        json_t *s;
        size_t k;
        json_array_foreach(json_object_get(c, "samples"), k, s)
        {
            json_int_t at = json_integer_value(json_array_get(s, 0));
            double want = json_real_value(json_array_get(s, 1));
            if ((double)pv[at] != want)
                fail_msg("%s: pixel_values[%lld] = %.9g, transformers %.9g",
                         name,
                         (long long)at,
                         (double)pv[at],
                         want);
        }
        double sum = 0, asum = 0;
        for (uint64_t j = 0; j < n * d; j++) {
            sum += pv[j];
            asum += fabs(pv[j]);
        }
        double ws = json_real_value(json_object_get(c, "sum"));
        double wa = json_real_value(json_object_get(c, "abs_sum"));
        assert_true(fabs(sum - ws) <= 1e-9 * wa + 1e-9);
        assert_true(fabs(asum - wa) <= 1e-9 * wa);
        char hex[65];
        swift_sha256_hex(pv, swift_pixels_values_size(&px), hex);
        if (strcmp(hex, json_string_value(json_object_get(c, "sha256"))) != 0)
            fail_msg("%s: pixel_values differ from transformers' (sha256)", name);
        char path[512];
        snprintf(path, sizeof path, FIX "/small-%s.f32", name);
        char *full;
        size_t flen;
        if (access(path, R_OK) == 0) {
            assert_int_equal(swift_read_file(path, 1 << 24, &full, &flen), 0);
            assert_int_equal(flen, swift_pixels_values_size(&px));
            assert_memory_equal(full, pv, flen);
            free(full);
        }
        free(pv);
        free((void *)px.rgb);
        ran++;
    }
    assert_true(ran >= 15);
    json_decref(doc);
}

static void test_smart_resize(void **state)
{
    (void)state;
    json_t *doc = expected(), *r;
    size_t i;
    json_array_foreach(json_object_get(doc, "smart_resize"), i, r)
    {
        uint32_t h = (uint32_t)json_integer_value(json_array_get(r, 0));
        uint32_t w = (uint32_t)json_integer_value(json_array_get(r, 1));
        uint32_t f = (uint32_t)json_integer_value(json_array_get(r, 2));
        uint64_t lo = (uint64_t)json_integer_value(json_array_get(r, 3));
        uint64_t hi = (uint64_t)json_integer_value(json_array_get(r, 4));
        uint32_t oh = 0, ow = 0;
        char err[200];
        int rc = swift_vl_smart_resize(h, w, f, lo, hi, &oh, &ow, err, sizeof err);
        if (json_is_string(json_array_get(r, 5))) {
            if (rc != -1)
                fail_msg("%ux%u [%llu,%llu]: accepted, transformers refuses",
                         h,
                         w,
                         (unsigned long long)lo,
                         (unsigned long long)hi);
            assert_non_null(strstr(err, "aspect ratio"));
            continue;
        }
        if (rc != 0 || oh != json_integer_value(json_array_get(r, 5)) ||
            ow != json_integer_value(json_array_get(r, 6)))
            fail_msg("%ux%u [%llu,%llu]: got %ux%u, transformers %lldx%lld",
                     h,
                     w,
                     (unsigned long long)lo,
                     (unsigned long long)hi,
                     oh,
                     ow,
                     (long long)json_integer_value(json_array_get(r, 5)),
                     (long long)json_integer_value(json_array_get(r, 6)));
    }
    json_decref(doc);
}

/* Truncated, corrupt and non-image files: an error message, never a crash or an image. */
static void test_bad_files(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"truncated.png", "truncated"},
        {"truncated.jpg", "truncated"},
        {"truncated.webp", "WebP"},
        {"crc.png", "bad PNG"},
        {"not_an_image.jpg", "not a JPEG, PNG or WebP"},
        {"empty.png", "not a JPEG"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256], *data, err[256] = "";
        size_t len;
        snprintf(path, sizeof path, FIX "/bad/%s", bad[i][0]);
        assert_int_equal(swift_read_file(path, 1 << 24, &data, &len), 0);
        struct swift_image img;
        if (swift_image_decode(
                (const unsigned char *)data, len, SWIFT_IMAGE_MAX_PIXELS, &img, err, sizeof err) !=
            -1)
            fail_msg("%s: decoded", bad[i][0]);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: message '%s' lacks '%s'", bad[i][0], err, bad[i][1]);
        assert_null(img.rgb);
        free(data);
    }
}

/* The pixel limit refuses before allocating; the cache file round-trips and is checked. */
static void test_limits_and_cache(void **state)
{
    (void)state;
    char *data, err[256];
    size_t len;
    assert_int_equal(swift_read_file(FIX "/images/huge.jpg", 1 << 24, &data, &len), 0);
    struct swift_image img;
    assert_int_equal(
        swift_image_decode((const unsigned char *)data, len, 1000000, &img, err, sizeof err), -1);
    assert_non_null(strstr(err, "over the limit"));
    free(data);

    assert_int_equal(swift_read_file(FIX "/images/odd.png", 1 << 24, &data, &len), 0);
    assert_int_equal(
        swift_image_decode(
            (const unsigned char *)data, len, SWIFT_IMAGE_MAX_PIXELS, &img, err, sizeof err),
        0);
    free(data);
    struct swift_vl_opts o;
    swift_vl_opts_default(&o);
    struct swift_pixels px, back;
    uint8_t *rgb;
    assert_int_equal(swift_vl_process(&img, &o, &px, &rgb, err, sizeof err), 0);
    swift_image_release(&img);
    assert_int_equal(swift_pixels_tokens(&px), px.grid_h * px.grid_w / 4);
    unsigned char *buf;
    char hex[65], hex2[65];
    swift_pixels_serialize(&px, &buf, &len, hex);
    assert_int_equal(swift_pixels_check(&back, buf, len, err, sizeof err), 0);
    assert_int_equal(back.grid_h, px.grid_h);
    assert_memory_equal(back.rgb, rgb, (size_t)px.height * px.width * 3);
    buf[len - 1] ^= 1; /* a flipped payload bit fails the CRC */
    assert_int_equal(swift_pixels_check(&back, buf, len, err, sizeof err), -1);
    assert_non_null(strstr(err, "CRC"));
    assert_int_equal(swift_pixels_check(&back, buf, len - 1, err, sizeof err), -1);
    free(buf);

    char dir[] = "/tmp/test_vision.XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(swift_pixels_store(&px, dir, hex2), 0);
    assert_string_equal(hex, hex2);
    unsigned char *lb;
    assert_int_equal(swift_pixels_load(&back, &lb, dir, hex), 0);
    assert_memory_equal(back.rgb, rgb, (size_t)px.height * px.width * 3);
    free(lb);
    char *path = swift_asprintf("%s/%s.pix", dir, hex);
    unlink(path);
    free(path);
    rmdir(dir);
    free(rgb);
}

/* What the trainer does with image shards: mllm_demo.json built (packed) by swift_preprocess_run,
 * opened with SWIFT_SHARDS_IMAGES; each sample's metadata names one cache file per
 * <|vision_start|> span, whose <|image_pad|> run is tokens long, and each cache file expands to
 * exactly transformers' pixel_values for that demo image (the fixture's sha256). */
static void test_shards_end_to_end(void **state)
{
    (void)state;
    char tok[512], data[512], dir[] = "/tmp/test_vision_sh.XXXXXX";
    snprintf(tok, sizeof tok, "%s/data/tokenizers/qwen3", shared_dir());
    snprintf(data, sizeof data, "%s/data/datasets/llama-factory-demo/mllm_demo.json", shared_dir());
    if (access(tok, R_OK) != 0 || access(data, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", data);
        skip();
    }
    assert_non_null(mkdtemp(dir));
    char *out = swift_asprintf("%s/shards", dir);
    char *inputs[] = {data};
    struct swift_preprocess_opts o = {.mode = SWIFT_PP_BUILD,
                                      .tokenizer = tok,
                                      .template_name = "qwen2_vl",
                                      .output = out,
                                      .inputs = inputs,
                                      .ninputs = 1,
                                      .max_length = 1024,
                                      .kind = -1,
                                      .packing = SWIFT_PACK_BINPACK,
                                      .seed = 42,
                                      .threads = 1,
                                      .shard_tokens = 1ull << 24};
    fflush(stdout); /* the run's JSON record goes to stdout: not into the TAP stream */
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int rc = swift_preprocess_run(&o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null);
    assert_int_equal(rc, 0);
    struct swift_shards *sh;
    assert_int_equal(swift_shards_open(&sh, out, 0), -1); /* a text-only reader is refused */
    assert_int_equal(swift_shards_open(&sh, out, SWIFT_SHARDS_IMAGES), 0);
    const struct swift_shard_index *ix = swift_shards_index(sh);
    assert_string_equal(ix->image_cache, "images");
    assert_int_equal(ix->image_refs, 8);
    char *cache = swift_asprintf("%s/%s", out, ix->image_cache);
    json_t *doc = expected();
    uint64_t refs = 0;
    for (uint64_t i = 0; i < swift_shards_count(sh); i++) {
        struct swift_sample x;
        assert_int_equal(swift_shards_get(sh, i, &x), 0);
        json_error_t je;
        json_t *m = json_loadb(x.meta, x.meta_len, 0, &je), *keys = json_object_get(m, "images");
        assert_true(json_is_array(keys));
        size_t k = 0;
        for (uint32_t t = 0; t < x.len; t++) {
            if (x.ids[t] != 151652) /* <|vision_start|> */
                continue;
            const char *hex = json_string_value(json_array_get(keys, k++));
            assert_non_null(hex);
            struct swift_pixels px;
            unsigned char *buf;
            assert_int_equal(swift_pixels_load(&px, &buf, cache, hex), 0);
            uint64_t n = swift_pixels_tokens(&px);
            for (uint64_t j = 1; j <= n; j++)
                assert_int_equal(x.ids[t + j], 151655);
            assert_int_equal(x.ids[t + n + 1], 151653);
            float *pv = malloc(swift_pixels_values_size(&px));
            swift_pixels_expand(&px, pv);
            char got[65];
            swift_sha256_hex(pv, swift_pixels_values_size(&px), got);
            int found = 0;
            json_t *c;
            size_t ci;
            json_array_foreach(json_object_get(doc, "cases"), ci, c)
            {
                const char *name = json_string_value(json_object_get(c, "name"));
                if (!strncmp(name, "demo", 4) && strlen(name) == 5)
                    found += !strcmp(got, json_string_value(json_object_get(c, "sha256")));
            }
            if (found != 1)
                fail_msg("sample %llu image %zu: pixel_values are no demo image's",
                         (unsigned long long)i,
                         k - 1);
            free(pv);
            free(buf);
        }
        assert_int_equal(k, json_array_size(keys));
        refs += k;
        json_decref(m);
    }
    assert_int_equal(refs, 8);
    json_decref(doc);
    free(cache);
    swift_shards_close(sh);
    swift_remove_tree(dir);
    free(out);
}

int main(void)
{
    static FILE *devnull;
    devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_smart_resize),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_limits_and_cache),
        cmocka_unit_test(test_shards_end_to_end),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fclose(devnull);
    return rc;
}
