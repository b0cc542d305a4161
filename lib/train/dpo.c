/* dpo — preference objectives on pairs (see objective.h and docs/preference.md): DPO with a
 * reference (sigmoid, hinge, ipo, robust; rpo_alpha), and the reference-free CPO, SimPO and ORPO.
 * A pair sample is two documents, prompt+chosen and prompt+rejected, with mask 1 on the
 * response: fill makes them rows 2p and 2p+1 of the micro-batch, so both go through the model in
 * one batch. Per row the policy's summed log-prob of the response comes from the model's token
 * NLL over the row; the per-pair loss (pref_loss.h) gives d loss / d logp of each row, which
 * scales that row's logits' gradient before the ordinary backward. */
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
enum {
    X_REWARD_C,
    X_REWARD_R,
    X_LOGP_C,
    X_LOGP_R,
    X_LOGITS_C,
    X_TOKENS_C,
    X_LOGITS_R,
    X_TOKENS_R,
    X_NLL,
    X_ODDS_RATIO,
    X_LOG_ODDS,
    X_COUNT
};

struct dpo_state {
    struct swift_pref_params pp;
    struct swift_pref_ref ref; /* GIVEN: --precompute-ref-logps (use_reference gives it) */
    double nll_w;     /* weight of the NLL on the chosen rows (rpo_alpha, cpo_alpha, ORPO 1) */
    int prompt_nll;   /* ORPO: the NLL covers the prompt too (fill marks it -2 - id) */
    int ref_ready;    /* ref_logp holds the reference of the batch forward is given next */
    int cap;          /* rows the buffers below hold */
    double *ref_logp; /* (rows) */
    struct swift_loss *resp, *prompt; /* (rows) the NLL of the response and of the prompt */
    struct swift_pref_rows pr;        /* the pass's targets (the prompt's decoded), logit sums */
};

/* ---- rows ---- */

static long dpo_fill(const struct swift_objective *obj, const struct swift_sample *x, int T,
                     int32_t *tok, int32_t *tgt, int32_t *pos)
{
    const struct dpo_state *st = obj->state;
    for (int d = 0; d < 2; d++) {
        int32_t *tk = tok + (size_t)d * T, *tg = tgt + (size_t)d * T, *ps = pos + (size_t)d * T;
        uint32_t start = x && d ? x->doc_len[0] : 0, L = x ? x->doc_len[d] : 0;
        const uint32_t *ids = x ? x->ids + start : NULL;
        swift_pref_row(ids, L, T, tk, tg, ps);
        for (uint32_t t = 0; t + 1 < L; t++)
            tg[t] = x->mask[start + t + 1]     ? (int32_t)ids[t + 1]
                    : st->prompt_nll && d == 0 ? -2 - (int32_t)ids[t + 1]
                                               : -1;
    }
    return x ? 1 : 0;
}

static const char *dpo_check(const struct swift_objective *obj, const struct swift_sample *x)
{
    (void)obj;
    if (x->n_docs != 2)
        return "is not a pair: a pair sample has two documents (prompt+chosen, prompt+rejected)";
    for (int d = 0; d < 2; d++) {
        uint32_t start = d ? x->doc_len[0] : 0, n = 0;
        for (uint32_t t = 1; t < x->doc_len[d]; t++)
            n += x->mask[start + t] != 0;
        if (!n)
            return d ? "has no response tokens in its rejected document"
                     : "has no response tokens in its chosen document";
    }
    return NULL;
}

static int grow(struct dpo_state *st, const struct swift_ops *ops, int rows, int N)
{
    if (swift_pref_rows_grow(&st->pr, ops, N) < 0)
        return -1;
    if (rows <= st->cap)
        return 0;
    free(st->ref_logp);
    free(st->resp);
    free(st->prompt);
    st->ref_logp = swift_xcalloc((size_t)rows, sizeof(double));
    st->resp = swift_xcalloc((size_t)rows, sizeof(struct swift_loss));
    st->prompt = swift_xcalloc((size_t)rows, sizeof(struct swift_loss));
    st->cap = rows;
    return 0;
}

/* 0: not trained, 1: response, 2: prompt (ORPO's NLL) */
static int tclass(int32_t t)
{
    return t >= 0 ? 1 : t <= -2 ? 2 : 0;
}

