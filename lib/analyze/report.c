/*
 * analyze/report — the report document as text (for people at a terminal) or Markdown (for PR
 * comments and wikis), JSON as is, and the atomic write; HTML is in report_html.c. See report.h.
 */
#include "lib/analyze/report.h"
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/fileio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

double swift_an_jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *swift_an_jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

const char *swift_an_dur(char *b, size_t n, double us)
{
    if (!isfinite(us))
        snprintf(b, n, "-");
    else if (fabs(us) >= 1e6)
        snprintf(b, n, "%.2f s", us / 1e6);
    else if (fabs(us) >= 1e3)
        snprintf(b, n, "%.2f ms", us / 1e3);
    else
        snprintf(b, n, "%.0f us", us);
    return b;
}

const char *swift_an_bw_text(char *b, size_t n, double gbps)
{
    if (!isfinite(gbps))
        snprintf(b, n, "-");
    else if (fabs(gbps) >= 1 || gbps == 0)
        snprintf(b, n, "%.2f GB/s", gbps);
    else
        snprintf(b, n, "%.3g MB/s", gbps * 1e3);
    return b;
}

void swift_an_trunc_name(char *out, size_t n, const char *s)
{
    size_t l = strlen(s);
    if (l < n) {
        memcpy(out, s, l + 1);
        return;
    }
    memcpy(out, s, n - 4);
    memcpy(out + n - 4, "...", 4);
}

/* ---------- text and Markdown ---------- */

/* The step time breakdown: a table (Markdown) or bars (text). */
static void print_breakdown(FILE *fp, json_t *p, int md)
{
    char b1[32];
    json_t *bd = json_object_get(p, "breakdown");
    json_t *parts = json_object_get(bd, "parts");
    fprintf(fp,
            md ? "\n| part | per step | share |\n|---|---:|---:|\n"
               : "  step time breakdown (per step):\n");
    size_t i;
    json_t *pn;
    json_array_foreach(parts, i, pn)
    {
        const char *name = json_string_value(pn);
        double us = swift_an_jnum(json_object_get(bd, "us"), name);
        double fr = swift_an_jnum(json_object_get(bd, "fraction"), name);
        if (md)
            fprintf(fp, "| %s | %s | %.2f%% |\n", name, swift_an_dur(b1, sizeof(b1), us), 100 * fr);
        else {
            int bar = (int)lround(fr * 30);
            fprintf(
                fp, "    %-14s %10s %6.2f%%  ", name, swift_an_dur(b1, sizeof(b1), us), 100 * fr);
            for (int k = 0; k < bar; k++)
                fputs("#", fp);
            fputs("\n", fp);
        }
    }
    if (md)
        fputs("\n", fp);
}

/* GPU idle time by cause, for the first four streams. */
static void print_idle(FILE *fp, json_t *idle, int md)
{
    char b1[32], b2[32];
    size_t i;
    json_t *r;
    fprintf(fp, "%sGPU idle by cause (per stream):", md ? "- " : "  ");
    json_array_foreach(idle, i, r)
    {
        if (i >= 4) {
            fprintf(fp, " ...");
            break;
        }
        fprintf(fp,
                " stream %.0f host_wait %s kernel_wait %s other %s;",
                swift_an_jnum(r, "stream"),
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "host_wait_us")),
                swift_an_dur(b2, sizeof(b2), swift_an_jnum(r, "kernel_wait_us")),
                swift_an_dur((char[32]){0}, 32, swift_an_jnum(r, "other_us")));
    }
    fputs("\n", fp);
}

