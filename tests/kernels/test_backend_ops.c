/* Every op of the table (kernels/ops.h) on every backend present, against the CPU op: one
 * table-driven harness in the spirit of ggml's test-backend-ops. Backends: cpu (swift_cpu_ops, the
 * specification), strict (swift_cpu_strict_ops: the CPU math with host access to its memory
 * forbidden) and cuda (swift_cuda_ops, when a GPU is present). It needs kernels/ only; the checks
 * that need lib/ (backend selection, whole models) and the strict table's host-access faults are
 * in tests/unit/test_backend.c.
 *
 * An op family is one function that generates a row's inputs, runs the forward and the backward
 * op(s) and checks properties. A row of `cases` is a family with shapes, parameters and a stated
 * tolerance, used one of two ways:
 * - FWD, BWD or BOTH, on every backend but the CPU: inputs are generated once, the row runs on the
 *   CPU (the reference) and on the backend, and the outputs are downloaded and compared: strict
 *   bit for bit (its results are swift_cpu_ops' bits); cuda (matmuls in exact fp32 unless the row
 *   says BF16: then every backend, the CPU reference too, runs set_matmul_math bf16) within max
 * |cuda - cpu| <= atol + rtol * max |cpu| over each tensor, results in double within srtol * |cpu|,
 * counts, masks and copies identical. The CUBLAS row compares attention probs; the FLASH rows cover
 * packed documents, GQA and MHA, T not a multiple of the tiles and both D_i paths; VS_CUBLAS rows
 * take cuda's cuBLAS attention path as the reference on cuda (and check that the flash backward run
 * twice is bit-identical); TIMED rows (cuda only) print flash vs cuBLAS times on the Qwen2.5-0.5B
 * attention shape for tests/gpu/run.sh.
 * - GRAD, on the host-math backends (cpu, strict): each gradient of the backward against central
 *   finite differences of the forward (L = sum(out * R) for a fixed random R), in float32 with
 *   h = 1e-2, max |analytic - numeric| / max |numeric| < 1e-3; then the family's properties
 *   (block-diagonal attention, untrained cross-entropy rows, dropout's mask, rate and backward,
 *   AdamW against torch's formula in double). The CUDA backward ops are held to the CPU's above.
 * Each backend's memory ops (alloc zeroed, copy, zero) are checked too, and, in CUDA builds even
 * without a GPU, that the cuda table has the QLoRA, DoRA and 8-bit AdamW ops. Without a GPU (or
 * built with CUDA=0) every other cuda case is a visible cmocka skip. */
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
#ifdef SWIFT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

enum { CPU, STRICT, CUDA, NBE };
static struct {
    const char *name;
    const struct swift_ops *ops; /* NULL: not present, its cases skip */
} be[NBE] = {{"cpu", &swift_cpu_ops}, {"strict", &swift_cpu_strict_ops}, {"cuda", NULL}};

