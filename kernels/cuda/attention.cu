// attention.cu — causal self-attention with grouped KV heads over packed documents
// (kernels/cpu/attention.c is the specification). The fused path is flash_attn.cu; this file
// chooses the path per call and holds the cuBLAS one: strided-batched GEMMs per query head
// (batched over rows) for S = QK^T/sqrt(D), a masked softmax kernel, then PV.
#include "kernels/cuda/internal.h"

#include "kernels/cuda/flash_attn.h"

/* one block per row (b,h,i) of S (already scaled): softmax over j in [i-pos, i], 0 elsewhere */
__global__ void k_softmax_mask(float *P, const int32_t *pos, int NH, int T)
{
    size_t row = blockIdx.x;
    int i = (int)(row % T);
    int b = (int)(row / ((size_t)NH * T));
    int s = i - pos[(size_t)b * T + i];
    float *p = P + row * T;
    float mx = -INFINITY;
    for (int j = s + threadIdx.x; j <= i; j += blockDim.x)
        mx = fmaxf(mx, p[j]);
    mx = block_max(mx);
    float sum = 0;
    for (int j = s + threadIdx.x; j <= i; j += blockDim.x)
        sum += expf(p[j] - mx);
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        p[j] = (j >= s && j <= i) ? expf(p[j] - mx) * inv : 0.0f;
}

/* dS = P (dP - sum_j P dP) * scale inside the mask, 0 outside; in place over dP */
__global__ void k_softmax_bwd(float *dP, const float *P, const int32_t *pos, int NH, int T,
                              float scale)
{
    size_t row = blockIdx.x;
    int i = (int)(row % T);
    int b = (int)(row / ((size_t)NH * T));
    int s = i - pos[(size_t)b * T + i];
    const float *p = P + row * T;
    float *d = dP + row * T;
    float acc = 0;
    for (int j = s + threadIdx.x; j <= i; j += blockDim.x)
        acc += p[j] * d[j];
    acc = block_sum(acc);
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        d[j] = (j >= s && j <= i) ? p[j] * (d[j] - acc) * scale : 0.0f;
}

/* Strided-batched GEMM over the B rows for one head: the (b) stride of each operand. */
static void sgemm_b(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                    long long sa, const float *Bm, int ldb, long long sb, float beta, float *C,
                    int ldc, long long sc, int batch)
{
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CKB(cublasSgemmStridedBatched(
        G.blas, oa, ob, m, n, k, &alpha, A, lda, sa, Bm, ldb, sb, &beta, C, ldc, sc, batch));
}

static float *scratch(size_t n)
{
    if (G.scratch_n < n) {
        if (G.scratch) {
            CK(cudaStreamSynchronize(G.stream));
            CK(cudaFree(G.scratch));
        }
        CK(cudaMalloc(&G.scratch, n * sizeof(float)));
        G.scratch_n = n;
    }
    return G.scratch;
}

void swift_cuda_attention_fwd(float *out, float *probs, const float *q, const float *k,
                              const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                              int D)
{
    SHAPE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && D > 0);
    need_init();
    const int32_t *p = dev_i32(pos, (size_t)B * T);
    if (swift_flash_use(D)) { /* kernels/cuda/flash_attn.cu: probs holds L (and a copy of out) */
        swift_flash_fwd(G.stream, out, probs, q, k, v, p, B, T, NH, NKV, D);
        return;
    }
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    long long sq = (long long)T * NH * D, sk = (long long)T * NKV * D, sp = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {
        int kh = h / group;
        /* S^T (j,i) col-major = K (T,D) . Q^T: C = op(K)^T op(Q) */
        sgemm_b(1,
                0,
                T,
                T,
                D,
                scale,
                k + (size_t)kh * D,
                NKV * D,
                sk,
                q + (size_t)h * D,
                NH * D,
                sq,
                0.0f,
                probs + (size_t)h * T * T,
                T,
                sp,
                B);
    }
    k_softmax_mask<<<(unsigned)((size_t)B * NH * T), 256, 0, G.stream>>>(probs, p, NH, T);
    CKK();
    for (int h = 0; h < NH; h++) {
        int kh = h / group;
        /* O^T (D,T) = V^T (D,T) P^T (T,T) */
        sgemm_b(0,
                0,
                D,
                T,
                T,
                1.0f,
                v + (size_t)kh * D,
                NKV * D,
                sk,
                probs + (size_t)h * T * T,
                T,
                sp,
                0.0f,
                out + (size_t)h * D,
                NH * D,
                sq,
                B);
    }
}

void swift_cuda_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                              const float *probs, const float *q, const float *k, const float *v,
                              const int32_t *pos, int B, int T, int NH, int NKV, int D)
{
    SHAPE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && D > 0);
    need_init();
    const int32_t *p = dev_i32(pos, (size_t)B * T);
    if (swift_flash_use(D)) { /* probs: what swift_flash_fwd left there */
        swift_flash_bwd(G.stream, dq, dk, dv, dout, probs, q, k, v, p, B, T, NH, NKV, D);
        return;
    }
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    long long sq = (long long)T * NH * D, sk = (long long)T * NKV * D, sp = (long long)NH * T * T;
    float *dP = scratch((size_t)B * NH * T * T);
    for (int h = 0; h < NH; h++) {
        int kh = h / group;
        /* dP (i,j) = dO_i . V_j, stored like S */
        sgemm_b(1,
                0,
                T,
                T,
                D,
                1.0f,
                v + (size_t)kh * D,
                NKV * D,
                sk,
                dout + (size_t)h * D,
                NH * D,
                sq,
                0.0f,
                dP + (size_t)h * T * T,
                T,
                sp,
                B);
    }
    k_softmax_bwd<<<(unsigned)((size_t)B * NH * T), 256, 0, G.stream>>>(dP, probs, p, NH, T, scale);
    CKK();
    for (int h = 0; h < NH; h++) {
        int kh = h / group;
        float beta = h % group ? 1.0f : 0.0f; /* heads of a group add into dk, dv */
        /* dQ^T (D,T) = K^T (D,T) dS^T */
        sgemm_b(0,
                0,
                D,
                T,
                T,
                1.0f,
                k + (size_t)kh * D,
                NKV * D,
                sk,
                dP + (size_t)h * T * T,
                T,
                sp,
                0.0f,
                dq + (size_t)h * D,
                NH * D,
                sq,
                B);
        /* dK^T (D,T) = Q^T (D,T) dS (T,T) */
        sgemm_b(0,
                1,
                D,
                T,
                T,
                1.0f,
                q + (size_t)h * D,
                NH * D,
                sq,
                dP + (size_t)h * T * T,
                T,
                sp,
                beta,
                dk + (size_t)kh * D,
                NKV * D,
                sk,
                B);
        /* dV^T (D,T) = dO^T (D,T) P (T,T) */
        sgemm_b(0,
                1,
                D,
                T,
                T,
                1.0f,
                dout + (size_t)h * D,
                NH * D,
                sq,
                probs + (size_t)h * T * T,
                T,
                sp,
                beta,
                dv + (size_t)kh * D,
                NKV * D,
                sk,
                B);
    }
}
