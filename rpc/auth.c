/* auth.c — the shared secret, the per-pipe challenge–response of auth.h,
 * the secure channel that follows it, the bounds on unauthenticated pipes,
 * and the client side. Crypto is libsodium's: generichash for the key and
 * the session key, crypto_kdf for the direction keys, crypto_auth
 * (HMAC-SHA512-256) for the handshake macs, XChaCha20-Poly1305
 * (crypto_aead_xchacha20poly1305_ietf) for the frames, randombytes_buf for
 * nonces, crypto_verify_32 for constant-time comparison. */
#include "rpc/auth.h"
#include "rpc/pipe_drop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#define LABEL_SERVER "tessel-rpc-1 server"
#define LABEL_CLIENT "tessel-rpc-1 client"

static bool sodium_ready(void) {
  return sodium_init() >= 0;
}

static int distinct_bytes(const uint8_t *p, size_t n) {
  uint8_t seen[256] = {0};
  int k = 0;
  for (size_t i = 0; i < n; i++)
    if (!seen[p[i]]) seen[p[i]] = 1, k++;
  return k;
}

ts_status rpc_secret_from_bytes(rpc_secret *s, const void *p, size_t n) {
  memset(s, 0, sizeof *s);
  if (n < RPC_SECRET_MIN || distinct_bytes(p, n) < RPC_SECRET_MIN_DISTINCT || !sodium_ready())
    return TS_EAUTH;
  static const uint8_t ctx[] = "tessel-rpc-secret-v1";
  /* key = BLAKE2b-256(content) keyed by a fixed context string */
  crypto_generichash(s->key, sizeof s->key, p, n, ctx, sizeof ctx - 1);
  s->loaded = true;
  return TS_OK;
}

void rpc_secret_wipe(rpc_secret *s) {
  sodium_memzero(s, sizeof *s);
}

#define SECRET_RECIPE "create one with: umask 077; head -c 32 /dev/urandom > ~/.tessel-secret"

ts_status rpc_secret_load(rpc_secret *s, const char *path, ts_diag *d) {
  memset(s, 0, sizeof *s);
  const char *from = "--secret-file";
  if (!path || !*path) {
    path = getenv(RPC_SECRET_ENV);
    from = RPC_SECRET_ENV;
  }
  if (!path || !*path) {
    return ts_diag_set(d, TS_EAUTH, "no shared secret: pass --secret-file FILE or set " RPC_SECRET_ENV
             " (the same file on every host; " SECRET_RECIPE ")");
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s): %s", path, from, strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s) is not a regular file", path, from);
  }
  if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    return ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s) is accessible by group or others (mode %04o): "
                       "run chmod 600 '%s'", path, from, (unsigned)(sb.st_mode & 07777), path);
  }
  uint8_t *buf = ts_malloc(RPC_SECRET_MAX);
  if (!buf) {
    close(fd);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  size_t n = 0;
  bool rd_err = false;
  while (n < RPC_SECRET_MAX) {
    ssize_t r = read(fd, buf + n, RPC_SECRET_MAX - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rd_err = true;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  ts_status st = TS_OK;
  int k = rd_err ? 0 : distinct_bytes(buf, n);
  if (rd_err) {
    st = ts_diag_set(d, TS_EAUTH, "secret file '%s': read error", path);
  } else if (n < RPC_SECRET_MIN) {
    st = ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s) holds %zu bytes; at least %d are required (" SECRET_RECIPE ")",
                     path, from, n, RPC_SECRET_MIN);
  } else if (k < RPC_SECRET_MIN_DISTINCT) {
    st = ts_diag_set(d, TS_EAUTH, "secret file '%s' (%s) has only %d distinct byte values; at least %d are required "
                     "(" SECRET_RECIPE ")", path, from, k, RPC_SECRET_MIN_DISTINCT);
  } else if (rpc_secret_from_bytes(s, buf, n)) {
    st = ts_diag_set(d, TS_EAUTH, "libsodium failed to initialise");
  }
  sodium_memzero(buf, RPC_SECRET_MAX);
  ts_free(buf);
  return st;
}

void rpc_auth_mac(const rpc_secret *s, const char *label, const uint8_t nonce[RPC_NONCE_BYTES],
                  uint8_t mac[32]) {
  crypto_auth_hmacsha512256_state st;
  crypto_auth_hmacsha512256_init(&st, s->key, sizeof s->key);
  crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label, strlen(label));
  crypto_auth_hmacsha512256_update(&st, nonce, RPC_NONCE_BYTES);
  crypto_auth_hmacsha512256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

/* ---- the secure channel ---------------------------------------------------- */
#define LABEL_SESSION "tessel-rpc-2 session"
#define KDF_CONTEXT "tsrpc2ch" /* crypto_kdf_CONTEXTBYTES (8) characters */
#define KDF_C2S 1              /* subkey ids: client-to-server, server-to-client */
#define KDF_S2C 2

void rpc_chan_derive(rpc_chan *c, const rpc_secret *s, const uint8_t cn[RPC_NONCE_BYTES],
                     const uint8_t sn[RPC_NONCE_BYTES], bool client) {
  /* session = BLAKE2b-256(label || client nonce || server nonce) keyed by the key */
  uint8_t session[crypto_kdf_KEYBYTES];
  crypto_generichash_state st;
  crypto_generichash_init(&st, s->key, sizeof s->key, sizeof session);
  crypto_generichash_update(&st, (const uint8_t *)LABEL_SESSION, strlen(LABEL_SESSION));
  crypto_generichash_update(&st, cn, RPC_NONCE_BYTES);
  crypto_generichash_update(&st, sn, RPC_NONCE_BYTES);
  crypto_generichash_final(&st, session, sizeof session);
  sodium_memzero(&st, sizeof st);
  memset(c, 0, sizeof *c);
  crypto_kdf_derive_from_key(client ? c->tx_key : c->rx_key, 32, KDF_C2S, KDF_CONTEXT, session);
  crypto_kdf_derive_from_key(client ? c->rx_key : c->tx_key, 32, KDF_S2C, KDF_CONTEXT, session);
  sodium_memzero(session, sizeof session);
  c->up = true;
}

