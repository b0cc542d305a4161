/* CUPTI activity records -> trace events (kernels/cuda/cupti_conv.c), on records built in memory
 * exactly as cupti_activity.h lays them out: no GPU needed. The converter reports through the
 * sink of kernels/device.h, which swift_trace_open() installs (lib/core/trace_device.c), so the
 * events land in the trace file read back here. Skipped (visibly) in builds without CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)
#include <cupti_runtime_cbid.h>

#include "kernels/cuda/cupti_conv.h"
#endif
#include "lib/core/trace.h"

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)

#define OFFSET_NS 1700000000000000000LL /* CUPTI clock + this = trace clock */
#define NLAUNCH 5
#define STREAM 7u

struct seen {
    int kernel, memcpy_, memset_, runtime, flow_s, flow_f, mem_counters, stream_named;
    int flows_matched;
    json_t *events;
};

static json_t *load_events(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    json_t *arr = json_array();
    char line[8192];
    while (fgets(line, sizeof(line), fp)) {
        json_error_t err;
        json_t *e = json_loads(line, 0, &err);
        assert_non_null(e);
        json_array_append_new(arr, e);
    }
    fclose(fp);
    return arr;
}

static const char *s_of(json_t *e, const char *k)
{
    json_t *v = json_object_get(e, k);
    return json_is_string(v) ? json_string_value(v) : "";
}

static json_int_t i_of(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    assert_true(json_is_number(v));
    return (json_int_t)json_number_value(v);
}

/* a step of host work: NLAUNCH launches of one kernel, a copy in, a memset, alloc + free */
static void emit_records(struct swift_cupti_conv *c)
{
    uint64_t t = 5000000; /* CUPTI ns */
    CUpti_ActivityMemory4 mem;
    memset(&mem, 0, sizeof(mem));
    mem.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    mem.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    mem.bytes = 1 << 20;
    mem.timestamp = t;
    mem.deviceId = 0;
    assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&mem), 1);
    mem.bytes = 3 << 20;
    mem.timestamp = t + 10;
    assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&mem), 1);

    CUpti_ActivityAPI api;
    memset(&api, 0, sizeof(api));
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
    api.start = t + 100;
    api.end = t + 2100;
    api.correlationId = 100;
    assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&api), 1);
    CUpti_ActivityMemcpy6 cp;
    memset(&cp, 0, sizeof(cp));
    cp.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    cp.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    cp.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    cp.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    cp.bytes = 16384;
    cp.start = t + 1000;
    cp.end = t + 2000; /* 16384 bytes in 1000 ns = 16.384 GB/s */
    cp.streamId = STREAM;
    cp.correlationId = 100;
    assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&cp), 1);

    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
    api.start = t + 3000;
    api.end = t + 3500;
    api.correlationId = 101;
    swift_cupti_convert(c, (CUpti_Activity *)&api);
    CUpti_ActivityMemset4 ms;
    memset(&ms, 0, sizeof(ms));
    ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    ms.bytes = 4096;
    ms.start = t + 4000;
    ms.end = t + 4200;
    ms.streamId = STREAM;
    ms.correlationId = 101;
    ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    swift_cupti_convert(c, (CUpti_Activity *)&ms);

    for (int i = 0; i < NLAUNCH; i++) {
        uint64_t h = t + 10000 + (uint64_t)i * 10000;
        api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        api.start = h;
        api.end = h + 3000;
        api.correlationId = 200 + (uint32_t)i;
        swift_cupti_convert(c, (CUpti_Activity *)&api);
        swift_cupti_kernel k;
        memset(&k, 0, sizeof(k));
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = h + 5000;
        k.end = h + 9000;
        k.streamId = STREAM;
        k.correlationId = 200 + (uint32_t)i;
        k.gridX = 128;
        k.gridY = k.gridZ = 1;
        k.blockX = 256;
        k.blockY = k.blockZ = 1;
        k.registersPerThread = 32;
        k.staticSharedMemory = 1024;
        k.dynamicSharedMemory = 2048;
        k.name = "_Z9k_rmsnormPfPKfi"; /* k_rmsnorm(float*, float const*, int) */
        assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&k), 1);
    }
    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
    api.start = t + 60000;
    api.end = t + 70000;
    api.correlationId = 300;
    swift_cupti_convert(c, (CUpti_Activity *)&api);

    mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    mem.bytes = 1 << 20;
    mem.timestamp = t + 80000;
    swift_cupti_convert(c, (CUpti_Activity *)&mem);

    CUpti_ActivityAPI drv; /* a kind we do not convert */
    memset(&drv, 0, sizeof(drv));
    drv.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    assert_int_equal(swift_cupti_convert(c, (CUpti_Activity *)&drv), 0);
}

