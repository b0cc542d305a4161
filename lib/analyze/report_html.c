/*
 * analyze/report_html — the report document as one self-contained HTML page with inline SVG:
 * the bottlenecks as cards, a stacked step-time breakdown per rank, the per-op tables, the top
 * kernels and host operations (no network); the step charts are in report_svg.c.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define HTML_W 1000 /* width of every SVG */

const char *const swift_an_html_palette[9] = {"#4e79a7",
                                              "#f28e2b",
                                              "#e15759",
                                              "#76b7b2",
                                              "#59a14f",
                                              "#edc948",
                                              "#b07aa1",
                                              "#9c755f",
                                              "#bab0ac"};

/* A duration for people: ms (3 significant places below 10 ms), s from 10 s on. */
const char *swift_an_html_ms(char *b, size_t n, double us)
{
    if (!isfinite(us))
        snprintf(b, n, "-");
    else if (fabs(us) >= 1e7)
        snprintf(b, n, "%.2f s", us / 1e6);
    else if (fabs(us) >= 1e4)
        snprintf(b, n, "%.1f ms", us / 1e3);
    else
        snprintf(b, n, "%.3f ms", us / 1e3);
    return b;
}

/* idx[0..m) = the indices of the m rows of a with the largest a[i][key], largest first
 * (selection as before: ties keep the earlier row first); idx has n slots. */
void swift_an_html_top_rows(json_t *a, const char *key, size_t *idx, size_t n, size_t m)
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

/* A <pre> with a copy button (the page's one script copies the text of the <pre> by id). */
static void html_copyable(FILE *fp, const char *id, const char *text)
{
    fprintf(
        fp,
        "<div class=\"cp\"><button type=\"button\" onclick=\"copyPre('%s', this)\">copy</button>"
        "<pre id=\"%s\">",
        id,
        id);
    swift_an_html_esc(fp, text);
    fputs("</pre></div>\n", fp);
}

/* A rule's evidence: its figures as name = value, the worst steps with their times. */
static void html_evidence(FILE *fp, json_t *ev)
{
    if (!json_object_size(ev))
        return;
    fputs("<ul class=\"ev\">", fp);
    const char *k;
    json_t *v;
    json_object_foreach(ev, k, v)
    {
        fputs("<li>", fp);
        swift_an_html_esc(fp, k);
        fputs(": ", fp);
        if (!strcmp(k, "worst_spans") && json_is_array(v)) {
            size_t i;
            json_t *w;
            char b1[32];
            json_array_foreach(v, i, w)
                fprintf(fp,
                        "%sstep %g (%s)",
                        i ? ", " : "",
                        swift_an_jnum(w, "step"),
                        swift_an_html_ms(b1, sizeof(b1), swift_an_jnum(w, "dur_us")));
        } else if (json_is_number(v)) {
            double d = json_number_value(v);
            char b1[32];
            size_t kl = strlen(k); /* microseconds: "_us" at the end or "_us_per_..." */
            if ((kl > 3 && !strcmp(k + kl - 3, "_us")) || strstr(k, "_us_"))
                fputs(swift_an_html_ms(b1, sizeof(b1), d), fp);
            else
                fprintf(fp, "%.4g", d);
        } else if (json_is_string(v))
            swift_an_html_esc(fp, json_string_value(v));
        else {
            char *t = json_dumps(v, JSON_COMPACT);
            swift_an_html_esc(fp, t ? t : "");
            free(t);
        }
        fputs("</li>", fp);
    }
    fputs("</ul>\n", fp);
}

/* One card per bottleneck: severity, rule, process, summary, evidence, remedy, then the new
 * command and the patch (when the trace recorded them), each copyable. */
