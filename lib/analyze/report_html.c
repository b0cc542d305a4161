/*
 * analyze/report_html — the report document as one self-contained HTML page with inline SVG:
 * the bottlenecks, a stacked step-time breakdown per rank, a timeline strip of each rank's
 * worst steps, and the top kernels and host operations (no network). See report.h.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define HTML_W 1000 /* width of every SVG */

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

/* idx[0..m) = the indices of the m rows of a with the largest a[i][key], largest first
 * (selection as before: ties keep the earlier row first); idx has n slots. */
static void top_rows(json_t *a, const char *key, size_t *idx, size_t n, size_t m)
{
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (size_t i = 0; i < m; i++)
        for (size_t c = i + 1; c < n; c++)
            if (swift_an_jnum(json_array_get(a, idx[c]), key) >
                swift_an_jnum(json_array_get(a, idx[i]), key)) {
                size_t x = idx[i];
                idx[i] = idx[c];
                idx[c] = x;
            }
}

static void html_bottlenecks(FILE *fp, json_t *bs)
{
    fprintf(fp, "<h2>Bottlenecks (%zu)</h2>\n<ol>\n", json_array_size(bs));
    size_t i;
    json_t *b;
    json_array_foreach(bs, i, b)
    {
        const char *sev = swift_an_jstr(b, "severity");
        fprintf(fp,
                "<li><b class=\"%s\">%s</b> [%s] <i>",
                !strcmp(sev, "critical") ? "crit" : "warn",
                swift_an_jstr(b, "rule"),
                sev);
        html_esc(fp, swift_an_jstr(b, "process"));
        fputs("</i>: ", fp);
        html_esc(fp, swift_an_jstr(b, "summary"));
        fputs("<br>remedy: ", fp);
        html_esc(fp, swift_an_jstr(b, "remedy"));
        if (json_object_get(b, "command")) {
            fputs("<br><code>", fp);
            html_esc(fp, swift_an_jstr(b, "command"));
            fputs("</code>", fp);
        }
        fputs("</li>\n", fp);
    }
    fputs("</ol>\n", fp);
}

/* Stacked breakdown bars, one per process: shares of the mean step, step time at the end;
 * the legend names the parts of the first process. */
static void html_breakdown(FILE *fp, json_t *ps)
{
    size_t np = 0, i;
    json_t *p, *p0 = NULL;
    json_array_foreach(ps, i, p) if (swift_an_jnum(p, "steps") > 0)
    {
        np++;
        p0 = p0 ? p0 : p;
    }
    if (!np)
        return; /* processes without steps: their wall time by phase (html_phases) */
    int W = HTML_W, rowh = 26, left = 260, right = 90;
    fprintf(fp,
            "<h2>Step time breakdown per rank</h2>\n<svg width=\"%d\" height=\"%zu\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            W,
            np * rowh + 40);
    size_t row = 0;
    json_array_foreach(ps, i, p)
    {
        if (!(swift_an_jnum(p, "steps") > 0))
            continue;
        json_t *bd = json_object_get(p, "breakdown");
        double y = (double)row++ * rowh + 4, x = left;
        char label[48];
        swift_an_trunc_name(label, sizeof(label), swift_an_jstr(p, "label"));
        fprintf(fp, "<text x=\"0\" y=\"%.0f\">", y + 15);
        html_esc(fp, label);
        fputs("</text>\n", fp);
        size_t k;
        json_t *pn;
        json_array_foreach(json_object_get(bd, "parts"), k, pn)
        {
            double fr = swift_an_jnum(json_object_get(bd, "fraction"), json_string_value(pn));
            double us = swift_an_jnum(json_object_get(bd, "us"), json_string_value(pn));
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
                swift_an_dur(b1, sizeof(b1), swift_an_jnum(bd, "step_us")));
    }
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
}

/* One step in time order from its timeline; unclaimed time (other) shows as the grey
 * background. mx is the longest step (µs), drawn `span` wide from x0. */