/* The NCCL kernel count and the longest one with its collective. */
static void print_nccl(FILE *fp, json_t *nc, int md)
{
    char b1[32];
    json_t *c = json_array_get(json_object_get(nc, "longest"), 0);
    char nm[48];
    swift_an_trunc_name(nm, sizeof(nm), swift_an_jstr(c, "name"));
    fprintf(fp,
            "%sNCCL kernels: %.0f; longest %s, %s",
            md ? "- " : "  ",
            swift_an_jnum(nc, "kernels"),
            nm,
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(c, "dur_us")));
    if (json_is_string(json_object_get(c, "collective_name")))
        fprintf(fp,
                " (%s of %.0f x %s, ranks %s)",
                swift_an_jstr(c, "collective_name"),
                swift_an_jnum(c, "in_msg_nelems"),
                swift_an_jstr(c, "dtype"),
                swift_an_jstr(c, "process_group_ranks"));
    fputs("\n", fp);
}

/* One line per GPU figure the process has: utilization, HTA's temporal breakdown, overlap,
 * idle by cause, launches, peak memory, NCCL. */
static void print_gpu(FILE *fp, json_t *p, int md)
{
    char b1[32];
    const char *li = md ? "- " : "  ";
    json_t *gu = json_object_get(p, "gpu_utilization");
    if (json_is_number(gu))
        fprintf(fp,
                "%sGPU utilization (kernel busy / all steps): %.2f%%\n",
                li,
                100 * json_number_value(gu));
    json_t *t = json_object_get(p, "temporal");
    if (json_is_object(t))
        fprintf(fp,
                "%sHTA temporal breakdown: idle %.2f%%, compute %.2f%%, non-compute %.2f%% of "
                "%s GPU time\n",
                li,
                swift_an_jnum(t, "idle_pct"),
                swift_an_jnum(t, "compute_pct"),
                swift_an_jnum(t, "non_compute_pct"),
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(t, "kernel_us")));
    json_t *ov = json_object_get(p, "comm_comp_overlap_pct");
    if (json_is_number(ov))
        fprintf(
            fp, "%scommunication overlapped with computation: %.2f%%\n", li, json_number_value(ov));
    json_t *idle = json_object_get(p, "idle_breakdown");
    if (json_array_size(idle))
        print_idle(fp, idle, md);
    json_t *ln = json_object_get(p, "launch");
    if (json_is_object(ln) && swift_an_jnum(ln, "launches") > 0)
        fprintf(fp,
                "%skernel launches: %.0f, mean CPU launch %.1f us, mean launch delay %.1f us, "
                "%.0f kernels shorter than their launch\n",
                li,
                swift_an_jnum(ln, "launches"),
                swift_an_jnum(ln, "mean_cpu_us"),
                swift_an_jnum(ln, "mean_delay_us"),
                swift_an_jnum(ln, "short_kernels"));
    json_t *mem = json_object_get(p, "memory");
    /* device counters (GPU, Kineto) print their peak; swift-train's accounting its categories */
    if (json_is_object(mem) && (json_array_size(json_object_get(mem, "devices")) ||
                                !json_is_object(json_object_get(mem, "by_category")))) {
        fprintf(fp, "%speak memory: %.2f GiB", li, swift_an_jnum(mem, "peak_bytes") / 1073741824.0);
        if (json_is_number(json_object_get(mem, "peak_pct")))
            fprintf(fp, " (%.1f%% of device)", swift_an_jnum(mem, "peak_pct"));
        if (json_is_number(json_object_get(mem, "reserved_at_peak_bytes")))
            fprintf(fp,
                    ", %.2f GiB reserved (%.2f GiB fragmentation)",
                    swift_an_jnum(mem, "reserved_at_peak_bytes") / 1073741824.0,
                    swift_an_jnum(mem, "fragmentation_bytes") / 1073741824.0);
        json_t *d0 = json_array_get(json_object_get(mem, "devices"), 0);
        const char *src = json_string_value(json_object_get(d0, "source"));
        if (src && !strcmp(src, "running_sum"))
            fputs(", counted from the trace's first allocation", fp);
        json_t *ops = json_object_get(d0, "peak_ops"), *op;
        size_t oi;
        json_array_foreach(ops, oi, op)
            fprintf(fp, "%s%s", oi ? " > " : ", reached in ", json_string_value(op));
        json_t *cats = json_object_get(d0, "categories_at_peak");
        if (json_is_object(cats)) {
            const char *k, *sep = "; at the peak: ";
            json_t *v;
            json_object_foreach(cats, k, v)
            {
                if (json_number_value(v) > 0) {
                    fprintf(fp, "%s%s %.2f GiB", sep, k, json_number_value(v) / 1073741824.0);
                    sep = ", ";
                }
            }
        }
        fputc('\n', fp);
    }
    if (json_is_object(mem)) {
        json_t *bc = json_object_get(mem, "by_category");
        if (json_is_object(bc)) {
            static const char *const k[5] = {
                "params", "grads", "optimizer", "activations", "other"};
            fprintf(fp, "%saccounted peak %.2f MiB:", li, swift_an_jnum(bc, "total") / 1048576.0);
            for (int c = 0; c < 5; c++)
                fprintf(
                    fp, "%s %s %.2f MiB", c ? "," : "", k[c], swift_an_jnum(bc, k[c]) / 1048576.0);
            fputc('\n', fp);
        }
    }
    json_t *nc = json_object_get(p, "nccl");
    if (json_is_object(nc) && swift_an_jnum(nc, "kernels") > 0)
        print_nccl(fp, nc, md);
}

