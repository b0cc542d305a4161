/* swift-export: merge LoRA adapters, write llama.cpp GGUF (and an ollama Modelfile), quantize. */
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/export/export.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct cli {
    struct swift_export_opts o;
    const char *trace, *dump;
    long dump_items;
};
#define F(m) SWIFT_FIELD(struct cli, m)

static const struct swift_option options[] = {
    SWIFT_OPT_PATH('o', "output", F(o.output), "PATH",
                   "output: FILE.gguf (--to gguf) or a directory (--to hf)",
                   .aliases = "output_dir"),
    SWIFT_OPT_STRING(0, "to", F(o.to), "gguf|hf",
                     "output format (default: hf with --merge-lora or --quant, else gguf)",
                     .choices = SWIFT_CHOICES({"gguf", 0}, {"hf", 0}),
                     .error = "--to must be gguf or hf, not '{arg}'"),
    SWIFT_OPT_STRING(
        0, "dtype", F(o.dtype), "TYPE",
        "gguf: f32|f16|bf16|q8_0|q4_0|q4_k|q4_k_m|q6_k (f16); hf: bf16|fp16|fp32 (the base's)",
        .aliases = "torch_dtype,quant_type",
        .values = "f32 f16 bf16 q8_0 q4_0 q4_k q4_k_m q6_k fp16 fp32"),
    SWIFT_OPT_FLAG(0, "to-ollama", F(o.to_ollama),
                   "also write NAME.Modelfile for ollama next to NAME.gguf"),
    SWIFT_OPT_PATH(0, "mmproj", F(o.mmproj), "FILE.gguf",
                   "gguf of a Qwen2-VL/Qwen2.5-VL model: also write its vision tower and merger "
                   "as llama.cpp's mmproj file"),
    SWIFT_OPT_PATH(0, "merge-lora", F(o.merge_lora), "ADAPTER_DIR",
                   "merge this PEFT LoRA adapter into the base first", .aliases = "adapters"),
    SWIFT_OPT_STRING(0, "qlora", F(o.qlora), "nf4|fp4|int8",
                     "--merge-lora: the adapter was trained on a quantized base (swift-train "
                     "--quant-bits 4 --quant-type TYPE, or --quant-bits 8: int8): merge onto its "
                     "dequantized linears",
                     .choices = SWIFT_CHOICES({"nf4", 0}, {"fp4", 0}, {"int8", 0}),
                     .error = "--qlora must be nf4, fp4 or int8, not '{arg}'"),
    SWIFT_OPT_FLAG(0, "qlora-double-quant", F(o.qlora_double_quant),
                   "--qlora: the training used --double-quant"),
    SWIFT_OPT_SIZE(0, "max-shard-size", F(o.max_shard_size), 1024, "SIZE",
                   "hf: largest safetensors shard (5G)",
                   .error = "--max-shard-size: bad size '{arg}'"),
    SWIFT_OPT_STRING(0, "quant", F(o.quant), "int8|int4",
                     "weight-only quantization of the linear layers", .aliases = "quant_bits",
                     .choices = SWIFT_CHOICES({"int8", 0}, {"int4", 0}),
                     .error = "--quant must be int8 or int4, not '{arg}'"),
    SWIFT_OPT_INT(0, "group-size", F(o.group_size), 8, 1 << 20, "N",
                  "quant: values per scale group (128)"),
    SWIFT_OPT_STRING(0, "method", F(o.method), "rtn|gptq",
                     "quant: round to nearest, or GPTQ on --calib data (rtn)",
                     .aliases = "quant_method", .choices = SWIFT_CHOICES({"rtn", 0}, {"gptq", 0}),
                     .error = "--method must be rtn or gptq, not '{arg}'"),
    SWIFT_OPT_PATH(0, "calib", F(o.calib), "DIR",
                   "gptq: calibration shards (a swift-preprocess output directory)"),
    SWIFT_OPT_INT(0, "calib-samples", F(o.calib_samples), 1, 1L << 24, "N",
                  "gptq: calibration rows, evenly spaced over the shards (128)",
                  .aliases = "quant_n_samples"),
    SWIFT_OPT_INT(0, "calib-seq-len", F(o.calib_seq_len), 1, 1L << 20, "N",
                  "gptq: tokens per calibration row at most (512)"),
    SWIFT_OPT_DOUBLE(0, "damp", F(o.damp), 0, 10, "F",
                     "gptq: fraction of the mean Hessian diagonal added to it (0.01)",
                     .flags = SWIFT_OPT_OPEN_MIN | SWIFT_OPT_OPEN_MAX, .aliases = "damp_percent",
                     .error = "--damp: bad number '{arg}' (0 < F < 10)"),
    SWIFT_OPT_FLAG(0, "force", F(o.force), "overwrite an existing output"),
    SWIFT_OPT_STRING(
        0, "tokenizer-pre", F(o.tokenizer_pre), "NAME",
        "gguf: tokenizer.ggml.pre (default: from tokenizer.json: gpt-2, llama-bpe, qwen2)"),
    SWIFT_OPT_STRING(0, "name", F(o.name), "NAME",
                     "gguf: general.name (default: the model directory's name)"),
    SWIFT_OPT_PATH(0, "dump", F(dump), "FILE.gguf",
                   "print a GGUF file's keys and tensors (one per line) and exit"),
    SWIFT_OPT_INT(0, "dump-items", F(dump_items), 0, 1L << 40, "N",
                  "--dump: array values shown before a sha256 of the rest (8; 0: all)"),
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-export",
    .usage = "[OPTION]... MODEL_DIR",
    .summary = "merge LoRA adapters, write llama.cpp GGUF, quantize",
    .options = options,
    .description = "MODEL_DIR is a Hugging Face model directory (config.json, safetensors, "
                   "tokenizer.json) of a\n"
                   "llama, qwen2 or qwen3 model, or of a qwen2_vl / qwen2_5_vl vision-language\n"
                   "model. One JSON summary line is printed on stdout (two with --mmproj).",
    .examples =
        "  swift-export Qwen3-0.6B --to gguf --dtype q8_0 -o qwen3.q8_0.gguf\n"
        "  swift-export Qwen3-0.6B --to gguf --dtype q4_k_m --to-ollama -o ollama/qwen3.gguf\n"
        "  swift-export Qwen3-0.6B --merge-lora run/checkpoint-100 --dtype bf16 -o merged/\n"
        "  swift-export Qwen2-VL-2B-Instruct --to gguf --dtype q8_0 -o qwen2vl.gguf --mmproj "
        "mmproj.gguf\n"
        "  swift-export Qwen3-0.6B --quant int4 --method gptq --calib shards/ -o qwen3-gptq-int4/\n"
        "  swift-export --dump qwen3.q8_0.gguf\n",
    .int_error = "--{name}: bad number '{arg}'"};

