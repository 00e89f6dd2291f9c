/* npy.c — .npy reading and writing (see npy.h). The header dict is parsed by
 * a bounded tokenizer over its exact length: it never reads past the header,
 * and every value is checked before use. */
#include "tuner/npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct descr_map {
  const char *code; /* after the byte-order character */
  int dtype;
} descr_map;

static const descr_map DESCRS[] = {
    {"b1", IR_BOOL}, {"i1", IR_I8}, {"i2", IR_I16}, {"i4", IR_I32}, {"i8", IR_I64}, {"u1", IR_U8},
    {"u4", IR_U32}, {"f2", IR_F16}, {"f4", IR_F32}, {"f8", IR_F64},
};

static bool host_little(void) {
  uint16_t x = 1;
  return *(uint8_t *)&x == 1;
}

static ts_status parse_descr(const char *s, const char *label, int *dtype, ts_diag *d) {
  char order = s[0];
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return ts_diag_set(d, TS_EUNSUPPORTED, "%s: dtype '%s' is not a simple NumPy dtype (structured or "
                       "object arrays are not supported)", label, s);
  const char *code = s + 1;
  for (size_t i = 0; i < sizeof DESCRS / sizeof *DESCRS; i++) {
    if (strcmp(code, DESCRS[i].code)) continue;
    bool one_byte = code[1] == '1';
    if (!one_byte && (order == '>' || (order == '=' && !host_little()) || order == '|'))
      return ts_diag_set(d, TS_EUNSUPPORTED, "%s: dtype '%s' is big-endian (or has no byte order); "
                         "save it little-endian (arr.astype('<%s'))", label, s, code);
    *dtype = DESCRS[i].dtype;
    return TS_OK;
  }
  return ts_diag_set(d, TS_EUNSUPPORTED, "%s: dtype '%s' is not supported (bool, int8/16/32/64, uint8/32, "
                     "float16/32/64)", label, s);
}

/* ---- the header tokenizer ------------------------------------------------------ */

typedef struct lexer {
  const char *p, *end;
  const char *label;
  ts_diag *d;
} lexer;

static void skip_ws(lexer *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}

static bool eat(lexer *l, char c) {
  skip_ws(l);
  if (l->p < l->end && *l->p == c) {
    l->p++;
    return true;
  }
  return false;
}

/* A quoted string into buf (at most n-1 chars). */
static ts_status lex_string(lexer *l, char *buf, size_t n, const char *what) {
  skip_ws(l);
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
    return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: expected a quoted %s", l->label, what);
  char q = *l->p++;
  size_t k = 0;
  while (l->p < l->end && *l->p != q) {
    if (k + 1 >= n)
      return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: %s longer than %zu characters",
                         l->label, what, n - 1);
    buf[k++] = *l->p++;
  }
  if (l->p >= l->end)
    return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: unterminated %s", l->label, what);
  l->p++;
  buf[k] = '\0';
  return TS_OK;
}

static ts_status lex_bool(lexer *l, bool *out) {
  skip_ws(l);
  if (l->end - l->p >= 4 && !memcmp(l->p, "True", 4)) {
    l->p += 4;
    *out = true;
    return TS_OK;
  }
  if (l->end - l->p >= 5 && !memcmp(l->p, "False", 5)) {
    l->p += 5;
    *out = false;
    return TS_OK;
  }
  return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: fortran_order is not True or False",
                     l->label);
}

static ts_status lex_shape(lexer *l, int *ndim, int64_t *shape) {
  if (!eat(l, '('))
    return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: shape is not a tuple", l->label);
  *ndim = 0;
  for (;;) {
    if (eat(l, ')')) return TS_OK;
    skip_ws(l);
    if (l->p >= l->end || !isdigit((unsigned char)*l->p))
      return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: shape holds a non-integer", l->label);
    int64_t v = 0;
    while (l->p < l->end && isdigit((unsigned char)*l->p)) {
      if (v > (INT64_MAX - 9) / 10)
        return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: a dim overflows", l->label);
      v = v * 10 + (*l->p++ - '0');
    }
    if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2 longs */
    if (*ndim >= TUN_NPY_MAX_DIMS)
      return ts_diag_set(l->d, TS_EUNSUPPORTED, "%s: more than %d dims", l->label, TUN_NPY_MAX_DIMS);
    shape[(*ndim)++] = v;
    if (eat(l, ',')) continue;
    if (eat(l, ')')) return TS_OK;
    return ts_diag_set(l->d, TS_EPARSE, "%s: malformed .npy header: expected ',' or ')' in shape", l->label);
  }
}