/* The `top` kernels by total time (text leaves out HTA's "others" group). */
static void print_kernels(FILE *fp, json_t *kr, int md, int top)
{
    char b1[32], b2[32];
    size_t n = json_array_size(kr);
    size_t *idx = swift_xmalloc(n * sizeof(*idx));
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (size_t i = 0; i < n && i <= (size_t)top; i++)
        for (size_t j = i + 1; j < n; j++)
            if (swift_an_jnum(json_array_get(kr, idx[j]), "sum_us") >
                swift_an_jnum(json_array_get(kr, idx[i]), "sum_us")) {
                size_t x = idx[i];
                idx[i] = idx[j];
                idx[j] = x;
            }
    fprintf(fp,
            md ? "\n| kernel | type | count | total | mean |\n|---|---|---:|---:|---:|\n"
               : "  top kernels:\n");
    for (size_t i = 0, shown = 0; i < n && shown < (size_t)top; i++) {
        json_t *r = json_array_get(kr, idx[i]);
        if (!strcmp(swift_an_jstr(r, "name"), "others") && !md)
            continue; /* HTA's tail group; in the JSON */
        shown++;
        char nm[64];
        swift_an_trunc_name(nm, md ? 64 : 48, swift_an_jstr(r, "name"));
        if (md)
            fprintf(fp,
                    "| `%s` | %s | %.0f | %s | %s |\n",
                    nm,
                    swift_an_jstr(r, "type"),
                    swift_an_jnum(r, "count"),
                    swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "sum_us")),
                    swift_an_dur(b2, sizeof(b2), swift_an_jnum(r, "launch_mean_us")));
        else
            fprintf(fp,
                    "    %-48s %-13s %7.0f x %10s\n",
                    nm,
                    swift_an_jstr(r, "type"),
                    swift_an_jnum(r, "count"),
                    swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "sum_us")));
    }
    free(idx);
}

/* A process without steps: its wall time by phase (top-level spans), with the time no span
 * covers, as a table (Markdown) or bars (text). */