/* The summed log-prob of each row's response under model rm with its adapters off, into out. */
static int ref_pass(struct dpo_state *st, struct swift_model *rm, const struct swift_ops *ops,
                    const struct swift_batch *b, double *out)
{
    if (grow(st, ops, b->B, b->B * b->T) < 0)
        return -1;
    return swift_pref_rows_logps(&st->pr, rm, b, out, 1);
}

/* The reference's summed log-prob of each row's response, into st->ref_logp. */
static int dpo_reference(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b)
{
    struct dpo_state *st = obj->state;
    if (st->ref.kind == SWIFT_PREF_REF_NONE || st->ref.kind == SWIFT_PREF_REF_GIVEN)
        return 0;
    struct swift_model *rm = swift_pref_ref_model(&st->ref, m);
    if (grow(st, m->ops, b->B, b->B * b->T) < 0 || ref_pass(st, rm, m->ops, b, st->ref_logp) < 0)
        return -1;
    st->ref_ready = 1;
    return 0;
}

/* --precompute-ref-logps: model ref (--model's weights; adapters off) over b into out. */
static int dpo_reference_rows(struct swift_objective *obj, struct swift_model *ref,
                              const struct swift_batch *b, double *out)
{
    return ref_pass(obj->state, ref, ref->ops, b, out);
}

static int dpo_use_reference(struct swift_objective *obj, struct swift_model *m,
                             const struct swift_batch *b, const double *ref)
{
    struct dpo_state *st = obj->state;
    if (grow(st, m->ops, b->B, b->B * b->T) < 0)
        return -1;
    memcpy(st->ref_logp, ref, (size_t)b->B * sizeof(double));
    st->ref_ready = 1;
    return 0;
}

/* Each row's runs of one class through the token NLL (grad: the logits' gradient in place). */
static void row_nll(struct dpo_state *st, struct swift_model *m, const struct swift_batch *b,
                    int grad)
{
    int T = b->T;
    for (int r = 0; r < b->B; r++) {
        st->resp[r] = (struct swift_loss){0};
        st->prompt[r] = (struct swift_loss){0};
        struct swift_loss junk = {0};
        for (int n0 = r * T; n0 < (r + 1) * T;) {
            int c = tclass(b->targets[n0]), n1 = n0 + 1;
            while (n1 < (r + 1) * T && tclass(b->targets[n1]) == c)
                n1++;
            struct swift_loss *l = c == 1 ? &st->resp[r] : c == 2 ? &st->prompt[r] : &junk;
            swift_model_token_nll(m, st->pr.ddec, n0, n1, l, grad);
            n0 = n1;
        }
    }
}

/* Scale each run's logits' gradient: response runs by fr[row], prompt runs by fp[row]. */
static void row_scale(struct swift_model *m, const struct swift_batch *b, const double *fr,
                      const double *fp)
{
    int T = b->T;
    for (int r = 0; r < b->B; r++)
        for (int n0 = r * T; n0 < (r + 1) * T;) {
            int c = tclass(b->targets[n0]), n1 = n0 + 1;
            while (n1 < (r + 1) * T && tclass(b->targets[n1]) == c)
                n1++;
            if (c)
                swift_model_scale_dlogits(m, n0, n1, (float)(c == 1 ? fr[r] : fp[r]));
            n0 = n1;
        }
}

/* Sum of the logits over the vocabulary, averaged per token, over row r's response tokens. */
static double resp_logits(const struct dpo_state *st, const struct swift_batch *b, int r, int V)
{
    double sum = 0;
    for (int n = r * b->T; n < (r + 1) * b->T; n++)
        if (b->targets[n] >= 0)
            sum += (double)st->pr.lsum[n] / V;
    return sum;
}

/* What the micro-batch's pairs add up: the loss and metrics into s, the rows' gradient factors
 * d loss / d (-sum log p) into fr (responses) and fp (prompts). */
