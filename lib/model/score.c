/* score — a reward model's head (transformers' *ForSequenceClassification, num_labels 1): the
 * final norm's output at one token per row through score (1,H), and its backward into that
 * output (see model.h). */
#include "lib/model/model.h"
#include "lib/core/mem.h"
#include "lib/model/internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

int swift_model_score_pos(const int32_t *tok, int L, int pad)
{
    for (int t = L - 1; t >= 0; t--)
        if (tok[t] != pad)
            return t;
    return 0;
}

/* Backend scratch for n rows: sel (n,H), then d sel (n,H), val (n), idx (n int32). */
static float *scratch(struct swift_model *m, int n, float **val, int32_t **didx)
{
    int H = m->cfg.hidden_size;
    float *sel = swift_mem_alloc(
        m->ops->alloc, SWIFT_MEM_ACTIVATIONS, (2 * (size_t)n * H + 2 * (size_t)n) * sizeof(float));
    if (!sel) {
        swift_error("out of memory for the scores of %d tokens on %s", n, m->ops->name);
        return NULL;
    }
    *val = sel + 2 * (size_t)n * H;
    *didx = (int32_t *)(*val + n);
    return sel;
}

static int check(const struct swift_model *m, const int32_t *idx, int n)
{
    if (!m->score)
        return swift_error("the model has no score head (not a reward model)");
    int N = m->capB * m->capT;
    for (int i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= N)
            return swift_error("score asked for token %d of %d", idx[i], N);
    return 0;
}

int swift_model_score(struct swift_model *m, const int32_t *idx, int n, float *out)
{
    const struct swift_ops *ops = m->ops;
    int H = m->cfg.hidden_size;
    if (n <= 0)
        return 0;
    if (check(m, idx, n) < 0)
        return -1;
    float *val;
    int32_t *didx;
    float *sel = scratch(m, n, &val, &didx);
    if (!sel)
        return -1;
    ops->upload(didx, idx, (size_t)n * sizeof(int32_t));
    ops->copy_rows(sel, NULL, m->acts->lnf, didx, n, H);
    ops->matmul_fwd(val, sel, m->score, NULL, n, H, 1, 1.0f, 0.0f);
    ops->download(out, val, (size_t)n * sizeof(float));
    swift_mem_free(ops->free, sel);
    return 0;
}

int swift_model_score_backward(struct swift_model *m, const struct swift_batch *b,
                               const int32_t *idx, int n, const float *dscore)
{
    const struct swift_ops *ops = m->ops;
    int H = m->cfg.hidden_size, N = b->B * b->T;
    if (check(m, idx, n) < 0)
        return -1;
    struct swift_model_acts *a = m->acts;
    ops->zero(a->dln, (size_t)N * H);
    if (n > 0) {
        float *val;
        int32_t *didx;
        float *sel = scratch(m, n, &val, &didx);
        if (!sel)
            return -1;
        ops->upload(didx, idx, (size_t)n * sizeof(int32_t));
        ops->upload(val, dscore, (size_t)n * sizeof(float));
        ops->copy_rows(sel, NULL, a->lnf, didx, n, H);
        /* d sel (n,H) = dscore (n,1) @ score (1,H); gscore += dscore^T @ sel */
        float *dsel = sel + (size_t)n * H;
        ops->matmul_bwd(dsel, m->gscore, NULL, val, sel, m->score, n, H, 1, 1.0f, 0.0f);
        ops->copy_rows(a->dln, didx, dsel, NULL, n, H);
        swift_mem_free(ops->free, sel);
    }
    swift_model_backward_from_lnf(m, b);
    return 0;
}
