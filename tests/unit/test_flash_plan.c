/* flash_plan (kernels/cuda/flash_plan.h): the tile plan of the fused CUDA attention kernels, the
 * only part of them that runs on a CPU. Checked here:
 * - the first-key / key-tile / chunk-skip functions on hand-made positions;
 * - by brute force over random packings, that the tiles the kernels visit cover every
 *   (query, key) pair the block-diagonal causal mask lets through (nothing is skipped that
 *   matters), that the visited range is tight at both ends, and how much packing saves;
 * - a plain-C replay of the kernels' algorithm in the same tile order (online softmax over the
 *   planned key tiles, L = m + log l, D_i from the saved out or recomputed, dQ per query tile,
 *   dK/dV per key tile over the group's heads and the non-skipped query chunks) against the
 *   CPU backend's attention op: out, dq, dk, dv within 1e-5 + 2e-4 * max|ref|.
 * The CUDA kernels themselves are checked against the CPU op by tests/kernels/test_backend_ops.c
 * on a GPU. */
#include "kernels/cuda/flash_plan.h"
#include "kernels/ops.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rs = 12345;
static uint64_t next(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return rs >> 33;
}
static float frand(void)
{
    return (float)(next() % 2000001) / 1e6f - 1.0f;
}

/* packed documents of lengths in [1, maxdoc] (maxdoc >= T: one document per row) */
static void packed_pos(int32_t *pos, int B, int T, int maxdoc)
{
    for (int b = 0; b < B; b++)
        for (int i = 0, p = 0, left = 0; i < T; i++, left--) {
            if (left == 0) {
                left = maxdoc >= T ? T : 1 + (int)(next() % (uint64_t)maxdoc);
                p = 0;
            }
            pos[(size_t)b * T + i] = p++;
        }
}

static int visible(const int32_t *prow, int i, int j)
{
    return j >= i - prow[i] && j <= i;
}

