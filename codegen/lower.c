/* codegen/lower.c — lowering a scheduled PrimFunc into the lowered form of
 * codegen.h (blocks gone, buffers flat, allocations explicit, vectorized
 * loops in lanes) in one recursive walk, and cg_check, the validity test the
 * search runs before it spends a build on a candidate. docs/TUNING.md
 * ("Notes by file: codegen/"). */
#include "codegen/lower_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/print.h"
#include "codegen/gpu_check.h"

/* ---- context ----------------------------------------------------------- */

struct cplan;

typedef struct bufinfo {
  const ir_buffer *orig;
  ir_buffer *flat;
  ir_expr **strides; /* orig->ndim strides in elements (i64) */
  ir_expr *offset;   /* element offset (i64) or NULL */
  struct cplan *plan; /* block-allocated buffer whose accesses are recorded/compacted */
  ir_expr **mins;     /* compacted: per dim region min subtracted from indices (NULL entry: 0) */
} bufinfo;

/* A non-folded loop enclosing the current point (original loop statement,
 * lowered bounds). */
typedef struct pathent {
  const ir_stmt *loop;
  ir_var *var;
  ir_expr *min, *ext;
  ir_for_kind kind;
  const char *thread;
} pathent;

/* One access site of a block-allocated buffer seen by the recording run:
 * its lowered n-d indices and the loops around it. */
typedef struct access_rec {
  ir_expr **idx;
  pathent *path;
  int depth;
} access_rec;

/* Allocation plan of a block-allocated buffer (TVM's
 * PlanAndUpdateBufferAllocationLocation + CompactBufferAllocation). */
typedef struct cplan {
  const ir_buffer *buf;
  int depth0; /* enclosing non-folded loops at the allocating block */
  bool bad;   /* not compactable (seen twice, explicit strides, ...) */
  access_rec *acc;
  int nacc, capacc;
  /* decision */
  bool apply;
  const ir_stmt *at; /* original loop whose body holds the allocate; NULL: the block */
  ir_expr **shape;   /* compact shape (constants) */
  ir_expr **min;     /* per dim region min in the index dtype; NULL entry: 0 */
} cplan;

enum { MODE_PLAIN, MODE_RECORD, MODE_APPLY };

typedef struct binding {
  const ir_var *var;
  ir_expr *val;
} binding;

typedef struct lctx {
  ts_arena *a;
  ts_diag *d;
  ts_status st; /* first error; every step returns NULL once set */
  ir_analyzer an;
  binding *binds;
  int nbind, capbind;
  bufinfo **bufs;
  int nbuf, capbuf;
  const char *block; /* innermost block being lowered, for messages */
  const ir_block *blk; /* that block (its read/write regions place access_ptr tiles) */
  bool debug;        /* TESSEL_DEBUG contains "lower" */
  int mode;          /* MODE_*: the recording run only collects accesses */
  pathent *path;
  int npath, cappath;
  cplan **plans;
  int nplan, capplan;
} lctx;

static void *oom_check(lctx *c, void *p) {
  if (!p && !c->st) c->st = ts_diag_set(c->d, TS_ENOMEM, "lower: out of memory");
  return p;
}
#define NN(c, p) oom_check((c), (p))

