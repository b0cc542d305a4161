/* Every op of the CUDA backend against the CPU backend (the specification) on the same random
 * inputs, then a whole tiny model forward + backward on both. Matmuls run in exact fp32 here
 * (swift_cuda_set_math(FP32)); one case checks the bf16 path with a looser bound.
 *
 * Tolerances, as max |cuda - cpu| <= atol + rtol * max |cpu| over the tensor:
 *   elementwise ops (swiglu, add, scale, rope, adamw, embed fwd)       1e-6 + 1e-5
 *   reductions in float (rmsnorm, matmul fp32, embed bwd, attention)   1e-5 + 1e-4
 *   cross-entropy loss sum (double on both)                             relative 1e-6
 *   matmul with bf16 inputs (fp32 accumulation)                         rtol 2e-2
 *   whole model: loss relative 1e-4, every gradient tensor              1e-6 + 2e-3
 *   dropout masks: identical (same counter-based RNG)
 *   flash attention (kernels/cuda/flash_attn.cu) against the CPU op: out, dq, dk, dv
 *                                                                      1e-5 + 2e-4
 *   flash against the cuBLAS attention path, both on the GPU            1e-5 + 2e-4
 *   flash backward run twice: bit-identical (no atomics)
 * test_attention checks the cuBLAS path (it compares probs); test_model runs the default
 * (flash). test_attention_timing prints flash vs cuBLAS times for the Qwen2.5-0.5B attention
 * shape (tests/gpu/run.sh records them).
 * Without a GPU (or built with CUDA=0) every case is a visible cmocka skip. */
#include "kernels/ops.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kernels/device.h"
#include "lib/eval/kv.h"
#include "lib/model/model.h"

static const struct swift_ops *C = &swift_cpu_ops;
static const struct swift_ops *G; /* NULL: no GPU, every case skips */

