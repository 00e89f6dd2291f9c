/* protocol.h — tessel's wire protocol: msgpack messages over nng REQ/REP,
 * shared by the tracker, rpc_server and their clients (docs/RPC.md is the
 * field-by-field reference).
 *
 * Every message is ONE msgpack map with string keys:
 *   {"v": RPC_PROTO_VERSION, "t": "<type name>", ...fields of that type}
 * The decoder (rpc_msg_decode) is strict: the buffer holds exactly one map,
 * at most RPC_MAX_MSG bytes, nesting at most RPC_MAX_DEPTH, every container
 * count bounded by the bytes left (so a 5-byte message cannot make it
 * allocate gigabytes), keys unique strings, "v" equal to our version and "t" a
 * known type. Fields are then read with typed getters (rpc_get_*) that check
 * the type and the bounds and leave a message naming the field in msg->err.
 *
 * Requests get exactly one reply: the typed reply listed in docs/RPC.md, or
 * RPC_T_ERROR {code, message}. A peer must authenticate its pipe first
 * (auth.h): every other request before that gets {"t":"error","code":"auth"},
 * and after it every message travels as a sealed frame (auth.h) whose
 * plaintext is such a map.
 */
#ifndef TESSEL_RPC_PROTOCOL_H
#define TESSEL_RPC_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <nng/nng.h>

#include "base/ts.h"

/* 2: every message after the handshake is a sealed frame (auth.h). A peer
 * of version 1 is refused with error{code:"version"} naming both. */
#define RPC_PROTO_VERSION 2
#define RPC_MAX_MSG (64u << 20)   /* bytes of one message (NNG_OPT_RECVMAXSZ) */
#define RPC_MAX_ARTIFACT (48u << 20) /* bytes of one uploaded artifact */
/* A request whose plaintext is over RPC_PART_MAX bytes travels as `part`
 * messages of at most RPC_PART_MAX bytes of it each (rpc_chan_call does it),
 * so that rpc_server can set nng's receive limit to RPC_SERVER_RECV_MAX:
 * nng allocates a message's declared size before anyone has authenticated. */
#define RPC_PART_MAX (128u << 10)
#define RPC_SERVER_RECV_MAX (RPC_PART_MAX + 4096u) /* a sealed part and its envelope */
#define RPC_MAX_DEPTH 8            /* container nesting */
#define RPC_MAX_STR 4096           /* bytes of a string field (except bins) */
#define RPC_MAX_KEY 64             /* bytes of a tracker key, e.g. "rasp4b" */
#define RPC_MAX_ADDR 256           /* bytes of an address, e.g. "tcp://10.0.0.7:9090" */
#define RPC_TOKEN_LEN 32           /* session tokens: 32 lowercase hex characters */
#define RPC_NONCE_BYTES 32

/* rpc_ and trk_ functions return a ts_status (base/ts.h: TS_EPROTO for a
 * malformed message or field, TS_EVERSION, TS_EAUTH, TS_EDENIED, TS_ENOTFOUND
 * for an absent optional field or unknown id, TS_ETOOBIG, TS_EIO,
 * TS_ETIMEOUT, TS_ESYSTEM, TS_EREMOTE for an error reply with an unknown
 * code, TS_EPENDING for a grant the server has not heard of yet) and fill a
 * ts_diag. */
/* Wire names of the error codes ("auth", "proto", ...) and back. */
const char *rpc_status_code(ts_status st);
ts_status rpc_status_from_code(const char *code);

