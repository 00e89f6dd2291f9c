/* layout.c — weight layout rewrite (layout.h, docs/LAYOUT.md): the map a
 * block's loop nest suggests for a layout-free input (MetaSchedule's
 * SuggestIndexMap over a RewriteLayout candidate, Ansor's
 * layout_free_placeholders), the TransformLayout primitive that re-lays the
 * param and rewrites its loads and regions, the reference function that
 * verification compares a re-laid kernel against, and host-side packing of
 * a constant through the same map (what `tessel build MODEL` embeds). */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../print.h"
#include "../struct.h"
#include "sch_int.h"

/* ---- maps ------------------------------------------------------------------ */

ts_status sch_layout_vnni(const ir_func *f, int param, int kdim, int ndim, int64_t lanes, int64_t group,
                          sch_layout_map *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  if (param < 0 || param >= f->ninputs)
    return ts_diag_set(d, TS_EINVAL, "VNNI layout: param %d is not an input of %s", param, f->name);
  const ir_buffer *b = f->params[param];
  if (b->ndim < 2 || b->ndim > SCH_LAYOUT_MAX_DIMS || kdim == ndim || kdim < 0 || ndim < 0 || kdim >= b->ndim ||
      ndim >= b->ndim)
    return ts_diag_set(d, TS_EINVAL, "VNNI layout: %s (rank %d) with k dim %d and n dim %d", b->name, b->ndim, kdim,
                       ndim);
  out->param = param;
  out->ndim = b->ndim;
  for (int k = 0; k < b->ndim; k++)
    if (!ir_as_int(b->shape[k], &out->shape[k]))
      return ts_diag_set(d, TS_ESCHEDULE, "VNNI layout: %s has a non-constant dim %d", b->name, k);
  if (lanes < 1 || group < 1)
    return ts_diag_set(d, TS_EINVAL, "VNNI layout: %lld lanes of %lld", (long long)lanes, (long long)group);
  for (int k = 0; k < b->ndim; k++)
    if (k != kdim && k != ndim) {
      out->comp[out->ncomp++] = (sch_layout_comp){k, 1, out->shape[k]};
      out->group[out->naxes++] = 1;
    }
  if (out->naxes + 3 > SCH_LAYOUT_MAX_AXES)
    return ts_diag_set(d, TS_EINVAL, "VNNI layout: %s has too many dims", b->name);
  /* n and k padded up to multiples of lanes and group (zeros, sch_layout_pack) */
  out->comp[out->ncomp++] = (sch_layout_comp){ndim, lanes, (out->shape[ndim] + lanes - 1) / lanes};
  out->comp[out->ncomp++] = (sch_layout_comp){kdim, group, (out->shape[kdim] + group - 1) / group};
  out->comp[out->ncomp++] = (sch_layout_comp){ndim, 1, lanes};
  out->comp[out->ncomp++] = (sch_layout_comp){kdim, 1, group};
  out->group[out->naxes++] = 1;
  out->group[out->naxes++] = 1;
  out->group[out->naxes++] = 2;
  return sch_layout_check(out, d);
}

ts_status sch_layout_check(const sch_layout_map *m, ts_diag *d) {
  if (m->ndim < 1 || m->ndim > SCH_LAYOUT_MAX_DIMS)
    return ts_diag_set(d, TS_EINVAL, "layout map: rank %d (want 1..%d)", m->ndim, SCH_LAYOUT_MAX_DIMS);
  if (m->ncomp < 0 || m->ncomp > SCH_LAYOUT_MAX_COMPS)
    return ts_diag_set(d, TS_EINVAL, "layout map: %d components (at most %d)", m->ncomp, SCH_LAYOUT_MAX_COMPS);
  if (m->naxes < 1 || m->naxes > SCH_LAYOUT_MAX_AXES)
    return ts_diag_set(d, TS_EINVAL, "layout map: %d packed axes (want 1..%d)", m->naxes, SCH_LAYOUT_MAX_AXES);
  int sum = 0;
  for (int a = 0; a < m->naxes; a++) {
    if (m->group[a] < 1) return ts_diag_set(d, TS_EINVAL, "layout map: packed axis %d has no component", a);
    sum += m->group[a];
  }
  if (sum != m->ncomp)
    return ts_diag_set(d, TS_EINVAL, "layout map: the axes group %d components, the map has %d", sum, m->ncomp);
  for (int j = 0; j < m->ncomp; j++) {
    const sch_layout_comp *c = &m->comp[j];
    if (c->dim < 0 || c->dim >= m->ndim || c->stride < 1 || c->extent < 1)
      return ts_diag_set(d, TS_EINVAL, "layout map: component %d (dim %d, stride %lld, extent %lld) is invalid", j,
                         c->dim, (long long)c->stride, (long long)c->extent);
  }
  /* per dim: strides 1, e0, e0*e1, ... with the extents' product the dim */
  for (int k = 0; k < m->ndim; k++) {
    if (m->shape[k] < 1) return ts_diag_set(d, TS_EINVAL, "layout map: dim %d has extent %lld", k, (long long)m->shape[k]);
    int64_t want = 1, below = 0; /* below: the product without the top component */
    for (;;) {
      int found = -1;
      for (int j = 0; j < m->ncomp; j++)
        if (m->comp[j].dim == k && m->comp[j].stride == want && m->comp[j].extent > 1) {
          if (found >= 0)
            return ts_diag_set(d, TS_EINVAL, "layout map: dim %d has two components at stride %lld", k,
                               (long long)want);
          found = j;
        }
      if (found < 0) break;
      /* a top digit over what the cover needs is caught below; at stride 1 a
       * single digit may exceed the dim (16 VNNI lanes for 13 channels) */
      if (want >= m->shape[k] || (want > 1 && m->comp[found].extent > m->shape[k] / want + 1)) break;
      below = want;
      want *= m->comp[found].extent;
    }
    int64_t prod = 1;
    for (int j = 0; j < m->ncomp; j++)
      if (m->comp[j].dim == k && m->comp[j].extent > 1) {
        prod *= m->comp[j].extent;
        if (prod > 2 * m->shape[k]) break;
      }
    /* a perfect mixed radix of the dim, or one whose top component covers
     * it with padding (ceil: the dim below the top digit's stride is whole) */
    if (want < m->shape[k] || (want > m->shape[k] && below >= m->shape[k]) || prod != want)
      return ts_diag_set(d, TS_EINVAL,
                         "layout map: dim %d (extent %lld) is not a mixed radix of its components, perfect or padded "
                         "in its top digit (the map would be no bijection)",
                         k, (long long)m->shape[k]);
  }
  return TS_OK;
}

