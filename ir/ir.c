/* ir.c — the IR's constructors, dtype table, module container, generic
 * visitor, variable/buffer substitution (with structural sharing: an
 * unchanged subtree is returned as is), shallow clones for copy-on-write
 * rewrites, and deep copy of a function into another arena. */
#include "ir.h"
#include "mutator.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- dtypes ---- */
static const struct {
  const char *name;
  int bits;
  char cls;
} dtype_table[] = {
#define IR_X(e, n, b, c) {n, b, c},
    IR_DTYPE_LIST(IR_X)
#undef IR_X
};

const char *ir_dtype_code_name(ir_dtype_code c) {
  return (unsigned)c < IR_DTYPE_COUNT ? dtype_table[c].name : "?";
}
int ir_dtype_bits(ir_dtype t) { return t.code < IR_DTYPE_COUNT ? dtype_table[t.code].bits : 0; }
int ir_dtype_bytes(ir_dtype t) {
  int b = ir_dtype_bits(t);
  return b < 8 ? 1 : b / 8;
}
bool ir_dtype_is_float(ir_dtype t) { return t.code < IR_DTYPE_COUNT && dtype_table[t.code].cls == 'f'; }
bool ir_dtype_is_int(ir_dtype t) {
  return t.code < IR_DTYPE_COUNT && (dtype_table[t.code].cls == 'i' || dtype_table[t.code].cls == 'u');
}
bool ir_dtype_is_signed(ir_dtype t) { return t.code < IR_DTYPE_COUNT && dtype_table[t.code].cls == 'i'; }
bool ir_dtype_is_bool(ir_dtype t) { return t.code == IR_BOOL; }
bool ir_dtype_eq(ir_dtype a, ir_dtype b) { return a.code == b.code && a.lanes == b.lanes; }

char *ir_dtype_str(ir_dtype t, char *buf, size_t n) {
  if (t.lanes > 1)
    snprintf(buf, n, "%sx%d", ir_dtype_code_name(t.code), t.lanes);
  else
    snprintf(buf, n, "%s", ir_dtype_code_name(t.code));
  return buf;
}

bool ir_dtype_parse(const char *s, ir_dtype *out) {
  static const struct {
    const char *alias;
    ir_dtype_code code;
  } aliases[] = {{"float32", IR_F32}, {"float64", IR_F64}, {"float16", IR_F16},
                 {"bfloat16", IR_BF16}, {"int8", IR_I8},   {"int16", IR_I16},
                 {"int32", IR_I32},   {"int64", IR_I64},   {"uint8", IR_U8},
                 {"uint32", IR_U32}};
  size_t len = strlen(s);
  const char *x = NULL;
  /* lanes suffix: "x<digits>" at the end */
  for (size_t i = len; i > 0; i--) {
    if (s[i - 1] == 'x') {
      bool digits = i < len;
      for (size_t j = i; j < len; j++)
        if (s[j] < '0' || s[j] > '9') digits = false;
      if (digits) x = s + i - 1;
      break;
    }
  }
  size_t base_len = x ? (size_t)(x - s) : len;
  int lanes = 1;
  if (x) {
    lanes = 0;
    for (const char *p = x + 1; *p; p++) {
      lanes = lanes * 10 + (*p - '0');
      if (lanes > 65535) return false;
    }
    if (lanes < 1) return false;
  }
  for (int c = 0; c < IR_DTYPE_COUNT; c++) {
    if (strlen(dtype_table[c].name) == base_len && !strncmp(s, dtype_table[c].name, base_len)) {
      *out = ir_dt_vec((ir_dtype_code)c, lanes);
      return true;
    }
  }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    if (strlen(aliases[i].alias) == base_len && !strncmp(s, aliases[i].alias, base_len)) {
      *out = ir_dt_vec(aliases[i].code, lanes);
      return true;
    }
  }
  return false;
}

/* ---- op tables ---- */
static const struct {
  const char *name, *sym;
  int prec;
} binop_table[] = {
#define IR_X(e, n, s, p) [e] = {n, s, p},
    IR_BINOP_LIST(IR_X)
#undef IR_X
};

