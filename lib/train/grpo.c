/* grpo — online RL with group-relative advantages (see objective.h and docs/grpo.md): TRL's
 * GRPOTrainer on prompt shards. A sample is one prompt; fill copies it into G rows. Once per
 * step the rollout (grpo_rollout.c) samples a completion per row from the current policy,
 * scores the rows with the reward functions and turns the rewards into advantages per group of
 * G; forward then takes each row's per-token log-probs of its completion, the loss of
 * lib/train/grpo_loss.h and writes d loss / d log-prob into the logits' gradient for the
 * ordinary backward. --per-device-train-batch-size counts completions (TRL's meaning), so a
 * micro-batch holds batch / G prompts, whole groups. */
#include "lib/train/objective.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/eval/prompt.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/train/grpo_state.h"
#include "lib/core/banned.h"

/* ---- rows ---- */

static long grpo_fill(const struct swift_objective *obj, const struct swift_sample *x, int T,
                      int32_t *tok, int32_t *tgt, int32_t *pos)
{
    int G = obj->rows_per_sample;
    for (int g = 0; g < G; g++)
        swift_pref_row(x ? x->ids : NULL,
                       x ? x->len : 0,
                       T,
                       tok + (size_t)g * T,
                       tgt + (size_t)g * T,
                       pos + (size_t)g * T);
    return x ? G : 0;
}

static const char *grpo_check(const struct swift_objective *obj, const struct swift_sample *x)
{
    (void)obj;
    if (x->n_docs != 1)
        return "is not a prompt: a prompt sample has one document";
    if (!x->len)
        return "is an empty prompt";
    if (!x->meta)
        return "has no metadata (made by swift-preprocess --kind prompts?)";
    return NULL;
}

/* ---- the loss ---- */

static int grpo_scratch(struct grpo_state *st, size_t n)
{
    if (n <= st->capn)
        return 0;
    free(st->logp);
    free(st->dlogp);
    free(st->w);
    st->logp = swift_xcalloc(n, sizeof(double));
    st->dlogp = swift_xcalloc(n, sizeof(float));
    st->w = swift_xcalloc(n, sizeof(float));
    st->capn = n;
    return 0;
}

int grpo_logps(struct grpo_state *st, struct swift_model *m, const struct grpo_mb *g, double *out,
               int lora_off, int train)
{
    struct swift_batch bt = {g->R, st->T, g->tok, g->tgt, g->pos};
    int N = g->R * st->T, before = m->lora_off;
    m->lora_off = lora_off;
    int rc = swift_model_forward_logits(m, &bt, train);
    m->lora_off = before;
    if (rc < 0)
        return -1;
    if (st->temperature != 1.0) /* TRL: log-probs of logits / temperature */
        swift_model_scale_dlogits(m, 0, N, (float)(1.0 / st->temperature));
    swift_model_token_logps(m, g->tgt, 0, N, out);
    return 0;
}

/* What the micro-batch's rollout adds to the logged sums. */
static void add_rollout_sums(const struct grpo_state *st, const struct grpo_mb *g,
                             struct swift_objective_sums *s)
{
    double *x = s->extra;
    for (int r = 0; r < g->R; r++) {
        x[GX_REWARD] += g->reward[r];
        x[GX_REWARD_SQ] += g->reward[r] * g->reward[r];
        x[GX_LEN] += g->len[r];
        x[GX_CLIPPED] += g->clipped[r];
        x[GX_GROUP_STD] += g->gstd[r];
        for (int f = 0; f < st->nfun; f++) {
            double v = g->per[(size_t)f * g->R + r];
            x[GX_FUNCS + 2 * f] += v;
            x[GX_FUNCS + 2 * f + 1] += v * v;
        }
    }
    x[GX_ROWS] += g->R;
    for (int p = 0; p < g->R / st->G; p++) {
        int same = 1;
        for (int k = 1; k < st->G; k++)
            same &= g->reward[p * st->G + k] == g->reward[p * st->G];
        x[GX_ZERO_STD] += same;
        x[GX_GROUPS] += 1;
    }
}

