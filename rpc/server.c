/* server.c — rpc_server (server.h): option parsing, the REP serving loop,
 * artifact storage, forked measurement, device info, and the tracker thread
 * (register within a second, heartbeat, re-register after a tracker restart,
 * deregister on exit). The tracker messages are protocol.h's
 * register/heartbeat/deregister, spoken directly over a REQ socket. */
#include "rpc/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cuda_rt.h"
#include "runtime/model.h"
#include "runtime/runtime.h"
#include "rpc/auth.h"
#include "rpc/protocol.h"

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include "tessel_config.h"

#define MAX_TOKENS 64

typedef struct artifact {
  char id[16];
  char path[512];
  char token[RPC_TOKEN_LEN + 1];
} artifact;

typedef struct server {
  /* options */
  char tracker[RPC_MAX_ADDR];
  char key[RPC_MAX_KEY];
  char host[RPC_MAX_ADDR];
  char advertise[RPC_MAX_ADDR];
  int port;
  bool no_tracker;
  rpc_secret secret;
  /* state */
  nng_socket sock;
  rpc_authtab auth;
  char dir[256];
  artifact arts[RPC_SERVER_MAX_ARTIFACTS];
  int narts;
  uint64_t next_art;
  pthread_mutex_t mu; /* tokens, busy */
  char tokens[MAX_TOKENS][RPC_TOKEN_LEN + 1];
  int ntokens;
  bool busy;
  bool registered;
  pthread_t trk_thread;
  bool trk_started;
} server;

static volatile sig_atomic_t g_stop;
static char g_dir[256]; /* for the signal path: removed by the main loop */

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

void rpc_server_stop(void) {
  g_stop = 1;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- device info ---------------------------------------------------------- */
static void guess_triple(char *out, size_t n) {
  struct utsname u;
  if (uname(&u)) {
    snprintf(out, n, "unknown-linux-gnu");
    return;
  }
  if (strncmp(u.machine, "armv7", 5) == 0) snprintf(out, n, "armv7-linux-gnueabihf");
  else if (strcmp(u.machine, "arm64") == 0) snprintf(out, n, "aarch64-linux-gnu");
  else snprintf(out, n, "%.40s-linux-gnu", u.machine);
}

static void cpu_features(char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0) {
      char *c = strchr(line, ':');
      if (!c) continue;
      c++;
      while (*c == ' ' || *c == '\t') c++;
      size_t l = strcspn(c, "\n");
      c[l] = 0;
      snprintf(out, n, "%s", c);
      break;
    }
  }
  fclose(f);
}

static void pack_info(msgpack_packer *pk) {
  char triple[64], host[128] = "", feats[4096];
  guess_triple(triple, sizeof triple);
  cpu_features(feats, sizeof feats);
  gethostname(host, sizeof host - 1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  msgpack_pack_map(pk, 9);
  rpc_pack_str(pk, "triple"), rpc_pack_str(pk, triple);
  rpc_pack_str(pk, "cpu_features"), rpc_pack_str(pk, feats);
  rpc_pack_str(pk, "cores"), msgpack_pack_int64(pk, cores > 0 ? cores : 1);
  rpc_pack_str(pk, "memory_bytes"),
      msgpack_pack_int64(pk, pages > 0 && psz > 0 ? (int64_t)pages * psz : 0);
  rpc_pack_str(pk, "hostname"), rpc_pack_str(pk, host);
  rpc_pack_str(pk, "os"), rpc_pack_str(pk, "linux");
  rpc_pack_str(pk, "version"), rpc_pack_str(pk, TESSEL_VERSION);
  char gpu[512];
  int has_gpu = tsrt_cuda_describe(gpu, sizeof gpu); /* probed in a forked child, cached */
  rpc_pack_str(pk, "gpus"), msgpack_pack_array(pk, has_gpu ? 1 : 0);
  if (has_gpu) rpc_pack_str(pk, gpu);
  rpc_pack_str(pk, "gpu_status"), rpc_pack_str(pk, gpu);
}

/* ---- tokens ---------------------------------------------------------------- */
/* RPC_OK: may proceed; EPENDING: unknown (maybe not heard yet); EDENIED. */
static rpc_status check_token(server *s, const char *tok) {
  if (s->no_tracker) return RPC_OK;
  if (!rpc_token_valid(tok)) return RPC_EDENIED;
  pthread_mutex_lock(&s->mu);
  bool ok = false;
  for (int i = 0; i < s->ntokens; i++)
    if (strcmp(s->tokens[i], tok) == 0) ok = true;
  pthread_mutex_unlock(&s->mu);
  return ok ? RPC_OK : RPC_EPENDING;
}

/* ---- tracker thread --------------------------------------------------------- */
static void local_address(server *s, nng_pipe p, char *out, size_t n) {
  if (s->advertise[0]) {
    snprintf(out, n, "%s", s->advertise);
    return;
  }
  if (s->host[0] && strcmp(s->host, "0.0.0.0") != 0) {
    snprintf(out, n, "tcp://%.200s:%d", s->host, s->port);
    return;
  }
  nng_sockaddr sa;
  char ip[64] = "127.0.0.1";
  if (nng_pipe_id(p) > 0 && nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &sa) == 0 &&
      sa.s_family == NNG_AF_INET)
    inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof ip);
  snprintf(out, n, "tcp://%s:%d", ip, s->port);
}

