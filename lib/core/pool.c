#include "lib/core/pool.h"
#include "lib/core/alloc.h"
#include "lib/core/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/core/banned.h"

struct worker {
    struct swift_pool *pool;
    int id;
    pthread_t th;
};

struct swift_pool {
    int n;
    struct worker *w;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    long generation;
    int stop;
    int running;
    /* the current job */
    swift_pool_fn fn;
    void *ctx;
    long total, chunk;
    atomic_long next;
};

int swift_ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void run_job(struct swift_pool *p, int id)
{
    for (;;) {
        long i0 = atomic_fetch_add(&p->next, p->chunk);
        if (i0 >= p->total)
            break;
        long i1 = i0 + p->chunk < p->total ? i0 + p->chunk : p->total;
        for (long i = i0; i < i1; i++)
            p->fn(p->ctx, i, id);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct swift_pool *p = w->pool;
    char name[32];
    snprintf(name, sizeof(name), "pool-%d", w->id);
    swift_trace_thread_name(name);
    long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_job(p, w->id);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct swift_pool *swift_pool_new(int nthreads)
{
    if (nthreads <= 0)
        nthreads = swift_ncpus();
    struct swift_pool *p = swift_xcalloc(1, sizeof(*p));
    p->n = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->w = swift_xcalloc((size_t)nthreads, sizeof(*p->w));
    for (int i = 1; i < nthreads; i++) {
        p->w[i].pool = p;
        p->w[i].id = i;
        if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]))
            abort();
    }
    return p;
}

void swift_pool_free(struct swift_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->w[i].th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->w);
    free(p);
}

int swift_pool_size(const struct swift_pool *p)
{
    return p->n;
}

void swift_pool_for(struct swift_pool *p, long n, long chunk, swift_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (chunk <= 0) {
        chunk = n / ((long)p->n * 8);
        if (chunk < 1)
            chunk = 1;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    if (p->n > 1) {
        pthread_mutex_lock(&p->mu);
        p->running = p->n - 1;
        p->generation++;
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
    run_job(p, 0);
    if (p->n > 1) {
        pthread_mutex_lock(&p->mu);
        while (p->running > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
