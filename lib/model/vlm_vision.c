/* vlm vision — the vision tower of Qwen2-VL / Qwen2.5-VL (see vlm.h): the per-batch plan
 * (patch order, rotary positions, attention segments), its buffers, forward and backward. */
#include "lib/model/vlm.h"
#include "lib/core/alloc.h"
#include "lib/core/mem.h"
#include "lib/model/vlm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

/* ---- the plan ---- */

/* transformers' get_vision_window_index for one image of gh x gw merged tokens (t = 1) whose
 * first merged token is g0: the merged tokens window by window appended to win[*nw..], the
 * windows' ends (in patches, after *cuw's last) to cuw; empty windows are skipped (HF's
 * unique_consecutive). */
static void window_index(int gh, int gw, int ws, int g0, int mu, int32_t *win, int *nw,
                         int32_t *cuw, int *ncu)
{
    int nwh = (gh + ws - gh % ws) / ws, nww = (gw + ws - gw % ws) / ws;
    for (int a = 0; a < nwh; a++)
        for (int b = 0; b < nww; b++) {
            int cnt = 0;
            for (int i = a * ws; i < a * ws + ws && i < gh; i++)
                for (int j = b * ws; j < b * ws + ws && j < gw; j++) {
                    win[(*nw)++] = g0 + i * gw + j;
                    cnt++;
                }
            if (cnt) {
                cuw[*ncu + 1] = cuw[*ncu] + cnt * mu;
                (*ncu)++;
            }
        }
}

static int check_grids(const struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    int ms = v->vc.merge_size;
    long total = 0;
    for (int i = 0; i < b->nimages; i++) {
        const int32_t *g = b->grid_thw + 3 * i;
        if (g[0] != 1)
            return swift_error("image %d: grid t = %d (videos are not supported yet)", i, g[0]);
        if (g[1] <= 0 || g[2] <= 0 || g[1] % ms || g[2] % ms || g[1] > 1 << 14 || g[2] > 1 << 14)
            return swift_error(
                "image %d: grid %dx%d is not a positive multiple of the merge size %d",
                i,
                g[1],
                g[2],
                ms);
        total += (long)g[1] * g[2];
    }
    if (total != b->npatches)
        return swift_error("the grids hold %ld patches, the pixels %d", total, b->npatches);
    return 0;
}

/* patch order, rotary positions and segments of every image (host arrays of va) */
static void plan_images(struct swift_vlm *v, const struct swift_vlm_batch *b, int32_t *win)
{
    struct swift_vlm_acts *va = v->va;
    int ms = v->vc.merge_size, mu = ms * ms;
    int ws = v->vc.v25 ? v->vc.window_size / ms / v->vc.patch_size : 0;
    int p0 = 0, g0 = 0, nw = 0;
    int32_t *h0 = swift_xmalloc((size_t)(b->npatches ? b->npatches : 1) * 2 * sizeof(int32_t));
    int32_t *w0 = h0 + b->npatches;
    va->nfull = va->nwin = 0;
    va->cu_full[0] = va->cu_win[0] = 0;
    for (int i = 0; i < b->nimages; i++) {
        int gh = b->grid_thw[3 * i + 1], gw = b->grid_thw[3 * i + 2];
        int k = p0; /* rotary positions block-major over the merge groups */
        for (int hb = 0; hb < gh / ms; hb++)
            for (int wb = 0; wb < gw / ms; wb++)
                for (int a = 0; a < ms; a++)
                    for (int c = 0; c < ms; c++, k++) {
                        h0[k] = hb * ms + a;
                        w0[k] = wb * ms + c;
                    }
        va->cu_full[va->nfull + 1] = p0 + gh * gw;
        va->nfull++;
        if (ws > 0)
            window_index(gh / ms, gw / ms, ws, g0, mu, win, &nw, va->cu_win, &va->nwin);
        else
            for (int g = 0; g < gh * gw / mu; g++)
                win[nw++] = g0 + g;
        p0 += gh * gw;
        g0 += gh * gw / mu;
    }
    for (int g = 0; g < g0; g++)
        for (int u = 0; u < mu; u++) {
            int to = g * mu + u, from = win[g] * mu + u;
            va->perm[to] = from;
            va->hpos[to] = h0[from];
            va->wpos[to] = w0[from];
        }
    free(h0);
}

