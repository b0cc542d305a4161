#include "lib/analyze/report.h"
#include "lib/analyze/analyze.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* a short human duration */
static const char *dur(char *b, size_t n, double us)
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

static void trunc_name(char *out, size_t n, const char *s)
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

static void print_proc(FILE *fp, json_t *p, int md, int top)
{
    char b1[32], b2[32];
    const char *h = md ? "### " : "";
    fprintf(fp, "\n%s%s\n", h, jstr(p, "label"));
    if (!md)
        fprintf(fp, "  %s\n", jstr(p, "path"));
    else
        fprintf(fp, "\n`%s`\n\n", jstr(p, "path"));
    double steps = jnum(p, "steps");
    json_t *st = json_object_get(p, "step_time_us");
    fprintf(fp,
            "%s%.0f steps, mean step %s (median %s), wall %s\n",
            md ? "" : "  ",
            steps,
            dur(b1, sizeof(b1), jnum(st, "mean")),
            dur(b2, sizeof(b2), jnum(st, "median")),
            dur((char[32]){0}, 32, jnum(p, "wall_us")));
    json_t *bd = json_object_get(p, "breakdown");
    json_t *parts = json_object_get(bd, "parts");
    if (steps > 0) {
        fprintf(fp,
                md ? "\n| part | per step | share |\n|---|---:|---:|\n"
                   : "  step time breakdown (per step):\n");
        size_t i;
        json_t *pn;
        json_array_foreach(parts, i, pn)
        {
            const char *name = json_string_value(pn);
            double us = jnum(json_object_get(bd, "us"), name);
            double fr = jnum(json_object_get(bd, "fraction"), name);
            if (md)
                fprintf(fp, "| %s | %s | %.2f%% |\n", name, dur(b1, sizeof(b1), us), 100 * fr);
            else {
                int bar = (int)lround(fr * 30);
                fprintf(fp, "    %-14s %10s %6.2f%%  ", name, dur(b1, sizeof(b1), us), 100 * fr);
                for (int k = 0; k < bar; k++)
                    fputs("#", fp);
                fputs("\n", fp);
            }
        }
        if (md)
            fputs("\n", fp);
    }
    json_t *gu = json_object_get(p, "gpu_utilization");
    if (json_is_number(gu))
        fprintf(fp,
                "%sGPU utilization (kernel busy / all steps): %.2f%%\n",
                md ? "- " : "  ",
                100 * json_number_value(gu));
    json_t *t = json_object_get(p, "temporal");
    if (json_is_object(t))
        fprintf(fp,
                "%sHTA temporal breakdown: idle %.2f%%, compute %.2f%%, non-compute %.2f%% of "
                "%s GPU time\n",
                md ? "- " : "  ",
                jnum(t, "idle_pct"),
                jnum(t, "compute_pct"),
                jnum(t, "non_compute_pct"),
                dur(b1, sizeof(b1), jnum(t, "kernel_us")));
    json_t *ov = json_object_get(p, "comm_comp_overlap_pct");
    if (json_is_number(ov))
        fprintf(fp,
                "%scommunication overlapped with computation: %.2f%%\n",
                md ? "- " : "  ",
                json_number_value(ov));
    json_t *idle = json_object_get(p, "idle_breakdown");
    if (json_array_size(idle)) {
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
                    jnum(r, "stream"),
                    dur(b1, sizeof(b1), jnum(r, "host_wait_us")),
                    dur(b2, sizeof(b2), jnum(r, "kernel_wait_us")),
                    dur((char[32]){0}, 32, jnum(r, "other_us")));
        }
        fputs("\n", fp);
    }
    json_t *ln = json_object_get(p, "launch");
    if (json_is_object(ln) && jnum(ln, "launches") > 0)
        fprintf(fp,
                "%skernel launches: %.0f, mean CPU launch %.1f us, mean launch delay %.1f us, "
                "%.0f kernels shorter than their launch\n",
                md ? "- " : "  ",
                jnum(ln, "launches"),
                jnum(ln, "mean_cpu_us"),
                jnum(ln, "mean_delay_us"),
                jnum(ln, "short_kernels"));
    json_t *mem = json_object_get(p, "memory");
    if (json_is_object(mem))
        fprintf(fp,
                "%speak memory: %.2f GiB (%.1f%% of device)\n",
                md ? "- " : "  ",
                jnum(mem, "peak_bytes") / 1073741824.0,
                jnum(mem, "peak_pct"));
    json_t *nc = json_object_get(p, "nccl");
    if (json_is_object(nc) && jnum(nc, "kernels") > 0) {
        json_t *c = json_array_get(json_object_get(nc, "longest"), 0);
        char nm[48];
        trunc_name(nm, sizeof(nm), jstr(c, "name"));
        fprintf(fp,
                "%sNCCL kernels: %.0f; longest %s, %s",
                md ? "- " : "  ",
                jnum(nc, "kernels"),
                nm,
                dur(b1, sizeof(b1), jnum(c, "dur_us")));
        if (json_is_string(json_object_get(c, "collective_name")))
            fprintf(fp,
                    " (%s of %.0f x %s, ranks %s)",
                    jstr(c, "collective_name"),
                    jnum(c, "in_msg_nelems"),
                    jstr(c, "dtype"),
                    jstr(c, "process_group_ranks"));
        fputs("\n", fp);
    }
    json_t *kr = json_object_get(p, "kernels");
    if (json_array_size(kr)) {
        /* top by sum */
        size_t n = json_array_size(kr);
        size_t *idx = malloc(n * sizeof(*idx));
        if (!idx)
            abort();
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        for (size_t i = 0; i < n && i <= (size_t)top; i++)
            for (size_t j = i + 1; j < n; j++)
                if (jnum(json_array_get(kr, idx[j]), "sum_us") >
                    jnum(json_array_get(kr, idx[i]), "sum_us")) {
                    size_t x = idx[i];
                    idx[i] = idx[j];
                    idx[j] = x;
                }
        fprintf(fp,
                md ? "\n| kernel | type | count | total | mean |\n|---|---|---:|---:|---:|\n"
                   : "  top kernels:\n");
        for (size_t i = 0, shown = 0; i < n && shown < (size_t)top; i++) {
            json_t *r = json_array_get(kr, idx[i]);
            if (!strcmp(jstr(r, "name"), "others") && !md)
                continue; /* HTA's tail group; in the JSON */
            shown++;
            char nm[64];
            trunc_name(nm, md ? 64 : 48, jstr(r, "name"));
            if (md)
                fprintf(fp,
                        "| `%s` | %s | %.0f | %s | %s |\n",
                        nm,
                        jstr(r, "type"),
                        jnum(r, "count"),
                        dur(b1, sizeof(b1), jnum(r, "sum_us")),
                        dur(b2, sizeof(b2), jnum(r, "mean_us")));
            else
                fprintf(fp,
                        "    %-48s %-13s %7.0f x %10s\n",
                        nm,
                        jstr(r, "type"),
                        jnum(r, "count"),
                        dur(b1, sizeof(b1), jnum(r, "sum_us")));
        }
        free(idx);
    }
}

