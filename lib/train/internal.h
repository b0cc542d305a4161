/*
 * train internals shared by the files of lib/train (not a public header; train.h is the face).
 *
 *     train.c       swift_train_run: setup, the step loop, teardown
 *     loader.c      the shards opened and checked, epoch orders, the prefetch threads' ring
 *     objective.c   the objectives' table (objective.h: the interface; sft.c: SFT; dpo.c and
 *                   pref_loss.c: DPO, ORPO, SimPO, CPO on pair shards; kto.c, rm.c;
 *                   pref_rows.c: what the preference objectives share)
 *     sync.c        the loop's side of the ranks: step totals, gradients, norm, parameters
 *     eval.c        eval loss over the validation set
 *     reflogps.c    --precompute-ref-logps: the reference's log-probs once, stored next to
 *                   the shards
 *     checkpoint.c  checkpoint-N/ written and read, --save-total-limit, --resume
 *     rundir.c      the run directory: refused when not empty, --add-version, --force
 *     log.c         args.json, logging.jsonl and stdout records, trace counters, MFU peak
 *     optim.c, dist.c  AdamW and schedules; MPI/NCCL collectives (their own headers)
 *     layerwise.c   --galore-optim-per-parameter: GaLore steps inside backward
 *
 * One `struct run` holds everything a run owns; every function here takes it (or part of it)
 * and reports its errors itself before returning -1.
 */
#ifndef SWIFT_TRAIN_INTERNAL_H
#define SWIFT_TRAIN_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "lib/model/backend.h"
#include "lib/core/profile.h"
#include "lib/core/progress.h"
#include "lib/formats/shard.h"
#include "lib/model/lora.h"
#include "lib/model/model.h"
#include "lib/model/vlm.h"
#include "lib/train/dist.h"
#include "lib/train/objective.h"
#include "lib/train/galore.h"
#include "lib/train/optim.h"
#include "lib/train/train.h"

/* ---- loader.c ---- */

/* One micro-batch: rows of T tokens (samples x the objective's rows_per_sample). */
struct train_ubatch {
    int32_t *tok, *tgt, *pos; /* (rows*T) */
    struct swift_sample *xs;  /* (samples) what filled the rows, for an objective's rollout */
    long nitems;              /* what the loss averages over (objective.h: fill's return) */
    long ntokens;             /* tokens of the samples (the step span's "tokens") */
    /* a vision-language model's images (vl.c): the samples' pixel patches and grids in order */
    float *pix;
    size_t pix_cap; /* floats */
    int32_t *grid;  /* (nimages, 3) */
    int npatches, nimages, grid_cap;
    int pix_err; /* an image could not be loaded (reported on the loader thread) */
};

/* One step's micro-batches in the prefetch ring. */
struct train_step {
    struct train_ubatch *ub; /* grad_accum micro-batches */
    long step;
    int ready; /* filled, waiting for the trainer */
};

/* Epoch orders are cached per worker: workers fill different steps at once and may stand in
 * different epochs, so none shares a permutation that another is rebuilding. */
struct train_perm {
    uint32_t *perm;
    long epoch;
};

/* --dataloader-num-workers threads fill whole steps (all micro-batches) into a ring of
 * --prefetch slots; step s always lands in slot s % depth and the trainer takes steps in order,
 * so which samples make a step never depends on the number of workers. Set the fields up to
 * `depth`, then train_loader_start. */
