/* tracker.c — the tracker's state machine and loop (tracker.h,
 * docs/TRACKER.md).
 *
 * One thread owns all state. It receives a request from the raw REP socket,
 * authenticates it (rpc_authtab), handles it and answers — at once, or, for a
 * long poll of a waiting ticket, later: the request's backtrace header is
 * kept and the grant sent the moment a server is given to that ticket. Then
 * it applies the pipe closes nng reported (a client's tickets and grants go,
 * a server registered on that pipe goes) and the timers (heartbeat eviction,
 * session lease, poll expiry). The mutex guards the state only against
 * trk_tracker_stats. */
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "rpc/pipe_drop.h"
#include "tracker/tracker.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct ticket ticket;

typedef struct server {
  uint64_t id;
  char key[RPC_MAX_KEY + 1];
  char addr[RPC_MAX_ADDR + 1];
  uint8_t *info;          /* the info object as packed msgpack (re-sent verbatim) */
  size_t info_len;
  uint32_t pipe;          /* the connection it registered/heartbeats on */
  int64_t last_hb;
  uint64_t free_since;    /* order of becoming free: the longest-free is granted first */
  ticket *holder;         /* NULL: free */
} server;

enum { TK_PENDING, TK_GRANTED, TK_REVOKED };

struct ticket {
  uint64_t id, seq;
  char key[RPC_MAX_KEY + 1];
  int64_t prio, session_ms;
  uint32_t pipe;
  int state;
  server *srv;            /* TK_GRANTED */
  char token[RPC_TOKEN_LEN + 1];
  int64_t deadline;       /* lease end (TK_GRANTED) */
  const char *why;        /* TK_REVOKED */
  bool polling;           /* a poll is held: answer with hdr */
  int64_t poll_deadline;
  uint8_t hdr[64];
  size_t hdr_len;
  ticket *next;
};

#define NDEAD 4096
#define MAX_TICKETS_PER_PIPE 1024
#define MAX_TICKETS 100000
#define MAX_SERVERS 100000

struct trk_tracker {
  trk_config cfg;
  nng_socket sock;
  nng_listener listener;
  rpc_authtab auth;
  bool auth_init;
  pthread_t thread;
  bool started;
  atomic_bool stopping; /* trk_tracker_stop: the loop ends at its next wake-up */
  pthread_mutex_t mu;
  /* pipe closes, from nng's threads */
  pthread_mutex_t evmu;
  uint32_t *ev;
  size_t nev, capev;
  /* state of the loop thread */
  uint32_t dead[NDEAD]; /* recently closed pipes: a message may still be queued from one */
  size_t ndead;
  server **servers;
  size_t nservers, capservers;
  ticket *tickets;
  size_t ntickets;
  uint64_t next_id, next_ticket, next_seq, free_counter;
  trk_stats stats;
  int64_t last_tick;
};

