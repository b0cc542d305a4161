/* analyze: the view of an RL (GRPO) step ("rl" of a process, lib/analyze/rl.c) to the µs, the
 * phase breakdown and op table of an RL trace (its spans are not forward, not ops), and the
 * rules generation_bound, reward_stall and ref_logps_cost (lib/analyze/rule_rl.c). */
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

/* One line of our trace (pid and tid 1): a span, args as JSON text or NULL. */
static void ev(const char *cat, const char *name, double ts, double dur, const char *args)
{
    trn += (size_t)snprintf(tr + trn,
                            sizeof(tr) - trn,
                            "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":1,\"tid\":1,"
                            "\"ts\":%.3f,\"dur\":%.3f%s%s}\n",
                            cat,
                            name,
                            ts,
                            dur,
                            args ? ",\"args\":" : "",
                            args ? args : "");
    assert_true(trn < sizeof(tr));
}

static void meta(const char *argv)
{
    trn = 0;
    trn += (size_t)snprintf(tr,
                            sizeof(tr),
                            "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,"
                            "\"args\":{\"stage\":\"train\",\"rank\":0,\"world_size\":1,"
                            "\"argv\":%s}}\n",
                            argv);
}

/* Two steps, --num-iterations 2: step 1 (0-1000 µs) generates, step 2 (1000-1400) reuses it.
 * Lines in the order the trainer writes them (a span when it ends). */
static void grpo_trace(void)
{
    meta("[\"swift-train\",\"--rlhf\",\"grpo\",\"-o\",\"runs/g\",\"p.jsonl\"]");
    ev("data", "data_wait", 0, 10, NULL);
    /* cat eval, as lib/eval/generate.c writes them (the view goes by name) */
    ev("eval", "prefill", 20, 50, "{\"tokens\":40,\"sequences\":4}");
    ev("compute", "decode", 70, 530, "{\"tokens\":53}");
    ev("compute",
       "generate",
       10,
       600,
       "{\"micro_batch\":0,\"rows\":4,\"prefill_tokens\":40,\"decode_tokens\":53}");
    ev("compute", "reward.accuracy", 615, 10, "{\"function\":\"accuracy\",\"program\":0}");
    ev("compute", "reward.cmd", 630, 60, "{\"function\":\"cmd\",\"program\":1}");
    ev("compute", "reward", 610, 90, "{\"micro_batch\":0,\"rows\":4}");
    ev("compute", "ref_logps", 700, 50, NULL);
    ev("compute", "forward", 770, 70, "{\"micro_batch\":0}");
    ev("compute", "backward", 840, 90, "{\"micro_batch\":0}");
    ev("compute", "train", 760, 180, NULL);
    ev("optim", "optimizer", 950, 40, NULL);
    ev("step", "step", 0, 1000, "{\"step\":1,\"tokens\":93,\"samples\":4}");
    ev("data", "data_wait", 1000, 10, NULL);
    ev("compute", "forward", 1020, 100, "{\"micro_batch\":0}");
    ev("compute", "backward", 1120, 180, "{\"micro_batch\":0}");
    ev("compute", "train", 1020, 300, NULL);
    ev("optim", "optimizer", 1330, 50, NULL);
    ev("step", "step", 1000, 400, "{\"step\":2,\"tokens\":93,\"samples\":4}");
}

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

static double num(json_t *o, const char *path)
{
    /* "a.b.c": nested keys */
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
    assert_non_null(o);
    return json_number_value(o);
}

