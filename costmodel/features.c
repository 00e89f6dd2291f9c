/* features.c — MetaSchedule's per-store features (164 per stored buffer) on
 * the lowered function, plus tessel's group 6 of 18 size-free ratios that
 * help a model rank workloads it was not trained on (docs/FEATURES.md lists
 * them all).
 *
 * The walk keeps a stack of enclosing loops. Lowering turns a vectorized
 * loop into lanes (ramp/broadcast), so a store whose index or value has
 * lanes > 1 gets a pseudo loop of kind vectorized and extent = lanes as its
 * innermost loop; ramps are evaluated with the lane as that loop's variable.
 * Buffers are flat (one index), so regions are intervals of the flat index
 * computed by interval arithmetic, and strides come from evaluating the
 * index at the loop's min and min + 1 (other vars at their mins). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel/cm_int.h"

#define NBUF 5
#define BUFF 18
#define G2 57
#define G3 (G2 + NBUF * BUFF) /* 147 */
#define G4 (G3 + 10)          /* 157 */
#define G6 (G4 + 7)           /* 164: tessel's transfer features */
#define NG6 18
#define NB6 3 /* buffers with per-buffer transfer features */

/* ---- names ---------------------------------------------------------------- */
static const char *g1_names[57] = {
    "float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_mathfunc",
    "float_otherfunc", "int_mad", "int_addsub", "int_mul", "int_divmod", "int_cmp",
    "int_mathfunc", "int_otherfunc", "bool_op", "select_op",
    "vec_num", "vec_prod", "vec_len", "vec_type.none", "vec_type.inner_spatial",
    "vec_type.middle_spatial", "vec_type.outer_spatial", "vec_type.inner_reduce",
    "vec_type.middle_reduce", "vec_type.outer_reduce", "vec_type.mixed",
    "unroll_num", "unroll_prod", "unroll_len", "unroll_type.none", "unroll_type.inner_spatial",
    "unroll_type.middle_spatial", "unroll_type.outer_spatial", "unroll_type.inner_reduce",
    "unroll_type.middle_reduce", "unroll_type.outer_reduce", "unroll_type.mixed",
    "parallel_num", "parallel_prod", "parallel_len", "parallel_type.none",
    "parallel_type.inner_spatial", "parallel_type.middle_spatial", "parallel_type.outer_spatial",
    "parallel_type.inner_reduce", "parallel_type.middle_reduce", "parallel_type.outer_reduce",
    "parallel_type.mixed", "is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len",
    "threadIdx_x_len", "threadIdx_y_len", "threadIdx_z_len", "vthread_len"};
static const char *g1_desc[57] = {
    "float multiply-adds (never counted, always 0)", "float add/sub nodes x prod",
    "float mul nodes x prod", "float div/mod/floordiv/floormod nodes x prod",
    "float min/max nodes x prod", "float intrinsic calls x prod", "float other calls x prod",
    "int multiply-adds (always 0)", "int add/sub nodes x prod", "int mul nodes x prod",
    "int div/mod nodes x prod", "int min/max and all comparisons (bool result) x prod",
    "int intrinsic calls x prod", "int other calls x prod", "and/or/not nodes x prod",
    "select nodes x prod", "number of enclosing vectorized loops (lanes count as one)",
    "product of their extents", "extent of the innermost one", "one-hot: no vectorized loop",
    "one-hot (never set)", "one-hot (never set)", "one-hot (never set)", "one-hot (never set)",
    "one-hot (never set)", "one-hot (never set)", "one-hot: has a vectorized loop",
    "number of enclosing unrolled loops", "product of their extents", "extent of the innermost one",
    "one-hot: no unrolled loop", "one-hot (never set)", "one-hot (never set)",
    "one-hot (never set)", "one-hot (never set)", "one-hot (never set)", "one-hot (never set)",
    "one-hot: has an unrolled loop", "number of enclosing parallel loops",
    "product of their extents", "extent of the innermost one", "one-hot: no parallel loop",
    "one-hot (never set)", "one-hot (never set)", "one-hot (never set)", "one-hot (never set)",
    "one-hot (never set)", "one-hot (never set)", "one-hot: has a parallel loop",
    "1 for a GPU target (raw)", "extent of blockIdx.x (1 if none)", "extent of blockIdx.y",
    "extent of blockIdx.z", "extent of threadIdx.x", "extent of threadIdx.y",
    "extent of threadIdx.z", "extent of vthread (any vthread.* tag)"};
static const char *buf_names[BUFF] = {
    "acc_type.read", "acc_type.write", "acc_type.readwrite", "bytes", "unique_bytes", "lines",
    "unique_lines", "reuse_type.loop_multiple_read", "reuse_type.serial_multiple_rw",
    "reuse_type.none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct", "bytes_d_reuse_ct",
    "unique_bytes_d_reuse_ct", "lines_d_reuse_ct", "unique_lines_d_reuse_ct", "stride"};
static const char *buf_desc[BUFF] = {
    "one-hot: read only", "one-hot: written only", "one-hot: read and written",
    "elem_bytes x prod", "bytes of the region touched by the whole nest",
    "cache lines touched (stride model)", "unique_bytes / min(64, contiguous bytes)",
    "one-hot: a loop var not in the indices (reuse across that loop)",
    "one-hot: the buffer was touched several times under a loop",
    "one-hot: no reuse", "iterations between reuses", "bytes touched between reuses",
    "reuse count", "bytes / reuse_ct (0.5 if 0)", "unique_bytes / reuse_ct",
    "lines / reuse_ct", "unique_lines / reuse_ct", "stride of the innermost loop if it moves the index"};
static const char *tail_names[7] = {"alloc_size", "alloc_prod", "alloc_outer_prod",
                                    "alloc_inner_prod", "outer_prod", "num_loops",
                                    "auto_unroll_max_step"};
