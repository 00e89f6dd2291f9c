/* test_rpc_attacks.c — attacks of issue 21 against rpc_server itself (the
 * real binary, --no-tracker, on loopback):
 *  - eight unauthenticated connections that each announce a message of just
 *    under 64 MiB and send it: nng's receive limit (RPC_SERVER_RECV_MAX)
 *    drops each at its length, the server's peak resident size stays near
 *    its idle size (it grew by ~480 MB when the limit was 64 MiB);
 *  - a request over RPC_PART_MAX goes in parts: an artifact padded past
 *    1 MiB uploads and measures right; parts out of order are refused;
 *  - an on-path relay without the secret passes a real client's handshake
 *    and then puts a plaintext upload, or a plaintext measure of an
 *    artifact uploaded honestly, or a forged frame in place of the client's
 *    first sealed request: refused, the connection closed, nothing stored;
 *  - a reconnect flood of unauthenticated connections (half of them send a
 *    hello and never read the challenge), then SIGTERM during the flood:
 *    the server exits within a few seconds with status 0, whether or not
 *    nng 1.5.2's close waits for good (docs/RPC.md).
 * argv[1]: the server binary; argv[2]: the ok kernel artifact. Time bounds
 * are generous (a loaded machine); the measured figures are bench/'s. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "rpc/auth.h"
#include "rpc/client.h"
#include "runtime/runtime.h"
#include "util.h"
#include "util/relay.h"

static const char *server_exe, *ok_so;
static char secret_path[256], addr[64], tmpdir[256], errlog[300];
static int port;
static pid_t server_pid;
static rpc_secret secret;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The server as a child with its own TMPDIR (its artifact directory goes
 * there) and its stderr in errlog. */
static void start(void) {
  signal(SIGPIPE, SIG_IGN);
  write_secret(secret_path, sizeof secret_path, "rpc attack tests: a shared secret");
  ts_diag err = {0};
  ck_assert_int_eq(rpc_secret_load(&secret, secret_path, &err), TS_OK);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-rpc-attacks-%d-XXXXXX", (int)getpid());
  ck_assert(mkdtemp(tmpdir));
  snprintf(errlog, sizeof errlog, "%s.log", tmpdir);
  for (int attempt = 0; attempt < 5; attempt++) {
    port = random_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    server_pid = fork();
    if (server_pid == 0) {
      setenv("TMPDIR", tmpdir, 1);
      int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) dup2(fd, 2);
      execl(server_exe, server_exe, "--no-tracker", "--port", ps, "--secret-file", secret_path, (char *)NULL);
      _exit(127);
    }
    snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", port);
    usleep(300000);
    int st;
    if (waitpid(server_pid, &st, WNOHANG) == 0) return;
  }
  ck_abort_msg("could not start %s", server_exe);
}

/* Stops the server (SIGTERM) and returns the seconds it took to exit. */
static double stop_timed(int *status) {
  double t0 = now_s();
  *status = stop_server(server_pid);
  return now_s() - t0;
}

static void stop(void) {
  int st;
  stop_timed(&st);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exit status %d", st);
}

static void cleanup(void) {
  unlink(secret_path);
  unlink(errlog);
  rmdir(tmpdir);
}

