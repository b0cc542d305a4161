/* kernels/cpu/vexp.h's expf, sixteen at a time, against glibc's expf bit for bit: every float bit
 * pattern with a stride of 251 (17 million values, both signs, denormals, the |x| >= 88 lanes
 * glibc handles, infinities, NaNs) and the edges around 88, -87.3, -103, 0 and the table's
 * rounding points. Then the ops that use it (cross-entropy with and without the gradient,
 * attention's softmax through attention_fwd, SwiGLU forward and backward) with the AVX-512
 * twins against the scalar loops (swift_cpu_set_simd(0)), bit for bit, on rows with ties for
 * the maximum, -0 and +0, -inf, a NaN, widths that are not multiples of 16 and packed
 * documents. On a CPU without AVX-512 the comparisons are a visible skip. */
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
#include "kernels/cpu/vexp.h"

static uint64_t rs = 11;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}

static int avx512(void)
{
    if (__builtin_cpu_supports("avx512f"))
        return 1;
    printf("# skip: this CPU has no AVX-512F\n");
    return 0;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* the same bits, or both NaN */
static int same(float a, float b)
{
    return bits(a) == bits(b) || (a != a && b != b);
}

__attribute__((target("avx512f"))) static long check16(const float *x, int n)
{
    float in[16] = {0}, out[16];
    memcpy(in, x, (size_t)n * sizeof(float));
    _mm512_storeu_ps(out, swift_vexpf(_mm512_loadu_ps(in)));
    long bad = 0;
    for (int i = 0; i < n; i++)
        if (!same(out[i], expf(in[i]))) {
            if (bad < 5)
                printf("vexp(%a) = %a, expf = %a\n", in[i], out[i], expf(in[i]));
            bad++;
        }
    return bad;
}

static void test_vexp_bits(void **st)
{
    (void)st;
    if (!avx512())
        return;
    long bad = 0, n = 0;
    float buf[16];
    int k = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
        uint32_t v = (uint32_t)u;
        memcpy(&buf[k++], &v, 4);
        if (k == 16) {
            bad += check16(buf, 16);
            n += 16;
            k = 0;
        }
    }
    bad += check16(buf, k);
    n += k;
    const float edges[] = {
        88.0f,          0x1.62e42ep6f,  0x1.62e430p6f,  88.5f,    87.99f,    -87.3f,
        -88.0f,         -0x1.9fe368p6f, -0x1.9d1d9ep6f, -103.0f,  -104.0f,   0.0f,
        -0.0f,          0x1p-149f,      -0x1p-149f,     0x1p-30f, 0.5f,      -0.5f,
        1.0f,           10.0f,          -10.0f,         INFINITY, -INFINITY, NAN,
        0x1.62e42ep-6f, 0x1.62e42ep-7f};
    int ne = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < ne; i += 16)
        bad += check16(edges + i, ne - i < 16 ? ne - i : 16);
    printf("vexp vs glibc expf: %ld values, %ld differ\n", n + ne, bad);
    assert_int_equal(bad, 0);
}

static void assert_same(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!same(a[i], b[i])) {
            printf("%s[%zu]: simd %a, scalar %a\n", what, i, a[i], b[i]);
            fail();
        }
}

