/* fuzz_rpc_decode.c — a libFuzzer / AFL++ harness for rpc_msg_decode and the
 * typed getters (every field name the server reads, every getter kind).
 *
 * libFuzzer (clang):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DTESSEL_LIBFUZZER -I. -Ibuild \
 *     tests/fuzz/fuzz_rpc_decode.c rpc/protocol.c -lmsgpackc -lsodium -lnng -o fuzz_rpc
 *   ./fuzz_rpc -max_len=4096 -runs=1000000 corpus/
 * AFL++: afl-clang-fast ... (without -DTESSEL_LIBFUZZER: main() reads stdin
 * or each file named on the command line). The meson target
 * `ninja -C build tests/fuzz/fuzz_rpc_decode` builds the file-driven version
 * (not part of the default build or test run). */
#include <stdio.h>
#include <stdlib.h>

#include "rpc/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rpc_msg m;
  if (rpc_msg_decode(&m, data, size) == TS_OK) {
    static const char *keys[] = {"token", "name", "data", "artifact", "opts", "version",
                                 "role", "nonce", "mac", "key", "number", "repeat",
                                 "tokens", "info", "server_id", "secs", "checksums"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
      uint64_t u;
      int64_t v;
      double d;
      bool b;
      char s[64];
      const void *p;
      size_t n;
      const msgpack_object *o;
      uint32_t k;
      rpc_get_u64(&m, NULL, keys[i], UINT64_MAX, &u);
      rpc_get_i64(&m, NULL, keys[i], INT64_MIN, INT64_MAX, &v);
      rpc_get_f64(&m, NULL, keys[i], -1e300, 1e300, &d);
      rpc_get_bool(&m, NULL, keys[i], &b);
      rpc_get_str(&m, NULL, keys[i], s, sizeof s);
      rpc_get_bin(&m, NULL, keys[i], RPC_MAX_MSG, &p, &n);
      rpc_get_array(&m, NULL, keys[i], 1000, &o, &k);
      if (rpc_get_map(&m, NULL, keys[i], &o) == TS_OK)
        rpc_get_u64(&m, o, "repeat", 64, &u);
    }
  }
  rpc_msg_fini(&m);
  return 0;
}

#ifndef TESSEL_LIBFUZZER
static void run_file(FILE *f) {
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) break;
      buf = nb;
    }
  }
  if (buf) LLVMFuzzerTestOneInput(buf, n);
  free(buf);
}

int main(int argc, char **argv) {
  if (argc < 2) run_file(stdin);
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      return 1;
    }
    run_file(f);
    fclose(f);
  }
  return 0;
}
#endif