void rpc_chan_wipe(rpc_chan *c) {
  sodium_memzero(c, sizeof *c);
}

/* The frame header (also the AEAD's associated data) and the AEAD nonce of
 * counter n: the counter as 8 little-endian bytes, then 16 zero bytes. */
static void frame_header(uint8_t h[RPC_FRAME_HDR], uint64_t n) {
  h[0] = RPC_FRAME_MARK;
  for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)(n >> (56 - 8 * i));
}

static void frame_nonce(uint8_t npub[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES], uint64_t n) {
  memset(npub, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  for (int i = 0; i < 8; i++) npub[i] = (uint8_t)(n >> (8 * i));
}

/* Seals with an explicit key and counter (the caller reserved the counter). */
static ts_status seal_with(const uint8_t key[32], uint64_t ctr, const void *p, size_t n, uint8_t **out,
                           size_t *outn) {
  *out = NULL;
  *outn = 0;
  if (n > RPC_MAX_MSG) return TS_ETOOBIG;
  size_t total = RPC_FRAME_HDR + n + RPC_FRAME_TAG;
  uint8_t *f = ts_malloc(total);
  if (!f) return TS_ENOMEM;
  uint8_t npub[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  frame_header(f, ctr);
  frame_nonce(npub, ctr);
  unsigned long long clen = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(f + RPC_FRAME_HDR, &clen, p, n, f, RPC_FRAME_HDR, NULL, npub, key);
  *out = f;
  *outn = RPC_FRAME_HDR + (size_t)clen;
  return TS_OK;
}

ts_status rpc_chan_seal(rpc_chan *c, const void *p, size_t n, uint8_t **out, size_t *outn) {
  ts_status st = seal_with(c->tx_key, c->tx_ctr, p, n, out, outn);
  if (st == TS_OK) c->tx_ctr++;
  return st;
}

/* Checks the frame's form and counter against `want`; 0 or -1 with why. */
static int frame_check(const uint8_t *f, size_t n, uint64_t want, char *why, size_t whyn) {
  if (n < RPC_FRAME_HDR + RPC_FRAME_TAG || f[0] != RPC_FRAME_MARK) {
    snprintf(why, whyn, "an unsealed message (%zu bytes) on the secure channel", n);
    return -1;
  }
  uint64_t got = 0;
  for (int i = 0; i < 8; i++) got = got << 8 | f[1 + i];
  if (got != want) {
    snprintf(why, whyn, "message counter %llu where %llu was due (%s)", (unsigned long long)got,
             (unsigned long long)want, got < want ? "replayed or reordered" : "a message was dropped or reordered");
    return -1;
  }
  return 0;
}

static ts_status open_with(const uint8_t key[32], uint64_t ctr, const uint8_t *f, size_t n, uint8_t **out,
                           size_t *outn, char *why, size_t whyn) {
  *out = NULL;
  *outn = 0;
  if (frame_check(f, n, ctr, why, whyn)) return TS_EAUTH;
  size_t plen = n - RPC_FRAME_HDR - RPC_FRAME_TAG;
  uint8_t *pt = ts_malloc(plen ? plen : 1);
  if (!pt) {
    snprintf(why, whyn, "out of memory");
    return TS_ENOMEM;
  }
  uint8_t npub[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  frame_nonce(npub, ctr);
  unsigned long long mlen = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(pt, &mlen, NULL, f + RPC_FRAME_HDR, n - RPC_FRAME_HDR, f,
                                                 RPC_FRAME_HDR, npub, key) != 0) {
    ts_free(pt);
    snprintf(why, whyn, "message %llu failed authentication (altered or forged)", (unsigned long long)ctr);
    return TS_EAUTH;
  }
  *out = pt;
  *outn = (size_t)mlen;
  return TS_OK;
}

ts_status rpc_chan_open(rpc_chan *c, const void *p, size_t n, uint8_t **out, size_t *outn, char *why,
                        size_t whyn) {
  ts_status st = open_with(c->rx_key, c->rx_ctr, p, n, out, outn, why, whyn);
  if (st == TS_OK) c->rx_ctr++;
  return st;
}

/* ---- server side ---------------------------------------------------------- */
static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pipe_addr(nng_pipe p, char *out, size_t n) {
  nng_sockaddr sa;
  snprintf(out, n, "?");
  if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0) return;
  if (sa.s_family == NNG_AF_INET)
    inet_ntop(AF_INET, &sa.s_in.sa_addr, out, (socklen_t)n);
  else if (sa.s_family == NNG_AF_INET6)
    inet_ntop(AF_INET6, sa.s_in6.sa_addr, out, (socklen_t)n);
  else if (sa.s_family == NNG_AF_IPC)
    snprintf(out, n, "ipc");
  else if (sa.s_family == NNG_AF_INPROC)
    snprintf(out, n, "inproc");
}

/* Marks a pipe as being closed (caller holds mu); the first mark dates it,
 * so that a pipe nng never releases shows (reaper). */
static void mark_closing(rpc_authpipe *ap) {
  if (ap->state != -1) ap->closing_ms = mono_ms();
  ap->state = -1;
}

/* Has the reaper thread drop pipe id soon (caller holds mu): a drop scans
 * the process's descriptors (rpc/pipe_drop.h), which the thread serving
 * requests should not do once per refused message. */
static void drop_soon(rpc_authtab *tab, rpc_authpipe *ap) {
  if (!ap || ap->state == -1 || ap->state == -2) return;
  ap->state = -2;
  pthread_cond_signal(&tab->cv);
}

static void refuse_log(rpc_authtab *tab, uint32_t id, const char *addr, const char *why) {
  fprintf(stderr, "%s: connection %u from %s refused: %s; connection closed\n", tab->log ? tab->log : "rpc", id,
          addr, why);
}

/* caller holds mu; returns NULL if absent */
static rpc_authpipe *find_pipe(rpc_authtab *tab, uint32_t id) {
  for (size_t i = 0; i < tab->n; i++)
    if (tab->pipes[i].pipe_id == id) return &tab->pipes[i];
  return NULL;
}

/* caller holds mu */
static rpc_authpipe *add_pipe(rpc_authtab *tab, uint32_t id) {
  if (tab->n == tab->cap) {
    size_t cap = tab->cap ? tab->cap * 2 : 16;
    rpc_authpipe *np = ts_realloc(tab->pipes, cap * sizeof *np);
    if (!np) return NULL;
    tab->pipes = np;
    tab->cap = cap;
  }
  rpc_authpipe *ap = &tab->pipes[tab->n++];
  memset(ap, 0, sizeof *ap);
  ap->pipe_id = id;
  return ap;
}

/* Pending pipes per source address, counted by addr_key in an open-addressing
 * table of a power-of-two size (slots). */
typedef struct addr_count {
  uint64_t *key;
  uint32_t *n;
  size_t slots;
} addr_count;

static uint32_t *addr_slot(addr_count *ac, uint64_t key) {
  size_t i = (size_t)key & (ac->slots - 1);
  while (ac->n[i] && ac->key[i] != key) i = (i + 1) & (ac->slots - 1);
  ac->key[i] = key;
  return &ac->n[i];
}

static bool pending(const rpc_authpipe *ap) {
  return ap->state == 0 || ap->state == 1; /* not authenticated, not being closed */
}

static bool same_addr(const rpc_authpipe *a, const rpc_authpipe *b) {
  return a->addr_key == b->addr_key && strcmp(a->addr, b->addr) == 0;
}

/* When more than cap pipes are pending (of nw's address when by_addr, nw
 * included), the pending pipe other than nw to close to make room for it,
 * or NULL when none may go; *over says whether the cap is passed. Only a
 * stalled pipe may go: first one that has sent no hello for the grace
 * (tab->grace_ms), then one challenged that long ago without an answer. A
 * good client sends its hello as it connects and answers its challenge
 * within a round trip, so a flood from its own address goes before it, and
 * a burst of new connections cannot push out one still in its handshake: nw
 * is refused instead (pipe_cb). Under the per-socket cap (by_addr false),
 * among equally stalled pipes those of the address with the most pending go
 * first, and a young pipe may go for nw when its address has more pending
 * than nw's: a flood from many addresses does not shut out a client with
 * one connection. Then the oldest goes. Caller holds mu. */
static rpc_authpipe *pick_victim(rpc_authtab *tab, const rpc_authpipe *nw, bool by_addr, size_t cap, bool *over) {
  size_t count = 0;
  for (size_t i = 0; i < tab->n; i++)
    count += pending(&tab->pipes[i]) && (!by_addr || same_addr(&tab->pipes[i], nw));
  *over = count > cap;
  if (!*over) return NULL;
  addr_count ac = {0};
  if (!by_addr) {
    for (ac.slots = 16; ac.slots < 2 * tab->n + 2; ac.slots *= 2) {}
    ac.key = ts_malloc(ac.slots * sizeof *ac.key);
    ac.n = ts_calloc(ac.slots, sizeof *ac.n);
    if (!ac.key || !ac.n) ts_free(ac.key), ts_free(ac.n), ac.key = NULL, ac.n = NULL; /* counts of 1 */
    for (size_t i = 0; ac.n && i < tab->n; i++)
      if (pending(&tab->pipes[i])) ++*addr_slot(&ac, tab->pipes[i].addr_key);
  }
  uint32_t nw_count = ac.n ? *addr_slot(&ac, nw->addr_key) : 1;
  rpc_authpipe *best = NULL;
  int best_rank = -1; /* 2: silent, 1: challenge unanswered, 0: young */
  uint32_t best_count = 0;
  int64_t now = mono_ms();
  for (size_t i = 0; i < tab->n; i++) {
    rpc_authpipe *ap = &tab->pipes[i];
    if (!pending(ap) || ap == nw || (by_addr && !same_addr(ap, nw))) continue;
    int rank = ap->state == 0 ? 2 * (now - ap->added_ms >= tab->grace_ms) : now - ap->challenged_ms >= tab->grace_ms;
    uint32_t c = ac.n ? *addr_slot(&ac, ap->addr_key) : 1;
    if (rank == 0 && (by_addr || c <= nw_count)) continue; /* young, and not of a busier address */
    if (rank > best_rank || (rank == best_rank && (c > best_count || (c == best_count && ap->added_ms < best->added_ms))))
      best = ap, best_rank = rank, best_count = c;
  }
  ts_free(ac.key);
  ts_free(ac.n);
  return best;
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg) {
  rpc_authtab *tab = arg;
  uint32_t id = nng_pipe_id(p);
  if (ev == NNG_PIPE_EV_ADD_PRE) {
    /* a new pipe (before it can deliver anything) starts pending; over a cap, a stalled pending pipe of its
     * address, else one of all, is closed to make room (stalled_pending), and when none has stalled the new
     * pipe is refused */
    char addr[48];
    pipe_addr(p, addr, sizeof addr);
    int victims = 0;
    bool refused = false;
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = tab->closing ? NULL : find_pipe(tab, id);
    if (!ap && !tab->closing) ap = add_pipe(tab, id);
    if (!ap) { /* out of memory, or the socket is about to close (rpc_authtab_drop_all) */
      refused = true;
    } else {
      snprintf(ap->addr, sizeof ap->addr, "%s", addr);
      uint8_t h[crypto_shorthash_BYTES];
      crypto_shorthash(h, (const uint8_t *)addr, strlen(addr), tab->addr_hkey);
      memcpy(&ap->addr_key, h, sizeof ap->addr_key);
      ap->added_ms = mono_ms();
      bool over;
      rpc_authpipe *o = pick_victim(tab, ap, true, (size_t)tab->pending_per_addr, &over);
      if (o) o->state = -2, victims++;
      if (!over || o) {
        o = pick_victim(tab, ap, false, (size_t)tab->pending_max, &over);
        if (o) o->state = -2, victims++, over = false;
      }
      if (over) mark_closing(ap), refused = true;
      tab->refused += (uint64_t)victims + refused;
      /* the reaper thread closes them: never another pipe from inside nng's callback */
      if (victims) pthread_cond_signal(&tab->cv);
    }
    pthread_mutex_unlock(&tab->mu);
    if (refused) nng_pipe_close(p); /* not started yet: nothing is being received on it */
    return;
  }
  if (ev != NNG_PIPE_EV_REM_POST) return;
  pthread_mutex_lock(&tab->mu);
  for (size_t i = 0; i < tab->n; i++)
    if (tab->pipes[i].pipe_id == id) {
      sodium_memzero(&tab->pipes[i], sizeof tab->pipes[i]);
      tab->pipes[i] = tab->pipes[--tab->n];
      break;
    }
  pthread_mutex_unlock(&tab->mu);
  if (tab->on_close) tab->on_close(tab->on_close_arg, id);
}

/* Drops pipes that have not authenticated within the deadline, that are
 * over a cap or that were refused (state -2), in one batch per wake-up
 * (rpc/pipe_drop.h); says so once when one of them is not released in
 * RPC_RELEASE_STUCK_MS. */
static void *reaper(void *arg) {
  rpc_authtab *tab = arg;
  uint32_t *ids = NULL;
  size_t capids = 0;
  pthread_mutex_lock(&tab->mu);
  while (!tab->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long step = tab->handshake_ms / 4 < 250 ? tab->handshake_ms / 4 + 1 : 250;
    ts.tv_nsec += step * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&tab->cv, &tab->mu, &ts);
    if (tab->stopping) break;
    int64_t now = mono_ms();
    size_t nids = 0;
    if (capids < tab->n) {
      uint32_t *ni = ts_realloc(ids, tab->n * sizeof *ni);
      if (ni) ids = ni, capids = tab->n;
    }
    for (size_t i = 0; i < tab->n && nids < capids; i++) {
      rpc_authpipe *ap = &tab->pipes[i];
      bool late = ap->state >= 0 && ap->state != 2 && now - ap->added_ms > tab->handshake_ms;
      if (late || ap->state == -2) { /* past the deadline, or over a cap */
        tab->refused += late;
        mark_closing(ap);
        ids[nids++] = ap->pipe_id;
      } else if (ap->state == -1 && now - ap->closing_ms > RPC_RELEASE_STUCK_MS && !tab->nng_stuck) {
        tab->nng_stuck = true;
        fprintf(stderr,
                "%s: nng has not released connection %u %d s after it was closed: nng's pipe reaper is stuck "
                "(nng 1.5.2, docs/RPC.md); connections closed from now on keep their descriptors: restart this "
                "process\n",
                tab->log ? tab->log : "rpc", ap->pipe_id, RPC_RELEASE_STUCK_MS / 1000);
      }
    }
    pthread_mutex_unlock(&tab->mu);
    rpc_pipes_drop(ids, nids);
    pthread_mutex_lock(&tab->mu);
  }
  pthread_mutex_unlock(&tab->mu);
  ts_free(ids);
  return NULL;
}

