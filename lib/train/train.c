/*
 * train — swift_train_new/run/free (train.h): setup, the step loop, teardown. The step loop
 * (train_loop) reads top to bottom; what it calls lives in the files internal.h lists: the
 * loader's prefetched micro-batches, the objective's forward and backward (objective.h), the
 * ranks' sums (sync.c), AdamW (optim.h), records (log.c), eval and checkpoints.
 */
#include "lib/train/train.h"
#include "lib/core/mem.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/model/vlm_flops.h"
#include "lib/train/internal.h"
#include "lib/core/banned.h"

void swift_train_opts_init(struct swift_train_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->tuner = SWIFT_TUNER_LORA; /* ms-swift's default train_type */
    o->galore_gap = 50;          /* ms-swift's GaLore defaults */
    o->galore_scale = 1.0;
    o->galore_targets = "all-linear";
    o->lora_rank = 8;
    o->lora_alpha = 32;
    o->lora_dropout = 0.05;
    o->target_modules = "all-linear";
    o->freeze_vit = 1; /* ms-swift's defaults */
    o->freeze_aligner = 1;
    o->vit_lr = o->aligner_lr = -1;
    o->learning_rate = -1;
    o->weight_decay = 0.1;
    o->adam_beta1 = 0.9;
    o->adam_beta2 = 0.95;
    o->adam_epsilon = 1e-8;
    o->max_grad_norm = 1.0;
    o->lr_scheduler = SWIFT_SCHED_COSINE;
    o->batch_size = 1;
    o->grad_accum = 1;
    o->num_train_epochs = 1;
    o->seed = 42;
    o->save_steps = 500;
    o->eval_steps = 0; /* 0: same as save_steps */
    o->logging_steps = 5;
    o->torch_dtype = -1; /* the checkpoint's (swift_backend_default_math) */
    o->dist_timeout = 300;
    o->delay_rank = -1;
    o->num_workers = 1;
    o->prefetch = 3;
    o->loss_type = -1;
    o->beta = -1;
    o->simpo_gamma = 0.5; /* trl CPOConfig */
    o->cpo_alpha = 1.0;
    o->desirable_weight = 1.0; /* trl KTOConfig */
    o->undesirable_weight = 1.0;
    o->grpo_loss_type = -1; /* trl GRPOConfig */
    o->num_generations = 8;
    o->max_completion_length = 256;
    o->temperature = 1.0;
    o->top_p = 1.0;
    o->epsilon = 0.2;
    o->epsilon_high = -1;
    o->num_iterations = 1;
    o->scale_rewards = -1;
    o->reward_timeout = 60;
    o->soft_cache_length = -1;
}

/* ---- signals: SIGTERM/SIGUSR1 and a first SIGINT finish the step, write a checkpoint, return
 * 75; a second SIGINT gets SIGINT's earlier action (the trace's flush, then the default: the
 * process ends, exit status 130) ---- */

static volatile sig_atomic_t stop_signal;
static struct sigaction int_before; /* SIGINT's action before catch_stop_signals */
static char int_note[160];          /* said at the first SIGINT (write(2): signal-safe) */
static size_t int_note_len;

static void on_stop(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
    if (sig == SIGINT) {
        sigaction(SIGINT, &int_before, NULL);
        ssize_t w = write(STDERR_FILENO, int_note, int_note_len);
        (void)w;
    }
}

/* ---- setup and teardown ---- */

/* Undo swift_dist_init before a run started: no MPI_Finalize when failed (ranks may wait). */
static int end_ranks(struct swift_dist *d, int failed, int rc)
{
    d->failed = failed;
    swift_dist_finalize(d);
    return rc;
}

/* Threads, --profile, the ranks, the device. Returns 0, or a status (SWIFT_FAILED,
 * SWIFT_MISUSED) after undoing what it did. */
