/* rpc_runner.c — measuring on remote boards (rpc_runner.h): the worker
 * threads and a watchdog that makes a dead or evicted board visible to a
 * worker blocked in a measure call, so the job is requeued at once rather
 * than after the whole reply budget. docs/TUNING.md ("Notes by file:
 * tuner/"). */
#include "tuner/rpc_runner.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/client.h"
#include "tracker/tracker_client.h"

#define BAD_BOARD_S 8.0
#define MAX_BAD 64
#define REQUEST_POLL_MS 1000

typedef struct job {
  int tag;
  int tries;
  void *data;
  size_t n;
  tsrt_measure_opts mo;
  char last_err[512];
  struct job *next;
} job;

typedef struct done_node {
  tun_rpc_done d;
  struct done_node *next;
} done_node;

typedef struct worker {
  struct tun_rpc_runner *r;
  int idx;
  pthread_t th;
  bool started;
  /* guarded by r->mu */
  trk_conn *conn;
  rpc_client *cl;
  trk_grant grant;
  bool busy;            /* inside an upload/measure call */
  int pipe_gone;        /* set by the nng pipe callback (atomic) */
  bool sock_closed;     /* the watchdog closed cl->sock */
} worker;

struct tun_rpc_runner {
  tun_rpc_opts o;
  char tracker[RPC_MAX_ADDR];
  char key[RPC_MAX_KEY + 1];
  rpc_secret secret;
  pthread_mutex_t mu;
  pthread_cond_t cv_job, cv_done;
  job *head, *tail;
  done_node *dhead, *dtail;
  int outstanding;
  int live;             /* workers holding a session */
  double last_live;     /* last time some worker held a session */
  bool stop;
  worker *w;
  int nw;
  pthread_t wd;
  bool wd_started;
  struct { char addr[RPC_MAX_ADDR + 1]; double at; } bad[MAX_BAD];
  int nbad;
  tun_rpc_stats st;
};

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void say(tun_rpc_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(tun_rpc_runner *r, const char *fmt, ...) {
  if (!r->o.log) return;
  va_list ap;
  va_start(ap, fmt);
  flockfile(r->o.log);
  fprintf(r->o.log, "rpc: ");
  vfprintf(r->o.log, fmt, ap);
  fputc('\n', r->o.log);
  funlockfile(r->o.log);
  fflush(r->o.log);
  va_end(ap);
}

void tun_rpc_opts_default(tun_rpc_opts *o) {
  memset(o, 0, sizeof *o);
  o->parallel = 1;
  o->max_tries = 3;
  o->wait_s = 120;
  o->rpc_timeout_s = 30;
}

/* ---- bad boards ---------------------------------------------------------------- */
static void mark_bad(tun_rpc_runner *r, const char *addr) { /* r->mu held */
  double now = tsrt_now();
  int slot = -1;
  for (int i = 0; i < r->nbad; i++)
    if (!strcmp(r->bad[i].addr, addr) || now - r->bad[i].at > BAD_BOARD_S) {
      slot = i;
      break;
    }
  if (slot < 0) slot = r->nbad < MAX_BAD ? r->nbad++ : 0;
  snprintf(r->bad[slot].addr, sizeof r->bad[slot].addr, "%s", addr);
  r->bad[slot].at = now;
}

static bool is_bad(tun_rpc_runner *r, const char *addr) { /* r->mu held */
  double now = tsrt_now();
  for (int i = 0; i < r->nbad; i++)
    if (!strcmp(r->bad[i].addr, addr) && now - r->bad[i].at <= BAD_BOARD_S) return true;
  return false;
}

/* ---- sessions ------------------------------------------------------------------- */
static void on_pipe_rem(nng_pipe p, nng_pipe_ev ev, void *arg) {
  (void)p;
  (void)ev;
  worker *w = arg;
  __atomic_store_n(&w->pipe_gone, 1, __ATOMIC_RELEASE);
}

/* Drops the worker's session; failed: the board failed (remember it). */
static void drop_session(worker *w, bool failed) {
  tun_rpc_runner *r = w->r;
  pthread_mutex_lock(&r->mu);
  rpc_client *cl = w->cl;
  w->cl = NULL;
  bool closed = w->sock_closed;
  w->sock_closed = false;
  if (cl) {
    r->live--;
    if (r->live == 0) r->last_live = tsrt_now();
  }
  if (failed && w->grant.address[0]) mark_bad(r, w->grant.address);
  pthread_mutex_unlock(&r->mu);
  if (cl) {
    if (closed || failed) {
      /* the board is gone or misbehaving: no goodbye round trip */
      nng_close(cl->sock);
      rpc_secret_wipe(&cl->secret);
      ts_free(cl);
    } else {
      rpc_client_close(cl);
    }
  }
  if (w->conn && w->grant.address[0]) {
    trk_release(w->conn, &w->grant, NULL); /* EDENIED once revoked: fine */
  }
  if (failed && w->conn) { /* a fresh tracker connection: nothing stale held */
    trk_conn_close(w->conn);
    pthread_mutex_lock(&r->mu);
    w->conn = NULL;
    pthread_mutex_unlock(&r->mu);
  }
  memset(&w->grant, 0, sizeof w->grant);
}

static bool stopping(tun_rpc_runner *r) {
  pthread_mutex_lock(&r->mu);
  bool s = r->stop;
  pthread_mutex_unlock(&r->mu);
  return s;
}

/* Gets the worker a live session; false when stopping. */
static bool ensure_session(worker *w) {
  tun_rpc_runner *r = w->r;
  ts_diag err;
  while (!stopping(r)) {
    if (w->cl) return true;
    ts_diag_clear(&err);
    if (!w->conn) {
      trk_conn *c = NULL;
      ts_status s = trk_conn_open(r->tracker, &r->secret, "client",
                                   (int)(r->o.rpc_timeout_s * 1000), &c, &err);
      if (s) {
        say(r, "worker %d: tracker %s: %s", w->idx, r->tracker, err.msg);
        nap_ms(s == TS_EAUTH ? 2000 : 500);
        continue;
      }
      pthread_mutex_lock(&r->mu);
      w->conn = c;
      pthread_mutex_unlock(&r->mu);
    }
    trk_grant g;
    memset(&g, 0, sizeof g);
    ts_status s = trk_request(w->conn, r->key, r->o.priority, REQUEST_POLL_MS, 0, &g, &err);
    if (s == TS_ETIMEOUT) continue;
    if (s) {
      say(r, "worker %d: request '%s': %s", w->idx, r->key, err.msg);
      trk_conn_close(w->conn);
      pthread_mutex_lock(&r->mu);
      w->conn = NULL;
      pthread_mutex_unlock(&r->mu);
      nap_ms(500);
      continue;
    }
    pthread_mutex_lock(&r->mu);
    bool bad = is_bad(r, g.address), stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    if (stop) {
      trk_release(w->conn, &g, NULL);
      return false;
    }
    if (bad) { /* granted a board that just failed: give it back, wait for eviction */
      trk_release(w->conn, &g, NULL);
      nap_ms(500);
      continue;
    }
    char url[RPC_MAX_ADDR + 16];
    trk_url(g.address, url, sizeof url);
    rpc_client *cl = NULL;
    s = rpc_client_open(&cl, url, &r->secret, g.token, r->o.rpc_timeout_s < 5 ? r->o.rpc_timeout_s : 5,
                        &err);
    if (s) {
      say(r, "worker %d: board %s: %s", w->idx, g.address, err.msg);
      w->grant = g;
      drop_session(w, true);
      pthread_mutex_lock(&r->mu);
      r->st.board_failures++;
      pthread_mutex_unlock(&r->mu);
      nap_ms(300);
      continue;
    }
    cl->timeout_s = r->o.rpc_timeout_s;
    __atomic_store_n(&w->pipe_gone, 0, __ATOMIC_RELEASE);
    nng_pipe_notify(cl->sock, NNG_PIPE_EV_REM_POST, on_pipe_rem, w);
    pthread_mutex_lock(&r->mu);
    w->grant = g;
    w->cl = cl;
    w->sock_closed = false;
    r->live++;
    r->last_live = tsrt_now();
    r->st.sessions++;
    pthread_mutex_unlock(&r->mu);
    say(r, "worker %d: session on %s", w->idx, g.address);
    return true;
  }
  return false;
}

/* ---- workers -------------------------------------------------------------------- */
static void push_done(tun_rpc_runner *r, done_node *n) { /* r->mu held */
  n->next = NULL;
  if (r->dtail)
    r->dtail->next = n;
  else
    r->dhead = n;
  r->dtail = n;
  pthread_cond_broadcast(&r->cv_done);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  tun_rpc_runner *r = w->r;
  while (ensure_session(w)) {
    pthread_mutex_lock(&r->mu);
    while (!r->stop && !r->head && w->cl) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 200 * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&r->cv_job, &r->mu, &ts);
      if (__atomic_load_n(&w->pipe_gone, __ATOMIC_ACQUIRE)) break; /* idle board died */
    }
    if (r->stop) {
      pthread_mutex_unlock(&r->mu);
      break;
    }
    if (!r->head || __atomic_load_n(&w->pipe_gone, __ATOMIC_ACQUIRE)) {
      pthread_mutex_unlock(&r->mu);
      if (__atomic_load_n(&w->pipe_gone, __ATOMIC_ACQUIRE)) {
        say(r, "worker %d: idle board %s went away", w->idx, w->grant.address);
        drop_session(w, true);
        pthread_mutex_lock(&r->mu);
        r->st.board_failures++;
        pthread_mutex_unlock(&r->mu);
      }
      continue;
    }
    job *j = r->head;
    r->head = j->next;
    if (!r->head) r->tail = NULL;
    j->next = NULL;
    w->busy = true;
    rpc_client *cl = w->cl;
    char board[RPC_MAX_ADDR + 1];
    snprintf(board, sizeof board, "%s", w->grant.address);
    pthread_mutex_unlock(&r->mu);

    j->tries++;
    done_node *dn = calloc(1, sizeof *dn);
    char id[128] = "", name[64];
    snprintf(name, sizeof name, "cand%d.so", j->tag);
    ts_diag cd = {0};
    ts_status s = dn ? rpc_client_upload_bytes(cl, name, j->data, j->n, id, sizeof id, &cd) : TS_ENOMEM;
    if (s == TS_OK) s = rpc_client_measure(cl, id, &j->mo, &dn->d.res, &cd);
    const char *cerr = cd.msg;

    pthread_mutex_lock(&r->mu);
    w->busy = false;
    bool closed = w->sock_closed || __atomic_load_n(&w->pipe_gone, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&r->mu);
    if (s == TS_OK) {
      dn->d.tag = j->tag;
      dn->d.tries = j->tries;
      snprintf(dn->d.board, sizeof dn->d.board, "%s", board);
      pthread_mutex_lock(&r->mu);
      r->st.measured++;
      push_done(r, dn);
      pthread_mutex_unlock(&r->mu);
      free(j->data);
      free(j);
      continue;
    }
    /* The board's failure, never the kernel's. */
    if (dn) tsrt_result_fini(&dn->d.res);
    snprintf(j->last_err, sizeof j->last_err, "board %s: %s%s", board, ts_strerror(s),
             closed ? " (connection lost)" : "");
    if (cerr[0]) {
      size_t l = strlen(j->last_err);
      snprintf(j->last_err + l, sizeof j->last_err - l, ": %.300s", cerr);
    }
    say(r, "worker %d: candidate %d: %s (try %d of %d)", w->idx, j->tag, j->last_err, j->tries,
        r->o.max_tries);
    drop_session(w, true);
    pthread_mutex_lock(&r->mu);
    r->st.board_failures++;
    if (j->tries >= r->o.max_tries || !dn) {
      r->st.lost++;
      if (!dn) dn = calloc(1, sizeof *dn);
      if (dn) {
        memset(&dn->d, 0, sizeof dn->d);
        dn->d.tag = j->tag;
        dn->d.lost = true;
        dn->d.tries = j->tries;
        snprintf(dn->d.error, sizeof dn->d.error, "%s", j->last_err);
        push_done(r, dn);
      } else {
        r->outstanding--; /* cannot even report it; do not hang the caller */
        pthread_cond_broadcast(&r->cv_done);
      }
      free(j->data);
      free(j);
    } else {
      r->st.retries++;
      free(dn);
      j->next = r->head; /* to the front: it has waited long enough */
      r->head = j;
      if (!r->tail) r->tail = j;
      pthread_cond_broadcast(&r->cv_job);
    }
    pthread_mutex_unlock(&r->mu);
  }
  if (w->cl) drop_session(w, false);
  if (w->conn) {
    trk_conn_close(w->conn);
    pthread_mutex_lock(&r->mu);
    w->conn = NULL;
    pthread_mutex_unlock(&r->mu);
  }
  return NULL;
}

