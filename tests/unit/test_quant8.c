/* quant8: bitsandbytes' 8-bit weight format (Int8Params' CB and SCB) bit for bit against PyPI
 * bitsandbytes on CPU (tests/ref/gen_int8_fixtures.py fixtures: codes, row absmax, dequantized
 * weights), and the fused dequant-matmul ops against dequantize-then-sgemm. */
#include "kernels/quant8.h"
#include "kernels/ops.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DIR "tests/ref/fixtures/int8/"

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

static void same_bytes(const void *a, const void *b, size_t n, const char *what)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            fail_msg("%s: byte %zu differs (%u, bitsandbytes %u)", what, i, x[i], y[i]);
}

static void q8_alloc(struct swift_q8 *q, int rows, int cols)
{
    q->rows = rows;
    q->cols = cols;
    q->cb = calloc((size_t)rows * cols, 1);
    q->scb = calloc((size_t)rows, sizeof(float));
}

static void check_one(const char *w, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    char nm[128];
    snprintf(nm, sizeof(nm), "%s.f32", w);
    float *x = load(nm, n * sizeof(float));
    struct swift_q8 q;
    q8_alloc(&q, rows, cols);
    swift_q8_quantize(&q, x);
    snprintf(nm, sizeof(nm), "%s.cb", w);
    int8_t *cb = load(nm, n);
    same_bytes(q.cb, cb, n, nm);
    snprintf(nm, sizeof(nm), "%s.scb.f32", w);
    float *scb = load(nm, (size_t)rows * sizeof(float));
    same_bytes(q.scb, scb, (size_t)rows * sizeof(float), nm);
    snprintf(nm, sizeof(nm), "%s.deq.f32", w);
    float *deq = load(nm, n * sizeof(float)), *ours = malloc(n * sizeof(float));
    swift_q8_dequant(&q, 0, rows, ours);
    same_bytes(ours, deq, n * sizeof(float), nm);
    swift_q8_dequant(&q, 3, rows - 1, ours); /* a range of rows */
    same_bytes(ours, deq + (size_t)3 * cols, (size_t)(rows - 4) * cols * sizeof(float), "a range");
    free(x), free(cb), free(scb), free(deq), free(ours), free(q.cb), free(q.scb);
}

static void test_against_bitsandbytes(void **state)
{
    (void)state;
    check_one("w0", 64, 96); /* outlier, zero row, float16 subnormals, .5 ties */
    check_one("w1", 37, 50);
    check_one("w2", 300, 70); /* rows of very different scales */
}

static void test_f16_round(void **state)
{
    (void)state;
    assert_true(swift_q8_f16_round(1.0f) == 1.0f);
    assert_true(swift_q8_f16_round(1.0f + 0x1p-11f) == 1.0f);               /* tie: even */
    assert_true(swift_q8_f16_round(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f); /* tie: even up */
    assert_true(swift_q8_f16_round(65504.0f) == 65504.0f);
    assert_true(isinf(swift_q8_f16_round(65520.0f)));
    assert_true(swift_q8_f16_round(0x1p-25f) == 0.0f); /* half the smallest subnormal: even */
    assert_true(swift_q8_f16_round(3 * 0x1p-25f) == 0x1p-23f);
    assert_true(swift_q8_f16_round(-0x1p-14f) == -0x1p-14f);
}

static void test_storage_size(void **state)
{
    (void)state;
    /* a Qwen2.5-0.5B MLP weight: int8 codes plus a float per row, about half of bf16 */
    assert_true((double)swift_q8_bytes(4864, 896) <= 0.51 * 2.0 * 4864.0 * 896.0);
}

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) / 16777216.0) - 0.5f;
}

/* matmul8_fwd/bwd against dequantize-then-matmul_fwd/bwd; In*O large enough for several tiles */
static void check_matmul(const struct swift_ops *ops, int N, int In, int O)
{
    uint64_t s = 42 + (uint64_t)In;
    size_t n = (size_t)O * In;
    float *w = malloc(n * sizeof(float)), *wd = malloc(n * sizeof(float));
    float *x = malloc((size_t)N * In * sizeof(float)), *bias = malloc((size_t)O * sizeof(float));
    float *dout = malloc((size_t)N * O * sizeof(float));
    float *y0 = malloc((size_t)N * O * sizeof(float)), *y1 = malloc((size_t)N * O * sizeof(float));
    float *d0 = malloc((size_t)N * In * sizeof(float)),
          *d1 = malloc((size_t)N * In * sizeof(float));
    for (size_t i = 0; i < n; i++)
        w[i] = 0.05f * frand(&s);
    for (size_t i = 0; i < (size_t)N * In; i++)
        x[i] = frand(&s);
    for (int o = 0; o < O; o++)
        bias[o] = frand(&s);
    for (size_t i = 0; i < (size_t)N * O; i++)
        dout[i] = frand(&s), y0[i] = y1[i] = frand(&s);
    for (size_t i = 0; i < (size_t)N * In; i++)
        d0[i] = d1[i] = frand(&s);
    struct swift_q8 q;
    q8_alloc(&q, O, In);
    swift_q8_quantize(&q, w);
    swift_q8_dequant(&q, 0, O, wd);
    ops->matmul_fwd(y0, x, wd, bias, N, In, O, 1.0f, 0.5f);
    ops->matmul8_fwd(y1, x, &q, bias, N, In, O, 0.5f);
    ops->matmul_bwd(d0, NULL, NULL, dout, x, wd, N, In, O, 1.0f, 1.0f);
    ops->matmul8_bwd(d1, dout, &q, N, In, O, 1.0f);
    for (size_t i = 0; i < (size_t)N * O; i++)
        if (fabsf(y0[i] - y1[i]) > 1e-5f * (1.0f + fabsf(y0[i])))
            fail_msg("matmul8_fwd [%zu]: %g, dequant+matmul %g", i, y1[i], y0[i]);
    for (size_t i = 0; i < (size_t)N * In; i++)
        if (fabsf(d0[i] - d1[i]) > 1e-5f * (1.0f + fabsf(d0[i])))
            fail_msg("matmul8_bwd [%zu]: %g, dequant+matmul %g", i, d1[i], d0[i]);
    free(q.cb), free(q.scb);
    free(w), free(wd), free(x), free(bias), free(dout), free(y0), free(y1), free(d0), free(d1);
}

static void test_matmul8(void **state)
{
    (void)state;
    const struct swift_ops *ops = &swift_cpu_ops;
    assert_non_null(ops->matmul8_fwd);
    assert_non_null(ops->matmul8_bwd);
    check_matmul(ops, 5, 70, 300);    /* one tile */
    check_matmul(ops, 3, 1024, 700);  /* three tiles of 256 rows */
    check_matmul(ops, 1, 1024, 700);  /* one token (decode) */
    check_matmul(ops, 17, 2048, 260); /* tiles of 128 rows, ragged last */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_bitsandbytes),
        cmocka_unit_test(test_f16_round),
        cmocka_unit_test(test_storage_size),
        cmocka_unit_test(test_matmul8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
