/*
 * prompt — swift-eval's bridge to swift-preprocess's chat templates and dataset readers
 * (lib/preprocess/template.h, lib/preprocess/dataset.h), kept apart from lib/model/model.h (the two
 * headers cannot meet in one file: both name a `swift_loss`).
 *
 *     struct swift_eval_prompter *p = swift_eval_prompter_new(tok, "chatml");  // NULL name: plain
 *     swift_eval_prompter_encode(p, "What is 2+2?", &ids, &n, &stop);
 *     ...
 *     struct swift_eval_rows *rows;
 *     swift_eval_rows_open(&rows, p, "val.jsonl");
 *     while ((rc = swift_eval_rows_next(rows, &ids, &mask, &n)) > 0) ...
 */
#ifndef SWIFT_EVAL_PROMPT_H
#define SWIFT_EVAL_PROMPT_H

#include <stddef.h>
#include <stdint.h>

struct swift_tokenizer;
struct swift_eval_prompter;
struct swift_eval_rows;
struct swift_eval_set;
struct swift_conv;

/* 1 when name is "none" or a known template, else 0. */
int swift_eval_template_known(const char *name);
/* Comma-separated template names, for messages. */
const char *swift_eval_template_names(void);

/* A prompter for tok (borrowed) with template `name` (NULL or "none": plain text). Returns NULL
 * after an error (unknown template). */
struct swift_eval_prompter *swift_eval_prompter_new(const struct swift_tokenizer *tok,
                                                    const char *name);
void swift_eval_prompter_free(struct swift_eval_prompter *p);
/* The template's name, or "none". Borrowed. */
const char *swift_eval_prompter_name(const struct swift_eval_prompter *p);

/* Encode a prompt. Without a template: the text as the loss path (swift_eval_rows_next) and
 * swift-preprocess render a {"text": ...} row, the tokenizer's start token included (Llama-3's
 * <|begin_of_text|>: the ids of HF's tokenizer(text)), without the closing eos. With a template:
 * the user turn and the assistant header (the ids before the first trained token of an empty
 * assistant reply). *stop receives the template's end-of-turn id (-1 without a template). *ids
 * is borrowed until the next call. Returns 0 or -1 (reported). */
int swift_eval_prompter_encode(struct swift_eval_prompter *p, const char *text,
                               const uint32_t **ids, size_t *n, long *stop);
/* The chat template a tokenizer's chat_template corresponds to (swift_template_guess), or NULL. */
const char *swift_eval_template_guess(const struct swift_tokenizer *tok);

/* Encode conversation c (ending with a user message or tool results) with the prompter's chat
 * template and its generation prompt (swift_template_encode_prompt); *stop as above. Needs a
 * template. Same ownership. Returns 0 or -1 (reported). */
int swift_eval_prompter_encode_conv(struct swift_eval_prompter *p, const struct swift_conv *c,
                                    const uint32_t **ids, size_t *n, long *stop);

/*
 * The toolcall task (lib/eval/toolcall.c). Items are the assistant turns with tool calls of a
 * dataset in ms-swift's formats (OpenAI messages with tools / tool_calls / tool, ShareGPT with
 * function_call / observation, JSON or JSON Lines): the item's question is its row (compact
 * JSON), answer the turn's index in the conversation, target the reference calls
 * [{"name", "arguments": {...}}]. A file with no such turn is an error.
 * swift_eval_toolcall_prompt renders the conversation before the turn with the tools, agent
 * template `agent` (lib/preprocess/agent.h) and the generation prompt. swift_eval_toolcall_score
 * parses a completion with that agent template and returns 1 when the calls equal the target
 * (the same number, names and JSON arguments in order), *name_ok 1 when the names do.
 */
int swift_eval_toolcall_read(const char *path, struct swift_eval_set *set);
int swift_eval_toolcall_prompt(struct swift_eval_prompter *p, const char *row, int upto, int agent,
                               const uint32_t **ids, size_t *n, long *stop);
int swift_eval_toolcall_score(int agent, const char *text, size_t len, const char *target,
                              int *name_ok);

/* Encode plain text without special handling (continuations). Same ownership. */
int swift_eval_prompter_plain(struct swift_eval_prompter *p, const char *text, const uint32_t **ids,
                              size_t *n);

/* Rows of a raw dataset (JSONL/JSON/CSV/text in ms-swift's formats) rendered as training would:
 * text rows with the generation template, conversations with the
 * prompter's template or else the tokenizer's own. Returns 0 or -1. */
int swift_eval_rows_open(struct swift_eval_rows **out, struct swift_eval_prompter *p,
                         const char *path);
/* 1 with the next row's ids and loss mask (mask[t] = 1: token t is a target; borrowed until the
 * next call), 0 at the end, -1 after a "file:line: ..." error. */
int swift_eval_rows_next(struct swift_eval_rows *r, const uint32_t **ids, const uint8_t **mask,
                         size_t *n);
void swift_eval_rows_close(struct swift_eval_rows *r);

#endif