bool ir_is_binop(ir_expr_kind k) { return k >= IR_ADD && k <= IR_OR; }
bool ir_is_cmp(ir_expr_kind k) { return k >= IR_EQ && k <= IR_GE; }
const char *ir_binop_name(ir_expr_kind k) { return ir_is_binop(k) ? binop_table[k].name : "?"; }
const char *ir_binop_symbol(ir_expr_kind k) { return ir_is_binop(k) ? binop_table[k].sym : NULL; }
int ir_binop_prec(ir_expr_kind k) { return ir_is_binop(k) ? binop_table[k].prec : 0; }

static const struct {
  const char *name;
  int nargs;
} intrin_table[] = {
#define IR_X(e, n, a) {n, a},
    IR_INTRIN_LIST(IR_X)
#undef IR_X
};

const char *ir_intrin_name(ir_intrin op) {
  return (unsigned)op < IR_INTRIN_COUNT ? intrin_table[op].name : "?";
}
int ir_intrin_nargs(ir_intrin op) { return (unsigned)op < IR_INTRIN_COUNT ? intrin_table[op].nargs : 0; }
bool ir_intrin_lookup(const char *name, ir_intrin *out) {
  for (int i = 0; i < IR_INTRIN_COUNT; i++)
    if (!strcmp(intrin_table[i].name, name)) {
      *out = (ir_intrin)i;
      return true;
    }
  return false;
}

static const char *const for_kind_names[] = {"serial", "parallel", "vectorized", "unrolled",
                                             "thread"};
const char *ir_for_kind_name(ir_for_kind k) {
  return (unsigned)k <= IR_FOR_THREAD_BINDING ? for_kind_names[k] : "?";
}

/* ---- module ---- */
ir_module *ir_module_new(void) {
  ir_module *m = ts_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->arena = ts_arena_new();
  if (!m->arena) {
    ts_free(m);
    return NULL;
  }
  return m;
}

void ir_module_free(ir_module *m) {
  if (!m) return;
  for (int i = 0; i < m->nfuncs; i++)
    if (m->funcs[i].free_fn) m->funcs[i].free_fn(m->funcs[i].u.graph);
  ts_arena_free(m->arena);
  ts_free(m->funcs);
  ts_free(m);
}

ts_status ir_module_add(ir_module *m, ir_func *f) {
  return ir_module_add_entry(m, (ir_module_entry){.name = f->name, .kind = IR_MOD_PRIM, .u.prim = f});
}

