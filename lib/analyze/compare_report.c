/*
 * analyze/compare_report — the compare document (compare.h) as text, Markdown, JSON or one
 * self-contained HTML page (control and test side by side, inline SVG bars, no network).
 */
#include "lib/analyze/compare.h"
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* "+1.50 ms" / "-3 us": a signed duration. */
static const char *sdur(char *b, size_t n, double us)
{
    if (!isfinite(us))
        return swift_an_dur(b, n, us);
    char t[24];
    swift_an_dur(t, sizeof(t), fabs(us));
    snprintf(b, n, "%s%s", us < 0 ? "-" : us > 0 ? "+" : "", t);
    return b;
}

static const char *spct(char *b, size_t n, double p)
{
    if (!isfinite(p))
        snprintf(b, n, "-");
    else if (p >= 1000) /* from next to nothing: a factor reads better */
        snprintf(b, n, "x%.1f", 1 + p / 100);
    else
        snprintf(b, n, "%+.2f%%", p);
    return b;
}

static const char *proc_names(json_t *side, char *b, size_t n)
{
    json_t *ps = json_object_get(side, "processes"), *p;
    size_t i, off = 0;
    b[0] = 0;
    json_array_foreach(ps, i, p)
    {
        int w = snprintf(b + off, n - off, "%s%s", i ? ", " : "", json_string_value(p));
        if (w < 0 || (size_t)w >= n - off)
            break;
        off += (size_t)w;
    }
    return b;
}

static const char *its_text(json_t *its, char *b, size_t n)
{
    size_t k = json_array_size(its);
    if (!json_is_array(its))
        snprintf(b, n, "whole trace");
    else if (k == 1)
        snprintf(b, n, "step %lld", (long long)json_integer_value(json_array_get(its, 0)));
    else
        snprintf(b,
                 n,
                 "steps %lld-%lld (%zu)",
                 (long long)json_integer_value(json_array_get(its, 0)),
                 (long long)json_integer_value(json_array_get(its, k - 1)),
                 k);
    return b;
}

/* ---------- text and Markdown ---------- */

static void print_head(FILE *fp, json_t *d, int md)
{
    char b[512];
    static const char *const key[2] = {"control", "test"};
    if (md)
        fprintf(
            fp,
            "# swift-trace-analyze: compare\n\n| | trace | processes compared |\n|---|---|---|\n");
    else
        fprintf(fp, "swift-trace-analyze %s: compare\n", swift_an_jstr(d, "version"));
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(d, key[i]);
        if (md)
            fprintf(fp,
                    "| %s | `%s` | %s |\n",
                    key[i],
                    swift_an_jstr(s, "path"),
                    proc_names(s, b, sizeof(b)));
        else
            fprintf(fp,
                    "  %-8s %s (%s)\n",
                    i ? "test:" : "control:",
                    swift_an_jstr(s, "path"),
                    proc_names(s, b, sizeof(b)));
    }
}

/* One "part control test delta pct" line (text) or table row (Markdown). */
static void delta_line(FILE *fp, json_t *r, const char *key, int md)
{
    char a[32], b[32], c[32], p[32];
    swift_an_dur(a, sizeof(a), swift_an_jnum(r, "control_us"));
    swift_an_dur(b, sizeof(b), swift_an_jnum(r, "test_us"));
    sdur(c, sizeof(c), swift_an_jnum(r, "delta_us"));
    spct(p, sizeof(p), swift_an_jnum(r, "delta_pct"));
    if (md)
        fprintf(fp, "| %s | %s | %s | %s | %s |\n", swift_an_jstr(r, key), a, b, c, p);
    else
        fprintf(fp, "    %-14s %12s %12s %12s %9s\n", swift_an_jstr(r, key), a, b, c, p);
}

