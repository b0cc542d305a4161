/* Embedding lookup and RMSNorm. */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <string.h>

#include "kernels/banned.h"

/* out (N,C) = emb (V,C) [tok[n]] */
void swift_cpu_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, emb + (size_t)tok[n] * C, (size_t)C * sizeof(float));
}

/* demb (V,C) [tok[n]] += dout (N,C) [n]; serial so repeated tokens add in a fixed order */
void swift_cpu_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C)
{
    for (int n = 0; n < N; n++) {
        float *d = demb + (size_t)tok[n] * C;
        const float *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++)
            d[c] += g[c];
    }
}

/* out (N,C) = in * rstd * w (C), rstd (N) = 1/sqrt(mean(in^2) + eps) */
void swift_cpu_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int N, int C,
                           float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float ss = 0;
        for (int c = 0; c < C; c++)
            ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / (float)C + eps);
        rstd[n] = r;
        for (int c = 0; c < C; c++)
            y[c] = w[c] * (x[c] * r);
    }
}

/* y = w * x * r with r = (mean(x^2)+eps)^-1/2:
 * dx += r * (w*dy) - x * r^3 / C * sum_c(w*dy*x) ;  dw += sum_n dy * x * r */
void swift_cpu_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in,
                           const float *w, const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = din + (size_t)n * C;
        float r = rstd[n], dot = 0;
        for (int c = 0; c < C; c++)
            dot += w[c] * dy[c] * x[c];
        float k = dot * r * r * r / (float)C;
        for (int c = 0; c < C; c++)
            dx[c] += r * w[c] * dy[c] - x[c] * k;
    }
    if (dw) {
        /* columns split over threads; each sums its rows in order (deterministic) */
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++) {
            float s = 0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * C + c] * in[(size_t)n * C + c] * rstd[n];
            dw[c] += s;
        }
    }
}
