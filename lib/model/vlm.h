/*
 * vlm — vision-language models: Qwen2-VL and Qwen2.5-VL (images) from a Hugging Face
 * directory, forward and backward through the backend op table (kernels/ops.h), the language
 * model being lib/model's decoder (model.h) with M-RoPE.
 *
 *     struct swift_vlm v;
 *     if (swift_vlm_load(&v, "models/Qwen2-VL-2B-Instruct", &swift_cpu_ops, SWIFT_VLM_VIT) < 0)
 *         return -1;                              // error reported; here the ViT is frozen
 *     struct swift_vlm_batch b = {.B = B, .T = T, .tokens = ids, .targets = tgt,
 *                                 .pixels = pix, .npatches = np, .grid_thw = thw, .nimages = ni};
 *     struct swift_loss l = {0};
 *     swift_vlm_zero_grad(&v);
 *     swift_vlm_forward(&v, &b, &l, 1.0f / ntrained);   // logits, loss (sum * dscale)
 *     swift_vlm_backward(&v, &b);                        // gradients accumulate (+=)
 *     swift_vlm_free(&v);
 *
 * Inputs are what the Qwen2-VL image processor and chat template give (the shards of
 * swift-preprocess carry them): token ids with one <|image_pad|> (image_token_id) per merged
 * patch, each image's pixel patches (rows of in_channels * temporal_patch_size * patch_size^2
 * floats, in the processor's order: 2x2 merge groups consecutive) and its grid (t, h, w) in
 * patches. Images belong to the rows in order: row 0's images first.
 *
 * Math (checked against transformers 5.24 by tests/unit/test_vlm.c on the committed fixtures of
 * tests/ref/gen_vlm_fixtures.py):
 * - patch embedding: Conv3d with kernel = stride = (2,14,14), no bias: a matmul of the
 *   flattened patches by the (embed, 3*2*14*14) weight;
 * - ViT blocks: x += proj(attn(norm1(x))); x += mlp(norm2(x)). Qwen2-VL: LayerNorm (eps 1e-6),
 *   MLP fc1 -> QuickGELU (hidden_act) -> fc2; Qwen2.5-VL: RMSNorm, gate/up/down SwiGLU with
 *   biases. Attention: the fused qkv (bias) split by rows, 2-D rotary (first head_dim/4
 *   frequencies turn by the patch's row, the next head_dim/4 by its column, theta 10000),
 *   bidirectional inside each image (cu_seqlens); Qwen2.5-VL's blocks outside
 *   fullatt_block_indexes attend inside windows of window_size/patch_size patches per side
 *   (the patches reordered window by window, transformers' get_window_index);
 * - patch merger: LayerNorm (Qwen2.5-VL: RMSNorm), 4 consecutive patches concatenated, Linear
 *   -> GELU (erf) -> Linear to the language model's width: one embedding per 4 patches,
 *   written over the <|image_pad|> tokens' embeddings in order;
 * - language model: Qwen2 with M-RoPE: positions (t, h, w) as get_rope_index computes them
 *   (swift_vlm_rope_index), mrope_section splitting the rotary frequencies; causal attention
 *   over each row.
 * Loss: cross-entropy over the trained targets (targets[n] = the token n+1 should be, -1 not
 * trained) times dscale, as swift_model_forward.
 *
 * Parameter groups (ms-swift's vit / aligner / llm): SWIFT_VLM_VIT = the patch embedding and the
 * ViT blocks, SWIFT_VLM_ALIGNER = the merger, SWIFT_VLM_LLM = the language model. A frozen group
 * has no gradients (its g pointers NULL); the backward still flows through a frozen language model
 * to a trainable vision side, and skips the vision side when both of its groups are frozen.
 *
 * Packing: a row may hold several samples (batch.pos restarting at 0 at each one): the language
 * model's attention is block-diagonal per sample, M-RoPE positions restart per sample, and the
 * ViT attends inside each image anyway, so a packed row's loss and gradients are the sum of its
 * samples' run one a row, and transformers' packed path (position_ids [4, B, T]) agrees
 * (tests/unit/test_vlm.c, test_packed_*; tests/ref/gen_vlm_packed.py).
 *
 * Not yet: videos (grid t > 1 is refused), LoRA on the ViT (a
 * trainer trains the vision groups in full),
 * activation checkpointing of the ViT.
 */
#ifndef SWIFT_MODEL_VLM_H
#define SWIFT_MODEL_VLM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "lib/model/model.h"

enum { SWIFT_VLM_VIT = 1, SWIFT_VLM_ALIGNER = 2, SWIFT_VLM_LLM = 4 };

#define SWIFT_VLM_MAX_FULLATT 64

