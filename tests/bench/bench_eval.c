/* Inference throughput of swift-eval's key/value-cache forward (lib/eval/kv.h) on a randomly
 * initialised Llama config on the CPU backend: prefill of BATCH prompts of PROMPT tokens, then
 * NEW greedy decode steps (one token per sequence per step, logits of every step computed).
 * Prints one JSON line. CONFIG is 10M or 100M (the shapes of tests/bench/eval_torch.py and
 * tests/bench/train_torch.py). */
#include "kernels/ops.h"
#include "lib/core/cli.h"
#include "lib/eval/generate.h"
#include "lib/eval/kv.h"
#include "lib/model/model.h"
#include "tests/bench/bench_config.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int n);

int main(int argc, char **argv)
{
    long th, B, P, G;
    if (argc != 6 || swift_parse_long(argv[2], 1, 256, &th) ||
        swift_parse_long(argv[3], 1, 64, &B) || swift_parse_long(argv[4], 1, 8192, &P) ||
        swift_parse_long(argv[5], 1, 8192, &G)) {
        fprintf(stderr, "usage: bench_eval 10M|100M THREADS BATCH PROMPT NEW\n");
        return 2;
    }
    struct swift_model_config c;
    if (bench_config(argv[1], &c) < 0) {
        fprintf(stderr, "bench_eval: unknown config '%s'\n", argv[1]);
        return 2;
    }
    omp_set_num_threads((int)th);
    openblas_set_num_threads((int)th);
    struct swift_model m;
    if (swift_model_init_random(&m, &c, &swift_cpu_ops, 1) < 0)
        return 1;
    int32_t *prompt = malloc((size_t)(B * P) * sizeof(int32_t));
    uint64_t s = 7;
    for (long i = 0; i < B * P; i++) {
        s = s * 6364136223846793005ULL + 1;
        prompt[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
    }
    struct swift_kv kv;
    if (swift_kv_init(&kv, &m, (int)B, (int)(P + G), (int)(B * P)) < 0)
        return 1;
    struct swift_gen_seq *seqs = calloc((size_t)B, sizeof(*seqs));
    struct swift_gen_opts o = {.max_new = (int)G, .temperature = 0};
    struct swift_gen_stats st = {0};
    for (int rep = 0; rep < 2; rep++) { /* the first run warms up */
        memset(&st, 0, sizeof(st));
        for (long b = 0; b < B; b++) {
            free(seqs[b].out);
            seqs[b] = (struct swift_gen_seq){.prompt = prompt + b * P, .prompt_len = (int)P};
        }
        if (swift_generate(&kv, seqs, (int)B, &o, NULL, NULL, &st) < 0)
            return 1;
    }
    printf("{\"impl\":\"swift\",\"config\":\"%s\",\"threads\":%ld,\"batch\":%ld,\"prompt\":%ld,"
           "\"new\":%ld,\"prefill_tokens_per_s\":%.1f,\"decode_tokens_per_s\":%.1f}\n",
           argv[1],
           th,
           B,
           P,
           G,
           (double)st.prefill_tokens / st.prefill_s,
           (double)st.decode_tokens / st.decode_s);
    for (long b = 0; b < B; b++)
        free(seqs[b].out);
    free(seqs);
    free(prompt);
    swift_kv_release(&kv);
    swift_model_free(&m);
    return 0;
}
