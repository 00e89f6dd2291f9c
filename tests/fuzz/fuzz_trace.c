/* fuzz_trace.c — trace JSON on arbitrary bytes: sch_trace_from_json, and a
 * trace that loads replayed on a small odd-shaped matmul (7x5x3) and
 * written back to JSON, which must load again. Refusals carry a message;
 * nothing may crash.
 *
 * The default suite replays tests/fuzz/corpus/trace (gcc); libFuzzer
 * builds and campaigns: docs/FUZZING.md. */
#include "fuzz_main.h"

#include "base/ts.h"
#include "ir/ir.h"
#include "ir/schedule/trace.h"
#include "ir/workloads/workloads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  ts_diag d;
  ts_diag_clear(&d);
  sch_trace *tr = sch_trace_from_json(text, &d);
  free(text);
  if (!tr) {
    if (!d.msg[0]) {
      fprintf(stderr, "fuzz_trace: refused without a message\n");
      abort();
    }
    return 0;
  }
  char *js = sch_trace_to_json(tr);
  if (js) {
    ts_diag d2;
    ts_diag_clear(&d2);
    sch_trace *back = sch_trace_from_json(js, &d2);
    if (!back) {
      fprintf(stderr, "fuzz_trace: the written trace does not load again: %s\n%s\n", d2.msg, js);
      abort();
    }
    sch_trace_free(back);
    ts_free(js);
  }
  ts_arena a;
  ts_arena_init(&a);
  ir_wl_inst w;
  ir_func *f = NULL;
  if (ir_wl_parse("matmul:m=7,n=5,k=3", &w, NULL) == TS_OK && ir_wl_build(&a, &w, &f, NULL) == TS_OK) {
    ts_diag_clear(&d);
    sch_traced *t = sch_trace_replay(tr, f, 1, &d);
    if (t) sch_traced_free(t);
  }
  ts_arena_fini(&a);
  sch_trace_free(tr);
  return 0;
}
