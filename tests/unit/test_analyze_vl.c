/* analyze: the view of a multimodal (VL) step ("multimodal" of a process, lib/analyze/vl.c) to
 * the µs and FLOP, the phase breakdown of a VL step (vision and llm forward, llm_backward and
 * vision_backward backward, forward_backward claiming nothing itself), and the rules
 * image_starved and vision_bound (lib/analyze/rule_vl.c) with their thresholds and commands. */
#include "lib/analyze/analyze.h"
#include "lib/analyze/rules.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char tr[16384];
static size_t trn;

/* One line of our trace (pid 1, thread tid): a span, args as JSON text or NULL. */
static void ev(int tid, const char *cat, const char *name, double ts, double dur, const char *args)
{
    trn += (size_t)snprintf(tr + trn,
                            sizeof(tr) - trn,
                            "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,"
                            "\"ts\":%.3f,\"dur\":%.3f%s%s}\n",
                            cat,
                            name,
                            tid,
                            ts,
                            dur,
                            args ? ",\"args\":" : "",
                            args ? args : "");
    assert_true(trn < sizeof(tr));
}

static void meta(const char *argv)
{
    trn = (size_t)snprintf(tr,
                           sizeof(tr),
                           "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,"
                           "\"args\":{\"stage\":\"train\",\"rank\":0,\"world_size\":1,"
                           "\"argv\":%s}}\n"
                           "{\"ph\":\"C\",\"name\":\"peak_gflops\",\"pid\":1,\"tid\":1,\"ts\":0,"
                           "\"args\":{\"peak_gflops\":100}}\n",
                           argv);
}

/* Two steps of 1000 µs as swift-train writes them for a Qwen2-VL model (a span when it ends):
 * step 1 waits 200 µs for data, its forward_backward (700) holds vision 400, llm 100,
 * llm_backward 150; step 2 waits 100, forward_backward 800: vision 500, llm 100, llm_backward
 * 180; the loader thread (tid 2) spends img1 and img2 µs of its two prefetch spans (300, 400)
 * in image_load. vision_bwd: a vision_backward span of 50 µs in each step (the ViT trains). */
static void vl_trace(const char *argv, double img1, double img2, int vision_bwd)
{
    meta(argv);
    ev(2, "data", "image_load", 50, img1, "{\"images\":1,\"patches\":64}");
    ev(2, "data", "prefetch", 0, 300, "{\"step\":0}");
    ev(1, "data", "data_wait", 0, 200, NULL);
    ev(1, "compute", "vision", 200, 400, "{\"images\":1,\"patches\":64}");
    ev(1, "compute", "llm", 600, 100, NULL);
    ev(1, "compute", "llm_backward", 700, vision_bwd ? 100 : 150, NULL);
    if (vision_bwd)
        ev(1, "compute", "vision_backward", 800, 50, NULL);
    ev(1,
       "compute",
       "forward_backward",
       200,
       700,
       "{\"micro_batch\":0,\"flops\":7e6,\"vision_flops\":4e6,\"images\":1,\"patches\":64}");
    ev(1, "optim", "optimizer", 900, 50, NULL);
    ev(1, "step", "step", 0, 1000, "{\"step\":1,\"tokens\":128,\"samples\":1}");
    ev(2, "data", "image_load", 950, img2, "{\"images\":1,\"patches\":64}");
    ev(2, "data", "prefetch", 900, 400, "{\"step\":1}");
    ev(1, "data", "data_wait", 1000, 100, NULL);
    ev(1, "compute", "vision", 1100, 500, "{\"images\":1,\"patches\":64}");
    ev(1, "compute", "llm", 1600, 100, NULL);
    ev(1, "compute", "llm_backward", 1700, vision_bwd ? 130 : 180, NULL);
    if (vision_bwd)
        ev(1, "compute", "vision_backward", 1830, 50, NULL);
    ev(1,
       "compute",
       "forward_backward",
       1100,
       800,
       "{\"micro_batch\":0,\"flops\":8e6,\"vision_flops\":5e6,\"images\":1,\"patches\":64}");
    ev(1, "optim", "optimizer", 1900, 60, NULL);
    ev(1, "step", "step", 1000, 1000, "{\"step\":2,\"tokens\":128,\"samples\":1}");
}

#define ARGV "[\"swift-train\",\"--model\",\"m\",\"-o\",\"runs/v\",\"d\"]"

static json_t *report_of(const char *name, const struct swift_analyze_opts *o)
{
    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_buffer(&set, name, tr, trn), 0);
    struct swift_an_proc *procs;
    size_t n;
    assert_int_equal(swift_an_procs_build(&set, o, &procs, &n), 0);
    json_t *r = swift_an_report_build(&set, procs, n, o);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
    return r;
}

static json_t *find_rule(json_t *report, const char *rule)
{
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(report, "bottlenecks"), i, b)
    {
        if (!strcmp(json_string_value(json_object_get(b, "rule")), rule))
            return b;
    }
    return NULL;
}

