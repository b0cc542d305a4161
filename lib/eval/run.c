/* swift-eval's runner: model + tokenizer + dataset -> task -> record (see run.h). */
#include "lib/eval/run.h"
#include "lib/eval/internal.h"
#include "kernels/ops.h"
#include "lib/model/backend.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/record.h"
#include "lib/formats/shard.h"
#include "lib/model/lora.h"
#include "lib/model/vlm.h"
#include "lib/preprocess/agent.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

void swift_eval_opts_init(struct swift_eval_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->task = -1;
    o->torch_dtype = -1; /* the checkpoint's (swift_backend_default_math) */
    o->max_new_tokens = 256;
    o->temperature = 0.0;
    o->top_p = 1.0;
    o->seed = 42;
    o->batch_size = 8;
    o->max_length = 0;
    o->max_drop = 0.01;
    o->beta = 0.1;
}

/* ---- setup ---- */

/* eos ids: generation_config.json and config.json (an int or a list), tokenizer's eos_token. */
static void find_eos(struct swift_eval_runner *r)
{
    long ids[16];
    int n = swift_model_eos_ids(r->o->model, ids, 16);
    for (int k = 0; k < n; k++)
        swift_eval_add_eos(r, ids[k]);
    const char *eos = swift_tokenizer_config_str(r->tok, "eos_token");
    if (eos)
        swift_eval_add_eos(r, swift_tokenizer_token_id(r->tok, eos));
}

/* pref: the reference (--ref-model) and --max-length; no tokenizer (pair shards hold ids). */
static int load_pref(struct swift_eval_runner *r, struct swift_eval_opts *oo,
                     const struct swift_ops *ops)
{
    if (oo->ref_model) {
        if (swift_model_load(&r->ref, oo->ref_model, ops, 1) < 0)
            return -1;
        r->have_ref = 1;
        if (r->ref.cfg.vocab_size != r->V)
            return swift_error("--ref-model '%s' has %d ids in its vocabulary, the model %d",
                               oo->ref_model,
                               r->ref.cfg.vocab_size,
                               r->V);
    } else if (!oo->adapters || oo->merge_adapters) {
        swift_warn("no --adapters (or merged) and no --ref-model: the reference is the model "
                   "itself, every reward is 0");
    }
    int mp = r->m.cfg.max_position_embeddings;
    if (oo->max_length <= 0)
        oo->max_length = mp > 0 && mp < 4096 ? mp : 4096;
    return 0;
}

/* Load the model (with its adapters), the tokenizer, the stop ids and the prompter into r, and
 * settle --max-length (0: the model's max_position_embeddings, at most 4096). Returns 0, -1, or
 * SWIFT_MISUSED for a usage error (--device). Whatever was loaded is freed by runner_release. */
/* config.json names a vision-language model (lib/model/vlm.h) */
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

/* A vision-language model for loss / ppl on image shards: the other tasks and options are not
 * supported yet (refused). */
static int load_vlm(struct swift_eval_runner *r, struct swift_eval_opts *oo,
                    const struct swift_ops *ops)
{
    const struct swift_eval_opts *o = oo;
    if (o->task != SWIFT_EVAL_LOSS && o->task != SWIFT_EVAL_PPL && o->task != SWIFT_EVAL_GSM8K &&
        o->task != SWIFT_EVAL_EXACT)
        return swift_error("%s: --task %s on a vision-language model is not supported yet (loss, "
                           "ppl, gsm8k and exact are)",
                           o->model,
                           swift_eval_task_name(o->task));
    r->vlm = swift_xcalloc(1, sizeof(*r->vlm));
    if (swift_vlm_load(r->vlm, o->model, ops, SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER | SWIFT_VLM_LLM) <
        0) {
        free(r->vlm);
        r->vlm = NULL;
        return -1;
    }
    if (o->adapters) {
        /* swift-train's adapter of the language model and its trained vision tensors; merged
         * with --merge-adapters, else applied unmerged as the trainer's validation does */
        struct swift_lora_opts lo;
        if (swift_vlm_lora_load(r->vlm, o->adapters, &lo) < 0)
            return -1;
        r->vlm->llm.lora_dropout = 0.0f;
        if (o->merge_adapters && swift_kv_merge_adapters(&r->vlm->llm) < 0)
            return -1;
    }
    r->V = r->vlm->llm.cfg.vocab_size;
    return 0;
}

