/* Causal self-attention with grouped KV heads over packed documents. Token i of a row attends
 * to tokens i-pos[i] .. i of the same row (its own document). Plain loops: T is a few hundred
 * here, and the matmuls dominate. */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <string.h>

#include "lib/banned.h"

/* q (B*T,NH,D), k v (B*T,NKV,D) -> out (B*T,NH,D), probs (B,NH,T,T) */
void swift_cpu_attention_fwd(float *out, float *probs, const float *q, const float *k,
                             const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                             int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            int kh = h / group;
            for (int i = 0; i < T; i++) {
                size_t ti = (size_t)b * T + i;
                const float *qi = q + (ti * NH + h) * D;
                float *p = probs + (((size_t)b * NH + h) * T + i) * T;
                int s = i - pos[ti];
                float mx = -INFINITY;
                for (int j = s; j <= i; j++) {
                    const float *kj = k + (((size_t)b * T + j) * NKV + kh) * D;
                    float dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += qi[d] * kj[d];
                    p[j] = dot * scale;
                    if (p[j] > mx)
                        mx = p[j];
                }
                float sum = 0;
                for (int j = s; j <= i; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                float inv = 1.0f / sum;
                float *o = out + (ti * NH + h) * D;
                for (int d = 0; d < D; d++)
                    o[d] = 0;
                for (int j = s; j <= i; j++) {
                    p[j] *= inv;
                    const float *vj = v + (((size_t)b * T + j) * NKV + kh) * D;
                    for (int d = 0; d < D; d++)
                        o[d] += p[j] * vj[d];
                }
            }
        }
    }
}

/* dS = P * (dP - sum_j P dP), dP = dO . V;  dQ = scale dS K;  dK = scale dS^T Q;  dV = P^T dO.
 * One task per (row, kv head) so the heads of a group add into dk/dv without races. */
void swift_cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                             const float *probs, const float *q, const float *k, const float *v,
                             const int32_t *pos, int B, int T, int NH, int NKV, int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++) {
        for (int kh = 0; kh < NKV; kh++) {
            for (int j = 0; j < T; j++) {
                size_t tj = (size_t)b * T + j;
                memset(dk + (tj * NKV + kh) * D, 0, (size_t)D * sizeof(float));
                memset(dv + (tj * NKV + kh) * D, 0, (size_t)D * sizeof(float));
            }
            for (int h = kh * group; h < (kh + 1) * group; h++) {
                for (int i = 0; i < T; i++) {
                    size_t ti = (size_t)b * T + i;
                    const float *p = probs + (((size_t)b * NH + h) * T + i) * T;
                    const float *doi = dout + (ti * NH + h) * D;
                    const float *qi = q + (ti * NH + h) * D;
                    float *dqi = dq + (ti * NH + h) * D;
                    int s = i - pos[ti];
                    /* pass 1: sum_j P dP */
                    float acc = 0;
                    for (int j = s; j <= i; j++) {
                        const float *vj = v + (((size_t)b * T + j) * NKV + kh) * D;
                        float d_ = 0;
                        for (int d = 0; d < D; d++)
                            d_ += doi[d] * vj[d];
                        acc += p[j] * d_;
                    }
                    for (int d = 0; d < D; d++)
                        dqi[d] = 0;
                    /* pass 2: dS, and the three gradients */
                    for (int j = s; j <= i; j++) {
                        size_t tj = (size_t)b * T + j;
                        const float *vj = v + (tj * NKV + kh) * D;
                        const float *kj = k + (tj * NKV + kh) * D;
                        float *dkj = dk + (tj * NKV + kh) * D;
                        float *dvj = dv + (tj * NKV + kh) * D;
                        float dpj = 0;
                        for (int d = 0; d < D; d++)
                            dpj += doi[d] * vj[d];
                        float ds = p[j] * (dpj - acc) * scale;
                        for (int d = 0; d < D; d++) {
                            dqi[d] += ds * kj[d];
                            dkj[d] += ds * qi[d];
                            dvj[d] += p[j] * doi[d];
                        }
                    }
                }
            }
        }
    }
}
