/* fuzz_chan_open.c — the secure channel's frame open (rpc/auth.c,
 * rpc_chan_open) on arbitrary bytes, and a seal/alter/open round trip.
 * Input: byte 0 chooses the mode.
 *  - even: bytes 1.. are a frame received by a server-side channel whose
 *    next counter is (byte 0 >> 1) & 3. Nothing the fuzzer writes can pass
 *    Poly1305: it must be refused with a reason, and the counter must stay.
 *  - odd: bytes 3.. are a plaintext that the client side seals under
 *    counter byte 0 >> 4; byte 1 chooses an alteration (none, a bit flip at
 *    byte 2, truncation to byte 2, the next counter written in the header,
 *    an appended byte, a replay of the frame) and the server side opens the
 *    result. Unaltered: the plaintext comes back and the counter advances;
 *    altered or replayed: refused, the counter unchanged. An opened
 *    plaintext goes on through rpc_msg_decode as the server would.
 * The default suite replays tests/fuzz/corpus/chan_open (gcc); libFuzzer
 * builds: tests/fuzz/README.md. */
#include "fuzz_main.h"

#include "base/ts.h"
#include "rpc/auth.h"

static void fail(const char *what) {
  fprintf(stderr, "fuzz_chan_open: %s\n", what);
  abort();
}

static void channels(rpc_chan *cli, rpc_chan *srv) {
  static rpc_secret sec;
  if (!sec.loaded) {
    static const char k[] = "fuzz-chan-open secret 0123456789";
    if (rpc_secret_from_bytes(&sec, k, sizeof k - 1) != TS_OK) fail("secret");
  }
  uint8_t cn[RPC_NONCE_BYTES], sn[RPC_NONCE_BYTES];
  for (int i = 0; i < RPC_NONCE_BYTES; i++) cn[i] = (uint8_t)i, sn[i] = (uint8_t)(255 - i);
  rpc_chan_derive(cli, &sec, cn, sn, true);
  rpc_chan_derive(srv, &sec, cn, sn, false);
}

/* Opens f on srv; checks the contract of a refusal. Returns the status. */
static ts_status open_frame(rpc_chan *srv, const uint8_t *f, size_t n, uint8_t **pt, size_t *ptn) {
  uint64_t before = srv->rx_ctr;
  char why[160] = "";
  ts_status st = rpc_chan_open(srv, f, n, pt, ptn, why, sizeof why);
  if (st == TS_OK) {
    if (srv->rx_ctr != before + 1) fail("an opened frame did not advance the counter");
    rpc_msg m;
    if (rpc_msg_decode(&m, *pt, *ptn) == TS_OK) rpc_msg_fini(&m);
  } else {
    if (!why[0]) fail("refused without a reason");
    if (srv->rx_ctr != before) fail("a refused frame moved the counter");
    if (*pt) fail("a refused frame left a plaintext");
  }
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rpc_chan cli, srv;
  channels(&cli, &srv);
  uint8_t *pt = NULL;
  size_t ptn = 0;
  if (!(data[0] & 1)) {
    srv.rx_ctr = (data[0] >> 1) & 3;
    if (open_frame(&srv, data + 1, size - 1, &pt, &ptn) == TS_OK) fail("a frame the fuzzer wrote was accepted");
    return 0;
  }
  if (size < 3) return 0;
  uint64_t ctr = data[0] >> 4;
  int op = data[1] % 6;
  const uint8_t *p = data + 3;
  size_t n = size - 3;
  cli.tx_ctr = srv.rx_ctr = ctr;
  uint8_t *f = NULL;
  size_t fn = 0;
  if (rpc_chan_seal(&cli, p, n, &f, &fn) != TS_OK) fail("seal");
  if (fn != n + RPC_FRAME_HDR + RPC_FRAME_TAG || cli.tx_ctr != ctr + 1) fail("sealed frame size or counter");
  uint8_t *g = ts_malloc(fn + 1);
  if (!g) fail("out of memory");
  memcpy(g, f, fn);
  size_t gn = fn;
  switch (op) {
  case 1: g[data[2] % fn] ^= (uint8_t)(1u << (data[2] & 7 ? data[2] & 7 : 1)); break;
  case 2: gn = data[2] % fn; break;
  case 3: g[8] = (uint8_t)(g[8] + 1); break; /* the counter's low byte */
  case 4: g[gn++] = data[2]; break;
  default: break;
  }
  ts_status st = open_frame(&srv, g, gn, &pt, &ptn);
  if (op == 0 || op == 5) {
    if (st != TS_OK) fail("an unaltered frame was refused");
    if (ptn != n || (n && memcmp(pt, p, n) != 0)) fail("the opened plaintext differs from the sealed one");
    ts_free(pt);
    pt = NULL;
    if (op == 5 && open_frame(&srv, g, gn, &pt, &ptn) == TS_OK) fail("a replayed frame was accepted");
  } else if (st == TS_OK) {
    fail("an altered frame was accepted");
  }
  ts_free(pt);
  ts_free(g);
  ts_free(f);
  rpc_chan_wipe(&cli);
  rpc_chan_wipe(&srv);
  return 0;
}
