/* client.c — rpc_server's client (client.h). Every call is one REQ/REP round
 * trip over the secure channel (auth.h); if the connection was
 * re-established underneath (nng REQ redials and resends) the new pipe is
 * unauthenticated, so a reply of code "auth" triggers one fresh handshake
 * and one retry. A reply of "pending" (the
 * tracker's grant has not reached the server yet) is retried for up to 3 s. */
#include "rpc/client.h"
#include "rpc/pipe_drop.h"

#include <nng/protocol/reqrep0/req.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Builds the request with build(), calls, re-authenticates once on "auth",
 * retries on "pending". */
typedef void (*build_fn)(rpc_enc *e, const void *arg);

static ts_status call(rpc_client *c, build_fn build, const void *arg, double timeout_s,
                      rpc_msg *reply, ts_diag *d) {
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(timeout_s * 1000));
  bool reauthed = false;
  for (int tries = 0;; tries++) {
    rpc_enc e;
    build(&e, arg);
    ts_status st = rpc_chan_call(c->sock, &c->chan, &e, reply, NULL, d);
    if (st == TS_EAUTH && !c->chan.up && !reauthed) {
      reauthed = true;
      nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(c->timeout_s * 1000));
      st = rpc_auth_client(c->sock, &c->secret, "client", &c->chan, d);
      nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(timeout_s * 1000));
      if (st) return st;
      continue;
    }
    if (st == TS_EPENDING && tries < 30) {
      nap_ms(100);
      continue;
    }
    return st;
  }
}

ts_status rpc_client_open(rpc_client **out, const char *addr, const rpc_secret *secret,
                           const char *token, double timeout_s, ts_diag *d) {
  *out = NULL;
  rpc_client *c = ts_calloc(1, sizeof *c);
  if (!c) {
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  c->secret = *secret;
  c->timeout_s = timeout_s > 0 ? timeout_s : 10;
  snprintf(c->addr, sizeof c->addr, "%s", addr);
  snprintf(c->token, sizeof c->token, "%s", token ? token : "");
  int rv = nng_req0_open(&c->sock);
  if (rv) {
    ts_diag_set(d, TS_EIO, "nng_req0_open: %s", nng_strerror(rv));
    ts_free(c);
    return TS_EIO;
  }
  if (!(c->pipes = rpc_pipeset_watch(c->sock, d))) {
    nng_close(c->sock); /* no pipe yet */
    ts_free(c);
    return TS_EIO;
  }
  rpc_socket_limits(c->sock);
  /* measurements may take long: never resend a request behind our back */
  nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, (nng_duration)(c->timeout_s * 1000));
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(c->timeout_s * 1000));
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 10);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 1000);
  double t0 = tsrt_now();
  for (;;) {
    rv = nng_dial(c->sock, addr, NULL, 0);
    if (rv == 0) break;
    if ((rv != NNG_ECONNREFUSED && rv != NNG_ETIMEDOUT && rv != NNG_ECONNRESET) ||
        tsrt_now() - t0 > c->timeout_s) {
      rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "rpc client");
      ts_free(c);
      return ts_diag_set(d, rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? TS_EPROTO : TS_EIO, "dial %s: %s",
                         addr, nng_strerror(rv));
    }
    nap_ms(50);
  }
  ts_status st = rpc_auth_client(c->sock, &c->secret, "client", &c->chan, d);
  if (st) {
    rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "rpc client");
    rpc_secret_wipe(&c->secret);
    rpc_chan_wipe(&c->chan);
    ts_free(c);
    return st;
  }
  *out = c;
  return TS_OK;
}

static void build_close(rpc_enc *e, const void *arg) {
  const rpc_client *c = arg;
  rpc_enc_begin(e, RPC_T_CLOSE, 1);
  rpc_enc_str(e, "token", c->token);
}

void rpc_client_close(rpc_client *c) {
  if (!c) return;
  rpc_msg r;
  if (call(c, build_close, c, 2, &r, NULL) == TS_OK) rpc_msg_fini(&r);
  /* pipes dropped first, the close bounded (rpc/pipe_drop.h) */
  rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "rpc client");
  rpc_secret_wipe(&c->secret);
  rpc_chan_wipe(&c->chan);
  ts_free(c);
}

static void build_info(rpc_enc *e, const void *arg) {
  (void)arg;
  rpc_enc_begin(e, RPC_T_INFO, 0);
}

