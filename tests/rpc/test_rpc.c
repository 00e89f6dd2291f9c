/* test_rpc.c — rpc_server end to end on loopback: the real binary started
 * --no-tracker, a client that uploads the hand-written kernel_add artifact
 * and gets correct checksums and outputs (identical to a local forked
 * measurement), a client with the wrong key refused before it can upload, an
 * unauthenticated upload refused, and a segfaulting and a hanging kernel that
 * each end in an error while the next request is served.
 * argv: server exe, ok.so, crash.so, hang.so. */
#include <check.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "runtime/runtime.h"
#include "rpc/client.h"
#include "util.h"

static const char *server_exe, *ok_so, *crash_so, *hang_so;
static char secret_path[256], addr[64];
static pid_t server_pid;
static rpc_secret secret;

static void start(void) {
  write_secret(secret_path, sizeof secret_path, "a shared secret of more than sixteen bytes");
  ts_diag err = {0};
  ck_assert_int_eq(rpc_secret_load(&secret, secret_path, &err), TS_OK);
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = random_port();
    server_pid = spawn_server(server_exe, port, secret_path);
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", port);
    usleep(200000);
    int st;
    if (waitpid(server_pid, &st, WNOHANG) == 0) return; /* running */
  }
  ck_abort_msg("could not start %s", server_exe);
}

static void stop(void) {
  int st = stop_server(server_pid);
  unlink(secret_path);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit status %d", st);
}

static rpc_client *open_client(void) {
  rpc_client *c = NULL;
  ts_diag err = {0};
  ts_status st = rpc_client_open(&c, addr, &secret, NULL, 10, &err);
  ck_assert_msg(st == TS_OK, "open %s: %s", addr, err.msg);
  return c;
}

static void expect_ok_measure(rpc_client *c) {
  ts_diag err = {0};
  char id[32];
  ck_assert_msg(rpc_client_upload(c, ok_so, id, sizeof id, &err) == TS_OK, "%s", err.msg);
  tsrt_measure_opts o = {.repeat = 3, .number = 2, .timeout_s = 10, .seed = 7,
                         .want_outputs = true, .num_threads = 2};
  tsrt_measure_result r;
  ck_assert_msg(rpc_client_measure(c, id, &o, &r, &err) == TS_OK, "%s", err.msg);
  ck_assert_msg(r.status == TS_OK, "status %s: %s", tsrt_status_name(r.status), r.error);
  ck_assert_int_eq(r.repeat, 3);
  ck_assert_int_eq(r.number, 2);
  for (int i = 0; i < 3; i++) ck_assert(r.secs[i] > 0 && r.secs[i] < 1);
  ck_assert_int_eq(r.noutputs, 1);
  /* C = A + B with the seeded inputs */
  float a[1000], b[1000], want[1000];
  tsrt_fill_random(TSRT_F32, a, 1000, 7);
  tsrt_fill_random(TSRT_F32, b, 1000, 8);
  for (int i = 0; i < 1000; i++) want[i] = a[i] + b[i];
  ck_assert_uint_eq(r.outputs_bytes, sizeof want);
  ck_assert(memcmp(r.outputs, want, sizeof want) == 0);
  ck_assert_uint_eq(r.checksums[0], tsrt_checksum(want, sizeof want));
  /* the same as the local runner */
  tsrt_measure_result l;
  tsrt_measure_forked(ok_so, &o, &l);
  ck_assert_int_eq(l.status, TS_OK);
  ck_assert_uint_eq(l.checksums[0], r.checksums[0]);
  tsrt_result_fini(&l);
  tsrt_result_fini(&r);
}

START_TEST(test_upload_measure) {
  rpc_client *c = open_client();
  expect_ok_measure(c);
  rpc_msg info;
  ts_diag err = {0};
  ck_assert_int_eq(rpc_client_info(c, &info, &err), TS_OK);
  const msgpack_object *im;
  ck_assert_int_eq(rpc_get_map(&info, NULL, "info", &im), TS_OK);
  char triple[64];
  int64_t cores = 0;
  ck_assert_int_eq(rpc_get_str(&info, im, "triple", triple, sizeof triple), TS_OK);
  ck_assert_int_eq(rpc_get_i64(&info, im, "cores", 1, 1 << 20, &cores), TS_OK);
  ck_assert(strstr(triple, "-linux-gnu") != NULL);
  rpc_msg_fini(&info);
  rpc_client_close(c);
}
END_TEST

