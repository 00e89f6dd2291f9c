/* server_main.c — main() of the standalone board binary tessel-rpc-server
 * (nng + msgpack-c + libsodium + runtime only). */
#include "rpc/server.h"

int main(int argc, char **argv) {
  return rpc_server_main(argc, argv);
}
