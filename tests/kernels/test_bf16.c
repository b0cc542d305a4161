/* The CPU backend's bf16 matmuls (kernels/cpu/matmul_bf16.c, set_matmul_math SWIFT_MATH_BF16)
 * against the fp32 ops on random inputs: forward out = in @ w^T (+ bias, alpha, beta) and both
 * backward GEMMs (din with din_beta, dw accumulated) and db.
 * Tolerances: each output against the fp32 op computed on the bf16-rounded inputs (what bf16
 * math with fp32 accumulation computes exactly, up to summation order): max |d| <= 1e-5 *
 * sum|terms|, i.e. fp32 rounding only; against the fp32 op on the original inputs:
 * max |bf16 - fp32| <= 2^-7 * max over the output of sum_k |a_ik b_kj| (two inputs rounded to 8
 * significant bits each: relative error <= 2 * 2^-9 per product, with margin). db is fp32 and
 * bit-identical. The rounding itself is checked against torch's nearest-even cast on edge values.
 * And the fast path: on a CPU with avx512_bf16 or AMX, oneDNN must pick a bf16/amx kernel (not a
 * reference one); elsewhere the check is a visible skip. */
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

#include "kernels/cpu/cpu.h"

static uint64_t rs = 42;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}
static float *rnd(size_t n, float s)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * s;
    return x;
}
static float *dup(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}
static float bf(float f)
{
    uint16_t h;
    swift_cpu_to_bf16(&h, &f, 1);
    uint32_t u = (uint32_t)h << 16;
    float r;
    memcpy(&r, &u, 4);
    return r;
}
static float *rounded(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++)
        y[i] = bf(x[i]);
    return y;
}
static void set(int mode)
{
    assert_int_equal(swift_cpu_ops.set_matmul_math(mode), 0);
}

