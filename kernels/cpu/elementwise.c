/* SwiGLU, dropout, and small vector ops. */
#include "kernels/cpu/cpu.h"

#include <math.h>

#include "kernels/banned.h"

/* out = silu(g) * u, silu(g) = g * sigmoid(g) */
void swift_cpu_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* dsilu/dg = s * (1 + g * (1 - s)), s = sigmoid(g) */
void swift_cpu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
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

/* torch.optim.AdamW (decoupled weight decay) */
void swift_cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float bc1, float bc2, float gscale)
{
    float step = lr / bc1, sbc2 = sqrtf(bc2);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        p[i] *= 1.0f - lr * wd;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step * m[i] / (sqrtf(v[i]) / sbc2 + eps);
    }
}
