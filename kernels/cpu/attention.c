/* Causal self-attention with grouped KV heads over packed documents. Token i of a row attends
 * to tokens i-pos[i] .. i of the same row (its own document).
 *
 * Per (row b, head h) the scores are one sgemm over the whole T x T block (the masked entries
 * are computed and then zeroed: twice the causal FLOPs, but at BLAS speed), the softmax runs
 * over each row's window, and P V is a second sgemm. Heads are strided views of the (B*T,NH,D)
 * tensors (leading dimension NH*D), so nothing is transposed or copied. The heads are the
 * OpenMP tasks (one parallel region per call; waking threads is slow on a busy machine), each
 * with single-threaded sgemms. */
#include "kernels/cpu/cpu.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/cpu/vexp.h"

#include "kernels/banned.h"

/* the window [s, e] of one row: x = exp(x - max) over it, returning their sum (in index order);
 * the scalar specification, and its AVX-512 twin with the same bits (vexp.h; a window with a
 * NaN takes the scalar loop) */
static float window_exp(float *x, int s, int e)
{
    float mx = -INFINITY, sum = 0;
    for (int j = s; j <= e; j++)
        mx = x[j] > mx ? x[j] : mx;
    for (int j = s; j <= e; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    return sum;
}

__attribute__((target("avx512f"))) static float window_exp_avx512(float *x, int s, int e)
{
    int n = e - s + 1, j;
    if (n < 16)
        return window_exp(x, s, e);
    __m512 vm = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (j = s; j + 16 <= e + 1; j += 16) {
        __m512 v = _mm512_loadu_ps(x + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        vm = _mm512_max_ps(vm, v);
    }
    float mx = _mm512_reduce_max_ps(vm);
    for (; j <= e; j++) {
        nan |= x[j] != x[j];
        mx = x[j] > mx ? x[j] : mx;
    }
    if (nan)
        return window_exp(x, s, e);
    /* the scan's maximum: -0 and +0 compare equal, and it keeps the first it met */
    for (j = s; x[j] != mx; j++)
        ;
    mx = x[j];
    __m512 m = _mm512_set1_ps(mx);
    float sum = 0;
    for (j = s; j + 16 <= e + 1; j += 16) {
        __m512 v = swift_vexpf(_mm512_sub_ps(_mm512_loadu_ps(x + j), m));
        _mm512_storeu_ps(x + j, v);
        for (int k = 0; k < 16; k++)
            sum += x[j + k];
    }
    for (; j <= e; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    return sum;
}

/* softmax of row i's window [s, i] of a T-wide score row, zero elsewhere; pbr (may be NULL) gets
 * the bf16 copy the P V GEMM reads, while the row is in cache */
static void softmax_row(float *pi, uint16_t *pbr, int s, int i, int T, int simd)
{
    float inv = 1.0f / (simd ? window_exp_avx512(pi, s, i) : window_exp(pi, s, i));
    for (int j = 0; j < s; j++)
        pi[j] = 0;
    if (simd)
        swift_vscale(pi + s, inv, (size_t)(i - s + 1));
    else
        for (int j = s; j <= i; j++)
            pi[j] *= inv;
    for (int j = i + 1; j < T; j++)
        pi[j] = 0;
    if (pbr)
        swift_cpu_to_bf16_row(pbr, pi, (size_t)T);
}

/* every row of S (B,NH,T,T) in one parallel region */
static void masked_softmax(float *p, uint16_t *pb, const int32_t *pos, int B, int T, int NH)
{
    int simd = swift_cpu_simd_avx512();
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * NH * T; r++) {
        int b = (int)(r / ((long)NH * T)), i = (int)(r % T);
        softmax_row(p + (size_t)r * T,
                    pb ? pb + (size_t)r * T : NULL,
                    i - pos[(size_t)b * T + i],
                    i,
                    T,
                    simd);
    }
}

/* The fp32 attention runs one task per head (forward) or per key/value head (backward, its
 * group's heads in order), each on one thread with single-threaded sgemms: B x NH small GEMMs
 * each split over OpenBLAS's threads meant a wake-up of its pool per GEMM. OpenBLAS's thread
 * count is 1 for the region and restored after it (OpenBLAS is called from this thread only
 * outside it). Each element's GEMM is the same kernel over the same K in the same order, and
 * the group's heads add into dK and dV in head order as before. */
static int blas_serial(void)
{
    int nt = openblas_get_num_threads();
    openblas_set_num_threads(1);
    return nt;
}

/* head h of row b: S (T,T) = scale * Qh @ Kh^T, softmax, Oh (T,D) = P @ Vh */
static void fwd_head(float *out, float *probs, const float *q, const float *k, const float *v,
                     const int32_t *pos, int b, int h, int T, int NH, int NKV, int D, int simd)
{
    float scale = 1.0f / sqrtf((float)D);
    size_t qo = ((size_t)b * T * NH + h) * D, ko = ((size_t)b * T * NKV + h / (NH / NKV)) * D;
    float *p = probs + ((size_t)b * NH + h) * T * T;
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasTrans,
                T,
                T,
                D,
                scale,
                q + qo,
                NH * D,
                k + ko,
                NKV * D,
                0.0f,
                p,
                T);
    for (int i = 0; i < T; i++)
        softmax_row(p + (size_t)i * T, NULL, i - pos[(size_t)b * T + i], i, T, simd);
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasNoTrans,
                T,
                D,
                T,
                1.0f,
                p,
                T,
                v + ko,
                NKV * D,
                0.0f,
                out + qo,
                NH * D);
}

