/*
 * model — Llama-family decoder models (Llama 2/3, Mistral, Qwen2/2.5, Qwen3) from a Hugging Face
 * directory, with forward and backward through the backend op table (kernels/ops.h).
 *
 *     struct swift_model m;
 *     if (swift_model_load(&m, "models/Qwen2.5-0.5B", &swift_cpu_ops) < 0)
 *         return -1;                                     // error reported with file and key
 *     if (swift_model_reserve(&m, B, T) < 0) ...        // activations for B rows of T tokens
 *     swift_model_zero_grad(&m);
 *     struct swift_batch b = {.B = B, .T = T, .tokens = ids, .targets = tgt, .pos = pos};
 *     struct swift_loss l = {0};
 *     swift_model_forward(&m, &b, &l, 1.0f / ntrained); // loss over trained tokens
 *     swift_model_backward(&m, &b);                      // gradients accumulate (+=)
 *     swift_model_free(&m);
 *
 * Math (checked against transformers by tests/unit/test_model.c on committed fixtures):
 * RMSNorm -> q/k/v projections (+bias for Qwen2 or attention_bias) -> per-head RMSNorm of q and k
 * (Qwen3) -> RoPE (rope_theta; default, linear or llama3 scaling) -> GQA causal attention inside
 * each packed document -> o_proj -> residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm
 * and lm_head (tied to embed_tokens when tie_word_embeddings). Parameters are float32 whatever the
 * dtype on disk (F32/F16/BF16).
 *
 * Loss: cross-entropy summed over trained targets times `dscale` (ms-swift's normalisation is
 * the sum over trained tokens divided by their count over the whole accumulated batch).
 *
 * The wing: config.c (config.json), weights.c (parameters, load, init, save), acts.c
 * (activations), forward.c (the one layer forward, run by training here and by generation over
 * a key/value cache, kv.h), logps.c (per-token log-probs for GRPO), backward.c, score.c (a reward
 * model's score head: transformers' *ForSequenceClassification); LoRA adapters in lora.h, PEFT's
 * files in adapter.h; vision-language models (Qwen2-VL, Qwen2.5-VL) in vlm.h (vlm.c, vlm_vision.c,
 * vlm_run.c), whose language model is this decoder with M-RoPE (mrope_pos below).
 */
#ifndef SWIFT_MODEL_H
#define SWIFT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

struct swift_model_config {
    char model_type[32]; /* llama, mistral, qwen2, qwen3 */
    char dtype[16];      /* torch_dtype / dtype: float32, bfloat16, float16 */
    int vocab_size, hidden_size, intermediate_size, num_layers;
    int num_heads, num_kv_heads, head_dim;
    int max_position_embeddings;
    int sliding_window; /* 0: none */
    float rms_norm_eps;
    double rope_theta;
    int rope_type; /* SWIFT_ROPE_* */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max;
    int qkv_bias, o_bias, mlp_bias, qk_norm, tie_embeddings;
    int gptq; /* quantization_config gptq: 1 (zeros stored minus one), 2 (gptq_v2); 0: none */
    /* quantization_config bitsandbytes (transformers' save_pretrained of a load_in_4bit or
     * load_in_8bit model): bnb_bits 4 or 8 (0: none), bnb_type SWIFT_Q4_NF4/FP4 (kernels/quant4.h),
     * bnb_dq bnb_4bit_use_double_quant. The decoder
     * linears are loaded as stored (4-bit codes or int8 rows, frozen; lib/model/bnb.c). */
    int bnb_bits, bnb_type, bnb_dq;
    /* reward models: architectures *ForSequenceClassification (a score head, "score.weight"
     * (1, hidden)); the padding token the score skips (pad_token_id, else eos_token_id, else
     * -1); initializer_range (default 0.02) */
    int score;
    int pad_token_id;
    double initializer_range;
};
enum { SWIFT_ROPE_DEFAULT = 0, SWIFT_ROPE_LINEAR, SWIFT_ROPE_LLAMA3 };

