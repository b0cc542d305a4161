/* analyze: the view of an inference run ("inference" of a process, lib/analyze/infer.c) on
 * hand-made swift-infer traces, to the µs: time to first token and per output token
 * (percentiles interpolated between the closest ranks), throughput, batch occupancy, KV cache
 * pressure, decode steps with and without prompt chunks; and the rules queue_bound_ttft,
 * kv_pressure, low_occupancy and prefill_interference (lib/analyze/rule_infer.c), on a trace
 * that triggers each and one that triggers none. */
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

double swift_an_percentile(double *v, size_t n, double q); /* lib/analyze/internal.h */

static char tr[16384];
static size_t trn;

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    trn += (size_t)vsnprintf(tr + trn, sizeof(tr) - trn, fmt, ap);
    va_end(ap);
    assert_true(trn < sizeof(tr));
}

static void meta(void)
{
    trn = 0;
    line("{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":{"
         "\"stage\":\"infer\",\"rank\":0,\"world_size\":1,\"argv\":[\"swift-infer\",\"m\","
         "\"--max-num-seqs\",\"4\",\"--max-num-batched-tokens\",\"32\",\"--num-blocks\",\"10\","
         "\"in.jsonl\"]}}\n");
}

/* An engine_step span as lib/infer/step.c writes it (settings: 4 sequences, 32 tokens per
 * forward, 10 blocks, max_model_len 64, chunked prefill on). */
static void step(int n, double ts, double dur, int seqs, int prefill, int decode, int blocks,
                 int waiting, int preempt)
{
    line("{\"ph\":\"X\",\"cat\":\"infer\",\"name\":\"engine_step\",\"pid\":1,\"tid\":1,\"ts\":%.3f,"
         "\"dur\":%.3f,\"args\":{\"step\":%d,\"seqs\":%d,\"tokens\":%d,\"prefill_tokens\":%d,"
         "\"decode_tokens\":%d,\"blocks_used\":%d,\"waiting\":%d,\"preemptions\":%d,"
         "\"max_num_seqs\":4,\"max_num_batched_tokens\":32,\"num_blocks\":10,"
         "\"max_model_len\":64,\"chunked_prefill\":1}}\n",
         ts,
         dur,
         n,
         seqs,
         prefill + decode,
         prefill,
         decode,
         blocks,
         waiting,
         preempt);
}

/* One span of a request as lib/infer/engine.c writes them when it ends. */
static void rspan(const char *name, double ts, double dur, int req, int prompt, int comp)
{
    line("{\"ph\":\"X\",\"cat\":\"infer\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%.3f,"
         "\"dur\":%.3f,\"args\":{\"req\":%d,\"prompt_tokens\":%d,\"cached_tokens\":0,"
         "\"completion_tokens\":%d}}\n",
         name,
         ts,
         dur,
         req,
         prompt,
         comp);
}

/* A request's three spans (queued from 0). */
static void request(int req, double queued, double prefill, double decode, int prompt, int comp)
{
    rspan("request_queued", 0.0, queued, req, prompt, comp);
    rspan("request_prefill", queued, prefill, req, prompt, comp);
    rspan("request_decode", queued + prefill, decode, req, prompt, comp);
}

/* Six steps, three requests (all queued at 0); step 3 carries a prompt chunk beside a decode
 * token, a preemption at step 4. */
static void busy_trace(void)
{
    meta();
    step(1, 0, 100, 1, 20, 0, 2, 2, 0);
    step(2, 100, 50, 1, 0, 1, 2, 2, 0);
    step(3, 150, 150, 2, 20, 1, 4, 1, 0);
    request(2, 300, 50, 0, 20, 1);
    step(4, 300, 50, 2, 0, 2, 5, 1, 1);
    step(5, 350, 50, 2, 0, 2, 6, 0, 1);
    request(1, 150, 150, 100, 20, 3);
    step(6, 400, 50, 1, 0, 1, 3, 0, 1);
    request(0, 0, 100, 350, 20, 6);
}

/* One request alone: a prefill step, then pure decode steps; nothing waits. */
static void calm_trace(void)
{
    meta();
    step(1, 0, 100, 1, 20, 0, 2, 0, 0);
    for (int i = 0; i < 4; i++)
        step(2 + i, 100 + 50 * i, 50, 1, 0, 1, 2, 0, 0);
    request(0, 1, 99, 200, 20, 5);
    request(1, 250, 0, 0, 30, 0); /* cancelled before it ran: no first token, no TTFT */
}

static json_t *report_of(const struct swift_analyze_opts *o)
{
    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_buffer(&set, "i.trace.jsonl", tr, trn), 0);
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

static void test_percentile(void **state)
{
    (void)state;
    double v[] = {350, 100, 300};
    assert_float_equal(swift_an_percentile(v, 3, 0.5), 300, 1e-12);
    assert_float_equal(swift_an_percentile(v, 3, 0.9), 340, 1e-9);
    assert_float_equal(swift_an_percentile(v, 3, 0.99), 349, 1e-9);
    assert_float_equal(swift_an_percentile(v, 3, 0), 100, 1e-12);
    assert_float_equal(swift_an_percentile(v, 3, 1), 350, 1e-12);
    double w[] = {4, 1, 3, 2};
    assert_float_equal(swift_an_percentile(w, 4, 0.5), 2.5, 1e-12); /* numpy's median */
    double one[] = {7};
    assert_float_equal(swift_an_percentile(one, 1, 0.99), 7, 1e-12);
    assert_true(isnan(swift_an_percentile(one, 0, 0.5)));
}

static void test_infer_view(void **state)
{
    (void)state;
    busy_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of(&o);
    json_t *inf = json_object_get(json_array_get(json_object_get(r, "processes"), 0), "inference");
    assert_true(json_is_object(inf));
    assert_int_equal(num(inf, "settings.max_num_seqs"), 4);
    assert_int_equal(num(inf, "settings.max_num_batched_tokens"), 32);
    assert_int_equal(num(inf, "settings.num_blocks"), 10);
    assert_int_equal(num(inf, "settings.max_model_len"), 64);
    assert_int_equal(num(inf, "settings.chunked_prefill"), 1);
    /* TTFT 100, 300, 350; queued 0, 150, 300 */
    assert_int_equal(num(inf, "requests"), 3);
    assert_int_equal(num(inf, "output_tokens"), 10);
    assert_float_equal(num(inf, "wall_us"), 450, 1e-9);
    assert_float_equal(num(inf, "requests_per_s"), 6666.667, 1e-3);
    assert_float_equal(num(inf, "output_tokens_per_s"), 22222.222, 1e-3);
    assert_int_equal(num(inf, "ttft.n"), 3);
    assert_float_equal(num(inf, "ttft.mean_us"), 250, 1e-9);
    assert_float_equal(num(inf, "ttft.p50_us"), 300, 1e-9);
    assert_float_equal(num(inf, "ttft.p90_us"), 340, 1e-9);
    assert_float_equal(num(inf, "ttft.p99_us"), 349, 1e-9);
    assert_float_equal(num(inf, "ttft.max_us"), 350, 1e-9);
    assert_float_equal(num(inf, "queued.mean_us"), 150, 1e-9);
    assert_float_equal(num(inf, "queued_share_of_ttft"), 0.6, 1e-9);
    /* TPOT: 350 / 5 and 100 / 2; the one-token request has none */
    assert_int_equal(num(inf, "tpot.n"), 2);
    assert_float_equal(num(inf, "tpot.mean_us"), 60, 1e-9);
    assert_float_equal(num(inf, "tpot.p50_us"), 60, 1e-9);
    assert_float_equal(num(inf, "tpot.p99_us"), 69.8, 1e-9);
    /* request 0 decoded through step 3 (a prompt chunk), request 1 after it */
    assert_int_equal(num(inf, "tpot_split.with_prefill_requests"), 1);
    assert_float_equal(num(inf, "tpot_split.with_prefill_mean_us"), 70, 1e-9);
    assert_int_equal(num(inf, "tpot_split.without_prefill_requests"), 1);
    assert_float_equal(num(inf, "tpot_split.without_prefill_mean_us"), 50, 1e-9);
    /* batch: 9 sequences in 6 steps of 4; 4 steps left requests waiting, with 6 sequences */
    assert_int_equal(num(inf, "steps"), 6);
    assert_float_equal(num(inf, "batch.mean_seqs"), 1.5, 1e-9);
    assert_float_equal(num(inf, "batch.occupancy"), 0.375, 1e-9);
    assert_int_equal(num(inf, "batch.steps_with_waiting"), 4);
    assert_float_equal(num(inf, "batch.mean_seqs_with_waiting"), 1.5, 1e-9);
    assert_float_equal(num(inf, "batch.occupancy_with_waiting"), 0.375, 1e-9);
    assert_float_equal(num(inf, "batch.mean_tokens_with_waiting"), 11, 1e-9);
    /* KV: blocks 2 2 4 5 6 3 of 10 */
    assert_int_equal(num(inf, "kv_cache.peak_blocks"), 6);
    assert_float_equal(num(inf, "kv_cache.peak_share"), 0.6, 1e-9);
    assert_float_equal(num(inf, "kv_cache.mean_blocks"), 3.667, 1e-9);
    assert_int_equal(num(inf, "kv_cache.preemptions"), 1);
    /* steps: 1 prompt only, 4 pure decode (50 µs), 1 mixed (150 µs) */
    assert_int_equal(num(inf, "interference.prefill_steps"), 1);
    assert_int_equal(num(inf, "interference.pure_decode_steps"), 4);
    assert_int_equal(num(inf, "interference.mixed_steps"), 1);
    assert_float_equal(num(inf, "interference.pure_decode_step_us"), 50, 1e-9);
    assert_float_equal(num(inf, "interference.mixed_step_us"), 150, 1e-9);
    assert_float_equal(num(inf, "interference.mixed_over_pure"), 3, 1e-9);
    json_decref(r);
}

static void test_infer_rules_fire(void **state)
{
    (void)state;
    busy_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of(&o);
    json_t *q = find_rule(r, "queue_bound_ttft");
    assert_non_null(q);
    assert_float_equal(num(q, "value"), 60, 1e-9);
    assert_non_null(
        strstr(json_string_value(json_object_get(q, "remedy")), "--max-num-seqs (now 4"));
    assert_non_null(strstr(json_string_value(json_object_get(q, "command")), "--max-num-seqs 8"));
    json_t *kv = find_rule(r, "kv_pressure");
    assert_non_null(kv);
    assert_string_equal(json_string_value(json_object_get(kv, "severity")), "critical");
    assert_non_null(
        strstr(json_string_value(json_object_get(kv, "remedy")), "--num-blocks (now 10)"));
    assert_non_null(
        strstr(json_string_value(json_object_get(kv, "remedy")), "--max-model-len (now 64)"));
    assert_non_null(strstr(json_string_value(json_object_get(kv, "command")), "--num-blocks 20"));
    json_t *oc = find_rule(r, "low_occupancy");
    assert_non_null(oc);
    assert_float_equal(num(oc, "value"), 37.5, 1e-9);
    assert_non_null(strstr(json_string_value(json_object_get(oc, "remedy")),
                           "--max-num-batched-tokens (now 32)"));
    json_t *it = find_rule(r, "prefill_interference");
    assert_non_null(it);
    assert_float_equal(num(it, "value"), 200, 1e-9);
    assert_non_null(strstr(json_string_value(json_object_get(it, "remedy")),
                           "lower --max-num-batched-tokens (now 32"));
    assert_non_null(
        strstr(json_string_value(json_object_get(it, "command")), "--max-num-batched-tokens 16"));
    json_decref(r);
    /* each threshold above the value: nothing fires */
    struct swift_analyze_opts h;
    swift_analyze_opts_default(&h);
    assert_int_equal(swift_an_threshold_set(&h.th, "queue_bound_ttft=61"), 0);
    assert_int_equal(swift_an_threshold_set(&h.th, "low_occupancy=37"), 0);
    assert_int_equal(swift_an_threshold_set(&h.th, "prefill_interference=201"), 0);
    r = report_of(&h);
    assert_null(find_rule(r, "queue_bound_ttft"));
    assert_null(find_rule(r, "low_occupancy"));
    assert_null(find_rule(r, "prefill_interference"));
    assert_non_null(find_rule(r, "kv_pressure")); /* a preemption fires it whatever the share */
    json_decref(r);
}

static void test_infer_rules_calm(void **state)
{
    (void)state;
    calm_trace();
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of(&o);
    json_t *inf = json_object_get(json_array_get(json_object_get(r, "processes"), 0), "inference");
    assert_int_equal(num(inf, "requests"), 2);
    assert_int_equal(num(inf, "ttft.n"), 1);
    assert_int_equal(num(inf, "tpot.n"), 1);
    assert_float_equal(num(inf, "ttft.p50_us"), 100, 1e-9);
    assert_float_equal(num(inf, "tpot.p50_us"), 50, 1e-9);
    assert_float_equal(num(inf, "queued_share_of_ttft"), 0.01, 1e-9);
    assert_int_equal(num(inf, "interference.mixed_steps"), 0);
    assert_null(find_rule(r, "queue_bound_ttft"));
    assert_null(find_rule(r, "kv_pressure"));
    assert_null(find_rule(r, "low_occupancy"));
    assert_null(find_rule(r, "prefill_interference"));
    json_decref(r);
    /* a pool at its threshold fires kv_pressure without preemptions: 2 of 2 blocks */
    struct swift_analyze_opts h;
    swift_analyze_opts_default(&h);
    assert_int_equal(swift_an_threshold_set(&h.th, "kv_pressure=20"), 0);
    r = report_of(&h);
    json_t *kv = find_rule(r, "kv_pressure");
    assert_non_null(kv);
    assert_string_equal(json_string_value(json_object_get(kv, "severity")), "warn");
    json_decref(r);
}

/* A training trace has no "inference" view. */
static void test_no_infer_spans(void **state)
{
    (void)state;
    trn = 0;
    line("{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":1,\"tid\":1,\"ts\":0,"
         "\"dur\":100,\"args\":{\"step\":1,\"tokens\":8}}\n");
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    json_t *r = report_of(&o);
    assert_true(json_is_null(
        json_object_get(json_array_get(json_object_get(r, "processes"), 0), "inference")));
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_infer_view),
        cmocka_unit_test(test_infer_rules_fire),
        cmocka_unit_test(test_infer_rules_calm),
        cmocka_unit_test(test_no_infer_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
