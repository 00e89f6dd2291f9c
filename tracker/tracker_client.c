/* tracker_client.c — connections to the tracker, the tuner's request /
 * release / query, and the rpc_server's registration with its heartbeat
 * thread (tracker_client.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <arpa/inet.h>

#include "rpc/pipe_drop.h"
#include "tracker/tracker_client.h"

struct trk_conn {
  nng_socket sock;
  rpc_pipeset *pipes;   /* its pipes, dropped before the socket closes (rpc/pipe_drop.h) */
  pthread_mutex_t mu;
  int timeout_ms;
  rpc_chan chan;        /* the secure channel of the current pipe */
  rpc_secret secret;    /* to authenticate again after nng redialed */
  char role[16];
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void trk_url(const char *hostport, char *url, size_t n) {
  if (strstr(hostport, "://"))
    snprintf(url, n, "%s", hostport);
  else
    snprintf(url, n, "tcp://%s", hostport);
}

ts_status trk_conn_open(const char *tracker, const rpc_secret *secret, const char *role, int timeout_ms,
                         trk_conn **out, ts_diag *d) {
  *out = NULL;
  trk_conn *c = ts_calloc(1, sizeof *c);
  if (!c) return TS_ENOMEM;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
  char url[512];
  trk_url(tracker, url, sizeof url);
  int rv;
  if ((rv = nng_req0_open(&c->sock)) != 0) {
    ts_diag_set(d, TS_EIO, "cannot open socket: %s", nng_strerror(rv));
    ts_free(c);
    return TS_EIO;
  }
  if (!(c->pipes = rpc_pipeset_watch(c->sock, d))) {
    nng_close(c->sock); /* no pipe yet */
    ts_free(c);
    return TS_EIO;
  }
  rpc_socket_limits(c->sock);
  nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, c->timeout_ms);
  nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, c->timeout_ms);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 10);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 1000);
  if ((rv = nng_dial(c->sock, url, NULL, 0)) != 0) {
    ts_diag_set(d, TS_EIO, "cannot connect to tracker %s: %s", url, nng_strerror(rv));
    rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "tracker client");
    ts_free(c);
    return TS_EIO;
  }
  c->secret = *secret;
  snprintf(c->role, sizeof c->role, "%s", role);
  ts_status st = rpc_auth_client(c->sock, secret, role, &c->chan, d);
  if (st != TS_OK) {
    rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "tracker client");
    rpc_secret_wipe(&c->secret);
    rpc_chan_wipe(&c->chan);
    ts_free(c);
    return st;
  }
  pthread_mutex_init(&c->mu, NULL);
  *out = c;
  return TS_OK;
}

/* The connection's pipes are dropped first and the close is bounded: a
 * reply arriving as the socket closes must not wedge nng 1.5.2's reaper,
 * and a reaper wedged all the same must not hang the caller (it says so on
 * stderr and goes on). */
void trk_conn_close(trk_conn *c) {
  if (!c) return;
  rpc_pipeset_close(c->pipes, c->sock, RPC_DROP_WAIT_MS, "tracker client");
  rpc_secret_wipe(&c->secret);
  rpc_chan_wipe(&c->chan);
  pthread_mutex_destroy(&c->mu);
  ts_free(c);
}

/* One call with a reply timeout of extra_ms beyond the connection's, over
 * the secure channel. When nng redialed underneath (the tracker does not
 * know the new pipe, or the channel was refused and closed), the request
 * may not have been served: authenticate again and report the failure, so
 * the caller decides whether to repeat it. *pipe (optional): the reply's. */
static ts_status call_pipe(trk_conn *c, rpc_enc *e, rpc_msg *reply, int64_t extra_ms, nng_pipe *pipe, ts_diag *d) {
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(c->timeout_ms + extra_ms));
  if (!c->chan.up) {
    nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)c->timeout_ms);
    ts_status st = rpc_auth_client(c->sock, &c->secret, c->role, &c->chan, d);
    nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(c->timeout_ms + extra_ms));
    if (st) {
      rpc_enc_fini(e);
      memset(reply, 0, sizeof *reply);
      return st;
    }
  }
  return rpc_chan_call(c->sock, &c->chan, e, reply, pipe, d);
}

static ts_status call(trk_conn *c, rpc_enc *e, rpc_msg *reply, int64_t extra_ms, ts_diag *d) {
  return call_pipe(c, e, reply, extra_ms, NULL, d);
}

static ts_status release_ticket(trk_conn *c, uint64_t ticket, ts_diag *d) {
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_RELEASE, 1);
  rpc_enc_u64(&e, "ticket", ticket);
  ts_status st = call(c, &e, &m, 0, d);
  if (st == TS_OK) rpc_msg_fini(&m);
  return st;
}

