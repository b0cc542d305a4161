// flash_attn.cu — fused (FlashAttention-2 style) attention for the CUDA backend, fp32 in and
// out, fp32 arithmetic. The op contract is kernels/ops.h's attention_fwd / attention_bwd:
// q (B*T,NH,D), k v (B*T,NKV,D), head h uses kv head h/(NH/NKV), scale 1/sqrt(D), token i of a
// row sees tokens i-pos[i] .. i (packed documents, block-diagonal causal).
//
// Forward (k_flash_fwd): one block per (query tile of FLASH_BQ, head, row); 4 warps of
// FLASH_BQ/4 query rows; key/value tiles of FLASH_BK keys streamed through shared memory, one
// key per lane for the scores; online softmax (running max m, sum l) in fp32; each lane keeps
// ceil(D/32) output elements. Writes out and L = m + log l per query (B,NH,T) instead of the
// T x T probabilities. Key tiles wholly before the query tile's earliest document start or
// after the diagonal are never loaded (kernels/cuda/flash_plan.h).
//
// Backward, two kernels, no atomics (results identical run to run):
// - k_flash_dq: one block per (query tile, head, row), the forward's layout; P is recomputed
//   from Q, K and L; D_i = rowsum(dO o O) from the copy of O the forward left in probs, or, when
//   it did not fit (T <= D), sum_j P_ij dP_ij in a first pass over the keys; writes D_i for
//   the next kernel and dQ = scale * sum_j P_ij (dP_ij - D_i) K_j;
// - k_flash_dkv: one block per (key tile of FLASH_BKV, kv head, row); 4 warps of FLASH_BKV/4
//   keys; loops over the group's query heads in order and over query chunks of FLASH_BQC (one
//   query per lane), skipping chunks that cannot see the tile; dV_j = sum_i P_ij dO_i,
//   dK_j = scale * sum_i dS_ij Q_i accumulate in registers and are written once.
//
// Everything here is compiled (nvcc -Werror, sm_90 + compute_80 PTX) and has never run on a
// GPU; tests/kernels/ compares it with the CPU op when a GPU is present.
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/ops.h"
}
#include "kernels/cuda/flash_attn.h"
#include "kernels/cuda/flash_plan.h"

#include "kernels/cuda/check.h"

#define FULL 0xffffffffu

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// rows [i0, i0 + n) of a head's (T, stride) slice into shared (n, ld), times mul; rows >= T zero
static __device__ __forceinline__ void load_rows(float *dst, int ld, const float *src,
                                                 size_t stride, int i0, int n, int T, int D,
                                                 float mul)
{
    for (int x = threadIdx.x; x < n * D; x += blockDim.x) {
        int r = x / D, d = x - r * D, i = i0 + r;
        dst[r * ld + d] = i < T ? src[(size_t)i * stride + d] * mul : 0.0f;
    }
}

/* ---------------- forward ---------------- */

