/* analyze: intervals, our trace files end to end (written by lib/trace, read back), the step
 * breakdown, rules with exact new command lines, stragglers, loader positions. */
#include "lib/analyze/analyze.h"
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char msgbuf[8192];
static FILE *capture(void)
{
    memset(msgbuf, 0, sizeof(msgbuf));
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    return fp;
}
static void release(FILE *fp)
{
    fclose(fp);
    swift_error_set_stream(NULL);
}

static void test_intervals(void **state)
{
    (void)state;
    struct swift_an_ival v[] = {{5, 7}, {0, 2}, {2, 3}, {6, 9}, {10, 11}};
    size_t n = swift_an_ival_merge(v, 5);
    assert_int_equal(n, 3); /* touching [0,2)+[2,3) merge, as HTA does */
    assert_true(v[0].b == 0 && v[0].e == 3 && v[1].b == 5 && v[1].e == 9 && v[2].b == 10);
    assert_true(swift_an_ival_len(v, n) == 8);
    struct swift_an_ival w[] = {{1, 6}}, out[8];
    size_t k = swift_an_ival_and(v, n, w, 1, out);
    assert_true(k == 2 && out[0].b == 1 && out[0].e == 3 && out[1].b == 5 && out[1].e == 6);
    k = swift_an_ival_sub(w, 1, v, n, out);
    assert_true(k == 1 && out[0].b == 3 && out[0].e == 5);
    assert_true(swift_an_ival_len_in(v, n, 2, 10.5) == 1 + 4 + 0.5);
}

static int cmp_ival_ref(const void *a, const void *b)
{
    const struct swift_an_ival *x = a, *y = b;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

/* The merge's own sort (typed, with a sorted-run shortcut) against qsort + the same merge, on
 * sizes around its insertion-sort cutoff, shuffled, nearly sorted and with many ties. */
static void test_intervals_sort(void **state)
{
    (void)state;
    uint32_t r = 12345;
    for (size_t n = 0; n < 400; n += n < 60 ? 1 : 37) {
        for (int kind = 0; kind < 3; kind++) {
            struct swift_an_ival *a = malloc((n + 1) * sizeof(*a)),
                                 *b = malloc((n + 1) * sizeof(*b));
            for (size_t i = 0; i < n; i++) {
                r = r * 1103515245u + 12345u;
                double t = kind == 0   ? (double)(r >> 8 & 1023)
                           : kind == 1 ? (double)i
                                       : (double)(r >> 8 & 7);
                if (kind == 1 && (r >> 20) % 5 == 0)
                    t -= 3; /* a few out of order */
                a[i] = b[i] = (struct swift_an_ival){t, t + (double)(r >> 16 & 15)};
            }
            size_t na = swift_an_ival_merge(a, n), nb = 0;
            if (n) {
                qsort(b, n, sizeof(*b), cmp_ival_ref);
                for (size_t i = 1; i < n; i++) {
                    if (b[i].b > b[nb].e)
                        b[++nb] = b[i];
                    else if (b[i].e > b[nb].e)
                        b[nb].e = b[i].e;
                }
                nb++;
            }
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, na * sizeof(*a));
            free(a);
            free(b);
        }
    }
}

static void test_kernel_types(void **state)
{
    (void)state;
    assert_int_equal(swift_an_kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float"),
                     SWIFT_KT_COMMUNICATION);
    assert_int_equal(swift_an_kernel_type("ncclDevKernel_Generic_4"), SWIFT_KT_COMMUNICATION);
    assert_int_equal(swift_an_kernel_type("Memcpy HtoD (Pageable -> Device)"), SWIFT_KT_MEMORY);
    assert_int_equal(swift_an_kernel_type("dma_request"), SWIFT_KT_MEMORY);
    assert_int_equal(swift_an_kernel_type("volta_sgemm_128x64_nn"), SWIFT_KT_COMPUTATION);
    assert_int_equal(swift_an_kernel_type("Stream Wait Event"), SWIFT_KT_OTHER);
    assert_int_equal(swift_an_kernel_type("Context Sync"), SWIFT_KT_OTHER);
}

static void test_argv_with(void **state)
{
    (void)state;
    json_t *a =
        json_pack("[s,s,s,s,s]", "swift-train", "--save_steps=10", "--lr", "1e-4", "my dir");
    char *s = swift_an_argv_with(a, "save-steps", "40");
    assert_string_equal(s, "swift-train --save-steps 40 --lr 1e-4 'my dir'");
    free(s);
    s = swift_an_argv_with(a, "num-workers", "4");
    assert_string_equal(s, "swift-train --save_steps=10 --lr 1e-4 'my dir' --num-workers 4");
    free(s);
    json_decref(a);
}

/* A remedy's command never names the traced run's output or trace: new ones that do not exist
 * yet, in every spelling of the options. */