struct train_loader {
    struct swift_shards *s;
    const struct swift_objective *obj; /* fills the rows */
    char *image_dir;                   /* image shards: the cache directory, else NULL */
    uint64_t n;                        /* samples */
    int B, T, GA;                      /* samples per micro-batch, tokens per row, micro-batches */
    int rank, world;                   /* this rank's slice of each global step */
    long seed;
    long steps_per_epoch; /* floor(n / (B x GA x world)): global data steps per epoch */
    int repeat;           /* optimizer steps per data step (objective.h repeat; >= 1) */
    long delay_ms;
    int nworkers, depth;
    struct train_step *ring;  /* depth slots */
    struct train_perm *perms; /* one per worker */
    long next_claim, next_take, end_step;
    int quit;
    pthread_t *th;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* splitmix64's finalizer: epoch orders from (seed, epoch), dropout seeds from (seed, step). */
uint64_t train_mix(uint64_t x);
/* The sample (index into the shards) of row `row` of micro-batch `a` of 0-based global step
 * `step` on L->rank. The global batch is G = B x GA x world samples; step s takes positions
 * [j*G, (j+1)*G) of epoch e's order (e = s / steps_per_epoch, j = s % steps_per_epoch; the order
 * is a shuffle seeded by (seed, e)), rank r the B x GA of them from r*B*GA, micro-batch a the B
 * from there + a*B. So the samples of a step depend on (seed, step, G) only, never on how G is
 * split into ranks and micro-batches, and a resume at step s continues the same sequence. The
 * n mod G samples at the end of each epoch's order are left out of that epoch (every step is a
 * full global batch; the next epoch's shuffle leaves out others): like drop_last, where
 * transformers' default (drop_last false) would make the last step of an epoch smaller. Needs
 * L->n, B, GA, rank, world, seed and steps_per_epoch (>= 1); pc caches the order of one epoch
 * (perm of n entries, epoch -1 when empty) and is rebuilt when step moves to another epoch. */
uint32_t train_loader_sample(const struct train_loader *L, struct train_perm *pc, long step, int a,
                             int row);
/* rows of T tokens made of `samples` samples */
void train_ubatch_alloc(struct train_ubatch *u, int rows, int T, int samples);
void train_ubatch_free(struct train_ubatch *u);
/* Start the workers on steps [start_step, end_step). Returns 0 or -1. */
int train_loader_start(struct train_loader *L, long start_step, long end_step);
/* Wait for the next step's micro-batches; the slot stays owned until train_loader_release. */
struct train_step *train_loader_next(struct train_loader *L);
void train_loader_release(struct train_loader *L);
/* Join the workers and free; safe on a zeroed or half-started loader. */
void train_loader_stop(struct train_loader *L);

/* ---- the run ---- */

struct train_log {
    FILE *fp;                 /* logging.jsonl; NULL on ranks other than 0 */
    double t_start;           /* train_now_s() at the first step */
    double peak_gflops;       /* for MFU */
    double flops_tok;         /* forward+backward FLOPs per token */
    double win_vflops;        /* a VL model's vision FLOPs since the last record (x world) */
    double win_t, win_tokens; /* since the last record */
    long win_steps;
    struct swift_progress pr; /* the progress line on a terminal (rank 0) */
    long last_gs;             /* the last step, its loss and learning rate (the final line) */
    double last_loss, last_lr;
};

struct run {
    const struct swift_train_opts *o;
    struct swift_dist dist;
    struct swift_backend be;
    struct swift_profile prof;
    struct swift_model *m; /* &own, or &vlm->llm for a vision-language model */
    struct swift_model own;
    char *val_image_dir;       /* the validation shards' image cache (vision-language model) */
    struct swift_vlm *vlm;     /* Qwen2-VL / Qwen2.5-VL (vlm.h), else NULL */
    struct swift_param *vl_tp; /* its trainable parameters (vl.c), r->tp */
    struct swift_lora_opts lo;
    struct swift_objective obj;
    struct swift_adamw opt;      /* over tp, or with GaLore over adam_tp */
    struct swift_galore gal;     /* --galore-rank: its weights (gal.n 0: off) */
    struct swift_param *adam_tp; /* --galore-rank: the parameters GaLore does not take */
    struct train_layerwise *lw;  /* --galore-optim-per-parameter (layerwise.c), else NULL */
    struct swift_param *tp;      /* trainable parameters */
    int ntp;
    struct swift_shards *train, *val;
    struct train_loader loader;
    char *resume; /* the checkpoint resumed from, or NULL */
    int T;
    int mbs; /* samples per micro-batch: --per-device-train-batch-size, or its rows / the
              * objective's rows_per_sample when it counts rows (objective.h batch_rows) */
    long steps_per_epoch, max_steps, warmup, eval_steps;
    double lr;
    char *config_path;
    long step0; /* first step of this process (after resume) */
    /* --precompute-ref-logps (reflogps.c): the reference's log-prob of each row (2 per pair)
     * of the training and validation shards; ref_perm: the epoch order for their lookup */
    double *ref_train, *ref_val;
    struct train_perm ref_perm;
    struct train_log log;
};

/* Open the shards of dir and check every sample against the model: the tokenizer's sha256,
 * lengths against r->T, token ids against the vocabulary. Returns 0 or -1. */
int train_open_shards(struct run *r, struct swift_shards **s, const char *dir);
/* The shards' kind (index.json) against the objective's (reported, naming the swift-preprocess
 * option that makes the right ones). Returns 0 or -1. */
int train_check_kind(const struct run *r, const struct swift_shard_index *ix, const char *dir);

/* ---- vl.c: Qwen2-VL / Qwen2.5-VL (docs/multimodal.md "Training") ---- */

/* 1 if model_dir's config.json is a qwen2_vl or qwen2_5_vl model. */
int train_vl_detect(const char *model_dir);
/* Load r->vlm from wdir (LoRA on its language model is attached by the caller) with the
 * groups --freeze-vit, --freeze-aligner, --freeze-llm and the tuner leave frozen; r->m becomes
 * its language model. Refuses what is not supported yet. 0 or -1 (reported). */
int train_vl_load(struct run *r, const char *wdir);
/* r->tp: the language model's trainable parameters (its adapters, or all of them under --tuner
 * full) then the vision parameters of the trainable groups (r->vl_tp, owned). */
int train_vl_params(struct run *r);
/* After AdamW is built over them: its learning-rate groups (the ViT, the aligner). */
void train_vl_groups(struct run *r);
/* Before the step (0-based): the ViT's and the aligner's learning rates (--vit-lr,
 * --aligner-lr, else --learning-rate) through the schedule, as the main one. */
void train_vl_lr(struct run *r, long step);
/* The checkpoint's weights: the adapter with the trained vision tensors (LoRA), or the whole
 * model as the input's Hugging Face directory (full; the tokenizer files are the caller's). */
int train_vl_save(struct run *r, const char *dir);
void train_vl_free(struct run *r);
/* The pixels and grids of u's first nsamples samples from the cache dir (loader threads);
 * delay_ms: testing only (--data-delay-ms), a sleep inside the image_load span. */
int train_vl_pixels(struct train_ubatch *u, const char *dir, int nsamples, long delay_ms);
/* Forward (and backward) of micro-batch u of B rows through r->vlm: loss into s. */
int train_vl_forward(struct run *r, const struct train_ubatch *u, int B, float scale,
                     struct swift_objective_sums *s, int backward);

/* ---- layerwise.c: --galore-optim-per-parameter (after swift_galore_init, before the AdamW
 * of the other parameters is built: it re-points their gradients) ---- */
struct train_layerwise;
int train_layerwise_init(struct run *r);
/* Before the step's backward (instead of swift_model_zero_grad): zero, this step's lr. */
void train_layerwise_begin(struct run *r, float lr);
/* After it: -1 if an update failed (reported), else the GaLore step is counted. */
int train_layerwise_end(struct run *r);
/* The GaLore weights' gradients' sum of squares this step (taken before their updates). */
double train_layerwise_sumsq(const struct run *r);
void train_layerwise_free(struct run *r);

/* ---- sync.c: on one rank each leaves its inputs as they are (no collective); gs is the
 * 1-based step, for messages ---- */

/* A check-in at `what` that sums s (loss and extra) over ranks; *flag (may be NULL) OR-ed. */
int train_sum_over_ranks(struct run *r, const char *what, long step, struct swift_objective_sums *s,
                         int *flag);
/* The step's items and tokens summed over ranks (they scale every rank's loss). */
int train_sync_items(struct run *r, long gs, long *nitems, long *ntokens);
/* Sum the step's loss sums and gradients over ranks (ZeRO-1: reduce-scatter); *stop OR-ed
 * over ranks, so a signal on any rank stops all at the same step. */
int train_sync_grads(struct run *r, long gs, struct swift_objective_sums *s, int *stop);
/* The gradient norm of the whole model over all ranks (before clipping). */
int train_grad_norm(struct run *r, long gs, double *norm);
/* ZeRO-1: every rank's updated range of the parameters to every rank. */
int train_sync_params(struct run *r, long gs);

/* ---- reflogps.c: --precompute-ref-logps ---- */

/* Before the first step: the reference log-probs of the training and validation shards, read
 * from DIR/ref_logps-<key>.bin (or the run directory's) when their key matches, else computed
 * (span "ref_logps") and stored there by rank 0. Returns 0 or -1. */
int train_ref_logps(struct run *r);
/* Hand the stored reference of micro-batch a of 0-based step `step` to the objective. */
int train_ref_logps_step(struct run *r, const struct swift_batch *b, long step, int a);
/* The same for an eval batch: samples first .. first + B - 1 of the validation set (padding
 * rows past its end). */
int train_ref_logps_val(struct run *r, const struct swift_batch *b, uint64_t first);
void train_ref_logps_free(struct run *r);

/* ---- eval.c ---- */

/* Eval loss over the whole validation set, in order; the eval record and span. */
int train_eval(struct run *r, long step);

/* ---- checkpoint.c ---- */

/* Every rank calls this; rank 0 writes checkpoint-<step>. All ranks return -1 when the write
 * failed on rank 0. */
int train_save_checkpoint(struct run *r, long step);
/* The optimizer state of checkpoint dir into r->opt (this rank's range under ZeRO-1), the
 * master weights into the parameters when the file has them. */
int train_load_optimizer(struct run *r, const char *dir);
/* --resume: a checkpoint dir, or "latest" in the output dir. Returns a malloc'ed path, NULL
 * with *err set on failure, NULL without err when there is nothing to resume. */
char *train_resolve_resume(const struct swift_train_opts *o, int *err);
/* The global step of a checkpoint's trainer_state.json, checked against this run's options. */
int train_read_state(const char *ckpt, long *step, const struct swift_train_opts *o, int world);
/* Remove what a run killed while checkpointing left behind (.checkpoint-N.tmp-PID). */
void train_remove_stale_tmp(const char *dir);

/* ---- rundir.c ---- */

/* The run directory of this run (malloc'ed), settled by rank 0 and told to the others before
 * anything is written: o->output_dir, or a version directory under it (--add-version: a new
 * v<N>-<YYYYMMDD-HHMMSS>, made now; with --resume latest the newest existing one); refused
 * (NULL, reported on rank 0, nothing touched) when it holds anything and neither --resume nor
 * --force is given; --force removes a previous run's files, refusing when anything else is
 * there. Every rank calls it (a check-in). */
char *train_run_dir(const struct swift_train_opts *o, struct swift_dist *d);

/* ---- log.c ---- */

/* CLOCK_MONOTONIC, seconds */
double train_now_s(void);
/* OUTPUT_DIR/args.json (rank 0). */
int train_write_args(const struct swift_train_opts *o, int math);
/* Open logging.jsonl (rank 0; appended on resume) and settle the MFU peak. */
int train_log_open(struct run *r);
void train_log_close(struct run *r);
/* A record to logging.jsonl and stdout (rank 0 only; takes the reference, NULL ignored). */
void train_emit(struct run *r, json_t *rec);

/* What one step measured, for train_log_step. */
struct train_step_stats {
    long gs;        /* the step just taken, 1-based */
    int64_t t0, t1; /* the step span */
    long ntokens;   /* over all ranks */
    double loss, gnorm, lr;
    const struct swift_objective_sums *sums;
};
/* The step span and counters; every --logging-steps (and the first and last step) a record. */
void train_log_step(struct run *r, const struct train_step_stats *st);
/* The eval record: eval_loss, the objective's metrics as eval_*, eval_<item> (its count). */
void train_log_eval(struct run *r, long step, const struct swift_objective_sums *s, double loss);
/* The closing {"event":"done"} line on stdout (rank 0). */
void train_log_done(struct run *r);

#endif
