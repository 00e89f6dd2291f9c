/* legalize_int.h — the kernel text builder shared by legalize.c (the pass,
 * building the PrimFunc) and the operator family files op_*.c that hold each
 * operator's emitter: a fixed text buffer (tb), literals, indexed loads
 * with broadcasting, reduction clauses. Emitters write compute-DSL
 * statements (docs/SCRIPT.md) into an lg_kernel. Not installed; nothing
 * outside ir/graph includes it. docs/PASSES.md. */
#ifndef TESSEL_IR_GRAPH_LEGALIZE_INT_H
#define TESSEL_IR_GRAPH_LEGALIZE_INT_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes_int.h"

typedef struct tb {
  char s[16384];
  size_t n;
  bool over;
} tb;

static inline void tb_reset(tb *b) {
  b->n = 0;
  b->s[0] = '\0';
  b->over = false;
}

static inline const char *dtn(ir_dtype t) { return ir_dtype_code_name((ir_dtype_code)t.code); }

static inline bool dim_is(tg_dim d, int64_t v) { return d.sym == NULL && d.value == v; }

/* A float literal the DSL reads back as that float (adopts the other operand's dtype). */
static inline const char *flit(double v, char buf[48]) {
  if (isnan(v)) return strcpy(buf, "nan");
  if (isinf(v)) return strcpy(buf, v < 0 ? "-inf" : "inf");
  snprintf(buf, 48, "%.9g", v);
  if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
  return buf;
}

/* A literal for dtype t: float text for float dtypes, an integer otherwise. */
static inline const char *lit(ir_dtype t, double v, char buf[48]) {
  if (ir_dtype_is_float(t)) return flit(v, buf);
  snprintf(buf, 48, "%" PRId64, (int64_t)v);
  return buf;
}

static inline const tg_value *V(const lg_kernel *k, int vid) { return k->g->values[vid]; }

#define OUTV(i) V(k, n->outputs[(i)])

static inline int lg_axis(int64_t a, int r) { return (int)(a < 0 ? a + r : a); }

/* Appends printf text to b (sets b->over when it does not fit). */
__attribute__((format(printf, 2, 3))) void tb_printf(tb *b, const char *fmt, ...);
/* A dim as DSL text (the number, or the symbol's DSL name): into b, or into buf. */
void lg_dim_txt(lg_kernel *k, tg_dim d, tb *b);
const char *lg_dim_s(lg_kernel *k, tg_dim d, char buf[48]);
/* Records the first error of kernel k, naming node n. */
void lg_fail(lg_kernel *k, ts_status st, const tg_node *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "name[i0, i1, ...]" over rank r output axes. */
void lg_lhs(tb *b, const char *name, int r);
/* A load of value vid (named name) broadcast against an output of rank r with dims od. */
void lg_load_bcast(lg_kernel *k, tb *b, const char *name, int vid, int r, const tg_dim *od);
/* Appends b as one statement of the kernel body. */
void lg_stmt(lg_kernel *k, tb *b);
/* "name: dtype[dims]" into sb. */
void lg_decl(lg_kernel *k, ts_strbuf *sb, const char *name, ir_dtype dt, int nd, const tg_dim *dims);
/* Declares an intermediate tensor with the given dtype and dims. */
void lg_let_dims(lg_kernel *k, const char *name, ir_dtype dt, int nd, const tg_dim *dims);
/* A one-element constant as a double. */
bool lg_const_scalar(const tg_value *v, double *out);
/* Reductions over the axes red[] of value x (kept indices are i<axis>,
 * reduced ones r<j>): the indexed load, the kept-axes store, the for
 * clause, the kept dims, the reduced element count, a temporary's name
 * ("<o>_<tag>"), and a whole "DST[kept] OP SRC[...] for r.." statement. */
void lg_red_index(tb *b, const char *name, int r, const bool *red);
void lg_kept_index(tb *b, const char *name, int r, const bool *red);
void lg_red_for(lg_kernel *k, tb *b, const tg_value *x, const bool *red);
int lg_kept_dims(const tg_value *x, const bool *red, tg_dim *out);
void lg_red_count(lg_kernel *k, tb *b, const tg_value *x, const bool *red, ir_dtype dt);
void lg_tmpname(char *buf, size_t n, const char *o, const char *tag);
void lg_reduce_stmt(lg_kernel *k, const char *dst, const char *op, const char *src, const tg_value *x,
                    const bool *red);

#endif