static const char *g6_names[NG6] = {
    "rel_flops", "rel_prod", "cand_flops", "cand_rows", "inner_extent", "vec_bytes", "vec_contig",
    "flops_per_line", "flops_per_ubyte", "B0.lines_per_iter", "B1.lines_per_iter", "B2.lines_per_iter",
    "B0.reuse_factor", "B1.reuse_factor", "B2.reuse_factor", "B0.lines_share", "B1.lines_share",
    "B2.lines_share"};
static const char *g6_desc[NG6] = {
    "this row's float ops / the candidate's (raw, 0..1)",
    "prod / the largest prod of the candidate's rows (raw, 0..1)",
    "float ops of the whole candidate (about the workload's FLOPs)",
    "number of rows (stored buffers) of the candidate (raw)",
    "extent of the innermost loop (vector lanes excluded)",
    "bytes per vector store: lanes x element bytes (0 if scalar)",
    "raw 1 if the store is vectorised and every buffer's lane stride is 0 or 1",
    "float ops / cache lines of all buffers (lines, group 2)",
    "float ops / unique bytes of all buffers",
    "B0 lines / prod (raw): share of iterations that touch a new cache line",
    "B1 lines / prod (raw)", "B2 lines / prod (raw)",
    "B0 bytes / unique_bytes: accesses per distinct byte (temporal reuse)",
    "B1 bytes / unique_bytes", "B2 bytes / unique_bytes",
    "B0 lines / the lines of every buffer of every row of the candidate (raw, 0..1)",
    "B1 lines share (raw)", "B2 lines share (raw)"};
static const char *tail_desc[7] = {
    "bytes of the stored buffer's allocation (0 if none: a parameter)",
    "alloc_size x alloc_outer_prod (0 if none)",
    "product of loops around the allocation (raw 1 if none)", "prod / alloc_outer_prod",
    "prod: product of all enclosing loop extents", "number of enclosing loops",
    "pragma auto_unroll_max_step of the innermost loop carrying it, else 0"};

static char name_store[CM_NUM_FEATURES][48];
static const char *name_desc[CM_NUM_FEATURES];
static int names_ready;

static void init_names(void) {
  if (names_ready) return;
  for (int i = 0; i < 57; i++) {
    snprintf(name_store[i], sizeof name_store[i], "%s", g1_names[i]);
    name_desc[i] = g1_desc[i];
  }
  for (int b = 0; b < NBUF; b++)
    for (int k = 0; k < BUFF; k++) {
      snprintf(name_store[G2 + b * BUFF + k], 48, "B%d.%s", b, buf_names[k]);
      name_desc[G2 + b * BUFF + k] = buf_desc[k];
    }
  for (int s = 0; s < 10; s++) {
    snprintf(name_store[G3 + s], 48, "arith_intensity_curve_%d", s);
    name_desc[G3 + s] = "log2(1 + float ops per byte) at the (s+1)/10 point of the compute curve";
  }
  for (int i = 0; i < 7; i++) {
    snprintf(name_store[G4 + i], 48, "%s", tail_names[i]);
    name_desc[G4 + i] = tail_desc[i];
  }
  for (int i = 0; i < NG6; i++) {
    snprintf(name_store[G6 + i], 48, "%s", g6_names[i]);
    name_desc[G6 + i] = g6_desc[i];
  }
  names_ready = 1;
}

const char *cm_feature_name(int i) {
  if (i < 0 || i >= CM_NUM_FEATURES) return NULL;
  init_names();
  return name_store[i];
}

const char *cm_feature_desc(int i) {
  if (i < 0 || i >= CM_NUM_FEATURES) return NULL;
  init_names();
  return name_desc[i];
}

/* ---- walk state ----------------------------------------------------------- */
static double slog(double x) { return log2(fabs(x) + 1.0); }

typedef struct loop_ent {
  const void *key;    /* the IR_FOR stmt, or the store for a lane pseudo loop */
  const ir_var *var;  /* NULL for lanes */
  double min, ext;    /* ext 1 if non-constant */
  ir_for_kind kind;
  const char *thread;
  int64_t unroll_step; /* pragma_auto_unroll_max_step, -1 if none */
} loop_ent;

typedef struct let_ent {
  const ir_var *var;
  const ir_expr *value;
} let_ent;

typedef struct treg { /* T[loop][buf]: numels recorded for the whole function */
  const void *loop;
  const ir_buffer *buf;
  double numel, bytes;
} treg;

typedef struct alloc_ent {
  const ir_buffer *buf;
  double outer_prod;
} alloc_ent;

typedef struct row_ent {
  const ir_buffer *buf;
  float v[CM_NUM_FEATURES];
  double flops, prod, lines[NB6]; /* raw, for the candidate-level features */
} row_ent;

typedef struct walker {
  const cg_target *t;
  loop_ent *loops;
  int nloops, caploops;
  let_ent *lets;
  int nlets, caplets;
  treg *T;
  int nT, capT;
  alloc_ent *allocs;
  int nalloc, capalloc;
  row_ent *rows;
  int nrows, caprows;
  bool oom;
  /* interval evaluation: loops at index >= widen_from are ranges */
  int widen_from;
  /* point evaluation: loop index bumped by one (-1 none) */
  int bump;
} walker;

#define GROW(w, arr, n, cap)                                              \
  do {                                                                    \
    if ((n) >= (cap)) {                                                   \
      int nc_ = (cap) ? (cap) * 2 : 16;                                   \
      void *p_ = ts_realloc((arr), (size_t)nc_ * sizeof *(arr));          \
      if (!p_) { (w)->oom = true; break; }                                \
      (arr) = p_;                                                         \
      (cap) = nc_;                                                        \
    }                                                                     \
  } while (0)

