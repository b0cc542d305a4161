/*
 * adapter — the one reader and writer of PEFT's LoRA layout: DIR/adapter_config.json and
 * DIR/adapter_model.safetensors. Training saves through it (lib/model/lora.c), training's resume
 * and evaluation load through it (swift_lora_load), and swift-export --merge-lora reads it
 * (lib/export/merge.c); the LoRA scale is computed here only (swift_lora_scale).
 *
 *     struct swift_adapter ad;
 *     if (swift_adapter_open(&ad, "run/checkpoint-50") < 0)
 *         return -1;                                   // reported with the file named
 *     const struct swift_adapter_pair *p = swift_adapter_find(&ad,
 * "model.layers.0.self_attn.q_proj"); float s = swift_lora_scale(swift_adapter_alpha(&ad,
 * p->module), (int)p->a->shape[0], ad.cfg.use_rslora);
 *     ... W += s * B @ A with p->a (r,in) and p->b (out,r) ...
 *     swift_adapter_close(&ad);
 *
 * Tensors are named base_model.model.<module>.lora_A.weight and ...lora_B.weight (PEFT also
 * writes ...lora_A.default.weight; both are read). Refused when reading: a peft_type other than
 * LORA, a missing or non-numeric r or lora_alpha, fan_in_fan_out (GPT-2's Conv1D), a bias
 * other than "none", and tensors that are not LoRA A/B weights (modules_to_save, other adapter
 * types) except a reward model's head "base_model.model.score.weight" (ad->score; lora.c loads
 * it into a model with a score head, swift-export's merge refuses it); swift_adapter_open_full
 * accepts modules_to_save tensors (ad->full: a vision-language model's trained vision tower and
 * aligner, which swift-export's merge writes over the base's and lib/model/vlm_save.c loads).
 * What a caller cannot do (rank_pattern for an attached model, a regular expression in
 * target_modules) the caller refuses.
 */
#ifndef SWIFT_MODEL_ADAPTER_H
#define SWIFT_MODEL_ADAPTER_H

#include <stddef.h>

#include <jansson.h>

#include "lib/formats/safetensors.h"

struct swift_adapter_config {
    int r;          /* rank */
    double alpha;   /* lora_alpha (alpha_pattern may override it per module) */
    double dropout; /* lora_dropout */
    int use_rslora; /* scale alpha/sqrt(r) instead of alpha/r */
    int use_dora;   /* DoRA: every module also has lora_magnitude_vector (out) */
    /* target_modules as "all-linear" or "q_proj,v_proj" (lib/model/lora.h's syntax); "" with
     * targets_regex set when target_modules is a regular expression */
    char targets[1024];
    int targets_regex;
    int patterns; /* rank_pattern or alpha_pattern is not empty */
    int seq_cls;  /* written: a reward model's (task_type SEQ_CLS, modules_to_save ["score"]) */
    /* written: modules_to_save as a comma-separated list of module names ("merger" or
     * "visual"), or NULL; its full tensors are entries of the file like the adapters' */
    const char *modules_to_save;
};

/* One module's adapter: lora_A (r,in) and lora_B (out,r), tensors of the adapter's file. */
struct swift_adapter_pair {
    char *module; /* "model.layers.0.self_attn.q_proj" */
    const struct swift_st_tensor *a, *b;
    const struct swift_st_tensor *m; /* DoRA's lora_magnitude_vector (out), or NULL */
    int used;                        /* for the caller: set when merged or loaded */
};

struct swift_adapter {
    struct swift_adapter_config cfg;
    json_t *json; /* the whole adapter_config.json */
    struct swift_safetensors st;
    struct swift_adapter_pair *pairs;    /* every module of the file, in file order */
    const struct swift_st_tensor *score; /* "base_model.model.score.weight" (a reward model's
                                          * modules_to_save), or NULL */
    size_t n;
    /* swift_adapter_open_full only: modules_to_save tensors trained in full beside the adapters,
     * "base_model.model.<module>.weight" (or .bias), in file order; full_names[i] is the base's
     * name "<module>.weight" (malloc'ed) */
    const struct swift_st_tensor **full;
    char **full_names;
    size_t nfull;
    char *cfg_path, *st_path;
};

/* The scale of the update B·A: alpha / r, or alpha / sqrt(r) with rsLoRA (PEFT's
 * LoraLayer.update_layer), computed in double and rounded once to float. */
float swift_lora_scale(double alpha, int r, int use_rslora);

/* Read DIR/adapter_config.json and open DIR/adapter_model.safetensors, pairing every lora_A with
 * its lora_B (mapped, not copied). Returns 0 or -1 after reporting; close *ad either way. */
int swift_adapter_open(struct swift_adapter *ad, const char *dir);
/* swift_adapter_open that also accepts modules_to_save tensors (ad->full), for a caller that
 * applies them (swift-export's merge, swift_vlm_lora_load); PEFT's
 * "...modules_to_save.default.weight" spelling too. */
int swift_adapter_open_full(struct swift_adapter *ad, const char *dir);
void swift_adapter_close(struct swift_adapter *ad);
/* The pair of a module ("model.layers.0.self_attn.q_proj"), or NULL. */
struct swift_adapter_pair *swift_adapter_find(const struct swift_adapter *ad, const char *module);
/* lora_alpha for a module: the alpha_pattern entry whose key is a dotted suffix of module, else
 * the adapter's lora_alpha. */
double swift_adapter_alpha(const struct swift_adapter *ad, const char *module);

/* "base_model.model.<module>.lora_A.weight" (which 'A' or 'B') or DoRA's
 * "base_model.model.<module>.lora_magnitude_vector" (which 'M', the name PEFT 0.21 saves; its
 * "...lora_magnitude_vector.default.weight" is read too) into buf of n bytes. */
void swift_adapter_tensor_name(char *buf, size_t n, const char *module, char which);

/* Write DIR/adapter_model.safetensors (the n F32 entries, named by swift_adapter_tensor_name)
 * and DIR/adapter_config.json as PEFT writes it (c->targets a comma-separated list of short
 * module names; base_model may be NULL). dir must exist. Returns 0 or -1. */
int swift_adapter_write(const char *dir, const struct swift_adapter_config *c,
                        const char *base_model, const struct swift_st_entry *e, size_t n);

#endif