static int start(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    struct swift_dist *D = &r->dist;
    if (o->threads > 0) {
        omp_set_num_threads(o->threads);
        openblas_set_num_threads(o->threads);
    }
    if (o->profile) {
        char err[256];
        if (swift_profile_parse(o->profile, &r->prof, err, sizeof(err)) < 0) {
            swift_error("--profile: %s", err);
            return SWIFT_MISUSED;
        }
    }
    /* ranks: MPI only under a launcher (mpirun, srun); one trace file per rank */
    if (swift_dist_init(D, o->dist_timeout) < 0)
        return end_ranks(D, 1, SWIFT_FAILED);
    /* the device: ranks on one host take one GPU each unless --device names it */
    int brc = swift_backend_select_rank(&r->be, o->device, D->local_rank);
    if (brc) { /* a GPU missing on one rank: the others must not wait for it */
        int failed = brc < 0;
        return end_ranks(D, failed, failed ? SWIFT_FAILED : SWIFT_MISUSED);
    }
    /* no --torch-dtype: the checkpoint's dtype (ms-swift's default), said once */
    int math = o->torch_dtype >= 0 ? o->torch_dtype
                                   : swift_backend_default_math(&r->be, o->model, D->rank == 0);
    if (swift_backend_set_math(&r->be, math) < 0)
        return end_ranks(D, 1, SWIFT_FAILED);
    if (o->galore_per_param && D->world > 1) { /* layerwise.c */
        swift_usage("--galore-optim-per-parameter: one process only (a weight is updated "
                    "during backward, before a gradient allreduce could run); run without "
                    "mpirun/srun, or without it");
        return end_ranks(D, 0, SWIFT_MISUSED);
    }
    if (o->galore_rank > 0 && r->be.cuda) { /* galore.h: host arithmetic */
        swift_usage("--galore-rank: GaLore runs on the CPU only (its SVD and projections are "
                    "host code); use --device cpu");
        return end_ranks(D, 0, SWIFT_MISUSED);
    }
    /* gradients and parameters are backend memory: staged through the host over MPI, or NCCL */
    if (swift_dist_use_backend(D, r->be.ops, r->be.cuda, r->be.index) < 0)
        return end_ranks(D, 1, SWIFT_FAILED);
    if (D->world > 1)
        swift_info("rank %d of %d on %s (local rank %d, %s%s%s), clock offset to rank 0 "
                   "%.1f us (round trip %.1f us)",
                   D->rank,
                   D->world,
                   D->host,
                   D->local_rank,
                   D->launcher,
                   D->job_id ? ", slurm job " : "",
                   D->job_id ? D->job_id : "",
                   D->clock_offset_us,
                   D->min_rtt_us);
    if (D->world > 1 && D->rank == 0 && D->allreduce_note[0])
        swift_info("all-reduce (OpenMPI libnbc): %s", D->allreduce_note);
    return 0;
}

/* From here on SIGTERM/SIGUSR1 and a first SIGINT only set a flag: a signal during loading
 * still ends in a checkpoint after the first step and exit 75. Installed after the trace is
 * open, whose own handlers would otherwise end the process. An ignored SIGINT (nohup, a
 * background job of a script) stays ignored. */
static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGINT, NULL, &int_before);
    if (int_before.sa_handler == SIG_IGN)
        return;
    int n = snprintf(int_note,
                     sizeof(int_note),
                     "%s%s: interrupt: finishing the step, then a checkpoint and exit 75 "
                     "(interrupt again to stop at once, without one)\n",
                     isatty(STDERR_FILENO) ? "\n" : "", /* off the progress line, under ^C */
                     swift_progname());
    int_note_len = n < 0 ? 0 : (size_t)n < sizeof(int_note) ? (size_t)n : sizeof(int_note) - 1;
    sigaction(SIGINT, &sa, NULL);
}

/* QLoRA: the frozen base linears to 4 (or 8) bits before the adapters go on; one line on stderr
 * with what the base now takes against its bf16 size. */
static int quantize_base(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    double bf16;
    if (o->quant_bits == 8) {
        if (swift_model_quantize8(r->m) < 0)
            return -1;
        bf16 = 2.0 * (double)r->m->q4_numel;
        swift_info("8-bit base (int8, absmax per row): %zu linear weights in %zu bytes, %.3f x "
                   "their bf16 size",
                   r->m->q4_numel,
                   r->m->q4_bytes,
                   bf16 > 0 ? (double)r->m->q4_bytes / bf16 : 0.0);
        return 0;
    }
    if (swift_model_quantize4(r->m, o->quant_type, o->double_quant) < 0)
        return -1;
    bf16 = 2.0 * (double)r->m->q4_numel;
    swift_info("4-bit base (%s%s): %zu linear weights in %zu bytes, %.3f x their bf16 size",
               o->quant_type == SWIFT_Q4_FP4 ? "fp4" : "nf4",
               o->double_quant ? ", double quant" : "",
               r->m->q4_numel,
               r->m->q4_bytes,
               bf16 > 0 ? (double)r->m->q4_bytes / bf16 : 0.0);
    return 0;
}