static int find_loop(const walker *w, const ir_var *v) {
  for (int i = w->nloops - 1; i >= 0; i--)
    if (w->loops[i].var == v) return i;
  return -1;
}
static int lane_loop(const walker *w) {
  if (w->nloops && w->loops[w->nloops - 1].var == NULL) return w->nloops - 1;
  return -1;
}
static const ir_expr *find_let(const walker *w, const ir_var *v) {
  for (int i = w->nlets - 1; i >= 0; i--)
    if (w->lets[i].var == v) return w->lets[i].value;
  return NULL;
}

/* Point value of an index expression (loop vars at their min; w->bump one
 * step further). Loads and unknown vars are 0. */
static double eval_pt(const walker *w, const ir_expr *e, int depth) {
  if (!e || depth > 64) return 0;
  switch (e->kind) {
  case IR_INT_IMM: return (double)e->u.ival;
  case IR_FLOAT_IMM: return e->u.fval;
  case IR_VAR: {
    int i = find_loop(w, e->u.var);
    if (i >= 0) return w->loops[i].min + (i == w->bump ? 1 : 0);
    const ir_expr *lv = find_let(w, e->u.var);
    return lv ? eval_pt(w, lv, depth + 1) : 0;
  }
  case IR_RAMP: {
    int li = lane_loop(w);
    double lane = (li >= 0 && li == w->bump) ? 1 : 0;
    return eval_pt(w, e->u.ramp.base, depth + 1) + lane * eval_pt(w, e->u.ramp.stride, depth + 1);
  }
  case IR_BROADCAST: return eval_pt(w, e->u.bcast.value, depth + 1);
  case IR_CAST: return eval_pt(w, e->u.cast.value, depth + 1);
  case IR_SELECT: return eval_pt(w, e->u.sel.t, depth + 1);
  default: break;
  }
  if (ir_is_binop(e->kind)) {
    double a = eval_pt(w, e->u.bin.a, depth + 1), b = eval_pt(w, e->u.bin.b, depth + 1);
    switch (e->kind) {
    case IR_ADD: return a + b;
    case IR_SUB: return a - b;
    case IR_MUL: return a * b;
    case IR_DIV: return b != 0 ? trunc(a / b) : 0;
    case IR_FLOORDIV: return b != 0 ? floor(a / b) : 0;
    case IR_FLOORMOD: return b != 0 ? a - floor(a / b) * b : 0;
    case IR_MIN: return a < b ? a : b;
    case IR_MAX: return a > b ? a : b;
    default: return 0;
    }
  }
  return 0;
}

/* Interval [lo, hi] of an index expression: loops at index >= widen_from
 * range over their extent, outer ones sit at their min. */
static void eval_iv(const walker *w, const ir_expr *e, double *lo, double *hi, int depth) {
  *lo = *hi = 0;
  if (!e || depth > 64) return;
  switch (e->kind) {
  case IR_INT_IMM: *lo = *hi = (double)e->u.ival; return;
  case IR_FLOAT_IMM: *lo = *hi = e->u.fval; return;
  case IR_VAR: {
    int i = find_loop(w, e->u.var);
    if (i >= 0) {
      *lo = w->loops[i].min;
      *hi = *lo + (i >= w->widen_from ? w->loops[i].ext - 1 : 0);
      return;
    }
    const ir_expr *lv = find_let(w, e->u.var);
    if (lv) eval_iv(w, lv, lo, hi, depth + 1);
    return;
  }
  case IR_RAMP: {
    int li = lane_loop(w);
    double bl, bh, sl, sh;
    eval_iv(w, e->u.ramp.base, &bl, &bh, depth + 1);
    eval_iv(w, e->u.ramp.stride, &sl, &sh, depth + 1);
    double n = (li >= 0 && li >= w->widen_from) ? e->u.ramp.lanes - 1 : 0;
    double s = sl * n;
    *lo = bl + (s < 0 ? s : 0);
    *hi = bh + (s > 0 ? s : 0);
    return;
  }
  case IR_BROADCAST: eval_iv(w, e->u.bcast.value, lo, hi, depth + 1); return;
  case IR_CAST: eval_iv(w, e->u.cast.value, lo, hi, depth + 1); return;
  case IR_SELECT: {
    double a, b, c, d2;
    eval_iv(w, e->u.sel.t, &a, &b, depth + 1);
    eval_iv(w, e->u.sel.f, &c, &d2, depth + 1);
    *lo = a < c ? a : c;
    *hi = b > d2 ? b : d2;
    return;
  }
  default: break;
  }
  if (!ir_is_binop(e->kind)) return;
  double al, ah, bl, bh;
  eval_iv(w, e->u.bin.a, &al, &ah, depth + 1);
  eval_iv(w, e->u.bin.b, &bl, &bh, depth + 1);
  switch (e->kind) {
  case IR_ADD: *lo = al + bl; *hi = ah + bh; return;
  case IR_SUB: *lo = al - bh; *hi = ah - bl; return;
  case IR_MUL: {
    double c[4] = {al * bl, al * bh, ah * bl, ah * bh};
    *lo = *hi = c[0];
    for (int i = 1; i < 4; i++) {
      if (c[i] < *lo) *lo = c[i];
      if (c[i] > *hi) *hi = c[i];
    }
    return;
  }
  case IR_DIV:
  case IR_FLOORDIV:
    if (bl == bh && bl > 0) {
      *lo = floor(al / bl);
      *hi = floor(ah / bl);
    } else {
      *lo = al;
      *hi = ah;
    }
    return;
  case IR_FLOORMOD:
    if (bl == bh && bl > 0) {
      if (floor(al / bl) == floor(ah / bl)) {
        *lo = al - floor(al / bl) * bl;
        *hi = ah - floor(ah / bl) * bl;
      } else {
        *lo = 0;
        *hi = bl - 1;
      }
    } else {
      *lo = al;
      *hi = ah;
    }
    return;
  case IR_MIN: *lo = al < bl ? al : bl; *hi = ah < bh ? ah : bh; return;
  case IR_MAX: *lo = al > bl ? al : bl; *hi = ah > bh ? ah : bh; return;
  default: return;
  }
}