int sch_layout_packed_shape(const sch_layout_map *m, int64_t *shape) {
  int j = 0;
  for (int a = 0; a < m->naxes; a++) {
    int64_t e = 1;
    for (int g = 0; g < m->group[a]; g++) e *= m->comp[j++].extent;
    shape[a] = e;
  }
  return m->naxes;
}

bool sch_layout_is_identity(const sch_layout_map *m) {
  if (m->dtype.lanes) return false; /* a dtype change packs */
  /* the non-unit components must be each dim whole, in dim order */
  int j = 0;
  for (int k = 0; k < m->ndim; k++) {
    if (m->shape[k] == 1) continue;
    while (j < m->ncomp && m->comp[j].extent == 1) j++;
    if (j == m->ncomp || m->comp[j].dim != k || m->comp[j].stride != 1 || m->comp[j].extent != m->shape[k])
      return false;
    j++;
  }
  while (j < m->ncomp && m->comp[j].extent == 1) j++;
  return j == m->ncomp;
}

void sch_layout_str(const sch_layout_map *m, const char *name, char *buf, size_t n) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ts_strbuf_printf(&sb, "%s[", name ? name : "?");
  for (int k = 0; k < m->ndim; k++) ts_strbuf_printf(&sb, "%sd%d", k ? ", " : "", k);
  ts_strbuf_printf(&sb, "] -> [");
  int j = 0;
  for (int a = 0; a < m->naxes; a++) {
    ts_strbuf_printf(&sb, "%s", a ? ", " : "");
    int64_t inner = 1;
    for (int g = j + m->group[a] - 1; g >= j; g--) inner *= m->comp[g].extent;
    for (int g = 0; g < m->group[a]; g++, j++) {
      const sch_layout_comp *c = &m->comp[j];
      inner /= c->extent;
      if (g) ts_strbuf_printf(&sb, " + ");
      bool whole_hi = c->stride * c->extent == m->shape[c->dim];
      if (c->stride > 1 && whole_hi) ts_strbuf_printf(&sb, "d%d//%lld", c->dim, (long long)c->stride);
      else if (c->stride > 1) ts_strbuf_printf(&sb, "d%d//%lld%%%lld", c->dim, (long long)c->stride, (long long)c->extent);
      else if (whole_hi) ts_strbuf_printf(&sb, "d%d", c->dim);
      else ts_strbuf_printf(&sb, "d%d%%%lld", c->dim, (long long)c->extent);
      if (inner > 1) ts_strbuf_printf(&sb, "*%lld", (long long)inner);
    }
  }
  ts_strbuf_printf(&sb, "]");
  char dt[16];
  if (m->dtype.lanes) ts_strbuf_printf(&sb, " as %s", ir_dtype_str(m->dtype, dt, sizeof dt));
  snprintf(buf, n, "%s", sb.data ? sb.data : "");
  ts_strbuf_fini(&sb);
}

/* ---- suggesting a map ---------------------------------------------------------- */

#define LW_MAX_LOOPS 256
#define LW_MAX_REAL 64
#define LW_MAX_TERMS 64

typedef struct lw_loop {
  const ir_var *var;
  int64_t ext; /* -1: not [0, constant) */
} lw_loop;

typedef struct lw_term {
  int loop;        /* position in the nest */
  int64_t s, e, c; /* c * floormod(floordiv(loop, s), e) */
  bool mod;        /* e comes from an explicit floormod */
} lw_term;

typedef struct lw_ctx {
  const ir_func *f;
  const ir_buffer *buf;
  int param;
  ts_arena arena;
  lw_loop loops[LW_MAX_LOOPS];
  int nloops;
  const ir_stmt *real[LW_MAX_REAL];
  int nreal;
  const ir_stmt *reader; /* the reading block's realize */
  int nidx;
  ir_expr *const *idx;   /* its first load's indices */
  sch_layout_map *out;
  ts_status st;
  ts_diag *d;
} lw_ctx;

static void lw_fail(lw_ctx *c, ts_status st, const char *fmt, const char *a, const char *b) {
  if (c->st) return;
  c->st = st;
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  ts_diag_set(c->d, st, "layout rewrite of %s (param %d) in %s: %s", c->buf->name, c->param,
              c->f->name ? c->f->name : "?", msg);
}

static int lw_find_loop(const lw_ctx *c, const ir_var *v) {
  for (int i = c->nloops - 1; i >= 0; i--)
    if (c->loops[i].var == v) return i;
  return -1;
}

