/* train — see train.h. */
#include "lib/train/train.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */
#include <jansson.h>

#include "kernels/ops.h"
#include "lib/core/cli.h"
#include "lib/train/dist.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "lib/model/model.h"
#include "lib/train/optim.h"
#include "lib/core/profile.h"
#include "lib/formats/safetensors.h"
#include "lib/core/sha256.h"
#include "lib/formats/shard.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

void swift_train_opts_init(struct swift_train_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->tuner = SWIFT_TUNER_LORA; /* ms-swift's default train_type */
    o->lora_rank = 8;
    o->lora_alpha = 32;
    o->lora_dropout = 0.05;
    o->target_modules = "all-linear";
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
    o->dist_timeout = 300;
    o->delay_rank = -1;
    o->num_workers = 1;
    o->prefetch = 3;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double swift_sgemm_peak_gflops(void)
{
    int n = 1024;
    float *a = calloc((size_t)n * n, 4), *b = calloc((size_t)n * n, 4),
          *c = calloc((size_t)n * n, 4);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return 0;
    }
    for (size_t i = 0; i < (size_t)n * n; i++)
        a[i] = b[i] = (float)(i % 7) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double dt = now_s() - t0;
        double g = 2.0 * n * n * n / dt / 1e9;
        if (g > best)
            best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* ---- signals ---- */

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig)
{
    stop_signal = sig;
}

/* ---- data: an epoch-shuffled order of samples, micro-batches from a prefetch thread ---- */

struct ubatch {
    int32_t *tok, *tgt, *pos; /* (B*T) */
    long ntrain, ntokens;
    int nsamples;
};

struct stepbuf {
    struct ubatch *ub; /* grad_accum micro-batches */
    long step;
    int ready; /* filled, waiting for the trainer */
};

/* Epoch orders are cached per worker: workers fill different steps at once and may stand in
 * different epochs, so none shares a permutation that another is rebuilding. */
struct perm_cache {
    uint32_t *perm;
    long epoch;
};

/* --dataloader-num-workers threads fill whole steps (all micro-batches) into a ring of
 * --prefetch slots; step s always lands in slot s % depth and the trainer takes steps in order,
 * so which samples make a step never depends on the number of workers. */
