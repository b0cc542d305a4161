/* The key/value cache ops (struct swift_ops copy_rows, attention_cached and attention_paged,
 * kernels/ops.h): what lib/model/kv.c and pkv.c run for inference. attention_cached is the loop
 * kv.c had inline before the cache became backend memory, unchanged (same order of operations, same
 * results). */
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

/* One (token, head): out o (D) = softmax(q.k_j * scale) v_j over positions j = 0..n, position j
 * at base + j*KD (tables NULL) or in block tables[j/bs] at slot j%bs (plus the head's offset
 * base). One pass with an online softmax; the cached and the paged op share it, so they give the
 * same bits on the same keys. */
static void attend_one(float *o, const float *qi, const float *kc, const float *vc, size_t base,
                       const int32_t *tables, int bs, int n, size_t KD, int D, float scale)
{
    float acc[MAX_HEAD_DIM];
    float mx = -INFINITY, sum = 0.0f;
    for (int d = 0; d < D; d++)
        acc[d] = 0.0f;
    for (int j = 0; j <= n; j++) {
        size_t at = tables ? ((size_t)tables[j / bs] * bs + (size_t)(j % bs)) * KD + base
                           : base + (size_t)j * KD;
        const float *kj = kc + at, *vj = vc + at;
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
    for (int d = 0; d < D; d++)
        o[d] = acc[d] / sum;
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
    for (int i = 0; i < N; i++)
        for (int h = 0; h < NH; h++) {
            size_t base = (size_t)row[i] * row_stride + (size_t)(h / G) * D;
            attend_one(out + ((size_t)i * NH + h) * D,
                       q + ((size_t)i * NH + h) * D,
                       kcache,
                       vcache,
                       base,
                       NULL,
                       1,
                       pos[i],
                       KD,
                       D,
                       scale);
        }
}

void swift_cpu_attention_paged(float *out, const float *q, const float *kcache, const float *vcache,
                               const int32_t *pos, const int32_t *toff, const int32_t *tables,
                               int ntables, int block_size, int N, int NH, int NKV, int D)
{
    (void)ntables;
    if (D > MAX_HEAD_DIM || D < 1 || NKV < 1 || NH % NKV || block_size < 1)
        return; /* pkv.c refuses such models before any op runs */
    int G = NH / NKV;
    size_t KD = (size_t)NKV * D;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(dynamic, 4) if (N * NH > 8)
    for (int i = 0; i < N; i++)
        for (int h = 0; h < NH; h++)
            attend_one(out + ((size_t)i * NH + h) * D,
                       q + ((size_t)i * NH + h) * D,
                       kcache,
                       vcache,
                       (size_t)(h / G) * D,
                       tables + toff[i],
                       block_size,
                       pos[i],
                       KD,
                       D,
                       scale);
}