static void test_functions(void **state)
{
    (void)state;
    /* documents [0,3), [3,5), [5,6) */
    const int32_t pos[6] = {0, 1, 2, 0, 1, 0};
    const int want[6] = {0, 0, 0, 3, 3, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(flash_row_start(pos, i), want[i]);
    assert_int_equal(flash_first_key(pos, 0, 6), 0);
    assert_int_equal(flash_first_key(pos, 3, 6), 3);
    assert_int_equal(flash_first_key(pos, 4, 6), 3);
    assert_int_equal(flash_first_key(pos, 5, 6), 5);
    /* out-of-contract positions are clamped into [0, i] */
    const int32_t bad[3] = {5, -2, 1};
    assert_int_equal(flash_row_start(bad, 0), 0);
    assert_int_equal(flash_row_start(bad, 1), 1);
    int t0, t1;
    flash_key_tiles(40, 64, 32, &t0, &t1); /* queries 48..63 whose documents start at 40 */
    assert_int_equal(t0, 1);
    assert_int_equal(t1, 2);
    flash_key_tiles(0, 1, 32, &t0, &t1);
    assert_int_equal(t0, 0);
    assert_int_equal(t1, 1);
    flash_key_tiles(31, 33, 32, &t0, &t1); /* straddles a tile edge */
    assert_int_equal(t0, 0);
    assert_int_equal(t1, 2);
    /* a key tile [32, 48): a chunk ending at 32 cannot reach it, nor one starting at 48 */
    assert_false(flash_chunk_sees(0, 32, 32, 48));
    assert_true(flash_chunk_sees(0, 33, 32, 48));
    assert_true(flash_chunk_sees(47, 64, 32, 48));
    assert_false(flash_chunk_sees(48, 64, 32, 48));
    assert_true(flash_supported(64) && flash_supported(128) && flash_supported(256) &&
                flash_supported(80) && flash_supported(1));
    assert_false(flash_supported(0) || flash_supported(257));
    assert_int_equal(flash_nc(64), 2);
    assert_int_equal(flash_nc(65), 4);
    assert_int_equal(flash_nc(128), 4);
    assert_int_equal(flash_nc(256), 8);
    assert_true(flash_saves_out(65, 64));
    assert_false(flash_saves_out(64, 64));
    /* shared memory within what sm_80 and sm_90 give a block after opting in (163 KiB) */
    assert_true(flash_smem_fwd(256) <= 163 * 1024 && flash_smem_dq(256) <= 163 * 1024 &&
                flash_smem_dkv(256) <= 163 * 1024);
    assert_true(flash_smem_fwd(64) <= 48 * 1024); /* no opt-in for the 0.5B head dim */
}

/* every visible pair is inside a visited tile (forward/dQ and dK/dV plans); returns the
 * number of (query tile, key tile) pairs the forward visits */
static long check_cover(const int32_t *prow, int T)
{
    long visits = 0;
    for (int i0 = 0; i0 < T; i0 += FLASH_BQ) {
        int i1 = i0 + FLASH_BQ < T ? i0 + FLASH_BQ : T, t0, t1;
        int first = flash_first_key(prow, i0, i1);
        flash_key_tiles(first, i1, FLASH_BK, &t0, &t1);
        assert_true(t0 < t1);
        visits += t1 - t0;
        int hit0 = 0, hit1 = 0;
        for (int i = i0; i < i1; i++)
            for (int j = 0; j < T; j++)
                if (visible(prow, i, j)) {
                    assert_true(j / FLASH_BK >= t0 && j / FLASH_BK < t1);
                    hit0 |= j / FLASH_BK == t0;
                    hit1 |= j / FLASH_BK == t1 - 1;
                }
        assert_true(hit0 && hit1); /* tight at both ends */
    }
    for (int j0 = 0; j0 < T; j0 += FLASH_BKV) {
        int j1 = j0 + FLASH_BKV < T ? j0 + FLASH_BKV : T;
        /* chunks before the one holding j0 are never visited: no query there sees the tile */
        for (int i = 0; i < (j0 / FLASH_BQC) * FLASH_BQC; i++)
            for (int j = j0; j < j1; j++)
                assert_false(visible(prow, i, j));
        for (int c0 = (j0 / FLASH_BQC) * FLASH_BQC; c0 < T; c0 += FLASH_BQC) {
            int c1 = c0 + FLASH_BQC < T ? c0 + FLASH_BQC : T;
            int sees = flash_chunk_sees(flash_first_key(prow, c0, c1), c1, j0, j1), any = 0;
            for (int i = c0; i < c1; i++)
                for (int j = j0; j < j1; j++)
                    any |= visible(prow, i, j);
            if (any)
                assert_true(sees);
        }
    }
    return visits;
}

static void test_cover(void **state)
{
    (void)state;
    const int Ts[] = {1, 15, 16, 17, 33, 77, 200, 513};
    const int docs[] = {1, 3, 16, 40, 1 << 20};
    for (size_t a = 0; a < sizeof(Ts) / sizeof(Ts[0]); a++)
        for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
            int T = Ts[a];
            int32_t *pos = malloc((size_t)T * sizeof(int32_t));
            assert_non_null(pos);
            packed_pos(pos, 1, T, docs[d]);
            check_cover(pos, T);
            free(pos);
        }
    /* the saving on the 0.5B shape's sequence length */
    int T = 1024;
    int32_t *pos = malloc((size_t)T * sizeof(int32_t));
    assert_non_null(pos);
    packed_pos(pos, 1, T, 1 << 20);
    long causal = check_cover(pos, T);
    packed_pos(pos, 1, T, 128);
    long packed = check_cover(pos, T);
    printf("# T=1024: forward key tiles visited, one document %ld, documents <= 128 tokens %ld "
           "(%.0f%%), all tiles %d\n",
           causal,
           packed,
           100.0 * packed / causal,
           (T / FLASH_BQ) * (T / FLASH_BK));
    assert_true(causal == 1056); /* 64 query tiles, the diagonal: sum over t of (t/2 + 1) */
    assert_true(packed < causal / 3);
    free(pos);
}

/* ---- the kernels' algorithm in plain C, in their tile order ---- */

struct shape {
    int B, T, NH, NKV, D;
};