static uint64_t rs;
static uint64_t rnext(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return rs;
}
static float frand(void)
{
    return (float)((rnext() >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* host buffers and backend buffers of a case, freed by its teardown */
#define MAXBUF 1024
static void *hbuf[MAXBUF];
static struct {
    const struct swift_ops *o;
    void *p;
} dbuf[MAXBUF];
static int nh, nd;

static void *hnew(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    assert_true(nh < MAXBUF);
    return hbuf[nh++] = p;
}
static void *dnew(const struct swift_ops *o, size_t bytes)
{
    void *p = o->alloc(bytes);
    assert_non_null(p);
    assert_true(nd < MAXBUF);
    dbuf[nd].o = o;
    dbuf[nd++].p = p;
    return p;
}
static void *dup_dev(const struct swift_ops *o, const void *h, size_t bytes)
{
    void *d = dnew(o, bytes);
    o->upload(d, h, bytes);
    return d;
}
static void *download(const struct swift_ops *o, const void *d, size_t bytes)
{
    void *h = hnew(bytes);
    o->download(h, d, bytes);
    return h;
}
static float *rnd(size_t n, float scale)
{
    float *x = hnew(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}
static int release_all(void **state)
{
    (void)state;
    while (nh > 0)
        free(hbuf[--nh]);
    while (nd > 0) {
        nd--;
        dbuf[nd].o->free(dbuf[nd].p);
    }
    return 0;
}

/* got against ref: bit for bit (exact), or max |got - ref| <= atol + rtol * max |ref| */
static void compare(const char *what, const float *got, const float *ref, size_t n, int exact,
                    double atol, double rtol)
{
    if (exact) {
        size_t at = 0;
        while (at < n && !memcmp(&got[at], &ref[at], sizeof(float)))
            at++;
        printf("# %-44s n=%-8zu %s\n", what, n, at == n ? "bit-identical" : "differs");
        if (at < n)
            fail_msg("%s: element %zu: %.9g, cpu %.9g", what, at, got[at], ref[at]);
        return;
    }
    double maxref = 0, maxerr = 0, bound;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= maxerr)) { /* NaN counts */
            maxerr = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    bound = atol + rtol * maxref;
    printf("# %-44s n=%-8zu max|err| %.3g (bound %.3g, max|ref| %.3g)\n",
           what,
           n,
           maxerr,
           bound,
           maxref);
    if (!(maxerr <= bound))
        fail_msg("%s: element %zu: %.9g, cpu %.9g", what, at, (double)got[at], (double)ref[at]);
}

/* ---- the tensors of a case ---- */

/* F32, I32_DEV and U8 (dropout masks) live in backend memory; F32_HOST and I32_HOST stay in host
 * memory (ops accept RoPE's inv_freq and the int32 index arrays there) */
enum { F32, F32_HOST, I32_HOST, I32_DEV, U8 };
/* what a row runs (and so which outputs it compares); modes of the CUDA backend; VS_CUBLAS: the
 * reference on cuda is its cuBLAS attention path; TIMED: cuda only, timed */
enum { FWD = 1, BWD = 2, BOTH = 3, GRAD = 4 };
enum { BF16 = 8, FLASH = 16, CUBLAS = 32, VS_CUBLAS = 128, TIMED = 256 };
/* a tensor's role: input (0), an output of the forward (OF) or the backward (OB), EXACT: compared
 * bit for bit on every backend */
enum { IN = 0, OF = FWD, OB = BWD, EXACT = 64 };
#define MAXT 12
struct tensor {
    const char *name;
    int kind, role;
    size_t n;
    void *h; /* the generated data */
    void *d; /* what the op gets: a backend copy, or h itself for the host kinds */
};
struct test_case {
    const char *name;
    const struct family *f;
    int what;                 /* FWD, BWD, BOTH or GRAD, | cuda modes, VS_CUBLAS, TIMED */
    long sh[6];               /* shape and integer parameters, as the generator reads them */
    float a[4];               /* float parameters */
    const char *docs;         /* packed documents (attention, rope): "7,5,7/19" */
    double atol, rtol, srtol; /* cuda: tensors atol + rtol * max|ref|; scalars srtol * |ref| */
};
struct inst {
    const struct test_case *c;
    struct tensor t[MAXT];
    int nt;
    /* results in host memory (sums in double, counts), compared like tensors */
    double s[4];
    long l[4];
    const char *sname[4], *lname[4];
    int ns, nl;
};
static struct inst inst;

#define SH(i) (in->c->sh[i])
#define A(i) (in->c->a[i])
#define F(i) ((float *)in->t[i].d)
#define IDX(i) ((const int32_t *)in->t[i].d)
#define U8P(i) ((uint8_t *)in->t[i].d)
/* the starting value of an accumulated (+=) output: random, zero for finite differences */
#define ACC (in->c->what & GRAD ? 0.0f : 1.0f)

static size_t tbytes(const struct tensor *t)
{
    return t->n * (t->kind == U8 ? 1 : 4);
}
static int on_host(const struct tensor *t)
{
    return t->kind == F32_HOST || t->kind == I32_HOST;
}
static void *tdecl(struct inst *in, const char *name, int kind, size_t n, int role)
{
    assert_true(in->nt < MAXT);
    struct tensor *t = &in->t[in->nt++];
    t->name = name;
    t->kind = kind;
    t->n = n;
    t->role = role;
    t->h = hnew(tbytes(t));
    return t->h;
}
/* a float tensor in backend memory, uniform in [-scale, scale] (0: zeros) */
static float *tf(struct inst *in, const char *name, size_t n, float scale, int role)
{
    float *x = tdecl(in, name, F32, n, role);
    for (size_t i = 0; i < n && scale != 0; i++)
        x[i] = frand() * scale;
    return x;
}
static int32_t *ti(struct inst *in, const char *name, int kind, size_t n)
{
    return tdecl(in, name, kind, n, IN);
}
static void put_s(struct inst *in, const char *name, double v)
{
    if (in->ns < 4) {
        in->sname[in->ns] = name;
        in->s[in->ns++] = v;
    }
}
static void put_l(struct inst *in, const char *name, long v)
{
    if (in->nl < 4) {
        in->lname[in->nl] = name;
        in->l[in->nl++] = v;
    }
}
/* positions of packed documents given as their lengths, "7,5,7/19" (a '/' starts the next row,
 * for the reader); NULL: random lengths in [1, maxdoc], maxdoc >= T: one document per row */
static void doc_pos(int32_t *pos, int B, int T, const char *docs, int maxdoc)
{
    int i = 0, n = B * T;
    for (const char *s = docs; s && *s && i < n;) {
        char *end;
        long len = strtol(s, &end, 10);
        for (long p = 0; p < len && i < n; p++)
            pos[i++] = (int32_t)p;
        s = *end ? end + 1 : end;
    }
    for (int b = 0; !docs && b < B; b++)
        for (int t = 0, left = 0, p = 0; t < T; t++, left--) {
            if (left == 0) {
                left = maxdoc >= T ? T : 1 + (int)((rnext() >> 33) % (uint64_t)maxdoc);
                p = 0;
            }
            pos[i++] = p++;
        }
    assert_int_equal(i, n);
}

/* ---- op families ----
 * One function per family does a step: GEN declares the tensors (in the order the ops read them)
 * and fills them, FWD and BWD call the ops on backend o, CHECK asserts the family's properties
 * (GRAD rows). */
enum { GEN, CHECK = 8 }; /* and FWD, BWD */

/* matmul: sh N, I, O, with bias (and dw, db); a alpha, beta, backward alpha, din_beta */
static void matmul(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), I = SH(1), O = SH(2), b = SH(3);
    if (step == GEN) {
        tf(in, "x", (size_t)N * I, 1, IN);
        tf(in, "w", (size_t)O * I, 1, IN);
        tf(in, "bias", O, 1, IN);
        tf(in, "out", (size_t)N * O, 1, OF);
        tf(in, "dout", (size_t)N * O, 1, IN);
        tf(in, "din", (size_t)N * I, 1, OB);
        tf(in, "dw (+=)", (size_t)O * I, ACC, b ? OB : IN);
        tf(in, "db (+=)", O, ACC, b ? OB : IN);
    } else if (step == FWD) {
        o->matmul_fwd(F(3), F(0), F(1), b ? F(2) : NULL, N, I, O, A(0), A(1));
    } else if (step == BWD) {
        float *dw = b ? F(6) : NULL, *db = b ? F(7) : NULL;
        o->matmul_bwd(F(5), dw, db, F(4), F(0), F(1), N, I, O, A(2), A(3));
    }
}

/* matmul4, QLoRA's frozen 4-bit base (kernels/quant4.h): sh N, I, O, type (SWIFT_Q4_NF4 or
 * _FP4), double quantization, bias?; a beta, din_beta. A random weight quantized on the host
 * (swift_q4_quantize, the format's reference); its arrays are inputs in backend memory, offset a
 * host float. Backends compare out and din (the op has no weight gradient: frozen). */
static void matmul4(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), I = SH(1), O = SH(2), dq = SH(4);
    size_t n = (size_t)O * I, nb = swift_q4_nblocks(n);
    struct swift_q4 q = {.type = SH(3), .dq = dq, .n = n};
    if (step == GEN) {
        tf(in, "x", (size_t)N * I, 1, IN);
        const float *w = rnd(n, 1);
        q.codes = tdecl(in, "codes", U8, (n + 1) / 2, IN);
        q.absmax = tdecl(in, "absmax", F32, nb, IN);
        q.qabsmax = tdecl(in, "qabsmax", U8, nb, IN);
        q.absmax2 = tdecl(in, "absmax2", F32, swift_q4_nblocks2(n), IN);
        assert_int_equal(swift_q4_quantize(&q, w), 0);
        *(float *)tdecl(in, "offset", F32_HOST, 1, IN) = q.offset;
        tf(in, "bias", O, 1, IN);
        tf(in, "out", (size_t)N * O, 1, OF);
        tf(in, "dout", (size_t)N * O, 1, IN);
        tf(in, "din", (size_t)N * I, 1, OB);
        return;
    }
    q.codes = U8P(1);
    q.absmax = dq ? NULL : F(2);
    q.qabsmax = dq ? U8P(3) : NULL;
    q.absmax2 = dq ? F(4) : NULL;
    q.offset = F(5)[0];
    if (step == FWD)
        o->matmul4_fwd(F(7), F(0), &q, SH(5) ? F(6) : NULL, N, I, O, A(0));
    else if (step == BWD)
        o->matmul4_bwd(F(9), F(8), &q, N, I, O, A(1));
}

/* embedding: sh V, C, N, tokens in device memory; repeated ids (the backward adds) */
static void embed(struct inst *in, const struct swift_ops *o, int step)
{
    int V = SH(0), C = SH(1), N = SH(2);
    if (step == GEN) {
        int32_t *tok = ti(in, "tok", SH(3) ? I32_DEV : I32_HOST, N);
        for (int i = 0; i < N; i++)
            tok[i] = i * 7 % 11 % V;
        tf(in, "emb", (size_t)V * C, 1, IN);
        tf(in, "out", (size_t)N * C, 0, OF);
        tf(in, "dout", (size_t)N * C, 1, IN);
        tf(in, "demb (+=)", (size_t)V * C, ACC, OB);
    } else if (step == FWD) {
        o->embed_fwd(F(2), IDX(0), F(1), N, C);
    } else if (step == BWD) {
        o->embed_bwd(F(4), F(3), IDX(0), N, C);
    }
}

/* rmsnorm (the backward after the forward: rstd): sh N, C; a eps, scale of x */
static void rmsnorm(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), C = SH(1);
    if (step == GEN) {
        tf(in, "x", (size_t)N * C, A(1), IN);
        tf(in, "w", C, 1, IN);
        tf(in, "out", (size_t)N * C, 1, OF);
        tf(in, "rstd", N, 1, OF);
        tf(in, "dout", (size_t)N * C, 1, IN);
        tf(in, "din (+=)", (size_t)N * C, ACC, OB);
        tf(in, "dw (+=)", C, ACC, OB);
    } else if (step == FWD) {
        o->rmsnorm_fwd(F(2), F(3), F(0), F(1), N, C, A(0));
    } else if (step == BWD) {
        o->rmsnorm_bwd(F(5), F(6), F(4), F(0), F(1), F(3), N, C);
    }
}

/* rope on a copy of x, its backward on a copy of dout: sh N, H, D; host pos and inv_freq */
static void rope(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), H = SH(1), D = SH(2);
    size_t n = (size_t)N * H * D;
    if (step == GEN) {
        doc_pos(ti(in, "pos", I32_HOST, N), 1, N, in->c->docs, 0);
        float *inv = tdecl(in, "inv_freq", F32_HOST, D / 2, IN);
        for (int d = 0; d < D / 2; d++)
            inv[d] = powf(10000.0f, -2.0f * d / D);
        tf(in, "x", n, 1, IN);
        tf(in, "out", n, 0, OF);
        tf(in, "dout", n, 1, IN);
        tf(in, "dx", n, 0, OB);
    } else if (step == FWD) {
        o->copy(F(3), F(2), n);
        o->rope_fwd(F(3), IDX(0), F(1), N, H, D);
    } else if (step == BWD) {
        o->copy(F(5), F(4), n);
        o->rope_bwd(F(5), IDX(0), F(1), N, H, D);
    }
}

