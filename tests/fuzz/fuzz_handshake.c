/* fuzz_handshake.c — the server side of the handshake and of the channel
 * that follows it (rpc/auth.c: rpc_authtab_open, rpc_authtab_handle,
 * rpc_authtab_seal), driven the way rpc_server and the tracker drive it, on
 * four connections (fake nng pipe ids, state kept in one rpc_authtab).
 * The input is a list of records: a selector byte, a length byte, that many
 * bytes. The selector's low 2 bits pick the connection, the next 2 what the
 * bytes are:
 *   0: a raw message from a peer without the secret (any bytes);
 *   1: an honest hello (role and client nonce from the bytes); a challenge
 *      reply must carry the right server mac;
 *   2: an honest auth answering the last challenge (the first byte odd: a
 *      wrong mac); an ok must come back as the channel's first sealed frame;
 *   3: the bytes sealed by the honest client's channel (selector bit 4:
 *      the previous sealed frame again, a replay, which must be refused).
 * Invariants: a connection is authenticated only after an honest, correct
 * auth; an honest sealed frame on an authenticated connection is opened; a
 * replay is refused and closes the connection; every reply decodes.
 * The default suite replays tests/fuzz/corpus/handshake (gcc); libFuzzer
 * builds: tests/fuzz/README.md. */
#include "fuzz_main.h"

#include <sodium.h>

#include "base/ts.h"
#include "rpc/auth.h"

#define NPIPE 4
#define LABEL_SERVER "tessel-rpc-1 server" /* docs/RPC.md, "Authentication" */
#define LABEL_CLIENT "tessel-rpc-1 client"

typedef struct peer {
  uint8_t cn[RPC_NONCE_BYTES], sn[RPC_NONCE_BYTES];
  bool challenged, authed; /* authed: by an honest, correct auth */
  rpc_chan ch;             /* the honest client's channel (authed) */
  uint8_t *last;           /* its last sealed frame */
  size_t lastn;
} peer;

static void fail(const char *what) {
  fprintf(stderr, "fuzz_handshake: %s\n", what);
  abort();
}

static const rpc_secret *secret(void) {
  static rpc_secret sec;
  if (!sec.loaded) {
    static const char k[] = "fuzz-handshake secret 0123456789";
    if (rpc_secret_from_bytes(&sec, k, sizeof k - 1) != TS_OK) fail("secret");
  }
  return &sec;
}

static int pipe_state(rpc_authtab *tab, uint32_t id) {
  for (size_t i = 0; i < tab->n; i++)
    if (tab->pipes[i].pipe_id == id) return tab->pipes[i].state;
  return -9;
}

/* The server's turn, as rpc_server/tracker take it: open, handshake or
 * auth error, reply. Returns the reply's body (ts_malloc'd) or NULL when
 * the message was dropped; *opened says a request reached the service. */
static uint8_t *serve(rpc_authtab *tab, uint32_t id, const uint8_t *p, size_t n, size_t *rn, bool *dropped,
                      bool *opened) {
  nng_pipe np = NNG_PIPE_INITIALIZER;
  np.id = id;
  rpc_msg m;
  rpc_enc e;
  *opened = false;
  ts_status st = rpc_authtab_open(tab, np, p, n, &m, dropped);
  if (*dropped) return NULL;
  if (st != TS_OK) {
    rpc_enc_error(&e, st, "%s", m.err[0] ? m.err : ts_strerror(st));
  } else if (!rpc_authtab_handle(tab, &m, np, &e)) {
    *opened = true; /* an authenticated request: the service would answer */
    rpc_enc_begin(&e, RPC_T_OK, 0);
  }
  rpc_msg_fini(&m);
  nng_msg *r = rpc_authtab_seal(tab, np, &e);
  if (!r) return NULL;
  *rn = nng_msg_len(r);
  uint8_t *b = ts_malloc(*rn ? *rn : 1);
  if (!b) fail("out of memory");
  memcpy(b, nng_msg_body(r), *rn);
  nng_msg_free(r);
  return b;
}

