/* What evaluation adds to the key/value cache (see kv.h). */
#include "lib/eval/kv.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

#include <math.h>
#include <stdlib.h>

#include "lib/core/banned.h"

/* Fold LoRA adapters into the base weights: W += scale * B @ A; then run without them. */
int swift_kv_merge_adapters(struct swift_model *m)
{
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!L->lora)
                continue;
            int rk = m->lora_rank;
            size_t na = (size_t)L->in * rk;
            /* A is backend memory: transposed on the host, the transpose uploaded */
            float *dAt = m->ops->alloc(na * sizeof(float));
            if (!dAt)
                return swift_error("out of memory");
            float *A = swift_xmalloc(na * sizeof(float)), *At = swift_xmalloc(na * sizeof(float));
            m->ops->download(A, L->lora->A, na * sizeof(float));
            for (int a = 0; a < rk; a++)
                for (int i = 0; i < L->in; i++)
                    At[(size_t)i * rk + a] = A[(size_t)a * L->in + i];
            m->ops->upload(dAt, At, na * sizeof(float));
            /* W (out,in) += scale * B (out,r) @ At (in,r)^T */
            m->ops->matmul_fwd(L->w, L->lora->B, dAt, NULL, L->out, rk, L->in, m->lora_scale, 1.0f);
            m->ops->free(dAt);
            free(A);
            free(At);
            free(L->lora); /* A and B live in m->lora_params, freed with the model */
            L->lora = NULL;
        }
    return 0;
}

double swift_logprob(const float *logits, int V, int target)
{
    double mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double s = 0;
    for (int i = 0; i < V; i++)
        s += exp((double)logits[i] - mx);
    return (double)logits[target] - mx - log(s);
}
