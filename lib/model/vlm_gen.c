/* vlm gen — what generation with a vision-language model needs of a prompt (see vlm.h,
 * swift_vlm_prompt): the M-RoPE positions, the rope delta that decoding continues from, and the
 * merged image embeddings that replace the <|image_pad|> tokens' at prefill. The cached forward
 * itself is lib/model's (swift_pkv_forward_mm). */
#include "lib/model/vlm.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/model/vlm_internal.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_vlm_prompt_free(struct swift_vlm_prompt *p)
{
    free(p->pos3);
    free(p->embeds);
    free(p->embed_of);
    memset(p, 0, sizeof(*p));
}

static int check_tokens(const struct swift_vlm *v, const int32_t *tokens, int T)
{
    int V = v->llm.cfg.vocab_size;
    for (int i = 0; i < T; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return swift_error(
                "token id %d at position %d is outside the vocabulary (%d)", tokens[i], i, V);
        if (tokens[i] == v->vc.video_token_id)
            return swift_error("position %d: a video token (videos are not supported yet)", i);
    }
    return 0;
}

int swift_vlm_prompt(struct swift_vlm *v, const int32_t *tokens, int T, const float *pixels,
                     int npatches, const int32_t *grid_thw, int nimages, struct swift_vlm_prompt *p)
{
    memset(p, 0, sizeof(*p));
    if (T < 1 || !tokens)
        return swift_error("empty prompt");
    if (check_tokens(v, tokens, T) < 0)
        return -1;
    p->T = T;
    p->pos3 = swift_xmalloc((size_t)3 * T * sizeof(int32_t));
    p->embed_of = swift_xmalloc((size_t)T * sizeof(int32_t));
    if (swift_vlm_rope_index(&v->vc, tokens, 1, T, grid_thw, nimages, p->pos3) < 0) {
        swift_vlm_prompt_free(p);
        return -1;
    }
    int32_t mx = -1;
    for (size_t i = 0; i < (size_t)3 * T; i++)
        mx = p->pos3[i] > mx ? p->pos3[i] : mx;
    p->delta = mx + 1 - T; /* transformers' rope_deltas */
    p->first_image = T;
    for (int i = 0; i < T; i++) {
        p->embed_of[i] = tokens[i] == v->vc.image_token_id ? p->nembeds++ : -1;
        if (p->embed_of[i] >= 0 && p->first_image == T)
            p->first_image = i;
    }
    if (nimages == 0)
        return 0;
    struct swift_vlm_batch b = {.B = 1,
                                .T = T,
                                .tokens = tokens,
                                .targets = NULL,
                                .pixels = pixels,
                                .npatches = npatches,
                                .grid_thw = grid_thw,
                                .nimages = nimages};
    int64_t t0 = swift_trace_now();
    if (swift_vlm_plan(v, &b) < 0 || swift_vlm_vision_forward(v, &b) < 0) {
        swift_vlm_prompt_free(p);
        return -1;
    }
    int n = swift_vlm_image_embeds(v, NULL);
    if (n != p->nembeds) { /* cannot happen: the plan checked the pads against the grids */
        swift_vlm_prompt_free(p);
        return swift_error("%d image embeddings for %d image pads", n, p->nembeds);
    }
    p->embeds = swift_xmalloc((size_t)n * v->llm.cfg.hidden_size * sizeof(float));
    swift_vlm_image_embeds(v, p->embeds);
    swift_trace_span(
        "compute",
        "vision",
        t0,
        swift_trace_now(),
        (struct swift_targ[]){SWIFT_TARG_I("images", nimages), SWIFT_TARG_I("patches", npatches)},
        2);
    return 0;
}
