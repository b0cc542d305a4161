/* vlm_flops — the vision side's FLOPs of a Qwen2-VL / Qwen2.5-VL step, for MFU (vlm_flops.h):
 * the matmuls of lib/model/vlm_vision.c, counted from the config and the images' grids. */
#include "lib/model/vlm_flops.h"

#include <string.h>

#include "lib/core/banned.h"

/* Σ s² over the attention segments of one image of t·h·w patches: the whole image, or
 * Qwen2.5-VL's windows of ws x ws merged tokens (transformers' get_window_index, as
 * vlm_vision.c's window_index: the last row and column of windows may be smaller). */
static double segments_sq(const struct swift_vlm_config *vc, int t, int h, int w, int windowed)
{
    double P = (double)t * h * w;
    int ms = vc->merge_size, mu = ms * ms;
    int ws = vc->window_size / ms / vc->patch_size;
    if (!windowed || ws <= 0)
        return P * P;
    int gh = h / ms, gw = w / ms;
    double sum = 0;
    for (int a = 0; a < gh; a += ws)
        for (int b = 0; b < gw; b += ws) {
            int rh = gh - a < ws ? gh - a : ws, rw = gw - b < ws ? gw - b : ws;
            double s = (double)rh * rw * mu;
            sum += s * s;
        }
    return sum * t;
}

static int full_block(const struct swift_vlm_config *vc, int l)
{
    if (!vc->v25)
        return 1;
    for (int i = 0; i < vc->nfullatt; i++)
        if (vc->fullatt[i] == l)
            return 1;
    return 0;
}

void swift_vlm_flops_forward(const struct swift_vlm_config *vc, const int32_t *grid_thw,
                             int nimages, struct swift_vlm_flops_parts *out)
{
    memset(out, 0, sizeof(*out));
    double E = vc->embed_dim, I = vc->mlp_dim, mu = (double)vc->merge_size * vc->merge_size;
    double M = E * mu, P = 0, full = 0, win = 0;
    for (int i = 0; i < nimages; i++) {
        const int32_t *g = grid_thw + 3 * i;
        P += (double)g[0] * g[1] * g[2];
        full += segments_sq(vc, g[0], g[1], g[2], 0);
        win += segments_sq(vc, g[0], g[1], g[2], 1);
    }
    /* per patch and block: q, k, v and proj (4·E·E), the MLP (fc1, fc2 or gate, up, down) */
    double lin = 4 * E * E + (vc->v25 ? 3 : 2) * E * I;
    out->patch = 2 * P * vc->patch_dim * E;
    out->blocks = 2 * P * lin * vc->depth;
    for (int l = 0; l < vc->depth; l++) /* Q·Kᵀ and P·V: 2 · 2·s²·head_dim per head */
        out->attention += 4 * E * (full_block(vc, l) ? full : win);
    out->merger = 2 * (P / mu) * (M * M + M * vc->out_dim);
}

double swift_vlm_vision_flops(const struct swift_vlm_config *vc, int frozen,
                              const int32_t *grid_thw, int nimages)
{
    struct swift_vlm_flops_parts f;
    swift_vlm_flops_forward(vc, grid_thw, nimages, &f);
    int vit = !(frozen & SWIFT_VLM_VIT), aligner = !(frozen & SWIFT_VLM_ALIGNER);
    double fwd = f.patch + f.blocks + f.attention + f.merger;
    if (!vit && !aligner) /* no backward on the vision side */
        return fwd;
    /* the merger: input gradients (the backward always takes them), weights when it trains */
    double bwd = f.merger * (1 + aligner);
    if (vit) /* blocks: input and weight gradients; the patch embedding: weights only */
        bwd += 2 * f.blocks + 2 * f.attention + f.patch;
    return fwd + bwd;
}
