/* ir.c — the IR's constructors, dtype table, module container, generic
 * visitor, variable/buffer substitution (with structural sharing: an
 * unchanged subtree is returned as is), shallow clones for copy-on-write
 * rewrites, and deep copy of a function into another arena. */
#include "ir.h"
#include "graph/graph.h"

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
    if (m->funcs[i].kind == IR_MOD_GRAPH) tg_graph_free(m->funcs[i].u.graph); /* its heap tables */
  ts_arena_free(m->arena);
  ts_free(m->funcs);
  ts_free(m);
}

ts_status ir_module_add(ir_module *m, ir_func *f) {
  if (m->nfuncs == m->capfuncs) {
    int cap = m->capfuncs ? m->capfuncs * 2 : 4;
    ir_module_entry *p = ts_realloc(m->funcs, (size_t)cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    m->funcs = p;
    m->capfuncs = cap;
  }
  m->funcs[m->nfuncs++] = (ir_module_entry){.name = f->name, .kind = IR_MOD_PRIM, .u.prim = f};
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
ir_expr *ir_expr_clone(ts_arena *a, const ir_expr *e) { return ts_arena_memdup(a, e, sizeof *e); }

bool ir_as_int(const ir_expr *e, int64_t *out) {
  if (!e || e->kind != IR_INT_IMM) return false;
  if (out) *out = e->u.ival;
  return true;
}

int64_t ir_buffer_const_size(const ir_buffer *b) {
  int64_t n = 1;
  for (int i = 0; i < b->ndim; i++) {
    int64_t v;
    if (!ir_as_int(b->shape[i], &v) || v < 0) return -1;
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

/* ---- generic rewriter ----
 * One mutator serves variable substitution, buffer substitution and deep
 * copy. A NULL result means OOM; unchanged subtrees are returned as is,
 * except in deep-copy mode where every node is fresh. */
typedef struct rewriter {
  ts_arena *a;
  const ir_var_map *vmap;   /* var -> expr */
  ir_buffer *from, *to;     /* buffer substitution */
  bool deep;                /* deep copy: new vars/buffers at definitions */
  ir_var_map defs;          /* deep: old var -> new var ref */
  ts_vec bufs_old, bufs_new;
  bool oom;
} rewriter;

static ir_expr *rw_expr(rewriter *r, ir_expr *e);
static ir_stmt *rw_stmt(rewriter *r, ir_stmt *s);

static ir_var *rw_def_var(rewriter *r, ir_var *v) {
  if (!r->deep || !v) return v;
  ir_var *nv = ir_var_new(r->a, v->name, v->dtype);
  ir_expr *ref = ir_var_ref(r->a, nv);
  if (!nv || !ref || ir_var_map_put(&r->defs, v, ref) != TS_OK) {
    r->oom = true;
    return v;
  }
  return nv;
}

static ir_buffer *rw_buf(rewriter *r, ir_buffer *b) {
  if (!b) return b;
  if (b == r->from) return r->to;
  for (size_t i = 0; i < r->bufs_old.len; i++)
      if (r->bufs_old.items[i] == b) return r->bufs_new.items[i];
  return b;
}

static ir_expr **rw_exprs(rewriter *r, int n, ir_expr **src, bool *changed) {
  ir_expr **out = src;
  for (int i = 0; i < n; i++) {
    ir_expr *ne = rw_expr(r, src[i]);
    if (ne != src[i] && out == src) {
      out = TS_ANEWN(r->a, ir_expr *, n);
      if (!out) {
        r->oom = true;
        return src;
      }
      memcpy(out, src, sizeof(ir_expr *) * (size_t)n);
    }
    out[i] = ne;
  }
  if (out != src) *changed = true;
  return out;
}

/* Defines a fresh copy of buffer b (deep mode): shape/strides rewritten. */
static ir_buffer *rw_def_buf(rewriter *r, ir_buffer *b) {
  if (b == r->from) return r->to; /* buffer substitution covers allocations too */
  if (!r->deep) {
    /* substitution inside shapes (e.g. bound syms) */
    bool ch = false;
    ir_expr **shape = rw_exprs(r, b->ndim, b->shape, &ch);
    ir_expr **strides = b->strides ? rw_exprs(r, b->ndim, b->strides, &ch) : NULL;
    ir_expr *off = b->elem_offset ? rw_expr(r, b->elem_offset) : NULL;
    if (off != b->elem_offset) ch = true;
    if (!ch) return b;
    ir_buffer *nb = ts_arena_memdup(r->a, b, sizeof *b);
    if (!nb) {
      r->oom = true;
      return b;
    }
    nb->shape = shape;
    nb->strides = strides;
    nb->elem_offset = off;
    if (ts_vec_push(&r->bufs_old, b) || ts_vec_push(&r->bufs_new, nb)) r->oom = true;
    return nb;
  }
  ir_buffer *nb = ts_arena_memdup(r->a, b, sizeof *b);
  if (!nb) {
    r->oom = true;
    return b;
  }
  bool ch = false;
  nb->name = ts_arena_strdup(r->a, b->name);
  nb->scope = ts_arena_strdup(r->a, b->scope);
  nb->shape = b->ndim ? TS_ANEWN(r->a, ir_expr *, b->ndim) : NULL;
  if (b->ndim && !nb->shape) {
    r->oom = true;
    return b;
  }
  for (int i = 0; i < b->ndim; i++) nb->shape[i] = rw_expr(r, b->shape[i]);
  if (b->strides) nb->strides = rw_exprs(r, b->ndim, b->strides, &ch);
  if (b->elem_offset) nb->elem_offset = rw_expr(r, b->elem_offset);
  if (b->align_factor) {
    nb->align_factor = ts_arena_memdup(r->a, b->align_factor, sizeof(int64_t) * (size_t)b->ndim);
    nb->align_offset = ts_arena_memdup(r->a, b->align_offset, sizeof(int64_t) * (size_t)b->ndim);
  }
  nb->id = atomic_fetch_add(&next_id, 1);
  if (ts_vec_push(&r->bufs_old, b) || ts_vec_push(&r->bufs_new, nb)) r->oom = true;
  return nb;
}

static ir_expr *rw_expr(rewriter *r, ir_expr *e) {
  if (!e || r->oom) return e;
  ir_expr *n = NULL;
  bool ch = r->deep;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
    return r->deep ? ir_expr_clone(r->a, e) : e;
  case IR_VAR: {
    ir_expr *m = r->vmap ? ir_var_map_get(r->vmap, e->u.var) : NULL;
    if (!m && r->deep) m = ir_var_map_get(&r->defs, e->u.var);
    return m ? m : e;
  }
  case IR_NOT: {
    ir_expr *x = rw_expr(r, e->u.un.a);
    if (x == e->u.un.a && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.un.a = x;
    break;
  }
  case IR_SELECT: {
    ir_expr *c = rw_expr(r, e->u.sel.cond), *t = rw_expr(r, e->u.sel.t), *f = rw_expr(r, e->u.sel.f);
    if (c == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) {
      n->u.sel.cond = c;
      n->u.sel.t = t;
      n->u.sel.f = f;
    }
    break;
  }
  case IR_CAST: {
    ir_expr *x = rw_expr(r, e->u.cast.value);
    if (x == e->u.cast.value && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.cast.value = x;
    break;
  }
  case IR_CALL: {
    ir_expr **args = rw_exprs(r, e->u.call.nargs, e->u.call.args, &ch);
    if (!ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.call.args = args;
    break;
  }
  case IR_LOAD: {
    ir_buffer *b = rw_buf(r, e->u.load.buf);
    if (b != e->u.load.buf) ch = true;
    ir_expr **idx = rw_exprs(r, e->u.load.nidx, e->u.load.idx, &ch);
    if (!ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) {
      n->u.load.buf = b;
      n->u.load.idx = idx;
    }
    break;
  }
  case IR_RAMP: {
    ir_expr *b = rw_expr(r, e->u.ramp.base), *s = rw_expr(r, e->u.ramp.stride);
    if (b == e->u.ramp.base && s == e->u.ramp.stride && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) {
      n->u.ramp.base = b;
      n->u.ramp.stride = s;
    }
    break;
  }
  case IR_BROADCAST: {
    ir_expr *x = rw_expr(r, e->u.bcast.value);
    if (x == e->u.bcast.value && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.bcast.value = x;
    break;
  }
  case IR_CALL_EXTERN: {
    ir_expr **args = rw_exprs(r, e->u.ext.nargs, e->u.ext.args, &ch);
    if (!ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.ext.args = args;
    if (n && r->deep && !(n->u.ext.name = ts_arena_strdup(r->a, e->u.ext.name))) n = NULL;
    break;
  }
  case IR_ACCESS_PTR: {
    ir_buffer *b = rw_buf(r, e->u.ptr.buf);
    ir_expr *off = rw_expr(r, e->u.ptr.offset);
    if (b == e->u.ptr.buf && off == e->u.ptr.offset && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) {
      n->u.ptr.buf = b;
      n->u.ptr.offset = off;
    }
    break;
  }
  case IR_REINTERPRET: {
    ir_expr *x = rw_expr(r, e->u.cast.value);
    if (x == e->u.cast.value && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) n->u.cast.value = x;
    break;
  }
  case IR_STR_IMM:
    if (!r->deep) return e;
    n = ir_str(r->a, e->u.sval);
    break;
  default: {
    if (!ir_is_binop(e->kind)) return e;
    ir_expr *x = rw_expr(r, e->u.bin.a), *y = rw_expr(r, e->u.bin.b);
    if (x == e->u.bin.a && y == e->u.bin.b && !ch) return e;
    n = ir_expr_clone(r->a, e);
    if (n) {
      n->u.bin.a = x;
      n->u.bin.b = y;
    }
    break;
  }
  }
  if (!n) {
    r->oom = true;
    return e;
  }
  return n;
}

static ir_region *rw_regions(rewriter *r, int n, ir_region *src, bool *changed) {
  if (n == 0) return src;
  ir_region *out = TS_ANEWN(r->a, ir_region, n);
  if (!out) {
    r->oom = true;
    return src;
  }
  bool ch = r->deep;
  for (int i = 0; i < n; i++) {
    out[i] = src[i];
    out[i].buf = rw_buf(r, src[i].buf);
    if (out[i].buf != src[i].buf) ch = true;
    out[i].ranges = TS_ANEWN(r->a, ir_range, src[i].ndim > 0 ? src[i].ndim : 1);
    if (!out[i].ranges) {
      r->oom = true;
      return src;
    }
    for (int j = 0; j < src[i].ndim; j++) {
      out[i].ranges[j].min = rw_expr(r, src[i].ranges[j].min);
      out[i].ranges[j].extent = rw_expr(r, src[i].ranges[j].extent);
      if (out[i].ranges[j].min != src[i].ranges[j].min ||
          out[i].ranges[j].extent != src[i].ranges[j].extent)
        ch = true;
    }
  }
  if (!ch) return src;
  *changed = true;
  return out;
}

static ir_annot *rw_annots(rewriter *r, int n, ir_annot *src, bool *changed) {
  ir_annot *out = src;
  if (r->deep && n > 0) { /* a deep copy owns its annotations: array, keys and strings */
    out = ts_arena_memdup(r->a, src, sizeof *src * (size_t)n);
    if (!out) {
      r->oom = true;
      return src;
    }
    for (int i = 0; i < n; i++) {
      if (src[i].key && !(out[i].key = ts_arena_strdup(r->a, src[i].key))) r->oom = true;
      if (src[i].kind == IR_ANN_STR && src[i].v.s && !(out[i].v.s = ts_arena_strdup(r->a, src[i].v.s))) r->oom = true;
    }
  }
  for (int i = 0; i < n; i++) {
    if (src[i].kind != IR_ANN_EXPR) continue;
    ir_expr *ne = rw_expr(r, src[i].v.e);
    if (ne == src[i].v.e) continue;
    if (out == src) {
      out = ts_arena_memdup(r->a, src, sizeof *src * (size_t)n);
      if (!out) {
        r->oom = true;
        return src;
      }
    }
    out[i].v.e = ne;
  }
  if (out != src) *changed = true;
  return out;
}

static ir_block *rw_block(rewriter *r, ir_block *b, bool *changed) {
  bool ch = r->deep;
  ir_block *nb = ir_block_clone(r->a, b);
  if (!nb) {
    r->oom = true;
    return b;
  }
  if (b->nalloc) {
    nb->allocs = TS_ANEWN(r->a, ir_buffer *, b->nalloc);
    if (!nb->allocs) {
      r->oom = true;
      return b;
    }
    for (int i = 0; i < b->nalloc; i++) {
      nb->allocs[i] = rw_def_buf(r, b->allocs[i]);
      if (nb->allocs[i] != b->allocs[i]) ch = true;
    }
  }
  if (b->niter) {
    nb->iters = TS_ANEWN(r->a, ir_iter_var, b->niter);
    if (!nb->iters) {
      r->oom = true;
      return b;
    }
    for (int i = 0; i < b->niter; i++) {
      nb->iters[i] = b->iters[i];
      nb->iters[i].dom.min = rw_expr(r, b->iters[i].dom.min);
      nb->iters[i].dom.extent = rw_expr(r, b->iters[i].dom.extent);
      nb->iters[i].var = rw_def_var(r, b->iters[i].var);
      if (nb->iters[i].dom.min != b->iters[i].dom.min ||
          nb->iters[i].dom.extent != b->iters[i].dom.extent)
        ch = true;
    }
  }
  nb->reads = rw_regions(r, b->nreads, b->reads, &ch);
  nb->writes = rw_regions(r, b->nwrites, b->writes, &ch);
  nb->annots = rw_annots(r, b->nannot, b->annots, &ch);
  nb->init = b->init ? rw_stmt(r, b->init) : NULL;
  nb->body = rw_stmt(r, b->body);
  if (nb->init != b->init || nb->body != b->body) ch = true;
  if (r->deep) nb->name = ts_arena_strdup(r->a, b->name);
  if (!ch) return b;
  *changed = true;
  return nb;
}

static ir_stmt *rw_stmt(rewriter *r, ir_stmt *s) {
  if (!s || r->oom) return s;
  bool ch = r->deep;
  ir_stmt *n = NULL;
  switch (s->kind) {
  case IR_FOR: {
    ir_expr *mn = rw_expr(r, s->u.loop.min), *ex = rw_expr(r, s->u.loop.extent);
    ir_var *v = rw_def_var(r, s->u.loop.var);
    ir_annot *ann = rw_annots(r, s->u.loop.nannot, s->u.loop.annots, &ch);
    ir_stmt *body = rw_stmt(r, s->u.loop.body);
    if (mn == s->u.loop.min && ex == s->u.loop.extent && body == s->u.loop.body && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.loop.min = mn;
      n->u.loop.extent = ex;
      n->u.loop.var = v;
      n->u.loop.annots = ann;
      n->u.loop.body = body;
    }
    break;
  }
  case IR_BLOCK_REALIZE: {
    ir_block *b = s->u.realize.block;
    ir_expr **iv = rw_exprs(r, b->niter, s->u.realize.iter_values, &ch);
    ir_expr *pred = rw_expr(r, s->u.realize.predicate);
    if (pred != s->u.realize.predicate) ch = true;
    ir_block *nb = rw_block(r, b, &ch);
    if (!ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.realize.iter_values = iv;
      n->u.realize.predicate = pred;
      n->u.realize.block = nb;
    }
    break;
  }
  case IR_SEQ: {
    ir_stmt **out = s->u.seq.stmts;
    for (int i = 0; i < s->u.seq.n; i++) {
      ir_stmt *x = rw_stmt(r, s->u.seq.stmts[i]);
      if ((x != s->u.seq.stmts[i] || r->deep) && out == s->u.seq.stmts) {
        out = TS_ANEWN(r->a, ir_stmt *, s->u.seq.n);
        if (!out) {
          r->oom = true;
          return s;
        }
        memcpy(out, s->u.seq.stmts, sizeof(ir_stmt *) * (size_t)s->u.seq.n);
      }
      out[i] = x;
    }
    if (out == s->u.seq.stmts && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) n->u.seq.stmts = out;
    break;
  }
  case IR_IF: {
    ir_expr *c = rw_expr(r, s->u.ifs.cond);
    ir_stmt *t = rw_stmt(r, s->u.ifs.then_s), *e = rw_stmt(r, s->u.ifs.else_s);
    if (c == s->u.ifs.cond && t == s->u.ifs.then_s && e == s->u.ifs.else_s && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.ifs.cond = c;
      n->u.ifs.then_s = t;
      n->u.ifs.else_s = e;
    }
    break;
  }
  case IR_LET: {
    ir_expr *v = rw_expr(r, s->u.let.value);
    ir_var *var = rw_def_var(r, s->u.let.var);
    ir_stmt *body = rw_stmt(r, s->u.let.body);
    if (v == s->u.let.value && body == s->u.let.body && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.let.value = v;
      n->u.let.var = var;
      n->u.let.body = body;
    }
    break;
  }
  case IR_ALLOCATE: {
    ir_buffer *b = rw_def_buf(r, s->u.alloc.buf);
    ir_stmt *body = rw_stmt(r, s->u.alloc.body);
    if (b == s->u.alloc.buf && body == s->u.alloc.body && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.alloc.buf = b;
      n->u.alloc.body = body;
    }
    break;
  }
  case IR_EVALUATE: {
    ir_expr *v = rw_expr(r, s->u.eval.value);
    if (v == s->u.eval.value && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) n->u.eval.value = v;
    break;
  }
  case IR_STORE: {
    ir_buffer *b = rw_buf(r, s->u.store.buf);
    if (b != s->u.store.buf) ch = true;
    ir_expr **idx = rw_exprs(r, s->u.store.nidx, s->u.store.idx, &ch);
    ir_expr *v = rw_expr(r, s->u.store.value);
    ir_expr *p = rw_expr(r, s->u.store.predicate);
    if (v == s->u.store.value && p == s->u.store.predicate && !ch) return s;
    n = ir_stmt_clone(r->a, s);
    if (n) {
      n->u.store.buf = b;
      n->u.store.idx = idx;
      n->u.store.value = v;
      n->u.store.predicate = p;
    }
    break;
  }
  default:
    return s;
  }
  if (!n) {
    r->oom = true;
    return s;
  }
  return n;
}

static void rw_init(rewriter *r, ts_arena *a) {
  memset(r, 0, sizeof *r);
  r->a = a;
  ir_var_map_init(&r->defs);
  ts_vec_init(&r->bufs_old);
  ts_vec_init(&r->bufs_new);
}

static void rw_fini(rewriter *r) {
  ir_var_map_fini(&r->defs);
  ts_vec_fini(&r->bufs_old);
  ts_vec_fini(&r->bufs_new);
}

ir_expr *ir_subst_expr(ts_arena *a, ir_expr *e, const ir_var_map *m) {
  rewriter r;
  rw_init(&r, a);
  r.vmap = m;
  ir_expr *out = rw_expr(&r, e);
  bool oom = r.oom;
  rw_fini(&r);
  return oom ? NULL : out;
}

ir_stmt *ir_subst_stmt(ts_arena *a, ir_stmt *s, const ir_var_map *m) {
  rewriter r;
  rw_init(&r, a);
  r.vmap = m;
  ir_stmt *out = rw_stmt(&r, s);
  bool oom = r.oom;
  rw_fini(&r);
  return oom ? NULL : out;
}

ir_stmt *ir_subst_buffer(ts_arena *a, ir_stmt *s, ir_buffer *from, ir_buffer *to) {
  rewriter r;
  rw_init(&r, a);
  r.from = from;
  r.to = to;
  ir_stmt *out = rw_stmt(&r, s);
  bool oom = r.oom;
  rw_fini(&r);
  return oom ? NULL : out;
}

typedef struct uses_ctx {
  const ir_var *v;
  bool found;
} uses_ctx;

static bool uses_cb(void *ctx, const ir_expr *e) {
  uses_ctx *u = ctx;
  if (u->found) return false;
  if (e->kind == IR_VAR && e->u.var == u->v) u->found = true;
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

bool ir_stmt_uses_var(const ir_stmt *s, const ir_var *v) {
  uses_ctx u = {v, false};
  ir_visitor vis = {.expr = uses_cb, .stmt = uses_stmt_cb, .ctx = &u};
  ir_visit_stmt(&vis, s);
  return u.found;
}

/* ---- function copy / sym binding ---- */
static ir_func *copy_func(rewriter *r, const ir_func *f, const ir_var_map *bind) {
  ir_func *nf = ir_func_new(r->a, f->name);
  if (!nf) return NULL;
  nf->ninputs = f->ninputs;
  /* syms first (they appear in shapes) */
  int nsyms = 0;
  ir_var **syms = f->nsyms ? TS_ANEWN(r->a, ir_var *, f->nsyms) : NULL;
  if (f->nsyms && !syms) return NULL;
  for (int i = 0; i < f->nsyms; i++) {
    if (bind && ir_var_map_get(bind, f->syms[i])) continue;
    syms[nsyms++] = rw_def_var(r, f->syms[i]);
  }
  nf->nsyms = nsyms;
  nf->syms = syms;
  nf->nparams = f->nparams;
  nf->params = f->nparams ? TS_ANEWN(r->a, ir_buffer *, f->nparams) : NULL;
  if (f->nparams && !nf->params) return NULL;
  for (int i = 0; i < f->nparams; i++) nf->params[i] = rw_def_buf(r, f->params[i]);
  bool ch = false;
  nf->annots = rw_annots(r, f->nannot, f->annots, &ch);
  nf->nannot = f->nannot;
  nf->body = rw_stmt(r, f->body);
  return r->oom ? NULL : nf;
}

ir_func *ir_func_copy(ts_arena *a, const ir_func *f) {
  rewriter r;
  rw_init(&r, a);
  r.deep = true;
  ir_func *nf = copy_func(&r, f, NULL);
  rw_fini(&r);
  return nf;
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
  rewriter r;
  rw_init(&r, a);
  r.deep = true;
  r.vmap = &m;
  ir_func *nf = copy_func(&r, f, &m);
  rw_fini(&r);
  ir_var_map_fini(&m);
  if (!nf) ts_diag_set(d, TS_ENOMEM, "out of memory binding symbolic sizes");
  return nf;
}
