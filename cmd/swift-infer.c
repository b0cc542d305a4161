/* swift-infer: batch inference in OpenAI's Batch API format, or an OpenAI-compatible server
 * (--serve), on an engine with continuous batching over a paged key/value cache. */
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/omp.h"
#include "lib/core/trace.h"
#include "lib/infer/batch.h"
#include "lib/infer/server.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/template.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct cli {
    struct swift_serve_opts s; /* s.infer: the batch mode's options too */
    int serve;
    const char *trace;
};
#define F(m) SWIFT_FIELD(struct cli, m)
#define BIG (1 << 30)

static int agent_name(const struct swift_option *opt, void *opts, const char *arg)
{
    int a = swift_agent_find(arg);
    if (a < 0)
        return swift_usage("unknown agent template '%s' (%s)", arg, SWIFT_AGENT_NAMES);
    ((struct cli *)opts)->s.infer.agent = a;
    return 0;
}

static const struct swift_option options[] = {
    SWIFT_OPT_PATH(0, "adapters", F(s.infer.adapters), "DIR",
                   "LoRA adapters in PEFT's layout, merged into the weights", .aliases = "adapter"),
    SWIFT_OPT_STRING(0, "template", F(s.infer.template_name), "NAME",
                     "chat template (default: the tokenizer's chat_template, recognised)",
                     .values = SWIFT_TEMPLATE_NAMES),
    SWIFT_OPT_CALLBACK(0, "agent-template", agent_name, "NAME",
                       "how tools are offered and tool calls parsed back: " SWIFT_AGENT_NAMES
                       " (default: the template's own, hermes for Qwen, llama3 for Llama 3)",
                       .aliases = "agent_template", .values = SWIFT_AGENT_NAMES),
    SWIFT_OPT_PATH('o', "output", F(s.infer.output), "FILE",
                   "write the answers to FILE (atomically; a rerun keeps the custom_ids already "
                   "answered there and answers the rest) instead of stdout"),
    SWIFT_OPT_STRING(0, "served-model-name", F(s.infer.served_name), "NAME",
                     "the model name requests must give, echoed in the answers (default: any "
                     "name; MODEL_DIR is echoed)"),
    SWIFT_OPT_INT(0, "max-num-seqs", F(s.infer.engine.max_num_seqs), 1, 4096, "N",
                  "sequences in the running batch (default 16)"),
    SWIFT_OPT_INT(0, "max-num-batched-tokens", F(s.infer.engine.max_num_batched_tokens), 1, BIG,
                  "N", "tokens per forward, decode and prefill chunks together (default 512)"),
    SWIFT_OPT_INT(0, "block-size", F(s.infer.engine.block_size), 1, 4096, "N",
                  "tokens per key/value cache block (default 16)"),
    SWIFT_OPT_INT(0, "num-blocks", F(s.infer.engine.num_blocks), 0, BIG, "N",
                  "cache blocks in the pool (default 0: --max-num-seqs sequences of "
                  "--max-model-len)",
                  .aliases = "num_gpu_blocks_override"),
    SWIFT_OPT_INT(0, "max-model-len", F(s.infer.engine.max_model_len), 0, BIG, "N",
                  "prompt plus completion in tokens (default: the model's "
                  "max_position_embeddings)"),
    SWIFT_OPT_INT('j', "threads", F(s.infer.threads), 0, 4096, "N", "CPU threads (default all)"),
    SWIFT_OPT_STRING(0, "device", F(s.infer.device), "auto|cpu|cuda[:N]",
                     "where the model runs (default auto: the cpu)"),
    SWIFT_OPT_FLAG(0, "serve", F(serve),
                   "serve the OpenAI API over HTTP (/v1/chat/completions, /v1/completions, "
                   "/v1/models, /health) until SIGTERM or SIGINT, instead of reading IN.jsonl"),
    SWIFT_OPT_STRING(0, "host", F(s.host), "ADDR",
                     "with --serve: the address to listen on (default 127.0.0.1)"),
    SWIFT_OPT_INT(0, "port", F(s.port), 0, 65535, "N",
                  "with --serve: the port (default 8000; 0: any free port, reported)"),
    SWIFT_OPT_STRING(0, "api-key", F(s.api_key), "KEY",
                     "with --serve: /v1 requests need 'Authorization: Bearer KEY' (default "
                     "$VLLM_API_KEY; none when unset)"),
    SWIFT_OPT_INT(0, "max-request-bytes", F(s.max_request_bytes), 1, BIG, "N",
                  "with --serve: larger request bodies are refused with a 413 (default "
                  "1048576)"),
    SWIFT_OPT_INT(0, "timeout-keep-alive", F(s.timeout_keep_alive), 0, 86400, "SECONDS",
                  "with --serve: idle connections are closed after SECONDS (default 5; 0: "
                  "never)"),
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-infer",
    .usage = "[OPTION]... MODEL_DIR [IN.jsonl]\n  or:  swift-infer [OPTION]... MODEL_DIR --serve",
    .summary = "batch inference on OpenAI Batch API files, or an OpenAI-compatible server",
    .options = options,
    .description =
        "Reads requests from IN.jsonl (default stdin), one per line: OpenAI Batch API lines\n"
        "(custom_id, method POST, url /v1/chat/completions or /v1/completions, body) or\n"
        "ms-swift infer rows ({\"messages\": [...], \"tools\": [...]}), and writes one Batch API\n"
        "output line per request, in input order, on stdout or to --output: the response body\n"
        "(chat.completion or text_completion, with usage) or the error of a bad line.\n"
        "Exit status: 0 ok (bad lines included, each answered with its error), 1 failure\n"
        "(model, I/O), 2 usage error, 75 stopped by SIGTERM/SIGUSR1/SIGINT with the answers so\n"
        "far written (run again with the same --output to answer the rest).\n"
        "With --serve it answers the same requests over HTTP instead (OpenAI's and vLLM's API:\n"
        "streaming, n, tools, usage), until SIGTERM or SIGINT (then exit 0).\n"
        "MODEL_DIR may also be a GGUF file (llama, qwen2, qwen3 as swift-export writes them;\n"
        "F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K tensors, dequantized at load), its\n"
        "tokenizer and chat template read from the file.",
    .examples =
        "  swift-infer models/qwen requests.jsonl -o answers.jsonl\n"
        "  swift-infer base --adapters out/checkpoint-100 rows.jsonl > answers.jsonl\n"
        "  swift-infer models/qwen --max-num-seqs 32 --trace trace/ requests.jsonl -o a.jsonl\n"
        "  swift-infer models/qwen --serve --port 8000 --served-model-name qwen\n"
        "  swift-infer qwen-q8_0.gguf requests.jsonl -o answers.jsonl\n"
        "  swift-infer models/llama3.1 --agent-template llama3 --serve\n",
    .int_error = "invalid --{name} '{arg}' (expected {min}..{max})",
    .number_error = "invalid --{name} '{arg}' (expected {min}..{max})"};

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct cli c = {0};
    swift_serve_opts_init(&c.s);
    int argi, rc = swift_cli_parse(&command, argc, argv, &c, &argi);
    if (rc >= 0)
        return swift_close_stdout(rc);
    if (argc - argi < 1)
        return swift_usage("missing MODEL_DIR");
    if (argc - argi > (c.serve ? 1 : 2))
        return swift_usage(c.serve ? "--serve takes one MODEL_DIR and no input file"
                                   : "one MODEL_DIR and at most one IN.jsonl expected");
    if (c.serve && c.s.infer.output)
        return swift_usage("--output is for the batch mode, not --serve");
    c.s.infer.model = argv[argi];
    c.s.infer.input = argc - argi == 2 ? argv[argi + 1] : NULL;
    if (c.s.infer.template_name && !swift_template_find(c.s.infer.template_name))
        return swift_usage(
            "unknown template '%s' (%s)", c.s.infer.template_name, SWIFT_TEMPLATE_NAMES);
    struct swift_trace_config tc = {
        .stage = "infer", .path = c.trace, .argc = argc, .argv = argv, .world_size = 1};
    if (swift_trace_open(&tc) < 0)
        return 1;
    rc = swift_exit_code(c.serve ? swift_infer_serve(&c.s) : swift_infer_batch_run(&c.s.infer));
    swift_trace_close();
    return swift_close_stdout(rc);
}
