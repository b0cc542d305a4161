/* loader — the data of a run: shards opened and checked against the model, an epoch-shuffled
 * order of samples per (seed, epoch) cut into global steps (train_loader_sample), and
 * --num-workers threads filling whole steps into a ring of --prefetch slots (internal.h). Rows
 * are the objective's (objective.h: fill). */
#include "lib/train/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

/* ---- data checks ---- */

/* The shards' kind (index.json "kind") against the objective's: pairs for --rlhf, SFT samples
 * otherwise; the message names the swift-preprocess option that makes the right ones. */
int train_check_kind(const struct run *r, const struct swift_shard_index *ix, const char *dir)
{
    const char *want = r->obj.kind ? r->obj.kind : "sft";
    char what[64];
    if (r->obj.kind)
        snprintf(what, sizeof(what), "--rlhf %s", r->obj.name);
    else
        snprintf(what, sizeof(what), "swift-train without --rlhf");
    return swift_shard_index_check_kind(ix, want, what, dir);
}

int train_open_shards(struct run *r, struct swift_shards **s, const char *dir)
{
    if (swift_shards_open(s, dir, r->vlm ? SWIFT_SHARDS_IMAGES : 0) < 0)
        return -1;
    const struct swift_shard_index *ix = swift_shards_index(*s);
    if (swift_shard_index_check_tokenizer(ix, r->o->model, dir) < 0 ||
        train_check_kind(r, ix, dir) < 0)
        return -1;
    uint64_t n = swift_shards_count(*s);
    for (uint64_t i = 0; i < n; i++) {
        struct swift_sample x;
        if (swift_shards_get(*s, i, &x) < 0)
            return -1;
        const char *why = r->obj.check ? r->obj.check(&r->obj, &x) : NULL;
        if (why)
            return swift_error("%s: sample %llu %s", dir, (unsigned long long)i, why);
        uint32_t row = x.len; /* a pair's documents are rows of their own */
        if (r->obj.rows_per_sample > 1)
            for (uint32_t d = row = 0; d < x.n_docs; d++)
                row = x.doc_len[d] > row ? x.doc_len[d] : row;
        if ((int)row > r->T)
            return swift_error("%s: sample %llu has %u tokens%s, longer than --max-length %d",
                               dir,
                               (unsigned long long)i,
                               row,
                               r->obj.rows_per_sample > 1 ? " in a document" : "",
                               r->T);
        for (uint32_t t = 0; t < x.len; t++)
            if (x.ids[t] >= (uint32_t)r->m->cfg.vocab_size)
                return swift_error("%s: sample %llu has token id %u, outside the model's "
                                   "vocabulary of %d",
                                   dir,
                                   (unsigned long long)i,
                                   x.ids[t],
                                   r->m->cfg.vocab_size);
    }
    return 0;
}

/* ---- epoch orders and the prefetch ring ---- */

uint64_t train_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void make_perm(const struct train_loader *L, struct train_perm *pc, long epoch)
{
    for (uint64_t i = 0; i < L->n; i++)
        pc->perm[i] = (uint32_t)i;
    uint64_t st = (uint64_t)L->seed * 1000003ULL + (uint64_t)epoch;
    for (uint64_t i = L->n; i > 1; i--) {
        st = train_mix(st);
        uint64_t j = st % i;
        uint32_t t = pc->perm[i - 1];
        pc->perm[i - 1] = pc->perm[j];
        pc->perm[j] = t;
    }
    pc->epoch = epoch;
}

uint32_t train_loader_sample(const struct train_loader *L, struct train_perm *pc, long step, int a,
                             int row)
{
    uint64_t G = (uint64_t)L->B * (uint64_t)L->GA * (uint64_t)L->world;
    step /= L->repeat > 1 ? L->repeat : 1; /* GRPO's --num-iterations: the same prompts again */
    long epoch = step / L->steps_per_epoch, within = step % L->steps_per_epoch;
    if (epoch != pc->epoch)
        make_perm(L, pc, epoch);
    uint64_t k = (uint64_t)within * G +
                 ((uint64_t)L->rank * (uint64_t)L->GA + (uint64_t)a) * (uint64_t)L->B +
                 (uint64_t)row;
    return pc->perm[k];
}

