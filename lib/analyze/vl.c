/*
 * analyze/vl — the view of a multimodal (vision-language) step in our traces (docs/multimodal.md
 * "Profile of a multimodal step"): per step, the step thread's data_wait, the forward_backward
 * span of each micro-batch with the vision tower's (vision, vision_backward) and the language
 * model's (llm, llm_backward) parts inside, the optimizer; the loader threads' image_load spans
 * (the image cache expanded to pixel patches) against their prefetch spans; and the FLOPs the
 * trainer recorded on forward_backward (flops, vision_flops; lib/model/vlm_flops.h) with the
 * MFU against the run's peak_gflops. The report's "multimodal" object (docs/formats.md); the
 * rules image_starved and vision_bound read it (rule_vl.c). See internal.h.
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* The step thread's columns, per step. */
enum { F_DATA, F_FB, F_VIS, F_LLM, F_LLMB, F_VISB, F_OPT, F_SYNC, F_OTHER, F_N };
static const char *const field_keys[F_N] = {"data_wait_us",
                                            "forward_backward_us",
                                            "vision_us",
                                            "llm_us",
                                            "llm_backward_us",
                                            "vision_backward_us",
                                            "optimizer_us",
                                            "grad_sync_us",
                                            "other_us"};

struct vlacc {
    double (*f)[F_N]; /* per step */
    double img_us, img_n, pre_us, flops, vflops, images, patches;
    long nvlf;
    int64_t tids[16];
    int ntids;
};

static json_t *num(double v)
{
    return isfinite(v) ? json_real(round(v * 1000) / 1000) : json_null();
}

static json_t *share(double part, double whole)
{
    return whole > 0 && isfinite(part) ? json_real(round(part / whole * 1e6) / 1e6) : json_null();
}

static int field_of(const char *nm, const char *cat)
{
    static const char *const names[] = {
        "data_wait", "forward_backward", "vision", "llm", "llm_backward", "vision_backward"};
    for (int k = 0; k < 6; k++)
        if (!strcmp(nm, names[k]))
            return k;
    if (!strcmp(cat, "data"))
        return F_DATA;
    if (!strcmp(nm, "optimizer") || !strcmp(cat, "optim"))
        return F_OPT;
    if (!strcmp(nm, "grad_sync") || !strcmp(cat, "comm"))
        return F_SYNC;
    return -1;
}

/* The loader threads' image_load and prefetch spans (whatever their thread), the step thread's
 * columns per step, the forward_backward spans' FLOPs inside steps. 0 when no vision span and no
 * FLOPs record exist (not a VL run). */
static int collect(const struct swift_an_set *set, const struct swift_an_proc *p, struct vlacc *a)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    double off = s->clock_offset_us;
    int64_t tid = INT64_MIN;
    for (size_t i = 0; i < s->n && tid == INT64_MIN; i++)
        if (!strcmp(swift_an_str(st, s->ev[i].cat), "step") &&
            !strcmp(swift_an_str(st, s->ev[i].name), "step"))
            tid = s->ev[i].tid;
    a->f = swift_xcalloc(p->nsteps + 1, sizeof(*a->f));
    int any = s->nvlf > 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        const char *nm = swift_an_str(st, e->name), *cat = swift_an_str(st, e->cat);
        if (e->tid != tid) {
            if (!strcmp(nm, "image_load")) {
                a->img_us += e->dur;
                a->img_n++;
                int k;
                for (k = 0; k < a->ntids && a->tids[k] != e->tid; k++)
                    ;
                if (k == a->ntids && a->ntids < 16)
                    a->tids[a->ntids++] = e->tid;
            } else if (!strcmp(nm, "prefetch")) {
                a->pre_us += e->dur;
            }
            continue;
        }
        int f = field_of(nm, cat);
        long si = f >= 0 ? swift_an_step_of(p, e->ts - off) : -1;
        if (si < 0)
            continue;
        a->f[si][f] += e->dur;
        any |= f == F_VIS;
    }
    for (size_t i = 0; i < s->nvlf; i++) {
        const struct swift_an_vlf *r = &s->vlf[i];
        if (swift_an_step_of(p, r->ts - off) < 0)
            continue;
        a->flops += r->flops;
        a->vflops += r->vision_flops;
        a->images += (double)r->images;
        a->patches += (double)r->patches;
        a->nvlf++;
    }
    return any;
}

/* The `top` steps with the most time in column f (swift_an_worst_by). */
static json_t *worst_json(const struct swift_an_proc *p, const struct vlacc *a, int f,
                          const char *key, int top)
{
    return swift_an_worst_by(p, p->nsteps ? &a->f[0][f] : NULL, F_N, key, top);
}