struct swift_vlm_config {
    char model_type[16]; /* qwen2_vl, qwen2_5_vl */
    int v25;             /* Qwen2.5-VL: RMSNorm, SwiGLU, window attention */
    int depth, embed_dim, num_heads, head_dim, mlp_dim, out_dim;
    int patch_size, temporal_patch_size, in_channels, merge_size;
    int gelu; /* Qwen2-VL's ViT MLP: SWIFT_GELU_QUICK (quick_gelu) or SWIFT_GELU_ERF (gelu) */
    int window_size; /* Qwen2.5-VL, in pixels */
    int fullatt[SWIFT_VLM_MAX_FULLATT], nfullatt;
    int image_token_id, video_token_id, vision_start_token_id;
    int mrope_section[3];
    int patch_dim; /* in_channels * temporal_patch_size * patch_size^2 */
};

/* A vision linear (out,in) with its bias; w, b point into the vision parameters. */
struct swift_vlin {
    int in, out;
    float *w, *b, *gw, *gb; /* gw, gb NULL when frozen */
};

struct swift_vit_block {
    float *n1w, *n1b, *n2w, *n2b; /* norms (biases NULL for RMSNorm) */
    float *gn1w, *gn1b, *gn2w, *gn2b;
    struct swift_vlin q, k, v; /* row slices of the fused attn.qkv */
    struct swift_vlin proj;
    struct swift_vlin fc1, fc2;       /* Qwen2-VL */
    struct swift_vlin gate, up, down; /* Qwen2.5-VL */
};

struct swift_vlm_acts;

struct swift_vlm {
    struct swift_vlm_config vc;
    struct swift_model llm; /* the language model; its parameters are named model.* */
    const struct swift_ops *ops;
    int frozen; /* SWIFT_VLM_* bits */
    /* the vision parameters, named visual.* whatever the checkpoint's prefix */
    float *vparams, *vgrads;
    size_t nvparams;
    struct swift_param *vp;
    int nvp;
    float *patch, *gpatch; /* (embed, patch_dim) */
    struct swift_vit_block *blocks;
    float *mln_w, *mln_b, *gmln_w, *gmln_b; /* the merger's norm (mln_b NULL: RMSNorm) */
    struct swift_vlin mfc1, mfc2;
    float *vinv;  /* (2, head_dim/2): row and column frequencies of the ViT's rotary */
    float *mfreq; /* (3, llm head_dim/2): the language model's M-RoPE sections */
    struct swift_vlm_acts *va;
};

/* Per-step inputs (host memory). */
struct swift_vlm_batch {
    int B, T;
    const int32_t *tokens;  /* (B*T) */
    const int32_t *targets; /* (B*T) next token to predict, -1 = not trained */
    const float *pixels;    /* (npatches, patch_dim) */
    int npatches;
    const int32_t *grid_thw; /* (nimages, 3) */
    int nimages;
    /* (B*T) position inside the document, or NULL: one document a row. Packed rows (several
     * samples in a row, swift-preprocess --packing) restart at 0 at each document, as
     * swift_batch.pos: attention stays inside the document, M-RoPE restarts for it (each
     * document's positions as if alone) and targets must not cross it (the caller's -1). */
    const int32_t *pos;
};

/* Read config.json (model_type qwen2_vl or qwen2_5_vl; text_config and vision_config, or an
 * older flat config with the text keys at the top and rope_scaling {type mrope}) and the weights
 * (visual.* and model.*, or transformers' model.visual.* and model.language_model.*; lm_head.weight
 * unless tied). frozen: SWIFT_VLM_* groups without gradients. 0 or -1 (reported with file and
 * key). */
int swift_vlm_load(struct swift_vlm *v, const char *dir, const struct swift_ops *ops, int frozen);
int swift_vlm_config_parse(struct swift_vlm_config *vc, struct swift_model_config *tc,
                           struct json_t *root, const char *path);
void swift_vlm_free(struct swift_vlm *v);
void swift_vlm_zero_grad(struct swift_vlm *v);
/* A parameter by name: visual.*, model.*, lm_head.weight, or transformers' module names
 * (model.visual.*, model.language_model.*). NULL when none. */
struct swift_param *swift_vlm_param(struct swift_vlm *v, const char *name);

/* The group of a parameter of v (vision, language model, or a LoRA factor of the language
 * model), or of a copy of one (read from its name: visual.merger.* the aligner, other visual.*
 * the ViT, anything else the language model): SWIFT_VLM_VIT, SWIFT_VLM_ALIGNER or
 * SWIFT_VLM_LLM, for per-group learning rates (ms-swift's vit_lr, aligner_lr). */
int swift_vlm_param_group(const struct swift_vlm *v, const struct swift_param *p);

/* transformers' get_rope_index for images: pos3 (3, B*T) the temporal, height and width
 * positions of every token (text: its index after the earlier text and images; an image's
 * tokens: start + (0, row, column) of its merged grid, and the text after it continues at
 * start + max(h, w) / merge). Each run of image_token_id tokens takes the next images, each
 * t*h*w/merge^2 tokens. 0 or -1 (reported: the pads do not match the grids). */