ts_status ir_module_add_entry(ir_module *m, ir_module_entry e) {
  if (m->nfuncs == m->capfuncs) {
    int cap = m->capfuncs ? m->capfuncs * 2 : 4;
    ir_module_entry *p = ts_realloc(m->funcs, (size_t)cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    m->funcs = p;
    m->capfuncs = cap;
  }
  m->funcs[m->nfuncs++] = e;
  return TS_OK;
}

ir_func *ir_module_get(const ir_module *m, const char *name) {
  for (int i = 0; i < m->nfuncs; i++)
    if (m->funcs[i].kind == IR_MOD_PRIM && !strcmp(m->funcs[i].name, name)) return m->funcs[i].u.prim;
  return NULL;
}

/* ---- constructors ---- */
static atomic_uint next_id = 1;

ir_var *ir_var_new(ts_arena *a, const char *name, ir_dtype t) {
  ir_var *v = TS_ANEW(a, ir_var);
  if (!v) return NULL;
  v->name = ts_arena_strdup(a, name ? name : "v");
  v->dtype = t;
  v->id = atomic_fetch_add(&next_id, 1);
  return v->name ? v : NULL;
}

ir_buffer *ir_buffer_new(ts_arena *a, const char *name, ir_dtype t, int ndim,
                         ir_expr *const *shape, const char *scope) {
  ir_buffer *b = TS_ANEW(a, ir_buffer);
  if (!b) return NULL;
  b->name = ts_arena_strdup(a, name ? name : "buf");
  b->dtype = t;
  b->ndim = ndim;
  b->shape = ndim ? TS_ANEWN(a, ir_expr *, ndim) : NULL;
  if (ndim && !b->shape) return NULL;
  for (int i = 0; i < ndim; i++) b->shape[i] = shape[i];
  b->scope = ts_arena_strdup(a, scope ? scope : "global");
  b->id = atomic_fetch_add(&next_id, 1);
  return b->name && b->scope ? b : NULL;
}

static ir_expr *mk(ts_arena *a, ir_expr_kind k, ir_dtype t) {
  ir_expr *e = TS_ANEW(a, ir_expr);
  if (e) {
    e->kind = k;
    e->dtype = t;
  }
  return e;
}

ir_expr *ir_int(ts_arena *a, ir_dtype t, int64_t v) {
  ir_expr *e = mk(a, IR_INT_IMM, t);
  if (e) e->u.ival = v;
  return e;
}
ir_expr *ir_i32(ts_arena *a, int64_t v) { return ir_int(a, ir_dt(IR_I32), v); }
ir_expr *ir_i64(ts_arena *a, int64_t v) { return ir_int(a, ir_dt(IR_I64), v); }
ir_expr *ir_bool(ts_arena *a, bool v) { return ir_int(a, ir_dt(IR_BOOL), v ? 1 : 0); }

ir_expr *ir_float(ts_arena *a, ir_dtype t, double v) {
  ir_expr *e = mk(a, IR_FLOAT_IMM, t);
  if (e) e->u.fval = v;
  return e;
}

ir_expr *ir_var_ref(ts_arena *a, ir_var *v) {
  if (!v) return NULL;
  ir_expr *e = mk(a, IR_VAR, v->dtype);
  if (e) e->u.var = v;
  return e;
}

ir_expr *ir_binop(ts_arena *a, ir_expr_kind k, ir_expr *x, ir_expr *y) {
  if (!x || !y) return NULL;
  ir_dtype t = x->dtype;
  if (ir_is_cmp(k) || k == IR_AND || k == IR_OR) t = ir_dt_vec(IR_BOOL, x->dtype.lanes);
  ir_expr *e = mk(a, k, t);
  if (e) {
    e->u.bin.a = x;
    e->u.bin.b = y;
  }
  return e;
}

ir_expr *ir_not(ts_arena *a, ir_expr *x) {
  if (!x) return NULL;
  ir_expr *e = mk(a, IR_NOT, x->dtype);
  if (e) e->u.un.a = x;
  return e;
}

ir_expr *ir_select(ts_arena *a, ir_expr *c, ir_expr *t, ir_expr *f) {
  if (!c || !t || !f) return NULL;
  ir_expr *e = mk(a, IR_SELECT, t->dtype);
  if (e) {
    e->u.sel.cond = c;
    e->u.sel.t = t;
    e->u.sel.f = f;
  }
  return e;
}

ir_expr *ir_cast(ts_arena *a, ir_dtype t, ir_expr *x) {
  if (!x) return NULL;
  ir_expr *e = mk(a, IR_CAST, t);
  if (e) e->u.cast.value = x;
  return e;
}

static ir_expr **dup_exprs(ts_arena *a, int n, ir_expr *const *src, bool *ok) {
  *ok = true;
  if (n == 0) return NULL;
  ir_expr **d = TS_ANEWN(a, ir_expr *, n);
  if (!d) {
    *ok = false;
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!src[i]) *ok = false;
    d[i] = src[i];
  }
  return d;
}

ir_expr *ir_call(ts_arena *a, ir_intrin op, ir_dtype t, int nargs, ir_expr *const *args) {
  bool ok;
  ir_expr **d = dup_exprs(a, nargs, args, &ok);
  if (!ok) return NULL;
  ir_expr *e = mk(a, IR_CALL, t);
  if (e) {
    e->u.call.op = op;
    e->u.call.nargs = nargs;
    e->u.call.args = d;
  }
  return e;
}

ir_expr *ir_load(ts_arena *a, ir_buffer *b, int nidx, ir_expr *const *idx) {
  bool ok;
  ir_expr **d = dup_exprs(a, nidx, idx, &ok);
  if (!ok || !b) return NULL;
  ir_dtype t = b->dtype;
  for (int i = 0; i < nidx; i++)
    if (d[i]->dtype.lanes > 1) t.lanes = d[i]->dtype.lanes;
  ir_expr *e = mk(a, IR_LOAD, t);
  if (e) {
    e->u.load.buf = b;
    e->u.load.nidx = nidx;
    e->u.load.idx = d;
  }
  return e;
}

ir_expr *ir_ramp(ts_arena *a, ir_expr *base, ir_expr *stride, int lanes) {
  if (!base || !stride) return NULL;
  ir_expr *e = mk(a, IR_RAMP, ir_dt_vec((ir_dtype_code)base->dtype.code, lanes));
  if (e) {
    e->u.ramp.base = base;
    e->u.ramp.stride = stride;
    e->u.ramp.lanes = lanes;
  }
  return e;
}

