/*
 * kto — the per-sample loss of KTO (swift-train --rlhf kto, lib/train/kto.c) as TRL's KTOTrainer
 * computes it, with its derivative: pure math on doubles, no model (tests/unit/test_kto.c).
 *
 *     struct swift_kto_params p = {.loss = SWIFT_KTO_KTO, .beta = 0.1,
 *                                  .desirable_weight = 1, .undesirable_weight = 1};
 *     double dlogp, loss = swift_kto_sample(&p, 1, -12.5 - -13.0, 0.2, &dlogp);
 *
 * logratio = policy log-prob of the completion - the reference's (sums over its tokens), kl the
 * batch's KL estimate (detached, >= 0; 0 for apo_zero_unpaired):
 *   kto                desirable    wd (1 - s(beta (logratio - kl)))
 *                      undesirable  wu (1 - s(beta (kl - logratio)))
 *   apo_zero_unpaired  desirable    wd (1 - s(beta logratio))
 *                      undesirable  wu s(beta logratio)
 * reward = beta logratio; dlogp = d loss / d (policy log-prob), kl held constant.
 */
#ifndef SWIFT_KTO_H
#define SWIFT_KTO_H

enum swift_kto_loss { SWIFT_KTO_KTO = 0, SWIFT_KTO_APO_ZERO_UNPAIRED };

struct swift_kto_params {
    int loss; /* enum swift_kto_loss */
    double beta, desirable_weight, undesirable_weight;
};

/* One sample of label 1 (desirable) or 0 (undesirable): its loss; *dlogp its derivative. */
double swift_kto_sample(const struct swift_kto_params *p, int label, double logratio, double kl,
                        double *dlogp);
/* The batch's KL estimate: max(0, mean over n of (kl_logp - ref_kl_logp)); 0 when n is 0. */
double swift_kto_kl(const double *kl_logp, const double *ref_kl_logp, int n);

#endif