/* kB of a /proc/PID/status field (VmRSS, VmHWM) */
static long proc_kb(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  size_t fl = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, field, fl) && line[fl] == ':') kb = strtol(line + fl + 1, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static int tcp_connect(int p) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* nng's SP header of a REQ peer (protocol 0x30) */
static const uint8_t sp_req_hdr[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};

/* ---- unauthenticated 64 MiB messages ---------------------------------------- */
typedef struct flooder {
  size_t sent;
  bool refused; /* the server closed the connection before it was all sent */
} flooder;

static void *send_big(void *arg) {
  flooder *fl = arg;
  int fd = tcp_connect(port);
  if (fd < 0) return NULL;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  uint64_t len = RPC_MAX_MSG - 16; /* within the old limit of 64 MiB + 4 KiB */
  uint8_t hdr[8];
  for (int i = 0; i < 8; i++) hdr[i] = (uint8_t)(len >> (56 - 8 * i));
  static uint8_t chunk[1 << 16];
  bool ok = relay_write_all(fd, sp_req_hdr, 8) && relay_write_all(fd, hdr, 8);
  while (ok && fl->sent < len) {
    size_t k = len - fl->sent < sizeof chunk ? len - fl->sent : sizeof chunk;
    ok = relay_write_all(fd, chunk, k);
    if (ok) fl->sent += k;
  }
  fl->refused = !ok;
  close(fd);
  return NULL;
}

START_TEST(unauthenticated_64mib_bounded) {
  start();
  long idle = proc_kb(server_pid, "VmRSS");
  ck_assert(idle > 0);
  pthread_t th[8];
  flooder fl[8] = {{0}};
  for (int i = 0; i < 8; i++) ck_assert(pthread_create(&th[i], NULL, send_big, &fl[i]) == 0);
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  long peak = proc_kb(server_pid, "VmHWM");
  int refused = 0;
  for (int i = 0; i < 8; i++) refused += fl[i].refused;
  fprintf(stderr, "rpc_attacks: idle %ld kB, peak %ld kB after 8 x 64 MiB unauthenticated; %d of 8 refused\n",
          idle, peak, refused);
  ck_assert_msg(peak - idle < 32 * 1024, "rpc_server grew from %ld kB to a peak of %ld kB", idle, peak);
  ck_assert_int_eq(refused, 8);
  /* and still serves */
  rpc_client *c = NULL;
  ts_diag err = {0};
  ck_assert_msg(rpc_client_open(&c, addr, &secret, NULL, 10, &err) == TS_OK, "%s", err.msg);
  rpc_msg m;
  ck_assert_msg(rpc_client_info(c, &m, &err) == TS_OK, "%s", err.msg);
  rpc_msg_fini(&m);
  rpc_client_close(c);
  stop();
  cleanup();
}
END_TEST

/* ---- requests in parts ------------------------------------------------------- */
static uint8_t *read_file(const char *path, size_t extra, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = calloc(1, (size_t)sz + extra);
  ck_assert(p && fread(p, 1, (size_t)sz, f) == (size_t)sz);
  fclose(f);
  *n = (size_t)sz + extra;
  return p;
}

START_TEST(big_request_in_parts) {
  start();
  rpc_client *c = NULL;
  ts_diag err = {0};
  ck_assert_msg(rpc_client_open(&c, addr, &secret, NULL, 10, &err) == TS_OK, "%s", err.msg);
  /* the kernel with 1 MiB + 3 zero bytes after it (the loader ignores them):
   * nine parts, the last one odd-sized */
  size_t n;
  uint8_t *so = read_file(ok_so, (1u << 20) + 3, &n);
  ck_assert(n > 8 * RPC_PART_MAX);
  char id[32];
  ck_assert_msg(rpc_client_upload_bytes(c, "padded.so", so, n, id, sizeof id, &err) == TS_OK, "%s", err.msg);
  tsrt_measure_opts o = {.repeat = 1, .number = 1, .timeout_s = 10, .seed = 7};
  tsrt_measure_result r;
  ck_assert_msg(rpc_client_measure(c, id, &o, &r, &err) == TS_OK, "%s", err.msg);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  tsrt_measure_result l;
  tsrt_measure_forked(ok_so, &o, &l);
  ck_assert_uint_eq(l.checksums[0], r.checksums[0]);
  tsrt_result_fini(&l);
  tsrt_result_fini(&r);
  /* the server stored exactly n bytes */
  char path[600];
  struct stat sb;
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  bool found = false;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "tessel-rpc-", 11)) {
      snprintf(path, sizeof path, "%s/%s/%s.so", tmpdir, e->d_name, id);
      found = stat(path, &sb) == 0 && (size_t)sb.st_size == n;
    }
  if (d) closedir(d);
  ck_assert_msg(found, "artifact %s of %zu bytes not found under %s", id, n, tmpdir);
  free(so);
  rpc_client_close(c);
  /* parts by hand: one out of order is refused, the next request is served */
  nng_socket s;
  ck_assert(nng_req0_open(&s) == 0);
  nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
  ck_assert(nng_dial(s, addr, NULL, 0) == 0);
  rpc_chan ch;
  ck_assert_msg(rpc_auth_client(s, &secret, "client", &ch, &err) == TS_OK, "%s", err.msg);
  rpc_enc pe;
  rpc_enc_begin(&pe, RPC_T_PART, 3);
  rpc_enc_u64(&pe, "seq", 1);
  rpc_enc_u64(&pe, "total", 3 * RPC_PART_MAX);
  rpc_enc_bin(&pe, "data", "abc", 3);
  rpc_msg m;
  ck_assert_int_eq(rpc_chan_call(s, &ch, &pe, &m, NULL, &err), TS_EPROTO);
  ck_assert_msg(strstr(err.msg, "out of order"), "%s", err.msg);
  rpc_enc_begin(&pe, RPC_T_PART, 3); /* a whole request's size: sent whole */
  rpc_enc_u64(&pe, "seq", 0);
  rpc_enc_u64(&pe, "total", 100);
  rpc_enc_bin(&pe, "data", "abc", 3);
  ck_assert_int_eq(rpc_chan_call(s, &ch, &pe, &m, NULL, &err), TS_EPROTO);
  rpc_enc_begin(&pe, RPC_T_INFO, 0);
  ck_assert_msg(rpc_chan_call(s, &ch, &pe, &m, NULL, &err) == TS_OK, "%s", err.msg);
  rpc_msg_fini(&m);
  nng_close(s);
  stop();
  cleanup();
}
END_TEST