/* The model (full resumes load the checkpoint's weights; LoRA loads the base then the
 * adapter), the trainable parameters and the objective. */
static int load_model(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    const char *wdir = r->resume && o->tuner == SWIFT_TUNER_FULL ? r->resume : o->model;
    r->config_path = swift_path_join(o->model, "config.json");
    int frozen = o->tuner == SWIFT_TUNER_LORA;
    int vl = train_vl_detect(o->model);
    if (!vl && (!o->freeze_vit || !o->freeze_aligner || o->freeze_llm))
        return swift_error("%s: --freeze-vit, --freeze-aligner and --freeze-llm are for a "
                           "vision-language model (Qwen2-VL, Qwen2.5-VL)",
                           o->model);
    if (vl ? train_vl_load(r, wdir) < 0
           : (o->rlhf && !strcmp(o->rlhf, "rm")
                  ? swift_model_load_score(r->m, wdir, r->be.ops, frozen, (uint64_t)o->seed)
                  : swift_model_load(r->m, wdir, r->be.ops, frozen)) < 0)
        return -1;
    r->m->act_ckpt = o->gradient_checkpointing;
    if (o->quant_bits && quantize_base(r) < 0)
        return -1;
    if (r->m->cfg.bnb_bits) /* a bitsandbytes directory: its linears loaded as stored */
        swift_info("%d-bit base as saved by bitsandbytes (%s%s): %zu linear weights in %zu bytes",
                   r->m->cfg.bnb_bits,
                   r->m->cfg.bnb_bits == 8              ? "int8"
                   : r->m->cfg.bnb_type == SWIFT_Q4_FP4 ? "fp4"
                                                        : "nf4",
                   r->m->cfg.bnb_bits == 4 && r->m->cfg.bnb_dq ? ", double quant" : "",
                   r->m->q4_numel,
                   r->m->q4_bytes);
    /* memory(GiB) is the peak from here: the float copy QLoRA quantized from is gone */
    swift_mem_reset_peak();
    if (o->tuner == SWIFT_TUNER_LORA) {
        if (r->resume) {
            if ((r->vlm ? swift_vlm_lora_load(r->vlm, r->resume, &r->lo)
                        : swift_lora_load(r->m, r->resume, &r->lo)) < 0)
                return -1;
        } else {
            r->lo = (struct swift_lora_opts){.rank = o->lora_rank,
                                             .alpha = (float)o->lora_alpha,
                                             .dropout = (float)o->lora_dropout,
                                             .use_dora = o->lora_dora,
                                             .targets = o->target_modules,
                                             .seed = (uint64_t)o->seed};
            if (swift_lora_attach(r->m, &r->lo) < 0)
                return -1;
        }
        r->tp = r->m->lp;
        r->ntp = r->m->nlp;
    } else {
        r->tp = r->m->p;
        r->ntp = r->m->np;
    }
    if (r->vlm && train_vl_params(r) < 0) /* the vision groups' parameters too */
        return -1;
    return swift_objective_init(&r->obj, o->rlhf ? o->rlhf : "sft", o, r->m);
}

/* The row length T (--max-length or the shards') checked against the model, the training and
 * validation shards checked sample by sample, the schedule's lengths. */
