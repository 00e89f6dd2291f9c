/* arith.h — integer arithmetic analysis for index expressions: an analyzer
 * holding facts (var ∈ [min, min+extent)), constant-bound analysis, interval
 * sets, a simplifier (constant folding, canonical affine sums, floordiv and
 * floormod rules under known bounds) and a prover. The schedule primitives
 * stand on this: split/fuse simplify bindings, compute_at relaxes regions,
 * predicates are dropped only when provably true.
 *
 * Semantics: integer division in IR_DIV truncates toward zero (C); IR_FLOORDIV
 * and IR_FLOORMOD round toward −∞ (floormod has the divisor's sign). All
 * rules here are exact for those semantics; a rule that needs a side
 * condition applies only when the analyzer proves it. */
#ifndef TESSEL_IR_ARITH_H
#define TESSEL_IR_ARITH_H

#include "../ir.h"

/* Constant bounds; INT64_MIN / INT64_MAX stand for −∞ / +∞. */
typedef struct ir_const_bound {
  int64_t lo, hi;
} ir_const_bound;

typedef struct ir_analyzer {
  ts_arena *arena; /* where simplified expressions are built */
  int n, cap;
  const ir_var **vars;
  ir_const_bound *bounds; /* fact: var ∈ [lo, hi] */
  /* Symbolic form of the same fact, var ∈ [smin, smax] (inclusive), kept
   * when the bound range was not constant (i ∈ [0, N) proves i < N). Either
   * may be NULL. Parallel to vars/bounds. */
  ir_expr **smin, **smax;
} ir_analyzer;

void ir_analyzer_init(ir_analyzer *an, ts_arena *a);
void ir_analyzer_fini(ir_analyzer *an);
/* Adds (or tightens) the fact v ∈ [min, min+extent-1]. Non-constant ranges
 * are bounded through their own constant bounds. */
ts_status ir_analyzer_bind(ir_analyzer *an, const ir_var *v, const ir_expr *min,
                           const ir_expr *extent);
ts_status ir_analyzer_bind_const(ir_analyzer *an, const ir_var *v, int64_t lo, int64_t hi);
/* Pops facts back to a previous count (for scoped binding while walking). */
void ir_analyzer_truncate(ir_analyzer *an, int n);

/* Constant bounds of an integer expression under the analyzer's facts. */
ir_const_bound ir_analyzer_const_bound(const ir_analyzer *an, const ir_expr *e);

/* Simplifies an expression (integer index math and boolean conditions; float
 * math is folded only when exact-safe: constants of the same dtype). Returns
 * e itself when nothing changed. NULL only on OOM. */
ir_expr *ir_simplify(ir_analyzer *an, ir_expr *e);
/* Simplifies every expression in a statement (loop bounds, bindings,
 * predicates, indices). */
ir_stmt *ir_simplify_stmt(ir_analyzer *an, ir_stmt *s);
/* True when cond (bool) is provably true under the facts. */
bool ir_can_prove(ir_analyzer *an, const ir_expr *cond);
/* True when a == b provably. */
bool ir_can_prove_equal(ir_analyzer *an, const ir_expr *a, const ir_expr *b);

/* Folding constructors: build the node, folding constants and identities
 * (x+0, x*1, x*0, min/max of constants, ...). Used everywhere code is
 * generated so the IR stays readable. */
ir_expr *ir_add(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_sub(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_mul(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_floordiv(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_floormod(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_min(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_max(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_and(ts_arena *a, ir_expr *x, ir_expr *y);
ir_expr *ir_lt(ts_arena *a, ir_expr *x, ir_expr *y);

/* ---- interval sets -------------------------------------------------------
 * [min, max] with NULL meaning −∞ (min) / +∞ (max). empty = the Nothing set. */
typedef struct ir_intset {
  ir_expr *min, *max;
  bool empty;
} ir_intset;

typedef struct ir_dom_map { /* var -> interval, for relaxing */
  int n, cap;
  const ir_var **vars;
  ir_intset *sets;
} ir_dom_map;
void ir_dom_map_init(ir_dom_map *m);
void ir_dom_map_fini(ir_dom_map *m);
ts_status ir_dom_map_put(ir_dom_map *m, const ir_var *v, ir_intset s);
ir_intset ir_intset_range(ts_arena *a, const ir_expr *min, const ir_expr *extent);
ir_intset ir_intset_point(ir_expr *e);
ir_intset ir_intset_union(ir_analyzer *an, ir_intset x, ir_intset y);
ir_intset ir_intset_intersect(ir_analyzer *an, ir_intset x, ir_intset y);
/* Evaluates the set of values e takes when each var in dom ranges over its
 * set (vars not in dom stay symbolic). Sign-aware on endpoints. */
ir_intset ir_eval_set(ir_analyzer *an, const ir_expr *e, const ir_dom_map *dom);

/* Recomputes a block's reads/writes from its body and init, in iter vars
 * (TVM's access region detector): one region per buffer, the hull of all
 * accesses, with loops inside the block relaxed over their ranges. Buffers
 * allocated by the block itself are excluded. */
ts_status ir_block_detect_regions(ts_arena *a, ir_block *b, ts_diag *d);

#endif
