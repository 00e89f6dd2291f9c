/* test_board.c — boards in the test suite: a tracker (in this process, on a
 * random loopback port), rpc_servers as child processes, and `tessel tune
 * --runner rpc` driving them, as a user would.
 *
 *   aarch64:   the aarch64 rpc_server under qemu-aarch64 registers, receives
 *              aarch64 builds from a 12-trial tune and returns outputs that
 *              verify (skipped without the cross build / qemu);
 *   multi:     3 host rpc_servers, 64 trials with --parallel 3: exactly 64
 *              records, each verified or an honest kernel error, no duplicate;
 *   kill:      the same with one server SIGKILLed once 16 records are in:
 *              the run finishes with 64 records, none lost, none an error
 *              caused by the dead board, no candidate measured twice.
 *
 * argv: TESSEL RPC_SERVER [RPC_SERVER_AARCH64 QEMU]. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpc/auth.h"
#include "tracker/tracker.h"

static const char *tessel, *server, *server_arm, *qemu;
static char dir[64], secret_path[128];
static rpc_secret secret;
static trk_tracker *trk;
static int trk_port;
static pid_t servers[4];
static int nservers;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* below Linux's ephemeral range (32768..), where client sockets take ports */
static int rand_port(void) { return 20000 + (int)(random() % 12000); }

static pid_t spawn(char *const argv[], const char *out_path, const char *env_threads) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (env_threads) setenv("TESSEL_NUM_THREADS", env_threads, 1);
    setpgid(0, 0);
    execvp(argv[0], argv);
    _exit(127);
  }
  return p;
}

static void start_tracker(void) {
  snprintf(dir, sizeof dir, "/tmp/tessel-board-XXXXXX");
  ck_assert(mkdtemp(dir) != NULL);
  snprintf(secret_path, sizeof secret_path, "%s/secret", dir);
  FILE *f = fopen(secret_path, "w");
  ck_assert(f != NULL);
  fprintf(f, "test-board-secret-%ld-%d\n", (long)time(NULL), (int)getpid());
  fclose(f);
  chmod(secret_path, 0600);
  setenv(RPC_SECRET_ENV, secret_path, 1);
  ts_diag err = {0};
  ck_assert_msg(rpc_secret_load(&secret, secret_path, &err) == TS_OK, "%s", err.msg);
  srandom((unsigned)(getpid() ^ time(NULL)));
  for (int tries = 0; tries < 20; tries++) {
    trk_port = rand_port();
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", trk_port);
    trk_config c;
    memset(&c, 0, sizeof c);
    c.url = url;
    c.secret = &secret;
    if (trk_tracker_start(&c, &trk, &err) == TS_OK) return;
  }
  ck_abort_msg("cannot start a tracker: %s", err.msg);
}

static void add_server(const char *exe, const char *key, bool under_qemu) {
  char trk_addr[64], port[16], out[128];
  snprintf(trk_addr, sizeof trk_addr, "127.0.0.1:%d", trk_port);
  snprintf(port, sizeof port, "0"); /* the server takes any free port and registers it */
  snprintf(out, sizeof out, "%s/server%d.log", dir, nservers);
  char *argv[16];
  int a = 0;
  if (under_qemu) argv[a++] = (char *)qemu;
  argv[a++] = (char *)exe;
  argv[a++] = "--tracker", argv[a++] = trk_addr;
  argv[a++] = "--key", argv[a++] = (char *)key;
  argv[a++] = "--port", argv[a++] = port;
  argv[a++] = "--host", argv[a++] = "127.0.0.1";
  argv[a] = NULL;
  servers[nservers++] = spawn(argv, out, under_qemu ? "1" : NULL);
}

static void dump(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) fprintf(stderr, "  | %s", line);
  fclose(f);
}

static void wait_servers(uint32_t n) {
  trk_stats st;
  double t0 = now_s();
  do {
    trk_tracker_stats(trk, &st);
    if (st.servers >= n) return;
    nap_ms(100);
  } while (now_s() - t0 < 30);
  for (int i = 0; i < nservers; i++) {
    char out[128];
    int ws;
    snprintf(out, sizeof out, "%s/server%d.log", dir, i);
    if (servers[i] > 0 && waitpid(servers[i], &ws, WNOHANG) == servers[i]) {
      fprintf(stderr, "server %d exited (%s %d):\n", i, WIFSIGNALED(ws) ? "signal" : "status",
              WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
      servers[i] = 0;
    } else {
      fprintf(stderr, "server %d:\n", i);
    }
    dump(out);
  }
  ck_abort_msg("only %u of %u servers registered in 30 s", st.servers, n);
}

static void stop_all(void) {
  for (int i = 0; i < nservers; i++)
    if (servers[i] > 0) {
      kill(servers[i], SIGTERM);
      double t0 = now_s();
      int ws;
      while (waitpid(servers[i], &ws, WNOHANG) == 0) {
        if (now_s() - t0 > 5) {
          kill(servers[i], SIGKILL);
          waitpid(servers[i], &ws, 0);
          break;
        }
        nap_ms(50);
      }
      servers[i] = 0;
    }
  nservers = 0;
  trk_tracker_stop(trk);
  trk = NULL;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) {
  }
}

