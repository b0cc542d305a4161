// ops.cu — the CUDA backend's op table (struct swift_ops, kernels/ops.h). The CPU table
// (kernels/cpu) is the specification: same shapes, same layouts, same accumulate/write rules;
// tests/kernels/test_cuda_ops.c checks every op against it.
//
// - memory is plain device memory (cudaMalloc, zeroed with cudaMemset): the host never
//   dereferences it; lib/model/model.c, lib/model/lora.c, lib/train/train.c and lib/train/dist.c
//   move weights, optimizer state and gradients through upload/download (no managed memory: the GPU
//   machines forbid oversubscribing it);
// - int32 index arrays (tokens, positions, targets) may be host memory: they are uploaded into
//   a small device cache keyed by (pointer, length, content hash), so one micro-batch costs
//   three small copies whatever the number of layers;
// - matmuls through cuBLASLt (fp32 in/out; compute fp32, tf32 or bf16 with fp32 accumulation),
//   attention through cuBLAS strided-batched GEMMs plus masked softmax kernels (block-diagonal
//   causal mask from pos);
// - every CUDA/cuBLAS call is checked: "file:line: call: error" on stderr, then abort() — an
//   op has no way to return an error, and continuing would train on garbage.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/ops.h"
#include "kernels/cuda/cupti.h"
}
#include "kernels/cuda/flash_attn.h"

#include "kernels/cuda/check.h"

#define CKB(call)                                                                                  \
    do {                                                                                           \
        cublasStatus_t ck_s = (call);                                                              \
        if (ck_s != CUBLAS_STATUS_SUCCESS) {                                                       \
            fprintf(stderr,                                                                        \
                    "%s:%d: %s: %s\n",                                                             \
                    __FILE__,                                                                      \
                    __LINE__,                                                                      \
                    #call,                                                                         \
                    cublasGetStatusString(ck_s));                                                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define SHAPE(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: bad shape: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static struct {
    int ready, device, math;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *lt_ws;
    size_t lt_ws_size;
    float *scratch; /* attention dP / dS (B,NH,T,T) */
    size_t scratch_n;
    double *red; /* reductions: partial sums */
    size_t allocated;
} G;

enum { RED_BLOCKS = 1024 };

extern "C" void swift_cuda_set_math(int mode)
{
    G.math = mode;
    if (G.ready)
        CKB(cublasSetMathMode(G.blas,
                              mode == SWIFT_CUDA_MATH_FP32   ? CUBLAS_PEDANTIC_MATH
                              : mode == SWIFT_CUDA_MATH_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                             : CUBLAS_TF32_TENSOR_OP_MATH));
}

extern "C" size_t swift_cuda_mem_allocated(void)
{
    return G.allocated;
}

extern "C" int swift_cuda_init(int device)
{
    if (G.ready)
        return G.device == device ? 0 : -1;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || device < 0 || device >= n) {
        fprintf(stderr,
                "cuda:%d: no such device (%d found%s%s)\n",
                device,
                e ? 0 : n,
                e ? ": " : "",
                e ? cudaGetErrorString(e) : "");
        cudaGetLastError();
        return -1;
    }
    CK(cudaSetDevice(device));
    CK(cudaStreamCreateWithFlags(&G.stream, cudaStreamNonBlocking));
    CKB(cublasLtCreate(&G.lt));
    CKB(cublasCreate(&G.blas));
    CKB(cublasSetStream(G.blas, G.stream));
    G.lt_ws_size = 32u << 20;
    CK(cudaMalloc(&G.lt_ws, G.lt_ws_size));
    CK(cudaMalloc(&G.red, (RED_BLOCKS + 4) * sizeof(double)));
    G.device = device;
    G.ready = 1;
    int math = SWIFT_CUDA_MATH_TF32;
    const char *env = getenv("SWIFT_CUDA_MATH");
    if (env && !strcmp(env, "fp32"))
        math = SWIFT_CUDA_MATH_FP32;
    else if (env && !strcmp(env, "bf16"))
        math = SWIFT_CUDA_MATH_BF16;
    swift_cuda_set_math(math);
    return 0;
}

static void need_init(void)
{
    if (!G.ready && swift_cuda_init(0) < 0)
        abort();
}

static unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 16 ? 65535u * 16 : (b ? b : 1));
}