static void html_step_timeline(FILE *fp, json_t *s, json_t *tl, json_t *parts, double x0, double y,
                               double mx, double span)
{
    fprintf(fp,
            "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" "
            "fill=\"#e8e8e8\"/>\n",
            x0,
            y,
            mx > 0 ? swift_an_jnum(s, "dur_us") / mx * span : 0);
    size_t q;
    json_t *seg;
    json_array_foreach(tl, q, seg)
    {
        const char *sn = json_string_value(json_array_get(seg, 0));
        double sb = json_number_value(json_array_get(seg, 1));
        double se = json_number_value(json_array_get(seg, 2));
        size_t ci = 0, c;
        json_t *nm;
        json_array_foreach(parts, c, nm) if (sn && !strcmp(json_string_value(nm), sn)) ci = c;
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
                swift_an_jnum(s, "step"),
                sn ? sn : "",
                sb,
                se);
    }
}

/* One step without a timeline: its parts stacked in part order. */
static void html_step_parts(FILE *fp, json_t *s, json_t *parts, double x0, double y, double mx,
                            double span)
{
    json_t *us = json_object_get(s, "us");
    double x = x0;
    size_t q;
    json_t *part;
    json_array_foreach(parts, q, part)
    {
        double v = swift_an_jnum(us, json_string_value(part));
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
                swift_an_jnum(s, "step"),
                json_string_value(part),
                v);
        x += w;
    }
}

/* The `top` longest steps of one process, longest first, one strip each. */
static void html_proc_steps(FILE *fp, json_t *p, int top)
{
    json_t *sl = json_object_get(p, "step_list");
    size_t n = json_array_size(sl);
    if (!n)
        return;
    size_t m = n < (size_t)top ? n : (size_t)top;
    size_t *idx = swift_xmalloc(n * sizeof(*idx));
    top_rows(sl, "dur_us", idx, n, m);
    double mx = swift_an_jnum(json_array_get(sl, idx[0]), "dur_us");
    fputs("<p>", fp);
    html_esc(fp, swift_an_jstr(p, "label"));
    fprintf(fp,
            "</p>\n<svg width=\"%d\" height=\"%zu\" xmlns=\"http://www.w3.org/2000/svg\">\n",
            HTML_W,
            m * 20 + 4);
    json_t *parts = json_object_get(json_object_get(p, "breakdown"), "parts");
    for (size_t a = 0; a < m; a++) {
        json_t *s = json_array_get(sl, idx[a]);
        double x0 = 120, y = (double)a * 20 + 2, span = HTML_W - 130;
        fprintf(fp,
                "<text x=\"0\" y=\"%.0f\">step %.0f: %.1f ms</text>\n",
                y + 12,
                swift_an_jnum(s, "step"),
                swift_an_jnum(s, "dur_us") / 1e3);
        json_t *tl = json_object_get(s, "timeline");
        if (json_array_size(tl))
            html_step_timeline(fp, s, tl, parts, x0, y, mx, span);
        else
            html_step_parts(fp, s, parts, x0, y, mx, span);
    }
    fputs("</svg>\n", fp);
    free(idx);
}

static void html_kernels(FILE *fp, json_t *ps, int top)
{
    fputs("<h2>Top kernels</h2>\n", fp);
    size_t i;
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        json_t *kr = json_object_get(p, "kernels");
        size_t n = json_array_size(kr);
        if (!n)
            continue;
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</p><table><tr><th>kernel</th><th>type</th><th>count</th><th>total (us)</th>"
              "<th>mean (us)</th></tr>\n",
              fp);
        size_t *idx = swift_xmalloc(n * sizeof(*idx));
        size_t m = n < (size_t)top ? n : (size_t)top;
        top_rows(kr, "sum_us", idx, n, m);
        for (size_t a = 0; a < m; a++) {
            json_t *row = json_array_get(kr, idx[a]);
            fputs("<tr><td><code>", fp);
            html_esc(fp, swift_an_jstr(row, "name"));
            fprintf(fp,
                    "</code></td><td>%s</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td>"
                    "<td class=\"n\">%.1f</td></tr>\n",
                    swift_an_jstr(row, "type"),
                    swift_an_jnum(row, "count"),
                    swift_an_jnum(row, "sum_us"),
                    swift_an_jnum(row, "launch_mean_us"));
        }
        fputs("</table>\n", fp);
        free(idx);
    }
}

/* Processes without steps: wall time by phase (top-level spans) as one bar over the wall time
 * and a table, the time no span covers last. */