/* ---- an on-path relay --------------------------------------------------------- */
static int artifacts_stored(void) {
  int k = 0;
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strncmp(e->d_name, "tessel-rpc-", 11)) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    DIR *d2 = opendir(p);
    struct dirent *e2;
    while (d2 && (e2 = readdir(d2))) k += e2->d_name[0] == 'a';
    if (d2) closedir(d2);
  }
  if (d) closedir(d);
  return k;
}

/* A client through a relay in `mode` (sub: the substituted plaintext)
 * uploads; returns the upload's status; *closed: the server closed the
 * relayed connection. */
static ts_status upload_through(int mode, const void *sub, size_t subn, bool *closed) {
  relay r;
  ck_assert(relay_start(&r, mode, port, sub, subn));
  char ru[64];
  relay_url(&r, ru, sizeof ru);
  rpc_client *c = NULL;
  ts_diag err = {0};
  ck_assert_msg(rpc_client_open(&c, ru, &secret, NULL, 2, &err) == TS_OK, "handshake through the relay: %s",
                err.msg);
  char id[32];
  ts_status st = rpc_client_upload_bytes(c, "k.so", "\x7f" "ELF-not-really", 15, id, sizeof id, &err);
  nng_close(c->sock); /* no close request: the relay may be gone */
  c->sock = (nng_socket)NNG_SOCKET_INITIALIZER;
  rpc_client_close(c);
  pthread_join(r.th, NULL);
  *closed = r.up_closed;
  return st;
}

START_TEST(relay_substitution_refused) {
  start();
  bool closed;
  /* the control: the relay itself breaks nothing */
  ck_assert_int_eq(upload_through(R_PASS, NULL, 0, &closed), TS_OK);
  ck_assert_int_eq(artifacts_stored(), 1);
  /* a plaintext upload in place of the sealed one */
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_UPLOAD, 2);
  rpc_enc_str(&e, "name", "evil.so");
  rpc_enc_bin(&e, "data", "\x7f" "ELF-evil", 9);
  ck_assert(rpc_enc_finish(&e) == TS_OK);
  ck_assert_int_ne(upload_through(R_UNSEALED, e.sb.data, e.sb.size, &closed), TS_OK);
  ck_assert_msg(closed, "the server kept the connection open");
  ck_assert_int_eq(artifacts_stored(), 1);
  rpc_enc_fini(&e);
  /* a plaintext measure of the artifact the honest client uploaded (a1) */
  rpc_enc_begin(&e, RPC_T_MEASURE, 2);
  rpc_enc_str(&e, "artifact", "a1");
  rpc_enc_key(&e, "opts");
  msgpack_pack_map(&e.pk, 0);
  ck_assert(rpc_enc_finish(&e) == TS_OK);
  ck_assert_int_ne(upload_through(R_UNSEALED, e.sb.data, e.sb.size, &closed), TS_OK);
  ck_assert(closed);
  rpc_enc_fini(&e);
  /* a forged frame, an altered one */
  ck_assert_int_ne(upload_through(R_FORGE, NULL, 0, &closed), TS_OK);
  ck_assert(closed);
  ck_assert_int_ne(upload_through(R_ALTER, NULL, 0, &closed), TS_OK);
  ck_assert(closed);
  ck_assert_int_eq(artifacts_stored(), 1);
  char *log = NULL;
  size_t logn = 0;
  FILE *f = fopen(errlog, "r");
  ck_assert(f && getdelim(&log, &logn, 0, f) > 0);
  fclose(f);
  ck_assert_msg(strstr(log, "unsealed message") && strstr(log, "failed authentication"),
                "the server's log does not say why it refused:\n%s", log);
  free(log);
  stop();
  cleanup();
}
END_TEST