static void *watchdog_main(void *arg) {
  tun_rpc_runner *r = arg;
  int tick = 0;
  while (!stopping(r)) {
    nap_ms(100);
    tick++;
    for (int i = 0; i < r->nw; i++) {
      worker *w = &r->w[i];
      pthread_mutex_lock(&r->mu);
      bool check = false;
      if (w->busy && w->cl && !w->sock_closed) {
        if (__atomic_load_n(&w->pipe_gone, __ATOMIC_ACQUIRE)) {
          w->sock_closed = true;
          nng_close(w->cl->sock); /* the blocked call returns at once */
        } else if (tick % 10 == 0 && w->conn) {
          check = true;
        }
      }
      trk_conn *conn = w->conn;
      trk_grant g = w->grant;
      pthread_mutex_unlock(&r->mu);
      if (check) {
        ts_diag err = {0};
        if (trk_check(conn, &g, &err) == TS_EDENIED) {
          pthread_mutex_lock(&r->mu);
          if (w->busy && w->cl && !w->sock_closed && !strcmp(w->grant.token, g.token)) {
            say(r, "worker %d: grant on %s revoked: %s", i, g.address, err.msg);
            w->sock_closed = true;
            nng_close(w->cl->sock);
          }
          pthread_mutex_unlock(&r->mu);
        }
      }
    }
  }
  return NULL;
}

