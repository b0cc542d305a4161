/* export qlora — swift-export --merge-lora --qlora nf4|fp4|int8: an adapter trained by
 * swift-train --quant-bits 4|8 saw the base's linears through bitsandbytes' 4-bit (or int8 row)
 * round trip, so the merge starts from those dequantized weights (kernels/quant4.h,
 * kernels/quant8.h: the same code as training's). */
#include "lib/export/internal.h"
#include "lib/export/export.h"
#include "kernels/quant4.h"
#include "kernels/quant8.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static const char *const linears[] = {"self_attn.q_proj.weight",
                                      "self_attn.k_proj.weight",
                                      "self_attn.v_proj.weight",
                                      "self_attn.o_proj.weight",
                                      "mlp.gate_proj.weight",
                                      "mlp.up_proj.weight",
                                      "mlp.down_proj.weight"};

int swift_export_qlora_applies(const struct swift_export_opts *o, const char *name)
{
    if (!o->qlora || strncmp(name, "model.layers.", 13))
        return 0;
    const char *p = name + 13;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == name + 13 || *p++ != '.')
        return 0;
    for (size_t i = 0; i < sizeof(linears) / sizeof(linears[0]); i++)
        if (!strcmp(p, linears[i]))
            return 1;
    return 0;
}

static int round_trip8(const char *name, float *w, int64_t rows, int64_t cols)
{
    struct swift_q8 q = {.rows = (int)rows, .cols = (int)cols};
    q.cb = malloc((size_t)(rows * cols) + 1);
    q.scb = malloc((size_t)rows * sizeof(float) + 1);
    int rc = -1;
    if (q.cb && q.scb) {
        swift_q8_quantize(&q, w);
        swift_q8_dequant(&q, 0, q.rows, w);
        rc = 0;
    } else {
        swift_error("%s: out of memory for its 8-bit round trip", name);
    }
    free(q.cb);
    free(q.scb);
    return rc;
}

int swift_export_qlora_round_trip(const struct swift_export_opts *o, const char *name, float *w,
                                  int64_t rows, int64_t cols)
{
    if (!strcmp(o->qlora, "int8"))
        return round_trip8(name, w, rows, cols);
    size_t n = (size_t)(rows * cols);
    size_t nb = swift_q4_nblocks(n);
    struct swift_q4 q = {.type = strcmp(o->qlora, "fp4") ? SWIFT_Q4_NF4 : SWIFT_Q4_FP4,
                         .dq = o->qlora_double_quant,
                         .n = n};
    q.codes = malloc((n + 1) / 2 + 1);
    q.absmax = q.dq ? NULL : malloc(nb * sizeof(float));
    q.qabsmax = q.dq ? malloc(nb) : NULL;
    q.absmax2 = q.dq ? malloc(swift_q4_nblocks2(n) * sizeof(float)) : NULL;
    int rc = -1;
    if (q.codes && (q.dq ? q.qabsmax && q.absmax2 : q.absmax != NULL) &&
        swift_q4_quantize(&q, w) == 0) {
        swift_q4_dequant(&q, 0, n, w);
        rc = 0;
    } else {
        swift_error("%s: out of memory for its 4-bit round trip", name);
    }
    free(q.codes);
    free(q.absmax);
    free(q.qabsmax);
    free(q.absmax2);
    return rc;
}
