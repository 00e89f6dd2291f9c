/* fuzz_onnx.c — ONNX import on arbitrary bytes (tg_onnx_import_mem: the
 * protobuf decode, the graph checks, every operator's import handler). An
 * input is imported or refused with a message; nothing may crash. External
 * data is not followed (no directory is given).
 *
 * The default suite replays tests/fuzz/corpus/onnx (gcc); libFuzzer
 * builds and campaigns: docs/FUZZING.md. */
#include "fuzz_main.h"

#include "base/ts.h"
#include "ir/graph/onnx.h"
#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ir_module *m = ir_module_new();
  if (!m) return 0;
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  if (tg_onnx_import_mem(data, size, "fuzz.onnx", m, &g, &d) != TS_OK && !d.msg[0]) {
    fprintf(stderr, "fuzz_onnx: refused without a message\n");
    abort();
  }
  ir_module_free(m);
  return 0;
}
