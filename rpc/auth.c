/* auth.c — the shared secret, the per-pipe challenge–response of auth.h, and
 * the client side of the handshake. Crypto is libsodium's: generichash for
 * the key, crypto_auth (HMAC-SHA512-256) for the macs, randombytes_buf for
 * nonces, crypto_verify_32 for constant-time comparison. */
#include "rpc/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#define LABEL_SERVER "tessel-rpc-1 server"
#define LABEL_CLIENT "tessel-rpc-1 client"

static bool sodium_ready(void) {
  return sodium_init() >= 0;
}

ts_status rpc_secret_from_bytes(rpc_secret *s, const void *p, size_t n) {
  memset(s, 0, sizeof *s);
  if (n < RPC_SECRET_MIN || !sodium_ready()) return TS_EAUTH;
  static const uint8_t ctx[] = "tessel-rpc-secret-v1";
  /* key = BLAKE2b-256(content) keyed by a fixed context string */
  crypto_generichash(s->key, sizeof s->key, p, n, ctx, sizeof ctx - 1);
  s->loaded = true;
  return TS_OK;
}

void rpc_secret_wipe(rpc_secret *s) {
  sodium_memzero(s, sizeof *s);
}

ts_status rpc_secret_load(rpc_secret *s, const char *path, ts_diag *d) {
  memset(s, 0, sizeof *s);
  const char *from = "--secret-file";
  if (!path || !*path) {
    path = getenv(RPC_SECRET_ENV);
    from = RPC_SECRET_ENV;
  }
  if (!path || !*path) {
    return ts_diag_set(d, TS_EAUTH, "no shared secret: pass --secret-file FILE or set " RPC_SECRET_ENV
             " (a file of at least %d bytes, the same on every host)", RPC_SECRET_MIN);
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    return ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s): %s", path, from, strerror(errno));
  }
  uint8_t *buf = ts_malloc(RPC_SECRET_MAX);
  if (!buf) {
    fclose(f);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  size_t n = fread(buf, 1, RPC_SECRET_MAX, f);
  bool rd_err = ferror(f);
  fclose(f);
  ts_status st = TS_OK;
  if (rd_err) {
    st = ts_diag_set(d, TS_EAUTH, "secret file '%s': read error", path);
  } else if (n < RPC_SECRET_MIN) {
    st = ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s) holds %zu bytes; at least %d are required",
                     path, from, n, RPC_SECRET_MIN);
  } else if (rpc_secret_from_bytes(s, buf, n)) {
    st = ts_diag_set(d, TS_EAUTH, "libsodium failed to initialise");
  }
  sodium_memzero(buf, RPC_SECRET_MAX);
  ts_free(buf);
  return st;
}

void rpc_auth_mac(const rpc_secret *s, const char *label, const uint8_t nonce[RPC_NONCE_BYTES],
                  uint8_t mac[32]) {
  crypto_auth_hmacsha512256_state st;
  crypto_auth_hmacsha512256_init(&st, s->key, sizeof s->key);
  crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label, strlen(label));
  crypto_auth_hmacsha512256_update(&st, nonce, RPC_NONCE_BYTES);
  crypto_auth_hmacsha512256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

/* ---- server side ---------------------------------------------------------- */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg) {
  rpc_authtab *tab = arg;
  if (ev != NNG_PIPE_EV_REM_POST) return;
  uint32_t id = nng_pipe_id(p);
  pthread_mutex_lock(&tab->mu);
  for (size_t i = 0; i < tab->n; i++)
    if (tab->pipes[i].pipe_id == id) {
      sodium_memzero(&tab->pipes[i], sizeof tab->pipes[i]);
      tab->pipes[i] = tab->pipes[--tab->n];
      break;
    }
  pthread_mutex_unlock(&tab->mu);
  if (tab->on_close) tab->on_close(tab->on_close_arg, id);
}

