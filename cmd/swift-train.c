/* swift-train — fine-tune a Llama-family model on token shards (full or LoRA), on the CPU or a GPU
 * (--device). */
#include "lib/train/train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/model/model.h"
#include "lib/model/model_init.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/train/optim.h"
#include "lib/train/grpo_loss.h"
#include "lib/train/pref_loss.h"
#include "lib/core/banned.h"

struct cli {
    struct swift_train_opts o;
    int init_model;
    int quant_method; /* --quant-method bnb: ms-swift's, the only one */
    char names[1024]; /* --reward-funcs' words, NUL-separated */
    size_t names_used;
};
#define F(m) SWIFT_FIELD(struct cli, m)

/* --num-workers, --prefetch: an integer >= 1, capped at the entry's .value */
static int capped(const struct swift_option *opt, void *opts, const char *arg)
{
    long l;
    if (swift_parse_long(arg, 1, 1L << 40, &l) < 0)
        return swift_usage("--%s: '%s' is not an integer >= 1", opt->name, arg);
    *(int *)swift_option_field(opt, opts) = (int)(l < opt->value ? l : opt->value);
    return 0;
}

/* --loss-type: a preference objective's (lib/train/pref_loss.h) or GRPO's (grpo_loss.h) */
static int loss_type(const struct swift_option *opt, void *opts, const char *arg)
{
    (void)opt;
    struct swift_train_opts *o = &((struct cli *)opts)->o;
    int v = swift_pref_loss_parse(arg);
    if (v >= 0) {
        o->loss_type = v;
        o->grpo_loss_type = -2; /* given, but not one of GRPO's */
        return 0;
    }
    if ((v = swift_grpo_loss_parse(arg)) >= 0) {
        o->grpo_loss_type = v;
        o->loss_type = -2; /* given, but not a preference loss */
        return 0;
    }
    return swift_usage("--loss-type: '%s' is not sigmoid, hinge, ipo, robust, simpo, kto, "
                       "apo_zero_unpaired, grpo, bnpo, dr_grpo or dapo",
                       arg);
}

/* --reward-funcs NAME[,NAME...] (repeatable; ms-swift's --reward_funcs A B) and --reward-cmd */
static int reward_list(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_train_opts *o = &((struct cli *)opts)->o;
    if (opt->value) { /* --reward-cmd: one program */
        if (o->nreward_cmds >= 16)
            return swift_usage("at most 16 --reward-cmd programs");
        if (!*arg)
            return swift_usage("--reward-cmd: an empty command");
        o->reward_cmds[o->nreward_cmds++] = arg;
        return 0;
    }
    struct cli *c = opts;
    size_t n = strlen(arg) + 1;
    if (c->names_used + n > sizeof(c->names))
        return swift_usage("--reward-funcs: too long");
    char *w = c->names + c->names_used;
    memcpy(w, arg, n);
    c->names_used += n;
    for (char *p = w; *p;) { /* words between commas and blanks */
        while (*p == ',' || *p == ' ')
            *p++ = 0;
        if (!*p)
            break;
        if (o->nreward_funcs >= 16)
            return swift_usage("at most 16 --reward-funcs");
        o->reward_funcs[o->nreward_funcs++] = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
    }
    return 0;
}

/* --scale-rewards group|batch|none (true = group, false = none, as TRL) */
static int scale_rewards(const struct swift_option *opt, void *opts, const char *arg)
{
    (void)opt;
    int v = swift_grpo_scale_parse(arg);
    if (v < 0)
        return swift_usage("--scale-rewards: '%s' is not group, batch or none", arg);
    ((struct cli *)opts)->o.scale_rewards = v;
    return 0;
}

/* --rank-delay-ms R:MS */
static int rank_delay(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_train_opts *o = &((struct cli *)opts)->o;
    const char *colon = strchr(arg, ':');
    long rk, ms;
    char rb[32];
    if (!colon || (size_t)(colon - arg) >= sizeof(rb))
        return swift_usage("--rank-delay-ms: '%s' is not RANK:MS", arg);
    memcpy(rb, arg, (size_t)(colon - arg));
    rb[colon - arg] = 0;
    if (swift_parse_long(rb, 0, 1 << 20, &rk) < 0 ||
        swift_parse_long(colon + 1, 0, 3600000, &ms) < 0)
        return swift_usage("--rank-delay-ms: '%s' is not RANK:MS", arg);
    o->delay_rank = (int)rk;
    o->delay_rank_ms = ms;
    return 0;
}

