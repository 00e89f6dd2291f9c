/* protocol.c — the message envelope, the strict decoder with typed getters,
 * the encoder and the nng transport helpers of protocol.h.
 *
 * Decoding is two steps. bound_scan() walks the msgpack headers only, to
 * reject before any allocation what msgpack-c would otherwise trust: a
 * container whose declared count exceeds the bytes left (msgpack-c allocates
 * count × sizeof(msgpack_object) up front), nesting deeper than
 * RPC_MAX_DEPTH, ext types (unused), trailing bytes. Then msgpack-c's
 * msgpack_unpack_next decodes, and the envelope is checked. */
#include "rpc/protocol.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

static const char *const type_names[] = {
#define RPC_X_NAME(e, s) s,
    RPC_TYPE_LIST(RPC_X_NAME)
#undef RPC_X_NAME
};

const char *rpc_type_name(rpc_type t) {
  return (unsigned)t < RPC_T_COUNT ? type_names[t] : "?";
}

rpc_type rpc_type_from_name(const char *s, size_t n) {
  for (int i = 0; i < RPC_T_COUNT; i++)
    if (strlen(type_names[i]) == n && memcmp(type_names[i], s, n) == 0) return (rpc_type)i;
  return RPC_T_COUNT;
}

/* The wire names of statuses in error replies ({"code": "auth"}). */
static const ts_status_name wire_codes[] = {
    {TS_OK, "ok"},           {TS_ENOMEM, "nomem"},   {TS_EPROTO, "proto"},
    {TS_EVERSION, "version"}, {TS_EAUTH, "auth"},     {TS_EDENIED, "denied"},
    {TS_ENOTFOUND, "noent"}, {TS_ETOOBIG, "toobig"}, {TS_EIO, "io"},
    {TS_ETIMEOUT, "timeout"}, {TS_ESYSTEM, "system"}, {TS_EREMOTE, "remote"},
    {TS_EPENDING, "pending"},
};
#define NCODES (sizeof wire_codes / sizeof *wire_codes)

const char *rpc_status_code(ts_status st) { return ts_status_name_of(wire_codes, NCODES, st, "remote"); }
ts_status rpc_status_from_code(const char *code) { return ts_status_by_name(wire_codes, NCODES, code, TS_EREMOTE); }

/* ---- bound scan ----------------------------------------------------------- */
static uint64_t be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

/* Returns 0 if buf[0..len) is exactly one msgpack object within the bounds. */
static int bound_scan(const uint8_t *p, size_t len, char *err, size_t errn) {
  uint64_t stack[RPC_MAX_DEPTH + 1]; /* items still expected per open container */
  int depth = 0;
  size_t i = 0;
  stack[0] = 1;
  for (;;) {
    while (depth >= 0 && stack[depth] == 0) depth--;
    if (depth < 0) break;
    if (i >= len) {
      snprintf(err, errn, "truncated message (%zu bytes)", len);
      return -1;
    }
    stack[depth]--;
    uint8_t b = p[i++];
    uint64_t skip = 0, count = 0;
    int hdr = 0;
    bool container = false;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
    } else if (b >= 0x80 && b <= 0x8f) {
      count = 2u * (b & 0x0f), container = true;
    } else if (b >= 0x90 && b <= 0x9f) {
      count = b & 0x0f, container = true;
    } else if (b >= 0xa0 && b <= 0xbf) {
      skip = b & 0x1f;
    } else {
      switch (b) {
      case 0xc4: case 0xd9: hdr = 1; break;
      case 0xc5: case 0xda: hdr = 2; break;
      case 0xc6: case 0xdb: hdr = 4; break;
      case 0xca: skip = 4; break;
      case 0xcb: skip = 8; break;
      case 0xcc: case 0xd0: skip = 1; break;
      case 0xcd: case 0xd1: skip = 2; break;
      case 0xce: case 0xd2: skip = 4; break;
      case 0xcf: case 0xd3: skip = 8; break;
      case 0xdc: hdr = 2, container = true; break;
      case 0xdd: hdr = 4, container = true; break;
      case 0xde: hdr = 2, container = true; break;
      case 0xdf: hdr = 4, container = true; break;
      default:
        snprintf(err, errn, "unsupported msgpack byte 0x%02x at offset %zu", b, i - 1);
        return -1;
      }
      if (hdr) {
        if (len - i < (size_t)hdr) {
          snprintf(err, errn, "truncated message (%zu bytes)", len);
          return -1;
        }
        uint64_t v = be(p + i, hdr);
        i += (size_t)hdr;
        if (container) count = (b == 0xde || b == 0xdf) ? 2 * v : v;
        else skip = v;
      }
    }
    if (skip > len - i) {
      snprintf(err, errn, "truncated message: %llu bytes declared at offset %zu, %zu left",
               (unsigned long long)skip, i, len - i);
      return -1;
    }
    i += (size_t)skip;
    if (container) {
      if (count > len - i) {
        snprintf(err, errn, "container of %llu items at offset %zu exceeds the %zu bytes left",
                 (unsigned long long)count, i, len - i);
        return -1;
      }
      if (depth + 1 > RPC_MAX_DEPTH) {
        snprintf(err, errn, "nesting deeper than %d", RPC_MAX_DEPTH);
        return -1;
      }
      stack[++depth] = count;
    }
  }
  if (i != len) {
    snprintf(err, errn, "%zu trailing bytes after the message", len - i);
    return -1;
  }
  return 0;
}