static int open_data(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    if (swift_shards_open(&r->train, o->dataset, r->vlm ? SWIFT_SHARDS_IMAGES : 0) < 0)
        return -1;
    const struct swift_shard_index *ix = swift_shards_index(r->train);
    if (train_check_kind(r, ix, o->dataset) < 0) /* before lengths: the likelier mistake */
        return -1;
    r->T = o->max_length > 0 ? o->max_length : (int)ix->max_length;
    if (r->T <= 0)
        return swift_error("%s: no max_length; give --max-length", o->dataset);
    r->T += r->obj.extra_T; /* GRPO: room for the completion after the prompt */
    if (r->T > r->m->cfg.max_position_embeddings)
        return swift_error("--max-length %d exceeds the model's max_position_embeddings %d",
                           r->T,
                           r->m->cfg.max_position_embeddings);
    if (r->m->cfg.sliding_window > 0 && r->T > r->m->cfg.sliding_window)
        return swift_error("--max-length %d exceeds the model's sliding_window %d (not supported)",
                           r->T,
                           r->m->cfg.sliding_window);
    swift_shards_close(r->train);
    r->train = NULL;
    if (train_open_shards(r, &r->train, o->dataset) < 0)
        return -1;
    r->mbs = r->obj.batch_rows ? o->batch_size / r->obj.rows_per_sample : o->batch_size;
    if (r->mbs < 1 || (r->obj.batch_rows && o->batch_size % r->obj.rows_per_sample))
        return swift_error("--per-device-train-batch-size %d counts completions: it must be a "
                           "multiple of --num-generations %d (whole groups per micro-batch)",
                           o->batch_size,
                           r->obj.rows_per_sample);
    char *vdir =
        o->val_dataset ? swift_xstrdup(o->val_dataset) : swift_path_join(o->dataset, "val");
    if (vdir && (o->val_dataset || swift_is_dir(vdir))) {
        if (train_open_shards(r, &r->val, vdir) < 0) {
            free(vdir);
            return -1;
        }
        const char *vc = swift_shards_index(r->val)->image_cache;
        r->val_image_dir = r->vlm && vc ? swift_path_join(vdir, vc) : NULL;
    }
    free(vdir);
    uint64_t n = swift_shards_count(r->train);
    long mbpe = (long)(n / (uint64_t)r->mbs);
    r->steps_per_epoch = mbpe / ((long)o->grad_accum * r->dist.world);
    if (r->steps_per_epoch <= 0)
        return swift_error("%s: %llu samples make no full step of %d x %d x %d ranks samples",
                           o->dataset,
                           (unsigned long long)n,
                           r->mbs,
                           o->grad_accum,
                           r->dist.world);
    r->steps_per_epoch *= r->obj.repeat > 1 ? r->obj.repeat : 1;
    r->max_steps = o->max_steps > 0 ? o->max_steps
                                    : (long)ceil(o->num_train_epochs * (double)r->steps_per_epoch);
    r->warmup =
        o->warmup_steps > 0 ? o->warmup_steps : (long)ceil(o->warmup_ratio * (double)r->max_steps);
    r->lr = o->learning_rate >= 0 ? o->learning_rate : (o->tuner == SWIFT_TUNER_LORA ? 1e-4 : 1e-5);
    r->eval_steps = o->eval_steps > 0 ? o->eval_steps : o->save_steps;
    if (r->step0 > r->max_steps)
        return swift_error("checkpoint step %ld is beyond max_steps %ld", r->step0, r->max_steps);
    return 0;
}

/* --galore-rank: GaLore takes its targets among the trainable parameters; *op, *nop become the
 * others (plain AdamW). The state's size against AdamW's on stderr. */
static int init_galore(struct run *r, struct swift_param **op, int *nop)
{
    const struct swift_train_opts *o = r->o;
    struct swift_galore_opts go = {
        o->galore_rank, o->galore_gap, o->galore_scale, o->galore_targets};
    if (swift_galore_init(&r->gal,
                          r->be.ops,
                          r->tp,
                          r->ntp,
                          &go,
                          (float)o->adam_beta1,
                          (float)o->adam_beta2,
                          (float)o->adam_epsilon,
                          (float)o->weight_decay) < 0)
        return -1;
    if (o->galore_per_param && train_layerwise_init(r) < 0)
        return -1;
    r->adam_tp = swift_xcalloc((size_t)r->ntp, sizeof(*r->adam_tp));
    size_t total = 0, rest = 0;
    *nop = 0;
    for (int i = 0; i < r->ntp; i++) {
        total += r->tp[i].numel;
        if (swift_galore_index(&r->gal, &r->tp[i]) < 0) {
            r->adam_tp[(*nop)++] = r->tp[i];
            rest += r->tp[i].numel;
        }
    }
    *op = r->adam_tp;
    if (r->dist.rank == 0)
        swift_info("GaLore rank %d on %d weights (projection every %ld steps, scale %g): "
                   "optimizer state %.2f MiB (AdamW on every parameter: %.2f MiB)",
                   o->galore_rank,
                   r->gal.n,
                   o->galore_gap,
                   o->galore_scale,
                   (double)(r->gal.state + 2 * rest) * 4 / 1048576.0,
                   (double)total * 8 / 1048576.0);
    return 0;
}