static void html_bottlenecks(FILE *fp, json_t *bs)
{
    fprintf(fp, "<h2>Bottlenecks (%zu)</h2>\n", json_array_size(bs));
    if (!json_array_size(bs)) {
        fputs("<p>No rule fired: nothing stands out.</p>\n", fp);
        return;
    }
    size_t i;
    json_t *b;
    json_array_foreach(bs, i, b)
    {
        const char *sev = swift_an_jstr(b, "severity");
        const char *cls = !strcmp(sev, "critical") ? "crit" : "warn";
        fprintf(
            fp, "<div class=\"card %s\"><div><span class=\"sev %s\">%s</span> <b>", cls, cls, sev);
        swift_an_html_esc(fp, swift_an_jstr(b, "rule"));
        fputs("</b> <i>", fp);
        swift_an_html_esc(fp, swift_an_jstr(b, "process"));
        fputs("</i></div>\n<p>", fp);
        swift_an_html_esc(fp, swift_an_jstr(b, "summary"));
        fputs("</p>\n", fp);
        html_evidence(fp, json_object_get(b, "evidence"));
        fputs("<p><b>remedy</b>: ", fp);
        swift_an_html_esc(fp, swift_an_jstr(b, "remedy"));
        fputs("</p>\n", fp);
        char id[32];
        if (json_is_string(json_object_get(b, "command"))) {
            snprintf(id, sizeof(id), "cmd%zu", i);
            fputs("<p>run instead:</p>\n", fp);
            html_copyable(fp, id, swift_an_jstr(b, "command"));
        }
        json_t *pt = json_object_get(b, "patch");
        if (json_is_string(json_object_get(pt, "diff"))) {
            snprintf(id, sizeof(id), "patch%zu", i);
            fputs("<p>patch of <code>", fp);
            swift_an_html_esc(fp, swift_an_jstr(pt, "file"));
            fputs("</code> (<code>--emit-patch | patch -p0</code>):</p>\n", fp);
            html_copyable(fp, id, swift_an_jstr(pt, "diff"));
        } else if (json_is_string(json_object_get(pt, "error"))) {
            fputs("<p>patch: ", fp);
            swift_an_html_esc(fp, swift_an_jstr(pt, "error"));
            fputs("</p>\n", fp);
        }
        fputs("</div>\n", fp);
    }
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
        swift_an_html_esc(fp, label);
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
            char b2[32];
            fprintf(fp,
                    "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    "<title>%s: %s (%.1f%%)</title></rect>\n",
                    x,
                    y,
                    w,
                    rowh - 6,
                    swift_an_html_palette[k % 9],
                    json_string_value(pn),
                    swift_an_html_ms(b2, sizeof(b2), us),
                    100 * fr);
            x += w;
        }
        char b1[32];
        fprintf(fp,
                "<text x=\"%d\" y=\"%.0f\">%s/step</text>\n",
                W - right + 6,
                y + 15,
                swift_an_html_ms(b1, sizeof(b1), swift_an_jnum(bd, "step_us")));
    }
    size_t k;
    json_t *pn;
    double lx = 0;
    json_array_foreach(json_object_get(json_object_get(p0, "breakdown"), "parts"), k, pn)
    {
        fprintf(fp,
                "<rect x=\"%.0f\" y=\"%zu\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%zu\">%s</text>\n",
                lx,
                np * rowh + 14,
                swift_an_html_palette[k % 9],
                lx + 13,
                np * rowh + 23,
                json_string_value(pn));
        lx += 115;
    }
    fputs("</svg>\n", fp);
}