/* ---- decoding ------------------------------------------------------------- */
static bool key_is(const msgpack_object *k, const char *s) {
  size_t n = strlen(s);
  return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, s, n) == 0;
}

static ts_status check_map_keys(const msgpack_object *o, int depth, char *err, size_t errn) {
  if (o->type == MSGPACK_OBJECT_MAP) {
    const msgpack_object_map *m = &o->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
      const msgpack_object *k = &m->ptr[i].key;
      if (k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 || k->via.str.size > RPC_MAX_KEY) {
        snprintf(err, errn, "map key %u is not a string of 1..%d bytes", i, RPC_MAX_KEY);
            return TS_EPROTO;
      }
      /* quadratic, but maps are small; bounded by the message size anyway */
      if (m->size <= 256)
        for (uint32_t j = 0; j < i; j++)
          if (m->ptr[j].key.via.str.size == k->via.str.size &&
              memcmp(m->ptr[j].key.via.str.ptr, k->via.str.ptr, k->via.str.size) == 0) {
            snprintf(err, errn, "duplicate key '%.*s'", (int)k->via.str.size, k->via.str.ptr);
            return TS_EPROTO;
          }
      ts_status st = check_map_keys(&m->ptr[i].val, depth + 1, err, errn);
      if (st) return st;
    }
  } else if (o->type == MSGPACK_OBJECT_ARRAY) {
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      ts_status st = check_map_keys(&o->via.array.ptr[i], depth + 1, err, errn);
      if (st) return st;
    }
  }
  return TS_OK;
}

void rpc_msg_fini(rpc_msg *m) {
  if (m->zone) msgpack_zone_free(m->zone);
  ts_free(m->buf);
  m->zone = NULL;
  m->buf = NULL;
  m->len = 0;
}

/* Decodes buf[0..len), which m owns from here on (freed on failure). */
static ts_status decode_owned(rpc_msg *m, void *buf, size_t len);

ts_status rpc_msg_decode(rpc_msg *m, const void *data, size_t len) {
  memset(m, 0, sizeof *m);
  m->type = RPC_T_COUNT;
  if (len > RPC_MAX_MSG) {
    snprintf(m->err, sizeof m->err, "message of %zu bytes exceeds %u", len, RPC_MAX_MSG);
    return TS_ETOOBIG;
  }
  if (len == 0 || data == NULL) {
    snprintf(m->err, sizeof m->err, "empty message");
    return TS_EPROTO;
  }
  if (bound_scan(data, len, m->err, sizeof m->err)) return TS_EPROTO;
  void *buf = ts_malloc(len);
  if (!buf) {
    snprintf(m->err, sizeof m->err, "out of memory");
    return TS_ENOMEM;
  }
  memcpy(buf, data, len);
  return decode_owned(m, buf, len);
}