/* The FLOPs per step, the achieved rate and the MFU (null without FLOPs records). */
static json_t *flops_json(const struct swift_an_proc *p, const struct vlacc *a, double step_us)
{
    if (!a->nvlf)
        return json_null();
    double n = (double)p->nsteps, per = a->flops / n, vper = a->vflops / n;
    double peak = p->src->peak_gflops, gfs = step_us > 0 ? per / step_us / 1e3 : NAN;
    json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o}",
                          "per_step",
                          num(per),
                          "vision_per_step",
                          num(vper),
                          "llm_per_step",
                          num(per - vper),
                          "vision_share",
                          share(vper, per),
                          "achieved_gflops",
                          num(gfs));
    json_object_set_new(o, "peak_gflops", peak > 0 ? num(peak) : json_null());
    json_object_set_new(o, "mfu", peak > 0 ? share(gfs, peak) : json_null());
    /* what the MFU would read without the vision side's FLOPs */
    json_object_set_new(o,
                        "mfu_llm_only",
                        peak > 0 && step_us > 0 ? share((per - vper) / step_us / 1e3, peak)
                                                : json_null());
    return o;
}

json_t *swift_an_vl_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top)
{
    const struct swift_an_source *s = p->src;
    if (s->kind != SWIFT_AN_SWIFT || !p->nsteps ||
        (!s->nvlf && swift_an_lookup(&set->strs, "vision") == UINT32_MAX))
        return json_null();
    struct vlacc a = {0};
    json_t *out = json_null();
    if (!collect(set, p, &a))
        goto done;
    double sum[F_N] = {0}, step = 0, n = (double)p->nsteps;
    for (size_t i = 0; i < p->nsteps; i++) {
        double o = p->steps[i].dur - a.f[i][F_DATA] - a.f[i][F_FB] - a.f[i][F_OPT] - a.f[i][F_SYNC];
        a.f[i][F_OTHER] = o > 0 ? o : 0;
        step += p->steps[i].dur;
        for (int k = 0; k < F_N; k++)
            sum[k] += a.f[i][k];
    }
    step /= n;
    json_t *per = json_object();
    json_object_set_new(per, "step_us", num(step));
    for (int k = 0; k < F_N; k++)
        json_object_set_new(per, field_keys[k], num(sum[k] / n));
    double vis = (sum[F_VIS] + sum[F_VISB]) / n, llm = (sum[F_LLM] + sum[F_LLMB]) / n;
    double fb = sum[F_FB] / n, img = a.img_us / n;
    json_t *il = json_pack("{s:I,s:o,s:o,s:o,s:o,s:i,s:o,s:o}",
                           "spans",
                           (json_int_t)a.img_n,
                           "us_per_step",
                           num(img),
                           "mean_us",
                           num(a.img_n > 0 ? a.img_us / a.img_n : NAN),
                           "prefetch_us_per_step",
                           num(a.pre_us / n),
                           "share_of_loader",
                           share(a.img_us, a.pre_us),
                           "threads",
                           a.ntids,
                           "images_per_step",
                           a.nvlf ? num(a.images / n) : json_null(),
                           "patches_per_step",
                           a.nvlf ? num(a.patches / n) : json_null());
    out = json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o}",
                    "steps",
                    (json_int_t)p->nsteps,
                    "per_step",
                    per,
                    "shares",
                    json_pack("{s:o,s:o,s:o,s:o,s:o}",
                              "data_wait",
                              share(sum[F_DATA] / n, step),
                              "vision",
                              share(vis, step),
                              "llm",
                              share(llm, step),
                              "optimizer",
                              share(sum[F_OPT] / n, step),
                              "image_load",
                              share(img, step)),
                    "vision_share_of_model",
                    share(vis, fb > 0 ? fb : vis + llm),
                    "image_load",
                    il,
                    "flops",
                    flops_json(p, &a, step),
                    "worst_spans",
                    json_pack("{s:o,s:o}",
                              "data_wait",
                              worst_json(p, &a, F_DATA, "data_wait_us", top),
                              "vision",
                              worst_json(p, &a, F_VIS, "vision_us", top)));
done:
    free(a.f);
    return out;
}

/* ---- text, Markdown and HTML ---- */

/* The table's rows: the key in "per_step", the label, indented (a part of the row above; shown
 * only when not 0). */
static const struct {
    const char *key, *label;
    int sub;
} rows[] = {{"data_wait_us", "data_wait", 0},
            {"forward_backward_us", "forward_backward", 0},
            {"vision_us", "vision", 1},
            {"llm_us", "llm", 1},
            {"llm_backward_us", "llm_backward", 1},
            {"vision_backward_us", "vision_backward", 1},
            {"optimizer_us", "optimizer", 0},
            {"grad_sync_us", "grad_sync", 1},
            {"other_us", "other", 0},
            {"step_us", "step", 0}};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* The lines under the table: the loader's image_load, the FLOPs and MFU ("" without them). */
