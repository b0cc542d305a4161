/* log — what a run writes for people and scripts: args.json, a logging.jsonl record (also on
 * stdout) every --logging-steps and per evaluation, the closing "done" line, the step span and
 * counters of the trace, the peak rate MFU is measured against, and on a terminal the progress
 * line on stderr (lib/core/progress.h). Rank 0 alone writes files, stdout and the line. */
#include "lib/train/internal.h"
#include "lib/core/mem.h"
#include "lib/train/pref_loss.h"

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
#include "lib/core/record.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

double train_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double swift_sgemm_peak_gflops(void)
{
    int n = 1024;
    float *a = swift_xcalloc((size_t)n * n, 4), *b = swift_xcalloc((size_t)n * n, 4),
          *c = swift_xcalloc((size_t)n * n, 4);
    for (size_t i = 0; i < (size_t)n * n; i++)
        a[i] = b[i] = (float)(i % 7) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = train_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double dt = train_now_s() - t0;
        double g = 2.0 * n * n * n / dt / 1e9;
        if (g > best)
            best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static void fmt_time(char *buf, size_t cap, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ldh %ldm %lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60)
        snprintf(buf, cap, "%ldm %lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%lds", t);
}

static double rss_gib(void)
{
    long pages = 0, rss = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp) {
        if (fscanf(fp, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(fp);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024 * 1024);
}

#define GIB (1024.0 * 1024 * 1024)

/* Our own accounting (lib/core/mem.h): the peak of the total since the model was loaded, and
 * each category's bytes at that moment; as a counter (bytes) "memory_by_category". */
static void memory_counter(const struct swift_mem_stats *ms)
{
    struct swift_targ s[SWIFT_MEM_NCAT + 1];
    for (int c = 0; c < SWIFT_MEM_NCAT; c++)
        s[c] = (struct swift_targ)SWIFT_TARG_D(swift_mem_name(c), (double)ms->at_peak[c]);
    s[SWIFT_MEM_NCAT] = (struct swift_targ)SWIFT_TARG_D("total", (double)ms->total_peak);
    swift_trace_counters("memory_by_category", s, SWIFT_MEM_NCAT + 1);
}

/* "memory(GiB)" (the accounted peak), "rss(GiB)" (the process's resident set, what
 * memory(GiB) was before), "memory/<category>(GiB)" at the peak; the counter beside */
static json_t *memory_keys(void)
{
    struct swift_mem_stats ms;
    swift_mem_snapshot(&ms);
    memory_counter(&ms);
    json_t *o =
        json_pack("{s:f,s:f}", "memory(GiB)", (double)ms.total_peak / GIB, "rss(GiB)", rss_gib());
    for (int c = 0; o && c < SWIFT_MEM_NCAT; c++) {
        char k[48];
        snprintf(k, sizeof(k), "memory/%s(GiB)", swift_mem_name(c));
        json_object_set_new(o, k, json_real((double)ms.at_peak[c] / GIB));
    }
    return o;
}

void train_emit(struct run *r, json_t *rec)
{
    if (!r->log.fp) { /* not rank 0 */
        json_decref(rec);
        return;
    }
    swift_record_print(r->log.fp, rec, SWIFT_RECORD_DIGITS_EXACT);
    fflush(r->log.fp);
    swift_progress_clear(&r->log.pr); /* stdout may share the terminal */
    swift_record_print(stdout, rec, SWIFT_RECORD_DIGITS_EXACT);
    fflush(stdout);
    json_decref(rec);
}

/* args.json's GRPO keys (TRL's GRPOConfig names), with the defaults resolved */
static void train_grpo_args(const struct swift_train_opts *o, json_t *a)
{
    static const char *const lt[] = {"grpo", "bnpo", "dr_grpo", "dapo"};
    static const char *const sc[] = {"group", "batch", "none"};
    json_object_set_new(a, "rlhf_type", json_string("grpo"));
    json_object_set_new(a, "beta", json_real(o->beta >= 0 ? o->beta : 0.0));
    json_object_set_new(
        a, "loss_type", json_string(lt[o->grpo_loss_type >= 0 ? o->grpo_loss_type : 3]));
    json_object_set_new(a, "num_generations", json_integer(o->num_generations));
    json_object_set_new(a, "max_completion_length", json_integer(o->max_completion_length));
    json_object_set_new(a, "temperature", json_real(o->temperature));
    json_object_set_new(a, "top_p", json_real(o->top_p));
    json_object_set_new(a, "epsilon", json_real(o->epsilon));
    json_object_set_new(
        a, "epsilon_high", json_real(o->epsilon_high >= 0 ? o->epsilon_high : o->epsilon));
    json_object_set_new(a, "num_iterations", json_integer(o->num_iterations));
    json_object_set_new(
        a, "scale_rewards", json_string(sc[o->scale_rewards >= 0 ? o->scale_rewards : 0]));
    json_t *f = json_array();
    for (int i = 0; i < o->nreward_funcs; i++)
        json_array_append_new(f, json_string(o->reward_funcs[i]));
    json_object_set_new(a, "reward_funcs", f);
    json_t *c = json_array();
    for (int i = 0; i < o->nreward_cmds; i++)
        json_array_append_new(c, json_string(o->reward_cmds[i]));
    json_object_set_new(a, "reward_cmds", c);
    json_object_set_new(
        a, "reward_model", o->reward_model ? json_string(o->reward_model) : json_null());
    json_object_set_new(
        a, "reward_weights", o->reward_weights ? json_string(o->reward_weights) : json_null());
    json_object_set_new(a, "reward_timeout", json_real(o->reward_timeout));
}

int train_write_args(const struct swift_train_opts *o, int math)
{
    json_t *a = json_pack(
        "{s:s,s:s,s:s?,s:s,s:s,s:i,s:f,s:f,s:b,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:s,s:i,s:i,s:i,"
        "s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:s?}",
        "model",
        o->model,
        "dataset",
        o->dataset,
        "val_dataset",
        o->val_dataset,
        "output_dir",
        o->output_dir,
        "train_type",
        o->tuner == SWIFT_TUNER_LORA ? "lora" : "full",
        "lora_rank",
        o->lora_rank,
        "lora_alpha",
        o->lora_alpha,
        "lora_dropout",
        o->lora_dropout,
        "use_dora",
        o->lora_dora,
        "target_modules",
        o->target_modules,
        "learning_rate",
        o->learning_rate,
        "weight_decay",
        o->weight_decay,
        "adam_beta1",
        o->adam_beta1,
        "adam_beta2",
        o->adam_beta2,
        "adam_epsilon",
        o->adam_epsilon,
        "max_grad_norm",
        o->max_grad_norm,
        "warmup_ratio",
        o->warmup_ratio,
        "warmup_steps",
        (json_int_t)o->warmup_steps,
        "lr_scheduler_type",
        o->lr_scheduler == SWIFT_SCHED_LINEAR     ? "linear"
        : o->lr_scheduler == SWIFT_SCHED_CONSTANT ? "constant"
                                                  : "cosine",
        "per_device_train_batch_size",
        o->batch_size,
        "gradient_accumulation_steps",
        o->grad_accum,
        "max_length",
        o->max_length,
        "num_train_epochs",
        o->num_train_epochs,
        "max_steps",
        (json_int_t)o->max_steps,
        "seed",
        (json_int_t)o->seed,
        "save_steps",
        (json_int_t)o->save_steps,
        "save_total_limit",
        (json_int_t)o->save_total_limit,
        "eval_steps",
        (json_int_t)o->eval_steps,
        "logging_steps",
        (json_int_t)o->logging_steps,
        "resume_from_checkpoint",
        o->resume);
    if (!a)
        abort();
    json_object_set_new(a, "gradient_checkpointing", json_boolean(o->gradient_checkpointing));
    json_object_set_new(
        a, "torch_dtype", json_string(math == SWIFT_MATH_BF16 ? "bfloat16" : "float32"));
    if (o->rlhf && !strcmp(o->rlhf, "grpo")) {
        train_grpo_args(o, a);
    } else if (o->rlhf) { /* ms-swift's keys, with the defaults the objective resolves */
        int simpo = !strcmp(o->rlhf, "simpo"), orpo = !strcmp(o->rlhf, "orpo");
        int kto = !strcmp(o->rlhf, "kto");
        int lt = o->loss_type >= 0 ? o->loss_type
                 : simpo           ? SWIFT_PREF_SIMPO
                 : kto             ? SWIFT_PREF_KTO
                                   : SWIFT_PREF_SIGMOID;
        json_object_set_new(a, "rlhf_type", json_string(o->rlhf));
        json_object_set_new(a, "beta", json_real(o->beta > 0 ? o->beta : simpo ? 2.0 : 0.1));
        json_object_set_new(
            a, "loss_type", orpo ? json_null() : json_string(swift_pref_loss_name(lt)));
        json_object_set_new(a, "label_smoothing", json_real(o->label_smoothing));
        json_object_set_new(a, "rpo_alpha", json_real(o->rpo_alpha));
        json_object_set_new(a, "simpo_gamma", json_real(o->simpo_gamma));
        json_object_set_new(a, "cpo_alpha", json_real(o->cpo_alpha));
        json_object_set_new(a, "desirable_weight", json_real(o->desirable_weight));
        json_object_set_new(a, "undesirable_weight", json_real(o->undesirable_weight));
        json_object_set_new(a, "precompute_ref_log_probs", json_boolean(o->precompute_ref_logps));
    }
    json_object_set_new(a, "swift_tools_version", json_string(SWIFT_VERSION));
    char *txt = json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(a);
    if (!txt)
        abort();
    char *p = swift_path_join(o->output_dir, "args.json");
    int rc = swift_atomic_write(p, txt, strlen(txt));
    free(txt);
    free(p);
    return rc;
}

int train_log_open(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    char *lp = swift_path_join(o->output_dir, "logging.jsonl");
    r->log.fp = r->dist.rank == 0 ? fopen(lp, r->resume ? "a" : "w") : NULL;
    if (!r->log.fp && r->dist.rank == 0) {
        swift_error_errno("cannot open '%s'", lp);
        free(lp);
        return -1;
    }
    free(lp);
    swift_progress_init(&r->log.pr, r->dist.rank == 0 ? o->progress : SWIFT_PROGRESS_OFF);
    /* bf16: the measured bf16 GEMM rate (the dtype's peak), so MFU stays honest */
    int bf16 = r->be.math == SWIFT_MATH_BF16;
    r->log.peak_gflops = o->peak_gflops > 0      ? o->peak_gflops
                         : r->be.peak_gflops > 0 ? r->be.peak_gflops
                         : bf16                  ? swift_backend_matmul_peak_gflops(&r->be)
                                                 : swift_sgemm_peak_gflops();
    if (bf16 && !r->be.cuda) /* which kernel the bf16 GEMMs run on: 1 fast, 0 a fallback */
    {
        swift_trace_counter("bf16_fast_path", r->be.math_fast);
        struct swift_targ a[] = {SWIFT_TARG_S("impl", r->be.math_impl),
                                 SWIFT_TARG_I("fast", r->be.math_fast),
                                 SWIFT_TARG_D("peak_gflops", r->log.peak_gflops)};
        swift_trace_instant("train", "bf16_matmul", a, 3);
    }
    /* --profile: the peak that swift-trace-analyze sets the per-op spans' FLOP rates against;
     * a VL model: the MFU of its multimodal view (the forward_backward spans' flops) */
    if ((o->profile || r->vlm) && r->log.peak_gflops > 0)
        swift_trace_counter("peak_gflops", r->log.peak_gflops);
    struct swift_mem_stats ms;
    swift_mem_snapshot(&ms);
    memory_counter(&ms);
    return 0;
}

void train_log_close(struct run *r)
{
    swift_progress_end(&r->log.pr);
    if (r->log.fp)
        fclose(r->log.fp);
    r->log.fp = NULL;
}

/* head's keys, then tail's (the record's order is insertion order); NULL if either is */
static json_t *joined(json_t *head, json_t *tail)
{
    if (head && tail && json_object_update(head, tail) == 0) {
        json_decref(tail);
        return head;
    }
    json_decref(head);
    json_decref(tail);
    return NULL;
}

/* ms-swift's train record plus tokens/s and MFU, over the steps since the last record */
static void step_record(struct run *r, const struct train_step_stats *st)
{
    struct train_log *lg = &r->log;
    long gs = st->gs;
    double t = train_now_s(), el = t - lg->t_start, dt = t - lg->win_t;
    double sps = dt / (double)(lg->win_steps ? lg->win_steps : 1);
    double tps = dt > 0 ? lg->win_tokens / dt : 0;
    char gsb[64], elb[32], rmb[32], pct[16];
    snprintf(gsb, sizeof(gsb), "%ld/%ld", gs, r->max_steps);
    snprintf(pct, sizeof(pct), "%.2f%%", 100.0 * (double)gs / (double)r->max_steps);
    fmt_time(elb, sizeof(elb), el);
    fmt_time(rmb, sizeof(rmb), el / (double)(gs - r->step0) * (double)(r->max_steps - gs));
    json_t *rec = json_pack(
        "{s:f,s:f,s:f}", "loss", st->loss, "grad_norm", st->gnorm, "learning_rate", st->lr);
    if (rec)
        r->obj.log(&r->obj, st->sums, "", rec);
    json_t *tail = json_pack("{s:f,s:s,s:s,s:s,s:s}",
                             "epoch",
                             (double)gs / (double)r->steps_per_epoch,
                             "global_step/max_steps",
                             gsb,
                             "percentage",
                             pct,
                             "elapsed_time",
                             elb,
                             "remaining_time",
                             rmb);
    json_t *perf =
        json_pack("{s:f,s:f,s:f}",
                  "train_speed(s/it)",
                  sps,
                  "tokens/s",
                  tps,
                  "MFU",
                  lg->peak_gflops > 0 && dt > 0 ? (tps * lg->flops_tok + lg->win_vflops / dt) /
                                                      (lg->peak_gflops * 1e9 * r->dist.world)
                                                : 0.0);
    train_emit(r, joined(joined(joined(rec, tail), memory_keys()), perf));
    lg->win_t = t;
    lg->win_tokens = 0;
    lg->win_vflops = 0;
    lg->win_steps = 0;
}

/* The progress line: step, elapsed time and ETA, loss, learning rate, tokens/s (the fields cut
 * last first on a narrow terminal; final: the last line, ended). Tokens are counted as in the
 * records (padded rows of every rank). */
static void progress_line(struct run *r, int final)
{
    struct train_log *lg = &r->log;
    if (!final && !swift_progress_due(&lg->pr))
        return;
    const struct swift_train_opts *o = r->o;
    long gs = lg->last_gs, done = gs - r->step0;
    double el = train_now_s() - lg->t_start;
    double tps =
        el > 0 ? (double)done * o->batch_size * o->grad_accum * r->T * r->dist.world / el : 0.0;
    char elb[24], eta[40] = "";
    swift_progress_hms(elb, sizeof(elb), el);
    if (!final) {
        char t[24];
        swift_progress_hms(
            t, sizeof(t), done > 0 ? el / (double)done * (double)(r->max_steps - gs) : 0);
        snprintf(eta, sizeof(eta), ", ETA %s", t);
    }
    swift_progress_show(&lg->pr,
                        "train: step %ld/%ld (%.0f%%), %s elapsed%s, loss %.4f, lr %.2e, "
                        "%.0f tokens/s%s",
                        gs,
                        r->max_steps,
                        100.0 * (double)gs / (double)(r->max_steps ? r->max_steps : 1),
                        elb,
                        eta,
                        lg->last_loss,
                        lg->last_lr,
                        tps,
                        final ? ", done." : "");
}

void train_log_step(struct run *r, const struct train_step_stats *st)
{
    const struct swift_train_opts *o = r->o;
    long gs = st->gs;
    swift_trace_span(
        "step",
        "step",
        st->t0,
        st->t1,
        (struct swift_targ[]){SWIFT_TARG_I("step", gs),
                              SWIFT_TARG_I("tokens", st->ntokens),
                              SWIFT_TARG_I("samples", (long)o->batch_size * o->grad_accum)},
        3);
    double step_s = (double)(st->t1 - st->t0) * 1e-9;
    swift_trace_counter("loss", st->loss);
    swift_trace_counter("lr", st->lr);
    swift_trace_counter("grad_norm", st->gnorm);
    swift_trace_counter("tokens/s", step_s > 0 ? (double)st->ntokens / step_s : 0);
    swift_trace_counter("RSS", rss_gib() * 1024.0 * 1024 * 1024);
    r->log.win_tokens += (double)o->batch_size * o->grad_accum * r->T * r->dist.world;
    r->log.win_steps++;
    if (gs % o->logging_steps == 0 || gs == r->max_steps || gs == 1)
        step_record(r, st);
    r->log.last_gs = gs;
    r->log.last_loss = st->loss;
    r->log.last_lr = st->lr;
    progress_line(r, 0);
}

void train_log_eval(struct run *r, long step, const struct swift_objective_sums *s, double loss)
{
    char gs[64], key[64];
    snprintf(gs, sizeof(gs), "%ld/%ld", step, r->max_steps);
    snprintf(key, sizeof(key), "eval_%s", r->obj.item);
    json_t *rec = json_pack("{s:f}", "eval_loss", loss);
    if (rec)
        r->obj.log(&r->obj, s, "eval_", rec);
    train_emit(r,
               joined(rec,
                      json_pack("{s:f,s:s,s:I}",
                                "epoch",
                                (double)step / (double)r->steps_per_epoch,
                                "global_step/max_steps",
                                gs,
                                key,
                                (json_int_t)s->loss.count)));
}

void train_log_done(struct run *r)
{
    char nm[64];
    snprintf(nm, sizeof(nm), "checkpoint-%ld", r->max_steps);
    char *p = swift_path_join(r->o->output_dir, nm);
    if (r->log.last_gs > 0)
        progress_line(r, 1);
    swift_progress_end(&r->log.pr);
    json_t *done = json_pack("{s:i,s:s,s:s?,s:I,s:f}",
                             "version",
                             1,
                             "event",
                             "done",
                             "last_checkpoint",
                             p,
                             "global_step",
                             (json_int_t)r->max_steps,
                             "train_runtime",
                             train_now_s() - r->log.t_start);
    if (done && r->dist.rank == 0)
        swift_record_print(stdout, done, SWIFT_RECORD_DIGITS_EXACT);
    json_decref(done);
    free(p);
}