/* attention (the backward after the forward: probs): sh B, T, NH, NKV, D, maxdoc. Documents from
 * the row (host positions, probs compared), else random (device positions; probs not compared:
 * the flash path keeps other things there). */
enum { AQ, AK, AV, APOS, AOUT, APROBS, ADOUT, ADQ, ADK, ADV };
static void check_attention(struct inst *in, const struct swift_ops *o);
static void attention(struct inst *in, const struct swift_ops *o, int step)
{
    int B = SH(0), T = SH(1), NH = SH(2), NKV = SH(3), D = SH(4);
    size_t N = (size_t)B * T, nq = N * NH * D, nk = N * NKV * D;
    float *q = F(AQ), *k = F(AK), *v = F(AV), *p = F(APROBS), *g = F(ADOUT);
    if (step == GEN) {
        float init = in->c->what & FLASH ? 1 : 0, acc = in->c->what & GRAD ? 0 : 1;
        tf(in, "q", nq, 1, IN);
        tf(in, "k", nk, 1, IN);
        tf(in, "v", nk, 1, IN);
        doc_pos(ti(in, "pos", in->c->docs ? I32_HOST : I32_DEV, N), B, T, in->c->docs, SH(5));
        tf(in, "out", nq, init, OF);
        tf(in, "probs", (size_t)B * NH * T * T, init, in->c->docs ? OF : IN);
        tf(in, "dout", nq, 1, IN);
        tf(in, "dq", nq, init, OB);
        tf(in, "dk (written)", nk, acc, OB);
        tf(in, "dv (written)", nk, acc, OB);
        if (in->c->what & FLASH)
            printf("# %s: documents <= %ld, %s\n",
                   in->c->name,
                   SH(5),
                   T >= D + 1 ? "D_i from the saved out" : "D_i recomputed");
    } else if (step == FWD) {
        o->attention_fwd(F(AOUT), p, q, k, v, IDX(APOS), B, T, NH, NKV, D);
    } else if (step == BWD) {
        o->attention_bwd(F(ADQ), F(ADK), F(ADV), g, p, q, k, v, IDX(APOS), B, T, NH, NKV, D);
    } else if (step == CHECK) {
        check_attention(in, o);
    }
}
/* block-diagonal (the GRAD row: row 1 holds documents of 2 and 3): the first token of row 1's
 * second document ignores the first document */
static void check_attention(struct inst *in, const struct swift_ops *o)
{
    struct tensor *k = &in->t[AK];
    size_t nq = in->t[AOUT].n, at = (5 + 1) * 2 * 4; /* row 1, token 1 (document 1), kv head 0 */
    assert_true(SH(0) == 2 && SH(1) == 5 && SH(2) == 4 && SH(3) == 2 && SH(4) == 4);
    attention(in, o, FWD);
    const float *out = download(o, F(AOUT), nq * sizeof(float));
    float *kh = k->h, save = kh[at];
    kh[at] += 5.0f;
    o->upload(k->d, kh, tbytes(k));
    attention(in, o, FWD);
    const float *out2 = download(o, F(AOUT), nq * sizeof(float));
    kh[at] = save;
    o->upload(k->d, kh, tbytes(k));
    for (int h = 0; h < 4; h++)
        for (int d = 0; d < 4; d++) {
            size_t i = ((size_t)(5 + 2) * 4 + h) * 4 + d; /* row 1, token 2 = doc 2 start */
            assert_true(out[i] == out2[i]);
        }
}

/* layernorm with bias (the backward after the forward: mean, rstd): sh N, C; a eps, scale of x */
static void layernorm(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), C = SH(1);
    if (step == GEN) {
        tf(in, "x", (size_t)N * C, A(1), IN);
        tf(in, "w", C, 1, IN);
        tf(in, "b", C, 1, IN);
        tf(in, "out", (size_t)N * C, 1, OF);
        tf(in, "mean", N, 1, OF);
        tf(in, "rstd", N, 1, OF);
        tf(in, "dout", (size_t)N * C, 1, IN);
        tf(in, "din (+=)", (size_t)N * C, ACC, OB);
        tf(in, "dw (+=)", C, ACC, OB);
        tf(in, "db (+=)", C, ACC, OB);
    } else if (step == FWD) {
        o->layernorm_fwd(F(3), F(4), F(5), F(0), F(1), F(2), N, C, A(0));
    } else if (step == BWD) {
        o->layernorm_bwd(F(7), F(8), F(9), F(6), F(0), F(1), F(4), F(5), N, C);
    }
}

/* gelu: sh n, kind (SWIFT_GELU_*); a scale of x */
static void gelu(struct inst *in, const struct swift_ops *o, int step)
{
    size_t n = SH(0);
    if (step == GEN) {
        tf(in, "x", n, A(0), IN);
        tf(in, "out", n, 0, OF);
        tf(in, "dout", n, 1, IN);
        tf(in, "din", n, 0, OB);
    } else if (step == FWD) {
        o->gelu_fwd(F(1), F(0), n, (int)SH(1));
    } else if (step == BWD) {
        o->gelu_bwd(F(3), F(2), F(0), n, (int)SH(1));
    }
}

/* attention inside segments (the vision tower's cu_seqlens): sh NH, D; the segments' lengths
 * from the row's docs ("5,1,9"), cu in host memory; probs compared */
enum { SQ, SK, SV, SCU, SOUT, SPROBS, SDOUT, SDQ, SDK, SDV };
static void attention_seg(struct inst *in, const struct swift_ops *o, int step)
{
    int NH = SH(0), D = SH(1), nseg = 0, N = 0;
    size_t np = 0;
    int32_t lens[32];
    for (const char *s = in->c->docs; s && *s && nseg < 32;) {
        char *end;
        lens[nseg] = (int32_t)strtol(s, &end, 10);
        N += lens[nseg];
        np += (size_t)lens[nseg] * lens[nseg] * NH;
        nseg++;
        s = *end ? end + 1 : end;
    }
    size_t n = (size_t)N * NH * D;
    if (step == GEN) {
        float acc = in->c->what & GRAD ? 0 : 1;
        tf(in, "q", n, 1, IN);
        tf(in, "k", n, 1, IN);
        tf(in, "v", n, 1, IN);
        int32_t *cu = ti(in, "cu", I32_HOST, (size_t)nseg + 1);
        cu[0] = 0;
        for (int i = 0; i < nseg; i++)
            cu[i + 1] = cu[i] + lens[i];
        tf(in, "out", n, 0, OF);
        tf(in, "probs", np, 0, OF);
        tf(in, "dout", n, 1, IN);
        tf(in, "dq (written)", n, acc, OB);
        tf(in, "dk (written)", n, acc, OB);
        tf(in, "dv (written)", n, acc, OB);
    } else if (step == FWD) {
        o->attention_seg_fwd(F(SOUT), F(SPROBS), F(SQ), F(SK), F(SV), IDX(SCU), nseg, N, NH, D);
    } else if (step == BWD) {
        o->attention_seg_bwd(F(SDQ),
                             F(SDK),
                             F(SDV),
                             F(SDOUT),
                             F(SPROBS),
                             F(SQ),
                             F(SK),
                             F(SV),
                             IDX(SCU),
                             nseg,
                             N,
                             NH,
                             D);
    }
}

/* swiglu: sh n; a scales of gate and up */
static void swiglu(struct inst *in, const struct swift_ops *o, int step)
{
    size_t n = SH(0);
    if (step == GEN) {
        tf(in, "gate", n, A(0), IN);
        tf(in, "up", n, A(1), IN);
        tf(in, "out", n, 0, OF);
        tf(in, "dout", n, 1, IN);
        tf(in, "dgate", n, 0, OB);
        tf(in, "dup", n, 0, OB);
    } else if (step == FWD) {
        o->swiglu_fwd(F(2), F(0), F(1), n);
    } else if (step == BWD) {
        o->swiglu_bwd(F(4), F(5), F(3), F(0), F(1), n);
    }
}