static void logf_(trk_tracker *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(trk_tracker *t, const char *fmt, ...) {
  if (!t->cfg.verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tracker: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---- pipes ----------------------------------------------------------------- */

static void on_close_cb(void *arg, uint32_t id) {
  trk_tracker *t = arg;
  pthread_mutex_lock(&t->evmu);
  if (t->nev == t->capev) {
    size_t nc = t->capev ? t->capev * 2 : 64;
    uint32_t *ne = ts_realloc(t->ev, nc * sizeof *ne);
    if (!ne) { /* cannot record it: the heartbeat timeout still evicts */
      pthread_mutex_unlock(&t->evmu);
      return;
    }
    t->ev = ne;
    t->capev = nc;
  }
  t->ev[t->nev++] = id;
  pthread_mutex_unlock(&t->evmu);
}

/* The message harness (tests/fuzz/fuzz_tracker_msg.c) includes this file
 * and defines TRK_PIPE_KNOWN for its connections, which nng never saw. */
#ifndef TRK_PIPE_KNOWN
#define TRK_PIPE_KNOWN(id) nng_knows_pipe(id)
static bool nng_knows_pipe(uint32_t id) {
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = id;
  return nng_socket_id(nng_pipe_socket(p)) > 0;
}
#endif

/* Alive: nng still knows the pipe and we have not seen it close. */
static bool pipe_alive(trk_tracker *t, uint32_t id) {
  size_t n = t->ndead < NDEAD ? t->ndead : NDEAD;
  for (size_t i = 0; i < n; i++)
    if (t->dead[i] == id) return false;
  return TRK_PIPE_KNOWN(id);
}

/* ---- replies --------------------------------------------------------------- */

/* Finishes e, sealed for the pipe when it has authenticated, and sends it
 * to the peer whose request carried hdr; e is fini'd. */
static void reply(trk_tracker *t, uint32_t pipe, const uint8_t *hdr, size_t hdr_len, rpc_enc *e) {
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = pipe;
  nng_msg *r = rpc_authtab_seal(&t->auth, p, e);
  if (r && (nng_msg_header_append(r, hdr, hdr_len) != 0 || nng_sendmsg(t->sock, r, 0) != 0))
    nng_msg_free(r); /* a peer that is gone: its reply is dropped */
}

static void reply_error(trk_tracker *t, uint32_t pipe, const uint8_t *hdr, size_t hdr_len, ts_status st, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void reply_error(trk_tracker *t, uint32_t pipe, const uint8_t *hdr, size_t hdr_len, ts_status st, const char *fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rpc_enc e;
  rpc_enc_error(&e, st, "%s", buf);
  reply(t, pipe, hdr, hdr_len, &e);
}

static void reply_ok(trk_tracker *t, uint32_t pipe, const uint8_t *hdr, size_t hdr_len) {
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_OK, 0);
  reply(t, pipe, hdr, hdr_len, &e);
}

/* GRANT {ticket, state, address, token, key, info, session_ms}. */
static void reply_grant(trk_tracker *t, uint32_t pipe, const uint8_t *hdr, size_t hdr_len, const ticket *k) {
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_GRANT, 7);
  rpc_enc_u64(&e, "ticket", k->id);
  bool g = k->state == TK_GRANTED;
  rpc_enc_str(&e, "state", g ? "granted" : "pending");
  rpc_enc_str(&e, "address", g ? k->srv->addr : "");
  rpc_enc_str(&e, "token", g ? k->token : "");
  rpc_enc_str(&e, "key", k->key);
  rpc_enc_key(&e, "info");
  if (g && k->srv->info_len)
    rpc_enc_raw(&e, k->srv->info, k->srv->info_len);
  else
    msgpack_pack_nil(&e.pk);
  rpc_enc_i64(&e, "session_ms", g ? k->deadline - now_ms() : k->session_ms);
  reply(t, pipe, hdr, hdr_len, &e);
}

/* ---- servers, tickets, queues ---------------------------------------------- */

static ticket *ticket_find(trk_tracker *t, uint64_t id) {
  for (ticket *k = t->tickets; k; k = k->next)
    if (k->id == id) return k;
  return NULL;
}

static void ticket_unlink(trk_tracker *t, ticket *k) {
  for (ticket **kp = &t->tickets; *kp; kp = &(*kp)->next)
    if (*kp == k) {
      *kp = k->next;
      t->ntickets--;
      return;
    }
}

static void server_free_up(trk_tracker *t, server *s) {
  s->holder = NULL;
  s->free_since = ++t->free_counter;
}

/* Takes a grant back: the ticket remembers why, and its holder learns it on
 * its next poll or release. */
static void revoke(trk_tracker *t, ticket *k, const char *why) {
  if (k->state != TK_GRANTED) return;
  logf_(t, "session %s on %s (%s) revoked: %s", k->token, k->srv->addr, k->key, why);
  server_free_up(t, k->srv);
  k->srv = NULL;
  k->state = TK_REVOKED;
  k->why = why;
  t->stats.revocations++;
  if (k->polling) { /* a held poll hears it now */
    k->polling = false;
    reply_error(t, k->pipe, k->hdr, k->hdr_len, TS_EDENIED, "session revoked: %s", why);
  }
}

static void server_remove(trk_tracker *t, size_t i, const char *why) {
  server *s = t->servers[i];
  if (s->holder) revoke(t, s->holder, why);
  logf_(t, "server %s (%s, id %llu) removed: %s", s->addr, s->key, (unsigned long long)s->id, why);
  ts_free(s->info);
  ts_free(s);
  t->servers[i] = t->servers[--t->nservers];
}

static void grant(trk_tracker *t, server *s, ticket *k) {
  rpc_token_new(k->token);
  k->state = TK_GRANTED;
  k->srv = s;
  k->deadline = now_ms() + k->session_ms;
  s->holder = k;
  t->stats.grants++;
  logf_(t, "granted %s (%s) to ticket %llu", s->addr, s->key, (unsigned long long)k->id);
  if (k->polling) {
    k->polling = false;
    reply_grant(t, k->pipe, k->hdr, k->hdr_len, k);
  }
}

static server *free_server(trk_tracker *t, const char *key) {
  server *best = NULL;
  for (size_t i = 0; i < t->nservers; i++) {
    server *s = t->servers[i];
    if (!s->holder && !strcmp(s->key, key) && (!best || s->free_since < best->free_since)) best = s;
  }
  return best;
}

/* Gives free servers of `key` to its pending tickets: higher priority first,
 * FIFO within a priority; a ticket whose connection is gone is dropped. */
static void dispatch(trk_tracker *t, const char *key) {
  for (;;) {
    server *s = free_server(t, key);
    if (!s) return;
    ticket *best = NULL;
    for (ticket *k = t->tickets; k; k = k->next)
      if (k->state == TK_PENDING && !strcmp(k->key, key) &&
          (!best || k->prio > best->prio || (k->prio == best->prio && k->seq < best->seq)))
        best = k;
    if (!best) return;
    if (!pipe_alive(t, best->pipe)) {
      ticket_unlink(t, best);
      ts_free(best);
      continue;
    }
    grant(t, s, best);
  }
}

/* ---- handlers -------------------------------------------------------------- */

typedef struct req {
  trk_tracker *t;
  uint32_t pipe;
  const uint8_t *hdr;
  size_t hdr_len;
  rpc_msg *m;
} req;

#define FAIL(st, ...) (reply_error(r->t, r->pipe, r->hdr, r->hdr_len, (st), __VA_ARGS__), (void)0)
#define BAD() FAIL(TS_EPROTO, "%s", r->m->err)

/* A request about a board that another connection registered: refused,
 * whatever the sender's role (it would get the board's tokens, remove it or
 * replace it). */
static void refuse_foreign(req *r, const char *what, const server *s) {
  r->t->stats.refused++;
  logf_(r->t, "connection %u refused '%s' of server %llu (%s, %s): registered by connection %u", r->pipe, what,
        (unsigned long long)s->id, s->key, s->addr, s->pipe);
  FAIL(TS_EDENIED, "%s: server %llu (%s at %s) is registered by another connection", what,
       (unsigned long long)s->id, s->key, s->addr);
}

static void h_register(req *r) {
  trk_tracker *t = r->t;
  char key[RPC_MAX_KEY + 1], addr[RPC_MAX_ADDR + 1];
  if (rpc_need(r->m, rpc_get_str(r->m, NULL, "key", key, sizeof key), "key") ||
      rpc_need(r->m, rpc_get_str(r->m, NULL, "address", addr, sizeof addr), "address"))
    return BAD();
  if (!key[0] || !addr[0]) return FAIL(TS_EPROTO, "key and address must not be empty");
  const msgpack_object *info = rpc_find(&r->m->root, "info");
  msgpack_sbuffer isb;
  msgpack_sbuffer_init(&isb);
  if (info && info->type != MSGPACK_OBJECT_NIL) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, &isb, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, *info);
    if (isb.size > TRK_MAX_INFO) {
      msgpack_sbuffer_destroy(&isb);
      return FAIL(TS_ETOOBIG, "info is %zu bytes packed; at most %d", isb.size, TRK_MAX_INFO);
    }
  }
  if (t->nservers >= MAX_SERVERS) {
    msgpack_sbuffer_destroy(&isb);
    return FAIL(TS_ETOOBIG, "tracker full (%d servers)", MAX_SERVERS);
  }
  if (t->nservers == t->capservers) {
    size_t nc = t->capservers ? t->capservers * 2 : 64;
    server **ns = ts_realloc(t->servers, nc * sizeof *ns);
    if (!ns) {
      msgpack_sbuffer_destroy(&isb);
      return FAIL(TS_ENOMEM, "out of memory");
    }
    t->servers = ns;
    t->capservers = nc;
  }
  /* the same board registering again (restarted, or re-registering on its
   * connection): its old entry goes — unless another live connection holds
   * it, which is a register-over and refused */
  size_t old = t->nservers;
  for (size_t i = 0; i < t->nservers; i++)
    if (!strcmp(t->servers[i]->addr, addr) && !strcmp(t->servers[i]->key, key)) old = i;
  if (old < t->nservers && t->servers[old]->pipe != r->pipe && pipe_alive(t, t->servers[old]->pipe)) {
    msgpack_sbuffer_destroy(&isb);
    return refuse_foreign(r, "register", t->servers[old]);
  }
  server *s = ts_calloc(1, sizeof *s);
  if (!s) {
    msgpack_sbuffer_destroy(&isb);
    return FAIL(TS_ENOMEM, "out of memory");
  }
  if (old < t->nservers) server_remove(t, old, "server re-registered");
  memcpy(s->key, key, sizeof key);
  memcpy(s->addr, addr, sizeof addr);
  s->info_len = isb.size;
  s->info = (uint8_t *)msgpack_sbuffer_release(&isb);
  msgpack_sbuffer_destroy(&isb);
  s->id = ++t->next_id;
  s->pipe = r->pipe;
  s->last_hb = now_ms();
  s->free_since = ++t->free_counter;
  t->servers[t->nservers++] = s;
  t->stats.registrations++;
  logf_(t, "registered %s (%s) as server %llu", s->addr, s->key, (unsigned long long)s->id);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_REGISTERED, 3);
  rpc_enc_u64(&e, "server_id", s->id);
  rpc_enc_i64(&e, "heartbeat_ms", t->cfg.heartbeat_ms);
  rpc_enc_i64(&e, "evict_ms", t->cfg.evict_ms);
  reply(t, r->pipe, r->hdr, r->hdr_len, &e);
  dispatch(t, key);
}