static void html_kernels(FILE *fp, json_t *ps, int top)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *kr = json_object_get(p, "kernels");
        size_t n = json_array_size(kr);
        if (!n)
            continue; /* CPU runs have none: no heading either */
        swift_an_html_proc_head(fp, p, &head, "Top kernels");
        fputs("</p>", fp);
        swift_an_html_table(
            fp, 0, "kernel", "type", "count", "total", "mean per launch", (const char *)NULL);
        size_t *idx = swift_xmalloc(n * sizeof(*idx));
        size_t m = n < (size_t)top ? n : (size_t)top;
        swift_an_html_top_rows(kr, "sum_us", idx, n, m);
        for (size_t a = 0; a < m; a++) {
            json_t *row = json_array_get(kr, idx[a]);
            fputs("<tr>", fp);
            swift_an_html_text_cell(fp, swift_an_jstr(row, "name"), 1);
            swift_an_html_text_cell(fp, swift_an_jstr(row, "type"), 0);
            swift_an_html_fmt_cell(fp, 0, swift_an_jnum(row, "count"));
            swift_an_html_ms_cell(fp, swift_an_jnum(row, "sum_us"));
            swift_an_html_ms_cell(fp, swift_an_jnum(row, "launch_mean_us"));
            fputs("</tr>\n", fp);
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
        swift_an_html_proc_head(fp, p, &head, "Wall time by phase (processes without steps)");
        char b1[32];
        double wall = swift_an_jnum(ph, "wall_us"), x = 0, span = HTML_W - 10;
        fprintf(fp,
                ": no steps, wall %s</p>\n<svg width=\"%d\" height=\"24\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                swift_an_html_ms(b1, sizeof(b1), wall),
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
                    swift_an_html_palette[k % 9]);
            swift_an_html_esc(fp, swift_an_jstr(r, "name"));
            char b2[32];
            fprintf(fp,
                    ": %s (%.1f%% of wall)</title></rect>\n",
                    swift_an_html_ms(b2, sizeof(b2), swift_an_jnum(r, "us")),
                    100 * fr);
            x += w / span;
        }
        fputs("</svg>\n", fp);
        swift_an_html_table(
            fp, 0, "phase", "category", "count", "time", "share of wall", (const char *)NULL);
        json_array_foreach(rows, k, r)
        {
            fprintf(fp,
                    "<tr><td><span style=\"color:%s\">&#9632;</span> <code>",
                    swift_an_html_palette[k % 9]);
            swift_an_html_esc(fp, swift_an_jstr(r, "name"));
            fputs("</code></td>", fp);
            swift_an_html_text_cell(fp, swift_an_jstr(r, "cat"), 0);
            char b2[32];
            swift_an_html_fmt_cell(fp, 0, swift_an_jnum(r, "count"));
            swift_an_html_ms_cell(fp, swift_an_jnum(r, "us"));
            snprintf(b2, sizeof(b2), "%.2f%%", 100 * swift_an_jnum(r, "share"));
            swift_an_html_num_cell(fp, swift_an_jnum(r, "share"), b2, NULL);
            fputs("</tr>\n", fp);
        }
        double un = swift_an_jnum(ph, "untraced_us");
        fprintf(fp,
                "<tr><td>(no span)</td><td></td><td></td><td class=\"n\">%s</td>"
                "<td class=\"n\">%.2f%%</td></tr>\n</table>\n",
                swift_an_html_ms(b1, sizeof(b1), un),
                wall > 0 ? 100 * un / wall : 0);
        double sum = wall > 0 ? un / wall : 0;
        json_array_foreach(rows, k, r) sum += swift_an_jnum(r, "share");
        if (sum > 1.0001)
            fputs("<p>Spans of threads running in parallel overlap: the shares add up past "
                  "100%.</p>\n",
                  fp);
    }
}

/* The per-op table of --profile steps, per process: bars for the share of the step and the
 * fraction of the measured peak; sortable by any column. */
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
        swift_an_html_proc_head(fp, p, &head, "Per-op time of profiled steps");
        char b0[32];
        fprintf(
            fp,
            ": %.0f profiled step%s, mean step %s, by self time (click a heading to sort)</p>\n",
            swift_an_jnum(ops, "steps"),
            swift_an_jnum(ops, "steps") == 1 ? "" : "s",
            swift_an_html_ms(b0, sizeof(b0), swift_an_jnum(ops, "step_us")));
        swift_an_html_table(fp,
                            1,
                            "op",
                            "phase",
                            "self per step",
                            "total per step",
                            "share of step",
                            "calls per step",
                            "GFLOP/s",
                            "of peak",
                            (const char *)NULL);
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(ops, "rows"), k, r)
        {
            fputs("<tr>", fp);
            swift_an_html_text_cell(fp, swift_an_jstr(r, "name"), 1);
            swift_an_html_text_cell(fp, swift_an_jstr(r, "phase"), 0);
            swift_an_html_ms_cell(fp, swift_an_jnum(r, "self_us_per_step"));
            swift_an_html_ms_cell(fp, swift_an_jnum(r, "total_us_per_step"));
            swift_an_html_bar_cell(fp, swift_an_jnum(r, "share"), "#4e79a7");
            swift_an_html_fmt_cell(fp, -1, swift_an_jnum(r, "calls_per_step"));
            swift_an_html_fmt_cell(fp, 2, swift_an_jnum(r, "gflops"));
            swift_an_html_bar_cell(fp, swift_an_jnum(r, "peak_fraction"), "#59a14f");
            fputs("</tr>\n", fp);
        }
        fputs("</table>\n", fp);
    }
}

/* The op roofline of Kineto traces with shapes (oproof.c): per op and input shape, device time,
 * share of the steps, achieved TFLOP/s and TB/s, and the fraction of the device's roofline. */