/* ---------------- memory ---------------- */

/* allocation sizes, for the device memory counter */
struct asz {
    void *p;
    size_t n;
};
static struct asz *A_tab;
static size_t A_n, A_cap;

static void *cu_alloc(size_t bytes)
{
    need_init();
    void *p = NULL;
    size_t sz = bytes ? bytes : 1;
    if (cudaMalloc(&p, sz) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    CK(cudaMemsetAsync(p, 0, sz, G.stream));
    CK(cudaStreamSynchronize(G.stream));
    if (A_n == A_cap) {
        size_t nc = A_cap ? A_cap * 2 : 256;
        struct asz *t = (struct asz *)realloc(A_tab, nc * sizeof(*t));
        if (!t) {
            cudaFree(p);
            return NULL;
        }
        A_tab = t;
        A_cap = nc;
    }
    A_tab[A_n].p = p;
    A_tab[A_n++].n = sz;
    G.allocated += sz;
    return p;
}

static void cu_free(void *p)
{
    if (!p)
        return;
    CK(cudaStreamSynchronize(G.stream));
    for (size_t i = 0; i < A_n; i++)
        if (A_tab[i].p == p) {
            G.allocated -= A_tab[i].n;
            A_tab[i] = A_tab[--A_n];
            break;
        }
    CK(cudaFree(p));
}

static void cu_zero(float *x, size_t n)
{
    CK(cudaMemsetAsync(x, 0, n * sizeof(float), G.stream));
}
static void cu_copy(float *dst, const float *src, size_t n)
{
    CK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDefault, G.stream));
}
static void cu_upload(void *dst, const void *src, size_t bytes)
{
    need_init();
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, G.stream));
    CK(cudaStreamSynchronize(G.stream));
}
static void cu_download(void *dst, const void *src, size_t bytes)
{
    need_init();
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, G.stream));
    CK(cudaStreamSynchronize(G.stream));
}
static void cu_sync(void)
{
    if (G.ready)
        CK(cudaStreamSynchronize(G.stream));
}

static void cu_device_trace(int on)
{
#ifdef SWIFT_HAVE_CUPTI
    if (on) {
        swift_cupti_start();
    } else {
        cu_sync();
        swift_cupti_stop();
    }
#else
    (void)on; /* built without CUPTI headers: host spans only */
#endif
}

/* small read-only arrays that may live in host memory (int32 tokens/positions/targets, RoPE's
 * inv_freq): a device copy per distinct (pointer, length, content) */
enum { ICACHE = 8 };
static struct icache {
    const void *host;
    size_t n;
    uint64_t hash;
    void *dev;
    size_t cap;
    unsigned long used;
} IC[ICACHE];
static unsigned long ic_clock;

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *x = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, x + i, 8);
        h = (h ^ w) * 1099511628211ULL;
    }
    for (; i < n; i++)
        h = (h ^ x[i]) * 1099511628211ULL;
    return h;
}

static const void *dev_ro(const void *p, size_t bytes)
{
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        at.type = cudaMemoryTypeUnregistered;
    }
    if (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged)
        return p;
    uint64_t h = hash_bytes(p, bytes);
    int lru = 0;
    for (int i = 0; i < ICACHE; i++) {
        if (IC[i].host == p && IC[i].n == bytes && IC[i].hash == h) {
            IC[i].used = ++ic_clock;
            return IC[i].dev;
        }
        if (IC[i].used < IC[lru].used)
            lru = i;
    }
    struct icache *c = &IC[lru];
    if (c->cap < bytes) {
        if (c->dev) {
            CK(cudaStreamSynchronize(G.stream));
            CK(cudaFree(c->dev));
        }
        CK(cudaMalloc(&c->dev, bytes ? bytes : 1));
        c->cap = bytes;
    }
    /* the slot may still be read by queued kernels of an older batch */
    CK(cudaStreamSynchronize(G.stream));
    CK(cudaMemcpy(c->dev, p, bytes, cudaMemcpyHostToDevice));
    c->host = p;
    c->n = bytes;
    c->hash = h;
    c->used = ++ic_clock;
    return c->dev;
}
static const int32_t *dev_i32(const int32_t *p, size_t n)
{
    return (const int32_t *)dev_ro(p, n * sizeof(int32_t));
}

