/* Causal self-attention with grouped KV heads over packed documents. Token i of a row attends
 * to tokens i-pos[i] .. i of the same row (its own document).
 *
 * Per (row b, head h) the scores are one sgemm over the whole T x T block (the masked entries
 * are computed and then zeroed: twice the causal FLOPs, but at BLAS speed), the softmax runs
 * over each row's window, and P V is a second sgemm. Heads are strided views of the (B*T,NH,D)
 * tensors (leading dimension NH*D), so nothing is transposed or copied. The sgemm calls are
 * made one after another from this thread and use OpenBLAS's own threads; the row loops use
 * OpenMP. */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "lib/banned.h"

/* q (B*T,NH,D), k v (B*T,NKV,D) -> out (B*T,NH,D), probs (B,NH,T,T) */
void swift_cpu_attention_fwd(float *out, float *probs, const float *q, const float *k,
                             const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                             int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qh = q + ((size_t)b * T * NH + h) * D;
            const float *kh = k + ((size_t)b * T * NKV + h / group) * D;
            const float *vh = v + ((size_t)b * T * NKV + h / group) * D;
            float *p = probs + ((size_t)b * NH + h) * T * T;
            /* S (T,T) = scale * Qh (T,D) @ Kh (T,D)^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, qh, NH * D, kh,
                        NKV * D, 0.0f, p, T);
            const int32_t *ps = pos + (size_t)b * T;
#pragma omp parallel for schedule(static)
            for (int i = 0; i < T; i++) {
                float *pi = p + (size_t)i * T;
                int s = i - ps[i];
                float mx = -INFINITY, sum = 0;
                for (int j = s; j <= i; j++)
                    mx = pi[j] > mx ? pi[j] : mx;
                for (int j = s; j <= i; j++) {
                    pi[j] = expf(pi[j] - mx);
                    sum += pi[j];
                }
                float inv = 1.0f / sum;
                for (int j = 0; j < s; j++)
                    pi[j] = 0;
                for (int j = s; j <= i; j++)
                    pi[j] *= inv;
                for (int j = i + 1; j < T; j++)
                    pi[j] = 0;
            }
            /* Oh (T,D) = P (T,T) @ Vh (T,D) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, p, T, vh,
                        NKV * D, 0.0f, out + ((size_t)b * T * NH + h) * D, NH * D);
        }
    }
}

/* dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale dS K;  dK += scale dS^T Q;
 * dV += P^T dO. The heads of a group add into the same dK, dV. */
void swift_cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                             const float *probs, const float *q, const float *k, const float *v,
                             const int32_t *pos, int B, int T, int NH, int NKV, int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    float *ds = malloc((size_t)T * T * sizeof(float));
    if (!ds)
        abort(); /* T*T floats: reserved sizes are checked by the model first */
    (void)pos; /* the mask is in P: masked entries are exactly 0, so are their gradients */
    for (int b = 0; b < B; b++) {
        for (int kv = 0; kv < NKV; kv++) {
            for (int t = 0; t < T; t++) {
                memset(dk + (((size_t)b * T + t) * NKV + kv) * D, 0, (size_t)D * sizeof(float));
                memset(dv + (((size_t)b * T + t) * NKV + kv) * D, 0, (size_t)D * sizeof(float));
            }
        }
        for (int h = 0; h < NH; h++) {
            size_t qo = ((size_t)b * T * NH + h) * D, ko = ((size_t)b * T * NKV + h / group) * D;
            const float *p = probs + ((size_t)b * NH + h) * T * T;
            /* dVh (T,D) += P^T (T,T) @ dOh (T,D) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, p, T, dout + qo,
                        NH * D, 1.0f, dv + ko, NKV * D);
            /* dP (T,T) = dOh (T,D) @ Vh (T,D)^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dout + qo, NH * D,
                        v + ko, NKV * D, 0.0f, ds, T);
#pragma omp parallel for schedule(static)
            for (int i = 0; i < T; i++) {
                const float *pi = p + (size_t)i * T;
                float *di = ds + (size_t)i * T;
                float acc = 0;
                for (int j = 0; j <= i; j++)
                    acc += pi[j] * di[j];
                for (int j = 0; j <= i; j++)
                    di[j] = pi[j] * (di[j] - acc) * scale;
                for (int j = i + 1; j < T; j++)
                    di[j] = 0;
            }
            /* dQh (T,D) = dS (T,T) @ Kh (T,D) ; dKh (T,D) += dS^T @ Qh */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, ds, T, k + ko,
                        NKV * D, 0.0f, dq + qo, NH * D);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, ds, T, q + qo,
                        NH * D, 1.0f, dk + ko, NKV * D);
        }
    }
    free(ds);
}
