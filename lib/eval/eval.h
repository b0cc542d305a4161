/*
 * eval — the model-independent half of swift-eval: task readers, prompt building, answer
 * extraction, scoring, the output record and the regression gate.
 *
 * A task set is a list of items read from one dataset:
 *
 *     struct swift_eval_set set;
 *     swift_eval_set_init(&set);
 *     if (swift_eval_read(SWIFT_EVAL_MMLU, "../shared/data/datasets/mmlu", &set) < 0)
 *         return -1;                          // "file:line: ..." already reported
 *     for (size_t i = 0; i < set.n; i++) ... set.items[i] ...
 *     swift_eval_set_release(&set);
 *
 * Formats (docs/formats.md, section eval):
 *   - MMLU CSV: header `question,choice0,choice1,choice2,choice3,answer` (answer 0-3, or A-D;
 *     the header may be absent as in the original release). The path is a CSV file, a folder of
 *     `<subject>_test.csv`, or the MMLU root (its `test/` folder is read); few-shot examples
 *     come from the sibling `dev/<subject>_dev.csv`. The subject is the file name without
 *     `_test.csv`/`_dev.csv`/`.csv`.
 *   - multiple-choice JSONL: `{"question", "choices": [..], "answer": index | "A".. | choice text,
 *     "subject"?}`.
 *   - GSM8K JSONL: `{"question", "answer"}`; the reference is the number after `####`.
 *   - exact-match JSONL: `{"question" | "prompt", "answer"}` (a string or a number).
 * In every JSONL, the question may also be named "query" or "problem", the answer "response",
 * "output" or "solution", the subject "task" or "category"; a row in ms-swift's messages format
 * takes its last user turn as the question and the assistant turn after it as the answer.
 * A row without an answer, an answer out of range, or a malformed row is an error with file and
 * line; nothing is returned then.
 */
#ifndef SWIFT_EVAL_H
#define SWIFT_EVAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

enum swift_eval_task {
    SWIFT_EVAL_LOSS = 0, /* token-level loss on shards or JSONL */
    SWIFT_EVAL_PPL,      /* the same, reported as perplexity first */
    SWIFT_EVAL_MC,       /* generic multiple choice JSONL, scored by log-likelihood */
    SWIFT_EVAL_MMLU,     /* MMLU CSV, scored by the log-likelihood of " A".." D" */
    SWIFT_EVAL_GSM8K,    /* generation, number extraction */
    SWIFT_EVAL_EXACT,    /* generation, exact match after whitespace normalisation */
    SWIFT_EVAL_PREF,     /* preference accuracy and margin on pair shards (run.h) */
    SWIFT_EVAL_TOOLCALL, /* generation, tool calls parsed and matched (name, arguments) */
};

/* "loss" -> SWIFT_EVAL_LOSS ...; -1 when unknown. */
int swift_eval_task_parse(const char *name);
const char *swift_eval_task_name(int task);
/* 1 for tasks that generate text (gsm8k, exact, toolcall), 0 otherwise. */
int swift_eval_task_generates(int task);

#define SWIFT_EVAL_MAX_CHOICES 26

struct swift_eval_item {
    char *subject;  /* owned; "" when the dataset has none */
    char *question; /* owned; the prompt text */
    char **choices; /* owned; nchoices strings (mc/mmlu), NULL otherwise */
    int nchoices;
    int answer;       /* index of the right choice (mc/mmlu), -1 otherwise */
    char *target;     /* owned; reference answer for generation tasks (gsm8k: normalised number) */
    char *reference;  /* owned; the full reference text (gsm8k's worked solution) for few-shot */
    const char *file; /* borrowed from the set's file list, for messages */
    long line;        /* first line of the row in that file */
    char **images;    /* owned; gsm8k / exact rows' "images" (ms-swift's: paths relative to the
                         file, or {"path"}), each at an "<image>" of the question (none: all
                         before it); only a vision-language model takes them */
    int nimages;
};

struct swift_eval_set {
    struct swift_eval_item *items;
    size_t n, cap;
    char **files; /* owned copies of the files read */
    size_t nfiles;
};

void swift_eval_set_init(struct swift_eval_set *set);
/* A new zeroed item (answer -1) at the end of set, for readers; NULL past the ceiling on items
 * (reported with file:line). */
struct swift_eval_item *swift_eval_set_push(struct swift_eval_set *set, const char *file,
                                            long line);
void swift_eval_set_release(struct swift_eval_set *set);

/* Read a dataset for `task` (mc, mmlu, gsm8k, exact) from path into set (appending).
 * Returns 0 or -1 after reporting "file:line: ..." once. */
int swift_eval_read(int task, const char *path, struct swift_eval_set *set);
/* The pieces, exposed for tests and fuzzing. `name` is used in messages. */
int swift_eval_read_mmlu_csv(const char *path, struct swift_eval_set *set);
int swift_eval_read_mmlu_stream(FILE *fp, const char *name, const char *subject,
                                struct swift_eval_set *set);
int swift_eval_read_jsonl_stream(int task, FILE *fp, const char *name, struct swift_eval_set *set);

/* The MMLU few-shot file for a test file: ".../test/X_test.csv" -> ".../dev/X_dev.csv"
 * (malloc'ed), or NULL when there is none on disk. */
char *swift_eval_mmlu_dev_path(const char *test_csv);