/* ---------------- matmuls (cuBLASLt) ---------------- */

/* column-major C (m,n) = alpha op(A) op(B) + beta C */
struct lt_key {
    int ta, tb, m, n, k, lda, ldb, ldc, math, align;
};
struct lt_plan {
    struct lt_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    int has_algo;
};
enum { LT_PLANS = 256 };
static struct lt_plan PLANS[LT_PLANS];
static int nplans;

static int ptr_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 4 && (a % (uintptr_t)al))
        al /= 2;
    return al;
}

static struct lt_plan *lt_plan_get(const struct lt_key *k)
{
    for (int i = 0; i < nplans; i++)
        if (!memcmp(&PLANS[i].key, k, sizeof(*k)))
            return &PLANS[i];
    struct lt_plan *p = nplans < LT_PLANS ? &PLANS[nplans++] : &PLANS[LT_PLANS - 1];
    if (p->op) { /* table full: recycle the last slot */
        CKB(cublasLtMatmulDescDestroy(p->op));
        CKB(cublasLtMatrixLayoutDestroy(p->a));
        CKB(cublasLtMatrixLayoutDestroy(p->b));
        CKB(cublasLtMatrixLayoutDestroy(p->c));
    }
    memset(p, 0, sizeof(*p));
    p->key = *k;
    cublasComputeType_t ct = k->math == SWIFT_CUDA_MATH_FP32   ? CUBLAS_COMPUTE_32F
                             : k->math == SWIFT_CUDA_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                               : CUBLAS_COMPUTE_32F_FAST_16BF;
    CKB(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    cublasOperation_t ta = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                      tb = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CKB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CKB(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CKB(cublasLtMatrixLayoutCreate(
        &p->a, CUDA_R_32F, k->ta ? k->k : k->m, k->ta ? k->m : k->k, k->lda));
    CKB(cublasLtMatrixLayoutCreate(
        &p->b, CUDA_R_32F, k->tb ? k->n : k->k, k->tb ? k->k : k->n, k->ldb));
    CKB(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, k->m, k->n, k->ldc));
    cublasLtMatmulPreference_t pref;
    CKB(cublasLtMatmulPreferenceCreate(&pref));
    CKB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &G.lt_ws_size, sizeof(G.lt_ws_size)));
    uint32_t al = (uint32_t)k->align;
    CKB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof(al)));
    CKB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof(al)));
    CKB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof(al)));
    CKB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof(al)));
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    CKB(cublasLtMatmulAlgoGetHeuristic(G.lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &got));
    CKB(cublasLtMatmulPreferenceDestroy(pref));
    if (got > 0) {
        p->algo = res.algo;
        p->has_algo = 1;
    }
    return p;
}

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { /* C = beta C */
        const float zero = 0.0f;
        if (beta == 0.0f)
            CK(cudaMemset2DAsync(
                C, (size_t)ldc * sizeof(float), 0, (size_t)m * sizeof(float), n, G.stream));
        else
            CKB(cublasSgeam(G.blas,
                            CUBLAS_OP_N,
                            CUBLAS_OP_N,
                            m,
                            n,
                            &beta,
                            C,
                            ldc,
                            &zero,
                            C,
                            ldc,
                            C,
                            ldc)); /* never hit by the model; kept exact */
        return;
    }
    int al = ptr_align(A);
    if (ptr_align(B) < al)
        al = ptr_align(B);
    if (ptr_align(C) < al)
        al = ptr_align(C);
    struct lt_key key = {ta, tb, m, n, k, lda, ldb, ldc, G.math, al};
    struct lt_plan *p = lt_plan_get(&key);
    if (!p->has_algo) {
        /* no cuBLASLt algorithm for this shape/alignment: plain cuBLAS */
        cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        CKB(cublasSgemm(G.blas, oa, ob, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc));
        return;
    }
    CKB(cublasLtMatmul(G.lt,
                       p->op,
                       &alpha,
                       A,
                       p->a,
                       B,
                       p->b,
                       &beta,
                       C,
                       p->c,
                       C,
                       p->c,
                       &p->algo,
                       G.lt_ws,
                       G.lt_ws_size,
                       G.stream));
}