static float *vact(struct swift_vlm *v, size_t n)
{
    struct swift_vlm_acts *a = v->va;
    if (a->nblocks == a->capblocks) {
        a->capblocks = a->capblocks ? a->capblocks * 2 : 64;
        a->blocks = swift_xrealloc(a->blocks, (size_t)a->capblocks * sizeof(*a->blocks));
    }
    float *p = swift_mem_alloc(v->ops->alloc, SWIFT_MEM_ACTIVATIONS, (n ? n : 1) * sizeof(float));
    if (p)
        a->blocks[a->nblocks++] = p;
    return p;
}

static void free_buffers(struct swift_vlm *v)
{
    struct swift_vlm_acts *a = v->va;
    for (int i = 0; i < a->nblocks; i++)
        swift_mem_free(v->ops->free, a->blocks[i]);
    a->nblocks = 0;
    free(a->ba);
    a->ba = NULL;
    a->capP = a->capNm = 0;
    a->capprobs = 0;
}

/* backend buffers for P patches, Nm merged tokens, probs floats per block */
static int grow(struct swift_vlm *v, int P, int Nm, size_t probs)
{
    struct swift_vlm_acts *a = v->va;
    if (P <= a->capP && Nm <= a->capNm && probs <= a->capprobs && a->ba)
        return 0;
    free_buffers(v);
    const struct swift_vlm_config *c = &v->vc;
    size_t p = (size_t)P, E = (size_t)c->embed_dim, I = (size_t)c->mlp_dim;
    size_t M = E * c->merge_size * c->merge_size, H = (size_t)c->out_dim, nm = (size_t)Nm;
    a->ba = swift_xcalloc((size_t)c->depth, sizeof(*a->ba));
#define A(ptr, n)                                                                                  \
    do {                                                                                           \
        if (!((ptr) = vact(v, (n))))                                                               \
            goto oom;                                                                              \
    } while (0)
    A(a->pix, p * c->patch_dim);
    A(a->res, (size_t)(c->depth + 1) * p * E);
    for (int l = 0; l < c->depth; l++) {
        struct vit_acts *b = &a->ba[l];
        A(b->ln1, p * E);
        A(b->m1, p);
        A(b->r1, p);
        A(b->q, p * E);
        A(b->k, p * E);
        A(b->v, p * E);
        A(b->probs, probs);
        A(b->att, p * E);
        A(b->mid, p * E);
        A(b->ln2, p * E);
        A(b->m2, p);
        A(b->r2, p);
        A(b->h, p * I);
        if (c->v25)
            A(b->u, p * I);
        A(b->a, p * I);
    }
    A(a->lnm, p * E);
    A(a->mm, p);
    A(a->mr, p);
    A(a->h1, nm * M);
    A(a->a1, nm * M);
    A(a->merged, nm * H);
    A(a->dres, p * E);
    A(a->dln, p * E);
    A(a->datt, p * E);
    A(a->dq, p * E);
    A(a->dk, p * E);
    A(a->dv, p * E);
    A(a->dh, p * I);
    A(a->du, p * I);
    A(a->da, p * I);
    A(a->dlnm, p * E);
    A(a->dh1, nm * M);
    A(a->da1, nm * M);
    A(a->dmerged, nm * H);
    A(a->zeros, nm * H);
#undef A
    a->capP = P;
    a->capNm = Nm;
    a->capprobs = probs;
    return 0;
oom:
    free_buffers(v);
    return swift_error("out of memory for the vision tower's activations (%d patches)", P);
}