/* Parse config.json (transformers 4 and 5 layouts: rope_theta + rope_scaling or
 * rope_parameters; torch_dtype or dtype). Returns 0 or -1 after "FILE: key ..." errors. */
int swift_model_config_load(struct swift_model_config *c, const char *path);
/* Parse from an already loaded JSON object (path for messages). */
struct json_t;
int swift_model_config_parse(struct swift_model_config *c, struct json_t *root, const char *path);
/* The eos ids a model's files name: eos_token_id of generation_config.json, then of config.json
 * (an int or a list; missing files and keys give none), at most cap into ids, repeats kept. Returns
 * how many. Generation (swift-eval, GRPO) stops at them and the tokenizer's eos_token. */
int swift_model_eos_ids(const char *model_dir, long *ids, int cap);
/* RoPE inverse frequencies (head_dim/2 floats) with the configured scaling. */
void swift_model_inv_freq(const struct swift_model_config *c, float *out);

/* A LoRA adapter on one linear layer (lib/model/lora.h attaches them). */
struct swift_lora_ad {
    float *A, *B; /* (r,in), (out,r): point into the model's lora buffer */
    float *gA, *gB;
    float *xa;     /* (N,r) saved activations */
    float *xd;     /* (N,in) dropout output, NULL without dropout */
    uint8_t *mask; /* (N,in) */
    /* DoRA (lib/model/lora.h), NULL without: */
    float *mag, *gmag; /* (out) the magnitude vector (a parameter) and its gradient */
    float *inv, *g;    /* (out) 1 / ||W + s B A||_row (detached), mag * inv: set by each forward */
    float *zn;         /* (N,out) saved for the magnitude's gradient: (x W^T + s x A^T B^T) * inv,
                        * of the dropout output with dropout */
};

struct swift_q4;
struct swift_q8;
struct swift_linear {
    int in, out;
    float *w, *b;               /* (out,in), (out) or NULL */
    struct swift_q4 *q4;        /* QLoRA: the frozen base in 4 bits (kernels/quant4.h; its arrays
                                 * backend memory), w NULL; NULL: w holds the weight */
    struct swift_q8 *q8;        /* --quant-bits 8: the frozen base in int8 rows (kernels/quant8.h),
                                 * w NULL; NULL: w or q4 holds the weight */
    float *gw, *gb;             /* NULL when frozen */
    struct swift_lora_ad *lora; /* NULL when none */
    const char *name;           /* "model.layers.3.self_attn.q_proj" (owned by the model) */
};

enum {
    SWIFT_LIN_Q,
    SWIFT_LIN_K,
    SWIFT_LIN_V,
    SWIFT_LIN_O,
    SWIFT_LIN_GATE,
    SWIFT_LIN_UP,
    SWIFT_LIN_DOWN,
    SWIFT_LIN_COUNT
};

struct swift_layer {
    float *ln1, *ln2, *qn, *kn; /* norms (qn, kn: Qwen3 only) */
    float *gln1, *gln2, *gqn, *gkn;
    struct swift_linear lin[SWIFT_LIN_COUNT];
};

/* One named parameter tensor (Hugging Face name). */
struct swift_param {
    char *name;
    float *w, *g; /* g NULL when frozen */
    int ndim;
    int64_t shape[2];
    size_t numel;
    int decay; /* weight decay applies (not biases and norms, as HF Trainer) */
};

/* Per-step inputs: B rows of T tokens. */
struct swift_batch {
    int B, T;
    const int32_t *tokens;  /* (B*T) */
    const int32_t *targets; /* (B*T) next token to predict, -1 = not trained */
    const int32_t *pos;     /* (B*T) position inside the document (packing restarts at 0) */
};

struct swift_loss {
    double sum;   /* sum of -log p(target) */
    long count;   /* trained tokens */
    long correct; /* argmax == target */
};

struct swift_model_acts; /* activations (acts.c) */