ts_status rpc_authtab_init(rpc_authtab *tab, nng_socket sock, const rpc_secret *secret) {
  memset(tab, 0, sizeof *tab);
  if (!sodium_ready()) return TS_ESYSTEM;
  pthread_mutex_init(&tab->mu, NULL);
  tab->secret = secret;
  if (nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, pipe_cb, tab)) return TS_EIO;
  return TS_OK;
}

void rpc_authtab_fini(rpc_authtab *tab) {
  /* the socket must be closed first (no more callbacks) */
  if (tab->pipes) sodium_memzero(tab->pipes, tab->cap * sizeof *tab->pipes);
  ts_free(tab->pipes);
  tab->pipes = NULL;
  tab->n = tab->cap = 0;
  pthread_mutex_destroy(&tab->mu);
}

/* caller holds mu; returns NULL if absent and !create (or OOM) */
static rpc_authpipe *find_pipe(rpc_authtab *tab, uint32_t id, bool create) {
  for (size_t i = 0; i < tab->n; i++)
    if (tab->pipes[i].pipe_id == id) return &tab->pipes[i];
  if (!create) return NULL;
  if (tab->n == tab->cap) {
    size_t cap = tab->cap ? tab->cap * 2 : 16;
    rpc_authpipe *np = ts_realloc(tab->pipes, cap * sizeof *np);
    if (!np) return NULL;
    tab->pipes = np;
    tab->cap = cap;
  }
  rpc_authpipe *ap = &tab->pipes[tab->n++];
  memset(ap, 0, sizeof *ap);
  ap->pipe_id = id;
  return ap;
}

bool rpc_authtab_authed(rpc_authtab *tab, nng_pipe p) {
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, nng_pipe_id(p), false);
  bool ok = ap && ap->state == 2;
  pthread_mutex_unlock(&tab->mu);
  return ok;
}

void rpc_authtab_role(rpc_authtab *tab, nng_pipe p, char *role, size_t n) {
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, nng_pipe_id(p), false);
  snprintf(role, n, "%s", ap && ap->state == 2 ? ap->role : "");
  pthread_mutex_unlock(&tab->mu);
}