/* ---- API ------------------------------------------------------------------------ */
ts_status tun_rpc_runner_new(const tun_rpc_opts *o, tun_rpc_runner **out, ts_diag *d) {
  *out = NULL;
  if (!o || !o->tracker || !o->tracker[0] || !o->key || !o->key[0])
    return ts_diag_set(d, TS_EINVAL, "rpc runner: --tracker HOST:PORT and --key KEY are required");
  if (strlen(o->key) > RPC_MAX_KEY || strlen(o->tracker) >= RPC_MAX_ADDR)
    return ts_diag_set(d, TS_EINVAL, "rpc runner: key or tracker address too long");
  if (o->parallel < 1 || o->parallel > 256)
    return ts_diag_set(d, TS_EINVAL, "rpc runner: --parallel must be 1..256");
  tun_rpc_runner *r = calloc(1, sizeof *r);
  if (!r) return ts_diag_set(d, TS_ENOMEM, "rpc runner: out of memory");
  r->o = *o;
  if (r->o.max_tries < 1) r->o.max_tries = 3;
  if (r->o.wait_s <= 0) r->o.wait_s = 120;
  if (r->o.rpc_timeout_s <= 0) r->o.rpc_timeout_s = 30;
  snprintf(r->tracker, sizeof r->tracker, "%s", o->tracker);
  snprintf(r->key, sizeof r->key, "%s", o->key);
  ts_diag err = {0};
  if (rpc_secret_load(&r->secret, o->secret_file, &err)) {
    free(r);
    return ts_diag_set(d, TS_EINVAL, "rpc runner: %s", err.msg);
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv_job, NULL);
  pthread_cond_init(&r->cv_done, NULL);
  r->last_live = tsrt_now();
  r->nw = o->parallel;
  r->w = calloc((size_t)r->nw, sizeof *r->w);
  if (!r->w) {
    tun_rpc_runner_free(r);
    return ts_diag_set(d, TS_ENOMEM, "rpc runner: out of memory");
  }
  for (int i = 0; i < r->nw; i++) {
    r->w[i].r = r;
    r->w[i].idx = i;
    r->w[i].started = pthread_create(&r->w[i].th, NULL, worker_main, &r->w[i]) == 0;
  }
  r->wd_started = pthread_create(&r->wd, NULL, watchdog_main, r) == 0;
  *out = r;
  return TS_OK;
}

