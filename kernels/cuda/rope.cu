// rope.cu — rotary position embedding, Hugging Face's rotate_half convention (kernels/cpu/rope.c
// is the specification): dimension d pairs with d + D/2 and turns by pos * inv_freq[d].
#include "kernels/cuda/internal.h"

__global__ void k_rope(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D,
                       float sign)
{
    int half = D / 2;
    size_t n = (size_t)N * H * half;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % half);
        size_t nh = i / half;
        int t = (int)(nh / H);
        float ang = (float)pos[t] * inv_freq[d];
        float c = cosf(ang), s = sign * sinf(ang);
        float *v = x + nh * D;
        float a = v[d], b = v[d + half];
        v[d] = a * c - b * s;
        v[d + half] = b * c + a * s;
    }
}

static void rope(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D,
                 float sign)
{
    SHAPE(N >= 0 && H > 0 && D > 0 && D % 2 == 0);
    need_init();
    const int32_t *p = dev_i32(pos, (size_t)N);
    const float *f = (const float *)dev_ro(inv_freq, (size_t)(D / 2) * sizeof(float));
    k_rope<<<blocks_for((size_t)N * H * (D / 2), 256), 256, 0, G.stream>>>(x, p, f, N, H, D, sign);
    CKK();
}
void swift_cuda_rope_fwd(float *x, const int32_t *pos, const float *f, int N, int H, int D)
{
    rope(x, pos, f, N, H, D, 1.0f);
}
void swift_cuda_rope_bwd(float *x, const int32_t *pos, const float *f, int N, int H, int D)
{
    rope(x, pos, f, N, H, D, -1.0f);
}
