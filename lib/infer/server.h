/*
 * server — swift-infer --serve: an OpenAI-compatible HTTP server (vLLM's endpoints and flags) on
 * libmicrohttpd, over the same engine and OpenAI layer as the batch mode.
 *
 *     struct swift_serve_opts o;
 *     swift_serve_opts_init(&o);
 *     o.infer.model = "models/qwen"; o.port = 8000;
 *     int rc = swift_infer_serve(&o);   // returns after SIGTERM/SIGINT: 0, or SWIFT_FAILED
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health (200
 * once the engine runs; open without the API key, as vLLM). Any other path is a 404 and a known
 * path with another method a 405, both with OpenAI's error object. With an API key (--api-key,
 * else $VLLM_API_KEY as vLLM reads it) the /v1 paths want "Authorization: Bearer KEY" (401).
 * Bodies over max_request_bytes are a 413; the other errors are openai.h's (400, 404 for an
 * unknown model; a prompt over max-model-len is a 400 with vLLM's message).
 *
 * Threads (the simplest design that is correct): libmicrohttpd runs a thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION), so a handler may block. The connection's thread parses the
 * body and renders the prompt (openai.h; the tokenizer's state behind a mutex), then hands the
 * request to the engine thread through a queue behind the server's one mutex. The engine thread
 * (the engine is single-threaded) drains the queue into swift_engine_add (and cancellations into
 * swift_engine_cancel) between steps, steps while it holds anything, and sleeps on a condition
 * variable when idle. Its per-token callback appends to the request's choices under the same
 * mutex and signals the request's condition variable. A non-streaming handler waits for every
 * choice and answers; a streaming answer is a libmicrohttpd callback response whose reader, on
 * the connection's thread, turns what is new into SSE chunks and blocks while nothing is. Both
 * waits wake every 100 ms to look at the socket: a client that went away has its request
 * cancelled (through the queue), which frees its cache blocks. A request is freed by whichever
 * side (connection or engine) lets go of it last (a count of two references under the mutex).
 *
 * Streams: a chunk with the role first (chat), then content deltas as tokens arrive (text that
 * could start a stop string is held back), the finish_reason on each choice's last chunk, for
 * n > 1 each choice's chunks with its index, with stream_options.include_usage a last chunk with
 * the usage, then "data: [DONE]". With tools (tool_choice not "none") a choice's text is held
 * until it ends and then sent as its content and tool_calls (each with its "index"), as one
 * delta: vLLM streams the call's arguments piecewise; clients that join the deltas see the same.
 * (tests/cli/infer-toolcall.bats streams calls that a trained tiny model generated.)
 *
 * Stop (SIGTERM, SIGINT): the listening socket is closed, the engine thread cancels everything
 * in flight (streams end with finish_reason "abort" and [DONE]; waiting non-streaming requests
 * get a 503), the threads are joined, everything is freed, "N KV blocks in use" (0) is reported
 * and swift_infer_serve returns 0.
 *
 * Traces (docs/trace-schema.md): a span http_request per request (method, path, status,
 * request_id, req: the engine's request id, joining its request_* spans) besides the engine's.
 */
#ifndef SWIFT_INFER_SERVER_H
#define SWIFT_INFER_SERVER_H

#include "lib/infer/batch.h"

struct swift_serve_opts {
    struct swift_infer_opts infer; /* model, adapters, template, served name, engine, ... */
    const char *host;              /* NULL: 127.0.0.1 */
    int port;                      /* 0: any free port (reported) */
    const char *api_key;           /* NULL: $VLLM_API_KEY, else none */
    int max_request_bytes;         /* bodies larger are a 413 */
    int timeout_keep_alive;        /* seconds an idle connection is kept */
};

void swift_serve_opts_init(struct swift_serve_opts *o);
/* Serve until SIGTERM/SIGINT; 0, SWIFT_FAILED (reported: the model, the address) or
 * SWIFT_MISUSED. */
int swift_infer_serve(const struct swift_serve_opts *o);

#endif