static void html_phases(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *ph = json_object_get(p, "phases");
        if (!json_is_object(ph))
            continue;
        if (!head++)
            fputs("<h2>Wall time by phase (processes without steps)</h2>\n", fp);
        char b1[32];
        double wall = swift_an_jnum(ph, "wall_us"), x = 0, span = HTML_W - 10;
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fprintf(fp,
                ": no steps, wall %s</p>\n<svg width=\"%d\" height=\"24\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                swift_an_dur(b1, sizeof(b1), wall),
                HTML_W);
        size_t k;
        json_t *r;
        json_t *rows = json_object_get(ph, "rows");
        json_array_foreach(rows, k, r)
        {
            double fr = swift_an_jnum(r, "share");
            double w = fr > 0 ? (x + fr > 1 ? 1 - x : fr) * span : 0;
            if (!(w > 0))
                continue;
            fprintf(fp,
                    "<rect x=\"%.1f\" y=\"2\" width=\"%.1f\" height=\"18\" fill=\"%s\"><title>",
                    x * span,
                    w,
                    palette[k % 9]);
            html_esc(fp, swift_an_jstr(r, "name"));
            fprintf(fp,
                    ": %.0f us (%.1f%% of wall)</title></rect>\n",
                    swift_an_jnum(r, "us"),
                    100 * fr);
            x += w / span;
        }
        fputs("</svg>\n<table><tr><th>phase</th><th>category</th><th>count</th><th>time (us)</th>"
              "<th>share of wall</th></tr>\n",
              fp);
        json_array_foreach(rows, k, r)
        {
            fprintf(fp, "<tr><td><span style=\"color:%s\">&#9632;</span> <code>", palette[k % 9]);
            html_esc(fp, swift_an_jstr(r, "name"));
            fputs("</code></td><td>", fp);
            html_esc(fp, swift_an_jstr(r, "cat"));
            fprintf(fp,
                    "</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td>"
                    "<td class=\"n\">%.2f%%</td></tr>\n",
                    swift_an_jnum(r, "count"),
                    swift_an_jnum(r, "us"),
                    100 * swift_an_jnum(r, "share"));
        }
        double un = swift_an_jnum(ph, "untraced_us");
        fprintf(fp,
                "<tr><td>(no span)</td><td></td><td></td><td class=\"n\">%.0f</td>"
                "<td class=\"n\">%.2f%%</td></tr>\n</table>\n",
                un,
                wall > 0 ? 100 * un / wall : 0);
        double sum = wall > 0 ? un / wall : 0;
        json_array_foreach(rows, k, r) sum += swift_an_jnum(r, "share");
        if (sum > 1.0001)
            fputs("<p>Spans of threads running in parallel overlap: the shares add up past "
                  "100%.</p>\n",
                  fp);
    }
}

/* The per-op table of --profile steps, per process. */
static void html_op_table(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *ops = json_object_get(p, "ops");
        if (!json_is_object(ops))
            continue;
        if (!head++)
            fputs("<h2>Per-op time of profiled steps</h2>\n", fp);
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fprintf(fp,
                ": %.0f profiled step%s, mean step %.0f us, by self time</p>\n"
                "<table><tr><th>op</th><th>phase</th><th>self per step (us)</th>"
                "<th>total per step (us)</th><th>share of step</th><th>calls per step</th>"
                "<th>GFLOP/s</th></tr>\n",
                swift_an_jnum(ops, "steps"),
                swift_an_jnum(ops, "steps") == 1 ? "" : "s",
                swift_an_jnum(ops, "step_us"));
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(ops, "rows"), k, r)
        {
            fputs("<tr><td><code>", fp);
            html_esc(fp, swift_an_jstr(r, "name"));
            double g = swift_an_jnum(r, "gflops");
            char gf[32];
            if (isfinite(g))
                snprintf(gf, sizeof(gf), "%.2f", g);
            else
                snprintf(gf, sizeof(gf), "-");
            fprintf(fp,
                    "</code></td><td>%s</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td>"
                    "<td class=\"n\">%.2f%%</td><td class=\"n\">%g</td><td class=\"n\">%s</td>"
                    "</tr>\n",
                    swift_an_jstr(r, "phase"),
                    swift_an_jnum(r, "self_us_per_step"),
                    swift_an_jnum(r, "total_us_per_step"),
                    100 * swift_an_jnum(r, "share"),
                    swift_an_jnum(r, "calls_per_step"),
                    gf);
        }
        fputs("</table>\n", fp);
    }
}