ts_status rpc_client_info(rpc_client *c, rpc_msg *reply, ts_diag *d) {
  ts_status st = call(c, build_info, NULL, c->timeout_s, reply, d);
  if (st == TS_OK && reply->type != RPC_T_INFO_REPLY) {
    rpc_msg_fini(reply);
    ts_diag_set(d, TS_EPROTO, "info: unexpected reply");
    return TS_EPROTO;
  }
  return st;
}

typedef struct upload_arg {
  const rpc_client *c;
  const char *name;
  const void *data;
  size_t n;
} upload_arg;

static void build_upload(rpc_enc *e, const void *arg) {
  const upload_arg *u = arg;
  rpc_enc_begin(e, RPC_T_UPLOAD, 3);
  rpc_enc_str(e, "token", u->c->token);
  rpc_enc_str(e, "name", u->name);
  rpc_enc_bin(e, "data", u->data, u->n);
}

ts_status rpc_client_upload_bytes(rpc_client *c, const char *name, const void *data, size_t n,
                                   char *id, size_t idn, ts_diag *d) {
  if (n > RPC_MAX_ARTIFACT) {
    ts_diag_set(d, TS_ETOOBIG, "artifact of %zu bytes exceeds %u", n, RPC_MAX_ARTIFACT);
    return TS_ETOOBIG;
  }
  upload_arg u = {c, name, data, n};
  rpc_msg r;
  ts_status st = call(c, build_upload, &u, c->timeout_s + (double)n / 1e6, &r, d);
  if (st) return st;
  if (r.type != RPC_T_UPLOADED || rpc_need(&r, rpc_get_str(&r, NULL, "artifact", id, idn),
                                           "artifact")) {
    ts_diag_set(d, TS_EPROTO, "upload: unexpected reply (%s)", r.err);
    st = TS_EPROTO;
  }
  rpc_msg_fini(&r);
  return st;
}

ts_status rpc_client_upload(rpc_client *c, const char *path, char *id, size_t idn, ts_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    ts_diag_set(d, TS_ESYSTEM, "%s: %s", path, strerror(errno));
    return TS_ESYSTEM;
  }
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (sz < 0 || (unsigned long)sz > RPC_MAX_ARTIFACT) {
    fclose(f);
    ts_diag_set(d, TS_ETOOBIG, "%s: size %ld not in [0, %u]", path, sz, RPC_MAX_ARTIFACT);
    return TS_ETOOBIG;
  }
  void *buf = ts_malloc(sz ? (size_t)sz : 1);
  if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
    fclose(f);
    ts_free(buf);
    ts_diag_set(d, TS_ESYSTEM, "%s: read failed", path);
    return TS_ESYSTEM;
  }
  fclose(f);
  const char *base = strrchr(path, '/');
  ts_status st = rpc_client_upload_bytes(c, base ? base + 1 : path, buf, (size_t)sz, id, idn, d);
  ts_free(buf);
  return st;
}

typedef struct measure_arg {
  const rpc_client *c;
  const char *id;
  const tsrt_measure_opts *o;
} measure_arg;

static void build_measure(rpc_enc *e, const void *arg) {
  const measure_arg *m = arg;
  const tsrt_measure_opts *o = m->o;
  rpc_enc_begin(e, RPC_T_MEASURE, 3);
  rpc_enc_str(e, "token", m->c->token);
  rpc_enc_str(e, "artifact", m->id);
  rpc_enc_key(e, "opts");
  msgpack_packer *pk = &e->pk;
  msgpack_pack_map(pk, 9);
  rpc_pack_str(pk, "number"), msgpack_pack_uint32(pk, (uint32_t)(o->number > 0 ? o->number : 0));
  rpc_pack_str(pk, "repeat"), msgpack_pack_uint32(pk, (uint32_t)(o->repeat > 0 ? o->repeat : 3));
  rpc_pack_str(pk, "min_repeat_ms"), msgpack_pack_double(pk, o->min_repeat_ms);
  rpc_pack_str(pk, "cache_flush"), o->cache_flush ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  rpc_pack_str(pk, "cooldown_ms"), msgpack_pack_double(pk, o->cooldown_ms);
  rpc_pack_str(pk, "timeout_s"), msgpack_pack_double(pk, o->timeout_s > 0 ? o->timeout_s : 10);
  rpc_pack_str(pk, "seed"), msgpack_pack_uint64(pk, o->seed);
  rpc_pack_str(pk, "want_outputs"), o->want_outputs ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
  rpc_pack_str(pk, "num_threads"), msgpack_pack_uint32(pk, (uint32_t)(o->num_threads > 0 ? o->num_threads : 0));
}

