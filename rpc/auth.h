/* auth.h — shared-secret authentication of nng pipes and the secure channel
 * that follows it (libsodium), plus the bounds on unauthenticated pipes.
 *
 * The secret is a file of at least RPC_SECRET_MIN bytes with at least
 * RPC_SECRET_MIN_DISTINCT distinct byte values, readable by its owner only
 * (--secret-file, or the file named by TESSEL_RPC_SECRET_FILE); the 32-byte
 * key is crypto_generichash(content) under a fixed context. Handshake per
 * pipe (docs/RPC.md, "Authentication"):
 *   client -> hello     {version, role, nonce: client nonce (32 B)}
 *   server -> challenge {version, nonce: server nonce (32 B),
 *                        mac: HMAC(key, "tessel-rpc-1 server" || client nonce)}
 *   client -> auth      {mac: HMAC(key, "tessel-rpc-1 client" || server nonce)}
 *   server -> ok (the first sealed message) | error{code:"auth"} (plaintext)
 * HMAC is crypto_auth (HMAC-SHA512-256); nonces come from randombytes_buf.
 *
 * Then every message in both directions is a sealed frame (docs/RPC.md,
 * "Secure channel"): 0xC1 || counter (u64 big-endian) || AEAD ciphertext,
 * XChaCha20-Poly1305 (crypto_aead_xchacha20poly1305_ietf) under one key per
 * direction derived from the key and both nonces (crypto_generichash, then
 * crypto_kdf_derive_from_key), the nonce being the counter, the associated
 * data the 9-byte frame header. A receiver accepts only the counter it
 * expects next (0, 1, 2, ...): a replayed, reordered, dropped-and-substituted,
 * altered or unsealed message is refused and the connection closed.
 *
 * The server side (rpc_authtab) keeps the state per nng pipe from the moment
 * the pipe is added (nng_pipe_notify ADD_PRE) until it closes (REM_POST),
 * and bounds the pipes that have not authenticated: at most
 * RPC_PENDING_MAX per socket and RPC_PENDING_PER_ADDR per source address
 * (to make room, a pending pipe that has stalled for RPC_SILENT_GRACE_MS is
 * closed: one without a hello, else one that has not answered its
 * challenge; under the per-socket cap, from the address with the most
 * pending pipes, which may take a young one of a busier address than the
 * new pipe's; when no pipe may go the new one is refused instead), each
 * closed when it has
 * not authenticated within the handshake deadline, and a plaintext message
 * over RPC_PREAUTH_MAX bytes closes it before it is decoded. The pipes it
 * closes (refused, late, over a cap) are dropped by TCP disconnect
 * (rpc/pipe_drop.h) in batches from its own thread, never with a plain
 * nng_pipe_close under a message that is arriving. */
#ifndef TESSEL_RPC_AUTH_H
#define TESSEL_RPC_AUTH_H

#include <pthread.h>

#include "rpc/protocol.h"

#define RPC_SECRET_MIN 16
#define RPC_SECRET_MIN_DISTINCT 8  /* distinct byte values in the secret */
#define RPC_SECRET_MAX (1u << 20)
#define RPC_HANDSHAKE_MS 5000      /* an unauthenticated pipe is closed after this */
#define RPC_PENDING_MAX 256        /* unauthenticated pipes per socket (listener) */
#define RPC_PENDING_PER_ADDR 32    /* ... and per source address */
#define RPC_SILENT_GRACE_MS 50     /* a pending pipe idle this long may be closed under a cap */
#define RPC_AUTH_RETRY_MS 5000    /* a client re-runs a handshake whose connection was lost this long */
#define RPC_PREAUTH_MAX 4096       /* bytes of a message before authentication */
#define RPC_RELEASE_STUCK_MS 10000 /* a closed pipe nng has not released by then: its reaper is stuck */
#define RPC_FRAME_MARK 0xC1        /* first byte of a sealed frame (never msgpack) */
#define RPC_FRAME_HDR 9            /* mark + 8-byte counter */
#define RPC_FRAME_TAG 16           /* Poly1305 tag */
#define RPC_SECRET_ENV "TESSEL_RPC_SECRET_FILE"

typedef struct rpc_secret {
  uint8_t key[32];
  bool loaded;
} rpc_secret;