static rpc_status trk_register(server *s, nng_socket t, uint64_t *id, uint64_t *hb_ms,
                               char *err, size_t errn) {
  /* a first round trip gives us the pipe, hence the local address the
   * tracker sees when we listen on 0.0.0.0 */
  rpc_enc e;
  rpc_status st = rpc_auth_client(t, &s->secret, "server", err, errn);
  if (st) return st;
  /* find the pipe: ask with a cheap request whose reply carries it */
  rpc_enc_begin(&e, RPC_T_QUERY, 0);
  nng_pipe p = NNG_PIPE_INITIALIZER;
  if (rpc_send(t, &e) == RPC_OK) {
    rpc_msg r;
    if (rpc_recv(t, &r, &p) == RPC_OK) rpc_msg_fini(&r);
  }
  char addr[RPC_MAX_ADDR];
  local_address(s, p, addr, sizeof addr);
  rpc_enc_begin(&e, RPC_T_REGISTER, 3);
  rpc_enc_str(&e, "key", s->key);
  rpc_enc_str(&e, "address", addr);
  rpc_enc_key(&e, "info");
  pack_info(&e.pk);
  rpc_msg r;
  st = rpc_call(t, &e, &r, err, errn);
  if (st) return st;
  *hb_ms = 1000;
  if (r.type != RPC_T_REGISTERED ||
      rpc_need(&r, rpc_get_u64(&r, NULL, "server_id", UINT64_MAX, id), "server_id")) {
    snprintf(err, errn, "register: unexpected reply (%s)", r.err);
    rpc_msg_fini(&r);
    return RPC_EPROTO;
  }
  rpc_get_u64(&r, NULL, "heartbeat_ms", 60000, hb_ms);
  if (*hb_ms < 50) *hb_ms = 50;
  if (*hb_ms > 2000) *hb_ms = 2000;
  rpc_msg_fini(&r);
  fprintf(stderr, "rpc-server: registered with tracker %s as key '%s' at %s (id %llu)\n",
          s->tracker, s->key, addr, (unsigned long long)*id);
  return RPC_OK;
}