ts_status trk_request(trk_conn *c, const char *key, int priority, int64_t wait_ms, int64_t session_ms,
                       trk_grant *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_REQUEST, session_ms > 0 ? 3 : 2);
  rpc_enc_str(&e, "key", key);
  rpc_enc_i64(&e, "priority", priority);
  if (session_ms > 0) rpc_enc_i64(&e, "session_ms", session_ms);
  ts_status st = call(c, &e, &m, 0, d);
  if (st != TS_OK) goto out;
  uint64_t ticket = 0;
  st = m.type == RPC_T_TICKET ? rpc_need(&m, rpc_get_u64(&m, NULL, "ticket", UINT64_MAX, &ticket), "ticket")
                              : TS_EPROTO;
  if (st) ts_diag_set(d, st, "bad ticket reply: %s", m.err);
  rpc_msg_fini(&m);
  if (st) goto out;
  int64_t end = wait_ms < 0 ? INT64_MAX : now_ms() + wait_ms;
  for (;;) {
    int64_t left = end == INT64_MAX ? 5000 : end - now_ms();
    if (left < 0) left = 0;
    if (left > 5000) left = 5000;
    rpc_enc_begin(&e, RPC_T_POLL, 2);
    rpc_enc_u64(&e, "ticket", ticket);
    rpc_enc_i64(&e, "wait_ms", left);
    st = call(c, &e, &m, left, d);
    if (st != TS_OK) goto out;
    char state[16] = "";
    if (m.type != RPC_T_GRANT || rpc_need(&m, rpc_get_str(&m, NULL, "state", state, sizeof state), "state")) {
      ts_diag_set(d, TS_EPROTO, "bad grant reply: %s", m.err);
      rpc_msg_fini(&m);
      st = TS_EPROTO;
      goto out;
    }
    if (!strcmp(state, "granted")) {
      out->ticket = ticket;
      st = rpc_need(&m, rpc_get_str(&m, NULL, "address", out->address, sizeof out->address), "address");
      if (!st) st = rpc_need(&m, rpc_get_str(&m, NULL, "token", out->token, sizeof out->token), "token");
      if (!st) st = rpc_need(&m, rpc_get_str(&m, NULL, "key", out->key, sizeof out->key), "key");
      if (!st) rpc_get_i64(&m, NULL, "session_ms", INT64_MIN, INT64_MAX, &out->session_ms);
      if (st || !rpc_token_valid(out->token)) {
        st = ts_diag_set(d, TS_EPROTO, "bad grant reply: %s", m.err);
      }
      rpc_msg_fini(&m);
      goto out;
    }
    rpc_msg_fini(&m);
    if (now_ms() >= end) {
      release_ticket(c, ticket, NULL); /* withdraw from the queue */
      st = ts_diag_set(d, TS_ETIMEOUT, "no server with key '%s' came free within %lld ms", key, (long long)wait_ms);
      goto out;
    }
  }
out:
  pthread_mutex_unlock(&c->mu);
  return st;
}

ts_status trk_release(trk_conn *c, const trk_grant *g, ts_diag *d) {
  pthread_mutex_lock(&c->mu);
  ts_status st = release_ticket(c, g->ticket, d);
  pthread_mutex_unlock(&c->mu);
  return st;
}