ts_status rpc_authtab_init(rpc_authtab *tab, nng_socket sock, const rpc_secret *secret) {
  memset(tab, 0, sizeof *tab);
  if (!sodium_ready()) return TS_ESYSTEM;
  pthread_mutex_init(&tab->mu, NULL);
  pthread_cond_init(&tab->cv, NULL);
  tab->secret = secret;
  randombytes_buf(tab->addr_hkey, sizeof tab->addr_hkey);
  rpc_authtab_bounds(tab, 0, 0, 0, NULL);
  rpc_authtab_grace(tab, 0);
  if (nng_pipe_notify(sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, tab) ||
      nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, pipe_cb, tab))
    return TS_EIO;
  if (pthread_create(&tab->reaper, NULL, reaper, tab) != 0) return TS_ESYSTEM;
  tab->reaper_on = true;
  return TS_OK;
}

void rpc_authtab_bounds(rpc_authtab *tab, int handshake_ms, int pending_max, int pending_per_addr,
                        const char *log) {
  pthread_mutex_lock(&tab->mu);
  tab->handshake_ms = handshake_ms > 0 ? handshake_ms : RPC_HANDSHAKE_MS;
  tab->pending_max = pending_max > 0 ? pending_max : RPC_PENDING_MAX;
  tab->pending_per_addr = pending_per_addr > 0 ? pending_per_addr : RPC_PENDING_PER_ADDR;
  if (log) tab->log = log;
  pthread_mutex_unlock(&tab->mu);
}