static void html_ops(FILE *fp, json_t *ps)
{
    fputs("<h2>Top host operations</h2>\n", fp);
    size_t i;
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        json_t *ops = json_object_get(p, "top_ops");
        if (!json_array_size(ops) || json_is_object(json_object_get(p, "ops")))
            continue; /* the per-op table of --profile steps says more */
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</p><table><tr><th>operation</th><th>category</th><th>count</th>"
              "<th>total (us, inclusive)</th></tr>\n",
              fp);
        size_t a;
        json_t *row;
        json_array_foreach(ops, a, row)
        {
            fputs("<tr><td><code>", fp);
            html_esc(fp, swift_an_jstr(row, "name"));
            fputs("</code></td><td>", fp);
            html_esc(fp, swift_an_jstr(row, "cat"));
            fprintf(fp,
                    "</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td></tr>\n",
                    swift_an_jnum(row, "count"),
                    swift_an_jnum(row, "sum_us"));
        }
        fputs("</table>\n", fp);
    }
}

/* Inputs with bad lines or a truncated last line (lib/analyze/load.c). */
static void html_damage(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    char dmg[256];
    json_array_foreach(ps, i, p)
    {
        if (!swift_an_damage_text(p, dmg, sizeof(dmg)))
            continue;
        fputs("<p class=\"warn\">", fp);
        html_esc(fp, swift_an_jstr(p, "path"));
        fputs(": ", fp);
        html_esc(fp, dmg);
        fputs("</p>\n", fp);
    }
}

/* Collectives matched across ranks: skew vs transfer per rank (collectives.c). */
static void html_collectives(FILE *fp, json_t *cs)
{
    if (!json_array_size(cs))
        return;
    fputs("<h2>Collectives across ranks</h2>\n<table><tr><th>rank</th><th>matched</th>"
          "<th>time</th><th>skew (waiting for the last rank)</th><th>transfer</th><th>algbw</th>"
          "<th>busbw</th><th>arrived last</th><th>others waited</th></tr>\n",
          fp);
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c)
    {
        char t[32], sk[32], tr[32], cw[32];
        double alg = swift_an_jnum(c, "algbw_gbps"), bus = swift_an_jnum(c, "busbw_gbps");
        fprintf(fp,
                "<tr><td class=\"n\">%g</td><td class=\"n\">%g</td><td class=\"n\">%s</td>"
                "<td class=\"n\">%s (%.1f%%)</td><td class=\"n\">%s</td>",
                swift_an_jnum(c, "rank"),
                swift_an_jnum(c, "matched"),
                swift_an_dur(t, sizeof(t), swift_an_jnum(c, "comm_us")),
                swift_an_dur(sk, sizeof(sk), swift_an_jnum(c, "skew_us")),
                swift_an_jnum(c, "skew_pct"),
                swift_an_dur(tr, sizeof(tr), swift_an_jnum(c, "transfer_us")));
        fprintf(fp, isfinite(alg) ? "<td class=\"n\">%.2f GB/s</td>" : "<td>-</td>", alg);
        fprintf(fp, isfinite(bus) ? "<td class=\"n\">%.2f GB/s</td>" : "<td>-</td>", bus);
        fprintf(fp,
                "<td class=\"n\">%g</td><td class=\"n\">%s</td></tr>\n",
                swift_an_jnum(c, "arrived_last"),
                swift_an_dur(cw, sizeof(cw), swift_an_jnum(c, "skew_caused_us")));
    }
    fputs("</table>\n", fp);
}

int swift_an_print_html(FILE *fp, json_t *r, int top)
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
    html_damage(fp, ps);
    html_bottlenecks(fp, bs);
    html_collectives(fp, json_object_get(r, "collectives"));
    html_breakdown(fp, ps);
    html_phases(fp, ps);
    size_t i, nstep = 0;
    json_t *p;
    json_array_foreach(ps, i, p) nstep += swift_an_jnum(p, "steps") > 0;
    if (nstep)
        fputs("<h2>Worst steps per rank</h2>\n", fp);
    json_array_foreach(ps, i, p) html_proc_steps(fp, p, top);
    html_op_table(fp, ps);
    html_kernels(fp, ps, top);
    html_ops(fp, ps);
    fputs("</body></html>\n", fp);
    return ferror(fp) ? -1 : 0;
}