static void print_ops(FILE *fp, json_t *p, int md, int top)
{
    json_t *ops = json_object_get(p, "top_ops");
    if (!json_array_size(ops))
        return;
    char b1[32];
    fprintf(fp,
            md ? "\n| host operation | count | total (inclusive) |\n|---|---:|---:|\n"
               : "  top host operations (inclusive time):\n");
    size_t i;
    json_t *r;
    json_array_foreach(ops, i, r)
    {
        if (i >= (size_t)top)
            break;
        char nm[64];
        trunc_name(nm, md ? 64 : 48, jstr(r, "name"));
        if (md)
            fprintf(fp,
                    "| `%s` | %.0f | %s |\n",
                    nm,
                    jnum(r, "count"),
                    dur(b1, sizeof(b1), jnum(r, "sum_us")));
        else
            fprintf(fp,
                    "    %-48s %-13.13s %7.0f x %10s\n",
                    nm,
                    jstr(r, "cat"),
                    jnum(r, "count"),
                    dur(b1, sizeof(b1), jnum(r, "sum_us")));
    }
}

static void print_bottleneck(FILE *fp, json_t *b, int md, int idx)
{
    char b1[32];
    const char *sev = jstr(b, "severity");
    if (md)
        fprintf(fp,
                "\n%d. **%s** (%s) — %s\n\n   %s\n",
                idx,
                jstr(b, "rule"),
                sev,
                jstr(b, "process"),
                jstr(b, "summary"));
    else
        fprintf(fp,
                "\n%d. [%s] %s — %s\n   %s (threshold %g %s)\n",
                idx,
                !strcmp(sev, "critical") ? "CRITICAL" : "warn",
                jstr(b, "rule"),
                jstr(b, "process"),
                jstr(b, "summary"),
                jnum(b, "threshold"),
                jstr(b, "unit"));
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
                    jnum(s, "step"),
                    jnum(s, "rank"),
                    jnum(s, "ts"),
                    dur(b1, sizeof(b1), jnum(s, "dur_us")),
                    i + 1 < json_array_size(ws) && i < 2 ? "," : "");
        }
        fputs("\n", fp);
    }
    fprintf(fp, md ? "\n   remedy: %s\n" : "   remedy: %s\n", jstr(b, "remedy"));
    if (json_object_get(b, "command"))
        fprintf(fp, md ? "\n   ```sh\n   %s\n   ```\n" : "   run: %s\n", jstr(b, "command"));
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
                dur(b1, sizeof(b1), jnum(r, "wall_us")));
    else
        fprintf(fp,
                "swift-trace-analyze %s: %zu process%s, wall %s\n\nBottlenecks (%zu):",
                jstr(r, "version"),
                json_array_size(ps),
                json_array_size(ps) == 1 ? "" : "es",
                dur(b1, sizeof(b1), jnum(r, "wall_us")),
                json_array_size(bs));
    if (!json_array_size(bs))
        fprintf(fp, "\n%snone above the thresholds\n", md ? "" : "  ");
    size_t i;
    json_t *b;
    json_array_foreach(bs, i, b) print_bottleneck(fp, b, md, (int)i + 1);
    fprintf(fp, md ? "\n## Processes\n" : "\nProcesses:\n");
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        print_proc(fp, p, md, top);
        print_ops(fp, p, md, top < 3 ? top : 3);
    }
    return ferror(fp) ? -1 : 0;
}