static json_t *at(json_t *o, const char *path)
{
    char k[64];
    const char *p = path;
    while (o) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        assert_true(l < sizeof(k));
        memcpy(k, p, l);
        k[l] = 0;
        o = json_object_get(o, k);
        if (!dot)
            break;
        p = dot + 1;
    }
    return o;
}

static double num(json_t *o, const char *path)
{
    json_t *v = at(o, path);
    if (!v)
        fail_msg("no %s", path);
    return json_number_value(v);
}

static const char *str(json_t *o, const char *path)
{
    json_t *v = at(o, path);
    if (!json_is_string(v))
        fail_msg("no string %s", path);
    return json_string_value(v);
}

static void test_vl_view(void **state)
{
    (void)state;
    vl_trace(ARGV, 240, 300, 0);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("v.trace.jsonl", &o);
    json_t *vl = at(json_array_get(json_object_get(r, "processes"), 0), "multimodal");
    assert_true(json_is_object(vl));
    assert_int_equal(num(vl, "steps"), 2);
    /* per step, to the µs: other = 1000 - data_wait - forward_backward - optimizer */
    static const struct {
        const char *key;
        double us;
    } want[] = {{"step_us", 1000},
                {"data_wait_us", 150},
                {"forward_backward_us", 750},
                {"vision_us", 450},
                {"llm_us", 100},
                {"llm_backward_us", 165},
                {"vision_backward_us", 0},
                {"optimizer_us", 55},
                {"grad_sync_us", 0},
                {"other_us", 45}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_float_equal(num(at(vl, "per_step"), want[i].key), want[i].us, 1e-9);
    assert_float_equal(num(vl, "shares.data_wait"), 0.15, 1e-12);
    assert_float_equal(num(vl, "shares.vision"), 0.45, 1e-12);
    assert_float_equal(num(vl, "shares.llm"), 0.265, 1e-12);
    assert_float_equal(num(vl, "shares.image_load"), 0.27, 1e-12);
    assert_float_equal(num(vl, "vision_share_of_model"), 0.6, 1e-12);
    /* the loader: 540 of its 700 µs in image_load, one thread */
    assert_int_equal(num(vl, "image_load.spans"), 2);
    assert_float_equal(num(vl, "image_load.us_per_step"), 270, 1e-9);
    assert_float_equal(num(vl, "image_load.mean_us"), 270, 1e-9);
    assert_float_equal(num(vl, "image_load.prefetch_us_per_step"), 350, 1e-9);
    assert_float_equal(num(vl, "image_load.share_of_loader"), 0.771429, 1e-12);
    assert_int_equal(num(vl, "image_load.threads"), 1);
    assert_float_equal(num(vl, "image_load.images_per_step"), 1, 1e-12);
    assert_float_equal(num(vl, "image_load.patches_per_step"), 64, 1e-12);
    /* FLOPs: (7 + 8) / 2 MFLOP per step, 4.5 of them the vision side's; 7.5 GFLOP/s of 100 */
    assert_float_equal(num(vl, "flops.per_step"), 7.5e6, 1e-6);
    assert_float_equal(num(vl, "flops.vision_per_step"), 4.5e6, 1e-6);
    assert_float_equal(num(vl, "flops.llm_per_step"), 3e6, 1e-6);
    assert_float_equal(num(vl, "flops.vision_share"), 0.6, 1e-12);
    assert_float_equal(num(vl, "flops.achieved_gflops"), 7.5, 1e-9);
    assert_float_equal(num(vl, "flops.peak_gflops"), 100, 1e-9);
    assert_float_equal(num(vl, "flops.mfu"), 0.075, 1e-12);
    assert_float_equal(num(vl, "flops.mfu_llm_only"), 0.03, 1e-12);
    json_t *w = json_array_get(at(vl, "worst_spans.data_wait"), 0);
    assert_int_equal(num(w, "step"), 1);
    assert_float_equal(num(w, "data_wait_us"), 200, 1e-9);
    w = json_array_get(at(vl, "worst_spans.vision"), 0);
    assert_int_equal(num(w, "step"), 2);
    assert_float_equal(num(w, "vision_us"), 500, 1e-9);
    json_decref(r);
}

/* The step breakdown: vision and llm are forward, llm_backward backward; forward_backward
 * claims nothing itself (its time outside them is "other") */
static void test_vl_breakdown(void **state)
{
    (void)state;
    vl_trace(ARGV, 240, 300, 0);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("v.trace.jsonl", &o);
    json_t *us = at(json_array_get(json_object_get(r, "processes"), 0), "breakdown.us");
    assert_float_equal(num(us, "forward"), (500 + 600) / 2.0, 1e-9);
    assert_float_equal(num(us, "backward"), (150 + 180) / 2.0, 1e-9);
    assert_float_equal(num(us, "data_wait"), 150, 1e-9);
    assert_float_equal(num(us, "optimizer"), 55, 1e-9);
    assert_float_equal(num(us, "other"), (100 + 60) / 2.0, 1e-9);
    /* no per-op spans: no op table (forward_backward is not an op) */
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(r, "processes"), 0), "ops")));
    json_decref(r);
}

