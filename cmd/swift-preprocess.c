/* swift-preprocess — tokenize, template, mask, pack and shard training data (lib/preprocess). */
#include "lib/preprocess/bpe_train.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/preprocess/preprocess.h"
#include "lib/preprocess/template.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

enum {
    K_TOKENIZER = SWIFT_OPT_BASE,
    K_TEMPLATE,
    K_MAXLEN,
    K_LOSS,
    K_TRUNC,
    K_PACKING,
    K_VAL,
    K_SEED,
    K_THREADS,
    K_SKIP,
    K_FORCE,
    K_ENCODE,
    K_DECODE,
    K_RENDER,
    K_RAW,
    K_SKIPSP,
    K_SYSTEM,
    K_COLUMNS,
    K_FORMAT,
    K_SHARD,
    K_SHUFFLE,
    K_DATASET,
    K_TRAIN_TOK
};

static const struct swift_option options[] = {
    {"tokenizer",
     K_TOKENIZER,
     SWIFT_ARG_REQUIRED,
     "DIR",
     "tokenizer directory (tokenizer.json or encoder.json + vocab.bpe)",
     "model"},
    {"output", 'o', SWIFT_ARG_REQUIRED, "DIR", "write the shard directory DIR", "output_dir"},
    {"template",
     K_TEMPLATE,
     SWIFT_ARG_REQUIRED,
     "NAME",
     "chatml, qwen, qwen2_5, qwen3, llama3, default, generation (default: from the tokenizer)",
     NULL},
    {"dataset", K_DATASET, SWIFT_ARG_REQUIRED, "FILE", "input file (also as operands)", NULL},
    {"train-tokenizer",
     K_TRAIN_TOK,
     SWIFT_ARG_REQUIRED,
     "VOCAB",
     "train a byte-level BPE tokenizer of VOCAB tokens on the text FILEs and write it to -o DIR",
     NULL},
    {"format",
     K_FORMAT,
     SWIFT_ARG_REQUIRED,
     "FMT",
     "auto, jsonl, json, csv, text (default auto)",
     NULL},
    {"columns", K_COLUMNS, SWIFT_ARG_REQUIRED, "SRC:DST,...", "rename input columns first", NULL},
    {"system", K_SYSTEM, SWIFT_ARG_REQUIRED, "TEXT", "system prompt for every sample", NULL},
    {"max-length",
     K_MAXLEN,
     SWIFT_ARG_REQUIRED,
     "N",
     "longest sample in tokens (default 2048)",
     NULL},
    {"loss",
     K_LOSS,
     SWIFT_ARG_REQUIRED,
     "POLICY",
     "trained tokens: default (assistant turns), last_round, all",
     "loss_scale"},
    {"truncation",
     K_TRUNC,
     SWIFT_ARG_REQUIRED,
     "HOW",
     "longer samples: delete (default), left, right, split",
     "truncation_strategy"},
    {"packing",
     K_PACKING,
     SWIFT_ARG_OPTIONAL,
     "HOW",
     "pack documents into max-length samples: binpack (default, = true), sequential, none "
     "(= false); the value may also follow as the next word",
     NULL},
    {"val-ratio",
     K_VAL,
     SWIFT_ARG_REQUIRED,
     "R",
     "fraction of documents for DIR/val (default 0)",
     "split_dataset_ratio"},
    {"seed",
     K_SEED,
     SWIFT_ARG_REQUIRED,
     "N",
     "seed for the split and --shuffle (default 42)",
     "data_seed"},
    {"shuffle",
     K_SHUFFLE,
     SWIFT_ARG_NONE,
     NULL,
     "shuffle document order (deterministic)",
     "dataset_shuffle"},
    {"threads",
     K_THREADS,
     SWIFT_ARG_REQUIRED,
     "N",
     "tokenizer threads (default: all CPUs)",
     "dataset_num_proc,num_proc"},
    {"skip-invalid",
     K_SKIP,
     SWIFT_ARG_NONE,
     NULL,
     "skip bad rows, count them and report the first positions",
     NULL},
    {"shard-tokens", K_SHARD, SWIFT_ARG_REQUIRED, "N", "tokens per shard file (default 16M)", NULL},
    {"force", K_FORCE, SWIFT_ARG_NONE, NULL, "replace an existing output directory", NULL},
    {"encode",
     K_ENCODE,
     SWIFT_ARG_NONE,
     NULL,
     "read a JSON string or {\"text\": ...} per line, write a JSON array of ids per line",
     NULL},
    {"decode",
     K_DECODE,
     SWIFT_ARG_NONE,
     NULL,
     "read a JSON array of ids (or {\"ids\": ...}) per line, write a JSON string per line",
     NULL},
    {"render",
     K_RENDER,
     SWIFT_ARG_NONE,
     NULL,
     "write {\"text\", \"ids\", \"mask\"} per sample as JSON Lines",
     NULL},
    {"raw",
     K_RAW,
     SWIFT_ARG_NONE,
     NULL,
     "--encode: special-token text is plain text and no BOS/EOS is added",
     NULL},
    {"skip-special", K_SKIPSP, SWIFT_ARG_NONE, NULL, "--decode: leave special tokens out", NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};

static const struct swift_command command = {
    "swift-preprocess",
    "[OPTION]... --tokenizer DIR (-o DIR | --encode | --decode | --render) [FILE]...",
    "tokenize, template, mask, pack and shard training data",
    options,
    "Reads JSON Lines, JSON arrays, CSV or text files (standard input when no FILE) in ms-swift's\n"
    "formats (messages, ShareGPT conversations, alpaca, query/response, text) and writes a\n"
    "shard directory for swift-train: index.json and shard-NNNNN.bin (docs/formats.md). The\n"
    "same input gives byte-identical shards with any --threads. A summary goes to stderr and\n"
    "one JSON line to stdout.\n"
    "\n"
    "Exit status: 0 ok, 1 bad input or I/O error, 2 usage error.",
    "Examples:\n"
    "  swift-preprocess --tokenizer models/Qwen3-0.6B -o shards alpaca_en.json\n"
    "  swift-preprocess --tokenizer models/Qwen3-0.6B --max-length 4096 --packing binpack "
    "--val-ratio 0.01 \\\n"
    "      -o shards train.jsonl\n"
    "  echo '\"Hello world\"' | swift-preprocess --tokenizer models/Qwen3-0.6B --encode\n"
    "  echo '[9707, 1879]' | swift-preprocess --tokenizer models/Qwen3-0.6B --decode\n"
    "  head -1 train.jsonl | swift-preprocess --tokenizer models/Llama-3 --template llama3 "
    "--render\n"
    "  swift-preprocess --tokenizer models/Qwen3-0.6B --template generation --truncation split \\\n"
    "      --packing sequential -o pretrain input.txt"};

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

static int packing_word(const char *s)
{
    static const char *const w[] = {"binpack", "true", "sequential", "none", "false", NULL};
    for (int i = 0; w[i]; i++)
        if (!strcmp(s, w[i]))
            return 1;
    return 0;
}

static int add_file(struct cli *c, const char *f)
{
    char **p = realloc(c->files, (size_t)(c->nfiles + 1) * sizeof(char *));
    if (!p)
        return swift_usage("out of memory");
    c->files = p;
    c->files[c->nfiles++] = (char *)f;
    return 0;
}

static int on_option(void *ctx, int key, const char *arg)
{
    struct cli *c = ctx;
    struct swift_preprocess_opts *o = &c->o;
    long v;
    double d;
    unsigned long long u;
    switch (key) {
    case K_TOKENIZER:
        o->tokenizer = arg;
        break;
    case 'o':
        o->output = arg;
        break;
    case K_TEMPLATE:
        if (!swift_template_find(arg))
            return swift_usage("unknown template '%s' (%s)", arg, swift_template_names());
        o->template_name = arg;
        break;
    case K_DATASET:
        return add_file(c, arg);
    case K_FORMAT:
        o->format = arg;
        break;
    case K_COLUMNS:
        o->columns = arg;
        break;
    case K_SYSTEM:
        o->system = arg;
        break;
    case K_MAXLEN:
        if (swift_parse_long(arg, 1, 1L << 30, &v) < 0)
            return swift_usage("--max-length: expected a positive integer, got '%s'", arg);
        o->max_length = v;
        break;
    case K_LOSS:
        if ((o->loss = swift_loss_parse(arg)) < 0)
            return swift_usage("--loss: expected default, last_round or all, got '%s'", arg);
        break;
    case K_TRUNC:
        if (!strcmp(arg, "delete"))
            o->truncation = SWIFT_TRUNC_DELETE;
        else if (!strcmp(arg, "left"))
            o->truncation = SWIFT_TRUNC_LEFT;
        else if (!strcmp(arg, "right"))
            o->truncation = SWIFT_TRUNC_RIGHT;
        else if (!strcmp(arg, "split"))
            o->truncation = SWIFT_TRUNC_SPLIT;
        else
            return swift_usage("--truncation: expected delete, left, right or split, got '%s'",
                               arg);
        break;
    case K_PACKING:
        c->packing_bare = !arg;
        if (!arg || !strcmp(arg, "binpack") || !strcmp(arg, "true"))
            o->packing = SWIFT_PACK_BINPACK;
        else if (!strcmp(arg, "sequential"))
            o->packing = SWIFT_PACK_SEQUENTIAL;
        else if (!strcmp(arg, "none") || !strcmp(arg, "false"))
            o->packing = SWIFT_PACK_NONE;
        else
            return swift_usage("--packing: expected binpack or sequential, got '%s'", arg);
        break;
    case K_VAL:
        if (swift_parse_double(arg, &d) < 0 || d < 0 || d >= 1)
            return swift_usage("--val-ratio: expected a number in [0, 1), got '%s'", arg);
        o->val_ratio = d;
        break;
    case K_SEED:
        if (swift_parse_long(arg, 0, 0x7fffffffffffffffL, &v) < 0)
            return swift_usage("--seed: expected a non-negative integer, got '%s'", arg);
        o->seed = (unsigned long long)v;
        break;
    case K_SHUFFLE:
        o->shuffle = 1;
        break;
    case K_THREADS:
        if (swift_parse_long(arg, 0, 4096, &v) < 0)
            return swift_usage("--threads: expected an integer in [0, 4096], got '%s'", arg);
        o->threads = (int)v;
        break;
    case K_SKIP:
        o->skip_invalid = 1;
        break;
    case K_SHARD:
        if (swift_parse_size(arg, &u) < 0 || u == 0)
            return swift_usage("--shard-tokens: expected a positive count, got '%s'", arg);
        o->shard_tokens = u;
        break;
    case K_FORCE:
        o->force = 1;
        break;
    case K_ENCODE:
        o->mode = SWIFT_PP_ENCODE;
        c->modes++;
        break;
    case K_DECODE:
        o->mode = SWIFT_PP_DECODE;
        c->modes++;
        break;
    case K_RENDER:
        o->mode = SWIFT_PP_RENDER;
        c->modes++;
        break;
    case K_RAW:
        o->raw = 1;
        break;
    case K_SKIPSP:
        o->skip_special = 1;
        break;
    case K_TRAIN_TOK:
        if (swift_parse_long(arg, 256, 65536, &v) < 0)
            return swift_usage("--train-tokenizer: expected a vocabulary size in [256, 65536], "
                               "got '%s'",
                               arg);
        c->train_vocab = (int)v;
        c->modes++;
        break;
    case SWIFT_OPT_TRACE:
        c->trace = arg;
        break;
    case SWIFT_OPT_PROFILE:
        break; /* accepted for uniformity; preprocess has no steps */
    }
    return 0;
}

/* A ChatML template (the demo's tokenizer speaks it; swift_template_guess() names it "chatml"). */
static const char chatml_jinja[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>"
    "assistant\\n' }}{% endif %}";

static int train_tokenizer(struct cli *c)
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
    swift_json_print_line(stdout, rec);
    json_decref(rec);
    return 0;
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    struct cli c = {.o = {.max_length = 2048, .seed = 42, .shard_tokens = 1ull << 24}};
    int argi;
    int rc = swift_cli_parse(&command, argc, argv, on_option, &c, &argi);
    if (rc >= 0)
        return rc;
    for (int i = argi; i < argc; i++) {
        if (c.packing_bare && packing_word(argv[i]) && access(argv[i], F_OK) != 0) {
            on_option(&c, K_PACKING, argv[i]);
            c.packing_bare = 0;
            continue;
        }
        if (add_file(&c, argv[i]))
            return SWIFT_EXIT_USAGE;
    }
    if (c.train_vocab) {
        if (c.modes > 1 || !c.o.output || !c.nfiles)
            rc = swift_usage(
                "--train-tokenizer VOCAB takes -o DIR and text FILEs, and no other mode");
        else
            rc = train_tokenizer(&c);
        free(c.files);
        return swift_close_stdout(rc);
    }
    if (!c.o.tokenizer)
        rc = swift_usage("--tokenizer DIR is required");
    else if (c.modes > 1)
        rc = swift_usage("--encode, --decode and --render exclude each other");
    else if (c.o.mode == SWIFT_PP_BUILD && !c.o.output)
        rc = swift_usage("give -o DIR (or --encode, --decode, --render)");
    else if (c.o.mode != SWIFT_PP_BUILD && c.o.output)
        rc = swift_usage("-o is for building shards, not with --encode/--decode/--render");
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
    rc = swift_preprocess_run(&c.o);
    swift_trace_close();
    free(c.files);
    return swift_close_stdout(rc);
}
