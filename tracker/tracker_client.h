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

#include "rpc/server.h"
#include "tracker/tracker.h"

typedef struct trk_conn trk_conn;

/* Dials `tracker` ("HOST:PORT", or a full nng URL such as ipc:///tmp/t) and
 * authenticates as role ("client", "server", "query"). timeout_ms bounds
 * each call's reply (0: 10 s). Errors: TS_EIO (cannot connect), TS_EAUTH
 * (wrong key), TS_ETIMEOUT; d says which. */
ts_status trk_conn_open(const char *tracker, const rpc_secret *secret, const char *role, int timeout_ms,
                         trk_conn **out, ts_diag *d);
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
 * (0: TRK_SESSION_DEFAULT_MS). TS_ETIMEOUT when no server came free in
 * time (the ticket is withdrawn). */
ts_status trk_request(trk_conn *c, const char *key, int priority, int64_t wait_ms, int64_t session_ms,
                       trk_grant *out, ts_diag *d);
/* Hands the server back. TS_EDENIED when the grant had been revoked
 * (server evicted, lease over): d says why. */
ts_status trk_release(trk_conn *c, const trk_grant *g, ts_diag *d);
/* Without waiting: TS_OK while the grant holds, TS_EDENIED once revoked. */
ts_status trk_check(trk_conn *c, const trk_grant *g, ts_diag *d);

/* ---- query ------------------------------------------------------------------ */

/* The raw QUERY_REPLY (see tracker.c h_query); *reply is the caller's
 * (rpc_msg_fini). */
ts_status trk_query(trk_conn *c, rpc_msg *reply, ts_diag *d);

/* ---- rpc_servers ------------------------------------------------------------- */

typedef struct trk_server_reg trk_server_reg;

typedef struct trk_server_opts {
  const char *tracker;      /* "HOST:PORT" or a URL */
  const rpc_secret *secret; /* copied */
  const char *key;
  const char *address;      /* advertised; NULL/"": tcp://<local IP toward the tracker>:port */
  int port;
  const void *info;         /* packed msgpack of any object, or NULL */
  size_t info_len;
  bool heartbeat;           /* start the heartbeat thread */
  bool connect_now;         /* connect and register before returning (errors
                               then fail the call); else the thread does it */
  const char *log;          /* progress lines on stderr with this prefix; NULL: quiet */
} trk_server_opts;

/* Registers o->key at o->address with o->info. The heartbeat thread
 * heartbeats every heartbeat_ms the tracker asked for (clamped to 50..2000),
 * keeps the session tokens the tracker lists as granted on this server,
 * re-registers when it was evicted, and on any failure (tracker down or
 * restarted) drops the connection and tokens and reconnects (every 300 ms,
 * 2 s after a wrong key). Errors as trk_conn_open, plus the tracker's
 * refusal (connect_now only). */
ts_status trk_server_start(const trk_server_opts *o, trk_server_reg **out, ts_diag *d);
/* trk_server_start with connect_now. */
ts_status trk_server_register(const char *tracker, const rpc_secret *secret, const char *key,
                              const char *address, const void *info, size_t info_len, bool heartbeat,
                              trk_server_reg **out, ts_diag *d);
/* One heartbeat now (what the thread does); refreshes the session tokens. */
ts_status trk_server_heartbeat(trk_server_reg *r, ts_diag *d);
/* The first session token granted on this server ("" when free). */
void trk_server_session(trk_server_reg *r, char token[RPC_TOKEN_LEN + 1]);
/* TS_OK when `token` is granted on this server as of the last heartbeat,
 * TS_EPENDING when not (maybe not heard yet), TS_EDENIED when malformed. */
ts_status trk_server_token_check(trk_server_reg *r, const char *token);
/* True when `token` is granted; on a miss heartbeats once (a client may
 * arrive before the next heartbeat) and checks again. */
bool trk_server_token_ok(trk_server_reg *r, const char *token);
/* Reported in heartbeats (as is holding a grant). */
void trk_server_set_busy(trk_server_reg *r, bool busy);
uint64_t trk_server_id(trk_server_reg *r);
/* Deregisters, stops the thread, closes, frees. NULL is a no-op. */
void trk_server_deregister(trk_server_reg *r);

/* rpc_server's registration (rpc/server.h) over the functions above, with
 * the heartbeat thread started at once and the first registration done by
 * it. */
extern const rpc_server_registrar trk_server_registrar;

/* "HOST:PORT" -> "tcp://HOST:PORT"; a string with "://" is kept. */
void trk_url(const char *hostport, char *url, size_t n);

#endif