static void h_heartbeat(req *r) {
  uint64_t id;
  if (rpc_need(r->m, rpc_get_u64(r->m, NULL, "server_id", UINT64_MAX, &id), "server_id")) return BAD();
  server *s = NULL;
  for (size_t i = 0; i < r->t->nservers && !s; i++)
    if (r->t->servers[i]->id == id) s = r->t->servers[i];
  if (!s) return FAIL(TS_ENOTFOUND, "unknown server_id %llu (evicted?): register again", (unsigned long long)id);
  if (s->pipe != r->pipe) return refuse_foreign(r, "heartbeat", s);
  s->last_hb = now_ms();
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_HEARTBEAT_ACK, 1);
  rpc_enc_key(&e, "tokens");
  msgpack_pack_array(&e.pk, s->holder ? 1 : 0);
  if (s->holder) rpc_pack_str(&e.pk, s->holder->token);
  reply(r->t, r->pipe, r->hdr, r->hdr_len, &e);
}

static void h_deregister(req *r) {
  uint64_t id;
  if (rpc_need(r->m, rpc_get_u64(r->m, NULL, "server_id", UINT64_MAX, &id), "server_id")) return BAD();
  for (size_t i = 0; i < r->t->nservers; i++)
    if (r->t->servers[i]->id == id) {
      if (r->t->servers[i]->pipe != r->pipe) return refuse_foreign(r, "deregister", r->t->servers[i]);
      server_remove(r->t, i, "server deregistered");
      return reply_ok(r->t, r->pipe, r->hdr, r->hdr_len);
    }
  FAIL(TS_ENOTFOUND, "unknown server_id %llu", (unsigned long long)id);
}