void tun_rpc_runner_free(tun_rpc_runner *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  pthread_cond_broadcast(&r->cv_job);
  pthread_cond_broadcast(&r->cv_done);
  pthread_mutex_unlock(&r->mu);
  if (r->wd_started) pthread_join(r->wd, NULL);
  for (int i = 0; r->w && i < r->nw; i++) {
    if (!r->w[i].started) continue;
    /* a worker blocked in a measure call: unblock it */
    pthread_mutex_lock(&r->mu);
    if (r->w[i].busy && r->w[i].cl && !r->w[i].sock_closed) {
      r->w[i].sock_closed = true;
      nng_close(r->w[i].cl->sock);
    }
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->w[i].th, NULL);
  }
  free(r->w);
  while (r->head) {
    job *j = r->head;
    r->head = j->next;
    free(j->data);
    free(j);
  }
  while (r->dhead) {
    done_node *n = r->dhead;
    r->dhead = n->next;
    tsrt_result_fini(&n->d.res);
    free(n);
  }
  rpc_secret_wipe(&r->secret);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv_job);
  pthread_cond_destroy(&r->cv_done);
  free(r);
}

ts_status tun_rpc_submit(tun_rpc_runner *r, int tag, const char *path, const tsrt_measure_opts *mo,
                         ts_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) return ts_diag_set(d, TS_EIO, "rpc: cannot read %s: %s", path, strerror(errno));
  job *j = calloc(1, sizeof *j);
  long n = -1;
  if (j && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || n > (long)RPC_MAX_ARTIFACT || fseek(f, 0, SEEK_SET)) {
    fclose(f);
    free(j);
    return ts_diag_set(d, TS_EIO, "rpc: %s: unreadable or over %u bytes", path, RPC_MAX_ARTIFACT);
  }
  j->data = malloc((size_t)n ? (size_t)n : 1);
  if (!j->data || fread(j->data, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(j->data);
    free(j);
    return ts_diag_set(d, TS_EIO, "rpc: cannot read %s", path);
  }
  fclose(f);
  j->n = (size_t)n;
  j->tag = tag;
  j->mo = *mo;
  pthread_mutex_lock(&r->mu);
  if (r->tail)
    r->tail->next = j;
  else
    r->head = j;
  r->tail = j;
  r->outstanding++;
  pthread_cond_signal(&r->cv_job);
  pthread_mutex_unlock(&r->mu);
  return TS_OK;
}