/* One digit c * floormod(floordiv(l, s), e) of a single loop. */
static bool lw_atom(lw_ctx *c, const ir_expr *e, lw_term *t) {
  int64_t k;
  switch (e->kind) {
  case IR_VAR: {
    int i = lw_find_loop(c, e->u.var);
    if (i < 0) {
      lw_fail(c, TS_ESCHEDULE, "an index uses %s, which is no loop of the reading block's nest (a symbolic size or "
                               "another block's var)", e->u.var->name, NULL);
      return false;
    }
    if (c->loops[i].ext < 0) {
      lw_fail(c, TS_ESCHEDULE, "loop %s does not run over [0, constant)", e->u.var->name, NULL);
      return false;
    }
    *t = (lw_term){.loop = i, .s = 1, .e = c->loops[i].ext, .c = 1};
    return true;
  }
  case IR_CAST:
    return ir_dtype_is_int(e->dtype) && lw_atom(c, e->u.cast.value, t);
  case IR_FLOORDIV:
    if (!ir_as_int(e->u.bin.b, &k) || k < 1 || !lw_atom(c, e->u.bin.a, t)) break;
    if (t->mod && t->e % k) break;
    t->s *= k;
    t->e = (t->e + k - 1) / k;
    return true;
  case IR_FLOORMOD:
    if (!ir_as_int(e->u.bin.b, &k) || k < 1 || !lw_atom(c, e->u.bin.a, t)) break;
    if (t->e <= k) return true;
    if (t->e % k) break;
    t->e = k;
    t->mod = true;
    return true;
  default:
    break;
  }
  if (!c->st) {
    char *s = ir_expr_to_string(e);
    lw_fail(c, TS_ESCHEDULE, "index term %s is not quasi-affine over single loops", s ? s : "?", NULL);
    ts_free(s);
  }
  return false;
}

static bool lw_lin(lw_ctx *c, const ir_expr *e, int64_t coef, lw_term *ts, int *n, int64_t *cst) {
  int64_t k;
  switch (e->kind) {
  case IR_INT_IMM:
    *cst += coef * e->u.ival;
    return true;
  case IR_ADD:
    return lw_lin(c, e->u.bin.a, coef, ts, n, cst) && lw_lin(c, e->u.bin.b, coef, ts, n, cst);
  case IR_SUB:
    return lw_lin(c, e->u.bin.a, coef, ts, n, cst) && lw_lin(c, e->u.bin.b, -coef, ts, n, cst);
  case IR_MUL:
    if (ir_as_int(e->u.bin.a, &k)) return lw_lin(c, e->u.bin.b, coef * k, ts, n, cst);
    if (ir_as_int(e->u.bin.b, &k)) return lw_lin(c, e->u.bin.a, coef * k, ts, n, cst);
    break;
  case IR_CAST:
    if (ir_dtype_is_int(e->dtype)) return lw_lin(c, e->u.cast.value, coef, ts, n, cst);
    break;
  default:
    break;
  }
  lw_term t;
  if (!lw_atom(c, e, &t)) return false;
  t.c = coef;
  for (int i = 0; i < *n; i++)
    if (ts[i].loop == t.loop && ts[i].s == t.s && ts[i].e == t.e) {
      ts[i].c += coef;
      return true;
    }
  if (*n == LW_MAX_TERMS) {
    lw_fail(c, TS_ESCHEDULE, "an index has too many terms", NULL, NULL);
    return false;
  }
  ts[(*n)++] = t;
  return true;
}

typedef struct lw_comp {
  sch_layout_comp c;
  int loop;
  int64_t s;
} lw_comp;

static int cmp_comp(const void *x, const void *y) {
  const lw_comp *a = x, *b = y;
  if (a->loop != b->loop) return a->loop < b->loop ? -1 : 1;
  if (a->s != b->s) return a->s > b->s ? -1 : 1;
  return a->c.dim - b->c.dim;
}

static int cmp_term_c(const void *x, const void *y) {
  const lw_term *a = x, *b = y;
  return a->c < b->c ? -1 : a->c > b->c;
}

