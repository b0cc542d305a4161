/* The vision tower's ops (kernels/ops.h: layernorm, gelu, attention_seg): LayerNorm with bias,
 * the erf GELU and QuickGELU, and bidirectional attention inside segments of tokens. */
#include "kernels/cpu/cpu.h"
#include "kernels/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/banned.h"

/* out (N,C) = (in - mean) * rstd * w + b; mean, rstd (N) saved (torch's biased variance) */
void swift_cpu_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w,
                             const float *b, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float s = 0;
        for (int c = 0; c < C; c++)
            s += x[c];
        float mu = s / (float)C, v = 0;
        for (int c = 0; c < C; c++)
            v += (x[c] - mu) * (x[c] - mu);
        float r = 1.0f / sqrtf(v / (float)C + eps);
        mean[n] = mu;
        rstd[n] = r;
        for (int c = 0; c < C; c++)
            y[c] = (x[c] - mu) * r * w[c] + (b ? b[c] : 0.0f);
    }
}

/* din (N,C) += d/din; dw, db (C) += (each may be NULL) */
void swift_cpu_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, const float *mean, const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = din + (size_t)n * C;
        float mu = mean[n], r = rstd[n], s1 = 0, s2 = 0;
        for (int c = 0; c < C; c++) {
            float g = dy[c] * w[c];
            s1 += g;
            s2 += g * (x[c] - mu) * r;
        }
        s1 /= (float)C;
        s2 /= (float)C;
        for (int c = 0; c < C; c++) {
            float xh = (x[c] - mu) * r;
            dx[c] += r * (dy[c] * w[c] - s1 - xh * s2);
        }
    }
    if (!dw && !db)
        return;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float sw = 0, sb = 0;
        for (int n = 0; n < N; n++) {
            float dy = dout[(size_t)n * C + c];
            sw += dy * (in[(size_t)n * C + c] - mean[n]) * rstd[n];
            sb += dy;
        }
        if (dw)
            dw[c] += sw;
        if (db)
            db[c] += sb;
    }
}

static inline float gelu1(float x, int kind, float *grad)
{
    if (kind == SWIFT_GELU_QUICK) {
        float s = 1.0f / (1.0f + expf(-1.702f * x));
        if (grad)
            *grad = s + 1.702f * x * s * (1.0f - s);
        return x * s;
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    if (grad)
        *grad = cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
    return x * cdf;
}

void swift_cpu_gelu_fwd(float *out, const float *in, size_t n, int kind)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = gelu1(in[i], kind, NULL);
}

void swift_cpu_gelu_bwd(float *din, const float *dout, const float *in, size_t n, int kind)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g;
        gelu1(in[i], kind, &g);
        din[i] = dout[i] * g;
    }
}

/* where segment s's probabilities start: NH * sum of the earlier segments' lengths squared */
static size_t seg_off(const int32_t *cu, int s, int NH)
{
    size_t o = 0;
    for (int i = 0; i < s; i++)
        o += (size_t)(cu[i + 1] - cu[i]) * (size_t)(cu[i + 1] - cu[i]);
    return o * (size_t)NH;
}

void swift_cpu_attention_seg_fwd(float *out, float *probs, const float *q, const float *k,
                                 const float *v, const int32_t *cu, int nseg, int N, int NH, int D)
{
    float scale = 1.0f / sqrtf((float)D);
    size_t RS = (size_t)NH * D;
    (void)N;
    for (int s = 0; s < nseg; s++) {
        int c0 = cu[s], L = cu[s + 1] - cu[s];
        float *P = probs + seg_off(cu, s, NH);
#pragma omp parallel for collapse(2) schedule(static)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < L; i++) {
                const float *qi = q + (size_t)(c0 + i) * RS + (size_t)h * D;
                float *p = P + ((size_t)h * L + i) * L, mx = -INFINITY, sum = 0;
                for (int j = 0; j < L; j++) {
                    const float *kj = k + (size_t)(c0 + j) * RS + (size_t)h * D;
                    float d = 0;
                    for (int e = 0; e < D; e++)
                        d += qi[e] * kj[e];
                    p[j] = d * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < L; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                float *o = out + (size_t)(c0 + i) * RS + (size_t)h * D;
                memset(o, 0, (size_t)D * sizeof(float));
                for (int j = 0; j < L; j++) {
                    p[j] /= sum;
                    const float *vj = v + (size_t)(c0 + j) * RS + (size_t)h * D;
                    for (int e = 0; e < D; e++)
                        o[e] += p[j] * vj[e];
                }
            }
    }
}

void swift_cpu_attention_seg_bwd(float *dq, float *dk, float *dv, const float *dout,
                                 const float *probs, const float *q, const float *k, const float *v,
                                 const int32_t *cu, int nseg, int N, int NH, int D)
{
    float scale = 1.0f / sqrtf((float)D);
    size_t RS = (size_t)NH * D;
    memset(dq, 0, (size_t)N * RS * sizeof(float));
    memset(dk, 0, (size_t)N * RS * sizeof(float));
    memset(dv, 0, (size_t)N * RS * sizeof(float));
    for (int s = 0; s < nseg; s++) {
        int c0 = cu[s], L = cu[s + 1] - cu[s];
        const float *P = probs + seg_off(cu, s, NH);
#pragma omp parallel for schedule(static)
        for (int h = 0; h < NH; h++) {
            float *ds = malloc((size_t)(L > 0 ? L : 1) * sizeof(float));
            if (!ds)
                abort();
            for (int i = 0; i < L; i++) {
                const float *p = P + ((size_t)h * L + i) * L;
                const float *go = dout + (size_t)(c0 + i) * RS + (size_t)h * D;
                const float *qi = q + (size_t)(c0 + i) * RS + (size_t)h * D;
                float *dqi = dq + (size_t)(c0 + i) * RS + (size_t)h * D, dot = 0;
                for (int j = 0; j < L; j++) {
                    const float *vj = v + (size_t)(c0 + j) * RS + (size_t)h * D;
                    float *dvj = dv + (size_t)(c0 + j) * RS + (size_t)h * D, d = 0;
                    for (int e = 0; e < D; e++) {
                        d += go[e] * vj[e];
                        dvj[e] += p[j] * go[e];
                    }
                    ds[j] = d;
                    dot += p[j] * d;
                }
                for (int j = 0; j < L; j++) {
                    float g = p[j] * (ds[j] - dot) * scale;
                    const float *kj = k + (size_t)(c0 + j) * RS + (size_t)h * D;
                    float *dkj = dk + (size_t)(c0 + j) * RS + (size_t)h * D;
                    for (int e = 0; e < D; e++) {
                        dqi[e] += g * kj[e];
                        dkj[e] += g * qi[e];
                    }
                }
            }
            free(ds);
        }
    }
}