static rpc_status trk_heartbeat(server *s, nng_socket t, uint64_t id, char *err, size_t errn) {
  rpc_enc e;
  pthread_mutex_lock(&s->mu);
  bool busy = s->busy;
  pthread_mutex_unlock(&s->mu);
  rpc_enc_begin(&e, RPC_T_HEARTBEAT, 2);
  rpc_enc_u64(&e, "server_id", id);
  rpc_enc_bool(&e, "busy", busy);
  rpc_msg r;
  rpc_status st = rpc_call(t, &e, &r, err, errn);
  if (st) return st;
  const msgpack_object *toks = NULL;
  uint32_t n = 0;
  if (r.type != RPC_T_HEARTBEAT_ACK ||
      rpc_need(&r, rpc_get_array(&r, NULL, "tokens", MAX_TOKENS, &toks, &n), "tokens")) {
    snprintf(err, errn, "heartbeat: unexpected reply (%s)", r.err);
    rpc_msg_fini(&r);
    return RPC_EPROTO;
  }
  pthread_mutex_lock(&s->mu);
  s->ntokens = 0;
  for (uint32_t i = 0; i < n; i++) {
    const msgpack_object *o = &toks[i];
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size != RPC_TOKEN_LEN) continue;
    memcpy(s->tokens[s->ntokens], o->via.str.ptr, RPC_TOKEN_LEN);
    s->tokens[s->ntokens][RPC_TOKEN_LEN] = 0;
    if (rpc_token_valid(s->tokens[s->ntokens])) s->ntokens++;
  }
  pthread_mutex_unlock(&s->mu);
  rpc_msg_fini(&r);
  return RPC_OK;
}

static void *tracker_thread(void *arg) {
  server *s = arg;
  char url[RPC_MAX_ADDR + 8], err[512], lasterr[512] = "";
  snprintf(url, sizeof url, "%s%s", strstr(s->tracker, "://") ? "" : "tcp://", s->tracker);
  while (!g_stop) {
    nng_socket t;
    if (nng_req0_open(&t)) {
      nap_ms(500);
      continue;
    }
    rpc_socket_limits(t);
    nng_socket_set_ms(t, NNG_OPT_RECVTIMEO, 2000);
    nng_socket_set_ms(t, NNG_OPT_SENDTIMEO, 2000);
    nng_socket_set_ms(t, NNG_OPT_RECONNMINT, 50);
    nng_socket_set_ms(t, NNG_OPT_RECONNMAXT, 500);
    uint64_t id = 0, hb = 1000;
    rpc_status st = RPC_EIO;
    int rv = nng_dial(t, url, NULL, 0);
    if (rv) snprintf(err, sizeof err, "dial %s: %s", url, nng_strerror(rv));
    else st = trk_register(s, t, &id, &hb, err, sizeof err);
    if (st == RPC_OK) {
      lasterr[0] = 0;
      while (!g_stop) {
        double t0 = tsrt_now();
        st = trk_heartbeat(s, t, id, err, sizeof err);
        if (st) break;
        while (!g_stop && tsrt_now() - t0 < (double)hb / 1000) nap_ms(20);
      }
      if (g_stop) {
        rpc_enc e;
        rpc_msg r;
        rpc_enc_begin(&e, RPC_T_DEREGISTER, 1);
        rpc_enc_u64(&e, "server_id", id);
        if (rpc_call(t, &e, &r, err, sizeof err) == RPC_OK) rpc_msg_fini(&r);
      }
    }
    nng_close(t);
    if (g_stop) break;
    if (strcmp(err, lasterr) != 0) {
      fprintf(stderr, "rpc-server: tracker %s: %s (retrying)\n", s->tracker, err);
      snprintf(lasterr, sizeof lasterr, "%s", err);
    }
    pthread_mutex_lock(&s->mu);
    s->ntokens = 0; /* grants die with the tracker's view of us */
    pthread_mutex_unlock(&s->mu);
    nap_ms(st == RPC_EAUTH ? 2000 : 300);
  }
  return NULL;
}

/* ---- artifacts ------------------------------------------------------------ */
static void drop_artifact(server *s, int i) {
  unlink(s->arts[i].path);
  s->arts[i] = s->arts[--s->narts];
}

static artifact *find_artifact(server *s, const char *id) {
  for (int i = 0; i < s->narts; i++)
    if (strcmp(s->arts[i].id, id) == 0) return &s->arts[i];
  return NULL;
}

