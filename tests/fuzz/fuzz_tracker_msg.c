/* fuzz_tracker_msg.c — the tracker's message handling (tracker/tracker.c:
 * serve, the register/heartbeat/deregister/request/poll/release/query
 * handlers, dispatch, grants, revocation, connection close, the timers) on
 * decoded messages from five authenticated connections: two boards
 * ("server"), two tuners ("client") and a "query" peer. The file is
 * included so that the harness drives its static functions and stands in
 * for nng's pipes (TRK_PIPE_KNOWN); replies go to a socket without peers.
 * The input is a list of records: a selector byte, a length byte, that many
 * bytes. Selector bits 0-2 (mod 5) pick the connection, bits 3-4 the kind:
 *   0: the bytes are a message (rpc_msg_decode, then served);
 *   1: a well-formed message built from the bytes (register, heartbeat,
 *      deregister, request, poll, release or query, small ids and keys), so
 *      that the state machine is reached quickly;
 *   2: the connection closes (and comes back as a new one);
 *   3: the timers run.
 * Invariants after every record: the ticket list and its count agree; a
 * busy server's holder is a granted ticket that points back at it; a
 * granted ticket's server is registered; servers belong to live board
 * connections, tickets to live tuner connections; a server stays with the
 * connection that registered it. After the input every
 * connection closes and the tracker must be empty.
 * The default suite replays tests/fuzz/corpus/tracker_msg (gcc); libFuzzer
 * builds: tests/fuzz/README.md. */
#include "fuzz_main.h"

#include <stdbool.h>

#define NCONN 5
static uint32_t conn_id[NCONN];
static bool fuzz_pipe_known(uint32_t id);
#define TRK_PIPE_KNOWN(id) fuzz_pipe_known(id)
#include "tracker/tracker.c"

static const char *const conn_role[NCONN] = {"server", "server", "client", "client", "query"};

static bool fuzz_pipe_known(uint32_t id) {
  for (int i = 0; i < NCONN; i++)
    if (conn_id[i] == id) return true;
  return false;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz_tracker_msg: %s\n", what);
  abort();
}

static trk_tracker *tracker(void) {
  static trk_tracker *t;
  if (t) return t;
  t = ts_calloc(1, sizeof *t);
  if (!t) fail("out of memory");
  t->cfg.evict_ms = TRK_EVICT_MS;
  t->cfg.heartbeat_ms = TRK_HEARTBEAT_MS;
  t->cfg.tick_ms = 50;
  t->cfg.verbose = getenv("TESSEL_FUZZ_VERBOSE") != NULL; /* the tracker's log, to read a seed */
  pthread_mutex_init(&t->mu, NULL);
  pthread_mutex_init(&t->evmu, NULL);
  /* an authtab with no pipes: every reply goes out as plaintext */
  pthread_mutex_init(&t->auth.mu, NULL);
  pthread_cond_init(&t->auth.cv, NULL);
  if (nng_rep0_open_raw(&t->sock) != 0) fail("cannot open a socket");
  nng_socket_set_ms(t->sock, NNG_OPT_SENDTIMEO, 0);
  return t;
}

static bool live_role(uint32_t pipe, const char *role) {
  for (int i = 0; i < NCONN; i++)
    if (conn_id[i] == pipe) return !strcmp(conn_role[i], role);
  return false;
}

/* The connection that registered each server id of this input: a board
 * never changes hands (ids are never reused within an input). */
#define NOWNERS 256
static uint32_t owner[NOWNERS];

static void check(trk_tracker *t) {
  for (size_t i = 0; i < t->nservers; i++) {
    uint64_t id = t->servers[i]->id;
    if (id >= NOWNERS) continue;
    if (!owner[id]) owner[id] = t->servers[i]->pipe;
    if (owner[id] != t->servers[i]->pipe) fail("a server passed to another connection");
  }
  size_t n = 0;
  for (ticket *k = t->tickets; k; k = k->next) {
    n++;
    if (!live_role(k->pipe, "client")) fail("a ticket of a connection that is gone or not a tuner");
    if (k->state == TK_GRANTED) {
      bool found = false;
      for (size_t i = 0; i < t->nservers; i++) found |= t->servers[i] == k->srv;
      if (!found || k->srv->holder != k) fail("a granted ticket whose server does not hold it");
      if (!rpc_token_valid(k->token)) fail("a granted ticket without a valid token");
    } else if (k->srv) {
      fail("a ticket that is not granted points at a server");
    }
  }
  if (n != t->ntickets) fail("the ticket count is wrong");
  for (size_t i = 0; i < t->nservers; i++) {
    server *s = t->servers[i];
    if (!live_role(s->pipe, "server")) fail("a server of a connection that is gone or not a board");
    if (s->holder) {
      bool found = false;
      for (ticket *k = t->tickets; k; k = k->next) found |= k == s->holder;
      if (!found || s->holder->state != TK_GRANTED || s->holder->srv != s) fail("a server held by no granted ticket");
    }
    for (size_t j = 0; j < i; j++)
      if (t->servers[j]->id == s->id) fail("two servers with one id");
  }
}