static int runner_load(struct swift_eval_runner *r, struct swift_eval_opts *oo)
{
    const struct swift_eval_opts *o = oo;
    struct swift_backend be;
    int brc = swift_backend_select(&be, o->device && strcmp(o->device, "auto") ? o->device : "cpu");
    if (brc)
        return brc > 0 ? SWIFT_MISUSED : SWIFT_FAILED;
    int vl = !swift_model_is_gguf(o->model) && is_vlm(o->model);
    if (vl && load_vlm(r, oo, be.ops) < 0)
        return -1;
    if (!vl && swift_model_load(&r->m, o->model, be.ops, 1) < 0)
        return -1;
    r->have_model = !vl;
    if (!vl)
        r->V = r->m.cfg.vocab_size;
    if (o->adapters && !vl) {
        struct swift_lora_opts lo;
        if (swift_lora_load(&r->m, o->adapters, &lo) < 0)
            return -1;
        r->m.lora_dropout = 0.0f; /* evaluation */
        if (o->merge_adapters && swift_kv_merge_adapters(&r->m) < 0)
            return -1;
    }
    /* --torch-dtype bfloat16: from here (the adapters merged in fp32) the matmuls run in bf16 */
    int math =
        o->torch_dtype >= 0 ? o->torch_dtype : swift_backend_default_math(&be, o->model, !o->quiet);
    if (!vl && swift_backend_set_math(&be, math) < 0)
        return -1;
    if (o->task == SWIFT_EVAL_PREF)
        return load_pref(r, oo, be.ops);
    if (swift_tokenizer_load(&r->tok, o->model) < 0)
        return -1;
    if (swift_tokenizer_vocab_size(r->tok) > (uint32_t)r->V)
        return swift_error("tokenizer has %u ids, the model's vocabulary only %d",
                           swift_tokenizer_vocab_size(r->tok),
                           r->V);
    if (!(r->st = swift_tok_state_new(r->tok)))
        return -1;
    r->logits = swift_xmalloc((size_t)SWIFT_EVAL_MAX_WANT * r->V * sizeof(float));
    find_eos(r);
    const char *tname = o->template_name;
    if (o->task == SWIFT_EVAL_TOOLCALL && (!tname || !strcmp(tname, "none"))) {
        /* tool calls need the chat template: the tokenizer's when --template does not say */
        if (!(tname = swift_eval_template_guess(r->tok)))
            return swift_error("--task toolcall needs a chat template; the tokenizer has none "
                               "swift-eval knows (use --template)");
    }
    if (!(r->pr = swift_eval_prompter_new(r->tok, tname)))
        return -1;
    r->agent = o->agent ? o->agent : swift_agent_for_template(tname);
    if (!r->agent)
        r->agent = SWIFT_AGENT_HERMES;
    int mp = vl ? r->vlm->llm.cfg.max_position_embeddings : r->m.cfg.max_position_embeddings;
    if (o->max_length <= 0)
        oo->max_length = mp > 0 && mp < 4096 ? mp : 4096;
    else if (o->max_length > mp && mp > 0)
        swift_warn(
            "--max-length %d is beyond the model's max_position_embeddings %d", o->max_length, mp);
    return 0;
}

static void runner_release(struct swift_eval_runner *r)
{
    free(r->logits);
    swift_eval_prompter_free(r->pr);
    if (r->have_kv)
        swift_kv_release(&r->kv);
    if (r->st)
        swift_tok_state_free(r->st);
    if (r->tok)
        swift_tokenizer_free(r->tok);
    if (r->have_model)
        swift_model_free(&r->m);
    if (r->have_ref)
        swift_model_free(&r->ref);
    if (r->vlm) {
        swift_vlm_free(r->vlm);
        free(r->vlm);
    }
    if (r->curl)
        curl_global_cleanup();
}

/* The record's fields after the metrics: n, the settings, times and token counts (the task ran
 * from t1 to t2; load_s is the setup time charged to the first dataset). */
