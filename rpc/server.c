/* server.c — rpc_server (server.h): option parsing, the REP serving loop,
 * artifact storage, forked measurement and device info. Registration with
 * the tracker is the registrar the binary's main passes in (the tracker
 * client, tracker/tracker_client.c); this file does not include tracker/. */
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
#include "rpc/pipe_drop.h"
#include "rpc/protocol.h"

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include "tessel_config.h"

typedef struct artifact {
  char id[16];
  char path[512];
  char token[RPC_TOKEN_LEN + 1];
} artifact;

/* A request arriving in parts (protocol.h, RPC_T_PART) on one connection. */
typedef struct assembly {
  uint32_t pipe;     /* 0: a free slot */
  uint8_t *buf;
  size_t len, total;
  uint64_t next;     /* the part expected next */
  int64_t last_ms;
} assembly;
#define MAX_ASSEMBLIES 4      /* requests in parts at once (the connections of distinct clients) */
#define ASSEMBLY_IDLE_MS 60000 /* a request left half-sent this long makes room */

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
  nng_listener listener;
  rpc_authtab auth;
  char dir[256];
  artifact arts[RPC_SERVER_MAX_ARTIFACTS];
  int narts;
  uint64_t next_art;
  const rpc_server_registrar *reg;
  void *regh; /* the registration (NULL with --no-tracker) */
  assembly parts[MAX_ASSEMBLIES];
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

static artifact *find_artifact(server *s, const char *id);

/* ---- tokens ---------------------------------------------------------------- */
/* TS_OK: may proceed; TS_EPENDING: unknown (maybe not heard yet); TS_EDENIED. */
static ts_status check_token(server *s, const char *tok) {
  if (s->no_tracker) return TS_OK;
  if (!rpc_token_valid(tok)) return TS_EDENIED;
  return s->regh ? s->reg->check_token(s->regh, tok) : TS_EPENDING;
}

static void set_busy(server *s, bool busy) {
  if (s->regh) s->reg->set_busy(s->regh, busy);
}

