/* load — what both of swift-infer's modes serve (batch.h, swift_infer_load): the model with its
 * adapters merged, its tokenizer and chat template, the ids that end a choice, and the engine. */
#include "lib/infer/batch.h"

#include "kernels/cpu/cpu.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/eval/kv.h"
#include "lib/model/backend.h"
#include "lib/model/lora.h"
#include "lib/model/vlm.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <jansson.h>
#include <omp.h>
#include <stdlib.h>
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

/* config.json's model_type is a vision-language model's (lib/model/vlm.h) */
static int is_vlm(const char *dir)
{
    char *path = swift_path_join(dir, "config.json");
    json_t *root = json_load_file(path, 0, NULL);
    free(path);
    const char *mt = root ? json_string_value(json_object_get(root, "model_type")) : NULL;
    int vl = mt && (!strcmp(mt, "qwen2_vl") || !strcmp(mt, "qwen2_5_vl"));
    json_decref(root);
    return vl;
}

/* The image processor's settings: the vision config's patch, merge and temporal sizes, and
 * preprocessor_config.json's min_pixels / max_pixels (or size.shortest_edge / longest_edge)
 * when the directory has one, else Qwen2-VL's defaults. */
static void vision_opts(struct swift_infer_model *im, const char *dir)
{
    swift_vl_opts_default(&im->vo);
    im->vo.patch_size = (uint32_t)im->vlm->vc.patch_size;
    im->vo.merge_size = (uint32_t)im->vlm->vc.merge_size;
    im->vo.temporal_patch_size = (uint32_t)im->vlm->vc.temporal_patch_size;
    char *path = swift_path_join(dir, "preprocessor_config.json");
    json_t *root = json_load_file(path, 0, NULL);
    free(path);
    if (!root)
        return;
    json_t *size = json_object_get(root, "size");
    json_t *mn = json_object_get(root, "min_pixels"), *mx = json_object_get(root, "max_pixels");
    if (!json_is_integer(mn) && json_is_object(size))
        mn = json_object_get(size, "shortest_edge");
    if (!json_is_integer(mx) && json_is_object(size))
        mx = json_object_get(size, "longest_edge");
    if (json_is_integer(mn) && json_integer_value(mn) > 0)
        im->vo.min_pixels = (uint64_t)json_integer_value(mn);
    if (json_is_integer(mx) && json_integer_value(mx) > 0)
        im->vo.max_pixels = (uint64_t)json_integer_value(mx);
    json_decref(root);
}

static int load_vlm(struct swift_infer_model *im, const struct swift_infer_opts *o,
                    const struct swift_ops *ops)
{
    im->vlm = swift_xcalloc(1, sizeof(*im->vlm));
    if (swift_vlm_load(im->vlm, o->model, ops, SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER | SWIFT_VLM_LLM) <
        0) {
        free(im->vlm);
        im->vlm = NULL;
        return -1;
    }
    im->model = &im->vlm->llm;
    if (o->adapters) {
        /* swift-train's adapter of the language model and its trained vision tensors, merged */
        struct swift_lora_opts lo;
        if (swift_vlm_lora_load(im->vlm, o->adapters, &lo) < 0)
            return -1;
        im->model->lora_dropout = 0.0f;
        if (swift_kv_merge_adapters(im->model) < 0)
            return -1;
    }
    vision_opts(im, o->model);
    return 0;
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
    if (!swift_model_is_gguf(o->model) && is_vlm(o->model)) {
        if (load_vlm(im, o, be.ops) < 0)
            return -1;
    } else {
        if (swift_model_load(&im->m, o->model, be.ops, 1) < 0)
            return -1;
        im->have_model = 1;
        im->model = &im->m;
    }
    if (o->adapters && !im->vlm) {
        struct swift_lora_opts lo;
        if (swift_lora_load(&im->m, o->adapters, &lo) < 0)
            return -1;
        im->m.lora_dropout = 0.0f;
        if (swift_kv_merge_adapters(&im->m) < 0)
            return -1;
    }
    if (swift_tokenizer_load(&im->tok, o->model) < 0)
        return -1;
    if (swift_tokenizer_vocab_size(im->tok) > (uint32_t)im->model->cfg.vocab_size)
        return swift_error("tokenizer has %u ids, the model's vocabulary only %ld",
                           swift_tokenizer_vocab_size(im->tok),
                           (long)im->model->cfg.vocab_size);
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
    long V = im->model->cfg.vocab_size;
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
    int mp = im->model->cfg.max_position_embeddings;
    im->max_len = o->engine.max_model_len > 0 ? o->engine.max_model_len : mp > 0 ? mp : 2048;
    char err[256];
    im->eng = swift_engine_new(im->model, &o->engine, eos, neos, err, sizeof(err));
    if (!im->eng)
        return swift_error("%s", err);
    if (im->vlm)
        swift_engine_set_vlm(im->eng, im->vlm);
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
    if (im->vlm) {
        swift_vlm_free(im->vlm);
        free(im->vlm);
    }
    memset(im, 0, sizeof(*im));
}