ts_status trk_check(trk_conn *c, const trk_grant *g, ts_diag *d) {
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_POLL, 2);
  rpc_enc_u64(&e, "ticket", g->ticket);
  rpc_enc_i64(&e, "wait_ms", 0);
  ts_status st = call(c, &e, &m, 0, d);
  if (st == TS_OK) {
    char token[RPC_TOKEN_LEN + 1] = "";
    rpc_get_str(&m, NULL, "token", token, sizeof token);
    if (strcmp(token, g->token)) {
      st = ts_diag_set(d, TS_EDENIED, "grant no longer held");
    }
    rpc_msg_fini(&m);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

ts_status trk_query(trk_conn *c, rpc_msg *reply, ts_diag *d) {
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_QUERY, 0);
  ts_status st = call(c, &e, reply, 0, d);
  if (st == TS_OK && reply->type != RPC_T_QUERY_REPLY) {
    ts_diag_set(d, TS_EPROTO, "unexpected reply '%s' to query", rpc_type_name(reply->type));
    rpc_msg_fini(reply);
    st = TS_EPROTO;
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* ---- rpc_servers --------------------------------------------------------------- */

#define MAX_TOKENS 64
#define HB_MIN_MS 50   /* heartbeat period clamps: never a busy loop, and */
#define HB_MAX_MS 2000 /* always well inside the tracker's eviction time */

struct trk_server_reg {
  /* what to register (set once) */
  char tracker[RPC_MAX_ADDR + 1];
  rpc_secret secret;
  char key[RPC_MAX_KEY + 1], address[RPC_MAX_ADDR + 1];
  int port;
  void *info;
  size_t info_len;
  const char *log; /* progress lines on stderr with this prefix; NULL: quiet */
  /* the connection: opened, registered and replaced under opmu */
  pthread_mutex_t opmu;
  trk_conn *c;
  /* state shared with readers, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t id;
  int heartbeat_ms;
  char tokens[MAX_TOKENS][RPC_TOKEN_LEN + 1];
  int ntokens;
  bool busy, stop, thread;
  pthread_t th;
};

/* The address the tracker sees us at: one round trip on the connection
 * names its pipe, whose local address is ours (when the server listens on
 * 0.0.0.0 and no address was given). */
static void local_address(trk_conn *c, int port, char *out, size_t n) {
  char ip[64] = "127.0.0.1";
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_QUERY, 0);
  nng_pipe p = NNG_PIPE_INITIALIZER;
  pthread_mutex_lock(&c->mu);
  rpc_msg r;
  if (call_pipe(c, &e, &r, 0, &p, NULL) == TS_OK) rpc_msg_fini(&r);
  pthread_mutex_unlock(&c->mu);
  nng_sockaddr sa;
  if (nng_pipe_id(p) > 0 && nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET)
    inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof ip);
  snprintf(out, n, "tcp://%s:%d", ip, port);
}

static void set_tokens(trk_server_reg *r, const msgpack_object *items, uint32_t n) {
  pthread_mutex_lock(&r->mu);
  r->ntokens = 0;
  for (uint32_t i = 0; i < n && r->ntokens < MAX_TOKENS; i++) {
    const msgpack_object *o = &items[i];
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size != RPC_TOKEN_LEN) continue;
    memcpy(r->tokens[r->ntokens], o->via.str.ptr, RPC_TOKEN_LEN);
    r->tokens[r->ntokens][RPC_TOKEN_LEN] = 0;
    if (rpc_token_valid(r->tokens[r->ntokens])) r->ntokens++;
  }
  pthread_mutex_unlock(&r->mu);
}

/* Registers over r->c (opmu held). */
static ts_status do_register(trk_server_reg *r, ts_diag *d) {
  if (!r->address[0]) local_address(r->c, r->port, r->address, sizeof r->address);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_REGISTER, 3);
  rpc_enc_str(&e, "key", r->key);
  rpc_enc_str(&e, "address", r->address);
  rpc_enc_key(&e, "info");
  if (r->info_len)
    rpc_enc_raw(&e, r->info, r->info_len);
  else
    msgpack_pack_nil(&e.pk);
  pthread_mutex_lock(&r->c->mu);
  ts_status st = call(r->c, &e, &m, 0, d);
  pthread_mutex_unlock(&r->c->mu);
  if (st) return st;
  uint64_t id = 0, hb = TRK_HEARTBEAT_MS;
  st = m.type == RPC_T_REGISTERED ? rpc_need(&m, rpc_get_u64(&m, NULL, "server_id", UINT64_MAX, &id), "server_id")
                                  : TS_EPROTO;
  rpc_get_u64(&m, NULL, "heartbeat_ms", 60000, &hb);
  if (st) ts_diag_set(d, st, "bad registered reply: %s", m.err);
  rpc_msg_fini(&m);
  if (st) return st;
  pthread_mutex_lock(&r->mu);
  r->id = id;
  r->heartbeat_ms = hb < HB_MIN_MS ? HB_MIN_MS : hb > HB_MAX_MS ? HB_MAX_MS : (int)hb;
  r->ntokens = 0;
  pthread_mutex_unlock(&r->mu);
  if (r->log)
    fprintf(stderr, "%s: registered with tracker %s as key '%s' at %s (id %llu)\n", r->log, r->tracker, r->key,
            r->address, (unsigned long long)id);
  return TS_OK;
}

/* Opens a fresh connection and registers (opmu held). */
static ts_status connect_register(trk_server_reg *r, ts_diag *d) {
  ts_status st = trk_conn_open(r->tracker, &r->secret, "server", 2000, &r->c, d);
  if (!st) st = do_register(r, d);
  if (st) {
    trk_conn_close(r->c);
    r->c = NULL;
  }
  return st;
}