/* The map from the first load's indices under the current nest. */
static void lw_analyse(lw_ctx *c, int nidx, ir_expr *const *idx) {
  const ir_buffer *buf = c->buf;
  sch_layout_map *m = c->out;
  memset(m, 0, sizeof *m);
  m->param = c->param;
  m->ndim = buf->ndim;
  if (nidx != buf->ndim) {
    lw_fail(c, TS_ESCHEDULE, "a load has the wrong number of indices", NULL, NULL);
    return;
  }
  ir_analyzer an;
  ir_analyzer_init(&an, &c->arena);
  for (int i = 0; i < c->nloops; i++)
    if (c->loops[i].ext > 0) ir_analyzer_bind_const(&an, c->loops[i].var, 0, c->loops[i].ext - 1);
  lw_comp comps[SCH_LAYOUT_MAX_COMPS];
  int nc = 0;
  for (int k = 0; k < nidx && !c->st; k++) {
    m->shape[k] = buf->shape[k] && ir_as_int(buf->shape[k], &m->shape[k]) ? m->shape[k] : -1;
    ir_expr *e = idx[k];
    for (int r = c->nreal - 1; r >= 0 && e; r--) {
      const ir_stmt *rs = c->real[r];
      const ir_block *b = rs->u.realize.block;
      ir_var_map vm;
      ir_var_map_init(&vm);
      for (int i = 0; i < b->niter; i++) ir_var_map_put(&vm, b->iters[i].var, rs->u.realize.iter_values[i]);
      e = ir_subst_expr(&c->arena, e, &vm);
      ir_var_map_fini(&vm);
    }
    e = e ? ir_simplify(&an, e) : NULL;
    if (!e) {
      lw_fail(c, TS_ENOMEM, "out of memory", NULL, NULL);
      break;
    }
    lw_term ts[LW_MAX_TERMS];
    int nt = 0;
    int64_t cst = 0;
    if (!lw_lin(c, e, 1, ts, &nt, &cst)) break;
    char dn[32];
    snprintf(dn, sizeof dn, "%d", k);
    if (cst != 0) {
      lw_fail(c, TS_ESCHEDULE, "index %s has a constant offset (a partial read)", dn, NULL);
      break;
    }
    /* drop unit digits and zero coefficients; the rest by coefficient */
    int w = 0;
    for (int i = 0; i < nt; i++)
      if (ts[i].e > 1 && ts[i].c != 0) ts[w++] = ts[i];
    nt = w;
    qsort(ts, (size_t)nt, sizeof *ts, cmp_term_c);
    int64_t want = 1;
    for (int i = 0; i < nt && !c->st; i++) {
      if (ts[i].c != want) {
        lw_fail(c, TS_ESCHEDULE,
                "index %s is no perfect mixed radix of its loops (a coefficient %s where the digits below "
                "multiply to another; the map would be no bijection)",
                dn, ts[i].c < 0 ? "is negative" : "skips or overlaps");
        break;
      }
      if (nc == SCH_LAYOUT_MAX_COMPS) {
        lw_fail(c, TS_ESCHEDULE, "more than 32 components", NULL, NULL);
        break;
      }
      comps[nc++] = (lw_comp){.c = {.dim = k, .stride = want, .extent = ts[i].e}, .loop = ts[i].loop, .s = ts[i].s};
      want *= ts[i].e;
    }
    if (c->st) break;
    if (m->shape[k] < 0) {
      lw_fail(c, TS_ESCHEDULE, "dim %s has a symbolic extent", dn, NULL);
      break;
    }
    if (want != m->shape[k]) {
      char w1[64];
      snprintf(w1, sizeof w1, "%lld of %lld", (long long)want, (long long)m->shape[k]);
      lw_fail(c, TS_ESCHEDULE,
              "the loops cover %s elements of dim %s (a guarded split or a partial read: the map would be no "
              "bijection)", w1, dn);
      break;
    }
  }
  ir_analyzer_fini(&an);
  if (c->st) return;
  /* loop order, higher digits of one loop first; merge contiguous digits of a dim */
  qsort(comps, (size_t)nc, sizeof *comps, cmp_comp);
  int n = 0;
  for (int i = 0; i < nc; i++) {
    if (n > 0 && m->comp[n - 1].dim == comps[i].c.dim &&
        m->comp[n - 1].stride == comps[i].c.stride * comps[i].c.extent) {
      m->comp[n - 1].stride = comps[i].c.stride;
      m->comp[n - 1].extent *= comps[i].c.extent;
      continue;
    }
    m->comp[n++] = comps[i].c;
  }
  if (n == 0) { /* every dim is 1: a one-element weight */
    m->comp[n++] = (sch_layout_comp){.dim = 0, .stride = 1, .extent = 1};
  }
  m->ncomp = n;
  /* group: one axis per component, the outermost pairs merged while over the limit */
  int groups[SCH_LAYOUT_MAX_COMPS];
  int ng = n;
  for (int i = 0; i < n; i++) groups[i] = 1;
  for (int i = 0; ng > SCH_LAYOUT_MAX_AXES; i++) {
    if (i + 1 >= ng) i = 0;
    groups[i] += groups[i + 1];
    memmove(&groups[i + 1], &groups[i + 2], sizeof(int) * (size_t)(ng - i - 2));
    ng--;
  }
  m->naxes = ng;
  for (int i = 0; i < ng; i++) m->group[i] = groups[i];
  ts_diag q;
  ts_diag_clear(&q);
  if (sch_layout_check(m, &q)) lw_fail(c, TS_ESCHEDULE, "%s", q.msg, NULL);
}

static void lw_scan_expr(lw_ctx *c, const ir_expr *e);

static bool lw_expr_cb(void *ctx, const ir_expr *e) {
  lw_ctx *c = ctx;
  if (c->st) return false;
  if (e->kind == IR_ACCESS_PTR && e->u.ptr.buf == c->buf) {
    lw_fail(c, TS_ESCHEDULE, "it is accessed through a pointer (an intrinsic or an extern call)", NULL, NULL);
    return false;
  }
  if (e->kind != IR_LOAD || e->u.load.buf != c->buf) return true;
  if (c->nreal == 0) {
    lw_fail(c, TS_ESCHEDULE, "it is loaded outside any block", NULL, NULL);
    return false;
  }
  const ir_stmt *cur = c->real[c->nreal - 1];
  if (!c->reader) {
    c->reader = cur;
    c->nidx = e->u.load.nidx;
    c->idx = e->u.load.idx;
    lw_analyse(c, e->u.load.nidx, e->u.load.idx);
    return true;
  }
  if (c->reader != cur) {
    lw_fail(c, TS_ESCHEDULE, "blocks %s and %s both read it (MetaSchedule's rule: one reader block)",
            c->reader->u.realize.block->name, cur->u.realize.block->name);
    return false;
  }
  bool same = e->u.load.nidx == c->nidx;
  for (int i = 0; same && i < c->nidx; i++) same = ir_expr_equal(e->u.load.idx[i], c->idx[i]); /* vars by identity */
  if (!same) lw_fail(c, TS_ESCHEDULE, "block %s loads it at two different index tuples", cur->u.realize.block->name, NULL);
  return true;
}

static void lw_stmt(lw_ctx *c, const ir_stmt *s);

static void lw_scan_expr(lw_ctx *c, const ir_expr *e) {
  ir_visitor v = {.expr = lw_expr_cb, .ctx = c};
  ir_visit_expr(&v, e);
}

/* Loops and blocks push their scope (the loop nest and realizes the loads
 * are analysed under) and walk their own children; every other statement
 * is walked by the visitor, its expressions going to lw_expr_cb. */
