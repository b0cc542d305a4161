/*
 * template — chat templates: a conversation becomes token ids and a per-token loss mask.
 *
 * ms-swift describes a template by prefix / prompt / chat_sep / suffix / system_prefix /
 * default_system; the ids we produce for a whole conversation are exactly those of the model's
 * official Jinja chat template rendered (add_generation_prompt=False) and tokenized by the HF
 * tokenizer (tests/ref/gen_template.py checks this with jinja2 + tokenizers):
 *
 *   chatml    <|im_start|>{role}\n{content}<|im_end|>\n ...       (no default system)
 *   qwen      chatml, default system "You are a helpful assistant."
 *   qwen2_5   chatml, default system "You are Qwen, created by Alibaba Cloud. You are a helpful
 *             assistant."; tools in the system turn and <tool_call> blocks (Qwen2.5 Jinja)
 *   qwen3     chatml, no default system; assistant turns after the last user query get a
 *             "<think>\n...\n</think>\n\n" block (empty when there is no reasoning), earlier ones
 *             lose theirs (Qwen3 Jinja)
 *   llama3 <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>
 *   llama3_1  Llama 3.1 / 3.3 Instruct: llama3 with a system turn that always opens with
 *             "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
 *   llama3_2  Llama 3.2 Instruct: the same (its Jinja writes today's date; we write the fixed
 *             date_string its template falls back to, so shards are reproducible)
 *   default   ms-swift's default: "{system}\n\n### Human:\n{q}\n\n### Assistant:\n{r}" "\n\n" ...
 * eos generation plain text for pretraining: [bos] text eos, every token trained
 *   qwen2_vl, qwen2_5_vl  qwen (the VL models' Jinja templates render text turns the same);
 *             images: docs/multimodal.md
 *
 * The loss mask marks training targets: with SWIFT_LOSS_DEFAULT every assistant turn (its
 * content and end marker, like ms-swift's response + chat_sep/suffix), SWIFT_LOSS_LAST_ROUND only
 * the last one, SWIFT_LOSS_ALL every token. A message's own `loss` (0/1) overrides the policy
 * for that assistant turn. The trailing "\n" the Jinja templates put after the last <|im_end|> is
 * kept (ids match the Jinja rendering) but never trained, as ms-swift's suffix stops at
 * <|im_end|>.
 *
 * Tools, tool calls and tool results are written by the conversation's agent template
 * (c->agent, lib/preprocess/agent.h). The template's own format (hermes for the ChatML family,
 * llama3 for the Llama 3 family) is rendered as the official Jinja does; any other pairing is
 * rendered as ms-swift does: the tools' prompt appended to the system message, the calls written
 * into the assistant's text (trained), the results as a user turn (never trained).
 */
#ifndef SWIFT_TEMPLATE_H
#define SWIFT_TEMPLATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/preprocess/tokenizer.h"

enum swift_role { SWIFT_ROLE_SYSTEM, SWIFT_ROLE_USER, SWIFT_ROLE_ASSISTANT, SWIFT_ROLE_TOOL };
enum swift_loss_policy { SWIFT_LOSS_DEFAULT, SWIFT_LOSS_LAST_ROUND, SWIFT_LOSS_ALL };

struct swift_message {
    enum swift_role role;
    const char *content; /* UTF-8, borrowed */
    size_t len;
    json_t *tool_calls; /* assistant: array of {"name","arguments"} or {"function":{...}};
                           borrowed, may be NULL */
    int loss;           /* -1: the policy decides; 0 or 1: forced for this assistant turn */
};

/* A conversation, or a pretraining text (is_text). Everything borrowed. */
struct swift_conv {
    struct swift_message *msg;
    size_t n, cap; /* msg is owned by whoever fills it (lib/dataset) */
    json_t *tools; /* array of tool definitions or NULL */
    int is_text;
    const char *text;
    size_t text_len;
    int open_end;    /* is_text under generation: no closing eos (a prompt that generation
                        continues, lib/eval/prompt.h) */
    int no_thinking; /* swift_template_encode_prompt under qwen3: Qwen3's enable_thinking=False,
                        an empty "<think>\n\n</think>\n\n" after the assistant header */
    int agent;       /* enum swift_agent (lib/preprocess/agent.h): how tools, tool calls and
                        tool results are written; 0: the template's own format */
};