struct loader {
    struct swift_shards *s;
    uint64_t n; /* samples */
    int B, T, GA;
    int rank, world; /* this rank's slice of each global step */
    long seed;
    long mb_per_epoch; /* micro-batches per epoch */
    long delay_ms;
    int nworkers, depth;
    struct stepbuf *ring;     /* depth slots */
    struct perm_cache *perms; /* one per worker */
    long next_claim, next_take, end_step;
    int quit;
    pthread_t *th;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct worker_arg {
    struct loader *L;
    int id;
};

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void make_perm(struct loader *L, struct perm_cache *pc, long epoch)
{
    for (uint64_t i = 0; i < L->n; i++)
        pc->perm[i] = (uint32_t)i;
    uint64_t st = (uint64_t)L->seed * 1000003ULL + (uint64_t)epoch;
    for (uint64_t i = L->n; i > 1; i--) {
        st = mix(st);
        uint64_t j = st % i;
        uint32_t t = pc->perm[i - 1];
        pc->perm[i - 1] = pc->perm[j];
        pc->perm[j] = t;
    }
    pc->epoch = epoch;
}

/* One row of T tokens from a sample: positions restart per document, token t targets t+1 of
 * the same document when mask[t+1]; padding is a document of its own with no targets. */
static void fill_row(int32_t *tok, int32_t *tgt, int32_t *pos, const struct swift_sample *x, int T,
                     long *ntrain)
{
    uint32_t d = 0, start = 0, end = x ? (x->n_docs ? x->doc_len[0] : x->len) : 0;
    uint32_t len = x ? x->len : 0;
    for (int t = 0; t < T; t++) {
        if ((uint32_t)t < len) {
            while ((uint32_t)t >= end && d + 1 < x->n_docs) {
                start = end;
                end += x->doc_len[++d];
            }
            tok[t] = (int32_t)x->ids[t];
            pos[t] = t - (int32_t)start;
            int ok = (uint32_t)t + 1 < end && x->mask[t + 1];
            tgt[t] = ok ? (int32_t)x->ids[t + 1] : -1;
            *ntrain += ok;
        } else {
            tok[t] = 0;
            pos[t] = t - (int32_t)len;
            tgt[t] = -1;
        }
    }
}

static void fill_step(struct loader *L, struct perm_cache *pc, struct stepbuf *sb, long step)
{
    sb->step = step;
    for (int a = 0; a < L->GA; a++) {
        struct ubatch *u = &sb->ub[a];
        long mb = (step * L->world + L->rank) * L->GA + a, epoch = mb / L->mb_per_epoch,
             within = mb % L->mb_per_epoch;
        if (epoch != pc->epoch)
            make_perm(L, pc, epoch);
        u->ntrain = u->ntokens = 0;
        u->nsamples = L->B;
        for (int r = 0; r < L->B; r++) {
            struct swift_sample x;
            swift_shards_get(L->s, pc->perm[within * L->B + r], &x);
            fill_row(u->tok + (size_t)r * L->T,
                     u->tgt + (size_t)r * L->T,
                     u->pos + (size_t)r * L->T,
                     &x,
                     L->T,
                     &u->ntrain);
            u->ntokens += x.len;
        }
    }
    if (L->delay_ms > 0) {
        struct timespec ts = {L->delay_ms / 1000, (L->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void *loader_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct loader *L = wa->L;
    char name[32];
    snprintf(name, sizeof(name), wa->id ? "prefetch-%d" : "prefetch", wa->id);
    swift_trace_thread_name(name);
    pthread_mutex_lock(&L->mu);
    for (;;) {
        while (!L->quit &&
               (L->next_claim >= L->end_step || L->next_claim - L->next_take >= L->depth))
            pthread_cond_wait(&L->cv, &L->mu);
        if (L->quit)
            break;
        long step = L->next_claim++;
        struct stepbuf *sb = &L->ring[step % L->depth];
        pthread_mutex_unlock(&L->mu);
        int64_t t0 = swift_trace_now();
        fill_step(L, &L->perms[wa->id], sb, step);
        swift_trace_span("data",
                         "prefetch",
                         t0,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_I("step", step)},
                         1);
        pthread_mutex_lock(&L->mu);
        sb->ready = 1;
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    free(wa);
    return NULL;
}

static int ubatch_alloc(struct ubatch *u, int B, int T)
{
    size_t n = (size_t)B * T;
    u->tok = calloc(n, 4);
    u->tgt = calloc(n, 4);
    u->pos = calloc(n, 4);
    return u->tok && u->tgt && u->pos ? 0 : -1;
}
static void ubatch_free(struct ubatch *u)
{
    free(u->tok);
    free(u->tgt);
    free(u->pos);
}

static int loader_start(struct loader *L, long start_step, long end_step)
{
    if (L->nworkers < 1)
        L->nworkers = 1;
    if (L->depth < L->nworkers + 1)
        L->depth = L->nworkers + 1;
    L->ring = calloc((size_t)L->depth, sizeof(*L->ring));
    L->perms = calloc((size_t)L->nworkers, sizeof(*L->perms));
    L->th = calloc((size_t)L->nworkers, sizeof(*L->th));
    if (!L->ring || !L->perms || !L->th)
        return swift_error("out of memory");
    for (int w = 0; w < L->nworkers; w++) {
        L->perms[w].perm = malloc((L->n ? L->n : 1) * sizeof(uint32_t));
        L->perms[w].epoch = -1;
        if (!L->perms[w].perm)
            return swift_error("out of memory");
    }
    for (int i = 0; i < L->depth; i++) {
        L->ring[i].ub = calloc((size_t)L->GA, sizeof(struct ubatch));
        if (!L->ring[i].ub)
            return swift_error("out of memory");
        for (int a = 0; a < L->GA; a++)
            if (ubatch_alloc(&L->ring[i].ub[a], L->B, L->T) < 0)
                return swift_error("out of memory");
    }
    L->next_claim = L->next_take = start_step;
    L->end_step = end_step;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    for (int w = 0; w < L->nworkers; w++) {
        struct worker_arg *wa = malloc(sizeof(*wa));
        if (!wa)
            return swift_error("out of memory");
        *wa = (struct worker_arg){L, w};
        if (pthread_create(&L->th[w], NULL, loader_main, wa)) {
            free(wa);
            errno = EAGAIN;
            return swift_error_errno("cannot start the prefetch thread");
        }
        L->nthreads++;
    }
    return 0;
}

/* Wait for the next step's micro-batches; the slot stays owned until loader_release. */
static struct stepbuf *loader_next(struct loader *L)
{
    pthread_mutex_lock(&L->mu);
    struct stepbuf *sb = &L->ring[L->next_take % L->depth];
    while (!sb->ready)
        pthread_cond_wait(&L->cv, &L->mu);
    pthread_mutex_unlock(&L->mu);
    return sb;
}

static void loader_release(struct loader *L)
{
    pthread_mutex_lock(&L->mu);
    L->ring[L->next_take % L->depth].ready = 0;
    L->next_take++;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

static void loader_stop(struct loader *L)
{
    if (L->nthreads) {
        pthread_mutex_lock(&L->mu);
        L->quit = 1;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        for (int w = 0; w < L->nthreads; w++)
            pthread_join(L->th[w], NULL);
        pthread_mutex_destroy(&L->mu);
        pthread_cond_destroy(&L->cv);
        L->nthreads = 0;
    }
    for (int i = 0; L->ring && i < L->depth; i++) {
        if (!L->ring[i].ub)
            continue;
        for (int a = 0; a < L->GA; a++)
            ubatch_free(&L->ring[i].ub[a]);
        free(L->ring[i].ub);
    }
    free(L->ring);
    L->ring = NULL;
    for (int w = 0; L->perms && w < L->nworkers; w++)
        free(L->perms[w].perm);
    free(L->perms);
    L->perms = NULL;
    free(L->th);
    L->th = NULL;
}

/* ---- the run ---- */

struct run {
    const struct swift_train_opts *o;
    struct swift_model m;
    struct swift_lora_opts lo;
    struct swift_adamw opt;
    struct swift_param *tp; /* trainable parameters */
    int ntp;
    struct swift_shards *train, *val;
    int T;
    long steps_per_epoch, max_steps, warmup;
    double lr;
    char *config_path;
    FILE *log;
    double t_start, peak_gflops;
    long step0; /* first step of this process (after resume) */
    struct swift_dist *dist;
};

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

static void emit(struct run *r, json_t *rec)
{
    if (!r->log) { /* not rank 0 */
        json_decref(rec);
        return;
    }
    char *line = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (line) {
        fprintf(r->log, "%s\n", line);
        fflush(r->log);
        printf("%s\n", line);
        fflush(stdout);
        free(line);
    }
    json_decref(rec);
}

static int check_tokenizer(const char *model_dir, const struct swift_shard_index *ix,
                           const char *data_dir)
{
    if (!ix->tokenizer_sha256)
        return 0;
    char *tj = swift_path_join(model_dir, "tokenizer.json");
    if (!tj)
        return swift_error("out of memory");
    if (access(tj, R_OK) < 0) {
        free(tj);
        return 0;
    }
    char hex[65];
    int rc = swift_sha256_file(tj, hex);
    if (rc == 0 && strcmp(hex, ix->tokenizer_sha256))
        rc = swift_error("%s/index.json: shards were made with another tokenizer (sha256 %.12s…, "
                         "the model's tokenizer.json is %.12s…)",
                         data_dir,
                         ix->tokenizer_sha256,
                         hex);
    free(tj);
    return rc;
}

static int open_shards(struct run *r, struct swift_shards **s, const char *dir)
{
    if (swift_shards_open(s, dir, 0) < 0)
        return -1;
    const struct swift_shard_index *ix = swift_shards_index(*s);
    if (check_tokenizer(r->o->model, ix, dir) < 0)
        return -1;
    uint64_t n = swift_shards_count(*s);
    for (uint64_t i = 0; i < n; i++) {
        struct swift_sample x;
        if (swift_shards_get(*s, i, &x) < 0)
            return -1;
        if ((int)x.len > r->T)
            return swift_error("%s: sample %llu has %u tokens, longer than --max-length %d",
                               dir,
                               (unsigned long long)i,
                               x.len,
                               r->T);
        for (uint32_t t = 0; t < x.len; t++)
            if (x.ids[t] >= (uint32_t)r->m.cfg.vocab_size)
                return swift_error("%s: sample %llu has token id %u, outside the model's "
                                   "vocabulary of %d",
                                   dir,
                                   (unsigned long long)i,
                                   x.ids[t],
                                   r->m.cfg.vocab_size);
    }
    return 0;
}

/* eval loss over the whole validation set, in order */
static int run_eval(struct run *r, long step)
{
    const struct swift_train_opts *o = r->o;
    int64_t t0 = swift_trace_now();
    uint64_t n = swift_shards_count(r->val);
    struct ubatch u;
    if (ubatch_alloc(&u, o->batch_size, r->T) < 0) {
        ubatch_free(&u);
        return swift_error("out of memory");
    }
    struct swift_loss l = {0};
    /* ranks take every world-th batch of the validation set; the sums are combined below */
    struct swift_dist *d = r->dist;
    uint64_t stride = (uint64_t)o->batch_size * (uint64_t)d->world;
    for (uint64_t i = (uint64_t)o->batch_size * (uint64_t)d->rank; i < n; i += stride) {
        long nt = 0;
        for (int b = 0; b < o->batch_size; b++) {
            struct swift_sample x;
            int have = i + (uint64_t)b < n && swift_shards_get(r->val, i + b, &x) == 0;
            fill_row(u.tok + (size_t)b * r->T,
                     u.tgt + (size_t)b * r->T,
                     u.pos + (size_t)b * r->T,
                     have ? &x : NULL,
                     r->T,
                     &nt);
        }
        struct swift_batch bt = {o->batch_size, r->T, u.tok, u.tgt, u.pos};
        if (swift_model_forward(&r->m, &bt, &l, 0.0f) < 0) {
            ubatch_free(&u);
            return -1;
        }
    }
    ubatch_free(&u);
    if (d->world > 1) {
        double v[3] = {l.sum, (double)l.count, (double)l.correct};
        int nostop = 0;
        if (swift_dist_checkin(d, "eval", step, &nostop, v, 3) < 0)
            return -1;
        l.sum = v[0];
        l.count = (long)v[1];
        l.correct = (long)v[2];
    }
    double loss = l.count ? l.sum / (double)l.count : 0;
    swift_trace_span("eval",
                     "eval",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("step", step), SWIFT_TARG_D("loss", loss)},
                     2);
    char gs[64];
    snprintf(gs, sizeof(gs), "%ld/%ld", step, r->max_steps);
    emit(r,
         json_pack("{s:f,s:f,s:f,s:s,s:I}",
                   "eval_loss",
                   loss,
                   "eval_token_acc",
                   l.count ? (double)l.correct / (double)l.count : 0.0,
                   "epoch",
                   (double)step / (double)r->steps_per_epoch,
                   "global_step/max_steps",
                   gs,
                   "eval_tokens",
                   (json_int_t)l.count));
    return 0;
}

static int copy_file(const char *src, const char *dst)
{
    char *d;
    size_t len;
    if (swift_read_file(src, 1u << 30, &d, &len) < 0)
        return -1;
    int rc = swift_atomic_write(dst, d, len);
    free(d);
    return rc;
}

/* hm, hv: the AdamW moments of every trainable parameter, host memory, back to back */
static int save_optimizer(struct run *r, const char *dir, const float *hm, const float *hv)
{
    int full_master = r->o->tuner == SWIFT_TUNER_FULL && strcmp(r->m.cfg.dtype, "float32");
    int per = full_master ? 3 : 2;
    struct swift_st_entry *e = calloc((size_t)r->ntp * per, sizeof(*e));
    char **names = calloc((size_t)r->ntp * per, sizeof(char *));
    size_t total = 0;
    for (int i = 0; i < r->ntp; i++)
        total += r->tp[i].numel;
    /* the fp32 master weights: a host copy (backend memory may be a device's) */
    float *hw = full_master ? malloc((total ? total : 1) * sizeof(float)) : NULL;
    if (!e || !names || (full_master && !hw)) {
        free(e);
        free(names);
        free(hw);
        return swift_error("out of memory");
    }
    if (hw) {
        size_t o = 0;
        for (int i = 0; i < r->ntp; i++) {
            r->m.ops->download(hw + o, r->tp[i].w, r->tp[i].numel * sizeof(float));
            o += r->tp[i].numel;
        }
    }
    size_t off = 0, k = 0;
    for (int i = 0; i < r->ntp; i++) {
        struct swift_param *p = &r->tp[i];
        for (int j = 0; j < per; j++) {
            const char *pre = j == 0 ? "exp_avg." : j == 1 ? "exp_avg_sq." : "master.";
            size_t nl = strlen(pre) + strlen(p->name) + 1;
            names[k] = malloc(nl);
            if (!names[k])
                break;
            snprintf(names[k], nl, "%s%s", pre, p->name);
            e[k].name = names[k];
            e[k].dtype = SWIFT_DTYPE_F32;
            e[k].ndim = p->ndim;
            e[k].shape[0] = p->shape[0];
            e[k].shape[1] = p->shape[1];
            e[k].data = j == 0   ? (const void *)(hm + off)
                        : j == 1 ? (const void *)(hv + off)
                                 : (const void *)(hw + off);
            k++;
        }
        off += p->numel;
    }
    char stepbuf[32];
    snprintf(stepbuf, sizeof(stepbuf), "%ld", r->opt.step);
    const char *meta[] = {"optimizer", "adamw", "step", stepbuf, NULL};
    char *path = swift_path_join(dir, "optimizer.safetensors");
    int rc = (k == (size_t)r->ntp * per && path) ? swift_safetensors_write(path, e, k, meta) : -1;
    for (size_t i = 0; i < (size_t)r->ntp * per; i++)
        free(names[i]);
    free(names);
    free(e);
    free(hw);
    free(path);
    return rc;
}

/* Read the moments of every trainable parameter into host hm, hv (back to back); master
 * weights, when the file has them, are uploaded into the parameters. */
static int load_optimizer(struct run *r, const char *dir, float *hm, float *hv)
{
    char *path = swift_path_join(dir, "optimizer.safetensors");
    struct swift_safetensors st;
    if (!path || swift_safetensors_open(&st, path) < 0) {
        free(path);
        return -1;
    }
    size_t maxn = 1;
    for (int i = 0; i < r->ntp; i++)
        if (r->tp[i].numel > maxn)
            maxn = r->tp[i].numel;
    float *hw = malloc(maxn * sizeof(float));
    int rc = hw ? 0 : swift_error("out of memory");
    size_t off = 0;
    for (int i = 0; i < r->ntp && rc == 0; i++) {
        struct swift_param *p = &r->tp[i];
        for (int j = 0; j < 3 && rc == 0; j++) {
            const char *pre = j == 0 ? "exp_avg." : j == 1 ? "exp_avg_sq." : "master.";
            char nm[300];
            snprintf(nm, sizeof(nm), "%s%s", pre, p->name);
            const struct swift_st_tensor *t = swift_safetensors_find(&st, nm);
            if (!t) {
                if (j == 2)
                    continue;
                rc = swift_error_at(path, 0, "missing tensor '%s'", nm);
                break;
            }
            float *dst = j == 0 ? hm + off : j == 1 ? hv + off : hw;
            if (swift_st_tensor_check_shape(t, p->ndim, p->shape) < 0 ||
                swift_st_tensor_to_f32(t, dst) < 0)
                rc = -1;
            else if (j == 2)
                r->m.ops->upload(p->w, hw, p->numel * sizeof(float));
        }
        off += p->numel;
    }
    free(hw);
    const char *s = swift_safetensors_meta(&st, "step");
    long v;
    if (rc == 0 && (!s || swift_parse_long(s, 0, LONG_MAX, &v) < 0))
        rc = swift_error_at(path, 0, "missing or bad __metadata__ step");
    else if (rc == 0)
        r->opt.step = v;
    swift_safetensors_close(&st);
    free(path);
    return rc;
}

static const char *const tok_files[] = {"tokenizer.json",
                                        "tokenizer_config.json",
                                        "generation_config.json",
                                        "special_tokens_map.json",
                                        "vocab.json",
                                        "merges.txt",
                                        NULL};

static int cmp_ckpt(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* steps of the checkpoint-N directories in dir, ascending; returns the count */
static int list_ckpts(const char *dir, long *out, int cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        char *end;
        if (strncmp(de->d_name, "checkpoint-", 11))
            continue;
        long v = strtol(de->d_name + 11, &end, 10);
        if (*end || end == de->d_name + 11)
            continue;
        out[n++] = v;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof(long), cmp_ckpt);
    return n;
}

static int write_checkpoint(struct run *r, long step, const float *hm, const float *hv)
{
    const struct swift_train_opts *o = r->o;
    int64_t t0 = swift_trace_now();
    char name[64];
    snprintf(name, sizeof(name), "checkpoint-%ld", step);
    char *final = swift_path_join(o->output_dir, name), *tmp = NULL;
    if (!final)
        return swift_error("out of memory");
    if (swift_atomic_dir_begin(final, &tmp) < 0) {
        free(final);
        return -1;
    }
    int rc;
    if (o->tuner == SWIFT_TUNER_LORA) {
        rc = swift_lora_save(&r->m, &r->lo, tmp, o->model);
    } else {
        rc = swift_model_save(&r->m, tmp, r->config_path);
        for (int i = 0; rc == 0 && tok_files[i]; i++) {
            char *src = swift_path_join(o->model, tok_files[i]);
            if (src && access(src, R_OK) == 0) {
                char *dst = swift_path_join(tmp, tok_files[i]);
                rc = dst ? copy_file(src, dst) : -1;
                free(dst);
            }
            free(src);
        }
    }
    if (rc == 0)
        rc = save_optimizer(r, tmp, hm, hv);
    if (rc == 0) {
        json_t *st = json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s}",
                               "version",
                               1,
                               "global_step",
                               (json_int_t)step,
                               "max_steps",
                               (json_int_t)r->max_steps,
                               "micro_batches_done",
                               (json_int_t)(step * o->grad_accum * r->dist->world),
                               "batch_size",
                               (json_int_t)o->batch_size,
                               "grad_accum",
                               (json_int_t)o->grad_accum,
                               "seed",
                               (json_int_t)o->seed,
                               "adam_step",
                               (json_int_t)r->opt.step,
                               "tuner",
                               o->tuner == SWIFT_TUNER_LORA ? "lora" : "full",
                               "rng",
                               "stateless: data order from (seed, epoch), dropout from (seed, "
                               "step, micro-batch, layer)");
        if (st)
            json_object_set_new(st, "world_size", json_integer(r->dist->world));
        char *txt = st ? json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(st);
        char *p = swift_path_join(tmp, "trainer_state.json");
        rc = txt && p ? swift_atomic_write(p, txt, strlen(txt)) : swift_error("out of memory");
        free(txt);
        free(p);
    }
    if (rc == 0)
        rc = swift_atomic_dir_commit(tmp, final, 1);
    else
        swift_atomic_dir_abort(tmp);
    swift_trace_span("ckpt",
                     "checkpoint",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("step", step)},
                     1);
    if (rc == 0) {
        swift_trace_instant(
            "ckpt", "checkpoint_written", (struct swift_targ[]){SWIFT_TARG_S("path", final)}, 1);
        if (o->save_total_limit > 0) {
            long steps[4096];
            int n = list_ckpts(o->output_dir, steps, 4096);
            for (int i = 0; i + o->save_total_limit < n; i++) {
                char nm[64];
                snprintf(nm, sizeof(nm), "checkpoint-%ld", steps[i]);
                char *p = swift_path_join(o->output_dir, nm);
                if (p)
                    swift_remove_tree(p);
                free(p);
            }
        }
    }
    free(final);
    return rc;
}

/* Every rank calls this; rank 0 writes. The optimizer state is first copied to host memory
 * (backend memory may be a device's); under ZeRO-1 it is gathered to rank 0. All ranks return
 * -1 when the write failed on rank 0. */
static int save_checkpoint(struct run *r, long step)
{
    struct swift_dist *d = r->dist;
    int zero = d->shard != NULL, rc = 0;
    size_t part = r->opt.total ? r->opt.total : 1;
    float *pm = malloc(part * sizeof(float)), *pv = malloc(part * sizeof(float));
    float *fm = NULL, *fv = NULL;
    if (!pm || !pv) {
        free(pm);
        free(pv);
        return swift_error("out of memory copying the optimizer state");
    }
    r->m.ops->download(pm, r->opt.m, r->opt.total * sizeof(float));
    r->m.ops->download(pv, r->opt.v, r->opt.total * sizeof(float));
    if (zero) {
        if (d->rank == 0) {
            fm = malloc((d->total ? d->total : 1) * sizeof(float));
            fv = malloc((d->total ? d->total : 1) * sizeof(float));
            if (!fm || !fv)
                rc = swift_error("out of memory gathering the optimizer state");
        }
        if (swift_dist_shard_gather(d, pm, fm, step) < 0 ||
            swift_dist_shard_gather(d, pv, fv, step) < 0) {
            free(fm);
            free(fv);
            free(pm);
            free(pv);
            return -1;
        }
    }
    if (d->rank == 0 && rc == 0)
        rc = write_checkpoint(r, step, zero ? fm : pm, zero ? fv : pv);
    free(fm);
    free(fv);
    free(pm);
    free(pv);
    int bad = rc < 0;
    if (swift_dist_checkin(d, "checkpoint", step, &bad, NULL, 0) < 0)
        return -1;
    if (bad && rc == 0)
        swift_error("rank %d: rank 0 failed to write checkpoint-%ld", d->rank, step);
    return bad ? -1 : 0;
}

/* The file holds the whole state: read it into host memory, upload this rank's range (all of
 * it without ZeRO-1). */
static int load_optimizer_any(struct run *r, const char *dir)
{
    struct swift_dist *d = r->dist;
    size_t total = 0;
    for (int i = 0; i < r->ntp; i++)
        total += r->tp[i].numel;
    size_t lo = d->shard ? d->lo : 0, hi = d->shard ? d->hi : total;
    float *fm = malloc((total ? total : 1) * sizeof(float)),
          *fv = malloc((total ? total : 1) * sizeof(float));
    int rc = fm && fv ? 0 : swift_error("out of memory reading the optimizer state");
    if (rc == 0)
        rc = load_optimizer(r, dir, fm, fv);
    if (rc == 0) {
        r->m.ops->upload(r->opt.m, fm + lo, (hi - lo) * sizeof(float));
        r->m.ops->upload(r->opt.v, fv + lo, (hi - lo) * sizeof(float));
    }
    free(fm);
    free(fv);
    return rc;
}

/* A run killed while checkpointing leaves ".checkpoint-N.tmp-PID" behind: never a
 * checkpoint, so remove it (only when that process is gone). */
static void remove_stale_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *t = strstr(de->d_name, ".tmp-");
        if (strncmp(de->d_name, ".checkpoint-", 12) || !t)
            continue;
        char *end;
        long pid = strtol(t + 5, &end, 10);
        if ((*end && *end != '-') || pid <= 0 ||
            (kill((pid_t)pid, 0) == 0 && pid != (long)getpid()))
            continue;
        char *p = swift_path_join(dir, de->d_name);
        if (p)
            swift_remove_tree(p);
        free(p);
    }
    closedir(d);
}

