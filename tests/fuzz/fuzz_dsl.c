/* fuzz_dsl.c — the compute-definition (DSL) parser on arbitrary bytes: both
 * front-ends (kernel and func) through ir_parse_module; a parsed function is
 * printed and the printed text must parse again (print.h's promise). Any
 * input either parses or is refused with a message; nothing may crash.
 *
 * The default suite replays tests/fuzz/corpus/dsl (gcc); libFuzzer
 * builds and campaigns: docs/FUZZING.md. */
#include "fuzz_main.h"

#include "base/ts.h"
#include "ir/ir.h"
#include "ir/parse.h"
#include "ir/print.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ir_module *m = ir_module_new();
  if (!m) return 0;
  ts_diag d;
  ts_diag_clear(&d);
  if (ir_parse_module(m, (const char *)data, size, "fuzz.tsl", &d) == TS_OK) {
    for (int i = 0; i < m->nfuncs; i++) {
      if (m->funcs[i].kind != IR_MOD_PRIM) continue;
      char *s = ir_func_to_string(m->funcs[i].u.prim);
      if (!s) continue;
      ir_module *m2 = ir_module_new();
      ts_diag d2;
      ts_diag_clear(&d2);
      if (m2 && ir_parse_module(m2, s, strlen(s), "printed.tsl", &d2) != TS_OK) {
        fprintf(stderr, "fuzz_dsl: the printed function does not parse again: %s\n%s\n", d2.msg, s);
        abort();
      }
      ir_module_free(m2);
      ts_free(s);
    }
  } else if (!d.msg[0]) {
    fprintf(stderr, "fuzz_dsl: refused without a message\n");
    abort();
  }
  ir_module_free(m);
  return 0;
}
