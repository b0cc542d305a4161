/* Mixed precision linear layers: bf16 GEMMs with fp32 accumulation through oneDNN, selected by
 * swift_cpu_set_matmul_math (the op table's set_matmul_math). OpenBLAS is not used for this:
 * Debian 12's OpenBLAS 0.3.21 exports no sbgemm, so the bf16 GEMM comes from oneDNN
 * (libdnnl, Debian's 2.6), whose matmul has avx512_core_bf16 and AMX kernels. Inputs (the
 * activations, the weights, the output gradients) are rounded to bf16 to nearest-even, as
 * torch.autocast(cpu, bfloat16) casts them; products accumulate in fp32 and the outputs are
 * fp32, so everything around the GEMMs (bias, norms, softmax, the loss, the optimizer) stays
 * fp32. Primitives are created once per shape and kept (a small cache). */
#include "kernels/cpu/cpu.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/banned.h"

static int g_math; /* 0 fp32 (OpenBLAS), 1 bf16 (oneDNN) */

/* C (M,N) = alpha * A (M,K) @ B (K,N) + beta * C; A and B given by strides (transposed views) */
enum { KIND_FWD = SWIFT_CPU_BF16_FWD, KIND_DIN = SWIFT_CPU_BF16_DIN, KIND_DW = SWIFT_CPU_BF16_DW };

struct prim {
    int kind, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    struct swift_cpu_bf16_batch bt; /* n[0] == 0: one 2-D GEMM */
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c;
};

#define CACHE_MAX 64
static struct {
    int ready, ok, nprim, warned;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    struct prim prim[CACHE_MAX];
    char impl[128];
    uint16_t *buf[3];
    size_t cap[3];
} g;

static void bf16_init(void)
{
    if (g.ready)
        return;
    g.ready = 1;
    g.ok = dnnl_engine_create(&g.eng, dnnl_cpu, 0) == dnnl_success &&
           dnnl_stream_create(&g.st, g.eng, dnnl_stream_default_flags) == dnnl_success;
}

/* round to nearest even, quiet NaNs kept NaN (torch's c10::BFloat16 conversion) */
static inline uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* the same rounding 16 at a time (integer arithmetic: bit-identical to f2bf, denormals kept,
 * unlike vcvtneps2bf16 which flushes them) */
__attribute__((target("avx512f"))) static void to_bf16_avx512(uint16_t *dst, const float *src,
                                                              size_t n)
{
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff),
                  abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                  quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512(src + i), hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one)));
        r = _mm512_srli_epi32(r, 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++)
        dst[i] = f2bf(src[i]);
}

void swift_cpu_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    static int avx512 = -1;
    if (avx512 < 0)
        avx512 = __builtin_cpu_supports("avx512f");
    if (!avx512) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++)
            dst[i] = f2bf(src[i]);
        return;
    }
    size_t chunk = 16384;
    long nc = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (nc > 4)
    for (long c = 0; c < nc; c++) {
        size_t a = (size_t)c * chunk, len = n - a < chunk ? n - a : chunk;
        to_bf16_avx512(dst + a, src + a, len);
    }
}

