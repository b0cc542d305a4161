/* bench_train CONFIG THREADS BATCH SEQ STEPS [DTYPE]: training steps (forward, backward, AdamW)
 * of a randomly initialised Llama config on the CPU backend; prints one JSON line. CONFIG is 10M
 * or 100M (the same shapes tests/bench/train_torch.py builds); DTYPE float32 (default) or
 * bfloat16 (--torch-dtype bfloat16: bf16 matmuls through oneDNN, the peak is then the measured
 * bf16 GEMM rate, and weight_bf16_s is the time to round every weight to bf16 once).
 * tokens_per_s is over wall time; tokens_per_cpu_s over the process's user + system CPU time in
 * the same steps (all threads), which a loaded machine disturbs less. */
#include "lib/model/model.h"
#include "tests/bench/bench_config.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "lib/core/cli.h"
#include "lib/core/fileio.h"
#include "lib/model/backend.h"
#include "kernels/cpu/cpu.h"
#include "lib/train/optim.h"
#include "lib/train/train.h"
#include "lib/core/banned.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* user + system CPU seconds of the whole process (all threads) */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long th, B, T, steps;
    int bf16 = argc == 7 && !strcmp(argv[6], "bfloat16");
    if ((argc != 6 && argc != 7) || (argc == 7 && !bf16 && strcmp(argv[6], "float32")) ||
        swift_parse_long(argv[2], 1, 256, &th) || swift_parse_long(argv[3], 1, 64, &B) ||
        swift_parse_long(argv[4], 2, 8192, &T) || swift_parse_long(argv[5], 1, 1000, &steps)) {
        fprintf(stderr, "usage: bench_train 10M|100M THREADS BATCH SEQ STEPS [DTYPE]\n");
        return 2;
    }
    struct swift_model_config c;
    if (bench_config(argv[1], &c) < 0) {
        fprintf(stderr, "bench_train: unknown config '%s'\n", argv[1]);
        return 2;
    }
    omp_set_num_threads((int)th);
    openblas_set_num_threads((int)th);
    struct swift_backend be = {.ops = &swift_cpu_ops, .name = "cpu"};
    if (bf16 && swift_backend_set_math(&be, SWIFT_MATH_BF16) < 0)
        return 1;
    struct swift_model m;
    if (swift_model_init_random(&m, &c, &swift_cpu_ops, 1) < 0)
        return 1;
    const char *save = getenv("BENCH_SAVE"); /* write the model directory and stop */
    if (save) {
        char cfg[1024];
        int n = snprintf(cfg,
                         sizeof(cfg),
                         "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
                         "\"vocab_size\":%d,\"hidden_size\":%d,\"intermediate_size\":%d,"
                         "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
                         "\"num_key_value_heads\":%d,\"head_dim\":%d,\"rms_norm_eps\":1e-05,"
                         "\"rope_theta\":10000.0,\"max_position_embeddings\":8192,"
                         "\"tie_word_embeddings\":true,\"hidden_act\":\"silu\","
                         "\"torch_dtype\":\"float32\"}\n",
                         c.vocab_size,
                         c.hidden_size,
                         c.intermediate_size,
                         c.num_layers,
                         c.num_heads,
                         c.num_kv_heads,
                         c.head_dim);
        char *cp = swift_path_join(save, "config.json");
        if (swift_mkdirs(save, 0755) < 0 || swift_atomic_write(cp, cfg, (size_t)n) < 0 ||
            swift_model_save(&m, save, NULL) < 0)
            return 1;
        free(cp);
        swift_model_free(&m);
        return 0;
    }
    size_t N = (size_t)(B * T);
    int32_t *tok = malloc(N * 4), *tgt = malloc(N * 4), *pos = malloc(N * 4);
    uint64_t s = 7;
    for (size_t i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
        pos[i] = (int32_t)(i % (size_t)T);
    }
    for (size_t i = 0; i < N; i++)
        tgt[i] = (i + 1) % (size_t)T ? tok[i + 1] : -1;
    struct swift_adamw opt;
    if (swift_adamw_init(&opt, &swift_cpu_ops, m.p, m.np, 0.9f, 0.95f, 1e-8f, 0.1f) < 0)
        return 1;
    struct swift_batch b = {(int)B, (int)T, tok, tgt, pos};
    double t0 = 0, ct0 = 0, loss = 0;
    for (long i = 0; i <= steps; i++) { /* step 0 is warm-up */
        if (i == 1) {
            t0 = now();
            ct0 = cpu_now();
        }
        swift_model_zero_grad(&m);
        struct swift_loss l = {0};
        if (swift_model_forward(&m, &b, &l, 1.0f / (float)(B * (T - 1))) < 0)
            return 1;
        swift_model_backward(&m, &b);
        double gn = swift_grad_norm(m.ops, m.p, m.np);
        swift_adamw_step(&opt, 1e-4f, swift_clip_scale(gn, 1.0));
        loss = l.sum / l.count;
    }
    double dt = (now() - t0) / (double)steps, dc = (cpu_now() - ct0) / (double)steps;
    double fpt = swift_model_flops_per_token(&m, (int)T);
    double peak = bf16 ? swift_backend_matmul_peak_gflops(&be) : swift_sgemm_peak_gflops();
    double conv = 0; /* every weight rounded to bf16 once (what a bf16 weight copy saves) */
    if (bf16) {
        uint16_t *tmp = malloc(m.nparams * 2);
        double c0 = now();
        size_t off = 0;
        for (int i = 0; tmp && i < m.np; i++) {
            swift_cpu_to_bf16(tmp + off, m.p[i].w, m.p[i].numel);
            off += m.p[i].numel;
        }
        conv = now() - c0;
        free(tmp);
    }
    printf("{\"impl\":\"swift\",\"dtype\":\"%s\",\"weight_bf16_s\":%.4f,",
           bf16 ? "bfloat16" : "float32",
           conv);
    printf("\"config\":\"%s\",\"params\":%zu,\"threads\":%ld,\"batch\":%ld,"
           "\"seq\":%ld,\"step_s\":%.4f,\"tokens_per_s\":%.1f,\"cpu_step_s\":%.4f,"
           "\"tokens_per_cpu_s\":%.1f,\"model_gflops\":%.2f,"
           "\"sgemm_peak_gflops\":%.2f,\"frac_of_peak\":%.3f,\"loss\":%.4f}\n",
           argv[1],
           m.nparams,
           th,
           B,
           T,
           dt,
           (double)N / dt,
           dc,
           (double)N / dc,
           fpt * (double)N / dt / 1e9,
           peak,
           fpt * (double)N / dt / 1e9 / peak,
           loss);
    swift_adamw_free(&opt);
    swift_model_free(&m);
    free(tok);
    free(tgt);
    free(pos);
    return 0;
}
