/* eval/run_gen — the gsm8k and exact tasks: batched generation, stopped at eos or a stop word,
 * the answer compared with the target (see run.h). */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/preprocess/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

const char *const swift_eval_stop_words[] = {"\n\n", "Question:", NULL};

struct gen_ctx {
    struct swift_eval_runner *r;
};

static int gen_stop_cb(void *ctx, int i, const int32_t *out, int n)
{
    struct gen_ctx *g = ctx;
    (void)i;
    if (g->r->o->task == SWIFT_EVAL_TOOLCALL) /* the end of turn stops it */
        return 0;
    /* decoding the tail is enough: a stop word spans a few tokens at most */
    int from = n > 16 ? n - 16 : 0;
    uint32_t u[16];
    for (int k = from; k < n; k++)
        u[k - from] = (uint32_t)out[k];
    char *text;
    size_t len;
    if (swift_tokenizer_decode(g->r->tok, u, (size_t)(n - from), 0, &text, &len) < 0)
        return 1;
    int stop = 0;
    for (int k = 0; swift_eval_stop_words[k]; k++)
        if (strstr(text, swift_eval_stop_words[k]))
            stop = 1;
    free(text);
    return stop;
}

/* The answer text: decoded, special tokens left out, cut at the first stop word. */
static char *gen_answer(struct swift_eval_runner *r, const int32_t *out, int n)
{
    uint32_t *u = swift_xmalloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    for (int k = 0; k < n; k++)
        u[k] = (uint32_t)out[k];
    char *text = NULL;
    size_t len;
    int rc = swift_tokenizer_decode(r->tok, u, (size_t)n, SWIFT_TOK_SKIP_SPECIAL, &text, &len);
    free(u);
    if (rc < 0)
        return NULL;
    if (r->o->task != SWIFT_EVAL_TOOLCALL)
        swift_eval_gen_cut(text);
    return text;
}

void swift_eval_gen_cut(char *text)
{
    for (int k = 0; swift_eval_stop_words[k]; k++) {
        char *p = strstr(text, swift_eval_stop_words[k]);
        if (p)
            *p = 0;
    }
}

/* One batch of generation: B slots of prompts, their sequences and their items' indices. */
struct gen_batch {
    struct swift_gen_seq *seqs;
    struct swift_eval_ids *pr;
    size_t *idx;
    int n;
};

/* Fill b with the prompts of items *ip.. (up to --batch-size of them, before last). b->n counts
 * the slot that failed too, so that the caller frees its prompt. Returns 0 or -1. */
static int gen_prompts(struct swift_eval_runner *r, struct swift_eval_set *set,
                       struct swift_eval_shots *sh, struct gen_batch *b, size_t *ip, size_t last)
{
    const struct swift_eval_opts *o = r->o;
    int B = o->batch_size, cap = o->max_length, rc = 0;
    size_t i = *ip;
    for (; i < last && b->n < B && rc == 0; i++) {
        if ((rc = swift_eval_shots_for(r, sh, set, i)) < 0)
            break;
        /* A chat model answers the question as its user turn (as it was fine-tuned);
         * the "Question: ... Answer:" frame is for base models and few-shot prompts. */
        int chat = strcmp(swift_eval_prompter_name(r->pr), "none") != 0;
        char *prompt = chat && sh->n == 0
                           ? swift_xstrdup(set->items[i].question)
                           : swift_eval_prompt(o->task, &set->items[i], sh->list, sh->n);
        if (!prompt) {
            rc = -1;
            break;
        }
        struct swift_eval_ids *pr = &b->pr[b->n];
        rc = o->task == SWIFT_EVAL_TOOLCALL ? swift_eval_encode_toolcall(r, &set->items[i], pr)
                                            : swift_eval_encode_prompt(r, prompt, pr);
        free(prompt);
        if (rc == 0 && pr->n == 0)
            rc = swift_error_at(set->items[i].file, set->items[i].line, "empty prompt");
        if (rc == 0)
            swift_eval_left_truncate(pr, cap - o->max_new_tokens);
        b->seqs[b->n] = (struct swift_gen_seq){
            .prompt = pr->v, .prompt_len = pr->n, .seed = o->seed ^ (0x9e3779b97f4a7c15ULL * i)};
        b->idx[b->n++] = i;
    }
    *ip = i;
    return rc;
}

void swift_eval_prediction(struct swift_eval_runner *r, const struct swift_eval_item *it,
                           const char *answer, int correct)
{
    if (!r->preds)
        return;
    json_array_append_new(r->preds,
                          json_pack("{s:s,s:s,s:I,s:s,s:s,s:b}",
                                    "dataset",
                                    r->o->dataset,
                                    "file",
                                    it->file,
                                    "line",
                                    (json_int_t)it->line,
                                    "prediction",
                                    answer,
                                    "target",
                                    it->target ? it->target : "",
                                    "correct",
                                    correct));
}

/* Whether a generated answer is right: gsm8k compares the extracted number, exact the text,
 * toolcall the parsed calls (and counts the matching names in r->tc_names). */
