/*
 * run — swift-eval's one entry point: load a model (and adapters), read a dataset, run a task,
 * print the record (lib/eval/eval.h) and apply the regression gate.
 *
 *     struct swift_eval_opts o;
 *     swift_eval_opts_init(&o);
 *     o.model = "out/checkpoint-100"; o.task = SWIFT_EVAL_MMLU; o.dataset = "../shared/...";
 *     int rc = swift_eval_run(&o);   // 0 ok, 1 failure or regression (reported)
 *
 * Tasks:
 *   loss, ppl  token-level cross-entropy over the tokens the loss mask trains, on a shard
 *              directory (index.json) or a raw file rendered by swift-preprocess's dataset and
 *              template code (lib/eval/prompt.h); each document is its own sequence
 *              (positions restart at 0).
 *   mc, mmlu   per item, the prompt is run once and each choice's continuation tokens are
 *              scored on a fork of its key/value cache; the choice with the largest summed
 *              log-likelihood wins (acc), and for mc also per byte of the choice (acc_norm).
 *   gsm8k, exact  batched generation (greedy, or sampled with a per-item seed derived from
 *              --seed and the item's index, so results do not depend on --batch-size), stopped
 *              at eos or a stop word ("\n\n", "Question:"); gsm8k compares numbers
 *              (lib/eval/eval.h), exact the whole answer.
 *   toolcall   every assistant turn with tool calls of a tool-calling dataset (OpenAI messages
 *              with tools, ShareGPT/glaive function_call turns): the conversation before it is
 *              rendered with its tools by the chat template and --agent-template, the model
 *              generates (as gsm8k, without the stop words) until its end of turn, the
 *              completion is parsed into tool calls (lib/preprocess/agent.h) and compared with
 *              the turn's: accuracy = the same calls (names and JSON arguments, in order),
 *              name_accuracy = the same names.
 *   pref       on a pair shard directory (swift-preprocess --kind pairs): each pair's
 *              chosen and rejected rows go through the policy (the model with its adapters) and
 *              the reference (--ref-model, else the model with the adapters switched off) as
 *              one batch; per row the summed log-prob of the response tokens
 *              (swift_model_row_logps), reward = beta (logp_policy - logp_ref) (DPO's implicit
 *              reward); accuracy is the fraction of pairs with reward_chosen > reward_rejected,
 *              margin the mean of reward_chosen - reward_rejected (TRL's rewards/accuracies and
 *              rewards/margins). Needs no tokenizer.
 * Through a server (eval_url, ms-swift's --eval_url): gsm8k and exact send each item's prompt
 *              to /v1/completions (or, with a template, as the user turn to
 *              /v1/chat/completions) with max_tokens, temperature, top_p, the item's seed and the
 *              stop words; batch_size requests are in flight at once (the server batches them),
 *              no prompt is truncated here (the server refuses a prompt that is too long), and
 *              the record's prefill/decode tokens are the server's usage. The other tasks score
 *              log-likelihoods and need the model here.
 * Several datasets give one record each, in order (one line each on stdout and in --output);
 * the gate compares each with the baseline record of the same task and dataset.
 * Few-shot: MMLU draws the first K questions of the subject's dev file; the other tasks use
 * the first K items of the dataset itself, which are then not scored.
 *
 * Inside: run.c loads and loops over the datasets; run_loss.c, run_mc.c and run_gen.c are the
 * task loops; feed.c what they share (lib/eval/internal.h).
 */
#ifndef SWIFT_EVAL_RUN_H
#define SWIFT_EVAL_RUN_H

#include <stdint.h>

struct swift_eval_opts {
    const char *model;           /* model directory (required) */
    const char *dataset;         /* dataset path (required unless datasets is set) */
    const char *const *datasets; /* several datasets: one record (stdout line) each */
    int ndatasets;
    const char *adapters; /* PEFT adapter directory or NULL */
    int merge_adapters;   /* fold the adapters into the weights instead of running them aside */
    const char *template_name; /* NULL or "none": plain prompts (lib/eval/prompt.h); toolcall:
                                  the tokenizer's chat template */
    int agent;  /* toolcall: enum swift_agent (lib/preprocess/agent.h); 0: the template's own */
    int task;   /* SWIFT_EVAL_* */
    long limit; /* items (samples for loss); 0: all */
    int few_shot;
    int max_new_tokens;
    double temperature, top_p;
    uint64_t seed;
    int batch_size;
    int max_length;       /* longest sequence (tokens; 0: max_position_embeddings, at most
                             4096); longer prompts lose their beginning */
    const char *output;   /* also write the record here (atomic), or NULL */
    const char *baseline; /* regression gate against this record, or NULL */
    double max_drop;
    int quiet;               /* no table on stderr (and no progress line unless progress is ON) */
    int progress;            /* the progress line: enum swift_progress_mode (0: a terminal) */
    const char *device;      /* auto (NULL), cpu, cuda[:N]; auto means the cpu (the cache runs on
                                any backend, but the GPU path is not yet verified on a GPU) */
    const char *ref_model;   /* pref: the reference model directory (NULL: the model without its
                                adapters) */
    double beta;             /* pref: the implicit reward's scale (default 0.1, TRL's) */
    int torch_dtype;         /* the matmuls' math: SWIFT_MATH_FP32 or SWIFT_MATH_BF16; -1
                                (default): the checkpoint's dtype (swift_backend_default_math) */
    const char *eval_url;    /* gsm8k, exact: generate through this OpenAI-compatible server
                                (lib/eval/remote.h) instead of loading a model; model is then the
                                name sent in each request's "model" (NULL: none) */
    const char *predictions; /* gsm8k, exact: each answer as a JSONL line (dataset, file, line,
                                prediction, target, correct) written here atomically, or NULL */
    const char *api_key;     /* with eval_url: sent as "Authorization: Bearer KEY" (NULL: none) */
};

void swift_eval_opts_init(struct swift_eval_opts *o);
/* Run; returns 0, SWIFT_FAILED after reporting a failure or a regression, or SWIFT_MISUSED
 * (--device names a device this machine cannot use). */
int swift_eval_run(const struct swift_eval_opts *o);

#endif