/* q (B*T,NH,D), k v (B*T,NKV,D) -> out (B*T,NH,D), probs (B,NH,T,T) */
void swift_cpu_attention_fwd(float *out, float *probs, const float *q, const float *k,
                             const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                             int D)
{
    if (swift_cpu_matmul_math() == SWIFT_CPU_MATH_BF16 &&
        !swift_cpu_attention_bf16_fwd(out, probs, q, k, v, pos, B, T, NH, NKV, D))
        return;
    int simd = swift_cpu_simd_avx512(), nt = blas_serial();
#pragma omp parallel for schedule(dynamic)
    for (int bh = 0; bh < B * NH; bh++)
        fwd_head(out, probs, q, k, v, pos, bh / NH, bh % NH, T, NH, NKV, D, simd);
    openblas_set_num_threads(nt);
}

/* The causal softmax's backward for row i of T: dS = P * (dP - sum(P * dP)) * scale over the
 * keys j <= i, 0 above the diagonal (di holds dP in, dS out). */
static void softmax_bwd_row(const float *pi, float *di, int i, int T, float scale)
{
    float acc = 0;
    for (int j = 0; j <= i; j++)
        acc += pi[j] * di[j];
    for (int j = 0; j <= i; j++)
        di[j] = pi[j] * (di[j] - acc) * scale;
    for (int j = i + 1; j < T; j++)
        di[j] = 0;
}

/* head h of row b, ds a (T,T) scratch: dVh += P^T dOh; dP = dOh Vh^T; dS; dQh = dS Kh;
 * dKh += dS^T Qh */
static void bwd_head(float *dq, float *dk, float *dv, float *ds, const float *dout,
                     const float *probs, const float *q, const float *k, const float *v, int b,
                     int h, int T, int NH, int NKV, int D)
{
    float scale = 1.0f / sqrtf((float)D);
    size_t qo = ((size_t)b * T * NH + h) * D, ko = ((size_t)b * T * NKV + h / (NH / NKV)) * D;
    const float *p = probs + ((size_t)b * NH + h) * T * T;
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
                ds,
                T);
    for (int i = 0; i < T; i++)
        softmax_bwd_row(p + (size_t)i * T, ds + (size_t)i * T, i, T, scale);
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasNoTrans,
                T,
                D,
                T,
                1.0f,
                ds,
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
                ds,
                T,
                q + qo,
                NH * D,
                1.0f,
                dk + ko,
                NKV * D);
}

/* dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale dS K;  dK += scale dS^T Q;
 * dV += P^T dO. The heads of a group add into the same dK, dV: one task per (row, KV head). */
