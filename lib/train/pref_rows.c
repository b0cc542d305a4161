/* pref_rows — what the preference objectives share: the reference model, the per-pass token
 * buffers, a document's row, the rows' summed log-probs, the log keys and the plain backward
 * (pref_rows.h). */
#include "lib/train/pref_rows.h"
#include "lib/core/mem.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/train/objective.h"
#include "lib/core/banned.h"

int swift_pref_ref_init(struct swift_pref_ref *ref, const struct swift_train_opts *o,
                        struct swift_model *m)
{
    if (m->lora_params) {
        ref->kind = SWIFT_PREF_REF_ADAPTERS_OFF;
        return 0;
    }
    ref->kind = SWIFT_PREF_REF_COPY;
    if (swift_model_load(&ref->copy, o->model, m->ops, 1) < 0) {
        ref->kind = SWIFT_PREF_REF_NONE;
        return -1;
    }
    ref->copy.act_ckpt = 1; /* forward only: one layer's activations */
    return 0;
}

struct swift_model *swift_pref_ref_model(struct swift_pref_ref *ref, struct swift_model *m)
{
    return ref->kind == SWIFT_PREF_REF_COPY ? &ref->copy : m;
}

void swift_pref_ref_free(struct swift_pref_ref *ref)
{
    if (ref->kind == SWIFT_PREF_REF_COPY)
        swift_model_free(&ref->copy);
}

int swift_pref_rows_grow(struct swift_pref_rows *pr, const struct swift_ops *ops, int N)
{
    if ((size_t)N <= pr->capn)
        return 0;
    swift_pref_rows_free(pr);
    pr->dec = swift_xcalloc((size_t)N, sizeof(int32_t));
    pr->lsum = swift_xcalloc((size_t)N, sizeof(float));
    pr->ops = ops;
    pr->ddec = swift_mem_alloc(ops->alloc, SWIFT_MEM_OTHER, (size_t)N * sizeof(int32_t));
    pr->capn = pr->ddec ? (size_t)N : 0;
    return pr->ddec ? 0 : swift_error("out of memory for %d targets on %s", N, ops->name);
}

void swift_pref_rows_upload(struct swift_pref_rows *pr, const int32_t *tg, int N)
{
    for (int n = 0; n < N; n++)
        pr->dec[n] = tg[n] >= 0 ? tg[n] : tg[n] <= -2 ? -2 - tg[n] : -1;
    pr->ops->upload(pr->ddec, pr->dec, (size_t)N * sizeof(int32_t));
}

void swift_pref_rows_sum(const struct swift_pref_rows *pr, struct swift_model *m,
                         const struct swift_batch *b, double *out, int grad)
{
    for (int r = 0; r < b->B; r++) {
        struct swift_loss l = {0};
        swift_model_token_nll(m, pr->ddec, r * b->T, (r + 1) * b->T, &l, grad);
        out[r] = -l.sum;
    }
}

int swift_pref_rows_logps(struct swift_pref_rows *pr, struct swift_model *m,
                          const struct swift_batch *b, double *out, int lora_off)
{
    m->lora_off = lora_off;
    int rc = swift_model_forward_logits(m, b, 0);
    m->lora_off = 0;
    if (rc < 0)
        return -1;
    swift_pref_rows_upload(pr, b->targets, b->B * b->T);
    swift_pref_rows_sum(pr, m, b, out, 0);
    return 0;
}

void swift_pref_rows_free(struct swift_pref_rows *pr)
{
    free(pr->dec);
    free(pr->lsum);
    if (pr->ddec)
        swift_mem_free(pr->ops->free, pr->ddec);
    *pr = (struct swift_pref_rows){0};
}

void swift_pref_row(const uint32_t *ids, uint32_t L, int T, int32_t *tok, int32_t *tgt,
                    int32_t *pos)
{
    for (int t = 0; t < T; t++) {
        int in = (uint32_t)t < L;
        tok[t] = in ? (int32_t)ids[t] : 0;
        pos[t] = in ? t : t - (int32_t)L;
        tgt[t] = -1;
    }
}

void swift_pref_put(json_t *rec, const char *prefix, const char *key, double v)
{
    char k[64];
    snprintf(k, sizeof(k), "%s%s", prefix, key);
    json_object_set_new(rec, k, json_real(v));
}

void swift_pref_backward(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b)
{
    (void)obj;
    swift_model_backward(m, b);
}