/* ---- group 1: arithmetic counters ----------------------------------------- */
static void count_ops(const ir_expr *e, double prod, double *f) {
  if (!e) return;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
  case IR_LOAD: return; /* loads and their index arithmetic are not counted */
  case IR_CAST: count_ops(e->u.cast.value, prod, f); return;
  case IR_RAMP: return;
  case IR_BROADCAST: count_ops(e->u.bcast.value, prod, f); return;
  case IR_NOT: f[14] += prod; count_ops(e->u.un.a, prod, f); return;
  case IR_SELECT:
    f[15] += prod;
    count_ops(e->u.sel.cond, prod, f);
    count_ops(e->u.sel.t, prod, f);
    count_ops(e->u.sel.f, prod, f);
    return;
  case IR_CALL: {
    f[ir_dtype_is_float(e->dtype) ? 5 : 12] += prod;
    for (int i = 0; i < e->u.call.nargs; i++) count_ops(e->u.call.args[i], prod, f);
    return;
  }
  default: break;
  }
  if (!ir_is_binop(e->kind)) return;
  int base = ir_dtype_is_float(e->dtype) ? 0 : 7;
  switch (e->kind) {
  case IR_ADD: case IR_SUB: f[base + 1] += prod; break;
  case IR_MUL: f[base + 2] += prod; break;
  case IR_DIV: case IR_FLOORDIV: case IR_FLOORMOD: f[base + 3] += prod; break;
  case IR_AND: case IR_OR: f[14] += prod; break;
  default: f[base + 4] += prod; break; /* min/max, comparisons (bool: int_cmp) */
  }
  count_ops(e->u.bin.a, prod, f);
  count_ops(e->u.bin.b, prod, f);
}

/* ---- group 2: buffers ------------------------------------------------------ */
typedef struct acc {
  const ir_buffer *buf;
  bool read, write;
  const ir_expr *idx[64];
  int nidx;
} acc;

typedef struct acc_set {
  acc a[16];
  int n;
} acc_set;

static acc *acc_get(acc_set *s, const ir_buffer *b) {
  for (int i = 0; i < s->n; i++)
    if (s->a[i].buf == b) return &s->a[i];
  if (s->n >= 16) return NULL;
  acc *a = &s->a[s->n++];
  memset(a, 0, sizeof *a);
  a->buf = b;
  return a;
}

static void collect_loads(const ir_expr *e, acc_set *s) {
  if (!e) return;
  switch (e->kind) {
  case IR_LOAD: {
    acc *a = acc_get(s, e->u.load.buf);
    if (a) {
      a->read = true;
      if (a->nidx < 64 && e->u.load.nidx > 0) a->idx[a->nidx++] = e->u.load.idx[0];
    }
    for (int i = 0; i < e->u.load.nidx; i++) collect_loads(e->u.load.idx[i], s);
    return;
  }
  case IR_NOT: collect_loads(e->u.un.a, s); return;
  case IR_SELECT:
    collect_loads(e->u.sel.cond, s);
    collect_loads(e->u.sel.t, s);
    collect_loads(e->u.sel.f, s);
    return;
  case IR_CAST: collect_loads(e->u.cast.value, s); return;
  case IR_CALL:
    for (int i = 0; i < e->u.call.nargs; i++) collect_loads(e->u.call.args[i], s);
    return;
  case IR_RAMP: collect_loads(e->u.ramp.base, s); return;
  case IR_BROADCAST: collect_loads(e->u.bcast.value, s); return;
  default:
    if (ir_is_binop(e->kind)) {
      collect_loads(e->u.bin.a, s);
      collect_loads(e->u.bin.b, s);
    }
    return;
  }
}

static bool expr_has_lane(const ir_expr *e) {
  if (!e) return false;
  switch (e->kind) {
  case IR_RAMP: return true;
  case IR_BROADCAST: return expr_has_lane(e->u.bcast.value);
  case IR_CAST: return expr_has_lane(e->u.cast.value);
  case IR_SELECT:
    return expr_has_lane(e->u.sel.cond) || expr_has_lane(e->u.sel.t) || expr_has_lane(e->u.sel.f);
  default:
    if (ir_is_binop(e->kind)) return expr_has_lane(e->u.bin.a) || expr_has_lane(e->u.bin.b);
    return false;
  }
}

static bool uses_var_let(const walker *w, const ir_expr *e, const ir_var *v, int depth);
typedef struct uv_ctx {
  const walker *w;
  const ir_var *v;
  bool found;
  int depth;
} uv_ctx;
static bool uv_expr(void *ctx, const ir_expr *e) {
  uv_ctx *c = ctx;
  if (c->found) return false;
  if (e->kind == IR_LOAD) return false;
  if (e->kind == IR_VAR) {
    if (e->u.var == c->v) c->found = true;
    else {
      const ir_expr *lv = find_let(c->w, e->u.var);
      if (lv && uses_var_let(c->w, lv, c->v, c->depth + 1)) c->found = true;
    }
  }
  return true;
}
static bool uses_var_let(const walker *w, const ir_expr *e, const ir_var *v, int depth) {
  if (depth > 32) return false;
  uv_ctx c = {w, v, false, depth};
  ir_visitor vis = {uv_expr, NULL, &c};
  ir_visit_expr(&vis, e);
  return c.found;
}