struct swift_model {
    struct swift_model_config cfg;
    const struct swift_ops *ops;
    float *params, *grads; /* base parameters (nparams floats), their grads or NULL */
    size_t nparams;
    struct swift_param *p; /* base parameters by name, HF order */
    int np;
    float *embed, *norm, *lm_head, *gembed, *gnorm, *glm_head; /* lm_head == embed when tied */
    float *score, *gscore; /* (1,H) a reward model's head (cfg.score), else NULL; with LoRA
                            * the adapters' trainable copy (PEFT's modules_to_save) */
    struct swift_layer *layers;
    float *inv_freq; /* head_dim/2 */
    /* LoRA (lib/model/lora.h) */
    float *lora_params, *lora_grads;
    size_t nlora;
    struct swift_param *lp;
    int nlp;
    int lora_rank;
    float lora_alpha, lora_scale, lora_dropout;
    int lora_vl_names;     /* the language model of a VL model (set by swift_vlm_load): adapters are
                            * named after transformers 5's module tree, model.language_model.layers.*,
                            * so that peft loads them onto Qwen2VLForConditionalGeneration */
    uint64_t dropout_seed; /* set per step by the trainer */
    int training;          /* set by forward: dscale != 0 (LoRA dropout on) */
    int act_ckpt;          /* activation checkpointing: set before swift_model_reserve */
    int lora_off;          /* forward skips the LoRA adapters (the base model: DPO's reference) */
    struct swift_dora *dora; /* DoRA's scratch (lib/model/lora.c), NULL without DoRA */
    /* activations */
    struct swift_model_acts *acts;
    int capB, capT;
    /* QLoRA (swift_model_quantize4/8): the 4- or 8-bit base linears' weights and the bytes they
     * take */
    size_t q4_numel, q4_bytes;
    /* per-op spans with shapes and FLOPs when the trace detail flag is on (--profile) */
    double step_flops; /* forward+backward FLOPs of the last step (matmuls+attention) */
    /* per-parameter updates (lib/train/layerwise.c): backward calls grad_ready right after
     * linear k of layer l has its weight gradient (gw, gb) complete; NULL: not called */
    void (*grad_ready)(void *ctx, int l, int k);
    void *grad_ready_ctx;
    /* M-RoPE (Qwen2-VL's language model, lib/model/vlm.h sets them): when mrope_pos is set,
     * training's layers rotate q and k by three positions per token, mrope_pos (3, B*T) =
     * temporal, height, width, each with mrope_freq (3, head_dim/2): the inverse frequencies of
     * its section of mrope_section and 0 elsewhere (three rope_fwd calls; a zero frequency turns
     * by nothing); attention still masks by the batch's pos. NULL: RoPE by pos. */
    const int32_t *mrope_pos;
    const float *mrope_freq;
};

/* Read config.json and the weights of dir; base parameters trainable (grads allocated) unless
 * `frozen`. dir may also be a GGUF file (swift_model_is_gguf; lib/model/gguf_load.c): llama,
 * qwen2 or qwen3 as swift-export writes them, every tensor dequantized to fp32 at load (the types
 * lib/formats/quant.c decodes: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K). Returns 0 or -1. */
int swift_model_load(struct swift_model *m, const char *dir, const struct swift_ops *ops,
                     int frozen);
/* Whether path is a GGUF file (not a directory; named *.gguf or starting with "GGUF"). */
int swift_model_is_gguf(const char *path);
/* The same for a reward model (transformers' *ForSequenceClassification, num_labels 1): the
 * score head "score.weight" (1, hidden) is read from dir when there (a saved reward model), else
 * drawn N(0, initializer_range) from seed as transformers initialises a new head. */
int swift_model_load_score(struct swift_model *m, const char *dir, const struct swift_ops *ops,
                           int frozen, uint64_t seed);
/* Build a model with random N(0, 0.02) weights (norms 1) from a config, for benchmarks. */
int swift_model_init_random(struct swift_model *m, const struct swift_model_config *c,
                            const struct swift_ops *ops, uint64_t seed);
void swift_model_free(struct swift_model *m);
/* Allocate activations for B rows of T tokens (grows only). Returns 0 or -1. */
int swift_model_reserve(struct swift_model *m, int B, int T);
void swift_model_zero_grad(struct swift_model *m);
/* Forward pass; accumulates into *loss and, with backward to follow, prepares dlogits scaled
 * by dscale (0: forward only, no gradient, and no dropout: evaluation). Logits of the last call
 * stay readable through swift_model_logits() until backward. Returns 0 or -1 (bad token id). */
