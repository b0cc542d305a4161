/*
 * analyze/infer_report — the "inference" view (infer.c) in the text and Markdown reports:
 * requests and throughput, time to first token and per output token (mean, p50, p90, p99),
 * the running batch against max_num_seqs, the KV cache against its pool and the decode steps
 * with and without prompt chunks. See internal.h.
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* One row of the latency table: mean, p50, p90, p99, max of a distribution ("ttft", ...). */
static void dist_row(FILE *fp, int md, const char *label, json_t *d)
{
    static const char *const keys[] = {"mean_us", "p50_us", "p90_us", "p99_us", "max_us"};
    char b[5][32];
    for (int i = 0; i < 5; i++)
        swift_an_dur(b[i], sizeof(b[i]), swift_an_jnum(d, keys[i]));
    if (md)
        fprintf(fp,
                "| %s | %s | %s | %s | %s | %s | %.0f |\n",
                label,
                b[0],
                b[1],
                b[2],
                b[3],
                b[4],
                swift_an_jnum(d, "n"));
    else
        fprintf(fp,
                "    %-26s %10s %10s %10s %10s %10s %6.0f\n",
                label,
                b[0],
                b[1],
                b[2],
                b[3],
                b[4],
                swift_an_jnum(d, "n"));
}

static void print_settings(FILE *fp, json_t *st, const char *li)
{
    fprintf(fp,
            "%ssettings: --max-num-seqs %.0f, --max-num-batched-tokens %.0f, --num-blocks %.0f, "
            "--max-model-len %.0f, chunked prefill %s\n",
            li,
            swift_an_jnum(st, "max_num_seqs"),
            swift_an_jnum(st, "max_num_batched_tokens"),
            swift_an_jnum(st, "num_blocks"),
            swift_an_jnum(st, "max_model_len"),
            swift_an_jnum(st, "chunked_prefill") > 0    ? "on"
            : swift_an_jnum(st, "chunked_prefill") == 0 ? "off"
                                                        : "-");
}

static void lines(FILE *fp, json_t *inf, const char *li);

void swift_an_infer_print(FILE *fp, json_t *proc, int md)
{
    json_t *inf = json_object_get(proc, "inference");
    if (!json_is_object(inf))
        return;
    const char *li = md ? "" : "    ";
    char b1[32];
    fprintf(fp,
            "%sinference: %.0f requests, %.0f output tokens in %s: %.3g requests/s, %.4g output "
            "tokens/s, %.0f engine steps\n",
            md ? "\n" : "  ",
            swift_an_jnum(inf, "requests"),
            swift_an_jnum(inf, "output_tokens"),
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(inf, "wall_us")),
            swift_an_jnum(inf, "requests_per_s"),
            swift_an_jnum(inf, "output_tokens_per_s"),
            swift_an_jnum(inf, "steps"));
    if (md)
        fputs("\n| latency | mean | p50 | p90 | p99 | max | n |\n|---|---:|---:|---:|---:|---:|---:"
              "|\n",
              fp);
    else
        fprintf(fp,
                "    %-26s %10s %10s %10s %10s %10s %6s\n",
                "latency",
                "mean",
                "p50",
                "p90",
                "p99",
                "max",
                "n");
    dist_row(fp, md, "time to first token", json_object_get(inf, "ttft"));
    dist_row(fp, md, "  queued", json_object_get(inf, "queued"));
    dist_row(fp, md, "time per output token", json_object_get(inf, "tpot"));
    if (md)
        fputc('\n', fp);
    lines(fp, inf, li);
}

