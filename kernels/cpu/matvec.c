/* Small-M fp32 matmuls for decoding (matmul_fwd with N <= SWIFT_CPU_MATVEC_MAX_M rows, which is
 * what a decode step of swift-infer or swift-eval's key/value cache runs): one pass over the
 * weight shared by all M rows of the input, vectorized with AVX-512 or AVX2+FMA chosen at run
 * time (__builtin_cpu_supports), threaded over output rows with OpenMP (the pool of every other
 * CPU op; OpenBLAS's own threads are left asleep). The scalar loop is the specification.
 *
 * out (M,O) = alpha * in (M,In) @ w (O,In)^T + beta * out, then + alpha * bias (O) on every row
 * (beta 0: out is not read). w is nn.Linear's (O,In), row-major. Each output element is one
 * chain of fused multiply-adds over In in order (16 or 8 lanes, then the lanes summed), computed
 * by one thread: the bits do not depend on the thread count nor on M (a sequence decodes the same
 * alone or in a batch of up to MAX_M). */
#include "kernels/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "kernels/banned.h"

/* one output element from its sum: alpha * acc + beta * out, + alpha * bias */
static inline float finish(float acc, float old, const float *bias, int o, float alpha, float beta)
{
    float y = alpha * acc;
    if (beta != 0.0f)
        y += beta * old;
    if (bias)
        y += alpha * bias[o];
    return y;
}