/* One heartbeat over r->c (opmu held); re-registers when the tracker no
 * longer knows us (evicted, or restarted). */
static ts_status heartbeat_locked(trk_server_reg *r, ts_diag *d) {
  pthread_mutex_lock(&r->mu);
  uint64_t id = r->id;
  bool busy = r->busy || r->ntokens > 0;
  pthread_mutex_unlock(&r->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_HEARTBEAT, 2);
  rpc_enc_u64(&e, "server_id", id);
  rpc_enc_bool(&e, "busy", busy);
  pthread_mutex_lock(&r->c->mu);
  ts_status st = call(r->c, &e, &m, 0, d);
  pthread_mutex_unlock(&r->c->mu);
  if (st == TS_ENOTFOUND) {
    ts_diag_clear(d);
    return do_register(r, d);
  }
  if (st) return st;
  const msgpack_object *items = NULL;
  uint32_t n = 0;
  st = m.type == RPC_T_HEARTBEAT_ACK
           ? rpc_need(&m, rpc_get_array(&m, NULL, "tokens", MAX_TOKENS, &items, &n), "tokens")
           : TS_EPROTO;
  if (st)
    ts_diag_set(d, st, "bad heartbeat reply: %s", m.err);
  else
    set_tokens(r, items, n);
  rpc_msg_fini(&m);
  return st;
}

ts_status trk_server_heartbeat(trk_server_reg *r, ts_diag *d) {
  pthread_mutex_lock(&r->opmu);
  ts_status st = r->c ? heartbeat_locked(r, d) : ts_diag_set(d, TS_EIO, "not connected to the tracker");
  pthread_mutex_unlock(&r->opmu);
  return st;
}

/* One period of the thread: (re)connect and register, or heartbeat; on a
 * failure drop the connection (a restarted tracker knows neither the pipe's
 * authentication nor our id) and the tokens (grants die with the tracker's
 * view of us). Returns how long to wait before the next period. */
static int hb_period(trk_server_reg *r, char *last, size_t lastn) {
  ts_diag d = {0};
  pthread_mutex_lock(&r->opmu);
  ts_status st = r->c ? heartbeat_locked(r, &d) : connect_register(r, &d);
  if (st && r->c) {
    trk_conn_close(r->c);
    r->c = NULL;
  }
  pthread_mutex_unlock(&r->opmu);
  if (st == TS_OK) {
    last[0] = 0;
    pthread_mutex_lock(&r->mu);
    int ms = r->heartbeat_ms;
    pthread_mutex_unlock(&r->mu);
    return ms;
  }
  pthread_mutex_lock(&r->mu);
  r->ntokens = 0;
  pthread_mutex_unlock(&r->mu);
  if (r->log && strncmp(d.msg, last, 250) != 0) {
    fprintf(stderr, "%s: tracker %s: %s (retrying)\n", r->log, r->tracker, d.msg);
    snprintf(last, lastn, "%.250s", d.msg);
  }
  return st == TS_EAUTH ? 2000 : 300;
}

