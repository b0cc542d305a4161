/* load — what both of swift-infer's modes serve (batch.h, swift_infer_load): the model with its
 * adapters merged, its tokenizer and chat template, the ids that end a choice, and the engine. */
#include "lib/infer/batch.h"

#include "kernels/cpu/cpu.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/eval/kv.h"
#include "lib/model/backend.h"
#include "lib/model/lora.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <omp.h>
#include <string.h>

#include <cblas.h>

#include "lib/core/banned.h"

static void add_eos(int32_t *eos, int *n, long id, long V)
{
    if (id < 0 || id >= V || *n >= 16)
        return;
    for (int i = 0; i < *n; i++)
        if (eos[i] == id)
            return;
    eos[(*n)++] = (int32_t)id;
}

static int load_model(struct swift_infer_model *im, const struct swift_infer_opts *o)
{
    if (o->threads > 0) {
        omp_set_num_threads(o->threads);
        openblas_set_num_threads(o->threads);
    }
    struct swift_backend be;
    int brc = swift_backend_select(&be, o->device && strcmp(o->device, "auto") ? o->device : "cpu");
    if (brc)
        return brc > 0 ? SWIFT_MISUSED : SWIFT_FAILED;
    if (!be.cuda) { /* which kernel the decode steps' fp32 matmuls (N <= 8 rows) run on */
        struct swift_targ a[] = {
            SWIFT_TARG_S("impl", swift_cpu_matvec_name(swift_cpu_matvec_impl())),
            SWIFT_TARG_I("max_rows", SWIFT_CPU_MATVEC_MAX_M)};
        swift_trace_instant("infer", "decode_matmul", a, 2);
    }
    if (swift_model_load(&im->m, o->model, be.ops, 1) < 0)
        return -1;
    im->have_model = 1;
    if (o->adapters) {
        struct swift_lora_opts lo;
        if (swift_lora_load(&im->m, o->adapters, &lo) < 0)
            return -1;
        im->m.lora_dropout = 0.0f;
        if (swift_kv_merge_adapters(&im->m) < 0)
            return -1;
    }
    if (swift_tokenizer_load(&im->tok, o->model) < 0)
        return -1;
    if (swift_tokenizer_vocab_size(im->tok) > (uint32_t)im->m.cfg.vocab_size)
        return swift_error("tokenizer has %u ids, the model's vocabulary only %ld",
                           swift_tokenizer_vocab_size(im->tok),
                           (long)im->m.cfg.vocab_size);
    if (!(im->st = swift_tok_state_new(im->tok)))
        return -1;
    const char *tname = o->template_name ? o->template_name : swift_template_guess(im->tok);
    im->tpl = tname ? swift_template_find(tname) : NULL;
    if (o->template_name && !im->tpl) {
        swift_usage("unknown template '%s' (%s)", o->template_name, SWIFT_TEMPLATE_NAMES);
        return SWIFT_MISUSED;
    }
    im->agent = o->agent ? o->agent : swift_agent_for_template(tname);
    if (!im->agent)
        im->agent = SWIFT_AGENT_HERMES;
    return 0;
}

int swift_infer_load(struct swift_infer_model *im, const struct swift_infer_opts *o)
{
    int rc = load_model(im, o);
    if (rc)
        return rc;
    long V = im->m.cfg.vocab_size;
    int32_t eos[16];
    int neos = 0;
    long ids[16];
    int n = swift_model_eos_ids(o->model, ids, 16);
    for (int k = 0; k < n; k++)
        add_eos(eos, &neos, ids[k], V);
    const char *es = swift_tokenizer_config_str(im->tok, "eos_token");
    if (es)
        add_eos(eos, &neos, swift_tokenizer_token_id(im->tok, es), V);
    /* the chat template's end of turn ends a choice too */
    add_eos(eos, &neos, swift_tokenizer_token_id(im->tok, "<|im_end|>"), V);
    add_eos(eos, &neos, swift_tokenizer_token_id(im->tok, "<|eot_id|>"), V);
    int mp = im->m.cfg.max_position_embeddings;
    im->max_len = o->engine.max_model_len > 0 ? o->engine.max_model_len : mp > 0 ? mp : 2048;
    char err[256];
    im->eng = swift_engine_new(&im->m, &o->engine, eos, neos, err, sizeof(err));
    if (!im->eng)
        return swift_error("%s", err);
    return 0;
}

void swift_infer_release(struct swift_infer_model *im)
{
    if (im->eng)
        swift_engine_free(im->eng);
    if (im->st)
        swift_tok_state_free(im->st);
    if (im->tok)
        swift_tokenizer_free(im->tok);
    if (im->have_model)
        swift_model_free(&im->m);
    memset(im, 0, sizeof(*im));
}