static void pairs(struct dpo_state *st, const struct swift_batch *b, int V, float scale,
                  struct swift_objective_sums *s, double *fr, double *fp)
{
    int P = b->B / 2;
    long np = 0, ntok = 0;
    double nll = 0;
    for (int p = 0; p < P; p++) { /* the NLL of the chosen rows: a mean over their tokens */
        const struct swift_loss *c = &st->resp[2 * p], *pr = &st->prompt[2 * p];
        if (c->count == 0 && st->resp[2 * p + 1].count == 0)
            continue; /* a padding pair (evaluation's last batch) */
        np++;
        nll += c->sum + (st->prompt_nll ? pr->sum : 0);
        ntok += c->count + (st->prompt_nll ? pr->count : 0);
    }
    double nll_mean = ntok ? nll / (double)ntok : 0, w = st->nll_w;
    double dnll = ntok ? w * (double)np / (double)ntok : 0; /* d (w np nll_mean) / d token NLL */
    for (int p = 0; p < P; p++) {
        int c = 2 * p, r = 2 * p + 1;
        fr[c] = fr[r] = fp[c] = fp[r] = 0;
        if (st->resp[c].count == 0 && st->resp[r].count == 0)
            continue;
        struct swift_pref_in in = {.pc = -st->resp[c].sum,
                                   .pr = -st->resp[r].sum,
                                   .rc = st->ref.kind == SWIFT_PREF_REF_NONE ? 0 : st->ref_logp[c],
                                   .rr = st->ref.kind == SWIFT_PREF_REF_NONE ? 0 : st->ref_logp[r],
                                   .nc = st->resp[c].count,
                                   .nr = st->resp[r].count};
        struct swift_pref_out o;
        swift_pref_pair(&st->pp, &in, &o);
        s->loss.sum += o.loss;
        s->loss.count++;
        s->loss.correct += o.reward_c > o.reward_r;
        double *x = s->extra;
        x[X_REWARD_C] += o.reward_c;
        x[X_REWARD_R] += o.reward_r;
        x[X_LOGP_C] += o.logp_c;
        x[X_LOGP_R] += o.logp_r;
        x[X_LOGITS_C] += resp_logits(st, b, c, V);
        x[X_TOKENS_C] += (double)st->resp[c].count;
        x[X_LOGITS_R] += resp_logits(st, b, r, V);
        x[X_TOKENS_R] += (double)st->resp[r].count;
        x[X_ODDS_RATIO] += o.odds_ratio;
        x[X_LOG_ODDS] += o.log_odds;
        /* the token NLL is -logp: d loss / d NLL = -d loss / d logp */
        fr[c] = scale * (-o.dpc + dnll);
        fr[r] = scale * -o.dpr;
        fp[c] = scale * (st->prompt_nll ? dnll : 0);
    }
    s->loss.sum += w * (double)np * nll_mean;
    s->extra[X_NLL] += (double)np * nll_mean;
}

static int dpo_forward(struct swift_objective *obj, struct swift_model *m,
                       const struct swift_batch *b, float scale, struct swift_objective_sums *s)
{
    struct dpo_state *st = obj->state;
    int N = b->B * b->T, V = m->cfg.vocab_size, grad = scale != 0.0f;
    if (st->ref.kind == SWIFT_PREF_REF_GIVEN && !st->ref_ready)
        return swift_error("--precompute-ref-logps: no reference log-probs for this batch");
    if (st->ref.kind != SWIFT_PREF_REF_NONE && !st->ref_ready && dpo_reference(obj, m, b) < 0)
        return -1;
    st->ref_ready = 0;
    if (grow(st, m->ops, b->B, N) < 0 || swift_model_forward_logits(m, b, grad) < 0)
        return -1;
    swift_pref_rows_upload(&st->pr, b->targets, N);
    row_nll(st, m, b, grad);
    if (swift_model_logit_sums(m, N, st->pr.lsum) < 0)
        return -1;
    double *fr = swift_xcalloc((size_t)b->B * 2, sizeof(double)), *fp = fr + b->B;
    pairs(st, b, V, scale, s, fr, fp);
    if (grad)
        row_scale(m, b, fr, fp);
    free(fr);
    return 0;
}

static void dpo_log(const struct swift_objective *obj, const struct swift_objective_sums *s,
                    const char *prefix, json_t *rec)
{
    const struct dpo_state *st = obj->state;
    const double *x = s->extra;
    double n = s->loss.count ? (double)s->loss.count : 1.0;
    swift_pref_put(rec, prefix, "rewards/chosen", x[X_REWARD_C] / n);
    swift_pref_put(rec, prefix, "rewards/rejected", x[X_REWARD_R] / n);
    swift_pref_put(rec, prefix, "rewards/accuracies", (double)s->loss.correct / n);
    swift_pref_put(rec, prefix, "rewards/margins", (x[X_REWARD_C] - x[X_REWARD_R]) / n);
    swift_pref_put(rec, prefix, "logps/chosen", x[X_LOGP_C] / n);
    swift_pref_put(rec, prefix, "logps/rejected", x[X_LOGP_R] / n);
    swift_pref_put(
        rec, prefix, "logits/chosen", x[X_TOKENS_C] > 0 ? x[X_LOGITS_C] / x[X_TOKENS_C] : 0.0);
    swift_pref_put(
        rec, prefix, "logits/rejected", x[X_TOKENS_R] > 0 ? x[X_LOGITS_R] / x[X_TOKENS_R] : 0.0);
    /* CPO and SimPO log it always, 0 with --cpo-alpha 0 (TRL's CPOTrainer does) */
    if (st->nll_w != 0 || st->prompt_nll)
        swift_pref_put(rec, prefix, "nll_loss", x[X_NLL] / n);
    else if (st->pp.obj == SWIFT_PREF_CPO)
        swift_pref_put(rec, prefix, "nll_loss", 0.0);
    if (st->pp.obj == SWIFT_PREF_ORPO) {
        swift_pref_put(rec, prefix, "log_odds_ratio", x[X_ODDS_RATIO] / n);
        swift_pref_put(rec, prefix, "log_odds_chosen", x[X_LOG_ODDS] / n);
    }
}

