/* sync — the step loop's side of the ranks (lib/train/dist.h does the collectives): the step's
 * totals, the objective's sums, the gradients, the gradient norm and, under ZeRO-1, the
 * parameters. On one rank there is nothing to exchange: each returns 0 with its inputs as they
 * are (the gradient norm is then this rank's). */
#include "lib/train/internal.h"

#include <math.h>

#include "lib/core/banned.h"

int train_sum_over_ranks(struct run *r, const char *what, long step, struct swift_objective_sums *s,
                         int *flag)
{
    struct swift_dist *d = &r->dist;
    if (d->world <= 1)
        return 0;
    int nostop = 0, nx = r->obj.nextra;
    double v[3 + SWIFT_OBJECTIVE_EXTRA] = {
        s->loss.sum, (double)s->loss.count, (double)s->loss.correct};
    for (int i = 0; i < nx; i++)
        v[3 + i] = s->extra[i];
    if (swift_dist_checkin(d, what, step, flag ? flag : &nostop, v, 3 + nx) < 0)
        return -1;
    s->loss.sum = v[0];
    s->loss.count = (long)v[1];
    s->loss.correct = (long)v[2];
    for (int i = 0; i < nx; i++)
        s->extra[i] = v[3 + i];
    return 0;
}

int train_sync_items(struct run *r, long gs, long *nitems, long *ntokens)
{
    if (r->dist.world <= 1)
        return 0;
    double v[2] = {(double)*nitems, (double)*ntokens};
    int nostop = 0;
    if (swift_dist_checkin(&r->dist, "forward", gs, &nostop, v, 2) < 0)
        return -1;
    *nitems = (long)v[0];
    *ntokens = (long)v[1];
    return 0;
}

int train_sync_grads(struct run *r, long gs, struct swift_objective_sums *s, int *stop)
{
    struct swift_dist *d = &r->dist;
    if (d->world <= 1)
        return 0;
    if (train_sum_over_ranks(r, "gradient sync", gs, s, stop) < 0)
        return -1;
    return d->shard ? swift_dist_shard_reduce_scatter(d, r->tp, r->ntp, gs)
                    : swift_dist_allreduce_grads(d, r->tp, r->ntp, gs);
}

int train_grad_norm(struct run *r, long gs, double *norm)
{
    struct swift_dist *d = &r->dist;
    if (r->lw) { /* the GaLore weights' gradients are gone: their sums of squares */
        double rest = swift_grad_norm(r->m->ops, r->adam_tp, r->opt.nparams);
        *norm = sqrt(train_layerwise_sumsq(r) + rest * rest);
        return 0;
    }
    *norm = swift_grad_norm(r->m->ops, r->tp, r->ntp);
    if (d->shard) { /* ZeRO-1: each rank holds the summed gradient of its range only */
        double ss = swift_grad_norm(r->m->ops, d->shard, d->nshard);
        ss *= ss;
        if (swift_dist_allreduce_d(d, &ss, 1, "gradient norm", gs) < 0)
            return -1;
        *norm = sqrt(ss);
    }
    return 0;
}

int train_sync_params(struct run *r, long gs)
{
    struct swift_dist *d = &r->dist;
    return d->shard ? swift_dist_shard_allgather(d, r->tp, r->ntp, gs) : 0;
}
