/* util.h — helpers shared by the schedule tests: build a workload, open a
 * schedule on it with the state checker after every primitive, and compare
 * a scheduled function with the unscheduled one in the reference
 * interpreter. */
#ifndef TESSEL_TESTS_SCHEDULE_UTIL_H
#define TESSEL_TESTS_SCHEDULE_UTIL_H

#include "ir/ir.h"
#include "ir/schedule/schedule.h"

/* Builds a workload spec into arena a; fails the test on error. */
ir_func *tu_workload(ts_arena *a, const char *spec);
/* Opens a schedule (debug verification on) over spec's function. *orig gets
 * the unscheduled function (in a). */
sch_state *tu_schedule(ts_arena *a, const char *spec, ir_func **orig);
/* Runs both functions on the same seeded random inputs and compares every
 * output (exact for integers; rtol 1e-4, atol 1e-5 for floats). Returns true
 * when they match; on mismatch or error writes the reason into why. */
bool tu_equivalent(const ir_func *orig, const ir_func *sched, uint64_t seed, char *why, size_t n);
/* ck_assert-style wrapper: fails the test with the reason and the printed IR. */
void tu_assert_equivalent(const ir_func *orig, const ir_func *sched);
/* Fails the test unless st is TS_OK, printing the diagnostic. */
void tu_ok(ts_status st, const ts_diag *d);
/* Fails unless st is TS_ESCHEDULE and the message contains every given
 * substring (NULL-terminated list). */
void tu_refused(ts_status st, const ts_diag *d, ...);
/* Opens a schedule (debug verification on) over a function written in the
 * script form (docs/SCRIPT.md); *orig gets the parsed function (in a). */
sch_state *tu_schedule_text(ts_arena *a, const char *text, ir_func **orig);
/* A refused call leaves the function body untouched: checks the refusal
 * (with the given message substrings) and that the body pointer is the same. */
#define TU_REFUSED(d, s, call, ...)                     \
  do {                                                  \
    const ir_stmt *tu_before_ = sch_func(s)->body;      \
    ts_diag_clear(d);                                   \
    tu_refused((call), (d), __VA_ARGS__, NULL);         \
    ck_assert_ptr_eq(sch_func(s)->body, tu_before_);    \
  } while (0)
/* The loop handles of a block, by name (fails the test if absent). */
int tu_loops(sch_state *s, const char *block, sch_loop *out, int max);

#endif