/* add: sh n, out aliases a */
static void add(struct inst *in, const struct swift_ops *o, int step)
{
    size_t n = SH(0);
    if (step == GEN) {
        tf(in, "a", n, 4, SH(1) ? OF : IN);
        tf(in, "b", n, 4, IN);
        tf(in, "out", n, 0, SH(1) ? IN : OF);
    } else if (step == FWD) {
        o->add(SH(1) ? F(0) : F(2), F(0), F(1), n);
    }
}

/* mul_cols: sh N, C, bias?, out aliases x?; beta a[0] */
static void mul_cols(struct inst *in, const struct swift_ops *o, int step)
{
    size_t N = SH(0), n = N * SH(1);
    if (step == GEN) {
        tf(in, "x", n, 4, SH(3) ? OF : IN);
        tf(in, "g", SH(1), 4, IN);
        tf(in, "bias", SH(1), 4, IN);
        tf(in, "out", n, 4, SH(3) ? IN : OF);
    } else if (step == FWD) {
        o->mul_cols(SH(3) ? F(0) : F(3), F(0), F(1), SH(2) ? F(2) : NULL, N, SH(1), A(0));
    }
}

/* scale by a[0], and sumsq (of n, and of 0 elements): sh n */
static void scale(struct inst *in, const struct swift_ops *o, int step)
{
    if (step == GEN)
        tf(in, "x", SH(0), 4, OF);
    else if (step == FWD)
        o->scale(F(0), A(0), SH(0));
}
static void sumsq(struct inst *in, const struct swift_ops *o, int step)
{
    if (step == GEN) {
        tf(in, "x", SH(0), 4, IN);
    } else if (step == FWD) {
        put_s(in, "sumsq", o->sumsq(F(0), SH(0)));
        put_s(in, "sumsq of 0 elements", o->sumsq(F(0), 0));
    }
}

/* dropout: sh n, seed; a p. GRAD: x and dout all ones; CHECK: deterministic, unbiased scale,
 * the backward uses the same mask. */
static void dropout(struct inst *in, const struct swift_ops *o, int step)
{
    size_t n = SH(0);
    if (step == GEN) {
        float *x = tf(in, "x", n, 1, IN);
        tf(in, "out", n, 0, OF);
        tdecl(in, "mask", U8, n, OF | EXACT);
        float *g = tf(in, "dout", n, 1, IN);
        tf(in, "din (+=)", n, ACC, OB);
        for (size_t i = 0; i < n && (in->c->what & GRAD); i++)
            x[i] = g[i] = 1.0f;
    } else if (step == FWD) {
        o->dropout_fwd(F(1), U8P(2), F(0), n, A(0), (uint64_t)SH(1));
    } else if (step == BWD) {
        o->dropout_bwd(F(4), F(3), U8P(2), n, A(0));
    } else if (step == CHECK) {
        dropout(in, o, FWD);
        const uint8_t *m = download(o, U8P(2), n);
        dropout(in, o, FWD);
        assert_memory_equal(m, download(o, U8P(2), n), n);
        double kept = 0;
        for (size_t i = 0; i < n; i++)
            kept += m[i];
        assert_true(fabs(kept / n - (1 - A(0))) < 0.02);
        dropout(in, o, BWD);
        const float *dx = download(o, F(4), n * 4), *y = download(o, F(1), n * 4);
        for (size_t i = 0; i < n; i++)
            assert_true(dx[i] == y[i]);
    }
}

/* cross-entropy: sh N, V; a dscale, divisor of the loss. FWD writes loss/divisor to out, BWD
 * dlogits in place (aliasing logits). A quarter of the rows untrained (GRAD: targets 2, -1, 0, 5),
 * one row whose argmax is its target. */
static void cross_entropy(struct inst *in, const struct swift_ops *o, int step)
{
    int N = SH(0), V = SH(1), grad = in->c->what & GRAD;
    double ls = 0;
    long n = 0, ok = 0;
    if (step == GEN) {
        int32_t *tgt = ti(in, "targets", I32_HOST, N);
        for (int i = 0; i < N; i++)
            tgt[i] = grad ? (int32_t[]){2, -1, 0, 5}[i] : i % 4 == 0 ? -1 : (i * 97) % V;
        float *logits = tf(in, "dlogits (in place of logits)", (size_t)N * V, grad ? 1 : 8, OB);
        if (!grad)
            logits[(size_t)1 * V + tgt[1]] = 50;
        tf(in, "loss", 1, 0, IN);
        tf(in, "one", 1, 0, IN)[0] = 1;
    } else if (step == FWD) {
        o->cross_entropy(NULL, &ls, &n, &ok, F(1), IDX(0), N, V, 0);
        float v = (float)(ls / A(1));
        o->upload(F(2), &v, sizeof(v));
        if (!grad) {
            put_s(in, "loss", ls);
            put_l(in, "trained", n);
            put_l(in, "correct", ok);
            assert_true(ok >= 1);
        }
    } else if (step == BWD) {
        o->cross_entropy(F(1), &ls, &n, &ok, F(1), IDX(0), N, V, A(0));
        put_s(in, "loss with dlogits", ls);
    } else if (step == CHECK) {
        o->cross_entropy(F(1), &ls, &n, &ok, F(1), IDX(0), N, V, A(0));
        assert_int_equal(n, 3);
        const float *dx = download(o, F(1), tbytes(&in->t[1]));
        for (int c = 0; c < V; c++)
            assert_true(dx[V + c] == 0.0f); /* untrained row */
    }
}

/* AdamW, 3 steps with gradient scale 0.5: sh n; a lr, weight decay. GRAD: p, g of torch's
 * example; CHECK: against its formula in double. */
static void adamw_steps(struct inst *in, const struct swift_ops *o, int check);
static void adamw(struct inst *in, const struct swift_ops *o, int step)
{
    if (step == GEN) {
        float *p = tf(in, "p", SH(0), 1, OF), *g = tf(in, "g", SH(0), 1, IN);
        float *m = tf(in, "m", SH(0), 0.1f, OF), *v = tf(in, "v", SH(0), 0.1f, OF);
        for (long i = 0; i < SH(0); i++)
            v[i] = fabsf(v[i]);
        if (in->c->what & GRAD) {
            memcpy(p, (float[]){0.5f, -1.0f, 2.0f}, sizeof(float[3]));
            memcpy(g, (float[]){0.1f, -0.2f, 0.0f}, sizeof(float[3]));
            memset(m, 0, 3 * sizeof(float));
            memset(v, 0, 3 * sizeof(float));
        }
    } else if (step == FWD || step == CHECK) {
        adamw_steps(in, o, step == CHECK);
    }
}
static void adamw_steps(struct inst *in, const struct swift_ops *o, int check)
{
    const float *g = in->t[1].h;
    double P[3] = {0.5, -1.0, 2.0}, M[3] = {0}, Vv[3] = {0};
    double lr = A(0), wd = A(1), b1 = 0.9, b2 = 0.95, eps = 1e-8;
    for (int step = 1; step <= 3; step++) {
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        float fc1 = check ? (float)bc1 : 1 - powf(0.9f, (float)step);
        float fc2 = check ? (float)bc2 : 1 - powf(0.95f, (float)step);
        o->adamw(F(0), F(1), F(2), F(3), SH(0), A(0), 0.9f, 0.95f, 1e-8f, A(1), fc1, fc2, 0.5f);
        if (!check)
            continue;
        const float *p = download(o, F(0), 3 * sizeof(float));
        for (int i = 0; i < 3; i++) {
            double gi = g[i] * 0.5;
            P[i] *= 1 - lr * wd;
            M[i] = b1 * M[i] + (1 - b1) * gi;
            Vv[i] = b2 * Vv[i] + (1 - b2) * gi * gi;
            P[i] -= lr / bc1 * M[i] / (sqrt(Vv[i]) / sqrt(bc2) + eps);
            assert_true(fabs(P[i] - p[i]) < 1e-6);
        }
    }
}

