/* auth.h — shared-secret authentication of nng pipes (libsodium).
 *
 * The secret is any file of at least RPC_SECRET_MIN bytes (--secret-file, or
 * the file named by TESSEL_RPC_SECRET_FILE); the 32-byte key is
 * crypto_generichash(content) under a fixed context. Handshake per pipe
 * (docs/RPC.md):
 *   client -> hello     {version, role, nonce: client nonce (32 B)}
 *   server -> challenge {version, nonce: server nonce (32 B),
 *                        mac: HMAC(key, "tessel-rpc-1 server" || client nonce)}
 *   client -> auth      {mac: HMAC(key, "tessel-rpc-1 client" || server nonce)}
 *   server -> ok | error{code:"auth"}
 * HMAC is crypto_auth (HMAC-SHA512-256); nonces come from randombytes_buf.
 * Both sides prove the key, nothing secret crosses the wire, a replayed mac
 * is useless (fresh nonce per pipe). The server side (rpc_authtab) keeps the
 * state per nng pipe, forgets it when the pipe closes (nng_pipe_notify), and
 * rpc_authtab_handle() refuses every non-handshake request of an
 * unauthenticated pipe with {code:"auth"}. */
#ifndef TESSEL_RPC_AUTH_H
#define TESSEL_RPC_AUTH_H

#include <pthread.h>

#include "rpc/protocol.h"

#define RPC_SECRET_MIN 16
#define RPC_SECRET_MAX (1u << 20)
#define RPC_SECRET_ENV "TESSEL_RPC_SECRET_FILE"

typedef struct rpc_secret {
  uint8_t key[32];
  bool loaded;
} rpc_secret;

/* Loads the secret from path, or (path NULL/empty) from $TESSEL_RPC_SECRET_FILE.
 * Errors (TS_EAUTH with d filled): neither given, unreadable, shorter than
 * 16 bytes. */
ts_status rpc_secret_load(rpc_secret *s, const char *path, ts_diag *d);
/* Derives the key from bytes in memory (tests). */
ts_status rpc_secret_from_bytes(rpc_secret *s, const void *p, size_t n);
void rpc_secret_wipe(rpc_secret *s);

/* ---- server side ---------------------------------------------------------- */
typedef struct rpc_authpipe {
  uint32_t pipe_id;
  int state;               /* 0 none, 1 challenged, 2 authenticated */
  uint8_t nonce[RPC_NONCE_BYTES];
  char role[16];
} rpc_authpipe;

typedef struct rpc_authtab {
  pthread_mutex_t mu;
  rpc_authpipe *pipes;
  size_t n, cap;
  const rpc_secret *secret;
  /* optional hook called (from an nng thread) when a pipe closes */
  void (*on_close)(void *arg, uint32_t pipe_id);
  void *on_close_arg;
} rpc_authtab;

/* Registers pipe-close notifications on sock. The secret must outlive tab. */
ts_status rpc_authtab_init(rpc_authtab *tab, nng_socket sock, const rpc_secret *secret);
void rpc_authtab_fini(rpc_authtab *tab);
bool rpc_authtab_authed(rpc_authtab *tab, nng_pipe p);
/* Role the pipe authenticated as ("" if none); copies into role. */
void rpc_authtab_role(rpc_authtab *tab, nng_pipe p, char *role, size_t n);
/* Handles the handshake for a received request m on pipe p.
 * Returns true when the request was consumed: a hello/auth message, or any
 * request of an unauthenticated pipe; *reply is then begun and complete (the
 * caller sends it). Returns false for a request of an authenticated pipe
 * that the caller must serve itself. */
bool rpc_authtab_handle(rpc_authtab *tab, rpc_msg *m, nng_pipe p, rpc_enc *reply);

/* ---- client side ---------------------------------------------------------- */
/* Runs the handshake over a dialed REQ socket as `role` ("client", "server",
 * "query"). Returns TS_OK, TS_EAUTH (wrong key on either side; d says
 * which), TS_EVERSION, TS_EIO / TS_ETIMEOUT. */
ts_status rpc_auth_client(nng_socket s, const rpc_secret *secret, const char *role, ts_diag *d);

/* HMAC of a context label and a nonce (exposed for tests). */
void rpc_auth_mac(const rpc_secret *s, const char *label, const uint8_t nonce[RPC_NONCE_BYTES],
                  uint8_t mac[32]);

#endif