/* ---- the specification: plain loops, rows [o0, o1) ---- */
static void rows_scalar(float *out, const float *in, const float *w, const float *bias, int M,
                        int In, int O, int o0, int o1, float alpha, float beta)
{
    for (int o = o0; o < o1; o++) {
        const float *wr = w + (size_t)o * In;
        for (int m = 0; m < M; m++) {
            const float *x = in + (size_t)m * In;
            float acc = 0.0f;
            for (int k = 0; k < In; k++)
                acc += wr[k] * x[k];
            float *y = out + (size_t)m * O + o;
            *y = finish(acc, beta != 0.0f ? *y : 0.0f, bias, o, alpha, beta);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86 1
#define T512 __attribute__((target("avx512f,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

/* R rows from o times the M input rows; R and M are constants at every call (unrolled, the
 * R*M accumulators in registers) */
INL T512 void blk512(float *out, const float *in, const float *w, const float *bias, const int M,
                     const int R, int In, int O, int o, float alpha, float beta)
{
    __m512 acc[4][8], xv[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            acc[r][m] = _mm512_setzero_ps();
    const float *wr = w + (size_t)o * In;
    int k = 0;
    for (; k + 16 <= In; k += 16) {
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            xv[m] = _mm512_loadu_ps(in + (size_t)m * In + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 wv = _mm512_loadu_ps(wr + (size_t)r * In + k);
#pragma GCC unroll 8
            for (int m = 0; m < M; m++)
                acc[r][m] = _mm512_fmadd_ps(wv, xv[m], acc[r][m]);
        }
    }
    if (k < In) { /* the tail: masked loads read zeros past In */
        __mmask16 mk = (__mmask16)((1u << (In - k)) - 1u);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            xv[m] = _mm512_maskz_loadu_ps(mk, in + (size_t)m * In + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 wv = _mm512_maskz_loadu_ps(mk, wr + (size_t)r * In + k);
#pragma GCC unroll 8
            for (int m = 0; m < M; m++)
                acc[r][m] = _mm512_fmadd_ps(wv, xv[m], acc[r][m]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) {
            float *y = out + (size_t)m * O + o + r;
            float s = _mm512_reduce_add_ps(acc[r][m]);
            *y = finish(s, beta != 0.0f ? *y : 0.0f, bias, o + r, alpha, beta);
        }
}

/* the lanes of an AVX2 accumulator summed in a fixed order */
INL T256 float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INL T256 void blk256(float *out, const float *in, const float *w, const float *bias, const int M,
                     const int R, int In, int O, int o, float alpha, float beta)
{
    __m256 acc[4][8], xv[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            acc[r][m] = _mm256_setzero_ps();
    const float *wr = w + (size_t)o * In;
    int k = 0;
    for (; k + 8 <= In; k += 8) {
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            xv[m] = _mm256_loadu_ps(in + (size_t)m * In + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 wv = _mm256_loadu_ps(wr + (size_t)r * In + k);
#pragma GCC unroll 8
            for (int m = 0; m < M; m++)
                acc[r][m] = _mm256_fmadd_ps(wv, xv[m], acc[r][m]);
        }
    }
    if (k < In) { /* the tail: maskload reads zeros where the mask's sign bit is clear */
        __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(In - k),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            xv[m] = _mm256_maskload_ps(in + (size_t)m * In + k, mk);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 wv = _mm256_maskload_ps(wr + (size_t)r * In + k, mk);
#pragma GCC unroll 8
            for (int m = 0; m < M; m++)
                acc[r][m] = _mm256_fmadd_ps(wv, xv[m], acc[r][m]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) {
            float *y = out + (size_t)m * O + o + r;
            float s = hsum256(acc[r][m]);
            *y = finish(s, beta != 0.0f ? *y : 0.0f, bias, o + r, alpha, beta);
        }
}

/* rows [o0, o1) in blocks of R (a function of M: as many accumulators as the registers hold),
 * the rows left over one at a time */
#define ROWS_FN(NAME, BLK, TGT, R1, R2, R4, R8)                                                    \
    INL TGT void NAME##_m(float *out,                                                              \
                          const float *in,                                                         \
                          const float *w,                                                          \
                          const float *bias,                                                       \
                          const int M,                                                             \
                          const int R,                                                             \
                          int In,                                                                  \
                          int O,                                                                   \
                          int o0,                                                                  \
                          int o1,                                                                  \
                          float alpha,                                                             \
                          float beta)                                                              \
    {                                                                                              \
        int o = o0;                                                                                \
        for (; o + R <= o1; o += R)                                                                \
            BLK(out, in, w, bias, M, R, In, O, o, alpha, beta);                                    \
        for (; o < o1; o++)                                                                        \
            BLK(out, in, w, bias, M, 1, In, O, o, alpha, beta);                                    \
    }                                                                                              \
    static TGT void NAME(float *out,                                                               \
                         const float *in,                                                          \
                         const float *w,                                                           \
                         const float *bias,                                                        \
                         int M,                                                                    \
                         int In,                                                                   \
                         int O,                                                                    \
                         int o0,                                                                   \
                         int o1,                                                                   \
                         float alpha,                                                              \
                         float beta)                                                               \
    {                                                                                              \
        switch (M) {                                                                               \
        case 1:                                                                                    \
            NAME##_m(out, in, w, bias, 1, R1, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 2:                                                                                    \
            NAME##_m(out, in, w, bias, 2, R2, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 3:                                                                                    \
            NAME##_m(out, in, w, bias, 3, R4, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 4:                                                                                    \
            NAME##_m(out, in, w, bias, 4, R4, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 5:                                                                                    \
            NAME##_m(out, in, w, bias, 5, R8, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 6:                                                                                    \
            NAME##_m(out, in, w, bias, 6, R8, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        case 7:                                                                                    \
            NAME##_m(out, in, w, bias, 7, R8, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        default:                                                                                   \
            NAME##_m(out, in, w, bias, 8, R8, In, O, o0, o1, alpha, beta);                         \
            break;                                                                                 \
        }                                                                                          \
    }

/* R rows per block for M = 1, 2, 3-4, 5-8 (4, 4, 2, 1): R*M accumulators + M inputs + 1 weight
 * fit AVX2's 16 registers; AVX-512 measured no faster with larger blocks (memory-bound) */
ROWS_FN(rows_avx512, blk512, T512, 4, 4, 2, 1)
ROWS_FN(rows_avx2, blk256, T256, 4, 4, 2, 1)
#endif

typedef void (*rows_fn)(float *out, const float *in, const float *w, const float *bias, int M,
                        int In, int O, int o0, int o1, float alpha, float beta);

static const char *const names[] = {"blas", "scalar", "avx2", "avx512"};

int swift_cpu_matvec_supported(int impl)
{
    if (impl == SWIFT_CPU_MATVEC_BLAS || impl == SWIFT_CPU_MATVEC_SCALAR)
        return 1;
#ifdef HAVE_X86
    __builtin_cpu_init();
    if (impl == SWIFT_CPU_MATVEC_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (impl == SWIFT_CPU_MATVEC_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
#endif
    return 0;
}

/* the best path this CPU has, or $SWIFT_CPU_MATVEC (blas: OpenBLAS sgemv/sgemm as before this
 * file, scalar, avx2, avx512) when it has that one; chosen once */
int swift_cpu_matvec_impl(void)
{
    static int impl = -1;
    if (impl >= 0)
        return impl;
    int best = swift_cpu_matvec_supported(SWIFT_CPU_MATVEC_AVX512) ? SWIFT_CPU_MATVEC_AVX512
               : swift_cpu_matvec_supported(SWIFT_CPU_MATVEC_AVX2) ? SWIFT_CPU_MATVEC_AVX2
                                                                   : SWIFT_CPU_MATVEC_SCALAR;
    const char *env = getenv("SWIFT_CPU_MATVEC");
    for (int i = 0; env && i < 4; i++)
        if (!strcmp(env, names[i]) && swift_cpu_matvec_supported(i))
            best = i;
    impl = best;
    return impl;
}

const char *swift_cpu_matvec_name(int impl)
{
    return impl >= 0 && impl < 4 ? names[impl] : "?";
}

void swift_cpu_matvec_f32_with(int impl, float *out, const float *in, const float *w,
                               const float *bias, int M, int In, int O, float alpha, float beta)
{
    rows_fn f = rows_scalar;
#ifdef HAVE_X86
    if (impl == SWIFT_CPU_MATVEC_AVX512 && swift_cpu_matvec_supported(impl))
        f = rows_avx512;
    else if (impl == SWIFT_CPU_MATVEC_AVX2 && swift_cpu_matvec_supported(impl))
        f = rows_avx2;
#else
    (void)impl;
#endif
    if (M <= 0 || O <= 0)
        return;
    for (int m0 = 0; m0 < M; m0 += SWIFT_CPU_MATVEC_MAX_M) {
        int mm = M - m0 < SWIFT_CPU_MATVEC_MAX_M ? M - m0 : SWIFT_CPU_MATVEC_MAX_M;
        const float *x = in + (size_t)m0 * In;
        float *y = out + (size_t)m0 * O;
        /* chunks of 64 rows (a multiple of every R) handed out as threads come free (on a
         * shared machine a descheduled thread does not hold the others at the barrier; which
         * thread computes a row does not change its bits); one thread for small layers, where
         * waking the pool costs more than it saves */
        int chunks = (O + 63) / 64;
        int par = (double)O * In * mm >= 65536.0 && chunks > 1;
#pragma omp parallel for schedule(dynamic, 4) if (par)
        for (int c = 0; c < chunks; c++) {
            int o0 = c * 64, o1 = o0 + 64 < O ? o0 + 64 : O;
            f(y, x, w, bias, mm, In, O, o0, o1, alpha, beta);
        }
    }
}

void swift_cpu_matvec_f32(float *out, const float *in, const float *w, const float *bias, int M,
                          int In, int O, float alpha, float beta)
{
    swift_cpu_matvec_f32_with(swift_cpu_matvec_impl(), out, in, w, bias, M, In, O, alpha, beta);
}