/* swift-eval's key/value cache ops: the scatter of new keys into cache slots (host indices),
 * the gather of wanted rows (device indices), and the cached attention over rows of different
 * lengths with grouped kv heads: sh rows, cap, NH, NKV, D, N (N <= 7) */
static void kv_cache(struct inst *in, const struct swift_ops *o, int step)
{
    static const int32_t pos[7] = {0, 5, 20, 3, 4, 9, 1}, row[7] = {0, 1, 2, 2, 0, 1, 1};
    int KD = SH(3) * SH(4), N = SH(5);
    size_t cache = (size_t)SH(0) * SH(1) * KD, nq = (size_t)N * SH(2) * SH(4);
    if (step == GEN) {
        tf(in, "kcache (scatter, host idx)", cache, 1, OF | EXACT);
        tf(in, "vcache", cache, 1, IN);
        tf(in, "q", nq, 1, IN);
        tf(in, "new keys", (size_t)N * KD, 1, IN);
        memcpy(ti(in, "pos", I32_HOST, N), pos, N * sizeof(int32_t));
        memcpy(ti(in, "row", I32_HOST, N), row, N * sizeof(int32_t));
        int32_t *slot = ti(in, "slot", I32_HOST, N), *sel = ti(in, "sel", I32_DEV, 4);
        for (int i = 0; i < N; i++)
            slot[i] = row[i] * (int32_t)SH(1) + pos[i];
        memcpy(sel, (int32_t[]){6, 0, 3, 3}, sizeof(int32_t[4]));
        tf(in, "gathered (device idx)", 4 * (size_t)KD, 0, OF | EXACT);
        tf(in, "attention_cached out", nq, 0, OF);
    } else if (step == FWD) {
        o->copy_rows(F(0), IDX(6), F(3), NULL, N, KD);
        o->copy_rows(F(8), NULL, F(0), IDX(7), 4, KD);
        size_t stride = (size_t)SH(1) * KD;
        o->attention_cached(F(9), F(2), F(0), F(1), IDX(4), IDX(5), stride, N, SH(2), SH(3), SH(4));
    }
}

/* swift-infer's paged attention (attention_paged): three sequences whose positions lie in
 * blocks of the pool in shuffled order (block tables in device memory), and the same keys laid
 * out contiguously for attention_cached: sh nb (blocks), bs, NH, NKV, D, N (N <= 7).
 * CHECK (GRAD rows): the paged op gives attention_cached's bits. */
static void kv_paged(struct inst *in, const struct swift_ops *o, int step)
{
    static const int32_t pos[7] = {0, 5, 20, 3, 4, 9, 1}, row[7] = {0, 1, 2, 2, 0, 1, 1};
    int nb = SH(0), bs = SH(1), KD = SH(3) * SH(4), N = SH(5), cap = 21;
    int nbt = (cap + bs - 1) / bs; /* blocks per sequence */
    size_t pool = (size_t)nb * bs * KD, nq = (size_t)N * SH(2) * SH(4);
    if (step == GEN) {
        assert_true(nb >= 3 * nbt);
        float *pk = tf(in, "pool keys", pool, 1, IN), *pv = tf(in, "pool values", pool, 1, IN);
        tf(in, "q", nq, 1, IN);
        float *kc = tf(in, "contiguous keys", (size_t)3 * cap * KD, 0, IN);
        float *vc = tf(in, "contiguous values", (size_t)3 * cap * KD, 0, IN);
        memcpy(ti(in, "pos", I32_HOST, N), pos, N * sizeof(int32_t));
        int32_t *toff = ti(in, "toff", I32_HOST, N);
        int32_t *tb = ti(in, "tables (device)", I32_DEV, (size_t)3 * nbt);
        memcpy(ti(in, "row", I32_HOST, N), row, N * sizeof(int32_t));
        for (int i = 0; i < N; i++)
            toff[i] = row[i] * nbt;
        int32_t *perm = hnew((size_t)nb * sizeof(int32_t));
        for (int b = 0; b < nb; b++)
            perm[b] = b;
        for (int b = nb - 1; b > 0; b--) { /* shuffled: tables are not in order */
            int j = (int)(rnext() >> 33) % (b + 1);
            int32_t t = perm[b];
            perm[b] = perm[j];
            perm[j] = t;
        }
        memcpy(tb, perm, (size_t)3 * nbt * sizeof(int32_t));
        for (int r = 0; r < 3; r++)
            for (int j = 0; j < cap; j++) {
                size_t at = ((size_t)tb[r * nbt + j / bs] * bs + j % bs) * KD;
                memcpy(kc + ((size_t)r * cap + j) * KD, pk + at, KD * sizeof(float));
                memcpy(vc + ((size_t)r * cap + j) * KD, pv + at, KD * sizeof(float));
            }
        tf(in, "attention_paged out", nq, 0, OF);
        tf(in, "attention_cached out", nq, 0, OF);
    } else if (step == FWD || step == CHECK) {
        o->attention_paged(
            F(9), F(2), F(0), F(1), IDX(5), IDX(6), IDX(7), 3 * nbt, bs, N, SH(2), SH(3), SH(4));
        size_t stride = (size_t)cap * KD;
        o->attention_cached(
            F(10), F(2), F(3), F(4), IDX(5), IDX(8), stride, N, SH(2), SH(3), SH(4));
        if (step == CHECK) {
            const float *a = download(o, F(9), nq * sizeof(float));
            const float *b = download(o, F(10), nq * sizeof(float));
            assert_memory_equal(a, b, nq * sizeof(float));
        }
    }
}

struct family {
    void (*fn)(struct inst *in, const struct swift_ops *o, int step);
    int out, dout;  /* finite differences of L = sum(out * dout) */
    int grad[3][2]; /* {input, its gradient}, up to a {0, 0} */
};
static const struct family f_matmul = {matmul, 3, 4, {{0, 5}, {1, 6}, {2, 7}}};
static const struct family f_matmul4 = {matmul4, 7, 8, {{0, 9}}};
static const struct family f_embed = {embed, 2, 3, {{1, 4}}};
static const struct family f_rmsnorm = {rmsnorm, 2, 4, {{0, 5}, {1, 6}}};
static const struct family f_rope = {rope, 3, 4, {{2, 5}}};
static const struct family f_attn = {attention, AOUT, ADOUT, {{AQ, ADQ}, {AK, ADK}, {AV, ADV}}};
static const struct family f_swiglu = {swiglu, 2, 3, {{0, 4}, {1, 5}}};
static const struct family f_layernorm = {layernorm, 3, 6, {{0, 7}, {1, 8}, {2, 9}}};
static const struct family f_gelu = {gelu, 1, 2, {{0, 3}}};
static const struct family f_attn_seg = {
    attention_seg, SOUT, SDOUT, {{SQ, SDQ}, {SK, SDK}, {SV, SDV}}};
static const struct family f_add = {add, 0, 0, {{0}}};
static const struct family f_mul_cols = {mul_cols, 0, 0, {{0}}};
static const struct family f_scale = {scale, 0, 0, {{0}}};
static const struct family f_sumsq = {sumsq, 0, 0, {{0}}};
static const struct family f_dropout = {dropout, 0, 0, {{0}}};
/* the objective is the loss itself: out is loss/3 over the 3 trained rows, dout 1 */
static const struct family f_xent = {cross_entropy, 2, 3, {{1, 1}}};
static const struct family f_adamw = {adamw, 0, 0, {{0}}};
static const struct family f_kv = {kv_cache, 0, 0, {{0}}};
static const struct family f_paged = {kv_paged, 0, 0, {{0}}};

