/*
 * train — the training loop behind swift-train: shards in, a run directory out
 * (docs/formats.md "Run directory").
 *
 *     struct swift_train_opts o;
 *     swift_train_opts_init(&o);           // ms-swift's defaults
 *     o.model = "models/tiny"; o.dataset = "shards"; o.output_dir = "run";
 *     int st;
 *     struct swift_train *t = swift_train_new(&o, &st);   // the ranks and the device
 *     if (!t)
 *         return swift_exit_code(st);
 *     struct swift_trace_config tc;
 *     swift_train_trace_config(t, &tc);    // this rank's trace: the caller opens it
 *     st = swift_trace_open(&tc) < 0 ? SWIFT_FAILED : swift_train_run(t);
 *     st = swift_train_free(t, st);        // 0, SWIFT_FAILED (reported), SWIFT_STOPPED
 *     swift_trace_close();
 *
 * What it does, in order: everything that can be wrong with the inputs is checked before the
 * first step (config.json and weights, shard CRCs, tokenizer sha256 of the shards against the
 * model's tokenizer.json, sequence lengths against --max-length and max_position_embeddings);
 * then steps of --gradient-accumulation-steps micro-batches of --per-device-train-batch-size
 * samples, prepared by a prefetch thread; AdamW with a warmup + cosine/linear/constant schedule
 * and gradient clipping; logging.jsonl records (ms-swift's keys plus tokens/s and MFU, also
 * printed on stdout); checkpoint-N/ every --save-steps (weights or adapter, optimizer state,
 * trainer_state.json with the data position), --save-total-limit, eval loss every --eval-steps.
 * SIGTERM/SIGUSR1 and the first SIGINT (Ctrl-C) finish the current step, write a checkpoint and
 * return SWIFT_STOPPED (exit 75); a second SIGINT ends the process at once (killed by SIGINT: exit
 * status 130; the trace's signal handler still writes what it holds).
 * A non-finite loss fails naming the step. --resume continues bit for bit (CPU).
 *
 * Under mpirun/srun (lib/train/dist.h, docs/distributed.md) every rank trains on a disjoint slice
 * of each global batch of ranks x batch x accumulation samples, gradients are summed over ranks,
 * rank 0 alone writes logging.jsonl, stdout and checkpoints, and a signal on any rank stops all
 * of them at the same step (checkpoint, exit 75). The data position is global: a checkpoint resumes
 * on any number of ranks with the same global batch.
 *
 * The loss is an objective (lib/train/objective.h: SFT today; how to add DPO, a reward model);
 * the wing's files are listed in lib/train/internal.h and docs/train.md "Code".
 *
 * The run directory (docs/formats.md "Run directory"):
 *   args.json, logging.jsonl, checkpoint-N/{model.safetensors+config.json | adapter_*,
 *   optimizer.safetensors, trainer_state.json}
 * swift_train_new settles it before anything is written (lib/train/rundir.c): a directory that
 * already holds something is refused (SWIFT_FAILED, nothing touched) unless --resume continues
 * the run in it or --force replaces a previous run's files (only files a run writes: anything
 * else is refused); --add-version runs in a new OUTPUT_DIR/v<N>-<YYYYMMDD-HHMMSS> instead (with
 * --resume latest: in the newest one), named on stderr.
 */
#ifndef SWIFT_TRAIN_H
#define SWIFT_TRAIN_H

enum { SWIFT_TUNER_FULL = 0, SWIFT_TUNER_LORA = 1 };

/* --optim: torch's AdamW (float32 moments) or bitsandbytes' 8-bit AdamW (optim.h) */
enum swift_optim { SWIFT_OPTIM_ADAMW = 0, SWIFT_OPTIM_ADAMW_8BIT };