static void lines(json_t *vl, char *l1, size_t n1, char *l2, size_t n2)
{
    json_t *il = json_object_get(vl, "image_load"), *fl = json_object_get(vl, "flops");
    char b1[32], px[64] = "";
    double patches = swift_an_jnum(il, "patches_per_step");
    if (isfinite(patches))
        snprintf(px,
                 sizeof(px),
                 ", %.4g images and %.0f patches per step",
                 swift_an_jnum(il, "images_per_step"),
                 patches);
    double ls = swift_an_jnum(il, "share_of_loader");
    snprintf(l1,
             n1,
             "image_load (loader threads): %s per step, %.2f%% of the loader's time on %.0f "
             "thread(s)%s",
             swift_an_dur(b1, sizeof(b1), swift_an_jnum(il, "us_per_step")),
             isfinite(ls) ? 100 * ls : 0.0,
             swift_an_jnum(il, "threads"),
             px);
    l2[0] = 0;
    if (!json_is_object(fl))
        return;
    double mfu = swift_an_jnum(fl, "mfu"), mfl = swift_an_jnum(fl, "mfu_llm_only");
    char m[96] = "";
    if (isfinite(mfu))
        snprintf(
            m, sizeof(m), ", MFU %.2f%% (%.2f%% without the vision FLOPs)", 100 * mfu, 100 * mfl);
    snprintf(l2,
             n2,
             "FLOPs per step: %.4g (vision %.2f%%), %.4g GFLOP/s%s",
             swift_an_jnum(fl, "per_step"),
             100 * swift_an_jnum(fl, "vision_share"),
             swift_an_jnum(fl, "achieved_gflops"),
             m);
}

static void row(FILE *fp, int md, const char *label, int sub, double us, double step)
{
    char b[32], sh[16] = "";
    if (!isfinite(us) || (sub && !(us > 0)))
        return;
    swift_an_dur(b, sizeof(b), us);
    if (step > 0)
        snprintf(sh, sizeof(sh), "%.2f%%", 100 * us / step);
    if (md)
        fprintf(fp, "| %s%s | %s | %s |\n", sub ? "&nbsp;&nbsp;" : "", label, b, sh);
    else
        fprintf(fp, "    %s%-*s %12s %8s\n", sub ? "  " : "", sub ? 22 : 24, label, b, sh);
}

void swift_an_vl_print(FILE *fp, json_t *proc, int md)
{
    json_t *vl = json_object_get(proc, "multimodal");
    if (!json_is_object(vl))
        return;
    json_t *per = json_object_get(vl, "per_step");
    double step = swift_an_jnum(per, "step_us");
    fprintf(fp, "%smultimodal steps, per step:\n", md ? "\n" : "  ");
    if (md)
        fputs("\n| part | per step | share of step |\n|---|---:|---:|\n", fp);
    else
        fprintf(fp, "    %-24s %12s %8s\n", "part", "per step", "share");
    for (size_t i = 0; i < NROWS; i++)
        row(fp, md, rows[i].label, rows[i].sub, swift_an_jnum(per, rows[i].key), step);
    char l1[256], l2[256];
    lines(vl, l1, sizeof(l1), l2, sizeof(l2));
    fprintf(fp, "%s%s\n", md ? "\n" : "    ", l1);
    if (l2[0])
        fprintf(fp, "%s%s\n", md ? "\n" : "    ", l2);
    if (md)
        fputc('\n', fp);
}

void swift_an_html_vl(FILE *fp, json_t *ps)
{
    size_t i;
    json_t *p;
    int head = 0;
    json_array_foreach(ps, i, p)
    {
        json_t *vl = json_object_get(p, "multimodal");
        if (!json_is_object(vl))
            continue;
        json_t *per = json_object_get(vl, "per_step");
        double step = swift_an_jnum(per, "step_us");
        swift_an_html_proc_head(fp, p, &head, "Multimodal steps: vision, language model, images");
        fprintf(fp, ": %.0f steps</p>\n", swift_an_jnum(vl, "steps"));
        swift_an_html_table(fp, 0, "part", "per step", "share of step", (const char *)NULL);
        for (size_t k = 0; k < NROWS; k++) {
            double us = swift_an_jnum(per, rows[k].key);
            if (!isfinite(us) || (rows[k].sub && !(us > 0)))
                continue;
            fputs(rows[k].sub ? "<tr><td>&nbsp;&nbsp;" : "<tr><td>", fp);
            swift_an_html_esc(fp, rows[k].label);
            fputs("</td>", fp);
            swift_an_html_ms_cell(fp, us);
            swift_an_html_bar_cell(fp, step > 0 ? us / step : NAN, "#4e79a7");
            fputs("</tr>\n", fp);
        }
        fputs("</table>\n<p>", fp);
        char l1[256], l2[256];
        lines(vl, l1, sizeof(l1), l2, sizeof(l2));
        swift_an_html_esc(fp, l1);
        if (l2[0]) {
            fputs("<br>", fp);
            swift_an_html_esc(fp, l2);
        }
        fputs("</p>\n", fp);
    }
}
