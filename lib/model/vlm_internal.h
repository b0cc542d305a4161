/*
 * lib/model/vlm_internal.h — what vlm.c, vlm_vision.c and vlm_run.c share: the vision tower's
 * activations and the per-batch plan (patch order, rotary positions, attention segments, where
 * the merged embeddings go).
 */
#ifndef SWIFT_MODEL_VLM_INTERNAL_H
#define SWIFT_MODEL_VLM_INTERNAL_H

#include <stdint.h>

#include "lib/model/vlm.h"

/* one ViT block's saved activations (backend memory, P patches) */
struct vit_acts {
    float *ln1, *m1, *r1, *q, *k, *v, *probs, *att, *mid, *ln2, *m2, *r2, *h, *u, *a;
};

struct swift_vlm_acts {
    int capP, capNm, capN; /* patches, merged tokens, tokens the buffers hold */
    size_t capprobs;
    /* the plan of the last forward (host memory) */
    int P, Nm, N, nfull, nwin;
    int32_t *perm;    /* (P) patch i of the tower's order is patch perm[i] of the input */
    int32_t *hpos;    /* (P) rotary row, tower order */
    int32_t *wpos;    /* (P) rotary column */
    int32_t *cu_full; /* (images + 1) attention inside each image */
    int32_t *cu_win;  /* (windows + 1) Qwen2.5-VL's windows */
    int32_t *dst;     /* (Nm) merged token g of the tower's order -> its row of the B*T */
    int32_t *win;     /* (Nm) merged token g of the tower's order is image token win[g] */
    int32_t *pos;     /* (B*T) position in the row: the causal mask */
    int32_t *pos3;    /* (3, B*T) M-RoPE positions */
    float *hostpix;   /* (P, patch_dim) pixels in the tower's order */
    /* backend memory */
    float *pix, *res; /* (P, patch_dim), (depth+1, P, E) */
    struct vit_acts *ba;
    float *lnm, *mm, *mr, *h1, *a1, *merged;
    float *dres, *dln, *datt, *dq, *dk, *dv, *dh, *du, *da, *dlnm, *dh1, *da1, *dmerged, *zeros;
    void **blocks;
    int nblocks, capblocks;
};

/* The plan and buffers for batch b (host arrays rebuilt, backend buffers grown). 0 or -1
 * (reported: bad grids, pads that do not match them). */
int swift_vlm_plan(struct swift_vlm *v, const struct swift_vlm_batch *b);

#endif
