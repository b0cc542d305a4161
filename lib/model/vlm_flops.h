/*
 * vlm_flops — the FLOPs of a vision-language model's step (lib/model/vlm.h) for MFU: the vision
 * side (patch embedding, ViT blocks, patch merger) for a micro-batch's images, by the frozen
 * groups.
 *
 *     double vis = swift_vlm_vision_flops(&v->vc, v->frozen, grid_thw, nimages);
 *     double all = vis + (double)B * T * swift_model_flops_per_token(&v->llm, T);
 *
 * Counted as the language model's swift_model_flops_per_token counts: 2 per multiply-add of the
 * matmuls (biases, norms, activations and rotary not counted) and the attention's two matmuls
 * (Q·Kᵀ and P·V) over each image (or Qwen2.5-VL's windows in its windowed blocks).
 * Forward always; the backward where it runs (swift_vlm_backward): nothing when the ViT and the
 * merger are both frozen; a trainable group adds its weight gradients (1× its forward) and every
 * part the gradient flows back through adds its input gradients (1×; 2× for the attention):
 * a trainable ViT costs 3× its blocks' forward and 2× the patch embedding's (its input is the
 * pixels), the merger 2× when only the ViT trains, 3× when the merger trains.
 */
#ifndef SWIFT_MODEL_VLM_FLOPS_H
#define SWIFT_MODEL_VLM_FLOPS_H

#include <stdint.h>

#include "lib/model/vlm.h"

/* The parts of the vision side's FLOPs (forward only) for these images. */
struct swift_vlm_flops_parts {
    double patch;     /* the patch embedding */
    double blocks;    /* the ViT blocks' linears (qkv, proj, MLP) */
    double attention; /* the ViT blocks' attention matmuls */
    double merger;    /* the patch merger's two linears */
};

void swift_vlm_flops_forward(const struct swift_vlm_config *vc, const int32_t *grid_thw,
                             int nimages, struct swift_vlm_flops_parts *out);

/* Forward + backward FLOPs of the vision side for these images (grid_thw: nimages x (t, h, w)
 * in patches), frozen: SWIFT_VLM_* bits of the frozen groups. */
double swift_vlm_vision_flops(const struct swift_vlm_config *vc, int frozen,
                              const int32_t *grid_thw, int nimages);

#endif