/* AdamW over the trainable parameters (ZeRO-1: over this rank's range of them; --galore-rank:
 * over those GaLore does not take; --optim adamw_8bit: 8-bit moments for the large ones, never
 * with GaLore), its state on --resume, activations for a micro-batch. */
static int init_optimizer(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    struct swift_dist *D = &r->dist;
    struct swift_param *op = r->tp;
    int nop = r->ntp;
    if (o->zero && D->world > 1) {
        if (swift_dist_shard_init(D, r->tp, r->ntp) < 0)
            return -1;
        op = D->shard;
        nop = D->nshard;
    }
    if (o->galore_rank > 0 && init_galore(r, &op, &nop) < 0)
        return -1;
    int (*init)(struct swift_adamw *,
                const struct swift_ops *,
                struct swift_param *,
                int,
                float,
                float,
                float,
                float) =
        o->optim == SWIFT_OPTIM_ADAMW_8BIT ? swift_adamw_init_8bit : swift_adamw_init;
    if (init(&r->opt,
             r->be.ops,
             op,
             nop,
             (float)o->adam_beta1,
             (float)o->adam_beta2,
             (float)o->adam_epsilon,
             (float)o->weight_decay) < 0)
        return -1;
    if (r->opt.bits == 8 && D->rank == 0)
        swift_info("optimizer state %.2f MiB in 8 bits, AdamW's would be %.2f MiB (%zu of %zu "
                   "parameters in 8-bit blocks)",
                   (double)swift_adamw_state_bytes(&r->opt) / 1048576.0,
                   (double)r->opt.total * 8 / 1048576.0,
                   r->opt.total8,
                   r->opt.total);
    if (D->world > 1)
        swift_info("rank %d: optimizer state %.2f MiB (%zu of %zu parameters%s)",
                   D->rank,
                   (double)swift_adamw_state_bytes(&r->opt) / 1048576.0,
                   r->opt.total,
                   D->shard ? D->total : r->opt.total,
                   D->shard ? ", ZeRO-1" : "");
    if (r->vlm)
        train_vl_groups(r);
    if (r->resume && train_load_optimizer(r, r->resume) < 0)
        return -1;
    return swift_model_reserve(r->m, r->mbs * r->obj.rows_per_sample, r->T);
}

/* The run directory, written by rank 0: args.json, no stale temporary checkpoint,
 * logging.jsonl. */
static int open_run_dir(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    int rank0 = r->dist.rank == 0;
    if (swift_mkdirs(o->output_dir, 0755) < 0 || (rank0 && train_write_args(o, r->be.math) < 0))
        return -1;
    if (rank0)
        train_remove_stale_tmp(o->output_dir);
    return train_log_open(r);
}

static int start_loader(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    struct train_loader *L = &r->loader;
    L->s = r->train;
    L->obj = &r->obj;
    L->n = swift_shards_count(r->train);
    L->B = r->mbs;
    L->repeat = r->obj.repeat;
    L->T = r->T;
    L->GA = o->grad_accum;
    L->rank = r->dist.rank;
    L->world = r->dist.world;
    L->seed = o->seed;
    L->steps_per_epoch = r->steps_per_epoch / (r->obj.repeat > 1 ? r->obj.repeat : 1);
    L->delay_ms = o->data_delay_ms;
    L->nworkers = o->num_workers;
    L->depth = o->prefetch;
    const char *cache = swift_shards_index(r->train)->image_cache;
    L->image_dir = r->vlm && cache ? swift_path_join(o->dataset, cache) : NULL;
    return train_loader_start(L, r->step0, r->max_steps);
}

/* Everything before the first step; every input is checked here. Returns 0 or -1. */
static int prepare(struct run *r)
{
    if (r->resume && train_read_state(r->resume, &r->step0, r->o, r->dist.world) < 0)
        return -1;
    if (load_model(r) < 0 || open_data(r) < 0 || init_optimizer(r) < 0 || open_run_dir(r) < 0 ||
        train_ref_logps(r) < 0 || start_loader(r) < 0)
        return -1;
    r->log.flops_tok = swift_model_flops_per_token(r->m, r->T);
    r->log.t_start = train_now_s();
    r->log.win_t = train_now_s();
    if (r->be.notice[0])
        swift_info("%s", r->be.notice);
    if (r->resume && r->dist.rank == 0)
        swift_info("resumed from %s (step %ld of %ld, epoch %.4g)",
                   r->resume,
                   r->step0,
                   r->max_steps,
                   (double)r->step0 / (double)r->steps_per_epoch);
    return 0;
}