static void test_argv_fresh_outputs(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_analyze_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char run[256], run2[256], tr[256], cmd[1024];
    snprintf(run, sizeof(run), "%s/runs/a", dir);
    snprintf(run2, sizeof(run2), "%s/runs/a-2", dir);
    snprintf(tr, sizeof(tr), "%s/t.trace.jsonl", dir);
    json_t *a = json_pack("[s,s,s,s,s,s]", "swift-train", "-o", run, "--trace", tr, "s/");
    char *s = swift_an_argv_with(a, "save-steps", "40");
    snprintf(cmd,
             sizeof(cmd),
             "swift-train -o %s/runs/a-2 --trace %s/t-2.trace.jsonl s/ --save-steps 40",
             dir,
             dir);
    assert_string_equal(s, cmd);
    free(s);
    /* runs/a-2 exists (the user ran the first remedy): a-3; a trace inside the run moves
     * with it; --output-dir=, -oDIR and --trace DIR/ spellings */
    assert_int_equal(swift_mkdirs(run2, 0755), 0);
    json_decref(a);
    char tin[300], eq[300];
    snprintf(tin, sizeof(tin), "%s/trace.jsonl", run);
    snprintf(eq, sizeof(eq), "--output_dir=%s/", run);
    a = json_pack("[s,s,s,s,s]", "swift-train", eq, "--trace", tin, "s/");
    s = swift_an_argv_command(a);
    snprintf(cmd,
             sizeof(cmd),
             "swift-train --output_dir=%s/runs/a-3 --trace %s/runs/a-3/trace.jsonl s/",
             dir,
             dir);
    assert_string_equal(s, cmd);
    free(s);
    json_decref(a);
    snprintf(eq, sizeof(eq), "-o%s", run2);
    snprintf(tin, sizeof(tin), "%s/", dir);
    a = json_pack("[s,s,s,s,s]", "swift-preprocess", eq, "--trace", tin, "d.jsonl");
    s = swift_an_argv_command(a);
    snprintf(cmd, sizeof(cmd), "swift-preprocess -o%s/runs/a-3 --trace %s-2/ d.jsonl", dir, dir);
    assert_string_equal(s, cmd);
    free(s);
    json_decref(a);
    /* nothing to rename: unchanged */
    a = json_pack("[s,s]", "swift-train", "s/");
    s = swift_an_argv_command(a);
    assert_string_equal(s, "swift-train s/");
    free(s);
    json_decref(a);
    rmdir(run2);
    snprintf(run2, sizeof(run2), "%s/runs", dir);
    rmdir(run2);
    rmdir(dir);
}

/* Write a real trace with lib/trace: 4 steps of 100 ms (30 ms data_wait, 30 forward, 30
 * backward, 5 optimizer, 5 ms untraced) and one 50 ms checkpoint. */
static void write_train_trace(const char *path)
{
    char *argv[] = {"swift-train", "--num-workers", "2", "--save-steps", "10", "shards/", NULL};
    struct swift_trace_config tc = {.stage = "train", .path = path, .argc = 6, .argv = argv};
    assert_int_equal(swift_trace_open(&tc), 0);
    int64_t t = swift_trace_now(), ms = 1000000;
    for (int s = 0; s < 4; s++) {
        int64_t b = t + s * 100 * ms;
        swift_trace_span("data", "data_wait", b, b + 30 * ms, NULL, 0);
        swift_trace_span("compute", "forward", b + 30 * ms, b + 60 * ms, NULL, 0);
        swift_trace_span("compute", "backward", b + 60 * ms, b + 90 * ms, NULL, 0);
        swift_trace_span("optim", "optimizer", b + 90 * ms, b + 95 * ms, NULL, 0);
        /* the GPU works 40 ms of each step (a CUPTI kernel record on a stream track) */
        swift_trace_span_tid("kernel", "gemm", 1000007, b + 35 * ms, b + 75 * ms, NULL, 0);
        struct swift_targ a[] = {SWIFT_TARG_I("step", s + 1), SWIFT_TARG_I("tokens", 4096)};
        swift_trace_span("step", "step", b, b + 100 * ms, a, 2);
    }
    swift_trace_span("ckpt", "save", t + 400 * ms, t + 450 * ms, NULL, 0);
    swift_trace_close();
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

static void test_our_trace_end_to_end(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_analyze.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/train.trace.jsonl", dir);
    write_train_trace(path);

    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_path(&set, path, 0), 1);
    assert_int_equal(set.src[0].kind, SWIFT_AN_SWIFT);
    assert_string_equal(set.src[0].stage, "train");
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    assert_int_equal(n, 1);
    const struct swift_an_proc *p = &procs[0];
    assert_int_equal(p->nsteps, 4);
    assert_int_equal(p->steps[0].step, 1);
    /* µs; the writer keeps ns, so these are exact to the ns */
    assert_true(p->part_avg[0] > 29999.9 && p->part_avg[0] < 30000.1); /* data_wait */
    assert_true(p->part_avg[1] > 29999.9 && p->part_avg[1] < 30000.1); /* forward */
    assert_true(p->part_avg[4] > 4999.9 && p->part_avg[4] < 5000.1);   /* optimizer */
    assert_true(p->part_avg[5] > 4999.9 && p->part_avg[5] < 5000.1);   /* other */
    assert_true(p->ckpt_us > 49999.9 && p->ckpt_us < 50000.1);

    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *ds = find_rule(r, "data_stall");
    assert_non_null(ds);
    /* durations people read are in ms (the evidence keeps µs numbers) */
    assert_string_equal(
        json_string_value(json_object_get(ds, "summary")),
        "30.00% of step time is spent waiting for data (30.0 ms of 100 ms per step)");
    assert_string_equal(json_string_value(json_object_get(ds, "severity")),
                        "critical"); /* 30% >= 2 x 10% */
    assert_string_equal(json_string_value(json_object_get(ds, "command")),
                        "swift-train --num-workers 4 --save-steps 10 shards/ --prefetch 8");
    /* ckpt: 50 of 450 ms = 11.1% > 5%: raise --save-steps to ceil(10 * 11.1 / 5) = 23 */
    json_t *ck = find_rule(r, "ckpt_stall");
    assert_non_null(ck);
    assert_string_equal(json_string_value(json_object_get(ck, "command")),
                        "swift-train --num-workers 2 --save-steps 23 shards/");
    assert_null(find_rule(r, "comm_bound"));
    /* GPU busy 160 of 400 ms: 40% < 50% */
    assert_true(p->gpu_util > 0.3999 && p->gpu_util < 0.4001);
    json_t *gi = find_rule(r, "gpu_idle");
    assert_non_null(gi);
    assert_string_equal(json_string_value(json_object_get(gi, "severity")), "warn");
    assert_non_null(strstr(json_string_value(json_object_get(gi, "summary")), "data loading"));
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
    unlink(path);
    rmdir(dir);
}