static void html_op_roofline(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *orf = json_object_get(p, "op_roofline");
        if (!json_array_size(json_object_get(orf, "rows")))
            continue;
        swift_an_html_proc_head(fp, p, &head, "Op roofline (per op and input shape)");
        fputs(": device ", fp);
        swift_an_html_esc(fp,
                          json_is_string(json_object_get(orf, "device"))
                              ? swift_an_jstr(orf, "device")
                              : "unknown (no roofline fraction)");
        json_t *pk = json_object_get(orf, "peak");
        if (json_is_object(pk))
            fprintf(fp,
                    ", peak %.1f TFLOP/s (16-bit), %.1f TFLOP/s (fp32), %.0f GB/s",
                    swift_an_jnum(pk, "tflops_16bit"),
                    swift_an_jnum(pk, "tflops_fp32"),
                    1e3 * swift_an_jnum(pk, "tbps"));
        fputs(" (click a heading to sort)</p>\n", fp);
        swift_an_html_table(fp,
                            1,
                            "op",
                            "class",
                            "input dims",
                            "calls",
                            "device time",
                            "share",
                            "TFLOP/s",
                            "GB/s",
                            "FLOP/byte",
                            "bound",
                            "of roofline",
                            "lost",
                            (const char *)NULL);
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(orf, "rows"), k, r)
        {
            fputs("<tr>", fp);
            swift_an_html_text_cell(fp, swift_an_jstr(r, "name"), 1);
            swift_an_html_text_cell(fp, swift_an_jstr(r, "class"), 0);
            char *dims = json_dumps(json_object_get(r, "input_dims"), JSON_COMPACT);
            swift_an_html_text_cell(fp, dims ? dims : "", 1);
            free(dims);
            swift_an_html_fmt_cell(fp, 0, swift_an_jnum(r, "calls"));
            swift_an_html_ms_cell(fp, swift_an_jnum(r, "device_us"));
            swift_an_html_bar_cell(fp, swift_an_jnum(r, "share"), "#4e79a7");
            swift_an_html_fmt_cell(fp, 2, swift_an_jnum(r, "tflops"));
            swift_an_html_fmt_cell(fp, 0, 1e3 * swift_an_jnum(r, "tbps"));
            swift_an_html_fmt_cell(fp, 1, swift_an_jnum(r, "intensity"));
            swift_an_html_text_cell(fp, swift_an_jstr(r, "bound"), 0);
            swift_an_html_bar_cell(fp, swift_an_jnum(r, "roofline_fraction"), "#59a14f");
            swift_an_html_ms_cell(fp, swift_an_jnum(r, "lost_us"));
            fputs("</tr>\n", fp);
        }
        fputs("</table>\n", fp);
    }
}

static void html_ops(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *ops = json_object_get(p, "top_ops");
        if (!json_array_size(ops) || json_is_object(json_object_get(p, "ops")))
            continue; /* the per-op table of --profile steps says more */
        swift_an_html_proc_head(fp, p, &head, "Top host operations");
        fputs("</p>", fp);
        swift_an_html_table(
            fp, 0, "operation", "category", "count", "total (inclusive)", (const char *)NULL);
        size_t a;
        json_t *row;
        json_array_foreach(ops, a, row)
        {
            fputs("<tr>", fp);
            swift_an_html_text_cell(fp, swift_an_jstr(row, "name"), 1);
            swift_an_html_text_cell(fp, swift_an_jstr(row, "cat"), 0);
            swift_an_html_fmt_cell(fp, 0, swift_an_jnum(row, "count"));
            swift_an_html_ms_cell(fp, swift_an_jnum(row, "sum_us"));
            fputs("</tr>\n", fp);
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
        swift_an_html_esc(fp, swift_an_jstr(p, "path"));
        fputs(": ", fp);
        swift_an_html_esc(fp, dmg);
        fputs("</p>\n", fp);
    }
}