static ts_status parse_header(const char *h, size_t n, const char *label, int *dtype, int *ndim,
                              int64_t *shape, ts_diag *d) {
  lexer l = {h, h + n, label, d};
  if (!eat(&l, '{'))
    return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: it does not start with '{'", label);
  bool have_descr = false, have_order = false, have_shape = false;
  for (;;) {
    if (eat(&l, '}')) break;
    char key[32], descr[32];
    ts_status st = lex_string(&l, key, sizeof key, "key");
    if (st) return st;
    if (!eat(&l, ':'))
      return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: expected ':' after '%s'", label, key);
    if (!strcmp(key, "descr")) {
      if ((st = lex_string(&l, descr, sizeof descr, "descr")) != TS_OK) return st;
      if ((st = parse_descr(descr, label, dtype, d)) != TS_OK) return st;
      have_descr = true;
    } else if (!strcmp(key, "fortran_order")) {
      bool fo = false;
      if ((st = lex_bool(&l, &fo)) != TS_OK) return st;
      if (fo)
        return ts_diag_set(d, TS_EUNSUPPORTED, "%s: fortran_order is True (column-major); save it C-ordered "
                           "(np.ascontiguousarray)", label);
      have_order = true;
    } else if (!strcmp(key, "shape")) {
      if ((st = lex_shape(&l, ndim, shape)) != TS_OK) return st;
      have_shape = true;
    } else {
      return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: unknown key '%s'", label, key);
    }
    if (eat(&l, ',')) continue;
    if (eat(&l, '}')) break;
    return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: expected ',' or '}' after '%s'", label, key);
  }
  skip_ws(&l);
  if (l.p != l.end)
    return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: text after the closing '}'", label);
  if (!have_descr || !have_order || !have_shape)
    return ts_diag_set(d, TS_EPARSE, "%s: malformed .npy header: missing '%s'", label,
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
  return TS_OK;
}

ts_status tun_npy_parse(const void *buf, size_t len, const char *label, tun_npy *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  const unsigned char *b = buf;
  if (len < 10 || memcmp(b, MAGIC, 6))
    return ts_diag_set(d, TS_EPARSE, "%s: not a .npy file (bad magic)", label);
  int major = b[6];
  size_t hlen, hoff;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    hoff = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return ts_diag_set(d, TS_EPARSE, "%s: truncated .npy header", label);
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    hoff = 12;
  } else {
    return ts_diag_set(d, TS_EUNSUPPORTED, "%s: .npy format version %d.%d (1.0, 2.0 and 3.0 are read)", label,
                       major, b[7]);
  }
  if (hlen > len - hoff) return ts_diag_set(d, TS_EPARSE, "%s: truncated .npy header", label);
  int dtype = 0, ndim = 0;
  int64_t shape[TUN_NPY_MAX_DIMS];
  ts_status st = parse_header((const char *)b + hoff, hlen, label, &dtype, &ndim, shape, d);
  if (st) return st;
  size_t n = (size_t)ir_dtype_bytes(ir_dt((ir_dtype_code)dtype));
  for (int i = 0; i < ndim; i++) {
    if (shape[i] && n > SIZE_MAX / 2 / (size_t)shape[i])
      return ts_diag_set(d, TS_EPARSE, "%s: shape too large", label);
    n *= (size_t)shape[i];
  }
  size_t doff = hoff + hlen;
  if (len - doff != n)
    return ts_diag_set(d, TS_EPARSE, "%s: the data is %zu bytes, the shape and dtype need %zu (truncated or "
                       "trailing bytes)", label, len - doff, n);
  out->data = ts_malloc(n ? n : 1);
  if (!out->data) return ts_diag_set(d, TS_ENOMEM, "%s: out of memory (%zu bytes)", label, n);
  memcpy(out->data, b + doff, n);
  out->nbytes = n;
  out->dtype = dtype;
  out->ndim = ndim;
  memcpy(out->shape, shape, sizeof(int64_t) * (size_t)ndim);
  return TS_OK;
}

ts_status tun_npy_read(const char *path, tun_npy *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  char *buf = NULL;
  size_t len = 0;
  ts_status st = ts_read_file_as(path, TS_FILE_NPY, &buf, &len, d);
  if (st == TS_OK) st = tun_npy_parse(buf, len, path, out, d);
  ts_free(buf);
  return st;
}

ts_status tun_npy_write(const char *path, int dtype, int ndim, const int64_t *shape, const void *data,
                        ts_diag *d) {
  const char *code = NULL;
  for (size_t i = 0; i < sizeof DESCRS / sizeof *DESCRS; i++)
    if (DESCRS[i].dtype == dtype) code = DESCRS[i].code;
  if (!code)
    return ts_diag_set(d, TS_EUNSUPPORTED, "%s: dtype %s has no NumPy equivalent", path,
                       ir_dtype_code_name((ir_dtype_code)dtype));
  if (ndim < 0 || ndim > TUN_NPY_MAX_DIMS) return ts_diag_set(d, TS_EINVAL, "%s: bad rank %d", path, ndim);
  if (!host_little()) return ts_diag_set(d, TS_EUNSUPPORTED, "%s: writing .npy on a big-endian host", path);
  char dict[256], shp[200];
  size_t k = 0;
  size_t n = (size_t)ir_dtype_bytes(ir_dt((ir_dtype_code)dtype));
  shp[0] = '\0';
  for (int i = 0; i < ndim; i++) {
    k += (size_t)snprintf(shp + k, sizeof shp - k, "%lld,%s", (long long)shape[i], i + 1 < ndim ? " " : "");
    n *= (size_t)shape[i];
  }
  if (ndim > 1) shp[k - 1] = '\0'; /* "(2, 3)" not "(2, 3,)"; "(5,)" keeps its comma */
  int dl = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                    code[1] == '1' ? '|' : '<', code, shp);
  size_t total = 10 + (size_t)dl + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)dl + pad + 1;
  FILE *f = fopen(path, "wb");
  if (!f) return ts_diag_set(d, TS_EIO, "cannot create %s: %s", path, strerror(errno));
  unsigned char pre[10];
  memcpy(pre, MAGIC, 6);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (unsigned char)(hlen & 0xff);
  pre[9] = (unsigned char)(hlen >> 8);
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)dl, f) == (size_t)dl;
  for (size_t i = 0; i < pad && ok; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF && (n == 0 || fwrite(data, 1, n, f) == n);
  if (fclose(f) != 0) ok = false;
  if (!ok) return ts_diag_set(d, TS_EIO, "writing %s failed: %s", path, strerror(errno));
  return TS_OK;
}

void tun_npy_free(tun_npy *n) {
  if (!n) return;
  ts_free(n->data);
  memset(n, 0, sizeof *n);
}
