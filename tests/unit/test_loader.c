/* The loader's data order (lib/train/internal.h: train_loader_sample), without shards or threads:
 * a global batch of G samples split as 1 rank x B=G, 2 ranks x G/2, 4 ranks x G/4, and into
 * gradient-accumulation micro-batches, takes the same set of samples at every global step over
 * three epochs (38 samples and G=4 is the reported case: 9 steps an epoch, 2 samples left over,
 * where 2 ranks used to drift into the next epoch's order one step early); each epoch uses
 * distinct samples; a resume in the middle of epoch 2 (an empty order cache) continues the same
 * sequence. */
#include "lib/train/internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct split {
    int world, B, GA;
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted samples of global step `step` over all ranks of split sp (G of them into out);
 * every rank has its own order cache (pcs[rank]), as every process has. */
static void global_batch(uint64_t n, long seed, struct split sp, long step, struct train_perm *pcs,
                         uint32_t *out)
{
    long G = (long)sp.world * sp.B * sp.GA, k = 0;
    for (int rank = 0; rank < sp.world; rank++) {
        struct train_loader L = {.n = n,
                                 .B = sp.B,
                                 .GA = sp.GA,
                                 .rank = rank,
                                 .world = sp.world,
                                 .seed = seed,
                                 .steps_per_epoch = (long)(n / (uint64_t)G)};
        for (int a = 0; a < sp.GA; a++)
            for (int row = 0; row < sp.B; row++) {
                uint32_t x = train_loader_sample(&L, &pcs[rank], step, a, row);
                assert_true(x < n);
                out[k++] = x;
            }
    }
    assert_int_equal(k, G);
    qsort(out, (size_t)G, sizeof(*out), cmp_u32);
}

static void perms_reset(struct train_perm *pcs, int world, uint64_t n)
{
    for (int r = 0; r < world; r++) {
        free(pcs[r].perm);
        pcs[r].perm = malloc(n * sizeof(uint32_t));
        assert_non_null(pcs[r].perm);
        pcs[r].epoch = -1;
    }
}

static void perms_free(struct train_perm *pcs, int world)
{
    for (int r = 0; r < world; r++) {
        free(pcs[r].perm);
        pcs[r].perm = NULL;
    }
}

/* Every split of G gives the reference's (1 rank, B=G) samples at each step of 3 epochs; within
 * an epoch no sample repeats; a fresh start at `resume` (mid epoch 2) gives the same samples. */
static void check_splits(uint64_t n, long seed, long G, const struct split *sps, int nsp)
{
    long spe = (long)(n / (uint64_t)G), nsteps = 3 * spe, resume = spe + spe / 2 + 1;
    uint32_t *ref = malloc((size_t)(nsteps * G) * sizeof(uint32_t));
    uint32_t *got = malloc((size_t)G * sizeof(uint32_t));
    unsigned char *seen = calloc(n, 1);
    struct train_perm pcs[8] = {{0}};
    assert_true(ref && got && seen);
    perms_reset(pcs, 1, n);
    for (long s = 0; s < nsteps; s++) {
        if (s % spe == 0)
            memset(seen, 0, n);
        global_batch(n, seed, (struct split){1, (int)G, 1}, s, pcs, ref + s * G);
        for (long i = 0; i < G; i++) {
            assert_false(seen[ref[s * G + i]]); /* each sample once an epoch */
            seen[ref[s * G + i]] = 1;
        }
    }
    perms_free(pcs, 1);
    for (int i = 0; i < nsp; i++) {
        struct split sp = sps[i];
        assert_int_equal((long)sp.world * sp.B * sp.GA, G);
        perms_reset(pcs, sp.world, n);
        for (long s = 0; s < nsteps; s++) {
            global_batch(n, seed, sp, s, pcs, got);
            if (memcmp(got, ref + s * G, (size_t)G * sizeof(*got)))
                fail_msg("n %llu, %d ranks x batch %d x %d micro-batches: step %ld (epoch %ld) "
                         "takes other samples than 1 rank x batch %ld",
                         (unsigned long long)n,
                         sp.world,
                         sp.B,
                         sp.GA,
                         s + 1,
                         s / spe + 1,
                         G);
        }
        /* a resumed process: empty caches, first step in the middle of epoch 2 */
        perms_reset(pcs, sp.world, n);
        for (long s = resume; s < nsteps; s++) {
            global_batch(n, seed, sp, s, pcs, got);
            assert_memory_equal(got, ref + s * G, (size_t)G * sizeof(*got));
        }
        perms_free(pcs, sp.world);
    }
    free(ref);
    free(got);
    free(seen);
}

static void test_reported_case(void **state)
{
    (void)state;
    /* 38 samples, global batch 4: 9 steps an epoch, 2 samples of each epoch left out */
    const struct split sps[] = {{1, 4, 1}, {2, 2, 1}, {4, 1, 1}, {1, 2, 2}, {2, 1, 2}, {1, 1, 4}};
    check_splits(38, 3, 4, sps, (int)(sizeof(sps) / sizeof(sps[0])));
}

static void test_other_sizes(void **state)
{
    (void)state;
    const struct split g8[] = {{1, 8, 1}, {2, 4, 1}, {4, 2, 1}, {2, 2, 2}, {4, 1, 2}, {1, 2, 4}};
    check_splits(100, 1, 8, g8, (int)(sizeof(g8) / sizeof(g8[0])));
    check_splits(37, 42, 8, g8, (int)(sizeof(g8) / sizeof(g8[0])));
    check_splits(96, 7, 8, g8, (int)(sizeof(g8) / sizeof(g8[0]))); /* no tail */
    const struct split g12[] = {{1, 12, 1}, {2, 6, 1}, {4, 3, 1}, {2, 3, 2}, {4, 1, 3}};
    check_splits(101, 5, 12, g12, (int)(sizeof(g12) / sizeof(g12[0])));
}

/* Each epoch is its own shuffle: epochs 1 and 2 differ, and the same (seed, epoch) gives the
 * same order whatever the cache held before. */
static void test_epoch_orders(void **state)
{
    (void)state;
    uint64_t n = 38;
    struct train_loader L = {.n = n, .B = 4, .GA = 1, .world = 1, .seed = 3, .steps_per_epoch = 9};
    struct train_perm pc = {malloc(n * sizeof(uint32_t)), -1};
    uint32_t e1[36], e2[36], again[36];
    for (int k = 0; k < 36; k++)
        e1[k] = train_loader_sample(&L, &pc, k / 4, 0, k % 4);
    for (int k = 0; k < 36; k++)
        e2[k] = train_loader_sample(&L, &pc, 9 + k / 4, 0, k % 4);
    for (int k = 0; k < 36; k++)
        again[k] = train_loader_sample(&L, &pc, k / 4, 0, k % 4);
    assert_memory_not_equal(e1, e2, sizeof(e1));
    assert_memory_equal(e1, again, sizeof(e1));
    free(pc.perm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reported_case),
        cmocka_unit_test(test_other_sizes),
        cmocka_unit_test(test_epoch_orders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