/* --profile steps: per-op spans nest inside forward and backward; they belong to the phase
 * that holds them (not to forward by their category), and make the per-op table. */
static void test_profile_phases(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_analyze.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/train.trace.jsonl", dir);
    struct swift_trace_config tc = {.stage = "train", .path = path};
    assert_int_equal(swift_trace_open(&tc), 0);
    int64_t t = swift_trace_now(), ms = 1000000;
    for (int s = 0; s < 2; s++) {
        int64_t b = t + s * 100 * ms;
        struct swift_targ fl[] = {SWIFT_TARG_D("flops", 8e9)};
        swift_trace_span("data", "data_wait", b, b + 5 * ms, NULL, 0);
        swift_trace_span("compute", "lm_head", b + 30 * ms, b + 38 * ms, fl, 1);
        swift_trace_span("compute", "forward", b + 5 * ms, b + 40 * ms, NULL, 0);
        swift_trace_span("compute", "lm_head.backward", b + 41 * ms, b + 60 * ms, fl, 1);
        swift_trace_span("compute", "mlp.down_proj.backward", b + 61 * ms, b + 70 * ms, NULL, 0);
        swift_trace_span("compute", "layer.0.backward", b + 60 * ms, b + 89 * ms, NULL, 0);
        swift_trace_span("compute", "backward", b + 40 * ms, b + 90 * ms, NULL, 0);
        swift_trace_span("optim", "optimizer", b + 90 * ms, b + 95 * ms, NULL, 0);
        struct swift_targ a[] = {SWIFT_TARG_I("step", s + 1)};
        swift_trace_span("step", "step", b, b + 100 * ms, a, 1);
    }
    swift_trace_close();
    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_path(&set, path, 0), 1);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    const struct swift_an_proc *p = &procs[0];
    static const double want[] = {5000, 35000, 50000, 0, 5000, 5000}; /* µs per step */
    for (int k = 0; k < 6; k++)
        assert_true(p->part_avg[k] > want[k] - 0.5 && p->part_avg[k] < want[k] + 0.5);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *ops = json_object_get(json_array_get(json_object_get(r, "processes"), 0), "ops");
    assert_int_equal(json_integer_value(json_object_get(ops, "steps")), 2);
    assert_int_equal(json_integer_value(json_object_get(ops, "n_rows")), 4);
    /* by self time: layer.0.backward 29 - 9 ms, lm_head.backward 19, the projection 9, lm_head 8 */
    static const char *const names[] = {
        "layer.0.backward", "lm_head.backward", "mlp.down_proj.backward", "lm_head"};
    static const char *const phases[] = {"backward", "backward", "backward", "forward"};
    static const double self[] = {20000, 19000, 9000, 8000}, total[] = {29000, 19000, 9000, 8000};
    for (size_t i = 0; i < 4; i++) {
        json_t *row = json_array_get(json_object_get(ops, "rows"), i);
        assert_string_equal(json_string_value(json_object_get(row, "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(row, "phase")), phases[i]);
        double su = json_number_value(json_object_get(row, "self_us_per_step"));
        double tu = json_number_value(json_object_get(row, "total_us_per_step"));
        assert_true(su > self[i] - 0.5 && su < self[i] + 0.5);
        assert_true(tu > total[i] - 0.5 && tu < total[i] + 0.5);
        assert_true(json_number_value(json_object_get(row, "calls_per_step")) == 1);
    }
    /* lm_head: 8e9 flops in 8 ms = 1000 GFLOP/s; layer spans carry none */
    double g = json_number_value(
        json_object_get(json_array_get(json_object_get(ops, "rows"), 3), "gflops"));
    assert_true(g > 999.9 && g < 1000.1);
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(ops, "rows"), 0), "gflops")));
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
    unlink(path);

    /* a process without steps: wall time by its top-level spans, no step time */
    snprintf(path, sizeof(path), "%s/export.trace.jsonl", dir);
    struct swift_trace_config te = {.stage = "export", .path = path};
    assert_int_equal(swift_trace_open(&te), 0);
    t = swift_trace_now();
    swift_trace_span("export", "read", t + 1 * ms, t + 2 * ms, NULL, 0);
    swift_trace_span("export", "convert", t, t + 10 * ms, NULL, 0);
    swift_trace_span("export", "write", t + 11 * ms, t + 12 * ms, NULL, 0);
    swift_trace_close();
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_path(&set, path, 0), 1);
    swift_an_procs_build(&set, &o, &procs, &n);
    r = swift_an_report_build(&set, procs, n, &o);
    json_t *pj = json_array_get(json_object_get(r, "processes"), 0);
    assert_true(json_is_null(json_object_get(pj, "breakdown")));
    assert_true(json_is_null(json_object_get(pj, "step_time_us")));
    assert_true(json_is_null(json_object_get(pj, "ops")));
    json_t *ph = json_object_get(pj, "phases");
    assert_int_equal(json_integer_value(json_object_get(ph, "n_rows")), 2);
    json_t *r0 = json_array_get(json_object_get(ph, "rows"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "name")), "convert");
    double us = json_number_value(json_object_get(r0, "us"));
    assert_true(us > 9999.5 && us < 10000.5);
    double un = json_number_value(json_object_get(ph, "untraced_us")); /* 10..11 ms */
    assert_true(un > 999.5 && un < 1000.5);
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
    unlink(path);
    rmdir(dir);
}