static int finish(struct run *r, int rc)
{
    r->be.ops->device_trace(0);
    train_loader_stop(&r->loader);
    train_log_close(r);
    swift_adamw_free(&r->opt);
    train_layerwise_free(r);
    swift_galore_free(&r->gal);
    free(r->adam_tp);
    if (r->train)
        swift_shards_close(r->train);
    if (r->val)
        swift_shards_close(r->val);
    swift_objective_free(&r->obj);
    train_ref_logps_free(r);
    if (r->vlm)
        train_vl_free(r);
    else
        swift_model_free(r->m);
    free(r->loader.image_dir);
    free(r->val_image_dir);
    free(r->config_path);
    free(r->resume);
    /* after a failure MPI_Finalize would wait for ranks that are still training */
    return end_ranks(&r->dist, rc != SWIFT_DONE && rc != SWIFT_STOPPED, rc);
}

/* ---- the step loop ---- */

/* Forward and backward of micro-batch a of the step. */
static int micro_step(struct run *r, const struct train_ubatch *u, long step, int a, float scale,
                      struct swift_objective_sums *s)
{
    const struct swift_train_opts *o = r->o;
    struct swift_batch bt = {r->mbs * r->obj.rows_per_sample, r->T, u->tok, u->tgt, u->pos};
    /* the global micro-batch index: the same dropout masks on any number of ranks */
    uint64_t gmb = (uint64_t)r->dist.rank * (uint64_t)o->grad_accum + (uint64_t)a;
    r->m->dropout_seed = train_mix((uint64_t)o->seed ^ train_mix((uint64_t)step * 64 + gmb));
    if (r->ref_train) { /* --precompute-ref-logps: the stored values, no reference pass */
        if (train_ref_logps_step(r, &bt, step, a) < 0)
            return -1;
    } else if (r->obj.reference) { /* the reference's forward, a span of its own */
        int64_t tr = swift_trace_now();
        if (r->obj.reference(&r->obj, r->m, &bt) < 0)
            return -1;
        swift_trace_span("compute",
                         "reference_forward",
                         tr,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)},
                         1);
    }
    if (r->vlm) { /* vision and llm spans inside (lib/model/vlm_run.c) */
        int64_t tv = swift_trace_now();
        int rc = train_vl_forward(r, u, bt.B, scale, s, 1);
        /* FLOPs for MFU and the trace (vision vs llm, docs/multimodal.md) */
        double vf = swift_vlm_vision_flops(&r->vlm->vc, r->vlm->frozen, u->grid, u->nimages);
        double lf = (double)bt.B * r->T * r->log.flops_tok;
        r->log.win_vflops += vf * r->dist.world;
        swift_trace_span("compute",
                         "forward_backward",
                         tv,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a),
                                               SWIFT_TARG_D("flops", vf + lf),
                                               SWIFT_TARG_D("vision_flops", vf),
                                               SWIFT_TARG_I("images", u->nimages),
                                               SWIFT_TARG_I("patches", u->npatches)},
                         5);
        return rc;
    }
    int64_t tf = swift_trace_now();
    if (r->obj.forward(&r->obj, r->m, &bt, scale, s) < 0)
        return -1;
    if (a == 0 && o->delay_rank_ms > 0 && r->dist.rank == o->delay_rank) { /* testing only */
        struct timespec ts = {o->delay_rank_ms / 1000, (o->delay_rank_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    int64_t tb = swift_trace_now();
    swift_trace_span(
        "compute", "forward", tf, tb, (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)}, 1);
    r->obj.backward(&r->obj, r->m, &bt);
    swift_trace_span("compute",
                     "backward",
                     tb,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)},
                     1);
    return 0;
}

/* GRPO: the objective's rollout over the step's micro-batches (prompts); its items. */
static long rollout(struct run *r, const struct train_step *sb, long step)
{
    int GA = r->o->grad_accum;
    struct swift_batch *bt = swift_xcalloc((size_t)GA, sizeof(*bt));
    const struct swift_sample **xs = swift_xcalloc((size_t)GA, sizeof(*xs));
    for (int a = 0; a < GA; a++) {
        const struct train_ubatch *u = &sb->ub[a];
        bt[a] = (struct swift_batch){r->mbs * r->obj.rows_per_sample, r->T, u->tok, u->tgt, u->pos};
        xs[a] = u->xs;
    }
    long items = r->obj.rollout(&r->obj, r->m, bt, xs, GA, step);
    free(xs);
    free(bt);
    return items;
}

