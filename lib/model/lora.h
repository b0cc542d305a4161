/*
 * lora — LoRA adapters on a model's linear layers, saved and loaded in PEFT's exact layout so
 * `peft.PeftModel.from_pretrained` loads ours and ms-swift's adapters load here.
 *
 *     swift_model_load(&m, dir, ops, 1);                 // frozen base (no gradients)
 *     struct swift_lora_opts lo = {.rank = 8, .alpha = 32, .dropout = 0.05,
 *                                  .targets = "all-linear", .seed = 42};
 *     swift_lora_attach(&m, &lo);                        // A ~ kaiming-uniform, B = 0
 *     ... train m.lp / m.nlp (the LoRA parameters) ...
 *     swift_lora_save(&m, &lo, "run/checkpoint-10", base_dir);
 *
 * Math: y = x W^T + b + (alpha/r) * dropout(x) A^T B^T, A (r,in), B (out,r)
 * (alpha/sqrt(r) with use_rslora). DoRA (use_dora, PEFT's DoraLinearVariant): a magnitude m
 * (out) per linear, started at ||W||_row, and y = m / ||W + s B A||_row * (x W^T + s x A^T B^T)
 * + b with the norm detached (with dropout PEFT's form: x W^T + b + (g-1) xd W^T + g s xd A^T B^T);
 * saved as base_model.model.<module>.lora_magnitude_vector (F32, out). Files: adapter_config.json
 * and adapter_model.safetensors with names
 * base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight (F32); for the language model
 * of a VL model (lora_vl_names) base_model.model.model.language_model.layers.N..., the names
 * peft gives them under transformers 5 (the older names load too). Targets: "all-linear"
 * (every linear of the decoder layers; never lm_head, as PEFT) or a comma-separated list of module
 * names (q_proj,v_proj) or full paths matched as suffixes.
 */
#ifndef SWIFT_LORA_H
#define SWIFT_LORA_H

#include <stdint.h>

#include "lib/model/model.h"

struct swift_lora_opts {
    int rank;
    float alpha;
    float dropout;
    const char *targets; /* "all-linear" or "q_proj,v_proj,..." */
    int use_rslora;
    int use_dora; /* DoRA: a magnitude vector per adapted linear (PEFT use_dora) */
    uint64_t seed;
};

/* Attach adapters (A kaiming-uniform(a=sqrt(5)) like PEFT, B zero). Returns 0 or -1. */
int swift_lora_attach(struct swift_model *m, const struct swift_lora_opts *o);
/* Read DIR/adapter_config.json and DIR/adapter_model.safetensors, attach and fill the
 * adapters; *o receives the adapter's settings (targets points into static storage owned by
 * the model until swift_model_free). Returns 0 or -1. */
int swift_lora_load(struct swift_model *m, const char *dir, struct swift_lora_opts *o);
/* The same from an adapter already open (adapter.h; its full tensors, if any, are the
 * caller's to load). */
struct swift_adapter;
int swift_lora_load_adapter(struct swift_model *m, const struct swift_adapter *ad,
                            struct swift_lora_opts *o);
/* Write DIR/adapter_config.json and DIR/adapter_model.safetensors (dir must exist). */
int swift_lora_save(const struct swift_model *m, const struct swift_lora_opts *o, const char *dir,
                    const char *base_model);
/* The same with nfull more entries (full tensors named base_model.model.<parameter>, PEFT's
 * modules_to_save) and adapter_config.json's modules_to_save (comma-separated; NULL none). */
struct swift_st_entry;
int swift_lora_save_with(const struct swift_model *m, const struct swift_lora_opts *o,
                         const char *dir, const char *base_model, const struct swift_st_entry *full,
                         size_t nfull, const char *modules_to_save);

#endif
