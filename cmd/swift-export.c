/* swift-export: merge LoRA adapters, write llama.cpp GGUF (and an ollama Modelfile), quantize. */
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum {
    K_TO = SWIFT_OPT_BASE,
    K_DTYPE,
    K_OLLAMA,
    K_MERGE,
    K_SHARD,
    K_QUANT,
    K_GROUP,
    K_METHOD,
    K_CALIB,
    K_CALIB_N,
    K_CALIB_LEN,
    K_DAMP,
    K_FORCE,
    K_PRE,
    K_NAME,
    K_DUMP,
    K_DUMP_ITEMS,
};

static const struct swift_option options[] = {
    {"output",
     'o',
     SWIFT_ARG_REQUIRED,
     "PATH",
     "output: FILE.gguf (--to gguf) or a directory (--to hf)",
     "output_dir"},
    {"to",
     K_TO,
     SWIFT_ARG_REQUIRED,
     "gguf|hf",
     "output format (default: hf with --merge-lora or --quant, else gguf)",
     NULL},
    {"dtype",
     K_DTYPE,
     SWIFT_ARG_REQUIRED,
     "TYPE",
     "gguf: f32|f16|bf16|q8_0|q4_0|q4_k|q4_k_m|q6_k (f16); hf: bf16|fp16|fp32 (the base's)",
     "torch_dtype,quant_type"},
    {"to-ollama",
     K_OLLAMA,
     SWIFT_ARG_NONE,
     NULL,
     "also write a Modelfile for ollama next to the GGUF",
     NULL},
    {"merge-lora",
     K_MERGE,
     SWIFT_ARG_REQUIRED,
     "ADAPTER_DIR",
     "merge this PEFT LoRA adapter into the base first",
     "adapters"},
    {"max-shard-size",
     K_SHARD,
     SWIFT_ARG_REQUIRED,
     "SIZE",
     "hf: largest safetensors shard (5G)",
     NULL},
    {"quant",
     K_QUANT,
     SWIFT_ARG_REQUIRED,
     "int8|int4",
     "weight-only quantization of the linear layers",
     "quant_bits"},
    {"group-size", K_GROUP, SWIFT_ARG_REQUIRED, "N", "quant: values per scale group (128)", NULL},
    {"method",
     K_METHOD,
     SWIFT_ARG_REQUIRED,
     "rtn|gptq",
     "quant: round to nearest, or GPTQ on --calib data (rtn)",
     "quant_method"},
    {"calib",
     K_CALIB,
     SWIFT_ARG_REQUIRED,
     "DIR",
     "gptq: calibration shards (a swift-preprocess output directory)",
     NULL},
    {"calib-samples",
     K_CALIB_N,
     SWIFT_ARG_REQUIRED,
     "N",
     "gptq: calibration rows, evenly spaced over the shards (128)",
     "quant_n_samples"},
    {"calib-seq-len",
     K_CALIB_LEN,
     SWIFT_ARG_REQUIRED,
     "N",
     "gptq: tokens per calibration row at most (512)",
     NULL},
    {"damp",
     K_DAMP,
     SWIFT_ARG_REQUIRED,
     "F",
     "gptq: fraction of the mean Hessian diagonal added to it (0.01)",
     "damp_percent"},
    {"force", K_FORCE, SWIFT_ARG_NONE, NULL, "overwrite an existing output", NULL},
    {"tokenizer-pre",
     K_PRE,
     SWIFT_ARG_REQUIRED,
     "NAME",
     "gguf: tokenizer.ggml.pre (default: from tokenizer.json: gpt-2, llama-bpe, qwen2)",
     NULL},
    {"name",
     K_NAME,
     SWIFT_ARG_REQUIRED,
     "NAME",
     "gguf: general.name (default: the model directory's name)",
     NULL},
    {"dump",
     K_DUMP,
     SWIFT_ARG_REQUIRED,
     "FILE.gguf",
     "print a GGUF file's keys and tensors (one per line) and exit",
     NULL},
    {"dump-items",
     K_DUMP_ITEMS,
     SWIFT_ARG_REQUIRED,
     "N",
     "--dump: array values shown before a sha256 of the rest (8; 0: all)",
     NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};

static const struct swift_command command = {
    "swift-export",
    "[OPTION]... MODEL_DIR",
    "merge LoRA adapters, write llama.cpp GGUF, quantize",
    options,
    "MODEL_DIR is a Hugging Face model directory (config.json, safetensors, tokenizer.json) of a\n"
    "llama, qwen2 or qwen3 model. One JSON summary line is printed on stdout.",
    "  swift-export Qwen3-0.6B --to gguf --dtype q8_0 -o qwen3.q8_0.gguf\n"
    "  swift-export Qwen3-0.6B --to gguf --dtype q4_k_m --to-ollama -o ollama/qwen3.gguf\n"
    "  swift-export Qwen3-0.6B --merge-lora run/checkpoint-100 --dtype bf16 -o merged/\n"
    "  swift-export Qwen3-0.6B --quant int4 --method gptq --calib shards/ -o qwen3-gptq-int4/\n"
    "  swift-export --dump qwen3.q8_0.gguf\n"};

struct cli {
    struct swift_export_opts o;
    const char *trace, *dump;
    long dump_items;
};

static int on_option(void *ctx, int key, const char *arg)
{
    struct cli *c = ctx;
    long n;
    unsigned long long sz;
    switch (key) {
    case 'o':
        c->o.output = arg;
        return 0;
    case K_TO:
        if (strcmp(arg, "gguf") && strcmp(arg, "hf"))
            return swift_usage("--to must be gguf or hf, not '%s'", arg);
        c->o.to = arg;
        return 0;
    case K_DTYPE:
        c->o.dtype = arg;
        return 0;
    case K_OLLAMA:
        c->o.to_ollama = 1;
        return 0;
    case K_MERGE:
        c->o.merge_lora = arg;
        return 0;
    case K_SHARD:
        if (swift_parse_size(arg, &sz) || sz < 1024)
            return swift_usage("--max-shard-size: bad size '%s'", arg);
        c->o.max_shard_size = sz;
        return 0;
    case K_QUANT:
        if (strcmp(arg, "int8") && strcmp(arg, "int4"))
            return swift_usage("--quant must be int8 or int4, not '%s'", arg);
        c->o.quant = arg;
        return 0;
    case K_GROUP:
        if (swift_parse_long(arg, 8, 1 << 20, &n))
            return swift_usage("--group-size: bad number '%s'", arg);
        c->o.group_size = n;
        return 0;
    case K_METHOD:
        if (strcmp(arg, "rtn") && strcmp(arg, "gptq"))
            return swift_usage("--method must be rtn or gptq, not '%s'", arg);
        c->o.method = arg;
        return 0;
    case K_CALIB:
        c->o.calib = arg;
        return 0;
    case K_CALIB_N:
        if (swift_parse_long(arg, 1, 1L << 24, &n))
            return swift_usage("--calib-samples: bad number '%s'", arg);
        c->o.calib_samples = n;
        return 0;
    case K_CALIB_LEN:
        if (swift_parse_long(arg, 1, 1L << 20, &n))
            return swift_usage("--calib-seq-len: bad number '%s'", arg);
        c->o.calib_seq_len = n;
        return 0;
    case K_DAMP: {
        double d;
        if (swift_parse_double(arg, &d) || !(d > 0 && d < 10))
            return swift_usage("--damp: bad number '%s' (0 < F < 10)", arg);
        c->o.damp = d;
        return 0;
    }
    case K_FORCE:
        c->o.force = 1;
        return 0;
    case K_PRE:
        c->o.tokenizer_pre = arg;
        return 0;
    case K_NAME:
        c->o.name = arg;
        return 0;
    case K_DUMP:
        c->dump = arg;
        return 0;
    case K_DUMP_ITEMS:
        if (swift_parse_long(arg, 0, 1L << 40, &n))
            return swift_usage("--dump-items: bad number '%s'", arg);
        c->dump_items = n;
        return 0;
    case SWIFT_OPT_TRACE:
        c->trace = arg;
        return 0;
    case SWIFT_OPT_PROFILE:
        return 0;
    }
    return swift_usage("unhandled option");
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    struct cli c = {.o = {.group_size = 128,
                          .method = "rtn",
                          .calib_samples = 128,
                          .calib_seq_len = 512,
                          .damp = 0.01},
                    .dump_items = 8};
    int argi, rc = swift_cli_parse(&command, argc, argv, on_option, &c, &argi);
    if (rc >= 0)
        return rc;
    if (c.dump) {
        if (argi != argc)
            return swift_usage("--dump takes no MODEL_DIR");
        rc = swift_export_dump(c.dump, stdout, (uint64_t)c.dump_items, 1) < 0 ? 1 : 0;
        return swift_close_stdout(rc);
    }
    if (argc - argi != 1)
        return swift_usage(argc == argi ? "missing MODEL_DIR" : "too many arguments");
    if (!c.o.output)
        return swift_usage("missing -o OUTPUT");
    if (!strcmp(c.o.method, "gptq") && !c.o.calib)
        return swift_usage("--method gptq needs --calib DIR (calibration shards)");
    if (!strcmp(c.o.method, "gptq") && !c.o.quant)
        return swift_usage("--method gptq needs --quant int4|int8");
    if (c.o.calib && strcmp(c.o.method, "gptq"))
        return swift_usage("--calib is only read by --method gptq");
    c.o.model_dir = argv[argi];
    struct swift_trace_config tc = {.stage = "export", .path = c.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return 1;
    rc = swift_export_run(&c.o) < 0 ? SWIFT_EXIT_FAIL : SWIFT_EXIT_OK;
    swift_trace_close();
    return swift_close_stdout(rc);
}
