/* What evaluation adds to the key/value cache (see kv.h). */
#include "lib/eval/kv.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

#include <math.h>
#include <stdlib.h>

#include "lib/core/banned.h"

/* DoRA: W (already W + scale * B @ A) row by row times mag / ||row||, on the host */
static void dora_fold(struct swift_model *m, struct swift_linear *L)
{
    size_t nw = (size_t)L->out * L->in;
    float *w = swift_xmalloc(nw * sizeof(float)), *mag = swift_xmalloc(L->out * sizeof(float));
    m->ops->download(w, L->w, nw * sizeof(float));
    m->ops->download(mag, L->lora->mag, L->out * sizeof(float));
    for (int o = 0; o < L->out; o++) {
        float *row = w + (size_t)o * L->in;
        double ss = 0;
        for (int i = 0; i < L->in; i++)
            ss += (double)row[i] * row[i];
        float f = mag[o] / (float)sqrt(ss);
        for (int i = 0; i < L->in; i++)
            row[i] *= f;
    }
    m->ops->upload(L->w, w, nw * sizeof(float));
    free(w);
    free(mag);
}

/* Fold LoRA adapters into the base weights: W += scale * B @ A (DoRA: then each row times
 * mag / ||row||); then run without them. */
int swift_kv_merge_adapters(struct swift_model *m)
{
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++)
            if (m->layers[l].lin[k].lora && !m->layers[l].lin[k].w)
                return swift_error("--merge-adapters: %s is quantized (4 or 8 bits): the adapters "
                                   "run aside instead (drop --merge-adapters)",
                                   m->layers[l].lin[k].name);
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!L->lora)
                continue;
            int rk = m->lora_rank;
            size_t na = (size_t)L->in * rk;
            /* A is backend memory: transposed on the host, the transpose uploaded */
            float *dAt = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, na * sizeof(float));
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
            swift_mem_free(m->ops->free, dAt);
            free(A);
            free(At);
            if (L->lora->mag)
                dora_fold(m, L);
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
