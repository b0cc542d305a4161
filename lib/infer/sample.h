/*
 * sample — the next token of one choice from its logits (lib/infer/engine.h's sampling): the
 * log-probabilities of the raw logits (the chosen token's and the best alternatives'), then the
 * penalties, temperature and filters in Hugging Face's order (repetition penalty, OpenAI's
 * presence/frequency penalties, temperature, top-k, top-p, min-p) and a draw from the choice's
 * own generator (swift_rng_* of lib/eval/generate.h), so a choice's tokens depend on its seed
 * only, never on what it is batched with.
 */
#ifndef SWIFT_INFER_SAMPLE_H
#define SWIFT_INFER_SAMPLE_H

#include <stdint.h>

struct swift_sampling;

struct swift_sample_cand {
    double x; /* processed logit, then probability before normalisation */
    int32_t id;
};
/* Host scratch for a vocabulary of V tokens. */
struct swift_sampler {
    int V;
    double *x;                      /* (V) processed logits */
    int *cnt;                       /* (V) occurrences in the output (zero between calls) */
    uint8_t *in;                    /* (V) seen in prompt or output (zero between calls) */
    struct swift_sample_cand *cand; /* (V) candidates of a draw */
};
void swift_sampler_init(struct swift_sampler *sp, int V);
void swift_sampler_free(struct swift_sampler *sp);

/* What one draw reports. */
struct swift_pick {
    int32_t token; /* -1: no finite logit */
    float logprob; /* log-softmax of the raw logits at token */
    int ntop;      /* alternatives below, best first (ties: lower id first) */
    int32_t top_ids[20];
    float top_logprobs[20];
};

/* Apply the penalties (over prompt[0..plen) and out[0..nout)) to logits, pick the next token as
 * s says (temperature <= 0: greedy, ties to the lowest id) with rng, and fill p (s->top_logprobs
 * alternatives, at most 20). The logits are not changed. */
void swift_sample_next(struct swift_sampler *sp, const float *logits,
                       const struct swift_sampling *s, const int32_t *prompt, int plen,
                       const int32_t *out, int nout, uint64_t rng[4], struct swift_pick *p);

/* The penalties alone on x (V doubles): HF's repetition penalty (a token seen in prompt or
 * output: x / r when x > 0, x * r otherwise), then OpenAI's x -= frequency * count + presence *
 * (count > 0) with counts over the output. For the tests. */
void swift_sample_penalize(struct swift_sampler *sp, double *x, const struct swift_sampling *s,
                           const int32_t *prompt, int plen, const int32_t *out, int nout);

#endif