void swift_cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                             const float *q, const float *k, const float *v, const int32_t *pos,
                             int B, int T, int NH, int NKV, int D)
{
    if (swift_cpu_matmul_math() == SWIFT_CPU_MATH_BF16 &&
        !swift_cpu_attention_bf16_bwd(dq, dk, dv, dout, probs, q, k, v, B, T, NH, NKV, D))
        return;
    int group = NH / NKV;
    size_t tt = (size_t)T * T;
    (void)pos; /* the mask is in P: masked entries are exactly 0, so are their gradients */
    memset(dk, 0, (size_t)B * T * NKV * D * sizeof(float));
    memset(dv, 0, (size_t)B * T * NKV * D * sizeof(float));
    int nt = blas_serial(), bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        float *ds = malloc(tt * sizeof(float)); /* one head's dS per thread */
        bad |= !ds;
#pragma omp for schedule(dynamic)
        for (int bk = 0; bk < B * NKV; bk++)
            for (int g = 0; g < group && ds; g++)
                bwd_head(dq,
                         dk,
                         dv,
                         ds,
                         dout,
                         probs,
                         q,
                         k,
                         v,
                         bk / NKV,
                         bk % NKV * group + g,
                         T,
                         NH,
                         NKV,
                         D);
        free(ds);
    }
    openblas_set_num_threads(nt);
    if (bad)
        abort(); /* T x T floats per thread, next to the B x NH x T x T probabilities held */
}

/* Mixed precision (SWIFT_CPU_MATH_BF16): the same attention with the score and value GEMMs in
 * bf16 with fp32 accumulation (oneDNN, swift_cpu_bf16_gemm), as torch.autocast(cpu, bfloat16)
 * runs the attention matmuls; the softmax, its gradient and every output stay fp32. The heads
 * are packed to dense bf16 (B,heads,T,D) blocks once per call (the rounding pass that bf16 needs
 * anyway); the probabilities and dS are rounded inside the row loops that produce them. The
 * GEMMs skip most of the masked half: the rows are taken in four blocks, and block [r0, r1)
 * only meets the keys [0, r1) (10/16 of the full T x T products). Scratch is kept between calls
 * (one caller thread, as the bf16 matmuls' scratch). */
enum { S_Q, S_K, S_V, S_DO, S_P, S_DS, S_NB }; /* bf16 */
enum { F_O, F_DP, F_DQ, F_DK, F_DV, F_NF };    /* fp32 */
static struct {
    uint16_t *b[S_NB];
    size_t bcap[S_NB];
    float *f[F_NF];
    size_t fcap[F_NF];
} att_scratch;

static void *grow(void **p, size_t *cap, size_t bytes)
{
    if (*cap < bytes) {
        free(*p);
        *p = NULL;
        *cap = 0;
        if (posix_memalign(p, 64, bytes))
            return *p = NULL;
        *cap = bytes;
    }
    return *p;
}
static uint16_t *bscratch(int s, size_t n)
{
    return grow((void **)&att_scratch.b[s], &att_scratch.bcap[s], n * sizeof(uint16_t));
}
static float *fscratch(int s, size_t n)
{
    return grow((void **)&att_scratch.f[s], &att_scratch.fcap[s], n * sizeof(float));
}

/* dst (B,H,T,D) bf16 <- src (B*T,H,D) fp32 */
static void pack(uint16_t *dst, const float *src, int B, int T, int H, int D)
{
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * T; r++) {
        int b = (int)(r / T), t = (int)(r % T);
        for (int h = 0; h < H; h++)
            swift_cpu_to_bf16_row(
                dst + (((size_t)b * H + h) * T + t) * D, src + ((size_t)r * H + h) * D, (size_t)D);
    }
}

/* dst (B*T,H,D) <- src (B,H*group,T,D), both fp32, summing each head's group of src heads
 * (group 1: a copy) */
static void unpack(float *dst, const float *src, int B, int T, int H, int D, int group)
{
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * T; r++) {
        int b = (int)(r / T), t = (int)(r % T);
        for (int h = 0; h < H; h++) {
            float *o = dst + ((size_t)r * H + h) * D;
            const float *s = src + (((size_t)b * H + h) * group * T + t) * D;
            memcpy(o, s, (size_t)D * sizeof(float));
            for (int g = 1; g < group; g++)
                for (int d = 0; d < D; d++)
                    o[d] += s[(size_t)g * T * D + d];
        }
    }
}

