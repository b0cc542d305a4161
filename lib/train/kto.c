/* kto — KTO on unpaired labelled samples (see objective.h, kto.h and docs/preference.md), as
 * TRL's KTOTrainer: one row per sample (prompt + completion, targets on the completion), the
 * label carried in the targets (an undesirable row's completion targets are -2 - id). The KL
 * estimate comes from mismatched rows built in forward from the micro-batch itself: row i's
 * prompt with the completion of the previous sample row (row 0 takes the last one's), TRL's
 * rotation of the completions by +1 within a batch of --per-device-train-batch-size, cut to the
 * row length. Policy and reference run over both; the KL term is detached and clamped at 0. */
#include "lib/train/kto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/train/objective.h"
#include "lib/train/pref_loss.h"
#include "lib/train/pref_rows.h"
#include "lib/core/banned.h"

/* ---- the math (kto.h) ---- */

static double sigm(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

double swift_kto_sample(const struct swift_kto_params *p, int label, double logratio, double kl,
                        double *dlogp)
{
    double b = p->beta;
    if (p->loss == SWIFT_KTO_APO_ZERO_UNPAIRED)
        kl = 0;
    if (label) { /* w (1 - s(z)), z = b (lr - kl): dz/dlogp = b */
        double s = sigm(b * (logratio - kl));
        *dlogp = -p->desirable_weight * s * (1 - s) * b;
        return p->desirable_weight * (1 - s);
    }
    if (p->loss == SWIFT_KTO_APO_ZERO_UNPAIRED) { /* w s(b lr) */
        double s = sigm(b * logratio);
        *dlogp = p->undesirable_weight * s * (1 - s) * b;
        return p->undesirable_weight * s;
    }
    double s = sigm(b * (kl - logratio)); /* w (1 - s(z)), z = b (kl - lr): dz/dlogp = -b */
    *dlogp = p->undesirable_weight * s * (1 - s) * b;
    return p->undesirable_weight * (1 - s);
}

double swift_kto_kl(const double *kl_logp, const double *ref_kl_logp, int n)
{
    if (n <= 0)
        return 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += kl_logp[i] - ref_kl_logp[i];
    return sum / n > 0 ? sum / n : 0.0;
}

/* ---- the objective ---- */

/* the sums in s->extra */
enum {
    X_REWARD_C,
    X_REWARD_R,
    X_LOGP_C,
    X_LOGP_R,
    X_LOGITS_C,
    X_TOKENS_C,
    X_LOGITS_R,
    X_TOKENS_R,
    X_NC,  /* desirable samples */
    X_NR,  /* undesirable samples */
    X_KL,  /* the micro-batches' kl, summed */
    X_KLN, /* micro-batches */
    X_COUNT
};

struct kto_state {
    struct swift_kto_params kp;
    int use_kl; /* kto: 1; apo_zero_unpaired: 0 (TRL's calculate_KL) */
    struct swift_pref_ref ref;
    int ref_ready;
    int cap;
    size_t capn;
    double *ref_logp, *ref_kl, *kl_logp, *logp; /* (rows) */
    int *valid;                                 /* (rows) the row holds a sample */
    int32_t *kt, *ktg, *kpos;                   /* (N) the KL rows' tokens, targets, positions */
    struct swift_pref_rows pr;                  /* the pass's targets (label decoded), logit sums */
};

static long kto_fill(const struct swift_objective *obj, const struct swift_sample *x, int T,
                     int32_t *tok, int32_t *tgt, int32_t *pos)
{
    (void)obj;
    uint32_t L = x ? x->doc_len[0] : 0;
    swift_pref_row(x ? x->ids : NULL, L, T, tok, tgt, pos);
    for (uint32_t t = 0; t + 1 < L; t++)
        if (x->mask[t + 1])
            tgt[t] = x->label ? (int32_t)x->ids[t + 1] : -2 - (int32_t)x->ids[t + 1];
    return x ? 1 : 0;
}

static const char *kto_check(const struct swift_objective *obj, const struct swift_sample *x)
{
    (void)obj;
    if (x->n_docs != 1)
        return "is not a KTO sample: a KTO sample has one document (prompt+completion)";
    for (uint32_t t = 1; t < x->doc_len[0]; t++)
        if (x->mask[t])
            return NULL;
    return "has no completion tokens";
}

static int grow(struct kto_state *st, const struct swift_ops *ops, int rows, int N)
{
    if (swift_pref_rows_grow(&st->pr, ops, N) < 0)
        return -1;
    if (rows <= st->cap && (size_t)N <= st->capn)
        return 0;
    free(st->ref_logp);
    free(st->valid);
    free(st->kt);
    st->ref_logp = swift_xcalloc((size_t)rows * 4, sizeof(double));
    st->ref_kl = st->ref_logp + rows;
    st->kl_logp = st->ref_kl + rows;
    st->logp = st->kl_logp + rows;
    st->valid = swift_xcalloc((size_t)rows, sizeof(int));
    st->kt = swift_xcalloc((size_t)N * 3, sizeof(int32_t));
    st->ktg = st->kt + N;
    st->kpos = st->ktg + N;
    st->cap = rows;
    st->capn = (size_t)N;
    return 0;
}

/* Row r's length, and where its completion starts (the first token a target predicts; L if
 * none: a padding row). */
static void row_span(const struct swift_batch *b, int r, int *len, int *c0)
{
    const int32_t *pos = b->pos + (size_t)r * b->T, *tg = b->targets + (size_t)r * b->T;
    int L = 1, c = -1;
    while (L < b->T && pos[L] != 0)
        L++;
    for (int t = 0; t < L && c < 0; t++)
        if (tg[t] != -1)
            c = t + 1;
    *len = L;
    *c0 = c < 0 ? L : c;
}

/* The KL rows of b: row i = row i's prompt + the completion of the previous sample row (the
 * first takes the last's), cut to T; st->valid marks the sample rows. Returns them. */
static struct swift_batch kl_rows(struct kto_state *st, const struct swift_batch *b)
{
    int T = b->T, last = -1;
    for (int r = 0; r < b->B; r++) {
        int L, c0;
        row_span(b, r, &L, &c0);
        st->valid[r] = c0 < L;
        if (st->valid[r])
            last = r;
    }
    for (int r = 0, prev = last; r < b->B; r++) {
        int32_t *tk = st->kt + (size_t)r * T, *tg = st->ktg + (size_t)r * T;
        int32_t *ps = st->kpos + (size_t)r * T;
        int n = 0;
        if (st->valid[r]) {
            int L, c0, Lp, cp;
            row_span(b, r, &L, &c0);
            row_span(b, prev, &Lp, &cp);
            const int32_t *own = b->tokens + (size_t)r * T, *oth = b->tokens + (size_t)prev * T;
            for (int t = 0; t < c0; t++)
                tk[n++] = own[t];
            for (int t = cp; t < Lp && n < T; t++)
                tk[n++] = oth[t];
            for (int t = 0; t < n; t++) {
                ps[t] = t;
                tg[t] = t >= c0 - 1 && t + 1 < n ? tk[t + 1] : -1;
            }
            prev = r;
        }
        for (int t = n; t < T; t++) {
            tk[t] = 0;
            ps[t] = t - n;
            tg[t] = -1;
        }
    }
    return (struct swift_batch){
        .B = b->B, .T = T, .tokens = st->kt, .targets = st->ktg, .pos = st->kpos};
}

static int kto_reference(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b)
{
    struct kto_state *st = obj->state;
    struct swift_model *rm = swift_pref_ref_model(&st->ref, m);
    if (grow(st, m->ops, b->B, b->B * b->T) < 0)
        return -1;
    struct swift_batch kb = kl_rows(st, b);
    if ((st->use_kl && swift_pref_rows_logps(&st->pr, rm, &kb, st->ref_kl, 1) < 0) ||
        swift_pref_rows_logps(&st->pr, rm, b, st->ref_logp, 1) < 0)
        return -1;
    st->ref_ready = 1;
    return 0;
}

/* Sum of the logits over the vocabulary, averaged per token, over row r's completion. */
static double resp_logits(const struct kto_state *st, const struct swift_batch *b, int r, int V,
                          long *ntok)
{
    double sum = 0;
    for (int n = r * b->T; n < (r + 1) * b->T; n++)
        if (b->targets[n] != -1) {
            sum += (double)st->pr.lsum[n] / V;
            (*ntok)++;
        }
    return sum;
}

static int row_label(const struct swift_batch *b, int r)
{
    for (int n = r * b->T; n < (r + 1) * b->T; n++)
        if (b->targets[n] != -1)
            return b->targets[n] >= 0;
    return 0;
}

/* The samples' losses and metrics into s, each row's gradient factor into f. */
static void samples(struct kto_state *st, const struct swift_batch *b, int V, float scale,
                    double kl, struct swift_objective_sums *s, double *f)
{
    double *x = s->extra;
    for (int r = 0; r < b->B; r++) {
        f[r] = 0;
        if (!st->valid[r])
            continue;
        int lab = row_label(b, r);
        double lr = st->logp[r] - st->ref_logp[r], dlogp;
        s->loss.sum += swift_kto_sample(&st->kp, lab, lr, kl, &dlogp);
        s->loss.count++;
        long ntok = 0;
        double lg = resp_logits(st, b, r, V, &ntok);
        x[lab ? X_REWARD_C : X_REWARD_R] += st->kp.beta * lr;
        x[lab ? X_LOGP_C : X_LOGP_R] += st->logp[r];
        x[lab ? X_LOGITS_C : X_LOGITS_R] += lg;
        x[lab ? X_TOKENS_C : X_TOKENS_R] += (double)ntok;
        x[lab ? X_NC : X_NR] += 1;
        f[r] = scale * -dlogp; /* the token NLL is -logp */
    }
    x[X_KL] += kl;
    x[X_KLN] += 1;
}

static int kto_forward(struct swift_objective *obj, struct swift_model *m,
                       const struct swift_batch *b, float scale, struct swift_objective_sums *s)
{
    struct kto_state *st = obj->state;
    int N = b->B * b->T, V = m->cfg.vocab_size, grad = scale != 0.0f;
    if (!st->ref_ready && kto_reference(obj, m, b) < 0)
        return -1;
    st->ref_ready = 0;
    if (grow(st, m->ops, b->B, N) < 0)
        return -1;
    struct swift_batch kb = kl_rows(st, b);
    int n = 0;
    double kl = 0;
    if (st->use_kl) { /* the policy on the KL rows: no gradient (TRL: torch.no_grad) */
        if (swift_pref_rows_logps(&st->pr, m, &kb, st->kl_logp, 0) < 0)
            return -1;
        for (int r = 0; r < b->B; r++)
            if (st->valid[r]) {
                st->kl_logp[n] = st->kl_logp[r];
                st->ref_kl[n] = st->ref_kl[r];
                n++;
            }
        kl = swift_kto_kl(st->kl_logp, st->ref_kl, n);
    }
    if (swift_model_forward_logits(m, b, grad) < 0)
        return -1;
    swift_pref_rows_upload(&st->pr, b->targets, N);
    swift_pref_rows_sum(&st->pr, m, b, st->logp, grad);
    if (swift_model_logit_sums(m, N, st->pr.lsum) < 0)
        return -1;
    double *f = swift_xcalloc((size_t)b->B, sizeof(double));
    samples(st, b, V, scale, kl, s, f);
    if (grad)
        for (int r = 0; r < b->B; r++)
            swift_model_scale_dlogits(m, r * b->T, (r + 1) * b->T, (float)f[r]);
    free(f);
    return 0;
}

/* TRL's keys; those of a label the step had no sample of are left out, as TRL does. */
static void kto_log(const struct swift_objective *obj, const struct swift_objective_sums *s,
                    const char *prefix, json_t *rec)
{
    (void)obj;
    const double *x = s->extra;
    double nc = x[X_NC], nr = x[X_NR];
    swift_pref_put(rec, prefix, "kl", x[X_KLN] > 0 ? x[X_KL] / x[X_KLN] : 0.0);
    if (x[X_TOKENS_C] > 0)
        swift_pref_put(rec, prefix, "logits/chosen", x[X_LOGITS_C] / x[X_TOKENS_C]);
    if (x[X_TOKENS_R] > 0)
        swift_pref_put(rec, prefix, "logits/rejected", x[X_LOGITS_R] / x[X_TOKENS_R]);
    if (nc > 0) {
        swift_pref_put(rec, prefix, "rewards/chosen", x[X_REWARD_C] / nc);
        swift_pref_put(rec, prefix, "logps/chosen", x[X_LOGP_C] / nc);
    }
    if (nr > 0) {
        swift_pref_put(rec, prefix, "rewards/rejected", x[X_REWARD_R] / nr);
        swift_pref_put(rec, prefix, "logps/rejected", x[X_LOGP_R] / nr);
    }
    if (nc > 0 && nr > 0)
        swift_pref_put(rec, prefix, "rewards/margins", x[X_REWARD_C] / nc - x[X_REWARD_R] / nr);
}

static void kto_free(struct swift_objective *obj)
{
    struct kto_state *st = obj->state;
    if (!st)
        return;
    swift_pref_ref_free(&st->ref);
    swift_pref_rows_free(&st->pr);
    free(st->ref_logp);
    free(st->valid);
    free(st->kt);
    free(st);
    obj->state = NULL;
}

int swift_objective_kto(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m)
{
    struct kto_state *st = swift_xcalloc(1, sizeof(*st));
    int loss = o->loss_type < 0 || o->loss_type == SWIFT_PREF_KTO ? SWIFT_KTO_KTO
               : o->loss_type == SWIFT_PREF_APO_ZERO_UNPAIRED     ? SWIFT_KTO_APO_ZERO_UNPAIRED
                                                                  : -1;
    st->kp = (struct swift_kto_params){.loss = loss,
                                       .beta = o->beta > 0 ? o->beta : 0.1,
                                       .desirable_weight = o->desirable_weight,
                                       .undesirable_weight = o->undesirable_weight};
    st->use_kl = loss == SWIFT_KTO_KTO;
    *obj = (struct swift_objective){.name = "kto",
                                    .rows_per_sample = 1,
                                    .nextra = X_COUNT,
                                    .item = "samples",
                                    .kind = "kto",
                                    .fill = kto_fill,
                                    .check = kto_check,
                                    .reference = kto_reference,
                                    .forward = kto_forward,
                                    .backward = swift_pref_backward,
                                    .log = kto_log,
                                    .free = kto_free,
                                    .state = st};
    if (loss < 0) {
        kto_free(obj);
        return swift_error("--rlhf kto does not take --loss-type %s (kto, apo_zero_unpaired)",
                           swift_pref_loss_name(o->loss_type));
    }
    if (!m) /* rows and checks only (tests) */
        return 0;
    m->lora_dropout = 0; /* trl's disable_dropout (default true) */
    if (swift_pref_ref_init(&st->ref, o, m) < 0) {
        kto_free(obj);
        return -1;
    }
    return 0;
}