static void *hb_thread(void *arg) {
  trk_server_reg *r = arg;
  char last[256] = "";
  pthread_mutex_lock(&r->mu);
  int wait_ms = r->c ? r->heartbeat_ms : 0;
  while (!r->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)wait_ms * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    if (wait_ms > 0) pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    if (r->stop) break;
    pthread_mutex_unlock(&r->mu);
    wait_ms = hb_period(r, last, sizeof last);
    pthread_mutex_lock(&r->mu);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static void reg_free(trk_server_reg *r) {
  trk_conn_close(r->c);
  pthread_mutex_destroy(&r->opmu);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  rpc_secret_wipe(&r->secret);
  ts_free(r->info);
  ts_free(r);
}

static ts_status reg_new(const trk_server_opts *o, trk_server_reg **out, ts_diag *d) {
  *out = NULL;
  const char *addr = o->address ? o->address : "";
  if (strlen(o->key) > RPC_MAX_KEY || strlen(addr) > RPC_MAX_ADDR || strlen(o->tracker) > RPC_MAX_ADDR ||
      o->info_len > TRK_MAX_INFO)
    return ts_diag_set(d, TS_ETOOBIG, "tracker, key, address or info too long");
  trk_server_reg *r = ts_calloc(1, sizeof *r);
  if (!r || (o->info_len && !(r->info = ts_malloc(o->info_len)))) {
    ts_free(r);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  snprintf(r->tracker, sizeof r->tracker, "%s", o->tracker);
  r->secret = *o->secret;
  snprintf(r->key, sizeof r->key, "%s", o->key);
  snprintf(r->address, sizeof r->address, "%s", addr);
  r->port = o->port;
  r->log = o->log;
  if (o->info_len) memcpy(r->info, o->info, o->info_len);
  r->info_len = o->info_len;
  r->heartbeat_ms = TRK_HEARTBEAT_MS;
  pthread_mutex_init(&r->opmu, NULL);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  *out = r;
  return TS_OK;
}

ts_status trk_server_start(const trk_server_opts *o, trk_server_reg **out, ts_diag *d) {
  trk_server_reg *r;
  ts_status st = reg_new(o, &r, d);
  if (st) return st;
  if (o->connect_now) {
    pthread_mutex_lock(&r->opmu);
    st = connect_register(r, d);
    pthread_mutex_unlock(&r->opmu);
  }
  if (!st && o->heartbeat) {
    if (pthread_create(&r->th, NULL, hb_thread, r) == 0)
      r->thread = true;
    else
      st = ts_diag_set(d, TS_ESYSTEM, "cannot start the heartbeat thread");
  }
  if (st) {
    reg_free(r);
    return st;
  }
  *out = r;
  return TS_OK;
}

ts_status trk_server_register(const char *tracker, const rpc_secret *secret, const char *key,
                              const char *address, const void *info, size_t info_len, bool heartbeat,
                              trk_server_reg **out, ts_diag *d) {
  trk_server_opts o = {.tracker = tracker, .secret = secret, .key = key, .address = address,
                       .info = info, .info_len = info_len, .heartbeat = heartbeat, .connect_now = true};
  return trk_server_start(&o, out, d);
}

void trk_server_session(trk_server_reg *r, char token[RPC_TOKEN_LEN + 1]) {
  pthread_mutex_lock(&r->mu);
  memcpy(token, r->ntokens ? r->tokens[0] : "", r->ntokens ? RPC_TOKEN_LEN + 1 : 1);
  pthread_mutex_unlock(&r->mu);
}

ts_status trk_server_token_check(trk_server_reg *r, const char *token) {
  if (!rpc_token_valid(token)) return TS_EDENIED;
  bool ok = false;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->ntokens && !ok; i++) ok = strcmp(r->tokens[i], token) == 0;
  pthread_mutex_unlock(&r->mu);
  return ok ? TS_OK : TS_EPENDING;
}

bool trk_server_token_ok(trk_server_reg *r, const char *token) {
  ts_status st = trk_server_token_check(r, token);
  if (st != TS_EPENDING) return st == TS_OK;
  if (trk_server_heartbeat(r, NULL) != TS_OK) return false;
  return trk_server_token_check(r, token) == TS_OK;
}

void trk_server_set_busy(trk_server_reg *r, bool busy) {
  pthread_mutex_lock(&r->mu);
  r->busy = busy;
  pthread_mutex_unlock(&r->mu);
}

uint64_t trk_server_id(trk_server_reg *r) {
  pthread_mutex_lock(&r->mu);
  uint64_t id = r->id;
  pthread_mutex_unlock(&r->mu);
  return id;
}

void trk_server_deregister(trk_server_reg *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (r->thread) pthread_join(r->th, NULL);
  pthread_mutex_lock(&r->opmu);
  if (r->c) {
    rpc_enc e;
    rpc_msg m;
    rpc_enc_begin(&e, RPC_T_DEREGISTER, 1);
    rpc_enc_u64(&e, "server_id", r->id);
    pthread_mutex_lock(&r->c->mu);
    if (call(r->c, &e, &m, 0, NULL) == TS_OK) rpc_msg_fini(&m);
    pthread_mutex_unlock(&r->c->mu);
  }
  pthread_mutex_unlock(&r->opmu);
  reg_free(r);
}

/* ---- rpc_server's registrar ------------------------------------------------------ */

static void *reg_start(const rpc_server_announce *a) {
  trk_server_opts o = {.tracker = a->tracker, .secret = a->secret, .key = a->key, .address = a->address,
                       .port = a->port, .info = a->info, .info_len = a->info_len, .heartbeat = true,
                       .log = a->log};
  trk_server_reg *r = NULL;
  ts_diag d = {0};
  if (trk_server_start(&o, &r, &d) && a->log) fprintf(stderr, "%s: tracker: %s\n", a->log, d.msg);
  return r;
}

static ts_status reg_check(void *r, const char *token) {
  return trk_server_token_check(r, token);
}

static void reg_busy(void *r, bool busy) {
  trk_server_set_busy(r, busy);
}

static void reg_stop(void *r) {
  trk_server_deregister(r);
}

const rpc_server_registrar trk_server_registrar = {reg_start, reg_check, reg_busy, reg_stop};