static const char *rank_trace(int rank, int data_ms)
{
    static char buf[4096];
    int len =
        snprintf(buf,
                 sizeof(buf),
                 "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":"
                 "{\"stage\":\"train\",\"rank\":%d,\"world_size\":2,\"host\":\"n%d\","
                 "\"clock_offset_us\":%d}}\n",
                 rank,
                 rank,
                 rank * 1000);
    for (int s = 0; s < 3; s++) {
        long b = 1000000 + s * 200000 + rank * 1000;
        len += snprintf(buf + len,
                        sizeof(buf) - (size_t)len,
                        "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":1,\"tid\":1,"
                        "\"ts\":%ld,\"dur\":%d,\"args\":{\"step\":%d}}\n"
                        "{\"ph\":\"X\",\"cat\":\"data\",\"name\":\"data_wait\",\"pid\":1,\"tid\":1,"
                        "\"ts\":%ld,\"dur\":%d}\n"
                        "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"grad_sync\",\"pid\":1,\"tid\":1,"
                        "\"ts\":%ld,\"dur\":10000}\n",
                        b,
                        100000 + data_ms * 1000,
                        s,
                        b,
                        data_ms * 1000,
                        b + data_ms * 1000);
    }
    return buf;
}

static void test_straggler(void **state)
{
    (void)state;
    struct swift_an_set set;
    swift_an_set_init(&set);
    const char *t0 = rank_trace(0, 5);
    assert_int_equal(swift_an_load_buffer(&set, "r0.trace.jsonl", t0, strlen(t0)), 0);
    const char *t1 = rank_trace(1, 45); /* 40 ms more data wait per step */
    assert_int_equal(swift_an_load_buffer(&set, "r1.trace.jsonl", t1, strlen(t1)), 0);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    /* clock offsets align rank 1 (1000 µs ahead) onto rank 0 */
    assert_true(procs[1].steps[0].ts == procs[0].steps[0].ts);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *b = find_rule(r, "straggler");
    assert_non_null(b);
    assert_int_equal(json_integer_value(json_object_get(b, "rank")), 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "evidence"), "phase")),
                        "data_wait");
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
}

/* Collectives matched across ranks: rank 0 reaches the step's grad_sync at 50 ms and waits
 * there for rank 1 (at 95 ms): 45 ms of skew charged to rank 1, 5 ms of transfer each, so
 * comm_bound (50% of rank 0's step in grad_sync) does not fire; bandwidth as nccl-tests: 4 MB in
 * 5 ms is 0.8 GB/s algbw, x 2(n-1)/n = 1.5 for a 4-rank all-reduce. */
static const char *coll_trace(int rank)
{
    static char buf[2048];
    int late = rank == 1 ? 95000 : 50000;
    snprintf(buf,
             sizeof(buf),
             "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":"
             "{\"stage\":\"train\",\"rank\":%d,\"world_size\":4,\"host\":\"n%d\"}}\n"
             "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":1,\"tid\":1,"
             "\"ts\":1000000,\"dur\":100000,\"args\":{\"step\":1}}\n"
             "{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"forward\",\"pid\":1,\"tid\":1,"
             "\"ts\":1000000,\"dur\":%d}\n"
             "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"grad_sync\",\"pid\":1,\"tid\":1,"
             "\"ts\":%d,\"dur\":%d,\"args\":{\"bytes\":4000000,\"algo\":\"nccl\","
             "\"world_size\":4,\"step\":1}}\n",
             rank,
             rank,
             late,
             1000000 + late,
             100000 - late);
    return buf;
}

/* A network link, not NVLink: 2 ranks arrive together at a grad_sync of 107136 bytes (the
 * Llama fixture's gradients) that takes 50 ms: algbw = busbw (factor 1 for 2 ranks) = 2.14 MB/s,
 * which the report used to round to 0 GB/s; 4 significant digits now. */