void swift_cpu_to_bf16_row(uint16_t *dst, const float *src, size_t n)
{
    static int avx512 = -1;
    if (avx512 < 0)
        avx512 = __builtin_cpu_supports("avx512f");
    if (avx512) {
        to_bf16_avx512(dst, src, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = f2bf(src[i]);
}

/* scratch buffer slot s of at least n bf16 values (NULL when out of memory) */
static uint16_t *scratch(int s, size_t n)
{
    if (g.cap[s] < n) {
        free(g.buf[s]);
        g.buf[s] = NULL;
        g.cap[s] = 0;
        void *p = NULL;
        if (posix_memalign(&p, 64, n * 2 + 64))
            return NULL;
        g.buf[s] = p;
        g.cap[s] = n;
    }
    return g.buf[s];
}

/* a (rows, cols) matrix with the given strides, behind q's batch dimensions when it has them
 * (batch strides bs; a zero stride is a broadcast dimension of size 1) */
static int md2(const struct prim *q, const long *bs, dnnl_memory_desc_t *md, dnnl_data_type_t t,
               int rows, int cols, int rs, int cs)
{
    if (!q->bt.n[0]) {
        dnnl_dims_t d = {rows, cols}, s = {rs, cs};
        return dnnl_memory_desc_init_by_strides(md, 2, d, t, s) == dnnl_success ? 0 : -1;
    }
    dnnl_dims_t d = {0, 0, 0, rows, cols}, s = {0, 0, 0, rs, cs};
    for (int i = 0; i < 3; i++) {
        d[i] = bs[i] ? q->bt.n[i] : 1;
        s[i] = bs[i] ? bs[i] : (dnnl_dim_t)rows * cols; /* any: the dimension is 1 */
    }
    return dnnl_memory_desc_init_by_strides(md, 5, d, t, s) == dnnl_success ? 0 : -1;
}

/* the memory descriptors of one kind: A, B (bf16) and C (fp32), rows lda, ldb, ldc apart */
static int descs(const struct prim *q, dnnl_memory_desc_t md[3])
{
    int r = 0, M = q->M, N = q->N, K = q->K;
    const long *sa = q->bt.sa, *sb = q->bt.sb;
    switch (q->kind) {
    case KIND_FWD: /* out (M=N,O) = in (N,I) @ w (O,I)^T: B is w read transposed */
        r |= md2(q, sa, &md[0], dnnl_bf16, M, K, q->lda, 1) |
             md2(q, sb, &md[1], dnnl_bf16, K, N, 1, q->ldb);
        break;
    case KIND_DIN: /* din (N,I) = dout (N,O) @ w (O,I) */
        r |= md2(q, sa, &md[0], dnnl_bf16, M, K, q->lda, 1) |
             md2(q, sb, &md[1], dnnl_bf16, K, N, q->ldb, 1);
        break;
    default: /* dw (O,I) = dout (N,O)^T @ in (N,I): A is dout (N=K,O=M) read transposed */
        r |= md2(q, sa, &md[0], dnnl_bf16, M, K, 1, q->lda) |
             md2(q, sb, &md[1], dnnl_bf16, K, N, q->ldb, 1);
        break;
    }
    return r | md2(q, q->bt.sc, &md[2], dnnl_f32, M, N, q->ldc, 1);
}

static struct prim *create(const struct prim *q)
{
    int kind = q->kind, M = q->M;
    float alpha = q->alpha, beta = q->beta;
    dnnl_memory_desc_t md[3];
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    struct prim *p = NULL;
    if (descs(q, md) || dnnl_matmul_desc_init(&mm, &md[0], &md[1], NULL, &md[2]) ||
        dnnl_primitive_attr_create(&attr))
        return NULL;
    int bad = 0;
    if (alpha != 1.0f)
        bad |= dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) != dnnl_success;
    if (beta != 0.0f) {
        bad |= dnnl_post_ops_create(&po) != dnnl_success;
        bad |= bad || dnnl_post_ops_append_sum(po, beta) != dnnl_success ||
               dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success;
    }
    if (!bad && dnnl_primitive_desc_create(&pd, &mm, attr, g.eng, NULL) == dnnl_success) {
        const char *impl = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        /* dense 2-D operands (the linear layers) name the implementation; oneDNN takes its
         * avx512_core_bf16 'gemm:jit' for the strided, batched blocks of attention_bf16 (as
         * fast there), which the dense GEMMs' check already vouches for on this CPU */
        int dense = !q->bt.n[0] && q->lda == (kind == KIND_DW ? M : q->K) &&
                    q->ldb == (kind == KIND_FWD ? q->K : q->N) && q->ldc == q->N;
        if (dense && (!g.impl[0] || kind == KIND_FWD))
            snprintf(g.impl, sizeof g.impl, "%s", impl);
        int fast = swift_cpu_bf16_fast_name(impl) || (!dense && !strncmp(impl, "gemm:jit", 8));
        if (!fast && !g.warned) {
            g.warned = 1;
            fprintf(stderr,
                    "warning: bf16 matmul: oneDNN picked '%s', not an avx512_core_bf16/amx "
                    "kernel: bf16 runs on a slow fallback on this CPU\n",
                    impl);
        }
        p = g.nprim < CACHE_MAX ? &g.prim[g.nprim] : &g.prim[(size_t)M % CACHE_MAX];
        if (g.nprim >= CACHE_MAX) { /* full: replace one (rare: a handful of shapes per model) */
            dnnl_primitive_destroy(p->p);
            for (int i = 0; i < 3; i++)
                dnnl_memory_destroy((&p->a)[i]);
        } else
            g.nprim++;
        *p = *q;
        p->p = NULL;
        p->a = p->b = p->c = NULL;
        if (dnnl_primitive_create(&p->p, pd) ||
            dnnl_memory_create(&p->a, &md[0], g.eng, DNNL_MEMORY_NONE) ||
            dnnl_memory_create(&p->b, &md[1], g.eng, DNNL_MEMORY_NONE) ||
            dnnl_memory_create(&p->c, &md[2], g.eng, DNNL_MEMORY_NONE))
            p = NULL;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return p;
}

/* field by field: the struct's padding is not part of the key */
static int same_batch(const struct swift_cpu_bf16_batch *x, const struct swift_cpu_bf16_batch *y)
{
    for (int i = 0; i < 3; i++)
        if (x->n[i] != y->n[i] || x->sa[i] != y->sa[i] || x->sb[i] != y->sb[i] ||
            x->sc[i] != y->sc[i])
            return 0;
    return 1;
}

static struct prim *lookup(const struct prim *q)
{
    for (int i = 0; i < g.nprim; i++) {
        struct prim *p = &g.prim[i];
        if (p->kind == q->kind && p->M == q->M && p->N == q->N && p->K == q->K &&
            p->lda == q->lda && p->ldb == q->ldb && p->ldc == q->ldc && p->alpha == q->alpha &&
            p->beta == q->beta && same_batch(&p->bt, &q->bt))
            return p;
    }
    return create(q);
}

/* one GEMM with rows of A, B, C lda, ldb, ldc apart (as stored: DW's A is (K,M), FWD's B is
 * (N,K)); returns 0, or -1 when oneDNN cannot (the caller falls back to fp32) */
static int gemm_ld(int kind, const struct swift_cpu_bf16_batch *bt, int M, int N, int K,
                   float alpha, float beta, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                   float *c, int ldc)
{
    bf16_init();
    struct prim q = {.kind = kind,
                     .M = M,
                     .N = N,
                     .K = K,
                     .lda = lda,
                     .ldb = ldb,
                     .ldc = ldc,
                     .alpha = alpha,
                     .beta = beta};
    if (bt)
        q.bt = *bt;
    struct prim *p = g.ok ? lookup(&q) : NULL;
    if (!p)
        return -1;
    dnnl_memory_set_data_handle(p->a, (void *)a);
    dnnl_memory_set_data_handle(p->b, (void *)b);
    dnnl_memory_set_data_handle(p->c, c);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
    if (dnnl_primitive_execute(p->p, g.st, 3, args) != dnnl_success)
        return -1;
    return dnnl_stream_wait(g.st) == dnnl_success ? 0 : -1;
}

/* the same on dense operands */
static int gemm(int kind, int M, int N, int K, float alpha, float beta, const uint16_t *a,
                const uint16_t *b, float *c)
{
    return gemm_ld(kind,
                   NULL,
                   M,
                   N,
                   K,
                   alpha,
                   beta,
                   a,
                   kind == KIND_DW ? M : K,
                   b,
                   kind == KIND_DIN || kind == KIND_DW ? N : K,
                   c,
                   N);
}

int swift_cpu_bf16_gemm(int kind, int M, int N, int K, float alpha, float beta, const uint16_t *a,
                        int lda, const uint16_t *b, int ldb, float *c, int ldc)
{
    if (kind < SWIFT_CPU_BF16_FWD || kind > SWIFT_CPU_BF16_DW)
        return -1;
    return gemm_ld(kind, NULL, M, N, K, alpha, beta, a, lda, b, ldb, c, ldc);
}

int swift_cpu_bf16_gemm_batch(int kind, const struct swift_cpu_bf16_batch *bt, int M, int N, int K,
                              float alpha, float beta, const uint16_t *a, int lda,
                              const uint16_t *b, int ldb, float *c, int ldc)
{
    if (kind < SWIFT_CPU_BF16_FWD || kind > SWIFT_CPU_BF16_DW || bt->n[0] < 1 || bt->n[1] < 1 ||
        bt->n[2] < 1 || !bt->sa[0] || !bt->sc[0])
        return -1;
    return gemm_ld(kind, bt, M, N, K, alpha, beta, a, lda, b, ldb, c, ldc);
}

int swift_cpu_bf16_fast_name(const char *impl)
{
    return impl && (strstr(impl, "bf16") || strstr(impl, "amx")) && !strstr(impl, "ref");
}

const char *swift_cpu_bf16_impl(void)
{
    if (!g.impl[0]) { /* probe with a small forward shape */
        uint16_t *a = calloc(64 * 64 * 3, 2);
        float *c = calloc(64 * 64, 4);
        if (a && c)
            gemm(KIND_FWD, 64, 64, 64, 1.0f, 0.0f, a, a + 64 * 64, c);
        free(a);
        free(c);
    }
    return g.impl[0] ? g.impl : "unavailable";
}

int swift_cpu_set_matmul_math(int mode)
{
    if (mode != SWIFT_CPU_MATH_FP32 && mode != SWIFT_CPU_MATH_BF16)
        return -1;
    if (mode == SWIFT_CPU_MATH_BF16) {
        bf16_init();
        if (!g.ok)
            return -1;
    }
    g_math = mode;
    return 0;
}

int swift_cpu_matmul_math(void)
{
    return g_math;
}

void swift_cpu_matmul_bf16_fwd(float *out, const float *in, const float *w, const float *bias,
                               int N, int In, int O, float alpha, float beta)
{
    uint16_t *a = scratch(0, (size_t)N * In), *b = scratch(1, (size_t)O * In);
    int r = -1;
    if (a && b) {
        swift_cpu_to_bf16(a, in, (size_t)N * In);
        swift_cpu_to_bf16(b, w, (size_t)O * In);
        r = gemm(KIND_FWD, N, O, In, alpha, beta, a, b, out);
    }
    if (r) {
        swift_cpu_matmul_fp32_fwd(out, in, w, bias, N, In, O, alpha, beta);
        return;
    }
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                out[(size_t)n * O + o] += alpha * bias[o];
    }
}

void swift_cpu_matmul_bf16_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                               const float *w, int N, int In, int O, float alpha, float din_beta)
{
    uint16_t *d = scratch(0, (size_t)N * O);
    if (!d) {
        swift_cpu_matmul_fp32_bwd(din, dw, db, dout, in, w, N, In, O, alpha, din_beta);
        return;
    }
    if (din || dw) /* both GEMMs read dout in bf16 (dw through a transposed view) */
        swift_cpu_to_bf16(d, dout, (size_t)N * O);
    if (din) {
        uint16_t *b = scratch(1, (size_t)O * In);
        int r = -1;
        if (b) {
            swift_cpu_to_bf16(b, w, (size_t)O * In);
            r = gemm(KIND_DIN, N, In, O, alpha, din_beta, d, b, din);
        }
        if (r)
            swift_cpu_matmul_fp32_bwd(din, NULL, NULL, dout, in, w, N, In, O, alpha, din_beta);
    }
    if (dw) {
        uint16_t *b = scratch(1, (size_t)N * In), *t = d;
        if (b) {
            swift_cpu_to_bf16(b, in, (size_t)N * In);
        }
        if (!b || !t || gemm(KIND_DW, O, In, N, alpha, 1.0f, t, b, dw))
            swift_cpu_matmul_fp32_bwd(NULL, dw, NULL, dout, in, w, N, In, O, alpha, din_beta);
    }
    if (db)
        swift_cpu_matmul_fp32_bwd(NULL, NULL, db, dout, in, w, N, In, O, alpha, din_beta);
}
