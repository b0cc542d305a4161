/* sft — supervised fine-tuning: cross-entropy of the next token over the trained tokens (see
 * objective.h). Rows are packed samples: positions restart at every document, token t targets
 * t+1 of the same document when the shard's mask marks t+1 as trained. */
#include "lib/train/objective.h"

#include <stdint.h>
#include <stdio.h>

#include "lib/core/banned.h"

/* One row of T tokens from a sample: positions restart per document, token t targets t+1 of
 * the same document when mask[t+1]; padding is a document of its own with no targets. */
static long sft_fill(const struct swift_objective *obj, const struct swift_sample *x, int T,
                     int32_t *tok, int32_t *tgt, int32_t *pos)
{
    (void)obj;
    long ntrain = 0;
    uint32_t d = 0, start = 0, end = x ? (x->n_docs ? x->doc_len[0] : x->len) : 0;
    uint32_t len = x ? x->len : 0;
    for (int t = 0; t < T; t++) {
        if ((uint32_t)t < len) {
            while ((uint32_t)t >= end && d + 1 < x->n_docs) {
                start = end;
                end += x->doc_len[++d];
            }
            tok[t] = (int32_t)x->ids[t];
            pos[t] = t - (int32_t)start;
            int ok = (uint32_t)t + 1 < end && x->mask[t + 1];
            tgt[t] = ok ? (int32_t)x->ids[t + 1] : -1;
            ntrain += ok;
        } else {
            tok[t] = 0;
            pos[t] = t - (int32_t)len;
            tgt[t] = -1;
        }
    }
    return ntrain;
}

/* The model's own loss is SFT's: sum of -log p(target), trained tokens, argmax hits. */
static int sft_forward(struct swift_objective *obj, struct swift_model *m,
                       const struct swift_batch *b, float scale, struct swift_objective_sums *s)
{
    (void)obj;
    return swift_model_forward(m, b, &s->loss, scale);
}

static void sft_backward(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b)
{
    (void)obj;
    swift_model_backward(m, b);
}

static void sft_log(const struct swift_objective *obj, const struct swift_objective_sums *s,
                    const char *prefix, json_t *rec)
{
    (void)obj;
    char key[64];
    snprintf(key, sizeof(key), "%stoken_acc", prefix);
    const struct swift_loss *l = &s->loss;
    json_object_set_new(
        rec, key, json_real(l->count ? (double)l->correct / (double)l->count : 0.0));
}

int swift_objective_sft(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m)
{
    (void)o;
    (void)m;
    *obj = (struct swift_objective){.name = "sft",
                                    .rows_per_sample = 1,
                                    .item = "tokens",
                                    .fill = sft_fill,
                                    .forward = sft_forward,
                                    .backward = sft_backward,
                                    .log = sft_log};
    return 0;
}