static void fill_step(struct train_loader *L, struct train_perm *pc, struct train_step *sb,
                      long step)
{
    int rows = L->obj->rows_per_sample;
    sb->step = step;
    for (int a = 0; a < L->GA; a++) {
        struct train_ubatch *u = &sb->ub[a];
        u->nitems = u->ntokens = 0;
        for (int r = 0; r < L->B; r++) {
            struct swift_sample x;
            swift_shards_get(L->s, train_loader_sample(L, pc, step, a, r), &x);
            u->xs[r] = x;
            size_t row = (size_t)r * (size_t)rows * (size_t)L->T;
            u->nitems += L->obj->fill(L->obj, &x, L->T, u->tok + row, u->tgt + row, u->pos + row);
            u->ntokens += x.len;
        }
        if (L->image_dir) /* the image cache expanded here, off the step's critical path; a VL
                             run's --data-delay-ms slows the images (rule image_starved) */
            train_vl_pixels(u, L->image_dir, L->B, a == 0 ? L->delay_ms : 0);
    }
    if (L->delay_ms > 0 && !L->image_dir) {
        struct timespec ts = {L->delay_ms / 1000, (L->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

struct worker_arg {
    struct train_loader *L;
    int id;
};

static void *loader_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct train_loader *L = wa->L;
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
        struct train_step *sb = &L->ring[step % L->depth];
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

void train_ubatch_alloc(struct train_ubatch *u, int rows, int T, int samples)
{
    size_t n = (size_t)rows * T;
    *u = (struct train_ubatch){0};
    u->tok = swift_xcalloc(n, 4);
    u->tgt = swift_xcalloc(n, 4);
    u->pos = swift_xcalloc(n, 4);
    u->xs = swift_xcalloc((size_t)samples, sizeof(*u->xs));
}
void train_ubatch_free(struct train_ubatch *u)
{
    free(u->pix);
    free(u->grid);
    free(u->xs);
    free(u->tok);
    free(u->tgt);
    free(u->pos);
}

int train_loader_start(struct train_loader *L, long start_step, long end_step)
{
    if (L->nworkers < 1)
        L->nworkers = 1;
    if (L->depth < L->nworkers + 1)
        L->depth = L->nworkers + 1;
    L->ring = swift_xcalloc((size_t)L->depth, sizeof(*L->ring));
    L->perms = swift_xcalloc((size_t)L->nworkers, sizeof(*L->perms));
    L->th = swift_xcalloc((size_t)L->nworkers, sizeof(*L->th));
    for (int w = 0; w < L->nworkers; w++) {
        L->perms[w].perm = swift_xmalloc((L->n ? L->n : 1) * sizeof(uint32_t));
        L->perms[w].epoch = -1;
    }
    for (int i = 0; i < L->depth; i++) {
        L->ring[i].ub = swift_xcalloc((size_t)L->GA, sizeof(struct train_ubatch));
        for (int a = 0; a < L->GA; a++)
            train_ubatch_alloc(&L->ring[i].ub[a], L->B * L->obj->rows_per_sample, L->T, L->B);
    }
    L->next_claim = L->next_take = start_step;
    L->end_step = end_step;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    for (int w = 0; w < L->nworkers; w++) {
        struct worker_arg *wa = swift_xmalloc(sizeof(*wa));
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

struct train_step *train_loader_next(struct train_loader *L)
{
    pthread_mutex_lock(&L->mu);
    struct train_step *sb = &L->ring[L->next_take % L->depth];
    while (!sb->ready)
        pthread_cond_wait(&L->cv, &L->mu);
    pthread_mutex_unlock(&L->mu);
    return sb;
}

void train_loader_release(struct train_loader *L)
{
    pthread_mutex_lock(&L->mu);
    L->ring[L->next_take % L->depth].ready = 0;
    L->next_take++;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

void train_loader_stop(struct train_loader *L)
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
            train_ubatch_free(&L->ring[i].ub[a]);
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