ts_status rpc_msg_decode_owned(rpc_msg *m, void *buf, size_t len) {
  memset(m, 0, sizeof *m);
  m->type = RPC_T_COUNT;
  ts_status st = TS_OK;
  if (len > RPC_MAX_MSG) {
    snprintf(m->err, sizeof m->err, "message of %zu bytes exceeds %u", len, RPC_MAX_MSG);
    st = TS_ETOOBIG;
  } else if (len == 0 || buf == NULL) {
    snprintf(m->err, sizeof m->err, "empty message");
    st = TS_EPROTO;
  } else if (bound_scan(buf, len, m->err, sizeof m->err)) {
    st = TS_EPROTO;
  }
  if (st) {
    ts_free(buf);
    return st;
  }
  return decode_owned(m, buf, len);
}

static ts_status decode_owned(rpc_msg *m, void *buf, size_t len) {
  m->buf = buf;
  m->len = len;
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  size_t off = 0;
  msgpack_unpack_return r = msgpack_unpack_next(&up, m->buf, len, &off);
  if (r != MSGPACK_UNPACK_SUCCESS || off != len) {
    msgpack_unpacked_destroy(&up);
    rpc_msg_fini(m);
    snprintf(m->err, sizeof m->err, "msgpack decoding failed (%d)", (int)r);
    return r == MSGPACK_UNPACK_NOMEM_ERROR ? TS_ENOMEM : TS_EPROTO;
  }
  m->zone = msgpack_unpacked_release_zone(&up);
  m->root = up.data;
  msgpack_unpacked_destroy(&up);
  ts_status st = TS_EPROTO;
  if (m->root.type != MSGPACK_OBJECT_MAP) {
    snprintf(m->err, sizeof m->err, "message is not a map");
    goto fail;
  }
  if ((st = check_map_keys(&m->root, 0, m->err, sizeof m->err))) goto fail;
  st = TS_EPROTO;
  uint64_t v;
  ts_status gs = rpc_get_u64(m, NULL, "v", UINT32_MAX, &v);
  if (gs) {
    rpc_need(m, gs, "v");
    goto fail;
  }
  m->version = (uint32_t)v;
  const msgpack_object *t = rpc_find(&m->root, "t");
  if (!t || t->type != MSGPACK_OBJECT_STR) {
    snprintf(m->err, sizeof m->err, "missing or non-string field 't'");
    goto fail;
  }
  m->type = rpc_type_from_name(t->via.str.ptr, t->via.str.size);
  if (m->version != RPC_PROTO_VERSION) {
    snprintf(m->err, sizeof m->err, "protocol version %u, this build speaks %d", m->version,
             RPC_PROTO_VERSION);
    st = TS_EVERSION;
    goto fail;
  }
  if (m->type == RPC_T_COUNT) {
    snprintf(m->err, sizeof m->err, "unknown message type '%.*s'",
             (int)(t->via.str.size > 40 ? 40 : t->via.str.size), t->via.str.ptr);
    goto fail;
  }
  return TS_OK;
fail: {
  char keep[sizeof m->err];
  uint32_t ver = m->version;
  memcpy(keep, m->err, sizeof keep);
  rpc_msg_fini(m);
  memcpy(m->err, keep, sizeof keep);
  m->version = ver;
  m->type = RPC_T_COUNT;
  return st;
}
}

const msgpack_object *rpc_find(const msgpack_object *map, const char *key) {
  if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
  for (uint32_t i = 0; i < map->via.map.size; i++)
    if (key_is(&map->via.map.ptr[i].key, key)) return &map->via.map.ptr[i].val;
  return NULL;
}

#define LOOKUP()                                                                \
  const msgpack_object *o = rpc_find(map ? map : &m->root, key);                 \
  if (!o) return TS_ENOTFOUND