int swift_vlm_plan(struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    if (!v->va)
        v->va = swift_xcalloc(1, sizeof(*v->va));
    struct swift_vlm_acts *va = v->va;
    if (b->nimages < 0 || b->npatches < 0 || (b->nimages && (!b->grid_thw || !b->pixels)))
        return swift_error("images without grids or pixels");
    if (check_grids(v, b) < 0)
        return -1;
    int P = b->npatches, mu = v->vc.merge_size * v->vc.merge_size, Nm = P / mu;
    size_t N = (size_t)b->B * b->T, n1 = (size_t)(P ? P : 1);
    va->perm = swift_xrealloc(va->perm, n1 * sizeof(int32_t));
    va->hpos = swift_xrealloc(va->hpos, n1 * sizeof(int32_t));
    va->wpos = swift_xrealloc(va->wpos, n1 * sizeof(int32_t));
    va->cu_full = swift_xrealloc(va->cu_full, (size_t)(b->nimages + 1) * sizeof(int32_t));
    va->cu_win = swift_xrealloc(va->cu_win, (n1 + 1) * sizeof(int32_t));
    va->dst = swift_xrealloc(va->dst, (size_t)(Nm ? Nm : 1) * sizeof(int32_t));
    va->pos = swift_xrealloc(va->pos, N * sizeof(int32_t));
    va->pos3 = swift_xrealloc(va->pos3, 3 * N * sizeof(int32_t));
    va->P = P;
    va->Nm = Nm;
    va->N = (int)N;
    for (size_t n = 0; n < N; n++)
        va->pos[n] = b->pos ? b->pos[n] : (int32_t)(n % (size_t)b->T);
    if (swift_vlm_rope_index_docs(
            &v->vc, b->tokens, b->pos, b->B, b->T, b->grid_thw, b->nimages, va->pos3) < 0)
        return -1;
    if (!P)
        return 0;
    va->win = swift_xrealloc(va->win, (size_t)Nm * sizeof(int32_t));
    int32_t *win = va->win;
    plan_images(v, b, win);
    /* merged token g (tower order) is image token win[g] of the batch's pads in order */
    int32_t *pads = swift_xmalloc((size_t)Nm * sizeof(int32_t));
    int np = 0;
    for (size_t n = 0; n < N && np < Nm; n++)
        if (b->tokens[n] == v->vc.image_token_id)
            pads[np++] = (int32_t)n;
    for (int g = 0; g < Nm; g++)
        va->dst[g] = pads[win[g]];
    free(pads);
    size_t pd = (size_t)v->vc.patch_dim, probs = 0;
    va->hostpix = swift_xrealloc(va->hostpix, (size_t)P * pd * sizeof(float));
    for (int i = 0; i < P; i++)
        memcpy(
            va->hostpix + (size_t)i * pd, b->pixels + (size_t)va->perm[i] * pd, pd * sizeof(float));
    for (int i = 0; i < va->nfull; i++) {
        size_t L = (size_t)(va->cu_full[i + 1] - va->cu_full[i]);
        probs += L * L * (size_t)v->vc.num_heads;
    }
    return grow(v, P, Nm, probs);
}

void swift_vlm_vision_free(struct swift_vlm *v)
{
    struct swift_vlm_acts *a = v->va;
    if (!a)
        return;
    free_buffers(v);
    free(a->blocks);
    free(a->perm);
    free(a->hpos);
    free(a->wpos);
    free(a->cu_full);
    free(a->cu_win);
    free(a->dst);
    free(a->win);
    free(a->pos);
    free(a->pos3);
    free(a->hostpix);
    free(a);
    v->va = NULL;
}

/* ---- forward ---- */

static void vlin_fwd(const struct swift_ops *ops, const struct swift_vlin *L, float *out,
                     const float *x, int N, float beta)
{
    ops->matmul_fwd(out, x, L->w, L->b, N, L->in, L->out, 1.0f, beta);
}

static void vlin_bwd(const struct swift_ops *ops, const struct swift_vlin *L, float *dx,
                     float dx_beta, const float *dout, const float *x, int N)
{
    ops->matmul_bwd(dx, L->gw, L->gb, dout, x, L->w, N, L->in, L->out, 1.0f, dx_beta);
}

static int full_block(const struct swift_vlm *v, int l)
{
    if (!v->vc.v25)
        return 1;
    for (int i = 0; i < v->vc.nfullatt; i++)
        if (v->vc.fullatt[i] == l)
            return 1;
    return 0;
}

static void norm_fwd(const struct swift_ops *ops, float *out, float *mean, float *rstd,
                     const float *x, const float *w, const float *b, int N, int C, int ln)
{
    if (ln)
        ops->layernorm_fwd(out, mean, rstd, x, w, b, N, C, 1e-6f);
    else
        ops->rmsnorm_fwd(out, rstd, x, w, N, C, 1e-6f);
}

