/* gptq — GPTQ on one weight matrix (lib/export/gptq_solve.h). */
#include "lib/export/gptq_solve.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"

#include <stdio.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* LAPACK (in OpenBLAS), Fortran calling convention with the hidden string lengths. */
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info,
                    size_t uplo_len);
extern void spotri_(const char *uplo, const int *n, float *a, const int *lda, int *info,
                    size_t uplo_len);

void swift_gptq_hessian_add(float *H, const float *x, int n, int in)
{
    if (n <= 0)
        return;
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, in, n, 1.0f, x, in, 1.0f, H, in);
}

/* GPTQ's Quantizer.find_params(sym=True) on one row's group of values. */
static float group_scale(const float *x, int n, int maxq)
{
    float xmin = 0, xmax = 0;
    for (int k = 0; k < n; k++) {
        xmin = fminf(xmin, x[k]);
        xmax = fmaxf(xmax, x[k]);
    }
    xmax = fmaxf(fabsf(xmin), xmax);
    if (xmin < 0)
        xmin = -xmax;
    if (xmin == 0 && xmax == 0) {
        xmin = -1;
        xmax = 1;
    }
    return (xmax - xmin) / (float)maxq;
}

static inline int quantize1(float x, float s, int zero, int maxq)
{
    float r = nearbyintf(x / s) + (float)zero; /* torch.round: half to even */
    return r < 0 ? 0 : r > (float)maxq ? maxq : (int)r;
}

void swift_gptq_rtn(float *W, int out, int in, int bits, int group, int scale16, uint8_t *codes,
                    float *scales)
{
    const int maxq = (1 << bits) - 1, zero = (maxq + 1) / 2;
    const int ng = in / group;
#pragma omp parallel for schedule(static)
    for (int o = 0; o < out; o++)
        for (int g = 0; g < ng; g++) {
            float *x = W + (size_t)o * in + (size_t)g * group;
            float s = group_scale(x, group, maxq);
            if (scale16)
                s = swift_fp16_to_fp32(swift_fp32_to_fp16(s));
            scales[(size_t)g * out + o] = s;
            for (int k = 0; k < group; k++) {
                int q = quantize1(x[k], s, zero, maxq);
                codes[(size_t)o * in + (size_t)g * group + k] = (uint8_t)q;
                x[k] = s * (float)(q - zero);
            }
        }
}

/* H (upper, row-major) → U, the upper Cholesky factor of H^-1, row-major in the upper triangle.
 * Row-major upper = column-major lower, so LAPACK works on 'L': H = L L^T, potri gives H^-1 in
 * the same triangle, and potrf('L') of H^-1 = L' L'^T whose transpose L'^T (= U, H^-1 = U^T U)
 * is the row-major upper triangle. */
static int hinv_factor(float *H, int n, const char *name)
{
    int info = 0;
    spotrf_("L", &n, H, &n, &info, 1);
    if (info > 0)
        return swift_error("%s: the damped Hessian is not positive definite (leading minor %d); "
                           "raise --damp or use more calibration samples",
                           name,
                           info);
    spotri_("L", &n, H, &n, &info, 1);
    if (info > 0)
        return swift_error("%s: the damped Hessian is singular (pivot %d)", name, info);
    spotrf_("L", &n, H, &n, &info, 1);
    if (info > 0)
        return swift_error(
            "%s: the inverse Hessian is not positive definite (leading minor %d)", name, info);
    if (info < 0)
        return swift_error("%s: LAPACK argument %d is invalid", name, -info);
    return 0;
}