static void test_records_to_events(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-cupti-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct swift_trace_config tc = {
        .stage = "test", .path = path, .world_size = 1, .device = "cuda:0"};
    assert_int_equal(swift_trace_open(&tc), 0);
    struct swift_cupti_conv c;
    swift_cupti_conv_init(&c, OFFSET_NS, 4242);
    c.total[0] = 141LL << 30;
    emit_records(&c);
    swift_trace_close();
    assert_int_equal(c.kernels, NLAUNCH);
    assert_int_equal(c.memcpys, 1);
    assert_int_equal(c.memsets, 1);
    assert_int_equal(c.runtime, NLAUNCH + 3);
    assert_int_equal(c.memory, 3);
    assert_int_equal(c.skipped, 1);
    assert_int_equal(c.allocated[0], 3 << 20);

    json_t *ev = load_events(path);
    int64_t gtid = SWIFT_GPU_TID(0, STREAM);
    int nk = 0, nrt = 0, ncp = 0, nms = 0, nfs = 0, nff = 0, nmem = 0, named = 0;
    json_int_t fs_ids[16], ff_ids[16];
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e)
    {
        const char *ph = s_of(e, "ph"), *cat = s_of(e, "cat"), *name = s_of(e, "name");
        json_t *args = json_object_get(e, "args");
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name") && i_of(e, "tid") == gtid) {
            assert_string_equal(s_of(args, "name"), "stream 7 (cuda:0)");
            named++;
        }
        if (!strcmp(ph, "X") && !strcmp(cat, "kernel")) {
            assert_string_equal(name, "k_rmsnorm(float*, float const*, int)");
            assert_int_equal(i_of(e, "tid"), gtid);
            assert_int_equal(i_of(args, "stream"), STREAM);
            assert_int_equal(i_of(args, "correlation"), 200 + nk);
            assert_int_equal(i_of(args, "shared memory"), 3072);
            json_t *grid = json_object_get(args, "grid");
            assert_true(json_is_array(grid) && json_array_size(grid) == 3);
            assert_int_equal(json_integer_value(json_array_get(grid, 0)), 128);
            /* CUPTI start 5000000 + 10000 + k*10000 + 5000 ns, + offset, in microseconds */
            double want = (double)(OFFSET_NS + 5015000LL + nk * 10000LL) / 1000.0;
            assert_true(fabs(json_number_value(json_object_get(e, "ts")) - want) < 0.01);
            assert_true(fabs(json_number_value(json_object_get(e, "dur")) - 4.0) < 1e-6);
            nk++;
        } else if (!strcmp(ph, "X") && !strcmp(cat, "cuda_runtime")) {
            assert_int_equal(i_of(e, "tid"), 4242);
            if (nrt == 0)
                assert_string_equal(name, "cudaMemcpyAsync");
            if (nrt >= 2 && nrt < 2 + NLAUNCH)
                assert_string_equal(name, "cudaLaunchKernel");
            if (nrt == 2 + NLAUNCH)
                assert_string_equal(name, "cudaStreamSynchronize");
            nrt++;
        } else if (!strcmp(ph, "X") && !strcmp(cat, "gpu_memcpy")) {
            assert_string_equal(name, "Memcpy HtoD (Pageable -> Device)");
            assert_int_equal(i_of(args, "bytes"), 16384);
            assert_true(fabs(json_number_value(json_object_get(args, "memory bandwidth (GB/s)")) -
                             16.384) < 1e-9);
            assert_int_equal(i_of(e, "tid"), gtid);
            ncp++;
        } else if (!strcmp(ph, "X") && !strcmp(cat, "gpu_memset")) {
            assert_string_equal(name, "Memset (Device)");
            assert_int_equal(i_of(args, "bytes"), 4096);
            nms++;
        } else if (!strcmp(ph, "s")) {
            assert_string_equal(cat, "flow");
            assert_int_equal(i_of(e, "tid"), 4242);
            fs_ids[nfs++] = i_of(e, "id");
        } else if (!strcmp(ph, "f")) {
            assert_int_equal(i_of(e, "tid"), gtid);
            assert_string_equal(s_of(e, "bp"), "e");
            ff_ids[nff++] = i_of(e, "id");
        } else if (!strcmp(ph, "C") && !strcmp(name, "memory")) {
            json_int_t want[] = {1 << 20, 4 << 20, 3 << 20};
            assert_true(nmem < 3);
            assert_int_equal(i_of(args, "allocated"), want[nmem]);
            assert_int_equal(i_of(args, "device"), 0);
            assert_int_equal(i_of(args, "total"), 141LL << 30);
            nmem++;
        }
    }
    assert_int_equal(nk, NLAUNCH);
    assert_int_equal(nrt, NLAUNCH + 3);
    assert_int_equal(ncp, 1);
    assert_int_equal(nms, 1);
    assert_int_equal(nmem, 3);
    assert_int_equal(named, 1);
    /* a flow from every launching call (not the synchronize) to its device op, same ids */
    assert_int_equal(nfs, NLAUNCH + 2);
    assert_int_equal(nff, NLAUNCH + 2);
    for (int a = 0; a < nfs; a++)
        assert_int_equal(fs_ids[a], ff_ids[a]);
    json_decref(ev);
    unlink(path);
}

static void test_runtime_names(void **state)
{
    (void)state;
    assert_string_equal(swift_cupti_runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
                        "cudaLaunchKernel");
    assert_string_equal(swift_cupti_runtime_name(999999), "cudaRuntimeApi#999999");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_to_events),
        cmocka_unit_test(test_runtime_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

static void test_no_cuda(void **state)
{
    (void)state;
    skip(); /* built without CUDA/CUPTI (make CUDA=0): no CUPTI record layouts to convert */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_cuda)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
