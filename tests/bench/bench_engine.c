/* Throughput of swift-infer's engine (lib/infer/engine.h: continuous batching on the paged
 * cache) on a randomly initialised Llama config on the CPU backend: CONC concurrent requests of
 * PROMPT random tokens and NEW greedy tokens each (eos ignored), for CONC = 1, 8 and 32, all
 * added at once. Prints one JSON line per concurrency: output tokens/s, time to first token and
 * time per output token (p50, p99 over requests), steps and preemptions. No time assertions.
 * CONFIG is 10M or 100M (tests/bench/bench_config.h). */
#include "kernels/ops.h"
#include "lib/core/cli.h"
#include "lib/core/trace.h"
#include "lib/infer/engine.h"
#include "lib/model/model.h"
#include "tests/bench/bench_config.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int n);

#define MAXC 32

struct rq {
    int64_t t_add, t_first, t_last;
    int n;
};

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct rq *r = ctx;
    int64_t now = swift_trace_now();
    if (r->n++ == 0)
        r->t_first = now;
    r->t_last = now;
    (void)ev;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static int run(struct swift_model *m, const char *cfg, long th, int conc, int P, int G)
{
    struct swift_engine_opts o = swift_engine_defaults();
    o.max_num_seqs = MAXC;
    o.max_num_batched_tokens = 512;
    o.num_blocks = MAXC * ((P + G + o.block_size - 1) / o.block_size); /* every request fits */
    char err[256];
    struct swift_engine *e = swift_engine_new(m, &o, NULL, 0, err, sizeof(err));
    if (!e) {
        fprintf(stderr, "bench_engine: %s\n", err);
        return 1;
    }
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = G;
    s.ignore_eos = 1;
    int32_t *prompt = malloc((size_t)P * sizeof(int32_t));
    struct rq rq[MAXC];
    memset(rq, 0, sizeof(rq));
    uint64_t x = 7;
    int64_t t0 = swift_trace_now();
    for (int i = 0; i < conc; i++) {
        for (int t = 0; t < P; t++) { /* a different prompt per request */
            x = x * 6364136223846793005ULL + 1;
            prompt[t] = (int32_t)((x >> 33) % (uint64_t)m->cfg.vocab_size);
        }
        rq[i].t_add = swift_trace_now();
        if (swift_engine_add(e, prompt, P, &s, on_token, &rq[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_engine: %s\n", err);
            return 1;
        }
    }
    int rc;
    while ((rc = swift_engine_step(e)) > 0)
        ;
    if (rc < 0)
        return 1;
    double wall = (double)(swift_trace_now() - t0) * 1e-9;
    double ttft[MAXC], tpot[MAXC];
    long out = 0;
    for (int i = 0; i < conc; i++) {
        out += rq[i].n;
        ttft[i] = (double)(rq[i].t_first - rq[i].t_add) * 1e-6;
        tpot[i] = rq[i].n > 1 ? (double)(rq[i].t_last - rq[i].t_first) * 1e-6 / (rq[i].n - 1) : 0;
    }
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    printf("{\"impl\":\"swift-engine\",\"config\":\"%s\",\"threads\":%ld,\"concurrency\":%d,"
           "\"prompt\":%d,\"new\":%d,\"output_tokens_per_s\":%.1f,\"ttft_ms_p50\":%.2f,"
           "\"ttft_ms_p99\":%.2f,\"tpot_ms_p50\":%.2f,\"tpot_ms_p99\":%.2f,\"steps\":%ld,"
           "\"forward_s\":%.3f,\"wall_s\":%.3f,\"blocks_peak\":%d,\"preemptions\":%ld}\n",
           cfg,
           th,
           conc,
           P,
           G,
           (double)out / wall,
           pct(ttft, conc, 0.5),
           pct(ttft, conc, 0.99),
           pct(tpot, conc, 0.5),
           pct(tpot, conc, 0.99),
           st.steps,
           st.forward_s,
           wall,
           st.blocks_peak,
           st.preemptions);
    free(prompt);
    swift_engine_free(e);
    return 0;
}

int main(int argc, char **argv)
{
    long th, P = 64, G = 64;
    if ((argc != 3 && argc != 5) || swift_parse_long(argv[2], 1, 256, &th) ||
        (argc == 5 &&
         (swift_parse_long(argv[3], 1, 4096, &P) || swift_parse_long(argv[4], 1, 4096, &G)))) {
        fprintf(stderr, "usage: bench_engine 10M|100M THREADS [PROMPT NEW]\n");
        return 2;
    }
    struct swift_model_config c;
    if (bench_config(argv[1], &c) < 0) {
        fprintf(stderr, "bench_engine: unknown config '%s'\n", argv[1]);
        return 2;
    }
    omp_set_num_threads((int)th);
    openblas_set_num_threads((int)th);
    struct swift_model m;
    if (swift_model_init_random(&m, &c, &swift_cpu_ops, 1) < 0)
        return 1;
    static const int conc[] = {1, 8, 32};
    int rc = run(&m, argv[1], th, 1, (int)P, 8); /* warm-up */
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = run(&m, argv[1], th, conc[i], (int)P, (int)G);
    swift_model_free(&m);
    return rc;
}