/* The lines under the latency table, each starting with li. */
static void lines(FILE *fp, json_t *inf, const char *li)
{
    json_t *bt = json_object_get(inf, "batch"), *kv = json_object_get(inf, "kv_cache");
    json_t *it = json_object_get(inf, "interference"), *sp = json_object_get(inf, "tpot_split");
    char b1[32], b2[32], x[32] = "-";
    if (isfinite(swift_an_jnum(it, "mixed_over_pure")))
        snprintf(x, sizeof(x), "x%.2f", swift_an_jnum(it, "mixed_over_pure"));
    fprintf(fp,
            "%squeued: %.2f%% of the time to first token\n",
            li,
            100 * swift_an_jnum(inf, "queued_share_of_ttft"));
    fprintf(fp,
            "%sbatch: %.2f sequences per step of %.0f (%.2f%%); %.0f steps left requests waiting, "
            "with %.2f sequences\n",
            li,
            swift_an_jnum(bt, "mean_seqs"),
            swift_an_jnum(bt, "max_num_seqs"),
            100 * swift_an_jnum(bt, "occupancy"),
            swift_an_jnum(bt, "steps_with_waiting"),
            swift_an_jnum(bt, "mean_seqs_with_waiting"));
    fprintf(fp,
            "%sKV cache: peak %.0f of %.0f blocks (%.2f%%), mean %.2f%%, %.0f preemptions\n",
            li,
            swift_an_jnum(kv, "peak_blocks"),
            swift_an_jnum(kv, "num_blocks"),
            100 * swift_an_jnum(kv, "peak_share"),
            100 * swift_an_jnum(kv, "mean_share"),
            swift_an_jnum(kv, "preemptions"));
    fprintf(fp,
            "%ssteps: %.0f with prompt chunks only, %.0f pure decode (mean %s), %.0f decode with "
            "prompt chunks (mean %s, %s)\n",
            li,
            swift_an_jnum(it, "prefill_steps"),
            swift_an_jnum(it, "pure_decode_steps"),
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(it, "pure_decode_step_us")),
            swift_an_jnum(it, "mixed_steps"),
            swift_an_dur(b2, sizeof(b2), swift_an_jnum(it, "mixed_step_us")),
            x);
    fprintf(fp,
            "%stime per output token: %s in %.0f requests that decoded while others prefilled, %s "
            "in %.0f that did not\n",
            li,
            swift_an_dur(b1, sizeof(b1), swift_an_jnum(sp, "with_prefill_mean_us")),
            swift_an_jnum(sp, "with_prefill_requests"),
            swift_an_dur(b2, sizeof(b2), swift_an_jnum(sp, "without_prefill_mean_us")),
            swift_an_jnum(sp, "without_prefill_requests"));
    print_settings(fp, json_object_get(inf, "settings"), li);
}

void swift_an_html_infer(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *inf = json_object_get(p, "inference");
        if (!json_is_object(inf))
            continue;
        swift_an_html_proc_head(fp, p, &head, "Inference: latency, batch, KV cache");
        fprintf(fp,
                ": %.0f requests, %.0f output tokens, %.3g requests/s, %.4g output tokens/s</p>\n",
                swift_an_jnum(inf, "requests"),
                swift_an_jnum(inf, "output_tokens"),
                swift_an_jnum(inf, "requests_per_s"),
                swift_an_jnum(inf, "output_tokens_per_s"));
        swift_an_html_table(
            fp, 0, "latency", "mean", "p50", "p90", "p99", "max", "n", (const char *)NULL);
        static const char *const rows[3][2] = {{"ttft", "time to first token"},
                                               {"queued", "queued (part of it)"},
                                               {"tpot", "time per output token"}};
        static const char *const keys[] = {"mean_us", "p50_us", "p90_us", "p99_us", "max_us"};
        for (int r = 0; r < 3; r++) {
            json_t *d = json_object_get(inf, rows[r][0]);
            fputs("<tr>", fp);
            swift_an_html_text_cell(fp, rows[r][1], 0);
            for (int k = 0; k < 5; k++)
                swift_an_html_ms_cell(fp, swift_an_jnum(d, keys[k]));
            swift_an_html_fmt_cell(fp, 0, swift_an_jnum(d, "n"));
            fputs("</tr>\n", fp);
        }
        fputs("</table>\n", fp);
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m)
            continue;
        lines(m, inf, "");
        fclose(m);
        for (char *l = buf, *nl; l && *l; l = nl + 1) {
            nl = strchr(l, '\n');
            if (!nl)
                break;
            *nl = 0;
            fputs("<p>", fp);
            swift_an_html_esc(fp, l);
            fputs("</p>\n", fp);
        }
        free(buf);
    }
}