/* All micro-batches of the step; the loss is a mean over the items (trained tokens) of the
 * whole step on all ranks, so that is the scale of every micro-batch's gradient. */
static int micro_batches(struct run *r, const struct train_step *sb, long step, long *ntokens,
                         struct swift_objective_sums *s)
{
    long nitems = 0;
    *ntokens = 0;
    for (int a = 0; a < r->o->grad_accum; a++) {
        nitems += sb->ub[a].nitems;
        *ntokens += sb->ub[a].ntokens;
    }
    if (r->obj.rollout) {
        if ((nitems = rollout(r, sb, step)) < 0)
            return -1;
        *ntokens = r->obj.rollout_tokens;
    }
    if (train_sync_items(r, step + 1, &nitems, ntokens) < 0)
        return -1;
    float scale = nitems ? 1.0f / (float)nitems : 0.0f;
    int64_t t0 = swift_trace_now();
    for (int a = 0; a < r->o->grad_accum; a++)
        if (micro_step(r, &sb->ub[a], step, a, scale, s) < 0)
            return -1;
    if (r->obj.rollout) /* an RL step: generate, reward, ..., then this */
        swift_trace_span("compute", "train", t0, swift_trace_now(), NULL, 0);
    return 0;
}

/* After the last step: the final eval and checkpoint unless that step made them, "done". */
static int finish_steps(struct run *r, int saved_last)
{
    long last = r->max_steps;
    int ran = last > r->step0;
    if (r->val && (r->eval_steps <= 0 || last % r->eval_steps) && ran && train_eval(r, last) < 0)
        return SWIFT_FAILED;
    if (!saved_last && ran && train_save_checkpoint(r, last) < 0)
        return SWIFT_FAILED;
    train_log_done(r);
    return SWIFT_DONE;
}

static const char *signal_name(void)
{
    return stop_signal == SIGTERM   ? "SIGTERM"
           : stop_signal == SIGUSR1 ? "SIGUSR1"
           : stop_signal == SIGINT  ? "SIGINT"
                                    : "a signal on another rank";
}