static void rm_dir(const char *dir) {
  if (!dir[0]) return;
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    char p[600];
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      snprintf(p, sizeof p, "%.300s/%.255s", dir, de->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

static void serve_upload(server *s, rpc_msg *m, rpc_enc *rep) {
  char tok[RPC_TOKEN_LEN + 2] = "", name[128];
  const void *data;
  size_t n;
  rpc_status st;
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == RPC_EPROTO ||
      (st = rpc_need(m, rpc_get_str(m, NULL, "name", name, sizeof name), "name")) ||
      (st = rpc_need(m, rpc_get_bin(m, NULL, "data", RPC_MAX_ARTIFACT, &data, &n), "data"))) {
    rpc_enc_error(rep, RPC_EPROTO, "upload: %s", m->err);
    return;
  }
  if ((st = check_token(s, tok))) {
    rpc_enc_error(rep, st, "upload: %s", st == RPC_EPENDING ?
                  "unknown session token (not granted by the tracker, or not heard yet)" :
                  "a session token granted by the tracker is required");
    return;
  }
  if (s->narts == RPC_SERVER_MAX_ARTIFACTS) drop_artifact(s, 0); /* oldest-ish */
  artifact *a = &s->arts[s->narts];
  unsigned long long seq = ++s->next_art;
  snprintf(a->id, sizeof a->id, "a%llu", seq);
  /* never the client's name in the path */
  snprintf(a->path, sizeof a->path, "%.300s/a%llu.so", s->dir, seq);
  snprintf(a->token, sizeof a->token, "%s", tok);
  FILE *f = fopen(a->path, "wb");
  bool ok = f && fwrite(data, 1, n, f) == n;
  if (f && fclose(f)) ok = false;
  if (!ok) {
    unlink(a->path);
    rpc_enc_error(rep, RPC_ESYSTEM, "upload: cannot store the artifact: %s", strerror(errno));
    return;
  }
  s->narts++;
  rpc_enc_begin(rep, RPC_T_UPLOADED, 2);
  rpc_enc_str(rep, "artifact", a->id);
  rpc_enc_u64(rep, "bytes", n);
}

static void serve_measure(server *s, rpc_msg *m, rpc_enc *rep) {
  char tok[RPC_TOKEN_LEN + 2] = "", id[32];
  const msgpack_object *o = NULL;
  rpc_status st;
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == RPC_EPROTO ||
      (st = rpc_need(m, rpc_get_str(m, NULL, "artifact", id, sizeof id), "artifact")) ||
      rpc_get_map(m, NULL, "opts", &o) == RPC_EPROTO) {
    rpc_enc_error(rep, RPC_EPROTO, "measure: %s", m->err);
    return;
  }
  if ((st = check_token(s, tok))) {
    rpc_enc_error(rep, st, "measure: session token not granted");
    return;
  }
  artifact *a = find_artifact(s, id);
  if (!a || (!s->no_tracker && strcmp(a->token, tok) != 0)) {
    rpc_enc_error(rep, RPC_ENOENT, "measure: no artifact '%s' in this session", id);
    return;
  }
  tsrt_measure_opts opts = {.number = 0, .repeat = 3, .timeout_s = 10};
  uint64_t u;
  double d;
  bool b;
  const char *f = NULL;
#define GETU(name, max, dst)                                                     \
  if ((st = rpc_get_u64(m, o, f = name, max, &u)) == RPC_OK) dst = (int)u;      \
  else if (st != RPC_ENOENT) goto bad
#define GETF(name, lo, hi, dst)                                                  \
  if ((st = rpc_get_f64(m, o, f = name, lo, hi, &d)) == RPC_OK) dst = d;        \
  else if (st != RPC_ENOENT) goto bad
#define GETB(name, dst)                                                          \
  if ((st = rpc_get_bool(m, o, f = name, &b)) == RPC_OK) dst = b;               \
  else if (st != RPC_ENOENT) goto bad
  if (o) {
    GETU("number", 1000000, opts.number);
    GETU("repeat", TSRT_MAX_REPEAT, opts.repeat);
    GETF("min_repeat_ms", 0, 600000, opts.min_repeat_ms);
    GETB("cache_flush", opts.cache_flush);
    GETF("cooldown_ms", 0, 60000, opts.cooldown_ms);
    GETF("timeout_s", 0.001, 3600, opts.timeout_s);
    GETB("want_outputs", opts.want_outputs);
    GETU("num_threads", 4096, opts.num_threads);
    if ((st = rpc_get_u64(m, o, f = "seed", UINT64_MAX, &u)) == RPC_OK) opts.seed = u;
    else if (st != RPC_ENOENT) goto bad;
  }
#undef GETU
#undef GETF
#undef GETB
  if (opts.repeat < 1) opts.repeat = 1;
  pthread_mutex_lock(&s->mu);
  s->busy = true;
  pthread_mutex_unlock(&s->mu);
  tsrt_measure_result res;
  memset(&res, 0, sizeof res);
  tsrt_measure_forked(a->path, &opts, &res);
  pthread_mutex_lock(&s->mu);
  s->busy = false;
  pthread_mutex_unlock(&s->mu);
  bool send_out = opts.want_outputs && res.outputs && res.outputs_bytes <= RPC_MAX_MSG - (1u << 20);
  int nrep = res.repeat < 0 ? 0 : res.repeat > TSRT_MAX_REPEAT ? TSRT_MAX_REPEAT : res.repeat;
  int nout = res.noutputs < 0 ? 0 : res.noutputs > TSRT_MAX_DIMS * 2 ? TSRT_MAX_DIMS * 2 : res.noutputs;
  rpc_enc_begin(rep, RPC_T_RESULT, send_out ? 6 : 5);
  rpc_enc_str(rep, "status", tsrt_status_name(res.status));
  rpc_enc_str(rep, "error", res.error);
  rpc_enc_u64(rep, "number", res.number > 0 ? (uint64_t)res.number : 0);
  rpc_enc_key(rep, "secs");
  msgpack_pack_array(&rep->pk, (size_t)nrep);
  for (int i = 0; i < nrep; i++) msgpack_pack_double(&rep->pk, res.secs[i]);
  rpc_enc_key(rep, "checksums");
  msgpack_pack_array(&rep->pk, (size_t)nout);
  for (int i = 0; i < nout; i++) msgpack_pack_uint64(&rep->pk, res.checksums[i]);
  if (send_out) rpc_enc_bin(rep, "outputs", res.outputs, res.outputs_bytes);
  tsrt_result_fini(&res);
  return;
bad:
  rpc_enc_error(rep, RPC_EPROTO, "measure: opts: %s", m->err);
  (void)f;
}