void rpc_authtab_grace(rpc_authtab *tab, int grace_ms) {
  pthread_mutex_lock(&tab->mu);
  tab->grace_ms = grace_ms > 0 ? grace_ms : RPC_SILENT_GRACE_MS;
  pthread_mutex_unlock(&tab->mu);
}

size_t rpc_authtab_pending(rpc_authtab *tab) {
  pthread_mutex_lock(&tab->mu);
  size_t k = 0;
  for (size_t i = 0; i < tab->n; i++) k += tab->pipes[i].state != 2;
  pthread_mutex_unlock(&tab->mu);
  return k;
}

size_t rpc_authtab_drop_all(rpc_authtab *tab, int wait_ms) {
  pthread_mutex_lock(&tab->mu);
  tab->closing = true; /* new pipes are closed before they start (pipe_cb) */
  size_t n = tab->n;
  uint32_t *ids = ts_malloc((n ? n : 1) * sizeof *ids);
  for (size_t i = 0; ids && i < n; i++) {
    mark_closing(&tab->pipes[i]);
    ids[i] = tab->pipes[i].pipe_id;
  }
  pthread_mutex_unlock(&tab->mu);
  if (!ids) return n; /* the socket's close closes them */
  rpc_pipes_drop(ids, n);
  size_t left = n;
  for (int64_t end = mono_ms() + (wait_ms > 0 ? wait_ms : RPC_DROP_WAIT_MS);;) {
    left = 0;
    pthread_mutex_lock(&tab->mu);
    for (size_t i = 0; i < n; i++) left += find_pipe(tab, ids[i]) != NULL;
    pthread_mutex_unlock(&tab->mu);
    if (!left || mono_ms() >= end) break;
    usleep(2000);
  }
  ts_free(ids);
  return left;
}