static bool lw_stmt_cb(void *ctx, const ir_stmt *s) {
  lw_ctx *c = ctx;
  if (c->st) return false;
  switch (s->kind) {
  case IR_FOR: {
    if (c->nloops == LW_MAX_LOOPS) {
      lw_fail(c, TS_EUNSUPPORTED, "the loop nest is too deep", NULL, NULL);
      return false;
    }
    int64_t mn, ext;
    lw_scan_expr(c, s->u.loop.min);
    lw_scan_expr(c, s->u.loop.extent);
    bool ok = ir_as_int(s->u.loop.min, &mn) && mn == 0 && ir_as_int(s->u.loop.extent, &ext) && ext > 0;
    c->loops[c->nloops++] = (lw_loop){s->u.loop.var, ok ? ext : -1};
    lw_stmt(c, s->u.loop.body);
    c->nloops--;
    return false;
  }
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    for (int i = 0; i < b->niter; i++) lw_scan_expr(c, s->u.realize.iter_values[i]);
    lw_scan_expr(c, s->u.realize.predicate);
    if (c->nreal == LW_MAX_REAL) {
      lw_fail(c, TS_EUNSUPPORTED, "blocks nest too deep", NULL, NULL);
      return false;
    }
    c->real[c->nreal++] = s;
    lw_stmt(c, b->init);
    lw_stmt(c, b->body);
    c->nreal--;
    return false;
  }
  case IR_STORE:
    if (s->u.store.buf == c->buf) lw_fail(c, TS_ESCHEDULE, "it is stored to", NULL, NULL);
    return !c->st;
  default:
    return true;
  }
}

static void lw_stmt(lw_ctx *c, const ir_stmt *s) {
  ir_visitor v = {.expr = lw_expr_cb, .stmt = lw_stmt_cb, .ctx = c};
  ir_visit_stmt(&v, s);
}

ts_status sch_layout_suggest(const ir_func *f, int param, sch_layout_map *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  if (param < 0 || param >= f->ninputs)
    return ts_diag_set(d, TS_EINVAL, "layout rewrite in %s: param %d is not an input (%d inputs)",
                       f->name ? f->name : "?", param, f->ninputs);
  const ir_buffer *buf = f->params[param];
  if (buf->ndim < 1 || buf->ndim > SCH_LAYOUT_MAX_DIMS)
    return ts_diag_set(d, TS_ESCHEDULE, "layout rewrite of %s in %s: rank %d (want 1..%d)", buf->name,
                       f->name ? f->name : "?", buf->ndim, SCH_LAYOUT_MAX_DIMS);
  if (buf->strides || buf->elem_offset)
    return ts_diag_set(d, TS_ESCHEDULE, "layout rewrite of %s in %s: it has explicit strides or an offset",
                       buf->name, f->name ? f->name : "?");
  const ir_annot *rw = ir_annot_find(f->nannot, f->annots, SCH_ANN_LAYOUT_REWRITTEN);
  if (rw && rw->kind == IR_ANN_INT && param < 63 && (rw->v.i >> param & 1))
    return ts_diag_set(d, TS_ESCHEDULE, "layout rewrite of %s in %s: already rewritten", buf->name,
                       f->name ? f->name : "?");
  lw_ctx c;
  memset(&c, 0, sizeof c);
  c.f = f;
  c.buf = buf;
  c.param = param;
  c.out = out;
  c.d = d;
  ts_arena_init(&c.arena);
  lw_stmt(&c, f->body);
  if (!c.st && !c.reader) lw_fail(&c, TS_ESCHEDULE, "no block reads it", NULL, NULL);
  ts_arena_fini(&c.arena);
  return c.st;
}

/* ---- the packed dtype ------------------------------------------------------------ */

bool sch_dtype_widens(ir_dtype from, ir_dtype to) {
  if (from.lanes != 1 || to.lanes != 1 || !ir_dtype_is_int(from) || !ir_dtype_is_int(to) || ir_dtype_bits(from) != 8)
    return false;
  int tb = ir_dtype_bits(to);
  if (tb != 16 && tb != 32) return false;
  return ir_dtype_is_signed(to) || !ir_dtype_is_signed(from);
}

ir_dtype sch_layout_packed_dtype(const sch_layout_map *m, ir_dtype from) {
  return m->dtype.lanes ? (ir_dtype){m->dtype.code, 1} : from;
}

/* ---- the primitive --------------------------------------------------------------- */

typedef struct tl_ctx {
  ts_arena *a;
  const ir_buffer *from;
  ir_buffer *to;
  const sch_layout_map *m;
  ir_analyzer an;
  bool oom;
} tl_ctx;

/* The packed index of original indices idx (simplified under the facts). */
static ir_expr **tl_index(tl_ctx *c, ir_expr *const *idx) {
  const sch_layout_map *m = c->m;
  ir_expr **out = TS_ANEWN(c->a, ir_expr *, m->naxes);
  if (!out) {
    c->oom = true;
    return NULL;
  }
  ir_dtype it = idx[0]->dtype;
  int j = 0;
  for (int a = 0; a < m->naxes; a++) {
    ir_expr *v = NULL;
    for (int g = 0; g < m->group[a]; g++, j++) {
      const sch_layout_comp *k = &m->comp[j];
      ir_expr *x = idx[k->dim];
      ir_expr *dig = ir_floordiv(c->a, x, ir_int(c->a, x->dtype, k->stride));
      if (dig && k->stride * k->extent < m->shape[k->dim]) dig = ir_floormod(c->a, dig, ir_int(c->a, x->dtype, k->extent));
      if (!dig) {
        c->oom = true;
        return NULL;
      }
      v = v ? ir_add(c->a, ir_mul(c->a, v, ir_int(c->a, it, k->extent)), dig) : dig;
    }
    out[a] = v ? ir_simplify(&c->an, v) : NULL;
    if (!out[a]) {
      c->oom = true;
      return NULL;
    }
  }
  return out;
}

/* True when x (a cast's operand, rewritten) is a widened packed load cast
 * back to the original dtype: cast(from, load to[...]). */
static bool tl_narrowed(const tl_ctx *c, const ir_expr *x) {
  return x->kind == IR_CAST && ir_dtype_eq(x->dtype, c->from->dtype) && x->u.cast.value->kind == IR_LOAD &&
         x->u.cast.value->u.load.buf == c->to;
}

/* A load of the original buffer (indices already rewritten) becomes a
 * load of the packed one. With a widening map it is cast back to the
 * original dtype (every value fits both), and a cast of that to a type at
 * least the packed one's width reads the packed load directly (the same
 * value: i32(i8(w16)) = i32(w16) where w16 holds an i8). */
