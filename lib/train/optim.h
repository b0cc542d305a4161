/*
 * optim — AdamW over a model's trainable parameters, learning-rate schedules, gradient norm.
 *
 *     struct swift_adamw opt;
 *     swift_adamw_init(&opt, ops, params, nparams, 0.9f, 0.95f, 1e-8f, 0.1f);
 *     double norm = swift_grad_norm(ops, params, nparams);      // before clipping (logged)
 *     float gscale = swift_clip_scale(norm, max_grad_norm);     // 1 when no clipping
 *     swift_adamw_step(&opt, lr, gscale);
 *     swift_adamw_free(&opt);
 *
 * Semantics are torch.optim.AdamW's (decoupled weight decay, bias correction), with weight
 * decay off for parameters whose `decay` flag is 0 (biases and norms, as HF Trainer). Moments
 * are float32 like torch's.
 */
#ifndef SWIFT_OPTIM_H
#define SWIFT_OPTIM_H

#include <stddef.h>

#include "kernels/ops.h"
#include "lib/model/model.h"

struct swift_adamw {
    const struct swift_ops *ops;
    struct swift_param *params; /* borrowed */
    int nparams;
    float *m, *v; /* one buffer each, parameters back to back */
    size_t total;
    long step; /* steps taken */
    float b1, b2, eps, wd;
};

int swift_adamw_init(struct swift_adamw *o, const struct swift_ops *ops, struct swift_param *p,
                     int np, float b1, float b2, float eps, float wd);
void swift_adamw_step(struct swift_adamw *o, float lr, float gscale);
void swift_adamw_free(struct swift_adamw *o);

/* sqrt(sum of squared gradients) over the parameters. */
double swift_grad_norm(const struct swift_ops *ops, const struct swift_param *p, int np);
/* torch's clip_grad_norm_: max/(norm+1e-6) when norm > max (max > 0), else 1. */
float swift_clip_scale(double norm, double max_norm);

enum swift_sched { SWIFT_SCHED_COSINE = 0, SWIFT_SCHED_LINEAR, SWIFT_SCHED_CONSTANT };
/* Learning rate at `step` (0-based, the step about to be taken) of `total`, with `warmup`
 * linear warmup steps (transformers' get_*_schedule_with_warmup). */
double swift_lr_at(enum swift_sched s, double lr, long step, long warmup, long total);
/* "cosine", "linear", "constant" (also "constant_with_warmup"); -1 if unknown. */
int swift_sched_parse(const char *s);

#endif
