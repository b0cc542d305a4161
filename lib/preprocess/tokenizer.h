/*
 * tokenizer — Hugging Face byte-level BPE tokenizers (Qwen2/2.5/3, Llama-3, GPT-2), id for id.
 *
 * Loads a directory holding tokenizer.json (+ optional tokenizer_config.json), or GPT-2's
 * encoder.json + vocab.bpe. Encoding follows the `tokenizers` pipeline:
 *
 *   1. added tokens are found in the raw text (leftmost-longest, as HF's AddedVocabulary);
 *      special ones only with SWIFT_TOK_PARSE_SPECIAL, non-special ones always;
 *   2. each remaining segment is normalized (NFC / NFKC / none, utf8proc);
 *   3. pre-tokenized with the exact regexes of the file (Split(Isolated) and ByteLevel's
 *      GPT-2 regex when use_regex) through PCRE2 with JIT, in UTF + Unicode-property mode;
 *   4. each piece is BPE-merged on bytes (lowest merge rank first, leftmost on ties; with
 *      ignore_merges a piece found whole in the vocabulary is emitted as one id);
 *   5. with SWIFT_TOK_ADD_SPECIAL, the post-processor's TemplateProcessing tokens (e.g.
 *      <|begin_of_text|>) are added around the sequence.
 *
 * A tokenizer is read-only after loading and shared by threads; each thread encodes through its
 * own struct swift_tok_state (regex match data, BPE scratch, a cache of frequent pieces), so the
 * hot path takes no lock and does no per-token allocation.
 *
 *     struct swift_tokenizer *tok;
 *     if (swift_tokenizer_load(&tok, "models/Qwen3-0.6B") < 0)
 *         return -1;
 *     struct swift_tok_state *st = swift_tok_state_new(tok);
 *     struct swift_tokens t = {0};
 *     swift_tokenizer_encode(st, text, len, SWIFT_TOK_PARSE_SPECIAL, &t);   // appends to t
 *     ... t.ids[0..t.n) ...
 *     swift_tokens_release(&t);
 *     swift_tok_state_free(st);
 *     swift_tokenizer_free(tok);
 *
 * Errors (reported once, return -1): a malformed or unsupported tokenizer.json names the file
 * and what is wrong; text that is not UTF-8 names the byte offset.
 */
#ifndef SWIFT_TOKENIZER_H
#define SWIFT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct swift_pool;
struct swift_tokenizer;
struct swift_tok_state;

/* A growing list of token ids; zero-initialize, then pass to encode (which appends). With
 * want_offsets set, offsets[i] is the byte offset of token i's first byte in the encoded text
 * (after normalization: pass SWIFT_TOK_NO_NORMALIZE and normalize yourself when the offsets
 * must refer to your buffer). Added tokens get their match offset. Free with
 * swift_tokens_release. */
struct swift_tokens {
    uint32_t *ids;
    uint32_t *offsets;
    size_t n, cap;
    int want_offsets;
};
void swift_tokens_release(struct swift_tokens *t);
/* Append one id (offset given); returns 0 or -1 (over the ceiling). */
int swift_tokens_push(struct swift_tokens *t, uint32_t id, uint32_t offset);

enum {
    SWIFT_TOK_PARSE_SPECIAL = 1, /* match special added tokens in the text (HF default) */
    SWIFT_TOK_ADD_SPECIAL = 2,   /* apply the post-processor (BOS of Llama-3 Instruct, ...) */
    SWIFT_TOK_NO_NORMALIZE = 4,  /* the caller has normalized the text already */
    SWIFT_TOK_SKIP_SPECIAL = 8   /* decode: leave special tokens out */
};

/* Load DIR/tokenizer.json (else DIR/encoder.json + DIR/vocab.bpe) and DIR/tokenizer_config.json
 * when present. DIR may also name a tokenizer.json file, or a GGUF file (*.gguf, or a file
 * starting with "GGUF": swift_tokenizer_load_gguf). Returns 0 or -1. */