bool rpc_authtab_stuck(rpc_authtab *tab) {
  pthread_mutex_lock(&tab->mu);
  bool stuck = tab->nng_stuck;
  pthread_mutex_unlock(&tab->mu);
  return stuck;
}

void rpc_authtab_fini(rpc_authtab *tab) {
  /* the socket must be closed first (no more callbacks) */
  if (tab->reaper_on) {
    pthread_mutex_lock(&tab->mu);
    tab->stopping = true;
    pthread_cond_signal(&tab->cv);
    pthread_mutex_unlock(&tab->mu);
    pthread_join(tab->reaper, NULL);
    tab->reaper_on = false;
  }
  if (tab->pipes) sodium_memzero(tab->pipes, tab->cap * sizeof *tab->pipes);
  ts_free(tab->pipes);
  tab->pipes = NULL;
  tab->n = tab->cap = 0;
  pthread_cond_destroy(&tab->cv);
  pthread_mutex_destroy(&tab->mu);
}

bool rpc_authtab_authed(rpc_authtab *tab, nng_pipe p) {
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, nng_pipe_id(p));
  bool ok = ap && ap->state == 2;
  pthread_mutex_unlock(&tab->mu);
  return ok;
}

void rpc_authtab_role(rpc_authtab *tab, nng_pipe p, char *role, size_t n) {
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, nng_pipe_id(p));
  snprintf(role, n, "%s", ap && ap->state == 2 ? ap->role : "");
  pthread_mutex_unlock(&tab->mu);
}

bool rpc_authtab_handle(rpc_authtab *tab, rpc_msg *m, nng_pipe p, rpc_enc *reply) {
  uint32_t id = nng_pipe_id(p);
  if (m->type == RPC_T_HELLO || m->type == RPC_T_AUTH) {
    /* the handshake runs once per pipe: an authenticated pipe never sees
     * these (they would arrive sealed), a closing one is refused */
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = find_pipe(tab, id);
    bool known = ap && ap->state >= 0 && ap->state != 2;
    pthread_mutex_unlock(&tab->mu);
    if (!known) {
      rpc_enc_error(reply, TS_EAUTH, "connection not accepted (closing, or over the pending limit)");
      return true;
    }
  }
  if (m->type == RPC_T_HELLO) {
    uint64_t ver = 0;
    char role[16];
    const void *cn;
    size_t cnn = 0;
    ts_status st;
    if ((st = rpc_need(m, rpc_get_u64(m, NULL, "version", UINT32_MAX, &ver), "version")) ||
        (st = rpc_need(m, rpc_get_str(m, NULL, "role", role, sizeof role), "role")) ||
        (st = rpc_need(m, rpc_get_bin(m, NULL, "nonce", RPC_NONCE_BYTES, &cn, &cnn), "nonce"))) {
      rpc_enc_error(reply, st, "hello: %s", m->err);
      return true;
    }
    if (cnn != RPC_NONCE_BYTES) {
      rpc_enc_error(reply, TS_EPROTO, "hello: nonce must be %d bytes", RPC_NONCE_BYTES);
      return true;
    }
    if (ver != RPC_PROTO_VERSION) {
      rpc_enc_error(reply, TS_EVERSION, "protocol version %llu, this peer speaks %d",
                    (unsigned long long)ver, RPC_PROTO_VERSION);
      return true;
    }
    uint8_t mac[32], nonce[RPC_NONCE_BYTES];
    randombytes_buf(nonce, sizeof nonce);
    rpc_auth_mac(tab->secret, LABEL_SERVER, cn, mac);
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = find_pipe(tab, id);
    if (ap) {
      ap->state = 1; /* a new hello restarts the handshake */
      ap->challenged_ms = mono_ms();
      memcpy(ap->nonce, nonce, sizeof nonce);
      memcpy(ap->cnonce, cn, sizeof nonce);
      snprintf(ap->role, sizeof ap->role, "%s", role);
    }
    pthread_mutex_unlock(&tab->mu);
    if (!ap) {
      rpc_enc_error(reply, TS_EAUTH, "connection not accepted");
      return true;
    }
    rpc_enc_begin(reply, RPC_T_CHALLENGE, 3);
    rpc_enc_u64(reply, "version", RPC_PROTO_VERSION);
    rpc_enc_bin(reply, "nonce", nonce, sizeof nonce);
    rpc_enc_bin(reply, "mac", mac, sizeof mac);
    return true;
  }
  if (m->type == RPC_T_AUTH) {
    const void *mac;
    size_t macn = 0;
    ts_status st = rpc_need(m, rpc_get_bin(m, NULL, "mac", 32, &mac, &macn), "mac");
    if (st || macn != 32) {
      rpc_enc_error(reply, TS_EPROTO, "auth: %s", st ? m->err : "mac must be 32 bytes");
      return true;
    }
    bool ok = false, challenged = false;
    pthread_mutex_lock(&tab->mu);
    rpc_authpipe *ap = find_pipe(tab, id);
    if (ap && ap->state == 1) {
      challenged = true;
      uint8_t want[32];
      rpc_auth_mac(tab->secret, LABEL_CLIENT, ap->nonce, want);
      ok = crypto_verify_32(want, mac) == 0;
      /* one try per challenge: a failed mac needs a new hello */
      ap->state = ok ? 2 : 0;
      if (ok) rpc_chan_derive(&ap->chan, tab->secret, ap->cnonce, ap->nonce, false);
      sodium_memzero(ap->nonce, sizeof ap->nonce);
      sodium_memzero(ap->cnonce, sizeof ap->cnonce);
    }
    pthread_mutex_unlock(&tab->mu);
    if (ok) rpc_enc_begin(reply, RPC_T_OK, 0); /* sealed: the first frame of the channel */
    else rpc_enc_error(reply, TS_EAUTH, challenged ? "authentication failed: wrong key" :
                                                     "auth without hello");
    return true;
  }
  if (!rpc_authtab_authed(tab, p)) {
    rpc_enc_error(reply, TS_EAUTH, "not authenticated: send hello/auth first");
    return true;
  }
  return false;
}