static const char *slow_link_trace(int rank)
{
    static char buf[2048];
    snprintf(buf,
             sizeof(buf),
             "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":"
             "{\"stage\":\"train\",\"rank\":%d,\"world_size\":2,\"host\":\"node%d\"}}\n"
             "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":1,\"tid\":1,"
             "\"ts\":1000000,\"dur\":100000,\"args\":{\"step\":1}}\n"
             "{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"forward\",\"pid\":1,\"tid\":1,"
             "\"ts\":1000000,\"dur\":50000}\n"
             "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"grad_sync\",\"pid\":1,\"tid\":1,"
             "\"ts\":1050000,\"dur\":50000,\"args\":{\"bytes\":107136,\"algo\":"
             "\"mpi_iallreduce_sum\",\"world_size\":2,\"step\":1}}\n",
             rank,
             rank);
    return buf;
}

static void test_collectives_slow_link(void **state)
{
    (void)state;
    struct swift_an_set set;
    swift_an_set_init(&set);
    for (int r = 0; r < 2; r++) {
        const char *t = slow_link_trace(r);
        char name[32];
        snprintf(name, sizeof(name), "r%d.trace.jsonl", r);
        assert_int_equal(swift_an_load_buffer(&set, name, t, strlen(t)), 0);
    }
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *c0 = json_array_get(json_object_get(r, "collectives"), 0);
    assert_non_null(c0);
    assert_true(json_number_value(json_object_get(c0, "transfer_us")) == 50000);
    assert_true(json_number_value(json_object_get(c0, "algbw_gbps")) == 0.002143);
    assert_true(json_number_value(json_object_get(c0, "busbw_gbps")) == 0.002143);
    json_t *b = find_rule(r, "comm_bound");
    assert_non_null(b);
    assert_true(json_number_value(json_object_get(json_object_get(b, "evidence"), "busbw_gbps")) ==
                0.002143);
    char t[32];
    assert_string_equal(swift_an_bw_text(t, sizeof(t), 0.00214272), "2.14 MB/s");
    assert_string_equal(swift_an_bw_text(t, sizeof(t), 1.5), "1.50 GB/s");
    assert_true(swift_an_bw_round(450) == 450 && swift_an_bw_round(0.8) == 0.8);
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
}

static void test_collectives(void **state)
{
    (void)state;
    struct swift_an_set set;
    swift_an_set_init(&set);
    for (int r = 0; r < 2; r++) {
        const char *t = coll_trace(r);
        char name[32];
        snprintf(name, sizeof(name), "r%d.trace.jsonl", r);
        assert_int_equal(swift_an_load_buffer(&set, name, t, strlen(t)), 0);
    }
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *c0 = json_array_get(json_object_get(r, "collectives"), 0);
    json_t *c1 = json_array_get(json_object_get(r, "collectives"), 1);
    assert_non_null(c1);
    assert_int_equal(json_integer_value(json_object_get(c0, "matched")), 1);
    assert_true(json_number_value(json_object_get(c0, "skew_us")) == 45000);
    assert_true(json_number_value(json_object_get(c0, "transfer_us")) == 5000);
    assert_true(json_number_value(json_object_get(c0, "algbw_gbps")) == 0.8);
    assert_true(json_number_value(json_object_get(c0, "busbw_gbps")) == 1.2);
    assert_true(json_number_value(json_object_get(c1, "skew_us")) == 0);
    assert_int_equal(json_integer_value(json_object_get(c1, "arrived_last")), 1);
    assert_true(json_number_value(json_object_get(c1, "skew_caused_us")) == 45000);
    assert_null(find_rule(r, "comm_bound")); /* before: rank 0, 50% of its step */
    json_t *b = find_rule(r, "straggler");
    assert_non_null(b);
    assert_int_equal(json_integer_value(json_object_get(b, "rank")), 1);
    assert_true(json_number_value(
                    json_object_get(json_object_get(b, "evidence"), "skew_caused_us")) == 45000);
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
}

