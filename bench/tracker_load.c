/* tracker_load.c — the tracker under load on loopback: S simulated servers
 * (registered over their own connections, heartbeated by a few threads),
 * C client threads that request a server (random key of K, random priority)
 * and release it at once, for D seconds. Prints grants/s, p50/p99 grant
 * latency, and checks that no session was lost: every grant released OK, no
 * eviction, and at the end every server free and registered.
 * usage: tracker_load [SERVERS=500] [CLIENTS=50] [SECONDS=30] [KEYS=4] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracker/tracker.h"
#include "tracker/tracker_client.h"

static char url[128];
static rpc_secret secret;
static int nservers = 500, nclients = 50, seconds = 30, nkeys = 4;
static volatile int stop;
static trk_server_reg **regs;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct hb_arg { int lo, hi; long failures; } hb_arg;
static void *hb_thread(void *p) {
  hb_arg *a = p;
  while (!stop) {
    double t0 = now_s();
    for (int i = a->lo; i < a->hi && !stop; i++) {
      ts_diag err = {0};
      if (trk_server_heartbeat(regs[i], &err) != TS_OK) a->failures++;
    }
    double left = 0.5 - (now_s() - t0);
    if (left > 0) usleep((useconds_t)(left * 1e6));
  }
  return NULL;
}

typedef struct cl_arg {
  int id;
  double *lat;
  size_t nlat, cap;
  long grants, lost, errors;
} cl_arg;

static void *client_thread(void *p) {
  cl_arg *a = p;
  trk_conn *c;
  ts_diag err = {0};
  if (trk_conn_open(url, &secret, "client", 10000, &c, &err) != TS_OK) {
    fprintf(stderr, "client %d: %s\n", a->id, err.msg);
    a->errors++;
    return NULL;
  }
  unsigned seed = (unsigned)a->id * 7919u + 1;
  while (!stop) {
    char key[32];
    snprintf(key, sizeof key, "board%d", rand_r(&seed) % nkeys);
    trk_grant g;
    double t0 = now_s();
    ts_status st = trk_request(c, key, rand_r(&seed) % 3, 10000, 0, &g, &err);
    double dt = now_s() - t0;
    if (st != TS_OK) {
      a->errors++;
      continue;
    }
    a->grants++;
    if (a->nlat == a->cap) {
      a->cap = a->cap ? a->cap * 2 : 4096;
      a->lat = realloc(a->lat, a->cap * sizeof *a->lat);
    }
    a->lat[a->nlat++] = dt;
    if (trk_release(c, &g, &err) != TS_OK) a->lost++;
  }
  trk_conn_close(c);
  return NULL;
}

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

int main(int argc, char **argv) {
  if (argc > 1) nservers = atoi(argv[1]);
  if (argc > 2) nclients = atoi(argv[2]);
  if (argc > 3) seconds = atoi(argv[3]);
  if (argc > 4) nkeys = atoi(argv[4]);
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", 30000 + (int)(getpid() % 20000));
  rpc_secret_from_bytes(&secret, "bench secret, sixteen bytes or more", 35);
  trk_config cfg = {.url = url, .secret = &secret};
  trk_tracker *t;
  ts_diag err = {0};
  if (trk_tracker_start(&cfg, &t, &err) != TS_OK) {
    fprintf(stderr, "tracker: %s\n", err.msg);
    return 1;
  }
  regs = calloc((size_t)nservers, sizeof *regs);
  double t0 = now_s();
  for (int i = 0; i < nservers; i++) {
    char key[32], addr[64];
    snprintf(key, sizeof key, "board%d", i % nkeys);
    snprintf(addr, sizeof addr, "tcp://10.1.%d.%d:9090", i / 250, i % 250);
    if (trk_server_register(url, &secret, key, addr, NULL, 0, false, &regs[i], &err) != TS_OK) {
      fprintf(stderr, "server %d: %s\n", i, err.msg);
      return 1;
    }
  }
  fprintf(stderr, "registered %d servers in %.2f s\n", nservers, now_s() - t0);
  enum { NHB = 4 };
  pthread_t hbt[NHB], *ct = calloc((size_t)nclients, sizeof *ct);
  hb_arg hba[NHB];
  for (int i = 0; i < NHB; i++) {
    hba[i] = (hb_arg){i * nservers / NHB, (i + 1) * nservers / NHB, 0};
    pthread_create(&hbt[i], NULL, hb_thread, &hba[i]);
  }
  cl_arg *ca = calloc((size_t)nclients, sizeof *ca);
  t0 = now_s();
  for (int i = 0; i < nclients; i++) {
    ca[i].id = i;
    pthread_create(&ct[i], NULL, client_thread, &ca[i]);
  }
  sleep((unsigned)seconds);
  stop = 1;
  for (int i = 0; i < nclients; i++) pthread_join(ct[i], NULL);
  double wall = now_s() - t0;
  for (int i = 0; i < NHB; i++) pthread_join(hbt[i], NULL);
  usleep(200000);
  trk_stats st;
  trk_tracker_stats(t, &st);
  size_t n = 0;
  long grants = 0, lost = 0, errors = 0, hbfail = 0;
  for (int i = 0; i < nclients; i++) {
    n += ca[i].nlat;
    grants += ca[i].grants;
    lost += ca[i].lost;
    errors += ca[i].errors;
  }
  for (int i = 0; i < NHB; i++) hbfail += hba[i].failures;
  double *all = malloc((n + 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < nclients; i++) {
    memcpy(all + k, ca[i].lat, ca[i].nlat * sizeof *all);
    k += ca[i].nlat;
  }
  qsort(all, n, sizeof *all, cmp);
  double p50 = n ? all[n / 2] : 0, p99 = n ? all[(size_t)((double)n * 0.99)] : 0;
  bool ok = lost == 0 && errors == 0 && st.evictions == 0 && st.busy == 0 && st.servers == (uint32_t)nservers &&
            st.grants == (uint64_t)grants && st.releases == (uint64_t)grants;
  printf("tracker_load: %d servers, %d clients, %d keys, %.1f s\n", nservers, nclients, nkeys, wall);
  printf("  grants: %ld (%.0f grants/s)\n", grants, (double)grants / wall);
  printf("  grant latency: p50 %.3f ms, p99 %.3f ms\n", p50 * 1e3, p99 * 1e3);
  printf("  lost sessions: %ld, request errors: %ld, heartbeat failures: %ld, evictions: %llu, busy at end: %u, "
         "servers at end: %u, tracker grants/releases: %llu/%llu\n",
         lost, errors, hbfail, (unsigned long long)st.evictions, st.busy, st.servers,
         (unsigned long long)st.grants, (unsigned long long)st.releases);
  printf("  %s\n", ok ? "OK: zero lost sessions" : "FAIL");
  for (int i = 0; i < nservers; i++) trk_server_deregister(regs[i]);
  trk_tracker_stop(t);
  return ok ? 0 : 1;
}