static void print_steps(FILE *fp, json_t *d, int md)
{
    json_t *st = json_object_get(d, "step_time"), *c = json_object_get(st, "control"),
           *t = json_object_get(st, "test");
    char a[32], b[32], e[32], p[32];
    fprintf(fp, md ? "\n## Step time\n\n" : "\nStep time");
    if (!json_is_object(c) && !json_is_object(t)) {
        fprintf(fp, md ? "Neither trace has steps.\n" : ": neither trace has steps\n");
        return;
    }
    swift_an_dur(a, sizeof(a), swift_an_jnum(c, "mean_us"));
    swift_an_dur(b, sizeof(b), swift_an_jnum(t, "mean_us"));
    fprintf(fp,
            md ? "Mean step %s → %s, %s (%s); %.0f and %.0f steps.\n\n"
               : " (mean): %s -> %s, %s (%s); %.0f and %.0f steps\n",
            a,
            b,
            sdur(e, sizeof(e), swift_an_jnum(st, "delta_us")),
            spct(p, sizeof(p), swift_an_jnum(st, "delta_pct")),
            json_is_object(c) ? swift_an_jnum(c, "steps") : 0.0,
            json_is_object(t) ? swift_an_jnum(t, "steps") : 0.0);
    fprintf(fp,
            md ? "| %s | %s | %s | %s | %s |\n|---|--:|--:|--:|--:|\n"
               : "    %-14s %12s %12s %12s %9s\n",
            "part",
            "control",
            "test",
            "delta",
            "%");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(d, "breakdown"), i, r) delta_line(fp, r, "part", md);
    json_t *tp = json_object_get(d, "temporal");
    if (json_is_array(tp)) {
        fprintf(fp,
                md ? "\nHTA temporal breakdown (GPU):\n\n| part | control | test | delta | %% |\n"
                     "|---|--:|--:|--:|--:|\n"
                   : "  HTA temporal breakdown (GPU):\n");
        json_array_foreach(tp, i, r) delta_line(fp, r, "part", md);
    }
    json_t *gu = json_object_get(d, "gpu_utilization");
    if (json_is_object(gu)) {
        char u[2][16]; /* a side without GPU: "-", as the roofline rows */
        for (int k = 0; k < 2; k++) {
            double v = swift_an_jnum(gu, k ? "test" : "control");
            snprintf(u[k], sizeof(u[k]), isfinite(v) ? "%.2f%%" : "-", 100 * v);
        }
        fprintf(
            fp, md ? "\nGPU utilization: %s → %s\n" : "  GPU utilization: %s -> %s\n", u[0], u[1]);
    }
}

static void print_bottlenecks(FILE *fp, json_t *d, int md)
{
    json_t *bs = json_object_get(d, "bottlenecks");
    static const char *const lists[] = {"new", "resolved", "persisting"};
    fprintf(fp,
            md ? "\n## Bottlenecks\n\n%zu new, %zu resolved, %zu persisting\n\n"
               : "\nBottlenecks: %zu new, %zu resolved, %zu persisting\n",
            json_array_size(json_object_get(bs, "new")),
            json_array_size(json_object_get(bs, "resolved")),
            json_array_size(json_object_get(bs, "persisting")));
    for (int l = 0; l < 3; l++) {
        size_t i;
        json_t *b;
        json_array_foreach(json_object_get(bs, lists[l]), i, b)
        {
            const char *cs = swift_an_jstr(b, "control_severity"),
                       *ts = swift_an_jstr(b, "test_severity");
            fprintf(fp,
                    md ? "- **%s** %s (%s → %s): %s\n" : "  %-10s %s (%s -> %s): %s\n",
                    lists[l],
                    swift_an_jstr(b, "rule"),
                    *cs ? cs : "none",
                    *ts ? ts : "none",
                    swift_an_jstr(b, "summary"));
        }
    }
}

