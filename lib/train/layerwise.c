/* layerwise — --galore-optim-per-parameter (ms-swift's galore_optim_per_parameter, HF Trainer's
 * galore_adamw_layerwise): each GaLore weight takes its optimizer step inside backward, as soon
 * as its gradient is final (the model's grad_ready hook), so the GaLore weights share one
 * gradient buffer, the size of the largest, instead of one each. The other trainable
 * parameters (embeddings, lm_head, norms, biases) keep their gradients and take the ordinary
 * AdamW step after backward.
 *
 * Setup re-points the model's gradient pointers: a compact buffer for the other parameters and
 * the shared scratch for the GaLore weights; the full-size gradient buffer is freed, so
 * memory/grads shows the difference. The math is swift_galore_step's item by item (same
 * gradients, same order of floating-point operations): weights equal the ordinary run's bit
 * for bit. Restrictions (checked by swift-train): gradient accumulation 1, no global gradient
 * clipping (the norm is known only after the updates; the logged grad_norm is still the whole
 * gradient's: each GaLore weight's sum of squares is taken before its update), one process
 * (no data parallel: the gradient would need its allreduce per weight), no ZeRO-1. */
#include "lib/train/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/mem.h"
#include "lib/core/trace.h"
#include "lib/core/alloc.h"
#include "lib/core/banned.h"

struct train_layerwise {
    struct run *r;
    int *item;     /* [layer * SWIFT_LIN_COUNT + k]: GaLore item, or -1 */
    float *grads;  /* the other parameters' gradients, back to back (model's m->grads) */
    size_t ngrads; /* floats in grads */
    float *shared; /* the GaLore weights' gradient, one at a time */
    size_t nshared;
    float lr;     /* this step's */
    double sumsq; /* the GaLore gradients' sum of squares this step */
    int failed;
};

static void grad_ready(void *ctx, int l, int k)
{
    struct train_layerwise *w = ctx;
    int i = w->item[l * SWIFT_LIN_COUNT + k];
    if (i < 0 || w->failed)
        return;
    struct run *r = w->r;
    int64_t t0 = swift_trace_detail() ? swift_trace_now() : 0;
    double n = swift_grad_norm(r->m->ops, r->gal.it[i].p, 1);
    w->sumsq += n * n;
    if (swift_galore_step_item(&r->gal, i, w->lr, 1.0f) < 0)
        w->failed = 1;
    /* backward accumulates into the weight gradient: the next weight starts from zero */
    r->m->ops->zero(w->shared, r->gal.it[i].p->numel);
    if (t0) {
        struct swift_targ a[2] = {SWIFT_TARG_I("layer", l), SWIFT_TARG_I("item", i)};
        swift_trace_span("optim", "optimizer.param", t0, swift_trace_now(), a, 2);
    }
}

/* *f (a gradient pointer of the model) moved from old[i] to now[i] */
static int repoint(float **f, const struct swift_param *p, int np, float *const *old)
{
    if (!*f)
        return 0;
    for (int i = 0; i < np; i++)
        if (old[i] == *f) {
            *f = p[i].g;
            return 0;
        }
    return swift_error("internal: a gradient pointer of the model is no parameter's");
}

static int repoint_model(struct swift_model *m, float *const *old)
{
    int bad = 0;
    float **top[] = {&m->gembed, &m->gnorm, &m->glm_head, &m->gscore};
    for (size_t j = 0; j < sizeof(top) / sizeof(top[0]); j++)
        bad |= repoint(top[j], m->p, m->np, old);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        struct swift_layer *Ly = &m->layers[l];
        bad |= repoint(&Ly->gln1, m->p, m->np, old) | repoint(&Ly->gln2, m->p, m->np, old) |
               repoint(&Ly->gqn, m->p, m->np, old) | repoint(&Ly->gkn, m->p, m->np, old);
        for (int k = 0; k < SWIFT_LIN_COUNT; k++)
            bad |= repoint(&Ly->lin[k].gw, m->p, m->np, old) |
                   repoint(&Ly->lin[k].gb, m->p, m->np, old);
    }
    return bad ? -1 : 0;
}

int train_layerwise_init(struct run *r)
{
    struct swift_model *m = r->m;
    const struct swift_ops *ops = m->ops;
    size_t rest = 0, big = 0;
    for (int i = 0; i < m->np; i++)
        if (m->p[i].g) {
            if (swift_galore_index(&r->gal, &m->p[i]) >= 0)
                big = m->p[i].numel > big ? m->p[i].numel : big;
            else
                rest += m->p[i].numel;
        }
    struct train_layerwise *w = swift_xcalloc(1, sizeof(*w));
    w->r = r;
    w->ngrads = rest;
    w->nshared = big;
    w->grads = swift_mem_alloc(ops->alloc, SWIFT_MEM_GRADS, (rest ? rest : 1) * sizeof(float));
    w->shared = swift_mem_alloc(ops->alloc, SWIFT_MEM_GRADS, (big ? big : 1) * sizeof(float));
    w->item = swift_xcalloc((size_t)m->cfg.num_layers * SWIFT_LIN_COUNT, sizeof(int));
    float **old = swift_xcalloc((size_t)m->np, sizeof(*old));
    if (!w->grads || !w->shared) {
        swift_mem_free(ops->free, w->grads);
        swift_mem_free(ops->free, w->shared);
        free(w->item);
        free(w);
        free(old);
        return swift_error("out of memory: %zu gradients", rest + big);
    }
    size_t off = 0;
    for (int i = 0; i < m->np; i++) {
        struct swift_param *p = &m->p[i];
        old[i] = p->g;
        if (!p->g)
            continue;
        if (swift_galore_index(&r->gal, p) >= 0) {
            p->g = w->shared;
        } else {
            p->g = w->grads + off;
            off += p->numel;
        }
    }
    int rc = repoint_model(m, old);
    free(old);
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            int *it = &w->item[l * SWIFT_LIN_COUNT + k];
            *it = -1;
            for (int i = 0; i < r->gal.n; i++)
                if (r->gal.it[i].p->w == m->layers[l].lin[k].w)
                    *it = i;
        }
    /* the full-size buffer goes; the model frees the compact one as its own */
    swift_mem_free(ops->free, m->grads);
    m->grads = w->grads;
    m->grad_ready = grad_ready;
    m->grad_ready_ctx = w;
    r->lw = w;
    if (rc < 0)
        return -1;
    if (r->dist.rank == 0)
        swift_info("GaLore per parameter: %d weights updated during backward, sharing one "
                   "gradient buffer of %.2f MiB; %.2f MiB of gradients for the other parameters",
                   r->gal.n,
                   (double)big * 4 / 1048576.0,
                   (double)rest * 4 / 1048576.0);
    return 0;
}

void train_layerwise_begin(struct run *r, float lr)
{
    struct train_layerwise *w = r->lw;
    r->m->ops->zero(w->grads, w->ngrads);
    r->m->ops->zero(w->shared, w->nshared);
    w->lr = lr;
    w->sumsq = 0;
    w->failed = 0;
}

int train_layerwise_end(struct run *r)
{
    if (r->lw->failed)
        return -1;
    swift_galore_step_done(&r->gal);
    return 0;
}

double train_layerwise_sumsq(const struct run *r)
{
    return r->lw->sumsq;
}

void train_layerwise_free(struct run *r)
{
    if (!r->lw)
        return;
    /* m->grads (the compact buffer) is the model's to free; the shared one is ours */
    swift_mem_free(r->m->ops->free, r->lw->shared);
    r->m->grad_ready = NULL;
    free(r->lw->item);
    free(r->lw);
    r->lw = NULL;
}
