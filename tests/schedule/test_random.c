/* test_random.c — the randomized property test of the schedule primitives
 * and the trace layer: for each workload (small odd and prime sizes), many
 * random traces drawn from every primitive family, each written to JSON,
 * read back, replayed onto a fresh copy of the function and compared with
 * the unscheduled function in the reference interpreter (sch_selfcheck, the
 * engine of `tessel selfcheck`). Every checked trace must match, and most
 * traces must be legal enough to be checked (a refused step does not count).
 * A mismatch prints the trace JSON so that `tessel show W --trace FILE`
 * reproduces it. */
#include <check.h>
#include <stdio.h>

#include "ir/schedule/trace.h"
#include "util.h"

static const char *const specs[] = {
    "matmul:m=6,n=9,k=7",
    "conv2d_nchw:c=3,h=5,w=7,k=4",
    "softmax:m=3,n=9",
    "layernorm:m=5,n=6",
    "depthwise_conv2d:c=3,h=7,w=5",
    "dense:m=3,n=5,k=7",
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))
#define TRACES 400
static const uint64_t seeds[] = {1, 2, 3};

static void report(void *ctx, int index, bool refused, const char *json, const char *why) {
  if (refused) return;
  fprintf(stderr, "%s: trace %d MISMATCH: %s\n  trace: %s\n", (const char *)ctx, index, why, json);
}

START_TEST(test_random_traces) {
  ts_arena a;
  ts_arena_init(&a);
  const char *spec = specs[_i];
  ir_func *f = tu_workload(&a, spec);
  for (size_t k = 0; k < sizeof seeds / sizeof *seeds; k++) {
    ts_diag d;
    ts_diag_clear(&d);
    sch_selfcheck_stats st;
    sch_random_opts opts = {1, 12};
    ts_status rc = sch_selfcheck(f, TRACES, seeds[k], &opts, report, (void *)spec, &st, &d);
    ck_assert_msg(rc == TS_OK, "%s: %s", spec, d.msg);
    fprintf(stderr, "%s seed %llu: %d traces, %d checked, %d refused, %d mismatches\n", spec,
            (unsigned long long)seeds[k], st.traces, st.checked, st.refused, st.mismatches);
    ck_assert_int_eq(st.traces, TRACES);
    ck_assert_msg(st.mismatches == 0, "%s seed %llu: %d of %d random traces give wrong results (see stderr)", spec,
                  (unsigned long long)seeds[k], st.mismatches, st.traces);
    ck_assert_msg(2 * st.checked >= st.traces, "%s seed %llu: only %d of %d traces checked", spec,
                  (unsigned long long)seeds[k], st.checked, st.traces);
  }
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("random");
  TCase *tc = tu_tcase(s, "random", NULL, 180);
  tcase_add_loop_test(tc, test_random_traces, 0, NSPECS);
  return tu_run(s);
}