#define BIG (1L << 40)
static const struct swift_option opts[] = {
    SWIFT_OPT_PATH(0, "model", F(o.model), "DIR", "model directory (config.json, *.safetensors)"),
    SWIFT_OPT_FLAG(
        0, "init-model", F(init_model),
        "write a model with random weights from --model's config.json to -o DIR and exit"),
    SWIFT_OPT_FLAG(0, "force", F(o.force),
                   "replace the run in -o DIR (only files a run writes; anything else is "
                   "refused); --init-model: the model in DIR"),
    SWIFT_OPT_CALLBACK(0, "num-workers", capped, "N",
                       "threads preparing batches from the shards (default 1)", F(o.num_workers),
                       .value = 256, .aliases = "dataloader_num_workers"),
    SWIFT_OPT_CALLBACK(0, "prefetch", capped, "N",
                       "steps prepared ahead of the trainer (default 3, at least num-workers + 1)",
                       F(o.prefetch), .value = 1024, .aliases = "dataloader_prefetch_factor"),
    SWIFT_OPT_PATH('o', "output-dir", F(o.output_dir), "DIR",
                   "run directory (args.json, logging.jsonl, checkpoint-N/); must be new or "
                   "empty unless --resume, --add-version or --force"),
    SWIFT_OPT_FLAG(0, "add-version", F(o.add_version),
                   "run in a new DIR/v<N>-<YYYYMMDD-HHMMSS> (ms-swift's layout; with --resume "
                   "latest: the newest one)",
                   .aliases = "add_version"),
    SWIFT_OPT_PATH(0, "val-dataset", F(o.val_dataset), "DIR",
                   "validation shards (default SHARD_DIR/val if present)"),
    SWIFT_OPT_STRING(0, "resume", F(o.resume), "CKPT|latest",
                     "continue exactly from a checkpoint directory",
                     .aliases = "resume_from_checkpoint"),
    SWIFT_OPT_ENUM(0, "tuner", F(o.tuner),
                   SWIFT_CHOICES({"full", SWIFT_TUNER_FULL}, {"lora", SWIFT_TUNER_LORA}),
                   "full|lora", "what to train (default lora)", .aliases = "train_type,tuner_type",
                   .error = "--tuner: '{arg}' is not full or lora"),
    SWIFT_OPT_INT(0, "lora-rank", F(o.lora_rank), 1, BIG, "N", "LoRA rank (default 8)"),
    SWIFT_OPT_NUMBER(0, "lora-alpha", F(o.lora_alpha), "X", "LoRA alpha (default 32)"),
    SWIFT_OPT_NUMBER(0, "lora-dropout", F(o.lora_dropout), "P", "LoRA dropout (default 0.05)"),
    SWIFT_OPT_FLAG(0, "lora-dora", F(o.lora_dora),
                   "DoRA: a trained magnitude per output row (PEFT use_dora)",
                   .aliases = "use_dora"),
    SWIFT_OPT_STRING(0, "target-modules", F(o.target_modules), "LIST",
                     "all-linear (default) or q_proj,v_proj,..."),
    /* Qwen2-VL / Qwen2.5-VL (docs/multimodal.md "Training"): ms-swift's freeze_* and *_lr */
    SWIFT_OPT_ENUM(0, "freeze-vit", F(o.freeze_vit), SWIFT_CHOICES({"true", 1}, {"false", 0}),
                   "true|false",
                   "vision-language model: keep the vision tower frozen (default true; false: "
                   "trained in full)",
                   .aliases = "freeze_vit", .error = "--freeze-vit: '{arg}' is not true or false"),
    SWIFT_OPT_ENUM(0, "freeze-aligner", F(o.freeze_aligner),
                   SWIFT_CHOICES({"true", 1}, {"false", 0}), "true|false",
                   "vision-language model: keep the patch merger frozen (default true; false: "
                   "trained in full)",
                   .aliases = "freeze_aligner",
                   .error = "--freeze-aligner: '{arg}' is not true or false"),
    SWIFT_OPT_ENUM(0, "freeze-llm", F(o.freeze_llm), SWIFT_CHOICES({"true", 1}, {"false", 0}),
                   "true|false",
                   "vision-language model: keep the language model frozen (default false; true "
                   "needs --tuner full)",
                   .aliases = "freeze_llm", .error = "--freeze-llm: '{arg}' is not true or false"),
    SWIFT_OPT_DOUBLE(0, "vit-lr", F(o.vit_lr), 0, HUGE_VAL, "LR",
                     "vision-language model: the vision tower's learning rate (default "
                     "--learning-rate; needs --freeze-vit false)",
                     .aliases = "vit_lr", .range_error = "--vit-lr must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "aligner-lr", F(o.aligner_lr), 0, HUGE_VAL, "LR",
                     "vision-language model: the patch merger's learning rate (default "
                     "--learning-rate; needs --freeze-aligner false)",
                     .aliases = "aligner_lr", .range_error = "--aligner-lr must be >= 0"),
    /* GaLore (lib/train/galore.h, docs/train.md "GaLore") */
    SWIFT_OPT_FLAG(0, "use-galore", F(o.use_galore),
                   "GaLore: AdamW in a low-rank gradient projection for the attention and MLP "
                   "weights (--tuner full; rank 128 unless --galore-rank)"),
    SWIFT_OPT_INT(0, "galore-rank", F(o.galore_rank), 1, BIG, "R",
                  "GaLore's projection rank (turns GaLore on; default 128)"),
    SWIFT_OPT_INT(0, "galore-update-proj-gap", F(o.galore_gap), 1, BIG, "N",
                  "GaLore: refresh the projection from the gradient's SVD every N steps "
                  "(default 50)"),
    SWIFT_OPT_DOUBLE(0, "galore-scale", F(o.galore_scale), 0, HUGE_VAL, "S",
                     "GaLore: scale of the projected-back update (default 1.0)"),
    SWIFT_OPT_STRING(0, "galore-target-modules", F(o.galore_targets), "LIST",
                     "GaLore's weights: all-linear (default: q/k/v/o/gate/up/down) or "
                     "q_proj,v_proj,..."),
    SWIFT_OPT_FLAG(0, "galore-optim-per-parameter", F(o.galore_per_param),
                   "GaLore: update each weight during backward as soon as its gradient is "
                   "final, one gradient buffer shared by them (no clipping, accumulation 1, "
                   "one process)"),
    /* QLoRA (docs/train.md "QLoRA"): ms-swift's --quant_method bnb --quant_bits 4
     * --bnb_4bit_quant_type nf4 --bnb_4bit_use_double_quant true */
    SWIFT_OPT_ENUM(0, "quant-bits", F(o.quant_bits), SWIFT_CHOICES({"4", 4}, {"8", 8}), "4|8",
                   "QLoRA: store the frozen base linears in 4 bits (nf4/fp4 blocks) or 8 (int8 "
                   "rows, LLM.int8's weights), bitsandbytes' layouts, LoRA on top (needs --tuner "
                   "lora; CPU)",
                   .error = "--quant-bits: '{arg}' is not 4 or 8"),
    SWIFT_OPT_ENUM(0, "quant-type", F(o.quant_type),
                   SWIFT_CHOICES({"nf4", SWIFT_Q4_NF4}, {"fp4", SWIFT_Q4_FP4}), "nf4|fp4",
                   "--quant-bits 4: the 4-bit code (default nf4)", .aliases = "bnb_4bit_quant_type",
                   .error = "--quant-type: '{arg}' is not nf4 or fp4"),
    SWIFT_OPT_FLAG(0, "double-quant", F(o.double_quant),
                   "--quant-bits 4: quantize the block scales too (8 bits in blocks of 256)"),
    SWIFT_OPT_ENUM(0, "bnb-4bit-use-double-quant", F(o.double_quant),
                   SWIFT_CHOICES({"true", 1}, {"false", 0}), "true|false",
                   "ms-swift's spelling of --double-quant",
                   .error = "--bnb-4bit-use-double-quant: '{arg}' is not true or false"),
    SWIFT_OPT_ENUM(0, "quant-method", F(quant_method), SWIFT_CHOICES({"bnb", 1}), "bnb",
                   "ms-swift's quantizer of --quant-bits: bnb (bitsandbytes' layout) only",
                   .error = "--quant-method: '{arg}' is not bnb (the only one)"),
    SWIFT_OPT_NUMBER(0, "learning-rate", F(o.learning_rate), "LR",
                     "peak learning rate (default 1e-4 LoRA, 1e-5 full)"),
    SWIFT_OPT_NUMBER(0, "weight-decay", F(o.weight_decay), "X", "AdamW weight decay (default 0.1)"),
    SWIFT_OPT_ENUM(0, "optim", F(o.optim),
                   SWIFT_CHOICES({"adamw_torch", SWIFT_OPTIM_ADAMW},
                                 {"adamw_8bit", SWIFT_OPTIM_ADAMW_8BIT},
                                 {"adamw_bnb_8bit", SWIFT_OPTIM_ADAMW_8BIT}),
                   "NAME",
                   "adamw_torch (default) or adamw_8bit: bitsandbytes' 8-bit AdamW, moments in "
                   "uint8 blocks of 256 (also adamw_bnb_8bit)",
                   .error = "--optim: '{arg}' is not adamw_torch, adamw_8bit or adamw_bnb_8bit"),
    SWIFT_OPT_NUMBER(0, "adam-beta1", F(o.adam_beta1), "X", "default 0.9"),
    SWIFT_OPT_NUMBER(0, "adam-beta2", F(o.adam_beta2), "X", "default 0.95"),
    SWIFT_OPT_NUMBER(0, "adam-epsilon", F(o.adam_epsilon), "X", "default 1e-8"),
    SWIFT_OPT_NUMBER(0, "max-grad-norm", F(o.max_grad_norm), "X",
                     "clip gradients to this norm (default 1; 0 = off, the default with "
                     "--galore-optim-per-parameter)"),
    SWIFT_OPT_NUMBER(0, "warmup-ratio", F(o.warmup_ratio), "X",
                     "fraction of steps warming up (default 0)"),
    SWIFT_OPT_INT(0, "warmup-steps", F(o.warmup_steps), 0, BIG, "N",
                  "warmup steps (overrides the ratio)"),
    SWIFT_OPT_LOOKUP(0, "lr-scheduler-type", F(o.lr_scheduler), swift_sched_parse, "NAME",
                     "cosine (default), linear, constant", .values = "cosine linear constant",
                     .error = "--lr-scheduler-type: '{arg}' is not cosine, linear or constant"),
    SWIFT_OPT_INT(0, "per-device-train-batch-size", F(o.batch_size), 1, BIG, "N",
                  "samples per micro-batch (default 1)", .aliases = "batch_size,micro_batch_size"),
    SWIFT_OPT_INT(0, "gradient-accumulation-steps", F(o.grad_accum), 1, BIG, "N",
                  "micro-batches per step (default 1)"),
    SWIFT_OPT_INT(0, "max-length", F(o.max_length), 1, BIG, "N",
                  "sequence length (default: the shards' max_length)"),
    SWIFT_OPT_NUMBER(0, "num-train-epochs", F(o.num_train_epochs), "X", "epochs (default 1)"),
    SWIFT_OPT_INT(0, "max-steps", F(o.max_steps), 0, BIG, "N",
                  "optimizer steps (overrides epochs)"),
    SWIFT_OPT_INT(0, "seed", F(o.seed), 0, BIG, "N",
                  "data order, LoRA init and dropout (default 42)", .aliases = "data_seed"),
    SWIFT_OPT_INT(0, "save-steps", F(o.save_steps), 0, BIG, "N",
                  "checkpoint every N steps (default 500)"),
    SWIFT_OPT_INT(0, "save-total-limit", F(o.save_total_limit), 0, BIG, "N",
                  "keep the newest N checkpoints"),
    SWIFT_OPT_INT(0, "eval-steps", F(o.eval_steps), 0, BIG, "N",
                  "validation loss every N steps (default save-steps)"),
    SWIFT_OPT_INT(0, "logging-steps", F(o.logging_steps), 1, BIG, "N",
                  "a logging.jsonl record every N steps (default 5)"),
    SWIFT_OPT_FLAG(0, "gradient-checkpointing", F(o.gradient_checkpointing),
                   "recompute activations in backward (less memory, ~1/3 more compute)",
                   .aliases = "activation_checkpointing"),
    SWIFT_OPT_STRING(
        0, "rlhf", F(o.rlhf), "dpo|orpo|simpo|cpo|kto|rm|grpo",
        "preference training on pair (kto: labelled) shards instead of SFT; rm: a reward model "
        "(docs/preference.md); grpo: online RL on prompt shards (docs/grpo.md)",
        .aliases = "rlhf_type"),
    SWIFT_OPT_DOUBLE(0, "beta", F(o.beta), 0, HUGE_VAL, "X",
                     "--rlhf: temperature of the preference loss (default 0.1; simpo 2.0); "
                     "grpo: weight of the KL term (default 0: no reference model)",
                     .range_error = "--beta must be >= 0"),
    SWIFT_OPT_CALLBACK(0, "loss-type", loss_type, "NAME",
                       "--rlhf dpo: sigmoid (default), hinge, ipo, robust; cpo: sigmoid, hinge, "
                       "ipo, simpo (simpo's default); kto: kto (default), apo_zero_unpaired; "
                       "grpo: dapo (default), grpo, bnpo, dr_grpo",
                       .values = "sigmoid hinge ipo robust simpo kto apo_zero_unpaired grpo bnpo "
                                 "dr_grpo dapo"),
    SWIFT_OPT_INT(0, "num-generations", F(o.num_generations), 2, BIG, "G",
                  "--rlhf grpo: completions sampled per prompt, a group (default 8)"),
    SWIFT_OPT_INT(0, "max-completion-length", F(o.max_completion_length), 1, BIG, "N",
                  "--rlhf grpo: tokens a completion may have (default 256)"),
    SWIFT_OPT_DOUBLE(0, "temperature", F(o.temperature), 0, HUGE_VAL, "T",
                     "--rlhf grpo: sampling temperature (default 1)", .flags = SWIFT_OPT_OPEN_MIN,
                     .range_error = "--temperature must be > 0"),
    SWIFT_OPT_DOUBLE(0, "top-p", F(o.top_p), 0, 1, "P",
                     "--rlhf grpo: nucleus sampling (default 1: off)", .flags = SWIFT_OPT_OPEN_MIN,
                     .range_error = "--top-p must be in (0, 1]"),
    SWIFT_OPT_DOUBLE(0, "epsilon", F(o.epsilon), 0, HUGE_VAL, "X",
                     "--rlhf grpo: the ratio is clipped to [1 - X, 1 + epsilon-high] "
                     "(default 0.2)",
                     .range_error = "--epsilon must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "epsilon-high", F(o.epsilon_high), 0, HUGE_VAL, "X",
                     "--rlhf grpo: upper clip (default: --epsilon; DAPO uses 0.28)",
                     .range_error = "--epsilon-high must be >= 0"),
    SWIFT_OPT_INT(0, "num-iterations", F(o.num_iterations), 1, BIG, "MU",
                  "--rlhf grpo: optimizer steps on each generation batch (default 1)"),
    SWIFT_OPT_CALLBACK(0, "scale-rewards", scale_rewards, "HOW",
                       "--rlhf grpo: divide advantages by the std of the group (default), the "
                       "batch, or none",
                       .values = "group batch none"),
    SWIFT_OPT_CALLBACK(0, "reward-funcs", reward_list, "LIST",
                       "--rlhf grpo: built-in rewards accuracy, format, length (comma-separated "
                       "or repeated)",
                       .values = "accuracy format length", .aliases = "reward_func"),
    SWIFT_OPT_CALLBACK(0, "reward-cmd", reward_list, "'PROG ARGS'",
                       "--rlhf grpo: a reward program: JSON rows in, one number per line out "
                       "(repeatable; docs/grpo.md)",
                       .value = 1),
    SWIFT_OPT_PATH(0, "reward-model", F(o.reward_model), "DIR",
                   "--rlhf grpo: a reward model (--rlhf rm, full) scoring each completion, "
                   "after the other rewards"),
    SWIFT_OPT_STRING(0, "reward-weights", F(o.reward_weights), "LIST",
                     "--rlhf grpo: one weight per reward: funcs, programs, then the reward model "
                     "(default 1 each)"),
    SWIFT_OPT_STRING(0, "format-pattern", F(o.format_pattern), "REGEX",
                     "--rlhf grpo: the format reward's pattern (PCRE2, anchored at the start; "
                     "default ms-swift's <think>...</think><answer>...</answer>)"),
    SWIFT_OPT_DOUBLE(0, "reward-timeout", F(o.reward_timeout), 0, HUGE_VAL, "SEC",
                     "--rlhf grpo: fail when a reward program is silent SEC (default 60)",
                     .flags = SWIFT_OPT_OPEN_MIN, .range_error = "--reward-timeout must be > 0"),
    SWIFT_OPT_INT(0, "soft-cache-length", F(o.soft_cache_length), 1, BIG, "N",
                  "--rlhf grpo: the length reward's penalty ramp (default max-completion-length "
                  "/ 4)"),
    SWIFT_OPT_DOUBLE(0, "label-smoothing", F(o.label_smoothing), 0, 0.5, "X",
                     "--rlhf: probability that a pair's labels are flipped (cDPO, robust; "
                     "default 0)",
                     .flags = SWIFT_OPT_OPEN_MAX,
                     .range_error = "--label-smoothing must be in [0, 0.5)"),
    SWIFT_OPT_DOUBLE(0, "rpo-alpha", F(o.rpo_alpha), 0, HUGE_VAL, "X",
                     "--rlhf dpo: weight of the NLL of the chosen responses (RPO; default 0)",
                     .range_error = "--rpo-alpha must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "simpo-gamma", F(o.simpo_gamma), 0, HUGE_VAL, "X",
                     "--rlhf simpo: target reward margin (default 0.5)",
                     .range_error = "--simpo-gamma must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "cpo-alpha", F(o.cpo_alpha), 0, HUGE_VAL, "X",
                     "--rlhf cpo|simpo: weight of the NLL of the chosen responses (default 1)",
                     .range_error = "--cpo-alpha must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "center-rewards-coefficient", F(o.center_rewards_coefficient), 0, HUGE_VAL,
                     "X",
                     "--rlhf rm: weight of the mean squared sum of a pair's scores (TRL's; "
                     "default 0: off)",
                     .range_error = "--center-rewards-coefficient must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "desirable-weight", F(o.desirable_weight), 0, HUGE_VAL, "X",
                     "--rlhf kto: weight of the desirable samples' losses (default 1)",
                     .range_error = "--desirable-weight must be >= 0"),
    SWIFT_OPT_DOUBLE(0, "undesirable-weight", F(o.undesirable_weight), 0, HUGE_VAL, "X",
                     "--rlhf kto: weight of the undesirable samples' losses (default 1)",
                     .range_error = "--undesirable-weight must be >= 0"),
    SWIFT_OPT_FLAG(0, "precompute-ref-logps", F(o.precompute_ref_logps),
                   "--rlhf dpo: the reference's log-probs once before training, stored next to "
                   "the shards and reused (no reference model during steps)",
                   .aliases = "precompute_ref_log_probs"),
    SWIFT_OPT_ENUM(
        0, "torch-dtype", F(o.torch_dtype),
        SWIFT_CHOICES({"float32", SWIFT_MATH_FP32}, {"bfloat16", SWIFT_MATH_BF16}, {"float16", 2}),
        "bfloat16|float16|float32",
        "the matmuls' dtype (ms-swift's --torch_dtype): bfloat16 runs them in bf16 "
        "with fp32 accumulation, fp32 master weights (torch autocast); default: the "
        "checkpoint's dtype on the CPU (float16 and none: float32), float32 on a GPU",
        .error = "--torch-dtype: '{arg}' is not bfloat16, float16 or float32"),
    SWIFT_OPT_STRING(0, "device", F(o.device), "auto|cpu|cuda[:N]",
                     "where the model runs (default auto: a GPU when there is one)"),
    SWIFT_OPT_INT('j', "threads", F(o.threads), 1, BIG, "N", "CPU threads (default all)"),
    SWIFT_OPT_NUMBER(0, "peak-gflops", F(o.peak_gflops), "X",
                     "peak FLOP rate for MFU (default: measured sgemm)"),
    SWIFT_OPT_DOUBLE(
        0, "dist-timeout", F(o.dist_timeout), 0, HUGE_VAL, "SEC",
        "under mpirun/srun: fail naming a rank that does not reach a step within SEC (default 300)",
        .flags = SWIFT_OPT_OPEN_MIN, .range_error = "--dist-timeout must be > 0",
        .aliases = "ddp_timeout"),
    SWIFT_OPT_ENUM(0, "zero", F(o.zero), SWIFT_CHOICES({"0", 0}, {"1", 1}), "0|1",
                   "1: shard the optimizer state over ranks (ZeRO-1; default 0)",
                   .error = "--zero: '{arg}' is not 0 or 1"),
    SWIFT_OPT_CALLBACK(0, "rank-delay-ms", rank_delay, "R:MS",
                       "testing only: rank R sleeps MS per step (a straggler)"),
    SWIFT_OPT_INT(0, "data-delay-ms", F(o.data_delay_ms), 0, BIG, "MS",
                  "testing only: slow the data path by MS per step"),
    SWIFT_OPT_PROGRESS(F(o.progress)),
    SWIFT_OPT_TRACE(F(o.trace)),
    SWIFT_OPT_PROFILE(F(o.profile)),
    SWIFT_OPT_END};