int swift_gptq_quantize(float *W, float *H, int out, int in, const struct swift_gptq_params *p,
                        uint8_t *codes, float *scales, struct swift_gptq_stats *st,
                        const char *name)
{
    const int maxq = (1 << p->bits) - 1, zero = (maxq + 1) / 2;
    const int group = p->group, block = p->block > 0 ? p->block : 128;
    if (group <= 0 || in % group)
        return swift_error(
            "%s: in_features %d is not a multiple of the group size %d", name, in, group);
    memset(st, 0, sizeof(*st));
    /* dead inputs, damping */
    double mean = 0;
    for (int i = 0; i < in; i++) {
        float *d = &H[(size_t)i * in + i];
        if (*d == 0) {
            *d = 1;
            st->dead_columns++;
            for (int o = 0; o < out; o++)
                W[(size_t)o * in + i] = 0;
        }
        mean += *d;
    }
    float damp = p->damp * (float)(mean / in);
    for (int i = 0; i < in; i++)
        H[(size_t)i * in + i] += damp;
    if (hinv_factor(H, in, name) < 0)
        return -1;
    const float *U = H;
    float *err = swift_xmalloc((size_t)out * block * sizeof(float));
    float *work = swift_xmalloc((size_t)out * block * sizeof(float)); /* rows' block copies */
    float *cur = swift_xmalloc((size_t)out * sizeof(float)); /* rows' current group scale */
    double loss = 0;
    for (int i1 = 0; i1 < in; i1 += block) {
        const int i2 = i1 + block < in ? i1 + block : in, bs = i2 - i1;
#pragma omp parallel for reduction(+ : loss) schedule(static)
        for (int o = 0; o < out; o++) {
            float *w = W + (size_t)o * in; /* as at the block's start, until written back */
            float *w1 = work + (size_t)o * bs;
            float *e = err + (size_t)o * bs;
            memcpy(w1, w + i1, (size_t)bs * sizeof(float));
            for (int i = 0; i < bs; i++) {
                const int c = i1 + i;
                if (c % group == 0) {
                    cur[o] = group_scale(w + c, group, maxq);
                    scales[(size_t)(c / group) * out + o] = cur[o];
                }
                const float s = cur[o], x = w1[i];
                const int q = quantize1(x, s, zero, maxq);
                const float deq = s * (float)(q - zero);
                const float *u = U + (size_t)c * in + i1; /* row c of U, the block's columns */
                const float d = u[i];
                const float ei = (x - deq) / d;
                codes[(size_t)o * in + c] = (uint8_t)q;
                w[c] = deq;
                e[i] = ei;
                loss += 0.5 * (double)ei * ei;
                for (int j = i + 1; j < bs; j++)
                    w1[j] -= ei * u[j];
            }
        }
        if (i2 < in)
            cblas_sgemm(CblasRowMajor,
                        CblasNoTrans,
                        CblasNoTrans,
                        out,
                        in - i2,
                        bs,
                        -1.0f,
                        err,
                        bs,
                        U + (size_t)i1 * in + i2,
                        in,
                        1.0f,
                        W + i2,
                        in);
    }
    st->loss = loss;
    free(err);
    free(work);
    free(cur);
    return 0;
}

double swift_gptq_output_error(const float *W, const float *Wq, const float *H, int out, int in)
{
    /* tr(A H A^T) = sum(A .* (A H)) for A = D and A = W; ssymm reads H's upper triangle only */
    const size_t nw = (size_t)out * in;
    float *D = swift_xcalloc(nw, sizeof(float));
    float *T = swift_xcalloc(nw, sizeof(float));
    double num = 0, den = 0;
    for (size_t k = 0; k < nw; k++)
        D[k] = W[k] - Wq[k];
    cblas_ssymm(CblasRowMajor, CblasRight, CblasUpper, out, in, 1.0f, H, in, D, in, 0.0f, T, in);
    for (size_t k = 0; k < nw; k++)
        num += (double)D[k] * T[k];
    cblas_ssymm(CblasRowMajor, CblasRight, CblasUpper, out, in, 1.0f, H, in, W, in, 0.0f, T, in);
    for (size_t k = 0; k < nw; k++)
        den += (double)W[k] * T[k];
    free(D);
    free(T);
    return den > 0 ? num / den : num;
}

