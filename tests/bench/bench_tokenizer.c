/* bench_tokenizer — encode throughput of lib/tokenizer on a JSONL corpus of {"text": ...}.
 *
 *   bench_tokenizer TOKENIZER_DIR CORPUS.jsonl THREADS...
 *
 * Prints one JSON line per thread count: tokens, bytes, seconds, tokens/s, MB/s (tokenizer
 * loading and file reading excluded; the texts are encoded with no special-token parsing, as
 * tokenizers' encode(add_special_tokens=False) and tiktoken's encode_ordinary do on text
 * without special tokens). */
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/pool.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/core/trace.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    if (argc < 4) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER_DIR CORPUS.jsonl THREADS...\n");
        return 2;
    }
    struct swift_tokenizer *tok;
    if (swift_tokenizer_load(&tok, argv[1]) < 0)
        return 1;
    FILE *fp = fopen(argv[2], "r");
    if (!fp)
        return swift_error_errno("cannot open '%s'", argv[2]) ? 1 : 1;
    size_t n = 0, cap = 1024, bytes = 0;
    char **texts = malloc(cap * sizeof(char *));
    size_t *lens = malloc(cap * sizeof(size_t));
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, fp) > 0) {
        json_t *v = json_loads(line, 0, NULL);
        json_t *t = json_object_get(v, "text");
        if (!json_is_string(t)) {
            json_decref(v);
            continue;
        }
        if (n == cap) {
            cap *= 2;
            texts = realloc(texts, cap * sizeof(char *));
            lens = realloc(lens, cap * sizeof(size_t));
        }
        lens[n] = json_string_length(t);
        texts[n] = malloc(lens[n] + 1);
        memcpy(texts[n], json_string_value(t), lens[n] + 1);
        bytes += lens[n];
        n++;
        json_decref(v);
    }
    free(line);
    fclose(fp);
    struct swift_tokens *out = calloc(n, sizeof(*out));
    for (int a = 3; a < argc; a++) {
        int threads = (int)strtol(argv[a], NULL, 10);
        struct swift_pool *pool = swift_pool_new(threads);
        for (size_t i = 0; i < n; i++)
            out[i].n = 0;
        int64_t t0 = swift_trace_now();
        if (swift_tokenizer_encode_many(tok, pool, n, (const char *const *)texts, lens, 0, out) < 0)
            return 1;
        double s = (double)(swift_trace_now() - t0) / 1e9;
        size_t tokens = 0;
        for (size_t i = 0; i < n; i++)
            tokens += out[i].n;
        printf("{\"impl\":\"swift\",\"threads\":%d,\"texts\":%zu,\"tokens\":%zu,\"bytes\":%zu,"
               "\"seconds\":%.3f,\"tokens_per_s\":%.0f,\"mb_per_s\":%.2f}\n",
               swift_pool_size(pool),
               n,
               tokens,
               bytes,
               s,
               (double)tokens / s,
               (double)bytes / s / 1e6);
        fflush(stdout);
        swift_pool_free(pool);
    }
    for (size_t i = 0; i < n; i++) {
        swift_tokens_release(&out[i]);
        free(texts[i]);
    }
    free(out);
    free(texts);
    free(lens);
    swift_tokenizer_free(tok);
    return 0;
}
