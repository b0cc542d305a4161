/*
 * objective — what swift-train minimises, behind a small interface the step loop calls, so that
 * preference objectives (DPO, ORPO, KTO, reward models; GRPO later) are new files in lib/train/
 * and not changes to the loop (lib/train/train.c). SFT (lib/train/sft.c) is the one there is.
 *
 *     struct swift_objective obj;
 *     if (swift_objective_init(&obj, "sft", opts, &model) < 0)    // unknown name: reported, -1
 *         return -1;
 *     // loader threads, per sample of a micro-batch (rows_per_sample rows of T tokens each):
 *     long items = obj.fill(&obj, &sample, T, tok, tgt, pos);
 *     // the loop, per step: items summed over the step's micro-batches and all ranks
 *     struct swift_objective_sums s = {0};
 *     for (each micro-batch b) {
 *         obj.forward(&obj, &model, &b, 1.0f / items, &s);          // loss of b into s
 *         obj.backward(&obj, &model, &b);                           // gradients accumulate
 *     }
 *     ... s summed over ranks; loss = s.loss.sum / s.loss.count ...
 *     obj.log(&obj, &s, "", record);                              // "token_acc": …
 *     swift_objective_free(&obj);
 *
 * The contract the loop relies on, and nothing more:
 *   - A micro-batch holds --per-device-train-batch-size samples of rows_per_sample rows each
 *     (struct swift_batch B = samples x rows_per_sample), filled by `fill` from the shards'
 *     samples on the loader threads: `fill` must not touch shared state. x == NULL asks for
 *     padding rows (evaluation's last batch) that contribute nothing.
 *   - The step's loss is a mean over *items* (SFT: trained tokens, ms-swift's num_items_in_batch;
 *     a pair objective: pairs): fill returns the items of a sample, the loop sums them over the
 *     step and the ranks and passes scale = 1/total to every forward (0: evaluation — no
 *     gradient, no dropout). forward adds the micro-batch's per-item losses to s->loss.sum, its
 *     items to s->loss.count and the items it gets right to s->loss.correct (token accuracy;
 *     reward accuracy), and its own sums to s->extra[0..nextra); with scale != 0 it leaves what
 *     backward needs, and backward accumulates (+=) the gradients of scale x that loss.
 *   - The loop sums s over ranks (every field, nextra included), logs loss = sum / count and the
 *     keys `log` adds to the logging.jsonl record between "learning_rate" and "epoch" (with
 *     prefix "eval_" in the eval record, where `item` names the count: "eval_tokens").
 *   - Dropout masks come from m->dropout_seed, which the loop sets per micro-batch; the
 *     optimizer, clipping, schedule, checkpoints and the ranks' sync stay the loop's.
 *
 * Adding one (DPO was added so): write lib/train/dpo.c with a constructor
 * `int swift_objective_dpo(struct swift_objective *, const struct swift_train_opts *,
 * struct swift_model *)` and add it to the table in lib/train/objective.c.
 *   - DPO (lib/train/dpo.c; ORPO, SimPO and CPO share it): rows_per_sample 2 (the chosen and the
 *     rejected response of a pair; fill masks the prompt), items = pairs, kind "pairs". The
 *     constructor keeps a reference: with LoRA the same model with the adapters switched off
 *     (m->lora_off), else a frozen copy loaded from --model into `state`. `reference` runs it
 *     (scale 0) before the policy's forward, which takes each row's summed log-prob of its
 *     response (swift_model_token_nll over the row), adds the per-pair losses
 *     (lib/train/pref_loss.h) to s->loss, chosen > rejected reward to s->loss.correct and
 *     TRL's metrics to s->extra, then scales each row's logits' gradient by
 *     d loss / d (-log-prob) (swift_model_scale_dlogits) for the ordinary backward.
 *   - KTO (lib/train/kto.c): rows_per_sample 1 (prompt + completion; fill carries the label in
 *     the targets: an undesirable row's are -2 - id), items = rows, kind "kto". The KL rows
 *     (each row's prompt with the previous row's completion) are built in forward from the
 *     micro-batch; policy and reference run over them without gradient before the policy's
 *     forward over the rows, and the per-row losses (kto.h) scale each row's gradient as DPO.
 *   - A reward model (lib/train/rm.c): rows_per_sample 2, a scalar score per row (the last
 *     token's hidden state through a score head, as transformers' SequenceClassification
 *     models: swift_model_forward_hidden, swift_model_score), per-pair loss
 *     -log sigmoid(r_chosen - r_rejected); backward is swift_model_score_backward.
 */
#ifndef SWIFT_OBJECTIVE_H
#define SWIFT_OBJECTIVE_H

#include <jansson.h>
#include <stdint.h>

#include "lib/formats/shard.h"
#include "lib/model/model.h"
#include "lib/train/train.h"

/* Objective-specific sums per step beyond loss/count/correct (the ranks' check-in carries at
 * most 48 doubles: these 44 and the loss' 3). */
#define SWIFT_OBJECTIVE_EXTRA 44

/* What a step (or an evaluation) adds up over its micro-batches, then over the ranks. */
struct swift_objective_sums {
    struct swift_loss loss; /* sum of per-item losses, items, items right */
    double extra[SWIFT_OBJECTIVE_EXTRA];
};

