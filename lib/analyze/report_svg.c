/*
 * analyze/report_svg — the HTML report's step charts as inline SVG: the step time over the whole
 * run (stacked by part, a line per rank, axes in ms) and the worst steps' timelines on a time
 * axis. The page around them is report_html.c.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define HTML_W 1000 /* width of every SVG (as report_html.c) */

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
        swift_an_html_esc(fp, swift_an_jstr(p, "label"));
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
                swift_an_html_palette[k % 9],
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
        swift_an_html_esc(fp, label);
        fputs("</text>\n", fp);
    }
}

/* The step-time chart over the whole run: the first rank's steps as bars stacked by part
 * (x = step, y = ms), with one line of step time per rank when there are several. */
void swift_an_html_step_chart(FILE *fp, json_t *ps)
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
    swift_an_html_esc(fp, swift_an_jstr(p0, "label"));
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
                    swift_an_html_palette[k % 9],
                    swift_an_jnum(s, "step"),
                    nm,
                    swift_an_html_ms(b1, sizeof(b1), v));
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
                swift_an_html_palette[ci % 9],
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
                swift_an_html_palette[q % 9],
                swift_an_jnum(s, "step"),
                json_string_value(part),
                swift_an_html_ms(b1, sizeof(b1), v));
        x += w;
    }
}

/* A time axis under the strips: ms from the step's start, round ticks, over span px from x0. */
static void time_axis(FILE *fp, double ms, double x0, double span, double y)
{
    if (!(ms > 0))
        return;
    double dt = nice_tick(ms, 8);
    fprintf(fp,
            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
            x0,
            x0 + span,
            y,
            y);
    for (double v = 0; v <= ms * 1.0001; v += dt) {
        double x = x0 + v / ms * span;
        fprintf(fp,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text class=\"tt\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                x,
                x,
                y,
                y + 4,
                x,
                y + 16,
                v);
    }
    fprintf(fp,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">ms from the step's start</text>\n",
            x0 + span,
            y + 30);
}

/* The `top` longest steps of one process, longest first, one strip each. */
void swift_an_html_worst_steps(FILE *fp, json_t *p, int top)
{
    json_t *sl = json_object_get(p, "step_list");
    size_t n = json_array_size(sl);
    if (!n)
        return;
    size_t m = n < (size_t)top ? n : (size_t)top;
    size_t *idx = swift_xmalloc(n * sizeof(*idx));
    swift_an_html_top_rows(sl, "dur_us", idx, n, m);
    double mx = swift_an_jnum(json_array_get(sl, idx[0]), "dur_us");
    fputs("<p>", fp);
    swift_an_html_esc(fp, swift_an_jstr(p, "label"));
    fprintf(fp,
            ": the %zu longest step%s, in time order from each step's start</p>\n"
            "<svg class=\"worst\" width=\"%d\" height=\"%zu\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            m,
            m == 1 ? "" : "s",
            HTML_W,
            m * 20 + 40);
    time_axis(fp, mx / 1e3, 120, HTML_W - 130, (double)m * 20 + 4);
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
