/* grpo_rollout — a GRPO step's rollout (see grpo_state.h): per micro-batch, a completion per row
 * sampled from the current policy on a key/value cache (lib/eval/generate.h: the model's own
 * forward, LoRA adapters included), decoded, scored by the reward functions (lib/train/reward.h),
 * turned into group-relative advantages (grpo_loss.h), and, when the loss needs them, the
 * per-token log-probs of the sampling policy (--num-iterations > 1) and of the reference
 * (--beta > 0). Every phase is a trace span: generate (prefill, decode), reward (reward.NAME),
 * old_logps, ref_logps. A sample of the rows goes to completions.jsonl. */
#include "lib/train/grpo_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/eval/generate.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/core/banned.h"

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void grpo_mb_free(struct grpo_mb *g)
{
    for (int r = 0; g->text && r < g->R; r++)
        free(g->text[r]);
    for (int p = 0; g->meta && p < g->R; p++)
        json_decref(g->meta[p]);
    free(g->text);
    free(g->meta);
    free(g->tok);
    free(g->tgt);
    free(g->pos);
    free(g->off);
    free(g->len);
    free(g->plen);
    free(g->clipped);
    free(g->old);
    free(g->ref);
    free(g->reward);
    free(g->adv);
    free(g->gstd);
    free(g->per);
    memset(g, 0, sizeof(*g));
}

void grpo_mbs_free(struct grpo_mb *mb, int n)
{
    for (int a = 0; a < n; a++)
        grpo_mb_free(&mb[a]);
    free(mb);
}

static void mb_alloc(struct grpo_mb *g, int R, int T, int nfun, int old, int ref)
{
    size_t N = (size_t)R * (size_t)T;
    g->R = R;
    g->tok = swift_xcalloc(N, sizeof(int32_t));
    g->tgt = swift_xcalloc(N, sizeof(int32_t));
    g->pos = swift_xcalloc(N, sizeof(int32_t));
    g->off = swift_xcalloc((size_t)R, sizeof(int));
    g->len = swift_xcalloc((size_t)R, sizeof(int));
    g->plen = swift_xcalloc((size_t)R, sizeof(int));
    g->clipped = swift_xcalloc((size_t)R, sizeof(int));
    g->old = old ? swift_xcalloc(N, sizeof(double)) : NULL;
    g->ref = ref ? swift_xcalloc(N, sizeof(double)) : NULL;
    g->reward = swift_xcalloc((size_t)R, sizeof(double));
    g->adv = swift_xcalloc((size_t)R, sizeof(double));
    g->gstd = swift_xcalloc((size_t)R, sizeof(double));
    g->per = swift_xcalloc((size_t)R * (size_t)(nfun ? nfun : 1), sizeof(double));
    g->text = swift_xcalloc((size_t)R, sizeof(char *));
    g->meta = swift_xcalloc((size_t)R, sizeof(json_t *));
}

/* The cache for R rows of T tokens (grown when a micro-batch needs more). */
static int kv_ensure(struct grpo_state *st, struct swift_model *m, int R, int T)
{
    if (st->kv_rows >= R && st->kv_cap >= T)
        return 0;
    if (st->kv_rows)
        swift_kv_release(&st->kv);
    st->kv_rows = 0;
    long mt = (long)R * (T - st->max_new);
    mt = mt < R ? R : mt > 16384 ? 16384 : mt;
    if (swift_kv_init(&st->kv, m, R, T, (int)mt) < 0)
        return -1;
    st->kv_rows = R;
    st->kv_cap = T;
    return 0;
}