int tun_rpc_outstanding(tun_rpc_runner *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->outstanding;
  pthread_mutex_unlock(&r->mu);
  return n;
}

ts_status tun_rpc_next(tun_rpc_runner *r, double timeout_s, tun_rpc_done *out, ts_diag *d) {
  double t0 = tsrt_now();
  pthread_mutex_lock(&r->mu);
  for (;;) {
    if (r->dhead) {
      done_node *n = r->dhead;
      r->dhead = n->next;
      if (!r->dhead) r->dtail = NULL;
      r->outstanding--;
      pthread_mutex_unlock(&r->mu);
      *out = n->d;
      free(n);
      return TS_OK;
    }
    if (r->outstanding <= 0) {
      pthread_mutex_unlock(&r->mu);
      return TS_ENOTFOUND;
    }
    double now = tsrt_now();
    if (r->live == 0 && now - r->last_live > r->o.wait_s) {
      pthread_mutex_unlock(&r->mu);
      return ts_diag_set(d, TS_EIO, "rpc: no board with key '%s' held for %.0f s (tracker %s)", r->key,
                         r->o.wait_s, r->tracker);
    }
    if (timeout_s >= 0 && now - t0 >= timeout_s) {
      pthread_mutex_unlock(&r->mu);
      return TS_ETIMEOUT;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&r->cv_done, &r->mu, &ts);
  }
}

void tun_rpc_get_stats(tun_rpc_runner *r, tun_rpc_stats *s) {
  pthread_mutex_lock(&r->mu);
  *s = r->st;
  pthread_mutex_unlock(&r->mu);
}

ts_status tun_rpc_board_triple(const tun_rpc_opts *o, char *triple, size_t n, ts_diag *d) {
  rpc_secret sec;
  ts_diag err = {0};
  if (rpc_secret_load(&sec, o->secret_file, &err))
    return ts_diag_set(d, TS_EINVAL, "rpc: %s", err.msg);
  double timeout = o->rpc_timeout_s > 0 ? o->rpc_timeout_s : 30;
  trk_conn *c = NULL;
  ts_status st = TS_OK;
  if (trk_conn_open(o->tracker, &sec, "client", (int)(timeout * 1000), &c, &err)) {
    rpc_secret_wipe(&sec);
    return ts_diag_set(d, TS_EIO, "rpc: tracker %s: %s", o->tracker, err.msg);
  }
  trk_grant g;
  double wait = o->wait_s > 0 ? o->wait_s : 120;
  if (trk_request(c, o->key, o->priority, (int64_t)(wait * 1000), 0, &g, &err)) {
    st = ts_diag_set(d, TS_EIO, "rpc: no board with key '%s': %s", o->key, err.msg);
    goto out;
  }
  char url[RPC_MAX_ADDR + 16];
  trk_url(g.address, url, sizeof url);
  rpc_client *cl = NULL;
  if (rpc_client_open(&cl, url, &sec, g.token, timeout, &err)) {
    st = ts_diag_set(d, TS_EIO, "rpc: board %s: %s", g.address, err.msg);
  } else {
    rpc_msg m;
    const msgpack_object *info = NULL;
    if (rpc_client_info(cl, &m, &err)) {
      st = ts_diag_set(d, TS_EIO, "rpc: board %s: info: %s", g.address, err.msg);
    } else {
      if (rpc_get_map(&m, NULL, "info", &info) || rpc_get_str(&m, info, "triple", triple, n))
        st = ts_diag_set(d, TS_EIO, "rpc: board %s: no triple in its info (%s)", g.address, m.err);
      rpc_msg_fini(&m);
    }
    rpc_client_close(cl);
  }
  trk_release(c, &g, NULL);
out:
  trk_conn_close(c);
  rpc_secret_wipe(&sec);
  return st;
}