static void print_ops(FILE *fp, json_t *d, int md, int top)
{
    json_t *ops = json_object_get(d, "ops"), *cn = json_object_get(ops, "counts");
    char a[64], b[64], n[72];
    fprintf(fp,
            md ? "\n## Ops and kernels (HTA TraceDiff)\n\ncontrol %s, test %s: %.0f names, %.0f "
                 "added, %.0f deleted, %.0f increased, %.0f decreased, %.0f unchanged\n\n"
               : "\nOps and kernels (HTA TraceDiff; control %s, test %s): %.0f names, %.0f added, "
                 "%.0f deleted, %.0f increased, %.0f decreased, %.0f unchanged\n",
            its_text(json_object_get(ops, "control_iterations"), a, sizeof(a)),
            its_text(json_object_get(ops, "test_iterations"), b, sizeof(b)),
            swift_an_jnum(ops, "n"),
            swift_an_jnum(cn, "added"),
            swift_an_jnum(cn, "deleted"),
            swift_an_jnum(cn, "increased"),
            swift_an_jnum(cn, "decreased"),
            swift_an_jnum(cn, "unchanged"));
    json_t *rows = json_object_get(ops, "rows"), *r;
    if (!json_array_size(rows))
        return;
    fprintf(fp,
            md ? "| change | calls | total time | delta | name |\n|---|--:|--:|--:|---|\n"
               : "  the %zu largest changes in total time:\n    %-9s %15s %24s %11s  %s\n",
            json_array_size(rows) < (size_t)top ? json_array_size(rows) : (size_t)top,
            "change",
            "calls",
            "total time",
            "delta",
            "name");
    size_t i;
    json_array_foreach(rows, i, r)
    {
        if (i >= (size_t)top)
            break;
        char calls[48], tt[64], c1[32], c2[32], dd[32];
        snprintf(calls,
                 sizeof(calls),
                 "%.0f -> %.0f",
                 swift_an_jnum(r, "control_counts"),
                 swift_an_jnum(r, "test_counts"));
        snprintf(tt,
                 sizeof(tt),
                 "%s -> %s",
                 swift_an_dur(c1, sizeof(c1), swift_an_jnum(r, "control_total_duration")),
                 swift_an_dur(c2, sizeof(c2), swift_an_jnum(r, "test_total_duration")));
        sdur(dd, sizeof(dd), swift_an_jnum(r, "diff_duration"));
        swift_an_trunc_name(n, md ? sizeof(n) : 60, swift_an_jstr(r, "name"));
        if (md) {
            for (char *q = n; *q; q++)
                if (*q == '|')
                    *q = '/';
            fprintf(
                fp, "| %s | %s | %s | %s | `%s` |\n", swift_an_jstr(r, "change"), calls, tt, dd, n);
        } else {
            fprintf(
                fp, "    %-9s %15s %24s %11s  %s\n", swift_an_jstr(r, "change"), calls, tt, dd, n);
        }
    }
}

static void print_gate(FILE *fp, json_t *d, int md)
{
    json_t *g = json_object_get(d, "regression");
    if (!json_is_object(g))
        return;
    json_t *rg = json_object_get(g, "regressed");
    char p[32];
    fprintf(fp,
            md ? "\n**Regression gate** (mean step time +%g%%): %s (%s)\n"
               : "\nRegression gate (mean step time +%g%%): %s (%s)\n",
            swift_an_jnum(g, "threshold_pct"),
            json_is_true(rg)    ? "FAILED"
            : json_is_false(rg) ? "passed"
                                : "no step time",
            spct(p, sizeof(p), swift_an_jnum(json_object_get(d, "step_time"), "delta_pct")));
}

static int print_text(FILE *fp, json_t *d, int md, int top)
{
    print_head(fp, d, md);
    print_steps(fp, d, md);
    print_bottlenecks(fp, d, md);
    print_ops(fp, d, md, top);
    swift_an_compare_print_mem(fp, d, md, top);
    print_gate(fp, d, md);
    return ferror(fp) ? -1 : 0;
}

/* ---------- HTML ---------- */

static const char cmp_css[] =
    ".up{color:#b00}.down{color:#080}tr.ch-added td{background:#fff3e0}"
    "tr.ch-deleted td{background:#e8f0fa}tr.ch-increased td{background:#fdecea}"
    "tr.ch-decreased td{background:#e9f6ec}.card.new{border-left-color:#b00}"
    ".card.resolved{border-left-color:#080}.card.persisting{border-left-color:#999}"
    ".sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}"
    "td code{word-break:break-all}";

/* "up" for a larger time (slower), "down" for a smaller one, "" otherwise. */
static const char *updown(double d)
{
    return d > 0 ? "up" : d < 0 ? "down" : "";
}

/* "+1.500 ms": a signed duration in the page's units (ms, s from 10 s). */
static const char *sms(char *b, size_t n, double us)
{
    if (!isfinite(us))
        return swift_an_html_ms(b, n, us);
    char t[24];
    swift_an_html_ms(t, sizeof(t), fabs(us));
    snprintf(b, n, "%s%s", us < 0 ? "-" : us > 0 ? "+" : "", t);
    return b;
}

/* A signed duration cell (coloured by sign), sortable. */
static void delta_cell(FILE *fp, double us)
{
    char b[32];
    swift_an_html_num_cell(fp, us, sms(b, sizeof(b), us), updown(us));
}