static int write_args(const struct swift_train_opts *o)
{
    json_t *a = json_pack(
        "{s:s,s:s,s:s?,s:s,s:s,s:i,s:f,s:f,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:s,s:i,s:i,s:i,"
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
        return swift_error("out of memory");
    json_object_set_new(a, "gradient_checkpointing", json_boolean(o->gradient_checkpointing));
    json_object_set_new(a, "swift_tools_version", json_string(SWIFT_VERSION));
    char *txt = json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(a);
    char *p = swift_path_join(o->output_dir, "args.json");
    int rc = txt && p ? swift_atomic_write(p, txt, strlen(txt)) : swift_error("out of memory");
    free(txt);
    free(p);
    return rc;
}

/* Resolve --resume: a checkpoint dir, or "latest" in the output dir. Returns malloc'ed path,
 * NULL with *err set on failure, NULL without err when there is nothing to resume. */
static char *resolve_resume(const struct swift_train_opts *o, int *err)
{
    *err = 0;
    if (!o->resume)
        return NULL;
    if (strcmp(o->resume, "latest"))
        return strdup(o->resume);
    long steps[4096];
    int n = list_ckpts(o->output_dir, steps, 4096);
    if (!n) {
        swift_warn("--resume latest: no checkpoint in '%s', starting from scratch", o->output_dir);
        return NULL;
    }
    char nm[64];
    snprintf(nm, sizeof(nm), "checkpoint-%ld", steps[n - 1]);
    char *p = swift_path_join(o->output_dir, nm);
    if (!p)
        *err = 1;
    return p;
}

static int read_state(const char *ckpt, long *step, const struct swift_train_opts *o, int world)
{
    char *p = swift_path_join(ckpt, "trainer_state.json");
    json_error_t jerr;
    json_t *st = p ? json_load_file(p, 0, &jerr) : NULL;
    int rc = 0;
    if (!st) {
        rc = swift_error_at(p ? p : ckpt, p ? jerr.line : 0, "%s", p ? jerr.text : "out of memory");
    } else {
        json_t *gs = json_object_get(st, "global_step");
        const char *tu = json_string_value(json_object_get(st, "tuner"));
        if (!json_is_integer(gs))
            rc = swift_error_at(p, 0, "missing global_step");
        else if (!tu || strcmp(tu, o->tuner == SWIFT_TUNER_LORA ? "lora" : "full"))
            rc = swift_error_at(p, 0, "checkpoint was trained with --tuner %s", tu ? tu : "?");
        else if (json_integer_value(json_object_get(st, "batch_size")) != o->batch_size ||
                 json_integer_value(json_object_get(st, "grad_accum")) *
                         (json_is_integer(json_object_get(st, "world_size"))
                              ? json_integer_value(json_object_get(st, "world_size"))
                              : 1) !=
                     (json_int_t)o->grad_accum * world ||
                 json_integer_value(json_object_get(st, "seed")) != o->seed)
            rc = swift_error_at(p,
                                0,
                                "batch size, global batch (ranks x gradient accumulation) "
                                "and seed must be those of the checkpointed run to resume "
                                "exactly");
        else
            *step = (long)json_integer_value(gs);
    }
    json_decref(st);
    free(p);
    return rc;
}

int swift_train_run(const struct swift_train_opts *o)
{
    struct run R;
    memset(&R, 0, sizeof(R));
    struct run *r = &R;
    r->o = o;
    int rc = SWIFT_EXIT_FAIL;
    struct loader L;
    memset(&L, 0, sizeof(L));
    if (o->threads > 0) {
        omp_set_num_threads(o->threads);
        openblas_set_num_threads(o->threads);
    }
    struct swift_profile prof = {0};
    if (o->profile) {
        char err[256];
        if (swift_profile_parse(o->profile, &prof, err, sizeof(err)) < 0) {
            swift_error("--profile: %s", err);
            return SWIFT_EXIT_USAGE;
        }
    }
    /* ranks: MPI only under a launcher (mpirun, srun); one trace file per rank */
    struct swift_dist D;
    if (swift_dist_init(&D, o->dist_timeout) < 0) {
        D.failed = 1;
        swift_dist_finalize(&D);
        return SWIFT_EXIT_FAIL;
    }
    r->dist = &D;
    /* the device: ranks on one host take one GPU each unless --device names it */
    struct swift_backend be;
    int brc = swift_backend_select_rank(&be, o->device, D.local_rank);
    if (brc) {
        D.failed = brc < 0; /* a GPU missing on one rank: the others must not wait for it */
        swift_dist_finalize(&D);
        return brc > 0 ? SWIFT_EXIT_USAGE : SWIFT_EXIT_FAIL;
    }
    /* gradients and parameters are backend memory: staged through the host over MPI, or NCCL */
    if (swift_dist_use_backend(&D, be.ops, be.cuda, be.index) < 0) {
        D.failed = 1;
        swift_dist_finalize(&D);
        return SWIFT_EXIT_FAIL;
    }
    if (D.world > 1)
        swift_info("rank %d of %d on %s (local rank %d, %s%s%s), clock offset to rank 0 "
                   "%.1f us (round trip %.1f us)",
                   D.rank,
                   D.world,
                   D.host,
                   D.local_rank,
                   D.launcher,
                   D.job_id ? ", slurm job " : "",
                   D.job_id ? D.job_id : "",
                   D.clock_offset_us,
                   D.min_rtt_us);
    struct swift_trace_config tc = {.stage = "train",
                                    .path = o->trace,
                                    .rank = D.rank,
                                    .world_size = D.world,
                                    .device = be.name,
                                    .argc = o->argc,
                                    .argv = o->argv,
                                    .clock_offset_us = D.clock_offset_us};
    if (swift_trace_open(&tc) < 0) {
        D.failed = 1;
        swift_dist_finalize(&D);
        return SWIFT_EXIT_FAIL;
    }
    /* from here on SIGTERM/SIGUSR1 only set a flag: a signal during loading still ends in a
     * checkpoint after the first step and exit 75 (after the trace's own handlers, which
     * would otherwise end the process) */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    int rerr;
    char *resume = resolve_resume(o, &rerr);
    if (rerr) {
        D.failed = 1;
        swift_dist_finalize(&D);
        return SWIFT_EXIT_FAIL;
    }
    long start_step = 0;
    if (resume && read_state(resume, &start_step, o, D.world) < 0)
        goto out;

    /* model: full resumes load the checkpoint's weights; LoRA loads the base then the adapter */
    const char *wdir = resume && o->tuner == SWIFT_TUNER_FULL ? resume : o->model;
    r->config_path = swift_path_join(o->model, "config.json");
    if (!r->config_path)
        goto out;
    if (swift_model_load(&r->m, wdir, be.ops, o->tuner == SWIFT_TUNER_LORA) < 0)
        goto out;
    r->m.act_ckpt = o->gradient_checkpointing;
    if (o->tuner == SWIFT_TUNER_LORA) {
        if (resume) {
            if (swift_lora_load(&r->m, resume, &r->lo) < 0)
                goto out;
        } else {
            r->lo = (struct swift_lora_opts){.rank = o->lora_rank,
                                             .alpha = (float)o->lora_alpha,
                                             .dropout = (float)o->lora_dropout,
                                             .targets = o->target_modules,
                                             .seed = (uint64_t)o->seed};
            if (swift_lora_attach(&r->m, &r->lo) < 0)
                goto out;
        }
        r->tp = r->m.lp;
        r->ntp = r->m.nlp;
    } else {
        r->tp = r->m.p;
        r->ntp = r->m.np;
    }

    /* data */
    if (swift_shards_open(&r->train, o->dataset, 0) < 0)
        goto out;
    const struct swift_shard_index *ix = swift_shards_index(r->train);
    r->T = o->max_length > 0 ? o->max_length : (int)ix->max_length;
    if (r->T <= 0) {
        swift_error("%s: no max_length; give --max-length", o->dataset);
        goto out;
    }
    if (r->T > r->m.cfg.max_position_embeddings) {
        swift_error("--max-length %d exceeds the model's max_position_embeddings %d",
                    r->T,
                    r->m.cfg.max_position_embeddings);
        goto out;
    }
    if (r->m.cfg.sliding_window > 0 && r->T > r->m.cfg.sliding_window) {
        swift_error("--max-length %d exceeds the model's sliding_window %d (not supported)",
                    r->T,
                    r->m.cfg.sliding_window);
        goto out;
    }
    swift_shards_close(r->train);
    r->train = NULL;
    if (open_shards(r, &r->train, o->dataset) < 0)
        goto out;
    char *vdir = o->val_dataset ? strdup(o->val_dataset) : swift_path_join(o->dataset, "val");
    if (vdir && (o->val_dataset || swift_is_dir(vdir))) {
        if (open_shards(r, &r->val, vdir) < 0) {
            free(vdir);
            goto out;
        }
    }
    free(vdir);
    uint64_t n = swift_shards_count(r->train);
    long mbpe = (long)(n / (uint64_t)o->batch_size);
    r->steps_per_epoch = mbpe / ((long)o->grad_accum * D.world);
    if (r->steps_per_epoch <= 0) {
        swift_error("%s: %llu samples make no full step of %d x %d x %d ranks samples",
                    o->dataset,
                    (unsigned long long)n,
                    o->batch_size,
                    o->grad_accum,
                    D.world);
        goto out;
    }
    r->max_steps = o->max_steps > 0 ? o->max_steps
                                    : (long)ceil(o->num_train_epochs * (double)r->steps_per_epoch);
    r->warmup =
        o->warmup_steps > 0 ? o->warmup_steps : (long)ceil(o->warmup_ratio * (double)r->max_steps);
    r->lr = o->learning_rate >= 0 ? o->learning_rate : (o->tuner == SWIFT_TUNER_LORA ? 1e-4 : 1e-5);
    if (start_step > r->max_steps) {
        swift_error("checkpoint step %ld is beyond max_steps %ld", start_step, r->max_steps);
        goto out;
    }

    /* ZeRO-1: AdamW over this rank's range of the parameters only */
    struct swift_param *op = r->tp;
    int nop = r->ntp;
    if (o->zero && D.world > 1) {
        if (swift_dist_shard_init(&D, r->tp, r->ntp) < 0)
            goto out;
        op = D.shard;
        nop = D.nshard;
    }
    if (swift_adamw_init(&r->opt,
                         be.ops,
                         op,
                         nop,
                         (float)o->adam_beta1,
                         (float)o->adam_beta2,
                         (float)o->adam_epsilon,
                         (float)o->weight_decay) < 0)
        goto out;
    if (D.world > 1)
        swift_info("rank %d: optimizer state %.2f MiB (%zu of %zu parameters%s)",
                   D.rank,
                   (double)r->opt.total * 8 / 1048576.0,
                   r->opt.total,
                   D.shard ? D.total : r->opt.total,
                   D.shard ? ", ZeRO-1" : "");
    if (resume && load_optimizer_any(r, resume) < 0)
        goto out;
    if (swift_model_reserve(&r->m, o->batch_size, r->T) < 0)
        goto out;

    /* run directory */
    /* run directory: rank 0 writes it */
    if (swift_mkdirs(o->output_dir, 0755) < 0 || (D.rank == 0 && write_args(o) < 0))
        goto out;
    if (D.rank == 0)
        remove_stale_tmp(o->output_dir);
    char *lp = swift_path_join(o->output_dir, "logging.jsonl");
    r->log = lp && D.rank == 0 ? fopen(lp, resume ? "a" : "w") : NULL;
    if (!r->log && D.rank == 0) {
        swift_error_errno("cannot open '%s'", lp ? lp : "logging.jsonl");
        free(lp);
        goto out;
    }
    free(lp);
    r->peak_gflops = o->peak_gflops > 0   ? o->peak_gflops
                     : be.peak_gflops > 0 ? be.peak_gflops
                                          : swift_sgemm_peak_gflops();

    L.s = r->train;
    L.n = n;
    L.B = o->batch_size;
    L.T = r->T;
    L.GA = o->grad_accum;
    L.rank = D.rank;
    L.world = D.world;
    L.seed = o->seed;
    L.mb_per_epoch = mbpe;
    L.delay_ms = o->data_delay_ms;
    L.nworkers = o->num_workers;
    L.depth = o->prefetch;
    if (loader_start(&L, start_step, r->max_steps) < 0)
        goto out;

    double flops_tok = swift_model_flops_per_token(&r->m, r->T);
    long eval_steps = o->eval_steps > 0 ? o->eval_steps : o->save_steps;
    r->t_start = now_s();
    r->step0 = start_step;
    double win_t = now_s(), win_tokens = 0;
    long win_steps = 0;
    int saved_last = 0;
    if (be.notice[0])
        swift_info("%s", be.notice);
    for (long step = start_step; step < r->max_steps; step++) {
        enum swift_profile_action pa = swift_profile_action(&prof, step);
        swift_trace_set_detail(pa == SWIFT_PROF_RECORD || pa == SWIFT_PROF_RECORD_AND_SAVE);
        be.ops->device_trace(o->profile && swift_trace_detail());
        int64_t ts0 = swift_trace_now();
        double lr =
            swift_lr_at((enum swift_sched)o->lr_scheduler, r->lr, step, r->warmup, r->max_steps);
        swift_model_zero_grad(&r->m);
        int64_t tw = swift_trace_now();
        struct stepbuf *sb = loader_next(&L);
        swift_trace_span("data", "data_wait", tw, swift_trace_now(), NULL, 0);
        long ntrain = 0, ntok = 0;
        for (int a = 0; a < o->grad_accum; a++) {
            ntrain += sb->ub[a].ntrain;
            ntok += sb->ub[a].ntokens;
        }
        if (D.world > 1) { /* the global batch's trained tokens scale every rank's loss */
            double v[2] = {(double)ntrain, (double)ntok};
            int nostop = 0;
            if (swift_dist_checkin(&D, "forward", step + 1, &nostop, v, 2) < 0) {
                loader_release(&L);
                goto out;
            }
            ntrain = (long)v[0];
            ntok = (long)v[1];
        }
        float dscale = ntrain ? 1.0f / (float)ntrain : 0.0f;
        struct swift_loss loss = {0};
        for (int a = 0; a < o->grad_accum; a++) {
            struct ubatch *u = &sb->ub[a];
            struct swift_batch bt = {o->batch_size, r->T, u->tok, u->tgt, u->pos};
            /* the global micro-batch index: the same dropout masks on any number of ranks */
            uint64_t gmb = (uint64_t)D.rank * (uint64_t)o->grad_accum + (uint64_t)a;
            r->m.dropout_seed = mix((uint64_t)o->seed ^ mix((uint64_t)step * 64 + gmb));
            int64_t tf = swift_trace_now();
            if (swift_model_forward(&r->m, &bt, &loss, dscale) < 0) {
                loader_release(&L);
                goto out;
            }
            if (a == 0 && o->delay_rank_ms > 0 && D.rank == o->delay_rank) { /* testing only */
                struct timespec ts = {o->delay_rank_ms / 1000,
                                      (o->delay_rank_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
            int64_t tb = swift_trace_now();
            swift_trace_span("compute",
                             "forward",
                             tf,
                             tb,
                             (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)},
                             1);
            swift_model_backward(&r->m, &bt);
            swift_trace_span("compute",
                             "backward",
                             tb,
                             swift_trace_now(),
                             (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)},
                             1);
        }
        loader_release(&L);
        int stop = stop_signal != 0;
        if (D.world > 1) { /* a signal on any rank stops all; gradients summed over ranks */
            double v[3] = {loss.sum, (double)loss.count, (double)loss.correct};
            if (swift_dist_checkin(&D, "gradient sync", step + 1, &stop, v, 3) < 0)
                goto out;
            loss.sum = v[0];
            loss.count = (long)v[1];
            loss.correct = (long)v[2];
            if ((D.shard ? swift_dist_shard_reduce_scatter(&D, r->tp, r->ntp, step + 1)
                         : swift_dist_allreduce_grads(&D, r->tp, r->ntp, step + 1)) < 0)
                goto out;
        }
        double lossv = loss.count ? loss.sum / (double)loss.count : 0.0;
        if (!isfinite(lossv)) {
            swift_error("loss is %s at step %ld; stopping", isnan(lossv) ? "nan" : "inf", step + 1);
            goto out;
        }
        int64_t to = swift_trace_now();
        double gnorm = swift_grad_norm(r->m.ops, r->tp, r->ntp);
        if (D.shard) { /* ZeRO-1: each rank holds the summed gradient of its range only */
            double ss = swift_grad_norm(r->m.ops, D.shard, D.nshard);
            ss *= ss;
            if (swift_dist_allreduce_d(&D, &ss, 1, "gradient norm", step + 1) < 0)
                goto out;
            gnorm = sqrt(ss);
        }
        if (!isfinite(gnorm)) {
            swift_error("gradient norm is %s at step %ld; stopping",
                        isnan(gnorm) ? "nan" : "inf",
                        step + 1);
            goto out;
        }
        swift_adamw_step(&r->opt, (float)lr, swift_clip_scale(gnorm, o->max_grad_norm));
        if (D.shard && swift_dist_shard_allgather(&D, r->tp, r->ntp, step + 1) < 0)
            goto out;
        int64_t te = swift_trace_now();
        swift_trace_span("optim", "optimizer", to, te, NULL, 0);
        long gs = step + 1;
        swift_trace_span(
            "step",
            "step",
            ts0,
            te,
            (struct swift_targ[]){SWIFT_TARG_I("step", gs),
                                  SWIFT_TARG_I("tokens", ntok),
                                  SWIFT_TARG_I("samples", (long)o->batch_size * o->grad_accum)},
            3);
        double step_s = (double)(te - ts0) * 1e-9;
        swift_trace_counter("loss", lossv);
        swift_trace_counter("lr", lr);
        swift_trace_counter("grad_norm", gnorm);
        swift_trace_counter("tokens/s", step_s > 0 ? (double)ntok / step_s : 0);
        swift_trace_counter("RSS", rss_gib() * 1024.0 * 1024 * 1024);
        win_tokens += (double)o->batch_size * o->grad_accum * r->T * D.world;
        win_steps++;
        saved_last = 0;
        if (gs % o->logging_steps == 0 || gs == r->max_steps || gs == 1) {
            double t = now_s(), el = t - r->t_start, dt = t - win_t;
            double sps = dt / (double)(win_steps ? win_steps : 1);
            double tps = dt > 0 ? win_tokens / dt : 0;
            char gsb[64], elb[32], rmb[32], pct[16];
            snprintf(gsb, sizeof(gsb), "%ld/%ld", gs, r->max_steps);
            snprintf(pct, sizeof(pct), "%.2f%%", 100.0 * (double)gs / (double)r->max_steps);
            fmt_time(elb, sizeof(elb), el);
            fmt_time(rmb, sizeof(rmb), el / (double)(gs - r->step0) * (double)(r->max_steps - gs));
            emit(r,
                 json_pack("{s:f,s:f,s:f,s:f,s:f,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:f}",
                           "loss",
                           lossv,
                           "grad_norm",
                           gnorm,
                           "learning_rate",
                           lr,
                           "token_acc",
                           loss.count ? (double)loss.correct / (double)loss.count : 0.0,
                           "epoch",
                           (double)gs / (double)r->steps_per_epoch,
                           "global_step/max_steps",
                           gsb,
                           "percentage",
                           pct,
                           "elapsed_time",
                           elb,
                           "remaining_time",
                           rmb,
                           "memory(GiB)",
                           rss_gib(),
                           "train_speed(s/it)",
                           sps,
                           "tokens/s",
                           tps,
                           "MFU",
                           r->peak_gflops > 0 ? tps * flops_tok / (r->peak_gflops * 1e9 * D.world)
                                              : 0.0));
            win_t = t;
            win_tokens = 0;
            win_steps = 0;
        }
        if (r->val && eval_steps > 0 && gs % eval_steps == 0 && run_eval(r, gs) < 0)
            goto out;
        if ((o->save_steps > 0 && gs % o->save_steps == 0) || stop) {
            if (save_checkpoint(r, gs) < 0)
                goto out;
            saved_last = 1;
        }
        if (stop) {
            swift_info("%s: checkpoint-%ld written; exiting with 75",
                       stop_signal == SIGTERM   ? "SIGTERM"
                       : stop_signal == SIGUSR1 ? "SIGUSR1"
                                                : "a signal on another rank",
                       gs);
            rc = SWIFT_EXIT_INTERRUPTED;
            goto out;
        }
    }
    if (r->val && (eval_steps <= 0 || r->max_steps % eval_steps) && r->max_steps > start_step &&
        run_eval(r, r->max_steps) < 0)
        goto out;
    if (!saved_last && r->max_steps > start_step && save_checkpoint(r, r->max_steps) < 0)
        goto out;
    {
        char nm[64];
        snprintf(nm, sizeof(nm), "checkpoint-%ld", r->max_steps);
        char *p = swift_path_join(o->output_dir, nm);
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
                                 now_s() - r->t_start);
        char *line = done ? json_dumps(done, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (line && D.rank == 0)
            printf("%s\n", line);
        free(line);
        json_decref(done);
        free(p);
    }
    rc = SWIFT_EXIT_OK;
out:
    be.ops->device_trace(0);
    loader_stop(&L);
    if (r->log)
        fclose(r->log);
    swift_adamw_free(&r->opt);
    if (r->train)
        swift_shards_close(r->train);
    if (r->val)
        swift_shards_close(r->val);
    swift_model_free(&r->m);
    free(r->config_path);
    free(resume);
    swift_trace_close();
    if (rc != SWIFT_EXIT_OK && rc != SWIFT_EXIT_INTERRUPTED)
        D.failed = 1; /* MPI_Finalize would wait for ranks that are still training */
    swift_dist_finalize(&D);
    return rc;
}
