/*
 * grpo_loss — GRPO's advantages and clipped policy-gradient loss as TRL 1.16.0's GRPOTrainer
 * computes them, with the loss's derivative with respect to every per-token log-prob: pure math
 * on doubles, no model. lib/train/grpo.c feeds it the policy's per-token log-probs
 * (swift_model_token_logps) and turns dlogp into parameter gradients (swift_model_token_grad).
 * tests/unit/test_grpo_loss.c checks everything against TRL's own code on committed fixtures
 * (tests/ref/gen_grpo_fixtures.py, tests/fixtures/grpo).
 *
 *     double adv[8];
 *     swift_grpo_advantages(rewards, 8, 4, SWIFT_GRPO_SCALE_GROUP, adv, NULL);
 *     struct swift_grpo_params p = {.loss_type = SWIFT_GRPO_LOSS_DAPO, .beta = 0.0,
 *                                   .epsilon_low = 0.2, .epsilon_high = 0.2,
 *                                   .max_completion_length = 256};
 *     struct swift_grpo_stats st = {0};            // per optimizer step
 *     for each micro-batch of R rows:
 *         swift_grpo_loss(&p, R, off, len, logp, NULL, NULL, adv + r0, dlogp, &st);
 *         ... token_grad with w[i] = dlogp[i] / items, backward
 *     loss = st.contrib / st.items (after summing both over ranks)
 * where items, the step's rows (grpo, bnpo, dr_grpo) or completion tokens (dapo) over every
 * micro-batch and rank, is known once the step's completions are generated (dapo: an allreduce
 * of the token counts).
 *
 * Advantages (trl/trainer/grpo_trainer.py:2762-2810, _generate_and_score_completions, the default
 * multi_objective_aggregation "sum_then_normalize"): rows come in groups of G consecutive
 * completions of one prompt; mean_g the group's mean reward, std_g its standard deviation with
 * Bessel's correction (TRL's nanstd: sum (r - mean)^2 / (n - 1); 0 when G is 1), std_b the same
 * over all n rows (0 when n is 1):
 *     group  A = (r - mean_g) / (std_g + 1e-4)          (TRL's default; scale_rewards true)
 *     batch  A = (r - mean_g) / (std_b + 1e-4)          (mean still the group's)
 *     none   A = r - mean_g                             (Dr. GRPO; scale_rewards false)
 * std_out receives TRL's std_rewards per row: std_g for group and none, std_b for batch;
 * frac_reward_zero_std is the fraction of rows whose std_out is <= 1e-8 (torch.isclose(std, 0)).
 * TRL computes them in float32, here in double (they agree to ~1e-7 relative).
 *
 * Loss (grpo_trainer.py:3020-3185, _compute_loss, importance_sampling_level "token"): for token t
 * of row r, with logp the policy's log-prob, old the old policy's (TRL's per_token_logps.detach()
 * when num_iterations is 1: pass NULL), ref the reference model's, A the row's advantage:
 *     c    = exp(logp - old)
 *     kl   = c (exp(ref - logp) - (ref - logp) - 1)      (only when beta != 0)
 *     l_rt = -min(c A, clamp(c, 1 - epsilon_low, 1 + epsilon_high) A) + beta kl
 * The factor c on the KL is TRL's use_bias_correction_kl (grpo_trainer.py:3104; on by default in
 * TRL 1.16: the importance-sampling correction that makes the KL's gradient the unbiased
 * reverse-KL gradient, DeepSeek-V3.2); it also enters the logged kl. kl_uncorrected = 1 drops it
 * (TRL's use_bias_correction_kl=False: the plain k3 estimator).
 * The l_rt are aggregated by loss_type over one micro-batch of R rows, len_r completion tokens
 * each (TRL's mask sums; L = sum_r len_r):
 *     grpo     TRL: mean_r (sum_t l_rt / max(len_r, 1)) / GA
 *     bnpo     TRL: (sum l / max(L, 1)) / GA
 *     dr_grpo  TRL: sum l / (R * max_completion_length) / GA
 *     dapo     TRL: sum l / (num_items_in_batch / num_processes * GA / steps_per_generation),
 *              num_items_in_batch the completion tokens of the whole generation batch (all ranks)
 *     (GA = gradient_accumulation_steps; DDP then averages the ranks' gradients.)
 * swift_grpo_loss returns and adds to st->contrib the micro-batch's share and adds to st->items
 * its items, so that the step's loss is (sum of contrib) / (sum of items) over its micro-batches
 * and ranks:
 *     grpo     contrib = sum_r sum_t l_rt / max(len_r, 1)          items = R
 *     bnpo     contrib = R sum l / max(L, 1)                        items = R
 *     dr_grpo  contrib = sum l / max_completion_length              items = R
 *     dapo     contrib = sum l                                      items = L
 * For one micro-batch on one process this is TRL's loss exactly. Over several micro-batches and
 * ranks of R rows each it equals TRL's average for grpo, bnpo and dr_grpo; for dapo it is a token
 * mean over the whole step, which is TRL's when steps_per_generation = GA (TRL's default: one
 * generation batch per optimizer step). With micro-batches of different R, grpo/bnpo/dr_grpo
 * weight rows equally where TRL weights micro-batches equally.
 * dlogp[i] = d contrib / d logp_i, the aggregation's factor (1/max(len_r, 1), R/max(L, 1),
 * 1/max_completion_length, 1) times d l_rt / d logp: from the policy term -c A where the min
 * takes the unclipped term, 0 where it takes the active clamp (low: c < 1 - epsilon_low and
 * A < 0; high: c > 1 + epsilon_high and A > 0), split as torch.minimum's gradient at ties; from
 * the KL beta c (k + 1 - exp(ref - logp)), k the uncorrected kl (beta (1 - exp(ref - logp)) with
 * kl_uncorrected).
 *
 * Logging (st; TRL's metrics, grpo_trainer.py:3254-3283): kl = kl_sum / tokens,
 * clip_ratio/low_mean = clip_low / tokens, clip_ratio/high_mean = clip_high / tokens,
 * clip_ratio/region_mean = clip_region / tokens (low or high); clip_ratio/low_min and
 * clip_ratio/high_max: the smallest (largest) per-row fraction of low (high) clipped tokens over
 * rows with tokens (seq_low_min, seq_high_max; valid when seqs > 0; merge over ranks with min and
 * max, not sums).
 *
 * Not implemented (TRL options outside the default): importance_sampling_level "sequence" (GSPO),
 * delta (two-sided clipping's cap on c), the vLLM importance-sampling correction, entropy masking
 * (top_entropy_quantile) and the entropy bonus, off_policy_mask_threshold, the loss types cispo,
 * sapo, luspo and vespo, multi_objective_aggregation "normalize_then_sum", and unscorable rows (NaN
 * rewards: every reward here is a number or the run stops).
 */