typedef struct bufinfo {
  const ir_buffer *buf;
  float f[BUFF];
  double lines, bytes, ubytes, inner_stride;
} bufinfo;

static int cmp_buf(const void *pa, const void *pb) {
  const bufinfo *a = pa, *b = pb;
  if (a->lines != b->lines) return a->lines > b->lines ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  const char *na = a->buf->name ? a->buf->name : "", *nb = b->buf->name ? b->buf->name : "";
  return strcmp(na, nb);
}

static void add_T(walker *w, const void *loop, const ir_buffer *b, double numel, double bytes) {
  GROW(w, w->T, w->nT, w->capT);
  if (w->oom) return;
  w->T[w->nT++] = (treg){loop, b, numel, bytes};
}

static double T_sum(const walker *w, const void *loop) {
  double s = 0;
  for (int i = 0; i < w->nT; i++)
    if (w->T[i].loop == loop) s += w->T[i].numel * w->T[i].bytes;
  return s;
}

/* Features of one store into row v (group 1 except is already filled). */
/* Group 1: arithmetic counts, loop-kind and thread-binding features of the
 * store (f: the raw counts group 3 reads). */
static void group1_features(walker *w, const ir_stmt *st, double prod, double *f, float *v) {
  int n = w->nloops;
  count_ops(st->u.store.value, prod, f);
  ir_for_kind kinds[3] = {IR_FOR_VECTORIZED, IR_FOR_UNROLLED, IR_FOR_PARALLEL};
  for (int k = 0; k < 3; k++) {
    double num = 0, p = 1, len = 0;
    for (int i = 0; i < n; i++)
      if (w->loops[i].kind == kinds[k]) {
        num++;
        p *= w->loops[i].ext;
        len = w->loops[i].ext;
      }
    int base = 16 + 11 * k;
    f[base] = num;
    f[base + 1] = num ? p : 0;
    f[base + 2] = len;
  }
  bool gpu = cg_target_ops_of(w->t)->gpu;
  static const char *tags[7] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                "threadIdx.y", "threadIdx.z", "vthread"};
  double tagv[7];
  for (int j = 0; j < 7; j++) {
    tagv[j] = 1;
    for (int i = 0; i < n; i++)
      if (w->loops[i].kind == IR_FOR_THREAD_BINDING && w->loops[i].thread &&
          (j == 6 ? !strncmp(w->loops[i].thread, "vthread", 7) /* vthread, vthread.x (GPU tiling) */
                  : !strcmp(w->loops[i].thread, tags[j]))) {
        tagv[j] = w->loops[i].ext;
        break;
      }
  }
  for (int i = 0; i < 49; i++) v[i] = (float)slog(f[i]);
  for (int k = 0; k < 3; k++) {
    int base = 16 + 11 * k;
    for (int j = 3; j < 11; j++) v[base + j] = 0;
    v[base + (f[base] > 0 ? 10 : 3)] = 1;
  }
  v[49] = gpu ? 1.0f : 0.0f;
  for (int j = 0; j < 7; j++) v[50 + j] = (float)slog(tagv[j]);

}

/* The loads and the store of st, by buffer (NULL on OOM). */
static acc_set *store_accesses(const ir_stmt *st) {
  acc_set *as = ts_calloc(1, sizeof *as);
  if (!as) return NULL;
  collect_loads(st->u.store.value, as);
  for (int i = 0; i < st->u.store.nidx; i++) collect_loads(st->u.store.idx[i], as);
  acc *sa = acc_get(as, st->u.store.buf);
  if (sa) {
    bool rw = sa->read;
    sa->write = true;
    if (!rw && sa->nidx < 64 && st->u.store.nidx > 0) sa->idx[sa->nidx++] = st->u.store.idx[0];
    else if (rw && sa->nidx < 64 && st->u.store.nidx > 0 && sa->nidx == 0)
      sa->idx[sa->nidx++] = st->u.store.idx[0];
  }
  return as;
}

/* The regions each buffer touches under loops i..n-1, for i from the
 * innermost to the outermost: touched[i] bytes, numel0 elements (i = 0),
 * and the T table of add_T. */
static void store_regions(walker *w, acc_set *as, double *numel0, double *touched) {
  int n = w->nloops, nb = as->n;
  /* regions: widen loops i..n-1 for i from innermost to outermost */
  int saved_widen = w->widen_from;
  for (int i = n - 1; i >= 0; i--) {
    w->widen_from = i;
    for (int b = 0; b < nb; b++) {
      acc *a = &as->a[b];
      double lo = 0, hi = -1;
      for (int t = 0; t < a->nidx; t++) {
        double l, h;
        eval_iv(w, a->idx[t], &l, &h, 0);
        if (t == 0 || l < lo) lo = l;
        if (t == 0 || h > hi) hi = h;
      }
      double numel = a->nidx ? hi - lo + 1 : 1;
      int64_t sz = ir_buffer_const_size(a->buf);
      if (sz > 0 && numel > (double)sz) numel = (double)sz;
      if (numel < 1) numel = 1;
      double eb = ir_dtype_bytes(a->buf->dtype) * (a->buf->dtype.lanes ? a->buf->dtype.lanes : 1);
      touched[i] += numel * eb;
      add_T(w, w->loops[i].key, a->buf, numel, eb);
      if (i == 0) numel0[b] = numel;
    }
  }
  w->widen_from = saved_widen;

}

