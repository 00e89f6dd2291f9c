/* parse_int.h — what the two front-ends of parse.c share (docs/SCRIPT.md):
 * the parser state P, token and error helpers that unwind with longjmp, and
 * the expression grammar. parse_kernel.c reads the compute DSL, parse_func.c
 * the loop-IR script; parse.c holds the shared part and the entry points.
 * Internal to ir/: the ps_ names are not part of the IR API. */
#ifndef TESSEL_IR_PARSE_INT_H
#define TESSEL_IR_PARSE_INT_H

#include <setjmp.h>
#include <stdarg.h>

#include "lex.h"
#include "parse.h"

#define MAX_DEPTH 256   /* nesting of parentheses / unary ops / statements */
#define MAX_HEIGHT 1024 /* height of one expression tree */

/* ---- parser state ---------------------------------------------------------- */

enum { E_VAR, E_BUF };
typedef struct ent {
  const char *name;
  int kind;
  void *ptr;
} ent;

/* What identifiers may mean while parsing an expression. */
typedef enum {
  M_SCRIPT, /* names resolve through the scope stack */
  M_SHAPE,  /* DSL shape: literals and syms; a new name becomes a sym */
  M_RANGE,  /* DSL for-range bound: literals and existing syms */
  M_BODY,   /* DSL right-hand side: tensors, syms, index vars (new ones are reduction vars) */
} pmode;

enum { R_IN, R_OUT, R_TMP };
typedef struct ktensor {
  const char *name;
  ir_buffer *buf; /* NULL for an intermediate whose shape is not yet inferred */
  int role;
  bool written;
  const ir_token *decl;
} ktensor;

typedef struct kvar { /* a DSL index variable of the current statement */
  const char *name;
  const ir_token *tok;
  ir_var *iv, *lv;  /* iter var (vi) used in the block; loop var (i) */
  int lhs_dim;      /* -1 for reduction vars */
  ir_expr *min, *ext;
  bool ranged, from_for;
  ir_expr *bare_ext; /* extent of the first dimension it indexes bare */
} kvar;

typedef struct bare {
  int var;
  ir_expr *ext;
  const ir_token *tok;
  ir_buffer *buf;
  int dim;
} bare;

typedef struct P {
  ts_arena *a;
  ir_lexer lx;
  ir_token *t;
  int nt, i;
  ts_diag *d;
  jmp_buf jb;
  int depth;
  bool dsl;
  pmode m;
  char desc[80];
  /* script scope stack (innermost last) */
  ent *sc;
  int nsc, capsc;
  /* DSL kernel state */
  ktensor *kts;
  int nkt, capkt;
  ir_var **syms;
  int nsyms, capsyms;
  kvar *kvs;
  int nkv, capkv;
  bare *bares;
  int nbare, capbare;
  /* results */
  ir_module *mod;
  ir_func *first;
  int nfuncs;
} P;

/* An expression under construction: lit marks a DSL literal-only subtree
 * whose dtype is not yet fixed (it adopts the other operand's). */
typedef struct pv {
  ir_expr *e;
  bool lit;
  int h;
} pv;

#define CK(x) ((__typeof__(x))ps_chk(p, (x)))

#define PUSH(arr, n, cap, val)                                   \
  do {                                                           \
    (arr) = ps_grow(p, (arr), (n), &(cap), sizeof *(arr));          \
    (arr)[(n)++] = (val);                                        \
  } while (0)

/* Shared helpers (parse.c) and each front-end's entry (parse_kernel.c, parse_func.c). */
_Noreturn void ps_fail(P *p, const ir_token *t, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
_Noreturn void ps_oom(P *p);
void *ps_chk(P *p, void *x);
void *ps_grow(P *p, void *arr, int n, int *cap, size_t sz);
const ir_token *ps_cur(P *p);
const ir_token *ps_peekn(P *p, int k);
const ir_token *ps_next(P *p);
bool ps_tis(P *p, const ir_token *t, const char *s);
bool ps_is(P *p, const char *s);
bool ps_accept(P *p, const char *s);
const char *ps_describe(P *p, const ir_token *t);
const ir_token *ps_expect(P *p, const char *s);
const ir_token *ps_expect_ident(P *p, const char *what);
const char *ps_tname(P *p, const ir_token *t);
bool ps_teq(P *p, const ir_token *t, const char *name);
const char *ps_dts(ir_dtype t, char *buf);
bool ps_tok_dtype(P *p, const ir_token *t, ir_dtype *out);
ir_dtype ps_expect_dtype(P *p);
ir_expr *ps_fold_add(P *p, ir_expr *x, ir_expr *y);
ir_expr *ps_fold_sub(P *p, ir_expr *x, ir_expr *y);
ir_expr *ps_fold_const(P *p, ir_expr *e);
bool ps_same_expr(const ir_expr *x, const ir_expr *y);
ir_expr *ps_retype(P *p, const ir_token *t, ir_expr *e, ir_dtype dt);
void ps_need_bool(P *p, const ir_token *t, pv x, const char *what);
void ps_need_int(P *p, const ir_token *t, pv x, const char *what);
pv ps_parse_number(P *p, bool neg);
int ps_parse_args(P *p, const char *close, pv **out);
ir_expr **ps_exprs_of(P *p, pv *v, int n, int *h);
ent *ps_scope_find(P *p, const ir_token *t, int kind);
void ps_scope_push(P *p, const char *name, int kind, void *ptr);
ktensor *ps_ktensor_find(P *p, const ir_token *t);
ir_var *ps_ksym_find(P *p, const ir_token *t);
int ps_kvar_find(P *p, const ir_token *t);
bool ps_is_func_name(P *p, const ir_token *t);
int ps_kvar_new(P *p, const ir_token *t, int lhs_dim);
void ps_enter(P *p);
pv ps_parse_expr(P *p);
/* `[i, j, ...]` after tensor t (b; NULL: unknown, an error): exactly b->ndim
 * indices into *a (not yet checked to be integers). Returns their count. */
int ps_parse_indices(P *p, const ir_token *t, const ir_buffer *b, pv **a);
ir_expr *ps_parse_int_expr(P *p, const char *what);
void ps_parse_annots(P *p, int *n, ir_annot **out);
ir_stmt *ps_mk_body(P *p, ir_stmt **v, int n);
ir_func *ps_parse_kernel(P *p);
ir_func *ps_parse_func(P *p);

#endif
