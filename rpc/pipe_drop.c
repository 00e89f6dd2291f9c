/* pipe_drop.c — pipe drops by TCP disconnect, the bounded socket close and
 * the client pipe set of pipe_drop.h (why: that header, docs/RPC.md). */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "rpc/pipe_drop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- finding a pipe's socket --------------------------------------------- */
/* An address in a form that sorts and compares cheaply. */
typedef struct addr {
  uint16_t fam, port; /* AF_INET / AF_INET6, port in network order */
  uint8_t ip[16];
} addr;

typedef struct want {
  addr rem, loc;
  uint32_t id;
  bool tcp, done;
} want;

static bool from_nng(const nng_sockaddr *a, addr *out) {
  memset(out, 0, sizeof *out);
  if (a->s_family == NNG_AF_INET) {
    out->fam = AF_INET, out->port = a->s_in.sa_port;
    memcpy(out->ip, &a->s_in.sa_addr, 4);
    return true;
  }
  if (a->s_family == NNG_AF_INET6) {
    out->fam = AF_INET6, out->port = a->s_in6.sa_port;
    memcpy(out->ip, a->s_in6.sa_addr, 16);
    return true;
  }
  return false;
}

static bool from_sys(const struct sockaddr_storage *a, addr *out) {
  memset(out, 0, sizeof *out);
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const struct sockaddr_in *)a;
    out->fam = AF_INET, out->port = x->sin_port;
    memcpy(out->ip, &x->sin_addr, 4);
    return true;
  }
  if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
    out->fam = AF_INET6, out->port = x->sin6_port;
    memcpy(out->ip, &x->sin6_addr, 16);
    return true;
  }
  return false;
}

static int addr_cmp(const addr *a, const addr *b) {
  if (a->port != b->port) return a->port < b->port ? -1 : 1;
  if (a->fam != b->fam) return a->fam < b->fam ? -1 : 1;
  return memcmp(a->ip, b->ip, sizeof a->ip);
}

static int want_cmp(const void *a, const void *b) {
  return addr_cmp(&((const want *)a)->rem, &((const want *)b)->rem);
}

/* The index in w[0..n) (sorted by remote address) of the pipe whose
 * connection fd is, or -1: a binary search on the peer's address, then the
 * local one among the pipes with that peer. */
static long match(int fd, const want *w, size_t n) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  addr rem, loc;
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 || !from_sys(&ss, &rem)) return -1;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (addr_cmp(&w[mid].rem, &rem) < 0) lo = mid + 1;
    else hi = mid;
  }
  bool have_loc = false;
  for (size_t i = lo; i < n && addr_cmp(&w[i].rem, &rem) == 0; i++) {
    if (!w[i].tcp || w[i].done) continue;
    if (!have_loc) {
      sl = sizeof ss;
      if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 || !from_sys(&ss, &loc)) return -1;
      have_loc = true;
    }
    if (addr_cmp(&w[i].loc, &loc) == 0) return (long)i;
  }
  return -1;
}

/* Disconnects the socket at fd if it still is the connection of w[0..n)'s
 * pipe i: through a duplicate, checked again, so that a descriptor that nng
 * closed and the system reused meanwhile is left alone. */
static bool disconnect(int fd, const want *w, size_t n, long i) {
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return false;
  bool ok = match(dup, w, n) == i;
  if (ok) {
    struct sockaddr sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_family = AF_UNSPEC;
    ok = connect(dup, &sa, sizeof sa) == 0;
  }
  close(dup);
  return ok;
}

