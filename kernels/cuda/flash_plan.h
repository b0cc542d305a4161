/* flash_plan — the tile plan of the fused attention kernels (kernels/cuda/flash_attn.cu), as
 * plain inline C so the same code runs in the kernels and in a CPU unit test
 * (tests/unit/test_flash_plan.c): which key tiles a query tile visits and which query chunks a
 * key tile needs, under the block-diagonal causal mask of kernels/ops.h (token i of a row sees
 * tokens i-pos[i] .. i; 0 <= pos[i] <= i). Skipping the tiles wholly before a query tile's
 * earliest document start and after the diagonal is where packing saves work.
 *
 * Tiles (fixed; the kernels are written for them):
 *   forward and dQ: a block of FLASH_BQ queries (4 warps of FLASH_BQ/4 rows) streams key tiles
 *   of FLASH_BK keys (one key per lane);
 *   dK/dV: a block of FLASH_BKV keys (4 warps of FLASH_BKV/4 keys) streams query chunks of
 *   FLASH_BQC queries (one query per lane), over every query head of its kv head's group.
 * Head dims 1..FLASH_DMAX: each lane holds ceil(D/32) output elements, rounded up to 2, 4 or 8
 * (one template instance each). */
#ifndef SWIFT_FLASH_PLAN_H
#define SWIFT_FLASH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FLASH_HD __host__ __device__
#else
#define FLASH_HD
#endif

enum {
    FLASH_BQ = 16,   /* queries per block (forward, dQ) */
    FLASH_BK = 32,   /* keys per tile (forward, dQ) */
    FLASH_BKV = 16,  /* keys per block (dK/dV) */
    FLASH_BQC = 32,  /* queries per chunk (dK/dV) */
    FLASH_DMAX = 256 /* largest head dim */
};

/* the first key token i may see: i - pos[i], clamped to [0, i] */
FLASH_HD static inline int flash_row_start(const int32_t *pos_row, int i)
{
    int s = i - pos_row[i];
    return s < 0 ? 0 : s > i ? i : s;
}

/* the earliest key any query of [i0, i1) sees (i0 < i1 <= T) */
FLASH_HD static inline int flash_first_key(const int32_t *pos_row, int i0, int i1)
{
    int first = i1;
    for (int i = i0; i < i1; i++) {
        int s = flash_row_start(pos_row, i);
        first = s < first ? s : first;
    }
    return first;
}

/* key tiles [*t0, *t1) (of bk keys) a query tile [i0, i1) visits: from the tile holding its
 * earliest key to the tile holding its last query (the diagonal) */
FLASH_HD static inline void flash_key_tiles(int first, int i1, int bk, int *t0, int *t1)
{
    *t0 = first / bk;
    *t1 = (i1 - 1) / bk + 1;
}

/* whether some query of a chunk ending before i1, whose earliest key is `first`, may see some
 * key of [j0, j1): the chunk reaches the tile's first key and its earliest key is no later
 * than the tile's last */
FLASH_HD static inline int flash_chunk_sees(int first, int i1, int j0, int j1)
{
    return i1 - 1 >= j0 && first <= j1 - 1;
}

/* head dims the fused kernels take */
static inline int flash_supported(int D)
{
    return D >= 1 && D <= FLASH_DMAX;
}

/* elements per lane of a head vector: the template instance (2, 4 or 8) */
static inline int flash_nc(int D)
{
    return D <= 64 ? 2 : D <= 128 ? 4 : 8;
}

/* dynamic shared memory, bytes: key/value rows read across lanes are padded to D+1 floats
 * (odd stride: no bank conflicts), rows read by a whole warp at once are not */
static inline size_t flash_smem_fwd(int D) /* Q (BQ,D), K V (BK,D+1) */
{
    return sizeof(float) * ((size_t)FLASH_BQ * D + 2 * (size_t)FLASH_BK * (D + 1));
}
static inline size_t flash_smem_dq(int D) /* Q dO (BQ,D), K V (BK,D+1) */
{
    return sizeof(float) * (2 * (size_t)FLASH_BQ * D + 2 * (size_t)FLASH_BK * (D + 1));
}
static inline size_t flash_smem_dkv(int D) /* K V (BKV,D), Q dO (BQC,D+1), L D_i (BQC) */
{
    return sizeof(float) *
           (2 * (size_t)FLASH_BKV * D + 2 * (size_t)FLASH_BQC * (D + 1) + 2 * (size_t)FLASH_BQC);
}

/* Storage in the op table's probs (B,NH,T,T) on the flash path: L (B,NH,T) = the log-sum-exp
 * of each query's scaled scores at float offset 0; when flash_saves_out(T, D) also a copy of
 * out (B*T,NH,D) at offset B*NH*T, so backward's D_i = rowsum(dO o O) is one dot product per
 * row (otherwise the dQ kernel recomputes D_i = sum_j P_ij dP_ij in a first pass over keys). */
static inline int flash_saves_out(int T, int D)
{
    return (size_t)T >= (size_t)D + 1;
}

#endif