static ir_expr *tl_load(ir_mutator *mu, const ir_expr *orig, ir_expr *e) {
  (void)orig;
  tl_ctx *c = mu->ctx;
  if (e->kind == IR_CAST && tl_narrowed(c, e->u.cast.value) &&
      (ir_dtype_is_float(e->dtype) || (ir_dtype_is_int(e->dtype) && ir_dtype_bits(e->dtype) >= ir_dtype_bits(c->to->dtype)))) {
    ir_expr *n = ir_expr_clone(c->a, e);
    if (!n) {
      ir_mutator_fail(mu);
      return NULL;
    }
    n->u.cast.value = e->u.cast.value->u.cast.value;
    return n;
  }
  if (e->kind != IR_LOAD || e->u.load.buf != c->from) return NULL;
  ir_expr **idx = tl_index(c, e->u.load.idx);
  ir_expr *n = idx ? ir_expr_clone(c->a, e) : NULL;
  if (!n) {
    ir_mutator_fail(mu);
    return NULL;
  }
  n->u.load.buf = c->to;
  n->u.load.nidx = c->to->ndim;
  n->u.load.idx = idx;
  if (ir_dtype_eq(c->to->dtype, c->from->dtype)) return n;
  n->dtype = (ir_dtype){c->to->dtype.code, e->dtype.lanes};
  ir_expr *back = ir_cast(c->a, e->dtype, n);
  if (!back) ir_mutator_fail(mu);
  return back;
}

/* A region of the original buffer as a region of the packed one: an axis
 * whose components all come from dims read at one point is that point,
 * any other axis is whole (a cover, as regions must be). */
static ir_region tl_region(tl_ctx *c, const ir_region *r) {
  const sch_layout_map *m = c->m;
  ir_region nr = {.buf = c->to, .ndim = m->naxes, .ranges = TS_ANEWN(c->a, ir_range, m->naxes)};
  ir_expr *mins[SCH_LAYOUT_MAX_DIMS];
  bool point[SCH_LAYOUT_MAX_DIMS];
  if (!nr.ranges) {
    c->oom = true;
    return *r;
  }
  for (int k = 0; k < m->ndim; k++) {
    int64_t e;
    point[k] = ir_as_int(r->ranges[k].extent, &e) && e == 1;
    mins[k] = r->ranges[k].min;
  }
  ir_expr **pt = tl_index(c, mins);
  if (!pt) return *r;
  int64_t shape[SCH_LAYOUT_MAX_AXES];
  sch_layout_packed_shape(m, shape);
  ir_dtype it = r->ranges[0].extent->dtype;
  int j = 0;
  for (int a = 0; a < m->naxes; a++) {
    bool p = true;
    for (int g = 0; g < m->group[a]; g++, j++) p &= point[m->comp[j].dim];
    nr.ranges[a].min = p ? pt[a] : ir_int(c->a, it, 0);
    nr.ranges[a].extent = ir_int(c->a, it, p ? 1 : shape[a]);
    if (!nr.ranges[a].min || !nr.ranges[a].extent) c->oom = true;
  }
  return nr;
}

static ir_region *tl_regions(tl_ctx *c, int n, ir_region *src) {
  ir_region *out = src;
  for (int i = 0; i < n; i++) {
    if (src[i].buf != c->from) continue;
    if (out == src) {
      out = TS_ANEWN(c->a, ir_region, n);
      if (!out) {
        c->oom = true;
        return src;
      }
      memcpy(out, src, sizeof(ir_region) * (size_t)n);
    }
    out[i] = tl_region(c, &src[i]);
  }
  return out;
}

/* Loops and blocks bind their vars in the analyzer (the packed indices are
 * simplified under them); a block's regions of the buffer are repacked. */
static ir_stmt *tl_stmt(ir_mutator *mu, ir_stmt *s) {
  tl_ctx *c = mu->ctx;
  int mark = c->an.n;
  if (s->kind == IR_FOR) {
    ir_analyzer_bind(&c->an, s->u.loop.var, s->u.loop.min, s->u.loop.extent);
    ir_stmt *n = ir_mutate_stmt_children(mu, s);
    ir_analyzer_truncate(&c->an, mark);
    return n;
  }
  if (s->kind != IR_BLOCK_REALIZE) return NULL;
  const ir_block *b = s->u.realize.block;
  for (int i = 0; i < b->niter; i++)
    ir_analyzer_bind(&c->an, b->iters[i].var, b->iters[i].dom.min, b->iters[i].dom.extent);
  ir_stmt *n = ir_mutate_stmt_children(mu, s);
  ir_region *reads = tl_regions(c, b->nreads, n->u.realize.block->reads);
  ir_region *writes = tl_regions(c, b->nwrites, n->u.realize.block->writes);
  ir_analyzer_truncate(&c->an, mark);
  if (c->oom || mu->failed) {
    ir_mutator_fail(mu);
    return s;
  }
  if (reads == n->u.realize.block->reads && writes == n->u.realize.block->writes) return n;
  ir_block *nb = n->u.realize.block == b ? ir_block_clone(c->a, b) : n->u.realize.block;
  if (n == s) n = ir_stmt_clone(c->a, s);
  if (!nb || !n) {
    ir_mutator_fail(mu);
    return s;
  }
  nb->reads = reads;
  nb->writes = writes;
  n->u.realize.block = nb;
  return n;
}

/* Pointer accesses and stores of buf anywhere (the primitive refuses them). */
typedef struct tl_scan {
  const ir_buffer *buf;
  bool ptr, store;
} tl_scan;

static bool tl_scan_expr(void *ctx, const ir_expr *e) {
  tl_scan *c = ctx;
  if (e->kind == IR_ACCESS_PTR && e->u.ptr.buf == c->buf) c->ptr = true;
  return true;
}

static bool tl_scan_stmt(void *ctx, const ir_stmt *s) {
  tl_scan *c = ctx;
  if (s->kind == IR_STORE && s->u.store.buf == c->buf) c->store = true;
  return true;
}