/* One side's bar of the paired breakdown: parts stacked from x = 80, scaled by sx px/µs. */
static void side_bar(FILE *fp, json_t *rows, const char *key, const char *side, double y, double sx)
{
    size_t i;
    json_t *r;
    double x = 80, tot = 0;
    json_array_foreach(rows, i, r)
    {
        double v = swift_an_jnum(r, key);
        tot += isfinite(v) ? v : 0;
    }
    fprintf(fp, "<text x=\"0\" y=\"%.0f\">%s</text>\n", y + 16, side);
    json_array_foreach(rows, i, r)
    {
        double v = swift_an_jnum(r, key);
        if (!(v > 0))
            continue;
        char b[32];
        fprintf(fp,
                "<rect class=\"cb\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"22\" "
                "fill=\"%s\"><title>%s ",
                x,
                y,
                v * sx,
                swift_an_html_palette[i % 9],
                side);
        swift_an_html_esc(fp, swift_an_jstr(r, "part"));
        fprintf(fp,
                ": %s (%.1f%%)</title></rect>\n",
                swift_an_html_ms(b, sizeof(b), v),
                tot > 0 ? 100 * v / tot : 0);
        x += v * sx;
    }
    char b[32];
    fprintf(fp,
            "<text x=\"%.1f\" y=\"%.0f\">%s/step</text>\n",
            x + 6,
            y + 16,
            swift_an_html_ms(b, sizeof(b), tot));
}

/* The mean step of both runs as paired bars stacked by part (same scale), each part's delta in
 * the legend; then the table. */
static void html_breakdown(FILE *fp, json_t *rows)
{
    size_t i;
    json_t *r;
    double ct = 0, tt = 0;
    json_array_foreach(rows, i, r)
    {
        double a = swift_an_jnum(r, "control_us"), b = swift_an_jnum(r, "test_us");
        ct += isfinite(a) ? a : 0;
        tt += isfinite(b) ? b : 0;
    }
    double mx = fmax(ct, tt), sx = mx > 0 ? 780 / mx : 0;
    size_t nleg = json_array_size(rows);
    fprintf(fp,
            "<h3>Mean step by part</h3>\n<svg class=\"cmp\" width=\"1000\" height=\"%zu\">\n",
            80 + 18 * ((nleg + 3) / 4));
    side_bar(fp, rows, "control_us", "control", 2, sx);
    side_bar(fp, rows, "test_us", "test", 30, sx);
    json_array_foreach(rows, i, r)
    {
        double lx = 80 + (double)(i % 4) * 225, ly = 74 + (double)(i / 4) * 18;
        double d = swift_an_jnum(r, "delta_us");
        char b[32], p[32];
        fprintf(fp,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">",
                lx,
                ly - 9,
                swift_an_html_palette[i % 9],
                lx + 13,
                ly);
        swift_an_html_esc(fp, swift_an_jstr(r, "part"));
        fprintf(fp,
                " <tspan class=\"%s\" fill=\"%s\">%s (%s)</tspan></text>\n",
                updown(d),
                d > 0   ? "#b00"
                : d < 0 ? "#080"
                        : "#444",
                sms(b, sizeof(b), d),
                spct(p, sizeof(p), swift_an_jnum(r, "delta_pct")));
    }
    fputs("</svg>\n", fp);
}