ts_status rpc_authtab_open(rpc_authtab *tab, nng_pipe p, const void *data, size_t len, rpc_msg *m,
                           bool *dropped) {
  memset(m, 0, sizeof *m);
  m->type = RPC_T_COUNT;
  *dropped = false;
  uint32_t id = nng_pipe_id(p);
  const uint8_t *f = data;
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, id);
  int state = ap ? ap->state : -1;
  char addr[48];
  snprintf(addr, sizeof addr, "%s", ap ? ap->addr : "?");
  uint8_t key[32];
  uint64_t ctr = 0;
  if (state == 2) {
    memcpy(key, ap->chan.rx_key, sizeof key);
    ctr = ap->chan.rx_ctr++; /* a refused frame closes the pipe: no going back */
  }
  pthread_mutex_unlock(&tab->mu);
  if (state == 2) {
    uint8_t *pt;
    size_t ptn;
    ts_status st = open_with(key, ctr, f, len, &pt, &ptn, m->err, sizeof m->err);
    sodium_memzero(key, sizeof key);
    if (st == TS_ENOMEM) return st;
    if (st) {
      pthread_mutex_lock(&tab->mu);
      drop_soon(tab, find_pipe(tab, id));
      tab->refused++;
      pthread_mutex_unlock(&tab->mu);
      refuse_log(tab, id, addr, m->err);
      *dropped = true;
      return TS_EAUTH;
    }
    return rpc_msg_decode_owned(m, pt, ptn);
  }
  if (len > 0 && f[0] == RPC_FRAME_MARK) {
    /* sealed for a channel this pipe does not have: the peer's connection
     * was re-established underneath; it re-authenticates on "auth" */
    snprintf(m->err, sizeof m->err, "not authenticated on this connection: run the handshake again");
    return TS_EAUTH;
  }
  if (len > RPC_PREAUTH_MAX || state < 0) {
    char why[120];
    if (state < 0) snprintf(why, sizeof why, "message on a connection being closed");
    else snprintf(why, sizeof why, "a %zu-byte message before authentication (at most %d)", len, RPC_PREAUTH_MAX);
    snprintf(m->err, sizeof m->err, "%s", why);
    pthread_mutex_lock(&tab->mu);
    drop_soon(tab, find_pipe(tab, id));
    tab->refused++;
    pthread_mutex_unlock(&tab->mu);
    if (state >= 0) refuse_log(tab, id, addr, why);
    *dropped = true;
    return TS_EAUTH;
  }
  return rpc_msg_decode(m, data, len);
}

nng_msg *rpc_authtab_seal(rpc_authtab *tab, nng_pipe p, rpc_enc *e) {
  ts_status st = rpc_enc_finish(e);
  const void *body = e->sb.data;
  size_t n = e->sb.size;
  if (st != TS_OK) body = rpc_nomem_reply(&n); /* the peer still hears why */
  uint32_t id = nng_pipe_id(p);
  pthread_mutex_lock(&tab->mu);
  rpc_authpipe *ap = find_pipe(tab, id);
  bool sealed = ap && ap->state == 2;
  uint8_t key[32];
  uint64_t ctr = 0;
  if (sealed) {
    memcpy(key, ap->chan.tx_key, sizeof key);
    ctr = ap->chan.tx_ctr++;
  }
  pthread_mutex_unlock(&tab->mu);
  uint8_t *frame = NULL;
  size_t fn = 0;
  if (sealed) {
    if (seal_with(key, ctr, body, n, &frame, &fn) != TS_OK) {
      /* the counter is spent: seal the small nomem reply instead */
      body = rpc_nomem_reply(&n);
      if (seal_with(key, ctr, body, n, &frame, &fn) != TS_OK) frame = NULL;
    }
    sodium_memzero(key, sizeof key);
    if (!frame) {
      rpc_enc_fini(e);
      pthread_mutex_lock(&tab->mu);
      drop_soon(tab, find_pipe(tab, id)); /* the channel cannot go on without this counter */
      pthread_mutex_unlock(&tab->mu);
      return NULL;
    }
    body = frame, n = fn;
  }
  nng_msg *msg = NULL;
  if (nng_msg_alloc(&msg, 0) != 0 || nng_msg_append(msg, body, n) != 0) {
    if (msg) nng_msg_free(msg);
    msg = NULL;
    if (sealed) {
      pthread_mutex_lock(&tab->mu);
      drop_soon(tab, find_pipe(tab, id));
      pthread_mutex_unlock(&tab->mu);
    }
  }
  ts_free(frame);
  rpc_enc_fini(e);
  return msg;
}

/* ---- client side ---------------------------------------------------------- */
/* Sends n bytes of plaintext (sealed when ch is up) and receives one reply:
 * its bytes (plaintext, opened) into reply. */
