/* Fuzz the hub listing parsers (HF revision info, HF tree, ModelScope repo/files) and the path
 * checks they apply. Every input is fed to both hub kinds. */
#include "lib/core/error.h"
#include "lib/download/hub.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    for (int kind = 0; kind < 2; kind++) {
        struct swift_hub_listing ls;
        if (swift_hub_parse_listing(kind, (const char *)data, size, "fuzz", &ls) == 0) {
            for (size_t i = 0; i < ls.n; i++)
                if (!swift_hub_path_ok(ls.files[i].path) || strlen(ls.files[i].sha256) % 64)
                    __builtin_trap(); /* the parser must only hand out checked entries */
            swift_hub_listing_release(&ls);
        }
    }
    return 0;
}