int swift_model_forward(struct swift_model *m, const struct swift_batch *b, struct swift_loss *loss,
                        float dscale);
/* Forward to the logits only (no loss): train 1 turns LoRA dropout on for a backward to follow.
 * Then, per range of tokens [n0,n1) of the B*T (several disjoint ranges, each with its own
 * targets array of B*T entries, -1 = not trained, host or backend memory as kernels/ops.h
 * allows; backend memory saves the CUDA backend an upload per call): swift_model_token_nll adds
 * the sum of -log p(target) over the range, its trained tokens and argmax hits into *loss and,
 * with grad, writes the range's logits' gradient of that sum (softmax - onehot; 0 on untrained
 * tokens) in place of its logits; every token must be in some range with grad before backward. An
 * objective that is not a mean of token losses (DPO: a function of each row's summed log-prob)
 * then scales a range's gradient by d loss / d (-sum log p) with swift_model_scale_dlogits. */
int swift_model_forward_logits(struct swift_model *m, const struct swift_batch *b, int train);
void swift_model_token_nll(struct swift_model *m, const int32_t *targets, int n0, int n1,
                           struct swift_loss *loss, int grad);
void swift_model_scale_dlogits(struct swift_model *m, int n0, int n1, float f);
/* GRPO (lib/train/grpo_loss.h) needs every token's log-prob, not a sum. After
 * swift_model_forward_logits, per range [n0,n1) of the B*T (targets host memory, B*T entries as
 * token_nll's, -1 = not trained):
 * swift_model_token_logps writes logp[i - n0] = log softmax(logits_i)[targets[i]] in double (0
 * where targets[i] < 0); no gradient, the logits untouched.
 * swift_model_token_grad writes the logits' gradient of sum_i w[i - n0] logp_i over the range
 * (w[i - n0] (onehot - softmax) per trained token, 0 on untrained ones) in place of the range's
 * logits, so that swift_model_backward accumulates d (sum w logp) / d parameters. For a loss with
 * d loss / d logp_i = dlogp_i pass w = dlogp (times the step's normalisation, e.g. 1 / items of
 * grpo_loss.h): the parameters' gradient is then d loss / d parameters, which the optimizer
 * descends. (cross_entropy's softmax - onehot is the gradient of -logp: the sign is flipped here.)
 * Every token of the batch must be in some range given to token_grad (or to token_nll with grad)
 * before backward.
 * Sampling temperature (TRL divides the logits by it before the log-softmax): scale the range's
 * logits by 1/temperature with swift_model_scale_dlogits before token_logps, and again after
 * token_grad (the chain rule's 1/temperature).
 * Both loop over the tokens (cross_entropy on one row per token for the log-probs, one scale per
 * token for the gradient): on the CPU that costs little, on CUDA it is a call per token; a fused op
 * (log-probs of N rows in one kernel, a per-row scale) would avoid them. */
void swift_model_token_logps(struct swift_model *m, const int32_t *targets, int n0, int n1,
                             double *logp);
void swift_model_token_grad(struct swift_model *m, const int32_t *targets, int n0, int n1,
                            const float *w);
/* Forward without gradient or dropout, then each row's summed log-prob of its trained targets
 * (b->targets >= 0, host memory) into logp[r] and their number into count[r] (count may be NULL):
 * log p(response | prompt) of a preference pair's row, as swift-eval --task pref scores it and
 * DPO's implicit reward uses it. Honours m->lora_off. Returns 0 or -1 (bad token id, reported). */
int swift_model_row_logps(struct swift_model *m, const struct swift_batch *b, double *logp,
                          long *count);
/* The sum over the vocabulary of each of the first N tokens' logits of the last forward into
 * out (N, host), computed from the final norm's output (valid after token_nll overwrote the
 * logits: lnf . column sums of lm_head). Returns 0 or -1 (out of memory, reported). */