ts_status sch_transform_layout(sch_state *s, const sch_layout_map *m, ts_diag *d) {
  ir_func *f = sch_func(s);
  const char *fn = f->name ? f->name : "?";
  if (m->param < 0 || m->param >= f->ninputs)
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout in %s: param %d is not an input (%d inputs)", fn,
                       m->param, f->ninputs);
  ir_buffer *old = f->params[m->param];
  ts_diag q;
  ts_diag_clear(&q);
  if (sch_layout_check(m, &q))
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout of %s in %s: %s", old->name, fn, q.msg);
  const ir_annot *rw = ir_annot_find(f->nannot, f->annots, SCH_ANN_LAYOUT_REWRITTEN);
  int64_t mask = rw && rw->kind == IR_ANN_INT ? rw->v.i : 0;
  if (m->param >= 63 || (mask >> m->param & 1))
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout of %s in %s: %s", old->name, fn,
                       m->param >= 63 ? "param index over 62" : "already rewritten (one rewrite per param)");
  if (old->ndim != m->ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout of %s in %s: the map is for rank %d, the buffer has %d",
                       old->name, fn, m->ndim, old->ndim);
  for (int k = 0; k < old->ndim; k++) {
    int64_t e;
    if (!ir_as_int(old->shape[k], &e) || e != m->shape[k])
      return ts_diag_set(d, TS_ESCHEDULE,
                         "transform_layout of %s in %s: dim %d is not the constant %lld the map was made for", old->name,
                         fn, k, (long long)m->shape[k]);
  }
  if (old->strides || old->elem_offset)
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout of %s in %s: it has explicit strides or an offset",
                       old->name, fn);
  if (m->dtype.lanes && !sch_dtype_widens(old->dtype, m->dtype)) {
    char f1[16], f2[16];
    return ts_diag_set(d, TS_ESCHEDULE,
                       "transform_layout of %s in %s: %s to %s is no widening of an 8-bit integer to 16 or 32 bits",
                       old->name, fn, ir_dtype_str(old->dtype, f1, sizeof f1), ir_dtype_str(m->dtype, f2, sizeof f2));
  }
  tl_scan sc = {.buf = old};
  ir_visitor v = {.expr = tl_scan_expr, .stmt = tl_scan_stmt, .ctx = &sc};
  ir_visit_stmt(&v, f->body);
  if (sc.ptr || sc.store)
    return ts_diag_set(d, TS_ESCHEDULE, "transform_layout of %s in %s: it is %s", old->name, fn,
                       sc.store ? "stored to" : "accessed through a pointer (an intrinsic or an extern call)");

  ts_arena *a = sch_arena(s);
  int64_t shape[SCH_LAYOUT_MAX_AXES];
  sch_layout_packed_shape(m, shape);
  ir_expr *dims[SCH_LAYOUT_MAX_AXES];
  ir_dtype st = old->shape[0]->dtype;
  for (int i = 0; i < m->naxes; i++)
    if (!(dims[i] = ir_int(a, st, shape[i]))) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ir_buffer *nb = ir_buffer_new(a, old->name, sch_layout_packed_dtype(m, old->dtype), m->naxes, dims, old->scope);
  ir_buffer **params = TS_ANEWN(a, ir_buffer *, f->nparams);
  if (!nb || !params) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  nb->align = old->align;
  memcpy(params, f->params, sizeof(ir_buffer *) * (size_t)f->nparams);
  params[m->param] = nb;
  tl_ctx c = {.a = a, .from = old, .to = nb, .m = m};
  ir_analyzer_init(&c.an, a);
  ir_mutator mu;
  ir_mutator_init(&mu, a);
  mu.ctx = &c;
  mu.pre_stmt = tl_stmt;
  mu.post_expr = tl_load;
  ir_stmt *body = ir_mutate_stmt(&mu, f->body);
  c.oom |= mu.failed;
  ir_mutator_fini(&mu);
  ir_analyzer_fini(&c.an);
  int nann = f->nannot;
  ir_annot *anns = f->annots;
  if (c.oom || ir_annot_set(a, &nann, &anns,
                            (ir_annot){.key = SCH_ANN_LAYOUT_REWRITTEN, .kind = IR_ANN_INT,
                                       .v.i = mask | (int64_t)1 << m->param}))
    return ts_diag_set(d, TS_ENOMEM, "out of memory rewriting the layout of %s", old->name);
  ir_buffer **oldp = f->params;
  ir_stmt *oldb = f->body;
  int oldn = f->nannot;
  ir_annot *olda = f->annots;
  f->params = params;
  f->body = body;
  f->nannot = nann;
  f->annots = anns;
  ts_status r = sch_finish(s, TS_OK, d);
  if (r) { /* a broken invariant: leave the state as it was */
    f->params = oldp;
    f->body = oldb;
    f->nannot = oldn;
    f->annots = olda;
  }
  return r;
}