static void test_cross_entropy(void **st)
{
    (void)st;
    if (!avx512())
        return;
    const int V[] = {5, 16, 37, 1000};
    for (int v = 0; v < 4; v++) {
        int N = 9, n = N * V[v];
        float *x = malloc((size_t)n * 4), *d[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
        int32_t t[9];
        assert_true(x && d[0] && d[1]);
        for (int i = 0; i < n; i++)
            x[i] = frand() * 8;
        for (int r = 0; r < N; r++)
            t[r] = (r * 7) % V[v];
        t[3] = -1;
        x[1 * V[v] + V[v] - 1] = x[1 * V[v]] = 20.0f; /* a tie for the maximum */
        for (int c = 0; c < V[v]; c++)                /* row 2: only zeros, -0 first */
            x[2 * V[v] + c] = c ? 0.0f : -0.0f;
        x[4 * V[v] + V[v] / 2] = NAN;
        x[5 * V[v] + 2] = -INFINITY;
        double loss[2][2] = {{0}};
        long cnt[2][2] = {{0}}, ok[2][2] = {{0}};
        for (int s = 0; s < 2; s++) {
            swift_cpu_set_simd(s == 0);
            swift_cpu_ops.cross_entropy(
                d[s], &loss[s][0], &cnt[s][0], &ok[s][0], x, t, N, V[v], 0.25f);
            swift_cpu_ops.cross_entropy(NULL, &loss[s][1], &cnt[s][1], &ok[s][1], x, t, N, V[v], 1);
        }
        swift_cpu_set_simd(1);
        assert_same(d[0], d[1], (size_t)n, "dlogits");
        for (int g = 0; g < 2; g++) {
            assert_memory_equal(&loss[0][g], &loss[1][g], sizeof(double));
            assert_int_equal(cnt[0][g], cnt[1][g]);
            assert_int_equal(ok[0][g], ok[1][g]);
        }
        free(x);
        free(d[0]);
        free(d[1]);
    }
}

static void test_attention_softmax(void **st)
{
    (void)st;
    if (!avx512())
        return;
    int B = 2, T = 45, NH = 2, NKV = 1, D = 8;
    size_t nq = (size_t)B * T * NH * D, nk = (size_t)B * T * NKV * D, np = (size_t)B * NH * T * T;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
    float *o[2] = {malloc(nq * 4), malloc(nq * 4)}, *p[2] = {malloc(np * 4), malloc(np * 4)};
    int32_t pos[90];
    assert_true(q && k && v && o[0] && o[1] && p[0] && p[1]);
    for (size_t i = 0; i < nq; i++)
        q[i] = frand() * 3;
    for (size_t i = 0; i < nk; i++)
        k[i] = frand() * 3, v[i] = frand();
    for (int b = 0; b < B; b++) /* row 0 one document; row 1 two (the second from token 20) */
        for (int i = 0; i < T; i++)
            pos[b * T + i] = b == 1 && i >= 20 ? i - 20 : i;
    for (int s = 0; s < 2; s++) {
        swift_cpu_set_simd(s == 0);
        swift_cpu_ops.attention_fwd(o[s], p[s], q, k, v, pos, B, T, NH, NKV, D);
    }
    swift_cpu_set_simd(1);
    assert_same(p[0], p[1], np, "probs");
    assert_same(o[0], o[1], nq, "out");
    free(q), free(k), free(v), free(o[0]), free(o[1]), free(p[0]), free(p[1]);
}

static void test_swiglu(void **st)
{
    (void)st;
    if (!avx512())
        return;
    size_t n = 16 * 70 + 9;
    float *g = malloc(n * 4), *u = malloc(n * 4), *d = malloc(n * 4), *out[2], *dg[2], *du[2];
    assert_true(g && u && d);
    for (size_t i = 0; i < n; i++)
        g[i] = frand() * 12, u[i] = frand(), d[i] = frand();
    g[3] = 100.0f, g[4] = -100.0f, g[5] = -0.0f, g[6] = NAN, g[7] = INFINITY;
    for (int s = 0; s < 2; s++) {
        out[s] = malloc(n * 4), dg[s] = malloc(n * 4), du[s] = malloc(n * 4);
        assert_true(out[s] && dg[s] && du[s]);
        swift_cpu_set_simd(s == 0);
        swift_cpu_ops.swiglu_fwd(out[s], g, u, n);
        swift_cpu_ops.swiglu_bwd(dg[s], du[s], d, g, u, n);
    }
    swift_cpu_set_simd(1);
    assert_same(out[0], out[1], n, "swiglu out");
    assert_same(dg[0], dg[1], n, "swiglu dgate");
    assert_same(du[0], du[1], n, "swiglu dup");
    for (int s = 0; s < 2; s++)
        free(out[s]), free(dg[s]), free(du[s]);
    free(g), free(u), free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vexp_bits),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_attention_softmax),
        cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
