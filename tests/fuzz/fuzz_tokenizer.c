/* Fuzz the tokenizer.json loader; when a mutated file still loads, encode and decode a text with
 * it (regexes, added tokens, merges and the normalizer all come from the input). */
#include "lib/core/error.h"
#include "lib/preprocess/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    struct swift_tokenizer *tok;
    if (swift_tokenizer_load_json(&tok, (const char *)data, size, "fuzz") < 0)
        return 0;
    struct swift_tok_state *st = swift_tok_state_new(tok);
    static const char text[] = "Hello world<|endoftext|> it's 12345 中文 e\xcc\x81 \r\n\t  x";
    struct swift_tokens t = {.want_offsets = 1};
    if (st &&
        swift_tokenizer_encode(
            st, text, sizeof(text) - 1, SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL, &t) == 0) {
        char *dec;
        size_t len;
        if (swift_tokenizer_decode(tok, t.ids, t.n, 0, &dec, &len) == 0)
            free(dec);
    }
    swift_tokens_release(&t);
    swift_tok_state_free(st);
    swift_tokenizer_free(tok);
    return 0;
}