static int grpo_forward(struct swift_objective *obj, struct swift_model *m,
                        const struct swift_batch *b, float scale, struct swift_objective_sums *s)
{
    (void)b;
    struct grpo_state *st = obj->state;
    if (st->next >= st->nmb)
        return swift_error("grpo: a forward without a rollout (internal)");
    const struct grpo_mb *g = &st->mb[st->next++];
    if (!g->R) /* an evaluation batch of padding only */
        return 0;
    size_t N = (size_t)g->R * (size_t)st->T;
    grpo_scratch(st, N);
    if (grpo_logps(st, m, g, st->logp, 0, scale != 0) < 0)
        return -1;
    memset(st->dlogp, 0, N * sizeof(float));
    struct swift_grpo_stats gs = {0};
    double contrib = swift_grpo_loss(&st->gp,
                                     g->R,
                                     g->off,
                                     g->len,
                                     st->logp,
                                     st->mu > 1 ? g->old : NULL,
                                     g->ref,
                                     g->adv,
                                     st->dlogp,
                                     &gs);
    s->loss.sum += contrib;
    s->loss.count += (long)gs.items;
    s->extra[GX_KL] += gs.kl_sum;
    s->extra[GX_TOKENS] += gs.tokens;
    s->extra[GX_CLIP_LOW] += gs.clip_low;
    s->extra[GX_CLIP_HIGH] += gs.clip_high;
    s->extra[GX_CLIP_REGION] += gs.clip_region;
    add_rollout_sums(st, g, s);
    if (scale != 0) {
        /* the gradient of scale x contrib: d/d logp through the logits (/ temperature) */
        double f = (double)scale / st->temperature;
        for (size_t i = 0; i < N; i++)
            st->w[i] = (float)((double)st->dlogp[i] * f);
        swift_model_token_grad(m, g->tgt, 0, (int)N, st->w);
    }
    return 0;
}

static void grpo_backward(struct swift_objective *obj, struct swift_model *m,
                          const struct swift_batch *b)
{
    (void)b;
    struct grpo_state *st = obj->state;
    const struct grpo_mb *g = &st->mb[st->next - 1];
    struct swift_batch bt = {g->R, st->T, g->tok, g->tgt, g->pos};
    swift_model_backward(m, &bt);
}

/* ---- records: TRL's keys ---- */

static double mean_of(double sum, double n)
{
    return n > 0 ? sum / n : 0.0;
}

/* torch's std (unbiased) from a sum, a sum of squares and a count */
static double std_of(double sum, double sq, double n)
{
    if (n < 2)
        return 0.0;
    double v = (sq - sum * sum / n) / (n - 1);
    return v > 0 ? sqrt(v) : 0.0;
}

static void grpo_log(const struct swift_objective *obj, const struct swift_objective_sums *s,
                     const char *prefix, json_t *rec)
{
    const struct grpo_state *st = obj->state;
    const double *x = s->extra;
    double n = x[GX_ROWS];
    swift_pref_put(rec, prefix, "reward", mean_of(x[GX_REWARD], n));
    swift_pref_put(rec, prefix, "reward_std", mean_of(x[GX_GROUP_STD], n));
    for (int f = 0; f < st->nfun; f++) {
        char key[96];
        const char *name = grpo_fun_name(st, f);
        snprintf(key, sizeof(key), "rewards/%s/mean", name);
        swift_pref_put(rec, prefix, key, mean_of(x[GX_FUNCS + 2 * f], n));
        snprintf(key, sizeof(key), "rewards/%s/std", name);
        swift_pref_put(rec, prefix, key, std_of(x[GX_FUNCS + 2 * f], x[GX_FUNCS + 2 * f + 1], n));
    }
    swift_pref_put(rec, prefix, "frac_reward_zero_std", mean_of(x[GX_ZERO_STD], x[GX_GROUPS]));
    swift_pref_put(rec, prefix, "completions/mean_length", mean_of(x[GX_LEN], n));
    swift_pref_put(rec, prefix, "completions/clipped_ratio", mean_of(x[GX_CLIPPED], n));
    if (st->beta > 0)
        swift_pref_put(rec, prefix, "kl", mean_of(x[GX_KL], x[GX_TOKENS]));
    swift_pref_put(rec, prefix, "clip_ratio/low_mean", mean_of(x[GX_CLIP_LOW], x[GX_TOKENS]));
    swift_pref_put(rec, prefix, "clip_ratio/high_mean", mean_of(x[GX_CLIP_HIGH], x[GX_TOKENS]));
    swift_pref_put(rec, prefix, "clip_ratio/region_mean", mean_of(x[GX_CLIP_REGION], x[GX_TOKENS]));
}

/* ---- construction ---- */

static void grpo_free(struct swift_objective *obj)
{
    struct grpo_state *st = obj->state;
    if (!st)
        return;
    grpo_mbs_free(st->mb, st->nmb);
    grpo_mbs_free(st->kept, st->nkept);
    if (st->kv_rows)
        swift_kv_release(&st->kv);
    swift_pref_ref_free(&st->ref);
    swift_reward_set_free(st->rs);
    if (st->have_rm)
        swift_model_free(&st->rm);
    swift_tokenizer_free(st->tok);
    free(st->logp);
    free(st->dlogp);
    free(st->w);
    free(st);
    obj->state = NULL;
}