static void print_phases(FILE *fp, json_t *p, int md)
{
    char b1[32];
    json_t *ph = json_object_get(p, "phases");
    fprintf(fp,
            "%sno steps: wall %s by phase (top-level spans)%s\n",
            md ? "" : "  ",
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(ph, "wall_us")),
            md ? "\n\n| phase | category | count | time | share of wall |\n"
                 "|---|---|---:|---:|---:|"
               : ":");
    size_t i;
    json_t *r;
    double wall = swift_an_jnum(ph, "wall_us");
    json_array_foreach(json_object_get(ph, "rows"), i, r)
    {
        char nm[64];
        swift_an_trunc_name(nm, md ? 64 : 32, swift_an_jstr(r, "name"));
        double us = swift_an_jnum(r, "us"), fr = swift_an_jnum(r, "share");
        if (md) {
            fprintf(fp,
                    "| `%s` | %s | %.0f | %s | %.2f%% |\n",
                    nm,
                    swift_an_jstr(r, "cat"),
                    swift_an_jnum(r, "count"),
                    swift_an_dur(b1, sizeof(b1), us),
                    100 * fr);
            continue;
        }
        fprintf(fp,
                "    %-32s %-10.10s %5.0f x %10s %7.2f%%  ",
                nm,
                swift_an_jstr(r, "cat"),
                swift_an_jnum(r, "count"),
                swift_an_dur(b1, sizeof(b1), us),
                100 * fr);
        for (int k = 0; k < (int)lround((fr > 1 ? 1 : fr) * 30); k++)
            fputs("#", fp);
        fputs("\n", fp);
    }
    double un = swift_an_jnum(ph, "untraced_us"), sum = wall > 0 ? un / wall : 0;
    json_array_foreach(json_object_get(ph, "rows"), i, r) sum += swift_an_jnum(r, "share");
    if (md)
        fprintf(fp,
                "| (no span) | | | %s | %.2f%% |\n\n",
                swift_an_dur(b1, sizeof(b1), un),
                wall > 0 ? 100 * un / wall : 0);
    else
        fprintf(fp,
                "    %-32s %-10s %7s %10s %7.2f%%\n",
                "(no span)",
                "",
                "",
                swift_an_dur(b1, sizeof(b1), un),
                wall > 0 ? 100 * un / wall : 0);
    if (sum > 1.0001)
        fprintf(
            fp,
            "%s(spans of threads running in parallel overlap: the shares add up past 100%%)%s\n",
            md ? "" : "    ",
            md ? "\n" : "");
}

/* The per-op table of --profile steps: op, phase, self and total time per step, share of the
 * step, calls per step, GFLOP/s. */
static void print_op_table(FILE *fp, json_t *p, int md)
{
    char b1[32], b2[32], gf[32];
    json_t *ops = json_object_get(p, "ops");
    fprintf(fp,
            "%sper-op time of %.0f profiled step%s (mean step %s), by self time:\n",
            md ? "\n" : "  ",
            swift_an_jnum(ops, "steps"),
            swift_an_jnum(ops, "steps") == 1 ? "" : "s",
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(ops, "step_us")));
    if (md)
        fputs("\n| op | phase | self per step | total per step | share of step | calls per step "
              "| GFLOP/s |\n|---|---|---:|---:|---:|---:|---:|\n",
              fp);
    else
        fprintf(fp,
                "    %-32s %-9s %10s %10s %7s %6s %8s\n",
                "op",
                "phase",
                "self/step",
                "total/step",
                "share",
                "calls",
                "GFLOP/s");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(ops, "rows"), i, r)
    {
        char nm[64];
        swift_an_trunc_name(nm, md ? 64 : 32, swift_an_jstr(r, "name"));
        double g = swift_an_jnum(r, "gflops");
        if (isfinite(g))
            snprintf(gf, sizeof(gf), "%.2f", g);
        else
            snprintf(gf, sizeof(gf), "-");
        fprintf(fp,
                md ? "| `%s` | %s | %s | %s | %.2f%% | %g | %s |\n"
                   : "    %-32s %-9s %10s %10s %6.2f%% %6g %8s\n",
                nm,
                swift_an_jstr(r, "phase"),
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "self_us_per_step")),
                swift_an_dur(b2, sizeof(b2), swift_an_jnum(r, "total_us_per_step")),
                100 * swift_an_jnum(r, "share"),
                swift_an_jnum(r, "calls_per_step"),
                gf);
    }
}

