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

/* A duration for people: ms (3 significant places below 10 ms), s from 10 s on. */
static const char *html_ms(char *b, size_t n, double us)
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

/* A <pre> with a copy button (the page's one script copies the text of the <pre> by id). */
static void html_copyable(FILE *fp, const char *id, const char *text)
{
    fprintf(
        fp,
        "<div class=\"cp\"><button type=\"button\" onclick=\"copyPre('%s', this)\">copy</button>"
        "<pre id=\"%s\">",
        id,
        id);
    html_esc(fp, text);
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
        html_esc(fp, k);
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
                        html_ms(b1, sizeof(b1), swift_an_jnum(w, "dur_us")));
        } else if (json_is_number(v)) {
            double d = json_number_value(v);
            char b1[32];
            size_t kl = strlen(k);
            if (kl > 3 && !strcmp(k + kl - 3, "_us"))
                fputs(html_ms(b1, sizeof(b1), d), fp);
            else
                fprintf(fp, "%.4g", d);
        } else if (json_is_string(v))
            html_esc(fp, json_string_value(v));
        else {
            char *t = json_dumps(v, JSON_COMPACT);
            html_esc(fp, t ? t : "");
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
        html_esc(fp, swift_an_jstr(b, "rule"));
        fputs("</b> <i>", fp);
        html_esc(fp, swift_an_jstr(b, "process"));
        fputs("</i></div>\n<p>", fp);
        html_esc(fp, swift_an_jstr(b, "summary"));
        fputs("</p>\n", fp);
        html_evidence(fp, json_object_get(b, "evidence"));
        fputs("<p><b>remedy</b>: ", fp);
        html_esc(fp, swift_an_jstr(b, "remedy"));
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
            html_esc(fp, swift_an_jstr(pt, "file"));
            fputs("</code> (<code>--emit-patch | patch -p0</code>):</p>\n", fp);
            html_copyable(fp, id, swift_an_jstr(pt, "diff"));
        } else if (json_is_string(json_object_get(pt, "error"))) {
            fputs("<p>patch: ", fp);
            html_esc(fp, swift_an_jstr(pt, "error"));
            fputs("</p>\n", fp);
        }
        fputs("</div>\n", fp);
    }
}

/* Copy a <pre>'s text: the Clipboard API where the page may use it (https, localhost), else
 * a selected textarea and execCommand (pages opened from file://). */
static const char html_script[] =
    "<script>\n"
    "function copyPre(id, btn) {\n"
    "  var text = document.getElementById(id).textContent;\n"
    "  function done() { btn.textContent = 'copied'; }\n"
    "  function fallback() {\n"
    "    var t = document.createElement('textarea');\n"
    "    t.value = text; document.body.appendChild(t); t.select();\n"
    "    try { document.execCommand('copy'); done(); } catch (e) { btn.textContent = 'select "
    "and copy'; }\n"
    "    document.body.removeChild(t);\n"
    "  }\n"
    "  if (navigator.clipboard && window.isSecureContext)\n"
    "    navigator.clipboard.writeText(text).then(done, fallback);\n"
    "  else fallback();\n"
    "}\n"
    "</script>\n";

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
            char b2[32];
            fprintf(fp,
                    "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    "<title>%s: %s (%.1f%%)</title></rect>\n",
                    x,
                    y,
                    w,
                    rowh - 6,
                    palette[k % 9],
                    json_string_value(pn),
                    html_ms(b2, sizeof(b2), us),
                    100 * fr);
            x += w;
        }
        char b1[32];
        fprintf(fp,
                "<text x=\"%d\" y=\"%.0f\">%s/step</text>\n",
                W - right + 6,
                y + 15,
                html_ms(b1, sizeof(b1), swift_an_jnum(bd, "step_us")));
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
                palette[k % 9],
                lx + 13,
                np * rowh + 23,
                json_string_value(pn));
        lx += 115;
    }
    fputs("</svg>\n", fp);
}

