/*
 * openai — the OpenAI API layer of swift-infer: request bodies in, response bodies out, pure
 * functions over jansson (no engine, no I/O), shared by the batch mode (lib/infer/infer.h) and
 * the HTTP server.
 *
 *     struct swift_oai_request rq;
 *     struct swift_oai_error er;
 *     if (swift_oai_parse(body, SWIFT_OAI_CHAT, "my-model", &rq, &er) < 0)
 *         reply(er.status, swift_oai_error_json(&er));       // 400, or 404 for an unknown model
 *     swift_oai_render_chat(&rq, tpl, st, tok, &enc, &er);  // prompt ids in enc.tok
 *     ... swift_engine_add(e, ids, n, &rq.sampling, ...) ...
 *     per token: swift_oai_choice_add(&ch[c], &rq, tok, ev) -> 1 when a stop string ended it
 *     json_t *body = swift_oai_chat_response(&rq, id, created, model, ch, rq.sampling.n, ptoks);
 *     swift_oai_request_release(&rq);
 *
 * Requests (/v1/chat/completions and /v1/completions as OpenAI documents them, with vLLM's
 * extensions): model, n (1..64), max_tokens or max_completion_tokens (>= 1; absent: up to the
 * context limit, sampling.max_tokens 0 then and the caller fills it), temperature (>= 0;
 * absent: 0, greedy, as ms-swift's infer; OpenAI and vLLM default to 1),
 * top_p (0..1], top_k (-1 or 0: off), min_p [0, 1], repetition_penalty (> 0),
 * presence_penalty and frequency_penalty [-2, 2], seed (an integer), stop (a string or an
 * array of at most 16 non-empty strings), logprobs (chat: a boolean with top_logprobs 0..20;
 * completions: an integer 0..20), stream, stream_options.include_usage (only with stream),
 * ignore_eos, stop_token_ids and return_tokens_as_token_ids (vLLM). Chat: messages (roles system,
 * developer (as system), user, assistant, tool; content a string, null, or an array of {"type":
 * "text", "text"} parts joined with "\n" as vLLM does), tool_calls on assistant messages
 * (function.arguments a JSON string, parsed into an object for the template as vLLM does), tools
 * ({"type": "function", "function": {"name", ...}}), tool_choice ("auto" or "none": with "none" the
 * tools stay in the prompt and calls are not parsed, vLLM's default),
 * chat_template_kwargs.enable_thinking (Qwen3's thinking switch). Completions: prompt as a string,
 * an array of one string, or an array of token ids. Unknown fields are ignored, as OpenAI and vLLM
 * do; a known field of the wrong type or out of range is an error that names it (param).
 *
 * Responses follow OpenAI's shapes: chat.completion, text_completion, chat.completion.chunk (SSE
 * framing "data: {json}\n\n", the final "data: [DONE]\n\n"), the error object
 * {"error": {"message", "type", "param", "code"}}, and the Batch API's output line.
 */
#ifndef SWIFT_INFER_OPENAI_H
#define SWIFT_INFER_OPENAI_H

#include "lib/infer/engine.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum swift_oai_kind { SWIFT_OAI_CHAT, SWIFT_OAI_COMPLETION };

#define SWIFT_OAI_MAX_N 64
#define SWIFT_OAI_MAX_STOP 16
#define SWIFT_OAI_MAX_STOP_IDS 64
#define SWIFT_OAI_MAX_IMAGES 32
/* Where an image goes in a message's text (Qwen2-VL's chat template puts the same for an image
 * part); swift_infer_images expands its <|image_pad|> to the image's tokens. */
#define SWIFT_OAI_IMAGE_MARK "<|vision_start|><|image_pad|><|vision_end|>"

/* An error as the API returns it: HTTP status, message, the field at fault ("" when none) and
 * the code (NULL: none; "model_not_found" for 404). */
struct swift_oai_error {
    int status;
    char message[512];
    char param[96];
    const char *code;
};

