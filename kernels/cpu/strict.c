/* The CPU backend with host access to its memory forbidden (swift_cpu_strict_ops, backend.h):
 * a test tool standing in for a device whose memory the host cannot address. alloc hands out
 * whole pages kept PROT_NONE except while an op, upload or download runs, so code
 * that dereferences backend memory on the host (instead of going through upload/download)
 * dies with SIGSEGV at the access. The math is the CPU backend's, called unchanged. */
#include "kernels/ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "kernels/banned.h"

/* One reserved arena of address space: allocations are page runs inside it (first fit over a
 * free list sorted by offset), so opening and closing all backend memory is one mprotect of
 * [arena, arena + high) whatever the number of allocations. Freed runs are mapped afresh
 * (zeroed, their memory given back). */
#define ARENA_BYTES ((size_t)64 << 30) /* address space only (MAP_NORESERVE) */
struct run {
    size_t off, len;
};
static char *arena;
static size_t high;   /* end of the highest run ever handed out */
static struct run *F; /* free runs, sorted by offset, coalesced */
static size_t Fn, Fcap;
static struct run *U; /* runs in use */
static size_t Un, Ucap;
static int depth; /* ops in progress (any thread): memory is open while > 0 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what)
{
    perror(what);
    abort();
}

static void set_all(int prot)
{
    if (high && mprotect(arena, high, prot))
        die("swift_cpu_strict_ops: mprotect");
}

static void enter(void)
{
    pthread_mutex_lock(&mu);
    if (depth++ == 0)
        set_all(PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&mu);
}

static void leave(void)
{
    pthread_mutex_lock(&mu);
    if (--depth == 0)
        set_all(PROT_NONE);
    pthread_mutex_unlock(&mu);
}

static int grow(struct run **v, size_t *cap, size_t n)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    struct run *t = realloc(*v, nc * sizeof(*t));
    if (!t)
        return -1;
    *v = t;
    *cap = nc;
    return 0;
}

static void *st_alloc(size_t bytes)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + pg - 1) / pg * pg;
    if (!len)
        len = pg;
    void *p = NULL;
    pthread_mutex_lock(&mu);
    if (!arena) {
        void *a =
            mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a == MAP_FAILED)
            goto out;
        arena = a;
        if (grow(&F, &Fcap, 0) < 0)
            goto out;
        F[0] = (struct run){0, ARENA_BYTES};
        Fn = 1;
    }
    if (grow(&U, &Ucap, Un) < 0)
        goto out;
    for (size_t i = 0; i < Fn; i++) {
        if (F[i].len < len)
            continue;
        size_t off = F[i].off;
        F[i].off += len;
        F[i].len -= len;
        if (!F[i].len) {
            memmove(F + i, F + i + 1, (Fn - i - 1) * sizeof(*F));
            Fn--;
        }
        if (off + len > high) {
            high = off + len;
            if (depth) /* the new pages open like the rest while an op runs */
                set_all(PROT_READ | PROT_WRITE);
        }
        U[Un++] = (struct run){off, len};
        p = arena + off; /* zero: never touched, or mapped afresh by st_free */
        break;
    }
out:
    pthread_mutex_unlock(&mu);
    return p;
}

static void st_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&mu);
    size_t off = (size_t)((char *)p - arena), i;
    for (i = 0; i < Un && U[i].off != off; i++)
        ;
    if (i == Un || !arena || (char *)p < arena) {
        fprintf(stderr, "swift_cpu_strict_ops: free of %p, not an allocation\n", p);
        abort();
    }
    size_t len = U[i].len;
    U[i] = U[--Un];
    /* fresh zero pages, closed or open like the rest */
    if (mmap(p,
             len,
             depth ? PROT_READ | PROT_WRITE : PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
             -1,
             0) == MAP_FAILED)
        die("swift_cpu_strict_ops: mmap");
    /* back into the free list, coalesced with its neighbours */
    size_t k = 0;
    while (k < Fn && F[k].off < off)
        k++;
    int left = k > 0 && F[k - 1].off + F[k - 1].len == off;
    int right = k < Fn && off + len == F[k].off;
    if (left && right) {
        F[k - 1].len += len + F[k].len;
        memmove(F + k, F + k + 1, (Fn - k - 1) * sizeof(*F));
        Fn--;
    } else if (left) {
        F[k - 1].len += len;
    } else if (right) {
        F[k].off = off;
        F[k].len += len;
    } else {
        if (grow(&F, &Fcap, Fn) < 0)
            die("swift_cpu_strict_ops: out of memory");
        memmove(F + k + 1, F + k, (Fn - k) * sizeof(*F));
        F[k] = (struct run){off, len};
        Fn++;
    }
    pthread_mutex_unlock(&mu);
}