/* A plaintext reply: decodes; returns its type (RPC_T_COUNT if not). */
static rpc_type plain_type(const uint8_t *b, size_t n, rpc_msg *m) {
  if (rpc_msg_decode(m, b, n) != TS_OK) fail("a plaintext reply does not decode");
  return m->type;
}

static void honest_hello(rpc_authtab *tab, uint32_t id, peer *pe, const uint8_t *p, size_t n) {
  char role[16] = "client";
  if (n) {
    size_t k = n < 15 ? n : 15;
    for (size_t i = 0; i < k; i++) role[i] = (char)('a' + p[i] % 26);
    role[k] = 0;
  }
  memset(pe->cn, 0, sizeof pe->cn);
  memcpy(pe->cn, p, n < RPC_NONCE_BYTES ? n : RPC_NONCE_BYTES);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&e, "role", role);
  rpc_enc_bin(&e, "nonce", pe->cn, sizeof pe->cn);
  if (rpc_enc_finish(&e) != TS_OK) fail("encode hello");
  size_t rn = 0;
  bool dropped, opened;
  uint8_t *b = serve(tab, id, (const uint8_t *)e.sb.data, e.sb.size, &rn, &dropped, &opened);
  rpc_enc_fini(&e);
  pe->challenged = false;
  if (!b) return;
  rpc_msg m;
  if (b[0] != RPC_FRAME_MARK && plain_type(b, rn, &m) == RPC_T_CHALLENGE) {
    const void *sn, *mac;
    size_t snn = 0, macn = 0;
    if (rpc_get_bin(&m, NULL, "nonce", RPC_NONCE_BYTES, &sn, &snn) || snn != RPC_NONCE_BYTES ||
        rpc_get_bin(&m, NULL, "mac", 32, &mac, &macn) || macn != 32)
      fail("a challenge without its nonce or mac");
    uint8_t want[32];
    rpc_auth_mac(secret(), LABEL_SERVER, pe->cn, want);
    if (sodium_memcmp(want, mac, 32) != 0) fail("the challenge's mac is not the server's");
    memcpy(pe->sn, sn, sizeof pe->sn);
    pe->challenged = true;
    pe->authed = false;
  }
  if (b[0] != RPC_FRAME_MARK) rpc_msg_fini(&m);
  ts_free(b);
}

static void honest_auth(rpc_authtab *tab, uint32_t id, peer *pe, const uint8_t *p, size_t n) {
  uint8_t mac[32];
  rpc_auth_mac(secret(), LABEL_CLIENT, pe->sn, mac);
  bool wrong = n && (p[0] & 1);
  if (wrong) mac[p[0] % 32] ^= 0x5a;
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_AUTH, 1);
  rpc_enc_bin(&e, "mac", mac, sizeof mac);
  if (rpc_enc_finish(&e) != TS_OK) fail("encode auth");
  int before = pipe_state(tab, id);
  size_t rn = 0;
  bool dropped, opened;
  uint8_t *b = serve(tab, id, (const uint8_t *)e.sb.data, e.sb.size, &rn, &dropped, &opened);
  rpc_enc_fini(&e);
  if (!b) return;
  if (b[0] == RPC_FRAME_MARK) {
    if (before == 2) { /* an unsealed auth on a channel: never answered sealed */
      fail("a sealed reply to a plaintext message on an authenticated connection");
    }
    if (wrong || !pe->challenged) fail("a wrong or unchallenged auth was accepted");
    rpc_chan_derive(&pe->ch, secret(), pe->cn, pe->sn, true);
    uint8_t *pt = NULL;
    size_t ptn = 0;
    char why[160];
    rpc_msg m;
    if (rpc_chan_open(&pe->ch, b, rn, &pt, &ptn, why, sizeof why) != TS_OK) fail(why);
    if (rpc_msg_decode_owned(&m, pt, ptn) != TS_OK || m.type != RPC_T_OK) fail("the first sealed frame is not ok");
    rpc_msg_fini(&m);
    pe->authed = true;
  } else {
    rpc_msg m;
    plain_type(b, rn, &m);
    rpc_msg_fini(&m);
  }
  pe->challenged = false;
  ts_free(b);
}

