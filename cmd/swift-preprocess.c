/* swift-preprocess — tokenize, template, mask, pack and shard training data (lib/preprocess). */
#include "lib/preprocess/bpe_train.h"
#include "lib/core/cli.h"
#include "lib/core/record.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/preprocess.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/template.h"
#include "lib/core/trace.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

struct cli {
    struct swift_preprocess_opts o;
    const char *trace;
    char **files;
    int nfiles;
    int modes;
    int train_vocab;  /* --train-tokenizer */
    int packing_bare; /* --packing without '=': "--packing sequential" leaves the value as an
                         operand, taken back in main() unless a file has that name */
};
#define F(m) SWIFT_FIELD(struct cli, m)

static int add_file(struct cli *c, const char *f)
{
    char **p = realloc(c->files, (size_t)(c->nfiles + 1) * sizeof(char *));
    if (!p)
        return swift_usage("out of memory");
    c->files = p;
    c->files[c->nfiles++] = (char *)f;
    return 0;
}

static int dataset(const struct swift_option *opt, void *opts, const char *arg)
{
    return add_file(opts, arg);
}

static int template_name(const struct swift_option *opt, void *opts, const char *arg)
{
    if (!swift_template_find(arg))
        return swift_usage("unknown template '%s' (%s)", arg, swift_template_names());
    ((struct cli *)opts)->o.template_name = arg;
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

/* --encode, --decode, --render: the entry's .value is the mode */
static int mode(const struct swift_option *opt, void *opts, const char *arg)
{
    struct cli *c = opts;
    c->o.mode = opt->value;
    c->modes++;
    return 0;
}

static int train_tokenizer(const struct swift_option *opt, void *opts, const char *arg)
{
    struct cli *c = opts;
    long v;
    if (swift_parse_long(arg, 256, 65536, &v) < 0)
        return swift_usage("--train-tokenizer: expected a vocabulary size in [256, 65536], "
                           "got '%s'",
                           arg);
    c->train_vocab = (int)v;
    c->modes++;
    return 0;
}

/* --packing[=HOW]; also called from main() with a bare --packing's value taken back */
static int packing(const struct swift_option *opt, void *opts, const char *arg)
{
    struct cli *c = opts;
    c->packing_bare = !arg;
    if (!arg || !strcmp(arg, "binpack") || !strcmp(arg, "true"))
        c->o.packing = SWIFT_PACK_BINPACK;
    else if (!strcmp(arg, "sequential"))
        c->o.packing = SWIFT_PACK_SEQUENTIAL;
    else if (!strcmp(arg, "none") || !strcmp(arg, "false"))
        c->o.packing = SWIFT_PACK_NONE;
    else
        return swift_usage("--packing: expected binpack or sequential, got '%s'", arg);
    return 0;
}

static const struct swift_option options[] = {
    SWIFT_OPT_PATH(0, "tokenizer", F(o.tokenizer), "DIR",
                   "tokenizer directory (tokenizer.json or encoder.json + vocab.bpe)",
                   .aliases = "model"),
    SWIFT_OPT_PATH('o', "output", F(o.output), "DIR", "write the shard directory DIR",
                   .aliases = "output_dir"),
    SWIFT_OPT_CALLBACK(0, "template", template_name, "NAME",
                       SWIFT_TEMPLATE_NAMES " (default: from the tokenizer)",
                       .values = SWIFT_TEMPLATE_NAMES),
    SWIFT_OPT_CALLBACK(0, "agent-template", agent_name, "NAME",
                       "how tools, tool calls and tool results are written: " SWIFT_AGENT_NAMES
                       " (default: the template's own, hermes for ChatML/Qwen, llama3 for Llama 3)",
                       .aliases = "agent_template", .values = SWIFT_AGENT_NAMES),
    SWIFT_OPT_CALLBACK(0, "dataset", dataset, "FILE", "input file (also as operands)"),
    SWIFT_OPT_CALLBACK(0, "train-tokenizer", train_tokenizer, "VOCAB",
                       "train a byte-level BPE tokenizer of VOCAB tokens on the text FILEs and "
                       "write it to -o DIR"),
    SWIFT_OPT_STRING(0, "format", F(o.format), "FMT", "auto, jsonl, json, csv, text (default auto)",
                     .values = "auto jsonl json csv text"),
    SWIFT_OPT_STRING(0, "columns", F(o.columns), "SRC:DST,...", "rename input columns first"),
    SWIFT_OPT_STRING(0, "system", F(o.system), "TEXT", "system prompt for every sample"),
    SWIFT_OPT_INT(0, "max-length", F(o.max_length), 1, 1L << 30, "N",
                  "longest sample in tokens (default 2048)",
                  .error = "--max-length: expected a positive integer, got '{arg}'"),
    SWIFT_OPT_INT(0, "max-prompt-length", F(o.max_prompt_length), 1, 1L << 30, "N",
                  "pairs, KTO and prompts: a longer prompt keeps its last N tokens (default: no "
                  "limit)",
                  .aliases = "max_prompt_length",
                  .error = "--max-prompt-length: expected a positive integer, got '{arg}'"),
    SWIFT_OPT_ENUM(0, "kind", F(o.kind),
                   SWIFT_CHOICES({"auto", -1}, {"sft", SWIFT_KIND_SFT}, {"pairs", SWIFT_KIND_PAIRS},
                                 {"kto", SWIFT_KIND_KTO}, {"dpo", SWIFT_KIND_PAIRS},
                                 {"orpo", SWIFT_KIND_PAIRS}, {"simpo", SWIFT_KIND_PAIRS},
                                 {"cpo", SWIFT_KIND_PAIRS}, {"rm", SWIFT_KIND_PAIRS},
                                 {"prompts", SWIFT_KIND_PROMPTS}, {"grpo", SWIFT_KIND_PROMPTS}),
                   "KIND",
                   "what the rows are: auto (default: from the first row), sft, pairs "
                   "(chosen/rejected preference pairs; ms-swift's rlhf_type dpo, orpo, simpo, cpo "
                   "and rm mean pairs too), kto (rows with a boolean label), prompts (GRPO's "
                   "prompts ending with a user turn, other columns kept as metadata; = grpo)",
                   .aliases = "rlhf_type",
                   .error = "--kind: expected auto, sft, pairs, kto or prompts, got '{arg}'"),
    SWIFT_OPT_LOOKUP(0, "loss", F(o.loss), swift_loss_parse, "POLICY",
                     "trained tokens: default (assistant turns), last_round, all",
                     .aliases = "loss_scale", .values = "default last_round all",
                     .error = "--loss: expected default, last_round or all, got '{arg}'"),
    SWIFT_OPT_ENUM(0, "truncation", F(o.truncation),
                   SWIFT_CHOICES({"delete", SWIFT_TRUNC_DELETE}, {"left", SWIFT_TRUNC_LEFT},
                                 {"right", SWIFT_TRUNC_RIGHT}, {"split", SWIFT_TRUNC_SPLIT}),
                   "HOW", "longer samples: delete (default), left, right, split",
                   .aliases = "truncation_strategy",
                   .error = "--truncation: expected delete, left, right or split, got '{arg}'"),
    SWIFT_OPT_CALLBACK(0, "packing", packing, "HOW",
                       "pack documents into max-length samples: binpack (default, = true), "
                       "sequential, none (= false); the value may also follow as the next word",
                       .flags = SWIFT_OPT_OPTARG, .values = "binpack sequential none"),
    SWIFT_OPT_DOUBLE(0, "val-ratio", F(o.val_ratio), 0, 1, "R",
                     "fraction of documents for DIR/val (default 0)", .flags = SWIFT_OPT_OPEN_MAX,
                     .aliases = "split_dataset_ratio",
                     .error = "--val-ratio: expected a number in [0, 1), got '{arg}'"),
    SWIFT_OPT_INT(0, "seed", F(o.seed), 0, LONG_MAX, "N",
                  "seed for the split and --shuffle (default 42)", .aliases = "data_seed",
                  .error = "--seed: expected a non-negative integer, got '{arg}'"),
    SWIFT_OPT_FLAG(0, "shuffle", F(o.shuffle), "shuffle document order (deterministic)",
                   .aliases = "dataset_shuffle"),
    SWIFT_OPT_INT(0, "threads", F(o.threads), 0, 4096, "N", "tokenizer threads (default: all CPUs)",
                  .aliases = "dataset_num_proc,num_proc",
                  .error = "--threads: expected an integer in [0, 4096], got '{arg}'"),
    SWIFT_OPT_FLAG(0, "skip-invalid", F(o.skip_invalid),
                   "skip bad rows, count them and report the first positions"),
    SWIFT_OPT_SIZE(0, "shard-tokens", F(o.shard_tokens), 1, "N",
                   "tokens per shard file (default 16M)",
                   .error = "--shard-tokens: expected a positive count, got '{arg}'"),
    SWIFT_OPT_SIZE(0, "min-pixels", F(o.min_pixels), 1, "N",
                   "images: Qwen2-VL's smart_resize lower bound in pixels (default 3136 = 56*56; "
                   "env MIN_PIXELS as in ms-swift)",
                   .aliases = "min_pixels",
                   .error = "--min-pixels: expected a positive count, got '{arg}'"),
    SWIFT_OPT_SIZE(0, "max-pixels", F(o.max_pixels), 1, "N",
                   "images: the upper bound in pixels (default 1003520 = 28*28*1280; env "
                   "MAX_PIXELS)",
                   .aliases = "max_pixels",
                   .error = "--max-pixels: expected a positive count, got '{arg}'"),
    SWIFT_OPT_FLAG(0, "force", F(o.force), "replace an existing output directory"),
    SWIFT_OPT_CALLBACK(
        0, "encode", mode, NULL,
        "read a JSON string or {\"text\": ...} per line, write a JSON array of ids per line",
        .value = SWIFT_PP_ENCODE),
    SWIFT_OPT_CALLBACK(
        0, "decode", mode, NULL,
        "read a JSON array of ids (or {\"ids\": ...}) per line, write a JSON string per line",
        .value = SWIFT_PP_DECODE),
    SWIFT_OPT_CALLBACK(0, "render", mode, NULL,
                       "write {\"text\", \"ids\", \"mask\"} per sample as JSON Lines; with "
                       "--packing one per packed row, with its \"documents\" and \"images\" "
                       "spans",
                       .value = SWIFT_PP_RENDER),
    SWIFT_OPT_FLAG(0, "raw", F(o.raw),
                   "--encode: special-token text is plain text and no BOS/EOS is added"),
    SWIFT_OPT_FLAG(0, "skip-special", F(o.skip_special), "--decode: leave special tokens out"),
    SWIFT_OPT_PROGRESS(F(o.progress)),
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-preprocess",
    .usage = "[OPTION]... --tokenizer DIR (-o DIR | --encode | --decode | --render) [FILE]...",
    .summary = "tokenize, template, mask, pack and shard training data",
    .options = options,
    .description =
        "Reads JSON Lines, JSON arrays, CSV or text files (standard input when no FILE) in "
        "ms-swift's\n"
        "formats (messages, ShareGPT conversations, alpaca, query/response, text) and writes a\n"
        "shard directory for swift-train: index.json and shard-NNNNN.bin (docs/formats.md).\n"
        "Preference pairs (chosen/rejected, rejected_response) and KTO rows (a boolean label)\n"
        "become pair or KTO shards for preference training; --kind prompts makes GRPO's prompt\n"
        "shards (docs/preprocess.md). The same input gives byte-identical shards with any\n"
        "--threads. A summary goes to stderr and one JSON line to stdout.\n"
        "\n"
        "Exit status: 0 ok, 1 bad input or I/O error, 2 usage error.",
    .examples =
        "Examples:\n"
        "  swift-preprocess --tokenizer models/Qwen3-0.6B -o shards alpaca_en.json\n"
        "  swift-preprocess --tokenizer models/Qwen3-0.6B --max-length 4096 --packing binpack "
        "--val-ratio 0.01 \\\n"
        "      -o shards train.jsonl\n"
        "  echo '\"Hello world\"' | swift-preprocess --tokenizer models/Qwen3-0.6B --encode\n"
        "  echo '[9707, 1879]' | swift-preprocess --tokenizer models/Qwen3-0.6B --decode\n"
        "  head -1 train.jsonl | swift-preprocess --tokenizer models/Llama-3 --template llama3 "
        "--render\n"
        "  swift-preprocess --tokenizer models/Llama-3.1-8B-Instruct --agent-template llama3 "
        "-o shards \\\n"
        "      glaive_toolcall_en_demo.json\n"
        "  swift-preprocess --tokenizer models/Qwen3-0.6B --template generation --truncation split "
        "\\\n"
        "      --packing sequential -o pretrain input.txt\n"
        "  swift-preprocess --tokenizer models/Qwen3-0.6B --max-length 1024 --truncation right "
        "-o pairs \\\n"
        "      dpo_en_demo.json\n"
        "  swift-preprocess --tokenizer models/Qwen3-0.6B --kind prompts --max-length 512 -o "
        "prompts gsm8k.jsonl"};

/* A ChatML template (the demo's tokenizer speaks it; swift_template_guess() names it "chatml"). */
static const char chatml_jinja[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>"
    "assistant\\n' }}{% endif %}";

static int run_train_tokenizer(struct cli *c)
{
    static const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL};
    struct swift_bpe_train_opts t = {.vocab_size = c->train_vocab - 3,
                                     .specials = specials,
                                     .chat_template = chatml_jinja,
                                     .eos_token = "<|im_end|>",
                                     .pad_token = "<|endoftext|>"};
    if (t.vocab_size < 256)
        return swift_usage("--train-tokenizer: VOCAB must leave room for 256 bytes and 3 "
                           "special tokens");
    int rc = swift_bpe_train_files((const char *const *)c->files, c->nfiles, c->o.output, &t);
    if (rc < 0)
        return SWIFT_EXIT_FAIL;
    json_t *rec = json_pack(
        "{s:i,s:s,s:i}", "version", 1, "tokenizer", c->o.output, "vocab_size", c->train_vocab);
    swift_record_print(stdout, rec, SWIFT_RECORD_DIGITS);
    json_decref(rec);
    return 0;
}

static int packing_word(const char *s)
{
    static const char *const w[] = {"binpack", "true", "sequential", "none", "false", NULL};
    for (int i = 0; w[i]; i++)
        if (!strcmp(s, w[i]))
            return 1;
    return 0;
}

/* The operands are input files, except a bare --packing's value (unless a file has its name). */
static int take_operands(struct cli *c, int argc, char **argv, int argi)
{
    for (int i = argi; i < argc; i++) {
        if (c->packing_bare && packing_word(argv[i]) && access(argv[i], F_OK) != 0) {
            packing(NULL, c, argv[i]);
            c->packing_bare = 0;
            continue;
        }
        if (add_file(c, argv[i]))
            return SWIFT_EXIT_USAGE;
    }
    return -1;
}

/* The modes exclude each other; -1 when the options fit together. */
static int check_modes(const struct cli *c)
{
    if (!c->o.tokenizer)
        return swift_usage("--tokenizer DIR is required");
    if (c->modes > 1)
        return swift_usage("--encode, --decode and --render exclude each other");
    if (c->o.mode == SWIFT_PP_BUILD && !c->o.output)
        return swift_usage("give -o DIR (or --encode, --decode, --render)");
    if (c->o.mode != SWIFT_PP_BUILD && c->o.output)
        return swift_usage("-o is for building shards, not with --encode/--decode/--render");
    return -1;
}

/* ms-swift reads the image bounds from the environment: MIN_PIXELS / MAX_PIXELS fill
 * --min-pixels / --max-pixels when those are not given. Returns -1, or 2 after a usage error. */
static int env_pixels(unsigned long long *dst, const char *name)
{
    const char *v = getenv(name);
    if (*dst || !v || !*v)
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x == 0 || v[0] == '-')
        return swift_usage("%s: expected a positive count, got '%s'", name, v);
    *dst = x;
    return -1;
}

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct cli c = {.o = {.max_length = 2048, .seed = 42, .shard_tokens = 1ull << 24, .kind = -1}};
    int argi;
    int rc = swift_cli_parse(&command, argc, argv, &c, &argi);
    if (rc >= 0)
        return rc;
    rc = take_operands(&c, argc, argv, argi);
    if (rc < 0 && c.train_vocab) {
        if (c.modes > 1 || !c.o.output || !c.nfiles)
            rc = swift_usage(
                "--train-tokenizer VOCAB takes -o DIR and text FILEs, and no other mode");
        else
            rc = run_train_tokenizer(&c);
        rc = swift_close_stdout(rc);
    }
    if (rc < 0)
        rc = check_modes(&c);
    if (rc < 0)
        rc = env_pixels(&c.o.min_pixels, "MIN_PIXELS");
    if (rc < 0)
        rc = env_pixels(&c.o.max_pixels, "MAX_PIXELS");
    if (rc >= 0) {
        free(c.files);
        return rc;
    }
    c.o.inputs = c.files;
    c.o.ninputs = c.nfiles;
    struct swift_trace_config tc = {
        .stage = "preprocess", .path = c.trace, .world_size = 1, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0) {
        free(c.files);
        return SWIFT_EXIT_FAIL;
    }
    rc = swift_exit_code(swift_preprocess_run(&c.o));
    swift_trace_close();
    free(c.files);
    return swift_close_stdout(rc);
}