static void st_zero(float *x, size_t n)
{
    enter();
    memset(x, 0, n * sizeof(float));
    leave();
}
static void st_copy(float *dst, const float *src, size_t n)
{
    enter();
    memcpy(dst, src, n * sizeof(float));
    leave();
}
static void st_upload(void *dst, const void *src, size_t bytes)
{
    enter();
    memcpy(dst, src, bytes);
    leave();
}
static void st_download(void *dst, const void *src, size_t bytes)
{
    enter();
    memcpy(dst, src, bytes);
    leave();
}
static void st_sync(void)
{
}
static void st_device_trace(int on)
{
    (void)on;
}

/* every math op: open the memory, run the CPU op, close it */
#define WRAP(name, params, args)                                                                   \
    static void st_##name params                                                                   \
    {                                                                                              \
        enter();                                                                                   \
        swift_cpu_##name args;                                                                     \
        leave();                                                                                   \
    }

WRAP(matmul_fwd,
     (float *out, const float *in, const float *w, const float *bias, int N, int In, int O,
      float alpha, float beta),
     (out, in, w, bias, N, In, O, alpha, beta))
WRAP(matmul_bwd,
     (float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int N,
      int In, int O, float alpha, float din_beta),
     (din, dw, db, dout, in, w, N, In, O, alpha, din_beta))
WRAP(embed_fwd, (float *out, const int32_t *tok, const float *emb, int N, int C),
     (out, tok, emb, N, C))
WRAP(embed_bwd, (float *demb, const float *dout, const int32_t *tok, int N, int C),
     (demb, dout, tok, N, C))
WRAP(rmsnorm_fwd,
     (float *out, float *rstd, const float *in, const float *w, int N, int C, float eps),
     (out, rstd, in, w, N, C, eps))
WRAP(rmsnorm_bwd,
     (float *din, float *dw, const float *dout, const float *in, const float *w, const float *rstd,
      int N, int C),
     (din, dw, dout, in, w, rstd, N, C))
WRAP(rope_fwd, (float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D),
     (x, pos, inv_freq, N, H, D))
WRAP(rope_bwd, (float *dx, const int32_t *pos, const float *inv_freq, int N, int H, int D),
     (dx, pos, inv_freq, N, H, D))
WRAP(attention_fwd,
     (float *out, float *probs, const float *q, const float *k, const float *v, const int32_t *pos,
      int B, int T, int NH, int NKV, int D),
     (out, probs, q, k, v, pos, B, T, NH, NKV, D))
WRAP(attention_bwd,
     (float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
      const float *k, const float *v, const int32_t *pos, int B, int T, int NH, int NKV, int D),
     (dq, dk, dv, dout, probs, q, k, v, pos, B, T, NH, NKV, D))
WRAP(swiglu_fwd, (float *out, const float *gate, const float *up, size_t n), (out, gate, up, n))
WRAP(swiglu_bwd,
     (float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n),
     (dgate, dup, dout, gate, up, n))
WRAP(cross_entropy,
     (float *dlogits, double *loss_sum, long *count, long *correct, const float *logits,
      const int32_t *targets, int N, int V, float dscale),
     (dlogits, loss_sum, count, correct, logits, targets, N, V, dscale))
WRAP(add, (float *out, const float *a, const float *b, size_t n), (out, a, b, n))
WRAP(scale, (float *x, float s, size_t n), (x, s, n))
WRAP(dropout_fwd, (float *out, uint8_t *mask, const float *in, size_t n, float p, uint64_t seed),
     (out, mask, in, n, p, seed))
WRAP(dropout_bwd, (float *din, const float *dout, const uint8_t *mask, size_t n, float p),
     (din, dout, mask, n, p))
WRAP(adamw,
     (float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
      float eps, float wd, float bc1, float bc2, float gscale),
     (p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, gscale))

WRAP(copy_rows,
     (float *dst, const int32_t *dst_idx, const float *src, const int32_t *src_idx, int n,
      int width),
     (dst, dst_idx, src, src_idx, n, width))
WRAP(attention_cached,
     (float *out, const float *q, const float *kcache, const float *vcache, const int32_t *pos,
      const int32_t *row, size_t row_stride, int N, int NH, int NKV, int D),
     (out, q, kcache, vcache, pos, row, row_stride, N, NH, NKV, D))
WRAP(mul_cols,
     (float *out, const float *x, const float *g, const float *bias, size_t N, int C, float beta),
     (out, x, g, bias, N, C, beta))