/* The op roofline table of a Kineto trace with shapes (swift_an_oproof_json): --top rows. */
static void print_op_roofline(FILE *fp, json_t *p, int md, int top)
{
    json_t *rf = json_object_get(p, "op_roofline");
    if (!json_array_size(json_object_get(rf, "rows")))
        return;
    json_t *pk = json_object_get(rf, "peak");
    /* our --profile spans (oproof_spans.c): CPU time against the run's peak_gflops, GFLOP/s */
    int spans = json_object_get(rf, "peak_gflops") != NULL;
    char peak[128] = "no peak known: no roofline fraction";
    if (spans && json_is_object(pk))
        snprintf(peak, sizeof(peak), "peak %.4g GFLOP/s", swift_an_jnum(pk, "gflops"));
    else if (json_is_object(pk))
        snprintf(peak,
                 sizeof(peak),
                 "peak %.4g TFLOP/s 16-bit, %.4g fp32, %.3g TB/s",
                 swift_an_jnum(pk, "tflops_16bit"),
                 swift_an_jnum(pk, "tflops_fp32"),
                 swift_an_jnum(pk, "tbps"));
    fprintf(fp,
            "%sop roofline on %s (%s), by %s:\n",
            md ? "\n" : "  ",
            json_is_string(json_object_get(rf, "device")) ? swift_an_jstr(rf, "device") : "?",
            peak,
            spans ? "time" : "device time");
    if (md)
        fprintf(fp,
                "\n| op | %s | calls | %s | share | %s | %s | FLOP/B | %s "
                "|\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
                spans ? "shape" : "input dims",
                spans ? "time" : "device",
                spans ? "GFLOP/s" : "TFLOP/s",
                spans ? "GB/s" : "TB/s",
                spans ? "of peak" : "roofline");
    else
        fprintf(fp,
                "    %-28s %-26s %5s %10s %6s %8s %6s %7s %8s\n",
                "op",
                spans ? "shape" : "input dims",
                "calls",
                spans ? "time" : "device",
                "share",
                spans ? "GFLOP/s" : "TFLOP/s",
                spans ? "GB/s" : "TB/s",
                "FLOP/B",
                spans ? "of peak" : "roofline");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(rf, "rows"), i, r)
    {
        if ((int)i >= top)
            break;
        char nm[64], dims[64], b1[32], f[3][16], fr[16];
        swift_an_trunc_name(nm, md ? 64 : 28, swift_an_jstr(r, "name"));
        char *dj = spans ? NULL : json_dumps(json_object_get(r, "input_dims"), JSON_COMPACT);
        swift_an_trunc_name(dims, md ? 64 : 26, spans ? swift_an_jstr(r, "shape") : dj ? dj : "");
        free(dj);
        const char *k[3] = {spans ? "gflops" : "tflops", "tbps", "intensity"};
        for (int j = 0; j < 3; j++) {
            double v = swift_an_jnum(r, k[j]) * (spans && j == 1 ? 1e3 : 1);
            snprintf(f[j], sizeof(f[j]), isfinite(v) ? "%.3g" : "-", v);
        }
        double fv = swift_an_jnum(r, "roofline_fraction");
        snprintf(fr, sizeof(fr), isfinite(fv) ? "%.1f%%" : "-", 100 * fv);
        fprintf(fp,
                md ? "| `%s` | `%s` | %.0f | %s | %.2f%% | %s | %s | %s | %s |\n"
                   : "    %-28s %-26s %5.0f %10s %5.2f%% %8s %6s %7s %8s\n",
                nm,
                dims,
                swift_an_jnum(r, "calls"),
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "device_us")),
                100 * swift_an_jnum(r, "share"),
                f[0],
                f[1],
                f[2],
                fr);
    }
}