static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0, c;
  while ((c = fgetc(f)) != EOF)
    if (c == '\n') n++;
  fclose(f);
  return n;
}

typedef struct tune_run {
  pid_t pid;
  char log[128], out[128];
  double t0;
} tune_run;

static void tune_start(tune_run *t, const char *workload, int trials, const char *key, int parallel,
                       const char *target, const char *threads, const char *min_ms) {
  snprintf(t->log, sizeof t->log, "%s/%s.jsonl", dir, key);
  snprintf(t->out, sizeof t->out, "%s/%s.out", dir, key);
  char trk_addr[64], ntrials[16], par[16];
  snprintf(trk_addr, sizeof trk_addr, "127.0.0.1:%d", trk_port);
  snprintf(ntrials, sizeof ntrials, "%d", trials);
  snprintf(par, sizeof par, "%d", parallel);
  char *argv[48];
  int a = 0;
  argv[a++] = (char *)tessel, argv[a++] = "tune", argv[a++] = (char *)workload;
  argv[a++] = "--trials", argv[a++] = ntrials, argv[a++] = "--log", argv[a++] = t->log;
  argv[a++] = "--runner", argv[a++] = "rpc", argv[a++] = "--tracker", argv[a++] = trk_addr;
  argv[a++] = "--key", argv[a++] = (char *)key, argv[a++] = "--parallel", argv[a++] = par;
  argv[a++] = "--secret-file", argv[a++] = secret_path;
  argv[a++] = "--model", argv[a++] = "random", argv[a++] = "--batch", argv[a++] = "32";
  argv[a++] = "--min-repeat-ms", argv[a++] = (char *)min_ms, argv[a++] = "--repeat", argv[a++] = "2";
  argv[a++] = "--timeout", argv[a++] = "20", argv[a++] = "--build-jobs", argv[a++] = "2";
  if (target) argv[a++] = "--target", argv[a++] = (char *)target;
  if (threads) argv[a++] = "--threads", argv[a++] = (char *)threads;
  argv[a++] = "--json";
  argv[a] = NULL;
  t->t0 = now_s();
  t->pid = spawn(argv, t->out, NULL);
  ck_assert(t->pid > 0);
}

static json_t *tune_wait(tune_run *t, double limit_s) {
  int ws = 0;
  for (;;) {
    pid_t p = waitpid(t->pid, &ws, WNOHANG);
    if (p == t->pid) break;
    if (now_s() - t->t0 > limit_s) {
      kill(t->pid, SIGKILL);
      waitpid(t->pid, &ws, 0);
      dump(t->out);
      ck_abort_msg("tessel tune ran past %.0f s", limit_s);
    }
    nap_ms(100);
  }
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) dump(t->out);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "tessel tune failed (status %d)", ws);
  /* the JSON summary is the last '{' ... of the output (stderr lines precede it) */
  FILE *f = fopen(t->out, "r");
  ck_assert(f != NULL);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *s = strstr(buf, "\n{");
  s = s ? s + 1 : (buf[0] == '{' ? buf : NULL);
  ck_assert_msg(s != NULL, "no JSON summary in %s", t->out);
  json_error_t je;
  json_t *j = json_loads(s, 0, &je);
  ck_assert_msg(j != NULL, "bad JSON summary: %s", je.text);
  fprintf(stderr, "board: %s: %.1f s wall\n", t->log, now_s() - t->t0);
  return j;
}

/* Every record verified or an honest kernel error; no duplicate trace;
 * returns how many verified. */
static int check_log(const char *path, int want) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no log %s", path);
  char *line = NULL;
  size_t cap = 0;
  int n = 0, verified = 0;
  json_int_t *hashes = calloc((size_t)want + 64, sizeof *hashes);
  while (getline(&line, &cap, f) > 0) {
    json_error_t je;
    json_t *r = json_loads(line, 0, &je);
    ck_assert_msg(r != NULL, "bad record %d: %s", n, je.text);
    json_t *err = json_object_get(r, "error");
    if (json_is_true(json_object_get(r, "verified"))) {
      verified++;
    } else {
      ck_assert_msg(json_is_string(err), "record %d neither verified nor an error", n);
      const char *e = json_string_value(err);
      ck_assert_msg(strstr(e, "board") == NULL && strstr(e, "rpc") == NULL && strstr(e, "lost") == NULL &&
                        strstr(e, "network") == NULL,
                    "record %d logged a board failure as an error: %s", n, e);
    }
    json_t *h = json_object_get(r, "trace_hash");
    json_int_t hv = json_is_integer(h) ? json_integer_value(h) : 0;
    if (json_is_string(h)) hv = (json_int_t)strtoull(json_string_value(h), NULL, 16);
    for (int i = 0; hv && i < n && i < want + 64; i++)
      ck_assert_msg(hashes[i] != hv, "record %d measures the same candidate as record %d", n, i);
    if (n < want + 64) hashes[n] = hv;
    json_decref(r);
    n++;
  }
  free(line);
  free(hashes);
  fclose(f);
  ck_assert_int_eq(n, want);
  return verified;
}

