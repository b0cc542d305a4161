/* eval internals shared by the runner's files (not a public header): the runner's state, and the
 * feeding, prompt and few-shot helpers the task loops (run_loss.c, run_mc.c, run_gen.c) use. */
#ifndef SWIFT_EVAL_INTERNAL_H
#define SWIFT_EVAL_INTERNAL_H

#include "lib/core/progress.h"
#include "lib/eval/eval.h"
#include "lib/eval/generate.h"
#include "lib/eval/kv.h"
#include "lib/eval/prompt.h"
#include "lib/eval/run.h"
#include "lib/model/model.h"
#include "lib/preprocess/tokenizer.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SWIFT_EVAL_MAX_WANT 256 /* logits rows per forward call */

struct swift_eval_ids {
    int32_t *v;
    int n;
};

struct swift_vlm;
struct swift_eval_runner {
    const struct swift_eval_opts *o;
    struct swift_model m;
    int have_model;
    struct swift_vlm *vlm;  /* a vision-language model (loss / ppl on image shards), else NULL */
    struct swift_model ref; /* pref: --ref-model */
    int have_ref;
    int curl;      /* --eval-url: curl_global_init done */
    json_t *preds; /* --predictions: one object per generated answer, or NULL */
    struct swift_tokenizer *tok;
    struct swift_tok_state *st;
    struct swift_kv kv;
    int have_kv;
    int V;
    float *logits; /* SWIFT_EVAL_MAX_WANT x V */
    int32_t eos[8];
    int neos;
    struct swift_eval_prompter *pr;
    int agent;     /* toolcall: the agent template (lib/preprocess/agent.h) */
    long tc_names; /* toolcall: items whose call names matched */
    /* counters for the record */
    long tokens;  /* tokens run through the model */
    double fwd_s; /* time in forward calls (scoring) */
    struct swift_gen_stats gen;
    struct swift_progress prog; /* items done of the dataset; the task loops set .total */
    char prog_title[64];
};

/* Seconds on the trace clock. */
double swift_eval_now(void);

/* Text → ids (special tokens parsed); out->v malloc'ed. Returns 0 or -1 (reported). */
int swift_eval_encode(struct swift_eval_runner *r, const char *text, struct swift_eval_ids *out);
/* A prompt as the model sees it: plain text, or with --template the user turn followed by the
 * assistant header; the template's end-of-turn id joins the stop ids. Returns 0 or -1. */
int swift_eval_encode_prompt(struct swift_eval_runner *r, const char *text,
                             struct swift_eval_ids *out);
/* Add a stop id (ignored when out of the vocabulary, already there, or past eight). */
void swift_eval_add_eos(struct swift_eval_runner *r, long id);
/* A toolcall item's prompt: the conversation before its turn with the tools (prompt.h); the
 * template's end-of-turn id joins the stop ids. Returns 0 or -1. */
int swift_eval_encode_toolcall(struct swift_eval_runner *r, const struct swift_eval_item *it,
                               struct swift_eval_ids *out);

struct swift_eval_feed {
    int row;
    const int32_t *ids;
    int n;
    int want_from;        /* logits wanted for positions >= want_from ... */
    const uint8_t *wantm; /* ... or, when set, where wantm[pos] */
    int tag;
};
typedef void (*swift_eval_logit_fn)(void *ctx, const struct swift_eval_feed *f, int pos,
                                    const float *logits);

/* Feed the nf sequences through r->kv in chunks of at most kv.max_tokens tokens; fn gets the
 * logits of every wanted position. Counts r->tokens and r->fwd_s. Returns 0 or -1. */
int swift_eval_feed_all(struct swift_eval_runner *r, const struct swift_eval_feed *f, int nf,
                        swift_eval_logit_fn fn, void *ctx);
/* A cache of at least rows x need tokens. It grows only (in steps of 64 tokens, up to
 * --max-length), so its size follows the longest batch seen, not --max-length. */
int swift_eval_kv_ensure(struct swift_eval_runner *r, int rows, int need);
/* A trace span for one batch (and a tokens/s counter). */
void swift_eval_batch_span(const char *name, int64_t t0, long batch, long items, long tokens);

/* Few-shot examples for item i: MMLU's from the subject's dev file, the others the first K items
 * of the set (list, n), borrowed until the next call. Free with swift_eval_shots_free. */
struct swift_eval_shots {
    struct swift_eval_set dev; /* MMLU: the current subject's dev file */
    char *dev_file;
    const struct swift_eval_item **list;
    int n;
};
int swift_eval_shots_for(struct swift_eval_runner *r, struct swift_eval_shots *s,
                         struct swift_eval_set *set, size_t i);
void swift_eval_shots_free(struct swift_eval_shots *s);
/* Keep the last `keep` tokens of ids (left truncation of long prompts). */
void swift_eval_left_truncate(struct swift_eval_ids *x, int keep);

/* The task loops: run the task, put its metrics into rec and the items scored into *n_out.
 * Return 0 or -1 (reported). */
int swift_eval_run_loss(struct swift_eval_runner *r, json_t *rec, long *n_out);
/* loss / ppl with r->vlm (lib/eval/run_vl.c): image shards, each document's full forward. */
int swift_eval_run_vl_loss(struct swift_eval_runner *r, json_t *rec, long *n_out);
/* loss / ppl's metrics into rec from the sums over the trained tokens (sum of -log p, count,
 * correct argmax): loss, ppl, token_acc, tokens (ppl first for --task ppl); -1 (reported)
 * when no token was trained. Shared by run_loss.c and run_vl.c. */
int swift_eval_loss_metrics(const struct swift_eval_runner *r, json_t *rec, double sum, long count,
                            long correct);
/* gsm8k / exact with r->vlm (lib/eval/run_vl_gen.c): items with their images, generated on
 * swift-infer's engine. */
int swift_eval_run_vl_gen(struct swift_eval_runner *r, struct swift_eval_set *set, json_t *rec,
                          long *n_out);
int swift_eval_run_mc(struct swift_eval_runner *r, struct swift_eval_set *setp, json_t *rec,
                      long *n_out);
int swift_eval_run_pref(struct swift_eval_runner *r, json_t *rec, long *n_out);
int swift_eval_run_gen(struct swift_eval_runner *r, struct swift_eval_set *setp, json_t *rec,
                       long *n_out);
/* gsm8k and exact through an OpenAI-compatible server (--eval-url; run_remote.c). */
int swift_eval_run_remote(struct swift_eval_runner *r, struct swift_eval_set *setp, json_t *rec,
                          long *n_out);
/* The generation tasks' stop words ("\n\n", "Question:"), in the order they are tried. */
extern const char *const swift_eval_stop_words[];
/* Cut a generated text at its first stop word. */
void swift_eval_gen_cut(char *text);
/* Keep one answer for --predictions (a no-op without it). */
void swift_eval_prediction(struct swift_eval_runner *r, const struct swift_eval_item *it,
                           const char *answer, int correct);
/* Whether a generated answer is right: gsm8k compares the extracted number, exact the text,
 * toolcall the parsed calls (counting matching names in r->tc_names). */
int swift_eval_gen_correct(struct swift_eval_runner *r, int task, const char *ans,
                           const char *target);

#endif
