/* dim.c — arithmetic on symbolic dims. A symbolic dim is a monomial: an
 * integer coefficient times a product of base symbols (the graph inputs'
 * dim_params), so that Flatten, Reshape and shape arithmetic on a
 * transformer's [batch, seq, hidden] stay exact: [batch*seq, hidden],
 * 12*batch heads. Its name is canonical — factors sorted by strcmp (a
 * repeated factor repeated), the coefficient first when it is not 1:
 * "12*batch*seq" — so equal dims have equal names and tg_dim_eq stays a
 * string compare. Kernels see the product, not a new size var (legalize
 * writes the expression); the model plan and the graph interpreter
 * evaluate it from the bound base symbols. docs/GRAPH.md ("Symbolic dims"). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

bool tg_mono_parse(tg_dim d, tg_mono *m) {
  m->coeff = d.sym ? 1 : d.value;
  m->n = 0;
  if (!d.sym) return true;
  size_t len = strlen(d.sym);
  if (len >= sizeof m->buf) return false;
  memcpy(m->buf, d.sym, len + 1);
  bool first = true;
  for (char *t = m->buf; t; first = false) {
    char *star = strchr(t, '*');
    if (star) *star = '\0';
    if (!t[0]) return false; /* an empty factor: "a**b", "*a", "a*" */
    if (first && t[0] >= '0' && t[0] <= '9') {
      char *end;
      long long c = strtoll(t, &end, 10);
      if (*end || c < 2) return false;
      m->coeff = c;
    } else {
      if (m->n == TG_MONO_MAX) return false;
      m->f[m->n++] = t;
    }
    t = star ? star + 1 : NULL;
  }
  return m->n > 0;
}

/* The canonical dim of m: a constant when it has no factor, else its name
 * (allocated in a). */
static bool mono_dim(ts_arena *a, tg_mono *m, tg_dim *out) {
  if (m->n == 0 || m->coeff == 0) {
    *out = (tg_dim){m->n ? 0 : m->coeff, NULL};
    return true;
  }
  qsort(m->f, (size_t)m->n, sizeof m->f[0], cmp_str);
  char s[sizeof m->buf + 24];
  size_t o = 0;
  if (m->coeff != 1) o += (size_t)snprintf(s, sizeof s, "%" PRId64, m->coeff);
  for (int i = 0; i < m->n; i++) {
    int w = snprintf(s + o, sizeof s - o, "%s%s", o ? "*" : "", m->f[i]);
    if (w < 0 || (size_t)w >= sizeof s - o) return false;
    o += (size_t)w;
  }
  const char *p = ts_arena_strdup(a, s);
  if (!p) return false;
  *out = (tg_dim){-1, p};
  return true;
}

bool tg_dim_mul(ts_arena *a, tg_dim x, tg_dim y, tg_dim *out) {
  if (!x.sym && !y.sym) {
    int64_t r;
    if (__builtin_mul_overflow(x.value, y.value, &r)) return false;
    *out = (tg_dim){r, NULL};
    return true;
  }
  if ((!x.sym && x.value == 1) || (!y.sym && y.value == 1)) {
    *out = x.sym ? x : y;
    return true;
  }
  tg_mono mx, my, r;
  if (!tg_mono_parse(x, &mx) || !tg_mono_parse(y, &my) || mx.n + my.n > TG_MONO_MAX) return false;
  r.n = 0;
  if (__builtin_mul_overflow(mx.coeff, my.coeff, &r.coeff)) return false;
  /* the factors point into mx/my's buffers, which live until mono_dim copies them */
  for (int i = 0; i < mx.n; i++) r.f[r.n++] = mx.f[i];
  for (int i = 0; i < my.n; i++) r.f[r.n++] = my.f[i];
  return mono_dim(a, &r, out);
}

bool tg_dim_div(ts_arena *a, tg_dim x, tg_dim y, tg_dim *out) {
  tg_mono mx, my;
  if (!tg_mono_parse(x, &mx) || !tg_mono_parse(y, &my) || my.coeff == 0) return false;
  if (mx.coeff % my.coeff) return false;
  mx.coeff /= my.coeff;
  for (int j = 0; j < my.n; j++) {
    int i = 0;
    while (i < mx.n && strcmp(mx.f[i], my.f[j])) i++;
    if (i == mx.n) return false; /* y has a factor x lacks: not exact */
    mx.f[i] = mx.f[--mx.n];
  }
  return mono_dim(a, &mx, out);
}

bool tg_dims_product(ts_arena *a, const tg_dim *d, int n, tg_dim *out) {
  tg_dim p = {1, NULL};
  for (int i = 0; i < n; i++)
    if (!tg_dim_mul(a, p, d[i], &p)) return false;
  *out = p;
  return true;
}

ts_status tg_dim_eval(tg_dim d, int64_t (*lookup)(void *ctx, const char *sym), void *ctx, int64_t *out,
                      ts_diag *diag) {
  tg_mono m;
  if (!tg_mono_parse(d, &m)) return ts_diag_set(diag, TS_EINVAL, "symbolic dim '%s' is not a product of symbols", d.sym);
  int64_t v = m.coeff;
  for (int i = 0; i < m.n; i++) {
    int64_t s = lookup(ctx, m.f[i]);
    if (s < 0) return ts_diag_set(diag, TS_EINVAL, "symbol '%s' (in dim '%s') is not bound by any graph input", m.f[i], d.sym);
    if (__builtin_mul_overflow(v, s, &v)) return ts_diag_set(diag, TS_ESHAPE, "dim '%s' overflows", d.sym);
  }
  *out = v;
  return TS_OK;
}

bool tg_dim_is_base(tg_dim d) { return d.sym && !strchr(d.sym, '*'); }
