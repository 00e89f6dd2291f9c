/* irb.h — the small IR builders the ir/ tests share (print, struct,
 * round trip): one arena A per test (setup/teardown as Check fixtures), and
 * one-line constructors for literals, vars, buffers, loads, stores, loops,
 * sequences, regions, the root block and functions. */
#ifndef TESSEL_TESTS_IR_IRB_H
#define TESSEL_TESTS_IR_IRB_H

#include "ir/ir.h"

extern ts_arena *A;

void setup(void);
void teardown(void);
ir_expr *I(int64_t v);
ir_expr *F(double v);
ir_expr *V(ir_var *v);
ir_expr *B2(ir_expr_kind k, ir_expr *x, ir_expr *y);
ir_var *VAR(const char *n);
ir_buffer *BUF(const char *name, ir_dtype t, int n, ...);
ir_expr *LD(ir_buffer *b, int n, ...);
ir_stmt *ST(ir_buffer *b, ir_expr *val, int n, ...);
ir_stmt *SEQ(int n, ...);
/* A region with extent-1 ranges at the given mins. */
ir_region REG(ir_buffer *b, int n, ...);
ir_stmt *FOR(ir_var *v, ir_expr *ext, ir_for_kind k, ir_stmt *body);
ir_stmt *root_block(ir_stmt *body);
ir_func *func_of(const char *name, int nin, int nout, ir_buffer **bufs, ir_stmt *body);

#endif