static void norm_bwd(const struct swift_ops *ops, float *dx, float *dw, float *db,
                     const float *dout, const float *x, const float *w, const float *mean,
                     const float *rstd, int N, int C, int ln)
{
    if (ln)
        ops->layernorm_bwd(dx, dw, db, dout, x, w, mean, rstd, N, C);
    else
        ops->rmsnorm_bwd(dx, dw, dout, x, w, rstd, N, C);
}

static void block_fwd(struct swift_vlm *v, int l)
{
    const struct swift_ops *ops = v->ops;
    const struct swift_vlm_config *c = &v->vc;
    struct swift_vlm_acts *va = v->va;
    struct swift_vit_block *bl = &v->blocks[l];
    struct vit_acts *a = &va->ba[l];
    int P = va->P, E = c->embed_dim, NH = c->num_heads, D = c->head_dim, ln = !c->v25;
    const float *x = va->res + (size_t)l * P * E;
    float *y = va->res + (size_t)(l + 1) * P * E;
    norm_fwd(ops, a->ln1, a->m1, a->r1, x, bl->n1w, bl->n1b, P, E, ln);
    vlin_fwd(ops, &bl->q, a->q, a->ln1, P, 0.0f);
    vlin_fwd(ops, &bl->k, a->k, a->ln1, P, 0.0f);
    vlin_fwd(ops, &bl->v, a->v, a->ln1, P, 0.0f);
    ops->rope_fwd(a->q, va->hpos, v->vinv, P, NH, D);
    ops->rope_fwd(a->q, va->wpos, v->vinv + D / 2, P, NH, D);
    ops->rope_fwd(a->k, va->hpos, v->vinv, P, NH, D);
    ops->rope_fwd(a->k, va->wpos, v->vinv + D / 2, P, NH, D);
    int full = full_block(v, l);
    ops->attention_seg_fwd(a->att,
                           a->probs,
                           a->q,
                           a->k,
                           a->v,
                           full ? va->cu_full : va->cu_win,
                           full ? va->nfull : va->nwin,
                           P,
                           NH,
                           D);
    ops->copy(a->mid, x, (size_t)P * E);
    vlin_fwd(ops, &bl->proj, a->mid, a->att, P, 1.0f);
    norm_fwd(ops, a->ln2, a->m2, a->r2, a->mid, bl->n2w, bl->n2b, P, E, ln);
    ops->copy(y, a->mid, (size_t)P * E);
    size_t PI = (size_t)P * c->mlp_dim;
    if (c->v25) {
        vlin_fwd(ops, &bl->gate, a->h, a->ln2, P, 0.0f);
        vlin_fwd(ops, &bl->up, a->u, a->ln2, P, 0.0f);
        ops->swiglu_fwd(a->a, a->h, a->u, PI);
        vlin_fwd(ops, &bl->down, y, a->a, P, 1.0f);
    } else {
        vlin_fwd(ops, &bl->fc1, a->h, a->ln2, P, 0.0f);
        ops->gelu_fwd(a->a, a->h, PI, c->gelu);
        vlin_fwd(ops, &bl->fc2, y, a->a, P, 1.0f);
    }
}

int swift_vlm_vision_forward(struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    (void)b;
    const struct swift_ops *ops = v->ops;
    const struct swift_vlm_config *c = &v->vc;
    struct swift_vlm_acts *va = v->va;
    int P = va->P, Nm = va->Nm, E = c->embed_dim, M = E * c->merge_size * c->merge_size;
    if (!P)
        return 0;
    ops->upload(va->pix, va->hostpix, (size_t)P * c->patch_dim * sizeof(float));
    ops->matmul_fwd(va->res, va->pix, v->patch, NULL, P, c->patch_dim, E, 1.0f, 0.0f);
    for (int l = 0; l < c->depth; l++)
        block_fwd(v, l);
    const float *last = va->res + (size_t)c->depth * P * E;
    norm_fwd(ops, va->lnm, va->mm, va->mr, last, v->mln_w, v->mln_b, P, E, !c->v25);
    vlin_fwd(ops, &v->mfc1, va->h1, va->lnm, Nm, 0.0f);
    ops->gelu_fwd(va->a1, va->h1, (size_t)Nm * M, SWIFT_GELU_ERF);
    vlin_fwd(ops, &v->mfc2, va->merged, va->a1, Nm, 0.0f);
    return 0;
}

/* ---- backward ---- */