static ts_status chan_send_recv(nng_socket s, rpc_chan *ch, const void *body, size_t n, rpc_msg *reply,
                                nng_pipe *pipe, ts_diag *d) {
  memset(reply, 0, sizeof *reply);
  reply->type = RPC_T_COUNT;
  ts_status st;
  uint8_t *frame = NULL;
  if (ch && ch->up) {
    st = rpc_chan_seal(ch, body, n, &frame, &n);
    if (st) return ts_diag_set(d, st, "send: %s", ts_strerror(st));
    body = frame;
  }
  nng_msg *msg = NULL;
  int rv = nng_msg_alloc(&msg, 0);
  if (rv == 0) rv = nng_msg_append(msg, body, n);
  if (rv == 0) rv = nng_sendmsg(s, msg, 0);
  if (rv && msg) nng_msg_free(msg);
  ts_free(frame);
  if (rv) {
    st = rv == NNG_ENOMEM ? TS_ENOMEM : TS_EIO;
    return ts_diag_set(d, st, "send: %s", nng_strerror(rv));
  }
  rv = nng_recvmsg(s, &msg, 0);
  if (rv) return ts_diag_set(d, rv == NNG_ETIMEDOUT ? TS_ETIMEOUT : TS_EIO, "receive: %s", nng_strerror(rv));
  nng_pipe rp = nng_msg_get_pipe(msg);
  if (pipe) *pipe = rp;
  const uint8_t *rb = nng_msg_body(msg);
  size_t rn = nng_msg_len(msg);
  if (ch && ch->up) {
    if ((uint32_t)nng_pipe_id(rp) != ch->pipe && !(rn > 0 && rb[0] == RPC_FRAME_MARK)) {
      /* redialed underneath: the server does not know this pipe */
      st = rpc_msg_decode(reply, rb, rn);
      nng_msg_free(msg);
      rpc_chan_wipe(ch);
      if (st == TS_OK) rpc_msg_fini(reply);
      return ts_diag_set(d, TS_EAUTH, "the connection was re-established: authenticate again");
    }
    uint8_t *pt = NULL;
    size_t ptn = 0;
    char why[160];
    st = (uint32_t)nng_pipe_id(rp) == ch->pipe ? rpc_chan_open(ch, rb, rn, &pt, &ptn, why, sizeof why) : TS_EAUTH;
    if ((uint32_t)nng_pipe_id(rp) != ch->pipe) snprintf(why, sizeof why, "a sealed reply from another connection");
    nng_msg_free(msg);
    if (st) {
      rpc_chan_wipe(ch);
      rpc_pipe_drop(rp);
      fprintf(stderr, "rpc: reply refused: %s; connection closed\n", why);
      return ts_diag_set(d, st == TS_ENOMEM ? st : TS_EAUTH, "reply refused: %s; connection closed", why);
    }
    st = rpc_msg_decode_owned(reply, pt, ptn);
  } else {
    st = rpc_msg_decode(reply, rb, rn);
    nng_msg_free(msg);
  }
  return rpc_reply_check(reply, st, d);
}

/* A request of n > RPC_PART_MAX bytes as `part` messages {seq, total,
 * data}: every part but the last is answered `ok`, the last one by the
 * whole request's reply (docs/RPC.md, "Parts"). */
static ts_status chan_send_parts(nng_socket s, rpc_chan *ch, const uint8_t *body, size_t n, rpc_msg *reply,
                                 nng_pipe *pipe, ts_diag *d) {
  for (size_t off = 0, seq = 0;; seq++) {
    size_t k = n - off < RPC_PART_MAX ? n - off : RPC_PART_MAX;
    rpc_enc pe;
    rpc_enc_begin(&pe, RPC_T_PART, 3);
    rpc_enc_u64(&pe, "seq", seq);
    rpc_enc_u64(&pe, "total", n);
    rpc_enc_bin(&pe, "data", body + off, k);
    ts_status st = rpc_enc_finish(&pe);
    if (st == TS_OK) st = chan_send_recv(s, ch, pe.sb.data, pe.sb.size, reply, pipe, d);
    else ts_diag_set(d, st, "send: %s", ts_strerror(st));
    rpc_enc_fini(&pe);
    off += k;
    if (st || off == n) return st;
    bool ok = reply->type == RPC_T_OK;
    rpc_type got = reply->type;
    rpc_msg_fini(reply);
    if (!ok) return ts_diag_set(d, TS_EPROTO, "part %zu: unexpected reply '%s'", seq, rpc_type_name(got));
  }
}

ts_status rpc_chan_call(nng_socket s, rpc_chan *ch, rpc_enc *e, rpc_msg *reply, nng_pipe *pipe,
                        ts_diag *d) {
  memset(reply, 0, sizeof *reply);
  reply->type = RPC_T_COUNT;
  ts_status st = rpc_enc_finish(e);
  if (st) {
    rpc_enc_fini(e);
    return ts_diag_set(d, st, "send: %s", ts_strerror(st));
  }
  if (ch && ch->up && e->sb.size > RPC_PART_MAX)
    st = chan_send_parts(s, ch, (const uint8_t *)e->sb.data, e->sb.size, reply, pipe, d);
  else
    st = chan_send_recv(s, ch, e->sb.data, e->sb.size, reply, pipe, d);
  rpc_enc_fini(e);
  return st;
}

static ts_status auth_client_once(nng_socket s, const rpc_secret *secret, const char *role, rpc_chan *ch,
                                  ts_diag *d);

/* A server under a flood of unauthenticated connections may refuse ours,
 * or close it when its handshake stalls: nng redials, and the handshake is
 * run again while the connection keeps being lost, for up to
 * RPC_AUTH_RETRY_MS (each try is bounded by the socket's own timeouts). */