static int rpc_field(json_t *j, const char *k) {
  return (int)json_integer_value(json_object_get(json_object_get(j, "rpc"), k));
}

START_TEST(test_aarch64_board) {
  if (!server_arm || !qemu) {
    fprintf(stderr, "board: no aarch64 rpc_server or qemu-aarch64: skipped\n");
    return;
  }
  start_tracker();
  add_server(server_arm, "qemu-arm", true);
  wait_servers(1);
  tune_run t;
  /* no --target: the board reports aarch64-linux-gnu. --threads 1: qemu-user
   * 7.2 asserts when a child forked from a threaded process starts threads. */
  tune_start(&t, "matmul:m=16,n=16,k=12", 12, "qemu-arm", 1, NULL, "1", "2");
  json_t *j = tune_wait(&t, 170);
  const char *target = json_string_value(json_object_get(j, "target"));
  ck_assert_msg(target && strstr(target, "aarch64"), "target %s", target ? target : "?");
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 12);
  int v = check_log(t.log, 12);
  ck_assert_msg(v >= 10, "only %d of 12 aarch64 candidates verified", v);
  ck_assert_int_eq(rpc_field(j, "lost"), 0);
  json_decref(j);
  stop_all();
}
END_TEST

START_TEST(test_three_boards) {
  start_tracker();
  for (int i = 0; i < 3; i++) add_server(server, "host3", false);
  wait_servers(3);
  tune_run t;
  tune_start(&t, "matmul:m=48,n=48,k=32", 64, "host3", 3, NULL, NULL, "2");
  json_t *j = tune_wait(&t, 170);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 64);
  int v = check_log(t.log, 64);
  ck_assert_msg(v >= 60, "only %d of 64 verified", v);
  ck_assert_int_eq(rpc_field(j, "sessions"), 3);
  ck_assert_int_eq(rpc_field(j, "lost"), 0);
  ck_assert_int_eq(rpc_field(j, "board_failures"), 0);
  json_decref(j);
  stop_all();
}
END_TEST

START_TEST(test_kill_a_board) {
  start_tracker();
  for (int i = 0; i < 3; i++) add_server(server, "host3k", false);
  wait_servers(3);
  tune_run t;
  /* 60 ms per repeat: the boards are busy most of the time, so the kill lands
   * mid-measurement */
  tune_start(&t, "matmul:m=64,n=64,k=64", 64, "host3k", 3, NULL, NULL, "60");
  double t0 = now_s();
  while (count_lines(t.log) < 16) {
    ck_assert_msg(now_s() - t0 < 120, "no 16 records in 120 s");
    int ws;
    ck_assert_msg(waitpid(t.pid, &ws, WNOHANG) == 0, "tune exited early");
    nap_ms(20);
  }
  kill(servers[1], SIGKILL);
  waitpid(servers[1], NULL, 0);
  servers[1] = 0;
  fprintf(stderr, "board: killed a board at %d records\n", count_lines(t.log));
  json_t *j = tune_wait(&t, 170);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 64);
  int v = check_log(t.log, 64);
  ck_assert_msg(v >= 60, "only %d of 64 verified", v);
  ck_assert_int_eq(rpc_field(j, "lost"), 0);
  ck_assert_msg(rpc_field(j, "board_failures") >= 1, "the dead board went unnoticed");
  fprintf(stderr, "board: kill run: %d board failures, %d retried, %d sessions\n",
          rpc_field(j, "board_failures"), rpc_field(j, "retries"), rpc_field(j, "sessions"));
  json_decref(j);
  stop_all();
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_board TESSEL RPC_SERVER [RPC_SERVER_AARCH64 QEMU]\n");
    return 2;
  }
  tessel = argv[1];
  server = argv[2];
  if (argc >= 5) server_arm = argv[3], qemu = argv[4];
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("board");
  TCase *tc = tcase_create("board");
  tcase_set_timeout(tc, 200);
  tcase_add_test(tc, test_aarch64_board);
  tcase_add_test(tc, test_three_boards);
  tcase_add_test(tc, test_kill_a_board);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