/* The artifact `id` of the session `tok`, or NULL after an error reply. */
static artifact *session_artifact(server *s, const char *what, const char *tok, const char *id, rpc_enc *rep) {
  ts_status st = check_token(s, tok);
  if (st) {
    rpc_enc_error(rep, st, "%s: session token not granted", what);
    return NULL;
  }
  artifact *a = find_artifact(s, id);
  if (!a || (!s->no_tracker && strcmp(a->token, tok) != 0)) {
    rpc_enc_error(rep, TS_ENOTFOUND, "%s: no artifact '%s' in this session", what, id);
    return NULL;
  }
  return a;
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
  ts_status st;
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == TS_EPROTO ||
      (st = rpc_need(m, rpc_get_str(m, NULL, "name", name, sizeof name), "name")) ||
      (st = rpc_need(m, rpc_get_bin(m, NULL, "data", RPC_MAX_ARTIFACT, &data, &n), "data"))) {
    rpc_enc_error(rep, TS_EPROTO, "upload: %s", m->err);
    return;
  }
  if ((st = check_token(s, tok))) {
    rpc_enc_error(rep, st, "upload: %s", st == TS_EPENDING ?
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
    rpc_enc_error(rep, TS_ESYSTEM, "upload: cannot store the artifact: %s", strerror(errno));
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
  ts_status st;
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == TS_EPROTO ||
      (st = rpc_need(m, rpc_get_str(m, NULL, "artifact", id, sizeof id), "artifact")) ||
      rpc_get_map(m, NULL, "opts", &o) == TS_EPROTO) {
    rpc_enc_error(rep, TS_EPROTO, "measure: %s", m->err);
    return;
  }
  artifact *a = session_artifact(s, "measure", tok, id, rep);
  if (!a) return;
  tsrt_measure_opts opts = {.number = 0, .repeat = 3, .timeout_s = 10};
  uint64_t u;
  double d;
  bool b;
  const char *f = NULL;
#define GETU(name, max, dst)                                                     \
  if ((st = rpc_get_u64(m, o, f = name, max, &u)) == TS_OK) dst = (int)u;      \
  else if (st != TS_ENOTFOUND) goto bad
#define GETF(name, lo, hi, dst)                                                  \
  if ((st = rpc_get_f64(m, o, f = name, lo, hi, &d)) == TS_OK) dst = d;        \
  else if (st != TS_ENOTFOUND) goto bad
#define GETB(name, dst)                                                          \
  if ((st = rpc_get_bool(m, o, f = name, &b)) == TS_OK) dst = b;               \
  else if (st != TS_ENOTFOUND) goto bad
  if (o) {
    GETU("number", 1000000, opts.number);
    GETU("repeat", TSRT_MAX_REPEAT, opts.repeat);
    GETF("min_repeat_ms", 0, 600000, opts.min_repeat_ms);
    GETB("cache_flush", opts.cache_flush);
    GETF("cooldown_ms", 0, 60000, opts.cooldown_ms);
    GETF("timeout_s", 0.001, 3600, opts.timeout_s);
    GETB("want_outputs", opts.want_outputs);
    GETU("num_threads", 4096, opts.num_threads);
    if ((st = rpc_get_u64(m, o, f = "seed", UINT64_MAX, &u)) == TS_OK) opts.seed = u;
    else if (st != TS_ENOTFOUND) goto bad;
  }
#undef GETU
#undef GETF
#undef GETB
  if (opts.repeat < 1) opts.repeat = 1;
  set_busy(s, true);
  tsrt_measure_result res;
  memset(&res, 0, sizeof res);
  tsrt_measure_forked(a->path, &opts, &res);
  set_busy(s, false);
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
  rpc_enc_error(rep, TS_EPROTO, "measure: opts: %s", m->err);
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
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == TS_EPROTO ||
      rpc_need(m, rpc_get_str(m, NULL, "artifact", id, sizeof id), "artifact") ||
      rpc_need(m, rpc_get_array(m, NULL, "inputs", 64, &items, &nin), "inputs") ||
      rpc_get_u64(m, NULL, "repeat", TSRT_MAX_REPEAT, &repeat) == TS_EPROTO ||
      rpc_get_u64(m, NULL, "num_threads", 4096, &threads) == TS_EPROTO ||
      rpc_get_f64(m, NULL, "timeout_s", 0.001, 3600, &timeout) == TS_EPROTO) {
    rpc_enc_error(rep, TS_EPROTO, "run_model: %s", m->err);
    return;
  }
  artifact *a = session_artifact(s, "run_model", tok, id, rep);
  if (!a) return;
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
      rpc_enc_error(rep, TS_EPROTO, "run_model: inputs[%u]: %s", i, it->type != MSGPACK_OBJECT_MAP ? "not a map" : m->err);
      return;
    }
    uint64_t want = (uint64_t)tsrt_dtype_bytes((int)dt);
    for (uint32_t j = 0; j < nd; j++) {
      if (sh[j].type != MSGPACK_OBJECT_POSITIVE_INTEGER || sh[j].via.u64 > (1ull << 40)) {
        rpc_enc_error(rep, TS_EPROTO, "run_model: inputs[%u].shape[%u] is not a size", i, j);
        return;
      }
      io[i].shape[j] = (int64_t)sh[j].via.u64;
      want *= sh[j].via.u64;
    }
    if (want != n || dt == TSRT_HANDLE) {
      rpc_enc_error(rep, TS_EPROTO, "run_model: inputs[%u] (%s): %zu data bytes, the dtype and shape need %llu",
                    i, io[i].name, n, (unsigned long long)want);
      return;
    }
    io[i].dtype = (int32_t)dt;
    io[i].ndim = (int32_t)nd;
    io[i].data = (void *)p;
    io[i].nbytes = n;
  }
  set_busy(s, true);
  tsrt_model_run_result res;
  tsrt_model_run_forked(a->path, io, (int)nin, (int)repeat, timeout, (int)threads, &res);
  set_busy(s, false);
  size_t total = 0;
  for (int i = 0; i < res.noutputs; i++) total += res.outputs[i].nbytes;
  if (total > RPC_MAX_MSG - (1u << 20)) {
    tsrt_model_run_result_fini(&res);
    rpc_enc_error(rep, TS_ETOOBIG, "run_model: outputs of %zu bytes do not fit a reply", total);
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
  if (rpc_get_str(m, NULL, "token", tok, sizeof tok) == TS_EPROTO) {
    rpc_enc_error(rep, TS_EPROTO, "close: %s", m->err);
    return;
  }
  for (int i = s->narts - 1; i >= 0; i--)
    if (strcmp(s->arts[i].token, tok) == 0) drop_artifact(s, i);
  rpc_enc_begin(rep, RPC_T_OK, 0);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void assembly_free(assembly *a) {
  ts_free(a->buf);
  memset(a, 0, sizeof *a);
}

/* The slot for a new request in parts from pipe p: its own (restarted), a
 * free one, or one whose connection is gone or idle; NULL when all are busy. */
static assembly *assembly_slot(server *s, nng_pipe p, int64_t now) {
  assembly *freeslot = NULL;
  for (int i = 0; i < MAX_ASSEMBLIES; i++) {
    assembly *a = &s->parts[i];
    if (a->pipe == (uint32_t)nng_pipe_id(p)) {
      assembly_free(a);
      return a;
    }
    if (a->pipe) {
      nng_pipe q = NNG_PIPE_INITIALIZER;
      q.id = a->pipe;
      if (!rpc_authtab_authed(&s->auth, q) || now - a->last_ms > ASSEMBLY_IDLE_MS) assembly_free(a);
    }
    if (!a->pipe && !freeslot) freeslot = a;
  }
  return freeslot;
}

/* One part of a request (only an authenticated pipe gets here). Returns
 * true with the whole request decoded into *whole after its last part;
 * false with rep begun: ok (more parts to come) or an error. */
static bool take_part(server *s, rpc_msg *m, nng_pipe p, rpc_enc *rep, rpc_msg *whole) {
  uint64_t seq, total;
  const void *data;
  size_t n;
  ts_status st;
  if ((st = rpc_need(m, rpc_get_u64(m, NULL, "seq", UINT64_MAX, &seq), "seq")) ||
      (st = rpc_need(m, rpc_get_u64(m, NULL, "total", RPC_MAX_MSG, &total), "total")) ||
      (st = rpc_need(m, rpc_get_bin(m, NULL, "data", RPC_PART_MAX, &data, &n), "data"))) {
    rpc_enc_error(rep, st, "part: %s", m->err);
    return false;
  }
  int64_t now = mono_ms();
  assembly *a = NULL;
  for (int i = 0; i < MAX_ASSEMBLIES && !a; i++)
    if (s->parts[i].pipe == (uint32_t)nng_pipe_id(p)) a = &s->parts[i];
  if (seq == 0) {
    if (!(a = assembly_slot(s, p, now))) {
      rpc_enc_error(rep, TS_ETOOBIG, "part: %d requests in parts are being received already; retry", MAX_ASSEMBLIES);
      return false;
    }
    if (total <= RPC_PART_MAX || !(a->buf = ts_malloc(total))) {
      rpc_enc_error(rep, total <= RPC_PART_MAX ? TS_EPROTO : TS_ENOMEM,
                    total <= RPC_PART_MAX ? "part: a request of %llu bytes is sent whole" : "part: no memory for %llu bytes",
                    (unsigned long long)total);
      return false;
    }
    a->pipe = (uint32_t)nng_pipe_id(p);
    a->total = (size_t)total;
  } else if (!a || seq != a->next || total != a->total) {
    if (a) assembly_free(a);
    rpc_enc_error(rep, TS_EPROTO, "part %llu of %llu bytes out of order: start again with part 0",
                  (unsigned long long)seq, (unsigned long long)total);
    return false;
  }
  if (n > a->total - a->len) {
    assembly_free(a);
    rpc_enc_error(rep, TS_EPROTO, "part %llu: %zu bytes do not fit the %llu announced", (unsigned long long)seq, n,
                  (unsigned long long)total);
    return false;
  }
  memcpy(a->buf + a->len, data, n);
  a->len += n;
  a->next++;
  a->last_ms = now;
  if (a->len < a->total) {
    rpc_enc_begin(rep, RPC_T_OK, 0);
    return false;
  }
  st = rpc_msg_decode_owned(whole, a->buf, a->len); /* takes the buffer, also on failure */
  a->buf = NULL;
  assembly_free(a);
  if (st != TS_OK) {
    rpc_enc_error(rep, st, "%s", whole->err);
    rpc_msg_fini(whole);
    return false;
  }
  return true;
}

static void serve_request(server *s, rpc_msg *m, rpc_enc *rep);

static void serve(server *s, rpc_msg *m, nng_pipe p, rpc_enc *rep) {
  if (rpc_authtab_handle(&s->auth, m, p, rep)) return;
  if (m->type != RPC_T_PART) {
    serve_request(s, m, rep);
    return;
  }
  rpc_msg whole;
  if (!take_part(s, m, p, rep, &whole)) return;
  if (whole.type == RPC_T_PART) rpc_enc_error(rep, TS_EPROTO, "a part inside a part");
  else serve_request(s, &whole, rep);
  rpc_msg_fini(&whole);
}

/* An authenticated, whole request. */
static void serve_request(server *s, rpc_msg *m, rpc_enc *rep) {
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
    rpc_enc_error(rep, TS_EPROTO, "'%s' is not a request rpc_server serves",
                  rpc_type_name(m->type));
  }
}