static void print_proc(FILE *fp, json_t *p, int md, int top)
{
    char b1[32], b2[32];
    const char *h = md ? "### " : "";
    fprintf(fp, "\n%s%s\n", h, swift_an_jstr(p, "label"));
    if (!md)
        fprintf(fp, "  %s\n", swift_an_jstr(p, "path"));
    else
        fprintf(fp, "\n`%s`\n\n", swift_an_jstr(p, "path"));
    char dmg[256];
    if (swift_an_damage_text(p, dmg, sizeof(dmg)))
        fprintf(fp, "%swarning: %s\n", md ? "" : "  ", dmg);
    double steps = swift_an_jnum(p, "steps");
    json_t *st = json_object_get(p, "step_time_us");
    if (steps > 0) {
        fprintf(fp,
                "%s%.0f steps, mean step %s (median %s), wall %s\n",
                md ? "" : "  ",
                steps,
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(st, "mean")),
                swift_an_dur(b2, sizeof(b2), swift_an_jnum(st, "median")),
                swift_an_dur((char[32]){0}, 32, swift_an_jnum(p, "wall_us")));
        print_breakdown(fp, p, md);
        swift_an_rl_print(fp, p, md);
        swift_an_vl_print(fp, p, md);
    } else if (json_is_object(json_object_get(p, "phases"))) {
        print_phases(fp, p, md);
    }
    swift_an_infer_print(fp, p, md);
    if (json_is_object(json_object_get(p, "ops")))
        print_op_table(fp, p, md);
    print_gpu(fp, p, md);
    json_t *kr = json_object_get(p, "kernels");
    if (json_array_size(kr))
        print_kernels(fp, kr, md, top);
    print_op_roofline(fp, p, md, top);
}

/* Host spans by inclusive time (the JSON holds --top of them), where no per-op table of
 * --profile steps says more. */
static void print_ops(FILE *fp, json_t *p, int md)
{
    json_t *ops = json_object_get(p, "top_ops");
    if (!json_array_size(ops) || json_is_object(json_object_get(p, "ops")))
        return;
    char b1[32];
    fprintf(fp,
            md ? "\n| host operation | count | total (inclusive) |\n|---|---:|---:|\n"
               : "  top host operations (inclusive time):\n");
    size_t i;
    json_t *r;
    json_array_foreach(ops, i, r)
    {
        char nm[64];
        swift_an_trunc_name(nm, md ? 64 : 48, swift_an_jstr(r, "name"));
        if (md)
            fprintf(fp,
                    "| `%s` | %.0f | %s |\n",
                    nm,
                    swift_an_jnum(r, "count"),
                    swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "sum_us")));
        else
            fprintf(fp,
                    "    %-48s %-13.13s %7.0f x %10s\n",
                    nm,
                    swift_an_jstr(r, "cat"),
                    swift_an_jnum(r, "count"),
                    swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "sum_us")));
    }
}

/* A bottleneck's patch (--emit-patch prints it alone), indented under its card. */
static void print_patch(FILE *fp, json_t *pt, int md)
{
    if (!pt)
        return;
    if (json_object_get(pt, "error")) {
        fprintf(fp, md ? "\n   patch: %s\n" : "   patch: %s\n", swift_an_jstr(pt, "error"));
        return;
    }
    fprintf(fp,
            md ? "\n   patch of %s (`--emit-patch | patch -p0`):\n\n   ```diff\n"
               : "   patch of %s (--emit-patch | patch -p0):\n",
            swift_an_jstr(pt, "file"));
    for (const char *s = swift_an_jstr(pt, "diff"); *s;) {
        size_t l = strcspn(s, "\n");
        fprintf(fp, md ? "   %.*s\n" : "     %.*s\n", (int)l, s); /* md: the fence's indent */
        s += l + (s[l] == '\n');
    }
    if (md)
        fputs("   ```\n", fp);
}