ts_status rpc_auth_client(nng_socket s, const rpc_secret *secret, const char *role, rpc_chan *ch,
                          ts_diag *d) {
  ts_status st = TS_EIO;
  int64_t t0 = mono_ms();
  for (int i = 0; i == 0 || (st == TS_EIO && mono_ms() - t0 < RPC_AUTH_RETRY_MS); i++) {
    if (i) ts_diag_clear(d);
    st = auth_client_once(s, secret, role, ch, d);
  }
  return st;
}

static ts_status auth_client_once(nng_socket s, const rpc_secret *secret, const char *role, rpc_chan *ch,
                                  ts_diag *d) {
  rpc_chan_wipe(ch);
  if (!sodium_ready()) return TS_ESYSTEM;
  uint8_t cn[RPC_NONCE_BYTES];
  randombytes_buf(cn, sizeof cn);
  rpc_enc e;
  rpc_enc_begin(&e, RPC_T_HELLO, 3);
  rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
  rpc_enc_str(&e, "role", role);
  rpc_enc_bin(&e, "nonce", cn, sizeof cn);
  rpc_msg r;
  nng_pipe p1 = NNG_PIPE_INITIALIZER, p2 = NNG_PIPE_INITIALIZER;
  ts_status st = rpc_chan_call(s, NULL, &e, &r, &p1, d);
  if (st) return st;
  const void *sn, *smac;
  size_t snn = 0, smacn = 0;
  if (r.type != RPC_T_CHALLENGE || rpc_get_bin(&r, NULL, "nonce", 64, &sn, &snn) ||
      rpc_get_bin(&r, NULL, "mac", 64, &smac, &smacn) || snn != RPC_NONCE_BYTES || smacn != 32) {
    ts_diag_set(d, TS_EPROTO, "handshake: unexpected reply '%s'", rpc_type_name(r.type));
    rpc_msg_fini(&r);
    return TS_EPROTO;
  }
  uint8_t want[32], mac[32], snonce[RPC_NONCE_BYTES];
  rpc_auth_mac(secret, LABEL_SERVER, cn, want);
  if (crypto_verify_32(want, smac) != 0) {
    ts_diag_set(d, TS_EAUTH, "the peer does not hold our key (server proof failed)");
    rpc_msg_fini(&r);
    return TS_EAUTH;
  }
  memcpy(snonce, sn, sizeof snonce);
  rpc_auth_mac(secret, LABEL_CLIENT, snonce, mac);
  rpc_msg_fini(&r);
  /* the reply to auth is the first sealed frame: set the channel up now */
  rpc_chan_derive(ch, secret, cn, snonce, true);
  ch->pipe = (uint32_t)nng_pipe_id(p1);
  rpc_enc_begin(&e, RPC_T_AUTH, 1);
  rpc_enc_bin(&e, "mac", mac, sizeof mac);
  /* send in clear, receive sealed: run the two halves by hand */
  st = rpc_enc_finish(&e);
  nng_msg *msg = NULL;
  int rv = st ? NNG_ENOMEM : nng_msg_alloc(&msg, 0);
  if (rv == 0) rv = nng_msg_append(msg, e.sb.data, e.sb.size);
  if (rv == 0) rv = nng_sendmsg(s, msg, 0);
  if (rv && msg) nng_msg_free(msg);
  rpc_enc_fini(&e);
  if (rv) {
    rpc_chan_wipe(ch);
    return ts_diag_set(d, TS_EIO, "handshake: send: %s", nng_strerror(rv));
  }
  rv = nng_recvmsg(s, &msg, 0);
  if (rv) {
    rpc_chan_wipe(ch);
    return ts_diag_set(d, rv == NNG_ETIMEDOUT ? TS_ETIMEOUT : TS_EIO, "handshake: receive: %s", nng_strerror(rv));
  }
  p2 = nng_msg_get_pipe(msg);
  const uint8_t *rb = nng_msg_body(msg);
  size_t rn = nng_msg_len(msg);
  if (nng_pipe_id(p2) != nng_pipe_id(p1)) { /* redialed between hello and auth: start again */
    nng_msg_free(msg);
    rpc_chan_wipe(ch);
    return ts_diag_set(d, TS_EIO, "handshake: the connection was closed and re-established during the handshake");
  }
  if (rn > 0 && rb[0] != RPC_FRAME_MARK) { /* a plaintext error: wrong key, version, ... */
    rpc_chan_wipe(ch);
    st = rpc_msg_decode(&r, rb, rn);
    nng_msg_free(msg);
    if (st) return ts_diag_set(d, st, "handshake: %s", r.err);
    char code[32] = "", emsg[512] = "";
    rpc_get_str(&r, NULL, "code", code, sizeof code);
    rpc_get_str(&r, NULL, "message", emsg, sizeof emsg);
    bool is_err = r.type == RPC_T_ERROR;
    rpc_msg_fini(&r);
    if (!is_err) return ts_diag_set(d, TS_EPROTO, "handshake: unexpected unsealed reply to auth");
    st = rpc_status_from_code(code);
    return ts_diag_set(d, st == TS_OK ? TS_EREMOTE : st, "%s", emsg[0] ? emsg : code);
  }
  uint8_t *pt = NULL;
  size_t ptn = 0;
  char why[160] = "a reply from another connection";
  st = nng_pipe_id(p2) == nng_pipe_id(p1) ? rpc_chan_open(ch, rb, rn, &pt, &ptn, why, sizeof why) : TS_EAUTH;
  nng_msg_free(msg);
  if (st) {
    rpc_chan_wipe(ch);
    rpc_pipe_drop(p2);
    return ts_diag_set(d, TS_EAUTH, "handshake: reply to auth refused: %s", why);
  }
  st = rpc_msg_decode_owned(&r, pt, ptn);
  bool ok = st == TS_OK && r.type == RPC_T_OK;
  if (st == TS_OK) rpc_msg_fini(&r);
  if (!ok) {
    rpc_chan_wipe(ch);
    return ts_diag_set(d, TS_EPROTO, "handshake: unexpected reply to auth");
  }
  return TS_OK;
}
