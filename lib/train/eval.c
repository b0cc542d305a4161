/* eval — the objective's loss over the whole validation set, forward only, in order: rank k
 * takes every world-th batch from the k-th, the sums are combined over ranks (eval record and
 * span: log.c, docs/train.md). */
#include "lib/train/internal.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

int train_eval(struct run *r, long step)
{
    struct swift_objective *obj = &r->obj;
    int64_t t0 = swift_trace_now();
    uint64_t n = swift_shards_count(r->val);
    int rows = obj->rows_per_sample;
    struct train_ubatch u;
    train_ubatch_alloc(&u, r->mbs * rows, r->T, r->mbs);
    struct swift_objective_sums s = {0};
    struct swift_dist *d = &r->dist;
    uint64_t stride = (uint64_t)r->mbs * (uint64_t)d->world;
    for (uint64_t i = (uint64_t)r->mbs * (uint64_t)d->rank; i < n; i += stride) {
        for (int b = 0; b < r->mbs; b++) {
            struct swift_sample x;
            int have = i + (uint64_t)b < n && swift_shards_get(r->val, i + b, &x) == 0;
            u.xs[b] = have ? x : (struct swift_sample){0}; /* padding: len 0 */
            size_t row = (size_t)b * (size_t)rows * (size_t)r->T;
            obj->fill(obj, have ? &x : NULL, r->T, u.tok + row, u.tgt + row, u.pos + row);
        }
        struct swift_batch bt = {r->mbs * rows, r->T, u.tok, u.tgt, u.pos};
        const struct swift_sample *xs = u.xs;
        if (r->vlm) {
            if ((r->val_image_dir && train_vl_pixels(&u, r->val_image_dir, r->mbs, 0) < 0) ||
                train_vl_forward(r, &u, bt.B, 0.0f, &s, 0) < 0) {
                train_ubatch_free(&u);
                return -1;
            }
            continue;
        }
        if ((r->ref_val && train_ref_logps_val(r, &bt, i) < 0) ||
            (obj->rollout && obj->rollout(obj, r->m, &bt, &xs, 1, -1) < 0) ||
            obj->forward(obj, r->m, &bt, 0.0f, &s) < 0) {
            train_ubatch_free(&u);
            return -1;
        }
    }
    train_ubatch_free(&u);
    if (d->world > 1 && train_sum_over_ranks(r, "eval", step, &s, NULL) < 0)
        return -1;
    double loss = s.loss.count ? s.loss.sum / (double)s.loss.count : 0;
    swift_trace_span("eval",
                     "eval",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("step", step), SWIFT_TARG_D("loss", loss)},
                     2);
    train_log_eval(r, step, &s, loss);
    return 0;
}