__global__ void k_add_bias(float *out, const float *bias, int N, int O, float alpha)
{
    size_t n = (size_t)N * O;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] += alpha * bias[i % O];
}

/* a device vector of ones (grown on demand) for bias gradients as a GEMV */
static float *ones_vec(int n)
{
    static float *ones;
    static int cap;
    if (cap < n) {
        if (ones) {
            CK(cudaStreamSynchronize(G.stream));
            CK(cudaFree(ones));
        }
        CK(cudaMalloc(&ones, (size_t)n * sizeof(float)));
        float *h = (float *)malloc((size_t)n * sizeof(float));
        if (!h) {
            fprintf(stderr, "%s:%d: out of memory\n", __FILE__, __LINE__);
            abort();
        }
        for (int i = 0; i < n; i++)
            h[i] = 1.0f;
        CK(cudaMemcpy(ones, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
        free(h);
        cap = n;
    }
    return ones;
}

static void cu_matmul_fwd(float *out, const float *in, const float *w, const float *bias, int N,
                          int In, int O, float alpha, float beta)
{
    SHAPE(N >= 0 && In >= 0 && O >= 0 && out && in && w);
    need_init();
    /* row-major out (N,O) = in (N,I) w^T  <=>  column-major out^T (O,N) = w^T' ... */
    gemm(1, 0, O, N, In, alpha, w, In, in, In, beta, out, O);
    if (bias) {
        k_add_bias<<<blocks_for((size_t)N * O, 256), 256, 0, G.stream>>>(out, bias, N, O, alpha);
        CKK();
    }
}

static void cu_matmul_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                          const float *w, int N, int In, int O, float alpha, float din_beta)
{
    SHAPE(N >= 0 && In >= 0 && O >= 0 && dout);
    need_init();
    if (din) /* din^T (I,N) = w^T (I,O) dout^T (O,N) */
        gemm(0, 0, In, N, O, alpha, w, In, dout, O, din_beta, din, In);
    if (dw) /* dw^T (I,O) += in^T (I,N) dout (N,O) */
        gemm(0, 1, In, O, N, alpha, in, In, dout, O, 1.0f, dw, In);
    if (db && N > 0) { /* db (O) += alpha * dout^T (O,N) . ones (N), deterministic GEMV */
        const float one = 1.0f;
        CKB(cublasSgemv(G.blas, CUBLAS_OP_N, O, N, &alpha, dout, O, ones_vec(N), 1, &one, db, 1));
    }
}

/* ---------------- embedding ---------------- */

__global__ void k_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = emb[(size_t)tok[i / C] * C + i % C];
}

__global__ void k_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(&demb[(size_t)tok[i / C] * C + i % C], dout[i]);
}

static void cu_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    const int32_t *t = dev_i32(tok, (size_t)N);
    k_embed_fwd<<<blocks_for((size_t)N * C, 256), 256, 0, G.stream>>>(out, t, emb, N, C);
    CKK();
}

static void cu_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    const int32_t *t = dev_i32(tok, (size_t)N);
    k_embed_bwd<<<blocks_for((size_t)N * C, 256), 256, 0, G.stream>>>(demb, dout, t, N, C);
    CKK();
}

/* ---------------- block reductions ---------------- */