struct swift_template;

/* By name ("qwen3", ...); NULL when unknown. */
const struct swift_template *swift_template_find(const char *name);
/* Comma-separated list of names, for messages, --help and the completions (SWIFT_TEMPLATE_NAMES,
 * for option tables). */
#define SWIFT_TEMPLATE_NAMES                                                                       \
    "chatml, qwen, qwen2_5, qwen3, llama3, llama3_1, llama3_2, default, generation, qwen2_vl, "    \
    "qwen2_5_vl"
const char *swift_template_names(void);
const char *swift_template_name(const struct swift_template *t);
/* The template a tokenizer's chat_template (tokenizer_config.json) corresponds to, or NULL. */
const char *swift_template_guess(const struct swift_tokenizer *tok);
/* Parse "default" / "last_round" / "all"; -1 when unknown. */
int swift_loss_parse(const char *s);
const char *swift_loss_name(int loss);

/* Reused buffers of one worker: the rendered text, its per-byte mask, the ids and their mask. */
struct swift_encoded {
    char *text;
    uint8_t *bytemask;
    size_t len, cap;
    struct swift_tokens tok; /* ids (offsets on) */
    uint8_t *mask;           /* mask[i] for tok.ids[i] */
    size_t maskcap;
    uint64_t trained; /* tokens with mask 1 */
};
void swift_encoded_release(struct swift_encoded *e);

/*
 * Render conversation c with template t and tokenize it with st (of the same tokenizer).
 * On success returns 0 with e->text/len the rendered (NFC-normalized) text and e->tok/e->mask
 * the ids and mask. On bad input (empty conversation, roles out of order, no assistant turn to
 * train, a template that cannot express it) writes a message into err and returns -1 without
 * printing anything (the caller adds file:line).
 */
int swift_template_encode(const struct swift_template *t, struct swift_tok_state *st,
                          const struct swift_tokenizer *tok, const struct swift_conv *c, int loss,
                          struct swift_encoded *e, char *err, size_t errlen);

/*
 * A preference pair (rejected non-NULL) or a KTO row (rejected NULL) as SFT renders it: each
 * conversation rendered and tokenized whole into e0 / e1 with the loss mask of its final assistant
 * turn only (SWIFT_LOSS_LAST_ROUND; the messages' own "loss" is ignored, so they are modified).
 * *prompt receives the prompt's length in tokens: the tokens that end before the final turn's
 * response begins, and for a pair also that both sides share (their common prefix); the masks are
 * 0 there. Equal to TRL's prompt_ids when the template renders the prompt alone the same way (see
 * docs/preprocess.md). Returns 0, or -1 with a message in err (a response with no token to train,
 * the generation template, anything swift_template_encode refuses).
 */
int swift_template_encode_pair(const struct swift_template *t, struct swift_tok_state *st,
                               const struct swift_tokenizer *tok, struct swift_conv *chosen,
                               struct swift_conv *rejected, struct swift_encoded *e0,
                               struct swift_encoded *e1, size_t *prompt, char *err, size_t errlen);

/*
 * A GRPO prompt: conversation c, which must end with a user message (or, with a chat template,
 * tool results after an assistant's tool calls), rendered with the
 * generation prompt (the assistant header the model continues, as HF's
 * apply_chat_template(add_generation_prompt=True): ChatML's "<|im_start|>assistant\n", Llama 3's
 * "<|start_header_id|>assistant<|end_header_id|>\n\n") and tokenized as that text alone. Under
 * the generation template c must be one user message, encoded as swift-eval's plain prompts
 * (the start token, the text, no eos). Under qwen3, c->no_thinking appends the empty thinking
 * block Qwen3's Jinja writes for enable_thinking=False. e->mask is all 0 and e->trained 0. Returns
 * 0, or -1 with a message in err (not printed).
 */
int swift_template_encode_prompt(const struct swift_template *t, struct swift_tok_state *st,
                                 const struct swift_tokenizer *tok, const struct swift_conv *c,
                                 struct swift_encoded *e, char *err, size_t errlen);

#endif
