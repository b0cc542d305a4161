/* The decode matvec (kernels/cpu/matvec.c: matmul_fwd's fp32 path for N <= 8 rows) on every path
 * this CPU runs (scalar, the specification; avx2; avx512 — a path the CPU lacks is a visible
 * skip) against a double-precision reference, over shapes whose In and O are not multiples of
 * the vector width or of the row blocks (all tails), M = 1..9 (9: two groups), alpha, beta and
 * bias. Tolerance: the fp32 summation bound, |got - ref| <= (In + 3) * 2^-23 * (|alpha| sum_k
 * |w_ok x_mk| + |beta out| + |alpha bias_o|) + 1e-30. Then: beta 0 never reads out (NaN there
 * stays out of the result); the op table's matmul_fwd takes this path for N <= 8 (bit-identical
 * to swift_cpu_matvec_f32) and a row's bits do not depend on how many rows share the call (a
 * sequence decodes the same alone or batched: OpenBLAS's sgemv and sgemm, the path before, gave
 * different bits); and on a CPU with AVX-512 the path taken is avx512. */
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

static uint64_t rs = 7;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}
static float *rnd(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

/* one path on one shape against the double reference */
static void check_shape(int impl, int M, int In, int O, float alpha, float beta, int with_bias)
{
    float *w = rnd((size_t)O * In), *x = rnd((size_t)M * In), *b = with_bias ? rnd(O) : NULL;
    float *old = rnd((size_t)M * O), *out = malloc((size_t)M * O * sizeof *out);
    assert_non_null(out);
    memcpy(out, old, (size_t)M * O * sizeof *out);
    swift_cpu_matvec_f32_with(impl, out, x, w, b, M, In, O, alpha, beta);
    for (int m = 0; m < M; m++)
        for (int o = 0; o < O; o++) {
            double s = 0, a = 0;
            for (int k = 0; k < In; k++) {
                double t = (double)w[(size_t)o * In + k] * x[(size_t)m * In + k];
                s += t;
                a += fabs(t);
            }
            double y0 = old[(size_t)m * O + o];
            double ref = alpha * s + (beta != 0.0f ? beta * y0 : 0.0) + (b ? alpha * b[o] : 0.0);
            double mag = fabs(alpha) * a + fabs(beta * y0) + (b ? fabs(alpha * b[o]) : 0.0);
            double tol = (In + 3) * 0x1p-23 * mag + 1e-30;
            double err = fabs(out[(size_t)m * O + o] - ref);
            if (err > tol)
                fail_msg("%s M=%d In=%d O=%d alpha=%g beta=%g bias=%d: out[%d,%d] = %.9g, "
                         "reference %.9g (tolerance %.3g)",
                         swift_cpu_matvec_name(impl),
                         M,
                         In,
                         O,
                         alpha,
                         beta,
                         with_bias,
                         m,
                         o,
                         out[(size_t)m * O + o],
                         ref,
                         tol);
        }
    free(w);
    free(x);
    free(b);
    free(old);
    free(out);
}

static void check_path(int impl)
{
    if (!swift_cpu_matvec_supported(impl))
        skip(); /* cmocka prints the skip: this CPU has no such path */
    static const int ins[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 515};
    static const int outs[] = {1, 2, 3, 5, 7, 9, 67, 130};
    for (int M = 1; M <= 9; M++)
        for (size_t i = 0; i < sizeof ins / sizeof *ins; i++)
            for (size_t j = 0; j < sizeof outs / sizeof *outs; j++) {
                int v = (M + (int)i + (int)j) % 4; /* alpha, beta and bias varied over shapes */
                check_shape(impl,
                            M,
                            ins[i],
                            outs[j],
                            v == 3 ? 0.5f : 1.0f,
                            v == 1   ? 1.0f
                            : v == 3 ? -0.75f
                                     : 0.0f,
                            v >= 2);
            }
    check_shape(impl, 1, 512, 4099, 1.0f, 0.0f, 0); /* threaded: several chunks of rows */
    check_shape(impl, 8, 1536, 515, 1.0f, 1.0f, 1);
}

static void test_scalar(void **state)
{
    (void)state;
    check_path(SWIFT_CPU_MATVEC_SCALAR);
}
static void test_avx2(void **state)
{
    (void)state;
    check_path(SWIFT_CPU_MATVEC_AVX2);
}
static void test_avx512(void **state)
{
    (void)state;
    check_path(SWIFT_CPU_MATVEC_AVX512);
}

/* beta 0: out's old contents (NaN here) are not read, as BLAS does */
static void test_beta0_ignores_out(void **state)
{
    (void)state;
    for (int impl = SWIFT_CPU_MATVEC_SCALAR; impl <= SWIFT_CPU_MATVEC_AVX512; impl++) {
        if (!swift_cpu_matvec_supported(impl))
            continue;
        int M = 3, In = 37, O = 11;
        float *w = rnd((size_t)O * In), *x = rnd((size_t)M * In), out[33];
        for (int i = 0; i < M * O; i++)
            out[i] = NAN;
        swift_cpu_matvec_f32_with(impl, out, x, w, NULL, M, In, O, 1.0f, 0.0f);
        for (int i = 0; i < M * O; i++)
            assert_true(isfinite(out[i]));
        free(w);
        free(x);
    }
}

/* matmul_fwd with N <= 8 is the matvec, and row m of an N-row call equals the 1-row call on it */
static void test_op_table_path(void **state)
{
    (void)state;
    if (swift_cpu_matvec_impl() == SWIFT_CPU_MATVEC_BLAS)
        skip(); /* $SWIFT_CPU_MATVEC=blas: OpenBLAS as before */
    const struct swift_ops *ops = &swift_cpu_ops;
    int In = 515, O = 1031, N = 8;
    float *w = rnd((size_t)O * In), *x = rnd((size_t)N * In), *b = rnd(O);
    float *a = calloc((size_t)N * O, sizeof *a), *c = calloc((size_t)N * O, sizeof *c);
    assert_non_null(a);
    assert_non_null(c);
    ops->matmul_fwd(a, x, w, b, N, In, O, 1.0f, 0.0f);
    swift_cpu_matvec_f32(c, x, w, b, N, In, O, 1.0f, 0.0f);
    assert_memory_equal(a, c, (size_t)N * O * sizeof *a);
    for (int n = 1; n <= N; n++)
        for (int m = 0; m < n; m++) {
            ops->matmul_fwd(c, x + (size_t)m * In, w, b, 1, In, O, 1.0f, 0.0f);
            assert_memory_equal(c, a + (size_t)m * O, (size_t)O * sizeof *a);
        }
    ops->matmul_fwd(c, x, w, b, 5, In, O, 1.0f, 0.0f);
    assert_memory_equal(c, a, (size_t)5 * O * sizeof *a);
    free(w);
    free(x);
    free(b);
    free(a);
    free(c);
}

/* the path taken: the best this CPU has (unless $SWIFT_CPU_MATVEC asks for another) */
static void test_path_taken(void **state)
{
    (void)state;
    int impl = swift_cpu_matvec_impl();
    printf("# matvec path: %s\n", swift_cpu_matvec_name(impl));
    if (getenv("SWIFT_CPU_MATVEC"))
        skip();
    if (swift_cpu_matvec_supported(SWIFT_CPU_MATVEC_AVX512))
        assert_int_equal(impl, SWIFT_CPU_MATVEC_AVX512);
    else if (swift_cpu_matvec_supported(SWIFT_CPU_MATVEC_AVX2))
        assert_int_equal(impl, SWIFT_CPU_MATVEC_AVX2);
    else
        assert_int_equal(impl, SWIFT_CPU_MATVEC_SCALAR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_beta0_ignores_out),
        cmocka_unit_test(test_op_table_path),
        cmocka_unit_test(test_path_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
