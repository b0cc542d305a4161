/* eval/run_vl_gen — the gsm8k and exact tasks on a vision-language model: each item's question
 * with its images (lib/infer/image.h: read, decoded, processed as Qwen2-VL's processor), the
 * prompt rendered as for a text model, generated on swift-infer's engine (lib/infer/engine.h with
 * the model's vision tower and M-RoPE), --batch-size requests at a time, stopped at the stop ids
 * or a stop word, scored as run_gen.c scores. */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/infer/engine.h"
#include "lib/infer/image.h"
#include "lib/model/vlm.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/preprocess/vision.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* One item being generated. */
struct vl_job {
    int64_t id;
    int32_t *out;
    int n, done;
    struct swift_eval_runner *r;
};

/* The engine's callback: the token kept; a stop word in the decoded tail ends the choice. */
static int vl_on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct vl_job *j = ctx;
    if (ev->finish != SWIFT_FINISH_NONE)
        j->done = 1;
    if (ev->token < 0)
        return 0;
    j->out[j->n++] = ev->token;
    int from = j->n > 16 ? j->n - 16 : 0;
    uint32_t u[16];
    for (int k = from; k < j->n; k++)
        u[k - from] = (uint32_t)j->out[k];
    char *text;
    size_t len;
    if (swift_tokenizer_decode(j->r->tok, u, (size_t)(j->n - from), 0, &text, &len) < 0)
        return 1;
    int stop = 0;
    for (int k = 0; swift_eval_stop_words[k]; k++)
        stop |= strstr(text, swift_eval_stop_words[k]) != NULL;
    free(text);
    if (stop)
        j->done = 1;
    return stop;
}

/* The question with an image mark at each "<image>" (none: every image before it). */
static char *question_text(const struct swift_eval_item *it)
{
    static const char mark[] = "<|vision_start|><|image_pad|><|vision_end|>";
    size_t ml = sizeof(mark) - 1, ql = strlen(it->question), have = 0;
    for (const char *p = it->question; (p = strstr(p, "<image>")); p += 7)
        have++;
    char *out = swift_xmalloc(ql + (size_t)it->nimages * ml + 1), *o = out;
    if (have == 0)
        for (int k = 0; k < it->nimages; k++, o += ml)
            memcpy(o, mark, ml);
    for (const char *p = it->question; *p;) {
        const char *h = have ? strstr(p, "<image>") : NULL;
        size_t n = h ? (size_t)(h - p) : strlen(p);
        memcpy(o, p, n);
        o += n;
        if (!h)
            break;
        memcpy(o, mark, ml);
        o += ml;
        p = h + 7;
    }
    *o = 0;
    return out;
}

/* Item it's prompt ids (*ids) and images (px). 0 or -1 (reported with the row). */
static int item_prompt(struct swift_eval_runner *r, const struct swift_eval_item *it,
                       struct swift_eval_ids *ids, struct swift_infer_pixels *px)
{
    const struct swift_vlm *v = r->vlm;
    struct swift_vl_opts vo;
    swift_vl_opts_default(&vo);
    vo.patch_size = (uint32_t)v->vc.patch_size;
    vo.merge_size = (uint32_t)v->vc.merge_size;
    vo.temporal_patch_size = (uint32_t)v->vc.temporal_patch_size;
    char *q = question_text(it);
    int rc = swift_eval_encode_prompt(r, q, ids);
    free(q);
    if (rc < 0)
        return -1;
    char err[400];
    for (int k = 0; k < it->nimages; k++)
        if (swift_infer_image_load(
                it->images[k], NULL, &vo, v->vc.patch_dim, px, err, sizeof(err)) < 0)
            return swift_error_at(it->file, it->line, "image %d: %s", k, err);
    if (swift_infer_expand_pads(
            v->vc.image_token_id, v->vc.merge_size, px, &ids->v, &ids->n, err, sizeof(err)) < 0)
        return swift_error_at(it->file, it->line, "%s", err);
    if (ids->n + r->o->max_new_tokens > r->o->max_length)
        return swift_error_at(it->file,
                              it->line,
                              "the prompt (%d tokens with its images) and --max-new-tokens %d "
                              "exceed --max-length %d",
                              ids->n,
                              r->o->max_new_tokens,
                              r->o->max_length);
    return 0;
}

