/*
 * kv — what evaluation adds to lib/model's key/value cache (lib/model/kv.h, included here: the
 * cache, swift_kv_init/release/reset/copy_row and the cached forward swift_kv_forward): folding
 * attached LoRA adapters into the weights, and one token's log-probability.
 */
#ifndef SWIFT_EVAL_KV_H
#define SWIFT_EVAL_KV_H

#include "lib/model/kv.h"

struct swift_model;

/* Fold the LoRA adapters attached to m (lib/model/lora.h) into its base weights,
 * W += scale * B @ A (what peft's merge_and_unload does), and detach them. Returns 0 or -1. */
int swift_kv_merge_adapters(struct swift_model *m);

/* log_softmax(logits)[target] for one row of V logits, in double. */
double swift_logprob(const float *logits, int V, int target);

#endif