/* Checks that need several options; -1 when they fit together. */
static int check(const struct cli *c, int noperands)
{
    if (noperands != 1)
        return swift_usage(noperands == 0 ? "missing MODEL_DIR" : "too many arguments");
    if (!c->o.output)
        return swift_usage("missing -o OUTPUT");
    if (!strcmp(c->o.method, "gptq") && !c->o.calib)
        return swift_usage("--method gptq needs --calib DIR (calibration shards)");
    if (!strcmp(c->o.method, "gptq") && !c->o.quant)
        return swift_usage("--method gptq needs --quant int4|int8");
    if (c->o.calib && strcmp(c->o.method, "gptq"))
        return swift_usage("--calib is only read by --method gptq");
    if ((c->o.qlora || c->o.qlora_double_quant) && !c->o.merge_lora)
        return swift_usage("--qlora and --qlora-double-quant describe the base of --merge-lora");
    if (c->o.qlora_double_quant && (!c->o.qlora || !strcmp(c->o.qlora, "int8")))
        return swift_usage("--qlora-double-quant goes with --qlora nf4|fp4");
    int hf = c->o.to ? !strcmp(c->o.to, "hf") : c->o.merge_lora || c->o.quant;
    if (c->o.mmproj && hf)
        return swift_usage("--mmproj goes with --to gguf");
    return -1;
}

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct cli c = {.o = {.group_size = 128,
                          .method = "rtn",
                          .calib_samples = 128,
                          .calib_seq_len = 512,
                          .damp = 0.01},
                    .dump_items = 8};
    int argi, rc = swift_cli_parse(&command, argc, argv, &c, &argi);
    if (rc >= 0)
        return rc;
    if (c.dump) {
        if (argi != argc)
            return swift_usage("--dump takes no MODEL_DIR");
        rc = swift_export_dump(c.dump, stdout, (uint64_t)c.dump_items, 1) < 0 ? 1 : 0;
        return swift_close_stdout(rc);
    }
    if ((rc = check(&c, argc - argi)) >= 0)
        return rc;
    c.o.model_dir = argv[argi];
    struct swift_trace_config tc = {.stage = "export", .path = c.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return 1;
    rc = swift_exit_code(swift_export_run(&c.o));
    swift_trace_close();
    return swift_close_stdout(rc);
}