static void print_bottleneck(FILE *fp, json_t *b, int md, int idx)
{
    char b1[32];
    const char *sev = swift_an_jstr(b, "severity");
    if (md)
        fprintf(fp,
                "\n%d. **%s** (%s) — %s\n\n   %s\n",
                idx,
                swift_an_jstr(b, "rule"),
                sev,
                swift_an_jstr(b, "process"),
                swift_an_jstr(b, "summary"));
    else
        fprintf(fp,
                "\n%d. [%s] %s — %s\n   %s (threshold %g %s)\n",
                idx,
                !strcmp(sev, "critical") ? "CRITICAL" : "warn",
                swift_an_jstr(b, "rule"),
                swift_an_jstr(b, "process"),
                swift_an_jstr(b, "summary"),
                swift_an_jnum(b, "threshold"),
                swift_an_jstr(b, "unit"));
    json_t *ws = json_object_get(json_object_get(b, "evidence"), "worst_spans");
    if (json_array_size(ws)) {
        fprintf(fp, md ? "\n   worst steps:" : "   worst steps:");
        size_t i;
        json_t *s;
        json_array_foreach(ws, i, s)
        {
            if (i >= 3)
                break;
            fprintf(fp,
                    " #%.0f (rank %.0f, ts %.0f, %s)%s",
                    swift_an_jnum(s, "step"),
                    swift_an_jnum(s, "rank"),
                    swift_an_jnum(s, "ts"),
                    swift_an_dur(b1, sizeof(b1), swift_an_jnum(s, "dur_us")),
                    i + 1 < json_array_size(ws) && i < 2 ? "," : "");
        }
        fputs("\n", fp);
    }
    fprintf(fp, md ? "\n   remedy: %s\n" : "   remedy: %s\n", swift_an_jstr(b, "remedy"));
    if (json_object_get(b, "command"))
        fprintf(
            fp, md ? "\n   ```sh\n   %s\n   ```\n" : "   run: %s\n", swift_an_jstr(b, "command"));
    print_patch(fp, json_object_get(b, "patch"), md);
}

/* Collectives matched across ranks: per rank, skew (waiting for the last rank) vs transfer. */
static void print_collectives(FILE *fp, json_t *r, int md, int top)
{
    json_t *cs = json_object_get(r, "collectives"), *c;
    if (!json_array_size(cs))
        return;
    fprintf(
        fp,
        md ? "\n## Collectives across ranks\n\n| rank | matched | time | skew | transfer | "
             "skew %% | algbw | busbw | arrived last | others waited | busbw of link |\n"
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
           : "\nCollectives across ranks (skew: waiting for the last rank):\n"
             "  rank  matched       time       skew   transfer  skew%%        algbw        busbw  "
             "last  others waited  busbw of link\n");
    size_t i, nc = json_array_size(cs);
    char *keep = swift_xmalloc(nc + 1);
    swift_an_ranks_pick(cs, "skew_caused_us", top, keep);
    json_array_foreach(cs, i, c)
    {
        if (!keep[i])
            continue;
        char t[32], sk[32], tr[32], cw[32], ab[32], bb[32], lk[128] = "-";
        double alg = swift_an_jnum(c, "algbw_gbps"), bus = swift_an_jnum(c, "busbw_gbps");
        double lf = swift_an_jnum(c, "busbw_link_fraction");
        if (isfinite(lf))
            snprintf(lk,
                     sizeof(lk),
                     "%.1f%% of %g GB/s (%s)",
                     100 * lf,
                     swift_an_jnum(c, "link_gbps"),
                     swift_an_jstr(c, "link"));
        swift_an_bw_text(ab, sizeof(ab), alg);
        swift_an_bw_text(bb, sizeof(bb), bus);
        swift_an_dur(t, sizeof(t), swift_an_jnum(c, "comm_us"));
        swift_an_dur(sk, sizeof(sk), swift_an_jnum(c, "skew_us"));
        swift_an_dur(tr, sizeof(tr), swift_an_jnum(c, "transfer_us"));
        swift_an_dur(cw, sizeof(cw), swift_an_jnum(c, "skew_caused_us"));
        fprintf(fp,
                md ? "| %g | %g | %s | %s | %s | %.1f%% | %s | %s | %g | %s | %s |\n"
                   : "  %4g  %7g  %9s  %9s  %9s  %5.1f  %11s  %11s  %4g  %13s  %s\n",
                swift_an_jnum(c, "rank"),
                swift_an_jnum(c, "matched"),
                t,
                sk,
                tr,
                swift_an_jnum(c, "skew_pct"),
                ab,
                bb,
                swift_an_jnum(c, "arrived_last"),
                cw,
                lk);
    }
    free(keep);
    if (nc > SWIFT_AN_RANKS_DETAIL)
        fprintf(fp,
                "%s%zu more ranks (the %d that made the others wait longest shown)\n",
                md ? "\n" : "  ",
                nc - (size_t)(top < (int)nc ? top : (int)nc),
                top);
}