/* rows per causal block: a quarter of T, a multiple of 16 */
static int causal_block(int T)
{
    return ((T + 3) / 4 + 15) / 16 * 16;
}

/* The batch of every (row, KV head, head of its group) for one GEMM: a and c per head
 * (per-head matrices ma, mc elements apart, as in (B,NH,...) blocks), b per KV head (mb apart
 * in (B,NKV,...) blocks; broadcast over the group) or per head when b_per_head. */
static struct swift_cpu_bf16_batch heads(int B, int NKV, int group, size_t ma, size_t mb, size_t mc,
                                         int b_per_head)
{
    long g = group;
    struct swift_cpu_bf16_batch bt = {{B, NKV, group},
                                      {(long)(NKV * g * ma), (long)(g * ma), (long)ma},
                                      {(long)(NKV * mb), (long)mb, 0},
                                      {(long)(NKV * g * mc), (long)(g * mc), (long)mc}};
    if (b_per_head)
        bt.sb[0] = (long)(NKV * g * mb), bt.sb[1] = (long)(g * mb), bt.sb[2] = (long)mb;
    return bt;
}

/* The GEMMs are batched over every row and head (one oneDNN call per causal block and product,
 * which threads over the batch): a call per head would be B x NH small GEMMs, each a parallel
 * region of its own, and waking the threads for each cost more than the GEMM at 2 threads. */
int swift_cpu_attention_bf16_fwd(float *out, float *probs, const float *q, const float *k,
                                 const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                                 int D)
{
    int group = NH / NKV, tb = causal_block(T);
    float scale = 1.0f / sqrtf((float)D);
    size_t tt = (size_t)T * T, td = (size_t)T * D, nq = (size_t)B * NH * td,
           nk = (size_t)B * NKV * td;
    uint16_t *qb = bscratch(S_Q, nq), *kb = bscratch(S_K, nk), *vb = bscratch(S_V, nk),
             *pb = bscratch(S_P, (size_t)B * NH * tt);
    float *oc = fscratch(F_O, nq);
    if (!qb || !kb || !vb || !pb || !oc)
        return -1;
    pack(qb, q, B, T, NH, D);
    pack(kb, k, B, T, NKV, D);
    pack(vb, v, B, T, NKV, D);
    struct swift_cpu_bf16_batch s = heads(B, NKV, group, td, td, tt, 0),
                                o = heads(B, NKV, group, tt, td, td, 0);
    for (int r0 = 0; r0 < T; r0 += tb) { /* S (T,T) = scale * Qh @ Kh^T, block by block */
        int r1 = r0 + tb < T ? r0 + tb : T;
        if (swift_cpu_bf16_gemm_batch(SWIFT_CPU_BF16_FWD,
                                      &s,
                                      r1 - r0,
                                      r1,
                                      D,
                                      scale,
                                      0.0f,
                                      qb + (size_t)r0 * D,
                                      D,
                                      kb,
                                      D,
                                      probs + (size_t)r0 * T,
                                      T))
            return -1;
    }
    masked_softmax(probs, pb, pos, B, T, NH); /* reads only what the blocks wrote */
    for (int r0 = 0; r0 < T; r0 += tb) {      /* Oh (T,D) = P @ Vh */
        int r1 = r0 + tb < T ? r0 + tb : T;
        if (swift_cpu_bf16_gemm_batch(SWIFT_CPU_BF16_DIN,
                                      &o,
                                      r1 - r0,
                                      D,
                                      r1,
                                      1.0f,
                                      0.0f,
                                      pb + (size_t)r0 * T,
                                      T,
                                      vb,
                                      D,
                                      oc + (size_t)r0 * D,
                                      D))
            return -1;
    }
    unpack(out, oc, B, T, NH, D, 1);
    return 0;
}

/* dP = dO V^T; dS = P * (dP - rowsum(P * dP)) * scale (fp32, rounded to bf16 with P in the
 * same row loop); dV = sum over the group of P^T dO; dQ = dS K; dK = sum of dS^T Q (per head,
 * then summed over the group as they are unpacked). */