int swift_tokenizer_load(struct swift_tokenizer **out, const char *dir);
/* Load from a GGUF file's tokenizer.ggml.* keys (model "gpt2"; pre gpt-2, llama-bpe or qwen2,
 * given the regex, normalizer and ignore_merges of those models' tokenizer.json; tokens of type
 * CONTROL become special added tokens, USER ones plain added tokens, UNUSED ones are left out),
 * with bos/eos/pad/unk_token, chat_template and add_bos/eos_token as the config
 * (swift_tokenizer_config_str). The ids equal those of the tokenizer.json the file was exported
 * from. Returns 0 or -1. */
int swift_tokenizer_load_gguf(struct swift_tokenizer **out, const char *path);
/* The same from a parsed file (lib/formats/gguf.h; name for messages). */
struct swift_gguf;
int swift_tokenizer_from_gguf(struct swift_tokenizer **out, const struct swift_gguf *g,
                              const char *name);
/* Load from tokenizer.json text in memory (name is used in messages). Returns 0 or -1. */
int swift_tokenizer_load_json(struct swift_tokenizer **out, const char *text, size_t len,
                              const char *name);
/* Load GPT-2's encoder.json and vocab.bpe texts. */
int swift_tokenizer_load_gpt2(struct swift_tokenizer **out, const char *encoder_json,
                              size_t enc_len, const char *vocab_bpe, size_t bpe_len,
                              const char *name);
void swift_tokenizer_free(struct swift_tokenizer *tok);

/* Per-thread encoding state (borrowing tok, which must outlive it). NULL after an error (PCRE2's
 * own allocations failing). */
struct swift_tok_state *swift_tok_state_new(const struct swift_tokenizer *tok);
void swift_tok_state_free(struct swift_tok_state *st);

/* Encode len bytes of UTF-8 text, appending to out. Returns 0 or -1 (invalid UTF-8 with its
 * byte offset, or more tokens than the ceiling). */
int swift_tokenizer_encode(struct swift_tok_state *st, const char *text, size_t len, int flags,
                           struct swift_tokens *out);

/* Encode n texts over a pool (NULL: this thread), out[i] receiving text i; identical to n
 * single calls. Returns 0 or -1 (the first failing text's error reported). */
int swift_tokenizer_encode_many(const struct swift_tokenizer *tok, struct swift_pool *pool,
                                size_t n, const char *const *texts, const size_t *lens, int flags,
                                struct swift_tokens *out);

/* Decode ids to UTF-8 (HF's ByteLevel decoder: bytes joined, invalid sequences replaced by
 * U+FFFD as Rust's from_utf8_lossy does). *text is malloc'ed and NUL-terminated; caller frees.
 * Unknown ids are an error. Returns 0 or -1. */
int swift_tokenizer_decode(const struct swift_tokenizer *tok, const uint32_t *ids, size_t n,
                           int flags, char **text, size_t *len);

/* Normalize text as the tokenizer's normalizer does (a malloc'ed copy; caller frees). When the
 * tokenizer has none, the copy is identical. Returns 0 or -1 (invalid UTF-8). */
int swift_tokenizer_normalize(const struct swift_tokenizer *tok, const char *text, size_t len,
                              char **out, size_t *outlen);

/* The id of an added token's content ("<|im_end|>") or, failing that, of a vocabulary entry
 * whose bytes equal s; -1 when none. */
long swift_tokenizer_token_id(const struct swift_tokenizer *tok, const char *s);
/* 1 + the largest id. */
uint32_t swift_tokenizer_vocab_size(const struct swift_tokenizer *tok);
/* Bytes of token id (added tokens: their content); NULL when unknown. Borrowed. */
const char *swift_tokenizer_token_bytes(const struct swift_tokenizer *tok, uint32_t id,
                                        size_t *len);
/* 1 if id is a special added token. */
int swift_tokenizer_is_special(const struct swift_tokenizer *tok, uint32_t id);
/* sha256 hex of the tokenizer.json (or encoder.json + vocab.bpe) bytes. Borrowed. */
const char *swift_tokenizer_sha256(const struct swift_tokenizer *tok);
/* From tokenizer_config.json (NULL when absent): "bos_token", "eos_token", "pad_token",
 * "chat_template". Borrowed. */
const char *swift_tokenizer_config_str(const struct swift_tokenizer *tok, const char *key);

#endif