/* Loads the secret from path, or (path NULL/empty) from $TESSEL_RPC_SECRET_FILE.
 * Errors (TS_EAUTH with d filled, naming the file and the fix): neither
 * given, unreadable, not a regular file, readable or writable by group or
 * others, shorter than RPC_SECRET_MIN bytes, fewer than
 * RPC_SECRET_MIN_DISTINCT distinct byte values. */
ts_status rpc_secret_load(rpc_secret *s, const char *path, ts_diag *d);
/* Derives the key from bytes in memory (tests, bench); the same length and
 * distinct-byte rules as a file. */
ts_status rpc_secret_from_bytes(rpc_secret *s, const void *p, size_t n);
void rpc_secret_wipe(rpc_secret *s);

/* ---- server side ---------------------------------------------------------- */
/* One direction pair of a secure channel. */
typedef struct rpc_chan {
  uint8_t tx_key[32], rx_key[32];
  uint64_t tx_ctr, rx_ctr; /* the next counter to send / to accept */
  uint32_t pipe;           /* the nng pipe it runs on (client side) */
  bool up;
} rpc_chan;

/* Derives both keys from the secret and the two handshake nonces; `client`
 * says which side we are (the client sends with the client-to-server key). */
void rpc_chan_derive(rpc_chan *c, const rpc_secret *s, const uint8_t cn[RPC_NONCE_BYTES],
                     const uint8_t sn[RPC_NONCE_BYTES], bool client);
/* Seals n bytes of plaintext into a new frame (*out, *outn; ts_free it)
 * under the next send counter. TS_ENOMEM, TS_ETOOBIG. */
ts_status rpc_chan_seal(rpc_chan *c, const void *p, size_t n, uint8_t **out, size_t *outn);
/* Opens a frame into a new buffer of plaintext (*out, *outn; ts_free it):
 * TS_OK, or TS_EAUTH with why[] saying what was wrong (not a frame, the
 * wrong counter: replayed/reordered/dropped, or failed authentication:
 * altered/forged). The receive counter advances only on success. */
ts_status rpc_chan_open(rpc_chan *c, const void *p, size_t n, uint8_t **out, size_t *outn,
                        char *why, size_t whyn);
void rpc_chan_wipe(rpc_chan *c);

typedef struct rpc_authpipe {
  uint32_t pipe_id;
  int state;               /* 0 none, 1 challenged, 2 authenticated, -2 to close, -1 closing */
  uint8_t nonce[RPC_NONCE_BYTES];   /* the server nonce (state 1) */
  uint8_t cnonce[RPC_NONCE_BYTES];  /* the client nonce (state 1) */
  char role[16];
  char addr[48];           /* source address ("ipc" for ipc://) */
  uint64_t addr_key;       /* its keyed hash (rpc_authtab.addr_hkey) */
  int64_t added_ms;        /* when the pipe was added (deadline) */
  int64_t challenged_ms;   /* when its hello was answered (state 1) */
  int64_t closing_ms;      /* when it was first marked closing (state -1) */
  rpc_chan chan;           /* state 2 */
} rpc_authpipe;

typedef struct rpc_authtab {
  pthread_mutex_t mu;
  rpc_authpipe *pipes;
  size_t n, cap;
  const rpc_secret *secret;
  uint8_t addr_hkey[16];   /* random key of the address hash (crypto_shorthash) */
  /* optional hook called (from an nng thread) when a pipe closes */
  void (*on_close)(void *arg, uint32_t pipe_id);
  void *on_close_arg;
  /* bounds on unauthenticated pipes (0: the RPC_ defaults) */
  int handshake_ms, pending_max, pending_per_addr;
  int grace_ms;            /* RPC_SILENT_GRACE_MS unless rpc_authtab_grace set it */
  const char *log;         /* prefix of the refusal lines on stderr */
  uint64_t refused;        /* pipes closed: refused frames, deadlines, caps */
  pthread_t reaper;
  pthread_cond_t cv;
  bool reaper_on, stopping;
  bool nng_stuck;          /* a closed pipe was not released in RPC_RELEASE_STUCK_MS */
  bool closing;            /* rpc_authtab_drop_all ran: new pipes are refused */
} rpc_authtab;

