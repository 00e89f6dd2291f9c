/* client.h — the client side of rpc_server: connect to a server address,
 * authenticate (auth.h), upload an artifact, measure it, fetch the results.
 * This is what the tuner's RPC runner calls once the tracker has granted it a
 * session on a server (address + token); with a server run --no-tracker the
 * token is empty.
 *
 * A client is used by one thread at a time. Calls return a ts_status and
 * fill the ts_diag they take (may be NULL). */
#ifndef TESSEL_RPC_CLIENT_H
#define TESSEL_RPC_CLIENT_H

#include "runtime/model.h"
#include "runtime/runtime.h"
#include "rpc/auth.h"
#include "rpc/protocol.h"

struct rpc_pipeset;

typedef struct rpc_client {
  nng_socket sock;
  struct rpc_pipeset *pipes;     /* its pipes, dropped before the socket closes (rpc/pipe_drop.h) */
  rpc_secret secret;
  rpc_chan chan;                 /* the secure channel of the current pipe */
  char addr[RPC_MAX_ADDR];
  char token[RPC_TOKEN_LEN + 1]; /* "" when the server runs without a tracker */
  double timeout_s;              /* reply timeout for non-measure calls */
} rpc_client;

/* Dials addr ("tcp://host:port"), waits up to timeout_s for the connection,
 * and authenticates with secret. token may be NULL/"". On failure *out is
 * NULL and d says why (TS_EAUTH for a wrong key). */
ts_status rpc_client_open(rpc_client **out, const char *addr, const rpc_secret *secret,
                           const char *token, double timeout_s, ts_diag *d);
/* Sends close (the server drops this session's artifacts) and frees c. */
void rpc_client_close(rpc_client *c);

/* The server's device info as a decoded message (fields under "info"; the
 * caller rpc_msg_fini's it). */
ts_status rpc_client_info(rpc_client *c, rpc_msg *reply, ts_diag *d);
/* Uploads bytes as an artifact called name (a file name, e.g. "k.so");
 * the server's artifact id goes into id. */
ts_status rpc_client_upload_bytes(rpc_client *c, const char *name, const void *data, size_t n,
                                   char *id, size_t idn, ts_diag *d);
ts_status rpc_client_upload(rpc_client *c, const char *path, char *id, size_t idn, ts_diag *d);
/* Measures artifact id with opts; res as tsrt_measure_forked fills it
 * (status, error, secs, checksums, outputs if opts->want_outputs; free with
 * tsrt_result_fini). The return value is about the RPC itself: TS_OK when a
 * result came back, whatever res->status says. */
ts_status rpc_client_measure(rpc_client *c, const char *id, const tsrt_measure_opts *opts,
                              tsrt_measure_result *res, ts_diag *d);

/* Runs model artifact id (uploaded) on the board: inputs by name, one
 * warm-up run then `repeat` timed runs, in a forked child there. res as
 * tsrt_model_run_forked fills it (free with tsrt_model_run_result_fini). The
 * return value is about the RPC: TS_OK when a result came back. */
ts_status rpc_client_run_model(rpc_client *c, const char *id, const tsrt_model_io *inputs, int ninputs,
                                int repeat, double timeout_s, int num_threads, tsrt_model_run_result *res, ts_diag *d);

#endif