ts_status rpc_client_measure(rpc_client *c, const char *id, const tsrt_measure_opts *opts,
                              tsrt_measure_result *res, ts_diag *d) {
  memset(res, 0, sizeof *res);
  measure_arg a = {c, id, opts};
  double budget = (opts->timeout_s > 0 ? opts->timeout_s : 10) + c->timeout_s + 5;
  rpc_msg r;
  ts_status st = call(c, build_measure, &a, budget, &r, d);
  if (st) return st;
  char status[32];
  const msgpack_object *secs = NULL, *sums = NULL;
  uint32_t nsecs = 0, nsums = 0;
  uint64_t number = 0;
  st = TS_EPROTO;
  if (r.type != RPC_T_RESULT ||
      rpc_need(&r, rpc_get_str(&r, NULL, "status", status, sizeof status), "status") ||
      rpc_get_str(&r, NULL, "error", res->error, sizeof res->error) > TS_ENOTFOUND ||
      rpc_get_u64(&r, NULL, "number", INT32_MAX, &number) > TS_ENOTFOUND ||
      rpc_need(&r, rpc_get_array(&r, NULL, "secs", TSRT_MAX_REPEAT, &secs, &nsecs), "secs") ||
      rpc_need(&r, rpc_get_array(&r, NULL, "checksums", TSRT_MAX_DIMS * 2, &sums, &nsums),
               "checksums")) {
    ts_diag_set(d, st, "measure: bad reply: %s", r.err);
    goto out;
  }
  res->status = tsrt_status_from_name(status);
  res->number = (int)number;
  res->repeat = (int)nsecs;
  for (uint32_t i = 0; i < nsecs; i++) {
    const msgpack_object *o = &secs[i];
    if (o->type != MSGPACK_OBJECT_FLOAT64 && o->type != MSGPACK_OBJECT_FLOAT32) {
      ts_diag_set(d, st, "measure: secs[%u] is not a float", i);
      goto out;
    }
    res->secs[i] = o->via.f64;
  }
  res->noutputs = (int)nsums;
  for (uint32_t i = 0; i < nsums; i++) {
    if (sums[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
      ts_diag_set(d, st, "measure: checksums[%u] is not an unsigned integer", i);
      goto out;
    }
    res->checksums[i] = sums[i].via.u64;
  }
  const void *outp;
  size_t outn;
  if (rpc_get_bin(&r, NULL, "outputs", RPC_MAX_MSG, &outp, &outn) == TS_OK && outn) {
    res->outputs = ts_malloc(outn);
    if (!res->outputs) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      goto out;
    }
    memcpy(res->outputs, outp, outn);
    res->outputs_bytes = outn;
  }
  st = TS_OK;
out:
  rpc_msg_fini(&r);
  return st;
}

typedef struct run_model_arg {
  const rpc_client *c;
  const char *id;
  const tsrt_model_io *in;
  int nin, repeat, num_threads;
  double timeout_s;
} run_model_arg;

static void build_run_model(rpc_enc *e, const void *arg) {
  const run_model_arg *a = arg;
  rpc_enc_begin(e, RPC_T_RUN_MODEL, 6);
  rpc_enc_str(e, "token", a->c->token);
  rpc_enc_str(e, "artifact", a->id);
  rpc_enc_u64(e, "repeat", (uint64_t)(a->repeat > 0 ? a->repeat : 0));
  rpc_enc_u64(e, "num_threads", (uint64_t)(a->num_threads > 0 ? a->num_threads : 0));
  rpc_enc_f64(e, "timeout_s", a->timeout_s > 0 ? a->timeout_s : 60);
  rpc_enc_key(e, "inputs");
  msgpack_packer *pk = &e->pk;
  msgpack_pack_array(pk, (size_t)a->nin);
  for (int i = 0; i < a->nin; i++) {
    const tsrt_model_io *io = &a->in[i];
    msgpack_pack_map(pk, 4);
    rpc_pack_str(pk, "name"), rpc_pack_str(pk, io->name);
    rpc_pack_str(pk, "dtype"), msgpack_pack_uint32(pk, (uint32_t)io->dtype);
    rpc_pack_str(pk, "shape"), msgpack_pack_array(pk, (size_t)io->ndim);
    for (int j = 0; j < io->ndim; j++) msgpack_pack_uint64(pk, (uint64_t)io->shape[j]);
    rpc_pack_str(pk, "data"), msgpack_pack_bin(pk, io->nbytes);
    msgpack_pack_bin_body(pk, io->data, io->nbytes);
  }
}