static void block_bwd(struct swift_vlm *v, int l)
{
    const struct swift_ops *ops = v->ops;
    const struct swift_vlm_config *c = &v->vc;
    struct swift_vlm_acts *va = v->va;
    struct swift_vit_block *bl = &v->blocks[l];
    struct vit_acts *a = &va->ba[l];
    int P = va->P, E = c->embed_dim, NH = c->num_heads, D = c->head_dim, ln = !c->v25;
    const float *x = va->res + (size_t)l * P * E;
    size_t PI = (size_t)P * c->mlp_dim;
    /* va->dres is d(block output) = d(mid) directly + through the MLP */
    if (c->v25) {
        vlin_bwd(ops, &bl->down, va->da, 0.0f, va->dres, a->a, P);
        ops->swiglu_bwd(va->dh, va->du, va->da, a->h, a->u, PI);
        vlin_bwd(ops, &bl->gate, va->dln, 0.0f, va->dh, a->ln2, P);
        vlin_bwd(ops, &bl->up, va->dln, 1.0f, va->du, a->ln2, P);
    } else {
        vlin_bwd(ops, &bl->fc2, va->da, 0.0f, va->dres, a->a, P);
        ops->gelu_bwd(va->dh, va->da, a->h, PI, c->gelu);
        vlin_bwd(ops, &bl->fc1, va->dln, 0.0f, va->dh, a->ln2, P);
    }
    norm_bwd(ops, va->dres, bl->gn2w, bl->gn2b, va->dln, a->mid, bl->n2w, a->m2, a->r2, P, E, ln);
    vlin_bwd(ops, &bl->proj, va->datt, 0.0f, va->dres, a->att, P);
    int full = full_block(v, l);
    ops->attention_seg_bwd(va->dq,
                           va->dk,
                           va->dv,
                           va->datt,
                           a->probs,
                           a->q,
                           a->k,
                           a->v,
                           full ? va->cu_full : va->cu_win,
                           full ? va->nfull : va->nwin,
                           P,
                           NH,
                           D);
    ops->rope_bwd(va->dq, va->wpos, v->vinv + D / 2, P, NH, D);
    ops->rope_bwd(va->dq, va->hpos, v->vinv, P, NH, D);
    ops->rope_bwd(va->dk, va->wpos, v->vinv + D / 2, P, NH, D);
    ops->rope_bwd(va->dk, va->hpos, v->vinv, P, NH, D);
    vlin_bwd(ops, &bl->q, va->dln, 0.0f, va->dq, a->ln1, P);
    vlin_bwd(ops, &bl->k, va->dln, 1.0f, va->dk, a->ln1, P);
    vlin_bwd(ops, &bl->v, va->dln, 1.0f, va->dv, a->ln1, P);
    norm_bwd(ops, va->dres, bl->gn1w, bl->gn1b, va->dln, x, bl->n1w, a->m1, a->r1, P, E, ln);
}

void swift_vlm_vision_backward(struct swift_vlm *v, const float *dmerged)
{
    const struct swift_ops *ops = v->ops;
    const struct swift_vlm_config *c = &v->vc;
    struct swift_vlm_acts *va = v->va;
    int P = va->P, Nm = va->Nm, E = c->embed_dim, M = E * c->merge_size * c->merge_size;
    if (!P)
        return;
    vlin_bwd(ops, &v->mfc2, va->da1, 0.0f, dmerged, va->a1, Nm);
    ops->gelu_bwd(va->dh1, va->da1, va->h1, (size_t)Nm * M, SWIFT_GELU_ERF);
    vlin_bwd(ops, &v->mfc1, va->dlnm, 0.0f, va->dh1, va->lnm, Nm);
    const float *last = va->res + (size_t)c->depth * P * E;
    ops->zero(va->dres, (size_t)P * E);
    norm_bwd(ops,
             va->dres,
             v->gmln_w,
             v->gmln_b,
             va->dlnm,
             last,
             v->mln_w,
             va->mm,
             va->mr,
             P,
             E,
             !c->v25);
    if (v->frozen & SWIFT_VLM_VIT) /* the merger's norm was the last trainable tensor */
        return;
    for (int l = c->depth - 1; l >= 0; l--)
        block_bwd(v, l);
    ops->matmul_bwd(
        NULL, v->gpatch, NULL, va->dres, va->pix, v->patch, P, c->patch_dim, E, 1.0f, 0.0f);
}