static void add_stop(struct grpo_state *st, long id)
{
    if (id < 0 || st->nstop >= 8)
        return;
    for (int k = 0; k < st->nstop; k++)
        if (st->stop[k] == id)
            return;
    st->stop[st->nstop++] = (int32_t)id;
}

/* The stop ids, as swift-eval's: eos_token_id of generation_config.json and config.json (an
 * int or a list), the tokenizer's eos_token, and the end-of-turn token of the chat template the
 * prompt shards were made with (index.json "template"). */
static int find_stops(struct grpo_state *st, const struct swift_train_opts *o)
{
    long eos_ids[16];
    int neos = swift_model_eos_ids(o->model, eos_ids, 16);
    for (int k = 0; k < neos; k++)
        add_stop(st, eos_ids[k]);
    const char *eos = swift_tokenizer_config_str(st->tok, "eos_token");
    if (eos)
        add_stop(st, swift_tokenizer_token_id(st->tok, eos));
    struct swift_shard_index ix;
    if (o->dataset && swift_shard_index_read(&ix, o->dataset) == 0) {
        const char *tn = ix.template_name;
        if (tn && strcmp(tn, "none") && swift_eval_template_known(tn)) {
            struct swift_eval_prompter *pr = swift_eval_prompter_new(st->tok, tn);
            const uint32_t *ids;
            size_t n;
            long stop = -1;
            if (pr && swift_eval_prompter_encode(pr, "x", &ids, &n, &stop) == 0)
                add_stop(st, stop);
            swift_eval_prompter_free(pr);
        }
        swift_shard_index_release(&ix);
    }
    if (!st->nstop)
        return swift_error("%s: no eos_token_id (generation_config.json, config.json) and no "
                           "eos_token: generation would never stop",
                           o->model);
    return 0;
}

const char *grpo_fun_name(const struct grpo_state *st, int f)
{
    return f < st->nset ? swift_reward_name(st->rs, f) : "rm";
}

/* --reward-weights: one per function, the set's then the reward model's (the last). */
static int reward_weights(struct grpo_state *st, const struct swift_train_opts *o)
{
    st->w_rm = 1.0;
    if (!o->reward_weights)
        return 0;
    char *list = swift_xstrdup(o->reward_weights);
    int rc = 0;
    if (o->reward_model) {
        char *last = strrchr(list, ',');
        char *w = last ? last + 1 : list, *end;
        st->w_rm = strtod(w, &end);
        if (end == w || *end || !isfinite(st->w_rm))
            rc = swift_error("--reward-weights: '%s' is not a number", w);
        if (last)
            *last = 0;
        else
            *list = 0;
    }
    if (rc == 0 && st->nset && swift_reward_set_weights(st->rs, list) < 0)
        rc = -1;
    else if (rc == 0 && !st->nset && *list)
        rc = swift_error("--reward-weights: %d weights for 1 reward (the reward model)",
                         1 + (int)(strchr(o->reward_weights, ',') != NULL));
    free(list);
    return rc;
}

/* --reward-model DIR: a model with a score head (swift-train --rlhf rm, full tuning, or
 * transformers' *ForSequenceClassification) over the same vocabulary. */
static int load_reward_model(struct grpo_state *st, const struct swift_train_opts *o,
                             const struct swift_model *m)
{
    if (!o->reward_model)
        return 0;
    struct swift_model_config c;
    char *cp = swift_path_join(o->reward_model, "config.json");
    int rc = swift_model_config_load(&c, cp);
    free(cp);
    if (rc < 0)
        return -1;
    if (!c.score) /* loading it would give it a new, random head */
        return swift_error("--reward-model %s: no score head (config.json's architectures is "
                           "not *ForSequenceClassification: a swift-train --rlhf rm model?)",
                           o->reward_model);
    if (swift_model_load_score(&st->rm, o->reward_model, m->ops, 1, (uint64_t)o->seed) < 0)
        return -1;
    st->have_rm = 1;
    st->rm.act_ckpt = 1; /* forward only: one layer's activations */
    if (st->rm.cfg.vocab_size != m->cfg.vocab_size)
        return swift_error("--reward-model %s: vocabulary of %d tokens, the policy's is %d",
                           o->reward_model,
                           st->rm.cfg.vocab_size,
                           m->cfg.vocab_size);
    return 0;
}