static void h_request(req *r) {
  trk_tracker *t = r->t;
  char key[RPC_MAX_KEY + 1];
  int64_t prio = 0, session_ms = TRK_SESSION_DEFAULT_MS;
  ts_status st;
  if (rpc_need(r->m, rpc_get_str(r->m, NULL, "key", key, sizeof key), "key")) return BAD();
  if (!key[0]) return FAIL(TS_EPROTO, "key must not be empty");
  if ((st = rpc_get_i64(r->m, NULL, "priority", INT32_MIN, INT32_MAX, &prio)) && st != TS_ENOTFOUND) return BAD();
  if ((st = rpc_get_i64(r->m, NULL, "session_ms", 100, TRK_SESSION_MAX_MS, &session_ms)) && st != TS_ENOTFOUND)
    return BAD();
  size_t mine = 0;
  for (ticket *k = t->tickets; k; k = k->next) mine += k->pipe == r->pipe;
  if (mine >= MAX_TICKETS_PER_PIPE || t->ntickets >= MAX_TICKETS)
    return FAIL(TS_ETOOBIG, "too many tickets; release some first");
  ticket *k = ts_calloc(1, sizeof *k);
  if (!k) return FAIL(TS_ENOMEM, "out of memory");
  k->id = ++t->next_ticket;
  k->seq = ++t->next_seq;
  memcpy(k->key, key, sizeof key);
  k->prio = prio;
  k->session_ms = session_ms;
  k->pipe = r->pipe;
  k->state = TK_PENDING;
  k->next = t->tickets;
  t->tickets = k;
  t->ntickets++;
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_TICKET, 1);
  rpc_enc_u64(&e, "ticket", k->id);
  reply(t, r->pipe, r->hdr, r->hdr_len, &e);
  dispatch(t, key);
}

