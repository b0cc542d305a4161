/* dist without a launcher: one rank, no MPI, collectives are no-ops; ZeRO-1 ranges cut the
 * concatenated parameters into contiguous, disjoint, covering pieces. */
#include "lib/train/dist.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void no_launcher(void)
{
    const char *v[] = {
        "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_STEP_ID", NULL};
    for (int i = 0; v[i]; i++)
        unsetenv(v[i]);
}

static void test_single_process(void **state)
{
    (void)state;
    no_launcher();
    struct swift_dist d;
    assert_int_equal(swift_dist_init(&d, 5), 0);
    assert_int_equal(d.rank, 0);
    assert_int_equal(d.world, 1);
    assert_int_equal(d.mpi, 0);
    assert_string_equal(d.launcher, "none");
    int flag = 1;
    double v[2] = {3, 4};
    assert_int_equal(swift_dist_checkin(&d, "x", 1, &flag, v, 2), 0);
    assert_int_equal(flag, 1);
    assert_true(v[0] == 3 && v[1] == 4);
    float g[3] = {1, 2, 3}, w[3] = {0};
    struct swift_param p = {.name = "a", .w = w, .g = g, .ndim = 1, .shape = {3, 0}, .numel = 3};
    assert_int_equal(swift_dist_allreduce_grads(&d, &p, 1, 1), 0);
    assert_true(g[0] == 1 && g[2] == 3);
    swift_dist_finalize(&d);
    swift_dist_finalize(&d); /* safe twice */
}

/* 3 parameters of 5, 2 and 6 floats over 1..5 ranks: views cover [lo, hi) exactly */
static void test_zero_ranges(void **state)
{
    (void)state;
    float w[13], g[13];
    for (int i = 0; i < 13; i++)
        w[i] = (float)i, g[i] = (float)(100 + i);
    struct swift_param p[3] = {
        {.name = "a", .w = w, .g = g, .numel = 5, .decay = 1},
        {.name = "b", .w = w + 5, .g = g + 5, .numel = 2, .decay = 0},
        {.name = "c", .w = w + 7, .g = g + 7, .numel = 6, .decay = 1},
    };
    for (int world = 1; world <= 5; world++) {
        size_t covered = 0;
        for (int rank = 0; rank < world; rank++) {
            struct swift_dist d;
            memset(&d, 0, sizeof(d));
            d.world = world;
            d.rank = rank;
            assert_int_equal(swift_dist_shard_init(&d, p, 3), 0);
            assert_int_equal(d.total, 13);
            assert_int_equal(d.lo, covered);
            size_t n = 0;
            for (int i = 0; i < d.nshard; i++) {
                /* each view is the contiguous continuation of the previous one */
                assert_int_equal(d.shard[i].w - w, (ptrdiff_t)(d.lo + n));
                assert_int_equal(d.shard[i].g - g, (ptrdiff_t)(d.lo + n));
                assert_int_equal(d.shard[i].decay, d.lo + n >= 5 && d.lo + n < 7 ? 0 : 1);
                n += d.shard[i].numel;
            }
            assert_int_equal(n, d.hi - d.lo);
            covered = d.hi;
            free(d.shard);
            free(d.flat);
        }
        assert_int_equal(covered, 13);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_process),
        cmocka_unit_test(test_zero_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