static void test_round(void **st)
{
    (void)st;
    /* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1); 1 + 3*2^-8 -> 1 + 2^-6 */
    assert_true(bf(1.0f + 0x1p-8f) == 1.0f);
    assert_true(bf(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(bf(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
    assert_true(bf(-2.5f) == -2.5f);
    assert_true(isinf(bf(INFINITY)) && isnan(bf(NAN)));
    assert_true(isinf(bf(3.4e38f))); /* rounds past the largest bf16 */
}

/* max over the output of |x - y| / scale, scale (M,N) = sum_k |a_ik b_kj| */
static double worst(const float *x, const float *y, const float *scale, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - y[i]) / (scale[i] + 1e-30);
        w = d > w ? d : w;
    }
    return w;
}

static void check(int N, int In, int O, float alpha, float beta)
{
    size_t ni = (size_t)N * In, no = (size_t)N * O, nw = (size_t)O * In;
    float *in = rnd(ni, 1), *w = rnd(nw, 0.5f), *b = rnd(O, 1), *dout = rnd(no, 1);
    float *out0 = rnd(no, 1), *din0 = rnd(ni, 1), *dw0 = rnd(nw, 1), *db0 = rnd(O, 1);
    float *inr = rounded(in, ni), *wr = rounded(w, nw), *doutr = rounded(dout, no);
    /* |terms| scales: |in| @ |w|^T, |dout| @ |w|, |dout|^T @ |in| */
    float *ain = malloc(ni * 4), *aw = malloc(nw * 4), *ad = malloc(no * 4);
    for (size_t i = 0; i < ni; i++)
        ain[i] = fabsf(in[i]);
    for (size_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i]);
    for (size_t i = 0; i < no; i++)
        ad[i] = fabsf(dout[i]);
    float *sout = calloc(no, 4), *sdin = calloc(ni, 4), *sdw = calloc(nw, 4);
    set(SWIFT_MATH_FP32);
    swift_cpu_ops.matmul_fwd(sout, ain, aw, NULL, N, In, O, fabsf(alpha), 0);
    swift_cpu_ops.matmul_bwd(sdin, sdw, NULL, ad, ain, aw, N, In, O, fabsf(alpha), 0);

    /* fp32 on the original inputs, fp32 on the rounded inputs, bf16 */
    float *o32 = dup(out0, no), *i32 = dup(din0, ni), *w32 = dup(dw0, nw), *b32 = dup(db0, O);
    swift_cpu_ops.matmul_fwd(o32, in, w, b, N, In, O, alpha, beta);
    swift_cpu_ops.matmul_bwd(i32, w32, b32, dout, in, w, N, In, O, alpha, beta);
    float * or = dup(out0, no), *ir = dup(din0, ni), *wr2 = dup(dw0, nw);
    swift_cpu_ops.matmul_fwd(or, inr, wr, b, N, In, O, alpha, beta);
    swift_cpu_ops.matmul_bwd(ir, wr2, NULL, doutr, inr, wr, N, In, O, alpha, beta);
    set(SWIFT_MATH_BF16);
    float *o16 = dup(out0, no), *i16 = dup(din0, ni), *w16 = dup(dw0, nw), *b16 = dup(db0, O);
    swift_cpu_ops.matmul_fwd(o16, in, w, b, N, In, O, alpha, beta);
    swift_cpu_ops.matmul_bwd(i16, w16, b16, dout, in, w, N, In, O, alpha, beta);
    set(SWIFT_MATH_FP32);

    /* the fp32 accumulators' own scale, plus the old contents (beta, dw's +=) */
    for (size_t i = 0; i < no; i++)
        sout[i] += fabsf(beta * out0[i]) + fabsf(alpha * b[i % O]);
    for (size_t i = 0; i < ni; i++)
        sdin[i] += fabsf(beta * din0[i]);
    for (size_t i = 0; i < nw; i++)
        sdw[i] += fabsf(dw0[i]);
    double e[6] = {worst(o16, or, sout, no),
                   worst(i16, ir, sdin, ni),
                   worst(w16, wr2, sdw, nw),
                   worst(o16, o32, sout, no),
                   worst(i16, i32, sdin, ni),
                   worst(w16, w32, sdw, nw)};
    printf("bf16 N=%d I=%d O=%d alpha=%g beta=%g: vs fp32 on rounded inputs %.2g %.2g %.2g, vs "
           "fp32 %.2g %.2g %.2g\n",
           N,
           In,
           O,
           alpha,
           beta,
           e[0],
           e[1],
           e[2],
           e[3],
           e[4],
           e[5]);
    for (int k = 0; k < 3; k++) {
        assert_true(e[k] <= 1e-5);
        assert_true(e[k + 3] <= 0x1p-7);
    }
    /* the rounding is real: bf16 differs from fp32 somewhere */
    assert_true(e[3] > 0);
    assert_memory_equal(b16, b32, O * sizeof(float));
    float *ptrs[] = {in,   w,    b,   dout, out0, din0, dw0, db0, inr, wr,  doutr, ain, aw,  ad,
                     sout, sdin, sdw, o32,  i32,  w32,  b32, or,  ir,  wr2, o16,   i16, w16, b16};
    for (size_t k = 0; k < sizeof ptrs / sizeof *ptrs; k++)
        free(ptrs[k]);
}

static void test_shapes(void **st)
{
    (void)st;
    check(64, 96, 80, 1.0f, 0.0f);
    check(37, 130, 23, 1.0f, 1.0f); /* odd shapes, accumulate */
    check(5, 64, 200, 0.5f, -1.0f); /* alpha, negative beta (DoRA's tmp) */
    check(1, 48, 33, 1.0f, 0.0f);   /* one row (a decode step) */
    check(128, 8, 96, 2.0f, 0.0f);  /* LoRA's rank: K = 8 */
}

static void test_fast_path(void **st)
{
    (void)st;
    const char *impl = swift_cpu_bf16_impl();
    printf("bf16 matmul: oneDNN implementation '%s'\n", impl);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int has = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            has = strstr(line, " avx512_bf16") || strstr(line, " amx_bf16");
            break;
        }
    if (f)
        fclose(f);
    if (!has) {
        printf("bf16 fast path: this CPU has neither avx512_bf16 nor amx_bf16: not checked\n");
        skip();
    }
    assert_true(swift_cpu_bf16_fast_name(impl));
    assert_false(swift_cpu_bf16_fast_name("ref:any"));
    assert_false(swift_cpu_bf16_fast_name("gemm:jit"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_fast_path),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