/* run_model: a model artifact (runtime/model.h) run in a forked
 * child on the inputs sent; outputs and per-run seconds come back. Every
 * field is bounded: at most 64 inputs of at most 8 dims, each input's bytes
 * equal to its dtype size times its shape (the child checks them against the
 * model), repeat <= TSRT_MAX_REPEAT. */
static void serve_run_model(server *s, rpc_msg *m, rpc_enc *rep) {
  char tok[RPC_TOKEN_LEN + 2] = "", id[32];
  const msgpack_object *items = NULL;
  uint32_t nin = 0;
  uint64_t repeat = 0, threads = 0;
  double timeout = 60;
  rpc_status st;
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == RPC_EPROTO ||
      rpc_need(m, rpc_get_str(m, NULL, "artifact", id, sizeof id), "artifact") ||
      rpc_need(m, rpc_get_array(m, NULL, "inputs", 64, &items, &nin), "inputs") ||
      rpc_get_u64(m, NULL, "repeat", TSRT_MAX_REPEAT, &repeat) == RPC_EPROTO ||
      rpc_get_u64(m, NULL, "num_threads", 4096, &threads) == RPC_EPROTO ||
      rpc_get_f64(m, NULL, "timeout_s", 0.001, 3600, &timeout) == RPC_EPROTO) {
    rpc_enc_error(rep, RPC_EPROTO, "run_model: %s", m->err);
    return;
  }
  if ((st = check_token(s, tok))) {
    rpc_enc_error(rep, st, "run_model: session token not granted");
    return;
  }
  artifact *a = find_artifact(s, id);
  if (!a || (!s->no_tracker && strcmp(a->token, tok) != 0)) {
    rpc_enc_error(rep, RPC_ENOENT, "run_model: no artifact '%s' in this session", id);
    return;
  }
  tsrt_model_io io[64];
  memset(io, 0, sizeof io);
  for (uint32_t i = 0; i < nin; i++) {
    const msgpack_object *it = &items[i], *sh = NULL;
    uint32_t nd = 0;
    uint64_t dt = 0;
    const void *p = NULL;
    size_t n = 0;
    if (it->type != MSGPACK_OBJECT_MAP ||
        rpc_need(m, rpc_get_str(m, it, "name", io[i].name, sizeof io[i].name), "name") ||
        rpc_need(m, rpc_get_u64(m, it, "dtype", TSRT_DTYPE_COUNT - 1, &dt), "dtype") ||
        rpc_need(m, rpc_get_array(m, it, "shape", TSRT_MAX_DIMS, &sh, &nd), "shape") ||
        rpc_need(m, rpc_get_bin(m, it, "data", RPC_MAX_ARTIFACT, &p, &n), "data")) {
      rpc_enc_error(rep, RPC_EPROTO, "run_model: inputs[%u]: %s", i, it->type != MSGPACK_OBJECT_MAP ? "not a map" : m->err);
      return;
    }
    uint64_t want = (uint64_t)tsrt_dtype_bytes((int)dt);
    for (uint32_t j = 0; j < nd; j++) {
      if (sh[j].type != MSGPACK_OBJECT_POSITIVE_INTEGER || sh[j].via.u64 > (1ull << 40)) {
        rpc_enc_error(rep, RPC_EPROTO, "run_model: inputs[%u].shape[%u] is not a size", i, j);
        return;
      }
      io[i].shape[j] = (int64_t)sh[j].via.u64;
      want *= sh[j].via.u64;
    }
    if (want != n || dt == TSRT_HANDLE) {
      rpc_enc_error(rep, RPC_EPROTO, "run_model: inputs[%u] (%s): %zu data bytes, the dtype and shape need %llu",
                    i, io[i].name, n, (unsigned long long)want);
      return;
    }
    io[i].dtype = (int32_t)dt;
    io[i].ndim = (int32_t)nd;
    io[i].data = (void *)p;
    io[i].nbytes = n;
  }
  pthread_mutex_lock(&s->mu);
  s->busy = true;
  pthread_mutex_unlock(&s->mu);
  tsrt_model_run_result res;
  tsrt_model_run_forked(a->path, io, (int)nin, (int)repeat, timeout, (int)threads, &res);
  pthread_mutex_lock(&s->mu);
  s->busy = false;
  pthread_mutex_unlock(&s->mu);
  size_t total = 0;
  for (int i = 0; i < res.noutputs; i++) total += res.outputs[i].nbytes;
  if (total > RPC_MAX_MSG - (1u << 20)) {
    tsrt_model_run_result_fini(&res);
    rpc_enc_error(rep, RPC_ETOOBIG, "run_model: outputs of %zu bytes do not fit a reply", total);
    return;
  }
  rpc_enc_begin(rep, RPC_T_MODEL_RESULT, 4);
  rpc_enc_str(rep, "status", tsrt_status_name(res.status));
  rpc_enc_str(rep, "error", res.error);
  rpc_enc_key(rep, "secs");
  msgpack_pack_array(&rep->pk, (size_t)res.nsecs);
  for (int i = 0; i < res.nsecs; i++) msgpack_pack_double(&rep->pk, res.secs[i]);
  rpc_enc_key(rep, "outputs");
  msgpack_pack_array(&rep->pk, (size_t)res.noutputs);
  for (int i = 0; i < res.noutputs; i++) {
    const tsrt_model_io *o = &res.outputs[i];
    msgpack_pack_map(&rep->pk, 4);
    rpc_pack_str(&rep->pk, "name");
    rpc_pack_str(&rep->pk, o->name);
    rpc_pack_str(&rep->pk, "dtype");
    msgpack_pack_uint64(&rep->pk, (uint64_t)o->dtype);
    rpc_pack_str(&rep->pk, "shape");
    msgpack_pack_array(&rep->pk, (size_t)o->ndim);
    for (int j = 0; j < o->ndim; j++) msgpack_pack_uint64(&rep->pk, (uint64_t)o->shape[j]);
    rpc_pack_str(&rep->pk, "data");
    msgpack_pack_bin(&rep->pk, o->nbytes);
    msgpack_pack_bin_body(&rep->pk, o->data, o->nbytes);
  }
  tsrt_model_run_result_fini(&res);
}

