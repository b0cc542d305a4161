/* Fuzz the dataset readers (JSON Lines, JSON arrays, CSV) and the row -> conversation mapping.
 * The first byte picks the format; the rest is written to a temporary file and read back. */
#include "lib/preprocess/dataset.h"
#include "lib/core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    static char path[64];
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
        snprintf(path, sizeof(path), "/tmp/fuzz_dataset.%d", (int)getpid());
    }
    if (size == 0)
        return 0;
    static const char *const fmts[] = {"jsonl", "json", "csv"};
    const char *fmt = fmts[data[0] % 3];
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return 0;
    fwrite(data + 1, 1, size - 1, fp);
    fclose(fp);
    struct swift_dataset *ds;
    if (swift_dataset_open(&ds, path, fmt) == 0) {
        struct swift_row row;
        struct swift_conv conv = {0};
        struct swift_columns cols;
        swift_columns_parse(&cols, "q:query,a:response");
        int n = 0;
        while (n++ < 1000 && swift_dataset_next(ds, &row) > 0) {
            json_t *obj, *owned = NULL;
            char err[256];
            if (swift_row_parse(&row, &obj, err, sizeof(err)) == 0) {
                swift_row_to_conv(obj,
                                  n % 2 ? &cols : NULL,
                                  n % 3 ? NULL : "sys",
                                  &conv,
                                  &owned,
                                  err,
                                  sizeof(err));
                json_decref(owned);
                json_decref(obj);
            }
            swift_row_release(&row);
        }
        free(conv.msg);
        swift_columns_release(&cols);
        swift_dataset_close(ds);
    }
    unlink(path);
    return 0;
}