bool rpc_authtab_handle(rpc_authtab *tab, rpc_msg *m, nng_pipe p, rpc_enc *reply) {
  uint32_t id = nng_pipe_id(p);
  if (m->type == RPC_T_HELLO) {
    uint64_t ver = 0;
    char role[16];
    const void *cn;
    size_t cnn = 0;
    ts_status st;
    if ((st = rpc_need(m, rpc_get_u64(m, NULL, "version", UINT32_MAX, &ver), "version")) ||
        (st = rpc_need(m, rpc_get_str(m, NULL, "role", role, sizeof role), "role")) ||
        (st = rpc_need(m, rpc_get_bin(m, NULL, "nonce", RPC_NONCE_BYTES, &cn, &cnn), "nonce"))) {
      rpc_enc_error(reply, st, "hello: %s", m->err);
      return true;
    }
    if (cnn != RPC_NONCE_BYTES) {
      rpc_enc_error(reply, TS_EPROTO, "hello: nonce must be %d bytes", RPC_NONCE_BYTES);
      return true;
    }
    if (ver != RPC_PROTO_VERSION) {
      rpc_enc_error(reply, TS_EVERSION, "protocol version %llu, this peer speaks %d",
                    (unsigned long long)ver, RPC_PROTO_VERSION);
      return true;
    }
    uint8_t mac[32], nonce[RPC_NONCE_BYTES];
    randombytes_buf(nonce, sizeof nonce);
    rpc_auth_mac(tab->secret, LABEL_SERVER, cn, mac);
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = find_pipe(tab, id, true);
    if (ap) {
      ap->state = 1; /* a new hello restarts the handshake */
      memcpy(ap->nonce, nonce, sizeof nonce);
      snprintf(ap->role, sizeof ap->role, "%s", role);
    }
    pthread_mutex_unlock(&tab->mu);
    if (!ap) {
      rpc_enc_error(reply, TS_ENOMEM, "out of memory");
      return true;
    }
    rpc_enc_begin(reply, RPC_T_CHALLENGE, 3);
    rpc_enc_u64(reply, "version", RPC_PROTO_VERSION);
    rpc_enc_bin(reply, "nonce", nonce, sizeof nonce);
    rpc_enc_bin(reply, "mac", mac, sizeof mac);
    return true;
  }
  if (m->type == RPC_T_AUTH) {
    const void *mac;
    size_t macn = 0;
    ts_status st = rpc_need(m, rpc_get_bin(m, NULL, "mac", 32, &mac, &macn), "mac");
    if (st || macn != 32) {
      rpc_enc_error(reply, TS_EPROTO, "auth: %s", st ? m->err : "mac must be 32 bytes");
      return true;
    }
    bool ok = false;
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = find_pipe(tab, id, false);
    if (ap && ap->state == 1) {
      uint8_t want[32];
      rpc_auth_mac(tab->secret, LABEL_CLIENT, ap->nonce, want);
      ok = crypto_verify_32(want, mac) == 0;
      /* one try per challenge: a failed mac needs a new hello */
      ap->state = ok ? 2 : 0;
      sodium_memzero(ap->nonce, sizeof ap->nonce);
    }
    pthread_mutex_unlock(&tab->mu);
    if (ok) rpc_enc_begin(reply, RPC_T_OK, 0);
    else rpc_enc_error(reply, TS_EAUTH, ap ? "authentication failed: wrong key" :
                                            "auth without hello");
    return true;
  }
  if (!rpc_authtab_authed(tab, p)) {
    rpc_enc_error(reply, TS_EAUTH, "not authenticated: send hello/auth first");
    return true;
  }
  return false;
}

/* ---- client side ---------------------------------------------------------- */
ts_status rpc_auth_client(nng_socket s, const rpc_secret *secret, const char *role, ts_diag *d) {
  if (!sodium_ready()) return TS_ESYSTEM;
  uint8_t cn[RPC_NONCE_BYTES];
  randombytes_buf(cn, sizeof cn);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&e, "role", role);
  rpc_enc_bin(&e, "nonce", cn, sizeof cn);
  rpc_msg r;
  ts_status st = rpc_call(s, &e, &r, d);
  if (st) return st;
  const void *sn, *smac;
  size_t snn = 0, smacn = 0;
  if (r.type != RPC_T_CHALLENGE || rpc_get_bin(&r, NULL, "nonce", 64, &sn, &snn) ||
      rpc_get_bin(&r, NULL, "mac", 64, &smac, &smacn) || snn != RPC_NONCE_BYTES || smacn != 32) {
    ts_diag_set(d, TS_EPROTO, "handshake: unexpected reply '%s'", rpc_type_name(r.type));
    rpc_msg_fini(&r);
    return TS_EPROTO;
  }
  uint8_t want[32], mac[32];
  rpc_auth_mac(secret, LABEL_SERVER, cn, want);
  if (crypto_verify_32(want, smac) != 0) {
    ts_diag_set(d, TS_EAUTH, "the peer does not hold our key (server proof failed)");
    rpc_msg_fini(&r);
    return TS_EAUTH;
  }
  rpc_auth_mac(secret, LABEL_CLIENT, sn, mac);
  rpc_msg_fini(&r);
  rpc_enc_begin(&e, RPC_T_AUTH, 1);
  rpc_enc_bin(&e, "mac", mac, sizeof mac);
  st = rpc_call(s, &e, &r, d);
  if (st) return st;
  bool ok = r.type == RPC_T_OK;
  rpc_msg_fini(&r);
  if (!ok) {
    return ts_diag_set(d, TS_EPROTO, "handshake: unexpected reply to auth");
  }
  return TS_OK;
}
