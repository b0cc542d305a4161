/*
 * analyze/report_table — what the two HTML pages (the report, report_html.c, and the compare
 * page, compare_report.c) share: escaping, the page's head and script, tables with their
 * headings and cells (a number cell carries data-v, the value a click on its heading sorts by).
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_an_html_esc(FILE *fp, const char *s)
{
    for (; s && *s; s++) {
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

static const char page_css[] =
    "body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}"
    "h1,h2,h3{font-weight:600}.crit{color:#b00}.warn{color:#a60}table{border-collapse:collapse}"
    "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}"
    "td.n{text-align:right;white-space:nowrap}table.sortable th{cursor:pointer}"
    ".bar{display:inline-block;height:9px;margin-right:5px;vertical-align:middle}code{"
    "background:#f4f4f4;padding:1px 3px}"
    "svg text{font:11px system-ui,sans-serif}"
    ".card{color:inherit;border:1px solid #ddd;border-left:5px solid #a60;border-radius:4px;"
    "padding:6px 12px;margin:8px 0}.card.crit{border-left-color:#b00}"
    ".sev{font-weight:600;text-transform:uppercase;font-size:12px}ul.ev{margin:2px 0;"
    "color:#444}.cp{position:relative}.cp pre{background:#f4f4f4;padding:6px 60px 6px 8px;"
    "overflow-x:auto;margin:4px 0}.cp button{position:absolute;right:4px;top:4px}";

void swift_an_html_page_head(FILE *fp, const char *title, const char *extra_css)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", fp);
    swift_an_html_esc(fp, title);
    fprintf(fp,
            "</title>\n<style>%s%s</style></head><body>\n<h1>",
            page_css,
            extra_css ? extra_css : "");
    swift_an_html_esc(fp, title);
    fputs("</h1>\n", fp);
}

/* Copy a <pre>'s text: the Clipboard API where the page may use it (https, localhost), else
 * a selected textarea and execCommand (pages opened from file://). Sortable tables: a click on
 * a heading sorts by that column (data-v: the number), again the other way. */
static const char page_script[] =
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
    "// sortable tables: a click on a heading sorts by that column (data-v: the number), again\n"
    "// the other way\n"
    "function sortBy(th) {\n"
    "  var table = th.closest('table'), col = th.cellIndex, body = table.tBodies[0];\n"
    "  var rows = Array.prototype.slice.call(table.rows, 1);\n"
    "  var desc = th.getAttribute('data-dir') !== 'desc';\n"
    "  th.setAttribute('data-dir', desc ? 'desc' : 'asc');\n"
    "  function key(r) {\n"
    "    var c = r.cells[col], v = c.getAttribute('data-v');\n"
    "    if (v === null) return c.textContent;\n"
    "    v = parseFloat(v); return isNaN(v) ? -Infinity : v;\n"
    "  }\n"
    "  rows.sort(function (a, b) {\n"
    "    var x = key(a), y = key(b);\n"
    "    var d = typeof x === 'number' ? (x < y ? -1 : x > y ? 1 : 0) : "
    "String(x).localeCompare(y);\n"
    "    return desc ? -d : d;\n"
    "  });\n"
    "  rows.forEach(function (r) { body.appendChild(r); });\n"
    "}\n"
    "document.querySelectorAll('table.sortable th').forEach(function (th) {\n"
    "  th.addEventListener('click', function () { sortBy(th); });\n"
    "});\n"
    "</script>\n";

int swift_an_html_page_end(FILE *fp)
{
    fputs(page_script, fp);
    fputs("</body></html>\n", fp);
    return ferror(fp) ? -1 : 0;
}

void swift_an_html_table(FILE *fp, int sortable, const char *head, ...)
{
    fputs(sortable ? "<table class=\"sortable\"><tr>" : "<table><tr>", fp);
    va_list ap;
    va_start(ap, head);
    for (const char *h = head; h; h = va_arg(ap, const char *))
        fprintf(fp, "<th>%s</th>", h); /* headings are the code's own HTML */
    va_end(ap);
    fputs("</tr>\n", fp);
}

void swift_an_html_text_cell(FILE *fp, const char *s, int code)
{
    fputs(code ? "<td><code>" : "<td>", fp);
    swift_an_html_esc(fp, s);
    fputs(code ? "</code></td>" : "</td>", fp);
}

void swift_an_html_num_cell(FILE *fp, double v, const char *shown, const char *cls)
{
    const char *c = cls && *cls ? cls : NULL;
    if (isfinite(v))
        fprintf(
            fp, "<td class=\"n%s%s\" data-v=\"%.9g\">%s</td>", c ? " " : "", c ? c : "", v, shown);
    else
        fputs("<td class=\"n\" data-v=\"\">-</td>", fp);
}

void swift_an_html_bar_cell(FILE *fp, double fr, const char *colour)
{
    if (!isfinite(fr)) {
        fputs("<td class=\"n\" data-v=\"\">-</td>", fp);
        return;
    }
    double w = fr > 1 ? 80 : fr > 0 ? 80 * fr : 0;
    fprintf(fp,
            "<td class=\"n\" data-v=\"%.9g\"><span class=\"bar\" style=\"width:%.1fpx;"
            "background:%s\"></span>%.2f%%</td>",
            fr,
            w,
            colour,
            100 * fr);
}

void swift_an_html_ms_cell(FILE *fp, double us)
{
    char b[32];
    swift_an_html_num_cell(fp, us, swift_an_html_ms(b, sizeof(b), us), NULL);
}

void swift_an_html_fmt_cell(FILE *fp, int prec, double v)
{
    char b[32];
    if (prec < 0)
        snprintf(b, sizeof(b), "%g", v);
    else
        snprintf(b, sizeof(b), "%.*f", prec, v);
    swift_an_html_num_cell(fp, v, b, NULL);
}

void swift_an_html_proc_head(FILE *fp, json_t *p, int *head, const char *title)
{
    if (!(*head)++)
        fprintf(fp, "<h2>%s</h2>\n", title);
    fputs("<p>", fp);
    swift_an_html_esc(fp, swift_an_jstr(p, "label"));
}