/* Returns 0, -1 (reported) or SWIFT_STOPPED (stopped by a signal after a checkpoint). */
static int train_loop(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    int saved_last = 0;
    for (long step = r->step0; step < r->max_steps; step++) {
        enum swift_profile_action pa = swift_profile_action(&r->prof, step);
        /* per-op detail (and CUPTI) only in --profile's active steps; the device is synced and
         * CUPTI stopped only after such a step, never on an ordinary one */
        int detail = o->profile && (pa == SWIFT_PROF_RECORD || pa == SWIFT_PROF_RECORD_AND_SAVE);
        swift_trace_set_detail(detail);
        if (detail)
            r->be.ops->device_trace(1);
        int64_t t0 = swift_trace_now();
        double lr =
            swift_lr_at((enum swift_sched)o->lr_scheduler, r->lr, step, r->warmup, r->max_steps);
        if (r->lw)
            train_layerwise_begin(r, (float)lr);
        else if (r->vlm)
            swift_vlm_zero_grad(r->vlm); /* the vision groups' gradients too */
        else
            swift_model_zero_grad(r->m);

        /* data, forward and backward of every micro-batch, sums over ranks */
        int64_t tw = swift_trace_now();
        struct train_step *sb = train_loader_next(&r->loader);
        swift_trace_span("data", "data_wait", tw, swift_trace_now(), NULL, 0);
        long ntokens;
        struct swift_objective_sums s = {0};
        int bad = micro_batches(r, sb, step, &ntokens, &s);
        if (r->lw && !bad && train_layerwise_end(r) < 0)
            bad = -1;
        train_loader_release(&r->loader);
        int stop = stop_signal != 0; /* a signal on any rank stops all */
        if (bad < 0 || train_sync_grads(r, step + 1, &s, &stop) < 0)
            return SWIFT_FAILED;
        double loss = s.loss.count ? s.loss.sum / (double)s.loss.count : 0.0;
        if (!isfinite(loss)) {
            swift_error("loss is %s at step %ld; stopping", isnan(loss) ? "nan" : "inf", step + 1);
            return SWIFT_FAILED;
        }

        /* gradient norm (logged before clipping), clipping, AdamW */
        int64_t to = swift_trace_now();
        double gnorm;
        if (train_grad_norm(r, step + 1, &gnorm) < 0)
            return SWIFT_FAILED;
        if (!isfinite(gnorm)) {
            swift_error("gradient norm is %s at step %ld; stopping",
                        isnan(gnorm) ? "nan" : "inf",
                        step + 1);
            return SWIFT_FAILED;
        }
        float gscale = swift_clip_scale(gnorm, o->max_grad_norm);
        if (r->vlm)
            train_vl_lr(r, step);
        swift_adamw_step(&r->opt, (float)lr, gscale);
        if (r->gal.n && !r->lw && swift_galore_step(&r->gal, (float)lr, gscale) < 0)
            return SWIFT_FAILED;
        if (train_sync_params(r, step + 1) < 0)
            return SWIFT_FAILED;
        int64_t te = swift_trace_now();
        swift_trace_span("optim", "optimizer", to, te, NULL, 0);
        if (detail) { /* detail covers the step only, not the eval or checkpoint after it */
            swift_trace_set_detail(0);
            r->be.ops->device_trace(0);
        }

        /* records, eval, checkpoint, signal */
        long gs = step + 1;
        train_log_step(r, &(struct train_step_stats){gs, t0, te, ntokens, loss, gnorm, lr, &s});
        if (r->obj.log_samples && r->dist.rank == 0 &&
            (gs % o->logging_steps == 0 || gs == r->max_steps || gs == 1) &&
            r->obj.log_samples(&r->obj, o->output_dir, gs) < 0)
            return SWIFT_FAILED;
        saved_last = 0;
        if (r->val && r->eval_steps > 0 && gs % r->eval_steps == 0 && train_eval(r, gs) < 0)
            return SWIFT_FAILED;
        if ((o->save_steps > 0 && gs % o->save_steps == 0) || stop) {
            if (train_save_checkpoint(r, gs) < 0)
                return SWIFT_FAILED;
            saved_last = 1;
        }
        if (stop) {
            swift_info("%s: checkpoint-%ld written; exiting with 75", signal_name(), gs);
            return SWIFT_STOPPED;
        }
    }
    return finish_steps(r, saved_last);
}

struct swift_train {
    struct run R;
    struct swift_train_opts o; /* the caller's, output_dir the settled run directory */
    char *run_dir;
};

struct swift_train *swift_train_new(const struct swift_train_opts *o, int *status)
{
    struct swift_train *t = swift_xcalloc(1, sizeof(*t));
    t->o = *o;
    t->R.o = &t->o;
    t->R.m = &t->R.own;
    *status = start(&t->R);
    if (*status == 0) {
        /* before the trace opens: a trace file inside -o is not a reason to refuse it */
        t->run_dir = train_run_dir(o, &t->R.dist);
        if (!t->run_dir)
            *status = end_ranks(&t->R.dist, t->R.dist.failed, SWIFT_FAILED);
        t->o.output_dir = t->run_dir;
    }
    if (*status != 0) {
        free(t);
        return NULL;
    }
    return t;
}

void swift_train_trace_config(const struct swift_train *t, struct swift_trace_config *tc)
{
    const struct run *r = &t->R;
    memset(tc, 0, sizeof(*tc));
    tc->stage = "train";
    tc->path = r->o->trace;
    tc->rank = r->dist.rank;
    tc->world_size = r->dist.world;
    tc->device = r->be.name;
    tc->argc = r->o->argc;
    tc->argv = r->o->argv;
    tc->clock_offset_us = r->dist.clock_offset_us;
}

int swift_train_run(struct swift_train *t)
{
    struct run *r = &t->R;
    catch_stop_signals();
    int rerr;
    r->resume = train_resolve_resume(r->o, &rerr);
    if (rerr)
        return SWIFT_FAILED;
    return prepare(r) < 0 ? SWIFT_FAILED : train_loop(r);
}

int swift_train_free(struct swift_train *t, int status)
{
    if (!t)
        return status;
    status = finish(&t->R, status);
    free(t->run_dir);
    free(t);
    return status;
}
