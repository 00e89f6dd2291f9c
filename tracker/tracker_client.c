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

#include "tracker/tracker_client.h"

struct trk_conn {
  nng_socket sock;
  pthread_mutex_t mu;
  int timeout_ms;
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

rpc_status trk_conn_open(const char *tracker, const rpc_secret *secret, const char *role, int timeout_ms,
                         trk_conn **out, char *err, size_t errn) {
  *out = NULL;
  trk_conn *c = ts_calloc(1, sizeof *c);
  if (!c) return RPC_ENOMEM;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
  char url[512];
  trk_url(tracker, url, sizeof url);
  int rv;
  if ((rv = nng_req0_open(&c->sock)) != 0) {
    snprintf(err, errn, "cannot open socket: %s", nng_strerror(rv));
    ts_free(c);
    return RPC_EIO;
  }
  rpc_socket_limits(c->sock);
  nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, c->timeout_ms);
  nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, c->timeout_ms);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 50);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 1000);
  if ((rv = nng_dial(c->sock, url, NULL, 0)) != 0) {
    snprintf(err, errn, "cannot connect to tracker %s: %s", url, nng_strerror(rv));
    nng_close(c->sock);
    ts_free(c);
    return RPC_EIO;
  }
  rpc_status st = rpc_auth_client(c->sock, secret, role, err, errn);
  if (st != RPC_OK) {
    nng_close(c->sock);
    ts_free(c);
    return st;
  }
  pthread_mutex_init(&c->mu, NULL);
  *out = c;
  return RPC_OK;
}

void trk_conn_close(trk_conn *c) {
  if (!c) return;
  nng_close(c->sock);
  pthread_mutex_destroy(&c->mu);
  ts_free(c);
}

/* One call with a reply timeout of extra_ms beyond the connection's. */
static rpc_status call(trk_conn *c, rpc_enc *e, rpc_msg *reply, int64_t extra_ms, char *err, size_t errn) {
  nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, (nng_duration)(c->timeout_ms + extra_ms));
  return rpc_call(c->sock, e, reply, err, errn);
}

static rpc_status release_ticket(trk_conn *c, uint64_t ticket, char *err, size_t errn) {
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_RELEASE, 1);
  rpc_enc_u64(&e, "ticket", ticket);
  rpc_status st = call(c, &e, &m, 0, err, errn);
  if (st == RPC_OK) rpc_msg_fini(&m);
  return st;
}

rpc_status trk_request(trk_conn *c, const char *key, int priority, int64_t wait_ms, int64_t session_ms,
                       trk_grant *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_REQUEST, session_ms > 0 ? 3 : 2);
  rpc_enc_str(&e, "key", key);
  rpc_enc_i64(&e, "priority", priority);
  if (session_ms > 0) rpc_enc_i64(&e, "session_ms", session_ms);
  rpc_status st = call(c, &e, &m, 0, err, errn);
  if (st != RPC_OK) goto out;
  uint64_t ticket = 0;
  st = m.type == RPC_T_TICKET ? rpc_need(&m, rpc_get_u64(&m, NULL, "ticket", UINT64_MAX, &ticket), "ticket")
                              : RPC_EPROTO;
  if (st) snprintf(err, errn, "bad ticket reply: %s", m.err);
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
    st = call(c, &e, &m, left, err, errn);
    if (st != RPC_OK) goto out;
    char state[16] = "";
    if (m.type != RPC_T_GRANT || rpc_need(&m, rpc_get_str(&m, NULL, "state", state, sizeof state), "state")) {
      snprintf(err, errn, "bad grant reply: %s", m.err);
      rpc_msg_fini(&m);
      st = RPC_EPROTO;
      goto out;
    }
    if (!strcmp(state, "granted")) {
      out->ticket = ticket;
      st = rpc_need(&m, rpc_get_str(&m, NULL, "address", out->address, sizeof out->address), "address");
      if (!st) st = rpc_need(&m, rpc_get_str(&m, NULL, "token", out->token, sizeof out->token), "token");
      if (!st) st = rpc_need(&m, rpc_get_str(&m, NULL, "key", out->key, sizeof out->key), "key");
      if (!st) rpc_get_i64(&m, NULL, "session_ms", INT64_MIN, INT64_MAX, &out->session_ms);
      if (st || !rpc_token_valid(out->token)) {
        snprintf(err, errn, "bad grant reply: %s", m.err);
        st = RPC_EPROTO;
      }
      rpc_msg_fini(&m);
      goto out;
    }
    rpc_msg_fini(&m);
    if (now_ms() >= end) {
      char e2[64];
      release_ticket(c, ticket, e2, sizeof e2); /* withdraw from the queue */
      snprintf(err, errn, "no server with key '%s' came free within %lld ms", key, (long long)wait_ms);
      st = RPC_ETIMEDOUT;
      goto out;
    }
  }
