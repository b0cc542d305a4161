// kvcache.cu — the key/value cache ops copy_rows and attention_cached (kernels/cpu/kvcache.c is
// the specification), for lib/eval/kv.c.
#include "kernels/cuda/internal.h"

__global__ void k_copy_rows(float *dst, const int32_t *di, const float *src, const int32_t *si,
                            int n, int width)
{
    size_t total = (size_t)n * width;
    GRID_STRIDE(e, total)
    {
        size_t i = e / (size_t)width, c = e % (size_t)width;
        size_t d = di ? (size_t)di[i] : i, s = si ? (size_t)si[i] : i;
        dst[d * width + c] = src[s * width + c];
    }
}

void swift_cuda_copy_rows(float *dst, const int32_t *dst_idx, const float *src,
                          const int32_t *src_idx, int n, int width)
{
    SHAPE(n >= 0 && width > 0);
    need_init();
    if (n == 0)
        return;
    const int32_t *di = dst_idx ? dev_i32(dst_idx, (size_t)n) : NULL;
    const int32_t *si = src_idx ? dev_i32(src_idx, (size_t)n) : NULL;
    k_copy_rows<<<blocks_for((size_t)n * width, 256), 256, 0, G.stream>>>(
        dst, di, src, si, n, width);
    CKK();
}

/* One block per (token, head), one thread per element of the head (blockDim >= D): for each
 * cached position j the block reduces q.k_j, then every thread updates the running max, sum and
 * its own accumulator (online softmax in fp32, the CPU loop's order over j). Simple, not fast:
 * one block reduction per position. */
__global__ void k_attention_cached(float *out, const float *q, const float *kc, const float *vc,
                                   const int32_t *pos, const int32_t *row, size_t row_stride,
                                   int NH, int NKV, int D, float scale)
{
    int i = blockIdx.x / NH, h = blockIdx.x % NH, d = threadIdx.x;
    size_t KD = (size_t)NKV * D;
    size_t base = (size_t)row[i] * row_stride + (size_t)(h / (NH / NKV)) * D;
    const float *kb = kc + base, *vb = vc + base;
    float qd = d < D ? q[((size_t)i * NH + h) * D + d] : 0.0f;
    float mx = -INFINITY, sum = 0.0f, acc = 0.0f;
    int n = pos[i];
    for (int j = 0; j <= n; j++) {
        float s = block_sum(d < D ? qd * kb[(size_t)j * KD + d] : 0.0f) * scale;
        if (s > mx) {
            float r = expf(mx - s);
            sum *= r;
            acc *= r;
            mx = s;
        }
        float p = expf(s - mx);
        sum += p;
        if (d < D)
            acc += p * vb[(size_t)j * KD + d];
    }
    if (d < D)
        out[((size_t)i * NH + h) * D + d] = acc / sum;
}

void swift_cuda_attention_cached(float *out, const float *q, const float *kcache,
                                 const float *vcache, const int32_t *pos, const int32_t *row,
                                 size_t row_stride, int N, int NH, int NKV, int D)
{
    SHAPE(N >= 0 && D >= 1 && D <= 512 && NKV >= 1 && NH % NKV == 0);
    need_init();
    if (N == 0)
        return;
    const int32_t *p = dev_i32(pos, (size_t)N), *r = dev_i32(row, (size_t)N);
    unsigned threads = 32;
    while (threads < (unsigned)D)
        threads *= 2;
    k_attention_cached<<<(unsigned)N * NH, threads, 0, G.stream>>>(
        out, q, kcache, vcache, p, r, row_stride, NH, NKV, D, 1.0f / sqrtf((float)D));
    CKK();
}

/* attention_paged: k_attention_cached's loop with position j found through the block table
 * (kernels/cpu/kvcache.c is the specification). */
__global__ void k_attention_paged(float *out, const float *q, const float *kc, const float *vc,
                                  const int32_t *pos, const int32_t *toff, const int32_t *tables,
                                  int bs, int NH, int NKV, int D, float scale)
{
    int i = blockIdx.x / NH, h = blockIdx.x % NH, d = threadIdx.x;
    size_t KD = (size_t)NKV * D, hoff = (size_t)(h / (NH / NKV)) * D;
    const int32_t *tb = tables + toff[i];
    float qd = d < D ? q[((size_t)i * NH + h) * D + d] : 0.0f;
    float mx = -INFINITY, sum = 0.0f, acc = 0.0f;
    int n = pos[i];
    for (int j = 0; j <= n; j++) {
        size_t at = ((size_t)tb[j / bs] * bs + (size_t)(j % bs)) * KD + hoff;
        float s = block_sum(d < D ? qd * kc[at + d] : 0.0f) * scale;
        if (s > mx) {
            float r = expf(mx - s);
            sum *= r;
            acc *= r;
            mx = s;
        }
        float p = expf(s - mx);
        sum += p;
        if (d < D)
            acc += p * vc[at + d];
    }
    if (d < D)
        out[((size_t)i * NH + h) * D + d] = acc / sum;
}

void swift_cuda_attention_paged(float *out, const float *q, const float *kcache,
                                const float *vcache, const int32_t *pos, const int32_t *toff,
                                const int32_t *tables, int ntables, int block_size, int N, int NH,
                                int NKV, int D)
{
    SHAPE(N >= 0 && D >= 1 && D <= 512 && NKV >= 1 && NH % NKV == 0 && block_size >= 1 &&
          ntables >= 1);
    need_init();
    if (N == 0)
        return;
    const int32_t *p = dev_i32(pos, (size_t)N), *o = dev_i32(toff, (size_t)N);
    const int32_t *t = dev_i32(tables, (size_t)ntables);
    unsigned threads = 32;
    while (threads < (unsigned)D)
        threads *= 2;
    k_attention_paged<<<(unsigned)N * NH, threads, 0, G.stream>>>(
        out, q, kcache, vcache, p, o, t, block_size, NH, NKV, D, 1.0f / sqrtf((float)D));
    CKK();
}