/* Sample a completion for each of g's rows; the rows become prompt + completion. */
static int generate(struct grpo_state *st, struct swift_model *m, struct grpo_mb *g,
                    const struct swift_sample *xs, long step, int a)
{
    int R = g->R, T = st->T;
    if (kv_ensure(st, m, R, T) < 0)
        return -1;
    struct swift_gen_seq *seqs = swift_xcalloc((size_t)R, sizeof(*seqs));
    int32_t *prompts = swift_xcalloc((size_t)R * (size_t)T, sizeof(int32_t));
    /* a row's seed: (--seed, step, the prompt's tokens, its place in the group), so the
     * completions do not depend on how the step's prompts are split into ranks and
     * micro-batches */
    uint64_t base = mix64(st->seed ^ mix64((uint64_t)(step + 1)));
    for (int r = 0; r < R; r++) {
        const struct swift_sample *x = &xs[r / st->G];
        int32_t *p = prompts + (size_t)r * T;
        uint64_t h = base;
        for (uint32_t t = 0; t < x->len; t++) {
            p[t] = (int32_t)x->ids[t];
            h = mix64(h ^ x->ids[t]);
        }
        seqs[r] = (struct swift_gen_seq){.prompt = p,
                                         .prompt_len = (int)x->len,
                                         .seed = mix64(h ^ mix64((uint64_t)(r % st->G) + 1)),
                                         .share = r % st->G ? r - r % st->G + 1 : 0};
        g->plen[r] = (int)x->len;
    }
    struct swift_gen_opts go = {.max_new = st->max_new,
                                .temperature = st->temperature,
                                .top_p = st->top_p,
                                .stop_ids = st->stop,
                                .nstop = st->nstop};
    struct swift_gen_stats gst = {0};
    int before = m->lora_off;
    m->lora_off = 0;
    int64_t t0 = swift_trace_now();
    int rc = swift_generate(&st->kv, seqs, R, &go, NULL, NULL, &gst);
    int64_t t1 = swift_trace_now();
    m->lora_off = before;
    /* swift_generate writes its own prefill and decode spans (cat eval) inside this one */
    swift_trace_span("compute",
                     "generate",
                     t0,
                     t1,
                     (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a),
                                           SWIFT_TARG_I("rows", R),
                                           SWIFT_TARG_I("prefill_tokens", gst.prefill_tokens),
                                           SWIFT_TARG_I("decode_tokens", gst.decode_tokens)},
                     4);
    for (int r = 0; r < R; r++) {
        int P = g->plen[r], n = rc == 0 ? seqs[r].n_out : 0;
        int32_t *tk = g->tok + (size_t)r * T, *tg = g->tgt + (size_t)r * T,
                *ps = g->pos + (size_t)r * T;
        const int32_t *pr = prompts + (size_t)r * T;
        for (int t = 0; t < T; t++) {
            tk[t] = t < P ? pr[t] : t < P + n ? seqs[r].out[t - P] : 0;
            ps[t] = t < P + n ? t : t - (P + n);
        }
        for (int t = 0; t < T; t++) /* token t predicts t + 1: the completion's tokens */
            tg[t] = t >= P - 1 && t < P + n - 1 ? tk[t + 1] : -1;
        g->off[r] = r * T + P - 1;
        g->len[r] = n;
        g->clipped[r] = rc == 0 && seqs[r].stopped == 0;
        free(seqs[r].out);
    }
    free(seqs);
    free(prompts);
    return rc;
}

/* --reward-model: each row's score (the last completion token's hidden state through the score
 * head), weighted into the rewards; a span "reward.rm" as the set's functions have. */
static int rm_score(struct grpo_state *st, struct grpo_mb *g)
{
    int R = g->R;
    int64_t t0 = swift_trace_now();
    struct swift_batch bt = {R, st->T, g->tok, g->tgt, g->pos};
    if (swift_model_reserve(&st->rm, R, st->T) < 0 ||
        swift_model_forward_hidden(&st->rm, &bt, 0) < 0)
        return -1;
    int32_t *idx = swift_xcalloc((size_t)R, sizeof(int32_t));
    float *out = swift_xcalloc((size_t)R, sizeof(float));
    for (int r = 0; r < R; r++)
        idx[r] = g->off[r] + g->len[r]; /* the row's last token */
    int rc = swift_model_score(&st->rm, idx, R, out);
    double *per = g->per + (size_t)st->nset * R;
    for (int r = 0; rc == 0 && r < R; r++) {
        per[r] = out[r];
        if (!st->nset)
            g->reward[r] = 0;
        g->reward[r] += st->w_rm * out[r];
    }
    free(idx);
    free(out);
    swift_trace_span(
        "compute",
        "reward.rm",
        t0,
        swift_trace_now(),
        (struct swift_targ[]){SWIFT_TARG_S("function", "rm"), SWIFT_TARG_I("program", 0)},
        2);
    return rc;
}

