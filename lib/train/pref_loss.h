/*
 * pref_loss — the per-pair losses of preference training (lib/train/dpo.c), as TRL computes them,
 * with their derivatives: pure math on doubles, no model (tests/unit/test_objective.c checks
 * hand-computed cases and finite differences).
 *
 *     struct swift_pref_params p = {.obj = SWIFT_PREF_DPO, .loss = SWIFT_PREF_SIGMOID,
 *                                   .beta = 0.1};
 *     struct swift_pref_in in = {.pc = -12.5, .pr = -14.0, .rc = -13.0, .rr = -13.5,
 *                                .nc = 5, .nr = 6};
 *     struct swift_pref_out out;
 *     swift_pref_pair(&p, &in, &out);   // out.loss, out.dpc = d loss / d pc, ...
 *
 * Inputs are the summed log-probs of the chosen (pc) and rejected (pr) response under the policy
 * and the reference (rc, rr; DPO only) and their response tokens (nc, nr). Derivatives are with
 * respect to the policy's *sums* pc and pr, whatever the objective averages.
 *
 *   DPO (trl DPOTrainer), z = beta ((pc - rc) - (pr - rr)), rewards beta (pc - rc), beta (pr - rr):
 *     sigmoid  -(1-ls) log s(z) - ls log s(-z)       (ls: label smoothing, cDPO; 0: DPO)
 *     hinge    relu(1 - z)
 *     ipo      ((pc - rc)/nc - (pr - rr)/nr - 1/(2 beta))^2
 *     robust   (-(1-ls) log s(z) + ls log s(-z)) / (1 - 2 ls)
 *   CPO (trl CPOTrainer, alpha 0), a = pc - pr, or with averages (ipo, simpo) pc/nc - pr/nr;
 *   rewards beta * the chosen/rejected log-prob (averaged for ipo, simpo):
 *     sigmoid  -(1-ls) log s(beta a) - ls log s(-beta a)
 *     simpo    the same with a - gamma/beta (SimPO)
 *     hinge    relu(1 - beta a)
 *     ipo      (a - 1/(2 beta))^2
 *   ORPO (trl ORPOTrainer) on averages c = pc/nc, r = pr/nr:
 *     log_odds = (c - r) - (log(1 - e^c) - log(1 - e^r)), ratio = log s(log_odds),
 *     loss -beta ratio, rewards beta c, beta r.
 * The NLL terms (DPO's rpo_alpha, CPO's cpo_alpha, ORPO's) are means over the micro-batch's
 * tokens, not per pair: dpo.c adds them.
 */
#ifndef SWIFT_PREF_LOSS_H
#define SWIFT_PREF_LOSS_H

enum swift_pref_obj { SWIFT_PREF_DPO = 0, SWIFT_PREF_CPO, SWIFT_PREF_ORPO };
enum swift_pref_loss {
    SWIFT_PREF_SIGMOID = 0,
    SWIFT_PREF_HINGE,
    SWIFT_PREF_IPO,
    SWIFT_PREF_ROBUST,
    SWIFT_PREF_SIMPO,
    SWIFT_PREF_KTO,              /* --rlhf kto (lib/train/kto.h) */
    SWIFT_PREF_APO_ZERO_UNPAIRED /* --rlhf kto */
};

struct swift_pref_params {
    int obj;  /* enum swift_pref_obj */
    int loss; /* enum swift_pref_loss (ORPO: ignored) */
    double beta, label_smoothing, simpo_gamma;
};

struct swift_pref_in {
    double pc, pr; /* policy: summed log-probs of the chosen and the rejected response */
    double rc, rr; /* reference (DPO) */
    long nc, nr;   /* response tokens (averages divide by max(n, 1)) */
};

struct swift_pref_out {
    double loss;
    double dpc, dpr;           /* d loss / d pc, d loss / d pr */
    double reward_c, reward_r; /* rewards/chosen, rewards/rejected */
    double logp_c, logp_r;     /* logps/chosen, logps/rejected (sums; CPO ipo/simpo, ORPO: means) */
    double log_odds, odds_ratio; /* ORPO: log_odds_chosen, log_odds_ratio; else 0 */
};

/* "sigmoid", "hinge", "ipo", "robust", "simpo", "kto", "apo_zero_unpaired"; parse: the enum, or -1
 * for another word. */
const char *swift_pref_loss_name(int loss);
int swift_pref_loss_parse(const char *name);
/* Whether the objective takes that loss type: 1 or 0. */
int swift_pref_loss_ok(int obj, int loss);
/* One pair. */
void swift_pref_pair(const struct swift_pref_params *p, const struct swift_pref_in *in,
                     struct swift_pref_out *out);
/* log sigmoid(x), stable for any x */
double swift_log_sigmoid(double x);

#endif