static uint64_t rs = 777;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!G) {                                                                                  \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* host buffers and their device twins, freed by the teardown */
static void *hbufs[512], *dbufs[512];
static int nh, nd;
static void *hkeep(void *p)
{
    if (nh < 512)
        hbufs[nh++] = p;
    return p;
}
static int release_all(void **state)
{
    (void)state;
    while (nh > 0)
        free(hbufs[--nh]);
    while (nd > 0)
        G->free(dbufs[--nd]);
    return 0;
}
static float *rnd(size_t n, float scale)
{
    float *x = hkeep(malloc(n * sizeof(float)));
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}
static float *hdup(const float *x, size_t n)
{
    float *y = hkeep(malloc(n * sizeof(float)));
    memcpy(y, x, n * sizeof(float));
    return y;
}
static void *dup_dev(const void *h, size_t bytes)
{
    void *d = G->alloc(bytes);
    assert_non_null(d);
    if (nd < 512)
        dbufs[nd++] = d;
    G->upload(d, h, bytes);
    return d;
}
static float *fdev(const float *h, size_t n)
{
    return dup_dev(h, n * sizeof(float));
}

/* compare a device tensor with the CPU result */
static void check(const char *what, const float *dev, const float *ref, size_t n, double atol,
                  double rtol)
{
    float *h = hkeep(malloc((n ? n : 1) * sizeof(float)));
    G->download(h, dev, n * sizeof(float));
    double maxref = 0, maxerr = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
        double e = fabs((double)h[i] - ref[i]);
        if (!(e <= maxerr)) { /* NaN counts */
            maxerr = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    double bound = atol + rtol * maxref;
    printf("# %-28s n=%-8zu max|err| %.3g (bound %.3g, max|ref| %.3g)\n",
           what,
           n,
           maxerr,
           bound,
           maxref);
    if (!(maxerr <= bound))
        fail_msg("%s: element %zu: cuda %.9g cpu %.9g", what, at, (double)h[at], (double)ref[at]);
}

#define EW 1e-6, 1e-5
#define RED 1e-5, 1e-4

static void test_matmul(void **state)
{
    (void)state;
    NEED_GPU();
    int N = 37, I = 70, O = 53; /* odd sizes: no tile multiple */
    float *x = rnd((size_t)N * I, 1), *w = rnd((size_t)O * I, 1), *b = rnd(O, 1);
    float *out = rnd((size_t)N * O, 1), *ref = hdup(out, (size_t)N * O);
    float *dx = fdev(x, (size_t)N * I), *dw = fdev(w, (size_t)O * I), *db = fdev(b, O);
    float *dout = fdev(out, (size_t)N * O);
    C->matmul_fwd(ref, x, w, b, N, I, O, 0.5f, 0.25f);
    G->matmul_fwd(dout, dx, dw, db, N, I, O, 0.5f, 0.25f);
    check("matmul_fwd bias alpha beta", dout, ref, (size_t)N * O, RED);
    C->matmul_fwd(ref, x, w, NULL, N, I, O, 1.0f, 0.0f);
    G->matmul_fwd(dout, dx, dw, NULL, N, I, O, 1.0f, 0.0f);
    check("matmul_fwd", dout, ref, (size_t)N * O, RED);

    float *g = rnd((size_t)N * O, 1), *din = rnd((size_t)N * I, 1), *gw = rnd((size_t)O * I, 1);
    float *gb = rnd(O, 1);
    float *rdin = hdup(din, (size_t)N * I), *rgw = hdup(gw, (size_t)O * I), *rgb = hdup(gb, O);
    float *dg = fdev(g, (size_t)N * O), *ddin = fdev(din, (size_t)N * I);
    float *dgw = fdev(gw, (size_t)O * I), *dgb = fdev(gb, O);
    C->matmul_bwd(rdin, rgw, rgb, g, x, w, N, I, O, 0.75f, 1.0f);
    G->matmul_bwd(ddin, dgw, dgb, dg, dx, dw, N, I, O, 0.75f, 1.0f);
    check("matmul_bwd din (beta 1)", ddin, rdin, (size_t)N * I, RED);
    check("matmul_bwd dw (+=)", dgw, rgw, (size_t)O * I, RED);
    check("matmul_bwd db (+=)", dgb, rgb, O, RED);
    C->matmul_bwd(rdin, NULL, NULL, g, x, w, N, I, O, 1.0f, 0.0f);
    G->matmul_bwd(ddin, NULL, NULL, dg, dx, dw, N, I, O, 1.0f, 0.0f);
    check("matmul_bwd din only", ddin, rdin, (size_t)N * I, RED);
}

static void test_matmul_bf16(void **state)
{
    (void)state;
    NEED_GPU();
#ifdef SWIFT_HAVE_CUDA
    int N = 64, I = 256, O = 128;
    float *x = rnd((size_t)N * I, 1), *w = rnd((size_t)O * I, 1);
    float *ref = hkeep(calloc((size_t)N * O, sizeof(float)));
    float *dx = fdev(x, (size_t)N * I), *dw = fdev(w, (size_t)O * I),
          *dout = fdev(ref, (size_t)N * O);
    C->matmul_fwd(ref, x, w, NULL, N, I, O, 1.0f, 0.0f);
    swift_cuda_set_math(SWIFT_CUDA_MATH_BF16);
    G->matmul_fwd(dout, dx, dw, NULL, N, I, O, 1.0f, 0.0f);
    swift_cuda_set_math(SWIFT_CUDA_MATH_FP32);
    check("matmul_fwd bf16 compute", dout, ref, (size_t)N * O, 0, 2e-2);
#endif
}

static void test_embed(void **state)
{
    (void)state;
    NEED_GPU();
    int V = 50, Cc = 33, N = 40;
    int32_t tok[40];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 7) % 11; /* repeated ids: the backward adds */
    float *emb = rnd((size_t)V * Cc, 1), *out = hkeep(calloc((size_t)N * Cc, sizeof(float)));
    float *demb = fdev(emb, (size_t)V * Cc), *dout = fdev(out, (size_t)N * Cc);
    C->embed_fwd(out, tok, emb, N, Cc);
    G->embed_fwd(dout, tok, demb, N, Cc); /* host token ids are accepted */
    check("embed_fwd (host tokens)", dout, out, (size_t)N * Cc, EW);
    int32_t *dtok = dup_dev(tok, sizeof(tok));
    G->embed_fwd(dout, dtok, demb, N, Cc);
    check("embed_fwd (device tokens)", dout, out, (size_t)N * Cc, EW);
    float *g = rnd((size_t)N * Cc, 1), *gemb = rnd((size_t)V * Cc, 1);
    float *dgemb = fdev(gemb, (size_t)V * Cc), *dg = fdev(g, (size_t)N * Cc);
    C->embed_bwd(gemb, g, tok, N, Cc);
    G->embed_bwd(dgemb, dg, dtok, N, Cc);
    check("embed_bwd (+=)", dgemb, gemb, (size_t)V * Cc, RED);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    NEED_GPU();
    int N = 29, Cc = 1000;
    float *x = rnd((size_t)N * Cc, 2), *w = rnd(Cc, 1), *out = rnd((size_t)N * Cc, 1);
    float *rstd = rnd(N, 1);
    float *dx = fdev(x, (size_t)N * Cc), *dw = fdev(w, Cc), *dout = fdev(out, (size_t)N * Cc);
    float *drstd = fdev(rstd, N);
    C->rmsnorm_fwd(out, rstd, x, w, N, Cc, 1e-6f);
    G->rmsnorm_fwd(dout, drstd, dx, dw, N, Cc, 1e-6f);
    check("rmsnorm_fwd out", dout, out, (size_t)N * Cc, RED);
    check("rmsnorm_fwd rstd", drstd, rstd, N, RED);
    float *g = rnd((size_t)N * Cc, 1), *din = rnd((size_t)N * Cc, 1), *gw = rnd(Cc, 1);
    float *dg = fdev(g, (size_t)N * Cc), *ddin = fdev(din, (size_t)N * Cc), *dgw = fdev(gw, Cc);
    C->rmsnorm_bwd(din, gw, g, x, w, rstd, N, Cc);
    G->rmsnorm_bwd(ddin, dgw, dg, dx, dw, drstd, N, Cc);
    check("rmsnorm_bwd din (+=)", ddin, din, (size_t)N * Cc, RED);
    check("rmsnorm_bwd dw (+=)", dgw, gw, Cc, RED);
}

static void test_rope(void **state)
{
    (void)state;
    NEED_GPU();
    int N = 24, H = 3, D = 16;
    int32_t pos[24];
    for (int i = 0; i < N; i++)
        pos[i] = i < 10 ? i : i - 10; /* two documents */
    float inv[8];
    for (int d = 0; d < D / 2; d++)
        inv[d] = powf(10000.0f, -2.0f * d / D);
    float *x = rnd((size_t)N * H * D, 1), *dx = fdev(x, (size_t)N * H * D);
    C->rope_fwd(x, pos, inv, N, H, D);
    G->rope_fwd(dx, pos, inv, N, H, D); /* host pos and inv_freq */
    check("rope_fwd", dx, x, (size_t)N * H * D, EW);
    C->rope_bwd(x, pos, inv, N, H, D);
    G->rope_bwd(dx, pos, inv, N, H, D);
    check("rope_bwd", dx, x, (size_t)N * H * D, EW);
}

/* the attention path of the CUDA backend (SWIFT_CUDA_ATTN_*; nothing without CUDA) */
static void set_attn(int mode)
{
#ifdef SWIFT_HAVE_CUDA
    swift_cuda_set_attention(mode);
#else
    (void)mode;
#endif
}
enum { ATTN_AUTO = 0, ATTN_FLASH = 1, ATTN_CUBLAS = 2 }; /* = SWIFT_CUDA_ATTN_* */

static void test_attention(void **state)
{
    (void)state;
    NEED_GPU();
    set_attn(ATTN_CUBLAS);
    int B = 2, T = 19, NH = 4, NKV = 2, D = 8;
    size_t N = (size_t)B * T;
    int32_t pos[38];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) /* packed: documents of 7, 5 and 7 tokens in row 0 */
            pos[b * T + i] = b == 0 ? (i < 7 ? i : i < 12 ? i - 7 : i - 12) : i;
    float *q = rnd(N * NH * D, 1), *k = rnd(N * NKV * D, 1), *v = rnd(N * NKV * D, 1);
    float *out = hkeep(calloc(N * NH * D, sizeof(float)));
    float *probs = hkeep(calloc((size_t)B * NH * T * T, sizeof(float)));
    float *dq_ = fdev(q, N * NH * D), *dk_ = fdev(k, N * NKV * D), *dv_ = fdev(v, N * NKV * D);
    float *dout = fdev(out, N * NH * D), *dprobs = fdev(probs, (size_t)B * NH * T * T);
    C->attention_fwd(out, probs, q, k, v, pos, B, T, NH, NKV, D);
    G->attention_fwd(dout, dprobs, dq_, dk_, dv_, pos, B, T, NH, NKV, D);
    check("attention_fwd out", dout, out, N * NH * D, RED);
    check("attention_fwd probs (masked)", dprobs, probs, (size_t)B * NH * T * T, RED);
    float *g = rnd(N * NH * D, 1);
    float *gq = hkeep(calloc(N * NH * D, sizeof(float)));
    float *gk = hkeep(calloc(N * NKV * D, sizeof(float))), *gv = hkeep(calloc(N * NKV * D, 4));
    float *dg = fdev(g, N * NH * D), *dgq = fdev(gq, N * NH * D);
    float *dgk = fdev(rnd(N * NKV * D, 1), N * NKV * D),
          *dgv = fdev(rnd(N * NKV * D, 1), N * NKV * D);
    C->attention_bwd(gq, gk, gv, g, probs, q, k, v, pos, B, T, NH, NKV, D);
    G->attention_bwd(dgq, dgk, dgv, dg, dprobs, dq_, dk_, dv_, pos, B, T, NH, NKV, D);
    check("attention_bwd dq", dgq, gq, N * NH * D, RED);
    check("attention_bwd dk (written)", dgk, gk, N * NKV * D, RED);
    check("attention_bwd dv (written)", dgv, gv, N * NKV * D, RED);
    set_attn(ATTN_AUTO);
}

