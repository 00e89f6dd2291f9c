/* fuzz_seeds.c — writes the seed corpora of the rpc harnesses into
 * DIR/rpc_decode, DIR/chan_open, DIR/handshake and DIR/tracker_msg: one
 * message of every type the peers exchange, and the record lists of
 * fuzz_handshake.c and fuzz_tracker_msg.c that walk the protocols (an
 * honest handshake, a replay, a grant, a token-theft heartbeat, ...). Run
 * once; the files are committed (tests/fuzz/README.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/ts.h"
#include "rpc/auth.h"

static const char *root;

static void put(const char *dir, const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, dir);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* a growing byte list (records) */
typedef struct buf {
  uint8_t b[8192];
  size_t n;
} buf;
static void rec(buf *b, uint8_t sel, const void *p, size_t n) {
  b->b[b->n++] = sel;
  b->b[b->n++] = (uint8_t)n;
  memcpy(b->b + b->n, p, n);
  b->n += n;
}
static void rec4(buf *b, uint8_t sel, uint8_t a, uint8_t c, uint8_t d, uint8_t e) {
  uint8_t p[4] = {a, c, d, e};
  rec(b, sel, p, 4);
}

/* one message of each type, e finished; written as rpc_decode/NAME */
static void msg(rpc_enc *e, const char *name) {
  if (rpc_enc_finish(e) != TS_OK) {
    fprintf(stderr, "encode %s\n", name);
    exit(1);
  }
  put("rpc_decode", name, e->sb.data, e->sb.size);
}

static void messages(void) {
  rpc_enc e;
  uint8_t nonce[32];
  for (int i = 0; i < 32; i++) nonce[i] = (uint8_t)(i * 7);
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&e, "role", "client");
  rpc_enc_bin(&e, "nonce", nonce, 32);
  msg(&e, "hello");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_CHALLENGE, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_bin(&e, "nonce", nonce, 32);
  rpc_enc_bin(&e, "mac", nonce, 32);
  msg(&e, "challenge");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_AUTH, 1);
  rpc_enc_bin(&e, "mac", nonce, 32);
  msg(&e, "auth");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_REGISTER, 3);
  rpc_enc_str(&e, "key", "rasp4b");
  rpc_enc_str(&e, "address", "tcp://10.0.0.7:9090");
  rpc_enc_key(&e, "info");
  msgpack_pack_map(&e.pk, 2);
  rpc_pack_str(&e.pk, "cores");
  msgpack_pack_uint32(&e.pk, 4);
  rpc_pack_str(&e.pk, "isa");
  rpc_pack_str(&e.pk, "aarch64");
  msg(&e, "register");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_HEARTBEAT, 2);
  rpc_enc_u64(&e, "server_id", 1);
  rpc_enc_bool(&e, "busy", false);
  msg(&e, "heartbeat");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_REQUEST, 3);
  rpc_enc_str(&e, "key", "rasp4b");
  rpc_enc_i64(&e, "priority", -3);
  rpc_enc_i64(&e, "session_ms", 60000);
  msg(&e, "request");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_POLL, 2);
  rpc_enc_u64(&e, "ticket", 1);
  rpc_enc_i64(&e, "wait_ms", 1000);
  msg(&e, "poll");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_QUERY, 0);
  msg(&e, "query");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_UPLOAD, 3);
  rpc_enc_str(&e, "token", "0123456789abcdef0123456789abcdef");
  rpc_enc_str(&e, "name", "k.so");
  rpc_enc_bin(&e, "data", "\x7f" "ELF", 4);
  msg(&e, "upload");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_MEASURE, 3);
  rpc_enc_str(&e, "token", "0123456789abcdef0123456789abcdef");
  rpc_enc_str(&e, "artifact", "a1");
  rpc_enc_key(&e, "opts");
  msgpack_pack_map(&e.pk, 3);
  rpc_pack_str(&e.pk, "number");
  msgpack_pack_uint32(&e.pk, 3);
  rpc_pack_str(&e.pk, "repeat");
  msgpack_pack_uint32(&e.pk, 2);
  rpc_pack_str(&e.pk, "timeout_s");
  msgpack_pack_double(&e.pk, 1.5);
  msg(&e, "measure");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_RESULT, 4);
  rpc_enc_str(&e, "status", "ok");
  rpc_enc_str(&e, "error", "");
  rpc_enc_key(&e, "secs");
  msgpack_pack_array(&e.pk, 2);
  msgpack_pack_double(&e.pk, 1e-3);
  msgpack_pack_double(&e.pk, 2e-3);
  rpc_enc_key(&e, "checksums");
  msgpack_pack_array(&e.pk, 1);
  msgpack_pack_double(&e.pk, 12.5);
  msg(&e, "result");
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_RUN_MODEL, 3);
  rpc_enc_str(&e, "artifact", "m1");
  rpc_enc_key(&e, "inputs");
  msgpack_pack_array(&e.pk, 1);
  msgpack_pack_map(&e.pk, 4);
  rpc_pack_str(&e.pk, "name");
  rpc_pack_str(&e.pk, "x");
  rpc_pack_str(&e.pk, "dtype");
  rpc_pack_str(&e.pk, "float32");
  rpc_pack_str(&e.pk, "shape");
  msgpack_pack_array(&e.pk, 2);
  msgpack_pack_uint32(&e.pk, 1);
  msgpack_pack_uint32(&e.pk, 2);
  rpc_pack_str(&e.pk, "data");
  msgpack_pack_bin(&e.pk, 8);
  msgpack_pack_bin_body(&e.pk, "\0\0\x80?\0\0\0@", 8);
  rpc_enc_u64(&e, "repeat", 2);
  msg(&e, "run_model");
  rpc_enc_fini(&e);
  rpc_enc_error(&e, TS_EDENIED, "session revoked: %s", "server evicted");
  msg(&e, "error");
  rpc_enc_fini(&e);
  static const uint8_t v1[] = {0x82, 0xa1, 'v', 0x01, 0xa1, 't', 0xa5, 'q', 'u', 'e', 'r', 'y'};
  put("rpc_decode", "v1_query", v1, sizeof v1);
}