/* One pass over /proc/self/fd for the pipes ids[0..n), with w room for n. */
static size_t drop_with(const uint32_t *ids, size_t n, want *w) {
  size_t ntcp = 0, found = 0;
  for (size_t i = 0; i < n; i++) {
    nng_pipe p = NNG_PIPE_INITIALIZER;
    nng_sockaddr rem, loc;
    p.id = ids[i];
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = ids[i];
    /* gone already (nng_pipe_close below is then harmless), or not TCP */
    w[i].tcp = nng_pipe_get_addr(p, NNG_OPT_REMADDR, &rem) == 0 && nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &loc) == 0 &&
               from_nng(&rem, &w[i].rem) && from_nng(&loc, &w[i].loc) && w[i].rem.fam == w[i].loc.fam;
    ntcp += w[i].tcp;
  }
  qsort(w, n, sizeof *w, want_cmp);
  DIR *dir = ntcp ? opendir("/proc/self/fd") : NULL;
  if (dir) {
    int self = dirfd(dir);
    struct dirent *e;
    while (found < ntcp && (e = readdir(dir)) != NULL) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      int fd = atoi(e->d_name);
      if (fd == self) continue;
      long i = match(fd, w, n);
      if (i >= 0 && disconnect(fd, w, n, i)) {
        w[i].done = true;
        found++;
      }
    }
    closedir(dir);
  }
  for (size_t i = 0; i < n; i++)
    if (!w[i].done) { /* not TCP, or its socket not found */
      nng_pipe p = NNG_PIPE_INITIALIZER;
      p.id = w[i].id;
      nng_pipe_close(p);
    }
  return found;
}

#define CHUNK 16

size_t rpc_pipes_drop(const uint32_t *ids, size_t n) {
  if (n > CHUNK) { /* one pass for the lot */
    want *w = ts_malloc(n * sizeof *w);
    if (w) {
      size_t found = drop_with(ids, n, w);
      ts_free(w);
      return found;
    }
  }
  want w[CHUNK];
  size_t found = 0;
  for (size_t off = 0; off < n; off += CHUNK) found += drop_with(ids + off, n - off < CHUNK ? n - off : CHUNK, w);
  return found;
}

void rpc_pipe_drop(nng_pipe p) {
  uint32_t id = (uint32_t)nng_pipe_id(p);
  if (nng_pipe_id(p) > 0) rpc_pipes_drop(&id, 1);
}

/* ---- listen backlog --------------------------------------------------------- */
int rpc_listener_backlog(nng_listener l, int backlog) {
  nng_sockaddr na;
  addr want_loc, loc;
  if (nng_listener_id(l) <= 0 || nng_listener_get_addr(l, NNG_OPT_LOCADDR, &na) != 0 || !from_nng(&na, &want_loc))
    return 0;
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  int self = dirfd(dir), done = 0;
  struct dirent *e;
  while (!done && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = atoi(e->d_name), on = 0;
    socklen_t ol = sizeof on;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fd == self || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &ol) != 0 || !on ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 || !from_sys(&ss, &loc) || addr_cmp(&loc, &want_loc) != 0)
      continue;
    done = listen(fd, backlog) == 0 ? backlog : 0;
  }
  closedir(dir);
  return done;
}

/* ---- bounded close --------------------------------------------------------- */
typedef struct closer {
  nng_socket sock;
  nng_listener l;
} closer;

static void *close_thread(void *arg) {
  closer *c = arg;
  if (nng_listener_id(c->l) > 0) nng_listener_close(c->l);
  nng_close(c->sock);
  ts_free(c);
  return NULL;
}

