/* export/export — swift_export_run(): pick the route (GGUF, merged HF directory, quantized);
 * swift_export_summary(): the one summary line an export prints on stdout. */
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

void swift_export_summary(json_t *rec)
{
    if (!rec) /* from json_pack: NULL is a bad format string */
        abort();
    swift_record_print(stdout, rec, SWIFT_RECORD_DIGITS_SUMMARY);
    json_decref(rec);
}

/* --mmproj's vision GGUF (first: a model without a vision side is refused before anything is
 * written), then the language model's; a failure of the second removes the first. */
static int gguf_and_mmproj(const struct swift_export_opts *o, const char *dir)
{
    if (o->mmproj && swift_export_mmproj(o, dir) < 0)
        return -1;
    if (swift_export_gguf(o, dir) < 0) {
        if (o->mmproj)
            unlink(o->mmproj);
        return -1;
    }
    return 0;
}

int swift_export_run(const struct swift_export_opts *o)
{
    if (!o->model_dir || !o->output)
        return swift_error("export needs a model directory and an output");
    if (!swift_is_dir(o->model_dir))
        return swift_error("'%s' is not a directory", o->model_dir);
    const char *to = o->to;
    if (!to)
        to = o->merge_lora || o->quant ? "hf" : "gguf";
    if (!strcmp(to, "gguf")) {
        if (o->quant)
            return swift_error("--quant writes safetensors (--to hf); for GGUF blocks use "
                               "--dtype q8_0|q4_0|q4_k|q4_k_m|q6_k");
        struct stat st;
        if (o->to_ollama) {
            char *mf = swift_modelfile_path(o->output);
            int exists = mf && stat(mf, &st) == 0;
            if (exists && !o->force) {
                swift_error("'%s' exists; use --force to overwrite it", mf);
                free(mf);
                return -1;
            }
            free(mf);
        }
        if (o->mmproj && !o->force && stat(o->mmproj, &st) == 0)
            return swift_error("'%s' exists; use --force to overwrite it", o->mmproj);
        if (!o->merge_lora)
            return gguf_and_mmproj(o, o->model_dir);
        /* merge into a temporary HF directory next to the output, convert, remove it */
        char *tmp = NULL;
        if (swift_atomic_dir_begin(o->output, &tmp) < 0)
            return -1;
        swift_remove_tree(tmp);
        struct swift_export_opts m = *o;
        m.dtype = "fp32";
        m.to = "gguf"; /* merge prints no summary of its own */
        int rc = swift_export_merge(&m, tmp);
        if (rc == 0)
            rc = gguf_and_mmproj(o, tmp);
        swift_atomic_dir_abort(tmp);
        return rc;
    }
    if (!strcmp(to, "hf")) {
        if (o->mmproj)
            return swift_error("--mmproj needs --to gguf");
        if (o->to_ollama)
            return swift_error("--to-ollama needs --to gguf");
        if (o->merge_lora && o->quant)
            return swift_error("--merge-lora and --quant together: merge first, then quantize the "
                               "merged directory");
        struct stat st;
        if (stat(o->output, &st) == 0 && !o->force)
            return swift_error("'%s' exists; use --force to overwrite it", o->output);
        char *tmp = NULL;
        if (swift_atomic_dir_begin(o->output, &tmp) < 0)
            return -1;
        if (swift_export_merge(o, tmp) < 0) {
            swift_atomic_dir_abort(tmp);
            return -1;
        }
        return swift_atomic_dir_commit(tmp, o->output, o->force);
    }
    return swift_error("unknown --to '%s' (gguf or hf)", to);
}
