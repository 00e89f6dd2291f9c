/* client.h — the client side of rpc_server: connect to a server address,
 * authenticate (auth.h), upload an artifact, measure it, fetch the results.
 * This is what the tuner's RPC runner calls once the tracker has granted it a
 * session on a server (address + token); with a server run --no-tracker the
 * token is empty.
 *
 * A client is used by one thread at a time. Errors return an rpc_status and
 * leave a message in c->err. */
#ifndef TESSEL_RPC_CLIENT_H
#define TESSEL_RPC_CLIENT_H

#include "runtime/model.h"
#include "runtime/runtime.h"
#include "rpc/auth.h"
#include "rpc/protocol.h"

typedef struct rpc_client {
  nng_socket sock;
  rpc_secret secret;
  char addr[RPC_MAX_ADDR];
  char token[RPC_TOKEN_LEN + 1]; /* "" when the server runs without a tracker */
  double timeout_s;              /* reply timeout for non-measure calls */
  char err[512];
} rpc_client;

/* Dials addr ("tcp://host:port"), waits up to timeout_s for the connection,
 * and authenticates with secret. token may be NULL/"". On failure *out is
 * NULL and err says why (RPC_EAUTH for a wrong key). */
rpc_status rpc_client_open(rpc_client **out, const char *addr, const rpc_secret *secret,
                           const char *token, double timeout_s, char *err, size_t errn);
/* Sends close (the server drops this session's artifacts) and frees c. */
void rpc_client_close(rpc_client *c);

/* The server's device info as a decoded message (fields under "info"; the
 * caller rpc_msg_fini's it). */
rpc_status rpc_client_info(rpc_client *c, rpc_msg *reply);
/* Uploads bytes as an artifact called name (a file name, e.g. "k.so");
 * the server's artifact id goes into id. */
rpc_status rpc_client_upload_bytes(rpc_client *c, const char *name, const void *data, size_t n,
                                   char *id, size_t idn);
rpc_status rpc_client_upload(rpc_client *c, const char *path, char *id, size_t idn);
/* Measures artifact id with opts; res as tsrt_measure_forked fills it
 * (status, error, secs, checksums, outputs if opts->want_outputs; free with
 * tsrt_result_fini). The return value is about the RPC itself: RPC_OK when a
 * result came back, whatever res->status says. */
rpc_status rpc_client_measure(rpc_client *c, const char *id, const tsrt_measure_opts *opts,
                              tsrt_measure_result *res);

/* Runs model artifact id (uploaded) on the board: inputs by name, one
 * warm-up run then `repeat` timed runs, in a forked child there. res as
 * tsrt_model_run_forked fills it (free with tsrt_model_run_result_fini). The
 * return value is about the RPC: RPC_OK when a result came back. */
rpc_status rpc_client_run_model(rpc_client *c, const char *id, const tsrt_model_io *inputs, int ninputs,
                                int repeat, double timeout_s, int num_threads, tsrt_model_run_result *res);

#endif
