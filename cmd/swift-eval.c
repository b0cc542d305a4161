/* swift-eval: loss/perplexity, multiple choice and generation benchmarks, regression gates. */
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/eval/eval.h"
#include "lib/eval/run.h"
#include "lib/core/fileio.h"
#include "lib/eval/prompt.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum {
    O_TASK = SWIFT_OPT_BASE,
    O_DATASET,
    O_ADAPTERS,
    O_MERGE,
    O_TEMPLATE,
    O_LIMIT,
    O_SHOTS,
    O_MAXNEW,
    O_TEMP,
    O_TOPP,
    O_SEED,
    O_BATCH,
    O_MAXLEN,
    O_OUTPUT,
    O_BASELINE,
    O_MAXDROP,
    O_DEVICE,
};

static const struct swift_option options[] = {
    {"task", O_TASK, SWIFT_ARG_REQUIRED, "TASK", "loss, ppl, mc, mmlu, gsm8k or exact", NULL},
    {"dataset",
     O_DATASET,
     SWIFT_ARG_REQUIRED,
     "PATH",
     "shards or a raw JSONL/JSON/CSV/text file (loss, ppl), MMLU CSV file or folder (mmlu), "
     "JSONL (mc, gsm8k, exact); repeat it for one record per dataset",
     "val_dataset"},
    {"adapters",
     O_ADAPTERS,
     SWIFT_ARG_REQUIRED,
     "DIR",
     "LoRA adapters in PEFT's layout",
     "adapter"},
    {"merge-adapters",
     O_MERGE,
     SWIFT_ARG_NONE,
     NULL,
     "fold the adapters into the weights (default: run them aside)",
     "merge_lora"},
    {"template",
     O_TEMPLATE,
     SWIFT_ARG_REQUIRED,
     "NAME",
     "chat template for prompts and raw loss data (none: plain text; default none, for loss the "
     "tokenizer's)",
     NULL},
    {"limit",
     O_LIMIT,
     SWIFT_ARG_REQUIRED,
     "N",
     "evaluate the first N items (samples for loss)",
     "eval_limit"},
    {"few-shot",
     O_SHOTS,
     SWIFT_ARG_REQUIRED,
     "K",
     "K examples before each question (default 0)",
     NULL},
    {"max-new-tokens",
     O_MAXNEW,
     SWIFT_ARG_REQUIRED,
     "N",
     "generation length limit (default 256)",
     NULL},
    {"temperature", O_TEMP, SWIFT_ARG_REQUIRED, "T", "0 is greedy (default 0)", NULL},
    {"top-p", O_TOPP, SWIFT_ARG_REQUIRED, "P", "nucleus sampling mass (default 1)", NULL},
    {"seed", O_SEED, SWIFT_ARG_REQUIRED, "S", "sampling seed (default 42)", NULL},
    {"batch-size",
     O_BATCH,
     SWIFT_ARG_REQUIRED,
     "B",
     "sequences per batch (default 8)",
     "per_device_eval_batch_size"},
    {"max-length",
     O_MAXLEN,
     SWIFT_ARG_REQUIRED,
     "N",
     "longest sequence in tokens (default: the model's max_position_embeddings, at most 4096)",
     NULL},
    {"output", 'o', SWIFT_ARG_REQUIRED, "FILE", "also write the record to FILE (atomically)", NULL},
    {"baseline",
     O_BASELINE,
     SWIFT_ARG_REQUIRED,
     "FILE",
     "exit 1 when a metric is worse than this earlier record",
     NULL},
    {"max-drop",
     O_MAXDROP,
     SWIFT_ARG_REQUIRED,
     "D",
     "tolerated drop: absolute for accuracies, relative for loss and ppl (default 0.01)",
     NULL},
    {"device",
     O_DEVICE,
     SWIFT_ARG_REQUIRED,
     "auto|cpu|cuda[:N]",
     "where the model and its key/value cache run (default auto: the cpu; cuda[:N] opts in to a "
     "GPU)",
     NULL},
    {"quiet", SWIFT_OPT_QUIET, SWIFT_ARG_NONE, NULL, "no table on stderr", NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};

static const struct swift_command command = {
    "swift-eval",
    "[OPTION]... MODEL_DIR --task TASK --dataset PATH",
    "evaluate a model: loss, perplexity, multiple choice, generation",
    options,
    "Prints one JSON record on stdout (schema_version, model, adapters, task, dataset, n,\n"
    "metrics, subjects, config, time_s, tokens, tokens_per_s) and a short table on stderr.\n"
    "Exit status: 0 ok, 1 failure or a regression against --baseline, 2 usage error.",
    "  swift-eval out/ckpt --task mmlu --dataset ../shared/data/datasets/mmlu --few-shot 5\n"
    "  swift-eval out/ckpt --task gsm8k --dataset test.jsonl --limit 100 --max-new-tokens 256\n"
    "  swift-eval base --adapters out/checkpoint-50 --task ppl --dataset shards/val\n"
    "  swift-eval out/ckpt --task mmlu --dataset mmlu --baseline before.json --max-drop 0.01\n"};

#define MAX_DATASETS 64

struct args {
    struct swift_eval_opts o;
    const char *datasets[MAX_DATASETS];
    const char *trace;
    const char *template_name;
};

static int num(const char *name, const char *arg, long min, long max, long *out)
{
    if (swift_parse_long(arg, min, max, out) < 0)
        return swift_usage("invalid --%s '%s' (expected %ld..%ld)", name, arg, min, max);
    return 0;
}

static int real(const char *name, const char *arg, double min, double max, double *out)
{
    if (swift_parse_double(arg, out) < 0 || !(*out >= min && *out <= max))
        return swift_usage("invalid --%s '%s' (expected %g..%g)", name, arg, min, max);
    return 0;
}

static int on_option(void *ctx, int key, const char *arg)
{
    struct args *a = ctx;
    struct swift_eval_opts *o = &a->o;
    long v;
    switch (key) {
    case O_TASK:
        if ((o->task = swift_eval_task_parse(arg)) < 0)
            return swift_usage("unknown task '%s' (loss, ppl, mc, mmlu, gsm8k, exact)", arg);
        return 0;
    case O_DATASET:
        if (o->ndatasets == MAX_DATASETS)
            return swift_usage("more than %d --dataset options", MAX_DATASETS);
        a->datasets[o->ndatasets++] = arg;
        o->dataset = arg;
        o->datasets = a->datasets;
        return 0;
    case O_ADAPTERS:
        o->adapters = arg;
        return 0;
    case O_MERGE:
        o->merge_adapters = 1;
        return 0;
    case O_TEMPLATE:
        a->template_name = arg;
        return 0;
    case O_LIMIT:
        return num("limit", arg, 0, 1L << 40, &o->limit);
    case O_SHOTS:
        if (num("few-shot", arg, 0, 64, &v))
            return 2;
        o->few_shot = (int)v;
        return 0;
    case O_MAXNEW:
        if (num("max-new-tokens", arg, 1, 1 << 20, &v))
            return 2;
        o->max_new_tokens = (int)v;
        return 0;
    case O_TEMP:
        return real("temperature", arg, 0, 100, &o->temperature);
    case O_TOPP:
        return real("top-p", arg, 1e-12, 1, &o->top_p);
    case O_SEED:
        if (num("seed", arg, 0, 0x7fffffffffffffffL, &v))
            return 2;
        o->seed = (uint64_t)v;
        return 0;
    case O_BATCH:
        if (num("batch-size", arg, 1, 4096, &v))
            return 2;
        o->batch_size = (int)v;
        return 0;
    case O_MAXLEN:
        if (num("max-length", arg, 2, 1 << 20, &v))
            return 2;
        o->max_length = (int)v;
        return 0;
    case 'o':
        o->output = arg;
        return 0;
    case O_BASELINE:
        o->baseline = arg;
        return 0;
    case O_MAXDROP:
        return real("max-drop", arg, 0, 1e9, &o->max_drop);
    case SWIFT_OPT_QUIET:
        o->quiet = 1;
        return 0;
    case O_DEVICE:
        o->device = arg;
        return 0;
    case SWIFT_OPT_TRACE:
        a->trace = arg;
        return 0;
    case SWIFT_OPT_PROFILE:
        return 0;
    }
    return swift_usage("unhandled option");
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    struct args a = {0};
    swift_eval_opts_init(&a.o);
    int argi, rc = swift_cli_parse(&command, argc, argv, on_option, &a, &argi);
    if (rc >= 0)
        return swift_close_stdout(rc);
    if (argc - argi != 1)
        return swift_usage(argc - argi ? "one MODEL_DIR expected" : "missing MODEL_DIR");
    a.o.model = argv[argi];
    if (a.o.task < 0)
        return swift_usage("--task is required");
    if (!a.o.dataset)
        return swift_usage("--dataset is required");
    if (a.template_name && !swift_eval_template_known(a.template_name))
        return swift_usage(
            "unknown template '%s' (none, %s)", a.template_name, swift_eval_template_names());
    a.o.template_name = a.template_name;
    struct swift_trace_config tc = {
        .stage = "eval", .path = a.trace, .argc = argc, .argv = argv, .world_size = 1};
    if (swift_trace_open(&tc) < 0)
        return 1;
    rc = swift_eval_run(&a.o);
    swift_trace_close();
    return swift_close_stdout(rc);
}
