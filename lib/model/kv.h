/*
 * kv — a key/value cache for lib/model's forward: generation and evaluation feed a few new
 * tokens per sequence and reuse the keys and values of the tokens already seen.
 *
 * A struct swift_kv holds, for `rows` independent sequences, the keys and values of every layer
 * for up to `cap` tokens each, and the scratch of one cached forward. The forward itself is the
 * model's (lib/model/forward.c runs the same layer function as training: RMSNorm, q/k/v (+bias,
 * +LoRA adapters attached to the model), QK-norm, RoPE, GQA causal attention, SwiGLU, tied or
 * untied lm_head); only attention differs: the new tokens' keys and values are appended to their
 * rows (the copy_rows op) and attention runs over the row (attention_cached, one pass with an
 * online softmax). Everything goes through the model's op table, so the cache works on any
 * backend (CPU, CUDA, the strict CPU table of the tests).
 *
 *     struct swift_kv kv;
 *     if (swift_kv_init(&kv, &model, rows, cap, max_tokens) < 0) ...
 *     // N new tokens, token i belonging to row rowof[i] (a row's tokens in order); positions
 *     // continue from what the row holds. Logits for the tokens listed in want[] (V floats each).
 *     swift_kv_forward(&kv, tokens, rowof, N, want, nwant, logits);
 *     swift_kv_copy_row(&kv, dst, src);      // fork a prefix (multiple choice continuations)
 *     swift_kv_reset(&kv, row);              // row empty again
 *     swift_kv_release(&kv);
 *
 * Memory: the cache and the scratch are backend memory (ops->alloc; the host never touches
 * them): 2 * layers * rows * cap * kv_heads * head_dim floats for the cache, scratch for
 * max_tokens tokens per call, and nwant x vocab floats for the largest logits request seen.
 * Row lengths, positions and the index arrays given to the ops live in host memory; logits come
 * back with ops->download.
 */
#ifndef SWIFT_MODEL_KV_H
#define SWIFT_MODEL_KV_H

#include <stddef.h>
#include <stdint.h>

struct swift_model;

struct swift_kv {
    struct swift_model *m; /* borrowed; must outlive the cache */
    int rows, cap, max_tokens;
    int *len;     /* host (rows): tokens held by each row */
    float *k, *v; /* backend (layers, rows, cap, kv_heads*head_dim) */
    /* backend scratch for max_tokens tokens */
    float *x, *h, *rstd, *q, *kraw, *kk, *vv, *att, *gate, *up, *xa, *sel;
    float *logits; /* backend (logits_rows, vocab): lm_head output before download */
    int logits_rows;
    /* host index arrays of the current call (max_tokens each): position in the row, row,
     * cache slot row*cap+pos, tokens whose logits are wanted */
    int32_t *pos, *rowi, *slot, *wanti;
    double flops; /* matmul + attention FLOPs since init (for tokens/s and MFU) */
};

/* Allocate a cache of rows x cap tokens and scratch for max_tokens tokens per call.
 * Returns 0 or -1 (reported: out of memory on the backend, head_dim above 512, or a backend
 * table without the cache ops). */
int swift_kv_init(struct swift_kv *kv, struct swift_model *m, int rows, int cap, int max_tokens);
void swift_kv_release(struct swift_kv *kv);
/* Forget what a row holds (-1: every row). */
void swift_kv_reset(struct swift_kv *kv, int row);
/* Make row dst hold a copy of row src's tokens. */
void swift_kv_copy_row(struct swift_kv *kv, int dst, int src);

/*
 * The model's forward on the cache (lib/model/forward.c). Run N new tokens (N <= max_tokens).
 * Token i goes to row rowof[i] at the row's next position; a row's tokens must be given in
 * order. Writes the logits (V floats, row-major) of the tokens listed in want[0..nwant) to logits
 * (nwant x V, host memory: downloaded). Returns 0, or -1 after reporting a token id outside the
 * vocabulary, a row out of range, or a row that would exceed cap (nothing changed then).
 */
int swift_kv_forward(struct swift_kv *kv, const int32_t *tokens, const int *rowof, int N,
                     const int *want, int nwant, float *logits);

#endif
