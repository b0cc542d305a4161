/* Fuzz the shard header/payload checker and the index.json parser; the first byte picks which
 * ('{' or '[': index.json; 'W': the writer, whose every file must pass the checker; else a shard
 * image). */
#include "lib/core/error.h"
#include "lib/formats/shard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 'W' then a flags byte (bit 0: labels, bit 1: metadata), then samples: a byte n (1 + n % 8
 * tokens, ids the next bytes), a byte m (metadata length m % 64, the next bytes). The writer
 * refuses bad metadata; whatever it accepts serializes to an image the checker accepts. */
static void fuzz_writer(const uint8_t *d, size_t size)
{
    if (size < 2)
        return;
    int labels = d[1] & 1, meta = d[1] & 2;
    struct swift_shard_writer *w = swift_shard_writer_new("fuzz.bin");
    size_t i = 2;
    while (i + 2 <= size) {
        uint32_t n = 1 + d[i] % 8, ml = d[i + 1] % 64, ids[8];
        uint8_t mask[8];
        i += 2;
        if (i + n + ml > size)
            break;
        for (uint32_t k = 0; k < n; k++) {
            ids[k] = d[i + k];
            mask[k] = d[i + k] & 1;
        }
        const char *m = (const char *)d + i + n;
        i += n + ml;
        if (meta && labels)
            swift_shard_writer_add_labeled_meta(w, ids, mask, n, NULL, 0, ids[0] & 1, m, ml);
        else if (meta)
            swift_shard_writer_add_meta(w, ids, mask, n, NULL, 0, m, ml);
        else if (labels)
            swift_shard_writer_add_labeled(w, ids, mask, n, NULL, 0, ids[0] & 1);
        else
            swift_shard_writer_add(w, ids, mask, n, NULL, 0);
    }
    unsigned char *buf;
    size_t len;
    if (swift_shard_serialize(w, &buf, &len) == 0) {
        if (swift_shard_check(buf, len, "fuzz") != 0)
            abort(); /* the writer made a file its own checker refuses */
        free(buf);
    }
    swift_shard_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    if (size == 0)
        return 0;
    if (data[0] == '{' || data[0] == '[') {
        struct swift_shard_index ix;
        if (swift_shard_index_parse(&ix, (const char *)data, size, "fuzz") == 0)
            swift_shard_index_release(&ix);
        return 0;
    }
    if (data[0] == 'W') {
        fuzz_writer(data, size);
        return 0;
    }
    /* copy to an 8-aligned buffer, as mmap would give */
    unsigned char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    swift_shard_check(buf, size, "fuzz");
    free(buf);
    return 0;
}