static const struct swift_st_tensor *gptq_part(const struct swift_st_set *set, const char *name,
                                               const char *part, enum swift_dtype dt, int ndim,
                                               int required)
{
    char buf[512];
    size_t n = strlen(name), np = strlen(part);
    if (n < 6 || n - 6 + np >= sizeof(buf) || strcmp(name + n - 6, "weight")) {
        swift_error("%s: no tensor '%s'", set->dir, name);
        return NULL;
    }
    memcpy(buf, name, n - 6);
    memcpy(buf + n - 6, part, np + 1);
    const struct swift_st_tensor *t = swift_st_set_find(set, buf);
    if (!t) {
        if (required)
            swift_error("%s: missing tensor '%s' (nor '%s')", set->dir, name, buf);
        return NULL;
    }
    if (t->dtype != dt || t->ndim != ndim) {
        swift_error("%s: tensor '%s' has dtype %s and %d dims (%s, %d expected)",
                    t->path,
                    buf,
                    swift_dtype_name(t->dtype),
                    t->ndim,
                    swift_dtype_name(dt),
                    ndim);
        return NULL;
    }
    return t;
}

static inline uint32_t word_at(const struct swift_st_tensor *t, uint64_t i)
{
    uint32_t w;
    memcpy(&w, (const char *)t->data + i * 4, 4);
    return w;
}

int swift_gptq_dequant_set(const struct swift_st_set *set, const char *name, int out, int in,
                           int zeros_minus_one, float *W)
{
    const struct swift_st_tensor *qw, *qz, *sc, *gi;
    if (!(qw = gptq_part(set, name, "qweight", SWIFT_DTYPE_I32, 2, 1)) ||
        !(qz = gptq_part(set, name, "qzeros", SWIFT_DTYPE_I32, 2, 1)) ||
        !(sc = gptq_part(set, name, "scales", SWIFT_DTYPE_F16, 2, 1)))
        return -1;
    gi = gptq_part(set, name, "g_idx", SWIFT_DTYPE_I32, 1, 0);
    int64_t rows = qw->shape[0];
    int pack = rows > 0 && in % rows == 0 ? (int)(in / rows) : 0;
    int bits = pack ? 32 / pack : 0;
    int64_t ng = sc->shape[0];
    if ((bits != 2 && bits != 4 && bits != 8) || 32 % pack || qw->shape[1] != out ||
        sc->shape[1] != out || ng <= 0 || in % ng || qz->shape[0] != ng || out % pack ||
        qz->shape[1] != out / pack || (gi && gi->shape[0] != in))
        return swift_error("%s: GPTQ tensors of '%s' do not fit a [%d,%d] weight: qweight "
                           "[%lld,%lld], qzeros [%lld,%lld], scales [%lld,%lld]",
                           qw->path,
                           name,
                           out,
                           in,
                           (long long)qw->shape[0],
                           (long long)qw->shape[1],
                           (long long)qz->shape[0],
                           (long long)qz->shape[1],
                           (long long)sc->shape[0],
                           (long long)sc->shape[1]);
    const uint32_t mask = (1u << bits) - 1;
    const int64_t group = in / ng;
    for (int i = 0; i < in; i++) {
        int64_t g = i / group;
        if (gi) {
            g = (int32_t)word_at(gi, (uint64_t)i);
            if (g < 0 || g >= ng)
                return swift_error("%s: '%.*sg_idx'[%d] = %lld is not a group (0..%lld)",
                                   gi->path,
                                   (int)(strlen(name) - 6),
                                   name,
                                   i,
                                   (long long)g,
                                   (long long)ng - 1);
        }
        for (int o = 0; o < out; o++) {
            uint32_t q =
                (word_at(qw, (uint64_t)(i / pack) * out + o) >> (bits * (i % pack))) & mask;
            uint32_t z =
                (word_at(qz, (uint64_t)g * (out / pack) + o / pack) >> (bits * (o % pack))) & mask;
            uint16_t h;
            memcpy(&h, (const char *)sc->data + ((uint64_t)g * out + o) * 2, 2);
            if (zeros_minus_one) /* as auto-gptq's loaders: (stored + 1) & mask */
                z = (z + 1) & mask;
            float zero = (float)z;
            W[(size_t)o * in + i] = swift_fp16_to_fp32(h) * ((float)q - zero);
        }
    }
    return 0;
}