static void record_finish(struct swift_eval_runner *r, json_t *rec, long n, double t1, double t2,
                          double load_s)
{
    const struct swift_eval_opts *o = r->o;
    json_object_set_new(rec, "n", json_integer(n));
    json_t *cfg = json_object();
    json_object_set_new(cfg, "few_shot", json_integer(o->few_shot));
    json_object_set_new(cfg, "limit", json_integer(o->limit));
    json_object_set_new(cfg, "batch_size", json_integer(o->batch_size));
    json_object_set_new(cfg, "max_length", json_integer(o->max_length));
    json_object_set_new(cfg, "merge_adapters", json_boolean(o->merge_adapters));
    if (r->pr)
        json_object_set_new(cfg, "template", json_string(swift_eval_prompter_name(r->pr)));
    if (o->task == SWIFT_EVAL_PREF) {
        json_object_set_new(cfg, "beta", json_real(o->beta));
        json_object_set_new(cfg,
                            "ref_model",
                            o->ref_model                        ? json_string(o->ref_model)
                            : o->adapters && !o->merge_adapters ? json_string("adapters off")
                                                                : json_string("the model"));
    }
    if (o->task == SWIFT_EVAL_TOOLCALL)
        json_object_set_new(cfg, "agent_template", json_string(swift_agent_name(r->agent)));
    if (o->eval_url)
        json_object_set_new(cfg, "eval_url", json_string(o->eval_url));
    if (swift_eval_task_generates(o->task)) {
        json_object_set_new(cfg, "max_new_tokens", json_integer(o->max_new_tokens));
        json_object_set_new(cfg, "temperature", json_real(o->temperature));
        json_object_set_new(cfg, "top_p", json_real(o->top_p));
        json_object_set_new(cfg, "seed", json_integer((json_int_t)o->seed));
    }
    json_object_set_new(rec, "config", cfg);
    json_object_set_new(rec, "time_s", json_real(t2 - t1 + load_s));
    json_object_set_new(rec, "load_s", json_real(load_s));
    json_object_set_new(rec, "tokens", json_integer(r->tokens));
    json_object_set_new(
        rec, "tokens_per_s", json_real(t2 > t1 ? (double)r->tokens / (t2 - t1) : 0.0));
    if (swift_eval_task_generates(o->task)) {
        const struct swift_gen_stats *g = &r->gen;
        json_object_set_new(rec, "prefill_tokens", json_integer(g->prefill_tokens));
        json_object_set_new(rec, "decode_tokens", json_integer(g->decode_tokens));
        json_object_set_new(
            rec,
            "prefill_tokens_per_s",
            json_real(g->prefill_s > 0 ? (double)g->prefill_tokens / g->prefill_s : 0.0));
        json_object_set_new(
            rec,
            "decode_tokens_per_s",
            json_real(g->decode_s > 0 ? (double)g->decode_tokens / g->decode_s : 0.0));
    }
}

/* Run the task on one dataset (o->dataset) and build its record. */
static int eval_one(struct swift_eval_runner *r, struct swift_eval_set *set, double load_s,
                    json_t **out)
{
    const struct swift_eval_opts *o = r->o;
    r->tokens = 0;
    r->fwd_s = 0;
    memset(&r->gen, 0, sizeof(r->gen));
    r->tc_names = 0;
    long n = 0;
    json_t *rec = swift_eval_record_new(
        o->eval_url && !o->model ? o->eval_url : o->model, o->adapters, o->task, o->dataset, 0);
    double t1 = swift_eval_now();
    int trc, scored = o->task == SWIFT_EVAL_LOSS || o->task == SWIFT_EVAL_PPL ||
                      o->task == SWIFT_EVAL_PREF;
    snprintf(r->prog_title, sizeof(r->prog_title), "eval %s", swift_eval_task_name(o->task));
    swift_progress_start(&r->prog,
                         r->prog_title,
                         0,
                         o->task == SWIFT_EVAL_PREF ? "pairs"
                         : scored                   ? "samples"
                                                    : "items",
                         o->quiet && o->progress != SWIFT_PROGRESS_ON ? SWIFT_PROGRESS_OFF
                                                                      : o->progress);
    if (o->task == SWIFT_EVAL_PREF)
        trc = swift_eval_run_pref(r, rec, &n);
    else if (scored && r->vlm)
        trc = swift_eval_run_vl_loss(r, rec, &n);
    else if (scored)
        trc = swift_eval_run_loss(r, rec, &n);
    else if (o->eval_url)
        trc = swift_eval_run_remote(r, set, rec, &n);
    else if (r->vlm)
        trc = swift_eval_run_vl_gen(r, set, rec, &n);
    else if (o->task == SWIFT_EVAL_MC || o->task == SWIFT_EVAL_MMLU)
        trc = swift_eval_run_mc(r, set, rec, &n);
    else
        trc = swift_eval_run_gen(r, set, rec, &n);
    if (trc < 0) {
        swift_progress_end(&r->prog);
        json_decref(rec);
        return -1;
    }
    swift_progress_stop(&r->prog);
    double t2 = swift_eval_now();
    record_finish(r, rec, n, t1, t2, load_s);
    *out = rec;
    return 0;
}

/* Shards for loss/ppl must come from the model's tokenizer: refused as swift-train refuses them
 * (one check, lib/formats/shard.h), before the model loads. Raw files need no check. pref needs
 * a pair shard directory (kind "pairs"). */