static int print_text(FILE *fp, json_t *r, int md, int top)
{
    json_t *ps = json_object_get(r, "processes"), *bs = json_object_get(r, "bottlenecks");
    char b1[32];
    if (md)
        fprintf(fp,
                "# swift-trace-analyze report\n\n%zu process%s, wall %s\n\n## Bottlenecks\n",
                json_array_size(ps),
                json_array_size(ps) == 1 ? "" : "es",
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "wall_us")));
    else
        fprintf(fp,
                "swift-trace-analyze %s: %zu process%s, wall %s\n\nBottlenecks (%zu):",
                swift_an_jstr(r, "version"),
                json_array_size(ps),
                json_array_size(ps) == 1 ? "" : "es",
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(r, "wall_us")),
                json_array_size(bs));
    if (!json_array_size(bs))
        fprintf(fp, "\n%snone above the thresholds\n", md ? "" : "  ");
    size_t i;
    json_t *b;
    int many = json_array_size(ps) > SWIFT_AN_RANKS_DETAIL, k = 0;
    json_array_foreach(bs, i, b)
    {
        char more[320] = "";
        if (many && swift_an_ranks_repeat(bs, i, more, sizeof(more)))
            continue; /* many ranks: each rule once, its worst, and where else it fired */
        print_bottleneck(fp, b, md, ++k);
        if (more[0])
            fprintf(fp, md ? "\n%s\n" : "   %s\n", more);
    }
    print_collectives(fp, r, md, top);
    swift_an_ranks_print(fp, r, md);
    if (json_array_size(ps) > SWIFT_AN_RANKS_DETAIL) {
        fprintf(fp, "\n%zu processes: every one in --format json\n", json_array_size(ps));
        return ferror(fp) ? -1 : 0;
    }
    fprintf(fp, md ? "\n## Processes\n" : "\nProcesses:\n");
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        print_proc(fp, p, md, top);
        print_ops(fp, p, md);
    }
    return ferror(fp) ? -1 : 0;
}

int swift_an_report_print(FILE *fp, json_t *report, int format, int top)
{
    switch (format) {
    case SWIFT_FMT_JSON:
        if (json_dumpf(report, fp, JSON_COMPACT | JSON_REAL_PRECISION(15)) < 0)
            return -1;
        fputc('\n', fp);
        return ferror(fp) ? -1 : 0;
    case SWIFT_FMT_MD:
        return print_text(fp, report, 1, top);
    case SWIFT_FMT_HTML:
        return swift_an_print_html(fp, report, top);
    default:
        return print_text(fp, report, 0, top);
    }
}

int swift_an_report_write(json_t *report, int format, const char *path, int top)
{
    if (!path || !strcmp(path, "-"))
        return swift_an_report_print(stdout, report, format, top);
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    if (swift_an_report_print(af.fp, report, format, top) < 0) {
        swift_atomic_abort(&af);
        return swift_error("cannot write '%s'", path);
    }
    return swift_atomic_commit(&af);
}
