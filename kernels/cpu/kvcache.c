/* The key/value cache ops (struct swift_ops copy_rows and attention_cached, kernels/ops.h):
 * what lib/eval/kv.c runs for inference. attention_cached is the loop kv.c had inline before
 * the cache became backend memory, unchanged (same order of operations, same results). */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <string.h>

#include "kernels/banned.h"

#define MAX_HEAD_DIM 512

void swift_cpu_copy_rows(float *dst, const int32_t *dst_idx, const float *src,
                         const int32_t *src_idx, int n, int width)
{
    size_t w = (size_t)width;
    for (int i = 0; i < n; i++) {
        size_t d = (size_t)(dst_idx ? dst_idx[i] : i), s = (size_t)(src_idx ? src_idx[i] : i);
        memcpy(dst + d * w, src + s * w, w * sizeof(float));
    }
}

void swift_cpu_attention_cached(float *out, const float *q, const float *kcache,
                                const float *vcache, const int32_t *pos, const int32_t *row,
                                size_t row_stride, int N, int NH, int NKV, int D)
{
    if (D > MAX_HEAD_DIM || D < 1 || NKV < 1 || NH % NKV)
        return; /* kv.c refuses such models before any op runs */
    int G = NH / NKV;
    size_t KD = (size_t)NKV * D;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(dynamic, 4) if (N * NH > 8)
    for (int i = 0; i < N; i++) {
        for (int h = 0; h < NH; h++) {
            const float *qi = q + ((size_t)i * NH + h) * D;
            size_t base = (size_t)row[i] * row_stride + (size_t)(h / G) * D;
            const float *kb = kcache + base, *vb = vcache + base;
            float acc[MAX_HEAD_DIM];
            float mx = -INFINITY, sum = 0.0f;
            for (int d = 0; d < D; d++)
                acc[d] = 0.0f;
            for (int j = 0; j <= pos[i]; j++) {
                const float *kj = kb + (size_t)j * KD, *vj = vb + (size_t)j * KD;
                float s = 0.0f;
                for (int d = 0; d < D; d++)
                    s += qi[d] * kj[d];
                s *= scale;
                if (s > mx) {
                    float r = expf(mx - s);
                    sum *= r;
                    for (int d = 0; d < D; d++)
                        acc[d] *= r;
                    mx = s;
                }
                float p = expf(s - mx);
                sum += p;
                for (int d = 0; d < D; d++)
                    acc[d] += p * vj[d];
            }
            float *o = out + ((size_t)i * NH + h) * D;
            for (int d = 0; d < D; d++)
                o[d] = acc[d] / sum;
        }
    }
}
