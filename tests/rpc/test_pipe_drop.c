/* test_pipe_drop.c — rpc/pipe_drop.h: pipes dropped while messages arrive on
 * them are all released by nng (its reaper does not wedge), the peer sees
 * its connection reset, non-TCP pipes fall back to nng_pipe_close, the
 * bounded close and the client pipe set.
 *
 * The first test is the sequence that wedged nng 1.5.2's reaper with
 * nng_pipe_close (issue 21, tracker_attacks' relay_reorder_refused): a raw
 * REP socket drops a connection on its first message while the peer sends
 * more, each message's 8-byte length in its own write so that the close
 * can fall between a length and its body. With nng_pipe_close in place of
 * rpc_pipes_drop this test failed in three runs of three, at rounds 36, 6
 * and 12 ("nng did not release the dropped pipe"); it asserts that every one
 * of 400 rounds is released. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "rpc/pipe_drop.h"
#include "util/relay.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int pick_port(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 20000 + (int)(((unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec) % 12000u);
}

/* A raw REP server that drops a pipe on a message starting with 'X'. */
typedef struct srv {
  nng_socket s;
  pthread_t th;
  atomic_int added, removed, dropped, disconnected;
  char url[128];
  int port;
} srv;

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  (void)p;
  if (ev == NNG_PIPE_EV_ADD_POST) atomic_fetch_add(&((srv *)arg)->added, 1);
  if (ev == NNG_PIPE_EV_REM_POST) atomic_fetch_add(&((srv *)arg)->removed, 1);
}

static void *srv_loop(void *arg) {
  srv *v = arg;
  unsigned seed = 7;
  for (;;) {
    nng_msg *m;
    if (nng_recvmsg(v->s, &m, 0) != 0) return NULL;
    if (nng_msg_len(m) > 0 && ((const char *)nng_msg_body(m))[0] == 'X') {
      /* a varying delay, so that the drop falls at every point of the next message's arrival */
      for (volatile int i = 0, spin = (int)(rand_r(&seed) % 20000); i < spin; i++) {
      }
      uint32_t id = (uint32_t)nng_pipe_id(nng_msg_get_pipe(m));
      atomic_fetch_add(&v->dropped, 1); /* before: nng may report the close before the drop returns */
      atomic_fetch_add(&v->disconnected, (int)rpc_pipes_drop(&id, 1));
    }
    nng_msg_free(m);
  }
}

static void srv_start(srv *v, const char *url) {
  memset(v, 0, sizeof *v);
  ck_assert_int_eq(nng_rep0_open_raw(&v->s), 0);
  ck_assert_int_eq(nng_pipe_notify(v->s, NNG_PIPE_EV_ADD_POST, on_pipe, v), 0);
  ck_assert_int_eq(nng_pipe_notify(v->s, NNG_PIPE_EV_REM_POST, on_pipe, v), 0);
  if (url) {
    snprintf(v->url, sizeof v->url, "%s", url);
    ck_assert_int_eq(nng_listen(v->s, v->url, NULL, 0), 0);
  } else {
    int rv = NNG_EADDRINUSE;
    for (int k = 0; k < 20 && rv; k++) {
      v->port = pick_port() + k;
      snprintf(v->url, sizeof v->url, "tcp://127.0.0.1:%d", v->port);
      rv = nng_listen(v->s, v->url, NULL, 0);
    }
    ck_assert_int_eq(rv, 0);
  }
  ck_assert_int_eq(pthread_create(&v->th, NULL, srv_loop, v), 0);
}

static void srv_stop(srv *v) {
  ck_assert_msg(rpc_socket_close(v->s, (nng_listener)NNG_LISTENER_INITIALIZER, 5000, "test"),
                "the server socket did not close within 5 s");
  pthread_join(v->th, NULL);
}

static bool wait_count(atomic_int *n, int want, double secs) {
  for (double t0 = now_s(); now_s() - t0 < secs; usleep(1000))
    if (atomic_load(n) >= want) return true;
  return atomic_load(n) >= want;
}

static bool wait_removed(srv *v, int want, double secs) { return wait_count(&v->removed, want, secs); }

/* Dials v from a REQ socket watched by a pipe set and waits until both ends
 * hold the pipe. The server's end must be added before the client drops
 * it: a connection reset while the server still negotiates never becomes
 * a pipe there, so the server would never see it go (the client then
 * redials, and a close that comes first leaves the server nothing to see;
 * under load this failed 1 run in 6). */
static rpc_pipeset *dial_watched(srv *v, nng_socket *c) {
  ts_diag d = {0};
  ck_assert_int_eq(nng_req0_open(c), 0);
  rpc_pipeset *ps = rpc_pipeset_watch(*c, &d);
  ck_assert_msg(ps != NULL, "%s", d.msg);
  ck_assert_int_eq(nng_dial(*c, v->url, NULL, 0), 0);
  for (double t0 = now_s(); ps->n == 0 && now_s() - t0 < 5;) usleep(1000);
  ck_assert_uint_eq(ps->n, 1);
  ck_assert_msg(wait_count(&v->added, 1, 5), "the server did not add the client's pipe within 5 s");
  return ps;
}

