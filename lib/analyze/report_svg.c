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

/* The two axis lines of a chart (plot pw x ph from (L, T)) and their titles, y turned up. */
static void axes_frame(FILE *fp, int L, int T, double pw, double ph, const char *ylabel,
                       const char *xlabel)
{
    fprintf(fp,
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>"
            "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
            "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\">"
            "%s</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
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
            ylabel,
            L + pw / 2,
            T + ph + 32,
            xlabel);
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
    axes_frame(fp, L, T, pw, ph, "step time (ms)", "step");
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
                    "<rect class=\"sp\" x=\"%.2f\" y=\"%.3f\" width=\"%.2f\" height=\"%.4g\" "
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

/* ---------- the worst step per thread and stream ---------- */

#define LANE_L 170  /* the lanes' label column */
#define LANE_ROW 15 /* height of one nesting level */

/* One box of a lane: [start_us, end_us, depth, name, category, count] (docs/formats.md). */
static void lane_box(FILE *fp, json_t *bx, json_t *cats, double top, double dur, double pw)
{
    double b = json_number_value(json_array_get(bx, 0));
    double e = json_number_value(json_array_get(bx, 1));
    int depth = (int)json_integer_value(json_array_get(bx, 2));
    const char *name = json_string_value(json_array_get(bx, 3));
    int cat = (int)json_integer_value(json_array_get(bx, 4));
    json_int_t count = json_integer_value(json_array_get(bx, 5));
    double x = LANE_L + b / dur * pw, w = (e - b) / dur * pw, y = top + depth * LANE_ROW;
    char b1[32], b2[32], b3[32];
    fprintf(fp,
            "<rect class=\"lb\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
            "<title>",
            x,
            y,
            w < 0.5 ? 0.5 : w,
            LANE_ROW - 1,
            swift_an_html_palette[cat % 9]);
    swift_an_html_esc(fp, name ? name : "");
    if (count > 1)
        fprintf(fp, " (%lld spans)", (long long)count);
    fputs(" [", fp);
    const char *cn = json_string_value(json_array_get(cats, (size_t)cat));
    swift_an_html_esc(fp, cn ? cn : "");
    fprintf(fp,
            "] %s to %s: %s</title></rect>\n",
            swift_an_html_ms(b1, sizeof(b1), b),
            swift_an_html_ms(b2, sizeof(b2), e),
            swift_an_html_ms(b3, sizeof(b3), e - b));
    int chars = (int)((w - 6) / 6.2);
    if (chars >= 4 && name && count == 1) {
        char label[128];
        swift_an_trunc_name(
            label, (size_t)chars + 1 < sizeof(label) ? (size_t)chars + 1 : sizeof(label), name);
        fprintf(fp,
                "<text class=\"bl\" x=\"%.1f\" y=\"%.1f\" fill=\"#fff\" pointer-events=\"none\">",
                x + 3,
                y + LANE_ROW - 4);
        swift_an_html_esc(fp, label);
        fputs("</text>\n", fp);
    }
}

/* The longest step of one process ("worst_step"), one lane per host thread and GPU stream,
 * nested spans below their parents, coloured by category, on a time axis in ms. */
void swift_an_html_lanes(FILE *fp, json_t *p)
{
    json_t *ws = json_object_get(p, "worst_step"), *lanes = json_object_get(ws, "lanes");
    json_t *cats = json_object_get(ws, "categories");
    double dur = swift_an_jnum(ws, "dur_us");
    if (!json_array_size(lanes) || !(dur > 0))
        return;
    double pw = HTML_W - LANE_L - 20, y = 4, h = 0;
    size_t i, k;
    json_t *l, *bx;
    json_array_foreach(lanes, i, l) h += swift_an_jnum(l, "depth") * LANE_ROW + 8;
    char b1[32];
    fputs("<p>", fp);
    swift_an_html_esc(fp, swift_an_jstr(p, "label"));
    fprintf(fp,
            ": step %.0f (%s), %.0f of %.0f lanes (the busiest); hover a box for its name and "
            "times</p>\n<svg class=\"lanes\" width=\"%d\" height=\"%.0f\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            swift_an_jnum(ws, "step"),
            swift_an_html_ms(b1, sizeof(b1), dur),
            swift_an_jnum(ws, "lanes_shown"),
            swift_an_jnum(ws, "lanes_seen"),
            HTML_W,
            h + 60 + 16.0 * ((json_array_size(cats) + 5) / 6));
    json_array_foreach(lanes, i, l)
    {
        double lh = swift_an_jnum(l, "depth") * LANE_ROW;
        char label[32];
        swift_an_trunc_name(label, sizeof(label), swift_an_jstr(l, "label"));
        fprintf(fp,
                "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"#f3f3f3\"/><text class=\"ll\" x=\"0\" y=\"%.1f\">",
                LANE_L,
                y - 2,
                pw,
                lh + 4,
                y + 11);
        swift_an_html_esc(fp, label);
        fprintf(fp, "</text>\n");
        double left = swift_an_jnum(l, "dropped") + swift_an_jnum(l, "too_deep");
        if (left > 0)
            fprintf(fp,
                    "<text class=\"ln\" x=\"0\" y=\"%.1f\" fill=\"#777\">%.0f spans, %.0f not "
                    "drawn</text>\n",
                    y + 24,
                    swift_an_jnum(l, "spans"),
                    left);
        json_array_foreach(json_object_get(l, "boxes"), k, bx) lane_box(fp, bx, cats, y, dur, pw);
        y += lh + 8;
    }
    time_axis(fp, dur / 1e3, LANE_L, pw, y + 2);
    json_t *c;
    json_array_foreach(cats, k, c)
    {
        double lx = LANE_L + (double)(k % 6) * 135, ly = y + 44 + (double)(k / 6) * 16;
        fprintf(fp,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">",
                lx,
                ly,
                swift_an_html_palette[k % 9],
                lx + 13,
                ly + 9);
        swift_an_html_esc(fp, json_string_value(c));
        fputs("</text>\n", fp);
    }
    fputs("</svg>\n", fp);
}

/* ---------- device memory over time ---------- */

static const char *const dev_colour[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"};

/* The largest time (µs) and bytes (allocated or reserved) of a process's memory timelines. */
static void mem_extent(json_t *devs, double *tmax, double *ymax)
{
    size_t d, i;
    json_t *dv, *pt, *r;
    *tmax = *ymax = 0;
    json_array_foreach(devs, d, dv)
    {
        json_array_foreach(json_object_get(dv, "timeline"), i, pt)
        {
            *tmax = fmax(*tmax, json_number_value(json_array_get(pt, 0)));
            *ymax = fmax(*ymax, json_number_value(json_array_get(pt, 1)));
        }
        json_array_foreach(json_object_get(dv, "reserved_timeline"),
                           i,
                           r) if (json_is_number(r)) *ymax = fmax(*ymax, json_number_value(r));
        *ymax = fmax(*ymax, swift_an_jnum(dv, "peak_bytes"));
    }
}

/* One curve as a step line (memory holds its value until the next event): points (t, v) of
 * timeline, the value from vals (NULL: the timeline's own) where it is a number. */
static void mem_curve(FILE *fp, json_t *tl, json_t *vals, const char *cls, const char *colour,
                      double sx, double sy, int L, double base)
{
    size_t i;
    json_t *pt;
    int open = 0;
    double prev = NAN;
    json_array_foreach(tl, i, pt)
    {
        json_t *v = vals ? json_array_get(vals, i) : json_array_get(pt, 1);
        if (!json_is_number(v))
            continue;
        double x = L + json_number_value(json_array_get(pt, 0)) * sx;
        double y = base - json_number_value(v) * sy;
        if (!open++)
            fprintf(fp,
                    "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s "
                    "points=\"",
                    cls,
                    colour,
                    vals ? " stroke-dasharray=\"5,3\"" : "");
        else
            fprintf(fp, "%.1f,%.1f ", x, prev);
        fprintf(fp, "%.1f,%.1f ", x, y);
        prev = y;
    }
    if (open)
        fputs("\"/>\n", fp);
}

/* Axes of the memory chart: bytes in `unit` up the left, time along the bottom. */
static void mem_axes(FILE *fp, double ymax, double unit, const char *uname, double tmax, int L,
                     int T, double pw, double ph)
{
    double dy = nice_tick(ymax / unit, 5), tu = tmax >= 1e7 ? 1e6 : 1e3;
    for (double v = 0; v <= ymax / unit * 1.0001; v += dy) {
        double y = T + ph - v * unit / ymax * ph;
        fprintf(fp,
                "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text class=\"my\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                L,
                L + pw,
                y,
                y,
                L - 4,
                y + 4,
                v);
    }
    double dt = nice_tick(tmax / tu, 8);
    for (double v = 0; v <= tmax / tu * 1.0001; v += dt) {
        double x = L + v * tu / tmax * pw;
        fprintf(fp,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text class=\"mx\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                x,
                x,
                T + ph,
                T + ph + 4,
                x,
                T + ph + 16,
                v);
    }
    char xl[64];
    snprintf(xl, sizeof(xl), "%s from the process's first event", tu == 1e6 ? "s" : "ms");
    axes_frame(fp, L, T, pw, ph, uname, xl);
}

/* The peak of one device: a marker and its value and time. */
static void mem_peak(FILE *fp, json_t *dv, double unit, const char *un, double sx, double sy, int L,
                     double base, double pw)
{
    double pb = swift_an_jnum(dv, "peak_bytes"), pt = swift_an_jnum(dv, "peak_ts_us");
    if (!isfinite(pb) || !isfinite(pt))
        return;
    double x = L + pt * sx, y = base - pb * sy;
    char b1[32];
    fprintf(fp,
            "<circle class=\"mem-peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#e15759\"><title>"
            "device %.0f peak %.2f %s at %s</title></circle>\n<text class=\"mem-peak-label\" "
            "x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %.2f %s at %s</text>\n",
            x,
            y,
            swift_an_jnum(dv, "device"),
            pb / unit,
            un,
            swift_an_html_ms(b1, sizeof(b1), pt),
            x > L + 0.7 * pw ? x - 7 : x + 7,
            y - 8,
            x > L + 0.7 * pw ? "end" : "start",
            pb / unit,
            un,
            b1);
}

/* Every process's device memory (memory.devices): allocated (solid) and reserved (dashed, where
 * the trace records it) over time per device, the peak marked. */
/* swift-train's accounted peak by category (memory.by_category), one row per process */
static void html_memory_categories(FILE *fp, json_t *ps)
{
    static const char *const k[6] = {
        "params", "grads", "optimizer", "activations", "other", "total"};
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *bc = json_object_get(json_object_get(p, "memory"), "by_category");
        if (!json_is_object(bc))
            continue;
        if (!head++) {
            fputs("<h2>Memory by category (swift-train's accounting, at the peak)</h2>\n"
                  "<table class=\"memcat\"><tr><th>process</th>",
                  fp);
            for (int c = 0; c < 6; c++)
                fprintf(fp, "<th>%s (MiB)</th>", k[c]);
            fputs("</tr>\n", fp);
        }
        fputs("<tr><td>", fp);
        swift_an_html_esc(fp, swift_an_jstr(p, "label"));
        fputs("</td>", fp);
        for (int c = 0; c < 6; c++)
            fprintf(fp, "<td>%.2f</td>", swift_an_jnum(bc, k[c]) / 1048576.0);
        fputs("</tr>\n", fp);
    }
    if (head)
        fputs("</table>\n", fp);
}

void swift_an_html_memory(FILE *fp, json_t *ps)
{
    size_t i, d;
    json_t *p, *dv;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *devs = json_object_get(json_object_get(p, "memory"), "devices");
        double tmax, ymax;
        mem_extent(devs, &tmax, &ymax);
        if (!(tmax > 0) || !(ymax > 0))
            continue;
        if (!head++)
            fputs("<h2>Device memory over time</h2>\n", fp);
        double unit = ymax >= 1073741824.0 ? 1073741824.0 : 1048576.0;
        const char *un = unit > 1048576.0 ? "GiB" : "MiB";
        ymax = ceil(ymax / unit / nice_tick(ymax / unit, 5)) * nice_tick(ymax / unit, 5) * unit;
        int L = 70, T = 28; /* room above the plot for the peak's label */
        double pw = HTML_W - L - 20, ph = 180;
        int has_res = 0;
        json_array_foreach(devs, d, dv) has_res |=
            json_is_array(json_object_get(dv, "reserved_timeline"));
        fputs("<p>", fp);
        swift_an_html_esc(fp, swift_an_jstr(p, "label"));
        fprintf(fp,
                ": %s</p>\n<svg class=\"memory\" width=\"%d\" height=\"%.0f\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                has_res ? "allocated (solid) and reserved (dashed) per device"
                        : "allocated per device (the trace records no reserved memory)",
                HTML_W,
                T + ph + 64);
        char uname[32];
        snprintf(uname, sizeof(uname), "memory (%s)", un);
        mem_axes(fp, ymax, unit, uname, tmax, L, T, pw, ph);
        double sx = pw / tmax, sy = ph / ymax, lx = L;
        json_array_foreach(devs, d, dv)
        {
            const char *col = dev_colour[d % 4];
            json_t *tl = json_object_get(dv, "timeline"),
                   *rt = json_object_get(dv, "reserved_timeline");
            if (json_is_array(rt))
                mem_curve(fp, tl, rt, "mem-res", col, sx, sy, L, T + ph);
            mem_curve(fp, tl, NULL, "mem-alloc", col, sx, sy, L, T + ph);
            mem_peak(fp, dv, unit, un, sx, sy, L, T + ph, pw);
            fprintf(fp,
                    "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                    "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">device %.0f%s</text>\n",
                    lx,
                    lx + 16,
                    T + ph + 52,
                    T + ph + 52,
                    col,
                    lx + 20,
                    T + ph + 56,
                    swift_an_jnum(dv, "device"),
                    json_is_array(rt) ? " (dashed: reserved)" : "");
            lx += 200;
        }
        fputs("</svg>\n", fp);
    }
    html_memory_categories(fp, ps);
}
