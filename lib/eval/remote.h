/*
 * remote — swift-eval's client for an OpenAI-compatible server (--eval-url, ms-swift's
 * `swift eval --eval_url`): the generation tasks send one request per item to
 * /v1/completions (plain prompts) or /v1/chat/completions (--template), several in flight so the
 * server's continuous batching is used, instead of loading a model here.
 *
 *     struct swift_eval_remote rm;
 *     if (swift_eval_remote_init(&rm, "http://127.0.0.1:8000/v1", 0, key, 8) < 0) ...
 *     swift_eval_remote_post_all(&rm, bodies, labels, n, done, ctx);   // done() per answer
 *     swift_eval_remote_release(&rm);
 *
 * Errors (connection refused, a status other than 200 with or without OpenAI's error object, a
 * malformed answer) are reported once as "ENDPOINT: LABEL: what" and stop the run.
 */
#ifndef SWIFT_EVAL_REMOTE_H
#define SWIFT_EVAL_REMOTE_H

#include <stddef.h>

struct swift_eval_remote {
    char *endpoint;      /* malloc'ed: the full URL requests go to */
    int chat;            /* 1: /v1/chat/completions, 0: /v1/completions */
    const char *api_key; /* borrowed; NULL: no Authorization header */
    int inflight;        /* requests at once (>= 1) */
    long timeout_s;      /* per request (default 600) */
};

/* The endpoint for --eval-url: a server root ("http://h:p"), its "/v1", or a full
 * ".../v1/completions" or ".../v1/chat/completions" (which then decides chat). chat asks for the
 * chat endpoint when the URL does not name one. Only http:// and https://. Returns 0, or -1
 * after a usage message (swift_usage). */
int swift_eval_remote_init(struct swift_eval_remote *rm, const char *url, int chat,
                           const char *api_key, int inflight);
void swift_eval_remote_release(struct swift_eval_remote *rm);

struct swift_eval_answer {
    char *text; /* malloc'ed: choices[0].text, or choices[0].message.content ("" when null) */
    long prompt_tokens, completion_tokens; /* usage (-1 when absent) */
    char finish_reason[16];                /* "" when absent */
};

/* Parse an answer body with its HTTP status: 200 with choices[0] → 0 and *a filled; otherwise -1
 * and err holds what went wrong ("HTTP 404: The model `x` does not exist. (NotFoundError)",
 * "malformed response: ..."). */
int swift_eval_remote_parse(const char *body, size_t len, long status, int chat,
                            struct swift_eval_answer *a, char *err, size_t errcap);
void swift_eval_answer_release(struct swift_eval_answer *a);

/* The answer to request i (a is the callee's to keep: it may move a->text out). Returns 0, or -1
 * to stop (after reporting). */
typedef int (*swift_eval_remote_fn)(void *ctx, size_t i, struct swift_eval_answer *a);

/* POST bodies[0..n) (JSON) to the endpoint, at most rm->inflight at a time; fn per answer, in
 * the order they arrive. A trace span `request` (cat infer) per request, from its start to its
 * answer (args req = i + 1, status, prompt_tokens, completion_tokens). The first failure is
 * reported as "ENDPOINT: labels[i]: ..." and cancels the rest. Returns 0 or -1. */
int swift_eval_remote_post_all(const struct swift_eval_remote *rm, char *const *bodies,
                               const char *const *labels, size_t n, swift_eval_remote_fn fn,
                               void *ctx);

#endif