/* Collectives matched across ranks: skew vs transfer per rank (collectives.c). */
static void html_collectives(FILE *fp, json_t *cs)
{
    if (!json_array_size(cs))
        return;
    size_t i;
    json_t *c;
    double mx = 0;
    json_array_foreach(cs, i, c)
    {
        double v = swift_an_jnum(c, "comm_us");
        mx = isfinite(v) && v > mx ? v : mx;
    }
    fputs("<h2>Collectives across ranks</h2>\n<p>Per rank, time in matched collectives: "
          "<span class=\"bar\" style=\"width:10px;background:#e15759\"></span>skew (waiting for "
          "the last rank) and <span class=\"bar\" style=\"width:10px;background:#4e79a7\"></span>"
          "transfer, to one scale.</p>\n<table><tr><th>rank</th><th>skew | transfer</th>"
          "<th>matched</th><th>time</th><th>skew (waiting for the last rank)</th><th>transfer</th>"
          "<th>algbw</th><th>busbw</th><th>arrived last</th><th>others waited</th></tr>\n",
          fp);
    json_array_foreach(cs, i, c)
    {
        double ws = mx > 0 ? 200 * swift_an_jnum(c, "skew_us") / mx : 0;
        double wt = mx > 0 ? 200 * swift_an_jnum(c, "transfer_us") / mx : 0;
        fprintf(fp,
                "<tr><td class=\"n\">%g</td><td><span class=\"bar sk\" style=\"width:%.1fpx;"
                "margin:0;background:#e15759\"></span><span class=\"bar tr\" style=\"width:%.1fpx;"
                "margin:0;background:#4e79a7\"></span></td>",
                swift_an_jnum(c, "rank"),
                isfinite(ws) ? ws : 0,
                isfinite(wt) ? wt : 0);
        char t[32], sk[32], tr[32], cw[32];
        double alg = swift_an_jnum(c, "algbw_gbps"), bus = swift_an_jnum(c, "busbw_gbps");
        fprintf(fp,
                "<td class=\"n\">%g</td><td class=\"n\">%s</td>"
                "<td class=\"n\">%s (%.1f%%)</td><td class=\"n\">%s</td>",
                swift_an_jnum(c, "matched"),
                swift_an_html_ms(t, sizeof(t), swift_an_jnum(c, "comm_us")),
                swift_an_html_ms(sk, sizeof(sk), swift_an_jnum(c, "skew_us")),
                swift_an_jnum(c, "skew_pct"),
                swift_an_html_ms(tr, sizeof(tr), swift_an_jnum(c, "transfer_us")));
        char ab[32], bb[32];
        fprintf(fp,
                isfinite(alg) ? "<td class=\"n\">%s</td>" : "<td>-</td>",
                swift_an_bw_text(ab, sizeof(ab), alg));
        fprintf(fp,
                isfinite(bus) ? "<td class=\"n\">%s</td>" : "<td>-</td>",
                swift_an_bw_text(bb, sizeof(bb), bus));
        fprintf(fp,
                "<td class=\"n\">%g</td><td class=\"n\">%s</td></tr>\n",
                swift_an_jnum(c, "arrived_last"),
                swift_an_html_ms(cw, sizeof(cw), swift_an_jnum(c, "skew_caused_us")));
    }
    fputs("</table>\n", fp);
}

int swift_an_print_html(FILE *fp, json_t *r, int top)
{
    json_t *ps = json_object_get(r, "processes"), *bs = json_object_get(r, "bottlenecks");
    swift_an_html_page_head(fp, "swift-trace-analyze report", NULL);
    html_damage(fp, ps);
    html_bottlenecks(fp, bs);
    html_collectives(fp, json_object_get(r, "collectives"));
    swift_an_html_step_chart(fp, ps);
    html_breakdown(fp, ps);
    html_phases(fp, ps);
    swift_an_html_rl(fp, ps);
    swift_an_html_vl(fp, ps);
    swift_an_html_infer(fp, ps);
    size_t i, nstep = 0;
    json_t *p;
    json_array_foreach(ps, i, p) nstep += swift_an_jnum(p, "steps") > 0;
    if (nstep)
        fputs("<h2>Worst steps per rank</h2>\n", fp);
    json_array_foreach(ps, i, p) swift_an_html_worst_steps(fp, p, top);
    size_t nlane = 0;
    json_array_foreach(ps, i, p) nlane +=
        json_array_size(json_object_get(json_object_get(p, "worst_step"), "lanes")) > 0;
    if (nlane)
        fputs("<h2>Longest step per thread and stream</h2>\n", fp);
    json_array_foreach(ps, i, p) swift_an_html_lanes(fp, p);
    swift_an_html_memory(fp, ps);
    html_op_table(fp, ps);
    html_op_roofline(fp, ps);
    html_kernels(fp, ps, top);
    html_ops(fp, ps);
    return swift_an_html_page_end(fp);
}
