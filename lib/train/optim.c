/* optim — see optim.h. */
#include "lib/train/optim.h"
#include "lib/core/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/banned.h"

int swift_adamw_init(struct swift_adamw *o, const struct swift_ops *ops, struct swift_param *p,
                     int np, float b1, float b2, float eps, float wd)
{
    memset(o, 0, sizeof(*o));
    o->ops = ops;
    o->params = p;
    o->nparams = np;
    o->b1 = b1;
    o->b2 = b2;
    o->eps = eps;
    o->wd = wd;
    for (int i = 0; i < np; i++)
        o->total += p[i].numel;
    o->m =
        swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, (o->total ? o->total : 1) * sizeof(float));
    o->v =
        swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, (o->total ? o->total : 1) * sizeof(float));
    if (!o->m || !o->v) {
        swift_adamw_free(o);
        return swift_error("out of memory for optimizer state (%zu parameters)", o->total);
    }
    return 0;
}

int swift_adamw_is_8bit(const struct swift_adamw *o, size_t numel)
{
    return o->bits == 8 && numel >= SWIFT_ADAM8_MIN_SIZE;
}

int swift_adamw_init_8bit(struct swift_adamw *o, const struct swift_ops *ops, struct swift_param *p,
                          int np, float b1, float b2, float eps, float wd)
{
    if (!ops->adamw8bit)
        return swift_error("--optim adamw_8bit: the %s backend has no 8-bit AdamW kernel",
                           ops->name);
    memset(o, 0, sizeof(*o));
    o->ops = ops;
    o->params = p;
    o->nparams = np;
    o->b1 = b1;
    o->b2 = b2;
    o->eps = eps;
    o->wd = wd;
    o->bits = 8;
    for (int i = 0; i < np; i++) {
        o->total += p[i].numel;
        if (swift_adamw_is_8bit(o, p[i].numel)) {
            o->total8 += p[i].numel;
            o->blocks8 += (p[i].numel + SWIFT_ADAM8_BLOCK - 1) / SWIFT_ADAM8_BLOCK;
        }
    }
    size_t n32 = o->total - o->total8;
    o->m = swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, (n32 ? n32 : 1) * sizeof(float));
    o->v = swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, (n32 ? n32 : 1) * sizeof(float));
    o->qm = swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, o->total8 ? o->total8 : 1);
    o->qv = swift_mem_alloc(ops->alloc, SWIFT_MEM_OPTIMIZER, o->total8 ? o->total8 : 1);
    o->am = swift_mem_alloc(
        ops->alloc, SWIFT_MEM_OPTIMIZER, (o->blocks8 ? o->blocks8 : 1) * sizeof(float));
    o->av = swift_mem_alloc(
        ops->alloc, SWIFT_MEM_OPTIMIZER, (o->blocks8 ? o->blocks8 : 1) * sizeof(float));
    if (!o->m || !o->v || !o->qm || !o->qv || !o->am || !o->av) {
        swift_adamw_free(o);
        return swift_error("out of memory for optimizer state (%zu parameters)", o->total);
    }
    return 0;
}

size_t swift_adamw_state_bytes(const struct swift_adamw *o)
{
    if (o->bits != 8)
        return o->total * 2 * sizeof(float);
    return (o->total - o->total8) * 2 * sizeof(float) + o->total8 * 2 +
           o->blocks8 * 2 * sizeof(float);
}

void swift_adamw_step(struct swift_adamw *o, float lr, float gscale)
{
    o->step++;
    float bc1 = 1.0f - powf(o->b1, (float)o->step), bc2 = 1.0f - powf(o->b2, (float)o->step);
    /* 8-bit AdamW (bitsandbytes' AdamW8bit): its parameters through the adamw8bit op; every
     * other parameter (all of them without --optim adamw_8bit) through the float32 AdamW, the
     * same update as bnb's 32-bit path up to float rounding */
    size_t off = 0, off8 = 0, blk = 0;
    o->group_lr[0] = lr;
    for (int i = 0; i < o->nparams; i++) {
        struct swift_param *p = &o->params[i];
        float wd = p->decay ? o->wd : 0.0f, plr = o->group ? o->group_lr[o->group[i]] : lr;
        if (swift_adamw_is_8bit(o, p->numel)) {
            o->ops->adamw8bit(p->w,
                              p->g,
                              o->qm + off8,
                              o->qv + off8,
                              o->am + blk,
                              o->av + blk,
                              p->numel,
                              plr,
                              o->b1,
                              o->b2,
                              o->eps,
                              wd,
                              o->step,
                              gscale);
            off8 += p->numel;
            blk += (p->numel + SWIFT_ADAM8_BLOCK - 1) / SWIFT_ADAM8_BLOCK;
        } else {
            o->ops->adamw(p->w,
                          p->g,
                          o->m + off,
                          o->v + off,
                          p->numel,
                          plr,
                          o->b1,
                          o->b2,
                          o->eps,
                          wd,
                          bc1,
                          bc2,
                          gscale);
            off += p->numel;
        }
    }
    o->ops->sync(); /* the step has finished when this returns (step timing) */
}

void swift_adamw_set_groups(struct swift_adamw *o, const int *group)
{
    free(o->group);
    o->group = swift_xcalloc((size_t)(o->nparams ? o->nparams : 1), sizeof(int));
    memcpy(o->group, group, (size_t)o->nparams * sizeof(int));
}

void swift_adamw_free(struct swift_adamw *o)
{
    free(o->group);
    if (o->ops) {
        if (o->m)
            swift_mem_free(o->ops->free, o->m);
        if (o->v)
            swift_mem_free(o->ops->free, o->v);
        if (o->qm)
            swift_mem_free(o->ops->free, o->qm);
        if (o->qv)
            swift_mem_free(o->ops->free, o->qv);
        if (o->am)
            swift_mem_free(o->ops->free, o->am);
        if (o->av)
            swift_mem_free(o->ops->free, o->av);
    }
    memset(o, 0, sizeof(*o));
}

double swift_grad_norm(const struct swift_ops *ops, const struct swift_param *p, int np)
{
    double s = 0;
    for (int i = 0; i < np; i++)
        s += ops->sumsq(p[i].g, p[i].numel);
    return sqrt(s);
}

float swift_clip_scale(double norm, double max_norm)
{
    if (max_norm <= 0 || !(norm > max_norm))
        return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}

double swift_lr_at(enum swift_sched s, double lr, long step, long warmup, long total)
{
    if (step < warmup)
        return lr * (double)step / (double)(warmup > 0 ? warmup : 1);
    if (s == SWIFT_SCHED_CONSTANT)
        return lr;
    double span = (double)(total - warmup > 0 ? total - warmup : 1);
    double prog = (double)(step - warmup) / span;
    if (s == SWIFT_SCHED_LINEAR)
        return lr * (prog < 1 ? 1 - prog : 0);
    return lr * 0.5 * (1.0 + cos(M_PI * prog));
}

int swift_sched_parse(const char *s)
{
    if (!strcmp(s, "cosine"))
        return SWIFT_SCHED_COSINE;
    if (!strcmp(s, "linear"))
        return SWIFT_SCHED_LINEAR;
    if (!strcmp(s, "constant") || !strcmp(s, "constant_with_warmup"))
        return SWIFT_SCHED_CONSTANT;
    return -1;
}