template <typename T> __device__ T block_sum(T v)
{
    __shared__ T sh[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nw ? sh[threadIdx.x] : (T)0;
    if (wid == 0)
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0)
        sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ float block_max(float v)
{
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nw ? sh[threadIdx.x] : -INFINITY;
    if (wid == 0)
        for (int o = 16; o > 0; o >>= 1)
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0)
        sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

/* ---------------- RMSNorm ---------------- */

__global__ void k_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int C,
                              float eps)
{
    const float *x = in + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        ss += x[c] * x[c];
    ss = block_sum(ss);
    float r = rsqrtf(ss / (float)C + eps);
    if (threadIdx.x == 0)
        rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = w[c] * (x[c] * r);
}

__global__ void k_rmsnorm_bwd_dx(float *din, const float *dout, const float *in, const float *w,
                                 const float *rstd, int C)
{
    size_t off = (size_t)blockIdx.x * C;
    const float *x = in + off, *dy = dout + off;
    float *dx = din + off;
    float r = rstd[blockIdx.x], dot = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dot += w[c] * dy[c] * x[c];
    dot = block_sum(dot);
    float k = dot * r * r * r / (float)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dx[c] += r * w[c] * dy[c] - x[c] * k;
}

/* dw[c] += sum_n dy x r: a block of 32 columns x 32 row-slices, fixed order (deterministic) */
__global__ void k_rmsnorm_bwd_dw(float *dw, const float *dout, const float *in, const float *rstd,
                                 int N, int C)
{
    __shared__ float sh[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += 32)
            s += dout[(size_t)n * C + c] * in[(size_t)n * C + c] * rstd[n];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0;
        for (int i = 0; i < 32; i++)
            t += sh[i][threadIdx.x];
        dw[c] += t;
    }
}

static unsigned row_threads(int C)
{
    unsigned t = 32;
    while (t < 1024 && t < (unsigned)C)
        t *= 2;
    return t > 512 ? 512 : t;
}

static void cu_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int N, int C,
                           float eps)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_rmsnorm_fwd<<<N, row_threads(C), 0, G.stream>>>(out, rstd, in, w, C, eps);
    CKK();
}

static void cu_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in,
                           const float *w, const float *rstd, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_rmsnorm_bwd_dx<<<N, row_threads(C), 0, G.stream>>>(din, dout, in, w, rstd, C);
    CKK();
    if (dw) {
        k_rmsnorm_bwd_dw<<<(C + 31) / 32, dim3(32, 32), 0, G.stream>>>(dw, dout, in, rstd, N, C);
        CKK();
    }
}

/* ---------------- RoPE ---------------- */

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
static void cu_rope_fwd(float *x, const int32_t *pos, const float *f, int N, int H, int D)
{
    rope(x, pos, f, N, H, D, 1.0f);
}
static void cu_rope_bwd(float *x, const int32_t *pos, const float *f, int N, int H, int D)
{
    rope(x, pos, f, N, H, D, -1.0f);
}

/* ---------------- attention ---------------- */

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

static void cu_attention_fwd(float *out, float *probs, const float *q, const float *k,
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

static void cu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                             const float *q, const float *k, const float *v, const int32_t *pos,
                             int B, int T, int NH, int NKV, int D)
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

/* ---------------- elementwise ---------------- */

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void k_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = gate[i], s = 1.0f / (1.0f + expf(-g)), d = dout[i], u = up[i];
        dup[i] = d * g * s;
        dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

__global__ void k_add(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void k_scale(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

__device__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

__global__ void k_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float keep,
                              uint64_t thresh, uint64_t seed)
{
    GRID_STRIDE(i, n)
    {
        uint8_t m = splitmix64(seed ^ splitmix64(i)) >= thresh;
        mask[i] = m;
        out[i] = m ? in[i] * keep : 0.0f;
    }
}

__global__ void k_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n,
                              float keep)
{
    GRID_STRIDE(i, n) if (mask[i]) din[i] += dout[i] * keep;
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, float step, float sbc2, float gscale)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i] * gscale, pi = p[i] * (1.0f - lr * wd);
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (sqrtf(vi) / sbc2 + eps);
    }
}