/* The ticket named by the request, which must belong to its connection. */
static ticket *own_ticket(req *r) {
  uint64_t id;
  if (rpc_need(r->m, rpc_get_u64(r->m, NULL, "ticket", UINT64_MAX, &id), "ticket")) {
    BAD();
    return NULL;
  }
  ticket *k = ticket_find(r->t, id);
  if (!k || k->pipe != r->pipe) {
    FAIL(TS_ENOTFOUND, "unknown ticket %llu", (unsigned long long)id);
    return NULL;
  }
  return k;
}

static void h_poll(req *r) {
  int64_t wait_ms = 0;
  ts_status st = rpc_get_i64(r->m, NULL, "wait_ms", 0, TRK_WAIT_MAX_MS, &wait_ms);
  if (st && st != TS_ENOTFOUND) return BAD();
  if (r->hdr_len > sizeof ((ticket *)0)->hdr) return FAIL(TS_EPROTO, "request routed through too many hops");
  ticket *k = own_ticket(r);
  if (!k) return;
  if (k->state == TK_REVOKED) return FAIL(TS_EDENIED, "session revoked: %s", k->why);
  if (k->state == TK_GRANTED || wait_ms == 0) return reply_grant(r->t, r->pipe, r->hdr, r->hdr_len, k);
  k->polling = true;
  k->poll_deadline = now_ms() + wait_ms;
  memcpy(k->hdr, r->hdr, r->hdr_len);
  k->hdr_len = r->hdr_len;
}

static void h_release(req *r) {
  ticket *k = own_ticket(r);
  if (!k) return;
  int state = k->state;
  const char *why = k->why;
  char key[RPC_MAX_KEY + 1];
  memcpy(key, k->key, sizeof key);
  if (state == TK_GRANTED) {
    server_free_up(r->t, k->srv);
    r->t->stats.releases++;
  }
  ticket_unlink(r->t, k);
  ts_free(k);
  /* the ticket is gone either way; a revoked one says so */
  if (state == TK_REVOKED)
    FAIL(TS_EDENIED, "session had been revoked: %s", why);
  else
    reply_ok(r->t, r->pipe, r->hdr, r->hdr_len);
  if (state == TK_GRANTED) dispatch(r->t, key);
}

typedef struct keycount {
  const char *key;
  uint32_t free_, busy, pending;
} keycount;

static keycount *kc_get(keycount *kc, size_t *n, const char *key) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp(kc[i].key, key)) return &kc[i];
  kc[*n] = (keycount){.key = key};
  return &kc[(*n)++];
}

/* QUERY_REPLY {servers: [{key, address, state, info, server_id, heartbeat_age_ms}],
 *              keys: {KEY: {free, busy, pending}}} */
static void h_query(req *r) {
  trk_tracker *t = r->t;
  keycount *kc = ts_calloc(t->nservers + t->ntickets + 1, sizeof *kc);
  if (!kc) return FAIL(TS_ENOMEM, "out of memory");
  size_t nk = 0;
  for (size_t i = 0; i < t->nservers; i++) {
    keycount *c = kc_get(kc, &nk, t->servers[i]->key);
    if (t->servers[i]->holder)
      c->busy++;
    else
      c->free_++;
  }
  for (ticket *k = t->tickets; k; k = k->next)
    if (k->state == TK_PENDING) kc_get(kc, &nk, k->key)->pending++;
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_QUERY_REPLY, 2);
  rpc_enc_key(&e, "servers");
  msgpack_pack_array(&e.pk, t->nservers);
  int64_t now = now_ms();
  for (size_t i = 0; i < t->nservers; i++) {
    const server *s = t->servers[i];
    msgpack_pack_map(&e.pk, 6);
    rpc_pack_str(&e.pk, "key");
    rpc_pack_str(&e.pk, s->key);
    rpc_pack_str(&e.pk, "address");
    rpc_pack_str(&e.pk, s->addr);
    rpc_pack_str(&e.pk, "state");
    rpc_pack_str(&e.pk, s->holder ? "busy" : "free");
    rpc_pack_str(&e.pk, "info");
    if (s->info_len)
      rpc_enc_raw(&e, s->info, s->info_len);
    else
      msgpack_pack_nil(&e.pk);
    rpc_pack_str(&e.pk, "server_id");
    msgpack_pack_uint64(&e.pk, s->id);
    rpc_pack_str(&e.pk, "heartbeat_age_ms");
    msgpack_pack_int64(&e.pk, now - s->last_hb);
  }
  rpc_enc_key(&e, "keys");
  msgpack_pack_map(&e.pk, nk);
  for (size_t i = 0; i < nk; i++) {
    rpc_pack_str(&e.pk, kc[i].key);
    msgpack_pack_map(&e.pk, 3);
    rpc_pack_str(&e.pk, "free");
    msgpack_pack_uint32(&e.pk, kc[i].free_);
    rpc_pack_str(&e.pk, "busy");
    msgpack_pack_uint32(&e.pk, kc[i].busy);
    rpc_pack_str(&e.pk, "pending");
    msgpack_pack_uint32(&e.pk, kc[i].pending);
  }
  ts_free(kc);
  reply(t, r->pipe, r->hdr, r->hdr_len, &e);
}