/* The completions as text (special tokens left out, as TRL's batch_decode), the prompts'
 * metadata, and the rewards. */
static int score(struct grpo_state *st, struct grpo_mb *g, const struct swift_sample *xs, long step,
                 int a)
{
    int R = g->R, P = R / st->G;
    for (int p = 0; p < P; p++) {
        json_error_t je;
        g->meta[p] = json_loadb(xs[p].meta, xs[p].meta_len, 0, &je);
        if (!json_is_object(g->meta[p]))
            return swift_error("grpo: a prompt's metadata is not a JSON object (%s)", je.text);
    }
    struct swift_reward_row *rows = swift_xcalloc((size_t)R, sizeof(*rows));
    char where[64];
    if (step >= 0)
        snprintf(where, sizeof(where), "step %ld, micro-batch %d", step + 1, a);
    else
        snprintf(where, sizeof(where), "evaluation");
    for (int r = 0; r < R; r++) {
        size_t len;
        const uint32_t *ids = (const uint32_t *)(g->tok + g->off[r] + 1);
        if (swift_tokenizer_decode(
                st->tok, ids, (size_t)g->len[r], SWIFT_TOK_SKIP_SPECIAL, &g->text[r], &len) < 0) {
            free(rows);
            return -1;
        }
        json_t *meta = g->meta[r / st->G];
        const char *prompt = json_string_value(json_object_get(meta, "prompt"));
        rows[r] = (struct swift_reward_row){.prompt = prompt ? prompt : "",
                                            .completion = g->text[r],
                                            .completion_tokens = g->len[r],
                                            .extra = meta,
                                            .where = where};
    }
    int64_t t0 = swift_trace_now();
    int rc = st->nset ? swift_reward_score(st->rs, rows, (size_t)R, g->reward, g->per) : 0;
    if (rc == 0 && st->have_rm)
        rc = rm_score(st, g);
    swift_trace_span("compute",
                     "reward",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a), SWIFT_TARG_I("rows", R)},
                     2);
    free(rows);
    if (rc < 0)
        return -1;
    swift_grpo_advantages(g->reward, R, st->G, st->scale, g->adv, g->gstd);
    return 0;
}

/* A span around a log-prob pass of model mm over g (no gradient). */
static int logps_span(struct grpo_state *st, struct swift_model *mm, struct grpo_mb *g, double *out,
                      int lora_off, const char *name, int a)
{
    int64_t t0 = swift_trace_now();
    if (grpo_logps(st, mm, g, out, lora_off, 0) < 0)
        return -1;
    swift_trace_span("compute",
                     name,
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("micro_batch", a)},
                     1);
    return 0;
}

static int rollout_mb(struct grpo_state *st, struct swift_model *m, struct grpo_mb *g, int R,
                      const struct swift_sample *xs, long step, int a)
{
    mb_alloc(g, R, st->T, st->nfun, st->mu > 1, st->beta > 0);
    if (!R)
        return 0;
    if (generate(st, m, g, xs, step, a) < 0 || score(st, g, xs, step, a) < 0)
        return -1;
    if (st->mu > 1 && step >= 0 && logps_span(st, m, g, g->old, 0, "old_logps", a) < 0)
        return -1;
    if (st->beta > 0) {
        struct swift_model *rm = swift_pref_ref_model(&st->ref, m);
        if (rm != m && swift_model_reserve(rm, g->R, st->T) < 0)
            return -1;
        if (logps_span(st, rm, g, g->ref, rm == m, "ref_logps", a) < 0)
            return -1;
    }
    return 0;
}