static void replay_fwd(float *out, float *probs, const float *q, const float *k, const float *v,
                       const int32_t *pos, struct shape s)
{
    int T = s.T, NH = s.NH, NKV = s.NKV, D = s.D, group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    float *L = probs, *osave = flash_saves_out(T, D) ? probs + (size_t)s.B * NH * T : NULL;
    float *o = malloc((size_t)D * sizeof(float)), p[FLASH_BK];
    assert_non_null(o);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < NH; h++)
            for (int i0 = 0; i0 < T; i0 += FLASH_BQ) {
                const int32_t *prow = pos + (size_t)b * T;
                int i1 = i0 + FLASH_BQ < T ? i0 + FLASH_BQ : T, t0, t1;
                flash_key_tiles(flash_first_key(prow, i0, i1), i1, FLASH_BK, &t0, &t1);
                for (int i = i0; i < i1; i++) {
                    const float *qi = q + ((size_t)(b * T + i) * NH + h) * D;
                    float m = -INFINITY, l = 0;
                    memset(o, 0, (size_t)D * sizeof(float));
                    int st = flash_row_start(prow, i);
                    for (int t = t0; t < t1; t++) {
                        float mt = -INFINITY;
                        for (int jj = 0; jj < FLASH_BK; jj++) {
                            int j = t * FLASH_BK + jj;
                            p[jj] = -INFINITY;
                            if (j < T && j >= st && j <= i) {
                                const float *kj = k + ((size_t)(b * T + j) * NKV + h / group) * D;
                                float sc = 0;
                                for (int d = 0; d < D; d++)
                                    sc = fmaf(qi[d] * scale, kj[d], sc);
                                p[jj] = sc;
                                mt = sc > mt ? sc : mt;
                            }
                        }
                        float mn = m > mt ? m : mt;
                        if (mn == -INFINITY)
                            continue;
                        float alpha = expf(m - mn), sum = 0;
                        for (int jj = 0; jj < FLASH_BK; jj++) {
                            p[jj] = p[jj] == -INFINITY ? 0.0f : expf(p[jj] - mn);
                            sum += p[jj];
                        }
                        l = l * alpha + sum;
                        m = mn;
                        for (int d = 0; d < D; d++)
                            o[d] *= alpha;
                        for (int jj = 0; jj < FLASH_BK; jj++) {
                            int j = t * FLASH_BK + jj;
                            if (p[jj] == 0.0f)
                                continue;
                            const float *vj = v + ((size_t)(b * T + j) * NKV + h / group) * D;
                            for (int d = 0; d < D; d++)
                                o[d] = fmaf(p[jj], vj[d], o[d]);
                        }
                    }
                    size_t at = ((size_t)(b * T + i) * NH + h) * D;
                    for (int d = 0; d < D; d++) {
                        out[at + d] = o[d] / l;
                        if (osave)
                            osave[at + d] = o[d] / l;
                    }
                    L[((size_t)b * NH + h) * T + i] = m + logf(l);
                }
            }
    free(o);
}

/* score and dP of (query i of head h, key j) as the kernels compute them */
static void score(const float *q, const float *k, const float *v, const float *dout, struct shape s,
                  int b, int h, int i, int j, float *sc, float *dp)
{
    int D = s.D, kh = h / (s.NH / s.NKV);
    float scale = 1.0f / sqrtf((float)D);
    const float *qi = q + ((size_t)(b * s.T + i) * s.NH + h) * D;
    const float *oi = dout + ((size_t)(b * s.T + i) * s.NH + h) * D;
    const float *kj = k + ((size_t)(b * s.T + j) * s.NKV + kh) * D;
    const float *vj = v + ((size_t)(b * s.T + j) * s.NKV + kh) * D;
    float a = 0, c = 0;
    for (int d = 0; d < D; d++) {
        a = fmaf(qi[d] * scale, kj[d], a);
        c = fmaf(oi[d], vj[d], c);
    }
    *sc = a;
    *dp = c;
}

