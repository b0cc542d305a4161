/* export internals shared by the files in lib/export (not a public header). */
#ifndef SWIFT_EXPORT_INTERNAL_H
#define SWIFT_EXPORT_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "lib/formats/gguf.h"
#include "lib/model/vlm.h"

/* What the GGUF converter needs from config.json (the keys llama.cpp's convert_hf_to_gguf.py reads;
 * docs/export.md). */
struct swift_hparams {
    char arch[32]; /* "llama" | "qwen2" | "qwen3" | "qwen2vl" (llama.cpp's name for the language
                    * model of Qwen2-VL and Qwen2.5-VL) */
    int64_t vocab_size, hidden, ffn, layers, heads, kv_heads, head_dim, ctx;
    int has_head_dim; /* config.json names head_dim explicitly */
    double rms_eps, rope_theta;
    int tie_embeddings;
    /* rope scaling */
    char rope_type[16]; /* "", "linear", "llama3", "yarn" */
    double rope_factor, rope_low_freq, rope_high_freq, rope_orig_ctx;
    int64_t bos_id, eos_id; /* -1 when absent */
    json_t *config;         /* the whole config.json (owned) */
    int vl;                 /* a vision-language model (Qwen2-VL, Qwen2.5-VL): vc is set, the
                             * fields above are its language model's */
    struct swift_vlm_config vc;
};

/* A VL checkpoint's tensor name in the hub's layout: transformers 5's module names
 * "model.language_model.X" → "model.X" and "model.visual.X" → "visual.X"; others unchanged.
 * Into out (outlen bytes). */
void swift_vl_canonical_name(const char *name, char *out, size_t outlen);

/* Read MODEL_DIR/config.json. Returns 0 or -1 after "FILE: ..." errors. */
int swift_hparams_load(struct swift_hparams *hp, const char *model_dir);
void swift_hparams_release(struct swift_hparams *hp);

/* HF tensor name → GGUF name ("model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight")
 * into out; returns 0, 1 for a tensor to skip (rotary inv_freq), -1 for an unknown name. */
int swift_gguf_tensor_name(const char *hf, char *out, size_t outlen);

/* Add tokenizer.ggml.* and tokenizer.chat_template from MODEL_DIR's tokenizer.json and
 * tokenizer_config.json. `pre` overrides tokenizer.ggml.pre. Returns 0 or -1. */
int swift_export_tokenizer(struct swift_gguf_writer *w, const char *model_dir,
                           const struct swift_hparams *hp, const char *pre);

/* Write DIR/NAME.Modelfile for ollama next to DIR/NAME.gguf (atomic) and print the `ollama
 * create NAME -f DIR/NAME.Modelfile` line that loads it. Returns 0 or -1. */
int swift_export_modelfile(const char *gguf_path, const char *model_dir, int force);

/* DIR/NAME.Modelfile for DIR/NAME.gguf, malloc'ed. */
char *swift_modelfile_path(const char *gguf_path);

/* GGUF conversion of model_dir (the base, or a merged temporary directory). */
struct swift_export_opts;
int swift_export_gguf(const struct swift_export_opts *o, const char *model_dir);

/* The vision tower and merger of model_dir (a VL model) as llama.cpp's mmproj GGUF at o->mmproj
 * (lib/export/mmproj.c); prints its summary line. Returns 0 or -1. */
int swift_export_mmproj(const struct swift_export_opts *o, const char *model_dir);

/* Merge a PEFT LoRA adapter into the base and write a HF directory at out_dir (created; must
 * not exist). dtype: bf16|fp16|fp32 (NULL: the base's). Returns 0 or -1. */
int swift_export_merge(const struct swift_export_opts *o, const char *out_dir);

/* GPTQ of every decoder linear on o->calib (lib/export/gptq.c): one result per linear, in
 * layer order. */
struct swift_gptq_result {
    char *name; /* HF weight name, "model.layers.0.self_attn.q_proj.weight" */
    int out, in;
    uint8_t *codes; /* (out,in) */
    float *scales;  /* (in/group, out), fp32 (stored as fp16) */
    double loss, rmse, rel_rmse, out_err, rtn_out_err;
    int dead;
};
int swift_export_gptq(const struct swift_export_opts *o, int bits, int group,
                      struct swift_gptq_result **out, int *nout);
void swift_gptq_results_free(struct swift_gptq_result *r, int n);

/* Weight-only RTN quantization of model_dir's linear layers into a HF directory (GPTQ layout). */
int swift_export_quant(const struct swift_export_opts *o, const char *out_dir);

/* Print the export's one summary line on stdout (lib/core/record.h, 6 significant digits) and
 * drop rec (never NULL). The write is checked by swift_close_stdout(). */
void swift_export_summary(json_t *rec);

/* Read a JSON file with "FILE:LINE: message" errors; NULL after an error. */
json_t *swift_json_load(const char *path);

/* --qlora (qlora.c): 1 when tensor `name` is a decoder linear's weight that swift-train
 * --quant-bits 4|8 kept in 4 or 8 bits; then round_trip replaces its rows*cols floats w by their
 * quantization (o->qlora "nf4"/"fp4" with o->qlora_double_quant, or "int8") dequantized. 0 or
 * -1 (reported). */
int swift_export_qlora_applies(const struct swift_export_opts *o, const char *name);
int swift_export_qlora_round_trip(const struct swift_export_opts *o, const char *name, float *w,
                                  int64_t rows, int64_t cols);

#endif