ir_expr *ir_broadcast(ts_arena *a, ir_expr *v, int lanes) {
  if (!v) return NULL;
  ir_expr *e = mk(a, IR_BROADCAST, ir_dt_vec((ir_dtype_code)v->dtype.code, lanes));
  if (e) {
    e->u.bcast.value = v;
    e->u.bcast.lanes = lanes;
  }
  return e;
}

ir_expr *ir_call_extern(ts_arena *a, const char *name, ir_dtype t, int nargs,
                        ir_expr *const *args) {
  bool ok;
  if (!name) return NULL;
  ir_expr **d = dup_exprs(a, nargs, args, &ok);
  const char *nm = ts_arena_strdup(a, name);
  if (!ok || !nm) return NULL;
  ir_expr *e = mk(a, IR_CALL_EXTERN, t);
  if (e) {
    e->u.ext.name = nm;
    e->u.ext.nargs = nargs;
    e->u.ext.args = d;
  }
  return e;
}

ir_expr *ir_access_ptr(ts_arena *a, ir_buffer *b, ir_expr *offset, int rw) {
  if (!b || !offset) return NULL;
  ir_expr *e = mk(a, IR_ACCESS_PTR, ir_dt(IR_HANDLE));
  if (e) {
    e->u.ptr.buf = b;
    e->u.ptr.offset = offset;
    e->u.ptr.rw = rw;
  }
  return e;
}

ir_expr *ir_reinterpret(ts_arena *a, ir_dtype t, ir_expr *x) {
  if (!x || t.lanes < 1 || x->dtype.lanes < 1) return NULL;
  if ((long)ir_dtype_bits(t) * t.lanes != (long)ir_dtype_bits(x->dtype) * x->dtype.lanes) return NULL;
  ir_expr *e = mk(a, IR_REINTERPRET, t);
  if (e) e->u.cast.value = x;
  return e;
}

ir_expr *ir_str(ts_arena *a, const char *str) {
  const char *d = str ? ts_arena_strdup(a, str) : NULL;
  if (!d) return NULL;
  ir_expr *e = mk(a, IR_STR_IMM, ir_dt(IR_HANDLE));
  if (e) e->u.sval = d;
  return e;
}

static ir_stmt *mks(ts_arena *a, ir_stmt_kind k) {
  ir_stmt *s = TS_ANEW(a, ir_stmt);
  if (s) s->kind = k;
  return s;
}

ir_stmt *ir_for(ts_arena *a, ir_var *v, ir_expr *min, ir_expr *extent, ir_for_kind k,
                ir_stmt *body) {
  if (!v || !min || !extent || !body) return NULL;
  ir_stmt *s = mks(a, IR_FOR);
  if (s) {
    s->u.loop.var = v;
    s->u.loop.min = min;
    s->u.loop.extent = extent;
    s->u.loop.kind = k;
    s->u.loop.body = body;
  }
  return s;
}

ir_stmt *ir_seq(ts_arena *a, int n, ir_stmt *const *stmts) {
  ir_stmt *s = mks(a, IR_SEQ);
  if (!s) return NULL;
  s->u.seq.n = n;
  if (n) {
    s->u.seq.stmts = TS_ANEWN(a, ir_stmt *, n);
    if (!s->u.seq.stmts) return NULL;
    for (int i = 0; i < n; i++) {
      if (!stmts[i]) return NULL;
      s->u.seq.stmts[i] = stmts[i];
    }
  }
  return s;
}

ir_stmt *ir_if(ts_arena *a, ir_expr *cond, ir_stmt *then_s, ir_stmt *else_s) {
  if (!cond || !then_s) return NULL;
  ir_stmt *s = mks(a, IR_IF);
  if (s) {
    s->u.ifs.cond = cond;
    s->u.ifs.then_s = then_s;
    s->u.ifs.else_s = else_s;
  }
  return s;
}

ir_stmt *ir_let(ts_arena *a, ir_var *v, ir_expr *value, ir_stmt *body) {
  if (!v || !value || !body) return NULL;
  ir_stmt *s = mks(a, IR_LET);
  if (s) {
    s->u.let.var = v;
    s->u.let.value = value;
    s->u.let.body = body;
  }
  return s;
}

