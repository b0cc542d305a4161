/* quant: bit-exact encodings against PyPI gguf (tests/ref/gen_quant.py fixtures), K-quant layout
 * via gguf-py's dequantizer, fp16/bf16 edge cases, fallback types, RMSE bounds. */
#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/formats/quant.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DIR "tests/ref/fixtures/quant/"
#define N (4 * 512)

static void *load(const char *name, size_t want)
{
    char path[256];
    snprintf(path, sizeof(path), DIR "%s", name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open %s", path);
    void *buf = malloc(want + 1);
    size_t n = fread(buf, 1, want + 1, fp);
    fclose(fp);
    if (n != want)
        fail_msg("%s: %zu bytes, expected %zu", path, n, want);
    return buf;
}

static void save(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, n, fp), n);
    fclose(fp);
}

static const struct {
    const char *name;
    uint32_t type;
    double max_rmse; /* on x (std 0.05), a bound that a wrong layout or scale would break */
} ref_types[] = {
    {"f16", SWIFT_GGML_F16, 1e-4},
    {"bf16", SWIFT_GGML_BF16, 5e-4},
    {"q8_0", SWIFT_GGML_Q8_0, 1e-3},
    {"q4_0", SWIFT_GGML_Q4_0, 1.5e-2},
    {"q5_0", SWIFT_GGML_Q5_0, 8e-3},
};

static void test_against_gguf_py(void **state)
{
    (void)state;
    float *x = load("x.f32", N * 4);
    float *y = malloc(N * 4);
    for (size_t t = 0; t < sizeof(ref_types) / sizeof(ref_types[0]); t++) {
        char name[64];
        uint32_t type = ref_types[t].type;
        size_t nb = swift_ggml_row_size(type, 512) * 4;
        snprintf(name, sizeof(name), "%s.ref.bin", ref_types[t].name);
        uint8_t *ref = load(name, nb);
        uint8_t *ours = malloc(nb);
        assert_int_equal(swift_quantize(type, x, ours, 4, 512), 0);
        for (size_t i = 0; i < nb; i++)
            if (ours[i] != ref[i])
                fail_msg(
                    "%s: byte %zu is %u, gguf-py wrote %u", ref_types[t].name, i, ours[i], ref[i]);
        snprintf(name, sizeof(name), "%s.ref.deq.f32", ref_types[t].name);
        float *deq = load(name, N * 4);
        assert_int_equal(swift_dequantize(type, ref, y, N), 0);
        assert_memory_equal(y, deq, N * 4);
        double r = swift_rmse(x, y, N);
        print_message("# %s rmse %.6g\n", ref_types[t].name, r);
        assert_true(r < ref_types[t].max_rmse);
        free(ref);
        free(ours);
        free(deq);
    }
    free(x);
    free(y);
}

static void test_k_quants(void **state)
{
    (void)state;
    float *x = load("x.f32", N * 4);
    float *y = malloc(N * 4);
    const char *wdir = getenv("SWIFT_QUANT_WRITE");
    const struct {
        const char *name;
        uint32_t type;
        double max_rmse;
    } kt[] = {{"q4_k", SWIFT_GGML_Q4_K, 1.2e-2}, {"q6_k", SWIFT_GGML_Q6_K, 4e-3}};
    for (int t = 0; t < 2; t++) {
        char name[64];
        size_t nb = swift_ggml_row_size(kt[t].type, 512) * 4;
        uint8_t *ours = malloc(nb);
        assert_int_equal(swift_quantize(kt[t].type, x, ours, 4, 512), 0);
        snprintf(name, sizeof(name), "%s.ours.bin", kt[t].name);
        if (wdir) {
            save(wdir, name, ours, nb);
            free(ours);
            continue;
        }
        uint8_t *prev = load(name, nb); /* regression: the encoder's output is stable */
        assert_memory_equal(ours, prev, nb);
        snprintf(name, sizeof(name), "%s.ours.deq.f32", kt[t].name);
        float *deq = load(name, N * 4); /* gguf-py's dequantization of these bytes */
        assert_int_equal(swift_dequantize(kt[t].type, ours, y, N), 0);
        for (int i = 0; i < N; i++)
            if (fabsf(y[i] - deq[i]) > 1e-6f * (1 + fabsf(deq[i])))
                fail_msg("%s: element %d is %g, gguf-py decodes %g", kt[t].name, i, y[i], deq[i]);
        double r = swift_rmse(x, y, N);
        print_message("# %s rmse %.6g\n", kt[t].name, r);
        assert_true(r < kt[t].max_rmse);
        free(ours);
        free(prev);
        free(deq);
    }
    free(x);
    free(y);
}

static void test_halves(void **state)
{
    (void)state;
    assert_int_equal(swift_fp32_to_fp16(1.0f), 0x3c00);
    assert_int_equal(swift_fp32_to_fp16(-2.0f), 0xc000);
    assert_int_equal(swift_fp32_to_fp16(65504.0f), 0x7bff);
    assert_int_equal(swift_fp32_to_fp16(65520.0f), 0x7c00); /* rounds to inf */
    assert_int_equal(swift_fp32_to_fp16(5.960464477539063e-08f), 0x0001);
    assert_int_equal(swift_fp32_to_fp16(INFINITY), 0x7c00);
    assert_int_equal(swift_fp32_to_fp16(NAN) & 0x7e00, 0x7e00);
    assert_int_equal(swift_fp32_to_fp16(1.0f + 0x1.0p-11f), 0x3c00); /* tie to even */
    assert_true(swift_fp16_to_fp32(0x0001) == 5.960464477539063e-08f);
    assert_true(swift_fp16_to_fp32(0x7bff) == 65504.0f);
    assert_int_equal(swift_fp32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(swift_fp32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    assert_true(swift_bf16_to_fp32(0x3f80) == 1.0f);
}

static void test_fallback(void **state)
{
    (void)state;
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_Q4_K, 896), SWIFT_GGML_Q5_0);
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_Q6_K, 896), SWIFT_GGML_Q8_0);
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_Q4_K, 1024), SWIFT_GGML_Q4_K);
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_Q4_K, 100), SWIFT_GGML_F16);
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_Q8_0, 48), SWIFT_GGML_F16);
    assert_int_equal(swift_quant_fallback(SWIFT_GGML_BF16, 7), SWIFT_GGML_BF16);
    char buf[256];
    FILE *fp = fmemopen(buf, sizeof(buf), "w");
    swift_error_set_stream(fp);
    float x[48] = {0};
    uint8_t q[64];
    assert_int_equal(swift_quantize(SWIFT_GGML_Q8_0, x, q, 1, 48), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(buf, "not a multiple of 32"));
}

int main(void)
{
    if (getenv("SWIFT_QUANT_WRITE")) { /* tests/ref/gen_quant.py: write our K-quant bytes */
        test_k_quants(NULL);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_gguf_py),
        cmocka_unit_test(test_k_quants),
        cmocka_unit_test(test_halves),
        cmocka_unit_test(test_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
