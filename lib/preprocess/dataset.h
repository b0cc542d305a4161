/*
 * dataset — reading training data files and turning rows into conversations, as ms-swift does.
 *
 * Files: JSON Lines (one object per line), a JSON array of objects, CSV with a header row
 * (RFC 4180 quoting), or plain text (the whole file is one pretraining document). The format
 * comes from the extension (.jsonl, .json, .csv, .txt; a .json file that does not start with
 * '[' is read as JSON Lines) or is forced with swift_dataset_open's format.
 *
 *     struct swift_dataset *ds;
 *     if (swift_dataset_open(&ds, "train.jsonl", NULL) < 0)
 *         return -1;
 *     struct swift_row row;
 *     while ((rc = swift_dataset_next(ds, &row)) > 0) { ... row.text / row.obj, row.line ... }
 *     swift_dataset_close(ds);
 *
 * Rows (ms-swift's formats, detected per row after column renaming):
 *   messages       {"messages": [{"role", "content", "loss"?, "tool_calls"?}], "tools"?}
 *   ShareGPT       {"conversations": [{"from": human|gpt|system|function_call|observation,
 *                   "value"}], "system"?, "tools"?}
 *   alpaca         {"instruction", "input"?, "output", "system"?, "history"?}
 *                  (query = instruction + "\n" + input when both are set)
 *   query/response {"query"|"prompt"|"question"|"problem", "response"|"answer"|"output"|
 *                   "completion"|"solution", "history"?: [[q, r], ...], "system"?}
 *   text           {"text"} (pretraining; with the generation template)
 * "system" may also be "system_prompt"; "tools" may be an array or a JSON string of one.
 * A ShareGPT function_call whose value is {"name", "arguments"} JSON becomes an assistant tool
 * call; observation / tool become tool messages.
 *
 * Preference rows (swift_row_kind, swift_row_to_pref; docs/preprocess.md "Preference data"):
 *   ms-swift       any row above + "rejected_response" (the last assistant turn's rejected
 *                  text), or "messages" + "rejected_messages" (the whole rejected conversation)
 *   ShareGPT / LLaMA-Factory  "conversations" (or "messages") ending with the user turn +
 *                  "chosen" and "rejected", one message each ({"from", "value"})
 *   TRL            "prompt" + "chosen" + "rejected": strings (a user and an assistant turn) or
 *                  message lists; without "prompt", two whole conversations (the prompt is all
 *                  but their last message)
 *   field prompts  instruction/input, query, question, ... + "chosen" + "rejected" strings
 *   KTO            any SFT row + a boolean "label" (TRL's prompt/completion/label too)
 * Chosen and rejected must share every message but the last, which must be an assistant turn.
 *
 * Prompt rows (--kind prompts, swift_row_to_prompt; docs/preprocess.md "Prompt data"):
 *   ms-swift       "messages" ending with a user turn (a system message first, optional)
 *   TRL            "prompt": a string (one user message) or a list of messages
 *   fields         query / question / problem / instruction(+input), as SFT reads them
 * and any other columns (GSM8K's "answer", ...), which go to the sample's metadata.
 */
#ifndef SWIFT_DATASET_H
#define SWIFT_DATASET_H

#include <jansson.h>
#include <stddef.h>

#include "lib/preprocess/template.h"

struct swift_dataset;

/* One raw row. Either text/len (JSON text of one object, to be parsed by swift_row_parse) or,
 * for CSV and .txt inputs, obj (a new reference owned by the row). */
struct swift_row {
    char *text; /* owned by the row (malloc'ed); NULL when obj is set */
    size_t len;
    json_t *obj;
    long line; /* 1-based line where the row starts */
};
void swift_row_release(struct swift_row *row);

/* Open a file ("-" is stdin, read as JSON Lines). format: NULL/"auto", "jsonl", "json", "csv",
 * "text". Returns 0 or -1. */
int swift_dataset_open(struct swift_dataset **out, const char *path, const char *format);
/* 1 and *row filled, 0 at the end, -1 after an error (reported with file:line). Malformed JSON
 * inside a JSON array is reported here; a malformed JSON Lines row is detected by
 * swift_row_parse (so it can be skipped). */