/* Rows of {part, control_us, test_us, delta_us, delta_pct}: a sortable table. */
static void html_delta_table(FILE *fp, json_t *rows, const char *title)
{
    if (title)
        fprintf(fp, "<h3>%s</h3>\n", title);
    swift_an_html_table(fp, 1, "part", "control", "test", "delta", "%", (const char *)NULL);
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        char p[32];
        double dp = swift_an_jnum(r, "delta_pct");
        fputs("<tr>", fp);
        swift_an_html_text_cell(fp, swift_an_jstr(r, "part"), 0);
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "control_us"));
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "test_us"));
        delta_cell(fp, swift_an_jnum(r, "delta_us"));
        swift_an_html_num_cell(fp, dp, spct(p, sizeof(p), dp), updown(dp));
        fputs("</tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

static void html_head(FILE *fp, json_t *d)
{
    static const char *const key[2] = {"control", "test"};
    char b[512];
    swift_an_html_table(
        fp, 0, "", "trace", "processes compared", "steps", "mean step", (const char *)NULL);
    json_t *st = json_object_get(d, "step_time");
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(d, key[i]), *t = json_object_get(st, key[i]);
        fprintf(fp, "<tr><th>%s</th>", key[i]);
        swift_an_html_text_cell(fp, swift_an_jstr(s, "path"), 1);
        swift_an_html_text_cell(fp, proc_names(s, b, sizeof(b)), 0);
        swift_an_html_fmt_cell(fp, 0, json_is_object(t) ? swift_an_jnum(t, "steps") : 0.0);
        swift_an_html_ms_cell(fp, swift_an_jnum(t, "mean_us"));
        fputs("</tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

/* A card per bottleneck: new (red), resolved (green), persisting (grey), with the severity on
 * each side and the summary. */
static void html_bottlenecks(FILE *fp, json_t *d)
{
    json_t *bs = json_object_get(d, "bottlenecks");
    static const char *const lists[] = {"new", "resolved", "persisting"};
    size_t nrow = 0;
    fputs("<h2>Bottlenecks</h2>\n", fp);
    for (int l = 0; l < 3; l++) {
        size_t i;
        json_t *b;
        json_array_foreach(json_object_get(bs, lists[l]), i, b)
        {
            const char *cs = swift_an_jstr(b, "control_severity"),
                       *ts = swift_an_jstr(b, "test_severity");
            fprintf(fp,
                    "<div class=\"card %s\"><div><span class=\"sev\">%s</span> <b>",
                    lists[l],
                    lists[l]);
            swift_an_html_esc(fp, swift_an_jstr(b, "rule"));
            fputs("</b> <i>", fp);
            swift_an_html_esc(fp, swift_an_jstr(b, "process"));
            fprintf(fp,
                    "</i> control: <span class=\"%s\">%s</span>, test: <span class=\"%s\">%s"
                    "</span></div>\n<p>",
                    !strcmp(cs, "critical") ? "crit"
                    : *cs                   ? "warn"
                                            : "",
                    *cs ? cs : "-",
                    !strcmp(ts, "critical") ? "crit"
                    : *ts                   ? "warn"
                                            : "",
                    *ts ? ts : "-");
            swift_an_html_esc(fp, swift_an_jstr(b, "summary"));
            fputs("</p></div>\n", fp);
            nrow++;
        }
    }
    if (!nrow)
        fputs("<p>None above the thresholds in either run.</p>\n", fp);
}

static void html_ops(FILE *fp, json_t *d, int top)
{
    json_t *ops = json_object_get(d, "ops"), *cn = json_object_get(ops, "counts");
    json_t *rows = json_object_get(ops, "rows");
    size_t n = json_array_size(rows), m = top < 30 ? 30 : (size_t)top;
    m = n < m ? n : m;
    char a[64], b[64];
    fprintf(fp,
            "<h2>Ops and kernels (HTA TraceDiff)</h2>\n<p>control %s, test %s: %.0f names:"
            "<span class=\"sw\" style=\"background:#fff3e0\"></span>%.0f added"
            "<span class=\"sw\" style=\"background:#e8f0fa\"></span>%.0f deleted"
            "<span class=\"sw\" style=\"background:#fdecea\"></span>%.0f increased"
            "<span class=\"sw\" style=\"background:#e9f6ec\"></span>%.0f decreased, %.0f "
            "unchanged. The %zu largest changes in total time (click a heading to sort):</p>\n",
            its_text(json_object_get(ops, "control_iterations"), a, sizeof(a)),
            its_text(json_object_get(ops, "test_iterations"), b, sizeof(b)),
            swift_an_jnum(ops, "n"),
            swift_an_jnum(cn, "added"),
            swift_an_jnum(cn, "deleted"),
            swift_an_jnum(cn, "increased"),
            swift_an_jnum(cn, "decreased"),
            swift_an_jnum(cn, "unchanged"),
            m);
    swift_an_html_table(fp,
                        1,
                        "change",
                        "name",
                        "calls control",
                        "calls test",
                        "total control",
                        "total test",
                        "delta",
                        (const char *)NULL);
    for (size_t i = 0; i < m; i++) {
        json_t *r = json_array_get(rows, i);
        char nm[200];
        fprintf(fp, "<tr class=\"ch-%s\">", swift_an_jstr(r, "change"));
        swift_an_html_text_cell(fp, swift_an_jstr(r, "change"), 0);
        swift_an_trunc_name(nm, sizeof(nm), swift_an_jstr(r, "name"));
        swift_an_html_text_cell(fp, nm, 1);
        swift_an_html_fmt_cell(fp, 0, swift_an_jnum(r, "control_counts"));
        swift_an_html_fmt_cell(fp, 0, swift_an_jnum(r, "test_counts"));
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "control_total_duration"));
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "test_total_duration"));
        delta_cell(fp, swift_an_jnum(r, "diff_duration"));
        fputs("</tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

/* The op roofline rows of both runs matched by op and input dims (compare_mem.c). */
static void html_roofline(FILE *fp, json_t *d)
{
    json_t *rows = json_object_get(d, "roofline");
    if (!json_array_size(rows))
        return;
    fputs("<h2>Roofline of the top ops</h2>\n<p>Per op and input shape, device time and the "
          "fraction of the device's roofline in each run (click a heading to sort):</p>\n",
          fp);
    swift_an_html_table(fp,
                        1,
                        "op",
                        "class",
                        "input dims",
                        "device control",
                        "device test",
                        "delta",
                        "TFLOP/s control",
                        "TFLOP/s test",
                        "of roofline control",
                        "of roofline test",
                        (const char *)NULL);
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        fputs("<tr>", fp);
        swift_an_html_text_cell(fp, swift_an_jstr(r, "name"), 1);
        swift_an_html_text_cell(fp, swift_an_jstr(r, "class"), 0);
        char *dims = json_dumps(json_object_get(r, "input_dims"), JSON_COMPACT | JSON_ENCODE_ANY);
        swift_an_html_text_cell(fp, dims ? dims : "", 1);
        free(dims);
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "control_device_us"));
        swift_an_html_ms_cell(fp, swift_an_jnum(r, "test_device_us"));
        delta_cell(fp, swift_an_jnum(r, "delta_us"));
        swift_an_html_fmt_cell(fp, 2, swift_an_jnum(r, "control_tflops"));
        swift_an_html_fmt_cell(fp, 2, swift_an_jnum(r, "test_tflops"));
        swift_an_html_bar_cell(fp, swift_an_jnum(r, "control_fraction"), "#bab0ac");
        swift_an_html_bar_cell(fp, swift_an_jnum(r, "test_fraction"), "#59a14f");
        fputs("</tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

static void html_memory(FILE *fp, json_t *d)
{
    json_t *m = json_object_get(d, "memory");
    if (!json_is_object(m))
        return;
    double c = swift_an_jnum(m, "control_peak_bytes"), t = swift_an_jnum(m, "test_peak_bytes");
    double dp = swift_an_jnum(m, "delta_pct");
    char p[32], cb[32] = "-", tb[32] = "-";
    if (isfinite(c))
        snprintf(cb, sizeof(cb), "%.2f GiB", c / 1073741824.0);
    if (isfinite(t))
        snprintf(tb, sizeof(tb), "%.2f GiB", t / 1073741824.0);
    fprintf(fp,
            "<h2>Device memory</h2>\n<p>peak %s in control, %s in test <span class=\"%s\">%s"
            "</span></p>\n",
            cb,
            tb,
            updown(dp),
            isfinite(dp) ? spct(p, sizeof(p), dp) : "");
}

static int print_html(FILE *fp, json_t *d, int top)
{
    swift_an_html_page_head(fp, "swift-trace-analyze: compare", cmp_css);
    html_head(fp, d);
    json_t *st = json_object_get(d, "step_time"), *g = json_object_get(d, "regression");
    char e[32], p[32];
    double dp = swift_an_jnum(st, "delta_pct");
    fprintf(fp,
            "<h2>Step time</h2>\n<p>mean step <b class=\"%s\">%s (%s)</b>",
            updown(dp),
            sms(e, sizeof(e), swift_an_jnum(st, "delta_us")),
            spct(p, sizeof(p), dp));
    if (json_is_object(g))
        fprintf(fp,
                "; regression gate +%g%%: <b>%s</b>",
                swift_an_jnum(g, "threshold_pct"),
                json_is_true(json_object_get(g, "regressed")) ? "FAILED" : "passed");
    fputs("</p>\n", fp);
    json_t *bd = json_object_get(d, "breakdown");
    if (json_array_size(bd)) {
        html_breakdown(fp, bd);
        html_delta_table(fp, bd, NULL);
    }
    if (json_is_array(json_object_get(d, "temporal")))
        html_delta_table(fp, json_object_get(d, "temporal"), "HTA temporal breakdown (GPU)");
    html_bottlenecks(fp, d);
    html_ops(fp, d, top);
    html_roofline(fp, d);
    html_memory(fp, d);
    return swift_an_html_page_end(fp);
}

int swift_an_compare_print(FILE *fp, json_t *doc, int format, int top)
{
    switch (format) {
    case SWIFT_FMT_JSON:
        if (json_dumpf(doc, fp, JSON_COMPACT | JSON_REAL_PRECISION(15)) < 0)
            return -1;
        fputc('\n', fp);
        return ferror(fp) ? -1 : 0;
    case SWIFT_FMT_MD:
        return print_text(fp, doc, 1, top);
    case SWIFT_FMT_HTML:
        return print_html(fp, doc, top);
    default:
        return print_text(fp, doc, 0, top);
    }
}
