/* export --merge-lora against peft's merge_and_unload (tests/ref/gen_merge.py fixtures). */
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/core/fileio.h"
#include "lib/formats/safetensors.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX "tests/ref/fixtures/merge/"

static char outdir[256];
static char msgbuf[4096];

static int setup(void **state)
{
    (void)state;
    snprintf(outdir, sizeof(outdir), "/tmp/test_export_merge_%d", (int)getpid());
    swift_remove_tree(outdir);
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    swift_remove_tree(outdir);
    return 0;
}

static float get(const struct swift_st_tensor *t, uint64_t i)
{
    float *buf = malloc(t->numel * sizeof(float));
    assert_int_equal(swift_st_tensor_to_f32(t, buf), 0);
    float v = buf[i];
    free(buf);
    return v;
}

static void check_merge(const char *adapter, const char *ref, const char *dtype, double tol,
                        uint64_t shard)
{
    struct swift_export_opts o = {.model_dir = FIX "base",
                                  .output = outdir,
                                  .merge_lora = adapter,
                                  .dtype = dtype,
                                  .max_shard_size = shard,
                                  .force = 1};
    /* the export's JSON summary line goes to /dev/null, not into the TAP stream */
    fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int rc = swift_export_run(&o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null);
    assert_int_equal(rc, 0);
    struct swift_st_set out = {0}, base = {0};
    struct swift_safetensors r = {0};
    assert_int_equal(swift_st_set_open(&out, outdir), 0);
    assert_int_equal(swift_st_set_open(&base, FIX "base"), 0);
    assert_int_equal(swift_safetensors_open(&r, ref), 0);
    if (shard)
        assert_true(out.nfiles > 1);
    for (size_t f = 0; f < out.nfiles; f++)
        assert_string_equal(swift_safetensors_meta(&out.files[f], "format"), "pt");
    size_t nmerged = 0, n = 0;
    for (size_t f = 0; f < base.nfiles; f++)
        for (size_t i = 0; i < base.files[f].ntensors; i++, n++) {
            const struct swift_st_tensor *b = &base.files[f].tensors[i];
            const struct swift_st_tensor *t = swift_st_set_find(&out, b->name);
            assert_non_null(t);
            assert_int_equal(t->numel, b->numel);
            const struct swift_st_tensor *want = swift_safetensors_find(&r, b->name);
            if (want)
                nmerged++;
            else
                want = b;
            float *x = malloc(t->numel * 4), *y = malloc(t->numel * 4);
            assert_int_equal(swift_st_tensor_to_f32(t, x), 0);
            assert_int_equal(swift_st_tensor_to_f32(want, y), 0);
            double worst = 0;
            for (uint64_t k = 0; k < t->numel; k++) {
                double d = fabs((double)x[k] - (double)y[k]) / (fabs((double)y[k]) + 1e-3);
                if (d > worst)
                    worst = d;
            }
            if (worst > tol)
                fail_msg("%s: relative difference %g to peft's merge > %g", b->name, worst, tol);
            free(x);
            free(y);
        }
    assert_int_equal(nmerged, r.ntensors);
    assert_true(nmerged >= 6);
    (void)get;
    swift_st_set_close(&out);
    swift_st_set_close(&base);
    swift_safetensors_close(&r);
    char *cfg = NULL;
    size_t len;
    char *p = swift_path_join(outdir, "config.json");
    assert_int_equal(swift_read_file(p, 1 << 20, &cfg, &len), 0);
    free(p);
    char want_dt[64];
    snprintf(want_dt,
             sizeof(want_dt),
             "\"torch_dtype\": \"%s\"",
             !strcmp(dtype, "bf16") ? "bfloat16" : "float32");
    assert_non_null(strstr(cfg, want_dt));
    free(cfg);
    p = swift_path_join(outdir, "generation_config.json");
    assert_int_equal(access(p, R_OK), 0);
    free(p);
    p = swift_path_join(outdir, "tokenizer_config.json");
    assert_int_equal(access(p, R_OK), 0);
    free(p);
}

static void test_lora_fp32_sharded(void **state)
{
    (void)state;
    check_merge(FIX "adapter-lora", FIX "ref-lora.safetensors", "fp32", 1e-5, 100 << 10);
    char *p = swift_path_join(outdir, "model.safetensors.index.json");
    assert_int_equal(access(p, R_OK), 0);
    free(p);
}

static void test_rslora_fp32(void **state)
{
    (void)state;
    check_merge(FIX "adapter-rslora", FIX "ref-rslora.safetensors", "fp32", 1e-5, 0);
}

/* DoRA (use_dora, tests/ref/gen_dora_fixtures.py): rows times m / ||W + s B A|| */
static void test_dora_fp32(void **state)
{
    (void)state;
    check_merge(FIX "adapter-dora", FIX "ref-dora.safetensors", "fp32", 1e-5, 0);
}