static const struct swift_command cmd = {
    .name = "swift-train",
    .usage = "[OPTION]... --model DIR -o RUN_DIR SHARD_DIR",
    .summary = "fine-tune a Llama/Qwen model on token shards (full or LoRA)",
    .options = opts,
    .description =
        "Exit status: 0 done, 1 failed (bad input, NaN loss, -o DIR holds another run), 2 usage,\n"
        "75 checkpointed after SIGTERM/SIGUSR1 or a first Ctrl-C (SIGINT; resume with --resume\n"
        "latest); a second Ctrl-C stops at once without a checkpoint (130).",
    .examples =
        "  swift-train --model models/Qwen2.5-0.5B -o runs/a --tuner lora shards/\n"
        "  swift-train train.yaml --max-steps 100\n"
        "  swift-train --model M -o runs/a --resume latest shards/\n"
        "  swift-train --model M -o runs --add-version shards/   (runs/v0-20250101-120000)\n"
        "  swift-train --model M -o runs/dpo --rlhf dpo --beta 0.1 pairs/   (preference pairs)\n"
        "  mpirun -np 4 swift-train --model M -o runs/a --zero 1 shards/   (data parallel)\n"
        "  srun --mpi=pmix swift-train train.yaml\n",
    .int_error = "--{name}: '{arg}' is not an integer >= {min}",
    .number_error = "--{name}: '{arg}' is not a number"};

