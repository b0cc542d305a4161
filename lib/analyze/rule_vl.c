/*
 * analyze/rule_vl — the bottleneck rules of multimodal steps (docs/bottlenecks.md), read from a
 * process's "multimodal" view (vl.c): image_starved (the step waits for the loader, whose time
 * goes to the images) and vision_bound (the vision tower takes most of the model's time). Their
 * thresholds and ids live with the others in thresholds.c; the bottleneck object has their
 * layout (rules.h).
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

/* image_starved needs the loader's time to go mostly to the images: image_load at least this
 * share of the prefetch spans' time (below it the loader is slow for other reasons, and
 * data_stall says so). */
#define IMAGE_SHARE_OF_LOADER_MIN 0.5

/* ---------- image_starved: the step waits for the loader, busy with the images ---------- */

/* The traced command with --num-workers doubled (4 when unset) and --prefetch two steps per
 * worker at least (as data_stall's), or NULL without a recorded argv. */
static char *loader_command(const struct swift_an_proc *p)
{
    json_t *argv = p->src->argv;
    if (!argv || !json_array_size(argv))
        return NULL;
    long nw = swift_an_argv_long(argv, "num-workers", 0);
    long pf = swift_an_argv_long(argv, "prefetch", 0);
    long w2 = nw > 0 ? nw * 2 : 4, p2 = pf > 0 ? pf * 2 : 0;
    if (p2 < 2 * w2)
        p2 = 2 * w2;
    char v1[32], v2[32];
    snprintf(v1, sizeof(v1), "%ld", w2);
    snprintf(v2, sizeof(v2), "%ld", p2);
    json_t *a1 = swift_an_argv_set(argv, "num-workers", v1);
    json_t *a2 = swift_an_argv_set(a1, "prefetch", v2);
    char *cmd = swift_an_argv_command(a2);
    json_decref(a1);
    json_decref(a2);
    return cmd;
}

static void rule_image_starved(json_t *list, const struct swift_an_proc *p, json_t *vl,
                               const struct swift_analyze_opts *o)
{
    json_t *per = json_object_get(vl, "per_step"), *il = json_object_get(vl, "image_load");
    double step = swift_an_jnum(per, "step_us"), wait = swift_an_jnum(per, "data_wait_us");
    double v = 100 * wait / step, th = o->th.image_starved_pct;
    double img_share = swift_an_jnum(il, "share_of_loader");
    if (!(step > 0) || !(v > th) || !(img_share >= IMAGE_SHARE_OF_LOADER_MIN))
        return;
    char s[512], d1[32], d2[32], d3[32], px[64] = "";
    double patches = swift_an_jnum(il, "patches_per_step");
    if (isfinite(patches))
        snprintf(px, sizeof(px), ", %.0f patches per step", patches);
    snprintf(s,
             sizeof(s),
             "the step waits %.2f%% of its time for the loader (%s of %s per step), whose "
             "threads spend %.0f%% of their time loading images (image_load: %s per step on "
             "%.0f thread(s)%s)",
             v,
             swift_an_ms_text(d1, sizeof(d1), wait),
             swift_an_ms_text(d2, sizeof(d2), step),
             100 * img_share,
             swift_an_ms_text(d3, sizeof(d3), swift_an_jnum(il, "us_per_step")),
             swift_an_jnum(il, "threads"),
             px);
    json_t *b = swift_an_bottleneck(
        list, "image_starved", swift_an_sev_above(v, th), p, v, th, "% of step time", s);
    json_t *ev = json_pack("{s:f,s:f,s:I,s:O,s:O}",
                           "data_wait_us",
                           wait,
                           "step_us",
                           step,
                           "steps",
                           (json_int_t)p->nsteps,
                           "image_load",
                           il,
                           "worst_spans",
                           json_object_get(json_object_get(vl, "worst_spans"), "data_wait"));
    json_object_set_new(b, "evidence", ev);
    swift_an_set_remedy(
        b,
        "load images on more threads, further ahead: swift-train --num-workers N and "
        "--prefetch N (ms-swift: --dataloader_num_workers); fewer patches per image: "
        "re-run swift-preprocess with a lower --max-pixels (ms-swift: MAX_PIXELS; the "
        "patches grow with the pixels, 28x28 pixels per merged token); keep the shards' "
        "image cache on a fast local disk (the loader reads and expands "
        "images/<sha256>.pix per sample, never decodes)",
        loader_command(p));
}