/* A round tick spacing (1, 2 or 5 times a power of ten) giving about `want` ticks up to mx. */
static double nice_tick(double mx, int want)
{
    if (!(mx > 0))
        return 1;
    double raw = mx / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* The tallest step in ms: a step's duration or the sum of its parts, whichever is larger. */
static double chart_ymax(json_t *ps, json_t *p0, json_t *parts)
{
    double mx = 0;
    size_t i, j, k;
    json_t *p, *s, *pn;
    json_array_foreach(ps, i, p) json_array_foreach(json_object_get(p, "step_list"), j, s)
    {
        double sum = 0;
        if (p == p0)
            json_array_foreach(parts, k, pn) sum +=
                swift_an_jnum(json_object_get(s, "us"), json_string_value(pn));
        double d = swift_an_jnum(s, "dur_us");
        mx = fmax(mx, fmax(isfinite(d) ? d : 0, isfinite(sum) ? sum : 0));
    }
    return mx / 1e3;
}

/* The axes: y in ms with round ticks and grid lines, x by step number. */
static void chart_axes(FILE *fp, json_t *sl, double ymax, int L, int T, double pw, double ph)
{
    double dy = nice_tick(ymax, 5);
    for (double v = 0; v <= ymax * 1.0001; v += dy) {
        double y = T + ph - v / ymax * ph;
        fprintf(fp,
                "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text class=\"yt\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                L,
                L + pw,
                y,
                y,
                L - 4,
                y + 4,
                v);
    }
    size_t n = json_array_size(sl);
    size_t dx = (size_t)nice_tick((double)n, 10);
    dx = dx ? dx : 1;
    for (size_t i = 0; i < n; i += dx) {
        double x = L + (i + 0.5) * pw / n;
        fprintf(fp,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text class=\"xt\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                x,
                x,
                T + ph,
                T + ph + 4,
                x,
                T + ph + 16,
                swift_an_jnum(json_array_get(sl, i), "step"));
    }
    fprintf(
        fp,
        "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>"
        "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\">"
        "step time (ms)</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n",
        L,
        L,
        T,
        T + ph,
        L,
        L + pw,
        T + ph,
        T + ph,
        T + ph / 2,
        T + ph / 2,
        L + pw / 2,
        T + ph + 32);
}

static const char *const rank_colour[] = {
    "#222", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* One line of step durations per rank (several ranks only), each on its own steps' slots. */
static void chart_rank_lines(FILE *fp, json_t *ps, double ymax, int L, int T, double pw, double ph)
{
    size_t i, j, r = 0;
    json_t *p, *s;
    json_array_foreach(ps, i, p)
    {
        json_t *sl = json_object_get(p, "step_list");
        size_t n = json_array_size(sl);
        if (!n)
            continue;
        fprintf(fp,
                "<polyline class=\"rank\" fill=\"none\" stroke-width=\"1.5\" stroke=\"%s\" "
                "points=\"",
                rank_colour[r++ % 8]);
        json_array_foreach(sl, j, s) fprintf(fp,
                                             "%.1f,%.1f ",
                                             L + (j + 0.5) * pw / n,
                                             T + ph - swift_an_jnum(s, "dur_us") / 1e3 / ymax * ph);
        fputs("\"><title>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</title></polyline>\n", fp);
    }
}

/* Legend: the parts' colours, then (several ranks) each rank's line. */
static void chart_legend(FILE *fp, json_t *ps, json_t *parts, size_t nrank, double y)
{
    size_t k, i, r = 0;
    json_t *pn, *p;
    double x = 60;
    json_array_foreach(parts, k, pn)
    {
        fprintf(fp,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                x,
                y,
                palette[k % 9],
                x + 13,
                y + 9,
                json_string_value(pn));
        x += 115;
    }
    if (nrank < 2)
        return;
    json_array_foreach(ps, i, p)
    {
        if (!json_array_size(json_object_get(p, "step_list")))
            continue;
        char label[40];
        swift_an_trunc_name(label, sizeof(label), swift_an_jstr(p, "label"));
        double lx = 60 + (double)(r % 4) * 230, ly = y + 18 + (double)(r / 4) * 16;
        fprintf(fp,
                "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">",
                lx,
                lx + 14,
                ly + 5,
                ly + 5,
                rank_colour[r++ % 8],
                lx + 18,
                ly + 9);
        html_esc(fp, label);
        fputs("</text>\n", fp);
    }
}

/* The step-time chart over the whole run: the first rank's steps as bars stacked by part
 * (x = step, y = ms), with one line of step time per rank when there are several. */
static void html_step_chart(FILE *fp, json_t *ps)
{
    size_t i, nrank = 0, j, k;
    json_t *p, *p0 = NULL, *s, *pn;
    json_array_foreach(ps, i, p) if (json_array_size(json_object_get(p, "step_list")))
    {
        nrank++;
        p0 = p0 ? p0 : p;
    }
    if (!p0)
        return;
    json_t *sl = json_object_get(p0, "step_list");
    json_t *parts = json_object_get(json_object_get(p0, "breakdown"), "parts");
    double ymax = chart_ymax(ps, p0, parts);
    if (!(ymax > 0))
        return;
    ymax = ceil(ymax / nice_tick(ymax, 5)) * nice_tick(ymax, 5);
    int L = 60, T = 10, H = 260;
    double pw = HTML_W - L - 20, ph = H;
    size_t n = json_array_size(sl), legend_rows = nrank > 1 ? (nrank + 3) / 4 : 0;
    fputs("<h2>Step time over the run</h2>\n<p>", fp);
    html_esc(fp, swift_an_jstr(p0, "label"));
    fprintf(fp,
            ": %zu steps stacked by part%s</p>\n<svg class=\"chart\" width=\"%d\" height=\"%.0f\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            n,
            nrank > 1 ? "; one line of step time per rank" : "",
            HTML_W,
            T + ph + 60 + 16.0 * legend_rows);
    chart_axes(fp, sl, ymax, L, T, pw, ph);
    double bw = pw / n * (n > 200 ? 1 : 0.8);
    json_array_foreach(sl, j, s)
    {
        double y = T + ph, x = L + j * pw / n + (pw / n - bw) / 2;
        json_array_foreach(parts, k, pn)
        {
            const char *nm = json_string_value(pn);
            double v = swift_an_jnum(json_object_get(s, "us"), nm), h = v / 1e3 / ymax * ph;
            if (!(v > 0))
                continue;
            y -= h;
            char b1[32];
            fprintf(fp,
                    "<rect class=\"sp\" x=\"%.2f\" y=\"%.3f\" width=\"%.2f\" height=\"%.3f\" "
                    "fill=\"%s\"><title>step %.0f %s: %s</title></rect>\n",
                    x,
                    y,
                    bw,
                    h,
                    palette[k % 9],
                    swift_an_jnum(s, "step"),
                    nm,
                    html_ms(b1, sizeof(b1), v));
        }
    }
    if (nrank > 1)
        chart_rank_lines(fp, ps, ymax, L, T, pw, ph);
    chart_legend(fp, ps, parts, nrank, T + ph + 42);
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
                "fill=\"%s\"><title>step %.0f %s +%.2f..%.2f ms</title></rect>\n",
                x0 + (mx > 0 ? sb / mx * span : 0),
                y,
                w,
                palette[ci % 9],
                swift_an_jnum(s, "step"),
                sn ? sn : "",
                sb / 1e3,
                se / 1e3);
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
        char b1[32];
        fprintf(fp,
                "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"16\" fill=\"%s\">"
                "<title>step %.0f %s: %s</title></rect>\n",
                x,
                y,
                w,
                palette[q % 9],
                swift_an_jnum(s, "step"),
                json_string_value(part),
                html_ms(b1, sizeof(b1), v));
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
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *kr = json_object_get(p, "kernels");
        size_t n = json_array_size(kr);
        if (!n)
            continue; /* CPU runs have none: no heading either */
        if (!head++)
            fputs("<h2>Top kernels</h2>\n", fp);
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</p><table><tr><th>kernel</th><th>type</th><th>count</th><th>total</th>"
              "<th>mean per launch</th></tr>\n",
              fp);
        size_t *idx = swift_xmalloc(n * sizeof(*idx));
        size_t m = n < (size_t)top ? n : (size_t)top;
        top_rows(kr, "sum_us", idx, n, m);
        for (size_t a = 0; a < m; a++) {
            json_t *row = json_array_get(kr, idx[a]);
            char b1[32], b2[32];
            fputs("<tr><td><code>", fp);
            html_esc(fp, swift_an_jstr(row, "name"));
            fprintf(fp,
                    "</code></td><td>%s</td><td class=\"n\">%.0f</td><td class=\"n\">%s</td>"
                    "<td class=\"n\">%s</td></tr>\n",
                    swift_an_jstr(row, "type"),
                    swift_an_jnum(row, "count"),
                    html_ms(b1, sizeof(b1), swift_an_jnum(row, "sum_us")),
                    html_ms(b2, sizeof(b2), swift_an_jnum(row, "launch_mean_us")));
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
                html_ms(b1, sizeof(b1), wall),
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
            char b2[32];
            fprintf(fp,
                    ": %s (%.1f%% of wall)</title></rect>\n",
                    html_ms(b2, sizeof(b2), swift_an_jnum(r, "us")),
                    100 * fr);
            x += w / span;
        }
        fputs("</svg>\n<table><tr><th>phase</th><th>category</th><th>count</th><th>time</th>"
              "<th>share of wall</th></tr>\n",
              fp);
        json_array_foreach(rows, k, r)
        {
            fprintf(fp, "<tr><td><span style=\"color:%s\">&#9632;</span> <code>", palette[k % 9]);
            html_esc(fp, swift_an_jstr(r, "name"));
            fputs("</code></td><td>", fp);
            html_esc(fp, swift_an_jstr(r, "cat"));
            char b2[32];
            fprintf(fp,
                    "</td><td class=\"n\">%.0f</td><td class=\"n\">%s</td>"
                    "<td class=\"n\">%.2f%%</td></tr>\n",
                    swift_an_jnum(r, "count"),
                    html_ms(b2, sizeof(b2), swift_an_jnum(r, "us")),
                    100 * swift_an_jnum(r, "share"));
        }
        double un = swift_an_jnum(ph, "untraced_us");
        fprintf(fp,
                "<tr><td>(no span)</td><td></td><td></td><td class=\"n\">%s</td>"
                "<td class=\"n\">%.2f%%</td></tr>\n</table>\n",
                html_ms(b1, sizeof(b1), un),
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
        char b0[32];
        fprintf(fp,
                ": %.0f profiled step%s, mean step %s, by self time</p>\n"
                "<table><tr><th>op</th><th>phase</th><th>self per step</th>"
                "<th>total per step</th><th>share of step</th><th>calls per step</th>"
                "<th>GFLOP/s</th></tr>\n",
                swift_an_jnum(ops, "steps"),
                swift_an_jnum(ops, "steps") == 1 ? "" : "s",
                html_ms(b0, sizeof(b0), swift_an_jnum(ops, "step_us")));
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
            char b1[32], b2[32];
            fprintf(fp,
                    "</code></td><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                    "<td class=\"n\">%.2f%%</td><td class=\"n\">%g</td><td class=\"n\">%s</td>"
                    "</tr>\n",
                    swift_an_jstr(r, "phase"),
                    html_ms(b1, sizeof(b1), swift_an_jnum(r, "self_us_per_step")),
                    html_ms(b2, sizeof(b2), swift_an_jnum(r, "total_us_per_step")),
                    100 * swift_an_jnum(r, "share"),
                    swift_an_jnum(r, "calls_per_step"),
                    gf);
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
        if (!head++)
            fputs("<h2>Top host operations</h2>\n", fp);
        fputs("<p>", fp);
        html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</p><table><tr><th>operation</th><th>category</th><th>count</th>"
              "<th>total (inclusive)</th></tr>\n",
              fp);
        size_t a;
        json_t *row;
        json_array_foreach(ops, a, row)
        {
            fputs("<tr><td><code>", fp);
            html_esc(fp, swift_an_jstr(row, "name"));
            fputs("</code></td><td>", fp);
            html_esc(fp, swift_an_jstr(row, "cat"));
            char b1[32];
            fprintf(fp,
                    "</td><td class=\"n\">%.0f</td><td class=\"n\">%s</td></tr>\n",
                    swift_an_jnum(row, "count"),
                    html_ms(b1, sizeof(b1), swift_an_jnum(row, "sum_us")));
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
                html_ms(t, sizeof(t), swift_an_jnum(c, "comm_us")),
                html_ms(sk, sizeof(sk), swift_an_jnum(c, "skew_us")),
                swift_an_jnum(c, "skew_pct"),
                html_ms(tr, sizeof(tr), swift_an_jnum(c, "transfer_us")));
        fprintf(fp, isfinite(alg) ? "<td class=\"n\">%.2f GB/s</td>" : "<td>-</td>", alg);
        fprintf(fp, isfinite(bus) ? "<td class=\"n\">%.2f GB/s</td>" : "<td>-</td>", bus);
        fprintf(fp,
                "<td class=\"n\">%g</td><td class=\"n\">%s</td></tr>\n",
                swift_an_jnum(c, "arrived_last"),
                html_ms(cw, sizeof(cw), swift_an_jnum(c, "skew_caused_us")));
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
          "svg text{font:11px system-ui,sans-serif}"
          ".card{border:1px solid #ddd;border-left:5px solid #a60;border-radius:4px;"
          "padding:6px 12px;margin:8px 0}.card.crit{border-left-color:#b00}"
          ".sev{font-weight:600;text-transform:uppercase;font-size:12px}ul.ev{margin:2px 0;"
          "color:#444}.cp{position:relative}.cp pre{background:#f4f4f4;padding:6px 60px 6px 8px;"
          "overflow-x:auto;margin:4px 0}.cp button{position:absolute;right:4px;top:4px}"
          "</style></head><body>\n"
          "<h1>swift-trace-analyze report</h1>\n",
          fp);
    html_damage(fp, ps);
    html_bottlenecks(fp, bs);
    html_collectives(fp, json_object_get(r, "collectives"));
    html_step_chart(fp, ps);
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
    fputs(html_script, fp);
    fputs("</body></html>\n", fp);
    return ferror(fp) ? -1 : 0;
}