static void serve_close(server *s, rpc_msg *m, rpc_enc *rep) {
  char tok[RPC_TOKEN_LEN + 2] = "";
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == RPC_EPROTO) {
    rpc_enc_error(rep, RPC_EPROTO, "close: %s", m->err);
    return;
  }
  for (int i = s->narts - 1; i >= 0; i--)
    if (strcmp(s->arts[i].token, tok) == 0) drop_artifact(s, i);
  rpc_enc_begin(rep, RPC_T_OK, 0);
}

static void serve(server *s, rpc_msg *m, nng_pipe p, rpc_enc *rep) {
  if (rpc_authtab_handle(&s->auth, m, p, rep)) return;
  switch (m->type) {
  case RPC_T_INFO:
    rpc_enc_begin(rep, RPC_T_INFO_REPLY, 2);
    rpc_enc_str(rep, "key", s->key);
    rpc_enc_key(rep, "info");
    pack_info(&rep->pk);
    break;
  case RPC_T_UPLOAD: serve_upload(s, m, rep); break;
  case RPC_T_MEASURE: serve_measure(s, m, rep); break;
  case RPC_T_CLOSE: serve_close(s, m, rep); break;
  case RPC_T_RUN_MODEL: serve_run_model(s, m, rep); break;
  default:
    rpc_enc_error(rep, RPC_EPROTO, "'%s' is not a request rpc_server serves",
                  rpc_type_name(m->type));
  }
}