ir_stmt *ir_allocate(ts_arena *a, ir_buffer *b, ir_stmt *body) {
  if (!b || !body) return NULL;
  ir_stmt *s = mks(a, IR_ALLOCATE);
  if (s) {
    s->u.alloc.buf = b;
    s->u.alloc.body = body;
  }
  return s;
}

ir_stmt *ir_evaluate(ts_arena *a, ir_expr *e) {
  if (!e) return NULL;
  ir_stmt *s = mks(a, IR_EVALUATE);
  if (s) s->u.eval.value = e;
  return s;
}

ir_stmt *ir_store(ts_arena *a, ir_buffer *b, int nidx, ir_expr *const *idx, ir_expr *value) {
  bool ok;
  ir_expr **d = dup_exprs(a, nidx, idx, &ok);
  if (!ok || !b || !value) return NULL;
  ir_stmt *s = mks(a, IR_STORE);
  if (s) {
    s->u.store.buf = b;
    s->u.store.nidx = nidx;
    s->u.store.idx = d;
    s->u.store.value = value;
  }
  return s;
}

ir_block *ir_block_new(ts_arena *a, const char *name) {
  ir_block *b = TS_ANEW(a, ir_block);
  if (!b) return NULL;
  b->name = ts_arena_strdup(a, name ? name : "block");
  return b->name ? b : NULL;
}

ir_stmt *ir_realize(ts_arena *a, ir_block *b, ir_expr *const *iter_values, ir_expr *predicate) {
  if (!b) return NULL;
  bool ok;
  ir_expr **d = dup_exprs(a, b->niter, iter_values, &ok);
  if (!ok) return NULL;
  if (!predicate) predicate = ir_bool(a, true);
  if (!predicate) return NULL;
  ir_stmt *s = mks(a, IR_BLOCK_REALIZE);
  if (s) {
    s->u.realize.iter_values = d;
    s->u.realize.predicate = predicate;
    s->u.realize.block = b;
  }
  return s;
}

ir_func *ir_func_new(ts_arena *a, const char *name) {
  ir_func *f = TS_ANEW(a, ir_func);
  if (!f) return NULL;
  f->name = ts_arena_strdup(a, name ? name : "main");
  return f->name ? f : NULL;
}

ir_stmt *ir_stmt_clone(ts_arena *a, const ir_stmt *s) { return ts_arena_memdup(a, s, sizeof *s); }
ir_block *ir_block_clone(ts_arena *a, const ir_block *b) { return ts_arena_memdup(a, b, sizeof *b); }

ir_block *ir_block_with_alloc(ts_arena *a, const ir_block *b, ir_buffer *buf) {
  ir_block *nb = ir_block_clone(a, b);
  ir_buffer **al = TS_ANEWN(a, ir_buffer *, b->nalloc + 1);
  if (!nb || !al) return NULL;
  if (b->nalloc) memcpy(al, b->allocs, sizeof *al * (size_t)b->nalloc);
  al[b->nalloc] = buf;
  nb->allocs = al;
  nb->nalloc = b->nalloc + 1;
  return nb;
}
ir_expr *ir_expr_clone(ts_arena *a, const ir_expr *e) { return ts_arena_memdup(a, e, sizeof *e); }

bool ir_as_int(const ir_expr *e, int64_t *out) {
  if (!e || e->kind != IR_INT_IMM) return false;
  if (out) *out = e->u.ival;
  return true;
}

bool ir_fold_int(const ir_expr *e, int64_t *out) {
  int64_t a, b, v;
  if (ir_as_int(e, out)) return true;
  if (!e) return false;
  if (e->kind == IR_CAST) return ir_dtype_is_int(e->dtype) && ir_fold_int(e->u.cast.value, out);
  if (!ir_is_binop(e->kind) || !ir_fold_int(e->u.bin.a, &a) || !ir_fold_int(e->u.bin.b, &b)) return false;
  bool ovf = false; /* a constant that does not fit is not folded (a hostile shape, 2^62 * 4) */
  if (e->kind == IR_ADD) ovf = __builtin_add_overflow(a, b, &v);
  else if (e->kind == IR_SUB) ovf = __builtin_sub_overflow(a, b, &v);
  else if (e->kind == IR_MUL) ovf = __builtin_mul_overflow(a, b, &v);
  else if (e->kind == IR_FLOORDIV && b > 0 && a == INT64_MIN) return false;
  else if (e->kind == IR_FLOORDIV && b > 0) v = a >= 0 ? a / b : -((-a + b - 1) / b);
  else if (e->kind == IR_FLOORMOD && b > 0) v = ((a % b) + b) % b;
  else return false;
  if (ovf) return false;
  if (out) *out = v;
  return true;
}