/* ---------- vision_bound: the vision tower takes most of the model's time ---------- */

static void rule_vision_bound(json_t *list, const struct swift_an_proc *p, json_t *vl,
                              const struct swift_analyze_opts *o)
{
    json_t *per = json_object_get(vl, "per_step"), *il = json_object_get(vl, "image_load");
    double sh = swift_an_jnum(vl, "vision_share_of_model");
    double v = 100 * sh, th = o->th.vision_bound_pct;
    if (!(v > th))
        return;
    double vis = swift_an_jnum(per, "vision_us"), visb = swift_an_jnum(per, "vision_backward_us");
    double llm = swift_an_jnum(per, "llm_us") + swift_an_jnum(per, "llm_backward_us");
    double patches = swift_an_jnum(il, "patches_per_step");
    json_t *fl = json_object_get(vl, "flops");
    double vfs = swift_an_jnum(fl, "vision_share");
    char s[512], d1[32], d2[32], px[64] = "", fx[64] = "";
    if (isfinite(patches))
        snprintf(px, sizeof(px), " for %.0f patches per step", patches);
    if (isfinite(vfs))
        snprintf(fx, sizeof(fx), "; %.0f%% of the step's FLOPs", 100 * vfs);
    snprintf(s,
             sizeof(s),
             "the vision tower takes %.2f%% of the model's time (vision%s %s per step%s, the "
             "language model %s%s)",
             v,
             visb > 0 ? " and vision_backward" : "",
             swift_an_ms_text(d1, sizeof(d1), vis + (visb > 0 ? visb : 0)),
             px,
             swift_an_ms_text(d2, sizeof(d2), llm),
             fx);
    json_t *b = swift_an_bottleneck(
        list, "vision_bound", swift_an_sev_above(v, th), p, v, th, "% of forward_backward", s);
    json_t *ev = json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}",
                           "vision_us",
                           json_object_get(per, "vision_us"),
                           "vision_backward_us",
                           json_object_get(per, "vision_backward_us"),
                           "llm_us",
                           json_object_get(per, "llm_us"),
                           "llm_backward_us",
                           json_object_get(per, "llm_backward_us"),
                           "forward_backward_us",
                           json_object_get(per, "forward_backward_us"),
                           "patches_per_step",
                           json_object_get(il, "patches_per_step"),
                           "flops",
                           fl ? fl : json_null(),
                           "worst_spans",
                           json_object_get(json_object_get(vl, "worst_spans"), "vision"));
    json_object_set_new(b, "evidence", ev);
    /* a trainable ViT: freezing it drops its backward (about 2/3 of its cost) */
    json_t *argv = p->src->argv;
    char *cmd = NULL;
    if (visb > 0 && argv && json_array_size(argv))
        cmd = swift_an_argv_with(argv, "freeze-vit", "true");
    swift_an_set_remedy(
        b,
        "fewer patches per image: re-run swift-preprocess with a lower --max-pixels "
        "(ms-swift: MAX_PIXELS; the ViT's linears grow with the patches, its attention "
        "with the square of each image's patches); keep the ViT frozen (--freeze-vit "
        "true: no vision backward); more text per image when the model's other side "
        "idles: longer samples or --packing",
        cmd);
}

void swift_an_rules_vl(json_t *list, const struct swift_an_proc *p, json_t *proc,
                       const struct swift_analyze_opts *o)
{
    json_t *vl = json_object_get(proc, "multimodal");
    if (!json_is_object(vl))
        return;
    rule_image_starved(list, p, vl, o);
    rule_vision_bound(list, p, vl, o);
}