/* --init-model: write a randomly initialised model from --model's config.json to -o DIR. */
static int init_model(const struct cli *c, int noperands)
{
    if (!c->o.model || !c->o.output_dir || noperands)
        return swift_usage("--init-model takes --model CONFIG_DIR and -o DIR, no SHARD_DIR");
    if (c->o.add_version || c->o.resume)
        return swift_usage("--init-model writes one model directory: no --add-version, --resume");
    int rc = swift_model_init_dir(
        c->o.model, c->o.output_dir, (unsigned long long)c->o.seed, c->o.force);
    if (rc == 0)
        printf("{\"version\":1,\"event\":\"init_model\",\"seed\":%ld}\n", c->o.seed);
    return swift_close_stdout(rc < 0 ? SWIFT_EXIT_FAIL : 0);
}

/* --quant-bits 4|8 trains LoRA on a frozen base; its companions need it (--quant-type and
 * --double-quant: 4 bits only). 0 or the usage exit. */
static int check_quant(struct cli *c)
{
    struct swift_train_opts *o = &c->o;
    if (!o->quant_bits && (o->quant_type >= 0 || o->double_quant >= 0 || c->quant_method))
        return swift_usage(
            "--quant-type, --double-quant and --quant-method go with --quant-bits 4");
    if (o->quant_bits && o->tuner != SWIFT_TUNER_LORA)
        return swift_usage("--quant-bits %d freezes the base: it needs --tuner lora (QLoRA)",
                           o->quant_bits);
    if (o->quant_bits == 8 && (o->quant_type >= 0 || o->double_quant > 0))
        return swift_usage("--quant-type and --double-quant describe 4-bit bases, not "
                           "--quant-bits 8");
    o->quant_type = o->quant_type < 0 ? SWIFT_Q4_NF4 : o->quant_type;
    o->double_quant = o->double_quant > 0;
    return 0;
}