static void dpo_free(struct swift_objective *obj)
{
    struct dpo_state *st = obj->state;
    if (!st)
        return;
    swift_pref_ref_free(&st->ref);
    swift_pref_rows_free(&st->pr);
    free(st->ref_logp);
    free(st->resp);
    free(st->prompt);
    free(st);
    obj->state = NULL;
}

/* ---- the constructors ---- */

static int pref_init(struct swift_objective *obj, const char *name, int kind,
                     const struct swift_train_opts *o, struct swift_model *m)
{
    struct dpo_state *st = swift_xcalloc(1, sizeof(*st));
    int simpo = !strcmp(name, "simpo");
    int loss = o->loss_type >= 0 ? o->loss_type : simpo ? SWIFT_PREF_SIMPO : SWIFT_PREF_SIGMOID;
    st->pp = (struct swift_pref_params){.obj = kind,
                                        .loss = loss,
                                        .beta = o->beta > 0 ? o->beta
                                                : simpo     ? 2.0
                                                            : 0.1,
                                        .label_smoothing = o->label_smoothing,
                                        .simpo_gamma = o->simpo_gamma};
    st->nll_w = kind == SWIFT_PREF_DPO ? o->rpo_alpha : kind == SWIFT_PREF_CPO ? o->cpo_alpha : 1;
    st->prompt_nll = kind == SWIFT_PREF_ORPO;
    *obj = (struct swift_objective){.name = name,
                                    .rows_per_sample = 2,
                                    .nextra = X_COUNT,
                                    .item = "pairs",
                                    .kind = "pairs",
                                    .fill = dpo_fill,
                                    .check = dpo_check,
                                    .reference = kind == SWIFT_PREF_DPO ? dpo_reference : NULL,
                                    .forward = dpo_forward,
                                    .backward = swift_pref_backward,
                                    .log = dpo_log,
                                    .free = dpo_free,
                                    .state = st};
    if (!swift_pref_loss_ok(kind, loss)) {
        dpo_free(obj);
        return swift_error(
            "--rlhf %s does not take --loss-type %s", name, swift_pref_loss_name(loss));
    }
    if (!m) /* rows and checks only (tests): no model, no reference */
        return 0;
    m->lora_dropout = 0; /* trl's disable_dropout (default true) */
    if (kind == SWIFT_PREF_DPO) {
        obj->reference_rows = dpo_reference_rows;
        obj->use_reference = dpo_use_reference;
        if (o->precompute_ref_logps) { /* the loop gives them: no copy, no reference pass */
            st->ref.kind = SWIFT_PREF_REF_GIVEN;
            obj->reference = NULL;
        } else if (swift_pref_ref_init(&st->ref, o, m) < 0) {
            dpo_free(obj);
            return -1;
        }
    }
    return 0;
}

int swift_objective_dpo(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m)
{
    return pref_init(obj, "dpo", SWIFT_PREF_DPO, o, m);
}

int swift_objective_cpo(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m)
{
    return pref_init(obj, "cpo", SWIFT_PREF_CPO, o, m);
}

int swift_objective_simpo(struct swift_objective *obj, const struct swift_train_opts *o,
                          struct swift_model *m)
{
    return pref_init(obj, "simpo", SWIFT_PREF_CPO, o, m);
}

int swift_objective_orpo(struct swift_objective *obj, const struct swift_train_opts *o,
                         struct swift_model *m)
{
    return pref_init(obj, "orpo", SWIFT_PREF_ORPO, o, m);
}
