/* irb.c — see irb.h. */
#include "irb.h"

#include <stdarg.h>

ts_arena *A;

void setup(void) { A = ts_arena_new(); }
void teardown(void) { ts_arena_free(A); }

ir_expr *I(int64_t v) { return ir_i64(A, v); }
ir_expr *F(double v) { return ir_float(A, ir_dt(IR_F32), v); }
ir_expr *V(ir_var *v) { return ir_var_ref(A, v); }
ir_expr *B2(ir_expr_kind k, ir_expr *x, ir_expr *y) { return ir_binop(A, k, x, y); }
ir_var *VAR(const char *n) { return ir_var_new(A, n, ir_dt(IR_I64)); }

static ir_expr **exprs(int n, va_list ap) {
  ir_expr **e = TS_ANEWN(A, ir_expr *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) e[i] = va_arg(ap, ir_expr *);
  return e;
}

ir_buffer *BUF(const char *name, ir_dtype t, int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_expr **sh = exprs(n, ap);
  va_end(ap);
  return ir_buffer_new(A, name, t, n, sh, NULL);
}

ir_expr *LD(ir_buffer *b, int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_expr **ix = exprs(n, ap);
  va_end(ap);
  return ir_load(A, b, n, ix);
}

ir_stmt *ST(ir_buffer *b, ir_expr *val, int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_expr **ix = exprs(n, ap);
  va_end(ap);
  return ir_store(A, b, n, ix, val);
}

ir_stmt *SEQ(int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_stmt **s = TS_ANEWN(A, ir_stmt *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) s[i] = va_arg(ap, ir_stmt *);
  va_end(ap);
  return ir_seq(A, n, s);
}

/* A region with extent-1 ranges at the given mins. */
ir_region REG(ir_buffer *b, int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_region r = {b, n, TS_ANEWN(A, ir_range, n > 0 ? n : 1)};
  for (int i = 0; i < n; i++) r.ranges[i] = (ir_range){va_arg(ap, ir_expr *), I(1)};
  va_end(ap);
  return r;
}

ir_stmt *FOR(ir_var *v, ir_expr *ext, ir_for_kind k, ir_stmt *body) {
  return ir_for(A, v, I(0), ext, k, body);
}

ir_stmt *root_block(ir_stmt *body) {
  ir_block *b = ir_block_new(A, "root");
  b->body = body;
  return ir_realize(A, b, NULL, NULL);
}

ir_func *func_of(const char *name, int nin, int nout, ir_buffer **bufs, ir_stmt *body) {
  ir_func *f = ir_func_new(A, name);
  f->nparams = nin + nout;
  f->ninputs = nin;
  f->params = bufs;
  f->body = body;
  return f;
}