struct swift_objective {
    const char *name;    /* "sft" */
    int rows_per_sample; /* rows a sample fills in a micro-batch: 1 (sft), 2 (pairs) */
    int nextra;          /* sums used in extra[] (0 .. SWIFT_OBJECTIVE_EXTRA) */
    const char *item;    /* what loss.count counts: "tokens" (the eval record's eval_tokens) */
    const char *kind;    /* the shards it takes: NULL (SFT samples) or "pairs" (index.json
                          * "kind"); the loader refuses the other kind */
    /* 1: --per-device-train-batch-size counts rows (GRPO: completions), so a micro-batch holds
     * batch / rows_per_sample samples; 0: it counts samples */
    int batch_rows;
    int repeat;  /* optimizer steps each step's samples serve (GRPO --num-iterations); 0 = 1 */
    int extra_T; /* tokens a row holds beyond the shards' max_length (GRPO: the completion) */
    /* NULL, or why sample x does not fit the objective ("is not a pair: ..."), checked when the
     * shards are opened. */
    const char *(*check)(const struct swift_objective *obj, const struct swift_sample *x);
    /* NULL, or the reference model's pass over micro-batch b, run by the loop just before
     * forward (its own trace span, "reference_forward"); forward runs it itself when it was
     * not (evaluation). Returns 0 or -1 (reported). */
    int (*reference)(struct swift_objective *obj, struct swift_model *m,
                     const struct swift_batch *b);
    /* NULL, or (--precompute-ref-logps, lib/train/reflogps.c) the reference's summed log-prob
     * of each row of b under model ref (--model's weights, adapters switched off) into out
     * (b->B values), before training; then use_reference hands the stored values of a batch's
     * rows to the next forward, which runs no reference pass (reference is NULL then). */
    int (*reference_rows)(struct swift_objective *obj, struct swift_model *ref,
                          const struct swift_batch *b, double *out);
    int (*use_reference)(struct swift_objective *obj, struct swift_model *m,
                         const struct swift_batch *b, const double *ref);
    /* NULL, or (GRPO, lib/train/grpo.c) the step's rollout, run by the loop once per step after
     * the data arrived and before the micro-batches: mb[0..n) are the step's micro-batches as
     * fill made them (prompts), xs[a] micro-batch a's samples (the shards' own: their meta);
     * the objective generates, scores and keeps what its forward calls (in micro-batch order)
     * need. step: the 0-based step, or -1 for an evaluation batch (n 1, forward with scale 0
     * next). Returns the step's items on this rank (in place of fill's counts), or -1
     * (reported). */
    long (*rollout)(struct swift_objective *obj, struct swift_model *m,
                    const struct swift_batch *mb, const struct swift_sample *const *xs, int n,
                    long step);
    long rollout_tokens; /* set by rollout: the tokens of its rows (prompts and completions;
                          * the step span's "tokens" in place of the prompts' alone) */
    /* NULL, or a sample of the last step's rows appended to RUN_DIR/completions.jsonl by rank 0
     * after each logged step (gs: the 1-based step). Returns 0 or -1 (reported). */
    int (*log_samples)(struct swift_objective *obj, const char *run_dir, long gs);
    /* One sample into rows_per_sample rows of T tokens at tok/tgt/pos (row after row); x NULL:
     * padding rows. Returns the sample's items. Called by several loader threads at once. */
    long (*fill)(const struct swift_objective *obj, const struct swift_sample *x, int T,
                 int32_t *tok, int32_t *tgt, int32_t *pos);
    /* The micro-batch's loss into *s; scale: 1/(items of the step over all ranks), or 0 for
     * evaluation (no gradient, no dropout). Returns 0 or -1 (reported). */
    int (*forward)(struct swift_objective *obj, struct swift_model *m, const struct swift_batch *b,
                   float scale, struct swift_objective_sums *s);
    /* Gradients of the last forward, accumulated into the trainable parameters. */
    void (*backward)(struct swift_objective *obj, struct swift_model *m,
                     const struct swift_batch *b);
    /* The metrics of s (summed over the step and the ranks) into a log record, each key
     * prefixed by `prefix` ("" or "eval_"); the loop writes loss itself. */
    void (*log)(const struct swift_objective *obj, const struct swift_objective_sums *s,
                const char *prefix, json_t *rec);
    void (*free)(struct swift_objective *obj); /* NULL: nothing to free */
    void *state;                               /* the objective's own, owned */
};

/* Set up the objective called `name` for model m (loaded, adapters attached): fills *obj.
 * Returns 0, or -1 after reporting an unknown name or a failure of its constructor. */
int swift_objective_init(struct swift_objective *obj, const char *name,
                         const struct swift_train_opts *o, struct swift_model *m);
/* Release what the objective holds; safe on a zeroed struct. */
void swift_objective_free(struct swift_objective *obj);

/* The constructors objective.c's table names. */
int swift_objective_sft(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m);
/* lib/train/dpo.c: preference pairs (docs/preference.md) */
int swift_objective_dpo(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m);
int swift_objective_cpo(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m);
int swift_objective_simpo(struct swift_objective *obj, const struct swift_train_opts *o,
                          struct swift_model *m);
int swift_objective_orpo(struct swift_objective *obj, const struct swift_train_opts *o,
                         struct swift_model *m);
/* lib/train/rm.c: reward models on pairs (the model loaded with swift_model_load_score) */
int swift_objective_rm(struct swift_objective *obj, const struct swift_train_opts *o,
                       struct swift_model *m);

/* lib/train/kto.c: unpaired labelled samples (docs/preference.md "KTO") */
int swift_objective_kto(struct swift_objective *obj, const struct swift_train_opts *o,
                        struct swift_model *m);
/* lib/train/grpo.c: online RL on prompt shards (docs/grpo.md) */
int swift_objective_grpo(struct swift_objective *obj, const struct swift_train_opts *o,
                         struct swift_model *m);

#endif