/* ---- main ----------------------------------------------------------------- */
static int usage(FILE *f) {
  fprintf(f,
          "usage: tessel-rpc-server --tracker HOST:PORT --key KEY [--port P] [--host H]\n"
          "                         [--advertise tcp://ADDR:PORT] [--secret-file FILE]\n"
          "       tessel-rpc-server --no-tracker [--port P] [--host H] [--secret-file FILE]\n"
          "Measures uploaded kernels for tuners granted a session by the tracker.\n"
          "  --port P        listen port (default: first free of %d..%d; 0: any free\n"
          "                  port the system picks, printed and registered)\n"
          "  --host H        listen address (default 0.0.0.0)\n"
          "  --advertise A   address registered with the tracker (default: the local\n"
          "                  address that reaches the tracker, with the port)\n"
          "  --secret-file F shared secret (or $" RPC_SECRET_ENV "; >= %d bytes)\n"
          "  --no-tracker    serve any authenticated client (tests, direct use)\n",
          RPC_SERVER_PORT_FIRST, RPC_SERVER_PORT_LAST, RPC_SECRET_MIN);
  return f == stdout ? 0 : 2;
}

int rpc_server_main(int argc, char **argv) {
  static server S; /* one server per process (signals) */
  server *s = &S;
  memset(s, 0, sizeof *s);
  snprintf(s->host, sizeof s->host, "0.0.0.0");
  const char *secret_file = NULL;
  bool port_given = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && (v ? (i++, 1) : (fprintf(stderr, "%s needs a value\n", name), exit(2), 0)))
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
    else if (!strcmp(a, "--no-tracker")) s->no_tracker = true;
    else if (OPT("--tracker")) snprintf(s->tracker, sizeof s->tracker, "%s", v);
    else if (OPT("--key")) snprintf(s->key, sizeof s->key, "%s", v);
    else if (OPT("--host")) snprintf(s->host, sizeof s->host, "%s", v);
    else if (OPT("--advertise")) snprintf(s->advertise, sizeof s->advertise, "%s", v);
    else if (OPT("--secret-file")) secret_file = v;
    else if (OPT("--port")) {
      char *end;
      long p = strtol(v, &end, 10);
      if (*end || end == v || p < 0 || p > 65535) {
        fprintf(stderr, "tessel-rpc-server: bad --port '%s'\n", v);
        return 2;
      }
      s->port = (int)p;
      port_given = true;
    } else {
      fprintf(stderr, "tessel-rpc-server: unknown argument '%s'\n", a);
      return usage(stderr);
    }
