/*
 * generate — batched text generation on a key/value cache (lib/eval/kv.h): greedy or sampled
 * (temperature, top-p), a deterministic seed per sequence, stop tokens and a stop callback
 * (for stop words, which need the tokenizer).
 *
 *     struct swift_gen_seq seqs[B] = {{.prompt = ids, .prompt_len = n, .seed = 1234}, ...};
 *     struct swift_gen_opts o = {.max_new = 256, .temperature = 0, .top_p = 1,
 *                                .stop_ids = eos, .nstop = 1};
 *     struct swift_gen_stats st = {0};
 *     swift_generate(&kv, seqs, B, &o, NULL, NULL, &st);
 *     ... seqs[i].out[0..seqs[i].n_out) ...; free(seqs[i].out);
 *
 * Sequences with one prompt (GRPO's groups) can share its prefill: seqs[i].share = 1 + j for an
 * earlier j with the same prompt copies j's cache row (swift_kv_copy_row) and logits instead of
 * running the prompt again.
 *
 * Each sequence draws from its own RNG (xoshiro256** seeded by splitmix64 from seq.seed), so a
 * sequence's text does not depend on what it is batched with. temperature 0 is greedy (ties to
 * the lowest id, as torch.argmax).
 */
#ifndef SWIFT_EVAL_GENERATE_H
#define SWIFT_EVAL_GENERATE_H

#include <stdint.h>

struct swift_kv;

struct swift_gen_seq {
    const int32_t *prompt; /* borrowed */
    int prompt_len;        /* >= 1 */
    uint64_t seed;
    /* 0, or 1 + the index of an earlier sequence with this very prompt: its cache row is copied
     * (swift_kv_copy_row) instead of a prefill of its own (GRPO's G completions of a prompt) */
    int share;
    int32_t *out; /* malloc'ed by swift_generate (max_new ids); caller frees */
    int n_out;    /* tokens generated, the stop token included */
    int stopped;  /* 1: stop token, 2: stop callback, 0: max_new reached */
};

struct swift_gen_opts {
    int max_new;
    double temperature; /* 0: greedy */
    double top_p;       /* 1: off */
    const int32_t *stop_ids;
    int nstop;
};

struct swift_gen_stats {
    long prefill_tokens, decode_tokens;
    double prefill_s, decode_s;
};

/* Return nonzero to stop sequence i after its latest token (out[0..n) generated so far). */
typedef int (*swift_gen_stop_fn)(void *ctx, int i, const int32_t *out, int n);

/* Generate for n sequences (n <= kv->rows; row i holds sequence i; rows are reset first).
 * Prompts are prefilled in chunks of at most kv->max_tokens tokens. Adds to *st (may be NULL).
 * Returns 0 or -1 (reported). */
int swift_generate(struct swift_kv *kv, struct swift_gen_seq *seqs, int n,
                   const struct swift_gen_opts *o, swift_gen_stop_fn stop, void *ctx,
                   struct swift_gen_stats *st);

/* Pick the next token from V logits: greedy when temperature <= 0, else softmax(logits/T)
 * restricted to the smallest top-p nucleus (HF's TopPLogitsWarper), drawn with rng (xoshiro256**
 * state). Returns the id, or -1 (no finite logit). */
int swift_sample(const float *logits, int V, double temperature, double top_p, uint64_t rng[4]);
/* Seed a xoshiro256** state from one 64-bit seed (splitmix64). */
void swift_rng_seed(uint64_t rng[4], uint64_t seed);
/* A double in [0, 1). */
double swift_rng_uniform(uint64_t rng[4]);

#endif