static void replay_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                       const float *q, const float *k, const float *v, const int32_t *pos,
                       struct shape s)
{
    int T = s.T, NH = s.NH, NKV = s.NKV, D = s.D, group = NH / NKV;
    float scale = 1.0f / sqrtf((float)D);
    size_t n = (size_t)s.B * NH * T;
    const float *L = probs, *osave = flash_saves_out(T, D) ? probs + n : NULL;
    float *Di = malloc(n * sizeof(float));
    assert_non_null(Di);
    /* dQ kernel */
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < NH; h++)
            for (int i0 = 0; i0 < T; i0 += FLASH_BQ) {
                const int32_t *prow = pos + (size_t)b * T;
                int i1 = i0 + FLASH_BQ < T ? i0 + FLASH_BQ : T, t0, t1;
                flash_key_tiles(flash_first_key(prow, i0, i1), i1, FLASH_BK, &t0, &t1);
                for (int i = i0; i < i1; i++) {
                    size_t at = ((size_t)(b * T + i) * NH + h) * D;
                    float li = L[((size_t)b * NH + h) * T + i], di = 0, sc, dp;
                    if (osave)
                        for (int d = 0; d < D; d++)
                            di = fmaf(dout[at + d], osave[at + d], di);
                    else
                        for (int j = t0 * FLASH_BK; j < t1 * FLASH_BK && j < T; j++)
                            if (visible(prow, i, j)) {
                                score(q, k, v, dout, s, b, h, i, j, &sc, &dp);
                                di = fmaf(expf(sc - li), dp, di);
                            }
                    Di[((size_t)b * NH + h) * T + i] = di;
                    memset(dq + at, 0, (size_t)D * sizeof(float));
                    for (int j = t0 * FLASH_BK; j < t1 * FLASH_BK && j < T; j++)
                        if (visible(prow, i, j)) {
                            score(q, k, v, dout, s, b, h, i, j, &sc, &dp);
                            float ds = expf(sc - li) * (dp - di);
                            const float *kj = k + ((size_t)(b * T + j) * NKV + h / group) * D;
                            for (int d = 0; d < D; d++)
                                dq[at + d] = fmaf(ds, kj[d], dq[at + d]);
                        }
                    for (int d = 0; d < D; d++)
                        dq[at + d] *= scale;
                }
            }
    /* dK/dV kernel */
    for (int b = 0; b < s.B; b++)
        for (int kh = 0; kh < NKV; kh++)
            for (int j0 = 0; j0 < T; j0 += FLASH_BKV) {
                const int32_t *prow = pos + (size_t)b * T;
                int j1 = j0 + FLASH_BKV < T ? j0 + FLASH_BKV : T;
                for (int j = j0; j < j1; j++) {
                    size_t at = ((size_t)(b * T + j) * NKV + kh) * D;
                    memset(dk + at, 0, (size_t)D * sizeof(float));
                    memset(dv + at, 0, (size_t)D * sizeof(float));
                }
                for (int g = 0; g < group; g++) {
                    int h = kh * group + g;
                    for (int c0 = (j0 / FLASH_BQC) * FLASH_BQC; c0 < T; c0 += FLASH_BQC) {
                        int c1 = c0 + FLASH_BQC < T ? c0 + FLASH_BQC : T;
                        if (!flash_chunk_sees(flash_first_key(prow, c0, c1), c1, j0, j1))
                            continue;
                        for (int j = j0; j < j1; j++) {
                            size_t at = ((size_t)(b * T + j) * NKV + kh) * D;
                            for (int i = c0; i < c1; i++) {
                                if (!visible(prow, i, j))
                                    continue;
                                float sc, dp, li = L[((size_t)b * NH + h) * T + i];
                                score(q, k, v, dout, s, b, h, i, j, &sc, &dp);
                                float p = expf(sc - li);
                                float ds = p * (dp - Di[((size_t)b * NH + h) * T + i]);
                                size_t ai = ((size_t)(b * T + i) * NH + h) * D;
                                for (int d = 0; d < D; d++) {
                                    dv[at + d] = fmaf(p, dout[ai + d], dv[at + d]);
                                    dk[at + d] = fmaf(ds, q[ai + d] * scale, dk[at + d]);
                                }
                            }
                        }
                    }
                }
            }
    free(Di);
}

static float *rnd(size_t n)
{
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

static void close_to(const char *what, const float *got, const float *ref, size_t n)
{
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        maxref = fabs(ref[i]) > maxref ? fabs(ref[i]) : maxref;
        double e = fabs((double)got[i] - ref[i]);
        maxerr = e > maxerr || isnan(e) ? (isnan(e) ? INFINITY : e) : maxerr;
    }
    double bound = 1e-5 + 2e-4 * maxref;
    printf("# %-34s max|err| %.3g (bound %.3g)\n", what, maxerr, bound);
    assert_true(maxerr <= bound);
}

