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
 *
 * 8-bit AdamW (--optim adamw_8bit): swift_adamw_init_8bit instead of swift_adamw_init, the
 * rest of the API unchanged. It is bitsandbytes' AdamW8bit (its CPU backend's math, the op
 * adamw8bit of kernels/ops.h): a parameter of at least SWIFT_ADAM8_MIN_SIZE elements keeps its
 * moments as uint8 codes of bitsandbytes' dynamic maps (signed for m, unsigned for v) with a
 * float32 absmax per block of SWIFT_ADAM8_BLOCK elements, about 2.03 bytes per element instead
 * of 8; smaller ones keep float32 moments (bnb's min_8bit_size) and take the float32 step.
 */
#ifndef SWIFT_OPTIM_H
#define SWIFT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "lib/model/model.h"

#define SWIFT_ADAMW_GROUPS 4 /* learning-rate groups */

struct swift_adamw {
    const struct swift_ops *ops;
    struct swift_param *params; /* borrowed */
    int nparams;
    float *m, *v; /* one buffer each, parameters back to back */
    size_t total;
    long step; /* steps taken */
    float b1, b2, eps, wd;
    /* 8-bit (bits == 8): m, v hold the float32 moments of the parameters below
     * SWIFT_ADAM8_MIN_SIZE only (back to back, total - total8 elements); qm, qv the codes
     * (total8 bytes each) and am, av the absmax (blocks8 floats each) of the others, back to
     * back in parameter order; each parameter's blocks start at its first element. */
    int bits; /* 32 (swift_adamw_init) or 8 */
    uint8_t *qm, *qv;
    float *am, *av;
    size_t total8, blocks8;
    /* learning-rate groups (ms-swift's param groups for vit_lr, aligner_lr): group[i] picks
     * group_lr[group[i]] for parameter i, group 0 taking the step's lr; NULL: one group */
    int *group;
    float group_lr[SWIFT_ADAMW_GROUPS];
};

#define SWIFT_ADAM8_BLOCK 256     /* bitsandbytes' block size for 8-bit blockwise optimizers */
#define SWIFT_ADAM8_MIN_SIZE 4096 /* bitsandbytes' min_8bit_size: smaller ones stay 32-bit */

int swift_adamw_init(struct swift_adamw *o, const struct swift_ops *ops, struct swift_param *p,
                     int np, float b1, float b2, float eps, float wd);
/* One step at lr (the learning rate of group 0; the others' are o->group_lr[g], set by the
 * caller before the step). */
void swift_adamw_step(struct swift_adamw *o, float lr, float gscale);
/* o->group (an owned copy of np entries, each < SWIFT_ADAMW_GROUPS) for o's parameters. */
void swift_adamw_set_groups(struct swift_adamw *o, const int *group);
void swift_adamw_free(struct swift_adamw *o);
/* The 8-bit variant (see above); -1 after an error message when out of memory or when the
 * backend has no adamw8bit op. */
int swift_adamw_init_8bit(struct swift_adamw *o, const struct swift_ops *ops, struct swift_param *p,
                          int np, float b1, float b2, float eps, float wd);
/* Whether a parameter of numel elements keeps 8-bit moments in o. */
int swift_adamw_is_8bit(const struct swift_adamw *o, size_t numel);
/* Bytes of optimizer state o holds (moments, codes and absmax). */
size_t swift_adamw_state_bytes(const struct swift_adamw *o);

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