static ts_status bad(rpc_msg *m, const char *key, const char *what) {
  snprintf(m->err, sizeof m->err, "field '%s': %s", key, what);
  return TS_EPROTO;
}

ts_status rpc_need(rpc_msg *m, ts_status st, const char *key) {
  if (st == TS_ENOTFOUND) {
    snprintf(m->err, sizeof m->err, "missing field '%s'", key);
    return TS_EPROTO;
  }
  return st;
}

ts_status rpc_get_u64(rpc_msg *m, const msgpack_object *map, const char *key, uint64_t max,
                       uint64_t *out) {
  LOOKUP();
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return bad(m, key, "expected an unsigned integer");
  if (o->via.u64 > max) return bad(m, key, "out of range");
  *out = o->via.u64;
  return TS_OK;
}

ts_status rpc_get_i64(rpc_msg *m, const msgpack_object *map, const char *key, int64_t lo,
                       int64_t hi, int64_t *out) {
  LOOKUP();
  int64_t v;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > (uint64_t)INT64_MAX) return bad(m, key, "out of range");
    v = (int64_t)o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    v = o->via.i64;
  } else {
    return bad(m, key, "expected an integer");
  }
  if (v < lo || v > hi) return bad(m, key, "out of range");
  *out = v;
  return TS_OK;
}

ts_status rpc_get_f64(rpc_msg *m, const msgpack_object *map, const char *key, double lo,
                       double hi, double *out) {
  LOOKUP();
  double v;
  if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64) v = o->via.f64;
  else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) v = (double)o->via.u64;
  else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) v = (double)o->via.i64;
  else return bad(m, key, "expected a number");
  if (!isfinite(v) || v < lo || v > hi) return bad(m, key, "out of range");
  *out = v;
  return TS_OK;
}

ts_status rpc_get_bool(rpc_msg *m, const msgpack_object *map, const char *key, bool *out) {
  LOOKUP();
  if (o->type != MSGPACK_OBJECT_BOOLEAN) return bad(m, key, "expected a boolean");
  *out = o->via.boolean;
  return TS_OK;
}

ts_status rpc_get_str(rpc_msg *m, const msgpack_object *map, const char *key, char *dst,
                       size_t cap) {
  LOOKUP();
  if (o->type != MSGPACK_OBJECT_STR) return bad(m, key, "expected a string");
  size_t n = o->via.str.size;
  if (n >= cap || n > RPC_MAX_STR) return bad(m, key, "string too long");
  if (memchr(o->via.str.ptr, 0, n)) return bad(m, key, "string contains a NUL byte");
  memcpy(dst, o->via.str.ptr, n);
  dst[n] = 0;
  return TS_OK;
}

ts_status rpc_get_bin(rpc_msg *m, const msgpack_object *map, const char *key, size_t maxn,
                       const void **p, size_t *n) {
  LOOKUP();
  if (o->type == MSGPACK_OBJECT_BIN) {
    *p = o->via.bin.ptr;
    *n = o->via.bin.size;
  } else if (o->type == MSGPACK_OBJECT_STR) {
    *p = o->via.str.ptr;
    *n = o->via.str.size;
  } else {
    return bad(m, key, "expected binary data");
  }
  if (*n > maxn) return bad(m, key, "too large");
  return TS_OK;
}

ts_status rpc_get_array(rpc_msg *m, const msgpack_object *map, const char *key, uint32_t maxn,
                         const msgpack_object **items, uint32_t *n) {
  LOOKUP();
  if (o->type != MSGPACK_OBJECT_ARRAY) return bad(m, key, "expected an array");
  if (o->via.array.size > maxn) return bad(m, key, "too many items");
  *items = o->via.array.ptr;
  *n = o->via.array.size;
  return TS_OK;
}

ts_status rpc_get_map(rpc_msg *m, const msgpack_object *map, const char *key,
                       const msgpack_object **out) {
  LOOKUP();
  if (o->type != MSGPACK_OBJECT_MAP) return bad(m, key, "expected a map");
  *out = o;
  return TS_OK;
}

