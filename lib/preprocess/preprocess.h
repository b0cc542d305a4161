/*
 * preprocess — the body of swift-preprocess: data files -> tokenized, masked, truncated, packed
 * samples -> shard directory (lib/shard), plus the --encode / --decode / --render tools.
 *
 * Pipeline (trace spans in brackets): rows are read in batches [io "read"], each batch is
 * rendered and tokenized over the thread pool, one span per chunk and thread
 * [tokenize "tokenize_batch"]; the results are then taken in input order (so the output is
 * byte-identical for any --threads), truncated, split into train/val with --seed, packed
 * [pack "pack"] and written [io "write_shards"]. A summary goes to stderr and one JSON line to
 * stdout.
 */
#ifndef SWIFT_PREPROCESS_H
#define SWIFT_PREPROCESS_H

enum swift_pp_mode { SWIFT_PP_BUILD, SWIFT_PP_ENCODE, SWIFT_PP_DECODE, SWIFT_PP_RENDER };
enum swift_truncation {
    SWIFT_TRUNC_DELETE,
    SWIFT_TRUNC_LEFT,
    SWIFT_TRUNC_RIGHT,
    SWIFT_TRUNC_SPLIT
};
enum swift_packing { SWIFT_PACK_NONE, SWIFT_PACK_BINPACK, SWIFT_PACK_SEQUENTIAL };

struct swift_preprocess_opts {
    enum swift_pp_mode mode;
    const char *tokenizer;     /* directory (required) */
    const char *template_name; /* NULL: guessed from tokenizer_config.json */
    int agent;                 /* enum swift_agent (agent.h); 0: the template's own format */
    const char *output;        /* shard directory (build mode) */
    char **inputs;             /* data files; none: stdin */
    int ninputs;
    const char *format;  /* auto, jsonl, json, csv, text */
    const char *columns; /* SRC:DST,... */
    const char *system;  /* replaces every sample's system prompt */
    long max_length;
    long max_prompt_length; /* pairs and KTO: longer prompts keep their end (0: no limit) */
    int kind;               /* -1: from the rows; SWIFT_KIND_SFT, _PAIRS, _KTO (dataset.h) */
    int loss;               /* enum swift_loss_policy */
    int truncation;         /* enum swift_truncation */
    int packing;            /* enum swift_packing */
    double val_ratio;
    unsigned long long seed;
    int shuffle;
    int threads; /* 0: all CPUs */
    int skip_invalid;
    int force;
    int raw;          /* encode: no special-token parsing, no post-processor */
    int skip_special; /* decode */
    unsigned long long shard_tokens;
    int progress; /* rows read (building shards): enum swift_progress_mode (0: a terminal) */
    /* images (docs/multimodal.md): Qwen2-VL's smart_resize bounds; 0: 56*56 and 28*28*1280 */
    unsigned long long min_pixels, max_pixels;
};

/* Returns 0, or SWIFT_FAILED after reporting (lib/core/error.h). */
int swift_preprocess_run(const struct swift_preprocess_opts *o);

#endif