int64_t ir_buffer_const_size(const ir_buffer *b) {
  int64_t n = 1;
  for (int i = 0; i < b->ndim; i++) {
    int64_t v;
    if (!ir_fold_int(b->shape[i], &v) || v < 0) return -1;
    if (v && n > INT64_MAX / v) return -1;
    n *= v;
  }
  return n;
}

/* ---- annotations ---- */
const ir_annot *ir_annot_find(int n, const ir_annot *anns, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(anns[i].key, key)) return &anns[i];
  return NULL;
}

ts_status ir_annot_set(ts_arena *a, int *n, ir_annot **anns, ir_annot ann) {
  ir_annot *na = TS_ANEWN(a, ir_annot, *n + 1);
  if (!na) return TS_ENOMEM;
  int m = 0;
  bool replaced = false;
  for (int i = 0; i < *n; i++) {
    if (!strcmp((*anns)[i].key, ann.key)) {
      na[m++] = ann;
      replaced = true;
    } else {
      na[m++] = (*anns)[i];
    }
  }
  if (!replaced) na[m++] = ann;
  *anns = na;
  *n = m;
  return TS_OK;
}

/* ---- visitor ---- */
void ir_visit_expr(const ir_visitor *v, const ir_expr *e) {
  if (!e) return;
  if (v->expr && !v->expr(v->ctx, e)) return;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
    break;
  case IR_NOT:
    ir_visit_expr(v, e->u.un.a);
    break;
  case IR_SELECT:
    ir_visit_expr(v, e->u.sel.cond);
    ir_visit_expr(v, e->u.sel.t);
    ir_visit_expr(v, e->u.sel.f);
    break;
  case IR_CAST:
    ir_visit_expr(v, e->u.cast.value);
    break;
  case IR_CALL:
    for (int i = 0; i < e->u.call.nargs; i++) ir_visit_expr(v, e->u.call.args[i]);
    break;
  case IR_LOAD:
    for (int i = 0; i < e->u.load.nidx; i++) ir_visit_expr(v, e->u.load.idx[i]);
    break;
  case IR_RAMP:
    ir_visit_expr(v, e->u.ramp.base);
    ir_visit_expr(v, e->u.ramp.stride);
    break;
  case IR_BROADCAST:
    ir_visit_expr(v, e->u.bcast.value);
    break;
  case IR_CALL_EXTERN:
    for (int i = 0; i < e->u.ext.nargs; i++) ir_visit_expr(v, e->u.ext.args[i]);
    break;
  case IR_ACCESS_PTR:
    ir_visit_expr(v, e->u.ptr.offset);
    break;
  case IR_REINTERPRET:
    ir_visit_expr(v, e->u.cast.value);
    break;
  case IR_STR_IMM:
    break;
  default:
    if (ir_is_binop(e->kind)) {
      ir_visit_expr(v, e->u.bin.a);
      ir_visit_expr(v, e->u.bin.b);
    }
    break;
  }
}

static void visit_regions(const ir_visitor *v, int n, const ir_region *r) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < r[i].ndim; j++) {
      ir_visit_expr(v, r[i].ranges[j].min);
      ir_visit_expr(v, r[i].ranges[j].extent);
    }
}

