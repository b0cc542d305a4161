/*
 * toolcall — tool calls in a model's generated text, parsed into OpenAI's message.tool_calls.
 *
 * One function per agent format, so a new format (llama3's JSON, ReAct) is one more function and
 * one more enum value:
 *
 *   hermes   Qwen2.5 / Qwen3 / Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
 *            blocks, any number, anywhere in the text; a last block left open (the text ended
 *            inside it) counts when its JSON is whole, as vLLM's hermes parser does.
 *
 *     char *content;
 *     json_t *calls;
 *     int n = swift_toolcall_parse(SWIFT_TOOLCALL_HERMES, text, len, seed, &content, &calls);
 *
 * Each call becomes {"id": "call_<24 letters and digits>", "type": "function", "function":
 * {"name", "arguments": <the arguments as a compact JSON string>}}; the ids are drawn from seed
 * (the same text and seed give the same ids). A block whose JSON does not parse, or has no
 * "name" string, is not a call: it stays in the content. The content is the text with the calls'
 * blocks taken out, whitespace-trimmed; NULL when nothing is left.
 */
#ifndef SWIFT_INFER_TOOLCALL_H
#define SWIFT_INFER_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum swift_toolcall_format { SWIFT_TOOLCALL_HERMES };

/* Returns the number of calls (0: *calls NULL, *content a copy of the text, or NULL when it is
 * empty); *content malloc'ed or NULL, *calls a new reference or NULL. */
int swift_toolcall_parse(enum swift_toolcall_format f, const char *text, size_t len, uint64_t seed,
                         char **content, json_t **calls);
int swift_toolcall_hermes(const char *text, size_t len, uint64_t seed, char **content,
                          json_t **calls);

#endif