struct swift_train_opts {
    const char *model;       /* model directory (HF layout) */
    const char *dataset;     /* shard directory */
    const char *val_dataset; /* NULL: DATASET/val when it exists */
    const char *output_dir;  /* run directory (with add_version: the directory of versions) */
    const char *resume;      /* checkpoint directory, "latest", or NULL */
    int add_version;         /* run in OUTPUT_DIR/v<N>-<YYYYMMDD-HHMMSS> (ms-swift's layout) */
    int force;               /* replace the files of a previous run in output_dir */
    int tuner;
    int lora_rank;
    double lora_alpha, lora_dropout;
    int lora_dora; /* DoRA (PEFT use_dora): a magnitude vector per adapted linear */
    const char *target_modules;
    /* Qwen2-VL / Qwen2.5-VL (docs/multimodal.md "Training"): the groups kept frozen (ms-swift's
     * freeze_vit, freeze_aligner, freeze_llm: default 1, 1, 0) and their learning rates (<0:
     * learning_rate); an unfrozen ViT or aligner trains in full, freeze_llm needs
     * SWIFT_TUNER_FULL */
    int freeze_vit, freeze_aligner, freeze_llm;
    double vit_lr, aligner_lr;
    /* QLoRA (docs/train.md): quant_bits 4 stores the frozen base linears in bitsandbytes' 4-bit
     * format (quant_type SWIFT_Q4_NF4 or SWIFT_Q4_FP4 of kernels/quant4.h, double_quant: the
     * absmax in 8 bits); 8: bitsandbytes' int8 rows (kernels/quant8.h, quant_type and
     * double_quant unused); 0: float32 base. Needs tuner LoRA. */
    int quant_bits, quant_type, double_quant;
    double learning_rate; /* <0: 1e-4 for LoRA, 1e-5 full (ms-swift) */
    double weight_decay, adam_beta1, adam_beta2, adam_epsilon, max_grad_norm;
    double warmup_ratio;
    long warmup_steps;
    int lr_scheduler; /* enum swift_sched */
    int batch_size;   /* rows per micro-batch */
    int grad_accum;
    int max_length; /* 0: the shards' max_length */
    double num_train_epochs;
    long max_steps; /* <=0: from epochs */
    long seed;
    long save_steps, save_total_limit, eval_steps, logging_steps;
    int threads;        /* 0: all */
    const char *device; /* auto (NULL), cpu, cuda, cuda:N (kernels/ops.h) */
    long data_delay_ms; /* testing only: slow the data path */
    int num_workers;    /* threads preparing steps (default 1) */
    int prefetch;       /* steps prepared ahead (default 3; at least num_workers + 1) */
    const char *trace, *profile;
    int progress;               /* the progress line: enum swift_progress_mode (0: a terminal) */
    double peak_gflops;         /* for MFU; 0: measure sgemm at start-up */
    int gradient_checkpointing; /* recompute layer activations in backward */
    int torch_dtype; /* the matmuls' math: SWIFT_MATH_FP32 or SWIFT_MATH_BF16; -1 (default): the
                        checkpoint's dtype (swift_backend_default_math) */
    /* GaLore (lib/train/galore.h, docs/train.md "GaLore"; full tuning): galore_rank 0 is off */
    int use_galore;             /* --use-galore: on with the default rank (128) */
    int galore_rank;            /* --galore-rank R (on) */
    long galore_gap;            /* --galore-update-proj-gap (50) */
    double galore_scale;        /* --galore-scale (1.0) */
    const char *galore_targets; /* --galore-target-modules ("all-linear") */
    int galore_per_param;       /* --galore-optim-per-parameter: GaLore steps inside backward */
    /* distributed (lib/train/dist.h; active under mpirun/srun) */
    double dist_timeout; /* seconds a rank may wait for the others (default 300) */
    int zero;            /* 1: ZeRO-1, optimizer state sharded over ranks */
    int optim; /* SWIFT_OPTIM_ADAMW (adamw_torch) or SWIFT_OPTIM_ADAMW_8BIT (bnb's AdamW8bit) */
    int delay_rank; /* testing only: rank delay_rank sleeps delay_rank_ms per step */
    long delay_rank_ms;
    /* preference training (docs/preference.md): objective and TRL's parameters */
    const char *rlhf; /* NULL: SFT; dpo, orpo, simpo, cpo, kto, rm, grpo */
    int loss_type;    /* enum swift_pref_loss (lib/train/pref_loss.h); -1: the objective's */
    double beta;      /* < 0: 0.1 (simpo 2.0, grpo 0); 0 only for grpo */
    double label_smoothing, rpo_alpha, simpo_gamma, cpo_alpha;
    double center_rewards_coefficient; /* rm: TRL's, weight of mean (r_c + r_r)^2; 0: off */
    double desirable_weight, undesirable_weight; /* --rlhf kto (default 1) */
    int precompute_ref_logps; /* dpo: reference log-probs once, stored next to the shards */
    /* --rlhf grpo (docs/grpo.md): TRL's GRPOConfig names and defaults */
    int grpo_loss_type;           /* enum swift_grpo_loss (lib/train/grpo_loss.h); -1: dapo */
    int num_generations;          /* completions per prompt (8) */
    int max_completion_length;    /* tokens a completion may have (256) */
    double temperature, top_p;    /* sampling (1, 1) */
    double epsilon, epsilon_high; /* clip range (0.2; epsilon_high < 0: epsilon) */
    int num_iterations;           /* updates per generation batch (1) */
    int scale_rewards;            /* enum swift_grpo_scale; -1: group */
    const char *reward_funcs[16]; /* built-in names (lib/train/reward.h), in order */
    int nreward_funcs;
    const char *reward_cmds[16]; /* --reward-cmd programs, after the built-ins */
    int nreward_cmds;
    const char *reward_model;   /* a --rlhf rm model directory, scored last ("rm") */
    const char *reward_weights; /* "1,0.5,..." one per function in that order */
    const char *format_pattern; /* the format reward's regex (NULL: ms-swift's) */
    double reward_timeout;      /* seconds a program may take per reply line (60) */
    long soft_cache_length;     /* the length reward's C (ms-swift's default 128...) */
    int argc;
    char **argv;
};

void swift_train_opts_init(struct swift_train_opts *o);

struct swift_train; /* one run of this process: its rank, device, model, data */
struct swift_trace_config;
/* Threads, --profile, the ranks (MPI under mpirun/srun), the device, the run directory (refused,
 * versioned or cleared; created later, once the inputs are checked). NULL after reporting, with
 * *status SWIFT_FAILED or SWIFT_MISUSED. o must outlive the run. */
struct swift_train *swift_train_new(const struct swift_train_opts *o, int *status);
/* What this rank's trace must say (stage, rank, world size, device, clock offset to rank 0);
 * the caller opens it before swift_train_run and closes it after swift_train_free. */
void swift_train_trace_config(const struct swift_train *t, struct swift_trace_config *tc);
/* Load, check, train, checkpoint: 0, SWIFT_FAILED (reported) or SWIFT_STOPPED (checkpointed
 * after SIGTERM/SIGUSR1/SIGINT). */
int swift_train_run(struct swift_train *t);
/* Release the run and leave the ranks (no MPI_Finalize after a failure: the others may be
 * waiting); returns status, or SWIFT_FAILED if the release itself failed. NULL is a no-op. */
int swift_train_free(struct swift_train *t, int status);
/* Measured single-precision GEMM rate of this machine (GFLOP/s) with the current threads. */
double swift_sgemm_peak_gflops(void);

#endif
