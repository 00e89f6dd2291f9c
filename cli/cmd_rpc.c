/* cmd_rpc.c — `tessel rpc-server ...`: the same server as the standalone
 * build/tessel-rpc-server (rpc/server.c), reachable from the main CLI. */
#include "rpc/server.h"
#include "tracker/tracker_client.h"
#include "cli/cli.h"

int tun_cmd_rpc_server(int argc, char **argv) {
  return rpc_server_main(argc, argv, &trk_server_registrar);
}
