/* lower_int.h — internals shared by the lowering files (lower.c: blocks,
 * buffers, cg_lower and cg_check; lower_vec.c: vectorized loops to lanes;
 * lower_part.c: guarded tails partitioned off).
 * Not part of codegen's public contract. */
#ifndef TESSEL_CODEGEN_LOWER_INT_H
#define TESSEL_CODEGEN_LOWER_INT_H

#include "codegen/codegen.h"
#include "ir/arith/arith.h"
#include "ir/mutator.h"
#include "ir/struct.h"

/* Most lanes a vectorized loop may become (cg_check refuses more). */
#define CG_MAX_LANES 64

/* Tries to turn `loop` (an already lowered IR_FOR of kind vectorized: flat
 * buffers, no blocks) into straight-line lane code. an must hold the loop
 * var's range (the caller binds it). *out receives the replacement, or the
 * loop itself when it cannot be expressed in lanes; then *why (if not NULL)
 * says why, for TESSEL_DEBUG=lower. Nodes are built in a. Returns TS_ENOMEM
 * on allocation failure, else TS_OK. */
ts_status cg_vectorize_loop(ts_arena *a, ir_analyzer *an, ir_stmt *loop, ir_stmt **out,
                            const char **why);

/* Loop partitioning of guarded tails (lower_part.c): loops whose body
 * guards rows of an imperfect split become a main loop without the guards
 * and a tail loop with them. Returns body itself when nothing applies (or on
 * allocation failure: the guarded form is correct as it is). */
ir_stmt *cg_partition_tails(ts_arena *a, ir_stmt *body);

/* Converts an integer index expression (scalar or vector) to i64, folding
 * immediates. NULL on OOM. */
ir_expr *cg_as_i64(ts_arena *a, ir_expr *e);

#endif
