/*
 * analyze/rule_roofline — the bottleneck rule low_efficiency (docs/bottlenecks.md): the device
 * time the ops of the op roofline table (oproof.c, the report's "op_roofline") lose against
 * their roofline, the ops that lose most, and remedies by their class and dtype. Its threshold
 * and id live with the others in thresholds.c; the bottleneck object has their layout (rules.h).
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

/* ---------- low_efficiency: device time lost against the ops' roofline ---------- */

/* The remedy for the op classes and dtypes of the worst rows. */
static void efficiency_remedy(json_t *worst, char *b, size_t n)
{
    int gemm32 = 0, gemm16 = 0, attn = 0, fusable = 0, conv = 0;
    size_t i;
    json_t *r;
    json_array_foreach(worst, i, r)
    {
        const char *c = swift_an_jstr(r, "class");
        json_t *ty = json_array_get(json_object_get(r, "input_types"), 0);
        int fp32 = json_is_string(ty) && !strcmp(json_string_value(ty), "float");
        if (!strcmp(c, "gemm"))
            fp32 ? gemm32++ : gemm16++;
        else if (!strncmp(c, "attention", 9))
            attn++;
        else if (!strcmp(c, "conv"))
            conv++;
        else
            fusable++;
    }
    size_t k = 0;
    b[0] = 0;
#define ADD(...) k += (size_t)snprintf(b + k, k < n ? n - k : 0, __VA_ARGS__)
    if (gemm32 || conv)
        ADD("fp32 matmuls and convolutions run without tensor cores: train in bf16 (autocast) "
            "or, on Ampere and newer, allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
            "torch.backends.cudnn.allow_tf32 = True)%s; ",
            conv ? ", convolutions in channels_last" : "");
    if (gemm16)
        ADD("small or odd-shaped GEMMs: larger GEMMs (a bigger micro-batch, fused QKV and "
            "gate/up projections, dims multiples of 64); ");
    if (attn)
        ADD("attention below its roofline: use flash attention (F.scaled_dot_product_attention "
            "with the flash backend, or flash-attn); ");
    if (fusable)
        ADD("memory-bound softmax, norm, elementwise or loss ops: fuse them (Liger Kernel's "
            "fused linear-cross-entropy, RMSNorm and SwiGLU; torch.compile); ");
#undef ADD
    if (k >= 2 && k < n)
        b[k - 2] = 0; /* the last "; " */
}

void swift_an_rule_low_efficiency(json_t *list, const struct swift_an_proc *p, json_t *proc,
                                  const struct swift_analyze_opts *o)
{
    json_t *rf = json_object_get(proc, "op_roofline");
    /* device ops only: our CPU spans' table (peak_gflops) has no remedies of this kind */
    if (json_object_get(rf, "peak_gflops"))
        return;
    double span = swift_an_jnum(rf, "span_us"), lost = 0;
    json_t *rows = json_object_get(rf, "rows");
    if (!json_array_size(rows) || !(span > 0))
        return;
    size_t i, idx[3] = {0};
    double top[3] = {0};
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        double l = swift_an_jnum(r, "lost_us");
        if (!isfinite(l))
            continue;
        lost += l;
        for (int j = 0; j < 3; j++)
            if (l > top[j]) {
                for (int m = 2; m > j; m--) {
                    top[m] = top[m - 1];
                    idx[m] = idx[m - 1];
                }
                top[j] = l;
                idx[j] = i;
                break;
            }
    }
    double v = 100 * lost / span, th = o->th.low_efficiency_pct;
    if (!(v > th) || !(top[0] > 0))
        return;
    int critical = v >= 2 * th; /* as rules.c's sev_above */
    json_t *worst = json_array();
    for (int j = 0; j < 3 && top[j] > 0; j++) {
        json_t *w = json_array_get(rows, idx[j]);
        json_array_append_new(worst,
                              json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}",
                                        "name",
                                        json_object_get(w, "name"),
                                        "class",
                                        json_object_get(w, "class"),
                                        "input_dims",
                                        json_object_get(w, "input_dims"),
                                        "input_types",
                                        json_object_get(w, "input_types"),
                                        "device_us",
                                        json_object_get(w, "device_us"),
                                        "roofline_fraction",
                                        json_object_get(w, "roofline_fraction"),
                                        "bound",
                                        json_object_get(w, "bound"),
                                        "lost_us",
                                        json_object_get(w, "lost_us")));
    }
    char sum[512], rem[1024];
    json_t *w0 = json_array_get(worst, 0);
    snprintf(sum,
             sizeof(sum),
             "%.1f%% of step time is lost against the ops' roofline on %s; most by %s "
             "(%.1f%% of its roofline, %s-bound)",
             v,
             swift_an_jstr(rf, "device"),
             swift_an_jstr(w0, "name"),
             100 * swift_an_jnum(w0, "roofline_fraction"),
             swift_an_jstr(w0, "bound"));
    json_t *b = json_pack("{s:s,s:s,s:s,s:i,s:f,s:f,s:s,s:s}",
                          "rule",
                          "low_efficiency",
                          "severity",
                          critical ? "critical" : "warn",
                          "process",
                          p->label,
                          "rank",
                          p->rank,
                          "value",
                          round(v * 100) / 100,
                          "threshold",
                          th,
                          "unit",
                          "% of step time",
                          "summary",
                          sum);
    json_array_append_new(list, b);
    json_object_set_new(b,
                        "evidence",
                        json_pack("{s:o,s:o,s:o}",
                                  "lost_us",
                                  json_real(round(lost * 100) / 100),
                                  "span_us",
                                  json_real(round(span * 100) / 100),
                                  "worst_ops",
                                  worst));
    efficiency_remedy(worst, rem, sizeof(rem));
    json_object_set_new(b, "remedy", json_string(rem));
}
