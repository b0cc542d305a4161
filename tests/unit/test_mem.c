/* mem — per-category accounting (lib/core/mem.h): current, peak, the categories at the total's
 * peak, tracked pointers, threads. */
#include "lib/core/mem.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <pthread.h>

static void test_mem_counts_and_peaks(void **state)
{
    (void)state;
    struct swift_mem_stats s;
    swift_mem_add(SWIFT_MEM_PARAMS, 1000);
    swift_mem_add(SWIFT_MEM_OPTIMIZER, 500);
    swift_mem_add(SWIFT_MEM_ACTIVATIONS, 300); /* total 1800: the peak */
    swift_mem_sub(SWIFT_MEM_ACTIVATIONS, 300);
    swift_mem_add(SWIFT_MEM_GRADS, 200); /* total 1700 */
    swift_mem_snapshot(&s);
    assert_int_equal(s.total, 1700);
    assert_int_equal(s.total_peak, 1800);
    assert_int_equal(s.cur[SWIFT_MEM_ACTIVATIONS], 0);
    assert_int_equal(s.peak[SWIFT_MEM_ACTIVATIONS], 300);
    assert_int_equal(s.at_peak[SWIFT_MEM_PARAMS], 1000);
    assert_int_equal(s.at_peak[SWIFT_MEM_OPTIMIZER], 500);
    assert_int_equal(s.at_peak[SWIFT_MEM_ACTIVATIONS], 300);
    assert_int_equal(s.at_peak[SWIFT_MEM_GRADS], 0);
    /* a new peak moves every category's at-peak value */
    swift_mem_add(SWIFT_MEM_OTHER, 150); /* total 1850 */
    swift_mem_snapshot(&s);
    assert_int_equal(s.total_peak, 1850);
    assert_int_equal(s.at_peak[SWIFT_MEM_ACTIVATIONS], 0);
    assert_int_equal(s.at_peak[SWIFT_MEM_GRADS], 200);
    assert_int_equal(s.at_peak[SWIFT_MEM_OTHER], 150);
    /* a reset starts the peaks over from what is held */
    swift_mem_sub(SWIFT_MEM_OTHER, 150);
    swift_mem_reset_peak();
    swift_mem_snapshot(&s);
    assert_int_equal(s.total_peak, 1700);
    assert_int_equal(s.at_peak[SWIFT_MEM_OTHER], 0);
    /* more freed than held stops at zero; an unknown category counts as other */
    swift_mem_sub(SWIFT_MEM_GRADS, 999);
    swift_mem_add(42, 7);
    swift_mem_snapshot(&s);
    assert_int_equal(s.cur[SWIFT_MEM_GRADS], 0);
    assert_int_equal(s.cur[SWIFT_MEM_OTHER], 7);
    assert_string_equal(swift_mem_name(SWIFT_MEM_OPTIMIZER), "optimizer");
    assert_string_equal(swift_mem_name(SWIFT_MEM_ACTIVATIONS), "activations");
}

static void test_mem_tracked_pointers(void **state)
{
    (void)state;
    struct swift_mem_stats a, b;
    swift_mem_snapshot(&a);
    enum { N = 1000 };
    void *p[N];
    for (int i = 0; i < N; i++) /* past the table's first growth */
        p[i] = swift_mem_alloc(malloc, i % 2 ? SWIFT_MEM_GRADS : SWIFT_MEM_PARAMS, 16);
    swift_mem_snapshot(&b);
    assert_int_equal(b.cur[SWIFT_MEM_PARAMS] - a.cur[SWIFT_MEM_PARAMS], 16 * N / 2);
    assert_int_equal(b.cur[SWIFT_MEM_GRADS] - a.cur[SWIFT_MEM_GRADS], 16 * N / 2);
    for (int i = 0; i < N; i += 2)
        swift_mem_free(free, p[i]);
    swift_mem_snapshot(&b);
    assert_int_equal(b.cur[SWIFT_MEM_PARAMS], a.cur[SWIFT_MEM_PARAMS]);
    for (int i = 1; i < N; i += 2)
        swift_mem_free(free, p[i]);
    int x;
    swift_mem_untrack(&x); /* never tracked: nothing */
    swift_mem_untrack(NULL);
    assert_null(swift_mem_track(NULL, SWIFT_MEM_PARAMS, 99));
    swift_mem_snapshot(&b);
    assert_int_equal(b.total, a.total);
    /* the same address tracked again after a free counts once */
    void *q = swift_mem_track(malloc(8), SWIFT_MEM_OPTIMIZER, 8);
    swift_mem_untrack(q);
    swift_mem_track(q, SWIFT_MEM_OPTIMIZER, 8);
    swift_mem_snapshot(&b);
    assert_int_equal(b.cur[SWIFT_MEM_OPTIMIZER] - a.cur[SWIFT_MEM_OPTIMIZER], 8);
    swift_mem_free(free, q);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        void *p = swift_mem_alloc(malloc, SWIFT_MEM_ACTIVATIONS, 24);
        swift_mem_free(free, p);
    }
    return NULL;
}

static void test_mem_threads(void **state)
{
    (void)state;
    struct swift_mem_stats a, b;
    swift_mem_snapshot(&a);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    swift_mem_snapshot(&b);
    assert_int_equal(b.cur[SWIFT_MEM_ACTIVATIONS], a.cur[SWIFT_MEM_ACTIVATIONS]);
    assert_true(b.peak[SWIFT_MEM_ACTIVATIONS] >= 24);
    assert_true(b.peak[SWIFT_MEM_ACTIVATIONS] <= a.cur[SWIFT_MEM_ACTIVATIONS] + 4 * 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_counts_and_peaks),
        cmocka_unit_test(test_mem_tracked_pointers),
        cmocka_unit_test(test_mem_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