int swift_eval_gen_correct(struct swift_eval_runner *r, int task, const char *ans,
                           const char *target)
{
    if (task == SWIFT_EVAL_TOOLCALL) {
        int names;
        int ok = swift_eval_toolcall_score(r->agent, ans, strlen(ans), target, &names);
        r->tc_names += names;
        return ok;
    }
    if (task == SWIFT_EVAL_GSM8K) {
        char num[128];
        return swift_eval_extract_number(ans, num, sizeof(num)) && !strcmp(num, target);
    }
    return swift_eval_exact_match(ans, target);
}

/* Generate the batch's answers (batch number bi) and tally them into acc. Returns 0 or -1. */
static int gen_batch_run(struct swift_eval_runner *r, struct swift_eval_set *set,
                         struct gen_batch *b, struct swift_gen_opts *go,
                         struct swift_eval_tally *acc, long bi)
{
    const struct swift_eval_opts *o = r->o;
    int need = 1;
    for (int k = 0; k < b->n; k++)
        if (b->pr[k].n + o->max_new_tokens > need)
            need = b->pr[k].n + o->max_new_tokens;
    if (swift_eval_kv_ensure(r, o->batch_size, need) < 0)
        return -1;
    go->nstop = r->neos; /* the template's end marker joined the stop ids */
    struct gen_ctx gc = {.r = r};
    int64_t t0 = swift_trace_now();
    long p0 = r->gen.prefill_tokens + r->gen.decode_tokens;
    int rc = swift_generate(&r->kv, b->seqs, b->n, go, gen_stop_cb, &gc, &r->gen);
    swift_eval_batch_span(
        "generate", t0, bi, b->n, r->gen.prefill_tokens + r->gen.decode_tokens - p0);
    for (int k = 0; rc == 0 && k < b->n; k++) {
        const struct swift_eval_item *it = &set->items[b->idx[k]];
        char *ans = gen_answer(r, b->seqs[k].out, b->seqs[k].n_out);
        if (!ans) {
            rc = -1;
            break;
        }
        int ok = swift_eval_gen_correct(r, o->task, ans, it->target);
        swift_eval_prediction(r, it, ans, ok);
        free(ans);
        rc = swift_eval_tally_add(acc, it->subject, ok);
    }
    for (int k = 0; k < b->n; k++)
        free(b->seqs[k].out);
    return rc;
}

int swift_eval_run_gen(struct swift_eval_runner *r, struct swift_eval_set *setp, json_t *rec,
                       long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_set set = *setp;
    size_t first = (size_t)o->few_shot, last = set.n;
    if (o->limit > 0 && first + (size_t)o->limit < last)
        last = first + (size_t)o->limit;
    if (first >= last)
        return swift_error("'%s': no items to evaluate", o->dataset);
    for (size_t i = 0; i < last; i++)
        if (set.items[i].nimages)
            return swift_error_at(set.items[i].file,
                                  set.items[i].line,
                                  "a row with images needs a vision-language model (Qwen2-VL, "
                                  "Qwen2.5-VL)");
    int B = o->batch_size, cap = o->max_length;
    if (o->max_new_tokens >= cap) {
        return swift_error("--max-new-tokens %d leaves no room for a prompt in --max-length %d",
                           o->max_new_tokens,
                           cap);
    }
    struct swift_eval_tally acc;
    swift_eval_tally_init(&acc);
    struct swift_eval_shots sh = {0};
    struct gen_batch b = {.seqs = swift_xcalloc((size_t)B, sizeof(*b.seqs)),
                          .pr = swift_xcalloc((size_t)B, sizeof(*b.pr)),
                          .idx = swift_xcalloc((size_t)B, sizeof(*b.idx))};
    int rc = 0;
    struct swift_gen_opts go = {.max_new = o->max_new_tokens,
                                .temperature = o->temperature,
                                .top_p = o->top_p,
                                .stop_ids = r->eos,
                                .nstop = r->neos};
    long bi = 0;
    size_t i = first;
    r->prog.total = last - first;
    while (rc == 0 && i < last) {
        b.n = 0;
        rc = gen_prompts(r, &set, &sh, &b, &i, last);
        if (rc == 0 && b.n > 0)
            rc = gen_batch_run(r, &set, &b, &go, &acc, bi++);
        swift_progress_update(&r->prog, i - first);
        for (int k = 0; k < b.n; k++) {
            free(b.pr[k].v);
            b.pr[k] = (struct swift_eval_ids){0};
            b.seqs[k].out = NULL;
        }
    }
    free(b.seqs);
    free(b.pr);
    free(b.idx);
    swift_eval_shots_free(&sh);
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (o->task == SWIFT_EVAL_TOOLCALL) {
            json_object_set_new(mt, "arguments_accuracy", json_real(swift_eval_tally_micro(&acc)));
            json_object_set_new(
                mt, "name_accuracy", json_real(acc.total ? (double)r->tc_names / acc.total : 0));
        }
        if (acc.n > 1)
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
        r->tokens += r->gen.prefill_tokens + r->gen.decode_tokens;
    }
    swift_eval_tally_release(&acc);
    return rc;
}