/* Starts the registrar: the advertised address, else the listen host when
 * it is not the wildcard, else the local address toward the tracker. */
static void start_registration(server *s) {
  char addr[RPC_MAX_ADDR + 32] = "";
  if (s->advertise[0])
    snprintf(addr, sizeof addr, "%s", s->advertise);
  else if (s->host[0] && strcmp(s->host, "0.0.0.0") != 0)
    snprintf(addr, sizeof addr, "tcp://%.200s:%d", s->host, s->port);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_info(&pk);
  rpc_server_announce a = {.tracker = s->tracker, .key = s->key, .address = addr[0] ? addr : NULL,
                           .secret = &s->secret, .port = s->port, .info = sb.data, .info_len = sb.size,
                           .log = "rpc-server"};
  s->regh = s->reg->start(&a);
  msgpack_sbuffer_destroy(&sb);
}

/* nng 1.5.2's reaper wedges when a pipe is closed under a message that is
 * arriving (docs/RPC.md on nng 1.5.2, rpc/pipe_drop.h), as a close of the
 * socket under a flood of connections does: new pipes are refused and every
 * pipe is dropped by TCP disconnect first, then the listener and the socket
 * close in a thread; the server gives up after RPC_CLOSE_WAIT_MS and exits
 * all the same. Returns false when it gave up (the pipe table must then
 * stay: nng may still call back into it). */