static void replay_case(const char *name, struct shape s, int maxdoc)
{
    size_t N = (size_t)s.B * s.T, nq = N * s.NH * s.D, nk = N * s.NKV * s.D;
    size_t np = (size_t)s.B * s.NH * s.T * s.T;
    int32_t *pos = malloc(N * sizeof(int32_t));
    assert_non_null(pos);
    packed_pos(pos, s.B, s.T, maxdoc);
    float *q = rnd(nq), *k = rnd(nk), *v = rnd(nk), *g = rnd(nq);
    float *out = calloc(nq, sizeof(float)), *probs = calloc(np, sizeof(float));
    float *gq = calloc(nq, sizeof(float)), *gk = calloc(nk, sizeof(float));
    float *gv = calloc(nk, sizeof(float));
    float *fout = calloc(nq, sizeof(float)), *fprobs = calloc(np, sizeof(float));
    float *fq = calloc(nq, sizeof(float)), *fk = calloc(nk, sizeof(float));
    float *fv = calloc(nk, sizeof(float));
    assert_true(out && probs && gq && gk && gv && fout && fprobs && fq && fk && fv);
    swift_cpu_ops.attention_fwd(out, probs, q, k, v, pos, s.B, s.T, s.NH, s.NKV, s.D);
    swift_cpu_ops.attention_bwd(gq, gk, gv, g, probs, q, k, v, pos, s.B, s.T, s.NH, s.NKV, s.D);
    replay_fwd(fout, fprobs, q, k, v, pos, s);
    replay_bwd(fq, fk, fv, g, fprobs, q, k, v, pos, s);
    char what[96];
    printf("# replay %s: B=%d T=%d NH=%d NKV=%d D=%d documents <= %d\n",
           name,
           s.B,
           s.T,
           s.NH,
           s.NKV,
           s.D,
           maxdoc);
    snprintf(what, sizeof(what), "%s out", name);
    close_to(what, fout, out, nq);
    snprintf(what, sizeof(what), "%s dq", name);
    close_to(what, fq, gq, nq);
    snprintf(what, sizeof(what), "%s dk", name);
    close_to(what, fk, gk, nk);
    snprintf(what, sizeof(what), "%s dv", name);
    close_to(what, fv, gv, nk);
    /* L is the log-sum-exp of each query's visible scaled scores (from the CPU's probs: the
     * largest probability p_max = exp(s_max - L)) */
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int i = 0; i < s.T; i++) {
                const float *pr = probs + (((size_t)b * s.NH + h) * s.T + i) * s.T;
                float sc, dp, best = -INFINITY;
                int jm = i;
                for (int j = 0; j <= i; j++)
                    if (pr[j] > 0 && visible(pos + (size_t)b * s.T, i, j)) {
                        score(q, k, v, g, s, b, h, i, j, &sc, &dp);
                        if (sc > best) {
                            best = sc;
                            jm = j;
                        }
                    }
                double want = best - log(pr[jm]);
                assert_true(fabs(fprobs[((size_t)b * s.NH + h) * s.T + i] - want) <= 1e-4);
            }
    free(pos);
    free(q);
    free(k);
    free(v);
    free(g);
    free(out);
    free(probs);
    free(gq);
    free(gk);
    free(gv);
    free(fout);
    free(fprobs);
    free(fq);
    free(fk);
    free(fv);
}

static void test_replay(void **state)
{
    (void)state;
    replay_case("gqa14/2 d64 packed", (struct shape){2, 77, 14, 2, 64}, 20);
    replay_case("mha4/4 d64 one doc", (struct shape){1, 70, 4, 4, 64}, 1 << 20);
    replay_case("mha4/4 d128 packed", (struct shape){1, 150, 4, 4, 128}, 40);
    replay_case("gqa4/2 d128 T<=D", (struct shape){2, 45, 4, 2, 128}, 12);
    replay_case("gqa2/1 d32 T=1", (struct shape){3, 1, 2, 1, 32}, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_functions),
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_replay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