static void test_lora_bf16(void **state)
{
    (void)state;
    /* bf16 keeps 8 bits of mantissa: relative error <= 2^-8 */
    check_merge(FIX "adapter-lora", FIX "ref-lora.safetensors", "bf16", 1.0 / 256, 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    /* an adapter for another model: the rank-8 q_proj LoRA of the base does not fit a
     * base whose tensors are renamed */
    char bad[300];
    snprintf(bad, sizeof(bad), "%s-base", outdir);
    swift_remove_tree(bad);
    assert_int_equal(swift_mkdirs(bad, 0755), 0);
    char *src, *dst;
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char s[256];
        snprintf(s, sizeof(s), FIX "base/%s", files[i]);
        size_t len;
        assert_int_equal(swift_read_file(s, 1 << 24, &src, &len), 0);
        dst = swift_path_join(bad, files[i]);
        if (i == 0) { /* a bigger hidden size in config does not matter; the shapes do */
            assert_int_equal(swift_atomic_write(dst, src, len), 0);
        } else {
            /* rename q_proj → qq_proj in the header: same length would break offsets, so
             * rename layer 1 → layer 7 (same length) */
            for (size_t k = 0; k + 16 < len && k < 8 + 4096; k++)
                if (!memcmp(src + k, "model.layers.1.", 15))
                    src[k + 13] = '7';
            assert_int_equal(swift_atomic_write(dst, src, len), 0);
        }
        free(src);
        free(dst);
    }
    struct swift_export_opts o = {
        .model_dir = bad, .output = outdir, .merge_lora = FIX "adapter-lora", .dtype = "fp32"};
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(swift_export_run(&o), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, "adapter/base mismatch"));
    assert_non_null(strstr(msgbuf, "model.layers.1."));
    assert_int_equal(access(outdir, F_OK), -1); /* nothing under the final name */
    swift_remove_tree(bad);
}

static int run_quiet(const struct swift_export_opts *o)
{
    fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int rc = swift_export_run(o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null);
    return rc;
}

/* --quant int4/int8 --group-size 32: bit-exact with GPTQ's quantizer + auto-gptq's packing
 * (tests/ref/gen_gptq.py) */
static void check_gptq(const char *quant, const char *ref)
{
    struct swift_export_opts o = {.model_dir = FIX "base",
                                  .output = outdir,
                                  .quant = quant,
                                  .group_size = 32,
                                  .method = "rtn"};
    assert_int_equal(run_quiet(&o), 0);
    struct swift_st_set out = {0};
    struct swift_safetensors r = {0};
    assert_int_equal(swift_st_set_open(&out, outdir), 0);
    assert_int_equal(swift_safetensors_open(&r, ref), 0);
    assert_true(r.ntensors >= 56);
    for (size_t i = 0; i < r.ntensors; i++) {
        const struct swift_st_tensor *want = &r.tensors[i];
        const struct swift_st_tensor *got = swift_st_set_find(&out, want->name);
        if (!got)
            fail_msg("missing %s", want->name);
        assert_int_equal(got->dtype, want->dtype);
        assert_int_equal(got->end - got->begin, want->end - want->begin);
        if (memcmp(got->data, want->data, want->end - want->begin))
            fail_msg("%s differs from the reference packing", want->name);
    }
    assert_null(swift_st_set_find(&out, "model.layers.0.self_attn.q_proj.weight"));
    assert_non_null(swift_st_set_find(&out, "model.embed_tokens.weight"));
    swift_st_set_close(&out);
    swift_safetensors_close(&r);
    char *p = swift_path_join(outdir, "quantize_config.json");
    assert_int_equal(access(p, R_OK), 0);
    free(p);
}

static void test_gptq_int4(void **state)
{
    (void)state;
    check_gptq("int4", "tests/ref/fixtures/gptq/ref-int4.safetensors");
}

static void test_gptq_int8_and_refusals(void **state)
{
    (void)state;
    check_gptq("int8", "tests/ref/fixtures/gptq/ref-int8.safetensors");
    /* existing output without --force */
    struct swift_export_opts o = {.model_dir = FIX "base",
                                  .output = outdir,
                                  .quant = "int4",
                                  .group_size = 128,
                                  .method = "rtn",
                                  .force = 1};
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(run_quiet(&o), -1); /* in_features 64 is not a multiple of 128 */
    o.force = 0;
    o.group_size = 32;
    assert_int_equal(run_quiet(&o), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, "in_features must be a multiple of --group-size 128"));
    assert_non_null(strstr(msgbuf, "exists; use --force to overwrite it"));
    /* the earlier int8 output is intact */
    char *p = swift_path_join(outdir, "quantize_config.json");
    char *txt;
    size_t len;
    assert_int_equal(swift_read_file(p, 1 << 16, &txt, &len), 0);
    assert_non_null(strstr(txt, "\"bits\": 8"));
    free(txt);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lora_fp32_sharded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rslora_fp32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dora_fp32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lora_bf16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gptq_int4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gptq_int8_and_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