/* Message types: X(enum, wire name). Directions in docs/RPC.md. */
#define RPC_TYPE_LIST(X)                                                       \
  X(RPC_T_ERROR, "error")           /* any reply: {code, message} */          \
  X(RPC_T_OK, "ok")                 /* any reply: no fields */                \
  /* handshake (auth.h), to tracker and server alike */                      \
  X(RPC_T_HELLO, "hello")           /* {version, role, nonce} */              \
  X(RPC_T_CHALLENGE, "challenge")   /* {version, nonce, mac} */               \
  X(RPC_T_AUTH, "auth")             /* {mac} -> ok | error */                 \
  /* rpc_server -> tracker */                                                \
  X(RPC_T_REGISTER, "register")     /* {key, address, info} */                \
  X(RPC_T_REGISTERED, "registered") /* {server_id, heartbeat_ms} */           \
  X(RPC_T_HEARTBEAT, "heartbeat")   /* {server_id, busy} */                   \
  X(RPC_T_HEARTBEAT_ACK, "heartbeat_ack") /* {tokens: [token...]} */          \
  X(RPC_T_DEREGISTER, "deregister") /* {server_id} -> ok */                   \
  /* client -> tracker */                                                    \
  X(RPC_T_REQUEST, "request")       /* {key, priority} -> ticket */           \
  X(RPC_T_TICKET, "ticket")         /* {ticket} */                            \
  X(RPC_T_POLL, "poll")             /* {ticket, wait_ms} -> grant */          \
  X(RPC_T_GRANT, "grant")           /* {ticket, state, address, token, key, info} */ \
  X(RPC_T_RELEASE, "release")       /* {ticket} -> ok */                      \
  X(RPC_T_QUERY, "query")           /* {} -> query_reply */                   \
  X(RPC_T_QUERY_REPLY, "query_reply") /* {servers: [...], keys: {...}} */     \
  /* client -> rpc_server */                                                 \
  X(RPC_T_INFO, "info")             /* {} -> info_reply */                    \
  X(RPC_T_INFO_REPLY, "info_reply") /* {info} */                              \
  X(RPC_T_UPLOAD, "upload")         /* {token?, name, data} -> uploaded */    \
  X(RPC_T_UPLOADED, "uploaded")     /* {artifact} */                          \
  X(RPC_T_MEASURE, "measure")       /* {token?, artifact, opts} -> result */  \
  X(RPC_T_RESULT, "result")         /* {status, error, number, secs, checksums, outputs?} */ \
  X(RPC_T_CLOSE, "close")           /* {token?} -> ok: drop this session's artifacts */ \
  X(RPC_T_RUN_MODEL, "run_model")   /* {token?, artifact, inputs: [{name, dtype, shape, data}], repeat, timeout_s, num_threads} -> model_result */ \
  X(RPC_T_MODEL_RESULT, "model_result") /* {status, error, secs, outputs: [{name, dtype, shape, data}]} */ \
  /* a request over RPC_PART_MAX bytes, sent in order in parts (sealed) */  \
  X(RPC_T_PART, "part")             /* {seq, total, data} -> ok | the whole request's reply */

typedef enum {
#define RPC_X_ENUM(e, s) e,
  RPC_TYPE_LIST(RPC_X_ENUM)
#undef RPC_X_ENUM
  RPC_T_COUNT
} rpc_type;
const char *rpc_type_name(rpc_type t);
/* RPC_T_COUNT when unknown. */
rpc_type rpc_type_from_name(const char *s, size_t n);

/* ---- decoding ------------------------------------------------------------- */
/* A decoded message. Objects (and strings/bins inside them) point into the
 * zone and into `buf` (a private copy of the bytes); rpc_msg_fini frees both. */
typedef struct rpc_msg {
  rpc_type type;
  uint32_t version;
  msgpack_object root; /* the top-level map */
  msgpack_zone *zone;
  void *buf;
  size_t len;
  char err[200];       /* what was wrong (decode or last failing getter) */
} rpc_msg;

/* Decodes len bytes (copied). Returns TS_OK, TS_ETOOBIG (over RPC_MAX_MSG),
 * TS_EVERSION (a well-formed message of another version: m->version says
 * which) or TS_EPROTO; m->d says why. On failure m owns nothing (fini is
 * still safe). */
ts_status rpc_msg_decode(rpc_msg *m, const void *data, size_t len);
/* The same for a ts_malloc'd buffer that m takes over (no copy); it is
 * freed on failure as well. */
ts_status rpc_msg_decode_owned(rpc_msg *m, void *buf, size_t len);
void rpc_msg_fini(rpc_msg *m);

/* Typed getters. `map` is a map object inside m (NULL: the root). They
 * return TS_OK, TS_ENOTFOUND when the key is absent (out untouched), or
 * TS_EPROTO for a wrong type / out-of-range value (m->err names the field).
 * Callers that need a field treat ENOENT as an error: rpc_need() does. */
const msgpack_object *rpc_find(const msgpack_object *map, const char *key);
ts_status rpc_get_u64(rpc_msg *m, const msgpack_object *map, const char *key, uint64_t max,
                       uint64_t *out);
ts_status rpc_get_i64(rpc_msg *m, const msgpack_object *map, const char *key, int64_t lo,
                       int64_t hi, int64_t *out);
/* Finite doubles in [lo, hi]; integers are accepted. */
ts_status rpc_get_f64(rpc_msg *m, const msgpack_object *map, const char *key, double lo,
                       double hi, double *out);
ts_status rpc_get_bool(rpc_msg *m, const msgpack_object *map, const char *key, bool *out);
/* Copies a string of at most cap-1 bytes, without NUL bytes, NUL-terminated. */
ts_status rpc_get_str(rpc_msg *m, const msgpack_object *map, const char *key, char *dst,
                       size_t cap);