/* Group 2 for buffer b of as: access type, bytes, lines, reuse, strides. */
static void buffer_features(walker *w, acc_set *as, int b, double prod, const double *numel0, bufinfo *out) {
  int n = w->nloops, nb = as->n;
  acc *a = &as->a[b];
  float *o = out->f;
  out->buf = a->buf;
  double eb = ir_dtype_bytes(a->buf->dtype);
  if (a->read && a->write) o[2] = 1;
  else if (a->write) o[1] = 1;
  else o[0] = 1;
  double bytes = eb * prod;
  double ubytes = n ? numel0[b] * eb : 1;
  /* strides */
  double min_stride = 0, nonstrided = 1;
  int s_pos = -1;
  for (int i = n - 1; i >= 0; i--) {
    double st_min = -1;
    for (int t = 0; t < a->nidx; t++) {
      w->bump = -1;
      double p0 = eval_pt(w, a->idx[t], 0);
      w->bump = i;
      double p1 = eval_pt(w, a->idx[t], 0);
      w->bump = -1;
      double d = fabs(p1 - p0);
      if (d > 0 && (st_min < 0 || d < st_min)) st_min = d;
    }
    if (st_min > 0) {
      min_stride = st_min;
      s_pos = i;
      break;
    }
    nonstrided *= w->loops[i].ext;
  }
  double innermost_stride = (s_pos == n - 1 && n > 0) ? min_stride : 0;
  double cont = 1;
  int64_t bsz = ir_buffer_const_size(a->buf);
  if (n && bsz > 0 && numel0[b] >= (double)bsz) cont = (double)bsz * eb;
  else if (innermost_stride == 1) cont = w->loops[n - 1].ext * eb;
  double lines = prod / nonstrided * fmin(1.0, min_stride * eb / 64.0);
  if (lines < 1) lines = 1;
  double ulines = ubytes / fmin(64.0, cont);
  if (ulines < 1) ulines = 1;
  /* reuse */
  int rtype = 2;
  double dis_iter = 0, dis_bytes = 0, ct = 0;
  for (int i = n - 1; i >= 0 && rtype == 2; i--) {
    bool inV = false;
    if (w->loops[i].var == NULL) {
      for (int t = 0; t < a->nidx && !inV; t++) inV = expr_has_lane(a->idx[t]);
    } else {
      for (int t = 0; t < a->nidx && !inV; t++)
        inV = uses_var_let(w, a->idx[t], w->loops[i].var, 0);
    }
    if (!inV) {
      rtype = 0;
      ct = w->loops[i].ext;
      dis_iter = 1;
      for (int j = i + 1; j < n; j++) dis_iter *= w->loops[j].ext;
      if (i == n - 1) {
        dis_bytes = 0;
        for (int bb = 0; bb < nb; bb++) dis_bytes += ir_dtype_bytes(as->a[bb].buf->dtype);
      } else {
        dis_bytes = T_sum(w, w->loops[i + 1].key);
      }
      break;
    }
    int cnt = 0;
    double mn = 0;
    for (int t = 0; t < w->nT; t++)
      if (w->T[t].loop == w->loops[i].key && w->T[t].buf == a->buf) {
        if (cnt == 0 || w->T[t].numel < mn) mn = w->T[t].numel;
        cnt++;
      }
    if (cnt >= 2) {
      rtype = 1;
      ct = cnt - 1;
      dis_iter = mn / w->loops[i].ext;
      dis_bytes = T_sum(w, w->loops[i].key) / w->loops[i].ext;
    }
  }
  o[3] = (float)slog(bytes);
  o[4] = (float)slog(ubytes);
  o[5] = (float)slog(lines);
  o[6] = (float)slog(ulines);
  o[7 + rtype] = 1;
  o[10] = (float)slog(dis_iter);
  o[11] = (float)slog(dis_bytes);
  o[12] = (float)slog(ct);
  double div = ct > 0 ? ct : 0.5;
  o[13] = (float)slog(bytes / div);
  o[14] = (float)slog(ubytes / div);
  o[15] = (float)slog(lines / div);
  o[16] = (float)slog(ulines / div);
  o[17] = (float)slog(innermost_stride);
  out->lines = lines;
  out->bytes = bytes;
  out->ubytes = ubytes;
  out->inner_stride = innermost_stride;
}

/* Group 3: the arithmetic intensity curve. */
static void intensity_features(walker *w, const double *f, double prod, const double *touched, float *v) {
  int n = w->nloops;
  double fl = 0;
  for (int i = 0; i < 7; i++) fl += f[i];
  for (int s = 0; s < 10; s++) v[G3 + s] = 0;
  if (n > 0 && fl > 0) {
    double per = fl / prod;
    double *C = ts_calloc((size_t)n, sizeof *C), *AI = ts_calloc((size_t)n, sizeof *AI);
    if (C && AI) {
      double cp = per;
      for (int k = 0; k < n; k++) {
        cp *= w->loops[n - 1 - k].ext;
        C[k] = cp;
        double M = touched[n - 1 - k];
        AI[k] = M > 0 ? C[k] / M : 0;
      }
      int p = 0;
      for (int s = 1; s <= 10; s++) {
        double target = s / 10.0 * C[n - 1];
        while (p < n - 1 && C[p] < target - 1e-4) p++;
        double val;
        if (p == 0) val = AI[0];
        else {
          double dc = C[p] - C[p - 1];
          val = AI[p - 1] + (dc != 0 ? (AI[p] - AI[p - 1]) * (target - C[p - 1]) / dc : 0);
        }
        v[G3 + s - 1] = (float)slog(val);
      }
    }
    ts_free(C);
    ts_free(AI);
  }

}

