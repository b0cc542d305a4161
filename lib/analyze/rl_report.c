/*
 * analyze/rl_report — the "rl" view (rl.c) in the text, Markdown and HTML reports: one row per
 * part of an RL step (generate with prefill and decode under it, reward with each function
 * under it, ref_logps, old_logps, train, data_wait, optimizer, grad_sync, other, the step),
 * per generating step, per step over all steps, and the share of the generating step; then the
 * decode rate and the rows decoded together. See internal.h.
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

/* The table's fixed rows: the key in "generating"/"all", the label, indented (a part of the
 * row above), always shown (others only when not 0). The reward functions go after "reward". */
static const struct {
    const char *key, *label;
    int sub, always;
} rows[] = {
    {"generate_us", "generate", 0, 1},
    {"prefill_us", "prefill", 1, 0},
    {"decode_us", "decode", 1, 0},
    {"reward_us", "reward", 0, 1},
    {"ref_logps_us", "ref_logps", 0, 0},
    {"old_logps_us", "old_logps", 0, 0},
    {"train_us", "train", 0, 1},
    {"data_wait_us", "data_wait", 0, 0},
    {"optimizer_us", "optimizer", 0, 0},
    {"grad_sync_us", "grad_sync", 0, 0},
    {"other_us", "other", 0, 1},
    {"step_us", "step", 0, 1},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* One row of the table: label, µs per generating step, per step, share of the generating step. */
typedef void (*row_fn)(void *ctx, const char *label, int sub, double gen_us, double all_us,
                       double share);

static void walk(json_t *rl, row_fn fn, void *ctx)
{
    json_t *g = json_object_get(rl, "generating"), *a = json_object_get(rl, "all");
    double step = swift_an_jnum(g, "step_us");
    for (size_t i = 0; i < NROWS; i++) {
        double gu = swift_an_jnum(g, rows[i].key), au = swift_an_jnum(a, rows[i].key);
        if (rows[i].always || gu > 0 || au > 0)
            fn(ctx, rows[i].label, rows[i].sub, gu, au, step > 0 ? gu / step : NAN);
        if (strcmp(rows[i].label, "reward"))
            continue;
        size_t k;
        json_t *f;
        json_array_foreach(json_object_get(rl, "rewards"), k, f)
        {
            char lb[96];
            snprintf(lb,
                     sizeof(lb),
                     "%s%s",
                     swift_an_jstr(f, "function"),
                     json_is_true(json_object_get(f, "program")) ? " (program)" : "");
            fn(ctx,
               lb,
               1,
               swift_an_jnum(f, "generating_us"),
               swift_an_jnum(f, "all_us"),
               swift_an_jnum(f, "share"));
        }
    }
}

/* The line under the table: decode (and prefill) rate, rows per generate. */
static void rates(char *b, size_t n, json_t *rl)
{
    json_t *gen = json_object_get(rl, "generate");
    double tps = swift_an_jnum(gen, "decode_tokens_per_s");
    double ptps = swift_an_jnum(gen, "prefill_tokens_per_s");
    double rows_per = swift_an_jnum(gen, "rows_per_generate");
    char d[32], r[48], p[64];
    snprintf(d, sizeof(d), isfinite(tps) ? "%.0f tokens/s" : "-", tps);
    snprintf(r, sizeof(r), isfinite(rows_per) ? "%.4g" : "-", rows_per);
    snprintf(p, sizeof(p), isfinite(ptps) ? ", prefill %.0f tokens/s" : "", ptps);
    snprintf(b,
             n,
             "decode %s (%.0f tokens in %s)%s, %s rows per generate (%.0f generate spans)",
             d,
             swift_an_jnum(gen, "decode_tokens"),
             swift_an_dur((char[32]){0}, 32, swift_an_jnum(gen, "decode_us")),
             p,
             r,
             swift_an_jnum(gen, "spans"));
}

struct text_ctx {
    FILE *fp;
    int md;
};

static void text_row(void *ctx, const char *label, int sub, double gen_us, double all_us,
                     double share)
{
    struct text_ctx *c = ctx;
    char b1[32], b2[32], sh[16] = "";
    swift_an_dur(b1, sizeof(b1), gen_us);
    swift_an_dur(b2, sizeof(b2), all_us);
    if (isfinite(share))
        snprintf(sh, sizeof(sh), "%.2f%%", 100 * share);
    if (c->md)
        fprintf(c->fp, "| %s%s | %s | %s | %s |\n", sub ? "&nbsp;&nbsp;" : "", label, b1, b2, sh);
    else
        fprintf(
            c->fp, "    %s%-*s %12s %12s %8s\n", sub ? "  " : "", sub ? 22 : 24, label, b1, b2, sh);
}

void swift_an_rl_print(FILE *fp, json_t *proc, int md)
{
    json_t *rl = json_object_get(proc, "rl");
    if (!json_is_object(rl))
        return;
    fprintf(fp,
            "%sRL steps (%.0f of %.0f steps generate), per step:\n",
            md ? "\n" : "  ",
            swift_an_jnum(rl, "generating_steps"),
            swift_an_jnum(rl, "steps"));
    if (md)
        fputs("\n| part | per generating step | per step (all) | share of generating step "
              "|\n|---|---:|---:|---:|\n",
              fp);
    else
        fprintf(fp, "    %-24s %12s %12s %8s\n", "part", "generating", "all", "share");
    struct text_ctx c = {fp, md};
    walk(rl, text_row, &c);
    char b[256];
    rates(b, sizeof(b), rl);
    fprintf(fp, md ? "\n%s\n\n" : "    %s\n", b);
}

static void html_row(void *ctx, const char *label, int sub, double gen_us, double all_us,
                     double share)
{
    FILE *fp = ctx;
    fputs("<tr>", fp);
    fputs(sub ? "<td>&nbsp;&nbsp;" : "<td>", fp);
    swift_an_html_esc(fp, label);
    fputs("</td>", fp);
    swift_an_html_ms_cell(fp, gen_us);
    swift_an_html_ms_cell(fp, all_us);
    swift_an_html_bar_cell(fp, share, "#4e79a7");
    fputs("</tr>\n", fp);
}

void swift_an_html_rl(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *rl = json_object_get(p, "rl");
        if (!json_is_object(rl))
            continue;
        swift_an_html_proc_head(fp, p, &head, "RL steps: generation, rewards, training");
        fprintf(fp,
                ": %.0f of %.0f steps generate</p>\n",
                swift_an_jnum(rl, "generating_steps"),
                swift_an_jnum(rl, "steps"));
        swift_an_html_table(fp,
                            0,
                            "part",
                            "per generating step",
                            "per step (all)",
                            "share of generating step",
                            (const char *)NULL);
        walk(rl, html_row, fp);
        fputs("</table>\n<p>", fp);
        char b[256];
        rates(b, sizeof(b), rl);
        swift_an_html_esc(fp, b);
        fputs("</p>\n", fp);
    }
}