int swift_cpu_attention_bf16_bwd(float *dq, float *dk, float *dv, const float *dout,
                                 const float *probs, const float *q, const float *k, const float *v,
                                 int B, int T, int NH, int NKV, int D)
{
    int group = NH / NKV, tb = causal_block(T);
    float scale = 1.0f / sqrtf((float)D);
    size_t tt = (size_t)T * T, td = (size_t)T * D, nq = (size_t)B * NH * td,
           nk = (size_t)B * NKV * td;
    uint16_t *qb = bscratch(S_Q, nq), *kb = bscratch(S_K, nk), *vb = bscratch(S_V, nk),
             *dob = bscratch(S_DO, nq), *pb = bscratch(S_P, (size_t)B * NH * tt),
             *dsb = bscratch(S_DS, (size_t)B * NH * tt);
    float *dp = fscratch(F_DP, (size_t)B * NH * tt), *dqc = fscratch(F_DQ, nq),
          *dkc = fscratch(F_DK, nq), *dvc = fscratch(F_DV, nq);
    if (!qb || !kb || !vb || !dob || !pb || !dsb || !dp || !dqc || !dkc || !dvc)
        return -1;
    pack(qb, q, B, T, NH, D);
    pack(kb, k, B, T, NKV, D);
    pack(vb, v, B, T, NKV, D);
    pack(dob, dout, B, T, NH, D);
    struct swift_cpu_bf16_batch s = heads(B, NKV, group, td, td, tt, 0), /* dP = dO V^T */
        din = heads(B, NKV, group, tt, td, td, 0),                       /* dQ = dS K */
        dw = heads(B, NKV, group, tt, td, td, 1); /* dV, dK per head: P^T dO, dS^T Q */
    for (int r0 = 0; r0 < T; r0 += tb) { /* dP (T,T) = dOh @ Vh^T, the causal blocks only */
        int r1 = r0 + tb < T ? r0 + tb : T;
        if (swift_cpu_bf16_gemm_batch(SWIFT_CPU_BF16_FWD,
                                      &s,
                                      r1 - r0,
                                      r1,
                                      D,
                                      1.0f,
                                      0.0f,
                                      dob + (size_t)r0 * D,
                                      D,
                                      vb,
                                      D,
                                      dp + (size_t)r0 * T,
                                      T))
            return -1;
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * NH * T; r++) {
        int i = (int)(r % T);
        const float *pi = probs + (size_t)r * T;
        float *di = dp + (size_t)r * T;
        softmax_bwd_row(pi, di, i, T, scale);
        swift_cpu_to_bf16_row(dsb + (size_t)r * T, di, (size_t)T);
        swift_cpu_to_bf16_row(pb + (size_t)r * T, pi, (size_t)T);
    }
    memset(dkc, 0, nq * sizeof(float));
    memset(dvc, 0, nq * sizeof(float));
    for (int r0 = 0; r0 < T; r0 += tb) {
        int r1 = r0 + tb < T ? r0 + tb : T, m = r1 - r0;
        size_t o = (size_t)r0 * D, at = (size_t)r0 * T;
        /* dV[0,r1) += P[r0,r1)^T dO[r0,r1); dQ[r0,r1) = dS K[0,r1); dK[0,r1) += dS^T Q */
        if (swift_cpu_bf16_gemm_batch(
                SWIFT_CPU_BF16_DW, &dw, r1, D, m, 1.0f, 1.0f, pb + at, T, dob + o, D, dvc, D) ||
            swift_cpu_bf16_gemm_batch(
                SWIFT_CPU_BF16_DIN, &din, m, D, r1, 1.0f, 0.0f, dsb + at, T, kb, D, dqc + o, D) ||
            swift_cpu_bf16_gemm_batch(
                SWIFT_CPU_BF16_DW, &dw, r1, D, m, 1.0f, 1.0f, dsb + at, T, qb + o, D, dkc, D))
            return -1;
    }
    unpack(dq, dqc, B, T, NH, D, 1);
    unpack(dk, dkc, B, T, NKV, D, group);
    unpack(dv, dvc, B, T, NKV, D, group);
    return 0;
}