bool rpc_socket_close(nng_socket sock, nng_listener l, int wait_ms, const char *who) {
  if (wait_ms <= 0) wait_ms = RPC_CLOSE_WAIT_MS;
  closer *c = ts_malloc(sizeof *c);
  pthread_t th;
  if (!c || (c->sock = sock, c->l = l, pthread_create(&th, NULL, close_thread, c) != 0)) {
    ts_free(c);
    fprintf(stderr, "%s: cannot start a thread to close the socket; closing it here\n", who);
    if (nng_listener_id(l) > 0) nng_listener_close(l);
    nng_close(sock);
    return true;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += wait_ms / 1000;
  ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  if (pthread_timedjoin_np(th, NULL, &ts) == 0) return true;
  pthread_detach(th);
  fprintf(stderr,
          "%s: nng did not close the socket within %d ms: its pipe reaper is stuck (nng 1.5.2, docs/RPC.md); "
          "going on without it\n",
          who, wait_ms);
  return false;
}

/* ---- client pipe sets ------------------------------------------------------ */
static void pipeset_cb(nng_pipe p, nng_pipe_ev ev, void *arg) {
  rpc_pipeset *ps = arg;
  uint32_t id = (uint32_t)nng_pipe_id(p);
  pthread_mutex_lock(&ps->mu);
  if (ev == NNG_PIPE_EV_ADD_POST) {
    if (ps->n < sizeof ps->ids / sizeof ps->ids[0])
      ps->ids[ps->n++] = id;
    else
      ps->lost++;
  } else {
    for (size_t i = 0; i < ps->n; i++)
      if (ps->ids[i] == id) {
        ps->ids[i] = ps->ids[--ps->n];
        break;
      }
  }
  pthread_mutex_unlock(&ps->mu);
}

rpc_pipeset *rpc_pipeset_watch(nng_socket sock, ts_diag *d) {
  rpc_pipeset *ps = ts_calloc(1, sizeof *ps);
  if (!ps) {
    ts_diag_set(d, TS_ENOMEM, "out of memory for the connection's pipe set");
    return NULL;
  }
  pthread_mutex_init(&ps->mu, NULL);
  int rv;
  if ((rv = nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, pipeset_cb, ps)) != 0 ||
      (rv = nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, pipeset_cb, ps)) != 0) {
    nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
    nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
    pthread_mutex_destroy(&ps->mu);
    ts_free(ps);
    ts_diag_set(d, TS_EIO, "cannot watch the socket's pipes: %s", nng_strerror(rv));
    return NULL;
  }
  return ps;
}

/* Whether nng still holds pipe id (its id leaves nng's table right after
 * REM_POST). */
static bool nng_holds(uint32_t id) {
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = id;
  return nng_socket_id(nng_pipe_socket(p)) > 0;
}

/* Whether any of ids[0..n) is still in the set. An id nng no longer holds
 * is dropped from the set: a pipe the peer closes as it is added can have
 * its REM_POST run before its ADD_POST (nng 1.5.2 calls them from different
 * threads), which would leave it in the set for good. */
static bool any_left(rpc_pipeset *ps, const uint32_t *ids, size_t n) {
  bool left = false;
  pthread_mutex_lock(&ps->mu);
  for (size_t j = 0; j < ps->n;)
    if (!nng_holds(ps->ids[j])) ps->ids[j] = ps->ids[--ps->n];
    else j++;
  for (size_t i = 0; i < n && !left; i++)
    for (size_t j = 0; j < ps->n && !left; j++) left = ps->ids[j] == ids[i];
  pthread_mutex_unlock(&ps->mu);
  return left;
}

bool rpc_pipeset_close(rpc_pipeset *ps, nng_socket sock, int wait_ms, const char *who) {
  nng_listener none = NNG_LISTENER_INITIALIZER;
  if (!ps) return rpc_socket_close(sock, none, 0, who);
  uint32_t ids[sizeof ps->ids / sizeof ps->ids[0]];
  pthread_mutex_lock(&ps->mu);
  size_t n = ps->n;
  memcpy(ids, ps->ids, n * sizeof ids[0]);
  pthread_mutex_unlock(&ps->mu);
  rpc_pipes_drop(ids, n);
  for (int64_t end = mono_ms() + (wait_ms > 0 ? wait_ms : RPC_DROP_WAIT_MS); any_left(ps, ids, n) && mono_ms() < end;)
    usleep(2000);
  if (!rpc_socket_close(sock, none, 0, who)) return false; /* nng may still call pipeset_cb */
  pthread_mutex_destroy(&ps->mu);
  ts_free(ps);
  return true;
}