#define EW 1e-6, 1e-5, 0  /* elementwise */
#define RED 1e-5, 1e-4, 0 /* reductions in float */
#define FLT 1e-5, 2e-4, 0 /* flash attention */
#define FD 0, 1e-3, 0     /* finite differences: relative to max |numeric| */
#define TIMING (BOTH | FLASH | VS_CUBLAS | TIMED)
static const struct test_case cases[] = {
    /* odd sizes: no tile multiple */
    {"matmul_fwd bias alpha beta", &f_matmul, FWD, {37, 70, 53, 1}, {0.5f, 0.25f}, 0, RED},
    {"matmul_fwd", &f_matmul, FWD, {37, 70, 53, 0}, {1, 0}, 0, RED},
    {"matmul_fwd N=1", &f_matmul, FWD, {1, 33, 17, 1}, {0.5f, 0}, 0, RED},
    {"matmul_fwd N=3", &f_matmul, FWD, {3, 33, 17, 1}, {0.5f, 0}, 0, RED},
    {"matmul_bwd din (beta 1) dw db", &f_matmul, BWD, {37, 70, 53, 1}, {0, 0, 0.75f, 1}, 0, RED},
    {"matmul_bwd din only", &f_matmul, BWD, {37, 70, 53, 0}, {0, 0, 1, 0}, 0, RED},
    {"matmul_fwd bf16 compute", &f_matmul, FWD | BF16, {64, 256, 128, 0}, {1, 0}, 0, 0, 2e-2, 0},
    {"matmul_bwd bf16 compute",
     &f_matmul,
     BWD | BF16,
     {37, 70, 53, 1},
     {0, 0, 0.75f, 1},
     0,
     0,
     2e-2,
     0},
    {"matmul gradients", &f_matmul, GRAD, {5, 7, 3, 1}, {1, 0, 1, 0}, 0, FD},
    /* QLoRA's 4-bit base: nf4 and fp4, with and without double quantization (330 blocks of 64:
     * two of absmax2), odd sizes (a ragged last block, an odd code count, I and O no tile
     * multiple), beta / din_beta 0, 1 and between; the dequantized tile is the CPU's exactly,
     * only the fp32 accumulation order differs */
    {"matmul4_fwd nf4 bias beta", &f_matmul4, FWD, {37, 71, 53, 0, 0, 1}, {0.5f}, 0, RED},
    {"matmul4_fwd nf4 dq 2 absmax2 blocks", &f_matmul4, FWD, {33, 300, 70, 0, 1, 0}, {0}, 0, RED},
    {"matmul4_fwd fp4 dq N=1 bias", &f_matmul4, FWD, {1, 33, 17, 1, 1, 1}, {0}, 0, RED},
    {"matmul4_fwd fp4 tiles beta 1", &f_matmul4, FWD, {130, 200, 150, 1, 0, 1}, {1}, 0, RED},
    {"matmul4_bwd nf4 dq din_beta 1", &f_matmul4, BWD, {37, 71, 53, 0, 1, 0}, {0, 1}, 0, RED},
    {"matmul4_bwd fp4 tiles", &f_matmul4, BWD, {130, 200, 150, 1, 0, 0}, {0, 0}, 0, RED},
    {"matmul4_bwd nf4 dq 2 absmax2 blocks",
     &f_matmul4,
     BWD,
     {33, 300, 70, 0, 1, 0},
     {0, 0.5f},
     0,
     RED},
    {"matmul4_bwd fp4 dq N=1", &f_matmul4, BWD, {1, 33, 17, 1, 1, 0}, {0, 0.25f}, 0, RED},
    {"matmul4 input gradient", &f_matmul4, GRAD, {5, 7, 3, 0, 1, 1}, {0, 0}, 0, FD},
    {"embed_fwd (host tokens)", &f_embed, FWD, {50, 33, 40, 0}, {0}, 0, EW},
    {"embed_fwd (device tokens)", &f_embed, FWD, {50, 33, 40, 1}, {0}, 0, EW},
    {"embed_bwd", &f_embed, BWD, {50, 33, 40, 1}, {0}, 0, RED},
    {"embedding gradient", &f_embed, GRAD, {4, 3, 5, 0}, {0}, 0, FD},
    {"rmsnorm", &f_rmsnorm, BOTH, {29, 1000}, {1e-6f, 2}, 0, RED},
    {"rmsnorm gradients", &f_rmsnorm, GRAD, {4, 6}, {1e-5f, 1}, 0, FD},
    {"rope", &f_rope, BOTH, {24, 3, 16}, {0}, "10,14", EW},
    {"rope gradient", &f_rope, GRAD, {4, 2, 8}, {0}, "3,1", FD},
    {"attention (cublas path)", &f_attn, BOTH | CUBLAS, {2, 19, 4, 2, 8}, {0}, "7,5,7/19", RED},
    {"attention gradients, block-diagonal", &f_attn, GRAD, {2, 5, 4, 2, 4}, {0}, "5/2,3", FD},
    /* flash: T not a multiple of the tiles (16 queries, 32 keys; 16 keys, 32 queries back) */
    {"flash gqa14/2 d64 packed", &f_attn, BOTH | FLASH, {2, 77, 14, 2, 64, 20}, {0}, 0, FLT},
    {"flash mha4/4 d64 packed", &f_attn, BOTH | FLASH, {2, 53, 4, 4, 64, 9}, {0}, 0, FLT},
    {"flash gqa14/2 d64 one doc", &f_attn, BOTH | FLASH, {1, 70, 14, 2, 64, 1 << 20}, {0}, 0, FLT},
    {"flash mha4/4 d128 packed", &f_attn, BOTH | FLASH, {2, 150, 4, 4, 128, 40}, {0}, 0, FLT},
    /* T <= D: D_i recomputed */
    {"flash gqa4/2 d128 short T", &f_attn, BOTH | FLASH, {2, 45, 4, 2, 128, 12}, {0}, 0, FLT},
    /* generic path, D % 32 != 0 */
    {"flash gqa6/3 d80 packed", &f_attn, BOTH | FLASH, {1, 97, 6, 3, 80, 30}, {0}, 0, FLT},
    /* > 48 KiB shared memory */
    {"flash gqa4/1 d256 packed", &f_attn, BOTH | FLASH, {1, 300, 4, 1, 256, 100}, {0}, 0, FLT},
    {"flash gqa2/1 d32 T=1", &f_attn, BOTH | FLASH, {3, 1, 2, 1, 32, 1}, {0}, 0, FLT},
    {"swiglu", &f_swiglu, BOTH, {100003}, {4, 4}, 0, EW},
    {"swiglu gradients", &f_swiglu, GRAD, {12}, {3, 1}, 0, FD},
    /* the vision tower (lib/model/vlm.h) */
    {"layernorm", &f_layernorm, BOTH, {29, 1000}, {1e-6f, 2}, 0, RED},
    {"layernorm gradients", &f_layernorm, GRAD, {4, 6}, {1e-6f, 1}, 0, FD},
    {"gelu erf", &f_gelu, BOTH, {100003, SWIFT_GELU_ERF}, {4}, 0, EW},
    {"gelu quick", &f_gelu, BOTH, {100003, SWIFT_GELU_QUICK}, {4}, 0, EW},
    {"gelu erf gradient", &f_gelu, GRAD, {12, SWIFT_GELU_ERF}, {3}, 0, FD},
    {"gelu quick gradient", &f_gelu, GRAD, {12, SWIFT_GELU_QUICK}, {3}, 0, FD},
    {"attention_seg", &f_attn_seg, BOTH, {4, 16}, {0}, "24,1,48,7", RED},
    {"attention_seg gradients", &f_attn_seg, GRAD, {2, 4}, {0}, "3,1,4", FD},
    {"add", &f_add, FWD, {100003, 0}, {0}, 0, EW},
    {"add (out aliases a)", &f_add, FWD, {100003, 1}, {0}, 0, EW},
    {"mul_cols beta 1 bias", &f_mul_cols, FWD, {301, 333, 1, 0}, {1}, 0, EW},
    {"mul_cols beta 0, out aliases x", &f_mul_cols, FWD, {301, 333, 0, 1}, {0}, 0, EW},
    {"mul_cols elementwise", &f_mul_cols, FWD, {1, 100003, 0, 0}, {0.5f}, 0, EW},
    {"scale", &f_scale, FWD, {100003}, {-0.37f}, 0, EW},
    {"sumsq", &f_sumsq, FWD, {100003}, {0}, 0, 0, 0, 1e-9},
    {"sumsq n=33", &f_sumsq, FWD, {33}, {0}, 0, 0, 0, 1e-9},
    {"sumsq n=99", &f_sumsq, FWD, {99}, {0}, 0, 0, 0, 1e-9},
    {"dropout", &f_dropout, BOTH, {50001, 0xdeadbeef}, {0.1f}, 0, EW},
    {"dropout mask, rate, backward", &f_dropout, GRAD, {10000, 7}, {0.25f}, 0, FD},
    {"cross_entropy", &f_xent, BOTH, {33, 3001}, {0.125f, 1}, 0, 1e-7, 1e-5, 1e-6},
    {"cross_entropy gradient, untrained rows", &f_xent, GRAD, {4, 6}, {1.0f / 3, 3}, 0, FD},
    {"adamw 3 steps", &f_adamw, FWD, {4099}, {1e-3f, 0.1f}, 0, EW},
    {"adamw against its formula", &f_adamw, GRAD, {3}, {1e-2f, 0.1f}, 0, FD},
    /* flash against the cuBLAS path on the same device inputs (against the CPU elsewhere) */
    {"flash vs cublas", &f_attn, BOTH | FLASH | VS_CUBLAS, {2, 200, 14, 2, 64, 60}, {0}, 0, FLT},
    /* the Qwen2.5-0.5B attention shape, timed (cuda only); tests/gpu/run.sh records the times */
    {"attention timing one-doc", &f_attn, TIMING, {4, 1024, 14, 2, 64, 1 << 20}, {0}, 0, FLT},
    {"attention timing packed<=256", &f_attn, TIMING, {4, 1024, 14, 2, 64, 256}, {0}, 0, FLT},
    {"kv cache ops", &f_kv, FWD, {3, 21, 6, 2, 24, 7}, {0}, 0, RED},
    /* head_dim 128 (the 0.5B shape): more threads than a warp */
    {"kv cache ops D=128", &f_kv, FWD, {3, 21, 6, 2, 128, 3}, {0}, 0, RED},
    /* paged attention: blocks of 4 and of 1 (every position its own block), D=128 */
    {"attention_paged", &f_paged, FWD, {24, 4, 6, 2, 24, 7}, {0}, 0, RED},
    {"attention_paged bs=1", &f_paged, FWD, {70, 1, 4, 4, 16, 7}, {0}, 0, RED},
    {"attention_paged D=128", &f_paged, FWD, {18, 8, 14, 2, 128, 5}, {0}, 0, RED},
    {"attention_paged = attention_cached", &f_paged, GRAD, {24, 4, 6, 2, 24, 7}, {0}, 0, FD},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

struct test {
    int b, i; /* backend, row */
};

static struct inst *inst_new(const struct test *t)
{
    const struct test_case *c = &cases[t->i];
    memset(&inst, 0, sizeof(inst));
    inst.c = c;
    rs = 1000003ULL * (uint64_t)(t->i + 1);
    c->f->fn(&inst, NULL, GEN);
    return &inst;
}
static void cuda_mode(int what)
{
#ifdef SWIFT_HAVE_CUDA
    swift_cuda_set_math(what & BF16 ? SWIFT_CUDA_MATH_BF16 : SWIFT_CUDA_MATH_FP32);
    swift_cuda_set_attention(what & FLASH    ? SWIFT_CUDA_ATTN_FLASH
                             : what & CUBLAS ? SWIFT_CUDA_ATTN_CUBLAS
                                             : SWIFT_CUDA_ATTN_AUTO);
#else
    (void)what;
#endif
}
static double now_ms(const struct swift_ops *o)
{
    struct timespec ts;
    o->sync();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static double median5(double *x)
{
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (x[j] < x[i]) {
                double t = x[i];
                x[i] = x[j];
                x[j] = t;
            }
    return x[2];
}

/* every tensor on backend o: an uploaded copy, or the host data for the host kinds */
static void place(struct inst *in, const struct swift_ops *o)
{
    for (int i = 0; i < in->nt; i++) {
        struct tensor *t = &in->t[i];
        t->d = on_host(t) ? t->h : dup_dev(o, t->h, tbytes(t));
    }
}
/* Upload the inputs to backend o, run the row (in CUDA mode `mode` on cuda; when ms, 5 timed
 * runs after a warm-up: median ms of forward and backward), download the outputs in mask. */
static void run_on(struct inst *in, const struct swift_ops *o, int mode, int mask, double *ms,
                   void **out)
{
    double f[5], b[5];
    place(in, o);
    in->ns = in->nl = 0;
    if (o == be[CUDA].ops)
        cuda_mode(mode);
    /* BF16 rows: every backend, the CPU reference included, in bf16 math (the CPU's bf16
     * matmuls are the specification of the others'; strict's are the CPU's bit for bit) */
    int bf16 = (in->c->what & BF16) && o->set_matmul_math;
    if (bf16)
        o->set_matmul_math(SWIFT_MATH_BF16);
    for (int it = ms ? -1 : 4; it < 5; it++) {
        double t0 = now_ms(o);
        if (in->c->what & FWD)
            in->c->f->fn(in, o, FWD);
        double t1 = now_ms(o);
        if (in->c->what & BWD)
            in->c->f->fn(in, o, BWD);
        double t2 = now_ms(o);
        if (it >= 0) {
            f[it] = t1 - t0;
            b[it] = t2 - t1;
        }
    }
    if (bf16)
        o->set_matmul_math(SWIFT_MATH_FP32);
    if (o == be[CUDA].ops)
        cuda_mode(0);
    if (ms) {
        ms[0] = median5(f);
        ms[1] = median5(b);
    }
    for (int i = 0; i < in->nt; i++)
        out[i] = in->t[i].role & mask ? download(o, in->t[i].d, tbytes(&in->t[i])) : NULL;
}

/* FWD, BWD, BOTH rows: backend b against the CPU op (VS_CUBLAS on cuda: against its cuBLAS
 * attention path; TIMED: both timed, forward outputs compared) */
static void op_test(void **state)
{
    const struct test *t = *state;
    const struct swift_ops *o = be[t->b].ops;
    if (!o) {
        skip();
        return;
    }
    struct inst *in = inst_new(t);
    const struct test_case *c = in->c;
    int vs = t->b == CUDA && (c->what & VS_CUBLAS), mask = c->what & (c->what & TIMED ? FWD : BOTH);
    void *ref[MAXT], *got[MAXT];
    double s[4], ms[2][2], *timed = c->what & TIMED ? ms[0] : NULL;
    long l[4];
    run_on(in, vs ? o : &swift_cpu_ops, vs ? CUBLAS : 0, mask, timed, ref);
    memcpy(s, in->s, sizeof(s));
    memcpy(l, in->l, sizeof(l));
    run_on(in, o, c->what, mask, timed ? ms[1] : NULL, got);
    char what[128];
    for (int i = 0; i < in->nt; i++) {
        struct tensor *x = &in->t[i];
        if (!got[i])
            continue;
        snprintf(what, sizeof(what), "%s %s %s", be[t->b].name, c->name, x->name);
        if (x->kind == U8) {
            printf("# %-44s n=%-8zu identical\n", what, x->n);
            assert_memory_equal(got[i], ref[i], x->n);
        } else {
            int exact = t->b != CUDA || (x->role & EXACT);
            compare(what, got[i], ref[i], x->n, exact, c->atol, c->rtol);
        }
    }
    for (int k = 0; k < in->ns; k++) {
        printf(
            "# %s %s %s: %.17g, cpu %.17g\n", be[t->b].name, c->name, in->sname[k], in->s[k], s[k]);
        if (t->b != CUDA)
            assert_memory_equal(&in->s[k], &s[k], sizeof(double));
        else
            assert_true(fabs(in->s[k] - s[k]) <= c->srtol * fabs(s[k]));
    }
    for (int k = 0; k < in->nl; k++) {
        printf("# %s %s %s: %ld\n", be[t->b].name, c->name, in->lname[k], in->l[k]);
        assert_int_equal(in->l[k], l[k]);
    }
    if (vs && !timed) { /* the flash backward again: bit-identical (no atomics) */
        cuda_mode(c->what);
        c->f->fn(in, o, BWD);
        cuda_mode(0);
        for (int i = ADQ; i <= ADK; i++)
            assert_memory_equal(download(o, F(i), tbytes(&in->t[i])), got[i], tbytes(&in->t[i]));
        printf("# flash backward twice: dk and dq bit-identical\n");
    }
    if (timed)
        printf("# attention timing B=%ld T=%ld NH=%ld NKV=%ld D=%ld %s: cublas fwd %.3f ms bwd "
               "%.3f ms; flash fwd %.3f ms bwd %.3f ms; flash speedup fwd %.2fx bwd %.2fx\n",
               SH(0),
               SH(1),
               SH(2),
               SH(3),
               SH(4),
               SH(5) >= SH(1) ? "one-doc" : "packed<=256",
               ms[0][0],
               ms[0][1],
               ms[1][0],
               ms[1][1],
               ms[0][0] / ms[1][0],
               ms[0][1] / ms[1][1]);
}

/* L = sum(out * dout) after uploading the (perturbed) input x */
static double objective(struct inst *in, const struct swift_ops *o, const struct tensor *x,
                        float *y)
{
    const struct tensor *out = &in->t[in->c->f->out];
    const float *R = in->t[in->c->f->dout].h;
    o->upload(x->d, x->h, tbytes(x));
    in->c->f->fn(in, o, FWD);
    o->download(y, out->d, tbytes(out));
    double s = 0;
    for (size_t i = 0; i < out->n; i++)
        s += (double)y[i] * R[i];
    return s;
}

/* gradient k of the family against central differences of its forward */
static void fd_check(struct inst *in, const struct swift_ops *o, int k, const char *bname)
{
    const struct family *f = in->c->f;
    struct tensor *x = &in->t[f->grad[k][0]], *g = &in->t[f->grad[k][1]];
    const float *grad = download(o, g->d, tbytes(g));
    float *xh = x->h, *y = hnew(tbytes(&in->t[f->out]));
    double maxnum = 0, maxerr = 0;
    const float h = 1e-2f;
    for (size_t i = 0; i < x->n; i++) {
        float x0 = xh[i];
        xh[i] = x0 + h;
        double lp = objective(in, o, x, y);
        xh[i] = x0 - h;
        double lm = objective(in, o, x, y);
        xh[i] = x0;
        double num = (lp - lm) / (2 * h);
        maxnum = fmax(maxnum, fabs(num));
        maxerr = fmax(maxerr, fabs(num - grad[i]));
    }
    o->upload(x->d, xh, tbytes(x));
    double rel = maxerr / (maxnum > 1e-6 ? maxnum : 1e-6);
    printf("# %s %s %s: max rel err %.2e (max |grad| %.3g)\n",
           bname,
           in->c->name,
           g->name,
           rel,
           maxnum);
    assert_true(rel < in->c->rtol);
}

/* GRAD rows on the host-math backends: finite differences, then the family's properties */
static void grad_test(void **state)
{
    const struct test *t = *state;
    const struct swift_ops *o = be[t->b].ops;
    struct inst *in = inst_new(t);
    const struct family *f = in->c->f;
    place(in, o);
    if (f->grad[0][1]) {
        f->fn(in, o, FWD);
        f->fn(in, o, BWD);
    }
    for (int k = 0; k < 3 && f->grad[k][1]; k++)
        fd_check(in, o, k, be[t->b].name);
    f->fn(in, o, CHECK);
}

/* ---- per-backend checks ---- */

static void memory_test(void **state)
{
    const struct test *t = *state;
    const struct swift_ops *o = be[t->b].ops;
    if (!o) {
        skip();
        return;
    }
    size_t n = 1000, bytes = n * sizeof(float);
    float *a = rnd(n, 1), *z = hnew(bytes);
    float *da = dup_dev(o, a, bytes), *db = dnew(o, bytes);
    compare("alloc is zeroed", download(o, db, bytes), z, n, 1, 0, 0);
    o->copy(db, da, n);
    compare("copy", download(o, db, bytes), a, n, 1, 0, 0);
    o->zero(db, n);
    compare("zero", download(o, db, bytes), z, n, 1, 0, 0);
    o->sync();
}

/* The CUDA table has the ops of QLoRA (matmul4), DoRA (mul_cols), 8-bit AdamW (adamw8bit) and the
 * vision tower (layernorm, gelu, attention_seg):
 * lib/ refuses a technique on a table without its op, so a NULL here is a feature missing on the
 * GPU. Checked wherever CUDA is built, GPU or not (the table is data). */
static void cuda_table_test(void **state)
{
    (void)state;
#ifdef SWIFT_HAVE_CUDA
    const struct swift_ops *o = &swift_cuda_ops;
    assert_non_null(o->matmul4_fwd);
    assert_non_null(o->matmul4_bwd);
    assert_non_null(o->mul_cols);
    assert_non_null(o->adamw8bit);
    assert_non_null(o->layernorm_fwd); /* the vision tower's, last in the table */
    assert_non_null(o->layernorm_bwd);
    assert_non_null(o->gelu_fwd);
    assert_non_null(o->gelu_bwd);
    assert_non_null(o->attention_seg_fwd);
    assert_non_null(o->attention_seg_bwd);
#else
    skip();
#endif
}

/* ---- the test list: every case on every backend ---- */

/* the GPU, if any: every cuda case skips without one */
static void find_cuda(void)
{
#ifdef SWIFT_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    struct cudaDeviceProp p;
    if (e != cudaSuccess || n == 0) {
        printf("# no GPU: %s (every cuda case skips)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
        cudaGetLastError();
    } else if (cudaGetDeviceProperties(&p, 0) == cudaSuccess && swift_cuda_init(0) == 0) {
        swift_cuda_set_math(SWIFT_CUDA_MATH_FP32);
        be[CUDA].ops = &swift_cuda_ops;
        printf("# GPU: %s (cc %d.%d)\n", p.name, p.major, p.minor);
    } else {
        printf("# no GPU: cuda:0 cannot be used (every cuda case skips)\n");
    }
#else
    printf("# no GPU: built without CUDA (every cuda case skips)\n");
#endif
}

#define MAXTESTS 256
static struct CMUnitTest tests[MAXTESTS];
static struct test states[MAXTESTS];
static char names[MAXTESTS][80];
static int ntests;

static void add_test(int b, const char *name, CMUnitTestFunction fn, int i)
{
    if (ntests == MAXTESTS)
        abort();
    snprintf(names[ntests], sizeof(names[0]), "%s: %s", be[b].name, name);
    states[ntests] = (struct test){b, i};
    tests[ntests] = (struct CMUnitTest){names[ntests], fn, NULL, release_all, &states[ntests]};
    ntests++;
}

int main(void)
{
    find_cuda();
    add_test(CUDA, "table has the 4-bit, DoRA, 8-bit AdamW and vision ops", cuda_table_test, 0);
    for (int b = 0; b < NBE; b++) {
        add_test(b, "memory ops", memory_test, 0);
        for (int i = 0; i < NCASES; i++)
            if ((cases[i].what & GRAD) ? b != CUDA
                                       : b != CPU && (b == CUDA || !(cases[i].what & TIMED)))
                add_test(b, cases[i].name, cases[i].what & GRAD ? grad_test : op_test, i);
    }
    return _cmocka_run_group_tests("tests", tests, ntests, NULL, NULL);
}
