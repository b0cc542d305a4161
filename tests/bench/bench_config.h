/* bench_config — the benchmark model shapes shared by bench_train and bench_eval (and built in
 * PyTorch by tests/bench/train_torch.py and eval_torch.py): a ~10M and a ~100M Llama. */
#ifndef SWIFT_BENCH_CONFIG_H
#define SWIFT_BENCH_CONFIG_H

#include "lib/model/model.h"

#include <string.h>

/* Fill c for "10M" or "100M"; returns 0, or -1 for another name. */
static inline int bench_config(const char *name, struct swift_model_config *c)
{
    *c = (struct swift_model_config){.model_type = "llama",
                                     .dtype = "float32",
                                     .rms_norm_eps = 1e-5f,
                                     .rope_theta = 10000.0,
                                     .tie_embeddings = 1,
                                     .max_position_embeddings = 8192};
    if (!strcmp(name, "10M")) {
        c->vocab_size = 16000, c->hidden_size = 256, c->intermediate_size = 768;
        c->num_layers = 6, c->num_heads = 8, c->num_kv_heads = 4, c->head_dim = 32;
    } else if (!strcmp(name, "100M")) {
        c->vocab_size = 32000, c->hidden_size = 768, c->intermediate_size = 2048;
        c->num_layers = 12, c->num_heads = 12, c->num_kv_heads = 12, c->head_dim = 64;
    } else {
        return -1;
    }
    return 0;
}

#endif