/* packed documents: lengths drawn from [1, maxdoc]; maxdoc >= T: one document per row */
static void packed_pos(int32_t *pos, int B, int T, int maxdoc)
{
    for (int b = 0; b < B; b++) {
        int p = 0, left = 0;
        for (int i = 0; i < T; i++) {
            if (left == 0) {
                rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
                left = maxdoc >= T ? T : 1 + (int)((rs >> 33) % (uint64_t)maxdoc);
                p = 0;
            }
            pos[(size_t)b * T + i] = p++;
            left--;
        }
    }
}

#define FLASH_TOL 1e-5, 2e-4

/* flash attention forward and backward against the CPU op on random inputs */
static void flash_case(const char *name, int B, int T, int NH, int NKV, int D, int maxdoc)
{
    size_t N = (size_t)B * T, nq = N * NH * D, nk = N * NKV * D, np = (size_t)B * NH * T * T;
    int32_t *pos = hkeep(malloc(N * sizeof(int32_t)));
    packed_pos(pos, B, T, maxdoc);
    float *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *g = rnd(nq, 1);
    float *out = hkeep(calloc(nq, sizeof(float))), *probs = hkeep(calloc(np, sizeof(float)));
    float *gq = hkeep(calloc(nq, sizeof(float))), *gk = hkeep(calloc(nk, sizeof(float)));
    float *gv = hkeep(calloc(nk, sizeof(float)));
    C->attention_fwd(out, probs, q, k, v, pos, B, T, NH, NKV, D);
    C->attention_bwd(gq, gk, gv, g, probs, q, k, v, pos, B, T, NH, NKV, D);

    float *dq_ = fdev(q, nq), *dk_ = fdev(k, nk), *dv_ = fdev(v, nk), *dg = fdev(g, nq);
    float *dout = fdev(rnd(nq, 1), nq), *dprobs = fdev(rnd(np, 1), np);
    float *dgq = fdev(rnd(nq, 1), nq), *dgk = fdev(rnd(nk, 1), nk), *dgv = fdev(rnd(nk, 1), nk);
    int32_t *dpos = dup_dev(pos, N * sizeof(int32_t)); /* device positions */
    char what[96];
    set_attn(ATTN_FLASH);
    G->attention_fwd(dout, dprobs, dq_, dk_, dv_, dpos, B, T, NH, NKV, D);
    G->attention_bwd(dgq, dgk, dgv, dg, dprobs, dq_, dk_, dv_, dpos, B, T, NH, NKV, D);
    set_attn(ATTN_AUTO);
    printf("# flash %s: B=%d T=%d NH=%d NKV=%d D=%d documents <= %d, %s\n",
           name,
           B,
           T,
           NH,
           NKV,
           D,
           maxdoc,
           T >= D + 1 ? "D_i from the saved out" : "D_i recomputed");
    snprintf(what, sizeof(what), "flash %s out", name);
    check(what, dout, out, nq, FLASH_TOL);
    snprintf(what, sizeof(what), "flash %s dq", name);
    check(what, dgq, gq, nq, FLASH_TOL);
    snprintf(what, sizeof(what), "flash %s dk (written)", name);
    check(what, dgk, gk, nk, FLASH_TOL);
    snprintf(what, sizeof(what), "flash %s dv (written)", name);
    check(what, dgv, gv, nk, FLASH_TOL);
}