static void test_rl_view(void **state)
{
    (void)state;
    grpo_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("g.trace.jsonl", &o);
    json_t *p = json_array_get(json_object_get(r, "processes"), 0);
    json_t *rl = json_object_get(p, "rl");
    assert_true(json_is_object(rl));
    assert_int_equal(num(rl, "steps"), 2);
    assert_int_equal(num(rl, "generating_steps"), 1);
    /* the generating step, to the µs: other = 1000 - (10 + 600 + 90 + 50 + 180 + 40) */
    static const struct {
        const char *key;
        double gen, all;
    } want[] = {{"step_us", 1000, 700},
                {"generate_us", 600, 300},
                {"prefill_us", 50, 25},
                {"decode_us", 530, 265},
                {"reward_us", 90, 45},
                {"ref_logps_us", 50, 25},
                {"old_logps_us", 0, 0},
                {"train_us", 180, 240},
                {"data_wait_us", 10, 10},
                {"optimizer_us", 40, 45},
                {"grad_sync_us", 0, 0},
                {"other_us", 30, 35}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        json_t *g = json_object_get(rl, "generating"), *a = json_object_get(rl, "all");
        assert_float_equal(num(g, want[i].key), want[i].gen, 1e-9);
        assert_float_equal(num(a, want[i].key), want[i].all, 1e-9);
    }
    assert_int_equal(num(rl, "generating.steps"), 1);
    assert_int_equal(num(rl, "all.steps"), 2);
    /* the rewards, slowest first; per generating step, per step, share of the generating step */
    json_t *fns = json_object_get(rl, "rewards");
    assert_int_equal(json_array_size(fns), 2);
    json_t *f0 = json_array_get(fns, 0), *f1 = json_array_get(fns, 1);
    assert_string_equal(json_string_value(json_object_get(f0, "function")), "cmd");
    assert_true(json_is_true(json_object_get(f0, "program")));
    assert_float_equal(num(f0, "generating_us"), 60, 1e-9);
    assert_float_equal(num(f0, "all_us"), 30, 1e-9);
    assert_float_equal(num(f0, "share"), 0.06, 1e-12);
    assert_string_equal(json_string_value(json_object_get(f1, "function")), "accuracy");
    assert_true(json_is_false(json_object_get(f1, "program")));
    assert_float_equal(num(f1, "generating_us"), 10, 1e-9);
    /* generation: 53 tokens in 530 µs, 40 in 50 µs, 4 rows in one generate */
    assert_int_equal(num(rl, "generate.spans"), 1);
    assert_int_equal(num(rl, "generate.rows"), 4);
    assert_float_equal(num(rl, "generate.rows_per_generate"), 4, 1e-12);
    assert_int_equal(num(rl, "generate.decode_tokens"), 53);
    assert_int_equal(num(rl, "generate.prefill_tokens"), 40);
    assert_float_equal(num(rl, "generate.decode_tokens_per_s"), 100000, 1e-6);
    assert_float_equal(num(rl, "generate.prefill_tokens_per_s"), 800000, 1e-6);
    assert_float_equal(num(rl, "shares.generate"), 0.6, 1e-12);
    assert_float_equal(num(rl, "shares.reward"), 0.09, 1e-12);
    assert_float_equal(num(rl, "shares.ref_logps"), 0.05, 1e-12);
    json_t *w = json_array_get(json_object_get(json_object_get(rl, "worst_spans"), "generate"), 0);
    assert_int_equal(num(w, "step"), 1);
    assert_float_equal(num(w, "generate_us"), 600, 1e-9);
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(rl, "worst_spans"), "generate")), 1);
    json_decref(r);
}

/* The phase breakdown of an RL step: train holds forward and backward and claims nothing
 * itself (it claimed the backward as forward before), generate and reward are "other"; the
 * RL spans are not an op table of profiled steps. */
static void test_rl_breakdown(void **state)
{
    (void)state;
    grpo_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("g.trace.jsonl", &o);
    json_t *p = json_array_get(json_object_get(r, "processes"), 0);
    json_t *us = json_object_get(json_object_get(p, "breakdown"), "us");
    assert_float_equal(num(us, "forward"), (70 + 100) / 2.0, 1e-9);
    assert_float_equal(num(us, "backward"), (90 + 180) / 2.0, 1e-9);
    assert_float_equal(num(us, "data_wait"), 10, 1e-9);
    assert_float_equal(num(us, "optimizer"), 45, 1e-9);
    assert_float_equal(num(us, "other"), (1000 - 210 + 400 - 340) / 2.0, 1e-9);
    assert_true(json_is_null(json_object_get(p, "ops")));
    json_decref(r);
}