/* Which role may send which request: a board ("server") registers,
 * heartbeats and deregisters; a tuner ("client") requests, polls and
 * releases; anyone authenticated may query. */
static const char *role_needed(rpc_type t) {
  switch (t) {
  case RPC_T_REGISTER: case RPC_T_HEARTBEAT: case RPC_T_DEREGISTER: return "server";
  case RPC_T_REQUEST: case RPC_T_POLL: case RPC_T_RELEASE: return "client";
  default: return NULL;
  }
}

/* Serves the decoded request r->m of a connection authenticated as role. */
static void serve(trk_tracker *t, req *r, const char *role) {
  rpc_type ty = r->m->type;
  const char *need = role_needed(ty);
  if (need && strcmp(role, need) != 0) {
    t->stats.bad_msgs++;
    t->stats.refused++;
    logf_(t, "connection %u (role '%s') refused '%s': only a %s may send it", r->pipe, role, rpc_type_name(ty), need);
    reply_error(t, r->pipe, r->hdr, r->hdr_len, TS_EDENIED, "'%s' needs role '%s'; this connection authenticated as '%s'",
                rpc_type_name(ty), need, role);
    return;
  }
  if ((ty == RPC_T_REGISTER || ty == RPC_T_REQUEST) && !pipe_alive(t, r->pipe))
    return; /* closed already: state made for it would never be cleaned up */
  switch (ty) {
  case RPC_T_REGISTER: h_register(r); break;
  case RPC_T_HEARTBEAT: h_heartbeat(r); break;
  case RPC_T_DEREGISTER: h_deregister(r); break;
  case RPC_T_REQUEST: h_request(r); break;
  case RPC_T_POLL: h_poll(r); break;
  case RPC_T_RELEASE: h_release(r); break;
  case RPC_T_QUERY: h_query(r); break;
  default:
    t->stats.bad_msgs++;
    reply_error(t, r->pipe, r->hdr, r->hdr_len, TS_EPROTO, "a tracker does not serve '%s'", rpc_type_name(ty));
  }
}

static void handle(trk_tracker *t, nng_msg *msg) {
  t->stats.msgs++;
  nng_pipe np = nng_msg_get_pipe(msg);
  req r = {.t = t, .pipe = (uint32_t)nng_pipe_id(np), .hdr = nng_msg_header(msg),
           .hdr_len = nng_msg_header_len(msg)};
  rpc_msg m;
  bool dropped = false;
  ts_status st = rpc_authtab_open(&t->auth, np, nng_msg_body(msg), nng_msg_len(msg), &m, &dropped);
  r.m = &m;
  /* REQ semantics: a new request from a connection abandons its held poll */
  for (ticket *k = t->tickets; k; k = k->next)
    if (k->pipe == r.pipe) k->polling = false;
  if (dropped) { /* refused and closed (auth.c logged why) */
    t->stats.bad_msgs++;
    t->stats.refused++;
    return;
  }
  if (st != TS_OK) {
    t->stats.bad_msgs++;
    reply_error(t, r.pipe, r.hdr, r.hdr_len, st, "%s", m.err[0] ? m.err : ts_strerror(st));
    rpc_msg_fini(&m);
    return;
  }
  rpc_enc e;
  if (rpc_authtab_handle(&t->auth, &m, np, &e)) { /* handshake, or refused */
    if (m.type != RPC_T_HELLO && m.type != RPC_T_AUTH) t->stats.bad_msgs++;
    reply(t, r.pipe, r.hdr, r.hdr_len, &e);
    rpc_msg_fini(&m);
    return;
  }
  char role[16];
  rpc_authtab_role(&t->auth, np, role, sizeof role);
  serve(t, &r, role);
  rpc_msg_fini(&m);
}

/* A connection closed: its tickets go (grants back to the pool), a server
 * registered on it is gone. */
