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

static void esc(FILE *fp, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", fp);
        else if (*s == '>')
            fputs("&gt;", fp);
        else if (*s == '&')
            fputs("&amp;", fp);
        else if (*s == '"')
            fputs("&quot;", fp);
        else
            fputc(*s, fp);
    }
}

/* Two bars, control above test, scaled to mx. */
static void bars(FILE *fp, double a, double b, double mx)
{
    double wa = isfinite(a) && mx > 0 ? 160 * a / mx : 0,
           wb = isfinite(b) && mx > 0 ? 160 * b / mx : 0;
    fprintf(fp,
            "<svg width=\"160\" height=\"14\"><rect x=\"0\" y=\"0\" width=\"%.1f\" height=\"6\" "
            "fill=\"#bab0ac\"/><rect x=\"0\" y=\"7\" width=\"%.1f\" height=\"6\" "
            "fill=\"#4e79a7\"/></svg>",
            wa < 0 ? 0 : wa,
            wb < 0 ? 0 : wb);
}

static void html_delta_table(FILE *fp, json_t *rows, const char *title)
{
    double mx = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        double a = swift_an_jnum(r, "control_us"), b = swift_an_jnum(r, "test_us");
        mx = fmax(mx, isfinite(a) ? a : 0);
        mx = fmax(mx, isfinite(b) ? b : 0);
    }
    fprintf(fp,
            "<h3>%s</h3>\n<table><tr><th>part</th><th>control</th><th>test</th><th>delta</th>"
            "<th>%%</th><th><span style=\"color:#bab0ac\">&#9632;</span> control "
            "<span style=\"color:#4e79a7\">&#9632;</span> test</th></tr>\n",
            title);
    json_array_foreach(rows, i, r)
    {
        char a[32], b[32], c[32], p[32];
        double ca = swift_an_jnum(r, "control_us"), tb = swift_an_jnum(r, "test_us"),
               dp = swift_an_jnum(r, "delta_pct");
        fprintf(fp,
                "<tr><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                "<td class=\"n %s\">%s</td><td class=\"n\">%s</td><td>",
                swift_an_jstr(r, "part"),
                swift_an_dur(a, sizeof(a), ca),
                swift_an_dur(b, sizeof(b), tb),
                dp > 0   ? "up"
                : dp < 0 ? "down"
                         : "",
                sdur(c, sizeof(c), swift_an_jnum(r, "delta_us")),
                spct(p, sizeof(p), dp));
        bars(fp, ca, tb, mx);
        fputs("</td></tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

static void html_head(FILE *fp, json_t *d)
{
    static const char *const key[2] = {"control", "test"};
    char b[512];
    fputs("<table><tr><th></th><th>trace</th><th>processes compared</th><th>steps</th>"
          "<th>mean step</th></tr>\n",
          fp);
    json_t *st = json_object_get(d, "step_time");
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(d, key[i]), *t = json_object_get(st, key[i]);
        fprintf(fp, "<tr><th>%s</th><td><code>", key[i]);
        esc(fp, swift_an_jstr(s, "path"));
        fputs("</code></td><td>", fp);
        esc(fp, proc_names(s, b, sizeof(b)));
        fprintf(fp,
                "</td><td class=\"n\">%.0f</td><td class=\"n\">%s</td></tr>\n",
                json_is_object(t) ? swift_an_jnum(t, "steps") : 0.0,
                swift_an_dur(b, sizeof(b), swift_an_jnum(t, "mean_us")));
    }
    fputs("</table>\n", fp);
}

static void html_bottlenecks(FILE *fp, json_t *d)
{
    json_t *bs = json_object_get(d, "bottlenecks");
    static const char *const lists[] = {"new", "resolved", "persisting"};
    fputs("<h2>Bottlenecks</h2>\n<table><tr><th></th><th>rule</th><th>control</th><th>test</th>"
          "<th>summary</th></tr>\n",
          fp);
    size_t nrow = 0;
    for (int l = 0; l < 3; l++) {
        size_t i;
        json_t *b;
        json_array_foreach(json_object_get(bs, lists[l]), i, b)
        {
            const char *cs = swift_an_jstr(b, "control_severity"),
                       *ts = swift_an_jstr(b, "test_severity");
            fprintf(
                fp,
                "<tr><td>%s</td><td>%s</td><td class=\"%s\">%s</td><td class=\"%s\">%s</td><td>",
                lists[l],
                swift_an_jstr(b, "rule"),
                !strcmp(cs, "critical") ? "crit"
                : *cs                   ? "warn"
                                        : "",
                *cs ? cs : "-",
                !strcmp(ts, "critical") ? "crit"
                : *ts                   ? "warn"
                                        : "",
                *ts ? ts : "-");
            esc(fp, swift_an_jstr(b, "summary"));
            fputs("</td></tr>\n", fp);
            nrow++;
        }
    }
    if (!nrow)
        fputs("<tr><td colspan=\"5\">none above the thresholds in either run</td></tr>\n", fp);
    fputs("</table>\n", fp);
}

static void html_ops(FILE *fp, json_t *d, int top)
{
    json_t *ops = json_object_get(d, "ops"), *cn = json_object_get(ops, "counts");
    char a[64], b[64];
    fprintf(fp,
            "<h2>Ops and kernels (HTA TraceDiff)</h2>\n<p>control %s, test %s: %.0f names, %.0f "
            "added, %.0f deleted, %.0f increased, %.0f decreased, %.0f unchanged; the %zu largest "
            "changes in total time:</p>\n<table><tr><th>change</th><th>calls control</th>"
            "<th>calls test</th><th>total control</th><th>total test</th><th>delta</th>"
            "<th>name</th></tr>\n",
            its_text(json_object_get(ops, "control_iterations"), a, sizeof(a)),
            its_text(json_object_get(ops, "test_iterations"), b, sizeof(b)),
            swift_an_jnum(ops, "n"),
            swift_an_jnum(cn, "added"),
            swift_an_jnum(cn, "deleted"),
            swift_an_jnum(cn, "increased"),
            swift_an_jnum(cn, "decreased"),
            swift_an_jnum(cn, "unchanged"),
            json_array_size(json_object_get(ops, "rows")) < (size_t)top
                ? json_array_size(json_object_get(ops, "rows"))
                : (size_t)top);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(ops, "rows"), i, r)
    {
        if (i >= (size_t)top)
            break;
        char c1[32], c2[32], dd[32], n[200];
        double dv = swift_an_jnum(r, "diff_duration");
        fprintf(
            fp,
            "<tr><td>%s</td><td class=\"n\">%.0f</td><td class=\"n\">%.0f</td>"
            "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n %s\">%s</td><td><code>",
            swift_an_jstr(r, "change"),
            swift_an_jnum(r, "control_counts"),
            swift_an_jnum(r, "test_counts"),
            swift_an_dur(c1, sizeof(c1), swift_an_jnum(r, "control_total_duration")),
            swift_an_dur(c2, sizeof(c2), swift_an_jnum(r, "test_total_duration")),
            dv > 0   ? "up"
            : dv < 0 ? "down"
                     : "",
            sdur(dd, sizeof(dd), dv));
        swift_an_trunc_name(n, sizeof(n), swift_an_jstr(r, "name"));
        esc(fp, n);
        fputs("</code></td></tr>\n", fp);
    }
    fputs("</table>\n", fp);
}

