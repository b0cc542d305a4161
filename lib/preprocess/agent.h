/*
 * agent — agent templates: how tools, tool calls and tool results are written for a model, and
 * the inverse, a completion parsed back into OpenAI tool_calls. One module that swift-preprocess
 * (rendering, lib/preprocess/template.c), swift-infer (the response's tool_calls) and swift-eval
 * (--task toolcall) share, so "calling the weather API" is written and read the same way
 * everywhere. ms-swift calls these agent templates (--agent_template); docs/agent.md shows the
 * formats side by side.
 *
 *   hermes    Qwen2.5 / Qwen3 native: tools as JSON lines in <tools></tools> in the system turn,
 *             calls as <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks,
 *             results as <tool_response>\n...\n</tool_response> in a user turn
 *   llama3    Llama 3.1 / 3.2 / 3.3 official: tools as indented JSON in the first user message,
 *             one call as {"name": ..., "parameters": {...}}, results in the ipython role
 *   react_en  ReAct: "Thought: ...\nAction: NAME\nAction Input: {JSON}\nObservation:"
 *   react_zh  the same keywords with ms-swift's Chinese tool prompt
 *   glm4      GLM-4: "NAME\n{JSON}" (several joined by <|assistant|>)
 *
 * Parsing:
 *
 *     char *content, why[256];
 *     json_t *calls;
 *     int n = swift_agent_parse(SWIFT_AGENT_HERMES, text, len, seed, &content, &calls,
 *                               why, sizeof(why));
 *
 * Each call becomes {"id": "call_<24 letters and digits>", "type": "function", "function":
 * {"name", "arguments": <the arguments as a compact JSON string>}}; the ids are drawn from seed
 * (the same text and seed give the same ids). Whitespace around the JSON and the keywords does not
 * matter. Something that looks like a call but is not one (its JSON does not parse, no "name"
 * string, an empty name or one with control characters or invalid UTF-8, arguments that are not
 * a JSON object, an Action without an Action Input) is not a
 * call: it stays in the content, and why receives which call and what is wrong ("call 2 at byte
 * 57: arguments are not a JSON object"; the first such problem; "" when there is none). The
 * content is the text with the calls taken out, whitespace-trimmed; NULL when nothing is left.
 */
#ifndef SWIFT_AGENT_H
#define SWIFT_AGENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* 0 is "the chat template's own format" (struct swift_conv's default). */
enum swift_agent {
    SWIFT_AGENT_NATIVE = 0,
    SWIFT_AGENT_HERMES,
    SWIFT_AGENT_LLAMA3,
    SWIFT_AGENT_REACT_EN,
    SWIFT_AGENT_REACT_ZH,
    SWIFT_AGENT_GLM4,
};
#define SWIFT_AGENT_NAMES "hermes, llama3, react_en, react_zh, glm4"

/* By name; -1 when unknown. */
int swift_agent_find(const char *name);
const char *swift_agent_name(int agent);
/* The format a chat template speaks natively: hermes for the ChatML/Qwen family, llama3 for the
 * Llama 3 family, SWIFT_AGENT_NATIVE (none) for the others. */
int swift_agent_for_template(const char *template_name);

/*
 * Text of the pieces, as the generic renderer puts them into a conversation when the agent
 * template is not the chat template's own (template.c renders the native pairs exactly as the
 * official Jinja does). All return a malloc'ed NUL-terminated string, or NULL with a message in
 * err (a tool without a name, a call without a "name" string).
 *   tools:    the system prompt that lists the tools (OpenAI {"type","function"} or plain
 *             definitions)
 *   calls:    the assistant text of content (may be empty) followed by the calls (OpenAI
 *             tool_calls or {"name","arguments"} objects; string arguments holding JSON are
 *             written as that JSON)
 *   response: one tool result as it goes into the observation turn
 */
char *swift_agent_format_tools(int agent, json_t *tools, char *err, size_t errlen);
char *swift_agent_format_calls(int agent, const char *content, size_t clen, json_t *calls,
                               char *err, size_t errlen);
char *swift_agent_format_response(int agent, const char *content, size_t len);

/* A call's arguments as JSON (a string holding JSON is parsed; a missing one is {}); a new
 * reference, or NULL when a string does not hold JSON. */
json_t *swift_agent_call_args(json_t *call);

/*
 * Parse a completion into tool calls (see the top of this file). Returns the number of calls;
 * *content malloc'ed or NULL, *calls a new reference or NULL (no calls). why may be NULL.
 */
int swift_agent_parse(int agent, const char *text, size_t len, uint64_t seed, char **content,
                      json_t **calls, char *why, size_t whylen);

#endif