/* serial_preprocess, comm_bound and memory_headroom on our traces, with the new command lines */
static void test_more_rules(void **state)
{
    (void)state;
    struct swift_an_set set;
    swift_an_set_init(&set);
    const char *pre =
        "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":3,\"tid\":3,\"ts\":0,\"args\":{\"stage\":"
        "\"preprocess\",\"rank\":0,\"world_size\":1,\"argv\":[\"swift-preprocess\",\"--threads\","
        "\"1\",\"data.jsonl\"]}}\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"read\",\"pid\":3,\"tid\":3,\"ts\":0,\"dur\":100}\n"
        "{\"ph\":\"X\",\"cat\":\"tokenize\",\"name\":\"tok\",\"pid\":3,\"tid\":4,\"ts\":100,"
        "\"dur\":800}\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"write\",\"pid\":3,\"tid\":3,\"ts\":900,\"dur\":"
        "100}"
        "\n";
    assert_int_equal(swift_an_load_buffer(&set, "pre.trace.jsonl", pre, strlen(pre)), 0);
    const char *tr =
        "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":5,\"tid\":5,\"ts\":0,\"args\":{\"stage\":"
        "\"train\",\"argv\":[\"swift-train\",\"--gradient_accumulation_steps=4\","
        "\"--per-device-train-batch-size\",\"8\",\"s/\"]}}\n"
        "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":5,\"tid\":5,\"ts\":0,\"dur\":"
        "1000,"
        "\"args\":{\"step\":1}}\n"
        "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"grad_sync\",\"pid\":5,\"tid\":5,\"ts\":500,"
        "\"dur\":450}\n"
        "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":5,\"tid\":5,\"ts\":600,\"args\":{\"allocated\":"
        "95,"
        "\"total\":100,\"device\":0}}\n";
    assert_int_equal(swift_an_load_buffer(&set, "train.trace.jsonl", tr, strlen(tr)), 0);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *b = find_rule(r, "serial_preprocess");
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "swift-preprocess --threads 8 data.jsonl");
    b = find_rule(r, "comm_bound"); /* 45% > 40% */
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "severity")), "warn");
    assert_string_equal(
        json_string_value(json_object_get(b, "command")),
        "swift-train --gradient-accumulation-steps 8 --per-device-train-batch-size 8 s/");
    b = find_rule(r, "memory_headroom"); /* 95% > 90% */
    assert_non_null(b);
    assert_string_equal(
        json_string_value(json_object_get(b, "command")),
        "swift-train --gradient_accumulation_steps=4 --per-device-train-batch-size 4 s/");
    assert_null(find_rule(r, "data_stall"));
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
}

/* 10 steps of 10 ms: forward 3 ms, backward 3 ms, optimizer opt_us, except every `every`-th
 * step whose optimizer takes slow_us (the step grows with it). */
static json_t *oversub_report(const char *meta_args, double opt_us, double slow_us, int every,
                              const struct swift_analyze_opts *o)
{
    char *buf = malloc(1 << 16);
    size_t n =
        (size_t)snprintf(buf,
                         1 << 16,
                         "{\"ph\":\"M\",\"name\":\"swift_meta\",\"pid\":5,\"tid\":5,\"ts\":0,"
                         "\"args\":{\"stage\":\"train\",%s}}\n",
                         meta_args);
    double t = 1000;
    for (int s = 1; s <= 10; s++) {
        double opt = every && s % every == 0 ? slow_us : opt_us;
        double dur = 6000 + opt + 100;
        n += (size_t)snprintf(
            buf + n,
            (1 << 16) - n,
            "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":5,\"tid\":5,\"ts\":%.0f,"
            "\"dur\":%.0f,\"args\":{\"step\":%d}}\n"
            "{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"forward\",\"pid\":5,\"tid\":5,"
            "\"ts\":%.0f,\"dur\":3000}\n"
            "{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"backward\",\"pid\":5,\"tid\":5,"
            "\"ts\":%.0f,\"dur\":3000}\n"
            "{\"ph\":\"X\",\"cat\":\"optim\",\"name\":\"optimizer\",\"pid\":5,\"tid\":5,"
            "\"ts\":%.0f,\"dur\":%.0f}\n",
            t,
            dur,
            s,
            t,
            t + 3000,
            t + 6000,
            opt);
        t += dur + 10;
    }
    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_buffer(&set, "o.trace.jsonl", buf, n), 0);
    free(buf);
    struct swift_an_proc *procs;
    size_t np;
    swift_an_procs_build(&set, o, &procs, &np);
    json_t *r = swift_an_report_build(&set, procs, np, o);
    swift_an_procs_free(procs, np);
    swift_an_set_release(&set);
    return r;
}

