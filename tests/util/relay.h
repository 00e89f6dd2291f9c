/* relay.h — an on-path relay for the attack tests (tests/tracker/test_attacks.c
 * against the tracker, tests/rpc/test_rpc_attacks.c against rpc_server):
 * plain TCP between one client and a server, understanding only nng's SP
 * framing (an 8-byte header each way, then 8-byte big-endian lengths). It
 * holds no secret. Client-to-server message 0 is hello, 1 auth, 2 and on
 * sealed requests; server-to-client 0 is challenge, 1 ok, 2 and on replies.
 * Each mode does one thing to that traffic: pass it, put a plaintext body
 * (sub) in place of request 2, replace request 2's ciphertext with random
 * bytes, flip a bit of its tag, replay request 2 as request 3, send
 * requests 2 and 3 in the opposite order, or flip a bit of reply 2. */
#ifndef TESSEL_TESTS_UTIL_RELAY_H
#define TESSEL_TESTS_UTIL_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { R_PASS, R_UNSEALED, R_FORGE, R_ALTER, R_REPLAY, R_REORDER, R_ALTER_REPLY };

typedef struct relay {
  int mode, lfd, port, target;
  const uint8_t *sub;                   /* R_UNSEALED: the body put in place of request 2 */
  size_t subn;
  pthread_t th;
  volatile bool up_closed, down_closed; /* the server / the client closed its end */
  volatile int c2s, s2c;                /* messages seen */
} relay;

/* Listens on a loopback port (r->port) for one client and relays it to
 * 127.0.0.1:target in a thread (join r->th); sub must outlive it. */
bool relay_start(relay *r, int mode, int target, const void *sub, size_t subn);
void relay_url(const relay *r, char *out, size_t n);
/* Raw socket helpers: write all n bytes (false on error); write one SP
 * message (its 8-byte length, then the payload). */
bool relay_write_all(int fd, const void *p, size_t n);
void relay_send_msg(int fd, const uint8_t *payload, size_t n);
/* A TCP connection to 127.0.0.1:port that sends the SP header of a REQ
 * socket (and, with hello, a hello) and then nothing; -1 if it cannot
 * connect. */
int relay_idle_conn(int port, bool hello);
/* The same from source address 127.0.0.src (any of 127/8 is this host's). */
int relay_idle_conn_from(int port, bool hello, int src);

#endif