void ir_visit_stmt(const ir_visitor *v, const ir_stmt *s) {
  if (!s) return;
  if (v->stmt && !v->stmt(v->ctx, s)) return;
  switch (s->kind) {
  case IR_FOR:
    ir_visit_expr(v, s->u.loop.min);
    ir_visit_expr(v, s->u.loop.extent);
    ir_visit_stmt(v, s->u.loop.body);
    break;
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    for (int i = 0; i < b->niter; i++) ir_visit_expr(v, s->u.realize.iter_values[i]);
    ir_visit_expr(v, s->u.realize.predicate);
    for (int i = 0; i < b->niter; i++) {
      ir_visit_expr(v, b->iters[i].dom.min);
      ir_visit_expr(v, b->iters[i].dom.extent);
    }
    visit_regions(v, b->nreads, b->reads);
    visit_regions(v, b->nwrites, b->writes);
    ir_visit_stmt(v, b->init);
    ir_visit_stmt(v, b->body);
    break;
  }
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) ir_visit_stmt(v, s->u.seq.stmts[i]);
    break;
  case IR_IF:
    ir_visit_expr(v, s->u.ifs.cond);
    ir_visit_stmt(v, s->u.ifs.then_s);
    ir_visit_stmt(v, s->u.ifs.else_s);
    break;
  case IR_LET:
    ir_visit_expr(v, s->u.let.value);
    ir_visit_stmt(v, s->u.let.body);
    break;
  case IR_ALLOCATE:
    ir_visit_stmt(v, s->u.alloc.body);
    break;
  case IR_EVALUATE:
    ir_visit_expr(v, s->u.eval.value);
    break;
  case IR_STORE:
    for (int i = 0; i < s->u.store.nidx; i++) ir_visit_expr(v, s->u.store.idx[i]);
    ir_visit_expr(v, s->u.store.value);
    ir_visit_expr(v, s->u.store.predicate);
    break;
  default:
    break;
  }
}

/* ---- var map ---- */
void ir_var_map_init(ir_var_map *m) { memset(m, 0, sizeof *m); }
void ir_var_map_fini(ir_var_map *m) {
  ts_free(m->keys);
  ts_free(m->vals);
  memset(m, 0, sizeof *m);
}

ts_status ir_var_map_put(ir_var_map *m, ir_var *k, ir_expr *v) {
  for (int i = 0; i < m->n; i++)
    if (m->keys[i] == k) {
      m->vals[i] = v;
      return TS_OK;
    }
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 8;
    ir_var **nk = ts_realloc(m->keys, (size_t)cap * sizeof *nk);
    if (!nk) return TS_ENOMEM;
    m->keys = nk;
    ir_expr **nv = ts_realloc(m->vals, (size_t)cap * sizeof *nv);
    if (!nv) return TS_ENOMEM;
    m->vals = nv;
    m->cap = cap;
  }
  m->keys[m->n] = k;
  m->vals[m->n] = v;
  m->n++;
  return TS_OK;
}

ir_expr *ir_var_map_get(const ir_var_map *m, const ir_var *k) {
  for (int i = 0; i < m->n; i++)
    if (m->keys[i] == k) return m->vals[i];
  return NULL;
}

/* ---- substitution (the mutator's built-in modes, mutator.c) ---- */
static ir_mutator *subst_init(ir_mutator *m, ts_arena *a, const ir_var_map *map, ir_buffer *from,
                              ir_buffer *to) {
  ir_mutator_init(m, a);
  m->vars = map;
  m->buf_from = from;
  m->buf_to = to;
  return m;
}

static void *subst_done(ir_mutator *m, void *out) {
  bool failed = m->failed;
  ir_mutator_fini(m);
  return failed ? NULL : out;
}

ir_expr *ir_subst_expr(ts_arena *a, ir_expr *e, const ir_var_map *map) {
  ir_mutator m;
  return subst_done(&m, ir_mutate_expr(subst_init(&m, a, map, NULL, NULL), e));
}

ir_stmt *ir_subst_stmt(ts_arena *a, ir_stmt *s, const ir_var_map *map) {
  ir_mutator m;
  return subst_done(&m, ir_mutate_stmt(subst_init(&m, a, map, NULL, NULL), s));
}

ir_stmt *ir_subst_buffer(ts_arena *a, ir_stmt *s, ir_buffer *from, ir_buffer *to) {
  ir_mutator m;
  return subst_done(&m, ir_mutate_stmt(subst_init(&m, a, NULL, from, to), s));
}

/* What ir_expr_uses_var / ir_expr_loads_buffer look for: a reference to a
 * var or a load of a buffer (never the same pointer). */
typedef struct uses_ctx {
  const void *what;
  bool found;
} uses_ctx;

static bool uses_cb(void *ctx, const ir_expr *e) {
  uses_ctx *u = ctx;
  if (u->found) return false;
  if ((e->kind == IR_VAR && e->u.var == u->what) || (e->kind == IR_LOAD && e->u.load.buf == u->what))
    u->found = true;
  return !u->found;
}

static bool uses_stmt_cb(void *ctx, const ir_stmt *s) {
  (void)s;
  uses_ctx *u = ctx;
  return !u->found;
}

