/* Causal self-attention with grouped KV heads over packed documents. Token i of a row attends
 * to tokens i-pos[i] .. i of the same row (its own document).
 *
 * Per (row b, head h) the scores are one sgemm over the whole T x T block (the masked entries
 * are computed and then zeroed: twice the causal FLOPs, but at BLAS speed), the softmax runs
 * over each row's window, and P V is a second sgemm. Heads are strided views of the (B*T,NH,D)
 * tensors (leading dimension NH*D), so nothing is transposed or copied. The sgemm calls are
 * made one after another from this thread and use OpenBLAS's own threads; the softmax rows of
 * all heads form one OpenMP loop (few parallel regions: waking threads is slow on a busy
 * machine). */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/banned.h"

/* softmax of each row's window [i-pos[i], i] of S (B,NH,T,T), zero elsewhere; one parallel
 * region for all rows and heads */
static void masked_softmax(float *p, const int32_t *pos, int B, int T, int NH)
{
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * NH * T; r++) {
        int b = (int)(r / ((long)NH * T)), i = (int)(r % T);
        float *pi = p + (size_t)r * T;
        int s = i - pos[(size_t)b * T + i];
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
}

/* q (B*T,NH,D), k v (B*T,NKV,D) -> out (B*T,NH,D), probs (B,NH,T,T) */
void swift_cpu_attention_fwd(float *out, float *probs, const float *q, const float *k,
                             const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                             int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    /* S (T,T) = scale * Qh (T,D) @ Kh (T,D)^T for every row and head */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            cblas_sgemm(CblasRowMajor,
                        CblasNoTrans,
                        CblasTrans,
                        T,
                        T,
                        D,
                        scale,
                        q + ((size_t)b * T * NH + h) * D,
                        NH * D,
                        k + ((size_t)b * T * NKV + h / group) * D,
                        NKV * D,
                        0.0f,
                        probs + ((size_t)b * NH + h) * T * T,
                        T);
    masked_softmax(probs, pos, B, T, NH);
    /* Oh (T,D) = P (T,T) @ Vh (T,D) */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            cblas_sgemm(CblasRowMajor,
                        CblasNoTrans,
                        CblasNoTrans,
                        T,
                        D,
                        T,
                        1.0f,
                        probs + ((size_t)b * NH + h) * T * T,
                        T,
                        v + ((size_t)b * T * NKV + h / group) * D,
                        NKV * D,
                        0.0f,
                        out + ((size_t)b * T * NH + h) * D,
                        NH * D);
}

/* dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale dS K;  dK += scale dS^T Q;
 * dV += P^T dO. The heads of a group add into the same dK, dV. */
void swift_cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                             const float *q, const float *k, const float *v, const int32_t *pos,
                             int B, int T, int NH, int NKV, int D)
{
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    size_t tt = (size_t)T * T;
    float *ds = malloc((size_t)B * NH * tt * sizeof(float));
    if (!ds)
        abort(); /* the size of probs, which the model holds already */
    (void)pos;   /* the mask is in P: masked entries are exactly 0, so are their gradients */
    memset(dk, 0, (size_t)B * T * NKV * D * sizeof(float));
    memset(dv, 0, (size_t)B * T * NKV * D * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t qo = ((size_t)b * T * NH + h) * D, ko = ((size_t)b * T * NKV + h / group) * D;
            const float *p = probs + ((size_t)b * NH + h) * tt;
            /* dVh (T,D) += P^T (T,T) @ dOh (T,D) */
            cblas_sgemm(CblasRowMajor,
                        CblasTrans,
                        CblasNoTrans,
                        T,
                        D,
                        T,
                        1.0f,
                        p,
                        T,
                        dout + qo,
                        NH * D,
                        1.0f,
                        dv + ko,
                        NKV * D);
            /* dP (T,T) = dOh (T,D) @ Vh (T,D)^T */
            cblas_sgemm(CblasRowMajor,
                        CblasNoTrans,
                        CblasTrans,
                        T,
                        T,
                        D,
                        1.0f,
                        dout + qo,
                        NH * D,
                        v + ko,
                        NKV * D,
                        0.0f,
                        ds + ((size_t)b * NH + h) * tt,
                        T);
        }
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * NH * T; r++) {
        int i = (int)(r % T);
        const float *pi = probs + (size_t)r * T;
        float *di = ds + (size_t)r * T;
        float acc = 0;
        for (int j = 0; j <= i; j++)
            acc += pi[j] * di[j];
        for (int j = 0; j <= i; j++)
            di[j] = pi[j] * (di[j] - acc) * scale;
        for (int j = i + 1; j < T; j++)
            di[j] = 0;
    }
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t qo = ((size_t)b * T * NH + h) * D, ko = ((size_t)b * T * NKV + h / group) * D;
            const float *d = ds + ((size_t)b * NH + h) * tt;
            /* dQh (T,D) = dS (T,T) @ Kh (T,D) ; dKh (T,D) += dS^T @ Qh */
            cblas_sgemm(CblasRowMajor,
                        CblasNoTrans,
                        CblasNoTrans,
                        T,
                        D,
                        T,
                        1.0f,
                        d,
                        T,
                        k + ko,
                        NKV * D,
                        0.0f,
                        dq + qo,
                        NH * D);
            cblas_sgemm(CblasRowMajor,
                        CblasTrans,
                        CblasNoTrans,
                        T,
                        D,
                        T,
                        1.0f,
                        d,
                        T,
                        q + qo,
                        NH * D,
                        1.0f,
                        dk + ko,
                        NKV * D);
        }
    }
    free(ds);
}