/* Groups 4-5: the store's allocation and the loop nest. */
static void alloc_features(walker *w, const ir_stmt *st, double prod, float *v) {
  int n = w->nloops;
  const ir_buffer *sb = st->u.store.buf;
  int ai = -1;
  for (int i = 0; i < w->nalloc; i++)
    if (w->allocs[i].buf == sb) ai = i;
  if (ai >= 0) {
    double asz = (double)(ir_buffer_const_size(sb) > 0 ? ir_buffer_const_size(sb) : 1) *
                 ir_dtype_bytes(sb->dtype);
    double op = w->allocs[ai].outer_prod;
    v[G4 + 0] = (float)slog(asz);
    v[G4 + 1] = (float)slog(asz * op);
    v[G4 + 2] = (float)slog(op);
    v[G4 + 3] = (float)slog(prod / op);
  } else {
    v[G4 + 0] = 0;
    v[G4 + 1] = 0;
    v[G4 + 2] = 1;
    v[G4 + 3] = (float)slog(prod);
  }
  v[G4 + 4] = (float)slog(prod);
  v[G4 + 5] = (float)slog(n);
  double step = 0;
  for (int i = n - 1; i >= 0; i--)
    if (w->loops[i].unroll_step >= 0) {
      step = (double)w->loops[i].unroll_step;
      break;
    }
  v[G4 + 6] = (float)slog(step);

}

/* Group 6 (tessel's, for ranking across workloads): ratios that do not grow
 * with the workload's size. The candidate-level ones (rel_flops, rel_prod,
 * cand_flops, cand_rows, lines_share) are filled by candidate_features. */
static void transfer_features(walker *w, const ir_stmt *st, const double *f, double prod, const bufinfo *bi,
                              int nb, row_ent *row) {
  float *v = row->v;
  int n = w->nloops;
  double fl = 0, lines = 0, ub = 0;
  for (int i = 0; i < 7; i++) fl += f[i];
  for (int b = 0; b < nb; b++) {
    lines += bi[b].lines;
    ub += bi[b].ubytes;
  }
  int li = lane_loop(w);
  double lanes = li >= 0 ? w->loops[li].ext : 1, inner = 1;
  for (int i = n - 1; i >= 0; i--)
    if (w->loops[i].var) {
      inner = w->loops[i].ext;
      break;
    }
  bool contig = lanes > 1;
  for (int b = 0; b < nb && contig; b++) contig = bi[b].inner_stride <= 1;
  v[G6 + 4] = (float)slog(inner);
  v[G6 + 5] = (float)(lanes > 1 ? slog(lanes * ir_dtype_bytes(st->u.store.buf->dtype)) : 0);
  v[G6 + 6] = contig ? 1.0f : 0.0f;
  v[G6 + 7] = (float)slog(lines > 0 ? fl / lines : 0);
  v[G6 + 8] = (float)slog(ub > 0 ? fl / ub : 0);
  for (int b = 0; b < NB6; b++) {
    v[G6 + 9 + b] = b < nb && prod > 0 ? (float)(bi[b].lines / prod) : 0.0f;
    v[G6 + 12 + b] = b < nb && bi[b].ubytes > 0 ? (float)slog(bi[b].bytes / bi[b].ubytes) : 0.0f;
    row->lines[b] = b < nb ? bi[b].lines : 0;
  }
  row->flops = fl;
  row->prod = prod;
}

static void store_features(walker *w, const ir_stmt *st, row_ent *row) {
  float *v = row->v;
  double f[CM_NUM_FEATURES];
  memset(f, 0, sizeof f);
  int n = w->nloops;
  double prod = 1;
  for (int i = 0; i < n; i++) prod *= w->loops[i].ext;
  group1_features(w, st, prod, f, v);

  /* group 2 */
  acc_set *as = store_accesses(st);
  if (!as) {
    w->oom = true;
    return;
  }
  int nb = as->n;
  bufinfo *bi = ts_calloc((size_t)(nb ? nb : 1), sizeof *bi);
  double *numel0 = ts_calloc((size_t)(nb ? nb : 1), sizeof *numel0);
  double *touched = ts_calloc((size_t)(n + 1), sizeof *touched);
  if (!bi || !numel0 || !touched) {
    ts_free(bi);
    ts_free(numel0);
    ts_free(touched);
    ts_free(as);
    w->oom = true;
    return;
  }
  store_regions(w, as, numel0, touched);
  for (int b = 0; b < nb; b++) buffer_features(w, as, b, prod, numel0, &bi[b]);
  qsort(bi, (size_t)nb, sizeof *bi, cmp_buf);
  for (int b = 0; b < NBUF; b++)
    for (int k = 0; k < BUFF; k++) v[G2 + b * BUFF + k] = b < nb ? bi[b].f[k] : 0.0f;

  intensity_features(w, f, prod, touched, v);
  alloc_features(w, st, prod, v);
  transfer_features(w, st, f, prod, bi, nb, row);

  for (int i = 0; i < CM_NUM_FEATURES; i++)
    if (!isfinite(v[i])) v[i] = 0;
  ts_free(bi);
  ts_free(numel0);
  ts_free(touched);
  ts_free(as);
}

static bool is_literal(const ir_expr *e) {
  if (!e) return true;
  if (e->kind == IR_BROADCAST) return is_literal(e->u.bcast.value);
  return e->kind == IR_INT_IMM || e->kind == IR_FLOAT_IMM;
}

static int expr_lanes(const ir_expr *e) { return e && e->dtype.lanes > 1 ? e->dtype.lanes : 1; }

static void push_loop(walker *w, loop_ent le) {
  GROW(w, w->loops, w->nloops, w->caploops);
  if (w->oom) return;
  w->loops[w->nloops++] = le;
}

static void walk(walker *w, const ir_stmt *s);

/* Loops and lets walk their own bodies (their entries are scoped); stores
 * are the feature rows; the visitor walks the rest. */
