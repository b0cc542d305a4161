/* core/record — the stdout record writer (see record.h). */
#include "lib/core/record.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/alloc.h"
#include "lib/core/fileio.h"

#include "lib/core/banned.h"

int swift_record_print(FILE *fp, const json_t *rec, int digits)
{
    size_t flags =
        JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits);
    if (json_dumpf(rec, fp, flags) < 0)
        return -1;
    return fputc('\n', fp) == EOF ? -1 : 0;
}

int swift_json_write_file(const char *path, const json_t *j, size_t flags)
{
    char *s = json_dumps(j, flags);
    if (!s)
        abort(); /* jansson allocates through swift_xmalloc: only a bug returns NULL */
    size_t n = strlen(s);
    s = swift_xrealloc(s, n + 2);
    s[n] = '\n';
    s[n + 1] = 0;
    int rc = swift_atomic_write(path, s, n + 1);
    free(s);
    return rc;
}