static void chan_open(void) {
  static const char k[] = "another secret, not the harness's";
  rpc_secret sec;
  rpc_secret_from_bytes(&sec, k, sizeof k - 1);
  uint8_t cn[32] = {1}, sn[32] = {2};
  rpc_chan ch;
  rpc_chan_derive(&ch, &sec, cn, sn, true);
  for (int c = 0; c < 3; c++) { /* frames under another key: refused by authentication */
    uint8_t *f;
    size_t fn;
    rpc_chan_seal(&ch, "\x80", 1, &f, &fn);
    uint8_t in[64];
    in[0] = (uint8_t)(c << 1);
    memcpy(in + 1, f, fn);
    char name[32];
    snprintf(name, sizeof name, "foreign_frame_%d", c);
    put("chan_open", name, in, fn + 1);
    ts_free(f);
  }
  put("chan_open", "unsealed", "\x00\x82\xa1v\x02", 5);
  /* round trips: [1 | ctr << 4, op, param, plaintext] */
  static const uint8_t q[] = {0x82, 0xa1, 'v', 0x02, 0xa1, 't', 0xa5, 'q', 'u', 'e', 'r', 'y'};
  const char *names[] = {"roundtrip", "bitflip", "truncate", "counter", "append", "replay"};
  for (int op = 0; op < 6; op++) {
    uint8_t in[64] = {(uint8_t)(1 | (op << 4)), (uint8_t)op, (uint8_t)(op * 5 + 3)};
    memcpy(in + 3, q, sizeof q);
    put("chan_open", names[op], in, 3 + sizeof q);
  }
}

static void handshake(void) {
  uint8_t nonce[32];
  for (int i = 0; i < 32; i++) nonce[i] = (uint8_t)(i * 3 + 1);
  rpc_enc q;
  rpc_enc_begin(&q, RPC_T_QUERY, 0);
  rpc_enc_finish(&q);
  rpc_enc h;
  rpc_enc_begin(&h, RPC_T_HELLO, 3);
  rpc_enc_u64(&h, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&h, "role", "server");
  rpc_enc_bin(&h, "nonce", nonce, 32);
  rpc_enc_finish(&h);
  rpc_enc a;
  rpc_enc_begin(&a, RPC_T_AUTH, 1);
  rpc_enc_bin(&a, "mac", nonce, 32);
  rpc_enc_finish(&a);
  buf b = {0};
  /* honest: hello, auth, two sealed requests, then a replay */
  rec(&b, 0x04, nonce, 32);
  rec(&b, 0x08, "\x00", 1);
  rec(&b, 0x0c, q.sb.data, q.sb.size);
  rec(&b, 0x0c, q.sb.data, q.sb.size);
  rec(&b, 0x1c, "", 0);
  put("handshake", "honest_replay", b.b, b.n);
  b.n = 0; /* a wrong mac, then a retry without a new hello */
  rec(&b, 0x05, nonce, 32);
  rec(&b, 0x09, "\x01", 1);
  rec(&b, 0x09, "\x00", 1);
  rec(&b, 0x05, nonce, 32);
  rec(&b, 0x09, "\x00", 1);
  put("handshake", "wrong_mac_retry", b.b, b.n);
  b.n = 0; /* raw peer without the secret: hello, a forged auth, a request */
  rec(&b, 0x02, h.sb.data, h.sb.size);
  rec(&b, 0x02, a.sb.data, a.sb.size);
  rec(&b, 0x02, q.sb.data, q.sb.size);
  rec(&b, 0x03, q.sb.data, q.sb.size);
  put("handshake", "no_secret", b.b, b.n);
  b.n = 0; /* honest then a plaintext request on the channel (dropped), a hello over a challenge */
  rec(&b, 0x07, nonce, 32);
  rec(&b, 0x0b, "\x02", 1);
  rec(&b, 0x03, q.sb.data, q.sb.size);
  rec(&b, 0x06, nonce, 32);
  rec(&b, 0x02, h.sb.data, h.sb.size);
  rec(&b, 0x0a, "\x00", 1);
  put("handshake", "plaintext_on_channel", b.b, b.n);
  rpc_enc_fini(&q);
  rpc_enc_fini(&h);
  rpc_enc_fini(&a);
}

