/* swift-eval: loss/perplexity, multiple choice and generation benchmarks, regression gates. */
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/eval/eval.h"
#include "lib/eval/remote.h"
#include "lib/eval/run.h"
#include "lib/core/fileio.h"
#include "lib/eval/prompt.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/template.h"
#include "lib/core/trace.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_DATASETS 64

struct cli {
    struct swift_eval_opts o;
    const char *datasets[MAX_DATASETS];
    const char *trace;
};
#define F(m) SWIFT_FIELD(struct cli, m)

/* --dataset (repeatable: one record each) */
static int dataset(const struct swift_option *opt, void *opts, const char *arg)
{
    struct cli *c = opts;
    if (c->o.ndatasets == MAX_DATASETS)
        return swift_usage("more than %d --dataset options", MAX_DATASETS);
    c->datasets[c->o.ndatasets++] = arg;
    c->o.dataset = arg;
    c->o.datasets = c->datasets;
    return 0;
}

static int agent_name(const struct swift_option *opt, void *opts, const char *arg)
{
    int a = swift_agent_find(arg);
    if (a < 0)
        return swift_usage("unknown agent template '%s' (%s)", arg, SWIFT_AGENT_NAMES);
    ((struct cli *)opts)->o.agent = a;
    return 0;
}

static const struct swift_option options[] = {
    SWIFT_OPT_LOOKUP(0, "task", F(o.task), swift_eval_task_parse, "TASK",
                     "loss, ppl, mc, mmlu, gsm8k, exact, pref or toolcall",
                     .values = "loss ppl mc mmlu gsm8k exact pref toolcall",
                     .error = "unknown task '{arg}' (loss, ppl, mc, mmlu, gsm8k, exact, pref, "
                              "toolcall)"),
    SWIFT_OPT_CALLBACK(
        0, "dataset", dataset, "PATH",
        "shards or a raw JSONL/JSON/CSV/text file (loss, ppl), MMLU CSV file or "
        "folder (mmlu), JSONL (mc, gsm8k, exact), pair shards (pref), tool-calling conversations "
        "(toolcall); repeat it for one record per dataset",
        .aliases = "val_dataset"),
    SWIFT_OPT_PATH(0, "adapters", F(o.adapters), "DIR", "LoRA adapters in PEFT's layout",
                   .aliases = "adapter"),
    SWIFT_OPT_FLAG(0, "merge-adapters", F(o.merge_adapters),
                   "fold the adapters into the weights (default: run them aside)",
                   .aliases = "merge_lora"),
    SWIFT_OPT_PATH(0, "ref-model", F(o.ref_model), "DIR",
                   "pref: the reference model (default: MODEL_DIR without its --adapters)",
                   .aliases = "ref_model"),
    SWIFT_OPT_DOUBLE(0, "beta", F(o.beta), 0, 1e6, "B",
                     "pref: the implicit reward's scale, beta (logp - logp_ref) (default 0.1)"),
    SWIFT_OPT_STRING(0, "template", F(o.template_name), "NAME",
                     "chat template for prompts and raw loss data (none: plain text; default "
                     "none, for loss the tokenizer's)",
                     .values = "none " SWIFT_TEMPLATE_NAMES),
    SWIFT_OPT_CALLBACK(0, "agent-template", agent_name, "NAME",
                       "toolcall: how tools are offered and calls parsed: " SWIFT_AGENT_NAMES
                       " (default: the template's own, hermes for Qwen, llama3 for Llama 3)",
                       .aliases = "agent_template", .values = SWIFT_AGENT_NAMES),
    SWIFT_OPT_INT(0, "limit", F(o.limit), 0, 1L << 40, "N",
                  "evaluate the first N items (samples for loss)", .aliases = "eval_limit"),
    SWIFT_OPT_INT(0, "few-shot", F(o.few_shot), 0, 64, "K",
                  "K examples before each question (default 0)"),
    SWIFT_OPT_INT(0, "max-new-tokens", F(o.max_new_tokens), 1, 1 << 20, "N",
                  "generation length limit (default 256)"),
    SWIFT_OPT_DOUBLE(0, "temperature", F(o.temperature), 0, 100, "T", "0 is greedy (default 0)"),
    SWIFT_OPT_DOUBLE(0, "top-p", F(o.top_p), 1e-12, 1, "P", "nucleus sampling mass (default 1)"),
    SWIFT_OPT_INT(0, "seed", F(o.seed), 0, LONG_MAX, "S", "sampling seed (default 42)"),
    SWIFT_OPT_INT(0, "batch-size", F(o.batch_size), 1, 4096, "B", "sequences per batch (default 8)",
                  .aliases = "per_device_eval_batch_size"),
    SWIFT_OPT_INT(
        0, "max-length", F(o.max_length), 2, 1 << 20, "N",
        "longest sequence in tokens (default: the model's max_position_embeddings, at most 4096)"),
    SWIFT_OPT_PATH('o', "output", F(o.output), "FILE",
                   "also write the record to FILE (atomically)"),
    SWIFT_OPT_PATH(0, "predictions", F(o.predictions), "FILE",
                   "gsm8k, exact: write each answer to FILE as a JSONL line (dataset, file, line, "
                   "prediction, target, correct)"),
    SWIFT_OPT_PATH(0, "baseline", F(o.baseline), "FILE",
                   "exit 1 when a metric is worse than in this earlier record of the same "
                   "task and dataset (one line per metric on stderr)"),
    SWIFT_OPT_DOUBLE(
        0, "max-drop", F(o.max_drop), 0, 1e9, "D",
        "tolerated drop: absolute for accuracies, relative for loss and ppl (default 0.01)"),
    SWIFT_OPT_STRING(0, "device", F(o.device), "auto|cpu|cuda[:N]",
                     "where the model and its key/value cache run (default auto: the cpu; "
                     "cuda[:N] opts in to a GPU)"),
    SWIFT_OPT_ENUM(
        0, "torch-dtype", F(o.torch_dtype),
        SWIFT_CHOICES({"float32", 0}, {"bfloat16", 1}, {"float16", 2}), /* SWIFT_MATH_* */
        "bfloat16|float16|float32",
        "the matmuls' dtype (ms-swift's --torch_dtype): bfloat16 runs them in bf16 "
        "with fp32 accumulation; default: the checkpoint's dtype on the CPU (float16 and "
        "none: float32), float32 on a GPU",
        .error = "--torch-dtype: '{arg}' is not bfloat16, float16 or float32"),
    SWIFT_OPT_STRING(0, "eval-url", F(o.eval_url), "URL",
                     "gsm8k, exact: generate through this OpenAI-compatible server (a root, its "
                     "/v1, or a /v1/completions or /v1/chat/completions URL) instead of loading a "
                     "model; --batch-size requests at once; MODEL_DIR is then optional, the "
                     "model name sent"),
    SWIFT_OPT_STRING(0, "api-key", F(o.api_key), "KEY",
                     "with --eval-url: send 'Authorization: Bearer KEY' (default $OPENAI_API_KEY; "
                     "none when unset)"),
    SWIFT_OPT_FLAG(0, "quiet", F(o.quiet), "no table on stderr (and no progress line)"),
    SWIFT_OPT_PROGRESS(F(o.progress)),
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-eval",
    .usage = "[OPTION]... MODEL_DIR --task TASK --dataset PATH",
    .summary = "evaluate a model: loss, perplexity, multiple choice, generation",
    .options = options,
    .description =
        "Prints one JSON record on stdout (schema_version, model, adapters, task, dataset, n,\n"
        "metrics, subjects, config, time_s, tokens, tokens_per_s) and a short table on stderr.\n"
        "Exit status: 0 ok, 1 failure or a regression against --baseline, 2 usage error.",
    .examples =
        "  swift-eval out/ckpt --task mmlu --dataset ../shared/data/datasets/mmlu --few-shot 5\n"
        "  swift-eval out/ckpt --task gsm8k --dataset test.jsonl --limit 100 --max-new-tokens 256\n"
        "  swift-eval base --adapters out/checkpoint-50 --task ppl --dataset shards/val\n"
        "  swift-eval out/ckpt --task mmlu --dataset mmlu --baseline before.json --max-drop 0.01\n"
        "  swift-eval base --adapters out/dpo/checkpoint-100 --task pref --dataset pairs/val\n"
        "  swift-eval out/ckpt --task toolcall --dataset heldout_tools.jsonl --max-new-tokens "
        "128\n"
        "  swift-eval --eval-url http://127.0.0.1:8000/v1 --task gsm8k --dataset test.jsonl\n",
    .int_error = "invalid --{name} '{arg}' (expected {min}..{max})",
    .number_error = "invalid --{name} '{arg}' (expected {min}..{max})"};

