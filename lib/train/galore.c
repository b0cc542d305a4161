/* galore — see galore.h. */
#include "lib/train/galore.h"
#include "lib/core/mem.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

/* LAPACK (in libopenblas): column-major divide-and-conquer SVD */
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s,
             float *u, const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork,
             int *iwork, int *info, size_t jobz_len);

static const char *const linears[] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", NULL};

/* does name end with ".<w>" or equal w (w of length n)? */
static int ends_with_module(const char *name, size_t nl, const char *w, size_t n)
{
    return n && n <= nl && !strncmp(name + nl - n, w, n) && (n == nl || name[nl - n - 1] == '.');
}

int swift_galore_targets(const char *targets, const struct swift_param *p)
{
    if (p->ndim != 2 || !p->g)
        return 0;
    size_t nl = strlen(p->name);
    if (nl > 7 && !strcmp(p->name + nl - 7, ".weight"))
        nl -= 7;
    int linear = 0; /* an attention or MLP linear: never embeddings, lm_head, norms */
    for (int i = 0; linears[i] && !linear; i++)
        linear = ends_with_module(p->name, nl, linears[i], strlen(linears[i]));
    if (!linear)
        return 0;
    if (!strcmp(targets, "all-linear"))
        return 1;
    for (const char *s = targets; *s;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        while (n && *s == ' ') {
            s++;
            n--;
        }
        while (n && s[n - 1] == ' ')
            n--;
        if (ends_with_module(p->name, nl, s, n))
            return 1;
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

/* The SVD workspace for an item of rows x cols (column-major: cols x rows), in floats. */
static int svd_work(struct swift_galore_item *it, float *work, int *iwork, size_t *lw)
{
    int m = it->cols, n = it->rows, mn = m < n ? m : n, lwork = -1, info = 0;
    float q = 0;
    sgesdd_("S", &m, &n, work, &m, work, work, &m, work, &mn, &q, &lwork, iwork, &info, 1);
    if (info != 0)
        return -1;
    *lw = (size_t)q + 1;
    return 0;
}

int swift_galore_init(struct swift_galore *g, const struct swift_ops *ops, struct swift_param *p,
                      int np, const struct swift_galore_opts *go, float b1, float b2, float eps,
                      float wd)
{
    memset(g, 0, sizeof(*g));
    g->ops = ops;
    g->gap = go->gap > 0 ? go->gap : 1;
    g->scale = (float)go->scale;
    g->b1 = b1;
    g->b2 = b2;
    g->eps = eps;
    g->wd = wd;
    g->it = calloc((size_t)(np > 0 ? np : 1), sizeof(*g->it));
    if (!g->it)
        return swift_error("out of memory for the GaLore state");
    size_t maxfull = 1, maxlow = 1, maxsvd = 1, maxmn = 1;
    for (int i = 0; i < np; i++) {
        if (!swift_galore_targets(go->targets, &p[i]))
            continue;
        struct swift_galore_item *it = &g->it[g->n++];
        it->p = &p[i];
        it->rows = (int)p[i].shape[0];
        it->cols = (int)p[i].shape[1];
        int mn = it->rows < it->cols ? it->rows : it->cols;
        it->k = go->rank < mn ? go->rank : mn;
        it->left = it->rows < it->cols;
        size_t np_ = (size_t)it->k * (size_t)(it->left ? it->rows : it->cols);
        size_t nl = (size_t)it->k * (size_t)(it->left ? it->cols : it->rows);
        it->P =
            swift_mem_track(calloc(np_, sizeof(float)), SWIFT_MEM_OPTIMIZER, np_ * sizeof(float));
        it->m = swift_mem_track(calloc(nl, sizeof(float)), SWIFT_MEM_OPTIMIZER, nl * sizeof(float));
        it->v = swift_mem_track(calloc(nl, sizeof(float)), SWIFT_MEM_OPTIMIZER, nl * sizeof(float));
        if (!it->P || !it->m || !it->v) {
            swift_galore_free(g);
            return swift_error("out of memory for the GaLore state");
        }
        g->state += np_ + 2 * nl;
        size_t full = p[i].numel, lw = 0;
        maxfull = full > maxfull ? full : maxfull;
        maxlow = nl > maxlow ? nl : maxlow;
        maxmn = (size_t)mn > maxmn ? (size_t)mn : maxmn;
        int dummy_iwork[1];
        float dummy = 0;
        if (svd_work(it, &dummy, dummy_iwork, &lw) < 0) {
            swift_galore_free(g);
            return swift_error("%s: LAPACK sgesdd workspace query failed", p[i].name);
        }
        /* A copy, s, U' (cols x mn), VT' (mn x rows), work */
        size_t need = full + (size_t)mn + (size_t)it->cols * mn + (size_t)mn * it->rows + lw;
        maxsvd = need > maxsvd ? need : maxsvd;
    }
    if (g->n == 0) {
        swift_galore_free(g);
        return swift_error("--galore-target-modules '%s' selects no attention or MLP weight",
                           go->targets);
    }
    g->svd_floats = maxsvd;
    g->hw =
        swift_mem_track(malloc(maxfull * sizeof(float)), SWIFT_MEM_OTHER, maxfull * sizeof(float));
    g->hg =
        swift_mem_track(malloc(maxfull * sizeof(float)), SWIFT_MEM_OTHER, maxfull * sizeof(float));
    g->full =
        swift_mem_track(malloc(maxfull * sizeof(float)), SWIFT_MEM_OTHER, maxfull * sizeof(float));
    g->low =
        swift_mem_track(malloc(maxlow * sizeof(float)), SWIFT_MEM_OTHER, maxlow * sizeof(float));
    g->svd =
        swift_mem_track(malloc(maxsvd * sizeof(float)), SWIFT_MEM_OTHER, maxsvd * sizeof(float));
    g->iwork = malloc(8 * maxmn * sizeof(int));
    if (!g->hw || !g->hg || !g->full || !g->low || !g->svd || !g->iwork) {
        swift_galore_free(g);
        return swift_error("out of memory for the GaLore scratch");
    }
    return g->n;
}

int swift_galore_index(const struct swift_galore *g, const struct swift_param *p)
{
    for (int i = 0; i < g->n; i++)
        if (g->it[i].p == p)
            return i;
    return -1;
}

/* Row-major grad (rows x cols) is column-major A' = grad^T (cols x rows) = U' S VT', so
 * grad = VT'^T S U'^T: torch's Vh[:k] are U''s first k columns (contiguous), and U[:, :k] is
 * VT' read row-major (row stride mn). */
int swift_galore_refresh(struct swift_galore *g, struct swift_galore_item *it, const float *grad)
{
    int m = it->cols, n = it->rows, mn = m < n ? m : n, info = 0;
    size_t full = (size_t)m * (size_t)n;
    float *a = g->svd, *s = a + full, *u = s + mn, *vt = u + (size_t)m * mn,
          *work = vt + (size_t)mn * n;
    int lwork = (int)(g->svd_floats - (size_t)(work - g->svd));
    memcpy(a, grad, full * sizeof(float));
    sgesdd_("S", &m, &n, a, &m, s, u, &m, vt, &mn, work, &lwork, g->iwork, &info, 1);
    if (info != 0)
        return swift_error(
            "%s: the SVD of the gradient failed (LAPACK sgesdd info %d)", it->p->name, info);
    if (!it->left) /* P = Vh[:k] (k x cols) */
        memcpy(it->P, u, (size_t)it->k * m * sizeof(float));
    else /* P = U[:, :k] (rows x k) */
        for (int i = 0; i < n; i++)
            memcpy(it->P + (size_t)i * it->k, vt + (size_t)i * mn, (size_t)it->k * sizeof(float));
    return 0;
}

/* One item: hg holds its (scaled) gradient, hw its weight. */
static void item_update(struct swift_galore *g, struct swift_galore_item *it, float lr,
                        double step_size)
{
    int R = it->rows, C = it->cols, k = it->k;
    float *low = g->low, *full = g->full, *w = g->hw;
    size_t nl = (size_t)k * (size_t)(it->left ? C : R), nf = (size_t)R * C;
    if (!it->left) /* R = G P^T: (R x C)(C x k) */
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasTrans,
                    R,
                    k,
                    C,
                    1.0f,
                    g->hg,
                    C,
                    it->P,
                    C,
                    0.0f,
                    low,
                    k);
    else /* R = P^T G: (k x R)(R x C) */
        cblas_sgemm(CblasRowMajor,
                    CblasTrans,
                    CblasNoTrans,
                    k,
                    C,
                    R,
                    1.0f,
                    it->P,
                    k,
                    g->hg,
                    C,
                    0.0f,
                    low,
                    C);
    float b1 = g->b1, b2 = g->b2, eps = g->eps;
    for (size_t i = 0; i < nl; i++) {
        float x = low[i];
        it->m[i] = it->m[i] * b1 + (1.0f - b1) * x;
        it->v[i] = it->v[i] * b2 + (1.0f - b2) * x * x;
        low[i] = it->m[i] / (sqrtf(it->v[i]) + eps);
    }
    if (!it->left) /* back: N P (R x k)(k x C) */
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    R,
                    C,
                    k,
                    1.0f,
                    low,
                    k,
                    it->P,
                    C,
                    0.0f,
                    full,
                    C);
    else /* back: P N (R x k)(k x C) */
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    R,
                    C,
                    k,
                    1.0f,
                    it->P,
                    k,
                    low,
                    C,
                    0.0f,
                    full,
                    C);
    float alpha = (float)-step_size, scale = g->scale;
    for (size_t i = 0; i < nf; i++)
        w[i] += alpha * (full[i] * scale);
    float wd = it->p->decay ? g->wd : 0.0f;
    if (wd > 0) {
        float a2 = (float)(-(double)lr * (double)wd);
        for (size_t i = 0; i < nf; i++)
            w[i] += a2 * w[i];
    }
}