static void cu_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
    need_init();
    k_swiglu_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, gate, up, n);
    CKK();
}
static void cu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, size_t n)
{
    need_init();
    k_swiglu_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(dgate, dup, dout, gate, up, n);
    CKK();
}
static void cu_add(float *out, const float *a, const float *b, size_t n)
{
    need_init();
    k_add<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, a, b, n);
    CKK();
}
static void cu_scale(float *x, float s, size_t n)
{
    need_init();
    k_scale<<<blocks_for(n, 256), 256, 0, G.stream>>>(x, s, n);
    CKK();
}
static void cu_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float p,
                           uint64_t seed)
{
    SHAPE(p >= 0.0f && p < 1.0f);
    need_init();
    float keep = 1.0f / (1.0f - p);
    uint64_t thresh = (uint64_t)((double)p * 18446744073709551616.0);
    k_dropout_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, mask, in, n, keep, thresh, seed);
    CKK();
}
static void cu_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n, float p)
{
    SHAPE(p >= 0.0f && p < 1.0f);
    need_init();
    k_dropout_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(din, dout, mask, n, 1.0f / (1.0f - p));
    CKK();
}
static void cu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float bc1, float bc2, float gscale)
{
    need_init();
    k_adamw<<<blocks_for(n, 256), 256, 0, G.stream>>>(
        p, g, m, v, n, lr, b1, b2, eps, wd, lr / bc1, sqrtf(bc2), gscale);
    CKK();
}

/* ---------------- reductions ---------------- */

/* fixed grid, fixed order: the same sum on every run */
__global__ void k_sumsq_part(double *part, const float *x, size_t n)
{
    double s = 0;
    GRID_STRIDE(i, n) s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

__global__ void k_sum_parts(double *out, const double *part, int np)
{
    double s = 0;
    for (int i = threadIdx.x; i < np; i += blockDim.x)
        s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = s;
}

static double cu_sumsq(const float *x, size_t n)
{
    need_init();
    if (n == 0)
        return 0;
    unsigned nb = blocks_for(n, 256);
    if (nb > RED_BLOCKS)
        nb = RED_BLOCKS;
    k_sumsq_part<<<nb, 256, 0, G.stream>>>(G.red, x, n);
    CKK();
    k_sum_parts<<<1, 256, 0, G.stream>>>(G.red + RED_BLOCKS, G.red, (int)nb);
    CKK();
    double r = 0;
    CK(cudaMemcpyAsync(&r, G.red + RED_BLOCKS, sizeof(r), cudaMemcpyDeviceToHost, G.stream));
    CK(cudaStreamSynchronize(G.stream));
    return r;
}

/* one block per row: loss (double), trained flag, argmax hit; dlogits in place when asked */
__global__ void k_cross_entropy(float *dlogits, double *row_loss, int *row_flags,
                                const float *logits, const int32_t *targets, int V, float dscale)
{
    int n = blockIdx.x;
    const float *x = logits + (size_t)n * V;
    float *dx = dlogits ? dlogits + (size_t)n * V : NULL;
    int t = targets[n];
    if (t < 0) {
        if (dx)
            for (int c = threadIdx.x; c < V; c += blockDim.x)
                dx[c] = 0;
        if (threadIdx.x == 0) {
            row_loss[n] = 0;
            row_flags[n] = 0;
        }
        return;
    }
    /* max and its first index (ties: lowest index, as the CPU loop) */
    float mx = -INFINITY;
    int arg = V;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
        if (x[c] > mx) {
            mx = x[c];
            arg = c;
        }
    __shared__ float smx[1024];
    __shared__ int sarg[1024];
    smx[threadIdx.x] = mx;
    sarg[threadIdx.x] = arg;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float om = smx[threadIdx.x + s];
            int oa = sarg[threadIdx.x + s];
            if (om > smx[threadIdx.x] || (om == smx[threadIdx.x] && oa < sarg[threadIdx.x])) {
                smx[threadIdx.x] = om;
                sarg[threadIdx.x] = oa;
            }
        }
        __syncthreads();
    }
    mx = smx[0];
    arg = sarg[0];
    __syncthreads();
    double sum = 0;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
        sum += exp((double)x[c] - mx);
    sum = block_sum(sum);
    double lse = mx + log(sum);
    float xt = x[t];
    __syncthreads(); /* every thread has read x[t] before dx (which may alias x) is written */
    if (dx) {
        for (int c = threadIdx.x; c < V; c += blockDim.x) {
            float g = (float)exp((double)x[c] - lse) * dscale;
            dx[c] = c == t ? g - dscale : g;
        }
    }
    if (threadIdx.x == 0) {
        row_loss[n] = lse - xt;
        row_flags[n] = 1 | (arg == t ? 2 : 0);
    }
}