static bool close_socket(server *s) {
  rpc_authtab_drop_all(&s->auth, RPC_DROP_WAIT_MS);
  return rpc_socket_close(s->sock, s->listener, RPC_CLOSE_WAIT_MS, "rpc-server");
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
          "  --host H        listen address (default 127.0.0.1: loopback only;\n"
          "                  --host 0.0.0.0 for every interface)\n"
          "  --advertise A   address registered with the tracker (default: the local\n"
          "                  address that reaches the tracker, with the port)\n"
          "  --secret-file F shared secret (or $" RPC_SECRET_ENV "; >= %d bytes, mode 600;\n"
          "                  umask 077; head -c 32 /dev/urandom > ~/.tessel-secret)\n"
          "  --no-tracker    serve any authenticated client (tests, direct use)\n",
          RPC_SERVER_PORT_FIRST, RPC_SERVER_PORT_LAST, RPC_SECRET_MIN);
  return f == stdout ? 0 : 2;
}

int rpc_server_main(int argc, char **argv, const rpc_server_registrar *reg) {
  static server S; /* one server per process (signals) */
  server *s = &S;
  memset(s, 0, sizeof *s);
  snprintf(s->host, sizeof s->host, "127.0.0.1"); /* loopback unless --host */
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
  if (!s->no_tracker && !reg) {
    fprintf(stderr, "tessel-rpc-server: built without a tracker client: use --no-tracker\n");
    return 2;
  }
  s->reg = reg;
  ts_diag d = {0};
  if (rpc_secret_load(&s->secret, secret_file, &d)) {
    fprintf(stderr, "tessel-rpc-server: %s\n", d.msg);
    return 2;
  }
  int rv = nng_rep0_open(&s->sock);
  if (rv) {
    fprintf(stderr, "tessel-rpc-server: nng_rep0_open: %s\n", nng_strerror(rv));
    return 1;
  }
  /* nng allocates a message's declared size before authentication could
   * refuse it: whole requests are small, big ones come in parts */
  nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RPC_SERVER_RECV_MAX);
  nng_socket_set_ms(s->sock, NNG_OPT_RECVTIMEO, 100);
  nng_socket_set_ms(s->sock, NNG_OPT_SENDTIMEO, 5000);
  if (rpc_authtab_init(&s->auth, s->sock, &s->secret) != TS_OK) {
    fprintf(stderr, "tessel-rpc-server: cannot set up authentication\n");
    nng_close(s->sock);
    return 1;
  }
  rpc_authtab_bounds(&s->auth, 0, 0, 0, "rpc-server");
  char url[RPC_MAX_ADDR + 32];
  int first = port_given ? s->port : RPC_SERVER_PORT_FIRST;
  int last = port_given ? s->port : RPC_SERVER_PORT_LAST;
  rv = NNG_EADDRINUSE;
  for (int p = first; p <= last && rv; p++) {
    nng_listener l;
    snprintf(url, sizeof url, "tcp://%.200s:%d", s->host, p);
    rv = nng_listen(s->sock, url, &l, 0);
    if (rv == 0) {
      s->listener = l;
      /* port 0: the system picked one; read it back so the tracker gets it */
      int bound = p;
      if (p == 0 && nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &bound) != 0) bound = 0;
      s->port = bound;
      if (!bound) rv = NNG_EINTERNAL;
      if (!rv && !rpc_listener_backlog(l, RPC_LISTEN_BACKLOG))
        fprintf(stderr, "tessel-rpc-server: could not raise the listen backlog of %s above nng's 128\n", url);
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
  g_stop = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  fprintf(stderr, "rpc-server: listening on tcp://%s:%d (key '%s'%s)\n", s->host, s->port, s->key,
          s->no_tracker ? ", no tracker" : "");
  if (!s->no_tracker) start_registration(s);
  while (!g_stop) {
    nng_msg *in = NULL;
    rv = nng_recvmsg(s->sock, &in, 0);
    if (rv == NNG_ETIMEDOUT) continue;
    if (rv) {
      if (g_stop) break;
      nap_ms(10);
      continue;
    }
    nng_pipe p = nng_msg_get_pipe(in);
    rpc_msg m;
    bool dropped = false;
    ts_status st = rpc_authtab_open(&s->auth, p, nng_msg_body(in), nng_msg_len(in), &m, &dropped);
    nng_msg_free(in);
    if (dropped) continue; /* refused and closed: nothing to answer */
    rpc_enc rep;
    if (st) {
      /* garbage: an error reply, then on with the next request */
      rpc_enc_error(&rep, st, "%s", m.err);
    } else {
      serve(s, &m, p, &rep);
    }
    rpc_msg_fini(&m);
    nng_msg *out = rpc_authtab_seal(&s->auth, p, &rep);
    if (out && nng_sendmsg(s->sock, out, 0) != 0) nng_msg_free(out);
  }
  fprintf(stderr, "rpc-server: stopping\n");
  if (s->regh) s->reg->stop(s->regh); /* deregisters */
  for (int i = s->narts - 1; i >= 0; i--) drop_artifact(s, i);
  for (int i = 0; i < MAX_ASSEMBLIES; i++) assembly_free(&s->parts[i]);
  rm_dir(s->dir);
  if (close_socket(s)) rpc_authtab_fini(&s->auth);
  rpc_secret_wipe(&s->secret);
  return 0;
}
