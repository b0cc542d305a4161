/* The CPU backend's bf16 matmuls (kernels/cpu/matmul_bf16.c, set_matmul_math SWIFT_MATH_BF16)
 * against the fp32 ops on random inputs: forward out = in @ w^T (+ bias, alpha, beta) and both
 * backward GEMMs (din with din_beta, dw accumulated) and db.
 * Tolerances: each output against the fp32 op computed on the bf16-rounded inputs (what bf16
 * math with fp32 accumulation computes exactly, up to summation order): max |d| <= 1e-5 *
 * sum|terms|, i.e. fp32 rounding only; against the fp32 op on the original inputs:
 * max |bf16 - fp32| <= 2^-7 * max over the output of sum_k |a_ik b_kj| (two inputs rounded to 8
 * significant bits each: relative error <= 2 * 2^-9 per product, with margin). db is fp32 and
 * bit-identical. Attention (fwd: out; bwd: dq, dk, dv; GQA, packed documents) with its four score
 * and value GEMMs in bf16, each tensor's max |bf16 - ref| / max |ref|: against the fp32 op on the
 * bf16-rounded q, k, v and dout <= 2^-7 (what is left is P and dS rounded to 8 significant bits,
 * 2^-9 relative each, measured <= 0.0023, margin 3x); against the fp32 op on the originals
 * <= 2^-7 with |q|, |k| <= 1 (measured <= 0.0029) and <= 2^-5 with |q|, |k| <= 4, where the
 * rounding error of the scores grows with their size (measured 0.015). The rounding itself is
 * checked against torch's nearest-even cast on edge values. And the fast path: on a CPU with
 * avx512_bf16 or AMX, oneDNN must pick a bf16/amx kernel (not a reference one); elsewhere the check
 * is a visible skip. */
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

/* max |a - b| / max |b| */
static double rel(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]))
            return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* attention_fwd/bwd under bf16 math (the score and value GEMMs in bf16) against the fp32 op:
 * on the rounded q, k, v, dout (what is left is the rounding of P and dS) and on the originals */
static void check_attention(int B, int T, int NH, int NKV, int D, float qs, double tol_r,
                            double tol)
{
    size_t nq = (size_t)B * T * NH * D, nk = (size_t)B * T * NKV * D, np = (size_t)B * NH * T * T;
    float *q = rnd(nq, qs), *k = rnd(nk, qs), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    float *qr = rounded(q, nq), *kr = rounded(k, nk), *vr = rounded(v, nk),
          *doutr = rounded(dout, nq);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    for (int b = 0; b < B; b++) /* two documents packed in each row */
        for (int t = 0; t < T; t++)
            pos[b * T + t] = t < T / 3 + b ? t : t - (T / 3 + b);
    float *o[3], *p[3], *dq[3], *dk[3], *dv[3];
    for (int r = 0; r < 3; r++) { /* fp32, fp32 on the rounded inputs, bf16 */
        o[r] = calloc(nq, 4), p[r] = calloc(np, 4), dq[r] = calloc(nq, 4);
        dk[r] = calloc(nk, 4), dv[r] = calloc(nk, 4);
        set(r == 2 ? SWIFT_MATH_BF16 : SWIFT_MATH_FP32);
        for (size_t i = 0; r == 2 && i < np; i++) /* stale probabilities: never read */
            p[r][i] = NAN;
        const float *qi = r == 1 ? qr : q, *ki = r == 1 ? kr : k, *vi = r == 1 ? vr : v,
                    *di = r == 1 ? doutr : dout;
        swift_cpu_ops.attention_fwd(o[r], p[r], qi, ki, vi, pos, B, T, NH, NKV, D);
        swift_cpu_ops.attention_bwd(
            dq[r], dk[r], dv[r], di, p[r], qi, ki, vi, pos, B, T, NH, NKV, D);
    }
    set(SWIFT_MATH_FP32);
    double e[8] = {rel(o[2], o[1], nq),
                   rel(dq[2], dq[1], nq),
                   rel(dk[2], dk[1], nk),
                   rel(dv[2], dv[1], nk),
                   rel(o[2], o[0], nq),
                   rel(dq[2], dq[0], nq),
                   rel(dk[2], dk[0], nk),
                   rel(dv[2], dv[0], nk)};
    printf("bf16 attention B=%d T=%d NH=%d NKV=%d D=%d |q|<=%g: out dq dk dv vs fp32 on rounded "
           "inputs %.2g %.2g %.2g %.2g, vs fp32 %.2g %.2g %.2g %.2g\n",
           B,
           T,
           NH,
           NKV,
           D,
           qs,
           e[0],
           e[1],
           e[2],
           e[3],
           e[4],
           e[5],
           e[6],
           e[7]);
    for (int i = 0; i < 4; i++) {
        assert_true(e[i] <= tol_r);
        assert_true(e[i + 4] <= tol);
    }
    assert_true(e[4] > 0); /* the GEMMs did run in bf16 */
    for (int r = 0; r < 3; r++) {
        free(o[r]), free(p[r]), free(dq[r]), free(dk[r]), free(dv[r]);
    }
    float *ptrs[] = {q, k, v, dout, qr, kr, vr, doutr};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        free(ptrs[i]);
    free(pos);
}

static void test_attention(void **st)
{
    (void)st;
    check_attention(2, 37, 4, 2, 16, 1.0f, 0x1p-7, 0x1p-7);
    check_attention(1, 64, 2, 2, 64, 1.0f, 0x1p-7, 0x1p-7);
    check_attention(2, 50, 6, 2, 32, 4.0f, 0x1p-7, 0x1p-5); /* sharper softmax */
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
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_fast_path),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