static void honest_sealed(rpc_authtab *tab, uint32_t id, peer *pe, const uint8_t *p, size_t n, bool replay) {
  if (!pe->authed || pipe_state(tab, id) != 2) return;
  uint8_t *f = NULL;
  size_t fn = 0;
  if (replay) {
    if (!pe->last) return;
    f = pe->last, fn = pe->lastn;
  } else if (rpc_chan_seal(&pe->ch, p, n, &f, &fn) != TS_OK) {
    fail("seal");
  }
  size_t rn = 0;
  bool dropped, opened;
  uint8_t *b = serve(tab, id, f, fn, &rn, &dropped, &opened);
  if (replay) {
    if (!dropped || (pipe_state(tab, id) != -1 && pipe_state(tab, id) != -2)) fail("a replayed frame was not refused");
    pe->authed = false;
  } else {
    if (dropped) fail("an honest sealed frame was refused");
    ts_free(pe->last);
    pe->last = f, pe->lastn = fn;
    if (!b || b[0] != RPC_FRAME_MARK) fail("no sealed reply on an authenticated connection");
    uint8_t *pt = NULL;
    size_t ptn = 0;
    char why[160];
    if (rpc_chan_open(&pe->ch, b, rn, &pt, &ptn, why, sizeof why) != TS_OK) fail(why);
    rpc_msg m;
    if (rpc_msg_decode_owned(&m, pt, ptn) != TS_OK) fail("a sealed reply does not decode");
    rpc_msg_fini(&m);
  }
  ts_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rpc_authtab tab;
  memset(&tab, 0, sizeof tab);
  pthread_mutex_init(&tab.mu, NULL);
  pthread_cond_init(&tab.cv, NULL);
  tab.secret = secret();
  rpc_authtab_bounds(&tab, 0, 0, 0, "fuzz");
  tab.pipes = ts_calloc(NPIPE, sizeof *tab.pipes);
  if (!tab.pipes) fail("out of memory");
  tab.n = tab.cap = NPIPE;
  for (int i = 0; i < NPIPE; i++) { /* as pipe_cb(ADD_PRE) leaves them */
    tab.pipes[i].pipe_id = 0x7f000001u + (uint32_t)i;
    snprintf(tab.pipes[i].addr, sizeof tab.pipes[i].addr, "fuzz");
  }
  peer peers[NPIPE];
  memset(peers, 0, sizeof peers);
  size_t i = 0, n;
  uint8_t sel;
  const uint8_t *p;
  while (fuzz_next_record(data, size, &i, &sel, &p, &n)) {
    int k = sel & 3;
    uint32_t id = 0x7f000001u + (uint32_t)k;
    peer *pe = &peers[k];
    switch ((sel >> 2) & 3) {
    case 0: {
      size_t rn = 0;
      bool dropped, opened;
      int before = pipe_state(&tab, id);
      uint8_t *b = serve(&tab, id, p, n, &rn, &dropped, &opened);
      if (opened && before != 2) fail("a request was served before authentication");
      if (before == 2 && !dropped) fail("a plaintext message on an authenticated connection was not refused");
      if (b && b[0] != RPC_FRAME_MARK) {
        rpc_msg m;
        plain_type(b, rn, &m);
        rpc_msg_fini(&m);
      }
      ts_free(b);
      if (pipe_state(&tab, id) != 2) pe->authed = false;
      break;
    }
    case 1: honest_hello(&tab, id, pe, p, n); break;
    case 2: honest_auth(&tab, id, pe, p, n); break;
    default: honest_sealed(&tab, id, pe, p, n, sel & 16); break;
    }
    for (int j = 0; j < NPIPE; j++)
      if (pipe_state(&tab, 0x7f000001u + (uint32_t)j) == 2 && !peers[j].authed)
        fail("a connection authenticated without an honest auth");
  }
  for (int j = 0; j < NPIPE; j++) {
    ts_free(peers[j].last);
    rpc_chan_wipe(&peers[j].ch);
  }
  rpc_authtab_fini(&tab);
  return 0;
}