/* ---------- HTML with inline SVG ---------- */

static void html_esc(FILE *fp, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", fp);
            break;
        case '>':
            fputs("&gt;", fp);
            break;
        case '&':
            fputs("&amp;", fp);
            break;
        case '"':
            fputs("&quot;", fp);
            break;
        default:
            fputc(*s, fp);
        }
    }
}

static const char *const palette[] = {"#4e79a7",
                                      "#f28e2b",
                                      "#e15759",
                                      "#76b7b2",
                                      "#59a14f",
                                      "#edc948",
                                      "#b07aa1",
                                      "#9c755f",
                                      "#bab0ac"};

static int print_html(FILE *fp, json_t *r, int top)
{
    json_t *ps = json_object_get(r, "processes"), *bs = json_object_get(r, "bottlenecks");
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>swift-trace-analyze "
          "report</title>\n"
          "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}"
          "h1,h2{font-weight:600}.crit{color:#b00}.warn{color:#a60}table{border-collapse:collapse}"
          "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}"
          "td.n{text-align:right}code{background:#f4f4f4;padding:1px 3px}"
          "svg text{font:11px system-ui,sans-serif}</style></head><body>\n"
          "<h1>swift-trace-analyze report</h1>\n",
          fp);
    fprintf(fp, "<h2>Bottlenecks (%zu)</h2>\n<ol>\n", json_array_size(bs));
    size_t i;
    json_t *b;
    json_array_foreach(bs, i, b)
    {
        const char *sev = jstr(b, "severity");
        fprintf(fp,
                "<li><b class=\"%s\">%s</b> [%s] <i>",
                !strcmp(sev, "critical") ? "crit" : "warn",
                jstr(b, "rule"),
                sev);
        html_esc(fp, jstr(b, "process"));
        fputs("</i>: ", fp);
        html_esc(fp, jstr(b, "summary"));
        fputs("<br>remedy: ", fp);
        html_esc(fp, jstr(b, "remedy"));
        if (json_object_get(b, "command")) {
            fputs("<br><code>", fp);
            html_esc(fp, jstr(b, "command"));
            fputs("</code>", fp);
        }
        fputs("</li>\n", fp);
    }
    fputs("</ol>\n", fp);
    /* stacked breakdown bars, one per process: shares of the mean step, step time at the end */
    size_t np = json_array_size(ps);
    int W = 1000, rowh = 26, left = 260, right = 90;
    fprintf(fp,
            "<h2>Step time breakdown per rank</h2>\n<svg width=\"%d\" height=\"%zu\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            W,
            np * rowh + 40);
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        json_t *bd = json_object_get(p, "breakdown");
        double y = (double)i * rowh + 4, x = left;
        char label[48];
        trunc_name(label, sizeof(label), jstr(p, "label"));
        fprintf(fp, "<text x=\"0\" y=\"%.0f\">", y + 15);
        html_esc(fp, label);
        fputs("</text>\n", fp);
        size_t k;
        json_t *pn;
        json_array_foreach(json_object_get(bd, "parts"), k, pn)
        {
            double fr = jnum(json_object_get(bd, "fraction"), json_string_value(pn));
            double us = jnum(json_object_get(bd, "us"), json_string_value(pn));
            double w = fr * (W - left - right);
            if (!(w > 0))
                continue;
            fprintf(fp,
                    "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    "<title>%s: %.0f us (%.1f%%)</title></rect>\n",
                    x,
                    y,
                    w,
                    rowh - 6,
                    palette[k % 9],
                    json_string_value(pn),
                    us,
                    100 * fr);
            x += w;
        }
        char b1[32];
        fprintf(fp,
                "<text x=\"%d\" y=\"%.0f\">%s/step</text>\n",
                W - right + 6,
                y + 15,
                dur(b1, sizeof(b1), jnum(bd, "step_us")));
    }
    /* legend: parts of the first process */
    json_t *p0 = json_array_get(ps, 0);
    size_t k;
    json_t *pn;
    double lx = left;
    json_array_foreach(json_object_get(json_object_get(p0, "breakdown"), "parts"), k, pn)
    {
        fprintf(fp,
                "<rect x=\"%.0f\" y=\"%zu\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%zu\">%s</text>\n",
                lx,
                np * rowh + 14,
                palette[k % 9],
                lx + 13,
                np * rowh + 23,
                json_string_value(pn));
        lx += 95;
    }
    fputs("</svg>\n", fp);
    /* timeline strip of the worst steps per rank */
    fputs("<h2>Worst steps per rank</h2>\n", fp);
    json_array_foreach(ps, i, p)
    {
        json_t *sl = json_object_get(p, "step_list");
        size_t n = json_array_size(sl);
        if (!n)
            continue;
        /* the `top` longest steps, drawn in time order as consecutive strips */
        size_t m = n < (size_t)top ? n : (size_t)top;
        size_t *idx = malloc(n * sizeof(*idx));
        if (!idx)
            abort();
        for (size_t a = 0; a < n; a++)
            idx[a] = a;
        for (size_t a = 0; a < m; a++)
            for (size_t c = a + 1; c < n; c++)
                if (jnum(json_array_get(sl, idx[c]), "dur_us") >
                    jnum(json_array_get(sl, idx[a]), "dur_us")) {
                    size_t x = idx[a];
                    idx[a] = idx[c];
                    idx[c] = x;
                }
        double mx = jnum(json_array_get(sl, idx[0]), "dur_us");
        fputs("<p>", fp);
        html_esc(fp, jstr(p, "label"));
        fprintf(fp,
                "</p>\n<svg width=\"%d\" height=\"%zu\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                W,
                m * 20 + 4);
        json_t *parts = json_object_get(json_object_get(p, "breakdown"), "parts");
        for (size_t a = 0; a < m; a++) {
            json_t *s = json_array_get(sl, idx[a]);
            json_t *us = json_object_get(s, "us");
            double x0 = 120, y = (double)a * 20 + 2, span = W - 130;
            fprintf(fp,
                    "<text x=\"0\" y=\"%.0f\">step %.0f: %.1f ms</text>\n",
                    y + 12,
                    jnum(s, "step"),
                    jnum(s, "dur_us") / 1e3);
            json_t *tl = json_object_get(s, "timeline");
            if (json_array_size(tl)) {
                /* the step in time order; unclaimed time (other) shows as the grey background */
                fprintf(fp,
                        "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" "
                        "fill=\"#e8e8e8\"/>\n",
                        x0,
                        y,
                        mx > 0 ? jnum(s, "dur_us") / mx * span : 0);
                size_t q;
                json_t *seg;
                json_array_foreach(tl, q, seg)
                {
                    const char *sn = json_string_value(json_array_get(seg, 0));
                    double sb = json_number_value(json_array_get(seg, 1));
                    double se = json_number_value(json_array_get(seg, 2));
                    size_t ci = 0, c;
                    json_t *nm;
                    json_array_foreach(parts, c, nm) if (sn && !strcmp(json_string_value(nm), sn))
                        ci = c;
                    double w = mx > 0 ? (se - sb) / mx * span : 0;
                    if (w < 0.2)
                        w = 0.2;
                    fprintf(fp,
                            "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" "
                            "fill=\"%s\"><title>step %.0f %s +%.0f..%.0f us</title></rect>\n",
                            x0 + (mx > 0 ? sb / mx * span : 0),
                            y,
                            w,
                            palette[ci % 9],
                            jnum(s, "step"),
                            sn ? sn : "",
                            sb,
                            se);
                }
                continue;
            }
            double x = x0;
            size_t q;
            json_t *part;
            json_array_foreach(parts, q, part)
            {
                double v = jnum(us, json_string_value(part));
                double w = mx > 0 ? v / mx * span : 0;
                if (!(w > 0))
                    continue;
                fprintf(fp,
                        "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" fill=\"%s\">"
                        "<title>step %.0f %s: %.0f us</title></rect>\n",
                        x,
                        y,
                        w,
                        palette[q % 9],
                        jnum(s, "step"),
                        json_string_value(part),
                        v);
                x += w;
            }
        }
        fputs("</svg>\n", fp);
        free(idx);
    }
    /* kernel table */
    fputs("<h2>Top kernels</h2>\n", fp);
    json_array_foreach(ps, i, p)
    {
        json_t *kr = json_object_get(p, "kernels");
        size_t n = json_array_size(kr);
        if (!n)
            continue;
        fputs("<p>", fp);
        html_esc(fp, jstr(p, "label"));
        fputs("</p><table><tr><th>kernel</th><th>type</th><th>count</th><th>total (us)</th>"
              "<th>mean (us)</th></tr>\n",
              fp);
        size_t *idx = malloc(n * sizeof(*idx));
        if (!idx)
            abort();
        for (size_t a = 0; a < n; a++)
            idx[a] = a;
        size_t m = n < (size_t)top * 2 ? n : (size_t)top * 2;
        for (size_t a = 0; a < m; a++)
            for (size_t c = a + 1; c < n; c++)
                if (jnum(json_array_get(kr, idx[c]), "sum_us") >
                    jnum(json_array_get(kr, idx[a]), "sum_us")) {
                    size_t x = idx[a];
                    idx[a] = idx[c];
                    idx[c] = x;
                }
        for (size_t a = 0; a < m; a++) {
            json_t *row = json_array_get(kr, idx[a]);
            fputs("<tr><td><code>", fp);
            html_esc(fp, jstr(row, "name"));
            fprintf(fp,
                    "</code></td><td>%s</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td>"
                    "<td class=\"n\">%.1f</td></tr>\n",
                    jstr(row, "type"),
                    jnum(row, "count"),
                    jnum(row, "sum_us"),
                    jnum(row, "mean_us"));
        }
        fputs("</table>\n", fp);
        free(idx);
    }
    fputs("<h2>Top host operations</h2>\n", fp);
    json_array_foreach(ps, i, p)
    {
        json_t *ops = json_object_get(p, "top_ops");
        if (!json_array_size(ops))
            continue;
        fputs("<p>", fp);
        html_esc(fp, jstr(p, "label"));
        fputs("</p><table><tr><th>operation</th><th>category</th><th>count</th>"
              "<th>total (us, inclusive)</th></tr>\n",
              fp);
        size_t a;
        json_t *row;
        json_array_foreach(ops, a, row)
        {
            fputs("<tr><td><code>", fp);
            html_esc(fp, jstr(row, "name"));
            fputs("</code></td><td>", fp);
            html_esc(fp, jstr(row, "cat"));
            fprintf(fp,
                    "</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td></tr>\n",
                    jnum(row, "count"),
                    jnum(row, "sum_us"));
        }
        fputs("</table>\n", fp);
    }
    fputs("</body></html>\n", fp);
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
        return print_html(fp, report, top);
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