struct swift_oai_request {
    enum swift_oai_kind kind;
    json_t *body;      /* one reference held */
    const char *model; /* borrowed from body; NULL when absent */
    /* chat */
    struct swift_conv conv; /* messages borrowed from body and from owned */
    json_t *owned;          /* joined contents and parsed tool calls the messages borrow */
    int tools_on;           /* tools given and tool_choice not "none": parse tool calls */
    int enable_thinking;    /* chat_template_kwargs.enable_thinking (default 1) */
    /* completions */
    const char *prompt; /* borrowed; NULL when prompt_ids are given */
    size_t prompt_len;
    int32_t *prompt_ids; /* owned */
    int nprompt_ids;
    /* both */
    struct swift_sampling sampling; /* max_tokens 0: not given; stop_ids point to stop_ids[] */
    int32_t stop_ids[SWIFT_OAI_MAX_STOP_IDS];
    const char *stop[SWIFT_OAI_MAX_STOP]; /* borrowed from body */
    int nstop;
    int logprobs;  /* chat: logprobs true; completions: logprobs given (sampling.top_logprobs N) */
    int token_ids; /* return_tokens_as_token_ids (vLLM): logprobs tokens as "token_id:N" */
    int stream, include_usage;
    /* images (chat): the URLs of image_url parts, or a row's "images" paths, in prompt order
     * (borrowed from body); each stands as SWIFT_OAI_IMAGE_MARK in its message */
    const char *images[SWIFT_OAI_MAX_IMAGES];
    int nimages;
    int images_rel; /* a row's paths: relative to the data file */
};

/* Parse a request body of the given kind. served: the model name this server answers to (a
 * different "model" is a 404 model_not_found), or NULL to accept any name. On success returns 0
 * with rq filled (release it with swift_oai_request_release); on error returns -1 with er filled
 * and nothing to release. body is borrowed (rq takes its own reference). */
int swift_oai_parse(json_t *body, enum swift_oai_kind kind, const char *served,
                    struct swift_oai_request *rq, struct swift_oai_error *er);
/* A chat request from an ms-swift row (the formats swift-preprocess reads: "messages" or ShareGPT
 * "conversations", roles tool_call / tool_response / function_call / observation, "tools" as an
 * array or a JSON string, a "system" column; lib/preprocess/dataset.h) with the request fields
 * above next to them; a final assistant message is the row's label and is dropped. "images"
 * (paths relative to the data file, or {"path"}) go where the "<image>" placeholders are (none:
 * all before the first user message, as ms-swift); a count that differs is a 400. */
int swift_oai_parse_row(json_t *row, const char *served, struct swift_oai_request *rq,
                        struct swift_oai_error *er);
/* The same from raw bytes: malformed JSON or a non-object is a 400. */
int swift_oai_parse_text(const char *text, size_t len, enum swift_oai_kind kind, const char *served,
                         struct swift_oai_request *rq, struct swift_oai_error *er);
void swift_oai_request_release(struct swift_oai_request *rq);