int swift_galore_step_item(struct swift_galore *g, int i, float lr, float gscale)
{
    long t = g->step; /* the projector's iter: the count before this step */
    double bc1 = 1.0 - pow((double)g->b1, (double)(t + 1)),
           bc2 = 1.0 - pow((double)g->b2, (double)(t + 1));
    double step_size = (double)lr * sqrt(bc2) / bc1;
    struct swift_galore_item *it = &g->it[i];
    size_t nf = it->p->numel;
    g->ops->download(g->hg, it->p->g, nf * sizeof(float));
    g->ops->download(g->hw, it->p->w, nf * sizeof(float));
    if (gscale != 1.0f)
        for (size_t j = 0; j < nf; j++)
            g->hg[j] *= gscale;
    if (t % g->gap == 0) {
        if (swift_galore_refresh(g, it, g->hg) < 0)
            return -1;
        if (g->on_refresh)
            g->on_refresh(g->hook_ctx, i, it);
    }
    item_update(g, it, lr, step_size);
    g->ops->upload(it->p->w, g->hw, nf * sizeof(float));
    return 0;
}

void swift_galore_step_done(struct swift_galore *g)
{
    g->step++;
    g->ops->sync();
}

int swift_galore_step(struct swift_galore *g, float lr, float gscale)
{
    for (int i = 0; i < g->n; i++)
        if (swift_galore_step_item(g, i, lr, gscale) < 0)
            return -1;
    swift_galore_step_done(g);
    return 0;
}

/* free a tracked buffer (lib/core/mem.h) */
static void tfree(void *p)
{
    swift_mem_untrack(p);
    free(p);
}

void swift_galore_free(struct swift_galore *g)
{
    for (int i = 0; g->it && i < g->n; i++) {
        tfree(g->it[i].P);
        tfree(g->it[i].m);
        tfree(g->it[i].v);
    }
    free(g->it);
    tfree(g->hw);
    tfree(g->hg);
    tfree(g->full);
    tfree(g->low);
    tfree(g->svd);
    free(g->iwork);
    memset(g, 0, sizeof(*g));
}