/*
 * Prompts. MMLU follows the original harness (Hendrycks et al.; lm-eval "mmlu"):
 *   "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
 *   + for each shot "Q\nA. c0\nB. c1\nC. c2\nD. c3\nAnswer: B\n\n" + "Q\nA. ..\nAnswer:"
 * and the continuations are " A", " B", ...; generic mc uses "Question: Q\nAnswer:" and the
 * continuations " <choice text>"; gsm8k/exact use "Question: Q\nAnswer:" with shots
 * "Question: Q\nAnswer: <reference text>\n\n". Return malloc'ed strings (NULL on overflow of
 * the 1 MiB prompt ceiling, reported).
 */
char *swift_eval_prompt(int task, const struct swift_eval_item *item,
                        const struct swift_eval_item *const *shots, int nshots);
/* Continuation i of an mc/mmlu item, malloc'ed. */
char *swift_eval_continuation(int task, const struct swift_eval_item *item, int i);

/* Index of the largest log-likelihood (the first one on ties); -1 when n <= 0 or any is NaN. */
int swift_eval_mc_pick(const double *loglik, int n);

/*
 * Answer extraction for GSM8K: the first number after the last "####" when there is one,
 * else the last number in the text. Numbers are normalised: thousands commas and a leading
 * '+' or '$' removed, trailing fractional zeros and a bare '.' dropped ("1,234.50" -> "1234.5",
 * "18.0" -> "18", "-0" -> "0"). Writes into out (NUL-terminated) and returns 1, or returns 0
 * when there is no number (out = "").
 */
int swift_eval_extract_number(const char *text, char *out, size_t cap);
/* Exact match after trimming and collapsing whitespace runs to one space. */
int swift_eval_exact_match(const char *prediction, const char *reference);

/* Per-subject tallies; micro = all items pooled, macro = mean over subjects. */
struct swift_eval_tally_row {
    char *subject;
    long n, correct;
};
struct swift_eval_tally {
    struct swift_eval_tally_row *rows; /* in order of first appearance */
    size_t n, cap;
    long total, correct;
};
void swift_eval_tally_init(struct swift_eval_tally *t);
void swift_eval_tally_release(struct swift_eval_tally *t);
int swift_eval_tally_add(struct swift_eval_tally *t, const char *subject, int correct);
double swift_eval_tally_micro(const struct swift_eval_tally *t);
double swift_eval_tally_macro(const struct swift_eval_tally *t);

/*
 * The output record, one compact JSON object (stdout and --output):
 *   {"schema_version":1,"model":..,"adapters":..|null,"task":..,"dataset":..,"n":..,
 *    "metrics":{..},"subjects":{"name":{"n":..,"correct":..,"accuracy":..}}|omitted,
 *    "config":{..},"time_s":..,"tokens":..,"tokens_per_s":..,
 *    "baseline":{..} (with --baseline: swift_eval_gate's comparison),
 *    "prefill_tokens_per_s":..,"decode_tokens_per_s":..}
 * swift_eval_record_new returns a new object with the fixed keys filled and empty metrics;
 * callers add metrics with json_object_set_new(json_object_get(rec, "metrics"), ...).
 */
#define SWIFT_EVAL_SCHEMA_VERSION 1
json_t *swift_eval_record_new(const char *model, const char *adapters, int task,
                              const char *dataset, long n);
/* Add "subjects" from a tally (skipped when it has one subject named ""). */
void swift_eval_record_add_tally(json_t *rec, const struct swift_eval_tally *t);
/* Write the record atomically to path. Returns 0 or -1 (reported). */
int swift_eval_record_write(const json_t *rec, const char *path);
/* A short human table on fp (stderr): the metrics, then per-subject accuracy when present. */
void swift_eval_record_table(const json_t *rec, FILE *fp);

/* How a metric is gated: -1 lower is better (loss, ppl, perplexity, *_loss, *_ppl), 1 higher is
 * better (accuracy, accuracy_*, token_acc, *_acc, exact_match, em, f1, margin, ...), 0 not a
 * quality metric (counts such as tokens: shown, never gated). */
int swift_eval_metric_direction(const char *name);

/*
 * Regression gate. The baseline file holds one record (compact or pretty-printed) or a JSONL of
 * records; rec is compared with the one of the same task and dataset (the same path as given,
 * or one that resolves to the same file). None is an error that says what the file holds
 * ("baseline is for task 'gsm8k', not 'mc'", "baseline is for dataset 'a.jsonl', not
 * 'b.jsonl'", or "no baseline record for task ... on dataset ... among its N records").
 * Every metric with a direction present in both is compared: a higher-is-better one regresses
 * when baseline - current > max_drop (absolute, accuracy is a fraction), a lower-is-better one
 * when current > baseline * (1 + max_drop) (relative). One line per metric on stderr:
 *   "regression: METRIC CUR vs baseline BASE, delta D (max drop M[ relative])"   always,
 *   "ok: METRIC CUR vs baseline BASE, delta D"                                  when verbose,
 * and rec gets "baseline": {"file", "line", "max_drop", "regressions",
 * "metrics": {METRIC: {"baseline", "delta", "regression"}}}. No metric in common is an error.
 * Returns the number of regressions (0: pass) or -1 after an error.
 */
int swift_eval_gate(json_t *rec, const char *baseline_path, double max_drop, int verbose);
/* Before a run: whether the baseline file has a record for task and dataset (the gate's
 * matching and messages). Returns 0 or -1 (reported). */
int swift_eval_baseline_check(const char *path, const char *task, const char *dataset);

#endif