/* Registers pipe notifications on sock and starts the thread that closes
 * pipes past the handshake deadline. The secret must outlive tab. Call
 * rpc_authtab_bounds, if at all, before the socket listens. */
ts_status rpc_authtab_init(rpc_authtab *tab, nng_socket sock, const rpc_secret *secret);
/* Overrides the bounds (0 keeps a default) and names the log prefix. */
void rpc_authtab_bounds(rpc_authtab *tab, int handshake_ms, int pending_max, int pending_per_addr,
                        const char *log);
/* How long a pending pipe may sit without a hello, or with its challenge
 * unanswered, before a cap may close it (ms; 0: RPC_SILENT_GRACE_MS). */
void rpc_authtab_grace(rpc_authtab *tab, int grace_ms);
/* Number of pipes not authenticated yet (tests, bench). */
size_t rpc_authtab_pending(rpc_authtab *tab);
/* For a socket about to close: refuses new pipes from now on (closed as
 * nng adds them, before anything is received on them), drops every pipe of
 * the table (rpc/pipe_drop.h: by TCP disconnect, so that nng 1.5.2's reaper
 * does not wedge) and waits up to wait_ms (<= 0: RPC_DROP_WAIT_MS) for nng
 * to release them. Returns how many were not released in time. */
size_t rpc_authtab_drop_all(rpc_authtab *tab, int wait_ms);
/* True once a pipe this table closed went unreleased for
 * RPC_RELEASE_STUCK_MS: nng's pipe reaper is stuck, and pipes closed from
 * then on keep their descriptors (the reaper thread said so on stderr). */
bool rpc_authtab_stuck(rpc_authtab *tab);
/* The socket must be closed first (no more callbacks). */
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
/* Opens a received message of pipe p into m: on an authenticated pipe it
 * must be a sealed frame with the expected counter (decrypted, then
 * decoded); before that, a plaintext message of at most RPC_PREAUTH_MAX
 * bytes. Returns TS_OK; a decode status with m->err (reply with an error);
 * TS_EAUTH for a sealed frame on an unauthenticated pipe (reply with an auth
 * error: the peer re-authenticates). *dropped is set (and TS_EAUTH
 * returned) when the message was refused and the pipe closed — a refused
 * frame, an unsealed message on an authenticated pipe, an oversize
 * unauthenticated message: send nothing. */
ts_status rpc_authtab_open(rpc_authtab *tab, nng_pipe p, const void *data, size_t len, rpc_msg *m,
                           bool *dropped);
/* Finishes reply e into an nng message for pipe p: sealed when p is
 * authenticated, plaintext otherwise; a reply that cannot be built becomes
 * the nomem error. e is fini'd. Returns NULL only when not even that could
 * be allocated. */
nng_msg *rpc_authtab_seal(rpc_authtab *tab, nng_pipe p, rpc_enc *e);

/* ---- client side ---------------------------------------------------------- */
/* Runs the handshake over a dialed REQ socket as `role` ("client", "server",
 * "query") and sets up ch. Returns TS_OK, TS_EAUTH (wrong key on either
 * side; d says which), TS_EVERSION, TS_EIO / TS_ETIMEOUT. */
ts_status rpc_auth_client(nng_socket s, const rpc_secret *secret, const char *role, rpc_chan *ch,
                          ts_diag *d);
/* One request/reply over the secure channel ch (rpc_call's contract). A
 * reply that is not the next sealed frame of ch's pipe is refused: the
 * pipe is closed and TS_EAUTH returned with ch down. A plaintext auth error
 * from a new pipe (nng redialed underneath) returns TS_EAUTH with ch down:
 * run rpc_auth_client again. *pipe (optional) gets the reply's pipe. A
 * request over RPC_PART_MAX bytes goes as `part` messages (protocol.h). */
ts_status rpc_chan_call(nng_socket s, rpc_chan *ch, rpc_enc *e, rpc_msg *reply, nng_pipe *pipe,
                        ts_diag *d);

/* HMAC of a context label and a nonce (exposed for tests). */
void rpc_auth_mac(const rpc_secret *s, const char *label, const uint8_t nonce[RPC_NONCE_BYTES],
                  uint8_t mac[32]);

#endif
