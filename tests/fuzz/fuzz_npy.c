/* fuzz_npy.c — .npy parsing on arbitrary bytes (tun_npy_parse: the magic,
 * the version, the header dict's bounded tokenizer, the dtype, the shape and
 * the data size). A parsed tensor's bytes are its shape times its element
 * size; a refusal carries a message; nothing may crash.
 *
 * The default suite replays tests/fuzz/corpus/npy (gcc); libFuzzer
 * builds and campaigns: docs/FUZZING.md. */
#include "fuzz_main.h"

#include "base/ts.h"
#include "ir/ir.h"
#include "tuner/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tun_npy t;
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_npy_parse(data, size, "fuzz.npy", &t, &d) != TS_OK) {
    if (!d.msg[0]) {
      fprintf(stderr, "fuzz_npy: refused without a message\n");
      abort();
    }
    return 0;
  }
  size_t n = (size_t)ir_dtype_bytes(ir_dt((ir_dtype_code)t.dtype));
  for (int i = 0; i < t.ndim; i++) n *= (size_t)t.shape[i];
  if (n != t.nbytes) {
    fprintf(stderr, "fuzz_npy: %zu bytes for a shape that needs %zu\n", t.nbytes, n);
    abort();
  }
  tun_npy_free(&t);
  return 0;
}