WRAP(adamw8bit,
     (float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av, size_t n, double lr,
      double b1, double b2, double eps, double wd, long step, float gscale),
     (p, g, m, v, am, av, n, lr, b1, b2, eps, wd, step, gscale))

WRAP(matmul4_fwd,
     (float *out, const float *in, const struct swift_q4 *w, const float *bias, int N, int In,
      int O, float beta),
     (out, in, w, bias, N, In, O, beta))
WRAP(matmul4_bwd,
     (float *din, const float *dout, const struct swift_q4 *w, int N, int In, int O,
      float din_beta),
     (din, dout, w, N, In, O, din_beta))
WRAP(matmul8_fwd,
     (float *out, const float *in, const struct swift_q8 *w, const float *bias, int N, int In,
      int O, float beta),
     (out, in, w, bias, N, In, O, beta))
WRAP(matmul8_bwd,
     (float *din, const float *dout, const struct swift_q8 *w, int N, int In, int O,
      float din_beta),
     (din, dout, w, N, In, O, din_beta))
WRAP(attention_paged,
     (float *out, const float *q, const float *kcache, const float *vcache, const int32_t *pos,
      const int32_t *toff, const int32_t *tables, int ntables, int block_size, int N, int NH,
      int NKV, int D),
     (out, q, kcache, vcache, pos, toff, tables, ntables, block_size, N, NH, NKV, D))

WRAP(layernorm_fwd,
     (float *out, float *mean, float *rstd, const float *in, const float *w, const float *b, int N,
      int C, float eps),
     (out, mean, rstd, in, w, b, N, C, eps))
WRAP(layernorm_bwd,
     (float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
      const float *mean, const float *rstd, int N, int C),
     (din, dw, db, dout, in, w, mean, rstd, N, C))
WRAP(gelu_fwd, (float *out, const float *in, size_t n, int kind), (out, in, n, kind))
WRAP(gelu_bwd, (float *din, const float *dout, const float *in, size_t n, int kind),
     (din, dout, in, n, kind))
WRAP(attention_seg_fwd,
     (float *out, float *probs, const float *q, const float *k, const float *v, const int32_t *cu,
      int nseg, int N, int NH, int D),
     (out, probs, q, k, v, cu, nseg, N, NH, D))
WRAP(attention_seg_bwd,
     (float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
      const float *k, const float *v, const int32_t *cu, int nseg, int N, int NH, int D),
     (dq, dk, dv, dout, probs, q, k, v, cu, nseg, N, NH, D))

static double st_sumsq(const float *x, size_t n)
{
    enter();
    double s = swift_cpu_sumsq(x, n);
    leave();
    return s;
}

const struct swift_ops swift_cpu_strict_ops = {
    .name = "cpu-strict",
    .alloc = st_alloc,
    .free = st_free,
    .zero = st_zero,
    .copy = st_copy,
    .upload = st_upload,
    .download = st_download,
    .sync = st_sync,
    .device_trace = st_device_trace,
    .matmul_fwd = st_matmul_fwd,
    .matmul_bwd = st_matmul_bwd,
    .embed_fwd = st_embed_fwd,
    .embed_bwd = st_embed_bwd,
    .rmsnorm_fwd = st_rmsnorm_fwd,
    .rmsnorm_bwd = st_rmsnorm_bwd,
    .rope_fwd = st_rope_fwd,
    .rope_bwd = st_rope_bwd,
    .attention_fwd = st_attention_fwd,
    .attention_bwd = st_attention_bwd,
    .swiglu_fwd = st_swiglu_fwd,
    .swiglu_bwd = st_swiglu_bwd,
    .cross_entropy = st_cross_entropy,
    .add = st_add,
    .scale = st_scale,
    .sumsq = st_sumsq,
    .dropout_fwd = st_dropout_fwd,
    .dropout_bwd = st_dropout_bwd,
    .adamw = st_adamw,
    .copy_rows = st_copy_rows,
    .attention_cached = st_attention_cached,
    .mul_cols = st_mul_cols,
    .adamw8bit = st_adamw8bit,
    .matmul4_fwd = st_matmul4_fwd,
    .matmul4_bwd = st_matmul4_bwd,
    .matmul8_fwd = st_matmul8_fwd,
    .matmul8_bwd = st_matmul8_bwd,
    .attention_paged = st_attention_paged,
    .set_matmul_math = swift_cpu_set_matmul_math, /* touches no backend memory */
    .layernorm_fwd = st_layernorm_fwd,
    .layernorm_bwd = st_layernorm_bwd,
    .gelu_fwd = st_gelu_fwd,
    .gelu_bwd = st_gelu_bwd,
    .attention_seg_fwd = st_attention_seg_fwd,
    .attention_seg_bwd = st_attention_seg_bwd,
};