ts_status sch_layout_from_attrs(const ir_func *f, int nattr, const sch_attr *at, sch_layout_map *m, ts_diag *d) {
  memset(m, 0, sizeof *m);
  if ((nattr != 3 && nattr != 4) || at[0].kind != SCH_ATTR_INT || at[1].kind != SCH_ATTR_INTS ||
      at[2].kind != SCH_ATTR_INTS || (nattr == 4 && (at[3].kind != SCH_ATTR_STR || !at[3].s)))
    return ts_diag_set(d, TS_EINVAL,
                       "TransformLayout: want attrs [param, [dim, stride, extent, ...], [group, ...]] and optionally "
                       "the packed dtype");
  if (nattr == 4 && (!ir_dtype_parse(at[3].s, &m->dtype) || m->dtype.lanes != 1))
    return ts_diag_set(d, TS_EINVAL, "TransformLayout: packed dtype '%s' is no scalar type", at[3].s);
  int64_t p = at[0].i;
  if (p < 0 || p >= f->ninputs)
    return ts_diag_set(d, TS_EINVAL, "TransformLayout: param %lld is not an input of %s (%d inputs)", (long long)p,
                       f->name ? f->name : "?", f->ninputs);
  const ir_buffer *b = f->params[p];
  if (b->ndim < 1 || b->ndim > SCH_LAYOUT_MAX_DIMS)
    return ts_diag_set(d, TS_EINVAL, "TransformLayout: %s has rank %d", b->name, b->ndim);
  m->param = (int)p;
  m->ndim = b->ndim;
  for (int k = 0; k < b->ndim; k++)
    if (!ir_as_int(b->shape[k], &m->shape[k]))
      return ts_diag_set(d, TS_EINVAL, "TransformLayout: %s has a non-constant dim %d", b->name, k);
  if (at[1].n % 3 || at[1].n / 3 > SCH_LAYOUT_MAX_COMPS || at[2].n > SCH_LAYOUT_MAX_AXES)
    return ts_diag_set(d, TS_EINVAL, "TransformLayout: %d component values (triples, at most %d) and %d groups (at most %d)",
                       at[1].n, SCH_LAYOUT_MAX_COMPS, at[2].n, SCH_LAYOUT_MAX_AXES);
  m->ncomp = at[1].n / 3;
  for (int j = 0; j < m->ncomp; j++) {
    int64_t dim = at[1].ints[3 * j];
    m->comp[j] = (sch_layout_comp){.dim = dim >= 0 && dim < 64 ? (int)dim : -1,
                                   .stride = at[1].ints[3 * j + 1],
                                   .extent = at[1].ints[3 * j + 2]};
  }
  m->naxes = at[2].n;
  for (int a = 0; a < m->naxes; a++) m->group[a] = at[2].ints[a] > 0 && at[2].ints[a] <= 64 ? (int)at[2].ints[a] : 0;
  return sch_layout_check(m, d);
}

int sch_layout_maps_of_trace(const sch_trace *tr, const ir_func *f, sch_layout_map *out, int max, ts_diag *d) {
  int n = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind != SCH_I_TRANSFORM_LAYOUT) continue;
    sch_layout_map m;
    if (sch_layout_from_attrs(f, in->nattr, in->attrs, &m, d)) return -1;
    if (n < max) out[n] = m;
    n++;
  }
  return n < max ? n : max;
}

const ir_func *sch_layout_reference(ts_arena *a, const ir_func *f, const sch_trace *tr, ts_diag *d) {
  sch_layout_map maps[8];
  int n = sch_layout_maps_of_trace(tr, f, maps, 8, d);
  if (n < 0) return NULL;
  if (n == 0) return f;
  sch_state *s = sch_create(f, 1, d);
  if (!s) return NULL;
  ts_status st = TS_OK;
  for (int i = 0; i < n && !st; i++) st = sch_transform_layout(s, &maps[i], d);
  ir_func *r = st ? NULL : ir_func_copy(a, sch_func(s));
  if (!st && !r) ts_diag_set(d, TS_ENOMEM, "out of memory");
  sch_free(s);
  return r;
}

void sch_layout_pack(const sch_layout_map *m, size_t eb, const void *src, void *dst) {
  int64_t total = 1;
  for (int k = 0; k < m->ndim; k++) total *= m->shape[k];
  int64_t x[SCH_LAYOUT_MAX_DIMS] = {0};
  const char *s = src;
  char *o = dst;
  int64_t ptotal = 1; /* a padded map: the padding is zeros */
  for (int j = 0; j < m->ncomp; j++) ptotal *= m->comp[j].extent;
  if (ptotal > total) memset(o, 0, (size_t)ptotal * eb);
  for (int64_t i = 0; i < total; i++) {
    int64_t off = 0;
    for (int j = 0; j < m->ncomp; j++) {
      const sch_layout_comp *c = &m->comp[j];
      off = off * c->extent + (x[c->dim] / c->stride) % c->extent;
    }
    memcpy(o + (size_t)off * eb, s + (size_t)i * eb, eb);
    for (int k = m->ndim - 1; k >= 0; k--) { /* row-major increment */
      if (++x[k] < m->shape[k]) break;
      x[k] = 0;
    }
  }
}

ts_status sch_layout_pack_as(const sch_layout_map *m, ir_dtype from, const void *src, void *dst, ts_diag *d) {
  ir_dtype to = sch_layout_packed_dtype(m, from);
  if (ir_dtype_eq(to, from)) {
    sch_layout_pack(m, (size_t)ir_dtype_bytes(from), src, dst);
    return TS_OK;
  }
  if (!sch_dtype_widens(from, to)) {
    char f1[16], f2[16];
    return ts_diag_set(d, TS_EINVAL, "layout pack: %s to %s is no widening of an 8-bit integer",
                       ir_dtype_str(from, f1, sizeof f1), ir_dtype_str(to, f2, sizeof f2));
  }
  int64_t total = 1;
  for (int k = 0; k < m->ndim; k++) total *= m->shape[k];
  int32_t *wide = ts_malloc((size_t)(total ? total : 1) * sizeof(int32_t));
  if (!wide) return ts_diag_set(d, TS_ENOMEM, "out of memory packing %lld elements", (long long)total);
  const uint8_t *s = src;
  bool sgn = ir_dtype_is_signed(from);
  for (int64_t i = 0; i < total; i++) wide[i] = sgn ? (int32_t)(int8_t)s[i] : (int32_t)s[i];
  int tb = ir_dtype_bytes(to);
  if (tb == 2) { /* narrowed in place: every value fits 16 bits */
    int16_t *h = (int16_t *)wide;
    for (int64_t i = 0; i < total; i++) h[i] = (int16_t)wide[i];
  }
  sch_layout_pack(m, (size_t)tb, wide, dst);
  ts_free(wide);
  return TS_OK;
}
