/* rm — reward models (see objective.h and docs/preference.md): a scalar score per sequence, the
 * final norm's output at the row's last token that is not the padding token through a score
 * head (1,H) (transformers' *ForSequenceClassification, num_labels 1), trained on pairs with
 * the Bradley-Terry loss of TRL's RewardTrainer, -log sigmoid(r_chosen - r_rejected) per pair
 * (+ center_rewards_coefficient (r_chosen + r_rejected)^2), a mean over pairs. A pair sample fills
 * rows 2p (prompt+chosen) and 2p+1 (prompt+rejected), as DPO's, so both go through the model in one
 * batch; no token is trained (targets -1 on padding, -2 on the document's tokens: forward reads the
 * row's length from them). */
#include "lib/train/objective.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/train/pref_loss.h"
#include "lib/train/pref_rows.h"
#include "lib/core/banned.h"

/* the sums in s->extra */
enum { X_MARGIN, X_REWARDS, X_COUNT };

struct rm_state {
    int pad;       /* the token a score skips (the model's pad_token_id) */
    double center; /* center_rewards_coefficient */
    int cap;
    int32_t *idx;  /* (rows) the token each row's score reads */
    float *score;  /* (rows) */
    float *dscore; /* (rows) d loss / d score, for backward */
    int n;         /* rows scored by the last forward */
};

static long rm_fill(const struct swift_objective *obj, const struct swift_sample *x, int T,
                    int32_t *tok, int32_t *tgt, int32_t *pos)
{
    (void)obj;
    for (int d = 0; d < 2; d++) {
        int32_t *tk = tok + (size_t)d * T, *tg = tgt + (size_t)d * T, *ps = pos + (size_t)d * T;
        uint32_t start = x && d ? x->doc_len[0] : 0, L = x ? x->doc_len[d] : 0;
        swift_pref_row(x ? x->ids + start : NULL, L, T, tk, tg, ps);
        for (uint32_t t = 0; t < L; t++)
            tg[t] = -2;
    }
    return x ? 1 : 0;
}

static const char *rm_check(const struct swift_objective *obj, const struct swift_sample *x)
{
    (void)obj;
    if (x->n_docs != 2)
        return "is not a pair: a pair sample has two documents (prompt+chosen, prompt+rejected)";
    if (x->doc_len[0] == 0 || x->doc_len[1] == 0)
        return "has an empty document";
    return NULL;
}

/* row r's document length (its tokens are marked -2) */
static int row_len(const struct swift_batch *b, int r)
{
    int L = 0;
    while (L < b->T && b->targets[(size_t)r * b->T + L] == -2)
        L++;
    return L;
}

static int rm_forward(struct swift_objective *obj, struct swift_model *m,
                      const struct swift_batch *b, float scale, struct swift_objective_sums *s)
{
    struct rm_state *st = obj->state;
    if (b->B > st->cap) {
        free(st->idx);
        free(st->score);
        free(st->dscore);
        st->idx = swift_xcalloc((size_t)b->B, sizeof(int32_t));
        st->score = swift_xcalloc((size_t)b->B, sizeof(float));
        st->dscore = swift_xcalloc((size_t)b->B, sizeof(float));
        st->cap = b->B;
    }
    if (swift_model_forward_hidden(m, b, scale != 0.0f) < 0)
        return -1;
    for (int r = 0; r < b->B; r++)
        st->idx[r] =
            r * b->T + swift_model_score_pos(b->tokens + (size_t)r * b->T, row_len(b, r), st->pad);
    st->n = b->B;
    if (swift_model_score(m, st->idx, b->B, st->score) < 0)
        return -1;
    for (int p = 0; p < b->B / 2; p++) {
        int c = 2 * p, r = c + 1;
        st->dscore[c] = st->dscore[r] = 0;
        if (row_len(b, c) == 0 && row_len(b, r) == 0)
            continue; /* a padding pair (evaluation's last batch) */
        double rc = st->score[c], rr = st->score[r], z = rc - rr, sum = rc + rr;
        /* TRL adds center x mean over the pairs of (r_c + r_r)^2: per pair, the same mean */
        s->loss.sum += -swift_log_sigmoid(z) + st->center * sum * sum;
        s->loss.count++;
        s->loss.correct += rc > rr;
        s->extra[X_MARGIN] += z;
        s->extra[X_REWARDS] += rc + rr;
        /* d (-log s(z)) / d z = -s(-z) */
        double g = -exp(swift_log_sigmoid(-z));
        st->dscore[c] = (float)(scale * (g + 2 * st->center * sum));
        st->dscore[r] = (float)(scale * (-g + 2 * st->center * sum));
    }
    return 0;
}

static void rm_backward(struct swift_objective *obj, struct swift_model *m,
                        const struct swift_batch *b)
{
    struct rm_state *st = obj->state;
    swift_model_score_backward(m, b, st->idx, st->n, st->dscore);
}

/* TRL RewardTrainer's names (its min_reward and max_reward are not sums: not logged) */
static void rm_log(const struct swift_objective *obj, const struct swift_objective_sums *s,
                   const char *prefix, json_t *rec)
{
    (void)obj;
    double n = s->loss.count ? (double)s->loss.count : 1.0;
    swift_pref_put(rec, prefix, "accuracy", (double)s->loss.correct / n);
    swift_pref_put(rec, prefix, "margin", s->extra[X_MARGIN] / n);
    swift_pref_put(rec, prefix, "mean_reward", s->extra[X_REWARDS] / (2 * n));
}

static void rm_free(struct swift_objective *obj)
{
    struct rm_state *st = obj->state;
    if (!st)
        return;
    free(st->idx);
    free(st->score);
    free(st->dscore);
    free(st);
    obj->state = NULL;
}

int swift_objective_rm(struct swift_objective *obj, const struct swift_train_opts *o,
                       struct swift_model *m)
{
    struct rm_state *st = swift_xcalloc(1, sizeof(*st));
    st->pad = -1;
    st->center = o->center_rewards_coefficient;
    *obj = (struct swift_objective){.name = "rm",
                                    .rows_per_sample = 2,
                                    .nextra = X_COUNT,
                                    .item = "pairs",
                                    .kind = "pairs",
                                    .fill = rm_fill,
                                    .check = rm_check,
                                    .forward = rm_forward,
                                    .backward = rm_backward,
                                    .log = rm_log,
                                    .free = rm_free,
                                    .state = st};
    if (o->loss_type >= 0) {
        rm_free(obj);
        return swift_error(
            "--rlhf rm does not take --loss-type %s (its loss is -log sigmoid(r_chosen "
            "- r_rejected))",
            swift_pref_loss_name(o->loss_type));
    }
    if (!m) /* rows and checks only (tests) */
        return 0;
    if (!m->score) {
        rm_free(obj);
        return swift_error("--rlhf rm: the model has no score head");
    }
    st->pad = m->cfg.pad_token_id;
    m->lora_dropout = 0; /* trl's disable_dropout (default true) */
    return 0;
}