/* fuzz_tracker_msg: connections 0,1 boards, 2,3 tuners, 4 query; kind 1
 * records: [op, a, b, c] with op register 0, heartbeat 1, deregister 2,
 * request 3, poll 4, release 5, query 6. */
static void tracker_msg(void) {
  buf b = {0};
  rec4(&b, 0x08, 0, 0, 0, 4);   /* board 0 registers k0 at .0 */
  rec4(&b, 0x0a, 3, 0, 5, 9);   /* tuner 2 requests k0 */
  rec4(&b, 0x0a, 4, 1, 0, 0);   /* polls ticket 1 */
  rec4(&b, 0x08, 1, 1, 0, 0);   /* board 0 heartbeats server 1: its token */
  rec4(&b, 0x0c, 6, 0, 0, 0);   /* query */
  rec4(&b, 0x0a, 5, 1, 0, 0);   /* tuner 2 releases */
  rec4(&b, 0x08, 2, 1, 0, 0);   /* board 0 deregisters */
  put("tracker_msg", "grant_release", b.b, b.n);
  b.n = 0; /* the attacks: a second board heartbeats, deregisters, registers over board 0's
            * server; a tuner heartbeats; a query peer requests; then board 0 closes */
  rec4(&b, 0x08, 0, 1, 1, 0);
  rec4(&b, 0x0a, 3, 1, 0, 0);
  rec4(&b, 0x09, 1, 1, 0, 0);
  rec4(&b, 0x09, 2, 1, 0, 0);
  rec4(&b, 0x09, 0, 1, 1, 0);
  rec4(&b, 0x0b, 1, 1, 0, 0);
  rec4(&b, 0x0c, 3, 1, 0, 0);
  rec(&b, 0x10, "", 0);
  rec4(&b, 0x0a, 4, 1, 0, 0);
  rec(&b, 0x18, "", 0);
  put("tracker_msg", "foreign_board", b.b, b.n);
  b.n = 0; /* queues: two tuners, priorities, a held poll, the holder disconnects */
  rec4(&b, 0x0a, 3, 2, 1, 0);
  rec4(&b, 0x0b, 3, 2, 9, 0);
  rec4(&b, 0x0b, 4, 2, 1, 0);
  rec4(&b, 0x09, 0, 2, 2, 0);
  rec4(&b, 0x08, 0, 2, 3, 0);
  rec(&b, 0x13, "", 0);
  rec4(&b, 0x0a, 4, 1, 0, 0);
  rec4(&b, 0x0a, 5, 1, 0, 0);
  rec(&b, 0x19, "", 0);
  put("tracker_msg", "queues", b.b, b.n);
  b.n = 0; /* raw messages: a register with a large info, an unknown type for a tracker */
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_REGISTER, 3);
  rpc_enc_str(&e, "key", "rasp4b");
  rpc_enc_str(&e, "address", "tcp://10.0.0.7:9090");
  rpc_enc_key(&e, "info");
  msgpack_pack_array(&e.pk, 15);
  for (int i = 0; i < 15; i++) rpc_pack_str(&e.pk, "0123456789");
  rpc_enc_finish(&e);
  rec(&b, 0x00, e.sb.data, e.sb.size);
  rpc_enc_fini(&e);
  rpc_enc_begin(&e, RPC_T_MEASURE, 0);
  rpc_enc_finish(&e);
  rec(&b, 0x02, e.sb.data, e.sb.size);
  rpc_enc_fini(&e);
  put("tracker_msg", "raw", b.b, b.n);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  messages();
  chan_open();
  handshake();
  tracker_msg();
  return 0;
}