int swift_dataset_next(struct swift_dataset *ds, struct swift_row *row);
/* The name for messages. */
const char *swift_dataset_name(const struct swift_dataset *ds);
void swift_dataset_close(struct swift_dataset *ds);

/* Parse a row's text into an object (a new reference in *obj; for obj rows, a new reference to
 * it). Returns 0, or -1 with a message in err (not printed). */
int swift_row_parse(struct swift_row *row, json_t **obj, char *err, size_t errlen);

/* Column renames "src:dst,src2:dst2" (ms-swift's --columns). */
struct swift_columns {
    char **src, **dst;
    int n;
};
int swift_columns_parse(struct swift_columns *c, const char *spec);
void swift_columns_release(struct swift_columns *c);

/*
 * Fill conv from one row object (renames applied to a copy first when cols has entries; *owned
 * receives the object conv borrows from, to json_decref when conv is no longer used). system
 * (may be NULL) replaces the row's system prompt, as ms-swift's --system. Returns 0, or -1 with
 * a message in err. conv->msg is grown as needed (free it with free()).
 */
int swift_row_to_conv(json_t *obj, const struct swift_columns *cols, const char *system,
                      struct swift_conv *conv, json_t **owned, char *err, size_t errlen);

/* The row with --columns renames applied (a copy appended to holder), or the row itself (a
 * reference appended to holder). */
json_t *swift_row_rename(json_t *obj, const struct swift_columns *cols, json_t *holder);

/* The user query of a row of fields, as SFT reads it: alpaca's instruction + "\n" + input (or
 * whichever is set), else the first of "query", "prompt", "question", "problem" that is set.
 * Returns 1 with *qs / *qn (borrowed from obj or holder) and the keys it read in used[] (at most
 * two, NULL-terminated), 0 when the row has none of these keys, -1 with a message in err. */
int swift_row_query(json_t *obj, json_t *holder, const char **qs, size_t *qn, const char *used[3],
                    char *err, size_t errlen);

/* What a row holds: SFT data, a preference pair, a KTO row, or a GRPO prompt (SWIFT_KIND_*;
 * prompts only with --kind prompts, never detected). */
enum swift_row_kind { SWIFT_KIND_SFT, SWIFT_KIND_PAIRS, SWIFT_KIND_KTO, SWIFT_KIND_PROMPTS };
/* The names "sft", "pairs", "kto", "prompts" (index.json's "kind", --kind). */
const char *swift_row_kind_name(int kind);
/* The kind of a row (after renames): "label" -> KTO; "chosen", "rejected", "rejected_response"
 * or "rejected_messages" -> a pair; otherwise SFT. */
int swift_row_kind(json_t *obj);

/*
 * A preference or KTO row as conversations (renames applied first, as swift_row_to_conv):
 * kind SWIFT_KIND_PAIRS fills chosen and rejected (the same messages but the last, an assistant
 * turn each); SWIFT_KIND_KTO fills chosen and *label (0/1). *owned receives what both borrow
 * from (json_decref it). Returns 0, or -1 with a message in err (not printed).
 */
int swift_row_to_pref(json_t *obj, const struct swift_columns *cols, const char *system, int kind,
                      struct swift_conv *chosen, struct swift_conv *rejected, int *label,
                      json_t **owned, char *err, size_t errlen);

/*
 * A GRPO prompt row (docs/preprocess.md "Prompt data"; renames applied first) as a conversation
 * that ends with a user turn: ms-swift's "messages" (or ShareGPT "conversations"), TRL's
 * "prompt" (a string: one user message; a list of messages), or a query column as
 * swift_row_query reads it (with "history"). *meta receives the compact JSON text (malloc'ed,
 * *meta_len bytes, NUL-terminated) {"prompt": the last user message's content, then the row's
 * other columns in order}; the columns that built the conversation (messages, conversations,
 * conversation, prompt, system, system_prompt, tools, history and the query's) are left out.
 * *owned receives what conv borrows from (json_decref it). Returns 0, or -1 with a message in
 * err (not printed).
 */
int swift_row_to_prompt(json_t *obj, const struct swift_columns *cols, const char *system,
                        struct swift_conv *conv, char **meta, size_t *meta_len, json_t **owned,
                        char *err, size_t errlen);

#endif
