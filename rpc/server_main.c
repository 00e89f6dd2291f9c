/* server_main.c — placeholder main of tessel-rpc-server until rpc/server.c lands. */
#include <stdio.h>
int main(void) {
  fprintf(stderr, "tessel-rpc-server: not built yet\n");
  return 2;
}
