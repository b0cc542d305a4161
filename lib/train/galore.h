/*
 * galore — GaLore (Zhao et al. 2024): AdamW whose moments live in a low-rank projection of the
 * gradient, for the 2-D weights it targets (full fine-tuning; docs/train.md "GaLore").
 *
 *     struct swift_galore g;
 *     struct swift_galore_opts go = {.rank = 128, .gap = 50, .scale = 1, .targets = "all-linear"};
 *     int n = swift_galore_init(&g, ops, params, nparams, &go, 0.9f, 0.95f, 1e-8f, 0.1f);
 *     // the other parameters (swift_galore_index(&g, p) < 0) keep plain AdamW (optim.h)
 *     swift_galore_step(&g, lr, gscale);       // after swift_adamw_step on the others
 *     swift_galore_free(&g);
 *
 * Semantics are galore-torch's GaLoreAdamW with proj_type "std" (galore_projector.py): for a
 * weight G of rows x cols (torch's [out, in]) the projection P is refreshed every `gap` steps
 * (when the 0-based step count is a multiple of gap) from the SVD of the current (clipped)
 * gradient G = U S Vh: rows >= cols: P = Vh[:k] (k x cols), R = G P^T (rows x k); rows < cols:
 * P = U[:, :k] (rows x k), R = P^T G (k x cols), k = min(rank, rows, cols). Adam's moments m, v
 * have R's shape; the update N = m / (sqrt(v) + eps) is projected back (N P, or P N), times
 * `scale`, and W -= lr * sqrt(1 - b2^t) / (1 - b1^t) * scale * back(N); then, after the
 * update, W -= lr * wd * W (GaLoreAdamW's placement: decay of the updated weight).
 *
 * The SVD is LAPACK's sgesdd (OpenBLAS), the matmuls cblas_sgemm; the state and the
 * arithmetic are host memory: parameters move through the backend's download/upload, so the
 * math is the same on every backend, but swift-train refuses CUDA (the copies would cost a
 * full weight each way per step). Single process or data parallel without ZeRO-1 (each rank
 * holds the whole state and computes the same update from the summed gradient).
 */
#ifndef SWIFT_GALORE_H
#define SWIFT_GALORE_H

#include <stddef.h>

#include "kernels/ops.h"
#include "lib/model/model.h"

struct swift_galore_opts {
    int rank;            /* ms-swift --galore_rank (default 128) */
    long gap;            /* --galore_update_proj_gap (default 50) */
    double scale;        /* --galore_scale (default 1.0) */
    const char *targets; /* "all-linear" (q/k/v/o/gate/up/down) or "q_proj,v_proj,..." */
};

struct swift_galore_item {
    struct swift_param *p; /* borrowed */
    int rows, cols, k;
    int left;     /* rows < cols: P is rows x k (U[:, :k]); else P is k x cols (Vh[:k]) */
    float *P;     /* the projection, row-major as in torch */
    float *m, *v; /* the moments in the projected space (rows x k, or k x cols) */
};

struct swift_galore {
    const struct swift_ops *ops;
    struct swift_galore_item *it;
    int n;
    long gap;
    float scale, b1, b2, eps, wd;
    long step;    /* steps taken (== the AdamW's) */
    size_t state; /* floats of P, m and v over the items */
    /* host scratch, sized for the largest item */
    float *hw, *hg, *low, *full, *svd;
    size_t svd_floats;
    int *iwork;
    /* tests: called after each refresh of item i's P (e.g. to align the SVD's signs) */
    void (*on_refresh)(void *ctx, int i, struct swift_galore_item *it);
    void *hook_ctx;
};

/* Is p a weight GaLore takes under targets (2-D, a linear of the attention or the MLP named
 * by the list; never the embeddings, lm_head or a norm)? */
int swift_galore_targets(const char *targets, const struct swift_param *p);
/* Take the targeted parameters among p[0..np). Returns how many (0: none, with an error
 * naming the targets) or -1 (reported). */
int swift_galore_init(struct swift_galore *g, const struct swift_ops *ops, struct swift_param *p,
                      int np, const struct swift_galore_opts *go, float b1, float b2, float eps,
                      float wd);
/* Index of p among the items, -1 if GaLore does not own it. */
int swift_galore_index(const struct swift_galore *g, const struct swift_param *p);
/* One step over the items (gradients times gscale, as the clipped gradients). -1 when an SVD
 * fails (reported). */
int swift_galore_step(struct swift_galore *g, float lr, float gscale);
/* The same step one item at a time (--galore-optim-per-parameter: during backward, as soon as
 * item i's gradient is final): each item once, in any order, then swift_galore_step_done. The
 * arithmetic is swift_galore_step's, item by item. */
int swift_galore_step_item(struct swift_galore *g, int i, float lr, float gscale);
void swift_galore_step_done(struct swift_galore *g);
/* The projection of the item's gradient g (host, rows x cols) into it->P (its SVD). */
int swift_galore_refresh(struct swift_galore *g, struct swift_galore_item *it, const float *grad);
void swift_galore_free(struct swift_galore *g);

#endif