#undef OPT
  }
  if (!s->no_tracker && (!s->tracker[0] || !s->key[0])) {
    fprintf(stderr, "tessel-rpc-server: --tracker HOST:PORT and --key KEY are required "
                    "(or --no-tracker)\n");
    return usage(stderr);
  }
  if (!s->key[0]) snprintf(s->key, sizeof s->key, "local");
  char err[512];
  if (rpc_secret_load(&s->secret, secret_file, err, sizeof err)) {
    fprintf(stderr, "tessel-rpc-server: %s\n", err);
    return 2;
  }
  int rv = nng_rep0_open(&s->sock);
  if (rv) {
    fprintf(stderr, "tessel-rpc-server: nng_rep0_open: %s\n", nng_strerror(rv));
    return 1;
  }
  rpc_socket_limits(s->sock);
  nng_socket_set_ms(s->sock, NNG_OPT_RECVTIMEO, 100);
  nng_socket_set_ms(s->sock, NNG_OPT_SENDTIMEO, 5000);
  rpc_authtab_init(&s->auth, s->sock, &s->secret);
  char url[RPC_MAX_ADDR + 32];
  int first = port_given ? s->port : RPC_SERVER_PORT_FIRST;
  int last = port_given ? s->port : RPC_SERVER_PORT_LAST;
  rv = NNG_EADDRINUSE;
  for (int p = first; p <= last && rv; p++) {
    nng_listener l;
    snprintf(url, sizeof url, "tcp://%.200s:%d", s->host, p);
    rv = nng_listen(s->sock, url, &l, 0);
    if (rv == 0) {
      /* port 0: the system picked one; read it back so the tracker gets it */
      int bound = p;
      if (p == 0 && nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &bound) != 0) bound = 0;
      s->port = bound;
      if (!bound) rv = NNG_EINTERNAL;
    } else if (rv != NNG_EADDRINUSE) break;
  }
  if (rv) {
    fprintf(stderr, "tessel-rpc-server: cannot listen on tcp://%s:%d..%d: %s\n", s->host, first,
            last, nng_strerror(rv));
    nng_close(s->sock);
    rpc_authtab_fini(&s->auth);
    return 1;
  }
  snprintf(s->dir, sizeof s->dir, "%.200s/tessel-rpc-XXXXXX",
           getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(s->dir)) {
    fprintf(stderr, "tessel-rpc-server: mkdtemp %s: %s\n", s->dir, strerror(errno));
    nng_close(s->sock);
    rpc_authtab_fini(&s->auth);
    return 1;
  }
  memcpy(g_dir, s->dir, sizeof g_dir);
  pthread_mutex_init(&s->mu, NULL);
  g_stop = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  fprintf(stderr, "rpc-server: listening on tcp://%s:%d (key '%s'%s)\n", s->host, s->port, s->key,
          s->no_tracker ? ", no tracker" : "");
  if (!s->no_tracker) {
    if (pthread_create(&s->trk_thread, NULL, tracker_thread, s) == 0) s->trk_started = true;
  }
  while (!g_stop) {
    rpc_msg m;
    nng_pipe p = NNG_PIPE_INITIALIZER;
    rpc_status st = rpc_recv(s->sock, &m, &p);
    if (st == RPC_ETIMEDOUT) continue;
    rpc_enc rep;
    if (st == RPC_EIO) {
      if (g_stop) break;
      nap_ms(10);
      continue;
    }
    if (st) {
      /* garbage: an error reply, then on with the next request */
      rpc_enc_error(&rep, st, "%s", m.err);
    } else {
      serve(s, &m, p, &rep);
    }
    rpc_msg_fini(&m);
    rpc_send(s->sock, &rep);
  }
  fprintf(stderr, "rpc-server: stopping\n");
  if (s->trk_started) pthread_join(s->trk_thread, NULL);
  nng_close(s->sock);
  rpc_authtab_fini(&s->auth);
  for (int i = s->narts - 1; i >= 0; i--) drop_artifact(s, i);
  rm_dir(s->dir);
  pthread_mutex_destroy(&s->mu);
  rpc_secret_wipe(&s->secret);
  return 0;
}