/* Items [i0, i1) through engine e, scored into acc. */
static int vl_batch(struct swift_eval_runner *r, struct swift_engine *e, struct swift_eval_set *set,
                    size_t i0, size_t i1, struct swift_eval_tally *acc)
{
    const struct swift_eval_opts *o = r->o;
    struct vl_job *jobs = swift_xcalloc(i1 - i0, sizeof(*jobs));
    int rc = 0;
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = o->max_new_tokens;
    s.temperature = o->temperature;
    s.top_p = o->top_p;
    for (size_t i = i0; i < i1 && rc == 0; i++) {
        struct vl_job *j = &jobs[i - i0];
        struct swift_eval_ids ids = {0};
        struct swift_infer_pixels px = {0};
        j->r = r;
        j->out = swift_xcalloc((size_t)o->max_new_tokens + 1, sizeof(int32_t));
        rc = item_prompt(r, &set->items[i], &ids, &px);
        s.seed = o->seed ^ (0x9e3779b97f4a7c15ULL * i);
        s.stop_ids = r->eos; /* the template's end of turn joined them while encoding */
        s.nstop_ids = r->neos;
        char err[256];
        struct swift_engine_images ei = {.pixels = px.pixels,
                                         .npatches = px.npatches,
                                         .grid_thw = px.grid,
                                         .nimages = px.nimages};
        if (rc == 0 && (j->id = swift_engine_add_images(
                            e, ids.v, ids.n, &ei, &s, vl_on_token, j, err, sizeof(err))) < 0)
            rc = swift_error_at(set->items[i].file, set->items[i].line, "%s", err);
        if (rc == 0)
            r->gen.prefill_tokens += ids.n;
        free(ids.v);
        swift_infer_pixels_release(&px);
    }
    int64_t t0 = swift_trace_now();
    int k = 0;
    while (rc == 0 && (k = swift_engine_step(e)) > 0)
        ;
    if (rc == 0 && k < 0)
        rc = -1;
    r->gen.decode_s += (double)(swift_trace_now() - t0) * 1e-9;
    for (size_t i = i0; i < i1 && rc == 0; i++) {
        struct vl_job *j = &jobs[i - i0];
        uint32_t *u = swift_xmalloc((size_t)(j->n ? j->n : 1) * sizeof(uint32_t));
        for (int t = 0; t < j->n; t++)
            u[t] = (uint32_t)j->out[t];
        char *ans = NULL;
        size_t len;
        rc = swift_tokenizer_decode(r->tok, u, (size_t)j->n, SWIFT_TOK_SKIP_SPECIAL, &ans, &len);
        free(u);
        r->gen.decode_tokens += j->n;
        if (rc < 0)
            break;
        swift_eval_gen_cut(ans);
        const struct swift_eval_item *it = &set->items[i];
        int ok = swift_eval_gen_correct(r, o->task, ans, it->target);
        swift_eval_prediction(r, it, ans, ok);
        free(ans);
        rc = swift_eval_tally_add(acc, it->subject, ok);
    }
    for (size_t i = i0; i < i1; i++)
        free(jobs[i - i0].out);
    free(jobs);
    return rc;
}

int swift_eval_run_vl_gen(struct swift_eval_runner *r, struct swift_eval_set *set, json_t *rec,
                          long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    if (o->few_shot > 0)
        return swift_error("--few-shot on a vision-language model is not supported yet");
    size_t last = set->n;
    if (o->limit > 0 && (size_t)o->limit < last)
        last = (size_t)o->limit;
    if (last == 0)
        return swift_error("'%s': no items to evaluate", o->dataset);
    struct swift_engine_opts eo = swift_engine_defaults();
    eo.max_num_seqs = o->batch_size;
    eo.max_model_len = o->max_length;
    if (eo.max_num_batched_tokens < eo.max_num_seqs)
        eo.max_num_batched_tokens = eo.max_num_seqs;
    char err[256];
    struct swift_engine *e = swift_engine_new(&r->vlm->llm, &eo, NULL, 0, err, sizeof(err));
    if (!e)
        return swift_error("%s", err);
    swift_engine_set_vlm(e, r->vlm);
    struct swift_eval_tally acc;
    swift_eval_tally_init(&acc);
    r->prog.total = last;
    int rc = 0;
    long bi = 0;
    for (size_t i = 0; i < last && rc == 0; i += (size_t)o->batch_size) {
        size_t i1 = i + (size_t)o->batch_size < last ? i + (size_t)o->batch_size : last;
        int64_t t0 = swift_trace_now();
        long p0 = r->gen.prefill_tokens + r->gen.decode_tokens;
        rc = vl_batch(r, e, set, i, i1, &acc);
        swift_eval_batch_span("generate",
                              t0,
                              bi++,
                              (long)(i1 - i),
                              r->gen.prefill_tokens + r->gen.decode_tokens - p0);
        swift_progress_update(&r->prog, i1);
    }
    swift_engine_free(e);
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (acc.n > 1)
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
        r->tokens += r->gen.prefill_tokens + r->gen.decode_tokens;
    }
    swift_eval_tally_release(&acc);
    return rc < 0 ? -1 : 0;
}
