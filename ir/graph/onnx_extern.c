/* onnx_extern.c — tensors stored outside the model file (ONNX "external
 * data": data_location EXTERNAL, external_data entries location / offset /
 * length), as large models are saved. The location is read relative to the
 * model file's directory and must stay inside it: an absolute path, a ".."
 * component, or a link that resolves outside the directory is refused, as
 * are a missing file and an offset or length that does not fit the file or
 * the tensor. Every refusal names the tensor and the file. docs/MODEL.md
 * ("External data"). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_int.h"

/* A decimal string as a non-negative int64; false on anything else. */
static bool parse_size(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  int64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

/* Whether a relative location stays below its directory by its text: not
 * absolute, no ".." component, no backslash (a Windows separator). */
static bool location_ok(const char *loc) {
  if (!loc[0] || loc[0] == '/' || strchr(loc, '\\')) return false;
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return false;
    p += n + (e ? 1 : 0);
  }
  return true;
}

/* Whether the resolved file lies under the resolved directory (links followed). */
static bool resolves_inside(const char *dir, const char *path) {
  char rd[PATH_MAX], rp[PATH_MAX];
  if (!realpath(dir, rd) || !realpath(path, rp)) return false;
  size_t n = strlen(rd);
  return !strncmp(rd, rp, n) && (rp[n] == '/' || (n == 1 && rd[0] == '/'));
}

ts_status imp_external_data(imp *im, const Onnx__TensorProto *t, const char *what, size_t nbytes, void **out) {
  *out = NULL;
  const char *loc = NULL, *off_s = NULL, *len_s = NULL;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key) continue;
    if (!strcmp(e->key, "location")) loc = e->value;
    else if (!strcmp(e->key, "offset")) off_s = e->value;
    else if (!strcmp(e->key, "length")) len_s = e->value;
  }
  if (!loc || !loc[0])
    return ts_diag_set(im->d, TS_EPARSE, "%s: %s: external data without a 'location'", im->label, what);
  if (!im->dir)
    return ts_diag_set(im->d, TS_EUNSUPPORTED,
                       "%s: %s: stored as external data in '%s', but the model was read from memory (no directory "
                       "to read it from; import the model file by its path)",
                       im->label, what, loc);
  if (!location_ok(loc))
    return ts_diag_set(im->d, TS_EINVAL,
                       "%s: %s: external data location '%s' leaves the model's directory (absolute, '..' or '\\')",
                       im->label, what, loc);
  int64_t off = 0, len = (int64_t)nbytes;
  if ((off_s && !parse_size(off_s, &off)) || (len_s && !parse_size(len_s, &len)))
    return ts_diag_set(im->d, TS_EPARSE, "%s: %s: external data '%s': offset '%s' / length '%s' is not a byte count",
                       im->label, what, loc, off_s ? off_s : "", len_s ? len_s : "");
  if ((uint64_t)len != nbytes)
    return ts_diag_set(im->d, TS_EPARSE, "%s: %s: external data '%s' has length %" PRId64 ", the tensor needs %zu bytes",
                       im->label, what, loc, len, nbytes);
  size_t pl = strlen(im->dir) + strlen(loc) + 2;
  char *path = ts_malloc(pl);
  if (!path) return imp_oom(im);
  snprintf(path, pl, "%s/%s", im->dir, loc);
  ts_status st = TS_OK;
  struct stat sb;
  FILE *f = NULL;
  if (stat(path, &sb) != 0) {
    st = ts_diag_set(im->d, TS_EIO, "%s: %s: external data file %s: %s", im->label, what, path,
                     errno == ENOENT ? "no such file" : strerror(errno));
  } else if (!S_ISREG(sb.st_mode)) {
    st = ts_diag_set(im->d, TS_EIO, "%s: %s: external data file %s is not a regular file", im->label, what, path);
  } else if (!resolves_inside(im->dir, path)) {
    st = ts_diag_set(im->d, TS_EINVAL, "%s: %s: external data file %s resolves outside the model's directory %s",
                     im->label, what, path, im->dir);
  } else if (off > (int64_t)sb.st_size || len > (int64_t)sb.st_size - off) {
    st = ts_diag_set(im->d, TS_EPARSE,
                     "%s: %s: external data file %s holds %" PRId64 " bytes; offset %" PRId64 " + length %" PRId64
                     " runs past its end",
                     im->label, what, path, (int64_t)sb.st_size, off, len);
  } else if (!(f = fopen(path, "rb")) || fseeko(f, (off_t)off, SEEK_SET) != 0) {
    st = ts_diag_set(im->d, TS_EIO, "%s: %s: external data file %s: cannot open or seek to %" PRId64, im->label, what,
                     path, off);
  } else {
    *out = ts_malloc(nbytes ? nbytes : 1);
    if (!*out) st = imp_oom(im);
    else if (nbytes && fread(*out, 1, nbytes, f) != nbytes) {
      st = ts_diag_set(im->d, TS_EIO, "%s: %s: external data file %s: short read at offset %" PRId64, im->label, what,
                       path, off);
    }
    if (st) {
      ts_free(*out);
      *out = NULL;
    }
  }
  if (f) fclose(f);
  ts_free(path);
  return st;
}