static void *fail(lctx *c, ts_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *fail(lctx *c, ts_status code, const char *fmt, ...) {
  if (!c->st) {
    va_list ap;
    va_start(ap, fmt);
    ts_diag_vset(c->d, code, fmt, ap);
    va_end(ap);
    c->st = code;
  }
  return NULL;
}


static bufinfo *find_buf(lctx *c, const ir_buffer *b) {
  for (int i = c->nbuf - 1; i >= 0; i--)
    if (c->bufs[i]->orig == b) return c->bufs[i];
  return NULL;
}

static ir_expr *lookup(lctx *c, const ir_var *v) {
  for (int i = c->nbind - 1; i >= 0; i--)
    if (c->binds[i].var == v) return c->binds[i].val;
  return NULL;
}

static ir_expr *simp(lctx *c, ir_expr *e) {
  if (!e) return NULL;
  return NN(c, ir_simplify(&c->an, e));
}

static bool is_true(const ir_expr *e) {
  int64_t v;
  return ir_as_int(e, &v) && v != 0;
}

static bool is_false(const ir_expr *e) {
  int64_t v;
  return ir_as_int(e, &v) && v == 0;
}

ir_expr *cg_as_i64(ts_arena *a, ir_expr *e) {
  if (!e) return NULL;
  if (e->dtype.code == IR_I64) return e;
  if (e->kind == IR_INT_IMM && e->dtype.lanes == 1) return ir_i64(a, e->u.ival);
  return ir_cast(a, ir_dt_vec(IR_I64, e->dtype.lanes), e);
}

/* ---- allocation plans ------------------------------------------------- */

static cplan *find_plan(lctx *c, const ir_buffer *b) {
  for (int i = 0; i < c->nplan; i++)
    if (c->plans[i]->buf == b) return c->plans[i];
  return NULL;
}

/* Recording run: one plan per block-allocated buffer (a buffer allocated
 * twice, or with explicit strides or an element offset, is not compacted). */
static cplan *new_plan(lctx *c, const ir_buffer *b) {
  cplan *p = find_plan(c, b);
  if (p) {
    p->bad = true;
    return p;
  }
  if (!(p = NN(c, TS_ANEW(c->a, cplan)))) return NULL;
  memset(p, 0, sizeof *p);
  p->buf = b;
  p->depth0 = c->npath;
  p->bad = b->strides != NULL || b->elem_offset != NULL || b->ndim == 0;
  if (!ts_grow((void **)&c->plans, &c->capplan, c->nplan + 1, sizeof *c->plans)) return NN(c, NULL);
  c->plans[c->nplan++] = p;
  return p;
}

static bool record_access(lctx *c, cplan *p, ir_expr **idx) {
  if (!ts_grow((void **)&p->acc, &p->capacc, p->nacc + 1, sizeof *p->acc)) {
    NN(c, NULL);
    return false;
  }
  access_rec *r = &p->acc[p->nacc];
  r->idx = idx;
  r->depth = c->npath;
  r->path = c->npath ? NN(c, ts_arena_memdup(c->a, c->path, sizeof *c->path * (size_t)c->npath)) : NULL;
  if (c->npath && !r->path) return false;
  p->nacc++;
  return true;
}

static void free_plans(lctx *c) {
  for (int i = 0; i < c->nplan; i++) ts_free(c->plans[i]->acc);
  ts_free(c->plans);
  c->plans = NULL;
  c->nplan = c->capplan = 0;
}

/* ---- expressions ------------------------------------------------------- */

static ir_expr *lower_expr(lctx *c, ir_expr *e);

/* The flat index of an access buf[idx...] (original buffer, original
 * indices). */
static ir_expr *flatten(lctx *c, const ir_buffer *buf, int nidx, ir_expr *const *idx, bufinfo **bi_out) {
  if (c->st) return NULL;
  bufinfo *bi = find_buf(c, buf);
  if (!bi)
    return fail(c, TS_EUNSUPPORTED,
                "lower: buffer %s is used in block %s outside its allocation (neither a param nor "
                "allocated by an enclosing block)",
                buf->name, c->block ? c->block : "?");
  if (nidx != buf->ndim)
    return fail(c, TS_EINVAL, "lower: access to %s in block %s has %d indices, but it has %d dimensions",
                buf->name, c->block ? c->block : "?", nidx, buf->ndim);
  ir_expr *sum = bi->offset ? bi->offset : NN(c, ir_i64(c->a, 0));
  /* Vector indices (tensor-intrinsic bodies, docs/TENSORIZE.md) are ramps or
   * broadcasts; the flat index is then ramp(sum of bases, sum of steps). */
  ir_expr *step = NULL;
  int vlanes = 1;
  ir_expr **rec = NULL;
  if (c->mode == MODE_RECORD && bi->plan && !bi->plan->bad && nidx)
    if (!(rec = NN(c, TS_ANEWN(c->a, ir_expr *, nidx)))) return NULL;
  for (int i = 0; i < nidx && sum; i++) {
    ir_expr *x = lower_expr(c, idx[i]);
    if (!x) return NULL;
    if (x->dtype.lanes > 1) {
      if (rec) { /* compaction records scalar indices only: keep the declared layout */
        bi->plan->bad = true;
        rec = NULL;
      }
      if ((vlanes > 1 && vlanes != x->dtype.lanes) ||
          (x->kind != IR_RAMP && x->kind != IR_BROADCAST))
        return fail(c, TS_EUNSUPPORTED,
                    "lower: vector index %d of %s in block %s is neither a ramp nor a broadcast", i,
                    buf->name, c->block ? c->block : "?");
      vlanes = x->dtype.lanes;
      if (x->kind == IR_RAMP) {
        ir_expr *st = NN(c, cg_as_i64(c->a, x->u.ramp.stride));
        ir_expr *term = st ? NN(c, ir_mul(c->a, st, bi->strides[i])) : NULL;
        step = !term ? NULL : step ? NN(c, ir_add(c->a, step, term)) : term;
        if (!step) return NULL;
        x = x->u.ramp.base;
      } else {
        x = x->u.bcast.value;
      }
    }
    if (rec) rec[i] = x;
    if (bi->mins && bi->mins[i]) {
      /* Compacted buffer: the index relative to its region's min, in the
       * index's own dtype so that the common terms cancel. */
      ir_expr *m = bi->mins[i];
      if (m->dtype.code != x->dtype.code) m = NN(c, ir_cast(c->a, x->dtype, m));
      x = simp(c, m ? NN(c, ir_sub(c->a, x, m)) : NULL);
      if (!x) return NULL;
    }
    x = NN(c, cg_as_i64(c->a, x));
    if (!x) return NULL;
    sum = NN(c, ir_add(c->a, sum, NN(c, ir_mul(c->a, x, bi->strides[i]))));
  }
  if (rec && sum && !record_access(c, bi->plan, rec)) return NULL;
  *bi_out = bi;
  if (vlanes > 1 && sum)
    return NN(c, ir_ramp(c->a, simp(c, sum), step ? simp(c, step) : NN(c, ir_i64(c->a, 0)), vlanes));
  return simp(c, sum);
}

/* ---- pointers into buffers (tensor intrinsics, docs/TENSORIZE.md) ------- */

/* The region of buffer b that the block being lowered declares (a write
 * region first when rw asks for writing), or NULL. */
static const ir_region *block_region(const lctx *c, const ir_buffer *b, int rw) {
  const ir_block *k = c->blk;
  if (!k) return NULL;
  if (rw & IR_ACCESS_WRITE)
    for (int i = 0; i < k->nwrites; i++)
      if (k->writes[i].buf == b && k->writes[i].ndim == b->ndim) return &k->writes[i];
  for (int i = 0; i < k->nreads; i++)
    if (k->reads[i].buf == b && k->reads[i].ndim == b->ndim) return &k->reads[i];
  for (int i = 0; i < k->nwrites; i++)
    if (k->writes[i].buf == b && k->writes[i].ndim == b->ndim) return &k->writes[i];
  return NULL;
}

static bool is_fragment(const ir_buffer *b) { return b->scope && !strncmp(b->scope, "wmma.", 5); }

/* access_ptr(buf, offset, rw): the address of element `offset` of buf,
 * counted in buf's declared layout (its strides, else compact row-major).
 *  - Inside a block that declares a region of buf (a tensorized block: the
 *    tile its intrinsic reads or writes), the pointer is the region's
 *    origin: the recording run counts the region (first and last element)
 *    as accessed, so compaction keeps the whole tile, and the address is
 *    recomputed from the origin in the layout lowering gives the buffer
 *    (compacted or padded). The offset must be the origin's (checked).
 *    A wmma.* fragment buffer is laid out one 16x16 tile after another
 *    (row-major over tiles of its last two dimensions, leading dimensions
 *    outermost; the CUDA back end indexes fragment offset/256), so its
 *    origin must be a multiple of 16 in both of the last two dimensions.
 *  - Elsewhere the buffer keeps its declared layout: a buffer that lowering
 *    would compact is left as declared (its plan dropped); one that is padded
 *    or already compacted is refused. */
static ir_expr *lower_access_ptr(lctx *c, ir_expr *e) {
  const ir_buffer *b = e->u.ptr.buf;
  bufinfo *bi = b ? find_buf(c, b) : NULL;
  if (!bi)
    return fail(c, TS_EUNSUPPORTED, "lower: access_ptr of buffer %s in block %s outside its allocation",
                b ? b->name : "?", c->block ? c->block : "?");
  const ir_region *rg = block_region(c, b, e->u.ptr.rw);
  ir_expr *off = NN(c, cg_as_i64(c->a, lower_expr(c, e->u.ptr.offset)));
  if (!off) return NULL;
  if (!rg) {
    if (c->mode == MODE_RECORD && bi->plan) bi->plan->bad = true; /* keep the declared layout */
    bool relaid = (bi->plan && bi->plan->apply) || (!b->strides && b->align_factor);
    for (int i = 0; bi->mins && i < b->ndim; i++) relaid |= bi->mins[i] != NULL;
    if (relaid)
      return fail(c, TS_EUNSUPPORTED,
                  "lower: access_ptr of %s in block %s: the buffer is compacted or padded by lowering and the "
                  "block declares no region of it to place the pointer by",
                  b->name, c->block ? c->block : "?");
    if (bi->offset) off = NN(c, ir_add(c->a, bi->offset, off));
    return NN(c, ir_access_ptr(c->a, bi->flat, simp(c, off), e->u.ptr.rw));
  }
  int n = b->ndim;
  ir_expr **lo = NN(c, TS_ANEWN(c->a, ir_expr *, n ? n : 1)), **hi = NN(c, TS_ANEWN(c->a, ir_expr *, n ? n : 1));
  if (!lo || !hi) return NULL;
  /* the origin in the declared layout (row-major over the declared shape, or
   * the given strides) must be the pointer's offset */
  ir_expr *decl = NN(c, ir_i64(c->a, 0)), *stride = NN(c, ir_i64(c->a, 1));
  for (int d = n - 1; d >= 0 && decl && stride; d--) {
    lo[d] = simp(c, NN(c, cg_as_i64(c->a, lower_expr(c, rg->ranges[d].min))));
    ir_expr *ext = NN(c, cg_as_i64(c->a, lower_expr(c, rg->ranges[d].extent)));
    if (!lo[d] || !ext) return NULL;
    hi[d] = simp(c, NN(c, ir_sub(c->a, ir_add(c->a, lo[d], ext), ir_i64(c->a, 1))));
    ir_expr *st = b->strides ? NN(c, cg_as_i64(c->a, lower_expr(c, b->strides[d]))) : stride;
    decl = st ? NN(c, ir_add(c->a, decl, NN(c, ir_mul(c->a, lo[d], st)))) : NULL;
    if (!b->strides) stride = NN(c, ir_mul(c->a, stride, NN(c, cg_as_i64(c->a, lower_expr(c, b->shape[d])))));
  }
  if (!decl || !stride) return NULL;
  ir_expr *delta = simp(c, NN(c, ir_sub(c->a, off, decl)));
  int64_t dz = -1;
  if (!delta || !ir_as_int(delta, &dz) || dz != 0) {
    char *ds = delta ? ir_expr_to_string(delta) : NULL;
    fail(c, TS_EUNSUPPORTED,
         "lower: access_ptr of %s in block %s points %s elements past the origin of the block's region of it; "
         "only a pointer to the region's origin can be placed in a compacted layout",
         b->name, c->block ? c->block : "?", ds ? ds : "?");
    ts_free(ds);
    return NULL;
  }
  if (c->mode == MODE_RECORD) {
    /* (the recording run's result stands when no plan applies: go on) */
    if (bi->plan && !bi->plan->bad && n && !(record_access(c, bi->plan, lo) && record_access(c, bi->plan, hi)))
      return NULL;
  }
  /* the origin relative to the buffer's region (compacted) */
  for (int d = 0; d < n; d++)
    if (bi->mins && bi->mins[d]) {
      lo[d] = simp(c, NN(c, ir_sub(c->a, lo[d], NN(c, cg_as_i64(c->a, bi->mins[d])))));
      if (!lo[d]) return NULL;
    }
  ir_expr *addr = NULL;
  if (is_fragment(b)) {
    if (n < 2)
      return fail(c, TS_EUNSUPPORTED, "lower: fragment buffer %s (%s) in block %s has %d dimensions, not 2 or more",
                  b->name, b->scope, c->block ? c->block : "?", n);
    /* tile-major over the last two dimensions: fragment (row / 16) * (cols /
     * 16) + col / 16, 256 elements each; leading (batch) dimensions step by
     * whole row x col slices (their strides, multiples of 256) */
    ir_expr *sixteen = NN(c, ir_i64(c->a, 16));
    ir_expr *cols = bi->strides[n - 2];
    ir_expr *lead = NN(c, ir_i64(c->a, 0));
    for (int d = 0; d < n - 2 && lead; d++) lead = NN(c, ir_add(c->a, lead, NN(c, ir_mul(c->a, lo[d], bi->strides[d]))));
    if (!lead) return NULL;
    lo += n - 2;
    for (int d = 0; d < 2; d++) {
      ir_expr *m = simp(c, NN(c, ir_floormod(c->a, lo[d], sixteen)));
      int64_t z = -1;
      if (!m || !ir_as_int(m, &z) || z != 0)
        return fail(c, TS_EUNSUPPORTED,
                    "lower: fragment %s in block %s is addressed at a dimension-%d origin that is not a provable "
                    "multiple of 16",
                    b->name, c->block ? c->block : "?", d);
    }
    ir_expr *tr = NN(c, ir_floordiv(c->a, lo[0], sixteen)), *tc = NN(c, ir_floordiv(c->a, lo[1], sixteen));
    ir_expr *tcols = NN(c, ir_floordiv(c->a, cols, sixteen));
    addr = tr && tc && tcols ? NN(c, ir_mul(c->a, NN(c, ir_add(c->a, NN(c, ir_mul(c->a, tr, tcols)), tc)),
                                            NN(c, ir_i64(c->a, 256))))
                             : NULL;
    if (addr) addr = NN(c, ir_add(c->a, lead, addr));
  } else {
    addr = NN(c, ir_i64(c->a, 0));
    for (int d = 0; d < n && addr; d++) addr = NN(c, ir_add(c->a, addr, NN(c, ir_mul(c->a, lo[d], bi->strides[d]))));
  }
  if (addr && bi->offset) addr = NN(c, ir_add(c->a, bi->offset, addr));
  if (!addr) return NULL;
  return NN(c, ir_access_ptr(c->a, bi->flat, simp(c, addr), e->u.ptr.rw));
}

/* call_extern("tessel.buffer_stride", t, access_ptr(buf, ...), d): the stride
 * (in elements) of dimension d of buf (d < 0 counts from the last: -2 is the
 * rows of the last two) as lowering lays it out, compaction and storage_align
 * padding included (a WMMA load/store's leading dimension). */
static ir_expr *lower_buffer_stride(lctx *c, ir_expr *e) {
  const ir_expr *p = e->u.ext.nargs == 2 ? e->u.ext.args[0] : NULL;
  int64_t d = -1;
  if (!p || p->kind != IR_ACCESS_PTR || !ir_as_int(e->u.ext.args[1], &d))
    return fail(c, TS_EINVAL,
                "lower: tessel.buffer_stride in block %s wants (access_ptr(buf, ...), constant dimension)",
                c->block ? c->block : "?");
  bufinfo *bi = find_buf(c, p->u.ptr.buf);
  if (d < 0) d += p->u.ptr.buf->ndim; /* counted from the last dimension */
  if (!bi || d < 0 || d >= p->u.ptr.buf->ndim)
    return fail(c, TS_EINVAL, "lower: tessel.buffer_stride of %s dimension %lld in block %s: %s",
                p->u.ptr.buf->name, (long long)d, c->block ? c->block : "?",
                bi ? "no such dimension" : "the buffer is not allocated here");
  ir_expr *s = bi->strides[d];
  if (s->dtype.code != e->dtype.code) s = NN(c, ir_cast(c->a, e->dtype, s));
  return s ? simp(c, s) : NULL;
}

/* The lowering-specific expressions, as a pre hook of the shared mutator
 * (every other kind is rebuilt by its default walk): vars bound to their
 * loop expressions, loads flattened, decided selects folded, buffer_stride
 * and access_ptr resolved. */
static ir_expr *lower_expr_pre(ir_mutator *m, ir_expr *e) {
  lctx *c = m->ctx;
  ir_expr *n = NULL;
  switch (e->kind) {
  case IR_VAR:
    return lookup(c, e->u.var);
  case IR_LOAD: {
    bufinfo *bi = NULL;
    ir_expr *idx = flatten(c, e->u.load.buf, e->u.load.nidx, e->u.load.idx, &bi);
    n = idx ? NN(c, ir_load(c->a, bi->flat, 1, &idx)) : NULL;
    if (n) n->dtype = e->dtype;
    break;
  }
  case IR_SELECT: {
    ir_expr *cond = simp(c, lower_expr(c, e->u.sel.cond));
    if (!cond) break;
    /* Decided conditions pick their side (padding checks on interior
     * tiles vanish this way). */
    if (is_true(cond) && cond->dtype.lanes == 1) return lower_expr(c, e->u.sel.t);
    if (is_false(cond) && cond->dtype.lanes == 1) return lower_expr(c, e->u.sel.f);
    ir_expr *t = lower_expr(c, e->u.sel.t), *f = lower_expr(c, e->u.sel.f);
    if (!t || !f) break;
    if (cond == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
    if ((n = NN(c, ir_expr_clone(c->a, e)))) {
      n->u.sel.cond = cond;
      n->u.sel.t = t;
      n->u.sel.f = f;
    }
    break;
  }
  case IR_CALL_EXTERN:
    if (!e->u.ext.name || strcmp(e->u.ext.name, "tessel.buffer_stride")) return NULL;
    n = lower_buffer_stride(c, e);
    break;
  case IR_ACCESS_PTR:
    n = lower_access_ptr(c, e);
    break;
  default:
    if (e->kind < IR_EXPR_KIND_COUNT) return NULL;
    n = fail(c, TS_EINVAL, "lower: unknown expression kind %d in block %s", (int)e->kind,
             c->block ? c->block : "?");
    break;
  }
  if (!n) ir_mutator_fail(m);
  return n;
}

static ir_expr *lower_expr(lctx *c, ir_expr *e) {
  if (c->st) return NULL;
  if (!e) return fail(c, TS_EINVAL, "lower: missing expression in block %s", c->block ? c->block : "?");
  static const ir_mutator_hooks h = {.pre_expr = lower_expr_pre};
  bool failed = false;
  ir_expr *n = ir_rewrite_expr(c->a, &h, c, e, &failed);
  if (failed) NN(c, NULL);
  return c->st ? NULL : n;
}

/* ---- buffers ------------------------------------------------------------ */

/* Registers the flat stand-in of b: strides (given, or compact row-major
 * with storage_align padding when `allocated`), element count incl.
 * padding, same dtype, scope and alignment. */
static bufinfo *add_buffer(lctx *c, const ir_buffer *b, bool allocated, ir_expr *const *shape) {
  if (c->st) return NULL;
  if (find_buf(c, b))
    return fail(c, TS_EINVAL, "lower: buffer %s is allocated twice (block %s)", b->name,
                c->block ? c->block : "?");
  int n = b->ndim;
  bufinfo *bi = NN(c, TS_ANEW(c->a, bufinfo));
  ir_expr **st = n ? NN(c, TS_ANEWN(c->a, ir_expr *, n)) : NULL;
  if (!bi || (n && !st)) return NULL;
  memset(bi, 0, sizeof *bi);
  ir_expr *const *shp = shape ? shape : b->shape; /* compacted or declared */
  ir_expr *size = NULL;
  if (b->strides) {
    /* Enough for the farthest element (1 + sum (shape_i - 1) * stride_i) and
     * for TVM's allocation convention (stride_i * shape_i, which includes the
     * padding of a padded row-major layout). */
    ir_expr *last = NN(c, ir_i64(c->a, 1)), *span = NN(c, ir_i64(c->a, 1));
    for (int i = 0; i < n && last && span; i++) {
      if (!(st[i] = NN(c, cg_as_i64(c->a, lower_expr(c, b->strides[i]))))) return NULL;
      ir_expr *ext = NN(c, cg_as_i64(c->a, lower_expr(c, b->shape[i])));
      if (!ext) return NULL;
      ir_expr *m1 = NN(c, ir_sub(c->a, ext, NN(c, ir_i64(c->a, 1))));
      last = NN(c, ir_add(c->a, last, NN(c, ir_mul(c->a, m1, st[i]))));
      span = NN(c, ir_max(c->a, span, NN(c, ir_mul(c->a, ext, st[i]))));
    }
    size = last && span ? NN(c, ir_max(c->a, last, span)) : NULL;
  } else {
    ir_expr *stride = NN(c, ir_i64(c->a, 1));
    for (int i = n - 1; i >= 0 && stride; i--) {
      if (allocated && b->align_factor && b->align_factor[i] > 0) {
        /* TVM's rule: pad the stride of this axis up to offset mod factor. */
        ir_expr *f = NN(c, ir_i64(c->a, b->align_factor[i]));
        ir_expr *fo = NN(c, ir_i64(c->a, b->align_factor[i] + (b->align_offset ? b->align_offset[i] : 0)));
        ir_expr *pad = NN(c, ir_floormod(c->a, NN(c, ir_sub(c->a, fo, NN(c, ir_floormod(c->a, stride, f)))), f));
        stride = simp(c, NN(c, ir_add(c->a, stride, pad)));
        if (!stride) return NULL;
      }
      st[i] = stride;
      ir_expr *ext = NN(c, cg_as_i64(c->a, lower_expr(c, shp[i])));
      stride = ext ? NN(c, ir_mul(c->a, stride, ext)) : NULL;
    }
    size = stride;
  }
  if (!size) return NULL;
  if (b->elem_offset) {
    if (!(bi->offset = NN(c, cg_as_i64(c->a, lower_expr(c, b->elem_offset))))) return NULL;
    size = NN(c, ir_add(c->a, size, bi->offset));
  }
  size = simp(c, size);
  if (!size) return NULL;
  ir_buffer *flat = NN(c, ir_buffer_new(c->a, b->name, b->dtype, 1, &size, b->scope));
  if (!flat) return NULL;
  flat->align = b->align;
  bi->orig = b;
  bi->flat = flat;
  bi->strides = st;
  if (!ts_grow((void **)&c->bufs, &c->capbuf, c->nbuf + 1, sizeof *c->bufs)) return NN(c, NULL);
  c->bufs[c->nbuf++] = bi;
  return bi;
}

/* ---- statements --------------------------------------------------------- */

static ir_stmt *lower_stmt(lctx *c, ir_stmt *s);

static ir_stmt *empty_stmt(lctx *c) { return NN(c, ir_seq(c->a, 0, NULL)); }

static ir_stmt *seq2(lctx *c, ir_stmt *x, ir_stmt *y) {
  if (!x || !y) return NULL;
  ir_stmt *v[2] = {x, y};
  return NN(c, ir_seq(c->a, 2, v));
}

static ir_stmt *lower_loop(lctx *c, ir_stmt *s) {
  ir_expr *mn = simp(c, lower_expr(c, s->u.loop.min));
  ir_expr *ext = simp(c, lower_expr(c, s->u.loop.extent));
  if (!mn || !ext || !s->u.loop.var || !s->u.loop.body)
    return c->st ? NULL : fail(c, TS_EINVAL, "lower: loop with a missing part");
  int64_t one;
  if (s->u.loop.kind == IR_FOR_SERIAL && !s->u.loop.nannot && ir_as_int(ext, &one) && one == 1) {
    /* A plain loop of one iteration (split/compute_at leave many): its var
     * is its min, so indices fold without it. */
    ir_var *v = s->u.loop.var;
    ir_expr *val = mn->dtype.code == v->dtype.code ? mn : NN(c, ir_cast(c->a, v->dtype, mn));
    if (!val || !ts_grow((void **)&c->binds, &c->capbind, c->nbind + 1, sizeof *c->binds)) return NN(c, NULL);
    int mark = c->nbind;
    c->binds[c->nbind++] = (binding){v, val};
    ir_stmt *body = lower_stmt(c, s->u.loop.body);
    c->nbind = mark;
    return body;
  }
  int mark = c->an.n;
  if (ir_analyzer_bind(&c->an, s->u.loop.var, mn, ext)) return NN(c, NULL);
  if (!ts_grow((void **)&c->path, &c->cappath, c->npath + 1, sizeof *c->path)) return NN(c, NULL);
  c->path[c->npath++] = (pathent){s, s->u.loop.var, mn, ext, s->u.loop.kind, s->u.loop.thread};
  ir_stmt *body = lower_stmt(c, s->u.loop.body);
  c->npath--;
  /* Buffers whose accesses all lie in this loop's body are allocated there
   * (per iteration, so per task for a parallel loop). */
  for (int i = 0; i < c->nplan && body && c->mode == MODE_APPLY; i++) {
    const cplan *p = c->plans[i];
    if (!p->apply || p->at != s) continue;
    bufinfo *bi = find_buf(c, p->buf);
    if (!bi) return fail(c, TS_EINVAL, "lower: buffer %s is not in scope at its planned allocation", p->buf->name);
    body = NN(c, ir_allocate(c->a, bi->flat, body));
  }
  ir_annot *anns = s->u.loop.annots;
  for (int i = 0; i < s->u.loop.nannot && body; i++) {
    if (anns[i].kind != IR_ANN_EXPR) continue;
    ir_expr *v = lower_expr(c, anns[i].v.e);
    if (!v) return NULL;
    if (v == anns[i].v.e) continue;
    if (anns == s->u.loop.annots) {
      if (!(anns = NN(c, ts_arena_memdup(c->a, anns, sizeof *anns * (size_t)s->u.loop.nannot)))) return NULL;
    }
    anns[i].v.e = v;
  }
  ir_stmt *ns = body ? NN(c, ir_stmt_clone(c->a, s)) : NULL;
  if (!ns) return NULL;
  ns->u.loop.min = mn;
  ns->u.loop.extent = ext;
  ns->u.loop.body = body;
  ns->u.loop.annots = anns;
  if (ns->u.loop.kind == IR_FOR_VECTORIZED) {
    ir_stmt *out = ns;
    const char *why = NULL;
    if (cg_vectorize_loop(c->a, &c->an, ns, &out, &why)) return NN(c, NULL);
    if (out == ns && c->debug && c->mode != MODE_RECORD)
      fprintf(stderr, "[lower] vectorized loop %s stays a loop: %s\n", s->u.loop.var->name,
              why ? why : "?");
    ns = out;
  }
  ir_analyzer_truncate(&c->an, mark);
  return ns;
}

/* ---- guarded stores into compacted local tiles ---------------------------
 * A non-divisible split leaves a block predicate (`j0 * 16 + j1 < 333`); as
 * an `if` around the body it keeps the loop under it from vectorizing, and
 * masking every access would keep a local accumulator tile out of registers.
 * When the block's only statement stores into a block-allocated temporary
 * (scope global or local) that lowering compacted to its tile, and every instance the predicate
 * excludes stores outside the buffer's declared extent (each predicate term
 * is `v < K` for a plain iter var v that indexes the store, K >= that
 * dimension), the excluded instances can run: they write the tile's overhang,
 * which no in-domain access of any block can name and which the compacted
 * tile holds (its extent comes from the loops, not the predicate). Only
 * loads whose indices depend on the predicate's loops (other than the stored
 * element itself) need the guard, as select(pred, load, 0) (masked loads
 * once vectorized). Integer divisions are left alone (the rule is skipped). */
typedef struct overhang_ctx {
  lctx *c;
  const ir_block *blk;
  bool *tainted;        /* per iter var: its binding uses a predicate loop var */
  const ir_buffer *dst; /* the stored buffer */
  ir_expr *const *dst_idx;
  ir_expr *pred;        /* the unlowered realize predicate (outer loop vars) */
  bool fail;
} overhang_ctx;

static bool idx_tainted(overhang_ctx *o, const ir_expr *e) {
  for (int i = 0; i < o->blk->niter; i++)
    if (o->tainted[i] && ir_expr_uses_var(e, o->blk->iters[i].var)) return true;
  return false;
}

static ir_expr *guard_loads(overhang_ctx *o, ir_expr *e) {
  if (o->fail || !e) return NULL;
  ts_arena *a = o->c->a;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
    return e;
  case IR_LOAD: {
    bool self = e->u.load.buf == o->dst;
    for (int d = 0; self && d < e->u.load.nidx; d++) self = e->u.load.idx[d] == o->dst_idx[d];
    bool t = false;
    for (int d = 0; d < e->u.load.nidx; d++) t = t || idx_tainted(o, e->u.load.idx[d]);
    if (self || !t) return e;
    ir_expr *zero = ir_dtype_is_float(e->dtype) ? ir_float(a, e->dtype, 0.0) : ir_int(a, e->dtype, 0);
    return zero ? ir_select(a, o->pred, e, zero) : NULL;
  }
  case IR_NOT: {
    ir_expr *x = guard_loads(o, e->u.un.a);
    return x ? ir_not(a, x) : NULL;
  }
  case IR_SELECT: {
    ir_expr *c0 = guard_loads(o, e->u.sel.cond), *t = guard_loads(o, e->u.sel.t), *f = guard_loads(o, e->u.sel.f);
    return c0 && t && f ? ir_select(a, c0, t, f) : NULL;
  }
  case IR_CAST: {
    ir_expr *x = guard_loads(o, e->u.cast.value);
    return x ? ir_cast(a, e->dtype, x) : NULL;
  }
  case IR_CALL: {
    ir_expr **args = TS_ANEWN(a, ir_expr *, e->u.call.nargs ? e->u.call.nargs : 1);
    if (!args) return NULL;
    for (int i = 0; i < e->u.call.nargs; i++)
      if (!(args[i] = guard_loads(o, e->u.call.args[i]))) return NULL;
    return ir_call(a, e->u.call.op, e->dtype, e->u.call.nargs, args);
  }
  default:
    if (ir_is_binop(e->kind)) {
      if ((e->kind == IR_DIV || e->kind == IR_FLOORDIV || e->kind == IR_FLOORMOD) && ir_dtype_is_int(e->dtype)) {
        int64_t k;
        if (!ir_as_int(e->u.bin.b, &k) || k == 0) {
          o->fail = true;
          return NULL;
        }
      }
      ir_expr *x = guard_loads(o, e->u.bin.a), *y = guard_loads(o, e->u.bin.b);
      if (!x || !y) return NULL;
      ir_expr *n = ir_expr_clone(a, e);
      if (n) {
        n->u.bin.a = x;
        n->u.bin.b = y;
      }
      return n;
    }
    o->fail = true; /* a kind we do not rewrite: keep the if */
    return NULL;
  }
}

static bool uses_any_loop_var(lctx *c, const ir_expr *e, const ir_expr *pred) {
  /* a var of pred that is a loop var on the current path */
  for (int i = 0; i < c->npath; i++)
    if (ir_expr_uses_var(pred, c->path[i].var) && ir_expr_uses_var(e, c->path[i].var)) return true;
  return false;
}

/* The block body rewritten so that it may run without its predicate, or
 * NULL when the rule does not apply. vals are the lowered iter values. */
static ir_stmt *overhang_body(lctx *c, const ir_stmt *rz, ir_expr *const *vals, ir_expr *pred) {
  const ir_block *blk = rz->u.realize.block;
  const ir_stmt *st = blk->body;
  if (c->mode != MODE_APPLY || blk->init || !st || st->kind != IR_STORE || st->u.store.predicate) return NULL;
  bufinfo *bi = find_buf(c, st->u.store.buf);
  const ir_buffer *b = st->u.store.buf;
  /* a kernel-private temporary (cache_write "global" or "local"), never a
   * GPU shared or fragment buffer */
  if (!bi || !bi->plan || !bi->plan->apply || !bi->mins || !b->scope ||
      (strcmp(b->scope, "local") && strcmp(b->scope, "global")))
    return NULL;
  int nd = st->u.store.nidx;
  /* every predicate term: E < K with E == the value of an iter var that
   * indexes a shrunk dimension d of the store, and K >= shape[d] */
  ir_expr *stack[16];
  int ns = 0, nterms = 0;
  stack[ns++] = pred;
  while (ns) {
    ir_expr *t = stack[--ns];
    if (t->kind == IR_AND) {
      if (ns + 2 > 16) return NULL;
      stack[ns++] = t->u.bin.a;
      stack[ns++] = t->u.bin.b;
      continue;
    }
    int64_t k;
    if ((t->kind != IR_LT && t->kind != IR_LE) || !ir_as_int(t->u.bin.b, &k)) return NULL;
    if (t->kind == IR_LE) k += 1;
    bool matched = false;
    for (int d = 0; d < nd && !matched; d++) {
      const ir_expr *ix = st->u.store.idx[d];
      int64_t shape;
      if (ix->kind != IR_VAR || !bi->mins[d] || !ir_as_int(b->shape[d], &shape) || k < shape) continue;
      for (int i = 0; i < blk->niter && !matched; i++) {
        if (blk->iters[i].var != ix->u.var) continue;
        ir_expr *diff = simp(c, ir_sub(c->a, cg_as_i64(c->a, t->u.bin.a), cg_as_i64(c->a, vals[i])));
        int64_t z;
        matched = diff && ir_as_int(diff, &z) && z == 0;
      }
    }
    if (!matched) return NULL;
    nterms++;
  }
  if (!nterms) return NULL;
  overhang_ctx o = {.c = c, .blk = blk, .dst = b, .dst_idx = st->u.store.idx, .pred = rz->u.realize.predicate};
  o.tainted = TS_ANEWN(c->a, bool, blk->niter ? blk->niter : 1);
  if (!o.tainted) return NN(c, NULL);
  for (int i = 0; i < blk->niter; i++)
    o.tainted[i] = uses_any_loop_var(c, vals[i], pred);
  ir_expr *v = guard_loads(&o, st->u.store.value);
  if (!v) return NULL;
  return ir_store(c->a, st->u.store.buf, nd, st->u.store.idx, v);
}

static ir_stmt *lower_realize(lctx *c, ir_stmt *s) {
  const ir_block *blk = s->u.realize.block;
  if (!blk) return fail(c, TS_EINVAL, "lower: block realize without a block");
  const char *outer = c->block;
  const ir_block *outer_blk = c->blk;
  c->block = blk->name ? blk->name : "?";
  int niter = blk->niter;
  if (niter && (!blk->iters || !s->u.realize.iter_values))
    return fail(c, TS_EINVAL, "lower: block %s has no iter var bindings", c->block);
  /* Iter values in the outer scope, then bound together. */
  ir_expr **vals = niter ? NN(c, TS_ANEWN(c->a, ir_expr *, niter)) : NULL;
  if (niter && !vals) return NULL;
  for (int i = 0; i < niter; i++) {
    ir_var *iv = blk->iters[i].var;
    ir_expr *v = simp(c, lower_expr(c, s->u.realize.iter_values[i]));
    if (!v || !iv) return c->st ? NULL : fail(c, TS_EINVAL, "lower: block %s has a missing iter var", c->block);
    if (v->dtype.code != iv->dtype.code) v = NN(c, ir_cast(c->a, iv->dtype, v));
    vals[i] = v;
  }
  ir_expr *pred = s->u.realize.predicate ? simp(c, lower_expr(c, s->u.realize.predicate)) : NULL;
  if (c->st) return NULL;
  int mark = c->nbind, bmark = c->nbuf;
  if (!ts_grow((void **)&c->binds, &c->capbind, c->nbind + niter, sizeof *c->binds)) return NN(c, NULL);
  for (int i = 0; i < niter; i++) c->binds[c->nbind++] = (binding){blk->iters[i].var, vals[i]};

  for (int i = 0; i < blk->nalloc; i++) {
    if (!blk->allocs || !blk->allocs[i])
      return fail(c, TS_EINVAL, "lower: block %s has a missing alloc buffer", c->block);
    const ir_buffer *ab = blk->allocs[i];
    cplan *p = c->mode == MODE_RECORD ? new_plan(c, ab) : c->mode == MODE_APPLY ? find_plan(c, ab) : NULL;
    if (c->st) return NULL;
    bool apply = c->mode == MODE_APPLY && p && p->apply;
    bufinfo *bi = add_buffer(c, ab, true, apply ? p->shape : NULL);
    if (!bi) return NULL;
    bi->plan = p;
    if (apply) bi->mins = p->min;
  }
  c->blk = blk;
  ir_stmt *over = pred && !is_true(pred) && !is_false(pred) ? overhang_body(c, s, vals, pred) : NULL;
  if (over && c->debug)
    fprintf(stderr, "[lower] block %s runs without its predicate (stores into the tile overhang)\n", c->block);
  ir_stmt *body = over ? lower_stmt(c, over) : blk->body ? lower_stmt(c, blk->body) : empty_stmt(c);
  if (over) pred = NULL;
  if (blk->init && body) {
    /* The init runs once per output element, when every R iter var is at
     * the start of its domain. */
    ir_expr *cond = NN(c, ir_bool(c->a, true));
    for (int i = 0; i < niter && cond; i++) {
      if (blk->iters[i].type != IR_ITER_R) continue;
      ir_expr *lo = NN(c, cg_as_i64(c->a, lower_expr(c, blk->iters[i].dom.min)));
      ir_expr *v = NN(c, cg_as_i64(c->a, vals[i]));
      ir_expr *eq = lo && v ? NN(c, ir_binop(c->a, IR_EQ, v, lo)) : NULL;
      cond = eq ? NN(c, ir_and(c->a, cond, eq)) : NULL;
    }
    cond = simp(c, cond);
    ir_stmt *init = lower_stmt(c, blk->init);
    if (!cond || !init) return NULL;
    if (!is_true(cond)) init = is_false(cond) ? NULL : NN(c, ir_if(c->a, cond, init, NULL));
    if (init) body = seq2(c, init, body);
    else if (c->st) return NULL;
  }
  for (int i = blk->nalloc - 1; i >= 0 && body; i--) {
    const cplan *p = c->bufs[bmark + i]->plan;
    if (c->mode == MODE_APPLY && p && p->apply && p->at) continue; /* placed in its loop */
    body = NN(c, ir_allocate(c->a, c->bufs[bmark + i]->flat, body));
  }
  if (body && pred && is_false(pred)) body = empty_stmt(c);
  else if (body && pred && !is_true(pred)) body = NN(c, ir_if(c->a, pred, body, NULL));
  c->nbind = mark;
  c->nbuf = bmark;
  c->block = outer;
  c->blk = outer_blk;
  return body;
}

static ir_stmt *lower_if(lctx *c, ir_stmt *s) {
  ir_expr *cond = simp(c, lower_expr(c, s->u.ifs.cond));
  if (!cond) return NULL;
  if (is_true(cond)) return lower_stmt(c, s->u.ifs.then_s);
  if (is_false(cond)) return s->u.ifs.else_s ? lower_stmt(c, s->u.ifs.else_s) : empty_stmt(c);
  ir_stmt *t = lower_stmt(c, s->u.ifs.then_s);
  ir_stmt *e = s->u.ifs.else_s ? lower_stmt(c, s->u.ifs.else_s) : NULL;
  if (!t || (s->u.ifs.else_s && !e)) return NULL;
  return NN(c, ir_if(c->a, cond, t, e));
}

static ir_stmt *lower_alloc(lctx *c, ir_stmt *s) {
  if (!s->u.alloc.buf) return fail(c, TS_EINVAL, "lower: allocate without a buffer");
  int bmark = c->nbuf;
  bufinfo *bi = add_buffer(c, s->u.alloc.buf, true, NULL);
  ir_stmt *b = bi ? lower_stmt(c, s->u.alloc.body) : NULL;
  c->nbuf = bmark;
  return b ? NN(c, ir_allocate(c->a, bi->flat, b)) : NULL;
}

static ir_stmt *lower_store(lctx *c, ir_stmt *s) {
  bufinfo *bi = NULL;
  ir_expr *idx = flatten(c, s->u.store.buf, s->u.store.nidx, s->u.store.idx, &bi);
  ir_expr *v = idx ? lower_expr(c, s->u.store.value) : NULL;
  ir_expr *p = s->u.store.predicate && v ? simp(c, lower_expr(c, s->u.store.predicate)) : NULL;
  if (!v || (s->u.store.predicate && !p)) return NULL;
  if (p && is_false(p) && p->dtype.lanes == 1) return empty_stmt(c);
  ir_stmt *n = NN(c, ir_store(c->a, bi->flat, 1, &idx, v));
  if (n) n->u.store.predicate = p && !is_true(p) ? p : NULL;
  return n;
}

/* A missing child is an error here (the shared walk passes NULL children
 * through): sets it, with the message lower_stmt or lower_expr gives. */
static bool missing_child(lctx *c, const ir_stmt *s) {
  const char *what = NULL;
  if (s->kind == IR_SEQ) {
    for (int i = 0; i < s->u.seq.n && !what; i++)
      if (!s->u.seq.stmts || !s->u.seq.stmts[i]) what = "statement";
  } else if (s->kind == IR_LET) {
    what = !s->u.let.value ? "expression" : !s->u.let.body ? "statement" : NULL;
  } else if (s->kind == IR_EVALUATE) {
    what = !s->u.eval.value ? "expression" : NULL;
  }
  if (what) fail(c, TS_EINVAL, "lower: missing %s in block %s", what, c->block ? c->block : "?");
  return what != NULL;
}

/* The lowering of each statement kind, as a pre hook of the shared
 * mutator: loops, blocks, conditions, allocations and stores are rebuilt
 * here; sequences, lets and evaluates take the default walk, their
 * expressions going through lower_expr_pre. */
static ir_stmt *lower_stmt_pre(ir_mutator *m, ir_stmt *s) {
  lctx *c = m->ctx;
  ir_stmt *n;
  switch (s->kind) {
  case IR_FOR: n = lower_loop(c, s); break;
  case IR_BLOCK_REALIZE: n = lower_realize(c, s); break;
  case IR_IF: n = lower_if(c, s); break;
  case IR_ALLOCATE: n = lower_alloc(c, s); break;
  case IR_STORE: n = lower_store(c, s); break;
  case IR_SEQ:
  case IR_LET:
  case IR_EVALUATE:
    if (!missing_child(c, s)) return NULL;
    n = NULL;
    break;
  default:
    n = fail(c, TS_EINVAL, "lower: unknown statement kind %d", (int)s->kind);
    break;
  }
  if (!n) ir_mutator_fail(m);
  return n;
}

static ir_stmt *lower_stmt(lctx *c, ir_stmt *s) {
  if (c->st) return NULL;
  if (!s) return fail(c, TS_EINVAL, "lower: missing statement in block %s", c->block ? c->block : "?");
  static const ir_mutator_hooks h = {.pre_expr = lower_expr_pre, .pre_stmt = lower_stmt_pre};
  bool failed = false;
  ir_stmt *n = ir_rewrite_stmt(c->a, &h, c, s, &failed);
  if (failed) NN(c, NULL);
  return c->st ? NULL : n;
}

/* ---- allocation planning and compaction ------------------------------- */

typedef struct varset_ctx {
  const ir_var *const *ok;
  int nok;
  const ir_func *f;
  bool bad;
} varset_ctx;

static bool varset_cb(void *ctx, const ir_expr *e) {
  varset_ctx *v = ctx;
  if (e->kind == IR_LOAD) v->bad = true; /* a region min must not read memory */
  if (e->kind != IR_VAR) return !v->bad;
  for (int i = 0; i < v->nok; i++)
    if (v->ok[i] == e->u.var) return true;
  for (int i = 0; i < v->f->nsyms; i++)
    if (v->f->syms[i] == e->u.var) return true;
  v->bad = true;
  return false;
}

/* May an allocation of scope `scope` move inside loop l? Not into a
 * vectorized loop (its body becomes lanes), and on GPUs a shared buffer
 * stays above threadIdx/vthread, any other non-local one above every thread
 * binding (a wmma.* fragment, registers of a warp, goes in as local does). */
static bool may_enter(const pathent *l, const char *scope) {
  if (l->kind == IR_FOR_VECTORIZED) return false;
  if (l->kind != IR_FOR_THREAD_BINDING) return true;
  if (scope && strcmp(scope, "local") == 0) return true;
  if (scope && strncmp(scope, "wmma.", 5) == 0) return true; /* per-warp fragments: registers */
  if (scope && strncmp(scope, "shared", 6) == 0)
    return !l->thread || strncmp(l->thread, "blockIdx", 8) == 0;
  return false;
}

/* Decides where p's buffer is allocated and its compact shape: the deepest
 * loop enclosing every access (not below depth0), and per dimension the hull
 * of the accessed indices with the loops inside that point relaxed. Any
 * non-constant extent (or a region min naming something other than outer
 * loop vars and size vars) leaves the buffer as declared. */
static void plan_one(lctx *c, const ir_func *f, cplan *p) {
  if (p->bad || p->nacc == 0) return;
  const ir_buffer *b = p->buf;
  const access_rec *a0 = &p->acc[0];
  int k = a0->depth;
  for (int i = 1; i < p->nacc; i++) {
    const access_rec *r = &p->acc[i];
    int j = 0;
    while (j < k && j < r->depth && r->path[j].loop == a0->path[j].loop) j++;
    k = j;
  }
  if (k < p->depth0) return;
  int lca = k;
  bool at_thread = false; /* stopped above a thread binding (GPU) */
  for (int j = p->depth0; j < k; j++)
    if (!may_enter(&a0->path[j], b->scope)) {
      at_thread = a0->path[j].kind == IR_FOR_THREAD_BINDING;
      k = j;
      break;
    }
  /* On GPUs the allocation stays above the thread loops, but the serial
   * loops between it and the accesses' common loop still run per use (a
   * shared tile fetched per k-tile): they stay symbolic (the buffer is reused
   * per iteration, the barrier pass orders the reuse) rather than relaxed;
   * thread-bound loops there are relaxed (every thread's part). */
  int nouter = 0;
  const ir_var **outer = lca ? ts_calloc((size_t)lca, sizeof *outer) : NULL;
  ir_analyzer an;
  ir_analyzer_init(&an, c->a);
  ir_dom_map dom;
  ir_dom_map_init(&dom);
  ir_expr **shape = TS_ANEWN(c->a, ir_expr *, b->ndim), **mins = TS_ANEWN(c->a, ir_expr *, b->ndim);
  bool ok = shape && mins && (!lca || outer), shrunk = false;
  for (int j = 0; j < lca && ok; j++) {
    const pathent *l = &a0->path[j];
    bool sym = j < k || (at_thread && (l->kind == IR_FOR_SERIAL || l->kind == IR_FOR_UNROLLED));
    if (!sym) continue;
    outer[nouter++] = l->var;
    ok = !ir_analyzer_bind(&an, l->var, l->min, l->ext);
  }
  for (int d = 0; d < b->ndim && ok; d++) {
    ir_intset hull = {NULL, NULL, true};
    for (int i = 0; i < p->nacc && ok; i++) {
      const access_rec *r = &p->acc[i];
      dom.n = 0;
      for (int j = k; j < r->depth && ok; j++) {
        /* bounds of inner loops may use loops further out: relax them too */
        const pathent *l = &r->path[j];
        if (j < lca && at_thread && (l->kind == IR_FOR_SERIAL || l->kind == IR_FOR_UNROLLED)) continue;
        ir_expr *last = ir_sub(c->a, ir_add(c->a, l->min, l->ext), ir_i64(c->a, 1));
        if (!last) {
          ok = false;
          break;
        }
        if (last->dtype.code != l->min->dtype.code) last = ir_cast(c->a, l->min->dtype, last);
        ir_intset lo = ir_eval_set(&an, l->min, &dom), hi = ir_eval_set(&an, last, &dom);
        ok = !lo.empty && !hi.empty && lo.min && hi.max &&
             !ir_dom_map_put(&dom, l->var, (ir_intset){lo.min, hi.max, false});
      }
      if (!ok) break;
      ir_intset s = ir_eval_set(&an, r->idx[d], &dom);
      hull = hull.empty ? s : ir_intset_union(&an, hull, s);
      ok = !hull.empty && hull.min && hull.max;
    }
    if (!ok) break;
    ir_expr *ext = ir_simplify(&an, ir_add(c->a, ir_sub(c->a, hull.max, hull.min), ir_int(c->a, hull.min->dtype, 1)));
    int64_t e = 0, full = 0;
    ok = ext && ir_as_int(ext, &e) && e >= 1;
    if (!ok) break;
    varset_ctx vc = {outer, nouter, f, false};
    ir_visitor v = {.expr = varset_cb, .ctx = &vc};
    ir_visit_expr(&v, hull.min);
    if ((ok = !vc.bad) == false) break;
    if (ir_as_int(b->shape[d], &full) && e >= full) {
      shape[d] = b->shape[d]; /* the whole dimension: no shift */
      mins[d] = NULL;
    } else {
      shape[d] = ir_i64(c->a, e);
      mins[d] = hull.min;
      ok = shape[d] != NULL;
      shrunk = true;
    }
  }
  ts_free(outer);
  ir_dom_map_fini(&dom);
  ir_analyzer_fini(&an);
  if (!ok || (!shrunk && k == p->depth0)) return;
  p->apply = true;
  p->at = k > p->depth0 ? a0->path[k - 1].loop : NULL;
  p->shape = shape;
  p->min = mins;
  if (c->debug) {
    fprintf(stderr, "[lower] buffer %s (%s): allocated %s%s, shape [", b->name, b->scope ? b->scope : "global",
            p->at ? "in the body of loop " : "at its block", p->at ? a0->path[k - 1].var->name : "");
    for (int d = 0; d < b->ndim; d++) {
      int64_t e = -1;
      ir_as_int(shape[d], &e);
      fprintf(stderr, "%s%lld", d ? ", " : "", (long long)e);
    }
    fprintf(stderr, "] (declared [");
    for (int d = 0; d < b->ndim; d++) {
      char *t = ir_expr_to_string(b->shape[d]);
      fprintf(stderr, "%s%s", d ? ", " : "", t ? t : "?");
      ts_free(t);
    }
    fprintf(stderr, "])\n");
  }
}

static bool debug_on(void) {
  return ts_debug("lower");
}

/* One lowering walk over f in c's mode; NULL on error (c->st set). */
static ir_stmt *lower_run(lctx *c, const ir_func *f, ir_buffer **params) {
  c->nbind = c->nbuf = c->npath = 0;
  ir_analyzer_truncate(&c->an, 0);
  /* size vars are at least 1: an index over a zero size is in a loop that
   * runs no iteration (lets a symbolic Reshape's divisions fold) */
  for (int i = 0; i < f->nsyms; i++) ir_analyzer_bind_const(&c->an, f->syms[i], 1, INT64_MAX / 4);
  for (int i = 0; i < f->nparams && !c->st; i++) {
    bufinfo *bi = add_buffer(c, f->params[i], false, NULL);
    if (bi) params[i] = bi->flat;
  }
  return c->st ? NULL : lower_stmt(c, f->body);
}

static ts_status lower(ts_arena *a, const ir_func *f, const cg_target *t, bool partition, cg_lowered *out, ts_diag *d);

ts_status cg_lower(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d) {
  return lower(a, f, t, true, out, d);
}

ts_status cg_lower_unpartitioned(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d) {
  return lower(a, f, t, false, out, d);
}

static ts_status lower(ts_arena *a, const ir_func *f, const cg_target *t, bool partition, cg_lowered *out, ts_diag *d) {
  if (!a || !f || !out) return ts_diag_set(d, TS_EINVAL, "lower: missing argument");
  if (!f->body) return ts_diag_set(d, TS_EINVAL, "lower: function %s has no body", f->name);
  memset(out, 0, sizeof *out);
  lctx c;
  memset(&c, 0, sizeof c);
  c.a = a;
  c.d = d;
  c.debug = debug_on();
  ir_analyzer_init(&c.an, a);
  ir_func *g = NN(&c, ir_func_new(a, f->name));
  ir_buffer **params = f->nparams ? NN(&c, TS_ANEWN(a, ir_buffer *, f->nparams)) : NULL;
  /* First walk: record where every block-allocated buffer is accessed; then
   * plan its allocation point and compact shape; if any plan changes
   * something, lower again applying the plans. */
  c.mode = MODE_RECORD;
  ir_stmt *body = c.st ? NULL : lower_run(&c, f, params);
  bool any = false;
  for (int i = 0; i < c.nplan && body; i++) {
    plan_one(&c, f, c.plans[i]);
    any = any || c.plans[i]->apply;
  }
  if (body && any) {
    c.mode = MODE_APPLY;
    body = lower_run(&c, f, params);
  }
  /* CPU only: a GPU kernel's thread-bound loops and cross-thread reductions
   * keep one loop nest */
  if (body && partition && !cg_target_ops_of(t)->gpu) body = cg_partition_tails(a, body);
  if (body && g) {
    g->nparams = f->nparams;
    g->params = params;
    g->ninputs = f->ninputs;
    g->nsyms = f->nsyms;
    g->syms = f->syms;
    g->nannot = f->nannot;
    g->annots = f->annots;
    g->body = body;
    out->func = g;
    out->orig = f;
  }
  ts_status st = c.st;
  if (!st && (!body || !g)) st = ts_diag_set(d, TS_ENOMEM, "lower: out of memory");
  ir_analyzer_fini(&c.an);
  ts_free(c.binds);
  ts_free(c.bufs);
  ts_free(c.path);
  free_plans(&c);
  if (!st && c.debug) {
    char *text = ir_func_to_string(g);
    fprintf(stderr, "[lower] %s:\n%s\n", f->name, text ? text : "(out of memory)");
    ts_free(text);
  }
  if (st) memset(out, 0, sizeof *out);
  return st;
}

/* ---- validity ----------------------------------------------------------- */

typedef struct chk {
  const cg_target *t;
  ts_diag *d;
  ts_status st;
  int par_depth;        /* enclosing parallel loops */
  const char *par_name; /* the outermost one */
  int64_t threads;      /* product of enclosing threadIdx extents (cuda) */
  int64_t tdim[3];      /* per threadIdx.{x,y,z}: the largest enclosing extent (a loop bound to a tag
                         * inside another of the same tag is the same hardware index) */
  const char *block;
} chk;

static ts_status chk_fail(chk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ts_status chk_fail(chk *k, const char *fmt, ...) {
  if (!k->st) {
    va_list ap;
    va_start(ap, fmt);
    ts_diag_vset(k->d, TS_EUNSUPPORTED, fmt, ap);
    va_end(ap);
    k->st = TS_EUNSUPPORTED;
  }
  return k->st;
}

static const char *tname(const cg_target *t) { return cg_target_ops_of(t)->name; }

static void chk_buffer(chk *k, const ir_buffer *b) {
  if (b && b->scope && k->t->kind == CG_TARGET_LLVM && strncmp(b->scope, "warp", 4) == 0)
    chk_fail(k, "check: buffer %s in block %s has scope '%s', which a CPU (llvm) target cannot realize",
             b->name, k->block ? k->block : "?", b->scope);
}

static void chk_stmt(chk *k, const ir_stmt *s);

/* A loop's own checks; its body is checked with the loop's thread and
 * parallel context, restored after. */
static void chk_loop(chk *k, const ir_stmt *s) {
  const char *name = s->u.loop.var ? s->u.loop.var->name : "?";
  int64_t ext = -1;
  bool cext = ir_as_int(s->u.loop.extent, &ext);
  int saved_depth = k->par_depth;
  const char *saved_name = k->par_name;
  int64_t saved_threads = k->threads;
  int64_t saved_tdim[3] = {k->tdim[0], k->tdim[1], k->tdim[2]};
  switch (s->u.loop.kind) {
  case IR_FOR_THREAD_BINDING:
    if (k->t->kind == CG_TARGET_LLVM) {
      chk_fail(k, "check: loop %s is bound to %s, but target %s has no GPU threads (use parallel)", name,
               s->u.loop.thread ? s->u.loop.thread : "a thread", tname(k->t));
      return;
    }
    if (s->u.loop.thread && strncmp(s->u.loop.thread, "threadIdx.", 10) == 0 && cext) {
      int dim = s->u.loop.thread[10] - 'x';
      if (dim >= 0 && dim < 3 && ext > k->tdim[dim]) k->tdim[dim] = ext;
      k->threads = k->tdim[0] * k->tdim[1] * k->tdim[2];
      if (k->threads > 1024) {
        chk_fail(k, "check: loop %s (%s) makes %lld threads per block, over cuda's 1024", name,
                 s->u.loop.thread, (long long)k->threads);
        return;
      }
    }
    break;
  case IR_FOR_PARALLEL:
    if (cg_target_ops_of(k->t)->gpu) {
      chk_fail(k, "check: loop %s is parallel, which target cuda cannot run (bind it to blockIdx/threadIdx)",
               name);
      return;
    }
    if (k->par_depth > 0) {
      chk_fail(k, "check: parallel loop %s is nested inside parallel loop %s", name, k->par_name);
      return;
    }
    k->par_depth++;
    k->par_name = name;
    break;
  case IR_FOR_VECTORIZED:
    if (cext && ext > CG_MAX_LANES) {
      chk_fail(k, "check: vectorized loop %s has %lld lanes, more than %d", name, (long long)ext,
               CG_MAX_LANES);
      return;
    }
    break;
  default:
    break;
  }
  chk_stmt(k, s->u.loop.body);
  k->par_depth = saved_depth;
  k->par_name = saved_name;
  k->threads = saved_threads;
  memcpy(k->tdim, saved_tdim, sizeof saved_tdim);
}

/* The checks as a visitor over statements: loops and blocks walk their own
 * bodies (their context is scoped); the walk stops at the first failure. */
static bool chk_cb(void *ctx, const ir_stmt *s) {
  chk *k = ctx;
  if (k->st) return false;
  switch (s->kind) {
  case IR_FOR:
    chk_loop(k, s);
    return false;
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    if (!b) return false;
    const char *outer = k->block;
    k->block = b->name;
    for (int i = 0; i < b->nalloc; i++) chk_buffer(k, b->allocs ? b->allocs[i] : NULL);
    chk_stmt(k, b->init);
    chk_stmt(k, b->body);
    k->block = outer;
    return false;
  }
  case IR_ALLOCATE:
    chk_buffer(k, s->u.alloc.buf);
    return true;
  case IR_STORE:
    if (s->u.store.value && s->u.store.value->dtype.lanes > CG_MAX_LANES)
      chk_fail(k, "check: a store to %s has %d lanes, more than %d", s->u.store.buf ? s->u.store.buf->name : "?",
               s->u.store.value->dtype.lanes, CG_MAX_LANES);
    return false;
  default:
    return true;
  }
}

static void chk_stmt(chk *k, const ir_stmt *s) {
  ir_visitor v = {.stmt = chk_cb, .ctx = k};
  ir_visit_stmt(&v, s);
}

ts_status cg_check(const ir_func *f, const cg_target *t, ts_diag *d) {
  if (!f || !t) return ts_diag_set(d, TS_EINVAL, "check: missing argument");
  chk k;
  memset(&k, 0, sizeof k);
  k.t = t;
  k.d = d;
  k.threads = 1;
  k.tdim[0] = k.tdim[1] = k.tdim[2] = 1;
  for (int i = 0; i < f->nparams; i++) chk_buffer(&k, f->params[i]);
  chk_stmt(&k, f->body);
  const cg_target_ops *ops = cg_target_ops_of(t);
  if (k.st == TS_OK && ops->check) return ops->check(f, t, d); /* the kind's own (target.c) */
  return k.st;
}
