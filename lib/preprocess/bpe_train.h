/*
 * bpe_train — train a small byte-level BPE tokenizer (GPT-2 style) and write it as a Hugging Face
 * tokenizer.json + tokenizer_config.json, so the demo needs no downloaded tokenizer and the
 * result loads in `tokenizers`/`transformers` unchanged (checked by tests/ref).
 *
 *     struct swift_bpe_train_opts o = {.vocab_size = 512, .specials = chatml_specials};
 *     swift_bpe_train_file("corpus.txt", "out/tokenizer/", &o);
 *
 * Pre-tokenization is GPT-2's regex (PCRE2, UTF + UCP); the 256 byte symbols come first (id =
 * byte value), then one id per merge, then the special tokens. Merges are chosen by the highest
 * pair count, ties broken by the smaller pair of ids, so training is deterministic.
 */
#ifndef SWIFT_BPE_TRAIN_H
#define SWIFT_BPE_TRAIN_H

#include <stddef.h>

struct swift_bpe_train_opts {
    int vocab_size;            /* bytes + merges, specials excluded; >= 256 */
    const char **specials;     /* NULL-terminated special tokens (first is eos/pad), may be NULL */
    const char *chat_template; /* Jinja text for tokenizer_config.json, may be NULL */
    const char *eos_token;     /* for tokenizer_config.json, may be NULL */
    const char *pad_token;
};

/* Train on text (UTF-8) and write DIR/tokenizer.json and DIR/tokenizer_config.json atomically.
 * Returns 0 or -1 after reporting an error. */
int swift_bpe_train(const char *text, size_t len, const char *dir,
                    const struct swift_bpe_train_opts *o);
/* Same, reading the corpus from a file (at most 256 MiB). */
int swift_bpe_train_file(const char *path, const char *dir, const struct swift_bpe_train_opts *o);

/* Same, on the concatenation of several files. */
int swift_bpe_train_files(const char *const *paths, int n, const char *dir,
                          const struct swift_bpe_train_opts *o);

/* GPT-2's byte → unicode code point map (printable bytes map to themselves). */
unsigned swift_bpe_byte_to_unicode(unsigned char b);

#endif