int swift_vlm_rope_index(const struct swift_vlm_config *vc, const int32_t *tokens, int B, int T,
                         const int32_t *grid_thw, int nimages, int32_t *pos3);
/* The same over packed rows: pos (B*T, as swift_vlm_batch.pos; NULL = the above) restarts the
 * positions at 0 at each document (every document's as if it were alone in its row); an image
 * whose pads cross a document's start is an error. */
int swift_vlm_rope_index_docs(const struct swift_vlm_config *vc, const int32_t *tokens,
                              const int32_t *pos, int B, int T, const int32_t *grid_thw,
                              int nimages, int32_t *pos3);

/* Forward: vision tower over every image, the merger's embeddings over the image pads, the
 * language model, then the loss as swift_model_forward (dscale 0: no gradient to follow).
 * Checks the batch (token ids, pads against grids, pixel rows) first. 0 or -1 (reported). */
int swift_vlm_forward(struct swift_vlm *v, const struct swift_vlm_batch *b, struct swift_loss *loss,
                      float dscale);
/* Logits (B*T, V) of the last forward, backend memory; valid until backward. */
const float *swift_vlm_logits(const struct swift_vlm *v);
/* The merged image embeddings of the last forward (the merger's output: the images' tokens in
 * order, llm hidden floats each) into out (host; NULL: only counted). Returns how many tokens. */
int swift_vlm_image_embeds(const struct swift_vlm *v, float *out);
/* Backward of the last forward; gradients of the trainable groups accumulate. */
void swift_vlm_backward(struct swift_vlm *v, const struct swift_vlm_batch *b);

/* vlm_save.c. The PEFT adapter of the language model (swift_lora_save's files) with the
 * vision parameters of the trainable groups beside it as full F32 tensors, PEFT's
 * modules_to_save: named base_model.model.model.visual.<parameter> (PEFT's names under
 * transformers 5, as the adapters' base_model.model.model.language_model.*; the patch embedding
 * 5-D as transformers' Conv3d), adapter_config.json's modules_to_save "visual" (both groups),
 * "merger" (the aligner) or "patch_embed", "blocks.0", ... (the ViT). 0 or -1 (reported). */
struct swift_lora_opts;
int swift_vlm_lora_save(const struct swift_vlm *v, const struct swift_lora_opts *lo,
                        const char *dir, const char *base_model);
/* Attach and fill the language model's adapters from DIR (swift_lora_load) and load the
 * adapter's full vision tensors (base_model.model.model.visual.*, or the Hub layout's
 * base_model.model.visual.*) into the vision parameters. 0 or -1 (reported). */
int swift_vlm_lora_load(struct swift_vlm *v, const char *dir, struct swift_lora_opts *lo);
/* The whole model as a Hugging Face directory like src_dir (the directory it was loaded from):
 * DIR/model.safetensors with every tensor of src_dir's safetensors under its key, shape and
 * dtype (F32, BF16 or F16), and src_dir's config.json. 0 or -1 (reported). */
int swift_vlm_save(struct swift_vlm *v, const char *dir, const char *src_dir);

/* Vision tower internals shared by vlm.c and vlm_vision.c. */
int swift_vlm_vision_forward(struct swift_vlm *v, const struct swift_vlm_batch *b);
void swift_vlm_vision_backward(struct swift_vlm *v, const float *dmerged);
void swift_vlm_vision_free(struct swift_vlm *v);

/*
 * Generation (lib/model/vlm_gen.c): a prompt's M-RoPE positions and image embeddings for the
 * cached forward (swift_pkv_forward_mm; swift-infer's engine). The prompt's tokens take
 * pos3[s * T + i]; a token at cache position j >= T (generated) takes j + delta in all three
 * sections, as transformers' generate does with rope_deltas. Token i of the prompt that is an
 * <|image_pad|> takes embeds row embed_of[i] (-1: its own embedding).
 */
struct swift_vlm_prompt {
    int T;
    int32_t *pos3;     /* (3, T) */
    int delta;         /* max(pos3) + 1 - T */
    float *embeds;     /* host (nembeds, llm hidden): the merger's output, image pads in order;
                        * NULL without images */
    int32_t *embed_of; /* (T) row of embeds for an image pad, else -1 */
    int nembeds;
    int first_image; /* the first image pad (T: none); the cache before it is plain text */
};
/* Check the tokens (vocabulary, no video tokens), compute the positions (swift_vlm_rope_index:
 * the pads must match the grids) and run the vision tower over the images (pixels as
 * swift_vlm_batch's, npatches rows). 0, or -1 (reported; p left empty). Free p with
 * swift_vlm_prompt_free. */
int swift_vlm_prompt(struct swift_vlm *v, const int32_t *tokens, int T, const float *pixels,
                     int npatches, const int32_t *grid_thw, int nimages,
                     struct swift_vlm_prompt *p);
void swift_vlm_prompt_free(struct swift_vlm_prompt *p);

#endif