static void on_pipe_closed(trk_tracker *t, uint32_t pipe) {
  t->dead[t->ndead++ % NDEAD] = pipe;
  for (size_t i = 0; i < t->nservers;) {
    if (t->servers[i]->pipe == pipe) {
      t->stats.evictions++;
      server_remove(t, i, "server disconnected");
    } else {
      i++;
    }
  }
  for (ticket **kp = &t->tickets; *kp;) {
    ticket *k = *kp;
    if (k->pipe != pipe) {
      kp = &k->next;
      continue;
    }
    *kp = k->next;
    t->ntickets--;
    if (k->state == TK_GRANTED) {
      logf_(t, "client of ticket %llu disconnected: %s (%s) released", (unsigned long long)k->id, k->srv->addr,
            k->key);
      server_free_up(t, k->srv);
      t->stats.disconnect_releases++;
      char key[RPC_MAX_KEY + 1];
      memcpy(key, k->key, sizeof key);
      ts_free(k);
      dispatch(t, key);
    } else {
      ts_free(k);
    }
  }
}

static void tick(trk_tracker *t) {
  int64_t now = now_ms();
  for (size_t i = 0; i < t->nservers;) {
    if (now - t->servers[i]->last_hb > t->cfg.evict_ms) {
      t->stats.evictions++;
      server_remove(t, i, "server evicted: heartbeats stopped");
    } else {
      i++;
    }
  }
  for (ticket *k = t->tickets; k; k = k->next) {
    if (k->state == TK_GRANTED && now > k->deadline) {
      char key[RPC_MAX_KEY + 1];
      memcpy(key, k->key, sizeof key);
      revoke(t, k, "session timed out");
      dispatch(t, key);
    }
    if (k->polling && now >= k->poll_deadline) {
      k->polling = false;
      reply_grant(t, k->pipe, k->hdr, k->hdr_len, k); /* state "pending" */
    }
  }
}

static void *loop(void *arg) {
  trk_tracker *t = arg;
  uint32_t *evs = NULL;
  size_t capevs = 0;
  for (;;) {
    nng_msg *m = NULL;
    int rv = nng_recvmsg(t->sock, &m, 0);
    if (rv == NNG_ECLOSED) break;
    if (atomic_load(&t->stopping)) {
      if (rv == 0) nng_msg_free(m);
      break;
    }
    pthread_mutex_lock(&t->mu);
    if (rv == 0) {
      handle(t, m);
      nng_msg_free(m);
    }
    pthread_mutex_lock(&t->evmu);
    size_t nev = t->nev;
    if (nev > capevs) {
      uint32_t *ne = ts_realloc(evs, nev * sizeof *ne);
      if (ne) {
        evs = ne;
        capevs = nev;
      } else {
        nev = capevs;
      }
    }
    if (nev) memcpy(evs, t->ev, nev * sizeof *evs);
    memmove(t->ev, t->ev + nev, (t->nev - nev) * sizeof *evs);
    t->nev -= nev;
    pthread_mutex_unlock(&t->evmu);
    for (size_t i = 0; i < nev; i++) on_pipe_closed(t, evs[i]);
    int64_t now = now_ms();
    if (now - t->last_tick >= t->cfg.tick_ms) {
      t->last_tick = now;
      tick(t);
    }
    uint32_t busy = 0, pending = 0;
    for (size_t i = 0; i < t->nservers; i++) busy += t->servers[i]->holder != NULL;
    for (ticket *k = t->tickets; k; k = k->next) pending += k->state == TK_PENDING;
    t->stats.servers = (uint32_t)t->nservers;
    t->stats.busy = busy;
    t->stats.pending = pending;
    pthread_mutex_unlock(&t->mu);
  }
  ts_free(evs);
  return NULL;
}