/* The reward functions in order: --reward-funcs, then the --reward-cmd programs. */
static int add_rewards(struct grpo_state *st, const struct swift_train_opts *o)
{
    struct swift_reward_config cfg = SWIFT_REWARD_CONFIG_INIT;
    cfg.max_completion_length = o->max_completion_length;
    cfg.cache_length =
        o->soft_cache_length > 0 ? o->soft_cache_length : (o->max_completion_length + 3) / 4;
    if (cfg.cache_length > cfg.max_completion_length)
        return swift_error("--soft-cache-length %ld exceeds --max-completion-length %d",
                           cfg.cache_length,
                           o->max_completion_length);
    cfg.timeout_s = o->reward_timeout;
    cfg.format_pattern = o->format_pattern;
    st->rs = swift_reward_set_new(&cfg);
    if (!st->rs)
        return -1;
    for (int i = 0; i < o->nreward_funcs; i++)
        if (swift_reward_add(st->rs, o->reward_funcs[i], 1.0) < 0)
            return -1;
    for (int i = 0; i < o->nreward_cmds; i++)
        if (swift_reward_add_cmd(st->rs, o->reward_cmds[i], 1.0) < 0)
            return -1;
    st->nset = swift_reward_count(st->rs);
    st->nfun = st->nset + (o->reward_model != NULL);
    if (!st->nfun)
        return swift_error("--rlhf grpo needs a reward: --reward-funcs accuracy|format|length, "
                           "--reward-cmd 'PROGRAM ARGS' or --reward-model DIR");
    if (GX_FUNCS + 2 * st->nfun > SWIFT_OBJECTIVE_EXTRA)
        return swift_error("--rlhf grpo: at most %d reward functions",
                           (SWIFT_OBJECTIVE_EXTRA - GX_FUNCS) / 2);
    return reward_weights(st, o);
}

static long grpo_rollout_hook(struct swift_objective *obj, struct swift_model *m,
                              const struct swift_batch *mb, const struct swift_sample *const *xs,
                              int n, long step)
{
    return grpo_rollout(obj, m, mb, xs, n, step);
}

static int grpo_init_state(struct grpo_state *st, const struct swift_train_opts *o,
                           struct swift_model *m)
{
    st->G = o->num_generations;
    st->mu = o->num_iterations > 1 ? o->num_iterations : 1;
    st->max_new = o->max_completion_length;
    st->temperature = o->temperature;
    st->top_p = o->top_p;
    st->beta = o->beta >= 0 ? o->beta : 0.0; /* TRL's default: no KL term, no reference */
    st->scale = o->scale_rewards >= 0 ? o->scale_rewards : SWIFT_GRPO_SCALE_GROUP;
    st->seed = (uint64_t)o->seed;
    st->gen_step = -1;
    st->kept_step = -1;
    st->gp = (struct swift_grpo_params){
        .loss_type = o->grpo_loss_type >= 0 ? o->grpo_loss_type : SWIFT_GRPO_LOSS_DAPO,
        .beta = st->beta,
        .epsilon_low = o->epsilon,
        .epsilon_high = o->epsilon_high >= 0 ? o->epsilon_high : o->epsilon,
        .max_completion_length = o->max_completion_length};
    if (st->G < 2)
        return swift_error("--num-generations %d: a group needs at least 2 completions", st->G);
    if (!(st->temperature > 0))
        return swift_error("--temperature must be > 0 for --rlhf grpo (sampling)");
    if (swift_tokenizer_load(&st->tok, o->model) < 0 || find_stops(st, o) < 0 ||
        add_rewards(st, o) < 0 || load_reward_model(st, o, m) < 0)
        return -1;
    if (st->beta > 0 && swift_pref_ref_init(&st->ref, o, m) < 0)
        return -1;
    return 0;
}

int swift_objective_grpo(struct swift_objective *obj, const struct swift_train_opts *o,
                         struct swift_model *m)
{
    struct grpo_state *st = swift_xcalloc(1, sizeof(*st));
    *obj = (struct swift_objective){.name = "grpo",
                                    .rows_per_sample = o->num_generations,
                                    .batch_rows = 1,
                                    .repeat = o->num_iterations > 1 ? o->num_iterations : 1,
                                    .extra_T = o->max_completion_length,
                                    .kind = "prompts",
                                    .check = grpo_check,
                                    .fill = grpo_fill,
                                    .rollout = grpo_rollout_hook,
                                    .forward = grpo_forward,
                                    .backward = grpo_backward,
                                    .log = grpo_log,
                                    .log_samples = grpo_log_samples,
                                    .free = grpo_free,
                                    .state = st};
    if (grpo_init_state(st, o, m) < 0) {
        grpo_free(obj);
        return -1;
    }
    obj->item = st->gp.loss_type == SWIFT_GRPO_LOSS_DAPO ? "tokens" : "completions";
    obj->nextra = GX_FUNCS + 2 * st->nfun;
    return 0;
}