/* The ranks and the device first: this rank's trace needs them. */
static int train(const struct swift_train_opts *o)
{
    int st;
    struct swift_train *t = swift_train_new(o, &st);
    if (!t)
        return st;
    struct swift_trace_config tc;
    swift_train_trace_config(t, &tc);
    st = swift_trace_open(&tc) < 0 ? SWIFT_FAILED : swift_train_run(t);
    st = swift_train_free(t, st);
    swift_trace_close();
    return st;
}

/* --galore-optim-per-parameter's restrictions (lib/train/layerwise.c); --max-grad-norm's default
 * (1, or 0 with it) */
static int check_per_param(struct swift_train_opts *o)
{
    int given = !isnan(o->max_grad_norm);
    if (!given)
        o->max_grad_norm = o->galore_per_param ? 0.0 : 1.0;
    if (!o->galore_per_param)
        return 0;
    if (!o->galore_rank)
        return swift_usage("--galore-optim-per-parameter needs GaLore (--use-galore or "
                           "--galore-rank)");
    if (o->grad_accum != 1)
        return swift_usage("--galore-optim-per-parameter: gradient accumulation is not "
                           "supported (a weight is updated as soon as its gradient is final); "
                           "use --gradient-accumulation-steps 1");
    if (o->max_grad_norm > 0)
        return swift_usage("--galore-optim-per-parameter: no global gradient clipping (the "
                           "norm is known only after the weights are updated); use "
                           "--max-grad-norm 0 or leave it out");
    return 0;
}

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct cli c = {0};
    swift_train_opts_init(&c.o);
    c.o.argc = argc;
    c.o.argv = argv;
    c.o.quant_type = -1; /* given or not: --quant-type without --quant-bits is a mistake */
    c.o.double_quant = -1;
    c.o.max_grad_norm = NAN; /* given or not: --galore-optim-per-parameter turns it off */
    int argi, rc = swift_cli_parse(&cmd, argc, argv, &c, &argi);
    if (rc >= 0)
        return rc;
    if ((rc = check_quant(&c)) != 0)
        return rc;
    if (c.o.output_dir && !strcmp(c.o.output_dir, "-"))
        return swift_usage("-o -: the output is a directory, not standard output");
    if (c.init_model)
        return init_model(&c, argc - argi);
    if (argi >= argc)
        return swift_usage("missing SHARD_DIR");
    if (argi + 1 < argc)
        return swift_usage("extra operand '%s'", argv[argi + 1]);
    c.o.dataset = argv[argi];
    if (!c.o.model)
        return swift_usage("missing --model DIR");
    if (!c.o.output_dir)
        return swift_usage("missing --output-dir DIR");
    if (c.o.force && c.o.resume)
        return swift_usage("--force replaces the run in -o; --resume continues it: not both");
    if (c.o.lora_dropout < 0 || c.o.lora_dropout >= 1)
        return swift_usage("--lora-dropout must be in [0, 1)");
    if (c.o.torch_dtype == 2)
        return swift_usage("--torch-dtype float16: not supported (no fp16 matmuls on the CPU; "
                           "use bfloat16 or float32)");
    if (c.o.vit_lr >= 0 && c.o.freeze_vit)
        return swift_usage("--vit-lr needs --freeze-vit false (a frozen vision tower has no "
                           "learning rate)");
    if (c.o.aligner_lr >= 0 && c.o.freeze_aligner)
        return swift_usage("--aligner-lr needs --freeze-aligner false (a frozen aligner has no "
                           "learning rate)");
    if (c.o.freeze_llm && c.o.freeze_vit && c.o.freeze_aligner)
        return swift_usage("--freeze-llm true with a frozen vision tower and aligner leaves "
                           "nothing to train");
    if (c.o.freeze_llm && c.o.tuner == SWIFT_TUNER_LORA)
        return swift_usage("--freeze-llm true needs --tuner full (LoRA trains the language "
                           "model; LoRA on the vision tower is not supported yet)");
    if (c.o.lora_dora && c.o.tuner != SWIFT_TUNER_LORA)
        return swift_usage("--lora-dora needs --tuner lora");
    if (c.o.lora_dora && c.o.quant_bits)
        return swift_usage("--lora-dora and --quant-bits %d are not combined (DoRA's norm needs "
                           "the base's float weights)",
                           c.o.quant_bits);
    if (c.o.rlhf && strcmp(c.o.rlhf, "dpo") && strcmp(c.o.rlhf, "orpo") &&
        strcmp(c.o.rlhf, "simpo") && strcmp(c.o.rlhf, "cpo") && strcmp(c.o.rlhf, "kto") &&
        strcmp(c.o.rlhf, "rm") && strcmp(c.o.rlhf, "grpo"))
        return swift_usage("--rlhf: '%s' is not dpo, orpo, simpo, cpo, kto, rm or grpo", c.o.rlhf);
    int grpo = c.o.rlhf && !strcmp(c.o.rlhf, "grpo");
    if (c.o.beta == 0 && !grpo)
        return swift_usage("--beta must be > 0");
    if (grpo && c.o.grpo_loss_type == -2)
        return swift_usage("--loss-type: --rlhf grpo takes dapo, grpo, bnpo or dr_grpo");
    if (!grpo && c.o.loss_type == -2)
        return swift_usage("--loss-type: dapo, grpo, bnpo and dr_grpo are for --rlhf grpo");
    if (!grpo && (c.o.nreward_funcs || c.o.nreward_cmds || c.o.reward_weights || c.o.reward_model))
        return swift_usage("--reward-funcs, --reward-cmd, --reward-model and --reward-weights are "
                           "for --rlhf grpo");
    if (c.o.use_galore && !c.o.galore_rank)
        c.o.galore_rank = 128; /* ms-swift's galore_rank */
    if (c.o.galore_rank && c.o.tuner != SWIFT_TUNER_FULL)
        return swift_usage("--galore-rank: GaLore is for full tuning (--tuner full), not LoRA");
    if (c.o.galore_rank && c.o.zero)
        return swift_usage(
            "--galore-rank: not with --zero 1 (GaLore's state is kept whole on every "
            "rank)");
    if ((rc = check_per_param(&c.o)) != 0)
        return rc;
    if (c.o.optim == SWIFT_OPTIM_ADAMW_8BIT && c.o.zero)
        return swift_usage("--optim adamw_8bit does not shard its state: no --zero 1");
    if (c.o.optim == SWIFT_OPTIM_ADAMW_8BIT && c.o.galore_rank)
        return swift_usage("--optim adamw_8bit and GaLore (--galore-rank/--use-galore) are not "
                           "combined");
    if (c.o.center_rewards_coefficient != 0 && !(c.o.rlhf && !strcmp(c.o.rlhf, "rm")))
        return swift_usage("--center-rewards-coefficient is for --rlhf rm");
    return swift_close_stdout(swift_exit_code(train(&c.o)));
}
