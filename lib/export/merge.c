/* export/merge — base + PEFT LoRA adapter → merged Hugging Face model directory. */
#include "lib/error.h"
#include "lib/export.h"
#include "lib/export/internal.h"

#include "lib/banned.h"

int swift_export_merge(const struct swift_export_opts *o, const char *out_dir)
{
    (void)o;
    (void)out_dir;
    return swift_error("--merge-lora is not implemented yet");
}