#ifndef SWIFT_GRPO_LOSS_H
#define SWIFT_GRPO_LOSS_H

enum swift_grpo_loss {
    SWIFT_GRPO_LOSS_GRPO,
    SWIFT_GRPO_LOSS_BNPO,
    SWIFT_GRPO_LOSS_DR_GRPO,
    SWIFT_GRPO_LOSS_DAPO
};
enum swift_grpo_scale { SWIFT_GRPO_SCALE_GROUP, SWIFT_GRPO_SCALE_BATCH, SWIFT_GRPO_SCALE_NONE };

/* "grpo", "bnpo", "dr_grpo", "dapo": the enum, or -1 for another word. */
int swift_grpo_loss_parse(const char *s);
/* "group", "batch", "none"; "true" = group, "false" = none (TRL's booleans): the enum, or -1. */
int swift_grpo_scale_parse(const char *s);
/* The names back ("?" for a value outside the enum). */
const char *swift_grpo_loss_name(int loss_type);
const char *swift_grpo_scale_name(int scale);

/* TRL's advantages of n rewards in groups of G consecutive rows (n a multiple of G) into adv (n),
 * and each row's std_rewards into std_out (n; may be NULL): see above. */
void swift_grpo_advantages(const double *rewards, int n, int G, int scale, double *adv,
                           double *std_out);

struct swift_grpo_params {
    int loss_type; /* enum swift_grpo_loss */
    double beta, epsilon_low, epsilon_high;
    int max_completion_length; /* dr_grpo's constant */
    int kl_uncorrected;        /* 1: TRL's use_bias_correction_kl=False (0: TRL's default) */
};

/* Sums over micro-batches (add to, never reset); seq_* are a min and a max. */
struct swift_grpo_stats {
    double contrib, items, kl_sum, clip_low, clip_high, clip_region, tokens;
    double seqs;                      /* rows with at least one token */
    double seq_low_min, seq_high_max; /* valid when seqs > 0 */
};

/* One micro-batch of R rows: row r's completion tokens are logp[off[r] .. off[r] + len[r])
 * (policy), old and ref in the same layout (old NULL: old = logp; ref NULL iff beta == 0), adv[r]
 * its advantage. Writes dlogp[i] = d contrib / d logp_i for every token of every row (float;
 * tokens outside the rows untouched), adds to st, returns contrib. */
double swift_grpo_loss(const struct swift_grpo_params *p, int R, const int *off, const int *len,
                       const double *logp, const double *old, const double *ref, const double *adv,
                       float *dlogp, struct swift_grpo_stats *st);

#endif