static void test_flash_attention(void **state)
{
    (void)state;
    NEED_GPU();
    /* T not a multiple of the tiles (16 queries, 32 keys; 16 keys, 32 queries in backward) */
    flash_case("gqa14/2 d64 packed", 2, 77, 14, 2, 64, 20);
    flash_case("mha4/4 d64 packed", 2, 53, 4, 4, 64, 9);
    flash_case("gqa14/2 d64 one doc", 1, 70, 14, 2, 64, 1 << 20);
    flash_case("mha4/4 d128 packed", 2, 150, 4, 4, 128, 40);
    flash_case("gqa4/2 d128 short T", 2, 45, 4, 2, 128, 12);  /* T <= D: D_i recomputed */
    flash_case("gqa6/3 d80 packed", 1, 97, 6, 3, 80, 30);     /* generic path, D % 32 != 0 */
    flash_case("gqa4/1 d256 packed", 1, 300, 4, 1, 256, 100); /* > 48 KiB shared memory */
    flash_case("gqa2/1 d32 T=1", 3, 1, 2, 1, 32, 1);
}

/* flash against the cuBLAS path on the same device inputs, and determinism */
static void test_flash_vs_cublas(void **state)
{
    (void)state;
    NEED_GPU();
    int B = 2, T = 200, NH = 14, NKV = 2, D = 64;
    size_t N = (size_t)B * T, nq = N * NH * D, nk = N * NKV * D, np = (size_t)B * NH * T * T;
    int32_t *pos = hkeep(malloc(N * sizeof(int32_t)));
    packed_pos(pos, B, T, 60);
    float *dq_ = fdev(rnd(nq, 1), nq), *dk_ = fdev(rnd(nk, 1), nk), *dv_ = fdev(rnd(nk, 1), nk);
    float *dg = fdev(rnd(nq, 1), nq);
    float *o[2], *p[2], *gq[2], *gk[2], *gv[2];
    for (int m = 0; m < 2; m++) {
        o[m] = fdev(rnd(nq, 1), nq);
        p[m] = fdev(rnd(np, 1), np);
        gq[m] = fdev(rnd(nq, 1), nq);
        gk[m] = fdev(rnd(nk, 1), nk);
        gv[m] = fdev(rnd(nk, 1), nk);
        set_attn(m == 0 ? ATTN_CUBLAS : ATTN_FLASH);
        G->attention_fwd(o[m], p[m], dq_, dk_, dv_, pos, B, T, NH, NKV, D);
        G->attention_bwd(gq[m], gk[m], gv[m], dg, p[m], dq_, dk_, dv_, pos, B, T, NH, NKV, D);
    }
    float *ref[4];
    const float *dev[4][2] = {{o[0], o[1]}, {gq[0], gq[1]}, {gk[0], gk[1]}, {gv[0], gv[1]}};
    size_t n[4] = {nq, nq, nk, nk};
    const char *names[4] = {
        "flash vs cublas out", "flash vs cublas dq", "flash vs cublas dk", "flash vs cublas dv"};
    for (int t = 0; t < 4; t++) {
        ref[t] = hkeep(malloc(n[t] * sizeof(float)));
        G->download(ref[t], dev[t][0], n[t] * sizeof(float));
        check(names[t], dev[t][1], ref[t], n[t], FLASH_TOL);
    }
    /* the same backward again: bit-identical (fixed reduction order, no atomics) */
    float *a = hkeep(malloc(nk * sizeof(float))), *b2 = hkeep(malloc(nk * sizeof(float)));
    float *a2 = hkeep(malloc(nq * sizeof(float))), *b3 = hkeep(malloc(nq * sizeof(float)));
    G->download(a, gk[1], nk * sizeof(float));
    G->download(a2, gq[1], nq * sizeof(float));
    G->attention_bwd(gq[1], gk[1], gv[1], dg, p[1], dq_, dk_, dv_, pos, B, T, NH, NKV, D);
    set_attn(ATTN_AUTO);
    G->download(b2, gk[1], nk * sizeof(float));
    G->download(b3, gq[1], nq * sizeof(float));
    assert_memory_equal(a, b2, nk * sizeof(float));
    assert_memory_equal(a2, b3, nq * sizeof(float));
    printf("# flash backward twice: dk and dq bit-identical\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* flash vs cuBLAS attention on the Qwen2.5-0.5B shape (T=1024, NH=14, NKV=2, D=64), batch 4,
 * one document per row and packed documents of up to 256 tokens; median of 5 timed runs after
 * one warm-up; the two paths' outputs must agree. A few seconds at most. */
static void test_attention_timing(void **state)
{
    (void)state;
    NEED_GPU();
    int B = 4, T = 1024, NH = 14, NKV = 2, D = 64;
    size_t N = (size_t)B * T, nq = N * NH * D, nk = N * NKV * D, np = (size_t)B * NH * T * T;
    float *dq_ = fdev(rnd(nq, 1), nq), *dk_ = fdev(rnd(nk, 1), nk), *dv_ = fdev(rnd(nk, 1), nk);
    float *dg = fdev(rnd(nq, 1), nq), *probs = G->alloc(np * sizeof(float));
    assert_non_null(probs);
    dbufs[nd++] = probs;
    float *o = G->alloc(nq * sizeof(float)), *gq = G->alloc(nq * sizeof(float));
    float *gk = G->alloc(nk * sizeof(float)), *gv = G->alloc(nk * sizeof(float));
    assert_true(o && gq && gk && gv);
    dbufs[nd++] = o;
    dbufs[nd++] = gq;
    dbufs[nd++] = gk;
    dbufs[nd++] = gv;
    float *href = hkeep(malloc(nq * sizeof(float)));
    int32_t *pos = hkeep(malloc(N * sizeof(int32_t)));
    for (int packed = 0; packed < 2; packed++) {
        packed_pos(pos, B, T, packed ? 256 : 1 << 20);
        double ms[2][2];
        for (int m = 0; m < 2; m++) {
            set_attn(m == 0 ? ATTN_CUBLAS : ATTN_FLASH);
            double f[5], fb[5];
            for (int it = -1; it < 5; it++) {
                G->sync();
                double t0 = now_ms();
                G->attention_fwd(o, probs, dq_, dk_, dv_, pos, B, T, NH, NKV, D);
                G->sync();
                double t1 = now_ms();
                G->attention_bwd(gq, gk, gv, dg, probs, dq_, dk_, dv_, pos, B, T, NH, NKV, D);
                G->sync();
                double t2 = now_ms();
                if (it >= 0) {
                    f[it] = t1 - t0;
                    fb[it] = t2 - t1;
                }
            }
            for (int x = 0; x < 5; x++) /* sort for the median */
                for (int y = x + 1; y < 5; y++) {
                    if (f[y] < f[x]) {
                        double t = f[x];
                        f[x] = f[y];
                        f[y] = t;
                    }
                    if (fb[y] < fb[x]) {
                        double t = fb[x];
                        fb[x] = fb[y];
                        fb[y] = t;
                    }
                }
            ms[m][0] = f[2];
            ms[m][1] = fb[2];
            if (m == 0)
                G->download(href, o, nq * sizeof(float));
            else
                check(packed ? "timing shape packed: flash vs cublas out"
                             : "timing shape: flash vs cublas out",
                      o,
                      href,
                      nq,
                      FLASH_TOL);
        }
        set_attn(ATTN_AUTO);
        printf("# attention timing B=%d T=%d NH=%d NKV=%d D=%d %s: cublas fwd %.3f ms bwd %.3f "
               "ms; flash fwd %.3f ms bwd %.3f ms; flash speedup fwd %.2fx bwd %.2fx\n",
               B,
               T,
               NH,
               NKV,
               D,
               packed ? "packed<=256" : "one-doc",
               ms[0][0],
               ms[0][1],
               ms[1][0],
               ms[1][1],
               ms[0][0] / ms[1][0],
               ms[0][1] / ms[1][1]);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = 100003;
    float *a = rnd(n, 4), *b = rnd(n, 4), *out = hkeep(calloc(n, sizeof(float)));
    float *da = fdev(a, n), *db = fdev(b, n), *dout = fdev(out, n);
    C->swiglu_fwd(out, a, b, n);
    G->swiglu_fwd(dout, da, db, n);
    check("swiglu_fwd", dout, out, n, EW);
    float *g = rnd(n, 1), *ga = hkeep(calloc(n, 4)), *gb = hkeep(calloc(n, 4));
    float *dg = fdev(g, n), *dga = fdev(ga, n), *dgb = fdev(gb, n);
    C->swiglu_bwd(ga, gb, g, a, b, n);
    G->swiglu_bwd(dga, dgb, dg, da, db, n);
    check("swiglu_bwd dgate", dga, ga, n, EW);
    check("swiglu_bwd dup", dgb, gb, n, EW);
    C->add(out, a, b, n);
    G->add(dout, da, db, n);
    check("add", dout, out, n, EW);
    C->add(a, a, b, n); /* aliasing */
    G->add(da, da, db, n);
    check("add (out aliases a)", da, a, n, EW);
    C->scale(a, -0.37f, n);
    G->scale(da, -0.37f, n);
    check("scale", da, a, n, EW);
    double sc = C->sumsq(a, n), sg = G->sumsq(da, n);
    printf("# sumsq cpu %.17g cuda %.17g\n", sc, sg);
    assert_true(fabs(sc - sg) <= 1e-9 * sc);
    assert_true(G->sumsq(da, 0) == 0.0);
}

static void test_dropout(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = 50001;
    float *x = rnd(n, 1), *out = hkeep(calloc(n, 4));
    uint8_t *mask = hkeep(calloc(n, 1)), *gmask = hkeep(calloc(n, 1));
    float *dx = fdev(x, n), *dout = fdev(out, n);
    uint8_t *dmask = dup_dev(mask, n);
    C->dropout_fwd(out, mask, x, n, 0.1f, 0xdeadbeefULL);
    G->dropout_fwd(dout, dmask, dx, n, 0.1f, 0xdeadbeefULL);
    G->download(gmask, dmask, n);
    assert_memory_equal(mask, gmask, n);
    check("dropout_fwd", dout, out, n, EW);
    float *g = rnd(n, 1), *din = rnd(n, 1), *ddin = fdev(din, n), *dg = fdev(g, n);
    C->dropout_bwd(din, g, mask, n, 0.1f);
    G->dropout_bwd(ddin, dg, dmask, n, 0.1f);
    check("dropout_bwd (+=)", ddin, din, n, EW);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    NEED_GPU();
    int N = 33, V = 3001;
    int32_t tgt[33];
    for (int i = 0; i < N; i++)
        tgt[i] = i % 4 == 0 ? -1 : (i * 97) % V;
    float *logits = rnd((size_t)N * V, 8);
    logits[(size_t)1 * V + tgt[1]] = 50; /* one row whose argmax is its target */
    float *dl = fdev(logits, (size_t)N * V);
    double lc = 0, lg = 0;
    long cc = 0, cg = 0, okc = 0, okg = 0;
    C->cross_entropy(NULL, &lc, &cc, &okc, logits, tgt, N, V, 0);
    G->cross_entropy(NULL, &lg, &cg, &okg, dl, tgt, N, V, 0);
    assert_int_equal(cc, cg);
    assert_int_equal(okc, okg);
    assert_true(okc >= 1);
    printf(
        "# cross_entropy loss cpu %.12g cuda %.12g, %ld trained, %ld correct\n", lc, lg, cc, okc);
    assert_true(fabs(lc - lg) <= 1e-6 * fabs(lc));
    /* gradient in place (dlogits aliases logits) */
    lc = lg = 0;
    C->cross_entropy(logits, &lc, &cc, &okc, logits, tgt, N, V, 0.125f);
    G->cross_entropy(dl, &lg, &cg, &okg, dl, tgt, N, V, 0.125f);
    assert_true(fabs(lc - lg) <= 1e-6 * fabs(lc));
    check("cross_entropy dlogits (aliased)", dl, logits, (size_t)N * V, 1e-7, 1e-5);
}

static void test_adamw(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = 4099;
    float *p = rnd(n, 1), *g = rnd(n, 1), *m = rnd(n, 0.1f), *v = rnd(n, 0.1f);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *dp = fdev(p, n), *dg = fdev(g, n), *dm = fdev(m, n), *dv = fdev(v, n);
    for (int step = 1; step <= 3; step++) {
        float bc1 = 1 - powf(0.9f, (float)step), bc2 = 1 - powf(0.95f, (float)step);
        C->adamw(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
        G->adamw(dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
    }
    check("adamw p", dp, p, n, EW);
    check("adamw m", dm, m, n, EW);
    check("adamw v", dv, v, n, EW);
}

static void test_memory_ops(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = 1000;
    float *a = rnd(n, 1), *z = hkeep(calloc(n, 4));
    float *da = fdev(a, n), *db = G->alloc(n * sizeof(float));
    assert_non_null(db);
    if (nd < 512)
        dbufs[nd++] = db;
    check("alloc is zeroed", db, z, n, 0, 0);
    G->copy(db, da, n);
    check("copy", db, a, n, 0, 0);
    G->zero(db, n);
    check("zero", db, z, n, 0, 0);
    G->sync();
}

/* the shape both whole-model cases use: hidden 64, 2 layers, GQA 4/2, head_dim 16, vocab 211 */
static struct swift_model_config tiny_config(const char *model_type)
{
    struct swift_model_config c;
    memset(&c, 0, sizeof(c));
    snprintf(c.model_type, sizeof(c.model_type), "%s", model_type);
    snprintf(c.dtype, sizeof(c.dtype), "float32");
    c.vocab_size = 211;
    c.hidden_size = 64;
    c.intermediate_size = 160;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 128;
    c.rms_norm_eps = 1e-6f;
    c.rope_theta = 10000;
    return c;
}

/* a tiny Qwen2-shaped model (qkv bias, GQA, tied embeddings) on both backends */
static void test_model(void **state)
{
    (void)state;
    NEED_GPU();
    struct swift_model_config c = tiny_config("qwen2");
    c.qkv_bias = 1;
    c.tie_embeddings = 1;
    struct swift_model mc, mg;
    assert_int_equal(swift_model_init_random(&mc, &c, C, 5), 0);
    assert_int_equal(swift_model_init_random(&mg, &c, G, 5), 0);
    int B = 2, T = 32;
    assert_int_equal(swift_model_reserve(&mc, B, T), 0);
    assert_int_equal(swift_model_reserve(&mg, B, T), 0);
    int32_t tok[64], tgt[64], pos[64];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 31 + 7) % c.vocab_size;
        tgt[i] = i % 5 == 0 ? -1 : (i * 17 + 3) % c.vocab_size;
        pos[i] = i % T < 20 ? i % T : i % T - 20; /* two documents in each row */
    }
    struct swift_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    swift_model_zero_grad(&mc);
    swift_model_zero_grad(&mg);
    struct swift_loss lc = {0}, lg = {0};
    assert_int_equal(swift_model_forward(&mc, &b, &lc, 1.0f / 51), 0);
    assert_int_equal(swift_model_forward(&mg, &b, &lg, 1.0f / 51), 0);
    printf("# model loss cpu %.9g cuda %.9g over %ld tokens\n", lc.sum, lg.sum, lc.count);
    assert_int_equal(lc.count, lg.count);
    assert_true(fabs(lc.sum - lg.sum) <= 1e-4 * fabs(lc.sum));
    swift_model_backward(&mc, &b);
    swift_model_backward(&mg, &b);
    G->sync();
    for (int i = 0; i < mc.np; i++) {
        assert_string_equal(mc.p[i].name, mg.p[i].name);
        check(mc.p[i].name, mg.p[i].g, mc.p[i].g, mc.p[i].numel, 1e-6, 2e-3);
    }
    swift_model_free(&mc);
    swift_model_free(&mg);
}

/* swift-eval's key/value cache ops: the scatter of new keys into cache slots, the gather of
 * wanted rows (host and device index arrays), and the cached attention over rows of different
 * lengths with grouped kv heads */
static void test_kv_cache_ops(void **state)
{
    (void)state;
    NEED_GPU();
    int rows = 3, cap = 21, NH = 6, NKV = 2, D = 24, N = 7;
    size_t KD = (size_t)NKV * D, cache = (size_t)rows * cap * KD;
    float *kc = rnd(cache, 1), *vc = rnd(cache, 1), *q = rnd((size_t)N * NH * D, 1);
    float *newk = rnd((size_t)N * KD, 1);
    int32_t pos[7] = {0, 5, 20, 3, 4, 9, 1}, row[7] = {0, 1, 2, 2, 0, 1, 1};
    int32_t slot[7], sel[4] = {6, 0, 3, 3};
    for (int i = 0; i < N; i++)
        slot[i] = row[i] * cap + pos[i];
    float *dkc = fdev(kc, cache), *dvc = fdev(vc, cache), *dq = fdev(q, (size_t)N * NH * D);
    float *dnew = fdev(newk, (size_t)N * KD);
    C->copy_rows(kc, slot, newk, NULL, N, (int)KD);
    G->copy_rows(dkc, slot, dnew, NULL, N, (int)KD); /* host indices */
    check("copy_rows scatter (host idx)", dkc, kc, cache, 0, 0);
    float *g = hkeep(calloc(4 * KD, sizeof(float))), *dg = fdev(g, 4 * KD);
    int32_t *dsel = dup_dev(sel, sizeof(sel));
    C->copy_rows(g, NULL, kc, sel, 4, (int)KD);
    G->copy_rows(dg, NULL, dkc, dsel, 4, (int)KD); /* device indices */
    check("copy_rows gather (device idx)", dg, g, 4 * KD, 0, 0);
    float *out = hkeep(calloc((size_t)N * NH * D, sizeof(float)));
    float *dout = fdev(out, (size_t)N * NH * D);
    C->attention_cached(out, q, kc, vc, pos, row, (size_t)cap * KD, N, NH, NKV, D);
    G->attention_cached(dout, dq, dkc, dvc, pos, row, (size_t)cap * KD, N, NH, NKV, D);
    check("attention_cached", dout, out, (size_t)N * NH * D, RED);
    /* head_dim 128 (the 0.5B shape): more threads than a warp */
    int D2 = 128, N2 = 3;
    size_t KD2 = (size_t)NKV * D2, cache2 = (size_t)rows * cap * KD2;
    float *kc2 = rnd(cache2, 1), *vc2 = rnd(cache2, 1), *q2 = rnd((size_t)N2 * NH * D2, 1);
    float *o2 = hkeep(calloc((size_t)N2 * NH * D2, sizeof(float)));
    float *do2 = fdev(o2, (size_t)N2 * NH * D2);
    C->attention_cached(o2, q2, kc2, vc2, pos, row, (size_t)cap * KD2, N2, NH, NKV, D2);
    G->attention_cached(do2,
                        fdev(q2, (size_t)N2 * NH * D2),
                        fdev(kc2, cache2),
                        fdev(vc2, cache2),
                        pos,
                        row,
                        (size_t)cap * KD2,
                        N2,
                        NH,
                        NKV,
                        D2);
    check("attention_cached D=128", do2, o2, (size_t)N2 * NH * D2, RED);
}

/* The whole key/value-cache forward (lib/eval/kv.h) on a random model: prefill of three rows,
 * a forked row (swift_kv_copy_row) and decode steps; logits of both backends compared. */
static void test_kv_model(void **state)
{
    (void)state;
    NEED_GPU();
    struct swift_model_config c = tiny_config("qwen3");
    c.qk_norm = 1;
    struct swift_model mc, mg;
    assert_int_equal(swift_model_init_random(&mc, &c, C, 9), 0);
    assert_int_equal(swift_model_init_random(&mg, &c, G, 9), 0);
    struct swift_kv kc, kg;
    assert_int_equal(swift_kv_init(&kc, &mc, 4, 40, 24), 0);
    assert_int_equal(swift_kv_init(&kg, &mg, 4, 40, 24), 0);
    int V = c.vocab_size;
    float *lc = hkeep(malloc((size_t)24 * V * sizeof(float)));
    float *lg = hkeep(malloc((size_t)24 * V * sizeof(float)));
    int32_t tok[24];
    int rowof[24], want[24];
    for (int i = 0; i < 21; i++) {
        tok[i] = (i * 31 + 7) % V;
        rowof[i] = i < 10 ? 0 : i < 16 ? 1 : 2;
        want[i] = i;
    }
    assert_int_equal(swift_kv_forward(&kc, tok, rowof, 21, want, 21, lc), 0);
    assert_int_equal(swift_kv_forward(&kg, tok, rowof, 21, want, 21, lg), 0);
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < (size_t)21 * V; i++) {
        maxref = fmax(maxref, fabs(lc[i]));
        maxerr = fmax(maxerr, fabs((double)lc[i] - lg[i]));
    }
    swift_kv_copy_row(&kc, 3, 1);
    swift_kv_copy_row(&kg, 3, 1);
    for (int step = 0; step < 6; step++) {
        for (int i = 0; i < 4; i++) {
            tok[i] = (step * 17 + i * 5 + 1) % V;
            rowof[i] = i;
            want[i] = 3 - i; /* logits out of token order */
        }
        assert_int_equal(swift_kv_forward(&kc, tok, rowof, 4, want, 4, lc), 0);
        assert_int_equal(swift_kv_forward(&kg, tok, rowof, 4, want, 4, lg), 0);
        for (size_t i = 0; i < (size_t)4 * V; i++) {
            maxref = fmax(maxref, fabs(lc[i]));
            maxerr = fmax(maxerr, fabs((double)lc[i] - lg[i]));
        }
    }
    printf("# kv forward logits: max|err| %.3g (bound %.3g, max|ref| %.3g)\n",
           maxerr,
           1e-5 + 1e-4 * maxref,
           maxref);
    assert_true(maxerr <= 1e-5 + 1e-4 * maxref);
    swift_kv_release(&kc);
    swift_kv_release(&kg);
    swift_model_free(&mc);
    swift_model_free(&mg);
}

static int group_setup(void **state)
{
    (void)state;
    struct swift_device_info info[4];
    char why[256];
    int n = swift_device_query(info, 4, why, sizeof(why));
    if (n <= 0) {
        printf("# no GPU: %s (every case skips)\n", why);
        return 0;
    }
#ifdef SWIFT_HAVE_CUDA
    if (swift_cuda_init(0) == 0) {
        swift_cuda_set_math(SWIFT_CUDA_MATH_FP32);
        G = &swift_cuda_ops;
        printf("# GPU: %s (cc %d.%d)\n", info[0].name, info[0].cc_major, info[0].cc_minor);
    }
#endif
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_memory_ops, release_all),
        cmocka_unit_test_teardown(test_matmul, release_all),
        cmocka_unit_test_teardown(test_matmul_bf16, release_all),
        cmocka_unit_test_teardown(test_embed, release_all),
        cmocka_unit_test_teardown(test_rmsnorm, release_all),
        cmocka_unit_test_teardown(test_rope, release_all),
        cmocka_unit_test_teardown(test_attention, release_all),
        cmocka_unit_test_teardown(test_flash_attention, release_all),
        cmocka_unit_test_teardown(test_flash_vs_cublas, release_all),
        cmocka_unit_test_teardown(test_attention_timing, release_all),
        cmocka_unit_test_teardown(test_elementwise, release_all),
        cmocka_unit_test_teardown(test_dropout, release_all),
        cmocka_unit_test_teardown(test_cross_entropy, release_all),
        cmocka_unit_test_teardown(test_adamw, release_all),
        cmocka_unit_test_teardown(test_model, release_all),
        cmocka_unit_test_teardown(test_kv_cache_ops, release_all),
        cmocka_unit_test_teardown(test_kv_model, release_all),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
