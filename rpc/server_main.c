/* server_main.c — main() of the standalone board binary tessel-rpc-server
 * (nng + msgpack-c + libsodium + runtime only): the server of rpc/server.c
 * with the tracker client's registration (the one place, with cli/cmd_rpc.c,
 * where the server meets tracker/). */
#include "rpc/server.h"
#include "tracker/tracker_client.h"

int main(int argc, char **argv) {
  return rpc_server_main(argc, argv, &trk_server_registrar);
}
