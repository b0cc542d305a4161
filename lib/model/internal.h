/*
 * lib/model/internal.h — what only the model wing's files share: the activation buffers of the
 * training forward (acts.c allocates them, forward.c and backward.c use them), the linear
 * layers' Hugging Face names, the seeded generator for initialisation and dropout, and the
 * per-op trace spans of --profile.
 */
#ifndef SWIFT_MODEL_INTERNAL_H
#define SWIFT_MODEL_INTERNAL_H

#include <stdint.h>

#include "lib/core/trace.h"
#include "lib/model/model.h"

/* "self_attn.q_proj", ..., "mlp.down_proj", indexed by SWIFT_LIN_* */
extern const char *const swift_lin_names[SWIFT_LIN_COUNT];

/* splitmix64: the next 64-bit draw of state *s */
static inline uint64_t swift_splitmix64(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Where one decoder layer writes (backend memory, N tokens). Training keeps one set per layer
 * (one with activation checkpointing) for backward; the cached forward points them at its
 * scratch, aliasing what nothing reads again (ln1 = ln2, act = gate, mid = the input, ...). */
struct layer_acts {
    float *ln1, *rstd1, *qraw, *qrstd, *kraw, *krstd, *q, *k, *v, *probs, *att, *mid, *ln2, *rstd2,
        *gate, *up, *act;
};

struct swift_model_acts {
    float *res; /* (L+1, N, H) */
    struct layer_acts *la;
    float *lnf, *rstdf, *logits;
    float *lsum; /* swift_model_logit_sums: ones (V), colsum (H), sums (capB*capT); on first use */
    float *dres, *dln, *datt, *dq, *dk, *dv, *dqraw, *dkraw, *dgate, *dup, *dact, *dxa, *dtmp;
    float *ddora;  /* (N, max out) DoRA's scaled output gradient, NULL without DoRA */
    void **blocks; /* everything allocated, for free */
    int nblocks, capblocks;
};

/* DoRA's scratch (backend memory), allocated by swift_lora_attach: W + s B A and its
 * normalised copy (max out*in each), ones and minus ones (max of in and out), every adapter's
 * inv and g, and the cached forward's (N,out) product, grown on demand. */
struct swift_dora {
    float *w, *w2, *ones, *mones, *vec, *z;
    size_t zcap;
    int keep_norm; /* tests: forwards keep each adapter's inv (the detached norm) as it is */
};
void swift_lora_dora_free(struct swift_model *m);

/* Training's decoder layer l (forward.c): res[l] -> res[l+1] of m->acts, its activations into
 * la, LoRA dropout while m->training. Backward calls it again to recompute a checkpointed layer. */
void swift_model_layer_train(struct swift_model *m, int l, const struct swift_batch *b,
                             struct layer_acts *la);

/* The backward from the final norm's output: its gradient in m->acts->dln (N,H), set by
 * lm_head's backward (backward.c) or the score head's (score.c). */
void swift_model_backward_from_lnf(struct swift_model *m, const struct swift_batch *b);

/* The logit sums' backend buffer (acts.c): V ones, uploaded once, then room for H + capB*capT
 * floats; allocated on first use, freed with the activations. NULL: out of memory (reported). */
float *swift_model_acts_lsum(struct swift_model *m);

/* Free the 4-bit and 8-bit base linears (quant4.c). */
void swift_model_q4_free(struct swift_model *m);
/* A 4-bit (8-bit) weight h in host memory copied into a new struct whose arrays are backend
 * memory (SWIFT_MEM_PARAMS); NULL: out of memory (reported with `name`). quant4.c. */
struct swift_q4 *swift_model_q4_upload(struct swift_model *m, const struct swift_q4 *h,
                                       const char *name);
struct swift_q8 *swift_model_q8_upload(struct swift_model *m, const struct swift_q8 *h,
                                       const char *name);
/* After the linears got their q4/q8: the base parameters repacked without those linears' float
 * weights, whose w become NULL. 0 or -1 (reported). quant4.c. */
int swift_model_q_drop_float(struct swift_model *m);
/* A bitsandbytes directory (m->cfg.bnb_bits, bnb.c): linear L's weight, stored as `wname` in
 * set, loaded as stored into L->q4 or L->q8 (codes copied, tables and shapes checked). 0 or -1
 * (reported with the file and tensor). */
struct swift_st_set;
int swift_model_bnb_linear(struct swift_model *m, struct swift_linear *L, const char *wname,
                           const struct swift_st_set *set);

/* GGUF models (gguf_load.c): the config from a file's metadata, then (after the parameters are
 * allocated) every parameter from its tensor, dequantized; 0 or -1 after an error naming path
 * (and the tensor's byte offset). */
struct swift_gguf;
int swift_model_gguf_config(struct swift_model_config *c, const struct swift_gguf *g,
                            const char *path);
int swift_model_gguf_weights(struct swift_model *m, const struct swift_gguf *g, const char *path);

/* The parameters of m->cfg (m->ops set), in backend memory, zero, with gradients when
 * with_grads; names and pointers as swift_model_load makes them (weights.c). 0 or -1 (out of
 * memory, reported; swift_model_free then frees what was made). */
int swift_model_alloc(struct swift_model *m, int with_grads);

/* Free the activations (acts.c); the model's adapters forget their activation pointers. */
void swift_model_acts_free(struct swift_model *m);

/* --profile: one span per op with shapes and FLOPs while the trace detail flag is on */
#define OP_BEGIN() int64_t op_t0 = swift_trace_detail() ? swift_trace_now() : 0
#define OP_END(name, flops, shape)                                                                 \
    do {                                                                                           \
        if (op_t0) {                                                                               \
            struct swift_targ op_a[2] = {SWIFT_TARG_S("shape", shape),                             \
                                         SWIFT_TARG_D("flops", flops)};                            \
            swift_trace_span("compute", name, op_t0, swift_trace_now(), op_a, 2);                  \
        }                                                                                          \
    } while (0)

#endif
