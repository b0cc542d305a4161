/* Fuzz the shard header/payload checker and the index.json parser. The first byte picks which. */
#include "lib/core/error.h"
#include "lib/formats/shard.h"

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
    if (size == 0)
        return 0;
    if (data[0] == '{' || data[0] == '[') {
        struct swift_shard_index ix;
        if (swift_shard_index_parse(&ix, (const char *)data, size, "fuzz") == 0)
            swift_shard_index_release(&ix);
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