/* Every connection costs a descriptor: take all the hard limit allows, so
 * that the pending-connection caps, not the descriptor limit, decide. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

ts_status trk_tracker_start(const trk_config *cfg, trk_tracker **out, ts_diag *d) {
  *out = NULL;
  raise_nofile();
  if (sodium_init() < 0 || !cfg->secret || !cfg->secret->loaded) {
    ts_diag_set(d, TS_EAUTH, "no secret loaded");
    return TS_EAUTH;
  }
  trk_tracker *t = ts_calloc(1, sizeof *t);
  if (!t) return TS_ENOMEM;
  t->cfg = *cfg;
  if (t->cfg.evict_ms <= 0) t->cfg.evict_ms = TRK_EVICT_MS;
  if (t->cfg.heartbeat_ms <= 0) t->cfg.heartbeat_ms = TRK_HEARTBEAT_MS;
  if (t->cfg.tick_ms <= 0) t->cfg.tick_ms = 50;
  pthread_mutex_init(&t->mu, NULL);
  pthread_mutex_init(&t->evmu, NULL);
  int rv;
  if ((rv = nng_rep0_open_raw(&t->sock)) != 0) {
    ts_diag_set(d, TS_EIO, "cannot open socket: %s", nng_strerror(rv));
    goto fail;
  }
  if (rpc_authtab_init(&t->auth, t->sock, cfg->secret) != TS_OK) {
    ts_diag_set(d, TS_EIO, "cannot set up authentication");
    nng_close(t->sock);
    goto fail;
  }
  t->auth_init = true;
  rpc_authtab_bounds(&t->auth, cfg->handshake_ms, cfg->pending_max, cfg->pending_per_addr, "tracker");
  rpc_authtab_grace(&t->auth, cfg->pending_grace_ms);
  t->auth.on_close = on_close_cb;
  t->auth.on_close_arg = t;
  nng_socket_set_size(t->sock, NNG_OPT_RECVMAXSZ, TRK_MAX_MSG);
  nng_socket_set_ms(t->sock, NNG_OPT_RECVTIMEO, t->cfg.tick_ms);
  nng_socket_set_ms(t->sock, NNG_OPT_SENDTIMEO, 100);
  nng_socket_set_int(t->sock, NNG_OPT_RECVBUF, 1024);
  if ((rv = nng_listener_create(&t->listener, t->sock, cfg->url)) != 0 ||
      (rv = nng_listener_set_size(t->listener, NNG_OPT_RECVMAXSZ, TRK_MAX_MSG)) != 0 ||
      (rv = nng_listener_start(t->listener, 0)) != 0) {
    ts_diag_set(d, TS_EIO, "cannot listen on %s: %s", cfg->url, nng_strerror(rv));
    nng_close(t->sock);
    goto fail;
  }
  if (!strncmp(cfg->url, "tcp", 3) && !rpc_listener_backlog(t->listener, RPC_LISTEN_BACKLOG))
    fprintf(stderr, "tessel tracker: could not raise the listen backlog of %s above nng's 128\n", cfg->url);
  t->last_tick = now_ms();
  if (pthread_create(&t->thread, NULL, loop, t) != 0) {
    ts_diag_set(d, TS_EIO, "cannot start the tracker thread");
    nng_close(t->sock);
    goto fail;
  }
  t->started = true;
  *out = t;
  return TS_OK;
fail:
  if (t->auth_init) rpc_authtab_fini(&t->auth);
  pthread_mutex_destroy(&t->mu);
  pthread_mutex_destroy(&t->evmu);
  ts_free(t->ev);
  ts_free(t);
  return TS_EIO;
}

void trk_tracker_stats(trk_tracker *t, trk_stats *out) {
  pthread_mutex_lock(&t->mu);
  *out = t->stats;
  pthread_mutex_unlock(&t->mu);
  out->nng_stuck = rpc_authtab_stuck(&t->auth);
}

size_t trk_tracker_pending(trk_tracker *t) {
  return rpc_authtab_pending(&t->auth);
}

void trk_tracker_stop(trk_tracker *t) {
  if (!t) return;
  /* The loop thread ends first (it wakes at least every tick_ms), and only then
   * is the socket closed: nng 1.5.2 can free a raw socket's receive queue
   * while its aio-expire thread still times out the recv that a close
   * interrupted, and panics in nni_msgq_cancel on the freed queue's mutex.
   * Then every connection is dropped by TCP disconnect and released by nng
   * before the socket closes, so that the close does not close pipes under
   * arriving messages (rpc/pipe_drop.h); the close itself is bounded all the
   * same. When it gives up, nng may still call on_close_cb and the pipe
   * table's callback: those (t, its event list, the table) stay allocated. */
  atomic_store(&t->stopping, true);
  if (t->started) pthread_join(t->thread, NULL);
  rpc_authtab_drop_all(&t->auth, RPC_DROP_WAIT_MS);
  bool closed = rpc_socket_close(t->sock, t->listener, RPC_CLOSE_WAIT_MS, "tracker");
  if (closed) rpc_authtab_fini(&t->auth);
  for (size_t i = 0; i < t->nservers; i++) {
    ts_free(t->servers[i]->info);
    ts_free(t->servers[i]);
  }
  ts_free(t->servers);
  t->servers = NULL;
  t->nservers = 0;
  while (t->tickets) {
    ticket *k = t->tickets;
    t->tickets = k->next;
    ts_free(k);
  }
  if (!closed) return;
  ts_free(t->ev);
  pthread_mutex_destroy(&t->mu);
  pthread_mutex_destroy(&t->evmu);
  ts_free(t);
}