/* A bin (or str) of at most maxn bytes; *p points into the message. */
ts_status rpc_get_bin(rpc_msg *m, const msgpack_object *map, const char *key, size_t maxn,
                       const void **p, size_t *n);
ts_status rpc_get_array(rpc_msg *m, const msgpack_object *map, const char *key, uint32_t maxn,
                         const msgpack_object **items, uint32_t *n);
ts_status rpc_get_map(rpc_msg *m, const msgpack_object *map, const char *key,
                       const msgpack_object **out);
/* ENOENT -> EPROTO with "missing field 'key'" in m->err. */
ts_status rpc_need(rpc_msg *m, ts_status st, const char *key);

/* ---- encoding ------------------------------------------------------------- */
/* Builds one message. rpc_enc_begin writes the map header for nfields fields
 * besides "v" and "t"; each rpc_enc_<kind>(e, key, ...) adds one field. For
 * nested values call rpc_enc_key and then pack with msgpack_pack_* on &e->pk
 * (rpc_pack_str packs a C string). rpc_enc_finish checks the field count. */
typedef struct rpc_enc {
  msgpack_sbuffer sb; /* grown with ts_realloc; rpc_enc_fini frees it */
  msgpack_packer pk;
  uint32_t want, have;
  bool fail, oom;
} rpc_enc;
void rpc_enc_begin(rpc_enc *e, rpc_type t, uint32_t nfields);
void rpc_enc_key(rpc_enc *e, const char *key);
void rpc_enc_str(rpc_enc *e, const char *key, const char *s);
void rpc_enc_u64(rpc_enc *e, const char *key, uint64_t v);
void rpc_enc_i64(rpc_enc *e, const char *key, int64_t v);
void rpc_enc_f64(rpc_enc *e, const char *key, double v);
void rpc_enc_bool(rpc_enc *e, const char *key, bool v);
void rpc_enc_bin(rpc_enc *e, const char *key, const void *p, size_t n);
void rpc_pack_str(msgpack_packer *pk, const char *s);
/* Appends n bytes already packed (a stored msgpack object) after a key. */
void rpc_enc_raw(rpc_enc *e, const void *p, size_t n);
/* Checks the count; returns TS_OK with the bytes in e->sb.data/e->sb.size,
 * TS_ENOMEM when the buffer could not grow, TS_EPROTO on a wrong count. */
ts_status rpc_enc_finish(rpc_enc *e);
void rpc_enc_fini(rpc_enc *e);
/* Convenience: a complete error message {code, message}. */
void rpc_enc_error(rpc_enc *e, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- transport ------------------------------------------------------------ */
/* Sets NNG_OPT_RECVMAXSZ to RPC_MAX_MSG (+ slack) on a socket. */
int rpc_socket_limits(nng_socket s);
/* Finishes e and sends it (e is fini'd either way). TS_EIO on failure. */
ts_status rpc_send(nng_socket s, rpc_enc *e);
/* rpc_send for a server's reply: when e could not be allocated, the peer
 * still gets an answer, the error {code: "nomem"} (rpc_nomem_reply's bytes,
 * static), so a REQ client never waits out its timeout. */
ts_status rpc_reply(nng_socket s, rpc_enc *e);
const void *rpc_nomem_reply(size_t *n);
/* Receives and decodes one message; *pipe (optional) gets its pipe. On
 * decode failure returns the decode status (m->err) with *pipe still set, so
 * a server can answer the right peer. TS_ETIMEOUT on NNG_ETIMEDOUT, TS_EIO
 * on other nng errors. */
ts_status rpc_recv(nng_socket s, rpc_msg *m, nng_pipe *pipe);
/* One request/reply on a REQ socket: sends e, receives into reply. If the
 * reply is RPC_T_ERROR, returns its status (code) with its message in d
 * (TS_EREMOTE if the code is unknown); reply then holds nothing. */
ts_status rpc_call(nng_socket s, rpc_enc *e, rpc_msg *reply, ts_diag *d);
/* The reply's verdict: a decode failure (decoded != TS_OK, reply->err says
 * why) or an `error` reply becomes the status and message in d, the reply
 * freed; TS_OK leaves the reply to the caller. */
ts_status rpc_reply_check(rpc_msg *reply, ts_status decoded, ts_diag *d);

/* Random session tokens (RPC_TOKEN_LEN hex chars + NUL). */
void rpc_token_new(char out[RPC_TOKEN_LEN + 1]);
bool rpc_token_valid(const char *s);

#endif
