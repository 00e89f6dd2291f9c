/* server.h — rpc_server: the measuring daemon of a board. It listens on
 * tcp://HOST:PORT (REP), authenticates every pipe (auth.h), registers with a
 * tracker under a key and heartbeats from its own thread (so a long
 * measurement never looks like a dead board), accepts uploaded artifacts into
 * a private mkdtemp directory (removed on exit, SIGINT and SIGTERM) and
 * measures each in a forked child with tsrt_measure_forked — the local
 * runner's timing method — so a crashing or hanging kernel costs one
 * measurement, never the server.
 *
 * Only a client that presents a session token the tracker granted for this
 * server (heartbeat_ack.tokens) may upload, measure or close; with
 * --no-tracker any authenticated client may. */
#ifndef TESSEL_RPC_SERVER_H
#define TESSEL_RPC_SERVER_H

#include "rpc/auth.h"

#define RPC_SERVER_PORT_FIRST 9090
#define RPC_SERVER_PORT_LAST 9199
#define RPC_SERVER_MAX_ARTIFACTS 32

/* What the server announces to a tracker: key, address (NULL: the local
 * address the tracker connection uses, with port), packed msgpack info. The
 * strings and the secret outlive the registration; log prefixes the progress
 * lines ("registered ...", "... (retrying)") on stderr. */
typedef struct rpc_server_announce {
  const char *tracker, *key, *address;
  const rpc_secret *secret;
  int port;
  const void *info;
  size_t info_len;
  const char *log;
} rpc_server_announce;

/* The tracker registration, as the server needs it: start registering in the
 * background (register, heartbeat, re-register after a tracker restart);
 * check a session token (TS_OK granted, TS_EPENDING not heard of yet,
 * TS_EDENIED malformed); report busy; deregister and free. rpc/ never
 * includes tracker/: the binary's main passes tracker/tracker_client.h's
 * trk_server_registrar (rpc/server_main.c, cli/cmd_rpc.c). */
typedef struct rpc_server_registrar {
  void *(*start)(const rpc_server_announce *a);
  ts_status (*check_token)(void *reg, const char *token);
  void (*set_busy)(void *reg, bool busy);
  void (*stop)(void *reg);
} rpc_server_registrar;

/* `tessel-rpc-server` / `tessel rpc-server`:
 *   --tracker H:P --key K [--port P] [--host H] [--advertise ADDR]
 *   [--secret-file F] [--no-tracker]
 * Runs until SIGINT/SIGTERM; returns the process exit status (0 on a clean
 * stop, 2 on usage errors, 1 on start-up failure). argv[0] is the command
 * name. reg registers with the tracker (NULL: only --no-tracker works). */
int rpc_server_main(int argc, char **argv, const rpc_server_registrar *reg);
/* Asks a running rpc_server_main (e.g. in a test's thread) to stop, as
 * SIGTERM does. Async-signal-safe. */
void rpc_server_stop(void);

#endif
