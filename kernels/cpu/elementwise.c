/* SwiGLU, dropout, and small vector ops. */
#include "kernels/cpu/cpu.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/vexp.h"

#include "kernels/banned.h"

static int g_simd = -1; /* -1: not asked yet */

int swift_cpu_simd_avx512(void)
{
    if (g_simd < 0)
        g_simd = __builtin_cpu_supports("avx512f") ? 1 : 0;
    return g_simd;
}

void swift_cpu_set_simd(int on)
{
    g_simd = on && __builtin_cpu_supports("avx512f") ? 1 : 0;
}

__attribute__((target("avx512f"))) static inline __m512 negate(__m512 x)
{
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

/* the SwiGLU loops below sixteen at a time over [0, n16); the same operations per entry */
__attribute__((target("avx512f"))) static void swiglu_fwd16(float *out, const float *gate,
                                                            const float *up, size_t n16)
{
    const __m512 one = _mm512_set1_ps(1.0f);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n16; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 e = swift_vexpf(negate(g));
        __m512 o = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i));
        _mm512_storeu_ps(out + i, o);
    }
}

__attribute__((target("avx512f"))) static void swiglu_bwd16(float *dgate, float *dup,
                                                            const float *dout, const float *gate,
                                                            const float *up, size_t n16)
{
    const __m512 one = _mm512_set1_ps(1.0f);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n16; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i), d = _mm512_loadu_ps(dout + i);
        __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, swift_vexpf(negate(g))));
        _mm512_storeu_ps(dup + i, _mm512_mul_ps(_mm512_mul_ps(d, g), s));
        __m512 t = _mm512_add_ps(one, _mm512_mul_ps(g, _mm512_sub_ps(one, s)));
        __m512 dg = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(d, _mm512_loadu_ps(up + i)), s), t);
        _mm512_storeu_ps(dgate + i, dg);
    }
}

/* out = silu(g) * u, silu(g) = g * sigmoid(g) */
void swift_cpu_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
    size_t i0 = 0;
    if (swift_cpu_simd_avx512()) {
        i0 = n / 16 * 16;
        swiglu_fwd16(out, gate, up, i0);
    }
#pragma omp parallel for schedule(static) if (n - i0 > 4096)
    for (size_t i = i0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* dsilu/dg = s * (1 + g * (1 - s)), s = sigmoid(g) */
void swift_cpu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, size_t n)
{
    size_t i0 = 0;
    if (swift_cpu_simd_avx512()) {
        i0 = n / 16 * 16;
        swiglu_bwd16(dgate, dup, dout, gate, up, i0);
    }
#pragma omp parallel for schedule(static) if (n - i0 > 4096)
    for (size_t i = i0; i < n; i++) {
        float g = gate[i], s = 1.0f / (1.0f + expf(-g));
        dup[i] = dout[i] * g * s;
        dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
}

void swift_cpu_add(float *out, const float *a, const float *b, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void swift_cpu_scale(float *x, float s, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

void swift_cpu_mul_cols(float *out, const float *x, const float *g, const float *bias, size_t N,
                        int C, float beta)
{
    size_t n = N * (size_t)C;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        size_t c = i % (size_t)C;
        float v = x[i] * g[c] + (bias ? bias[c] : 0.0f);
        out[i] = beta != 0.0f ? beta * out[i] + v : v;
    }
}

/* fixed chunking so the result does not depend on the thread count */
double swift_cpu_sumsq(const float *x, size_t n)
{
    enum { CHUNK = 65536 };
    size_t nch = (n + CHUNK - 1) / CHUNK;
    double total = 0;
#pragma omp parallel for schedule(static) ordered
    for (size_t c = 0; c < nch; c++) {
        double s = 0;
        size_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        for (size_t i = c * CHUNK; i < end; i++)
            s += (double)x[i] * x[i];
#pragma omp ordered
        total += s;
    }
    return total;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* keep element i with probability 1-p, from (seed, i) alone: the same on any thread count */
void swift_cpu_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float p,
                           uint64_t seed)
{
    float keep = 1.0f / (1.0f - p);
    uint64_t thresh = (uint64_t)((double)p * 18446744073709551616.0);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        mask[i] = splitmix64(seed ^ splitmix64(i)) >= thresh;
        out[i] = mask[i] ? in[i] * keep : 0.0f;
    }
}

void swift_cpu_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n, float p)
{
    float keep = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        if (mask[i])
            din[i] += dout[i] * keep;
}

/* AdamW on element i (the reference: the vector path below computes exactly this, operation
 * by operation: the same correctly rounded multiplies, adds, square root and division in the same
 * order, no FMA contraction, so both give bit-identical results) */
static inline void adamw1(float *p, const float *g, float *m, float *v, size_t i, float lr,
                          float b1, float b2, float eps, float wd, float step, float sbc2,
                          float gscale)
{
    float gi = g[i] * gscale;
    p[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    p[i] -= step * m[i] / (sqrtf(v[i]) / sbc2 + eps);
}

/* 16 elements at a time from i0 to i1 (a multiple of 16 apart). The scalar loop does not
 * vectorize (sqrtf sets errno), and AdamW over every parameter is a sixth of a 100M bf16 step. */
__attribute__((target("avx512f"))) static void
adamw_avx512(float *p, const float *g, float *m, float *v, size_t i0, size_t i1, float lr, float b1,
             float b2, float eps, float wd, float step, float sbc2, float gscale)
{
    const __m512 vgs = _mm512_set1_ps(gscale), decay = _mm512_set1_ps(1.0f - lr * wd),
                 vb1 = _mm512_set1_ps(b1), vb1c = _mm512_set1_ps(1.0f - b1),
                 vb2 = _mm512_set1_ps(b2), vb2c = _mm512_set1_ps(1.0f - b2),
                 vstep = _mm512_set1_ps(step), vsbc2 = _mm512_set1_ps(sbc2),
                 veps = _mm512_set1_ps(eps);
    for (size_t i = i0; i < i1; i += 16) {
        __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), vgs);
        __m512 pi = _mm512_mul_ps(_mm512_loadu_ps(p + i), decay);
        __m512 mi =
            _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(vb1c, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(vb2c, gi), gi));
        __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), vsbc2), veps);
        pi = _mm512_sub_ps(pi, _mm512_div_ps(_mm512_mul_ps(vstep, mi), den));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        _mm512_storeu_ps(p + i, pi);
    }
}

/* torch.optim.AdamW (decoupled weight decay) */
void swift_cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float bc1, float bc2, float gscale)
{
    static int avx512 = -1;
    if (avx512 < 0)
        avx512 = __builtin_cpu_supports("avx512f");
    float step = lr / bc1, sbc2 = sqrtf(bc2);
    size_t nv = avx512 ? n / 16 * 16 : 0;
    if (nv) {
        enum { CHUNK = 16384 };
        long nc = (long)((nv + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static) if (nc > 4)
        for (long c = 0; c < nc; c++) {
            size_t a = (size_t)c * CHUNK, e = a + CHUNK < nv ? a + CHUNK : nv;
            adamw_avx512(p, g, m, v, a, e, lr, b1, b2, eps, wd, step, sbc2, gscale);
        }
    }
#pragma omp parallel for schedule(static) if (n - nv > 65536)
    for (size_t i = nv; i < n; i++)
        adamw1(p, g, m, v, i, lr, b1, b2, eps, wd, step, sbc2, gscale);
}