template <int NC>
static __global__ void __launch_bounds__(128)
    k_flash_fwd(float *__restrict__ out, float *__restrict__ L, float *__restrict__ osave,
                const float *__restrict__ q, const float *__restrict__ k,
                const float *__restrict__ v, const int32_t *__restrict__ pos, int T, int NH,
                int NKV, int D, float scale)
{
    constexpr int R = FLASH_BQ / 4;
    extern __shared__ float sm[];
    float *Qs = sm;                      // (BQ, D), scaled
    float *Ks = Qs + FLASH_BQ * D;       // (BK, D+1)
    float *Vs = Ks + FLASH_BK * (D + 1); // (BK, D+1)
    const int b = blockIdx.z, h = blockIdx.y, kh = h / (NH / NKV);
    const int i0 = blockIdx.x * FLASH_BQ, i1 = min(i0 + FLASH_BQ, T);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *prow = pos + (size_t)b * T;
    const size_t qs = (size_t)NH * D, ks = (size_t)NKV * D;
    const float *qb = q + (size_t)b * T * qs + (size_t)h * D;
    const float *kb = k + (size_t)b * T * ks + (size_t)kh * D;
    const float *vb = v + (size_t)b * T * ks + (size_t)kh * D;

    load_rows(Qs, D, qb, qs, i0, FLASH_BQ, T, D, scale);
    int t0, t1;
    flash_key_tiles(flash_first_key(prow, i0, i1), i1, FLASH_BK, &t0, &t1);

    int ri[R], rs[R]; // query index (-1: past T) and its first key
    float m[R], l[R], o[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int i = i0 + warp * R + r;
        ri[r] = i < T ? i : -1;
        rs[r] = i < T ? flash_row_start(prow, i) : 0;
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
            o[r][c] = 0.0f;
    }
    const float *qw = Qs + warp * R * D;
    for (int t = t0; t < t1; t++) {
        const int j0 = t * FLASH_BK, j = j0 + lane;
        __syncthreads(); // the previous tile is consumed
        load_rows(Ks, D + 1, kb, ks, j0, FLASH_BK, T, D, 1.0f);
        load_rows(Vs, D + 1, vb, ks, j0, FLASH_BK, T, D, 1.0f);
        __syncthreads();
        float sc[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            sc[r] = 0.0f;
        const float *kr = Ks + lane * (D + 1);
        for (int d = 0; d < D; d++) {
            float kd = kr[d];
#pragma unroll
            for (int r = 0; r < R; r++)
                sc[r] = fmaf(qw[r * D + d], kd, sc[r]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            bool ok = ri[r] >= 0 && j >= rs[r] && j <= ri[r];
            float s = ok ? sc[r] : -INFINITY;
            float mn = fmaxf(m[r], warp_max(s));
            if (mn == -INFINITY) { // warp-uniform: nothing visible to this row yet
                sc[r] = 0.0f;
                continue;
            }
            float alpha = expf(m[r] - mn); // 0 while m is -inf
            float p = ok ? expf(s - mn) : 0.0f;
            l[r] = l[r] * alpha + warp_sum(p);
            m[r] = mn;
            sc[r] = p;
#pragma unroll
            for (int c = 0; c < NC; c++)
                o[r][c] *= alpha;
        }
        for (int jj = 0; jj < FLASH_BK; jj++) {
            float pj[R];
#pragma unroll
            for (int r = 0; r < R; r++)
                pj[r] = __shfl_sync(FULL, sc[r], jj);
            const float *vr = Vs + jj * (D + 1);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int d = c * 32 + lane;
                float vv = d < D ? vr[d] : 0.0f;
#pragma unroll
                for (int r = 0; r < R; r++)
                    o[r][c] = fmaf(pj[r], vv, o[r][c]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (ri[r] < 0)
            continue;
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        size_t at = ((size_t)b * T + ri[r]) * qs + (size_t)h * D;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int d = c * 32 + lane;
            if (d < D) {
                out[at + d] = o[r][c] * inv;
                if (osave)
                    osave[at + d] = o[r][c] * inv;
            }
        }
        if (lane == 0)
            L[((size_t)b * NH + h) * T + ri[r]] = m[r] + logf(l[r]);
    }
}

/* ---------------- backward: dQ (and D_i) ---------------- */

template <int NC, bool HAVE_O>
static __global__ void __launch_bounds__(128)
    k_flash_dq(float *__restrict__ dq, float *__restrict__ Di, const float *__restrict__ dout,
               const float *__restrict__ q, const float *__restrict__ k,
               const float *__restrict__ v, const float *__restrict__ L,
               const float *__restrict__ osave, const int32_t *__restrict__ pos, int T, int NH,
               int NKV, int D, float scale)
{
    constexpr int R = FLASH_BQ / 4;
    extern __shared__ float sm[];
    float *Qs = sm;                      // (BQ, D), scaled
    float *Os = Qs + FLASH_BQ * D;       // (BQ, D): dO
    float *Ks = Os + FLASH_BQ * D;       // (BK, D+1)
    float *Vs = Ks + FLASH_BK * (D + 1); // (BK, D+1)
    const int b = blockIdx.z, h = blockIdx.y, kh = h / (NH / NKV);
    const int i0 = blockIdx.x * FLASH_BQ, i1 = min(i0 + FLASH_BQ, T);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *prow = pos + (size_t)b * T;
    const size_t qs = (size_t)NH * D, ks = (size_t)NKV * D;
    const float *qb = q + (size_t)b * T * qs + (size_t)h * D;
    const float *ob = dout + (size_t)b * T * qs + (size_t)h * D;
    const float *kb = k + (size_t)b * T * ks + (size_t)kh * D;
    const float *vb = v + (size_t)b * T * ks + (size_t)kh * D;
    const float *Lb = L + ((size_t)b * NH + h) * T;

    load_rows(Qs, D, qb, qs, i0, FLASH_BQ, T, D, scale);
    load_rows(Os, D, ob, qs, i0, FLASH_BQ, T, D, 1.0f);
    int t0, t1;
    flash_key_tiles(flash_first_key(prow, i0, i1), i1, FLASH_BK, &t0, &t1);
    __syncthreads();

    int ri[R], rs[R];
    float lr[R], di[R], acc[R][NC];
    const float *qw = Qs + warp * R * D, *ow = Os + warp * R * D;
#pragma unroll
    for (int r = 0; r < R; r++) {
        int i = i0 + warp * R + r;
        ri[r] = i < T ? i : -1;
        rs[r] = i < T ? flash_row_start(prow, i) : 0;
        lr[r] = i < T ? Lb[i] : 0.0f;
        di[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
            acc[r][c] = 0.0f;
        if (HAVE_O && i < T) {
            const float *orow = osave + ((size_t)b * T + i) * qs + (size_t)h * D;
            float part = 0.0f;
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int d = c * 32 + lane;
                if (d < D)
                    part = fmaf(ow[r * D + d], orow[d], part);
            }
            di[r] = warp_sum(part);
        }
    }

    // pass 0 (only without O): D_i = sum_j P_ij dP_ij; pass 1: dQ
    for (int pass = HAVE_O ? 1 : 0; pass < 2; pass++) {
        float part[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            part[r] = 0.0f;
        for (int t = t0; t < t1; t++) {
            const int j0 = t * FLASH_BK, j = j0 + lane;
            __syncthreads();
            load_rows(Ks, D + 1, kb, ks, j0, FLASH_BK, T, D, 1.0f);
            load_rows(Vs, D + 1, vb, ks, j0, FLASH_BK, T, D, 1.0f);
            __syncthreads();
            float sc[R], dp[R];
#pragma unroll
            for (int r = 0; r < R; r++)
                sc[r] = dp[r] = 0.0f;
            const float *kr = Ks + lane * (D + 1), *vr = Vs + lane * (D + 1);
            for (int d = 0; d < D; d++) {
                float kd = kr[d], vd = vr[d];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    sc[r] = fmaf(qw[r * D + d], kd, sc[r]);
                    dp[r] = fmaf(ow[r * D + d], vd, dp[r]);
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                bool ok = ri[r] >= 0 && j >= rs[r] && j <= ri[r];
                float p = ok ? expf(sc[r] - lr[r]) : 0.0f;
                if (pass == 0)
                    part[r] = fmaf(p, dp[r], part[r]);
                else
                    sc[r] = p * (dp[r] - di[r]); // dS / scale
            }
            if (pass == 0)
                continue;
            for (int jj = 0; jj < FLASH_BK; jj++) {
                float sj[R];
#pragma unroll
                for (int r = 0; r < R; r++)
                    sj[r] = __shfl_sync(FULL, sc[r], jj);
                const float *kj = Ks + jj * (D + 1);
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    int d = c * 32 + lane;
                    float kv = d < D ? kj[d] : 0.0f;
#pragma unroll
                    for (int r = 0; r < R; r++)
                        acc[r][c] = fmaf(sj[r], kv, acc[r][c]);
                }
            }
        }
        if (pass == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
                di[r] = warp_sum(part[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (ri[r] < 0)
            continue;
        size_t at = ((size_t)b * T + ri[r]) * qs + (size_t)h * D;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int d = c * 32 + lane;
            if (d < D)
                dq[at + d] = acc[r][c] * scale;
        }
        if (lane == 0)
            Di[((size_t)b * NH + h) * T + ri[r]] = di[r];
    }
}

/* ---------------- backward: dK, dV ---------------- */

template <int NC>
static __global__ void __launch_bounds__(128)
    k_flash_dkv(float *__restrict__ dk, float *__restrict__ dv, const float *__restrict__ dout,
                const float *__restrict__ q, const float *__restrict__ k,
                const float *__restrict__ v, const float *__restrict__ L,
                const float *__restrict__ Di, const int32_t *__restrict__ pos, int T, int NH,
                int NKV, int D, float scale)
{
    constexpr int R = FLASH_BKV / 4;
    extern __shared__ float sm[];
    float *Ks = sm;                       // (BKV, D)
    float *Vs = Ks + FLASH_BKV * D;       // (BKV, D)
    float *Qs = Vs + FLASH_BKV * D;       // (BQC, D+1), scaled
    float *Os = Qs + FLASH_BQC * (D + 1); // (BQC, D+1): dO
    float *Ls = Os + FLASH_BQC * (D + 1); // (BQC)
    float *Ds = Ls + FLASH_BQC;           // (BQC)
    const int b = blockIdx.z, kh = blockIdx.y, group = NH / NKV;
    const int j0 = blockIdx.x * FLASH_BKV, j1 = min(j0 + FLASH_BKV, T);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *prow = pos + (size_t)b * T;
    const size_t qs = (size_t)NH * D, ks = (size_t)NKV * D;
    const float *kb = k + (size_t)b * T * ks + (size_t)kh * D;
    const float *vb = v + (size_t)b * T * ks + (size_t)kh * D;

    load_rows(Ks, D, kb, ks, j0, FLASH_BKV, T, D, 1.0f);
    load_rows(Vs, D, vb, ks, j0, FLASH_BKV, T, D, 1.0f);

    int jr[R];
    float gk[R][NC], gv[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int j = j0 + warp * R + r;
        jr[r] = j < T ? j : -1;
#pragma unroll
        for (int c = 0; c < NC; c++)
            gk[r][c] = gv[r][c] = 0.0f;
    }
    const float *kw = Ks + warp * R * D, *vw = Vs + warp * R * D;
    for (int g = 0; g < group; g++) {
        const int h = kh * group + g;
        const float *qb = q + (size_t)b * T * qs + (size_t)h * D;
        const float *ob = dout + (size_t)b * T * qs + (size_t)h * D;
        const float *Lb = L + ((size_t)b * NH + h) * T, *Db = Di + ((size_t)b * NH + h) * T;
        for (int c0 = (j0 / FLASH_BQC) * FLASH_BQC; c0 < T; c0 += FLASH_BQC) {
            const int i = c0 + lane, c1 = min(c0 + FLASH_BQC, T);
            const int st = i < T ? flash_row_start(prow, i) : INT_MAX;
            const int first = __reduce_min_sync(FULL, st); // the same in every warp
            if (!flash_chunk_sees(first, c1, j0, j1))
                continue;
            __syncthreads(); // the previous chunk is consumed
            load_rows(Qs, D + 1, qb, qs, c0, FLASH_BQC, T, D, scale);
            load_rows(Os, D + 1, ob, qs, c0, FLASH_BQC, T, D, 1.0f);
            if (threadIdx.x < FLASH_BQC) {
                int x = c0 + threadIdx.x;
                Ls[threadIdx.x] = x < T ? Lb[x] : 0.0f;
                Ds[threadIdx.x] = x < T ? Db[x] : 0.0f;
            }
            __syncthreads();
            float p[R], ds[R];
#pragma unroll
            for (int r = 0; r < R; r++)
                p[r] = ds[r] = 0.0f;
            const float *qr = Qs + lane * (D + 1), *orow = Os + lane * (D + 1);
            for (int d = 0; d < D; d++) {
                float qd = qr[d], od = orow[d];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    p[r] = fmaf(qd, kw[r * D + d], p[r]);   // score
                    ds[r] = fmaf(od, vw[r * D + d], ds[r]); // dP
                }
            }
            const float li = Ls[lane], dli = Ds[lane];
#pragma unroll
            for (int r = 0; r < R; r++) {
                bool ok = jr[r] >= 0 && i < T && jr[r] >= st && jr[r] <= i;
                float pr = ok ? expf(p[r] - li) : 0.0f;
                ds[r] = pr * (ds[r] - dli); // dS / scale
                p[r] = pr;
            }
            for (int qq = 0; qq < FLASH_BQC; qq++) {
                float pq[R], sq[R];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    pq[r] = __shfl_sync(FULL, p[r], qq);
                    sq[r] = __shfl_sync(FULL, ds[r], qq);
                }
                const float *qrow = Qs + qq * (D + 1), *drow = Os + qq * (D + 1);
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    int d = c * 32 + lane;
                    float qv = d < D ? qrow[d] : 0.0f, ov = d < D ? drow[d] : 0.0f;
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        gv[r][c] = fmaf(pq[r], ov, gv[r][c]);
                        gk[r][c] = fmaf(sq[r], qv, gk[r][c]); // Q is scaled: dK's scale
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (jr[r] < 0)
            continue;
        size_t at = ((size_t)b * T + jr[r]) * ks + (size_t)kh * D;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int d = c * 32 + lane;
            if (d < D) {
                dk[at + d] = gk[r][c];
                dv[at + d] = gv[r][c];
            }
        }
    }
}

/* ---------------- host side ---------------- */

static int mode = -1; // SWIFT_CUDA_ATTN_*; -1: not read from the environment yet

extern "C" void swift_cuda_set_attention(int m)
{
    mode = m == SWIFT_CUDA_ATTN_FLASH || m == SWIFT_CUDA_ATTN_CUBLAS ? m : SWIFT_CUDA_ATTN_AUTO;
}

bool swift_flash_use(int D)
{
    if (mode < 0) {
        const char *e = getenv("SWIFT_CUDA_ATTN");
        mode = SWIFT_CUDA_ATTN_AUTO;
        if (e && !strcmp(e, "flash"))
            mode = SWIFT_CUDA_ATTN_FLASH;
        else if (e && !strcmp(e, "cublas"))
            mode = SWIFT_CUDA_ATTN_CUBLAS;
        else if (e && *e)
            fprintf(stderr,
                    "SWIFT_CUDA_ATTN=%s: expected flash or cublas; using the default (flash "
                    "for head dims up to %d)\n",
                    e,
                    FLASH_DMAX);
    }
    if (mode == SWIFT_CUDA_ATTN_CUBLAS)
        return false;
    if (flash_supported(D))
        return true;
    if (mode == SWIFT_CUDA_ATTN_FLASH) {
        fprintf(stderr,
                "flash attention: head dim %d not supported (1..%d); use SWIFT_CUDA_ATTN=cublas\n",
                D,
                FLASH_DMAX);
        abort();
    }
    return false;
}

static void check_shape(int B, int T, int NH, int NKV, int D)
{
    if (!(B > 0 && B <= 65535 && T > 0 && NH > 0 && NH <= 65535 && NKV > 0 && NH % NKV == 0 &&
          flash_supported(D))) {
        fprintf(stderr,
                "%s:%d: flash attention: bad shape B=%d T=%d NH=%d NKV=%d D=%d\n",
                __FILE__,
                __LINE__,
                B,
                T,
                NH,
                NKV,
                D);
        abort();
    }
}

// kernels that need more than the default 48 KiB of dynamic shared memory ask for it
template <typename K> static void smem_opt_in(K kern, size_t bytes)
{
    if (bytes > 48u * 1024)
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int NC>
static void fwd_nc(cudaStream_t st, float *out, float *L, float *osave, const float *q,
                   const float *k, const float *v, const int32_t *pos, int B, int T, int NH,
                   int NKV, int D, float scale)
{
    size_t sm = flash_smem_fwd(D);
    smem_opt_in(k_flash_fwd<NC>, sm);
    dim3 grid((unsigned)((T + FLASH_BQ - 1) / FLASH_BQ), (unsigned)NH, (unsigned)B);
    k_flash_fwd<NC><<<grid, 128, sm, st>>>(out, L, osave, q, k, v, pos, T, NH, NKV, D, scale);
    CK(cudaGetLastError());
}

void swift_flash_fwd(cudaStream_t st, float *out, float *probs, const float *q, const float *k,
                     const float *v, const int32_t *pos, int B, int T, int NH, int NKV, int D)
{
    check_shape(B, T, NH, NKV, D);
    float scale = 1.0f / sqrtf((float)D);
    float *osave = flash_saves_out(T, D) ? probs + (size_t)B * NH * T : NULL;
    switch (flash_nc(D)) {
    case 2:
        fwd_nc<2>(st, out, probs, osave, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    case 4:
        fwd_nc<4>(st, out, probs, osave, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    default:
        fwd_nc<8>(st, out, probs, osave, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    }
}

static float *di_buf; // D_i (B,NH,T), grown as needed, never freed
static size_t di_n;

template <int NC>
static void bwd_nc(cudaStream_t st, float *dq, float *dk, float *dv, const float *dout,
                   const float *L, const float *osave, float *Di, const float *q, const float *k,
                   const float *v, const int32_t *pos, int B, int T, int NH, int NKV, int D,
                   float scale)
{
    size_t sq = flash_smem_dq(D), skv = flash_smem_dkv(D);
    dim3 gq((unsigned)((T + FLASH_BQ - 1) / FLASH_BQ), (unsigned)NH, (unsigned)B);
    if (osave) {
        smem_opt_in(k_flash_dq<NC, true>, sq);
        k_flash_dq<NC, true>
            <<<gq, 128, sq, st>>>(dq, Di, dout, q, k, v, L, osave, pos, T, NH, NKV, D, scale);
    } else {
        smem_opt_in(k_flash_dq<NC, false>, sq);
        k_flash_dq<NC, false>
            <<<gq, 128, sq, st>>>(dq, Di, dout, q, k, v, L, osave, pos, T, NH, NKV, D, scale);
    }
    CK(cudaGetLastError());
    smem_opt_in(k_flash_dkv<NC>, skv);
    dim3 gk((unsigned)((T + FLASH_BKV - 1) / FLASH_BKV), (unsigned)NKV, (unsigned)B);
    k_flash_dkv<NC><<<gk, 128, skv, st>>>(dk, dv, dout, q, k, v, L, Di, pos, T, NH, NKV, D, scale);
    CK(cudaGetLastError());
}

void swift_flash_bwd(cudaStream_t st, float *dq, float *dk, float *dv, const float *dout,
                     const float *probs, const float *q, const float *k, const float *v,
                     const int32_t *pos, int B, int T, int NH, int NKV, int D)
{
    check_shape(B, T, NH, NKV, D);
    float scale = 1.0f / sqrtf((float)D);
    size_t n = (size_t)B * NH * T;
    if (di_n < n) {
        if (di_buf) {
            CK(cudaStreamSynchronize(st));
            CK(cudaFree(di_buf));
        }
        CK(cudaMalloc(&di_buf, n * sizeof(float)));
        di_n = n;
    }
    const float *osave = flash_saves_out(T, D) ? probs + n : NULL;
    switch (flash_nc(D)) {
    case 2:
        bwd_nc<2>(
            st, dq, dk, dv, dout, probs, osave, di_buf, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    case 4:
        bwd_nc<4>(
            st, dq, dk, dv, dout, probs, osave, di_buf, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    default:
        bwd_nc<8>(
            st, dq, dk, dv, dout, probs, osave, di_buf, q, k, v, pos, B, T, NH, NKV, D, scale);
        break;
    }
}