/* --eval-url: only the generation tasks, and nothing that needs the model here. */
static int remote_checks(struct swift_eval_opts *o)
{
    if (!swift_eval_task_generates(o->task))
        return swift_usage("--eval-url: --task %s scores log-likelihoods, which needs the model "
                           "here (through a server: gsm8k, exact)",
                           swift_eval_task_name(o->task));
    if (o->task == SWIFT_EVAL_TOOLCALL)
        return swift_usage("--eval-url: --task toolcall renders the tools with the agent template "
                           "and parses the calls, which needs the tokenizer here (through a "
                           "server: gsm8k, exact)");
    const char *local = o->adapters           ? "--adapters"
                        : o->merge_adapters   ? "--merge-adapters"
                        : o->ref_model        ? "--ref-model"
                        : o->device           ? "--device"
                        : o->torch_dtype >= 0 ? "--torch-dtype"
                        : o->max_length       ? "--max-length"
                                              : NULL;
    if (local)
        return swift_usage("--eval-url: %s is for a model loaded here (the server has its own)",
                           local);
    struct swift_eval_remote rm;
    if (swift_eval_remote_init(&rm, o->eval_url, 0, NULL, 1) < 0)
        return 2;
    swift_eval_remote_release(&rm);
    if (!o->api_key)
        o->api_key = getenv("OPENAI_API_KEY");
    return 0;
}

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct cli c = {0};
    swift_eval_opts_init(&c.o);
    int argi, rc = swift_cli_parse(&command, argc, argv, &c, &argi);
    if (rc >= 0)
        return swift_close_stdout(rc);
    if (argc - argi > 1 || (argc - argi == 0 && !c.o.eval_url))
        return swift_usage(argc - argi ? "one MODEL_DIR expected" : "missing MODEL_DIR");
    c.o.model = argc - argi ? argv[argi] : NULL;
    if (c.o.task < 0)
        return swift_usage("--task is required");
    if (c.o.predictions && !swift_eval_task_generates(c.o.task))
        return swift_usage("--predictions: --task %s generates nothing (gsm8k, exact do)",
                           swift_eval_task_name(c.o.task));
    if (c.o.eval_url && (rc = remote_checks(&c.o)) != 0)
        return rc;
    if (!c.o.dataset)
        return swift_usage("--dataset is required");
    if (c.o.torch_dtype == 2)
        return swift_usage("--torch-dtype float16: not supported (no fp16 matmuls on the CPU; "
                           "use bfloat16 or float32)");
    if (c.o.task == SWIFT_EVAL_TOOLCALL && c.o.few_shot)
        return swift_usage("--few-shot: not supported by --task toolcall");
    if (c.o.template_name && !swift_eval_template_known(c.o.template_name))
        return swift_usage(
            "unknown template '%s' (none, %s)", c.o.template_name, swift_eval_template_names());
    struct swift_trace_config tc = {
        .stage = "eval", .path = c.trace, .argc = argc, .argv = argv, .world_size = 1};
    if (swift_trace_open(&tc) < 0)
        return 1;
    rc = swift_exit_code(swift_eval_run(&c.o));
    swift_trace_close();
    return swift_close_stdout(rc);
}