static void test_rl_rules(void **state)
{
    (void)state;
    grpo_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("g.trace.jsonl", &o);
    /* generate 60 % of the generating step > 50 % */
    json_t *b = find_rule(r, "generation_bound");
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "severity")), "warn");
    assert_float_equal(num(b, "value"), 60, 1e-9);
    assert_float_equal(num(b, "threshold"), 50, 1e-9);
    assert_string_equal(json_string_value(json_object_get(b, "summary")),
                        "generation takes 60.00% of the generating steps' time (0.600 ms of 1.00 "
                        "ms per step; 1 of 2 steps generate): decode runs at 100000 tokens/s "
                        "with 4 rows per decode forward");
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "swift-train --rlhf grpo -o runs/g-2 p.jsonl --num-iterations 2");
    assert_float_equal(num(b, "evidence.decode_tokens_per_s"), 100000, 1e-6);
    assert_int_equal(num(b, "evidence.num_iterations"), 1);
    /* rewards 9 % < 10 %, but the program alone 6 % > 5 %: fires on the function */
    b = find_rule(r, "reward_stall");
    assert_non_null(b);
    assert_float_equal(num(b, "value"), 6, 1e-9);
    assert_float_equal(num(b, "threshold"), 5, 1e-9);
    assert_string_equal(json_string_value(json_object_get(b, "summary")),
                        "reward scoring takes 9.00% of the generating steps' time (0.090 ms of "
                        "1.00 ms per step); the slowest function, cmd (a --reward-cmd program), "
                        "takes 0.060 ms per step (6.00%)");
    assert_non_null(strstr(json_string_value(json_object_get(b, "remedy")), "--reward-timeout"));
    assert_null(json_object_get(b, "command"));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(b, "evidence"), "slowest"), "function")),
        "cmd");
    /* ref_logps 5 % < 20 % */
    assert_null(find_rule(r, "ref_logps_cost"));
    json_decref(r);

    /* thresholds by id: generation above 70 %, rewards above 20 % (one function above 10 %),
     * the reference above 4 % */
    assert_int_equal(swift_an_threshold_set(&o.th, "generation_bound=70"), 0);
    assert_int_equal(swift_an_threshold_set(&o.th, "reward_stall=20"), 0);
    assert_int_equal(swift_an_threshold_set(&o.th, "ref_logps_cost=4"), 0);
    r = report_of("g.trace.jsonl", &o);
    assert_null(find_rule(r, "generation_bound"));
    assert_null(find_rule(r, "reward_stall"));
    b = find_rule(r, "ref_logps_cost");
    assert_non_null(b);
    assert_float_equal(num(b, "value"), 5, 1e-9);
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "swift-train --rlhf grpo -o runs/g-2 p.jsonl --beta 0");
    json_decref(r);
}

/* An SFT trace (no generate span): no "rl", no RL rule, train-less breakdown as before. */
static void test_rl_absent(void **state)
{
    (void)state;
    meta("[\"swift-train\",\"shards/\"]");
    ev("data", "data_wait", 0, 10, NULL);
    ev("compute", "forward", 10, 300, NULL);
    ev("compute", "backward", 310, 600, NULL);
    ev("optim", "optimizer", 910, 80, NULL);
    ev("step", "step", 0, 1000, "{\"step\":1,\"tokens\":512}");
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of("s.trace.jsonl", &o);
    json_t *p = json_array_get(json_object_get(r, "processes"), 0);
    assert_true(json_is_null(json_object_get(p, "rl")));
    assert_null(find_rule(r, "generation_bound"));
    assert_null(find_rule(r, "reward_stall"));
    assert_null(find_rule(r, "ref_logps_cost"));
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rl_view),
        cmocka_unit_test(test_rl_breakdown),
        cmocka_unit_test(test_rl_rules),
        cmocka_unit_test(test_rl_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
