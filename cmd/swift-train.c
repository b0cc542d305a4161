/* swift-train — fine-tune a Llama-family model on token shards (full or LoRA), on the CPU or a GPU
 * (--device). */
#include "lib/train/train.h"

#include <stdio.h>
#include <string.h>

#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/model/model_init.h"
#include "lib/core/fileio.h"
#include "lib/train/optim.h"
#include "lib/core/banned.h"

enum {
    O_INIT_MODEL = SWIFT_OPT_BASE + 0x100,
    O_WORKERS,
    O_PREFETCH,
    O_FORCE,
    O_MODEL = SWIFT_OPT_BASE,
    O_OUT,
    O_VAL,
    O_RESUME,
    O_TUNER,
    O_RANK,
    O_ALPHA,
    O_DROP,
    O_TARGETS,
    O_LR,
    O_WD,
    O_B1,
    O_B2,
    O_EPS,
    O_CLIP,
    O_WRATIO,
    O_WSTEPS,
    O_SCHED,
    O_BS,
    O_GA,
    O_MAXLEN,
    O_EPOCHS,
    O_MAXSTEPS,
    O_SEED,
    O_SAVE,
    O_LIMIT,
    O_EVAL,
    O_LOG,
    O_THREADS,
    O_DELAY,
    O_PEAK,
    O_GCKPT,
    O_DTIMEOUT,
    O_ZERO,
    O_RDELAY,
    O_DEVICE
};
static const struct swift_option opts[] = {
    {"model",
     O_MODEL,
     SWIFT_ARG_REQUIRED,
     "DIR",
     "model directory (config.json, *.safetensors)",
     NULL},
    {"init-model",
     O_INIT_MODEL,
     SWIFT_ARG_NONE,
     NULL,
     "write a model with random weights from --model's config.json to -o DIR and exit",
     NULL},
    {"force", O_FORCE, SWIFT_ARG_NONE, NULL, "--init-model: replace an existing DIR", NULL},
    {"num-workers",
     O_WORKERS,
     SWIFT_ARG_REQUIRED,
     "N",
     "threads preparing batches from the shards (default 1)",
     "dataloader_num_workers"},
    {"prefetch",
     O_PREFETCH,
     SWIFT_ARG_REQUIRED,
     "N",
     "steps prepared ahead of the trainer (default 3, at least num-workers + 1)",
     "dataloader_prefetch_factor"},
    {"output-dir",
     'o',
     SWIFT_ARG_REQUIRED,
     "DIR",
     "run directory (args.json, logging.jsonl, checkpoint-N/)",
     NULL},
    {"val-dataset",
     O_VAL,
     SWIFT_ARG_REQUIRED,
     "DIR",
     "validation shards (default SHARD_DIR/val if present)",
     NULL},
    {"resume",
     O_RESUME,
     SWIFT_ARG_REQUIRED,
     "CKPT|latest",
     "continue exactly from a checkpoint directory",
     "resume_from_checkpoint"},
    {"tuner",
     O_TUNER,
     SWIFT_ARG_REQUIRED,
     "full|lora",
     "what to train (default lora)",
     "train_type,tuner_type"},
    {"lora-rank", O_RANK, SWIFT_ARG_REQUIRED, "N", "LoRA rank (default 8)", NULL},
    {"lora-alpha", O_ALPHA, SWIFT_ARG_REQUIRED, "X", "LoRA alpha (default 32)", NULL},
    {"lora-dropout", O_DROP, SWIFT_ARG_REQUIRED, "P", "LoRA dropout (default 0.05)", NULL},
    {"target-modules",
     O_TARGETS,
     SWIFT_ARG_REQUIRED,
     "LIST",
     "all-linear (default) or q_proj,v_proj,...",
     NULL},
    {"learning-rate",
     O_LR,
     SWIFT_ARG_REQUIRED,
     "LR",
     "peak learning rate (default 1e-4 LoRA, 1e-5 full)",
     NULL},
    {"weight-decay", O_WD, SWIFT_ARG_REQUIRED, "X", "AdamW weight decay (default 0.1)", NULL},
    {"adam-beta1", O_B1, SWIFT_ARG_REQUIRED, "X", "default 0.9", NULL},
    {"adam-beta2", O_B2, SWIFT_ARG_REQUIRED, "X", "default 0.95", NULL},
    {"adam-epsilon", O_EPS, SWIFT_ARG_REQUIRED, "X", "default 1e-8", NULL},
    {"max-grad-norm",
     O_CLIP,
     SWIFT_ARG_REQUIRED,
     "X",
     "clip gradients to this norm (default 1; 0 = off)",
     NULL},
    {"warmup-ratio",
     O_WRATIO,
     SWIFT_ARG_REQUIRED,
     "X",
     "fraction of steps warming up (default 0)",
     NULL},
    {"warmup-steps", O_WSTEPS, SWIFT_ARG_REQUIRED, "N", "warmup steps (overrides the ratio)", NULL},
    {"lr-scheduler-type",
     O_SCHED,
     SWIFT_ARG_REQUIRED,
     "NAME",
     "cosine (default), linear, constant",
     NULL},
    {"per-device-train-batch-size",
     O_BS,
     SWIFT_ARG_REQUIRED,
     "N",
     "samples per micro-batch (default 1)",
     "batch_size,micro_batch_size"},
    {"gradient-accumulation-steps",
     O_GA,
     SWIFT_ARG_REQUIRED,
     "N",
     "micro-batches per step (default 1)",
     NULL},
    {"max-length",
     O_MAXLEN,
     SWIFT_ARG_REQUIRED,
     "N",
     "sequence length (default: the shards' max_length)",
     NULL},
    {"num-train-epochs", O_EPOCHS, SWIFT_ARG_REQUIRED, "X", "epochs (default 1)", NULL},
    {"max-steps", O_MAXSTEPS, SWIFT_ARG_REQUIRED, "N", "optimizer steps (overrides epochs)", NULL},
    {"seed",
     O_SEED,
     SWIFT_ARG_REQUIRED,
     "N",
     "data order, LoRA init and dropout (default 42)",
     "data_seed"},
    {"save-steps", O_SAVE, SWIFT_ARG_REQUIRED, "N", "checkpoint every N steps (default 500)", NULL},
    {"save-total-limit", O_LIMIT, SWIFT_ARG_REQUIRED, "N", "keep the newest N checkpoints", NULL},
    {"eval-steps",
     O_EVAL,
     SWIFT_ARG_REQUIRED,
     "N",
     "validation loss every N steps (default save-steps)",
     NULL},
    {"logging-steps",
     O_LOG,
     SWIFT_ARG_REQUIRED,
     "N",
     "a logging.jsonl record every N steps (default 5)",
     NULL},
    {"gradient-checkpointing",
     O_GCKPT,
     SWIFT_ARG_NONE,
     NULL,
     "recompute activations in backward (less memory, ~1/3 more compute)",
     "activation_checkpointing"},
    {"device",
     O_DEVICE,
     SWIFT_ARG_REQUIRED,
     "auto|cpu|cuda[:N]",
     "where the model runs (default auto: a GPU when there is one)",
     NULL},
    {"threads", 'j', SWIFT_ARG_REQUIRED, "N", "CPU threads (default all)", NULL},
    {"peak-gflops",
     O_PEAK,
     SWIFT_ARG_REQUIRED,
     "X",
     "peak FLOP rate for MFU (default: measured sgemm)",
     NULL},
    {"dist-timeout",
     O_DTIMEOUT,
     SWIFT_ARG_REQUIRED,
     "SEC",
     "under mpirun/srun: fail naming a rank that does not reach a step within SEC (default 300)",
     "ddp_timeout"},
    {"zero",
     O_ZERO,
     SWIFT_ARG_REQUIRED,
     "0|1",
     "1: shard the optimizer state over ranks (ZeRO-1; default 0)",
     NULL},
    {"rank-delay-ms",
     O_RDELAY,
     SWIFT_ARG_REQUIRED,
     "R:MS",
     "testing only: rank R sleeps MS per step (a straggler)",
     NULL},
    {"data-delay-ms",
     O_DELAY,
     SWIFT_ARG_REQUIRED,
     "MS",
     "testing only: slow the data path by MS per step",
     NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};
static const struct swift_command cmd = {
    "swift-train",
    "[OPTION]... --model DIR -o RUN_DIR SHARD_DIR",
    "fine-tune a Llama/Qwen model on token shards (full or LoRA)",
    opts,
    "Exit status: 0 done, 1 failed (bad input, NaN loss), 2 usage, 75 checkpointed after\n"
    "SIGTERM/SIGUSR1 (resume with --resume latest).",
    "  swift-train --model models/Qwen2.5-0.5B -o runs/a --tuner lora shards/\n"
    "  swift-train train.yaml --max-steps 100\n"
    "  swift-train --model M -o runs/a --resume latest shards/\n"
    "  mpirun -np 4 swift-train --model M -o runs/a --zero 1 shards/   (data parallel)\n"
    "  srun --mpi=pmix swift-train train.yaml\n"};

struct ctx {
    struct swift_train_opts o;
    int init_model, force;
};

static int num(const char *arg, const char *name, double *out)
{
    if (swift_parse_double(arg, out) < 0)
        return swift_usage("--%s: '%s' is not a number", name, arg);
    return 0;
}
static int whole(const char *arg, const char *name, long min, long *out)
{
    if (swift_parse_long(arg, min, 1L << 40, out) < 0)
        return swift_usage("--%s: '%s' is not an integer >= %ld", name, arg, min);
    return 0;
}

static int on_opt(void *vctx, int key, const char *arg)
{
    struct ctx *c = vctx;
    struct swift_train_opts *o = &c->o;
    long l = 0;
    switch (key) {
    case O_INIT_MODEL:
        c->init_model = 1;
        return 0;
    case O_FORCE:
        c->force = 1;
        return 0;
    case O_WORKERS:
        if (whole(arg, "num-workers", 1, &l))
            return 2;
        o->num_workers = (int)(l < 256 ? l : 256);
        return 0;
    case O_PREFETCH:
        if (whole(arg, "prefetch", 1, &l))
            return 2;
        o->prefetch = (int)(l < 1024 ? l : 1024);
        return 0;
    case O_MODEL:
        o->model = arg;
        return 0;
    case O_GCKPT:
        o->gradient_checkpointing = 1;
        return 0;
    case 'o':
        o->output_dir = arg;
        return 0;
    case O_VAL:
        o->val_dataset = arg;
        return 0;
    case O_RESUME:
        o->resume = arg;
        return 0;
    case O_TARGETS:
        o->target_modules = arg;
        return 0;
    case SWIFT_OPT_TRACE:
        o->trace = arg;
        return 0;
    case SWIFT_OPT_PROFILE:
        o->profile = arg;
        return 0;
    case O_TUNER:
        if (!strcmp(arg, "full") || !strcmp(arg, "lora")) {
            o->tuner = strcmp(arg, "lora") ? SWIFT_TUNER_FULL : SWIFT_TUNER_LORA;
            return 0;
        }
        return swift_usage("--tuner: '%s' is not full or lora", arg);
    case O_SCHED:
        if ((o->lr_scheduler = swift_sched_parse(arg)) < 0)
            return swift_usage("--lr-scheduler-type: '%s' is not cosine, linear or constant", arg);
        return 0;
    case O_ALPHA:
        return num(arg, "lora-alpha", &o->lora_alpha);
    case O_DROP:
        return num(arg, "lora-dropout", &o->lora_dropout);
    case O_LR:
        return num(arg, "learning-rate", &o->learning_rate);
    case O_WD:
        return num(arg, "weight-decay", &o->weight_decay);
    case O_B1:
        return num(arg, "adam-beta1", &o->adam_beta1);
    case O_B2:
        return num(arg, "adam-beta2", &o->adam_beta2);
    case O_EPS:
        return num(arg, "adam-epsilon", &o->adam_epsilon);
    case O_CLIP:
        return num(arg, "max-grad-norm", &o->max_grad_norm);
    case O_WRATIO:
        return num(arg, "warmup-ratio", &o->warmup_ratio);
    case O_EPOCHS:
        return num(arg, "num-train-epochs", &o->num_train_epochs);
    case O_PEAK:
        return num(arg, "peak-gflops", &o->peak_gflops);
    case O_DEVICE:
        o->device = arg;
        return 0;
    case O_WSTEPS:
        return whole(arg, "warmup-steps", 0, &o->warmup_steps);
    case O_MAXSTEPS:
        return whole(arg, "max-steps", 0, &o->max_steps);
    case O_SEED:
        return whole(arg, "seed", 0, &o->seed);
    case O_SAVE:
        return whole(arg, "save-steps", 0, &o->save_steps);
    case O_LIMIT:
        return whole(arg, "save-total-limit", 0, &o->save_total_limit);
    case O_EVAL:
        return whole(arg, "eval-steps", 0, &o->eval_steps);
    case O_LOG:
        return whole(arg, "logging-steps", 1, &o->logging_steps);
    case O_DELAY:
        return whole(arg, "data-delay-ms", 0, &o->data_delay_ms);
    case O_DTIMEOUT:
        if (num(arg, "dist-timeout", &o->dist_timeout))
            return 2;
        if (!(o->dist_timeout > 0))
            return swift_usage("--dist-timeout must be > 0");
        return 0;
    case O_ZERO:
        if (!strcmp(arg, "0") || !strcmp(arg, "1")) {
            o->zero = arg[0] == '1';
            return 0;
        }
        return swift_usage("--zero: '%s' is not 0 or 1", arg);
    case O_RDELAY: {
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
    case O_RANK:
        if (whole(arg, "lora-rank", 1, &l))
            return 2;
        o->lora_rank = (int)l;
        return 0;
    case O_BS:
        if (whole(arg, "per-device-train-batch-size", 1, &l))
            return 2;
        o->batch_size = (int)l;
        return 0;
    case O_GA:
        if (whole(arg, "gradient-accumulation-steps", 1, &l))
            return 2;
        o->grad_accum = (int)l;
        return 0;
    case O_MAXLEN:
        if (whole(arg, "max-length", 1, &l))
            return 2;
        o->max_length = (int)l;
        return 0;
    case 'j':
        if (whole(arg, "threads", 1, &l))
            return 2;
        o->threads = (int)l;
        return 0;
    }
    return swift_usage("unknown option");
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    struct ctx c = {0};
    swift_train_opts_init(&c.o);
    c.o.argc = argc;
    c.o.argv = argv;
    int argi, rc = swift_cli_parse(&cmd, argc, argv, on_opt, &c, &argi);
    if (rc >= 0)
        return rc;
    if (c.init_model) {
        if (!c.o.model || !c.o.output_dir || argi < argc)
            return swift_usage("--init-model takes --model CONFIG_DIR and -o DIR, no SHARD_DIR");
        rc = swift_model_init_dir(c.o.model, c.o.output_dir, (unsigned long long)c.o.seed, c.force);
        if (rc == 0)
            printf("{\"version\":1,\"event\":\"init_model\",\"seed\":%ld}\n", c.o.seed);
        return swift_close_stdout(rc < 0 ? SWIFT_EXIT_FAIL : 0);
    }
    if (argi >= argc)
        return swift_usage("missing SHARD_DIR");
    if (argi + 1 < argc)
        return swift_usage("extra operand '%s'", argv[argi + 1]);
    c.o.dataset = argv[argi];
    if (!c.o.model)
        return swift_usage("missing --model DIR");
    if (!c.o.output_dir)
        return swift_usage("missing --output-dir DIR");
    if (c.o.lora_dropout < 0 || c.o.lora_dropout >= 1)
        return swift_usage("--lora-dropout must be in [0, 1)");
    return swift_close_stdout(swift_train_run(&c.o));
}
