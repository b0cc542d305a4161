/* Fuzz target: the streaming trace loader (Kineto JSON, JSONL) and every analysis after it. The
 * first byte picks the format the name implies (even: .json, odd: .jsonl). */
#include "lib/analyze/analyze.h"
#include "lib/analyze/report.h"
#include "lib/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    if (size < 1)
        return 0;
    const char *name = data[0] & 1 ? "fuzz.trace.jsonl" : "fuzz.json";
    struct swift_an_set set;
    swift_an_set_init(&set);
    set.max_events = 1u << 20;
    if (swift_an_load_buffer(&set, name, data + 1, size - 1) == 0) {
        struct swift_analyze_opts o;
        swift_analyze_opts_default(&o);
        struct swift_an_proc *procs;
        size_t n;
        swift_an_procs_build(&set, &o, &procs, &n);
        json_t *r = swift_an_report_build(&set, procs, n, &o);
        swift_an_report_print(devnull, r, SWIFT_FMT_TEXT, 5);
        swift_an_report_print(devnull, r, SWIFT_FMT_HTML, 5);
        json_decref(r);
        swift_an_procs_free(procs, n);
    }
    swift_an_set_release(&set);
    return 0;
}
