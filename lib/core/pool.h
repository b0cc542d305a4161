/*
 * pool — a small fixed thread pool with a parallel-for, for work over documents, files or rows.
 *
 *     struct swift_pool *p = swift_pool_new(opts.threads);     // 0: one per online CPU
 *     swift_pool_for(p, ndocs, tokenize_one, &ctx);            // fn(ctx, i, worker)
 *     swift_pool_free(p);
 *
 * The calling thread works too (as worker 0), so a pool of 1 runs inline with no thread.
 * Indices are handed out dynamically in chunks; fn must be safe to run concurrently for
 * different i. Each worker names its thread in the trace ("pool-N").
 */
#ifndef SWIFT_POOL_H
#define SWIFT_POOL_H

struct swift_pool;

typedef void (*swift_pool_fn)(void *ctx, long i, int worker);

struct swift_pool *swift_pool_new(int nthreads);
void swift_pool_free(struct swift_pool *p);
int swift_pool_size(const struct swift_pool *p);
/* Run fn for i in [0, n) and wait for all of them. chunk <= 0 picks a chunk size. */
void swift_pool_for(struct swift_pool *p, long n, long chunk, swift_pool_fn fn, void *ctx);
/* Number of online CPUs (at least 1). */
int swift_ncpus(void);

#endif
