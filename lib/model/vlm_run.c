/* vlm run — the forward and backward of a vision-language model around lib/model's decoder (see
 * vlm.h): the vision tower's merged embeddings over the image pads, M-RoPE positions, the loss;
 * backward into the embeddings, then through the merger and the ViT. */
#include "lib/model/vlm.h"
#include "lib/core/alloc.h"
#include "lib/core/trace.h"
#include "lib/model/internal.h"
#include "lib/model/vlm_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static int check_batch(const struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    int V = v->llm.cfg.vocab_size;
    if (b->B <= 0 || b->T <= 0 || !b->tokens || !b->targets)
        return swift_error("empty batch");
    for (size_t n = 0; n < (size_t)b->B * b->T; n++) {
        if (b->tokens[n] < 0 || b->tokens[n] >= V)
            return swift_error(
                "token id %d at position %zu is outside the vocabulary (%d)", b->tokens[n], n, V);
        if (b->targets[n] >= V)
            return swift_error("target id %d is outside the vocabulary (%d)", b->targets[n], V);
        if (b->tokens[n] == v->vc.video_token_id)
            return swift_error("position %zu: a video token (videos are not supported yet)", n);
        /* packed rows: each document's positions run 0, 1, 2, ... from its first token */
        if (b->pos && b->pos[n] != 0 && (n % (size_t)b->T == 0 || b->pos[n] != b->pos[n - 1] + 1))
            return swift_error("token %zu: position %d does not follow %d (documents restart at "
                               "0 and count up)",
                               n,
                               b->pos[n],
                               n % (size_t)b->T ? b->pos[n - 1] : -1);
    }
    return 0;
}

static struct swift_batch llm_batch(const struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    struct swift_batch lb = {
        .B = b->B, .T = b->T, .tokens = b->tokens, .targets = b->targets, .pos = v->va->pos};
    return lb;
}

int swift_vlm_forward(struct swift_vlm *v, const struct swift_vlm_batch *b, struct swift_loss *loss,
                      float dscale)
{
    if (check_batch(v, b) < 0 || swift_vlm_plan(v, b) < 0)
        return -1;
    struct swift_model *m = &v->llm;
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = v->ops;
    struct swift_vlm_acts *va = v->va;
    int N = b->B * b->T, H = c->hidden_size, V = c->vocab_size;
    if (swift_model_reserve(m, b->B, b->T) < 0)
        return -1;
    int64_t t0 = swift_trace_now();
    if (swift_vlm_vision_forward(v, b) < 0)
        return -1;
    int64_t t1 = swift_trace_now();
    swift_trace_span("compute",
                     "vision",
                     t0,
                     t1,
                     (struct swift_targ[]){SWIFT_TARG_I("images", b->nimages),
                                           SWIFT_TARG_I("patches", b->npatches)},
                     2);
    struct swift_batch lb = llm_batch(v, b);
    struct swift_model_acts *a = m->acts;
    m->training = dscale != 0.0f;
    m->mrope_pos = va->pos3;
    ops->embed_fwd(a->res, b->tokens, m->embed, N, H);
    if (va->Nm)
        ops->copy_rows(a->res, va->dst, va->merged, NULL, va->Nm, H);
    for (int l = 0; l < c->num_layers; l++)
        swift_model_layer_train(m, l, &lb, &a->la[m->act_ckpt ? 0 : l]);
    float *last = a->res + (size_t)c->num_layers * N * H;
    ops->rmsnorm_fwd(a->lnf, a->rstdf, last, m->norm, N, H, c->rms_norm_eps);
    ops->matmul_fwd(a->logits, a->lnf, m->lm_head, NULL, N, H, V, 1.0f, 0.0f);
    ops->cross_entropy(dscale != 0.0f ? a->logits : NULL,
                       &loss->sum,
                       &loss->count,
                       &loss->correct,
                       a->logits,
                       b->targets,
                       N,
                       V,
                       dscale);
    swift_trace_span("compute", "llm", t1, swift_trace_now(), NULL, 0);
    return 0;
}

const float *swift_vlm_logits(const struct swift_vlm *v)
{
    return v->llm.acts ? v->llm.acts->logits : NULL;
}

int swift_vlm_image_embeds(const struct swift_vlm *v, float *out)
{
    const struct swift_vlm_acts *va = v->va;
    if (!va || !va->Nm)
        return 0;
    if (out) {
        size_t H = (size_t)v->llm.cfg.hidden_size;
        float *tmp = swift_xmalloc((size_t)va->Nm * H * sizeof(float));
        v->ops->download(tmp, va->merged, (size_t)va->Nm * H * sizeof(float));
        for (int g = 0; g < va->Nm; g++)
            memcpy(out + (size_t)va->win[g] * H, tmp + (size_t)g * H, H * sizeof(float));
        free(tmp);
    }
    return va->Nm;
}

void swift_vlm_backward(struct swift_vlm *v, const struct swift_vlm_batch *b)
{
    struct swift_model *m = &v->llm;
    const struct swift_ops *ops = v->ops;
    struct swift_vlm_acts *va = v->va;
    int N = b->B * b->T, H = m->cfg.hidden_size;
    struct swift_batch lb = llm_batch(v, b);
    float *gembed = m->gembed;
    m->gembed = NULL; /* the embeddings' gradient is taken below, without the image pads */
    m->mrope_pos = va->pos3;
    int64_t t0 = swift_trace_now();
    swift_model_backward(m, &lb);
    m->gembed = gembed;
    int64_t t1 = swift_trace_now();
    swift_trace_span("compute", "llm_backward", t0, t1, NULL, 0);
    float *dx = m->acts->dres; /* d loss / d (the decoder's input) */
    int vision =
        (v->frozen & (SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER)) != (SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER);
    if (va->Nm && vision) {
        ops->copy_rows(va->dmerged, NULL, dx, va->dst, va->Nm, H);
        swift_vlm_vision_backward(v, va->dmerged);
        swift_trace_span("compute", "vision_backward", t1, swift_trace_now(), NULL, 0);
    }
    if (gembed) {
        if (va->Nm) /* the pads' embeddings were overwritten: no gradient for them */
            ops->copy_rows(dx, va->dst, va->zeros, NULL, va->Nm, H);
        ops->embed_bwd(gembed, dx, b->tokens, N, H);
    }
}
