/* util.h — helpers shared by the schedule tests: build a workload, open a
 * schedule on it with the state checker after every primitive, and compare
 * a scheduled function with the unscheduled one in the reference
 * interpreter; a per-test fixture, lookups (blocks, loops, regions) and the
 * assertions every primitive's tests share (printed IR, loop and block
 * order, trace round trip). docs/TEST_HELPERS.md lists them. */
#ifndef TESSEL_TESTS_SCHEDULE_UTIL_H
#define TESSEL_TESTS_SCHEDULE_UTIL_H

#include <check.h>

#include "ir/ir.h"
#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"

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
/* Clears d, runs call and fails the test unless it returns TS_OK. */
#define TU_OK(d, call)      \
  do {                      \
    ts_diag_clear(d);       \
    tu_ok((call), (d));     \
  } while (0)
/* The loop handles of a block, by name (fails the test if absent). */
int tu_loops(sch_state *s, const char *block, sch_loop *out, int max);

/* ---- per-test fixture ------------------------------------------------------
 * tcase_add_checked_fixture(tc, tu_setup, tu_teardown) gives every test a
 * fresh arena (tu_arena()); the schedules opened with tu_open / tu_open_text
 * live until tu_teardown frees them with the arena, so a test frees neither.
 * (A file with its own diagnostic clears it in its own setup, then calls
 * tu_setup.) */
void tu_setup(void);
void tu_teardown(void);
ts_arena *tu_arena(void);
/* tu_schedule / tu_schedule_text in tu_arena(), freed at teardown. */
sch_state *tu_open(const char *spec, ir_func **orig);
sch_state *tu_open_text(const char *text, ir_func **orig);
/* A traced schedule (seed; state checker on) over workload spec, built in
 * tu_arena() (*orig gets the unscheduled function), freed at teardown. */
sch_traced *tu_open_traced(const char *spec, uint64_t seed, ir_func **orig);
/* tu_open, then block's loop handles into l: exactly n of them (fails the
 * test otherwise). */
sch_state *tu_open_loops(const char *spec, ir_func **orig, const char *block, sch_loop *l, int n);
/* A test case named name, added to su, with the fixture (setup, or tu_setup
 * when NULL; then tu_teardown) and a timeout (seconds; 0 keeps Check's). */
TCase *tu_tcase(Suite *su, const char *name, void (*setup)(void), double timeout_s);
/* Runs the suite (CK_NORMAL) and frees it; returns main's exit status. */
int tu_run(Suite *su);

/* ---- finding things in a scheduled function -------------------------------- */
/* The realize of the block named name, or NULL. */
const ir_stmt *tu_find_realize(sch_state *s, const char *name);
/* The block named name (fails the test if absent). */
const ir_block *tu_block(sch_state *s, const char *name);
/* The idx-th loop (outermost 0) above block / how many loops it has (fails
 * the test if the block is absent or has too few). */
sch_loop tu_loop(sch_state *s, const char *block, int idx);
int tu_nloops(sch_state *s, const char *block);
/* Does block b read / write the buffer named buf (per its regions)? */
bool tu_reads(const ir_block *b, const char *buf);
bool tu_writes(const ir_block *b, const char *buf);

/* ---- assertions ------------------------------------------------------------- */
/* The printed function (ts_free it). */
char *tu_text(sch_state *s);
/* The printed function contains / lacks needle (the text is in the message). */
void tu_assert_has(sch_state *s, const char *needle);
void tu_assert_lacks(sch_state *s, const char *needle);
/* The names of block's loops, outermost first, joined by spaces ("i j_init"). */
void tu_assert_loops(sch_state *s, const char *block, const char *want);
/* The root block's child blocks in program order, joined by spaces. */
void tu_assert_children(sch_state *s, const char *want);
/* t's function must match orig in the interpreter (tu_assert_equivalent);
 * its trace, written to JSON, read back and replayed on orig (seed), must
 * give a structurally equal function and write the same JSON again. */
void tu_assert_roundtrip(sch_traced *t, const ir_func *orig, uint64_t seed);

#endif