static void test_vl_rules(void **state)
{
    (void)state;
    vl_trace(ARGV, 240, 300, 0);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("v.trace.jsonl", &o);
    /* data_wait 15 % > 10 %, the loader 77 % in image_load */
    json_t *b = find_rule(r, "image_starved");
    assert_non_null(b);
    assert_string_equal(str(b, "severity"), "warn");
    assert_float_equal(num(b, "value"), 15, 1e-9);
    assert_float_equal(num(b, "threshold"), 10, 1e-9);
    assert_string_equal(str(b, "unit"), "% of step time");
    assert_string_equal(str(b, "summary"),
                        "the step waits 15.00% of its time for the loader (0.150 ms of 1.00 ms "
                        "per step), whose threads spend 77% of their time loading images "
                        "(image_load: 0.270 ms per step on 1 thread(s), 64 patches per step)");
    assert_string_equal(str(b, "command"),
                        "swift-train --model m -o runs/v-2 d --num-workers 4 --prefetch 8");
    assert_non_null(strstr(str(b, "remedy"), "--max-pixels"));
    assert_float_equal(num(b, "evidence.data_wait_us"), 150, 1e-9);
    assert_float_equal(num(b, "evidence.image_load.share_of_loader"), 0.771429, 1e-12);
    assert_int_equal(num(json_array_get(at(b, "evidence.worst_spans"), 0), "step"), 1);
    /* vision 60 % of forward_backward > 50 %; no vision backward: no command */
    b = find_rule(r, "vision_bound");
    assert_non_null(b);
    assert_string_equal(str(b, "severity"), "warn");
    assert_float_equal(num(b, "value"), 60, 1e-9);
    assert_float_equal(num(b, "threshold"), 50, 1e-9);
    assert_string_equal(str(b, "unit"), "% of forward_backward");
    assert_string_equal(str(b, "summary"),
                        "the vision tower takes 60.00% of the model's time (vision 0.450 ms per "
                        "step for 64 patches per step, the language model 0.265 ms; 60% of the "
                        "step's FLOPs)");
    assert_null(json_object_get(b, "command"));
    assert_non_null(strstr(str(b, "remedy"), "--freeze-vit"));
    assert_float_equal(num(b, "evidence.flops.vision_share"), 0.6, 1e-12);
    assert_int_equal(num(json_array_get(at(b, "evidence.worst_spans"), 0), "step"), 2);
    json_decref(r);

    /* thresholds by id */
    assert_int_equal(swift_an_threshold_set(&o.th, "image_starved=20"), 0);
    assert_int_equal(swift_an_threshold_set(&o.th, "vision_bound=70"), 0);
    r = report_of("v.trace.jsonl", &o);
    assert_null(find_rule(r, "image_starved"));
    assert_null(find_rule(r, "vision_bound"));
    json_decref(r);
}

/* The loader slow for something else (image_load 100 of its 700 µs): data_stall, not
 * image_starved. A trainable ViT: vision_bound's command freezes it. */
static void test_vl_rules_other(void **state)
{
    (void)state;
    vl_trace("[\"swift-train\",\"--model\",\"m\",\"--freeze-vit\",\"false\",\"-o\",\"runs/v\","
             "\"d\"]",
             40,
             60,
             1);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("v.trace.jsonl", &o);
    assert_null(find_rule(r, "image_starved"));
    assert_non_null(find_rule(r, "data_stall"));
    json_t *b = find_rule(r, "vision_bound");
    assert_non_null(b);
    /* (450 + 50) / 750 */
    assert_float_equal(num(b, "value"), 66.67, 1e-9);
    assert_string_equal(str(b, "command"), "swift-train --model m --freeze-vit true -o runs/v-2 d");
    json_t *vl = at(json_array_get(json_object_get(r, "processes"), 0), "multimodal");
    assert_float_equal(num(vl, "per_step.vision_backward_us"), 50, 1e-9);
    json_decref(r);
}

/* A text model's trace: no "multimodal", no VL rule. */
static void test_vl_absent(void **state)
{
    (void)state;
    meta("[\"swift-train\",\"shards/\"]");
    ev(1, "data", "data_wait", 0, 300, NULL);
    ev(1, "compute", "forward", 300, 300, NULL);
    ev(1, "compute", "backward", 600, 300, NULL);
    ev(1, "optim", "optimizer", 910, 80, NULL);
    ev(1, "step", "step", 0, 1000, "{\"step\":1,\"tokens\":512}");
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("s.trace.jsonl", &o);
    json_t *p = json_array_get(json_object_get(r, "processes"), 0);
    assert_true(json_is_null(json_object_get(p, "multimodal")));
    assert_null(find_rule(r, "image_starved"));
    assert_null(find_rule(r, "vision_bound"));
    assert_non_null(find_rule(r, "data_stall"));
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vl_view),
        cmocka_unit_test(test_vl_breakdown),
        cmocka_unit_test(test_vl_rules),
        cmocka_unit_test(test_vl_rules_other),
        cmocka_unit_test(test_vl_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