/* oversubscription: a host phase's p90 far above its median, with a share of the step */
static void test_oversubscription(void **state)
{
    (void)state;
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    const char *meta = "\"omp_threads\":4,\"omp_wait_policy\":\"spin, then sleep\","
                       "\"argv\":[\"swift-train\",\"-j\",\"4\",\"-o\",\"/nonexistent/r\",\"s/\"]";
    /* optimizer 1 ms, 100 ms in 2 of 10 steps: p90 100x the median, 18% of the mean step */
    json_t *r = oversub_report(meta, 1000, 100000, 5, &o);
    json_t *b = find_rule(r, "oversubscription");
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "severity")), "critical");
    json_t *ev = json_object_get(b, "evidence");
    assert_string_equal(json_string_value(json_object_get(ev, "phase")), "optimizer");
    assert_true(json_real_value(json_object_get(ev, "median_us")) == 1000);
    assert_true(json_real_value(json_object_get(ev, "p90_us")) == 100000);
    assert_true(json_real_value(json_object_get(b, "value")) == 100);
    assert_int_equal(json_integer_value(json_object_get(ev, "omp_threads")), 4);
    assert_non_null(strstr(json_string_value(json_object_get(b, "summary")),
                           "optimizer time varies between identical steps: median 1.00 ms, p90 "
                           "100.00 ms (100.0x)"));
    assert_non_null(strstr(json_string_value(json_object_get(b, "summary")),
                           "4 OpenMP threads, wait policy spin, then sleep"));
    /* the run spun: passive waiting and half the threads, into a new run directory */
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "OMP_WAIT_POLICY=passive swift-train -o /nonexistent/r-2 s/ --threads 2");
    assert_non_null(strstr(json_string_value(json_object_get(b, "remedy")), "OMP_WAIT_POLICY"));
    json_decref(r);
    /* 2.5x: under the default threshold of 3; --threshold oversubscription=2 makes it a warn */
    r = oversub_report(meta, 1000, 2500, 5, &o);
    assert_null(find_rule(r, "oversubscription"));
    json_decref(r);
    struct swift_analyze_opts o2 = o;
    assert_int_equal(swift_an_threshold_set(&o2.th, "oversubscription=2"), 0);
    r = oversub_report(meta, 1000, 2500, 5, &o2);
    b = find_rule(r, "oversubscription");
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "severity")), "warn");
    json_decref(r);
    /* a wide spread in a phase too small to matter (10 us median, 300 us in 2 steps: 1% of
     * the step) is not reported; nor is one slow step in 10 (p90 = the median) */
    r = oversub_report(meta, 10, 300, 5, &o);
    assert_null(find_rule(r, "oversubscription"));
    json_decref(r);
    r = oversub_report(meta, 1000, 100000, 10, &o);
    assert_null(find_rule(r, "oversubscription"));
    json_decref(r);
    /* passive already (our default): fewer threads, no environment prefix; a GPU run: none */
    r = oversub_report("\"omp_threads\":2,\"omp_wait_policy\":\"passive (default)\","
                       "\"argv\":[\"swift-train\",\"--threads\",\"2\",\"s/\"]",
                       1000,
                       100000,
                       5,
                       &o);
    b = find_rule(r, "oversubscription");
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "swift-train --threads 1 s/");
    json_decref(r);
    r = oversub_report("\"device\":\"cuda:0\"", 1000, 100000, 5, &o);
    assert_null(find_rule(r, "oversubscription"));
    json_decref(r);
}

static void test_loader_positions(void **state)
{
    (void)state;
    swift_set_progname("swift-trace-analyze");
    struct swift_an_set set;
    swift_an_set_init(&set);
    FILE *fp = capture();
    /* a killed writer leaves a partial last line: kept with a warning */
    const char *jl =
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"read\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"na";
    assert_int_equal(swift_an_load_buffer(&set, "k.trace.jsonl", jl, strlen(jl)), 0);
    assert_int_equal(set.src[0].n, 1);
    assert_int_equal(set.src[0].damage.tail_line, 2);
    assert_int_equal(set.src[0].damage.bad, 0);
    /* a line that is not JSON: named with file, line and byte, skipped and counted; the lines
     * after it are read (a line cut inside a string, an event with a bad field, trailing
     * bytes and a non-object are bad lines too) */
    const char *bad =
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}\n"
        "{\"ph\":\"X\" \"cat\":1}\n"
        "{\"ph\":\"X\",\"cat\":\"comp\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":\"x\",\"dur\":2}\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"c\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":2} junk\n"
        "[1,2]\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"d\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":2}\n";
    assert_int_equal(swift_an_load_buffer(&set, "b.trace.jsonl", bad, strlen(bad)), 0);
    assert_int_equal(set.src[1].n, 2);
    assert_int_equal(set.src[1].damage.bad, 5);
    assert_int_equal(set.src[1].damage.first_bad[0], 2);
    assert_int_equal(set.src[1].damage.first_bad[1], 3);
    assert_int_equal(set.src[1].damage.first_bad[2], 4);
    assert_int_equal(set.src[1].damage.tail_line, 0);
    /* a whole last line without its newline is an event, not a truncated tail; bytes after an
     * event make its line bad */
    const char *nonl =
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2} x\n"
        "{\"ph\":\"X\",\"cat\":\"io\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":2}";
    assert_int_equal(swift_an_load_buffer(&set, "n.trace.jsonl", nonl, strlen(nonl)), 0);
    assert_int_equal(set.src[2].n, 1);
    assert_int_equal(set.src[2].damage.bad, 1);
    assert_int_equal(set.src[2].damage.tail_line, 0);
    /* empty, and nothing but bad lines: the file fails */
    assert_int_equal(swift_an_load_buffer(&set, "e.trace.jsonl", "", 0), -1);
    assert_int_equal(swift_an_load_buffer(&set, "g.trace.jsonl", "x\ny\n", 4), -1);
    /* an unknown category in our own trace is named */
    const char *unk =
        "{\"ph\":\"X\",\"cat\":\"bogus\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}\n";
    assert_int_equal(swift_an_load_buffer(&set, "u.trace.jsonl", unk, strlen(unk)), 0);
    fflush(fp);
    assert_non_null(strstr(msgbuf, "k.trace.jsonl:2: truncated last line ignored"));
    assert_non_null(strstr(msgbuf, "swift-trace-analyze:b.trace.jsonl:2: byte 78: "));
    assert_non_null(strstr(msgbuf, "b.trace.jsonl:3: byte 83: the line ends inside a JSON value"));
    assert_non_null(strstr(msgbuf, "b.trace.jsonl: 5 bad lines skipped in all"));
    assert_non_null(
        strstr(msgbuf, "n.trace.jsonl:1: byte 63: unexpected data after the event (line skipped)"));
    assert_null(strstr(msgbuf, "n.trace.jsonl:2"));
    assert_null(strstr(msgbuf, "b.trace.jsonl:5:")); /* only the first 3 are named */
    assert_non_null(strstr(msgbuf, "swift-trace-analyze: e.trace.jsonl: empty trace (no events)"));
    assert_non_null(strstr(msgbuf, "g.trace.jsonl: no trace event could be read (2 bad lines)"));
    assert_non_null(strstr(msgbuf, "u.trace.jsonl:1: byte 0: unknown category \"bogus\""));
    release(fp);
    assert_int_equal(set.n, 4);
    assert_int_equal(set.nfailed, 2);
    assert_int_equal(set.bad_lines, 6);
    swift_an_set_release(&set);
}