/* ---- close under a reconnect flood ---------------------------------------------- */
static volatile bool flood_stop;
static volatile long flood_conns;

/* Opens connections that send the SP header and, every other one, a hello
 * (then read nothing), as fast as the server closes them (it keeps 32
 * pending per address); each thread holds up to 250. */
static void *flood(void *arg) {
  (void)arg;
  int fds[250];
  int n = 0;
  for (long k = 0; !flood_stop; k++) {
    int fd = relay_idle_conn(port, k % 2);
    if (fd < 0) {
      usleep(1000);
      continue;
    }
    __atomic_add_fetch(&flood_conns, 1, __ATOMIC_RELAXED);
    if (n == 250) {
      close(fds[0]);
      memmove(fds, fds + 1, sizeof fds - sizeof fds[0]);
      n--;
    }
    fds[n++] = fd;
  }
  for (int i = 0; i < n; i++) close(fds[i]);
  return NULL;
}

START_TEST(close_under_reconnect_flood) {
  start();
  flood_stop = false;
  flood_conns = 0;
  /* TESSEL_FLOOD_SECS / TESSEL_FLOOD_THREADS: a longer, wider flood by hand */
  int secs_flood = getenv("TESSEL_FLOOD_SECS") ? atoi(getenv("TESSEL_FLOOD_SECS")) : 3;
  int nth = getenv("TESSEL_FLOOD_THREADS") ? atoi(getenv("TESSEL_FLOOD_THREADS")) : 4;
  if (nth < 1 || nth > 64) nth = 4;
  pthread_t th[64];
  for (int i = 0; i < nth; i++) ck_assert(pthread_create(&th[i], NULL, flood, NULL) == 0);
  sleep((unsigned)(secs_flood > 0 ? secs_flood : 3));
  int st;
  double secs = stop_timed(&st); /* while the flood goes on */
  flood_stop = true;
  for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
  char *log = NULL;
  size_t logn = 0;
  FILE *f = fopen(errlog, "r");
  if (f && getdelim(&log, &logn, 0, f) < 0) log[0] = 0;
  if (f) fclose(f);
  fprintf(stderr, "rpc_attacks: %ld flood connections; server exited in %.2f s\n", flood_conns, secs);
  /* nng 1.5.2's close may wait for good here (docs/RPC.md): the server
   * bounds it and exits anyway, with status 0, its artifacts removed */
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
  ck_assert_msg(secs < 4, "the server took %.2f s to stop:\n%s", secs, log ? log : "");
  ck_assert_msg(log && strstr(log, "rpc-server: stopping"), "%s", log ? log : "");
  free(log);
  cleanup();
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SERVER_EXE OK_SO\n", argv[0]);
    return 2;
  }
  server_exe = argv[1];
  ok_so = argv[2];
  Suite *s = suite_create("rpc_attacks");
  TCase *tc = tcase_create("server");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, unauthenticated_64mib_bounded);
  tcase_add_test(tc, big_request_in_parts);
  tcase_add_test(tc, relay_substitution_refused);
  tcase_add_test(tc, close_under_reconnect_flood);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
