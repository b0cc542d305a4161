/*
 * engine — the inference engine of swift-infer: continuous batching over a paged key/value cache.
 *
 * One engine serves both of swift-infer's modes (batch files and the HTTP server). Requests join
 * and leave the running batch at every step: a step admits waiting requests while sequence slots
 * (max_num_seqs) and cache blocks allow, builds one forward of every running sequence's next
 * token plus prompt chunks of the requests still prefilling (chunked prefill: at most
 * max_num_batched_tokens tokens per forward), samples, and reports each new token through the
 * request's callback. The cache is paged (lib/model/pkv.h): fixed-size blocks of block_size
 * tokens, a block table per sequence; the n choices of a request share the prompt's blocks
 * copy-on-write, so a prompt is prefilled once whatever n is. When the pool runs dry the most
 * recently admitted sequence is preempted (its blocks freed, the sequence put back in front of
 * the queue to be recomputed later, as vLLM's recompute preemption); its output so far is kept and
 * its sampler state too, so preemption never changes what a sequence generates. With prefix
 * caching, a sequence that starts with the same tokens as one that holds full blocks shares
 * those blocks and runs only the rest (a common system prompt is computed once).
 *
 * The model math is lib/model's forward (the same layer function as training and swift-eval), so
 * greedy output equals swift-eval's and transformers' generate(do_sample=False) token for token,
 * whatever a sequence is batched with.
 *
 *     struct swift_engine_opts eo = swift_engine_defaults();
 *     struct swift_engine *e = swift_engine_new(&model, &eo, eos, neos, err, sizeof err);
 *     struct swift_sampling s = swift_sampling_defaults();   // greedy, 16 tokens, n 1
 *     int64_t id = swift_engine_add(e, prompt, len, &s, on_token, ctx, err, sizeof err);
 *     while (swift_engine_step(e) > 0)
 *         ;                                                  // on_token fires inside step
 *     swift_engine_free(e);
 *
 * Sequence slots: a request of n choices takes n of max_num_seqs from its admission on (its
 * prompt is one sequence until prefilled, then forks into n). A sequence never grows past
 * max_model_len nor past the pool (num_blocks * block_size tokens, + the last token, which is
 * never cached), so a sequence alone always fits and preemption always ends.
 *
 * Traces (docs/trace-schema.md, category infer): a span engine_step per step (args step, seqs,
 * tokens, prefill_tokens, decode_tokens, blocks_used), the counter kv_blocks_used, and per
 * request, when its last choice ends, request_queued, request_prefill and request_decode.
 *
 * Threads: an engine is used from one thread (the server runs it on its own thread and hands
 * requests over through a queue); the forward itself uses the backend's threads.
 */
#ifndef SWIFT_INFER_ENGINE_H
#define SWIFT_INFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

struct swift_model;
struct swift_engine;

struct swift_engine_opts {
    int max_num_seqs;           /* sequences in the running batch (vLLM --max-num-seqs) */
    int max_num_batched_tokens; /* tokens per forward, decode + prefill chunks */
    int block_size;             /* tokens per cache block */
    int num_blocks;             /* blocks in the pool; 0: max_num_seqs sequences of max_model_len */
    int max_model_len;          /* prompt + completion; 0: the config's max_position_embeddings */
    int chunked_prefill;        /* 0: a prompt is prefilled in one forward (it must fit; the
                                   recompute of a preempted sequence is chunked all the same) */
    int prefix_caching;         /* 1: a sequence starts on the full cache blocks of another
                                   that began with the same tokens (lib/model/pkv.h) */
};
/* 16 sequences, 512 tokens per forward, blocks of 16, pool sized from the rest, chunked,
 * prefix caching on. */
struct swift_engine_opts swift_engine_defaults(void);

struct swift_sampling {
    int n;                     /* choices; they share the prompt's cache blocks */
    int max_tokens;            /* new tokens per choice, the stop token included */
    double temperature;        /* 0: greedy (ties to the lowest id, as torch.argmax) */
    double top_p;              /* 1: off */
    int top_k;                 /* 0: off */
    double min_p;              /* 0: off */
    double repetition_penalty; /* 1: off; HF's: a seen token's logit (prompt or output) is
                                  divided by it when positive, multiplied when negative */
    double presence_penalty;   /* 0: off; OpenAI's: minus this once a token was generated */
    double frequency_penalty;  /* 0: off; OpenAI's: minus this times its count in the output */
    uint64_t seed;             /* choice c draws from its own generator seeded with seed + c */
    const int32_t *stop_ids;   /* ends a choice besides the engine's eos ids (copied at add) */
    int nstop_ids;
    int ignore_eos;   /* 1: only stop_ids and max_tokens end a choice */
    int top_logprobs; /* alternatives reported per token (0..20); logprob of the chosen token
                         is always reported */
};
/* n 1, 16 tokens, greedy, every filter and penalty off, seed 0. */
struct swift_sampling swift_sampling_defaults(void);

