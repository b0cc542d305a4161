/* quant4_tile (kernels/cuda/quant4_tile.h): the index arithmetic of the CUDA fused 4-bit
 * dequant-matmul (kernels/cuda/quant4.cu), the only part of it that runs on a CPU. A plain-C
 * replay of the kernel — its grid of blocks, the tiles each block loads and dequantizes with the
 * header's functions, the 4 x 4 outputs per thread accumulated with fmaf in the kernel's order,
 * the store — against the CPU backend's matmul4_fwd / matmul4_bwd: NF4 and FP4, with and without
 * double quantization (330 blocks: two of absmax2), odd sizes (a ragged last block, an odd code
 * count, N, I and O no tile multiple, N = 1), beta and din_beta 0, 1 and between, bias or not;
 * max |replay - cpu| <= 1e-5 * max |cpu| (only the accumulation order differs). A slot mapping
 * that misses or repeats an element, or a transposed index, fails by far more. The kernels
 * themselves run against the CPU op in tests/kernels/test_backend_ops.c on a GPU. */
#include "kernels/cuda/quant4_tile.h"
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

static uint64_t rs = 99;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* the kernel, block by block; the phases between its __syncthreads run one after the other */
static void replay(int bwd, float *C, const float *A, const struct swift_q4 *q, const float *bias,
                   int N, int K, int NC, int In, float beta)
{
    const float *code = q->type == SWIFT_Q4_FP4 ? swift_q4_fp4 : swift_q4_nf4;
    static float As[Q4_TK][Q4_TM + 1], Ws[Q4_TK][Q4_TC + 1], acc[Q4_THREADS][4][4];
    for (int bx = 0; bx < (N + Q4_TM - 1) / Q4_TM; bx++)
        for (int by = 0; by < (NC + Q4_TC - 1) / Q4_TC; by++) {
            int n0 = bx * Q4_TM, j0 = by * Q4_TC;
            memset(acc, 0, sizeof(acc));
            for (int k0 = 0; k0 < K; k0 += Q4_TK) {
                for (int idx = 0; idx < Q4_TM * Q4_TK; idx++) {
                    int r, c;
                    q4_tile_a(idx, &r, &c);
                    int n = n0 + r, k = k0 + c;
                    As[c][r] = n < N && k < K ? A[(size_t)n * K + k] : 0.0f;
                }
                for (int idx = 0; idx < Q4_TC * Q4_TK; idx++) {
                    int r, c;
                    q4_tile_w(bwd, idx, &r, &c);
                    int j = j0 + r, k = k0 + c;
                    Ws[c][r] = j < NC && k < K
                                   ? q4_elem(q, code, swift_q4_dynamic, q4_w_index(bwd, j, k, In))
                                   : 0.0f;
                }
                for (int t = 0; t < Q4_THREADS; t++)
                    for (int c = 0; c < Q4_TK; c++)
                        for (int i = 0; i < 4; i++)
                            for (int j = 0; j < 4; j++)
                                acc[t][i][j] = fmaf(
                                    As[c][t / 16 + 16 * i], Ws[c][t % 16 + 16 * j], acc[t][i][j]);
            }
            for (int t = 0; t < Q4_THREADS; t++)
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) {
                        int n = n0 + t / 16 + 16 * i, col = j0 + t % 16 + 16 * j;
                        if (n < N && col < NC)
                            q4_store(&C[(size_t)n * NC + col], acc[t][i][j], beta, bias, col);
                    }
        }
}

static void close_to(const char *what, const float *got, const float *ref, size_t n)
{
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        maxref = fmax(maxref, fabs(ref[i]));
        double e = fabs((double)got[i] - ref[i]);
        maxerr = isnan(e) ? INFINITY : fmax(maxerr, e);
    }
    printf("# %-40s max|err| %.3g (max|ref| %.3g)\n", what, maxerr, maxref);
    if (!(maxerr <= 1e-5 * maxref))
        fail_msg("%s: max |replay - cpu| %g, max |cpu| %g", what, maxerr, maxref);
}