bool ir_expr_uses_var(const ir_expr *e, const ir_var *v) {
  uses_ctx u = {v, false};
  ir_visitor vis = {.expr = uses_cb, .ctx = &u};
  ir_visit_expr(&vis, e);
  return u.found;
}

bool ir_expr_loads_buffer(const ir_expr *e, const ir_buffer *b) {
  uses_ctx u = {b, false};
  ir_visitor vis = {.expr = uses_cb, .ctx = &u};
  ir_visit_expr(&vis, e);
  return u.found;
}

bool ir_stmt_uses_var(const ir_stmt *s, const ir_var *v) {
  uses_ctx u = {v, false};
  ir_visitor vis = {.expr = uses_cb, .stmt = uses_stmt_cb, .ctx = &u};
  ir_visit_stmt(&vis, s);
  return u.found;
}

/* ---- function copy / sym binding ---- */
ir_func *ir_func_copy(ts_arena *a, const ir_func *f) {
  ir_mutator m;
  ir_mutator_init(&m, a);
  m.deep = true;
  ir_func *nf = ir_mutate_func(&m, f, NULL);
  ir_mutator_fini(&m);
  return nf;
}

ts_status ir_func_check_sizes(const ir_func *f, ts_diag *d) {
  for (int i = 0; f && i < f->nparams; i++) {
    const ir_buffer *b = f->params[i];
    uint64_t bytes = (uint64_t)ir_dtype_bytes(b->dtype);
    bool over = false;
    for (int k = 0; k < b->ndim; k++) {
      int64_t e;
      if (!ir_as_int(b->shape[k], &e)) {
        bytes = 0; /* symbolic: checked when bound */
        break;
      }
      if (e < 0)
        return ts_diag_set(d, TS_EINVAL, "function '%s': parameter '%s' has a negative extent %lld (dimension %d)",
                           f->name, b->name, (long long)e, k);
      if (e && bytes > (uint64_t)INT64_MAX / (uint64_t)e) over = true;
      else bytes *= (uint64_t)e;
    }
    if (over) {
      char shape[256];
      size_t n = 0;
      for (int k = 0; k < b->ndim && n < sizeof shape - 24; k++) {
        int64_t e = 0;
        ir_as_int(b->shape[k], &e);
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", k ? ", " : "", (long long)e);
      }
      return ts_diag_set(d, TS_EINVAL,
                         "function '%s': parameter '%s' [%s] of %d-byte elements is over 2^63 bytes (its byte count "
                         "overflows)",
                         f->name, b->name, shape, ir_dtype_bytes(b->dtype));
    }
  }
  return TS_OK;
}

ir_func *ir_func_bind_syms(ts_arena *a, const ir_func *f, int n, const char *const *names,
                           const int64_t *values, ts_diag *d) {
  ir_var_map m;
  ir_var_map_init(&m);
  for (int i = 0; i < n; i++) {
    ir_var *found = NULL;
    for (int j = 0; j < f->nsyms; j++)
      if (!strcmp(f->syms[j]->name, names[i])) found = f->syms[j];
    if (!found) {
      ts_strbuf sb;
      ts_strbuf_init(&sb);
      for (int j = 0; j < f->nsyms; j++) ts_strbuf_printf(&sb, "%s%s", j ? ", " : "", f->syms[j]->name);
      ts_diag_set(d, TS_ENOTFOUND, "function '%s' has no symbolic size '%s' (valid: %s)", f->name,
                  names[i], sb.data ? sb.data : "none");
      ts_strbuf_fini(&sb);
      ir_var_map_fini(&m);
      return NULL;
    }
    ir_expr *val = ir_int(a, found->dtype, values[i]);
    if (!val || ir_var_map_put(&m, found, val) != TS_OK) {
      ir_var_map_fini(&m);
      ts_diag_set(d, TS_ENOMEM, "out of memory binding symbolic sizes");
      return NULL;
    }
  }
  ir_mutator mu;
  ir_mutator_init(&mu, a);
  mu.deep = true;
  mu.vars = &m;
  ir_func *nf = ir_mutate_func(&mu, f, &m);
  ir_mutator_fini(&mu);
  ir_var_map_fini(&m);
  if (!nf) ts_diag_set(d, TS_ENOMEM, "out of memory binding symbolic sizes");
  if (nf && ir_func_check_sizes(nf, d)) return NULL;
  return nf;
}
