// ops.cu — the CUDA backend's op table (struct swift_ops, kernels/ops.h). The CPU table
// (kernels/cpu) is the specification: same shapes, same layouts, same accumulate/write rules;
// tests/kernels/ checks every op against it. This file holds the state, the initialisation,
// memory, the index-array cache and the table; the ops live by family as in kernels/cpu/
// (kernels/cuda/internal.h lists the files).
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
#include "kernels/cuda/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/cuda/cupti.h"
}

struct swift_cuda_state swift_cuda;

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

void swift_cuda_need_init(void)
{
    if (!G.ready && swift_cuda_init(0) < 0)
        abort();
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

const void *swift_cuda_dev_ro(const void *p, size_t bytes)
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

/* --torch-dtype bfloat16: the CUDA twin of the CPU's bf16 matmuls (SWIFT_CUDA_MATH_BF16) */
static int cu_set_matmul_math(int mode)
{
    swift_cuda_set_math(mode == SWIFT_MATH_BF16 ? SWIFT_CUDA_MATH_BF16 : SWIFT_CUDA_MATH_FP32);
    return 0;
}

/* in struct swift_ops' order (kernels/ops.h): C++17 has no designated initializers */
extern "C" const struct swift_ops swift_cuda_ops = {
    "cuda",
    cu_alloc,
    cu_free,
    cu_zero,
    cu_copy,
    cu_upload,
    cu_download,
    cu_sync,
    cu_device_trace,
    swift_cuda_matmul_fwd,
    swift_cuda_matmul_bwd,
    swift_cuda_embed_fwd,
    swift_cuda_embed_bwd,
    swift_cuda_rmsnorm_fwd,
    swift_cuda_rmsnorm_bwd,
    swift_cuda_rope_fwd,
    swift_cuda_rope_bwd,
    swift_cuda_attention_fwd,
    swift_cuda_attention_bwd,
    swift_cuda_swiglu_fwd,
    swift_cuda_swiglu_bwd,
    swift_cuda_cross_entropy,
    swift_cuda_add,
    swift_cuda_scale,
    swift_cuda_sumsq,
    swift_cuda_dropout_fwd,
    swift_cuda_dropout_bwd,
    swift_cuda_adamw,
    swift_cuda_copy_rows, /* key/value cache (lib/eval/kv.c) */
    swift_cuda_attention_cached,
    swift_cuda_mul_cols,  /* DoRA */
    swift_cuda_adamw8bit, /* --optim adamw_8bit (lib/train/optim.c) */
    /* QLoRA's 4-bit base (kernels/cuda/quant4.cu) */
    swift_cuda_matmul4_fwd,
    swift_cuda_matmul4_bwd,
    swift_cuda_matmul8_fwd, /* --quant-bits 8 (compile-checked; not yet run on a GPU) */
    swift_cuda_matmul8_bwd,
    swift_cuda_attention_paged, /* swift-infer's paged cache (lib/model/pkv.c) */
    cu_set_matmul_math,         /* mixed precision (--torch-dtype) */
    /* the vision tower (kernels/cuda/vision.cu; compile-checked, not yet run on a GPU) */
    swift_cuda_layernorm_fwd,
    swift_cuda_layernorm_bwd,
    swift_cuda_gelu_fwd,
    swift_cuda_gelu_bwd,
    swift_cuda_attention_seg_fwd,
    swift_cuda_attention_seg_bwd,
};