/* A well-formed message from the bytes (kind 1). */
static void build(rpc_enc *e, const uint8_t *p, size_t n) {
  uint8_t b[4] = {0};
  memcpy(b, p, n < 4 ? n : 4);
  char key[8], addr[32];
  snprintf(key, sizeof key, "k%u", b[1] % 3);
  snprintf(addr, sizeof addr, "tcp://10.0.0.%u:9090", b[2] % 4);
  switch (b[0] % 7) {
  case 0:
    rpc_enc_begin(e, RPC_T_REGISTER, 3);
    rpc_enc_str(e, "key", key);
    rpc_enc_str(e, "address", addr);
    rpc_enc_key(e, "info");
    msgpack_pack_map(&e->pk, 1);
    rpc_pack_str(&e->pk, "cores");
    msgpack_pack_uint32(&e->pk, b[3]);
    break;
  case 1:
    rpc_enc_begin(e, RPC_T_HEARTBEAT, 2);
    rpc_enc_u64(e, "server_id", b[1] % 6);
    rpc_enc_bool(e, "busy", b[2] & 1);
    break;
  case 2:
    rpc_enc_begin(e, RPC_T_DEREGISTER, 1);
    rpc_enc_u64(e, "server_id", b[1] % 6);
    break;
  case 3:
    rpc_enc_begin(e, RPC_T_REQUEST, 3);
    rpc_enc_str(e, "key", key);
    rpc_enc_i64(e, "priority", (int8_t)b[2]);
    rpc_enc_i64(e, "session_ms", 100 + b[3] * 1000);
    break;
  case 4:
    rpc_enc_begin(e, RPC_T_POLL, 2);
    rpc_enc_u64(e, "ticket", b[1] % 8);
    rpc_enc_i64(e, "wait_ms", (b[2] & 1) * 1000);
    break;
  case 5:
    rpc_enc_begin(e, RPC_T_RELEASE, 1);
    rpc_enc_u64(e, "ticket", b[1] % 8);
    break;
  default:
    rpc_enc_begin(e, RPC_T_QUERY, 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  trk_tracker *t = tracker();
  uint32_t next_pipe = 1;
  for (int i = 0; i < NCONN; i++) conn_id[i] = next_pipe++;
  t->ndead = 0;
  t->next_id = t->next_ticket = t->next_seq = t->free_counter = 0;
  memset(owner, 0, sizeof owner);
  static const uint8_t hdr[4] = {0x80, 0, 0, 1}; /* a REQ request id */
  size_t i = 0, n;
  uint8_t sel;
  const uint8_t *p;
  while (fuzz_next_record(data, size, &i, &sel, &p, &n)) {
    int c = (sel & 7) % NCONN;
    int kind = (sel >> 3) & 3;
    if (kind == 2) {
      on_pipe_closed(t, conn_id[c]);
      conn_id[c] = next_pipe++;
    } else if (kind == 3) {
      tick(t);
    } else {
      rpc_msg m;
      rpc_enc e;
      ts_status st;
      if (kind == 1) {
        build(&e, p, n);
        if (rpc_enc_finish(&e) != TS_OK) fail("encode");
        st = rpc_msg_decode(&m, e.sb.data, e.sb.size);
        rpc_enc_fini(&e);
        if (st != TS_OK) fail("a built message does not decode");
      } else {
        st = rpc_msg_decode(&m, p, n);
      }
      if (st == TS_OK) {
        t->stats.msgs++;
        req r = {.t = t, .pipe = conn_id[c], .hdr = hdr, .hdr_len = sizeof hdr, .m = &m};
        for (ticket *k = t->tickets; k; k = k->next)
          if (k->pipe == r.pipe) k->polling = false;
        serve(t, &r, conn_role[c]);
      }
      rpc_msg_fini(&m);
    }
    check(t);
  }
  for (int c = 0; c < NCONN; c++) {
    uint32_t id = conn_id[c];
    conn_id[c] = 0;
    on_pipe_closed(t, id);
  }
  if (t->nservers || t->tickets || t->ntickets) fail("state left after every connection closed");
  return 0;
}
