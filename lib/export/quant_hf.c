/* export/quant_hf — round-to-nearest weight-only quantization into a GPTQ-layout directory. */
#include "lib/error.h"
#include "lib/export.h"
#include "lib/export/internal.h"

#include "lib/banned.h"

int swift_export_quant(const struct swift_export_opts *o, const char *out_dir)
{
    (void)out_dir;
    (void)o;
    return swift_error("--quant is not implemented yet");
}