static int check_shards(const char *model, const char *dataset, int pref)
{
    char *index = swift_path_join(dataset, "index.json");
    int rc = 0;
    if (swift_is_dir(dataset) && access(index, F_OK) == 0) {
        struct swift_shard_index ix;
        rc = swift_shard_index_read(&ix, dataset);
        if (rc == 0)
            rc = swift_shard_index_check_tokenizer(&ix, model, dataset);
        if (rc == 0 && pref)
            rc = swift_shard_index_check_kind(&ix, "pairs", "--task pref", dataset);
        swift_shard_index_release(&ix);
    } else if (pref) {
        rc = swift_error("'%s' is not a shard directory: --task pref reads pair shards (make "
                         "them with swift-preprocess --kind pairs)",
                         dataset);
    }
    free(index);
    return rc;
}

/* Write every record (one line each) to path atomically. */
static int write_records(json_t *recs, const char *path)
{
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    for (size_t i = 0; i < json_array_size(recs); i++)
        if (swift_record_print(af.fp, json_array_get(recs, i), SWIFT_RECORD_DIGITS) < 0) {
            swift_atomic_abort(&af);
            return swift_error_errno("cannot write '%s'", path);
        }
    return swift_atomic_commit(&af);
}

/* Every dataset in turn: its record on stdout (flushed, so a long run shows each as it ends),
 * in recs, as a table on stderr, and through the gate. Returns the regressions found, or -1. */
static int eval_all(struct swift_eval_runner *r, struct swift_eval_opts *oo, const char *const *ds,
                    struct swift_eval_set *sets, int nd, double load_s, json_t *recs)
{
    const struct swift_eval_opts *o = oo;
    int regressions = 0;
    for (int i = 0; i < nd; i++) {
        json_t *rec = NULL;
        oo->dataset = ds[i];
        if (eval_one(r, &sets[i], i == 0 ? load_s : 0.0, &rec) < 0)
            return -1;
        json_array_append_new(recs, rec);
        if (!o->quiet)
            swift_eval_record_table(rec, stderr);
        /* the comparison goes into the record: gate first, then print */
        int g = o->baseline ? swift_eval_gate(rec, o->baseline, o->max_drop, !o->quiet) : 0;
        if (g < 0)
            return -1;
        regressions += g;
        if (swift_record_print(stdout, rec, SWIFT_RECORD_DIGITS) < 0 || fflush(stdout) != 0)
            return swift_error_errno("write error on standard output");
    }
    return regressions;
}

int swift_eval_run(const struct swift_eval_opts *opts)
{
    struct swift_eval_opts oo = *opts;
    const struct swift_eval_opts *o = &oo;
    struct swift_eval_runner r = {.o = o};
    int rc = -1, nd = o->ndatasets > 0 ? o->ndatasets : 1;
    const char *const one[1] = {o->dataset};
    const char *const *ds = o->ndatasets > 0 ? o->datasets : one;
    json_t *recs = json_array();
    double t0 = swift_eval_now();
    /* the datasets first: a bad row should not wait for a large model to load */
    if (!recs)
        abort();
    struct swift_eval_set *sets = swift_xcalloc((size_t)nd, sizeof(*sets));
    if (o->predictions && swift_eval_task_generates(o->task) && !(r.preds = json_array()))
        abort();
    int pref = o->task == SWIFT_EVAL_PREF;
    int scored = o->task == SWIFT_EVAL_LOSS || o->task == SWIFT_EVAL_PPL || pref;
    for (int i = 0; i < nd; i++) {
        swift_eval_set_init(&sets[i]);
        if (!scored && swift_eval_read(o->task, ds[i], &sets[i]) < 0)
            goto out;
        if (scored && check_shards(o->model, ds[i], pref) < 0)
            goto out;
        if (o->baseline &&
            swift_eval_baseline_check(o->baseline, swift_eval_task_name(o->task), ds[i]) < 0)
            goto out;
    }
    if (o->eval_url) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT))
            abort();
        r.curl = 1;
    } else if ((rc = runner_load(&r, &oo)) < 0) {
        goto out;
    }
    rc = -1;
    int regressions = eval_all(&r, &oo, ds, sets, nd, swift_eval_now() - t0, recs);
    if (regressions < 0)
        goto out;
    if (o->output && write_records(recs, o->output) < 0)
        goto out;
    if (r.preds && write_records(r.preds, o->predictions) < 0)
        goto out;
    rc = regressions ? -1 : 0;
out:
    for (int i = 0; i < nd; i++)
        swift_eval_set_release(&sets[i]);
    free(sets);
    json_decref(recs);
    json_decref(r.preds);
    runner_release(&r);
    return rc == SWIFT_MISUSED ? SWIFT_MISUSED : rc < 0 ? SWIFT_FAILED : SWIFT_DONE;
}
