/* optim — see optim.h. */
#include "lib/train/optim.h"

#include <math.h>
#include <string.h>

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
    o->m = ops->alloc((o->total ? o->total : 1) * sizeof(float));
    o->v = ops->alloc((o->total ? o->total : 1) * sizeof(float));
    if (!o->m || !o->v) {
        swift_adamw_free(o);
        return swift_error("out of memory for optimizer state (%zu parameters)", o->total);
    }
    return 0;
}

void swift_adamw_step(struct swift_adamw *o, float lr, float gscale)
{
    o->step++;
    float bc1 = 1.0f - powf(o->b1, (float)o->step), bc2 = 1.0f - powf(o->b2, (float)o->step);
    size_t off = 0;
    for (int i = 0; i < o->nparams; i++) {
        struct swift_param *p = &o->params[i];
        o->ops->adamw(p->w,
                      p->g,
                      o->m + off,
                      o->v + off,
                      p->numel,
                      lr,
                      o->b1,
                      o->b2,
                      o->eps,
                      p->decay ? o->wd : 0.0f,
                      bc1,
                      bc2,
                      gscale);
        off += p->numel;
    }
    o->ops->sync(); /* the step has finished when this returns (step timing) */
}

void swift_adamw_free(struct swift_adamw *o)
{
    if (o->ops) {
        if (o->m)
            o->ops->free(o->m);
        if (o->v)
            o->ops->free(o->v);
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