__global__ void k_ce_reduce(double *out, const double *row_loss, const int *flags, int N)
{
    double s = 0, cnt = 0, ok = 0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        s += row_loss[i];
        cnt += flags[i] & 1;
        ok += (flags[i] >> 1) & 1;
    }
    s = block_sum(s);
    cnt = block_sum(cnt);
    ok = block_sum(ok);
    if (threadIdx.x == 0) {
        out[0] = s;
        out[1] = cnt;
        out[2] = ok;
    }
}

static struct {
    double *loss, *out;
    int *flags;
    int cap;
} CE;

static void cu_cross_entropy(float *dlogits, double *loss_sum, long *count, long *correct,
                             const float *logits, const int32_t *targets, int N, int V,
                             float dscale)
{
    SHAPE(N >= 0 && V > 0);
    need_init();
    if (N == 0)
        return;
    const int32_t *t = dev_i32(targets, (size_t)N);
    if (CE.cap < N) {
        if (CE.loss) {
            CK(cudaStreamSynchronize(G.stream));
            CK(cudaFree(CE.loss));
            CK(cudaFree(CE.flags));
        }
        if (!CE.out)
            CK(cudaMalloc(&CE.out, 3 * sizeof(double)));
        CK(cudaMalloc(&CE.loss, (size_t)N * sizeof(double)));
        CK(cudaMalloc(&CE.flags, (size_t)N * sizeof(int)));
        CE.cap = N;
    }
    k_cross_entropy<<<N, 1024, 0, G.stream>>>(dlogits, CE.loss, CE.flags, logits, t, V, dscale);
    CKK();
    k_ce_reduce<<<1, 1024, 0, G.stream>>>(CE.out, CE.loss, CE.flags, N);
    CKK();
    double r[3];
    CK(cudaMemcpyAsync(r, CE.out, sizeof(r), cudaMemcpyDeviceToHost, G.stream));
    CK(cudaStreamSynchronize(G.stream));
    *loss_sum += r[0];
    *count += (long)r[1];
    *correct += (long)r[2];
}

/* ---------------- key/value cache (inference, lib/eval/kv.c) ---------------- */

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

static void cu_copy_rows(float *dst, const int32_t *dst_idx, const float *src,
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

static void cu_attention_cached(float *out, const float *q, const float *kcache,
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

// clang-format off
extern "C" const struct swift_ops swift_cuda_ops = {
    "cuda",         cu_alloc,         cu_free,          cu_zero,          cu_copy,
    cu_upload,      cu_download,      cu_sync,          cu_device_trace,  cu_matmul_fwd,
    cu_matmul_bwd,  cu_embed_fwd,     cu_embed_bwd,     cu_rmsnorm_fwd,   cu_rmsnorm_bwd,
    cu_rope_fwd,    cu_rope_bwd,      cu_attention_fwd, cu_attention_bwd, cu_swiglu_fwd,
    cu_swiglu_bwd,  cu_cross_entropy, cu_add,           cu_scale,         cu_sumsq,
    cu_dropout_fwd, cu_dropout_bwd,   cu_adamw,
    cu_copy_rows,   cu_attention_cached, /* key/value cache (lib/eval/kv.c) */
};
// clang-format on
