/*
 * batch — swift-infer's batch mode: a JSONL file of requests in, one answer line per request
 * out, in input order, through the engine (lib/infer/engine.h) with continuous batching.
 *
 *     struct swift_infer_opts o;
 *     swift_infer_opts_init(&o);
 *     o.model = "out/merged"; o.input = "requests.jsonl"; o.output = "answers.jsonl";
 *     int rc = swift_infer_batch_run(&o);  // 0, SWIFT_FAILED, SWIFT_MISUSED, SWIFT_STOPPED
 *
 * Input lines (docs/infer.md):
 *   - the OpenAI Batch API's: {"custom_id", "method": "POST", "url": "/v1/chat/completions" or
 *     "/v1/completions", "body": {...}} (the body as lib/infer/openai.h parses it);
 *   - ms-swift's infer rows: {"messages": [...], "tools"?: [...]} (or the other row shapes
 *     swift-preprocess reads: ShareGPT "conversations", tool_call / tool_response roles, "tools"
 *     as a JSON string; swift_oai_parse_row) and optional sampling fields next to them; a final
 *     assistant message is the row's label, not part of the prompt (ms-swift infer does the
 *     same). Their custom_id is the row's "custom_id" or "id" when it is a string, else "line-N"
 *     (N: the input line).
 * Output lines are the Batch API's (openai.h, swift_oai_batch_line): a 200 with the
 * chat.completion or text_completion body, a 400 (404 for an unknown model) with the error
 * object for an invalid request, or "response": null and an "error" for a line that is no
 * request (not JSON, no custom_id, another url, a custom_id seen before). A bad line never stops
 * the run.
 *
 * At most 2 x max_num_seqs requests are in the engine at a time (the running batch and as many
 * waiting to join it); finished answers wait in memory until the lines before them are done.
 *
 * With an output file the run is resumable: lines of an earlier run of the same file whose
 * custom_id appears in the input are kept as they are (not asked again), the others are answered,
 * and the file is written atomically (a temporary renamed at the end). SIGTERM, SIGUSR1 and
 * SIGINT stop reading, cancel what is in flight and write the answers so far (SWIFT_STOPPED:
 * exit 75); a rerun answers the rest. Lines of the earlier file whose custom_id is not in the
 * input are kept at the end.
 */
#ifndef SWIFT_INFER_BATCH_H
#define SWIFT_INFER_BATCH_H

#include "lib/infer/engine.h"
#include "lib/model/model.h"
#include "lib/preprocess/vision.h"

struct swift_infer_opts {
    const char *model;         /* model directory (required) */
    const char *adapters;      /* PEFT adapters, merged into the weights; NULL: none */
    const char *template_name; /* chat template; NULL: the tokenizer's (swift_template_guess) */
    int agent;         /* enum swift_agent (lib/preprocess/agent.h): how tools are offered and calls
                          parsed; 0: the template's own (hermes for Qwen, llama3 for Llama 3; hermes when
                          the template has none) */
    const char *input; /* JSONL; NULL or "-": stdin */
    const char *output;      /* NULL: stdout (not resumable) */
    const char *served_name; /* the model name requests may give (404 otherwise); NULL: any */
    const char *device;      /* auto (NULL), cpu, cuda[:N] */
    int threads;             /* 0: all CPUs */
    struct swift_engine_opts engine;
};

void swift_infer_opts_init(struct swift_infer_opts *o);

struct swift_tokenizer;
struct swift_tok_state;
struct swift_template;

/* What both modes (batch, --serve) serve, loaded from opts (lib/infer/load.c): the model with its
 * adapters merged, its tokenizer, the chat template (--template or the tokenizer's; NULL when
 * none is known), the engine with the ids that end a choice (the model's eos, the tokenizer's
 * eos_token, <|im_end|> and <|eot_id|>), and the max_model_len in effect. */
struct swift_vlm;
struct swift_infer_model {
    struct swift_model m;
    int have_model;
    struct swift_model *model; /* the engine's: &m, or a vision-language model's &vlm->llm */
    struct swift_vlm *vlm;     /* a Qwen2-VL / Qwen2.5-VL directory (config.json's model_type):
                                  its images go through lib/infer/image.h; NULL: a text model */
    struct swift_vl_opts vo;   /* the image processor's settings (preprocessor_config.json) */
    struct swift_tokenizer *tok;
    struct swift_tok_state *st;
    const struct swift_template *tpl;
    int agent; /* the agent template in effect (never 0) */
    struct swift_engine *eng;
    int max_len;
};
/* Returns 0, SWIFT_MISUSED (--device, --template; reported) or another nonzero (reported);
 * swift_infer_release frees whatever was loaded either way. */
int swift_infer_load(struct swift_infer_model *im, const struct swift_infer_opts *o);
void swift_infer_release(struct swift_infer_model *im);
/* Run the batch; returns 0, SWIFT_FAILED (reported: the model cannot be loaded, an I/O error),
 * SWIFT_MISUSED (--device), or SWIFT_STOPPED after a stop signal (the answers so far written). */
int swift_infer_batch_run(const struct swift_infer_opts *o);

#endif