enum swift_finish {
    SWIFT_FINISH_NONE = 0, /* the choice goes on */
    SWIFT_FINISH_STOP,     /* an eos or stop id (this token), or the callback asked */
    SWIFT_FINISH_LENGTH,   /* max_tokens or max_model_len (or the pool's size, when
                              smaller) reached with this token */
    SWIFT_FINISH_ABORT,    /* cancelled (token -1) */
};

/* One new token of one choice, or the end of a cancelled choice. */
struct swift_engine_event {
    int64_t req; /* what swift_engine_add returned */
    int choice;  /* 0..n-1 */
    int32_t token;
    float logprob; /* log-softmax of the raw logits (before penalties and temperature) */
    const int32_t *top_ids;
    const float *top_logprobs; /* ntop best alternatives, best first; valid during the call */
    int ntop;
    enum swift_finish finish;
    int prompt_tokens, completion_tokens; /* completion_tokens counts this token */
    int cached_tokens;                    /* prompt tokens found in the prefix cache (OpenAI's usage
                                             prompt_tokens_details.cached_tokens) */
};
/* Called from swift_engine_step for every new token in order, per choice. Return nonzero to end
 * the choice after this token (a stop string the caller found in its text): no event follows
 * for that choice then. */
typedef int (*swift_engine_cb)(void *ctx, const struct swift_engine_event *ev);

/* A new engine on model m (weights loaded, adapters merged or attached). eos: the ids that end a
 * choice (the model's eos and the template's end of turn). Returns NULL with a message in err. */
struct swift_engine *swift_engine_new(struct swift_model *m, const struct swift_engine_opts *o,
                                      const int32_t *eos, int neos, char *err, size_t errlen);
void swift_engine_free(struct swift_engine *e);

/* Queue a request (the prompt is copied). Returns its id (>= 1), or -1 with a message in err and
 * nothing queued: an empty prompt, a prompt that leaves no room under max_model_len, n or
 * sampling values out of range, a prompt longer than the pool can ever hold. */
int64_t swift_engine_add(struct swift_engine *e, const int32_t *prompt, int len,
                         const struct swift_sampling *s, swift_engine_cb cb, void *ctx, char *err,
                         size_t errlen);
/*
 * Vision-language models (lib/model/vlm.h): an engine made on &v->llm serves v's images once
 * swift_engine_set_vlm(e, v) is called (before the first add). Every request then runs with
 * M-RoPE positions (text-only prompts too: theirs equal the cache positions); a request with
 * images has its image embeddings computed once, at add (the vision tower's forward), and written
 * over its <|image_pad|> tokens when the prompt is prefilled (chunk by chunk, or again after a
 * preemption); generated tokens continue at the prompt's rope delta. The prefix cache shares only
 * the blocks before a prompt's first image pad (the pads' tokens do not name the image).
 */
struct swift_vlm;
void swift_engine_set_vlm(struct swift_engine *e, struct swift_vlm *v);
/* A prompt's images: pixel_values rows (npatches of patch_dim floats, host) and their grids
 * (nimages x (t, h, w)), borrowed for the call. */
struct swift_engine_images {
    const float *pixels;
    int npatches;
    const int32_t *grid_thw;
    int nimages;
};
/* swift_engine_add with images (im NULL or nimages 0: none). Also -1 with a message when the
 * engine has no vision-language model, or when the prompt's <|image_pad|> runs do not match the
 * grids. */
int64_t swift_engine_add_images(struct swift_engine *e, const int32_t *prompt, int len,
                                const struct swift_engine_images *im,
                                const struct swift_sampling *s, swift_engine_cb cb, void *ctx,
                                char *err, size_t errlen);

/* Cancel a queued or running request: each unfinished choice gets one event with token -1 and
 * SWIFT_FINISH_ABORT, from this call. Returns 0, or -1 for an unknown id. */
int swift_engine_cancel(struct swift_engine *e, int64_t req);

/* One step: admit, one forward, sample, callbacks. Returns the number of requests still held
 * (running or waiting; 0: idle), or -1 after reporting a backend error. */
int swift_engine_step(struct swift_engine *e);

struct swift_engine_stats {
    long steps, prefill_tokens, decode_tokens, preemptions;
    long generated_tokens; /* tokens sampled for the answers (decode_tokens counts the tokens fed
                              to decode steps: one fewer per sequence) */
    long cached_tokens;    /* prompt (and recomputed) tokens found in the prefix cache, not run */
    int running, waiting;  /* sequences now */
    int blocks_used, blocks_total, blocks_peak; /* cache blocks */
    int blocks_cached; /* blocks no sequence holds, kept in the prefix cache (evictable) */
    double forward_s;  /* time in the model's forward */
};
void swift_engine_stats(const struct swift_engine *e, struct swift_engine_stats *st);

#endif