static void check(int N, int I, int O, int type, int dq, float beta, int with_bias)
{
    size_t n = (size_t)I * O, nb = swift_q4_nblocks(n), nx = (size_t)N * I, no = (size_t)N * O;
    float *w = malloc(n * sizeof(float)), *x = malloc(nx * sizeof(float));
    float *bias = malloc((size_t)O * sizeof(float)), *dout = malloc(no * sizeof(float));
    float *o1 = malloc(no * sizeof(float)), *o2 = malloc(no * sizeof(float));
    float *d1 = malloc(nx * sizeof(float)), *d2 = malloc(nx * sizeof(float));
    struct swift_q4 q = {.type = type, .dq = dq, .n = n};
    q.codes = calloc((n + 1) / 2, 1);
    q.absmax = dq ? NULL : calloc(nb, sizeof(float));
    q.qabsmax = dq ? calloc(nb, 1) : NULL;
    q.absmax2 = dq ? calloc(swift_q4_nblocks2(n), sizeof(float)) : NULL;
    assert_true(w && x && bias && dout && o1 && o2 && d1 && d2 && q.codes);
    for (size_t i = 0; i < n; i++)
        w[i] = frand();
    for (size_t i = 0; i < nx; i++) {
        x[i] = frand();
        d1[i] = d2[i] = frand();
    }
    for (size_t i = 0; i < no; i++) {
        o1[i] = o2[i] = frand();
        dout[i] = frand();
    }
    for (int i = 0; i < O; i++)
        bias[i] = frand();
    assert_int_equal(swift_q4_quantize(&q, w), 0);
    char what[96];
    snprintf(what,
             sizeof(what),
             "%s%s N=%d I=%d O=%d beta %g%s",
             type == SWIFT_Q4_FP4 ? "fp4" : "nf4",
             dq ? " dq" : "",
             N,
             I,
             O,
             beta,
             with_bias ? " bias" : "");
    const float *b = with_bias ? bias : NULL;
    swift_cpu_ops.matmul4_fwd(o1, x, &q, b, N, I, O, beta);
    replay(0, o2, x, &q, b, N, I, O, I, beta);
    close_to(what, o2, o1, no);
    swift_cpu_ops.matmul4_bwd(d1, dout, &q, N, I, O, beta);
    replay(1, d2, dout, &q, NULL, N, O, I, I, beta);
    close_to("  backward (din_beta = beta)", d2, d1, nx);
    free(w);
    free(x);
    free(bias);
    free(dout);
    free(o1);
    free(o2);
    free(d1);
    free(d2);
    free(q.codes);
    free(q.absmax);
    free(q.qabsmax);
    free(q.absmax2);
}

/* the slot mappings visit every slot of a tile once */
static void test_slots(void **state)
{
    (void)state;
    static int seen_a[Q4_TM][Q4_TK], seen_w[2][Q4_TC][Q4_TK];
    for (int idx = 0; idx < Q4_TM * Q4_TK; idx++) {
        int r, c;
        q4_tile_a(idx, &r, &c);
        assert_true(r >= 0 && r < Q4_TM && c >= 0 && c < Q4_TK);
        seen_a[r][c]++;
    }
    for (int bwd = 0; bwd < 2; bwd++)
        for (int idx = 0; idx < Q4_TC * Q4_TK; idx++) {
            int r, c;
            q4_tile_w(bwd, idx, &r, &c);
            assert_true(r >= 0 && r < Q4_TC && c >= 0 && c < Q4_TK);
            seen_w[bwd][r][c]++;
        }
    for (int r = 0; r < Q4_TM; r++)
        for (int c = 0; c < Q4_TK; c++)
            assert_int_equal(seen_a[r][c], 1);
    for (int bwd = 0; bwd < 2; bwd++)
        for (int r = 0; r < Q4_TC; r++)
            for (int c = 0; c < Q4_TK; c++)
                assert_int_equal(seen_w[bwd][r][c], 1);
}

static void test_nf4(void **state)
{
    (void)state;
    check(37, 71, 53, SWIFT_Q4_NF4, 0, 0.5f, 1);
    check(130, 200, 150, SWIFT_Q4_NF4, 0, 1.0f, 0);
    check(64, 64, 64, SWIFT_Q4_NF4, 0, 0.0f, 1);
}

static void test_nf4_dq(void **state)
{
    (void)state;
    check(33, 300, 70, SWIFT_Q4_NF4, 1, 0.0f, 0);
    check(70, 129, 65, SWIFT_Q4_NF4, 1, 0.25f, 1);
}

static void test_fp4(void **state)
{
    (void)state;
    check(1, 33, 17, SWIFT_Q4_FP4, 0, 0.0f, 1);
    check(5, 7, 3, SWIFT_Q4_FP4, 0, 1.0f, 1);
}

static void test_fp4_dq(void **state)
{
    (void)state;
    check(1, 33, 17, SWIFT_Q4_FP4, 1, 0.5f, 1);
    check(33, 300, 70, SWIFT_Q4_FP4, 1, 1.0f, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_nf4),
        cmocka_unit_test(test_nf4_dq),
        cmocka_unit_test(test_fp4),
        cmocka_unit_test(test_fp4_dq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