int swift_model_logit_sums(struct swift_model *m, int N, float *out);
/* Reward models (cfg.score): the forward without lm_head (train as above), then the score of n
 * tokens idx[0..n) of the B*T (host; each row's last token that is not the padding token: see
 * swift_model_score_pos) into out (n, host): the final norm's output there . score. Then
 * swift_model_score_backward takes d loss / d score of each (host) and runs the backward from
 * the final norm's output (gscore and every trainable parameter accumulate); no lm_head
 * gradient. Return 0 or -1 (reported). */
int swift_model_forward_hidden(struct swift_model *m, const struct swift_batch *b, int train);
int swift_model_score(struct swift_model *m, const int32_t *idx, int n, float *out);
int swift_model_score_backward(struct swift_model *m, const struct swift_batch *b,
                               const int32_t *idx, int n, const float *dscore);
/* The token a score reads in a row of tok[0..L): the last one that is not pad (transformers'
 * argmax of position x (token != pad_token_id); 0 when all are). */
int swift_model_score_pos(const int32_t *tok, int L, int pad);
/* Logits (B*T, V) of the last forward, backend memory (read them with ops->download); valid
 * until backward. */
const float *swift_model_logits(const struct swift_model *m);
/* Backward pass of the last forward; gradients accumulate. */
void swift_model_backward(struct swift_model *m, const struct swift_batch *b);
/* One decoder layer alone, outside the training graph (swift-export --method gptq runs the
 * calibration data through the model layer by layer): x (B*T,H) -> y (y may alias x), no
 * dropout (y NULL: not copied out); in[k] points at the input of linear k (q/k/v: the first
 * RMSNorm's output, o: the attention output, gate/up: the second RMSNorm's output, down: the SwiGLU
 * output), valid until the next call. swift_model_reserve(m, B, T) first (act_ckpt = 1 keeps it to
 * one layer's activations); tokens and pos of b are read, targets are not. */
void swift_model_layer_forward(struct swift_model *m, int l, const struct swift_batch *b,
                               const float *x, float *y, const float *in[SWIFT_LIN_COUNT]);
/* The token embeddings of b into x (B*T,H); -1 (reported) for a token outside the vocabulary. */
int swift_model_embed(struct swift_model *m, const struct swift_batch *b, float *x);
/* Find a base parameter by HF name. */
struct swift_param *swift_model_param(struct swift_model *m, const char *name);
/* Number of parameters (base) and FLOPs per token of forward+backward (6N + attention). */
double swift_model_flops_per_token(const struct swift_model *m, int T);

/* QLoRA: store the base linears (q/k/v/o/gate/up/down of every layer) of a model loaded frozen
 * in bitsandbytes' 4-bit format (kernels/quant4.h: type SWIFT_Q4_NF4 or SWIFT_Q4_FP4, blocks of
 * 64, dq: double quantization of the absmax), as transformers' load_in_4bit does: embeddings,
 * norms, biases and lm_head stay float32. Their float32 copies are freed (the base parameters
 * are repacked without them); forward and backward then run the backend's fused dequant-matmul
 * (matmul4_fwd/bwd), so LoRA trains on top and the base gets no gradient. Sets q4_numel and
 * q4_bytes. Returns 0, or -1 (reported: trainable base, a backend without the 4-bit ops, out of
 * memory). */
int swift_model_quantize4(struct swift_model *m, int type, int dq);
/* --quant-bits 8: the same with bitsandbytes' 8-bit Int8Params layout (kernels/quant8.h: int8
 * codes, one absmax per output row; LLM.int8's weight format without its outlier decomposition),
 * run by matmul8_fwd/bwd. Sets q4_numel and q4_bytes (codes + scales). 0 or -1 (reported). */
int swift_model_quantize8(struct swift_model *m);

/* Write DIR/config.json (source config with dtype updated) and DIR/model.safetensors in the
 * config's dtype; `dir` must exist. Returns 0 or -1. */
int swift_model_save(const struct swift_model *m, const char *dir, const char *src_config);

#endif