/* The op roofline takes the shapes from the one read of the loader: a Kineto trace recorded
 * with record_shapes (tests/ref/fixtures/roofline/kineto_shapes.json) still has its table when
 * the file is gone before the analysis (it was read a second time for "Input Dims"). */
static void test_oproof_one_read(void **state)
{
    (void)state;
    static const char trace[] =
        "{\"traceEvents\":[\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":12,\"tid\":\"12\","
        "\"ts\":1623143089860,\"dur\":60,\"args\":{\"External id\":6,\"Input "
        "Dims\":[[32,2048],[1000,2048],[1000]],\"Input "
        "type\":[\"float\",\"float\",\"float\"],\"Concrete Inputs\":[\"\",\"\",\"\"]}},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::addmm\",\"pid\":12,\"tid\":\"12\","
        "\"ts\":1623143089861.25,\"dur\":35.5,\"args\":{\"External id\":7,\"Input "
        "Dims\":[[1000],[32,2048],[2048,1000],[],[]],\"Input "
        "type\":[\"float\",\"float\",\"float\",\"Scalar\",\"Scalar\"],\"Input "
        "Strides\":[[1],[2048,1],[1,2048],[],[]],\"Concrete "
        "Inputs\":[\"\",\"\",\"\",\"1\",\"1\"]}},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::_scaled_dot_product_flash_attention\","
        "\"pid\":12,\"tid\":\"12\",\"ts\":1623143089930,\"dur\":20,\"args\":{\"External "
        "id\":8,\"Input Dims\":[[2,16,1024,64],[2,16,1024,64],[2,16,1024,64],[],[],[],[]],\"Input "
        "type\":[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\",\"Bool\","
        "\"Bool\",\"\"],\"Concrete Inputs\":[\"\",\"\",\"\",\"0.\",\"True\",\"False\",\"\"]}},\n"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":12,\"tid\":"
        "12,\"ts\":1623143089870,\"dur\":9,\"args\":{\"cbid\":211,\"correlation\":901,\"external "
        "id\":7}},\n"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"volta_sgemm_128x64_nn\",\"pid\":0,\"tid\":"
        "\"stream "
        "7\",\"ts\":1623143089890.5,\"dur\":120.25,\"args\":{\"queued\":0,\"device\":0,\"context\":"
        "1,\"stream\":7,\"correlation\":901,\"external id\":7,\"blocks per SM\":2.5}},\n"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"flash_fwd_kernel\",\"pid\":0,\"tid\":\"stream "
        "7\",\"ts\":1623143089990,\"dur\":50,\"args\":{\"device\":0,\"stream\":7,\"correlation\":"
        "902,\"external id\":8}}\n"
        "],\"deviceProperties\":[{\"id\":0,\"name\":\"NVIDIA H100 80GB "
        "HBM3\",\"totalGlobalMem\":85520809984}]}\n";
    char path[] = "/tmp/test_oproof.XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, trace, sizeof(trace) - 1), (ssize_t)(sizeof(trace) - 1));
    close(fd);
    struct swift_an_set set;
    swift_an_set_init(&set);
    assert_int_equal(swift_an_load_path(&set, path, 0), 1);
    unlink(path);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    struct swift_an_proc *procs;
    size_t n;
    swift_an_procs_build(&set, &o, &procs, &n);
    json_t *r = swift_an_report_build(&set, procs, n, &o);
    json_t *rf = json_object_get(json_array_get(json_object_get(r, "processes"), 0), "op_roofline");
    assert_true(json_is_object(rf));
    assert_int_equal(json_integer_value(json_object_get(rf, "ops_with_shapes")), 3);
    json_t *rows = json_object_get(rf, "rows");
    assert_int_equal(json_array_size(rows), 2);
    json_t *lin = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(lin, "name")), "aten::linear");
    assert_true(fabs(json_number_value(json_object_get(lin, "gflop")) - 0.131072) < 1e-9);
    json_decref(r);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intervals),
        cmocka_unit_test(test_intervals_sort),
        cmocka_unit_test(test_kernel_types),
        cmocka_unit_test(test_argv_with),
        cmocka_unit_test(test_argv_fresh_outputs),
        cmocka_unit_test(test_our_trace_end_to_end),
        cmocka_unit_test(test_profile_phases),
        cmocka_unit_test(test_straggler),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_collectives_slow_link),
        cmocka_unit_test(test_loader_positions),
        cmocka_unit_test(test_more_rules),
        cmocka_unit_test(test_oversubscription),
        cmocka_unit_test(test_oproof_one_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
