/*
 * export — what swift-export does: Hugging Face model directory → llama.cpp GGUF (with the
 * tokenizer and an optional ollama Modelfile), base + PEFT LoRA adapter → merged Hugging Face
 * directory, and weight-only quantization (round to nearest, or GPTQ on calibration data).
 * docs/export.md is the user manual.
 *
 *     struct swift_export_opts o = {.model_dir = "Qwen3-0.6B", .to = "gguf", .dtype = "q8_0",
 *                                   .output = "qwen3-q8_0.gguf"};
 *     if (swift_export_run(&o) < 0) return 1;   // one JSON summary line on stdout
 *
 * Architectures: llama, qwen2, qwen3, and the vision-language qwen2_vl / qwen2_5_vl (merged with
 * their vision tower copied unchanged; GGUF: the language model as llama.cpp's qwen2vl, and
 * with `mmproj` the vision side as its clip mmproj) (config.json model_type or
 * architectures[0]); anything
 * else is refused by name. Tokenizers: byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen).
 *
 * Outputs are atomic: a GGUF is written under a temporary name and renamed; a directory is
 * built in a temporary directory and renamed; an existing output is refused unless `force`.
 * Every tensor gets trace spans (category "export"): "read", "convert" or "quantize", "write",
 * with the tensor name and bytes.
 */
#ifndef SWIFT_EXPORT_H
#define SWIFT_EXPORT_H

#include <stdint.h>
#include <stdio.h>

struct swift_export_opts {
    const char *model_dir;   /* HF model directory (config.json, safetensors, tokenizer) */
    const char *output;      /* -o: FILE.gguf or a directory */
    const char *to;          /* "gguf" or "hf" (NULL: hf with merge_lora or quant, else gguf) */
    const char *dtype;       /* gguf: f32|f16|bf16|q8_0|q4_0|q4_k|q4_k_m|q6_k; hf: bf16|fp16|fp32 */
    int to_ollama;           /* also write NAME.Modelfile next to NAME.gguf */
    const char *merge_lora;  /* PEFT adapter directory to merge before writing */
    const char *qlora;       /* "nf4"/"fp4"/"int8": merge_lora was trained on a 4-bit or 8-bit
                              * base (swift-train --quant-bits 4|8): the base's linears are
                              * round-tripped through that format first; NULL: the float base */
    int qlora_double_quant;  /* with qlora: the training's --double-quant */
    uint64_t max_shard_size; /* hf: bytes per safetensors shard (0: 5 GiB) */
    const char *quant;       /* int8|int4 weight-only quantization (NULL: none) */
    long group_size;         /* quant: values per group (128) */
    const char *method;      /* quant: "rtn" or "gptq" */
    const char *calib;       /* gptq: calibration shard directory (swift-preprocess output) */
    long calib_samples;      /* gptq: rows taken from it, evenly spaced (128) */
    long calib_seq_len;      /* gptq: tokens per row at most (512) */
    double damp;             /* gptq: fraction of the mean Hessian diagonal added (0.01) */
    int force;               /* overwrite an existing output */
    const char *tokenizer_pre; /* override tokenizer.ggml.pre */
    const char *name;          /* general.name (default: the model directory's basename) */
    const char *mmproj;        /* gguf of a VL model: also write its vision tower and merger as
                                * llama.cpp's mmproj GGUF here (NULL: not) */
};

/* Run one export. Returns 0, or -1 after an error was reported (nothing is left under the
 * output name). */
int swift_export_run(const struct swift_export_opts *o);

/* Print a GGUF file's header (lib/formats/gguf.h swift_gguf_dump) to fp; arrays show their first
 * `max_items` values and a sha256 of the whole array. Returns 0 or -1. */
int swift_export_dump(const char *path, FILE *fp, uint64_t max_items, int tensor_hashes);

#endif
