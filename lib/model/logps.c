/* Per-token log-probs of the last forward's logits and their gradient (GRPO's loss is a function
 * of every token's log-prob, lib/train/grpo_loss.h), over the op table's cross_entropy. */
#include "lib/model/model.h"
#include "lib/model/internal.h"

#include <stdio.h>

#include "lib/core/trace.h"
#include "lib/core/banned.h"

void swift_model_token_logps(struct swift_model *m, const int32_t *targets, int n0, int n1,
                             double *logp)
{
    int V = m->cfg.vocab_size;
    const float *lg = m->acts->logits;
    OP_BEGIN();
    for (int i = n0; i < n1; i++) {
        logp[i - n0] = 0;
        if (targets[i] < 0)
            continue;
        double nll = 0;
        long count = 0, correct = 0;
        m->ops->cross_entropy(
            NULL, &nll, &count, &correct, lg + (size_t)i * V, targets + i, 1, V, 0.0f);
        logp[i - n0] = -nll;
    }
    char sh[48] = "";
    if (op_t0)
        snprintf(sh, sizeof(sh), "[%d,%d]", n1 - n0, V);
    OP_END("token_logps", 3.0 * (n1 - n0) * V, sh);
}

void swift_model_token_grad(struct swift_model *m, const int32_t *targets, int n0, int n1,
                            const float *w)
{
    int V = m->cfg.vocab_size;
    if (n1 <= n0)
        return;
    float *lg = m->acts->logits;
    OP_BEGIN();
    /* softmax - onehot (the gradient of -logp) on the range's trained tokens, 0 elsewhere; then
     * each trained token's row times -w */
    double nll = 0;
    long count = 0, correct = 0;
    m->ops->cross_entropy(lg + (size_t)n0 * V,
                          &nll,
                          &count,
                          &correct,
                          lg + (size_t)n0 * V,
                          targets + n0,
                          n1 - n0,
                          V,
                          1.0f);
    for (int i = n0; i < n1; i++)
        if (targets[i] >= 0)
            m->ops->scale(lg + (size_t)i * V, -w[i - n0], (size_t)V);
    char sh[48] = "";
    if (op_t0)
        snprintf(sh, sizeof(sh), "[%d,%d]", n1 - n0, V);
    OP_END("token_grad", 4.0 * (n1 - n0) * V, sh);
}
