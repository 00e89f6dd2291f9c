/* fuzz_rpc_decode.c — rpc_msg_decode and the typed getters on arbitrary
 * bytes (every field name the server and tracker read, every getter kind).
 * The default suite replays tests/fuzz/corpus/rpc_decode (gcc); libFuzzer
 * builds: tests/fuzz/README.md. */
#include "fuzz_main.h"

#include "rpc/protocol.h"

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