static int print_html(FILE *fp, json_t *d, int top)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>swift-trace-analyze "
          "compare</title>\n"
          "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}"
          "h1,h2,h3{font-weight:600}.crit{color:#b00}.warn{color:#a60}"
          "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;"
          "text-align:left}td.n{text-align:right}td.up{color:#b00}td.down{color:#080}"
          "code{background:#f4f4f4;padding:1px 3px}</style></head><body>\n"
          "<h1>swift-trace-analyze: compare</h1>\n",
          fp);
    html_head(fp, d);
    json_t *st = json_object_get(d, "step_time"), *g = json_object_get(d, "regression");
    char e[32], p[32];
    fprintf(fp,
            "<h2>Step time</h2>\n<p>mean step %s (%s)",
            sdur(e, sizeof(e), swift_an_jnum(st, "delta_us")),
            spct(p, sizeof(p), swift_an_jnum(st, "delta_pct")));
    if (json_is_object(g))
        fprintf(fp,
                "; regression gate +%g%%: <b>%s</b>",
                swift_an_jnum(g, "threshold_pct"),
                json_is_true(json_object_get(g, "regressed")) ? "FAILED" : "passed");
    fputs("</p>\n", fp);
    if (json_array_size(json_object_get(d, "breakdown")))
        html_delta_table(fp, json_object_get(d, "breakdown"), "Mean step by part");
    if (json_is_array(json_object_get(d, "temporal")))
        html_delta_table(fp, json_object_get(d, "temporal"), "HTA temporal breakdown (GPU)");
    html_bottlenecks(fp, d);
    html_ops(fp, d, top);
    fputs("</body></html>\n", fp);
    return ferror(fp) ? -1 : 0;
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