static bool walk_cb(void *ctx, const ir_stmt *s) {
  walker *w = ctx;
  if (w->oom) return false;
  switch (s->kind) {
  case IR_FOR: {
    int64_t mn = 0, ex = 1;
    if (!ir_as_int(s->u.loop.min, &mn)) mn = 0;
    if (!ir_as_int(s->u.loop.extent, &ex)) ex = 1;
    if (ex <= 0) return false; /* zero-extent loop: dropped */
    loop_ent le = {s, s->u.loop.var, (double)mn, (double)ex, s->u.loop.kind, s->u.loop.thread, -1};
    const ir_annot *an = ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step");
    if (an && an->kind == IR_ANN_INT) le.unroll_step = an->v.i;
    push_loop(w, le);
    walk(w, s->u.loop.body);
    w->nloops--;
    return false;
  }
  case IR_LET:
    GROW(w, w->lets, w->nlets, w->caplets);
    if (w->oom) return false;
    w->lets[w->nlets++] = (let_ent){s->u.let.var, s->u.let.value};
    walk(w, s->u.let.body);
    w->nlets--;
    return false;
  case IR_ALLOCATE: {
    double op = 1;
    for (int i = 0; i < w->nloops; i++) op *= w->loops[i].ext;
    GROW(w, w->allocs, w->nalloc, w->capalloc);
    if (w->oom) return false;
    w->allocs[w->nalloc++] = (alloc_ent){s->u.alloc.buf, op};
    return true; /* stays for the rest of the walk */
  }
  case IR_STORE: {
    if (is_literal(s->u.store.value)) return false;
    int lanes = expr_lanes(s->u.store.value);
    for (int i = 0; i < s->u.store.nidx; i++)
      if (expr_lanes(s->u.store.idx[i]) > lanes) lanes = expr_lanes(s->u.store.idx[i]);
    bool pushed = false;
    if (lanes > 1) {
      push_loop(w, (loop_ent){s, NULL, 0, (double)lanes, IR_FOR_VECTORIZED, NULL, -1});
      if (w->oom) return false;
      pushed = true;
    }
    int r = -1;
    for (int i = 0; i < w->nrows; i++)
      if (w->rows[i].buf == s->u.store.buf) r = i;
    if (r < 0) {
      GROW(w, w->rows, w->nrows, w->caprows);
      if (!w->oom) {
        r = w->nrows++;
        w->rows[r].buf = s->u.store.buf;
      }
    }
    if (r >= 0) store_features(w, s, &w->rows[r]);
    if (pushed) w->nloops--;
    return false;
  }
  default: /* sequences, ifs, blocks */
    return true;
  }
}

static void walk(walker *w, const ir_stmt *s) {
  ir_visitor v = {.stmt = walk_cb, .ctx = w};
  ir_visit_stmt(&v, s);
}

void cm_features_fini(cm_features *f) {
  if (!f) return;
  ts_free(f->rows);
  f->rows = NULL;
  f->nrows = 0;
}

/* The candidate-level part of group 6, once every row is known. */
static void candidate_features(walker *w) {
  double fl = 0, pmax = 0, lines = 0;
  for (int i = 0; i < w->nrows; i++) {
    fl += w->rows[i].flops;
    if (w->rows[i].prod > pmax) pmax = w->rows[i].prod;
    for (int b = 0; b < NB6; b++) lines += w->rows[i].lines[b];
  }
  for (int i = 0; i < w->nrows; i++) {
    float *v = w->rows[i].v;
    v[G6 + 0] = fl > 0 ? (float)(w->rows[i].flops / fl) : 0.0f;
    v[G6 + 1] = pmax > 0 ? (float)(w->rows[i].prod / pmax) : 0.0f;
    v[G6 + 2] = (float)slog(fl);
    v[G6 + 3] = (float)w->nrows;
    for (int b = 0; b < NB6; b++) v[G6 + 15 + b] = lines > 0 ? (float)(w->rows[i].lines[b] / lines) : 0.0f;
  }
}

ts_status cm_extract_lowered(const ir_func *lowered, const cg_target *t, cm_features *out,
                             ts_diag *d) {
  out->nrows = 0;
  out->rows = NULL;
  walker w;
  memset(&w, 0, sizeof w);
  w.t = t;
  w.bump = -1;
  walk(&w, lowered->body);
  if (!w.oom) candidate_features(&w);
  ts_status st = TS_OK;
  if (w.oom) st = ts_diag_set(d, TS_ENOMEM, "cm_extract: out of memory");
  else if (w.nrows > 0) {
    out->rows = ts_malloc((size_t)w.nrows * CM_NUM_FEATURES * sizeof(float));
    if (!out->rows) st = ts_diag_set(d, TS_ENOMEM, "cm_extract: out of memory");
    else {
      for (int i = 0; i < w.nrows; i++)
        memcpy(out->rows + (size_t)i * CM_NUM_FEATURES, w.rows[i].v, sizeof w.rows[i].v);
      out->nrows = w.nrows;
    }
  }
  ts_free(w.loops);
  ts_free(w.lets);
  ts_free(w.T);
  ts_free(w.allocs);
  ts_free(w.rows);
  return st;
}

ts_status cm_extract(const ir_func *scheduled, const cg_target *t, cm_features *out, ts_diag *d) {
  out->nrows = 0;
  out->rows = NULL;
  ts_arena *a = ts_arena_new();
  if (!a) return ts_diag_set(d, TS_ENOMEM, "cm_extract: out of memory");
  cg_lowered low;
  ts_diag ld;
  ts_diag_clear(&ld);
  ts_status st = cg_lower_unpartitioned(a, scheduled, t, &low, &ld);
  if (st != TS_OK) {
    ts_diag_set(d, TS_EUNSUPPORTED, "cm_extract: cannot lower: %s", ld.msg);
    ts_arena_free(a);
    return TS_EUNSUPPORTED;
  }
  st = cm_extract_lowered(low.func, t, out, d);
  ts_arena_free(a);
  return st;
}