ts_status rpc_client_run_model(rpc_client *c, const char *id, const tsrt_model_io *inputs, int ninputs,
                                int repeat, double timeout_s, int num_threads, tsrt_model_run_result *res, ts_diag *d) {
  memset(res, 0, sizeof *res);
  if (ninputs < 0 || ninputs > 64 || repeat < 0 || repeat > TSRT_MAX_REPEAT) {
    ts_diag_set(d, TS_EPROTO, "run_model: %d inputs (at most 64), repeat %d (0..%d)", ninputs, repeat,
             TSRT_MAX_REPEAT);
    return TS_EPROTO;
  }
  run_model_arg a = {c, id, inputs, ninputs, repeat, num_threads, timeout_s};
  rpc_msg r;
  ts_status st = call(c, build_run_model, &a, (timeout_s > 0 ? timeout_s : 60) + c->timeout_s + 5, &r, d);
  if (st) return st;
  char status[32];
  const msgpack_object *secs = NULL, *outs = NULL;
  uint32_t nsecs = 0, nouts = 0;
  st = TS_EPROTO;
  if (r.type != RPC_T_MODEL_RESULT ||
      rpc_need(&r, rpc_get_str(&r, NULL, "status", status, sizeof status), "status") ||
      rpc_get_str(&r, NULL, "error", res->error, sizeof res->error) > TS_ENOTFOUND ||
      rpc_need(&r, rpc_get_array(&r, NULL, "secs", TSRT_MAX_REPEAT, &secs, &nsecs), "secs") ||
      rpc_need(&r, rpc_get_array(&r, NULL, "outputs", 4096, &outs, &nouts), "outputs")) {
    ts_diag_set(d, st, "run_model: bad reply: %s", r.type == RPC_T_MODEL_RESULT ? r.err : "not a model_result");
    goto out;
  }
  res->status = tsrt_status_from_name(status);
  for (uint32_t i = 0; i < nsecs; i++) {
    if (secs[i].type != MSGPACK_OBJECT_FLOAT64 && secs[i].type != MSGPACK_OBJECT_FLOAT32) {
      ts_diag_set(d, st, "run_model: secs[%u] is not a float", i);
      goto out;
    }
    res->secs[res->nsecs++] = secs[i].via.f64;
  }
  if (nouts) {
    res->outputs = ts_calloc(nouts, sizeof *res->outputs);
    if (!res->outputs) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      goto out;
    }
  }
  for (uint32_t i = 0; i < nouts; i++) {
    tsrt_model_io *io = &res->outputs[i];
    const msgpack_object *sh = NULL;
    uint32_t nd = 0;
    uint64_t dt = 0;
    const void *p = NULL;
    size_t n = 0;
    if (outs[i].type != MSGPACK_OBJECT_MAP ||
        rpc_need(&r, rpc_get_str(&r, &outs[i], "name", io->name, sizeof io->name), "name") ||
        rpc_need(&r, rpc_get_u64(&r, &outs[i], "dtype", TSRT_DTYPE_COUNT - 1, &dt), "dtype") ||
        rpc_need(&r, rpc_get_array(&r, &outs[i], "shape", TSRT_MAX_DIMS, &sh, &nd), "shape") ||
        rpc_need(&r, rpc_get_bin(&r, &outs[i], "data", RPC_MAX_MSG, &p, &n), "data")) {
      ts_diag_set(d, st, "run_model: bad outputs[%u]: %s", i, r.err);
      goto out;
    }
    uint64_t want = (uint64_t)tsrt_dtype_bytes((int)dt);
    for (uint32_t j = 0; j < nd; j++) {
      if (sh[j].type != MSGPACK_OBJECT_POSITIVE_INTEGER || sh[j].via.u64 > (1ull << 40)) {
        ts_diag_set(d, st, "run_model: outputs[%u].shape[%u] is not a size", i, j);
        goto out;
      }
      io->shape[j] = (int64_t)sh[j].via.u64;
      want *= sh[j].via.u64;
    }
    if (want != n) {
      ts_diag_set(d, st, "run_model: outputs[%u] has %zu bytes, its shape needs %llu", i, n,
               (unsigned long long)want);
      goto out;
    }
    io->dtype = (int32_t)dt;
    io->ndim = (int32_t)nd;
    io->data = ts_malloc(n ? n : 1);
    if (!io->data) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      goto out;
    }
    memcpy(io->data, p, n);
    io->nbytes = n;
    res->noutputs = (int)i + 1;
  }
  st = TS_OK;
out:
  if (st != TS_OK) tsrt_model_run_result_fini(res);
  rpc_msg_fini(&r);
  return st;
}