out:
  pthread_mutex_unlock(&c->mu);
  return st;
}

rpc_status trk_release(trk_conn *c, const trk_grant *g, char *err, size_t errn) {
  pthread_mutex_lock(&c->mu);
  rpc_status st = release_ticket(c, g->ticket, err, errn);
  pthread_mutex_unlock(&c->mu);
  return st;
}

rpc_status trk_check(trk_conn *c, const trk_grant *g, char *err, size_t errn) {
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_POLL, 2);
  rpc_enc_u64(&e, "ticket", g->ticket);
  rpc_enc_i64(&e, "wait_ms", 0);
  rpc_status st = call(c, &e, &m, 0, err, errn);
  if (st == RPC_OK) {
    char token[RPC_TOKEN_LEN + 1] = "";
    rpc_get_str(&m, NULL, "token", token, sizeof token);
    if (strcmp(token, g->token)) {
      snprintf(err, errn, "grant no longer held");
      st = RPC_EDENIED;
    }
    rpc_msg_fini(&m);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

rpc_status trk_query(trk_conn *c, rpc_msg *reply, char *err, size_t errn) {
  pthread_mutex_lock(&c->mu);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_QUERY, 0);
  rpc_status st = call(c, &e, reply, 0, err, errn);
  if (st == RPC_OK && reply->type != RPC_T_QUERY_REPLY) {
    snprintf(err, errn, "unexpected reply '%s' to query", rpc_type_name(reply->type));
    rpc_msg_fini(reply);
    st = RPC_EPROTO;
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* ---- rpc_servers --------------------------------------------------------------- */

struct trk_server_reg {
  trk_conn *c;
  char key[RPC_MAX_KEY + 1], address[RPC_MAX_ADDR + 1];
  void *info;
  size_t info_len;
  pthread_mutex_t mu; /* id, token, stop */
  pthread_cond_t cv;
  uint64_t id;
  int heartbeat_ms;
  char token[RPC_TOKEN_LEN + 1];
  bool stop, thread;
  pthread_t th;
};

static rpc_status do_register(trk_server_reg *r, char *err, size_t errn) {
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_REGISTER, 3);
  rpc_enc_str(&e, "key", r->key);
  rpc_enc_str(&e, "address", r->address);
  rpc_enc_key(&e, "info");
  if (r->info_len)
    msgpack_sbuffer_write(&e.sb, r->info, r->info_len);
  else
    msgpack_pack_nil(&e.pk);
  pthread_mutex_lock(&r->c->mu);
  rpc_status st = call(r->c, &e, &m, 0, err, errn);
  pthread_mutex_unlock(&r->c->mu);
  if (st) return st;
  uint64_t id = 0;
  int64_t hb = TRK_HEARTBEAT_MS;
  st = m.type == RPC_T_REGISTERED ? rpc_need(&m, rpc_get_u64(&m, NULL, "server_id", UINT64_MAX, &id), "server_id")
                                  : RPC_EPROTO;
  rpc_get_i64(&m, NULL, "heartbeat_ms", 10, 60000, &hb);
  if (st) snprintf(err, errn, "bad registered reply: %s", m.err);
  rpc_msg_fini(&m);
  if (st) return st;
  pthread_mutex_lock(&r->mu);
  r->id = id;
  r->heartbeat_ms = (int)hb;
  r->token[0] = 0;
  pthread_mutex_unlock(&r->mu);
  return RPC_OK;
}

rpc_status trk_server_heartbeat(trk_server_reg *r, char *err, size_t errn) {
  pthread_mutex_lock(&r->mu);
  uint64_t id = r->id;
  pthread_mutex_unlock(&r->mu);
  rpc_enc e;
  rpc_msg m;
  rpc_enc_begin(&e, RPC_T_HEARTBEAT, 2);
  rpc_enc_u64(&e, "server_id", id);
  char tok[RPC_TOKEN_LEN + 1];
  trk_server_session(r, tok);
  rpc_enc_bool(&e, "busy", tok[0] != 0);
  pthread_mutex_lock(&r->c->mu);
  rpc_status st = call(r->c, &e, &m, 0, err, errn);
  pthread_mutex_unlock(&r->c->mu);
  if (st == RPC_ENOENT) return do_register(r, err, errn); /* evicted, or the tracker restarted */
  if (st) return st;
  const msgpack_object *items;
  uint32_t n = 0;
  st = m.type == RPC_T_HEARTBEAT_ACK ? rpc_need(&m, rpc_get_array(&m, NULL, "tokens", 16, &items, &n), "tokens")
                                     : RPC_EPROTO;
  char token[RPC_TOKEN_LEN + 1] = "";
  if (!st && n > 0) {
    if (items[0].type == MSGPACK_OBJECT_STR && items[0].via.str.size == RPC_TOKEN_LEN) {
      memcpy(token, items[0].via.str.ptr, RPC_TOKEN_LEN);
      token[RPC_TOKEN_LEN] = 0;
    } else {
      st = RPC_EPROTO;
    }
  }
  if (st) snprintf(err, errn, "bad heartbeat reply: %s", m.err);
  rpc_msg_fini(&m);
  if (st) return st;
  pthread_mutex_lock(&r->mu);
  memcpy(r->token, token, sizeof token);
  pthread_mutex_unlock(&r->mu);
  return RPC_OK;
}

static void *hb_thread(void *arg) {
  trk_server_reg *r = arg;
  pthread_mutex_lock(&r->mu);
  while (!r->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)r->heartbeat_ms * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    if (r->stop) break;
    pthread_mutex_unlock(&r->mu);
    char err[256];
    trk_server_heartbeat(r, err, sizeof err); /* failures: retried next period */
    pthread_mutex_lock(&r->mu);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

rpc_status trk_server_register(const char *tracker, const rpc_secret *secret, const char *key,
                               const char *address, const void *info, size_t info_len, bool heartbeat,
                               trk_server_reg **out, char *err, size_t errn) {
  *out = NULL;
  if (strlen(key) > RPC_MAX_KEY || strlen(address) > RPC_MAX_ADDR || info_len > TRK_MAX_INFO) {
    snprintf(err, errn, "key, address or info too long");
    return RPC_ETOOBIG;
  }
  trk_server_reg *r = ts_calloc(1, sizeof *r);
  if (!r) return RPC_ENOMEM;
  snprintf(r->key, sizeof r->key, "%s", key);
  snprintf(r->address, sizeof r->address, "%s", address);
  if (info_len) {
    if (!(r->info = ts_malloc(info_len))) {
      ts_free(r);
      return RPC_ENOMEM;
    }
    memcpy(r->info, info, info_len);
    r->info_len = info_len;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  rpc_status st = trk_conn_open(tracker, secret, "server", 5000, &r->c, err, errn);
  if (!st) st = do_register(r, err, errn);
  if (!st && heartbeat) {
    if (pthread_create(&r->th, NULL, hb_thread, r) == 0)
      r->thread = true;
    else
      st = RPC_ESYSTEM;
  }
  if (st) {
    trk_conn_close(r->c);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    ts_free(r->info);
    ts_free(r);
    return st;
  }
  *out = r;
  return RPC_OK;
}

void trk_server_session(trk_server_reg *r, char token[RPC_TOKEN_LEN + 1]) {
  pthread_mutex_lock(&r->mu);
  memcpy(token, r->token, RPC_TOKEN_LEN + 1);
  pthread_mutex_unlock(&r->mu);
}

bool trk_server_token_ok(trk_server_reg *r, const char *token) {
  if (!rpc_token_valid(token)) return false;
  char cur[RPC_TOKEN_LEN + 1];
  trk_server_session(r, cur);
  if (!strcmp(cur, token)) return true;
  char err[256];
  if (trk_server_heartbeat(r, err, sizeof err) != RPC_OK) return false;
  trk_server_session(r, cur);
  return !strcmp(cur, token);
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
  rpc_enc e;
  rpc_msg m;
  char err[256];
  rpc_enc_begin(&e, RPC_T_DEREGISTER, 1);
  rpc_enc_u64(&e, "server_id", r->id);
  pthread_mutex_lock(&r->c->mu);
  if (call(r->c, &e, &m, 0, err, sizeof err) == RPC_OK) rpc_msg_fini(&m);
  pthread_mutex_unlock(&r->c->mu);
  trk_conn_close(r->c);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  ts_free(r->info);
  ts_free(r);
}