/* Fill er (status, message, param, code) and return -1. */
int swift_oai_fail(struct swift_oai_error *er, int status, const char *param, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* {"error": {"message", "type": "invalid_request_error" (or "not_found_error" for 404,
 * "server_error" for 5xx, as OpenAI's API), "param" (null when ""), "code" (null when NULL)}}. */
json_t *swift_oai_error_json(const struct swift_oai_error *er);
/* Why a request the engine cancelled was not answered, as a 503 (a client may retry): a failed
 * engine step (engine_failed: a backend error, reported on the server's stderr) or the server
 * shutting down. Returns -1. */
int swift_oai_abort_error(struct swift_oai_error *er, int engine_failed);

/*
 * The prompt of a chat request: its messages (and tools) rendered with template t and the
 * generation prompt (swift_template_encode_prompt), Qwen3's empty thinking block when
 * enable_thinking is false. The conversation must end with a user or tool message. Returns 0 with
 * the ids in e->tok, or -1 with a 400 in er.
 */
int swift_oai_render_chat(struct swift_oai_request *rq, const struct swift_template *t,
                          struct swift_tok_state *st, const struct swift_tokenizer *tok,
                          struct swift_encoded *e, struct swift_oai_error *er);
/* The prompt of a completions request: its ids, or its text tokenized (special tokens parsed, a
 * leading bos when the tokenizer config asks for one, as HF's tokenizer(prompt)). *ids is
 * malloc'ed. Returns 0, or -1 with a 400 in er (an empty prompt, an id outside the vocabulary). */
int swift_oai_prompt_ids(const struct swift_oai_request *rq, struct swift_tok_state *st,
                         const struct swift_tokenizer *tok, int32_t **ids, int *n,
                         struct swift_oai_error *er);

/* One choice being generated: its text, the tokens' log-probabilities, how it ended. */
struct swift_oai_choice {
    char *text; /* NUL-terminated; special tokens (eos, end of turn) are not added */
    size_t len, cap;
    json_t *lp; /* logprobs entries when asked: chat {"token","logprob","bytes","top_logprobs"},
                   completions {"token","logprob","top","offset"} (shaped by the response) */
    enum swift_finish finish;
    int completion_tokens;
    int cached_tokens; /* prompt tokens the engine found in its prefix cache (usage's
                          prompt_tokens_details.cached_tokens) */
    size_t emitted;    /* bytes already streamed (swift_oai_choice_delta) */
    size_t lp_emitted; /* logprobs entries already streamed (swift_oai_choice_lp_delta) */
};
void swift_oai_choice_release(struct swift_oai_choice *c);

/*
 * Add one engine event to choice c: the token's text (not for special tokens), its logprobs
 * when the request asks, the finish reason. Then looks for rq's stop strings in the text
 * (those that can end in the new bytes): the text is cut before the earliest one and the
 * choice ends with SWIFT_FINISH_STOP. Returns 1 when a stop string ended the choice (the
 * engine callback returns that to stop the choice), 0 otherwise.
 */
int swift_oai_choice_add(struct swift_oai_choice *c, const struct swift_oai_request *rq,
                         const struct swift_tokenizer *tok, const struct swift_engine_event *ev);
/* Where the earliest of the stop strings starts in text[0..len) among those ending after
 * `from` bytes, or -1. */
long swift_oai_stop_find(const char *text, size_t len, size_t from, const char *const *stop,
                         int nstop);
/* The text that may be streamed now: bytes not yet emitted that cannot be the start of a stop
 * string still (held back while they could be) and end on a UTF-8 character boundary, or all
 * the rest once the choice finished. Advances c->emitted. *out borrowed from c->text. */
size_t swift_oai_choice_delta(struct swift_oai_choice *c, const struct swift_oai_request *rq,
                              const char **out);

/* The seed of choice i's tool-call ids: seed itself for choice 0, for the others seed XOR a
 * splitmix64 hash of i. (seed + i times splitmix's increment made choice i's ids choice 0's
 * draws shifted by i.) */
uint64_t swift_oai_call_seed(uint64_t seed, int i);

/* "stop", "length", "tool_calls" (chat with parsed calls), "abort" for a cancelled choice, or
 * NULL while it goes on. */
const char *swift_oai_finish_name(enum swift_finish f, int tool_calls);

/* Response bodies (new references). id: "chatcmpl-…" / "cmpl-…"; model: the name to echo. */
json_t *swift_oai_chat_response(const struct swift_oai_request *rq, const char *id, long created,
                                const char *model, struct swift_oai_choice *ch, int n,
                                int prompt_tokens, uint64_t call_seed);
json_t *swift_oai_completion_response(const struct swift_oai_request *rq, const char *id,
                                      long created, const char *model, struct swift_oai_choice *ch,
                                      int n, int prompt_tokens);
/* {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
 * {"cached_tokens"}} over the n choices (OpenAI's usage; cached_tokens 0 without a hit). */
json_t *swift_oai_usage(const struct swift_oai_choice *ch, int n, int prompt_tokens);

/* Streaming: a chunk of choice `index` (chat: chat.completion.chunk with delta {role on the
 * first, content}; completions: text_completion with text), finish NULL while it goes on;
 * usage_chunk: the final chunk with empty choices and usage (stream_options.include_usage). */
json_t *swift_oai_chunk(const struct swift_oai_request *rq, const char *id, long created,
                        const char *model, int index, int first, const char *text, size_t len,
                        const char *finish);
/* The logprobs entries of choice c added since the last call, in the response's shape (chat
 * {"content": [...]}, completions the legacy arrays), to go with the next chunk of the choice;
 * NULL when there are none or rq did not ask for logprobs. */
json_t *swift_oai_choice_lp_delta(struct swift_oai_choice *c, const struct swift_oai_request *rq);
json_t *swift_oai_usage_chunk(const struct swift_oai_request *rq, const char *id, long created,
                              const char *model, const struct swift_oai_choice *ch, int n,
                              int prompt_tokens);
/* "data: <compact json>\n\n" (malloc'ed, *len set); the end of a stream is SWIFT_OAI_SSE_DONE. */
char *swift_oai_sse(const json_t *chunk, size_t *len);
#define SWIFT_OAI_SSE_DONE "data: [DONE]\n\n"

/* The Batch API's output line: {"id", "custom_id", "response": {"status_code", "request_id",
 * "body"}, "error": null}; or for a line that is no request at all (not JSON, no custom_id, an
 * unknown url): {"id", "custom_id" (null when unknown), "response": null, "error": {"code",
 * "message"}}. custom_id may be NULL. New references. */
json_t *swift_oai_batch_line(const char *id, const char *custom_id, int status,
                             const char *request_id, json_t *body);
json_t *swift_oai_batch_error_line(const char *id, const char *custom_id, const char *code,
                                   const char *message);

#endif