START_TEST(test_wrong_key_refused) {
  rpc_secret bad;
  const char *other = "another secret, also long enough";
  ck_assert_int_eq(rpc_secret_from_bytes(&bad, other, strlen(other)), TS_OK);
  rpc_client *c = NULL;
  ts_diag err = {0};
  ts_status st = rpc_client_open(&c, addr, &bad, NULL, 5, &err);
  ck_assert_int_eq(st, TS_EAUTH);
  ck_assert_ptr_null(c);
  /* a raw peer that skips the handshake and uploads straight away */
  nng_socket s;
  ck_assert_int_eq(nng_req0_open(&s), 0);
  nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
  ck_assert_int_eq(nng_dial(s, addr, NULL, 0), 0);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_UPLOAD, 2);
  rpc_enc_str(&e, "name", "x.so");
  rpc_enc_bin(&e, "data", "\x7f" "ELF", 4);
  rpc_msg r;
  st = rpc_call(s, &e, &r, &err);
  ck_assert_int_eq(st, TS_EAUTH);
  /* a wrong mac after a genuine hello is refused too, and stays refused */
  uint8_t nonce[RPC_NONCE_BYTES] = {1};
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&e, "role", "client");
  rpc_enc_bin(&e, "nonce", nonce, sizeof nonce);
  ck_assert_int_eq(rpc_call(s, &e, &r, &err), TS_OK);
  ck_assert_int_eq(r.type, RPC_T_CHALLENGE);
  rpc_msg_fini(&r);
  uint8_t mac[32] = {0};
  rpc_enc_begin(&e, RPC_T_AUTH, 1);
  rpc_enc_bin(&e, "mac", mac, sizeof mac);
  ck_assert_int_eq(rpc_call(s, &e, &r, &err), TS_EAUTH);
  rpc_enc_begin(&e, RPC_T_INFO, 0);
  ck_assert_int_eq(rpc_call(s, &e, &r, &err), TS_EAUTH);
  /* a wrong protocol version in hello */
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", 99);
  rpc_enc_str(&e, "role", "client");
  rpc_enc_bin(&e, "nonce", nonce, sizeof nonce);
  ck_assert_int_eq(rpc_call(s, &e, &r, &err), TS_EVERSION);
  nng_close(s);
}
END_TEST

START_TEST(test_crash_and_hang) {
  rpc_client *c = open_client();
  ts_diag err = {0};
  char id[32];
  tsrt_measure_opts o = {.repeat = 2, .number = 1, .timeout_s = 1.5, .seed = 1};
  tsrt_measure_result r;
  ck_assert_int_eq(rpc_client_upload(c, crash_so, id, sizeof id, &err), TS_OK);
  ck_assert_int_eq(rpc_client_measure(c, id, &o, &r, &err), TS_OK);
  ck_assert_msg(r.status == TS_ECRASH, "crash kernel: %s", tsrt_status_name(r.status));
  ck_assert(r.error[0]);
  tsrt_result_fini(&r);
  expect_ok_measure(c);
  ck_assert_int_eq(rpc_client_upload(c, hang_so, id, sizeof id, &err), TS_OK);
  double t0 = tsrt_now();
  ck_assert_int_eq(rpc_client_measure(c, id, &o, &r, &err), TS_OK);
  ck_assert_msg(r.status == TS_ETIMEOUT, "hang kernel: %s", tsrt_status_name(r.status));
  ck_assert(tsrt_now() - t0 < 10);
  tsrt_result_fini(&r);
  expect_ok_measure(c);
  /* unknown artifact, bad options */
  ck_assert_int_eq(rpc_client_measure(c, "a999999", &o, &r, &err), TS_ENOTFOUND);
  tsrt_measure_opts bad = {.repeat = 1000};
  ck_assert_int_eq(rpc_client_upload(c, ok_so, id, sizeof id, &err), TS_OK);
  ck_assert_int_eq(rpc_client_measure(c, id, &bad, &r, &err), TS_EPROTO);
  rpc_client_close(c);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s SERVER OK.so CRASH.so HANG.so\n", argv[0]);
    return 2;
  }
  server_exe = argv[1], ok_so = argv[2], crash_so = argv[3], hang_so = argv[4];
  Suite *s = suite_create("rpc");
  TCase *tc = tcase_create("server");
  tcase_add_unchecked_fixture(tc, start, stop);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_upload_measure);
  tcase_add_test(tc, test_wrong_key_refused);
  tcase_add_test(tc, test_crash_and_hang);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
