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

#define RPC_SERVER_PORT_FIRST 9090
#define RPC_SERVER_PORT_LAST 9199
#define RPC_SERVER_MAX_ARTIFACTS 32

/* `tessel-rpc-server` / `tessel rpc-server`:
 *   --tracker H:P --key K [--port P] [--host H] [--advertise ADDR]
 *   [--secret-file F] [--no-tracker]
 * Runs until SIGINT/SIGTERM; returns the process exit status (0 on a clean
 * stop, 2 on usage errors, 1 on start-up failure). argv[0] is the command
 * name. */
int rpc_server_main(int argc, char **argv);
/* Asks a running rpc_server_main (e.g. in a test's thread) to stop, as
 * SIGTERM does. Async-signal-safe. */
void rpc_server_stop(void);

#endif
