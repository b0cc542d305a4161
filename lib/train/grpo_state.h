/*
 * grpo_state — what lib/train/grpo.c (the objective: construction, forward, backward, records)
 * and lib/train/grpo_rollout.c (generation, rewards, advantages, the old and reference
 * log-probs, completions.jsonl) share; private to those two files.
 *
 * A step's rollout is one struct grpo_mb per micro-batch: R = prompts x G rows of T tokens, each
 * the prompt followed by one sampled completion (targets on the completion only), with the
 * rewards, the advantages and, when needed, the per-token log-probs of the policy that sampled
 * them (--num-iterations > 1) and of the reference (--beta > 0). Token arrays are laid out as the
 * rows (R x T), so row r's completion tokens are [off[r], off[r] + len[r]) of each.
 */
#ifndef SWIFT_GRPO_STATE_H
#define SWIFT_GRPO_STATE_H

#include <jansson.h>
#include <stdint.h>

#include "lib/eval/kv.h"
#include "lib/formats/shard.h"
#include "lib/model/model.h"
#include "lib/train/grpo_loss.h"
#include "lib/train/objective.h"
#include "lib/train/pref_rows.h"
#include "lib/train/reward.h"

/* the sums in s->extra (then 2 per reward function: sum, sum of squares) */
enum {
    GX_REWARD,      /* weighted total */
    GX_REWARD_SQ,   /* its square */
    GX_ROWS,        /* completions */
    GX_LEN,         /* completion tokens */
    GX_CLIPPED,     /* completions that reached --max-completion-length without a stop token */
    GX_KL,          /* per-token KL, summed */
    GX_TOKENS,      /* completion tokens in the loss */
    GX_CLIP_LOW,    /* tokens clipped below */
    GX_CLIP_HIGH,   /* above */
    GX_CLIP_REGION, /* either */
    GX_ZERO_STD,    /* groups whose rewards are all equal */
    GX_GROUPS,      /* groups */
    GX_GROUP_STD,   /* per-row group std, summed (TRL's reward_std) */
    GX_FUNCS        /* first per-function sum */
};

struct grpo_mb {
    int R;
    int32_t *tok, *tgt, *pos;          /* (R*T) */
    int *off, *len, *plen;             /* (R) completion start, its tokens, prompt tokens */
    int *clipped;                      /* (R) no stop token within --max-completion-length */
    double *old, *ref;                 /* (R*T) per-token log-probs, or NULL */
    double *reward, *adv, *gstd, *per; /* (R), (R), (R), (nfun*R) */
    char **text;                       /* (R) completions as text */
    json_t **meta;                     /* (R/G) the prompts' metadata (owned) */
};

struct grpo_state {
    struct swift_grpo_params gp;
    int G, scale, mu, max_new;
    int nfun; /* reward functions: the set's, then the reward model ("rm") when there is one */
    int nset; /* the set's (lib/train/reward.h) */
    struct swift_model rm; /* --reward-model: a --rlhf rm model (score head), frozen */
    int have_rm;
    double w_rm;
    double temperature, top_p, beta;
    uint64_t seed;
    struct swift_reward_set *rs;
    struct swift_tokenizer *tok;
    int32_t stop[8];
    int nstop;
    struct swift_kv kv;
    int kv_rows, kv_cap;
    struct swift_pref_ref ref; /* --beta > 0 */
    int T;                     /* row length (set at the first rollout) */
    struct grpo_mb *mb;        /* the last rollout's micro-batches */
    int nmb;
    long gen_step; /* the step those were generated at; -1: none */
    /* during evaluations the training rollout waits here (an evaluation inside a
     * --num-iterations window must not make the window generate again) */
    struct grpo_mb *kept;
    int nkept, evaluating;
    long kept_step;
    int next; /* the micro-batch forward takes next */
    /* scratch of one micro-batch (R*T) */
    size_t capn;
    double *logp;
    float *dlogp, *w;
    struct swift_grpo_stats last; /* of the last forward, for the log */
};

/* function f's name for records: the set's names, then "rm" */
const char *grpo_fun_name(const struct grpo_state *st, int f);

/* lib/train/grpo_rollout.c */
long grpo_rollout(struct swift_objective *obj, struct swift_model *m, const struct swift_batch *mb,
                  const struct swift_sample *const *xs, int n, long step);
int grpo_log_samples(struct swift_objective *obj, const char *run_dir, long gs);
void grpo_mb_free(struct grpo_mb *g);
void grpo_mbs_free(struct grpo_mb *mb, int n); /* each, then the array */
/* Forward of m over micro-batch g's rows (lora_off as given; train 1: dropout on, the logits
 * kept for a gradient), each token's log-prob at the sampling temperature into out (R*T). The
 * policy's training pass and the old and reference passes of the rollout. Returns 0 or -1. */
int grpo_logps(struct grpo_state *st, struct swift_model *m, const struct grpo_mb *g, double *out,
               int lora_off, int train);

#endif