/* One SP message (REQ request id, then body) with its length in a write of its own. */
static void send_split(int fd, const char *body) {
  size_t n = strlen(body);
  uint8_t m[300];
  m[0] = 0x80, m[1] = m[2] = 0, m[3] = 1;
  memcpy(m + 4, body, n);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)(4 + n) >> (56 - 8 * i));
  relay_write_all(fd, len, 8);
  relay_write_all(fd, m, 4 + n);
}

START_TEST(drop_under_arriving_messages) {
  signal(SIGPIPE, SIG_IGN);
  srv v;
  srv_start(&v, NULL);
  const int rounds = 400;
  for (int r = 0; r < rounds; r++) {
    int fd = relay_idle_conn(v.port, false); /* connected, SP header sent */
    ck_assert_int_ge(fd, 0);
    uint8_t hdr[8];
    ck_assert_int_eq(read(fd, hdr, 8), 8); /* the pipe exists */
    int before = atomic_load(&v.removed);
    send_split(fd, "X: drop this connection");
    for (int k = 0; k < 20; k++) send_split(fd, "a message that is still arriving when the connection is dropped");
    ck_assert_msg(wait_removed(&v, before + 1, 5), "round %d: nng did not release the dropped pipe within 5 s", r);
    close(fd);
  }
  srv_stop(&v); /* joins the server's thread: its counts are final */
  ck_assert_int_eq(atomic_load(&v.dropped), rounds);
  ck_assert_int_eq(atomic_load(&v.disconnected), rounds); /* all by disconnect, none by nng_pipe_close */
}
END_TEST

START_TEST(peer_sees_reset) {
  signal(SIGPIPE, SIG_IGN);
  srv v;
  srv_start(&v, NULL);
  int fd = relay_idle_conn(v.port, false);
  ck_assert_int_ge(fd, 0);
  uint8_t buf[64];
  ck_assert_int_eq(read(fd, buf, 8), 8);
  send_split(fd, "X");
  ck_assert(wait_removed(&v, 1, 5));
  ssize_t n = read(fd, buf, sizeof buf);
  ck_assert_msg(n == 0 || (n < 0 && errno == ECONNRESET), "read after the drop: %zd (%s)", n, strerror(errno));
  close(fd);
  srv_stop(&v);
  ck_assert_int_eq(atomic_load(&v.disconnected), 1);
}
END_TEST

START_TEST(ipc_falls_back_to_close) {
  char url[128];
  snprintf(url, sizeof url, "ipc:///tmp/tessel-pipe-drop-%d", (int)getpid());
  srv v;
  srv_start(&v, url);
  nng_socket c;
  ck_assert_int_eq(nng_req0_open(&c), 0);
  ck_assert_int_eq(nng_dial(c, url, NULL, 0), 0);
  ck_assert_int_eq(nng_send(c, "X", 1, 0), 0);
  ck_assert_msg(wait_removed(&v, 1, 5), "the ipc pipe was not closed");
  ck_assert(rpc_socket_close(c, (nng_listener)NNG_LISTENER_INITIALIZER, 5000, "test"));
  srv_stop(&v);
  ck_assert_int_ge(atomic_load(&v.dropped), 1); /* REQ resends on its redialed pipe: maybe more */
  ck_assert_int_eq(atomic_load(&v.disconnected), 0); /* not TCP: nng_pipe_close */
}
END_TEST

START_TEST(gone_pipe_is_harmless) {
  uint32_t ids[3] = {12345, 0, 0xfffffff0u};
  ck_assert_uint_eq(rpc_pipes_drop(ids, 3), 0);
  rpc_pipe_drop((nng_pipe)NNG_PIPE_INITIALIZER);
}
END_TEST

START_TEST(pipeset_drops_client_pipes) {
  srv v;
  srv_start(&v, NULL);
  nng_socket c;
  rpc_pipeset *ps = dial_watched(&v, &c);
  double t0 = now_s();
  ck_assert(rpc_pipeset_close(ps, c, 2000, "test"));
  ck_assert_msg(now_s() - t0 < 3, "close took %.1f s", now_s() - t0);
  ck_assert_msg(wait_removed(&v, 1, 5), "the server did not see the client's connection go");
  srv_stop(&v);
}
END_TEST

/* A pipe whose REM_POST ran before its ADD_POST (a peer that closes the
 * pipe as it is added: nng calls the two from different threads) is left in
 * the set; the close must not wait its whole bound for it. The stale id is
 * put in the set by hand. */
START_TEST(pipeset_close_skips_released_pipe) {
  srv v;
  srv_start(&v, NULL);
  nng_socket c;
  rpc_pipeset *ps = dial_watched(&v, &c);
  pthread_mutex_lock(&ps->mu);
  ps->ids[ps->n++] = 0x7ffffff0u; /* released already: nng holds no such pipe */
  pthread_mutex_unlock(&ps->mu);
  double t0 = now_s();
  ck_assert(rpc_pipeset_close(ps, c, 4000, "test"));
  ck_assert_msg(now_s() - t0 < 2, "close waited %.1f s for a pipe nng had released", now_s() - t0);
  srv_stop(&v);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pipe_drop");
  TCase *tc = tcase_create("drop");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, drop_under_arriving_messages);
  tcase_add_test(tc, peer_sees_reset);
  tcase_add_test(tc, ipc_falls_back_to_close);
  tcase_add_test(tc, gone_pipe_is_harmless);
  tcase_add_test(tc, pipeset_drops_client_pipes);
  tcase_add_test(tc, pipeset_close_skips_released_pipe);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
