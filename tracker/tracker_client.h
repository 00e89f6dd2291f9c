/* tracker_client.h — talking to the tracker: for rpc_servers (register, a
 * heartbeat thread that learns the session tokens granted on this server,
 * deregister) and for tuners (request a server by key and priority and wait
 * with a timeout, release, query). Every connection authenticates first
 * (rpc/auth.h). docs/TRACKER.md lists the messages.
 *
 * A connection (trk_conn) is one REQ socket: calls on it are serialised by a
 * mutex. A grant lives as long as its connection: closing the connection
 * hands the server back (the tracker sees the pipe close). */
#ifndef TESSEL_TRACKER_CLIENT_H
#define TESSEL_TRACKER_CLIENT_H

#include "tracker/tracker.h"

typedef struct trk_conn trk_conn;

/* Dials `tracker` ("HOST:PORT", or a full nng URL such as ipc:///tmp/t) and
 * authenticates as role ("client", "server", "query"). timeout_ms bounds
 * each call's reply (0: 10 s). Errors: RPC_EIO (cannot connect), RPC_EAUTH
 * (wrong key), RPC_ETIMEDOUT; err says which. */
rpc_status trk_conn_open(const char *tracker, const rpc_secret *secret, const char *role, int timeout_ms,
                         trk_conn **out, char *err, size_t errn);
void trk_conn_close(trk_conn *c);

/* ---- tuners ---------------------------------------------------------------- */

typedef struct trk_grant {
  uint64_t ticket;
  char key[RPC_MAX_KEY + 1];
  char address[RPC_MAX_ADDR + 1];   /* the rpc_server to talk to */
  char token[RPC_TOKEN_LEN + 1];    /* present it to the rpc_server */
  int64_t session_ms;               /* lease left when granted */
} trk_grant;

/* Asks for a server with `key`: higher priority is served first, FIFO within
 * a priority. Waits up to wait_ms (< 0: forever); session_ms is the lease
 * (0: TRK_SESSION_DEFAULT_MS). RPC_ETIMEDOUT when no server came free in
 * time (the ticket is withdrawn). */
rpc_status trk_request(trk_conn *c, const char *key, int priority, int64_t wait_ms, int64_t session_ms,
                       trk_grant *out, char *err, size_t errn);
/* Hands the server back. RPC_EDENIED when the grant had been revoked
 * (server evicted, lease over): err says why. */
rpc_status trk_release(trk_conn *c, const trk_grant *g, char *err, size_t errn);
/* Without waiting: RPC_OK while the grant holds, RPC_EDENIED once revoked. */
rpc_status trk_check(trk_conn *c, const trk_grant *g, char *err, size_t errn);

/* ---- query ------------------------------------------------------------------ */

/* The raw QUERY_REPLY (see tracker.c h_query); *reply is the caller's
 * (rpc_msg_fini). */
rpc_status trk_query(trk_conn *c, rpc_msg *reply, char *err, size_t errn);

/* ---- rpc_servers ------------------------------------------------------------- */

typedef struct trk_server_reg trk_server_reg;

/* Registers `key` at `address` with `info` (packed msgpack of any object, or
 * NULL) and, when heartbeat is true, starts a thread that heartbeats every
 * heartbeat_ms the tracker asked for (re-registering if it was evicted or the
 * tracker restarted). Errors as trk_conn_open, plus the tracker's refusal. */
rpc_status trk_server_register(const char *tracker, const rpc_secret *secret, const char *key,
                               const char *address, const void *info, size_t info_len, bool heartbeat,
                               trk_server_reg **out, char *err, size_t errn);
/* One heartbeat now (what the thread does); refreshes the session token. */
rpc_status trk_server_heartbeat(trk_server_reg *r, char *err, size_t errn);
/* The session token currently granted on this server ("" when free). */
void trk_server_session(trk_server_reg *r, char token[RPC_TOKEN_LEN + 1]);
/* True when `token` is the current grant; on a mismatch heartbeats once (a
 * client may arrive before the next heartbeat) and checks again. */
bool trk_server_token_ok(trk_server_reg *r, const char *token);
uint64_t trk_server_id(trk_server_reg *r);
/* Deregisters, stops the thread, closes, frees. NULL is a no-op. */
void trk_server_deregister(trk_server_reg *r);

/* "HOST:PORT" -> "tcp://HOST:PORT"; a string with "://" is kept. */
void trk_url(const char *hostport, char *url, size_t n);

#endif
