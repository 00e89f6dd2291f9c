/* sch_int.h — internals shared by the schedule primitive families: the state
 * struct, paths from the root to a node, path-copying replacement, leaf
 * removal, scope/dependency queries and small helpers. Not installed. */
#ifndef TESSEL_IR_SCHEDULE_INT_H
#define TESSEL_IR_SCHEDULE_INT_H

#include "../arith/arith.h"
#include "../mutator.h"
#include "schedule.h"

struct sch_state {
  ts_arena arena;   /* every node of the scheduled function */
  ir_func *func;    /* the function; its body is replaced by each primitive */
  ts_rng rng;
  bool debug_verify;
};

#define SCH_MAX_DEPTH 512

/* How node[i] hangs under node[i-1]. A value >= 0 is the index in a SEQ. */
enum { SCH_SLOT_BODY = -1, SCH_SLOT_INIT = -2, SCH_SLOT_ELSE = -3, SCH_SLOT_ROOT = -4 };

/* A path from the function body (node[0], the root block realize) down to
 * node[n-1]. */
typedef struct sch_path {
  int n;
  ir_stmt *node[SCH_MAX_DEPTH];
  int slot[SCH_MAX_DEPTH];
} sch_path;

/* Finds the realize of the block named name / the for of loop var v.
 * TS_ENOTFOUND (with a message naming prim) when absent. */
ts_status sch_find_block(sch_state *s, const char *name, sch_path *out, const char *prim, ts_diag *d);
ts_status sch_find_loop(sch_state *s, const ir_var *v, sch_path *out, const char *prim, ts_diag *d);

/* Replaces node[k] of the path by repl and rebuilds the ancestors node[k-1]
 * ... node[0] (copy-on-write); installs the new body in s->func. repl must
 * not be NULL. Returns TS_ENOMEM on OOM (state unchanged). */
ts_status sch_replace(sch_state *s, const sch_path *p, int k, ir_stmt *repl, ts_diag *d);

/* Puts first right before node[k] of p and second in node[k]'s place
 * (second may be node[k] itself): into the SEQ holding node[k], else as a
 * new SEQ of the two. TS_ENOMEM on OOM. Defined in rfactor.c. */
ts_status sch_insert_before(sch_state *s, const sch_path *p, int k, ir_stmt *first, ir_stmt *second,
                            ts_diag *d);

/* Removes the block realize at the end of p: climbs single-child loops to the
 * first SEQ with more than one element and deletes that element (a SEQ left
 * with one element collapses into it). Refuses (TS_ESCHEDULE) if that would
 * empty a block's body. */
ts_status sch_remove_leaf(sch_state *s, const sch_path *p, const char *prim, ts_diag *d);

/* Index in p of the nearest realize above node[k] (the scope), or -1. */
int sch_path_scope(const sch_path *p, int k);

/* The block realize statements below stmt that are children of the scope
 * (not crossing another realize), in program order, appended to out. */
ts_status sch_child_realizes(ir_stmt *stmt, ts_vec *out);
/* Quasi-affine: constants, vars, + and -, products with a constant,
 * floordiv/floormod by a positive constant, integer casts of those. */
bool sch_quasi_affine(const ir_expr *e);

/* Does the block read / write buffer buf (per its regions)? */
bool sch_block_reads(const ir_block *b, const ir_buffer *buf);
bool sch_block_writes(const ir_block *b, const ir_buffer *buf);

/* Binds every FOR on p[0..k) into the analyzer (var ∈ [min, min+extent)). */
ts_status sch_bind_path_loops(ir_analyzer *an, const sch_path *p, int k);

/* A block name not used in the function: base, base_1, base_2, ... */
const char *sch_fresh_block_name(sch_state *s, const char *base);
/* A buffer name not used by params or allocations: base, base_1, ... */
const char *sch_fresh_buffer_name(sch_state *s, const char *base);

/* Wraps a body of n statements: the statement itself for n == 1, else a SEQ. */
ir_stmt *sch_make_seq(ts_arena *a, int n, ir_stmt *const *stmts);

/* Runs sch_verify when debug verification is on; returns st unchanged when
 * st != TS_OK. Every primitive ends with `return sch_finish(s, TS_OK, d)`. */
ts_status sch_finish(sch_state *s, ts_status st, ts_diag *d);

/* The realize's block is a reduction (has init) / all iter vars are S. */
bool sch_is_reduction(const ir_block *b);
bool sch_is_complete(const ir_block *b);

/* ---- placement internals (compute_at.c, compute_inline.c; used by the
 * compute-location sampler) ------------------------------------------------ */
/* Would sch_remove_leaf succeed on the block at the end of p? */
bool sch_can_remove_leaf(const sch_path *p);
/* Does block b allocate buf? */
bool sch_block_allocates(const ir_block *b, const ir_buffer *buf);
/* The scope is a stage pipeline (no child block writes a buffer an earlier
 * child reads) and blk is the only writer of each buffer it writes.
 * TS_ESCHEDULE naming prim and blk otherwise. */
ts_status sch_check_stage_pipeline(const ir_block *scope, const ir_block *blk, const char *prim,
                                   ts_diag *d);
/* compute_at (reverse = false) or reverse_compute_at of b under loop l
 * (a real loop, not a mark). With apply = false only the checks run (the
 * state is unchanged); with apply = true the block is moved, without the
 * final sch_finish. */
ts_status sch_compute_at_check(sch_state *s, sch_block b, sch_loop l, bool reverse,
                               bool preserve_unit_loops, int index, bool apply, ts_diag *d);
/* The checks of compute_inline only; the state is unchanged. */
ts_status sch_compute_inline_check(sch_state *s, sch_block b, ts_diag *d);

/* from -> to keeps every value: an 8-bit integer into a 16- or 32-bit one
 * (i8 into a signed one, u8 into either); scalars. (layout.c: the packed
 * dtype of TransformLayout, cache.c: SetDType) */
bool sch_dtype_widens(ir_dtype from, ir_dtype to);

#endif
