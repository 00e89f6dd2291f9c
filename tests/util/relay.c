/* relay.c — the on-path relay of relay.h. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/auth.h"

typedef struct stream {
  uint8_t *buf;
  size_t n, cap;
  bool hdr_done;
} stream;

bool relay_write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w, n -= (size_t)w;
  }
  return true;
}

void relay_send_msg(int fd, const uint8_t *payload, size_t n) {
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
  relay_write_all(fd, len, 8);
  relay_write_all(fd, payload, n);
}

/* Reads what fd has into s; false at EOF/error. */
static bool fill(int fd, stream *s) {
  if (s->cap - s->n < 65536) {
    s->cap = s->cap ? s->cap * 2 : 1 << 17;
    s->buf = realloc(s->buf, s->cap);
  }
  ssize_t r = read(fd, s->buf + s->n, s->cap - s->n);
  if (r <= 0) return false;
  s->n += (size_t)r;
  return true;
}

/* The next complete unit of s (the SP header first, then messages). */
static bool next_unit(stream *s, uint8_t **p, size_t *n, bool *is_hdr) {
  if (!s->hdr_done) {
    if (s->n < 8) return false;
    *p = s->buf, *n = 8, *is_hdr = true;
    return true;
  }
  if (s->n < 8) return false;
  uint64_t len = 0;
  for (int i = 0; i < 8; i++) len = len << 8 | s->buf[i];
  if (s->n < 8 + len) return false;
  *p = s->buf + 8, *n = (size_t)len, *is_hdr = false;
  return true;
}

static void consume(stream *s, size_t n) {
  memmove(s->buf, s->buf + n, s->n - n);
  s->n -= n;
}

static void *relay_main(void *arg) {
  relay *r = arg;
  int cfd = accept(r->lfd, NULL, NULL);
  close(r->lfd); /* one connection only: a redial finds nobody */
  if (cfd < 0) return NULL;
  int ufd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->target)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(ufd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(cfd);
    return NULL;
  }
  stream cs = {0}, us = {0};
  uint8_t *held = NULL, *prev = NULL;
  size_t heldn = 0, prevn = 0;
  for (;;) {
    struct pollfd pf[2] = {{.fd = cfd, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
    if (poll(pf, 2, 20000) <= 0) break;
    if (pf[1].revents) {
      if (!fill(ufd, &us)) {
        r->up_closed = true;
        break;
      }
      uint8_t *p;
      size_t n;
      bool hdr;
      while (next_unit(&us, &p, &n, &hdr)) {
        if (hdr) {
          relay_write_all(cfd, p, 8);
          us.hdr_done = true;
          consume(&us, 8);
          continue;
        }
        int k = r->s2c++;
        if (r->mode == R_ALTER_REPLY && k == 2 && n > 20) p[n - 3] ^= 0x40;
        relay_send_msg(cfd, p, n);
        consume(&us, 8 + n);
      }
    }
    if (pf[0].revents) {
      if (!fill(cfd, &cs)) {
        r->down_closed = true;
        break;
      }
      uint8_t *p;
      size_t n;
      bool hdr;
      while (next_unit(&cs, &p, &n, &hdr)) {
        if (hdr) {
          relay_write_all(ufd, p, 8);
          cs.hdr_done = true;
          consume(&cs, 8);
          continue;
        }
        int k = r->c2s++;
        /* p[0..4) is the REQ request id, then the body */
        if (r->mode == R_UNSEALED && k == 2) {
          uint8_t *m = malloc(4 + r->subn);
          memcpy(m, p, 4);
          memcpy(m + 4, r->sub, r->subn);
          relay_send_msg(ufd, m, 4 + r->subn);
          free(m);
        } else if (r->mode == R_FORGE && k == 2) {
          for (size_t i = 4 + RPC_FRAME_HDR; i < n; i++) p[i] = (uint8_t)rand();
          relay_send_msg(ufd, p, n);
        } else if (r->mode == R_ALTER && k == 2) {
          p[n - 1] ^= 0x01; /* one bit of the tag */
          relay_send_msg(ufd, p, n);
        } else if (r->mode == R_REPLAY && k == 3) {
          /* the previous sealed request again, under this request's id */
          memcpy(prev, p, 4);
          relay_send_msg(ufd, prev, prevn);
        } else if (r->mode == R_REORDER && k == 2) {
          held = malloc(n), heldn = n; /* withheld: the client times out and sends the next */
          memcpy(held, p, n);
        } else if (r->mode == R_REORDER && k == 3) {
          relay_send_msg(ufd, p, n); /* the later message first ... */
          relay_send_msg(ufd, held, heldn); /* ... then the earlier one */
        } else {
          relay_send_msg(ufd, p, n);
        }
        if (k == 2) {
          prev = malloc(n), prevn = n;
          memcpy(prev, p, n);
        }
        consume(&cs, 8 + n);
      }
    }
  }
  close(cfd);
  close(ufd);
  free(cs.buf), free(us.buf), free(held), free(prev);
  return NULL;
}

bool relay_start(relay *r, int mode, int target, const void *sub, size_t subn) {
  memset(r, 0, sizeof *r);
  r->mode = mode;
  r->target = target;
  r->sub = sub;
  r->subn = subn;
  r->lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(r->lfd, (struct sockaddr *)&sa, sizeof sa) != 0) return false;
  socklen_t sl = sizeof sa;
  getsockname(r->lfd, (struct sockaddr *)&sa, &sl);
  r->port = ntohs(sa.sin_port);
  return listen(r->lfd, 4) == 0 && pthread_create(&r->th, NULL, relay_main, r) == 0;
}

void relay_url(const relay *r, char *out, size_t n) {
  snprintf(out, n, "tcp://127.0.0.1:%d", r->port);
}

int relay_idle_conn(int tport, bool hello) {
  return relay_idle_conn_from(tport, hello, 1);
}

int relay_idle_conn_from(int tport, bool hello, int src) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in from = {.sin_family = AF_INET};
  from.sin_addr.s_addr = htonl((127u << 24) | (uint32_t)src);
  if (src != 1 && bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
    close(fd);
    return -1;
  }
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tport)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  static const uint8_t sp[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0}; /* REQ v0 (48) */
  relay_write_all(fd, sp, 8);
  if (hello) {
    uint8_t nonce[RPC_NONCE_BYTES] = {7};
    rpc_enc e;
    rpc_enc_begin(&e, RPC_T_HELLO, 3);
    rpc_enc_u64(&e, "version", RPC_PROTO_VERSION);
    rpc_enc_str(&e, "role", "client");
    rpc_enc_bin(&e, "nonce", nonce, sizeof nonce);
    rpc_enc_finish(&e);
    uint8_t *m = malloc(4 + e.sb.size);
    m[0] = 0x80, m[1] = m[2] = 0, m[3] = 1; /* request id */
    memcpy(m + 4, e.sb.data, e.sb.size);
    relay_send_msg(fd, m, 4 + e.sb.size);
    free(m);
    rpc_enc_fini(&e);
  }
  return fd;
}
