/*
 * pref_rows — what the preference objectives share (dpo.c, kto.c, rm.c; see objective.h): the
 * reference model (the policy with its adapters off under LoRA, a frozen copy of --model for
 * full tuning), the per-pass token buffers (the targets decoded and uploaded once per pass, the
 * per-token logit sums), the summed log-prob of each row's targets, the log keys and the plain
 * backward. Each objective keeps its own rows, losses and metrics.
 *
 * Targets: >= 0 a trained token, -2 - id a token the objective marks (KTO's undesirable
 * completion, ORPO's prompt) that still counts as id, -1 none.
 *
 *     struct swift_pref_ref ref = {0};
 *     if (swift_pref_ref_init(&ref, o, m) < 0)       // at construction, with a model
 *         return -1;
 *     struct swift_pref_rows pr = {0};
 *     swift_pref_rows_grow(&pr, m->ops, B * T);       // before each pass
 *     swift_pref_rows_logps(&pr, swift_pref_ref_model(&ref, m), b, out, 1); // reference
 */
#ifndef SWIFT_PREF_ROWS_H
#define SWIFT_PREF_ROWS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/model/model.h"
#include "lib/train/train.h"

/* where the reference's log-probs come from; SWIFT_PREF_REF_GIVEN: --precompute-ref-logps, the
 * loop gives each batch's (dpo.c) */
enum {
    SWIFT_PREF_REF_NONE = 0,
    SWIFT_PREF_REF_ADAPTERS_OFF,
    SWIFT_PREF_REF_COPY,
    SWIFT_PREF_REF_GIVEN
};

struct swift_pref_ref {
    int kind;                /* SWIFT_PREF_REF_* */
    struct swift_model copy; /* SWIFT_PREF_REF_COPY: the frozen model of --model */
};

/* m under LoRA: ADAPTERS_OFF; else loads o->model as a frozen COPY (forward only: one layer's
 * activations). -1 (error set, ref->kind NONE) when the copy does not load. */
int swift_pref_ref_init(struct swift_pref_ref *ref, const struct swift_train_opts *o,
                        struct swift_model *m);
/* the model the reference pass runs on: the copy, or the policy m (adapters off) */
struct swift_model *swift_pref_ref_model(struct swift_pref_ref *ref, struct swift_model *m);
void swift_pref_ref_free(struct swift_pref_ref *ref);

struct swift_pref_rows {
    size_t capn;                 /* tokens the buffers hold */
    int32_t *dec;                /* (N) the targets, marked ones decoded */
    int32_t *ddec;               /* (N) dec in backend memory: one upload per pass */
    const struct swift_ops *ops; /* ddec's */
    float *lsum;                 /* (N) per-token sums of the logits */
};

/* Room for N tokens on ops (contents undefined after growing). -1 out of memory. */
int swift_pref_rows_grow(struct swift_pref_rows *pr, const struct swift_ops *ops, int N);
/* the N targets tg, decoded, into pr->dec and backend memory */
void swift_pref_rows_upload(struct swift_pref_rows *pr, const int32_t *tg, int N);
/* m's summed log-prob of the uploaded targets of each row of b (after m's forward over b) into
 * out; grad: the logits' gradient in place. */
void swift_pref_rows_sum(const struct swift_pref_rows *pr, struct swift_model *m,
                         const struct swift_batch *b, double *out, int grad);
/* One forward of m over b without gradient (lora_off: adapters off), its targets uploaded, each
 * row's summed log-prob into out. pr must hold b's tokens. */
int swift_pref_rows_logps(struct swift_pref_rows *pr, struct swift_model *m,
                          const struct swift_batch *b, double *out, int lora_off);
void swift_pref_rows_free(struct swift_pref_rows *pr);

/* One row of T from a document's L tokens ids (NULL when L is 0): tok, pos, targets -1; past L
 * padding (token 0, positions t - L). The caller sets the targets it trains. */
void swift_pref_row(const uint32_t *ids, uint32_t L, int T, int32_t *tok, int32_t *tgt,
                    int32_t *pos);

/* rec[prefix key] = v */
void swift_pref_put(json_t *rec, const char *prefix, const char *key, double v);
/* the objectives' backward when forward only scaled the logits' gradient */
struct swift_objective;
void swift_pref_backward(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b);

#endif
