/* core/record — the stdout record writer (see record.h). */
#include "lib/core/record.h"

#include "lib/core/banned.h"

int swift_record_print(FILE *fp, const json_t *rec, int digits)
{
    size_t flags =
        JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits);
    if (json_dumpf(rec, fp, flags) < 0)
        return -1;
    return fputc('\n', fp) == EOF ? -1 : 0;
}