/* ---- encoding ------------------------------------------------------------- */
void rpc_pack_str(msgpack_packer *pk, const char *s) {
  size_t n = s ? strlen(s) : 0;
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s ? s : "", n);
}

/* The packer's write callback: msgpack_sbuffer's growth, through ts_realloc
 * (so fault injection reaches encoding); an allocation failure marks e. */
static int enc_write(void *data, const char *buf, size_t len) {
  rpc_enc *e = data;
  msgpack_sbuffer *sb = &e->sb;
  if (e->oom) return -1;
  if (sb->alloc - sb->size < len) {
    size_t cap = sb->alloc ? sb->alloc * 2 : 256;
    while (cap - sb->size < len) cap *= 2;
    char *p = ts_realloc(sb->data, cap);
    if (!p) {
      e->oom = true;
      return -1;
    }
    sb->data = p;
    sb->alloc = cap;
  }
  memcpy(sb->data + sb->size, buf, len);
  sb->size += len;
  return 0;
}

void rpc_enc_raw(rpc_enc *e, const void *p, size_t n) {
  enc_write(e, p, n);
}

void rpc_enc_begin(rpc_enc *e, rpc_type t, uint32_t nfields) {
  memset(&e->sb, 0, sizeof e->sb);
  msgpack_packer_init(&e->pk, e, enc_write);
  e->want = nfields;
  e->have = 0;
  e->fail = e->oom = false;
  if (msgpack_pack_map(&e->pk, nfields + 2)) e->fail = true;
  rpc_pack_str(&e->pk, "v");
  msgpack_pack_uint32(&e->pk, RPC_PROTO_VERSION);
  rpc_pack_str(&e->pk, "t");
  rpc_pack_str(&e->pk, rpc_type_name(t));
}

void rpc_enc_key(rpc_enc *e, const char *key) {
  e->have++;
  rpc_pack_str(&e->pk, key);
}
/* One field each: the key, then the value. */
void rpc_enc_str(rpc_enc *e, const char *key, const char *s) { rpc_enc_key(e, key), rpc_pack_str(&e->pk, s); }
void rpc_enc_u64(rpc_enc *e, const char *key, uint64_t v) { rpc_enc_key(e, key), msgpack_pack_uint64(&e->pk, v); }
void rpc_enc_i64(rpc_enc *e, const char *key, int64_t v) { rpc_enc_key(e, key), msgpack_pack_int64(&e->pk, v); }
void rpc_enc_f64(rpc_enc *e, const char *key, double v) { rpc_enc_key(e, key), msgpack_pack_double(&e->pk, v); }
void rpc_enc_bool(rpc_enc *e, const char *key, bool v) {
  rpc_enc_key(e, key);
  if (v) msgpack_pack_true(&e->pk);
  else msgpack_pack_false(&e->pk);
}
void rpc_enc_bin(rpc_enc *e, const char *key, const void *p, size_t n) {
  rpc_enc_key(e, key);
  msgpack_pack_bin(&e->pk, n);
  msgpack_pack_bin_body(&e->pk, p, n);
}

ts_status rpc_enc_finish(rpc_enc *e) {
  if (e->oom) return TS_ENOMEM;
  if (e->fail || e->have != e->want) return TS_EPROTO;
  if (e->sb.size > RPC_MAX_MSG) return TS_ETOOBIG;
  return TS_OK;
}

void rpc_enc_fini(rpc_enc *e) {
  ts_free(e->sb.data);
  memset(&e->sb, 0, sizeof e->sb);
}

void rpc_enc_error(rpc_enc *e, ts_status code, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rpc_enc_begin(e, RPC_T_ERROR, 2);
  rpc_enc_str(e, "code", rpc_status_code(code));
  rpc_enc_str(e, "message", buf);
}

/* ---- transport ------------------------------------------------------------ */
int rpc_socket_limits(nng_socket s) {
  return nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, (size_t)RPC_MAX_MSG + 4096);
}