static long items_of(struct swift_objective *obj)
{
    const struct grpo_state *st = obj->state;
    long items = 0;
    obj->rollout_tokens = 0;
    for (int a = 0; a < st->nmb; a++) {
        const struct grpo_mb *g = &st->mb[a];
        for (int r = 0; r < g->R; r++)
            obj->rollout_tokens += g->plen[r] + g->len[r];
        if (st->gp.loss_type != SWIFT_GRPO_LOSS_DAPO)
            items += g->R;
        else
            for (int r = 0; r < g->R; r++)
                items += g->len[r];
    }
    return items;
}

long grpo_rollout(struct swift_objective *obj, struct swift_model *m, const struct swift_batch *mb,
                  const struct swift_sample *const *xs, int n, long step)
{
    struct grpo_state *st = obj->state;
    st->next = 0;
    if (step < 0 && !st->evaluating) { /* keep the training rollout aside */
        st->kept = st->mb;
        st->nkept = st->nmb;
        st->kept_step = st->gen_step;
        st->mb = NULL;
        st->nmb = 0;
        st->evaluating = 1;
    } else if (step >= 0 && st->evaluating) { /* back from an evaluation */
        grpo_mbs_free(st->mb, st->nmb);
        st->mb = st->kept;
        st->nmb = st->nkept;
        st->gen_step = st->kept_step;
        st->kept = NULL;
        st->nkept = 0;
        st->evaluating = 0;
    }
    /* --num-iterations: the generation batch of step k*mu serves steps k*mu .. k*mu + mu - 1
     * (the loader gives them the same prompts); after a resume inside such a window the
     * prompts are generated again */
    if (step >= 0 && st->mu > 1 && st->gen_step >= 0 && step / st->mu == st->gen_step / st->mu &&
        st->nmb == n)
        return items_of(obj);
    grpo_mbs_free(st->mb, st->nmb);
    st->mb = swift_xcalloc((size_t)n, sizeof(*st->mb));
    st->nmb = n;
    st->gen_step = -1;
    st->T = mb[0].T;
    for (int a = 0; a < n; a++) {
        /* an evaluation's last batch ends in padding samples (no tokens): rows of prompts only */
        int P = 0;
        while (P < mb[a].B / st->G && xs[a][P].len)
            P++;
        if (rollout_mb(st, m, &st->mb[a], P * st->G, xs[a], step, a) < 0)
            return -1;
    }
    st->gen_step = step;
    return items_of(obj);
}

/* ---- completions.jsonl ---- */

static json_t *sample_row(const struct grpo_state *st, const struct grpo_mb *g, int r, long gs)
{
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(gs));
    json_t *p = json_object_get(g->meta[r / st->G], "prompt");
    json_object_set(o, "prompt", p ? p : json_null());
    json_object_set_new(o, "completion", json_string(g->text[r]));
    json_object_set_new(o, "reward", json_real(g->reward[r]));
    json_t *per = json_object();
    for (int f = 0; f < st->nfun; f++)
        json_object_set_new(per, grpo_fun_name(st, f), json_real(g->per[(size_t)f * g->R + r]));
    json_object_set_new(o, "rewards", per);
    json_object_set_new(o, "advantage", json_real(g->adv[r]));
    json_object_set_new(o, "length", json_integer(g->len[r]));
    json_object_set_new(o, "clipped", json_boolean(g->clipped[r]));
    return o;
}

int grpo_log_samples(struct swift_objective *obj, const char *run_dir, long gs)
{
    const struct grpo_state *st = obj->state;
    if (!st->nmb)
        return 0;
    const struct grpo_mb *g = &st->mb[0];
    char *path = swift_path_join(run_dir, "completions.jsonl");
    FILE *fp = fopen(path, "a");
    if (!fp) {
        int rc = swift_error_errno("cannot open '%s'", path);
        free(path);
        return rc;
    }
    int bad = 0;
    for (int r = 0; r < g->R && !bad; r++) {
        json_t *o = sample_row(st, g, r, gs);
        char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(o);
        bad = !line || fprintf(fp, "%s\n", line) < 0;
        free(line);
    }
    if (fclose(fp) != 0 || bad) {
        int rc = swift_error_errno("cannot write '%s'", path);
        free(path);
        return rc;
    }
    free(path);
    return 0;
}