ts_status rpc_send(nng_socket s, rpc_enc *e) {
  ts_status st = rpc_enc_finish(e);
  if (st == TS_OK) {
    nng_msg *msg;
    if (nng_msg_alloc(&msg, 0)) {
      st = TS_ENOMEM;
    } else if (nng_msg_append(msg, e->sb.data, e->sb.size)) {
      nng_msg_free(msg);
      st = TS_ENOMEM;
    } else if (nng_sendmsg(s, msg, 0)) {
      nng_msg_free(msg);
      st = TS_EIO;
    }
  }
  rpc_enc_fini(e);
  return st;
}

/* {"v": RPC_PROTO_VERSION, "t": "error", "code": "nomem", "message": "out of memory"},
 * packed by hand: the reply of a server that cannot allocate its reply. */
static const uint8_t nomem_msg[] = {
    0x84, 0xa1, 'v', RPC_PROTO_VERSION, 0xa1, 't', 0xa5, 'e', 'r', 'r', 'o', 'r',
    0xa4, 'c', 'o', 'd', 'e', 0xa5, 'n', 'o', 'm', 'e', 'm',
    0xa7, 'm', 'e', 's', 's', 'a', 'g', 'e', 0xad, 'o', 'u', 't', ' ', 'o', 'f', ' ', 'm', 'e', 'm', 'o', 'r', 'y'};

const void *rpc_nomem_reply(size_t *n) {
  *n = sizeof nomem_msg;
  return nomem_msg;
}

ts_status rpc_reply(nng_socket s, rpc_enc *e) {
  ts_status st = rpc_send(s, e);
  if (st == TS_ENOMEM && nng_send(s, (void *)nomem_msg, sizeof nomem_msg, 0) == 0) return TS_OK;
  return st;
}

ts_status rpc_recv(nng_socket s, rpc_msg *m, nng_pipe *pipe) {
  memset(m, 0, sizeof *m);
  m->type = RPC_T_COUNT;
  nng_msg *msg;
  int rv = nng_recvmsg(s, &msg, 0);
  if (rv) {
    snprintf(m->err, sizeof m->err, "receive: %s", nng_strerror(rv));
    return rv == NNG_ETIMEDOUT ? TS_ETIMEOUT : TS_EIO;
  }
  if (pipe) *pipe = nng_msg_get_pipe(msg);
  ts_status st = rpc_msg_decode(m, nng_msg_body(msg), nng_msg_len(msg));
  nng_msg_free(msg);
  return st;
}

ts_status rpc_call(nng_socket s, rpc_enc *e, rpc_msg *reply, ts_diag *d) {
  ts_status st = rpc_send(s, e);
  if (st) {
    memset(reply, 0, sizeof *reply);
    return ts_diag_set(d, st, "send: %s", ts_strerror(st));
  }
  return rpc_reply_check(reply, rpc_recv(s, reply, NULL), d);
}

ts_status rpc_reply_check(rpc_msg *reply, ts_status decoded, ts_diag *d) {
  if (decoded) {
    ts_diag_set(d, decoded, "%s", reply->err);
    rpc_msg_fini(reply);
    return decoded;
  }
  if (reply->type == RPC_T_ERROR) {
    char code[32] = "", msg[512] = "";
    rpc_get_str(reply, NULL, "code", code, sizeof code);
    rpc_get_str(reply, NULL, "message", msg, sizeof msg);
    rpc_msg_fini(reply);
    ts_status st = rpc_status_from_code(code);
    return ts_diag_set(d, st == TS_OK ? TS_EREMOTE : st, "%s", msg[0] ? msg : code);
  }
  return TS_OK;
}

void rpc_token_new(char out[RPC_TOKEN_LEN + 1]) {
  uint8_t raw[RPC_TOKEN_LEN / 2];
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(out, RPC_TOKEN_LEN + 1, raw, sizeof raw);
}

bool rpc_token_valid(const char *s) {
  if (!s || strlen(s) != RPC_TOKEN_LEN) return false;
  for (int i = 0; i < RPC_TOKEN_LEN; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}
